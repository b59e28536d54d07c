/* sd_cpu_pool.c — the persistent thread pool of the CPU forward pass (see sd_cpu_pool.h).
 *
 * Protocol: the caller publishes (fn, arg, n_parts), sets pending = n_workers and bumps the
 * generation (a release store), then wakes sleeping workers; each worker, seeing a new generation
 * (an acquire load), runs its part (if it has one) and decrements pending (acq_rel); the caller
 * returns once pending is 0 (an acquire load), so every worker's writes happen-before its return
 * and the next job cannot overwrite (fn, arg, n_parts) before every worker has read them.
 * ThreadSanitizer understands these atomics and the mutex alike.
 *
 * Waiting: idle workers sleep on the condition variable `wake`, a caller whose workers are not done
 * on `done`; `mu` orders each sleep against its wake-up, so none is lost. No spinning: measured on
 * the 2-core CI machine shared with other jobs (load ~6), spinning a bounded while before sleeping
 * made decode 2-9x slower than one thread (a spinning thread takes the core the thread it waits
 * for needs), sleeping at once kept it at 0.8-1.1x (bench/results/cpu_threads_2026-11-28.md).
 * `run_mu` keeps two callers from sharing the workers: the second runs its parts alone. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_ISSET */
#include "sd_cpu_pool.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
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
    pthread_cond_t wake; /* sleeping workers wait for a new generation or stop */
    pthread_cond_t done; /* a sleeping caller waits for pending == 0 */
    pthread_mutex_t run_mu;
    _Atomic uint64_t gen;
    atomic_int pending;
    atomic_int stop;
    int sleepers;        /* under mu: workers in cond_wait */
    uint64_t jobs;       /* under mu: calls the workers shared */
    sd_cpu_pool_fn fn;   /* the current job: written before gen is bumped */
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

/* Sleep until the generation moves past seen (or the pool stops); the generation seen then. */
static uint64_t worker_wait(sd_cpu_pool *p, uint64_t seen) {
    uint64_t g;
    pthread_mutex_lock(&p->mu);
    p->sleepers++;
    while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
           !atomic_load_explicit(&p->stop, memory_order_relaxed))
        pthread_cond_wait(&p->wake, &p->mu);
    p->sleepers--;
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *worker_main(void *a) {
    sd_cpu_worker *w = a;
    sd_cpu_pool *p = w->pool;
    uint64_t seen = 0;
    for (;;) {
        seen = worker_wait(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        const int n_parts = p->n_parts;
        if (w->idx < n_parts) p->fn(p->arg, w->idx, n_parts, w->scratch);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu); /* the caller may be asleep: see run */
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

/* Stop and join the first n started workers, free everything. */
static void pool_free(sd_cpu_pool *p, int n_started) {
    pthread_mutex_lock(&p->mu);
    atomic_store_explicit(&p->stop, 1, memory_order_release);
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
        /* Degrade: keep the workers that run (workers never read n_workers; from now on the
         * callers' part counts and pending count the started ones only). */
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
    p->fn = fn;
    p->arg = arg;
    p->n_parts = n_parts;
    atomic_store_explicit(&p->pending, p->n_workers, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    p->jobs++;
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    if (p->sleepers) pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, n_parts, caller_scratch);
    if (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
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
