/* sd_cpu_pool.h — a small persistent thread pool for the CPU forward pass.
 *
 * A pool is the calling thread plus n_threads - 1 workers, started once (per CPU runner group:
 * backends/cpu/sd_cpu_runner.c) and parked on a condition variable between calls; a call hands
 * every worker one part of a job and waits until all parts are done. No thread is created per
 * call. Parts write disjoint outputs (sd_cpu_matmul: disjoint ranges of output rows), so each
 * output value is computed by exactly one thread with the same code as on one thread: results
 * never depend on the thread count.
 *
 * Binding: sd_cpu_pool_bind makes a pool the calling thread's current one (thread-local), and
 * the linear layers (sd_cpu_matmul.h) split their rows over the current pool; the CPU runner
 * binds its group's pool for the length of a pass. Nothing is global: a thread with no pool
 * bound runs every op alone.
 *
 * Failure never is an error: a pool that cannot allocate or start a thread runs with the
 * threads it has (sd_cpu_pool_create returns NULL when it has none: the caller runs alone). A
 * second thread calling sd_cpu_pool_run while the pool is busy runs its parts itself, one
 * after the other (same results; the pool is no lock). Workers block every signal (a program's
 * SIGINT handler runs on its own threads). */
#ifndef SD_CPU_POOL_H
#define SD_CPU_POOL_H

#include <stddef.h>
#include <stdint.h>

/* Most threads one pool runs (the engine refuses more: include/specdec.h cpu_threads). */
#define SD_CPU_POOL_MAX_THREADS 256
/* Jobs below this many multiply-adds run on the calling thread: waking the workers costs more
 * (tens of microseconds on a loaded machine) than they would save. 2^21: at 2^17 the decode step
 * of bench_cpu_forward's 15.7M-parameter model ran 0.76-0.83x on 2 threads of an idle 2-core VM
 * (every matmul split, each worth ~30 us); at 2^21 it runs 0.93-1.14x and prefill 1.1-1.7x
 * (bench/results/cpu_threads_2026-11-28.md). A 1B model's decode matmuls (2048 x 8192 = 16.8M)
 * are well above it. */
#define SD_CPU_POOL_MIN_WORK ((int64_t)1 << 21)

typedef struct sd_cpu_pool sd_cpu_pool;

/* Part `part` of n_parts of a job; scratch: scratch_floats floats private to this call. */
typedef void (*sd_cpu_pool_fn)(void *arg, int part, int n_parts, float *scratch);

/* A pool of n_threads threads in all (the caller counts; clamped to
 * [1, SD_CPU_POOL_MAX_THREADS]), each worker with scratch_floats floats of scratch. NULL when
 * n_threads <= 1 or no worker could be started. */
sd_cpu_pool *sd_cpu_pool_create(int n_threads, size_t scratch_floats);
/* Stops and joins the workers; NULL is a no-op. No call may be running. */
void sd_cpu_pool_destroy(sd_cpu_pool *p);

/* Threads a call runs on (1 for NULL). */
int sd_cpu_pool_threads(const sd_cpu_pool *p);
/* Floats of scratch each worker has (0 for NULL). */
size_t sd_cpu_pool_scratch(const sd_cpu_pool *p);
/* The size threshold of the callers (SD_CPU_POOL_MIN_WORK unless set; tests set 0 so that tiny
 * shapes are split too). Set it before the pool is used. */
int64_t sd_cpu_pool_min_work(const sd_cpu_pool *p);
void sd_cpu_pool_set_min_work(sd_cpu_pool *p, int64_t min_work);

/* fn(arg, i, n_parts, scratch) for every i in [0, n_parts), n_parts <= sd_cpu_pool_threads(p):
 * part 0 on the calling thread (with caller_scratch), part i on worker i; returns when all are
 * done. With p NULL, or while another thread's call runs, every part runs here in order. */
void sd_cpu_pool_run(sd_cpu_pool *p, int n_parts, sd_cpu_pool_fn fn, void *arg, float *caller_scratch);

/* Calls of sd_cpu_pool_run so far that the workers shared (0 for NULL): tests, benchmarks. */
uint64_t sd_cpu_pool_jobs(sd_cpu_pool *p);

/* Make p the calling thread's current pool (NULL: none); returns the previous one (restore it
 * with a second call). */
sd_cpu_pool *sd_cpu_pool_bind(sd_cpu_pool *p);
sd_cpu_pool *sd_cpu_pool_current(void);

/* The default thread count: physical cores this process may run on (Linux sysfs: one per
 * distinct core of the CPUs in its affinity mask; elsewhere the online CPUs), at most 8 (as
 * llama.cpp, whose matmuls stop scaling once memory bandwidth is saturated). */
int sd_cpu_default_threads(void);

#endif
