/* sd_host_round_impl.h — private to the host executor (sd_host_round.c: create, the
 * draft primitives, the verify pass, the verifier; sd_host_tree.c: growing a runner
 * drafter's tree and its compaction).
 *
 * The protocol (core/sd_round.c) hands it WAVES of slots whose rows fit its buffers
 * (pack): target rows in p_rows, draft rows in q_rows, a tree pool each for a runner
 * drafter's tree. Every stage is one batched forward over the wave's slots
 * (core/sd_runner.h sd_runner_forward_batch); with runners of one group (the scheduler)
 * the batched forwards share the passes through the model. */
#ifndef SD_HOST_ROUND_IMPL_H
#define SD_HOST_ROUND_IMPL_H

#include <stddef.h>

#include "sd_cpu_tree.h"
#include "sd_host_round.h"

/* A runner drafter's tree under construction (one per tree slot of a wave). */
typedef struct sd_host_tree_state {
    sd_tree_pool pool;                     /* the draft's candidates */
    int32_t map[SD_RUNNER_TREE_MAX];       /* tree node -> pool entry */
    int32_t n_exp;                         /* nodes the draft expanded (its tree's size) */
    int32_t level_n;                       /* nodes forwarded at the current draft level */
    int32_t level[SPECDEC_MAX_TREE_NODES]; /* their pool entries */
} sd_host_tree_state;

typedef struct sd_host_exec {
    sd_exec base;            /* must be first */
    int has_draft;
    int32_t V;
    float *p_rows;           /* [n_prows][V] target logits -> probabilities (and the draft's catch-up rows) */
    float *q_rows;           /* [n_qrows][V] the rows each draft token was drawn from */
    int32_t n_prows, n_qrows;
    float *raw_rows;         /* [SD_RUNNER_TREE_MAX][V] one slot's raw target rows, kept for its
                                log-probabilities while p_rows are processed (docs/LOGPROBS.md);
                                NULL until the first sequence with logprobs outside greedy mode */
    void *scratch;           /* sampling scratch */
    size_t scratch_size;
    int32_t *proc_counts;    /* [V] logits processors' scratch (kernels/cpu/sd_cpu_logits_proc.h), kept zero */
    int32_t *proc_list;      /* [V] */
    int32_t max_seqs;        /* sequences per wave */
    sd_runner_seg *segs;     /* [max_seqs] a batched forward's segments */
    int32_t *slot_of;        /* [max_seqs] segment -> slot */
    sd_host_tree_state *trees; /* [n_trees] */
    int32_t n_trees;
} sd_host_exec;

/* A failed batched forward: its detail goes to the executor, DEVICE_LOST is sticky. */
specdec_status sd_host_batch_fail(sd_host_exec *h, specdec_status st, const char *what, const sd_errbuf *eb);
/* Turn a logits row into the distribution sampled from (in place; GREEDY: nothing). The
 * sequence's logits processors are not applied (a tree's draft rows). */
specdec_status sd_host_process(sd_host_exec *h, const sd_round_seq *s, float *row);
/* The same after the sequence's logits processors (s->proc; GREEDY: those only), for the row
 * of the token after tokens[0..length) and path[0..n_path) (the round's drafts before it). */
specdec_status sd_host_process_at(sd_host_exec *h, const sd_round_seq *s, float *row, const int32_t *path,
                                  int32_t n_path);
/* Run the n segments h->segs[0..n) as one batched forward. */
specdec_status sd_host_forward_segs(sd_host_exec *h, int32_t n, const char *what);

/* Runner-drafter trees (sd_host_tree.c; core/sd_round.h tree_grow / tree_keep). */
specdec_status sd_host_tree_grow(sd_exec *ex, sd_round_slot *const *xs, int32_t n);
specdec_status sd_host_tree_keep(sd_exec *ex, sd_round_slot *x);

#endif
