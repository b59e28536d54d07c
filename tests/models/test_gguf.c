/* test_gguf.c — GGUF files (core/sd_gguf.h, models/sd_ggml.h, models/sd_gguf_load.h):
 *   1. the parser: a GGUF written HERE from the format's description parses, its metadata and tensors
 *      read back; every truncation of it and each malformed variant (versions 1 and 4, counts past the
 *      file, a key with a NUL, nested arrays, unknown value and tensor types, rows not whole blocks, an
 *      alignment that is not a power of two, a misaligned or out-of-range tensor, duplicate keys and
 *      tensor names) is SPECDEC_ERR_FORMAT, never a crash (ASan runs this test);
 *   2. the block types: random blocks of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K
 *      (fixed seed, fp16 scales set to ordinary values) repacked by sd_ggml_repack read back through
 *      sd_cpu_elem / sd_cpu_row_f32 bitwise equal to ggml's dequantisation as written in ggml's own loop
 *      order HERE (an independent transcription: pointers walking the block, not sd_ggml.c's index
 *      maths); a repack split over 1, 3, 8 threads or the automatic count writes the same bytes and names
 *      the same first bad row (the TSan stage runs this test); sd_cpu_matmul over them (1, 3 and 12 tokens, both ISA paths, 1 and 2 threads) within
 *      1e-6 of the product in double, the AVX2 path bitwise the portable one; a NaN scale is refused; the
 *      codebook types IQ1_S .. IQ3_S the same way, their values against gguf-py's (ggml_blocks_vs_gguf_py);
 *   3. the loader: a tiny "llama" GGUF (F32 with one Q4_0 and one Q8_0 matrix) loads as
 *      LlamaForCausalLM with adjacent-pair rope, SD_INT4_GGUF (CPU only), its shapes, BOS and the end ids
 *      (eos, eot, eom: llama.cpp's end-of-generation tokens, repeats dropped); an all-F16
 *      "qwen2" one needs no quantization (CUDA may run it); refused, naming the key, tensor or type: an
 *      unknown architecture, an unknown tensor, an unsupported block type (Q8_1), a missing required
 *      key, rope scaling "yarn", a tensor the configuration does not read (a q bias on one layer only),
 *      a rope_freqs.weight of the wrong size, a NaN block scale, and MTP loading;
 *   4. split files (llama.cpp's gguf-split): two files load from the first; the second passed, a missing
 *      one, a renamed first file, a tensor count that does not add up, a tensor in both files and a file
 *      out of order are refused.
 * (logits against transformers: the gguf_* fixtures in tests/models/test_model_fixtures.c.)
 * argv[1] = a scratch directory. */
#define _GNU_SOURCE /* memmem */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_cpu_dequant.h"
#include "sd_ggml.h"
#include "sd_gguf.h"
#include "sd_math.h"
#include "sd_model.h"
#include "sd_test.h"
#include "sd_test_files.h"
#include "quant_matmul_check.h"
#include "specdec.h"

static unsigned rng_state = 4242;
static unsigned rnd(unsigned n) {
    rng_state = rng_state * 1103515245u + 12345u;
    return (rng_state >> 16) % n;
}

/* ---- a GGUF writer (the format as sd_gguf.h describes it) -------------------------------------- */

typedef struct gb {
    uint8_t *p;
    size_t n, cap;
} gb;

static void gb_put(gb *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void gb_u32(gb *b, uint32_t v) { gb_put(b, &v, 4); }
static void gb_u64(gb *b, uint64_t v) { gb_put(b, &v, 8); }
static void gb_str(gb *b, const char *s) {
    gb_u64(b, strlen(s));
    gb_put(b, s, strlen(s));
}

typedef struct gt { /* one tensor to write */
    char name[64];
    uint32_t type;
    int nd;
    uint64_t ne[2];
    const void *data;
    size_t nbytes;
} gt;

typedef struct gguf_w {
    gb kv;       /* serialized metadata entries */
    uint64_t n_kv;
    gt t[1024]; /* Gemma 3 with 62 layers: 13 tensors a layer */
    int n_t;
    uint32_t version;
} gguf_w;

static void kv_u32(gguf_w *w, const char *k, uint32_t v) { gb_str(&w->kv, k), gb_u32(&w->kv, SD_GGUF_U32), gb_u32(&w->kv, v), w->n_kv++; }
static void kv_f32(gguf_w *w, const char *k, float v) {
    gb_str(&w->kv, k), gb_u32(&w->kv, SD_GGUF_F32), gb_put(&w->kv, &v, 4), w->n_kv++;
}
static void kv_str(gguf_w *w, const char *k, const char *v) {
    gb_str(&w->kv, k), gb_u32(&w->kv, SD_GGUF_STRING), gb_str(&w->kv, v), w->n_kv++;
}

static void add_t(gguf_w *w, const char *name, uint32_t type, int nd, uint64_t ne0, uint64_t ne1, const void *d,
                  size_t nb) {
    gt *t = &w->t[w->n_t++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type, t->nd = nd, t->ne[0] = ne0, t->ne[1] = ne1, t->data = d, t->nbytes = nb;
}

/* The whole file (alignment 32) into *out. */
static void gguf_bytes(const gguf_w *w, gb *out) {
    memset(out, 0, sizeof *out);
    gb_put(out, "GGUF", 4);
    gb_u32(out, w->version ? w->version : 3);
    gb_u64(out, (uint64_t)w->n_t);
    gb_u64(out, w->n_kv);
    gb_put(out, w->kv.p, w->kv.n);
    uint64_t off = 0;
    for (int i = 0; i < w->n_t; i++) {
        gb_str(out, w->t[i].name);
        gb_u32(out, (uint32_t)w->t[i].nd);
        for (int d = 0; d < w->t[i].nd; d++) gb_u64(out, w->t[i].ne[d]);
        gb_u32(out, w->t[i].type);
        gb_u64(out, off);
        off += (w->t[i].nbytes + 31) / 32 * 32;
    }
    static const uint8_t zeros[32];
    gb_put(out, zeros, (32 - out->n % 32) % 32);
    for (int i = 0; i < w->n_t; i++) {
        gb_put(out, w->t[i].data, w->t[i].nbytes);
        gb_put(out, zeros, (32 - w->t[i].nbytes % 32) % 32);
    }
}

/* ---- 1. the parser ---------------------------------------------------------------------------- */

static specdec_status parse(const gb *b, sd_gguf *g) { return sd_gguf_parse(b->p, b->n, "t.gguf", g, NULL); }

/* A copy of b with bytes [at, at + n) replaced by rep: must be refused with FORMAT. */
static void refused_edit(const gb *b, size_t at, const void *rep, size_t n, const char *what) {
    gb c = {0};
    gb_put(&c, b->p, b->n);
    memcpy(c.p + at, rep, n);
    sd_gguf g;
    const specdec_status st = parse(&c, &g);
    SD_CHECK(st == SPECDEC_ERR_FORMAT, "%s: refused with FORMAT (got %d: %s)", what, (int)st, specdec_last_error());
    if (!st) sd_gguf_free(&g);
    free(c.p);
}

static void parser(void) {
    gguf_w w;
    memset(&w, 0, sizeof w);
    kv_str(&w, "general.architecture", "llama");
    kv_u32(&w, "llama.block_count", 7);
    kv_f32(&w, "llama.rope.freq_base", 500000.0f);
    /* an array of strings and one of int32 */
    gb_str(&w.kv, "tokenizer.ggml.tokens"), gb_u32(&w.kv, SD_GGUF_ARRAY), gb_u32(&w.kv, SD_GGUF_STRING), gb_u64(&w.kv, 3);
    gb_str(&w.kv, "a"), gb_str(&w.kv, ""), gb_str(&w.kv, "xyz"), w.n_kv++;
    gb_str(&w.kv, "tokenizer.ggml.token_type"), gb_u32(&w.kv, SD_GGUF_ARRAY), gb_u32(&w.kv, SD_GGUF_I32), gb_u64(&w.kv, 3);
    for (int32_t i = 1; i <= 3; i++) gb_put(&w.kv, &i, 4);
    w.n_kv++;
    static float f32[64];
    static uint8_t q40[2 * 18];
    for (int i = 0; i < 64; i++) f32[i] = (float)i;
    add_t(&w, "a.weight", SD_GGML_F32, 2, 8, 8, f32, sizeof f32);
    add_t(&w, "b.weight", SD_GGML_Q4_0, 2, 32, 2, q40, sizeof q40);
    gb b;
    gguf_bytes(&w, &b);
    sd_gguf g;
    specdec_status st = parse(&b, &g);
    SD_CHECK(st == SPECDEC_OK, "a valid GGUF parses: %s", specdec_last_error());
    size_t need = b.n; /* the last tensor's end: shorter is refused, the padding after it may be missing */
    if (!st) {
        need = (size_t)(g.data_start + g.tensors[1].offset + g.tensors[1].nbytes);
        int64_t v = 0;
        double f = 0;
        sd_gguf_str s = {0};
        const sd_gguf_kv *tok = sd_gguf_find(&g, "tokenizer.ggml.tokens"), *ty = sd_gguf_find(&g, "tokenizer.ggml.token_type");
        SD_CHECK(g.version == 3 && g.n_kv == 5 && g.n_tensors == 2 && sd_gguf_get_i64(&g, "llama.block_count", &v) &&
                     v == 7 && sd_gguf_get_f64(&g, "llama.rope.freq_base", &f) && f == 500000.0 &&
                     sd_gguf_get_str(&g, "general.architecture", &s) && s.len == 5 && !memcmp(s.s, "llama", 5) &&
                     !sd_gguf_get_i64(&g, "general.architecture", &v) && !sd_gguf_find(&g, "nope"),
                 "metadata reads back");
        SD_CHECK(tok && tok->n == 3 && tok->strs && tok->strs[0].len == 1 && tok->strs[1].len == 0 &&
                     tok->strs[2].len == 3 && !memcmp(tok->strs[2].s, "xyz", 3) && ty && sd_gguf_arr_i64(ty, 2, &v) &&
                     v == 3 && !sd_gguf_arr_i64(ty, 3, &v),
                 "arrays read back");
        const sd_gguf_tensor *a = sd_gguf_find_tensor(&g, "a.weight"), *q = sd_gguf_find_tensor(&g, "b.weight");
        SD_CHECK(a && q && a->ne[0] == 8 && a->ne[1] == 8 && a->nbytes == 256 && q->nbytes == 36 && q->offset == 256 &&
                     !memcmp(b.p + g.data_start + a->offset, f32, sizeof f32),
                 "tensors read back");
        sd_gguf_free(&g);
    }
    /* every truncation */
    int bad = 0;
    for (size_t n = 0; n < b.n; n++) {
        gb c = {b.p, n, n};
        st = parse(&c, &g);
        if (st != (n < need ? SPECDEC_ERR_FORMAT : SPECDEC_OK)) bad++;
        if (!st) sd_gguf_free(&g);
    }
    SD_CHECK(bad == 0 && need < b.n, "%d truncations of a %zu-byte GGUF (tensors end at %zu) not refused with FORMAT "
             "before the last tensor's end or refused after it", bad, b.n, need);
    /* edits at known offsets: magic 0, version 4, n_tensors 8, n_kv 16, first key length 24, its bytes 32 */
    const uint32_t v1 = 1, v4 = 4;
    const uint64_t huge = (uint64_t)1 << 40;
    refused_edit(&b, 4, &v1, 4, "version 1");
    refused_edit(&b, 4, &v4, 4, "version 4");
    refused_edit(&b, 8, &huge, 8, "a tensor count past the file");
    refused_edit(&b, 16, &huge, 8, "a metadata count past the file");
    refused_edit(&b, 24, &huge, 8, "a key length past the file");
    refused_edit(&b, 33, "\0", 1, "a key holding a NUL");
    const size_t vt = 24 + 8 + strlen("general.architecture"); /* the first entry's value type */
    const uint32_t t13 = 13, arr = SD_GGUF_ARRAY;
    refused_edit(&b, vt, &t13, 4, "value type 13");
    /* the token_type array's element type made ARRAY (nested) */
    const uint8_t *tt = memmem(b.p, b.n, "tokenizer.ggml.token_type", 25);
    SD_CHECK(tt != NULL, "token_type key found");
    if (tt) refused_edit(&b, (size_t)(tt - b.p) + 25 + 4, &arr, 4, "a nested array");
    /* the second tensor's type, extent, offset: find its name */
    const uint8_t *tb = memmem(b.p, b.n, "b.weight", 8);
    SD_CHECK(tb != NULL, "tensor name found");
    if (tb) {
        const size_t at = (size_t)(tb - b.p) + 8; /* n_dims, ne0, ne1, type, offset */
        const uint64_t ne33 = 33, off_mis = 260, off_far = 1 << 20;
        const uint32_t ty_bad = 41, ty_hole = 4;
        refused_edit(&b, at + 4, &ne33, 8, "rows that are not whole blocks");
        refused_edit(&b, at + 20, &ty_bad, 4, "ggml type 41");
        refused_edit(&b, at + 20, &ty_hole, 4, "ggml type 4 (removed from ggml)");
        refused_edit(&b, at + 24, &off_mis, 8, "a misaligned tensor offset");
        refused_edit(&b, at + 24, &off_far, 8, "a tensor past the data region");
        refused_edit(&b, (size_t)(tb - b.p), "a", 1, "two tensors called a.weight");
    }
    free(b.p);
    gguf_w w2;
    memset(&w2, 0, sizeof w2);
    kv_u32(&w2, "llama.block_count", 1);
    kv_u32(&w2, "llama.block_count", 2);
    gguf_bytes(&w2, &b);
    st = parse(&b, &g);
    SD_CHECK(st == SPECDEC_ERR_FORMAT, "a key twice refused (%d)", (int)st);
    if (!st) sd_gguf_free(&g);
    free(b.p);
    free(w2.kv.p);
    /* general.alignment 48 */
    kv_u32(&w, "general.alignment", 48);
    gguf_bytes(&w, &b);
    st = parse(&b, &g);
    SD_CHECK(st == SPECDEC_ERR_FORMAT, "alignment 48 refused (%d)", (int)st);
    if (!st) sd_gguf_free(&g);
    free(b.p);
    free(w.kv.p);
}

/* ---- 2. the block types -------------------------------------------------------------------------- */

static float h2f(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return sd_f16_to_f32(h);
}

/* ggml's dequantize_row_* for one block, in ggml's loop order (y advancing, pointers walking the block). */
static void ggml_ref(uint32_t type, const uint8_t *x, float *y) {
    switch (type) {
    case SD_GGML_Q4_0: case SD_GGML_Q4_1: {
        const int m1 = type == SD_GGML_Q4_1;
        const float d = h2f(x), m = m1 ? h2f(x + 2) : 0.0f;
        const uint8_t *qs = x + 2 + 2 * m1;
        for (int j = 0; j < 16; j++) {
            if (m1) y[j] = (float)(qs[j] & 0x0F) * d + m, y[j + 16] = (float)(qs[j] >> 4) * d + m;
            else y[j] = (float)((qs[j] & 0x0F) - 8) * d, y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
        }
        return;
    }
    case SD_GGML_Q5_0: case SD_GGML_Q5_1: {
        const int m1 = type == SD_GGML_Q5_1;
        const float d = h2f(x), m = m1 ? h2f(x + 2) : 0.0f;
        uint32_t qh;
        memcpy(&qh, x + 2 + 2 * m1, 4);
        const uint8_t *qs = x + 6 + 2 * m1;
        for (int j = 0; j < 16; j++) {
            const uint8_t xh0 = (uint8_t)(((qh >> j) << 4) & 0x10), xh1 = (uint8_t)((qh >> (j + 12)) & 0x10);
            const int x0 = (qs[j] & 0x0F) | xh0, x1 = (qs[j] >> 4) | xh1;
            if (m1) y[j] = (float)x0 * d + m, y[j + 16] = (float)x1 * d + m;
            else y[j] = (float)(x0 - 16) * d, y[j + 16] = (float)(x1 - 16) * d;
        }
        return;
    }
    case SD_GGML_Q8_0:
        for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)x[2 + j] * h2f(x);
        return;
    case SD_GGML_Q2_K: {
        const float d = h2f(x + 80), mn = h2f(x + 82);
        const uint8_t *q = x + 16;
        int is = 0;
        for (int n = 0; n < 256; n += 128) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                uint8_t sc = x[is++];
                float dl = d * (float)(sc & 0xF), ml = mn * (float)(sc >> 4);
                for (int l = 0; l < 16; ++l) *y++ = dl * (float)((int8_t)((q[l] >> shift) & 3)) - ml;
                sc = x[is++];
                dl = d * (float)(sc & 0xF), ml = mn * (float)(sc >> 4);
                for (int l = 0; l < 16; ++l) *y++ = dl * (float)((int8_t)((q[l + 16] >> shift) & 3)) - ml;
                shift += 2;
            }
            q += 32;
        }
        return;
    }
    case SD_GGML_Q3_K: {
        const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
        uint32_t aux[4];
        memcpy(aux, x + 96, 12);
        const uint32_t tmp = aux[2];
        aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
        aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
        aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
        aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
        int8_t scales[16];
        memcpy(scales, aux, 16);
        const float d_all = h2f(x + 108);
        const uint8_t *q = x + 32, *hm = x;
        uint8_t m = 1;
        int is = 0;
        for (int n = 0; n < 256; n += 128) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                float dl = d_all * (float)(scales[is++] - 32);
                for (int l = 0; l < 16; ++l)
                    *y++ = dl * (float)((int8_t)((q[l + 0] >> shift) & 3) - ((hm[l + 0] & m) ? 0 : 4));
                dl = d_all * (float)(scales[is++] - 32);
                for (int l = 0; l < 16; ++l)
                    *y++ = dl * (float)((int8_t)((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
                shift += 2;
                m = (uint8_t)(m << 1);
            }
            q += 32;
        }
        return;
    }
    case SD_GGML_Q4_K: case SD_GGML_Q5_K: {
        const int five = type == SD_GGML_Q5_K;
        const float d = h2f(x), mn = h2f(x + 2);
        const uint8_t *sc = x + 4, *qh = x + 16, *ql = x + 16 + 32 * five;
        int is = 0;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < 256; j += 64) {
            int s[2], mm[2];
            for (int k = 0; k < 2; k++) {
                const int jj = is + k;
                if (jj < 4) s[k] = sc[jj] & 63, mm[k] = sc[jj + 4] & 63;
                else s[k] = (sc[jj + 4] & 0xF) | ((sc[jj - 4] >> 6) << 4), mm[k] = (sc[jj + 4] >> 4) | ((sc[jj] >> 6) << 4);
            }
            const float d1 = d * (float)s[0], m1 = mn * (float)mm[0], d2 = d * (float)s[1], m2 = mn * (float)mm[1];
            for (int l = 0; l < 32; ++l) *y++ = d1 * (float)((ql[l] & 0xF) + (five && (qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * (float)((ql[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0)) - m2;
            ql += 32;
            is += 2;
            u1 = (uint8_t)(u1 << 2), u2 = (uint8_t)(u2 << 2);
        }
        return;
    }
    case SD_GGML_Q6_K: {
        const float d = h2f(x + 208);
        const uint8_t *ql = x, *qh = x + 128;
        const int8_t *sc = (const int8_t *)(x + 192);
        for (int n = 0; n < 256; n += 128) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int8_t q1 = (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int8_t q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * (float)sc[is + 0] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
            y += 128, ql += 64, qh += 32, sc += 8;
        }
        return;
    }
    case SD_GGML_IQ4_NL: case SD_GGML_IQ4_XS: { /* dequantize_row_iq4_nl / _xs */
        static const int8_t kvalues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
        const float d = h2f(x);
        if (type == SD_GGML_IQ4_NL) {
            const uint8_t *qs = x + 2;
            for (int j = 0; j < 16; ++j) {
                y[j + 0] = d * (float)kvalues[qs[j] & 0xf];
                y[j + 16] = d * (float)kvalues[qs[j] >> 4];
            }
            return;
        }
        uint16_t scales_h;
        memcpy(&scales_h, x + 2, 2);
        const uint8_t *scales_l = x + 4, *qs = x + 8;
        for (int ib = 0; ib < 8; ++ib) {
            const int ls = ((scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; ++j) {
                y[j + 0] = dl * (float)kvalues[qs[j] & 0xf];
                y[j + 16] = dl * (float)kvalues[qs[j] >> 4];
            }
            y += 32;
            qs += 16;
        }
        return;
    }
    default: return;
    }
}

/* IQ1_M keeps its fp16 d in the top nibbles of its four uint16 scales (bytes 48..55). */
static void set_iq1m_d(uint8_t *blk, uint16_t h) {
    for (int i = 0; i < 4; i++) blk[48 + 2 * i + 1] = (uint8_t)((blk[48 + 2 * i + 1] & 15) | ((h >> 4 * i) & 15) << 4);
}

/* Offsets of a block's fp16 scales (set to ordinary values so products stay finite). */
static void set_scales(uint32_t type, uint8_t *blk) {
    if (type == SD_GGML_IQ1_M) {
        set_iq1m_d(blk, sd_f32_to_f16((float)(1 + rnd(200)) * 1e-4f * (rnd(4) ? 1.0f : -1.0f)));
        return;
    }
    int off[2] = {-1, -1};
    switch (type) {
    case SD_GGML_Q2_K: off[0] = 80, off[1] = 82; break;
    case SD_GGML_Q3_K: off[0] = 108; break;
    case SD_GGML_Q6_K: off[0] = 208; break;
    case SD_GGML_Q4_1: case SD_GGML_Q5_1: case SD_GGML_Q4_K: case SD_GGML_Q5_K: off[0] = 0, off[1] = 2; break;
    default: off[0] = 0;
    }
    for (int i = 0; i < 2; i++)
        if (off[i] >= 0) {
            const uint16_t h = sd_f32_to_f16((float)(1 + rnd(200)) * 1e-4f * (rnd(4) ? 1.0f : -1.0f));
            memcpy(blk + off[i], &h, 2);
        }
}

/* Every repackable type; the codebook types IQ1_S .. IQ3_S have no transcribed loop here (their values against
 * gguf-py's: ggml_blocks_vs_gguf_py): for them sd_cpu_elem and sd_cpu_row_f32 must agree, and no value is 0
 * (no codebook value is; IQ1: g + delta, delta = +-1/8). */
static int codebook_type(uint32_t ty) {
    return ty == SD_GGML_IQ1_S || ty == SD_GGML_IQ1_M || ty == SD_GGML_IQ2_XXS || ty == SD_GGML_IQ2_XS ||
           ty == SD_GGML_IQ2_S || ty == SD_GGML_IQ3_XXS || ty == SD_GGML_IQ3_S;
}

static void block_types(void) {
    static const uint32_t types[] = {SD_GGML_Q4_0,   SD_GGML_Q4_1,   SD_GGML_Q5_0,    SD_GGML_Q5_1,   SD_GGML_Q8_0,
                                     SD_GGML_Q2_K,   SD_GGML_Q3_K,   SD_GGML_Q4_K,    SD_GGML_Q5_K,   SD_GGML_Q6_K,
                                     SD_GGML_IQ4_NL, SD_GGML_IQ4_XS, SD_GGML_IQ1_S,   SD_GGML_IQ1_M,  SD_GGML_IQ2_XXS,
                                     SD_GGML_IQ2_XS, SD_GGML_IQ2_S,  SD_GGML_IQ3_XXS, SD_GGML_IQ3_S};
    enum { R = 6, C = 512 };
    static uint8_t src[R * (C / 256) * 210 * 8];
    static float ref[C];
    static double refd[R * C];
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const uint32_t ty = types[k];
        const sd_ggml_type_info ti = sd_ggml_type_info_of(ty);
        const int nb = C / (int)ti.block;
        for (size_t i = 0; i < (size_t)(R * nb) * ti.bytes; i++) src[i] = (uint8_t)rnd(256);
        for (int b = 0; b < R * nb; b++) set_scales(ty, src + (size_t)b * ti.bytes);
        SD_CHECK(sd_ggml_repackable(ty), "%s is repackable", ti.name);
        void *buf = calloc(1, sd_ggml_bytes(ty, R, C));
        sd_tensor w;
        char why[160] = "";
        SD_CHECK(buf && sd_ggml_repack(ty, src, R, C, 1, buf, &w, why, sizeof why), "%s: repack: %s", ti.name, why);
        int bad = 0;
        float row[C];
        const int cb = codebook_type(ty);
        for (int r = 0; r < R; r++) {
            for (int b = 0; b < nb && !cb; b++) ggml_ref(ty, src + (size_t)(r * nb + b) * ti.bytes, ref + b * (int)ti.block);
            const float *p = sd_cpu_row_f32(&w, r, row);
            for (int c = 0; c < C; c++) {
                const float e = sd_cpu_elem(&w, (int64_t)r * C + c);
                if (cb) ref[c] = e, bad += e == 0.0f;
                bad += memcmp(&p[c], &ref[c], 4) != 0;
                bad += memcmp(&e, &ref[c], 4) != 0;
                refd[r * C + c] = ref[c];
            }
        }
        SD_CHECK(bad == 0, "%s: %d values differ from ggml's dequantisation", ti.name, bad);
        static const int ns[3] = {1, 3, 12};
        quant_matmul_check(ti.name, &w, refd, R, C, ns, 0.2);
        /* a NaN scale */
        const uint16_t nan16 = 0x7e00;
        if (ty == SD_GGML_IQ1_M) set_iq1m_d(src, nan16);
        else memcpy(src + (ty == SD_GGML_Q6_K ? 208 : ty == SD_GGML_Q3_K ? 108 : ty == SD_GGML_Q2_K ? 80 : 0), &nan16, 2);
        memset(buf, 0, sd_ggml_bytes(ty, R, C));
        SD_CHECK(!sd_ggml_repack(ty, src, R, C, 1, buf, &w, why, sizeof why) && strstr(why, "must be finite"),
                 "%s: a NaN scale is refused (%s)", ti.name, why);
        free(buf);
    }
    SD_CHECK(!sd_ggml_repackable(SD_GGML_TQ1_0) && !sd_ggml_repackable(SD_GGML_Q8_1) && !sd_ggml_repackable(SD_GGML_F16),
             "other types are not repacked");
}

/* A repack split over 1, 3 and 8 threads (and the automatic choice, a matrix of 4M values) writes the same
 * bytes; a NaN scale in a late row gives the same first-bad-row reason whatever the split. */
static void threaded_repack(void) {
    enum { R = 2048, C = 2048 };
    const uint32_t ty = SD_GGML_Q4_K;
    const sd_ggml_type_info ti = sd_ggml_type_info_of(ty);
    const size_t nb = (size_t)R * (C / ti.block), bytes = sd_ggml_bytes(ty, R, C);
    uint8_t *src = malloc(nb * ti.bytes);
    uint8_t *b1 = calloc(1, bytes), *b2 = calloc(1, bytes);
    SD_CHECK(src && b1 && b2, "out of memory");
    if (!src || !b1 || !b2) return free(src), free(b1), free(b2);
    for (size_t i = 0; i < nb * ti.bytes; i++) src[i] = (uint8_t)rnd(256);
    for (size_t b = 0; b < nb; b++) set_scales(ty, src + b * ti.bytes);
    sd_tensor w1, w2;
    char why1[160] = "", why2[160] = "";
    SD_CHECK(sd_ggml_repack(ty, src, R, C, 1, b1, &w1, why1, sizeof why1), "1 thread: %s", why1);
    static const int ts[3] = {3, 8, 0};
    for (int i = 0; i < 3; i++) {
        memset(b2, 0, bytes);
        SD_CHECK(sd_ggml_repack(ty, src, R, C, ts[i], b2, &w2, why2, sizeof why2), "%d threads: %s", ts[i], why2);
        /* the meta holds pointers into its own buffer: compare what follows it */
        const size_t skip = (sizeof(sd_int4_meta) + 7) & ~(size_t)7;
        SD_CHECK(!memcmp(b1 + skip, b2 + skip, bytes - skip) && w2.dtype == w1.dtype, "%d threads: the same bytes as 1",
                 ts[i]);
    }
    const uint16_t nan16 = 0x7e00;
    memcpy(src + (size_t)(1500 * (C / ti.block)) * ti.bytes, &nan16, 2); /* row 1500, block 0 */
    memcpy(src + (size_t)(1900 * (C / ti.block)) * ti.bytes, &nan16, 2); /* and row 1900 */
    for (int i = 0; i < 3; i++) {
        memset(b2, 0, bytes);
        SD_CHECK(!sd_ggml_repack(ty, src, R, C, ts[i], b2, &w2, why2, sizeof why2) && strstr(why2, "row 1500, block 0"),
                 "%d threads: the first bad row named (%s)", ts[i], why2);
    }
    free(src), free(b1), free(b2);
}

/* ---- 3. the loader ------------------------------------------------------------------------------ */

enum { H = 32, I = 64, V = 40, NH = 4, NKV = 2, HD = 8 };

typedef struct tiny_opts {
    const char *arch;
    uint32_t mat_type;   /* F32, F16, or a block type for attn_q (and Q8_0 for ffn_up) */
    const char *skip_key; /* a required key left out */
    const char *rope_type;
    int rope_freqs;      /* 0 none, 4 the right size, else that size */
    int extra_bias;      /* blk.0.attn_q.bias only on layer 0 of 2 */
    const char *extra_tensor;
    uint32_t q_type_override;
    int nan_scale;
    int special_ids;     /* bos 1, eos 2, eot 5, eom 2 (a repeat), and an out-of-range pad */
    int split;           /* write it as llama.cpp's gguf-split does, in two files (path: PREFIX-00001-of-00002.gguf):
                            1 as is, 2 split.tensors.count off by one, 3 a tensor in both files, 4 the second file
                            saying split.no 0 */
    int layers;          /* block_count (0: 2) */
    int hd;              /* the head dimension (0: HD; else written as attention.key_length / value_length) */
    int swa_base;        /* gemma3: rope.freq_base_swa written (that value) */
    int yarn_log_mul;    /* rope.scaling.yarn_log_multiplier 0.1 written (DeepSeek's yarn mscale) */
    int window;          /* attention.sliding_window 4 written (always for gemma2 / gemma3) */
} tiny_opts;

static float fbuf[2][V * I * 2];
static float nbuf[5][I]; /* norm weights 1, 2, 3, 4, 5: which norm a tensor became */
static uint16_t hbuf[V * I * 2];
static uint8_t qbuf[2][I * H * 2];
enum { MAX_L = 64 };

static void tiny_gguf(const char *path, const tiny_opts *o) {
    gguf_w w;
    memset(&w, 0, sizeof w);
    char k[128];
    const char *a = o->arch;
    const int nl = o->layers ? o->layers : 2, hd = o->hd ? o->hd : HD;
    const int gemma2 = !strcmp(a, "gemma2"), gemma3 = !strcmp(a, "gemma3");
    kv_str(&w, "general.architecture", a);
#define KU(key, v)                                          \
    do {                                                    \
        snprintf(k, sizeof k, "%s.%s", a, key);             \
        if (!o->skip_key || strcmp(o->skip_key, key)) kv_u32(&w, k, v); \
    } while (0)
    KU("context_length", 64);
    KU("embedding_length", H);
    KU("block_count", (uint32_t)nl);
    KU("feed_forward_length", I);
    KU("attention.head_count", NH);
    KU("attention.head_count_kv", NKV);
    KU("rope.dimension_count", (uint32_t)hd);
    if (hd != HD) {
        KU("attention.key_length", (uint32_t)hd);
        KU("attention.value_length", (uint32_t)hd);
    }
    if (gemma2 || gemma3 || o->window) KU("attention.sliding_window", 4);
    if (o->swa_base) {
        snprintf(k, sizeof k, "%s.rope.freq_base_swa", a);
        kv_f32(&w, k, (float)o->swa_base);
    }
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", a);
    if (!o->skip_key || strcmp(o->skip_key, "attention.layer_norm_rms_epsilon")) kv_f32(&w, k, 1e-5f);
    snprintf(k, sizeof k, "%s.rope.freq_base", a);
    kv_f32(&w, k, 10000.0f);
    if (o->rope_type) {
        snprintf(k, sizeof k, "%s.rope.scaling.type", a);
        kv_str(&w, k, o->rope_type);
        snprintf(k, sizeof k, "%s.rope.scaling.factor", a);
        kv_f32(&w, k, 2.0f);
        if (!strcmp(o->rope_type, "yarn")) KU("rope.scaling.original_context_length", 32);
        if (o->yarn_log_mul) {
            snprintf(k, sizeof k, "%s.rope.scaling.yarn_log_multiplier", a);
            kv_f32(&w, k, 0.1f);
        }
    }
    if (o->special_ids) {
        kv_u32(&w, "tokenizer.ggml.bos_token_id", 1);
        kv_u32(&w, "tokenizer.ggml.eos_token_id", 2);
        kv_u32(&w, "tokenizer.ggml.eot_token_id", 5);
        kv_u32(&w, "tokenizer.ggml.eom_token_id", 2);
        kv_u32(&w, "tokenizer.ggml.padding_token_id", 9999);
    }
    for (size_t i = 0; i < sizeof fbuf[0] / sizeof(float); i++) fbuf[0][i] = 0.02f * (float)sin(0.1 * (double)i), fbuf[1][i] = 1.0f;
    for (int j = 0; j < 5; j++)
        for (int i = 0; i < I; i++) nbuf[j][i] = (float)(j + 1);
    for (size_t i = 0; i < sizeof hbuf / 2; i++) hbuf[i] = sd_f32_to_f16(fbuf[0][i]);
    const int f16 = o->mat_type == SD_GGML_F16;
    const void *mat = f16 ? (const void *)hbuf : (const void *)fbuf[0];
    const size_t es = f16 ? 2 : 4;
    const uint32_t mt = f16 ? SD_GGML_F16 : SD_GGML_F32;
    add_t(&w, "token_embd.weight", mt, 2, H, V, mat, es * V * H);
    add_t(&w, "output_norm.weight", SD_GGML_F32, 1, H, 1, fbuf[1], 4 * H);
    add_t(&w, "output.weight", mt, 2, H, V, mat, es * V * H);
    static char names[MAX_L][16][48];
    for (int l = 0; l < nl && l < MAX_L; l++) {
        /* norms: attn_norm 1, ffn_norm 2; Gemma 2 / 3's post_attention_norm 3, post_ffw_norm 4; q / k norms 5 */
        const struct { const char *n; int rows, cols, norm; } m[] = {
            {"attn_norm", H, 0, 1}, {"attn_q", NH * hd, H, 0}, {"attn_k", NKV * hd, H, 0}, {"attn_v", NKV * hd, H, 0},
            {"attn_output", H, NH * hd, 0}, {"ffn_norm", H, 0, 2}, {"ffn_gate", I, H, 0}, {"ffn_up", I, H, 0},
            {"ffn_down", H, I, 0}, {"post_attention_norm", H, 0, 3}, {"post_ffw_norm", H, 0, 4},
            {"attn_q_norm", hd, 0, 5}, {"attn_k_norm", hd, 0, 5}};
        const size_t n_m = gemma3 ? 13 : gemma2 ? 11 : 9;
        for (size_t i = 0; i < n_m; i++) {
            snprintf(names[l][i], 48, "blk.%d.%s.weight", l, m[i].n);
            if (!m[i].cols) {
                add_t(&w, names[l][i], SD_GGML_F32, 1, (uint64_t)m[i].rows, 1, nbuf[m[i].norm - 1],
                      4 * (size_t)m[i].rows);
                continue;
            }
            uint32_t qt = 0;
            if (!strcmp(m[i].n, "attn_q") && o->mat_type != SD_GGML_F32 && !f16) qt = o->mat_type;
            if (!strcmp(m[i].n, "attn_q") && o->q_type_override) qt = o->q_type_override;
            if (!strcmp(m[i].n, "ffn_up") && o->mat_type != SD_GGML_F32 && !f16) qt = SD_GGML_Q8_0;
            if (qt) {
                const sd_ggml_type_info ti = sd_ggml_type_info_of(qt);
                const size_t nb = (size_t)m[i].rows * (size_t)(m[i].cols / 32) * ti.bytes;
                uint8_t *q = qbuf[l * 0 + (qt == SD_GGML_Q8_0)];
                for (size_t j = 0; j < nb; j++) q[j] = (uint8_t)(j * 7 + 3);
                for (size_t b = 0; b < nb / ti.bytes; b++) {
                    const uint16_t h = o->nan_scale && b == 3 ? 0x7e00 : sd_f32_to_f16(0.001f);
                    memcpy(q + b * ti.bytes, &h, 2);
                }
                add_t(&w, names[l][i], qt, 2, (uint64_t)m[i].cols, (uint64_t)m[i].rows, q, nb);
            } else {
                add_t(&w, names[l][i], mt, 2, (uint64_t)m[i].cols, (uint64_t)m[i].rows, mat,
                      es * (size_t)m[i].rows * (size_t)m[i].cols);
            }
        }
    }
    if (o->extra_bias) add_t(&w, "blk.1.attn_q.bias", SD_GGML_F32, 1, NH * HD, 1, fbuf[0], 4 * NH * HD);
    if (o->extra_tensor) add_t(&w, o->extra_tensor, SD_GGML_F32, 1, H, 1, fbuf[1], 4 * H);
    if (o->rope_freqs) add_t(&w, "rope_freqs.weight", SD_GGML_F32, 1, (uint64_t)o->rope_freqs, 1, fbuf[1], 4 * (size_t)o->rope_freqs);
#undef KU
    gb b;
    if (o->split) { /* the second half of the tensors in file 2, which holds only the split.* keys */
        gguf_w w2;
        memset(&w2, 0, sizeof w2);
        const int half = w.n_t / 2, total = w.n_t;
        for (int i = half - (o->split == 3); i < w.n_t; i++) w2.t[w2.n_t++] = w.t[i];
        w.n_t = half;
        kv_u32(&w, "split.no", 0), kv_u32(&w, "split.count", 2);
        kv_u32(&w, "split.tensors.count", (uint32_t)(total + (o->split == 2 || o->split == 3))); /* 3: counted twice */
        kv_u32(&w2, "split.no", o->split == 4 ? 0 : 1), kv_u32(&w2, "split.count", 2);
        gguf_bytes(&w2, &b);
        char p2[4200];
        snprintf(p2, sizeof p2, "%s", path);
        char *at = strstr(p2, "-00001-of-");
        if (at) memcpy(at, "-00002-of-", 10);
        sd_test_put(p2, b.p, b.n);
        free(b.p);
        free(w2.kv.p);
    }
    gguf_bytes(&w, &b);
    sd_test_put(path, b.p, b.n);
    free(b.p);
    free(w.kv.p);
}

/* A GGUF split in two files (llama.cpp's gguf-split): loads from its first file as the whole file does;
 * the second file passed, a missing second file, a first file not named PREFIX-00001-of-00002.gguf, a
 * split.tensors.count that does not add up, a tensor in both files and a second file that says it is the
 * first are refused. */
static void split_files(const char *dir) {
    tiny_opts o = {"llama", SD_GGML_Q4_0, NULL, NULL, 0, 0, NULL, 0, 0, 1, 1, 0, 0, 0, 0, 0};
    char p[4200], p2[4200], q[4200];
    snprintf(p, sizeof p, "%s/split-00001-of-00002.gguf", dir);
    snprintf(p2, sizeof p2, "%s/split-00002-of-00002.gguf", dir);
    tiny_gguf(p, &o);
    specdec_model *m = NULL;
    specdec_status st = specdec_model_load(p, NULL, &m);
    SD_CHECK(st == SPECDEC_OK && m && m->n_files == 2 && m->w.layers[1].w_down.data && m->w.cfg.n_layers == 2 &&
                 m->w.layers[0].wq.dtype == SD_INT4,
             "a GGUF split in two files loads from its first: %s", st ? specdec_last_error() : "");
    specdec_model_free(m);
    m = NULL;
    SD_CHECK(specdec_model_load(p2, NULL, &m) == SPECDEC_ERR_FORMAT && strstr(specdec_last_error(), "pass the first"),
             "the second file of a split refused (%s)", specdec_last_error());
    snprintf(q, sizeof q, "%s/alone.gguf", dir);
    size_t n = 0;
    char *bytes = sd_test_slurp(p, &n);
    if (bytes) sd_test_put(q, bytes, n), free(bytes);
    SD_CHECK(specdec_model_load(q, NULL, &m) == SPECDEC_ERR_FORMAT && strstr(specdec_last_error(), "-00001-of-00002"),
             "a split's first file under another name refused (%s)", specdec_last_error());
    remove(p2);
    SD_CHECK(specdec_model_load(p, NULL, &m) == SPECDEC_ERR_IO && !m, "a missing second file: IO (%s)",
             specdec_last_error());
    static const struct { int v; const char *needle; } bad[] = {
        {2, "split.tensors.count"}, {3, "two shards"}, {4, "split.no 0 of 2, expected 1 of 2"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.split = bad[i].v;
        tiny_gguf(p, &o);
        st = specdec_model_load(p, NULL, &m);
        SD_CHECK(st == SPECDEC_ERR_FORMAT && !m && strstr(specdec_last_error(), bad[i].needle),
                 "split variant %d refused naming %s (%d: %s)", bad[i].v, bad[i].needle, (int)st, specdec_last_error());
        specdec_model_free(m);
        m = NULL;
    }
}

static specdec_model *load_tiny(const char *dir, const tiny_opts *o, specdec_status want, const char *needle,
                                const char *what) {
    char p[4200];
    snprintf(p, sizeof p, "%s/tiny.gguf", dir);
    tiny_gguf(p, o);
    specdec_model *m = NULL;
    const specdec_status st = specdec_model_load(p, NULL, &m);
    const char *msg = specdec_last_error();
    SD_CHECK(st == want && (!needle || st == SPECDEC_OK || strstr(msg, needle)), "%s: status %d (want %d): %s", what,
             (int)st, (int)want, st ? msg : "");
    if (st == SPECDEC_OK && want != SPECDEC_OK) specdec_model_free(m), m = NULL;
    return m;
}

/* norm tensor t's first weight (the tiny files' norms are constant: which GGUF norm it was) */
static float norm_id(const sd_tensor *t) { return t->data && t->dtype == SD_F32 ? ((const float *)t->data)[0] : -1.0f; }

/* Gemma, Gemma 2, Gemma 3 GGUFs: the (1 + w) norms used as stored (norm_offset 0); Gemma 2 / 3's ffn_norm is
 * the pre-MLP norm, post_attention_norm / post_ffw_norm the sandwich's; llama.cpp's attention scale (head_dim,
 * hidden / heads on the 46 / 62-layer 27B models), window patterns (2 / 6) and Gemma 3's sliding-layer base
 * (rope.freq_base_swa, else 10000). */
static void gemma(const char *dir) {
    tiny_opts o = {"gemma", SD_GGML_F16, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    specdec_model *m = load_tiny(dir, &o, SPECDEC_OK, NULL, "gemma");
    if (m) {
        const sd_config *c = &m->w.cfg;
        SD_CHECK(!strcmp(c->architecture, "GemmaForCausalLM") && c->norm_offset == 0.0f && !c->sandwich_norms &&
                     c->embed_scale == (float)sqrt((double)H) && norm_id(&m->w.layers[1].ffn_norm) == 2.0f &&
                     !c->rope_interleaved && c->rope_theta == 10000.0f,
                 "gemma: norms as stored, ffn_norm before the MLP, embeddings scaled (offset %g)", (double)c->norm_offset);
        specdec_model_free(m);
    }
    static const struct { const char *arch; int layers, hd; float scalar; } cases[] = {
        {"gemma2", 2, 16, 16.0f}, {"gemma2", 46, 16, (float)(H / NH)}, {"gemma3", 3, 16, 16.0f},
        {"gemma3", 62, 16, (float)(H / NH)}, {"gemma3", 46, 16, 16.0f}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        o = (tiny_opts){cases[i].arch, SD_GGML_F32, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        o.layers = cases[i].layers, o.hd = cases[i].hd;
        const int v3 = !strcmp(cases[i].arch, "gemma3");
        if (v3 && i == 2) o.swa_base = 500;
        m = load_tiny(dir, &o, SPECDEC_OK, NULL, cases[i].arch);
        if (!m) continue;
        const sd_config *c = &m->w.cfg;
        const sd_layer *L = &m->w.layers[0];
        const int pat = v3 ? 6 : 2;
        int windows = c->sliding_window == 4;
        for (int l = 0; l < c->n_layers; l++) windows &= c->layer_sliding[l] == (l % pat < pat - 1);
        SD_CHECK(c->norm_offset == 0.0f && c->sandwich_norms && norm_id(&L->attn_norm) == 1.0f &&
                     norm_id(&L->ffn_norm) == 2.0f && norm_id(&L->attn_post_norm) == 3.0f &&
                     norm_id(&L->ffn_post_norm) == 4.0f && (!v3 || (c->qk_norm && norm_id(&L->q_norm) == 5.0f)) &&
                     c->head_dim == cases[i].hd && fabsf(c->attn_scale - 1.0f / sqrtf(cases[i].scalar)) < 1e-7f &&
                     windows && c->n_layers == cases[i].layers,
                 "%s with %d layers: norms, attention scale 1/sqrt(%g) (got %g), windows every %d", cases[i].arch,
                 cases[i].layers, (double)cases[i].scalar, (double)c->attn_scale, pat);
        if (!v3)
            SD_CHECK(c->attn_softcap == 50.0f && c->final_softcap == 30.0f,
                     "gemma2 without soft-capping keys: the defaults 50 / 30 (got %g / %g)", (double)c->attn_softcap,
                     (double)c->final_softcap);
        else
            SD_CHECK(c->rope_local_theta == (i == 2 ? 500.0f : 10000.0f) && c->final_softcap == 0.0f &&
                         c->attn_softcap == 0.0f,
                     "gemma3: the sliding layers' base %g (rope.freq_base_swa or 10000), no soft-capping",
                     (double)c->rope_local_theta);
        specdec_model_free(m);
    }
    /* Gemma 2 / 3 need their window; a Gemma 2 tensor in a Gemma 1 file is unknown there */
    o = (tiny_opts){"gemma2", SD_GGML_F32, "attention.sliding_window", NULL, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    load_tiny(dir, &o, SPECDEC_ERR_FORMAT, "gemma2.attention.sliding_window", "gemma2 without its window");
    o = (tiny_opts){"gemma", SD_GGML_F32, NULL, NULL, 0, 0, "blk.0.post_ffw_norm.weight", 0, 0, 0, 0, 0, 0, 0, 0, 0};
    load_tiny(dir, &o, SPECDEC_ERR_UNSUPPORTED, "post_ffw_norm", "a sandwich norm in a gemma (1) file");
}

/* SmolLM3 (no rope on every 4th layer, q / k permuted), Granite (absent multipliers: llama.cpp's defaults, the
 * attention at 1 / sqrt(head_dim)) and an OLMo 3 file (a window: refused). */
static void small_families(const char *dir) {
    tiny_opts o = {"smollm3", SD_GGML_F32, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    o.layers = 8;
    specdec_model *m = load_tiny(dir, &o, SPECDEC_OK, NULL, "smollm3");
    if (m) {
        const sd_config *c = &m->w.cfg;
        int nope = c->n_layers == 8 && c->rope_interleaved;
        for (int l = 0; l < c->n_layers; l++) nope &= c->layer_no_rope[l] == ((l + 1) % 4 == 0) && !c->layer_sliding[l];
        SD_CHECK(nope && !strcmp(c->architecture, "SmolLM3ForCausalLM"), "smollm3: layers 3 and 7 without rope, no window");
        specdec_model_free(m);
    }
    o = (tiny_opts){"granite", SD_GGML_F32, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    m = load_tiny(dir, &o, SPECDEC_OK, NULL, "granite without its scale keys");
    if (m) {
        const sd_config *c = &m->w.cfg;
        SD_CHECK(fabsf(c->attn_scale - 1.0f / sqrtf((float)HD)) < 1e-7f && sd_cfg_embed_scale(c) == 1.0 &&
                     c->rope_interleaved, "granite without scale keys: attention 1/sqrt(head_dim) (got %g)",
                 (double)c->attn_scale);
        specdec_model_free(m);
    }
    o = (tiny_opts){"olmo2", SD_GGML_F32, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    load_tiny(dir, &o, SPECDEC_ERR_UNSUPPORTED, "OLMo 3", "an olmo2 file with a window (OLMo 3)");
}

static void loader(const char *dir) {
    tiny_opts o = {"llama", SD_GGML_Q4_0, NULL, NULL, 0, 0, NULL, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    specdec_model *m = load_tiny(dir, &o, SPECDEC_OK, NULL, "llama Q4_0 / Q8_0");
    if (m) {
        const sd_config *c = &m->w.cfg;
        specdec_model_info info;
        SD_CHECK(!specdec_model_get_info(m, &info) && !strcmp(c->architecture, "LlamaForCausalLM") &&
                     c->rope_interleaved == 1 && c->int4_fmt == SD_INT4_GGUF && sd_cfg_cpu_only(c) &&
                     strstr(sd_cfg_cpu_only(c), "GGUF") && c->n_layers == 2 && c->n_kv_heads == NKV &&
                     c->head_dim == HD && c->vocab_size == V && !c->tie_word_embeddings && c->rope_theta == 10000.0f &&
                     c->max_position_embeddings == 64 && m->w.layers[0].wq.dtype == SD_INT4 &&
                     m->w.layers[1].w_up.dtype == SD_INT8 && m->w.layers[0].wk.dtype == SD_F32 &&
                     info.file_format == SPECDEC_FILE_GGUF && info.dtype == SPECDEC_DTYPE_F32 && c->bos_id == 1 &&
                     c->n_eos == 2 && c->eos_ids[0] == 2 && c->eos_ids[1] == 5,
                 "the tiny llama GGUF's config and dtypes (%s)", c->architecture);
        specdec_model_free(m);
    }
    o = (tiny_opts){"qwen2", SD_GGML_F16, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    /* qwen2 needs its q/k/v biases: refused without them */
    load_tiny(dir, &o, SPECDEC_ERR_MODEL_MISMATCH, "q_proj.bias", "qwen2 without its biases");
    o = (tiny_opts){"qwen3", SD_GGML_F16, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    load_tiny(dir, &o, SPECDEC_ERR_MODEL_MISMATCH, "q_norm", "qwen3 without its q/k norms");
    o = (tiny_opts){"llama", SD_GGML_F16, NULL, "linear", 4, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    load_tiny(dir, &o, SPECDEC_ERR_UNSUPPORTED, "rope_freqs", "linear scaling and rope_freqs together");
    o.rope_freqs = 0;
    m = load_tiny(dir, &o, SPECDEC_OK, NULL, "llama F16, linear rope");
    if (m) {
        SD_CHECK(m->w.cfg.int4_fmt == 0 && !sd_cfg_cpu_only(&m->w.cfg) && m->w.cfg.rope_type == SD_ROPE_LINEAR &&
                     m->w.cfg.rope_factor == 2.0f && m->w.layers[0].wq.dtype == SD_F16,
                 "an unquantized GGUF is not CPU-only; linear rope read");
        specdec_model_free(m);
    }
    o = (tiny_opts){"llama", SD_GGML_F32, NULL, NULL, HD / 2, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    m = load_tiny(dir, &o, SPECDEC_OK, NULL, "llama with rope_freqs");
    if (m) {
        SD_CHECK(m->w.cfg.rope_type == SD_ROPE_LONGROPE && m->w.cfg.rope_short_factor[3] == 1.0f &&
                     m->w.cfg.rope_attn_factor == 1.0f, "rope_freqs become per-pair factors");
        specdec_model_free(m);
    }
    o.rope_freqs = 3;
    load_tiny(dir, &o, SPECDEC_ERR_FORMAT, "rope_freqs.weight", "rope_freqs of the wrong size");
    o = (tiny_opts){"gemma3n", SD_GGML_F32, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    load_tiny(dir, &o, SPECDEC_ERR_UNSUPPORTED, "gemma3n", "an unsupported architecture");
    gemma(dir);
    small_families(dir);
    o = (tiny_opts){"llama", SD_GGML_F32, "embedding_length", NULL, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    load_tiny(dir, &o, SPECDEC_ERR_FORMAT, "llama.embedding_length", "a missing required key");
    /* yarn: factor, original context, transformers' betas when the file has none; a missing original
     * context (FORMAT) and DeepSeek's log multiplier (UNSUPPORTED) refused */
    o = (tiny_opts){"llama", SD_GGML_F32, NULL, "yarn", 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    m = load_tiny(dir, &o, SPECDEC_OK, NULL, "yarn scaling");
    if (m) {
        const sd_config *c = &m->w.cfg;
        SD_CHECK(c->rope_type == SD_ROPE_YARN && c->rope_factor == 2.0f && c->rope_original_max_pos == 32 &&
                     c->rope_beta_fast == 32.0f && c->rope_beta_slow == 1.0f &&
                     fabsf(c->rope_attn_factor - (float)(0.1 * log(2.0) + 1.0)) < 1e-6f,
                 "yarn read: factor %g, original %d, betas %g / %g, attention factor %g", (double)c->rope_factor,
                 (int)c->rope_original_max_pos, (double)c->rope_beta_fast, (double)c->rope_beta_slow,
                 (double)c->rope_attn_factor);
        specdec_model_free(m);
    }
    o.skip_key = "rope.scaling.original_context_length";
    load_tiny(dir, &o, SPECDEC_ERR_FORMAT, "llama.rope.scaling.original_context_length", "yarn without its context");
    o.skip_key = NULL, o.yarn_log_mul = 1;
    load_tiny(dir, &o, SPECDEC_ERR_UNSUPPORTED, "yarn_log_multiplier", "yarn with DeepSeek's log multiplier");
    o = (tiny_opts){"llama", SD_GGML_F32, NULL, "longrope", 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    load_tiny(dir, &o, SPECDEC_ERR_UNSUPPORTED, "longrope", "longrope scaling named in the metadata");
    o = (tiny_opts){"llama", SD_GGML_F32, NULL, NULL, 0, 1, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    load_tiny(dir, &o, SPECDEC_ERR_UNSUPPORTED, "q_proj.bias", "a tensor the configuration does not read");
    o = (tiny_opts){"llama", SD_GGML_F32, NULL, NULL, 0, 0, "blk.0.attn_post_norm.weight", 0, 0, 0, 0, 0, 0, 0, 0, 0};
    load_tiny(dir, &o, SPECDEC_ERR_UNSUPPORTED, "attn_post_norm", "an unknown tensor");
    o = (tiny_opts){"llama", SD_GGML_F32, NULL, NULL, 0, 0, "blk.2.attn_norm.weight", 0, 0, 0, 0, 0, 0, 0, 0, 0};
    load_tiny(dir, &o, SPECDEC_ERR_UNSUPPORTED, "blk.2", "a layer past block_count");
    o = (tiny_opts){"llama", SD_GGML_F32, NULL, NULL, 0, 0, NULL, SD_GGML_Q8_1, 0, 0, 0, 0, 0, 0, 0, 0};
    load_tiny(dir, &o, SPECDEC_ERR_UNSUPPORTED, "Q8_1", "an unsupported block type");
    o = (tiny_opts){"llama", SD_GGML_Q4_0, NULL, NULL, 0, 0, NULL, 0, 1, 0, 0, 0, 0, 0, 0, 0};
    load_tiny(dir, &o, SPECDEC_ERR_MODEL_MISMATCH, "must be finite", "a NaN block scale");
    /* MTP from a GGUF */
    o = (tiny_opts){"llama", SD_GGML_F32, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    char p[4200];
    snprintf(p, sizeof p, "%s/tiny.gguf", dir);
    tiny_gguf(p, &o);
    specdec_model_params mp = specdec_model_default_params();
    mp.mtp = 1;
    m = NULL;
    SD_CHECK(specdec_model_load(p, &mp, &m) == SPECDEC_ERR_MODEL_MISMATCH && !m, "MTP from a GGUF is refused");
    specdec_model_free(m);
    /* a .gguf path that is missing, or not GGUF */
    snprintf(p, sizeof p, "%s/missing.gguf", dir);
    SD_CHECK(specdec_model_load(p, NULL, &m) == SPECDEC_ERR_IO && strstr(specdec_last_error(), "no such GGUF file"),
             "a missing .gguf: IO (%s)", specdec_last_error());
    snprintf(p, sizeof p, "%s/text.gguf", dir);
    sd_test_put(p, "GGUX not really", 15);
    SD_CHECK(specdec_model_load(p, NULL, &m) == SPECDEC_ERR_FORMAT && strstr(specdec_last_error(), "not a GGUF file"),
             "a .gguf without the magic: FORMAT (%s)", specdec_last_error());
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    parser();
    block_types();
    threaded_repack();
    loader(argv[1]);
    split_files(argv[1]);
    return sd_test_done();
}
