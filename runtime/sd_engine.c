/* sd_engine.c — the engine (target + optional draft runner) and the generate loop.
 *
 * One speculative round, with L tokens in the sequence seq[0..L) and the last one,
 * seq[L-1], not yet in either KV cache:
 *   1. draft: feed what the draft has not seen (seq[dkv..L), 1 or 2 tokens) and sample
 *      x1 from its last row, then feed x1..x_{γ-1} one at a time; keep every processed
 *      row q_i (the exact distribution x_i was drawn from).
 *   2. target: ONE forward over [seq[L-1], x1..xγ] at position L-1 -> p_1..p_{γ+1}.
 *   3. verifier: accept n drafts, produce one more token t (residual or bonus).
 *   4. emit x1..xn, t; roll back: target KV -> L+n (t pending), draft KV -> min(its
 *      length, L+n).
 * Without a draft (or n_draft == 0, or γ clipped to 0 at the end of the budget) a step
 * feeds seq[L-1] to the target and samples with the verifier's target-side sampler, so
 * "match" speculation reproduces plain decoding bit for bit.
 *
 * Everything is preallocated in create; the loop allocates nothing (the streaming
 * detokenizer, when a tokenizer is passed, is created once per call before the loop).
 *
 * CUDA engines run the same loop with the round on the device (sd_gen_device_loop,
 * kernels/cuda/sd_cuda_round.h): draft steps, verify pass and verifier run without a
 * host synchronisation and only the accepted tokens come back; the host keeps the
 * stop conditions and the budget (γ is clipped exactly as here, so nothing
 * overshoots n_predict). The CUDA graphs are captured on a γ's first use within
 * a generate call with new sampling parameters, then replayed. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime(CLOCK_MONOTONIC) under -std=c11 */
#include "sd_engine.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sd_alloc.h"
#include "sd_cuda_round.h"
#include "sd_model.h"
#include "sd_rng.h"
#include "sd_sampling.h"
#include "sd_verify.h"

/* ------------------------------------------------------------------------- */
/* small helpers                                                              */
/* ------------------------------------------------------------------------- */
static double sd_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int32_t sd_min_i32(int32_t a, int32_t b) { return a < b ? a : b; }
static int32_t sd_max_i32(int32_t a, int32_t b) { return a > b ? a : b; }

/* Busy flag: every mutating entry point takes it; a second thread gets SPECDEC_ERR_BUSY. */
static specdec_status sd_engine_enter(specdec_engine *e) {
    if (atomic_flag_test_and_set_explicit(&e->busy, memory_order_acquire))
        return sd_fail(&e->err, SPECDEC_ERR_BUSY, "engine is in use by another thread (one call at a time per engine)");
    return SPECDEC_OK;
}
static void sd_engine_leave(specdec_engine *e) { atomic_flag_clear_explicit(&e->busy, memory_order_release); }

static void sd_runner_truncate(sd_runner *r, int32_t len) {
    if (len < r->kv_len) r->kv_len = len < 0 ? 0 : len;
}

/* A runner failure: copy its detail into the engine; DEVICE_LOST is sticky. */
static specdec_status sd_engine_runner_fail(specdec_engine *e, sd_runner *r, specdec_status st, const char *what) {
    if (st == SPECDEC_ERR_DEVICE_LOST) e->dead = 1;
    return sd_fail(&e->err, st, "%s forward: %s", what, r->err.msg);
}

/* Forward tokens[0..n) at pos, split into max_batch chunks; logits rows (if wanted)
 * land at logits + i*V for token i. */
static specdec_status sd_engine_run(specdec_engine *e, sd_runner *r, const char *what, const int32_t *tokens,
                                    int32_t n, int32_t pos, float *logits) {
    int32_t mb = r->max_batch > 0 ? r->max_batch : n;
    for (int32_t off = 0; off < n;) {
        int32_t c = sd_min_i32(mb, n - off);
        specdec_status st =
            sd_runner_forward(r, tokens + off, c, pos + off, logits ? logits + (size_t)off * (size_t)e->n_vocab : NULL);
        if (st != SPECDEC_OK) return sd_engine_runner_fail(e, r, st, what);
        if (r->kv_len != pos + off + c)
            return sd_fail(&e->err, SPECDEC_ERR_INTERNAL, "%s runner: kv length %d after forward at %d of %d tokens",
                           what, (int)r->kv_len, (int)(pos + off), (int)c);
        off += c;
    }
    return SPECDEC_OK;
}

/* ------------------------------------------------------------------------- */
/* creation                                                                   */
/* ------------------------------------------------------------------------- */
static void sd_engine_destroy(specdec_engine *e) {
    if (!e) return;
    sd_cuda_round_destroy(e->cuda_round); /* borrows the runners: first */
    sd_runner_destroy(e->target);
    sd_runner_destroy(e->draft);
    sd_free(e->p_rows);
    sd_free(e->q_rows);
    sd_free(e->work);
    sd_free(e->sample_scratch);
    sd_free(e->seq);
    sd_free(e->text_win);
    sd_free(e);
}

specdec_status sd_engine_create_from_runners(sd_runner *target, sd_runner *draft, const sd_engine_special *special,
                                             specdec_engine **out) {
    specdec_status st;
    if (out) *out = NULL;
    if (!out || !target) {
        st = sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "engine: %s is NULL", out ? "target runner" : "out_engine");
        goto fail_runners;
    }
    if (target->n_vocab <= 0 || target->n_ctx <= 0) {
        st = sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "engine: target runner has n_vocab %d, n_ctx %d",
                     (int)target->n_vocab, (int)target->n_ctx);
        goto fail_runners;
    }
    if (draft && draft->n_vocab != target->n_vocab) {
        st = sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "engine: target vocab_size %d != draft vocab_size %d",
                     (int)target->n_vocab, (int)draft->n_vocab);
        goto fail_runners;
    }
    if (draft && draft->backend != target->backend) {
        st = sd_fail(NULL, SPECDEC_ERR_INTERNAL, "engine: target and draft runners on different backends");
        goto fail_runners;
    }
    if (special && (special->n_eos < 0 || special->n_eos > SPECDEC_MAX_EOS)) {
        st = sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "engine: n_eos %d outside [0, %d]", (int)special->n_eos,
                     SPECDEC_MAX_EOS);
        goto fail_runners;
    }

    specdec_engine *e = sd_calloc(1, sizeof *e);
    if (!e) {
        st = sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "engine: allocating the engine (%zu bytes)", sizeof *e);
        goto fail_runners;
    }
    atomic_flag_clear(&e->busy);
    e->target = target;
    e->draft = draft;
    e->backend = target->backend;
    e->n_vocab = target->n_vocab;
    e->n_ctx = draft ? sd_min_i32(target->n_ctx, draft->n_ctx) : target->n_ctx;
    e->max_batch = target->max_batch;
    if (special) {
        e->special = *special;
    } else {
        e->special.bos_id = -1;
        e->special.n_eos = 0;
    }
    const size_t V = (size_t)e->n_vocab;
    e->p_rows = sd_malloc((SPECDEC_MAX_DRAFT + 1) * V * sizeof(float));
    e->q_rows = sd_malloc(SPECDEC_MAX_DRAFT * V * sizeof(float));
    e->work = sd_malloc(V * sizeof(float));
    e->seq = sd_malloc(((size_t)e->n_ctx + 1) * sizeof(int32_t));
    e->text_win = sd_malloc(2 * SD_ENGINE_MAX_STOP_LEN);
    e->sample_scratch_size = sd_sampling_scratch_size(e->n_vocab);
    e->sample_scratch = e->sample_scratch_size ? sd_malloc(e->sample_scratch_size) : NULL;
    if (!e->p_rows || !e->q_rows || !e->work || !e->seq || !e->text_win ||
        (e->sample_scratch_size && !e->sample_scratch)) {
        st = sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "engine: allocating round buffers for vocab %d, n_ctx %d",
                     (int)e->n_vocab, (int)e->n_ctx);
        sd_engine_destroy(e);
        return st;
    }
    if (e->backend == SPECDEC_BACKEND_CUDA) {
        sd_errbuf eb;
        sd_err_clear(&eb);
        st = sd_cuda_round_create(target, draft, &e->cuda_round, &eb);
        if (st == SPECDEC_OK) {
            e->cuda_path = SD_ENGINE_CUDA_GRAPH;
        } else if (st != SPECDEC_ERR_UNSUPPORTED) {
            st = sd_fail(NULL, st, "engine: device round: %s", eb.msg);
            sd_engine_destroy(e);
            return st;
        } /* UNSUPPORTED (vocabulary beyond the GPU sampler): the host-rows loop serves it */
    }
    *out = e;
    return SPECDEC_OK;

fail_runners:
    sd_runner_destroy(target);
    sd_runner_destroy(draft);
    return st;
}

specdec_engine_params specdec_engine_default_params(void) {
    specdec_engine_params p;
    memset(&p, 0, sizeof p);
    p.backend = SPECDEC_BACKEND_AUTO;
    p.n_ctx = 0;
    p.max_batch = 0;
    p.cuda_device = 0;
    p.cuda_keep_f32 = 0;
    return p;
}

static int sd_eos_sets_equal(const sd_config *a, const sd_config *b) {
    if (a->n_eos != b->n_eos) return 0;
    for (int i = 0; i < a->n_eos; i++) {
        int found = 0;
        for (int j = 0; j < b->n_eos; j++) found |= a->eos_ids[i] == b->eos_ids[j];
        if (!found) return 0;
    }
    return 1;
}

static void sd_format_eos(const sd_config *c, char *buf, size_t cap) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (int i = 0; i < c->n_eos && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%d", i ? "," : "", (int)c->eos_ids[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

static specdec_status sd_make_runner(const specdec_model *m, specdec_backend be, const specdec_engine_params *p,
                                     int32_t n_ctx, int32_t max_batch, sd_runner **out, sd_errbuf *eb) {
    if (be == SPECDEC_BACKEND_CUDA)
        return sd_cuda_runner_create(m, n_ctx, max_batch, p->cuda_device, p->cuda_keep_f32, out, eb);
    return sd_cpu_runner_create(m, n_ctx, max_batch, out, eb);
}

specdec_status specdec_engine_create(const specdec_model *target, const specdec_model *draft,
                                     const specdec_engine_params *params, specdec_engine **out_engine) {
    if (out_engine) *out_engine = NULL;
    if (!out_engine) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_create: out_engine is NULL");
    if (!target) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_create: target model is NULL");
    specdec_engine_params p = params ? *params : specdec_engine_default_params();
    for (size_t i = 0; i < sizeof p.reserved_i / sizeof p.reserved_i[0]; i++)
        if (p.reserved_i[i])
            return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_create: reserved_i[%zu] = %d must be 0",
                           i, (int)p.reserved_i[i]);
    for (size_t i = 0; i < sizeof p.reserved / sizeof p.reserved[0]; i++)
        if (p.reserved[i])
            return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_create: reserved[%zu] must be 0", i);
    if (p.backend != SPECDEC_BACKEND_AUTO && p.backend != SPECDEC_BACKEND_CPU && p.backend != SPECDEC_BACKEND_CUDA)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_create: unknown backend %d", (int)p.backend);
    if (p.n_ctx < 0 || p.max_batch < 0 || p.cuda_device < 0)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT,
                       "specdec_engine_create: negative n_ctx %d / max_batch %d / cuda_device %d", (int)p.n_ctx,
                       (int)p.max_batch, (int)p.cuda_device);

    const sd_config *tc = &target->cfg;
    if (draft) {
        const sd_config *dc = &draft->cfg;
        if (tc->vocab_size != dc->vocab_size)
            return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH,
                           "target %s vocab_size %d != draft %s vocab_size %d", target->path, (int)tc->vocab_size,
                           draft->path, (int)dc->vocab_size);
        if (tc->bos_id != dc->bos_id)
            return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "target %s bos_token_id %d != draft %s bos_token_id %d",
                           target->path, (int)tc->bos_id, draft->path, (int)dc->bos_id);
        if (!sd_eos_sets_equal(tc, dc)) {
            char a[128], b[128];
            sd_format_eos(tc, a, sizeof a);
            sd_format_eos(dc, b, sizeof b);
            return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "target %s eos_token_id %s != draft %s eos_token_id %s",
                           target->path, a, draft->path, b);
        }
    }

    int32_t n_ctx = p.n_ctx;
    if (n_ctx == 0) {
        n_ctx = tc->max_position_embeddings > 0 ? sd_min_i32(tc->max_position_embeddings, 4096) : 4096;
        if (draft && draft->cfg.max_position_embeddings > 0)
            n_ctx = sd_min_i32(n_ctx, draft->cfg.max_position_embeddings);
    }
    /* A verify pass needs γ+1 positions in one call: never go below that. */
    int32_t max_batch = p.max_batch == 0 ? n_ctx : sd_max_i32(p.max_batch, SPECDEC_MAX_DRAFT + 1);
    max_batch = sd_min_i32(max_batch, n_ctx);

    specdec_backend be = p.backend;
    if (be == SPECDEC_BACKEND_AUTO) be = specdec_cuda_device_count() > 0 ? SPECDEC_BACKEND_CUDA : SPECDEC_BACKEND_CPU;

    sd_errbuf eb;
    sd_err_clear(&eb);
    sd_runner *rt = NULL, *rd = NULL;
    specdec_status st = sd_make_runner(target, be, &p, n_ctx, max_batch, &rt, &eb);
    if (st == SPECDEC_ERR_BACKEND_UNAVAILABLE && p.backend == SPECDEC_BACKEND_AUTO) {
        be = SPECDEC_BACKEND_CPU; /* AUTO: CUDA built in but not usable after all */
        st = sd_make_runner(target, be, &p, n_ctx, max_batch, &rt, &eb);
    }
    if (st != SPECDEC_OK) return sd_fail(NULL, st, "target model %s: %s", target->path, eb.msg);
    if (draft) {
        st = sd_make_runner(draft, be, &p, n_ctx, max_batch, &rd, &eb);
        if (st != SPECDEC_OK) {
            sd_runner_destroy(rt);
            return sd_fail(NULL, st, "draft model %s: %s", draft->path, eb.msg);
        }
    }
    sd_engine_special sp;
    memset(&sp, 0, sizeof sp);
    sp.bos_id = tc->bos_id;
    sp.n_eos = sd_min_i32(sd_max_i32(tc->n_eos, 0), SPECDEC_MAX_EOS);
    memcpy(sp.eos_ids, tc->eos_ids, sizeof sp.eos_ids);
    return sd_engine_create_from_runners(rt, rd, &sp, out_engine);
}

void specdec_engine_free(specdec_engine *engine) { sd_engine_destroy(engine); }

const char *specdec_engine_last_error(const specdec_engine *engine) {
    return engine ? engine->err.msg : specdec_last_error();
}

specdec_backend specdec_engine_backend(const specdec_engine *engine) {
    return engine ? engine->backend : SPECDEC_BACKEND_CPU;
}

int32_t specdec_engine_n_ctx(const specdec_engine *engine) { return engine ? engine->n_ctx : 0; }

/* ------------------------------------------------------------------------- */
/* low-level access                                                           */
/* ------------------------------------------------------------------------- */
static sd_runner *sd_engine_role(const specdec_engine *e, specdec_role role) {
    if (role == SPECDEC_ROLE_TARGET) return e->target;
    if (role == SPECDEC_ROLE_DRAFT) return e->draft;
    return NULL;
}

specdec_status specdec_engine_forward(specdec_engine *engine, specdec_role role, const int32_t *tokens,
                                      int32_t n_tokens, int32_t pos, float *logits) {
    if (!engine) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_forward: engine is NULL");
    specdec_status st = sd_engine_enter(engine);
    if (st != SPECDEC_OK) return st;
    sd_runner *r = sd_engine_role(engine, role);
    if (engine->dead) {
        st = sd_fail(&engine->err, SPECDEC_ERR_DEVICE_LOST, "engine lost its device earlier; it can only be freed");
    } else if (!r) {
        st = sd_fail(&engine->err, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_forward: role %d %s", (int)role,
                     role == SPECDEC_ROLE_DRAFT ? "(the engine has no draft model)" : "is not a role");
    } else if (!tokens || n_tokens <= 0) {
        st = sd_fail(&engine->err, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_forward: %s",
                     !tokens ? "tokens is NULL" : "n_tokens <= 0");
    } else if (pos < 0 || pos > r->kv_len) {
        st = sd_fail(&engine->err, SPECDEC_ERR_INVALID_ARGUMENT,
                     "specdec_engine_forward: pos %d outside [0, kv length %d]", (int)pos, (int)r->kv_len);
    } else if ((int64_t)pos + n_tokens > engine->n_ctx) {
        st = sd_fail(&engine->err, SPECDEC_ERR_CONTEXT_FULL,
                     "specdec_engine_forward: positions [%d, %lld) exceed n_ctx %d", (int)pos,
                     (long long)pos + n_tokens, (int)engine->n_ctx);
    } else {
        for (int32_t i = 0; i < n_tokens; i++)
            if (tokens[i] < 0 || tokens[i] >= engine->n_vocab) {
                st = sd_fail(&engine->err, SPECDEC_ERR_INVALID_ARGUMENT,
                             "specdec_engine_forward: tokens[%d] = %d outside [0, %d)", (int)i, (int)tokens[i],
                             (int)engine->n_vocab);
                break;
            }
        if (st == SPECDEC_OK)
            st = sd_engine_run(engine, r, role == SPECDEC_ROLE_TARGET ? "target" : "draft", tokens, n_tokens, pos,
                               logits);
    }
    sd_engine_leave(engine);
    return st;
}

int32_t specdec_engine_kv_length(const specdec_engine *engine, specdec_role role) {
    if (!engine) return -1;
    const sd_runner *r = sd_engine_role(engine, role);
    return r ? r->kv_len : -1;
}

specdec_status specdec_engine_kv_truncate(specdec_engine *engine, specdec_role role, int32_t length) {
    if (!engine) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_kv_truncate: engine is NULL");
    specdec_status st = sd_engine_enter(engine);
    if (st != SPECDEC_OK) return st;
    sd_runner *r = sd_engine_role(engine, role);
    if (!r)
        st = sd_fail(&engine->err, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_kv_truncate: role %d %s", (int)role,
                     role == SPECDEC_ROLE_DRAFT ? "(the engine has no draft model)" : "is not a role");
    else if (length < 0 || length > r->kv_len)
        st = sd_fail(&engine->err, SPECDEC_ERR_INVALID_ARGUMENT,
                     "specdec_engine_kv_truncate: length %d outside [0, kv length %d]", (int)length, (int)r->kv_len);
    else
        sd_runner_truncate(r, length);
    sd_engine_leave(engine);
    return st;
}

/* ------------------------------------------------------------------------- */
/* generation                                                                 */
/* ------------------------------------------------------------------------- */
specdec_generate_params specdec_generate_default_params(void) {
    specdec_generate_params p;
    memset(&p, 0, sizeof p);
    p.n_predict = 128;
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.seed = 0;
    p.sequence_id = 0;
    p.verify = SPECDEC_VERIFY_AUTO;
    p.n_draft = 4;
    p.adaptive_draft = 0;
    p.ignore_eos = 0;
    return p;
}

/* State of one specdec_generate call (on the caller's stack). */
typedef struct sd_gen {
    specdec_engine *e;
    const specdec_generate_params *p;
    sd_sampling_params sp;
    specdec_verify_mode mode;      /* resolved: GREEDY, REJECTION or MATCH */
    int32_t *out;
    int32_t n_out;
    int32_t L;                     /* tokens in e->seq */
    specdec_detok_stream *ds;      /* NULL without a tokenizer */
    size_t win_len;                /* bytes in e->text_win */
    specdec_stop_reason reason;
    specdec_stats *st;
} sd_gen;

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

/* Turn a logits row into the distribution sampled from (in place). Greedy needs only
 * the argmax, which processing preserves, so it skips the work. */
static specdec_status sd_gen_process(sd_gen *g, float *row) {
    if (g->mode == SPECDEC_VERIFY_GREEDY) return SPECDEC_OK;
    specdec_engine *e = g->e;
    return sd_sampling_process(row, e->n_vocab, &g->sp, e->sample_scratch, e->sample_scratch_size, row, &e->err);
}

/* A plain step: feed seq[L-1] to the target, sample the token at L. */
static specdec_status sd_gen_plain_step(sd_gen *g) {
    specdec_engine *e = g->e;
    int32_t L = g->L;
    double t0 = sd_now();
    specdec_status st = sd_engine_run(e, e->target, "target", e->seq + L - 1, 1, L - 1, e->p_rows);
    double t1 = sd_now();
    g->st->t_target_s += t1 - t0;
    if (st != SPECDEC_OK) return st;
    st = sd_gen_process(g, e->p_rows);
    if (st != SPECDEC_OK) return st;
    int32_t tok = sd_verify_target_sample(g->mode, e->p_rows, e->n_vocab, g->p->seed, g->p->sequence_id, L);
    g->st->t_verify_s += sd_now() - t1;
    g->st->n_rounds++;
    return sd_gen_emit(g, tok);
}

/* One speculative round with γ = gamma >= 1 drafts (see the top of this file). */
static specdec_status sd_gen_round(sd_gen *g, int32_t gamma) {
    specdec_engine *e = g->e;
    sd_runner *d = e->draft, *t = e->target;
    const size_t V = (size_t)e->n_vocab;
    const int32_t L = g->L;
    int32_t *x = e->seq + L; /* drafts are written in place: accepted ones stay */
    specdec_status st;

    /* 1. draft: catch up on what it has not seen (seq[L-1], plus the previous round's
     *    last draft when everything was accepted), then propose γ tokens. */
    double t0 = sd_now();
    const int32_t dkv = d->kv_len;
    const int32_t n_pend = L - dkv;
    if (n_pend < 1 || n_pend > SPECDEC_MAX_DRAFT + 1 || t->kv_len != L - 1)
        return sd_fail(&e->err, SPECDEC_ERR_INTERNAL, "round at length %d: draft kv %d, target kv %d", (int)L, (int)dkv,
                       (int)t->kv_len);
    st = sd_engine_run(e, d, "draft", e->seq + dkv, n_pend, dkv, e->p_rows);
    if (st != SPECDEC_OK) return st;
    memcpy(e->q_rows, e->p_rows + (size_t)(n_pend - 1) * V, V * sizeof(float));
    for (int32_t i = 0; i < gamma; i++) {
        float *q = e->q_rows + (size_t)i * V;
        if (i > 0) {
            st = sd_engine_run(e, d, "draft", x + i - 1, 1, L + i - 1, q);
            if (st != SPECDEC_OK) return st;
        }
        st = sd_gen_process(g, q);
        if (st != SPECDEC_OK) return st;
        x[i] = sd_verify_draft_sample(g->mode, q, e->n_vocab, g->p->seed, g->p->sequence_id, L + i);
    }
    double t1 = sd_now();

    /* 2. target: ONE pass over [seq[L-1], x1..xγ] -> p_1..p_{γ+1}. */
    st = sd_engine_run(e, t, "target", e->seq + L - 1, gamma + 1, L - 1, e->p_rows);
    if (st != SPECDEC_OK) return st;
    double t2 = sd_now();

    /* 3. verify. */
    for (int32_t i = 0; i <= gamma; i++) {
        st = sd_gen_process(g, e->p_rows + (size_t)i * V);
        if (st != SPECDEC_OK) return st;
    }
    sd_verify_uniforms u;
    sd_verify_fetch_uniforms(g->p->seed, g->p->sequence_id, L, gamma, &u);
    int32_t toks[SPECDEC_MAX_DRAFT + 1];
    int32_t n_acc = 0;
    st = sd_verify(g->mode, gamma, e->n_vocab, e->p_rows, e->q_rows, x, &u, toks, &n_acc, &e->err);
    if (st != SPECDEC_OK) return st;
    double t3 = sd_now();

    g->st->t_draft_s += t1 - t0;
    g->st->t_target_s += t2 - t1;
    g->st->t_verify_s += t3 - t2;
    g->st->n_rounds++;
    g->st->n_drafted += gamma;
    g->st->n_accepted += n_acc;
    sd_engine_adapt_observe(&e->adapt, gamma, n_acc, t1 - t0, t2 - t1);

    /* 4. emit (a stop can cut the round short), then roll both caches back so the
     *    last emitted token is pending for the next round. */
    for (int32_t i = 0; i <= n_acc && g->reason == SPECDEC_STOP_NONE; i++) {
        st = sd_gen_emit(g, toks[i]);
        if (st != SPECDEC_OK) break;
    }
    sd_runner_truncate(t, g->L - 1);
    sd_runner_truncate(d, g->L - 1);
    return st;
}

/* The generate loop of a CUDA engine with a device round: the same decisions as the
 * loop in sd_generate_locked (γ clipped to the budget and the context, plain steps
 * when no draft is used), each round one sd_cuda_round_run. The draft is n_pend tokens
 * behind at a round's start: 1 after the prefill and after a rejection, 2 after a
 * round that accepted everything. Stats: the round's wall time is split into draft /
 * target / verify by its device events (all of it counts as target time when the
 * events are unavailable). */
static specdec_status sd_gen_device_loop(sd_gen *g, int use_draft, int32_t *gamma_io) {
    specdec_engine *e = g->e;
    const specdec_generate_params *p = g->p;
    struct sd_cuda_round *rd = e->cuda_round;
    specdec_status st = sd_cuda_round_start(rd, g->mode, &g->sp, p->seed, p->sequence_id, g->L, e->seq[g->L - 1],
                                            &e->err);
    if (st != SPECDEC_OK) {
        if (st == SPECDEC_ERR_DEVICE_LOST) e->dead = 1;
        return st;
    }
    int32_t gamma = *gamma_io;
    int32_t n_pend = 1;
    while (g->reason == SPECDEC_STOP_NONE) {
        if (g->n_out >= p->n_predict) {
            g->reason = SPECDEC_STOP_N_PREDICT;
            break;
        }
        if (g->L >= e->n_ctx) {
            g->reason = SPECDEC_STOP_CONTEXT_FULL;
            break;
        }
        int32_t g_eff = use_draft ? sd_min_i32(gamma, p->n_predict - g->n_out - 1) : 0;
        g_eff = sd_min_i32(g_eff, e->n_ctx - g->L - 1);
        if (n_pend > 2) g_eff = 0; /* only after a plain step, which ends the budget anyway */
        if (g_eff < 0) g_eff = 0;
        int32_t toks[SPECDEC_MAX_DRAFT + 1];
        int32_t n_acc = 0;
        sd_cuda_round_timing tm;
        st = sd_cuda_round_run(rd, g_eff, n_pend, e->cuda_path == SD_ENGINE_CUDA_GRAPH, toks, &n_acc, &tm, &e->err);
        if (st != SPECDEC_OK) {
            if (st == SPECDEC_ERR_DEVICE_LOST) e->dead = 1;
            break;
        }
        double td = 0, tt = tm.t_wall, tv = 0;
        if (tm.stages && tm.t_gpu > 0) { /* the wall time in the device stages' proportions */
            td = tm.t_wall * tm.t_draft / tm.t_gpu;
            tv = tm.t_wall * tm.t_verify / tm.t_gpu;
            tt = tm.t_wall - td - tv;
        }
        g->st->t_draft_s += td;
        g->st->t_target_s += tt;
        g->st->t_verify_s += tv;
        g->st->n_rounds++;
        if (g_eff > 0) {
            g->st->n_drafted += g_eff;
            g->st->n_accepted += n_acc;
            sd_engine_adapt_observe(&e->adapt, g_eff, n_acc, td, tt);
            n_pend = n_acc == g_eff ? 2 : 1;
        } else {
            n_pend++;
        }
        for (int32_t i = 0; i <= n_acc && g->reason == SPECDEC_STOP_NONE; i++) {
            st = sd_gen_emit(g, toks[i]);
            if (st != SPECDEC_OK) break;
        }
        if (st != SPECDEC_OK) break;
        if (g->reason == SPECDEC_STOP_NONE && sd_cuda_round_length(rd) != g->L) {
            st = sd_fail(&e->err, SPECDEC_ERR_INTERNAL, "device round at length %d, engine at %d",
                         (int)sd_cuda_round_length(rd), (int)g->L);
            break;
        }
        if (g_eff > 0 && p->adaptive_draft) gamma = sd_engine_choose_gamma(&e->adapt, gamma, SPECDEC_MAX_DRAFT);
    }
    /* The caches as the host loop leaves them: the target holds seq[0..L-1), the draft
     * everything but its pending tokens (both truncated at a stop mid-round). */
    const int32_t Ld = sd_cuda_round_length(rd); /* -1 after a failed round: state unknown */
    e->target->kv_len = Ld >= 0 ? g->L - 1 : 0;
    if (use_draft) e->draft->kv_len = Ld >= 0 ? sd_max_i32(0, sd_min_i32(g->L - 1, Ld - n_pend)) : 0;
    *gamma_io = gamma;
    return st;
}

static specdec_status sd_gen_check(const specdec_engine *e, const int32_t *prompt, int32_t n_prompt,
                                   const specdec_generate_params *p, const int32_t *out_tokens, int32_t out_capacity,
                                   const int32_t *n_out, sd_errbuf *eb) {
    if (!prompt || !out_tokens || !n_out)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: %s is NULL",
                       !prompt ? "prompt" : !out_tokens ? "out_tokens" : "n_out");
    if (n_prompt <= 0) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: empty prompt (n_prompt %d)",
                                      (int)n_prompt);
    if (n_prompt >= e->n_ctx)
        return sd_fail(eb, SPECDEC_ERR_CONTEXT_FULL,
                       "specdec_generate: prompt of %d tokens leaves no room in the context of %d tokens",
                       (int)n_prompt, (int)e->n_ctx);
    for (int32_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= e->n_vocab)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: prompt[%d] = %d outside [0, %d)",
                           (int)i, (int)prompt[i], (int)e->n_vocab);
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
    if (st != SPECDEC_OK) return st;
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
    for (size_t i = 0; i < sizeof p->reserved_i / sizeof p->reserved_i[0]; i++)
        if (p->reserved_i[i])
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: reserved_i[%zu] = %d must be 0", i,
                           (int)p->reserved_i[i]);
    for (size_t i = 0; i < sizeof p->reserved / sizeof p->reserved[0]; i++)
        if (p->reserved[i])
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: reserved[%zu] must be 0", i);
    int64_t room = (int64_t)e->n_ctx - n_prompt;
    int64_t need = p->n_predict < room ? p->n_predict : room;
    if (out_capacity < need)
        return sd_fail(eb, SPECDEC_ERR_BUFFER_TOO_SMALL,
                       "specdec_generate: out_capacity %d < %lld (min(n_predict %d, n_ctx %d - n_prompt %d))",
                       (int)out_capacity, (long long)need, (int)p->n_predict, (int)e->n_ctx, (int)n_prompt);
    return SPECDEC_OK;
}

static specdec_status sd_generate_locked(specdec_engine *e, const int32_t *prompt, int32_t n_prompt,
                                         const specdec_generate_params *p, int32_t *out_tokens, int32_t out_capacity,
                                         int32_t *n_out, specdec_stats *stats) {
    double t_start = sd_now();
    if (e->dead) return sd_fail(&e->err, SPECDEC_ERR_DEVICE_LOST, "engine lost its device earlier; it can only be freed");
    specdec_status st = sd_gen_check(e, prompt, n_prompt, p, out_tokens, out_capacity, n_out, &e->err);
    if (st != SPECDEC_OK) return st;

    sd_gen g;
    memset(&g, 0, sizeof g);
    memset(stats, 0, sizeof *stats);
    g.e = e;
    g.p = p;
    g.sp = sd_sampling_params_from(p);
    g.mode = p->verify;
    if (g.mode == SPECDEC_VERIFY_AUTO) g.mode = p->temperature == 0.0f ? SPECDEC_VERIFY_GREEDY : SPECDEC_VERIFY_REJECTION;
    g.out = out_tokens;
    g.st = stats;
    const int use_draft = e->draft != NULL && p->n_draft > 0;
    int32_t gamma = use_draft ? p->n_draft : 0;
    memset(&e->adapt, 0, sizeof e->adapt);

    if (p->tokenizer) {
        st = specdec_detok_stream_create(p->tokenizer, 1, &g.ds);
        if (st != SPECDEC_OK)
            return sd_fail(&e->err, st, "specdec_generate: creating the streaming detokenizer: %s",
                           specdec_last_error());
    }

    /* Reset and prefill both caches with the prompt minus its last token, which the
     * first step feeds together with the drafts. */
    memcpy(e->seq, prompt, (size_t)n_prompt * sizeof(int32_t));
    g.L = n_prompt;
    sd_runner_truncate(e->target, 0);
    if (e->draft) sd_runner_truncate(e->draft, 0);
    stats->n_prompt = n_prompt;
    if (n_prompt > 1) {
        st = sd_engine_run(e, e->target, "target prefill", prompt, n_prompt - 1, 0, NULL);
        if (st == SPECDEC_OK && use_draft) st = sd_engine_run(e, e->draft, "draft prefill", prompt, n_prompt - 1, 0, NULL);
    }
    stats->t_prefill_s = sd_now() - t_start;

    if (st == SPECDEC_OK && e->cuda_round && e->cuda_path != SD_ENGINE_CUDA_HOST_ROWS)
        st = sd_gen_device_loop(&g, use_draft, &gamma);
    while (st == SPECDEC_OK && g.reason == SPECDEC_STOP_NONE) {
        if (g.n_out >= p->n_predict) {
            g.reason = SPECDEC_STOP_N_PREDICT;
            break;
        }
        if (g.L >= e->n_ctx) {
            g.reason = SPECDEC_STOP_CONTEXT_FULL;
            break;
        }
        /* every emitted token must fit the budget and the context: γ+1 <= both */
        int32_t g_eff = sd_min_i32(gamma, p->n_predict - g.n_out - 1);
        g_eff = sd_min_i32(g_eff, e->n_ctx - g.L - 1);
        if (g_eff <= 0) {
            st = sd_gen_plain_step(&g);
        } else {
            st = sd_gen_round(&g, g_eff);
            if (p->adaptive_draft) gamma = sd_engine_choose_gamma(&e->adapt, gamma, SPECDEC_MAX_DRAFT);
        }
    }

    if (g.ds) {
        /* held-back bytes (an incomplete UTF-8 tail) go to the callback as token -1 */
        const char *text = NULL;
        size_t len = 0;
        if (st == SPECDEC_OK && specdec_detok_stream_flush(g.ds, &text, &len) == SPECDEC_OK && len > 0 && p->callback)
            (void)p->callback(p->user_data, -1, text, len);
        specdec_detok_stream_free(g.ds);
    }

    *n_out = g.n_out;
    stats->n_generated = g.n_out;
    stats->acceptance_rate = stats->n_drafted ? (double)stats->n_accepted / (double)stats->n_drafted : 0.0;
    stats->tokens_per_round = stats->n_rounds ? (double)stats->n_generated / (double)stats->n_rounds : 0.0;
    stats->t_total_s = sd_now() - t_start;
    double t_gen = stats->t_total_s - stats->t_prefill_s;
    stats->tokens_per_second = t_gen > 0 ? (double)stats->n_generated / t_gen : 0.0;
    stats->final_n_draft = gamma;
    stats->stop_reason = g.reason;
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

/* ------------------------------------------------------------------------- */
/* adaptive γ                                                                 */
/* ------------------------------------------------------------------------- */
/* Decay per round of the acceptance counts and the cost regression: about the last
 * ten rounds dominate, so γ follows text whose predictability changes. */
#define SD_ADAPT_DECAY 0.9
#define SD_ADAPT_COST_EWMA 0.2
/* Cost ratio used while timings are unavailable or zero: one draft step costs this
 * fraction of a verify pass. */
#define SD_ADAPT_DEFAULT_RATIO 0.1

void sd_engine_adapt_observe(sd_engine_adapt *a, int32_t gamma, int32_t n_acc, double t_draft, double t_verify) {
    if (gamma <= 0) return;
    a->acc = SD_ADAPT_DECAY * a->acc + (double)n_acc;
    a->rej = SD_ADAPT_DECAY * a->rej + (n_acc < gamma ? 1.0 : 0.0);
    double cd = t_draft / (double)gamma;
    if (isfinite(cd) && cd >= 0) a->c_draft = a->n_obs == 0 ? cd : (1 - SD_ADAPT_COST_EWMA) * a->c_draft + SD_ADAPT_COST_EWMA * cd;
    if (isfinite(t_verify) && t_verify >= 0) {
        double xv = (double)(gamma + 1);
        a->s_w = SD_ADAPT_DECAY * a->s_w + 1.0;
        a->s_x = SD_ADAPT_DECAY * a->s_x + xv;
        a->s_y = SD_ADAPT_DECAY * a->s_y + t_verify;
        a->s_xx = SD_ADAPT_DECAY * a->s_xx + xv * xv;
        a->s_xy = SD_ADAPT_DECAY * a->s_xy + xv * t_verify;
    }
    a->n_obs++;
}

int32_t sd_engine_choose_gamma(const sd_engine_adapt *a, int32_t cur, int32_t gmax) {
    if (gmax < 1) return 1;
    if (gmax > SPECDEC_MAX_DRAFT) gmax = SPECDEC_MAX_DRAFT;
    if (a->n_obs < 2) return cur < 1 ? 1 : cur > gmax ? gmax : cur;
    /* α: acceptance per draft token, Beta(1,1)-smoothed: never exactly 0 or 1 */
    double alpha = (a->acc + 1.0) / (a->acc + a->rej + 2.0);
    /* c_verify(γ) = c0 + c1·(γ+1) by weighted least squares; a flat fit (one γ seen so
     * far) means c1 = 0, i.e. verify cost independent of γ (memory-bound GPU passes) */
    double c0 = 0, c1 = 0;
    if (a->s_w > 0) {
        double mx = a->s_x / a->s_w, my = a->s_y / a->s_w;
        double vxx = a->s_xx / a->s_w - mx * mx;
        double vxy = a->s_xy / a->s_w - mx * my;
        if (vxx > 1e-9) c1 = vxy / vxx;
        if (c1 < 0) c1 = 0;
        c0 = my - c1 * mx;
        if (c0 < 0) {
            c0 = 0;
            c1 = mx > 0 ? my / mx : 0;
        }
    }
    double cd = a->c_draft;
    if (!(c0 + c1 > 0) || !isfinite(c0 + c1 + cd) || cd < 0) {
        c0 = 1.0;
        c1 = 0.0;
        cd = SD_ADAPT_DEFAULT_RATIO;
    }
    int32_t best = 1;
    double best_v = -1;
    for (int32_t gm = 1; gm <= gmax; gm++) {
        double expect = (1.0 - pow(alpha, gm + 1)) / (1.0 - alpha);
        double cost = gm * cd + c0 + c1 * (gm + 1);
        double v = expect / cost;
        if (v > best_v * (1 + 1e-12)) {
            best_v = v;
            best = gm;
        }
    }
    return best;
}
