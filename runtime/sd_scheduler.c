/* sd_scheduler.c — specdec_scheduler_*: many requests on one model pair (first version).
 *
 * This version does NOT batch. It is built only on the public engine API: the
 * scheduler owns max_active engines (specdec_engine_create with the caller's params)
 * and one worker thread per engine; a worker takes the oldest queued request and runs
 * specdec_generate for it on its own engine, so every output is exactly what
 * specdec_generate alone produces. The batched implementation (one speculative round
 * over all active sequences, paged KV cache) will replace these internals behind the
 * same ABI; until then kv_block_tokens / kv_pool_blocks are only validated (plus the
 * "never fits in the pool" refusal at submit) and the kv_blocks_* metrics stay 0.
 *
 * Cancellation goes through the generate callback: every request runs with a wrapper
 * callback that forwards to the user's and returns non-zero once the request's cancel
 * flag is set; such a stop becomes the outcome SPECDEC_ERR_CANCELLED, tokens so far kept.
 *
 * Locking: one mutex guards the queue, the id table, request states and the metrics.
 * A request's fields other than `state` are written only by the worker running it,
 * before it takes the lock to mark the request done; readers look at them only once
 * they see SD_REQ_DONE under the lock. The cancel flag is atomic so the wrapper does
 * not take the lock per token. Allocation happens only in create and submit (through
 * sd_alloc, so tests can fail each allocation). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "specdec.h"
#include "sd_alloc.h"
#include "sd_engine.h"
#include "sd_error.h"
#include "sd_sample_rules.h"

#define SD_SCHED_MAX_ACTIVE 256
#define SD_SCHED_MAX_QUEUED (1 << 20)
#define SD_SCHED_MAX_BLOCK_TOKENS 4096

typedef enum sd_req_state { SD_REQ_QUEUED, SD_REQ_RUNNING, SD_REQ_DONE } sd_req_state;

typedef struct sd_req {
    specdec_request_id id;
    struct sd_req *hnext;         /* chain of the id table bucket */
    struct sd_req *qprev, *qnext; /* FIFO links while queued */
    sd_req_state state;           /* under the scheduler's lock */
    atomic_int cancel;            /* set by cancel/shutdown; read by the token wrapper */
    int stopped_by_cancel;        /* the wrapper stopped generation for a cancel (worker only) */
    int32_t *prompt;              /* [n_prompt + cap]: the prompt, then the output */
    int32_t *out;                 /* prompt + n_prompt */
    int32_t n_prompt, cap, n_out;
    char *stop_block;             /* [n_stop] pointers then the strings; NULL without stops */
    specdec_generate_params gp;   /* the caller's, stop_strings pointing into stop_block */
    specdec_stats stats;
    specdec_status outcome;
} sd_req;

typedef struct sd_worker {
    specdec_scheduler *s;
    specdec_engine *engine;       /* owned */
    sd_req *current;              /* the request it runs, under the lock */
    pthread_t thread;
    int started;
} sd_worker;

struct specdec_scheduler {
    pthread_mutex_t mu;
    pthread_cond_t work_cv;       /* a request was queued, or stopping: wakes workers */
    pthread_cond_t done_cv;       /* a request ended, or the workers were joined: wakes waiters */
    int sync_ready;               /* mutex and conds initialised */
    specdec_scheduler_params p;
    int32_t n_ctx, n_vocab;
    int has_draft;
    sd_worker *workers;           /* [p.max_active] */
    sd_req **buckets;             /* [n_buckets] id table, intrusive chains */
    size_t n_buckets;             /* power of two */
    sd_req *q_head, *q_tail;      /* FIFO of queued requests */
    specdec_request_id last_id;
    int stopping, join_claimed, joined;
    specdec_scheduler_metrics m;
};

/* The scheduler whose worker runs on this thread (shutdown/free from a callback). */
static _Thread_local const specdec_scheduler *sd_sched_self;

/* ------------------------------------------------------------------------- */
/* requests: id table, queue, allocation                                      */
/* ------------------------------------------------------------------------- */
static sd_req **sd_sched_slot(specdec_scheduler *s, specdec_request_id id) {
    sd_req **pp = &s->buckets[(size_t)id & (s->n_buckets - 1)];
    while (*pp && (*pp)->id != id) pp = &(*pp)->hnext;
    return pp;
}

static sd_req *sd_sched_find(specdec_scheduler *s, specdec_request_id id) {
    return id > 0 ? *sd_sched_slot(s, id) : NULL;
}

static void sd_sched_unlink_id(specdec_scheduler *s, sd_req *r) {
    sd_req **pp = sd_sched_slot(s, r->id);
    if (*pp == r) *pp = r->hnext;
}

static void sd_queue_push(specdec_scheduler *s, sd_req *r) {
    r->qnext = NULL;
    r->qprev = s->q_tail;
    if (s->q_tail) s->q_tail->qnext = r;
    else s->q_head = r;
    s->q_tail = r;
    s->m.queued++;
}

static void sd_queue_remove(specdec_scheduler *s, sd_req *r) {
    if (r->qprev) r->qprev->qnext = r->qnext;
    else s->q_head = r->qnext;
    if (r->qnext) r->qnext->qprev = r->qprev;
    else s->q_tail = r->qprev;
    r->qprev = r->qnext = NULL;
    s->m.queued--;
}

static void sd_req_free(sd_req *r) {
    if (!r) return;
    sd_free(r->prompt);
    sd_free(r->stop_block);
    sd_free(r);
}

/* Copy the stop strings into one block: pointers first, then the bytes. */
static specdec_status sd_req_copy_stops(sd_req *r, const specdec_generate_params *p) {
    if (p->n_stop_strings <= 0) {
        r->gp.stop_strings = NULL;
        r->gp.n_stop_strings = 0;
        return SPECDEC_OK;
    }
    size_t n = (size_t)p->n_stop_strings, bytes = n * sizeof(char *);
    for (size_t i = 0; i < n; i++) bytes += strlen(p->stop_strings[i]) + 1;
    r->stop_block = sd_malloc(bytes);
    if (!r->stop_block)
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_scheduler_submit: %zu bytes of stop strings", bytes);
    char **ptrs = (char **)(void *)r->stop_block;
    char *dst = r->stop_block + n * sizeof(char *);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(p->stop_strings[i]) + 1;
        memcpy(dst, p->stop_strings[i], len);
        ptrs[i] = dst;
        dst += len;
    }
    r->gp.stop_strings = (const char *const *)ptrs;
    return SPECDEC_OK;
}

/* A request holding copies of the prompt and params and room for its output. */
static specdec_status sd_req_new(const specdec_scheduler *s, const int32_t *prompt, int32_t n_prompt,
                                 const specdec_generate_params *p, sd_req **out) {
    *out = NULL;
    sd_req *r = sd_calloc(1, sizeof *r);
    if (!r) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_scheduler_submit: request record");
    int32_t room = s->n_ctx - n_prompt;
    r->n_prompt = n_prompt;
    r->cap = p->n_predict < room ? p->n_predict : room;
    r->gp = *p;
    atomic_init(&r->cancel, 0);
    r->prompt = sd_malloc(((size_t)n_prompt + (size_t)r->cap) * sizeof(int32_t));
    if (!r->prompt) {
        int32_t cap = r->cap;
        sd_req_free(r);
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_scheduler_submit: prompt of %d tokens + output of %d",
                       (int)n_prompt, (int)cap);
    }
    memcpy(r->prompt, prompt, (size_t)n_prompt * sizeof(int32_t));
    r->out = r->prompt + n_prompt;
    specdec_status st = sd_req_copy_stops(r, p);
    if (st != SPECDEC_OK) {
        sd_req_free(r);
        return st;
    }
    *out = r;
    return SPECDEC_OK;
}

/* ------------------------------------------------------------------------- */
/* validation (mirrors specdec_generate's, which runs again in the worker)     */
/* ------------------------------------------------------------------------- */
static specdec_status sd_sched_check_prompt(const specdec_scheduler *s, const int32_t *prompt, int32_t n_prompt,
                                            const specdec_generate_params *p) {
    const char *fn = "specdec_scheduler_submit";
    if (!prompt) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: prompt is NULL", fn);
    if (n_prompt <= 0)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: empty prompt (n_prompt %d)", fn, (int)n_prompt);
    if (n_prompt >= s->n_ctx)
        return sd_fail(NULL, SPECDEC_ERR_CONTEXT_FULL, "%s: prompt of %d tokens leaves no room in the context of %d",
                       fn, (int)n_prompt, (int)s->n_ctx);
    for (int32_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= s->n_vocab)
            return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: prompt[%d] = %d outside [0, %d)", fn, (int)i,
                           (int)prompt[i], (int)s->n_vocab);
    if (p->n_predict <= 0)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: n_predict %d must be > 0", fn, (int)p->n_predict);
    if (s->p.kv_pool_blocks > 0) {
        int64_t tokens = (int64_t)n_prompt + p->n_predict;
        if (tokens > s->n_ctx) tokens = s->n_ctx;
        int64_t blocks = (tokens + s->p.kv_block_tokens - 1) / s->p.kv_block_tokens;
        if (blocks > s->p.kv_pool_blocks)
            return sd_fail(NULL, SPECDEC_ERR_CONTEXT_FULL,
                           "%s: %lld tokens need %lld KV blocks of %d tokens; the pool has %d", fn, (long long)tokens,
                           (long long)blocks, (int)s->p.kv_block_tokens, (int)s->p.kv_pool_blocks);
    }
    return SPECDEC_OK;
}

static specdec_status sd_sched_check_params(const specdec_scheduler *s, const specdec_generate_params *p) {
    const char *fn = "specdec_scheduler_submit";
    if (p->n_draft < 0 || p->n_draft > SPECDEC_MAX_DRAFT)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: n_draft %d outside [0, %d]", fn, (int)p->n_draft,
                       SPECDEC_MAX_DRAFT);
    if (p->adaptive_draft && s->has_draft && p->n_draft == 0)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: adaptive_draft needs a starting n_draft >= 1", fn);
    if ((int)p->verify < SPECDEC_VERIFY_AUTO || (int)p->verify > SPECDEC_VERIFY_MATCH)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: unknown verify mode %d", fn, (int)p->verify);
    sd_sampling_params sp = sd_sampling_params_from(p);
    specdec_status st = sd_sampling_check_params(&sp, NULL);
    if (st != SPECDEC_OK) return st;
    if (p->n_stop_strings < 0 || (p->n_stop_strings > 0 && !p->stop_strings))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: n_stop_strings %d with stop_strings %s", fn,
                       (int)p->n_stop_strings, p->stop_strings ? "set" : "NULL");
    if (p->n_stop_strings > 0 && !p->tokenizer)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: stop strings need params.tokenizer", fn);
    for (int32_t i = 0; i < p->n_stop_strings; i++) {
        size_t n = p->stop_strings[i] ? strlen(p->stop_strings[i]) : 0;
        if (n == 0 || n > SD_ENGINE_MAX_STOP_LEN)
            return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: stop_strings[%d] is NULL, empty or over %d bytes",
                           fn, (int)i, SD_ENGINE_MAX_STOP_LEN);
    }
    for (size_t i = 0; i < sizeof p->reserved_i / sizeof p->reserved_i[0]; i++)
        if (p->reserved_i[i]) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: reserved_i[%zu] != 0", fn, i);
    for (size_t i = 0; i < sizeof p->reserved / sizeof p->reserved[0]; i++)
        if (p->reserved[i]) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: reserved[%zu] != 0", fn, i);
    return SPECDEC_OK;
}

static specdec_status sd_sched_check_create(const specdec_scheduler_params *p) {
    const char *fn = "specdec_scheduler_create";
    if (p->max_active < 1 || p->max_active > SD_SCHED_MAX_ACTIVE)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: max_active %d outside [1, %d]", fn,
                       (int)p->max_active, SD_SCHED_MAX_ACTIVE);
    if (p->max_queued < 1 || p->max_queued > SD_SCHED_MAX_QUEUED)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: max_queued %d outside [1, %d]", fn,
                       (int)p->max_queued, SD_SCHED_MAX_QUEUED);
    if (p->kv_block_tokens < 1 || p->kv_block_tokens > SD_SCHED_MAX_BLOCK_TOKENS)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: kv_block_tokens %d outside [1, %d]", fn,
                       (int)p->kv_block_tokens, SD_SCHED_MAX_BLOCK_TOKENS);
    if (p->kv_pool_blocks < 0)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: kv_pool_blocks %d < 0", fn, (int)p->kv_pool_blocks);
    for (size_t i = 0; i < sizeof p->reserved_i / sizeof p->reserved_i[0]; i++)
        if (p->reserved_i[i]) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: reserved_i[%zu] != 0", fn, i);
    for (size_t i = 0; i < sizeof p->reserved / sizeof p->reserved[0]; i++)
        if (p->reserved[i]) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: reserved[%zu] != 0", fn, i);
    return SPECDEC_OK;
}

/* ------------------------------------------------------------------------- */
/* workers                                                                    */
/* ------------------------------------------------------------------------- */
static int sd_sched_on_token(void *ud, int32_t token, const char *piece, size_t len) {
    sd_req *r = ud;
    int user = r->gp.callback ? r->gp.callback(r->gp.user_data, token, piece, len) : 0;
    if (token < 0) return 0; /* the final flush: its return value is ignored anyway */
    if (atomic_load_explicit(&r->cancel, memory_order_acquire)) {
        r->stopped_by_cancel = 1;
        return 1;
    }
    return user;
}

static void sd_sched_run(specdec_engine *e, sd_req *r) {
    specdec_generate_params gp = r->gp;
    gp.callback = sd_sched_on_token;
    gp.user_data = r;
    int32_t n = 0;
    specdec_status st = specdec_generate(e, r->prompt, r->n_prompt, &gp, r->out, r->cap, &n, &r->stats);
    r->n_out = n;
    /* cancelled only if the cancel is what stopped it: a request that ended on its own
     * (EOS, n_predict ...) at the same token keeps its outcome */
    if (st == SPECDEC_OK && r->stopped_by_cancel && r->stats.stop_reason == SPECDEC_STOP_CALLBACK)
        st = SPECDEC_ERR_CANCELLED;
    r->outcome = st;
}

/* Under the lock: mark r done and count it. */
static void sd_sched_done(specdec_scheduler *s, sd_req *r) {
    r->state = SD_REQ_DONE;
    if (r->outcome == SPECDEC_OK) s->m.finished++;
    else if (r->outcome == SPECDEC_ERR_CANCELLED) s->m.cancelled++;
    else s->m.failed++;
    s->m.tokens_generated += r->stats.n_generated;
    s->m.rounds += r->stats.n_rounds;
    s->m.drafted += r->stats.n_drafted;
    s->m.accepted += r->stats.n_accepted;
    pthread_cond_broadcast(&s->done_cv);
}

static void *sd_sched_worker(void *arg) {
    sd_worker *w = arg;
    specdec_scheduler *s = w->s;
    sd_sched_self = s;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->stopping && !s->q_head) pthread_cond_wait(&s->work_cv, &s->mu);
        if (s->stopping) break; /* shutdown already ended everything queued */
        sd_req *r = s->q_head;
        sd_queue_remove(s, r);
        r->state = SD_REQ_RUNNING;
        w->current = r;
        s->m.active++;
        pthread_mutex_unlock(&s->mu);
        sd_sched_run(w->engine, r);
        pthread_mutex_lock(&s->mu);
        w->current = NULL;
        s->m.active--;
        sd_sched_done(s, r);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ------------------------------------------------------------------------- */
/* create / shutdown / free                                                   */
/* ------------------------------------------------------------------------- */
specdec_scheduler_params specdec_scheduler_default_params(void) {
    specdec_scheduler_params p;
    memset(&p, 0, sizeof p);
    p.max_active = 8;
    p.max_queued = 1024;
    p.kv_block_tokens = 16;
    p.kv_pool_blocks = 0;
    return p;
}

static specdec_status sd_sched_init_sync(specdec_scheduler *s) {
    pthread_condattr_t ca;
    int rc = pthread_condattr_init(&ca);
    if (rc != 0)
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_scheduler_create: pthread_condattr_init: %s",
                       strerror(rc));
    int stage = 0; /* how many of mutex, work_cv, done_cv exist */
    rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* waits immune to wall-clock jumps */
    if (rc == 0 && (rc = pthread_mutex_init(&s->mu, NULL)) == 0) stage = 1;
    if (stage == 1 && (rc = pthread_cond_init(&s->work_cv, &ca)) == 0) stage = 2;
    if (stage == 2 && (rc = pthread_cond_init(&s->done_cv, &ca)) == 0) stage = 3;
    pthread_condattr_destroy(&ca);
    if (stage == 3) {
        s->sync_ready = 1;
        return SPECDEC_OK;
    }
    if (stage >= 2) pthread_cond_destroy(&s->work_cv);
    if (stage >= 1) pthread_mutex_destroy(&s->mu);
    return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_scheduler_create: mutex/condition init: %s",
                   strerror(rc));
}

static specdec_status sd_sched_alloc(specdec_scheduler *s) {
    size_t want = 2 * ((size_t)s->p.max_queued + (size_t)s->p.max_active), n = 64;
    while (n < want && n < ((size_t)1 << 16)) n *= 2; /* chains stay short; finished ones wait in them too */
    s->n_buckets = n;
    s->buckets = sd_calloc(n, sizeof *s->buckets);
    s->workers = sd_calloc((size_t)s->p.max_active, sizeof *s->workers);
    if (!s->buckets || !s->workers)
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_scheduler_create: id table of %zu / %d workers", n,
                       (int)s->p.max_active);
    return SPECDEC_OK;
}

static specdec_status sd_sched_make_engines(specdec_scheduler *s, const specdec_model *target,
                                            const specdec_model *draft, const specdec_engine_params *ep) {
    specdec_model_info info;
    specdec_status st = specdec_model_get_info(target, &info);
    if (st != SPECDEC_OK) return sd_fail(NULL, st, "specdec_scheduler_create: target model info");
    s->n_vocab = info.vocab_size;
    s->has_draft = draft != NULL;
    for (int32_t i = 0; i < s->p.max_active; i++) {
        s->workers[i].s = s;
        st = specdec_engine_create(target, draft, ep, &s->workers[i].engine);
        if (st != SPECDEC_OK)
            return sd_fail(NULL, st, "specdec_scheduler_create: engine %d of %d: %s", (int)i, (int)s->p.max_active,
                           specdec_last_error());
    }
    s->n_ctx = specdec_engine_n_ctx(s->workers[0].engine);
    return SPECDEC_OK;
}

static specdec_status sd_sched_start(specdec_scheduler *s) {
    for (int32_t i = 0; i < s->p.max_active; i++) {
        int rc = pthread_create(&s->workers[i].thread, NULL, sd_sched_worker, &s->workers[i]);
        if (rc != 0)
            return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_scheduler_create: starting thread %d: %s", (int)i,
                           strerror(rc));
        s->workers[i].started = 1;
    }
    return SPECDEC_OK;
}

/* Under the lock: end every queued request as CANCELLED and flag the running ones. */
static void sd_sched_cancel_all(specdec_scheduler *s) {
    while (s->q_head) {
        sd_req *r = s->q_head;
        sd_queue_remove(s, r);
        r->outcome = SPECDEC_ERR_CANCELLED;
        sd_sched_done(s, r);
    }
    for (int32_t i = 0; s->workers && i < s->p.max_active; i++)
        if (s->workers[i].current) atomic_store_explicit(&s->workers[i].current->cancel, 1, memory_order_release);
}

void specdec_scheduler_shutdown(specdec_scheduler *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    if (!s->stopping) {
        s->stopping = 1;
        sd_sched_cancel_all(s);
        pthread_cond_broadcast(&s->work_cv);
    }
    if (sd_sched_self == s) { /* from a token callback: a worker cannot join itself */
        pthread_mutex_unlock(&s->mu);
        return;
    }
    if (!s->join_claimed) {
        s->join_claimed = 1;
        pthread_mutex_unlock(&s->mu);
        for (int32_t i = 0; s->workers && i < s->p.max_active; i++)
            if (s->workers[i].started) pthread_join(s->workers[i].thread, NULL);
        pthread_mutex_lock(&s->mu);
        s->joined = 1;
        pthread_cond_broadcast(&s->done_cv);
    }
    while (!s->joined) pthread_cond_wait(&s->done_cv, &s->mu); /* another thread is joining */
    pthread_mutex_unlock(&s->mu);
}

/* Free everything; the workers must have stopped (or never started). */
static void sd_sched_destroy(specdec_scheduler *s) {
    if (s->buckets)
        for (size_t b = 0; b < s->n_buckets; b++)
            while (s->buckets[b]) {
                sd_req *r = s->buckets[b];
                s->buckets[b] = r->hnext;
                sd_req_free(r);
            }
    if (s->workers)
        for (int32_t i = 0; i < s->p.max_active; i++) specdec_engine_free(s->workers[i].engine);
    sd_free(s->buckets);
    sd_free(s->workers);
    if (s->sync_ready) {
        pthread_cond_destroy(&s->done_cv);
        pthread_cond_destroy(&s->work_cv);
        pthread_mutex_destroy(&s->mu);
    }
    sd_free(s);
}

void specdec_scheduler_free(specdec_scheduler *s) {
    if (!s) return;
    if (sd_sched_self == s) { /* misuse: freeing from a token callback would free the running worker */
        (void)sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT,
                      "specdec_scheduler_free called from a token callback: ignored");
        return;
    }
    specdec_scheduler_shutdown(s);
    sd_sched_destroy(s);
}

specdec_status specdec_scheduler_create(const specdec_model *target, const specdec_model *draft,
                                        const specdec_engine_params *engine_params,
                                        const specdec_scheduler_params *params, specdec_scheduler **out) {
    if (out) *out = NULL;
    if (!out || !target)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_scheduler_create: %s is NULL",
                       !out ? "out" : "target");
    specdec_scheduler_params p = params ? *params : specdec_scheduler_default_params();
    specdec_status st = sd_sched_check_create(&p);
    if (st != SPECDEC_OK) return st;
    specdec_scheduler *s = sd_calloc(1, sizeof *s);
    if (!s) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_scheduler_create: scheduler record");
    s->p = p;
    st = sd_sched_init_sync(s);
    if (st == SPECDEC_OK) st = sd_sched_alloc(s);
    if (st == SPECDEC_OK) st = sd_sched_make_engines(s, target, draft, engine_params);
    if (st == SPECDEC_OK) st = sd_sched_start(s);
    if (st != SPECDEC_OK) {
        sd_errbuf keep; /* shutting down may not touch the detail, but keep it safe */
        sd_err_copy(&keep, NULL);
        if (s->sync_ready) specdec_scheduler_shutdown(s); /* joins the threads that did start */
        sd_sched_destroy(s);
        sd_err_copy(NULL, &keep);
        return st;
    }
    *out = s;
    return SPECDEC_OK;
}

int32_t specdec_scheduler_n_ctx(const specdec_scheduler *s) { return s ? s->n_ctx : 0; }

const char *specdec_scheduler_last_error(const specdec_scheduler *s) {
    (void)s;
    return specdec_last_error();
}

/* ------------------------------------------------------------------------- */
/* submit / cancel / wait / metrics                                           */
/* ------------------------------------------------------------------------- */
specdec_status specdec_scheduler_submit(specdec_scheduler *s, const int32_t *prompt, int32_t n_prompt,
                                        const specdec_generate_params *params, specdec_request_id *out_id) {
    if (out_id) *out_id = 0;
    if (!s) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_scheduler_submit: scheduler is NULL");
    specdec_generate_params defaults;
    if (!params) {
        defaults = specdec_generate_default_params();
        params = &defaults;
    }
    specdec_status st = SPECDEC_OK;
    if (!out_id) st = sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_scheduler_submit: out_id is NULL");
    if (st == SPECDEC_OK) st = sd_sched_check_prompt(s, prompt, n_prompt, params);
    if (st == SPECDEC_OK) st = sd_sched_check_params(s, params);
    sd_req *r = NULL;
    if (st == SPECDEC_OK) st = sd_req_new(s, prompt, n_prompt, params, &r);
    pthread_mutex_lock(&s->mu);
    if (st == SPECDEC_OK && s->stopping)
        st = sd_fail(NULL, SPECDEC_ERR_SHUT_DOWN, "specdec_scheduler_submit: the scheduler is shut down");
    if (st == SPECDEC_OK && s->m.queued >= s->p.max_queued)
        st = sd_fail(NULL, SPECDEC_ERR_QUEUE_FULL, "specdec_scheduler_submit: %d requests already queued",
                     (int)s->m.queued);
    if (st != SPECDEC_OK) {
        s->m.rejected++;
        pthread_mutex_unlock(&s->mu);
        sd_req_free(r);
        return st;
    }
    r->id = ++s->last_id;
    r->state = SD_REQ_QUEUED;
    r->hnext = *sd_sched_slot(s, r->id); /* NULL: ids are new */
    *sd_sched_slot(s, r->id) = r;
    sd_queue_push(s, r);
    s->m.submitted++;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
    *out_id = r->id;
    return SPECDEC_OK;
}

specdec_status specdec_scheduler_cancel(specdec_scheduler *s, specdec_request_id id) {
    if (!s) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_scheduler_cancel: scheduler is NULL");
    pthread_mutex_lock(&s->mu);
    sd_req *r = sd_sched_find(s, id);
    if (!r) {
        pthread_mutex_unlock(&s->mu);
        return sd_fail(NULL, SPECDEC_ERR_NOT_FOUND, "specdec_scheduler_cancel: no request %lld", (long long)id);
    }
    if (r->state == SD_REQ_QUEUED) {
        sd_queue_remove(s, r);
        r->outcome = SPECDEC_ERR_CANCELLED;
        sd_sched_done(s, r);
    } else if (r->state == SD_REQ_RUNNING) {
        atomic_store_explicit(&r->cancel, 1, memory_order_release);
    }
    pthread_mutex_unlock(&s->mu);
    return SPECDEC_OK;
}

/* Absolute CLOCK_MONOTONIC time timeout_ms from now. */
static struct timespec sd_deadline(int32_t timeout_ms) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += timeout_ms / 1000;
    t.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* Under the lock: the request once it is done, NULL with *st set otherwise. */
static sd_req *sd_sched_wait_done(specdec_scheduler *s, specdec_request_id id, int32_t timeout_ms,
                                  specdec_status *st) {
    struct timespec dl = sd_deadline(timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        sd_req *r = sd_sched_find(s, id); /* again after every wake-up: another waiter may collect it */
        if (!r) {
            *st = sd_fail(NULL, SPECDEC_ERR_NOT_FOUND, "specdec_scheduler_wait: no request %lld", (long long)id);
            return NULL;
        }
        if (r->state == SD_REQ_DONE) return r;
        int rc = 0;
        if (timeout_ms < 0) pthread_cond_wait(&s->done_cv, &s->mu);
        else if (timeout_ms > 0) rc = pthread_cond_timedwait(&s->done_cv, &s->mu, &dl);
        if (timeout_ms == 0 || rc == ETIMEDOUT) {
            r = sd_sched_find(s, id);
            if (r && r->state == SD_REQ_DONE) return r;
            *st = r ? sd_fail(NULL, SPECDEC_ERR_TIMEOUT, "specdec_scheduler_wait: request %lld still running",
                              (long long)id)
                    : sd_fail(NULL, SPECDEC_ERR_NOT_FOUND, "specdec_scheduler_wait: no request %lld", (long long)id);
            return NULL;
        }
    }
}

specdec_status specdec_scheduler_wait(specdec_scheduler *s, specdec_request_id id, int32_t timeout_ms,
                                      int32_t *out_tokens, int32_t capacity, int32_t *n_out, specdec_stats *stats,
                                      specdec_status *request_status) {
    if (!s || !n_out || !request_status || capacity < 0 || (capacity > 0 && !out_tokens))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT,
                       "specdec_scheduler_wait: %s", !s ? "scheduler is NULL" : !n_out ? "n_out is NULL"
                       : !request_status ? "request_status is NULL" : "bad out_tokens / capacity");
    specdec_status st = SPECDEC_OK;
    pthread_mutex_lock(&s->mu);
    sd_req *r = sd_sched_wait_done(s, id, timeout_ms, &st);
    if (r && r->n_out > capacity) {
        *n_out = r->n_out;
        pthread_mutex_unlock(&s->mu);
        return sd_fail(NULL, SPECDEC_ERR_BUFFER_TOO_SMALL, "specdec_scheduler_wait: %d tokens, capacity %d",
                       (int)r->n_out, (int)capacity);
    }
    if (r) sd_sched_unlink_id(s, r);
    pthread_mutex_unlock(&s->mu);
    if (!r) return st;
    if (r->n_out > 0) memcpy(out_tokens, r->out, (size_t)r->n_out * sizeof(int32_t));
    *n_out = r->n_out;
    if (stats) *stats = r->stats;
    *request_status = r->outcome;
    sd_req_free(r);
    return SPECDEC_OK;
}

specdec_status specdec_scheduler_get_metrics(const specdec_scheduler *s, specdec_scheduler_metrics *m) {
    if (!s || !m)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_scheduler_get_metrics: %s is NULL",
                       !s ? "scheduler" : "metrics");
    specdec_scheduler *ms = (specdec_scheduler *)s; /* the lock is the only thing changed */
    pthread_mutex_lock(&ms->mu);
    *m = s->m;
    pthread_mutex_unlock(&ms->mu);
    return SPECDEC_OK;
}
