/* sd_safetensors.c — validation of safetensors headers and opening of files.
 *
 * Everything in a file is untrusted: lengths are checked before use, arithmetic on
 * sizes is overflow-checked, and no byte outside [data, data + size) is read. */
#define _POSIX_C_SOURCE 200809L
#include "sd_safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sd_alloc.h"
#include "sd_json.h"
#include "sd_utf8.h"

static const struct {
    const char *name;
    unsigned bits;
} sd_st_dtypes[SD_ST_DTYPE_COUNT] = {
    [SD_ST_BOOL] = {"BOOL", 8},       [SD_ST_U8] = {"U8", 8},
    [SD_ST_I8] = {"I8", 8},           [SD_ST_F8_E5M2] = {"F8_E5M2", 8},
    [SD_ST_F8_E4M3] = {"F8_E4M3", 8}, [SD_ST_F8_E8M0] = {"F8_E8M0", 8},
    [SD_ST_I16] = {"I16", 16},        [SD_ST_U16] = {"U16", 16},
    [SD_ST_F16] = {"F16", 16},        [SD_ST_BF16] = {"BF16", 16},
    [SD_ST_I32] = {"I32", 32},        [SD_ST_U32] = {"U32", 32},
    [SD_ST_F32] = {"F32", 32},        [SD_ST_I64] = {"I64", 64},
    [SD_ST_U64] = {"U64", 64},        [SD_ST_F64] = {"F64", 64},
    [SD_ST_C64] = {"C64", 64},        [SD_ST_F4] = {"F4", 4},
    [SD_ST_F6_E2M3] = {"F6_E2M3", 6}, [SD_ST_F6_E3M2] = {"F6_E3M2", 6},
};

const char *sd_st_dtype_name(sd_st_dtype t) {
    return (unsigned)t < SD_ST_DTYPE_COUNT ? sd_st_dtypes[t].name : "?";
}

unsigned sd_st_dtype_bits(sd_st_dtype t) { return (unsigned)t < SD_ST_DTYPE_COUNT ? sd_st_dtypes[t].bits : 0; }

specdec_status sd_st_weight_dtype(const sd_st_tensor *t, const char *path, const char *name, sd_dtype *out) {
    switch (t->dtype) {
    case SD_ST_F32: *out = SD_F32; return SPECDEC_OK;
    case SD_ST_F16: *out = SD_F16; return SPECDEC_OK;
    case SD_ST_BF16: *out = SD_BF16; return SPECDEC_OK;
    default:
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s is not supported (F32, F16, BF16)",
                       path, name, sd_st_dtype_name(t->dtype));
    }
}

static int sd_st_dtype_parse(const char *s, sd_st_dtype *out) {
    for (int i = 0; i < SD_ST_DTYPE_COUNT; i++) {
        if (!strcmp(s, sd_st_dtypes[i].name)) {
            *out = (sd_st_dtype)i;
            return 1;
        }
    }
    return 0;
}

/* Finds a \u0000 escape inside a JSON string of the raw header: cJSON would decode it
 * to a NUL byte and silently truncate the name. Returns the offset of the string's
 * opening quote, or -1. */
static long sd_st_find_nul_escape(const char *h, size_t n) {
    int in_str = 0;
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (!in_str) {
            if (c == '"') { in_str = 1; start = i; }
            continue;
        }
        if (c == '"') { in_str = 0; continue; }
        if (c != '\\') continue;
        if (i + 1 >= n) break;
        if (h[i + 1] == 'u' && i + 5 < n && h[i + 2] == '0' && h[i + 3] == '0' && h[i + 4] == '0' && h[i + 5] == '0')
            return (long)start;
        i++; /* skip the escaped character */
    }
    return -1;
}

/* Reads an array of non-negative integers (at most max_n of them). */
static specdec_status sd_st_uint_array(const cJSON *arr, int max_n, uint64_t *vals, int *n, const char *what,
                                       const char *fname, const char *tname, sd_errbuf *eb) {
    if (!cJSON_IsArray(arr))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: tensor '%s': '%s' must be an array", fname, tname, what);
    int k = 0;
    for (const cJSON *v = arr->child; v; v = v->next) {
        if (k >= max_n)
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: tensor '%s': '%s' has more than %d entries", fname, tname,
                           what, max_n);
        if (!sd_json_is_int(v) || v->valuedouble < 0)
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: tensor '%s': '%s'[%d] is not a non-negative integer",
                           fname, tname, what, k);
        vals[k++] = (uint64_t)v->valuedouble;
    }
    *n = k;
    return SPECDEC_OK;
}

/* Validates one tensor entry into *t (name not set). */
static specdec_status sd_st_parse_entry(const cJSON *e, const char *fname, const char *tname, sd_st_tensor *t,
                                        sd_errbuf *eb) {
    if (!cJSON_IsObject(e))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: tensor '%s': entry must be an object", fname, tname);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!dt || !shape || !offs)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: tensor '%s': missing key '%s'", fname, tname,
                       !dt ? "dtype" : !shape ? "shape" : "data_offsets");
    if (!cJSON_IsString(dt))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: tensor '%s': 'dtype' must be a string", fname, tname);
    if (!sd_st_dtype_parse(dt->valuestring, &t->dtype))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%.32s'", fname, tname,
                       dt->valuestring);
    uint64_t dims[SD_ST_MAX_DIMS];
    int nd = 0;
    if (cJSON_IsArray(shape) && cJSON_GetArraySize(shape) > SD_ST_MAX_DIMS)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "%s: tensor '%s': %d dimensions (at most %d supported)", fname,
                       tname, cJSON_GetArraySize(shape), SD_ST_MAX_DIMS);
    specdec_status st = sd_st_uint_array(shape, SD_ST_MAX_DIMS, dims, &nd, "shape", fname, tname, eb);
    if (st) return st;
    uint64_t ofs[2];
    int no = 0;
    st = sd_st_uint_array(offs, 2, ofs, &no, "data_offsets", fname, tname, eb);
    if (st) return st;
    if (no != 2)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: tensor '%s': 'data_offsets' must have 2 entries, has %d", fname,
                       tname, no);
    uint64_t nel = 1;
    for (int i = 0; i < nd; i++) {
        if (dims[i] > (uint64_t)INT64_MAX || __builtin_mul_overflow(nel, dims[i], &nel))
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: tensor '%s': shape product overflows", fname, tname);
        t->shape[i] = (int64_t)dims[i];
    }
    uint64_t bits;
    if (__builtin_mul_overflow(nel, (uint64_t)sd_st_dtype_bits(t->dtype), &bits))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: tensor '%s': byte size overflows (%llu elements of %s)", fname,
                       tname, (unsigned long long)nel, sd_st_dtype_name(t->dtype));
    if (bits % 8)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: tensor '%s': %llu elements of %s do not fill whole bytes", fname,
                       tname, (unsigned long long)nel, sd_st_dtype_name(t->dtype));
    if (ofs[1] < ofs[0])
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: tensor '%s': data_offsets end %llu < begin %llu", fname, tname,
                       (unsigned long long)ofs[1], (unsigned long long)ofs[0]);
    if (ofs[1] - ofs[0] != bits / 8)
        return sd_fail(eb, SPECDEC_ERR_FORMAT,
                       "%s: tensor '%s': data_offsets [%llu, %llu] span %llu bytes, but %llu elements of %s need %llu",
                       fname, tname, (unsigned long long)ofs[0], (unsigned long long)ofs[1],
                       (unsigned long long)(ofs[1] - ofs[0]), (unsigned long long)nel, sd_st_dtype_name(t->dtype),
                       (unsigned long long)(bits / 8));
    t->ndim = nd;
    t->n_elements = nel;
    t->begin = ofs[0];
    t->end = ofs[1];
    return SPECDEC_OK;
}

static int sd_st_cmp_name(const void *a, const void *b) {
    return strcmp(((const sd_st_tensor *)a)->name, ((const sd_st_tensor *)b)->name);
}

static int sd_st_cmp_offset(const void *a, const void *b) {
    const sd_st_tensor *x = *(const sd_st_tensor *const *)a, *y = *(const sd_st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static specdec_status sd_st_check_metadata(const cJSON *m, const char *fname, sd_errbuf *eb) {
    if (!cJSON_IsObject(m))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: '__metadata__' must be an object of strings", fname);
    for (const cJSON *v = m->child; v; v = v->next)
        if (!cJSON_IsString(v))
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: '__metadata__' key '%.64s' must map to a string", fname,
                           v->string ? v->string : "");
    return sd_json_check_unique(m, "'__metadata__'", fname, eb);
}

/* Validates the parsed header `root` and builds *out. */
static specdec_status sd_st_build(const cJSON *root, uint64_t data_size, const char *fname, sd_st_header *out,
                                  sd_errbuf *eb) {
    if (!cJSON_IsObject(root)) return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: header is not a JSON object", fname);
    size_t n = 0, name_bytes = 0;
    int n_meta = 0;
    sd_st_tensor tmp;
    for (const cJSON *e = root->child; e; e = e->next) {
        const char *nm = e->string ? e->string : "";
        if (!strcmp(nm, "__metadata__")) {
            if (++n_meta > 1) return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: duplicate key '__metadata__'", fname);
            specdec_status st = sd_st_check_metadata(e, fname, eb);
            if (st) return st;
            continue;
        }
        memset(&tmp, 0, sizeof tmp);
        specdec_status st = sd_st_parse_entry(e, fname, nm, &tmp, eb);
        if (st) return st;
        n++;
        name_bytes += strlen(nm) + 1;
    }
    if (n > (size_t)INT32_MAX) return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: too many tensors (%zu)", fname, n);
    sd_st_tensor *ts = sd_calloc(n ? n : 1, sizeof *ts);
    char *names = sd_malloc(name_bytes ? name_bytes : 1);
    const sd_st_tensor **order = sd_malloc((n ? n : 1) * sizeof *order);
    if (!ts || !names || !order) {
        sd_free(ts);
        sd_free(names);
        sd_free(order);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu tensor entries", fname, n);
    }
    size_t i = 0, pos = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        const char *nm = e->string ? e->string : "";
        if (!strcmp(nm, "__metadata__")) continue;
        sd_st_parse_entry(e, fname, nm, &ts[i], eb); /* validated above */
        size_t l = strlen(nm) + 1;
        memcpy(names + pos, nm, l);
        ts[i].name = names + pos;
        pos += l;
        i++;
    }
    specdec_status st = SPECDEC_OK;
    qsort(ts, n, sizeof *ts, sd_st_cmp_name);
    for (i = 1; i < n && !st; i++)
        if (!strcmp(ts[i - 1].name, ts[i].name))
            st = sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: tensor '%s': duplicate name in the header", fname, ts[i].name);
    if (!st) {
        /* Sorted by offset, the tensors must tile the data region exactly. */
        for (i = 0; i < n; i++) order[i] = &ts[i];
        qsort(order, n, sizeof *order, sd_st_cmp_offset);
        uint64_t expect = 0;
        for (i = 0; i < n && !st; i++) {
            const sd_st_tensor *t = order[i];
            if (t->begin != expect)
                st = sd_fail(eb, SPECDEC_ERR_FORMAT,
                             "%s: tensor '%s': data_offsets begin %llu, expected %llu (%s previous tensor)", fname,
                             t->name, (unsigned long long)t->begin, (unsigned long long)expect,
                             t->begin < expect ? "overlaps the" : "hole after the");
            expect = t->end;
        }
        if (!st && expect != data_size)
            st = sd_fail(eb, SPECDEC_ERR_FORMAT,
                         "%s: tensors cover %llu bytes but the data region after the header is %llu bytes", fname,
                         (unsigned long long)expect, (unsigned long long)data_size);
    }
    sd_free(order);
    if (st) {
        sd_free(ts);
        sd_free(names);
        return st;
    }
    out->tensors = ts;
    out->n_tensors = (int32_t)n;
    out->names = names;
    out->data_size = data_size;
    return SPECDEC_OK;
}

specdec_status sd_st_parse_header(const uint8_t *data, size_t size, const char *fname, sd_st_header *out,
                                  sd_errbuf *eb) {
    memset(out, 0, sizeof *out);
    if (!fname) fname = "(safetensors)";
    if (size < 8)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: file is %zu bytes, too short for the 8-byte header length", fname,
                       size);
    if (!data) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: NULL data", fname);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | data[i];
    if (hlen > SD_ST_MAX_HEADER)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: header length %llu exceeds the limit of %u bytes", fname,
                       (unsigned long long)hlen, SD_ST_MAX_HEADER);
    if (hlen > size - 8)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: header length %llu runs past the end of the file (%zu bytes)",
                       fname, (unsigned long long)hlen, size);
    const char *h = (const char *)data + 8;
    if (hlen == 0 || h[0] != '{')
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: header does not start with '{'", fname);
    if (memchr(h, 0, hlen)) return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: header contains a NUL byte", fname);
    if (!sd_utf8_valid((const uint8_t *)h, hlen))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: header is not valid UTF-8", fname);
    long nul = sd_st_find_nul_escape(h, hlen);
    if (nul >= 0) {
        int shown = (int)((size_t)hlen - (size_t)nul < 64 ? (size_t)hlen - (size_t)nul : 64);
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: a name in the header contains NUL (\\u0000): %.*s", fname, shown,
                       h + nul);
    }
    cJSON *root = NULL;
    specdec_status st = sd_json_parse(h, hlen, fname, &root, eb);
    if (st) return st;
    st = sd_st_build(root, (uint64_t)size - 8 - hlen, fname, out, eb);
    cJSON_Delete(root);
    if (st) return st;
    out->data_start = 8 + hlen;
    return SPECDEC_OK;
}

void sd_st_header_free(sd_st_header *h) {
    if (!h) return;
    sd_free(h->tensors);
    sd_free(h->names);
    memset(h, 0, sizeof *h);
}

const sd_st_tensor *sd_st_find(const sd_st_header *h, const char *name) {
    if (!h || !h->n_tensors) return NULL;
    sd_st_tensor key;
    memset(&key, 0, sizeof key);
    key.name = name;
    return bsearch(&key, h->tensors, (size_t)h->n_tensors, sizeof key, sd_st_cmp_name);
}

void sd_st_close(sd_st_file *f) {
    if (!f) return;
    if (f->base) {
        if (f->mmapped) munmap((void *)f->base, f->size);
        else sd_free((void *)f->base);
    }
    sd_st_header_free(&f->hdr);
    sd_free(f->path);
    sd_free(f);
}

specdec_status sd_st_map(const char *path, int use_mmap, sd_st_file **out, sd_errbuf *eb) {
    *out = NULL;
    sd_st_file *f = sd_calloc(1, sizeof *f);
    if (!f) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    f->path = sd_strdup(path);
    if (!f->path) {
        sd_free(f);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    specdec_status st = SPECDEC_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0) {
        st = sd_fail(eb, SPECDEC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = sd_fail(eb, SPECDEC_ERR_IO, "%s: not a regular file", path);
        goto fail;
    }
    if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX) {
        st = sd_fail(eb, SPECDEC_ERR_IO, "%s: file too large for this address space", path);
        goto fail;
    }
    f->size = (size_t)sb.st_size;
    if (f->size < 8) {
        /* Nothing to map; the parser reports the short file. */
    } else if (use_mmap) {
        void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            st = sd_fail(eb, SPECDEC_ERR_IO, "%s: mmap of %zu bytes failed: %s", path, f->size, strerror(errno));
            goto fail;
        }
        f->base = p;
        f->mmapped = 1;
    } else {
        uint8_t *buf = sd_malloc(f->size);
        if (!buf) {
            st = sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory reading %zu bytes", path, f->size);
            goto fail;
        }
        f->base = buf;
        size_t got = 0;
        while (got < f->size) {
            ssize_t r = read(fd, buf + got, f->size - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                st = sd_fail(eb, SPECDEC_ERR_IO, "%s: read failed after %zu of %zu bytes: %s", path, got, f->size,
                             r < 0 ? strerror(errno) : "file shrank");
                goto fail;
            }
            got += (size_t)r;
        }
    }
    close(fd);
    *out = f;
    return SPECDEC_OK;
fail:
    if (fd >= 0) close(fd);
    sd_st_close(f);
    return st;
}

specdec_status sd_st_open(const char *path, int use_mmap, sd_st_file **out, sd_errbuf *eb) {
    sd_st_file *f = NULL;
    specdec_status st = sd_st_map(path, use_mmap, &f, eb);
    if (!st) st = sd_st_parse_header(f->base, f->size, path, &f->hdr, eb);
    if (st) {
        sd_st_close(f);
        f = NULL;
    }
    *out = f;
    return st;
}
