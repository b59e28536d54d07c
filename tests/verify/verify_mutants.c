/* verify_mutants.c — deliberately broken verifiers, linked INSTEAD of the library's
 * sd_verify / sd_verify_fetch_uniforms (kernels/cpu/sd_cpu_verify.c) into the
 * test_verify_mutant_N executables, to prove the statistical test catches real bugs.
 * Built only for the tests; the library never contains a mutant.
 *   1: residual = p (sample p_n instead of norm(max(0, p_n - q_n)) after a rejection)
 *   2: acceptance ratio without q (accept iff r <= p(x))
 *   3: uniforms reused across positions (every accept[i] is the one of pos0)
 *   4: off by one: the residual is built from the next row p_{n+1}
 * Everything else is the reference verifier, written with the same rules. */
#include "sd_cpu_sample.h"
#include "sd_cpu_verify.h"
#include "sd_rng.h"
#include "sd_sample_rules.h"

#ifndef SD_VERIFY_MUTANT
#error "build with -DSD_VERIFY_MUTANT=1..4"
#endif

void sd_verify_fetch_uniforms(uint64_t seed, uint64_t sequence_id, int64_t pos0, int32_t gamma,
                              sd_verify_uniforms *u) {
    for (int32_t i = 0; i < gamma; i++)
        u->accept[i] = sd_rng_uniform_at(seed, sequence_id, SD_VERIFY_MUTANT == 3 ? pos0 : pos0 + i,
                                         SD_RNG_PURPOSE_ACCEPT);
    for (int32_t i = 0; i <= gamma; i++)
        u->sample[i] = sd_rng_uniform_at(seed, sequence_id, pos0 + i, SD_RNG_PURPOSE_SAMPLE);
}

static int32_t mutant_residual(const float *p, const float *q, int32_t V, double u) {
    sd_u128 D = 0, c = 0;
    int pos;
    for (int32_t j = 0; j < V; j++) D += sd_rule_residual(p[j], q[j], &pos);
    if (D == 0) return sd_sample_inverse_cdf(p, V, u);
    sd_u128 target = sd_rule_u_target(u, D);
    int32_t last = 0;
    for (int32_t j = 0; j < V; j++) {
        c += sd_rule_residual(p[j], q[j], &pos);
        if (pos) last = j;
        if (pos && c >= (target ? target : 1)) return j;
    }
    return last;
}

specdec_status sd_verify(specdec_verify_mode mode, int32_t gamma, int32_t n_vocab, const float *p,
                         const float *q, const int32_t *draft, const sd_verify_uniforms *u,
                         int32_t *out_tokens, int32_t *out_n_accepted, sd_errbuf *eb) {
    (void)eb;
    const size_t V = (size_t)n_vocab;
    int32_t n = 0, t = 0;
    if (mode != SPECDEC_VERIFY_REJECTION) { /* GREEDY / MATCH: as the reference (no mutation there) */
        for (n = 0; n <= gamma; n++) {
            const float *row = p + (size_t)n * V;
            t = mode == SPECDEC_VERIFY_GREEDY ? sd_sample_argmax(row, n_vocab)
                                              : sd_sample_inverse_cdf(row, n_vocab, u->sample[n]);
            if (n == gamma || draft[n] != t) break;
        }
        for (int32_t i = 0; i < n; i++) out_tokens[i] = draft[i];
        out_tokens[n] = t;
        *out_n_accepted = n;
        return SPECDEC_OK;
    }
    for (; n < gamma; n++) {
        const float px = p[(size_t)n * V + (size_t)draft[n]], qx = q[(size_t)n * V + (size_t)draft[n]];
        const int accept = SD_VERIFY_MUTANT == 2 ? px > 0.0f && u->accept[n] <= (double)px
                                                 : sd_rule_accept(u->accept[n], px, qx);
        if (!accept) break;
    }
    if (n == gamma) t = sd_sample_inverse_cdf(p + (size_t)gamma * V, n_vocab, u->sample[gamma]);
    else if (SD_VERIFY_MUTANT == 1) t = sd_sample_inverse_cdf(p + (size_t)n * V, n_vocab, u->sample[n]);
    else if (SD_VERIFY_MUTANT == 4) t = mutant_residual(p + (size_t)(n + 1) * V, q + (size_t)n * V, n_vocab, u->sample[n]);
    else t = mutant_residual(p + (size_t)n * V, q + (size_t)n * V, n_vocab, u->sample[n]);
    for (int32_t i = 0; i < n; i++) out_tokens[i] = draft[i];
    out_tokens[n] = t;
    *out_n_accepted = n;
    return SPECDEC_OK;
}

/* The other symbols of sd_cpu_verify.o, so the library's member is never linked in
 * next to the mutant (same rules as the library's). */
int32_t sd_verify_draft_sample(specdec_verify_mode mode, const float *q, int32_t n_vocab, uint64_t seed,
                               uint64_t sequence_id, int64_t position) {
    const int purpose = sd_rule_draft_purpose(mode);
    if (purpose < 0) return sd_sample_argmax(q, n_vocab);
    return sd_sample_inverse_cdf(q, n_vocab, sd_rng_uniform_at(seed, sequence_id, position, purpose));
}

int32_t sd_verify_target_sample(specdec_verify_mode mode, const float *p, int32_t n_vocab, uint64_t seed,
                                uint64_t sequence_id, int64_t position) {
    if (mode == SPECDEC_VERIFY_GREEDY) return sd_sample_argmax(p, n_vocab);
    return sd_sample_inverse_cdf(p, n_vocab, sd_rng_uniform_at(seed, sequence_id, position, SD_RNG_PURPOSE_SAMPLE));
}
