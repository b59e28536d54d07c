/* sd_cpu_rope.c — rotary position embedding (see sd_cpu_rope.h). */
#include <math.h>

#include "sd_cpu_rope.h"

void sd_cpu_rope_inv_freq(const sd_rope_params *rp, double *inv_freq) {
    for (int32_t i = 0; i < rp->head_dim / 2; i++) inv_freq[i] = sd_rope_inv_freq(rp, i);
}

void sd_cpu_rope_inv_freq_cfg(const sd_config *c, double *inv_freq) {
    sd_rope_params rp = {0};
    rp.head_dim = c->head_dim;
    rp.theta = (double)c->rope_theta;
    rp.llama3 = c->rope_type == SD_ROPE_LLAMA3;
    rp.factor = (double)c->rope_factor;
    rp.low_freq_factor = (double)c->rope_low_freq_factor;
    rp.high_freq_factor = (double)c->rope_high_freq_factor;
    rp.original_max_pos = (double)c->rope_original_max_pos;
    sd_cpu_rope_inv_freq(&rp, inv_freq);
}

void sd_cpu_rope_table(const double *inv_freq, int32_t half, int32_t pos, float *cos_out, float *sin_out) {
    for (int32_t i = 0; i < half; i++) {
        double a = (double)pos * inv_freq[i];
        cos_out[i] = (float)cos(a);
        sin_out[i] = (float)sin(a);
    }
}

void sd_cpu_rope(float *x, int32_t n_heads, int32_t head_dim, const float *cos_t, const float *sin_t) {
    int32_t half = head_dim / 2;
    for (int32_t h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * head_dim;
        for (int32_t i = 0; i < half; i++) {
            double a = v[i], b = v[i + half], c = cos_t[i], s = sin_t[i];
            v[i] = (float)(a * c - b * s);
            v[i + half] = (float)(b * c + a * s);
        }
    }
}
