/* test_cuda_round.c — the device-resident speculative round (backends/cuda/sd_cuda_round.cu)
 * through specdec_generate on a CUDA engine. argv: the random-checkpoint directory of
 * tests/reference/make_checkpoint.py, the bundled target and draft directories.
 *
 * Pairs: every random checkpoint as target with (a) itself as draft and (b) a synthetic
 * random-weight draft of the same vocabulary (sd_cuda_runner_create_synthetic: low
 * acceptance, many rejections); the bundled KJV pair (distilled draft).
 * Exactness checks, all bitwise on token ids (prompt: 5 seeded ids, 40 new tokens):
 *  - greedy: speculative output for γ = 1..8 == plain greedy output (n_draft 0) on the
 *    GPU; the device round's plain greedy == the host-rows loop's plain greedy (same
 *    GPU logits, CPU argmax);
 *  - match (T = 0.9, top-p 0.95, seed 1234): speculative γ = 1..8 and adaptive γ ==
 *    plain sampling with the same seed on the GPU;
 *  - graph replay == direct launches (round kinds DEVICE vs DEVICE_GRAPH) in rejection and
 *    match mode for γ = 1..8 with the same seed;
 *  - n-gram drafts on the device executor (deterministic flag, γ = 1..8, a repeating
 *    prompt): greedy and match == plain, every mode graph == direct;
 *  - EOS handling (bundled pair, ignore_eos 0): speculative and plain stop identically.
 *  - log-probabilities (bundled pair, docs/LOGPROBS.md): a generation with logprobs = 1 runs
 *    on the host executor over the same CUDA runners (the device executor hands it over),
 *    emits the tokens the device executor emits without logprobs (plain, γ = 4 chain,
 *    2,2,1 tree, greedy; a match chain), one record per token, and each logprob is within
 *    TOL_LP_GPU of the log_softmax (in double) of (a) the CUDA target's own logits of the
 *    sequence (one forward) and (b) the CPU engine's. TOL_LP_GPU: |Δ log_softmax| <=
 *    2 max|Δ logits|, and cuda_runner's row tolerance for an F16 checkpoint is 1e-2 of the
 *    row's largest |logit|, so the bound is 2e-2 * max|logit| of the row. The same request
 *    through a CUDA scheduler (its batched device executor "cuda-batch", beside a request
 *    without logprobs in the same rounds) gives the engine's tokens and records within the
 *    same bound. Prompt log-probabilities (prompt_logprobs, 40 prompt tokens: two prefill
 *    chunks): the generation stays on the device executor, emits the tokens it emits
 *    without them, and each of the 39 prompt records is within the same bound of both
 *    references (rows 0..38).
 * Statistics (bundled pair, rejection mode, γ = 3, T = 1, top-k 16): hypothesis H0 =
 * the first generated token is distributed as the target's processed distribution p
 * for the prompt (p from the engine's host forward and sd_sampling_process). 20000
 * generations with seeds 0..19999, Pearson chi-square with pooling of bins of
 * expectation < 5, reject at α = 1e-6. A verifier that ignored rejections (emitting
 * the draft's token) or sampled the residual wrongly moves the distribution toward q.
 * Skips without a device. */
#include "sd_test.h"
#include "specdec.h"

#ifndef SPECDEC_WITH_CUDA
int main(void) { return sd_test_skip("no CUDA device"); }
#else

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../verify/vstats.h"
#include "sd_cuda_round.h"
#include "sd_cuda_backend.h"
#include "sd_cuda_runner.h"
#include "sd_engine.h"
#include "sd_model.h"
#include "sd_runner.h"
#include "sd_cpu_sample.h"
#include "sd_test_util.h"
#include "../logprobs/lp_common.h"

#define N_PROMPT 5
#define N_GEN 40
#define MAX_G_FULL 8

/* SD_CUDA_TEST_QUICK (compute-sanitizer runs): 2 random cases, γ 1..3, 2000 samples;
 * SD_CUDA_TEST_QUICK=2 (racecheck / initcheck, the slowest tools): 1 case, 200 samples. */
static int g_quick;
#define MAX_G (g_quick ? 3 : MAX_G_FULL)

static const char *k_cases[] = {"llama_gqa_f32",          "llama_mqa_tied_f16",      "mistral_mha_bf16_sharded",
                                "qwen2_bias_f32",         "llama3_rope_headdim_f16", "qwen2_odd_bf16",
                                "llama_attn_bias_bf16",   "llama_misaligned_f32"};

static specdec_generate_params gen_params(specdec_verify_mode mode, int32_t n_draft, uint64_t seed) {
    specdec_generate_params p = specdec_generate_default_params();
    p.n_predict = N_GEN;
    p.verify = mode;
    p.n_draft = n_draft;
    p.seed = seed;
    p.ignore_eos = 1;
    if (mode == SPECDEC_VERIFY_GREEDY) {
        p.temperature = 0.0f;
    } else {
        p.temperature = 0.9f;
        p.top_k = 0;
        p.top_p = 0.95f;
        p.min_p = 0.0f;
    }
    return p;
}

/* Generate with cuda_path `path`; returns the number of tokens, -1 on error. */
static int run(specdec_engine *e, int path, const int32_t *prompt, const specdec_generate_params *p, int32_t *out,
               specdec_stats *stats) {
    e->round_kind = (sd_engine_round_kind)path;
    int32_t n = 0;
    specdec_stats local;
    specdec_status st = specdec_generate(e, prompt, N_PROMPT, p, out, N_GEN, &n, stats ? stats : &local);
    SD_CHECK(st == SPECDEC_OK, "generate (path %d, mode %d, gamma %d): %s", path, (int)p->verify, (int)p->n_draft,
             specdec_engine_last_error(e));
    return st == SPECDEC_OK ? n : -1;
}

static int same(const int32_t *a, int na, const int32_t *b, int nb) {
    return na == nb && na >= 0 && memcmp(a, b, (size_t)na * sizeof(int32_t)) == 0;
}

static void first_diff(const char *what, const int32_t *a, int na, const int32_t *b, int nb) {
    int i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    fprintf(stderr, "  %s: lengths %d/%d, first difference at %d (%d vs %d)\n", what, na, nb, i,
            i < na ? (int)a[i] : -1, i < nb ? (int)b[i] : -1);
}

/* The exactness checks of one engine (see the top of the file). */
static void check_engine(const char *name, specdec_engine *e, uint64_t prompt_seed) {
    const int V = e->n_vocab;
    SD_CHECK(e->device_exec != NULL, "%s: CUDA engine without a device executor", name);
    if (!e->device_exec) return;
    int32_t prompt[N_PROMPT];
    uint64_t s = prompt_seed;
    for (int i = 0; i < N_PROMPT; i++) prompt[i] = (int32_t)(sd_test_splitmix64(&s) % (uint64_t)V);
    int32_t ref[N_GEN], got[N_GEN], alt[N_GEN];
    specdec_stats st;

    /* greedy */
    specdec_generate_params p = gen_params(SPECDEC_VERIFY_GREEDY, 0, 0);
    int nr = run(e, SD_ENGINE_ROUND_DEVICE_GRAPH, prompt, &p, ref, NULL);
    int nh = run(e, SD_ENGINE_ROUND_HOST, prompt, &p, alt, NULL);
    SD_CHECK(same(ref, nr, alt, nh), "%s greedy: device plain != host-rows plain", name);
    if (!same(ref, nr, alt, nh)) first_diff("greedy device vs host", ref, nr, alt, nh);
    int acc_total = 0, drafted = 0;
    for (int g = 1; g <= MAX_G; g++) {
        p = gen_params(SPECDEC_VERIFY_GREEDY, g, 0);
        int n = run(e, SD_ENGINE_ROUND_DEVICE_GRAPH, prompt, &p, got, &st);
        SD_CHECK(same(ref, nr, got, n), "%s greedy gamma %d: speculative != plain", name, g);
        if (!same(ref, nr, got, n)) first_diff("greedy", ref, nr, got, n);
        acc_total += (int)st.n_accepted;
        drafted += (int)st.n_drafted;
    }
    printf("%-40s greedy  gamma 1..%d == plain (%d tokens), acceptance %.3f\n", name, MAX_G, nr,
           drafted ? (double)acc_total / drafted : 0.0);

    /* match: == plain sampling with the same seed */
    p = gen_params(SPECDEC_VERIFY_MATCH, 0, 1234);
    nr = run(e, SD_ENGINE_ROUND_DEVICE_GRAPH, prompt, &p, ref, NULL);
    acc_total = drafted = 0;
    for (int g = 1; g <= MAX_G + 1; g++) {
        p = gen_params(SPECDEC_VERIFY_MATCH, g <= MAX_G ? g : 4, 1234);
        p.adaptive_draft = g > MAX_G; /* the last pass: adaptive γ starting at 4 */
        int n = run(e, SD_ENGINE_ROUND_DEVICE_GRAPH, prompt, &p, got, &st);
        SD_CHECK(same(ref, nr, got, n), "%s match gamma %d%s: speculative != plain", name, g > MAX_G ? 4 : g,
                 g > MAX_G ? " (adaptive)" : "");
        if (!same(ref, nr, got, n)) first_diff("match", ref, nr, got, n);
        acc_total += (int)st.n_accepted;
        drafted += (int)st.n_drafted;
    }
    printf("%-40s match   gamma 1..%d + adaptive == plain, acceptance %.3f\n", name, MAX_G,
           drafted ? (double)acc_total / drafted : 0.0);

    /* n-gram drafts (deterministic q, the verifier's flag, proposals from pinned memory):
     * greedy and match == plain; rejection: graph replay == direct launches. The prompt
     * repeats itself so that lookups match. */
    int32_t rep_prompt[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) rep_prompt[i] = prompt[i % 2];
    for (int m = 0; m < 3; m++) {
        const specdec_verify_mode mode = m == 0 ? SPECDEC_VERIFY_GREEDY : m == 1 ? SPECDEC_VERIFY_MATCH : SPECDEC_VERIFY_REJECTION;
        p = gen_params(mode, 0, 4321);
        nr = run(e, SD_ENGINE_ROUND_DEVICE_GRAPH, rep_prompt, &p, ref, NULL);
        for (int g = 1; g <= MAX_G; g++) {
            p = gen_params(mode, g, 4321);
            p.draft_method = SPECDEC_DRAFT_NGRAM;
            p.ngram_cost = SPECDEC_NGRAM_COST_OFF; /* every match: MEASURED's proposals follow the timings */
            const int n = run(e, SD_ENGINE_ROUND_DEVICE_GRAPH, rep_prompt, &p, got, &st);
            const int nb = run(e, SD_ENGINE_ROUND_DEVICE, rep_prompt, &p, alt, NULL);
            SD_CHECK(same(got, n, alt, nb), "%s ngram mode %d gamma %d: graph != direct", name, (int)mode, g);
            SD_CHECK(st.draft_method == SPECDEC_DRAFT_NGRAM, "%s ngram: stats name drafter %d", name, (int)st.draft_method);
            if (mode != SPECDEC_VERIFY_REJECTION) {
                SD_CHECK(same(ref, nr, got, n), "%s ngram mode %d gamma %d: speculative != plain", name, (int)mode, g);
                if (!same(ref, nr, got, n)) first_diff("ngram", ref, nr, got, n);
            }
        }
    }
    printf("%-40s ngram   gamma 1..%d: greedy, match == plain; graph == direct\n", name, MAX_G);

    /* graph replay == direct launches */
    for (int m = 0; m < 2; m++) {
        specdec_verify_mode mode = m ? SPECDEC_VERIFY_MATCH : SPECDEC_VERIFY_REJECTION;
        for (int g = 1; g <= MAX_G; g++) {
            p = gen_params(mode, g, 77 + (uint64_t)g);
            int na = run(e, SD_ENGINE_ROUND_DEVICE_GRAPH, prompt, &p, got, NULL);
            int nb = run(e, SD_ENGINE_ROUND_DEVICE, prompt, &p, alt, NULL);
            SD_CHECK(same(got, na, alt, nb), "%s %s gamma %d: graph != direct", name, m ? "match" : "rejection", g);
            if (!same(got, na, alt, nb)) first_diff("graph vs direct", got, na, alt, nb);
        }
    }
    printf("%-40s graph replay == direct launches (rejection, match; gamma 1..%d)\n", name, MAX_G);
    e->round_kind = SD_ENGINE_ROUND_DEVICE_GRAPH;
}

static void random_pairs(const char *dir) {
    const size_t n_cases = g_quick >= 2 ? 1 : g_quick ? 2 : sizeof k_cases / sizeof k_cases[0];
    for (size_t c = 0; c < n_cases; c++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, k_cases[c]);
        specdec_model *m = NULL;
        specdec_status st = specdec_model_load(path, NULL, &m);
        SD_CHECK(st == SPECDEC_OK, "load %s: %s", path, specdec_last_error());
        if (st != SPECDEC_OK) continue;
        /* (a) the model as its own draft, through the public constructor */
        specdec_engine_params ep = specdec_engine_default_params();
        ep.backend = SPECDEC_BACKEND_CUDA;
        ep.n_ctx = 96;
        specdec_engine *e = NULL;
        st = specdec_engine_create(m, m, &ep, &e);
        SD_CHECK(st == SPECDEC_OK, "engine %s: %s", k_cases[c], specdec_last_error());
        char name[256];
        if (e) {
            snprintf(name, sizeof name, "%s/self", k_cases[c]);
            check_engine(name, e, 11 + c);
            specdec_engine_free(e);
        }
        /* (b) a synthetic random draft of the same vocabulary */
        sd_errbuf eb;
        sd_err_clear(&eb);
        sd_runner *rt = NULL, *rdr = NULL;
        st = sd_cuda_runner_create(&m->w, 96, 96, 0, 0, &rt, &eb);
        SD_CHECK(st == SPECDEC_OK, "target runner %s: %s", k_cases[c], eb.msg);
        sd_config dc = m->w.cfg;
        dc.hidden_size = 32;
        dc.intermediate_size = 64;
        dc.n_layers = 1;
        dc.n_heads = 2;
        dc.n_kv_heads = 1;
        dc.head_dim = 16;
        dc.attention_bias = 0;
        dc.tie_word_embeddings = 1;
        if (st == SPECDEC_OK) {
            st = sd_cuda_runner_create_synthetic(&dc, SD_BF16, 96, 96, 0, 1000 + c, &rdr, &eb);
            SD_CHECK(st == SPECDEC_OK, "synthetic draft %s: %s", k_cases[c], eb.msg);
            if (st != SPECDEC_OK) sd_runner_destroy(rt);
        }
        if (st == SPECDEC_OK) {
            st = sd_engine_create_from_runners(rt, rdr, NULL, &e);
            SD_CHECK(st == SPECDEC_OK, "engine from runners %s: %s", k_cases[c], specdec_last_error());
            if (st == SPECDEC_OK) {
                snprintf(name, sizeof name, "%s/random-draft", k_cases[c]);
                check_engine(name, e, 29 + c);
                specdec_engine_free(e);
            }
        }
        specdec_model_free(m);
    }
}

/* Rejection-mode first-token distribution on the bundled pair (see the top). */
static void rejection_stats(specdec_engine *e) {
    const int V = e->n_vocab;
    const int32_t prompt[N_PROMPT] = {5, 17, 301, 42, 7};
    float *logits = malloc((size_t)N_PROMPT * V * sizeof(float));
    float *prob = malloc((size_t)V * sizeof(float));
    double *pd = calloc((size_t)V, sizeof(double)), *cnt = calloc((size_t)V, sizeof(double));
    size_t scratch_n = sd_sampling_scratch_size(V);
    void *scratch = malloc(scratch_n);
    SD_CHECK(logits && prob && pd && cnt && scratch, "allocation");
    if (!logits || !prob || !pd || !cnt || !scratch) goto done;
    specdec_generate_params p = specdec_generate_default_params();
    p.verify = SPECDEC_VERIFY_REJECTION;
    p.temperature = 1.0f;
    p.top_k = 16;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.n_draft = 3;
    p.n_predict = 4; /* one round of γ = 3 */
    p.ignore_eos = 1;
    SD_CHECK(specdec_engine_forward(e, SPECDEC_ROLE_TARGET, prompt, N_PROMPT, 0, logits) == SPECDEC_OK, "forward: %s",
             specdec_engine_last_error(e));
    sd_sampling_params sp = sd_sampling_params_from(&p);
    SD_CHECK(sd_sampling_process(logits + (size_t)(N_PROMPT - 1) * V, V, &sp, scratch, scratch_n, prob, NULL) ==
                 SPECDEC_OK,
             "process");
    for (int i = 0; i < V; i++) pd[i] = prob[i];
    const int N = g_quick >= 2 ? 200 : g_quick ? 2000 : 20000;
    int32_t out[8];
    double acc = 0, drafted = 0;
    for (int i = 0; i < N; i++) {
        p.seed = (uint64_t)i;
        int32_t n = 0;
        specdec_stats st;
        specdec_status s = specdec_generate(e, prompt, N_PROMPT, &p, out, 8, &n, &st);
        if (s != SPECDEC_OK || n < 1) {
            SD_CHECK(0, "generate seed %d: %s", i, specdec_engine_last_error(e));
            goto done;
        }
        cnt[out[0]] += 1;
        acc += (double)st.n_accepted;
        drafted += (double)st.n_drafted;
    }
    double stat = 0;
    int df = 0;
    double pv = gof_pvalue(cnt, pd, V, N, &stat, &df);
    printf("bundled pair rejection gamma 3: first token chi2 %.1f df %d p %.3g (N %d), acceptance %.3f\n", stat, df,
           pv, N, drafted > 0 ? acc / drafted : 0.0);
    SD_CHECK(pv > 1e-6, "first-token distribution differs from the target's: chi2 %.1f df %d p %.3g", stat, df, pv);
    SD_CHECK(drafted > 0 && acc > 0 && acc < drafted, "acceptance %.0f of %.0f: the test needs rejections and accepts",
             acc, drafted);
done:
    free(logits);
    free(prob);
    free(pd);
    free(cnt);
    free(scratch);
}

/* Log-probabilities on CUDA (see the top). */
static int fwd_engine(void *ctx, const int32_t *tokens, int32_t n, float *logits) {
    return specdec_engine_forward((specdec_engine *)ctx, SPECDEC_ROLE_TARGET, tokens, n, 0, logits) != SPECDEC_OK;
}

/* The records of one CUDA generation against the two references; the worst diffs. */
static void lp_vs_refs(const char *name, const lp_rec *r, const lp_ref *rg, const lp_ref *rc, const int32_t *out,
                       int n, double *worst_own, double *worst_cpu) {
    int bad = 0;
    for (int i = 0; i < n && i < r->n; i++) {
        const int32_t row = N_PROMPT + i - 1, V = rg->V;
        double xmax = 0;
        for (int32_t j = 0; j < V; j++) xmax = fmax(xmax, fabs((double)rc->logits[(size_t)row * V + j]));
        const double tol = 2e-2 * xmax;
        const double d_own = fabs((double)r->lp[i] - lp_ref_lp(rg, row, out[i]));
        const double d_cpu = fabs((double)r->lp[i] - lp_ref_lp(rc, row, out[i]));
        *worst_own = fmax(*worst_own, d_own);
        *worst_cpu = fmax(*worst_cpu, d_cpu);
        if ((d_own > tol || d_cpu > tol || r->tok[i] != out[i] || r->pos[i] != N_PROMPT + i) && bad++ < 3)
            fprintf(stderr, "  %s token %d: logprob %.6g, cuda ref %.6g, cpu ref %.6g (tol %.3g)\n", name, i,
                    (double)r->lp[i], lp_ref_lp(rg, row, out[i]), lp_ref_lp(rc, row, out[i]), tol);
    }
    SD_CHECK(bad == 0, "%s: %d logprobs outside the GPU tolerance", name, bad);
}

/* The request p (logprobs on, recording into *r) through scheduler s beside the same
 * request without logprobs; the count of its tokens in out, or -1. */
static int sched_with_logprobs(specdec_scheduler *s, const int32_t *prompt, const specdec_generate_params *p,
                               lp_rec *r, int32_t *out) {
    specdec_generate_params q = *p;
    q.logprobs = 0, q.top_logprobs = 0, q.logprob_callback = NULL, q.callback = NULL;
    specdec_generate_params pr = *p;
    specdec_request_id a = 0, b = 0;
    lp_rec_init(r, N_PROMPT);
    lp_attach(&pr, r, p->top_logprobs);
    int32_t n = 0, nq = 0, other[N_GEN];
    specdec_status oa = SPECDEC_OK, ob = SPECDEC_OK;
    const int ok = specdec_scheduler_submit(s, prompt, N_PROMPT, &q, &b) == SPECDEC_OK &&
                   specdec_scheduler_submit(s, prompt, N_PROMPT, &pr, &a) == SPECDEC_OK &&
                   specdec_scheduler_wait(s, a, -1, out, N_GEN, &n, NULL, &oa) == SPECDEC_OK &&
                   specdec_scheduler_wait(s, b, -1, other, N_GEN, &nq, NULL, &ob) == SPECDEC_OK && oa == SPECDEC_OK &&
                   ob == SPECDEC_OK;
    SD_CHECK(ok, "cuda scheduler: %s", specdec_scheduler_last_error(s));
    SD_CHECK(!ok || same(out, n, other, nq), "cuda scheduler: the request without logprobs emitted other tokens");
    return ok ? n : -1;
}

/* The CPU engine of the references (n_ctx 256); NULL on failure. */
static specdec_engine *cpu_engine(const specdec_model *t, const specdec_model *d) {
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = 256;
    specdec_engine *ec = NULL;
    SD_CHECK(specdec_engine_create(t, d, &ep, &ec) == SPECDEC_OK, "cpu engine: %s", specdec_last_error());
    return ec;
}

static void logprobs_cuda_vs_cpu(specdec_engine *e, const specdec_model *t, const specdec_model *d) {
    specdec_engine *ec = cpu_engine(t, d);
    if (!ec) return;
    specdec_engine_params ep = specdec_engine_default_params();
    ep.n_ctx = 256;
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = 2;
    ep.backend = SPECDEC_BACKEND_CUDA;
    specdec_scheduler *sch = NULL;
    SD_CHECK(specdec_scheduler_create(t, d, &ep, &sp, &sch) == SPECDEC_OK, "cuda scheduler: %s", specdec_last_error());
    static lp_rec srec;
    int32_t sout[N_GEN];
    static const int32_t prompt[N_PROMPT] = {1, 2, 3, 4, 5}, tree[3] = {2, 2, 1};
    static const char *const names[] = {"plain greedy", "chain greedy", "tree greedy", "chain match"};
    static lp_rec rec;
    int32_t ref[N_GEN], out[N_GEN], seq[N_PROMPT + N_GEN];
    double worst_own = 0, worst_cpu = 0;
    for (int c = 0; c < 4; c++) {
        specdec_generate_params p = gen_params(c == 3 ? SPECDEC_VERIFY_MATCH : SPECDEC_VERIFY_GREEDY, c ? 4 : 0, 77);
        if (c == 2) SD_CHECK(specdec_generate_params_set_tree(&p, tree, 3) == SPECDEC_OK, "tree");
        const int n0 = run(e, SD_ENGINE_ROUND_DEVICE_GRAPH, prompt, &p, ref, NULL);
        SD_CHECK(c == 2 || !strcmp(sd_round_exec_name(e->round), "cuda"), "%s: ran on %s without logprobs", names[c],
                 sd_round_exec_name(e->round));
        lp_rec_init(&rec, N_PROMPT);
        lp_attach(&p, &rec, 5);
        const int n = run(e, SD_ENGINE_ROUND_DEVICE_GRAPH, prompt, &p, out, NULL);
        SD_CHECK(!strcmp(sd_round_exec_name(e->round), "host"), "%s: logprobs ran on %s, not the host executor",
                 names[c], sd_round_exec_name(e->round));
        SD_CHECK(same(out, n, ref, n0), "%s: logprobs changed the tokens", names[c]);
        SD_CHECK(n > 0 && rec.n == n && rec.n_tok == n && !rec.bad_order, "%s: %d records for %d tokens", names[c],
                 (int)rec.n, n);
        if (n < 1) continue;
        memcpy(seq, prompt, sizeof prompt);
        memcpy(seq + N_PROMPT, out, (size_t)n * sizeof *out);
        lp_ref rg, rc;
        const int fail = lp_ref_build(&rg, fwd_engine, e, e->n_vocab, seq, N_PROMPT + n - 1) |
                         lp_ref_build(&rc, fwd_engine, ec, e->n_vocab, seq, N_PROMPT + n - 1);
        SD_CHECK(!fail, "%s: reference forwards", names[c]);
        if (!fail) lp_vs_refs(names[c], &rec, &rg, &rc, out, n, &worst_own, &worst_cpu);
        const int ns = sch ? sched_with_logprobs(sch, prompt, &p, &srec, sout) : -1;
        SD_CHECK(same(sout, ns, out, n) && srec.n == ns && srec.n_tok == ns && !srec.bad_order,
                 "%s: the cuda scheduler's %d tokens / %d records differ from the engine's %d", names[c], ns,
                 (int)srec.n, n);
        if (!fail && ns == n) lp_vs_refs(names[c], &srec, &rg, &rc, out, n, &worst_own, &worst_cpu);
        lp_ref_free(&rg);
        lp_ref_free(&rc);
    }
    printf("kjv pair logprobs on CUDA (host executor, logits read back): max |diff| %.3g vs the CUDA one-forward "
           "reference, %.3g vs the CPU engine\n", worst_own, worst_cpu);
    specdec_scheduler_free(sch);
    specdec_engine_free(ec);
}

/* Prompt log-probabilities on CUDA (see the top): the prefill's logits read back per chunk. */
static void prompt_logprobs_cuda_vs_cpu(specdec_engine *e, const specdec_model *t, const specdec_model *d) {
    enum { NP = 40 };
    specdec_engine *ec = cpu_engine(t, d);
    if (!ec) return;
    int32_t prompt[NP], a[N_GEN], b[N_GEN], na = 0, nb = 0;
    for (int i = 0; i < NP; i++) prompt[i] = 1 + (i * 7) % 60;
    static lp_rec gen, pr;
    specdec_generate_params p = gen_params(SPECDEC_VERIFY_GREEDY, 4, 5);
    e->round_kind = SD_ENGINE_ROUND_DEVICE_GRAPH;
    SD_CHECK(specdec_generate(e, prompt, NP, &p, a, N_GEN, &na, NULL) == SPECDEC_OK, "prompt logprobs: plain run: %s",
             specdec_engine_last_error(e));
    lp_rec_init(&gen, NP);
    gen.off = 1;
    p.callback = lp_on_token, p.user_data = &gen;
    p.prompt_logprobs = 1, p.prompt_top_logprobs = 5, p.logprob_callback = lp_on_logprob, p.logprob_user_data = &gen;
    lp_rec_prompt(&gen, &pr, NP);
    SD_CHECK(specdec_generate(e, prompt, NP, &p, b, N_GEN, &nb, NULL) == SPECDEC_OK, "prompt logprobs: %s",
             specdec_engine_last_error(e));
    SD_CHECK(!strcmp(sd_round_exec_name(e->round), "cuda"), "prompt logprobs ran on %s, not the device executor",
             sd_round_exec_name(e->round));
    SD_CHECK(same(a, na, b, nb) && pr.n == NP - 1 && !pr.bad_order && gen.n == 0,
             "prompt logprobs: %d/%d tokens, %d prompt records, %d breaches", na, nb, (int)pr.n, (int)pr.bad_order);
    lp_ref rg, rc;
    const int fail = lp_ref_build(&rg, fwd_engine, e, e->n_vocab, prompt, NP - 1) |
                     lp_ref_build(&rc, fwd_engine, ec, e->n_vocab, prompt, NP - 1);
    SD_CHECK(!fail, "prompt logprobs: reference forwards");
    double worst_own = 0, worst_cpu = 0;
    int bad = 0;
    for (int32_t i = 0; !fail && i < pr.n && i < NP - 1; i++) {
        const int32_t V = rg.V;
        double xmax = 0;
        for (int32_t j = 0; j < V; j++) xmax = fmax(xmax, fabs((double)rc.logits[(size_t)i * V + j]));
        const double d_own = fabs((double)pr.lp[i] - lp_ref_lp(&rg, i, prompt[i + 1]));
        const double d_cpu = fabs((double)pr.lp[i] - lp_ref_lp(&rc, i, prompt[i + 1]));
        worst_own = fmax(worst_own, d_own), worst_cpu = fmax(worst_cpu, d_cpu);
        bad += d_own > 2e-2 * xmax || d_cpu > 2e-2 * xmax || pr.tok[i] != prompt[i + 1] || pr.pos[i] != i + 1;
    }
    SD_CHECK(bad == 0, "prompt logprobs: %d records outside the GPU tolerance", bad);
    printf("kjv pair prompt logprobs on CUDA (prefill logits read back): max |diff| %.3g vs the CUDA one-forward "
           "reference, %.3g vs the CPU engine\n", worst_own, worst_cpu);
    lp_ref_free(&rg);
    lp_ref_free(&rc);
    specdec_engine_free(ec);
}

static void bundled_pair(const char *tdir, const char *ddir) {
    specdec_model *t = NULL, *d = NULL;
    SD_CHECK(specdec_model_load(tdir, NULL, &t) == SPECDEC_OK, "load %s: %s", tdir, specdec_last_error());
    SD_CHECK(specdec_model_load(ddir, NULL, &d) == SPECDEC_OK, "load %s: %s", ddir, specdec_last_error());
    if (!t || !d) goto done;
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CUDA;
    ep.n_ctx = 256;
    specdec_engine *e = NULL;
    SD_CHECK(specdec_engine_create(t, d, &ep, &e) == SPECDEC_OK, "engine: %s", specdec_last_error());
    if (!e) goto done;
    check_engine("kjv pair", e, 5);
    /* EOS: without ignore_eos, speculative and plain stop at the same place. */
    const int32_t prompt[N_PROMPT] = {1, 2, 3, 4, 5};
    int32_t a[N_GEN], b[N_GEN];
    for (int g = 1; g <= MAX_G; g++) {
        specdec_generate_params p = gen_params(SPECDEC_VERIFY_MATCH, 0, 99);
        p.ignore_eos = 0;
        p.temperature = 1.5f; /* flat enough to meet EOS now and then */
        int na = run(e, SD_ENGINE_ROUND_DEVICE_GRAPH, prompt, &p, a, NULL);
        p.n_draft = g;
        specdec_stats st;
        int nb = run(e, SD_ENGINE_ROUND_DEVICE_GRAPH, prompt, &p, b, &st);
        SD_CHECK(same(a, na, b, nb), "kjv eos gamma %d: speculative != plain", g);
    }
    logprobs_cuda_vs_cpu(e, t, d);
    prompt_logprobs_cuda_vs_cpu(e, t, d);
    rejection_stats(e);
    specdec_engine_free(e);
done:
    specdec_model_free(t);
    specdec_model_free(d);
}

int main(int argc, char **argv) {
    if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
    if (argc < 4) {
        fprintf(stderr, "usage: %s CKPT_DIR KJV_TARGET KJV_DRAFT\n", argv[0]);
        return 2;
    }
    const char *q = getenv("SD_CUDA_TEST_QUICK");
    g_quick = q ? (atoi(q) >= 2 ? 2 : 1) : 0;
    random_pairs(argv[1]);
    bundled_pair(argv[2], argv[3]);
    return sd_test_done();
}
#endif
