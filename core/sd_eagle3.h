/* sd_eagle3.h — an EAGLE-3 draft head as backends see it: its configuration, its tensor views
 * and the checks that tie it to a target (docs/EAGLE3.md).
 *
 * An EAGLE-3 head is one Llama decoder layer whose q/k/v read [RMSNorm(embedding) ;
 * RMSNorm(hidden)] (width 2H), plus `fc` [H, 3·tH] that fuses three hidden states captured
 * from the target (the residual stream at the inputs of three target layers), a final norm,
 * an LM head over a draft vocabulary of Vd ids and a map d2t from draft ids to target ids.
 * Plain data like sd_weights: models/sd_eagle3_load.c fills it (views into the mapped file),
 * backends read it. Weights are nn.Linear layout in the checkpoint's dtype (F32/F16/BF16),
 * every view aligned to its element size. */
#ifndef SD_EAGLE3_H
#define SD_EAGLE3_H

#include <stdint.h>

#include "sd_error.h"
#include "sd_runner.h"
#include "sd_sample_rules.h"
#include "sd_weights.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SD_EAGLE3_N_AUX 3

typedef enum sd_eagle3_layout {
    SD_EAGLE3_FLAT = 0,        /* EAGLE / SpecForge / sglang: fc.weight, midlayer.*, flat config */
    SD_EAGLE3_SPECULATORS = 1  /* vLLM speculators: layers.0.*, transformer_layer_config */
} sd_eagle3_layout;

typedef struct sd_eagle3_config {
    /* The decoder layer as a Llama config: hidden_size H, heads, head_dim, intermediate F,
     * rms_norm_eps (every norm of the head), the head's own RoPE, vocab_size V = the target's
     * vocabulary (rows of an embedding, length of t2d); n_layers = 1; architecture = the
     * config's `architectures[0]` (or "Eagle3Speculator"). */
    sd_config layer;
    sd_eagle3_layout layout;
    int32_t target_hidden;        /* tH: width of each captured target state; fc in = 3·tH */
    int32_t draft_vocab;          /* Vd: rows of lm_head (<= V) */
    /* Captured states as hs indices (hs[0] = embeddings, hs[i] = input of target layer i,
     * hs[L] = last layer's output before the final norm), or all -1: the default rule
     * hs[2], hs[L/2], hs[L-3] of the target's L (sd_eagle3_aux_layers). */
    int32_t aux_ids[SD_EAGLE3_N_AUX];
    int32_t norm_before_residual; /* residual = RMSNorm(g; hidden_norm) instead of g */
    int32_t norm_output;          /* EAGLE-3.1: g_next = the post-final-norm state */
    int32_t norm_before_fc;       /* one RMSNorm (input_norm [3·tH]) over the concat before fc */
    int32_t fc_norm;              /* EAGLE-3.1: RMSNorm (fc_norm.i [tH]) on each captured state */
} sd_eagle3_config;

typedef struct sd_eagle3_weights {
    sd_eagle3_config cfg;
    sd_tensor fc;          /* [H, 3·tH]: columns (low, mid, high) capture */
    sd_tensor fc_bias;     /* [H] (sglang `bias: true`) or absent */
    sd_tensor fc_norm[SD_EAGLE3_N_AUX]; /* [tH] each when cfg.fc_norm, else absent */
    sd_tensor input_norm;  /* [3·tH] when cfg.norm_before_fc, else absent */
    sd_tensor embed;       /* [V, H] the head's own embed_tokens, or absent: the target's */
    sd_tensor in_norm;     /* [H] input_layernorm: on the token embedding */
    sd_tensor hidden_norm; /* [H] on the fused / recurrent hidden */
    sd_tensor wq;          /* [nH·hd, 2H] */
    sd_tensor wk;          /* [nKV·hd, 2H] */
    sd_tensor wv;          /* [nKV·hd, 2H] */
    sd_tensor wo;          /* [H, nH·hd] */
    sd_tensor post_norm;   /* [H] post_attention_layernorm */
    sd_tensor w_gate;      /* [F, H] */
    sd_tensor w_up;        /* [F, H] */
    sd_tensor w_down;      /* [H, F] */
    sd_tensor norm;        /* [H] final norm before lm_head */
    sd_tensor lm_head;     /* [Vd, H] */
    const int32_t *d2t;    /* [Vd] target id of each draft id (d2t[i] + i of the file), all
                              distinct and in [0, V); owned by whoever filled the struct */
    sd_dtype dtype;        /* dtype of the projection weights */
} sd_eagle3_weights;

/* Resolve the three captured hs indices for a target of `target_layers` layers: the explicit
 * ids of the config, or the default rule hs[2], hs[L/2], hs[L-3]. MODEL_MISMATCH when an id is
 * outside [0, L] or the ids are not three distinct increasing values (the default rule repeats
 * an index for L < 7: such a target needs a head with explicit ids), naming the ids and L. */
specdec_status sd_eagle3_aux_layers(const sd_eagle3_config *cfg, int32_t target_layers, int32_t out[SD_EAGLE3_N_AUX],
                                    sd_errbuf *eb);

/* Check a head against the target it drafts for: fc in-features 3·tH must equal 3 × the
 * target's hidden size (MODEL_MISMATCH naming both numbers), the vocabularies equal, a head
 * without its own embedding as wide as the target (it borrows the target's), the captured
 * ids inside the target (sd_eagle3_aux_layers). `what` prefixes messages (the head's dir). */
specdec_status sd_eagle3_check_target(const sd_eagle3_weights *hw, const sd_config *target, const char *what,
                                      sd_errbuf *eb);

/* Check the struct itself (what the loader guarantees; synthetic heads in tests go through
 * it too): the layer config (sd_config_validate), tH, Vd, every tensor present/absent as the
 * flags say, F32/F16/BF16, shaped as the config implies, d2t present. MODEL_MISMATCH naming
 * the tensor (FORMAT for config values). */
specdec_status sd_eagle3_validate(const sd_eagle3_weights *hw, const char *what, sd_errbuf *eb);

/* The checks of a head forward's step (both backends, nothing changed on failure): n in [1,
 * max_rows], n_cached + n <= n_ctx (else CONTEXT_FULL), tokens in [0, V), positions >= 0 and
 * < pos_limit (0: no limit), tree rows (parents set): n_shared in [0, n_cached], parents[i]
 * -1 or an earlier cache row (< n_cached + i). INVALID_ARGUMENT naming the value otherwise. */
specdec_status sd_eagle3_check_rows(int32_t n, int32_t max_rows, int32_t n_cached, int32_t n_ctx, int32_t V,
                                    int32_t pos_limit, const int32_t *tokens, const int32_t *pos,
                                    const int32_t *parents, int32_t n_shared, sd_errbuf *eb);

/* The proposal distribution over the target vocabulary from draft logits [Vd]: q[t] =
 * softmax(logits)[i] where t = d2t[i], 0 for every target id outside the draft vocabulary.
 * Computed in double (max-subtracted), written as float. q has V entries. Returns the target
 * id of the draft argmax (lowest draft id on ties). */
int32_t sd_eagle3_q(const sd_eagle3_weights *hw, const float *logits, float *q);

/* ------------------------------------------------------------------------- */
/* A head as a draft runner (core/sd_drafter_eagle3.c drafts with it)         */
/* ------------------------------------------------------------------------- */
/* A head runner is the draft runner (sd_round_seq.draft) of one sequence: the head's
 * draft KV cache (base.kv_len = its rows; the protocol rolls it back with
 * sd_runner_truncate; base.forward is refused: a head row needs a hidden state), the
 * TARGET runner whose hidden states it reads (borrowed; its group captures hs[aux_ids])
 * and the buffers the drafter works in. A backend (backends/cpu/sd_eagle3_cpu.c) creates
 * it and supplies the ops. Draft-cache row p holds (token t_{p+1}, g_p = fc(aux_p), RoPE
 * position p) for every verified position p (docs/EAGLE3.md §6-7). */
typedef struct sd_eagle3_runner sd_eagle3_runner;

/* What the head runners of one engine or scheduler share: the backend's read-only form of the
 * head's weights, made once before the runners (the CPU head: its F16/BF16 matrices widened to
 * F32, backends/cpu/sd_eagle3_cpu.h; the CUDA head: the device arena of weights and RoPE
 * tables, backends/cuda/sd_cuda_backend.h). A backend allocates its own struct with this one
 * first. Reference counted: creation returns one reference; each runner made over it takes
 * its own (sd_eagle3_runner.shared) and drops it when destroyed; the last drop frees it. The
 * count is not atomic: take and drop references on the thread that creates and frees the
 * engine or scheduler (the runners of one never run on two threads at once). */
typedef struct sd_eagle3_shared sd_eagle3_shared;
struct sd_eagle3_shared {
    const sd_eagle3_weights *hw;      /* borrowed: the loaded head; it must outlive the object */
    specdec_backend backend;          /* whose struct this is */
    int32_t refs;
    void (*free_fn)(sd_eagle3_shared *s); /* the backend's: frees what it made and s */
};
/* Take a reference (s NULL: no-op); returns s. */
sd_eagle3_shared *sd_eagle3_shared_ref(sd_eagle3_shared *s);
/* Drop a reference (NULL: no-op); the last one frees s. */
void sd_eagle3_shared_unref(sd_eagle3_shared *s);

typedef struct sd_eagle3_runner_ops {
    /* g[i] = fc(aux[i]) for i < n (aux [n, 3·tH] captured rows, g [n, H]); n <= rows. aux is
     * where the target's group captures (host memory for the CPU, device memory for a CUDA
     * head, which also takes host rows); g, and every buffer of step and q, is host memory. */
    specdec_status (*fuse)(sd_eagle3_runner *r, const float *aux, int32_t n, float *g);
    /* Append n rows (n <= rows) at cache rows base.kv_len .. +n-1 (the cache first cut to
     * base.kv_len): tokens [n] target ids, g [n, H], pos [n]; parents NULL = chain rows, else
     * tree rows over the shared prefix [0, n_shared) (backends/cpu/sd_eagle3_cpu.h).
     * logits [n, Vd] and g_next [n, H] (either NULL). base.kv_len grows by n. */
    specdec_status (*step)(sd_eagle3_runner *r, const int32_t *tokens, const float *g, const int32_t *pos, int32_t n,
                           const int32_t *parents, int32_t n_shared, float *logits, float *g_next);
    /* The proposal row q [V] (target vocabulary) from draft logits [Vd]: the logits placed at
     * their target ids (d2t), -inf elsewhere, then processed with sp exactly like the
     * target's rows (temperature, top-k, top-p, min-p: core/sd_sample_rules.h); greedy: the
     * plain softmax (only its argmax matters). */
    specdec_status (*q)(sd_eagle3_runner *r, const float *logits, const sd_sampling_params *sp, int greedy, float *q);
    void (*destroy)(sd_eagle3_runner *r);
} sd_eagle3_runner_ops;

struct sd_eagle3_runner {
    sd_runner base;                 /* must be first: n_vocab = V, n_ctx, max_batch = rows, kv_len */
    const sd_eagle3_runner_ops *ops;
    const sd_eagle3_weights *hw;    /* borrowed: the loaded head */
    sd_eagle3_shared *shared;       /* a reference to the weights the forward reads (set by the backend
                                       before sd_eagle3_runner_init; sd_eagle3_runner_fini drops it) */
    sd_runner *target;              /* borrowed: the runner whose states it reads */
    int32_t aux_ids[SD_EAGLE3_N_AUX]; /* the target's captured hs indices (resolved) */
    int32_t rows;                   /* rows of the buffers below (>= SD_RUNNER_TREE_MAX) */
    float *aux;                     /* [rows, 3 tH]: captured rows of the last target pass, in the target
                                       group's memory (sd_runner_seg.aux): host (CPU), device (CUDA) */
    int32_t aux_backend;            /* 1: the backend allocated aux (device memory) before
                                       sd_eagle3_runner_init and frees it; 0: init does (host) */
    float *g;                       /* [rows, H] fused features / inputs */
    float *gnext;                   /* [rows, H] g_next of the last step's rows */
    float *logits;                  /* [rows, Vd] */
    float *root;                    /* [Vd] draft logits of cache row kv_len - 1 (the next token's) */
    float *groot;                   /* [H] g_next of cache row kv_len - 1 */
    int32_t root_row;               /* the cache row root/groot belong to (-1: none) */
    /* What the drafter reads (set by sd_head_runner_init): an EAGLE-3 head's from hw; an MTP layer's
     * (hw NULL, backends/cpu/sd_mtp_cpu.h) from the target's configuration. */
    int32_t hid;                    /* H: floats of a g / g_next row */
    int32_t aux_w;                  /* floats of one captured row: 3 tH (EAGLE-3), H (MTP) */
    int32_t vd;                     /* draft vocabulary: floats of a logits row */
    const int32_t *d2t;             /* [vd] the target id of each draft id (borrowed) */
    int mtp;                        /* 1: an MTP layer's runner */
    int32_t *tok, *pos;             /* [rows] */
    void *work;                     /* the drafter's workspace (its trees; allocated once, freed here) */
    float *gmask;                   /* structured output: [V] a grammar state's mask, then [Vd] masked draft
                                       logits (the drafter allocates it on first use; freed here) */
};

/* The runners' vtable (forward refused with UNSUPPORTED, destroy through ops). */
extern const sd_runner_vtbl sd_eagle3_runner_vtbl;
/* r as a head runner, or NULL when it is another runner. */
sd_eagle3_runner *sd_eagle3_runner_of(sd_runner *r);
/* Fill the common part (the backend allocated r and set ops, hw, shared, and aux when aux_backend):
 * base fields, the target, the resolved capture ids, the host buffers of `rows` rows
 * (sd_alloc; aux too unless aux_backend); turns the target's
 * capture on (sd_runner_group_set_capture). Errors: the target captures nothing
 * (UNSUPPORTED), OUT_OF_MEMORY, the head does not fit it (sd_eagle3_check_target). */
specdec_status sd_eagle3_runner_init(sd_eagle3_runner *r, sd_runner *target, const sd_config *target_cfg,
                                     int32_t n_ctx, int32_t rows, sd_errbuf *eb);
/* The common part for any head (EAGLE-3 or MTP): the target's group captures hs[capture[0..n_capture))
 * (sd_runner_group_set_capture), V the target vocabulary, hid / aux_w / vd / d2t as the fields
 * above; buffers as sd_eagle3_runner_init. */
specdec_status sd_head_runner_init(sd_eagle3_runner *r, sd_runner *target, const int32_t *capture, int32_t n_capture,
                                   int32_t V, int32_t hid, int32_t aux_w, int32_t vd, const int32_t *d2t, int32_t n_ctx,
                                   int32_t rows, sd_errbuf *eb);
/* Free what sd_eagle3_runner_init allocated and drop the reference to `shared` (a backend whose
 * device work may still read the shared weights waits for it before calling this). */
void sd_eagle3_runner_fini(sd_eagle3_runner *r);

/* The "eagle3" drafter (core/sd_drafter_eagle3.c): chains and trees from a head runner; "mtp" is
 * the same over an MTP layer's runner (statistics report SPECDEC_DRAFT_MTP). */
struct sd_drafter;
struct sd_drafter *sd_drafter_eagle3(void);
struct sd_drafter *sd_drafter_mtp(void);

#ifdef __cplusplus
}
#endif

#endif
