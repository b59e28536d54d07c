/* sd_cpu_matmul.h — y = x W^T (+ b): the linear layers (nn.Linear layout).
 *
 * Shapes: x [n, in] fp32 row-major; W [out, in] (PyTorch nn.Linear weight) in F32,
 * F16 or BF16, converted exactly to fp32 on the fly, or SD_MXFP4 (GPT-OSS experts), each row
 * decoded into rowbuf to the floats of its BF16 dequantisation (so the result is the BF16
 * matrix's, bit for bit); b [out] optional (any float dtype);
 * y [n, out] fp32.
 *     y[t, o] = (float)( sd_cpu_dot(W[o, :], x[t, :], in) + b[o] )
 * sd_cpu_dot accumulates products in double in one fixed order (four interleaved
 * partial sums over i mod 4, combined as (s0 + s1) + (s2 + s3), then the tail), so
 * y[t, o] depends only on row t of x and row o of W: never on n or on t's place in
 * the batch (batch invariance), never on the thread or machine. GPU kernels need not
 * reproduce this order bit for bit; they are compared with a tolerance.
 *
 * Loop order: weight rows outer, tokens inner, so each weight row is read (and
 * converted) once per call however many tokens are in the batch.
 *
 * ISA paths: on an x86 CPU with AVX2 + FMA + F16C (checked once at run time) the layers run
 * kernels/cpu/sd_cpu_matmul_x86.c, which keeps the four partial sums in the four lanes of one
 * register and blocks four weight rows x two tokens; its results are bit-identical to the
 * portable loop (the file's header says why; tests/forward test_cpu_matmul_isa.c checks it on
 * every dtype, shape tail and special value). SPECDEC_CPU_ISA=generic in the environment forces
 * the portable loop.
 *
 * Threads: when the calling thread has a pool bound (sd_cpu_pool.h) and the call is at least
 * sd_cpu_pool_min_work multiply-adds, the output rows o are split into contiguous ranges (whole
 * multiples of 16 rows), one per thread; each y[t, o] is still computed by one thread with the
 * code above, so the output is bitwise that of one thread (tests/forward test_cpu_threads.c). */
#ifndef SD_CPU_MATMUL_H
#define SD_CPU_MATMUL_H

#include <stdint.h>
#include "sd_weights.h"
#include "sd_cpu_sanitize.h"

/* Sum_i a[i] * b[i] in double, fixed order (see above). The loop is uninstrumented under the
 * sanitizers; sd_cpu_dot checks both ranges once (sd_cpu_sanitize.h). */
static SD_CPU_UNINSTRUMENTED double sd_cpu_dot_loop(const float *a, const float *b, int64_t n) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += (double)a[i] * (double)b[i];
        s1 += (double)a[i + 1] * (double)b[i + 1];
        s2 += (double)a[i + 2] * (double)b[i + 2];
        s3 += (double)a[i + 3] * (double)b[i + 3];
    }
    double s = (s0 + s1) + (s2 + s3);
    for (; i < n; i++) s += (double)a[i] * (double)b[i];
    return s;
}

static inline double sd_cpu_dot(const float *a, const float *b, int64_t n) {
    if (n > 0) {
        sd_cpu_check_read(a, (size_t)n * sizeof(float));
        sd_cpu_check_read(b, (size_t)n * sizeof(float));
    }
    return sd_cpu_dot_loop(a, b, n);
}

typedef enum sd_cpu_isa { SD_CPU_ISA_GENERIC = 0, SD_CPU_ISA_AVX2 = 1 } sd_cpu_isa;

/* The path sd_cpu_matmul takes in this process (chosen at the first call). */
sd_cpu_isa sd_cpu_matmul_isa(void);
/* Force a path (tests, benchmarks): -1 if this CPU cannot run it. Not meant to race with
 * running forward passes. */
int sd_cpu_matmul_set_isa(sd_cpu_isa isa);

/* bias may be NULL or have data == NULL (no bias). rowbuf: scratch of `in` floats
 * (used when W is not F32; the calling thread's: workers use the pool's scratch, and a pool
 * whose scratch is shorter than `in` leaves such a call to the calling thread). y must not
 * alias x. */
void sd_cpu_matmul(const float *x, int32_t n, const sd_tensor *w, const sd_tensor *bias, float *y, float *rowbuf);

/* The same, token t's output row at y[t] (NULL: token t is skipped), so tokens of
 * several callers (a batched forward's sequences) share one pass over W. Each value
 * is computed exactly as sd_cpu_matmul computes it. */
void sd_cpu_matmul_rows(const float *x, int32_t n, const sd_tensor *w, const sd_tensor *bias, float *const *y,
                        float *rowbuf);

#endif
