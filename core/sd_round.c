/* sd_round.c — THE round protocol (core/sd_round.h): prefill, planning, the draft
 * catch-up and drafting (through each sequence's drafter), the verify pass, the
 * verifier, rollback / compaction, settle and the stage timings, for every executor.
 * Executors (backends/) supply the stages' implementations; drafters (core/sd_drafter.h)
 * the proposals. Nothing here allocates after create. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime(CLOCK_MONOTONIC) under -std=c11 */
#include "sd_round.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sd_alloc.h"
#include "sd_grammar.h"

struct sd_round {
    sd_exec *ex, *fb;         /* borrowed: the executor and its fallback (may be NULL) */
    sd_runner *t, *d;         /* an engine's own runners (NULL: every sequence brings its own) */
    int32_t max_seqs;
    sd_round_slot *slots;     /* [max_seqs] */
    sd_round_slot **main;     /* [max_seqs] the executor's slots of a run() */
    sd_round_slot **side;     /* [max_seqs] the fallback's */
    sd_round_slot **sub;      /* [max_seqs] one drafter's slots of a wave */
    const char *last_exec;
    sd_errbuf err;
    int device_lost;
    float *prompt_buf;        /* NULL until a sequence asks for prompt rows: SD_ROUND_PROMPT_ROWS x prompt_v */
    int32_t prompt_v;
};

static double round_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *sd_round_err(const sd_round *rd) { return rd ? rd->err.msg : ""; }
int sd_round_device_lost(const sd_round *rd) { return rd ? rd->device_lost : 0; }
const char *sd_round_exec_name(const sd_round *rd) { return rd && rd->last_exec ? rd->last_exec : ""; }

/* A failure inside an executor's stage: its detail becomes the round's, a lost device
 * is sticky. */
static specdec_status round_exec_fail(sd_round *rd, sd_exec *ex, specdec_status st) {
    sd_err_copy(&rd->err, &ex->err);
    if (st == SPECDEC_ERR_DEVICE_LOST || ex->device_lost) rd->device_lost = 1;
    return st;
}

/* A runner call failed: "<what>: <detail>", DEVICE_LOST sticky. */
static specdec_status round_runner_fail(sd_round *rd, specdec_status st, const char *what, const sd_runner *r) {
    if (st == SPECDEC_ERR_DEVICE_LOST) rd->device_lost = 1;
    return sd_fail(&rd->err, st, "%s: %s", what, r->err.msg);
}

static sd_runner *seq_target(const sd_round *rd, const sd_round_seq *s) { return s->target ? s->target : rd->t; }
static sd_runner *seq_draft(const sd_round *rd, const sd_round_seq *s) { return s->target ? s->draft : rd->d; }
static int runner_drafter(const sd_drafter *dr) { return dr && (dr->ops->caps & SD_DRAFTER_RUNNER); }

static void round_invalidate(sd_round *rd, const sd_round_seq *s) {
    if (rd->ex && rd->ex->ops->invalidate) rd->ex->ops->invalidate(rd->ex, s);
    if (rd->fb && rd->fb->ops->invalidate) rd->fb->ops->invalidate(rd->fb, s);
}

/* ------------------------------------------------------------------------- */
/* begin / settle                                                             */
/* ------------------------------------------------------------------------- */
/* The prompt-rows buffer for target t (allocated on first use, or when V grows); NULL with
 * OUT_OF_MEMORY in rd->err. */
static float *round_prompt_buf(sd_round *rd, const sd_runner *t) {
    if (rd->prompt_buf && rd->prompt_v >= t->n_vocab) return rd->prompt_buf;
    sd_free(rd->prompt_buf);
    rd->prompt_v = 0;
    rd->prompt_buf = sd_malloc((size_t)SD_ROUND_PROMPT_ROWS * (size_t)t->n_vocab * sizeof(float));
    if (!rd->prompt_buf) {
        sd_fail(&rd->err, SPECDEC_ERR_OUT_OF_MEMORY, "round: prompt log-probabilities: %d x %d logits",
                SD_ROUND_PROMPT_ROWS, (int)t->n_vocab);
        return NULL;
    }
    rd->prompt_v = t->n_vocab;
    return rd->prompt_buf;
}

/* The target's prefill of tokens[0..length-1) with its logits, chunk by chunk, to prompt_rows. */
static specdec_status round_prefill_rows(sd_round *rd, sd_runner *t, const sd_round_seq *s) {
    const int32_t n = s->length - 1;
    for (int32_t off = 0; off < n; off += SD_ROUND_PROMPT_ROWS) {
        const int32_t c = n - off < SD_ROUND_PROMPT_ROWS ? n - off : SD_ROUND_PROMPT_ROWS;
        const specdec_status st = sd_runner_forward_chunked(t, s->tokens + off, c, off, rd->prompt_buf);
        if (st != SPECDEC_OK) return st;
        s->prompt_rows(s->prompt_ctx, rd->prompt_buf, t->n_vocab, off, c);
    }
    return SPECDEC_OK;
}

/* After a prefill: the prompt's rows of t (and d) are final; the pools may cache them. */
static void round_publish(const sd_round_seq *s, sd_runner *t, sd_runner *d) {
    if (!s->prefix_cache || s->length <= 1) return;
    sd_runner_prefix_publish(t, s->tokens, s->length - 1, s->prefix_salt);
    if (d) sd_runner_prefix_publish(d, s->tokens, s->length - 1, s->prefix_salt);
}

/* The first step of a begin: checks, caches reset, the cached prefix taken. */
static specdec_status round_begin_start(sd_round *rd, sd_round_seq *s, sd_runner *t, sd_runner *d, int hidden) {
    round_invalidate(rd, s);
    sd_runner_truncate(t, 0);
    if (d) sd_runner_truncate(d, 0);
    if (s->prompt_rows && s->length > 1 && !round_prompt_buf(rd, t)) return SPECDEC_ERR_OUT_OF_MEMORY;
    const int32_t n = s->length - 1;
    if (s->prefix_cache && n > 0 && !hidden && !s->prompt_rows) {
        s->prefix_queried = n;
        s->prefix_hit = sd_runner_prefix_attach(t, s->tokens, n, s->prefix_salt);
    }
    return SPECDEC_OK;
}

/* The target's prefill done: the drafter begins (a model drafter prefills its runner from
 * what it holds, core/sd_drafter_model.c), the pools may cache the rows. */
static specdec_status round_begin_finish(sd_round *rd, sd_round_seq *s, sd_runner *t, sd_runner *d, int hidden) {
    if (!s->drafter || !s->drafter->ops->begin) {
        round_publish(s, t, NULL);
        return SPECDEC_OK;
    }
    sd_runner *dm = runner_drafter(s->drafter) && !hidden ? d : NULL; /* a draft model's runner */
    if (s->prefix_cache && s->length > 1 && dm)
        (void)sd_runner_prefix_attach(dm, s->tokens, s->length - 1, s->prefix_salt);
    s->prompt_buf = s->prompt_rows && hidden ? rd->prompt_buf : NULL;
    const specdec_status st = s->drafter->ops->begin(s->drafter, d, s, &rd->err);
    s->prompt_buf = NULL;
    if (st == SPECDEC_ERR_DEVICE_LOST) rd->device_lost = 1;
    if (st == SPECDEC_OK) round_publish(s, t, dm);
    return st;
}

specdec_status sd_round_begin_step(sd_round *rd, sd_round_seq *s, int first, int32_t budget, int *done) {
    *done = 0;
    if (s && first) s->prefix_queried = s->prefix_hit = 0;
    if (rd->device_lost) return sd_fail(&rd->err, SPECDEC_ERR_DEVICE_LOST, "round: the device was lost earlier");
    sd_runner *t = s ? seq_target(rd, s) : NULL, *d = s ? seq_draft(rd, s) : NULL;
    if (!s || s->length < 1 || !t || !s->tokens)
        return sd_fail(&rd->err, SPECDEC_ERR_INVALID_ARGUMENT, "round: %s", !s || !t ? "no target runner" : "empty sequence");
    if (runner_drafter(s->drafter) && !d)
        return sd_fail(&rd->err, SPECDEC_ERR_INVALID_ARGUMENT, "round: a %s drafter without a draft runner",
                       s->drafter->ops->name);
    /* a drafter that reads the target's hidden states prefills the target itself, capturing */
    const int hidden = s->drafter && (s->drafter->ops->caps & SD_DRAFTER_TARGET_HIDDEN) && d;
    if (first) {
        const specdec_status st = round_begin_start(rd, s, t, d, hidden);
        if (st != SPECDEC_OK) return st;
    }
    const int32_t n = s->length - 1, from = sd_runner_kv_len(t);
    if (n > from && !hidden) {
        /* prompt rows and hidden states: in one step; else at most `budget` rows per step */
        const int32_t c = budget > 0 && !s->prompt_rows && n - from > budget ? budget : n - from;
        const specdec_status st = s->prompt_rows ? round_prefill_rows(rd, t, s)
                                                 : sd_runner_forward_chunked(t, s->tokens + from, c, from, NULL);
        if (st != SPECDEC_OK) return round_runner_fail(rd, st, "target prefill", t);
        if (from + c < n) return SPECDEC_OK;
    }
    *done = 1;
    return round_begin_finish(rd, s, t, d, hidden);
}

specdec_status sd_round_begin(sd_round *rd, sd_round_seq *s) {
    int done = 0;
    return sd_round_begin_step(rd, s, 1, 0, &done);
}

specdec_status sd_round_settle(sd_round *rd, sd_round_seq *s, int32_t length) {
    sd_runner *t = seq_target(rd, s), *d = seq_draft(rd, s);
    if (t && sd_runner_truncate(t, length - 1) != SPECDEC_OK) /* below a released window */
        return sd_fail(&rd->err, SPECDEC_ERR_INVALID_ARGUMENT, "round: settle: %s", t->err.msg);
    round_invalidate(rd, s);
    if (!s->drafter || !s->drafter->ops->settle) return SPECDEC_OK;
    return s->drafter->ops->settle(s->drafter, d, s, length, &rd->err);
}

/* ------------------------------------------------------------------------- */
/* run: checks, plans, executors                                              */
/* ------------------------------------------------------------------------- */
/* The executor that takes slot x as it stands. */
static sd_exec *slot_exec(const sd_round *rd, const sd_round_slot *x) {
    if (!rd->fb || !rd->ex->ops->accepts || rd->ex->ops->accepts(rd->ex, x)) return rd->ex;
    return rd->fb;
}

/* A deterministic chain (n-gram drafts: q one-hot, no q rows; or none yet) under a grammar: *gs =
 * the grammar state after the output and the chain, -1 when nothing may be appended (no grammar,
 * a tree or dense drafts proposed, an end token or a state limit in the chain; a proposal of
 * nothing becomes a plain step, which may be extended). The chain is cut before its
 * first token the grammar refuses (vLLM's validate_tokens). That token's masked target
 * probability is 0, so the verifier would reject it for sure and draw position i from the
 * residual of a one-hot q at a zero-probability token — which is p itself, the draw a cut chain
 * makes there: the output is distributed (GREEDY / MATCH: equal) as without the cut, and the
 * target verifies fewer rows. Only text tokens the automaton declares DEAD are cut; an end token
 * (allowed only where a match is complete) or a state limit stops the walk with the chain as is
 * (a state limit: the row's own masking reports it). */
static specdec_status round_grammar_trim(sd_round *rd, sd_round_slot *x, int32_t *gs) {
    const sd_round_seq *s = x->s;
    const sd_logits_proc *lp = s->proc;
    *gs = -1;
    if (!lp || !lp->grammar || (x->depth > 0 && (x->tree || (x->dr && !x->det)))) return SPECDEC_OK;
    int32_t st_id = -1;
    const specdec_status st = sd_grammar_state_at(lp->grammar, lp->gcur, s->tokens + lp->n_prompt,
                                                  s->length - lp->n_prompt, NULL, 0, lp->end, lp->n_end, &lp->gate,
                                                  &st_id, &rd->err);
    if (st != SPECDEC_OK || st_id < 0) return st;
    for (int32_t i = 1; i <= x->depth; i++) {
        const int32_t t = x->vtok[i];
        if (sd_grammar_is_end(t, lp->end, lp->n_end)) return SPECDEC_OK;
        const int32_t nx = sd_grammar_step(lp->grammar, st_id, t, lp->end, lp->n_end, &lp->gate); /* a gated
                                                     state follows the marker, refusing nothing */
        if (nx == SD_FSM_DEAD) {
            x->depth = i - 1;
            break;
        }
        if (nx < 0) return SPECDEC_OK;
        st_id = nx;
    }
    *gs = st_id;
    return SPECDEC_OK;
}

/* Jump-forward (SGLang's, exact by construction in a speculative loop): where the grammar allows
 * exactly one token, that token is proposed as a deterministic draft. Its masked target
 * probability is 1 (every other entry of its row is -inf, through every processor and sampling
 * parameter), so each verify mode accepts it whenever the drafts before it were accepted: the
 * output is distributed as without it (GREEDY / MATCH: equal to plain decoding), with fewer target
 * passes. It extends, from state gs (round_grammar_trim), deterministic chains (the n-gram
 * drafter's, after its own drafts) and sequences without a drafter (up to shape.depth tokens);
 * never dense or tree proposals (a model's masked chain drafts such a token by itself, at
 * probability 1). Not with allowed_token_ids / bad_words, which may ban the grammar's only token. */
static specdec_status round_grammar_forced(sd_round *rd, sd_round_slot *x, int32_t gs) {
    const sd_round_seq *s = x->s;
    const sd_logits_proc *lp = s->proc;
    if (gs < 0 || lp->n_allowed > 0 || lp->n_bad > 0 || s->shape.depth > SPECDEC_MAX_DRAFT) return SPECDEC_OK;
    const int32_t n0 = x->depth;
    specdec_status st = SPECDEC_OK;
    while (gs >= 0 && x->depth < s->shape.depth) {
        int32_t t = -1;
        st = sd_grammar_forced(lp->grammar, gs, x->t->n_vocab, lp->end, lp->n_end, &t, &rd->err);
        if (st != SPECDEC_OK || t < 0) break;
        x->vtok[++x->depth] = t;
        gs = sd_grammar_next(lp->grammar, gs, t);
    }
    if (x->depth > n0) {
        x->det = 1;
        x->n_forced = x->depth - n0;
    }
    return st;
}

/* Resolve sequence s into slot x, check it, plan its proposal (the drafter) and pick
 * its executor. Nothing runs. */
static specdec_status slot_init(sd_round *rd, sd_round_slot *x, sd_round_seq *s) {
    memset(x, 0, offsetof(sd_round_slot, vtok));
    x->s = s;
    x->t = seq_target(rd, s);
    x->dr = s->shape.depth > 0 ? s->drafter : NULL;
    x->d = runner_drafter(x->dr) ? seq_draft(rd, s) : NULL;
    s->status = SPECDEC_ERR_INTERNAL; /* until its wave ran */
    s->depth = s->n_accepted = s->n_drafted = s->n_forced = 0;
    const int32_t depth = s->shape.depth;
    const int forced_only = !s->drafter && s->proc && s->proc->grammar; /* jump-forward drafts alone */
    if (depth < 0 || depth > SPECDEC_MAX_DRAFT || s->length < 1 || !x->t || !s->tokens ||
        (depth > 0 && !s->drafter && !forced_only) ||
        (runner_drafter(x->dr) && !x->d))
        return sd_fail(&rd->err, SPECDEC_ERR_INVALID_ARGUMENT, "round: depth %d, length %d, %s", (int)depth,
                       (int)s->length, !x->t ? "no target" : depth > 0 && !s->drafter ? "no drafter" : "no draft runner");
    x->vtok[0] = s->tokens[s->length - 1];
    specdec_status st = SPECDEC_OK;
    if (x->dr) {
        x->tree = !sd_draft_is_chain(&s->shape);
        sd_exec *ex = slot_exec(rd, x);
        char who[64];
        snprintf(who, sizeof who, "%s round", ex->ops->name);
        if (x->tree) st = sd_round_tree_check(s, x->t, x->d, who, &rd->err, &x->budget);
        if (st == SPECDEC_OK) st = x->dr->ops->plan(x->dr, x, &rd->err);
        if (st == SPECDEC_OK && (x->depth < 0 || x->depth > depth))
            st = sd_fail(&rd->err, SPECDEC_ERR_INTERNAL, "round: the %s drafter planned depth %d of %d",
                         x->dr->ops->name, (int)x->depth, (int)depth);
        if (st != SPECDEC_OK) return st;
    }
    int32_t gs = -1;
    if ((st = round_grammar_trim(rd, x, &gs)) != SPECDEC_OK) return st;
    if (x->dr && x->depth == 0) x->dr = NULL, x->tree = 0, x->det = 0; /* nothing proposed: a plain step */
    if ((st = round_grammar_forced(rd, x, gs)) != SPECDEC_OK) return st;
    x->ex = slot_exec(rd, x);
    if (x->ex->ops->check && (st = x->ex->ops->check(x->ex, x)) != SPECDEC_OK) return round_exec_fail(rd, x->ex, st);
    return SPECDEC_OK;
}

/* Stage 1 (observe 0: every drafter's compute) or 4b (observe 1: every drafter observes
 * the outcome and rolls back), for each drafter once, over its slots of the wave in wave
 * order. */
static specdec_status wave_drafters(sd_round *rd, sd_exec *ex, sd_round_slot *const *xs, int32_t k, int observe) {
    uint8_t done[SD_ROUND_MAX_SEQS];
    memset(done, 0, sizeof done);
    for (int32_t i = 0; i < k; i++) {
        sd_drafter *dr = xs[i]->dr;
        if (done[i] || !dr || !(observe ? dr->ops->observe : dr->ops->draft)) continue;
        int32_t m = 0;
        for (int32_t j = i; j < k; j++)
            if (!done[j] && xs[j]->dr == dr) rd->sub[m++] = xs[j], done[j] = 1;
        const specdec_status st = observe ? dr->ops->observe(dr, ex, rd->sub, m, &ex->err)
                                          : dr->ops->draft(dr, ex, rd->sub, m, &ex->err);
        if (st != SPECDEC_OK) return round_exec_fail(rd, ex, st);
    }
    return SPECDEC_OK;
}

/* What the round proposed, for the trace. */
static void slot_trace(const sd_round_slot *x) {
    sd_round_trace *tr = x->s->trace;
    const int32_t n = x->s->n_drafted, na = x->s->n_accepted;
    tr->n = n;
    for (int32_t i = 0; i < n; i++) {
        tr->token[i] = x->tree ? x->tr.token[i + 1] : x->vtok[i + 1];
        tr->parent[i] = x->tree ? x->tr.parent[i + 1] - 1 : i - 1;
    }
    for (int32_t i = 0; i < na; i++) tr->path[i] = x->tree ? x->path[i] - 1 : i;
}

/* Stage 4a: the outcome checked, the target keeps the accepted path (a tree:
 * compaction; a chain: what device-side forwards appended, then truncation). */
static specdec_status slot_keep(sd_round *rd, sd_exec *ex, sd_round_slot *x) {
    sd_round_seq *s = x->s;
    const int32_t L = s->length, n = s->n_accepted;
    if (n < 0 || n > x->depth)
        return sd_fail(&rd->err, SPECDEC_ERR_INTERNAL, "%s round: accepted %d of depth %d", ex->ops->name, (int)n,
                       (int)x->depth);
    s->depth = x->depth;
    s->n_drafted = x->tree ? x->tr.n - 1 : x->depth;
    s->n_forced = x->n_forced;
    if (s->trace) slot_trace(x);
    if (x->tree) {
        int32_t keep[SD_RUNNER_TREE_MAX];
        keep[0] = 0;
        for (int32_t j = 0; j < n; j++) keep[1 + j] = x->path[j];
        const specdec_status st = sd_runner_compact(x->t, keep, 1 + n);
        return st == SPECDEC_OK ? SPECDEC_OK : round_runner_fail(rd, st, "target compaction", x->t);
    }
    if (ex->ops->note_kv) ex->ops->note_kv(ex, x->t, L + x->depth);
    sd_runner_truncate(x->t, L + n); /* the emitted token is pending */
    return SPECDEC_OK;
}

/* Stages 1-4 for the k slots of a wave, then every slot's status and stage times. */
static specdec_status run_wave(sd_round *rd, sd_exec *ex, sd_round_slot *const *xs, int32_t k) {
    const double t0 = round_now();
    double t1 = t0, t2 = t0;
    int replayed = 0, timed = 0;
    specdec_status st = ex->ops->wave_begin ? ex->ops->wave_begin(ex, xs, k, &replayed) : SPECDEC_OK;
    if (st != SPECDEC_OK) st = round_exec_fail(rd, ex, st);
    if (st == SPECDEC_OK && !replayed) {
        st = wave_drafters(rd, ex, xs, k, 0);
        t1 = round_now();
        if (st == SPECDEC_OK && (st = ex->ops->verify_pass(ex, xs, k)) != SPECDEC_OK) st = round_exec_fail(rd, ex, st);
        t2 = round_now();
        if (st == SPECDEC_OK && (st = ex->ops->verify(ex, xs, k)) != SPECDEC_OK) st = round_exec_fail(rd, ex, st);
    }
    if (st == SPECDEC_OK && ex->ops->wave_end && (st = ex->ops->wave_end(ex, xs, k, &timed)) != SPECDEC_OK)
        st = round_exec_fail(rd, ex, st);
    for (int32_t i = 0; i < k && st == SPECDEC_OK; i++) st = slot_keep(rd, ex, xs[i]);
    if (st == SPECDEC_OK) st = wave_drafters(rd, ex, xs, k, 1);
    const double t3 = round_now();
    for (int32_t i = 0; i < k; i++) {
        sd_round_seq *s = xs[i]->s;
        s->status = st;
        if (timed && st == SPECDEC_OK) continue;
        s->t.draft = t1 - t0;
        s->t.target = t2 - t1;
        s->t.verify = t3 - t2;
    }
    return st;
}

/* The slots of one executor, wave by wave. */
static specdec_status run_set(sd_round *rd, sd_exec *ex, sd_round_slot **xs, int32_t n) {
    specdec_status first = SPECDEC_OK;
    if (n > 0) rd->last_exec = ex->ops->name;
    for (int32_t i = 0; i < n && !rd->device_lost;) {
        const int32_t k = ex->ops->pack(ex, xs + i, n - i);
        if (k < 1 || k > n - i)
            return sd_fail(&rd->err, SPECDEC_ERR_INTERNAL, "%s round: a wave of %d sequences", ex->ops->name, (int)k);
        for (int32_t j = 0; j < k; j++) xs[i + j]->ex = ex;
        const specdec_status st = run_wave(rd, ex, xs + i, k);
        if (st != SPECDEC_OK && first == SPECDEC_OK) first = st;
        i += k;
    }
    return first;
}

specdec_status sd_round_run(sd_round *rd, sd_round_seq *const *seqs, int32_t n_seqs) {
    if (rd->device_lost) return sd_fail(&rd->err, SPECDEC_ERR_DEVICE_LOST, "round: the device was lost earlier");
    if (!seqs || n_seqs < 1 || n_seqs > rd->max_seqs)
        return sd_fail(&rd->err, n_seqs > rd->max_seqs ? SPECDEC_ERR_UNSUPPORTED : SPECDEC_ERR_INVALID_ARGUMENT,
                       "%s round: %d sequences (1..%d)", rd->ex->ops->name, (int)n_seqs, (int)rd->max_seqs);
    for (int32_t i = 0; i < n_seqs; i++)
        if (!seqs[i])
            return sd_fail(&rd->err, SPECDEC_ERR_INVALID_ARGUMENT, "%s round: sequence %d is NULL", rd->ex->ops->name,
                           (int)i);
    int32_t n_main = 0, n_side = 0;
    for (int32_t i = 0; i < n_seqs; i++) {
        sd_round_slot *x = &rd->slots[i];
        const specdec_status st = slot_init(rd, x, seqs[i]);
        if (st != SPECDEC_OK) { /* nothing ran: every sequence says so */
            for (int32_t j = 0; j < n_seqs; j++) seqs[j]->status = st;
            return st;
        }
        if (x->ex == rd->ex) rd->main[n_main++] = x;
        else rd->side[n_side++] = x;
    }
    specdec_status first = run_set(rd, rd->ex, rd->main, n_main);
    if (n_side > 0 && !rd->device_lost) {
        const specdec_status st = run_set(rd, rd->fb, rd->side, n_side);
        if (first == SPECDEC_OK) first = st;
    }
    return first;
}

/* ------------------------------------------------------------------------- */
/* create / destroy                                                           */
/* ------------------------------------------------------------------------- */
void sd_round_destroy(sd_round *rd) {
    if (!rd) return;
    sd_free(rd->prompt_buf);
    sd_free(rd->slots);
    sd_free(rd->main);
    sd_free(rd->side);
    sd_free(rd->sub);
    sd_free(rd);
}

specdec_status sd_round_create(sd_exec *ex, sd_exec *fb, sd_runner *t, sd_runner *d, int32_t max_seqs,
                               sd_round **out, sd_errbuf *eb) {
    if (!out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "round: out is NULL");
    *out = NULL;
    if (!ex || max_seqs < 1 || max_seqs > SD_ROUND_MAX_SEQS)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "round: executor %p, %d sequences (1..%d)", (void *)ex,
                       (int)max_seqs, SD_ROUND_MAX_SEQS);
    sd_round *rd = sd_calloc(1, sizeof *rd);
    if (!rd) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "round: out of memory");
    rd->ex = ex;
    rd->fb = fb;
    rd->t = t;
    rd->d = d;
    rd->max_seqs = max_seqs;
    rd->slots = sd_malloc((size_t)max_seqs * sizeof *rd->slots);
    rd->main = sd_malloc((size_t)max_seqs * sizeof *rd->main);
    rd->side = sd_malloc((size_t)max_seqs * sizeof *rd->side);
    rd->sub = sd_malloc((size_t)max_seqs * sizeof *rd->sub);
    if (!rd->slots || !rd->main || !rd->side || !rd->sub) {
        sd_round_destroy(rd);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "round: allocating %d slots", (int)max_seqs);
    }
    *out = rd;
    return SPECDEC_OK;
}

void sd_round_set_exec(sd_round *rd, sd_exec *ex, sd_exec *fb) {
    if (!rd || !ex) return;
    rd->ex = ex;
    rd->fb = fb;
}

/* ------------------------------------------------------------------------- */
/* the shared tree check                                                      */
/* ------------------------------------------------------------------------- */
specdec_status sd_round_tree_check(const sd_round_seq *s, const sd_runner *target, const sd_runner *draft,
                                   const char *who, sd_errbuf *eb, int32_t *nodes_out) {
    const sd_draft_shape *sh = &s->shape;
    for (int32_t d = 0; d < sh->depth; d++)
        if (sh->width[d] < 1 || sh->width[d] > SPECDEC_MAX_TREE_NODES)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: tree width[%d] = %d outside [1, %d]", who, (int)d,
                           (int)sh->width[d], SPECDEC_MAX_TREE_NODES);
    const int64_t nodes = sd_draft_shape_nodes(sh);
    if (sh->n_nodes < 0 || nodes < 1 || nodes > SPECDEC_MAX_TREE_NODES)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: a tree of %lld nodes (1..%d)", who, (long long)nodes,
                       SPECDEC_MAX_TREE_NODES);
    const int64_t L = s->length;
    if (!target || L + nodes > target->n_ctx || nodes + 1 > target->max_batch ||
        (draft && (L + nodes > draft->n_ctx || nodes > draft->max_batch)))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "%s: a tree of %lld nodes at length %d does not fit the context or one call", who,
                       (long long)nodes, (int)s->length);
    if (nodes_out) *nodes_out = (int32_t)nodes;
    return SPECDEC_OK;
}
