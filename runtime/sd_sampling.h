/* sd_sampling.h — logits → processed probabilities, and inverse-CDF sampling.
 *
 * This file is the reference (CPU) definition of how specdec turns one row of fp32
 * logits into the distribution it samples from; the CUDA kernels implement the same
 * steps in the same order. Both the draft's q rows and the target's p rows go through
 * sd_sampling_process() with the same parameters (the verifier must see exactly the
 * distribution each draft token was sampled from).
 *
 * sd_sampling_process(logits[V]) → probs[V], in this exact order:
 *   0. Sanitise: NaN logits are treated as -inf.
 *   1. Greedy: temperature == 0 → probs = one-hot of sd_sample_argmax(logits)
 *      (largest logit, +inf counts as largest, lowest id wins ties, all -inf/NaN →
 *      token 0). top_k / top_p / min_p are ignored (the argmax always survives them).
 *   2. Temperature: z_i = (double)logit_i / (double)temperature.
 *   3. Softmax weights in double, m = max_i z_i (exp = sd_spec_exp of
 *      kernels/sd_sample_math.h, the specification's own exp, shared with the GPU):
 *        m == -inf (all logits -inf/NaN)  → probs = one-hot of token 0, done;
 *        m == +inf                        → w_i = 1 if z_i == +inf else 0 (the +inf
 *                                            tokens share the mass equally);
 *        otherwise                        → w_i = sd_spec_exp(z_i - m) (w = 0 for -inf;
 *                                            the top token gets exactly 1).
 *   4. Rank: tokens are totally ordered by (w descending, id ascending); every "top"
 *      below means first in this order, so ties are broken by the lower id. Only
 *      tokens with w > 0 are candidates; w = 0 tokens stay at 0.
 *   5. top-k (0 < top_k < V): keep the top_k first tokens of the order; w_i = 0 for
 *      the others. top_k == 0 or >= V: disabled.
 *   6. top-p (top_p < 1): in exact fixed point, F(w) = floor(w * 2^62) (sd_spec_fix):
 *      S = Σ F(w_i) over kept tokens (an exact integer). Walk the kept tokens in rank
 *      order; keep a token iff the fixed-point mass before it, C_before, satisfies
 *      C_before < top_p * S exactly (sd_spec_topp_threshold). The first token is
 *      always kept; the smallest prefix whose mass reaches top_p * S survives.
 *      top_p == 1: disabled.
 *   7. min-p (min_p > 0): keep token i iff w_i >= (double)min_p * w_top, w_top being
 *      the largest w (1 in both branches of step 3). Applied
 *      after top-p (the top token always survives). min_p == 0: disabled.
 *   8. Normalise: S' = Σ F(w_i) over kept tokens (exact), S_d = (double)(S' >> 18) *
 *      2^-44 (sd_spec_fix_to_double), probs_i = (float)(w_i / S_d) (sd_spec_norm).
 *      Removed tokens get exactly 0.
 *   Every sum is exact, hence independent of the summation order: the CUDA kernels
 *   (kernels/cuda/sd_cuda_spec.h) produce the same bits, not just close ones.
 *
 * Inverse-CDF sampling, sd_sample_inverse_cdf(probs, V, u), in exact fixed point:
 * C_i = Σ_{j<=i, probs_j>0} F(probs_j) (F(x) = floor(x 2^62), exact integer sums).
 * Returns the first i with probs_i > 0 and C_i >= ceil(u 2^62) (i.e. u <= C_i 2^-62,
 * exactly). A token with probs_i == 0 (or < 2^-62) owns an empty segment and is only
 * returned as the fallback: if the row falls short (rounding left it short of 1, or
 * u > 1) the last token with probs_i > 0 is returned; u <= 0 or NaN gives the first
 * token with F(probs_i) > 0; a row with no positive entry (impossible after
 * sd_sampling_process) gives 0. Always in [0, V). u comes from sd_rng_uniform_at()
 * (a multiple of 2^-32 in (0, 1], whose target (x + 1) 2^30 the GPU uses).
 *
 * Everything here is allocation-free and thread-safe; O(V) except top-p and top-k,
 * which sort the surviving candidates (O(V log V) worst case) in caller scratch. */
#ifndef SD_SAMPLING_H
#define SD_SAMPLING_H

#include <stddef.h>
#include <stdint.h>
#include "specdec.h"
#include "sd_error.h"

typedef struct sd_sampling_params {
    float temperature; /* >= 0, finite; 0 = greedy */
    int32_t top_k;     /* >= 0; 0 or >= V = disabled */
    float top_p;       /* in (0, 1]; 1 = disabled */
    float min_p;       /* in [0, 1]; 0 = disabled */
} sd_sampling_params;

/* Fill sp from the public generate params (temperature, top_k, top_p, min_p). */
sd_sampling_params sd_sampling_params_from(const specdec_generate_params *gp);

/* SPECDEC_OK, or SPECDEC_ERR_INVALID_ARGUMENT with detail naming the bad field and
 * value (temperature < 0 / NaN / inf, top_k < 0, top_p outside (0,1] or NaN, min_p
 * outside [0,1] or NaN). eb may be NULL (thread-local detail). */
specdec_status sd_sampling_check_params(const sd_sampling_params *sp, sd_errbuf *eb);

/* Bytes of scratch sd_sampling_process() needs for vocabulary size n_vocab
 * (12 * n_vocab plus alignment slack); 0 if n_vocab <= 0. Allocate once, reuse. */
size_t sd_sampling_scratch_size(int32_t n_vocab);

/* Process one row (steps 0-8 above). logits: n_vocab floats, borrowed, not modified
 * unless probs_out aliases it (in-place processing is allowed). probs_out: n_vocab
 * floats, caller-owned. scratch: caller-owned, >= sd_sampling_scratch_size(n_vocab)
 * bytes, any alignment; its contents are garbage afterwards. No allocation.
 * Fails (INVALID_ARGUMENT, probs_out untouched) on NULL pointers, n_vocab <= 0, bad
 * params or too small scratch. */
specdec_status sd_sampling_process(const float *logits, int32_t n_vocab, const sd_sampling_params *sp,
                                   void *scratch, size_t scratch_size, float *probs_out, sd_errbuf *eb);

/* Index of the largest x_i (+inf largest, NaN ignored, lowest id wins ties);
 * 0 when every entry is -inf or NaN or n_vocab <= 0. */
int32_t sd_sample_argmax(const float *x, int32_t n_vocab);

/* Inverse-CDF sample of probs (see above). Always returns an id in [0, n_vocab)
 * (0 when n_vocab <= 0). O(V), no allocation. */
int32_t sd_sample_inverse_cdf(const float *probs, int32_t n_vocab, double u);

#endif
