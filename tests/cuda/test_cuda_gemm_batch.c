/* test_cuda_gemm_batch.c — the M-looped tensor-core GEMM (sd_cuda_gemm_tcb, and
 * sd_cuda_gemm_skinny / sd_cuda_gemm_tc handing rows above 17 to it) on the GPU:
 *  1. against the CPU reference sd_cpu_matmul at the bounds of the 16-row kernel
 *     (test_cuda_kernels.c, docs/GPU_FORWARD.md section 2): relative L2 vs the
 *     reference on the rounded activations <= 1e-5, vs the fp32 activations <= 4e-3
 *     (BF16) / 5e-4 (F16), elementwise within (K/4 + 64) u sum|w x| + u |y|; shapes
 *     with K % 8 != 0 (scalar loads), a partial 16-column block, K > 4096; M from 1 to
 *     600 (two launches of 512 and 88 rows);
 *  2. batch invariance, BITWISE: a pool of rows, each computed alone by the 16-row
 *     kernel (n = 1: today's skinny result); launches of M = 1, 17, 40, 64, 200, 512
 *     (and 600) rows drawn from the pool at random, twice with different neighbours,
 *     through sd_cuda_gemm_tcb and through sd_cuda_gemm_skinny with the scratch (the
 *     runner's call): every row equals its row alone;
 *  3. epilogues: ADD (residual) and SWIGLU ([gate; up], odd intermediate size) rows
 *     bitwise equal to the 16-row kernel's fused epilogue alone; ADD == y + STORE
 *     result (the same fp32 add); SWIGLU vs sd_cpu_swiglu of the CPU reference (rel L2
 *     8e-3 BF16, 1e-3 F16);
 *  4. argument errors: no scratch, F32 weights, bad epilogue -> INVALID_ARGUMENT.
 * SD_CUDA_TEST_QUICK: fewer shapes and sizes (compute-sanitizer runs). Skips without a
 * device. */
#include "sd_test.h"
#include "specdec.h"

#ifndef SPECDEC_WITH_CUDA
int main(void) { return sd_test_skip("no CUDA device"); }
#else

#include "cuda_test_util.h"
#include "sd_cuda_ops.h"
#include "sd_cpu_matmul.h"
#include "sd_cpu_swiglu.h"

#define POOL 48
#define MMAX 600

/* A weight matrix on host and device, its stored values and their magnitudes. */
typedef struct gb_mat {
    int32_t N, K; /* rows (SWIGLU: 2 I), columns */
    sd_dtype dt;
    float *wv, *wa, *bias; /* [N, K] stored values, |values|, [N] */
    void *wp;              /* [N, K] packed */
    void *d_w;
    float *d_b;
} gb_mat;

static gb_mat gb_mat_new(ct_rng *rng, int32_t N, int32_t K, sd_dtype dt, float amp) {
    gb_mat m = {N, K, dt, malloc(sizeof(float) * N * K), malloc(sizeof(float) * N * K), malloc(sizeof(float) * N),
                malloc(ct_dsize(dt) * N * K), NULL, NULL};
    for (size_t i = 0; i < (size_t)N * K; i++) m.wv[i] = ct_unif(rng, amp);
    for (int32_t i = 0; i < N; i++) m.bias[i] = ct_unif(rng, 1.0f);
    ct_pack(dt, m.wv, m.wp, (size_t)N * K);
    for (size_t i = 0; i < (size_t)N * K; i++) m.wa[i] = fabsf(m.wv[i]);
    m.d_w = ct_dev_upload(m.wp, ct_dsize(dt) * N * K);
    m.d_b = ct_dev_upload(m.bias, sizeof(float) * N);
    return m;
}
static void gb_mat_free(gb_mat *m) {
    free(m->wv); free(m->wa); free(m->bias); free(m->wp);
    cudaFree(m->d_w); cudaFree(m->d_b);
}

/* Device buffers for up to MMAX rows of a matrix. */
typedef struct gb_bufs {
    float *d_x, *d_y;
    void *d_xc;
} gb_bufs;
static gb_bufs gb_bufs_new(const gb_mat *w) {
    gb_bufs b = {ct_dev_alloc(sizeof(float) * MMAX * w->K), ct_dev_alloc(sizeof(float) * MMAX * w->N),
                 ct_dev_alloc(ct_dsize(w->dt) * MMAX * w->K)};
    return b;
}
static void gb_bufs_free(gb_bufs *b) { cudaFree(b->d_x); cudaFree(b->d_y); cudaFree(b->d_xc); }

static sd_cuda_gemm_args gb_args(const gb_mat *w, const gb_bufs *b, int32_t M, int32_t n_out, int epi, int bias) {
    const sd_cuda_gemm_args a = {.w = w->d_w, .wdt = w->dt, .bias = bias ? w->d_b : NULL, .x = b->d_x, .y = b->d_y,
                                 .ldy = n_out, .n = M, .n_out = n_out, .k_in = w->K, .xconv = b->d_xc, .epi = epi};
    return a;
}

/* which: 0 = sd_cuda_gemm_tcb, 1 = sd_cuda_gemm_skinny with the scratch, 2 = the 16-row
 * kernel (sd_cuda_gemm_tc without scratch). y is uploaded first when y0 != NULL. */
static int gb_run(const sd_cuda_gemm_args *a, int which, const float *x, const float *y0, float *y) {
    sd_errbuf eb;
    CT_CUDA(cudaMemcpy((void *)a->x, x, sizeof(float) * a->n * a->k_in, cudaMemcpyHostToDevice));
    if (y0) CT_CUDA(cudaMemcpy(a->y, y0, sizeof(float) * a->n * a->ldy, cudaMemcpyHostToDevice));
    else ct_poison(a->y, sizeof(float) * a->n * a->ldy);
    sd_cuda_gemm_args c = *a;
    if (which == 2) c.xconv = NULL;
    const specdec_status st = which == 0 ? sd_cuda_gemm_tcb(&c, 0, &eb) : which == 1 ? sd_cuda_gemm_skinny(&c, 0, &eb)
                                                                                     : sd_cuda_gemm_tc(&c, 0, &eb);
    SD_CHECK(st == SPECDEC_OK, "gemm (%d): %s", which, eb.msg);
    if (st != SPECDEC_OK) return 0;
    CT_CUDA(cudaMemcpy(y, a->y, sizeof(float) * a->n * a->ldy, cudaMemcpyDeviceToHost));
    return 1;
}

/* Elementwise rounding bound (see test_cuda_kernels.c ct_check_bound). */
static int gb_bound(const char *what, const float *got, const float *ref, const float *absref, size_t n, int K) {
    const double u = 1.0 / 16777216.0, d = K / 4.0 + 64.0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const double err = fabs((double)got[i] - (double)ref[i]);
        if (!(err <= d * u * absref[i] + u * fabs((double)ref[i]) + 1e-30) && bad++ < 5)
            fprintf(stderr, "  %s: [%zu] got %.9g ref %.9g err %.3g\n", what, i, got[i], ref[i], err);
    }
    printf("%-56s n=%-8zu elementwise bound %s\n", what, n, bad ? "FAIL" : "ok");
    return bad == 0;
}

/* 1. Against the CPU reference. */
static void test_reference(ct_rng *rng, int32_t N, int32_t K, sd_dtype dt) {
    static const int32_t ms[] = {1, 17, 40, 64, 200, 512, 600};
    const int n_ms = ct_quick() ? 3 : (int)(sizeof ms / sizeof ms[0]);
    gb_mat w = gb_mat_new(rng, N, K, dt, 0.5f);
    gb_bufs b = gb_bufs_new(&w);
    float *x = malloc(sizeof(float) * MMAX * K), *xr = malloc(sizeof(float) * MMAX * K), *xa = malloc(sizeof(float) * MMAX * K);
    float *ref = malloc(sizeof(float) * MMAX * N), *refr = malloc(sizeof(float) * MMAX * N), *absr = malloc(sizeof(float) * MMAX * N);
    float *got = malloc(sizeof(float) * MMAX * N), *rowbuf = malloc(sizeof(float) * K);
    void *tmp = malloc(sizeof(float) * MMAX * K);
    for (int32_t i = 0; i < MMAX * K; i++) xr[i] = x[i] = ct_unif(rng, 2.0f);
    ct_pack(dt, xr, tmp, (size_t)MMAX * K);
    for (int32_t i = 0; i < MMAX * K; i++) xa[i] = fabsf(xr[i]);
    sd_tensor wt = {0}, bt = {0}, wat = {0};
    wt.data = w.wp; wt.dtype = dt; wt.ndim = 2; wt.shape[0] = N; wt.shape[1] = K;
    bt.data = w.bias; bt.dtype = SD_F32; bt.ndim = 1; bt.shape[0] = N;
    wat = wt; wat.data = w.wa; wat.dtype = SD_F32;
    sd_cpu_matmul(x, MMAX, &wt, &bt, ref, rowbuf);
    sd_cpu_matmul(xr, MMAX, &wt, &bt, refr, rowbuf);
    sd_cpu_matmul(xa, MMAX, &wat, NULL, absr, rowbuf);
    for (int i = 0; i < n_ms; i++) {
        const int32_t M = ms[ct_quick() ? 2 * i + 1 : i]; /* quick: 17, 64, 512 */
        const sd_cuda_gemm_args a = gb_args(&w, &b, M, N, SD_GEMM_EPI_STORE, 1);
        if (!gb_run(&a, 0, x, NULL, got)) continue;
        char what[96];
        snprintf(what, sizeof what, "M-looped gemm %s M=%d N=%d K=%d", ct_dname(dt), M, N, K);
        SD_CHECK(gb_bound(what, got, refr, absr, (size_t)M * N, K), "elementwise bound");
        SD_CHECK(ct_compare(what, got, refr, (size_t)M * N, 1e30, 0.0, 1e-5), "vs rounded-input reference");
        snprintf(what, sizeof what, "M-looped gemm %s M=%d vs fp32-x ref", ct_dname(dt), M);
        SD_CHECK(ct_compare(what, got, ref, (size_t)M * N, 1e30, 0.0, dt == SD_BF16 ? 4e-3 : 5e-4), "vs fp32 reference");
    }
    gb_bufs_free(&b);
    gb_mat_free(&w);
    free(x); free(xr); free(xa); free(ref); free(refr); free(absr); free(got); free(rowbuf); free(tmp);
}

/* Pool rows, their results alone (16-row kernel, n = 1) and initial y rows (ADD). */
typedef struct gb_pool {
    int32_t K, n_out;
    float *x, *y0, *alone;
} gb_pool;

static gb_pool gb_pool_make(ct_rng *rng, const gb_mat *w, const gb_bufs *b, int32_t n_out, int epi) {
    gb_pool p = {w->K, n_out, malloc(sizeof(float) * POOL * w->K), malloc(sizeof(float) * POOL * n_out),
                 malloc(sizeof(float) * POOL * n_out)};
    for (int32_t i = 0; i < POOL * w->K; i++) p.x[i] = ct_unif(rng, i / w->K == 1 ? 300.0f : 2.0f);
    for (int32_t i = 0; i < POOL * n_out; i++) p.y0[i] = ct_unif(rng, 1.0f);
    for (int32_t r = 0; r < POOL; r++) {
        const sd_cuda_gemm_args a = gb_args(w, b, 1, n_out, epi, 1);
        gb_run(&a, 2, p.x + (size_t)r * w->K, epi == SD_GEMM_EPI_ADD ? p.y0 + (size_t)r * n_out : NULL,
               p.alone + (size_t)r * n_out);
    }
    return p;
}
static void gb_pool_free(gb_pool *p) { free(p->x); free(p->y0); free(p->alone); }

/* 2./3. Launches of M rows drawn from the pool; returns the rows that differ from alone. */
static int gb_rows(ct_rng *rng, const gb_mat *w, const gb_bufs *b, const gb_pool *p, int32_t M, int epi, int which,
                   float *got) {
    float *x = malloc(sizeof(float) * M * p->K), *y0 = malloc(sizeof(float) * M * p->n_out);
    int32_t *pick = malloc(sizeof(int32_t) * M);
    for (int32_t m = 0; m < M; m++) {
        pick[m] = (int32_t)(ct_next(rng) % POOL);
        memcpy(x + (size_t)m * p->K, p->x + (size_t)pick[m] * p->K, sizeof(float) * p->K);
        memcpy(y0 + (size_t)m * p->n_out, p->y0 + (size_t)pick[m] * p->n_out, sizeof(float) * p->n_out);
    }
    const sd_cuda_gemm_args a = gb_args(w, b, M, p->n_out, epi, 1);
    int bad = 0;
    if (gb_run(&a, which, x, epi == SD_GEMM_EPI_ADD ? y0 : NULL, got)) {
        for (int32_t m = 0; m < M; m++) {
            if (memcmp(got + (size_t)m * p->n_out, p->alone + (size_t)pick[m] * p->n_out, sizeof(float) * p->n_out) == 0)
                continue;
            if (bad++ < 3) fprintf(stderr, "  M=%d: row %d (pool row %d) differs from its row alone\n", M, m, pick[m]);
        }
    } else {
        bad = M;
    }
    free(x); free(y0); free(pick);
    return bad;
}

static void test_invariance(ct_rng *rng, int32_t N, int32_t K, sd_dtype dt, int epi) {
    static const int32_t ms[] = {1, 17, 40, 64, 200, 512, 600};
    const int n_ms = ct_quick() ? 4 : (int)(sizeof ms / sizeof ms[0]);
    gb_mat w = gb_mat_new(rng, N, K, dt, 0.5f);
    gb_bufs b = gb_bufs_new(&w);
    const int32_t n_out = epi == SD_GEMM_EPI_SWIGLU ? N / 2 : N;
    gb_pool p = gb_pool_make(rng, &w, &b, n_out, epi);
    float *got = malloc(sizeof(float) * MMAX * n_out);
    int bad = 0, rows = 0;
    for (int i = 0; i < n_ms; i++)
        for (int which = 0; which < 2; which++)
            for (int trial = 0; trial < 2; trial++) {
                bad += gb_rows(rng, &w, &b, &p, ms[i], epi, which, got);
                rows += ms[i];
            }
    printf("M-looped gemm %s N=%d K=%d epilogue %d: %d of %d rows differ from the row alone\n", ct_dname(dt), N, K, epi,
           bad, rows);
    SD_CHECK(bad == 0, "batch invariance (%s N %d K %d epilogue %d)", ct_dname(dt), N, K, epi);
    gb_pool_free(&p);
    free(got);
    gb_bufs_free(&b);
    gb_mat_free(&w);
}

/* 3. ADD == y + STORE (the same fp32 add); SWIGLU vs the CPU reference. */
static void test_epilogues(ct_rng *rng, sd_dtype dt) {
    const int32_t M = 70, H = 96, I = 37;
    gb_mat gu = gb_mat_new(rng, 2 * I, H, dt, 0.2f);
    gb_bufs b = gb_bufs_new(&gu);
    float *x = malloc(sizeof(float) * M * H), *y0 = malloc(sizeof(float) * M * 2 * I), *st = malloc(sizeof(float) * M * 2 * I);
    float *ad = malloc(sizeof(float) * M * 2 * I), *h = malloc(sizeof(float) * M * I), *gr = malloc(sizeof(float) * M * 2 * I);
    float *gate = malloc(sizeof(float) * M * I), *up = malloc(sizeof(float) * M * I), *href = malloc(sizeof(float) * M * I);
    float *rowbuf = malloc(sizeof(float) * H);
    for (int32_t i = 0; i < M * H; i++) x[i] = ct_unif(rng, 2.0f);
    for (int32_t i = 0; i < M * 2 * I; i++) y0[i] = ct_unif(rng, 1.0f);
    sd_cuda_gemm_args a = gb_args(&gu, &b, M, 2 * I, SD_GEMM_EPI_STORE, 1);
    gb_run(&a, 0, x, NULL, st);
    a.epi = SD_GEMM_EPI_ADD;
    gb_run(&a, 0, x, y0, ad);
    int same = 1;
    for (int32_t i = 0; i < M * 2 * I; i++) {
        const float e = y0[i] + st[i];
        same &= memcmp(&e, &ad[i], sizeof e) == 0;
    }
    SD_CHECK(same, "%s: ADD epilogue != y + STORE result", ct_dname(dt));
    a = gb_args(&gu, &b, M, I, SD_GEMM_EPI_SWIGLU, 1);
    gb_run(&a, 0, x, NULL, h);
    sd_tensor wt = {0}, bt = {0};
    wt.data = gu.wp; wt.dtype = dt; wt.ndim = 2; wt.shape[0] = 2 * I; wt.shape[1] = H;
    bt.data = gu.bias; bt.dtype = SD_F32; bt.ndim = 1; bt.shape[0] = 2 * I;
    sd_cpu_matmul(x, M, &wt, &bt, gr, rowbuf);
    for (int32_t m = 0; m < M; m++)
        for (int32_t j = 0; j < I; j++) {
            gate[m * I + j] = gr[(size_t)m * 2 * I + j];
            up[m * I + j] = gr[(size_t)m * 2 * I + I + j];
        }
    sd_cpu_swiglu(gate, up, (int64_t)M * I, href);
    char what[96];
    snprintf(what, sizeof what, "M-looped SWIGLU %s M=%d I=%d vs CPU", ct_dname(dt), M, I);
    SD_CHECK(ct_compare(what, h, href, (size_t)M * I, 1e30, 0.0, dt == SD_BF16 ? 8e-3 : 1e-3), "SWIGLU vs CPU reference");
    gb_bufs_free(&b);
    gb_mat_free(&gu);
    free(x); free(y0); free(st); free(ad); free(h); free(gr); free(gate); free(up); free(href); free(rowbuf);
}

/* 4. Argument errors. */
static void test_errors(ct_rng *rng) {
    gb_mat w = gb_mat_new(rng, 16, 32, SD_BF16, 0.5f);
    gb_bufs b = gb_bufs_new(&w);
    sd_errbuf eb;
    sd_cuda_gemm_args a = gb_args(&w, &b, 20, 16, SD_GEMM_EPI_STORE, 0);
    a.xconv = NULL;
    SD_CHECK(sd_cuda_gemm_tcb(&a, 0, &eb) == SPECDEC_ERR_INVALID_ARGUMENT, "no scratch accepted");
    a = gb_args(&w, &b, 20, 16, SD_GEMM_EPI_STORE, 0);
    a.wdt = SD_F32;
    SD_CHECK(sd_cuda_gemm_tcb(&a, 0, &eb) == SPECDEC_ERR_INVALID_ARGUMENT, "F32 weights accepted");
    a = gb_args(&w, &b, 20, 16, 7, 0);
    SD_CHECK(sd_cuda_gemm_tcb(&a, 0, &eb) == SPECDEC_ERR_INVALID_ARGUMENT, "epilogue 7 accepted");
    SD_CHECK(sd_cuda_gemm_tcb(NULL, 0, &eb) == SPECDEC_ERR_INVALID_ARGUMENT, "NULL args accepted");
    gb_bufs_free(&b);
    gb_mat_free(&w);
}

int main(void) {
    if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
    ct_rng rng = {20250614u};
    /* N, K: aligned; K % 8 != 0 (scalar loads); a partial block and K > 4096 */
    const int32_t shapes[][2] = {{64, 64}, {37, 100}, {130, 2048}, {24, 4104}};
    const int n_shapes = ct_quick() ? 2 : 4;
    for (int si = 0; si < n_shapes; si++)
        for (int di = 0; di < 2; di++) test_reference(&rng, shapes[si][0], shapes[si][1], di ? SD_F16 : SD_BF16);
    test_invariance(&rng, 40, 264, SD_BF16, SD_GEMM_EPI_STORE);
    test_invariance(&rng, 48, 2048, SD_BF16, SD_GEMM_EPI_ADD);
    test_invariance(&rng, 74, 200, SD_F16, SD_GEMM_EPI_SWIGLU);
    if (!ct_quick()) test_invariance(&rng, 33, 77, SD_F16, SD_GEMM_EPI_STORE);
    test_epilogues(&rng, SD_BF16);
    test_epilogues(&rng, SD_F16);
    test_errors(&rng);
    CT_CUDA(cudaDeviceSynchronize());
    return sd_test_done();
}
#endif
