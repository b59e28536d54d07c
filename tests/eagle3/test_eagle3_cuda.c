/* test_eagle3_cuda.c — EAGLE-3 on CUDA (docs/EAGLE3.md "CUDA"), on the fixtures of
 * make_heads.py (the random 8-layer target, the four random heads) and the bundled kjv pair:
 *
 *   a. capture (backends/cuda/sd_cuda_runner.cu sd_capture): hs[0, 3, 8] of a chain, a tree
 *      pass, a batched pass of two sequences, a 40-token prefill chunk and a segment with
 *      host aux, into device memory. Against the CPU runner's capture rows: relative L2 per
 *      row within the target runner's CUDA tolerances for this F32 model (F32 kept 1e-4,
 *      converted to BF16 6e-2: tests/cuda/test_cuda_runner.c), hs[0] bitwise the embedding row
 *      with F32 kept. Among CUDA passes:
 *      the tree's and the batched pass's rows BITWISE the chain's (every pass of <= 17 rows
 *      is batch invariant); logits with capture bitwise those without;
 *   b. the CUDA head (backends/cuda/sd_eagle3_cuda.cu) through the scripted drafter life of
 *      test_eagle3.c (e3_script.h), against the float64 reference: relative L2 of logits and
 *      g_next within 1e-4 (F32 heads, F32 kept), 1e-2 (F16), 3e-2 (BF16), q within twice
 *      that; the draft argmax equal wherever the reference's top-2 gap in q exceeds 1e-3
 *      (F32) or 0.05 (F16/BF16), at least 5 such rows; a head on a CPU runner is refused;
 *   c. an engine on CUDA with each random head (chains; one with an EAGLE-2 tree) and
 *      kjv-target + kjv-eagle3 (chain and tree 3,3,3): greedy and match output bitwise
 *      equal plain decoding of the same CUDA engine, drafted by eagle3 (e3_gen.h).
 * Skips without a device ("skipped: no CUDA device", exit 77).
 *
 *     test_eagle3_cuda FIXTURE_DIR MODELS_DIR */
#include "sd_test.h"
#include "specdec.h"

#ifndef SPECDEC_WITH_CUDA
int main(void) { return sd_test_skip("no CUDA device"); }
#else

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e3_gen.h"
#include "e3_script.h"
#include "e3_test.h"
#include "sd_cpu_runner.h"
#include "sd_cuda_backend.h"
#include "sd_eagle3_load.h"
#include "sd_model.h"

#define N_CTX 64

static const char *g_dir;

/* max over rows of ||a_r - b_r|| / ||b_r|| */
static double row_err(const float *a, const float *b, int32_t rows, int32_t w) {
    double worst = 0;
    for (int32_t r = 0; r < rows; r++) {
        double num = 0, den = 0;
        for (int32_t i = 0; i < w; i++) {
            const double d = (double)a[(size_t)r * w + i] - b[(size_t)r * w + i];
            num += d * d;
            den += (double)b[(size_t)r * w + i] * b[(size_t)r * w + i];
        }
        const double e = sqrt(num / (den > 0 ? den : 1));
        worst = e > worst || e != e ? e : worst;
    }
    return worst;
}

/* n rows of a device aux buffer to the host */
static void fetch(float *host, const float *dev, int32_t rows, int32_t w) {
    SD_CHECK(cudaMemcpy(host, dev, sizeof(float) * (size_t)rows * w, cudaMemcpyDeviceToHost) == cudaSuccess, "fetch");
}

typedef struct cap_env {
    sd_runner *c[4], *p[2];   /* CUDA runners a, b, d, e; CPU runners a, e */
    float *dev;               /* device aux rows [N_CTX][W], NaN-poisoned */
    int32_t W, V;
} cap_env;

/* a. capture on CUDA groups vs the CPU group, and among CUDA passes */
static void capture_case(const specdec_model *target, int keep_f32, double tol) {
    const int32_t H = target->w.cfg.hidden_size, V = target->w.cfg.vocab_size, W = 3 * H;
    const char *what = keep_f32 ? "F32 kept" : "BF16";
    sd_runner_group *gc = NULL, *gp = NULL;
    sd_errbuf eb;
    SD_CHECK(sd_cuda_group_create(&target->w, N_CTX, N_CTX, 64, 4, 0, keep_f32, &gc, &eb) == SPECDEC_OK, "%s: %s",
             what, eb.msg);
    SD_CHECK(sd_cpu_group_create(&target->w, N_CTX, N_CTX, 64, 4, &gp, &eb) == SPECDEC_OK, "cpu group: %s", eb.msg);
    if (!gc || !gp) return;
    const int32_t ids[3] = {0, 3, 8};
    SD_CHECK(sd_runner_group_set_capture(gc, ids, 3, &eb) == SPECDEC_OK && gc->capture_max == 8, "capture: %s", eb.msg);
    SD_CHECK(sd_runner_group_set_capture(gp, ids, 3, &eb) == SPECDEC_OK, "cpu capture");
    cap_env E = {{NULL}, {NULL}, NULL, W, V};
    for (int i = 0; i < 4; i++) SD_CHECK(sd_runner_group_add(gc, &E.c[i], &eb) == SPECDEC_OK, "cuda runner");
    for (int i = 0; i < 2; i++) SD_CHECK(sd_runner_group_add(gp, &E.p[i], &eb) == SPECDEC_OK, "cpu runner");
    SD_CHECK(cudaMalloc((void **)&E.dev, sizeof(float) * N_CTX * (size_t)W) == cudaSuccess, "cudaMalloc");
    static int32_t tok[40];
    for (int i = 0; i < 40; i++) tok[i] = (i * 37 + 11) % V;
    static float A[6 * 192], PA[6 * 192], B[3 * 192], C[8 * 192], HX[6 * 192], E40[40 * 192], P40[40 * 192];
    static float L0[6 * 200], LA[6 * 200];
    /* the chain: without, then with capture (logits bitwise the same); vs the CPU */
    sd_runner_seg s = {E.c[0], tok, 6, 0, NULL, 0, L0, NULL, NULL};
    SD_CHECK(sd_runner_forward_batch(&s, 1, &eb) == SPECDEC_OK, "plain chain: %s", eb.msg);
    cudaMemset(E.dev, 0xFF, sizeof(float) * N_CTX * (size_t)W);
    s.logits = LA, s.aux = E.dev;
    SD_CHECK(sd_runner_forward_batch(&s, 1, &eb) == SPECDEC_OK, "chain: %s", eb.msg);
    fetch(A, E.dev, 6, W);
    SD_CHECK(!memcmp(L0, LA, sizeof(float) * 6 * (size_t)V), "%s: a capture changes no logits", what);
    const sd_runner_seg sp = {E.p[0], tok, 6, 0, NULL, 0, NULL, PA, NULL};
    SD_CHECK(sd_runner_forward_batch(&sp, 1, &eb) == SPECDEC_OK, "cpu chain: %s", eb.msg);
    const double ea = row_err(A, PA, 6, W);
    SD_CHECK(ea < tol, "%s: chain capture vs CPU: %.3g (tolerance %.3g)", what, ea, tol);
    if (keep_f32) /* hs[0] = the embedding row, exactly */
        for (int t = 0; t < 6; t++)
            SD_CHECK(!memcmp(A + (size_t)t * W, (const float *)target->w.tok_embd.data + (size_t)tok[t] * H,
                             sizeof(float) * (size_t)H), "hs[0] row %d", t);
    /* a tree over tokens 0..3: nodes {tok[4], tok[5], 11}, parents {-1, 0, 0} */
    const sd_runner_seg pre = {E.c[1], tok, 4, 0, NULL, 0, NULL, NULL, NULL};
    const int32_t ttok[3] = {tok[4], tok[5], 11}, par[3] = {-1, 0, 0};
    const sd_runner_seg st = {E.c[1], ttok, 3, 4, par, 0, NULL, E.dev, NULL};
    SD_CHECK(sd_runner_forward_batch(&pre, 1, &eb) == SPECDEC_OK && sd_runner_forward_batch(&st, 1, &eb) == SPECDEC_OK,
             "tree: %s", eb.msg);
    fetch(B, E.dev, 3, W);
    SD_CHECK(!memcmp(B, A + 4 * (size_t)W, sizeof(float) * 2 * (size_t)W), "%s: tree rows bitwise the chain's", what);
    /* a batched pass of two sequences: rows bitwise the chain's */
    const sd_runner_seg two[2] = {{E.c[2], tok, 6, 0, NULL, 0, NULL, E.dev, NULL},
                                  {E.c[0], tok + 2, 2, 2, NULL, 0, NULL, E.dev + 6 * (size_t)W, NULL}};
    SD_CHECK(sd_runner_forward_batch(two, 2, &eb) == SPECDEC_OK, "batched: %s", eb.msg);
    fetch(C, E.dev, 8, W);
    SD_CHECK(!memcmp(C, A, sizeof(float) * 6 * (size_t)W) && !memcmp(C + 6 * (size_t)W, A + 2 * (size_t)W,
                                                                    sizeof(float) * 2 * (size_t)W),
             "%s: batched rows bitwise the chain's", what);
    /* host aux (cudaMemcpyDefault) */
    const sd_runner_seg sh = {E.c[2], tok, 6, 0, NULL, 0, NULL, HX, NULL};
    SD_CHECK(sd_runner_forward_batch(&sh, 1, &eb) == SPECDEC_OK && !memcmp(HX, A, sizeof(float) * 6 * (size_t)W),
             "%s: host aux rows", what);
    /* a prefill chunk of 40 (cuBLAS above 17 rows): vs the CPU */
    const sd_runner_seg se = {E.c[3], tok, 40, 0, NULL, 0, NULL, E.dev, NULL}, pe = {E.p[1], tok, 40, 0, NULL, 0, NULL, P40, NULL};
    SD_CHECK(sd_runner_forward_batch(&se, 1, &eb) == SPECDEC_OK && sd_runner_forward_batch(&pe, 1, &eb) == SPECDEC_OK,
             "prefill: %s", eb.msg);
    fetch(E40, E.dev, 40, W);
    const double ep = row_err(E40, P40, 40, W);
    SD_CHECK(ep < tol, "%s: 40-row prefill capture vs CPU: %.3g", what, ep);
    printf("capture %-9s chain vs CPU %.2e, prefill 40 vs CPU %.2e; tree, batched, host rows bitwise the chain's\n",
           what, ea, ep);
    cudaFree(E.dev);
    for (int i = 0; i < 4; i++) sd_runner_destroy(E.c[i]);
    for (int i = 0; i < 2; i++) sd_runner_destroy(E.p[i]);
    sd_runner_group_destroy(gc);
    sd_runner_group_destroy(gp);
}

/* b. the CUDA head through the script */
static specdec_status cu_fuse(void *c, const float *aux, int32_t n, float *g) {
    sd_eagle3_runner *h = c;
    return h->ops->fuse(h, aux, n, g);
}
static specdec_status cu_step(void *c, const int32_t *tok, const float *g, const int32_t *pos, int32_t n,
                              const int32_t *par, int32_t n_shared, float *logits, float *g_next) {
    sd_eagle3_runner *h = c;
    return h->ops->step(h, tok, g, pos, n, par, n_shared, logits, g_next);
}
static int32_t cu_truncate(void *c, int32_t n) {
    sd_eagle3_runner *h = c;
    sd_runner_truncate(&h->base, n);
    return sd_runner_kv_len(&h->base);
}
static const char *cu_error(void *c) { return ((sd_eagle3_runner *)c)->base.err.msg; }

static void head_script(const char *name, const char *dir, const specdec_model *head, void *ctx) {
    const specdec_model *target = ctx;
    const sd_eagle3_weights *hw = &head->eagle3->w;
    sd_runner *tr = NULL, *hr = NULL;
    sd_errbuf eb;
    SD_CHECK(sd_cuda_runner_create(&target->w, N_CTX, N_CTX, 0, 1, &tr, &eb) == SPECDEC_OK, "target: %s", eb.msg);
    if (tr) SD_CHECK(sd_cuda_eagle3_runner_create(hw, tr, &target->w.cfg, N_CTX, 16, &hr, &eb) == SPECDEC_OK,
                     "%s: CUDA head: %s", name, eb.msg);
    if (hr) {
        const double t = hw->dtype == SD_F32 ? 1e-4 : hw->dtype == SD_F16 ? 1e-2 : 3e-2;
        const e3s_tol tol = {t, t, 2 * t, hw->dtype == SD_F32 ? 1e-3 : 0.05};
        const e3s_head h = {hr, cu_fuse, cu_step, cu_truncate, cu_error};
        e3s_result res;
        e3s_run(name, dir, hw, &h, &tol, &res);
        SD_CHECK(res.argmax_checked >= 5, "%s: only %d draft argmax rows cleared the margin", name,
                 (int)res.argmax_checked);
    }
    sd_runner_destroy(hr);
    sd_runner_destroy(tr);
}

static void test_heads(const specdec_model *target) {
    const int n = e3s_each_head(g_dir, head_script, (void *)target);
    SD_CHECK(n == 4, "%d heads run, expected 4", n);
    /* a head over a CPU runner is refused (named), nothing allocated */
    specdec_model *h = e3_load(g_dir, "flat_f32_d2t");
    sd_runner *cr = NULL, *hr = NULL;
    sd_errbuf eb;
    SD_CHECK(sd_cpu_runner_create(&target->w, N_CTX, N_CTX, &cr, NULL) == SPECDEC_OK, "cpu runner");
    SD_CHECK(h && cr &&
                 sd_cuda_eagle3_runner_create(&h->eagle3->w, cr, &target->w.cfg, N_CTX, 16, &hr, &eb) ==
                     SPECDEC_ERR_INVALID_ARGUMENT && !hr && strstr(eb.msg, "not a CUDA runner"),
             "CUDA head over a CPU runner: %s", eb.msg);
    sd_runner_destroy(cr);
    specdec_model_free(h);
}

/* c. engines on CUDA: greedy and match equal plain decoding */
static specdec_engine *cuda_engine(const specdec_model *t, const specdec_model *h) {
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CUDA;
    ep.n_ctx = 128;
    specdec_engine *e = NULL;
    SD_CHECK(specdec_engine_create(t, h, &ep, &e) == SPECDEC_OK, "CUDA engine: %s", specdec_last_error());
    return e;
}

static void test_generation(const specdec_model *target, const char *models) {
    static const char *heads[] = {"flat_f32_d2t", "flat_bf16_embed_bias", "speculators_f16_t2d",
                                  "speculators_f32_fullvocab"};
    static const int32_t prompt[] = {5, 17, 42, 99, 3, 150}, tree[3] = {2, 2, 2};
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        specdec_model *h = e3_load(g_dir, heads[i]);
        specdec_engine *e = h ? cuda_engine(target, h) : NULL;
        if (e) check_equal_plain(heads[i], e, prompt, 6, 40, NULL, 0);
        if (e && i == 0) check_equal_plain(heads[i], e, prompt, 6, 40, tree, 3);
        specdec_engine_free(e);
        specdec_model_free(h);
    }
    specdec_model *kt = e3_load(models, "kjv-target"), *kh = e3_load(models, "kjv-eagle3");
    specdec_engine *ke = kt && kh ? cuda_engine(kt, kh) : NULL;
    static const int32_t kp[] = {1, 260, 609, 13, 269}, ktree[3] = {3, 3, 3};
    if (ke) check_equal_plain("kjv-eagle3", ke, kp, 5, 100, NULL, 0);
    if (ke) check_equal_plain("kjv-eagle3", ke, kp, 5, 100, ktree, 3);
    specdec_engine_free(ke);
    specdec_model_free(kh);
    specdec_model_free(kt);
}

int main(int argc, char **argv) {
    if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
    if (argc != 3) {
        fprintf(stderr, "usage: test_eagle3_cuda FIXTURE_DIR MODELS_DIR\n");
        return 2;
    }
    g_dir = argv[1];
    specdec_model *target = e3_load(g_dir, "target");
    if (!target) return sd_test_done();
    capture_case(target, 1, 1e-4);
    capture_case(target, 0, 6e-2);
    test_heads(target);
    test_generation(target, argv[2]);
    specdec_model_free(target);
    return sd_test_done();
}

#endif
