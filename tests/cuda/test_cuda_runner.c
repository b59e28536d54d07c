/* test_cuda_runner.c — the whole CUDA forward pass against the CPU reference runner
 * on the random checkpoints of tests/reference/make_checkpoint.py (argv[1] is their
 * directory), for every case the script writes (F32/F16/BF16, GQA/MQA/MHA, tied,
 * Qwen2 and Llama biases, llama3 rope, odd sizes):
 * - logits of a 20-token prefill (cuBLAS path), then 1-token decode steps and a
 *   5-token verify step (skinny path), vs the CPU runner, in relative norm per row:
 *   F32 kept (keep_f32): 1e-4; F16: 1e-2; BF16 (KV cache rounded to bf16): 3e-2;
 *   F32 converted to BF16 at load: 6e-2. The argmax must agree where the CPU's top-2
 *   margin is clear (> 5% of the row's spread).
 * - incremental decode == prefill within the same tolerance on the GPU.
 * - batch invariance, bitwise: for k = 2..16, each row j of a k-token step at p equals
 *   the 1-token step at p + j (cache truncated to p + j, rows below from the k step).
 * - rollback: truncating and recomputing reproduces the logits bitwise.
 * Skips without a device. */
#include "sd_test.h"
#include "specdec.h"

#ifndef SPECDEC_WITH_CUDA
int main(void) { return sd_test_skip("no CUDA device"); }
#else

#include "cuda_test_util.h"
#include "sd_runner.h"
#include "sd_cpu_runner.h"
#include "sd_cuda_backend.h"
#include "sd_cuda_runner.h"

static const char *k_cases[] = {"llama_gqa_f32",          "llama_mqa_tied_f16",   "mistral_mha_bf16_sharded",
                                "qwen2_bias_f32",         "llama3_rope_headdim_f16", "qwen2_odd_bf16",
                                "llama_attn_bias_bf16",   "llama_misaligned_f32"};

static double row_rel(const float *a, const float *b, int V) {
    double num = 0, den = 0;
    for (int i = 0; i < V; i++) {
        double d = (double)a[i] - b[i];
        if (d != d) return INFINITY;
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

static int argmax(const float *x, int V, float *margin, float *spread) {
    int best = 0;
    float b1 = -INFINITY, b2 = -INFINITY, lo = INFINITY;
    for (int i = 0; i < V; i++) {
        if (x[i] > b1) { b2 = b1; b1 = x[i]; best = i; } else if (x[i] > b2) b2 = x[i];
        if (x[i] < lo) lo = x[i];
    }
    *margin = b1 - b2;
    *spread = b1 - lo;
    return best;
}

/* Compare n rows; returns the worst relative error. */
static double cmp_rows(const char *what, const float *gpu, const float *cpu, int n, int V, double tol) {
    double worst = 0;
    for (int r = 0; r < n; r++) {
        double e = row_rel(gpu + (size_t)r * V, cpu + (size_t)r * V, V);
        if (!(e <= worst)) worst = e;
        float mg, sp, mc, sc;
        int ag = argmax(gpu + (size_t)r * V, V, &mg, &sp), ac = argmax(cpu + (size_t)r * V, V, &mc, &sc);
        if (mc > 0.05f * sc) SD_CHECK(ag == ac, "%s row %d: argmax gpu %d cpu %d (cpu margin %.3g)", what, r, ag, ac, mc);
    }
    SD_CHECK(worst <= tol, "%s: worst row relative error %.3g > %.3g", what, worst, tol);
    printf("%-60s rows=%-3d worst_rel=%.3g (tol %.0e)\n", what, n, worst, tol);
    return worst;
}

static void run_case(const char *dir, const char *name, int keep_f32) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    specdec_model *model = NULL;
    specdec_status st = specdec_model_load(path, NULL, &model);
    SD_CHECK(st == SPECDEC_OK, "load %s: %s", path, specdec_last_error());
    if (st != SPECDEC_OK) return;
    specdec_model_info info;
    specdec_model_get_info(model, &info);
    if (info.dtype != SPECDEC_DTYPE_F32 && keep_f32) { specdec_model_free(model); return; }
    const int V = info.vocab_size, n_ctx = 96, P = 20;
    double tol = info.dtype == SPECDEC_DTYPE_F32 ? (keep_f32 ? 1e-4 : 6e-2) : info.dtype == SPECDEC_DTYPE_F16 ? 1e-2 : 3e-2;
    sd_errbuf eb;
    sd_runner *cpu = NULL, *gpu = NULL;
    st = sd_cpu_runner_create(&model->w, n_ctx, n_ctx, &cpu, &eb);
    SD_CHECK(st == SPECDEC_OK, "cpu runner %s: %s", name, eb.msg);
    st = sd_cuda_runner_create(&model->w, n_ctx, n_ctx, 0, keep_f32, &gpu, &eb);
    SD_CHECK(st == SPECDEC_OK, "cuda runner %s: %s", name, eb.msg);
    if (!cpu || !gpu) { sd_runner_destroy(cpu); sd_runner_destroy(gpu); specdec_model_free(model); return; }

    ct_rng rng = {0x5eed0000u + (uint64_t)strlen(name)};
    int32_t toks[96];
    for (int i = 0; i < n_ctx; i++) toks[i] = (int32_t)(ct_next(&rng) % (uint64_t)V);
    float *lc = malloc(sizeof(float) * n_ctx * V), *lg = malloc(sizeof(float) * n_ctx * V);
    float *lg2 = malloc(sizeof(float) * n_ctx * V), *one = malloc(sizeof(float) * V);
    char what[160];
    const char *mode = keep_f32 ? "keep_f32" : "device dtype";

    /* prefill (cuBLAS), 3 decode steps, a 5-token verify step */
    SD_CHECK(sd_runner_forward(cpu, toks, P, 0, lc) == SPECDEC_OK, "cpu prefill %s", cpu->err.msg);
    for (size_t i = 0; i < (size_t)P * V; i++) lg[i] = NAN;
    SD_CHECK(sd_runner_forward(gpu, toks, P, 0, lg) == SPECDEC_OK, "gpu prefill %s", gpu->err.msg);
    snprintf(what, sizeof what, "%s [%s] prefill %d", name, mode, P);
    cmp_rows(what, lg, lc, P, V, tol);
    for (int s = 0; s < 3; s++) {
        SD_CHECK(sd_runner_forward(cpu, toks + P + s, 1, P + s, lc) == SPECDEC_OK, "cpu step");
        SD_CHECK(sd_runner_forward(gpu, toks + P + s, 1, P + s, lg) == SPECDEC_OK, "gpu step %s", gpu->err.msg);
        snprintf(what, sizeof what, "%s [%s] decode pos %d", name, mode, P + s);
        cmp_rows(what, lg, lc, 1, V, tol);
    }
    SD_CHECK(sd_runner_forward(cpu, toks + P + 3, 5, P + 3, lc) == SPECDEC_OK, "cpu verify");
    SD_CHECK(sd_runner_forward(gpu, toks + P + 3, 5, P + 3, lg) == SPECDEC_OK, "gpu verify %s", gpu->err.msg);
    snprintf(what, sizeof what, "%s [%s] verify 5 at %d", name, mode, P + 3);
    cmp_rows(what, lg, lc, 5, V, tol);
    SD_CHECK(gpu->kv_len == P + 8, "kv_len %d after verify", gpu->kv_len);

    /* incremental == prefill on the GPU: whole sequence in one call vs token by token */
    const int L = 40;
    SD_CHECK(sd_runner_forward(gpu, toks, L, 0, lg) == SPECDEC_OK, "gpu prefill %d", L);
    for (int i = 0; i < L; i++) SD_CHECK(sd_runner_forward(gpu, toks + i, 1, i, lg2 + (size_t)i * V) == SPECDEC_OK, "gpu step");
    snprintf(what, sizeof what, "%s [%s] incremental vs prefill %d", name, mode, L);
    cmp_rows(what, lg2, lg, L, V, keep_f32 ? 1e-4 : tol);

    /* batch invariance, bitwise, k = 2..16 at p = 30 */
    const int p = 30;
    int bad = 0;
    const int kmax = getenv("SD_CUDA_TEST_QUICK") ? 5 : 16;
    for (int k = 2; k <= kmax; k++) {
        SD_CHECK(sd_runner_forward(gpu, toks + p, k, p, lg) == SPECDEC_OK, "gpu k-step");
        for (int j = 0; j < k; j++) {
            SD_CHECK(sd_runner_forward(gpu, toks + p + j, 1, p + j, one) == SPECDEC_OK, "gpu 1-step");
            if (memcmp(one, lg + (size_t)j * V, sizeof(float) * V) != 0) {
                if (bad < 5)
                    fprintf(stderr, "  %s: k=%d row %d differs from the 1-token step (rel %.3g)\n", name, k, j,
                            row_rel(one, lg + (size_t)j * V, V));
                bad++;
            }
        }
    }
    snprintf(what, sizeof what, "%s [%s] batch invariance k=2..16", name, mode);
    SD_CHECK(bad == 0, "%s: %d rows differ", what, bad);
    printf("%-60s %s\n", what, bad ? "FAIL" : "bitwise ok");

    /* rollback: recompute after truncation gives the same bits */
    SD_CHECK(sd_runner_forward(gpu, toks, 24, 0, lg) == SPECDEC_OK, "gpu 24");
    SD_CHECK(sd_runner_forward(gpu, toks + 24, 4, 24, lg2) == SPECDEC_OK, "gpu 4 more");
    SD_CHECK(sd_runner_forward(gpu, toks + 24, 4, 24, lg) == SPECDEC_OK, "gpu recompute");
    SD_CHECK(memcmp(lg, lg2, sizeof(float) * 4 * V) == 0, "%s: recompute after rollback differs", name);

    free(lc); free(lg); free(lg2); free(one);
    sd_runner_destroy(cpu);
    sd_runner_destroy(gpu);
    specdec_model_free(model);
}

int main(int argc, char **argv) {
    if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
    if (argc < 2) {
        fprintf(stderr, "usage: %s CHECKPOINT_DIR\n", argv[0]);
        return 2;
    }
    /* SD_CUDA_TEST_QUICK=1 (compute-sanitizer runs): three cases, device dtype only. */
    const int quick = getenv("SD_CUDA_TEST_QUICK") != NULL;
    for (size_t i = 0; i < (quick ? 3 : sizeof k_cases / sizeof k_cases[0]); i++) {
        if (quick) {
            run_case(argv[1], k_cases[i * 2], 0);
            continue;
        }
        run_case(argv[1], k_cases[i], 1);
        run_case(argv[1], k_cases[i], 0);
    }
    return sd_test_done();
}
#endif
