/* sd_cuda_embed.cu — token embedding gather (CPU reference: kernels/cpu/sd_cpu_embed.c).
 *
 * Shapes: table [vocab, hidden] (F32/F16/BF16), tokens [n] (validated on the host),
 * x [n, hidden] fp32.   x[m, c] = (float) table[tokens[m], c]   (exact conversion)
 * Launch: grid (n, ceil(hidden / 256)), 256 threads; one thread per element. */
#include "sd_cuda_common.cuh"

template <typename T>
static __global__ void sd_embed_kernel(const T *__restrict__ table, const int32_t *__restrict__ tokens,
                                       int32_t hidden, float *__restrict__ x) {
    const int m = blockIdx.x;
    const int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= hidden) return;
    const size_t row = (size_t)tokens[m] * (size_t)hidden;
    x[(size_t)m * hidden + c] = sd_ld(table, row + c);
}

extern "C" specdec_status sd_cuda_embed(const void *table, sd_dtype dt, const int32_t *tokens, int32_t n,
                                        int32_t hidden, float *x, cudaStream_t stream, sd_errbuf *eb) {
    if (n <= 0 || hidden <= 0) return SPECDEC_OK;
    dim3 grid((unsigned)n, sd_cdiv((size_t)hidden, 256));
    switch (dt) {
    case SD_BF16: sd_embed_kernel<<<grid, 256, 0, stream>>>((const sd_bf16_t *)table, tokens, hidden, x); break;
    case SD_F16: sd_embed_kernel<<<grid, 256, 0, stream>>>((const sd_f16_t *)table, tokens, hidden, x); break;
    default: sd_embed_kernel<<<grid, 256, 0, stream>>>((const float *)table, tokens, hidden, x); break;
    }
    SD_CUDA_LAUNCHED(eb, "sd_embed_kernel");
    return SPECDEC_OK;
}
