/* sd_sample_rules.h — THE sampling and verification rules of specdec, written once for
 * the CPU reference (kernels/cpu/sd_cpu_sample.c, sd_cpu_verify.c; C11) and the CUDA
 * kernels (kernels/cuda/sd_cuda_sample*.cu, sd_cuda_verify.cu; nvcc). Header-only, SD_HD.
 *
 * The two sides use different algorithms (a heap and sequential scans on the CPU, block
 * reductions and a radix select on the GPU) but every decision either side takes about
 * one element — its weight, its rank, whether a filter keeps it, its fixed-point mass,
 * whether a draft token is accepted, which uniform decides a position — is made by a
 * function of this header, and every sum is an exact integer sum. Hence the same bits
 * on both sides, whatever the summation order or launch geometry.
 *
 * Logits -> processed probabilities (the distribution sampled from; applied identically
 * to the target's p rows and the draft's q rows), in this exact order:
 *   0. Sanitise: NaN logits are treated as -inf.
 *   1. Greedy: temperature == 0 -> one-hot of the argmax (sd_rule_argmax_better: larger
 *      value wins, +inf largest, NaN never, lowest id wins ties; all -inf/NaN -> token
 *      0). top_k / top_p / min_p are ignored (the argmax survives them anyway).
 *   2. Temperature: z_i = logit_i / T in double (sd_rule_scale); m = max_i z_i
 *      (= sd_rule_scale of the largest logit: division by T > 0 is monotone).
 *   3. Weights (sd_rule_weight): m == -inf -> one-hot of token 0, done; m == +inf ->
 *      w_i = [z_i == +inf] (the +inf tokens share the mass); otherwise
 *      w_i = sd_rule_exp(z_i - m) (0 for -inf; the top token gets exactly 1).
 *   4. Rank: tokens ordered by (w descending, id ascending) (sd_rule_ranks_before);
 *      only w > 0 tokens are candidates; "top" below means first in this order.
 *   5. top-k (sd_rule_topk_on: 0 < top_k < #candidates): keep the top_k first.
 *   6. top-p (top_p < 1): S = sum of F(w_i) over the kept tokens (F = sd_rule_fix,
 *      exact); keep a token iff the fixed-point mass of the kept tokens ranked before it
 *      is < sd_rule_topp_threshold(top_p, S) (exactly C_before < top_p * S): the
 *      smallest prefix whose mass reaches top_p * S. The first token is always kept.
 *   7. min-p (min_p > 0): keep token i iff w_i >= min_p * w_top (sd_rule_minp_keep;
 *      w_top == 1 in both branches of step 3), after top-p.
 *   8. Normalise: S' = sum F(w_i) over kept tokens; probs_i = sd_rule_norm(w_i, S');
 *      removed tokens get exactly 0.
 *
 * Inverse-CDF sampling of a processed row with uniform u: C_i = sum_{j<=i, p_j>0} F(p_j);
 * the token is the first i with p_i > 0 and C_i >= ceil(u 2^62) (sd_rule_cdf_target /
 * sd_rule_u_target: u <= C_i 2^-62 exactly). If the row falls short (rounding, or u > 1)
 * the last token with p_i > 0; u <= 0 or NaN -> the first token with mass; a row with
 * no positive entry -> 0.
 *
 * Uniforms (core/sd_rng.h): every decision at absolute position pos uses one Philox word
 * x of slot (seed, sequence_id, pos, purpose), u = (x + 1) 2^-32 (sd_rule_word_to_u):
 *   SAMPLE  the token emitted at pos by sampling (plain decoding, match-mode target and
 *           draft samples — the coupling —, rejection residual and bonus tokens);
 *   DRAFT   the draft's own sample in rejection mode (sd_rule_draft_purpose);
 *   ACCEPT  the rejection test of the draft token at pos.
 *
 * Verification of one round (draft x_1..x_γ at positions pos0..pos0+γ-1 sampled from
 * processed rows q_i; target rows p_1..p_{γ+1}):
 *   REJECTION: accept x_i iff sd_rule_accept(u_accept, p_i(x_i), q_i(x_i)), i.e.
 *     p(x) > 0 and u * q(x) <= p(x) in double (r < min(1, p/q) up to the boundary);
 *     stop at the first rejection n. Then the residual norm(max(0, p_n - q_n)):
 *     d_j = (double)p_n(j) - (double)q_n(j), D = sum F(d_j) over d_j > 0
 *     (sd_rule_residual), the token is the first j with d_j > 0 whose prefix reaches
 *     sd_rule_u_target(u_sample, D) (1 at least); D == 0 -> sample p_n instead (never
 *     NaN). All γ accepted -> the bonus token: inverse CDF of p_{γ+1} with u_sample.
 *   GREEDY: target token t_i = argmax p_i; accept while x_i == t_i; emit t_n.
 *   MATCH (coupled): t_i = inverse CDF of p_i with the SAMPLE uniform of its position;
 *     accept while x_i == t_i; emit t_n. Output == plain decoding with the same seed.
 *
 * Fixed point: each non-negative double weight x in [0, 1] becomes the integer
 *     F(x) = floor(x * 2^62)                         (sd_rule_fix)
 * and sums / prefix sums are exact 128-bit integer sums. The only floating-point results
 * derived from them are S_d = (double)(S >> 18) * 2^-44 (sd_rule_fix_to_double; S >= 2^62
 * whenever the top token is kept, so the truncation is < 2^-44 relative) and
 * probs_i = (float)(w_i / S_d) (sd_rule_norm; one IEEE division).
 *
 * exp: sd_rule_exp(x) is the specification's own exp (not glibc's, not libdevice's),
 * built only from IEEE-exact operations: x = k ln2 + r with k = floor(fma(x, 1/ln2, 0.5)),
 * r by a two-constant Cody-Waite split (k * LN2_HI exact), e^r by a degree-13 Taylor
 * polynomial in Horner form with explicit fma() only, then an exact scaling by 2^k (a
 * subnormal result by ONE correctly rounded multiply). No expression has a plain
 * a * b + c, so contraction (gcc -ffp-contract=fast, nvcc --fmad=true) cannot change it.
 * Accuracy: a few ulp (tests/verify measures it); exp(0) == 1 exactly; -inf -> 0,
 * +inf -> +inf, NaN -> NaN, x > 709.78 -> +inf, x < -746 -> 0.
 *
 * sd_u128 is the GCC/clang/nvcc unsigned __int128 (host: x86-64 / aarch64 only). */
#ifndef SD_SAMPLE_RULES_H
#define SD_SAMPLE_RULES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "specdec.h"
#include "sd_error.h"
#include "sd_hostdev.h"
#include "sd_rng.h"

/* Sampling parameters of one sequence (checked by sd_sampling_check_params below
 * before any rule runs). */
typedef struct sd_sampling_params {
    float temperature; /* >= 0, finite; 0 = greedy */
    int32_t top_k;     /* >= 0; 0 or >= #candidates = disabled */
    float top_p;       /* in (0, 1]; 1 = disabled */
    float min_p;       /* in [0, 1]; 0 = disabled */
} sd_sampling_params;

#ifdef __cplusplus
extern "C" {
#endif
/* Fill sp from the public generate params (temperature, top_k, top_p, min_p). */
sd_sampling_params sd_sampling_params_from(const specdec_generate_params *gp);

/* SPECDEC_OK, or SPECDEC_ERR_INVALID_ARGUMENT with detail naming the bad field and
 * value (temperature < 0 / NaN / inf, top_k < 0, top_p outside (0,1] or NaN, min_p
 * outside [0,1] or NaN). eb may be NULL (thread-local detail). */
specdec_status sd_sampling_check_params(const sd_sampling_params *sp, sd_errbuf *eb);
#ifdef __cplusplus
}
#endif

__extension__ typedef unsigned __int128 sd_u128;

#define SD_RULE_FIX_BITS 62

/* Separately rounded basic operations. On the device they are the _rn intrinsics, which
 * nvcc never fuses; on the host a lone operation per expression is already rounded on
 * its own (C11 contracts only within one expression, and never across a function call's
 * value under -std=c11's default -ffp-contract=off). */
#if defined(__CUDA_ARCH__)
#define SD_RULE_DMUL(a, b) __dmul_rn((a), (b))
#define SD_RULE_DDIV(a, b) __ddiv_rn((a), (b))
#define SD_RULE_DSUB(a, b) __dsub_rn((a), (b))
#else
#define SD_RULE_DMUL(a, b) ((a) * (b))
#define SD_RULE_DDIV(a, b) ((a) / (b))
#define SD_RULE_DSUB(a, b) ((a) - (b))
#endif

/* --- exp ---------------------------------------------------------------------------- */

/* 2^k for -1022 <= k <= 1023, built from its bit pattern (exact). */
SD_HD double sd_rule_pow2(int k) {
    uint64_t b = (uint64_t)(k + 1023) << 52;
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

#define SD_RULE_EXP_HI 709.782712893383973096  /* ~ln(DBL_MAX): above -> +inf */
#define SD_RULE_EXP_LO (-746.0)                /* exp(-746) < 2^-1076: rounds to 0 */

SD_HD double sd_rule_exp(double x) {
    if (x != x) return x + x; /* NaN stays NaN (quiet) */
    if (x > SD_RULE_EXP_HI) return INFINITY;
    if (x < SD_RULE_EXP_LO) return 0.0; /* includes -inf */
    const double inv_ln2 = 0x1.71547652b82fep+0;
    const double ln2_hi = 0x1.62e42fee00000p-1; /* 32 significant bits: k * ln2_hi exact */
    const double ln2_lo = 0x1.a39ef35793c76p-33;
    const double kd = floor(fma(x, inv_ln2, 0.5)); /* |k| <= 1077 */
    const double hi = fma(-kd, ln2_hi, x);          /* exact (Sterbenz / k = 0) */
    const double r = fma(-kd, ln2_lo, hi);          /* |r| <= ~0.35 */
    /* e^r = sum_{n<=13} r^n / n!; the tail r^14/14! < 5e-18 relative */
    double q = 0x1.6124613a86d09p-33;    /* 1/13! */
    q = fma(q, r, 0x1.1eed8eff8d898p-29); /* 1/12! */
    q = fma(q, r, 0x1.ae64567f544e4p-26); /* 1/11! */
    q = fma(q, r, 0x1.27e4fb7789f5cp-22); /* 1/10! */
    q = fma(q, r, 0x1.71de3a556c734p-19); /* 1/9! */
    q = fma(q, r, 0x1.a01a01a01a01ap-16); /* 1/8! */
    q = fma(q, r, 0x1.a01a01a01a01ap-13); /* 1/7! */
    q = fma(q, r, 0x1.6c16c16c16c17p-10); /* 1/6! */
    q = fma(q, r, 0x1.1111111111111p-7);  /* 1/5! */
    q = fma(q, r, 0x1.5555555555555p-5);  /* 1/4! */
    q = fma(q, r, 0x1.5555555555555p-3);  /* 1/3! */
    q = fma(q, r, 0.5);
    q = fma(q, r, 1.0);
    double p = fma(q, r, 1.0); /* in [0.70, 1.42] */
    int k = (int)kd;
    if (k > 1023) { /* only for x within a hair of SD_RULE_EXP_HI: 2^1024 is not a double */
        p = SD_RULE_DMUL(p, 2.0);
        k -= 1;
    }
    if (k >= -1022) return SD_RULE_DMUL(p, sd_rule_pow2(k)); /* exact (or overflow to inf) */
    /* subnormal range: an exact scaling into the normal range, then one rounding */
    return SD_RULE_DMUL(SD_RULE_DMUL(p, sd_rule_pow2(k + 1000)), sd_rule_pow2(-1000));
}

/* --- fixed point ------------------------------------------------------------------- */

/* floor(x * 2^62) for x in [0, 1] (values outside are clamped; NaN -> 0). The product
 * by a power of two is exact; the conversion truncates on both sides. */
SD_HD uint64_t sd_rule_fix(double x) {
    if (!(x > 0.0)) return 0;
    if (x >= 1.0) return (uint64_t)1 << SD_RULE_FIX_BITS;
#if defined(__CUDA_ARCH__)
    return __double2ull_rz(x * 0x1p62);
#else
    return (uint64_t)(x * 0x1p62);
#endif
}

/* The double value of a fixed-point sum S (>= 0): (double)(S >> 18) * 2^-44. */
SD_HD double sd_rule_fix_to_double(sd_u128 s) {
    uint64_t t = (uint64_t)(s >> 18); /* S < 2^18 * 2^62 for V <= 2^18 (rows summing to ~1: any V) */
#if defined(__CUDA_ARCH__)
    return __dmul_rn(__ull2double_rn(t), 0x1p-44);
#else
    return (double)t * 0x1p-44;
#endif
}

/* Normalised probability of a kept weight w with fixed-point total S. */
SD_HD float sd_rule_norm(double w, sd_u128 s) {
#if defined(__CUDA_ARCH__)
    return __double2float_rn(__ddiv_rn(w, sd_rule_fix_to_double(s)));
#else
    return (float)(w / sd_rule_fix_to_double(s));
#endif
}

/* top-p threshold: returns T such that for any fixed-point mass C,
 *     C < T   <=>   C < top_p * S   (exactly, in real numbers).
 * top_p = m * 2^-s with m a 24-bit integer; C < m S / 2^s <=> C * 2^s < m S
 * <=> C < ceil(m S / 2^s) = ((m S - 1) >> s) + 1 (m S > 0). top_p in (0, 1). */
SD_HD sd_u128 sd_rule_topp_threshold(float top_p, sd_u128 s) {
    if (!(top_p > 0.0f) || s == 0) return 0;
    /* decompose the float exactly: top_p = m * 2^-sh */
    double t = (double)top_p;
    int sh = 0;
    while (t != (double)(uint64_t)t) { /* at most 149 + 24 doublings, exact */
        t *= 2.0;
        sh++;
    }
    sd_u128 ms = (sd_u128)(uint64_t)t * s; /* < 2^24 * 2^80 */
    if (sh >= 128) return 1;
    return ((ms - 1) >> sh) + 1;
}

/* ceil(u * D), exactly, for a double u in (0, 1] and D < 2^100: the smallest prefix C
 * with u * D <= C. u <= 0 or NaN: 0; u > 1: D + 1 (no prefix of a total D reaches it).
 * u = m * 2^-s exactly (m < 2^53, s >= 52), so the 192-bit product m * D is formed
 * in two 128-bit halves and shifted with a sticky remainder. */
SD_HD sd_u128 sd_rule_u_target(double u, sd_u128 d) {
    if (!(u > 0.0)) return 0;
    if (u > 1.0) return d + 1;
    if (d == 0) return 0;
    uint64_t b;
    memcpy(&b, &u, sizeof b);
    const int e = (int)((b >> 52) & 0x7ff);
    uint64_t m = b & (((uint64_t)1 << 52) - 1);
    int s = 1074; /* subnormal u = m * 2^-1074 */
    if (e != 0) {
        m |= (uint64_t)1 << 52;
        s = 1075 - e; /* u = m * 2^(e - 1075); u <= 1 -> s >= 52 */
    }
    const sd_u128 pl = (sd_u128)m * (uint64_t)d;                       /* < 2^117 */
    const sd_u128 ph = (sd_u128)m * (uint64_t)(d >> 64) + (pl >> 64); /* m*D = ph*2^64 + p0 */
    const uint64_t p0 = (uint64_t)pl;
    if (s >= 64) {
        const int t = s - 64;
        if (t >= 128) return 1; /* 0 < m*D < 2^192 <= 2^s */
        const sd_u128 q = ph >> t;
        const int rem = p0 != 0 || (t > 0 && (ph & (((sd_u128)1 << t) - 1)) != 0);
        return q + (sd_u128)rem;
    }
    /* s in [52, 63]: ph < 2^90 for D < 2^100, so ph << (64 - s) cannot overflow */
    const sd_u128 q = (ph << (64 - s)) | (sd_u128)(p0 >> s);
    const int rem = (p0 & (((uint64_t)1 << s) - 1)) != 0;
    return q + (sd_u128)rem;
}

/* Residual target for the Philox word x, u = (x + 1) 2^-32:
 * ceil((x + 1) D / 2^32) == sd_rule_u_target(u, D). */
SD_HD sd_u128 sd_rule_scaled_target(uint32_t x, sd_u128 d) {
    sd_u128 prod = ((sd_u128)x + 1) * d; /* < 2^33 * 2^80 */
    return (prod + (((sd_u128)1 << 32) - 1)) >> 32;
}

/* Inverse-CDF target of a probability row: u <= C * 2^-62 <=> C >= (x + 1) * 2^30. */
SD_HD sd_u128 sd_rule_cdf_target(uint32_t x) { return ((sd_u128)x + 1) << 30; }

/* (x + 1) * 2^-32: curand_uniform_double of word x, exact. */
SD_HD double sd_rule_word_to_u(uint32_t x) { return ((double)x + 1.0) * 0x1p-32; }

/* The 64-bit ordering key of a non-negative double (bit pattern: monotone). */
SD_HD uint64_t sd_rule_key(double w) {
    uint64_t u;
    memcpy(&u, &w, sizeof u);
    return u;
}


/* --- element rules ---------------------------------------------------------------------- */

/* Step 1 / argmax everywhere: does (v, i) beat the best so far (bv, bi)? Larger value
 * wins, equal values go to the lower id, NaN and -inf never win. Start from
 * (-inf, INT32_MAX): an all -inf/NaN row keeps INT32_MAX, which the caller maps to
 * token 0. Partial results (per thread, per block) merge with the same rule. */
SD_HD int sd_rule_argmax_better(float v, int32_t i, float bv, int32_t bi) {
    return v > bv || (v == bv && v != -INFINITY && i < bi);
}

/* Step 2: z = logit / T in double (NaN -> -inf). T > 0. */
SD_HD double sd_rule_scale(float logit, double T) {
    if (logit != logit) return -INFINITY;
    return SD_RULE_DDIV((double)logit, T);
}

/* Step 3: the weight of a logit given m = sd_rule_scale(max logit, T) (finite or +inf;
 * m == -inf is the one-hot case the caller handles first). */
SD_HD double sd_rule_weight(float logit, double T, double m) {
    if (m == INFINITY) return logit == INFINITY ? 1.0 : 0.0;
    return sd_rule_exp(SD_RULE_DSUB(sd_rule_scale(logit, T), m));
}

/* Step 4: does token a rank before token b? */
SD_HD int sd_rule_ranks_before(double wa, int32_t a, double wb, int32_t b) {
    return wa > wb || (wa == wb && a < b);
}

/* Step 5: is top-k active for n_cand candidates (w > 0)? */
SD_HD int sd_rule_topk_on(int32_t top_k, int64_t n_cand) { return top_k > 0 && (int64_t)top_k < n_cand; }
/* Step 6: is top-p active? */
SD_HD int sd_rule_topp_on(float top_p) { return top_p < 1.0f; }
/* Step 7: is min-p active? */
SD_HD int sd_rule_minp_on(float min_p) { return min_p > 0.0f; }
/* Step 7: does min-p keep weight w (w_top == 1)? Always when min_p == 0. */
SD_HD int sd_rule_minp_keep(double w, float min_p) { return !sd_rule_minp_on(min_p) || w >= (double)min_p; }

/* Rejection test of a draft token: p(x) > 0 and u * q(x) <= p(x), in double. */
SD_HD int sd_rule_accept(double u, float px, float qx) {
    const double p = (double)px;
    return p > 0.0 && SD_RULE_DMUL(u, (double)qx) <= p;
}

/* Residual mass of one token, F(max(0, p - q)) with the difference in double; *pos
 * says whether the token is in the residual's support (d > 0). */
SD_HD uint64_t sd_rule_residual(float p, float q, int *pos) {
    const double d = SD_RULE_DSUB((double)p, (double)q);
    *pos = d > 0.0;
    return d > 0.0 ? sd_rule_fix(d) : 0;
}

/* Fixed-point mass of a processed probability; *pos: whether the token has mass. */
SD_HD uint64_t sd_rule_prob_mass(float p, int *pos) {
    *pos = p > 0.0f;
    return p > 0.0f ? sd_rule_fix((double)p) : 0;
}

/* The uniform slot a draft model samples from at a position: SD_RNG_PURPOSE_DRAFT in
 * REJECTION, SD_RNG_PURPOSE_SAMPLE in MATCH (coupled with the target), -1 = argmax
 * (GREEDY and anything else). */
SD_HD int sd_rule_draft_purpose(specdec_verify_mode mode) {
    return mode == SPECDEC_VERIFY_REJECTION ? SD_RNG_PURPOSE_DRAFT
           : mode == SPECDEC_VERIFY_MATCH   ? SD_RNG_PURPOSE_SAMPLE
                                            : -1;
}

/* Greedy rows are the raw-logit argmax: processing is skipped, so a greedy round's
 * parameters are the neutral ones (both sides build the same CUDA graph / CPU path). */
SD_HD sd_sampling_params sd_rule_greedy_params(void) {
    sd_sampling_params p;
    p.temperature = 0.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    return p;
}

#endif
