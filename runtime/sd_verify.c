/* sd_verify.c — speculative verification (rejection, greedy, coupled match) over host
 * probability rows, and the uniforms/draft/plain samplers that go with it. The math
 * is specified in sd_verify.h.
 *
 * Test-only mutants: tests/verify builds this file a second time with
 * -DSD_VERIFY_MUTANT=N to prove the statistical tests catch real bugs. The library
 * build never defines it (N = 0).
 *   1: residual = p (sample p_n instead of norm(max(0, p_n - q_n)) after a rejection)
 *   2: acceptance ratio without q (accept iff r <= p(x))
 *   3: uniforms reused across positions (every accept[i] is the one of pos0)
 *   4: off by one: the residual is built from the next row p_{n+1} */
#include "sd_verify.h"

#include "sd_rng.h"
#include "sd_sample_math.h"
#include "sd_sampling.h"

#ifndef SD_VERIFY_MUTANT
#define SD_VERIFY_MUTANT 0
#endif

void sd_verify_fetch_uniforms(uint64_t seed, uint64_t sequence_id, int64_t pos0, int32_t gamma,
                              sd_verify_uniforms *u) {
    if (!u) return;
    if (gamma < 0) gamma = 0;
    if (gamma > SPECDEC_MAX_DRAFT) gamma = SPECDEC_MAX_DRAFT;
    for (int32_t i = 0; i < gamma; i++) {
#if SD_VERIFY_MUTANT == 3
        u->accept[i] = sd_rng_uniform_at(seed, sequence_id, pos0, SD_RNG_PURPOSE_ACCEPT);
#else
        u->accept[i] = sd_rng_uniform_at(seed, sequence_id, pos0 + i, SD_RNG_PURPOSE_ACCEPT);
#endif
    }
    for (int32_t i = 0; i <= gamma; i++)
        u->sample[i] = sd_rng_uniform_at(seed, sequence_id, pos0 + i, SD_RNG_PURPOSE_SAMPLE);
}

/* Inverse CDF of norm(max(0, p - q)) with uniform u, in exact fixed point
 * (sd_sample_math.h); falls back to p when the residual has no fixed-point mass. Two
 * O(V) passes, no scratch. */
static int32_t sample_residual(const float *p, const float *q, int32_t V, double u) {
    sd_u128 D = 0;
    for (int32_t j = 0; j < V; j++) {
        double d = (double)p[j] - (double)q[j];
        if (d > 0.0) D += sd_spec_fix(d);
    }
    if (D == 0) return sd_sample_inverse_cdf(p, V, u);
    sd_u128 target = sd_spec_u_target(u, D); /* first prefix C with u * D <= C */
    if (target == 0) target = 1;             /* u <= 0 / NaN: the first j with mass */
    sd_u128 c = 0;
    int32_t last = -1;
    for (int32_t j = 0; j < V; j++) {
        double d = (double)p[j] - (double)q[j];
        if (!(d > 0.0)) continue;
        c += sd_spec_fix(d);
        last = j;
        if (c >= target) return j;
    }
    return last; /* D > 0 guarantees some d > 0 */
}

specdec_status sd_verify(specdec_verify_mode mode, int32_t gamma, int32_t n_vocab, const float *p,
                         const float *q, const int32_t *draft, const sd_verify_uniforms *u,
                         int32_t *out_tokens, int32_t *out_n_accepted, sd_errbuf *eb) {
    if (mode != SPECDEC_VERIFY_REJECTION && mode != SPECDEC_VERIFY_GREEDY && mode != SPECDEC_VERIFY_MATCH)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "verify: mode %d is not REJECTION, GREEDY or MATCH",
                       (int)mode);
    if (gamma < 0 || gamma > SPECDEC_MAX_DRAFT)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "verify: gamma %d outside [0, %d]", (int)gamma,
                       SPECDEC_MAX_DRAFT);
    if (n_vocab <= 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "verify: n_vocab %d must be > 0", (int)n_vocab);
    if (!p || !out_tokens || !out_n_accepted || (gamma > 0 && !draft))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "verify: NULL p, draft or output pointer");
    if (mode == SPECDEC_VERIFY_REJECTION && gamma > 0 && !q)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "verify: rejection mode needs the draft's q rows");
    if (mode != SPECDEC_VERIFY_GREEDY && !u)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "verify: uniforms are NULL");
    for (int32_t i = 0; i < gamma; i++)
        if (draft[i] < 0 || draft[i] >= n_vocab)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "verify: draft token %d = %d outside [0, %d)", (int)i,
                           (int)draft[i], (int)n_vocab);

    const size_t V = (size_t)n_vocab;
    int32_t n = 0;
    int32_t t = 0;
    if (mode == SPECDEC_VERIFY_REJECTION) {
        for (n = 0; n < gamma; n++) {
            const int32_t x = draft[n];
            const double px = (double)p[(size_t)n * V + (size_t)x];
            const double qx = (double)q[(size_t)n * V + (size_t)x];
#if SD_VERIFY_MUTANT == 2
            const int accept = px > 0.0 && u->accept[n] <= px;
            (void)qx;
#else
            const int accept = px > 0.0 && u->accept[n] * qx <= px;
#endif
            if (!accept) break;
        }
        if (n < gamma) {
#if SD_VERIFY_MUTANT == 1
            (void)sample_residual;
            t = sd_sample_inverse_cdf(p + (size_t)n * V, n_vocab, u->sample[n]);
#elif SD_VERIFY_MUTANT == 4
            t = sample_residual(p + (size_t)(n + 1) * V, q + (size_t)n * V, n_vocab, u->sample[n]);
#else
            t = sample_residual(p + (size_t)n * V, q + (size_t)n * V, n_vocab, u->sample[n]);
#endif
        } else {
            t = sd_sample_inverse_cdf(p + (size_t)gamma * V, n_vocab, u->sample[gamma]);
        }
    } else {
        for (n = 0; n <= gamma; n++) {
            const float *row = p + (size_t)n * V;
            t = (mode == SPECDEC_VERIFY_GREEDY) ? sd_sample_argmax(row, n_vocab)
                                                : sd_sample_inverse_cdf(row, n_vocab, u->sample[n]);
            if (n == gamma || draft[n] != t) break;
        }
    }
    for (int32_t i = 0; i < n; i++) out_tokens[i] = draft[i];
    out_tokens[n] = t;
    *out_n_accepted = n;
    return SPECDEC_OK;
}

int32_t sd_verify_draft_sample(specdec_verify_mode mode, const float *q, int32_t n_vocab, uint64_t seed,
                               uint64_t sequence_id, int64_t position) {
    if (mode == SPECDEC_VERIFY_REJECTION)
        return sd_sample_inverse_cdf(q, n_vocab,
                                     sd_rng_uniform_at(seed, sequence_id, position, SD_RNG_PURPOSE_DRAFT));
    if (mode == SPECDEC_VERIFY_MATCH)
        return sd_sample_inverse_cdf(q, n_vocab,
                                     sd_rng_uniform_at(seed, sequence_id, position, SD_RNG_PURPOSE_SAMPLE));
    return sd_sample_argmax(q, n_vocab);
}

int32_t sd_verify_target_sample(specdec_verify_mode mode, const float *p, int32_t n_vocab, uint64_t seed,
                                uint64_t sequence_id, int64_t position) {
    if (mode == SPECDEC_VERIFY_GREEDY) return sd_sample_argmax(p, n_vocab);
    return sd_sample_inverse_cdf(p, n_vocab, sd_rng_uniform_at(seed, sequence_id, position, SD_RNG_PURPOSE_SAMPLE));
}
