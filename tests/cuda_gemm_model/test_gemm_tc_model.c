/* test_gemm_tc_model.c — the host model of the tensor-core skinny GEMM
 * (sd_gemm_tc_model.h) on the CPU, no GPU needed:
 *  1. fragment emulation == the documented per-output order (tcm_spec), bitwise: the
 *     kernel's lane / register index arithmetic implements the order the design states;
 *  2. batch invariance, bitwise: row r's output is the same for every M in 1..16 and
 *     whatever the other rows hold (random replacements), in BF16 and F16, K a
 *     multiple of 32, of 8 and odd;
 *  3. agreement with the CPU reference sd_cpu_matmul on Llama-3.2-1B / Llama-3.1-8B
 *     projection shapes (K = 2048, 8192, 4096, 14336; a slice of the output columns)
 *     with N(0, 1) activations and N(0, 0.02) weights: relative L2 vs the fp32-activation
 *     reference <= 4e-3 (BF16) / 5e-4 (F16) — the activation rounding, relative error
 *     at most u = 2^-8 / 2^-11 per element, rms <= u/sqrt(3) = 2.3e-3 / 2.8e-4 — and
 *     vs the reference on the rounded activations <= 1e-5 relative L2 plus the
 *     elementwise worst-case bound (K/4 + 64) u32 sum|w x| (what the GPU test checks);
 *  4. fused epilogues: ADD == STORE then the fp32 residual add, SWIGLU == STORE of
 *     [gate; up] then the sd_cuda_swiglu expression, bitwise; SWIGLU vs sd_cpu_swiglu
 *     of the CPU reference at the stated bound;
 *  5. mutants: a k-split chosen by M breaks (2) and a B-register swap breaks (1)
 *     and (3) — the checks must catch both.
 * The M-looped kernel (tcb_gemm: launches of up to 512 rows, weights once):
 *  6. its emulation == the same documented order (tcm_spec), bitwise, for M from 3
 *     (one partition group per partition) to 300 (one group, 8 rounds), K = 256, 200,
 *     77, 40 (partitions without a chunk);
 *  7. batch invariance, bitwise: for EVERY M in 1..512 (BF16, K = 264: partition 0
 *     has two chunks, N = 24: a partial block, with a bias) every row — drawn at random
 *     from a pool of rows incl. a zero row and rows of 1e3 and 1e-6 magnitude, so its
 *     neighbours change from M to M — equals the row computed ALONE by the 16-row
 *     kernel (today's skinny result), hence also for M <= 16; ADD and SWIGLU epilogues,
 *     F16, K = 77 and 40 on a spread of M across the configuration edges (64/65,
 *     128/129, 256/257, 512); and through the dispatch of sd_cuda_gemm_tc for 17, 18,
 *     600 and 1100 rows (launches of 512, 512, 76);
 *  8. mutants: a G-way k-split (chosen by M's configuration) and a fold of a round's
 *     partitions in reverse must both be caught by (7).
 * Fixed seeds. */
#include <stdio.h>
#include <stdlib.h>

#include "sd_test.h"
#include "sd_test_util.h"
#include "sd_gemm_tc_model.h"
#include "sd_cpu_matmul.h"
#include "sd_cpu_swiglu.h"

static uint64_t g_seed = 0x5eedu;
static double unif(void) { return (double)(sd_test_splitmix64(&g_seed) >> 11) / 9007199254740992.0; }
static float gauss(float sd) {
    const double u1 = unif() + 1e-300, u2 = unif();
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2) * sd);
}

typedef struct mat {
    int32_t N, K;
    sd_dtype dt;
    uint16_t *w; /* [N, K] */
    float *wf;   /* the stored values as fp32 */
} mat;

static mat mat_new(int32_t N, int32_t K, sd_dtype dt, float sd) {
    mat m = {N, K, dt, malloc(sizeof(uint16_t) * N * K), malloc(sizeof(float) * N * K)};
    for (size_t i = 0; i < (size_t)N * K; i++) {
        m.w[i] = tcm_enc(gauss(sd), dt);
        m.wf[i] = tcm_dec(m.w[i], dt);
    }
    return m;
}
static void mat_free(mat *m) { free(m->w); free(m->wf); }

static tcm_args args_of(const mat *w, const float *x, float *y, int32_t M, int32_t n_out, int epi, tcm_mutant mut) {
    tcm_args a = {w->w, w->dt, NULL, x, y, n_out, M, n_out, w->K, epi, mut};
    return a;
}

static double rel_l2(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* 1. (and 6. with gemm = tcb_gemm) Emulation vs spec, bitwise; returns the number of
 * differing outputs. */
static int check_spec_of(void (*gemm)(const tcm_args *), const mat *w, int32_t M, tcm_mutant mut) {
    float *x = malloc(sizeof(float) * M * w->K), *y = malloc(sizeof(float) * M * w->N);
    for (int32_t i = 0; i < M * w->K; i++) x[i] = gauss(1.0f);
    tcm_args a = args_of(w, x, y, M, w->N, TCM_STORE, mut);
    gemm(&a);
    int bad = 0;
    for (int32_t m = 0; m < M; m++)
        for (int32_t o = 0; o < w->N; o++) {
            const float s = tcm_spec(&a, m, o);
            if (memcmp(&s, &y[(size_t)m * w->N + o], sizeof s) != 0) bad++;
        }
    free(x); free(y);
    return bad;
}

/* 2. Invariance: row r of every launch M in 1..16, other rows random, equals row r of
 * the M = 1 launch of that row alone. Returns the number of differing rows. */
static int check_invariance(const mat *w, tcm_mutant mut) {
    const int32_t K = w->K, N = w->N;
    float *x = malloc(sizeof(float) * 16 * K), *alone = malloc(sizeof(float) * 16 * N), *y = malloc(sizeof(float) * 16 * N);
    float *base = malloc(sizeof(float) * 16 * K);
    for (int32_t i = 0; i < 16 * K; i++) base[i] = gauss(1.0f);
    for (int32_t r = 0; r < 16; r++) {
        tcm_args a = args_of(w, base + (size_t)r * K, alone + (size_t)r * N, 1, N, TCM_STORE, mut);
        tcm_gemm(&a);
    }
    int bad = 0;
    for (int32_t M = 1; M <= 16; M++)
        for (int trial = 0; trial < 2; trial++) {
            memcpy(x, base, sizeof(float) * 16 * K);
            const int32_t keep = (int32_t)(sd_test_splitmix64(&g_seed) % (uint64_t)M); /* row kept; others resampled */
            if (trial == 1)
                for (int32_t i = 0; i < M * K; i++)
                    if (i / K != keep) x[i] = gauss(3.0f);
            tcm_args a = args_of(w, x, y, M, N, TCM_STORE, mut);
            tcm_gemm(&a);
            for (int32_t r = 0; r < M; r++) {
                if (trial == 1 && r != keep) continue;
                if (memcmp(y + (size_t)r * N, alone + (size_t)r * N, sizeof(float) * N) != 0) bad++;
            }
        }
    free(x); free(alone); free(y); free(base);
    return bad;
}

/* 3. Agreement with sd_cpu_matmul; returns 1 when every stated bound holds. */
static int check_agreement(const mat *w, int32_t M, tcm_mutant mut, int verbose) {
    const int32_t K = w->K, N = w->N;
    float *x = malloc(sizeof(float) * M * K), *xr = malloc(sizeof(float) * M * K), *xa = malloc(sizeof(float) * M * K);
    float *wa = malloc(sizeof(float) * N * K), *rowbuf = malloc(sizeof(float) * K);
    float *y = malloc(sizeof(float) * M * N), *ref = malloc(sizeof(float) * M * N), *refr = malloc(sizeof(float) * M * N);
    float *absr = malloc(sizeof(float) * M * N);
    for (int32_t i = 0; i < M * K; i++) {
        x[i] = gauss(1.0f);
        xr[i] = tcm_dec(tcm_enc(x[i], w->dt), w->dt);
        xa[i] = fabsf(xr[i]);
    }
    for (size_t i = 0; i < (size_t)N * K; i++) wa[i] = fabsf(w->wf[i]);
    sd_tensor wt = {0}, wat = {0};
    wt.data = w->wf; wt.dtype = SD_F32; wt.ndim = 2; wt.shape[0] = N; wt.shape[1] = K;
    wat = wt;
    wat.data = wa;
    sd_cpu_matmul(x, M, &wt, NULL, ref, rowbuf);
    sd_cpu_matmul(xr, M, &wt, NULL, refr, rowbuf);
    sd_cpu_matmul(xa, M, &wat, NULL, absr, rowbuf);
    tcm_args a = args_of(w, x, y, M, N, TCM_STORE, mut);
    tcm_gemm(&a);
    const double u = 1.0 / 16777216.0, d = K / 4.0 + 64.0, bound = w->dt == SD_BF16 ? 4e-3 : 5e-4;
    int elem_bad = 0;
    for (size_t i = 0; i < (size_t)M * N; i++)
        if (!(fabs((double)y[i] - refr[i]) <= d * u * absr[i] + u * fabs((double)refr[i]) + 1e-30)) elem_bad++;
    const double r_fp32 = rel_l2(y, ref, (size_t)M * N), r_round = rel_l2(y, refr, (size_t)M * N);
    const int ok = elem_bad == 0 && r_fp32 <= bound && r_round <= 1e-5;
    if (verbose)
        printf("  %s M=%d N=%d K=%d: rel L2 vs fp32-x ref %.3g (bound %.0e), vs rounded-x ref %.3g (bound 1e-5), "
               "%d outside the elementwise bound %s\n",
               w->dt == SD_BF16 ? "BF16" : "F16", (int)M, (int)N, (int)K, r_fp32, bound, r_round, elem_bad,
               ok ? "ok" : "FAIL");
    free(x); free(xr); free(xa); free(wa); free(rowbuf); free(y); free(ref); free(refr); free(absr);
    return ok;
}

/* 4. Fused epilogues vs unfused, bitwise; SWIGLU vs the CPU reference. */
static void check_fused(sd_dtype dt) {
    const int32_t M = 5, H = 96, I = 40; /* I not a multiple of 8: a partial SWIGLU block */
    mat gu = mat_new(2 * I, H, dt, 0.05f), down = mat_new(H, I, dt, 0.05f);
    float *x = malloc(sizeof(float) * M * H), *g = malloc(sizeof(float) * M * 2 * I), *h = malloc(sizeof(float) * M * I);
    float *hf = malloc(sizeof(float) * M * I), *res = malloc(sizeof(float) * M * H), *res2 = malloc(sizeof(float) * M * H);
    float *dl = malloc(sizeof(float) * M * H);
    for (int32_t i = 0; i < M * H; i++) { x[i] = gauss(1.0f); res[i] = res2[i] = gauss(1.0f); }
    tcm_args a = args_of(&gu, x, g, M, 2 * I, TCM_STORE, TCM_EXACT);
    tcm_gemm(&a);
    for (int32_t m = 0; m < M; m++)
        for (int32_t j = 0; j < I; j++) {
            const float gv = g[(size_t)m * 2 * I + j], uv = g[(size_t)m * 2 * I + I + j];
            h[(size_t)m * I + j] = gv / (1.0f + expf(-gv)) * uv; /* sd_cuda_swiglu */
        }
    a = args_of(&gu, x, hf, M, I, TCM_SWIGLU, TCM_EXACT);
    a.ldy = I;
    tcm_gemm(&a);
    SD_CHECK(memcmp(h, hf, sizeof(float) * M * I) == 0, "%s: SWIGLU epilogue != STORE + swiglu", dt == SD_BF16 ? "BF16" : "F16");
    /* vs the CPU reference: sd_cpu_matmul of gate and up, sd_cpu_swiglu */
    float *gr = malloc(sizeof(float) * M * 2 * I), *gate = malloc(sizeof(float) * M * I), *up = malloc(sizeof(float) * M * I);
    float *href = malloc(sizeof(float) * M * I), *rowbuf = malloc(sizeof(float) * H);
    sd_tensor wt = {0};
    wt.data = gu.wf; wt.dtype = SD_F32; wt.ndim = 2; wt.shape[0] = 2 * I; wt.shape[1] = H;
    sd_cpu_matmul(x, M, &wt, NULL, gr, rowbuf);
    for (int32_t m = 0; m < M; m++)
        for (int32_t j = 0; j < I; j++) {
            gate[m * I + j] = gr[(size_t)m * 2 * I + j];
            up[m * I + j] = gr[(size_t)m * 2 * I + I + j];
        }
    sd_cpu_swiglu(gate, up, (int64_t)M * I, href);
    const double r = rel_l2(hf, href, (size_t)M * I), bound = dt == SD_BF16 ? 8e-3 : 1e-3; /* two rounded factors */
    printf("  fused SWIGLU %s vs CPU reference: rel L2 %.3g (bound %.0e)\n", dt == SD_BF16 ? "BF16" : "F16", r, bound);
    SD_CHECK(r <= bound, "fused SWIGLU vs CPU reference");
    /* ADD: y = y + (acc + b) == STORE then the RMSNorm kernel's x += delta */
    a = args_of(&down, hf, dl, M, H, TCM_STORE, TCM_EXACT);
    tcm_gemm(&a);
    for (int32_t i = 0; i < M * H; i++) res[i] += dl[i];
    a = args_of(&down, hf, res2, M, H, TCM_ADD, TCM_EXACT);
    tcm_gemm(&a);
    SD_CHECK(memcmp(res, res2, sizeof(float) * M * H) == 0, "ADD epilogue != STORE + residual add");
    free(x); free(g); free(h); free(hf); free(res); free(res2); free(dl); free(gr); free(gate); free(up); free(href);
    free(rowbuf);
    mat_free(&gu); mat_free(&down);
}

static int check_spec(const mat *w, int32_t M, tcm_mutant mut) { return check_spec_of(tcm_gemm, w, M, mut); }
/* 6. The M-looped emulation vs the same spec. */
static int check_tcb_spec(const mat *w, int32_t M) { return check_spec_of(tcb_gemm, w, M, TCM_EXACT); }

/* 7. A pool of rows and their results alone (the 16-row kernel, one row per launch). */
#define POOL 40
typedef struct row_pool {
    int32_t K, N;      /* N: outputs per row (SWIGLU: half the matrix rows) */
    int epi;
    const float *bias;
    float *x, *y0, *alone; /* [POOL][K], [POOL][N] initial y (ADD), [POOL][N] */
} row_pool;

static row_pool pool_make(const mat *w, int epi, const float *bias) {
    row_pool p = {w->K, epi == TCM_SWIGLU ? w->N / 2 : w->N, epi, bias, NULL, NULL, NULL};
    p.x = malloc(sizeof(float) * POOL * p.K);
    p.y0 = malloc(sizeof(float) * POOL * p.N);
    p.alone = malloc(sizeof(float) * POOL * p.N);
    for (int32_t r = 0; r < POOL; r++) {
        const float scale = r == 0 ? 0.0f : r == 1 ? 1e3f : r == 2 ? 1e-6f : 1.0f;
        for (int32_t k = 0; k < p.K; k++) p.x[(size_t)r * p.K + k] = gauss(scale);
        for (int32_t o = 0; o < p.N; o++) p.alone[(size_t)r * p.N + o] = p.y0[(size_t)r * p.N + o] = gauss(1.0f);
        tcm_args a = args_of(w, p.x + (size_t)r * p.K, p.alone + (size_t)r * p.N, 1, p.N, epi, TCM_EXACT);
        a.bias = bias;
        tcm_gemm(&a);
    }
    return p;
}
static void pool_free(row_pool *p) { free(p->x); free(p->y0); free(p->alone); }

/* Rows of launches of M rows drawn from the pool vs their results alone: the M-looped
 * kernel directly (dispatch 0) or sd_cuda_gemm_tc's dispatch (1). Returns differing rows. */
static int check_tcb_rows(const mat *w, const row_pool *p, const int32_t *ms, int n_ms, tcm_mutant mut, int dispatch) {
    int32_t Mmax = 1;
    for (int i = 0; i < n_ms; i++) Mmax = ms[i] > Mmax ? ms[i] : Mmax;
    float *x = malloc(sizeof(float) * Mmax * p->K), *y = malloc(sizeof(float) * Mmax * p->N);
    int32_t *pick = malloc(sizeof(int32_t) * Mmax);
    int bad = 0;
    for (int i = 0; i < n_ms; i++) {
        const int32_t M = ms[i];
        for (int32_t m = 0; m < M; m++) {
            pick[m] = (int32_t)(sd_test_splitmix64(&g_seed) % POOL);
            memcpy(x + (size_t)m * p->K, p->x + (size_t)pick[m] * p->K, sizeof(float) * p->K);
            memcpy(y + (size_t)m * p->N, p->y0 + (size_t)pick[m] * p->N, sizeof(float) * p->N);
        }
        tcm_args a = args_of(w, x, y, M, p->N, p->epi, mut);
        a.bias = p->bias;
        if (dispatch) tcm_gemm_tc(&a, 1);
        else tcb_gemm(&a);
        for (int32_t m = 0; m < M; m++)
            if (memcmp(y + (size_t)m * p->N, p->alone + (size_t)pick[m] * p->N, sizeof(float) * p->N) != 0) bad++;
    }
    free(x); free(y); free(pick);
    return bad;
}

/* M around every configuration edge of the M-looped kernel. */
static const int32_t k_edge_ms[] = {1, 2, 7, 16, 17, 33, 64, 65, 100, 128, 129, 200, 256, 257, 399, 512};
#define N_EDGE_MS ((int)(sizeof k_edge_ms / sizeof k_edge_ms[0]))

static void check_tcb(void) {
    const int32_t ks[4] = {256, 200, 77, 40}, sms[4] = {3, 40, 100, 300};
    for (int ki = 0; ki < 4; ki++) {
        mat w = mat_new(40, ks[ki], ki % 2 ? SD_F16 : SD_BF16, 0.02f);
        const int sb = check_tcb_spec(&w, sms[ki]);
        printf("M-looped %s K=%d M=%d: emulation vs spec %d differ\n", ki % 2 ? "F16" : "BF16", (int)ks[ki],
               (int)sms[ki], sb);
        SD_CHECK(sb == 0, "M-looped emulation != documented order (K %d, M %d)", (int)ks[ki], (int)sms[ki]);
        mat_free(&w);
    }
    /* every M in 1..512, STORE with a bias */
    mat w = mat_new(24, 264, SD_BF16, 0.02f);
    float bias[48];
    for (int i = 0; i < 48; i++) bias[i] = gauss(1.0f);
    row_pool p = pool_make(&w, TCM_STORE, bias);
    int32_t all[512];
    for (int i = 0; i < 512; i++) all[i] = i + 1;
    int bad = check_tcb_rows(&w, &p, all, 512, TCM_EXACT, 0);
    printf("M-looped BF16 K=264 N=24: every M in 1..512, rows vs alone (16-row kernel): %d differ\n", bad);
    SD_CHECK(bad == 0, "M-looped kernel: rows depend on M or on the other rows");
    const int32_t big[4] = {17, 18, 600, 1100};
    bad = check_tcb_rows(&w, &p, big, 4, TCM_EXACT, 1);
    printf("dispatch (sd_cuda_gemm_tc) M = 17, 18, 600, 1100: %d rows differ\n", bad);
    SD_CHECK(bad == 0, "dispatch / launches of 512 rows change rows");
    /* mutants, each must be caught */
    const int32_t mm[2] = {100, 300};
    const int mg = check_tcb_rows(&w, &p, mm, 2, TCB_MUT_SPLIT_BY_G, 0);
    const int mf = check_tcb_rows(&w, &p, k_edge_ms, 4, TCB_MUT_FOLD_REV, 0);
    printf("mutant G-way k-split: %d rows differ; mutant reversed fold: %d rows differ (both must be > 0)\n", mg, mf);
    SD_CHECK(mg > 0 && mf > 0, "invariance check missed a mutant of the M-looped kernel");
    pool_free(&p);
    mat_free(&w);
    /* epilogues, dtypes and K tails on the edge Ms */
    struct { int32_t N, K; sd_dtype dt; int epi; } cs[] = {
        {40, 264, SD_BF16, TCM_ADD}, {48, 200, SD_F16, TCM_SWIGLU}, {24, 77, SD_F16, TCM_STORE}, {40, 40, SD_BF16, TCM_ADD}};
    for (int ci = 0; ci < 4; ci++) {
        mat v = mat_new(cs[ci].N, cs[ci].K, cs[ci].dt, 0.05f);
        row_pool q = pool_make(&v, cs[ci].epi, ci == 2 ? NULL : bias);
        bad = check_tcb_rows(&v, &q, k_edge_ms, N_EDGE_MS, TCM_EXACT, 0);
        printf("M-looped %s K=%d N=%d epilogue %d, M at the edges: %d rows differ\n", cs[ci].dt == SD_BF16 ? "BF16" : "F16",
               (int)cs[ci].K, (int)cs[ci].N, cs[ci].epi, bad);
        SD_CHECK(bad == 0, "M-looped kernel: rows differ (case %d)", ci);
        pool_free(&q);
        mat_free(&v);
    }
}

int main(void) {
    const sd_dtype dts[2] = {SD_BF16, SD_F16};
    /* K: multiple of 32, of 8 only, odd */
    const int32_t ks[3] = {256, 200, 77};
    for (int di = 0; di < 2; di++)
        for (int ki = 0; ki < 3; ki++) {
            mat w = mat_new(40, ks[ki], dts[di], 0.02f);
            const int sb = check_spec(&w, 7, TCM_EXACT), ib = check_invariance(&w, TCM_EXACT);
            printf("%s K=%d: emulation vs spec %d differ, invariance M=1..16 %d rows differ\n",
                   dts[di] == SD_BF16 ? "BF16" : "F16", (int)ks[ki], sb, ib);
            SD_CHECK(sb == 0, "fragment emulation != documented order (K %d)", (int)ks[ki]);
            SD_CHECK(ib == 0, "batch invariance broken (K %d)", (int)ks[ki]);
            mat_free(&w);
        }
    /* realistic shapes: K of the 1B / 8B projections, 48 output columns each */
    const int32_t rk[4] = {2048, 8192, 4096, 14336};
    for (int di = 0; di < 2; di++)
        for (int ki = 0; ki < 4; ki++) {
            mat w = mat_new(48, rk[ki], dts[di], 0.02f);
            SD_CHECK(check_agreement(&w, 4, TCM_EXACT, 1), "agreement K %d", (int)rk[ki]);
            mat_free(&w);
        }
    check_fused(SD_BF16);
    check_fused(SD_F16);
    /* mutants: each must be caught */
    mat w = mat_new(32, 2048, SD_BF16, 0.02f);
    const int mi = check_invariance(&w, TCM_MUT_SPLIT_BY_M);
    printf("mutant k-split by M: %d rows differ (must be > 0)\n", mi);
    SD_CHECK(mi > 0, "invariance check missed the k-split-by-M mutant");
    const int ms = check_spec(&w, 3, TCM_MUT_B_SWAP);
    const int ma = check_agreement(&w, 3, TCM_MUT_B_SWAP, 1);
    printf("mutant B-register swap: %d outputs differ from the spec, agreement %s (must fail)\n", ms, ma ? "passed" : "failed");
    SD_CHECK(ms > 0 && !ma, "spec / agreement checks missed the B-swap mutant");
    mat_free(&w);
    check_tcb();
    return sd_test_done();
}
