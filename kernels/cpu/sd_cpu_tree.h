/* sd_cpu_tree.h — the CPU reference of tree speculation's host-side logic
 * (docs/TREE.md): which tokens become a node's children, the best-first selection of
 * a node budget, the finished tree, and the tree verifier.
 *
 * Children of a node X with draft row q_X (processed probabilities; raw logits in
 * GREEDY) for the tokens at absolute position pos:
 *   MATCH    the tokens whose q_X-CDF intervals lie nearest to the target's SAMPLE
 *            uniform u at pos, ranked by the mass a kernel around u puts on them
 *            (sd_tree_match_children below): the coupled sample (the interval holding
 *            u) and its neighbours in the inverse CDF's walk order. The verifier
 *            compares every child with the same target sample, so any choice is exact.
 *   REJECTION, GREEDY:
 *   child 0  the draft's own sample: REJECTION on a fixed shape the draft sample (DRAFT
 *            uniform at pos), GREEDY the argmax; it is "sampled" (REJECTION verifies
 *            it with the q_X it was drawn from). REJECTION with a node budget has no
 *            sampled child: every child is deterministic (see docs/TREE.md: a
 *            data-dependent shape would bias a sampled child); REJECTION never looks at
 *            the target's uniforms to choose children;
 *   then     the next most probable distinct tokens of q_X (value descending, id
 *            ascending, only tokens with q > 0 — finite logits in GREEDY).
 * Scores (best-first): each child gets an acceptance estimate a in [0, 1] (the caller's:
 * backends/cpu/sd_host_tree.c, docs/TREE.md "Scores"); a node's score is the product
 * along its path with a sibling rule, score(child k) = score(X) * min_{j<=k} a(child j),
 * so that scores never increase along a path or along the sibling order; the top-B
 * entries by (score descending, creation order) are therefore closed under "parent"
 * and "earlier sibling", which makes them a tree with contiguous children.
 *
 * Verification at a node X at depth d (position pos0 + d), u = the round's uniforms
 * (kernels/cpu/sd_cpu_verify.h: accept[d], sample[d] of position pos0 + d):
 *   GREEDY   t = argmax p_X;                      descend into the child equal to t, else emit t
 *   MATCH    t = inverse CDF of p_X with sample[d]; the same
 *   REJECTION (X with children): if the first child c is sampled, accept it iff
 *            sd_rule_accept(accept[d], p_X(c), q_X(c)) and descend; on rejection the
 *            residual r = max(0, p_X - q_X) (no sampled child: r = p_X). Then t = the
 *            inverse CDF of norm(r) with sample[d] (r without mass: p_X); descend into
 *            the deterministic child equal to t, else emit t. This is multi-draft
 *            recursive rejection sampling with the deterministic children verified
 *            without replacement — each as a draft of one-hot q, accepted with
 *            probability r(c) / sum(r), removed on rejection — drawn with one uniform
 *            (docs/TREE.md proves the equivalence). A leaf: the bonus token, inverse CDF
 *            of p_X with sample[d].
 * A chain (one sampled child per node) verifies exactly as sd_verify does, decision for
 * decision. */
#ifndef SD_CPU_TREE_H
#define SD_CPU_TREE_H

#include <stdint.h>

#include "specdec.h"
#include "sd_cpu_verify.h"
#include "sd_drafter.h"
#include "sd_error.h"
#include "sd_runner.h"

/* sd_tree, the finished draft tree (node 0 = the root, breadth-first, children
 * contiguous), is the drafters' proposal type: core/sd_drafter.h. */

/* The k best tokens of row x (value descending, id ascending) with x > floor, without
 * `skip` (-1: none), into out[0..k); returns how many (fewer when fewer qualify). O(V k)
 * worst case, O(V) when the row is not adversarial. */
int32_t sd_tree_top_tokens(const float *x, int32_t n_vocab, float floor, int32_t k, int32_t skip, int32_t *out);

/* MATCH-mode children of a processed draft row q when the target samples position pos
 * with the SAMPLE uniform u (docs/TREE.md "Children of a node"). In the q-CDF (tokens
 * with q > 0 in id order, the order the inverse CDF walks) token y owns the interval
 * [lo_y, hi_y) of [0, 1]; the target's token is the one whose p-interval holds u, and
 * p's CDF is q's shifted by an unknown amount. Modelling that shift as Laplace with
 * scale s = s0 sqrt(u (1 - u)) (zero at both ends, where the two CDFs agree), the
 * estimate of y is the kernel's mass on y's interval,
 *     m(y) = (G(hi_y - u) - G(lo_y - u)) / (G(1 - u) - G(-u)),  G = the Laplace CDF,
 * which is largest for the coupled sample (the interval holding u, when u is not too
 * close to its edge), then falls off with the distance from u to the interval. Out:
 * the k tokens of largest m (ties: the smaller distance from u to the interval, then
 * the lower id) in that order, m in est[i] (may be NULL); returns how many (fewer when
 * fewer tokens have q > 0; 0 when none, k <= 0 or q / out NULL; k is capped at
 * SPECDEC_MAX_TREE_NODES). u is clamped to [0, 1] (NaN: 0); s0 > 0 (otherwise, and at
 * u = 0 or 1, the kernel is a point: m = 1 for the interval holding u). The intervals
 * are the fixed-point prefix sums of the inverse CDF (sd_rule_prob_mass) over their
 * total, exponentials sd_rule_exp. Deterministic in (q, u, s0), O(V k) worst case, no
 * allocation. */
int32_t sd_tree_match_children(const float *q, int32_t n_vocab, double u, double s0, int32_t k, int32_t *out,
                               double *est);

/* s0 of the MATCH kernel, fitted on the bundled pair (docs/TREE.md "Scores"). */
#define SD_TREE_MATCH_S0 0.2

/* Candidate pool of a best-first tree: every child generated so far. Entry 0 is the
 * root. Entries are appended per expanded node, so the pool is depth-ordered. */
#define SD_TREE_POOL_MAX (1 + SPECDEC_MAX_TREE_NODES * (SPECDEC_MAX_TREE_NODES + 1))
typedef struct sd_tree_pool {
    int32_t n;
    int32_t token[SD_TREE_POOL_MAX];
    int32_t parent[SD_TREE_POOL_MAX];   /* pool index; root: -1 */
    int32_t depth[SD_TREE_POOL_MAX];
    double score[SD_TREE_POOL_MAX];
    int32_t qrow[SD_TREE_POOL_MAX];     /* expanded: its q row; else -1 */
    int32_t drow[SD_TREE_POOL_MAX];     /* expanded below the root: its node in the draft's tree; else -1 */
    int32_t child0[SD_TREE_POOL_MAX];   /* expanded: first child entry */
    int32_t n_child[SD_TREE_POOL_MAX];
    uint8_t sampled[SD_TREE_POOL_MAX];  /* expanded: child 0 was sampled */
    uint8_t chosen[SD_TREE_POOL_MAX];   /* in the last sd_tree_pool_select */
} sd_tree_pool;

/* Reset to the root alone (token, score 1, q row 0). */
void sd_tree_pool_reset(sd_tree_pool *pl, int32_t root_token);

/* Expand entry e from its q row: children tokens[0..k) with their acceptance estimates
 * qv[0..k) (in [0, 1]; NaN counts as 0), `sampled` says whether tokens[0] was sampled. Returns SPECDEC_OK, or
 * INTERNAL when the pool is full (nothing added). */
specdec_status sd_tree_pool_expand(sd_tree_pool *pl, int32_t e, int32_t qrow, int sampled, const int32_t *tokens,
                                   const double *qv, int32_t k);

/* Mark (pl->chosen) the top `budget` non-root entries by (score descending, index
 * ascending) — closed under parent and earlier sibling; returns how many. */
int32_t sd_tree_pool_select(sd_tree_pool *pl, int32_t budget);

/* The tree of the root and the chosen entries (pool order is breadth-first). map[i]
 * = pool entry of tree node i. */
void sd_tree_from_pool(const sd_tree_pool *pl, sd_tree *t, int32_t *map);

/* Verify a tree (the rules at the top of this file). p: t->n rows of n_vocab (row i =
 * the target's processed row after node i); q: the draft rows, row t->qrow[i] for node
 * i (may be NULL outside REJECTION); u: uniforms of positions pos0 .. pos0 + depth.
 * Output: path[0..n) the accepted nodes root-first (the root excluded), out_tokens[0..n]
 * their tokens then the emitted one, *n_accepted = n. INVALID_ARGUMENT (outputs
 * untouched) on a bad mode, a malformed tree, token ids outside [0, V), a missing q row.
 * Thread-safe, no allocation. Lives alone in sd_cpu_tree_verify.c (tests link
 * deliberately broken replacements, tests/tree/tree_mutants.c). */
specdec_status sd_tree_verify(specdec_verify_mode mode, const sd_tree *t, int32_t n_vocab, const float *p,
                              const float *q, const sd_verify_uniforms *u, int32_t *path, int32_t *out_tokens,
                              int32_t *n_accepted, sd_errbuf *eb);

#endif
