/* test_mtp.c — MTP drafting (GLM-4.5 / DeepSeek-V3 checkpoints' num_nextn_predict_layers layer,
 * backends/cpu/sd_mtp_cpu.h, the "mtp" drafter) on the fixtures glm4_moe and deepseek_v3, whose
 * MTP layer and reference were written by tools/gen_model_fixtures.py (add_mtp_layer: vLLM's
 * DeepSeekMultiTokenPredictorLayer semantics computed with transformers' own decoder layer).
 *
 * Claims:
 * The same claims hold for gguf_glm4_moe (tools/gen_gguf_twin_fixtures.py): glm4_moe converted as llama.cpp
 * does, its MTP block blk.3 quantized (its layer and nextn.*), the reference computed by the same code on
 * the weights gguf-py decodes from the file.
 *
 *   1. Loading with specdec_model_params.mtp gives a one-layer model of kind SPECDEC_DRAFT_MTP; a
 *      checkpoint without an MTP layer (glm4_moe_flat; a GGUF without one: gguf_qwen3_moe) is refused with
 *      MODEL_MISMATCH; the MTP
 *      model is refused as a target, and its runner refuses forward() (rows need hidden states).
 *   2. The head runner over the target's captured post-norm states reproduces the reference
 *      logits of rows 0..T-2 (token t_{p+1}, target hidden h_p, position p; embedding zeroed at
 *      position 0) and of a chained draft step (the previous row's pre-norm MTP output as the
 *      hidden): max |diff| <= 1e-4, argmax equal on every row.
 *   3. A tree row over the verified prefix (the inner runner's tree) gives bitwise the chained
 *      step's logits, and a sibling beside it does not disturb it. The layer runs on the target
 *      runner's thread pool (2 threads here: the same results), starting none of its own.
 *   4. Through the public API, an engine and a scheduler drafting with the MTP layer
 *      (draft_method MTP, and AUTO, which picks it) produce exactly plain decoding's tokens in
 *      GREEDY and MATCH (temperature 0.9, top-p 0.95) over 3 seeds x 40 tokens, chains of 3 and a
 *      tree; the layer drafts (few drafts are accepted: the fixture's weights are random, so
 *      acceptance is not claimed), statistics report draft_method MTP; asking for EAGLE3 or MODEL
 *      with an MTP draft is refused. A checkpoint whose config.json announces an MTP layer it does
 *      not ship (glm4_moe_flat: transformers writes num_nextn_predict_layers 1 but no layer) is
 *      refused naming the missing tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_cpu_runner.h"
#include "sd_eagle3.h"
#include "sd_model.h"
#include "sd_mtp_cpu.h"
#include "sd_runner.h"
#include "sd_test.h"
#include "specdec.h"

#define T 24
#define V 80
#define N_OUT 40

/* Fixture `name`: its model.gguf when it has one (gguf_glm4_moe), else its directory. */
static specdec_model *load(const char *dir, const char *name, int mtp) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s/model.gguf", dir, name);
    FILE *gguf = fopen(p, "rb");
    if (gguf) fclose(gguf);
    else snprintf(p, sizeof p, "%s/%s", dir, name);
    specdec_model_params mp = specdec_model_default_params();
    mp.mtp = mtp;
    specdec_model *m = NULL;
    SD_CHECK(specdec_model_load(p, &mp, &m) == SPECDEC_OK, "load %s (mtp %d): %s", p, mtp, specdec_last_error());
    return m;
}

static int read_file(const char *dir, const char *name, const char *file, void *buf, size_t bytes, int text) {
    char p[4300];
    snprintf(p, sizeof p, "%s/%s/%s", dir, name, file);
    FILE *f = fopen(p, text ? "r" : "rb");
    if (!f) return 0;
    size_t got = text ? (size_t)(fgets(buf, (int)bytes, f) != NULL) : fread(buf, 1, bytes, f);
    fclose(f);
    return text ? got == 1 : got == bytes;
}

static int argmax(const float *x) {
    int b = 0;
    for (int i = 1; i < V; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static double row_diff(const float *a, const float *b) {
    double w = 0;
    for (int i = 0; i < V; i++) w = fmax(w, fabs((double)a[i] - (double)b[i]));
    return w;
}

/* Claims 1-3 on one fixture. */
static void reference(const char *dir, const char *name) {
    specdec_model *t = load(dir, name, 0), *m = load(dir, name, 1);
    static float ref[T * V], lg[T * V], g[T * 32], gn[T * 32];
    int32_t ids[T], step_tok = -1;
    char line[1024];
    SD_CHECK(read_file(dir, name, "mtp_logits.f32", ref, sizeof ref, 0), "%s: mtp_logits.f32", name);
    SD_CHECK(read_file(dir, name, "mtp.txt", line, sizeof line, 1) && sscanf(line, "%d", &step_tok) == 1,
             "%s: mtp.txt", name);
    SD_CHECK(read_file(dir, name, "ids.txt", line, sizeof line, 1), "%s: ids.txt", name);
    char *s = line;
    for (int i = 0; i < T; i++) ids[i] = (int32_t)strtol(s, &s, 10);
    sd_runner *tr = NULL, *hr = NULL;
    if (!t || !m) goto out;
    specdec_model_info info;
    SD_CHECK(specdec_model_get_info(m, &info) == SPECDEC_OK && info.model_kind == SPECDEC_DRAFT_MTP &&
                 info.n_layers == 1 && info.hidden_size == 32 && info.vocab_size == V,
             "%s: MTP model info (kind %d, %d layers)", name, info.model_kind, info.n_layers);
    sd_errbuf eb;
    sd_err_clear(&eb);
    SD_CHECK(sd_cpu_runner_create(&t->w, T + 8, T, &tr, &eb) == SPECDEC_OK, "%s: target runner: %s", name, eb.msg);
    if (tr) sd_cpu_group_set_threads(sd_cpu_runner_group(tr), 2); /* the layer runs on these threads too */
    SD_CHECK(tr && sd_mtp_cpu_runner_create(&m->w, tr, &t->w.cfg, T + 8, 64, &hr, &eb) == SPECDEC_OK,
             "%s: MTP head: %s", name, eb.msg);
    if (!tr || !hr) goto out;
    SD_CHECK(sd_mtp_cpu_inner(hr) && sd_cpu_runner_pool(sd_mtp_cpu_inner(hr)) == sd_cpu_runner_pool(tr) &&
                 sd_cpu_runner_pool(tr) != NULL,
             "%s: the MTP layer runs on the target's pool", name);
    sd_eagle3_runner *h = sd_eagle3_runner_of(hr);
    SD_CHECK(h && h->mtp && h->hid == 32 && h->aux_w == 32 && h->vd == V, "%s: head fields", name);
    /* forward() of the layer's runner alone is refused */
    sd_runner *inner = sd_mtp_cpu_inner(hr);
    SD_CHECK(inner && sd_runner_forward(inner, ids, 1, 0, NULL) == SPECDEC_ERR_UNSUPPORTED &&
                 strstr(inner->err.msg, "hidden states"),
             "%s: forward() on the MTP runner must be refused: %s", name, inner ? inner->err.msg : "-");
    /* the target's pass captures its post-norm states */
    const sd_runner_seg seg = {tr, ids, T, 0, NULL, 0, NULL, h->aux, NULL};
    SD_CHECK(sd_runner_forward_batch(&seg, 1, &eb) == SPECDEC_OK, "%s: target pass: %s", name, eb.msg);
    SD_CHECK(h->ops->fuse(h, h->aux, T - 1, g) == SPECDEC_OK, "%s: fuse", name);
    int32_t pos[T], tok[T];
    for (int i = 0; i < T - 1; i++) pos[i] = i, tok[i] = ids[i + 1];
    SD_CHECK(h->ops->step(h, tok, g, pos, T - 1, NULL, 0, lg, gn) == SPECDEC_OK, "%s: chain: %s", name,
             hr->err.msg);
    double worst = 0;
    for (int p = 0; p < T - 1; p++) {
        const double d = row_diff(lg + p * V, ref + p * V);
        worst = fmax(worst, d);
        SD_CHECK(d <= 1e-4 && argmax(lg + p * V) == argmax(ref + p * V), "%s: MTP row %d: |diff| %.3g, argmax %d vs %d",
                 name, p, d, argmax(lg + p * V), argmax(ref + p * V));
    }
    /* a chained draft step: (the reference's token, the last row's MTP output, position T - 1) */
    float chain[V], tree[2 * V], gstep[32];
    memcpy(gstep, gn + (T - 2) * 32, sizeof gstep);
    pos[0] = T - 1;
    SD_CHECK(h->ops->step(h, &step_tok, gstep, pos, 1, NULL, 0, chain, NULL) == SPECDEC_OK, "%s: step: %s", name,
             hr->err.msg);
    const double d = row_diff(chain, ref + (T - 1) * V);
    worst = fmax(worst, d);
    SD_CHECK(d <= 1e-4 && argmax(chain) == argmax(ref + (T - 1) * V), "%s: chained step: |diff| %.3g", name, d);
    /* the same row as a tree node over the T - 1 verified rows, beside a sibling */
    sd_runner_truncate(hr, T - 1);
    const int32_t tt[2] = {(step_tok + 7) % V, step_tok}, tp[2] = {T - 1, T - 1}, par[2] = {-1, -1};
    float g2[64];
    memcpy(g2, gstep, sizeof gstep);
    memcpy(g2 + 32, gstep, sizeof gstep);
    SD_CHECK(h->ops->step(h, tt, g2, tp, 2, par, T - 1, tree, NULL) == SPECDEC_OK, "%s: tree: %s", name, hr->err.msg);
    SD_CHECK(memcmp(tree + V, chain, sizeof chain) == 0, "%s: the tree node's logits differ from the chained step's",
             name);
    /* a second level under node 1 (cache row T): position T, parent row T */
    const int32_t t3 = argmax(chain), p3 = T, par3 = T;
    SD_CHECK(h->ops->step(h, &t3, gn, &p3, 1, &par3, T - 1, tree, NULL) == SPECDEC_OK && hr->kv_len == T + 2,
             "%s: tree level 2: %s", name, hr->err.msg);
    const int32_t bad_pos = T + 1;
    SD_CHECK(h->ops->step(h, &t3, gn, &bad_pos, 1, &par3, T - 1, tree, NULL) == SPECDEC_ERR_INVALID_ARGUMENT,
             "%s: a tree row at the wrong position must be refused", name);
    printf("%-12s MTP layer vs reference: %d rows + a chained step, max |diff| %.2e; tree node bitwise\n", name, T - 1,
           worst);
out:
    sd_runner_destroy(hr);
    sd_runner_destroy(tr);
    specdec_model_free(m);
    specdec_model_free(t);
}

static int32_t gen(specdec_engine *e, const specdec_generate_params *gp, int32_t *out, specdec_stats *st) {
    static const int32_t prompt[6] = {1, 17, 42, 5, 63, 9};
    int32_t n = 0;
    const specdec_status s = specdec_generate(e, prompt, 6, gp, out, N_OUT, &n, st);
    SD_CHECK(s == SPECDEC_OK, "generate: %s", specdec_engine_last_error(e));
    return s == SPECDEC_OK ? n : -1;
}

/* Claim 4 through an engine. */
static void engine_exact(const char *dir, const char *name) {
    specdec_model *t = load(dir, name, 0), *m = load(dir, name, 1);
    specdec_engine *plain = NULL, *spec = NULL, *bad = NULL;
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = 64;
    if (!t || !m) goto out;
    SD_CHECK(specdec_engine_create(m, NULL, &ep, &bad) == SPECDEC_ERR_MODEL_MISMATCH && !bad &&
                 strstr(specdec_last_error(), "MTP layer"),
             "%s: the MTP model as a target must be refused: %s", name, specdec_last_error());
    SD_CHECK(specdec_engine_create(t, NULL, &ep, &plain) == SPECDEC_OK, "engine: %s", specdec_last_error());
    SD_CHECK(specdec_engine_create(t, m, &ep, &spec) == SPECDEC_OK, "engine with MTP: %s", specdec_last_error());
    if (!plain || !spec) goto out;
    int64_t accepted = 0, drafted = 0;
    for (int mode = 0; mode < 2; mode++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            specdec_generate_params gp = specdec_generate_default_params();
            gp.n_predict = N_OUT;
            gp.ignore_eos = 1;
            gp.seed = seed;
            gp.temperature = mode ? 0.9f : 0.0f;
            gp.top_p = mode ? 0.95f : 1.0f;
            gp.verify = mode ? SPECDEC_VERIFY_MATCH : SPECDEC_VERIFY_GREEDY;
            int32_t ref[N_OUT], got[N_OUT];
            gp.draft_method = SPECDEC_DRAFT_NONE;
            const int32_t nr = gen(plain, &gp, ref, NULL);
            gp.draft_method = seed == 2 ? SPECDEC_DRAFT_AUTO : SPECDEC_DRAFT_MTP;
            gp.n_draft = 3;
            if (seed == 3) specdec_generate_params_set_tree(&gp, (const int32_t[]){2, 2, 1}, 3);
            specdec_stats st;
            memset(&st, 0, sizeof st);
            const int32_t ng = gen(spec, &gp, got, &st);
            SD_CHECK(nr == N_OUT && ng == nr && memcmp(ref, got, sizeof ref) == 0,
                     "%s MTP, %s seed %llu%s: speculative output differs from plain decoding", name,
                     mode ? "match" : "greedy", (unsigned long long)seed, seed == 3 ? " (tree)" : "");
            SD_CHECK(st.draft_method == SPECDEC_DRAFT_MTP, "%s: stats draft_method %d, want MTP (%d)", name,
                     (int)st.draft_method, (int)SPECDEC_DRAFT_MTP);
            accepted += st.n_accepted;
            drafted += st.n_drafted;
        }
    SD_CHECK(drafted > 0, "%s: the MTP layer never drafted", name);
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = 4;
    int32_t out[N_OUT], n = 0;
    gp.draft_method = SPECDEC_DRAFT_EAGLE3;
    SD_CHECK(specdec_generate(spec, (const int32_t[]){1, 5}, 2, &gp, out, N_OUT, &n, NULL) ==
                     SPECDEC_ERR_INVALID_ARGUMENT &&
                 strstr(specdec_engine_last_error(spec), "MTP"),
             "%s: draft_method EAGLE3 with an MTP draft must be refused: %s", name, specdec_engine_last_error(spec));
    gp.draft_method = SPECDEC_DRAFT_MODEL;
    SD_CHECK(specdec_generate(spec, (const int32_t[]){1, 5}, 2, &gp, out, N_OUT, &n, NULL) ==
                 SPECDEC_ERR_INVALID_ARGUMENT,
             "%s: draft_method MODEL with an MTP draft must be refused", name);
    SD_CHECK(!strcmp(specdec_draft_method_name(SPECDEC_DRAFT_MTP), "mtp"), "method name");
    printf("%-12s engine with its MTP layer: greedy and match == plain (%lld of %lld drafts accepted)\n", name,
           (long long)accepted, (long long)drafted);
out:
    specdec_engine_free(spec);
    specdec_engine_free(plain);
    specdec_model_free(m);
    specdec_model_free(t);
}

/* Claim 4 through a scheduler (3 slots, each with its own MTP runner, 3 requests at once, greedy). */
static void sched_exact(const char *dir, const char *name) {
    specdec_model *t = load(dir, name, 0), *m = load(dir, name, 1);
    specdec_engine *plain = NULL;
    specdec_scheduler *s = NULL;
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = 64;
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = 3;
    if (!t || !m) goto out;
    SD_CHECK(specdec_engine_create(t, NULL, &ep, &plain) == SPECDEC_OK, "engine: %s", specdec_last_error());
    SD_CHECK(specdec_scheduler_create(t, m, &ep, &sp, &s) == SPECDEC_OK, "scheduler with MTP: %s",
             specdec_last_error());
    if (!plain || !s) goto out;
    static const int32_t prompts[3][4] = {{1, 17, 42, 5}, {1, 3, 9, 27}, {1, 60, 61, 62}};
    specdec_request_id ids[3] = {0};
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = N_OUT;
    gp.ignore_eos = 1;
    gp.n_draft = 3;
    gp.temperature = 0.0f;
    gp.verify = SPECDEC_VERIFY_GREEDY;
    gp.draft_method = SPECDEC_DRAFT_MTP;
    for (int i = 0; i < 3; i++)
        SD_CHECK(specdec_scheduler_submit(s, prompts[i], 4, &gp, &ids[i]) == SPECDEC_OK, "submit: %s",
                 specdec_last_error());
    for (int i = 0; i < 3; i++) {
        int32_t got[N_OUT], ref[N_OUT], n = 0, nr = 0;
        specdec_status rs = SPECDEC_OK;
        specdec_stats st;
        SD_CHECK(specdec_scheduler_wait(s, ids[i], -1, got, N_OUT, &n, &st, &rs) == SPECDEC_OK && rs == SPECDEC_OK,
                 "wait: %s", specdec_last_error());
        specdec_generate_params pp = gp;
        pp.draft_method = SPECDEC_DRAFT_NONE;
        SD_CHECK(specdec_generate(plain, prompts[i], 4, &pp, ref, N_OUT, &nr, NULL) == SPECDEC_OK, "plain: %s",
                 specdec_engine_last_error(plain));
        SD_CHECK(n == N_OUT && nr == N_OUT && !memcmp(got, ref, sizeof ref) && st.draft_method == SPECDEC_DRAFT_MTP,
                 "%s scheduler request %d: MTP output differs from plain greedy decoding (%d / %d tokens, method %d)",
                 name, i, (int)n, (int)nr, (int)st.draft_method);
    }
    printf("%-12s scheduler (3 slots) with its MTP layer: 3 concurrent greedy requests == plain\n", name);
out:
    specdec_scheduler_free(s);
    specdec_engine_free(plain);
    specdec_model_free(m);
    specdec_model_free(t);
}

/* Every allocation of an MTP load, and of an engine's and a scheduler's creation with it, may
 * fail: OUT_OF_MEMORY and nothing made (ASan: no leak), never a crash. */
static void alloc_failures(const char *dir) {
    char p[4200];
    snprintf(p, sizeof p, "%s/deepseek_v3", dir);
    specdec_model_params mp = specdec_model_default_params();
    mp.mtp = 1;
    specdec_model *t = load(dir, "deepseek_v3", 0);
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = 32;
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = 2;
    for (int what = 0; t && what < 3; what++) {
        long n_alloc = 0, failures = 0;
        for (long k = -1; k < n_alloc; k++) {
            specdec_model *m = NULL;
            specdec_engine *e = NULL;
            specdec_scheduler *s = NULL;
            if (what == 0) sd_alloc_fail_after(k);
            specdec_status st = specdec_model_load(p, &mp, &m);
            if (what > 0 && st == SPECDEC_OK) {
                sd_alloc_fail_after(k);
                st = what == 1 ? specdec_engine_create(t, m, &ep, &e) : specdec_scheduler_create(t, m, &ep, &sp, &s);
            }
            if (k < 0) n_alloc = sd_alloc_count();
            sd_alloc_fail_after(-1);
            SD_CHECK(k < 0 ? st == SPECDEC_OK : st == SPECDEC_ERR_OUT_OF_MEMORY || st == SPECDEC_OK,
                     "MTP %s, allocation %ld failing: %s", what == 0 ? "load" : what == 1 ? "engine" : "scheduler", k,
                     specdec_last_error());
            failures += k >= 0 && st != SPECDEC_OK;
            specdec_scheduler_free(s);
            specdec_engine_free(e);
            specdec_model_free(m);
        }
        SD_CHECK(failures > 5, "MTP %d: only %ld of %ld allocation failures reported", what, failures, n_alloc);
        printf("MTP %-9s: %ld allocation points, each failed once: %ld OUT_OF_MEMORY\n",
               what == 0 ? "load" : what == 1 ? "engine" : "scheduler", n_alloc, failures);
    }
    specdec_model_free(t);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s FIXTURE_DIR\n", argv[0]);
        return 2;
    }
    reference(argv[1], "glm4_moe");
    reference(argv[1], "deepseek_v3");
    reference(argv[1], "gguf_glm4_moe");
    engine_exact(argv[1], "glm4_moe");
    engine_exact(argv[1], "deepseek_v3");
    engine_exact(argv[1], "gguf_glm4_moe");
    sched_exact(argv[1], "glm4_moe");
    sched_exact(argv[1], "deepseek_v3");
    sched_exact(argv[1], "gguf_glm4_moe");
    alloc_failures(argv[1]);
    specdec_model_params mp = specdec_model_default_params();
    mp.mtp = 1;
    char p[4200];
    snprintf(p, sizeof p, "%s/glm4_moe_flat", argv[1]);
    specdec_model *m = NULL;
    SD_CHECK(specdec_model_load(p, &mp, &m) == SPECDEC_ERR_MODEL_MISMATCH && !m &&
                 strstr(specdec_last_error(), "no MTP layer") && strstr(specdec_last_error(), "model.layers.2.eh_proj"),
             "a checkpoint without an MTP layer must be refused: %s", specdec_last_error());
    snprintf(p, sizeof p, "%s/gguf_qwen3_moe/model.gguf", argv[1]); /* a GGUF without nextn_predict_layers */
    SD_CHECK(specdec_model_load(p, &mp, &m) == SPECDEC_ERR_MODEL_MISMATCH && !m &&
                 strstr(specdec_last_error(), "no MTP block"),
             "a GGUF without an MTP block must be refused: %s", specdec_last_error());
    return sd_test_done();
}
