/* sd_verify.h — the speculative verifier over host probability rows.
 *
 * One round (SPECULATIVE.md): the draft proposed x_1..x_γ at absolute positions
 * pos0..pos0+γ-1 (pos0 = sequence length before the round), sampling x_i from the
 * processed row q_i; the target scored them in one pass giving processed rows
 * p_1..p_{γ+1} (p_i is the target's distribution for position pos0+i-1). Rows come
 * from sd_sampling_process() with the same parameters for both models.
 *
 * Memory layout (all borrowed, row-major fp32, n_vocab floats per row):
 *   p      (γ+1) rows: p[i*V .. i*V+V) = p_{i+1}, distribution at position pos0+i
 *   q      γ rows:     q[i*V ..) = q_{i+1}, the row draft[i] was sampled from
 *                      (may be NULL in GREEDY and MATCH modes)
 *   draft  γ token ids in [0, V)
 * Indices below are 0-based: draft[i], row p[i], uniforms accept[i] / sample[i].
 *
 * Modes (the `mode` argument; AUTO must be resolved by the caller):
 * - SPECDEC_VERIFY_REJECTION (Leviathan/Chen): for i = 0..γ-1, with x = draft[i],
 *   accept x iff  p_i(x) > 0  and  accept[i] * q_i(x) <= p_i(x)  (in double; this is
 *   r < min(1, p/q) up to the boundary, for r in (0,1]; p >= q always accepts, and a
 *   draft token the target gives 0 is never accepted). Stop at the first rejection
 *   i = n. On rejection the emitted token is sampled from the residual
 *   norm(max(0, p_n - q_n)): d_j = (double)p_n(j) - (double)q_n(j) (one IEEE
 *   subtraction), in the exact fixed point of kernels/sd_sample_math.h: D = Σ F(d_j)
 *   over d_j > 0 with F(x) = floor(x 2^62), an exact integer sum; the token is the
 *   first j with d_j > 0 and Σ_{k<=j, d_k>0} F(d_k) >= max(1, ceil(u D)) (u = sample[n];
 *   ceil(u D) computed exactly, sd_spec_u_target; if the sum falls short, the last j
 *   with d_j > 0). If D == 0 (p_n == q_n up to 2^-62, which a rejection cannot produce
 *   except through rounding) it samples p_n with sample[n] instead: never NaN. The
 *   GPU verifier (kernels/cuda/sd_cuda_spec.h) computes exactly this, bit for bit. If all γ are accepted (n = γ) the bonus token is
 *   sd_sample_inverse_cdf(p_γ, sample[γ]).
 * - SPECDEC_VERIFY_GREEDY: target token t_i = sd_sample_argmax(p_i); accept draft[i]
 *   while draft[i] == t_i; emit t_n at the first mismatch, or the bonus t_γ. Uniforms
 *   unused (u may be NULL). Output == the target's own greedy decoding.
 * - SPECDEC_VERIFY_MATCH (coupled): t_i = sd_sample_inverse_cdf(p_i, sample[i]); accept
 *   while draft[i] == t_i; emit t_n at the first mismatch, or the bonus t_γ. accept[]
 *   unused. With sample[i] = u(seed, seq, pos0+i, SAMPLE) the output equals plain
 *   decoding with the same seed (sd_verify_target_sample) for any draft and any γ.
 *
 * Output: out_tokens[0..n] = draft[0..n-1] followed by the emitted target token (n+1
 * tokens, caller-owned array of >= γ+1 entries), *out_n_accepted = n in [0, γ].
 * γ == 0 is allowed: it is a plain decoding step (one token from p_0 / sample[0]).
 *
 * Uniforms: sd_verify_fetch_uniforms() fills them from sd_rng for absolute positions:
 *   accept[i] = sd_rng_uniform_at(seed, seq, pos0 + i, SD_RNG_PURPOSE_ACCEPT)
 *   sample[i] = sd_rng_uniform_at(seed, seq, pos0 + i, SD_RNG_PURPOSE_SAMPLE)
 * so the emitted token at position j always uses the SAMPLE slot of j, whatever mode
 * or γ. Reuse of a position's slots in a later round (after the draft tokens beyond a
 * rejection were discarded) is sound: a round's output depends only on slots at
 * positions <= pos0 + n, and positions > pos0 + n are decided afresh next round.
 * Tests inject their own uniforms instead.
 *
 * Cost: O(γ·V) worst case (one residual or bonus scan plus O(1) per accepted token in
 * REJECTION; one argmax / inverse-CDF scan per position in GREEDY / MATCH).
 * No allocation, no scratch, thread-safe. */
#ifndef SD_VERIFY_H
#define SD_VERIFY_H

#include <stdint.h>
#include "specdec.h"
#include "sd_error.h"

typedef struct sd_verify_uniforms {
    double accept[SPECDEC_MAX_DRAFT];     /* r_i for draft[i] (REJECTION) */
    double sample[SPECDEC_MAX_DRAFT + 1]; /* u for the token emitted / target-sampled at pos0+i */
} sd_verify_uniforms;

/* Fill u for a round of length gamma (0..SPECDEC_MAX_DRAFT) starting at absolute
 * position pos0 (see above). Entries beyond gamma are left untouched. */
void sd_verify_fetch_uniforms(uint64_t seed, uint64_t sequence_id, int64_t pos0, int32_t gamma,
                              sd_verify_uniforms *u);

/* Run the verifier (see above). Returns SPECDEC_ERR_INVALID_ARGUMENT with detail
 * (outputs untouched) on: mode not REJECTION/GREEDY/MATCH, gamma outside
 * [0, SPECDEC_MAX_DRAFT], n_vocab <= 0, NULL p / draft (when gamma > 0) / out
 * pointers, q NULL in REJECTION with gamma > 0, u NULL in REJECTION / MATCH, a draft
 * id outside [0, n_vocab). eb may be NULL (thread-local detail). */
specdec_status sd_verify(specdec_verify_mode mode, int32_t gamma, int32_t n_vocab, const float *p,
                         const float *q, const int32_t *draft, const sd_verify_uniforms *u,
                         int32_t *out_tokens, int32_t *out_n_accepted, sd_errbuf *eb);

/* The draft model's token at absolute position `position` from its processed row q:
 *   REJECTION: sd_sample_inverse_cdf(q, V, u(seed, seq, position, SD_RNG_PURPOSE_DRAFT))
 *   MATCH:     sd_sample_inverse_cdf(q, V, u(seed, seq, position, SD_RNG_PURPOSE_SAMPLE))
 *              (the same u the target uses there: the coupling)
 *   GREEDY (and anything else): sd_sample_argmax(q, V).
 * Always in [0, n_vocab) (0 if n_vocab <= 0). */
int32_t sd_verify_draft_sample(specdec_verify_mode mode, const float *q, int32_t n_vocab, uint64_t seed,
                               uint64_t sequence_id, int64_t position);

/* Plain decoding (no draft): the target's token at `position` from its processed row p:
 *   GREEDY: sd_sample_argmax(p); otherwise sd_sample_inverse_cdf(p, V,
 *   u(seed, seq, position, SD_RNG_PURPOSE_SAMPLE)) — the same token REJECTION with
 *   γ = 0 and MATCH emit for that row and position. */
int32_t sd_verify_target_sample(specdec_verify_mode mode, const float *p, int32_t n_vocab, uint64_t seed,
                                uint64_t sequence_id, int64_t position);

#endif
