/* test_scheduler_faults.c — every bad input and fault of the scheduler ABI gets its
 * defined status, leaves nothing behind (the ASan build checks leaks) and does not
 * disturb other requests (a good request before and after each group gives the
 * reference output):
 *  - create: NULL arguments, each parameter out of range, reserved fields set, bad engine
 *    params; allocation failure at every k during create (OUT_OF_MEMORY, *out NULL);
 *  - submit: NULL scheduler / prompt / out_id, empty prompt, prompt filling the context,
 *    ids outside [0, V), bad sampling values, bad stop strings, reserved fields, a
 *    request that cannot fit the KV pool, a full queue, submit after shutdown;
 *    allocation failure at every k during submit;
 *  - cancel of an unknown, finished-but-uncollected and collected id; of a queued and of
 *    a running request (tokens so far kept, a prefix of the reference);
 *  - wait: timeouts, a buffer too small (nothing collected), bad arguments;
 *  - wait_any (0.5.5): bad arguments, TIMEOUT, each finished request reported once in the
 *    order it finished (cancelled queued ones included), never one collected by wait, a
 *    collector thread serving requests submitted meanwhile, SHUT_DOWN once all are reported;
 *  - a callback that asks to stop; shutdown and free with requests queued and running.
 * A "gate" callback blocks the single worker inside a request's first token so that
 * states (running, queued) are deterministic.
 * Usage: test_scheduler_faults TARGET_DIR DRAFT_DIR */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>

#include "sd_alloc.h"
#include "sched_common.h"

#define NP 8 /* tokens of the good requests (few: the sanitizer builds are slow) */

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open, entered;
} gate;

static int gate_cb(void *ud, int32_t tok, const char *piece, size_t len) {
    (void)tok, (void)piece, (void)len;
    gate *g = ud;
    pthread_mutex_lock(&g->mu);
    g->entered++;
    pthread_cond_broadcast(&g->cv);
    while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    return 0;
}

static void gate_init(gate *g) {
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = g->entered = 0;
}
static void gate_wait_entered(gate *g) {
    pthread_mutex_lock(&g->mu);
    while (!g->entered) pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}
static void gate_open(gate *g) {
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}
static void gate_destroy(gate *g) {
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

typedef struct ctx {
    sc_env e;
    int32_t prompt[64], n_prompt;
    int32_t ref[NP], n_ref;
    specdec_engine_params ep;
} ctx;

static specdec_scheduler *make(ctx *c, int32_t max_active, int32_t max_queued) {
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = max_active;
    sp.max_queued = max_queued;
    specdec_scheduler *s = NULL;
    specdec_status st = specdec_scheduler_create(c->e.tm, c->e.dm, &c->ep, &sp, &s);
    SD_CHECK(st == SPECDEC_OK, "create: %s", specdec_last_error());
    return s;
}

/* A good greedy request through s gives the reference. */
static void good_request(ctx *c, specdec_scheduler *s, const char *when) {
    specdec_generate_params gp = sc_params(0, 0, NP, 4);
    specdec_request_id id = 0;
    int32_t out[NP], n = -1;
    specdec_status outcome = SPECDEC_ERR_INTERNAL;
    specdec_status st = specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &id);
    if (st == SPECDEC_OK) st = specdec_scheduler_wait(s, id, -1, out, NP, &n, NULL, &outcome);
    SD_CHECK(st == SPECDEC_OK && outcome == SPECDEC_OK && n == c->n_ref && sc_same(out, c->ref, n),
             "good request %s: status %d outcome %d, %d tokens", when, st, outcome, (int)n);
}

static void test_create_args(ctx *c) {
    specdec_scheduler *s = (specdec_scheduler *)&s; /* must be reset to NULL */
    SD_CHECK(specdec_scheduler_create(c->e.tm, c->e.dm, NULL, NULL, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "out NULL");
    SD_CHECK(specdec_scheduler_create(NULL, c->e.dm, NULL, NULL, &s) == SPECDEC_ERR_INVALID_ARGUMENT && !s,
             "target NULL");
    struct { const char *what; int field; int32_t value; } bad[] = {
        {"max_active 0", 0, 0}, {"max_active 257", 0, 257}, {"max_queued 0", 1, 0}, {"max_queued -3", 1, -3},
        {"max_queued 2^21", 1, 1 << 21}, {"kv_block_tokens 0", 2, 0}, {"kv_block_tokens 4097", 2, 4097},
        {"kv_pool_blocks -1", 3, -1}, {"reserved_i[3]", 4, 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        specdec_scheduler_params p = specdec_scheduler_default_params();
        int32_t *f[] = {&p.max_active, &p.max_queued, &p.kv_block_tokens, &p.kv_pool_blocks, &p.reserved_i[3]};
        *f[bad[i].field] = bad[i].value;
        s = (specdec_scheduler *)&s;
        specdec_status st = specdec_scheduler_create(c->e.tm, c->e.dm, &c->ep, &p, &s);
        SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT && !s && *specdec_last_error(), "%s: %d", bad[i].what, st);
    }
    specdec_scheduler_params p = specdec_scheduler_default_params();
    p.reserved[0] = 1;
    SD_CHECK(specdec_scheduler_create(c->e.tm, c->e.dm, &c->ep, &p, &s) == SPECDEC_ERR_INVALID_ARGUMENT && !s,
             "reserved[0]");
    specdec_engine_params ep = c->ep;
    ep.backend = (specdec_backend)7;
    SD_CHECK(specdec_scheduler_create(c->e.tm, c->e.dm, &ep, NULL, &s) == SPECDEC_ERR_INVALID_ARGUMENT && !s,
             "bad engine params pass through");
    specdec_scheduler_free(NULL);
    specdec_scheduler_shutdown(NULL);
    specdec_scheduler_metrics m;
    SD_CHECK(specdec_scheduler_get_metrics(NULL, &m) == SPECDEC_ERR_INVALID_ARGUMENT, "metrics NULL scheduler");
    SD_CHECK(specdec_scheduler_last_error(NULL) != NULL, "last_error never NULL");
    SD_CHECK(specdec_scheduler_submit(NULL, c->prompt, c->n_prompt, NULL, NULL) == SPECDEC_ERR_INVALID_ARGUMENT,
             "submit NULL scheduler");
    SD_CHECK(specdec_scheduler_cancel(NULL, 1) == SPECDEC_ERR_INVALID_ARGUMENT, "cancel NULL scheduler");
    specdec_status os;
    int32_t n;
    SD_CHECK(specdec_scheduler_wait(NULL, 1, 0, NULL, 0, &n, NULL, &os) == SPECDEC_ERR_INVALID_ARGUMENT,
             "wait NULL scheduler");
    SD_CHECK(!strcmp(specdec_status_string(SPECDEC_ERR_QUEUE_FULL), "SPECDEC_ERR_QUEUE_FULL: scheduler queue full"),
             "status string of the new codes");
}

/* Each bad submit: its status, counted as rejected, nothing queued. */
static void test_submit_bad(ctx *c) {
    specdec_scheduler *s = make(c, 1, 8);
    if (!s) return;
    good_request(c, s, "before bad submits");
    int32_t big[600];
    for (int i = 0; i < 600; i++) big[i] = c->prompt[i % c->n_prompt];
    int32_t bad_ids[2] = {c->prompt[0], -1}, bad_hi[2] = {c->prompt[0], 4096};
    const char *stops_empty[] = {""}, *stops_ok[] = {"and"};
    char longstop[600];
    memset(longstop, 'a', sizeof longstop - 1);
    longstop[sizeof longstop - 1] = '\0';
    const char *stops_long[] = {longstop};
    int64_t rejected = 0;
    for (int k = 0; k < 24; k++) {
        specdec_generate_params gp = sc_params(0, 0, NP, 4);
        const int32_t *pr = c->prompt;
        int32_t np = c->n_prompt;
        specdec_status want = SPECDEC_ERR_INVALID_ARGUMENT;
        specdec_request_id id = 77, *idp = &id;
        switch (k) {
        case 0: pr = NULL; break;
        case 1: np = 0; break;
        case 2: np = -1; break;
        case 3: pr = big, np = 512, want = SPECDEC_ERR_CONTEXT_FULL; break; /* n_ctx of the pair: 512 */
        case 4: pr = bad_ids, np = 2; break;
        case 5: pr = bad_hi, np = 2; break;
        case 6: gp.n_predict = 0; break;
        case 7: gp.n_predict = -5; break;
        case 8: gp.n_draft = SPECDEC_MAX_DRAFT + 1; break;
        case 9: gp.n_draft = -1; break;
        case 10: gp.temperature = -1.0f; break;
        case 11: gp.temperature = NAN; break;
        case 12: gp.top_p = 0.0f; break;
        case 13: gp.top_p = 1.5f; break;
        case 14: gp.top_k = -1; break;
        case 15: gp.min_p = 2.0f; break;
        case 16: gp.verify = (specdec_verify_mode)9; break;
        case 17: gp.stop_strings = stops_ok, gp.n_stop_strings = 1; break; /* no tokenizer */
        case 18: gp.n_stop_strings = 1; break;                             /* NULL array */
        case 19: gp.tokenizer = c->e.tok, gp.stop_strings = stops_empty, gp.n_stop_strings = 1; break;
        case 20: gp.tokenizer = c->e.tok, gp.stop_strings = stops_long, gp.n_stop_strings = 1; break;
        case 21: gp.draft_method = (specdec_draft_method)7; break;
        case 22: gp.logprobs = 2; break;
        case 23: idp = NULL; break;
        }
        specdec_status st = specdec_scheduler_submit(s, pr, np, &gp, idp);
        rejected++;
        SD_CHECK(st == want && (!idp || id == 0), "bad submit %d: got %s, want %s", k, specdec_status_string(st),
                 specdec_status_string(want));
        SD_CHECK(*specdec_scheduler_last_error(s) != '\0', "bad submit %d: no detail", k);
    }
    specdec_scheduler_metrics m;
    specdec_scheduler_get_metrics(s, &m);
    SD_CHECK(m.rejected == rejected && m.submitted == 1 && m.queued == 0, "rejected %lld of %lld, submitted %lld",
             (long long)m.rejected, (long long)rejected, (long long)m.submitted);
    good_request(c, s, "after bad submits");
    specdec_scheduler_free(s);
}

static void test_kv_pool(ctx *c) {
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = 1;
    sp.kv_block_tokens = 16;
    sp.kv_pool_blocks = 2; /* 32 tokens */
    specdec_scheduler *s = NULL;
    SD_CHECK(specdec_scheduler_create(c->e.tm, c->e.dm, &c->ep, &sp, &s) == SPECDEC_OK, "create with a pool");
    if (!s) return;
    specdec_generate_params gp = sc_params(0, 0, 33 - c->n_prompt, 4);
    specdec_request_id id;
    SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &id) == SPECDEC_ERR_CONTEXT_FULL,
             "33 tokens cannot fit 2 blocks of 16");
    gp.n_predict = 32 - c->n_prompt;
    SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &id) == SPECDEC_OK, "32 tokens fit");
    specdec_scheduler_free(s); /* with the request possibly uncollected */
}

/* Cancel / wait on ids: unknown, finished-uncollected, collected; timeouts; too-small buffer. */
static void test_ids(ctx *c) {
    specdec_scheduler *s = make(c, 1, 8);
    if (!s) return;
    int32_t out[NP], n = -1;
    specdec_status os = SPECDEC_OK;
    SD_CHECK(specdec_scheduler_cancel(s, 12345) == SPECDEC_ERR_NOT_FOUND, "cancel unknown id");
    SD_CHECK(specdec_scheduler_cancel(s, 0) == SPECDEC_ERR_NOT_FOUND, "cancel id 0");
    SD_CHECK(specdec_scheduler_cancel(s, -7) == SPECDEC_ERR_NOT_FOUND, "cancel id -7");
    SD_CHECK(specdec_scheduler_wait(s, 12345, 10, out, NP, &n, NULL, &os) == SPECDEC_ERR_NOT_FOUND, "wait unknown");
    specdec_generate_params gp = sc_params(0, 0, NP, 4);
    specdec_request_id id;
    SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &id) == SPECDEC_OK && id > 0, "submit");
    SD_CHECK(specdec_scheduler_wait(s, id, 0, out, NP, NULL, NULL, &os) == SPECDEC_ERR_INVALID_ARGUMENT, "n_out NULL");
    SD_CHECK(specdec_scheduler_wait(s, id, 0, out, NP, &n, NULL, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "status NULL");
    SD_CHECK(specdec_scheduler_wait(s, id, 0, NULL, 4, &n, NULL, &os) == SPECDEC_ERR_INVALID_ARGUMENT, "out NULL");
    SD_CHECK(specdec_scheduler_wait(s, id, 0, out, -1, &n, NULL, &os) == SPECDEC_ERR_INVALID_ARGUMENT, "capacity -1");
    /* capacity 0 never collects a request with output: BUFFER_TOO_SMALL once done */
    specdec_status st;
    double t0 = sc_now();
    do
        st = specdec_scheduler_wait(s, id, 20, NULL, 0, &n, NULL, &os);
    while (st == SPECDEC_ERR_TIMEOUT && sc_now() - t0 < 60);
    SD_CHECK(st == SPECDEC_ERR_BUFFER_TOO_SMALL && n == c->n_ref, "too small: %d, n %d", st, (int)n);
    SD_CHECK(specdec_scheduler_cancel(s, id) == SPECDEC_OK, "cancel of a finished, uncollected request: OK");
    specdec_stats stats;
    SD_CHECK(specdec_scheduler_wait(s, id, 0, out, NP, &n, &stats, &os) == SPECDEC_OK && os == SPECDEC_OK &&
                 n == c->n_ref && sc_same(out, c->ref, n) && stats.n_generated == n,
             "the late cancel had no effect: outcome %d", os);
    SD_CHECK(specdec_scheduler_cancel(s, id) == SPECDEC_ERR_NOT_FOUND, "cancel of a collected id");
    SD_CHECK(specdec_scheduler_wait(s, id, -1, out, NP, &n, NULL, &os) == SPECDEC_ERR_NOT_FOUND, "wait collected id");
    specdec_scheduler_free(s);
}

static int stop_at_3(void *ud, int32_t tok, const char *piece, size_t len) {
    (void)piece, (void)len;
    int *count = ud;
    return tok >= 0 && ++*count == 3;
}

static void test_callback_stop(ctx *c) {
    specdec_scheduler *s = make(c, 2, 8);
    if (!s) return;
    int count = 0;
    specdec_generate_params gp = sc_params(0, 0, NP, 4);
    gp.callback = stop_at_3;
    gp.user_data = &count;
    specdec_request_id id;
    int32_t out[NP], n = -1;
    specdec_status os = SPECDEC_ERR_INTERNAL;
    specdec_stats stats;
    SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &id) == SPECDEC_OK, "submit");
    SD_CHECK(specdec_scheduler_wait(s, id, -1, out, NP, &n, &stats, &os) == SPECDEC_OK, "wait");
    SD_CHECK(os == SPECDEC_OK && stats.stop_reason == SPECDEC_STOP_CALLBACK && n == 3 && sc_same(out, c->ref, 3),
             "callback stop: outcome %d reason %d n %d", os, stats.stop_reason, (int)n);
    good_request(c, s, "after a callback stop");
    specdec_scheduler_free(s);
}

/* Gated running request + queued ones: cancel queued, cancel running, queue full. */
static void test_cancel_and_queue(ctx *c) {
    specdec_scheduler *s = make(c, 1, 2);
    if (!s) return;
    gate g;
    gate_init(&g);
    specdec_generate_params gated = sc_params(0, 0, NP, 4);
    gated.callback = gate_cb;
    gated.user_data = &g;
    specdec_generate_params gp = sc_params(0, 0, NP, 4);
    specdec_request_id a, b, q, d;
    SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gated, &a) == SPECDEC_OK, "submit gated");
    gate_wait_entered(&g); /* a is running, blocked in its first token */
    SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &b) == SPECDEC_OK, "queue b");
    SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &q) == SPECDEC_OK, "queue q");
    SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &d) == SPECDEC_ERR_QUEUE_FULL && d == 0,
             "third queued request: QUEUE_FULL");
    int32_t out[NP], n = -1;
    specdec_status os = SPECDEC_OK;
    SD_CHECK(specdec_scheduler_wait(s, a, 0, out, NP, &n, NULL, &os) == SPECDEC_ERR_TIMEOUT, "running: TIMEOUT");
    double t0 = sc_now();
    SD_CHECK(specdec_scheduler_wait(s, b, 30, out, NP, &n, NULL, &os) == SPECDEC_ERR_TIMEOUT, "queued: TIMEOUT");
    SD_CHECK(sc_now() - t0 >= 0.025, "a 30 ms wait lasted %.3f s", sc_now() - t0);
    SD_CHECK(specdec_scheduler_cancel(s, q) == SPECDEC_OK, "cancel queued");
    SD_CHECK(specdec_scheduler_wait(s, q, 0, out, NP, &n, NULL, &os) == SPECDEC_OK && os == SPECDEC_ERR_CANCELLED &&
                 n == 0, "cancelled while queued: outcome %d, %d tokens", os, (int)n);
    SD_CHECK(specdec_scheduler_cancel(s, a) == SPECDEC_OK, "cancel running");
    gate_open(&g);
    specdec_stats st;
    SD_CHECK(specdec_scheduler_wait(s, a, -1, out, NP, &n, &st, &os) == SPECDEC_OK && os == SPECDEC_ERR_CANCELLED &&
                 n == 1 && out[0] == c->ref[0] && st.n_generated == 1,
             "cancelled while running: outcome %d, %d tokens (the gated token kept)", os, (int)n);
    SD_CHECK(specdec_scheduler_wait(s, b, -1, out, NP, &n, NULL, &os) == SPECDEC_OK && os == SPECDEC_OK &&
                 n == c->n_ref && sc_same(out, c->ref, n), "b unaffected");
    specdec_scheduler_metrics m;
    specdec_scheduler_get_metrics(s, &m);
    SD_CHECK(m.submitted == 3 && m.finished == 1 && m.cancelled == 2 && m.rejected == 1 && m.failed == 0 &&
                 m.queued == 0 && m.active == 0 && m.tokens_generated == 1 + c->n_ref,
             "metrics: submitted %lld finished %lld cancelled %lld rejected %lld tokens %lld", (long long)m.submitted,
             (long long)m.finished, (long long)m.cancelled, (long long)m.rejected, (long long)m.tokens_generated);
    good_request(c, s, "after cancels");
    specdec_scheduler_free(s);
    gate_destroy(&g);
}

static void *shutdown_thread(void *arg) {
    specdec_scheduler_shutdown(arg);
    return NULL;
}

static void test_shutdown(ctx *c) {
    specdec_scheduler *s = make(c, 1, 8);
    if (!s) return;
    gate g;
    gate_init(&g);
    specdec_generate_params gated = sc_params(0, 0, NP, 4), gp = sc_params(0, 0, NP, 4);
    gated.callback = gate_cb;
    gated.user_data = &g;
    specdec_request_id a, b, x;
    SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gated, &a) == SPECDEC_OK, "submit gated");
    gate_wait_entered(&g);
    SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &b) == SPECDEC_OK, "queue b");
    pthread_t th;
    pthread_create(&th, NULL, shutdown_thread, s); /* blocks joining the gated worker */
    specdec_scheduler_metrics m;
    do { /* b is ended and a flagged in one critical section */
        sc_sleep_us(1000);
        specdec_scheduler_get_metrics(s, &m);
    } while (m.cancelled < 1);
    SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &x) == SPECDEC_ERR_SHUT_DOWN,
             "submit while shutting down");
    gate_open(&g);
    pthread_join(th, NULL);
    specdec_scheduler_shutdown(s); /* idempotent */
    int32_t out[NP], n = -1;
    specdec_status os = SPECDEC_OK;
    SD_CHECK(specdec_scheduler_wait(s, a, -1, out, NP, &n, NULL, &os) == SPECDEC_OK && os == SPECDEC_ERR_CANCELLED &&
                 n == 1 && out[0] == c->ref[0], "running at shutdown: outcome %d, %d tokens", os, (int)n);
    SD_CHECK(specdec_scheduler_wait(s, b, 0, out, NP, &n, NULL, &os) == SPECDEC_OK && os == SPECDEC_ERR_CANCELLED &&
                 n == 0, "queued at shutdown: outcome %d", os);
    SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &x) == SPECDEC_ERR_SHUT_DOWN,
             "submit after shutdown");
    SD_CHECK(specdec_scheduler_cancel(s, a) == SPECDEC_ERR_NOT_FOUND, "cancel collected after shutdown");
    specdec_scheduler_free(s);
    gate_destroy(&g);

    /* free with requests running, queued and finished-uncollected: nothing leaks, no hang */
    s = make(c, 2, 16);
    if (!s) return;
    specdec_generate_params longp = sc_params(0, 0, 480, 4);
    longp.ignore_eos = 1;
    specdec_request_id ids[6];
    for (int i = 0; i < 6; i++)
        SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, i == 0 ? &gp : &longp, &ids[i]) == SPECDEC_OK,
                 "submit %d", i);
    while (specdec_scheduler_wait(s, ids[0], 50, NULL, 0, &n, NULL, &os) == SPECDEC_ERR_TIMEOUT)
        ; /* ids[0] done, uncollected */
    double t0 = sc_now();
    specdec_scheduler_free(s);
    SD_CHECK(sc_now() - t0 < 30.0, "free with requests in flight took %.1f s", sc_now() - t0);
}

/* A collector thread: wait_any then collect, for want requests (ids in order of report). */
typedef struct collector {
    specdec_scheduler *s;
    int want, got;
    specdec_request_id ids[16];
    int32_t n[16];
    specdec_status outcome[16], last;
} collector;

static void *collector_thread(void *arg) {
    collector *k = arg;
    while (k->got < k->want) {
        specdec_request_id id = -1;
        specdec_status st = specdec_scheduler_wait_any(k->s, 5000, &id);
        if (st != SPECDEC_OK) {
            k->last = st;
            return NULL;
        }
        int32_t out[NP];
        if (specdec_scheduler_wait(k->s, id, 0, out, NP, &k->n[k->got], NULL, &k->outcome[k->got]) != SPECDEC_OK) {
            k->last = SPECDEC_ERR_INTERNAL; /* reported but not collectable at once */
            return NULL;
        }
        k->ids[k->got++] = id;
    }
    k->last = SPECDEC_OK;
    return NULL;
}

static void test_wait_any(ctx *c) {
    specdec_scheduler *s = make(c, 1, 8);
    if (!s) return;
    specdec_request_id id = -1;
    SD_CHECK(specdec_scheduler_wait_any(NULL, 0, &id) == SPECDEC_ERR_INVALID_ARGUMENT && id == 0, "wait_any NULL s");
    SD_CHECK(specdec_scheduler_wait_any(s, 0, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "wait_any NULL out_id");
    id = -1;
    SD_CHECK(specdec_scheduler_wait_any(s, 0, &id) == SPECDEC_ERR_TIMEOUT && id == 0, "nothing finished: TIMEOUT");
    double t0 = sc_now();
    SD_CHECK(specdec_scheduler_wait_any(s, 30, &id) == SPECDEC_ERR_TIMEOUT && sc_now() - t0 >= 0.025,
             "a 30 ms wait_any lasted %.3f s", sc_now() - t0);
    /* a gated running request a, queued b, c2, d: cancel d (finishes first), collect b by wait
     * before any report: reports are d, a (cancelled), c2 */
    gate g;
    gate_init(&g);
    specdec_generate_params gated = sc_params(0, 0, NP, 4), gp = sc_params(0, 0, NP, 4);
    gated.callback = gate_cb;
    gated.user_data = &g;
    specdec_request_id a, b, c2, d;
    SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gated, &a) == SPECDEC_OK, "submit gated");
    gate_wait_entered(&g);
    SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &b) == SPECDEC_OK &&
                 specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &c2) == SPECDEC_OK &&
                 specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &d) == SPECDEC_OK, "queue b, c, d");
    SD_CHECK(specdec_scheduler_cancel(s, d) == SPECDEC_OK, "cancel queued d");
    SD_CHECK(specdec_scheduler_wait_any(s, 0, &id) == SPECDEC_OK && id == d, "first report: d (got %lld)",
             (long long)id);
    SD_CHECK(specdec_scheduler_wait_any(s, 0, &id) == SPECDEC_ERR_TIMEOUT, "d reported once");
    SD_CHECK(specdec_scheduler_cancel(s, a) == SPECDEC_OK, "cancel running a");
    gate_open(&g);
    int32_t out[NP], n = -1;
    specdec_status os = SPECDEC_OK;
    SD_CHECK(specdec_scheduler_wait(s, b, -1, out, NP, &n, NULL, &os) == SPECDEC_OK && os == SPECDEC_OK &&
                 sc_same(out, c->ref, n) && n == c->n_ref, "b collected by wait");
    SD_CHECK(specdec_scheduler_wait(s, c2, -1, out, NP, &n, NULL, &os) == SPECDEC_OK, "c collected by wait");
    SD_CHECK(specdec_scheduler_wait_any(s, 1000, &id) == SPECDEC_OK && id == a, "then a (got %lld)", (long long)id);
    SD_CHECK(specdec_scheduler_wait_any(s, 0, &id) == SPECDEC_ERR_TIMEOUT && id == 0,
             "b and c, collected by wait, are never reported");
    SD_CHECK(specdec_scheduler_wait(s, a, 0, out, NP, &n, NULL, &os) == SPECDEC_OK && os == SPECDEC_ERR_CANCELLED,
             "a collectable at once after its report: outcome %d", os);
    SD_CHECK(specdec_scheduler_wait(s, d, 0, out, NP, &n, NULL, &os) == SPECDEC_OK && os == SPECDEC_ERR_CANCELLED &&
                 n == 0, "d collectable after its report");
    gate_destroy(&g);

    /* a collector thread blocked in wait_any serves requests submitted after it started */
    collector k = {.s = s, .want = 4, .last = SPECDEC_ERR_INTERNAL};
    pthread_t th;
    pthread_create(&th, NULL, collector_thread, &k);
    sc_sleep_us(20000);
    specdec_request_id sub[4];
    for (int i = 0; i < 4; i++)
        SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &sub[i]) == SPECDEC_OK, "submit %d", i);
    pthread_join(th, NULL);
    SD_CHECK(k.last == SPECDEC_OK && k.got == 4, "collector: %d of 4, last status %d", k.got, k.last);
    for (int i = 0; i < k.got; i++) /* one slot: FCFS, so they finish in submission order */
        SD_CHECK(k.ids[i] == sub[i] && k.outcome[i] == SPECDEC_OK && k.n[i] == c->n_ref,
                 "collected %d: id %lld (want %lld) outcome %d n %d", i, (long long)k.ids[i], (long long)sub[i],
                 k.outcome[i], (int)k.n[i]);

    /* shutdown: the requests it cancels are reported, then SHUT_DOWN (a blocked wait_any too) */
    SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &b) == SPECDEC_OK, "submit before shutdown");
    specdec_scheduler_shutdown(s);
    SD_CHECK(specdec_scheduler_wait_any(s, -1, &id) == SPECDEC_OK && id == b, "the last request reported");
    SD_CHECK(specdec_scheduler_wait_any(s, -1, &id) == SPECDEC_ERR_SHUT_DOWN && id == 0,
             "then SHUT_DOWN, without waiting");
    SD_CHECK(specdec_scheduler_wait(s, b, 0, out, NP, &n, NULL, &os) == SPECDEC_OK, "collect it after shutdown");
    specdec_scheduler_free(s);
}

/* The small draft model serves as both target and draft here: every allocation point of
 * a two-engine speculative scheduler, at a fraction of the cost (ASan pass). */
static void test_alloc_create(ctx *c) {
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = 2;
    int ok = 0, fails = 0;
    for (long k = 0; k < 100000 && !ok; k++) {
        specdec_scheduler *s = (specdec_scheduler *)&s;
        sd_alloc_fail_after(k);
        specdec_status st = specdec_scheduler_create(c->e.dm, c->e.dm, &c->ep, &sp, &s);
        long used = sd_alloc_count();
        sd_alloc_fail_after(-1);
        if (used <= k) { /* no allocation failed: must have succeeded */
            SD_CHECK(st == SPECDEC_OK && s, "create with no failure injected: %d", st);
            ok = 1;
        } else {
            fails++;
            if (st != SPECDEC_ERR_OUT_OF_MEMORY || s)
                SD_CHECK(0, "allocation %ld failing: create returned %s (%s)", k, specdec_status_string(st),
                         specdec_last_error());
        }
        if (st == SPECDEC_OK && s) {
            specdec_generate_params gp = sc_params(0, 0, 4, 2);
            specdec_request_id id;
            int32_t out[4], n = 0;
            specdec_status os = SPECDEC_ERR_INTERNAL;
            SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &id) == SPECDEC_OK &&
                         specdec_scheduler_wait(s, id, -1, out, 4, &n, NULL, &os) == SPECDEC_OK && os == SPECDEC_OK &&
                         n == 4,
                     "the scheduler created after the failures works");
            specdec_scheduler_free(s);
        }
    }
    SD_CHECK(ok && fails > 0, "create allocation loop: %d failures injected", fails);
    printf("create: %d allocation points each failed once\n", fails);
}

static void test_alloc_submit(ctx *c) {
    specdec_scheduler *s = make(c, 1, 64);
    if (!s) return;
    gate g;
    gate_init(&g);
    specdec_generate_params gated = sc_params(0, 0, NP, 4);
    gated.callback = gate_cb;
    gated.user_data = &g;
    specdec_request_id a, id = 0;
    SD_CHECK(specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gated, &a) == SPECDEC_OK, "submit gated");
    gate_wait_entered(&g); /* the worker allocates nothing while blocked: counts are submit's own */
    const char *stops[] = {"xyzzy", "plugh"};
    specdec_generate_params gp = sc_params(0, 0, NP, 4);
    gp.tokenizer = c->e.tok;
    gp.stop_strings = stops;
    gp.n_stop_strings = 2;
    int fails = 0;
    for (long k = 0; k < 100; k++) {
        sd_alloc_fail_after(k);
        specdec_status st = specdec_scheduler_submit(s, c->prompt, c->n_prompt, &gp, &id);
        long used = sd_alloc_count();
        sd_alloc_fail_after(-1);
        if (used <= k) {
            SD_CHECK(st == SPECDEC_OK, "submit with no failure injected: %d", st);
            break;
        }
        fails++;
        SD_CHECK(st == SPECDEC_ERR_OUT_OF_MEMORY && id == 0, "allocation %ld failing: submit %d", k, st);
    }
    specdec_scheduler_metrics m;
    specdec_scheduler_get_metrics(s, &m);
    SD_CHECK(fails >= 3 && m.rejected == fails && m.submitted == 2, "submit loop: %d failures, rejected %lld", fails,
             (long long)m.rejected);
    gate_open(&g);
    int32_t out[NP], n = -1;
    specdec_status os = SPECDEC_ERR_INTERNAL;
    SD_CHECK(specdec_scheduler_wait(s, id, -1, out, NP, &n, NULL, &os) == SPECDEC_OK && os == SPECDEC_OK &&
                 n == c->n_ref && sc_same(out, c->ref, n), "the request submitted after the failures: outcome %d", os);
    good_request(c, s, "after the submit allocation loop");
    specdec_scheduler_free(s);
    gate_destroy(&g);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s TARGET_DIR DRAFT_DIR\n", argv[0]);
        return 2;
    }
    static ctx c;
    if (sc_env_load(&c.e, argv[1], argv[2])) return 1;
    c.ep = sc_engine_params();
    c.n_prompt = sc_encode(&c.e, "And God said", c.prompt, 64);
    specdec_generate_params gp = sc_params(0, 0, NP, 4);
    c.n_ref = c.n_prompt > 0 ? sc_reference(&c.e, c.prompt, c.n_prompt, &gp, c.ref, NP, NULL) : -1;
    if (c.n_ref != NP) {
        fprintf(stderr, "reference: %d tokens, expected %d\n", (int)c.n_ref, NP);
        sc_env_free(&c.e);
        return 1;
    }
    test_create_args(&c);
    specdec_scheduler *s0 = make(&c, 1, 1);
    SD_CHECK(specdec_scheduler_n_ctx(s0) == 512 && specdec_scheduler_n_ctx(NULL) == 0, "n_ctx of the pair: 512");
    specdec_scheduler_free(s0);
    test_submit_bad(&c);
    test_kv_pool(&c);
    test_ids(&c);
    test_callback_stop(&c);
    test_cancel_and_queue(&c);
    test_shutdown(&c);
    test_wait_any(&c);
    test_alloc_create(&c);
    test_alloc_submit(&c);
    sc_env_free(&c.e);
    return sd_test_done();
}
