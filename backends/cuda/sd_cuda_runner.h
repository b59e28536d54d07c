/* sd_cuda_runner.h — internal extras of the CUDA runner (backends/cuda/sd_cuda_runner.cu)
 * beyond the sd_runner interface, for the GPU tests, the benchmark and the device
 * round: synthetic models with random weights generated on the device (cuRAND), a
 * forward pass that only enqueues (so a benchmark can capture it in a CUDA graph), and
 * accessors. Functions marked STANDALONE take a runner made by sd_cuda_runner_create*()
 * (the only sequence of its private group, identity block table); the accessors take
 * any CUDA runner, grouped ones included, and answer for its group (stream, buffers). */
#ifndef SD_CUDA_RUNNER_H
#define SD_CUDA_RUNNER_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "sd_runner.h"
#include "sd_weights.h"

/* A standalone runner over a model that exists only on the device: cfg gives the
 * shapes (the loader's sd_config), weights are N(0, 0.02) in wdt (biases too), norms
 * are 1, drawn with cuRAND Philox from `seed`. The KV cache is in wdt, filled with
 * N(0, 1). */
specdec_status sd_cuda_runner_create_synthetic(const sd_config *cfg, sd_dtype wdt, int32_t n_ctx, int32_t max_batch,
                                               int32_t device, uint64_t seed, sd_runner **out, sd_errbuf *eb);

/* The runner's stream; its device buffer of max_batch token ids (fill it with
 * cudaMemcpyAsync on the stream before sd_cuda_runner_enqueue). */
cudaStream_t sd_cuda_runner_stream(sd_runner *r);
int32_t *sd_cuda_runner_device_tokens(sd_runner *r);

/* STANDALONE. Enqueue one forward pass over the n tokens already in the device token
 * buffer at positions [pos, pos + n) (n <= the runner's activation rows, see
 * sd_cuda_runner_act_rows) without synchronising or touching the host; with
 * want_logits, the LM head of the last min(n, 16) rows goes to the device logits
 * buffer ([16, vocab] fp32, rows in order). kv_len is NOT updated (the caller owns
 * consistency; sd_runner_forward is the safe entry point). Graph-capturable. */
specdec_status sd_cuda_runner_enqueue(sd_runner *r, int32_t n, int32_t pos, int want_logits);
const float *sd_cuda_runner_device_logits(sd_runner *r);

/* STANDALONE. The device-resident round's forward (backends/cuda/sd_cuda_round.cu): the n tokens
 * already in the device token buffer at positions *pos_base + pos_off .. + n - 1, where
 * pos_base is a device int64 read by the kernels (so a captured CUDA graph replays at
 * the current position), enqueued on `stream` (any stream of the runner's device). n
 * <= SD_CUDA_SKINNY_MAX_M: the batch-invariant path, bitwise the same rows as
 * sd_runner_forward at the same position. The LM head of the last logits_rows rows
 * (0..n) goes to the device logits buffer, rows in order. Nothing is synchronised,
 * copied to the host or allocated; kv_len is NOT updated and the positions are not
 * checked against it (the caller keeps them inside [0, n_ctx - n]). Graph-capturable. */
specdec_status sd_cuda_runner_enqueue_dpos(sd_runner *r, int32_t n, const int64_t *pos_base, int32_t pos_off,
                                           int32_t logits_rows, cudaStream_t stream);
/* STANDALONE. The device-resident round's forwards appended to the cache on the
 * device: the runner's KV length becomes len (clamped to [0, n_ctx]; its host block
 * table follows, the identity). Only the round of this backend calls it (the runner
 * stays the one owner of kv_len, core/sd_runner.h). */
void sd_cuda_runner_note_kv(sd_runner *r, int32_t len);
/* 1 for a standalone CUDA runner (sd_cuda_runner_create*: the only sequence of its
 * private group, which the device round requires), 0 for a runner of a group made by
 * sd_cuda_group_create or any other runner. */
int sd_cuda_runner_standalone(sd_runner *r);
/* The CUDA device ordinal the runner lives on. */
int sd_cuda_runner_device(sd_runner *r);
/* The dtype of the group's projection weights and embedding on the device (F32 only when
 * F32 weights were kept), and the embedding table [vocab, hidden] itself (device memory,
 * the group's: an EAGLE-3 head without its own embedding reads it, sd_eagle3_cuda.cu). */
sd_dtype sd_cuda_runner_weight_dtype(sd_runner *r);
const void *sd_cuda_runner_device_embed(sd_runner *r, sd_dtype *dt);

/* Upload host tensor t (any dtype, `count` elements) into device memory dst as dt,
 * converting through the caller's host staging buffer of stage_elems 4-byte elements
 * (unused when the dtypes agree); plain cudaMemcpy (the caller synchronises the device
 * before using dst). MODEL_MISMATCH naming `what` and `layer` for a missing tensor or a
 * wrong element count. */
specdec_status sd_cuda_upload(void *dst, sd_dtype dt, const sd_tensor *t, size_t count, const char *what,
                              int32_t layer, void *stage, size_t stage_elems, sd_errbuf *eb);
/* A norm weight of `count` elements as fp32 (offset + w; offset 0: the stored bits) through
 * stage (count floats). */
specdec_status sd_cuda_upload_norm(float *dst, const sd_tensor *t, size_t count, float offset, const char *what,
                                   int32_t layer, float *stage, sd_errbuf *eb);
int32_t sd_cuda_runner_act_rows(sd_runner *r);

/* The device of a group made by sd_cuda_group_create (or a standalone runner's private
 * group); -1 for NULL or any other group. */
int sd_cuda_group_device(const sd_runner_group *g);
/* The stream a CUDA group's forwards run on (0 for NULL or any other group): callers
 * that touch the group's buffers from another stream order the two with
 * sd_cuda_stream_after (kernels/cuda/sd_cuda_ops.h), never only by host waits. */
cudaStream_t sd_cuda_group_stream(const sd_runner_group *g);
/* The batched device round's forward (backends/cuda/sd_cuda_batch_round.cu):
 * sd_runner_forward_batch over runners of ONE CUDA group (same checks, block holding,
 * passes of max_batch tokens and failure semantics; INVALID_ARGUMENT for runners of
 * anything else), but the logits stay on the device: segs[i].logits is a DEVICE pointer
 * on the group's device (NULL: no logits for that segment) that receives the segment's
 * last min(tail, n) rows (tail 0: all n rows), in order, n_vocab fp32 each. The LM head
 * runs only for those rows (the host path's windows, shared code: sd_pass_logits), the
 * rows are copied device to device. Synchronous like the host path: the rows are there
 * when it returns. */
specdec_status sd_cuda_group_forward_device(const sd_runner_seg *segs, int32_t n_segs, int32_t tail, sd_errbuf *eb);

/* Bytes of weights on the device, and of the KV cache per token (all layers, K+V). */
size_t sd_cuda_runner_weight_bytes(sd_runner *r);
size_t sd_cuda_runner_kv_bytes_per_token(sd_runner *r);
/* 1 once a sticky device error was seen (every later forward is DEVICE_LOST). */
int sd_cuda_runner_lost(sd_runner *r);

#ifdef __cplusplus
}
#endif

#endif
