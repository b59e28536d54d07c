/* sd_cuda_fill.cu — random device buffers with cuRAND's Philox (curand_kernel.h), for
 * the benchmark's synthetic models (no checkpoint download) and GPU tests.
 *
 * dst[i] = (dt)(mean + std * curand_normal(state(seed, subsequence i, offset 0))):
 * element i's value depends only on (seed, i), not on the launch geometry.
 * Launch: grid-stride over count, 256 threads. */
#include <curand_kernel.h>

#include "sd_cuda_common.cuh"

static __global__ void sd_fill_normal_kernel(void *dst, sd_dtype dt, size_t count, uint64_t seed, float mean,
                                             float stddev) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        curandStatePhilox4_32_10_t st;
        curand_init((unsigned long long)seed, (unsigned long long)i, 0ull, &st);
        sd_st_dt(dst, dt, i, mean + stddev * curand_normal(&st));
    }
}

extern "C" specdec_status sd_cuda_fill_normal(void *dst, sd_dtype dt, size_t count, uint64_t seed, float mean,
                                              float std, cudaStream_t stream, sd_errbuf *eb) {
    if (count == 0) return SPECDEC_OK;
    size_t blocks = (count + 255) / 256;
    if (blocks > 65536) blocks = 65536;
    sd_fill_normal_kernel<<<(unsigned)blocks, 256, 0, stream>>>(dst, dt, count, seed, mean, std);
    SD_CUDA_LAUNCHED(eb, "sd_fill_normal_kernel");
    return SPECDEC_OK;
}
