/* sd_drafter.h — the backend contract, part 3: a DRAFTER proposes the draft tokens of a
 * round (docs/DRAFTERS.md, docs/ARCHITECTURE.md "One round, end to end"). The round
 * protocol (core/sd_round.c) calls it; an executor (core/sd_round.h: a backend's
 * batched forwards, sampler and verifier) runs what it proposes.
 *
 * A drafter serves a SET of sequences (each its own sd_round_slot, several per call,
 * so that its work is batched across them) and keeps no state of its own per sequence
 * beyond what lives in the sequence's caches (a runner drafter's runner, s->draft).
 * Per round, for every sequence that drafts with it:
 *   plan(x)     host only, cheap, every round before anything is enqueued: decide the
 *               proposal's size (x->depth, x->tree) within the loop's shape s->shape,
 *               and, for a host drafter, the proposal itself (x->vtok / x->tr). depth 0:
 *               nothing to propose, the sequence takes a plain step (no verify
 *               overhead). Never touches a device.
 *   draft(xs)   the drafting compute, batched over xs (a runner drafter: the catch-up
 *               and the draft forwards and sampling, through the executor's draft
 *               primitives). It may be enqueued on a device and captured into a CUDA
 *               graph with the rest of the round: it depends only on what plan() decided
 *               and on device state. NULL: nothing to compute.
 *   observe(xs) after the verifier: x->s->n_accepted and the accepted path x->path;
 *               the drafter rolls its own state back to the accepted path (a runner
 *               drafter: its runner's cache). NULL: nothing to do.
 * and once per sequence begin(s) (after the target's prefill: e.g. prefill the draft
 * runner) and settle(s, length) (a stop cut the round: keep tokens[0..length-1)).
 *
 * q, the distribution each draft token was drawn from (the verifier must use exactly
 * it): dense processed rows kept by the executor (x->q: a runner drafter's sampler puts
 * them there), or DETERMINISTIC (x->det = 1): q is one-hot on the proposed token, no row
 * exists anywhere, and the verifier takes the flag instead (docs/DRAFTERS.md proves the
 * rules exact in all three verify modes).
 *
 * Drafters shipped: "model" (core/sd_drafter_model.c: a draft model's runner, dense q,
 * chains and trees) and "ngram" (core/sd_ngram.c: prompt lookup over the sequence,
 * deterministic, chains and trees) and "eagle3" (core/sd_drafter_eagle3.c: an EAGLE-3
 * head runner, a runner drafter that also sets SD_DRAFTER_TARGET_HIDDEN: the verify pass
 * captures the target's hidden states into x->aux for observe(); chains, dense q). */
#ifndef SD_DRAFTER_H
#define SD_DRAFTER_H

#include <stdint.h>

#include "specdec.h"
#include "sd_error.h"
#include "sd_runner.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A finished draft tree, the proposal the target scores: node 0 is the root (the
 * pending token), nodes in breadth-first order, the children of a node contiguous
 * (child0 .. child0 + n_child - 1) in sibling order. */
typedef struct sd_tree {
    int32_t n;                               /* nodes, root included: 1 .. SD_RUNNER_TREE_MAX */
    int32_t token[SD_RUNNER_TREE_MAX];
    int32_t parent[SD_RUNNER_TREE_MAX];      /* root: -1; else < own index */
    int32_t depth[SD_RUNNER_TREE_MAX];       /* root: 0 */
    int32_t child0[SD_RUNNER_TREE_MAX];
    int32_t n_child[SD_RUNNER_TREE_MAX];
    int32_t qrow[SD_RUNNER_TREE_MAX];        /* row of q the children were drawn from; -1: none */
    uint8_t sampled[SD_RUNNER_TREE_MAX];     /* 1: child 0 was sampled from q (REJECTION rule); 0: every
                                                child is deterministic (q one-hot on it) */
} sd_tree;

typedef struct sd_round_seq sd_round_seq;   /* core/sd_round.h */
typedef struct sd_round_slot sd_round_slot; /* core/sd_round.h */
typedef struct sd_exec sd_exec;             /* core/sd_round.h */
typedef struct sd_drafter sd_drafter;

/* Capabilities (sd_drafter_ops.caps). */
#define SD_DRAFTER_RUNNER 1u        /* drafts with the sequence's draft runner (s->draft), whose cache
                                       the protocol checks and the drafter rolls back */
#define SD_DRAFTER_DETERMINISTIC 2u /* every proposal has q one-hot on its tokens (x->det) */
#define SD_DRAFTER_TARGET_HIDDEN 4u /* needs the target's hidden states of the verified rows (EAGLE-3):
                                       its begin() prefills the target itself (capturing), its
                                       plan() sets x->aux, where the verify pass captures */

typedef struct sd_drafter_ops {
    const char *name;            /* "model", "ngram" */
    specdec_draft_method method; /* what statistics report */
    unsigned caps;
    /* s begins (its target is prefilled); d: its draft runner (NULL unless SD_DRAFTER_RUNNER) */
    specdec_status (*begin)(sd_drafter *dr, sd_runner *d, const sd_round_seq *s, sd_errbuf *eb);
    specdec_status (*plan)(sd_drafter *dr, sd_round_slot *x, sd_errbuf *eb);
    specdec_status (*draft)(sd_drafter *dr, sd_exec *ex, sd_round_slot *const *xs, int32_t n, sd_errbuf *eb);
    specdec_status (*observe)(sd_drafter *dr, sd_exec *ex, sd_round_slot *const *xs, int32_t n, sd_errbuf *eb);
    specdec_status (*settle)(sd_drafter *dr, sd_runner *d, const sd_round_seq *s, int32_t length, sd_errbuf *eb);
    void (*destroy)(sd_drafter *dr); /* NULL: a static drafter */
} sd_drafter_ops;

struct sd_drafter {
    const sd_drafter_ops *ops;
};

/* The drafters shipped (static objects: nothing to create or free). */
sd_drafter *sd_drafter_model(void);
sd_drafter *sd_drafter_ngram(void);

static inline void sd_drafter_destroy(sd_drafter *dr) {
    if (dr && dr->ops->destroy) dr->ops->destroy(dr);
}

/* n-gram lookup limits (specdec_generate_params ngram_min / ngram_max). */
#define SD_NGRAM_MAX 64

/* The n-gram drafter's evidence and cost model, per sequence (docs/DRAFTERS.md "When to
 * propose"): owned by the generation loop (sd_round_seq.ngram; NULL: every match is
 * proposed, nothing learnt), which sets the gate and the cost before every round; the
 * drafter's plan() ages the evidence and reads it, observe() adds the round's outcome.
 * Evidence per matched suffix length n, in bucket min(n, SD_NGRAM_BUCKETS) - 1. */
#define SD_NGRAM_BUCKETS 8
typedef struct sd_ngram_state {
    int gate;                          /* 1: propose only what pays (below); 0: every match */
    double c0, c1;                     /* a round whose target pass verifies t tokens costs
                                          c0 + c1 * t (any unit; c1 >= 0, c0 + c1 > 0) */
    double acc[SD_NGRAM_BUCKETS];      /* decayed counts of accepted draft tokens */
    double rej[SD_NGRAM_BUCKETS];      /* decayed counts of rejections */
    int8_t bucket[SD_RUNNER_TREE_MAX]; /* the last plan's: the bucket of draft node i (1-based;
                                          a chain's node i is draft token i) */
} sd_ngram_state;

/* The n-gram drafter's cross-request corpus (core/sd_ngram_corpus.c; docs/DRAFTERS.md "Across
 * requests"): finished generations' tokens, searched after the sequence itself. Thread-safe. */
typedef struct sd_ngram_corpus sd_ngram_corpus;
#define SD_NGRAM_CORPUS_MAX_ENTRIES 65536
/* A match in the corpus: the suffix length n it shares with the sequence, and the len tokens that followed it
 * there (copied out: the corpus may change after the scan). */
typedef struct sd_ngram_found {
    int32_t n, len;
    int32_t tok[SPECDEC_MAX_DRAFT];
} sd_ngram_found;
/* A corpus of at most cap_tokens tokens (1 .. SPECDEC_MAX_NGRAM_CORPUS_TOKENS). */
specdec_status sd_ngram_corpus_create(int64_t cap_tokens, sd_ngram_corpus **out, sd_errbuf *eb);
void sd_ngram_corpus_free(sd_ngram_corpus *c); /* NULL: no-op */
/* A finished generation tokens[0..n) (its prompt tokens[0..n_prompt)): its output, with the last SD_NGRAM_MAX
 * prompt tokens in front, becomes the newest entry (the oldest ones evicted to make room; an entry longer than
 * the corpus keeps its newest tokens). Nothing generated, or out of memory: nothing added. */
void sd_ngram_corpus_add(sd_ngram_corpus *c, const int32_t *tokens, int32_t n_prompt, int32_t n);
/* The best matches of the suffix of tokens[0..L) (n = nmax .. nmin tokens, n <= L) in the corpus, with up to
 * depth (<= SPECDEC_MAX_DRAFT) tokens of what followed each, into found[0..cap): ranked by n descending, then
 * newest first. Returns how many. By the corpus's index: the cost follows the matches, not the corpus. */
int32_t sd_ngram_corpus_scan(sd_ngram_corpus *c, const int32_t *tokens, int32_t L, int32_t nmin, int32_t nmax,
                             int32_t depth, int32_t cap, sd_ngram_found *found);
/* The same ranking by a scan of every token (the index's reference: tests, the benchmark). */
int32_t sd_ngram_corpus_scan_linear(sd_ngram_corpus *c, const int32_t *tokens, int32_t L, int32_t nmin, int32_t nmax,
                                    int32_t depth, int32_t cap, sd_ngram_found *found);
/* What the corpus holds (any pointer may be NULL). */
void sd_ngram_corpus_stats(sd_ngram_corpus *c, int32_t *n_entries, int64_t *n_tokens, int64_t *n_added);

/* The n-gram proposal for tokens[0..length): the most recent earlier occurrence of the
 * longest suffix of n = ngram_max .. ngram_min tokens (n < length), then the tokens
 * that followed it, at most max_tokens of them, into out; returns how many (0: no
 * match). Exposed for tests and the benchmark. */
int32_t sd_ngram_chain(const int32_t *tokens, int32_t length, int32_t ngram_min, int32_t ngram_max,
                       int32_t max_tokens, int32_t *out);

#ifdef __cplusplus
}
#endif

#endif
