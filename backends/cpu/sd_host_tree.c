/* sd_host_tree.c — a runner drafter's tree on the host executor (core/sd_round.h
 * tree_grow / tree_keep, docs/TREE.md). For a sequence of length L (tokens[L-1] pending
 * at position L - 1):
 *   1. draft: catch up on tokens[its kv_len .. L) -> q row 0 (the root's children; the
 *      protocol's draft_forward(0), batched with the other sequences of the wave); the root is
 *      expanded (its children at position L: kernels/cpu/sd_cpu_tree.h); then level by
 *      level, d = 1 .. depth - 1: the nodes at depth d that the best-first selection
 *      keeps (a fixed shape: all of them) go through ONE draft tree-forward (base L,
 *      their parents in the draft's tree; one batched forward for every tree of the
 *      wave), each processed row is kept (q row 1 + its index in the draft's tree) and
 *      expanded;
 *   2. the tree = the root and the top `budget` candidates (fixed shape: all);
 *   3. target: ONE tree-forward of the root and every node at base L - 1 -> p rows
 *      (the executor's verify pass, batched with the wave);
 *   4. verifier (sd_tree_verify, sd_host_round.c) with the uniforms of positions
 *      L .. L + depth;
 *   5. compaction: the target keeps the root and the accepted path (L + n tokens: the
 *      protocol), the draft the longest prefix of the path it has forwarded (tree_keep).
 * Exact for any shape: see docs/TREE.md. Nothing is allocated here. */
#include <math.h>
#include <string.h>

#include "sd_cpu_sample.h"
#include "sd_cpu_verify.h"
#include "sd_host_round_impl.h"
#include "sd_rng.h"

#define TS(sl) ((sd_host_tree_state *)(sl)->xstate)

/* Best-first acceptance estimates of the children tok[0..n) of row q (docs/TREE.md
 * "Scores") outside MATCH: REJECTION (deterministic children) their draft probability
 * q; GREEDY the T = 1 softmax of the raw draft logits. A fixed shape: 1 (every node is
 * kept). MATCH: tree_match_children. */
static void tree_scores(const sd_host_exec *h, const sd_round_seq *s, const float *q, const int32_t *tok,
                        int32_t n, double *qv) {
    if (s->shape.n_nodes == 0 || s->mode != SPECDEC_VERIFY_GREEDY) {
        for (int32_t i = 0; i < n; i++) qv[i] = s->shape.n_nodes == 0 ? 1.0 : (double)q[tok[i]];
        return;
    }
    double mx = -INFINITY, z = 0.0;
    for (int32_t j = 0; j < h->V; j++)
        if (q[j] > mx) mx = q[j];
    if (isfinite(mx))
        for (int32_t j = 0; j < h->V; j++) z += exp((double)q[j] - mx);
    for (int32_t i = 0; i < n; i++) qv[i] = isfinite(mx) && z > 0.0 ? exp((double)q[tok[i]] - mx) / z : 1.0;
}

/* MATCH children of a node at depth d (docs/TREE.md "Children of a node"): the k
 * tokens whose q-CDF intervals hold the most of the kernel around the target's SAMPLE
 * uniform of their position, that mass being their acceptance estimate (a fixed shape:
 * 1). The coupled sample is among them (first unless u lies near its interval's edge). */
static int32_t tree_match_children(const sd_host_exec *h, const sd_round_seq *s, const float *q, int32_t d,
                                   int32_t k, int32_t *tok, double *qv) {
    const double u = sd_rng_uniform_at(s->seed, s->sequence_id, (int64_t)s->length + d, SD_RNG_PURPOSE_SAMPLE);
    const int32_t n = sd_tree_match_children(q, h->V, u, SD_TREE_MATCH_S0, k, tok, qv);
    for (int32_t i = 0; i < n && s->shape.n_nodes == 0; i++) qv[i] = 1.0;
    return n;
}

/* Children of the pool entry e from its processed draft row (q row qrow of the slot). */
static specdec_status tree_expand(sd_host_exec *h, sd_round_slot *sl, int32_t e, int32_t qrow) {
    const sd_round_seq *s = sl->s;
    sd_tree_pool *pl = &TS(sl)->pool;
    const int32_t d = pl->depth[e], budget = sl->budget;
    const float *q = sl->q + (size_t)qrow * (size_t)h->V;
    int32_t k = s->shape.width[d] < budget - d ? s->shape.width[d] : budget - d;
    int32_t tok[SPECDEC_MAX_TREE_NODES], n = 0;
    double qv[SPECDEC_MAX_TREE_NODES];
    /* REJECTION with a budget: deterministic children only (docs/TREE.md) */
    const int det = s->mode == SPECDEC_VERIFY_REJECTION && s->shape.n_nodes > 0;
    if (s->mode == SPECDEC_VERIFY_MATCH) {
        n = tree_match_children(h, s, q, d, k, tok, qv);
    } else {
        if (k > 0 && !det) {
            tok[n++] = sd_verify_draft_sample(s->mode, q, h->V, s->seed, s->sequence_id, (int64_t)s->length + d);
            k--;
        }
        const float floor = s->mode == SPECDEC_VERIFY_GREEDY ? -INFINITY : 0.0f;
        n += sd_tree_top_tokens(q, h->V, floor, k, n ? tok[0] : -1, tok + n);
        tree_scores(h, s, q, tok, n, qv);
    }
    const int sampled = !det && s->mode == SPECDEC_VERIFY_REJECTION;
    if (sd_tree_pool_expand(pl, e, qrow, sampled, tok, qv, n) != SPECDEC_OK)
        return sd_fail(&h->base.err, SPECDEC_ERR_INTERNAL, "host round: tree candidate pool full");
    return SPECDEC_OK;
}

/* The nodes at depth `depth` the selection keeps, as the slot's segment of this
 * level's draft tree-forward (segment j of h->segs); 0 when the tree stops growing. */
static int32_t tree_level_seg(sd_host_exec *h, sd_round_slot *sl, int32_t depth, int32_t j) {
    sd_host_tree_state *ts = TS(sl);
    sd_tree_pool *pl = &ts->pool;
    const int32_t L = sl->s->length;
    int32_t n = 0;
    sd_tree_pool_select(pl, sl->budget);
    /* the draft's tree holds at most SPECDEC_MAX_TREE_NODES nodes (and its cache rows) */
    int32_t cap = sl->d->n_ctx - L < SPECDEC_MAX_TREE_NODES ? sl->d->n_ctx - L : SPECDEC_MAX_TREE_NODES;
    if (cap - ts->n_exp > sl->d->max_batch) cap = ts->n_exp + sl->d->max_batch;
    for (int32_t e = 1; e < pl->n && ts->n_exp + n < cap; e++) {
        if (!pl->chosen[e] || pl->depth[e] != depth) continue;
        const int32_t pa = pl->parent[e];
        ts->level[n] = e;
        sl->vtok[n] = pl->token[e];
        sl->vpar[n] = pa == 0 ? -1 : pl->drow[pa];
        n++;
    }
    ts->level_n = n;
    if (n == 0) return 0;
    float *rows = sl->q + (size_t)(1 + ts->n_exp) * (size_t)h->V;
    h->segs[j] = (sd_runner_seg){sl->d, sl->vtok, n, L, sl->vpar, ts->n_exp, rows, NULL, NULL};
    return n;
}

/* After the level's forward: keep each node's row and expand it. */
static specdec_status tree_level_expand(sd_host_exec *h, sd_round_slot *sl) {
    sd_host_tree_state *ts = TS(sl);
    const size_t V = (size_t)h->V;
    specdec_status st = SPECDEC_OK;
    for (int32_t i = 0; i < ts->level_n && st == SPECDEC_OK; i++) {
        const int32_t row = 1 + ts->n_exp + i;
        ts->pool.drow[ts->level[i]] = ts->n_exp + i;
        st = sd_host_process(h, sl->s, sl->q + (size_t)row * V);
        if (st == SPECDEC_OK) st = tree_expand(h, sl, ts->level[i], row);
    }
    ts->n_exp += ts->level_n;
    return st;
}

/* Steps 1-2 for every tree of the wave (their q row 0 holds the caught-up root row);
 * each finished tree (the root and the top `budget` candidates) in x->tr. */
specdec_status sd_host_tree_grow(sd_exec *ex, sd_round_slot *const *ts, int32_t n_ts) {
    sd_host_exec *h = (sd_host_exec *)ex;
    specdec_status st = SPECDEC_OK;
    int32_t depth_max = 0;
    for (int32_t i = 0; i < n_ts && st == SPECDEC_OK; i++) {
        sd_round_slot *sl = ts[i];
        sd_tree_pool_reset(&TS(sl)->pool, sl->s->tokens[sl->s->length - 1]);
        TS(sl)->n_exp = 0;
        st = tree_expand(h, sl, 0, 0);
        if (sl->depth > depth_max) depth_max = sl->depth;
    }
    uint8_t growing[SD_HOST_MAX_SEQS];
    for (int32_t i = 0; i < n_ts; i++) growing[i] = 1;
    for (int32_t d = 1; d < depth_max && st == SPECDEC_OK; d++) {
        int32_t n = 0;
        for (int32_t i = 0; i < n_ts; i++) {
            if (!growing[i] || d >= ts[i]->depth) continue;
            if (tree_level_seg(h, ts[i], d, n) == 0) growing[i] = 0;
            else h->slot_of[n++] = i;
        }
        if (n == 0) break;
        st = sd_host_forward_segs(h, n, "draft tree");
        for (int32_t j = 0; j < n && st == SPECDEC_OK; j++) st = tree_level_expand(h, ts[h->slot_of[j]]);
    }
    for (int32_t i = 0; i < n_ts && st == SPECDEC_OK; i++) {
        sd_host_tree_state *t = TS(ts[i]);
        sd_tree_pool_select(&t->pool, ts[i]->budget);
        sd_tree_from_pool(&t->pool, &ts[i]->tr, t->map);
    }
    return st;
}

/* Step 5, the draft's part: it keeps the longest prefix of the accepted path it has
 * forwarded. */
specdec_status sd_host_tree_keep(sd_exec *ex, sd_round_slot *sl) {
    sd_host_exec *h = (sd_host_exec *)ex;
    const sd_host_tree_state *ts = TS(sl);
    int32_t keep[SD_RUNNER_TREE_MAX], m = 0;
    if (ts->n_exp == 0) return SPECDEC_OK; /* the draft made no tree: it holds L tokens */
    while (m < sl->s->n_accepted && ts->pool.drow[ts->map[sl->path[m]]] >= 0) {
        keep[m] = ts->pool.drow[ts->map[sl->path[m]]];
        m++;
    }
    const specdec_status st = sd_runner_compact(sl->d, keep, m);
    return st == SPECDEC_OK ? SPECDEC_OK : sd_host_batch_fail(h, st, "draft compaction", &sl->d->err);
}
