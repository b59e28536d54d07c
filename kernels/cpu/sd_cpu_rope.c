/* sd_cpu_rope.c — rotary position embedding (see sd_cpu_rope.h). */
#include <math.h>

#include "sd_cpu_rope.h"

void sd_cpu_rope_inv_freq(const sd_rope_params *rp, double *inv_freq) {
    for (int32_t i = 0; i < rp->head_dim / 2; i++) inv_freq[i] = sd_rope_inv_freq(rp, i);
}

void sd_cpu_rope_spec_inv_freq(const sd_rope_spec *rs, double *inv_freq) {
    for (int32_t i = 0; i < rs->p.head_dim / 2; i++) inv_freq[i] = sd_rope_spec_inv_freq(rs, i);
}

void sd_cpu_rope_table(const double *inv_freq, int32_t half, int32_t pos, float *cos_out, float *sin_out) {
    for (int32_t i = 0; i < half; i++) {
        double a = (double)pos * inv_freq[i];
        cos_out[i] = (float)cos(a);
        sin_out[i] = (float)sin(a);
    }
}

void sd_cpu_rope_table_scaled(const double *inv_freq, int32_t half, int32_t pos, double scale, float *cos_out,
                              float *sin_out) {
    if (scale == 1.0) {
        sd_cpu_rope_table(inv_freq, half, pos, cos_out, sin_out);
        return;
    }
    for (int32_t i = 0; i < half; i++) {
        double a = (double)pos * inv_freq[i];
        cos_out[i] = (float)(cos(a) * scale);
        sin_out[i] = (float)(sin(a) * scale);
    }
}

void sd_cpu_rope(float *x, int32_t n_heads, int32_t head_dim, const float *cos_t, const float *sin_t) {
    sd_cpu_rope_part(x, n_heads, head_dim, head_dim, cos_t, sin_t);
}

/* Both pair conventions through core/sd_math.h's sd_rope_pair / sd_rope_turn (the CUDA kernel's). */
static void cpu_rope_pairs(float *x, int32_t n_heads, int32_t head_dim, int32_t rot_dim, int interleaved,
                           const float *cos_t, const float *sin_t) {
    const int32_t half = rot_dim / 2;
    for (int32_t h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * head_dim;
        for (int32_t i = 0; i < half; i++) {
            int32_t i0, i1;
            sd_rope_pair(i, half, interleaved, &i0, &i1);
            sd_rope_turn(v[i0], v[i1], cos_t[i], sin_t[i], &v[i0], &v[i1]);
        }
    }
}

void sd_cpu_rope_part(float *x, int32_t n_heads, int32_t head_dim, int32_t rot_dim, const float *cos_t,
                      const float *sin_t) {
    cpu_rope_pairs(x, n_heads, head_dim, rot_dim, 0, cos_t, sin_t);
}

void sd_cpu_rope_part_interleaved(float *x, int32_t n_heads, int32_t head_dim, int32_t rot_dim, const float *cos_t,
                                  const float *sin_t) {
    cpu_rope_pairs(x, n_heads, head_dim, rot_dim, 1, cos_t, sin_t);
}
