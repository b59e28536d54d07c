/* grammar_gen_util.h — what the generation tests under a grammar share (test_grammar_ngram.c,
 * test_grammar_eagle3.c, test_grammar_forced.c): the bundled model(s) on the CPU backend, and the
 * walk of a round's drafts through the grammar. Header-only (static inline). */
#ifndef GRAMMAR_GEN_UTIL_H
#define GRAMMAR_GEN_UTIL_H

#include <stdint.h>

#include "sd_grammar.h"
#include "sd_test.h"
#include "specdec.h"

/* A CPU engine of n_ctx 256 over the model in target_dir (and draft_dir when not NULL: a draft
 * model or an EAGLE-3 head), with the target's tokenizer. 0, or 1 after a failed check. */
typedef struct gg_env {
    specdec_model *m, *d;
    specdec_tokenizer *tok;
    specdec_engine *e;
} gg_env;

static inline int gg_env_load(gg_env *v, const char *target_dir, const char *draft_dir) {
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = 256;
    *v = (gg_env){0};
    if (specdec_model_load(target_dir, NULL, &v->m) != SPECDEC_OK ||
        (draft_dir && specdec_model_load(draft_dir, NULL, &v->d) != SPECDEC_OK) ||
        specdec_tokenizer_load(target_dir, &v->tok) != SPECDEC_OK ||
        specdec_engine_create(v->m, v->d, &ep, &v->e) != SPECDEC_OK) {
        SD_CHECK(0, "setup: %s", specdec_last_error());
        return 1;
    }
    return 0;
}

static inline void gg_env_free(gg_env *v) {
    specdec_engine_free(v->e);
    specdec_tokenizer_free(v->tok);
    specdec_model_free(v->d);
    specdec_model_free(v->m);
}

/* The drafted nodes of round ri walked through g from state `root` (a chain: each node's parent
 * is the one before; nodes below an end token or a refused node are not checked). For each text
 * token the grammar refuses, from[k] = the state it was drafted at (at most SPECDEC_MAX_TREE_NODES);
 * returns how many. */
static inline int32_t gg_refused_drafts(const specdec_grammar *g, int32_t eos, int32_t root,
                                        const specdec_round_info *ri, int32_t *from) {
    int32_t st[SPECDEC_MAX_TREE_NODES], k = 0;
    for (int32_t i = 0; i < ri->n_drafted; i++) {
        const int32_t p = ri->draft_parents[i], f = p < 0 ? root : st[p];
        st[i] = -1;
        if (f < 0 || ri->draft_tokens[i] == eos) continue;
        st[i] = sd_grammar_next(g, f, ri->draft_tokens[i]);
        if (st[i] == SD_FSM_DEAD) from[k++] = f;
        if (st[i] < 0) st[i] = -1;
    }
    return k;
}

/* *state advanced over the tokens round ri emitted (the end token skipped). */
static inline void gg_emitted(const specdec_grammar *g, int32_t eos, const specdec_round_info *ri, int32_t *state) {
    for (int32_t i = 0; i < ri->n_emitted && *state >= 0; i++)
        if (ri->emitted[i] != eos) *state = sd_grammar_next(g, *state, ri->emitted[i]);
}

#endif
