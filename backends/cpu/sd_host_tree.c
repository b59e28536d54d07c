/* sd_host_tree.c — one round of tree speculation on the host (core/sd_round.h,
 * docs/TREE.md). For a sequence of length L (tokens[L-1] pending at position L - 1):
 *   1. draft: catch up on tokens[its kv_len .. L) -> q row 0 (the root's children);
 *      the root is expanded (its children at position L: kernels/cpu/sd_cpu_tree.h);
 *      then level by level, d = 1 .. depth - 1: the nodes at depth d that the
 *      best-first selection keeps (a fixed shape: all of them) go through ONE draft
 *      tree-forward (base L, their parents in the draft's tree), each processed row is
 *      kept (q row 1 + its index in the draft's tree) and expanded;
 *   2. the tree = the root and the top `budget` candidates (fixed shape: all);
 *   3. target: ONE tree-forward of the root and every node at base L - 1 -> p rows;
 *   4. verifier (sd_tree_verify) with the uniforms of positions L .. L + depth;
 *   5. compaction: the target keeps the root and the accepted path (L + n tokens), the
 *      draft the longest prefix of the path it has forwarded.
 * Exact for any shape: see docs/TREE.md. Nothing is allocated here. */
#include <math.h>
#include <string.h>

#include "sd_cpu_sample.h"
#include "sd_cpu_verify.h"
#include "sd_host_round_impl.h"
#include "sd_rng.h"

/* The shape must fit the runners (the generation loop makes sure it does). */
static specdec_status tree_check_shape(sd_host_round *h, const sd_round_seq *s, int32_t *budget) {
    const sd_draft_shape *sh = &s->shape;
    const int32_t L = s->length;
    for (int32_t d = 0; d < sh->depth; d++)
        if (sh->width[d] < 1 || sh->width[d] > SPECDEC_MAX_TREE_NODES)
            return sd_fail(&h->base.err, SPECDEC_ERR_INVALID_ARGUMENT, "host round: tree width[%d] = %d outside [1, %d]",
                           (int)d, (int)sh->width[d], SPECDEC_MAX_TREE_NODES);
    const int64_t nodes = sd_draft_shape_nodes(sh);
    if (sh->n_nodes < 0 || nodes < 1 || nodes > SPECDEC_MAX_TREE_NODES)
        return sd_fail(&h->base.err, SPECDEC_ERR_INVALID_ARGUMENT, "host round: a tree of %lld nodes (1..%d)",
                       (long long)nodes, SPECDEC_MAX_TREE_NODES);
    if ((int64_t)L + nodes > h->t->n_ctx || (int64_t)L + nodes > h->d->n_ctx || nodes + 1 > h->t->max_batch ||
        nodes > h->d->max_batch)
        return sd_fail(&h->base.err, SPECDEC_ERR_INVALID_ARGUMENT,
                       "host round: a tree of %lld nodes at length %d does not fit the context or one call",
                       (long long)nodes, (int)L);
    if (sd_runner_kv_len(h->t) != L - 1)
        return sd_fail(&h->base.err, SPECDEC_ERR_INTERNAL, "host round at length %d: target cache holds %d tokens",
                       (int)L, (int)sd_runner_kv_len(h->t));
    *budget = (int32_t)nodes;
    return SPECDEC_OK;
}

/* Best-first acceptance estimates of the children tok[0..n) of row q (docs/TREE.md
 * "Scores") outside MATCH: REJECTION (deterministic children) their draft probability
 * q; GREEDY the T = 1 softmax of the raw draft logits. A fixed shape: 1 (every node is
 * kept). MATCH: tree_match_children. */
static void tree_scores(const sd_host_round *h, const sd_round_seq *s, const float *q, const int32_t *tok,
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
static int32_t tree_match_children(const sd_host_round *h, const sd_round_seq *s, const float *q, int32_t d,
                                   int32_t k, int32_t *tok, double *qv) {
    const double u = sd_rng_uniform_at(s->seed, s->sequence_id, (int64_t)s->length + d, SD_RNG_PURPOSE_SAMPLE);
    const int32_t n = sd_tree_match_children(q, h->V, u, SD_TREE_MATCH_S0, k, tok, qv);
    for (int32_t i = 0; i < n && s->shape.n_nodes == 0; i++) qv[i] = 1.0;
    return n;
}

/* Children of the pool entry e from its processed draft row q_rows[qrow]. */
static specdec_status tree_expand(sd_host_round *h, const sd_round_seq *s, int32_t e, int32_t qrow, int32_t budget) {
    sd_tree_pool *pl = h->pool;
    const int32_t d = pl->depth[e];
    const float *q = h->q_rows + (size_t)qrow * (size_t)h->V;
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

/* The chosen nodes at depth `depth` go through one draft tree-forward and are
 * expanded. *n_out = how many (0: the tree stops growing). */
static specdec_status tree_draft_level(sd_host_round *h, const sd_round_seq *s, int32_t depth, int32_t budget,
                                       int32_t *n_out) {
    sd_tree_pool *pl = h->pool;
    int32_t list[SPECDEC_MAX_TREE_NODES], n = 0;
    sd_tree_pool_select(pl, budget);
    /* the draft's tree holds at most SPECDEC_MAX_TREE_NODES nodes (and its cache rows) */
    int32_t cap = h->d->n_ctx - s->length < SPECDEC_MAX_TREE_NODES ? h->d->n_ctx - s->length : SPECDEC_MAX_TREE_NODES;
    if (cap - h->n_exp > h->d->max_batch) cap = h->n_exp + h->d->max_batch;
    for (int32_t e = 1; e < pl->n && h->n_exp + n < cap; e++) {
        if (!pl->chosen[e] || pl->depth[e] != depth) continue;
        const int32_t pa = pl->parent[e];
        list[n] = e;
        h->vtok[n] = pl->token[e];
        h->vpar[n] = pa == 0 ? -1 : pl->drow[pa];
        n++;
    }
    *n_out = n;
    if (n == 0) return SPECDEC_OK;
    const size_t V = (size_t)h->V;
    float *rows = h->q_rows + (size_t)(1 + h->n_exp) * V;
    specdec_status st = sd_runner_forward_tree(h->d, h->vtok, n, s->length, h->n_exp, h->vpar, rows);
    if (st != SPECDEC_OK) return sd_host_runner_fail(h, h->d, st, "draft tree");
    for (int32_t i = 0; i < n && st == SPECDEC_OK; i++) {
        pl->drow[list[i]] = h->n_exp + i;
        st = sd_host_process(h, s, rows + (size_t)i * V);
        if (st == SPECDEC_OK) st = tree_expand(h, s, list[i], 1 + h->n_exp + i, budget);
    }
    h->n_exp += n;
    return st;
}

/* Steps 1-2: the draft grows the tree into h->tree (map: tree node -> pool entry). */
static specdec_status tree_grow(sd_host_round *h, sd_round_seq *s, int32_t budget, int32_t *map) {
    specdec_status st = sd_host_draft_catch_up(h, s);
    if (st != SPECDEC_OK) return st;
    sd_tree_pool_reset(h->pool, s->tokens[s->length - 1]);
    h->n_exp = 0;
    if ((st = tree_expand(h, s, 0, 0, budget)) != SPECDEC_OK) return st;
    for (int32_t d = 1, n = 1; d < s->shape.depth && n > 0; d++)
        if ((st = tree_draft_level(h, s, d, budget, &n)) != SPECDEC_OK) return st;
    sd_tree_pool_select(h->pool, budget);
    sd_tree_from_pool(h->pool, h->tree, map);
    return SPECDEC_OK;
}

/* Step 5: both caches keep the accepted path. */
static specdec_status tree_compact(sd_host_round *h, const sd_round_seq *s, const int32_t *path, const int32_t *map) {
    int32_t keep[SD_RUNNER_TREE_MAX], m = 0;
    keep[0] = 0;
    for (int32_t j = 0; j < s->n_accepted; j++) keep[1 + j] = path[j];
    specdec_status st = sd_runner_compact(h->t, keep, 1 + s->n_accepted);
    if (st != SPECDEC_OK) return sd_host_runner_fail(h, h->t, st, "target compaction");
    if (h->n_exp == 0) return SPECDEC_OK; /* the draft made no tree: it holds L tokens */
    while (m < s->n_accepted && h->pool->drow[map[path[m]]] >= 0) {
        keep[m] = h->pool->drow[map[path[m]]];
        m++;
    }
    st = sd_runner_compact(h->d, keep, m);
    return st == SPECDEC_OK ? SPECDEC_OK : sd_host_runner_fail(h, h->d, st, "draft compaction");
}

/* Steps 3-4: the target scores the tree; the verifier walks it. */
static specdec_status tree_verify(sd_host_round *h, sd_round_seq *s, int32_t *path, double *t_target) {
    const sd_tree *tr = h->tree;
    const size_t V = (size_t)h->V;
    for (int32_t i = 0; i < tr->n; i++) {
        h->vtok[i] = tr->token[i];
        h->vpar[i] = tr->parent[i];
    }
    const double t0 = sd_host_now();
    specdec_status st = sd_runner_forward_tree(h->t, h->vtok, tr->n, s->length - 1, 0, h->vpar, h->p_rows);
    *t_target = sd_host_now() - t0;
    if (st != SPECDEC_OK) return sd_host_runner_fail(h, h->t, st, "target tree");
    for (int32_t i = 0; i < tr->n; i++)
        if ((st = sd_host_process(h, s, h->p_rows + (size_t)i * V)) != SPECDEC_OK) return st;
    sd_verify_uniforms u;
    sd_verify_fetch_uniforms(s->seed, s->sequence_id, s->length, s->shape.depth, &u);
    return sd_tree_verify(s->mode, tr, h->V, h->p_rows, h->q_rows, &u, path, s->out, &s->n_accepted, &h->base.err);
}

specdec_status sd_host_tree_round(sd_host_round *h, sd_round_seq *s) {
    int32_t budget = 0, map[SD_RUNNER_TREE_MAX], path[SPECDEC_MAX_DRAFT];
    specdec_status st = tree_check_shape(h, s, &budget);
    if (st != SPECDEC_OK) return st;
    const double t0 = sd_host_now();
    if ((st = tree_grow(h, s, budget, map)) != SPECDEC_OK) return st;
    const double t1 = sd_host_now();
    double t_target = 0.0;
    if ((st = tree_verify(h, s, path, &t_target)) != SPECDEC_OK) return st;
    if ((st = tree_compact(h, s, path, map)) != SPECDEC_OK) return st;
    s->n_drafted = h->tree->n - 1;
    s->t.draft = t1 - t0;
    s->t.target = t_target;
    s->t.verify = sd_host_now() - t1 - t_target;
    return SPECDEC_OK;
}
