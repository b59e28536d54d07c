/* test_prompt_logprobs.c — prompt log-probabilities through specdec_generate (CPU backend;
 * docs/LOGPROBS.md "Prompt tokens"; specdec_generate_params.prompt_logprobs) on the bundled
 * models:
 *  (a) values: every prompt token but the first gets one record (positions 1..n_prompt-1, in
 *      order, before any generated token's record and without `callback` calls), equal to the
 *      float64 reference (the target over prompt + output in ONE forward, log_softmax in
 *      double) within TOL, rank and top list (prompt_top_logprobs 0, 5, 20) exact by brute
 *      force; prompts of 1, 2, 33, 34 and ~100 tokens (the prefill computes rows 0..n_prompt-2
 *      in chunks of SD_ROUND_PROMPT_ROWS = 32 rows: none, one row, exactly one chunk, one chunk
 *      and a row, three chunks);
 *  (b) for every drafter's path through the prefill (plain, the draft model's chain and tree,
 *      n-gram, and the EAGLE-3 head, whose drafter prefills the target itself with capture),
 *      greedy (and rejection for the long prompt): the generated tokens and their records are bitwise those of the
 *      same run without prompt_logprobs, and the prompt records are bitwise equal across
 *      drafters (one prefill computes them all alike);
 *  (c) generated-token logprobs off, prompt on: only prompt records;
 *  (d) a non-zero return at prompt record k stops before anything is generated
 *      (STOP_CALLBACK, 0 tokens, k + 1 records, no token calls);
 *  (e) n_predict 0 with prompt_logprobs scores the prompt alone (OpenAI's echo with
 *      max_tokens 0): 0 tokens, no round, STOP_N_PREDICT, the records bitwise those of a
 *      generating run; through the scheduler too; n_predict 0 without it is refused;
 * (Validation of the fields: tests/logprobs/test_logprobs.c.)
 * Arguments: TARGET DRAFT EAGLE3_HEAD N_PREDICT [quick] (quick, the sanitizer builds: the prompt of
 * 34 tokens only, two chunks). */
#include "lp_common.h"

#include "sd_engine.h"
#include "sd_round.h"
#include "sd_runner.h"

#define TOL 1e-5 /* as test_logprobs.c: one float rounding of a double computation, plus row bits */

static int32_t g_np;
static double g_max_diff = 0.0;
static int64_t g_prompt_records = 0;

/* A long prompt: ~100 tokens of the bundled tokenizer. */
static const char LONG_TEXT[] =
    "In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness "
    "was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God said, Let there "
    "be light: and there was light. And God saw the light, that it was good: and God divided the light from the "
    "darkness.";

static int fwd_runner(void *ctx, const int32_t *tokens, int32_t n, float *logits) {
    sd_runner *r = ctx;
    sd_runner_truncate(r, 0);
    return sd_runner_forward_chunked(r, tokens, n, 0, logits) != SPECDEC_OK;
}

static specdec_generate_params params(specdec_draft_method m, int tree, int greedy) {
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = g_np;
    gp.ignore_eos = 1;
    gp.seed = 11;
    gp.temperature = greedy ? 0.0f : 0.9f;
    gp.verify = greedy ? SPECDEC_VERIFY_GREEDY : SPECDEC_VERIFY_REJECTION;
    gp.draft_method = m;
    gp.n_draft = m == SPECDEC_DRAFT_NONE ? 0 : 4;
    gp.ngram_cost = SPECDEC_NGRAM_COST_OFF;
    if (tree) {
        const int32_t w[3] = {2, 2, 1};
        SD_CHECK(specdec_generate_params_set_tree(&gp, w, 3) == SPECDEC_OK, "tree");
    }
    return gp;
}

typedef struct run_out {
    lp_rec gen, prompt;
    int32_t out[LP_MAX], n;
    specdec_stats st;
    specdec_status status;
} run_out;

/* One generation: generated logprobs (top gen_top; -1: off) and prompt logprobs (prompt_top). */
static void run(specdec_engine *e, const int32_t *prompt, int32_t np, specdec_generate_params gp, int32_t gen_top,
                int32_t prompt_top, run_out *o) {
    lp_rec_init(&o->gen, np);
    lp_attach(&gp, &o->gen, gen_top < 0 ? 0 : gen_top);
    if (gen_top < 0) gp.logprobs = 0, o->gen.off = 1;
    if (prompt_top >= 0) {
        gp.prompt_logprobs = 1;
        gp.prompt_top_logprobs = prompt_top;
        lp_rec_prompt(&o->gen, &o->prompt, np);
    } else {
        lp_rec_init(&o->prompt, 1);
    }
    o->n = 0;
    o->status = specdec_generate(e, prompt, np, &gp, o->out, LP_MAX, &o->n, &o->st);
    SD_CHECK(o->status == SPECDEC_OK, "generate: %s", specdec_engine_last_error(e));
}

/* (a) the prompt records of o against the reference of its own sequence. */
static void check_ref(const char *name, specdec_engine *e, const int32_t *prompt, int32_t np, const run_out *o,
                      int32_t prompt_top) {
    static int32_t seq[LP_MAX + 256];
    memcpy(seq, prompt, (size_t)np * sizeof *seq);
    memcpy(seq + np, o->out, (size_t)o->n * sizeof *seq);
    if (np + o->n < 2) {
        SD_CHECK(o->prompt.n == 0, "%s: a 1-token prompt got %d prompt records", name, (int)o->prompt.n);
        return;
    }
    lp_ref ref;
    const int bad = lp_ref_build(&ref, fwd_runner, e->target, e->n_vocab, seq, np + o->n - 1);
    SD_CHECK(!bad, "%s: reference forward failed", name);
    if (!bad) lp_check_prompt_ref(name, &o->prompt, &ref, prompt, np, prompt_top, TOL, &g_max_diff);
    lp_ref_free(&ref);
    g_prompt_records += o->prompt.n;
}

/* (a)-(c) for one engine over its drafters, one prompt. */
static void check_prompt(const char *ename, specdec_engine *e, const specdec_draft_method *methods, int n_methods,
                         const int32_t *prompt, int32_t np, int rejection) {
    static run_out base, with, first;
    char name[192];
    for (int greedy = 1; greedy >= !rejection; greedy--) {
        int have_first = 0;
        for (int m = 0; m < n_methods; m++) {
            for (int tree = 0; tree < (methods[m] == SPECDEC_DRAFT_NONE ? 1 : 2); tree++) {
                const specdec_generate_params gp = params(methods[m], tree, greedy);
                const int32_t gen_top = greedy ? 5 : 0, prompt_top = (m + tree) % 3 == 0 ? 20 : (m + tree) % 3 == 1 ? 5 : 0;
                snprintf(name, sizeof name, "%s %s%s %s, %d prompt tokens, prompt top %d", ename,
                         specdec_draft_method_name(methods[m]), tree ? " tree" : "", greedy ? "greedy" : "rejection",
                         (int)np, (int)prompt_top);
                run(e, prompt, np, gp, gen_top, -1, &base);
                run(e, prompt, np, gp, gen_top, prompt_top, &with);
                if (base.status != SPECDEC_OK || with.status != SPECDEC_OK) continue;
                /* (b) nothing generated changes */
                SD_CHECK(with.n == base.n && sc_same_tokens(with.out, base.out, with.n) && lp_same_records(&with.gen, &base.gen) &&
                             with.gen.bad_order == 0 && with.gen.n_tok == with.n,
                         "%s: generated tokens or records differ from the run without prompt_logprobs", name);
                check_ref(name, e, prompt, np, &with, prompt_top);
                /* (b) every drafter's prefill gives the same prompt records (top 20 compared on the common prefix) */
                if (!have_first || first.prompt.n_top[0] < with.prompt.n_top[0]) {
                    first = with;
                    have_first = 1;
                }
                int same = first.prompt.n == with.prompt.n;
                for (int32_t i = 0; same && i < with.prompt.n; i++)
                    same = first.prompt.tok[i] == with.prompt.tok[i] &&
                           !memcmp(&first.prompt.lp[i], &with.prompt.lp[i], sizeof(float)) &&
                           first.prompt.rank[i] == with.prompt.rank[i];
                SD_CHECK(same, "%s: prompt records differ from another drafter's", name);
            }
        }
    }
    /* (c) prompt records alone */
    run(e, prompt, np, params(methods[0], 0, 1), -1, 3, &with);
    SD_CHECK(with.gen.n == 0 && with.gen.n_tok == with.n && with.n == g_np && with.prompt.n == np - 1 &&
                 with.prompt.bad_order == 0 && with.gen.bad_order == 0,
             "%s: prompt only: %d generated records, %d prompt records, %d tokens", ename, (int)with.gen.n,
             (int)with.prompt.n, (int)with.n);
    if (np > 1) check_ref("prompt only", e, prompt, np, &with, 3);
    printf("%-8s %3d prompt tokens: %d prompt records per run, every drafter, greedy%s\n", ename, (int)np, (int)np - 1,
           rejection ? " and rejection" : "");
}

/* (d) a stop from the callback at prompt record k. */
static void check_stop(specdec_engine *e, const int32_t *prompt, int32_t np) {
    static run_out o;
    for (int32_t k = 0; k < 3 && k < np - 1; k++) {
        specdec_generate_params gp = params(SPECDEC_DRAFT_MODEL, 0, 1);
        lp_rec_init(&o.gen, np);
        lp_attach(&gp, &o.gen, 2);
        gp.prompt_logprobs = 1;
        lp_rec_prompt(&o.gen, &o.prompt, np);
        o.prompt.stop_at = k == 2 ? np - 2 : k; /* the first, the second, the last */
        o.n = -1;
        const specdec_status st = specdec_generate(e, prompt, np, &gp, o.out, LP_MAX, &o.n, &o.st);
        SD_CHECK(st == SPECDEC_OK && o.n == 0 && o.st.stop_reason == SPECDEC_STOP_CALLBACK &&
                     o.prompt.n == o.prompt.stop_at + 1 && o.gen.n == 0 && o.gen.n_tok == 0 && o.st.n_generated == 0,
                 "stop at prompt record %d: %s, %d tokens, reason %s, %d prompt records", (int)o.prompt.stop_at,
                 specdec_status_string(st), (int)o.n, specdec_stop_reason_name(o.st.stop_reason), (int)o.prompt.n);
    }
    /* the engine is fine afterwards: the same request without the stop */
    static run_out a, b;
    run(e, prompt, np, params(SPECDEC_DRAFT_MODEL, 0, 1), 2, 0, &a);
    run(e, prompt, np, params(SPECDEC_DRAFT_MODEL, 0, 1), 2, -1, &b);
    SD_CHECK(a.n == g_np && a.n == b.n && sc_same_tokens(a.out, b.out, a.n) && a.prompt.n == np - 1,
             "after stops: %d tokens, %d prompt records", (int)a.n, (int)a.prompt.n);
    printf("stops at prompt records 0, 1, %d: nothing generated, the engine unharmed\n", (int)np - 2);
}

/* (e) scoring only: n_predict 0. */
static void check_score_only(const char *ename, specdec_engine *e, const specdec_model *tm, const specdec_model *dm,
                             const int32_t *prompt, int32_t np) {
    static run_out gen, score;
    specdec_generate_params gp = params(SPECDEC_DRAFT_AUTO, 0, 1);
    run(e, prompt, np, gp, -1, 7, &gen);
    gp.n_predict = 0;
    run(e, prompt, np, gp, -1, 7, &score);
    SD_CHECK(score.status == SPECDEC_OK && score.n == 0 && score.st.n_generated == 0 && score.st.n_rounds == 0 &&
                 score.st.stop_reason == SPECDEC_STOP_N_PREDICT && score.gen.n_tok == 0 &&
                 lp_same_records(&score.prompt, &gen.prompt) && score.prompt.n == np - 1,
             "%s, n_predict 0: %d tokens, %lld rounds, reason %s, %d prompt records (%d with generation)", ename,
             (int)score.n, (long long)score.st.n_rounds, specdec_stop_reason_name(score.st.stop_reason),
             (int)score.prompt.n, (int)gen.prompt.n);
    /* the scheduler: the same records, no token */
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = 2;
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = 512;
    specdec_scheduler *s = NULL;
    SD_CHECK(specdec_scheduler_create(tm, dm, &ep, &sp, &s) == SPECDEC_OK, "scheduler: %s", specdec_last_error());
    static lp_rec rs, ps;
    lp_rec_init(&rs, np);
    lp_attach(&gp, &rs, 0);
    gp.logprobs = 0, rs.off = 1;
    gp.prompt_logprobs = 1, gp.prompt_top_logprobs = 7;
    lp_rec_prompt(&rs, &ps, np);
    specdec_request_id id = 0;
    int32_t out[4], n = -1;
    specdec_status outcome = SPECDEC_ERR_INTERNAL;
    const int ok = s && specdec_scheduler_submit(s, prompt, np, &gp, &id) == SPECDEC_OK &&
                   specdec_scheduler_wait(s, id, -1, out, 4, &n, NULL, &outcome) == SPECDEC_OK;
    SD_CHECK(ok && outcome == SPECDEC_OK && n == 0 && lp_same_records(&ps, &gen.prompt) && rs.n_tok == 0,
             "%s, n_predict 0 through the scheduler: %d tokens, %d prompt records", ename, (int)n, (int)ps.n);
    specdec_scheduler_free(s);
    gp.prompt_logprobs = 0, gp.prompt_top_logprobs = 0;
    SD_CHECK(specdec_generate_params_validate(&gp) == SPECDEC_ERR_INVALID_ARGUMENT &&
                 strstr(specdec_last_error(), "n_predict 0"),
             "n_predict 0 without prompt_logprobs: %s", specdec_last_error());
    printf("%-8s %3d prompt tokens, n_predict 0: the prompt's records alone (engine and scheduler)\n", ename, (int)np);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s TARGET DRAFT EAGLE3_HEAD N_PREDICT\n", argv[0]);
        return 2;
    }
    g_np = atoi(argv[4]);
    lp_models m;
    if (lp_load_models(&m, argv)) return 1;
    const specdec_tokenizer *tok = m.tok;
    specdec_engine *ea = lp_make_engine(m.tm, m.dm, 512), *eb = lp_make_engine(m.tm, m.hm, 512);
    static int32_t ids[256];
    int32_t n_long = 0;
    SD_CHECK(specdec_tokenize(tok, LONG_TEXT, strlen(LONG_TEXT), 1, ids, 256, &n_long) == SPECDEC_OK && n_long > 70,
             "tokenize: %d tokens", (int)n_long);
    static const specdec_draft_method PAIR[] = {SPECDEC_DRAFT_NONE, SPECDEC_DRAFT_MODEL, SPECDEC_DRAFT_NGRAM};
    static const specdec_draft_method HEAD[] = {SPECDEC_DRAFT_EAGLE3};
    /* the prefill computes rows 0..np-2: none, one, exactly one chunk, one chunk and a row, 3+ chunks */
    const int32_t lengths[] = {1, 2, SD_ROUND_PROMPT_ROWS + 1, SD_ROUND_PROMPT_ROWS + 2, n_long};
    const int quick = argc > 5 && !strcmp(argv[5], "quick");
    for (size_t i = 0; ea && eb && n_long > 70 && i < sizeof lengths / sizeof lengths[0]; i++) {
        if (quick && lengths[i] != SD_ROUND_PROMPT_ROWS + 2) continue;
        const int rejection = lengths[i] == n_long || quick; /* rejection mode: the long prompt */
        check_prompt("pair", ea, PAIR, 3, ids, lengths[i], rejection);
        check_prompt("eagle3", eb, HEAD, 1, ids, lengths[i], rejection);
    }
    if (ea && eb && n_long > 70) {
        check_stop(ea, ids, 40);
        check_score_only("pair", ea, m.tm, m.dm, ids, n_long);
        check_score_only("eagle3", eb, m.tm, m.hm, ids, 34);
    }
    printf("%lld prompt records checked; max |logprob - float64 reference| = %.3g (tolerance %.0e)\n",
           (long long)g_prompt_records, g_max_diff, TOL);
    specdec_engine_free(ea);
    specdec_engine_free(eb);
    lp_free_models(&m);
    return sd_test_done();
}
