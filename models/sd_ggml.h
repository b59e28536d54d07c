/* sd_ggml.h — a GGUF file's ggml block-quantized matrices repacked into SD_INT4 / SD_INT8
 * (core/sd_weights.h, cfg.int4_fmt SD_INT4_GGUF).
 *
 * A ggml row of `cols` values is cols / block blocks; each block holds fp16 scale(s) and packed codes.
 * Every type below is, per block or sub-block g of `group` values, value = (q - zero) x scale [- bias]
 * with an integer code q, so it becomes one sd_int4_meta group: scale = d (or d x the sub-block's
 * integer scale, exact in float), zero the type's offset, bias = dmin x the sub-block's integer min
 * (Q4_1 / Q5_1: -m). The products are exact in float; only the bias subtraction rounds, as in ggml's
 * and gguf-py's dequantisation (same operands, same order), so every value is theirs bitwise.
 *
 *   type  group  codes  zero  bias        type  group  codes  zero  bias
 *   Q4_0   32    4-bit   8    -           Q2_K   16    2-bit   0    dmin x min
 *   Q4_1   32    4-bit   0    -m          Q3_K   16    3-bit   4    -
 *   Q5_0   32    5-bit  16    -           Q4_K   32    4-bit   0    dmin x min
 *   Q5_1   32    5-bit   0    -m          Q5_K   32    5-bit   0    dmin x min
 *   Q8_0   32    8-bit 128    -           Q6_K   16    6-bit  32    -
 *   IQ4_NL 32    8-bit 128    -           IQ4_XS 32    8-bit 128    -
 *   IQ2_XXS 32   8-bit 128    -           IQ2_XS 16    8-bit 128    -
 *   IQ2_S  16    8-bit 128    -           IQ3_XXS 32   8-bit 128    -
 *   IQ3_S  32    8-bit 128    -           IQ1_S  32    8-bit 128    -
 *   IQ1_M  16    8-bit 128    -
 * (Q8_0's signed codes are stored + 128; IQ4_NL / IQ4_XS's 4-bit indices into ggml's non-linear table
 * kvalues_iq4nl are stored as the table's int8 value + 128, their scale d / d x (ls - 32); IQ1-IQ3's grid
 * indices as the signed codebook values + 128 (sd_ggml_iq_grids.h), IQ1's g + delta as 8 g +- 1 with the
 * scale / 8.) Codes of up to 4 bits take SD_INT4 (two per byte), wider
 * ones SD_INT8. The layout: the meta, scales, zeros and biases as [rows, groups] floats / int32, then
 * the codes row-major, 64-byte aligned. This file has no I/O; the loader (models/sd_gguf_load.c) checks
 * shapes and sizes. */
#ifndef SD_GGML_H
#define SD_GGML_H

#include <stddef.h>
#include <stdint.h>

#include "sd_weights.h"

/* 1 when ggml type `type` loads through sd_ggml_repack. */
int sd_ggml_repackable(uint32_t type);
/* Bytes of the buffer sd_ggml_repack fills for a [rows, cols] matrix (cols a multiple of the type's block). */
size_t sd_ggml_bytes(uint32_t type, int64_t rows, int64_t cols);
/* Fills buf (sd_ggml_bytes of zeroed, 8-byte aligned memory) from src (rows x cols / block blocks, row-major,
 * little-endian) and *out (SD_INT4 / SD_INT8 [rows, cols] pointing into buf). 0 (the reason in why: the
 * first such row) when a scale or min is not finite. threads: rows split over that many threads (at most
 * 8); 0 = one per physical core (sd_cpu_default_threads) for matrices of 4M values or more, else one. The
 * result is the same for any split (each row written by one thread). */
int sd_ggml_repack(uint32_t type, const uint8_t *src, int64_t rows, int64_t cols, int threads, void *buf,
                   sd_tensor *out, char *why, size_t why_cap);

#endif
