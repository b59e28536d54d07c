/* sd_cpu_pool.c — the persistent thread pool of the CPU forward pass (see sd_cpu_pool.h).
 *
 * Protocol: the caller publishes (fn, arg, n_parts), sets pending = n_workers, bumps the
 * generation and broadcasts `wake`; each worker, seeing a new generation, runs its part (if it
 * has one), decrements pending and signals `done` at zero. Everything shared is read and written
 * under `mu`, so the job's outputs written by a worker happen-before the caller's return (the
 * mutex orders them; ThreadSanitizer sees the same). `run_mu` keeps two callers from sharing
 * the workers: the second runs its parts alone. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_ISSET */
#include "sd_cpu_pool.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sd_alloc.h"

typedef struct sd_cpu_worker {
    sd_cpu_pool *pool;
    int idx; /* its part: 1 .. n_workers */
    pthread_t tid;
    float *scratch; /* [scratch_floats] */
} sd_cpu_worker;

struct sd_cpu_pool {
    pthread_mutex_t mu;
    pthread_cond_t wake; /* workers wait for a new generation or stop */
    pthread_cond_t done; /* the caller waits for pending == 0 */
    pthread_mutex_t run_mu;
    uint64_t gen;        /* under mu */
    int pending;         /* under mu */
    int stop;            /* under mu */
    uint64_t jobs;       /* under mu: calls the workers shared */
    sd_cpu_pool_fn fn;   /* under mu: the current job */
    void *arg;
    int n_parts;
    int n_workers;       /* started workers (fixed after create) */
    size_t scratch_floats;
    int64_t min_work;
    sd_cpu_worker *workers; /* [n_workers] */
};

static _Thread_local sd_cpu_pool *tls_pool;

sd_cpu_pool *sd_cpu_pool_bind(sd_cpu_pool *p) {
    sd_cpu_pool *prev = tls_pool;
    tls_pool = p;
    return prev;
}

sd_cpu_pool *sd_cpu_pool_current(void) { return tls_pool; }

static void *worker_main(void *a) {
    sd_cpu_worker *w = a;
    sd_cpu_pool *p = w->pool;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->gen == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->stop) break;
        seen = p->gen;
        sd_cpu_pool_fn fn = p->fn;
        void *arg = p->arg;
        const int n_parts = p->n_parts;
        pthread_mutex_unlock(&p->mu);
        if (w->idx < n_parts) fn(arg, w->idx, n_parts, w->scratch);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Stop and join the first n started workers, free everything. */
static void pool_free(sd_cpu_pool *p, int n_started) {
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < n_started; i++) pthread_join(p->workers[i].tid, NULL);
    for (int i = 0; i < p->n_workers; i++) sd_free(p->workers[i].scratch);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->run_mu);
    sd_free(p->workers);
    sd_free(p);
}

sd_cpu_pool *sd_cpu_pool_create(int n_threads, size_t scratch_floats) {
    if (n_threads > SD_CPU_POOL_MAX_THREADS) n_threads = SD_CPU_POOL_MAX_THREADS;
    if (n_threads <= 1) return NULL;
    sd_cpu_pool *p = sd_calloc(1, sizeof *p);
    if (!p) return NULL;
    if (pthread_mutex_init(&p->mu, NULL)) goto fail_mu;
    if (pthread_mutex_init(&p->run_mu, NULL)) goto fail_run_mu;
    if (pthread_cond_init(&p->wake, NULL)) goto fail_wake;
    if (pthread_cond_init(&p->done, NULL)) goto fail_done;
    p->scratch_floats = scratch_floats;
    p->min_work = SD_CPU_POOL_MIN_WORK;
    p->workers = sd_calloc((size_t)(n_threads - 1), sizeof *p->workers);
    if (!p->workers) {
        pool_free(p, 0);
        return NULL;
    }
    /* Scratch first (a worker never sees a missing buffer); fewer workers when it runs out. */
    int n = 0;
    for (; n < n_threads - 1; n++) {
        if (scratch_floats && !(p->workers[n].scratch = sd_malloc(scratch_floats * sizeof(float)))) break;
        p->workers[n].pool = p;
        p->workers[n].idx = n + 1;
    }
    p->n_workers = n;
    /* Workers inherit the creator's signal mask: block everything while they start. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int started = 0;
    for (; started < n; started++)
        if (pthread_create(&p->workers[started].tid, NULL, worker_main, &p->workers[started])) break;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started == 0) {
        pool_free(p, 0);
        return NULL;
    }
    if (started < n) {
        /* Degrade: keep the workers that run. They read n_workers only through part indices,
         * which the caller bounds by sd_cpu_pool_threads; pending counts the started ones. */
        pthread_mutex_lock(&p->mu);
        for (int i = started; i < n; i++) sd_free(p->workers[i].scratch), p->workers[i].scratch = NULL;
        p->n_workers = started;
        pthread_mutex_unlock(&p->mu);
    }
    return p;

fail_done:
    pthread_cond_destroy(&p->wake);
fail_wake:
    pthread_mutex_destroy(&p->run_mu);
fail_run_mu:
    pthread_mutex_destroy(&p->mu);
fail_mu:
    sd_free(p);
    return NULL;
}

void sd_cpu_pool_destroy(sd_cpu_pool *p) {
    if (p) pool_free(p, p->n_workers);
}

int sd_cpu_pool_threads(const sd_cpu_pool *p) { return p ? p->n_workers + 1 : 1; }
size_t sd_cpu_pool_scratch(const sd_cpu_pool *p) { return p ? p->scratch_floats : 0; }
int64_t sd_cpu_pool_min_work(const sd_cpu_pool *p) { return p ? p->min_work : SD_CPU_POOL_MIN_WORK; }
void sd_cpu_pool_set_min_work(sd_cpu_pool *p, int64_t min_work) {
    if (p) p->min_work = min_work < 0 ? 0 : min_work;
}

uint64_t sd_cpu_pool_jobs(sd_cpu_pool *p) {
    if (!p) return 0;
    pthread_mutex_lock(&p->mu);
    uint64_t j = p->jobs;
    pthread_mutex_unlock(&p->mu);
    return j;
}

void sd_cpu_pool_run(sd_cpu_pool *p, int n_parts, sd_cpu_pool_fn fn, void *arg, float *caller_scratch) {
    if (n_parts <= 0) return;
    if (!p || n_parts == 1 || n_parts > p->n_workers + 1 || pthread_mutex_trylock(&p->run_mu)) {
        for (int i = 0; i < n_parts; i++) fn(arg, i, n_parts, caller_scratch);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->n_parts = n_parts;
    p->pending = p->n_workers;
    p->gen++;
    p->jobs++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, n_parts, caller_scratch);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_unlock(&p->run_mu);
}

/* The (package, core) of CPU c from sysfs, as one number; -1 when unknown. */
static long core_key(int c) {
    char path[96];
    long v[2];
    const char *f[2] = {"physical_package_id", "core_id"};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", c, f[k]);
        FILE *fp = fopen(path, "r");
        if (!fp) return -1;
        int ok = fscanf(fp, "%ld", &v[k]) == 1;
        fclose(fp);
        if (!ok || v[k] < 0 || v[k] > 65535) return -1;
    }
    return v[0] * 65536 + v[1];
}

int sd_cpu_default_threads(void) {
    enum { CAP = 8 };
    int n = 0;
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        long seen[CAP];
        int n_seen = 0, logical = 0, unknown = 0;
        for (int c = 0; c < CPU_SETSIZE && n_seen < CAP; c++) {
            if (!CPU_ISSET(c, &set)) continue;
            logical++;
            long key = core_key(c);
            if (key < 0) {
                unknown = 1;
                continue;
            }
            int dup = 0;
            for (int i = 0; i < n_seen; i++) dup |= seen[i] == key;
            if (!dup) seen[n_seen++] = key;
        }
        n = unknown ? logical : n_seen;
    }
#endif
    if (n <= 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        n = online > 0 ? (int)(online < CAP ? online : CAP) : 1;
    }
    return n < CAP ? n : CAP;
}
