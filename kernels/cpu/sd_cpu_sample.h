/* sd_cpu_sample.h — the CPU reference of row processing and sampling: logits ->
 * processed probabilities (temperature, top-k, top-p, min-p) and inverse-CDF / argmax
 * sampling, exactly as specified in core/sd_sample_rules.h (steps 0-8 there; every
 * per-token decision is a function of that header, shared with the CUDA kernels).
 * top-k and top-p walk the rank order with a binary heap in caller scratch
 * (O(V log V) worst case); everything else is O(V). Allocation-free, thread-safe. */
#ifndef SD_CPU_SAMPLE_H
#define SD_CPU_SAMPLE_H

#include <stddef.h>
#include <stdint.h>
#include "specdec.h"
#include "sd_eagle3.h"
#include "sd_error.h"
#include "sd_sample_rules.h"

/* Bytes of scratch sd_sampling_process() needs for vocabulary size n_vocab
 * (12 * n_vocab plus alignment slack); 0 if n_vocab <= 0. Allocate once, reuse. */
size_t sd_sampling_scratch_size(int32_t n_vocab);

/* Process one row (core/sd_sample_rules.h steps 0-8). logits: n_vocab floats, borrowed, not modified
 * unless probs_out aliases it (in-place processing is allowed). probs_out: n_vocab
 * floats, caller-owned. scratch: caller-owned, >= sd_sampling_scratch_size(n_vocab)
 * bytes, any alignment; its contents are garbage afterwards. No allocation.
 * Fails (INVALID_ARGUMENT, probs_out untouched) on NULL pointers, n_vocab <= 0, bad
 * params or too small scratch. */
specdec_status sd_sampling_process(const float *logits, int32_t n_vocab, const sd_sampling_params *sp,
                                   void *scratch, size_t scratch_size, float *probs_out, sd_errbuf *eb);

/* The proposal row q [n_vocab] of an EAGLE-3 head's draft logits [draft_vocab] (both head
 * backends' sd_eagle3_runner_ops.q): greedy, sd_eagle3_q (the softmax at the d2t ids, 0
 * elsewhere); else sd_sampling_process of the full row that is -inf everywhere but the d2t
 * ids, which hold the logits. Same errors as sd_sampling_process. */
specdec_status sd_sampling_process_eagle3(const sd_eagle3_weights *hw, const float *logits, const sd_sampling_params *sp,
                                          int greedy, void *scratch, size_t scratch_size, float *q, sd_errbuf *eb);

/* Index of the largest x_i (+inf largest, NaN ignored, lowest id wins ties);
 * 0 when every entry is -inf or NaN or n_vocab <= 0. */
int32_t sd_sample_argmax(const float *x, int32_t n_vocab);

/* Inverse-CDF sample of probs (core/sd_sample_rules.h). Always returns an id in [0, n_vocab)
 * (0 when n_vocab <= 0). O(V), no allocation. */
int32_t sd_sample_inverse_cdf(const float *probs, int32_t n_vocab, double u);

#endif
