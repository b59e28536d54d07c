/* bench_jump_forward.c — what jump-forward (core/sd_round.c round_grammar_forced) buys structured
 * output end to end: the bundled target (and its draft for the drafter rows), three JSON schemas
 * whose keys and punctuation the grammar forces, GREEDY, n_predict 128, the same prompts. Each
 * setting runs with jump-forward on and off (off: allowed_token_ids = every id, which masks nothing
 * and turns it off) in the same run, interleaved; the outputs are checked equal before timing.
 * Reported per setting: tokens, target passes, forced tokens, decode tokens/s (medians of
 * `repeats` runs) and the on/off ratio.
 * Usage: bench_jump_forward TARGET_DIR DRAFT_DIR [repeats]  (results in bench/results/). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "specdec.h"

#define N_PRED 128
#define MAX_REP 31

static const char *const SCHEMAS[] = {
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":16},\"age\":{\"type\":\"integer\","
    "\"minimum\":0,\"maximum\":150},\"city\":{\"type\":\"string\",\"maxLength\":16}},\"required\":[\"name\",\"age\","
    "\"city\"]}",
    "{\"type\":\"object\",\"properties\":{\"book\":{\"enum\":[\"Genesis\",\"Exodus\",\"Leviticus\",\"Numbers\"]},"
    "\"chapter\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50},\"verse\":{\"type\":\"integer\",\"minimum\":1,"
    "\"maximum\":99},\"quote\":{\"type\":\"string\",\"maxLength\":24}},\"required\":[\"book\",\"chapter\",\"verse\","
    "\"quote\"]}",
    "{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\",\"minimum\":0,"
    "\"maximum\":999},\"done\":{\"type\":\"boolean\"}},\"required\":[\"id\",\"done\"]},\"minItems\":2,\"maxItems\":4}",
};
static const char *const NAMES[] = {"person (3 keys)", "reference (enum + 3 keys)", "todo list (2-4 objects)"};
static const char *const PROMPTS[] = {"And God said", "In the beginning", "The name of the man was", "And it came to pass"};
#define N_S 3
#define N_P 4

typedef struct tally {
    long tokens, passes, forced;
    double seconds;
} tally;

static int run_all(specdec_engine *e, const specdec_tokenizer *tok, const specdec_grammar *g, specdec_draft_method dm,
                   const int32_t *all, int32_t V, int off, tally *t, int32_t (*outs)[N_PRED], int32_t *ns) {
    memset(t, 0, sizeof *t);
    for (int p = 0; p < N_P; p++) {
        int32_t prompt[64], np = 0;
        if (specdec_tokenize(tok, PROMPTS[p], strlen(PROMPTS[p]), 1, prompt, 64, &np) != SPECDEC_OK) return -1;
        specdec_generate_params gp = specdec_generate_default_params();
        gp.grammar = g;
        gp.n_predict = N_PRED;
        gp.temperature = 0.0f;
        gp.verify = SPECDEC_VERIFY_GREEDY;
        gp.draft_method = dm;
        gp.ngram_cost = SPECDEC_NGRAM_COST_OFF;
        if (off) gp.allowed_token_ids = all, gp.n_allowed_token_ids = V;
        specdec_stats st;
        int32_t n = 0;
        if (specdec_generate(e, prompt, np, &gp, outs[p], N_PRED, &n, &st) != SPECDEC_OK) {
            fprintf(stderr, "generate: %s\n", specdec_engine_last_error(e));
            return -1;
        }
        ns[p] = n;
        t->tokens += st.n_generated;
        t->passes += st.n_target_passes;
        t->forced += st.n_forced;
        t->seconds += st.t_total_s - st.t_prefill_s;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TARGET_DIR DRAFT_DIR [repeats]\n", argv[0]);
        return 2;
    }
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    if (reps < 1 || reps > MAX_REP) reps = 5;
    specdec_model *m = NULL, *d = NULL;
    specdec_tokenizer *tok = NULL;
    specdec_engine *e = NULL;
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = 512;
    if (specdec_model_load(argv[1], NULL, &m) || specdec_model_load(argv[2], NULL, &d) ||
        specdec_tokenizer_load(argv[1], &tok) || specdec_engine_create(m, d, &ep, &e)) {
        fprintf(stderr, "setup: %s\n", specdec_last_error());
        return 1;
    }
    specdec_model_info mi;
    specdec_model_get_info(m, &mi);
    int32_t *all = malloc(sizeof(int32_t) * (size_t)mi.vocab_size);
    if (!all) return 1;
    for (int32_t i = 0; i < mi.vocab_size; i++) all[i] = i;
    printf("# jump-forward, bundled pair (CPU), GREEDY, n_predict %d, %d prompts; medians of %d runs\n", N_PRED, N_P,
           reps);
    printf("| schema | drafter | tokens | passes off → on | forced | tok/s off | tok/s on | on/off |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    static const specdec_draft_method dms[] = {SPECDEC_DRAFT_NONE, SPECDEC_DRAFT_NGRAM, SPECDEC_DRAFT_MODEL};
    static const char *const dnames[] = {"none (plain)", "ngram", "model"};
    int rc = 0;
    for (int s = 0; s < N_S && !rc; s++) {
        specdec_grammar *g = NULL;
        if (specdec_grammar_compile(tok, SPECDEC_GRAMMAR_JSON_SCHEMA, SCHEMAS[s], strlen(SCHEMAS[s]), &g)) {
            fprintf(stderr, "compile: %s\n", specdec_last_error());
            return 1;
        }
        for (int k = 0; k < 3 && !rc; k++) {
            double tps[2][MAX_REP];
            tally t[2];
            static int32_t outs[2][N_P][N_PRED];
            int32_t ns[2][N_P];
            for (int r = 0; r < reps && !rc; r++)
                for (int off = 1; off >= 0 && !rc; off--) { /* interleaved: off, on, off, on, ... */
                    rc = run_all(e, tok, g, dms[k], all, mi.vocab_size, off, &t[off], outs[off], ns[off]);
                    tps[off][r] = t[off].seconds > 0 ? (double)t[off].tokens / t[off].seconds : 0;
                }
            for (int p = 0; p < N_P && !rc; p++)
                if (ns[0][p] != ns[1][p] || memcmp(outs[0][p], outs[1][p], sizeof(int32_t) * (size_t)ns[0][p])) {
                    fprintf(stderr, "%s, %s, prompt %d: outputs differ\n", NAMES[s], dnames[k], p);
                    rc = 1;
                }
            const double on = bench_median(tps[0], reps), offv = bench_median(tps[1], reps);
            printf("| %s | %s | %ld | %ld → %ld | %ld | %.0f | %.0f | %.2f |\n", NAMES[s], dnames[k], t[0].tokens,
                   t[1].passes, t[0].passes, t[0].forced, offv, on, offv > 0 ? on / offv : 0);
        }
        specdec_grammar_free(g);
    }
    free(all);
    specdec_engine_free(e);
    specdec_tokenizer_free(tok);
    specdec_model_free(d);
    specdec_model_free(m);
    return rc;
}
