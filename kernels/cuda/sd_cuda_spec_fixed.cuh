/* sd_cuda_spec_fixed.cuh — exact fixed-point arithmetic shared by the GPU sampling /
 * verify kernels (nvcc) and their host reference in tests/cuda_spec (plain C, gcc).
 *
 * Why: the CPU reference (runtime/sd_sampling.c, sd_verify.c) accumulates its sums
 * sequentially in double in ascending id (or rank) order. A 1024-thread block cannot
 * reproduce a sequential rounding order at speed, so the GPU path makes every sum
 * EXACT instead: each non-negative double weight x in [0, 1] becomes the integer
 *     F(x) = floor(x * 2^62)                      (sd_spec_fix)
 * and sums / prefix sums are exact 128-bit integer sums, hence independent of the
 * order and of the launch geometry. Every comparison is then done exactly in
 * integers (no rounding at all), and the only floating-point results are:
 *   S_d = (double)(S >> 18) * 2^-44                (sd_spec_fix_to_double; S >= 2^62
 *                                                   whenever the top token is kept, so
 *                                                   the truncation is < 2^-44 relative)
 *   probs_i = (float)(w_i / S_d)                   (IEEE division, round to nearest)
 * which are bitwise identical on host and device (no FMA contraction can apply).
 * The same formulas are the proposed specification for the CPU reference (see the
 * report in tests/cuda_spec/README.md); with it CPU and GPU agree bit for bit.
 *
 * A uniform u = (x + 1) * 2^-32 (x = the 32-bit Philox word, i.e. cuRAND's
 * curand_uniform_double) is compared exactly: u <= C * 2^-62 <=> (x + 1) * 2^30 <= C,
 * and u * D <= C (D, C fixed point) <=> (x + 1) * D <= C * 2^32. */
#ifndef SD_CUDA_SPEC_FIXED_CUH
#define SD_CUDA_SPEC_FIXED_CUH

#include <stdint.h>

#if defined(__CUDACC__)
#define SD_SPEC_HD __host__ __device__ __forceinline__
#else
#define SD_SPEC_HD static inline
#endif

typedef unsigned __int128 sd_u128;

#define SD_SPEC_FIX_BITS 62

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
    uint64_t t = (uint64_t)(s >> 18); /* S <= 2^18 * 2^62 for V <= 2^18: fits */
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

/* Residual target: the first j whose inclusive prefix C_j satisfies u * D <= C_j,
 * u = (x + 1) 2^-32  <=>  C_j >= ceil((x + 1) D / 2^32). */
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
#if defined(__CUDA_ARCH__)
    return (uint64_t)__double_as_longlong(w);
#else
    union {
        double d;
        uint64_t u;
    } c;
    c.d = w;
    return c.u;
#endif
}

#endif
