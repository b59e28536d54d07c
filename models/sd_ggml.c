/* sd_ggml.c — ggml blocks to SD_INT4 / SD_INT8 (see sd_ggml.h). The block layouts are ggml's
 * (ggml-common.h), as GGUF stores them; decoded block by block into codes and per-group numbers. */
#include "sd_ggml.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "sd_cpu_pool.h"
#include "sd_ggml_iq_grids.h"
#include "sd_gguf.h"
#include "sd_math.h"

#define QK_K 256
/* Most threads a repack uses (sd_cpu_default_threads, itself at most 8). */
#define SD_GGML_REPACK_THREADS 8

typedef struct ggml_q_kind {
    int32_t group;   /* values per scale */
    int32_t bits;    /* storage: 4 (SD_INT4) or 8 (SD_INT8) */
    int32_t zero;    /* the codes' offset */
    int32_t bias;    /* 1: a bias per group */
} ggml_q_kind;

static int kind_of(uint32_t type, ggml_q_kind *k) {
    switch (type) {
    case SD_GGML_Q4_0: *k = (ggml_q_kind){32, 4, 8, 0}; return 1;
    case SD_GGML_Q4_1: *k = (ggml_q_kind){32, 4, 0, 1}; return 1;
    case SD_GGML_Q5_0: *k = (ggml_q_kind){32, 8, 16, 0}; return 1;
    case SD_GGML_Q5_1: *k = (ggml_q_kind){32, 8, 0, 1}; return 1;
    case SD_GGML_Q8_0: *k = (ggml_q_kind){32, 8, 128, 0}; return 1;
    case SD_GGML_Q2_K: *k = (ggml_q_kind){16, 4, 0, 1}; return 1;
    case SD_GGML_Q3_K: *k = (ggml_q_kind){16, 4, 4, 0}; return 1;
    case SD_GGML_Q4_K: *k = (ggml_q_kind){32, 4, 0, 1}; return 1;
    case SD_GGML_Q5_K: *k = (ggml_q_kind){32, 8, 0, 1}; return 1;
    case SD_GGML_Q6_K: *k = (ggml_q_kind){16, 8, 32, 0}; return 1;
    case SD_GGML_IQ4_NL: case SD_GGML_IQ4_XS: *k = (ggml_q_kind){32, 8, 128, 0}; return 1;
    case SD_GGML_IQ2_XXS: case SD_GGML_IQ3_XXS: case SD_GGML_IQ3_S: case SD_GGML_IQ1_S:
        *k = (ggml_q_kind){32, 8, 128, 0};
        return 1;
    case SD_GGML_IQ2_XS: case SD_GGML_IQ2_S: case SD_GGML_IQ1_M: *k = (ggml_q_kind){16, 8, 128, 0}; return 1;
    default: return 0;
    }
}

int sd_ggml_repackable(uint32_t type) {
    ggml_q_kind k;
    return kind_of(type, &k);
}

static float half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return sd_f16_to_f32(h);
}

typedef struct ggml_layout {
    size_t scale, zero, bias, codes, total;
} ggml_layout;

static ggml_layout layout(const ggml_q_kind *k, int64_t rows, int64_t cols) {
    const size_t n = (size_t)(rows * (cols / k->group));
    ggml_layout l;
    l.scale = (sizeof(sd_int4_meta) + 7) & ~(size_t)7;
    l.zero = l.scale + n * sizeof(float);
    l.bias = l.zero + n * sizeof(int32_t);
    l.codes = (l.bias + (k->bias ? n * sizeof(float) : 0) + 63) & ~(size_t)63;
    l.total = l.codes + (size_t)(rows * (k->bits == 8 ? cols : cols / 2));
    return l;
}

size_t sd_ggml_bytes(uint32_t type, int64_t rows, int64_t cols) {
    ggml_q_kind k;
    return kind_of(type, &k) ? layout(&k, rows, cols).total : 0;
}

/* IQ4_NL / IQ4_XS: a 4-bit index into ggml's non-linear table (kvalues_iq4nl); stored as the int8 value + 128
 * (zero 128), so the value is (code - 128) x scale, the product ggml forms. */
static const int8_t iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static void iq4_codes(const uint8_t *qs, uint8_t *q) { /* 16 bytes: element j low nibble of qs[j], j + 16 high */
    for (int j = 0; j < 16; j++)
        q[j] = (uint8_t)(iq4_values[qs[j] & 15] + 128), q[j + 16] = (uint8_t)(iq4_values[qs[j] >> 4] + 128);
}

/* IQ1 / IQ2 / IQ3: each grid index stands for 8 (IQ1 / IQ2) or 4 (IQ3) magnitudes of the type's codebook
 * (sd_ggml_iq_grids.h), with a sign per value; the codes are the signed values + 128 (zero 128), the scale the
 * sub-block's d x (0.5 + ls) x 0.25 (IQ2), x 0.5 (IQ3_XXS), d x (1 + 2 ls) (IQ3_S), as ggml forms them, so the
 * value (code - 128) x scale is ggml's product. IQ1_S / IQ1_M's values are dl x (g + delta), g in {-1, 0, 1},
 * delta = +-1/8: stored as the integer 8 g +- 1 with scale dl / 8, the same exact product. */
typedef struct iq_grid {
    const uint8_t *bytes;
    const int8_t *map;
    int bits, width;
} iq_grid;

static const iq_grid iq2xxs = {sd_iq2xxs_grid, sd_iq2xxs_map, 2, 8}, iq2xs = {sd_iq2xs_grid, sd_iq2xs_map, 2, 8},
                     iq2s = {sd_iq2s_grid, sd_iq2s_map, 2, 8}, iq3xxs = {sd_iq3xxs_grid, sd_iq3xxs_map, 4, 4},
                     iq3s = {sd_iq3s_grid, sd_iq3s_map, 4, 4}, iq1s = {sd_iq1s_grid, sd_iq1s_map, 2, 8};

/* Element e of grid row `row`. */
static int iq_value(const iq_grid *g, int row, int e) {
    const int k = row * g->width + e, per = 8 / g->bits;
    return g->map[(g->bytes[k / per] >> (g->bits * (k % per))) & ((1 << g->bits) - 1)];
}

/* ggml's ksigns_iq2xs: 7 sign bits and an eighth that makes the count of minus signs even. */
static unsigned iq_signs7(unsigned i) {
    unsigned p = i;
    p ^= p >> 4, p ^= p >> 2, p ^= p >> 1;
    return (i & 127) | (p & 1) << 7;
}

/* n values of grid row `row` into q, value e negative when bit e of `signs` is set. */
static void iq_row(const iq_grid *g, int row, unsigned signs, int n, uint8_t *q) {
    for (int e = 0; e < n; e++) {
        const int v = iq_value(g, row, e);
        q[e] = (uint8_t)(128 + ((signs >> e) & 1 ? -v : v));
    }
}

/* IQ1_S / IQ1_M: 8 values of iq1s row `row`, delta -1/8 when neg_delta: codes 8 g +- 1 (+ 128). */
static void iq1_row(int row, int neg_delta, uint8_t *q) {
    for (int e = 0; e < 8; e++) q[e] = (uint8_t)(128 + 8 * iq_value(&iq1s, row, e) + (neg_delta ? -1 : 1));
}

static uint32_t u32_at(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static unsigned u16_at(const uint8_t *p) { return (unsigned)p[0] | (unsigned)p[1] << 8; }

/* Q4_K / Q5_K: the 6-bit scale and min of sub-block j from the 12 packed bytes. */
static void scale_min_k4(int j, const uint8_t *q, int *sc, int *mn) {
    if (j < 4) {
        *sc = q[j] & 63, *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
        *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q3_K: the 16 signed 6-bit scales (stored + 32) from the 12 packed bytes: low nibbles of bytes 0..7
 * (scales 0..7) and their high nibbles (8..15), the top two bits from bytes 8..11. */
static void scales_q3k(const uint8_t *p, int *sc) {
    for (int j = 0; j < 16; j++) {
        const int lo = j < 8 ? p[j] & 15 : p[j - 8] >> 4;
        const int hi = (p[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j] = (lo | (hi << 4)) - 32;
    }
}

/* One block at b: its QK values' codes into q, each group's scale and bias into sc / bi. */
static void block_decode(uint32_t type, const uint8_t *b, uint8_t *q, float *sc, float *bi) {
    switch (type) {
    case SD_GGML_Q4_0: case SD_GGML_Q4_1: { /* d [, m], qs[16]: value j low nibble of qs[j], j + 16 high */
        const int m = type == SD_GGML_Q4_1;
        const uint8_t *qs = b + 2 + 2 * m;
        for (int j = 0; j < 16; j++) q[j] = qs[j] & 15, q[j + 16] = qs[j] >> 4;
        sc[0] = half_at(b);
        if (m) bi[0] = -half_at(b + 2);
        return;
    }
    case SD_GGML_Q5_0: case SD_GGML_Q5_1: { /* d [, m], qh (32 fifth bits), qs[16] */
        const int m = type == SD_GGML_Q5_1;
        uint32_t qh;
        memcpy(&qh, b + 2 + 2 * m, 4);
        const uint8_t *qs = b + 6 + 2 * m;
        for (int j = 0; j < 16; j++) {
            q[j] = (uint8_t)((qs[j] & 15) | (((qh >> j) & 1u) << 4));
            q[j + 16] = (uint8_t)((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
        }
        sc[0] = half_at(b);
        if (m) bi[0] = -half_at(b + 2);
        return;
    }
    case SD_GGML_Q8_0: /* d, qs[32] int8 (stored + 128) */
        for (int j = 0; j < 32; j++) q[j] = (uint8_t)((int8_t)b[2 + j] + 128);
        sc[0] = half_at(b);
        return;
    case SD_GGML_Q2_K: { /* scales[16] (scale | min << 4), qs[64], d, dmin */
        const uint8_t *scales = b, *qs = b + 16;
        const float d = half_at(b + 80), dmin = half_at(b + 82);
        for (int h = 0; h < 2; h++) /* value 128 h + 32 j + l: bits 2j of qs[32 h + l] */
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 32; l++) q[128 * h + 32 * j + l] = (uint8_t)((qs[32 * h + l] >> (2 * j)) & 3);
        for (int g = 0; g < 16; g++) sc[g] = d * (float)(scales[g] & 15), bi[g] = dmin * (float)(scales[g] >> 4);
        return;
    }
    case SD_GGML_Q3_K: { /* hmask[32], qs[64], scales[12], d: code = low 2 bits + 4 x the hmask bit, zero 4 */
        const uint8_t *hm = b, *qs = b + 32;
        const float d = half_at(b + 108);
        int s[16];
        scales_q3k(b + 96, s);
        for (int h = 0; h < 2; h++) /* value 128 h + 32 j + l: bits 2j of qs[32 h + l], bit 4h + j of hm[l] */
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 32; l++)
                    q[128 * h + 32 * j + l] =
                        (uint8_t)(((qs[32 * h + l] >> (2 * j)) & 3) | (((hm[l] >> (4 * h + j)) & 1) << 2));
        for (int g = 0; g < 16; g++) sc[g] = d * (float)s[g];
        return;
    }
    case SD_GGML_Q4_K: case SD_GGML_Q5_K: { /* d, dmin, scales[12], [qh[32],] qs[128] */
        const int five = type == SD_GGML_Q5_K;
        const float d = half_at(b), dmin = half_at(b + 2);
        const uint8_t *qh = b + 16, *qs = b + 16 + 32 * five;
        for (int c = 0; c < 4; c++) /* value 64 c + 32 s + l: nibble s of qs[32 c + l], fifth bit 2c + s of qh[l] */
            for (int l = 0; l < 32; l++) {
                const uint8_t b8 = qs[32 * c + l], h5 = five ? qh[l] : 0;
                q[64 * c + l] = (uint8_t)((b8 & 15) | (((h5 >> (2 * c)) & 1) << 4));
                q[64 * c + 32 + l] = (uint8_t)((b8 >> 4) | (((h5 >> (2 * c + 1)) & 1) << 4));
            }
        for (int g = 0; g < 8; g++) {
            int s, mn;
            scale_min_k4(g, b + 4, &s, &mn);
            sc[g] = d * (float)s, bi[g] = dmin * (float)mn;
        }
        return;
    }
    case SD_GGML_Q6_K: { /* ql[128], qh[64], scales[16] int8, d */
        const uint8_t *ql = b, *qh = b + 128;
        const float d = half_at(b + 208);
        for (int h = 0; h < 2; h++) /* value 128 h + 32 k + l: a nibble of ql[64 h + 32 (k & 1) + l], bits 2k of qh */
            for (int l = 0; l < 32; l++) {
                const uint8_t a = ql[64 * h + l], b8 = ql[64 * h + 32 + l], hb = qh[32 * h + l];
                q[128 * h + l] = (uint8_t)((a & 15) | ((hb & 3) << 4));
                q[128 * h + 32 + l] = (uint8_t)((b8 & 15) | (((hb >> 2) & 3) << 4));
                q[128 * h + 64 + l] = (uint8_t)((a >> 4) | (((hb >> 4) & 3) << 4));
                q[128 * h + 96 + l] = (uint8_t)((b8 >> 4) | (((hb >> 6) & 3) << 4));
            }
        for (int g = 0; g < 16; g++) sc[g] = d * (float)(int8_t)b[192 + g];
        return;
    }
    case SD_GGML_IQ4_NL: /* d, qs[16] */
        iq4_codes(b + 2, q);
        sc[0] = half_at(b);
        return;
    case SD_GGML_IQ4_XS: { /* d, scales_h (2 high bits a sub-block), scales_l[4] (4 low bits), qs[128] */
        const float d = half_at(b);
        const unsigned sh = (unsigned)b[2] | (unsigned)b[3] << 8;
        for (int ib = 0; ib < 8; ib++) { /* sub-block ib of 32: scale d x (ls - 32) */
            const int ls = ((b[4 + ib / 2] >> 4 * (ib % 2)) & 15) | (int)((sh >> 2 * ib) & 3) << 4;
            sc[ib] = d * (float)(ls - 32);
            iq4_codes(b + 8 + 16 * ib, q + 32 * ib);
        }
        return;
    }
    case SD_GGML_IQ2_XXS: /* d, then per 32 values two uint32: 4 grid rows (bytes); 4 x 7 sign bits, ls in 28..31 */
    case SD_GGML_IQ3_XXS: { /* d, qs[64] (grid rows of 4), per 32 values a uint32: 4 x 7 sign bits, ls */
        const int three = type == SD_GGML_IQ3_XXS;
        const float d = half_at(b);
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *rows = b + 2 + 8 * ib; /* IQ2_XXS: the first uint32; IQ3_XXS: 8 of qs */
            const uint32_t aux = u32_at(three ? b + 66 + 4 * ib : b + 2 + 8 * ib + 4);
            sc[ib] = d * (0.5f + (float)(aux >> 28)) * (three ? 0.5f : 0.25f);
            for (int l = 0; l < 4; l++) {
                const unsigned sg = iq_signs7((aux >> (7 * l)) & 127);
                uint8_t *o = q + 32 * ib + 8 * l;
                if (three) iq_row(&iq3xxs, rows[2 * l], sg, 4, o), iq_row(&iq3xxs, rows[2 * l + 1], sg >> 4, 4, o + 4);
                else iq_row(&iq2xxs, rows[l], sg, 8, o);
            }
        }
        return;
    }
    case SD_GGML_IQ2_XS: { /* d, qs uint16[32] (9-bit row, 7 sign bits), scales[8] (a nibble per 16 values) */
        const float d = half_at(b);
        for (int k = 0; k < 32; k++) {
            const unsigned v = u16_at(b + 2 + 2 * k);
            iq_row(&iq2xs, (int)(v & 511), iq_signs7(v >> 9), 8, q + 8 * k);
        }
        for (int g = 0; g < 16; g++) sc[g] = d * (0.5f + (float)((b[66 + g / 2] >> 4 * (g % 2)) & 15)) * 0.25f;
        return;
    }
    case SD_GGML_IQ2_S: { /* d, qs[32] (row low bits), signs[32] (a bit a value), qh[8] (2 high bits a row), scales[8] */
        const float d = half_at(b);
        for (int k = 0; k < 32; k++) {
            const int row = b[2 + k] | ((b[66 + k / 4] >> (2 * (k % 4))) & 3) << 8;
            iq_row(&iq2s, row, b[34 + k], 8, q + 8 * k);
        }
        for (int g = 0; g < 16; g++) sc[g] = d * (0.5f + (float)((b[74 + g / 2] >> 4 * (g % 2)) & 15)) * 0.25f;
        return;
    }
    case SD_GGML_IQ3_S: { /* d, qs[64] (row low bits), qh[8] (a ninth bit a row), signs[32], scales[4] (nibbles) */
        const float d = half_at(b);
        for (int k = 0; k < 64; k++) {
            const int row = b[2 + k] | ((b[66 + k / 8] >> (k % 8)) & 1) << 8;
            iq_row(&iq3s, row, (unsigned)b[74 + k / 2] >> (4 * (k % 2)), 4, q + 4 * k);
        }
        for (int g = 0; g < 8; g++) sc[g] = d * (float)(1 + 2 * ((b[106 + g / 2] >> 4 * (g % 2)) & 15));
        return;
    }
    case SD_GGML_IQ1_S: { /* d, qs[32] (row low bits), qh uint16[8]: 4 x 3 high bits, ls in 12..14, delta sign 15 */
        const float d = half_at(b);
        for (int ib = 0; ib < 8; ib++) {
            const unsigned h = u16_at(b + 34 + 2 * ib);
            sc[ib] = d * (float)(2 * ((h >> 12) & 7) + 1) * 0.125f;
            for (int l = 0; l < 4; l++)
                iq1_row(b[2 + 4 * ib + l] | (int)((h >> (3 * l)) & 7) << 8, (h & 0x8000) != 0, q + 32 * ib + 8 * l);
        }
        return;
    }
    case SD_GGML_IQ1_M: { /* qs[32], qh[16] (a nibble a row: 3 high bits, delta sign), scales uint16[4]: 3-bit
                           * scales a 16 values, d's fp16 bits in their top nibbles */
        unsigned s4[4];
        for (int i = 0; i < 4; i++) s4[i] = u16_at(b + 48 + 2 * i);
        const uint16_t dh = (uint16_t)((s4[0] >> 12) | ((s4[1] >> 8) & 0xF0) | ((s4[2] >> 4) & 0xF00) | (s4[3] & 0xF000));
        const float d = sd_f16_to_f32(dh);
        for (int k = 0; k < 32; k++) {
            const unsigned nib = (unsigned)(b[32 + k / 2] >> (4 * (k % 2))) & 15;
            iq1_row(b[k] | (int)(nib & 7) << 8, (nib & 8) != 0, q + 8 * k);
        }
        for (int g = 0; g < 16; g++) sc[g] = d * (float)(2 * ((s4[g / 4] >> (3 * (g % 4))) & 7) + 1) * 0.125f;
        return;
    }
    default: return;
    }
}

/* One thread's share of a repack: rows [r0, r1). bad_row: the first row with a non-finite scale or min
 * (its reason in why), else -1. */
typedef struct ggml_job {
    uint32_t type;
    ggml_q_kind k;
    sd_ggml_type_info ti;
    const uint8_t *src;
    int64_t cols, r0, r1;
    float *scale, *bias;
    int32_t *zero;
    uint8_t *codes;
    int64_t bad_row;
    char why[160];
} ggml_job;

static void *ggml_rows(void *arg) {
    ggml_job *j = arg;
    const ggml_q_kind k = j->k;
    const sd_ggml_type_info ti = j->ti;
    const int64_t G = j->cols / k.group, per = (int64_t)ti.block / k.group, nb = j->cols / ti.block;
    const size_t rb = (size_t)(k.bits == 8 ? j->cols : j->cols / 2);
    uint8_t q[QK_K];
    float sc[16], bi[16];
    j->bad_row = -1;
    for (int64_t r = j->r0; r < j->r1; r++)
        for (int64_t blk = 0; blk < nb; blk++) {
            memset(bi, 0, sizeof bi);
            block_decode(j->type, j->src + (size_t)(r * nb + blk) * ti.bytes, q, sc, bi);
            for (int64_t g = 0; g < per; g++) {
                const int64_t i = r * G + blk * per + g;
                if (!isfinite(sc[g]) || !isfinite(bi[g])) {
                    snprintf(j->why, sizeof j->why, "row %lld, block %lld: scale %g, min %g (must be finite)",
                             (long long)r, (long long)blk, (double)sc[g], (double)bi[g]);
                    j->bad_row = r;
                    return NULL;
                }
                j->scale[i] = sc[g], j->zero[i] = k.zero;
                if (j->bias) j->bias[i] = bi[g];
            }
            uint8_t *dst = j->codes + (size_t)r * rb + (size_t)(blk * (int64_t)ti.block) / (k.bits == 8 ? 1 : 2);
            if (k.bits == 8) memcpy(dst, q, ti.block);
            else /* blocks are 32 or 256 values: whole bytes, column 2j low */
                for (uint32_t c = 0; c < ti.block / 2; c++) dst[c] = (uint8_t)(q[2 * c] | (q[2 * c + 1] << 4));
        }
    return NULL;
}

int sd_ggml_repack(uint32_t type, const uint8_t *src, int64_t rows, int64_t cols, int threads, void *buf,
                   sd_tensor *out, char *why, size_t why_cap) {
    ggml_q_kind k;
    const sd_ggml_type_info ti = sd_ggml_type_info_of(type);
    if (!kind_of(type, &k) || cols % ti.block) {
        snprintf(why, why_cap, "ggml type %u cannot be read as integer codes here", (unsigned)type);
        return 0;
    }
    const ggml_layout l = layout(&k, rows, cols);
    uint8_t *bb = buf;
    sd_int4_meta *meta = buf;
    float *scale = (float *)(void *)(bb + l.scale), *bias = k.bias ? (float *)(void *)(bb + l.bias) : NULL;
    int32_t *zero = (int32_t *)(void *)(bb + l.zero);
    uint8_t *codes = bb + l.codes;
    /* rows split over up to SD_GGML_REPACK_THREADS threads when the matrix is large (a thread that cannot
     * start: its rows run here); every row is written by one thread, so the result does not depend on it */
    ggml_job jobs[SD_GGML_REPACK_THREADS];
    pthread_t tid[SD_GGML_REPACK_THREADS];
    int T = threads > 0 ? threads : rows * cols >= ((int64_t)1 << 22) ? sd_cpu_default_threads() : 1;
    if (T > SD_GGML_REPACK_THREADS) T = SD_GGML_REPACK_THREADS;
    if (T < 1 || T > rows) T = 1;
    int started[SD_GGML_REPACK_THREADS] = {0};
    for (int t = 0; t < T; t++) {
        jobs[t] = (ggml_job){type, k, ti, src, cols, rows * t / T, rows * (t + 1) / T, scale, bias, zero, codes, -1, ""};
        started[t] = t > 0 && pthread_create(&tid[t], NULL, ggml_rows, &jobs[t]) == 0;
    }
    for (int t = 0; t < T; t++)
        if (!started[t]) ggml_rows(&jobs[t]);
    for (int t = 0; t < T; t++)
        if (started[t]) pthread_join(tid[t], NULL);
    for (int t = 0; t < T; t++) /* the first bad row of the matrix, whatever the split */
        if (jobs[t].bad_row >= 0) {
            snprintf(why, why_cap, "%s", jobs[t].why);
            return 0;
        }
    meta->bits = k.bits;
    meta->group = k.group;
    meta->n_groups = (int32_t)(cols / k.group);
    meta->gidx = NULL;
    meta->scale = scale;
    meta->zero = zero;
    meta->bias = bias;
    memset(out, 0, sizeof *out);
    out->data = codes;
    out->dtype = k.bits == 8 ? SD_INT8 : SD_INT4;
    out->ndim = 2;
    out->shape[0] = rows;
    out->shape[1] = cols;
    out->scales = buf;
    return 1;
}
