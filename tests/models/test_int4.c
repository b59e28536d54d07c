/* test_int4.c — GPTQ / AWQ / compressed-tensors 4- and 8-bit weights (quantization_config "gptq" / "awq" /
 * "compressed-tensors" pack-quantized; core/sd_weights.h SD_INT4, SD_INT8, models/sd_int4.h), the CPU
 * backend's weight-only dequantisation (every case below in 4 bits, and GPTQ / compressed-tensors ones in 8):
 *   1. repacking: matrices with known codes, zeros and fp16 scales, packed HERE into the checkpoints'
 *      int32 words from the formats' description (GPTQ v1 with its zero - 1 offset, including the
 *      stored 15 that means zero 0; gptq_v2; AWQ's 0 2 4 6 1 3 5 7 interleave; act-order g_idx;
 *      group_size -1; compressed-tensors' row-major weight_packed with weight_zero_point packed along
 *      the outputs or none (symmetric), bf16 weight_scale [out, groups], channel strategy, weight_g_idx),
 *      read back through sd_int4_repack: sd_cpu_elem, sd_cpu_row_f32 and
 *      sd_cpu_dequant give (q - z) x scale exactly; a trivial g_idx is dropped, a permuted one
 *      kept; a g_idx out of range and a NaN scale are refused;
 *   2. sd_cpu_matmul over those matrices (1, 3 and 12 tokens; both ISA paths; 1 and 2 threads):
 *      within 1e-6 relative of the product computed here in double, and the AVX2 path (codes
 *      decoded in registers for up to 8 tokens, else a chunk at a time; act-order scales and zeros
 *      gathered per lane; groups of 12 column by column in the chunked path) bitwise the portable one;
 *   3. the llama_gptq / qwen2_gptq_actorder / qwen3_awq / llama_ct_w4a16 / qwen3_ct_w4a16_asym fixtures
 *      (and the 8-bit qwen2_gptq_int8 / llama_ct_w8a16 as SD_INT8, SPECDEC_DTYPE_INT8) load their projections
 *      as SD_INT4 (layer 1's MLP of qwen3_awq stays F32: modules_to_not_convert;
 *      layer 1's o_proj of qwen3_ct_w4a16_asym: ignore), report SPECDEC_DTYPE_INT4, and altered copies
 *      are refused naming the key or tensor (an asymmetric compressed-tensors checkpoint without its
 *      zero points is never read as symmetric).
 * (the fixtures' logits: tests/models/test_model_fixtures.c.)
 * argv[1] = fixture directory, argv[2] = a scratch directory. */
#define _GNU_SOURCE /* memmem */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sd_cpu_dequant.h"
#include "sd_int4.h"
#include "sd_math.h"
#include "sd_model.h"
#include "sd_test.h"
#include "sd_test_files.h"
#include "quant_matmul_check.h"
#include "specdec.h"

#define MAXR 24
#define MAXC 48

typedef struct q4case {
    const char *name;
    sd_int4_fmt fmt;
    int rows, cols, group; /* group 0: -1 in the config (one group) */
    int act_order;
    int sym;  /* zeros all 2^(bits-1) (compressed-tensors: no weight_zero_point tensor) */
    int bits; /* 4 or 8 */
} q4case;

static unsigned rng_state = 777;
static unsigned rnd(unsigned n) {
    rng_state = rng_state * 1103515245u + 12345u;
    return (rng_state >> 16) % n;
}

/* Element e of a packed vector: value v at bits b * (e % per) of word e / per. */
static void put_bits(uint32_t *words, int e, int b, uint32_t v) { words[e / (32 / b)] |= v << (b * (e % (32 / b))); }

/* The checkpoint words of a [rows, cols] matrix with codes q[o][i], zeros z[g][o] (0..2^bits - 1),
 * written from the formats' description (not from sd_int4.c): per = 32 / bits codes per word. */
static void pack(const q4case *k, const uint8_t *q, const uint8_t *z, int G, uint32_t *qweight, uint32_t *qzeros) {
    static const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7}; /* AWQ: nibble j holds output 8c + order[j] */
    const int R = k->rows, C = k->cols, b = k->bits, per = 32 / b;
    const uint32_t mask = (1u << b) - 1u;
    memset(qweight, 0, sizeof(uint32_t) * (size_t)(R * C / per));
    memset(qzeros, 0, sizeof(uint32_t) * (size_t)(G * R / per));
    if (k->fmt == SD_INT4_CT) { /* weight_packed [R, C / per] row by row; weight_zero_point [R / per, G] */
        for (int o = 0; o < R; o++)
            for (int i = 0; i < C; i++) put_bits(qweight + o * (C / per), i, b, q[o * C + i]);
        for (int g = 0; g < G; g++) /* packed along the outputs: word [o / per, g] */
            for (int o = 0; o < R; o++) qzeros[(o / per) * G + g] |= (uint32_t)z[g * R + o] << (b * (o % per));
        return;
    }
    if (k->fmt == SD_INT4_AWQ) { /* qweight [C, R / 8] with the interleave; qzeros [G, R / 8] likewise */
        for (int i = 0; i < C; i++)
            for (int c = 0; c < R / 8; c++)
                for (int j = 0; j < 8; j++) qweight[i * (R / 8) + c] |= (uint32_t)q[(8 * c + order[j]) * C + i] << (4 * j);
        for (int g = 0; g < G; g++)
            for (int c = 0; c < R / 8; c++)
                for (int j = 0; j < 8; j++) qzeros[g * (R / 8) + c] |= (uint32_t)z[g * R + 8 * c + order[j]] << (4 * j);
        return;
    }
    /* GPTQ: qweight [C / per, R] (word [r, o]: inputs per * r ..), qzeros [G, R / per], v1 stores zero - 1 */
    for (int i = 0; i < C; i++)
        for (int o = 0; o < R; o++) qweight[(i / per) * R + o] |= (uint32_t)q[o * C + i] << (b * (i % per));
    for (int g = 0; g < G; g++)
        for (int o = 0; o < R; o++) {
            const uint32_t stored = k->fmt == SD_INT4_GPTQ ? (uint32_t)(z[g * R + o] + mask) & mask : z[g * R + o];
            put_bits(qzeros + g * (R / per), o, b, stored);
        }
}

static void one_case(const q4case *k) {
    const int R = k->rows, C = k->cols, group = k->group ? k->group : C, G = (C + group - 1) / group;
    static uint8_t q[MAXR * MAXC], z[MAXC * MAXR];
    static uint16_t s16[MAXC * MAXR];
    static uint32_t qweight[MAXR * MAXC / 4], qzeros[MAXC * MAXR / 4];
    static int32_t gidx[MAXC];
    int perm[MAXC];
    for (int i = 0; i < C; i++) perm[i] = i;
    for (int i = C - 1; k->act_order && i > 0; i--) {
        const int j = (int)rnd((unsigned)i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (int i = 0; i < C; i++) gidx[i] = perm[i] / group;
    const unsigned levels = 1u << k->bits; /* codes and zeros 0 .. levels - 1 */
    for (int i = 0; i < R * C; i++) q[i] = (uint8_t)rnd(levels);
    static uint16_t s_ct[MAXR * MAXC]; /* compressed-tensors' weight_scale is [R, G] (bf16 here) */
    for (int i = 0; i < G * R; i++) {
        z[i] = (uint8_t)(k->sym ? levels / 2 : i % 7 == 0 ? 0 : i % 11 == 0 ? levels - 1 : rnd(levels)); /* zero 0: v1 stores all ones */
        const float sv = (float)(0.001 + 0.01 * rnd(100) / (1.0 + (i % 3)));
        s16[i] = k->fmt == SD_INT4_CT ? sd_f32_to_bf16(sv) : sd_f32_to_f16(sv);
        s_ct[(i % R) * G + i / R] = s16[i];
    }
    pack(k, q, z, G, qweight, qzeros);
    const int ct = k->fmt == SD_INT4_CT;
    const sd_int4_src src = {k->fmt, k->bits, R, C, group, (const uint8_t *)qweight,
                             ct && k->sym ? NULL : (const uint8_t *)qzeros, (const uint8_t *)(ct ? s_ct : s16),
                             ct ? SD_BF16 : SD_F16,
                             k->fmt == SD_INT4_AWQ || (ct && !k->act_order) ? NULL : (const uint8_t *)gidx};
    void *buf = calloc(1, sd_int4_bytes(k->bits, R, C, group));
    sd_tensor w;
    char why[160] = "";
    SD_CHECK(buf && sd_int4_repack(&src, buf, &w, why, sizeof why), "%s: repack: %s", k->name, why);
    if (!buf) return;
    const sd_int4_meta *meta = sd_int4_meta_of(&w);
    SD_CHECK((meta->gidx != NULL) == (k->act_order != 0) && meta->n_groups == G && meta->group == group &&
                 meta->bits == k->bits && w.dtype == (k->bits == 8 ? SD_INT8 : SD_INT4),
             "%s: g_idx kept only when permuted (%p), %d groups of %d, %d-bit", k->name, (const void *)meta->gidx,
             (int)meta->n_groups, (int)meta->group, (int)meta->bits);
    static double ref[MAXR * MAXC];
    for (int o = 0; o < R; o++)
        for (int i = 0; i < C; i++) {
            const int g = gidx[i] * R + o;
            const double sc = k->fmt == SD_INT4_CT ? (double)sd_bf16_to_f32(s16[g]) : (double)sd_f16_to_f32(s16[g]);
            ref[o * C + i] = ((double)q[o * C + i] - (double)z[g]) * sc;
        }
    int bad = 0;
    float row[MAXC], rng[MAXC + 5];
    for (int r = 0; r < R; r++) {
        const float *p = sd_cpu_row_f32(&w, r, row);
        for (int c = 0; c < C; c++) bad += (double)p[c] != ref[r * C + c];
        for (int c = 0; c < C; c++) bad += (double)sd_cpu_elem(&w, (int64_t)r * C + c) != ref[r * C + c];
    }
    sd_cpu_dequant(&w, 2 * C + 5, C + 5, rng); /* across a row boundary */
    for (int i = 0; i < C + 5; i++) bad += (double)rng[i] != ref[2 * C + 5 + i];
    SD_CHECK(bad == 0, "%s: %d decoded values differ from (q - z) x scale", k->name, bad);
    static const int ns[3] = {1, 3, 12}; /* up to 8 tokens take the in-register path, more the chunked one */
    quant_matmul_check(k->name, &w, ref, R, C, ns, 0.1);
    free(buf);
}

static void refusals(void) {
    enum { R = 8, C = 16 };
    static uint32_t qw[R * C / 8], qz[2 * R / 8];
    static uint16_t s16[2 * R];
    static int32_t gi[C];
    for (int i = 0; i < 2 * R; i++) s16[i] = sd_f32_to_f16(0.5f);
    for (int i = 0; i < C; i++) gi[i] = i / 8;
    gi[5] = 2;
    sd_int4_src src = {SD_INT4_GPTQ, 4, R, C, 8, (const uint8_t *)qw, (const uint8_t *)qz, (const uint8_t *)s16, SD_F16,
                       (const uint8_t *)gi};
    void *buf = calloc(1, sd_int4_bytes(4, R, C, 8));
    sd_tensor w;
    char why[160] = "";
    SD_CHECK(buf && !sd_int4_repack(&src, buf, &w, why, sizeof why) && strstr(why, "g_idx[5] is 2"),
             "a g_idx entry past the groups is refused (%s)", why);
    gi[5] = 0;
    s16[3] = 0x7e00; /* fp16 NaN */
    memset(buf, 0, sd_int4_bytes(4, R, C, 8));
    SD_CHECK(buf && !sd_int4_repack(&src, buf, &w, why, sizeof why) && strstr(why, "scale of group 0, output 3 is nan"),
             "a NaN scale is refused (%s)", why);
    free(buf);
}

/* ---- the fixtures and altered copies ---- */
/* A copy of fixture `fx/base` in scratch/name, its safetensors header's text `from` replaced by `to`
 * (same length: the data offsets hold) and config.json's cfg_from by cfg_to; loaded. */
static specdec_status altered(const char *fx, const char *base, const char *scratch, const char *name,
                              const char *from, const char *to, const char *cfg_from, const char *cfg_to) {
    char src[4200], dst[4300];
    snprintf(src, sizeof src, "%.4000s/%s", fx, base);
    snprintf(dst, sizeof dst, "%.4096s/%s", scratch, name);
    mkdir(scratch, 0755);
    mkdir(dst, 0755);
    size_t n = 0;
    free(sd_test_copy_edited(src, dst, "model.safetensors", from, to, &n));
    free(sd_test_copy_edited(src, dst, "config.json", cfg_from, cfg_to, &n));
    specdec_model *m = NULL;
    const specdec_status st = specdec_model_load(dst, NULL, &m);
    specdec_model_free(m);
    return st;
}

static specdec_model *load_fixture_as(const char *fx, const char *name, specdec_dtype want) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", fx, name);
    specdec_model *m = NULL;
    SD_CHECK(specdec_model_load(p, NULL, &m) == SPECDEC_OK, "load %s: %s", p, specdec_last_error());
    if (!m) return NULL;
    specdec_model_info info;
    SD_CHECK(specdec_model_get_info(m, &info) == SPECDEC_OK && info.dtype == want, "%s: model_info.dtype %d (want %d)",
             name, (int)info.dtype, (int)want);
    return m;
}

static specdec_model *load_fixture(const char *fx, const char *name) {
    return load_fixture_as(fx, name, SPECDEC_DTYPE_INT4);
}

static void fixtures(const char *fx, const char *scratch) {
    specdec_model *m = load_fixture(fx, "llama_gptq");
    if (m) {
        const sd_layer *L = &m->w.layers[1];
        const sd_int4_meta *q = L->w_down.dtype == SD_INT4 ? sd_int4_meta_of(&L->w_down) : NULL;
        SD_CHECK(L->wq.dtype == SD_INT4 && L->wk.dtype == SD_INT4 && L->wo.dtype == SD_INT4 &&
                     L->w_gate.dtype == SD_INT4 && q && q->group == 16 && !q->gidx && m->w.tok_embd.dtype == SD_F32 &&
                     m->w.lm_head.dtype == SD_F32 && L->attn_norm.dtype == SD_F32,
                 "llama_gptq: the projections are INT4 in groups of 16 (g_idx trivial: dropped), the rest F32");
        specdec_model_free(m);
    }
    m = load_fixture(fx, "qwen2_gptq_actorder");
    if (m) {
        const sd_layer *L = &m->w.layers[0];
        SD_CHECK(L->wq.dtype == SD_INT4 && sd_int4_meta_of(&L->wq)->gidx && L->bq.dtype == SD_F32,
                 "qwen2_gptq_actorder: q_proj INT4 with its act-order g_idx kept, its bias F32");
        specdec_model_free(m);
    }
    m = load_fixture(fx, "qwen3_awq");
    if (m) {
        SD_CHECK(m->w.layers[0].w_up.dtype == SD_INT4 && m->w.layers[1].wq.dtype == SD_INT4 &&
                     m->w.layers[1].w_up.dtype == SD_F32 && m->w.layers[1].w_down.dtype == SD_F32,
                 "qwen3_awq: layer 1's MLP (modules_to_not_convert) F32, the other projections INT4");
        specdec_model_free(m);
    }
    m = load_fixture(fx, "llama_ct_w4a16");
    if (m) {
        const sd_layer *L = &m->w.layers[0];
        const sd_int4_meta *q = L->wv.dtype == SD_INT4 ? sd_int4_meta_of(&L->wv) : NULL;
        SD_CHECK(q && q->group == 16 && q->zero[0] == 8 && q->zero[q->n_groups * L->wv.shape[0] - 1] == 8 &&
                     m->w.layers[1].w_down.dtype == SD_INT4 && m->w.lm_head.dtype == SD_F32,
                 "llama_ct_w4a16: symmetric (every zero 8) groups of 16, lm_head (ignored) F32");
        specdec_model_free(m);
    }
    m = load_fixture(fx, "qwen3_ct_w4a16_asym");
    if (m) {
        SD_CHECK(m->w.layers[1].wo.dtype == SD_F32 && m->w.layers[1].wq.dtype == SD_INT4 &&
                     m->w.layers[0].wo.dtype == SD_INT4,
                 "qwen3_ct_w4a16_asym: layer 1's o_proj (in ignore) F32, the other projections INT4");
        specdec_model_free(m);
    }
    m = load_fixture_as(fx, "qwen2_gptq_int8", SPECDEC_DTYPE_INT8);
    if (m) {
        const sd_layer *L = &m->w.layers[1];
        const sd_int4_meta *q = L->w_gate.dtype == SD_INT8 ? sd_int4_meta_of(&L->w_gate) : NULL;
        SD_CHECK(q && q->bits == 8 && q->group == 16 && !q->gidx && L->wq.dtype == SD_INT8 && L->bq.dtype == SD_F32,
                 "qwen2_gptq_int8: 8-bit projections in groups of 16, biases F32");
        specdec_model_free(m);
    }
    m = load_fixture_as(fx, "llama_ct_w8a16", SPECDEC_DTYPE_INT8);
    if (m) {
        const sd_tensor *w = &m->w.layers[0].wo;
        const sd_int4_meta *q = w->dtype == SD_INT8 ? sd_int4_meta_of(w) : NULL;
        SD_CHECK(q && q->n_groups == 1 && q->group == w->shape[1] && q->zero[0] == 128,
                 "llama_ct_w8a16: one group per row (channel), symmetric zero 128");
        specdec_model_free(m);
    }
    struct {
        const char *base, *name, *from, *to, *cfg_from, *cfg_to, *needle;
        specdec_status want;
    } cases[] = {
        {"qwen2_gptq_int8", "int8_as_4", NULL, NULL, "\"bits\": 8", "\"bits\": 4",
         "q_proj.qweight': shape [8, 32], but config.json and quantization_config imply [4, 32]",
         SPECDEC_ERR_MODEL_MISMATCH},
        {"llama_gptq", "no_qzeros", "layers.0.mlp.down_proj.qzeros", "layers.0.mlp.down_proj.qzeroX", NULL, NULL,
         "missing tensor 'model.layers.0.mlp.down_proj.qzeros'", SPECDEC_ERR_MODEL_MISMATCH},
        {"llama_gptq", "bits_3", NULL, NULL, "\"bits\": 4", "\"bits\": 3", "bits must be 4 or 8",
         SPECDEC_ERR_UNSUPPORTED},
        {"llama_gptq", "bits_8", NULL, NULL, "\"bits\": 4", "\"bits\": 8", "q_proj.qweight': shape [4, 32], but",
         SPECDEC_ERR_MODEL_MISMATCH},
        {"llama_gptq", "group_32", NULL, NULL, "\"group_size\": 16", "\"group_size\": 32",
         "q_proj.qzeros': shape [2, 4]", SPECDEC_ERR_MODEL_MISMATCH},
        {"llama_gptq", "marlin", NULL, NULL, "\"checkpoint_format\": \"gptq\"", "\"checkpoint_format\": \"mrln\"",
         "checkpoint_format must be", SPECDEC_ERR_UNSUPPORTED},
        {"llama_gptq", "lm_head", NULL, NULL, "\"lm_head\": false", "\"lm_head\": true ", "lm_head true",
         SPECDEC_ERR_UNSUPPORTED},
        {"qwen3_awq", "gemv", NULL, NULL, "\"version\": \"gemm\"", "\"version\": \"gemv\"", "version must be",
         SPECDEC_ERR_UNSUPPORTED},
        {"qwen3_awq", "zero_point", NULL, NULL, "\"zero_point\": true", "\"zero_point\": 0   ",
         "zero_point must be true", SPECDEC_ERR_UNSUPPORTED},
        {"qwen3_awq", "scales_i32", "\"dtype\":\"F16\",\"shape\":[2,32]", "\"dtype\":\"I32\",\"shape\":[1,32]", NULL,
         NULL, "dtype I32 (expected F16, BF16 or F32)", SPECDEC_ERR_MODEL_MISMATCH},
        {"qwen3_ct_w4a16_asym", "ct_no_zero_point", "layers.0.mlp.down_proj.weight_zero_point",
         "layers.0.mlp.down_proj.weight_zero_poinX", NULL, NULL,
         "down_proj.weight_zero_point' is missing, but quantization_config says the weights are asymmetric",
         SPECDEC_ERR_MODEL_MISMATCH},
        {"qwen3_ct_w4a16_asym", "ct_said_symmetric", NULL, NULL, "\"symmetric\": false", "\"symmetric\": true ",
         "weight_zero_point' is present, but quantization_config says the weights are symmetric",
         SPECDEC_ERR_MODEL_MISMATCH},
        {"qwen3_ct_w4a16_asym", "ct_no_scale", "layers.0.self_attn.k_proj.weight_scale",
         "layers.0.self_attn.k_proj.weight_scalX", NULL, NULL,
         "missing tensor 'model.layers.0.self_attn.k_proj.weight_scale'", SPECDEC_ERR_MODEL_MISMATCH},
        {"qwen3_ct_w4a16_asym", "ct_scale_shape", "\"dtype\":\"BF16\",\"shape\":[32,2],\"data_offsets\":[40688",
         "\"dtype\":\"BF16\",\"shape\":[16,4],\"data_offsets\":[40688", NULL, NULL,
         "k_proj.weight_scale': shape [16, 4]", SPECDEC_ERR_MODEL_MISMATCH},
        {"llama_ct_w4a16", "ct_formats_differ", NULL, NULL, "\"format\": \"pack-quantized\",\n    \"global",
         "\"format\":\"float-quantized\",\n    \"global", "group_0.format must be \"float-quantized\"",
         SPECDEC_ERR_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const specdec_status st = altered(fx, cases[i].base, scratch, cases[i].name, cases[i].from, cases[i].to,
                                          cases[i].cfg_from, cases[i].cfg_to);
        SD_CHECK(st == cases[i].want && strstr(specdec_last_error(), cases[i].needle), "%s: %s (%s)", cases[i].name,
                 specdec_status_string(st), specdec_last_error());
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s FIXTURE_DIR SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    static const q4case cases[] = {
        {"gptq_v1_g16", SD_INT4_GPTQ, 24, 48, 16, 0, 0, 4},
        {"gptq_v2_g12_actorder", SD_INT4_GPTQ_V2, 16, 48, 12, 1, 0, 4},
        {"awq_g16", SD_INT4_AWQ, 24, 48, 16, 0, 0, 4},
        {"gptq_v1_per_column", SD_INT4_GPTQ, 8, 40, 0, 0, 0, 4},
        {"awq_g8_narrow", SD_INT4_AWQ, 8, 16, 8, 0, 0, 4},
        {"ct_sym_g16", SD_INT4_CT, 24, 48, 16, 0, 1, 4},
        {"ct_asym_g16_actorder", SD_INT4_CT, 16, 48, 16, 1, 0, 4},
        {"ct_channel", SD_INT4_CT, 8, 40, 0, 0, 1, 4},
        {"gptq8_v1_g16", SD_INT4_GPTQ, 24, 48, 16, 0, 0, 8},
        {"gptq8_v2_g12_actorder", SD_INT4_GPTQ_V2, 16, 48, 12, 1, 0, 8},
        {"ct8_sym_channel", SD_INT4_CT, 8, 40, 0, 0, 1, 8},
        {"ct8_asym_g16", SD_INT4_CT, 16, 48, 16, 0, 0, 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) one_case(&cases[i]);
    refusals();
    fixtures(argv[1], argv[2]);
    return sd_test_done();
}
