/* test_cuda_device_lost.c — a real sticky device fault (a kernel writing through
 * NULL) turns the CUDA runner into SPECDEC_ERR_DEVICE_LOST for that call and every
 * later one, without aborting, and the runner can still be destroyed. The fault
 * poisons the whole CUDA context, so this runs in its own process and is kept out
 * of the compute-sanitizer runs (label gpu_fault). Skips without a device. */
#include "sd_test.h"
#include "specdec.h"

#ifndef SPECDEC_WITH_CUDA
int main(void) { return sd_test_skip("no CUDA device"); }
#else

#include "cuda_test_util.h"
#include "sd_cuda_ops.h"
#include "sd_runner.h"
#include "sd_cuda_runner.h"

int main(void) {
    if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
    sd_config c;
    memset(&c, 0, sizeof c);
    c.vocab_size = 50; c.hidden_size = 32; c.intermediate_size = 48; c.n_layers = 1;
    c.n_heads = 2; c.n_kv_heads = 1; c.head_dim = 16; c.rms_norm_eps = 1e-5f; c.rope_theta = 10000.0f;
    sd_errbuf eb;
    sd_runner *r = NULL;
    SD_CHECK(sd_cuda_runner_create_synthetic(&c, SD_BF16, 32, 0, 0, 1, &r, &eb) == SPECDEC_OK, "create: %s", eb.msg);
    if (!r) return sd_test_done();
    float logits[4 * 50];
    int32_t toks[4] = {1, 2, 3, 4};
    SD_CHECK(sd_runner_forward(r, toks, 4, 0, logits) == SPECDEC_OK, "healthy forward: %s", r->err.msg);
    SD_CHECK(sd_cuda_inject_fault(sd_cuda_runner_stream(r), &eb) == SPECDEC_OK, "fault launch: %s", eb.msg);
    specdec_status st = sd_runner_forward(r, toks, 1, 4, logits);
    printf("after the fault: %s — %s\n", specdec_status_string(st), r->err.msg);
    SD_CHECK(st == SPECDEC_ERR_DEVICE_LOST, "first call after the fault: %d", (int)st);
    SD_CHECK(sd_cuda_runner_lost(r), "runner marked lost");
    SD_CHECK(sd_runner_forward(r, toks, 1, 0, logits) == SPECDEC_ERR_DEVICE_LOST, "every later call");
    SD_CHECK(r->kv_len <= 4, "kv_len not advanced by the failed call (%d)", r->kv_len);
    sd_runner_destroy(r); /* must not crash */
    return sd_test_done();
}
#endif
