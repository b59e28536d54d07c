/* test_gpt_oss_load.c — the GPT-OSS checkpoint layouts the loader reads (models/
 * sd_model_load.c sd_load_fused_experts, models/sd_mxfp4.h), on the transformers-written
 * fixtures gpt_oss (fused experts, F32) and gpt_oss_mxfp4 (MXFP4 experts):
 *   1. MXFP4 decoding of chosen bytes: every code at scale 2^0, the smallest scale
 *      (subnormal BF16), overflow to inf, and a 0xFF scale refused;
 *   2. the loaded views: expert e's w_gate_up[r][c] == gate_up_proj[e][c][r] and
 *      w_down[h][i] == down_proj[e][i][h] (the [E, in, out] checkpoint transposed), biases
 *      rows of the stored [E, n] tensors; the MXFP4 experts are SD_MXFP4 views of the mapping
 *      whose rows decode (sd_cpu_mxfp4_row, sd_cpu_elem) to the BF16 dequantisation's floats;
 *   3. malformed checkpoints (copies of the fixtures with one tensor changed, written here):
 *      blocks / scales of another shape or dtype, a NaN scale, a missing tensor, MXFP4
 *      tensors without quantization_config — each refused with its status naming the tensor;
 *   4. allocation failure at every allocation of an MXFP4 load: OUT_OF_MEMORY, no leak;
 *   5. sd_weights_validate (what every runner checks at creation) on altered copies of the
 *      loaded description: sinks, router bias and expert tensors present exactly when the
 *      configuration says so, the clamped SwiGLU's limit, MXFP4 only with fused experts.
 * argv[1] = fixture directory, argv[2] = a scratch directory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sd_alloc.h"
#include "sd_cpu_dequant.h"
#include "sd_json.h"
#include "sd_model.h"
#include "sd_mxfp4.h"
#include "sd_safetensors.h"
#include "sd_test.h"
#include "specdec.h"

static const char *g_fx, *g_tmp;

/* ---- 1. decoding --------------------------------------------------------------------- */

static void decode_values(void) {
    static uint16_t lut[255 * 16];
    sd_mxfp4_lut(lut);
    uint8_t blocks[16 * 3], scales[3] = {127, 0, 254};
    for (int j = 0; j < 16; j++) /* codes 0..15, twice */
        blocks[j] = (uint8_t)((2 * j) % 16 | (((2 * j + 1) % 16) << 4));
    for (int j = 0; j < 16; j++) blocks[16 + j] = 0x21; /* 0.5 (low nibble first), 1.0 at 2^-127 */
    for (int j = 0; j < 16; j++) blocks[32 + j] = 0xF7; /* 6, -6 at 2^127: beyond BF16 */
    uint16_t out[96];
    SD_CHECK(sd_mxfp4_row(blocks, scales, 3, lut, out) == -1, "mxfp4: a valid row reported a NaN scale");
    { /* the CPU linear layers' decoding (sd_cpu_mxfp4_row, sd_cpu_elem) gives the same floats, bitwise */
        const sd_tensor t = {blocks, SD_MXFP4, 2, {1, 96}, scales};
        float f[96];
        sd_cpu_mxfp4_row(&t, 0, f);
        int diff = 0;
        for (int i = 0; i < 96; i++) {
            const float want = sd_bf16_to_f32(out[i]), e = sd_cpu_elem(&t, i);
            diff += memcmp(&f[i], &want, sizeof want) != 0 || memcmp(&e, &want, sizeof want) != 0;
        }
        SD_CHECK(diff == 0, "mxfp4: %d of 96 values decoded by sd_cpu_mxfp4_row / sd_cpu_elem differ from BF16's", diff);
        /* every (scale, code) pair: block s has scale s and the codes 0..15 twice */
        static uint8_t all_b[255 * 16], all_s[255];
        static uint16_t all_ref[255 * 32];
        static float all_f[255 * 32];
        for (int g = 0; g < 255; g++) {
            all_s[g] = (uint8_t)g;
            for (int j = 0; j < 16; j++) all_b[g * 16 + j] = (uint8_t)((2 * j) % 16 | (((2 * j + 1) % 16) << 4));
        }
        sd_mxfp4_row(all_b, all_s, 255, lut, all_ref);
        const sd_tensor ta = {all_b, SD_MXFP4, 2, {1, 255 * 32}, all_s};
        sd_cpu_mxfp4_row(&ta, 0, all_f);
        diff = 0;
        for (int i = 0; i < 255 * 32; i++) {
            const float want = sd_bf16_to_f32(all_ref[i]);
            diff += memcmp(&all_f[i], &want, sizeof want) != 0;
        }
        SD_CHECK(diff == 0, "mxfp4: %d of the 255 x 16 (scale, code) values differ from the BF16 table's", diff);
    }
    static const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    for (int i = 0; i < 32; i++)
        SD_CHECK(sd_bf16_to_f32(out[i]) == e2m1[i % 16] &&
                     signbit(sd_bf16_to_f32(out[i])) == signbit(e2m1[i % 16]),
                 "mxfp4: code %d at scale 2^0 decoded to %g", i % 16, (double)sd_bf16_to_f32(out[i]));
    SD_CHECK(sd_bf16_to_f32(out[32]) == ldexpf(1.0f, -128) && sd_bf16_to_f32(out[33]) == ldexpf(1.0f, -127),
             "mxfp4: 0.5 (low nibble) and 1 (high) at scale 2^-127 are BF16 subnormals: %g %g",
             (double)sd_bf16_to_f32(out[32]), (double)sd_bf16_to_f32(out[33]));
    SD_CHECK(isinf(sd_bf16_to_f32(out[64])) && sd_bf16_to_f32(out[64]) > 0 && isinf(sd_bf16_to_f32(out[65])) &&
                 sd_bf16_to_f32(out[65]) < 0,
             "mxfp4: 6 * 2^127 must overflow to +inf (and -6 to -inf), as transformers' ldexp in BF16");
    scales[1] = 0xFF;
    SD_CHECK(sd_mxfp4_row(blocks, scales, 3, lut, out) == 1, "mxfp4: scale 0xFF of block 1 not reported");
}

/* ---- 2. the loaded views against the stored tensors ---------------------------------- */

static specdec_model *load(const char *dir) {
    specdec_model *m = NULL;
    SD_CHECK(specdec_model_load(dir, NULL, &m) == SPECDEC_OK, "load %s: %s", dir, specdec_last_error());
    return m;
}

static const sd_st_tensor *stored(const specdec_model *m, const char *name, const uint8_t **data) {
    const sd_st_tensor *t = sd_st_find(&m->files[0]->hdr, name);
    SD_CHECK(t != NULL, "fixture lacks %s", name);
    *data = t ? sd_st_data(m->files[0], t) : NULL;
    return t;
}

static float f32_at(const uint8_t *p, int64_t i) {
    float v;
    memcpy(&v, p + 4 * i, 4);
    return v;
}


static void fused_views(void) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/gpt_oss", g_fx);
    specdec_model *m = load(dir);
    if (!m) return;
    const sd_config *c = &m->w.cfg;
    const int64_t E = c->n_experts, H = c->hidden_size, I = c->moe_intermediate;
    SD_CHECK(c->moe_fused && !c->experts_mxfp4 && c->attn_sinks && E == 4 && I == 16,
             "gpt_oss: fused experts, sinks, 4 experts of width 16");
    int bad = 0;
    for (int32_t l = 0; l < c->n_layers; l++) {
        char nm[160];
        const uint8_t *gu, *dn, *gub, *dnb;
        snprintf(nm, sizeof nm, "model.layers.%d.mlp.experts.gate_up_proj", (int)l);
        const sd_st_tensor *tgu = stored(m, nm, &gu);
        snprintf(nm, sizeof nm, "model.layers.%d.mlp.experts.down_proj", (int)l);
        const sd_st_tensor *tdn = stored(m, nm, &dn);
        snprintf(nm, sizeof nm, "model.layers.%d.mlp.experts.gate_up_proj_bias", (int)l);
        const sd_st_tensor *tgub = stored(m, nm, &gub);
        snprintf(nm, sizeof nm, "model.layers.%d.mlp.experts.down_proj_bias", (int)l);
        const sd_st_tensor *tdnb = stored(m, nm, &dnb);
        if (!tgu || !tdn || !tgub || !tdnb) return;
        const sd_layer *ly = &m->w.layers[l];
        SD_CHECK(ly->sinks.data && ly->router_bias.data, "gpt_oss layer %d: sinks and router bias loaded", (int)l);
        for (int64_t e = 0; e < E; e++) {
            const sd_expert *x = &ly->experts[e];
            const float *wgu = x->w_gate_up.data, *wd = x->w_down.data, *bgu = x->b_gate_up.data, *bd = x->b_down.data;
            SD_CHECK(x->w_gate_up.shape[0] == 2 * I && x->w_gate_up.shape[1] == H && x->w_down.shape[0] == H &&
                         x->w_down.shape[1] == I && !x->w_gate.data && !x->w_up.data,
                     "gpt_oss layer %d expert %d: view shapes", (int)l, (int)e);
            for (int64_t r = 0; r < 2 * I; r++) {
                for (int64_t k = 0; k < H; k++) bad += wgu[r * H + k] != f32_at(gu, (e * H + k) * 2 * I + r);
                bad += bgu[r] != f32_at(gub, e * 2 * I + r);
            }
            for (int64_t h = 0; h < H; h++) {
                for (int64_t i = 0; i < I; i++) bad += wd[h * I + i] != f32_at(dn, (e * I + i) * H + h);
                bad += bd[h] != f32_at(dnb, e * H + h);
            }
        }
    }
    SD_CHECK(bad == 0, "gpt_oss: %d expert values differ from the stored [E, in, out] tensors transposed", bad);
    specdec_model_free(m);

    snprintf(dir, sizeof dir, "%s/gpt_oss_mxfp4", g_fx);
    m = load(dir);
    if (!m) return;
    c = &m->w.cfg;
    SD_CHECK(c->experts_mxfp4 && c->glu_alpha == 1.5f && c->glu_limit == 2.0f, "gpt_oss_mxfp4: config read");
    static uint16_t lut[255 * 16];
    sd_mxfp4_lut(lut);
    bad = 0;
    const uint8_t *blk, *sc;
    const sd_st_tensor *tb = stored(m, "model.layers.1.mlp.experts.down_proj_blocks", &blk);
    const sd_st_tensor *ts = stored(m, "model.layers.1.mlp.experts.down_proj_scales", &sc);
    if (!tb || !ts) return;
    const int64_t H2 = c->hidden_size, I2 = c->moe_intermediate, G = I2 / 32;
    float *row = malloc((size_t)I2 * sizeof(float));
    int views = 0;
    for (int64_t e = 0; row && e < c->n_experts; e++) {
        const sd_tensor *wd = &m->w.layers[1].experts[e].w_down;
        /* an SD_MXFP4 view of the mapping itself: nothing copied or decoded at load */
        views += wd->dtype == SD_MXFP4 && wd->data == blk + (size_t)(e * H2 * G * 16) &&
                 wd->scales == sc + (size_t)(e * H2 * G) && wd->shape[0] == H2 && wd->shape[1] == I2;
        for (int64_t h = 0; h < H2; h++) {
            sd_cpu_mxfp4_row(wd, h, row);
            for (int64_t i = 0; i < I2; i++) {
                const int64_t r = e * H2 + h, g = i / 32, j = i % 32;
                const uint8_t byte = blk[(r * G + g) * 16 + j / 2];
                const float want = sd_bf16_to_f32(lut[sc[r * G + g] * 16 + ((j % 2) ? byte >> 4 : byte & 15)]);
                /* the BF16 dequantisation's float, bit for bit (the sign of a zero too) */
                bad += memcmp(&row[i], &want, sizeof want) != 0 || sd_cpu_elem(wd, h * I2 + i) != want;
            }
        }
    }
    free(row);
    SD_CHECK(views == c->n_experts, "gpt_oss_mxfp4: %d of %d experts' down_proj are SD_MXFP4 views of the mapping",
             views, (int)c->n_experts);
    SD_CHECK(bad == 0, "gpt_oss_mxfp4: %d decoded down_proj values differ from the stored blocks", bad);
    specdec_model_free(m);
}

/* ---- 3. malformed checkpoints ------------------------------------------------------- */

/* One tensor to write: name, dtype, shape and bytes. */
typedef struct wt {
    char name[160];
    const char *dtype;
    int ndim;
    int64_t shape[4];
    const uint8_t *data;
    size_t bytes;
} wt;

/* Writes a safetensors file of tensors t[0..n) in order. */
static void write_st(const char *path, const wt *t, int n) {
    size_t cap = 65536, len = 0, off = 0;
    char *hdr = malloc(cap);
    len += (size_t)snprintf(hdr + len, cap - len, "{");
    for (int i = 0; i < n; i++) {
        len += (size_t)snprintf(hdr + len, cap - len, "%s\"%s\": {\"dtype\": \"%s\", \"shape\": [", i ? ", " : "",
                                t[i].name, t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++)
            len += (size_t)snprintf(hdr + len, cap - len, "%s%lld", d ? ", " : "", (long long)t[i].shape[d]);
        len += (size_t)snprintf(hdr + len, cap - len, "], \"data_offsets\": [%zu, %zu]}", off, off + t[i].bytes);
        off += t[i].bytes;
    }
    len += (size_t)snprintf(hdr + len, cap - len, "}");
    FILE *f = fopen(path, "wb");
    SD_CHECK(f != NULL && len < cap, "cannot write %s", path);
    if (f) {
        uint64_t hl = len;
        fwrite(&hl, 8, 1, f);
        fwrite(hdr, 1, len, f);
        for (int i = 0; i < n; i++) fwrite(t[i].data, 1, t[i].bytes, f);
        fclose(f);
    }
    free(hdr);
}

typedef void (*mutate_fn)(wt *t, int *n, uint8_t *scratch);

/* A copy of fixture `name` in a scratch directory with its tensors passed through fn and, in
 * its config.json, the first `from` replaced by `to` (from NULL: unchanged); its load must fail
 * with `want` and a message containing `frag`. */
static void bad_copy(const char *label, const char *name, mutate_fn fn, const char *from, const char *to,
                     specdec_status want, const char *frag) {
    char src[4200], dir[4200], p[4400];
    snprintf(src, sizeof src, "%s/%s", g_fx, name);
    static int n_case = 0;
    snprintf(dir, sizeof dir, "%s/gptoss_bad%02d", g_tmp, n_case++);
    mkdir(dir, 0755);
    specdec_model *m = load(src);
    if (!m) return;
    const sd_st_header *h = &m->files[0]->hdr;
    wt *t = calloc((size_t)h->n_tensors + 1, sizeof *t);
    uint8_t *scratch = calloc(1, 1 << 20);
    int n = 0;
    for (int32_t i = 0; i < h->n_tensors; i++, n++) {
        const sd_st_tensor *s = &h->tensors[i];
        snprintf(t[n].name, sizeof t[n].name, "%s", s->name);
        t[n].dtype = sd_st_dtype_name(s->dtype);
        t[n].ndim = s->ndim;
        for (int d = 0; d < s->ndim; d++) t[n].shape[d] = s->shape[d];
        t[n].data = sd_st_data(m->files[0], s);
        t[n].bytes = (size_t)(s->end - s->begin);
    }
    fn(t, &n, scratch);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    write_st(p, t, n);
    char *text = NULL;
    size_t len = 0;
    snprintf(p, sizeof p, "%s/config.json", src);
    SD_CHECK(sd_read_file(p, 1 << 20, &text, &len, NULL) == SPECDEC_OK, "read %s", p);
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    const char *at = from && text ? strstr(text, from) : NULL;
    SD_CHECK(!from || at, "%s: config.json lacks '%s'", label, from);
    if (f && text && at) fprintf(f, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    else if (f && text) fputs(text, f);
    if (f) fclose(f);
    sd_free(text);
    specdec_model_free(m);
    specdec_model *bad = NULL;
    specdec_status st = specdec_model_load(dir, NULL, &bad);
    SD_CHECK(st == want && !bad, "%s: status %s, expected %s (%s)", label, specdec_status_string(st),
             specdec_status_string(want), specdec_last_error());
    SD_CHECK(strstr(specdec_last_error(), frag) != NULL, "%s: message lacks '%s': %s", label, frag,
             specdec_last_error());
    printf("refused %-28s %s: %s\n", label, specdec_status_string(st), specdec_last_error());
    specdec_model_free(bad);
    free(scratch);
    free(t);
}

static wt *find(wt *t, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) return &t[i];
    SD_CHECK(0, "no tensor %s", name);
    return &t[0];
}

static void mut_blocks_shape(wt *t, int *n, uint8_t *s) { /* [E, 2I, G, 16] -> [E, 2I, G, 8] */
    (void)s;
    wt *b = find(t, *n, "model.layers.0.mlp.experts.gate_up_proj_blocks");
    b->shape[3] = 8;
    b->bytes /= 2;
}
static void mut_scales_shape(wt *t, int *n, uint8_t *s) { /* [E, H, G] -> [E, H / 2, 2 G] */
    (void)s;
    wt *b = find(t, *n, "model.layers.1.mlp.experts.down_proj_scales");
    b->shape[1] /= 2;
    b->shape[2] *= 2;
}
static void mut_scales_ndim(wt *t, int *n, uint8_t *s) { /* [E, 2I, G] -> [E, 2I * G] */
    (void)s;
    wt *b = find(t, *n, "model.layers.0.mlp.experts.gate_up_proj_scales");
    b->shape[1] *= b->shape[2];
    b->ndim = 2;
}
static void mut_scales_dtype(wt *t, int *n, uint8_t *s) {
    (void)s;
    find(t, *n, "model.layers.1.mlp.experts.gate_up_proj_scales")->dtype = "I8";
}
static void mut_scale_nan(wt *t, int *n, uint8_t *s) {
    wt *b = find(t, *n, "model.layers.1.mlp.experts.down_proj_scales");
    memcpy(s, b->data, b->bytes);
    s[b->bytes - 1] = 0xFF;
    b->data = s;
}
static void mut_drop_blocks(wt *t, int *n, uint8_t *s) {
    (void)s;
    wt *b = find(t, *n, "model.layers.0.mlp.experts.down_proj_blocks");
    *b = t[--*n];
}
static void mut_none(wt *t, int *n, uint8_t *s) { (void)t, (void)n, (void)s; }
static void mut_fused_shape(wt *t, int *n, uint8_t *s) { /* [E, H, 2I] = [4, 32, 32] as [4, 16, 64] */
    (void)s;
    wt *b = find(t, *n, "model.layers.2.mlp.experts.gate_up_proj");
    b->shape[1] /= 2;
    b->shape[2] *= 2;
}
static void mut_fused_dtype(wt *t, int *n, uint8_t *s) { /* F32 bytes relabelled as I32 */
    (void)s;
    find(t, *n, "model.layers.1.mlp.experts.down_proj")->dtype = "I32";
}
static void mut_drop_sinks(wt *t, int *n, uint8_t *s) {
    (void)s;
    wt *b = find(t, *n, "model.layers.1.self_attn.sinks");
    *b = t[--*n];
}

static void malformed(void) {
    const specdec_status F = SPECDEC_ERR_FORMAT, M = SPECDEC_ERR_MODEL_MISMATCH;
    bad_copy("blocks shape", "gpt_oss_mxfp4", mut_blocks_shape, NULL, NULL, F,
             "'model.layers.0.mlp.experts.gate_up_proj_blocks': shape [4, 64, 2, 8]");
    bad_copy("scales shape", "gpt_oss_mxfp4", mut_scales_shape, NULL, NULL, F,
             "'model.layers.1.mlp.experts.down_proj_scales': shape [4, 32, 2]");
    bad_copy("scales ndim", "gpt_oss_mxfp4", mut_scales_ndim, NULL, NULL, F,
             "'model.layers.0.mlp.experts.gate_up_proj_scales': shape [4, 128]");
    bad_copy("scales dtype", "gpt_oss_mxfp4", mut_scales_dtype, NULL, NULL, F, "(I8) must be U8");
    bad_copy("NaN scale", "gpt_oss_mxfp4", mut_scale_nan, NULL, NULL, F,
             "'model.layers.1.mlp.experts.down_proj_scales': expert 3 row 63 block 0: scale 0xFF");
    bad_copy("blocks missing", "gpt_oss_mxfp4", mut_drop_blocks, NULL, NULL, M,
             "missing tensor 'model.layers.0.mlp.experts.down_proj_blocks'");
    bad_copy("no quantization_config", "gpt_oss_mxfp4", mut_none, "\"quantization_config\"", "\"not_read\"", M,
             "missing tensor 'model.layers.0.mlp.experts.gate_up_proj'");
    bad_copy("fused shape", "gpt_oss", mut_fused_shape, NULL, NULL, M,
             "'model.layers.2.mlp.experts.gate_up_proj': shape [4, 16, 64]");
    bad_copy("fused dtype", "gpt_oss", mut_fused_dtype, NULL, NULL, SPECDEC_ERR_UNSUPPORTED, "dtype I32");
    bad_copy("sinks missing", "gpt_oss", mut_drop_sinks, NULL, NULL, M,
             "missing tensor 'model.layers.1.self_attn.sinks'");
}

/* ---- 4. allocation failures ------------------------------------------------------------ */

static void alloc_failures(const char *name) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", g_fx, name);
    int n_fail = 0, ok = 0;
    for (long k = 0; k < 100000; k++) {
        specdec_model *m = NULL;
        sd_alloc_fail_after(k);
        specdec_status st = specdec_model_load(dir, NULL, &m);
        sd_alloc_fail_after(-1);
        if (st == SPECDEC_OK) {
            specdec_model_free(m);
            ok = 1;
            break;
        }
        n_fail++;
        SD_CHECK(st == SPECDEC_ERR_OUT_OF_MEMORY && !m, "%s: allocation %ld failed: %s: %s", name, k,
                 specdec_status_string(st), specdec_last_error());
    }
    SD_CHECK(ok && n_fail > 10, "%s: %d allocation points, success %d", name, n_fail, ok);
    printf("alloc-failure %s: %d failing points, all OUT_OF_MEMORY\n", name, n_fail);
}

/* ---- 5. the description's own validation ------------------------------------------------ */

static void expect_invalid(const char *label, const sd_weights *w, specdec_status want, const char *frag) {
    sd_errbuf eb = {{0}};
    specdec_status st = sd_weights_validate(w, &eb);
    SD_CHECK(st == want && strstr(eb.msg, frag), "%s: %s (%s), expected %s with '%s'", label,
             specdec_status_string(st), eb.msg, specdec_status_string(want), frag);
}

static void validate_views(void) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/gpt_oss", g_fx);
    specdec_model *m = load(dir);
    if (!m) return;
    sd_errbuf eb = {{0}};
    SD_CHECK(sd_weights_validate(&m->w, &eb) == SPECDEC_OK, "gpt_oss as loaded: %s", eb.msg);
    const int32_t nl = m->w.cfg.n_layers, E = m->w.cfg.n_experts;
    sd_layer *layers = calloc((size_t)nl, sizeof *layers);
    sd_expert *ex = calloc((size_t)E, sizeof *ex);
    sd_weights w = m->w;
    w.layers = layers;
    const sd_expert *orig = m->w.layers[1].experts;
#define RESET()                                                        \
    do {                                                               \
        w.cfg = m->w.cfg;                                              \
        memcpy(layers, m->w.layers, (size_t)nl * sizeof *layers);      \
        memcpy(ex, orig, (size_t)E * sizeof *ex);                      \
        layers[1].experts = ex;                                        \
    } while (0)
    RESET();
    SD_CHECK(sd_weights_validate(&w, &eb) == SPECDEC_OK, "gpt_oss copy: %s", eb.msg);
    w.cfg.attn_sinks = 0;
    expect_invalid("sinks without attn_sinks", &w, SPECDEC_ERR_MODEL_MISMATCH, "self_attn.sinks is present");
    RESET();
    layers[2].sinks.data = NULL;
    expect_invalid("attn_sinks without sinks", &w, SPECDEC_ERR_MODEL_MISMATCH, "layer 2: tensor self_attn.sinks missing");
    RESET();
    layers[0].router_bias.data = NULL;
    expect_invalid("no router bias", &w, SPECDEC_ERR_MODEL_MISMATCH, "layer 0: a router bias is missing");
    RESET();
    ex[3].w_gate = ex[3].w_down;
    expect_invalid("separate gate in fused experts", &w, SPECDEC_ERR_MODEL_MISMATCH,
                   "expert gate projection of expert 3 is present");
    RESET();
    ex[0].b_down.data = NULL;
    expect_invalid("no down bias", &w, SPECDEC_ERR_MODEL_MISMATCH, "expert down bias missing");
    RESET();
    ex[1].w_gate_up.shape[0] = m->w.cfg.moe_intermediate;
    expect_invalid("gate_up rows", &w, SPECDEC_ERR_MODEL_MISMATCH, "expert fused gate_up projection has shape");
    RESET();
    w.cfg.glu_limit = 0.0f;
    expect_invalid("limit 0", &w, SPECDEC_ERR_FORMAT, "swiglu_limit = 0");
    RESET();
    w.cfg.moe_fused = 0;
    w.cfg.experts_mxfp4 = 1;
    expect_invalid("mxfp4 unfused", &w, SPECDEC_ERR_FORMAT, "MXFP4 experts are only read in the fused layout");
#undef RESET
    free(ex);
    free(layers);
    specdec_model_free(m);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s FIXTURE_DIR SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    g_fx = argv[1];
    g_tmp = argv[2];
    mkdir(g_tmp, 0755);
    decode_values();
    fused_views();
    malformed();
    validate_views();
    alloc_failures("gpt_oss_mxfp4");
    alloc_failures("gpt_oss");
    return sd_test_done();
}
