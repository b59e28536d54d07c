/* sd_model_load.c — specdec_model_load and friends: a Hugging Face model directory
 * (config.json + model.safetensors, or shards listed by model.safetensors.index.json)
 * into struct specdec_model, the tensors named by the resolved configuration (models/
 * sd_family.h: fused projections become views of their row blocks).
 *
 * Files are mapped (or read) whole; tensors point into them, except tensors whose
 * bytes are misaligned for their dtype, which are copied into owned memory. Every
 * expected tensor is checked against the config (presence, dtype, shape) so that the
 * backends can trust the struct. Extra tensors (rotary_emb.inv_freq, ...) are ignored. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include "sd_alloc.h"
#include "sd_config.h"
#include "sd_eagle3_load.h"
#include "sd_ggml.h"
#include "sd_gguf.h"
#include "sd_gguf_load.h"
#include "sd_int4.h"
#include "sd_json.h"
#include "sd_math.h"
#include "sd_model.h"
#include "sd_mxfp4.h"
#include "sd_safetensors.h"

#define SD_CONFIG_MAX_BYTES (16u << 20)
#define SD_INDEX_MAX_BYTES (64u << 20)
#define SD_MAX_SHARDS 4096

/* One tensor of the checkpoint: which file holds it. */
typedef struct sd_entry {
    const char *name;
    int32_t file;
    const sd_st_tensor *t;
} sd_entry;

typedef struct sd_loader {
    specdec_model *m;
    int use_mmap;
    char index_path[4200]; /* "" when not sharded */
    sd_entry *entries;     /* sorted by name */
    size_t n_entries;
    int32_t cap_owned;
    uint8_t *used;         /* [n_entries]: 1 once loaded (a GGUF file must have no tensor left unread) */
    int mtp;               /* load the MTP layer as a one-layer draft model (specdec_model_params.mtp) */
    int32_t layer_base;    /* checkpoint index of layers[0]: 0, or num_hidden_layers for the MTP layer */
    char *vlm_names;       /* cfg.vlm_text: the language model's tensors' names without their prefix */
} sd_loader;

specdec_model_params specdec_model_default_params(void) {
    specdec_model_params p;
    memset(&p, 0, sizeof p);
    p.use_mmap = 1;
    return p;
}

static int sd_cmp_entry(const void *a, const void *b) {
    return strcmp(((const sd_entry *)a)->name, ((const sd_entry *)b)->name);
}

static const sd_entry *sd_find_entry(const sd_loader *L, const char *name) {
    sd_entry key = {name, 0, NULL};
    return L->n_entries ? bsearch(&key, L->entries, L->n_entries, sizeof key, sd_cmp_entry) : NULL;
}

static void sd_mark_used(const sd_loader *L, const sd_entry *e) {
    if (L->used) L->used[e - L->entries] = 1;
}

static int sd_is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int sd_cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Opens files[] from model.safetensors.index.json and checks that each entry of its
 * weight_map is in the shard it names. */
static specdec_status sd_open_sharded(sd_loader *L, const cJSON **wm_out, cJSON **root_out) {
    specdec_model *m = L->m;
    const char *ip = L->index_path;
    char *text = NULL;
    size_t len = 0;
    specdec_status st = sd_read_file(ip, SD_INDEX_MAX_BYTES, &text, &len, NULL);
    if (st) return st;
    cJSON *root = NULL;
    st = sd_json_parse(text, len, ip, &root, NULL);
    sd_free(text);
    if (st) return st;
    *root_out = root;
    const cJSON *wm = sd_json_member(root, "weight_map");
    if (!cJSON_IsObject(root) || !wm) return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: missing key 'weight_map'", ip);
    if (!cJSON_IsObject(wm)) return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: key 'weight_map' must be an object", ip);
    st = sd_json_check_unique(wm, "'weight_map' (a tensor listed twice)", ip, NULL);
    if (st) return st;
    size_t n = 0;
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e))
            return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: weight_map['%.128s'] must be a file name string", ip,
                           e->string);
        const char *s = e->valuestring;
        /* Shards are plain names inside the directory: no path traversal. */
        if (!s[0] || strchr(s, '/') || strchr(s, '\\') || !strcmp(s, ".") || !strcmp(s, "..") || strlen(s) > 255)
            return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: weight_map['%.128s'] = '%.128s' is not a plain file name",
                           ip, e->string, s);
        n++;
    }
    if (n == 0) return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: 'weight_map' is empty", ip);
    const char **names = sd_malloc(n * sizeof *names);
    if (!names) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", ip);
    size_t k = 0;
    for (const cJSON *e = wm->child; e; e = e->next) names[k++] = e->valuestring;
    qsort(names, n, sizeof *names, sd_cmp_str);
    size_t u = 0;
    for (k = 0; k < n; k++)
        if (u == 0 || strcmp(names[u - 1], names[k])) names[u++] = names[k];
    if (u > SD_MAX_SHARDS) {
        sd_free(names);
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: %zu shards, more than %d", ip, u, SD_MAX_SHARDS);
    }
    m->files = sd_calloc(u, sizeof *m->files);
    if (!m->files) {
        sd_free(names);
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", ip);
    }
    char p[4400];
    for (k = 0; k < u && !st; k++) {
        snprintf(p, sizeof p, "%s/%s", m->path, names[k]);
        if (!sd_is_file(p)) {
            st = sd_fail(NULL, SPECDEC_ERR_IO, "%s: shard '%s' named in the index is missing (%s)", ip, names[k], p);
            break;
        }
        st = sd_st_open(p, L->use_mmap, &m->files[k], NULL);
        if (!st) m->n_files++;
    }
    sd_free(names);
    *wm_out = wm;
    return st;
}

/* Builds the name-sorted table of all tensors of all files; a name in two files is an error. */
/* A vision-language checkpoint's tensor `name` as its language model's (cfg.vlm_text) into out: the names the
 * Hub's files carry (language_model.model.*, language_model.lm_head.*; Qwen-VL's: model.* and lm_head.* as a text
 * model's) and transformers 5's module names (model.language_model.*, lm_head.*) lose their prefix. 1, or -1 for
 * the vision tower's and the projector's tensors (never loaded), 0 when out is too small. */
static int sd_vlm_name(const char *name, char *out, size_t cap) {
    static const char *const vision[] = {"vision_tower.", "model.vision_tower.", "multi_modal_projector.",
                                         "model.multi_modal_projector.", "visual.", "model.visual."};
    for (size_t i = 0; i < sizeof vision / sizeof vision[0]; i++)
        if (!strncmp(name, vision[i], strlen(vision[i]))) return -1;
    static const char *const pre[][2] = {{"language_model.model.", "model."}, {"language_model.lm_head.", "lm_head."},
                                         {"model.language_model.", "model."}, {"lm_head.", "lm_head."},
                                         {"model.", "model."}};
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++) {
        const size_t n = strlen(pre[i][0]);
        if (!strncmp(name, pre[i][0], n)) return snprintf(out, cap, "%s%s", pre[i][1], name + n) < (int)cap;
    }
    return -1;
}

static specdec_status sd_build_entries(sd_loader *L) {
    specdec_model *m = L->m;
    const int vlm = m->w.cfg.vlm_text;
    size_t n = 0, bytes = 0;
    for (int32_t f = 0; f < m->n_files; f++) {
        n += (size_t)m->files[f]->hdr.n_tensors;
        for (int32_t i = 0; vlm && i < m->files[f]->hdr.n_tensors; i++)
            bytes += strlen(m->files[f]->hdr.tensors[i].name) + 1;
    }
    L->entries = sd_malloc((n ? n : 1) * sizeof *L->entries);
    if (vlm) L->vlm_names = sd_malloc(bytes ? bytes : 1);
    if (!L->entries || (vlm && !L->vlm_names))
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu tensors", m->path, n);
    size_t k = 0, used = 0;
    for (int32_t f = 0; f < m->n_files; f++)
        for (int32_t i = 0; i < m->files[f]->hdr.n_tensors; i++) {
            const sd_st_tensor *t = &m->files[f]->hdr.tensors[i];
            const char *name = t->name;
            if (vlm) { /* the language model's tensors under their text-model names; the rest left out */
                char *o = L->vlm_names + used;
                const int r = sd_vlm_name(t->name, o, bytes - used);
                if (r <= 0) continue;
                used += strlen(o) + 1;
                name = o;
            }
            L->entries[k++] = (sd_entry){name, f, t};
        }
    n = k;
    L->n_entries = n;
    qsort(L->entries, n, sizeof *L->entries, sd_cmp_entry);
    for (k = 1; k < n; k++)
        if (!strcmp(L->entries[k - 1].name, L->entries[k].name))
            return sd_fail(NULL, SPECDEC_ERR_FORMAT, "tensor '%s' is in two shards: %s and %s", L->entries[k].name,
                           m->files[L->entries[k - 1].file]->path, m->files[L->entries[k].file]->path);
    return SPECDEC_OK;
}

static specdec_status sd_check_index(sd_loader *L, const cJSON *wm) {
    specdec_model *m = L->m;
    for (const cJSON *e = wm->child; e; e = e->next) {
        char vn[512];
        if (m->w.cfg.vlm_text && sd_vlm_name(e->string, vn, sizeof vn) <= 0) continue; /* not the language model's */
        const sd_entry *en = sd_find_entry(L, m->w.cfg.vlm_text ? vn : e->string);
        const char *fn = NULL;
        if (en) {
            fn = strrchr(m->files[en->file]->path, '/');
            fn = fn ? fn + 1 : m->files[en->file]->path;
        }
        if (!en || strcmp(fn, e->valuestring) != 0)
            return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: tensor '%s' is mapped to shard '%s' but %s", L->index_path,
                           e->string, e->valuestring, en ? "is stored in another shard" : "that shard does not contain it");
    }
    return SPECDEC_OK;
}

static void sd_fmt_shape(char *buf, size_t cap, const sd_st_tensor *t) {
    size_t pos = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < t->ndim && pos < cap; i++)
        pos += (size_t)snprintf(buf + pos, cap - pos, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (pos < cap) snprintf(buf + pos, cap - pos, "]");
}

/* Loads `name` into *out, checking dtype and shape ([rows] when cols == 0, else
 * [rows, cols]). A missing tensor is an error when `required`, else *out stays absent. */
/* An FP8 matrix's scales ("<name>_scale_inv" for quantization_config "fp8", "<name>_scale" for
 * compressed-tensors: [ceil(rows / bm), ceil(cols / bn)], F32, BF16 or F16; the blocks by cfg.fp8_fmt:
 * cfg.fp8_block, [1, cols] per channel, [rows, cols] per tensor, whose one scale may also be stored as
 * [1] or a scalar) as the owned float array core/sd_weights.h SD_FP8 describes (bm, bn, then the
 * scales); every scale finite and > 0. */
static specdec_status sd_load_fp8_scales(sd_loader *L, const char *name, sd_tensor *w) {
    specdec_model *m = L->m;
    const int32_t fmt = m->w.cfg.fp8_fmt;
    const int64_t bm = fmt == SD_FP8_CT_CHANNEL ? 1 : fmt == SD_FP8_CT_TENSOR ? w->shape[0] : m->w.cfg.fp8_block[0];
    const int64_t bn = fmt == SD_FP8_CT_CHANNEL || fmt == SD_FP8_CT_TENSOR ? w->shape[1] : m->w.cfg.fp8_block[1];
    const int64_t sr = (w->shape[0] + bm - 1) / bm, sc = (w->shape[1] + bn - 1) / bn;
    char sname[200];
    snprintf(sname, sizeof sname, "%s%s", name, fmt == SD_FP8_BLOCK_INV ? "_scale_inv" : "_scale");
    const sd_entry *e = sd_find_entry(L, sname);
    const char *where = L->index_path[0] ? L->index_path : m->files[0]->path;
    if (!e)
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: missing tensor '%s' (the scales of float8 '%s')", where,
                       sname, name);
    const sd_st_file *f = m->files[e->file];
    const sd_st_tensor *t = e->t;
    sd_dtype dt;
    const specdec_status st = sd_st_weight_dtype(t, f->path, sname, &dt);
    if (st != SPECDEC_OK) return st;
    const int one = sr * sc == 1 && t->n_elements == 1 && t->ndim <= 1; /* a per-tensor scale as [1] or [] */
    if (!one && (t->ndim != 2 || t->shape[0] != sr || t->shape[1] != sc))
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH,
                       "%s: tensor '%s' must be [%lld, %lld] (weight_block_size [%lld, %lld] over [%lld, %lld])",
                       f->path, sname, (long long)sr, (long long)sc, (long long)bm, (long long)bn,
                       (long long)w->shape[0], (long long)w->shape[1]);
    if (m->n_owned >= L->cap_owned)
        return sd_fail(NULL, SPECDEC_ERR_INTERNAL, "%s: tensor '%s': owned-copy table full", f->path, sname);
    float *sc_out = sd_malloc((size_t)(2 + sr * sc) * sizeof(float));
    if (!sc_out) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: tensor '%s': out of memory", f->path, sname);
    m->owned[m->n_owned++] = sc_out;
    sc_out[0] = (float)bm, sc_out[1] = (float)bn;
    const uint8_t *src = sd_st_data(f, t);
    for (int64_t i = 0; i < sr * sc; i++) {
        float v;
        if (dt == SD_F32) memcpy(&v, src + 4 * i, 4);
        else {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            v = dt == SD_BF16 ? sd_bf16_to_f32(h) : sd_f16_to_f32(h);
        }
        if (!(v > 0.0f) || !isfinite(v))
            return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: tensor '%s': scale %lld is %g (must be finite, > 0)",
                           f->path, sname, (long long)i, (double)v);
        sc_out[2 + i] = v;
    }
    w->scales = (const uint8_t *)(const void *)sc_out;
    return SPECDEC_OK;
}

/* Owned memory of the model (freed with it): a slot of m->owned. */
static void *sd_own(sd_loader *L, size_t bytes) {
    specdec_model *m = L->m;
    if (m->n_owned >= L->cap_owned) return NULL;
    void *p = sd_calloc(1, bytes);
    if (p) m->owned[m->n_owned++] = p;
    return p;
}

/* One of a 4-bit projection's tensors, `<prefix>.<part>`: must exist with dtype dt and the given 2-D
 * (cols > 0) or 1-D shape; its bytes in *data. */
static specdec_status sd_int4_part(sd_loader *L, const char *prefix, const char *part, const sd_st_dtype *dts,
                                   int64_t rows, int64_t cols, const uint8_t **data, sd_st_dtype *dt) {
    char nm[200];
    snprintf(nm, sizeof nm, "%.180s.%s", prefix, part);
    const sd_entry *e = sd_find_entry(L, nm);
    const char *where = L->index_path[0] ? L->index_path : L->m->files[0]->path;
    if (!e) return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: missing tensor '%s' (of quantized '%s')", where, nm, prefix);
    const sd_st_file *f = L->m->files[e->file];
    const sd_st_tensor *t = e->t;
    int ok_dt = 0;
    for (int i = 0; i < 3; i++) ok_dt |= t->dtype == dts[i];
    if (!ok_dt)
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: tensor '%s': dtype %s (expected %s)", f->path, nm,
                       sd_st_dtype_name(t->dtype),
                       dts[0] == SD_ST_I32 ? "I32" : dts[0] == SD_ST_I64 ? "I64 or I32" : "F16, BF16 or F32");
    if (t->ndim != (cols ? 2 : 1) || t->shape[0] != rows || (cols && t->shape[1] != cols)) {
        char have[160];
        sd_fmt_shape(have, sizeof have, t);
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH,
                       "%s: tensor '%s': shape %s, but config.json and quantization_config imply [%lld%s%lld]", f->path,
                       nm, have, (long long)rows, cols ? ", " : "", (long long)(cols ? cols : 0));
    }
    *data = sd_st_data(f, t);
    if (dt) *dt = t->dtype;
    return SPECDEC_OK;
}

/* compressed-tensors' `<prefix>.weight_shape` (I64 or I32 [2]) must say [rows, cols]. */
static specdec_status sd_int4_ct_shape(sd_loader *L, const char *prefix, int64_t rows, int64_t cols) {
    static const sd_st_dtype ints[3] = {SD_ST_I64, SD_ST_I32, SD_ST_I64};
    const uint8_t *d = NULL;
    sd_st_dtype dt;
    SD_TRY(sd_int4_part(L, prefix, "weight_shape", ints, 2, 0, &d, &dt));
    int64_t v[2];
    for (int i = 0; i < 2; i++) {
        int32_t w;
        if (dt == SD_ST_I64) memcpy(&v[i], d + 8 * i, 8);
        else memcpy(&w, d + 4 * i, 4), v[i] = w;
    }
    if (v[0] != rows || v[1] != cols)
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: tensor '%s.weight_shape' is [%lld, %lld], but config.json "
                       "implies [%lld, %lld]", L->m->path, prefix, (long long)v[0], (long long)v[1], (long long)rows,
                       (long long)cols);
    return SPECDEC_OK;
}

/* `<prefix>.weight` [rows, cols] of a GPTQ / AWQ checkpoint stored as `<prefix>.qweight` etc., or of a
 * compressed-tensors one stored as `<prefix>.weight_packed` etc.
 * (models/sd_int4.h), repacked into an owned SD_INT4 tensor. */
static specdec_status sd_load_int4(sd_loader *L, const char *prefix, int64_t rows, int64_t cols, sd_tensor *out) {
    const sd_config *c = &L->m->w.cfg;
    const int awq = c->int4_fmt == SD_INT4_AWQ;
    const int32_t group = c->int4_group ? c->int4_group : (int32_t)cols;
    const int64_t G = sd_int4_groups(cols, group);
    if (rows % 8 || cols % 8 || (awq && cols % group))
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: quantized '%s' is [%lld, %lld]: both sides must be multiples "
                       "of 8%s", L->m->path, prefix, (long long)rows, (long long)cols,
                       awq ? " and the input a multiple of group_size" : "");
    static const sd_st_dtype i32[3] = {SD_ST_I32, SD_ST_I32, SD_ST_I32}, fl[3] = {SD_ST_F16, SD_ST_BF16, SD_ST_F32};
    const int64_t per = 32 / c->int4_bits; /* codes per int32 word */
    sd_int4_src s = {(sd_int4_fmt)c->int4_fmt, c->int4_bits, rows, cols, group, NULL, NULL, NULL, SD_F16, NULL};
    sd_st_dtype sdt;
    char nm[200];
    if (s.fmt == SD_INT4_CT) { /* compressed-tensors: scales [rows, G], zeros (asymmetric only) [rows / 8, G] */
        SD_TRY(sd_int4_ct_shape(L, prefix, rows, cols));
        SD_TRY(sd_int4_part(L, prefix, "weight_packed", i32, rows, cols / per, &s.qweight, NULL));
        SD_TRY(sd_int4_part(L, prefix, "weight_scale", fl, rows, G, &s.scales, &sdt));
        snprintf(nm, sizeof nm, "%.180s.weight_zero_point", prefix);
        const int has_zp = sd_find_entry(L, nm) != NULL;
        if (has_zp != c->int4_zero_points && c->int4_zero_points >= 0) /* never read asymmetric as symmetric */
            return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: tensor '%s' %s, but quantization_config says the "
                           "weights are %s", L->m->path, nm, has_zp ? "is present" : "is missing",
                           has_zp ? "symmetric" : "asymmetric");
        if (has_zp) SD_TRY(sd_int4_part(L, prefix, "weight_zero_point", i32, rows / per, G, &s.qzeros, NULL));
        snprintf(nm, sizeof nm, "%.180s.weight_g_idx", prefix);
        if (sd_find_entry(L, nm)) SD_TRY(sd_int4_part(L, prefix, "weight_g_idx", i32, cols, 0, &s.g_idx, NULL));
    } else {
        SD_TRY(sd_int4_part(L, prefix, "qweight", i32, awq ? cols : cols / per, awq ? rows / per : rows, &s.qweight, NULL));
        SD_TRY(sd_int4_part(L, prefix, "qzeros", i32, G, rows / per, &s.qzeros, NULL));
        SD_TRY(sd_int4_part(L, prefix, "scales", fl, G, rows, &s.scales, &sdt));
        snprintf(nm, sizeof nm, "%.180s.g_idx", prefix);
        if (!awq && sd_find_entry(L, nm)) SD_TRY(sd_int4_part(L, prefix, "g_idx", i32, cols, 0, &s.g_idx, NULL));
    }
    s.scales_dt = sdt == SD_ST_F32 ? SD_F32 : sdt == SD_ST_BF16 ? SD_BF16 : SD_F16;
    void *buf = sd_own(L, sd_int4_bytes(c->int4_bits, rows, cols, group));
    if (!buf)
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: quantized '%s': out of memory", L->m->path, prefix);
    char why[160];
    if (!sd_int4_repack(&s, buf, out, why, sizeof why))
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: quantized '%s': %s", L->m->path, prefix, why);
    L->m->n_params += rows * cols;
    return SPECDEC_OK;
}

/* A GGUF block-quantized matrix (sd_st_tensor.gguf_quant) repacked into an owned SD_INT4 / SD_INT8 tensor. */
static specdec_status sd_load_ggml(sd_loader *L, const sd_st_file *f, const sd_st_tensor *t, const char *name,
                                   int64_t rows, int64_t cols, sd_tensor *out) {
    const uint32_t type = t->gguf_quant - 1;
    if (!cols || t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols) {
        char have[160];
        sd_fmt_shape(have, sizeof have, t);
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: tensor '%s' (%s): shape %s, but the metadata implies "
                       "[%lld, %lld]", f->path, name, sd_ggml_type_info_of(type).name, have, (long long)rows,
                       (long long)cols);
    }
    void *buf = sd_own(L, sd_ggml_bytes(type, rows, cols));
    if (!buf) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: tensor '%s': out of memory", f->path, name);
    char why[160];
    if (!sd_ggml_repack(type, sd_st_data(f, t), rows, cols, 0, buf, out, why, sizeof why))
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: tensor '%s' (%s): %s", f->path, name,
                       sd_ggml_type_info_of(type).name, why);
    L->m->n_params += rows * cols;
    return SPECDEC_OK;
}

static specdec_status sd_get_tensor(sd_loader *L, const char *name, int64_t rows, int64_t cols, int required,
                                    const char *why, sd_tensor *out) {
    specdec_model *m = L->m;
    memset(out, 0, sizeof *out);
    const sd_entry *e = sd_find_entry(L, name);
    const size_t nl = strlen(name);
    if (!e && m->w.cfg.int4_fmt && cols && nl > 7 && nl < 190 && !strcmp(name + nl - 7, ".weight")) {
        char prefix[200], qn[200];
        snprintf(prefix, sizeof prefix, "%.*s", (int)(nl - 7), name);
        snprintf(qn, sizeof qn, "%.180s.%s", prefix, m->w.cfg.int4_fmt == SD_INT4_CT ? "weight_packed" : "qweight");
        if (sd_find_entry(L, qn)) return sd_load_int4(L, prefix, rows, cols, out);
    }
    if (!e) {
        if (!required) return SPECDEC_OK;
        const char *where = L->index_path[0] ? L->index_path : m->files[0]->path;
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: missing tensor '%s'%s%s", where, name, why ? " " : "",
                       why ? why : "");
    }
    const sd_st_file *f = m->files[e->file];
    const sd_st_tensor *t = e->t;
    sd_mark_used(L, e);
    if (t->gguf_quant) return sd_load_ggml(L, f, t, name, rows, cols, out);
    sd_dtype dt;
    const int fp8 = t->dtype == SD_ST_F8_E4M3 && m->w.cfg.fp8_fmt;
    specdec_status st = fp8 ? SPECDEC_OK : sd_st_weight_dtype(t, f->path, name, &dt);
    if (st != SPECDEC_OK) return st;
    if (fp8 && !cols)
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: tensor '%s' is float8_e4m3fn, but only matrices may be",
                       f->path, name);
    if (fp8) dt = SD_FP8;
    int want_nd = cols ? 2 : 1;
    if (t->ndim != want_nd || t->shape[0] != rows || (cols && t->shape[1] != cols)) {
        char have[160], want[64];
        sd_fmt_shape(have, sizeof have, t);
        if (cols) snprintf(want, sizeof want, "[%lld, %lld]", (long long)rows, (long long)cols);
        else snprintf(want, sizeof want, "[%lld]", (long long)rows);
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: tensor '%s': shape %s, but config.json implies %s",
                       f->path, name, have, want);
    }
    const uint8_t *p = sd_st_data(f, t);
    size_t bytes = (size_t)(t->end - t->begin);
    size_t esz = sd_dtype_size(dt);
    if ((uintptr_t)p % esz) {
        /* safetensors does not promise alignment: copy rather than read misaligned. */
        if (m->n_owned >= L->cap_owned)
            return sd_fail(NULL, SPECDEC_ERR_INTERNAL, "%s: tensor '%s': owned-copy table full", f->path, name);
        void *copy = sd_malloc(bytes);
        if (!copy)
            return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: tensor '%s': out of memory copying %zu bytes",
                           f->path, name, bytes);
        memcpy(copy, p, bytes);
        m->owned[m->n_owned++] = copy;
        p = copy;
    }
    out->data = p;
    out->dtype = dt;
    out->ndim = want_nd;
    out->shape[0] = rows;
    out->shape[1] = cols ? cols : 1;
    m->n_params += (int64_t)t->n_elements;
    return fp8 ? sd_load_fp8_scales(L, name, out) : SPECDEC_OK;
}

/* Row blocks [r0, r0 + rows) of a loaded 2-D tensor as a view (a fused projection). */
static sd_tensor sd_row_view(const sd_tensor *t, int64_t r0, int64_t rows) {
    sd_tensor v = *t;
    v.data = (const char *)t->data + (size_t)(r0 * t->shape[1]) * sd_dtype_size(t->dtype);
    v.shape[0] = rows;
    return v;
}

/* A fused projection is split into row views; an FP8 one's block scales are not (yet). */
static specdec_status sd_quant_fused_refused(const sd_loader *L, int32_t l, const char *suffix) {
    return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: layer %d: float8 fused projection '%s' is not supported",
                   L->m->path, (int)l, suffix);
}

/* Rows [r0, r0 + rows) of a loaded 2-D tensor as a view; an SD_INT4 / SD_INT8 one (GPTQ / AWQ / GGUF Phi-3's
 * fused qkv / gate_up) gets an owned copy of its groups' description starting at row r0. */
static specdec_status sd_fused_view(sd_loader *L, const sd_tensor *t, int64_t r0, int64_t rows, sd_tensor *out) {
    if (!sd_dtype_is_int(t->dtype)) {
        *out = sd_row_view(t, r0, rows);
        return SPECDEC_OK;
    }
    const sd_int4_meta *q = sd_int4_meta_of(t);
    sd_int4_meta *v = sd_own(L, sizeof *v);
    if (!v) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory for a fused view", L->m->path);
    const int64_t G = q->n_groups;
    *v = *q;
    v->scale = q->scale + r0 * G, v->zero = q->zero + r0 * G, v->bias = q->bias ? q->bias + r0 * G : NULL;
    *out = *t;
    out->data = (const uint8_t *)t->data + (size_t)r0 * sd_int_row_bytes(t->dtype, t->shape[1]);
    out->shape[0] = rows;
    out->scales = (const uint8_t *)(const void *)v;
    return SPECDEC_OK;
}

/* Loads "model.layers.<l>.<suffix>" into *out (required unless req == 0). */
static specdec_status sd_layer_tensor(sd_loader *L, int32_t l, const char *suffix, int64_t rows, int64_t cols, int req,
                                      sd_tensor *out) {
    char nm[160];
    snprintf(nm, sizeof nm, "model.layers.%d.%s", (int)(l + L->layer_base), suffix);
    return sd_get_tensor(L, nm, rows, cols, req, NULL, out);
}

/* Element (r, c) of a loaded 2-D tensor in float (F32 / F16 / BF16, or the integer codes a GGUF block type
 * was repacked into: (q - zero) x scale - bias). */
static float sd_tensor_value(const sd_tensor *t, int64_t r, int64_t c) {
    const int64_t cols = t->shape[1], i = r * cols + c;
    switch (t->dtype) {
    case SD_F32: return ((const float *)t->data)[i];
    case SD_F16: return sd_f16_to_f32(((const uint16_t *)t->data)[i]);
    case SD_BF16: return sd_bf16_to_f32(((const uint16_t *)t->data)[i]);
    default: break;
    }
    return sd_int_value(t, r, c);
}

/* llama.cpp's converter splits DeepSeek's kv_b_proj for its absorbed attention: attn_k_b [heads, kv_lora, nope]
 * (each head's key part transposed) and attn_v_b [heads, v, kv_lora], read here as the 2-D [heads x kv_lora,
 * nope] and [heads x v, kv_lora] (models/sd_gguf_load.c). kv_b_proj [heads x (nope + v), kv_lora] is put back
 * together in F32: head h's rows are its key part (k_b[h] transposed), then its value part. */
static specdec_status sd_load_kv_b_split(sd_loader *L, int32_t l, sd_tensor *out) {
    const sd_config *c = &L->m->w.cfg;
    const int64_t NH = c->n_heads, KL = c->kv_lora_rank, N = c->qk_nope_dim, V = c->v_head_dim;
    sd_tensor kb, vb;
    SD_TRY(sd_layer_tensor(L, l, "self_attn.k_b_proj.weight", NH * KL, N, 1, &kb));
    SD_TRY(sd_layer_tensor(L, l, "self_attn.v_b_proj.weight", NH * V, KL, 1, &vb));
    if (kb.dtype == SD_FP8 || vb.dtype == SD_FP8 || kb.dtype == SD_MXFP4 || vb.dtype == SD_MXFP4)
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: layer %d: attn_k_b / attn_v_b of this dtype", L->m->path,
                       (int)l);
    float *w = sd_own(L, (size_t)(NH * (N + V) * KL) * sizeof(float));
    if (!w) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory for layer %d's kv_b", L->m->path, (int)l);
    for (int64_t h = 0; h < NH; h++) {
        float *rows = w + (size_t)(h * (N + V) * KL);
        for (int64_t i = 0; i < N; i++)
            for (int64_t k = 0; k < KL; k++) rows[i * KL + k] = sd_tensor_value(&kb, h * KL + k, i);
        for (int64_t j = 0; j < V; j++)
            for (int64_t k = 0; k < KL; k++) rows[(N + j) * KL + k] = sd_tensor_value(&vb, h * V + j, k);
    }
    *out = (sd_tensor){w, SD_F32, 2, {NH * (N + V), KL}, NULL};
    return SPECDEC_OK;
}

/* DeepSeek's latent attention tensors of layer l (cfg.mla, core/sd_weights.h). */
static specdec_status sd_load_mla(sd_loader *L, int32_t l, sd_layer *ly) {
    const sd_config *c = &L->m->w.cfg;
    const int64_t H = c->hidden_size, Q = (int64_t)c->n_heads * c->head_dim, QL = c->q_lora_rank;
    const int64_t KL = c->kv_lora_rank, R = sd_cfg_rope_dim(c);
    if (QL) {
        SD_TRY(sd_layer_tensor(L, l, "self_attn.q_a_proj.weight", QL, H, 1, &ly->wq_a));
        if (c->attention_bias) SD_TRY(sd_layer_tensor(L, l, "self_attn.q_a_proj.bias", QL, 0, 1, &ly->bq_a));
        SD_TRY(sd_layer_tensor(L, l, "self_attn.q_a_layernorm.weight", QL, 0, 1, &ly->q_a_norm));
        SD_TRY(sd_layer_tensor(L, l, "self_attn.q_b_proj.weight", Q, QL, 1, &ly->wq_b));
    } else {
        SD_TRY(sd_layer_tensor(L, l, "self_attn.q_proj.weight", Q, H, 1, &ly->wq));
    }
    SD_TRY(sd_layer_tensor(L, l, "self_attn.kv_a_proj_with_mqa.weight", KL + R, H, 1, &ly->wkv_a));
    if (c->attention_bias) SD_TRY(sd_layer_tensor(L, l, "self_attn.kv_a_proj_with_mqa.bias", KL + R, 0, 1, &ly->bkv_a));
    SD_TRY(sd_layer_tensor(L, l, "self_attn.kv_a_layernorm.weight", KL, 0, 1, &ly->kv_a_norm));
    char split[160];
    snprintf(split, sizeof split, "model.layers.%d.self_attn.k_b_proj.weight", (int)(l + L->layer_base));
    if (sd_find_entry(L, split)) SD_TRY(sd_load_kv_b_split(L, l, &ly->wkv_b));
    else SD_TRY(sd_layer_tensor(L, l, "self_attn.kv_b_proj.weight", (int64_t)c->n_heads * (c->qk_nope_dim + c->v_head_dim),
                                KL, 1, &ly->wkv_b));
    SD_TRY(sd_layer_tensor(L, l, "self_attn.o_proj.weight", H, (int64_t)c->n_heads * c->v_head_dim, 1, &ly->wo));
    if (c->o_bias) SD_TRY(sd_layer_tensor(L, l, "self_attn.o_proj.bias", H, 0, 1, &ly->bo));
    return SPECDEC_OK;
}

/* The attention block's tensors of layer l: q/k/v (fused qkv_proj split into views),
 * their biases, q/k norms, o and its bias, as the configuration says. */
static specdec_status sd_load_attention(sd_loader *L, int32_t l, sd_layer *ly) {
    const sd_config *c = &L->m->w.cfg;
    const int64_t H = c->hidden_size, D = c->head_dim;
    const int64_t Q = (int64_t)c->n_heads * c->head_dim, KV = (int64_t)c->n_kv_heads * c->head_dim;
    if (c->mla) return sd_load_mla(L, l, ly);
    if (c->fused_qkv) {
        sd_tensor qkv;
        SD_TRY(sd_layer_tensor(L, l, "self_attn.qkv_proj.weight", Q + 2 * KV, H, 1, &qkv));
        if (qkv.dtype == SD_FP8) return sd_quant_fused_refused(L, l, "self_attn.qkv_proj.weight");
        SD_TRY(sd_fused_view(L, &qkv, 0, Q, &ly->wq));
        SD_TRY(sd_fused_view(L, &qkv, Q, KV, &ly->wk));
        SD_TRY(sd_fused_view(L, &qkv, Q + KV, KV, &ly->wv));
    } else {
        SD_TRY(sd_layer_tensor(L, l, "self_attn.q_proj.weight", Q, H, 1, &ly->wq));
        SD_TRY(sd_layer_tensor(L, l, "self_attn.k_proj.weight", KV, H, 1, &ly->wk));
        SD_TRY(sd_layer_tensor(L, l, "self_attn.v_proj.weight", KV, H, 1, &ly->wv));
    }
    if (c->attention_bias) {
        SD_TRY(sd_layer_tensor(L, l, "self_attn.q_proj.bias", Q, 0, 1, &ly->bq));
        SD_TRY(sd_layer_tensor(L, l, "self_attn.k_proj.bias", KV, 0, 1, &ly->bk));
        SD_TRY(sd_layer_tensor(L, l, "self_attn.v_proj.bias", KV, 0, 1, &ly->bv));
    }
    if (c->qk_norm || c->qk_norm_whole) { /* per head [head_dim], or the whole projection */
        SD_TRY(sd_layer_tensor(L, l, "self_attn.q_norm.weight", c->qk_norm ? D : Q, 0, 1, &ly->q_norm));
        SD_TRY(sd_layer_tensor(L, l, "self_attn.k_norm.weight", c->qk_norm ? D : KV, 0, 1, &ly->k_norm));
    }
    SD_TRY(sd_layer_tensor(L, l, "self_attn.o_proj.weight", H, Q, 1, &ly->wo));
    if (c->o_bias) SD_TRY(sd_layer_tensor(L, l, "self_attn.o_proj.bias", H, 0, 1, &ly->bo));
    if (c->attn_sinks) SD_TRY(sd_layer_tensor(L, l, "self_attn.sinks", c->n_heads, 0, 1, &ly->sinks));
    return SPECDEC_OK;
}

/* Tensor names of a MoE family's router and experts (printf formats over the expert id),
 * as the checkpoints on the Hub store them (transformers 5 saves this layout too). */
typedef struct sd_moe_names {
    sd_arch arch;
    const char *router, *gate, *up, *down;
    const char *stacked; /* every expert in one tensor per projection under this prefix (Granite-MoE) */
} sd_moe_names;

static const sd_moe_names sd_moe_table[] = {
    {SD_ARCH_MIXTRAL, "block_sparse_moe.gate.weight", "block_sparse_moe.experts.%d.w1.weight",
     "block_sparse_moe.experts.%d.w3.weight", "block_sparse_moe.experts.%d.w2.weight", NULL},
    {SD_ARCH_QWEN3_MOE, "mlp.gate.weight", "mlp.experts.%d.gate_proj.weight", "mlp.experts.%d.up_proj.weight",
     "mlp.experts.%d.down_proj.weight", NULL},
    {SD_ARCH_QWEN2_MOE, "mlp.gate.weight", "mlp.experts.%d.gate_proj.weight", "mlp.experts.%d.up_proj.weight",
     "mlp.experts.%d.down_proj.weight", NULL},
    {SD_ARCH_GPT_OSS, "mlp.router.weight", NULL, NULL, NULL, NULL}, /* fused: sd_load_fused_experts */
    {SD_ARCH_OLMOE, "mlp.gate.weight", "mlp.experts.%d.gate_proj.weight", "mlp.experts.%d.up_proj.weight",
     "mlp.experts.%d.down_proj.weight", NULL},
    /* stacked input_linear / output_linear; a GGUF's experts come one by one (models/sd_gguf_load.c) */
    {SD_ARCH_GRANITE_MOE, "block_sparse_moe.router.layer.weight", "mlp.experts.%d.gate_proj.weight",
     "mlp.experts.%d.up_proj.weight", "mlp.experts.%d.down_proj.weight", "block_sparse_moe"},
    {SD_ARCH_GLM4_MOE, "mlp.gate.weight", "mlp.experts.%d.gate_proj.weight", "mlp.experts.%d.up_proj.weight",
     "mlp.experts.%d.down_proj.weight", NULL},
    {SD_ARCH_DEEPSEEK_V3, "mlp.gate.weight", "mlp.experts.%d.gate_proj.weight", "mlp.experts.%d.up_proj.weight",
     "mlp.experts.%d.down_proj.weight", NULL},
    {SD_ARCH_DEEPSEEK_V2, "mlp.gate.weight", "mlp.experts.%d.gate_proj.weight", "mlp.experts.%d.up_proj.weight",
     "mlp.experts.%d.down_proj.weight", NULL},
};

/* Layer l's shared expert and its gate (Qwen2-MoE: cfg.shared_expert_intermediate); GLM-4.5's
 * ungated n_shared_experts live under mlp.shared_experts (cfg.shared_ungated). */
static specdec_status sd_load_shared_expert(sd_loader *L, int32_t l, sd_layer *ly) {
    const sd_config *c = &L->m->w.cfg;
    const int64_t H = c->hidden_size, S = c->shared_expert_intermediate;
    const char *pre = c->shared_ungated ? "mlp.shared_experts" : "mlp.shared_expert";
    char nm[64];
    sd_expert *sh = sd_own(L, sizeof *sh);
    if (!sh) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", L->m->path);
    ly->shared = sh;
    snprintf(nm, sizeof nm, "%s.gate_proj.weight", pre);
    SD_TRY(sd_layer_tensor(L, l, nm, S, H, 1, &sh->w_gate));
    snprintf(nm, sizeof nm, "%s.up_proj.weight", pre);
    SD_TRY(sd_layer_tensor(L, l, nm, S, H, 1, &sh->w_up));
    snprintf(nm, sizeof nm, "%s.down_proj.weight", pre);
    SD_TRY(sd_layer_tensor(L, l, nm, H, S, 1, &sh->w_down));
    if (c->shared_ungated) return SPECDEC_OK;
    return sd_layer_tensor(L, l, "mlp.shared_expert_gate.weight", 1, H, 1, &ly->shared_gate);
}

/* ---- GPT-OSS: experts stored fused, as [E, in, out] (x @ W), or in MXFP4 -------------- */

/* The stored tensor model.layers.<l>.<suffix> (name written to nm) with exactly the shape
 * shape[0..nd): missing is MODEL_MISMATCH, another shape `bad`. */
static specdec_status sd_layer_raw(sd_loader *L, int32_t l, const char *suffix, int nd, const int64_t *shape,
                                   specdec_status bad, char nm[160], const sd_st_tensor **t, const uint8_t **data,
                                   const char **path) {
    snprintf(nm, 160, "model.layers.%d.%s", (int)(l + L->layer_base), suffix);
    const sd_entry *e = sd_find_entry(L, nm);
    if (!e)
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: missing tensor '%s'",
                       L->index_path[0] ? L->index_path : L->m->files[0]->path, nm);
    const sd_st_file *f = L->m->files[e->file];
    int ok = e->t->ndim == nd;
    for (int i = 0; ok && i < nd; i++) ok = e->t->shape[i] == shape[i];
    if (!ok) {
        char have[160], want[160];
        sd_st_tensor w = {0};
        w.ndim = nd;
        for (int i = 0; i < nd; i++) w.shape[i] = shape[i];
        sd_fmt_shape(have, sizeof have, e->t);
        sd_fmt_shape(want, sizeof want, &w);
        return sd_fail(NULL, bad, "%s: tensor '%s': shape %s, but config.json implies %s", f->path, nm, have, want);
    }
    *t = e->t;
    *data = sd_st_data(f, e->t);
    *path = f->path;
    sd_mark_used(L, e);
    return SPECDEC_OK;
}

/* dst [cols, rows] = src [rows, cols]^T, elements of esz bytes (src may be misaligned), in
 * 32 x 32 tiles so that both sides stay in cache. */
static void sd_transpose(const uint8_t *src, int64_t rows, int64_t cols, size_t esz, uint8_t *dst) {
    for (int64_t r0 = 0; r0 < rows; r0 += 32)
        for (int64_t c0 = 0; c0 < cols; c0 += 32)
            for (int64_t r = r0; r < rows && r < r0 + 32; r++)
                for (int64_t c = c0; c < cols && c < c0 + 32; c++)
                    memcpy(dst + (size_t)(c * rows + r) * esz, src + (size_t)(r * cols + c) * esz, esz);
}

/* Experts e of ex[0..E) get their projection `proj` ("gate_up_proj" or "down_proj") as
 * views [out, in] of the owned buffer buf, one after the other. */
static void sd_expert_views(sd_expert *ex, int64_t E, const char *proj, const uint8_t *buf, sd_dtype dt, int64_t out,
                            int64_t in) {
    for (int64_t e = 0; e < E; e++) {
        const sd_tensor v = {buf + (size_t)(e * out * in) * sd_dtype_size(dt), dt, 2, {out, in}, NULL};
        if (!strcmp(proj, "down_proj")) ex[e].w_down = v;
        else ex[e].w_gate_up = v;
    }
}

/* A fused projection of every expert: gate_up_proj [E, hidden, 2I] (x @ W) or down_proj
 * [E, I, hidden], copied once into the nn.Linear layout [out, in] the matmuls read, in the
 * checkpoint's dtype (no view can turn columns into rows). */
static specdec_status sd_load_fused_proj(sd_loader *L, int32_t l, const char *proj, int64_t out, int64_t in,
                                         sd_expert *ex) {
    const int64_t E = L->m->w.cfg.n_experts, shape[3] = {E, in, out};
    char nm[160], sfx[64];
    const sd_st_tensor *t = NULL;
    const uint8_t *src = NULL;
    const char *path = NULL;
    snprintf(sfx, sizeof sfx, "mlp.experts.%s", proj);
    SD_TRY(sd_layer_raw(L, l, sfx, 3, shape, SPECDEC_ERR_MODEL_MISMATCH, nm, &t, &src, &path));
    sd_dtype dt;
    SD_TRY(sd_st_weight_dtype(t, path, nm, &dt));
    const size_t esz = sd_dtype_size(dt), per = (size_t)(out * in) * esz;
    uint8_t *buf = sd_own(L, (size_t)E * per);
    if (!buf)
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: tensor '%s': out of memory for %zu bytes", path, nm,
                       (size_t)E * per);
    for (int64_t e = 0; e < E; e++) sd_transpose(src + (size_t)e * per, in, out, esz, buf + (size_t)e * per);
    sd_expert_views(ex, E, proj, buf, dt, out, in);
    L->m->n_params += (int64_t)t->n_elements;
    return SPECDEC_OK;
}

/* The same from MXFP4 blocks and scales (sd_mxfp4.h), stored as [E, out, in / 32, 16] and
 * [E, out, in / 32]: already the [out, in] layout, so each expert is an SD_MXFP4 view of the
 * mapping (4.25 bits a weight; nothing is copied or decoded at load: the CPU linear layers
 * decode a row at a time, to the floats transformers' BF16 dequantisation gives). Any other
 * shape or dtype, or a NaN scale (0xFF), is FORMAT naming the tensor and where. */
static specdec_status sd_load_mxfp4_proj(sd_loader *L, int32_t l, const char *proj, int64_t out, int64_t in,
                                         sd_expert *ex) {
    const int64_t E = L->m->w.cfg.n_experts, G = in / SD_MXFP4_BLOCK;
    char nb[160], ns[160], sfx[64];
    const sd_st_tensor *tb = NULL, *ts = NULL;
    const uint8_t *blocks = NULL, *scales = NULL;
    const char *path = NULL;
    snprintf(sfx, sizeof sfx, "mlp.experts.%s_blocks", proj);
    if (in % SD_MXFP4_BLOCK)
        return sd_fail(NULL, SPECDEC_ERR_FORMAT,
                       "%s: model.layers.%d.%s: MXFP4 rows are blocks of %d values, but config.json gives rows of %lld",
                       L->m->path, (int)l, sfx, SD_MXFP4_BLOCK, (long long)in);
    const int64_t sb[4] = {E, out, G, SD_MXFP4_BLOCK / 2}, ss[3] = {E, out, G};
    SD_TRY(sd_layer_raw(L, l, sfx, 4, sb, SPECDEC_ERR_FORMAT, nb, &tb, &blocks, &path));
    snprintf(sfx, sizeof sfx, "mlp.experts.%s_scales", proj);
    SD_TRY(sd_layer_raw(L, l, sfx, 3, ss, SPECDEC_ERR_FORMAT, ns, &ts, &scales, &path));
    if (tb->dtype != SD_ST_U8 || ts->dtype != SD_ST_U8)
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: MXFP4 tensors '%s' (%s) and '%s' (%s) must be U8", path, nb,
                       sd_st_dtype_name(tb->dtype), ns, sd_st_dtype_name(ts->dtype));
    const void *hit = memchr(scales, 0xFF, (size_t)(E * out * G));
    if (hit) {
        const int64_t at = (const uint8_t *)hit - scales;
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: tensor '%s': expert %lld row %lld block %lld: scale 0xFF "
                       "(NaN in E8M0)", path, ns, (long long)(at / (out * G)), (long long)(at / G % out),
                       (long long)(at % G));
    }
    for (int64_t e = 0; e < E; e++) {
        const sd_tensor v = {blocks + (size_t)(e * out) * sd_mxfp4_row_bytes(in), SD_MXFP4, 2, {out, in},
                             scales + (size_t)(e * out * G)};
        if (!strcmp(proj, "down_proj")) ex[e].w_down = v;
        else ex[e].w_gate_up = v;
    }
    L->m->n_params += E * out * in;
    return SPECDEC_OK;
}

/* Row e of a loaded 2-D tensor as a 1-D view (a per-expert bias). */
static sd_tensor sd_row_vec(const sd_tensor *t, int64_t e) {
    sd_tensor v = sd_row_view(t, e, 1);
    v.ndim = 1;
    v.shape[0] = t->shape[1];
    v.shape[1] = 1;
    return v;
}

/* A GGUF's GPT-OSS experts (models/sd_gguf_load.c): mlp.experts.{gate,up,down}_proj.weight [E, rows, cols] in
 * ggml's MXFP4 blocks and their biases [E, rows], repacked once into transformers' layout — gate and up rows
 * interleaved into one gate_up projection (gate row i at 2i, up row i at 2i + 1), the same for the biases —
 * as SD_MXFP4 tensors (4.25 bits a weight, as the file). A NaN scale (0xFF) is FORMAT naming where. */
static specdec_status sd_load_gguf_oss_experts(sd_loader *L, int32_t l, sd_expert *ex) {
    const sd_config *c = &L->m->w.cfg;
    const int64_t H = c->hidden_size, I = c->moe_intermediate, E = c->n_experts;
    static const char *const proj[3] = {"gate_proj", "up_proj", "down_proj"};
    const uint8_t *src[3];
    char nm[3][160];
    const char *path = NULL;
    for (int k = 0; k < 3; k++) {
        const int64_t rows = k == 2 ? H : I, cols = k == 2 ? I : H, shape[3] = {E, rows, cols};
        const sd_st_tensor *t = NULL;
        char sfx[64];
        snprintf(sfx, sizeof sfx, "mlp.experts.%s.weight", proj[k]);
        SD_TRY(sd_layer_raw(L, l, sfx, 3, shape, SPECDEC_ERR_MODEL_MISMATCH, nm[k], &t, &src[k], &path));
        if (cols % SD_MXFP4_BLOCK || t->gguf_quant != 1 + SD_GGML_MXFP4)
            return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: tensor '%s' must be MXFP4 with rows of whole blocks "
                           "of %d", path, nm[k], SD_MXFP4_BLOCK);
    }
    /* gate_up: [E, 2I] rows of H / 32 blocks; down: [E, H] rows of I / 32 */
    const int64_t Gu = H / SD_MXFP4_BLOCK, Gd = I / SD_MXFP4_BLOCK, rb = 1 + SD_MXFP4_BLOCK / 2;
    uint8_t *gu = sd_own(L, (size_t)(E * 2 * I * Gu) * 17), *dn = sd_own(L, (size_t)(E * H * Gd) * 17);
    if (!gu || !dn) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory for layer %d's experts", path, (int)l);
    uint8_t *gu_s = gu + (size_t)(E * 2 * I * Gu) * 16, *dn_s = dn + (size_t)(E * H * Gd) * 16;
    for (int64_t e = 0; e < E; e++) {
        for (int64_t r = 0; r < 2 * I; r++) { /* row r of gate_up: gate row r / 2 or up row r / 2 */
            const uint8_t *row = src[r & 1] + (size_t)((e * I + r / 2) * Gu * rb);
            const int64_t o = e * 2 * I + r;
            sd_mxfp4_from_ggml(row, Gu, gu + (size_t)(o * Gu) * 16, gu_s + (size_t)(o * Gu));
        }
        for (int64_t r = 0; r < H; r++) {
            const int64_t o = e * H + r;
            sd_mxfp4_from_ggml(src[2] + (size_t)(o * Gd * rb), Gd, dn + (size_t)(o * Gd) * 16, dn_s + (size_t)(o * Gd));
        }
    }
    const uint8_t *sc[2] = {gu_s, dn_s};
    const int64_t n_sc[2] = {E * 2 * I * Gu, E * H * Gd}, G[2] = {Gu, Gd}, R[2] = {2 * I, H};
    for (int k = 0; k < 2; k++) {
        const void *hit = memchr(sc[k], 0xFF, (size_t)n_sc[k]);
        if (!hit) continue;
        const int64_t at = (const uint8_t *)hit - sc[k], row = at / G[k] % R[k];
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: tensor '%s': expert %lld row %lld block %lld: scale 0xFF (NaN "
                       "in E8M0)", path, k ? nm[2] : nm[row & 1], (long long)(at / G[k] / R[k]),
                       (long long)(k ? row : row / 2), (long long)(at % G[k]));
    }
    sd_tensor gb, ub, db;
    SD_TRY(sd_layer_tensor(L, l, "mlp.experts.gate_proj.bias", E, I, 1, &gb));
    SD_TRY(sd_layer_tensor(L, l, "mlp.experts.up_proj.bias", E, I, 1, &ub));
    SD_TRY(sd_layer_tensor(L, l, "mlp.experts.down_proj.bias", E, H, 1, &db));
    if (gb.dtype != ub.dtype || (gb.dtype != SD_F32 && gb.dtype != SD_F16 && gb.dtype != SD_BF16))
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: layer %d: the experts' gate and up biases must be "
                       "F32, F16 or BF16, both alike", path, (int)l);
    const size_t esz = sd_dtype_size(gb.dtype);
    uint8_t *bias = sd_own(L, (size_t)(E * 2 * I) * esz);
    if (!bias) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory for layer %d's biases", path, (int)l);
    for (int64_t i = 0; i < E * 2 * I; i++)
        memcpy(bias + (size_t)i * esz, (const uint8_t *)(i & 1 ? ub.data : gb.data) + (size_t)(i / 2) * esz, esz);
    const sd_tensor gub = {bias, gb.dtype, 2, {E, 2 * I}, NULL};
    for (int64_t e = 0; e < E; e++) {
        ex[e].w_gate_up = (sd_tensor){gu + (size_t)(e * 2 * I * Gu) * 16, SD_MXFP4, 2, {2 * I, H},
                                      gu_s + (size_t)(e * 2 * I * Gu)};
        ex[e].w_down = (sd_tensor){dn + (size_t)(e * H * Gd) * 16, SD_MXFP4, 2, {H, I}, dn_s + (size_t)(e * H * Gd)};
        ex[e].b_gate_up = sd_row_vec(&gub, e);
        ex[e].b_down = sd_row_vec(&db, e);
    }
    L->m->n_params += E * 3 * I * H;
    return SPECDEC_OK;
}

/* GPT-OSS experts (cfg.moe_fused): biases as views, weights transposed or dequantized. */
static specdec_status sd_load_fused_experts(sd_loader *L, int32_t l, sd_expert *ex) {
    const sd_config *c = &L->m->w.cfg;
    const int64_t H = c->hidden_size, I = c->moe_intermediate, E = c->n_experts;
    char gguf_name[160];
    snprintf(gguf_name, sizeof gguf_name, "model.layers.%d.mlp.experts.gate_proj.weight", (int)(l + L->layer_base));
    if (sd_find_entry(L, gguf_name)) return sd_load_gguf_oss_experts(L, l, ex);
    sd_tensor gub, db;
    SD_TRY(sd_layer_tensor(L, l, "mlp.experts.gate_up_proj_bias", E, 2 * I, 1, &gub));
    SD_TRY(sd_layer_tensor(L, l, "mlp.experts.down_proj_bias", E, H, 1, &db));
    for (int64_t e = 0; e < E; e++) {
        ex[e].b_gate_up = sd_row_vec(&gub, e);
        ex[e].b_down = sd_row_vec(&db, e);
    }
    if (c->experts_mxfp4) {
        SD_TRY(sd_load_mxfp4_proj(L, l, "gate_up_proj", 2 * I, H, ex));
        return sd_load_mxfp4_proj(L, l, "down_proj", H, I, ex);
    }
    SD_TRY(sd_load_fused_proj(L, l, "gate_up_proj", 2 * I, H, ex));
    return sd_load_fused_proj(L, l, "down_proj", H, I, ex);
}

/* Granite-MoE's stacked experts: <prefix>.input_linear.weight [E, 2I, hidden] (each expert's gate
 * rows then its up rows) and <prefix>.output_linear.weight [E, hidden, I], already the [out, in]
 * layout: views into the mapping (copied once when misaligned for the dtype). */
static specdec_status sd_load_stacked_experts(sd_loader *L, int32_t l, const char *prefix, sd_expert *ex) {
    const sd_config *c = &L->m->w.cfg;
    const int64_t H = c->hidden_size, I = c->moe_intermediate, E = c->n_experts;
    for (int k = 0; k < 2; k++) {
        const int64_t out = k ? H : 2 * I, in = k ? I : H, shape[3] = {E, out, in};
        char nm[160], sfx[96];
        const sd_st_tensor *t = NULL;
        const uint8_t *src = NULL;
        const char *path = NULL;
        snprintf(sfx, sizeof sfx, "%s.%s.weight", prefix, k ? "output_linear" : "input_linear");
        SD_TRY(sd_layer_raw(L, l, sfx, 3, shape, SPECDEC_ERR_MODEL_MISMATCH, nm, &t, &src, &path));
        sd_dtype dt;
        SD_TRY(sd_st_weight_dtype(t, path, nm, &dt));
        const size_t esz = sd_dtype_size(dt), bytes = (size_t)(E * out * in) * esz;
        if ((uintptr_t)src % esz) { /* safetensors does not promise alignment */
            uint8_t *copy = sd_own(L, bytes);
            if (!copy)
                return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: tensor '%s': out of memory for %zu bytes", path,
                               nm, bytes);
            memcpy(copy, src, bytes);
            src = copy;
        }
        for (int64_t e = 0; e < E; e++) {
            const sd_tensor v = {src + (size_t)(e * out * in) * esz, dt, 2, {out, in}, NULL};
            if (k) {
                ex[e].w_down = v;
            } else {
                ex[e].w_gate = sd_row_view(&v, 0, I);
                ex[e].w_up = sd_row_view(&v, I, I);
            }
        }
        L->m->n_params += (int64_t)t->n_elements;
    }
    return SPECDEC_OK;
}

/* Layer l's router and experts (cfg.layer_moe[l]). */
static specdec_status sd_load_experts(sd_loader *L, int32_t l, sd_layer *ly) {
    const sd_config *c = &L->m->w.cfg;
    const int64_t H = c->hidden_size, I = c->moe_intermediate;
    const sd_moe_names *nm = NULL;
    for (size_t i = 0; i < sizeof sd_moe_table / sizeof sd_moe_table[0]; i++)
        if (sd_moe_table[i].arch == c->arch) nm = &sd_moe_table[i];
    if (!nm) return sd_fail(NULL, SPECDEC_ERR_INTERNAL, "%s: no MoE tensor names for %s", L->m->path, c->architecture);
    SD_TRY(sd_layer_tensor(L, l, nm->router, c->n_experts, H, 1, &ly->router));
    if (c->moe_fused) SD_TRY(sd_layer_tensor(L, l, "mlp.router.bias", c->n_experts, 0, 1, &ly->router_bias));
    if (c->moe_route == SD_ROUTE_SIGMOID_GROUPED)
        SD_TRY(sd_layer_tensor(L, l, "mlp.gate.e_score_correction_bias", c->n_experts, 0, 1, &ly->router_score_bias));
    sd_expert *ex = sd_own(L, (size_t)c->n_experts * sizeof *ex);
    if (!ex) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory for %d experts", L->m->path, c->n_experts);
    ly->experts = ex;
    if (c->moe_fused) return sd_load_fused_experts(L, l, ex);
    char stacked[160];
    snprintf(stacked, sizeof stacked, "model.layers.%d.%s.input_linear.weight", (int)(l + L->layer_base),
             nm->stacked ? nm->stacked : "");
    if (nm->stacked && (!nm->gate || sd_find_entry(L, stacked))) return sd_load_stacked_experts(L, l, nm->stacked, ex);
    char name[128];
    for (int32_t e = 0; e < c->n_experts; e++) {
        snprintf(name, sizeof name, nm->gate, (int)e);
        SD_TRY(sd_layer_tensor(L, l, name, I, H, 1, &ex[e].w_gate));
        snprintf(name, sizeof name, nm->up, (int)e);
        SD_TRY(sd_layer_tensor(L, l, name, I, H, 1, &ex[e].w_up));
        snprintf(name, sizeof name, nm->down, (int)e);
        SD_TRY(sd_layer_tensor(L, l, name, H, I, 1, &ex[e].w_down));
    }
    return c->shared_expert_intermediate ? sd_load_shared_expert(L, l, ly) : SPECDEC_OK;
}

/* The norms and the MLP of layer l (fused gate_up_proj split into views; a MoE layer's
 * router and experts). */
static specdec_status sd_load_mlp(sd_loader *L, int32_t l, sd_layer *ly) {
    const sd_config *c = &L->m->w.cfg;
    const int64_t H = c->hidden_size, I = c->intermediate_size;
    if (c->post_norms_only) { /* OLMo-2: the sublayers' outputs are normed, not their inputs */
        SD_TRY(sd_layer_tensor(L, l, "post_attention_layernorm.weight", H, 0, 1, &ly->attn_post_norm));
        SD_TRY(sd_layer_tensor(L, l, "post_feedforward_layernorm.weight", H, 0, 1, &ly->ffn_post_norm));
    } else if (c->sandwich_norms && c->arch == SD_ARCH_GLM4) { /* the same four norms under GLM's names */
        SD_TRY(sd_layer_tensor(L, l, "input_layernorm.weight", H, 0, 1, &ly->attn_norm));
        SD_TRY(sd_layer_tensor(L, l, "post_self_attn_layernorm.weight", H, 0, 1, &ly->attn_post_norm));
        SD_TRY(sd_layer_tensor(L, l, "post_attention_layernorm.weight", H, 0, 1, &ly->ffn_norm));
        SD_TRY(sd_layer_tensor(L, l, "post_mlp_layernorm.weight", H, 0, 1, &ly->ffn_post_norm));
    } else if (c->sandwich_norms) {
        SD_TRY(sd_layer_tensor(L, l, "input_layernorm.weight", H, 0, 1, &ly->attn_norm));
        SD_TRY(sd_layer_tensor(L, l, "post_attention_layernorm.weight", H, 0, 1, &ly->attn_post_norm));
        SD_TRY(sd_layer_tensor(L, l, "pre_feedforward_layernorm.weight", H, 0, 1, &ly->ffn_norm));
        SD_TRY(sd_layer_tensor(L, l, "post_feedforward_layernorm.weight", H, 0, 1, &ly->ffn_post_norm));
    } else {
        SD_TRY(sd_layer_tensor(L, l, "input_layernorm.weight", H, 0, 1, &ly->attn_norm));
        SD_TRY(sd_layer_tensor(L, l, "post_attention_layernorm.weight", H, 0, 1, &ly->ffn_norm));
    }
    if (c->layer_moe[l]) return sd_load_experts(L, l, ly);
    if (c->fused_gate_up) {
        sd_tensor gu;
        SD_TRY(sd_layer_tensor(L, l, "mlp.gate_up_proj.weight", 2 * I, H, 1, &gu));
        if (gu.dtype == SD_FP8) return sd_quant_fused_refused(L, l, "mlp.gate_up_proj.weight");
        SD_TRY(sd_fused_view(L, &gu, 0, I, &ly->w_gate));
        SD_TRY(sd_fused_view(L, &gu, I, I, &ly->w_up));
    } else {
        SD_TRY(sd_layer_tensor(L, l, "mlp.gate_proj.weight", I, H, 1, &ly->w_gate));
        SD_TRY(sd_layer_tensor(L, l, "mlp.up_proj.weight", I, H, 1, &ly->w_up));
    }
    SD_TRY(sd_layer_tensor(L, l, "mlp.down_proj.weight", H, I, 1, &ly->w_down));
    if (c->mlp_bias) {
        SD_TRY(sd_layer_tensor(L, l, "mlp.gate_proj.bias", I, 0, 1, &ly->b_gate));
        SD_TRY(sd_layer_tensor(L, l, "mlp.up_proj.bias", I, 0, 1, &ly->b_up));
        SD_TRY(sd_layer_tensor(L, l, "mlp.down_proj.bias", H, 0, 1, &ly->b_down));
    }
    return SPECDEC_OK;
}

/* Most tensors one layer reads (sd_load_attention + sd_load_mlp). */
#define SD_LAYER_MAX_TENSORS 24

/* The MTP layer's own tensors (core/sd_weights.h "An MTP layer run as a draft model"): its front,
 * shared_head.norm as the final norm, and the block's embedding and LM head when the checkpoint ships
 * copies (DeepSeek-V3 and GLM-4.5 do; else sd_load_weights takes the model's). Layer names are relative
 * to layer_base (the MTP layer). */
static specdec_status sd_load_mtp_io(sd_loader *L) {
    specdec_model *m = L->m;
    const sd_config *c = &m->w.cfg;
    const int64_t V = c->vocab_size, H = c->hidden_size;
    char nm[96];
    snprintf(nm, sizeof nm, "model.layers.%d.eh_proj.weight", (int)L->layer_base);
    if (!sd_find_entry(L, nm))
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH,
                       "%s: config.json has num_nextn_predict_layers %d, but the checkpoint has no MTP layer (no tensor "
                       "'%s': this copy was saved without it)",
                       m->path, (int)c->mtp_layers, nm);
    SD_TRY(sd_layer_tensor(L, 0, "enorm.weight", H, 0, 1, &m->w.mtp_enorm));
    SD_TRY(sd_layer_tensor(L, 0, "hnorm.weight", H, 0, 1, &m->w.mtp_hnorm));
    SD_TRY(sd_layer_tensor(L, 0, "eh_proj.weight", H, 2 * H, 1, &m->w.mtp_eh_proj));
    SD_TRY(sd_layer_tensor(L, 0, "shared_head.norm.weight", H, 0, 1, &m->w.out_norm));
    SD_TRY(sd_layer_tensor(L, 0, "embed_tokens.weight", V, H, 0, &m->w.tok_embd));
    return sd_layer_tensor(L, 0, "shared_head.head.weight", V, H, 0, &m->w.lm_head);
}

/* specdec_model_params.mtp: the configuration of the checkpoint's first MTP layer run alone (one
 * layer, at checkpoint index num_hidden_layers, sparse when the decoder's later layers are). */
static specdec_status sd_mtp_config(sd_loader *L) {
    sd_config *c = &L->m->w.cfg;
    if (c->mtp_layers < 1)
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH,
                       "%s: the checkpoint has no MTP layer (config.json num_nextn_predict_layers is %d; MTP drafting "
                       "needs a GLM-4.5 / DeepSeek-V3 style checkpoint that ships one)",
                       L->m->path, (int)c->mtp_layers);
    L->layer_base = c->n_layers;
    c->n_layers = 1;
    c->layer_moe[0] = (uint8_t)c->mtp_moe;
    c->layer_sliding[0] = 0;
    c->layer_no_rope[0] = 0;
    return SPECDEC_OK;
}

static specdec_status sd_load_weights(sd_loader *L) {
    specdec_model *m = L->m;
    const sd_config *c = &m->w.cfg;
    const int64_t V = c->vocab_size, H = c->hidden_size;
    /* per layer: its tensors, and for a MoE layer the experts array, its router, 3 per expert and
     * the shared expert (its struct, 3 projections and its gate); the MTP layer's 7 more */
    L->cap_owned = c->n_layers * (SD_LAYER_MAX_TENSORS + 7 + 3 * c->n_experts) + 3 + (L->mtp ? 7 : 0);
    if (c->fp8_fmt) L->cap_owned *= 2; /* each FP8 matrix's scales too */
    if (c->int4_fmt) L->cap_owned += 5 * c->n_layers; /* fused qkv / gate_up views' group descriptions */
    /* (a 4-bit projection takes one slot: sd_load_int4's buffer) */
    m->owned = sd_calloc((size_t)L->cap_owned, sizeof *m->owned);
    m->w.layers = sd_calloc((size_t)c->n_layers, sizeof *m->w.layers);
    if (!m->owned || !m->w.layers) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", m->path);

    if (L->mtp) SD_TRY(sd_load_mtp_io(L)); /* what it lacks is the model's, as below */
    if (!m->w.tok_embd.data) SD_TRY(sd_get_tensor(L, "model.embed_tokens.weight", V, H, 1, NULL, &m->w.tok_embd));
    for (int32_t l = 0; l < c->n_layers; l++) {
        SD_TRY(sd_load_attention(L, l, &m->w.layers[l]));
        SD_TRY(sd_load_mlp(L, l, &m->w.layers[l]));
    }
    if (!m->w.out_norm.data) SD_TRY(sd_get_tensor(L, "model.norm.weight", H, 0, 1, NULL, &m->w.out_norm));
    if (!m->w.lm_head.data && c->tie_word_embeddings) /* (an MTP layer's shared_head.head is loaded) */
        m->w.lm_head = m->w.tok_embd; /* a stored lm_head.weight is ignored, as transformers does */
    else if (!m->w.lm_head.data)
        SD_TRY(sd_get_tensor(L, "lm_head.weight", V, H, 1, "(tie_word_embeddings is false)", &m->w.lm_head));
    m->w.dtype = m->w.layers[0].wo.dtype; /* o_proj: every family has one (MLA may have no q_proj) */
    return SPECDEC_OK;
}

/* A GGUF file (models/sd_gguf_load.h): one file, its tensors under their Hugging Face names. With L->mtp, a
 * GLM-4.5 file's first MTP block as a one-layer draft (sd_mtp_config), the model's embedding, final norm and
 * head there to stand in for copies the block lacks. */
static specdec_status sd_load_gguf(sd_loader *L) {
    specdec_model *m = L->m;
    L->index_path[0] = '\0';
    SD_TRY(sd_gguf_open_model(m, L->use_mmap, L->mtp, &m->files, &m->n_files)); /* one file, or a split GGUF's */
    m->file_format = SPECDEC_FILE_GGUF;
    if (L->mtp) SD_TRY(sd_mtp_config(L));
    SD_TRY(sd_build_entries(L));
    L->used = sd_calloc(L->n_entries + 1, 1);
    if (!L->used) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", m->path);
    SD_TRY(sd_load_weights(L));
    char block[48]; /* MTP: the block's own tensors must all be read; the model's global ones may stand unused */
    const int nb = snprintf(block, sizeof block, "model.layers.%d.", (int)L->layer_base);
    for (size_t i = 0; i < L->n_entries; i++) /* a tensor the configuration does not read would be dropped silently */
        if (!L->used[i] && (!L->mtp || !strncmp(L->entries[i].name, block, (size_t)nb)))
            return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF tensor '%s' (as named in the Hugging Face "
                           "checkpoint) is not read by the configuration its metadata gives", m->path,
                           L->entries[i].name);
    return SPECDEC_OK;
}

static specdec_status sd_load(sd_loader *L) {
    specdec_model *m = L->m;
    if (sd_gguf_path(m->path)) return sd_load_gguf(L);
    const size_t pl = strlen(m->path);
    if (pl > 5 && !strcmp(m->path + pl - 5, ".gguf")) /* meant as a GGUF file: say what is wrong with it */
        return sd_is_file(m->path)
                   ? sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: not a GGUF file (it does not start with 'GGUF')", m->path)
                   : sd_fail(NULL, SPECDEC_ERR_IO, "%s: no such GGUF file", m->path);
    char p[4400];
    snprintf(p, sizeof p, "%s/config.json", m->path);
    char *text = NULL;
    size_t len = 0;
    SD_TRY(sd_read_file(p, SD_CONFIG_MAX_BYTES, &text, &len, NULL));
    specdec_status st = sd_config_parse(text, len, p, &m->w.cfg, NULL);
    sd_free(text);
    if (st) return st;
    if (L->mtp) SD_TRY(sd_mtp_config(L));

    snprintf(L->index_path, sizeof L->index_path, "%s/model.safetensors.index.json", m->path);
    if (sd_is_file(L->index_path)) {
        const cJSON *wm = NULL;
        cJSON *root = NULL;
        st = sd_open_sharded(L, &wm, &root);
        if (!st) st = sd_build_entries(L);
        if (!st) st = sd_check_index(L, wm);
        cJSON_Delete(root);
        if (st) return st;
    } else {
        L->index_path[0] = '\0';
        snprintf(p, sizeof p, "%s/model.safetensors", m->path);
        if (!sd_is_file(p))
            return sd_fail(NULL, SPECDEC_ERR_IO,
                           "%s: no model.safetensors or model.safetensors.index.json in this directory", m->path);
        m->files = sd_calloc(1, sizeof *m->files);
        if (!m->files) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", p);
        SD_TRY(sd_st_open(p, L->use_mmap, &m->files[0], NULL));
        m->n_files = 1;
        SD_TRY(sd_build_entries(L));
    }
    return sd_load_weights(L);
}

specdec_status specdec_model_load(const char *path, const specdec_model_params *params, specdec_model **out_model) {
    if (out_model) *out_model = NULL;
    if (!path || !out_model)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_model_load: %s is NULL",
                       !path ? "path" : "out_model");
    specdec_model_params dp = specdec_model_default_params();
    if (!params) params = &dp;
    size_t plen = strlen(path);
    if (plen == 0 || plen >= sizeof(((specdec_model *)0)->path))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_model_load: path length %zu is not in [1, %zu)",
                       plen, sizeof(((specdec_model *)0)->path));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    specdec_model *m = sd_calloc(1, sizeof *m);
    if (!m) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    memcpy(m->path, path, plen + 1);
    while (plen > 1 && m->path[plen - 1] == '/') m->path[--plen] = '\0';
    sd_loader L;
    memset(&L, 0, sizeof L);
    L.m = m;
    L.use_mmap = params->use_mmap != 0;
    L.mtp = params->mtp != 0;
    int is_head = 0;
    specdec_status st = sd_eagle3_model_load(m, L.use_mmap, &is_head);
    if (!st && is_head && L.mtp)
        st = sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s is an EAGLE-3 head: it has no MTP layer", m->path);
    if (!st && !is_head) st = sd_load(&L);
    sd_free(L.entries);
    sd_free(L.vlm_names);
    sd_free(L.used);
    if (st) {
        specdec_model_free(m);
        return st;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    m->t_load_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    *out_model = m;
    return SPECDEC_OK;
}

void specdec_model_free(specdec_model *m) {
    if (!m) return;
    sd_eagle3_model_free(m);
    for (int32_t i = 0; i < m->n_owned; i++) sd_free(m->owned[i]);
    sd_free(m->owned);
    for (int32_t i = 0; m->files && i < m->n_files; i++) sd_st_close(m->files[i]);
    sd_free(m->files);
    sd_free(m->w.layers);
    sd_free(m);
}

const char *specdec_model_last_error(const specdec_model *model) {
    return model ? model->err.msg : specdec_last_error();
}

_Static_assert((int)SD_ROPE_DEFAULT == SPECDEC_ROPE_DEFAULT && (int)SD_ROPE_LLAMA3 == SPECDEC_ROPE_LLAMA3 &&
                   (int)SD_ROPE_LINEAR == SPECDEC_ROPE_LINEAR && (int)SD_ROPE_DYNAMIC == SPECDEC_ROPE_DYNAMIC &&
                   (int)SD_ROPE_YARN == SPECDEC_ROPE_YARN && (int)SD_ROPE_LONGROPE == SPECDEC_ROPE_LONGROPE,
               "specdec_model_info.rope_type carries sd_rope_type's numbers");

specdec_status specdec_model_get_info(const specdec_model *model, specdec_model_info *info) {
    if (!model || !info)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_model_get_info: %s is NULL",
                       !model ? "model" : "info");
    const sd_config *c = &model->w.cfg;
    memset(info, 0, sizeof *info);
    snprintf(info->architecture, sizeof info->architecture, "%s", c->architecture);
    info->vocab_size = c->vocab_size;
    info->hidden_size = c->hidden_size;
    info->intermediate_size = c->intermediate_size;
    info->n_layers = c->n_layers;
    info->n_heads = c->n_heads;
    info->n_kv_heads = c->n_kv_heads;
    info->head_dim = c->head_dim;
    info->max_position_embeddings = c->max_position_embeddings;
    info->rms_norm_eps = c->rms_norm_eps;
    info->rope_theta = c->rope_theta;
    info->rope_scaling_llama3 = c->rope_type == SD_ROPE_LLAMA3;
    info->rope_type = (int32_t)c->rope_type;
    info->mtp_layers = c->mtp_layers;
    info->file_format = model->file_format; /* SD_ROPE_* numbers are SPECDEC_ROPE_*'s (static asserts below) */
    info->tie_word_embeddings = c->tie_word_embeddings;
    info->attention_bias = c->attention_bias;
    info->dtype = model->w.dtype == SD_FP8    ? SPECDEC_DTYPE_FP8_E4M3
                  : model->w.dtype == SD_INT4 ? SPECDEC_DTYPE_INT4
                  : model->w.dtype == SD_INT8 ? SPECDEC_DTYPE_INT8
                                              : (specdec_dtype)model->w.dtype;
    info->n_params = model->n_params;
    info->bos_id = c->bos_id;
    info->n_eos = c->n_eos;
    for (int i = 0; i < c->n_eos && i < SPECDEC_MAX_EOS; i++) info->eos_ids[i] = c->eos_ids[i];
    sd_eagle3_model_info(model, info);
    if (model->w.mtp_eh_proj.data) info->model_kind = SPECDEC_DRAFT_MTP;
    return SPECDEC_OK;
}
