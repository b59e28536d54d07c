/* test_cuda_errors.c — the CUDA runner's failure paths: bad arguments leave the
 * runner usable and the cache unchanged; device out-of-memory at create is
 * SPECDEC_ERR_OUT_OF_MEMORY with no leak (creating again afterwards works); every
 * host allocation failure during create (k-th allocation for every k) returns an
 * error status and nothing leaks (ASan) — then a normal create still works.
 * Skips without a device. */
#include "sd_test.h"
#include "specdec.h"

#ifndef SPECDEC_WITH_CUDA
int main(void) { return sd_test_skip("no CUDA device"); }
#else

#include "cuda_test_util.h"
#include "sd_alloc.h"
#include "sd_runner.h"
#include "sd_cuda_runner.h"

static sd_config tiny_cfg(void) {
    sd_config c;
    memset(&c, 0, sizeof c);
    c.arch = SD_ARCH_LLAMA;
    snprintf(c.architecture, sizeof c.architecture, "LlamaForCausalLM");
    c.vocab_size = 100;
    c.hidden_size = 64;
    c.intermediate_size = 96;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 16;
    c.max_position_embeddings = 256;
    c.rms_norm_eps = 1e-5f;
    c.rope_theta = 10000.0f;
    c.bos_id = -1;
    return c;
}

int main(void) {
    if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
    sd_config cfg = tiny_cfg();
    sd_errbuf eb;
    sd_runner *r = NULL;
    specdec_status st = sd_cuda_runner_create_synthetic(&cfg, SD_BF16, 64, 32, 0, 7, &r, &eb);
    SD_CHECK(st == SPECDEC_OK && r, "create synthetic: %s", eb.msg);
    if (!r) return sd_test_done();
    float *logits = malloc(sizeof(float) * 32 * cfg.vocab_size);
    int32_t toks[40];
    for (int i = 0; i < 40; i++) toks[i] = i % cfg.vocab_size;
    SD_CHECK(sd_runner_forward(r, toks, 8, 0, logits) == SPECDEC_OK, "forward: %s", r->err.msg);
    int bad_tok[2] = {3, 100};
    SD_CHECK(sd_runner_forward(r, bad_tok, 2, 8, logits) == SPECDEC_ERR_INVALID_ARGUMENT, "token out of range");
    bad_tok[1] = -1;
    SD_CHECK(sd_runner_forward(r, bad_tok, 2, 8, logits) == SPECDEC_ERR_INVALID_ARGUMENT, "negative token");
    SD_CHECK(r->kv_len == 8, "a refused call leaves kv_len (%d)", r->kv_len);
    SD_CHECK(sd_runner_forward(r, toks, 1, 9, logits) == SPECDEC_ERR_INVALID_ARGUMENT, "pos > kv_len");
    SD_CHECK(sd_runner_forward(r, toks, 0, 8, logits) == SPECDEC_ERR_INVALID_ARGUMENT, "n = 0");
    SD_CHECK(sd_runner_forward(r, NULL, 1, 8, logits) == SPECDEC_ERR_INVALID_ARGUMENT, "NULL tokens");
    SD_CHECK(sd_runner_forward(r, toks, 33, 0, logits) == SPECDEC_ERR_INVALID_ARGUMENT, "n > max_batch");
    /* n_ctx 64: 30 tokens at position 8 end at 37 and fit; 27 more at 38 would end at
     * 64 = n_ctx (one past the last row) and are refused; 26 end exactly at row 63. */
    SD_CHECK(sd_runner_forward(r, toks, 30, 8, logits) == SPECDEC_OK, "8 + 30 <= n_ctx 64 fits: %s", r->err.msg);
    SD_CHECK(r->kv_len == 38, "kv_len %d after 30 at 8", r->kv_len);
    SD_CHECK(sd_runner_forward(r, toks, 27, 38, logits) == SPECDEC_ERR_CONTEXT_FULL, "38 + 27 > n_ctx 64");
    SD_CHECK(r->kv_len == 38, "a CONTEXT_FULL refusal leaves kv_len (%d)", r->kv_len);
    SD_CHECK(sd_runner_forward(r, toks, 26, 38, logits) == SPECDEC_OK, "38 + 26 == n_ctx fits: %s", r->err.msg);
    SD_CHECK(r->kv_len == 64, "kv_len %d at n_ctx", r->kv_len);
    SD_CHECK(sd_runner_forward(r, toks, 1, 64, logits) == SPECDEC_ERR_CONTEXT_FULL, "one token past a full cache");
    SD_CHECK(sd_runner_forward(r, toks + 8, 4, 8, logits) == SPECDEC_OK, "still usable: %s", r->err.msg);
    SD_CHECK(r->kv_len == 12, "kv_len %d", r->kv_len);
    for (int i = 0; i < 4 * cfg.vocab_size; i++) SD_CHECK(isfinite(logits[i]), "logit %d finite", i);
    sd_runner_destroy(r);

    /* device OOM: a KV cache of ~2^40 bytes */
    sd_config big = cfg;
    big.n_layers = 64;
    big.n_kv_heads = 4;
    big.n_heads = 4;
    big.head_dim = 256;
    r = NULL;
    st = sd_cuda_runner_create_synthetic(&big, SD_BF16, 1 << 24, 16, 0, 7, &r, &eb);
    SD_CHECK(st == SPECDEC_ERR_OUT_OF_MEMORY && !r, "huge KV cache: status %d (%s)", (int)st, eb.msg);
    printf("device OOM detail: %s\n", eb.msg);
    st = sd_cuda_runner_create_synthetic(&cfg, SD_F16, 64, 0, 0, 7, &r, &eb);
    SD_CHECK(st == SPECDEC_OK && r, "create after OOM: %s", eb.msg);
    sd_runner_destroy(r);

    /* bad configs and arguments */
    sd_config odd = cfg;
    odd.head_dim = 15;
    r = NULL;
    SD_CHECK(sd_cuda_runner_create_synthetic(&odd, SD_BF16, 64, 0, 0, 7, &r, &eb) == SPECDEC_ERR_UNSUPPORTED && !r,
             "odd head_dim");
    odd = cfg;
    odd.n_kv_heads = 3;
    SD_CHECK(sd_cuda_runner_create_synthetic(&odd, SD_BF16, 64, 0, 0, 7, &r, &eb) == SPECDEC_ERR_UNSUPPORTED && !r,
             "heads not a multiple of kv heads");
    SD_CHECK(sd_cuda_runner_create_synthetic(&cfg, SD_BF16, 0, 0, 0, 7, &r, &eb) == SPECDEC_ERR_INVALID_ARGUMENT && !r,
             "n_ctx 0");
    SD_CHECK(sd_cuda_runner_create_synthetic(&cfg, SD_BF16, 64, 0, 999, 7, &r, &eb) == SPECDEC_ERR_BACKEND_UNAVAILABLE &&
                 !r, "device 999");

    /* host allocation failure at every point of create */
    int k_ok = -1;
    for (long k = 0; k < 64; k++) {
        r = NULL;
        sd_alloc_fail_after(k);
        st = sd_cuda_runner_create_synthetic(&cfg, SD_BF16, 64, 0, 0, 7, &r, &eb);
        long used = sd_alloc_count();
        sd_alloc_fail_after(-1);
        if (st == SPECDEC_OK) {
            SD_CHECK(r != NULL, "OK without a runner");
            sd_runner_destroy(r);
            if (used <= k) { k_ok = (int)k; break; }
        } else {
            SD_CHECK(st == SPECDEC_ERR_OUT_OF_MEMORY && r == NULL, "alloc failure %ld: status %d", k, (int)st);
        }
    }
    SD_CHECK(k_ok >= 1, "create needs host allocations (%d)", k_ok);
    printf("host allocation failure injected at each of the first %d allocations of create\n", k_ok);
    free(logits);
    return sd_test_done();
}
#endif
