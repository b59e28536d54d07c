/* sd_cuda_gemm_tc.cu — the tensor-core skinny GEMM for BF16/F16 weights, M <= 16 rows
 * per launch (decode and verify), with fused epilogues. CPU reference: sd_cpu_matmul;
 * exact host model of the reduction order: tests/cuda_gemm_model/sd_gemm_tc_model.h.
 *
 * y[m, o] = sum_k x[m, k] W[o, k] (+ bias[o]), x fp32 [M, K] rounded to W's dtype once
 * per element as it is loaded (round to nearest even, the sd_math.h bit code), W
 * [n_out, K] BF16/F16 (nn.Linear layout), fp32 accumulation on mma.sync m16n8k16.
 *
 * ONE tile configuration for every M <= 16 (so row m's result never depends on M or
 * on the other rows): a block of SD_TC_WARPS = 8 warps owns SD_TC_COLS = 16 output
 * columns (two 8-column n-tiles); the mma A operand is always 16 activation rows (rows
 * >= M are zeros and are never stored), B is 8 weight rows. K is cut into chunks of 32;
 * warp w takes chunks w, w + 8, w + 16, ... in ascending order (a fixed k-split, never a
 * function of M). In a chunk, lane l = 4g + t loads with ONE 16-byte load the 8
 * weights W[o_g, 32c + 8t .. 32c + 8t + 7] of each n-tile (weights stream once) and the
 * same 8 k of activation rows g and g + 8; mma step s in {0, 1} uses elements 4s..4s+3:
 * logical k index 2t + i <-> element 4s + i and 2t + 8 + i <-> element 4s + 2 + i (i in
 * {0, 1}), the same map for A and B, so each mma sums 16 true products
 * x[m, k] W[o, k]. Elements past K load as zeros. After the loop each warp's 16x16
 * fp32 partials go to shared memory and one thread per output sums the 8 warps in
 * order w = 0..7, then applies the epilogue:
 *   SD_GEMM_EPI_STORE   y[m, o] = s + b[o]
 *   SD_GEMM_EPI_ADD     y[m, o] = y[m, o] + (s + b[o])   (residual add: the same fp32 add
 *                       the unfused RMSNorm kernel does with the stored product)
 *   SD_GEMM_EPI_SWIGLU  W is [gate; up] (2 n_out rows); the block's two n-tiles are
 *                       gate rows j0..j0+7 and up rows n_out + j0..j0+7, and
 *                       y[m, j] = g / (1 + expf(-g)) * u as in sd_cuda_swiglu.
 * Launch: 256 threads, grid ceil(n_out / 16) (SWIGLU: ceil(n_out / 8)), 8 KiB static
 * shared memory; rows beyond 16 go to further launches of the same kernel. When K % 8
 * != 0 or a pointer is not 16-byte aligned the loads are scalar with the same map
 * (the same values, so the same results).
 *
 * sd_cuda_gemm_tc runs this kernel for n <= SD_CUDA_SKINNY_MAX_M = 17 rows (decode and
 * verify: the code and the launches are the ones the engine always ran) and hands
 * larger n to the M-looped kernel below (sd_cuda_gemm_tcb) when the caller gives the
 * scratch `xconv`; without it, launches of 16 rows as before. Both compute every
 * output with the same operations in the same order (see below), so which one ran
 * never shows in the bits. */
#include <cuda_runtime.h>

#include "sd_cuda_common.cuh"

#define SD_TC_WARPS 8 /* k-split warps per block */
#define SD_TC_NT 2    /* 8-column n-tiles per block */
#define SD_TC_COLS (8 * SD_TC_NT)
#define SD_TC_U 4     /* chunks in flight per warp and iteration (order stays ascending) */

/* Kernel operands, passed by value (one struct: the launcher unpacks nothing). */
struct sd_tc_params {
    const void *w;
    const float *bias;
    const float *x;
    float *y;
    int32_t ldy, M, n_out, k_in;
    int epi;
    int vec;
    const uint16_t *xh; /* M-looped kernel: x already rounded to W's dtype [M, K] */
};

static __device__ __forceinline__ uint32_t sd_tc_pack(float lo, float hi, bool bf) {
    const uint32_t a = bf ? sd_f32_to_bf16(lo) : sd_f32_to_f16(lo);
    const uint32_t b = bf ? sd_f32_to_bf16(hi) : sd_f32_to_f16(hi);
    return a | (b << 16); /* the lower k in the low half-word, as mma expects */
}

/* 8 consecutive 16-bit values of `row` from k0 (zeros past K), as 4 packed pairs: one
 * 16-byte load, cache-streaming (CS: read once) or through L1 (re-read by sibling
 * warps), or scalar loads with the same values. */
template <bool CS>
static __device__ __forceinline__ uint4 sd_tc_ld16(const uint16_t *row, int32_t k0, int32_t K, int vec) {
    if (k0 >= K) return make_uint4(0, 0, 0, 0);
    if (vec) return CS ? __ldcs((const uint4 *)(row + k0)) : __ldg((const uint4 *)(row + k0));
    uint32_t v[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const uint32_t lo = k0 + 2 * j < K ? row[k0 + 2 * j] : 0u;
        const uint32_t hi = k0 + 2 * j + 1 < K ? row[k0 + 2 * j + 1] : 0u;
        v[j] = lo | (hi << 16);
    }
    return make_uint4(v[0], v[1], v[2], v[3]);
}

/* 8 weights of row `row` from k0 (zeros past K) as 4 packed 16-bit pairs, streamed
 * (read once: __ldcs). */
static __device__ __forceinline__ uint4 sd_tc_ld_w(const uint16_t *row, int32_t k0, int32_t K, int vec) {
    return sd_tc_ld16<true>(row, k0, K, vec);
}

/* 8 activations of row m from k0, rounded to the weight dtype (zeros past K or M). */
static __device__ __forceinline__ uint4 sd_tc_ld_x(const float *__restrict__ x, int32_t m, int32_t M, int32_t k0,
                                                   int32_t K, int vec, bool bf) {
    if (m >= M || k0 >= K) return make_uint4(0, 0, 0, 0);
    const float *p = x + (size_t)m * K + k0;
    float f[8];
    if (vec) {
        const float4 a = __ldg((const float4 *)p), b = __ldg((const float4 *)p + 1);
        f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w;
        f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++) f[j] = k0 + j < K ? __ldg(p + j) : 0.0f;
    }
    return make_uint4(sd_tc_pack(f[0], f[1], bf), sd_tc_pack(f[2], f[3], bf), sd_tc_pack(f[4], f[5], bf),
                      sd_tc_pack(f[6], f[7], bf));
}

/* c += A B for one m16n8k16 step; a: the 4 A registers, b: the 2 B registers. */
template <bool BF>
static __device__ __forceinline__ void sd_tc_mma(float c[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                 uint32_t b0, uint32_t b1) {
    if (BF)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* Weight row of n-tile nt, lane group g in this block; -1 when past the matrix. */
static __device__ __forceinline__ int32_t sd_tc_row(const sd_tc_params &p, int nt, int g) {
    if (p.epi == SD_GEMM_EPI_SWIGLU) {
        const int32_t j = (int32_t)blockIdx.x * 8 + g;
        return j < p.n_out ? j + nt * p.n_out : -1;
    }
    const int32_t o = (int32_t)blockIdx.x * SD_TC_COLS + nt * 8 + g;
    return o < p.n_out ? o : -1;
}

/* Lane group g's weight row of each n-tile (row 0 where there is none, wok false). */
static __device__ __forceinline__ void sd_tc_weight_rows(const sd_tc_params &p, int g, const uint16_t *wrow[SD_TC_NT],
                                                         bool wok[SD_TC_NT]) {
#pragma unroll
    for (int nt = 0; nt < SD_TC_NT; nt++) {
        const int32_t r = sd_tc_row(p, nt, g);
        wok[nt] = r >= 0;
        wrow[nt] = (const uint16_t *)p.w + (size_t)(r >= 0 ? r : 0) * p.k_in;
    }
}

/* One warp's partial sums over its chunks w, w + 8, ... into c[nt][4]. */
template <bool BF>
static __device__ __forceinline__ void sd_tc_warp_loop(const sd_tc_params &p, int warp, int g, int t,
                                                       float c[SD_TC_NT][4]) {
    const int32_t K = p.k_in, nck = (K + 31) / 32;
    const uint16_t *wrow[SD_TC_NT];
    bool wok[SD_TC_NT];
    sd_tc_weight_rows(p, g, wrow, wok);
    for (int32_t c0 = warp; c0 < nck; c0 += SD_TC_WARPS * SD_TC_U) {
        uint4 wv[SD_TC_U][SD_TC_NT];
#pragma unroll
        for (int u = 0; u < SD_TC_U; u++) {
            const int32_t k0 = (c0 + u * SD_TC_WARPS) * 32 + 8 * t; /* >= K past the last chunk: zeros */
#pragma unroll
            for (int nt = 0; nt < SD_TC_NT; nt++)
                wv[u][nt] = wok[nt] ? sd_tc_ld_w(wrow[nt], k0, K, p.vec) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < SD_TC_U; u++) {
            const int32_t kc = c0 + u * SD_TC_WARPS;
            if (kc >= nck) break;
            const int32_t k0 = kc * 32 + 8 * t;
            const uint4 xa = sd_tc_ld_x(p.x, g, p.M, k0, K, p.vec, BF);
            const uint4 xb = sd_tc_ld_x(p.x, g + 8, p.M, k0, K, p.vec, BF);
#pragma unroll
            for (int nt = 0; nt < SD_TC_NT; nt++) {
                sd_tc_mma<BF>(c[nt], xa.x, xb.x, xa.y, xb.y, wv[u][nt].x, wv[u][nt].y); /* elements 0..3 */
                sd_tc_mma<BF>(c[nt], xa.z, xb.z, xa.w, xb.w, wv[u][nt].z, wv[u][nt].w); /* elements 4..7 */
            }
        }
    }
}

/* Sum of the 8 warps' partials of (row m, block column cc) in warp order. */
static __device__ __forceinline__ float sd_tc_sum(const float (*red)[SD_TC_NT][16][8], int m, int cc) {
    float s = red[0][cc / 8][m][cc % 8];
#pragma unroll
    for (int w = 1; w < SD_TC_WARPS; w++) s += red[w][cc / 8][m][cc % 8];
    return s;
}

static __device__ __forceinline__ void sd_tc_epilogue(const sd_tc_params &p, const float (*red)[SD_TC_NT][16][8]) {
    const int tid = threadIdx.x;
    if (p.epi == SD_GEMM_EPI_SWIGLU) {
        const int m = tid / 8, n = tid % 8;
        const int32_t j = (int32_t)blockIdx.x * 8 + n;
        if (m >= p.M || m >= 16 || j >= p.n_out) return;
        const float g = sd_tc_sum(red, m, n) + (p.bias ? p.bias[j] : 0.0f);
        const float u = sd_tc_sum(red, m, 8 + n) + (p.bias ? p.bias[p.n_out + j] : 0.0f);
        p.y[(size_t)m * p.ldy + j] = g / (1.0f + expf(-g)) * u;
        return;
    }
    const int m = tid / SD_TC_COLS, cc = tid % SD_TC_COLS;
    const int32_t o = (int32_t)blockIdx.x * SD_TC_COLS + cc;
    if (m >= p.M || o >= p.n_out) return;
    const float v = sd_tc_sum(red, m, cc) + (p.bias ? p.bias[o] : 0.0f);
    float *dst = p.y + (size_t)m * p.ldy + o;
    *dst = p.epi == SD_GEMM_EPI_ADD ? *dst + v : v;
}

template <bool BF>
static __global__ void __launch_bounds__(SD_TC_WARPS * 32) sd_gemm_tc_kernel(const sd_tc_params p) {
    __shared__ float red[SD_TC_WARPS][SD_TC_NT][16][8];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    float c[SD_TC_NT][4];
#pragma unroll
    for (int nt = 0; nt < SD_TC_NT; nt++) c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0.0f;
    sd_tc_warp_loop<BF>(p, warp, g, t, c);
#pragma unroll
    for (int nt = 0; nt < SD_TC_NT; nt++) { /* the m16n8 accumulator layout */
        red[warp][nt][g][2 * t] = c[nt][0];
        red[warp][nt][g][2 * t + 1] = c[nt][1];
        red[warp][nt][g + 8][2 * t] = c[nt][2];
        red[warp][nt][g + 8][2 * t + 1] = c[nt][3];
    }
    __syncthreads();
    sd_tc_epilogue(p, red);
}

extern "C" specdec_status sd_cuda_gemm_tc(const sd_cuda_gemm_args *a, cudaStream_t stream, sd_errbuf *eb) {
    if (!a) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_gemm_tc: NULL args");
    if (a->n <= 0 || a->n_out <= 0) return SPECDEC_OK;
    if (a->wdt != SD_BF16 && a->wdt != SD_F16)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_gemm_tc: weights must be BF16 or F16");
    if (a->k_in <= 0 || a->ldy < a->n_out || a->epi < SD_GEMM_EPI_STORE || a->epi > SD_GEMM_EPI_SWIGLU)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_gemm_tc: k %d, n_out %d, ldy %d, epilogue %d",
                       (int)a->k_in, (int)a->n_out, (int)a->ldy, (int)a->epi);
    /* More rows than a verify step, with the scratch to round x into: the M-looped
     * kernel (weights read once, the same bits per row). Up to 17 rows, or without a
     * scratch: launches of 16 rows below, exactly as before. */
    if (a->n > SD_CUDA_SKINNY_MAX_M && a->xconv) return sd_cuda_gemm_tcb(a, stream, eb);
    sd_tc_params p;
    p.w = a->w;
    p.bias = a->bias;
    p.ldy = a->ldy;
    p.n_out = a->n_out;
    p.k_in = a->k_in;
    p.epi = a->epi;
    p.vec = (a->k_in % 8 == 0) && ((uintptr_t)a->w % 16 == 0) && ((uintptr_t)a->x % 16 == 0);
    p.xh = NULL;
    const unsigned cols = a->epi == SD_GEMM_EPI_SWIGLU ? 8u : (unsigned)SD_TC_COLS;
    const dim3 grid(sd_cdiv((size_t)a->n_out, cols)), block(SD_TC_WARPS * 32);
    for (int32_t m0 = 0; m0 < a->n; m0 += SD_CUDA_SKINNY_ROWS) {
        p.M = a->n - m0 < SD_CUDA_SKINNY_ROWS ? a->n - m0 : SD_CUDA_SKINNY_ROWS;
        p.x = a->x + (size_t)m0 * a->k_in;
        p.y = a->y + (size_t)m0 * a->ldy;
        if (a->wdt == SD_BF16) sd_gemm_tc_kernel<true><<<grid, block, 0, stream>>>(p);
        else sd_gemm_tc_kernel<false><<<grid, block, 0, stream>>>(p);
        SD_CUDA_LAUNCHED(eb, "sd_gemm_tc_kernel");
    }
    return SPECDEC_OK;
}

/* ==== the M-looped kernel: any M, weights streamed once (sd_cuda_gemm_tcb) =========
 *
 * The same per-output arithmetic as the kernel above for up to SD_TCB_ROWS = 512 rows
 * per launch (SD_CUDA_GEMM_BATCH_ROWS): row m's y[m, o] is bitwise the 16-row kernel's,
 * whatever M is and whatever the other rows hold. What fixes a result, and is kept:
 *  - the activation rounding: x rounded once to W's dtype (sd_f32_to_bf16 / _f16: the
 *    launcher's conversion pass into `xconv`, the same function the 16-row kernel
 *    applies in its loader);
 *  - the k-split: 8 PARTITIONS, partition p owning the 32-wide k chunks p, p + 8, p +
 *    16, ... in ascending order; per chunk two m16n8k16 steps with the same fragment
 *    map (lane l = 4g + t holds elements 32c + 8t .. + 7 of weight row g and activation
 *    rows g, g + 8; step s uses elements 4s .. 4s + 3), accumulating from +0 into one
 *    fp32 chain per (row, column, partition);
 *  - the reduction: s = c_0 + c_1 + ... + c_7 left to right, then + (bias or +0), then
 *    the epilogue expression (STORE / ADD / SWIGLU exactly as above).
 * What is free, because no result depends on it: the tile and grid shape, which warp
 * computes which partition for which rows, the position of a row inside its 16-row
 * A tile (an mma's output row depends only on its own A row), how many chunks are in
 * flight. The host model (tests/cuda_gemm_model) checks that data flow bitwise.
 *
 * Layout: a block owns the same 16 columns as above (two 8-column n-tiles; SWIGLU: 8
 * gate + 8 up rows) and ALL rows of the launch, 16-row m-tiles; grid ceil(n_out / 16)
 * (SWIGLU ceil(n_out / 8)), 256 threads = 8 warps, 32 KiB static shared memory. The 8
 * partitions run in G concurrent groups of 8 / G warps, in 8 / G rounds (round r:
 * group q computes partition rG + q); in a group, warp v takes m-tiles v, v + 8/G, ...
 * (at most SD_TCB_MTW = 4 each), so G = 8 for M <= 64, 4 for <= 128, 2 for <= 256, 1
 * for <= 512 (per launch, from M: the register budget, 32 accumulators per lane, and
 * the longest dependent mma chain, K / 16 / G per partition round). Per chunk a warp
 * loads the 2 x 16 bytes of weights its lanes need ONCE (U chunks ahead, as above) and
 * applies them to every one of its m-tiles: the block streams its 16 x K weights once
 * per launch from DRAM (G = 8: exactly once; G < 8: the 8 / G warps of a group read
 * the same fragments, the second and later reads served by L1 / L2). Activations come
 * from the rounded BF16/F16 copy (one 16-byte load per row pair and chunk).
 * After each round every warp parks its chains in shared memory red[q][row][col] and
 * thread i folds them into its running sums S (rows/column pairs i, i + 256, ...):
 * S = -0.0, then S += c_q for q = 0 .. G - 1, round after round — the order above
 * (-0.0 + c_0 == c_0 for every c_0, signed zeros included); the epilogue reads S from
 * registers. M > 512: launches of 512 rows (the last one smaller), each row computed
 * as in any other launch. */
#define SD_TCB_ROWS SD_CUDA_GEMM_BATCH_ROWS /* rows per launch */
#define SD_TCB_MTW 4                          /* m-tiles per warp at most */

template <int G> struct sd_tcb_cfg {
    static constexpr int WPG = SD_TC_WARPS / G;                 /* warps per partition group */
    static constexpr int MAXM = SD_TCB_ROWS / G;                /* rows of a launch with G groups */
    static constexpr int SPT = MAXM * 8 / (SD_TC_WARPS * 32);   /* (row, column pair) sums per thread */
    static constexpr int U = G == 8 ? SD_TC_U : 2;              /* weight chunks in flight per warp */
    static constexpr int MINB = G == 1 ? 1 : 2;                 /* blocks per SM (<= 128 registers) */
    static_assert(MAXM / 16 == WPG * SD_TCB_MTW, "m-tiles per warp");
    static_assert(SPT >= 1, "fold ownership");
};

static int sd_tcb_groups(int32_t M) {
    return M <= SD_TCB_ROWS / 8 ? 8 : M <= SD_TCB_ROWS / 4 ? 4 : M <= SD_TCB_ROWS / 2 ? 2 : 1;
}


/* 8 rounded activations of row m from k0 (zeros past K or M). */
static __device__ __forceinline__ uint4 sd_tcb_ld_x(const sd_tc_params &p, int32_t m, int32_t k0) {
    if (m >= p.M) return make_uint4(0, 0, 0, 0);
    return sd_tc_ld16<false>(p.xh + (size_t)m * p.k_in, k0, p.k_in, p.vec);
}

/* Partition `part`'s chains of this warp: chunks part, part + 8, ... ascending, each
 * applied to the warp's m-tiles v, v + WPG, ... (c[i] for the i-th). */
template <bool BF, int G>
static __device__ __forceinline__ void sd_tcb_warp_loop(const sd_tc_params &p, int part, int v, int g, int t,
                                                        float c[SD_TCB_MTW][SD_TC_NT][4]) {
    typedef sd_tcb_cfg<G> C;
    const int32_t K = p.k_in, nck = (K + 31) / 32, nmt = (p.M + 15) / 16;
    const uint16_t *wrow[SD_TC_NT];
    bool wok[SD_TC_NT];
    sd_tc_weight_rows(p, g, wrow, wok);
    for (int32_t c0 = part; c0 < nck; c0 += SD_TC_WARPS * C::U) {
        uint4 wv[C::U][SD_TC_NT];
#pragma unroll
        for (int u = 0; u < C::U; u++) {
            const int32_t k0 = (c0 + u * SD_TC_WARPS) * 32 + 8 * t; /* >= K past the last chunk: zeros */
#pragma unroll
            for (int nt = 0; nt < SD_TC_NT; nt++)
                wv[u][nt] = wok[nt] ? sd_tc_ld16<G == 8>(wrow[nt], k0, K, p.vec) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < C::U; u++) {
            const int32_t kc = c0 + u * SD_TC_WARPS;
            if (kc >= nck) break;
            const int32_t k0 = kc * 32 + 8 * t;
#pragma unroll
            for (int i = 0; i < SD_TCB_MTW; i++) {
                const int32_t mt = v + C::WPG * i;
                if (mt >= nmt) continue;
                const uint4 xa = sd_tcb_ld_x(p, 16 * mt + g, k0), xb = sd_tcb_ld_x(p, 16 * mt + g + 8, k0);
#pragma unroll
                for (int nt = 0; nt < SD_TC_NT; nt++) {
                    sd_tc_mma<BF>(c[i][nt], xa.x, xb.x, xa.y, xb.y, wv[u][nt].x, wv[u][nt].y); /* elements 0..3 */
                    sd_tc_mma<BF>(c[i][nt], xa.z, xb.z, xa.w, xb.w, wv[u][nt].z, wv[u][nt].w); /* elements 4..7 */
                }
            }
        }
    }
}

/* The warp's chains into red[q][row][column] (the m16n8 accumulator layout). */
template <int G>
static __device__ __forceinline__ void sd_tcb_stash(float *red, int q, int v, int g, int t, int32_t nmt,
                                                    const float c[SD_TCB_MTW][SD_TC_NT][4]) {
    typedef sd_tcb_cfg<G> C;
#pragma unroll
    for (int i = 0; i < SD_TCB_MTW; i++) {
        const int32_t mt = v + C::WPG * i;
        if (mt >= nmt) continue;
#pragma unroll
        for (int nt = 0; nt < SD_TC_NT; nt++) {
            float *r0 = red + ((size_t)q * C::MAXM + 16 * mt + g) * SD_TC_COLS + nt * 8 + 2 * t;
            r0[0] = c[i][nt][0];
            r0[1] = c[i][nt][1];
            r0[8 * SD_TC_COLS] = c[i][nt][2];
            r0[8 * SD_TC_COLS + 1] = c[i][nt][3];
        }
    }
}

/* S += the round's partitions q = 0 .. G - 1, in that order, for this thread's sums:
 * pair i = threadIdx.x + 256 s is row i / 8, columns i % 8 (s0) and 8 + i % 8 (s1). */
template <int G>
static __device__ __forceinline__ void sd_tcb_fold(const float *red, int32_t M, float s0[], float s1[]) {
    typedef sd_tcb_cfg<G> C;
#pragma unroll
    for (int s = 0; s < C::SPT; s++) {
        const int32_t i = (int32_t)threadIdx.x + SD_TC_WARPS * 32 * s, m = i >> 3, j = i & 7;
        if (m >= M) continue;
#pragma unroll
        for (int q = 0; q < G; q++) {
            const float *r = red + ((size_t)q * C::MAXM + m) * SD_TC_COLS;
            s0[s] += r[j];
            s1[s] += r[8 + j];
        }
    }
}

/* Column o of row m from its sum: + bias (or +0, as above), then STORE or ADD. */
static __device__ __forceinline__ void sd_tcb_put(const sd_tc_params &p, int32_t m, int32_t o, float s) {
    if (o >= p.n_out) return;
    const float v = s + (p.bias ? p.bias[o] : 0.0f);
    float *dst = p.y + (size_t)m * p.ldy + o;
    *dst = p.epi == SD_GEMM_EPI_ADD ? *dst + v : v;
}

template <int G>
static __device__ __forceinline__ void sd_tcb_epilogue(const sd_tc_params &p, const float s0[], const float s1[]) {
    typedef sd_tcb_cfg<G> C;
#pragma unroll
    for (int s = 0; s < C::SPT; s++) {
        const int32_t i = (int32_t)threadIdx.x + SD_TC_WARPS * 32 * s, m = i >> 3, j = i & 7;
        if (m >= p.M) continue;
        if (p.epi == SD_GEMM_EPI_SWIGLU) {
            const int32_t jj = (int32_t)blockIdx.x * 8 + j;
            if (jj >= p.n_out) continue;
            const float g = s0[s] + (p.bias ? p.bias[jj] : 0.0f);
            const float u = s1[s] + (p.bias ? p.bias[p.n_out + jj] : 0.0f);
            p.y[(size_t)m * p.ldy + jj] = g / (1.0f + expf(-g)) * u;
            continue;
        }
        sd_tcb_put(p, m, (int32_t)blockIdx.x * SD_TC_COLS + j, s0[s]);
        sd_tcb_put(p, m, (int32_t)blockIdx.x * SD_TC_COLS + 8 + j, s1[s]);
    }
}

template <bool BF, int G>
static __global__ void __launch_bounds__(SD_TC_WARPS * 32, sd_tcb_cfg<G>::MINB) sd_gemm_tcb_kernel(const sd_tc_params p) {
    typedef sd_tcb_cfg<G> C;
    __shared__ float red[SD_TCB_ROWS * SD_TC_COLS]; /* [G][MAXM][16] */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int q = warp / C::WPG, v = warp % C::WPG;
    const int32_t nmt = (p.M + 15) / 16;
    float s0[C::SPT], s1[C::SPT];
#pragma unroll
    for (int s = 0; s < C::SPT; s++) s0[s] = s1[s] = -0.0f; /* the identity of +: -0 + c == c */
    for (int r = 0; r < SD_TC_WARPS / G; r++) {
        float c[SD_TCB_MTW][SD_TC_NT][4];
#pragma unroll
        for (int i = 0; i < SD_TCB_MTW; i++)
#pragma unroll
            for (int nt = 0; nt < SD_TC_NT; nt++) c[i][nt][0] = c[i][nt][1] = c[i][nt][2] = c[i][nt][3] = 0.0f;
        sd_tcb_warp_loop<BF, G>(p, r * G + q, v, g, t, c);
        if (r > 0) __syncthreads(); /* the previous round's fold has read red */
        sd_tcb_stash<G>(red, q, v, g, t, nmt, c);
        __syncthreads();
        sd_tcb_fold<G>(red, p.M, s0, s1);
    }
    sd_tcb_epilogue<G>(p, s0, s1);
}

template <bool BF>
static void sd_tcb_launch(const sd_tc_params &p, dim3 grid, cudaStream_t stream) {
    const dim3 block(SD_TC_WARPS * 32);
    switch (sd_tcb_groups(p.M)) {
    case 8: sd_gemm_tcb_kernel<BF, 8><<<grid, block, 0, stream>>>(p); break;
    case 4: sd_gemm_tcb_kernel<BF, 4><<<grid, block, 0, stream>>>(p); break;
    case 2: sd_gemm_tcb_kernel<BF, 2><<<grid, block, 0, stream>>>(p); break;
    default: sd_gemm_tcb_kernel<BF, 1><<<grid, block, 0, stream>>>(p); break;
    }
}

extern "C" specdec_status sd_cuda_gemm_tcb(const sd_cuda_gemm_args *a, cudaStream_t stream, sd_errbuf *eb) {
    if (!a) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_gemm_tcb: NULL args");
    if (a->n <= 0 || a->n_out <= 0) return SPECDEC_OK;
    if ((a->wdt != SD_BF16 && a->wdt != SD_F16) || !a->xconv)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_gemm_tcb: weights must be BF16 or F16 (%d), xconv %p",
                       (int)a->wdt, a->xconv);
    if (a->k_in <= 0 || a->ldy < a->n_out || a->epi < SD_GEMM_EPI_STORE || a->epi > SD_GEMM_EPI_SWIGLU)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_gemm_tcb: k %d, n_out %d, ldy %d, epilogue %d",
                       (int)a->k_in, (int)a->n_out, (int)a->ldy, (int)a->epi);
    /* x rounded to the weight dtype once, for every row (the 16-row kernel's rounding) */
    specdec_status st = sd_cuda_convert_f32(a->x, a->xconv, a->wdt, (size_t)a->n * a->k_in, stream, eb);
    if (st != SPECDEC_OK) return st;
    sd_tc_params p;
    p.w = a->w;
    p.bias = a->bias;
    p.x = NULL;
    p.ldy = a->ldy;
    p.n_out = a->n_out;
    p.k_in = a->k_in;
    p.epi = a->epi;
    p.vec = (a->k_in % 8 == 0) && ((uintptr_t)a->w % 16 == 0) && ((uintptr_t)a->xconv % 16 == 0);
    const unsigned cols = a->epi == SD_GEMM_EPI_SWIGLU ? 8u : (unsigned)SD_TC_COLS;
    const dim3 grid(sd_cdiv((size_t)a->n_out, cols));
    for (int32_t m0 = 0; m0 < a->n; m0 += SD_TCB_ROWS) {
        p.M = a->n - m0 < SD_TCB_ROWS ? a->n - m0 : SD_TCB_ROWS;
        p.xh = (const uint16_t *)a->xconv + (size_t)m0 * a->k_in;
        p.y = a->y + (size_t)m0 * a->ldy;
        if (a->wdt == SD_BF16) sd_tcb_launch<true>(p, grid, stream);
        else sd_tcb_launch<false>(p, grid, stream);
        SD_CUDA_LAUNCHED(eb, "sd_gemm_tcb_kernel");
    }
    return SPECDEC_OK;
}
