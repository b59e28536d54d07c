/* sd_safetensors.h — safetensors files: header parsing with full validation, and
 * opening a file (memory-mapped or read into memory).
 *
 * Layout of a file: 8-byte little-endian header length N, N bytes of UTF-8 JSON
 * ({"name": {"dtype": "F16", "shape": [..], "data_offsets": [begin, end]}, ...,
 * optional "__metadata__": {string: string}}), then the data region. Offsets are
 * relative to the start of the data region. The validation follows the format's
 * reference implementation (see RELIABILITY.md): tensors must tile the data region
 * exactly, sizes must match dtype x shape, names must be unique and NUL-free. */
#ifndef SD_SAFETENSORS_H
#define SD_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "sd_error.h"
#include "sd_weights.h"

/* Largest header accepted (the reference implementation's limit). */
#define SD_ST_MAX_HEADER 100000000u
/* Most dimensions a tensor may have. */
#define SD_ST_MAX_DIMS 8

/* Every dtype of the safetensors format. Only F32/F16/BF16 load as weights. */
typedef enum sd_st_dtype {
    SD_ST_BOOL = 0, SD_ST_U8, SD_ST_I8, SD_ST_F8_E5M2, SD_ST_F8_E4M3, SD_ST_F8_E8M0,
    SD_ST_I16, SD_ST_U16, SD_ST_F16, SD_ST_BF16,
    SD_ST_I32, SD_ST_U32, SD_ST_F32,
    SD_ST_I64, SD_ST_U64, SD_ST_F64, SD_ST_C64,
    SD_ST_F4, SD_ST_F6_E2M3, SD_ST_F6_E3M2,
    SD_ST_DTYPE_COUNT
} sd_st_dtype;

typedef struct sd_st_tensor {
    const char *name;            /* NUL-terminated, owned by the header */
    sd_st_dtype dtype;
    int32_t ndim;                /* 0..SD_ST_MAX_DIMS (0 = scalar) */
    int64_t shape[SD_ST_MAX_DIMS];
    uint64_t n_elements;         /* product of shape (1 for a scalar) */
    uint64_t begin, end;         /* byte offsets in the data region */
    uint32_t gguf_quant;         /* 0, or 1 + the ggml type (core/sd_gguf.h) of a GGUF block-quantized tensor
                                    (dtype SD_ST_U8, shape the logical [rows, cols]: models/sd_gguf_load.c) */
} sd_st_tensor;

typedef struct sd_st_header {
    sd_st_tensor *tensors;       /* [n_tensors], sorted by name (bsearch with sd_st_find) */
    int32_t n_tensors;
    char *names;                 /* storage of all names */
    uint64_t data_start;         /* 8 + header length: file offset of the data region */
    uint64_t data_size;          /* bytes of the data region */
} sd_st_header;

/* Name ("F16") and size in bits of a dtype. */
const char *sd_st_dtype_name(sd_st_dtype t);
unsigned sd_st_dtype_bits(sd_st_dtype t);
/* The weight dtype of stored tensor t (F32, F16 or BF16) into *out; any other dtype:
 * SPECDEC_ERR_UNSUPPORTED naming the file `path` and the tensor `name`. */
specdec_status sd_st_weight_dtype(const sd_st_tensor *t, const char *path, const char *name, sd_dtype *out);

/* Parse and validate a whole safetensors file held in data[0..size). `fname` names it
 * in error messages. On success *out owns its arrays (free with sd_st_header_free);
 * on failure *out is zeroed and nothing is allocated. Never reads outside data. */
specdec_status sd_st_parse_header(const uint8_t *data, size_t size, const char *fname, sd_st_header *out,
                                  sd_errbuf *eb);
void sd_st_header_free(sd_st_header *h);
/* Tensor called `name`, or NULL. */
const sd_st_tensor *sd_st_find(const sd_st_header *h, const char *name);

/* One opened file: its bytes (mapped or owned) and its parsed header. */
typedef struct sd_st_file {
    char *path;
    const uint8_t *base;         /* the whole file */
    size_t size;
    int mmapped;                 /* 1: base is an mmap; 0: base is an sd_malloc copy */
    sd_st_header hdr;
} sd_st_file;

/* Open and map (use_mmap=1) or read (0) `path`, header not parsed (hdr zeroed; a GGUF file's loader
 * fills it). On failure *out = NULL. */
specdec_status sd_st_map(const char *path, int use_mmap, sd_st_file **out, sd_errbuf *eb);
/* Open, map (use_mmap=1) or read (0), and validate `path`. On failure *out = NULL. */
specdec_status sd_st_open(const char *path, int use_mmap, sd_st_file **out, sd_errbuf *eb);
void sd_st_close(sd_st_file *f);
/* Start of a tensor's bytes in the file (may be misaligned for its dtype). */
static inline const uint8_t *sd_st_data(const sd_st_file *f, const sd_st_tensor *t) {
    return f->base + f->hdr.data_start + t->begin;
}

#endif
