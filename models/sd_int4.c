/* sd_int4.c — GPTQ / AWQ words to SD_INT4 (see sd_int4.h). */
#include "sd_int4.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sd_math.h"

/* AWQ's interleave: nibble k of a word holds output 8c + awq_order[k]. */
static const int awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};

static uint32_t word_at(const uint8_t *p, int64_t i) {
    uint32_t w;
    memcpy(&w, p + 4 * i, 4);
    return w; /* safetensors data is little-endian, as every host the loader reads it on */
}

static float scale_at(const sd_int4_src *s, int64_t i) {
    if (s->scales_dt == SD_F32) {
        float v;
        memcpy(&v, s->scales + 4 * i, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, s->scales + 2 * i, 2);
    return s->scales_dt == SD_BF16 ? sd_bf16_to_f32(h) : sd_f16_to_f32(h);
}

/* The buffer: meta, scales [rows, G], gidx [cols], zeros [rows, G], codes [rows, cols / 2]. */
typedef struct int4_layout {
    size_t scale, gidx, zero, codes, total;
} int4_layout;

static int4_layout layout(int32_t bits, int64_t rows, int64_t cols, int32_t group) {
    const int64_t G = sd_int4_groups(cols, group);
    int4_layout l;
    l.scale = (sizeof(sd_int4_meta) + 7) & ~(size_t)7;
    l.gidx = l.scale + (size_t)(rows * G) * sizeof(float);
    l.zero = l.gidx + (size_t)cols * sizeof(int32_t);
    l.codes = (l.zero + (size_t)(rows * G) * sizeof(int32_t) + 63) & ~(size_t)63;
    l.total = l.codes + (size_t)(rows * (bits == 8 ? cols : cols / 2));
    return l;
}

size_t sd_int4_bytes(int32_t bits, int64_t rows, int64_t cols, int32_t group) {
    return layout(bits, rows, cols, group).total;
}

/* Codes: GPTQ word [r, o] holds columns 8r..8r+7 of row o, nibble k at bits 4k, which are the
 * word's little-endian bytes in the SD_INT4 order (column 2j low, 2j + 1 high): a 4-byte copy.
 * AWQ word [i, c] holds column i of rows 8c + awq_order[k]. */
static void repack_codes(const sd_int4_src *s, uint8_t *codes) {
    const int64_t rows = s->rows, cols = s->cols, rb = s->bits == 8 ? cols : cols / 2;
    if (s->fmt == SD_INT4_CT) { /* already row-major, low bits first; stored q + 2^(bits-1), read with that zero */
        memcpy(codes, s->qweight, (size_t)(rows * rb));
        return;
    }
    if (s->fmt == SD_INT4_AWQ) {
        for (int64_t i = 0; i < cols; i++)
            for (int64_t c = 0; c < rows / 8; c++) {
                const uint32_t w = word_at(s->qweight, i * (rows / 8) + c);
                for (int k = 0; k < 8; k++) {
                    const uint8_t q = (uint8_t)((w >> (4 * k)) & 15u);
                    codes[(8 * c + awq_order[k]) * rb + i / 2] |= (uint8_t)(q << (4 * (i & 1)));
                }
            }
        return;
    }
    const int64_t per = 32 / s->bits; /* GPTQ: word [r, o] holds inputs per * r .. per * r + per - 1 of row o */
    for (int64_t r = 0; r < cols / per; r++)
        for (int64_t o = 0; o < rows; o++) memcpy(codes + o * rb + 4 * r, s->qweight + 4 * (r * rows + o), 4);
}

static void repack_zeros(const sd_int4_src *s, int64_t G, int32_t *zero) {
    const int b = s->bits, per = 32 / b;
    const uint32_t mask = (1u << b) - 1u;
    if (s->fmt == SD_INT4_CT) { /* word [w, g]: outputs per * w .. of group g, zp + 2^(b-1); none: symmetric */
        for (int64_t o = 0; o < s->rows; o++)
            for (int64_t g = 0; g < G; g++)
                zero[o * G + g] = s->qzeros ? (int32_t)((word_at(s->qzeros, (o / per) * G + g) >> (b * (o % per))) & mask)
                                            : 1 << (b - 1);
        return;
    }
    for (int64_t g = 0; g < G; g++)
        for (int64_t c = 0; c < s->rows / per; c++) {
            const uint32_t w = word_at(s->qzeros, g * (s->rows / per) + c);
            for (int k = 0; k < per; k++) {
                uint32_t z = (w >> (b * k)) & mask;
                if (s->fmt == SD_INT4_GPTQ) z = (z + 1) & mask; /* v1 stores zero - 1 */
                const int64_t o = per * c + (s->fmt == SD_INT4_AWQ ? awq_order[k] : k);
                zero[o * G + g] = (int32_t)z;
            }
        }
}

int sd_int4_repack(const sd_int4_src *s, void *buf, sd_tensor *out, char *why, size_t why_cap) {
    const int64_t rows = s->rows, cols = s->cols, G = sd_int4_groups(cols, s->group);
    const int4_layout l = layout(s->bits, rows, cols, s->group);
    uint8_t *b = buf;
    sd_int4_meta *meta = buf;
    float *scale = (float *)(void *)(b + l.scale);
    int32_t *gidx = (int32_t *)(void *)(b + l.gidx);
    int32_t *zero = (int32_t *)(void *)(b + l.zero);
    for (int64_t g = 0; g < G; g++)
        for (int64_t o = 0; o < rows; o++) {
            const float v = scale_at(s, s->fmt == SD_INT4_CT ? o * G + g : g * rows + o);
            if (!isfinite(v)) {
                snprintf(why, why_cap, "the scale of group %lld, output %lld is %g (must be finite)", (long long)g,
                         (long long)o, (double)v);
                return 0;
            }
            scale[o * G + g] = v;
        }
    int trivial = 1;
    for (int64_t i = 0; s->g_idx && i < cols; i++) {
        const int32_t gi = (int32_t)word_at(s->g_idx, i);
        if (gi < 0 || gi >= G) {
            snprintf(why, why_cap, "g_idx[%lld] is %d (groups: %lld)", (long long)i, (int)gi, (long long)G);
            return 0;
        }
        gidx[i] = gi;
        trivial &= gi == i / s->group;
    }
    repack_zeros(s, G, zero);
    repack_codes(s, b + l.codes);
    meta->bits = s->bits;
    meta->group = s->group;
    meta->n_groups = (int32_t)G;
    meta->gidx = s->g_idx && !trivial ? gidx : NULL;
    meta->scale = scale;
    meta->zero = zero;
    meta->bias = NULL;
    memset(out, 0, sizeof *out);
    out->data = b + l.codes;
    out->dtype = s->bits == 8 ? SD_INT8 : SD_INT4;
    out->ndim = 2;
    out->shape[0] = rows;
    out->shape[1] = cols;
    out->scales = buf;
    return 1;
}
