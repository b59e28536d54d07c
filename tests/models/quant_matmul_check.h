/* quant_matmul_check.h — the linear-layer check shared by the quantized-weight tests (test_fp8.c,
 * test_int4.c; header-only): sd_cpu_matmul of a quantized [R, C] matrix against its values decoded in
 * double, on 1, 2 threads and both ISA paths. */
#ifndef QUANT_MATMUL_CHECK_H
#define QUANT_MATMUL_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_cpu_matmul.h"
#include "sd_cpu_pool.h"
#include "sd_test.h"

/* y = x w^T for n = ns[0], ns[1], ns[2] tokens (ns[2] the largest; x[t][c] = sin(0.37 (t C + c) + phase))
 * within 1e-6 relative of the product with ref [R, C] in double, on the portable and (where the CPU has
 * it) the AVX2 path, each on 1 and 2 threads: the ns[2]-token outputs are bitwise equal across threads and
 * across the two paths. `what` names the matrix in the messages. */
static void quant_matmul_check(const char *what, const sd_tensor *w, const double *ref, int R, int C, const int ns[3],
                               double phase) {
    const int NT = ns[2];
    float *x = malloc(sizeof(float) * (size_t)(NT * C)), *y = malloc(sizeof(float) * (size_t)(NT * R));
    float *y0 = malloc(sizeof(float) * (size_t)(2 * NT * R)), *rowbuf = malloc(sizeof(float) * (size_t)C);
    if (!x || !y || !y0 || !rowbuf) {
        SD_CHECK(0, "%s: out of memory", what);
        free(x), free(y), free(y0), free(rowbuf);
        return;
    }
    const size_t ybytes = sizeof(float) * (size_t)(NT * R);
    for (int i = 0; i < NT * C; i++) x[i] = (float)sin(0.37 * i + phase);
    int paths = 0;
    for (int isa = 0; isa < 2; isa++) {
        if (sd_cpu_matmul_set_isa((sd_cpu_isa)isa) != 0) continue;
        for (int th = 1; th <= 2; th++) {
            sd_cpu_pool *pool = th > 1 ? sd_cpu_pool_create(th, C) : NULL;
            if (pool) sd_cpu_pool_set_min_work(pool, 1);
            sd_cpu_pool *prev = sd_cpu_pool_bind(pool);
            for (int k = 0; k < 3; k++) {
                const int n = ns[k];
                sd_cpu_matmul(x, n, w, NULL, y, rowbuf);
                double worst = 0;
                for (int t = 0; t < n; t++)
                    for (int r = 0; r < R; r++) {
                        double d = 0, mag = 0;
                        for (int c = 0; c < C; c++)
                            d += ref[r * C + c] * x[t * C + c], mag += fabs(ref[r * C + c] * x[t * C + c]);
                        worst = fmax(worst, fabs(d - y[t * R + r]) / (mag + 1e-30));
                    }
                SD_CHECK(worst < 1e-6, "%s: matmul isa %d, %d threads, %d tokens: relative error %.3g", what, isa, th, n,
                         worst);
                if (n == NT && th == 1) memcpy(y0 + isa * NT * R, y, ybytes), paths |= 1 << isa;
                if (n == NT && th == 2)
                    SD_CHECK(!memcmp(y0 + isa * NT * R, y, ybytes), "%s: isa %d: 2 threads differ", what, isa);
            }
            sd_cpu_pool_bind(prev);
            sd_cpu_pool_destroy(pool);
        }
    }
    SD_CHECK(paths != 3 || !memcmp(y0, y0 + NT * R, ybytes), "%s: the AVX2 path differs from the portable one", what);
    if (paths != 3) printf("%s: the AVX2 path is not available here (portable path only)\n", what);
    sd_cpu_matmul_set_isa(sd_cpu_matmul_isa());
    free(x), free(y), free(y0), free(rowbuf);
}

#endif
