/* sd_cpu_dequant.c — F32/F16/BF16 weights to fp32 (see sd_cpu_dequant.h). */
#include "sd_cpu_dequant.h"

void sd_cpu_dequant(const sd_tensor *t, int64_t first, int64_t n, float *out) {
    if (t->dtype == SD_F16) {
        const uint16_t *p = (const uint16_t *)t->data + first;
        for (int64_t i = 0; i < n; i++) out[i] = sd_f16_to_f32(p[i]);
    } else if (t->dtype == SD_BF16) {
        const uint16_t *p = (const uint16_t *)t->data + first;
        for (int64_t i = 0; i < n; i++) out[i] = sd_bf16_to_f32(p[i]);
    } else {
        const float *p = (const float *)t->data + first;
        for (int64_t i = 0; i < n; i++) out[i] = p[i];
    }
}

const float *sd_cpu_row_f32(const sd_tensor *t, int64_t row, float *buf) {
    int64_t cols = sd_cpu_cols(t);
    if (t->dtype == SD_F32) return (const float *)t->data + row * cols;
    sd_cpu_dequant(t, row * cols, cols, buf);
    return buf;
}
