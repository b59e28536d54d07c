/* test_grammar_ngram.c — n-gram drafts under a grammar (core/sd_round.c round_grammar_trim for
 * chains; core/sd_ngram.c trie_insert for trees: a refused token is not inserted).
 *
 * The bundled target, no draft model, the n-gram drafter proposing every match (ngram_cost OFF),
 * a prompt that repeats "In the beginning God created the heaven and the earth." and a grammar
 * (regex " made the [a-z ]+\.") that refuses the prompt's continuation at its first byte.
 * Claims:
 *   1. no round proposes a token the grammar refuses: every drafted text token continues the
 *      grammar from the state after the output so far (checked from the round trace with the
 *      grammar's own transitions; an end token ends the check of its chain);
 *   2. the cut changes nothing else: GREEDY output == plain greedy decoding under the grammar,
 *      MATCH (T 0.8, three seeds) == plain sampling with the same seed, and the output matches;
 *   3. the drafter still proposed (some rounds drafted tokens, some of them branching trees), so
 *      1 is not vacuous.
 * Chains and trees (widths 3,2,2,1). Without the cut, the first round drafts " created the ..."
 * (refused) and claim 1 fails, for chains and for trees alike. */
#include <stdio.h>
#include <string.h>

#include "grammar_gen_util.h"

#define N_OUT 48

typedef struct trace {
    const specdec_grammar *g;
    int32_t eos, state, refused, rounds_drafted;
    int32_t tree_rounds; /* rounds whose drafts branch (a tree, not a chain) */
} trace;

static void on_round(void *user, const specdec_round_info *ri) {
    trace *t = user;
    int32_t from[SPECDEC_MAX_TREE_NODES];
    t->refused += gg_refused_drafts(t->g, t->eos, t->state, ri, from);
    if (ri->n_drafted > 1 && ri->draft_parents[ri->n_drafted - 1] != ri->n_drafted - 2) t->tree_rounds++;
    t->rounds_drafted += ri->n_drafted > 0;
    gg_emitted(t->g, t->eos, ri, &t->state);
}

static int32_t run(specdec_engine *e, const int32_t *prompt, int32_t np, specdec_generate_params gp,
                   specdec_draft_method dm, int tree, trace *t, int32_t *out) {
    static const int32_t widths[4] = {3, 2, 2, 1};
    gp.draft_method = dm;
    if (tree) SD_CHECK(specdec_generate_params_set_tree(&gp, widths, 4) == SPECDEC_OK, "tree");
    gp.ngram_cost = SPECDEC_NGRAM_COST_OFF;
    gp.round_callback = t ? on_round : NULL;
    gp.round_user_data = t;
    if (t) t->state = sd_grammar_start(t->g);
    int32_t n = 0;
    SD_CHECK(specdec_generate(e, prompt, np, &gp, out, N_OUT, &n, NULL) == SPECDEC_OK, "generate: %s",
             specdec_engine_last_error(e));
    return n;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
        return 2;
    }
    gg_env env;
    if (gg_env_load(&env, argv[1], NULL)) return sd_test_done();
    specdec_tokenizer *tok = env.tok;
    specdec_engine *e = env.e;
    specdec_grammar *g = NULL;
    static const char re[] = " made the [a-z ]+\\.";
    SD_CHECK(specdec_grammar_compile(tok, SPECDEC_GRAMMAR_REGEX, re, strlen(re), &g) == SPECDEC_OK, "compile: %s",
             specdec_last_error());
    static const char text[] = "In the beginning God created the heaven and the earth. And the earth was without form, "
                               "and void. In the beginning God created the heaven and the earth. In the beginning God";
    int32_t prompt[128], np = 0;
    SD_CHECK(specdec_tokenize(tok, text, strlen(text), 1, prompt, 128, &np) == SPECDEC_OK, "tokenize");
    trace t = {g, specdec_tokenizer_eos_id(tok), 0, 0, 0, 0};
    specdec_generate_params gp = specdec_generate_default_params();
    gp.grammar = g;
    gp.n_predict = 40;
    gp.n_draft = 4;
    for (int mode = 0; mode < 8 && g; mode++) { /* modes 4-7: n-gram trees (widths 3,2,2,1) */
        const int tree = mode >= 4;
        gp.temperature = mode % 4 ? 0.8f : 0.0f;
        gp.verify = mode % 4 ? SPECDEC_VERIFY_MATCH : SPECDEC_VERIFY_GREEDY;
        gp.seed = 100 + (uint64_t)(mode % 4);
        int32_t ref[N_OUT], got[N_OUT];
        const int32_t nr = run(e, prompt, np, gp, SPECDEC_DRAFT_NONE, 0, NULL, ref);
        const int32_t ng = run(e, prompt, np, gp, SPECDEC_DRAFT_NGRAM, tree, &t, got);
        SD_CHECK(nr > 0 && ng == nr && !memcmp(ref, got, sizeof(int32_t) * (size_t)nr),
                 "mode %d: n-gram drafts under the grammar changed the output (%d vs %d tokens)", mode, (int)ng,
                 (int)nr);
        char out[1024];
        size_t len = 0;
        SD_CHECK(specdec_detokenize(tok, got, ng, 1, out, sizeof out, &len) == SPECDEC_OK && len > 11 &&
                     !strncmp(out, " made the ", 10) && out[len - 1] == '.',
                 "mode %d: output %.*s does not match %s", mode, (int)len, out, re);
        printf("mode %d: %.*s\n", mode, (int)len, out);
    }
    SD_CHECK(t.refused == 0, "%d drafted tokens the grammar refuses were proposed", (int)t.refused);
    SD_CHECK(t.rounds_drafted > 0 && t.tree_rounds > 0,
             "the n-gram drafter never proposed (%d rounds) or never branched (%d): the check above is vacuous",
             (int)t.rounds_drafted, (int)t.tree_rounds);
    printf("rounds with drafts: %d (branching trees: %d), refused drafted tokens: %d\n", (int)t.rounds_drafted,
           (int)t.tree_rounds, (int)t.refused);
    specdec_grammar_free(g);
    gg_env_free(&env);
    return sd_test_done();
}
