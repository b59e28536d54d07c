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

/* The device-resident round (kernels/cuda/sd_cuda_round.h): never created without CUDA. */
#include "sd_cuda_round.h"

specdec_status sd_cuda_round_create(sd_runner *target, sd_runner *draft, sd_cuda_round **out, sd_errbuf *eb) {
    (void)target; (void)draft;
    if (out) *out = NULL;
    return sd_fail(eb, SPECDEC_ERR_BACKEND_UNAVAILABLE, "this specdec was built without the CUDA backend");
}
void sd_cuda_round_destroy(sd_cuda_round *rd) { (void)rd; }
specdec_status sd_cuda_round_start(sd_cuda_round *rd, specdec_verify_mode mode, const sd_sampling_params *sp,
                                   uint64_t seed, uint64_t sequence_id, int32_t length, int32_t last_token,
                                   sd_errbuf *eb) {
    (void)rd; (void)mode; (void)sp; (void)seed; (void)sequence_id; (void)length; (void)last_token;
    return sd_fail(eb, SPECDEC_ERR_BACKEND_UNAVAILABLE, "this specdec was built without the CUDA backend");
}
specdec_status sd_cuda_round_run(sd_cuda_round *rd, int32_t gamma, int32_t n_pend, int use_graph,
                                 int32_t *out_tokens, int32_t *out_n_accepted, sd_cuda_round_timing *tm,
                                 sd_errbuf *eb) {
    (void)rd; (void)gamma; (void)n_pend; (void)use_graph; (void)out_tokens; (void)out_n_accepted; (void)tm;
    return sd_fail(eb, SPECDEC_ERR_BACKEND_UNAVAILABLE, "this specdec was built without the CUDA backend");
}
int32_t sd_cuda_round_length(const sd_cuda_round *rd) { (void)rd; return -1; }
int32_t sd_cuda_round_graph_count(const sd_cuda_round *rd) { (void)rd; return 0; }
int sd_cuda_round_lost(const sd_cuda_round *rd) { (void)rd; return 0; }
