/* test_scheduler_stress.c — several threads submit, wait (no limit, a few ms, or just
 * check), cancel (their own ids, collected ids, ids never issued) and read metrics at
 * random for a fixed number of operations each (fixed seeds), on a scheduler with a
 * small queue so QUEUE_FULL happens too. Built into the ThreadSanitizer configuration
 * (label tsan) as well as the others. Checks, whatever the interleaving:
 *  - every call returns one of its defined statuses;
 *  - an OK outcome is exactly the reference, a CANCELLED one a prefix of it;
 *  - an id, once collected, is NOT_FOUND for everyone;
 *  - the final metrics add up with what the threads saw (submitted, rejected,
 *    finished + cancelled, nothing failed, queued or active).
 * Usage: test_scheduler_stress TARGET_DIR DRAFT_DIR [OPS_PER_THREAD] */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "sched_common.h"

#define N_THREADS 4
#define MAX_OPS 1000
#define NP 6
#define N_P 2

typedef struct shared {
    specdec_scheduler *s;
    int32_t prompts[N_P][64], n_prompts[N_P];
    int32_t ref[N_P][NP], n_ref[N_P];
    int ops;
} shared;

typedef struct worker {
    shared *sh;
    uint64_t seed;
    specdec_request_id live[MAX_OPS];
    int live_prompt[MAX_OPS];
    int n_live;
    specdec_request_id collected[MAX_OPS];
    int n_collected;
    /* what this thread saw; checked by the main thread */
    long submitted, rejected, ok, cancelled, errors;
    char first_error[256];
} worker;

static void error(worker *w, const char *what, specdec_status st) {
    if (!w->errors++) snprintf(w->first_error, sizeof w->first_error, "%s: %s", what, specdec_status_string(st));
}

static void check_result(worker *w, int p, const int32_t *out, int32_t n, specdec_status os) {
    const shared *sh = w->sh;
    if (os == SPECDEC_OK) {
        w->ok++;
        if (n != sh->n_ref[p] || !sc_same(out, sh->ref[p], n)) error(w, "OK outcome differs from the reference", os);
    } else if (os == SPECDEC_ERR_CANCELLED) {
        w->cancelled++;
        if (n > sh->n_ref[p] || !sc_same(out, sh->ref[p], n)) error(w, "cancelled output not a prefix", os);
    } else {
        error(w, "outcome", os);
    }
}

static void op_submit(worker *w) {
    int p = sc_rand_int(&w->seed, 0, N_P - 1);
    specdec_generate_params gp = sc_params(0, 0, NP, sc_rand_int(&w->seed, 0, 5));
    specdec_request_id id = 0;
    specdec_status st = specdec_scheduler_submit(w->sh->s, w->sh->prompts[p], w->sh->n_prompts[p], &gp, &id);
    if (st == SPECDEC_OK) {
        w->submitted++;
        w->live[w->n_live] = id;
        w->live_prompt[w->n_live++] = p;
    } else if (st == SPECDEC_ERR_QUEUE_FULL) {
        w->rejected++;
    } else {
        error(w, "submit", st);
    }
}

static void op_wait(worker *w, int timeout_ms) {
    if (!w->n_live) return;
    int k = sc_rand_int(&w->seed, 0, w->n_live - 1);
    int32_t out[NP], n = -1;
    specdec_status os = SPECDEC_ERR_INTERNAL;
    specdec_status st = specdec_scheduler_wait(w->sh->s, w->live[k], timeout_ms, out, NP, &n, NULL, &os);
    if (st == SPECDEC_ERR_TIMEOUT && timeout_ms >= 0) return;
    if (st != SPECDEC_OK) {
        error(w, "wait", st);
        return;
    }
    check_result(w, w->live_prompt[k], out, n, os);
    w->collected[w->n_collected++] = w->live[k];
    w->live[k] = w->live[--w->n_live];
    w->live_prompt[k] = w->live_prompt[w->n_live];
}

static void op_cancel(worker *w) {
    int kind = sc_rand_int(&w->seed, 0, 2);
    specdec_scheduler *s = w->sh->s;
    if (kind == 0 && w->n_live) {
        specdec_status st = specdec_scheduler_cancel(s, w->live[sc_rand_int(&w->seed, 0, w->n_live - 1)]);
        if (st != SPECDEC_OK) error(w, "cancel live", st);
    } else if (kind == 1 && w->n_collected) {
        specdec_status st = specdec_scheduler_cancel(s, w->collected[sc_rand_int(&w->seed, 0, w->n_collected - 1)]);
        if (st != SPECDEC_ERR_NOT_FOUND) error(w, "cancel collected", st);
    } else {
        specdec_status st = specdec_scheduler_cancel(s, (specdec_request_id)1 << 40); /* never issued */
        if (st != SPECDEC_ERR_NOT_FOUND) error(w, "cancel unknown", st);
    }
}

static void *run(void *arg) {
    worker *w = arg;
    for (int i = 0; i < w->sh->ops; i++) {
        int r = sc_rand_int(&w->seed, 0, 99);
        if (r < 40) op_submit(w);
        else if (r < 55) op_wait(w, 0);
        else if (r < 70) op_wait(w, sc_rand_int(&w->seed, 1, 5));
        else if (r < 75) op_wait(w, -1);
        else if (r < 90) op_cancel(w);
        else {
            specdec_scheduler_metrics m;
            specdec_status st = specdec_scheduler_get_metrics(w->sh->s, &m);
            if (st != SPECDEC_OK || m.queued < 0 || m.active < 0 || m.active > 2) error(w, "metrics", st);
        }
    }
    while (w->n_live) op_wait(w, -1);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TARGET_DIR DRAFT_DIR [OPS_PER_THREAD]\n", argv[0]);
        return 2;
    }
    static shared sh;
    static worker ws[N_THREADS];
    sh.ops = argc > 3 ? atoi(argv[3]) : 150;
    if (sh.ops < 1 || sh.ops > MAX_OPS) sh.ops = 150;
    sc_env e;
    if (sc_env_load(&e, argv[1], argv[2])) return 1;
    for (int p = 0; p < N_P; p++) {
        specdec_generate_params gp = sc_params(0, 0, NP, 4);
        sh.n_prompts[p] = sc_encode(&e, SC_PROMPTS[p], sh.prompts[p], 64);
        sh.n_ref[p] = sh.n_prompts[p] > 0 ? sc_reference(&e, sh.prompts[p], sh.n_prompts[p], &gp, sh.ref[p], NP, NULL)
                                          : -1;
    }
    specdec_engine_params ep = sc_engine_params();
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = 2;
    sp.max_queued = 6;
    if (sh.n_ref[0] < 0 || sh.n_ref[1] < 0 || specdec_scheduler_create(e.tm, e.dm, &ep, &sp, &sh.s) != SPECDEC_OK) {
        fprintf(stderr, "setup: %s\n", specdec_last_error());
        sc_env_free(&e);
        return 1;
    }
    pthread_t th[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        ws[t].sh = &sh;
        ws[t].seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(t + 1);
        pthread_create(&th[t], NULL, run, &ws[t]);
    }
    long submitted = 0, rejected = 0, ok = 0, cancelled = 0;
    for (int t = 0; t < N_THREADS; t++) {
        pthread_join(th[t], NULL);
        SD_CHECK(ws[t].errors == 0, "thread %d: %ld errors, first: %s", t, ws[t].errors, ws[t].first_error);
        submitted += ws[t].submitted, rejected += ws[t].rejected, ok += ws[t].ok, cancelled += ws[t].cancelled;
    }
    specdec_scheduler_metrics m;
    specdec_scheduler_get_metrics(sh.s, &m);
    SD_CHECK(m.submitted == submitted && m.rejected == rejected && m.finished == ok && m.cancelled == cancelled &&
                 m.failed == 0 && m.queued == 0 && m.active == 0,
             "metrics: submitted %lld/%ld rejected %lld/%ld finished %lld/%ld cancelled %lld/%ld failed %lld",
             (long long)m.submitted, submitted, (long long)m.rejected, rejected, (long long)m.finished, ok,
             (long long)m.cancelled, cancelled, (long long)m.failed);
    SD_CHECK(submitted > 0 && ok > 0, "the run did something: %ld submitted, %ld finished", submitted, ok);
    printf("%d threads x %d ops: %ld submitted (%ld finished, %ld cancelled), %ld refused with QUEUE_FULL\n",
           N_THREADS, sh.ops, submitted, ok, cancelled, rejected);
    specdec_scheduler_free(sh.s);
    sc_env_free(&e);
    return sd_test_done();
}
