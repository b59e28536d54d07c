/* sd_cuda_absent.c — compiled instead of the CUDA sources when the build has no CUDA
 * toolkit: the CUDA backend's entry points (sd_cuda_backend.h) and the public device
 * queries report that the backend is unavailable. */
#include "sd_cuda_backend.h"

specdec_status sd_cuda_runner_create(const sd_weights *w, int32_t n_ctx, int32_t max_batch, int32_t device,
                                     int32_t keep_f32, sd_runner **out, sd_errbuf *eb) {
    (void)w; (void)n_ctx; (void)max_batch; (void)device; (void)keep_f32;
    if (out) *out = NULL;
    return sd_fail(eb, SPECDEC_ERR_BACKEND_UNAVAILABLE, "this specdec was built without the CUDA backend");
}

specdec_status sd_cuda_group_create(const sd_weights *w, int32_t n_ctx, int32_t max_batch, int32_t n_blocks,
                                    int32_t block_tokens, int32_t device, int32_t keep_f32, sd_runner_group **out,
                                    sd_errbuf *eb) {
    (void)w; (void)n_ctx; (void)max_batch; (void)n_blocks; (void)block_tokens; (void)device; (void)keep_f32;
    if (out) *out = NULL;
    return sd_fail(eb, SPECDEC_ERR_BACKEND_UNAVAILABLE, "this specdec was built without the CUDA backend");
}

specdec_status sd_cuda_exec_create(sd_runner *target, sd_runner *draft, int use_graphs, sd_exec **out,
                                   sd_errbuf *eb) {
    (void)target; (void)draft; (void)use_graphs;
    if (out) *out = NULL;
    return sd_fail(eb, SPECDEC_ERR_BACKEND_UNAVAILABLE, "this specdec was built without the CUDA backend");
}

void sd_cuda_exec_use_graphs(sd_exec *ex, int use_graphs) { (void)ex; (void)use_graphs; }

specdec_status sd_cuda_batch_exec_create(sd_runner_group *target, sd_runner_group *draft, int32_t max_seqs,
                                         sd_exec **out, sd_errbuf *eb) {
    (void)target; (void)draft; (void)max_seqs;
    if (out) *out = NULL;
    return sd_fail(eb, SPECDEC_ERR_BACKEND_UNAVAILABLE, "this specdec was built without the CUDA backend");
}

specdec_status sd_cuda_eagle3_runner_create(const sd_eagle3_weights *hw, sd_runner *target,
                                            const sd_config *target_cfg, int32_t n_ctx, int32_t rows,
                                            sd_runner **out, sd_errbuf *eb) {
    (void)hw; (void)target; (void)target_cfg; (void)n_ctx; (void)rows;
    if (out) *out = NULL;
    return sd_fail(eb, SPECDEC_ERR_BACKEND_UNAVAILABLE, "this specdec was built without the CUDA backend");
}

specdec_status sd_cuda_eagle3_shared_create(const sd_eagle3_weights *hw, sd_runner *target,
                                            const sd_config *target_cfg, int32_t n_ctx, sd_eagle3_shared **out,
                                            sd_errbuf *eb) {
    (void)hw; (void)target; (void)target_cfg; (void)n_ctx;
    if (out) *out = NULL;
    return sd_fail(eb, SPECDEC_ERR_BACKEND_UNAVAILABLE, "this specdec was built without the CUDA backend");
}

specdec_status sd_cuda_eagle3_runner_create_shared(sd_eagle3_shared *sh, sd_runner *target,
                                                   const sd_config *target_cfg, int32_t n_ctx, int32_t rows,
                                                   sd_runner **out, sd_errbuf *eb) {
    (void)sh; (void)target; (void)target_cfg; (void)n_ctx; (void)rows;
    if (out) *out = NULL;
    return sd_fail(eb, SPECDEC_ERR_BACKEND_UNAVAILABLE, "this specdec was built without the CUDA backend");
}

int specdec_has_cuda(void) { return 0; }
int specdec_cuda_device_count(void) { return 0; }
