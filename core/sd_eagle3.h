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

/* The proposal distribution over the target vocabulary from draft logits [Vd]: q[t] =
 * softmax(logits)[i] where t = d2t[i], 0 for every target id outside the draft vocabulary.
 * Computed in double (max-subtracted), written as float. q has V entries. Returns the target
 * id of the draft argmax (lowest draft id on ties). */
int32_t sd_eagle3_q(const sd_eagle3_weights *hw, const float *logits, float *q);

#ifdef __cplusplus
}
#endif

#endif
