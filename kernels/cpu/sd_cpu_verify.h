/* sd_cpu_verify.h — the CPU reference of the speculative verifier over host
 * probability rows (rejection, greedy, coupled match) and the draft / plain samplers
 * that go with it. The rules are core/sd_sample_rules.h's ("Verification of one
 * round"); the CUDA verifier (kernels/cuda/sd_cuda_verify.cu) computes them bit for bit.
 *
 * One round: the draft proposed x_1..x_γ at absolute positions pos0..pos0+γ-1, sampling
 * x_i from the processed row q_i; the target scored them in one pass giving processed
 * rows p_1..p_{γ+1} (p_i is the target's distribution for position pos0+i-1).
 *
 * Memory layout (all borrowed, row-major fp32, n_vocab floats per row):
 *   p      (γ+1) rows: p[i*V .. i*V+V) = p_{i+1}, distribution at position pos0+i
 *   q      γ rows:     q[i*V ..) = q_{i+1}, the row draft[i] was sampled from
 *                      (may be NULL in GREEDY and MATCH modes)
 *   draft  γ token ids in [0, V)
 * Output: out_tokens[0..n] = draft[0..n-1] followed by the emitted target token (n+1
 * tokens, caller-owned array of >= γ+1 entries), *out_n_accepted = n in [0, γ].
 * γ == 0 is allowed: it is a plain decoding step (one token from p_0 / sample[0]).
 *
 * Uniforms: sd_verify_fetch_uniforms() fills them from sd_rng for absolute positions
 * (accept[i] = slot (pos0 + i, ACCEPT), sample[i] = slot (pos0 + i, SAMPLE)), so the
 * emitted token at position j always uses the SAMPLE slot of j, whatever mode or γ.
 * Reuse of a position's slots in a later round (after the draft tokens beyond a
 * rejection were discarded) is sound: a round's output depends only on slots at
 * positions <= pos0 + n, and positions > pos0 + n are decided afresh next round.
 * Tests inject their own uniforms instead.
 *
 * Cost: O(γ·V) worst case. No allocation, no scratch, thread-safe. */
#ifndef SD_CPU_VERIFY_H
#define SD_CPU_VERIFY_H

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

/* Run the verifier (core/sd_sample_rules.h). Returns SPECDEC_ERR_INVALID_ARGUMENT with detail
 * (outputs untouched) on: mode not REJECTION/GREEDY/MATCH, gamma outside
 * [0, SPECDEC_MAX_DRAFT], n_vocab <= 0, NULL p / draft (when gamma > 0) / out
 * pointers, q NULL in REJECTION with gamma > 0, u NULL in REJECTION / MATCH, a draft
 * id outside [0, n_vocab). eb may be NULL (thread-local detail). */
specdec_status sd_verify(specdec_verify_mode mode, int32_t gamma, int32_t n_vocab, const float *p,
                         const float *q, const int32_t *draft, const sd_verify_uniforms *u,
                         int32_t *out_tokens, int32_t *out_n_accepted, sd_errbuf *eb);

/* sd_verify for DETERMINISTIC drafts (a drafter whose q is one-hot on its token, e.g.
 * n-gram lookup; docs/DRAFTERS.md): q_i = onehot(draft[i]), no rows. In its own file
 * (sd_cpu_verify_det.c) so that tests can link broken variants in its place. REJECTION accepts
 * draft[i] iff sd_rule_accept(accept[i], p_i(x), 1), i.e. with probability p_i(x), and
 * on rejection samples the residual norm(max(0, p_i - onehot(x))) = p_i without x,
 * renormalised (p_i itself if nothing else has mass); GREEDY and MATCH are sd_verify's
 * (they never read q). Same checks and outputs as sd_verify. */
specdec_status sd_verify_det(specdec_verify_mode mode, int32_t gamma, int32_t n_vocab, const float *p,
                             const int32_t *draft, const sd_verify_uniforms *u, int32_t *out_tokens,
                             int32_t *out_n_accepted, sd_errbuf *eb);

/* sd_verify_det's argument checks (sd_verify's, without q). */
specdec_status sd_verify_det_check(specdec_verify_mode mode, int32_t gamma, int32_t n_vocab, const float *p,
                                   const int32_t *draft, const sd_verify_uniforms *u, const int32_t *out_tokens,
                                   const int32_t *out_n_accepted, sd_errbuf *eb);

/* The residual token: inverse CDF of norm(max(0, p - q)) with uniform u, in exact fixed
 * point (core/sd_sample_rules.h: sd_rule_residual, sd_rule_u_target); p itself when the
 * residual has no mass. q NULL: q one-hot on x (the residual is p without x). Two O(V)
 * passes, no scratch. */
int32_t sd_verify_residual(const float *p, const float *q, int32_t x, int32_t V, double u);

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
