/* bench_matmul_int4.c — the CPU linear layer on GPTQ / AWQ 4-bit weights (SD_INT4: codes two per
 * byte, an fp16 scale and a zero point per 128 input columns, decoded as each row chunk is used)
 * against the same values stored as F32 (bitwise the same products: checked) and a BF16 matrix of
 * the same shape (the unquantized checkpoint's dtype, ~3.8x INT4's bytes), in one run, on
 * Llama-3-8B's MLP shapes (intermediate 14336, hidden 4096):
 *   gate/up  [14336, 4096]   down  [4096, 14336]
 * for n = 1, 4, 8 and 16 tokens, 1 thread or --threads N, and the same gate matrix with a GPTQ
 * act-order g_idx (each column's group from a permutation: scales and zeros gathered per lane) and with
 * 8-bit codes (SD_INT8: GPTQ-Int8, W8A16; the INT4 columns then hold INT8's times). Prints the
 * median of REPS timed calls (after a warm-up) in microseconds and the ratios INT4 / BF16 and
 * INT4 / F32; fails when INT4 and F32 differ.
 *
 * Run: build/bench/cpu/bench_matmul_int4 [--reps N] [--threads N] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "bench_matmul_util.h"
#include "sd_cpu_dequant.h"
#include "sd_cpu_pool.h"
#include "sd_int4.h"
#include "sd_math.h"
#include "sd_test_util.h"

#define GROUP 128

/* A random [rows, cols] GPTQ (v2: zeros as stored) projection of bits-bit codes in a buffer of sd_int4_bytes. */
static void *make_int4(int bits, int rows, int cols, int act_order, uint64_t *rng, sd_tensor *w) {
    const int G = cols / GROUP, per = 32 / bits;
    uint32_t *qw = malloc(sizeof(uint32_t) * (size_t)rows * (size_t)(cols / per));
    uint32_t *qz = malloc(sizeof(uint32_t) * (size_t)G * (size_t)(rows / per));
    uint16_t *sc = malloc(sizeof(uint16_t) * (size_t)G * (size_t)rows);
    int32_t *gi = malloc(sizeof(int32_t) * (size_t)cols);
    void *buf = calloc(1, sd_int4_bytes(bits, rows, cols, GROUP));
    for (size_t i = 0; i < (size_t)rows * (size_t)(cols / per); i++) qw[i] = (uint32_t)sd_test_splitmix64(rng);
    for (size_t i = 0; i < (size_t)G * (size_t)(rows / per); i++) qz[i] = (uint32_t)sd_test_splitmix64(rng);
    for (size_t i = 0; i < (size_t)G * (size_t)rows; i++)
        sc[i] = sd_f32_to_f16(1e-3f * (float)(1 + (int)(sd_test_splitmix64(rng) % 100)));
    for (int i = 0; i < cols; i++) gi[i] = i;
    for (int i = cols - 1; act_order && i > 0; i--) { /* a permutation: each group keeps GROUP columns */
        const int j = (int)(sd_test_splitmix64(rng) % (uint64_t)(i + 1)), t = gi[i];
        gi[i] = gi[j], gi[j] = t;
    }
    for (int i = 0; i < cols; i++) gi[i] /= GROUP;
    const sd_int4_src src = {SD_INT4_GPTQ_V2, bits, rows, cols, GROUP, (const uint8_t *)qw, (const uint8_t *)qz,
                             (const uint8_t *)sc, SD_F16, (const uint8_t *)gi};
    char why[160];
    if (!buf || !sd_int4_repack(&src, buf, w, why, sizeof why)) free(buf), buf = NULL;
    free(qw), free(qz), free(sc), free(gi);
    return buf;
}

int main(int argc, char **argv) {
    int reps = 9, threads = 1;
    if (bench_matmul_args(argc, argv, &reps, &threads)) return 2;
    sd_cpu_pool *pool = threads > 1 ? sd_cpu_pool_create(threads, 14336) : NULL;
    sd_cpu_pool_bind(pool);
    static const struct {
        const char *name;
        int rows, cols, act_order, bits;
    } shapes[] = {{"gate", 14336, 4096, 0, 4},
                  {"down", 4096, 14336, 0, 4},
                  {"gate act-order", 14336, 4096, 1, 4},
                  {"gate INT8", 14336, 4096, 0, 8}};
    static const int ns[] = {1, 4, 8, 16};
    uint64_t rng = 13;
    printf("isa %s, %d thread(s), median of %d calls\n", sd_cpu_matmul_isa() == SD_CPU_ISA_AVX2 ? "avx2" : "generic",
           threads, reps);
    printf("| matrix | n | BF16 us | F32 us | INT4 us | INT4 / BF16 | INT4 / F32 |\n|---|---|---|---|---|---|---|\n");
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int rows = shapes[s].rows, cols = shapes[s].cols;
        const size_t nw = (size_t)rows * cols;
        sd_tensor w4;
        void *q = make_int4(shapes[s].bits, rows, cols, shapes[s].act_order, &rng, &w4);
        float *w32 = malloc(sizeof(float) * nw);
        uint16_t *bf = malloc(sizeof(uint16_t) * nw);
        float *x = malloc(sizeof(float) * 16 * (size_t)cols), *y1 = malloc(sizeof(float) * 16 * (size_t)rows),
              *y2 = malloc(sizeof(float) * 16 * (size_t)rows), *buf = malloc(sizeof(float) * (size_t)cols);
        if (!q || !w32 || !bf || !x || !y1 || !y2 || !buf) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        for (size_t i = 0; i < nw; i++) bf[i] = (uint16_t)(sd_test_splitmix64(&rng) >> 48) & 0x3fffu;
        for (int r = 0; r < rows; r++) (void)sd_cpu_row_f32(&w4, r, w32 + (size_t)r * cols);
        const sd_tensor wf = {w32, SD_F32, 2, {rows, cols}, NULL}, wb = {bf, SD_BF16, 2, {rows, cols}, NULL};
        for (int i = 0; i < 16 * cols; i++) x[i] = (float)((int)(sd_test_splitmix64(&rng) % 2001) - 1000) / 1000.0f;
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
            const int n = ns[k];
            const double tb = bench_matmul_median_us(x, n, &wb, y1, buf, reps);
            const double tf = bench_matmul_median_us(x, n, &wf, y1, buf, reps);
            const double tq = bench_matmul_median_us(x, n, &w4, y2, buf, reps);
            bad += memcmp(y1, y2, sizeof(float) * (size_t)n * rows) != 0;
            printf("| %s %dx%d | %d | %.0f | %.0f | %.0f | %.2f | %.2f |\n", shapes[s].name, rows, cols, n, tb, tf, tq,
                   tq / tb, tq / tf);
        }
        free(q), free(w32), free(bf), free(x), free(y1), free(y2), free(buf);
    }
    sd_cpu_pool_bind(NULL);
    sd_cpu_pool_destroy(pool);
    if (bad) fprintf(stderr, "INT4 and F32 outputs differ in %d cases\n", bad);
    return bad != 0;
}
