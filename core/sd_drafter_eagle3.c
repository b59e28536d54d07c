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
 *            verify pass) — the cache again holds exactly the verified positions.
 * Exactness: every draft token is drawn from the q row handed to the verifier, so the
 * rejection rule is exact for any temperature; greedy and match accept on the target's
 * rows alone (docs/DRAFTERS.md). The head's logits are NOT scaled by anything else. */
#include "sd_eagle3.h"
#include "sd_round.h"

#include <string.h>

/* How x_{j+1} is drawn from q row j: the executor's sampler. tests/eagle3/test_eagle3_mutant.c
 * compiles this file with a broken rule (the argmax) to show the G-test catches it. */
#ifndef SD_E3_DRAFT_SAMPLE
#define SD_E3_DRAFT_SAMPLE(ex, x, j) (ex)->ops->draft_sample((ex), &(x), 1, (j))
#endif

static specdec_status e3d_fail(const sd_eagle3_runner *h, specdec_status st, sd_errbuf *eb) {
    return sd_fail(eb, st, "%s", h->base.err.msg);
}

/* Head rows p0 .. p0 + n - 1 from the captured rows h->aux[0..n): tokens tok[0..n), the
 * last row's logits and g_next become the root. */
static specdec_status e3d_extend(sd_eagle3_runner *h, const int32_t *tok, int32_t p0, int32_t n, sd_errbuf *eb) {
    const int32_t H = h->hw->cfg.layer.hidden_size;
    specdec_status st = h->ops->fuse(h, h->aux, n, h->g);
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
    const int32_t chunk = h->rows < t->max_batch ? h->rows : t->max_batch;
    while (kv < N) {
        const int32_t n = N - kv < chunk ? N - kv : chunk;
        const sd_runner_seg seg = {t, s->tokens + kv, n, kv, NULL, 0, NULL, h->aux};
        specdec_status st = sd_runner_forward_batch(&seg, 1, eb);
        if (st != SPECDEC_OK) return st;
        if ((st = e3d_extend(h, s->tokens + kv + 1, kv, n, eb)) != SPECDEC_OK) return st;
        kv += n;
    }
    return SPECDEC_OK;
}

static sd_eagle3_runner *e3d_head(sd_runner *d, sd_errbuf *eb) {
    sd_eagle3_runner *h = sd_eagle3_runner_of(d);
    if (!h) sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "eagle3 drafter: the draft runner is not an EAGLE-3 head");
    return h;
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
    if (x->tree) return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "eagle3 drafter: draft trees are not implemented yet");
    x->depth = x->s->length < 2 ? 0 : x->s->shape.depth;
    x->lag = 1;
    x->det = 0;
    x->aux = h->aux;
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
        st = h->ops->q(h, j == 0 ? h->root : h->logits, &s->sp, s->mode == SPECDEC_VERIFY_GREEDY, q);
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
        if (st == SPECDEC_OK) st = e3d_chain(h, ex, xs[i], eb);
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
        const specdec_status st = e3d_extend(h, x->s->out, N, m + 1, eb);
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
