/* sd_drafter_eagle3.c — the "eagle3" drafter (core/sd_drafter.h): chains drafted by an
 * EAGLE-3 head (core/sd_eagle3.h, docs/EAGLE3.md) from the target's captured hidden states.
 *
 * The sequence's draft runner is a head runner h (sd_eagle3_runner). For a sequence of
 * length L (N = L - 1 verified positions, tokens[N] pending) the head's draft cache holds
 * exactly the N rows p = 0 .. N-1, row p = (token t_{p+1}, g_p = fc(aux_p), position p),
 * aux_p = concat(hs[a], hs[b], hs[c]) of the target at position p; h->root / h->groot are
 * the draft logits and g_next of row N - 1 (they propose t_{N+1}).
 *   begin    the target's prefill is done here, with capture (the protocol leaves it to a
 *            SD_DRAFTER_TARGET_HIDDEN drafter), then the head's rows 0 .. N-1;
 *   plan     a chain of shape.depth (trees: not yet, UNSUPPORTED); x->aux = h->aux: the
 *            verify pass captures its rows there;
 *   draft    (catch-up when the head is behind: after a plain step, a settle, a failed
 *            round: the target re-forwards the missing rows with capture, which rewrites
 *            its cache rows with the same values) then the chain: q row j = the head's
 *            distribution for x_{j+1} (h->ops->q: softmax over the draft vocabulary placed at
 *            the d2t ids, zero elsewhere, processed with the sequence's sampling params like
 *            the target's rows), x_{j+1} drawn from it by the executor's draft_sample; row
 *            (x_{j+1}, g_next of the previous row, position N + j) gives the next
 *            distribution. The chain rows are dropped from the cache right after drafting;
 *   observe  after accepting m drafts: rows N .. N + m = (out[0..m], aux rows 0..m of the
 *            verify pass; a tree's: the root's and the accepted path's nodes) — the cache
 *            again holds exactly the verified positions. aux is the target group's memory
 *            (device memory on CUDA): this file never reads it, the head's fuse does.
 * Exactness: every draft token is drawn from the q row handed to the verifier, so the
 * rejection rule is exact for any temperature; greedy and match accept on the target's
 * rows alone (docs/DRAFTERS.md). The head's logits are NOT scaled by anything else. */
#include "sd_eagle3.h"
#include "sd_round.h"

#include <math.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_grammar.h"

/* How x_{j+1} is drawn from q row j: the executor's sampler. tests/eagle3/test_eagle3_mutant.c
 * compiles this file with a broken rule (the argmax) to show the G-test catches it. */
#ifndef SD_E3_DRAFT_SAMPLE
#define SD_E3_DRAFT_SAMPLE(ex, x, j) (ex)->ops->draft_sample((ex), &(x), 1, (j))
#endif

static specdec_status e3d_fail(const sd_eagle3_runner *h, specdec_status st, sd_errbuf *eb) {
    return sd_fail(eb, st, "%s", h->base.err.msg);
}

/* g rows 0 .. n-1 = fc of the captured rows h->aux[src[i]] (src NULL: row i), one fuse per run
 * of consecutive source rows. aux is the target group's memory (device memory for a CUDA
 * head): only the head's fuse reads it, never this file. */
static specdec_status e3d_fuse_rows(sd_eagle3_runner *h, const int32_t *src, int32_t n) {
    const size_t W = (size_t)h->aux_w;
    const size_t H = (size_t)h->hid;
    specdec_status st = SPECDEC_OK;
    for (int32_t i = 0, j; i < n && st == SPECDEC_OK; i = j) {
        const int32_t r0 = src ? src[i] : i;
        for (j = i + 1; j < n && (src ? src[j] : j) == r0 + (j - i);) j++;
        st = h->ops->fuse(h, h->aux + (size_t)r0 * W, j - i, h->g + (size_t)i * H);
    }
    return st;
}

/* Head rows p0 .. p0 + n - 1 from the captured rows h->aux[src[i]] (src NULL: rows 0..n-1):
 * tokens tok[0..n), the last row's logits and g_next become the root. */
static specdec_status e3d_extend(sd_eagle3_runner *h, const int32_t *tok, const int32_t *src, int32_t p0, int32_t n,
                                 sd_errbuf *eb) {
    const int32_t H = h->hid;
    specdec_status st = e3d_fuse_rows(h, src, n);
    for (int32_t i = 0; i < n; i++) h->pos[i] = p0 + i;
    /* rows 0 .. n-2 only enter the cache (k, v); the last row gives the root */
    if (st == SPECDEC_OK && n > 1) st = h->ops->step(h, tok, h->g, h->pos, n - 1, NULL, 0, NULL, NULL);
    if (st == SPECDEC_OK)
        st = h->ops->step(h, tok + n - 1, h->g + (size_t)(n - 1) * (size_t)H, h->pos + n - 1, 1, NULL, 0, h->root,
                          h->groot);
    if (st != SPECDEC_OK) {
        h->root_row = -1;
        return e3d_fail(h, st, eb);
    }
    h->root_row = p0 + n - 1;
    return SPECDEC_OK;
}

/* Bring the head to the N = length - 1 verified rows with a valid root: the target
 * re-forwards the rows the head lacks (and the last one, when the root is stale), capturing. */
static specdec_status e3d_catch_up(sd_eagle3_runner *h, const sd_round_seq *s, sd_errbuf *eb) {
    const int32_t N = s->length - 1;
    int32_t kv = sd_runner_kv_len(&h->base);
    if (kv > N) sd_runner_truncate(&h->base, kv = N);
    if (N < 1 || (kv == N && h->root_row == N - 1)) return SPECDEC_OK;
    if (kv == N) sd_runner_truncate(&h->base, kv = N - 1);
    sd_runner *t = h->target;
    int32_t chunk = h->rows < t->max_batch ? h->rows : t->max_batch;
    if (s->prompt_buf && chunk > SD_ROUND_PROMPT_ROWS) chunk = SD_ROUND_PROMPT_ROWS; /* begin, prompt logprobs */
    while (kv < N) {
        const int32_t n = N - kv < chunk ? N - kv : chunk;
        const sd_runner_seg seg = {t, s->tokens + kv, n, kv, NULL, 0, s->prompt_buf, h->aux, NULL};
        specdec_status st = sd_runner_forward_batch(&seg, 1, eb);
        if (st != SPECDEC_OK) return st;
        if (s->prompt_buf) s->prompt_rows(s->prompt_ctx, s->prompt_buf, t->n_vocab, kv, n);
        if ((st = e3d_extend(h, s->tokens + kv + 1, NULL, kv, n, eb)) != SPECDEC_OK) return st;
        kv += n;
    }
    return SPECDEC_OK;
}

static sd_eagle3_runner *e3d_head(sd_runner *d, sd_errbuf *eb) {
    sd_eagle3_runner *h = sd_eagle3_runner_of(d);
    if (!h) sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "eagle3 drafter: the draft runner is not an EAGLE-3 head");
    return h;
}

/* ------------------------------------------------------------------------- */
/* structured output: drafts the grammar allows                               */
/* ------------------------------------------------------------------------- */
/* The grammar state after the output so far and then path[0..n_path) (a chain's drafts), as the
 * target's rows get it (kernels/cpu/sd_cpu_logits_grammar.c); -1 without a grammar. */
static specdec_status e3d_gstate(const sd_round_seq *s, const int32_t *path, int32_t n_path, int32_t *gs,
                                 sd_errbuf *eb) {
    const sd_logits_proc *lp = s->proc;
    *gs = -1;
    if (!lp || !lp->grammar) return SPECDEC_OK;
    return sd_grammar_state_at(lp->grammar, lp->gcur, s->tokens + lp->n_prompt, s->length - lp->n_prompt, path, n_path,
                               lp->end, lp->n_end, &lp->gate, gs, eb);
}

/* The state after token t from state gs (not live: stays so; sd_grammar_step). */
static int32_t e3d_gnext(const sd_logits_proc *lp, int32_t gs, int32_t t) {
    return lp ? sd_grammar_step(lp->grammar, gs, t, lp->end, lp->n_end, &lp->gate) : -1;
}

/* Draft logits lg [Vd] with every token live state gs refuses at -inf (the mask the target's rows
 * get), so the head proposes only tokens the target can accept: *out = the masked copy
 * (h->gmask + V). *out = lg when gs is not live. When the state allows no token of the draft
 * vocabulary (e.g. a complete grammar allows only EOS, which a head's draft vocabulary may lack):
 * with allow_none (a tree node) the copy is all -inf, so the node gets no children; otherwise (a
 * chain step, the tree's root: something must be proposed) *out = lg, and that draft is refused
 * with certainty (exact, only wasted). Exactness is untouched either way: every draft is drawn
 * from the q row built from *out (or is a deterministic tree child), and the verifier uses that
 * row (docs/STRUCTURED.md). */
static specdec_status e3d_mask(sd_eagle3_runner *h, const sd_logits_proc *lp, int32_t gs, const float *lg,
                               int allow_none, const float **out, sd_errbuf *eb) {
    *out = lg;
    if (gs < 0 || sd_grammar_gated(gs) || !lp || !lp->grammar) return SPECDEC_OK; /* gated: nothing masked */
    const int32_t V = h->base.n_vocab, Vd = h->vd;
    if (!h->gmask && !(h->gmask = sd_malloc(((size_t)V + (size_t)Vd) * sizeof(float))))
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "eagle3 drafter: grammar mask of %d floats", (int)(V + Vd));
    float *row = h->gmask, *ml = h->gmask + V;
    memset(row, 0, (size_t)V * sizeof(float));
    int only_end = 0;
    const specdec_status st = sd_grammar_apply(lp->grammar, gs, row, V, lp->end, lp->n_end, &only_end, eb);
    if (st != SPECDEC_OK) return st;
    int32_t n_ok = 0;
    for (int32_t i = 0; i < Vd; i++) {
        const int ok = row[h->d2t[i]] == 0.0f;
        ml[i] = ok ? lg[i] : -INFINITY;
        n_ok += ok;
    }
    if (n_ok || allow_none) *out = ml;
    return SPECDEC_OK;
}

/* ------------------------------------------------------------------------- */
/* EAGLE-2 dynamic trees (docs/EAGLE3.md §8.1)                                */
/* ------------------------------------------------------------------------- */
/* Top-k children per expanded node, by cumulative draft log-probability; the frontier of
 * each level = the k best new candidates; after `depth` levels the `budget` best of all
 * candidates form the tree (scores do not increase along a path, ties keep the earlier
 * candidate, so every kept node's parent is kept). Children are deterministic: the
 * verifier runs its deterministic-tree rule (q one-hot on each child; exact in every mode). */
#define E3T_K 8                                   /* most children per node */
#define E3T_POOL (E3T_K + SPECDEC_MAX_DRAFT * E3T_K * E3T_K)

typedef struct e3t_node {
    int32_t token, parent, depth, row; /* parent: pool index (-1: the root); row: head cache row (-1: none) */
    int32_t gstate;                    /* the grammar state after the node's path (-1: no grammar / not live) */
    double score;
} e3t_node;

typedef struct e3t {
    e3t_node pool[E3T_POOL];
    int32_t n, k;
    const sd_logits_proc *lp;          /* the sequence's processors (a grammar masks the children) */
    int32_t order[E3T_POOL];
    int32_t tree_id[E3T_POOL];
} e3t;

/* The k best draft ids of logits [Vd] as children of pool node `parent` (score base; gs: the
 * parent's grammar state, lg already masked by it). */
static void e3t_children(e3t *t, const sd_eagle3_runner *h, const float *lg, int32_t parent, double base, int32_t depth,
                         int32_t gs) {
    const int32_t Vd = h->vd;
    double mx = lg[0], z = 0;
    for (int32_t i = 1; i < Vd; i++) mx = lg[i] > mx ? lg[i] : mx;
    for (int32_t i = 0; i < Vd; i++) z += exp((double)lg[i] - mx);
    const double lz = mx + log(z);
    int32_t best[E3T_K];
    for (int32_t j = 0; j < t->k; j++) { /* selection: the j-th best, lowest id on ties */
        best[j] = -1;
        for (int32_t i = 0; i < Vd; i++) {
            int taken = 0;
            for (int32_t q = 0; q < j && !taken; q++) taken = best[q] == i;
            if (!taken && (best[j] < 0 || lg[i] > lg[best[j]])) best[j] = i;
        }
        if (best[j] < 0 || t->n >= E3T_POOL || lg[best[j]] == -INFINITY) return; /* masked: no more children */
        const int32_t tok = h->d2t[best[j]];
        t->pool[t->n++] = (e3t_node){tok, parent, depth, -1, e3d_gnext(t->lp, gs, tok), base + (double)lg[best[j]] - lz};
    }
}

/* Expand the k best candidates of pool[lo, hi): one head call over them (tree rows over the
 * shared prefix of N rows), then their children. */
static specdec_status e3t_level(e3t *t, sd_eagle3_runner *h, int32_t lo, int32_t hi, int32_t N, int32_t d) {
    int32_t fr[E3T_K], nf = 0;
    for (int32_t i = lo; i < hi; i++) { /* insertion into the k best by score */
        int32_t j = nf < t->k ? nf++ : t->k;
        if (j == t->k && t->pool[i].score <= t->pool[fr[t->k - 1]].score) continue;
        if (j == t->k) j--;
        while (j > 0 && t->pool[fr[j - 1]].score < t->pool[i].score) fr[j] = fr[j - 1], j--;
        fr[j] = i;
    }
    const int32_t H = h->hid, base = sd_runner_kv_len(&h->base);
    int32_t par[E3T_K];
    for (int32_t j = 0; j < nf; j++) {
        const e3t_node *nd = &t->pool[fr[j]];
        const float *g = nd->parent < 0 ? h->groot : h->gnext + (size_t)t->pool[nd->parent].row * (size_t)H;
        memcpy(h->g + (size_t)j * (size_t)H, g, (size_t)H * sizeof(float));
        h->tok[j] = nd->token;
        h->pos[j] = N + d - 1;
        par[j] = nd->parent < 0 ? -1 : N + t->pool[nd->parent].row;
    }
    /* rows of this level follow the earlier levels' rows: slot = cache row - N */
    const specdec_status st = h->ops->step(h, h->tok, h->g, h->pos, nf, par, N, h->logits,
                                           h->gnext + (size_t)(base - N) * (size_t)H);
    if (st != SPECDEC_OK) return st;
    const size_t Vd = (size_t)h->vd;
    for (int32_t j = 0; j < nf; j++) {
        t->pool[fr[j]].row = base - N + j;
        const float *lg = h->logits + (size_t)j * Vd;
        const specdec_status ms = e3d_mask(h, t->lp, t->pool[fr[j]].gstate, lg, 1, &lg, &h->base.err);
        if (ms != SPECDEC_OK) return ms;
        e3t_children(t, h, lg, fr[j], t->pool[fr[j]].score, d + 1, t->pool[fr[j]].gstate);
    }
    return SPECDEC_OK;
}

/* The budget best candidates as an sd_tree (breadth first, siblings by score). */
static void e3t_build(e3t *t, sd_tree *tr, int32_t root_token, int32_t budget) {
    for (int32_t i = 0; i < t->n; i++) t->order[i] = i, t->tree_id[i] = -1;
    for (int32_t i = 1; i < t->n; i++) { /* stable insertion sort by score, descending */
        const int32_t v = t->order[i];
        int32_t j = i;
        while (j > 0 && t->pool[t->order[j - 1]].score < t->pool[v].score) t->order[j] = t->order[j - 1], j--;
        t->order[j] = v;
    }
    uint8_t keep[E3T_POOL] = {0};
    int32_t kept = 0;
    for (int32_t i = 0; i < t->n && kept < budget; i++) {
        const e3t_node *nd = &t->pool[t->order[i]];
        if (nd->parent >= 0 && !keep[nd->parent]) continue;
        keep[t->order[i]] = 1, kept++;
    }
    tr->n = 1;
    tr->token[0] = root_token, tr->parent[0] = -1, tr->depth[0] = 0;
    for (int32_t q = 0; q < tr->n; q++) { /* node q's kept children, best first */
        tr->child0[q] = tr->n, tr->n_child[q] = 0, tr->qrow[q] = -1, tr->sampled[q] = 0;
        for (int32_t i = 0; i < t->n; i++) {
            const int32_t c = t->order[i], pq = t->pool[c].parent;
            if (!keep[c] || (q == 0 ? pq != -1 : pq < 0 || t->tree_id[pq] != q)) continue;
            t->tree_id[c] = tr->n;
            tr->token[tr->n] = t->pool[c].token, tr->parent[tr->n] = q, tr->depth[tr->n] = tr->depth[q] + 1;
            tr->n++, tr->n_child[q]++;
        }
    }
}

static specdec_status e3d_tree(sd_eagle3_runner *h, sd_round_slot *x, sd_errbuf *eb) {
    e3t *t = h->work;
    const sd_draft_shape *sh = &x->s->shape;
    const int32_t N = x->s->length - 1;
    t->n = 0;
    t->k = 1;
    for (int32_t d = 0; d < sh->depth; d++) t->k = sh->width[d] > t->k ? sh->width[d] : t->k;
    if (t->k > E3T_K) t->k = E3T_K;
    t->lp = x->s->proc && x->s->proc->grammar ? x->s->proc : NULL;
    int32_t gs = -1;
    const float *lg = h->root;
    specdec_status st = e3d_gstate(x->s, NULL, 0, &gs, eb);
    if (st == SPECDEC_OK) st = e3d_mask(h, t->lp, gs, h->root, 0, &lg, eb);
    if (st != SPECDEC_OK) return st;
    e3t_children(t, h, lg, -1, 0.0, 1, gs);
    for (int32_t d = 1, lo = 0; d < x->depth && st == SPECDEC_OK; d++) {
        const int32_t hi = t->n, used = sd_runner_kv_len(&h->base) - N;
        if (used + t->k > h->rows || N + used + t->k > h->base.n_ctx) break; /* no room: a shallower tree */
        if (hi == lo) break; /* no new candidates (a grammar allowed none): nothing to expand */
        st = e3t_level(t, h, lo, hi, N, d);
        lo = hi;
    }
    sd_runner_truncate(&h->base, N);
    if (st != SPECDEC_OK) return e3d_fail(h, st, eb);
    e3t_build(t, &x->tr, x->vtok[0], x->budget);
    return SPECDEC_OK;
}

static specdec_status e3d_begin(sd_drafter *dr, sd_runner *d, const sd_round_seq *s, sd_errbuf *eb) {
    (void)dr;
    sd_eagle3_runner *h = e3d_head(d, eb);
    if (!h) return SPECDEC_ERR_INVALID_ARGUMENT;
    sd_runner_truncate(&h->base, 0);
    h->root_row = -1;
    return e3d_catch_up(h, s, eb);
}

static specdec_status e3d_plan(sd_drafter *dr, sd_round_slot *x, sd_errbuf *eb) {
    (void)dr;
    sd_eagle3_runner *h = e3d_head(x->d, eb);
    if (!h) return SPECDEC_ERR_INVALID_ARGUMENT;
    x->depth = x->s->length < 2 ? 0 : x->s->shape.depth;
    x->lag = 1;
    x->det = x->tree; /* a tree's children are deterministic (top-k) */
    x->aux = h->aux;
    if (x->tree) {
        if (!h->work && !(h->work = sd_calloc(1, sizeof(e3t))))
            return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "eagle3 drafter: tree workspace");
        x->tr.n = 1 + x->budget; /* the most the tree grown in draft() holds (the executor's rows) */
    }
    return SPECDEC_OK;
}

static specdec_status e3d_chain(sd_eagle3_runner *h, sd_exec *ex, sd_round_slot *x, sd_errbuf *eb) {
    const sd_round_seq *s = x->s;
    const int32_t N = s->length - 1, V = h->base.n_vocab;
    specdec_status st = SPECDEC_OK;
    for (int32_t j = 0; j < x->depth && st == SPECDEC_OK; j++) {
        if (j > 0) {
            st = h->ops->step(h, &x->vtok[j], j == 1 ? h->groot : h->gnext, &h->pos[0], 1, NULL, 0, h->logits,
                              h->gnext);
            if (st != SPECDEC_OK) return e3d_fail(h, st, eb);
        }
        float *q = x->q + (size_t)j * (size_t)V;
        const float *lg = j == 0 ? h->root : h->logits;
        if (s->proc && s->proc->grammar) { /* structured output: draw only what the grammar allows */
            int32_t gs = -1;
            st = e3d_gstate(s, x->vtok + 1, j, &gs, eb);
            if (st == SPECDEC_OK) st = e3d_mask(h, s->proc, gs, lg, 0, &lg, eb);
            if (st != SPECDEC_OK) return st;
        }
        st = h->ops->q(h, lg, &s->sp, s->mode == SPECDEC_VERIFY_GREEDY, q);
        if (st != SPECDEC_OK) return e3d_fail(h, st, eb);
        st = SD_E3_DRAFT_SAMPLE(ex, x, j);
        h->pos[0] = N + j; /* the next row: (x_{j+1}, g_next, position N + j) */
    }
    sd_runner_truncate(&h->base, N);
    return st;
}

static specdec_status e3d_draft(sd_drafter *dr, sd_exec *ex, sd_round_slot *const *xs, int32_t n, sd_errbuf *eb) {
    (void)dr;
    for (int32_t i = 0; i < n; i++) {
        sd_eagle3_runner *h = e3d_head(xs[i]->d, eb);
        if (!h) return SPECDEC_ERR_INVALID_ARGUMENT;
        specdec_status st = e3d_catch_up(h, xs[i]->s, eb);
        if (st == SPECDEC_OK) st = xs[i]->tree ? e3d_tree(h, xs[i], eb) : e3d_chain(h, ex, xs[i], eb);
        if (st != SPECDEC_OK) return st;
    }
    return SPECDEC_OK;
}

static specdec_status e3d_observe(sd_drafter *dr, sd_exec *ex, sd_round_slot *const *xs, int32_t n, sd_errbuf *eb) {
    (void)dr;
    (void)ex;
    for (int32_t i = 0; i < n; i++) {
        sd_round_slot *x = xs[i];
        sd_eagle3_runner *h = e3d_head(x->d, eb);
        if (!h) return SPECDEC_ERR_INVALID_ARGUMENT;
        const int32_t N = x->s->length - 1, m = x->s->n_accepted;
        if (sd_runner_kv_len(&h->base) != N || h->root_row != N - 1) {
            h->root_row = -1; /* behind: the next draft catches up */
            continue;
        }
        int32_t src[SD_RUNNER_TREE_MAX]; /* a tree: the root's row, then the accepted path's */
        src[0] = 0;
        for (int32_t j = 0; x->tree && j < m; j++) src[j + 1] = x->path[j];
        const specdec_status st = e3d_extend(h, x->s->out, x->tree ? src : NULL, N, m + 1, eb);
        if (st != SPECDEC_OK) return st;
    }
    return SPECDEC_OK;
}

static specdec_status e3d_settle(sd_drafter *dr, sd_runner *d, const sd_round_seq *s, int32_t length, sd_errbuf *eb) {
    (void)dr;
    (void)s;
    sd_eagle3_runner *h = e3d_head(d, eb);
    if (!h) return SPECDEC_ERR_INVALID_ARGUMENT;
    sd_runner_truncate(d, length - 1);
    if (h->root_row != sd_runner_kv_len(d) - 1) h->root_row = -1;
    return SPECDEC_OK;
}

static const sd_drafter_ops eagle3_ops = {"eagle3",   SPECDEC_DRAFT_EAGLE3, SD_DRAFTER_RUNNER | SD_DRAFTER_TARGET_HIDDEN,
                                          e3d_begin,  e3d_plan,             e3d_draft,
                                          e3d_observe, e3d_settle,          NULL};
static sd_drafter eagle3_drafter = {&eagle3_ops};

sd_drafter *sd_drafter_eagle3(void) { return &eagle3_drafter; }

/* "mtp": the same drafting over an MTP layer's head runner (backends/cpu/sd_mtp_cpu.h); only what
 * statistics report differs. */
static const sd_drafter_ops mtp_ops = {"mtp",       SPECDEC_DRAFT_MTP, SD_DRAFTER_RUNNER | SD_DRAFTER_TARGET_HIDDEN,
                                       e3d_begin,   e3d_plan,          e3d_draft,
                                       e3d_observe, e3d_settle,        NULL};
static sd_drafter mtp_drafter = {&mtp_ops};

sd_drafter *sd_drafter_mtp(void) { return &mtp_drafter; }
