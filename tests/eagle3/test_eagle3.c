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

/* ||a - ref|| / ||ref|| over n values */
static double rel_err(const float *a, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

typedef struct script {
    const unsigned char *p, *end;
} script;

static int rd(script *s, void *dst, size_t bytes) {
    if ((size_t)(s->end - s->p) < bytes) return 0;
    memcpy(dst, s->p, bytes);
    s->p += bytes;
    return 1;
}

typedef struct run_state {
    sd_eagle3_cpu *e;
    const sd_eagle3_weights *hw;
    float *all_g;       /* every output row's g_next, in order */
    int32_t n_out;
    double worst_logits, worst_g, worst_q;
} run_state;

/* One op 1/2 record: rows in, compare logits, g_next and q with the reference. */
static int run_rows(run_state *R, script *s, int op, int32_t n, int32_t n_shared, const char *name) {
    const sd_eagle3_weights *hw = R->hw;
    const int32_t H = hw->cfg.layer.hidden_size, Vd = hw->cfg.draft_vocab, V = hw->cfg.layer.vocab_size;
    const int32_t w3 = 3 * hw->cfg.target_hidden;
    int32_t tok[64], pos[64], par[64], src[64];
    if (n < 1 || n > 64 || !rd(s, tok, 4u * n) || !rd(s, pos, 4u * n)) return 0;
    if (n_shared >= 0 && !rd(s, par, 4u * n)) return 0;
    float *g = malloc((size_t)n * H * sizeof(float)), *logits = malloc((size_t)n * Vd * sizeof(float));
    float *q = malloc((size_t)V * sizeof(float)), *aux = malloc((size_t)n * w3 * sizeof(float));
    double *rl = malloc((size_t)n * Vd * 8), *rg = malloc((size_t)n * H * 8), *rq = malloc((size_t)n * V * 8);
    int ok = g && logits && q && aux && rl && rg && rq;
    if (ok && op == 1) {
        ok = rd(s, aux, (size_t)n * w3 * 4) && sd_eagle3_cpu_fuse(R->e, aux, n, g) == SPECDEC_OK;
    } else if (ok) {
        ok = rd(s, src, 4u * n);
        for (int32_t i = 0; ok && i < n; i++)
            if ((ok = src[i] >= 0 && src[i] < R->n_out))
                memcpy(g + (size_t)i * H, R->all_g + (size_t)src[i] * H, (size_t)H * sizeof(float));
    }
    ok = ok && rd(s, rl, (size_t)n * Vd * 8) && rd(s, rg, (size_t)n * H * 8) && rd(s, rq, (size_t)n * V * 8);
    specdec_status st = ok ? sd_eagle3_cpu_step(R->e, tok, g, pos, n, n_shared >= 0 ? par : NULL,
                                                n_shared >= 0 ? n_shared : 0, logits, g)
                           : SPECDEC_ERR_INTERNAL;
    SD_CHECK(st == SPECDEC_OK, "%s: step of %d rows: %s", name, (int)n, sd_eagle3_cpu_last_error(R->e));
    if (st == SPECDEC_OK) {
        double el = rel_err(logits, rl, (size_t)n * Vd), eg = rel_err(g, rg, (size_t)n * H), eq = 0;
        for (int32_t i = 0; i < n; i++) {
            int32_t top = sd_eagle3_q(hw, logits + (size_t)i * Vd, q);
            double e1 = rel_err(q, rq + (size_t)i * V, (size_t)V);
            eq = e1 > eq ? e1 : eq;
            int32_t rtop = 0;
            for (int32_t t = 1; t < V; t++)
                if (rq[(size_t)i * V + t] > rq[(size_t)i * V + rtop]) rtop = t;
            SD_CHECK(top == rtop, "%s: row %d: draft argmax maps to target id %d, reference %d", name, (int)i,
                     (int)top, (int)rtop);
        }
        SD_CHECK(el < REL_TOL && eg < REL_TOL && eq < REL_TOL, "%s: op %d n %d: rel err logits %.3g g %.3g q %.3g",
                 name, op, (int)n, el, eg, eq);
        R->worst_logits = fmax(R->worst_logits, el), R->worst_g = fmax(R->worst_g, eg), R->worst_q = fmax(R->worst_q, eq);
        memcpy(R->all_g + (size_t)R->n_out * H, g, (size_t)n * H * sizeof(float));
        R->n_out += n;
    }
    free(g), free(logits), free(q), free(aux), free(rl), free(rg), free(rq);
    return ok;
}

static void run_script(const char *name, const char *dir, const specdec_model *head, const specdec_model *target) {
    char p[1100];
    snprintf(p, sizeof p, "%s/script.bin", dir);
    FILE *f = fopen(p, "rb");
    SD_CHECK(f != NULL, "%s: no script.bin", name);
    if (!f) return;
    static unsigned char buf[1 << 20];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    const sd_eagle3_weights *hw = &head->eagle3->w;
    const sd_tensor *emb = hw->embed.data ? &hw->embed : &target->w.tok_embd;
    run_state R = {.hw = hw};
    SD_CHECK(sd_eagle3_cpu_create(hw, emb, 64, 16, &R.e, NULL) == SPECDEC_OK, "%s: create: %s", name,
             specdec_last_error());
    R.all_g = malloc((size_t)256 * hw->cfg.layer.hidden_size * sizeof(float));
    script s = {buf, buf + len};
    int32_t hdr[3], n_ops = 0;
    while (R.e && R.all_g && s.p < s.end && rd(&s, hdr, sizeof hdr)) {
        int ok = 1;
        if (hdr[0] == 3) ok = sd_eagle3_cpu_truncate(R.e, hdr[1]) == SPECDEC_OK && sd_eagle3_cpu_n_cached(R.e) == hdr[1];
        else ok = run_rows(&R, &s, hdr[0], hdr[1], hdr[2], name);
        SD_CHECK(ok, "%s: script op %d (kind %d) failed", name, (int)n_ops, (int)hdr[0]);
        if (!ok) break;
        n_ops++;
    }
    SD_CHECK(n_ops == 11, "%s: ran %d script ops, expected 11", name, (int)n_ops);
    printf("%-28s %d ops, %d rows: max rel err logits %.2e, g_next %.2e, q %.2e\n", name, (int)n_ops, (int)R.n_out,
           R.worst_logits, R.worst_g, R.worst_q);
    free(R.all_g);
    sd_eagle3_cpu_destroy(R.e);
}

static void test_good_heads(const specdec_model *target) {
    char mpath[1024], name[128], dir[900];
    snprintf(mpath, sizeof mpath, "%s/manifest.txt", g_dir);
    FILE *mf = fopen(mpath, "r");
    SD_CHECK(mf != NULL, "no manifest %s", mpath);
    int n = 0;
    while (mf && fscanf(mf, "%127s %899s", name, dir) == 2) {
        specdec_model *h = NULL;
        specdec_status st = specdec_model_load(dir, NULL, &h);
        SD_CHECK(st == SPECDEC_OK && h && h->eagle3, "%s: load: %s", name, specdec_last_error());
        if (!h || !h->eagle3) continue;
        specdec_model_info in;
        SD_CHECK(specdec_model_get_info(h, &in) == SPECDEC_OK && in.model_kind == SPECDEC_DRAFT_EAGLE3 &&
                     in.eagle3_target_hidden == 64 && in.vocab_size == 200 && in.n_layers == 1,
                 "%s: info kind %d target hidden %d vocab %d", name, in.model_kind, in.eagle3_target_hidden,
                 in.vocab_size);
        SD_CHECK(sd_eagle3_check_target(&h->eagle3->w, &target->w.cfg, name, NULL) == SPECDEC_OK, "%s: %s", name,
                 specdec_last_error());
        SD_CHECK((h->eagle3->w.cfg.layout == SD_EAGLE3_SPECULATORS) == (strncmp(name, "speculators", 11) == 0),
                 "%s: layout %d", name, (int)h->eagle3->w.cfg.layout);
        run_script(name, dir, h, target);
        specdec_model_free(h);
        n++;
    }
    if (mf) fclose(mf);
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
 * it fits it makes an engine (CPU; the eagle3 drafter); one that does not fit is refused. */
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
    ep.backend = SPECDEC_BACKEND_CUDA;
    st = specdec_engine_create(target, h, &ep, &e);
    SD_CHECK(st != SPECDEC_OK && !e, "head on CUDA is refused: %s", specdec_status_string(st));
    /* the scheduler (batch, serve) does not run heads yet: a named refusal, not a crash */
    ep.backend = SPECDEC_BACKEND_CPU;
    specdec_scheduler *sc = NULL;
    st = specdec_scheduler_create(target, h, &ep, NULL, &sc);
    SD_CHECK(st == SPECDEC_ERR_UNSUPPORTED && !sc && strstr(specdec_last_error(), "EAGLE-3 head"),
             "scheduler with a head: %s (%s)", specdec_status_string(st), specdec_last_error());
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
    sd_runner_seg s0 = {a, tok, 6, 0, NULL, 0, L0, NULL};
    SD_CHECK(sd_runner_forward_batch(&s0, 1, &eb) == SPECDEC_OK, "plain pass: %s", eb.msg);
    s0.aux = A;
    SD_CHECK(sd_runner_forward_batch(&s0, 1, &eb) == SPECDEC_ERR_UNSUPPORTED, "aux without capture is refused");
    const int32_t bad1[2] = {3, 2}, bad2[1] = {9}, ids[3] = {0, 3, 8};
    SD_CHECK(sd_runner_group_set_capture(g, bad1, 2, &eb) == SPECDEC_ERR_INVALID_ARGUMENT, "decreasing ids");
    SD_CHECK(sd_runner_group_set_capture(g, bad2, 1, &eb) == SPECDEC_ERR_INVALID_ARGUMENT && strstr(eb.msg, "9"),
             "id past L: %s", eb.msg);
    SD_CHECK(sd_runner_group_set_capture(g, ids, 3, &eb) == SPECDEC_OK, "capture: %s", eb.msg);
    const sd_runner_seg sa = {a, tok, 6, 0, NULL, 0, LA, A};
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
    const sd_runner_seg pre = {b, tok, 4, 0, NULL, 0, NULL, NULL};
    SD_CHECK(sd_runner_forward_batch(&pre, 1, &eb) == SPECDEC_OK, "prefill: %s", eb.msg);
    const int32_t ttok[3] = {tok[4], tok[5], 11}, par[3] = {-1, 0, 0};
    const sd_runner_seg st = {b, ttok, 3, 4, par, 0, LB, B};
    SD_CHECK(sd_runner_forward_batch(&st, 1, &eb) == SPECDEC_OK, "tree: %s", eb.msg);
    SD_CHECK(!memcmp(B, A + 4 * W, sizeof(float) * 2 * (size_t)W) && !memcmp(LB, LA + 4 * V, sizeof(float) * 2 * (size_t)V),
             "tree rows equal the chain's");
    /* a batched pass of two sequences (prefill chunks alike) */
    const sd_runner_seg two[2] = {{d, tok, 6, 0, NULL, 0, NULL, C}, {a, tok + 2, 2, 2, NULL, 0, NULL, D}};
    SD_CHECK(sd_runner_forward_batch(two, 2, &eb) == SPECDEC_OK, "batched: %s", eb.msg);
    SD_CHECK(!memcmp(C, A, sizeof(float) * 6 * (size_t)W) && !memcmp(D, A + 2 * W, sizeof(float) * 2 * (size_t)W),
             "batched rows equal the chain's");
    /* runners of two groups in one call (emulated segment by segment): each captures through its own */
    sd_runner *solo = NULL;
    static float SE[6 * 192], SF[2 * 192];
    SD_CHECK(sd_cpu_runner_create(&target->w, 32, 16, &solo, NULL) == SPECDEC_OK &&
                 sd_runner_group_set_capture(solo->group, ids, 3, &eb) == SPECDEC_OK,
             "standalone runner");
    const sd_runner_seg mix[2] = {{solo, tok, 6, 0, NULL, 0, NULL, SE}, {a, tok, 2, 0, NULL, 0, NULL, SF}};
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

/* Every allocation of the loader and of the forward's creation may fail: a status, no leak. */
static void test_alloc_failures(const specdec_model *target) {
    char p[1024];
    snprintf(p, sizeof p, "%s/flat_bf16_embed_bias", g_dir);
    int failures = 0;
    for (long k = 0; k < 400; k++) {
        specdec_model *m = NULL;
        sd_alloc_fail_after(k);
        specdec_status st = specdec_model_load(p, NULL, &m);
        sd_eagle3_cpu *e = NULL;
        specdec_status st2 = m ? sd_eagle3_cpu_create(&m->eagle3->w, &target->w.tok_embd, 8, 4, &e, NULL) : st;
        sd_alloc_fail_after(-1);
        if (st == SPECDEC_OK && st2 == SPECDEC_OK) {
            sd_eagle3_cpu_destroy(e);
            specdec_model_free(m);
            break;
        }
        failures++;
        SD_CHECK((st == SPECDEC_ERR_OUT_OF_MEMORY || st2 == SPECDEC_ERR_OUT_OF_MEMORY) && !e,
                 "allocation %ld failing gave %s / %s", k, specdec_status_string(st), specdec_status_string(st2));
        specdec_model_free(m);
    }
    SD_CHECK(failures > 10, "only %d allocation points", failures);
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
    if (argc == 3) test_bundled(argv[2]);
    specdec_model_free(target);
    return sd_test_done();
}
