/* bench_cpu_forward.c — decode throughput of the CPU reference backend on a
 * ~12M-parameter synthetic Llama (hidden 384, 6 layers, intermediate 1024, 6 heads /
 * 2 kv heads, vocab 8192, untied; F32, BF16 and F16 weights). Prints tokens/s for
 * 32-token prefill and 1-token decode steps (best of three), once per linear-layer path
 * (kernels/cpu/sd_cpu_matmul.h "ISA paths": the portable loop, then AVX2 when the CPU has it)
 * in the same run, with the ratio. A benchmark, not a test: it checks only that the forward
 * calls succeed and that both paths give the same logits bit for bit.
 * With --threads N1,N2,...: the run-time ISA path with each thread count instead (a pool of N
 * threads on the runner's group, kernels/cpu/sd_cpu_pool.h), prefill and decode best of 3 each,
 * the speed-up over the first count and whether the logits are bit-identical to its.
 * Run: build/bench/cpu/bench_cpu_forward [--threads 1,2] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "sd_test.h"
#include "sd_cpu_matmul.h"
#include "sd_cpu_runner.h"
#include "fwd_common.h"

#define N_STEPS 32

typedef struct fwd_result {
    double prefill_tps, decode_tps;
    float *logits; /* the prefill's last row and the last decode step's row, 2 x vocab */
} fwd_result;

static fwd_result bench(sd_dtype dt, const char *name, const char *path, int threads) {
    fwd_result res = {0, 0, NULL};
    sd_config c = fwd_small_config();
    c.vocab_size = 8192;
    c.hidden_size = 384;
    c.intermediate_size = 1024;
    c.n_layers = 6;
    c.n_heads = 6;
    c.n_kv_heads = 2;
    c.head_dim = 64;
    struct specdec_model *m = fwd_model_make(&c, dt, 1);
    int64_t np = (int64_t)c.vocab_size * c.hidden_size * 2 +
                 (int64_t)c.n_layers * ((int64_t)c.hidden_size * c.head_dim * (2 * c.n_heads + 2 * c.n_kv_heads) +
                                        3LL * c.hidden_size * c.intermediate_size);
    sd_errbuf eb = {{0}};
    sd_runner *r = NULL;
    SD_CHECK(sd_cpu_runner_create(&m->w, 256, 64, &r, &eb) == SPECDEC_OK, "create: %s", eb.msg);
    if (!r) {
        fwd_model_free(m);
        return res;
    }
    sd_cpu_group_set_threads(sd_cpu_runner_group(r), threads);
    int32_t tok[64];
    uint64_t s = 11;
    for (int i = 0; i < 64; i++) tok[i] = (int32_t)(fwd_rng_next(&s) % (uint64_t)c.vocab_size);
    float *lg = malloc(sizeof(float) * 64 * (size_t)c.vocab_size);
    double prefill = 1e30; /* best of three, as the decode steps */
    for (int rep = 0; rep < 3; rep++) {
        double a = bench_now_s();
        SD_CHECK(sd_runner_forward(r, tok, 32, 0, lg) == SPECDEC_OK, "%s", r->err.msg);
        double b = bench_now_s() - a;
        if (b < prefill) prefill = b;
    }
    /* Best of three runs of N_STEPS decode steps (other processes share the cores). */
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double a = bench_now_s();
        for (int i = 0; i < N_STEPS; i++)
            SD_CHECK(sd_runner_forward(r, &tok[32 + i % 32], 1, 32 + i, lg) == SPECDEC_OK, "%s", r->err.msg);
        double b = bench_now_s() - a;
        if (b < best) best = b;
    }
    double tps = N_STEPS / best;
    printf("%s %-8s: %.1fM params, prefill 32 tokens %.1f tok/s, decode %.1f tok/s (best of 3 x %d steps)\n", name,
           path, (double)np / 1e6, 32.0 / prefill, tps, N_STEPS);
    res.prefill_tps = 32.0 / prefill, res.decode_tps = tps;
    res.logits = malloc(sizeof(float) * 2 * (size_t)c.vocab_size);
    SD_CHECK(sd_runner_forward(r, tok, 32, 0, lg) == SPECDEC_OK, "%s", r->err.msg);
    memcpy(res.logits, lg + (size_t)31 * c.vocab_size, sizeof(float) * (size_t)c.vocab_size);
    SD_CHECK(sd_runner_forward(r, &tok[32], 1, 32, lg) == SPECDEC_OK, "%s", r->err.msg);
    memcpy(res.logits + c.vocab_size, lg, sizeof(float) * (size_t)c.vocab_size);
    free(lg);
    sd_runner_destroy(r);
    fwd_model_free(m);
    return res;
}

static void compare(sd_dtype dt, const char *name) {
    sd_cpu_matmul_set_isa(SD_CPU_ISA_GENERIC);
    fwd_result g = bench(dt, name, "portable", 1);
    if (sd_cpu_matmul_set_isa(SD_CPU_ISA_AVX2) != 0) {
        printf("%s avx2    : not run (this CPU has no AVX2 + FMA + F16C)\n", name);
        free(g.logits);
        return;
    }
    fwd_result a = bench(dt, name, "avx2", 1);
    if (g.logits && a.logits) {
        SD_CHECK(memcmp(g.logits, a.logits, sizeof(float) * 2 * 8192) == 0, "%s: the two paths' logits differ", name);
        printf("%s avx2 / portable: prefill x%.2f, decode x%.2f, logits bit-identical: %s\n", name,
               a.prefill_tps / g.prefill_tps, a.decode_tps / g.decode_tps,
               memcmp(g.logits, a.logits, sizeof(float) * 2 * 8192) == 0 ? "yes" : "NO");
    }
    free(g.logits), free(a.logits);
}

/* The run-time path with counts[0..n) threads; ratios and logits against counts[0]. */
static void compare_threads(sd_dtype dt, const char *name, const int *counts, int n) {
    fwd_result first = {0, 0, NULL};
    for (int i = 0; i < n; i++) {
        char path[32];
        snprintf(path, sizeof path, "%s %dt", sd_cpu_matmul_isa() == SD_CPU_ISA_AVX2 ? "avx2" : "portable", counts[i]);
        fwd_result f = bench(dt, name, path, counts[i]);
        if (i == 0) {
            first = f;
            continue;
        }
        const int same = first.logits && f.logits && !memcmp(first.logits, f.logits, sizeof(float) * 2 * 8192);
        SD_CHECK(same, "%s: %d threads' logits differ from %d's", name, counts[i], counts[0]);
        printf("%s %d / %d threads: prefill x%.2f, decode x%.2f, logits bit-identical: %s\n", name, counts[i],
               counts[0], f.prefill_tps / first.prefill_tps, f.decode_tps / first.decode_tps, same ? "yes" : "NO");
        free(f.logits);
    }
    free(first.logits);
}

int main(int argc, char **argv) {
    static const sd_dtype dts[] = {SD_F32, SD_BF16, SD_F16};
    static const char *const names[] = {"f32", "bf16", "f16"};
    if (argc == 3 && !strcmp(argv[1], "--threads")) {
        int counts[8], n = 0;
        for (char *p = argv[2]; *p && n < 8;) {
            long v = strtol(p, &p, 10);
            if (v < 1 || v > 256) return fprintf(stderr, "bad thread count in %s\n", argv[2]), 2;
            counts[n++] = (int)v;
            if (*p == ',') p++;
            else if (*p) return fprintf(stderr, "bad thread list %s\n", argv[2]), 2;
        }
        for (int d = 0; d < 3; d++) compare_threads(dts[d], names[d], counts, n);
        return sd_test_done();
    }
    for (int d = 0; d < 3; d++) compare(dts[d], names[d]);
    return sd_test_done();
}
