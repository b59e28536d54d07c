/* test_cuda_sample_philox.c — the CPU Philox (core/sd_rng.c) equals cuRAND's device
 * generator bit for bit: for 20000 (seed, subsequence, offset) triples — random 64-bit
 * values, small values, offsets that are not multiples of 4, values that exercise the
 * counter carries (offset / 4 near 2^32 and 2^64, subsequence near 2^32 and 2^64) and
 * the specdec slot addressing sd_rng_offset(position, purpose) — the first 9 words of
 * curand() after curand_init, then curand_uniform and curand_uniform_double, must equal
 * sd_rng_init + sd_rng_next_u32 / _uniform / _uniform_double, and sd_rng_u32_at must
 * equal the first word at slot offsets. Needs a GPU (skips otherwise). */
#include "sd_test.h"
#include "specdec.h"

#ifndef SPECDEC_WITH_CUDA
int main(void) { return sd_test_skip("no CUDA device"); }
#else
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cs_common.h"
#include "sd_cuda_sample.h"
#include "sd_rng.h"

enum { N = 20000, K = 9 };

int main(void) {
    if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
    uint64_t *seed = malloc(sizeof(uint64_t) * N), *sub = malloc(sizeof(uint64_t) * N), *off = malloc(sizeof(uint64_t) * N);
    uint32_t *words = malloc(sizeof(uint32_t) * N * K);
    float *uf = malloc(sizeof(float) * N);
    double *ud = malloc(sizeof(double) * N);
    cs_rng r = {12345};
    for (int j = 0; j < N; j++) {
        uint64_t a = cs_next(&r), b = cs_next(&r), c = cs_next(&r);
        switch (j % 8) {
        case 0: seed[j] = a; sub[j] = b; off[j] = c; break;
        case 1: seed[j] = a % 1000; sub[j] = b % 1000; off[j] = c % 4096; break;
        case 2: seed[j] = a; sub[j] = b; off[j] = (0xffffffffull << 2) + (c % 64); break; /* low-word carry */
        case 3: seed[j] = a; sub[j] = b; off[j] = UINT64_MAX - (c % 64); break;            /* 64-bit wrap */
        case 4: seed[j] = a; sub[j] = 0xffffffffull - (b % 4); off[j] = c % 100; break;
        case 5: seed[j] = a; sub[j] = UINT64_MAX - (b % 4); off[j] = c; break;
        case 6: seed[j] = a; sub[j] = b % 65536;
            off[j] = sd_rng_offset((int64_t)(c % 100000000), (int)(a % SD_RNG_PURPOSES)); break;
        default: seed[j] = 0; sub[j] = 0; off[j] = c % 17; break;
        }
    }
    uint64_t *dseed, *dsub, *doff;
    uint32_t *dwords;
    float *duf;
    double *dud;
    int ok = cudaMalloc((void **)&dseed, 8 * N) == cudaSuccess && cudaMalloc((void **)&dsub, 8 * N) == cudaSuccess &&
             cudaMalloc((void **)&doff, 8 * N) == cudaSuccess &&
             cudaMalloc((void **)&dwords, 4 * N * K) == cudaSuccess && cudaMalloc((void **)&duf, 4 * N) == cudaSuccess &&
             cudaMalloc((void **)&dud, 8 * N) == cudaSuccess;
    SD_CHECK(ok, "cudaMalloc failed");
    if (!ok) return sd_test_done();
    cudaMemcpy(dseed, seed, 8 * N, cudaMemcpyHostToDevice);
    cudaMemcpy(dsub, sub, 8 * N, cudaMemcpyHostToDevice);
    cudaMemcpy(doff, off, 8 * N, cudaMemcpyHostToDevice);
    sd_errbuf eb = {{0}};
    const sd_cuda_sample_philox_args pa = {
        .seed = dseed, .subseq = dsub, .offset = doff, .n = N, .k = K, .words = dwords, .uf = duf, .ud = dud};
    SD_CHECK(sd_cuda_sample_philox_words(&pa, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
    SD_CHECK(cudaDeviceSynchronize() == cudaSuccess, "kernel failed");
    cudaMemcpy(words, dwords, 4 * N * K, cudaMemcpyDeviceToHost);
    cudaMemcpy(uf, duf, 4 * N, cudaMemcpyDeviceToHost);
    cudaMemcpy(ud, dud, 8 * N, cudaMemcpyDeviceToHost);
    long bad = 0, slot_bad = 0;
    for (int j = 0; j < N; j++) {
        sd_philox_state s;
        sd_rng_init(&s, seed[j], sub[j], off[j]);
        int row_bad = 0;
        for (int t = 0; t < K; t++) {
            uint32_t w = sd_rng_next_u32(&s);
            if (w != words[(size_t)j * K + t]) row_bad = 1;
        }
        float f = sd_rng_next_uniform(&s);
        double d = sd_rng_next_uniform_double(&s);
        if (memcmp(&f, &uf[j], 4) || memcmp(&d, &ud[j], 8)) row_bad = 1;
        if (row_bad && bad++ < 5)
            fprintf(stderr, "  seed %llu sub %llu off %llu: first word gpu %08x\n", (unsigned long long)seed[j],
                    (unsigned long long)sub[j], (unsigned long long)off[j], words[(size_t)j * K]);
        if (j % 8 == 6) { /* slot addressing: position = off / 32, purpose = (off / 4) % 8 */
            int64_t pos = (int64_t)(off[j] / (SD_RNG_PURPOSES * SD_RNG_WORDS_PER_SLOT));
            int purpose = (int)((off[j] / SD_RNG_WORDS_PER_SLOT) % SD_RNG_PURPOSES);
            if (sd_rng_u32_at(seed[j], sub[j], pos, purpose) != words[(size_t)j * K]) slot_bad++;
        }
    }
    printf("philox: %d streams x %d words + 2 uniforms: %ld mismatching streams, %ld slot mismatches\n", N, K, bad,
           slot_bad);
    SD_CHECK(bad == 0, "%ld streams differ from cuRAND", bad);
    SD_CHECK(slot_bad == 0, "%ld sd_rng_u32_at words differ from cuRAND", slot_bad);
    cudaFree(dseed); cudaFree(dsub); cudaFree(doff); cudaFree(dwords); cudaFree(duf); cudaFree(dud);
    free(seed); free(sub); free(off); free(words); free(uf); free(ud);
    return sd_test_done();
}
#endif
