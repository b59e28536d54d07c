/* test_engine_threads.c — specdec_engine_params.cpu_threads (include/specdec.h, since 0.5.3) on
 * the bundled kjv pair (argv[1] target, argv[2] draft):
 *  1. speculative generation (greedy and rejection sampling with a seed, γ = 4) gives the same
 *     tokens with 1, 2, 3 and 7 threads, and the same statistics of acceptance;
 *  2. bad values: cpu_threads -1, SPECDEC_MAX_CPU_THREADS + 1, INT32_MAX: INVALID_ARGUMENT naming
 *     the field; SPECDEC_CPU_THREADS in the environment: used for cpu_threads = 0, a bad value
 *     ("abc", "0", "-2", "257", "4x", "") refused (INVALID_ARGUMENT naming the variable) or, for
 *     the empty string, ignored; an explicit cpu_threads wins over it; unset: the default
 *     (sd_cpu_default_threads(), 1..8);
 *  3. the engine's runners and the scheduler's groups get the resolved count
 *     (sd_engine_make_runner / sd_engine_make_group);
 *  4. two engines with 2 threads each generating from two threads at once: the same tokens as
 *     one thread (label tsan: a race between their pools, or inside one, shows). */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_cpu_pool.h"
#include "sd_cpu_runner.h"
#include "sd_engine.h"
#include "sd_test.h"
#include "specdec.h"

#define N_PRED 48

static specdec_status make_engine(const specdec_model *t, const specdec_model *d, int32_t threads,
                                  specdec_engine **e) {
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = 256;
    ep.cpu_threads = threads;
    return specdec_engine_create(t, d, &ep, e);
}

/* Tokens of one generation (count returned, -1 on failure) and its acceptance counts; no SD_CHECK
 * (the test's counters are not shared between threads). */
static int32_t generate_raw(specdec_engine *e, int rejection, int32_t *out, specdec_stats *stats) {
    static const int32_t prompt[] = {0, 17, 101, 55, 230, 12, 9, 77};
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = N_PRED;
    gp.n_draft = 4;
    gp.ignore_eos = 1;
    if (rejection) {
        gp.temperature = 0.9f;
        gp.seed = 1234;
        gp.verify = SPECDEC_VERIFY_REJECTION;
    } else {
        gp.temperature = 0.0f;
    }
    int32_t n = -1;
    specdec_status st = specdec_generate(e, prompt, (int32_t)(sizeof prompt / sizeof *prompt), &gp, out, N_PRED, &n,
                                         stats);
    return st == SPECDEC_OK ? n : -1;
}

static int32_t generate(specdec_engine *e, int rejection, int32_t *out, specdec_stats *stats) {
    int32_t n = generate_raw(e, rejection, out, stats);
    SD_CHECK(n >= 0, "generate: %s", specdec_engine_last_error(e));
    return n;
}

static void check_same_output(const specdec_model *t, const specdec_model *d) {
    int32_t ref[2][N_PRED], got[N_PRED];
    int32_t n_ref[2] = {0, 0};
    specdec_stats s_ref[2], s;
    static const int counts[] = {1, 2, 3, 7};
    for (int k = 0; k < 4; k++) {
        specdec_engine *e = NULL;
        specdec_status st = make_engine(t, d, counts[k], &e);
        SD_CHECK(st == SPECDEC_OK, "engine with %d threads: %s", counts[k], specdec_last_error());
        if (st != SPECDEC_OK) continue;
        for (int rej = 0; rej < 2; rej++) {
            int32_t n = generate(e, rej, k ? got : ref[rej], k ? &s : &s_ref[rej]);
            if (!k) {
                n_ref[rej] = n;
                SD_CHECK(n == N_PRED && s_ref[rej].n_drafted > 0, "reference: %d tokens, %lld drafted", n,
                         (long long)s_ref[rej].n_drafted);
                continue;
            }
            SD_CHECK(n == n_ref[rej] && !memcmp(got, ref[rej], sizeof(int32_t) * (size_t)n) &&
                         s.n_accepted == s_ref[rej].n_accepted && s.n_drafted == s_ref[rej].n_drafted,
                     "%s, %d threads: output differs from one thread (%d vs %d tokens, accepted %lld vs %lld)",
                     rej ? "rejection" : "greedy", counts[k], n, n_ref[rej], (long long)s.n_accepted,
                     (long long)s_ref[rej].n_accepted);
        }
        specdec_engine_free(e);
    }
}

typedef struct conc_arg {
    const specdec_model *t, *d;
    const int32_t *ref;
    int32_t n_ref;
    int ok;
} conc_arg;

static void *conc_main(void *a) {
    conc_arg *c = a;
    specdec_engine *e = NULL;
    c->ok = make_engine(c->t, c->d, 2, &e) == SPECDEC_OK;
    int32_t got[N_PRED];
    specdec_stats s;
    for (int rep = 0; c->ok && rep < 2; rep++) {
        int32_t n = generate_raw(e, 1, got, &s);
        c->ok = n == c->n_ref && !memcmp(got, c->ref, sizeof(int32_t) * (size_t)n);
    }
    specdec_engine_free(e);
    return NULL;
}

static void check_concurrent(const specdec_model *t, const specdec_model *d) {
    int32_t ref[N_PRED];
    specdec_stats s;
    specdec_engine *e = NULL;
    SD_CHECK(make_engine(t, d, 1, &e) == SPECDEC_OK, "engine: %s", specdec_last_error());
    if (!e) return;
    int32_t n = generate(e, 1, ref, &s);
    specdec_engine_free(e);
    conc_arg a = {t, d, ref, n, 0}, b = {t, d, ref, n, 0};
    pthread_t ta, tb;
    int started = pthread_create(&ta, NULL, conc_main, &a) == 0;
    started += pthread_create(&tb, NULL, conc_main, &b) == 0;
    SD_CHECK(started == 2, "could not start two threads");
    if (started > 0) pthread_join(ta, NULL);
    if (started > 1) pthread_join(tb, NULL);
    SD_CHECK(a.ok && b.ok, "two engines of 2 threads at once: tokens differ from one thread (%d %d)", a.ok, b.ok);
}

static void expect_invalid(const specdec_model *t, int32_t threads, const char *needle, const char *what) {
    specdec_engine *e = NULL;
    specdec_status st = make_engine(t, NULL, threads, &e);
    SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT && !e && strstr(specdec_last_error(), needle),
             "%s: status %d, message \"%s\"", what, (int)st, specdec_last_error());
    specdec_engine_free(e);
}

static void check_values(const specdec_model *t) {
    unsetenv("SPECDEC_CPU_THREADS");
    expect_invalid(t, -1, "cpu_threads", "cpu_threads -1");
    expect_invalid(t, SPECDEC_MAX_CPU_THREADS + 1, "cpu_threads", "cpu_threads max + 1");
    expect_invalid(t, INT32_MAX, "cpu_threads", "cpu_threads INT32_MAX");

    int32_t n = -1;
    SD_CHECK(sd_engine_cpu_threads(0, &n) == SPECDEC_OK && n == sd_cpu_default_threads() && n >= 1 && n <= 8,
             "default: %d threads", n);
    SD_CHECK(sd_engine_cpu_threads(5, &n) == SPECDEC_OK && n == 5, "explicit 5: %d", n);
    static const char *bad[] = {"abc", "0", "-2", "257", "4x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("SPECDEC_CPU_THREADS", bad[i], 1);
        SD_CHECK(sd_engine_cpu_threads(0, &n) == SPECDEC_ERR_INVALID_ARGUMENT &&
                     strstr(specdec_last_error(), "SPECDEC_CPU_THREADS"),
                 "SPECDEC_CPU_THREADS=%s accepted (%d)", bad[i], n);
        SD_CHECK(sd_engine_cpu_threads(2, &n) == SPECDEC_OK && n == 2, "explicit 2 with SPECDEC_CPU_THREADS=%s: %d",
                 bad[i], n);
    }
    expect_invalid(t, 0, "SPECDEC_CPU_THREADS", "engine with SPECDEC_CPU_THREADS=4x");
    setenv("SPECDEC_CPU_THREADS", "", 1);
    SD_CHECK(sd_engine_cpu_threads(0, &n) == SPECDEC_OK && n == sd_cpu_default_threads(), "empty variable: %d", n);
    setenv("SPECDEC_CPU_THREADS", "3", 1);
    SD_CHECK(sd_engine_cpu_threads(0, &n) == SPECDEC_OK && n == 3, "SPECDEC_CPU_THREADS=3: %d", n);

    /* the plan carries the resolved count into the runners and groups */
    sd_engine_plan plan;
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = 64;
    SD_CHECK(sd_engine_plan_params(t, NULL, &ep, &plan) == SPECDEC_OK && plan.params.cpu_threads == 3,
             "plan from SPECDEC_CPU_THREADS=3: %d", plan.params.cpu_threads);
    sd_errbuf eb = {{0}};
    sd_runner *r = NULL;
    sd_runner_group *g = NULL;
    specdec_status st = sd_engine_make_runner(t, SPECDEC_BACKEND_CPU, &plan.params, 64, 64, &r, &eb);
    SD_CHECK(st == SPECDEC_OK && sd_cpu_group_threads(sd_cpu_runner_group(r)) == 3, "engine runner: %s threads %d",
             eb.msg, r ? sd_cpu_group_threads(sd_cpu_runner_group(r)) : -1);
    sd_runner_destroy(r);
    plan.params.cpu_threads = 2;
    st = sd_engine_make_group(t, SPECDEC_BACKEND_CPU, &plan.params, 64, 64, 8, 16, &g, &eb);
    SD_CHECK(st == SPECDEC_OK && sd_cpu_group_threads(g) == 2, "scheduler group: %s threads %d", eb.msg,
             g ? sd_cpu_group_threads(g) : -1);
    sd_runner_group_destroy(g);
    unsetenv("SPECDEC_CPU_THREADS");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_engine_threads TARGET_DIR DRAFT_DIR\n");
        return 2;
    }
    specdec_model *t = NULL, *d = NULL;
    SD_CHECK(specdec_model_load(argv[1], NULL, &t) == SPECDEC_OK, "load %s: %s", argv[1], specdec_last_error());
    SD_CHECK(specdec_model_load(argv[2], NULL, &d) == SPECDEC_OK, "load %s: %s", argv[2], specdec_last_error());
    if (t && d) {
        check_same_output(t, d);
        check_concurrent(t, d);
        check_values(t);
    }
    specdec_model_free(d);
    specdec_model_free(t);
    return sd_test_done();
}
