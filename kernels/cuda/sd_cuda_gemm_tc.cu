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
 * (the same values, so the same results). */
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
};

static __device__ __forceinline__ uint32_t sd_tc_pack(float lo, float hi, bool bf) {
    const uint32_t a = bf ? sd_f32_to_bf16(lo) : sd_f32_to_f16(lo);
    const uint32_t b = bf ? sd_f32_to_bf16(hi) : sd_f32_to_f16(hi);
    return a | (b << 16); /* the lower k in the low half-word, as mma expects */
}

/* 8 weights of row `row` from k0 (zeros past K) as 4 packed 16-bit pairs. */
static __device__ __forceinline__ uint4 sd_tc_ld_w(const uint16_t *row, int32_t k0, int32_t K, int vec) {
    if (k0 >= K) return make_uint4(0, 0, 0, 0);
    if (vec) return __ldcs((const uint4 *)(row + k0));
    uint32_t v[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const uint32_t lo = k0 + 2 * j < K ? row[k0 + 2 * j] : 0u;
        const uint32_t hi = k0 + 2 * j + 1 < K ? row[k0 + 2 * j + 1] : 0u;
        v[j] = lo | (hi << 16);
    }
    return make_uint4(v[0], v[1], v[2], v[3]);
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

/* One warp's partial sums over its chunks w, w + 8, ... into c[nt][4]. */
template <bool BF>
static __device__ __forceinline__ void sd_tc_warp_loop(const sd_tc_params &p, int warp, int g, int t,
                                                       float c[SD_TC_NT][4]) {
    const int32_t K = p.k_in, nck = (K + 31) / 32;
    const uint16_t *wrow[SD_TC_NT];
    bool wok[SD_TC_NT];
#pragma unroll
    for (int nt = 0; nt < SD_TC_NT; nt++) {
        const int32_t r = sd_tc_row(p, nt, g);
        wok[nt] = r >= 0;
        wrow[nt] = (const uint16_t *)p.w + (size_t)(r >= 0 ? r : 0) * K;
    }
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
    sd_tc_params p;
    p.w = a->w;
    p.bias = a->bias;
    p.ldy = a->ldy;
    p.n_out = a->n_out;
    p.k_in = a->k_in;
    p.epi = a->epi;
    p.vec = (a->k_in % 8 == 0) && ((uintptr_t)a->w % 16 == 0) && ((uintptr_t)a->x % 16 == 0);
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
