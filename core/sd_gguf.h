/* sd_gguf.h — GGUF files (llama.cpp's single-file checkpoints): parsing with full validation.
 *
 * Layout (little-endian; versions 2 and 3): "GGUF", uint32 version, uint64 tensor count, uint64
 * metadata count; the metadata as (string key, uint32 type, value) entries, a string being a uint64
 * length and its bytes (no NUL), an array a uint32 element type, a uint64 count and the elements;
 * then per tensor: string name, uint32 n_dims (1..4), n_dims uint64 extents ne[0..] (ne[0] the
 * innermost, contiguous one: a PyTorch [rows, cols] matrix is ne = {cols, rows}), uint32 ggml type,
 * uint64 offset into the data region; then padding to `general.alignment` (default 32) and the data
 * region, each tensor at an aligned offset. Rows of a block-quantized type are whole blocks
 * (sd_ggml_type_info). Nothing is trusted: every count, length, type and extent is checked against the
 * file's size before use, and a tensor's bytes must lie inside the data region. */
#ifndef SD_GGUF_H
#define SD_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "sd_error.h"

/* Metadata value types (the format's numbers). */
typedef enum sd_gguf_vtype {
    SD_GGUF_U8 = 0, SD_GGUF_I8 = 1, SD_GGUF_U16 = 2, SD_GGUF_I16 = 3, SD_GGUF_U32 = 4, SD_GGUF_I32 = 5,
    SD_GGUF_F32 = 6, SD_GGUF_BOOL = 7, SD_GGUF_STRING = 8, SD_GGUF_ARRAY = 9, SD_GGUF_U64 = 10,
    SD_GGUF_I64 = 11, SD_GGUF_F64 = 12, SD_GGUF_VTYPE_COUNT
} sd_gguf_vtype;

/* ggml tensor types (the format's numbers) that specdec names; any other number is refused. */
typedef enum sd_ggml_type {
    SD_GGML_F32 = 0, SD_GGML_F16 = 1, SD_GGML_Q4_0 = 2, SD_GGML_Q4_1 = 3, SD_GGML_Q5_0 = 6, SD_GGML_Q5_1 = 7,
    SD_GGML_Q8_0 = 8, SD_GGML_Q8_1 = 9, SD_GGML_Q2_K = 10, SD_GGML_Q3_K = 11, SD_GGML_Q4_K = 12,
    SD_GGML_Q5_K = 13, SD_GGML_Q6_K = 14, SD_GGML_Q8_K = 15, SD_GGML_IQ2_XXS = 16, SD_GGML_IQ2_XS = 17,
    SD_GGML_IQ3_XXS = 18, SD_GGML_IQ1_S = 19, SD_GGML_IQ4_NL = 20, SD_GGML_IQ3_S = 21, SD_GGML_IQ2_S = 22,
    SD_GGML_IQ4_XS = 23, SD_GGML_I8 = 24, SD_GGML_I16 = 25, SD_GGML_I32 = 26, SD_GGML_I64 = 27,
    SD_GGML_F64 = 28, SD_GGML_IQ1_M = 29, SD_GGML_BF16 = 30, SD_GGML_TQ1_0 = 34, SD_GGML_TQ2_0 = 35,
    SD_GGML_MXFP4 = 39, SD_GGML_TYPE_END = 40
} sd_ggml_type;

#define SD_GGUF_MAX_DIMS 4
/* Hostile-file limits (far above any published checkpoint). */
#define SD_GGUF_MAX_TENSORS 1000000u
#define SD_GGUF_MAX_KV 100000u
#define SD_GGUF_MAX_KEY 65535u

/* A string inside the file (not NUL-terminated). */
typedef struct sd_gguf_str {
    const char *s;
    uint64_t len;
} sd_gguf_str;

/* One metadata entry. */
typedef struct sd_gguf_kv {
    const char *key;         /* NUL-terminated copy (keys are checked to hold no NUL) */
    sd_gguf_vtype type;
    sd_gguf_vtype arr_type;  /* SD_GGUF_ARRAY: the elements' type (arrays of arrays are refused) */
    uint64_t n;              /* SD_GGUF_ARRAY: element count; 1 otherwise */
    const uint8_t *data;     /* the value's bytes in the file (an array's first element; a string's bytes) */
    uint64_t len;            /* SD_GGUF_STRING: byte length */
    sd_gguf_str *strs;       /* an array of strings: its [n] elements (owned); else NULL */
} sd_gguf_kv;

typedef struct sd_gguf_tensor {
    const char *name;        /* NUL-terminated copy */
    sd_ggml_type type;
    int32_t ndim;            /* 1..SD_GGUF_MAX_DIMS */
    int64_t ne[SD_GGUF_MAX_DIMS]; /* extents, ne[0] innermost; unused ones 1 */
    uint64_t n_elements;
    uint64_t offset;         /* bytes from the data region's start (aligned) */
    uint64_t nbytes;
} sd_gguf_tensor;

typedef struct sd_gguf {
    uint32_t version;
    uint32_t alignment;
    sd_gguf_kv *kv;          /* [n_kv], in file order */
    uint64_t n_kv;
    sd_gguf_tensor *tensors; /* [n_tensors], in file order */
    uint64_t n_tensors;
    uint64_t data_start;     /* file offset of the data region */
    uint64_t data_size;
    char *names;             /* storage of keys and tensor names */
} sd_gguf;

/* Elements per block and bytes per block of a ggml type; 0 when specdec does not know the type. */
typedef struct sd_ggml_type_info {
    const char *name;
    uint32_t block;
    uint32_t bytes;
} sd_ggml_type_info;
sd_ggml_type_info sd_ggml_type_info_of(uint32_t type);

/* 1 when data[0..size) starts with the GGUF magic. */
int sd_gguf_is(const uint8_t *data, size_t size);

/* Parses and validates a whole GGUF file held in data[0..size); `fname` names it in messages.
 * On success *out owns its arrays (sd_gguf_free); on failure *out is zeroed and nothing is
 * allocated (SPECDEC_ERR_FORMAT naming the defect). Never reads outside data. */
specdec_status sd_gguf_parse(const uint8_t *data, size_t size, const char *fname, sd_gguf *out, sd_errbuf *eb);
void sd_gguf_free(sd_gguf *g);

/* The entry `key`, or NULL. */
const sd_gguf_kv *sd_gguf_find(const sd_gguf *g, const char *key);
/* The tensor `name`, or NULL. */
const sd_gguf_tensor *sd_gguf_find_tensor(const sd_gguf *g, const char *name);

/* Typed reads: 1 on success; 0 when the entry is missing or not of a compatible type (any integer type
 * for an integer in range; F32 / F64 / integers for a double; a string for a string). */
int sd_gguf_get_i64(const sd_gguf *g, const char *key, int64_t *out);
int sd_gguf_get_f64(const sd_gguf *g, const char *key, double *out);
int sd_gguf_get_bool(const sd_gguf *g, const char *key, int *out);
int sd_gguf_get_str(const sd_gguf *g, const char *key, sd_gguf_str *out);
/* Element i of a numeric array entry as a double / int64 (0 when not numeric or out of range). */
int sd_gguf_arr_f64(const sd_gguf_kv *kv, uint64_t i, double *out);
int sd_gguf_arr_i64(const sd_gguf_kv *kv, uint64_t i, int64_t *out);

#endif
