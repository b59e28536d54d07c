/* sd_cpu_dequant.h — reading weights of any stored dtype (F32/F16/BF16) as fp32.
 *
 * Weights stay in the checkpoint's dtype (models/sd_model.h); the CPU reference
 * converts on the fly, exactly (every f16/bf16 value is representable in fp32), so
 * the math below does not depend on the storage dtype beyond the stored values. */
#ifndef SD_CPU_DEQUANT_H
#define SD_CPU_DEQUANT_H

#include <stdint.h>
#include "sd_weights.h"
#include "sd_math.h"

/* Value idx of an SD_MXFP4 matrix t (flat, row-major; see sd_weights.h). */
float sd_cpu_mxfp4_elem(const sd_tensor *t, int64_t idx);
/* float8_e4m3fn code b as a float (exact; S.1111.111 is NaN) and element idx of an SD_FP8 matrix
 * (code x its block's scale, core/sd_weights.h). */
float sd_cpu_fp8_e4m3(uint8_t b);
float sd_cpu_fp8_elem(const sd_tensor *t, int64_t idx);

/* Value (row, col) of an SD_INT4 / SD_INT8 matrix (core/sd_weights.h): (float)(code - zero) x scale of
 * the column's group, exact. */
static inline float sd_cpu_int4_value(const sd_tensor *t, int64_t row, int64_t col) { return sd_int_value(t, row, col); }

/* Element idx (flat, row-major) of t as fp32. */
static inline float sd_cpu_elem(const sd_tensor *t, int64_t idx) {
    switch (t->dtype) {
    case SD_F16: return sd_f16_to_f32(((const uint16_t *)t->data)[idx]);
    case SD_BF16: return sd_bf16_to_f32(((const uint16_t *)t->data)[idx]);
    case SD_MXFP4: return sd_cpu_mxfp4_elem(t, idx);
    case SD_FP8: return sd_cpu_fp8_elem(t, idx);
    case SD_INT4:
    case SD_INT8: return sd_cpu_int4_value(t, idx / t->shape[1], idx % t->shape[1]);
    default: return ((const float *)t->data)[idx];
    }
}

/* Columns of a 2-D tensor; the length of a 1-D one. */
static inline int64_t sd_cpu_cols(const sd_tensor *t) { return t->ndim == 2 ? t->shape[1] : t->shape[0]; }

/* Row `row` of an SD_MXFP4 matrix t as cols floats: code c of a block with scale byte s is
 * e2m1(c) * 2^(s - 127), one exact IEEE product (a code has at most 2 significant bits and the
 * scale is a power of two; 6 * 2^127 overflows to inf), so every value is the float of
 * transformers' BF16 dequantisation (models/sd_mxfp4.h). */
void sd_cpu_mxfp4_row(const sd_tensor *t, int64_t row, float *out);

/* out[0..n) = t[flat offset first .. first+n) as fp32. */
void sd_cpu_dequant(const sd_tensor *t, int64_t first, int64_t n, float *out);

/* Pointer to row `row` of t as fp32: the weights themselves when t is F32, else the
 * row converted into buf (cols floats). */
const float *sd_cpu_row_f32(const sd_tensor *t, int64_t row, float *buf);

#endif
