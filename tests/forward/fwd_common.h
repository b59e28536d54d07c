/* fwd_common.h — helpers shared by the forward tests (header-only): a synthetic
 * in-memory specdec_model with random weights (no loader needed, any dtype), a
 * deterministic RNG, a chunked runner forward, and logits comparison. */
#ifndef FWD_COMMON_H
#define FWD_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_model.h"
#include "sd_math.h"
#include "sd_runner.h"
#include "sd_test_util.h"

/* splitmix64: fixed-seed, platform-independent. */
static inline uint64_t fwd_rng_next(uint64_t *s) { return sd_test_splitmix64(s); }
static inline double fwd_rng_uniform(uint64_t *s) { return (double)(fwd_rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }
/* Approximately standard normal (sum of 4 uniforms, rescaled): enough for weights. */
static inline double fwd_rng_normal(uint64_t *s) {
    double a = 0;
    for (int i = 0; i < 4; i++) a += fwd_rng_uniform(s);
    return (a - 2.0) * 1.7320508075688772;
}

/* A tensor of the given dtype filled with mean + std * normal. */
static inline void fwd_fill(sd_tensor *t, sd_dtype dt, int64_t rows, int64_t cols, double mean, double std,
                            uint64_t *rng) {
    int64_t n = rows * (cols ? cols : 1);
    void *p = malloc((size_t)n * sd_dtype_size(dt));
    for (int64_t i = 0; i < n; i++) {
        float v = (float)(mean + std * fwd_rng_normal(rng));
        if (dt == SD_F32) ((float *)p)[i] = v;
        else if (dt == SD_F16) ((uint16_t *)p)[i] = sd_f32_to_f16(v);
        else ((uint16_t *)p)[i] = sd_f32_to_bf16(v);
    }
    t->data = p;
    t->dtype = dt;
    t->ndim = cols ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols ? cols : 1;
}

/* A synthetic model of cfg's shape (cfg fields: arch, vocab_size, hidden_size,
 * intermediate_size, n_layers, n_heads, n_kv_heads, head_dim, rms_norm_eps, rope_*,
 * tie_word_embeddings, attention_bias). Free with fwd_model_free. */
static inline struct specdec_model *fwd_model_make(const sd_config *cfg, sd_dtype dt, uint64_t seed) {
    struct specdec_model *m = calloc(1, sizeof *m);
    uint64_t rng = seed;
    m->w.cfg = *cfg;
    m->w.dtype = dt;
    int64_t H = cfg->hidden_size, I = cfg->intermediate_size, V = cfg->vocab_size;
    int64_t Q = (int64_t)cfg->n_heads * cfg->head_dim, KV = (int64_t)cfg->n_kv_heads * cfg->head_dim;
    fwd_fill(&m->w.tok_embd, dt, V, H, 0.0, 0.4, &rng);
    m->w.layers = calloc((size_t)cfg->n_layers, sizeof *m->w.layers);
    for (int32_t l = 0; l < cfg->n_layers; l++) {
        sd_layer *L = &m->w.layers[l];
        fwd_fill(&L->attn_norm, dt, H, 0, 1.0, 0.1, &rng);
        fwd_fill(&L->wq, dt, Q, H, 0.0, 1.2 / sqrt((double)H), &rng);
        fwd_fill(&L->wk, dt, KV, H, 0.0, 1.2 / sqrt((double)H), &rng);
        fwd_fill(&L->wv, dt, KV, H, 0.0, 0.8 / sqrt((double)H), &rng);
        if (cfg->attention_bias) {
            fwd_fill(&L->bq, dt, Q, 0, 0.0, 0.1, &rng);
            fwd_fill(&L->bk, dt, KV, 0, 0.0, 0.1, &rng);
            fwd_fill(&L->bv, dt, KV, 0, 0.0, 0.1, &rng);
        }
        fwd_fill(&L->wo, dt, H, Q, 0.0, 0.8 / sqrt((double)Q), &rng);
        if (cfg->o_bias) fwd_fill(&L->bo, dt, H, 0, 0.0, 0.1, &rng);
        fwd_fill(&L->ffn_norm, dt, H, 0, 1.0, 0.1, &rng);
        fwd_fill(&L->w_gate, dt, I, H, 0.0, 1.5 / sqrt((double)H), &rng);
        fwd_fill(&L->w_up, dt, I, H, 0.0, 1.5 / sqrt((double)H), &rng);
        fwd_fill(&L->w_down, dt, H, I, 0.0, 0.8 / sqrt((double)I), &rng);
    }
    fwd_fill(&m->w.out_norm, dt, H, 0, 1.0, 0.1, &rng);
    if (cfg->tie_word_embeddings) m->w.lm_head = m->w.tok_embd;
    else fwd_fill(&m->w.lm_head, dt, V, H, 0.0, 2.0 / sqrt((double)H), &rng);
    return m;
}

static inline void fwd_model_free(struct specdec_model *m) {
    if (!m) return;
    for (int32_t l = 0; l < m->w.cfg.n_layers; l++) {
        sd_layer *L = &m->w.layers[l];
        const sd_tensor *ts[] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->bq, &L->bk,
                                 &L->bv, &L->wo, &L->bo, &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) free((void *)ts[i]->data);
    }
    free(m->w.layers);
    free((void *)m->w.out_norm.data);
    if (m->w.lm_head.data != m->w.tok_embd.data) free((void *)m->w.lm_head.data);
    free((void *)m->w.tok_embd.data);
    free(m);
}

/* Run tokens[0..n) in chunks of k from position 0, logits into out [n, V]. */
static inline specdec_status fwd_run_chunked(sd_runner *r, const int32_t *tok, int32_t n, int32_t k, float *out) {
    for (int32_t p = 0; p < n; p += k) {
        int32_t m = n - p < k ? n - p : k;
        specdec_status st = sd_runner_forward(r, tok + p, m, p, out + (int64_t)p * r->n_vocab);
        if (st != SPECDEC_OK) return st;
    }
    return SPECDEC_OK;
}

/* A small default config (GQA 4:2, head_dim 16, untied). */
static inline sd_config fwd_small_config(void) {
    sd_config c;
    memset(&c, 0, sizeof c);
    c.arch = SD_ARCH_LLAMA;
    strcpy(c.architecture, "LlamaForCausalLM");
    c.vocab_size = 77;
    c.hidden_size = 64;
    c.intermediate_size = 96;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 16;
    c.max_position_embeddings = 256;
    c.rms_norm_eps = 1e-5f;
    c.rope_theta = 10000.0f;
    c.rope_type = SD_ROPE_DEFAULT;
    c.bos_id = -1;
    return c;
}

/* ||a - b|| / ||b|| over n values (b in double). */
static inline double fwd_rel_l2_f64(const float *a, const double *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
static inline double fwd_rel_l2(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
static inline double fwd_max_abs(const float *a, const float *b, int64_t n) {
    double mx = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= mx)) mx = d;  /* NaN propagates as the max */
    }
    return mx;
}
/* Index of the first differing float (bitwise), or -1 when identical. */
static inline int64_t fwd_first_diff(const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
    return -1;
}

#endif
