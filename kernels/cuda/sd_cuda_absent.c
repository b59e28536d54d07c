/* sd_cuda_absent.c — compiled instead of the kernels/cuda .cu files when the build has no
 * CUDA toolkit: the CUDA entry points report that the backend is unavailable. */
#include "sd_runner.h"

specdec_status sd_cuda_runner_create(const struct specdec_model *model, int32_t n_ctx, int32_t max_batch,
                                     int32_t device, int32_t keep_f32, sd_runner **out, sd_errbuf *eb) {
    (void)model; (void)n_ctx; (void)max_batch; (void)device; (void)keep_f32;
    if (out) *out = NULL;
    return sd_fail(eb, SPECDEC_ERR_BACKEND_UNAVAILABLE, "this specdec was built without the CUDA backend");
}

int specdec_has_cuda(void) { return 0; }
int specdec_cuda_device_count(void) { return 0; }
