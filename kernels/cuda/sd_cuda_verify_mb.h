/* sd_cuda_verify_mb.h — internal launchers of the multi-block verifier and draft step
 * (sd_cuda_verify_mb.cu), called by sd_cuda_verify() / sd_cuda_sample_draft_step() when
 * the arguments ask for blocks_per_row != 0 (arguments already validated there).
 * w: the multi-block records of the caller's workspace (sd_cuda_mb.h "workspace
 * layouts": ctrl in the zero-filled control header, parts / hist for the launch's rows).
 * *launched = 0 (and SPECDEC_OK) when blocks_per_row is SD_MB_AUTO and the kernel cannot
 * run on this device for this shape (no block count fits, no cooperative launch, too
 * little shared memory: sd_mb_plan_blocks): the caller runs the one-block kernel. */
#ifndef SD_CUDA_VERIFY_MB_H
#define SD_CUDA_VERIFY_MB_H

#include <cuda_runtime_api.h>

#include "sd_cuda_mb.h"
#include "sd_cuda_sample.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_cuda_mb_ws {
    sd_mb_ctrl *ctrl;   /* [SD_MB_MAX_ROWS], zero between launches (the control header) */
    sd_mb_part *parts;  /* [rows][2][SD_MB_MAX_BLOCKS] */
    sd_mb_hist *hist;   /* [rows][SD_MB_HBUFS] */
    int32_t *outcomes;  /* verify only: the (token, accepted) records */
    float *prows;       /* verify only: the processed target rows */
} sd_cuda_mb_ws;

specdec_status sd_cuda_verify_mb_launch(const sd_cuda_verify_args *a, const sd_cuda_mb_ws *w, cudaStream_t stream,
                                        int *launched, sd_errbuf *eb);
specdec_status sd_cuda_draft_mb_launch(const sd_cuda_sample_draft_args *a, const sd_cuda_mb_ws *w,
                                       cudaStream_t stream, int *launched, sd_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif
