/* PLACEHOLDER until the CUDA backend lands: the CUDA runner is unavailable. */
extern "C" {
#include "sd_runner.h"
}

extern "C" specdec_status sd_cuda_runner_create(const struct specdec_model *model, int32_t n_ctx, int32_t max_batch,
                                                int32_t device, int32_t keep_f32, sd_runner **out, sd_errbuf *eb) {
    (void)model; (void)n_ctx; (void)max_batch; (void)device; (void)keep_f32;
    if (out) *out = NULL;
    return sd_fail(eb, SPECDEC_ERR_BACKEND_UNAVAILABLE, "the CUDA runner is not implemented yet");
}
