/* test_cpu_threads.c — the CPU thread pool (kernels/cpu/sd_cpu_pool.h) and the threaded linear
 * layers and forward pass: results bitwise those of one thread.
 *
 *  1. The pool: counts clamped (<= 1: none; > SD_CPU_POOL_MAX_THREADS: the cap), every part of a
 *     call run exactly once and parts 1.. on workers (not the caller); 300 create/destroy cycles
 *     (some with calls between); allocation failure at every k of create: no pool or fewer
 *     threads, never a leak (ASan); two threads calling one pool at once (one runs alone: still
 *     every part once; TSan watches the hand-offs).
 *  2. sd_cpu_matmul / sd_cpu_matmul_rows with 2, 3 and 7 threads (threshold 0, so every shape of
 *     >= 32 rows is split) against no pool, memcmp of every output float (outputs prefilled with
 *     a pattern: a row no thread wrote would show), on both ISA paths, every weight dtype, rows
 *     1..704 (uneven splits, ranges of 16 rows), columns 0..259 (every 4-wide tail), 1..130
 *     tokens (the AVX2 path's 2-token blocks and 64-token chunks), bias of each dtype, skipped
 *     rows of matmul_rows. The workers must have been used (sd_cpu_pool_jobs). Below the default
 *     threshold a call stays on the caller; a pool whose scratch is too short for a converted
 *     row leaves the portable path's call to the caller.
 *  2b. SD_MXFP4 weights (GPT-OSS experts): random codes and scales (the extremes too) against the
 *     same matrix decoded to BF16: sd_cpu_matmul / _rows bitwise equal on both ISA paths, alone and
 *     on 2, 3 and 7 threads; a pool too narrow for a decoded row leaves the portable path's call to
 *     the caller (the AVX2 path decodes in registers).
 *  3. A whole-model forward (F32, F16, BF16; bias and tied variants; 1-token decode and 9-token
 *     chunks) with 1, 2, 3 and 7 threads: logits bitwise equal.
 *  4. Two runners over the same weights, each with 3 threads, forwarding from two threads at
 *     once: both bitwise equal to one thread (label tsan: a race between the pools shows).
 *  5. Every model family of tests/models/fixtures (argv[1]: its directory; Gemma 1-3, Mistral,
 *     Phi-3/4, Qwen2/3, Mixtral, Qwen2/3-MoE, rope variants) with 3 threads and the threshold at
 *     0, so every layer of >= 32 rows (attention, MLP, experts, LM head) is split, and so is
 *     every layer's attention (its (token, head) units interleaved over the threads, sliding
 *     windows, sinks and soft-caps included): logits of a 1-token decode and of one prefill
 *     bitwise those of one thread, the workers used. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fwd_common.h"
#include "sd_alloc.h"
#include "sd_cpu_matmul.h"
#include "sd_cpu_pool.h"
#include "sd_cpu_runner.h"
#include "sd_mxfp4.h"
#include "sd_test.h"

/* ---- 1. the pool ---- */

typedef struct part_rec {
    int hits[SD_CPU_POOL_MAX_THREADS];
    pthread_t who[SD_CPU_POOL_MAX_THREADS];
    int bad_n;   /* a call saw another n_parts */
    int n_parts;
    float *scratch_seen[SD_CPU_POOL_MAX_THREADS];
} part_rec;

static void rec_part(void *arg, int part, int n_parts, float *scratch) {
    part_rec *r = arg;
    r->hits[part]++;
    r->who[part] = pthread_self();
    r->scratch_seen[part] = scratch;
    if (n_parts != r->n_parts) r->bad_n = 1;
    if (scratch) scratch[0] = (float)part; /* the scratch is writable and private */
}

/* Every part of an n-part call exactly once; 1 when parts 1.. ran off the calling thread. */
static int run_and_check(sd_cpu_pool *p, int n_parts, float *caller_scratch, const char *what) {
    part_rec r;
    memset(&r, 0, sizeof r);
    r.n_parts = n_parts;
    sd_cpu_pool_run(p, n_parts, rec_part, &r, caller_scratch);
    int once = !r.bad_n, off_caller = 1;
    for (int i = 0; i < n_parts; i++) {
        once &= r.hits[i] == 1;
        if (i > 0) off_caller &= !pthread_equal(r.who[i], pthread_self());
    }
    SD_CHECK(once, "%s: %d parts not each run once", what, n_parts);
    SD_CHECK(n_parts < 1 || r.scratch_seen[0] == caller_scratch, "%s: part 0 did not get the caller's scratch", what);
    return off_caller;
}

static void check_pool_basics(void) {
    SD_CHECK(sd_cpu_pool_create(1, 16) == NULL && sd_cpu_pool_create(0, 16) == NULL &&
                 sd_cpu_pool_create(-7, 16) == NULL,
             "a pool of <= 1 thread is none");
    SD_CHECK(sd_cpu_pool_threads(NULL) == 1 && sd_cpu_pool_jobs(NULL) == 0, "no pool: one thread");
    float mine[4];
    run_and_check(NULL, 3, mine, "no pool"); /* runs every part here */

    sd_cpu_pool *p = sd_cpu_pool_create(3, 4);
    SD_CHECK(p && sd_cpu_pool_threads(p) == 3 && sd_cpu_pool_scratch(p) == 4, "pool of 3: %d threads",
             sd_cpu_pool_threads(p));
    for (int n = 0; n <= 3; n++) {
        uint64_t j0 = sd_cpu_pool_jobs(p);
        int off = run_and_check(p, n, mine, "pool of 3");
        uint64_t used = sd_cpu_pool_jobs(p) - j0;
        SD_CHECK(n < 2 || (off && used == 1), "%d parts: the workers ran none (off caller %d, jobs %llu)", n, off,
                 (unsigned long long)used);
        SD_CHECK(n >= 2 || used == 0, "%d parts woke the workers", n);
    }
    run_and_check(p, 5, mine, "more parts than threads"); /* all on the caller */
    sd_cpu_pool_destroy(p);
    sd_cpu_pool_destroy(NULL);

    /* a huge count is clamped, and the clamped pool works */
    p = sd_cpu_pool_create(1 << 20, 0);
    SD_CHECK(p && sd_cpu_pool_threads(p) == SD_CPU_POOL_MAX_THREADS, "huge count: %d threads", sd_cpu_pool_threads(p));
    SD_CHECK(run_and_check(p, SD_CPU_POOL_MAX_THREADS, NULL, "clamped pool"), "clamped pool: parts on the caller");
    sd_cpu_pool_destroy(p);
}

static void check_pool_stress(void) {
    int ok = 1;
    for (int i = 0; i < 300; i++) {
        sd_cpu_pool *p = sd_cpu_pool_create(2 + i % 7, (size_t)(i % 3) * 8);
        ok &= p != NULL;
        if (i % 3 == 0)
            for (int k = 0; k < 3; k++) run_and_check(p, sd_cpu_pool_threads(p), NULL, "stress");
        sd_cpu_pool_destroy(p);
    }
    SD_CHECK(ok, "stress: a create failed");
}

static void check_pool_alloc_failures(void) {
    int saw_null = 0, saw_fewer = 0;
    for (long k = 0; k < 12; k++) {
        sd_alloc_fail_after(k);
        sd_cpu_pool *p = sd_cpu_pool_create(5, 32);
        sd_alloc_fail_after(-1);
        if (!p) {
            saw_null = 1;
            continue;
        }
        const int nt = sd_cpu_pool_threads(p);
        SD_CHECK(nt >= 2 && nt <= 5, "fail at %ld: %d threads", k, nt);
        saw_fewer |= nt < 5;
        float mine[32];
        run_and_check(p, nt, mine, "degraded pool");
        sd_cpu_pool_destroy(p);
    }
    SD_CHECK(saw_null && saw_fewer, "allocation failures never gave no pool (%d) or a smaller one (%d)", saw_null,
             saw_fewer);
}

typedef struct caller_arg {
    sd_cpu_pool *p;
    int ok;
} caller_arg;

static void *pool_caller(void *a) {
    caller_arg *c = a;
    float mine[8];
    for (int i = 0; i < 200; i++) {
        part_rec r;
        memset(&r, 0, sizeof r);
        r.n_parts = 4;
        sd_cpu_pool_run(c->p, 4, rec_part, &r, mine);
        for (int k = 0; k < 4; k++) c->ok &= r.hits[k] == 1;
    }
    return NULL;
}

static void check_pool_two_callers(void) {
    sd_cpu_pool *p = sd_cpu_pool_create(4, 8);
    caller_arg a = {p, 1}, b = {p, 1};
    pthread_t ta, tb;
    int started = pthread_create(&ta, NULL, pool_caller, &a) == 0;
    started += pthread_create(&tb, NULL, pool_caller, &b) == 0;
    SD_CHECK(started == 2, "could not start two threads");
    if (started > 0) pthread_join(ta, NULL);
    if (started > 1) pthread_join(tb, NULL);
    SD_CHECK(a.ok && b.ok, "two callers of one pool: a part ran twice or never");
    sd_cpu_pool_destroy(p);
}

/* ---- 2. the linear layers ---- */

static int g_mm_shapes, g_mm_split;

static void mm_one(sd_cpu_isa isa, sd_cpu_pool *const *pools, int n_pools, sd_dtype dt, int rows, int cols, int n,
                   int bias_kind, uint64_t *rng) {
    sd_tensor w, b;
    fwd_fill(&w, dt, rows, cols > 0 ? cols : 1, 0.0, 0.5, rng);
    if (cols == 0) w.shape[1] = 0;
    fwd_fill(&b, bias_kind == 2 ? SD_BF16 : SD_F32, rows, 0, 0.0, 0.5, rng);
    const sd_tensor *bp = bias_kind ? &b : NULL;
    float *x = malloc(sizeof(float) * (size_t)(n * (cols ? cols : 1)));
    for (int i = 0; i < n * cols; i++) x[i] = (float)fwd_rng_normal(rng);
    const size_t ny = (size_t)n * (size_t)rows;
    float *ref = malloc(ny * sizeof(float)), *got = malloc(ny * sizeof(float));
    float *rref = malloc(ny * sizeof(float)), *rgot = malloc(ny * sizeof(float));
    float **yr = malloc(sizeof(float *) * (size_t)n), *buf = malloc(sizeof(float) * (size_t)(cols + 1));
    sd_cpu_matmul_set_isa(isa);
    sd_cpu_pool_bind(NULL);
    memset(ref, 0xcd, ny * sizeof(float));
    sd_cpu_matmul(x, n, &w, bp, ref, buf);
    memset(rref, 0xab, ny * sizeof(float));
    for (int t = 0; t < n; t++) yr[t] = t % 3 == 1 ? NULL : rref + (size_t)t * rows;
    sd_cpu_matmul_rows(x, n, &w, bp, yr, buf);
    for (int k = 0; k < n_pools; k++) {
        sd_cpu_pool_bind(pools[k]);
        uint64_t j0 = sd_cpu_pool_jobs(pools[k]);
        memset(got, 0xcd, ny * sizeof(float));
        sd_cpu_matmul(x, n, &w, bp, got, buf);
        memset(rgot, 0xab, ny * sizeof(float));
        for (int t = 0; t < n; t++) yr[t] = t % 3 == 1 ? NULL : rgot + (size_t)t * rows;
        sd_cpu_matmul_rows(x, n, &w, bp, yr, buf);
        uint64_t used = sd_cpu_pool_jobs(pools[k]) - j0;
        sd_cpu_pool_bind(NULL);
        int64_t d = fwd_first_diff(ref, got, (int64_t)ny), dr = fwd_first_diff(rref, rgot, (int64_t)ny);
        SD_CHECK(d < 0 && dr < 0,
                 "isa %d, %d threads, dtype %d rows %d cols %d n %d bias %d: matmul differs at %lld, matmul_rows at %lld",
                 (int)isa, sd_cpu_pool_threads(pools[k]), (int)dt, rows, cols, n, bias_kind, (long long)d, (long long)dr);
        /* >= 32 rows (two 16-row ranges) and tokens: both calls shared with the workers */
        SD_CHECK(rows < 32 || used == 2, "isa %d, %d threads, rows %d cols %d n %d: workers used by %llu calls of 2",
                 (int)isa, sd_cpu_pool_threads(pools[k]), rows, cols, n, (unsigned long long)used);
        g_mm_shapes++;
        g_mm_split += used == 2;
    }
    free(x), free(ref), free(got), free(rref), free(rgot), free(yr), free(buf);
    free((void *)w.data), free((void *)b.data);
}

static void check_matmul(void) {
    enum { SCRATCH = 260 };
    sd_cpu_pool *pools[3] = {sd_cpu_pool_create(2, SCRATCH), sd_cpu_pool_create(3, SCRATCH),
                             sd_cpu_pool_create(7, SCRATCH)};
    SD_CHECK(pools[0] && pools[1] && pools[2], "pools of 2, 3, 7 threads not created");
    if (!pools[0] || !pools[1] || !pools[2]) return;
    for (int k = 0; k < 3; k++) sd_cpu_pool_set_min_work(pools[k], 0);
    static const int rows_set[] = {1, 5, 31, 32, 45, 100, 259};
    static const int cols_set[] = {0, 1, 3, 4, 7, 67, 259};
    static const int n_set[] = {1, 2, 3, 65, 130};
    static const sd_dtype dts[] = {SD_F32, SD_F16, SD_BF16};
    const int n_isa = sd_cpu_matmul_set_isa(SD_CPU_ISA_AVX2) == 0 ? 2 : 1;
    uint64_t rng = 20261128;
    for (int i = 0; i < n_isa; i++)
        for (int d = 0; d < 3; d++)
            for (size_t r = 0; r < sizeof rows_set / sizeof *rows_set; r++)
                for (size_t c = 0; c < sizeof cols_set / sizeof *cols_set; c++)
                    for (size_t k = 0; k < sizeof n_set / sizeof *n_set; k++) {
                        if (n_set[k] > 3 && rows_set[r] != 45 && c % 3 != 0) continue; /* chunking: a few shapes */
                        mm_one((sd_cpu_isa)i, pools, 3, dts[d], rows_set[r], cols_set[c], n_set[k],
                               (int)((r + c + k) % 3), &rng);
                    }
    /* realistic layers: the bundled target's MLP and an LM head of odd size */
    for (int i = 0; i < n_isa; i++) {
        mm_one((sd_cpu_isa)i, pools, 3, SD_F16, 704, 256, 5, 0, &rng);
        mm_one((sd_cpu_isa)i, pools, 3, SD_BF16, 1003, 64, 2, 1, &rng);
    }
    SD_CHECK(g_mm_split > g_mm_shapes / 2, "only %d of %d calls were split", g_mm_split, g_mm_shapes);

    /* The default threshold keeps a small call on the caller, a large one is split; a pool whose
     * scratch is shorter than a converted row leaves the portable path's call to the caller. */
    sd_cpu_pool *dflt = sd_cpu_pool_create(2, SCRATCH), *narrow = sd_cpu_pool_create(2, 16);
    sd_cpu_pool_set_min_work(narrow, 0);
    sd_tensor w;
    fwd_fill(&w, SD_F16, 704, 256, 0.0, 0.5, &rng);
    float *x = calloc(256 * 16, sizeof(float)), *y = malloc(sizeof(float) * 704 * 16), buf[256];
    sd_cpu_matmul_set_isa(SD_CPU_ISA_GENERIC);
    sd_cpu_pool_bind(dflt);
    uint64_t j0 = sd_cpu_pool_jobs(dflt);
    sd_tensor w40 = w;
    w40.shape[0] = 40;
    sd_cpu_matmul(x, 4, &w40, NULL, y, buf); /* 40 x 256 x 4 < threshold */
    SD_CHECK(sd_cpu_pool_jobs(dflt) == j0, "a call below SD_CPU_POOL_MIN_WORK woke the workers");
    sd_cpu_matmul(x, 1, &w, NULL, y, buf); /* 704 x 256 (a decode step's MLP row block) < threshold */
    SD_CHECK(sd_cpu_pool_jobs(dflt) == j0, "a one-token call of 180k multiply-adds woke the workers");
    sd_cpu_matmul(x, 16, &w, NULL, y, buf); /* 704 x 256 x 16 >= threshold */
    SD_CHECK(sd_cpu_pool_jobs(dflt) == j0 + 1, "a call above SD_CPU_POOL_MIN_WORK was not split");
    sd_cpu_pool_bind(narrow);
    sd_cpu_matmul(x, 1, &w, NULL, y, buf);
    SD_CHECK(sd_cpu_pool_jobs(narrow) == 0, "a pool with 16 floats of scratch converted 256-float rows");
    sd_cpu_pool_bind(NULL);
    free(x), free(y), free((void *)w.data);
    sd_cpu_pool_destroy(dflt), sd_cpu_pool_destroy(narrow);
    for (int k = 0; k < 3; k++) sd_cpu_pool_destroy(pools[k]);
}

/* ---- 2b. MXFP4 weights (GPT-OSS experts) ---- */

/* An SD_MXFP4 [rows, cols] matrix of random codes and scales (mostly 2^-8..2^4; with `extremes`,
 * also the smallest scale 2^-127 and the largest, whose 6 * 2^127 overflows to inf) against the
 * same matrix decoded to BF16 (models/sd_mxfp4.h, what the loader used to store): on each ISA path,
 * alone and on pools of 2, 3 and 7 threads, sd_cpu_matmul and sd_cpu_matmul_rows give the BF16
 * matrix's outputs bit for bit. */
static void mm_mxfp4(sd_cpu_isa isa, sd_cpu_pool *const *pools, int n_pools, int rows, int cols, int n, int bias_kind,
                     int extremes, uint64_t *rng) {
    static uint16_t lut[255 * 16];
    if (!lut[16 * 127 + 2]) sd_mxfp4_lut(lut);
    const int64_t G = cols / 32;
    uint8_t *blk = malloc((size_t)(rows * G * 16) + 1), *sc = malloc((size_t)(rows * G) + 1);
    uint16_t *bf = malloc(sizeof(uint16_t) * (size_t)(rows * cols + 1));
    for (int64_t i = 0; i < rows * G * 16; i++) blk[i] = (uint8_t)(fwd_rng_next(rng) >> 56);
    for (int64_t i = 0; i < rows * G; i++) {
        const uint64_t r = fwd_rng_next(rng);
        sc[i] = (uint8_t)(119 + r % 13);
        if (extremes && r % 17 == 0) sc[i] = (r >> 8) % 2 ? 0 : 254;
    }
    for (int r = 0; r < rows; r++) sd_mxfp4_row(blk + (size_t)r * G * 16, sc + (size_t)r * G, G, lut, bf + (size_t)r * cols);
    const sd_tensor wq = {blk, SD_MXFP4, 2, {rows, cols}, sc}, wb = {bf, SD_BF16, 2, {rows, cols}, NULL};
    sd_tensor b;
    fwd_fill(&b, bias_kind == 2 ? SD_BF16 : SD_F32, rows, 0, 0.0, 0.5, rng);
    const sd_tensor *bp = bias_kind ? &b : NULL;
    float *x = malloc(sizeof(float) * (size_t)(n * cols));
    for (int i = 0; i < n * cols; i++) x[i] = (float)fwd_rng_normal(rng);
    const size_t ny = (size_t)n * (size_t)rows;
    float *ref = malloc(ny * sizeof(float)), *got = malloc(ny * sizeof(float)), *buf = malloc(sizeof(float) * (size_t)cols);
    float **yr = malloc(sizeof(float *) * (size_t)n);
    sd_cpu_matmul_set_isa(isa);
    sd_cpu_pool_bind(NULL);
    memset(ref, 0xcd, ny * sizeof(float));
    sd_cpu_matmul(x, n, &wb, bp, ref, buf);
    for (int k = -1; k < n_pools; k++) {
        sd_cpu_pool_bind(k < 0 ? NULL : pools[k]);
        memset(got, 0xcd, ny * sizeof(float));
        sd_cpu_matmul(x, n, &wq, bp, got, buf);
        int64_t d = fwd_first_diff(ref, got, (int64_t)ny);
        memset(got, 0xab, ny * sizeof(float));
        for (int t = 0; t < n; t++) yr[t] = got + (size_t)t * rows;
        sd_cpu_matmul_rows(x, n, &wq, bp, yr, buf);
        const int64_t dr = fwd_first_diff(ref, got, (int64_t)ny);
        sd_cpu_pool_bind(NULL);
        SD_CHECK(d < 0 && dr < 0, "mxfp4, isa %d, %d threads, rows %d cols %d n %d bias %d extremes %d: differs from "
                 "BF16 at %lld (matmul), %lld (matmul_rows)", (int)isa, k < 0 ? 1 : sd_cpu_pool_threads(pools[k]), rows,
                 cols, n, bias_kind, extremes, (long long)d, (long long)dr);
        g_mm_shapes++;
    }
    free(blk), free(sc), free(bf), free(x), free(ref), free(got), free(buf), free(yr), free((void *)b.data);
}

static void check_matmul_mxfp4(void) {
    enum { SCRATCH = 260 };
    sd_cpu_pool *pools[3] = {sd_cpu_pool_create(2, SCRATCH), sd_cpu_pool_create(3, SCRATCH),
                             sd_cpu_pool_create(7, SCRATCH)};
    SD_CHECK(pools[0] && pools[1] && pools[2], "pools of 2, 3, 7 threads not created");
    if (!pools[0] || !pools[1] || !pools[2]) return;
    for (int k = 0; k < 3; k++) sd_cpu_pool_set_min_work(pools[k], 0);
    static const int rows_set[] = {1, 5, 32, 45, 100};
    static const int cols_set[] = {32, 64, 96, 256};
    static const int n_set[] = {1, 2, 3, 65};
    const int n_isa = sd_cpu_matmul_set_isa(SD_CPU_ISA_AVX2) == 0 ? 2 : 1;
    uint64_t rng = 20261129;
    const int before = g_mm_shapes;
    for (int i = 0; i < n_isa; i++)
        for (size_t r = 0; r < sizeof rows_set / sizeof *rows_set; r++)
            for (size_t c = 0; c < sizeof cols_set / sizeof *cols_set; c++)
                for (size_t k = 0; k < sizeof n_set / sizeof *n_set; k++)
                    mm_mxfp4((sd_cpu_isa)i, pools, 3, rows_set[r], cols_set[c], n_set[k], (int)((r + c + k) % 3),
                             (int)((r + k) % 2), &rng);
    /* a GPT-OSS-like expert block: gate_up 2 x 64 rows of 96 inputs, 4 tokens */
    for (int i = 0; i < n_isa; i++) mm_mxfp4((sd_cpu_isa)i, pools, 3, 128, 96, 4, 1, 1, &rng);
    /* a pool whose scratch is shorter than a decoded row leaves the portable path's call to the caller
     * (the AVX2 path decodes in registers and splits it) */
    sd_cpu_pool *narrow = sd_cpu_pool_create(2, 16);
    sd_cpu_pool_set_min_work(narrow, 0);
    uint8_t blk[64 * 2 * 16] = {0}, sc[64 * 2];
    memset(sc, 127, sizeof sc);
    const sd_tensor wq = {blk, SD_MXFP4, 2, {64, 64}, sc};
    float x[64] = {0}, y[64], buf[64];
    sd_cpu_matmul_set_isa(SD_CPU_ISA_GENERIC);
    sd_cpu_pool_bind(narrow);
    sd_cpu_matmul(x, 1, &wq, NULL, y, buf);
    SD_CHECK(sd_cpu_pool_jobs(narrow) == 0, "mxfp4: a pool with 16 floats of scratch decoded 64-value rows");
    if (n_isa == 2) {
        sd_cpu_matmul_set_isa(SD_CPU_ISA_AVX2);
        sd_cpu_matmul(x, 1, &wq, NULL, y, buf);
        SD_CHECK(sd_cpu_pool_jobs(narrow) == 1, "mxfp4: the AVX2 path needs no scratch, yet did not split");
    }
    sd_cpu_pool_bind(NULL);
    sd_cpu_pool_destroy(narrow);
    for (int k = 0; k < 3; k++) sd_cpu_pool_destroy(pools[k]);
    printf("mxfp4 linear layers: %d calls bitwise equal to the BF16 matrix's\n", g_mm_shapes - before);
}

/* ---- 3. and 4. whole-model forwards ---- */

#define T_SEQ 18
#define N_CTX 32

static sd_config big_config(void) {
    sd_config c = fwd_small_config();
    c.vocab_size = 1000; /* the LM head: 1000 x 256, above the threshold per token */
    c.hidden_size = 256;
    c.intermediate_size = 704;
    c.n_heads = 8;
    c.n_kv_heads = 2;
    c.head_dim = 32;
    return c;
}

/* Logits [T_SEQ, V] of tokens decoded one at a time, then again in chunks of 9 (compared). */
static int run_model(const struct specdec_model *m, int threads, float *out) {
    sd_errbuf eb = {{0}};
    sd_runner *r = NULL;
    if (sd_cpu_runner_create(&m->w, N_CTX, N_CTX, &r, &eb) != SPECDEC_OK) return 0;
    sd_cpu_group_set_threads(sd_cpu_runner_group(r), threads);
    int ok = sd_cpu_group_threads(sd_cpu_runner_group(r)) == threads;
    const int32_t V = m->w.cfg.vocab_size;
    int32_t tok[T_SEQ];
    uint64_t s = 99;
    for (int i = 0; i < T_SEQ; i++) tok[i] = (int32_t)(fwd_rng_next(&s) % (uint64_t)V);
    float *chunked = malloc(sizeof(float) * T_SEQ * (size_t)V);
    ok &= fwd_run_chunked(r, tok, T_SEQ, 1, out) == SPECDEC_OK;
    ok &= fwd_run_chunked(r, tok, T_SEQ, 9, chunked) == SPECDEC_OK;
    ok &= fwd_first_diff(out, chunked, (int64_t)T_SEQ * V) < 0;
    free(chunked);
    sd_runner_destroy(r);
    return ok;
}

static void check_model(const char *name, const sd_config *cfg, sd_dtype dt) {
    struct specdec_model *m = fwd_model_make(cfg, dt, 5);
    const size_t sz = (size_t)T_SEQ * (size_t)cfg->vocab_size;
    float *ref = malloc(sz * sizeof(float)), *got = malloc(sz * sizeof(float));
    SD_CHECK(run_model(m, 1, ref), "%s: one thread failed", name);
    static const int counts[] = {2, 3, 7};
    for (int k = 0; k < 3; k++) {
        memset(got, 0, sz * sizeof(float));
        int ok = run_model(m, counts[k], got);
        int64_t d = fwd_first_diff(ref, got, (int64_t)sz);
        SD_CHECK(ok && d < 0, "%s: %d threads: run %d, logits differ at %lld", name, counts[k], ok, (long long)d);
    }
    free(ref), free(got);
    fwd_model_free(m);
}

typedef struct conc_arg {
    const struct specdec_model *m;
    const float *ref;
    int ok;
} conc_arg;

static void *conc_main(void *a) {
    conc_arg *c = a;
    const size_t sz = (size_t)T_SEQ * (size_t)c->m->w.cfg.vocab_size;
    float *got = malloc(sz * sizeof(float));
    for (int rep = 0; rep < 2; rep++) c->ok &= run_model(c->m, 3, got) && fwd_first_diff(c->ref, got, (int64_t)sz) < 0;
    free(got);
    return NULL;
}

static void check_concurrent_runners(void) {
    sd_config cfg = big_config();
    struct specdec_model *m = fwd_model_make(&cfg, SD_F16, 11);
    const size_t sz = (size_t)T_SEQ * (size_t)cfg.vocab_size;
    float *ref = malloc(sz * sizeof(float));
    SD_CHECK(run_model(m, 1, ref), "concurrent: reference failed");
    conc_arg a = {m, ref, 1}, b = {m, ref, 1};
    pthread_t ta, tb;
    int started = pthread_create(&ta, NULL, conc_main, &a) == 0;
    started += pthread_create(&tb, NULL, conc_main, &b) == 0;
    SD_CHECK(started == 2, "could not start two threads");
    if (started > 0) pthread_join(ta, NULL);
    if (started > 1) pthread_join(tb, NULL);
    SD_CHECK(a.ok && b.ok, "two threaded runners at once: logits differ from one thread (%d %d)", a.ok, b.ok);
    free(ref);
    fwd_model_free(m);
}

/* Logits [T, V] of tokens decoded one at a time then as one prefill (compared with each other). */
static int run_fixture(const struct specdec_model *m, int32_t n_ctx, const int32_t *tok, int32_t T, int threads,
                       float *out, uint64_t *jobs) {
    sd_errbuf eb = {{0}};
    sd_runner *r = NULL;
    if (sd_cpu_runner_create(&m->w, n_ctx, n_ctx, &r, &eb) != SPECDEC_OK) return 0;
    sd_runner_group *g = sd_cpu_runner_group(r);
    sd_cpu_group_set_threads(g, threads);
    sd_cpu_pool_set_min_work(sd_cpu_group_pool(g), 0);
    const int64_t n = (int64_t)T * m->w.cfg.vocab_size;
    float *all = malloc(sizeof(float) * (size_t)n);
    int ok = sd_cpu_group_threads(g) == threads && fwd_run_chunked(r, tok, T, 1, out) == SPECDEC_OK &&
             fwd_run_chunked(r, tok, T, T, all) == SPECDEC_OK && fwd_first_diff(out, all, n) < 0;
    *jobs = sd_cpu_pool_jobs(sd_cpu_group_pool(g));
    free(all);
    sd_runner_destroy(r);
    return ok;
}

static void check_fixtures(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    FILE *f = fopen(path, "r");
    SD_CHECK(f != NULL, "no %s", path);
    if (!f) return;
    char line[512], name[128];
    int n_models = 0;
    while (fgets(line, sizeof line, f)) {
        int T, V, n_ctx;
        if (line[0] == '#' || sscanf(line, "%127s %d %d %d", name, &T, &V, &n_ctx) != 4) continue;
        snprintf(path, sizeof path, "%s/%s", dir, name);
        specdec_model *m = NULL;
        SD_CHECK(specdec_model_load(path, NULL, &m) == SPECDEC_OK, "load %s: %s", path, specdec_last_error());
        if (!m) continue;
        int32_t tok[64];
        if (T > 64) T = 64;
        if (T > n_ctx) T = n_ctx;
        uint64_t s = 3;
        for (int i = 0; i < T; i++) tok[i] = (int32_t)(fwd_rng_next(&s) % (uint64_t)m->w.cfg.vocab_size);
        const size_t sz = (size_t)T * (size_t)m->w.cfg.vocab_size;
        float *ref = malloc(sz * sizeof(float)), *got = malloc(sz * sizeof(float));
        uint64_t j1 = 0, j3 = 0;
        int ok1 = run_fixture(m, n_ctx, tok, T, 1, ref, &j1), ok3 = run_fixture(m, n_ctx, tok, T, 3, got, &j3);
        int64_t d = fwd_first_diff(ref, got, (int64_t)sz);
        SD_CHECK(ok1 && ok3 && d < 0 && j3 > 0, "%s: 3 threads: runs %d %d, logits differ at %lld, %llu calls split",
                 name, ok1, ok3, (long long)d, (unsigned long long)j3);
        free(ref), free(got);
        specdec_model_free(m);
        n_models++;
    }
    fclose(f);
    SD_CHECK(n_models >= 20, "only %d fixtures in %s", n_models, dir);
}

int main(int argc, char **argv) {
    check_pool_basics();
    check_pool_stress();
    check_pool_alloc_failures();
    check_pool_two_callers();
    check_matmul();
    check_matmul_mxfp4();
    sd_cpu_matmul_set_isa(sd_cpu_matmul_set_isa(SD_CPU_ISA_AVX2) == 0 ? SD_CPU_ISA_AVX2 : SD_CPU_ISA_GENERIC);
    for (int generic = 0; generic < 2; generic++) {
        if (generic) sd_cpu_matmul_set_isa(SD_CPU_ISA_GENERIC);
        sd_config c = big_config();
        check_model(generic ? "llama f16 (portable)" : "llama f16", &c, SD_F16);
        if (generic) continue;
        check_model("llama f32", &c, SD_F32);
        sd_config q = big_config();
        q.arch = SD_ARCH_QWEN2;
        q.attention_bias = 1;
        q.tie_word_embeddings = 1;
        check_model("qwen2 bias tied bf16", &q, SD_BF16);
    }
    check_concurrent_runners();
    if (argc > 1) check_fixtures(argv[1]);
    else SD_CHECK(0, "usage: forward_cpu_threads FIXTURES_DIR");
    return sd_test_done();
}
