/* sd_cpu_verify.c — the CPU reference verifier (rejection, greedy, coupled match) and
 * the draft / plain samplers; every decision is a core/sd_sample_rules.h function. */
#include "sd_cpu_verify.h"

#include "sd_cpu_sample.h"
#include "sd_rng.h"
#include "sd_sample_rules.h"

void sd_verify_fetch_uniforms(uint64_t seed, uint64_t sequence_id, int64_t pos0, int32_t gamma,
                              sd_verify_uniforms *u) {
    if (!u) return;
    if (gamma < 0) gamma = 0;
    if (gamma > SPECDEC_MAX_DRAFT) gamma = SPECDEC_MAX_DRAFT;
    for (int32_t i = 0; i < gamma; i++)
        u->accept[i] = sd_rng_uniform_at(seed, sequence_id, pos0 + i, SD_RNG_PURPOSE_ACCEPT);
    for (int32_t i = 0; i <= gamma; i++)
        u->sample[i] = sd_rng_uniform_at(seed, sequence_id, pos0 + i, SD_RNG_PURPOSE_SAMPLE);
}

/* q_j of a draft row: dense, or one-hot on the draft token x (q NULL: a deterministic
 * draft, docs/DRAFTERS.md). */
static float q_at(const float *q, int32_t j, int32_t x) { return q ? q[j] : (j == x ? 1.0f : 0.0f); }

int32_t sd_verify_residual(const float *p, const float *q, int32_t x, int32_t V, double u) {
    sd_u128 D = 0;
    int pos;
    for (int32_t j = 0; j < V; j++) D += sd_rule_residual(p[j], q_at(q, j, x), &pos);
    if (D == 0) return sd_sample_inverse_cdf(p, V, u);
    sd_u128 target = sd_rule_u_target(u, D); /* first prefix C with u * D <= C */
    if (target == 0) target = 1;             /* u <= 0 / NaN: the first j with mass */
    sd_u128 c = 0;
    int32_t last = -1;
    for (int32_t j = 0; j < V; j++) {
        const uint64_t m = sd_rule_residual(p[j], q_at(q, j, x), &pos);
        if (!pos) continue;
        c += m;
        last = j;
        if (c >= target) return j;
    }
    return last; /* D > 0 guarantees some d > 0 */
}

static specdec_status verify_check(specdec_verify_mode mode, int32_t gamma, int32_t n_vocab, const float *p,
                                   const float *q, int det, const int32_t *draft, const sd_verify_uniforms *u,
                                   const int32_t *out_tokens, const int32_t *out_n_accepted, sd_errbuf *eb) {
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
    if (mode == SPECDEC_VERIFY_REJECTION && gamma > 0 && !q && !det)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "verify: rejection mode needs the draft's q rows");
    if (mode != SPECDEC_VERIFY_GREEDY && !u)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "verify: uniforms are NULL");
    for (int32_t i = 0; i < gamma; i++)
        if (draft[i] < 0 || draft[i] >= n_vocab)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "verify: draft token %d = %d outside [0, %d)", (int)i,
                           (int)draft[i], (int)n_vocab);
    return SPECDEC_OK;
}

/* REJECTION: accept while the rule says so, then the residual or the bonus token. */
static int32_t verify_rejection(int32_t gamma, int32_t V, const float *p, const float *q, const int32_t *draft,
                                const sd_verify_uniforms *u, int32_t *n_out) {
    const size_t Vs = (size_t)V;
    int32_t n = 0;
    while (n < gamma && sd_rule_accept(u->accept[n], p[(size_t)n * Vs + (size_t)draft[n]],
                                       q[(size_t)n * Vs + (size_t)draft[n]]))
        n++;
    *n_out = n;
    if (n < gamma) return sd_verify_residual(p + (size_t)n * Vs, q + (size_t)n * Vs, draft[n], V, u->sample[n]);
    return sd_sample_inverse_cdf(p + (size_t)gamma * Vs, V, u->sample[gamma]);
}

/* GREEDY / MATCH: the target's own token at each position; accept while equal. */
static int32_t verify_target_tokens(specdec_verify_mode mode, int32_t gamma, int32_t V, const float *p,
                                    const int32_t *draft, const sd_verify_uniforms *u, int32_t *n_out) {
    int32_t n, t = 0;
    for (n = 0; n <= gamma; n++) {
        const float *row = p + (size_t)n * (size_t)V;
        t = mode == SPECDEC_VERIFY_GREEDY ? sd_sample_argmax(row, V) : sd_sample_inverse_cdf(row, V, u->sample[n]);
        if (n == gamma || draft[n] != t) break;
    }
    *n_out = n;
    return t;
}

specdec_status sd_verify(specdec_verify_mode mode, int32_t gamma, int32_t n_vocab, const float *p,
                         const float *q, const int32_t *draft, const sd_verify_uniforms *u,
                         int32_t *out_tokens, int32_t *out_n_accepted, sd_errbuf *eb) {
    specdec_status st = verify_check(mode, gamma, n_vocab, p, q, 0, draft, u, out_tokens, out_n_accepted, eb);
    if (st != SPECDEC_OK) return st;
    int32_t n = 0;
    const int32_t t = mode == SPECDEC_VERIFY_REJECTION ? verify_rejection(gamma, n_vocab, p, q, draft, u, &n)
                                                       : verify_target_tokens(mode, gamma, n_vocab, p, draft, u, &n);
    for (int32_t i = 0; i < n; i++) out_tokens[i] = draft[i];
    out_tokens[n] = t;
    *out_n_accepted = n;
    return SPECDEC_OK;
}

specdec_status sd_verify_det_check(specdec_verify_mode mode, int32_t gamma, int32_t n_vocab, const float *p,
                                   const int32_t *draft, const sd_verify_uniforms *u, const int32_t *out_tokens,
                                   const int32_t *out_n_accepted, sd_errbuf *eb) {
    return verify_check(mode, gamma, n_vocab, p, NULL, 1, draft, u, out_tokens, out_n_accepted, eb);
}

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
