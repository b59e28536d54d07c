/* sd_cpu_matmul_x86.c — the linear layers with AVX2 + FMA + F16C, bit-identical to the portable
 * loop (see sd_cpu_matmul.h, "ISA paths").
 *
 * Why the result cannot differ: sd_cpu_dot keeps four double partial sums s_j over i ≡ j (mod 4),
 * combines them as (s0 + s1) + (s2 + s3), then adds the tail products one by one. Here lane j of
 * one 256-bit register is s_j, and each step is one fused multiply-add per lane. A product of two
 * floats is exact in double (24 + 24 significant bits < 53, and its exponent stays far inside
 * double's range), so fma(a, b, s) rounds exactly what s + a * b rounds: the same sum, in the same
 * order, to the last bit, including NaN and inf. F16C's half -> float conversion is exact as
 * sd_f16_to_f32 is, and bf16 -> float is a shift.
 *
 * The speed comes from register blocking: four weight rows x two tokens per inner loop, so each
 * converted weight vector serves two tokens and each token vector four rows, with eight
 * independent accumulator chains; and from converting the weights in registers instead of
 * through sd_cpu_row_f32's buffer. */
#include "sd_cpu_matmul_x86.h"

#if SD_CPU_X86_AVX2

#include <cpuid.h>
#include <immintrin.h>
#include <string.h>
#include "sd_cpu_dequant.h"

/* The helpers below are inlined into the uninstrumented rows_* functions. GCC instruments a
 * function (UBSan checks, ASan's stack-scope marks) before inlining it, so the helpers carry the
 * same no_sanitize themselves: with only the caller marked, stale scope poison of their local
 * arrays was left on the stack and a later frame's variable read as stack-use-after-scope. */
#if defined(SD_CPU_ASAN)
#define SD_X86_NOSAN __attribute__((no_sanitize("address", "undefined")))
#elif defined(SD_CPU_TSAN)
#define SD_X86_NOSAN __attribute__((no_sanitize("thread")))
#else
#define SD_X86_NOSAN
#endif
#define SD_AVX2 __attribute__((target("avx2,fma,f16c")))
#define SD_AVX2_INLINE static inline SD_X86_NOSAN __attribute__((always_inline, target("avx2,fma,f16c")))

/* CPUID: AVX (and the OS saving YMM state: OSXSAVE + XCR0 bits 1-2), FMA and F16C in leaf 1,
 * AVX2 in leaf 7. Read directly: not every compiler's __builtin_cpu_supports knows "f16c". */
int sd_cpu_x86_avx2_supported(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const unsigned need1 = (1u << 12) | (1u << 27) | (1u << 28) | (1u << 29); /* FMA OSXSAVE AVX F16C */
    if ((c & need1) != need1) return 0;
    unsigned xlo, xhi;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    if ((xlo & 6u) != 6u) return 0; /* XMM and YMM state enabled by the OS */
    if (__get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (b >> 5) & 1u; /* AVX2 */
}

/* Four consecutive weights from element i of a row, as doubles (dt is a constant at each
 * instantiation, so the switch folds away). */
SD_AVX2_INLINE __m256d load_w4(const void *row, int64_t i, sd_dtype dt) {
    __m128 f;
    if (dt == SD_F16) {
        f = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)((const uint16_t *)row + i)));
    } else if (dt == SD_BF16) {
        __m128i h = _mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i *)((const uint16_t *)row + i)));
        f = _mm_castsi128_ps(_mm_slli_epi32(h, 16));
    } else {
        f = _mm_loadu_ps((const float *)row + i);
    }
    return _mm256_cvtps_pd(f);
}

SD_AVX2_INLINE float w_elem(const void *row, int64_t i, sd_dtype dt) {
    if (dt == SD_F16) return _cvtsh_ss(((const uint16_t *)row)[i]);
    if (dt == SD_BF16) return sd_bf16_to_f32(((const uint16_t *)row)[i]);
    return ((const float *)row)[i];
}

/* (s0 + s1) + (s2 + s3) of the four lanes, then the tail products in order. */
SD_AVX2_INLINE double finish(__m256d acc, const void *wrow, const float *x, int64_t i, int64_t cols, sd_dtype dt) {
    __m128d lo = _mm256_castpd256_pd128(acc), hi = _mm256_extractf128_pd(acc, 1);
    double s = (_mm_cvtsd_f64(lo) + _mm_cvtsd_f64(_mm_unpackhi_pd(lo, lo))) +
               (_mm_cvtsd_f64(hi) + _mm_cvtsd_f64(_mm_unpackhi_pd(hi, hi)));
    for (; i < cols; i++) s += (double)w_elem(wrow, i, dt) * (double)x[i];
    return s;
}

/* y[t][o0 + r] for R rows from o0 and T tokens (R <= 4, T <= 2, both constants at every call so
 * the loops unroll into registers). */
SD_AVX2_INLINE void block(const char *w0, size_t row_bytes, int R, const float *const *x, float *const *y, int T,
                          int64_t cols, int64_t o0, const double *b, sd_dtype dt) {
    __m256d acc[4][2];
    const void *wr[4];
    for (int r = 0; r < R; r++) {
        wr[r] = w0 + (size_t)r * row_bytes;
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_pd();
    }
    int64_t i = 0;
    for (; i + 4 <= cols; i += 4) {
        __m256d xv[2];
        for (int t = 0; t < T; t++) xv[t] = _mm256_cvtps_pd(_mm_loadu_ps(x[t] + i));
        for (int r = 0; r < R; r++) {
            __m256d wv = load_w4(wr[r], i, dt);
            for (int t = 0; t < T; t++) acc[r][t] = _mm256_fmadd_pd(wv, xv[t], acc[r][t]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) y[t][o0 + r] = (float)(finish(acc[r][t], wr[r], x[t], i, cols, dt) + b[r]);
}

/* Rows [o_begin, o_end) for the tokens x[0..n) -> y[0..n) (n <= SD_CPU_X86_TOKEN_CHUNK). */
SD_AVX2_INLINE void rows_all(const sd_x86_mm *m, const float *const *x, float *const *y, int n, sd_dtype dt) {
    size_t row_bytes = (size_t)m->cols * sd_dtype_size(dt);
    const char *w = (const char *)m->w;
    int64_t o = m->o_begin;
    for (; o + 4 <= m->o_end; o += 4) {
        double b[4];
        for (int r = 0; r < 4; r++) b[r] = m->bias ? (double)sd_cpu_elem(m->bias, o + r) : 0.0;
        int t = 0;
        for (; t + 2 <= n; t += 2) block(w + (size_t)o * row_bytes, row_bytes, 4, x + t, y + t, 2, m->cols, o, b, dt);
        if (t < n) block(w + (size_t)o * row_bytes, row_bytes, 4, x + t, y + t, 1, m->cols, o, b, dt);
    }
    for (; o < m->o_end; o++) {
        double b[1] = {m->bias ? (double)sd_cpu_elem(m->bias, o) : 0.0};
        int t = 0;
        for (; t + 2 <= n; t += 2) block(w + (size_t)o * row_bytes, row_bytes, 1, x + t, y + t, 2, m->cols, o, b, dt);
        if (t < n) block(w + (size_t)o * row_bytes, row_bytes, 1, x + t, y + t, 1, m->cols, o, b, dt);
    }
}

/* ---- MXFP4 (GPT-OSS experts): decoded in registers, one 32-value block of four rows at a time ----
 * A code c becomes |e2m1(c & 7)| from an 8-float table (permutevar), its sign bit set by XOR (so
 * code 8 is -0, as BF16's), times the block's scale 2^(s - 127): one exact product (the values
 * have at most 2 significant bits; 6 * 2^127 rounds to inf), the float transformers' BF16
 * dequantisation gives. The sums then run exactly as block()'s: lane j of acc over i = j mod 4,
 * four values of every row and token per step, in order; cols is a multiple of 32 (no tail). */
SD_AVX2_INLINE __m256 mx_decode8(__m128i codes8, __m256 scale) {
    const __m256 mag = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    const __m256i c = _mm256_cvtepu8_epi32(codes8);
    const __m256i sign = _mm256_slli_epi32(_mm256_srli_epi32(c, 3), 31);
    const __m256 v = _mm256_castsi256_ps(_mm256_xor_si256(_mm256_castps_si256(_mm256_permutevar8x32_ps(mag, c)), sign));
    return _mm256_mul_ps(v, scale);
}

/* Block g of a row (16 code bytes, its scale byte) -> out[0..32). */
SD_AVX2_INLINE void mx_decode_block(const uint8_t *blk, uint8_t s, float *out) {
    union {
        uint32_t u;
        float f;
    } sc;
    sc.u = s ? (uint32_t)s << 23 : 0x00400000u; /* 2^(s - 127); 2^-127 is a subnormal */
    const __m256 scale = _mm256_set1_ps(sc.f);
    const __m128i b = _mm_loadu_si128((const __m128i *)blk), m4 = _mm_set1_epi8(15);
    const __m128i lo = _mm_and_si128(b, m4), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m4);
    const __m128i c0 = _mm_unpacklo_epi8(lo, hi), c1 = _mm_unpackhi_epi8(lo, hi); /* codes 0..15, 16..31 */
    _mm256_storeu_ps(out, mx_decode8(c0, scale));
    _mm256_storeu_ps(out + 8, mx_decode8(_mm_srli_si128(c0, 8), scale));
    _mm256_storeu_ps(out + 16, mx_decode8(c1, scale));
    _mm256_storeu_ps(out + 24, mx_decode8(_mm_srli_si128(c1, 8), scale));
}

/* y[t][o0 + r] for R rows from o0 and T tokens (R <= 4, T <= 2), as block() for F32 rows. */
SD_AVX2_INLINE void mx_block(const sd_x86_mm *m, int64_t o0, int R, const float *const *x, float *const *y, int T,
                             const double *b) {
    const int64_t cols = m->cols, G = cols / 32;
    const size_t row_bytes = (size_t)G * 16;
    __m256d acc[4][2];
    float dec[4][32];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_pd();
    for (int64_t g = 0; g < G; g++) {
        for (int r = 0; r < R; r++)
            mx_decode_block((const uint8_t *)m->w + (size_t)(o0 + r) * row_bytes + (size_t)g * 16,
                            m->scales[(o0 + r) * G + g], dec[r]);
        for (int q = 0; q < 8; q++) {
            const int64_t i = g * 32 + 4 * q;
            __m256d xv[2];
            for (int t = 0; t < T; t++) xv[t] = _mm256_cvtps_pd(_mm_loadu_ps(x[t] + i));
            for (int r = 0; r < R; r++) {
                const __m256d wv = _mm256_cvtps_pd(_mm_loadu_ps(dec[r] + 4 * q));
                for (int t = 0; t < T; t++) acc[r][t] = _mm256_fmadd_pd(wv, xv[t], acc[r][t]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) y[t][o0 + r] = (float)(finish(acc[r][t], NULL, x[t], cols, cols, SD_F32) + b[r]);
}

static SD_CPU_UNINSTRUMENTED SD_AVX2 void rows_mxfp4(const sd_x86_mm *m, const float *const *x, float *const *y,
                                                     int n) {
    int64_t o = m->o_begin;
    for (; o + 4 <= m->o_end; o += 4) {
        double b[4];
        for (int r = 0; r < 4; r++) b[r] = m->bias ? (double)sd_cpu_elem(m->bias, o + r) : 0.0;
        int t = 0;
        for (; t + 2 <= n; t += 2) mx_block(m, o, 4, x + t, y + t, 2, b);
        if (t < n) mx_block(m, o, 4, x + t, y + t, 1, b);
    }
    for (; o < m->o_end; o++) {
        double b[1] = {m->bias ? (double)sd_cpu_elem(m->bias, o) : 0.0};
        int t = 0;
        for (; t + 2 <= n; t += 2) mx_block(m, o, 1, x + t, y + t, 2, b);
        if (t < n) mx_block(m, o, 1, x + t, y + t, 1, b);
    }
}

/* ---- FP8 (block-scaled float8_e4m3fn, core/sd_weights.h SD_FP8): decoded in registers, 32 columns
 * of four rows at a time, once for all the call's tokens ----
 * (c & 0x7f) << 20 read as a float is the code's magnitude times 2^-120, normal and subnormal codes
 * alike (the 4 exponent bits land in the float's exponent field, the 3 mantissa bits on top of its
 * mantissa), so one exact multiply by 2^120 gives it; bit 7 is the sign; 0x7f / 0xff are NaN as
 * sd_cpu_fp8_e4m3 returns them. Each value is then multiplied by its block's scale in float: the
 * float sd_cpu_fp8_elem gives, and the sums run exactly as block()'s (lane j over i = j mod 4, the
 * last cols % 4 products one by one). */
SD_AVX2_INLINE __m256 f8_decode8(__m128i codes8) {
    const __m256i c = _mm256_cvtepu8_epi32(codes8), seven = _mm256_set1_epi32(0x7f);
    const __m256i mag = _mm256_and_si256(c, seven), sign = _mm256_slli_epi32(_mm256_srli_epi32(c, 7), 31);
    const __m256 v = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(mag, 20)), _mm256_set1_ps(0x1p120f));
    const __m256i nan = _mm256_set1_epi32(0x7fc00000), isnan = _mm256_cmpeq_epi32(mag, seven);
    const __m256i bits = _mm256_blendv_epi8(_mm256_castps_si256(v), nan, isnan);
    return _mm256_castsi256_ps(_mm256_or_si256(bits, sign));
}

/* What every chunk of up to four rows of an FP8, INT4 or INT8 matrix needs, found once per q_rows call (no
 * division per chunk: a block or group of a power-of-two width is found by a shift). */
typedef struct q_ctx {
    int64_t unit;  /* FP8: bn (columns per block); INT4: columns per group */
    int shift;     /* log2(unit) when unit is a power of two, else -1 */
    int bits;      /* INT4 / INT8: 4 or 8 (codes two per byte or one); FP8: 0 */
    const int32_t *gidx;      /* INT4 act-order: each column's group, else NULL */
    const uint8_t *codes[4];  /* each row's codes */
    const float *scale[4];    /* FP8: the scales of the row's block row; INT4: the row's group scales */
    const int32_t *zero[4];   /* INT4: the row's group zeros */
    const float *bias[4];     /* INT4 with a bias (GGUF's Q4_K, ...): the row's group biases, else NULL */
} q_ctx;

SD_AVX2_INLINE int64_t q_unit_of(const q_ctx *q, int64_t c) { return q->shift >= 0 ? c >> q->shift : c / q->unit; }

SD_AVX2_INLINE void q_ctx_init(const sd_x86_mm *m, int64_t o0, int R, q_ctx *q) {
    int64_t unit, G;
    q->gidx = NULL;
    q->bits = 0;
    if (sd_dtype_is_int(m->dtype)) {
        const sd_int4_meta *im = (const sd_int4_meta *)(const void *)m->scales;
        unit = im->group, G = im->n_groups, q->gidx = im->gidx, q->bits = im->bits;
        for (int r = 0; r < R; r++) {
            q->codes[r] = (const uint8_t *)m->w + (size_t)(o0 + r) * sd_int_row_bytes(m->dtype, m->cols);
            q->scale[r] = im->scale + (o0 + r) * G;
            q->zero[r] = im->zero + (o0 + r) * G;
            q->bias[r] = im->bias ? im->bias + (o0 + r) * G : NULL;
        }
    } else {
        const float *sc = (const float *)(const void *)m->scales;
        const int64_t bm = (int64_t)sc[0];
        unit = (int64_t)sc[1], G = (m->cols + unit - 1) / unit;
        for (int r = 0; r < R; r++) {
            q->codes[r] = (const uint8_t *)m->w + (size_t)(o0 + r) * (size_t)m->cols;
            q->scale[r] = sc + 2 + ((o0 + r) / bm) * G;
            q->zero[r] = NULL;
            q->bias[r] = NULL;
        }
    }
    q->unit = unit;
    q->shift = -1;
    for (int b = 0; b < 31; b++)
        if ((int64_t)1 << b == unit) q->shift = b;
}

/* Eight columns [c, c + 8) of row r as floats, in registers: the values sd_cpu_fp8_elem / sd_cpu_int4_value
 * give. u is the block / group of all eight (units of a multiple of 8 columns), except with an INT g_idx,
 * where each lane's group scale and zero are gathered by its column's group.
 * FP8: (c & 0x7f) << 20 read as a float is the code's magnitude times 2^-120 (f8_decode8), times the block's
 * scale. INT4 / INT8 (GPTQ / AWQ / compressed-tensors, SD_INT4, SD_INT8): eight codes from one 32-bit load,
 * lane j shifted right by 4j and masked (INT8: eight bytes zero-extended), minus the group's zero as
 * integers, converted (exact: |q - z| < 256), times the group's scale. */
SD_AVX2_INLINE __m256 q_decode8(const q_ctx *q, int r, int64_t c, int64_t u) {
    if (!q->bits)
        return _mm256_mul_ps(f8_decode8(_mm_loadl_epi64((const __m128i *)(q->codes[r] + c))),
                             _mm256_set1_ps(q->scale[r][u]));
    __m256i v;
    if (q->bits == 8) {
        v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(q->codes[r] + c)));
    } else {
        const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), mask = _mm256_set1_epi32(15);
        uint32_t w;
        memcpy(&w, q->codes[r] + c / 2, 4);
        v = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)w), shifts), mask);
    }
    __m256i z;
    __m256 s, b = _mm256_setzero_ps();
    if (q->gidx) {
        const __m256i gi = _mm256_loadu_si256((const __m256i *)(const void *)(q->gidx + c));
        z = _mm256_i32gather_epi32((const int *)q->zero[r], gi, 4);
        s = _mm256_i32gather_ps(q->scale[r], gi, 4);
        if (q->bias[r]) b = _mm256_i32gather_ps(q->bias[r], gi, 4);
    } else {
        z = _mm256_set1_epi32(q->zero[r][u]);
        s = _mm256_set1_ps(q->scale[r][u]);
        if (q->bias[r]) b = _mm256_set1_ps(q->bias[r][u]);
    }
    const __m256 x = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v, z)), s);
    return q->bias[r] ? _mm256_sub_ps(x, b) : x; /* separate rounding, as ggml: (q - z) x scale, then - bias */
}

/* Columns [c0, c0 + k) of row r (k <= 32) of an FP8 matrix as floats: codes decoded, times their
 * blocks' scales. */
SD_AVX2_INLINE void f8_decode(const q_ctx *q, int r, int64_t c0, int k, float *out) {
    const float *srow = q->scale[r];
    const uint8_t *codes = q->codes[r] + c0;
    const int64_t bn = q->unit;
    int j = 0;
    if (bn % 8 == 0 && c0 % 8 == 0) { /* 8 columns never straddle two blocks (128 x 128: the chunk never does) */
        int64_t blk = q_unit_of(q, c0), left = (blk + 1) * bn - c0; /* the block of column c0 + j, its columns left */
        for (; j + 8 <= k; j += 8, left -= 8) {
            if (!left) blk++, left = bn;
            _mm256_storeu_ps(out + j, q_decode8(q, r, c0 + j, blk));
        }
        for (; j < k; j++) out[j] = sd_cpu_fp8_e4m3(codes[j]) * srow[q_unit_of(q, c0 + j)];
        return;
    }
    for (; j + 8 <= k; j += 8) _mm256_storeu_ps(out + j, f8_decode8(_mm_loadl_epi64((const __m128i *)(codes + j))));
    for (; j < k; j++) out[j] = sd_cpu_fp8_e4m3(codes[j]);
    int64_t blk = q_unit_of(q, c0), left = bn - (c0 - blk * bn); /* the block of column c0 + j, its columns left */
    for (j = 0; j < k; j++, left--) {
        if (!left) blk++, left = bn;
        out[j] *= srow[blk];
    }
}

/* Columns [c0, c0 + k) of row r (k <= 32) of an INT4 / INT8 matrix as floats: eight at a time (q_decode8)
 * where groups of a multiple of 8 columns come in order (no g_idx), else column by column. */
SD_AVX2_INLINE void i4_decode(const q_ctx *q, int r, int64_t c0, int k, float *out) {
    const uint8_t *codes = q->codes[r];
    const float *sc = q->scale[r];
    const int32_t *zr = q->zero[r];
    int j = 0;
    if (!q->gidx && q->unit % 8 == 0 && c0 % 8 == 0) {
        int64_t g = q_unit_of(q, c0), left = (g + 1) * q->unit - c0; /* the group of column c0 + j, its columns left */
        for (; j + 8 <= k; j += 8, left -= 8) {
            if (!left) g++, left = q->unit;
            _mm256_storeu_ps(out + j, q_decode8(q, r, c0 + j, g));
        }
    }
    for (; j < k; j++) {
        const int64_t c = c0 + j, g = q->gidx ? q->gidx[c] : q_unit_of(q, c);
        const int v = q->bits == 8 ? codes[c] : (c & 1) ? codes[c / 2] >> 4 : codes[c / 2] & 15;
        const float x = (float)(v - (int)zr[g]) * sc[g];
        out[j] = q->bias[r] ? x - q->bias[r][g] : x;
    }
}

/* Up to this many tokens q_rows decodes in registers (q_rows8); more keep each chunk decoded once in a buffer
 * for all of them (bench/cpu/bench_matmul_int4: 8 tokens 0.85x BF16's time in registers, 16 tokens faster
 * through the buffer). */
#define SD_Q_ROWS8_MAX_TOKENS 8
/* The fast path of q_rows: columns [0, end8) eight at a time, decoded in registers (no store of the
 * decoded values), each 8 columns of the R rows serving every token; per (row, token) the fused
 * multiply-adds in column order, four columns per step: block()'s sums. */
SD_AVX2_INLINE void q_rows8(const q_ctx *q, int R, const float *const *x, int n, int64_t end8,
                            __m256d acc[4][SD_CPU_X86_TOKEN_CHUNK]) {
    int64_t u = 0, left = q->unit; /* (with a g_idx, u is not used) */
    for (int64_t c = 0; c < end8; c += 8, left -= 8) {
        if (left <= 0) u++, left = q->unit;
        __m256d lo[4], hi[4];
        for (int r = 0; r < R; r++) {
            const __m256 f = q_decode8(q, r, c, u);
            lo[r] = _mm256_cvtps_pd(_mm256_castps256_ps128(f));
            hi[r] = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
        }
        for (int t = 0; t < n; t++) {
            const __m256d xl = _mm256_cvtps_pd(_mm_loadu_ps(x[t] + c)), xh = _mm256_cvtps_pd(_mm_loadu_ps(x[t] + c + 4));
            for (int r = 0; r < R; r++) acc[r][t] = _mm256_fmadd_pd(hi[r], xh, _mm256_fmadd_pd(lo[r], xl, acc[r][t]));
        }
    }
}

/* Columns [c0, c0 + k) of row r (k <= 32) of an FP8, INT4 or INT8 matrix as floats. */
SD_AVX2_INLINE void q_decode(const q_ctx *q, int r, int64_t c0, int k, float *out) {
    if (q->bits) i4_decode(q, r, c0, k, out);
    else f8_decode(q, r, c0, k, out);
}

/* y[t][o0 + r] for R rows from o0 (R <= 4) and all n tokens (n <= SD_CPU_X86_TOKEN_CHUNK) of an FP8 or
 * INT4 matrix: each 32-column chunk of the rows is decoded once and serves every token (decoding costs
 * more than the products); per (row, token) the fused multiply-adds run in column order, as block()'s
 * for F32 rows. */
SD_AVX2_INLINE void q_rows(const sd_x86_mm *m, int64_t o0, int R, const float *const *x, float *const *y, int n,
                           const double *b) {
    const int64_t cols = m->cols, end4 = cols & ~(int64_t)3;
    __m256d acc[4][SD_CPU_X86_TOKEN_CHUNK];
    float dec[4][32];
    q_ctx q;
    q_ctx_init(m, o0, R, &q);
    for (int r = 0; r < R; r++)
        for (int t = 0; t < n; t++) acc[r][t] = _mm256_setzero_pd();
    int64_t from = 0; /* the columns q_rows8 did */
    if ((q.unit % 8 == 0 || q.gidx) && n <= SD_Q_ROWS8_MAX_TOKENS) { /* (a g_idx: any width, gathered per lane) */
        from = cols & ~(int64_t)7;
        if (n == 1) q_rows8(&q, R, x, 1, from, acc); /* one token (a decode step): its sums in registers */
        else q_rows8(&q, R, x, n, from, acc);
    }
    for (int64_t c0 = from; c0 < end4; c0 += 32) {
        const int k = (int)(end4 - c0 < 32 ? end4 - c0 : 32), nq = k / 4; /* k: a multiple of 4 */
        __m256d wv[4][8];
        for (int r = 0; r < R; r++) {
            q_decode(&q, r, c0, k, dec[r]);
            for (int i = 0; i < nq; i++) wv[r][i] = _mm256_cvtps_pd(_mm_loadu_ps(dec[r] + 4 * i));
        }
        for (int t = 0; t < n; t++)
            for (int i = 0; i < nq; i++) {
                const __m256d xv = _mm256_cvtps_pd(_mm_loadu_ps(x[t] + c0 + 4 * i));
                for (int r = 0; r < R; r++) acc[r][t] = _mm256_fmadd_pd(wv[r][i], xv, acc[r][t]);
            }
    }
    for (int r = 0; r < R; r++) {
        float tail[32]; /* q_decode stores 8 at a time: room for that, though at most 3 are used */
        q_decode(&q, r, end4, (int)(cols - end4), tail);
        for (int t = 0; t < n; t++)
            y[t][o0 + r] = (float)(finish(acc[r][t], tail, x[t] + end4, 0, cols - end4, SD_F32) + b[r]);
    }
}

/* FP8 and INT4 rows (q_rows). */
static SD_CPU_UNINSTRUMENTED SD_AVX2 void rows_quant(const sd_x86_mm *m, const float *const *x, float *const *y,
                                                    int n) {
    int64_t o = m->o_begin;
    for (; o + 4 <= m->o_end; o += 4) {
        double b[4];
        for (int r = 0; r < 4; r++) b[r] = m->bias ? (double)sd_cpu_elem(m->bias, o + r) : 0.0;
        q_rows(m, o, 4, x, y, n, b);
    }
    for (; o < m->o_end; o++) {
        double b[1] = {m->bias ? (double)sd_cpu_elem(m->bias, o) : 0.0};
        q_rows(m, o, 1, x, y, n, b);
    }
}

/* One instantiation per weight dtype; uninstrumented under the sanitizers (the caller checks
 * every range this reads and writes: sd_cpu_matmul.c). */
static SD_CPU_UNINSTRUMENTED SD_AVX2 void rows_f32(const sd_x86_mm *m, const float *const *x, float *const *y, int n) {
    rows_all(m, x, y, n, SD_F32);
}
static SD_CPU_UNINSTRUMENTED SD_AVX2 void rows_f16(const sd_x86_mm *m, const float *const *x, float *const *y, int n) {
    rows_all(m, x, y, n, SD_F16);
}
static SD_CPU_UNINSTRUMENTED SD_AVX2 void rows_bf16(const sd_x86_mm *m, const float *const *x, float *const *y, int n) {
    rows_all(m, x, y, n, SD_BF16);
}

void sd_cpu_matmul_x86(const sd_x86_mm *m, const float *const *x, float *const *y, int n) {
    switch (m->dtype) {
    case SD_F16: rows_f16(m, x, y, n); break;
    case SD_BF16: rows_bf16(m, x, y, n); break;
    case SD_MXFP4: rows_mxfp4(m, x, y, n); break;
    case SD_FP8:
    case SD_INT4:
    case SD_INT8: rows_quant(m, x, y, n); break;
    default: rows_f32(m, x, y, n); break;
    }
}

#else

int sd_cpu_x86_avx2_supported(void) { return 0; }
void sd_cpu_matmul_x86(const sd_x86_mm *m, const float *const *x, float *const *y, int n) {
    (void)m, (void)x, (void)y, (void)n;
}

#endif
