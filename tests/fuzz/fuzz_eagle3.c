/* fuzz_eagle3.c — hostile EAGLE-3 draft heads (docs/EAGLE3.md): a head directory
 * (config.json + model.safetensors) made from the input is loaded with specdec_model_load,
 * checked against a tiny random target (fuzz_tiny_models.h) by specdec_engine_create, and a
 * head that is taken drafts a short specdec_generate (chains or EAGLE-2 trees, greedy /
 * match / rejection).
 *
 * Input: five header bytes, then the head in one of two forms.
 *   b0  bit 0: raw (1) or generated (0); bit 1: target T1 (else T0); bits 2-3: verify mode
 *       (greedy, match, rejection, rejection); bit 4: a tree; bit 5: a second generate call
 *       on the same engine; bit 6: the tree as a node budget (draft_nodes) instead of widths;
 *       bit 7: n_ctx 24 instead of the target's 64
 *   b1  chain: γ = 1 + b1 % 8; tree: depth 1 + b1 % 4, widths from the higher bits
 *   b2  n_predict = 1 + b2 % 24; bit 7 of b2: read the safetensors into memory (no mmap)
 *   b3  sampling: temperature, top-k, top-p, min-p, seed
 *   b4  prompt: 1 + b4 % 20 ids drawn from a generator seeded by b4
 * raw:       config.json text, a NUL, one fill byte (bit 0: fill), then the .safetensors
 *            bytes. With fill, a data region shorter than the header declares is completed
 *            (each tensor by its dtype: small random F32/F16/BF16 values, I64 0 = identity
 *            d2t, BOOL 1; at most 256 KiB) so inputs stay small; the given bytes win.
 * generated: a compact description (fe_spec below, read with sd_fuzz_in: an input that runs
 *            out reads zeros, and all zeros is a valid head for the chosen target) from
 *            which this file writes config.json and model.safetensors itself: both layouts,
 *            F32/F16/BF16/mixed, sizes, head_dim, own embedding, fc.bias, fc_norm, input_norm,
 *            norm flags, RoPE variants, activation, biases, layer count, vocabulary maps
 *            (d2t / t2d / both / none, with out-of-range, overflowing, duplicate and
 *            inconsistent entries), capture ids (top level / eagle_config / default rule,
 *            out of range or repeated), one corrupted tensor (missing, wrong shape, wrong
 *            dtype), misaligned data, NaN / inf / huge / subnormal weights. Byte order:
 *            structure flags, sizes, misc (fe_decode_shape), map mode and size, map
 *            corruption (fe_decode_map), capture mode and 3 ids (fe_decode_aux), layer keys,
 *            rope_theta (fe_decode_layer), weight seed (bits 6-7: 0-3 injections of 3 bytes
 *            each), then the broken tensor and how (fe_corrupt); make_seeds.py e3_gen.
 *
 * Checked: the load status is OK or FORMAT / UNSUPPORTED / MODEL_MISMATCH (raw: or IO) with a message
 * (for generated heads exactly the documented one: every knob a head may not have must be
 * refused with its status, every head without one must load); a loaded head's info says
 * what the files say; as a target it is refused (MODEL_MISMATCH); as the draft the engine
 * takes it exactly when it fits the target (fc width, vocabulary, embedding, capture ids),
 * else MODEL_MISMATCH; a taken head's generation succeeds with ids in the vocabulary and
 * consistent statistics, greedy and match output equal plain decoding of the same engine and
 * a rejection run repeats itself exactly (the engine is exact whatever the head proposes).
 * No leak (libFuzzer's -detect_leaks), no sanitizer report.
 * sd_fuzz_one returns 0 when the head was taken and generated, else the refusing status
 * (seeds: ok_* must be taken, bad_* refused). Files live in one directory per process
 * (made once, emptied after each input). */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "fuzz_tiny_models.h"
#include "sd_math.h"
#include "specdec.h"

#define FE_V 40                 /* both targets' vocabulary */
#define FE_MAX_FILE (256u << 10) /* largest file the fill completes */
#define FE_NOT_HEAD 100         /* the directory loaded as a language model */

/* T0: 8 layers (the default capture rule hs[2], hs[4], hs[5] works), hidden 8, F32.
 * T1: 3 layers (the default rule repeats an id: explicit ids needed), hidden 12, BF16, tied. */
static const ck_spec fe_tspec[2] = {
    {.arch = "LlamaForCausalLM", .V = FE_V, .H = 8, .I = 16, .L = 8, .NH = 2, .NKV = 1, .wdtype = "F32",
     .ndtype = "F32", .seed = 31},
    {.arch = "LlamaForCausalLM", .V = FE_V, .H = 12, .I = 24, .L = 3, .NH = 3, .NKV = 1, .tie = 1,
     .wdtype = "BF16", .ndtype = "BF16", .seed = 32},
};
static specdec_model *g_target[2];
static char g_root[200], g_dir[256]; /* g_dir = g_root/head: the head's files, emptied after each input */

static void fe_cleanup(void) {
    if (!g_dir[0]) return;
    fz_rm_dir(g_dir);
    rmdir(g_root);
    g_dir[0] = '\0';
}

int sd_fuzz_init(void) {
    (void)ck_find;
    (void)ck_remove;
    if (fz_make_root(g_root, sizeof g_root, "fuzz_eagle3")) return 1;
    for (int i = 0; i < 2; i++) {
        ck_spec s = fe_tspec[i];
        if (fz_load_model(g_root, i ? "t1" : "t0", &s, &g_target[i], NULL, NULL)) return 1;
    }
    snprintf(g_dir, sizeof g_dir, "%s/head", g_root);
    if (mkdir(g_dir, 0700)) return 1;
    atexit(fe_cleanup);
    return 0;
}

/* ---- byte buffers and values ------------------------------------------------------ */
static void fe_printf(sd_fuzz_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fe_printf(sd_fuzz_buf *b, const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sd_fuzz_require(n >= 0 && (size_t)n < sizeof tmp);
    sd_fuzz_buf_put(b, tmp, (size_t)n);
}

static uint64_t fe_rng(uint64_t *s) { return ck_rng_next(s); }
static float fe_unit(uint64_t *s) { return (float)((double)(fe_rng(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0); }

/* One value in a float dtype ("F32", "F16", "BF16"; anything else: its size in zero bytes). */
static void fe_put_value(sd_fuzz_buf *b, const char *dt, float v) {
    if (!strcmp(dt, "F32")) {
        sd_fuzz_buf_put(b, &v, 4);
    } else if (!strcmp(dt, "F16") || !strcmp(dt, "BF16")) {
        const uint16_t h = dt[0] == 'F' ? sd_f32_to_f16(v) : sd_f32_to_bf16(v);
        sd_fuzz_buf_put(b, &h, 2);
    } else {
        static const uint8_t z[8] = {0};
        sd_fuzz_buf_put(b, z, ck_dtype_size(dt));
    }
}

/* ---- generated heads ------------------------------------------------------------ */
#define FE_MAXT 24 /* tensors of a generated head */

typedef struct fe_tensor {
    char name[64];
    char dtype[8];
    int ndim;
    int64_t shape[3];
    int kind;   /* 0 matrix (scale gain/sqrt(cols)), 1 norm (around 1), 2 vector or embedding (scale gain) */
    float gain;
} fe_tensor;

/* What a generated head is, and what the library must answer. */
typedef struct fe_spec {
    int layout, dtype_mode, embed, bias, fc_norm, nbfc, norm_output, nbr;
    int H, nH, nKV, hd, hd_written, F, V, Vd, tH, map; /* map: bit 0 d2t, bit 1 t2d */
    int64_t d2t[FE_V + 2];
    uint8_t t2d[FE_V + 2];
    int d2t_len, t2d_len;
    const char *d2t_dtype, *t2d_dtype;
    int aux_mode, aux_n, aux_kind[3], aux_val[3], eagle_cfg; /* eagle_cfg: 0 object, 1 use_aux false, 2 not an object */
    int rope, theta_i, act, mlp_bias, attn_bias, layers2, qwen3, bias_key_only, eps_i, max_pos_small, misalign;
    int dv_key; /* draft_vocab_size written: 0 no, 1 Vd, 2 V + 1, 3 0 */
    uint64_t wseed;
    int n_inject;
    uint8_t inject[3][3];
    fe_tensor t[FE_MAXT];
    int nt;
    unsigned load_bad;  /* statuses a refusal may have (0: the head must load) */
    int aux_expl, aux_ids[3]; /* the ids as the info reports them (all -1: default rule) */
} fe_spec;

#define FE_BAD(sp, st) ((sp)->load_bad |= 1u << (st))

static fe_tensor *fe_add(fe_spec *s, const char *pfx, const char *name, const char *dt, int64_t r, int64_t c, int kind,
                         float gain) {
    sd_fuzz_require(s->nt < FE_MAXT);
    fe_tensor *t = &s->t[s->nt++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s%s", pfx, name);
    snprintf(t->dtype, sizeof t->dtype, "%s", dt);
    t->ndim = c ? 2 : 1;
    t->shape[0] = r;
    t->shape[1] = c;
    t->kind = kind;
    t->gain = gain;
    return t;
}

static const char *fe_dtype(fe_spec *s, uint64_t *rng) {
    static const char *const dts[3] = {"F32", "F16", "BF16"};
    return s->dtype_mode < 3 ? dts[s->dtype_mode] : dts[fe_rng(rng) % 3];
}

/* Structure flags, sizes and the misc byte (vocabulary, target width, alignment, bias key). */
static void fe_decode_shape(sd_fuzz_in *in, fe_spec *s, int Ht) {
    static const int Hs[4] = {0, 4, 8, 16}, nHs[4] = {2, 1, 4, 2}, nKVs[4] = {1, 1, 2, 2}, hds[4] = {0, 4, 2, 6};
    static const int Fs[4] = {16, 8, 4, 24};
    const uint8_t g0 = sd_fuzz_u8(in), g1 = sd_fuzz_u8(in);
    s->layout = g0 & 1;
    s->dtype_mode = (g0 >> 1) & 3;
    s->embed = (g0 >> 3) & 1;
    s->bias = (g0 >> 4) & 1;
    s->fc_norm = (g0 >> 5) & 1;
    s->nbfc = (g0 >> 6) & 1;
    s->norm_output = (g0 >> 7) & 1;
    s->H = Hs[g1 & 3] ? Hs[g1 & 3] : Ht;
    s->nH = nHs[(g1 >> 2) & 3];
    s->nKV = nKVs[(g1 >> 2) & 3];
    s->hd_written = hds[(g1 >> 4) & 3] != 0;
    s->hd = s->hd_written ? hds[(g1 >> 4) & 3] : s->H / s->nH; /* every H is a multiple of every nH */
    if (s->hd % 2) FE_BAD(s, SPECDEC_ERR_FORMAT); /* RoPE rotates pairs */
    s->F = Fs[(g1 >> 6) & 3];
    const uint8_t g6 = sd_fuzz_u8(in);
    s->nbr = g6 & 3;
    if (s->nbr == 3) FE_BAD(s, SPECDEC_ERR_FORMAT); /* "yes": not a boolean */
    s->max_pos_small = (g6 >> 2) & 1;
    s->eps_i = (g6 >> 3) & 1;
    s->V = (g6 >> 4) & 1 ? FE_V + 1 : FE_V; /* 41: loads, no target fits it */
    s->tH = (g6 >> 5) & 1 ? Ht + 4 : Ht;
    s->misalign = (g6 >> 6) & 1;
    if ((g6 >> 7) & 1) {
        if (s->bias) s->qwen3 = 1, FE_BAD(s, SPECDEC_ERR_UNSUPPORTED);
        else s->bias_key_only = 1, FE_BAD(s, SPECDEC_ERR_MODEL_MISMATCH); /* "bias": true without fc.bias */
    }
    if (!s->embed && s->tH != s->H) FE_BAD(s, SPECDEC_ERR_MODEL_MISMATCH); /* must ship embed_tokens */
}

/* d2t / t2d: mode, size, the draft ids, one corruption. */
static void fe_decode_map(sd_fuzz_in *in, fe_spec *s, uint64_t *rng) {
    const uint8_t g2 = sd_fuzz_u8(in), g3 = sd_fuzz_u8(in);
    const int V = s->V;
    s->map = g2 & 3;
    s->Vd = s->map ? 1 + (g2 >> 2) % V : V;
    s->dv_key = s->map ? 1 : 0;
    int ids[FE_V + 2], all[FE_V + 2];
    for (int i = 0; i < V; i++) all[i] = i;
    for (int i = 0; i < s->Vd; i++) { /* a random subset, ascending (as the trainers write it) */
        const int j = i + (int)(fe_rng(rng) % (uint64_t)(V - i));
        const int x = all[i];
        all[i] = all[j];
        all[j] = x;
    }
    for (int i = 0; i < s->Vd; i++) ids[i] = all[i];
    for (int i = 1; i < s->Vd; i++)
        for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
            const int x = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = x;
        }
    if ((s->map & 1) && (g2 >> 7)) /* d2t need not be ascending: shuffle (t2d alone is) */
        for (int i = s->Vd - 1; i > 0; i--) {
            const int j = (int)(fe_rng(rng) % (uint64_t)(i + 1)), x = ids[i];
            ids[i] = ids[j];
            ids[j] = x;
        }
    s->d2t_len = s->Vd;
    s->t2d_len = V;
    s->d2t_dtype = "I64";
    s->t2d_dtype = "BOOL";
    memset(s->t2d, 0, sizeof s->t2d);
    for (int i = 0; i < s->Vd; i++) s->d2t[i] = ids[i] - i, s->t2d[ids[i]] = 1;
    const int k = (g3 >> 4) % s->Vd, has_d2t = s->map & 1, has_t2d = (s->map >> 1) & 1;
    switch (g3 & 15) {
    case 1: if (has_d2t) s->d2t[k] = INT64_MAX, FE_BAD(s, SPECDEC_ERR_FORMAT); break; /* + k overflows */
    case 2: if (has_d2t) s->d2t[k] = INT64_MIN, FE_BAD(s, SPECDEC_ERR_FORMAT); break;
    case 3: if (has_d2t) s->d2t[k] = -1 - k, FE_BAD(s, SPECDEC_ERR_FORMAT); break; /* target id -1 */
    case 4: if (has_d2t) s->d2t[k] = V - k, FE_BAD(s, SPECDEC_ERR_FORMAT); break;  /* target id V */
    case 5:
        if (has_d2t && k > 0) s->d2t[k] = ids[0] - k, FE_BAD(s, SPECDEC_ERR_FORMAT); /* a duplicate */
        break;
    case 6: if (has_t2d) s->t2d[ids[k]] = 0, FE_BAD(s, SPECDEC_ERR_FORMAT); break;
    case 7: /* one more id marked: fine beside d2t, a wrong count alone */
        if (has_t2d && s->Vd < V) {
            s->t2d[all[s->Vd]] = 1;
            if (!has_d2t) FE_BAD(s, SPECDEC_ERR_FORMAT);
        }
        break;
    case 8: if (has_d2t) s->d2t_dtype = "I32", FE_BAD(s, SPECDEC_ERR_MODEL_MISMATCH); break;
    case 9: if (has_t2d) s->t2d_dtype = "U8", FE_BAD(s, SPECDEC_ERR_MODEL_MISMATCH); break;
    case 10: if (has_d2t) s->d2t_len = s->Vd + 1, FE_BAD(s, SPECDEC_ERR_MODEL_MISMATCH); break;
    case 11: s->dv_key = 2, FE_BAD(s, SPECDEC_ERR_FORMAT); break; /* draft_vocab_size V + 1 */
    case 12: s->dv_key = 3, FE_BAD(s, SPECDEC_ERR_FORMAT); break; /* draft_vocab_size 0 */
    case 13: /* no map, fewer draft ids than the vocabulary */
        if (!s->map && V > 1) s->Vd = V - 1, s->dv_key = 1, FE_BAD(s, SPECDEC_ERR_MODEL_MISMATCH);
        break;
    case 14: if (has_t2d) s->t2d_len = V - 1, FE_BAD(s, SPECDEC_ERR_MODEL_MISMATCH); break;
    default: break;
    }
}

/* Capture ids: where they are written and their values; the ids the info must report. */
static void fe_decode_aux(sd_fuzz_in *in, fe_spec *s) {
    const uint8_t g4 = sd_fuzz_u8(in);
    s->aux_mode = g4 & 3; /* 0 none (default rule), 1 top level, 2 eagle_config, 3 both */
    if (s->layout == 1 && s->aux_mode == 2) s->aux_mode = 1; /* speculators: top level only */
    s->aux_n = (g4 >> 2) & 1 ? 2 : 3;
    s->eagle_cfg = (g4 >> 3) & 1 ? 1 : (g4 >> 4) & 1 ? 2 : 0;
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        const uint8_t b = sd_fuzz_u8(in);
        s->aux_kind[i] = b < 240 ? 0 : 1 + (b - 240) % 5; /* 0 an integer 0..10; else -1, 1025, 2.5, "2", null */
        s->aux_val[i] = b % 11;
        if (s->aux_kind[i]) ok = 0;
    }
    if (s->eagle_cfg == 1) FE_BAD(s, SPECDEC_ERR_UNSUPPORTED);
    if (s->eagle_cfg == 2 && s->layout == 0 && (s->aux_mode & 2)) FE_BAD(s, SPECDEC_ERR_FORMAT);
    if (s->eagle_cfg == 2 && !(s->layout == 0 && (s->aux_mode & 2))) s->eagle_cfg = 0; /* only written with ids */
    if (s->aux_mode && (!ok || s->aux_n != 3)) FE_BAD(s, SPECDEC_ERR_FORMAT);
    s->aux_expl = s->aux_mode != 0;
    for (int i = 0; i < 3; i++) s->aux_ids[i] = s->aux_expl ? s->aux_val[i] : -1;
    if (s->aux_mode == 2 && s->aux_ids[0] == 1) /* sglang's rule for eagle_config ids */
        for (int i = 0; i < 3; i++) s->aux_ids[i]++;
}

/* The decoder layer's keys that the head's forward does not implement. */
static void fe_decode_layer(sd_fuzz_in *in, fe_spec *s) {
    const uint8_t g5 = sd_fuzz_u8(in), g5b = sd_fuzz_u8(in);
    s->rope = g5 & 7;
    s->theta_i = g5b & 3;
    if (s->rope == 7) FE_BAD(s, SPECDEC_ERR_FORMAT), FE_BAD(s, SPECDEC_ERR_UNSUPPORTED); /* llama3, keys missing */
    if (s->rope == 4 && s->hd <= 2) FE_BAD(s, SPECDEC_ERR_FORMAT); /* dynamic: theta ^ (d / (d - 2)) */
    s->act = (g5 >> 3) & 3; /* silu, swish, gelu, gelu_pytorch_tanh */
    if (s->act >= 2) FE_BAD(s, SPECDEC_ERR_UNSUPPORTED); /* the head's MLP is SwiGLU */
    s->mlp_bias = (g5 >> 5) & 1;
    s->attn_bias = (g5 >> 6) & 1;
    s->layers2 = (g5 >> 7) & 1;
    if (s->mlp_bias || s->attn_bias || s->layers2) FE_BAD(s, SPECDEC_ERR_UNSUPPORTED);
}

/* The tensor list (before the corruption). */
static void fe_tensors(fe_spec *s, uint64_t *rng) {
    const char *pfx = s->layout ? "layers.0." : "midlayer.";
    const int64_t H = s->H, Q = (int64_t)s->nH * s->hd, KV = (int64_t)s->nKV * s->hd, tH = s->tH;
    s->nt = 0;
    fe_add(s, "", "fc.weight", fe_dtype(s, rng), H, 3 * tH, 0, 1.5f);
    if (s->bias) fe_add(s, "", "fc.bias", fe_dtype(s, rng), H, 0, 2, 0.2f);
    for (int i = 0; s->fc_norm && i < 3; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "fc_norm.%d.weight", i);
        fe_add(s, "", nm, fe_dtype(s, rng), tH, 0, 1, 0);
    }
    if (s->nbfc) fe_add(s, "", "input_norm.weight", fe_dtype(s, rng), 3 * tH, 0, 1, 0);
    fe_add(s, pfx, "input_layernorm.weight", fe_dtype(s, rng), H, 0, 1, 0);
    fe_add(s, pfx, "hidden_norm.weight", fe_dtype(s, rng), H, 0, 1, 0);
    fe_add(s, pfx, "self_attn.q_proj.weight", fe_dtype(s, rng), Q, 2 * H, 0, 2.0f);
    fe_add(s, pfx, "self_attn.k_proj.weight", fe_dtype(s, rng), KV, 2 * H, 0, 2.0f);
    fe_add(s, pfx, "self_attn.v_proj.weight", fe_dtype(s, rng), KV, 2 * H, 0, 1.0f);
    fe_add(s, pfx, "self_attn.o_proj.weight", fe_dtype(s, rng), H, Q, 0, 1.0f);
    fe_add(s, pfx, "post_attention_layernorm.weight", fe_dtype(s, rng), H, 0, 1, 0);
    fe_add(s, pfx, "mlp.gate_proj.weight", fe_dtype(s, rng), s->F, H, 0, 1.0f);
    fe_add(s, pfx, "mlp.up_proj.weight", fe_dtype(s, rng), s->F, H, 0, 1.0f);
    fe_add(s, pfx, "mlp.down_proj.weight", fe_dtype(s, rng), H, s->F, 0, 1.0f);
    fe_add(s, "", "norm.weight", fe_dtype(s, rng), H, 0, 1, 0);
    fe_add(s, "", "lm_head.weight", fe_dtype(s, rng), s->Vd, H, 0, 3.0f);
    if (s->embed) fe_add(s, "", "embed_tokens.weight", fe_dtype(s, rng), s->V, H, 2, 0.5f);
}

/* One tensor broken: missing, a wrong shape, a dtype that is no weight dtype. */
static void fe_corrupt(sd_fuzz_in *in, fe_spec *s) {
    const uint8_t which = sd_fuzz_u8(in), how = sd_fuzz_u8(in);
    if (!which) return;
    fe_tensor *t = &s->t[(which - 1) % s->nt];
    const int is_embed = !strcmp(t->name, "embed_tokens.weight");
    switch (how % 7) {
    case 0: /* missing: a head without embed_tokens is another valid head */
        if (is_embed) {
            s->embed = 0;
            if (s->tH != s->H) FE_BAD(s, SPECDEC_ERR_MODEL_MISMATCH);
        } else {
            FE_BAD(s, SPECDEC_ERR_MODEL_MISMATCH);
            /* without fc.weight or hidden_norm it is no head: the Llama loader says what it is */
            if (!strcmp(t->name, "fc.weight") || strstr(t->name, "hidden_norm"))
                FE_BAD(s, SPECDEC_ERR_UNSUPPORTED), FE_BAD(s, SPECDEC_ERR_FORMAT);
        }
        *t = s->t[--s->nt];
        return;
    case 1: t->shape[0]++; break;
    case 2: if (t->ndim == 2) t->shape[1]--; else t->shape[0]--; break;
    case 3: t->shape[t->ndim++] = 1; break; /* one more dimension */
    case 4: snprintf(t->dtype, sizeof t->dtype, "F64"); FE_BAD(s, SPECDEC_ERR_UNSUPPORTED); return;
    case 5: snprintf(t->dtype, sizeof t->dtype, "I32"); FE_BAD(s, SPECDEC_ERR_UNSUPPORTED); return;
    default: snprintf(t->dtype, sizeof t->dtype, "U8"); FE_BAD(s, SPECDEC_ERR_UNSUPPORTED); return;
    }
    FE_BAD(s, SPECDEC_ERR_MODEL_MISMATCH);
}

static void fe_decode(sd_fuzz_in *in, fe_spec *s, int Ht) {
    memset(s, 0, sizeof *s);
    uint64_t rng = 0x5eed;
    fe_decode_shape(in, s, Ht);
    fe_decode_map(in, s, &rng);
    fe_decode_aux(in, s);
    fe_decode_layer(in, s);
    const uint8_t w = sd_fuzz_u8(in);
    s->wseed = w;
    s->n_inject = (w >> 6) & 3;
    for (int i = 0; i < s->n_inject; i++)
        for (int j = 0; j < 3; j++) s->inject[i][j] = sd_fuzz_u8(in);
    fe_tensors(s, &rng);
    fe_corrupt(in, s);
}

/* ---- writing a generated head ----------------------------------------------------- */
static void fe_write_layer_keys(sd_fuzz_buf *b, const fe_spec *s) {
    static const char *const acts[4] = {"silu", "swish", "gelu", "gelu_pytorch_tanh"};
    static const char *const thetas[4] = {"10000.0", "500000.0", "100.0", "10000000.0"};
    fe_printf(b, "\"model_type\": \"%s\", \"hidden_size\": %d, \"intermediate_size\": %d, \"num_hidden_layers\": %d, ",
              s->qwen3 ? "qwen3" : "llama", s->H, s->F, s->layers2 ? 2 : 1);
    fe_printf(b, "\"num_attention_heads\": %d, \"num_key_value_heads\": %d, ", s->nH, s->nKV);
    if (s->hd_written) fe_printf(b, "\"head_dim\": %d, ", s->hd);
    fe_printf(b, "\"rms_norm_eps\": %s, \"vocab_size\": %d, \"max_position_embeddings\": %d, \"hidden_act\": \"%s\", ",
              s->eps_i ? "1e-30" : "1e-05", s->V, s->max_pos_small ? 8 : 2048, acts[s->act]);
    fe_printf(b, "\"tie_word_embeddings\": false, \"bos_token_id\": 1, \"eos_token_id\": 2, ");
    if (s->mlp_bias) fe_printf(b, "\"mlp_bias\": true, ");
    if (s->attn_bias) fe_printf(b, "\"attention_bias\": true, ");
    switch (s->rope) {
    case 1: fe_printf(b, "\"rope_theta\": %s, ", thetas[s->theta_i]); break;
    case 2:
        fe_printf(b, "\"rope_theta\": 500000.0, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                     "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 16}, ");
        break;
    case 3: fe_printf(b, "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}, "); break;
    case 4: fe_printf(b, "\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2.0}, "); break;
    case 5: fe_printf(b, "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}, "); break;
    case 6: fe_printf(b, "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 50000.0}, "); break;
    case 7: fe_printf(b, "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}, "); break;
    default: fe_printf(b, "\"rope_theta\": 10000.0, "); break;
    }
}

static void fe_write_ids(sd_fuzz_buf *b, const fe_spec *s) {
    sd_fuzz_buf_put(b, "[", 1);
    for (int i = 0; i < s->aux_n; i++) {
        static const char *const special[5] = {"-1", "1025", "2.5", "\"2\"", "null"};
        if (i) sd_fuzz_buf_put(b, ", ", 2);
        if (s->aux_kind[i]) fe_printf(b, "%s", special[s->aux_kind[i] - 1]);
        else fe_printf(b, "%d", s->aux_val[i]);
    }
    sd_fuzz_buf_put(b, "]", 1);
}

static void fe_write_config(sd_fuzz_buf *b, const fe_spec *s) {
    static const char *const nbr[4] = {"", "true", "false", "\"yes\""};
    fe_printf(b, "{\"architectures\": [\"%s\"], ", s->layout ? "Eagle3Speculator" : "LlamaForCausalLMEagle3");
    if (s->layout) {
        fe_printf(b, "\"speculators_model_type\": \"eagle3\", \"transformer_layer_config\": {");
        fe_write_layer_keys(b, s);
        b->len -= 2; /* the last ", " */
        fe_printf(b, "}, ");
    } else {
        fe_write_layer_keys(b, s);
    }
    fe_printf(b, "\"target_hidden_size\": %d", s->tH);
    if (s->dv_key) fe_printf(b, ", \"draft_vocab_size\": %d", s->dv_key == 1 ? s->Vd : s->dv_key == 2 ? s->V + 1 : 0);
    if (s->nbr) fe_printf(b, ", \"norm_before_residual\": %s", nbr[s->nbr]);
    if (s->norm_output) fe_printf(b, ", \"norm_output\": true");
    if (s->fc_norm) fe_printf(b, ", \"fc_norm\": true");
    if (s->nbfc) fe_printf(b, ", \"norm_before_fc\": true");
    if (s->bias || s->bias_key_only) fe_printf(b, ", \"bias\": true");
    if (s->aux_mode & 1) {
        fe_printf(b, ", \"eagle_aux_hidden_state_layer_ids\": ");
        fe_write_ids(b, s);
    }
    const int nested = s->layout == 0 && (s->aux_mode & 2);
    if (s->eagle_cfg == 2) {
        fe_printf(b, ", \"eagle_config\": 5");
    } else if (nested || s->eagle_cfg == 1 || s->layout == 0) {
        fe_printf(b, ", \"eagle_config\": {\"use_aux_hidden_state\": %s", s->eagle_cfg == 1 ? "false" : "true");
        if (nested) {
            fe_printf(b, ", \"eagle_aux_hidden_state_layer_ids\": ");
            fe_write_ids(b, s);
        }
        sd_fuzz_buf_put(b, "}", 1);
    }
    sd_fuzz_buf_put(b, "}\n", 2);
}

/* Element e of tensor t: small random values, special ones where the input injects them. */
static float fe_weight(const fe_spec *s, int ti, const fe_tensor *t, int64_t e, uint64_t *rng) {
    static const float special[8] = {NAN, INFINITY, -INFINITY, 1e30f, -1e30f, 0.0f, 1e-40f, 65504.0f};
    const float u = fe_unit(rng);
    for (int i = 0; i < s->n_inject; i++)
        if (s->inject[i][0] % s->nt == ti && s->inject[i][1] == e % 256) return special[s->inject[i][2] % 8];
    switch (t->kind) {
    case 0: return u * t->gain / sqrtf((float)(t->shape[1] > 0 ? t->shape[1] : 1));
    case 1: return 1.0f + 0.1f * u;
    default: return u * t->gain;
    }
}

/* A safetensors file of the spec's tensors, then d2t / t2d. */
static void fe_write_st(sd_fuzz_buf *out, const fe_spec *s) {
    sd_fuzz_buf hdr = {0}, data = {0};
    uint64_t rng = s->wseed * 0x9E3779B97F4A7C15ull + 1;
    fe_printf(&hdr, "{\"__metadata__\": {\"format\": \"pt\"}");
    for (int i = 0; i < s->nt + 2; i++) {
        const size_t begin = data.len;
        const fe_tensor *t = i < s->nt ? &s->t[i] : NULL;
        const char *name, *dt;
        int64_t shape[3] = {0, 0, 0};
        int ndim;
        if (t) {
            int64_t n = 1;
            for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
            for (int64_t e = 0; e < n; e++) fe_put_value(&data, t->dtype, fe_weight(s, i, t, e, &rng));
            name = t->name, dt = t->dtype, ndim = t->ndim;
            memcpy(shape, t->shape, sizeof shape);
        } else if (i == s->nt && (s->map & 1)) {
            for (int e = 0; e < s->d2t_len; e++) {
                const int64_t v = e < s->Vd ? s->d2t[e] : 0;
                if (!strcmp(s->d2t_dtype, "I64")) sd_fuzz_buf_put(&data, &v, 8);
                else { const int32_t w = (int32_t)v; sd_fuzz_buf_put(&data, &w, 4); }
            }
            name = "d2t", dt = s->d2t_dtype, ndim = 1, shape[0] = s->d2t_len;
        } else if (i == s->nt + 1 && (s->map & 2)) {
            sd_fuzz_buf_put(&data, s->t2d, (size_t)s->t2d_len);
            name = "t2d", dt = s->t2d_dtype, ndim = 1, shape[0] = s->t2d_len;
        } else {
            continue;
        }
        fe_printf(&hdr, ", \"%s\": {\"dtype\": \"%s\", \"shape\": [", name, dt);
        for (int d = 0; d < ndim; d++) fe_printf(&hdr, "%s%lld", d ? ", " : "", (long long)shape[d]);
        fe_printf(&hdr, "], \"data_offsets\": [%zu, %zu]}", begin, data.len);
    }
    sd_fuzz_buf_put(&hdr, "}", 1);
    while ((8 + hdr.len) % 8 != (s->misalign ? 1u : 0u)) sd_fuzz_buf_put(&hdr, " ", 1);
    const uint64_t hl = hdr.len;
    sd_fuzz_buf_put(out, &hl, 8);
    sd_fuzz_buf_put(out, hdr.p, hdr.len);
    sd_fuzz_buf_put(out, data.p, data.len);
    free(hdr.p);
    free(data.p);
}

/* ---- raw heads: complete a short data region ------------------------------------------ */
static void fe_fill_region(sd_fuzz_buf *f, size_t from, size_t begin, size_t end, const char *dt, uint64_t *rng) {
    const int is_float = !strcmp(dt, "F32") || !strcmp(dt, "F16") || !strcmp(dt, "BF16");
    if (!is_float && strcmp(dt, "BOOL")) return; /* zeros: I64 0 is the identity d2t */
    const size_t esz = ck_dtype_size(dt);
    sd_fuzz_buf v = {0};
    for (size_t o = begin; o + esz <= end; o += esz) {
        v.len = 0;
        if (is_float) fe_put_value(&v, dt, 0.3f * fe_unit(rng));
        else sd_fuzz_buf_put(&v, "\1", 1);
        for (size_t k = 0; k < esz; k++)
            if (o + k >= from) f->p[o + k] = v.p[k];
    }
    free(v.p);
}

/* The file: st[0..n) as given, completed up to the data size its header declares. */
static void fe_raw_file(sd_fuzz_buf *f, const uint8_t *st, size_t n, int fill, uint64_t seed) {
    sd_fuzz_buf_put(f, st, n);
    if (!fill || n < 8) return;
    uint64_t hl = 0;
    memcpy(&hl, st, 8);
    if (hl > n - 8) return;
    cJSON *h = cJSON_ParseWithLength((const char *)st + 8, (size_t)hl);
    if (!cJSON_IsObject(h)) {
        cJSON_Delete(h);
        return;
    }
    double end = 0;
    for (const cJSON *e = h->child; e; e = e->next) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        if (cJSON_IsArray(o) && cJSON_GetArraySize(o) == 2 && cJSON_IsNumber(o->child->next) &&
            o->child->next->valuedouble > end)
            end = o->child->next->valuedouble;
    }
    const size_t total = 8 + (size_t)hl + (end < FE_MAX_FILE ? (size_t)end : 0);
    if (end < FE_MAX_FILE && total > n) {
        const size_t given = n - 8 - (size_t)hl, base = 8 + (size_t)hl;
        while (f->len < total) sd_fuzz_buf_put(f, "\0", 1);
        uint64_t rng = seed;
        for (const cJSON *e = h->child; e; e = e->next) {
            const cJSON *o = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "dtype");
            if (!cJSON_IsArray(o) || cJSON_GetArraySize(o) != 2 || !cJSON_IsString(d)) continue;
            const double b0 = o->child->valuedouble, b1 = o->child->next->valuedouble;
            if (!(b0 >= 0 && b0 <= b1 && b1 <= end)) continue;
            fe_fill_region(f, base + given, base + (size_t)b0, base + (size_t)b1, d->valuestring, &rng);
        }
    }
    cJSON_Delete(h);
}

/* ---- load, engine, generate ------------------------------------------------------------- */
static void fe_write(const char *name, const void *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    sd_fuzz_require(ck_write_text(path, p, n) == 0);
}

typedef struct fe_gen {
    specdec_verify_mode mode;
    int tree, budget, n_ctx, use_mmap, second;
    int32_t widths[4], depth, n_draft, n_predict;
    float temp, top_p, min_p;
    int32_t top_k;
    uint64_t seed, prompt_seed;
    int32_t n_prompt;
} fe_gen;

static void fe_decode_gen(sd_fuzz_in *in, uint8_t b0, fe_gen *g) {
    memset(g, 0, sizeof *g);
    const uint8_t b1 = sd_fuzz_u8(in), b2 = sd_fuzz_u8(in), b3 = sd_fuzz_u8(in), b4 = sd_fuzz_u8(in);
    static const specdec_verify_mode modes[4] = {SPECDEC_VERIFY_GREEDY, SPECDEC_VERIFY_MATCH, SPECDEC_VERIFY_REJECTION,
                                                 SPECDEC_VERIFY_REJECTION};
    static const float temps[4] = {0.8f, 1.0f, 0.3f, 1.7f};
    g->mode = modes[(b0 >> 2) & 3];
    g->tree = (b0 >> 4) & 1;
    g->second = (b0 >> 5) & 1;
    g->budget = g->tree && ((b0 >> 6) & 1) ? 1 + b1 % 24 : 0;
    g->n_ctx = (b0 >> 7) & 1 ? 24 : 0;
    g->n_draft = 1 + b1 % 8;
    g->depth = 1 + b1 % 4;
    for (int d = 0; d < 4; d++) g->widths[d] = d < 3 ? 1 + ((b1 >> (2 + 2 * d)) & 3) : 1;
    g->n_predict = 1 + b2 % 24;
    g->use_mmap = !(b2 >> 7);
    g->temp = g->mode == SPECDEC_VERIFY_GREEDY ? 0.0f : temps[b3 & 3];
    g->top_k = (b3 >> 2) & 1 ? 5 : 0;
    g->top_p = (b3 >> 3) & 1 ? 0.9f : 1.0f;
    g->min_p = (b3 >> 4) & 1 ? 0.05f : 0.0f;
    g->seed = b3 >> 5;
    g->n_prompt = 1 + b4 % 20;
    g->prompt_seed = b4;
}

static specdec_generate_params fe_params(const fe_gen *g, int plain) {
    specdec_generate_params p = specdec_generate_default_params();
    p.n_predict = g->n_predict;
    p.temperature = g->temp;
    p.top_k = g->top_k;
    p.top_p = g->top_p;
    p.min_p = g->min_p;
    p.seed = g->seed;
    p.verify = g->mode;
    p.ignore_eos = 1;
    p.n_draft = plain ? 0 : g->n_draft;
    if (plain) {
        p.draft_method = SPECDEC_DRAFT_NONE;
        return p;
    }
    if (g->tree && specdec_generate_params_set_tree(&p, g->widths, g->depth) != SPECDEC_OK) {
        const int32_t w[2] = {2, 2};
        sd_fuzz_require(specdec_generate_params_set_tree(&p, w, 2) == SPECDEC_OK);
    }
    p.draft_nodes = g->budget;
    return p;
}

/* One generate call with the head and its check against a second run (aborts on a violation). */
static void fe_generate(specdec_engine *e, const fe_gen *g, uint64_t salt) {
    int32_t prompt[24], out[32], out2[32];
    uint64_t r = g->prompt_seed * 131 + salt;
    for (int32_t i = 0; i < g->n_prompt; i++) prompt[i] = (int32_t)(fe_rng(&r) % FE_V);
    const specdec_generate_params p = fe_params(g, 0);
    specdec_stats s;
    int32_t n = -1;
    specdec_status st = specdec_generate(e, prompt, g->n_prompt, &p, out, 32, &n, &s);
    if (st != SPECDEC_OK) fprintf(stderr, "generate with the head: %s\n", specdec_engine_last_error(e));
    sd_fuzz_require(st == SPECDEC_OK);
    sd_fuzz_require(n >= 1 && n <= g->n_predict && s.n_generated == n);
    for (int32_t i = 0; i < n; i++) sd_fuzz_require(out[i] >= 0 && out[i] < FE_V);
    sd_fuzz_require(s.draft_method == SPECDEC_DRAFT_EAGLE3);
    sd_fuzz_require(s.n_accepted >= 0 && s.n_accepted <= s.n_drafted && s.n_rounds >= 1 && s.n_rounds <= n);
    sd_fuzz_require(n <= s.n_rounds + s.n_accepted);
    if (!g->n_ctx && n >= 3) sd_fuzz_require(s.n_drafted > 0); /* the head drafted (room for it in 64) */
    /* the same engine again: plain decoding for greedy / match, the same run for rejection */
    const int plain = g->mode != SPECDEC_VERIFY_REJECTION;
    const specdec_generate_params q = plain ? fe_params(g, 1) : p;
    int32_t n2 = -1;
    st = specdec_generate(e, prompt, g->n_prompt, &q, out2, 32, &n2, NULL);
    sd_fuzz_require(st == SPECDEC_OK);
    if (n2 != n || memcmp(out, out2, (size_t)n * sizeof *out))
        fprintf(stderr, "eagle3 output (%d tokens) differs from %s (%d tokens)\n", (int)n,
                plain ? "plain decoding" : "a repeated run", (int)n2);
    sd_fuzz_require(n2 == n && !memcmp(out, out2, (size_t)n * sizeof *out));
}

static int fe_status_ok(specdec_status st, unsigned allowed) { return st != SPECDEC_OK && ((allowed >> st) & 1); }

/* Info of a loaded head against what was written (spec NULL: raw, only the invariants). */
static void fe_check_info(const specdec_model *m, const fe_spec *s) {
    specdec_model_info info;
    sd_fuzz_require(specdec_model_get_info(m, &info) == SPECDEC_OK);
    sd_fuzz_require(info.model_kind == SPECDEC_DRAFT_EAGLE3 && info.n_layers == 1);
    sd_fuzz_require(info.eagle3_draft_vocab >= 1 && info.eagle3_draft_vocab <= info.vocab_size);
    sd_fuzz_require(info.eagle3_target_hidden >= 1 && (info.eagle3_own_embedding & ~1) == 0);
    const int expl = info.eagle3_aux_layers[0] >= 0;
    for (int i = 0; i < 3; i++)
        sd_fuzz_require(expl ? info.eagle3_aux_layers[i] >= 0 && info.eagle3_aux_layers[i] <= 1025
                             : info.eagle3_aux_layers[i] == -1);
    if (!s) return;
    sd_fuzz_require(info.hidden_size == s->H && info.vocab_size == s->V && info.intermediate_size == s->F);
    sd_fuzz_require(info.n_heads == s->nH && info.n_kv_heads == s->nKV && info.head_dim == s->hd);
    sd_fuzz_require(info.eagle3_target_hidden == s->tH && info.eagle3_draft_vocab == s->Vd);
    sd_fuzz_require(info.eagle3_own_embedding == s->embed);
    for (int i = 0; i < 3; i++) sd_fuzz_require(info.eagle3_aux_layers[i] == s->aux_ids[i]);
}

/* Whether a generated head fits target ti (sd_eagle3_check_target's rules, from the spec). */
static int fe_fits(const fe_spec *s, int ti) {
    const ck_spec *t = &fe_tspec[ti];
    if (s->tH != t->H || s->V != t->V || (!s->embed && s->H != t->H)) return 0;
    const int L = t->L;
    int ids[3] = {2, L / 2, L - 3};
    if (s->aux_expl) memcpy(ids, s->aux_ids, sizeof ids);
    for (int i = 0; i < 3; i++)
        if (ids[i] < 0 || ids[i] > L || (i && ids[i] <= ids[i - 1])) return 0;
    return 1;
}

static int fe_run(const fe_gen *g, int ti, const fe_spec *spec) {
    specdec_model *m = NULL;
    specdec_model_params mp = specdec_model_default_params();
    mp.use_mmap = g->use_mmap;
    specdec_status st = specdec_model_load(g_dir, &mp, &m);
    if (spec && (st == SPECDEC_OK) != (spec->load_bad == 0))
        fprintf(stderr, "load: %s (%s), the head %s\n", specdec_status_string(st), specdec_last_error(),
                spec->load_bad ? "must be refused" : "is valid");
    if (st != SPECDEC_OK) {
        const unsigned allowed = spec ? spec->load_bad
                                      : 1u << SPECDEC_ERR_FORMAT | 1u << SPECDEC_ERR_UNSUPPORTED |
                                            1u << SPECDEC_ERR_MODEL_MISMATCH | 1u << SPECDEC_ERR_IO;
        if (!fe_status_ok(st, allowed))
            fprintf(stderr, "load refused with %s (%s); allowed: 0x%x\n", specdec_status_string(st), specdec_last_error(),
                    allowed);
        sd_fuzz_require(m == NULL && fe_status_ok(st, allowed) && specdec_last_error()[0] != '\0');
        return (int)st;
    }
    sd_fuzz_require(m != NULL && (!spec || spec->load_bad == 0));
    specdec_model_info info;
    sd_fuzz_require(specdec_model_get_info(m, &info) == SPECDEC_OK);
    if (info.model_kind != SPECDEC_DRAFT_EAGLE3) { /* raw input without the head's tensors: a model */
        sd_fuzz_require(!spec);
        specdec_model_free(m);
        return FE_NOT_HEAD;
    }
    fe_check_info(m, spec);
    specdec_engine *e = NULL;
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    sd_fuzz_require(specdec_engine_create(m, NULL, &ep, &e) == SPECDEC_ERR_MODEL_MISMATCH && !e);
    ep.n_ctx = g->n_ctx;
    st = specdec_engine_create(g_target[ti], m, &ep, &e);
    if (spec && (st == SPECDEC_OK) != fe_fits(spec, ti))
        fprintf(stderr, "engine: %s (%s), the head %s the target\n", specdec_status_string(st), specdec_last_error(),
                fe_fits(spec, ti) ? "fits" : "does not fit");
    if (st != SPECDEC_OK) {
        sd_fuzz_require(!e && st == SPECDEC_ERR_MODEL_MISMATCH && specdec_last_error()[0] != '\0');
        sd_fuzz_require(!spec || !fe_fits(spec, ti));
        specdec_model_free(m);
        return (int)st;
    }
    sd_fuzz_require(!spec || fe_fits(spec, ti));
    fe_generate(e, g, 0);
    if (g->second) { /* the engine's head again: a new sequence, another mode */
        fe_gen g2 = *g;
        g2.mode = g->mode == SPECDEC_VERIFY_GREEDY ? SPECDEC_VERIFY_REJECTION : SPECDEC_VERIFY_GREEDY;
        g2.temp = g2.mode == SPECDEC_VERIFY_GREEDY ? 0.0f : 0.9f;
        g2.tree = !g->tree;
        fe_generate(e, &g2, 7);
    }
    specdec_engine_free(e);
    specdec_model_free(m);
    return 0;
}

int sd_fuzz_one(const uint8_t *data, size_t size) {
    sd_fuzz_in in = {data, size};
    const uint8_t b0 = sd_fuzz_u8(&in);
    const int ti = (b0 >> 1) & 1;
    fe_gen g;
    fe_decode_gen(&in, b0, &g);
    sd_fuzz_buf cfg = {0}, st = {0};
    fe_spec *spec = NULL;
    if (b0 & 1) { /* raw: config text, NUL, fill byte, safetensors bytes */
        const uint8_t *nul = memchr(in.p, 0, in.n);
        const size_t clen = nul ? (size_t)(nul - in.p) : in.n;
        sd_fuzz_buf_put(&cfg, in.p, clen);
        in.p += clen, in.n -= clen;
        (void)sd_fuzz_u8(&in); /* the NUL */
        const uint8_t fill = sd_fuzz_u8(&in);
        fe_raw_file(&st, in.p, in.n, fill & 1, (uint64_t)fill + 1);
    } else {
        spec = malloc(sizeof *spec);
        sd_fuzz_require(spec != NULL);
        fe_decode(&in, spec, fe_tspec[ti].H);
        fe_write_config(&cfg, spec);
        fe_write_st(&st, spec);
    }
    fe_write("config.json", cfg.p ? (const void *)cfg.p : "", cfg.len);
    fe_write("model.safetensors", st.p ? (const void *)st.p : "", st.len);
    free(cfg.p);
    free(st.p);
    const int r = fe_run(&g, ti, spec);
    free(spec);
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", g_dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", g_dir);
    unlink(path);
    return r;
}

SD_FUZZ_DEFINE_ENTRY_WITH_INIT
