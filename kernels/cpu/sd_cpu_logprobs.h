/* sd_cpu_logprobs.h — log-probabilities of one logits row (docs/LOGPROBS.md): the
 * reference every executor uses (the CUDA executors read their rows back and call it
 * through the host executor).
 *
 * For a row x[0..V) of raw target logits and an emitted token t:
 *   lse      = m + log(sum_i exp(x_i - m)), m = max_i x_i, accumulated in double;
 *   lp_i     = (float)((x_i - m) - log(sum)), rounded once to float;
 *   logprob  = lp_t;
 *   rank     = 1 + #{i : lp_i > lp_t} (so rank and top agree with the reported values);
 *   top      = the min(n_top, V) largest lp_i, largest first, ties: the lower id first.
 * NaN logits count as -inf. A row without any finite maximum: every lp_i is -inf, except
 * that +inf entries share the mass (lp = -log(count)).
 * The sum of exponentials uses a float exp polynomial (relative error ~1e-7) summed in
 * double; each value is then computed as above in double from it.
 * Cost: three vectorised passes over V (max; exp and sum; raw-value compares for the rank
 * and a block filter for the top list), lp_i computed only for ids that may enter the
 * top list: O(V) plus O(V * n_top) worst case for rows sorted ascending. No allocation,
 * thread-safe, deterministic (a fixed order of operations). */
#ifndef SD_CPU_LOGPROBS_H
#define SD_CPU_LOGPROBS_H

#include <stdint.h>

#include "sd_logprob.h"

/* Fill *out for token (in [0, n_vocab)) of row[0..n_vocab); n_top is clamped to
 * [0, min(n_vocab, SPECDEC_MAX_TOP_LOGPROBS)]. */
void sd_cpu_logprobs(const float *row, int32_t n_vocab, int32_t token, int32_t n_top, sd_logprob *out);

#endif
