/* bench_matmul_util.h — timing one CPU linear layer (sd_cpu_matmul), shared by the quantized-weight
 * benchmarks of bench/cpu (MXFP4, FP8, INT4). Include bench_util.h first. */
#ifndef SPECDEC_BENCH_MATMUL_UTIL_H
#define SPECDEC_BENCH_MATMUL_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_cpu_matmul.h"

/* The benchmarks' options: --reps N (timed calls per median, at least 1) and --threads N. Returns 0,
 * or 2 after printing the usage for anything else. */
static inline int bench_matmul_args(int argc, char **argv, int *reps, int *threads) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) *reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) *threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--reps N] [--threads N]\n", argv[0]);
            return 2;
        }
    }
    if (*reps < 1) *reps = 1;
    return 0;
}

/* The median over reps timed calls of y = x W^T (n tokens), after one warm-up call, in microseconds. */
static inline double bench_matmul_median_us(const float *x, int n, const sd_tensor *w, float *y, float *buf, int reps) {
    double *t = malloc(sizeof(double) * (size_t)reps);
    if (!t) return -1.0;
    sd_cpu_matmul(x, n, w, NULL, y, buf); /* warm-up */
    for (int r = 0; r < reps; r++) {
        const double t0 = bench_now_s();
        sd_cpu_matmul(x, n, w, NULL, y, buf);
        t[r] = (bench_now_s() - t0) * 1e6;
    }
    const double m = bench_median(t, reps);
    free(t);
    return m;
}

#endif
