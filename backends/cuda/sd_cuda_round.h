/* sd_cuda_round.h — the device-resident speculative round of a CUDA engine
 * (backends/cuda/sd_cuda_round.cu). The engine sees it through the round interface
 * (core/sd_round.h; created with sd_cuda_round_create of sd_cuda_backend.h); this
 * header is its lower level, for the GPU tests and benchmarks: start a sequence at
 * any position and run single rounds with a chosen draft lag, with timings.
 *
 * One round for one sequence of length L (seq[L-1] not yet in either KV cache; the
 * draft has seen seq[0 .. L-n_pend)):
 *   draft catch-up: n_pend (1 or 2) tokens at L-n_pend, LM head of the last row;
 *   draft step i = 0..γ-1: (i > 0: draft forward of x_i at L+i-1), then
 *     sd_cuda_sample_draft_step: q_i kept on the device, x_{i+1} written into the draft's
 *     token buffer (next step's input) and the target's token buffer (verify input);
 *   target forward over [seq[L-1], x_1..x_γ] at L-1 (γ+1 logits rows on the device);
 *   fused verifier (sd_cuda_verify) → accepted count n and n+1 tokens on the device;
 *   a one-thread kernel advances the device length L += n + 1 and writes the next
 *   round's inputs: the target's token = the emitted token t, the draft's catch-up
 *   = [x_γ, t] when everything was accepted (n_pend = 2, the draft never saw x_γ),
 *   else [t] (n_pend = 1) — as the host round (backends/cpu/sd_host_round.c) does.
 * γ = 0 is a plain decoding step (target forward of seq[L-1], verifier with γ = 0).
 * Positions are read by every kernel from a device int64 (L), so the enqueued work
 * has no host-side inputs: each (γ, n_pend) is captured once into a CUDA graph and
 * replayed. The host then reads back (n, tokens) with ONE cudaMemcpyAsync into pinned
 * memory and ONE event synchronisation per round; only token ids cross to the host.
 *
 * The graphs bake in the verify mode and the sampling parameters: start() with
 * different ones drops the cached graphs (re-captured on first use). Everything else
 * (device state, workspaces, q rows, pinned buffers, events) is allocated in create.
 * Every CUDA call is checked; a sticky device error makes the round lost and every
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
#include "sd_sample_rules.h"

typedef struct sd_cuda_round sd_cuda_round;

/* Measured cost of one round (sd_cuda_round_run with tm != NULL). Device times come
 * from CUDA events recorded on the round's stream around each stage (inside the graph
 * as external event nodes when graphs are used); t_host_sync is the wall time the
 * host spends from enqueueing (or launching the graph) until the tokens are readable,
 * minus nothing: compare it with t_gpu to see the launch + synchronisation overhead. */
typedef struct sd_cuda_round_timing {
    double t_wall;   /* host seconds: first enqueue -> tokens on the host */
    double t_gpu;    /* device seconds of the whole round (incl. the few-byte readback) */
    double t_draft;  /* device seconds: catch-up + γ draft forwards and draft sampling */
    double t_target; /* device seconds: the (γ+1)-token verify forward */
    double t_verify; /* device seconds: fused verifier + state update + readback */
    int stages;      /* 1 when t_draft/t_target/t_verify were measured, 0 when only t_gpu */
} sd_cuda_round_timing;

/* The concrete round behind an sd_round made by sd_cuda_round_create. */
static inline sd_cuda_round *sd_cuda_round_of(sd_round *rd) { return (sd_cuda_round *)rd; }

/* Begin a sequence: the caches hold seq[0 .. length-1) for the target and the draft
 * (both prefilled, their own streams finished), last_token = seq[length-1]. mode is
 * REJECTION, GREEDY (sampling params then ignored) or MATCH; sp was checked by
 * sd_sampling_check_params. Synchronises the round's stream once. */
specdec_status sd_cuda_round_start(sd_cuda_round *rd, specdec_verify_mode mode, const sd_sampling_params *sp,
                                   uint64_t seed, uint64_t sequence_id, int32_t length, int32_t last_token,
                                   sd_errbuf *eb);

/* Run one round with gamma drafts (0 = plain step) when the draft is n_pend tokens
 * behind (1 or 2; ignored for gamma 0). use_graph: replay (capturing on first use) the
 * graph of (gamma, n_pend), else enqueue the kernels directly (same kernels, same
 * results). Writes out_tokens[0..n] (n accepted drafts, then the emitted token) and
 * *out_n_accepted = n; tm (optional) gets the timing. The device length becomes
 * length + n + 1 (sd_cuda_round_length). Positions must fit: length + gamma <= the
 * target's n_ctx (and the draft's). On failure the round must be start()ed again. */
specdec_status sd_cuda_round_run(sd_cuda_round *rd, int32_t gamma, int32_t n_pend, int use_graph,
                                 int32_t *out_tokens, int32_t *out_n_accepted, sd_cuda_round_timing *tm,
                                 sd_errbuf *eb);

/* Sequence length the device state holds (host mirror), -1 before start(). */
int32_t sd_cuda_round_length(const sd_cuda_round *rd);
/* CUDA graphs instantiated and cached right now. */
int32_t sd_cuda_round_graph_count(const sd_cuda_round *rd);
/* 1 after a sticky device error. */
int sd_cuda_round_lost(const sd_cuda_round *rd);

#ifdef __cplusplus
}
#endif

#endif
