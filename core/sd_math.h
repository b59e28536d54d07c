/* sd_math.h — header-only scalar math shared by the CPU reference (cc) and the CUDA
 * kernels (nvcc): integer min/max, half/bfloat16 <-> float conversion and RoPE frequencies.
 *
 * SD_HD (core/sd_hostdev.h) marks functions callable on host and device. Everything
 * here is pure bit manipulation or
 * IEEE arithmetic, so both sides produce identical results:
 * - sd_f16_to_f32 / sd_bf16_to_f32 are exact (every half/bf16 is a float).
 * - sd_f32_to_f16 / sd_f32_to_bf16 round to nearest, ties to even (as numpy's
 *   float16 cast and PyTorch's bfloat16 cast); NaN stays NaN (quiet), overflow -> inf.
 * - sd_rope_inv_freq computes one inverse frequency in double, following Hugging
 *   Face transformers: default rope inv_freq[i] = theta^(-2i/d); the "llama3"
 *   scaling of _compute_llama3_parameters (low frequencies divided by `factor`,
 *   high ones kept, the band between smoothly interpolated); "linear" (all divided
 *   by factor); "yarn" (_compute_yarn_parameters' ramp between interpolation and
 *   extrapolation); "longrope" (each divided by its own factor).
 * - the MLP activations (SiLU, GELU tanh / erf) and soft-capping, in double. */
#ifndef SD_MATH_H
#define SD_MATH_H

#include <stdint.h>
#include <math.h>
#include <string.h>

#include "sd_hostdev.h"

#define SD_PI 3.14159265358979323846

/* The splitmix64 finaliser: a 64-bit avalanche (hash keys, seeds from clock values). */
SD_HD uint64_t sd_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Integer minimum and maximum. */
SD_HD int32_t sd_min_i32(int32_t a, int32_t b) { return a < b ? a : b; }
SD_HD int32_t sd_max_i32(int32_t a, int32_t b) { return a > b ? a : b; }

/* Bit casts without aliasing violations (memcpy compiles to a register move). */
/* Bit casts. In C a union (C11 6.5.2.3: reading another member reinterprets the bytes), not
 * memcpy: GCC 12 crashes (sanopt) when an always_inline memcpy lands in a function excluded
 * from AddressSanitizer (kernels/cpu/sd_cpu_sanitize.h). C++ (nvcc) keeps memcpy. */
SD_HD_FORCE float sd_bits_to_f32(uint32_t u) {
#if defined(__cplusplus)
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#else
    union { uint32_t u; float f; } x = {u};
    return x.f;
#endif
}
SD_HD_FORCE uint32_t sd_f32_to_bits(float f) {
#if defined(__cplusplus)
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#else
    union { float f; uint32_t u; } x = {f};
    return x.u;
#endif
}

/* IEEE binary16 -> binary32, exact, including subnormals, inf and NaN. Branch-free
 * so the CPU dequantisation loops vectorise:
 * - normal/inf/NaN: shift exponent+mantissa into place and multiply by 2^-112 to
 *   rebias (15 -> 127); an exponent of 0x1f lands on 0xff via the +0xe0 offset, and
 *   inf/NaN survive the multiply unchanged.
 * - subnormal (exponent 0): place the mantissa under the exponent of 0.5 and
 *   subtract 0.5, which leaves exactly man * 2^-24. */
SD_HD_FORCE float sd_f16_to_f32(uint16_t h) {
    uint32_t w = (uint32_t)h << 16;
    uint32_t sign = w & 0x80000000u;
    uint32_t two_w = w + w; /* drops the sign */
    float normal = sd_bits_to_f32((two_w >> 4) + (0xe0u << 23)) * 1.925929944387236e-34f; /* 2^-112 */
    float subnormal = sd_bits_to_f32((two_w >> 17) | (126u << 23)) - 0.5f;
    uint32_t is_sub = 0u - (uint32_t)(two_w < (1u << 27)); /* all ones for subnormal/zero */
    uint32_t bits = (sd_f32_to_bits(subnormal) & is_sub) | (sd_f32_to_bits(normal) & ~is_sub);
    return sd_bits_to_f32(sign | bits);
}

/* binary32 -> binary16, round to nearest even. */
SD_HD uint16_t sd_f32_to_f16(float f) {
    uint32_t x = sd_f32_to_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or NaN (NaN forced quiet so it stays NaN) */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
    if (ax >= 0x477ff000u) /* >= 65520: rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* below the smallest normal half (2^-14): subnormal or zero */
        if (ax < 0x33000000u) return sign; /* < 2^-25: rounds to zero (2^-25 ties to even 0) */
        uint32_t e = ax >> 23;              /* 102..112 */
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e;          /* value = m * 2^(e-150); half unit = 2^-24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias and round the 13 dropped bits; a carry into the exponent is correct */
    uint32_t r = ax - 0x38000000u; /* exponent 127 -> 15 */
    uint32_t q = r >> 13;
    uint32_t rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

/* bfloat16 is the top half of a binary32. */
SD_HD_FORCE float sd_bf16_to_f32(uint16_t b) { return sd_bits_to_f32((uint32_t)b << 16); }

/* binary32 -> bfloat16, round to nearest even; NaN stays NaN. */
SD_HD uint16_t sd_f32_to_bf16(float f) {
    uint32_t x = sd_f32_to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    uint32_t lsb = (x >> 16) & 1u;
    x += 0x7fffu + lsb;
    return (uint16_t)(x >> 16);
}

/* RoPE scaling parameters (mirror of the sd_config fields, so kernels need not see
 * the model struct). llama3 == 0: plain rope. */
typedef struct sd_rope_params {
    int32_t head_dim;          /* rotary dimension d (the whole head, or its rotary part); even */
    double theta;              /* rope_theta */
    int32_t llama3;            /* 1: apply llama3 scaling */
    double factor;             /* llama3 factor */
    double low_freq_factor;    /* llama3 low_freq_factor */
    double high_freq_factor;   /* llama3 high_freq_factor */
    double original_max_pos;   /* llama3 original_max_position_embeddings */
} sd_rope_params;

/* Inverse frequency of rotary pair i (0 <= i < d/2): the angle of position p is
 * p * sd_rope_inv_freq(rp, i), applied to elements i and i + d/2 (rotate_half). */
SD_HD double sd_rope_inv_freq(const sd_rope_params *rp, int32_t i) {
    double inv = 1.0 / pow(rp->theta, (double)(2 * i) / (double)rp->head_dim);
    if (!rp->llama3) return inv;
    double low_wavelen = rp->original_max_pos / rp->low_freq_factor;
    double high_wavelen = rp->original_max_pos / rp->high_freq_factor;
    double wavelen = 2.0 * SD_PI / inv;
    if (wavelen < high_wavelen) return inv;            /* high frequency: unchanged */
    if (wavelen > low_wavelen) return inv / rp->factor; /* low frequency: slowed down */
    double smooth = (rp->original_max_pos / wavelen - rp->low_freq_factor) /
                    (rp->high_freq_factor - rp->low_freq_factor);
    return (1.0 - smooth) * inv / rp->factor + smooth * inv;
}

/* One layer kind's rotary embedding with every scaling type, resolved for one context
 * size (core/sd_weights.h sd_cfg_rope_params fills it from a configuration). */
typedef struct sd_rope_spec {
    sd_rope_params p;          /* dims, theta (dynamic: already grown for the context), llama3 */
    int32_t type;              /* SD_RP_* */
    double factor;             /* linear, yarn: factor */
    double original_max_pos;   /* yarn: original_max_position_embeddings */
    double beta_fast, beta_slow; /* yarn */
    int32_t truncate;          /* yarn: floor / ceil the correction range */
    const float *ext_factor;   /* longrope: the d/2 factors in use (short or long) */
    double attn_factor;        /* cos and sin are multiplied by it (yarn, longrope); 1 = none */
} sd_rope_spec;

/* sd_rope_spec.type: the frequency formula (dynamic runs as SD_RP_DEFAULT with its grown
 * theta). Values equal sd_rope_type's where both exist. */
enum { SD_RP_DEFAULT = 0, SD_RP_LLAMA3 = 1, SD_RP_LINEAR = 2, SD_RP_YARN = 4, SD_RP_LONGROPE = 5 };

/* yarn: transformers' find_correction_dim. */
SD_HD double sd_yarn_corr_dim(const sd_rope_spec *rs, double n_rot) {
    return ((double)rs->p.head_dim * log(rs->original_max_pos / (n_rot * 2.0 * SD_PI))) / (2.0 * log(rs->p.theta));
}

/* yarn: the ramp between interpolated (inv / factor) and extrapolated (inv) frequencies. */
SD_HD double sd_rope_inv_freq_yarn(const sd_rope_spec *rs, int32_t i, double inv) {
    double lo = sd_yarn_corr_dim(rs, rs->beta_fast), hi = sd_yarn_corr_dim(rs, rs->beta_slow);
    if (rs->truncate) {
        lo = floor(lo);
        hi = ceil(hi);
    }
    if (lo < 0.0) lo = 0.0;
    if (hi > (double)(rs->p.head_dim - 1)) hi = (double)(rs->p.head_dim - 1);
    if (lo == hi) hi += 0.001; /* transformers' guard against a zero-width ramp */
    double ramp = ((double)i - lo) / (hi - lo);
    ramp = ramp < 0.0 ? 0.0 : (ramp > 1.0 ? 1.0 : ramp);
    double extra = 1.0 - ramp; /* weight of the unscaled (extrapolated) frequency */
    return (inv / rs->factor) * (1.0 - extra) + inv * extra;
}

/* Inverse frequency of pair i for any rope type (transformers' modeling_rope_utils). */
SD_HD double sd_rope_spec_inv_freq(const sd_rope_spec *rs, int32_t i) {
    if (rs->type == SD_RP_DEFAULT || rs->type == SD_RP_LLAMA3) return sd_rope_inv_freq(&rs->p, i);
    double inv = 1.0 / pow(rs->p.theta, (double)(2 * i) / (double)rs->p.head_dim);
    if (rs->type == SD_RP_LINEAR) return inv / rs->factor;
    if (rs->type == SD_RP_YARN) return sd_rope_inv_freq_yarn(rs, i, inv);
    return inv / (double)rs->ext_factor[i]; /* longrope */
}

/* SiLU in double: x * sigmoid(x). */
SD_HD double sd_silu(double x) { return x / (1.0 + exp(-x)); }

/* GELU, tanh approximation (PyTorch approximate="tanh", gelu_new), in double. */
SD_HD double sd_gelu_tanh(double x) {
    const double k = 0.7978845608028654; /* sqrt(2 / pi) */
    return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

/* GELU with erf (PyTorch's default "gelu"), in double. */
SD_HD double sd_gelu_erf(double x) { return 0.5 * x * (1.0 + erf(x * 0.7071067811865476)); }

/* The gated MLP activation act(g) of sd_act value `act` (0 SiLU, 1 GELU-tanh, 2 GELU). */
SD_HD double sd_act_eval(int32_t act, double g) {
    return act == 1 ? sd_gelu_tanh(g) : (act == 2 ? sd_gelu_erf(g) : sd_silu(g));
}

/* Soft-capping: cap * tanh(x / cap) (cap > 0). */
SD_HD double sd_softcap(double x, double cap) { return cap * tanh(x / cap); }

/* RoPE's pairs and rotation, shared by the CPU reference (kernels/cpu/sd_cpu_rope.c) and the CUDA
 * kernel (kernels/cuda/sd_cuda_rope.cu), so both rotate the same elements with the same arithmetic.
 * Pair i (< half = rot_dim / 2) of a head is (i, i + half) in transformers' rotate_half convention,
 * (2i, 2i + 1) when interleaved (ERNIE 4.5, GLM-4, DeepSeek); it turns by the tables' entry i:
 * y0 = x0 cos - x1 sin, y1 = x1 cos + x0 sin, in double, each rounded once to fp32. */
SD_HD void sd_rope_pair(int32_t i, int32_t half, int interleaved, int32_t *i0, int32_t *i1) {
    *i0 = interleaved ? 2 * i : i;
    *i1 = interleaved ? 2 * i + 1 : i + half;
}
SD_HD void sd_rope_turn(float x0, float x1, float c, float s, float *y0, float *y1) {
    *y0 = (float)((double)x0 * (double)c - (double)x1 * (double)s);
    *y1 = (float)((double)x1 * (double)c + (double)x0 * (double)s);
}

#endif
