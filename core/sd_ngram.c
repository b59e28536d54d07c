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
 * from the end, comparing backwards), no allocation.
 *
 * The gate (sd_round_seq.ngram set, gate 1; docs/DRAFTERS.md "When to propose"): a draft
 * node proposed from a match of n tokens is accepted, given its parent was, with
 * probability a = (A + 1) / (A + R + 2) from bucket n's decayed counts of accepted drafts
 * A and rejections R; siblings are tried in order (child i is the target's token with
 * probability a_i * prod_{j<i} (1 - a_j)), so each node has a value v = the probability
 * that it is accepted. The round keeps the N best nodes (a chain: its first N tokens; a
 * tree: the N highest values, a subtree since a child's value is below its parent's)
 * with the N maximising (1 + sum v) / (c0 + c1 * (N + 1)); N = 0 (a plain step, cost
 * c0 + c1) when nothing beats it. The decision reads only the sequence so far and the
 * outcomes of earlier rounds: every verify mode stays exact. observe() adds the round's
 * outcome to the counts (decay NGRAM_DECAY per observation); plan() ages every count by
 * NGRAM_FADE per round, and a bucket whose evidence has faded below NGRAM_STALE (a
 * single observation, ~35 rounds old) gets a one-token probe even when the gate is
 * shut: text whose predictability changes is noticed, at the cost of one verified token
 * per bucket every few dozen rounds.
 *
 * Across requests (sd_round_seq.corpus set: specdec_engine_params.ngram_corpus_tokens): the
 * corpus of finished generations (core/sd_ngram_corpus.c) is searched too; a chain takes
 * its best match when that one's suffix is longer than the sequence's own, a tree inserts
 * both lists merged by suffix length (the sequence's first on ties). The gate's buckets
 * are the same (by suffix length). Still deterministic drafts, read before the round's
 * randomness: every verify mode stays exact. */
#include <string.h>

#include "sd_grammar.h"
#include "sd_round.h"

#define NGRAM_TREE_CANDIDATES 64
/* the decay of a bucket's counts per round that observes it (as adaptive γ's, runtime/sd_adapt.c) */
#define NGRAM_DECAY 0.9
/* the fading of every count per round: evidence ~35 rounds old weighs half */
#define NGRAM_FADE 0.98
/* the evidence (accepted + rejected counts) below which a bucket is probed */
#define NGRAM_STALE 0.5

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

/* ---- the gate ------------------------------------------------------------------------ */
static int8_t ngram_bucket(int32_t n) { return (int8_t)((n < SD_NGRAM_BUCKETS ? n : SD_NGRAM_BUCKETS) - 1); }

/* The acceptance estimate of bucket b: in (0, 1). */
static double ngram_alpha(const sd_ngram_state *g, int8_t b) {
    return (g->acc[b] + 1.0) / (g->acc[b] + g->rej[b] + 2.0);
}

/* How many of the nodes whose values are v[0..m) (descending) to propose: the N in
 * [0, m] maximising (1 + v[0] + ... + v[N-1]) / (c0 + c1 * (N + 1)), the smallest on ties;
 * at least 1 when the first node's bucket b0 is stale (a probe). */
static int32_t ngram_gate_count(const sd_ngram_state *g, const double *v, int32_t m, int8_t b0) {
    double sum = 1.0, best = 1.0 / (g->c0 + g->c1);
    int32_t n = 0;
    for (int32_t i = 0; i < m; i++) {
        sum += v[i];
        const double r = sum / (g->c0 + g->c1 * (double)(i + 2));
        if (r > best * (1.0 + 1e-12)) best = r, n = i + 1;
    }
    return n == 0 && m > 0 && g->acc[b0] + g->rej[b0] < NGRAM_STALE ? 1 : n;
}

/* Every count fades a little each round (plan). */
static void ngram_age(sd_ngram_state *g) {
    for (int32_t b = 0; b < SD_NGRAM_BUCKETS; b++) g->acc[b] *= NGRAM_FADE, g->rej[b] *= NGRAM_FADE;
}

/* The corpus's best matches for sequence s (sd_ngram_corpus_scan), at most cap; 0 without a corpus. */
static int32_t ngram_corpus_scan(const sd_round_seq *s, int32_t cap, sd_ngram_found *found) {
    const int32_t depth = s->shape.depth < SPECDEC_MAX_DRAFT ? s->shape.depth : SPECDEC_MAX_DRAFT;
    return s->corpus ? sd_ngram_corpus_scan(s->corpus, s->tokens, s->length, s->ngram_min, s->ngram_max, depth, cap,
                                            found)
                     : 0;
}

/* ---- trees --------------------------------------------------------------------------- */
/* A trie under the pending token, grown in candidate order. */
typedef struct ngram_trie {
    int32_t n;                                   /* nodes, root included */
    int32_t token[SD_RUNNER_TREE_MAX], parent[SD_RUNNER_TREE_MAX], depth[SD_RUNNER_TREE_MAX];
    int32_t kids[SD_RUNNER_TREE_MAX];
    int8_t bucket[SD_RUNNER_TREE_MAX];           /* of the candidate that created the node */
} ngram_trie;

/* Structured output: the grammar state after a node's path (gs[node]), TRIE_UNCHECKED when not
 * checked (no grammar, or past an automaton limit); the root's is the output's. A token the grammar refuses
 * is not inserted, nor anything of its candidate after it (the tree analogue of the chain cut in
 * core/sd_round.c round_grammar_trim: such a node has target probability 0 and is never
 * accepted), so the budget goes to tokens the target can accept; an end token keeps the state. */
#define TRIE_UNCHECKED INT32_MIN /* a node's state when it is not checked (not SD_FSM_DEAD) */
static int32_t trie_gnext(const sd_logits_proc *lp, int32_t gs, int32_t tok) {
    if (!lp || gs < 0) return TRIE_UNCHECKED;
    const int32_t ns = sd_grammar_step(lp->grammar, gs, tok, lp->end, lp->n_end, &lp->gate);
    return ns == SD_FSM_DEAD ? SD_FSM_DEAD : ns < 0 ? TRIE_UNCHECKED : ns;
}

/* Insert tokens c[0..len) (a match in bucket b) below the root within the widths and the budget
 * (lp: the sequence's processors when it has a grammar, gs the nodes' states). */
static void trie_insert(ngram_trie *t, const int32_t *c, int32_t len, int8_t b, const sd_draft_shape *sh,
                        int32_t budget, const sd_logits_proc *lp, int32_t *gs) {
    int32_t x = 0;
    for (int32_t d = 0; d < len; d++) {
        int32_t y = -1;
        for (int32_t i = 1; i < t->n && y < 0; i++)
            if (t->parent[i] == x && t->token[i] == c[d]) y = i;
        if (y < 0) {
            if (t->kids[x] >= sh->width[d] || t->n - 1 >= budget) return;
            const int32_t ns = trie_gnext(lp, gs[x], c[d]);
            if (ns == SD_FSM_DEAD) return; /* refused: not proposed */
            gs[t->n] = ns;
            y = t->n++;
            t->token[y] = c[d];
            t->parent[y] = x;
            t->depth[y] = d + 1;
            t->kids[y] = 0;
            t->bucket[y] = b;
            t->kids[x]++;
        }
        x = y;
    }
}

/* Keep the gate's nodes of t: the N of highest value (ties: the earlier node), N by
 * ngram_gate_count. A node's value is below its parent's, so what is kept is a subtree;
 * creation order (the siblings' order) is preserved. */
static void trie_gate(ngram_trie *t, const sd_ngram_state *g) {
    double v[SD_RUNNER_TREE_MAX], miss[SD_RUNNER_TREE_MAX], sv[SD_RUNNER_TREE_MAX];
    int32_t ord[SD_RUNNER_TREE_MAX], id[SD_RUNNER_TREE_MAX];
    uint8_t keep[SD_RUNNER_TREE_MAX];
    v[0] = miss[0] = 1.0;
    for (int32_t i = 1; i < t->n; i++) { /* parents precede their children */
        const double a = ngram_alpha(g, t->bucket[i]);
        const int32_t pa = t->parent[i];
        v[i] = v[pa] * miss[pa] * a;
        miss[pa] *= 1.0 - a;
        miss[i] = 1.0;
    }
    const int32_t m = t->n - 1;
    for (int32_t i = 0; i < m; i++) { /* nodes 1.. by value descending, stable */
        int32_t j = i;
        for (; j > 0 && v[ord[j - 1]] < v[i + 1]; j--) ord[j] = ord[j - 1];
        ord[j] = i + 1;
    }
    for (int32_t i = 0; i < m; i++) sv[i] = v[ord[i]];
    const int32_t keep_n = ngram_gate_count(g, sv, m, m > 0 ? t->bucket[ord[0]] : 0);
    memset(keep, 0, sizeof keep);
    keep[0] = 1;
    for (int32_t i = 0; i < keep_n; i++) keep[ord[i]] = 1;
    int32_t n = 0;
    for (int32_t i = 0; i < t->n; i++) {
        if (!keep[i]) continue;
        id[i] = n;
        t->token[n] = t->token[i];
        t->depth[n] = t->depth[i];
        t->bucket[n] = t->bucket[i];
        t->parent[n] = i == 0 ? -1 : id[t->parent[i]];
        t->kids[n] = 0;
        if (i > 0) t->kids[t->parent[n]]++;
        n++;
    }
    t->n = n;
}

/* The trie in breadth-first order with contiguous children (creation order among
 * siblings) as the proposal's tree, the nodes' buckets into bucket (may be NULL); its depth. */
static int32_t trie_to_tree(const ngram_trie *t, sd_tree *tr, int8_t *bucket) {
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
        if (bucket) bucket[k] = t->bucket[i];
        if (t->depth[i] > depth) depth = t->depth[i];
    }
    for (int32_t k = n - 1; k > 0; k--) tr->child0[tr->parent[k]] = k; /* the first child's id */
    return depth;
}

static specdec_status ngram_plan_tree(sd_round_slot *x, sd_errbuf *eb) {
    const sd_round_seq *s = x->s;
    const int32_t L = s->length;
    const sd_logits_proc *lp = s->proc && s->proc->grammar ? s->proc : NULL;
    int32_t gs[SD_RUNNER_TREE_MAX];
    gs[0] = TRIE_UNCHECKED;
    if (lp) {
        const specdec_status st = sd_grammar_state_at(lp->grammar, lp->gcur, s->tokens + lp->n_prompt, L - lp->n_prompt,
                                                      NULL, 0, lp->end, lp->n_end, &lp->gate, &gs[0], eb);
        if (st != SPECDEC_OK) return st;
    }
    int32_t ce[NGRAM_TREE_CANDIDATES], cn[NGRAM_TREE_CANDIDATES];
    const int32_t m = ngram_scan(s->tokens, L, s->ngram_min, s->ngram_max, NGRAM_TREE_CANDIDATES, ce, cn);
    sd_ngram_found cf[NGRAM_TREE_CANDIDATES];
    const int32_t mc = ngram_corpus_scan(s, NGRAM_TREE_CANDIDATES, cf);
    ngram_trie t;
    t.n = 1;
    t.token[0] = s->tokens[L - 1];
    t.parent[0] = -1;
    t.depth[0] = 0;
    t.kids[0] = 0;
    t.bucket[0] = 0;
    /* the sequence's candidates and the corpus's, by suffix length (the sequence's first on ties) */
    for (int32_t i = 0, j = 0; (i < m || j < mc) && t.n - 1 < x->budget;) {
        if (i < m && (j == mc || cn[i] >= cf[j].n)) {
            int32_t len = L - 1 - ce[i];
            if (len > s->shape.depth) len = s->shape.depth;
            trie_insert(&t, s->tokens + ce[i] + 1, len, ngram_bucket(cn[i]), &s->shape, x->budget, lp, gs);
            i++;
        } else {
            trie_insert(&t, cf[j].tok, cf[j].len, ngram_bucket(cf[j].n), &s->shape, x->budget, lp, gs);
            j++;
        }
    }
    if (s->ngram && s->ngram->gate && t.n > 1) trie_gate(&t, s->ngram);
    x->depth = t.n > 1 ? trie_to_tree(&t, &x->tr, s->ngram ? s->ngram->bucket : NULL) : 0;
    return SPECDEC_OK;
}

/* ---- chains -------------------------------------------------------------------------- */
static void ngram_plan_chain(sd_round_slot *x) {
    const sd_round_seq *s = x->s;
    sd_ngram_state *g = s->ngram;
    int32_t e = -1, n = 0;
    x->depth = 0;
    const int32_t *from = NULL;
    int32_t k = 0;
    if (ngram_scan(s->tokens, s->length, s->ngram_min, s->ngram_max, 1, &e, &n) > 0)
        from = s->tokens + e + 1, k = s->length - 1 - e;
    sd_ngram_found f; /* a longer match across requests (none can be when the sequence's is ngram_max long) */
    if (n < s->ngram_max && ngram_corpus_scan(s, 1, &f) == 1 && f.n > n)
        from = f.tok, k = f.len, n = f.n;
    if (!from) return;
    if (k > s->shape.depth) k = s->shape.depth;
    const int8_t b = ngram_bucket(n);
    if (g && g->gate) {
        double v[SPECDEC_MAX_DRAFT];
        const double a = ngram_alpha(g, b);
        for (int32_t d = 0; d < k; d++) v[d] = (d ? v[d - 1] : 1.0) * a;
        k = ngram_gate_count(g, v, k, b);
    }
    memcpy(x->vtok + 1, from, (size_t)k * sizeof *x->vtok);
    for (int32_t d = 1; g && d <= k; d++) g->bucket[d] = b;
    x->depth = k;
}

static specdec_status ngram_plan(sd_drafter *dr, sd_round_slot *x, sd_errbuf *eb) {
    (void)dr;
    const sd_round_seq *s = x->s;
    if (s->ngram_min < 1 || s->ngram_max < s->ngram_min || s->ngram_max > SD_NGRAM_MAX)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "ngram drafter: ngram_min %d, ngram_max %d (1 <= min <= max <= %d)",
                       (int)s->ngram_min, (int)s->ngram_max, SD_NGRAM_MAX);
    sd_ngram_state *g = s->ngram;
    if (g && g->gate && !(g->c1 >= 0 && g->c0 + g->c1 > 0))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "ngram drafter: cost c0 %g, c1 %g (c1 >= 0, c0 + c1 > 0)", g->c0,
                       g->c1);
    if (g) ngram_age(g);
    x->det = 1;
    x->lag = 0;
    if (x->tree) return ngram_plan_tree(x, eb);
    ngram_plan_chain(x);
    return SPECDEC_OK;
}

/* ---- observe ------------------------------------------------------------------------- */
/* The round's outcome into the counts of the buckets it tried: a chain's accepted tokens
 * and its rejection; a tree's tried siblings level by level along the accepted path (those
 * before the accepted child, or all of them, rejected). */
static void ngram_learn(const sd_round_slot *x) {
    sd_ngram_state *g = x->s->ngram;
    double da[SD_NGRAM_BUCKETS] = {0}, dr[SD_NGRAM_BUCKETS] = {0};
    uint8_t hit[SD_NGRAM_BUCKETS] = {0};
    const int32_t na = x->s->n_accepted;
    if (!x->tree) {
        const int8_t b = g->bucket[1];
        da[b] += na;
        dr[b] += na < x->depth;
        hit[b] = 1;
    } else {
        for (int32_t lv = 0, pa = 0; pa >= 0; lv++) {
            const int32_t ok = lv < na ? x->path[lv] : -1, c0 = x->tr.child0[pa], nc = x->tr.n_child[pa];
            for (int32_t c = c0; c < c0 + nc; c++) {
                const int8_t b = g->bucket[c];
                hit[b] = 1;
                if (c == ok) {
                    da[b] += 1;
                    break;
                }
                dr[b] += 1;
            }
            pa = ok < x->tr.n ? ok : -1;
        }
    }
    for (int32_t b = 0; b < SD_NGRAM_BUCKETS; b++)
        if (hit[b]) {
            g->acc[b] = NGRAM_DECAY * g->acc[b] + da[b];
            g->rej[b] = NGRAM_DECAY * g->rej[b] + dr[b];
        }
}

static specdec_status ngram_observe(sd_drafter *dr, sd_exec *ex, sd_round_slot *const *xs, int32_t n, sd_errbuf *eb) {
    (void)dr, (void)ex, (void)eb;
    for (int32_t i = 0; i < n; i++)
        if (xs[i]->s->ngram && xs[i]->depth > 0) ngram_learn(xs[i]);
    return SPECDEC_OK;
}

static const sd_drafter_ops ngram_ops = {"ngram", SPECDEC_DRAFT_NGRAM, SD_DRAFTER_DETERMINISTIC, NULL, ngram_plan,
                                         NULL,    ngram_observe,       NULL,                     NULL};
static sd_drafter ngram_drafter = {&ngram_ops};

sd_drafter *sd_drafter_ngram(void) { return &ngram_drafter; }
