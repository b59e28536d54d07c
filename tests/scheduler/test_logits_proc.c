/* test_logits_proc.c — logits processors (specdec_generate_params since 0.5: logit_bias,
 * min_tokens, stop_token_ids, presence / frequency / repetition penalties) on the bundled pair
 * and its EAGLE-3 head. (Exactness in law: tests/engine/test_logits_proc_dist.c.)
 *  1. Every drafter gives plain decoding's output with the same processors: the draft model's
 *     chains and trees, the n-gram drafter, the EAGLE-3 head; GREEDY and MATCH (equal outputs
 *     are what exactness means there); four processor settings.
 *  2. The scheduler (runner groups, several requests in one round) gives specdec_generate's
 *     output and statistics, processors or not in one batch.
 *  3. The processors act: a -100 bias on plain decoding's first token changes it; presence and
 *     frequency penalties of 2 leave fewer repeated tokens than none; stop_token_ids stop after
 *     the id (reason TOKEN_ID, the id last in the output); min_tokens holds the stop id off
 *     until then.
 *  4. Log-probabilities stay those of the raw logits: with processors, a speculative run reports
 *     the same records as plain decoding of the same tokens.
 *  5. Validation: every bad value is INVALID_ARGUMENT from specdec_generate_params_validate (or,
 *     for ids outside the vocabulary, from specdec_generate and specdec_scheduler_submit).
 *  6. vLLM's masks (since 0.5.2): allowed_token_ids (two ids in three) and bad words of 1, 2
 *     and 3 ids taken from the masked output; parts 1 and 2 run them as a fifth setting; here,
 *     plain and speculative (greedy, match, rejection): every id is allowed and no bad word
 *     occurs in the output's token sequence, and the bad words changed the output.
 *  7. specdec_tokenize_bad_words: each word's sequences by vLLM's rule, computed here from
 *     specdec_tokenize (lstrip; " " + word kept when its first id differs and its length is
 *     equal), for words where the rule keeps and drops the spaced variant; the refusals (an
 *     empty or all-white-space word named by index, 129 sequences). */
#include "sched_common.h"

#include <math.h>

#define NPRED 24
#define MAXP 64

typedef struct cfg {
    const char *name;
    int32_t n_bias;
    specdec_logit_bias bias[3];
    int32_t min_tokens;
    float presence, frequency, repetition;
    int masks; /* 1: g_allowed and g_bad (part 6's) */
} cfg;

/* part 6's masks, built in masks_init: ids t with t % 3 != 1; three bad words */
static int32_t *g_allowed, g_n_allowed;
static int32_t g_bad_ids[6], g_bad_off[4] = {0, 1, 3, 6};

static void apply_cfg(specdec_generate_params *gp, const cfg *c) {
    gp->logit_bias = c->n_bias ? c->bias : NULL;
    gp->n_logit_bias = c->n_bias;
    gp->min_tokens = c->min_tokens;
    gp->presence_penalty = c->presence;
    gp->frequency_penalty = c->frequency;
    gp->repetition_penalty = c->repetition;
    if (c->masks) {
        gp->allowed_token_ids = g_allowed;
        gp->n_allowed_token_ids = g_n_allowed;
        gp->bad_words_ids = g_bad_ids;
        gp->bad_words_offsets = g_bad_off;
        gp->n_bad_words = 3;
    }
}

static int32_t gen(specdec_engine *e, const int32_t *prompt, int32_t n_prompt, const specdec_generate_params *gp,
                   int32_t *out, specdec_stats *st) {
    int32_t n = 0;
    specdec_stats local;
    specdec_status s = specdec_generate(e, prompt, n_prompt, gp, out, NPRED, &n, st ? st : &local);
    if (s != SPECDEC_OK) {
        fprintf(stderr, "generate: %s: %s\n", specdec_status_string(s), specdec_engine_last_error(e));
        return -1;
    }
    return n;
}

static int repeats(const int32_t *t, int32_t n) {
    int r = 0;
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < i; j++)
            if (t[j] == t[i]) {
                r++;
                break;
            }
    return r;
}

static const cfg CFGS[] = {
    {"bias", 3, {{5, 3.0f}, {11, -100.0f}, {30, 1.5f}}, 0, 0.0f, 0.0f, 0.0f, 0},
    {"presence+frequency", 0, {{0, 0}}, 0, 1.1f, 0.6f, 0.0f, 0},
    {"repetition 1.3", 0, {{0, 0}}, 0, 0.0f, 0.0f, 1.3f, 0},
    {"all, min_tokens 8", 2, {{7, 2.0f}, {19, -4.0f}}, 8, 0.4f, -0.3f, 1.15f, 0},
    {"all + allowed + bad words", 2, {{8, 2.0f}, {19, -4.0f}}, 8, 0.4f, -0.3f, 1.15f, 1},
};
#define N_CFGS (int)(sizeof CFGS / sizeof CFGS[0])

static int g_quick; /* "quick" (the sanitizer builds): part 1 with the last setting (all) and one prompt */

/* Part 1: every drafter equals plain decoding. */
static void part1(sc_env *e, specdec_engine *eh) {
    int32_t prompt[MAXP], ref[NPRED], out[NPRED];
    const int32_t widths[3] = {2, 2, 1};
    for (int k = g_quick ? N_CFGS - 1 : 0; k < N_CFGS; k++)
        for (int mode = 0; mode < 2; mode++)
            for (int pi = 0; pi < 2 - g_quick; pi++) {
                const int32_t np = sc_encode(e, SC_PROMPTS[pi + 2 * (k % 2)], prompt, MAXP);
                specdec_generate_params gp = sc_params(mode, 0xabc0 + (uint64_t)k, NPRED, 4);
                apply_cfg(&gp, &CFGS[k]);
                gp.draft_method = SPECDEC_DRAFT_NONE;
                const int32_t nr = gen(e->ref, prompt, np, &gp, ref, NULL);
                for (int d = 0; d < 5; d++) {
                    specdec_generate_params g2 = gp;
                    specdec_engine *eng = e->ref;
                    const char *what = "model chain";
                    g2.draft_method = SPECDEC_DRAFT_MODEL;
                    if (d == 1) {
                        what = "model tree 2,2,1";
                        SD_CHECK(specdec_generate_params_set_tree(&g2, widths, 3) == SPECDEC_OK, "tree");
                    } else if (d == 2) {
                        what = "ngram";
                        g2.draft_method = SPECDEC_DRAFT_NGRAM;
                        g2.ngram_cost = SPECDEC_NGRAM_COST_OFF;
                    } else if (d == 3) {
                        what = "eagle3 chain";
                        g2.draft_method = SPECDEC_DRAFT_EAGLE3;
                        eng = eh;
                    } else if (d == 4) {
                        what = "eagle3 tree";
                        g2.draft_method = SPECDEC_DRAFT_EAGLE3;
                        g2.draft_nodes = 8;
                        eng = eh;
                    }
                    specdec_stats st;
                    const int32_t n = gen(eng, prompt, np, &g2, out, &st);
                    SD_CHECK(nr > 0 && n == nr && sc_same(out, ref, n), "part 1: %s, %s, %s, prompt %d: equals plain decoding",
                             CFGS[k].name, mode ? "match" : "greedy", what, pi);
                    if (d == 0) SD_CHECK(st.n_drafted > 0, "part 1: %s: drafted", CFGS[k].name);
                }
            }
}

/* Part 2: the scheduler equals specdec_generate (mixed batch). */
static void part2(sc_env *e) {
    enum { NR = 8 };
    int32_t prompt[NR][MAXP], np[NR], ref[NR][NPRED], nref[NR], out[NPRED];
    specdec_generate_params gp[NR];
    specdec_stats rst[NR];
    specdec_engine_params ep = sc_engine_params();
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = 4;
    specdec_scheduler *s = NULL;
    SD_CHECK(specdec_scheduler_create(e->tm, e->dm, &ep, &sp, &s) == SPECDEC_OK, "part 2: scheduler: %s",
             specdec_last_error());
    if (!s) return;
    specdec_request_id id[NR];
    for (int i = 0; i < NR; i++) {
        np[i] = sc_encode(e, SC_PROMPTS[i % SC_N_PROMPTS], prompt[i], MAXP);
        gp[i] = sc_params(i % 2, 77 + (uint64_t)i, NPRED, 3);
        if (i % 4 != 3) apply_cfg(&gp[i], &CFGS[i % N_CFGS]); /* one in four without processors */
        if (i == 5) gp[i].draft_method = SPECDEC_DRAFT_NGRAM, gp[i].ngram_cost = SPECDEC_NGRAM_COST_OFF;
        nref[i] = gen(e->ref, prompt[i], np[i], &gp[i], ref[i], &rst[i]);
    }
    for (int i = 0; i < NR; i++)
        SD_CHECK(specdec_scheduler_submit(s, prompt[i], np[i], &gp[i], &id[i]) == SPECDEC_OK, "part 2: submit %d: %s", i,
                 specdec_scheduler_last_error(s));
    for (int i = 0; i < NR; i++) {
        int32_t n = 0;
        specdec_status outcome = SPECDEC_OK;
        specdec_stats st;
        SD_CHECK(specdec_scheduler_wait(s, id[i], -1, out, NPRED, &n, &st, &outcome) == SPECDEC_OK && outcome == SPECDEC_OK,
                 "part 2: wait %d", i);
        SD_CHECK(n == nref[i] && sc_same(out, ref[i], n) && st.n_rounds == rst[i].n_rounds &&
                     st.n_accepted == rst[i].n_accepted && st.stop_reason == rst[i].stop_reason,
                 "part 2: request %d equals specdec_generate (%d vs %d tokens)", i, (int)n, (int)nref[i]);
    }
    specdec_scheduler_free(s);
}

/* Part 3: the processors act. */
static void part3(sc_env *e) {
    int32_t prompt[MAXP], base[NPRED], out[NPRED];
    const int32_t np = sc_encode(e, SC_PROMPTS[0], prompt, MAXP);
    specdec_generate_params gp = sc_params(0, 0, NPRED, 4);
    const int32_t nb = gen(e->ref, prompt, np, &gp, base, NULL);
    SD_CHECK(nb == NPRED, "part 3: baseline");
    if (nb != NPRED) return;
    specdec_logit_bias ban = {base[0], -100.0f};
    specdec_generate_params g2 = gp;
    g2.logit_bias = &ban;
    g2.n_logit_bias = 1;
    int32_t n = gen(e->ref, prompt, np, &g2, out, NULL);
    SD_CHECK(n > 0 && out[0] != base[0], "part 3: a -100 bias on the first token changes it");
    g2 = gp;
    g2.presence_penalty = 2.0f;
    g2.frequency_penalty = 2.0f;
    n = gen(e->ref, prompt, np, &g2, out, NULL);
    SD_CHECK(n == NPRED && repeats(out, n) < repeats(base, nb), "part 3: penalties of 2 repeat less: %d vs %d",
             repeats(out, n), repeats(base, nb));
    /* a stop id: the first token of the baseline's output that did not occur before it, at index >= 3 */
    int32_t at = -1;
    for (int32_t i = 3; i < nb && at < 0; i++) {
        int seen = 0;
        for (int32_t j = 0; j < i; j++) seen |= base[j] == base[i];
        if (!seen) at = i;
    }
    SD_CHECK(at > 0, "part 3: a stop id candidate");
    if (at < 0) return;
    const int32_t stop_id = base[at];
    g2 = gp;
    g2.stop_token_ids = &stop_id;
    g2.n_stop_token_ids = 1;
    specdec_stats st;
    n = gen(e->ref, prompt, np, &g2, out, &st);
    SD_CHECK(n == at + 1 && sc_same(out, base, n) && st.stop_reason == SPECDEC_STOP_TOKEN_ID,
             "part 3: stop_token_ids stop after the id (%d tokens, reason %s)", (int)n,
             specdec_stop_reason_name(st.stop_reason));
    g2.min_tokens = at + 2;
    n = gen(e->ref, prompt, np, &g2, out, &st);
    int early = 0;
    for (int32_t i = 0; i < n && i < at + 2; i++) early |= out[i] == stop_id;
    SD_CHECK(n >= at + 2 && !early && sc_same(out, base, at), "part 3: min_tokens %d holds the stop id off (%d tokens)",
             (int)(at + 2), (int)n);
}

/* Part 4: log-probabilities are the raw logits'. */
typedef struct lprec {
    int32_t n;
    int32_t tok[NPRED];
    float lp[NPRED];
} lprec;
static int on_lp(void *u, const specdec_token_logprobs *v) {
    lprec *r = u;
    if (r->n < NPRED) r->tok[r->n] = v->token, r->lp[r->n] = v->logprob, r->n++;
    return 0;
}
static void part4(sc_env *e) {
    int32_t prompt[MAXP], out[NPRED];
    const int32_t np = sc_encode(e, SC_PROMPTS[1], prompt, MAXP);
    for (int mode = 0; mode < 2; mode++) {
        lprec a = {0}, b = {0};
        specdec_generate_params gp = sc_params(mode, 5, NPRED, 4);
        apply_cfg(&gp, &CFGS[3]);
        gp.logprobs = 1;
        gp.logprob_callback = on_lp;
        gp.draft_method = SPECDEC_DRAFT_NONE;
        gp.logprob_user_data = &a;
        const int32_t n1 = gen(e->ref, prompt, np, &gp, out, NULL);
        gp.draft_method = SPECDEC_DRAFT_MODEL;
        gp.logprob_user_data = &b;
        const int32_t n2 = gen(e->ref, prompt, np, &gp, out, NULL);
        /* CPU: bitwise (batch-invariant rows); CUDA: a verify pass's rows vs one-token rows, within 1e-3 */
        int same_lp = 1;
        for (int32_t i = 0; i < a.n; i++)
            same_lp &= sc_backend == SPECDEC_BACKEND_CPU ? a.lp[i] == b.lp[i] : fabsf(a.lp[i] - b.lp[i]) <= 1e-3f;
        SD_CHECK(n1 > 0 && n1 == n2 && a.n == n1 && b.n == n2 && !memcmp(a.tok, b.tok, sizeof a.tok) && same_lp,
                 "part 4 (%s): speculative logprobs equal plain decoding's", mode ? "match" : "greedy");
        /* raw: the first token without processors, then forced by a +100 bias: the same record
         * (processed logits would give it a logprob near 0) */
        lprec c = {0}, d = {0};
        gp = sc_params(mode, 5, 1, 4);
        gp.logprobs = 1;
        gp.logprob_callback = on_lp;
        gp.logprob_user_data = &c;
        (void)gen(e->ref, prompt, np, &gp, out, NULL);
        specdec_logit_bias force = {c.tok[0], 100.0f};
        gp.logit_bias = &force;
        gp.n_logit_bias = 1;
        gp.logprob_user_data = &d;
        (void)gen(e->ref, prompt, np, &gp, out, NULL);
        SD_CHECK(c.n == 1 && d.n == 1 && d.tok[0] == c.tok[0] && d.lp[0] == c.lp[0] && c.lp[0] < -1e-3f,
                 "part 4 (%s): a token forced by a bias reports the raw logits' logprob (%g vs %g)",
                 mode ? "match" : "greedy", (double)d.lp[0], (double)c.lp[0]);
    }
}

/* Part 5: validation. */
static void part5(sc_env *e) {
    int32_t prompt[MAXP], out[NPRED], n;
    const int32_t np = sc_encode(e, SC_PROMPTS[0], prompt, MAXP);
    specdec_logit_bias b[2] = {{5, 1.0f}, {6, 1.0f}};
    const int32_t ids[2] = {5, 6}, neg[2] = {5, -1}, off_ok[2] = {0, 2}, off_empty[3] = {0, 1, 1}, off_start[2] = {1, 2},
                  off_big[2] = {0, SPECDEC_MAX_BAD_WORDS_TOKENS + 1};
    for (int k = 0; k < 26; k++) {
        specdec_generate_params gp = sc_params(0, 0, 4, 2);
        const char *what = "";
        b[1].token = 6, b[1].bias = 1.0f;
        switch (k) {
        case 0: gp.n_logit_bias = -1, what = "n_logit_bias -1"; break;
        case 1: gp.n_logit_bias = 1, what = "n_logit_bias 1, logit_bias NULL"; break;
        case 2: gp.logit_bias = b, gp.n_logit_bias = SPECDEC_MAX_LOGIT_BIAS + 1, what = "n_logit_bias too many"; break;
        case 3: b[1].bias = 100.5f, gp.logit_bias = b, gp.n_logit_bias = 2, what = "bias 100.5"; break;
        case 4: b[1].bias = NAN, gp.logit_bias = b, gp.n_logit_bias = 2, what = "bias NaN"; break;
        case 5: b[1].token = -1, gp.logit_bias = b, gp.n_logit_bias = 2, what = "token -1"; break;
        case 6: gp.min_tokens = -1, what = "min_tokens -1"; break;
        case 7: gp.n_stop_token_ids = 1, what = "stop_token_ids NULL"; break;
        case 8: gp.stop_token_ids = ids, gp.n_stop_token_ids = SPECDEC_MAX_STOP_TOKEN_IDS + 1, what = "65 stop ids"; break;
        case 9: gp.presence_penalty = 2.5f, what = "presence 2.5"; break;
        case 10: gp.frequency_penalty = -2.01f, what = "frequency -2.01"; break;
        case 11: gp.repetition_penalty = -1.0f, what = "repetition -1"; break;
        case 12: gp.repetition_penalty = NAN, what = "repetition NaN"; break;
        case 13: gp.repetition_penalty = 101.0f, what = "repetition 101"; break;
        case 14: gp.reserved_i[3] = 1, what = "reserved_i[3]"; break;
        case 15: gp.reserved[2] = 1, what = "reserved[2]"; break;
        case 16: gp.n_allowed_token_ids = 1, what = "allowed_token_ids NULL"; break;
        case 17: gp.allowed_token_ids = ids, what = "allowed_token_ids with n 0"; break;
        case 18: gp.allowed_token_ids = neg, gp.n_allowed_token_ids = 2, what = "allowed_token_ids[1] -1"; break;
        case 19: gp.allowed_token_ids = ids, gp.n_allowed_token_ids = SPECDEC_MAX_ALLOWED_TOKEN_IDS + 1, what = "too many allowed"; break;
        case 20: gp.n_bad_words = 1, gp.bad_words_ids = ids, what = "bad_words_offsets NULL"; break;
        case 21: gp.n_bad_words = SPECDEC_MAX_BAD_WORDS + 1, gp.bad_words_ids = ids, gp.bad_words_offsets = off_ok, what = "129 bad words"; break;
        case 22: gp.n_bad_words = 2, gp.bad_words_ids = ids, gp.bad_words_offsets = off_empty, what = "an empty bad word"; break;
        case 23: gp.n_bad_words = 1, gp.bad_words_ids = ids, gp.bad_words_offsets = off_start, what = "bad_words_offsets[0] 1"; break;
        case 24: gp.n_bad_words = 1, gp.bad_words_ids = neg, gp.bad_words_offsets = off_ok, what = "bad word id -1"; break;
        case 25: gp.n_bad_words = 1, gp.bad_words_ids = ids, gp.bad_words_offsets = off_big, what = "1025 bad word ids"; break;
        }
        SD_CHECK(specdec_generate_params_validate(&gp) == SPECDEC_ERR_INVALID_ARGUMENT, "part 5: %s refused", what);
        SD_CHECK(specdec_generate(e->ref, prompt, np, &gp, out, NPRED, &n, NULL) == SPECDEC_ERR_INVALID_ARGUMENT,
                 "part 5: generate refuses %s", what);
    }
    /* ids outside the vocabulary: known only with the model */
    specdec_generate_params gp = sc_params(0, 0, 4, 2);
    specdec_logit_bias big = {1 << 24, 1.0f};
    gp.logit_bias = &big;
    gp.n_logit_bias = 1;
    SD_CHECK(specdec_generate_params_validate(&gp) == SPECDEC_OK, "part 5: a large id passes without the model");
    SD_CHECK(specdec_generate(e->ref, prompt, np, &gp, out, NPRED, &n, NULL) == SPECDEC_ERR_INVALID_ARGUMENT,
             "part 5: generate refuses a bias id outside the vocabulary");
    gp = sc_params(0, 0, 4, 2);
    const int32_t far[1] = {1 << 24}, far_off[2] = {0, 1};
    gp.allowed_token_ids = far;
    gp.n_allowed_token_ids = 1;
    SD_CHECK(specdec_generate_params_validate(&gp) == SPECDEC_OK &&
                 specdec_generate(e->ref, prompt, np, &gp, out, NPRED, &n, NULL) == SPECDEC_ERR_INVALID_ARGUMENT &&
                 strstr(specdec_engine_last_error(e->ref), "allowed_token_ids[0]"),
             "part 5: generate refuses an allowed id outside the vocabulary, naming it");
    gp = sc_params(0, 0, 4, 2);
    gp.bad_words_ids = far;
    gp.bad_words_offsets = far_off;
    gp.n_bad_words = 1;
    SD_CHECK(specdec_generate(e->ref, prompt, np, &gp, out, NPRED, &n, NULL) == SPECDEC_ERR_INVALID_ARGUMENT &&
                 strstr(specdec_engine_last_error(e->ref), "bad_words_ids[0]"),
             "part 5: generate refuses a bad word id outside the vocabulary, naming it");
    gp = sc_params(0, 0, 4, 2);
    const int32_t bad_id = 1 << 24;
    gp.stop_token_ids = &bad_id;
    gp.n_stop_token_ids = 1;
    specdec_engine_params ep = sc_engine_params();
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    specdec_scheduler *s = NULL;
    specdec_request_id id = 0;
    SD_CHECK(specdec_scheduler_create(e->tm, e->dm, &ep, &sp, &s) == SPECDEC_OK, "part 5: scheduler");
    if (s)
        SD_CHECK(specdec_scheduler_submit(s, prompt, np, &gp, &id) == SPECDEC_ERR_INVALID_ARGUMENT,
                 "part 5: submit refuses a stop id outside the vocabulary");
    specdec_scheduler_free(s);
}

/* 1 if bad word i occurs in t[0..n) */
static int has_bad(const int32_t *t, int32_t n, int i) {
    const int32_t k = g_bad_off[i + 1] - g_bad_off[i];
    for (int32_t a = 0; a + k <= n; a++)
        if (!memcmp(t + a, g_bad_ids + g_bad_off[i], (size_t)k * sizeof *t)) return 1;
    return 0;
}

/* Part 6's masks: the allowed ids, then bad words from the output under that mask alone. */
static int masks_init(sc_env *e) {
    specdec_model_info mi;
    if (specdec_model_get_info(e->tm, &mi) != SPECDEC_OK) return 1;
    g_allowed = malloc((size_t)mi.vocab_size * sizeof *g_allowed);
    if (!g_allowed) return 1;
    for (int32_t t = 0; t < mi.vocab_size; t++)
        if (t % 3 != 1) g_allowed[g_n_allowed++] = t;
    int32_t prompt[MAXP], out[NPRED];
    const int32_t np = sc_encode(e, SC_PROMPTS[0], prompt, MAXP);
    specdec_generate_params gp = sc_params(0, 0, NPRED, 4);
    gp.allowed_token_ids = g_allowed;
    gp.n_allowed_token_ids = g_n_allowed;
    if (gen(e->ref, prompt, np, &gp, out, NULL) != NPRED) return 1;
    const int32_t pick[6] = {out[2], out[5], out[6], out[9], out[10], out[11]};
    memcpy(g_bad_ids, pick, sizeof pick);
    return 0;
}

/* Part 6: the masks act, plain and speculative. */
static void part6(sc_env *e) {
    int32_t prompt[MAXP], out[NPRED];
    for (int pi = 0; pi < 2; pi++) {
        const int32_t np = sc_encode(e, SC_PROMPTS[pi], prompt, MAXP);
        for (int v = 0; v < 6; v++) {
            const specdec_verify_mode mode = v % 3 == 0 ? SPECDEC_VERIFY_GREEDY : v % 3 == 1 ? SPECDEC_VERIFY_MATCH
                                                                                          : SPECDEC_VERIFY_REJECTION;
            specdec_generate_params gp = sc_params(v % 3 != 0, 0x6a5 + (uint64_t)v, NPRED, 4);
            gp.verify = mode;
            const cfg masks_only = {"masks", 0, {{0, 0}}, 0, 0.0f, 0.0f, 0.0f, 1};
            apply_cfg(&gp, &masks_only);
            gp.draft_method = v < 3 ? SPECDEC_DRAFT_NONE : SPECDEC_DRAFT_MODEL;
            const int32_t n = gen(e->ref, prompt, np, &gp, out, NULL);
            int bad_id = 0, bad_word = 0;
            for (int32_t i = 0; i < n; i++) bad_id |= out[i] % 3 == 1;
            for (int i = 0; i < 3; i++) bad_word |= has_bad(out, n, i);
            SD_CHECK(n > 0 && !bad_id && !bad_word, "part 6: prompt %d, %s, %s: allowed ids only (%d), no bad word (%d)",
                     pi, v < 3 ? "plain" : "model chain", specdec_verify_mode_name(mode), !bad_id, !bad_word);
            if (pi == 0 && v == 0) { /* the masked-only greedy output held every bad word's ids at 2, 5-6, 9-11 */
                int32_t ref[NPRED];
                specdec_generate_params g0 = sc_params(0, 0, NPRED, 4);
                g0.allowed_token_ids = g_allowed;
                g0.n_allowed_token_ids = g_n_allowed;
                const int32_t nr = gen(e->ref, prompt, np, &g0, ref, NULL);
                SD_CHECK(nr == NPRED && has_bad(ref, nr, 0) && has_bad(ref, nr, 1) && has_bad(ref, nr, 2) &&
                             sc_same(out, ref, 2) && out[2] != ref[2],
                         "part 6: the bad words changed the output at its first bad id");
            }
        }
    }
}

/* The ids of text without special tokens. */
static int32_t tok_ids(sc_env *e, const char *text, int32_t *ids) {
    int32_t n = 0;
    return specdec_tokenize(e->tok, text, strlen(text), 0, ids, 64, &n) == SPECDEC_OK ? n : -1;
}

/* Part 7: the words' sequences as vLLM makes them. */
static void part7(sc_env *e) {
    static const char *const words[] = {"Jesus", "  Lord", "Lord Jesus", "\tthe"};
    int32_t ids[SPECDEC_MAX_BAD_WORDS_TOKENS], off[SPECDEC_MAX_BAD_WORDS + 1], n = -1;
    SD_CHECK(specdec_tokenize_bad_words(e->tok, words, 4, ids, off, &n) == SPECDEC_OK, "part 7: %s",
             specdec_last_error());
    int32_t want[64], nw = 0, woff[9] = {0}, ns = 0, kept_spaced = 0, dropped_spaced = 0, per_word0 = 0;
    for (int i = 0; i < 4; i++) {
        char sp[32];
        const char *w = words[i] + strspn(words[i], " \t");
        snprintf(sp, sizeof sp, " %s", w);
        int32_t a[64], b[64];
        const int32_t na = tok_ids(e, w, a), nb = tok_ids(e, sp, b);
        memcpy(want + nw, a, (size_t)na * sizeof *a);
        nw += na, woff[++ns] = nw;
        if (nb == na && b[0] != a[0]) {
            memcpy(want + nw, b, (size_t)nb * sizeof *b);
            nw += nb, woff[++ns] = nw, kept_spaced++;
        } else {
            dropped_spaced++;
        }
        if (i == 0) per_word0 = ns;
    }
    SD_CHECK(n == ns && !memcmp(off, woff, (size_t)(ns + 1) * sizeof *off) && !memcmp(ids, want, (size_t)nw * sizeof *ids),
             "part 7: %d sequences as vLLM's rule gives (%d)", (int)n, (int)ns);
    SD_CHECK(kept_spaced > 0 && dropped_spaced > 0, "part 7: the words cover both branches (%d kept, %d dropped)",
             (int)kept_spaced, (int)dropped_spaced);
    static const char *const empty[] = {"a", " \t "};
    SD_CHECK(specdec_tokenize_bad_words(e->tok, empty, 2, ids, off, &n) == SPECDEC_ERR_INVALID_ARGUMENT && n == 0 &&
                 strstr(specdec_last_error(), "words[1]"),
             "part 7: a white-space word refused, named: %s", specdec_last_error());
    const char *many[SPECDEC_MAX_BAD_WORDS + 1];
    for (int i = 0; i <= SPECDEC_MAX_BAD_WORDS; i++) many[i] = "Jesus";
    SD_CHECK(specdec_tokenize_bad_words(e->tok, many, SPECDEC_MAX_BAD_WORDS / 2, ids, off, &n) == SPECDEC_OK &&
                 n == SPECDEC_MAX_BAD_WORDS / 2 * per_word0,
             "part 7: %d words of %d sequences each: at the limit", SPECDEC_MAX_BAD_WORDS / 2, (int)per_word0);
    SD_CHECK(specdec_tokenize_bad_words(e->tok, many, SPECDEC_MAX_BAD_WORDS + 1, ids, off, &n) ==
                 SPECDEC_ERR_INVALID_ARGUMENT,
             "part 7: more than %d sequences refused", SPECDEC_MAX_BAD_WORDS);
}

int main(int argc, char **argv) {
    const int cuda = sc_backend_arg(argc, argv);
    if (cuda < 0) return sd_test_skip("no CUDA device");
    if (argc < 4 + cuda) {
        fprintf(stderr, "usage: %s [--cuda] TARGET DRAFT EAGLE3_HEAD [quick]\n", argv[0]);
        return 2;
    }
    g_quick = argc > 4 + cuda && !strcmp(argv[4 + cuda], "quick");
    sc_env e;
    if (sc_env_load(&e, argv[1 + cuda], argv[2 + cuda])) return 1;
    specdec_model *head;
    specdec_engine *eh;
    if (sc_head_load(&e, argv[3 + cuda], &head, &eh)) return 1;
    SD_CHECK(masks_init(&e) == 0, "part 6: masks_init");
    part1(&e, eh);
    part2(&e);
    part3(&e);
    part4(&e);
    part5(&e);
    part6(&e);
    part7(&e);
    free(g_allowed);
    specdec_engine_free(eh);
    specdec_model_free(head);
    sc_env_free(&e);
    return sd_test_done();
}
