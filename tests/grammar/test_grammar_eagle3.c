/* test_grammar_eagle3.c — EAGLE-3 drafts under a grammar (core/sd_drafter_eagle3.c e3d_mask: the
 * head's draft logits are masked with the grammar state of each chain step / tree node, as the
 * target's rows are).
 *
 * The bundled target with its EAGLE-3 head (models/kjv-eagle3, trained on the same text), a
 * prompt whose continuation the head knows ("...God created the heaven and the earth.") and a
 * grammar (regex " made the [a-z ]+\.") that refuses that continuation at its first byte.
 * Claims, for EAGLE-3 chains (depth 4) and trees (8 nodes), GREEDY and MATCH (T 0.8, two seeds):
 *   1. no round proposes a token the grammar refuses where it allows a text token: every drafted
 *      text token continues the grammar from the state after the output so far and its tree
 *      ancestors (checked from the round trace with the grammar's own transitions; an end token
 *      ends the check of its branch). Where the grammar is complete (only EOS may follow) and the
 *      head's draft vocabulary lacks EOS (kjv-eagle3's does), a chain still proposes one (refused,
 *      wasted) token and a tree node gets no children: checked as 0 for trees, counted for chains;
 *   2. the output is plain decoding's under the grammar (GREEDY: the argmax path; MATCH: the same
 *      seed's sample) and matches the regex;
 *   3. the head still proposed and some drafts were accepted, so 1 and 2 are not vacuous.
 * Without the mask (checked by hand when it was written) the head drafts " created the ..." and
 * claim 1 fails: 6 refused drafts in chains and 23 in trees, which took 11 and 9 drafting rounds
 * for these outputs where the mask takes 6 and 5. */
#include <stdio.h>
#include <string.h>

#include "grammar_gen_util.h"

#define N_OUT 48

typedef struct trace {
    const specdec_grammar *g;
    int32_t eos, state, refused, rounds_drafted, accepted;
    int32_t refused_complete; /* refused drafts at a state that allows no text token (only EOS) */
    int32_t V;
    float *row;
} trace;

/* 1 if state s allows some text token (not only the end token). */
static int allows_text(trace *t, int32_t s) {
    memset(t->row, 0, (size_t)t->V * sizeof(float));
    int only_end = 0;
    SD_CHECK(sd_grammar_apply(t->g, s, t->row, t->V, &t->eos, 1, &only_end, NULL) == SPECDEC_OK, "apply");
    return !only_end;
}

static void on_round(void *user, const specdec_round_info *ri) {
    trace *t = user;
    int32_t from[SPECDEC_MAX_TREE_NODES];
    const int32_t k = gg_refused_drafts(t->g, t->eos, t->state, ri, from);
    for (int32_t i = 0; i < k; i++) {
        if (allows_text(t, from[i])) t->refused++;
        else t->refused_complete++;
    }
    t->rounds_drafted += ri->n_drafted > 0;
    t->accepted += ri->n_accepted;
    gg_emitted(t->g, t->eos, ri, &t->state);
}

static int32_t run(specdec_engine *e, const int32_t *prompt, int32_t np, specdec_generate_params gp, int tree,
                   trace *t, int32_t *out) {
    if (t) {
        gp.draft_method = SPECDEC_DRAFT_EAGLE3;
        gp.n_draft = 4;
        if (tree) gp.draft_nodes = 8;
    } else {
        gp.draft_method = SPECDEC_DRAFT_NONE;
    }
    gp.round_callback = t ? on_round : NULL;
    gp.round_user_data = t;
    if (t) t->state = sd_grammar_start(t->g);
    int32_t n = 0;
    SD_CHECK(specdec_generate(e, prompt, np, &gp, out, N_OUT, &n, NULL) == SPECDEC_OK, "generate: %s",
             specdec_engine_last_error(e));
    return n;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s TARGET_DIR EAGLE3_HEAD_DIR\n", argv[0]);
        return 2;
    }
    gg_env env;
    if (gg_env_load(&env, argv[1], argv[2])) return sd_test_done();
    specdec_model *m = env.m;
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
    specdec_model_info mi;
    specdec_generate_params gp = specdec_generate_default_params();
    gp.grammar = g;
    gp.n_predict = 40;
    for (int tree = 0; tree < 2 && g; tree++) {
        static float row[1 << 16];
        trace t = {g, specdec_tokenizer_eos_id(tok), 0, 0, 0, 0, 0, 0, row};
        SD_CHECK(specdec_model_get_info(m, &mi) == SPECDEC_OK && mi.vocab_size <= (int32_t)(sizeof row / sizeof row[0]),
                 "model info");
        t.V = mi.vocab_size;
        for (int mode = 0; mode < 3; mode++) {
            gp.temperature = mode ? 0.8f : 0.0f;
            gp.verify = mode ? SPECDEC_VERIFY_MATCH : SPECDEC_VERIFY_GREEDY;
            gp.seed = 100 + (uint64_t)mode;
            int32_t ref[N_OUT], got[N_OUT];
            const int32_t nr = run(e, prompt, np, gp, tree, NULL, ref);
            const int32_t ng = run(e, prompt, np, gp, tree, &t, got);
            SD_CHECK(nr > 0 && ng == nr && !memcmp(ref, got, sizeof(int32_t) * (size_t)nr),
                     "%s, mode %d: EAGLE-3 drafts under the grammar changed the output (%d vs %d tokens)",
                     tree ? "tree" : "chain", mode, (int)ng, (int)nr);
            char out[1024];
            size_t len = 0;
            SD_CHECK(specdec_detokenize(tok, got, ng, 1, out, sizeof out, &len) == SPECDEC_OK && len > 11 &&
                         !strncmp(out, " made the ", 10) && out[len - 1] == '.',
                     "%s, mode %d: output %.*s does not match %s", tree ? "tree" : "chain", mode, (int)len, out, re);
            printf("%s, mode %d: %.*s\n", tree ? "tree" : "chain", mode, (int)len, out);
        }
        SD_CHECK(t.refused == 0, "%s: %d drafted tokens the grammar refuses were proposed", tree ? "tree" : "chain",
                 (int)t.refused);
        /* a tree node whose state allows nothing of the head's draft vocabulary gets no children */
        if (tree) SD_CHECK(t.refused_complete == 0, "tree: %d children below a complete grammar", (int)t.refused_complete);
        SD_CHECK(t.rounds_drafted > 0 && t.accepted > 0, "%s: the head never proposed (%d rounds) or never was right (%d)",
                 tree ? "tree" : "chain", (int)t.rounds_drafted, (int)t.accepted);
        printf("%s: rounds with drafts %d, drafts accepted %d, refused drafted tokens %d (+%d where only EOS could "
               "follow, which the head's draft vocabulary lacks)\n",
               tree ? "tree" : "chain", (int)t.rounds_drafted, (int)t.accepted, (int)t.refused, (int)t.refused_complete);
    }
    specdec_grammar_free(g);
    gg_env_free(&env);
    return sd_test_done();
}
