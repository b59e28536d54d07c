/* sd_cpu_verify_det.c — the CPU reference verifier for deterministic drafts (q one-hot
 * on each draft token; sd_cpu_verify.h, docs/DRAFTERS.md for the proof). Alone in its
 * file so that tests can link deliberately broken variants in its place
 * (tests/drafters/ngram_mutants.c). */
#include "sd_cpu_sample.h"
#include "sd_cpu_verify.h"
#include "sd_sample_rules.h"

specdec_status sd_verify_det(specdec_verify_mode mode, int32_t gamma, int32_t n_vocab, const float *p,
                             const int32_t *draft, const sd_verify_uniforms *u, int32_t *out_tokens,
                             int32_t *out_n_accepted, sd_errbuf *eb) {
    if (mode != SPECDEC_VERIFY_REJECTION) /* GREEDY and MATCH never read q */
        return sd_verify(mode, gamma, n_vocab, p, NULL, draft, u, out_tokens, out_n_accepted, eb);
    specdec_status st = sd_verify_det_check(mode, gamma, n_vocab, p, draft, u, out_tokens, out_n_accepted, eb);
    if (st != SPECDEC_OK) return st;
    const size_t V = (size_t)n_vocab;
    int32_t n = 0;
    /* q(x) = 1: accepted with probability p(x) */
    while (n < gamma && sd_rule_accept(u->accept[n], p[(size_t)n * V + (size_t)draft[n]], 1.0f)) n++;
    const int32_t t = n < gamma ? sd_verify_residual(p + (size_t)n * V, NULL, draft[n], n_vocab, u->sample[n])
                                : sd_sample_inverse_cdf(p + (size_t)gamma * V, n_vocab, u->sample[gamma]);
    for (int32_t i = 0; i < n; i++) out_tokens[i] = draft[i];
    out_tokens[n] = t;
    *out_n_accepted = n;
    return SPECDEC_OK;
}
