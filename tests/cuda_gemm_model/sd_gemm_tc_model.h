/* sd_gemm_tc_model.h — a host (plain C) model of kernels/cuda/sd_cuda_gemm_tc.cu, both
 * kernels (the 16-row one, tcm_gemm, and the M-looped one, tcb_gemm, with the launch
 * dispatch of sd_cuda_gemm_tc, tcm_gemm_tc): the same block / warp / lane / fragment
 * index arithmetic, the PTX-documented register layouts of mma.m16n8k16 (A row-major,
 * B column-major, fp32 C), the same 16-byte chunk map, k-split, partition groups and
 * rounds, shared-memory reduction / fold order and epilogues, so every fp32 rounding
 * the kernels perform outside the mma happens here in the same order.
 *
 * The mma itself is MODELLED: D = fl32(C + S) with S the 16 exact products (bf16 x
 * bf16 and f16 x f16 products are exact in fp32) summed in double in ascending k
 * index. The hardware adds the 16 products and C with its own internal alignment and
 * truncation; what the model checks does not depend on that choice: (a) which
 * operands meet in which mma and in which order the partials are combined (batch
 * invariance is a property of that data flow), and (b) accuracy bounds that hold for
 * any summation order of the 17 terms (the GPU test checks the same bounds on the
 * device). Mutants (tcm_mutant) plant the mistakes a tuned kernel could make.
 * Header-only, test code. */
#ifndef SD_GEMM_TC_MODEL_H
#define SD_GEMM_TC_MODEL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sd_math.h"
#include "sd_model.h"

#define TCM_WARPS 8
#define TCM_NT 2
#define TCM_COLS 16
#define TCM_U 4

enum { TCM_STORE = 0, TCM_ADD = 1, TCM_SWIGLU = 2 };
typedef enum {
    TCM_EXACT = 0,      /* the kernel as written */
    TCM_MUT_SPLIT_BY_M, /* k-split chosen by M (8 warps for M <= 8, else 4): breaks invariance */
    TCM_MUT_B_SWAP,     /* B registers take elements (2,3),(0,1) while A takes (0,1),(2,3) */
    TCB_MUT_SPLIT_BY_G, /* M-looped kernel: a G-way k-split (group q of round 0 takes chunks q, q + G,
                           ...), i.e. a k-split that follows M's configuration */
    TCB_MUT_FOLD_REV,   /* M-looped kernel: a round's partitions folded last to first */
} tcm_mutant;

typedef struct tcm_args {
    const uint16_t *w; /* [rows, K] raw BF16/F16 bits */
    sd_dtype dt;
    const float *bias; /* or NULL */
    const float *x;    /* [M, K] fp32 */
    float *y;          /* [M, ldy] */
    int32_t ldy, M, n_out, K;
    int epi;
    tcm_mutant mut;
} tcm_args;

static inline float tcm_dec(uint16_t v, sd_dtype dt) { return dt == SD_BF16 ? sd_bf16_to_f32(v) : sd_f16_to_f32(v); }
static inline uint16_t tcm_enc(float f, sd_dtype dt) { return dt == SD_BF16 ? sd_f32_to_bf16(f) : sd_f32_to_f16(f); }

/* sd_tc_ld_w / sd_tc_ld_x: 8 elements from k0 as 4 registers of two 16-bit halves. */
static inline void tcm_ld_w(const tcm_args *a, int32_t row, int32_t k0, uint32_t r[4]) {
    for (int j = 0; j < 4; j++) {
        uint32_t lo = 0, hi = 0;
        if (row >= 0 && k0 + 2 * j < a->K) lo = a->w[(size_t)row * a->K + k0 + 2 * j];
        if (row >= 0 && k0 + 2 * j + 1 < a->K) hi = a->w[(size_t)row * a->K + k0 + 2 * j + 1];
        r[j] = lo | (hi << 16);
    }
}
static inline void tcm_ld_x(const tcm_args *a, int32_t m, int32_t k0, uint32_t r[4]) {
    for (int j = 0; j < 4; j++) {
        uint32_t lo = 0, hi = 0;
        if (m < a->M && k0 < a->K) {
            const float *p = a->x + (size_t)m * a->K;
            lo = tcm_enc(k0 + 2 * j < a->K ? p[k0 + 2 * j] : 0.0f, a->dt);
            hi = tcm_enc(k0 + 2 * j + 1 < a->K ? p[k0 + 2 * j + 1] : 0.0f, a->dt);
        }
        r[j] = lo | (hi << 16);
    }
}

/* One warp-wide mma.m16n8k16: fragments of the 32 lanes -> matrices -> model -> C. */
static inline void tcm_mma(const tcm_args *a, float c[32][4], const uint32_t ar[32][4], const uint32_t br[32][2]) {
    double A[16][16], B[16][8];
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        for (int i = 0; i < 2; i++) {
            const int sh = 16 * i;
            A[g][2 * t + i] = tcm_dec((uint16_t)(ar[l][0] >> sh), a->dt);
            A[g + 8][2 * t + i] = tcm_dec((uint16_t)(ar[l][1] >> sh), a->dt);
            A[g][2 * t + 8 + i] = tcm_dec((uint16_t)(ar[l][2] >> sh), a->dt);
            A[g + 8][2 * t + 8 + i] = tcm_dec((uint16_t)(ar[l][3] >> sh), a->dt);
            B[2 * t + i][g] = tcm_dec((uint16_t)(br[l][0] >> sh), a->dt);
            B[2 * t + 8 + i][g] = tcm_dec((uint16_t)(br[l][1] >> sh), a->dt);
        }
    }
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        for (int q = 0; q < 4; q++) {
            const int r = g + (q >> 1) * 8, n = 2 * t + (q & 1);
            double s = 0.0;
            for (int k = 0; k < 16; k++) s += A[r][k] * B[k][n];
            c[l][q] = (float)((double)c[l][q] + s);
        }
    }
}

static inline int32_t tcm_row(const tcm_args *a, int32_t blk, int nt, int g) {
    if (a->epi == TCM_SWIGLU) {
        const int32_t j = blk * 8 + g;
        return j < a->n_out ? j + nt * a->n_out : -1;
    }
    const int32_t o = blk * TCM_COLS + nt * 8 + g;
    return o < a->n_out ? o : -1;
}

/* The two mma steps (k halves s = 0, 1) of one 32-wide chunk for both n-tiles: A
 * fragments from the lanes' x rows g (xa) and g + 8 (xb), B from their weight words wv;
 * sw (the B_SWAP mutant) swaps B's two registers. */
static inline void tcm_mma_chunk(const tcm_args *a, uint32_t xa[32][4], uint32_t xb[32][4],
                                 uint32_t wv[TCM_NT][32][4], int sw, float c[TCM_NT][32][4]) {
    for (int nt = 0; nt < TCM_NT; nt++)
        for (int s = 0; s < 2; s++) {
            uint32_t ar[32][4], br[32][2];
            for (int l = 0; l < 32; l++) {
                ar[l][0] = xa[l][2 * s]; ar[l][1] = xb[l][2 * s];
                ar[l][2] = xa[l][2 * s + 1]; ar[l][3] = xb[l][2 * s + 1];
                br[l][0] = wv[nt][l][2 * s + sw]; br[l][1] = wv[nt][l][2 * s + 1 - sw];
            }
            tcm_mma(a, c[nt], ar, br);
        }
}

/* sd_tc_warp_loop for warp `warp` of block blk (of `warps` k-split warps). */
static inline void tcm_warp(const tcm_args *a, int32_t blk, int warp, int warps, float c[TCM_NT][32][4]) {
    const int32_t nck = (a->K + 31) / 32;
    for (int32_t kc = warp; kc < nck; kc += warps) { /* the U-unroll keeps this order */
        uint32_t xa[32][4], xb[32][4], wv[TCM_NT][32][4];
        for (int l = 0; l < 32; l++) {
            const int g = l >> 2, t = l & 3;
            const int32_t k0 = kc * 32 + 8 * t;
            tcm_ld_x(a, g, k0, xa[l]);
            tcm_ld_x(a, g + 8, k0, xb[l]);
            for (int nt = 0; nt < TCM_NT; nt++) tcm_ld_w(a, tcm_row(a, blk, nt, g), k0, wv[nt][l]);
        }
        tcm_mma_chunk(a, xa, xb, wv, a->mut == TCM_MUT_B_SWAP, c);
    }
}

static inline float tcm_sum(float red[TCM_WARPS][TCM_NT][16][8], int warps, int m, int cc) {
    float s = red[0][cc / 8][m][cc % 8];
    for (int w = 1; w < warps; w++) s += red[w][cc / 8][m][cc % 8];
    return s;
}

static inline void tcm_epilogue(const tcm_args *a, int32_t blk, float red[TCM_WARPS][TCM_NT][16][8], int warps) {
    for (int tid = 0; tid < TCM_WARPS * 32; tid++) {
        if (a->epi == TCM_SWIGLU) {
            const int m = tid / 8, n = tid % 8;
            const int32_t j = blk * 8 + n;
            if (m >= a->M || m >= 16 || j >= a->n_out) continue;
            const float g = tcm_sum(red, warps, m, n) + (a->bias ? a->bias[j] : 0.0f);
            const float u = tcm_sum(red, warps, m, 8 + n) + (a->bias ? a->bias[a->n_out + j] : 0.0f);
            a->y[(size_t)m * a->ldy + j] = g / (1.0f + expf(-g)) * u;
            continue;
        }
        const int m = tid / TCM_COLS, cc = tid % TCM_COLS;
        const int32_t o = blk * TCM_COLS + cc;
        if (m >= a->M || o >= a->n_out) continue;
        const float v = tcm_sum(red, warps, m, cc) + (a->bias ? a->bias[o] : 0.0f);
        float *dst = a->y + (size_t)m * a->ldy + o;
        *dst = a->epi == TCM_ADD ? *dst + v : v;
    }
}

/* The whole launch (a->M <= 16). */
static inline void tcm_gemm(const tcm_args *a) {
    const int warps = a->mut == TCM_MUT_SPLIT_BY_M && a->M > 8 ? 4 : TCM_WARPS;
    const int32_t cols = a->epi == TCM_SWIGLU ? 8 : TCM_COLS;
    const int32_t blocks = (a->n_out + cols - 1) / cols;
    static float c[TCM_WARPS][TCM_NT][32][4];
    static float red[TCM_WARPS][TCM_NT][16][8];
    for (int32_t blk = 0; blk < blocks; blk++) {
        memset(c, 0, sizeof c);
        for (int w = 0; w < warps; w++) tcm_warp(a, blk, w, warps, c[w]);
        for (int w = 0; w < warps; w++)
            for (int nt = 0; nt < TCM_NT; nt++)
                for (int l = 0; l < 32; l++) {
                    const int g = l >> 2, t = l & 3;
                    red[w][nt][g][2 * t] = c[w][nt][l][0];
                    red[w][nt][g][2 * t + 1] = c[w][nt][l][1];
                    red[w][nt][g + 8][2 * t] = c[w][nt][l][2];
                    red[w][nt][g + 8][2 * t + 1] = c[w][nt][l][3];
                }
        tcm_epilogue(a, blk, red, warps);
    }
}

/* The documented order written directly per output (no fragments): an independent
 * statement of what the kernel computes, for output (m, o) of a STORE launch. */
static inline float tcm_spec(const tcm_args *a, int32_t m, int32_t o) {
    const int32_t nck = (a->K + 31) / 32;
    float part[TCM_WARPS];
    for (int w = 0; w < TCM_WARPS; w++) {
        float c = 0.0f;
        for (int32_t kc = w; kc < nck; kc += TCM_WARPS)
            for (int s = 0; s < 2; s++) {
                double sum = 0.0;
                for (int kap = 0; kap < 16; kap++) { /* mma k index 2t + i + 8 hi <-> element 4s + 2 hi + i */
                    const int t = (kap & 7) >> 1, i = kap & 1, hi = kap >> 3;
                    const int32_t k = kc * 32 + 8 * t + 4 * s + 2 * hi + i;
                    if (k >= a->K) continue;
                        const double xv = tcm_dec(tcm_enc(a->x[(size_t)m * a->K + k], a->dt), a->dt);
                        sum += xv * tcm_dec(a->w[(size_t)o * a->K + k], a->dt);
                    }
                c = (float)((double)c + sum);
            }
        part[w] = c;
    }
    float s = part[0];
    for (int w = 1; w < TCM_WARPS; w++) s += part[w];
    return s + (a->bias ? a->bias[o] : 0.0f);
}

/* ==== the M-looped kernel (sd_gemm_tcb_kernel, sd_cuda_gemm_tcb) ====================
 * Launches of up to TCB_ROWS rows; x rounded once into xh (the launcher's conversion
 * pass); per block G partition groups of 8 / G warps, rounds r = 0 .. 8/G - 1 (group q:
 * partition rG + q), warp v of a group owns m-tiles v, v + 8/G, ... (<= TCB_MTW); the
 * chains go to red[q][row][col], S = -0.0 folds them q = 0 .. G - 1 per round. */
#define TCB_ROWS 512
#define TCB_MTW 4

static inline int tcb_groups(int32_t M) {
    return M <= TCB_ROWS / 8 ? 8 : M <= TCB_ROWS / 4 ? 4 : M <= TCB_ROWS / 2 ? 2 : 1;
}

/* sd_tcb_ld_x: 8 rounded activations of row m from k0 out of xh (zeros past K or M). */
static inline void tcb_ld_xh(const tcm_args *a, const uint16_t *xh, int32_t m, int32_t k0, uint32_t r[4]) {
    for (int j = 0; j < 4; j++) {
        uint32_t lo = 0, hi = 0;
        if (m < a->M && k0 + 2 * j < a->K) lo = xh[(size_t)m * a->K + k0 + 2 * j];
        if (m < a->M && k0 + 2 * j + 1 < a->K) hi = xh[(size_t)m * a->K + k0 + 2 * j + 1];
        r[j] = lo | (hi << 16);
    }
}

/* Chunk kc's two mma steps for m-tile mt and both n-tiles into c[nt][lane][4]. */
static inline void tcb_chunk(const tcm_args *a, const uint16_t *xh, int32_t blk, int32_t kc, int32_t mt,
                             float c[TCM_NT][32][4]) {
    uint32_t xa[32][4], xb[32][4], wv[TCM_NT][32][4];
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        const int32_t k0 = kc * 32 + 8 * t;
        tcb_ld_xh(a, xh, 16 * mt + g, k0, xa[l]);
        tcb_ld_xh(a, xh, 16 * mt + g + 8, k0, xb[l]);
        for (int nt = 0; nt < TCM_NT; nt++) tcm_ld_w(a, tcm_row(a, blk, nt, g), k0, wv[nt][l]);
    }
    tcm_mma_chunk(a, xa, xb, wv, 0, c);
}

/* sd_tcb_warp_loop: warp v of group q in round r; its chains c[i] for m-tile v + WPG i. */
static inline void tcb_warp(const tcm_args *a, const uint16_t *xh, int32_t blk, int G, int r, int q, int v,
                            float c[TCB_MTW][TCM_NT][32][4]) {
    const int32_t nck = (a->K + 31) / 32, nmt = (a->M + 15) / 16, wpg = TCM_WARPS / G;
    int32_t first = r * G + q, stride = TCM_WARPS;
    if (a->mut == TCB_MUT_SPLIT_BY_G) { /* round 0 does it all, G-way */
        first = r == 0 ? q : nck;
        stride = G;
    }
    memset(c, 0, sizeof(float) * TCB_MTW * TCM_NT * 32 * 4);
    for (int32_t kc = first; kc < nck; kc += stride) /* the U-unroll keeps this order */
        for (int i = 0; i < TCB_MTW; i++)
            if (v + wpg * i < nmt) tcb_chunk(a, xh, blk, kc, v + wpg * i, c[i]);
}

/* One block of one launch (a->M <= TCB_ROWS): rounds, stash, fold, epilogue. */
static inline void tcb_block(const tcm_args *a, const uint16_t *xh, int32_t blk) {
    static float c[TCB_MTW][TCM_NT][32][4], red[TCM_WARPS][TCB_ROWS][TCM_COLS], S[TCB_ROWS][TCM_COLS];
    const int G = tcb_groups(a->M), wpg = TCM_WARPS / G;
    const int32_t nmt = (a->M + 15) / 16;
    for (int32_t m = 0; m < TCB_ROWS; m++)
        for (int j = 0; j < TCM_COLS; j++) S[m][j] = -0.0f;
    for (int r = 0; r < TCM_WARPS / G; r++) {
        for (int w = 0; w < TCM_WARPS; w++) { /* sd_tcb_stash */
            const int q = w / wpg, v = w % wpg;
            tcb_warp(a, xh, blk, G, r, q, v, c);
            for (int i = 0; i < TCB_MTW; i++) {
                const int32_t mt = v + wpg * i;
                if (mt >= nmt) continue;
                for (int nt = 0; nt < TCM_NT; nt++)
                    for (int l = 0; l < 32; l++) {
                        const int g = l >> 2, t = l & 3;
                        red[q][16 * mt + g][nt * 8 + 2 * t] = c[i][nt][l][0];
                        red[q][16 * mt + g][nt * 8 + 2 * t + 1] = c[i][nt][l][1];
                        red[q][16 * mt + g + 8][nt * 8 + 2 * t] = c[i][nt][l][2];
                        red[q][16 * mt + g + 8][nt * 8 + 2 * t + 1] = c[i][nt][l][3];
                    }
            }
        }
        for (int32_t m = 0; m < a->M; m++) /* sd_tcb_fold */
            for (int j = 0; j < TCM_COLS; j++)
                for (int k = 0; k < G; k++) S[m][j] += red[a->mut == TCB_MUT_FOLD_REV ? G - 1 - k : k][m][j];
    }
    for (int32_t m = 0; m < a->M; m++) /* sd_tcb_epilogue / sd_tcb_put */
        for (int j = 0; j < 8; j++) {
            if (a->epi == TCM_SWIGLU) {
                const int32_t jj = blk * 8 + j;
                if (jj >= a->n_out) continue;
                const float g = S[m][j] + (a->bias ? a->bias[jj] : 0.0f);
                const float u = S[m][8 + j] + (a->bias ? a->bias[a->n_out + jj] : 0.0f);
                a->y[(size_t)m * a->ldy + jj] = g / (1.0f + expf(-g)) * u;
                continue;
            }
            for (int h = 0; h < 2; h++) {
                const int32_t o = blk * TCM_COLS + 8 * h + j;
                if (o >= a->n_out) continue;
                const float v = S[m][8 * h + j] + (a->bias ? a->bias[o] : 0.0f);
                float *dst = a->y + (size_t)m * a->ldy + o;
                *dst = a->epi == TCM_ADD ? *dst + v : v;
            }
        }
}

/* sd_cuda_gemm_tcb: round x into a scratch once, then launches of TCB_ROWS rows. */
static inline void tcb_gemm(const tcm_args *a) {
    uint16_t *xh = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)(a->M > 0 ? a->M : 1) * a->K);
    if (!xh) return;
    for (size_t i = 0; i < (size_t)a->M * a->K; i++) xh[i] = tcm_enc(a->x[i], a->dt);
    const int32_t cols = a->epi == TCM_SWIGLU ? 8 : TCM_COLS, blocks = (a->n_out + cols - 1) / cols;
    for (int32_t m0 = 0; m0 < a->M; m0 += TCB_ROWS) {
        tcm_args l = *a;
        l.M = a->M - m0 < TCB_ROWS ? a->M - m0 : TCB_ROWS;
        l.x = a->x + (size_t)m0 * a->K;
        l.y = a->y + (size_t)m0 * a->ldy;
        for (int32_t blk = 0; blk < blocks; blk++) tcb_block(&l, xh + (size_t)m0 * a->K, blk);
    }
    free(xh);
}

/* sd_cuda_gemm_tc's dispatch: up to 17 rows (or no scratch) launches of 16 rows of the
 * kernel above, else the M-looped kernel. */
static inline void tcm_gemm_tc(const tcm_args *a, int has_xconv) {
    if (a->M > 17 && has_xconv) {
        tcb_gemm(a);
        return;
    }
    for (int32_t m0 = 0; m0 < a->M; m0 += 16) {
        tcm_args l = *a;
        l.M = a->M - m0 < 16 ? a->M - m0 : 16;
        l.x = a->x + (size_t)m0 * a->K;
        l.y = a->y + (size_t)m0 * a->ldy;
        tcm_gemm(&l);
    }
}

#endif
