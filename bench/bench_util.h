/* bench_util.h — the clock and order statistics the benchmarks under bench/ share, so that
 * every benchmark times and summarises the same way. Header-only (static inline), C11 and
 * C++ (nvcc) alike. bench/CMakeLists.txt puts bench/ on every benchmark's include path.
 *
 * clock_gettime and CLOCK_MONOTONIC are POSIX, not C11 (the project builds with -std=c11):
 * define _POSIX_C_SOURCE 200809L before the file's first #include. */
#ifndef SPECDEC_BENCH_UTIL_H
#define SPECDEC_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

#ifndef CLOCK_MONOTONIC
#error "bench_util.h: define _POSIX_C_SOURCE 200809L before the first #include (clock_gettime)"
#endif

/* Seconds on the monotonic clock, from an arbitrary origin: only differences mean anything. */
static inline double bench_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* qsort comparators, ascending. */
static inline int bench_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static inline int bench_cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Sorts v[0..n) ascending in place: then v[0] is the minimum, v[n - 1] the maximum and
 * v[n / 2] the middle value (the upper of the two middle ones when n is even). */
static inline void bench_sort(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
}

/* The median of v[0..n), n >= 1: the middle value, or the mean of the two middle values when
 * n is even. Sorts v in place (bench_sort). */
static inline double bench_median(double *v, int n) {
    bench_sort(v, n);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
