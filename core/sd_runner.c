/* sd_runner.c — the generic part of the runner contract (core/sd_runner.h). */
#include "sd_runner.h"

#include <string.h>

/* ------------------------------------------------------------------------- */
/* sliding-window release (core/sd_runner.h)                                  */
/* ------------------------------------------------------------------------- */
static specdec_status window_fail(const sd_runner *r, int32_t len, const char *what, sd_errbuf *eb) {
    const int32_t min = sd_runner_min_len(r);
    if (len <= 0 || len >= min) return SPECDEC_OK;
    const int32_t shared = r->kv.shared * r->group->pool.block_tokens;
    if (len < shared)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "%s to %d: rows below %d are shared with other sequences through the prefix cache (go back to "
                       "0 or to >= %d)",
                       what, (int)len, (int)shared, (int)min);
    return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                   "%s to %d: rows below %d were released by the sliding window of %d (go back to 0 or to >= %d)", what,
                   (int)len, (int)sd_kv_first_row(&r->kv, r->group->pool.block_tokens), (int)r->group->kv_window,
                   (int)min);
}

specdec_status sd_runner_check_len(sd_runner *r, int32_t len, const char *what) {
    return window_fail(r, len, what, &r->err);
}

void sd_runner_slide(sd_runner *r) {
    sd_runner_group *g = r->group;
    if (!g || g->kv_window <= 0) return;
    int32_t keep = sd_kv_window_keep(r->kv_len, g->kv_window, SD_RUNNER_WINDOW_MARGIN);
    if (r->tree.n > 0 && keep > r->tree.base) keep = r->tree.base; /* a live tree's rows stay for compact() */
    (void)sd_kv_release(&r->kv, &g->pool, keep);
}

specdec_status sd_runner_group_set_window(sd_runner_group *g, int32_t window, sd_errbuf *eb) {
    if (!g || window < 0 || g->n_runners > 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "runner group: window %d %s", (int)window,
                       !g ? "for a NULL group" : window < 0 ? "(must be >= 0)" : "set after runners were added");
    g->kv_window = window;
    return SPECDEC_OK;
}

specdec_status sd_runner_group_enable_prefix(sd_runner_group *g, sd_errbuf *eb) {
    if (!g || g->n_runners > 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "runner group: prefix cache %s",
                       !g ? "for a NULL group" : "enabled after runners were added");
    if (g->kv_window > 0)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED,
                       "runner group: no prefix cache for a model whose every layer slides (window %d): its sequences "
                       "give their first blocks back",
                       (int)g->kv_window);
    return sd_kv_prefix_enable(&g->pool, eb);
}

int32_t sd_runner_prefix_attach(sd_runner *r, const int32_t *tokens, int32_t rows, uint64_t salt) {
    if (!r->group || !r->group->pool.prefix || r->kv_len != 0 || r->tree.n > 0 || r->kv.n != 0) return 0;
    if (rows > r->n_ctx) rows = r->n_ctx;
    r->kv_len = sd_kv_prefix_attach(&r->kv, &r->group->pool, tokens, rows, salt);
    return r->kv_len;
}

void sd_runner_prefix_publish(sd_runner *r, const int32_t *tokens, int32_t rows, uint64_t salt) {
    if (!r->group || !r->group->pool.prefix || r->tree.n > 0) return;
    (void)sd_kv_prefix_publish(&r->kv, &r->group->pool, tokens, rows < r->kv_len ? rows : r->kv_len, salt);
}

/* A runner whose rows need hidden inputs runs only through batched segments carrying them. */
static specdec_status hin_refused(sd_runner *r, const char *what) {
    return sd_fail(&r->err, SPECDEC_ERR_UNSUPPORTED,
                   "%s: this runner's rows need hidden states (an MTP layer): only batched segments with hin run", what);
}

specdec_status sd_runner_forward(sd_runner *r, const int32_t *tokens, int32_t n, int32_t pos, float *logits_out) {
    if (r->group && r->group->hin_width > 0) return hin_refused(r, "forward");
    specdec_status st = sd_runner_check_len(r, pos, "forward");
    if (st != SPECDEC_OK) return st;
    r->tree.n = 0;
    st = r->vt->forward(r, tokens, n, pos, logits_out);
    if (st == SPECDEC_OK) sd_runner_slide(r);
    return st;
}

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
    if (first == 0 && window_fail(r, base, "tree forward", &r->err) != SPECDEC_OK) return SPECDEC_ERR_INVALID_ARGUMENT;
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

/* Record nodes first .. first + n - 1 of a validated tree call in r->tree (a new tree
 * first drops what the cache held past base); the tree counts no node until the
 * forward succeeded. */
static void tree_record(sd_runner *r, const int32_t *tokens, int32_t n, int32_t base, int32_t first,
                        const int32_t *parent) {
    sd_runner_tree *t = &r->tree;
    if (first == 0) {
        t->base = base;
        t->path_len = 0;
        sd_runner_truncate(r, base); /* base <= kv_len (checked) */
    }
    for (int32_t i = 0; i < n; i++) {
        const int32_t v = first + i;
        t->token[v] = tokens[i];
        t->parent[v] = parent[i];
        t->depth[v] = parent[i] < 0 ? 0 : t->depth[parent[i]] + 1;
    }
    t->n = 0; /* no tree while the forward runs: a failure leaves none */
}

/* After a tree call: success counts the nodes (kv_len checked for native calls), a
 * failure ends the tree below base + first. */
static specdec_status tree_finish(sd_runner *r, specdec_status st, int32_t base, int32_t first, int32_t n,
                                  int native) {
    if (st != SPECDEC_OK) {
        if (r->kv_len > base + first) sd_runner_truncate(r, base + first);
        r->tree.n = 0;
        return st;
    }
    if (native && r->kv_len != base + first + n)
        return sd_fail(&r->err, SPECDEC_ERR_INTERNAL, "runner: kv length %d after a tree forward to row %d",
                       (int)r->kv_len, (int)(base + first + n));
    r->tree.n = first + n;
    sd_runner_slide(r);
    return SPECDEC_OK;
}

specdec_status sd_runner_forward_tree(sd_runner *r, const int32_t *tokens, int32_t n, int32_t base, int32_t first,
                                      const int32_t *parent, float *logits) {
    if (r->group && r->group->hin_width > 0) return hin_refused(r, "forward_tree");
    specdec_status st = tree_check(r, tokens, n, base, first, parent);
    if (st != SPECDEC_OK) return st;
    tree_record(r, tokens, n, base, first, parent);
    st = r->tree_ops ? r->tree_ops->forward_tree(r, first, n, logits) : tree_emulate(r, first, n, logits);
    return tree_finish(r, st, base, first, n, r->tree_ops != NULL);
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
        sd_runner_truncate(r, base);
        return st;
    }
    if (r->kv_len != base + n_keep)
        return sd_fail(&r->err, SPECDEC_ERR_INTERNAL, "runner: kv length %d after compacting %d rows at %d",
                       (int)r->kv_len, (int)n_keep, (int)base);
    if (r->group) sd_kv_trim(&r->kv, &r->group->pool, r->kv_len);
    sd_runner_slide(r);
    return SPECDEC_OK;
}

/* ------------------------------------------------------------------------- */
/* groups and batches                                                         */
/* ------------------------------------------------------------------------- */
specdec_status sd_runner_hold(sd_runner *r, int32_t rows) {
    if (!r->group) return SPECDEC_OK;
    return sd_kv_hold(&r->kv, &r->group->pool, rows, &r->err);
}

specdec_status sd_runner_group_add(sd_runner_group *g, sd_runner **out, sd_errbuf *eb) {
    if (!out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "runner group: out is NULL");
    *out = NULL;
    if (!g) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "runner group: NULL group");
    return g->vt->add_runner(g, out, eb);
}

specdec_status sd_runner_group_set_capture(sd_runner_group *g, const int32_t *ids, int32_t n, sd_errbuf *eb) {
    if (!g) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "runner group: NULL group");
    if (n < 0 || n > SD_RUNNER_MAX_CAPTURE || (n > 0 && !ids))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "runner capture: %d states (0..%d)", (int)n,
                       SD_RUNNER_MAX_CAPTURE);
    if (n > 0 && g->capture_max < 1)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "runner capture: this backend's runners capture no hidden states");
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] > g->capture_max || (i > 0 && ids[i] <= ids[i - 1]))
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                           "runner capture: hs id %d (index %d) outside [0, %d] or not increasing", (int)ids[i], (int)i,
                           (int)g->capture_max);
    for (int32_t i = 0; i < n; i++) g->capture[i] = ids[i];
    g->n_capture = n;
    return SPECDEC_OK;
}

specdec_status sd_runner_group_attach(sd_runner_group *g, sd_runner *r, sd_errbuf *eb) {
    specdec_status st = sd_kv_table_init(&r->kv, g->n_ctx, g->pool.block_tokens, eb);
    if (st != SPECDEC_OK) return st;
    r->group = g;
    r->backend = g->backend;
    r->n_vocab = g->n_vocab;
    r->n_ctx = g->n_ctx;
    r->max_batch = g->max_batch;
    r->kv_len = 0;
    g->n_runners++;
    return SPECDEC_OK;
}

void sd_runner_group_detach(sd_runner *r) {
    if (!r->group) return;
    sd_kv_trim(&r->kv, &r->group->pool, 0);
    sd_kv_table_free(&r->kv);
    r->group->n_runners--;
    r->group = NULL;
}

/* A chain segment: forward()'s checks. */
static specdec_status seg_check_chain(const sd_runner_seg *g, sd_errbuf *eb) {
    const sd_runner *r = g->r;
    if (!g->tokens || g->n < 1 || g->n > r->max_batch)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "batch forward: a segment of %d tokens (1..%d)%s", (int)g->n,
                       (int)r->max_batch, g->tokens ? "" : " with tokens NULL");
    if (g->pos < 0 || g->pos > r->kv_len)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "batch forward: pos %d outside [0, kv_len = %d]", (int)g->pos,
                       (int)r->kv_len);
    if ((int64_t)g->pos + g->n > r->n_ctx)
        return sd_fail(eb, SPECDEC_ERR_CONTEXT_FULL, "batch forward: pos %d + %d tokens exceeds n_ctx %d", (int)g->pos,
                       (int)g->n, (int)r->n_ctx);
    if (window_fail(r, g->pos, "batch forward", eb) != SPECDEC_OK) return SPECDEC_ERR_INVALID_ARGUMENT;
    for (int32_t i = 0; i < g->n; i++)
        if (g->tokens[i] < 0 || g->tokens[i] >= r->n_vocab)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "batch forward: token id %d at index %d outside [0, %d)",
                           (int)g->tokens[i], (int)i, (int)r->n_vocab);
    return SPECDEC_OK;
}

/* Every segment as its own call would check it, the runners distinct. */
static specdec_status batch_check(const sd_runner_seg *segs, int32_t n_segs, sd_errbuf *eb) {
    if (n_segs < 1 || !segs)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "batch forward: %d segments", (int)n_segs);
    for (int32_t i = 0; i < n_segs; i++) {
        if (!segs[i].r) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "batch forward: segment %d has no runner", (int)i);
        for (int32_t j = 0; j < i; j++)
            if (segs[j].r == segs[i].r)
                return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "batch forward: segments %d and %d share a runner",
                               (int)j, (int)i);
        const sd_runner_group *gr = segs[i].r->group;
        if (segs[i].aux && (!gr || gr->n_capture < 1 || !gr->vt->forward_batch))
            return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "batch forward: segment %d asks for hidden states its runner %s",
                           (int)i, gr && gr->capture_max > 0 ? "was not set to capture" : "cannot capture");
        if ((gr && gr->hin_width > 0) != (segs[i].hin != NULL))
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "batch forward: segment %d %s", (int)i,
                           segs[i].hin ? "carries hidden inputs (hin) its runner does not take"
                                       : "lacks the hidden inputs (hin) its runner's rows need");
        specdec_status st;
        if (segs[i].parent) {
            st = tree_check(segs[i].r, segs[i].tokens, segs[i].n, segs[i].pos, segs[i].first, segs[i].parent);
            if (st != SPECDEC_OK) sd_err_copy(eb, &segs[i].r->err);
        } else {
            st = seg_check_chain(&segs[i], eb);
        }
        if (st != SPECDEC_OK) return st;
    }
    return SPECDEC_OK;
}

/* The rows segment g's cache ends at. */
static int32_t seg_end(const sd_runner_seg *g) { return g->parent ? g->pos + g->first + g->n : g->pos + g->n; }

/* The group every runner shares when it can run the segments natively, else NULL. */
static sd_runner_group *batch_group(const sd_runner_seg *segs, int32_t n_segs) {
    sd_runner_group *g = segs[0].r->group;
    if (!g || !g->vt->forward_batch) return NULL;
    for (int32_t i = 1; i < n_segs; i++)
        if (segs[i].r->group != g) return NULL;
    return g;
}

/* Hold the blocks of every segment (after their caches were cut back to where the
 * segments start), all or nothing. */
static specdec_status batch_hold(sd_runner_group *g, const sd_runner_seg *segs, int32_t n_segs, sd_errbuf *eb) {
    int64_t need = 0;
    for (int32_t i = 0; i < n_segs; i++) {
        const int32_t want = sd_kv_blocks_for(seg_end(&segs[i]), g->pool.block_tokens);
        if (want > segs[i].r->kv.n) need += want - segs[i].r->kv.n;
    }
    if (need > g->pool.n_free)
        return sd_fail(eb, SPECDEC_ERR_CONTEXT_FULL, "KV pool exhausted: the batch needs %lld more blocks, %d of %d free",
                       (long long)need, (int)g->pool.n_free, (int)g->pool.n_blocks);
    for (int32_t i = 0; i < n_segs; i++) {
        specdec_status st = sd_runner_hold(segs[i].r, seg_end(&segs[i]));
        if (st != SPECDEC_OK) return sd_fail(eb, st, "%s", segs[i].r->err.msg); /* cannot happen: counted above */
    }
    return SPECDEC_OK;
}

static specdec_status batch_native(sd_runner_group *g, const sd_runner_seg *segs, int32_t n_segs,
                                   sd_runner_pass_fn pass, void *ctx, sd_errbuf *eb);

/* The segments one by one (runners without a common native group); a segment that
 * captures hidden states goes through its own group (batch_check made sure it has one). */
static specdec_status batch_emulate(const sd_runner_seg *segs, int32_t n_segs, sd_errbuf *eb) {
    for (int32_t i = 0; i < n_segs; i++) {
        const sd_runner_seg *g = &segs[i];
        if (g->aux || g->hin) {
            sd_err_clear(&g->r->group->err);
            const specdec_status st = batch_native(g->r->group, g, 1, NULL, NULL, eb);
            if (st != SPECDEC_OK) return st;
            continue;
        }
        specdec_status st = g->parent ? sd_runner_forward_tree(g->r, g->tokens, g->n, g->pos, g->first, g->parent, g->logits)
                                      : sd_runner_forward(g->r, g->tokens, g->n, g->pos, g->logits);
        if (st == SPECDEC_OK && !g->parent && g->r->kv_len != g->pos + g->n)
            st = sd_fail(&g->r->err, SPECDEC_ERR_INTERNAL, "runner: kv length %d after a forward of %d tokens at %d",
                         (int)g->r->kv_len, (int)g->n, (int)g->pos);
        if (st != SPECDEC_OK) return sd_fail(eb, st, "%s", g->r->err.msg);
    }
    return SPECDEC_OK;
}

/* Native passes of at most max_batch tokens (through pass(ctx, ...) when given, else the
 * group's forward_batch); on failure every runner not yet done is cut back to its start. */
static specdec_status batch_native(sd_runner_group *g, const sd_runner_seg *segs, int32_t n_segs,
                                   sd_runner_pass_fn pass, void *ctx, sd_errbuf *eb) {
    for (int32_t i = 0; i < n_segs; i++) {
        const sd_runner_seg *s = &segs[i];
        if (s->parent) {
            tree_record(s->r, s->tokens, s->n, s->pos, s->first, s->parent);
        } else {
            sd_runner_truncate(s->r, s->pos);
            s->r->tree.n = 0; /* any forward() ends a tree */
        }
    }
    specdec_status st = batch_hold(g, segs, n_segs, eb);
    int32_t done = 0;
    while (st == SPECDEC_OK && done < n_segs) {
        int32_t k = 0, tokens = 0;
        while (done + k < n_segs && tokens + segs[done + k].n <= g->max_batch) tokens += segs[done + k++].n;
        st = pass ? pass(ctx, g, segs + done, k) : g->vt->forward_batch(g, segs + done, k);
        if (st == SPECDEC_OK) done += k;
    }
    for (int32_t i = 0; i < n_segs; i++) {
        sd_runner *r = segs[i].r;
        const int ok = i < done;
        if (!ok) { /* never ran: give back what batch_hold took for it */
            const int32_t start = segs[i].parent ? segs[i].pos + segs[i].first : segs[i].pos;
            if (r->kv_len > start) r->kv_len = start;
            sd_kv_trim(&r->kv, &g->pool, r->kv_len);
        }
        if (segs[i].parent) {
            specdec_status ts = tree_finish(r, ok ? SPECDEC_OK : st, segs[i].pos, segs[i].first, segs[i].n, 1);
            if (ok && ts != SPECDEC_OK && st == SPECDEC_OK) st = sd_fail(eb, ts, "%s", r->err.msg);
        } else if (!ok) {
            sd_runner_truncate(r, segs[i].pos);
        } else if (r->kv_len != seg_end(&segs[i]) && st == SPECDEC_OK) {
            st = sd_fail(eb, SPECDEC_ERR_INTERNAL, "runner: kv length %d after a batched forward to row %d",
                         (int)r->kv_len, (int)seg_end(&segs[i]));
        } else {
            sd_runner_slide(r);
        }
    }
    if (st != SPECDEC_OK && done < n_segs && g->err.msg[0]) sd_err_copy(eb, &g->err);
    return st;
}

specdec_status sd_runner_forward_batch(const sd_runner_seg *segs, int32_t n_segs, sd_errbuf *eb) {
    specdec_status st = batch_check(segs, n_segs, eb);
    if (st != SPECDEC_OK) return st;
    sd_runner_group *g = batch_group(segs, n_segs);
    if (!g) return batch_emulate(segs, n_segs, eb);
    sd_err_clear(&g->err);
    return batch_native(g, segs, n_segs, NULL, NULL, eb);
}

specdec_status sd_runner_forward_batch_via(const sd_runner_seg *segs, int32_t n_segs, sd_runner_pass_fn pass,
                                           void *ctx, sd_errbuf *eb) {
    if (!pass) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "batch forward: no pass function");
    specdec_status st = batch_check(segs, n_segs, eb);
    if (st != SPECDEC_OK) return st;
    sd_runner_group *g = batch_group(segs, n_segs);
    if (!g) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "batch forward: the runners are not of one native group");
    sd_err_clear(&g->err);
    return batch_native(g, segs, n_segs, pass, ctx, eb);
}
