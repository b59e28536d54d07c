/* sd_ngram.c — the "ngram" drafter (core/sd_drafter.h; docs/DRAFTERS.md): prompt
 * lookup over the sequence so far (prompt + output), no draft model.
 *
 * For tokens[0..L) (tokens[L-1] pending): the suffix of n tokens (n = ngram_max down to
 * ngram_min, n < L) is looked up among the earlier occurrences; an occurrence ending at
 * e (tokens[e-n+1 .. e] == tokens[L-n .. L), e <= L - 2) proposes what followed it,
 * tokens[e+1 .. e+1+depth) cut at L. Candidates are ranked by (n descending, e
 * descending): the longest suffix first, the most recent occurrence first.
 *   chain: the first candidate's continuation (up to γ tokens);
 *   tree:  the candidates' continuations (distinct occurrences, at most
 *          NGRAM_TREE_CANDIDATES) inserted in rank order into a trie under the pending
 *          token, each node taking at most width[d] children and the trie at most the
 *          shape's nodes (the budget), laid out breadth-first with contiguous children.
 * Every proposed token is deterministic (q one-hot, x->det = 1); no candidate depends
 * on the target, so every verify mode stays exact (docs/DRAFTERS.md). Nothing found:
 * depth 0, the round is a plain step. O(L * n) per round in the worst case (one scan
 * from the end, comparing backwards), no allocation. */
#include <string.h>

#include "sd_round.h"

#define NGRAM_TREE_CANDIDATES 64

/* Length of the match of the suffix tokens[..L) with the tokens ending at e, at most
 * cap. */
static int32_t ngram_match(const int32_t *tokens, int32_t L, int32_t e, int32_t cap) {
    int32_t k = 0;
    while (k < cap && k <= e && tokens[e - k] == tokens[L - 1 - k]) k++;
    return k;
}

/* The best candidates (end e, suffix length n) in rank order, at most cap; their count. */
static int32_t ngram_scan(const int32_t *tokens, int32_t L, int32_t nmin, int32_t nmax, int32_t cap, int32_t *ce,
                          int32_t *cn) {
    int32_t m = 0;
    if (nmax > L - 1) nmax = L - 1;
    if (nmin < 1 || nmin > nmax || cap < 1) return 0;
    for (int32_t e = L - 2; e >= nmin - 1; e--) {
        if (tokens[e] != tokens[L - 1]) continue;
        const int32_t n = ngram_match(tokens, L, e, nmax);
        if (n < nmin || (m == cap && n <= cn[m - 1])) continue;
        /* rank: n descending; equal n keeps scan order (e descending) */
        int32_t at = m < cap ? m : cap - 1;
        while (at > 0 && cn[at - 1] < n) at--;
        const int32_t last = m < cap ? m : cap - 1;
        memmove(ce + at + 1, ce + at, (size_t)(last - at) * sizeof *ce);
        memmove(cn + at + 1, cn + at, (size_t)(last - at) * sizeof *cn);
        ce[at] = e;
        cn[at] = n;
        if (m < cap) m++;
    }
    return m;
}

int32_t sd_ngram_chain(const int32_t *tokens, int32_t length, int32_t ngram_min, int32_t ngram_max,
                       int32_t max_tokens, int32_t *out) {
    int32_t e, n;
    if (!tokens || !out || max_tokens < 1 || ngram_scan(tokens, length, ngram_min, ngram_max, 1, &e, &n) == 0) return 0;
    int32_t k = length - 1 - e;
    if (k > max_tokens) k = max_tokens;
    memcpy(out, tokens + e + 1, (size_t)k * sizeof *out);
    return k;
}

/* A trie under the pending token, grown in candidate order. */
typedef struct ngram_trie {
    int32_t n;                                   /* nodes, root included */
    int32_t token[SD_RUNNER_TREE_MAX], parent[SD_RUNNER_TREE_MAX], depth[SD_RUNNER_TREE_MAX];
    int32_t kids[SD_RUNNER_TREE_MAX];
} ngram_trie;

/* Insert tokens c[0..len) below the root within the widths and the budget. */
static void trie_insert(ngram_trie *t, const int32_t *c, int32_t len, const sd_draft_shape *sh, int32_t budget) {
    int32_t x = 0;
    for (int32_t d = 0; d < len; d++) {
        int32_t y = -1;
        for (int32_t i = 1; i < t->n && y < 0; i++)
            if (t->parent[i] == x && t->token[i] == c[d]) y = i;
        if (y < 0) {
            if (t->kids[x] >= sh->width[d] || t->n - 1 >= budget) return;
            y = t->n++;
            t->token[y] = c[d];
            t->parent[y] = x;
            t->depth[y] = d + 1;
            t->kids[y] = 0;
            t->kids[x]++;
        }
        x = y;
    }
}

/* The trie in breadth-first order with contiguous children (creation order among
 * siblings) as the proposal's tree; its depth. */
static int32_t trie_to_tree(const ngram_trie *t, sd_tree *tr) {
    int32_t order[SD_RUNNER_TREE_MAX], id[SD_RUNNER_TREE_MAX], n = 1, depth = 0;
    order[0] = 0;
    id[0] = 0;
    for (int32_t h = 0; h < n; h++) /* children of order[h], in creation order */
        for (int32_t i = 1; i < t->n; i++)
            if (t->parent[i] == order[h]) id[i] = n, order[n++] = i;
    tr->n = n;
    for (int32_t k = 0; k < n; k++) {
        const int32_t i = order[k];
        tr->token[k] = t->token[i];
        tr->parent[k] = i == 0 ? -1 : id[t->parent[i]];
        tr->depth[k] = t->depth[i];
        tr->n_child[k] = t->kids[i];
        tr->child0[k] = 0;
        tr->qrow[k] = -1;
        tr->sampled[k] = 0;
        if (t->depth[i] > depth) depth = t->depth[i];
    }
    for (int32_t k = n - 1; k > 0; k--) tr->child0[tr->parent[k]] = k; /* the first child's id */
    return depth;
}

static specdec_status ngram_plan_tree(sd_round_slot *x) {
    const sd_round_seq *s = x->s;
    const int32_t L = s->length;
    int32_t ce[NGRAM_TREE_CANDIDATES], cn[NGRAM_TREE_CANDIDATES];
    const int32_t m = ngram_scan(s->tokens, L, s->ngram_min, s->ngram_max, NGRAM_TREE_CANDIDATES, ce, cn);
    ngram_trie t;
    t.n = 1;
    t.token[0] = s->tokens[L - 1];
    t.parent[0] = -1;
    t.depth[0] = 0;
    t.kids[0] = 0;
    for (int32_t i = 0; i < m && t.n - 1 < x->budget; i++) {
        int32_t len = L - 1 - ce[i];
        if (len > s->shape.depth) len = s->shape.depth;
        trie_insert(&t, s->tokens + ce[i] + 1, len, &s->shape, x->budget);
    }
    x->depth = t.n > 1 ? trie_to_tree(&t, &x->tr) : 0;
    return SPECDEC_OK;
}

static specdec_status ngram_plan(sd_drafter *dr, sd_round_slot *x, sd_errbuf *eb) {
    (void)dr;
    const sd_round_seq *s = x->s;
    if (s->ngram_min < 1 || s->ngram_max < s->ngram_min || s->ngram_max > SD_NGRAM_MAX)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "ngram drafter: ngram_min %d, ngram_max %d (1 <= min <= max <= %d)",
                       (int)s->ngram_min, (int)s->ngram_max, SD_NGRAM_MAX);
    x->det = 1;
    x->lag = 0;
    if (x->tree) return ngram_plan_tree(x);
    x->depth = sd_ngram_chain(s->tokens, s->length, s->ngram_min, s->ngram_max, s->shape.depth, x->vtok + 1);
    return SPECDEC_OK;
}

static const sd_drafter_ops ngram_ops = {"ngram", SPECDEC_DRAFT_NGRAM, SD_DRAFTER_DETERMINISTIC, NULL, ngram_plan,
                                         NULL,    NULL,                NULL,                     NULL};
static sd_drafter ngram_drafter = {&ngram_ops};

sd_drafter *sd_drafter_ngram(void) { return &ngram_drafter; }
