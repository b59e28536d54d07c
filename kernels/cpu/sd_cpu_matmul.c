/* sd_cpu_matmul.c — linear layers y = x W^T + b (see sd_cpu_matmul.h). */
#include "sd_cpu_matmul.h"
#include "sd_cpu_dequant.h"

void sd_cpu_matmul(const float *x, int32_t n, const sd_tensor *w, const sd_tensor *bias, float *y, float *rowbuf) {
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
    int64_t rows = w->shape[0], cols = w->shape[1];
    int has_bias = bias && bias->data;
    for (int64_t o = 0; o < rows; o++) {
        const float *wr = sd_cpu_row_f32(w, o, rowbuf);
        double b = has_bias ? (double)sd_cpu_elem(bias, o) : 0.0;
        for (int32_t t = 0; t < n; t++)
            if (y[t]) y[t][o] = (float)(sd_cpu_dot(wr, x + (int64_t)t * cols, cols) + b);
    }
}
