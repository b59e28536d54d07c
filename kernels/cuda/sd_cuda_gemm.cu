/* sd_cuda_gemm.cu — the projections y = x W^T (+ b) (CPU reference: sd_cpu_matmul).
 *
 * Shapes: x [n, k] fp32, W [n_out, k] in F32/F16/BF16 (nn.Linear layout), bias [n_out]
 * fp32 or NULL, y [n, ldy] fp32.
 *
 * Skinny GEMM (decode / verify, n <= SD_CUDA_SKINNY_ROWS per launch): one warp owns
 * one output column o (one row of W) and streams that row exactly once per launch
 * with 16-byte loads (uint4 = 8 bf16/f16; two float4 for f32), coalesced across the
 * warp, cache-streaming (weights are read once; the activations stay in L1). Lane l
 * takes the 8-element chunks c = l, l+32, l+64, ... of k in ascending order and keeps
 * n fp32 accumulators, one per activation row, each updated by an explicit fmaf chain
 * over the chunk's 8 elements; then the elements of k beyond the last whole chunk go
 * to lanes 0..(k%8)-1; then a fixed xor-shuffle tree sums the 32 lanes and lane 0
 * adds the bias. Output (m, o)'s operations and their order depend only on k and on
 * row m of x — never on n or on the template width MT — so the kernel is batch
 * invariant: a row's result is bitwise the same alone or among 16.
 * Launch: 256 threads (8 warps = 8 output columns) per block, grid ceil(n_out / 8);
 * MT in {1, 2, 4, 8, 16} is the smallest width >= the rows of the launch; rows
 * beyond 16 go to further launches. Unaligned or k % 8 != 0 falls back to scalar
 * loads with the same chunking (same order, so the same results). The kernel keeps
 * positional __restrict__ parameters (the launcher unpacks sd_cuda_gemm_args): it is
 * the hot loop of every projection, and its code is left exactly as it was.
 *
 * Since the tensor-core kernel (sd_cuda_gemm_tc.cu) this CUDA-core kernel serves F32
 * weights (sd_cuda_gemm_skinny dispatches by dtype) and is the benchmark's baseline
 * (sd_cuda_gemm_simt, any dtype).
 *
 * BLAS (prefill, n > SD_CUDA_SKINNY_MAX_M): x is converted to W's dtype and
 * cublasGemmEx computes y^T = W x^T with fp32 accumulation (CUBLAS_COMPUTE_32F), then
 * a small kernel adds the bias. */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cublas_v2.h>

#include "sd_cublas_dl.h"

#include "sd_cuda_common.cuh"

#define SD_GEMM_WARPS 8
#define SD_GEMM_UNROLL 4

/* One 8-element chunk of a weight row: raw 16-byte load(s), then fp32 values. */
template <typename T> struct sd_wchunk;
template <> struct sd_wchunk<sd_bf16_t> {
    uint4 r;
    __device__ __forceinline__ void load(const sd_bf16_t *p) { r = __ldcs((const uint4 *)p); }
    __device__ __forceinline__ void get(float w[8]) const {
        const unsigned u[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {  /* little-endian: the low half-word is the even element */
            w[2 * j] = __uint_as_float(u[j] << 16);
            w[2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
        }
    }
};
template <> struct sd_wchunk<sd_f16_t> {
    uint4 r;
    __device__ __forceinline__ void load(const sd_f16_t *p) { r = __ldcs((const uint4 *)p); }
    __device__ __forceinline__ void get(float w[8]) const {
        const unsigned u[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {  /* cvt.f32.f16 is exact */
            w[2 * j] = __half2float(__ushort_as_half((unsigned short)(u[j] & 0xffffu)));
            w[2 * j + 1] = __half2float(__ushort_as_half((unsigned short)(u[j] >> 16)));
        }
    }
};
template <> struct sd_wchunk<float> {
    float4 a, b;
    __device__ __forceinline__ void load(const float *p) {
        a = __ldcs((const float4 *)p);
        b = __ldcs((const float4 *)p + 1);
    }
    __device__ __forceinline__ void get(float w[8]) const {
        w[0] = a.x; w[1] = a.y; w[2] = a.z; w[3] = a.w;
        w[4] = b.x; w[5] = b.y; w[6] = b.z; w[7] = b.w;
    }
};

/* acc[m] += dot(w[0..8), x[m, k0..k0+8)) as one fmaf chain per row, for m < M. */
template <int MT, bool VEC>
static __device__ __forceinline__ void sd_gemm_chunk(const float w[8], const float *__restrict__ x, int32_t k_in,
                                                     int32_t k0, int32_t M, float acc[MT]) {
#pragma unroll
    for (int m = 0; m < MT; m++) {
        if (m < M) {
            const float *xr = x + (size_t)m * k_in + k0;
            float xv[8];
            if (VEC) {
                const float4 a = __ldg((const float4 *)xr), b = __ldg((const float4 *)xr + 1);
                xv[0] = a.x; xv[1] = a.y; xv[2] = a.z; xv[3] = a.w;
                xv[4] = b.x; xv[5] = b.y; xv[6] = b.z; xv[7] = b.w;
            } else {
#pragma unroll
                for (int j = 0; j < 8; j++) xv[j] = __ldg(xr + j);
            }
            float s = acc[m];
#pragma unroll
            for (int j = 0; j < 8; j++) s = fmaf(w[j], xv[j], s);
            acc[m] = s;
        }
    }
}

template <typename T, int MT>
static __global__ void __launch_bounds__(SD_GEMM_WARPS * 32)
sd_gemm_skinny_kernel(const T *__restrict__ W, const float *__restrict__ bias, const float *__restrict__ x,
                      float *__restrict__ y, int32_t ldy, int32_t M, int32_t n_out, int32_t k_in, int vec) {
    const int lane = threadIdx.x & 31;
    const int o = blockIdx.x * SD_GEMM_WARPS + (threadIdx.x >> 5);
    if (o >= n_out) return; /* whole warp leaves together: no barriers below */
    const T *wrow = W + (size_t)o * k_in;
    const int nchunk = k_in / 8;
    float acc[MT];
#pragma unroll
    for (int m = 0; m < MT; m++) acc[m] = 0.0f;

    int c = lane;
    if (vec) {
        /* SD_GEMM_UNROLL chunks in flight per lane; chunk order stays ascending. */
        for (; c + (SD_GEMM_UNROLL - 1) * 32 < nchunk; c += SD_GEMM_UNROLL * 32) {
            sd_wchunk<T> ch[SD_GEMM_UNROLL];
#pragma unroll
            for (int u = 0; u < SD_GEMM_UNROLL; u++) ch[u].load(wrow + (size_t)(c + u * 32) * 8);
#pragma unroll
            for (int u = 0; u < SD_GEMM_UNROLL; u++) {
                float w[8];
                ch[u].get(w);
                sd_gemm_chunk<MT, true>(w, x, k_in, (c + u * 32) * 8, M, acc);
            }
        }
        for (; c < nchunk; c += 32) {
            sd_wchunk<T> ch;
            ch.load(wrow + (size_t)c * 8);
            float w[8];
            ch.get(w);
            sd_gemm_chunk<MT, true>(w, x, k_in, c * 8, M, acc);
        }
    } else {
        for (; c < nchunk; c += 32) {
            float w[8];
#pragma unroll
            for (int j = 0; j < 8; j++) w[j] = sd_ld(wrow, (size_t)c * 8 + j);
            sd_gemm_chunk<MT, false>(w, x, k_in, c * 8, M, acc);
        }
    }
    const int k_tail = nchunk * 8 + lane;
    if (k_tail < k_in) {
        const float wv = sd_ld(wrow, (size_t)k_tail);
#pragma unroll
        for (int m = 0; m < MT; m++)
            if (m < M) acc[m] = fmaf(wv, x[(size_t)m * k_in + k_tail], acc[m]);
    }
#pragma unroll
    for (int m = 0; m < MT; m++) {
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], off);
    }
    if (lane == 0) {
        const float b = bias ? bias[o] : 0.0f;
#pragma unroll
        for (int m = 0; m < MT; m++)
            if (m < M) y[(size_t)m * ldy + o] = acc[m] + b;
    }
}

/* One launch of at most SD_CUDA_SKINNY_ROWS rows (xs, ys: the launch's first row). */
template <typename T>
static void sd_gemm_skinny_launch(const sd_cuda_gemm_args *a, const float *xs, float *ys, int32_t M, int vec,
                                  cudaStream_t stream) {
    const T *w = (const T *)a->w;
    const int32_t ldy = a->ldy, n_out = a->n_out, k_in = a->k_in;
    const float *bias = a->bias;
    const dim3 grid(sd_cdiv((size_t)n_out, SD_GEMM_WARPS));
    const dim3 block(SD_GEMM_WARPS * 32);
    if (M <= 1) sd_gemm_skinny_kernel<T, 1><<<grid, block, 0, stream>>>(w, bias, xs, ys, ldy, M, n_out, k_in, vec);
    else if (M <= 2) sd_gemm_skinny_kernel<T, 2><<<grid, block, 0, stream>>>(w, bias, xs, ys, ldy, M, n_out, k_in, vec);
    else if (M <= 4) sd_gemm_skinny_kernel<T, 4><<<grid, block, 0, stream>>>(w, bias, xs, ys, ldy, M, n_out, k_in, vec);
    else if (M <= 8) sd_gemm_skinny_kernel<T, 8><<<grid, block, 0, stream>>>(w, bias, xs, ys, ldy, M, n_out, k_in, vec);
    else sd_gemm_skinny_kernel<T, 16><<<grid, block, 0, stream>>>(w, bias, xs, ys, ldy, M, n_out, k_in, vec);
}

extern "C" specdec_status sd_cuda_gemm_skinny(const sd_cuda_gemm_args *a, cudaStream_t stream, sd_errbuf *eb) {
    if (!a) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_gemm_skinny: NULL args");
    if (a->wdt == SD_BF16 || a->wdt == SD_F16) return sd_cuda_gemm_tc(a, stream, eb);
    return sd_cuda_gemm_simt(a, stream, eb);
}

extern "C" specdec_status sd_cuda_gemm_simt(const sd_cuda_gemm_args *a, cudaStream_t stream, sd_errbuf *eb) {
    if (!a) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_gemm_simt: NULL args");
    const int32_t n = a->n, k_in = a->k_in;
    if (n <= 0 || a->n_out <= 0) return SPECDEC_OK;
    if (k_in <= 0 || a->ldy < a->n_out || a->epi != SD_GEMM_EPI_STORE)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_gemm_simt: k %d, n_out %d, ldy %d, epilogue %d",
                       (int)k_in, (int)a->n_out, (int)a->ldy, (int)a->epi);
    const int vec = (k_in % 8 == 0) && ((uintptr_t)a->w % 16 == 0) && ((uintptr_t)a->x % 16 == 0);
    for (int32_t m0 = 0; m0 < n; m0 += SD_CUDA_SKINNY_ROWS) {
        const int32_t rows = n - m0 < SD_CUDA_SKINNY_ROWS ? n - m0 : SD_CUDA_SKINNY_ROWS;
        const float *xs = a->x + (size_t)m0 * k_in;
        float *ys = a->y + (size_t)m0 * a->ldy;
        switch (a->wdt) {
        case SD_BF16: sd_gemm_skinny_launch<sd_bf16_t>(a, xs, ys, rows, vec, stream); break;
        case SD_F16: sd_gemm_skinny_launch<sd_f16_t>(a, xs, ys, rows, vec, stream); break;
        default: sd_gemm_skinny_launch<float>(a, xs, ys, rows, vec, stream); break;
        }
        SD_CUDA_LAUNCHED(eb, "sd_gemm_skinny_kernel");
    }
    return SPECDEC_OK;
}

/* ---- conversion and bias, for the cuBLAS path ---------------------------------- */
static __global__ void sd_convert_kernel(const float *__restrict__ src, void *dst, sd_dtype dt, size_t count) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        sd_st_dt(dst, dt, i, src[i]);
}

extern "C" specdec_status sd_cuda_convert_f32(const float *src, void *dst, sd_dtype dt, size_t count,
                                              cudaStream_t stream, sd_errbuf *eb) {
    if (count == 0) return SPECDEC_OK;
    size_t blocks = (count + 255) / 256;
    if (blocks > 65536) blocks = 65536;
    sd_convert_kernel<<<(unsigned)blocks, 256, 0, stream>>>(src, dst, dt, count);
    SD_CUDA_LAUNCHED(eb, "sd_convert_kernel");
    return SPECDEC_OK;
}

static __global__ void sd_add_bias_kernel(float *__restrict__ y, int32_t ldy, const float *__restrict__ bias,
                                          int32_t n_out) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o < n_out) y[(size_t)blockIdx.y * ldy + o] += bias[o];
}

extern "C" specdec_status sd_cuda_gemm_blas(cublasHandle_t blas, const sd_cuda_gemm_args *a, cudaStream_t stream,
                                            sd_errbuf *eb) {
    if (!a) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_gemm_blas: NULL args");
    const int32_t n = a->n, n_out = a->n_out, k_in = a->k_in, ldy = a->ldy;
    if (n <= 0 || n_out <= 0) return SPECDEC_OK;
    if (k_in <= 0 || ldy < n_out || a->epi != SD_GEMM_EPI_STORE)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_gemm_blas: k %d, n_out %d, ldy %d", (int)k_in,
                       (int)n_out, (int)ldy);
    const void *b = a->x;
    cudaDataType_t type = CUDA_R_32F;
    if (a->wdt != SD_F32) {
        specdec_status st = sd_cuda_convert_f32(a->x, a->xconv, a->wdt, (size_t)n * k_in, stream, eb);
        if (st != SPECDEC_OK) return st;
        b = a->xconv;
        type = a->wdt == SD_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    }
    const float alpha = 1.0f, beta = 0.0f;
    /* Column-major view: W is k x n_out (lda k), x is k x n (ldb k), y is n_out x n. */
    const sd_cublas_fns *bl = sd_cublas(); /* loaded already when the caller made blas with it */
    if (!bl) return sd_fail(eb, SPECDEC_ERR_BACKEND_UNAVAILABLE, "sd_cuda_gemm_blas: %s", sd_cublas_load_error());
    SD_CUBLAS_TRY(eb, bl->gemm_ex(blas, CUBLAS_OP_T, CUBLAS_OP_N, n_out, n, k_in, &alpha, a->w, type, k_in, b, type,
                                   k_in, &beta, a->y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (a->bias) {
        dim3 grid(sd_cdiv((size_t)n_out, 256), (unsigned)n);
        sd_add_bias_kernel<<<grid, 256, 0, stream>>>(a->y, ldy, a->bias, n_out);
        SD_CUDA_LAUNCHED(eb, "sd_add_bias_kernel");
    }
    return SPECDEC_OK;
}
