/* test_rng_curand.cu — bit equality of sd_rng (CPU) with cuRAND's Philox4_32_10 on the
 * device: for a grid of (seed, subsequence, offset), including specdec's slot offsets,
 * curand() words, curand_uniform() floats and curand_uniform_double() doubles drawn on
 * the GPU must equal sd_rng_next_u32 / _uniform / _uniform_double exactly. Skips
 * (exit 77) without a CUDA device. */
#include <cuda_runtime.h>
#include <curand_kernel.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern "C" {
#include "sd_rng.h"
}

enum { DRAWS = 9 };

struct job {
    unsigned long long seed, subseq, offset;
};

__global__ void draw(const job *jobs, int n, unsigned *words, float *uf, double *ud) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    curandStatePhilox4_32_10_t s;
    curand_init(jobs[i].seed, jobs[i].subseq, jobs[i].offset, &s);
    for (int d = 0; d < DRAWS; d++) words[i * DRAWS + d] = curand(&s);
    curand_init(jobs[i].seed, jobs[i].subseq, jobs[i].offset, &s);
    for (int d = 0; d < DRAWS; d++) uf[i * DRAWS + d] = curand_uniform(&s);
    curand_init(jobs[i].seed, jobs[i].subseq, jobs[i].offset, &s);
    for (int d = 0; d < DRAWS; d++) ud[i * DRAWS + d] = curand_uniform_double(&s);
}

int main() {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    const unsigned long long seeds[] = {0ull, 1ull, 0x123456789abcdef0ull, ~0ull};
    const unsigned long long subs[] = {0ull, 1ull, 77ull, 0xffffffffull, 0x100000000ull, ~0ull};
    const unsigned long long offs[] = {0, 1, 2, 3, 4, 5, 7, 1023, 0x3fffffffcull, ~0ull - 2,
                                       (unsigned long long)sd_rng_offset(12345, SD_RNG_PURPOSE_ACCEPT)};
    const int NS = 4, NB = 6, NO = 11, N = NS * NB * NO;
    job jobs[N];
    int k = 0;
    for (int a = 0; a < NS; a++)
        for (int b = 0; b < NB; b++)
            for (int c = 0; c < NO; c++) jobs[k++] = job{seeds[a], subs[b], offs[c]};
    job *djobs;
    unsigned *dw;
    float *df;
    double *dd;
    if (cudaMalloc(&djobs, sizeof jobs) != cudaSuccess || cudaMalloc(&dw, sizeof(unsigned) * N * DRAWS) != cudaSuccess ||
        cudaMalloc(&df, sizeof(float) * N * DRAWS) != cudaSuccess ||
        cudaMalloc(&dd, sizeof(double) * N * DRAWS) != cudaSuccess) {
        printf("cudaMalloc failed\n0 passed, 1 failed\n");
        return 1;
    }
    cudaMemcpy(djobs, jobs, sizeof jobs, cudaMemcpyHostToDevice);
    draw<<<(N + 127) / 128, 128>>>(djobs, N, dw, df, dd);
    static unsigned w[N * DRAWS];
    static float f[N * DRAWS];
    static double d[N * DRAWS];
    cudaError_t err = cudaDeviceSynchronize();
    cudaMemcpy(w, dw, sizeof w, cudaMemcpyDeviceToHost);
    cudaMemcpy(f, df, sizeof f, cudaMemcpyDeviceToHost);
    cudaMemcpy(d, dd, sizeof d, cudaMemcpyDeviceToHost);
    int pass = 0, fail = 0;
    if (err != cudaSuccess) {
        printf("kernel failed: %s\n", cudaGetErrorString(err));
        fail++;
    }
    for (int i = 0; i < N && !err; i++) {
        sd_philox_state s;
        sd_rng_init(&s, jobs[i].seed, jobs[i].subseq, jobs[i].offset);
        int bad = 0;
        for (int j = 0; j < DRAWS; j++) bad += sd_rng_next_u32(&s) != w[i * DRAWS + j];
        sd_rng_init(&s, jobs[i].seed, jobs[i].subseq, jobs[i].offset);
        for (int j = 0; j < DRAWS; j++) bad += sd_rng_next_uniform(&s) != f[i * DRAWS + j];
        sd_rng_init(&s, jobs[i].seed, jobs[i].subseq, jobs[i].offset);
        for (int j = 0; j < DRAWS; j++) bad += sd_rng_next_uniform_double(&s) != d[i * DRAWS + j];
        if (bad) {
            if (fail < 5)
                fprintf(stderr, "FAIL seed %llx subseq %llx offset %llx: %d mismatches (gpu word0 %08x)\n", jobs[i].seed,
                        jobs[i].subseq, jobs[i].offset, bad, w[i * DRAWS]);
            fail++;
        } else {
            pass++;
        }
    }
    cudaFree(djobs);
    cudaFree(dw);
    cudaFree(df);
    cudaFree(dd);
    printf("%d passed, %d failed\n", pass, fail);
    return fail ? 1 : 0;
}
