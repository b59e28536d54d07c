/* test_eagle3.c — EAGLE-3 heads (docs/EAGLE3.md): loading every layout through the public
 * specdec_model_load, the CPU forward against the float64 numpy reference (tests/eagle3/
 * eagle3_ref.py, fixtures by make_heads.py) over a drafter's life (prefix, chain, rollback,
 * re-extend, tree rows), bad heads, the target checks, allocation failures.
 *
 *     test_eagle3 FIXTURE_DIR [MODELS_DIR]   (FIXTURE_DIR/manifest.txt, target/, bad_*; MODELS_DIR:
 *                                            the bundled kjv-eagle3 head must fit kjv-target) */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_cpu_runner.h"
#include "sd_eagle3.h"
#include "sd_eagle3_cpu.h"
#include "sd_eagle3_load.h"
#include "sd_model.h"
#include "e3_script.h"
#include "sd_test.h"
#include "specdec.h"

/* the info struct kept its size when the EAGLE-3 fields were carved from `reserved` */
#if UINTPTR_MAX == 0xffffffffffffffffu
_Static_assert(sizeof(specdec_model_info) == 232, "specdec_model_info changed size");
#endif

#define REL_TOL 1e-5

static const char *g_dir;

static specdec_model *load(const char *sub, specdec_status *st) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", g_dir, sub);
    specdec_model *m = NULL;
    *st = specdec_model_load(p, NULL, &m);
    return m;
}

static specdec_status cpu_fuse(void *c, const float *aux, int32_t n, float *g) {
    return sd_eagle3_cpu_fuse(c, aux, n, g);
}
static specdec_status cpu_step(void *c, const int32_t *tok, const float *g, const int32_t *pos, int32_t n,
                               const int32_t *par, int32_t n_shared, float *logits, float *g_next) {
    return sd_eagle3_cpu_step(c, tok, g, pos, n, par, n_shared, logits, g_next);
}
static int32_t cpu_truncate(void *c, int32_t n) {
    return sd_eagle3_cpu_truncate(c, n) == SPECDEC_OK ? sd_eagle3_cpu_n_cached(c) : -1;
}
static const char *cpu_error(void *c) { return sd_eagle3_cpu_last_error(c); }

/* The CPU forward through the scripted drafter life, every value within REL_TOL of the
 * float64 reference, every draft argmax equal (tests/eagle3/e3_script.h). */
static void run_script(const char *name, const char *dir, const specdec_model *head, const specdec_model *target) {
    const sd_eagle3_weights *hw = &head->eagle3->w;
    const sd_tensor *emb = hw->embed.data ? &hw->embed : &target->w.tok_embd;
    sd_eagle3_cpu *e = NULL;
    SD_CHECK(sd_eagle3_cpu_create(hw, emb, 64, 16, &e, NULL) == SPECDEC_OK, "%s: create: %s", name,
             specdec_last_error());
    if (!e) return;
    const e3s_head h = {e, cpu_fuse, cpu_step, cpu_truncate, cpu_error};
    const e3s_tol tol = {REL_TOL, REL_TOL, REL_TOL, 0.0};
    e3s_result res;
    e3s_run(name, dir, hw, &h, &tol, &res);
    sd_eagle3_cpu_destroy(e);
}

/* One good head of the manifest: its info, its fit to the target, its layout, the script. */
static void good_head(const char *name, const char *dir, const specdec_model *h, void *ctx) {
    const specdec_model *target = ctx;
    specdec_model_info in;
    SD_CHECK(specdec_model_get_info(h, &in) == SPECDEC_OK && in.model_kind == SPECDEC_DRAFT_EAGLE3 &&
                 in.eagle3_target_hidden == 64 && in.vocab_size == 200 && in.n_layers == 1,
             "%s: info kind %d target hidden %d vocab %d", name, in.model_kind, in.eagle3_target_hidden, in.vocab_size);
    SD_CHECK(sd_eagle3_check_target(&h->eagle3->w, &target->w.cfg, name, NULL) == SPECDEC_OK, "%s: %s", name,
             specdec_last_error());
    SD_CHECK((h->eagle3->w.cfg.layout == SD_EAGLE3_SPECULATORS) == (strncmp(name, "speculators", 11) == 0),
             "%s: layout %d", name, (int)h->eagle3->w.cfg.layout);
    run_script(name, dir, h, target);
}

static void test_good_heads(const specdec_model *target) {
    const int n = e3s_each_head(g_dir, good_head, (void *)target);
    SD_CHECK(n == 4, "%d heads in the manifest, expected 4", n);
}

/* Capture ids: default rule, the eagle_config +1 rule, top-level hs indices, range checks. */
static void test_capture_rules(const specdec_model *target) {
    specdec_status st;
    struct { const char *dir; int32_t want[3]; } cases[] = {
        {"flat_f32_d2t", {-1, -1, -1}}, {"flat_bf16_embed_bias", {2, 4, 7}}, {"speculators_f16_t2d", {2, 5, 8}}};
    for (int i = 0; i < 3; i++) {
        specdec_model *h = load(cases[i].dir, &st);
        specdec_model_info in;
        SD_CHECK(h && specdec_model_get_info(h, &in) == SPECDEC_OK && !memcmp(in.eagle3_aux_layers, cases[i].want, 12),
                 "%s: aux ids %d %d %d", cases[i].dir, h ? in.eagle3_aux_layers[0] : 0, h ? in.eagle3_aux_layers[1] : 0,
                 h ? in.eagle3_aux_layers[2] : 0);
        specdec_model_free(h);
    }
    sd_eagle3_config c = {0};
    int32_t ids[3];
    c.aux_ids[0] = c.aux_ids[1] = c.aux_ids[2] = -1;
    SD_CHECK(sd_eagle3_aux_layers(&c, 32, ids, NULL) == SPECDEC_OK && ids[0] == 2 && ids[1] == 16 && ids[2] == 29,
             "Llama-3.1-8B default rule: %d %d %d", ids[0], ids[1], ids[2]);
    SD_CHECK(sd_eagle3_aux_layers(&c, 80, ids, NULL) == SPECDEC_OK && ids[1] == 40 && ids[2] == 77, "70B rule");
    SD_CHECK(sd_eagle3_aux_layers(&c, 7, ids, NULL) == SPECDEC_OK, "L = 7 is the smallest default-rule target");
    SD_CHECK(sd_eagle3_aux_layers(&c, 6, ids, NULL) == SPECDEC_ERR_MODEL_MISMATCH, "L = 6 default rule must fail");
    /* the default-rule head on a 6-layer target; an explicit id past L */
    specdec_model *h = load("flat_f32_d2t", &st);
    sd_config t6 = target->w.cfg;
    t6.n_layers = 6;
    SD_CHECK(h && sd_eagle3_check_target(&h->eagle3->w, &t6, "h", NULL) == SPECDEC_ERR_MODEL_MISMATCH &&
                 strstr(specdec_last_error(), "L >= 7"),
             "default rule on 6 layers: %s", specdec_last_error());
    sd_config t48 = target->w.cfg;
    t48.hidden_size = 48;
    SD_CHECK(h && sd_eagle3_check_target(&h->eagle3->w, &t48, "h", NULL) == SPECDEC_ERR_MODEL_MISMATCH &&
                 strstr(specdec_last_error(), "takes 192 inputs") && strstr(specdec_last_error(), "hidden_size is 48"),
             "fc width mismatch must name both numbers: %s", specdec_last_error());
    sd_config tv = target->w.cfg;
    tv.vocab_size = 201;
    SD_CHECK(h && sd_eagle3_check_target(&h->eagle3->w, &tv, "h", NULL) == SPECDEC_ERR_MODEL_MISMATCH, "vocab");
    specdec_model_free(h);
    h = load("bad_aux_range", &st);
    SD_CHECK(st == SPECDEC_OK && h && sd_eagle3_check_target(&h->eagle3->w, &target->w.cfg, "h", NULL) ==
                                          SPECDEC_ERR_MODEL_MISMATCH && strstr(specdec_last_error(), "id 9"),
             "aux id 9 on an 8-layer target: %s", specdec_last_error());
    specdec_model_free(h);
}

static void test_bad_heads(void) {
    static const struct { const char *dir; specdec_status want; const char *needle; } bad[] = {
        {"bad_truncated", SPECDEC_ERR_FORMAT, "model.safetensors"},
        {"bad_q_shape", SPECDEC_ERR_MODEL_MISMATCH, "q_proj"},
        {"bad_no_lm_head", SPECDEC_ERR_MODEL_MISMATCH, "lm_head"},
        {"bad_d2t_range", SPECDEC_ERR_FORMAT, "outside [0, 200)"},
        {"bad_d2t_dup", SPECDEC_ERR_FORMAT, "two draft ids"},
        {"bad_t2d_mismatch", SPECDEC_ERR_FORMAT, "t2d"},
        {"bad_d2t_dtype", SPECDEC_ERR_MODEL_MISMATCH, "d2t"},
        {"bad_aux_list", SPECDEC_ERR_FORMAT, "eagle_aux_hidden_state_layer_ids"},
        {"bad_two_layers", SPECDEC_ERR_UNSUPPORTED, "num_hidden_layers 2"},
        {"bad_eagle1", SPECDEC_ERR_UNSUPPORTED, "use_aux_hidden_state"},
        {"bad_vocab_too_small", SPECDEC_ERR_FORMAT, "draft_vocab_size"},
        {"bad_qwen3_layer", SPECDEC_ERR_UNSUPPORTED, "qwen3"},
        /* found by fuzz_eagle3 (2026-11-27): loaded, then drafted with a SwiGLU MLP without biases */
        {"bad_hidden_act_gelu", SPECDEC_ERR_UNSUPPORTED, "hidden_act 'gelu'"},
        {"bad_mlp_bias", SPECDEC_ERR_UNSUPPORTED, "mlp_bias"},
        /* found by fuzz_eagle3: d2t[i] + i overflowed int64 (undefined behaviour) before the range check */
        {"bad_d2t_overflow", SPECDEC_ERR_FORMAT, "d2t[2] = 9223372036854775807"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        specdec_status st;
        specdec_model *m = load(bad[i].dir, &st);
        SD_CHECK(st == bad[i].want && !m && strstr(specdec_last_error(), bad[i].needle), "%s: got %s (%s), want %s",
                 bad[i].dir, specdec_status_string(st), specdec_last_error(), specdec_status_string(bad[i].want));
        specdec_model_free(m);
    }
}

/* A head is not a language model: an engine refuses it as target; as the draft of a target
 * it fits it makes an engine (the eagle3 drafter: CPU, and CUDA where a device exists); one
 * that does not fit is refused. */
static void test_engine_heads(const specdec_model *target) {
    specdec_status st;
    specdec_model *h = load("flat_f32_d2t", &st);
    specdec_engine *e = NULL;
    st = specdec_engine_create(h, NULL, NULL, &e);
    SD_CHECK(st == SPECDEC_ERR_MODEL_MISMATCH && !e, "head as target: %s", specdec_status_string(st));
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    st = specdec_engine_create(target, h, &ep, &e);
    SD_CHECK(st == SPECDEC_OK && e, "head as draft: %s (%s)", specdec_status_string(st), specdec_last_error());
    specdec_engine_free(e);
    e = NULL;
    /* on CUDA: the CUDA head where a device exists (tests/eagle3/test_eagle3_cuda.c runs it),
     * else the backend's named absence */
    ep.backend = SPECDEC_BACKEND_CUDA;
    st = specdec_engine_create(target, h, &ep, &e);
    if (specdec_cuda_device_count() > 0)
        SD_CHECK(st == SPECDEC_OK && e, "head on CUDA: %s (%s)", specdec_status_string(st), specdec_last_error());
    else
        SD_CHECK(st == SPECDEC_ERR_BACKEND_UNAVAILABLE && !e, "head on CUDA without a device: %s",
                 specdec_status_string(st));
    specdec_engine_free(e);
    e = NULL;
    /* the scheduler (batch, serve) takes a head on the CPU (test_eagle3_sched runs it) and on
     * CUDA where a device exists (the CUDA head, as the engine's) */
    ep.backend = SPECDEC_BACKEND_CPU;
    specdec_scheduler *sc = NULL;
    st = specdec_scheduler_create(target, h, &ep, NULL, &sc);
    SD_CHECK(st == SPECDEC_OK && sc, "scheduler with a head: %s (%s)", specdec_status_string(st), specdec_last_error());
    specdec_scheduler_free(sc);
    sc = NULL;
    ep.backend = SPECDEC_BACKEND_CUDA;
    st = specdec_scheduler_create(target, h, &ep, NULL, &sc);
    if (specdec_cuda_device_count() > 0)
        SD_CHECK(st == SPECDEC_OK && sc, "scheduler with a head on CUDA: %s (%s)", specdec_status_string(st),
                 specdec_last_error());
    else
        SD_CHECK(st == SPECDEC_ERR_BACKEND_UNAVAILABLE && !sc, "scheduler with a head on CUDA without a device: %s",
                 specdec_status_string(st));
    specdec_scheduler_free(sc);
    specdec_model_free(h);
}

/* The runner capture contract (core/sd_runner.h "Captured hidden states") on the 8-layer F32
 * target, ids {0, 3, 8}: hs[0] is the token's embedding row; hs[8] (before the final norm)
 * gives the logits row through the final norm and lm_head; a chain, a tree pass, a batched
 * pass of two sequences, a call over runners of two groups and the same rows without capture
 * agree bitwise (rows, logits);
 * capture ids and segments the group cannot serve are refused. */
static void test_capture(const specdec_model *target) {
    const sd_config *c = &target->w.cfg;
    const int32_t H = c->hidden_size, V = c->vocab_size, W = 3 * H;
    sd_runner_group *g = NULL;
    SD_CHECK(sd_cpu_group_create(&target->w, 32, 16, 16, 16, &g, NULL) == SPECDEC_OK, "group: %s", specdec_last_error());
    if (!g) return;
    sd_runner *a = NULL, *b = NULL, *d = NULL;
    SD_CHECK(sd_runner_group_add(g, &a, NULL) == SPECDEC_OK && sd_runner_group_add(g, &b, NULL) == SPECDEC_OK &&
                 sd_runner_group_add(g, &d, NULL) == SPECDEC_OK,
             "runners");
    static const int32_t tok[6] = {7, 120, 3, 55, 199, 42};
    static float A[6 * 192], LA[6 * 200], L0[6 * 200], B[3 * 192], LB[3 * 200], C[6 * 192], D[2 * 192];
    sd_errbuf eb;
    /* without capture first: the reference logits */
    sd_runner_seg s0 = {a, tok, 6, 0, NULL, 0, L0, NULL, NULL};
    SD_CHECK(sd_runner_forward_batch(&s0, 1, &eb) == SPECDEC_OK, "plain pass: %s", eb.msg);
    s0.aux = A;
    SD_CHECK(sd_runner_forward_batch(&s0, 1, &eb) == SPECDEC_ERR_UNSUPPORTED, "aux without capture is refused");
    const int32_t bad1[2] = {3, 2}, bad2[1] = {10}, ids[3] = {0, 3, 8};
    SD_CHECK(sd_runner_group_set_capture(g, bad1, 2, &eb) == SPECDEC_ERR_INVALID_ARGUMENT, "decreasing ids");
    /* 9 = L + 1 (after the final norm: an MTP layer's input) is the last a CPU group captures */
    SD_CHECK(sd_runner_group_set_capture(g, bad2, 1, &eb) == SPECDEC_ERR_INVALID_ARGUMENT && strstr(eb.msg, "10") &&
                 strstr(eb.msg, "[0, 9]"),
             "id past L + 1: %s", eb.msg);
    SD_CHECK(sd_runner_group_set_capture(g, ids, 3, &eb) == SPECDEC_OK, "capture: %s", eb.msg);
    const sd_runner_seg sa = {a, tok, 6, 0, NULL, 0, LA, A, NULL};
    SD_CHECK(sd_runner_forward_batch(&sa, 1, &eb) == SPECDEC_OK, "chain: %s", eb.msg);
    SD_CHECK(!memcmp(LA, L0, sizeof(float) * 6 * (size_t)V), "a capture changes no logits");
    /* hs[0] = embeddings; hs[L] -> final norm -> lm_head = logits */
    const float *E = target->w.tok_embd.data, *nw = target->w.out_norm.data, *lm = target->w.lm_head.data;
    double worst = 0;
    for (int t = 0; t < 6; t++) {
        SD_CHECK(!memcmp(A + (size_t)t * W, E + (size_t)tok[t] * H, sizeof(float) * (size_t)H), "hs[0] row %d", t);
        const float *x = A + (size_t)t * W + 2 * H;
        double ss = 0;
        for (int i = 0; i < H; i++) ss += (double)x[i] * x[i];
        const double r = 1.0 / sqrt(ss / H + (double)c->rms_norm_eps);
        for (int v = 0; v < V; v++) {
            double z = 0;
            for (int i = 0; i < H; i++) z += (double)x[i] * r * nw[i] * lm[(size_t)v * H + i];
            const double e = fabs(z - LA[(size_t)t * V + v]) / (1.0 + fabs(z));
            if (e > worst) worst = e;
        }
    }
    SD_CHECK(worst < 1e-4, "hs[L] through the final norm and lm_head: error %.3g", worst);
    /* a tree over tokens 0..3: nodes {tok[4] (root), tok[5], 11} with parents {-1, 0, 0} */
    const sd_runner_seg pre = {b, tok, 4, 0, NULL, 0, NULL, NULL, NULL};
    SD_CHECK(sd_runner_forward_batch(&pre, 1, &eb) == SPECDEC_OK, "prefill: %s", eb.msg);
    const int32_t ttok[3] = {tok[4], tok[5], 11}, par[3] = {-1, 0, 0};
    const sd_runner_seg st = {b, ttok, 3, 4, par, 0, LB, B, NULL};
    SD_CHECK(sd_runner_forward_batch(&st, 1, &eb) == SPECDEC_OK, "tree: %s", eb.msg);
    SD_CHECK(!memcmp(B, A + 4 * W, sizeof(float) * 2 * (size_t)W) && !memcmp(LB, LA + 4 * V, sizeof(float) * 2 * (size_t)V),
             "tree rows equal the chain's");
    /* a batched pass of two sequences (prefill chunks alike) */
    const sd_runner_seg two[2] = {{d, tok, 6, 0, NULL, 0, NULL, C, NULL}, {a, tok + 2, 2, 2, NULL, 0, NULL, D, NULL}};
    SD_CHECK(sd_runner_forward_batch(two, 2, &eb) == SPECDEC_OK, "batched: %s", eb.msg);
    SD_CHECK(!memcmp(C, A, sizeof(float) * 6 * (size_t)W) && !memcmp(D, A + 2 * W, sizeof(float) * 2 * (size_t)W),
             "batched rows equal the chain's");
    /* runners of two groups in one call (emulated segment by segment): each captures through its own */
    sd_runner *solo = NULL;
    static float SE[6 * 192], SF[2 * 192];
    SD_CHECK(sd_cpu_runner_create(&target->w, 32, 16, &solo, NULL) == SPECDEC_OK &&
                 sd_runner_group_set_capture(solo->group, ids, 3, &eb) == SPECDEC_OK,
             "standalone runner");
    const sd_runner_seg mix[2] = {{solo, tok, 6, 0, NULL, 0, NULL, SE, NULL}, {a, tok, 2, 0, NULL, 0, NULL, SF, NULL}};
    SD_CHECK(solo && sd_runner_forward_batch(mix, 2, &eb) == SPECDEC_OK, "two groups: %s", eb.msg);
    SD_CHECK(!memcmp(SE, A, sizeof(float) * 6 * (size_t)W) && !memcmp(SF, A, sizeof(float) * 2 * (size_t)W),
             "rows of a call over two groups equal the chain's");
    sd_runner_destroy(solo);
    sd_runner_destroy(a);
    sd_runner_destroy(b);
    sd_runner_destroy(d);
    sd_runner_group_destroy(g);
}

/* Argument checks of the forward: nothing changes on a refused call. */
static void test_step_errors(const specdec_model *target) {
    specdec_status st;
    specdec_model *h = load("flat_f32_d2t", &st);
    if (!h) return;
    sd_eagle3_cpu *e = NULL;
    SD_CHECK(sd_eagle3_cpu_create(&h->eagle3->w, &target->w.tok_embd, 4, 4, &e, NULL) == SPECDEC_OK, "create");
    sd_tensor bad_emb = target->w.tok_embd;
    bad_emb.shape[1] = 32;
    sd_eagle3_cpu *e2 = NULL;
    SD_CHECK(sd_eagle3_cpu_create(&h->eagle3->w, &bad_emb, 4, 4, &e2, NULL) == SPECDEC_ERR_MODEL_MISMATCH && !e2,
             "embedding shape");
    SD_CHECK(sd_eagle3_cpu_create(&h->eagle3->w, &target->w.tok_embd, 4, 5, &e2, NULL) == SPECDEC_ERR_INVALID_ARGUMENT,
             "max_rows > n_ctx");
    float g[4 * 64] = {0};
    int32_t tok[4] = {1, 2, 3, 4}, pos[4] = {0, 1, 2, 3}, par[4] = {-1, 0, 7, 0};
    SD_CHECK(sd_eagle3_cpu_step(e, tok, g, pos, 3, NULL, 0, NULL, NULL) == SPECDEC_OK, "3 rows");
    SD_CHECK(sd_eagle3_cpu_step(e, tok, g, pos, 2, NULL, 0, NULL, NULL) == SPECDEC_ERR_CONTEXT_FULL &&
                 sd_eagle3_cpu_n_cached(e) == 3, "context full");
    SD_CHECK(sd_eagle3_cpu_truncate(e, 4) == SPECDEC_ERR_INVALID_ARGUMENT, "truncate past the cache");
    SD_CHECK(sd_eagle3_cpu_truncate(e, 1) == SPECDEC_OK, "truncate");
    int32_t badtok[1] = {200}, badpos[1] = {-1};
    SD_CHECK(sd_eagle3_cpu_step(e, badtok, g, pos, 1, NULL, 0, NULL, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "token");
    SD_CHECK(sd_eagle3_cpu_step(e, tok, g, badpos, 1, NULL, 0, NULL, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "pos");
    SD_CHECK(sd_eagle3_cpu_step(e, tok, g, pos, 3, par + 1, 1, NULL, NULL) == SPECDEC_ERR_INVALID_ARGUMENT,
             "parent 7 is not an earlier row");
    SD_CHECK(sd_eagle3_cpu_step(e, tok, g, pos, 1, par, 2, NULL, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "n_shared");
    SD_CHECK(sd_eagle3_cpu_n_cached(e) == 1, "refused calls left the cache as it was");
    SD_CHECK(sd_eagle3_cpu_fuse(e, g, 5, g) == SPECDEC_ERR_INVALID_ARGUMENT, "fuse n > max_rows");
    sd_eagle3_cpu_destroy(e);
    specdec_model_free(h);
}

/* Every allocation of the loader and of the forward's creation may fail: a status, no leak.
 * Each of the N allocations a successful load + create makes is failed in turn (not only
 * those before the first success: the widened F32 copy of a BF16 head is an optimisation
 * whose failure the forward survives, so a success comes before the last allocation). */
static void test_alloc_failures(const specdec_model *target) {
    char p[1024];
    snprintf(p, sizeof p, "%s/flat_bf16_embed_bias", g_dir);
    int failures = 0, survived = 0;
    long n_alloc = -1;
    for (long k = -1; k < n_alloc || k < 0; k++) { /* k = -1: nothing fails; it counts N */
        specdec_model *m = NULL;
        sd_alloc_fail_after(k);
        specdec_status st = specdec_model_load(p, NULL, &m);
        sd_eagle3_cpu *e = NULL;
        specdec_status st2 = m ? sd_eagle3_cpu_create(&m->eagle3->w, &target->w.tok_embd, 8, 4, &e, NULL) : st;
        if (k < 0) n_alloc = sd_alloc_count();
        sd_alloc_fail_after(-1);
        if (st == SPECDEC_OK && st2 == SPECDEC_OK) {
            survived += k >= 0;
        } else {
            failures++;
            SD_CHECK((st == SPECDEC_ERR_OUT_OF_MEMORY || st2 == SPECDEC_ERR_OUT_OF_MEMORY) && !e,
                     "allocation %ld failing gave %s / %s", k, specdec_status_string(st), specdec_status_string(st2));
        }
        SD_CHECK(k >= 0 || (st == SPECDEC_OK && st2 == SPECDEC_OK), "load + create: %s", specdec_last_error());
        sd_eagle3_cpu_destroy(e);
        specdec_model_free(m);
    }
    SD_CHECK(failures > 10 && survived == 1, "%d allocation points, %d failures, %d survived (only the widened copy may)",
             (int)n_alloc, failures, survived);
    printf("load + CPU forward: %ld allocation points, each failed once: %d OUT_OF_MEMORY, %d survived\n", n_alloc,
           failures, survived);
}

/* Every allocation of a scheduler's creation with an F16 head (the target's group, the head's
 * shared weights, each slot's head runner over them, the rounds) and of an engine's with it may
 * fail: OUT_OF_MEMORY and nothing made, or (the widened copy alone) a working object; never a
 * leak (ASan) or a crash. Every allocation point of a successful creation is failed in turn. */
static specdec_status sched_or_engine(const specdec_model *target, const specdec_model *h, int sched) {
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = 32;
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = 3;
    specdec_scheduler *s = NULL;
    specdec_engine *e = NULL;
    const specdec_status st =
        sched ? specdec_scheduler_create(target, h, &ep, &sp, &s) : specdec_engine_create(target, h, &ep, &e);
    SD_CHECK((st == SPECDEC_OK) == (s != NULL || e != NULL), "%s: status %s but object %p", sched ? "scheduler" : "engine",
             specdec_status_string(st), sched ? (void *)s : (void *)e);
    specdec_scheduler_free(s);
    specdec_engine_free(e);
    return st;
}

static void test_alloc_failures_shared(const specdec_model *target) {
    specdec_status st;
    specdec_model *h = load("speculators_f16_t2d", &st);
    SD_CHECK(h && h->eagle3 && h->eagle3->w.dtype == SD_F16, "F16 head: %s", specdec_last_error());
    for (int sched = 0; h && sched < 2; sched++) {
        sd_alloc_fail_after(-1);
        st = sched_or_engine(target, h, sched);
        const long n_alloc = sd_alloc_count();
        SD_CHECK(st == SPECDEC_OK, "%s with the F16 head: %s", sched ? "scheduler" : "engine", specdec_last_error());
        int failures = 0, survived = 0;
        for (long k = 0; st == SPECDEC_OK && k < n_alloc; k++) {
            sd_alloc_fail_after(k);
            const specdec_status sk = sched_or_engine(target, h, sched);
            sd_alloc_fail_after(-1);
            failures += sk != SPECDEC_OK;
            survived += sk == SPECDEC_OK;
            SD_CHECK(sk == SPECDEC_OK || sk == SPECDEC_ERR_OUT_OF_MEMORY, "%s: allocation %ld of %ld failing gave %s (%s)",
                     sched ? "scheduler" : "engine", k, n_alloc, specdec_status_string(sk), specdec_last_error());
        }
        /* the widened copy is made once: one allocation the creation survives, whatever max_active */
        SD_CHECK(failures > 20 && survived == 1, "%s: %ld allocation points, %d failures, %d survived",
                 sched ? "scheduler" : "engine", n_alloc, failures, survived);
        printf("%s with an F16 head: %ld allocation points, each failed once: %d OUT_OF_MEMORY, %d survived\n",
               sched ? "scheduler (3 slots)" : "engine", n_alloc, failures, survived);
    }
    /* a CPU forward over shared weights that are not the CPU head's: refused, nothing made */
    if (h) {
        sd_eagle3_shared fake = {&h->eagle3->w, SPECDEC_BACKEND_CUDA, 1, NULL};
        sd_eagle3_cpu *e = NULL;
        st = sd_eagle3_cpu_create_shared(&fake, &target->w.tok_embd, 8, 4, &e, NULL);
        SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT && !e && fake.refs == 1, "CUDA shared weights to the CPU forward: %s",
                 specdec_status_string(st));
    }
    specdec_model_free(h);
}

/* The shipped head fits the shipped target and drafts finite logits from its embedding. */
static void test_bundled(const char *models) {
    char p[1024];
    specdec_model *t = NULL, *h = NULL;
    snprintf(p, sizeof p, "%s/kjv-target", models);
    specdec_status st = specdec_model_load(p, NULL, &t);
    snprintf(p, sizeof p, "%s/kjv-eagle3", models);
    specdec_status sh = specdec_model_load(p, NULL, &h);
    SD_CHECK(st == SPECDEC_OK && sh == SPECDEC_OK && h && h->eagle3, "bundled pair: %s", specdec_last_error());
    if (t && h && h->eagle3) {
        const sd_eagle3_weights *hw = &h->eagle3->w;
        SD_CHECK(sd_eagle3_check_target(hw, &t->w.cfg, p, NULL) == SPECDEC_OK, "kjv-eagle3 vs kjv-target: %s",
                 specdec_last_error());
        sd_eagle3_cpu *e = NULL;
        static float aux[4 * 768], g[4 * 256], logits[4 * 4096];
        for (int i = 0; i < 4 * 768; i++) aux[i] = (float)((i * 37) % 11 - 5) * 0.3f;
        int32_t tok[4] = {0, 52, 300, 7}, pos[4] = {0, 1, 2, 3};
        /* the head's own embedding when it ships one (it is narrower than the target), as the engine does */
        const sd_tensor *embed = hw->embed.data ? &hw->embed : &t->w.tok_embd;
        int ok = sd_eagle3_cpu_create(hw, embed, 16, 4, &e, NULL) == SPECDEC_OK &&
                 sd_eagle3_cpu_fuse(e, aux, 4, g) == SPECDEC_OK &&
                 sd_eagle3_cpu_step(e, tok, g, pos, 4, NULL, 0, logits, g) == SPECDEC_OK;
        for (int i = 0; ok && i < 4 * hw->cfg.draft_vocab; i++) ok = isfinite(logits[i]);
        SD_CHECK(ok, "kjv-eagle3 forward: %s", e ? sd_eagle3_cpu_last_error(e) : specdec_last_error());
        sd_eagle3_cpu_destroy(e);
    }
    /* a head whose fc does not read 3 x the target's hidden size: MODEL_MISMATCH naming both */
    specdec_model *small = load("target", &st);
    specdec_engine *en = NULL;
    if (small && h) {
        st = specdec_engine_create(small, h, NULL, &en);
        SD_CHECK(st == SPECDEC_ERR_MODEL_MISMATCH && !en && strstr(specdec_last_error(), "768") &&
                     strstr(specdec_last_error(), "192"),
                 "kjv-eagle3 on the 64-wide target: %s (%s)", specdec_status_string(st), specdec_last_error());
    }
    specdec_model_free(small);
    specdec_model_free(h);
    specdec_model_free(t);
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: test_eagle3 FIXTURE_DIR [MODELS_DIR]\n");
        return 2;
    }
    g_dir = argv[1];
    specdec_status st;
    specdec_model *target = load("target", &st);
    SD_CHECK(st == SPECDEC_OK && target && !target->eagle3, "target: %s", specdec_last_error());
    if (!target) return sd_test_done();
    test_good_heads(target);
    test_capture_rules(target);
    test_bad_heads();
    test_engine_heads(target);
    test_capture(target);
    test_step_errors(target);
    test_alloc_failures(target);
    test_alloc_failures_shared(target);
    if (argc == 3) test_bundled(argv[2]);
    specdec_model_free(target);
    return sd_test_done();
}
