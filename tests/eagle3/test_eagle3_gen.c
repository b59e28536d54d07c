/* test_eagle3_gen.c — the eagle3 drafter end to end (core/sd_drafter_eagle3.c): an engine of a
 * target and an EAGLE-3 head (specdec_engine_create, CPU) generating through the round protocol.
 *
 *   1. greedy and match output bitwise equal plain decoding (every fixture head on the 8-layer
 *      fixture target, and the bundled kjv-target + kjv-eagle3 pair);
 *   2. the drafted chains of greedy generation equal the float64 reference's (drafts_ref.py via
 *      make_heads.py: drafts.txt), round by round, on the 8-layer target: capture of hs[a,b,c],
 *      fc, draft KV alignment across rounds, chain recurrence, d2t;
 *   3. rejection mode emits the target's law: G-test (tests/verify/vstats.h) of tokens 1-3
 *      after the prompt [3, 5] against the exact law of the processed target rows (computed
 *      with a plain CPU runner of the same target), on a V = 16, 8-layer target with a head over
 *      12 of its ids (q zero outside); chains and an EAGLE-2 tree, and both under a grammar (G_REGEX
 *      over token texts "a".."p": the law then masks each target row with the state after the
 *      tokens before it, the end token -inf where the state is not accepting, as the engine does;
 *      the drafter masks the head's logits alike, core/sd_drafter_eagle3.c e3d_mask). H0: equal
 *      laws; 4096 cells (expected < 5 pooled); reject
 *      at alpha = 1e-6; N samples (argv[3]), fixed seeds. Built with SD_E3_MUTANT (the drafter
 *      drafts the argmax of q but hands the verifier the whole q row:
 *      test_eagle3_mutant.c) the test must REJECT.
 *
 *     test_eagle3_gen FIXTURE_DIR MODELS_DIR N_SAMPLES [KJV_TOKENS]   (KJV_TOKENS: tokens per kjv
 *                                                                    generation, default 100) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../verify/vstats.h"
#include "e3_test.h"
#ifndef SD_E3_MUTANT /* the mutant binary runs only the G-test */
#include "e3_gen.h"
#endif
#include "sd_cpu_runner.h"
#include "sd_alloc.h"
#include "sd_cpu_sample.h"
#include "sd_grammar.h"
#include "sd_model.h"
#include "sd_regex.h"
#include "sd_sample_rules.h"
#include "sd_test.h"
#include "specdec.h"

#define MAX_ROUNDS 64
#define GV 16

static specdec_engine *make_engine(const specdec_model *t, const specdec_model *h) {
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = 128;
    specdec_engine *e = NULL;
    const specdec_status st = specdec_engine_create(t, h, &ep, &e);
    SD_CHECK(st == SPECDEC_OK, "engine: %s", specdec_last_error());
    return e;
}

#ifndef SD_E3_MUTANT
/* the drafted chains of a generation */
typedef struct rec {
    int n;
    int32_t nd[MAX_ROUNDS];
    int32_t tok[MAX_ROUNDS][SPECDEC_MAX_DRAFT];
    int others;  /* rounds drafted by something else than eagle3 (plain steps excluded) */
} rec;

static void on_round(void *u, const specdec_round_info *in) {
    rec *r = u;
    if (in->draft_method == SPECDEC_DRAFT_NONE) return;
    if (in->draft_method != SPECDEC_DRAFT_EAGLE3) r->others++;
    if (r->n >= MAX_ROUNDS) return;
    r->nd[r->n] = in->n_drafted;
    for (int32_t i = 0; i < in->n_drafted && i < SPECDEC_MAX_DRAFT; i++) r->tok[r->n][i] = in->draft_tokens[i];
    r->n++;
}

/* 2. the drafted chains of greedy generation vs drafts.txt (make_heads.py, drafts_ref.py) */
static const int32_t DRAFT_PROMPT[] = {5, 17, 42, 99, 3, 150};

static void check_ref_drafts(const char *dir, const specdec_model *target) {
    char p[1024];
    snprintf(p, sizeof p, "%s/drafts.txt", dir);
    FILE *f = fopen(p, "r");
    SD_CHECK(f != NULL, "open %s", p);
    if (!f) return;
    char line[512], cur[128] = "";
    rec r;
    int rounds_checked = 0, heads = 0;
    while (fgets(line, sizeof line, f)) {
        char name[128];
        int round, off = 0;
        if (sscanf(line, "%127s %d%n", name, &round, &off) != 2) continue;
        if (strcmp(name, cur)) {
            snprintf(cur, sizeof cur, "%s", name);
            memset(&r, 0, sizeof r);
            specdec_model *h = e3_load(dir, name);
            specdec_engine *e = h ? make_engine(target, h) : NULL;
            if (e) {
                specdec_generate_params gp = specdec_generate_default_params();
                gp.n_predict = 60;
                gp.temperature = 0.0f;
                gp.n_draft = 4;
                gp.ignore_eos = 1;
                gp.round_callback = on_round;
                gp.round_user_data = &r;
                int32_t out[64];
                specdec_stats st;
                gen(e, DRAFT_PROMPT, 6, &gp, out, 64, &st);
                heads++;
            }
            specdec_engine_free(e);
            specdec_model_free(h);
        }
        int32_t want[SPECDEC_MAX_DRAFT], nw = 0, v, o2 = 0;
        for (const char *s = line + off; nw < SPECDEC_MAX_DRAFT && sscanf(s, "%d%n", &v, &o2) == 1; s += o2)
            want[nw++] = v;
        int ok = round < r.n && r.nd[round] == nw;
        for (int i = 0; ok && i < nw; i++) ok = r.tok[round][i] == want[i];
        SD_CHECK(ok, "%s round %d: drafted %d tokens (%d %d ..) != reference %d (%d %d ..)", name, round,
                 round < r.n ? (int)r.nd[round] : -1, round < r.n ? (int)r.tok[round][0] : -1,
                 round < r.n ? (int)r.tok[round][1] : -1, (int)nw, (int)want[0], (int)want[1]);
        rounds_checked++;
    }
    fclose(f);
    SD_CHECK(heads >= 4 && rounds_checked >= 12, "reference drafts: %d heads, %d rounds", heads, rounds_checked);
    printf("reference drafts: %d rounds of %d heads equal the float64 reference\n", rounds_checked, heads);
}

#endif

/* 3. rejection mode: the law of tokens 1-3 */
static const int32_t G_PROMPT[] = {3, 5};

/* The grammar of the grammar cases: token t's text is the letter 'a' + t; the first two tokens
 * one from a-h and one from i-p in either order, the third from a-d or m-p (the mask of each row
 * depends on the tokens before it), then anything (accepting from the third token on). */
static const char G_REGEX[] = "(?:[a-h][i-p]|[i-p][a-h])(?:[a-d]|[m-p])[a-p]*";

static specdec_grammar *make_letter_grammar(void) {
    uint32_t *off = sd_malloc((GV + 1) * sizeof *off);
    uint8_t *bytes = sd_malloc(GV), *text = sd_malloc(GV);
    if (!off || !bytes || !text) {
        sd_free(off), sd_free(bytes), sd_free(text);
        SD_CHECK(0, "grammar: out of memory");
        return NULL;
    }
    for (int t = 0; t < GV; t++) off[t] = (uint32_t)t, bytes[t] = (uint8_t)('a' + t), text[t] = 1;
    off[GV] = GV;
    sd_grammar_vocab *v = NULL;
    sd_fsm *f = NULL;
    specdec_grammar *g = NULL;
    SD_CHECK(sd_grammar_vocab_create(GV, off, bytes, text, &v, NULL) == SPECDEC_OK, "vocab: %s", specdec_last_error());
    SD_CHECK(sd_regex_fsm_create(G_REGEX, strlen(G_REGEX), 1000, &f, NULL) == SPECDEC_OK, "regex: %s",
             specdec_last_error());
    if (v && f) SD_CHECK(sd_grammar_create(v, f, &g, NULL) == SPECDEC_OK, "grammar: %s", specdec_last_error());
    sd_grammar_vocab_release(v);
    return g;
}

/* Row lg masked as the engine masks it under g after the tokens hist[0..n) (no grammar, or a
 * refused history: as is). */
static void mask_row(const specdec_grammar *g, const int32_t *ends, int32_t n_ends, const int32_t *hist, int32_t n,
                     float *lg) {
    if (!g) return;
    int32_t s = sd_grammar_start(g);
    for (int32_t i = 0; i < n && s >= 0; i++) s = sd_grammar_next(g, s, hist[i]);
    if (s < 0) return; /* a history the grammar refuses: its probability is already 0 */
    int only_end = 0;
    SD_CHECK(sd_grammar_apply(g, s, lg, GV, ends, n_ends, &only_end, NULL) == SPECDEC_OK, "mask");
}

/* the exact law of tokens 1-3: processed target rows from a plain CPU runner (g: masked by it,
 * ends the model's EOS ids) */
static void exact_law(const specdec_model *t, const sd_sampling_params *sp, const specdec_grammar *g,
                      const int32_t *ends, int32_t n_ends, double *law) {
    sd_runner *r = NULL;
    SD_CHECK(sd_cpu_runner_create(&t->w, 8, 8, &r, NULL) == SPECDEC_OK, "runner: %s", specdec_last_error());
    if (!r) return;
    const size_t ss = sd_sampling_scratch_size(GV);
    void *scratch = malloc(ss);
    float lg[2 * GV], pr[GV];
    double p1[GV], p2[GV][GV], p3[GV];
    int32_t tok[1];
#define ROW(dst, logits)                                                                        \
    do {                                                                                        \
        SD_CHECK(sd_sampling_process(logits, GV, sp, scratch, ss, pr, NULL) == SPECDEC_OK, "process"); \
        double s_ = 0;                                                                          \
        for (int c_ = 0; c_ < GV; c_++) s_ += pr[c_];                                           \
        for (int c_ = 0; c_ < GV; c_++) (dst)[c_] = pr[c_] / s_;                                \
    } while (0)
    int32_t hist[2] = {0, 0};
    SD_CHECK(sd_runner_forward(r, G_PROMPT, 2, 0, lg) == SPECDEC_OK, "prompt");
    mask_row(g, ends, n_ends, hist, 0, lg + GV);
    ROW(p1, lg + GV);
    for (int a = 0; a < GV; a++) {
        tok[0] = hist[0] = a;
        SD_CHECK(sd_runner_forward(r, tok, 1, 2, lg) == SPECDEC_OK, "t1");
        mask_row(g, ends, n_ends, hist, 1, lg);
        ROW(p2[a], lg);
        for (int b = 0; b < GV; b++) {
            tok[0] = hist[1] = b;
            SD_CHECK(sd_runner_forward(r, tok, 1, 3, lg) == SPECDEC_OK, "t2");
            mask_row(g, ends, n_ends, hist, 2, lg);
            ROW(p3, lg);
            for (int c = 0; c < GV; c++) law[(a * GV + b) * GV + c] = p1[a] * p2[a][b] * p3[c];
        }
    }
#undef ROW
    free(scratch);
    sd_runner_destroy(r);
}

typedef struct gcase {
    const char *name;
    int32_t tree;  /* 1: an EAGLE-2 tree of widths 2,2 (deterministic children) instead of a chain */
    int32_t grammar; /* 1: under G_REGEX */
    int32_t gamma;
    float temp, top_p, min_p;
    int32_t top_k;
} gcase;

static void check_gtest(const char *dir, long N) {
    static const gcase cases[] = {
        {"rejection g3 T1", 0, 0, 3, 1.0f, 1.0f, 0.0f, 0},
        {"rejection g2 T0.7 filters", 0, 0, 2, 0.7f, 0.9f, 0.05f, 8},
        {"rejection tree 2,2 T1", 1, 0, 2, 1.0f, 1.0f, 0.0f, 0},
        {"rejection g3 T1 grammar", 0, 1, 3, 1.0f, 1.0f, 0.0f, 0},
        {"rejection tree 2,2 grammar", 1, 1, 2, 1.0f, 1.0f, 0.0f, 0},
    };
    specdec_model *t = e3_load(dir, "gtarget"), *h = e3_load(dir, "ghead");
    specdec_engine *e = t && h ? make_engine(t, h) : NULL;
    specdec_model_info mi;
    memset(&mi, 0, sizeof mi);
    if (t) SD_CHECK(specdec_model_get_info(t, &mi) == SPECDEC_OK, "info");
    specdec_grammar *gram = make_letter_grammar();
    for (size_t k = 0; e && k < sizeof cases / sizeof cases[0]; k++) {
        const gcase *c = &cases[k];
#ifdef SD_E3_MUTANT
        if (k > 0) break; /* the mutant: the first case must be rejected */
#endif
        specdec_generate_params gp = specdec_generate_default_params();
        gp.n_predict = 3;
        gp.temperature = c->temp;
        gp.top_k = c->top_k;
        gp.top_p = c->top_p;
        gp.min_p = c->min_p;
        gp.verify = SPECDEC_VERIFY_REJECTION;
        gp.n_draft = c->gamma;
        gp.ignore_eos = 1;
        gp.seed = 0xea63000ull + (uint64_t)k;
        gp.grammar = c->grammar ? gram : NULL;
        static const int32_t widths[2] = {2, 2};
        if (c->tree) SD_CHECK(specdec_generate_params_set_tree(&gp, widths, 2) == SPECDEC_OK, "tree");
        const sd_sampling_params sp = sd_sampling_params_from(&gp);
        static double law[GV * GV * GV];
        static long cnt[GV * GV * GV];
        exact_law(t, &sp, gp.grammar, mi.eos_ids, mi.n_eos, law);
        memset(cnt, 0, sizeof cnt);
        long bad = 0, drafted = 0, accepted = 0;
        for (long i = 0; i < N; i++) {
            gp.sequence_id = (uint64_t)i;
            int32_t out[3], n = 0;
            specdec_stats st;
            if (specdec_generate(e, G_PROMPT, 2, &gp, out, 3, &n, &st) != SPECDEC_OK || n != 3) {
                if (bad++ < 3) fprintf(stderr, "%s: sample %ld: %s\n", c->name, i, specdec_engine_last_error(e));
                continue;
            }
            cnt[(out[0] * GV + out[1]) * GV + out[2]]++;
            drafted += st.n_drafted;
            accepted += st.n_accepted;
        }
        SD_CHECK(bad == 0, "%s: %ld failed calls", c->name, bad);
        SD_CHECK(drafted > 0 && accepted > 0 && accepted < drafted, "%s: drafted %ld, accepted %ld", c->name, drafted,
                 accepted);
        int df;
        double G;
        const double pv = g_test_pvalue(cnt, law, GV * GV * GV, N - bad, &df, &G);
        printf("%-28s N=%ld G=%.1f df=%d p=%.3g acceptance %.3f\n", c->name, N, G, df, pv,
               drafted ? (double)accepted / (double)drafted : 0.0);
#ifdef SD_E3_MUTANT
        SD_CHECK(pv <= 1e-6, "%s: the mutant drafter (argmax drafts, q = the whole row) was NOT detected (p=%.3g)",
                 c->name, pv);
#else
        SD_CHECK(pv > 1e-6, "%s: tokens 1-3 deviate from the target's law: p=%.3g", c->name, pv);
#endif
    }
    specdec_grammar_free(gram);
    specdec_engine_free(e);
    specdec_model_free(h);
    specdec_model_free(t);
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: test_eagle3_gen FIXTURE_DIR MODELS_DIR N_SAMPLES [KJV_TOKENS]\n");
        return 2;
    }
    const long N = atol(argv[3]);
#ifndef SD_E3_MUTANT
    specdec_model *t = e3_load(argv[1], "target");
    if (t) {
        static const char *heads[] = {"flat_f32_d2t", "flat_bf16_embed_bias", "speculators_f16_t2d",
                                      "speculators_f32_fullvocab"};
        for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
            specdec_model *h = e3_load(argv[1], heads[i]);
            specdec_engine *e = h ? make_engine(t, h) : NULL;
            if (e) check_equal_plain(heads[i], e, DRAFT_PROMPT, 6, 40, NULL, 0);
            specdec_engine_free(e);
            specdec_model_free(h);
        }
        check_ref_drafts(argv[1], t);
        specdec_model_free(t);
    }
    specdec_model *kt = e3_load(argv[2], "kjv-target"), *kh = e3_load(argv[2], "kjv-eagle3");
    specdec_engine *ke = kt && kh ? make_engine(kt, kh) : NULL;
    /* "And it came to pass, when" in the kjv tokenizer's ids would do; any ids will: greedy
     * text of the bundled target repeats, the head accepts */
    static const int32_t kp[] = {1, 260, 609, 13, 269};
    static const int32_t ktree[3] = {3, 3, 3};
    const int32_t kn = argc == 5 ? atoi(argv[4]) : 100;
    if (ke) check_equal_plain("kjv-eagle3", ke, kp, 5, kn, NULL, 0);
    if (ke) check_equal_plain("kjv-eagle3", ke, kp, 5, kn, ktree, 3); /* EAGLE-2 tree: k 3, depth 3 */
    specdec_engine_free(ke);
    specdec_model_free(kh);
    specdec_model_free(kt);
#endif
    check_gtest(argv[1], N);
    return sd_test_done();
}
