/* sd_int4.h — GPTQ, AWQ and compressed-tensors 4-bit checkpoints' projections repacked into SD_INT4
 * (core/sd_weights.h).
 *
 * A quantized projection `P` is stored as `P.qweight` (int32 words of eight 4-bit codes),
 * `P.qzeros` (int32 words of eight 4-bit zero points per group), `P.scales` (one F16 / BF16 / F32
 * scale per group and output) and, for GPTQ, `P.g_idx` (int32: each input column's group); by
 * compressed-tensors as `P.weight_packed`, `P.weight_scale`, `P.weight_zero_point` (asymmetric only),
 * `P.weight_g_idx` (activation ordering only) and `P.weight_shape`. The word layouts are
 * sd_int4_fmt's (core/sd_weights.h). Value (out o, in i) = scale[g][o] x (q(o, i) - zero[g][o]),
 * g = g_idx[i] or i / group_size.
 *
 * sd_int4_repack turns these into one owned buffer: the sd_int4_meta, its scales and zeros as
 * [rows, n_groups], the column groups when they are not i / group (act-order), and the codes
 * row-major, two per byte (even column in the low nibble). The loader (models/sd_model_load.c)
 * finds and checks the tensors; this file has no I/O. */
#ifndef SD_INT4_H
#define SD_INT4_H

#include <stddef.h>
#include <stdint.h>

#include "sd_weights.h"

/* One projection's checkpoint tensors (raw little-endian bytes, shapes checked by the caller). */
typedef struct sd_int4_src {
    sd_int4_fmt fmt;
    int32_t bits;           /* 4 (eight codes per int32 word: SD_INT4) or 8 (four: SD_INT8; not AWQ) */
    int64_t rows, cols;     /* out_features (a multiple of 8), in_features (a multiple of 8) */
    int32_t group;          /* input columns per group; n_groups = ceil(cols / group) */
    const uint8_t *qweight; /* GPTQ [cols / p, rows], AWQ [cols, rows / p], CT [rows, cols / p] int32, p = 32 / bits */
    const uint8_t *qzeros;  /* [n_groups, rows / p] int32 (CT: [rows / p, n_groups]; NULL: symmetric, zero 2^(bits-1)) */
    const uint8_t *scales;  /* [n_groups, rows] of scales_dt (CT: [rows, n_groups]) */
    sd_dtype scales_dt;     /* SD_F16, SD_BF16 or SD_F32 */
    const uint8_t *g_idx;   /* GPTQ, CT: int32 [cols], or NULL (then i / group) */
} sd_int4_src;

/* Groups of a [rows, cols] projection in groups of `group` columns. */
static inline int64_t sd_int4_groups(int64_t cols, int32_t group) { return (cols + group - 1) / group; }

/* Bytes of the buffer sd_int4_repack fills for bits-bit codes (the g_idx array counted in case it is kept). */
size_t sd_int4_bytes(int32_t bits, int64_t rows, int64_t cols, int32_t group);

/* Fills buf (sd_int4_bytes of zeroed memory, 8-byte aligned) and *out (an SD_INT4 / SD_INT8 [rows, cols]
 * tensor pointing into buf). Refuses (SPECDEC_ERR_MODEL_MISMATCH, the reason in why) a scale that
 * is not finite or a g_idx entry outside [0, n_groups). g_idx equal to i / group is dropped (the
 * fast path). */
int sd_int4_repack(const sd_int4_src *s, void *buf, sd_tensor *out, char *why, size_t why_cap);

#endif
