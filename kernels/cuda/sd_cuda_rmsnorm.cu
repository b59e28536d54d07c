/* sd_cuda_rmsnorm.cu — RMSNorm fused with the residual add (CPU reference:
 * sd_cpu_add + sd_cpu_rmsnorm in kernels/cpu/).
 *
 * Shapes: x, delta, out [n, dim] fp32; w [dim] fp32.
 *   if delta: x[m, c] += delta[m, c]   (written back: x is the residual stream)
 *   ss = sum_c x[m, c]^2 (fp32, fixed order: thread-strided partials, then a fixed
 *        shuffle tree and a fixed cross-warp sum), r = 1 / sqrt(ss / dim + eps)
 *   out[m, c] = x[m, c] * r * w[c]
 * Launch: one block of 256 threads per row; a row's reduction order depends only on
 * dim, never on n (batch invariance). out may alias delta but not x. */
#include "sd_cuda_common.cuh"

#define SD_RMS_THREADS 256

static __global__ void __launch_bounds__(SD_RMS_THREADS)
sd_rmsnorm_kernel(float *__restrict__ x, const float *delta, const float *__restrict__ w, float *out, int32_t dim,
                  float eps) {
    __shared__ float warp_ss[SD_RMS_THREADS / 32];
    const size_t base = (size_t)blockIdx.x * dim;
    float *xr = x + base;
    float ss = 0.0f;
    for (int c = threadIdx.x; c < dim; c += SD_RMS_THREADS) {
        float v = xr[c];
        if (delta) {
            v = v + delta[base + c];
            xr[c] = v;
        }
        ss = fmaf(v, v, ss);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    if ((threadIdx.x & 31) == 0) warp_ss[threadIdx.x >> 5] = ss;
    __syncthreads();
    float tot = 0.0f;
#pragma unroll
    for (int i = 0; i < SD_RMS_THREADS / 32; i++) tot += warp_ss[i];
    const float r = 1.0f / sqrtf(tot / (float)dim + eps);
    for (int c = threadIdx.x; c < dim; c += SD_RMS_THREADS) out[base + c] = xr[c] * r * w[c];
}

extern "C" specdec_status sd_cuda_rmsnorm(const sd_cuda_rmsnorm_args *a, cudaStream_t stream, sd_errbuf *eb) {
    if (!a) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_rmsnorm: NULL args");
    if (a->n <= 0 || a->dim <= 0) return SPECDEC_OK;
    sd_rmsnorm_kernel<<<(unsigned)a->n, SD_RMS_THREADS, 0, stream>>>(a->x, a->delta, a->w, a->out, a->dim, a->eps);
    SD_CUDA_LAUNCHED(eb, "sd_rmsnorm_kernel");
    return SPECDEC_OK;
}
