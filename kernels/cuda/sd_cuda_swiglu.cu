/* sd_cuda_swiglu.cu — the gated MLP activation (CPU reference: sd_cpu_swiglu).
 *
 * Shapes: gu [n, 2*inter] fp32 = [gate | up] per row (the runner stores W_gate and
 * W_up as one [2*inter, hidden] matrix); h [n, inter] fp32.
 *   h[m, j] = g / (1 + exp(-g)) * u,  g = gu[m, j], u = gu[m, inter + j]  (IEEE expf)
 * Launch: grid (ceil(inter / 256), n), 256 threads, one element per thread. */
#include "sd_cuda_common.cuh"

static __global__ void sd_swiglu_kernel(const float *__restrict__ gu, float *__restrict__ h, int32_t inter) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= inter) return;
    const size_t m = blockIdx.y;
    const float g = gu[m * 2 * inter + j];
    const float u = gu[m * 2 * inter + inter + j];
    h[m * inter + j] = g / (1.0f + expf(-g)) * u;
}

extern "C" specdec_status sd_cuda_swiglu(const float *gu, float *h, int32_t n, int32_t inter, cudaStream_t stream,
                                         sd_errbuf *eb) {
    if (n <= 0 || inter <= 0) return SPECDEC_OK;
    dim3 grid(sd_cdiv((size_t)inter, 256), (unsigned)n);
    sd_swiglu_kernel<<<grid, 256, 0, stream>>>(gu, h, inter);
    SD_CUDA_LAUNCHED(eb, "sd_swiglu_kernel");
    return SPECDEC_OK;
}
