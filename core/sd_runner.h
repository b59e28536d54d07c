/* sd_runner.h — the backend contract, part 1: a runner runs ONE model's forward pass
 * over its own KV cache on one backend (backends/cpu/sd_cpu_runner.c,
 * backends/cuda/sd_cuda_runner.cu; tests implement it with synthetic models, e.g. a
 * Markov chain, to drive the engine without a transformer).
 *
 * forward(): tokens[0..n) at absolute positions [pos, pos+n); requires
 * 0 <= pos <= kv_len, pos + n <= n_ctx and n <= max_batch; the cache is truncated to
 * pos, then extended to pos + n. Writes n rows of n_vocab fp32 logits to logits_out
 * (host memory; NULL skips the LM head). No allocation. A failure leaves kv_len <= pos
 * (the rows past it are undefined) and the detail in r->err.
 *
 * KV length: kv_len has one owner, the runner. It changes only in the runner's own
 * code: forward(), sd_runner_truncate(), and a backend's device-resident round
 * reporting what its device-side forwards appended (backends/cuda). Everyone else
 * reads it with sd_runner_kv_len().
 *
 * Runners are created by their backend from validated weights (core/sd_weights.h:
 * sd_weights_validate) and destroyed with sd_runner_destroy(). */
#ifndef SD_RUNNER_H
#define SD_RUNNER_H

#include <stdint.h>
#include "specdec.h"
#include "sd_error.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    int32_t max_batch;        /* most tokens per forward() */
    int32_t kv_len;           /* tokens in the cache (see "KV length" above) */
    sd_errbuf err;            /* detail of the last failure */
};

static inline specdec_status sd_runner_forward(sd_runner *r, const int32_t *tokens, int32_t n, int32_t pos,
                                               float *logits_out) {
    return r->vt->forward(r, tokens, n, pos, logits_out);
}
static inline void sd_runner_destroy(sd_runner *r) {
    if (r) r->vt->destroy(r);
}
static inline int32_t sd_runner_kv_len(const sd_runner *r) { return r->kv_len; }
/* Drop cache rows at and beyond len (O(1)); len >= kv_len changes nothing. */
static inline void sd_runner_truncate(sd_runner *r, int32_t len) {
    if (len < r->kv_len) r->kv_len = len < 0 ? 0 : len;
}

/* forward() in chunks of max_batch tokens (a prompt longer than one call): logits row
 * i (when wanted) lands at logits + i * n_vocab. On success kv_len == pos + n; a
 * runner that ends anywhere else is reported as SPECDEC_ERR_INTERNAL. The failing
 * chunk's status is returned, its detail stays in r->err. */
specdec_status sd_runner_forward_chunked(sd_runner *r, const int32_t *tokens, int32_t n, int32_t pos, float *logits);

#ifdef __cplusplus
}
#endif

#endif
