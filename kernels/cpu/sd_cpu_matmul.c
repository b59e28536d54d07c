/* sd_cpu_matmul.c — linear layers y = x W^T + b (see sd_cpu_matmul.h). */
#include "sd_cpu_matmul.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "sd_cpu_dequant.h"
#include "sd_cpu_matmul_x86.h"
#include "sd_cpu_pool.h"

/* -1: not chosen yet; else an sd_cpu_isa. Chosen once (a race only repeats the same choice). */
static atomic_int g_isa = -1;

static int isa_detect(void) {
    const char *env = getenv("SPECDEC_CPU_ISA");
    if (env && !strcmp(env, "generic")) return SD_CPU_ISA_GENERIC;
    return sd_cpu_x86_avx2_supported() ? SD_CPU_ISA_AVX2 : SD_CPU_ISA_GENERIC;
}

sd_cpu_isa sd_cpu_matmul_isa(void) {
    int isa = atomic_load_explicit(&g_isa, memory_order_relaxed);
    if (isa < 0) {
        isa = isa_detect();
        atomic_store_explicit(&g_isa, isa, memory_order_relaxed);
    }
    return (sd_cpu_isa)isa;
}

int sd_cpu_matmul_set_isa(sd_cpu_isa isa) {
    if (isa == SD_CPU_ISA_AVX2 && !sd_cpu_x86_avx2_supported()) return -1;
    atomic_store_explicit(&g_isa, (int)isa, memory_order_relaxed);
    return 0;
}

/* One call's job: tokens x[0..n) (output rows y + t * rows, or yrows[t], NULL = skipped) over
 * the output rows of W, split between the threads of the caller's pool in ranges of whole
 * rows (sd_cpu_pool.h): every value is computed by one thread, by the same code as on one. */
typedef struct mm_job {
    const float *x;
    int32_t n;
    const sd_tensor *w, *bias; /* bias NULL: none */
    float *y;
    float *const *yrows;
    sd_cpu_isa isa;
    int64_t chunk; /* output rows per part */
} mm_job;

static float *mm_out(const mm_job *j, int32_t t) {
    return j->yrows ? j->yrows[t] : j->y + (int64_t)t * j->w->shape[0];
}

/* The AVX2 path over rows [o0, o1): ranges checked here (sd_cpu_sanitize.h: each thread
 * reports exactly what it reads and writes), then chunks of SD_CPU_X86_TOKEN_CHUNK tokens. */
static void matmul_x86(const mm_job *j, int64_t o0, int64_t o1) {
    const sd_tensor *w = j->w;
    sd_x86_mm m = {w->data, w->dtype, w->shape[0], w->shape[1], j->bias, o0, o1, w->scales};
    if (w->dtype == SD_MXFP4) { /* code blocks and scales of rows [o0, o1) */
        const size_t rb = sd_mxfp4_row_bytes(m.cols), g = (size_t)(m.cols / 32);
        sd_cpu_check_read((const char *)w->data + (size_t)o0 * rb, (size_t)(o1 - o0) * rb);
        sd_cpu_check_read(w->scales + (size_t)o0 * g, (size_t)(o1 - o0) * g);
    } else if (sd_dtype_is_int(w->dtype)) { /* codes, scales and zeros of rows [o0, o1) */
        const sd_int4_meta *q = sd_int4_meta_of(w);
        const size_t rb = sd_int_row_bytes(w->dtype, m.cols), G = (size_t)q->n_groups;
        sd_cpu_check_read((const char *)w->data + (size_t)o0 * rb, (size_t)(o1 - o0) * rb);
        sd_cpu_check_read(q->scale + (size_t)o0 * G, (size_t)(o1 - o0) * G * sizeof(float));
        sd_cpu_check_read(q->zero + (size_t)o0 * G, (size_t)(o1 - o0) * G * sizeof(int32_t));
        if (q->bias) sd_cpu_check_read(q->bias + (size_t)o0 * G, (size_t)(o1 - o0) * G * sizeof(float));
    } else {
        const size_t es = sd_dtype_size(w->dtype);
        sd_cpu_check_read((const char *)w->data + (size_t)o0 * (size_t)m.cols * es,
                          (size_t)(o1 - o0) * (size_t)m.cols * es);
    }
    if (m.bias) {
        const size_t bs = sd_dtype_size(m.bias->dtype);
        sd_cpu_check_read((const char *)m.bias->data + (size_t)o0 * bs, (size_t)(o1 - o0) * bs);
    }
    const float *xs[SD_CPU_X86_TOKEN_CHUNK];
    float *ys[SD_CPU_X86_TOKEN_CHUNK];
    int k = 0;
    for (int32_t t = 0; t < j->n; t++) {
        float *yt = mm_out(j, t);
        if (!yt) continue;
        xs[k] = j->x + (int64_t)t * m.cols;
        ys[k] = yt;
        if (m.cols > 0) sd_cpu_check_read(xs[k], (size_t)m.cols * sizeof(float));
        sd_cpu_check_write(yt + o0, (size_t)(o1 - o0) * sizeof(float));
        if (++k == SD_CPU_X86_TOKEN_CHUNK) sd_cpu_matmul_x86(&m, xs, ys, k), k = 0;
    }
    if (k) sd_cpu_matmul_x86(&m, xs, ys, k);
}

/* The portable loop over rows [o0, o1); rowbuf: cols floats (W not F32). */
static void matmul_generic(const mm_job *j, int64_t o0, int64_t o1, float *rowbuf) {
    const int64_t cols = j->w->shape[1];
    for (int64_t o = o0; o < o1; o++) {
        const float *wr = sd_cpu_row_f32(j->w, o, rowbuf);
        double b = j->bias ? (double)sd_cpu_elem(j->bias, o) : 0.0;
        for (int32_t t = 0; t < j->n; t++) {
            float *yt = mm_out(j, t);
            if (yt) yt[o] = (float)(sd_cpu_dot(wr, j->x + (int64_t)t * cols, cols) + b);
        }
    }
}

static void mm_range(const mm_job *j, int64_t o0, int64_t o1, float *rowbuf) {
    if (o0 >= o1 || j->n <= 0) return;
    if (j->isa == SD_CPU_ISA_AVX2) matmul_x86(j, o0, o1);
    else matmul_generic(j, o0, o1, rowbuf);
}

static void mm_part(void *arg, int part, int n_parts, float *scratch) {
    const mm_job *j = arg;
    (void)n_parts;
    const int64_t rows = j->w->shape[0], o0 = (int64_t)part * j->chunk;
    mm_range(j, o0 < rows ? o0 : rows, o0 + j->chunk < rows ? o0 + j->chunk : rows, scratch);
}

/* Parts start on a multiple of 16 rows: 64 bytes of every token's output row, so two threads
 * never write one cache line (and the AVX2 path's 4-row blocks stay whole). */
#define MM_ROW_ALIGN 16

static void mm_run(const float *x, int32_t n, const sd_tensor *w, const sd_tensor *bias, float *y, float *const *yrows,
                   float *rowbuf) {
    mm_job j = {x, n, w, bias && bias->data ? bias : NULL, y, yrows, sd_cpu_matmul_isa(), 0};
    const int64_t rows = w->shape[0], cols = w->shape[1];
    sd_cpu_pool *p = sd_cpu_pool_current();
    const int nt = sd_cpu_pool_threads(p);
    /* workers convert rows into their own scratch unless the weights are F32 (the AVX2 path
     * converts F16 / BF16 / MXFP4 / FP8 in registers) */
    const int scratch_ok = j.isa == SD_CPU_ISA_AVX2 || w->dtype == SD_F32 || sd_cpu_pool_scratch(p) >= (size_t)cols;
    if (nt > 1 && scratch_ok && rows >= 2 * MM_ROW_ALIGN && n > 0 && rows * (cols > 0 ? cols : 1) * n >= sd_cpu_pool_min_work(p)) {
        int64_t chunk = (rows + nt - 1) / nt;
        chunk = (chunk + MM_ROW_ALIGN - 1) / MM_ROW_ALIGN * MM_ROW_ALIGN;
        j.chunk = chunk;
        sd_cpu_pool_run(p, (int)((rows + chunk - 1) / chunk), mm_part, &j, rowbuf);
        return;
    }
    mm_range(&j, 0, rows, rowbuf);
}

void sd_cpu_matmul(const float *x, int32_t n, const sd_tensor *w, const sd_tensor *bias, float *y, float *rowbuf) {
    mm_run(x, n, w, bias, y, NULL, rowbuf);
}

void sd_cpu_matmul_rows(const float *x, int32_t n, const sd_tensor *w, const sd_tensor *bias, float *const *y,
                        float *rowbuf) {
    mm_run(x, n, w, bias, NULL, y, rowbuf);
}
