/* sd_host_round_impl.h — private to the host round (sd_host_round.c: create, begin,
 * settle, waves, plain steps and chains; sd_host_tree.c: tree rounds).
 *
 * run() takes a set of sequences and processes them in WAVES: consecutive sequences
 * whose rows fit the round's buffers (target rows in p_rows, draft rows in q_rows, a
 * tree state each for trees). A wave does every stage for all its sequences together:
 * one batched draft forward per draft step / tree level, ONE batched target forward
 * (core/sd_runner.h sd_runner_forward_batch), then each sequence's verifier and
 * rollback. With runners of one group (the scheduler) the batched forwards share the
 * passes through the model; an engine's single sequence is a wave of one. */
#ifndef SD_HOST_ROUND_IMPL_H
#define SD_HOST_ROUND_IMPL_H

#include <stddef.h>

#include "sd_cpu_tree.h"
#include "sd_host_round.h"

/* A tree round's state (allocated per tree slot of the round). */
typedef struct sd_host_tree_state {
    sd_tree_pool pool;                     /* the draft's candidates */
    sd_tree tree;                          /* the tree the target scores */
    int32_t map[SD_RUNNER_TREE_MAX];       /* tree node -> pool entry */
    int32_t path[SPECDEC_MAX_DRAFT];       /* the accepted nodes */
    int32_t n_exp;                         /* nodes the draft expanded (its tree's size) */
    int32_t level_n;                       /* nodes forwarded at the current draft level */
    int32_t level[SPECDEC_MAX_TREE_NODES]; /* their pool entries */
} sd_host_tree_state;

/* One sequence's place in the current wave. */
typedef struct sd_host_slot {
    sd_round_seq *s;
    sd_runner *t, *d;          /* its caches (the round's own for an engine) */
    int32_t gamma;             /* chain drafts (0: plain step); trees: the shape's depth */
    int tree;                  /* a tree round */
    int32_t budget;            /* trees: nodes of the shape */
    int32_t n_p;               /* target rows of its verify pass */
    float *p;                  /* [n_p][V] in the round's p_rows */
    float *q;                  /* its draft rows in the round's q_rows */
    sd_host_tree_state *ts;    /* trees */
    int32_t vtok[SD_RUNNER_TREE_MAX]; /* verify-pass input: pending token, drafts / tree tokens */
    int32_t vpar[SD_RUNNER_TREE_MAX]; /* parents of a tree pass or draft level */
} sd_host_slot;

typedef struct sd_host_round {
    sd_round base;           /* must be first */
    sd_runner *t, *d;        /* an engine's runners (NULL for a shared round: every sequence brings its own) */
    int has_draft;
    int32_t V;
    float *p_rows;           /* [n_prows][V] target logits -> probabilities (and the draft's catch-up rows) */
    float *q_rows;           /* [n_qrows][V] the rows each draft token was drawn from */
    int32_t n_prows, n_qrows;
    void *scratch;           /* sampling scratch */
    size_t scratch_size;
    int32_t max_seqs;        /* sequences per run() */
    sd_host_slot *slots;     /* [max_seqs] */
    sd_runner_seg *segs;     /* [max_seqs] a batched forward's segments */
    int32_t *slot_of;        /* [max_seqs] segment -> slot */
    sd_host_tree_state *trees; /* [n_trees] */
    int32_t n_trees;
} sd_host_round;

double sd_host_now(void);
/* A failed batched forward: its detail goes to the round, DEVICE_LOST is sticky. */
specdec_status sd_host_batch_fail(sd_host_round *h, specdec_status st, const char *what, const sd_errbuf *eb);
/* Turn a logits row into the distribution sampled from (in place; GREEDY: nothing). */
specdec_status sd_host_process(sd_host_round *h, const sd_round_seq *s, float *row);
/* Run the n segments h->segs[0..n) as one batched forward. */
specdec_status sd_host_forward_segs(sd_host_round *h, int32_t n, const char *what);

/* Trees (sd_host_tree.c); the shapes were validated by the caller. */
specdec_status sd_host_tree_check(sd_host_round *h, sd_host_slot *sl);
/* After the catch-up put the root's row in sl->q: expand the root of every tree slot,
 * then grow the trees level by level (one batched draft forward per level). */
specdec_status sd_host_tree_grow(sd_host_round *h, sd_host_slot *const *tree_slots, int32_t n);
/* The tree's verify-pass segment input (tokens, parents) in sl->vtok / vpar; its size. */
int32_t sd_host_tree_pass(sd_host_slot *sl);
/* After the target pass: the verifier, then both caches keep the accepted path. */
specdec_status sd_host_tree_finish(sd_host_round *h, sd_host_slot *sl);

#endif
