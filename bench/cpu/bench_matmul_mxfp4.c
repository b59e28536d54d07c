/* bench_matmul_mxfp4.c — the CPU linear layer on MXFP4 weights (GPT-OSS experts: SD_MXFP4 views of
 * the checkpoint, each row decoded as it is used) against the same matrix stored as BF16 (what
 * the loader kept before: 4x the bytes), in one run, on gpt-oss-20b's expert shapes:
 *   gate_up  [2 * 2880, 2880]   down  [2880, 2880]
 * for n = 1, 4 and 16 tokens (a decode step routes 1 token to an expert; a verify pass or a
 * prefill chunk several), on 1 thread and, with --threads N, on a pool of N. Prints the median
 * of REPS timed calls (after a warm-up) in microseconds, GB/s of weight bytes read, and the ratio
 * MXFP4 / BF16 time; checks the outputs are bitwise equal (the run fails otherwise).
 *
 * Run: build/bench/cpu/bench_matmul_mxfp4 [--reps N] [--threads N] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "bench_matmul_util.h"
#include "sd_cpu_matmul.h"
#include "sd_cpu_pool.h"
#include "sd_mxfp4.h"
#include "sd_test_util.h"

int main(int argc, char **argv) {
    int reps = 15, threads = 1;
    if (bench_matmul_args(argc, argv, &reps, &threads)) return 2;
    sd_cpu_pool *pool = threads > 1 ? sd_cpu_pool_create(threads, 2880) : NULL;
    sd_cpu_pool_bind(pool);
    static uint16_t lut[255 * 16];
    sd_mxfp4_lut(lut);
    static const struct {
        const char *name;
        int rows, cols;
    } shapes[] = {{"gate_up", 5760, 2880}, {"down", 2880, 2880}};
    static const int ns[] = {1, 4, 16};
    uint64_t rng = 7;
    printf("isa %s, %d thread(s), median of %d calls\n", sd_cpu_matmul_isa() == SD_CPU_ISA_AVX2 ? "avx2" : "generic",
           threads, reps);
    printf("| matrix | n | BF16 us | MXFP4 us | MXFP4 / BF16 | BF16 GB/s | MXFP4 GB/s |\n|---|---|---|---|---|---|---|\n");
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int rows = shapes[s].rows, cols = shapes[s].cols, G = cols / 32;
        uint8_t *blk = malloc((size_t)rows * G * 16), *sc = malloc((size_t)rows * G);
        uint16_t *bf = malloc(sizeof(uint16_t) * (size_t)rows * cols);
        for (size_t i = 0; i < (size_t)rows * G * 16; i++) blk[i] = (uint8_t)(sd_test_splitmix64(&rng) >> 56);
        for (size_t i = 0; i < (size_t)rows * G; i++) sc[i] = (uint8_t)(120 + sd_test_splitmix64(&rng) % 8);
        for (int r = 0; r < rows; r++)
            sd_mxfp4_row(blk + (size_t)r * G * 16, sc + (size_t)r * G, G, lut, bf + (size_t)r * cols);
        const sd_tensor wq = {blk, SD_MXFP4, 2, {rows, cols}, sc}, wb = {bf, SD_BF16, 2, {rows, cols}, NULL};
        float *x = malloc(sizeof(float) * 16 * (size_t)cols), *y1 = malloc(sizeof(float) * 16 * (size_t)rows),
              *y2 = malloc(sizeof(float) * 16 * (size_t)rows), *buf = malloc(sizeof(float) * (size_t)cols);
        for (int i = 0; i < 16 * cols; i++) x[i] = (float)((int)(sd_test_splitmix64(&rng) % 2001) - 1000) / 1000.0f;
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
            const int n = ns[k];
            const double tb = bench_matmul_median_us(x, n, &wb, y1, buf, reps), tq = bench_matmul_median_us(x, n, &wq, y2, buf, reps);
            bad += memcmp(y1, y2, sizeof(float) * (size_t)n * rows) != 0;
            const double bytes_b = (double)rows * cols * 2, bytes_q = (double)rows * G * 17;
            printf("| %s %dx%d | %d | %.0f | %.0f | %.2f | %.1f | %.1f |\n", shapes[s].name, rows, cols, n, tb, tq, tq / tb,
                   bytes_b / tb / 1e3, bytes_q / tq / 1e3);
        }
        free(blk), free(sc), free(bf), free(x), free(y1), free(y2), free(buf);
    }
    sd_cpu_pool_bind(NULL);
    sd_cpu_pool_destroy(pool);
    if (bad) fprintf(stderr, "MXFP4 and BF16 outputs differ in %d cases\n", bad);
    return bad != 0;
}
