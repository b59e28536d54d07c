/* test_logprobs.c — log-probabilities of emitted tokens through specdec_generate (CPU
 * backend; docs/LOGPROBS.md) on the bundled models:
 *  (a) every reported value against the float64 reference of its own sequence: the target
 *      runner over the whole sequence in ONE forward, log_softmax in double; |diff| <= TOL,
 *      rank and the top list (order, ties to the lower id) exact by brute force;
 *  (b) independence of the drafter: model chains and trees (fixed shape and best-first),
 *      n-gram chains and trees, EAGLE-3 chains and trees, in greedy and match mode emit plain
 *      decoding's tokens AND plain decoding's log-probabilities (within TOL; how many are
 *      bitwise equal is printed); rejection mode: each against its own sequence's reference;
 *  (d) the calling contract: logprob_callback once per emitted token (count = n_generated),
 *      immediately before `callback` of the same token, positions n_prompt, n_prompt+1, ...;
 *      a non-zero return stops after that token (STOP_CALLBACK) even inside a round; EOS
 *      and stop strings cut rounds and get exactly the emitted tokens' records;
 *  (e) validation names the field (specdec_generate_params_validate and specdec_generate), the
 *      prompt_logprobs fields' too (tests/logprobs/test_prompt_logprobs.c checks their values).
 * Arguments: TARGET DRAFT EAGLE3_HEAD N_PREDICT [N_PROMPTS] (1 or 2, default 2: the sanitizer
 * builds run one prompt, every path but half the forward passes). */
#include "lp_common.h"

#include "sd_engine.h"
#include "sd_runner.h"

/* TOL: the largest |reported - float64 reference| allowed. The reported value is one float
 * rounding of a double computation over the same logits (<= 2^-24 relative, ~6e-7 at
 * |logprob| ~ 10); the rows themselves may differ from the one-forward reference in the last
 * bits (a verify pass batches rows differently), so the bound leaves room for that. */
#define TOL 1e-5

static int32_t g_np;                  /* n_predict */
static double g_max_ref_diff = 0.0;   /* over every (a) check */
static double g_max_plain_diff = 0.0; /* over every (b) comparison with plain decoding */
static int64_t g_bitwise = 0, g_compared = 0;

typedef struct cfg {
    const char *name;
    specdec_draft_method method;
    int32_t n_draft;
    int32_t tree[3], tree_depth, draft_nodes;
} cfg;

static const cfg PAIR_CFGS[] = {
    {"model chain", SPECDEC_DRAFT_MODEL, 4, {0}, 0, 0},
    {"model tree 2,2,1", SPECDEC_DRAFT_MODEL, 4, {2, 2, 1}, 3, 0},
    {"model nodes 8", SPECDEC_DRAFT_MODEL, 4, {0}, 0, 8},
    {"ngram chain", SPECDEC_DRAFT_NGRAM, 4, {0}, 0, 0},
    {"ngram tree 2,2,1", SPECDEC_DRAFT_NGRAM, 4, {2, 2, 1}, 3, 0},
};
static const cfg E3_CFGS[] = {
    {"eagle3 chain", SPECDEC_DRAFT_EAGLE3, 4, {0}, 0, 0},
    {"eagle3 tree 2,2,1", SPECDEC_DRAFT_EAGLE3, 4, {2, 2, 1}, 3, 0},
};
static const cfg PLAIN = {"plain", SPECDEC_DRAFT_NONE, 0, {0}, 0, 0};
static const char *const MODE_NAME[] = {"greedy", "match", "rejection"};

static int fwd_runner(void *ctx, const int32_t *tokens, int32_t n, float *logits) {
    sd_runner *r = ctx;
    sd_runner_truncate(r, 0);
    return sd_runner_forward_chunked(r, tokens, n, 0, logits) != SPECDEC_OK;
}

static specdec_generate_params params_for(const cfg *c, int mode) {
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = g_np;
    gp.ignore_eos = 1;
    gp.seed = 7;
    gp.temperature = mode == 0 ? 0.0f : 0.8f;
    gp.verify = mode == 0 ? SPECDEC_VERIFY_GREEDY : mode == 1 ? SPECDEC_VERIFY_MATCH : SPECDEC_VERIFY_REJECTION;
    gp.draft_method = c->method;
    gp.n_draft = c->n_draft;
    gp.draft_nodes = c->draft_nodes;
    gp.ngram_cost = SPECDEC_NGRAM_COST_OFF;
    if (c->tree_depth) SD_CHECK(specdec_generate_params_set_tree(&gp, c->tree, c->tree_depth) == SPECDEC_OK, "tree");
    return gp;
}

/* Generate with logprobs (top entries) into out / r; the count, or -1. */
static int32_t run(specdec_engine *e, const int32_t *prompt, int32_t np, specdec_generate_params *gp, int32_t top,
                   lp_rec *r, int32_t *out, specdec_stats *st) {
    lp_rec_init(r, np);
    lp_attach(gp, r, top);
    int32_t n = 0;
    const specdec_status s = specdec_generate(e, prompt, np, gp, out, LP_MAX, &n, st);
    SD_CHECK(s == SPECDEC_OK, "generate: %s", specdec_engine_last_error(e));
    SD_CHECK(st->n_generated == r->n && r->n == r->n_tok && r->bad_order == 0,
             "contract: n_generated %lld, %d logprob calls, %d token calls, %d breaches", (long long)st->n_generated,
             (int)r->n, (int)r->n_tok, (int)r->bad_order);
    return s == SPECDEC_OK ? n : -1;
}

/* (a) for one generation: the reference of prompt + out. */
static void check_own_ref(const char *name, specdec_engine *e, const int32_t *prompt, int32_t np, const int32_t *out,
                          int32_t n, const lp_rec *r, int32_t top) {
    int32_t seq[LP_MAX + 64];
    memcpy(seq, prompt, (size_t)np * sizeof *seq);
    memcpy(seq + np, out, (size_t)n * sizeof *seq);
    lp_ref ref;
    const int bad = lp_ref_build(&ref, fwd_runner, e->target, e->n_vocab, seq, np + n - 1);
    SD_CHECK(!bad, "%s: reference forward failed", name);
    if (!bad) lp_check_ref(name, r, &ref, np, out, n, top, TOL, &g_max_ref_diff);
    lp_ref_free(&ref);
}

/* (b) a speculative run against plain decoding's: same tokens, same records. */
static void check_vs_plain(const char *name, const lp_rec *a, const lp_rec *p, int32_t n) {
    int bad = 0;
    for (int32_t i = 0; i < n; i++) {
        const double d = fabs((double)a->lp[i] - (double)p->lp[i]);
        if (d > g_max_plain_diff) g_max_plain_diff = d;
        g_compared++;
        g_bitwise += memcmp(&a->lp[i], &p->lp[i], sizeof(float)) == 0;
        int ok = d <= TOL && a->rank[i] == p->rank[i] && a->n_top[i] == p->n_top[i] && a->pos[i] == p->pos[i];
        for (int32_t k = 0; ok && k < a->n_top[i]; k++)
            ok = a->top[i][k] == p->top[i][k] && fabs((double)a->top_lp[i][k] - (double)p->top_lp[i][k]) <= TOL;
        bad += !ok;
    }
    SD_CHECK(bad == 0, "%s: %d of %d records differ from plain decoding's", name, bad, (int)n);
}

static void check_engine(const char *ename, specdec_engine *e, const cfg *cfgs, size_t n_cfgs, const int32_t *prompt,
                         int32_t np) {
    static lp_rec rp, rs;
    static int32_t po[LP_MAX], so[LP_MAX];
    char name[160];
    for (int mode = 0; mode < 3; mode++) {
        specdec_stats st;
        specdec_generate_params gp = params_for(&PLAIN, mode);
        const int32_t top = mode == 0 ? 5 : mode == 1 ? SPECDEC_MAX_TOP_LOGPROBS : 0;
        const int32_t npl = run(e, prompt, np, &gp, top, &rp, po, &st);
        if (npl < 1) continue;
        snprintf(name, sizeof name, "%s plain %s", ename, MODE_NAME[mode]);
        check_own_ref(name, e, prompt, np, po, npl, &rp, top);
        for (size_t c = 0; c < n_cfgs; c++) {
            gp = params_for(&cfgs[c], mode);
            const int32_t ns = run(e, prompt, np, &gp, top, &rs, so, &st);
            snprintf(name, sizeof name, "%s %s %s", ename, cfgs[c].name, MODE_NAME[mode]);
            SD_CHECK(ns > 0 && st.draft_method == cfgs[c].method && st.n_drafted > 0, "%s: method %d, %lld drafted",
                     name, (int)st.draft_method, (long long)st.n_drafted);
            if (ns < 1) continue;
            if (mode < 2) {
                SD_CHECK(ns == npl && sc_same_tokens(so, po, ns), "%s: tokens differ from plain decoding", name);
                if (ns == npl) check_vs_plain(name, &rs, &rp, ns);
            }
            check_own_ref(name, e, prompt, np, so, ns, &rs, top);
            printf("%-36s %3d tokens, %.2f per round, records checked\n", name, (int)ns,
                   st.n_rounds ? (double)ns / (double)st.n_rounds : 0.0);
        }
    }
}

/* (d) stops: the callback's own, EOS, a stop string; each inside a round of several tokens. */
static void check_stops(specdec_engine *e, const specdec_tokenizer *tok, const int32_t *prompt, int32_t np) {
    static lp_rec r;
    static int32_t full[LP_MAX], out[LP_MAX];
    specdec_stats st;
    specdec_generate_params gp = params_for(&PAIR_CFGS[0], 0);
    const int32_t nf = run(e, prompt, np, &gp, 3, &r, full, &st);
    SD_CHECK(nf >= 12 && st.n_rounds < nf, "the run must have multi-token rounds: %d tokens, %lld rounds", (int)nf,
             (long long)st.n_rounds);
    if (nf < 12) return;
    /* a non-zero return from logprob_callback at token k: the generation stops after it */
    for (int32_t k = 0; k < 8; k++) {
        gp = params_for(&PAIR_CFGS[0], 0);
        lp_rec_init(&r, np);
        lp_attach(&gp, &r, 3);
        r.stop_at = k;
        int32_t n = 0;
        SD_CHECK(specdec_generate(e, prompt, np, &gp, out, LP_MAX, &n, &st) == SPECDEC_OK, "generate");
        SD_CHECK(n == k + 1 && st.stop_reason == SPECDEC_STOP_CALLBACK && r.n == n && r.n_tok == n && !r.bad_order &&
                     sc_same_tokens(out, full, n),
                 "stop at %d: %d tokens, reason %s, %d/%d calls", (int)k, (int)n,
                 specdec_stop_reason_name(st.stop_reason), (int)r.n, (int)r.n_tok);
    }
    /* EOS: the token emitted at index 7 made an EOS id (the engine's internal ids) */
    const sd_engine_special saved = e->env.special;
    int32_t first = 0;
    while (full[first] != full[7]) first++;
    e->env.special.n_eos = 1;
    e->env.special.eos_ids[0] = full[7];
    gp = params_for(&PAIR_CFGS[0], 0);
    gp.ignore_eos = 0;
    int32_t n = run(e, prompt, np, &gp, 3, &r, out, &st);
    e->env.special = saved;
    SD_CHECK(n == first + 1 && st.stop_reason == SPECDEC_STOP_EOS && r.n == n, "EOS: %d tokens (want %d), reason %s",
             (int)n, (int)first + 1, specdec_stop_reason_name(st.stop_reason));
    /* a stop string completed by the text of tokens 5..7 */
    char a[4096], b[4096];
    size_t la = 0, lb = 0;
    SD_CHECK(specdec_detokenize(tok, full, 5, 1, a, sizeof a, &la) == SPECDEC_OK &&
                 specdec_detokenize(tok, full, 8, 1, b, sizeof b, &lb) == SPECDEC_OK && lb > la,
             "detokenize");
    const char *stops[1] = {b + la};
    gp = params_for(&PAIR_CFGS[0], 0);
    gp.tokenizer = tok;
    gp.stop_strings = stops;
    gp.n_stop_strings = lb > la ? 1 : 0;
    n = run(e, prompt, np, &gp, 3, &r, out, &st);
    SD_CHECK(st.stop_reason == SPECDEC_STOP_STRING && n <= 8 && r.n == n && r.n_tok == n,
             "stop string \"%s\": %d tokens, reason %s, %d logprob calls", stops[0], (int)n,
             specdec_stop_reason_name(st.stop_reason), (int)r.n);
    printf("stops: callback at 0..7, EOS after %d, stop string after %d tokens: one record per emitted token\n",
           (int)first + 1, (int)n);
}

/* (e) each bad combination is refused with INVALID_ARGUMENT naming the field and value. */
static void check_validation(specdec_engine *e, const int32_t *prompt, int32_t np) {
    static lp_rec r;
    int32_t out[8], n = 0;
    static const struct {
        int32_t logprobs, top;
        int cb;
        const char *expect;
        int32_t prompt, prompt_top; /* prompt_logprobs, prompt_top_logprobs */
    } bad[] = {
        {2, 0, 1, "logprobs 2", 0, 0},
        {-1, 0, 1, "logprobs -1", 0, 0},
        {1, 21, 1, "top_logprobs 21", 0, 0},
        {1, -1, 1, "top_logprobs -1", 0, 0},
        {0, 3, 1, "top_logprobs 3", 0, 0},
        {1, 0, 0, "logprob_callback", 0, 0},
        {0, 0, 1, "prompt_logprobs 2", 2, 0},
        {0, 0, 1, "prompt_logprobs -1", -1, 0},
        {0, 0, 1, "prompt_top_logprobs 21", 1, 21},
        {1, 0, 1, "prompt_top_logprobs -1", 1, -1},
        {1, 0, 1, "prompt_top_logprobs 3 needs", 0, 3},
        {0, 0, 0, "prompt_logprobs = 1 needs logprob_callback", 1, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        specdec_generate_params gp = specdec_generate_default_params();
        gp.n_predict = 4;
        lp_attach(&gp, &r, 0);
        gp.logprobs = bad[i].logprobs;
        gp.top_logprobs = bad[i].top;
        gp.prompt_logprobs = bad[i].prompt;
        gp.prompt_top_logprobs = bad[i].prompt_top;
        if (!bad[i].cb) gp.logprob_callback = NULL;
        specdec_status st = specdec_generate_params_validate(&gp);
        SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT && strstr(specdec_last_error(), bad[i].expect),
                 "validate case %zu: %s: %s", i, specdec_status_string(st), specdec_last_error());
        st = specdec_generate(e, prompt, np, &gp, out, 8, &n, NULL);
        SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT && strstr(specdec_engine_last_error(e), bad[i].expect) && n == 0,
                 "generate case %zu: %s: %s", i, specdec_status_string(st), specdec_engine_last_error(e));
    }
    specdec_generate_params gp = specdec_generate_default_params();
    lp_attach(&gp, &r, SPECDEC_MAX_TOP_LOGPROBS);
    SD_CHECK(specdec_generate_params_validate(&gp) == SPECDEC_OK, "top 20 refused: %s", specdec_last_error());
    gp.logprobs = 0;
    gp.top_logprobs = 0;
    SD_CHECK(specdec_generate_params_validate(&gp) == SPECDEC_OK, "off with a callback set refused");
    gp.prompt_logprobs = 1;
    gp.prompt_top_logprobs = SPECDEC_MAX_TOP_LOGPROBS;
    SD_CHECK(specdec_generate_params_validate(&gp) == SPECDEC_OK, "prompt top 20 without logprobs refused: %s",
             specdec_last_error());
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s TARGET DRAFT EAGLE3_HEAD N_PREDICT\n", argv[0]);
        return 2;
    }
    g_np = atoi(argv[4]);
    const size_t n_prompts = argc > 5 && atoi(argv[5]) == 1 ? 1 : 2;
    lp_models m;
    if (lp_load_models(&m, argv)) return 1;
    const specdec_tokenizer *tok = m.tok;
    specdec_engine *ea = lp_make_engine(m.tm, m.dm, 512), *eb = lp_make_engine(m.tm, m.hm, 512);
    static const char *const prompts[] = {"And God said", "Then answered Jesus and said unto them,"};
    for (size_t p = 0; ea && eb && p < n_prompts && p < sizeof prompts / sizeof prompts[0]; p++) {
        int32_t ids[64], np = 0;
        SD_CHECK(specdec_tokenize(tok, prompts[p], strlen(prompts[p]), 1, ids, 64, &np) == SPECDEC_OK, "tokenize");
        check_engine("pair", ea, PAIR_CFGS, sizeof PAIR_CFGS / sizeof PAIR_CFGS[0], ids, np);
        check_engine("eagle3", eb, E3_CFGS, sizeof E3_CFGS / sizeof E3_CFGS[0], ids, np);
        if (p == 0) {
            check_stops(ea, tok, ids, np);
            check_validation(ea, ids, np);
        }
    }
    printf("max |logprob - float64 reference| = %.3g (tolerance %.0e)\n", g_max_ref_diff, TOL);
    printf("speculative vs plain decoding: max |diff| = %.3g, %lld of %lld logprobs bitwise equal\n",
           g_max_plain_diff, (long long)g_bitwise, (long long)g_compared);
    specdec_engine_free(ea);
    specdec_engine_free(eb);
    lp_free_models(&m);
    return sd_test_done();
}
