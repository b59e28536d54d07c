/* sd_cpu_attention.c — causal GQA attention of one query token (see sd_cpu_attention.h). */
#include <math.h>

#include "sd_cpu_attention.h"
#include "sd_cpu_matmul.h"
#include "sd_math.h"

void sd_cpu_attention_keys(const float *q, const float *k_cache, const float *v_cache, const int64_t *keys,
                           int32_t n_keys, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, double *scores,
                           double *acc, float *out) {
    sd_cpu_attention_keys_opt(q, k_cache, v_cache, keys, n_keys, n_heads, n_kv_heads, head_dim, NULL, scores, acc,
                              out);
}

void sd_cpu_attention_keys_opt(const float *q, const float *k_cache, const float *v_cache, const int64_t *keys,
                               int32_t n_keys, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                               const sd_cpu_attn_opts *opt, double *scores, double *acc, float *out) {
    sd_cpu_attention_heads(q, k_cache, v_cache, keys, n_keys, n_heads, n_kv_heads, head_dim, opt, 0, n_heads, 1, scores,
                           acc, out);
}

void sd_cpu_attention_heads(const float *q, const float *k_cache, const float *v_cache, const int64_t *keys,
                            int32_t n_keys, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                            const sd_cpu_attn_opts *opt, int32_t h0, int32_t h1, int32_t h_step, double *scores,
                            double *acc, float *out) {
    int32_t group = n_heads / n_kv_heads;
    int64_t row = (int64_t)n_kv_heads * head_dim;
    double scale = opt && opt->scale > 0.0 ? opt->scale : 1.0 / sqrt((double)head_dim);
    const double cap = opt ? opt->softcap : 0.0;
    const float *sinks = opt ? opt->sinks : NULL;
    for (int32_t h = h0; h < h1; h += h_step) {
        const float *qh = q + (int64_t)h * head_dim;
        int64_t off = (int64_t)(h / group) * head_dim;
        double mx = sinks ? (double)sinks[h] : -INFINITY;
        for (int32_t j = 0; j < n_keys; j++) {
            const int64_t kr = keys ? keys[j] : j;
            scores[j] = scale * sd_cpu_dot(qh, k_cache + kr * row + off, head_dim);
            if (cap > 0.0) scores[j] = sd_softcap(scores[j], cap);
            if (scores[j] > mx) mx = scores[j];
        }
        double z = sinks ? exp((double)sinks[h] - mx) : 0.0;
        for (int32_t c = 0; c < head_dim; c++) acc[c] = 0.0;
        for (int32_t j = 0; j < n_keys; j++) {
            double w = exp(scores[j] - mx);
            z += w;
            const int64_t kr = keys ? keys[j] : j;
            const float *vj = v_cache + kr * row + off;
            for (int32_t c = 0; c < head_dim; c++) acc[c] += w * (double)vj[c];
        }
        float *oh = out + (int64_t)h * head_dim;
        for (int32_t c = 0; c < head_dim; c++) oh[c] = (float)(acc[c] / z);
    }
}

void sd_cpu_attention(const float *q, const float *k_cache, const float *v_cache, int32_t n_keys, int32_t n_heads,
                      int32_t n_kv_heads, int32_t head_dim, double *scores, double *acc, float *out) {
    sd_cpu_attention_keys(q, k_cache, v_cache, NULL, n_keys, n_heads, n_kv_heads, head_dim, scores, acc, out);
}
