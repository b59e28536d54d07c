/* sd_cpu_matmul_x86.h — the AVX2 + FMA + F16C path of sd_cpu_matmul (internal to
 * kernels/cpu; sd_cpu_matmul.c dispatches to it, see sd_cpu_matmul.h "ISA paths"). */
#ifndef SD_CPU_MATMUL_X86_H
#define SD_CPU_MATMUL_X86_H

#include <stdint.h>
#include "sd_weights.h"
#include "sd_cpu_sanitize.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define SD_CPU_X86_AVX2 1
#else
#define SD_CPU_X86_AVX2 0
#endif

/* How many tokens one call of sd_cpu_matmul_x86 takes (the caller splits larger batches). */
#define SD_CPU_X86_TOKEN_CHUNK 64

typedef struct sd_x86_mm {
    const void *w; /* [rows, cols] in dtype */
    sd_dtype dtype;
    int64_t rows, cols;
    const sd_tensor *bias; /* NULL: none */
    int64_t o_begin, o_end; /* the output rows computed: [o_begin, o_end) within [0, rows) */
    const uint8_t *scales;  /* SD_MXFP4: [rows, cols / 32] (w: the code blocks); SD_FP8: its float block scales;
                               SD_INT4 / SD_INT8: its sd_int4_meta (core/sd_weights.h); else NULL */
} sd_x86_mm;

/* 1 when this CPU has AVX2, FMA and F16C (and this build can use them). */
int sd_cpu_x86_avx2_supported(void);

/* y[t][o] = (float)(sd_cpu_dot(W[o, :], x[t], cols) + bias[o]) for t < n, o in [o_begin, o_end),
 * bit for bit (whatever the range: each value depends on its own row and token only).
 * The caller has checked every range (sd_cpu_sanitize.h). */
void sd_cpu_matmul_x86(const sd_x86_mm *m, const float *const *x, float *const *y, int n);

#endif
