/* sd_round.h — the backend contract, part 2: ONE speculative round for a set of
 * sequences. Implementations: the host round (backends/cpu/sd_host_round.c: any
 * runners, logits on the host, the CPU reference sampler and verifier) and the CUDA
 * device-resident round (backends/cuda/sd_cuda_round.cu: drafting, the verify pass and
 * the fused verifier on the GPU, CUDA graphs, one readback). The generation loop
 * (runtime/sd_generate.c) is their only caller; it alone owns the budget, stop
 * strings, emission and statistics.
 *
 * A sequence (sd_round_seq) of length L holds tokens[0..L); tokens[L-1] is the pending
 * token, not yet in the target's cache. One round with draft shape `shape`:
 *   1. draft: the draft model catches up on what it has not seen, then proposes a
 *      tree of candidate tokens (a chain of γ is a tree with one child per node),
 *      keeping every processed row each token was sampled from;
 *   2. verify pass: ONE target forward over the pending token and every draft node;
 *   3. verifier (core/sd_sample_rules.h): accepts a path of n drafts and samples one
 *      more token t (residual, bonus, or the target's own token);
 *   4. out[0..n] = accepted drafts then t; both caches are rolled back to the accepted
 *      length (the target holds L + n tokens, t becomes the new pending token; the draft
 *      keeps what it saw of the accepted path).
 * shape.depth == 0 is a plain decoding step (the target alone emits one token, the
 * draft is not touched). The round never emits more than depth + 1 tokens; the loop
 * chooses depth so that they fit the budget and the context.
 *
 * Who owns what:
 *   - the sequence's tokens and length: the generation loop (it appends out[] after
 *     each round and passes the new length to the next round);
 *   - each model's KV length: its runner (core/sd_runner.h); the round reads it (the
 *     draft's lag behind the sequence is L - draft kv_len) and changes it only through
 *     the runner;
 *   - rows, draft buffers, device state, graphs: the round.
 *
 * Sets and trees: run() takes n_seqs sequences, each with its own shape. The current
 * implementations decode one sequence per engine and chains only; they answer
 * SPECDEC_ERR_UNSUPPORTED (nothing changed) for n_seqs > 1 or a shape with a width
 * above 1. Tree speculation and batching fill in exactly these two cases. */
#ifndef SD_ROUND_H
#define SD_ROUND_H

#include <stdint.h>

#include "specdec.h"
#include "sd_error.h"
#include "sd_sample_rules.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most tokens one round emits per sequence: a full accepted path plus one. */
#define SD_ROUND_MAX_EMIT (SPECDEC_MAX_DRAFT + 1)

/* The draft tree of one round: width[d] children per node at depth d + 1 (a chain:
 * all 1), depth levels. depth 0 = plain step. */
typedef struct sd_draft_shape {
    int32_t depth;                     /* 0..SPECDEC_MAX_DRAFT */
    int32_t width[SPECDEC_MAX_DRAFT];  /* >= 1 for d < depth */
} sd_draft_shape;

/* A chain of gamma drafts (gamma 0: plain step). */
static inline sd_draft_shape sd_draft_chain(int32_t gamma) {
    sd_draft_shape s;
    s.depth = gamma;
    for (int32_t d = 0; d < SPECDEC_MAX_DRAFT; d++) s.width[d] = 1;
    return s;
}
static inline int sd_draft_is_chain(const sd_draft_shape *s) {
    for (int32_t d = 0; d < s->depth; d++)
        if (s->width[d] != 1) return 0;
    return 1;
}

/* Seconds one round spent per stage (host wall time, or device time scaled to it). */
typedef struct sd_round_times {
    double draft;   /* draft catch-up, draft forwards and draft sampling */
    double target;  /* the verify pass */
    double verify;  /* target row processing, the verifier, the readback */
} sd_round_times;

/* One sequence in a round. The loop fills the first block once (begin) and `length`
 * and `shape` before every round; the round fills the results. */
typedef struct sd_round_seq {
    /* identity and sampling, fixed for the whole generation */
    uint64_t seed;
    uint64_t sequence_id;
    specdec_verify_mode mode;   /* REJECTION, GREEDY or MATCH (AUTO resolved) */
    sd_sampling_params sp;      /* checked by sd_sampling_check_params */
    int32_t uses_draft;         /* 0: plain steps only (the draft is neither prefilled nor run) */
    /* the sequence (owned by the loop): tokens[0..length), tokens[length-1] pending */
    const int32_t *tokens;
    int32_t length;
    /* this round's draft shape */
    sd_draft_shape shape;
    /* results of the last round */
    int32_t n_accepted;               /* accepted draft tokens, 0..shape.depth */
    int32_t out[SD_ROUND_MAX_EMIT];   /* accepted drafts, then the emitted token */
    int32_t n_drafted;                /* draft tokens proposed (tree nodes) */
    sd_round_times t;
} sd_round_seq;

typedef struct sd_round sd_round;

typedef struct sd_round_ops {
    const char *name;  /* "host", "cuda-graph", "cuda-stream" */
    /* Start a sequence: reset both caches and fill them with tokens[0..length-1) (the
     * prefill), so that tokens[length-1] is pending. */
    specdec_status (*begin)(sd_round *rd, sd_round_seq *s);
    /* One round for each of seqs[0..n_seqs) (see the top of this file). On failure the
     * status says what happened, the detail is in rd->err, and a sequence must be
     * begun again before its next round. */
    specdec_status (*run)(sd_round *rd, sd_round_seq *const *seqs, int32_t n_seqs);
    /* The loop emitted only tokens[0..length) of the last round (a stop inside it):
     * both caches give up what lies beyond, as if the round had emitted that much. */
    specdec_status (*settle)(sd_round *rd, sd_round_seq *s, int32_t length);
    void (*destroy)(sd_round *rd);
} sd_round_ops;

struct sd_round {
    const sd_round_ops *ops;
    sd_errbuf err;      /* detail of the last failure */
    int device_lost;    /* set on SPECDEC_ERR_DEVICE_LOST: the round is unusable */
};

static inline void sd_round_destroy(sd_round *rd) {
    if (rd) rd->ops->destroy(rd);
}

#ifdef __cplusplus
}
#endif

#endif
