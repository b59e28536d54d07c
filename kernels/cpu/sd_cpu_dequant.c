/* sd_cpu_dequant.c — F32/F16/BF16 weights to fp32 (see sd_cpu_dequant.h). */
#include "sd_cpu_dequant.h"
#include "sd_cpu_sanitize.h"

/* The conversion loop, uninstrumented under the sanitizers: sd_cpu_dequant checks its two ranges
 * (sd_cpu_sanitize.h). */
static SD_CPU_UNINSTRUMENTED void dequant_loop(sd_dtype dtype, const void *src, int64_t n, float *out) {
    if (dtype == SD_F16) {
        const uint16_t *p = (const uint16_t *)src;
        for (int64_t i = 0; i < n; i++) out[i] = sd_f16_to_f32(p[i]);
    } else if (dtype == SD_BF16) {
        const uint16_t *p = (const uint16_t *)src;
        for (int64_t i = 0; i < n; i++) out[i] = sd_bf16_to_f32(p[i]);
    } else {
        const float *p = (const float *)src;
        for (int64_t i = 0; i < n; i++) out[i] = p[i];
    }
}

/* The 16 E2M1 code values and the 255 scales 2^(s - 127) (s = 0..254; 0xFF, NaN, never reaches
 * here: the loader refuses it), as exact floats: 2^-127 is a float subnormal. */
static const float e2m1_value[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                     -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

static float mxfp4_scale(uint8_t s) {
    /* 2^(s - 127) built from its bits: normal for s >= 1 (exponent field s), subnormal 2^-127 for 0 */
    union {
        uint32_t u;
        float f;
    } v;
    v.u = s ? (uint32_t)s << 23 : 0x00400000u;
    return v.f;
}

static SD_CPU_UNINSTRUMENTED void mxfp4_loop(const uint8_t *blocks, const uint8_t *scales, int64_t n_blocks,
                                             float *out) {
    for (int64_t g = 0; g < n_blocks; g++) {
        const float sc = mxfp4_scale(scales[g]);
        const uint8_t *b = blocks + g * 16;
        float *o = out + g * 32;
        for (int j = 0; j < 16; j++) {
            o[2 * j] = e2m1_value[b[j] & 15] * sc;
            o[2 * j + 1] = e2m1_value[b[j] >> 4] * sc;
        }
    }
}

void sd_cpu_mxfp4_row(const sd_tensor *t, int64_t row, float *out) {
    const int64_t cols = t->shape[1], G = cols / 32;
    const uint8_t *blocks = (const uint8_t *)t->data + (size_t)row * sd_mxfp4_row_bytes(cols);
    const uint8_t *scales = t->scales + (size_t)(row * G);
    if (G > 0) {
        sd_cpu_check_read(blocks, (size_t)G * 16);
        sd_cpu_check_read(scales, (size_t)G);
        sd_cpu_check_write(out, (size_t)cols * sizeof(float));
    }
    mxfp4_loop(blocks, scales, G, out);
}

float sd_cpu_fp8_e4m3(uint8_t b) {
    /* float8_e4m3fn: sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities, S.1111.111 NaN */
    const uint32_t sign = (uint32_t)(b >> 7) << 31, e = (b >> 3) & 15u, m = b & 7u;
    union {
        uint32_t u;
        float f;
    } v;
    if (e == 15 && m == 7) {
        v.u = sign | 0x7fc00000u;
    } else if (e == 0) { /* subnormal: m x 2^-9, exact */
        v.f = (float)m * 0x1p-9f;
        v.u |= sign;
    } else {
        v.u = sign | ((e + 120u) << 23) | (m << 20); /* (1 + m/8) 2^(e - 7) */
    }
    return v.f;
}

/* Row `row` of an SD_FP8 matrix (core/sd_weights.h): code x its block's scale, cols floats. */
static void fp8_row(const sd_tensor *t, int64_t row, float *out) {
    const int64_t cols = t->shape[1];
    const float *sc = sd_fp8_scales(t);
    const int64_t bm = (int64_t)sc[0], bn = (int64_t)sc[1], scols = (cols + bn - 1) / bn;
    const float *srow = sc + 2 + (row / bm) * scols;
    const uint8_t *codes = (const uint8_t *)t->data + (size_t)(row * cols);
    sd_cpu_check_read(codes, (size_t)cols);
    sd_cpu_check_write(out, (size_t)cols * sizeof(float));
    for (int64_t c = 0; c < cols; c++) out[c] = sd_cpu_fp8_e4m3(codes[c]) * srow[c / bn];
}

float sd_cpu_fp8_elem(const sd_tensor *t, int64_t idx) {
    const int64_t cols = t->shape[1], row = idx / cols, col = idx % cols;
    const float *sc = sd_fp8_scales(t);
    const int64_t bm = (int64_t)sc[0], bn = (int64_t)sc[1], scols = (cols + bn - 1) / bn;
    return sd_cpu_fp8_e4m3(((const uint8_t *)t->data)[idx]) * sc[2 + (row / bm) * scols + col / bn];
}

float sd_cpu_mxfp4_elem(const sd_tensor *t, int64_t idx) {
    const int64_t cols = t->shape[1], row = idx / cols, col = idx % cols;
    const uint8_t byte = ((const uint8_t *)t->data)[(size_t)row * sd_mxfp4_row_bytes(cols) + (size_t)(col / 2)];
    return e2m1_value[(col & 1) ? byte >> 4 : byte & 15] * mxfp4_scale(t->scales[row * (cols / 32) + col / 32]);
}

/* Row `row` of an SD_INT4 / SD_INT8 matrix: its codes, scales and zeros checked as read (sd_cpu_sanitize.h). */
static void int4_row(const sd_tensor *t, int64_t row, float *out) {
    const int64_t cols = t->shape[1];
    const sd_int4_meta *q = sd_int4_meta_of(t);
    const size_t rb = sd_int_row_bytes(t->dtype, cols);
    sd_cpu_check_read((const uint8_t *)t->data + (size_t)row * rb, rb);
    sd_cpu_check_read(q->scale + row * q->n_groups, (size_t)q->n_groups * sizeof(float));
    sd_cpu_check_read(q->zero + row * q->n_groups, (size_t)q->n_groups * sizeof(int32_t));
    if (q->bias) sd_cpu_check_read(q->bias + row * q->n_groups, (size_t)q->n_groups * sizeof(float));
    sd_cpu_check_write(out, (size_t)cols * sizeof(float));
    for (int64_t c = 0; c < cols; c++) out[c] = sd_cpu_int4_value(t, row, c);
}

void sd_cpu_dequant(const sd_tensor *t, int64_t first, int64_t n, float *out) {
    if (sd_dtype_is_int(t->dtype)) {
        const int64_t cols = t->shape[1];
        for (int64_t i = 0; i < n; i++) out[i] = sd_cpu_int4_value(t, (first + i) / cols, (first + i) % cols);
        return;
    }
    if (t->dtype == SD_FP8) {
        for (int64_t i = 0; i < n; i++) out[i] = sd_cpu_fp8_elem(t, first + i);
        return;
    }
    if (t->dtype == SD_MXFP4) { /* element by element: any range (whole rows go through sd_cpu_mxfp4_row) */
        for (int64_t i = 0; i < n; i++) out[i] = sd_cpu_mxfp4_elem(t, first + i);
        return;
    }
    size_t elem = t->dtype == SD_F16 || t->dtype == SD_BF16 ? sizeof(uint16_t) : sizeof(float); /* as the loop reads */
    const char *src = (const char *)t->data + (size_t)first * elem;
    if (n > 0) {
        sd_cpu_check_read(src, (size_t)n * elem);
        sd_cpu_check_write(out, (size_t)n * sizeof(float));
    }
    dequant_loop(t->dtype, src, n, out);
}

const float *sd_cpu_row_f32(const sd_tensor *t, int64_t row, float *buf) {
    int64_t cols = sd_cpu_cols(t);
    if (t->dtype == SD_F32) return (const float *)t->data + row * cols;
    if (t->dtype == SD_MXFP4) {
        sd_cpu_mxfp4_row(t, row, buf);
        return buf;
    }
    if (t->dtype == SD_FP8) {
        fp8_row(t, row, buf);
        return buf;
    }
    if (sd_dtype_is_int(t->dtype)) {
        int4_row(t, row, buf);
        return buf;
    }
    sd_cpu_dequant(t, row * cols, cols, buf);
    return buf;
}
