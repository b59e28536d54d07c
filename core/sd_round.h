/* sd_round.h — the backend contract, part 2: ONE speculative round for a set of
 * sequences. The round PROTOCOL is written once (core/sd_round.c); a backend supplies
 * an EXECUTOR (sd_exec below: its batched forwards, sampler and verifier) and a
 * sequence brings a DRAFTER (core/sd_drafter.h). Executors: the host executor
 * (backends/cpu/sd_host_round.c: any runners, logits on the host, the CPU reference
 * sampler and verifier, chains and trees), the CUDA device-resident executor
 * (backends/cuda/sd_cuda_round.cu: one sequence on standalone runners, the whole round
 * enqueued on the GPU and replayed from a CUDA graph, one readback) and the CUDA
 * batched executor (backends/cuda/sd_cuda_batch_round.cu, "cuda-batch": many sequences
 * on runners of CUDA groups, logits kept on the device). The generation driver
 * (runtime/sd_driver.c, for the engine and the scheduler alike) is the only caller; the
 * generation loop (runtime/sd_generate.c) alone owns the budget, stop strings,
 * emission and statistics.
 *
 * A sequence (sd_round_seq) of length L holds tokens[0..L); tokens[L-1] is the pending
 * token, not yet in the target's cache. One round (core/sd_round.c, in this order):
 *   0. plan: the sequence's drafter decides its proposal within the loop's shape
 *      (depth 0: nothing to propose, a plain step);
 *   1. draft: each drafter's compute for its sequences (a runner drafter catches up on
 *      what it has not seen, its LAG: 1 after a rejection or the prefill, 2 after a
 *      round that accepted everything; then proposes a chain or grows a tree, keeping
 *      the processed row each token was sampled from);
 *   2. verify pass: ONE target forward over the pending token and every draft node;
 *   3. verifier (core/sd_sample_rules.h): accepts a path of n drafts and samples one
 *      more token t (residual, bonus, or the target's own token);
 *   4. rollback: out[0..n] = accepted drafts then t; the target keeps L + n tokens (a
 *      tree: compacted to the accepted path), t becomes pending; the drafter observes
 *      the outcome and rolls its own state back.
 * Stage times come from the host clock around the stages, or from the executor (a
 * device round measures them with events). A device executor may replay a captured
 * graph of stages 1-3 (sd_exec_ops.wave_begin). A round never emits more than
 * depth + 1 tokens; the loop chooses the shape so that they fit the budget and the
 * context.
 *
 * Who owns what:
 *   - the sequence's tokens and length: the generation loop (it appends out[] after
 *     each round and passes the new length to the next round);
 *   - each model's KV length: its runner (core/sd_runner.h); the protocol and the
 *     drafters change it only through the runner (and sd_exec_ops.note_kv after
 *     device-side forwards);
 *   - rows, draft buffers, device state, graphs: the executor.
 *
 * Sets and trees: run() takes n_seqs sequences (1 .. max_seqs), each with its own
 * drafter and shape. Sequences the executor does not take (a tree on a CUDA executor)
 * go to the round's fallback executor (the host executor on the same runners) in the
 * same run(); the rest are run in WAVES of sequences whose rows fit the executor's
 * buffers, every forward of a wave one batched forward (core/sd_runner.h), each
 * sequence's tokens those it gets alone. Every sequence's status says whether its round
 * completed (run() returns the first failure). Trees (docs/TREE.md): a tree must fit: 1
 * + nodes rows in the target's cache and one call (max_batch), which the loop
 * guarantees (sd_round_tree_check refuses the whole run() otherwise, before anything
 * ran). n_drafted counts the proposal's nodes. */
#ifndef SD_ROUND_H
#define SD_ROUND_H

#include <stdint.h>

#include "specdec.h"
#include "sd_drafter.h"
#include "sd_error.h"
#include "sd_logprob.h"
#include "sd_logits_proc.h"
#include "sd_runner.h"
#include "sd_sample_rules.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most tokens one round emits per sequence: a full accepted path plus one. */
#define SD_ROUND_MAX_EMIT (SPECDEC_MAX_DRAFT + 1)

/* Most sequences one run() takes (a shared round's max_seqs). */
#define SD_ROUND_MAX_SEQS 256
/* Rows of the target's logits one prefill chunk computes for prompt log-probabilities
 * (sd_round_seq.prompt_rows): the round's buffer holds this many rows of V floats. */
#define SD_ROUND_PROMPT_ROWS 32

/* Where a prefill hands the target's raw logits of prompt positions (sd_round_seq.prompt_rows):
 * rows[i * n_vocab ..] is position first + i (the distribution of token first + i + 1). */
typedef void (*sd_round_prompt_fn)(void *ctx, const float *rows, int32_t n_vocab, int32_t first, int32_t n);

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
    double draft;   /* draft planning, catch-up, draft forwards and draft sampling */
    double target;  /* the verify pass */
    double verify;  /* target row processing, the verifier, the readback, the rollback */
} sd_round_times;

/* What a round proposed (filled when sd_round_seq.trace is set): node i (0-based, the
 * pending token excluded) has token[i] and parent[i] (-1: the pending token); a chain
 * has parent[i] = i - 1. The accepted path's nodes are path[0..n_accepted). */
typedef struct sd_round_trace {
    int32_t n;
    int32_t token[SPECDEC_MAX_TREE_NODES];
    int32_t parent[SPECDEC_MAX_TREE_NODES];
    int32_t path[SPECDEC_MAX_DRAFT];
} sd_round_trace;

/* One sequence in a round. The loop fills the first block once (begin) and `length`
 * and `shape` before every round; the round fills the results. */
struct sd_round_seq {
    /* identity and sampling, fixed for the whole generation */
    uint64_t seed;
    uint64_t sequence_id;
    specdec_verify_mode mode;   /* REJECTION, GREEDY or MATCH (AUTO resolved) */
    sd_sampling_params sp;      /* checked by sd_sampling_check_params */
    const sd_logits_proc *proc; /* NULL, or the logits processors applied to the target's rows (and
                                   a model drafter's chain rows) before sp, with each row's history
                                   (core/sd_logits_proc.h); a device executor leaves such a
                                   sequence to its fallback */
    sd_drafter *drafter;        /* who drafts (core/sd_drafter.h); NULL: plain steps only */
    int32_t ngram_min, ngram_max; /* the n-gram drafter's lookup (1 <= min <= max <= SD_NGRAM_MAX) */
    sd_ngram_state *ngram;      /* the n-gram drafter's evidence and cost (sd_drafter.h), owned
                                   by the loop; NULL: every match is proposed */
    sd_ngram_corpus *corpus;    /* the n-gram drafter's cross-request corpus (sd_drafter.h), searched after
                                   the sequence; NULL: none */
    /* the sequence's caches: runners of the round's models (a shared round, e.g. one
     * group per model, core/sd_runner.h); NULL: the round's own runners (an engine) */
    sd_runner *target, *draft;
    /* the sequence (owned by the loop): tokens[0..length), tokens[length-1] pending */
    const int32_t *tokens;
    int32_t length;
    /* this round's draft shape: the most the drafter may propose */
    sd_draft_shape shape;
    sd_round_trace *trace;      /* NULL, or where the round writes what it proposed */
    /* log-probabilities (docs/LOGPROBS.md): 1 = the executor fills lp[0..n_accepted] from
     * the target's raw rows (a device executor leaves such a sequence to its fallback) */
    int32_t logprobs;
    int32_t top_logprobs;       /* 0..SPECDEC_MAX_TOP_LOGPROBS */
    /* prompt log-probabilities (docs/LOGPROBS.md "Prompt tokens"): with prompt_rows set, begin
     * computes the target's logits of positions 0..length-2 while it prefills (in chunks of at
     * most SD_ROUND_PROMPT_ROWS rows, into the round's buffer) and hands each chunk, in order,
     * to prompt_rows(prompt_ctx, ...); a drafter that prefills the target itself
     * (SD_DRAFTER_TARGET_HIDDEN) does the same with prompt_buf, which begin sets for the
     * duration of its call (NULL otherwise) */
    sd_round_prompt_fn prompt_rows;
    void *prompt_ctx;
    float *prompt_buf;
    /* prefix cache (core/sd_runner.h "Prefix cache"): 1 = begin takes the cached rows of the
     * prompt's prefix from the runners' pools (the target's unless prompt_rows is set or the
     * drafter reads the target's hidden states; a model drafter's) and publishes the rows it
     * computed; prefix_queried / prefix_hit: the target's prompt rows begin looked up / took */
    int32_t prefix_cache;
    int32_t prefix_queried, prefix_hit;
    uint64_t prefix_salt;       /* rows are shared only between sequences of equal salt (cache_salt) */
    /* results of the last round */
    int32_t depth;                    /* the depth the round ran (<= shape.depth; 0: a plain step) */
    int32_t n_accepted;               /* accepted draft tokens (path length), 0..depth */
    int32_t out[SD_ROUND_MAX_EMIT];   /* accepted drafts, then the emitted token */
    sd_logprob lp[SD_ROUND_MAX_EMIT]; /* with logprobs: out[i]'s record (row: the verify pass's
                                         row of out[i]'s position) */
    int32_t n_drafted;                /* draft tokens proposed (tree nodes) */
    int32_t n_forced;                 /* of them, proposed because the grammar allowed nothing else */
    sd_round_times t;
    specdec_status status;            /* OK once this sequence's round completed; else what
                                         failed (it must be begun again) */
};

/* One sequence's place in a wave: what the protocol, its drafter and the executor
 * share during one run(). */
struct sd_round_slot {
    sd_round_seq *s;
    sd_runner *t, *d;           /* its target, and its drafter's runner (NULL: none) */
    sd_drafter *dr;             /* NULL: a plain step */
    sd_exec *ex;                /* the executor running it */
    int32_t j;                  /* its index in the wave (set by pack) */
    /* the plan */
    int32_t depth;              /* the proposal's depth (0: a plain step) */
    int tree;                   /* 1: the proposal is a tree (tr, or grown by the executor) */
    int32_t budget;             /* a runner drafter's tree: nodes of its shape */
    int32_t lag;                /* a runner drafter: tokens[L - lag .. L) its runner has not seen */
    int det;                    /* q one-hot on every proposed token (no q rows) */
    int32_t n_forced;           /* the last n_forced tokens of the chain are the grammar's only choice
                                   (jump-forward, core/sd_round.c round_grammar_forced) */
    float *aux;                 /* NULL, or (a SD_DRAFTER_TARGET_HIDDEN drafter's plan) where the verify
                                   pass captures the target's hidden states of its rows
                                   (sd_runner_seg.aux, in the target group's memory) */
    /* the proposal: a chain in vtok[1..depth] (vtok[0] = the pending token, the verify
     * pass's input), a tree in tr (node 0 = the pending token) */
    int32_t vtok[SD_RUNNER_TREE_MAX];
    int32_t vpar[SD_RUNNER_TREE_MAX];
    sd_tree tr;
    /* the executor's rows of this slot (host or device memory, its business) */
    float *p, *q;
    void *xstate;               /* the executor's per-slot state (e.g. a tree pool) */
    /* the outcome: the accepted tree nodes (tree node ids, root-first) */
    int32_t path[SPECDEC_MAX_DRAFT];
};

/* An executor: how one backend runs the protocol's stages for a wave of slots. Every
 * op reports failures in ex->err (DEVICE_LOST sets ex->device_lost). Ops marked
 * (device) may enqueue work that completes only in wave_end. */
typedef struct sd_exec_ops {
    const char *name; /* "host", "cuda", "cuda-batch" */
    /* 1: the executor runs slot x this round; 0: the round's fallback executor does
     * (NULL: every slot). */
    int (*accepts)(sd_exec *ex, const sd_round_slot *x);
    /* INVALID_ARGUMENT (detail in ex->err) unless slot x, planned, can run here (its
     * rows fit one wave, its runners are the executor's). NULL: every slot can. */
    specdec_status (*check)(sd_exec *ex, const sd_round_slot *x);
    /* The sequence's device state, if any, no longer matches its caches (begin, settle). */
    void (*invalidate)(sd_exec *ex, const sd_round_seq *s);
    /* How many of xs[0..n) (checked and planned) form the next wave, from xs[0] on;
     * lays out their rows (x->p, x->q, x->xstate, x->j). May reorder xs first. */
    int32_t (*pack)(sd_exec *ex, sd_round_slot **xs, int32_t n);
    /* Start the wave. *replayed = 1: a captured graph of stages 1-3 was launched (the
     * protocol goes on with wave_end); 0: the protocol calls the stages (a device
     * executor may be capturing them). NULL: nothing to start. */
    specdec_status (*wave_begin)(sd_exec *ex, sd_round_slot *const *xs, int32_t k, int *replayed);
    /* Draft primitives for runner drafters (core/sd_drafter_model.c), xs a subset of
     * the wave in wave order. draft_forward(step): step 0 the catch-up (x->lag tokens
     * at L - lag), step i > 0 the draft token x_i at L + i - 1; the last row's logits
     * become q row `step` (processed where the executor processes). draft_sample(step):
     * x_{step+1} drawn from q row step at position L + step (core/sd_sample_rules.h),
     * into the verify pass's input. (device) */
    specdec_status (*draft_forward)(sd_exec *ex, sd_round_slot *const *xs, int32_t n, int32_t step);
    specdec_status (*draft_sample)(sd_exec *ex, sd_round_slot *const *xs, int32_t n, int32_t step);
    /* Runner-drafter trees after the catch-up (q row 0): grow them level by level and
     * leave each finished tree in x->tr; tree_keep: after the verifier, the draft runner
     * keeps the longest prefix of the accepted path it forwarded. NULL: no trees. */
    specdec_status (*tree_grow)(sd_exec *ex, sd_round_slot *const *xs, int32_t n);
    specdec_status (*tree_keep)(sd_exec *ex, sd_round_slot *x);
    /* ONE batched target forward over every slot's pending token and proposal (chain:
     * vtok[0..depth] at L - 1, tree: tr). (device) */
    specdec_status (*verify_pass)(sd_exec *ex, sd_round_slot *const *xs, int32_t k);
    /* Process the target rows and run the verifier (dense q rows, or x->det): x->s->out,
     * n_accepted, and x->path for trees. (device) */
    specdec_status (*verify)(sd_exec *ex, sd_round_slot *const *xs, int32_t k);
    /* Finish the wave: end a capture and launch, read the results back into every
     * slot's s->out / n_accepted. *timed = 1: the executor wrote each s->t itself.
     * NULL: nothing to finish. */
    specdec_status (*wave_end)(sd_exec *ex, sd_round_slot *const *xs, int32_t k, int *timed);
    /* Runner r's cache holds len rows after device-side forwards (NULL: forwards on the
     * host already set kv_len). */
    void (*note_kv)(sd_exec *ex, sd_runner *r, int32_t len);
    void (*destroy)(sd_exec *ex);
} sd_exec_ops;

struct sd_exec {
    const sd_exec_ops *ops;
    sd_errbuf err;   /* detail of the last failure */
    int device_lost; /* set on SPECDEC_ERR_DEVICE_LOST: the executor is unusable */
};

static inline void sd_exec_destroy(sd_exec *ex) {
    if (ex) ex->ops->destroy(ex);
}

/* The protocol object (core/sd_round.c). */
typedef struct sd_round sd_round;

/* A round over executor ex (the fallback fb, may be NULL, takes what ex does not
 * accept), both borrowed. t, d: an engine's own runners (sequences whose target is
 * NULL use them), or NULL for a shared round. max_seqs: 1 .. SD_ROUND_MAX_SEQS. */
specdec_status sd_round_create(sd_exec *ex, sd_exec *fb, sd_runner *t, sd_runner *d, int32_t max_seqs,
                               sd_round **out, sd_errbuf *eb);
/* Switch executors (an engine's test hook: host or device); both borrowed. */
void sd_round_set_exec(sd_round *rd, sd_exec *ex, sd_exec *fb);
/* Start a sequence: reset its caches and fill them with tokens[0..length-1) (the
 * prefill, the target's and its drafter's), so that tokens[length-1] is pending. With
 * s->prompt_rows set, the target's logits of those positions go to it (OUT_OF_MEMORY if
 * the round's chunk buffer, SD_ROUND_PROMPT_ROWS x V floats, cannot be allocated). */
specdec_status sd_round_begin(sd_round *rd, sd_round_seq *s);
/* The same in steps (the scheduler's chunked prefill, docs/BATCHING.md): first = 1 on the
 * first call (caches reset, cached rows taken); each call prefills at most `budget` more
 * target rows (budget <= 0: all), so other sequences' rounds can run between calls (the
 * sequence must not run a round until *done); *done = 1 once the target's prefill is
 * complete and the drafter has begun (a draft model prefills whole in that last call).
 * Sequences with prompt_rows or a drafter reading the target's hidden states prefill in
 * their first call whatever the budget. A failure is final (begin again from first). */
specdec_status sd_round_begin_step(sd_round *rd, sd_round_seq *s, int first, int32_t budget, int *done);
/* One round for each of seqs[0..n_seqs) (see the top of this file). On failure the
 * status says what happened, the detail is in sd_round_err(rd), and a sequence must be
 * begun again before its next round. */
specdec_status sd_round_run(sd_round *rd, sd_round_seq *const *seqs, int32_t n_seqs);
/* The loop emitted only tokens[0..length) of the last round (a stop inside it): the
 * caches give up what lies beyond, as if the round had emitted that much. */
specdec_status sd_round_settle(sd_round *rd, sd_round_seq *s, int32_t length);
/* The detail of the last failure; whether a device was lost (every later call fails). */
const char *sd_round_err(const sd_round *rd);
int sd_round_device_lost(const sd_round *rd);
/* The executor that ran the last run() (tests). */
const char *sd_round_exec_name(const sd_round *rd);
void sd_round_destroy(sd_round *rd);

/* A tree proposal (not a chain) for sequence s: widths in [1, SPECDEC_MAX_TREE_NODES],
 * 1..SPECDEC_MAX_TREE_NODES nodes, and length + nodes rows in the target's cache (and
 * the draft runner's, when there is one) and one call each (the target also scores the
 * pending token). The protocol checks every tree with it before anything runs;
 * INVALID_ARGUMENT in eb (prefixed by who) otherwise. *nodes_out (may be NULL): the
 * tree's nodes. */
specdec_status sd_round_tree_check(const sd_round_seq *s, const sd_runner *target, const sd_runner *draft,
                                   const char *who, sd_errbuf *eb, int32_t *nodes_out);

#ifdef __cplusplus
}
#endif

#endif
