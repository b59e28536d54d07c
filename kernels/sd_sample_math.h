/* sd_sample_math.h — the exact sampling math shared by the CPU reference
 * (runtime/sd_sampling.c, sd_verify.c; plain C11, gcc or clang) and the GPU sampling /
 * verify kernels (kernels/cuda/sd_cuda_spec_*.cu; nvcc). Header-only, SPECDEC_HD.
 *
 * Every function here is a deterministic function of its arguments on both sides,
 * so the CPU reference and the kernels compute the same bits:
 *
 * 1. sd_spec_exp(x): the specification's exp (not glibc's, not libdevice's). Built only
 *    from IEEE-exact basic operations: x = k ln2 + r with k = floor(x / ln2 + 1/2)
 *    (evaluated as fma(x, 1/ln2, 0.5)), r by a two-constant Cody-Waite split
 *    (LN2_HI has 21 trailing zero bits, so k * LN2_HI is exact), e^r by a degree-13
 *    Taylor polynomial in Horner form, every step an explicit fma(), then an exact
 *    scaling by 2^k (bit-built powers of two; a subnormal result is produced by ONE
 *    correctly rounded multiply). No expression contains a plain a * b + c, so
 *    floating-point contraction (gcc -ffp-contract=fast, clang's default "on", nvcc's
 *    --fmad=true) cannot change the result. Accuracy: a few ulp of the true exp (the
 *    test measures it against glibc); exp(0) == 1 exactly; -inf -> 0, +inf -> +inf,
 *    NaN -> NaN, x > 709.78 -> +inf, x < -746 -> 0.
 *
 * 2. Exact fixed point: each non-negative double weight x in [0, 1] becomes the integer
 *        F(x) = floor(x * 2^62)                         (sd_spec_fix)
 *    and sums / prefix sums are exact 128-bit integer sums, hence independent of the
 *    summation order (a 1024-thread block and a sequential loop agree). The only
 *    floating-point results derived from them are
 *        S_d = (double)(S >> 18) * 2^-44                (sd_spec_fix_to_double; S >= 2^62
 *                                                        whenever the top token is kept,
 *                                                        so the truncation is < 2^-44 rel.)
 *        probs_i = (float)(w_i / S_d)                   (sd_spec_norm; IEEE division)
 *    Comparisons against a uniform u are exact integer comparisons:
 *        u <= C * 2^-62          <=>  C >= ceil(u * 2^62)   ((x + 1) 2^30 for u = (x + 1) 2^-32)
 *        u * D <= C              <=>  C >= ceil(u * D)       (sd_spec_u_target, any double u)
 *
 * sd_u128 is the GCC/clang/nvcc unsigned __int128 (host: x86-64 / aarch64 only). */
#ifndef SD_SAMPLE_MATH_H
#define SD_SAMPLE_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sd_math.h" /* SPECDEC_HD */

#if defined(__CUDACC__)
#define SD_SPEC_HD static __host__ __device__ __forceinline__
#else
#define SD_SPEC_HD static inline
#endif

__extension__ typedef unsigned __int128 sd_u128;

#define SD_SPEC_FIX_BITS 62

/* Separately rounded basic operations. On the device they are the _rn intrinsics, which
 * nvcc never fuses; on the host a lone operation per expression is already rounded on
 * its own (C11 contracts only within one expression, and never across a function call's
 * value under -std=c11's default -ffp-contract=off). */
#if defined(__CUDA_ARCH__)
#define SD_SPEC_DMUL(a, b) __dmul_rn((a), (b))
#define SD_SPEC_DDIV(a, b) __ddiv_rn((a), (b))
#define SD_SPEC_DSUB(a, b) __dsub_rn((a), (b))
#else
#define SD_SPEC_DMUL(a, b) ((a) * (b))
#define SD_SPEC_DDIV(a, b) ((a) / (b))
#define SD_SPEC_DSUB(a, b) ((a) - (b))
#endif

/* --- exp ---------------------------------------------------------------------------- */

/* 2^k for -1022 <= k <= 1023, built from its bit pattern (exact). */
SD_SPEC_HD double sd_spec_pow2(int k) {
    uint64_t b = (uint64_t)(k + 1023) << 52;
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

#define SD_SPEC_EXP_HI 709.782712893383973096  /* ~ln(DBL_MAX): above -> +inf */
#define SD_SPEC_EXP_LO (-746.0)                /* exp(-746) < 2^-1076: rounds to 0 */

SD_SPEC_HD double sd_spec_exp(double x) {
    if (x != x) return x + x; /* NaN stays NaN (quiet) */
    if (x > SD_SPEC_EXP_HI) return INFINITY;
    if (x < SD_SPEC_EXP_LO) return 0.0; /* includes -inf */
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
    if (k > 1023) { /* only for x within a hair of SD_SPEC_EXP_HI: 2^1024 is not a double */
        p = SD_SPEC_DMUL(p, 2.0);
        k -= 1;
    }
    if (k >= -1022) return SD_SPEC_DMUL(p, sd_spec_pow2(k)); /* exact (or overflow to inf) */
    /* subnormal range: an exact scaling into the normal range, then one rounding */
    return SD_SPEC_DMUL(SD_SPEC_DMUL(p, sd_spec_pow2(k + 1000)), sd_spec_pow2(-1000));
}

/* --- fixed point ------------------------------------------------------------------- */

/* floor(x * 2^62) for x in [0, 1] (values outside are clamped; NaN -> 0). The product
 * by a power of two is exact; the conversion truncates on both sides. */
SD_SPEC_HD uint64_t sd_spec_fix(double x) {
    if (!(x > 0.0)) return 0;
    if (x >= 1.0) return (uint64_t)1 << SD_SPEC_FIX_BITS;
#if defined(__CUDA_ARCH__)
    return __double2ull_rz(x * 0x1p62);
#else
    return (uint64_t)(x * 0x1p62);
#endif
}

/* The double value of a fixed-point sum S (>= 0): (double)(S >> 18) * 2^-44. */
SD_SPEC_HD double sd_spec_fix_to_double(sd_u128 s) {
    uint64_t t = (uint64_t)(s >> 18); /* S < 2^18 * 2^62 for V <= 2^18 (rows summing to ~1: any V) */
#if defined(__CUDA_ARCH__)
    return __dmul_rn(__ull2double_rn(t), 0x1p-44);
#else
    return (double)t * 0x1p-44;
#endif
}

/* Normalised probability of a kept weight w with fixed-point total S. */
SD_SPEC_HD float sd_spec_norm(double w, sd_u128 s) {
#if defined(__CUDA_ARCH__)
    return __double2float_rn(__ddiv_rn(w, sd_spec_fix_to_double(s)));
#else
    return (float)(w / sd_spec_fix_to_double(s));
#endif
}

/* top-p threshold: returns T such that for any fixed-point mass C,
 *     C < T   <=>   C < top_p * S   (exactly, in real numbers).
 * top_p = m * 2^-s with m a 24-bit integer; C < m S / 2^s <=> C * 2^s < m S
 * <=> C < ceil(m S / 2^s) = ((m S - 1) >> s) + 1 (m S > 0). top_p in (0, 1). */
SD_SPEC_HD sd_u128 sd_spec_topp_threshold(float top_p, sd_u128 s) {
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
SD_SPEC_HD sd_u128 sd_spec_u_target(double u, sd_u128 d) {
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
 * ceil((x + 1) D / 2^32) == sd_spec_u_target(u, D). */
SD_SPEC_HD sd_u128 sd_spec_scaled_target(uint32_t x, sd_u128 d) {
    sd_u128 prod = ((sd_u128)x + 1) * d; /* < 2^33 * 2^80 */
    return (prod + (((sd_u128)1 << 32) - 1)) >> 32;
}

/* Inverse-CDF target of a probability row: u <= C * 2^-62 <=> C >= (x + 1) * 2^30. */
SD_SPEC_HD sd_u128 sd_spec_cdf_target(uint32_t x) { return ((sd_u128)x + 1) << 30; }

/* (x + 1) * 2^-32: curand_uniform_double of word x, exact. */
SD_SPEC_HD double sd_spec_word_to_u(uint32_t x) { return ((double)x + 1.0) * 0x1p-32; }

/* The 64-bit ordering key of a non-negative double (bit pattern: monotone). */
SD_SPEC_HD uint64_t sd_spec_key(double w) {
    uint64_t u;
    memcpy(&u, &w, sizeof u);
    return u;
}

#endif
