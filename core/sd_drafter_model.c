/* sd_drafter_model.c — the "model" drafter (core/sd_drafter.h): a draft model's runner
 * (the sequence's s->draft) proposes through the executor's draft primitives
 * (core/sd_round.h), so the drafting steps are written here once for every backend.
 *
 * For a sequence of length L (tokens[L-1] pending) whose draft runner has seen
 * tokens[0 .. L - lag) (lag 1 after a rejection or the prefill, 2 after a round that
 * accepted everything: it never forwarded the last accepted draft):
 *   step 0       catch-up: forward tokens[L - lag .. L) -> q row 0 (the last row);
 *   chain of γ   x_1 ~ q row 0 at L; for i = 1 .. γ-1: forward x_i at L + i - 1 ->
 *                q row i, x_{i+1} ~ q row i at L + i  (every step one batched
 *                forward and one sampling launch over the chains of the wave);
 *   tree         after the catch-up the executor grows it level by level
 *                (tree_grow: the host executor, backends/cpu/sd_host_tree.c).
 * Rollback (observe): the draft has seen up to L + γ - 1 (chain); it keeps at most the
 * accepted path, L + n tokens; a tree: the executor's tree_keep compacts its rows. */
#include "sd_round.h"

static specdec_status model_begin(sd_drafter *dr, sd_runner *d, const sd_round_seq *s, sd_errbuf *eb) {
    (void)dr;
    const int32_t from = sd_runner_kv_len(d); /* 0, or the rows a prefix cache gave it (sd_round_begin) */
    if (s->length - 1 <= from) return SPECDEC_OK;
    const specdec_status st = sd_runner_forward_chunked(d, s->tokens + from, s->length - 1 - from, from, NULL);
    return st == SPECDEC_OK ? SPECDEC_OK : sd_fail(eb, st, "draft prefill: %s", d->err.msg);
}

static specdec_status model_plan(sd_drafter *dr, sd_round_slot *x, sd_errbuf *eb) {
    (void)dr;
    const sd_round_seq *s = x->s;
    const int32_t L = s->length, dkv = sd_runner_kv_len(x->d);
    x->depth = s->shape.depth;
    x->lag = L - dkv;
    x->det = 0;
    if (x->lag < 1)
        return sd_fail(eb, SPECDEC_ERR_INTERNAL, "model drafter at length %d: draft cache holds %d tokens", (int)L,
                       (int)dkv);
    return SPECDEC_OK;
}

/* The catch-up of every slot, the chains step by step, then the trees. */
static specdec_status model_draft(sd_drafter *dr, sd_exec *ex, sd_round_slot *const *xs, int32_t n, sd_errbuf *eb) {
    (void)dr;
    const sd_exec_ops *op = ex->ops;
    sd_round_slot *sub[SD_ROUND_MAX_SEQS];
    int32_t steps = 0, n_trees = 0;
    specdec_status st = op->draft_forward(ex, xs, n, 0);
    for (int32_t i = 0; i < n; i++) {
        if (xs[i]->tree) n_trees++;
        else if (xs[i]->depth > steps) steps = xs[i]->depth;
    }
    for (int32_t step = 0; step < steps && st == SPECDEC_OK; step++) {
        int32_t m = 0;
        for (int32_t i = 0; i < n; i++)
            if (!xs[i]->tree && xs[i]->depth > step) sub[m++] = xs[i];
        if (step > 0) st = op->draft_forward(ex, sub, m, step);
        if (st == SPECDEC_OK) st = op->draft_sample(ex, sub, m, step);
    }
    if (st != SPECDEC_OK || n_trees == 0) return st;
    if (!op->tree_grow) return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "%s round: no draft trees", op->name);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (xs[i]->tree) sub[m++] = xs[i];
    return op->tree_grow(ex, sub, m);
}

static specdec_status model_observe(sd_drafter *dr, sd_exec *ex, sd_round_slot *const *xs, int32_t n,
                                    sd_errbuf *eb) {
    (void)dr;
    (void)eb;
    for (int32_t i = 0; i < n; i++) {
        sd_round_slot *x = xs[i];
        const int32_t L = x->s->length;
        if (x->tree) {
            const specdec_status st = ex->ops->tree_keep(ex, x);
            if (st != SPECDEC_OK) return st;
            continue;
        }
        if (ex->ops->note_kv) ex->ops->note_kv(ex, x->d, L + x->depth - 1);
        sd_runner_truncate(x->d, L + x->s->n_accepted);
    }
    return SPECDEC_OK;
}

static specdec_status model_settle(sd_drafter *dr, sd_runner *d, const sd_round_seq *s, int32_t length,
                                   sd_errbuf *eb) {
    (void)dr;
    (void)s;
    if (d && sd_runner_truncate(d, length - 1) != SPECDEC_OK) /* below a released window */
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "draft settle: %s", d->err.msg);
    return SPECDEC_OK;
}

static const sd_drafter_ops model_ops = {"model",     SPECDEC_DRAFT_MODEL, SD_DRAFTER_RUNNER, model_begin, model_plan,
                                         model_draft, model_observe,       model_settle,      NULL};
static sd_drafter model_drafter = {&model_ops};

sd_drafter *sd_drafter_model(void) { return &model_drafter; }
