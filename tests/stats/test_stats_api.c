/* test_stats_api.c — the statistics, seeds and early checks of the C ABI (issue 26), on
 * the bundled pair (models/kjv-target + kjv-draft), CPU backend:
 *  - specdec_stats since 0.4: every derived field equals its definition from the counts
 *    (tokens per target pass, acceptance by position, prompt tokens/s), the counts agree
 *    with each other (a chain drafts n_drafted_at_pos tokens in all and accepts
 *    n_accepted_at_pos; a tree's per-depth counts add up to the accepted path, its nodes
 *    exceed them), the settings are reported as used (draft_method MODEL / NONE, verify
 *    resolved, n_draft / tree_width / draft_nodes, seed), timings are ordered
 *    (prefill <= first token <= total), t_load_s is the engine's one-time cost;
 *  - the scheduler fills the same statistics (match mode: every count equal to
 *    specdec_generate's for the same request);
 *  - SPECDEC_SEED_RANDOM draws a seed below 2^32, reported in stats.seed, different
 *    run to run, and that seed reproduces the run;
 *  - specdec_generate_params_validate refuses each bad field without a model (naming it)
 *    and accepts what only the models can judge;
 *  - n_ctx above max_position_embeddings is refused by engine and scheduler creation,
 *    naming both numbers; n_ctx equal to it is accepted;
 *  - the enum names.
 * Usage: test_stats_api TARGET_DIR DRAFT_DIR */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sd_test.h"
#include "specdec.h"

#define N_GEN 16

/* 0.4's layout (include/specdec.h): grown from 176 bytes, the new fields after the old */
_Static_assert(sizeof(specdec_stats) == 672, "specdec_stats changed size: a new soname and this test");

static specdec_model *g_t, *g_d;
static specdec_tokenizer *g_tok;
static int32_t g_prompt[64], g_n_prompt;

static specdec_generate_params params(float temp, specdec_verify_mode v, int32_t gamma, uint64_t seed) {
    specdec_generate_params p = specdec_generate_default_params();
    p.n_predict = N_GEN;
    p.temperature = temp;
    p.verify = v;
    p.n_draft = gamma;
    p.seed = seed;
    p.ignore_eos = 1;
    return p;
}

static int approx(double a, double b) { return a == b || (a - b < 1e-12 && b - a < 1e-12); }

/* What every run's statistics must satisfy, whatever drafted. */
static void check_common(const char *what, const specdec_stats *s, int32_t n_out) {
    SD_CHECK(s->n_generated == n_out && s->n_prompt == g_n_prompt, "%s: counts %lld/%lld", what,
             (long long)s->n_generated, (long long)s->n_prompt);
    SD_CHECK(s->n_target_passes == s->n_rounds && s->n_target_passes > 0, "%s: %lld passes, %lld rounds", what,
             (long long)s->n_target_passes, (long long)s->n_rounds);
    SD_CHECK(approx(s->tokens_per_target_pass, (double)s->n_generated / (double)s->n_target_passes), "%s: %.6f", what,
             s->tokens_per_target_pass);
    SD_CHECK(s->t_prefill_s > 0 && approx(s->prompt_tokens_per_second, (double)s->n_prompt / s->t_prefill_s),
             "%s: prompt tokens/s %.3f", what, s->prompt_tokens_per_second);
    SD_CHECK(s->t_prefill_s <= s->t_first_token_s && s->t_first_token_s <= s->t_total_s,
             "%s: prefill %.6f, first token %.6f, total %.6f", what, s->t_prefill_s, s->t_first_token_s, s->t_total_s);
    SD_CHECK(s->t_load_s > 0 && s->t_load_s < 60, "%s: t_load_s %.6f", what, s->t_load_s);
    SD_CHECK(s->verify != SPECDEC_VERIFY_AUTO && s->draft_method != SPECDEC_DRAFT_AUTO, "%s: unresolved settings", what);
    int64_t acc = 0;
    for (int i = 0; i < SPECDEC_MAX_DRAFT; i++) {
        const double want = s->n_drafted_at_pos[i] ? (double)s->n_accepted_at_pos[i] / (double)s->n_drafted_at_pos[i] : 0;
        SD_CHECK(approx(s->acceptance_at_pos[i], want), "%s: acceptance_at_pos[%d] %.6f != %.6f", what, i,
                 s->acceptance_at_pos[i], want);
        SD_CHECK(s->n_accepted_at_pos[i] <= s->n_drafted_at_pos[i] && s->n_drafted_at_pos[i] <= s->n_draft_rounds,
                 "%s: position %d: %lld accepted of %lld", what, i, (long long)s->n_accepted_at_pos[i],
                 (long long)s->n_drafted_at_pos[i]);
        if (i > 0) /* a token at position i is accepted only after position i-1 was */
            SD_CHECK(s->n_accepted_at_pos[i] <= s->n_accepted_at_pos[i - 1], "%s: position %d accepted more", what, i);
        acc += s->n_accepted_at_pos[i];
    }
    SD_CHECK(acc == s->n_accepted, "%s: accepted by position %lld != n_accepted %lld", what, (long long)acc,
             (long long)s->n_accepted);
}

static void chain_and_plain(specdec_engine *e, specdec_engine *plain) {
    int32_t out[N_GEN], n = 0;
    specdec_stats s, s2;
    specdec_generate_params p = params(0.8f, SPECDEC_VERIFY_REJECTION, 4, 7);
    SD_CHECK(specdec_generate(e, g_prompt, g_n_prompt, &p, out, N_GEN, &n, &s) == SPECDEC_OK, "chain: %s",
             specdec_engine_last_error(e));
    check_common("chain", &s, n);
    int64_t drafted = 0;
    for (int i = 0; i < SPECDEC_MAX_DRAFT; i++) drafted += s.n_drafted_at_pos[i];
    SD_CHECK(drafted == s.n_drafted && s.n_drafted_at_pos[4] == 0 && s.n_drafted_at_pos[0] == s.n_draft_rounds,
             "chain: drafted by position %lld != %lld", (long long)drafted, (long long)s.n_drafted);
    SD_CHECK(s.draft_method == SPECDEC_DRAFT_MODEL && s.verify == SPECDEC_VERIFY_REJECTION && s.n_draft == 4 &&
                 s.adaptive_draft == 0 && s.draft_nodes == 0 && s.tree_width[0] == 0 && s.seed == 7,
             "chain settings: method %d verify %d n_draft %d seed %llu", (int)s.draft_method, (int)s.verify,
             (int)s.n_draft, (unsigned long long)s.seed);
    /* t_load_s is the engine's: the same in its next call */
    SD_CHECK(specdec_generate(e, g_prompt, g_n_prompt, &p, out, N_GEN, &n, &s2) == SPECDEC_OK, "again");
    SD_CHECK(s2.t_load_s == s.t_load_s, "t_load_s changed between calls: %.6f %.6f", s.t_load_s, s2.t_load_s);

    /* AUTO at T = 0 is greedy; adaptive reported */
    p = params(0.0f, SPECDEC_VERIFY_AUTO, 3, 0);
    p.adaptive_draft = 1;
    SD_CHECK(specdec_generate(e, g_prompt, g_n_prompt, &p, out, N_GEN, &n, &s) == SPECDEC_OK, "adaptive");
    check_common("adaptive", &s, n);
    SD_CHECK(s.verify == SPECDEC_VERIFY_GREEDY && s.adaptive_draft == 1 && s.n_draft == 3, "adaptive settings");

    /* n_draft 0 with a draft model, and an engine without one: plain decoding */
    p = params(0.8f, SPECDEC_VERIFY_AUTO, 0, 3);
    SD_CHECK(specdec_generate(e, g_prompt, g_n_prompt, &p, out, N_GEN, &n, &s) == SPECDEC_OK, "n_draft 0");
    check_common("n_draft 0", &s, n);
    SD_CHECK(s.draft_method == SPECDEC_DRAFT_NONE && s.n_draft == 0 && s.n_target_passes == n &&
                 s.tokens_per_target_pass == 1.0 && s.n_drafted_at_pos[0] == 0 && s.verify == SPECDEC_VERIFY_REJECTION,
             "n_draft 0: method %d, %lld passes", (int)s.draft_method, (long long)s.n_target_passes);
    p.n_draft = 4;
    SD_CHECK(specdec_generate(plain, g_prompt, g_n_prompt, &p, out, N_GEN, &n, &s) == SPECDEC_OK, "plain");
    check_common("plain", &s, n);
    SD_CHECK(s.draft_method == SPECDEC_DRAFT_NONE && s.n_draft == 0, "plain: method %d n_draft %d",
             (int)s.draft_method, (int)s.n_draft);
}

static void tree(specdec_engine *e) {
    int32_t out[N_GEN], n = 0;
    specdec_stats s;
    specdec_generate_params p = params(0.0f, SPECDEC_VERIFY_GREEDY, 4, 1);
    const int32_t w[3] = {3, 2, 1};
    SD_CHECK(specdec_generate_params_set_tree(&p, w, 3) == SPECDEC_OK, "set tree");
    p.draft_nodes = 8;
    SD_CHECK(specdec_generate(e, g_prompt, g_n_prompt, &p, out, N_GEN, &n, &s) == SPECDEC_OK, "tree: %s",
             specdec_engine_last_error(e));
    check_common("tree", &s, n);
    int64_t deep = 0;
    for (int i = 0; i < SPECDEC_MAX_DRAFT; i++) deep += s.n_drafted_at_pos[i];
    SD_CHECK(s.n_drafted > deep && s.n_drafted_at_pos[3] == 0 && s.n_drafted_at_pos[0] == s.n_draft_rounds,
             "tree: %lld nodes, %lld depth slots", (long long)s.n_drafted, (long long)deep);
    SD_CHECK(s.n_draft == 0 && s.draft_nodes == 8 && s.tree_width[0] == 3 && s.tree_width[1] == 2 &&
                 s.tree_width[2] == 1 && s.tree_width[3] == 0 && s.draft_method == SPECDEC_DRAFT_MODEL,
             "tree settings: n_draft %d nodes %d widths %d,%d,%d", (int)s.n_draft, (int)s.draft_nodes,
             s.tree_width[0], s.tree_width[1], s.tree_width[2]);
    SD_CHECK(approx(s.mean_accepted_length, (double)s.n_accepted / (double)s.n_draft_rounds), "tree: mean accepted");
}

/* The scheduler's statistics equal specdec_generate's for the same request (match mode:
 * the output, hence every count, is the same). */
static void scheduler(specdec_engine *e) {
    specdec_scheduler *sc = NULL;
    SD_CHECK(specdec_scheduler_create(g_t, g_d, NULL, NULL, &sc) == SPECDEC_OK, "scheduler: %s", specdec_last_error());
    if (!sc) return;
    specdec_generate_params p = params(0.9f, SPECDEC_VERIFY_MATCH, 3, 11);
    int32_t a[N_GEN], b[N_GEN], na = 0, nb = 0;
    specdec_stats sa, sb;
    specdec_request_id id = 0;
    specdec_status outcome = SPECDEC_ERR_INTERNAL;
    SD_CHECK(specdec_generate(e, g_prompt, g_n_prompt, &p, a, N_GEN, &na, &sa) == SPECDEC_OK, "generate");
    SD_CHECK(specdec_scheduler_submit(sc, g_prompt, g_n_prompt, &p, &id) == SPECDEC_OK, "submit");
    SD_CHECK(specdec_scheduler_wait(sc, id, -1, b, N_GEN, &nb, &sb, &outcome) == SPECDEC_OK && outcome == SPECDEC_OK,
             "wait");
    check_common("scheduler", &sb, nb);
    SD_CHECK(na == nb && !memcmp(a, b, sizeof(int32_t) * (size_t)na), "scheduler output differs");
    SD_CHECK(sa.n_target_passes == sb.n_target_passes && sa.n_drafted == sb.n_drafted &&
                 !memcmp(sa.n_drafted_at_pos, sb.n_drafted_at_pos, sizeof sa.n_drafted_at_pos) &&
                 !memcmp(sa.n_accepted_at_pos, sb.n_accepted_at_pos, sizeof sa.n_accepted_at_pos) &&
                 sa.seed == sb.seed && sa.verify == sb.verify && sa.draft_method == sb.draft_method &&
                 sa.n_draft == sb.n_draft,
             "scheduler stats differ from generate's");
    specdec_scheduler_free(sc);
}

static void seeds(specdec_engine *e) {
    int32_t a[N_GEN], b[N_GEN], c[N_GEN], na = 0, nb = 0, nc = 0;
    specdec_stats sa, sb, sc;
    specdec_generate_params p = params(1.0f, SPECDEC_VERIFY_REJECTION, 4, SPECDEC_SEED_RANDOM);
    SD_CHECK(specdec_generate(e, g_prompt, g_n_prompt, &p, a, N_GEN, &na, &sa) == SPECDEC_OK, "random 1");
    SD_CHECK(specdec_generate(e, g_prompt, g_n_prompt, &p, b, N_GEN, &nb, &sb) == SPECDEC_OK, "random 2");
    /* two draws of 32 bits agree with probability 2^-32 */
    SD_CHECK(sa.seed != sb.seed && sa.seed < (1ull << 32) && sb.seed < (1ull << 32), "random seeds %llu %llu",
             (unsigned long long)sa.seed, (unsigned long long)sb.seed);
    p.seed = sa.seed; /* the reported seed repeats the run */
    SD_CHECK(specdec_generate(e, g_prompt, g_n_prompt, &p, c, N_GEN, &nc, &sc) == SPECDEC_OK, "replay");
    SD_CHECK(nc == na && !memcmp(a, c, sizeof(int32_t) * (size_t)na) && sc.seed == sa.seed, "seed %llu did not replay",
             (unsigned long long)sa.seed);
}

static void validate(void) {
    specdec_generate_params p = specdec_generate_default_params();
    SD_CHECK(specdec_generate_params_validate(&p) == SPECDEC_OK, "defaults: %s", specdec_last_error());
    SD_CHECK(specdec_generate_params_validate(NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "NULL");
#define BAD(name, stmt)                                                                                             \
    do {                                                                                                            \
        specdec_generate_params q = specdec_generate_default_params();                                              \
        stmt;                                                                                                       \
        SD_CHECK(specdec_generate_params_validate(&q) == SPECDEC_ERR_INVALID_ARGUMENT &&                            \
                     strstr(specdec_last_error(), name),                                                            \
                 "%s: %s", #stmt, specdec_last_error());                                                            \
    } while (0)
    BAD("n_predict", q.n_predict = 0);
    BAD("n_draft", q.n_draft = 17);
    BAD("verify", q.verify = (specdec_verify_mode)9);
    BAD("temperature", q.temperature = -1.0f);
    BAD("top_k", q.top_k = -1);
    BAD("top_p", q.top_p = 0.0f);
    BAD("min_p", q.min_p = 1.5f);
    BAD("stop_strings", q.n_stop_strings = 1);
    BAD("draft_nodes", q.draft_nodes = 65);
#undef BAD
    /* what only the models and the tokenizer can judge passes here */
    const char *stop = "x";
    p.stop_strings = &stop;
    p.n_stop_strings = 1; /* no tokenizer: specdec_generate's business */
    p.adaptive_draft = 1;
    p.n_draft = 0; /* adaptive without a start: an error only with a draft model */
    SD_CHECK(specdec_generate_params_validate(&p) == SPECDEC_OK, "model-dependent: %s", specdec_last_error());
    /* whether the draft is an EAGLE-3 head or a model is the models' business too */
    specdec_generate_params h = specdec_generate_default_params();
    h.draft_method = SPECDEC_DRAFT_EAGLE3;
    SD_CHECK(specdec_generate_params_validate(&h) == SPECDEC_OK, "EAGLE3: %s", specdec_last_error());
    h.draft_method = SPECDEC_DRAFT_MODEL;
    SD_CHECK(specdec_generate_params_validate(&h) == SPECDEC_OK, "MODEL: %s", specdec_last_error());
}

static void context(void) {
    specdec_model_info info;
    SD_CHECK(specdec_model_get_info(g_t, &info) == SPECDEC_OK, "info");
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = info.max_position_embeddings + 1;
    specdec_engine *e = NULL;
    char want_a[32], want_b[32];
    snprintf(want_a, sizeof want_a, "n_ctx %d", (int)ep.n_ctx);
    snprintf(want_b, sizeof want_b, "max_position_embeddings %d", (int)info.max_position_embeddings);
    SD_CHECK(specdec_engine_create(g_t, g_d, &ep, &e) == SPECDEC_ERR_INVALID_ARGUMENT && !e &&
                 strstr(specdec_last_error(), want_a) && strstr(specdec_last_error(), want_b),
             "engine n_ctx beyond: %s", specdec_last_error());
    specdec_scheduler *s = NULL;
    SD_CHECK(specdec_scheduler_create(g_t, NULL, &ep, NULL, &s) == SPECDEC_ERR_INVALID_ARGUMENT && !s &&
                 strstr(specdec_last_error(), want_b),
             "scheduler n_ctx beyond: %s", specdec_last_error());
    ep.n_ctx = info.max_position_embeddings;
    SD_CHECK(specdec_engine_create(g_t, g_d, &ep, &e) == SPECDEC_OK && specdec_engine_n_ctx(e) == ep.n_ctx,
             "n_ctx == max_position_embeddings: %s", specdec_last_error());
    specdec_engine_free(e);
}

static void names(void) {
    SD_CHECK(!strcmp(specdec_verify_mode_name(SPECDEC_VERIFY_MATCH), "match") &&
                 !strcmp(specdec_verify_mode_name((specdec_verify_mode)7), "?"),
             "verify names");
    SD_CHECK(!strcmp(specdec_stop_reason_name(SPECDEC_STOP_CONTEXT_FULL), "context_full") &&
                 !strcmp(specdec_stop_reason_name((specdec_stop_reason)-1), "?"),
             "stop names");
    SD_CHECK(!strcmp(specdec_draft_method_name(SPECDEC_DRAFT_NONE), "none") &&
                 !strcmp(specdec_draft_method_name(SPECDEC_DRAFT_EAGLE3), "eagle3") &&
                 !strcmp(specdec_draft_method_name(SPECDEC_DRAFT_MTP), "mtp") &&
                 !strcmp(specdec_draft_method_name((specdec_draft_method)6), "?"),
             "draft method names");
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_stats_api TARGET_DIR DRAFT_DIR\n");
        return 2;
    }
    if (specdec_model_load(argv[1], NULL, &g_t) != SPECDEC_OK || specdec_model_load(argv[2], NULL, &g_d) != SPECDEC_OK ||
        specdec_tokenizer_load(argv[1], &g_tok) != SPECDEC_OK) {
        fprintf(stderr, "load: %s\n", specdec_last_error());
        return 1;
    }
    SD_CHECK(specdec_tokenize(g_tok, "And God said", 12, 1, g_prompt, 64, &g_n_prompt) == SPECDEC_OK, "tokenize");
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = 128;
    specdec_engine *e = NULL, *plain = NULL;
    SD_CHECK(specdec_engine_create(g_t, g_d, &ep, &e) == SPECDEC_OK, "engine: %s", specdec_last_error());
    SD_CHECK(specdec_engine_create(g_t, NULL, &ep, &plain) == SPECDEC_OK, "plain engine: %s", specdec_last_error());
    if (e && plain) {
        chain_and_plain(e, plain);
        tree(e);
        scheduler(e);
        seeds(e);
    }
    validate();
    context();
    names();
    specdec_engine_free(plain);
    specdec_engine_free(e);
    specdec_tokenizer_free(g_tok);
    specdec_model_free(g_d);
    specdec_model_free(g_t);
    return sd_test_done();
}
