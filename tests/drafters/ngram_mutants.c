/* ngram_mutants.c — deliberately broken verifiers for deterministic drafts, linked
 * INSTEAD of the library's sd_verify_det (kernels/cpu/sd_cpu_verify_det.c) into the
 * ngram_dist_mutant_N executables (tests/engine/test_engine_dist.c "ngram" with
 * SD_NGRAM_MUTANT), to prove the statistical test catches real bugs. Built only for the
 * tests; the library never contains a mutant.
 *   1: the residual is p itself (the rejected draft token may be emitted after all)
 *   2: q taken as a uniform row (a dense-q code path fed a placeholder): accept iff
 *      u / V <= p(x), far too often
 * GREEDY and MATCH are the reference's (sd_verify: they never read q). */
#include "sd_cpu_sample.h"
#include "sd_cpu_verify.h"
#include "sd_sample_rules.h"

#ifndef SD_NGRAM_MUTANT
#error "build with -DSD_NGRAM_MUTANT=1..2"
#endif

specdec_status sd_verify_det(specdec_verify_mode mode, int32_t gamma, int32_t n_vocab, const float *p,
                             const int32_t *draft, const sd_verify_uniforms *u, int32_t *out_tokens,
                             int32_t *out_n_accepted, sd_errbuf *eb) {
    if (mode != SPECDEC_VERIFY_REJECTION)
        return sd_verify(mode, gamma, n_vocab, p, NULL, draft, u, out_tokens, out_n_accepted, eb);
    const size_t V = (size_t)n_vocab;
    const float qx = SD_NGRAM_MUTANT == 2 ? 1.0f / (float)n_vocab : 1.0f;
    int32_t n = 0;
    while (n < gamma && sd_rule_accept(u->accept[n], p[(size_t)n * V + (size_t)draft[n]], qx)) n++;
    int32_t t;
    if (n == gamma) t = sd_sample_inverse_cdf(p + (size_t)gamma * V, n_vocab, u->sample[gamma]);
    else if (SD_NGRAM_MUTANT == 1) t = sd_sample_inverse_cdf(p + (size_t)n * V, n_vocab, u->sample[n]);
    else t = sd_verify_residual(p + (size_t)n * V, NULL, draft[n], n_vocab, u->sample[n]);
    for (int32_t i = 0; i < n; i++) out_tokens[i] = draft[i];
    out_tokens[n] = t;
    *out_n_accepted = n;
    return SPECDEC_OK;
}
