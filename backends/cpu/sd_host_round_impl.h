/* sd_host_round_impl.h — private to the host round (sd_host_round.c: begin, plain
 * steps, chains, create; sd_host_tree.c: tree rounds). */
#ifndef SD_HOST_ROUND_IMPL_H
#define SD_HOST_ROUND_IMPL_H

#include <stddef.h>

#include "sd_cpu_tree.h"
#include "sd_host_round.h"

typedef struct sd_host_round {
    sd_round base;           /* must be first */
    sd_runner *t, *d;        /* borrowed; d may be NULL */
    int32_t V;
    float *p_rows;           /* [n_prows][V] target logits -> probabilities (also the draft's catch-up rows) */
    float *q_rows;           /* [n_qrows][V] the rows each draft token was drawn from (a tree: row 0 the
                                root's, row 1 + i the i-th node the draft expanded) */
    int32_t n_prows, n_qrows;
    int32_t *vtok;           /* [SD_RUNNER_TREE_MAX] verify-pass input: pending token, drafts */
    int32_t *vpar;           /* [SD_RUNNER_TREE_MAX] parents of a tree verify pass / draft level */
    void *scratch;           /* sampling scratch */
    size_t scratch_size;
    /* trees (allocated with a draft) */
    sd_tree_pool *pool;
    sd_tree *tree;
    int32_t n_exp;           /* nodes the draft expanded this round (its tree's size) */
} sd_host_round;

double sd_host_now(void);
specdec_status sd_host_forward(sd_host_round *h, sd_runner *r, const char *what, const int32_t *tokens, int32_t n,
                               int32_t pos, float *logits);
/* A runner failure: its detail goes to the round, DEVICE_LOST is sticky. */
specdec_status sd_host_runner_fail(sd_host_round *h, sd_runner *r, specdec_status st, const char *what);
/* Turn a logits row into the distribution sampled from (in place; GREEDY: nothing). */
specdec_status sd_host_process(sd_host_round *h, const sd_round_seq *s, float *row);
/* The draft catches up on tokens[its kv_len .. L); q_rows[0] = its processed last row. */
specdec_status sd_host_draft_catch_up(sd_host_round *h, sd_round_seq *s);
/* One tree round (sd_host_tree.c); the shape was validated by the caller. */
specdec_status sd_host_tree_round(sd_host_round *h, sd_round_seq *s);

#endif
