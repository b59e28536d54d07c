/* sd_round.h — the backend contract, part 2: ONE speculative round for a set of
 * sequences. Implementations: the host round (backends/cpu/sd_host_round.c: any
 * runners, logits on the host, the CPU reference sampler and verifier), the CUDA
 * device-resident round (backends/cuda/sd_cuda_round.cu: one sequence on standalone
 * runners; drafting, the verify pass and the fused verifier on the GPU, CUDA graphs, one
 * readback) and the CUDA batched device round (backends/cuda/sd_cuda_batch_round.cu,
 * "cuda-batch": many sequences on runners of CUDA groups, the scheduler's round there;
 * chains on the GPU with the logits kept on the device, trees / begin / settle through an
 * inner shared host round; every result bitwise the host round's). The generation loop
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
 * Sets and trees: run() takes n_seqs sequences, each with its own shape. The host
 * round runs any number up to its max_seqs (backends/cpu/sd_host_round.h: an engine's
 * round one, a shared round each sequence on its own runners): every forward of a
 * round is one batched forward over the sequences (core/sd_runner.h), and each
 * sequence's tokens are those it gets alone. Every sequence's status says whether its
 * round completed (run() returns the first failure). The CUDA device round decodes an
 * engine's one sequence and answers SPECDEC_ERR_UNSUPPORTED (nothing changed) for
 * n_seqs > 1. The batched device round runs any number up to its max_seqs like the
 * shared host round, with the same results and statuses (a sequence whose runners are
 * not of its groups: INVALID_ARGUMENT, nothing run). The host round runs trees
 * (docs/TREE.md): the draft grows the tree level by level (one draft tree-forward per
 * level, each node's processed q row kept), ONE target tree-forward scores the pending
 * token and every node, the tree verifier (kernels/cpu/sd_cpu_tree.h) accepts a
 * root-to-node path of n nodes and emits one more token, and both caches are compacted
 * to the accepted path (core/sd_runner.h "Trees"). The CUDA device round answers
 * SPECDEC_ERR_UNSUPPORTED (nothing changed) for a shape that is not a chain; the
 * generation loop then runs the rest of that call on the host round
 * (runtime/sd_generate.c). The batched device round hands tree-shaped sequences to its
 * inner host round within the same run(). A tree round must fit: 1 +
 * sd_draft_shape_nodes rows in the target's cache and one call (max_batch), which the
 * loop guarantees. n_drafted counts the tree's nodes. */
#ifndef SD_ROUND_H
#define SD_ROUND_H

#include <stdint.h>

#include "specdec.h"
#include "sd_error.h"
#include "sd_runner.h"
#include "sd_sample_rules.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most tokens one round emits per sequence: a full accepted path plus one. */
#define SD_ROUND_MAX_EMIT (SPECDEC_MAX_DRAFT + 1)

/* Most sequences one run() of a shared round takes (the host round's and the batched
 * device round's max_seqs). */
#define SD_ROUND_MAX_SEQS 256

/* The draft tree of one round: up to width[d] children per node at depth d + 1 (a
 * chain: all 1), depth levels; depth 0 = plain step. n_nodes == 0: the whole shape
 * (every node gets width[d] children, fewer only where the draft row has fewer
 * candidates); n_nodes > 0: a node budget, the tree grown best-first by draft path
 * probability inside the shape (docs/TREE.md). Trees hold at most
 * SPECDEC_MAX_TREE_NODES nodes (sd_draft_shape_nodes). */
typedef struct sd_draft_shape {
    int32_t depth;                     /* 0..SPECDEC_MAX_DRAFT */
    int32_t width[SPECDEC_MAX_DRAFT];  /* 1..SPECDEC_MAX_TREE_NODES for d < depth */
    int32_t n_nodes;                   /* 0 = the whole shape; else the best-first budget */
} sd_draft_shape;

/* A chain of gamma drafts (gamma 0: plain step). */
static inline sd_draft_shape sd_draft_chain(int32_t gamma) {
    sd_draft_shape s;
    s.depth = gamma;
    for (int32_t d = 0; d < SPECDEC_MAX_DRAFT; d++) s.width[d] = 1;
    s.n_nodes = 0;
    return s;
}
static inline int sd_draft_is_chain(const sd_draft_shape *s) {
    if (s->n_nodes > 0) return 0;
    for (int32_t d = 0; d < s->depth; d++)
        if (s->width[d] != 1) return 0;
    return 1;
}
/* Nodes of the shape: n_nodes when set, else the sum over d < depth of
 * width[0] * ... * width[d], saturated at INT32_MAX (invalid widths count as 0). */
static inline int64_t sd_draft_shape_nodes(const sd_draft_shape *s) {
    if (s->n_nodes > 0) return s->n_nodes;
    int64_t level = 1, total = 0;
    for (int32_t d = 0; d < s->depth && d < SPECDEC_MAX_DRAFT; d++) {
        level *= s->width[d] > 0 ? s->width[d] : 0;
        if (level > INT32_MAX) level = INT32_MAX;
        total += level;
        if (total > INT32_MAX) return INT32_MAX;
    }
    return total;
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
    /* the sequence's caches: runners of the round's models (a shared round, e.g. one
     * group per model, core/sd_runner.h); NULL: the round's own runners (an engine) */
    sd_runner *target, *draft;
    /* the sequence (owned by the loop): tokens[0..length), tokens[length-1] pending */
    const int32_t *tokens;
    int32_t length;
    /* this round's draft shape */
    sd_draft_shape shape;
    /* results of the last round */
    int32_t n_accepted;               /* accepted draft tokens (path length), 0..shape.depth */
    int32_t out[SD_ROUND_MAX_EMIT];   /* accepted drafts, then the emitted token */
    int32_t n_drafted;                /* draft tokens proposed (tree nodes) */
    sd_round_times t;
    specdec_status status;            /* OK once this sequence's round completed; else what
                                         failed (it must be begun again) */
} sd_round_seq;

typedef struct sd_round sd_round;

typedef struct sd_round_ops {
    const char *name;  /* "host", "cuda", "cuda-batch" */
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

/* A tree shape (not a chain) for sequence s on these runners: widths in
 * [1, SPECDEC_MAX_TREE_NODES], 1..SPECDEC_MAX_TREE_NODES nodes, and length + nodes rows
 * in both caches and one call each (the target also scores the pending token). Every
 * round checks its trees with it before anything runs; INVALID_ARGUMENT in eb (prefixed
 * by who) otherwise. *nodes_out (may be NULL): the tree's nodes. */
specdec_status sd_round_tree_check(const sd_round_seq *s, const sd_runner *target, const sd_runner *draft,
                                   const char *who, sd_errbuf *eb, int32_t *nodes_out);

static inline void sd_round_destroy(sd_round *rd) {
    if (rd) rd->ops->destroy(rd);
}

#ifdef __cplusplus
}
#endif

#endif
