/* sd_cuda_round.h — the device-resident EXECUTOR of a CUDA engine
 * (backends/cuda/sd_cuda_round.cu). The protocol (core/sd_round.c) drives it through
 * sd_exec_ops (created with sd_cuda_exec_create of sd_cuda_backend.h); this header is
 * its lower level, for the GPU tests and benchmarks: the measured timing of the last
 * round and the graph cache.
 *
 * One round for one sequence of length L (tokens[L-1] not yet in the target's cache):
 *   model drafts (lag 1 or 2: the draft has seen tokens[0 .. L - lag)):
 *     draft_forward(0): the catch-up, lag tokens at L - lag (the draft's device token
 *       buffer holds them), LM head of the last row; draft_sample(i):
 *       sd_cuda_sample_draft_step: q_i kept on the device, x_{i+1} written into the
 *       draft's token buffer (next step's input) and the target's token buffer (verify
 *       input); draft_forward(i > 0): the draft forward of x_i at L + i - 1;
 *   deterministic drafts (n-gram): the proposal, planned on the host, is copied from
 *     pinned memory into the target's token buffer by the verify pass (a memcpy node
 *     of the graph); no q rows exist, the verifier takes the deterministic flag;
 *   verify pass: the target forward over [tokens[L-1], x_1..x_γ] at L - 1 (γ + 1 logits
 *     rows on the device);
 *   verifier: the fused sd_cuda_verify → accepted count n and n + 1 tokens on the
 *     device; a one-thread kernel advances the device length L += n + 1 and writes the
 *     next round's inputs: the target's token = the emitted token t, the draft's
 *     catch-up = [x_γ, t] when everything was accepted (lag 2, the draft never saw
 *     x_γ), else [t] (lag 1);
 *   wave_end: ONE readback of (n, tokens) into pinned memory, ONE event
 *     synchronisation; only token ids cross to the host.
 * γ = 0 is a plain decoding step (target forward of tokens[L-1], verifier with γ = 0).
 * Positions are read by every kernel from a device int64 (L), so the enqueued work has
 * no host-side inputs besides the pinned proposal: each (deterministic?, γ, lag) is
 * captured once into a CUDA graph (the protocol's stages 1-3 between wave_begin and
 * wave_end) and replayed. The device state (L, seed, the pending tokens) is uploaded
 * whenever it does not match the sequence (a new sequence, a settle, a round the
 * fallback executor ran); the graphs bake in the verify mode and the sampling
 * parameters: different ones drop the cached graphs. Everything is allocated in create.
 * Every CUDA call is checked; a sticky device error makes the executor lost and every
 * later call returns SPECDEC_ERR_DEVICE_LOST; destroy always works.
 *
 * Free of CUDA types: plain-C tests include it. */
#ifndef SD_CUDA_ROUND_H
#define SD_CUDA_ROUND_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "specdec.h"
#include "sd_error.h"
#include "sd_round.h"
#include "sd_runner.h"

/* Measured cost of the last round. Device times come from CUDA events recorded on the
 * executor's stream around each stage (inside the graph as external event nodes when
 * graphs are used); t_wall is the host time from the first enqueue (or the graph
 * launch) until the tokens are readable: compare it with t_gpu to see the launch +
 * synchronisation overhead. */
typedef struct sd_cuda_round_timing {
    double t_wall;   /* host seconds: first enqueue -> tokens on the host */
    double t_gpu;    /* device seconds of the whole round (incl. the few-byte readback) */
    double t_draft;  /* device seconds: catch-up + γ draft forwards and draft sampling */
    double t_target; /* device seconds: the (γ+1)-token verify forward */
    double t_verify; /* device seconds: fused verifier + state update + readback */
    int stages;      /* 1 when t_draft/t_target/t_verify were measured, 0 when only t_gpu */
    int replayed;    /* the round was a graph replay */
} sd_cuda_round_timing;

/* The timing of the last completed round of a device executor. */
void sd_cuda_exec_last_timing(const sd_exec *ex, sd_cuda_round_timing *tm);
/* CUDA graphs instantiated and cached right now. */
int32_t sd_cuda_exec_graph_count(const sd_exec *ex);

#ifdef __cplusplus
}
#endif

#endif
