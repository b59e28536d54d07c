/* sd_generate.c — specdec_generate: THE generation loop. It alone owns the budget
 * (n_predict, the context), the stop conditions (EOS, stop strings, the callback),
 * emission (the sequence, the output, the streaming text) and the statistics; one
 * round of speculation is the round interface's business (core/sd_round.h), whichever
 * implementation the engine runs (host or CUDA device-resident).
 *
 * Per round: γ is clipped so that every token the round may emit fits the budget and
 * the context (γ + 1 <= both); γ = 0 (no draft, n_draft == 0, or clipped to 0 at the
 * end of the budget) is a plain decoding step, which samples with the verifier's
 * target-side sampler, so "match" speculation reproduces plain decoding bit for bit.
 * A draft tree (tree_width / draft_nodes, docs/TREE.md) is clipped the same way
 * (runtime/sd_tree_shape.c). A round that answers SPECDEC_ERR_UNSUPPORTED for a tree
 * (the CUDA device round until it grows trees) hands the rest of the call to the host
 * round, which begins the sequence again (one extra prefill).
 * The round's tokens are emitted one by one; a stop inside a round cuts it short and
 * the round settles both caches at the emitted length.
 *
 * Nothing is allocated per round (the streaming detokenizer, when a tokenizer is
 * passed, is created once per call before the loop). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime(CLOCK_MONOTONIC) under -std=c11 */
#include <string.h>
#include <time.h>

#include "sd_cpu_sample.h"
#include "sd_engine.h"
#include "sd_tree_shape.h"

static double sd_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int32_t sd_min_i32(int32_t a, int32_t b) { return a < b ? a : b; }

specdec_generate_params specdec_generate_default_params(void) {
    specdec_generate_params p;
    memset(&p, 0, sizeof p);
    p.n_predict = 128;
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.verify = SPECDEC_VERIFY_AUTO;
    p.n_draft = 4;
    return p;
}

/* State of one specdec_generate call (on the caller's stack). */
typedef struct sd_gen {
    specdec_engine *e;
    const specdec_generate_params *p;
    int32_t *out;
    int32_t n_out;
    int32_t L;                     /* tokens in e->seq */
    specdec_detok_stream *ds;      /* NULL without a tokenizer */
    size_t win_len;                /* bytes in e->text_win */
    specdec_stop_reason reason;
    specdec_stats *st;
    sd_round *rd;                  /* the round the engine runs */
    sd_round_seq seq;              /* the sequence as the round sees it */
    int tree;                      /* a draft tree was asked for: its shape is `req` */
    sd_draft_shape req;
} sd_gen;

/* ------------------------------------------------------------------------- */
/* request validation                                                         */
/* ------------------------------------------------------------------------- */
static specdec_status sd_gen_check_stops(const specdec_generate_params *p, sd_errbuf *eb) {
    if (p->n_stop_strings < 0 || (p->n_stop_strings > 0 && !p->stop_strings))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: n_stop_strings %d with stop_strings %s",
                       (int)p->n_stop_strings, p->stop_strings ? "set" : "NULL");
    if (p->n_stop_strings > 0 && !p->tokenizer)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: stop strings need params.tokenizer");
    for (int32_t i = 0; i < p->n_stop_strings; i++) {
        const char *s = p->stop_strings[i];
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > SD_ENGINE_MAX_STOP_LEN)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: stop_strings[%d] is %s (1..%d bytes)",
                           (int)i, !s ? "NULL" : n == 0 ? "empty" : "too long", SD_ENGINE_MAX_STOP_LEN);
    }
    return SPECDEC_OK;
}

static specdec_status sd_gen_check_params(const specdec_engine *e, const specdec_generate_params *p, sd_errbuf *eb) {
    sd_draft_shape req;
    int tree = 0;
    if (p->n_predict <= 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: n_predict %d must be > 0",
                       (int)p->n_predict);
    if (p->n_draft < 0 || p->n_draft > SPECDEC_MAX_DRAFT)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: n_draft %d outside [0, %d]",
                       (int)p->n_draft, SPECDEC_MAX_DRAFT);
    if (p->adaptive_draft && e->draft && p->n_draft == 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "specdec_generate: adaptive_draft needs a starting n_draft in [1, %d], got 0", SPECDEC_MAX_DRAFT);
    if ((int)p->verify < SPECDEC_VERIFY_AUTO || (int)p->verify > SPECDEC_VERIFY_MATCH)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: unknown verify mode %d", (int)p->verify);
    sd_sampling_params sp = sd_sampling_params_from(p);
    specdec_status st = sd_sampling_check_params(&sp, eb);
    if (st == SPECDEC_OK) st = sd_gen_check_stops(p, eb);
    if (st == SPECDEC_OK) st = sd_tree_request(p, e->draft != NULL, &req, &tree, eb);
    if (st != SPECDEC_OK) return st;
    for (size_t i = 0; i < sizeof p->reserved_i / sizeof p->reserved_i[0]; i++)
        if (p->reserved_i[i])
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: reserved_i[%zu] = %d must be 0", i,
                           (int)p->reserved_i[i]);
    for (size_t i = 0; i < sizeof p->reserved / sizeof p->reserved[0]; i++)
        if (p->reserved[i])
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: reserved[%zu] must be 0", i);
    return SPECDEC_OK;
}

static specdec_status sd_gen_check(const specdec_engine *e, const int32_t *prompt, int32_t n_prompt,
                                   const specdec_generate_params *p, const int32_t *out_tokens, int32_t out_capacity,
                                   const int32_t *n_out, sd_errbuf *eb) {
    if (!prompt || !out_tokens || !n_out)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: %s is NULL",
                       !prompt ? "prompt" : !out_tokens ? "out_tokens" : "n_out");
    if (n_prompt <= 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: empty prompt (n_prompt %d)", (int)n_prompt);
    if (n_prompt >= e->n_ctx)
        return sd_fail(eb, SPECDEC_ERR_CONTEXT_FULL,
                       "specdec_generate: prompt of %d tokens leaves no room in the context of %d tokens",
                       (int)n_prompt, (int)e->n_ctx);
    for (int32_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= e->n_vocab)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: prompt[%d] = %d outside [0, %d)",
                           (int)i, (int)prompt[i], (int)e->n_vocab);
    specdec_status st = sd_gen_check_params(e, p, eb);
    if (st != SPECDEC_OK) return st;
    int64_t room = (int64_t)e->n_ctx - n_prompt;
    int64_t need = p->n_predict < room ? p->n_predict : room;
    if (out_capacity < need)
        return sd_fail(eb, SPECDEC_ERR_BUFFER_TOO_SMALL,
                       "specdec_generate: out_capacity %d < %lld (min(n_predict %d, n_ctx %d - n_prompt %d))",
                       (int)out_capacity, (long long)need, (int)p->n_predict, (int)e->n_ctx, (int)n_prompt);
    return SPECDEC_OK;
}

/* ------------------------------------------------------------------------- */
/* emission and stop conditions                                               */
/* ------------------------------------------------------------------------- */
/* Slide `b` into the text window; 1 if a stop string now ends at it. The window keeps
 * the last SD_ENGINE_MAX_STOP_LEN-1 bytes before each new byte, enough for any stop
 * string to be matched across token boundaries. */
static int sd_gen_text_byte(sd_gen *g, char b) {
    char *w = g->e->text_win;
    if (g->win_len == 2 * SD_ENGINE_MAX_STOP_LEN) {
        memmove(w, w + g->win_len - (SD_ENGINE_MAX_STOP_LEN - 1), SD_ENGINE_MAX_STOP_LEN - 1);
        g->win_len = SD_ENGINE_MAX_STOP_LEN - 1;
    }
    w[g->win_len++] = b;
    for (int32_t i = 0; i < g->p->n_stop_strings; i++) {
        const char *s = g->p->stop_strings[i];
        size_t n = strlen(s);
        if (n <= g->win_len && w[g->win_len - 1] == s[n - 1] && !memcmp(w + g->win_len - n, s, n)) return 1;
    }
    return 0;
}

static int sd_is_eos(const specdec_engine *e, int32_t tok) {
    for (int32_t i = 0; i < e->special.n_eos; i++)
        if (e->special.eos_ids[i] == tok) return 1;
    return 0;
}

/* Append one token to the output and decide whether generation stops after it
 * (g->reason). Priority when several apply: EOS, stop string, callback, n_predict,
 * context full. */
static specdec_status sd_gen_emit(sd_gen *g, int32_t tok) {
    specdec_engine *e = g->e;
    e->seq[g->L++] = tok;
    g->out[g->n_out++] = tok;
    const char *piece = NULL;
    size_t plen = 0;
    if (g->ds) {
        specdec_status st = specdec_detok_stream_push(g->ds, tok, &piece, &plen);
        if (st != SPECDEC_OK)
            return sd_fail(&e->err, st, "decoding generated token %d to text: %s", (int)tok, specdec_last_error());
    }
    specdec_stop_reason r = SPECDEC_STOP_NONE;
    if (!g->p->ignore_eos && sd_is_eos(e, tok)) r = SPECDEC_STOP_EOS;
    if (g->p->n_stop_strings > 0) {
        int hit = 0;
        for (size_t i = 0; i < plen; i++) hit |= sd_gen_text_byte(g, piece[i]);
        if (hit && r == SPECDEC_STOP_NONE) r = SPECDEC_STOP_STRING;
    }
    if (g->p->callback) {
        int stop = g->p->callback(g->p->user_data, tok, g->ds ? (piece ? piece : "") : NULL, plen);
        if (stop && r == SPECDEC_STOP_NONE) r = SPECDEC_STOP_CALLBACK;
    }
    if (r == SPECDEC_STOP_NONE && g->n_out >= g->p->n_predict) r = SPECDEC_STOP_N_PREDICT;
    if (r == SPECDEC_STOP_NONE && g->L >= e->n_ctx) r = SPECDEC_STOP_CONTEXT_FULL;
    g->reason = r;
    return SPECDEC_OK;
}

/* ------------------------------------------------------------------------- */
/* the loop                                                                   */
/* ------------------------------------------------------------------------- */
/* A round failed: its detail becomes the engine's; a lost device is sticky. */
static specdec_status sd_gen_round_fail(sd_gen *g, specdec_status st) {
    if (st == SPECDEC_ERR_DEVICE_LOST || g->rd->device_lost) g->e->dead = 1;
    return sd_fail(&g->e->err, st, "%s", g->rd->err.msg);
}

/* The statistics of one round, and what adaptive γ learns from it (chains). */
static void sd_gen_account(sd_gen *g, const sd_draft_shape *shape) {
    const sd_round_seq *s = &g->seq;
    g->st->t_draft_s += s->t.draft;
    g->st->t_target_s += s->t.target;
    g->st->t_verify_s += s->t.verify;
    g->st->n_rounds++;
    if (shape->depth > 0) {
        g->st->n_draft_rounds++;
        g->st->n_drafted += s->n_drafted;
        g->st->n_accepted += s->n_accepted;
        if (!g->tree) sd_adapt_observe(&g->e->adapt, shape->depth, s->n_accepted, s->t.draft, s->t.target);
    }
}

/* The active round cannot run this tree: the host round takes over the call. */
static specdec_status sd_gen_to_host(sd_gen *g) {
    g->rd = g->e->host_round;
    g->seq.length = g->L;
    return g->rd->ops->begin(g->rd, &g->seq);
}

/* One round of the given shape (depth 0: plain step), then its tokens until a stop. */
static specdec_status sd_gen_step(sd_gen *g, const sd_draft_shape *shape) {
    sd_round_seq *s = &g->seq;
    sd_round_seq *seqs[1] = {s};
    s->length = g->L;
    s->shape = *shape;
    specdec_status st = g->rd->ops->run(g->rd, seqs, 1);
    if (st == SPECDEC_ERR_UNSUPPORTED && g->rd != g->e->host_round && !sd_draft_is_chain(shape)) {
        st = sd_gen_to_host(g);
        s->shape = *shape;
        if (st == SPECDEC_OK) st = g->rd->ops->run(g->rd, seqs, 1);
    }
    if (st != SPECDEC_OK) return sd_gen_round_fail(g, st);
    if (s->n_accepted < 0 || s->n_accepted > shape->depth)
        return sd_fail(&g->e->err, SPECDEC_ERR_INTERNAL, "round accepted %d of depth %d", (int)s->n_accepted,
                       (int)shape->depth);
    sd_gen_account(g, shape);
    int32_t i = 0;
    for (; i <= s->n_accepted && g->reason == SPECDEC_STOP_NONE; i++)
        if ((st = sd_gen_emit(g, s->out[i])) != SPECDEC_OK) return st;
    if (i <= s->n_accepted && (st = g->rd->ops->settle(g->rd, s, g->L)) != SPECDEC_OK) return sd_gen_round_fail(g, st);
    return SPECDEC_OK;
}

/* The shape of the next round: every emitted token must fit the budget and the
 * context (depth + 1 <= both); a tree also its nodes in the caches and one call. */
static sd_draft_shape sd_gen_round_shape(const sd_gen *g, int32_t gamma) {
    const specdec_engine *e = g->e;
    const int32_t room = sd_min_i32(g->p->n_predict - g->n_out - 1, e->n_ctx - g->L - 1);
    if (!g->seq.uses_draft) return sd_draft_chain(0);
    if (!g->tree) return sd_draft_chain(room < 0 ? 0 : sd_min_i32(gamma, room));
    int32_t fit = sd_min_i32(e->n_ctx - g->L, e->target->max_batch - 1);
    fit = sd_min_i32(fit, e->draft->max_batch);
    return sd_tree_round_shape(&g->req, room, fit);
}

static specdec_status sd_gen_loop(sd_gen *g, int32_t *gamma_io) {
    const specdec_engine *e = g->e;
    const specdec_generate_params *p = g->p;
    int32_t gamma = *gamma_io;
    specdec_status st = SPECDEC_OK;
    while (st == SPECDEC_OK && g->reason == SPECDEC_STOP_NONE) {
        if (g->n_out >= p->n_predict) {
            g->reason = SPECDEC_STOP_N_PREDICT;
            break;
        }
        if (g->L >= e->n_ctx) {
            g->reason = SPECDEC_STOP_CONTEXT_FULL;
            break;
        }
        const sd_draft_shape shape = sd_gen_round_shape(g, gamma);
        st = sd_gen_step(g, &shape);
        if (st == SPECDEC_OK && shape.depth > 0 && p->adaptive_draft)
            gamma = sd_adapt_choose_gamma(&g->e->adapt, gamma, SPECDEC_MAX_DRAFT);
    }
    *gamma_io = gamma;
    return st;
}

/* Copy the prompt, begin the sequence on the round (the prefill). */
static specdec_status sd_gen_begin(sd_gen *g, const int32_t *prompt, int32_t n_prompt) {
    specdec_engine *e = g->e;
    const specdec_generate_params *p = g->p;
    sd_round_seq *s = &g->seq;
    memset(s, 0, sizeof *s);
    s->seed = p->seed;
    s->sequence_id = p->sequence_id;
    s->mode = p->verify;
    if (s->mode == SPECDEC_VERIFY_AUTO) s->mode = p->temperature == 0.0f ? SPECDEC_VERIFY_GREEDY : SPECDEC_VERIFY_REJECTION;
    s->sp = s->mode == SPECDEC_VERIFY_GREEDY ? sd_rule_greedy_params() : sd_sampling_params_from(p);
    s->uses_draft = e->draft != NULL && (p->n_draft > 0 || g->tree);
    memcpy(e->seq, prompt, (size_t)n_prompt * sizeof(int32_t));
    g->L = n_prompt;
    s->tokens = e->seq;
    s->length = n_prompt;
    specdec_status st = g->rd->ops->begin(g->rd, s);
    return st == SPECDEC_OK ? SPECDEC_OK : sd_gen_round_fail(g, st);
}

static void sd_gen_finish(sd_gen *g, specdec_status st, int32_t gamma, int32_t *n_out, double t_start) {
    const specdec_generate_params *p = g->p;
    specdec_stats *stats = g->st;
    if (g->ds) {
        /* held-back bytes (an incomplete UTF-8 tail) go to the callback as token -1 */
        const char *text = NULL;
        size_t len = 0;
        if (st == SPECDEC_OK && specdec_detok_stream_flush(g->ds, &text, &len) == SPECDEC_OK && len > 0 && p->callback)
            (void)p->callback(p->user_data, -1, text, len);
        specdec_detok_stream_free(g->ds);
    }
    *n_out = g->n_out;
    stats->n_generated = g->n_out;
    stats->acceptance_rate = stats->n_drafted ? (double)stats->n_accepted / (double)stats->n_drafted : 0.0;
    stats->tokens_per_round = stats->n_rounds ? (double)stats->n_generated / (double)stats->n_rounds : 0.0;
    stats->t_total_s = sd_now() - t_start;
    double t_gen = stats->t_total_s - stats->t_prefill_s;
    stats->tokens_per_second = t_gen > 0 ? (double)stats->n_generated / t_gen : 0.0;
    stats->final_n_draft = g->tree ? g->req.depth : gamma;
    if (stats->n_draft_rounds > 0) {
        stats->mean_accepted_length = (double)stats->n_accepted / (double)stats->n_draft_rounds;
        stats->nodes_per_round = (double)stats->n_drafted / (double)stats->n_draft_rounds;
    }
    stats->stop_reason = g->reason;
}

static specdec_status sd_generate_locked(specdec_engine *e, const int32_t *prompt, int32_t n_prompt,
                                         const specdec_generate_params *p, int32_t *out_tokens, int32_t out_capacity,
                                         int32_t *n_out, specdec_stats *stats) {
    const double t_start = sd_now();
    if (e->dead) return sd_fail(&e->err, SPECDEC_ERR_DEVICE_LOST, "engine lost its device earlier; it can only be freed");
    specdec_status st = sd_gen_check(e, prompt, n_prompt, p, out_tokens, out_capacity, n_out, &e->err);
    if (st != SPECDEC_OK) return st;
    sd_gen g;
    memset(&g, 0, sizeof g);
    memset(stats, 0, sizeof *stats);
    g.e = e;
    g.p = p;
    g.out = out_tokens;
    g.st = stats;
    g.rd = sd_engine_active_round(e);
    (void)sd_tree_request(p, e->draft != NULL, &g.req, &g.tree, NULL); /* checked above */
    int32_t gamma = e->draft != NULL && p->n_draft > 0 ? p->n_draft : 0;
    memset(&e->adapt, 0, sizeof e->adapt);
    if (p->tokenizer && (st = specdec_detok_stream_create(p->tokenizer, 1, &g.ds)) != SPECDEC_OK)
        return sd_fail(&e->err, st, "specdec_generate: creating the streaming detokenizer: %s", specdec_last_error());
    stats->n_prompt = n_prompt;
    st = sd_gen_begin(&g, prompt, n_prompt);
    stats->t_prefill_s = sd_now() - t_start;
    if (st == SPECDEC_OK) st = sd_gen_loop(&g, &gamma);
    sd_gen_finish(&g, st, gamma, n_out, t_start);
    return st;
}

specdec_status specdec_generate(specdec_engine *engine, const int32_t *prompt, int32_t n_prompt,
                                const specdec_generate_params *params, int32_t *out_tokens, int32_t out_capacity,
                                int32_t *n_out, specdec_stats *stats) {
    if (!engine) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: engine is NULL");
    if (n_out) *n_out = 0;
    specdec_status st = sd_engine_enter(engine);
    if (st != SPECDEC_OK) return st;
    specdec_generate_params defaults;
    if (!params) {
        defaults = specdec_generate_default_params();
        params = &defaults;
    }
    specdec_stats local;
    st = sd_generate_locked(engine, prompt, n_prompt, params, out_tokens, out_capacity, n_out, stats ? stats : &local);
    sd_engine_leave(engine);
    return st;
}
