/* sd_cpu_matmul.c — linear layers y = x W^T + b (see sd_cpu_matmul.h). */
#include "sd_cpu_matmul.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "sd_cpu_dequant.h"
#include "sd_cpu_matmul_x86.h"

/* -1: not chosen yet; else an sd_cpu_isa. Chosen once (a race only repeats the same choice). */
static atomic_int g_isa = -1;

static int isa_detect(void) {
    const char *env = getenv("SPECDEC_CPU_ISA");
    if (env && !strcmp(env, "generic")) return SD_CPU_ISA_GENERIC;
    return sd_cpu_x86_avx2_supported() ? SD_CPU_ISA_AVX2 : SD_CPU_ISA_GENERIC;
}

sd_cpu_isa sd_cpu_matmul_isa(void) {
    int isa = atomic_load_explicit(&g_isa, memory_order_relaxed);
    if (isa < 0) {
        isa = isa_detect();
        atomic_store_explicit(&g_isa, isa, memory_order_relaxed);
    }
    return (sd_cpu_isa)isa;
}

int sd_cpu_matmul_set_isa(sd_cpu_isa isa) {
    if (isa == SD_CPU_ISA_AVX2 && !sd_cpu_x86_avx2_supported()) return -1;
    atomic_store_explicit(&g_isa, (int)isa, memory_order_relaxed);
    return 0;
}

/* The AVX2 path over tokens whose output row is not NULL (yrows) or y + t * rows: ranges
 * checked here (sd_cpu_sanitize.h), then chunks of SD_CPU_X86_TOKEN_CHUNK tokens. */
static void matmul_x86(const float *x, int32_t n, const sd_tensor *w, const sd_tensor *bias, float *y,
                       float *const *yrows) {
    sd_x86_mm m = {w->data, w->dtype, w->shape[0], w->shape[1], bias && bias->data ? bias : NULL};
    if (m.rows <= 0 || n <= 0) return;
    sd_cpu_check_read(w->data, (size_t)m.rows * (size_t)m.cols * sd_dtype_size(w->dtype));
    if (m.bias) sd_cpu_check_read(m.bias->data, (size_t)m.rows * sd_dtype_size(m.bias->dtype));
    const float *xs[SD_CPU_X86_TOKEN_CHUNK];
    float *ys[SD_CPU_X86_TOKEN_CHUNK];
    int k = 0;
    for (int32_t t = 0; t < n; t++) {
        float *yt = yrows ? yrows[t] : y + (int64_t)t * m.rows;
        if (!yt) continue;
        xs[k] = x + (int64_t)t * m.cols;
        ys[k] = yt;
        if (m.cols > 0) sd_cpu_check_read(xs[k], (size_t)m.cols * sizeof(float));
        sd_cpu_check_write(yt, (size_t)m.rows * sizeof(float));
        if (++k == SD_CPU_X86_TOKEN_CHUNK) sd_cpu_matmul_x86(&m, xs, ys, k), k = 0;
    }
    if (k) sd_cpu_matmul_x86(&m, xs, ys, k);
}

void sd_cpu_matmul(const float *x, int32_t n, const sd_tensor *w, const sd_tensor *bias, float *y, float *rowbuf) {
    if (sd_cpu_matmul_isa() == SD_CPU_ISA_AVX2) {
        matmul_x86(x, n, w, bias, y, NULL);
        return;
    }
    int64_t rows = w->shape[0], cols = w->shape[1];
    int has_bias = bias && bias->data;
    for (int64_t o = 0; o < rows; o++) {
        const float *wr = sd_cpu_row_f32(w, o, rowbuf);
        double b = has_bias ? (double)sd_cpu_elem(bias, o) : 0.0;
        for (int32_t t = 0; t < n; t++) y[(int64_t)t * rows + o] = (float)(sd_cpu_dot(wr, x + (int64_t)t * cols, cols) + b);
    }
}

void sd_cpu_matmul_rows(const float *x, int32_t n, const sd_tensor *w, const sd_tensor *bias, float *const *y,
                        float *rowbuf) {
    if (sd_cpu_matmul_isa() == SD_CPU_ISA_AVX2) {
        matmul_x86(x, n, w, bias, NULL, y);
        return;
    }
    int64_t rows = w->shape[0], cols = w->shape[1];
    int has_bias = bias && bias->data;
    for (int64_t o = 0; o < rows; o++) {
        const float *wr = sd_cpu_row_f32(w, o, rowbuf);
        double b = has_bias ? (double)sd_cpu_elem(bias, o) : 0.0;
        for (int32_t t = 0; t < n; t++)
            if (y[t]) y[t][o] = (float)(sd_cpu_dot(wr, x + (int64_t)t * cols, cols) + b);
    }
}
