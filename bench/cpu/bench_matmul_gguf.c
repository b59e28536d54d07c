/* bench_matmul_gguf.c — the CPU linear layer on a GGUF file's block-quantized weights (models/sd_ggml.h:
 * Q4_K and Q6_K, the two types of a Q4_K_M file, and Q8_0; repacked into SD_INT4 / SD_INT8 with a scale,
 * zero and, for Q4_K, a bias per sub-block, decoded as each row chunk is used) against the same values
 * stored as F32 (bitwise the same products: checked) and a BF16 matrix of the same shape, in one run, on
 * Llama-3-8B's gate projection [14336, 4096], for n = 1, 4, 8 and 16 tokens, 1 thread or --threads N.
 * Prints the median of REPS timed calls (after a warm-up) in microseconds, the ratios to BF16 and F32,
 * and the bytes per weight in memory (the file's and the repacked ones); fails when a type and F32
 * differ.
 *
 * Run: build/bench/cpu/bench_matmul_gguf [--reps N] [--threads N] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "bench_matmul_util.h"
#include "sd_cpu_dequant.h"
#include "sd_cpu_pool.h"
#include "sd_ggml.h"
#include "sd_gguf.h"
#include "sd_math.h"
#include "sd_test_util.h"

/* Random blocks of `type` for a [rows, cols] matrix (fp16 scales set to ordinary values), repacked. */
static void *make_gguf(uint32_t type, int rows, int cols, uint64_t *rng, sd_tensor *w) {
    const sd_ggml_type_info ti = sd_ggml_type_info_of(type);
    const size_t nb = (size_t)rows * (size_t)(cols / (int)ti.block), bytes = nb * ti.bytes;
    uint8_t *src = malloc(bytes);
    void *buf = calloc(1, sd_ggml_bytes(type, rows, cols));
    if (!src || !buf) return free(src), free(buf), NULL;
    for (size_t i = 0; i < bytes; i++) src[i] = (uint8_t)sd_test_splitmix64(rng);
    const int off0 = type == SD_GGML_Q6_K ? 208 : 0, two = type == SD_GGML_Q4_K; /* d (and dmin) */
    for (size_t b = 0; b < nb; b++)
        for (int k = 0; k <= two; k++) {
            const uint16_t h = sd_f32_to_f16(1e-4f * (float)(1 + (int)(sd_test_splitmix64(rng) % 100)));
            memcpy(src + b * ti.bytes + off0 + 2 * k, &h, 2);
        }
    char why[160];
    if (!sd_ggml_repack(type, src, rows, cols, 0, buf, w, why, sizeof why)) free(buf), buf = NULL;
    free(src);
    return buf;
}

int main(int argc, char **argv) {
    int reps = 9, threads = 1;
    if (bench_matmul_args(argc, argv, &reps, &threads)) return 2;
    sd_cpu_pool *pool = threads > 1 ? sd_cpu_pool_create(threads, 14336) : NULL;
    sd_cpu_pool_bind(pool);
    static const uint32_t types[] = {SD_GGML_Q4_K, SD_GGML_Q6_K, SD_GGML_Q8_0};
    static const int ns[] = {1, 4, 8, 16};
    const int rows = 14336, cols = 4096;
    const size_t nw = (size_t)rows * cols;
    uint64_t rng = 29;
    printf("isa %s, %d thread(s), median of %d calls, gate [%d, %d]\n",
           sd_cpu_matmul_isa() == SD_CPU_ISA_AVX2 ? "avx2" : "generic", threads, reps, rows, cols);
    printf("| type | bytes/weight file, memory | n | BF16 us | F32 us | type us | type / BF16 | type / F32 |\n"
           "|---|---|---|---|---|---|---|---|\n");
    int bad = 0;
    float *w32 = malloc(sizeof(float) * nw), *x = malloc(sizeof(float) * 16 * (size_t)cols);
    float *y1 = malloc(sizeof(float) * 16 * (size_t)rows), *y2 = malloc(sizeof(float) * 16 * (size_t)rows);
    float *buf = malloc(sizeof(float) * (size_t)cols);
    uint16_t *bf = malloc(sizeof(uint16_t) * nw);
    if (!w32 || !x || !y1 || !y2 || !buf || !bf) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < nw; i++) bf[i] = (uint16_t)(sd_test_splitmix64(&rng) >> 48) & 0x3fffu;
    for (int i = 0; i < 16 * cols; i++) x[i] = (float)((int)(sd_test_splitmix64(&rng) % 2001) - 1000) / 1000.0f;
    const sd_tensor wb = {bf, SD_BF16, 2, {rows, cols}, NULL};
    for (size_t s = 0; s < sizeof types / sizeof *types; s++) {
        const sd_ggml_type_info ti = sd_ggml_type_info_of(types[s]);
        sd_tensor wq;
        void *q = make_gguf(types[s], rows, cols, &rng, &wq);
        if (!q) {
            fprintf(stderr, "%s: repack failed\n", ti.name);
            return 1;
        }
        for (int r = 0; r < rows; r++) (void)sd_cpu_row_f32(&wq, r, w32 + (size_t)r * cols);
        const sd_tensor wf = {w32, SD_F32, 2, {rows, cols}, NULL};
        const double file_b = (double)ti.bytes / ti.block, mem_b = (double)sd_ggml_bytes(types[s], rows, cols) / (double)nw;
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
            const int n = ns[k];
            const double tb = bench_matmul_median_us(x, n, &wb, y1, buf, reps);
            const double tf = bench_matmul_median_us(x, n, &wf, y1, buf, reps);
            const double tq = bench_matmul_median_us(x, n, &wq, y2, buf, reps);
            bad += memcmp(y1, y2, sizeof(float) * (size_t)n * rows) != 0;
            printf("| %s | %.3f, %.3f | %d | %.0f | %.0f | %.0f | %.2f | %.2f |\n", ti.name, file_b, mem_b, n, tb, tf,
                   tq, tq / tb, tq / tf);
        }
        free(q);
    }
    free(w32), free(x), free(y1), free(y2), free(buf), free(bf);
    sd_cpu_pool_bind(NULL);
    sd_cpu_pool_destroy(pool);
    if (bad) fprintf(stderr, "block-quantized and F32 outputs differ in %d cases\n", bad);
    return bad != 0;
}
