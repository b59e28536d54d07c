/* test_fp8.c — fine-grained FP8 weights (quantization_config "fp8": float8_e4m3fn codes with a
 * weight_scale_inv per weight_block_size block; core/sd_weights.h SD_FP8), the CPU backend's
 * weight-only dequantisation:
 *   1. every float8_e4m3fn code decodes exactly as torch's float8_e4m3fn -> float32 does (the known
 *      values: 0, ±subnormals m x 2^-9, 1.0, 448, S.1111.111 NaN) and 254 of 256 codes are finite;
 *   2. a hand-built 20 x 37 matrix with 8 x 16 blocks (partial blocks both ways, as DeepSeek-V3's
 *      kv_a_proj [576 = 4.5 x 128] has): sd_cpu_elem, sd_cpu_row_f32, sd_cpu_dequant and sd_cpu_matmul
 *      (1, 4 and 12 tokens, both ISA paths, 1 and 2 threads) equal the decode computed here in double,
 *      bitwise for the elements and within 1e-6 relative for the products; the
 *      AVX2 path (codes decoded in registers: up to 8 tokens without storing them, more a chunk at a
 *      time) gives bitwise the portable path's products, on any thread count;
 *   3. the qwen3_fp8 fixture (transformers wrote it; tools/gen_model_fixtures.py checks its own FP8
 *      reader agrees) loads its projections as SD_FP8 with their block scales, reports
 *      SPECDEC_DTYPE_FP8_E4M3, and a copy whose scales are missing, mis-shaped or not positive, whose
 *      quantization_config names another method, or that has none, is refused naming the tensor, the
 *      method or the dtype.
 *   4. the compressed-tensors FP8 fixtures (llama_ct_fp8_channel, qwen3_ct_fp8_block,
 *      mistral_ct_fp8_tensor: llm-compressor's FP8-dynamic, FP8-block and static FP8 schemes) load their
 *      projections as SD_FP8 in [1, cols], [16, 16] and [rows, cols] blocks (the ignored layer in
 *      float), and copies with a missing or mis-shaped weight_scale are refused naming it.
 * (the fixtures' logits against transformers: tests/models/test_model_fixtures.c.)
 * argv[1] = fixture directory, argv[2] = a scratch directory. */
#define _GNU_SOURCE /* memmem */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sd_cpu_dequant.h"
#include "sd_model.h"
#include "sd_test.h"
#include "sd_test_files.h"
#include "quant_matmul_check.h"
#include "specdec.h"

static void codes(void) {
    SD_CHECK(sd_cpu_fp8_e4m3(0x38) == 1.0f && sd_cpu_fp8_e4m3(0x7e) == 448.0f && sd_cpu_fp8_e4m3(0xfe) == -448.0f &&
                 sd_cpu_fp8_e4m3(0x01) == 0x1p-9f && sd_cpu_fp8_e4m3(0x07) == 7 * 0x1p-9f &&
                 sd_cpu_fp8_e4m3(0x08) == 0x1p-6f && sd_cpu_fp8_e4m3(0x00) == 0.0f &&
                 signbit(sd_cpu_fp8_e4m3(0x80)) && sd_cpu_fp8_e4m3(0x3c) == 1.5f && sd_cpu_fp8_e4m3(0x30) == 0.5f,
             "float8_e4m3fn known values");
    int finite = 0;
    for (int b = 0; b < 256; b++) {
        const float v = sd_cpu_fp8_e4m3((uint8_t)b);
        finite += isfinite(v) != 0;
        const int e = (b >> 3) & 15, m = b & 7;
        const double want = e == 0 ? m * ldexp(1.0, -9) : (1.0 + m / 8.0) * ldexp(1.0, e - 7);
        if (e == 15 && m == 7) SD_CHECK(isnan(v), "code %#x must be NaN", b);
        else SD_CHECK((double)fabsf(v) == want && (signbit(v) != 0) == (b >= 128), "code %#x: %g, want %g", b, (double)v, want);
    }
    SD_CHECK(finite == 254, "254 finite codes, got %d", finite);
}

#define R 20
#define C 37
#define BM 8
#define BN 16

static void blocks(void) {
    static uint8_t w8[R * C];
    const int sr = (R + BM - 1) / BM, sc = (C + BN - 1) / BN;
    static float scales[2 + 3 * 3];
    scales[0] = BM, scales[1] = BN;
    for (int i = 0; i < sr * sc; i++) scales[2 + i] = 0.001f * (float)(i + 1) * (i % 2 ? 3.0f : 1.0f);
    unsigned s = 12345;
    for (int i = 0; i < R * C; i++) {
        s = s * 1103515245u + 12345u;
        uint8_t b = (uint8_t)(s >> 16);
        if ((b & 0x7f) == 0x7f) b ^= 1; /* no NaN codes */
        w8[i] = b;
    }
    const sd_tensor w = {w8, SD_FP8, 2, {R, C}, (const uint8_t *)(const void *)scales};
    static double ref[R * C];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
            ref[r * C + c] = (double)sd_cpu_fp8_e4m3(w8[r * C + c]) * (double)scales[2 + (r / BM) * sc + c / BN];
    int bad = 0;
    float row[C], rng[C + 5];
    for (int r = 0; r < R; r++) {
        const float *p = sd_cpu_row_f32(&w, r, row);
        for (int c = 0; c < C; c++) bad += (double)p[c] != (double)(float)ref[r * C + c];
        for (int c = 0; c < C; c++) bad += (double)sd_cpu_elem(&w, (int64_t)r * C + c) != (double)(float)ref[r * C + c];
    }
    sd_cpu_dequant(&w, 3 * C + 5, C + 5, rng); /* a range across a row boundary */
    for (int i = 0; i < C + 5; i++) bad += (double)rng[i] != (double)(float)ref[3 * C + 5 + i];
    SD_CHECK(bad == 0, "FP8 decode over partial blocks: %d values differ", bad);
    static const int ns[3] = {1, 4, 12}; /* > 8 tokens: the chunked AVX2 path */
    quant_matmul_check("FP8", &w, ref, R, C, ns, 0.0);
}

/* ---- the fixture and altered copies ---- */
/* A copy of the fixture in scratch/name with its safetensors header edited: the JSON text `from`
 * replaced by `to` (same length, so the data offsets hold), and config.json's by cfg_from -> cfg_to. */
static specdec_status altered(const char *fx, const char *scratch, const char *name, const char *from, const char *to,
                              const char *cfg_from, const char *cfg_to, const char *negate) {
    char src[4200], dst[4300];
    snprintf(src, sizeof src, "%.4096s/qwen3_fp8", fx);
    snprintf(dst, sizeof dst, "%.4096s/%s", scratch, name);
    mkdir(scratch, 0755);
    mkdir(dst, 0755);
    size_t n = 0;
    char *b = sd_test_copy_edited(src, dst, "model.safetensors", from, to, &n);
    if (b && negate) { /* the first float of tensor `negate` becomes -1 */
        uint64_t hlen = 0;
        memcpy(&hlen, b, 8);
        const char *key = memmem(b, n, negate, strlen(negate));
        const char *off = key ? strstr(key, "data_offsets") : NULL;
        long begin = -1;
        SD_CHECK(off && sscanf(off, "data_offsets\":[%ld", &begin) == 1, "%s: offsets of %s", name, negate);
        const float neg = -1.0f;
        if (begin >= 0 && 8 + hlen + (uint64_t)begin + 4 <= n) memcpy(b + 8 + hlen + begin, &neg, 4);
        char p[4400];
        snprintf(p, sizeof p, "%.4300s/model.safetensors", dst);
        sd_test_put(p, b, n);
    }
    free(b);
    free(sd_test_copy_edited(src, dst, "config.json", cfg_from, cfg_to, &n));
    specdec_model *m = NULL;
    const specdec_status st = specdec_model_load(dst, NULL, &m);
    specdec_model_free(m);
    return st;
}

static void fixture(const char *fx, const char *scratch) {
    char p[4200];
    snprintf(p, sizeof p, "%s/qwen3_fp8", fx);
    specdec_model *m = NULL;
    SD_CHECK(specdec_model_load(p, NULL, &m) == SPECDEC_OK, "load %s: %s", p, specdec_last_error());
    if (!m) return;
    const sd_layer *L = &m->w.layers[1];
    const float *sc = L->w_down.dtype == SD_FP8 ? sd_fp8_scales(&L->w_down) : NULL;
    SD_CHECK(L->wq.dtype == SD_FP8 && L->wk.dtype == SD_FP8 && L->wo.dtype == SD_FP8 && L->w_gate.dtype == SD_FP8 &&
                 sc && sc[0] == 16.0f && sc[1] == 16.0f && sc[2] > 0.0f && m->w.tok_embd.dtype == SD_F32 &&
                 L->attn_norm.dtype == SD_F32,
             "qwen3_fp8: the projections are FP8 with 16 x 16 block scales, embeddings and norms F32");
    specdec_model_info info;
    SD_CHECK(specdec_model_get_info(m, &info) == SPECDEC_OK && info.dtype == SPECDEC_DTYPE_FP8_E4M3,
             "qwen3_fp8: model_info.dtype FP8_E4M3 (%d)", (int)info.dtype);
    specdec_model_free(m);
    struct {
        const char *name, *from, *to, *cfg_from, *cfg_to, *negate, *needle;
        specdec_status want;
    } cases[] = {
        {"no_scale", "layers.0.mlp.down_proj.weight_scale_inv", "layers.0.mlp.down_proj.weight_scale_inX", NULL, NULL,
         NULL, "down_proj.weight_scale_inv", SPECDEC_ERR_MODEL_MISMATCH},
        {"unknown_method", NULL, NULL, "\"quant_method\": \"fp8\"", "\"quant_method\": \"fp9\"", NULL, "'fp9'",
         SPECDEC_ERR_UNSUPPORTED},
        {"no_quant_config_key", NULL, NULL, "\"quantization_config\"", "\"quantization_confiX\"", NULL,
         "dtype F8_E4M3 is not supported", SPECDEC_ERR_UNSUPPORTED},
        {"block_32", NULL, NULL, "\"weight_block_size\": [\n      16,", "\"weight_block_size\": [\n      32,", NULL,
         "weight_scale_inv' must be [2, 2] (weight_block_size [32, 16]", SPECDEC_ERR_MODEL_MISMATCH},
        {"negative_scale", NULL, NULL, NULL, NULL, "\"model.layers.1.self_attn.o_proj.weight_scale_inv\"",
         "o_proj.weight_scale_inv': scale 0 is -1", SPECDEC_ERR_MODEL_MISMATCH},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const specdec_status st =
            altered(fx, scratch, cases[i].name, cases[i].from, cases[i].to, cases[i].cfg_from, cases[i].cfg_to,
                    cases[i].negate);
        SD_CHECK(st == cases[i].want && strstr(specdec_last_error(), cases[i].needle), "%s: %s (%s)", cases[i].name,
                 specdec_status_string(st), specdec_last_error());
    }
}

/* compressed-tensors' FP8 ("float-quantized"): the three strategies as SD_FP8 blocks, the ignored layer
 * in float, refusals of altered copies (tensor names and shapes as compressed-tensors writes them). */
static void ct_fixtures(const char *fx, const char *scratch) {
    static const struct {
        const char *name;
        int bm, bn; /* of layer 0's k_proj [KV, H]; 0: the whole side */
    } fx3[] = {{"llama_ct_fp8_channel", 1, 0}, {"qwen3_ct_fp8_block", 16, 16}, {"mistral_ct_fp8_tensor", 0, 0}};
    for (int i = 0; i < 3; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", fx, fx3[i].name);
        specdec_model *m = NULL;
        SD_CHECK(specdec_model_load(p, NULL, &m) == SPECDEC_OK, "load %s: %s", p, specdec_last_error());
        if (!m) continue;
        const sd_tensor *k = &m->w.layers[0].wk;
        const float *sc = k->dtype == SD_FP8 ? sd_fp8_scales(k) : NULL;
        const float bm = fx3[i].bm ? (float)fx3[i].bm : (float)k->shape[0];
        const float bn = fx3[i].bn ? (float)fx3[i].bn : (float)k->shape[1];
        specdec_model_info info;
        SD_CHECK(sc && sc[0] == bm && sc[1] == bn && sc[2] > 0.0f && m->w.lm_head.dtype == SD_F32 &&
                     specdec_model_get_info(m, &info) == SPECDEC_OK && info.dtype == SPECDEC_DTYPE_FP8_E4M3,
                 "%s: k_proj FP8 in [%g, %g] blocks, lm_head F32, model_info FP8_E4M3", fx3[i].name, (double)bm,
                 (double)bn);
        if (i == 1)
            SD_CHECK(m->w.layers[1].w_down.dtype == SD_F32 && m->w.layers[1].w_up.dtype == SD_FP8,
                     "qwen3_ct_fp8_block: layer 1's down_proj (in ignore) F32");
        specdec_model_free(m);
    }
    struct {
        const char *base, *name, *from, *to, *needle;
    } cases[] = {
        {"llama_ct_fp8_channel", "ct_fp8_no_scale", "layers.0.self_attn.k_proj.weight_scale",
         "layers.0.self_attn.k_proj.weight_scalX", "missing tensor 'model.layers.0.self_attn.k_proj.weight_scale'"},
        {"llama_ct_fp8_channel", "ct_fp8_channel_shape", "\"dtype\":\"BF16\",\"shape\":[16,1],\"data_offsets\":[21376",
         "\"dtype\":\"BF16\",\"shape\":[1,16],\"data_offsets\":[21376", "k_proj.weight_scale' must be [16, 1]"},
        {"mistral_ct_fp8_tensor", "ct_fp8_tensor_no_scale", "layers.1.mlp.up_proj.weight_scale",
         "layers.1.mlp.up_proj.weight_scalX", "missing tensor 'model.layers.1.mlp.up_proj.weight_scale'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char src[4200], dst[4300];
        snprintf(src, sizeof src, "%.4000s/%s", fx, cases[i].base);
        snprintf(dst, sizeof dst, "%.4096s/%s", scratch, cases[i].name);
        mkdir(scratch, 0755);
        mkdir(dst, 0755);
        size_t n = 0;
        free(sd_test_copy_edited(src, dst, "model.safetensors", cases[i].from, cases[i].to, &n));
        free(sd_test_copy_edited(src, dst, "config.json", NULL, NULL, &n));
        specdec_model *m = NULL;
        const specdec_status st = specdec_model_load(dst, NULL, &m);
        specdec_model_free(m);
        SD_CHECK(st == SPECDEC_ERR_MODEL_MISMATCH && strstr(specdec_last_error(), cases[i].needle), "%s: %s (%s)",
                 cases[i].name, specdec_status_string(st), specdec_last_error());
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s FIXTURE_DIR SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    codes();
    blocks();
    fixture(argv[1], argv[2]);
    ct_fixtures(argv[1], argv[2]);
    return sd_test_done();
}
