/* sd_gguf.c — GGUF parsing (core/sd_gguf.h). A cursor walks the file with every read bounds-checked;
 * keys and tensor names are copied (NUL-terminated) into one owned block, values stay in the file. */
#include "sd_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_alloc.h"

#define QK_K 256u

static const sd_ggml_type_info sd_ggml_types[SD_GGML_TYPE_END] = {
    [SD_GGML_F32] = {"F32", 1, 4},
    [SD_GGML_F16] = {"F16", 1, 2},
    [SD_GGML_Q4_0] = {"Q4_0", 32, 2 + 16},
    [SD_GGML_Q4_1] = {"Q4_1", 32, 2 + 2 + 16},
    [SD_GGML_Q5_0] = {"Q5_0", 32, 2 + 4 + 16},
    [SD_GGML_Q5_1] = {"Q5_1", 32, 2 + 2 + 4 + 16},
    [SD_GGML_Q8_0] = {"Q8_0", 32, 2 + 32},
    [SD_GGML_Q8_1] = {"Q8_1", 32, 4 + 4 + 32},
    [SD_GGML_Q2_K] = {"Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4},
    [SD_GGML_Q3_K] = {"Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12},
    [SD_GGML_Q4_K] = {"Q4_K", QK_K, 2 + 2 + QK_K / 2 + 12},
    [SD_GGML_Q5_K] = {"Q5_K", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12},
    [SD_GGML_Q6_K] = {"Q6_K", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16},
    [SD_GGML_Q8_K] = {"Q8_K", QK_K, 4 + QK_K + QK_K / 8},
    [SD_GGML_IQ2_XXS] = {"IQ2_XXS", QK_K, 2 + QK_K / 4},
    [SD_GGML_IQ2_XS] = {"IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32},
    [SD_GGML_IQ3_XXS] = {"IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8},
    [SD_GGML_IQ1_S] = {"IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16},
    [SD_GGML_IQ4_NL] = {"IQ4_NL", 32, 2 + 16},
    [SD_GGML_IQ3_S] = {"IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4},
    [SD_GGML_IQ2_S] = {"IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16},
    [SD_GGML_IQ4_XS] = {"IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64},
    [SD_GGML_I8] = {"I8", 1, 1},
    [SD_GGML_I16] = {"I16", 1, 2},
    [SD_GGML_I32] = {"I32", 1, 4},
    [SD_GGML_I64] = {"I64", 1, 8},
    [SD_GGML_F64] = {"F64", 1, 8},
    [SD_GGML_IQ1_M] = {"IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32},
    [SD_GGML_BF16] = {"BF16", 1, 2},
    [SD_GGML_TQ1_0] = {"TQ1_0", QK_K, 2 + 4 * 13},
    [SD_GGML_TQ2_0] = {"TQ2_0", QK_K, 2 + 64},
    [SD_GGML_MXFP4] = {"MXFP4", 32, 1 + 16},
};

sd_ggml_type_info sd_ggml_type_info_of(uint32_t type) {
    static const sd_ggml_type_info none = {NULL, 0, 0};
    return type < SD_GGML_TYPE_END && sd_ggml_types[type].name ? sd_ggml_types[type] : none;
}

int sd_gguf_is(const uint8_t *data, size_t size) { return size >= 4 && !memcmp(data, "GGUF", 4); }

/* Bytes of one scalar of a metadata type; 0 for strings, arrays and unknown types. */
static uint32_t sd_gguf_scalar_size(uint32_t t) {
    switch (t) {
    case SD_GGUF_U8: case SD_GGUF_I8: case SD_GGUF_BOOL: return 1;
    case SD_GGUF_U16: case SD_GGUF_I16: return 2;
    case SD_GGUF_U32: case SD_GGUF_I32: case SD_GGUF_F32: return 4;
    case SD_GGUF_U64: case SD_GGUF_I64: case SD_GGUF_F64: return 8;
    default: return 0;
    }
}

typedef struct sd_cur {
    const uint8_t *d;
    uint64_t size, pos;
    const char *fname;
    sd_errbuf *eb;
} sd_cur;

static int sd_cur_has(const sd_cur *c, uint64_t n) { return n <= c->size - c->pos; }

static specdec_status sd_cur_short(const sd_cur *c, const char *what) {
    return sd_fail(c->eb, SPECDEC_ERR_FORMAT, "%s: GGUF truncated at byte %llu (reading %s)", c->fname,
                   (unsigned long long)c->pos, what);
}

static specdec_status sd_cur_u32(sd_cur *c, uint32_t *v, const char *what) {
    if (!sd_cur_has(c, 4)) return sd_cur_short(c, what);
    memcpy(v, c->d + c->pos, 4);
    c->pos += 4;
    return SPECDEC_OK;
}

static specdec_status sd_cur_u64(sd_cur *c, uint64_t *v, const char *what) {
    if (!sd_cur_has(c, 8)) return sd_cur_short(c, what);
    memcpy(v, c->d + c->pos, 8);
    c->pos += 8;
    return SPECDEC_OK;
}

static specdec_status sd_cur_str(sd_cur *c, sd_gguf_str *s, const char *what) {
    uint64_t n = 0;
    specdec_status st = sd_cur_u64(c, &n, what);
    if (st) return st;
    if (!sd_cur_has(c, n)) return sd_cur_short(c, what);
    s->s = (const char *)(c->d + c->pos);
    s->len = n;
    c->pos += n;
    return SPECDEC_OK;
}

/* A key or tensor name: 1..65535 bytes, no NUL. */
static specdec_status sd_cur_name(sd_cur *c, sd_gguf_str *s, const char *what, uint64_t idx) {
    SD_TRY(sd_cur_str(c, s, what));
    if (s->len == 0 || s->len > SD_GGUF_MAX_KEY || memchr(s->s, 0, (size_t)s->len))
        return sd_fail(c->eb, SPECDEC_ERR_FORMAT, "%s: GGUF %s %llu is empty, longer than %u bytes or holds a NUL",
                       c->fname, what, (unsigned long long)idx, SD_GGUF_MAX_KEY);
    return SPECDEC_OK;
}

/* The value of entry kv (its type read): scalars and strings stay in the file; an array of strings
 * gets its element table. */
static specdec_status sd_cur_value(sd_cur *c, sd_gguf_kv *kv) {
    kv->n = 1;
    kv->data = c->d + c->pos;
    if (kv->type == SD_GGUF_STRING) {
        sd_gguf_str s;
        SD_TRY(sd_cur_str(c, &s, kv->key));
        kv->data = (const uint8_t *)s.s, kv->len = s.len;
        return SPECDEC_OK;
    }
    if (kv->type != SD_GGUF_ARRAY) {
        const uint32_t sz = sd_gguf_scalar_size(kv->type);
        if (!sz)
            return sd_fail(c->eb, SPECDEC_ERR_FORMAT, "%s: GGUF key '%.200s' has value type %u (not a GGUF type)",
                           c->fname, kv->key, (unsigned)kv->type);
        if (!sd_cur_has(c, sz)) return sd_cur_short(c, kv->key);
        c->pos += sz;
        return SPECDEC_OK;
    }
    uint32_t at = 0;
    uint64_t n = 0;
    SD_TRY(sd_cur_u32(c, &at, kv->key));
    SD_TRY(sd_cur_u64(c, &n, kv->key));
    kv->arr_type = (sd_gguf_vtype)at;
    kv->n = n;
    kv->data = c->d + c->pos;
    if (at == SD_GGUF_STRING) {
        if (n > (c->size - c->pos) / 8) return sd_cur_short(c, kv->key); /* each string takes >= 8 bytes */
        kv->strs = sd_malloc((size_t)(n ? n : 1) * sizeof *kv->strs);
        if (!kv->strs) return sd_fail(c->eb, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory for '%.200s'", c->fname, kv->key);
        for (uint64_t i = 0; i < n; i++) SD_TRY(sd_cur_str(c, &kv->strs[i], kv->key));
        return SPECDEC_OK;
    }
    const uint32_t sz = sd_gguf_scalar_size(at);
    if (!sz)
        return sd_fail(c->eb, SPECDEC_ERR_FORMAT, "%s: GGUF key '%.200s' is an array of type %u (nested arrays and "
                       "unknown types are refused)", c->fname, kv->key, (unsigned)at);
    if (n > (c->size - c->pos) / sz) return sd_cur_short(c, kv->key);
    c->pos += n * sz;
    return SPECDEC_OK;
}

static int sd_cmp_cstr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Names (keys or tensor names) must be unique. */
static specdec_status sd_gguf_unique(const char **names, uint64_t n, const char *what, const char *fname,
                                     sd_errbuf *eb) {
    qsort(names, (size_t)n, sizeof *names, sd_cmp_cstr);
    for (uint64_t i = 1; i < n; i++)
        if (!strcmp(names[i - 1], names[i]))
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: GGUF %s '%.200s' appears twice", fname, what, names[i]);
    return SPECDEC_OK;
}

/* One tensor's info; its bytes are checked against the data region later. */
static specdec_status sd_cur_tensor(sd_cur *c, sd_gguf_tensor *t, sd_gguf_str *name, uint64_t idx) {
    SD_TRY(sd_cur_name(c, name, "tensor name", idx));
    uint32_t nd = 0, type = 0;
    SD_TRY(sd_cur_u32(c, &nd, "a tensor's dimension count"));
    if (nd < 1 || nd > SD_GGUF_MAX_DIMS)
        return sd_fail(c->eb, SPECDEC_ERR_FORMAT, "%s: GGUF tensor %llu has %u dimensions (1..%d)", c->fname,
                       (unsigned long long)idx, (unsigned)nd, SD_GGUF_MAX_DIMS);
    t->ndim = (int32_t)nd;
    uint64_t n = 1;
    for (int i = 0; i < SD_GGUF_MAX_DIMS; i++) t->ne[i] = 1;
    for (uint32_t i = 0; i < nd; i++) {
        uint64_t e = 0;
        SD_TRY(sd_cur_u64(c, &e, "a tensor's extent"));
        if (e == 0 || e > ((uint64_t)1 << 40) || n > (((uint64_t)1 << 50) / e))
            return sd_fail(c->eb, SPECDEC_ERR_FORMAT, "%s: GGUF tensor %llu has extent %llu in dimension %u (0, or "
                           "its element count is past 2^50)", c->fname, (unsigned long long)idx, (unsigned long long)e,
                           (unsigned)i);
        t->ne[i] = (int64_t)e;
        n *= e;
    }
    t->n_elements = n;
    SD_TRY(sd_cur_u32(c, &type, "a tensor's type"));
    const sd_ggml_type_info ti = sd_ggml_type_info_of(type);
    if (!ti.block)
        return sd_fail(c->eb, SPECDEC_ERR_FORMAT, "%s: GGUF tensor %llu has ggml type %u (not a known type)", c->fname,
                       (unsigned long long)idx, (unsigned)type);
    if ((uint64_t)t->ne[0] % ti.block)
        return sd_fail(c->eb, SPECDEC_ERR_FORMAT, "%s: GGUF tensor %llu (%s): rows of %lld elements are not whole "
                       "blocks of %u", c->fname, (unsigned long long)idx, ti.name, (long long)t->ne[0],
                       (unsigned)ti.block);
    t->type = (sd_ggml_type)type;
    t->nbytes = n / ti.block * ti.bytes;
    return sd_cur_u64(c, &t->offset, "a tensor's offset");
}

void sd_gguf_free(sd_gguf *g) {
    if (!g) return;
    for (uint64_t i = 0; g->kv && i < g->n_kv; i++) sd_free(g->kv[i].strs);
    sd_free(g->kv);
    sd_free(g->tensors);
    sd_free(g->names);
    memset(g, 0, sizeof *g);
}

/* Pass 1 reads every key and name (to size the name block); pass 2 fills the tables. */
static specdec_status sd_gguf_read(sd_cur *c, sd_gguf *g, sd_gguf_str *knames, sd_gguf_str *tnames) {
    uint64_t total = 0;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        sd_gguf_kv *kv = &g->kv[i];
        uint32_t type = 0;
        SD_TRY(sd_cur_name(c, &knames[i], "key", i));
        SD_TRY(sd_cur_u32(c, &type, "a value type"));
        char key[208]; /* the key in messages until the names are copied */
        snprintf(key, sizeof key, "%.*s", (int)(knames[i].len < 200 ? knames[i].len : 200), knames[i].s);
        kv->type = (sd_gguf_vtype)type;
        kv->key = key;
        const specdec_status st = sd_cur_value(c, kv);
        kv->key = NULL;
        if (st) return st;
        total += knames[i].len + 1;
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        SD_TRY(sd_cur_tensor(c, &g->tensors[i], &tnames[i], i));
        total += tnames[i].len + 1;
    }
    g->names = sd_malloc((size_t)total);
    if (!g->names) return sd_fail(c->eb, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory for GGUF names", c->fname);
    char *p = g->names;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        memcpy(p, knames[i].s, (size_t)knames[i].len);
        p[knames[i].len] = '\0';
        g->kv[i].key = p;
        p += knames[i].len + 1;
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        memcpy(p, tnames[i].s, (size_t)tnames[i].len);
        p[tnames[i].len] = '\0';
        g->tensors[i].name = p;
        p += tnames[i].len + 1;
    }
    return SPECDEC_OK;
}

/* Alignment, the data region, and each tensor's bytes inside it at an aligned offset. */
static specdec_status sd_gguf_layout(sd_cur *c, sd_gguf *g) {
    g->alignment = 32;
    const sd_gguf_kv *al = sd_gguf_find(g, "general.alignment");
    if (al) {
        uint32_t a = 0;
        if (al->type == SD_GGUF_U32) memcpy(&a, al->data, 4);
        if (al->type != SD_GGUF_U32 || a == 0 || (a & (a - 1)) || a > (1u << 20))
            return sd_fail(c->eb, SPECDEC_ERR_FORMAT, "%s: GGUF general.alignment must be a uint32 power of two "
                           "(at most 2^20)", c->fname);
        g->alignment = a;
    }
    const uint64_t start = (c->pos + g->alignment - 1) / g->alignment * g->alignment;
    if (start > c->size && g->n_tensors)
        return sd_fail(c->eb, SPECDEC_ERR_FORMAT, "%s: GGUF has %llu tensors but no data region", c->fname,
                       (unsigned long long)g->n_tensors);
    g->data_start = start > c->size ? c->size : start;
    g->data_size = c->size - g->data_start;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const sd_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment || t->offset > g->data_size || t->nbytes > g->data_size - t->offset)
            return sd_fail(c->eb, SPECDEC_ERR_FORMAT, "%s: GGUF tensor '%.200s': %llu bytes at offset %llu are not "
                           "aligned to %u or pass the data region's end (%llu bytes)", c->fname, t->name,
                           (unsigned long long)t->nbytes, (unsigned long long)t->offset, (unsigned)g->alignment,
                           (unsigned long long)g->data_size);
    }
    return SPECDEC_OK;
}

specdec_status sd_gguf_parse(const uint8_t *data, size_t size, const char *fname, sd_gguf *out, sd_errbuf *eb) {
    memset(out, 0, sizeof *out);
    sd_cur c = {data, size, 0, fname, eb};
    if (!sd_gguf_is(data, size)) return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: not a GGUF file (no 'GGUF' magic)", fname);
    c.pos = 4;
    sd_gguf g;
    memset(&g, 0, sizeof g);
    SD_TRY(sd_cur_u32(&c, &g.version, "the version"));
    if (g.version != 2 && g.version != 3)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: GGUF version %u (versions 2 and 3 are read; a big-endian file "
                       "reads as a huge version)", fname, (unsigned)g.version);
    SD_TRY(sd_cur_u64(&c, &g.n_tensors, "the tensor count"));
    SD_TRY(sd_cur_u64(&c, &g.n_kv, "the metadata count"));
    /* each tensor info takes >= 8 + 1 + 4 + 8 + 4 + 8 bytes, each entry >= 8 + 1 + 4 + 1 */
    if (g.n_tensors > SD_GGUF_MAX_TENSORS || g.n_kv > SD_GGUF_MAX_KV || g.n_tensors * 33 + g.n_kv * 14 > size)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: GGUF claims %llu tensors and %llu metadata entries: more than "
                       "the limits (%u, %u) or than the file can hold", fname, (unsigned long long)g.n_tensors,
                       (unsigned long long)g.n_kv, SD_GGUF_MAX_TENSORS, SD_GGUF_MAX_KV);
    g.kv = sd_calloc((size_t)(g.n_kv ? g.n_kv : 1), sizeof *g.kv);
    g.tensors = sd_calloc((size_t)(g.n_tensors ? g.n_tensors : 1), sizeof *g.tensors);
    sd_gguf_str *kn = sd_calloc((size_t)(g.n_kv + g.n_tensors + 1), sizeof *kn);
    const char **sorted = sd_calloc((size_t)(g.n_kv + g.n_tensors + 1), sizeof *sorted);
    specdec_status st = SPECDEC_OK;
    if (!g.kv || !g.tensors || !kn || !sorted)
        st = sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory for the GGUF tables", fname);
    if (!st) st = sd_gguf_read(&c, &g, kn, kn + g.n_kv);
    if (!st) {
        for (uint64_t i = 0; i < g.n_kv; i++) sorted[i] = g.kv[i].key;
        st = sd_gguf_unique(sorted, g.n_kv, "key", fname, eb);
    }
    if (!st) {
        for (uint64_t i = 0; i < g.n_tensors; i++) sorted[i] = g.tensors[i].name;
        st = sd_gguf_unique(sorted, g.n_tensors, "tensor", fname, eb);
    }
    if (!st) st = sd_gguf_layout(&c, &g);
    sd_free(kn);
    sd_free(sorted);
    if (st) {
        sd_gguf_free(&g);
        return st;
    }
    *out = g;
    return SPECDEC_OK;
}

const sd_gguf_kv *sd_gguf_find(const sd_gguf *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const sd_gguf_tensor *sd_gguf_find_tensor(const sd_gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

/* Scalar of type t at p as an int64 (1) or not an integer (0; u64 past INT64_MAX too). */
static int sd_gguf_int_at(uint32_t t, const uint8_t *p, int64_t *out) {
    switch (t) {
    case SD_GGUF_U8: *out = p[0]; return 1;
    case SD_GGUF_I8: *out = (int8_t)p[0]; return 1;
    case SD_GGUF_U16: { uint16_t v; memcpy(&v, p, 2); *out = v; return 1; }
    case SD_GGUF_I16: { int16_t v; memcpy(&v, p, 2); *out = v; return 1; }
    case SD_GGUF_U32: { uint32_t v; memcpy(&v, p, 4); *out = v; return 1; }
    case SD_GGUF_I32: { int32_t v; memcpy(&v, p, 4); *out = v; return 1; }
    case SD_GGUF_U64: { uint64_t v; memcpy(&v, p, 8); if (v > (uint64_t)INT64_MAX) return 0; *out = (int64_t)v; return 1; }
    case SD_GGUF_I64: { int64_t v; memcpy(&v, p, 8); *out = v; return 1; }
    default: return 0;
    }
}

static int sd_gguf_f64_at(uint32_t t, const uint8_t *p, double *out) {
    int64_t i;
    if (t == SD_GGUF_F32) {
        float f;
        memcpy(&f, p, 4);
        *out = f;
        return 1;
    }
    if (t == SD_GGUF_F64) {
        memcpy(out, p, 8);
        return 1;
    }
    if (!sd_gguf_int_at(t, p, &i)) return 0;
    *out = (double)i;
    return 1;
}

int sd_gguf_get_i64(const sd_gguf *g, const char *key, int64_t *out) {
    const sd_gguf_kv *kv = sd_gguf_find(g, key);
    return kv && kv->type != SD_GGUF_ARRAY && sd_gguf_int_at(kv->type, kv->data, out);
}

int sd_gguf_get_f64(const sd_gguf *g, const char *key, double *out) {
    const sd_gguf_kv *kv = sd_gguf_find(g, key);
    return kv && kv->type != SD_GGUF_ARRAY && sd_gguf_f64_at(kv->type, kv->data, out);
}

int sd_gguf_get_bool(const sd_gguf *g, const char *key, int *out) {
    const sd_gguf_kv *kv = sd_gguf_find(g, key);
    if (!kv || kv->type != SD_GGUF_BOOL || kv->data[0] > 1) return 0;
    *out = kv->data[0];
    return 1;
}

int sd_gguf_get_str(const sd_gguf *g, const char *key, sd_gguf_str *out) {
    const sd_gguf_kv *kv = sd_gguf_find(g, key);
    if (!kv || kv->type != SD_GGUF_STRING) return 0;
    out->s = (const char *)kv->data;
    out->len = kv->len;
    return 1;
}

int sd_gguf_arr_f64(const sd_gguf_kv *kv, uint64_t i, double *out) {
    if (!kv || kv->type != SD_GGUF_ARRAY || i >= kv->n || !sd_gguf_scalar_size(kv->arr_type)) return 0;
    return sd_gguf_f64_at(kv->arr_type, kv->data + i * sd_gguf_scalar_size(kv->arr_type), out);
}

int sd_gguf_arr_i64(const sd_gguf_kv *kv, uint64_t i, int64_t *out) {
    if (!kv || kv->type != SD_GGUF_ARRAY || i >= kv->n || !sd_gguf_scalar_size(kv->arr_type)) return 0;
    return sd_gguf_int_at(kv->arr_type, kv->data + i * sd_gguf_scalar_size(kv->arr_type), out);
}
