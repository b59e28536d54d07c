/* sd_runner.h — the internal interface between the engine and a backend.
 *
 * A runner owns one model's KV cache and scratch for one backend. The engine drives
 * it; tests may implement it with synthetic models (e.g. a Markov chain) to exercise
 * the engine loop without a transformer.
 *
 * forward(): tokens[0..n) at absolute positions [pos, pos+n); requires
 * 0 <= pos <= kv_len and pos + n <= n_ctx and n <= max_batch; the cache is truncated
 * to pos, then extended to pos + n. Writes n rows of n_vocab fp32 logits to
 * logits_out (host memory, may be NULL to skip the LM head). No allocation. */
#ifndef SD_RUNNER_H
#define SD_RUNNER_H

#include <stdint.h>
#include "specdec.h"
#include "sd_error.h"

typedef struct sd_runner sd_runner;

typedef struct sd_runner_vtbl {
    specdec_status (*forward)(sd_runner *r, const int32_t *tokens, int32_t n, int32_t pos, float *logits_out);
    void (*destroy)(sd_runner *r);
} sd_runner_vtbl;

struct sd_runner {
    const sd_runner_vtbl *vt;
    specdec_backend backend;  /* CPU or CUDA */
    int32_t n_vocab;
    int32_t n_ctx;
    int32_t max_batch;
    int32_t kv_len;           /* tokens currently in the cache; truncation just lowers it */
    sd_errbuf err;            /* detail of the last failure */
};

static inline specdec_status sd_runner_forward(sd_runner *r, const int32_t *tokens, int32_t n, int32_t pos,
                                               float *logits_out) {
    return r->vt->forward(r, tokens, n, pos, logits_out);
}
static inline void sd_runner_destroy(sd_runner *r) {
    if (r) r->vt->destroy(r);
}

/* CPU reference runner (kernels/cpu/sd_cpu_runner.c). On failure *out = NULL and the
 * detail is in eb. */
specdec_status sd_cpu_runner_create(const struct specdec_model *model, int32_t n_ctx, int32_t max_batch,
                                    sd_runner **out, sd_errbuf *eb);

/* CUDA runner (kernels/cuda/); returns SPECDEC_ERR_BACKEND_UNAVAILABLE when CUDA is
 * not built in or no device is usable. */
specdec_status sd_cuda_runner_create(const struct specdec_model *model, int32_t n_ctx, int32_t max_batch,
                                     int32_t device, int32_t keep_f32, sd_runner **out, sd_errbuf *eb);

#endif
