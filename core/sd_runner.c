/* sd_runner.c — the generic part of the runner contract (core/sd_runner.h). */
#include "sd_runner.h"

#include <string.h>

specdec_status sd_runner_forward_chunked(sd_runner *r, const int32_t *tokens, int32_t n, int32_t pos, float *logits) {
    const int32_t mb = r->max_batch > 0 ? r->max_batch : n;
    for (int32_t off = 0; off < n;) {
        const int32_t c = n - off < mb ? n - off : mb;
        float *rows = logits ? logits + (size_t)off * (size_t)r->n_vocab : NULL;
        specdec_status st = sd_runner_forward(r, tokens + off, c, pos + off, rows);
        if (st != SPECDEC_OK) return st;
        if (r->kv_len != pos + off + c)
            return sd_fail(&r->err, SPECDEC_ERR_INTERNAL, "runner: kv length %d after a forward of %d tokens at %d",
                           (int)r->kv_len, (int)c, (int)(pos + off));
        off += c;
    }
    return SPECDEC_OK;
}

/* ------------------------------------------------------------------------- */
/* trees                                                                      */
/* ------------------------------------------------------------------------- */
static specdec_status tree_check(sd_runner *r, const int32_t *tokens, int32_t n, int32_t base, int32_t first,
                                 const int32_t *parent) {
    if (!tokens || !parent || n < 1 || first < 0 || first > SD_RUNNER_TREE_MAX - n)
        return sd_fail(&r->err, SPECDEC_ERR_INVALID_ARGUMENT, "tree forward: %d nodes from node %d (at most %d)", (int)n,
                       (int)first, SD_RUNNER_TREE_MAX);
    if (n > r->max_batch)
        return sd_fail(&r->err, SPECDEC_ERR_INVALID_ARGUMENT, "tree forward: %d nodes exceed max_batch %d", (int)n,
                       (int)r->max_batch);
    if (first == 0 && (base < 0 || base > r->kv_len))
        return sd_fail(&r->err, SPECDEC_ERR_INVALID_ARGUMENT, "tree forward: base %d outside [0, kv_len = %d]",
                       (int)base, (int)r->kv_len);
    if (first > 0 && (r->tree.n != first || r->tree.base != base))
        return sd_fail(&r->err, SPECDEC_ERR_INVALID_ARGUMENT,
                       "tree forward: extends a tree of %d nodes at base %d, the runner holds %d at %d", (int)first,
                       (int)base, (int)r->tree.n, (int)r->tree.base);
    if ((int64_t)base + first + n > r->n_ctx)
        return sd_fail(&r->err, SPECDEC_ERR_CONTEXT_FULL, "tree forward: rows up to %lld exceed n_ctx %d",
                       (long long)base + first + n, (int)r->n_ctx);
    for (int32_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= r->n_vocab)
            return sd_fail(&r->err, SPECDEC_ERR_INVALID_ARGUMENT, "tree forward: token id %d at node %d outside [0, %d)",
                           (int)tokens[i], (int)(first + i), (int)r->n_vocab);
        if (parent[i] < -1 || parent[i] >= first + i)
            return sd_fail(&r->err, SPECDEC_ERR_INVALID_ARGUMENT, "tree forward: node %d has parent %d (must be in [-1, %d))",
                           (int)(first + i), (int)parent[i], (int)(first + i));
    }
    return SPECDEC_OK;
}

/* Emulation: make cache rows base .. base + k hold the path of `node` (its ancestors
 * and itself, root-first), forwarding only what differs from the path in the cache;
 * the node's own row goes to `logits` (NULL: none). */
static specdec_status tree_emulate_path(sd_runner *r, int32_t node, float *logits) {
    sd_runner_tree *t = &r->tree;
    int32_t path[SD_RUNNER_TREE_MAX], toks[SD_RUNNER_TREE_MAX];
    const int32_t k = t->depth[node];
    for (int32_t a = node, d = k; d >= 0; a = t->parent[a], d--) path[d] = a;
    int32_t same = 0; /* rows of the cached path that stay */
    while (same < t->path_len && same <= k && t->path[same] == path[same] && t->base + same < r->kv_len) same++;
    if (same > k) same = k; /* the node's own row is recomputed for its logits */
    for (int32_t d = same; d <= k; d++) toks[d] = t->token[path[d]];
    specdec_status st = SPECDEC_OK;
    if (k > same) st = sd_runner_forward_chunked(r, toks + same, k - same, t->base + same, NULL);
    if (st == SPECDEC_OK) st = r->vt->forward(r, toks + k, 1, t->base + k, logits);
    t->path_len = 0;
    if (st != SPECDEC_OK) return st;
    memcpy(t->path, path, (size_t)(k + 1) * sizeof path[0]);
    t->path_len = k + 1;
    return SPECDEC_OK;
}

/* Emulation of a tree forward: nodes in depth-first order, so that each node finds
 * its parent's path in the cache and costs one one-token forward. */
static specdec_status tree_emulate(sd_runner *r, int32_t first, int32_t n, float *logits) {
    const sd_runner_tree *t = &r->tree;
    int32_t stack[SD_RUNNER_TREE_MAX], sp = 0;
    for (int32_t i = first + n - 1; i >= first; i--)
        if (t->parent[i] < first) stack[sp++] = i; /* roots of this call, first on top */
    while (sp > 0) {
        const int32_t v = stack[--sp];
        float *row = logits ? logits + (size_t)(v - first) * (size_t)r->n_vocab : NULL;
        specdec_status st = tree_emulate_path(r, v, row);
        if (st != SPECDEC_OK) return st;
        for (int32_t c = first + n - 1; c > v; c--)
            if (t->parent[c] == v) stack[sp++] = c;
    }
    return SPECDEC_OK;
}

specdec_status sd_runner_forward_tree(sd_runner *r, const int32_t *tokens, int32_t n, int32_t base, int32_t first,
                                      const int32_t *parent, float *logits) {
    specdec_status st = tree_check(r, tokens, n, base, first, parent);
    if (st != SPECDEC_OK) return st;
    sd_runner_tree *t = &r->tree;
    if (first == 0) {
        t->base = base;
        t->path_len = 0;
        r->kv_len = base; /* a new tree drops what the cache held past base */
    }
    for (int32_t i = 0; i < n; i++) {
        const int32_t v = first + i;
        t->token[v] = tokens[i];
        t->parent[v] = parent[i];
        t->depth[v] = parent[i] < 0 ? 0 : t->depth[parent[i]] + 1;
    }
    t->n = 0; /* no tree while the forward runs: a failure leaves none */
    st = r->tree_ops ? r->tree_ops->forward_tree(r, first, n, logits) : tree_emulate(r, first, n, logits);
    if (st != SPECDEC_OK) {
        if (r->kv_len > base + first) r->kv_len = base + first;
        return st;
    }
    if (r->tree_ops && r->kv_len != base + first + n)
        return sd_fail(&r->err, SPECDEC_ERR_INTERNAL, "runner: kv length %d after a tree forward to row %d",
                       (int)r->kv_len, (int)(base + first + n));
    t->n = first + n;
    return SPECDEC_OK;
}

/* Emulated compaction: the kept path by forward(), reusing what the cache holds. */
static specdec_status tree_emulate_compact(sd_runner *r, const int32_t *keep, int32_t n_keep) {
    sd_runner_tree *t = &r->tree;
    int32_t same = 0, toks[SD_RUNNER_TREE_MAX];
    while (same < t->path_len && same < n_keep && t->path[same] == keep[same] && t->base + same < r->kv_len) same++;
    for (int32_t j = same; j < n_keep; j++) toks[j] = t->token[keep[j]];
    specdec_status st = SPECDEC_OK;
    if (n_keep > same) st = sd_runner_forward_chunked(r, toks + same, n_keep - same, t->base + same, NULL);
    if (st == SPECDEC_OK && r->kv_len > t->base + n_keep) r->kv_len = t->base + n_keep;
    return st;
}

specdec_status sd_runner_compact(sd_runner *r, const int32_t *keep, int32_t n_keep) {
    sd_runner_tree *t = &r->tree;
    if (t->n <= 0)
        return sd_fail(&r->err, SPECDEC_ERR_INVALID_ARGUMENT, "compact: the runner holds no tree");
    if (n_keep < 0 || n_keep > t->n || (n_keep > 0 && !keep))
        return sd_fail(&r->err, SPECDEC_ERR_INVALID_ARGUMENT, "compact: %d rows of a tree of %d", (int)n_keep, (int)t->n);
    for (int32_t j = 0; j < n_keep; j++)
        if (keep[j] < 0 || keep[j] >= t->n || t->parent[keep[j]] != (j == 0 ? -1 : keep[j - 1]))
            return sd_fail(&r->err, SPECDEC_ERR_INVALID_ARGUMENT, "compact: keep[%d] = %d does not continue a root path",
                           (int)j, (int)keep[j]);
    const int32_t base = t->base;
    specdec_status st = r->tree_ops ? r->tree_ops->compact(r, keep, n_keep) : tree_emulate_compact(r, keep, n_keep);
    t->n = 0;
    if (st != SPECDEC_OK) {
        if (r->kv_len > base) r->kv_len = base;
        return st;
    }
    if (r->kv_len != base + n_keep)
        return sd_fail(&r->err, SPECDEC_ERR_INTERNAL, "runner: kv length %d after compacting %d rows at %d",
                       (int)r->kv_len, (int)n_keep, (int)base);
    return SPECDEC_OK;
}
