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
 * With --threads N1,N2,... --ctx L (F32 weights): a prompt of L tokens prefilled in chunks of 256,
 * then decode steps at position L, where attention (O(L) per token, O(L^2) per prompt) weighs:
 * each count > 1 runs twice in the same run, attention split over the threads and attention on
 * the calling thread (sd_cpu_group_set_attn_split(0): the linear layers still split), with the
 * ratio of the two and the logits compared bit for bit.
 * Run: build/bench/cpu/bench_cpu_forward [--threads 1,2 [--ctx 2048]] */
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

/* The benchmark's synthetic Llama (see the top of the file). */
static sd_config bench_config(void) {
    sd_config c = fwd_small_config();
    c.vocab_size = 8192;
    c.hidden_size = 384;
    c.intermediate_size = 1024;
    c.n_layers = 6;
    c.n_heads = 6;
    c.n_kv_heads = 2;
    c.head_dim = 64;
    return c;
}

static fwd_result bench(sd_dtype dt, const char *name, const char *path, int threads) {
    fwd_result res = {0, 0, NULL};
    sd_config c = bench_config();
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

/* Long context: prefill `ctx` tokens (chunks of 256), then N_STEPS decode steps at ctx; best of 2. */
static fwd_result bench_ctx(int32_t ctx, int threads, int split, const char *label) {
    fwd_result res = {0, 0, NULL};
    sd_config c = bench_config();
    c.max_position_embeddings = ctx + 64;
    struct specdec_model *m = fwd_model_make(&c, SD_F32, 1);
    sd_errbuf eb = {{0}};
    sd_runner *r = NULL;
    const int32_t max_batch = ctx + 64 < 256 ? ctx + 64 : 256; /* a runner's batch fits its context */
    SD_CHECK(sd_cpu_runner_create(&m->w, ctx + 64, max_batch, &r, &eb) == SPECDEC_OK, "create: %s", eb.msg);
    if (!r) {
        fwd_model_free(m);
        return res;
    }
    sd_cpu_group_set_threads(sd_cpu_runner_group(r), threads);
    sd_cpu_group_set_attn_split(sd_cpu_runner_group(r), split);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(ctx + N_STEPS));
    uint64_t s = 11;
    for (int i = 0; i < ctx + N_STEPS; i++) tok[i] = (int32_t)(fwd_rng_next(&s) % (uint64_t)c.vocab_size);
    float *lg = malloc(sizeof(float) * 256 * (size_t)c.vocab_size);
    res.logits = malloc(sizeof(float) * 2 * (size_t)c.vocab_size);
    double prefill = 1e30, decode = 1e30;
    for (int rep = 0; rep < 2; rep++) {
        double a = bench_now_s();
        for (int32_t off = 0; off < ctx; off += 256) {
            const int32_t n = ctx - off < 256 ? ctx - off : 256;
            SD_CHECK(sd_runner_forward(r, tok + off, n, off, lg) == SPECDEC_OK, "%s", r->err.msg);
            if (off + n == ctx) memcpy(res.logits, lg + (size_t)(n - 1) * c.vocab_size, sizeof(float) * c.vocab_size);
        }
        double b = bench_now_s();
        for (int i = 0; i < N_STEPS; i++)
            SD_CHECK(sd_runner_forward(r, &tok[ctx + i], 1, ctx + i, lg) == SPECDEC_OK, "%s", r->err.msg);
        double e = bench_now_s();
        memcpy(res.logits + c.vocab_size, lg, sizeof(float) * c.vocab_size);
        if (b - a < prefill) prefill = b - a;
        if (e - b < decode) decode = e - b;
    }
    res.prefill_tps = ctx / prefill, res.decode_tps = N_STEPS / decode;
    printf("f32 ctx %d, %d thread(s), %-20s: prefill %.1f tok/s, decode at %d: %.1f tok/s (best of 2)\n", (int)ctx,
           threads, label, res.prefill_tps, (int)ctx, res.decode_tps);
    free(lg), free(tok);
    sd_runner_destroy(r);
    fwd_model_free(m);
    return res;
}

static void compare_ctx(int32_t ctx, const int *counts, int n) {
    fwd_result first = bench_ctx(ctx, counts[0], 1, counts[0] > 1 ? "attention split" : "");
    for (int i = 0; i < n; i++) {
        if (counts[i] < 2) continue;
        fwd_result off = bench_ctx(ctx, counts[i], 0, "attention on caller");
        fwd_result on = bench_ctx(ctx, counts[i], 1, "attention split");
        const size_t sz = sizeof(float) * 2 * 8192;
        const int same = first.logits && on.logits && off.logits && !memcmp(first.logits, on.logits, sz) &&
                         !memcmp(first.logits, off.logits, sz);
        SD_CHECK(same, "ctx %d: %d threads' logits differ", (int)ctx, counts[i]);
        printf("ctx %d, %d threads: attention split / on the caller: prefill x%.2f, decode x%.2f; over %d thread(s): "
               "prefill x%.2f, decode x%.2f; logits bit-identical: %s\n",
               (int)ctx, counts[i], on.prefill_tps / off.prefill_tps, on.decode_tps / off.decode_tps, counts[0],
               on.prefill_tps / first.prefill_tps, on.decode_tps / first.decode_tps, same ? "yes" : "NO");
        free(on.logits), free(off.logits);
    }
    free(first.logits);
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
    if ((argc == 3 || (argc == 5 && !strcmp(argv[3], "--ctx"))) && !strcmp(argv[1], "--threads")) {
        int counts[8], n = 0;
        for (char *p = argv[2]; *p && n < 8;) {
            long v = strtol(p, &p, 10);
            if (v < 1 || v > 256) return fprintf(stderr, "bad thread count in %s\n", argv[2]), 2;
            counts[n++] = (int)v;
            if (*p == ',') p++;
            else if (*p) return fprintf(stderr, "bad thread list %s\n", argv[2]), 2;
        }
        if (argc == 5) {
            const long ctx = strtol(argv[4], NULL, 10);
            if (ctx < 1 || ctx > 1 << 20) return fprintf(stderr, "bad --ctx %s\n", argv[4]), 2;
            compare_ctx((int32_t)ctx, counts, n);
            return sd_test_done();
        }
        for (int d = 0; d < 3; d++) compare_threads(dts[d], names[d], counts, n);
        return sd_test_done();
    }
    for (int d = 0; d < 3; d++) compare(dts[d], names[d]);
    return sd_test_done();
}
