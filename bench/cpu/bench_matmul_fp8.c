/* bench_matmul_fp8.c — the CPU linear layer on block-scaled FP8 weights (quantization_config "fp8":
 * float8_e4m3fn codes and a float scale per 128 x 128 block, SD_FP8, decoded as each row is used)
 * against the same values stored as F32 (bitwise the same products: checked) and a BF16 matrix of
 * the same shape (the unquantized checkpoint's dtype, 2x FP8's bytes), in one run, on DeepSeek-V3's
 * expert shapes (moe_intermediate 2048, hidden 7168):
 *   gate/up  [2048, 7168]   down  [7168, 2048]
 * for n = 1, 4 and 16 tokens, 1 thread or --threads N. Prints the median of REPS timed calls (after a
 * warm-up) in microseconds and the ratios FP8 / BF16 and FP8 / F32; fails when FP8 and F32 differ.
 *
 * Run: build/bench/cpu/bench_matmul_fp8 [--reps N] [--threads N] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "bench_matmul_util.h"
#include "sd_cpu_dequant.h"
#include "sd_cpu_matmul.h"
#include "sd_cpu_pool.h"
#include "sd_test_util.h"

#define BLK 128

int main(int argc, char **argv) {
    int reps = 9, threads = 1;
    if (bench_matmul_args(argc, argv, &reps, &threads)) return 2;
    sd_cpu_pool *pool = threads > 1 ? sd_cpu_pool_create(threads, 7168) : NULL;
    sd_cpu_pool_bind(pool);
    static const struct {
        const char *name;
        int rows, cols;
    } shapes[] = {{"gate", 2048, 7168}, {"down", 7168, 2048}};
    static const int ns[] = {1, 4, 16};
    uint64_t rng = 11;
    printf("isa %s, %d thread(s), median of %d calls\n", sd_cpu_matmul_isa() == SD_CPU_ISA_AVX2 ? "avx2" : "generic",
           threads, reps);
    printf("| matrix | n | BF16 us | F32 us | FP8 us | FP8 / BF16 | FP8 / F32 |\n|---|---|---|---|---|---|---|\n");
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int rows = shapes[s].rows, cols = shapes[s].cols, sr = rows / BLK, sc = cols / BLK;
        const size_t nw = (size_t)rows * cols;
        uint8_t *codes = malloc(nw);
        float *scales = malloc(sizeof(float) * (size_t)(2 + sr * sc)), *w32 = malloc(sizeof(float) * nw);
        uint16_t *bf = malloc(sizeof(uint16_t) * nw);
        for (size_t i = 0; i < nw; i++) {
            uint8_t b = (uint8_t)(sd_test_splitmix64(&rng) >> 56);
            codes[i] = (b & 0x7f) == 0x7f ? (uint8_t)(b ^ 1) : b; /* no NaN codes */
            bf[i] = (uint16_t)(sd_test_splitmix64(&rng) >> 48) & 0x3fffu; /* small finite BF16 values */
        }
        scales[0] = BLK, scales[1] = BLK;
        for (int i = 0; i < sr * sc; i++) scales[2 + i] = 1e-3f * (float)(1 + (int)(sd_test_splitmix64(&rng) % 100));
        const sd_tensor w8 = {codes, SD_FP8, 2, {rows, cols}, (const uint8_t *)(const void *)scales};
        for (int r = 0; r < rows; r++) (void)sd_cpu_row_f32(&w8, r, w32 + (size_t)r * cols);
        const sd_tensor wf = {w32, SD_F32, 2, {rows, cols}, NULL}, wb = {bf, SD_BF16, 2, {rows, cols}, NULL};
        float *x = malloc(sizeof(float) * 16 * (size_t)cols), *y1 = malloc(sizeof(float) * 16 * (size_t)rows),
              *y2 = malloc(sizeof(float) * 16 * (size_t)rows), *buf = malloc(sizeof(float) * (size_t)cols);
        for (int i = 0; i < 16 * cols; i++) x[i] = (float)((int)(sd_test_splitmix64(&rng) % 2001) - 1000) / 1000.0f;
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
            const int n = ns[k];
            const double tb = bench_matmul_median_us(x, n, &wb, y1, buf, reps), tf = bench_matmul_median_us(x, n, &wf, y1, buf, reps);
            const double tq = bench_matmul_median_us(x, n, &w8, y2, buf, reps);
            bad += memcmp(y1, y2, sizeof(float) * (size_t)n * rows) != 0;
            printf("| %s %dx%d | %d | %.0f | %.0f | %.0f | %.2f | %.2f |\n", shapes[s].name, rows, cols, n, tb, tf, tq,
                   tq / tb, tq / tf);
        }
        free(codes), free(scales), free(w32), free(bf), free(x), free(y1), free(y2), free(buf);
    }
    sd_cpu_pool_bind(NULL);
    sd_cpu_pool_destroy(pool);
    if (bad) fprintf(stderr, "FP8 and F32 outputs differ in %d cases\n", bad);
    return bad != 0;
}
