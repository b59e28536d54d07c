/* test_engine_api.c — the engine and generate API on synthetic Markov-chain runners
 * (markov.h): exact equalities, stops, statistics, adaptive γ, bad requests, the
 * busy rule with two threads, device loss, allocation-failure injection, and the
 * "no allocation while generating" rule. Deterministic (fixed tables and seeds). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "markov.h"
#include "sd_alloc.h"
#include "sd_engine.h"
#include "sd_model.h"
#include "sd_test.h"

#define V 16
#define CTX 128

static float g_t[V * V * V]; /* order-2 target */
static float g_d[V * V];     /* order-1 draft */

/* An engine over fresh runners; draft_kind 0 none, 1 the order-1 draft, 2 a copy of the target. */
static specdec_engine *make_engine(int draft_kind, int32_t n_ctx, const sd_engine_special *sp, mk_runner **mt_out,
                                   mk_runner **md_out) {
    mk_runner *mt = mk_runner_new(2, g_t, V, n_ctx, n_ctx);
    mk_runner *md = NULL;
    if (draft_kind == 1) md = mk_runner_new(1, g_d, V, n_ctx, n_ctx);
    if (draft_kind == 2) md = mk_runner_new(2, g_t, V, n_ctx, n_ctx);
    specdec_engine *e = NULL;
    specdec_status st = sd_engine_create_from_runners(&mt->base, md ? &md->base : NULL, sp, &e);
    SD_CHECK(st == SPECDEC_OK, "create: %s", specdec_last_error());
    if (mt_out) *mt_out = mt;
    if (md_out) *md_out = md;
    return e;
}

static int gen(specdec_engine *e, const specdec_generate_params *gp, const int32_t *prompt, int32_t np, int32_t *out,
               int32_t cap, specdec_stats *stats) {
    int32_t n = -1;
    specdec_status st = specdec_generate(e, prompt, np, gp, out, cap, &n, stats);
    SD_CHECK(st == SPECDEC_OK, "generate: %s: %s", specdec_status_string(st), specdec_engine_last_error(e));
    return st == SPECDEC_OK ? n : -1;
}

static const int32_t PROMPT[5] = {3, 1, 4, 1, 5};

/* greedy speculative == greedy plain; match speculative == plain with the same seed */
static void test_equalities(void) {
    specdec_engine *plain = make_engine(0, CTX, NULL, NULL, NULL);
    mk_runner *mt, *md;
    specdec_engine *spec = make_engine(1, CTX, NULL, &mt, &md);
    int32_t ref[64], got[64];
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = 48;
    for (int mode = 0; mode < 2; mode++) {
        for (uint64_t seed = 1; seed <= 4; seed++) {
            gp.seed = seed;
            gp.sequence_id = seed * 7;
            if (mode == 0) {
                gp.temperature = 0.0f;
                gp.verify = SPECDEC_VERIFY_AUTO;
            } else {
                gp.temperature = 0.9f;
                gp.top_k = (int32_t)seed + 3;
                gp.top_p = 0.95f;
                gp.min_p = 0.02f;
                gp.verify = SPECDEC_VERIFY_MATCH;
            }
            gp.n_draft = 4;
            int nr = gen(plain, &gp, PROMPT, 5, ref, 64, NULL);
            SD_CHECK(nr == 48, "plain produced %d tokens", nr);
            for (int32_t g = 0; g <= 8; g++) {
                gp.n_draft = g;
                gp.adaptive_draft = 0;
                specdec_stats stats;
                int n = gen(spec, &gp, PROMPT, 5, got, 64, &stats);
                SD_CHECK(n == nr && !memcmp(ref, got, sizeof(int32_t) * (size_t)nr),
                         "%s seed %llu gamma %d: speculative output differs from plain", mode ? "match" : "greedy",
                         (unsigned long long)seed, (int)g);
                if (g > 0) SD_CHECK(stats.n_drafted > 0, "gamma %d drafted nothing", (int)g);
                SD_CHECK(stats.n_accepted <= stats.n_drafted && stats.n_generated == n, "stats inconsistent");
            }
            /* adaptive γ changes only the speed in these modes */
            gp.n_draft = 3;
            gp.adaptive_draft = 1;
            specdec_stats stats;
            int n = gen(spec, &gp, PROMPT, 5, got, 64, &stats);
            SD_CHECK(n == nr && !memcmp(ref, got, sizeof(int32_t) * (size_t)nr), "adaptive %s differs from plain",
                     mode ? "match" : "greedy");
            SD_CHECK(stats.final_n_draft >= 1 && stats.final_n_draft <= SPECDEC_MAX_DRAFT, "final γ %d",
                     (int)stats.final_n_draft);
            gp.adaptive_draft = 0;
        }
    }
    /* plain decoding through the speculative engine (n_draft = 0) equals the plain engine */
    gp.verify = SPECDEC_VERIFY_REJECTION;
    gp.n_draft = 0;
    int nr = gen(plain, &gp, PROMPT, 5, ref, 64, NULL);
    int n = gen(spec, &gp, PROMPT, 5, got, 64, NULL);
    SD_CHECK(n == nr && !memcmp(ref, got, sizeof(int32_t) * (size_t)nr), "n_draft 0 differs from plain");
    SD_CHECK(mt->violations == 0 && md->violations == 0, "runner contract violations %ld %ld", mt->violations,
             md->violations);
    specdec_engine_free(plain);
    specdec_engine_free(spec);
}

/* same seed -> same output; the draft equal to the target accepts everything */
static void test_determinism_and_self_draft(void) {
    specdec_engine *spec = make_engine(1, CTX, NULL, NULL, NULL);
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = 40;
    gp.temperature = 1.0f;
    gp.top_k = 0;
    gp.top_p = 1.0f;
    gp.min_p = 0.0f;
    gp.verify = SPECDEC_VERIFY_REJECTION;
    gp.seed = 99;
    int32_t a[64], b[64];
    int na = gen(spec, &gp, PROMPT, 5, a, 64, NULL);
    int nb = gen(spec, &gp, PROMPT, 5, b, 64, NULL);
    SD_CHECK(na == nb && !memcmp(a, b, sizeof(int32_t) * (size_t)na), "same seed, different output");
    int differs = 0;
    for (uint64_t s = 1; s <= 4; s++) {
        gp.sequence_id = s;
        int n = gen(spec, &gp, PROMPT, 5, b, 64, NULL);
        differs |= n != na || memcmp(a, b, sizeof(int32_t) * (size_t)na);
    }
    SD_CHECK(differs, "sequence_id does not change the output");
    specdec_engine_free(spec);

    spec = make_engine(2, CTX, NULL, NULL, NULL);
    const specdec_verify_mode modes[3] = {SPECDEC_VERIFY_GREEDY, SPECDEC_VERIFY_MATCH, SPECDEC_VERIFY_REJECTION};
    for (int m = 0; m < 3; m++) {
        gp.verify = modes[m];
        gp.temperature = m == 0 ? 0.0f : 0.8f;
        gp.n_draft = 5;
        specdec_stats st;
        int n = gen(spec, &gp, PROMPT, 5, b, 64, &st);
        SD_CHECK(n == 40 && st.n_drafted > 0 && st.n_accepted == st.n_drafted,
                 "self-draft mode %d: accepted %lld of %lld", (int)modes[m], (long long)st.n_accepted,
                 (long long)st.n_drafted);
        SD_CHECK(st.acceptance_rate == 1.0, "self-draft acceptance %.3f", st.acceptance_rate);
        /* all accepted: rounds emit γ+1 tokens except where the budget clips γ */
        SD_CHECK(st.tokens_per_round > 4.0, "tokens/round %.2f", st.tokens_per_round);
    }
    specdec_engine_free(spec);
}

typedef struct cb_state {
    int calls;
    int stop_after;
    int32_t toks[256];
} cb_state;

static int count_cb(void *ud, int32_t tok, const char *piece, size_t len) {
    cb_state *s = ud;
    SD_CHECK(piece == NULL && len == 0, "piece without a tokenizer");
    if (s->calls < 256) s->toks[s->calls] = tok;
    s->calls++;
    return s->stop_after > 0 && s->calls >= s->stop_after;
}

static void test_stops(void) {
    /* EOS: pick as EOS the token plain greedy emits third */
    specdec_engine *e0 = make_engine(0, CTX, NULL, NULL, NULL);
    specdec_generate_params gp = specdec_generate_default_params();
    gp.temperature = 0.0f;
    gp.n_predict = 30;
    int32_t ref[64], got[64];
    int nr = gen(e0, &gp, PROMPT, 5, ref, 64, NULL);
    specdec_engine_free(e0);
    int first = 0;
    while (first < 2 && ref[first] != ref[2]) first++; /* EOS stops at its first occurrence */
    sd_engine_special sp = {-1, 1, {ref[2]}};
    mk_runner *mt, *md;
    specdec_engine *e = make_engine(1, CTX, &sp, &mt, &md);
    specdec_stats st;
    for (int32_t g = 0; g <= 6; g += 3) {
        gp.n_draft = g;
        int n = gen(e, &gp, PROMPT, 5, got, 64, &st);
        SD_CHECK(n == first + 1 && got[n - 1] == ref[2] && st.stop_reason == SPECDEC_STOP_EOS,
                 "EOS stop: n %d reason %d", n, (int)st.stop_reason);
        SD_CHECK(!memcmp(got, ref, sizeof(int32_t) * (size_t)(first + 1)), "EOS stop changed the tokens");
        gp.ignore_eos = 1;
        n = gen(e, &gp, PROMPT, 5, got, 64, &st);
        SD_CHECK(n == nr && st.stop_reason == SPECDEC_STOP_N_PREDICT && !memcmp(got, ref, sizeof(int32_t) * (size_t)n),
                 "ignore_eos: n %d reason %d", n, (int)st.stop_reason);
        gp.ignore_eos = 0;
    }
    /* callback: called once per token, in order; non-zero stops right after that token */
    gp.ignore_eos = 1;
    gp.n_draft = 4;
    cb_state cs;
    memset(&cs, 0, sizeof cs);
    cs.stop_after = 7;
    gp.callback = count_cb;
    gp.user_data = &cs;
    int n = gen(e, &gp, PROMPT, 5, got, 64, &st);
    SD_CHECK(n == 7 && cs.calls == 7 && st.stop_reason == SPECDEC_STOP_CALLBACK, "callback stop: n %d calls %d", n,
             cs.calls);
    SD_CHECK(!memcmp(cs.toks, got, sizeof(int32_t) * 7), "callback saw other tokens than the output");
    memset(&cs, 0, sizeof cs);
    n = gen(e, &gp, PROMPT, 5, got, 64, &st);
    SD_CHECK(n == 30 && cs.calls == 30 && !memcmp(cs.toks, got, sizeof(int32_t) * 30), "callback calls %d", cs.calls);
    gp.callback = NULL;
    specdec_engine_free(e);

    /* context full: n_ctx 20, prompt 5 -> 15 tokens, then CONTEXT_FULL; n_predict may exceed it */
    e = make_engine(1, 20, NULL, &mt, &md);
    for (int32_t g = 0; g <= 8; g += 4) {
        gp.n_draft = g;
        gp.n_predict = 1000000000;
        n = gen(e, &gp, PROMPT, 5, got, 15, &st);
        SD_CHECK(n == 15 && st.stop_reason == SPECDEC_STOP_CONTEXT_FULL, "context full: n %d reason %d", n,
                 (int)st.stop_reason);
        SD_CHECK(mt->violations == 0 && md->violations == 0, "runner violations at context end");
        SD_CHECK(mt->base.kv_len <= 20 && md->base.kv_len <= 20, "kv beyond n_ctx");
    }
    specdec_engine_free(e);
}

static void test_stats(void) {
    mk_runner *mt, *md;
    specdec_engine *e = make_engine(1, CTX, NULL, &mt, &md);
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = 50;
    gp.n_draft = 4;
    gp.ignore_eos = 1;
    int32_t out[64];
    specdec_stats st;
    long calls0 = mt->calls;
    int n = gen(e, &gp, PROMPT, 5, out, 64, &st);
    SD_CHECK(n == 50 && st.n_generated == 50 && st.n_prompt == 5, "counts");
    SD_CHECK(st.n_rounds > 0 && st.n_rounds <= 50 && mt->calls - calls0 == 1 + st.n_rounds,
             "one target call per round: %ld calls, %lld rounds", mt->calls - calls0, (long long)st.n_rounds);
    SD_CHECK(st.n_accepted <= st.n_drafted && st.n_drafted <= 4 * st.n_rounds, "drafted %lld accepted %lld",
             (long long)st.n_drafted, (long long)st.n_accepted);
    /* every round emits accepted + 1 tokens */
    SD_CHECK(st.n_accepted + st.n_rounds == 50, "accepted %lld + rounds %lld != 50", (long long)st.n_accepted,
             (long long)st.n_rounds);
    SD_CHECK(fabs(st.acceptance_rate - (double)st.n_accepted / (double)st.n_drafted) < 1e-12, "acceptance_rate");
    SD_CHECK(fabs(st.tokens_per_round - 50.0 / (double)st.n_rounds) < 1e-12, "tokens_per_round");
    SD_CHECK(st.t_total_s >= st.t_prefill_s && st.t_prefill_s >= 0 && st.t_draft_s >= 0 && st.t_target_s >= 0 &&
                 st.t_verify_s >= 0 && st.t_draft_s + st.t_target_s + st.t_verify_s <= st.t_total_s + 1e-9,
             "timings");
    SD_CHECK(st.tokens_per_second > 0, "tokens_per_second");
    SD_CHECK(st.final_n_draft == 4 && st.stop_reason == SPECDEC_STOP_N_PREDICT, "final γ / reason");
    /* NULL stats is allowed */
    int32_t n2 = 0;
    SD_CHECK(specdec_generate(e, PROMPT, 5, &gp, out, 64, &n2, NULL) == SPECDEC_OK && n2 == 50, "NULL stats");
    specdec_engine_free(e);
}

static void test_adaptive_rule(void) {
    sd_adapt a;
    /* easy text (α ≈ 0.95), cheap draft (1/20 of a verify pass) -> long drafts */
    memset(&a, 0, sizeof a);
    for (int i = 0; i < 30; i++) sd_adapt_observe(&a, 4, i % 20 == 0 ? 3 : 4, 4 * 0.001, 0.02);
    int32_t g_easy = sd_adapt_choose_gamma(&a, 4, SPECDEC_MAX_DRAFT);
    SD_CHECK(g_easy >= 8, "α≈0.95, cheap draft: γ %d", (int)g_easy);
    /* hard text (α ≈ 0.2) -> short drafts */
    memset(&a, 0, sizeof a);
    for (int i = 0; i < 30; i++) sd_adapt_observe(&a, 4, i % 5 == 0 ? 1 : 0, 4 * 0.001, 0.02);
    int32_t g_hard = sd_adapt_choose_gamma(&a, 4, SPECDEC_MAX_DRAFT);
    SD_CHECK(g_hard <= 2, "α≈0.2: γ %d", (int)g_hard);
    /* draft as expensive as the target: γ = 1 */
    memset(&a, 0, sizeof a);
    for (int i = 0; i < 30; i++) sd_adapt_observe(&a, 4, 2, 4 * 0.02, 0.02);
    SD_CHECK(sd_adapt_choose_gamma(&a, 4, SPECDEC_MAX_DRAFT) == 1, "expensive draft");
    /* the cap is respected; nothing observed yet keeps the current value */
    memset(&a, 0, sizeof a);
    SD_CHECK(sd_adapt_choose_gamma(&a, 5, SPECDEC_MAX_DRAFT) == 5, "no observation");
    for (int i = 0; i < 30; i++) sd_adapt_observe(&a, 4, 4, 0.0, 0.0); /* zero timings: fixed ratio */
    int32_t g0 = sd_adapt_choose_gamma(&a, 4, 6);
    SD_CHECK(g0 >= 1 && g0 <= 6, "cap: γ %d", (int)g0);
    /* verify cost growing with γ (CPU-like) pulls γ down compared with a flat cost */
    sd_adapt flat, slope;
    memset(&flat, 0, sizeof flat);
    memset(&slope, 0, sizeof slope);
    for (int i = 0; i < 40; i++) {
        int32_t g = 2 + (i % 4) * 2;
        sd_adapt_observe(&flat, g, g - 1, g * 0.001, 0.02);
        sd_adapt_observe(&slope, g, g - 1, g * 0.001, 0.005 * (g + 1));
    }
    SD_CHECK(sd_adapt_choose_gamma(&slope, 4, 16) < sd_adapt_choose_gamma(&flat, 4, 16),
             "a verify cost linear in γ should shorten drafts (%d vs %d)", (int)sd_adapt_choose_gamma(&slope, 4, 16),
             (int)sd_adapt_choose_gamma(&flat, 4, 16));
}

#define EXPECT(expr, want)                                                                                          \
    do {                                                                                                            \
        specdec_status st_ = (expr);                                                                                \
        SD_CHECK(st_ == (want), "%s -> %s, expected %s", #expr, specdec_status_string(st_),                        \
                 specdec_status_string(want));                                                                      \
        SD_CHECK(st_ == SPECDEC_OK || specdec_last_error()[0] != '\0', "%s: no error message", #expr);             \
        if (st_ != SPECDEC_OK) printf("  %-12s %s\n", specdec_status_string(st_) + 12, specdec_last_error());       \
    } while (0)

static void test_bad_requests(void) {
    specdec_engine *e = make_engine(1, 32, NULL, NULL, NULL);
    specdec_generate_params ok = specdec_generate_default_params();
    ok.n_predict = 8;
    int32_t out[64], n = 0;
    const int32_t bad_lo[3] = {1, -1, 2}, bad_hi[2] = {1, V};
    int32_t long_prompt[40];
    for (int i = 0; i < 40; i++) long_prompt[i] = i % V;
    specdec_generate_params p;
#define WITH(field, value, want)                                                                                    \
    do {                                                                                                            \
        p = ok;                                                                                                     \
        p.field = value;                                                                                            \
        EXPECT(specdec_generate(e, PROMPT, 5, &p, out, 64, &n, NULL), want);                                        \
    } while (0)
    EXPECT(specdec_generate(NULL, PROMPT, 5, &ok, out, 64, &n, NULL), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_generate(e, NULL, 5, &ok, out, 64, &n, NULL), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_generate(e, PROMPT, 5, &ok, NULL, 64, &n, NULL), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_generate(e, PROMPT, 5, &ok, out, 64, NULL, NULL), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_generate(e, PROMPT, 0, &ok, out, 64, &n, NULL), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_generate(e, PROMPT, -3, &ok, out, 64, &n, NULL), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_generate(e, long_prompt, 32, &ok, out, 64, &n, NULL), SPECDEC_ERR_CONTEXT_FULL);
    EXPECT(specdec_generate(e, long_prompt, 40, &ok, out, 64, &n, NULL), SPECDEC_ERR_CONTEXT_FULL);
    EXPECT(specdec_generate(e, bad_lo, 3, &ok, out, 64, &n, NULL), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_generate(e, bad_hi, 2, &ok, out, 64, &n, NULL), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_generate(e, PROMPT, 5, &ok, out, 7, &n, NULL), SPECDEC_ERR_BUFFER_TOO_SMALL);
    WITH(n_predict, 0, SPECDEC_ERR_INVALID_ARGUMENT);
    WITH(n_predict, -5, SPECDEC_ERR_INVALID_ARGUMENT);
    WITH(n_draft, -1, SPECDEC_ERR_INVALID_ARGUMENT);
    WITH(n_draft, SPECDEC_MAX_DRAFT + 1, SPECDEC_ERR_INVALID_ARGUMENT);
    WITH(temperature, -0.5f, SPECDEC_ERR_INVALID_ARGUMENT);
    WITH(temperature, NAN, SPECDEC_ERR_INVALID_ARGUMENT);
    WITH(temperature, INFINITY, SPECDEC_ERR_INVALID_ARGUMENT);
    WITH(top_p, 0.0f, SPECDEC_ERR_INVALID_ARGUMENT);
    WITH(top_p, 1.5f, SPECDEC_ERR_INVALID_ARGUMENT);
    WITH(top_p, NAN, SPECDEC_ERR_INVALID_ARGUMENT);
    WITH(top_k, -1, SPECDEC_ERR_INVALID_ARGUMENT);
    WITH(min_p, -0.1f, SPECDEC_ERR_INVALID_ARGUMENT);
    WITH(min_p, 1.1f, SPECDEC_ERR_INVALID_ARGUMENT);
    WITH(verify, (specdec_verify_mode)99, SPECDEC_ERR_INVALID_ARGUMENT);
    WITH(n_stop_strings, -1, SPECDEC_ERR_INVALID_ARGUMENT);
    WITH(n_stop_strings, 1, SPECDEC_ERR_INVALID_ARGUMENT); /* stop_strings NULL */
    WITH(prompt_logprobs, 2, SPECDEC_ERR_INVALID_ARGUMENT);
    WITH(draft_method, (specdec_draft_method)9, SPECDEC_ERR_INVALID_ARGUMENT);
    WITH(cache_salt, 12345, SPECDEC_OK); /* any salt; specdec_generate has no prefix cache */
    {
        const char *stops[1] = {"x"};
        p = ok;
        p.stop_strings = stops;
        p.n_stop_strings = 1; /* no tokenizer */
        EXPECT(specdec_generate(e, PROMPT, 5, &p, out, 64, &n, NULL), SPECDEC_ERR_INVALID_ARGUMENT);
    }
    p = ok;
    p.adaptive_draft = 1;
    p.n_draft = 0;
    EXPECT(specdec_generate(e, PROMPT, 5, &p, out, 64, &n, NULL), SPECDEC_ERR_INVALID_ARGUMENT);
    /* accepted edge values */
    WITH(top_p, 1.0f, SPECDEC_OK);
    WITH(min_p, 1.0f, SPECDEC_OK);
    WITH(min_p, 0.0f, SPECDEC_OK);
    WITH(top_k, 1000, SPECDEC_OK);
    WITH(n_draft, SPECDEC_MAX_DRAFT, SPECDEC_OK);
    /* n_predict beyond the context: stops when the context is full (capacity = room) */
    p = ok;
    p.n_predict = 1 << 30;
    EXPECT(specdec_generate(e, PROMPT, 5, &p, out, 27, &n, NULL), SPECDEC_OK);
    SD_CHECK(n == 27, "huge n_predict: %d tokens", (int)n);
    /* NULL params = defaults */
    EXPECT(specdec_generate(e, PROMPT, 5, NULL, out, 64, &n, NULL), SPECDEC_OK);
    /* the engine is still fine after all that */
    EXPECT(specdec_generate(e, PROMPT, 5, &ok, out, 64, &n, NULL), SPECDEC_OK);
    SD_CHECK(n == 8, "after bad requests: %d tokens", (int)n);

    /* low-level access */
    float logits[4 * V];
    const int32_t toks[4] = {1, 2, 3, 4};
    EXPECT(specdec_engine_forward(e, SPECDEC_ROLE_TARGET, toks, 4, 0, logits), SPECDEC_OK);
    SD_CHECK(specdec_engine_kv_length(e, SPECDEC_ROLE_TARGET) == 4, "kv length");
    SD_CHECK(!memcmp(logits + 3 * V, g_t + (size_t)(3 * V + 4) * V, V * sizeof(float)), "forward logits row");
    EXPECT(specdec_engine_forward(e, SPECDEC_ROLE_TARGET, toks, 4, 5, logits), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_engine_forward(e, SPECDEC_ROLE_TARGET, toks, 4, -1, logits), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_engine_forward(e, SPECDEC_ROLE_TARGET, bad_hi, 2, 0, logits), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_engine_forward(e, SPECDEC_ROLE_TARGET, NULL, 2, 0, logits), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_engine_forward(e, SPECDEC_ROLE_TARGET, toks, 0, 0, logits), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_engine_forward(e, (specdec_role)7, toks, 1, 0, logits), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_engine_forward(e, SPECDEC_ROLE_TARGET, long_prompt, 4, 30, NULL), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_engine_kv_truncate(e, SPECDEC_ROLE_TARGET, 5), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_engine_kv_truncate(e, SPECDEC_ROLE_TARGET, -1), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_engine_kv_truncate(e, SPECDEC_ROLE_TARGET, 2), SPECDEC_OK);
    SD_CHECK(specdec_engine_kv_length(e, SPECDEC_ROLE_TARGET) == 2, "truncated length");
    EXPECT(specdec_engine_forward(e, SPECDEC_ROLE_TARGET, long_prompt, 30, 2, NULL), SPECDEC_OK);
    EXPECT(specdec_engine_forward(e, SPECDEC_ROLE_TARGET, long_prompt, 1, 32, NULL), SPECDEC_ERR_CONTEXT_FULL);
    EXPECT(specdec_engine_forward(e, SPECDEC_ROLE_TARGET, long_prompt, 2, 31, NULL), SPECDEC_ERR_CONTEXT_FULL);
    EXPECT(specdec_engine_forward(e, SPECDEC_ROLE_DRAFT, toks, 2, 0, logits), SPECDEC_OK);
    SD_CHECK(!memcmp(logits + V, g_d + 2 * V, V * sizeof(float)), "draft forward logits row");
    SD_CHECK(specdec_engine_kv_length(e, SPECDEC_ROLE_DRAFT) == 2, "draft kv length");
    SD_CHECK(specdec_engine_kv_length(NULL, SPECDEC_ROLE_DRAFT) == -1, "kv length of NULL");
    SD_CHECK(specdec_engine_n_ctx(e) == 32 && specdec_engine_backend(e) == SPECDEC_BACKEND_CPU, "n_ctx / backend");
    specdec_engine_free(e);
    e = make_engine(0, 32, NULL, NULL, NULL);
    EXPECT(specdec_engine_forward(e, SPECDEC_ROLE_DRAFT, toks, 1, 0, logits), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_engine_kv_truncate(e, SPECDEC_ROLE_DRAFT, 0), SPECDEC_ERR_INVALID_ARGUMENT);
    SD_CHECK(specdec_engine_kv_length(e, SPECDEC_ROLE_DRAFT) == -1, "kv length without draft");
    specdec_engine_free(e);
    specdec_engine_free(NULL);
#undef WITH
}

/* Pairs that disagree are refused, naming both values (fake models: only cfg is read
 * before the runners are made). */
static void test_mismatch(void) {
    specdec_model *t = calloc(1, sizeof *t), *d = calloc(1, sizeof *d);
    t->w.cfg.vocab_size = 1000;
    t->w.cfg.bos_id = 1;
    t->w.cfg.n_eos = 1;
    t->w.cfg.eos_ids[0] = 2;
    t->w.cfg.max_position_embeddings = 256;
    strcpy(t->path, "/models/target");
    *d = *t;
    strcpy(d->path, "/models/draft");
    specdec_engine *e = (specdec_engine *)0x1;
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    d->w.cfg.vocab_size = 1001;
    EXPECT(specdec_engine_create(t, d, &ep, &e), SPECDEC_ERR_MODEL_MISMATCH);
    SD_CHECK(e == NULL, "out_engine not NULL after failure");
    SD_CHECK(strstr(specdec_last_error(), "1000") && strstr(specdec_last_error(), "1001"), "message: %s",
             specdec_last_error());
    d->w.cfg.vocab_size = 1000;
    d->w.cfg.bos_id = 0;
    EXPECT(specdec_engine_create(t, d, &ep, &e), SPECDEC_ERR_MODEL_MISMATCH);
    SD_CHECK(strstr(specdec_last_error(), "bos_token_id 1") && strstr(specdec_last_error(), "bos_token_id 0"),
             "message: %s", specdec_last_error());
    d->w.cfg.bos_id = 1;
    d->w.cfg.n_eos = 2;
    d->w.cfg.eos_ids[1] = 7;
    EXPECT(specdec_engine_create(t, d, &ep, &e), SPECDEC_ERR_MODEL_MISMATCH);
    SD_CHECK(strstr(specdec_last_error(), "[2]") && strstr(specdec_last_error(), "[2,7]"), "message: %s",
             specdec_last_error());
    d->w.cfg.n_eos = 1;
    d->w.cfg.eos_ids[0] = 3;
    EXPECT(specdec_engine_create(t, d, &ep, &e), SPECDEC_ERR_MODEL_MISMATCH);
    EXPECT(specdec_engine_create(NULL, d, &ep, &e), SPECDEC_ERR_INVALID_ARGUMENT);
    EXPECT(specdec_engine_create(t, d, &ep, NULL), SPECDEC_ERR_INVALID_ARGUMENT);
    ep.n_ctx = -1;
    EXPECT(specdec_engine_create(t, NULL, &ep, &e), SPECDEC_ERR_INVALID_ARGUMENT);
    ep.n_ctx = 0;
    ep.backend = (specdec_backend)9;
    EXPECT(specdec_engine_create(t, NULL, &ep, &e), SPECDEC_ERR_INVALID_ARGUMENT);
    ep = specdec_engine_default_params();
    ep.reserved_i[0] = 1;
    EXPECT(specdec_engine_create(t, NULL, &ep, &e), SPECDEC_ERR_INVALID_ARGUMENT);
    free(t);
    free(d);

    /* runner level */
    mk_runner *mt = mk_runner_new(2, g_t, V, 32, 32);
    mk_runner *md = mk_runner_new(1, g_d, V - 1, 32, 32);
    e = NULL;
    EXPECT(sd_engine_create_from_runners(&mt->base, &md->base, NULL, &e), SPECDEC_ERR_MODEL_MISMATCH);
    SD_CHECK(e == NULL, "engine after mismatch");
}

/* Two threads on one engine: the second gets SPECDEC_ERR_BUSY, and the first finishes
 * unharmed. Thread A blocks inside its token callback until B has made its calls. */
typedef struct busy_ctx {
    specdec_engine *e;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int a_inside, b_done;
    specdec_status b_gen, b_fwd, b_trunc;
} busy_ctx;

static int busy_cb(void *ud, int32_t tok, const char *piece, size_t len) {
    (void)tok;
    (void)piece;
    (void)len;
    busy_ctx *c = ud;
    pthread_mutex_lock(&c->mu);
    if (!c->a_inside) {
        c->a_inside = 1;
        pthread_cond_broadcast(&c->cv);
        while (!c->b_done) pthread_cond_wait(&c->cv, &c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return 0;
}

static void *busy_b(void *arg) {
    busy_ctx *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->a_inside) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    int32_t out[64], n;
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = 4;
    c->b_gen = specdec_generate(c->e, PROMPT, 5, &gp, out, 64, &n, NULL);
    const int32_t t = 1;
    c->b_fwd = specdec_engine_forward(c->e, SPECDEC_ROLE_TARGET, &t, 1, 0, NULL);
    c->b_trunc = specdec_engine_kv_truncate(c->e, SPECDEC_ROLE_TARGET, 0);
    pthread_mutex_lock(&c->mu);
    c->b_done = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static void test_busy(void) {
    busy_ctx c;
    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    c.e = make_engine(1, CTX, NULL, NULL, NULL);
    specdec_engine *plain = make_engine(1, CTX, NULL, NULL, NULL);
    pthread_t tb;
    pthread_create(&tb, NULL, busy_b, &c);
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = 20;
    gp.callback = busy_cb;
    gp.user_data = &c;
    int32_t out[64], ref[64], n = 0, nr = 0;
    specdec_status st = specdec_generate(c.e, PROMPT, 5, &gp, out, 64, &n, NULL);
    pthread_join(tb, NULL);
    SD_CHECK(st == SPECDEC_OK && n == 20, "thread A: %s", specdec_status_string(st));
    SD_CHECK(c.b_gen == SPECDEC_ERR_BUSY && c.b_fwd == SPECDEC_ERR_BUSY && c.b_trunc == SPECDEC_ERR_BUSY,
             "thread B got %d %d %d, expected BUSY", (int)c.b_gen, (int)c.b_fwd, (int)c.b_trunc);
    gp.callback = NULL;
    specdec_generate(plain, PROMPT, 5, &gp, ref, 64, &nr, NULL);
    SD_CHECK(nr == n && !memcmp(out, ref, sizeof(int32_t) * (size_t)n), "A's output disturbed by B");
    /* free again after the contention: usable */
    st = specdec_generate(c.e, PROMPT, 5, &gp, out, 64, &n, NULL);
    SD_CHECK(st == SPECDEC_OK, "engine unusable after BUSY");
    specdec_engine_free(c.e);
    specdec_engine_free(plain);
    pthread_mutex_destroy(&c.mu);
    pthread_cond_destroy(&c.cv);
}

/* Runner failures: a plain error is returned and the engine stays usable; DEVICE_LOST
 * is sticky until free. */
static void test_runner_failures(void) {
    mk_runner *mt, *md;
    specdec_engine *e = make_engine(1, CTX, NULL, &mt, &md);
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = 20;
    int32_t out[64], n = 0;
    md->fail_at_call = md->calls + 3;
    md->fail_status = SPECDEC_ERR_INTERNAL;
    EXPECT(specdec_generate(e, PROMPT, 5, &gp, out, 64, &n, NULL), SPECDEC_ERR_INTERNAL);
    SD_CHECK(strstr(specdec_engine_last_error(e), "injected") != NULL, "detail: %s", specdec_engine_last_error(e));
    EXPECT(specdec_generate(e, PROMPT, 5, &gp, out, 64, &n, NULL), SPECDEC_OK);
    mt->fail_at_call = mt->calls + 2;
    mt->fail_status = SPECDEC_ERR_DEVICE_LOST;
    EXPECT(specdec_generate(e, PROMPT, 5, &gp, out, 64, &n, NULL), SPECDEC_ERR_DEVICE_LOST);
    EXPECT(specdec_generate(e, PROMPT, 5, &gp, out, 64, &n, NULL), SPECDEC_ERR_DEVICE_LOST);
    const int32_t t = 1;
    EXPECT(specdec_engine_forward(e, SPECDEC_ROLE_TARGET, &t, 1, 0, NULL), SPECDEC_ERR_DEVICE_LOST);
    specdec_engine_free(e);
}

/* Every allocation of engine creation fails in turn: OOM, no leak (ASan), runners freed. */
static void test_alloc_failures(void) {
    int created = 0;
    for (long k = 0; k < 100 && !created; k++) {
        mk_runner *mt = mk_runner_new(2, g_t, V, CTX, CTX);
        mk_runner *md = mk_runner_new(1, g_d, V, CTX, CTX);
        specdec_engine *e = NULL;
        sd_alloc_fail_after(k);
        specdec_status st = sd_engine_create_from_runners(&mt->base, &md->base, NULL, &e);
        sd_alloc_fail_after(-1);
        if (st == SPECDEC_OK) {
            created = 1;
            SD_CHECK(k > 0, "no allocation in create?");
            int32_t out[128], n;
            SD_CHECK(specdec_generate(e, PROMPT, 5, NULL, out, 128, &n, NULL) == SPECDEC_OK, "generate after k=%ld", k);
            specdec_engine_free(e);
        } else {
            SD_CHECK(st == SPECDEC_ERR_OUT_OF_MEMORY && e == NULL, "k=%ld: %s", k, specdec_status_string(st));
        }
    }
    SD_CHECK(created, "create never succeeded");

    /* generating allocates nothing (no tokenizer): every allocation would fail */
    specdec_engine *e = make_engine(1, CTX, NULL, NULL, NULL);
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = 60;
    gp.adaptive_draft = 1;
    int32_t out[64], n;
    sd_alloc_fail_after(0);
    specdec_status st = specdec_generate(e, PROMPT, 5, &gp, out, 64, &n, NULL);
    long count = sd_alloc_count();
    sd_alloc_fail_after(-1);
    SD_CHECK(st == SPECDEC_OK && count == 0, "generate allocated %ld times (%s)", count, specdec_status_string(st));
    specdec_engine_free(e);
}

int main(void) {
    mk_fill_table(g_t, V * V, V, 1.5, 0.05, 7);
    mk_fill_table(g_d, V, V, 1.5, 0.05, 8);
    test_equalities();
    test_determinism_and_self_draft();
    test_stops();
    test_stats();
    test_adaptive_rule();
    test_bad_requests();
    test_mismatch();
    test_busy();
    test_runner_failures();
    test_alloc_failures();
    return sd_test_done();
}
