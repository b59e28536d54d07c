/* sd_cpu_dequant.c — F32/F16/BF16 weights to fp32 (see sd_cpu_dequant.h). */
#include "sd_cpu_dequant.h"
#include "sd_cpu_sanitize.h"

/* The conversion loop, uninstrumented under the sanitizers: sd_cpu_dequant checks its two ranges
 * (sd_cpu_sanitize.h). */
static SD_CPU_UNINSTRUMENTED void dequant_loop(sd_dtype dtype, const void *src, int64_t n, float *out) {
    if (dtype == SD_F16) {
        const uint16_t *p = (const uint16_t *)src;
        for (int64_t i = 0; i < n; i++) out[i] = sd_f16_to_f32(p[i]);
    } else if (dtype == SD_BF16) {
        const uint16_t *p = (const uint16_t *)src;
        for (int64_t i = 0; i < n; i++) out[i] = sd_bf16_to_f32(p[i]);
    } else {
        const float *p = (const float *)src;
        for (int64_t i = 0; i < n; i++) out[i] = p[i];
    }
}

void sd_cpu_dequant(const sd_tensor *t, int64_t first, int64_t n, float *out) {
    size_t elem = t->dtype == SD_F16 || t->dtype == SD_BF16 ? sizeof(uint16_t) : sizeof(float); /* as the loop reads */
    const char *src = (const char *)t->data + (size_t)first * elem;
    if (n > 0) {
        sd_cpu_check_read(src, (size_t)n * elem);
        sd_cpu_check_write(out, (size_t)n * sizeof(float));
    }
    dequant_loop(t->dtype, src, n, out);
}

const float *sd_cpu_row_f32(const sd_tensor *t, int64_t row, float *buf) {
    int64_t cols = sd_cpu_cols(t);
    if (t->dtype == SD_F32) return (const float *)t->data + row * cols;
    sd_cpu_dequant(t, row * cols, cols, buf);
    return buf;
}
