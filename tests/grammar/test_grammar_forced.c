/* test_grammar_forced.c — jump-forward (core/sd_round.c round_grammar_forced): where the grammar
 * allows exactly one token, that token is proposed as a deterministic draft and verified in the
 * round's one target pass.
 *
 * The bundled pair, a JSON Schema grammar (an object with fixed keys: its keys, quotes, colons and
 * braces are forced), three prompts. Claims:
 *   1. GREEDY and MATCH (T 0.8, two seeds): plain decoding with jump-forward emits exactly what it
 *      emits without it (the reference: the same request with allowed_token_ids = every id, which
 *      turns jump-forward off and masks nothing) and what the draft model's chains and the n-gram
 *      drafter emit; REJECTION (T 1): the output obeys the grammar (checked by walking it);
 *   2. jump-forward happened: plain decoding proposed forced tokens (stats.n_forced > 0), every
 *      one of its drafts was forced (n_drafted == n_forced), and it took fewer target passes than
 *      tokens (n_target_passes < n_generated), while the reference took one per token;
 *   3. every forced token of plain decoding was accepted unless a stop cut its round (the round
 *      trace: n_accepted == n_drafted or the round emitted fewer than n_accepted + 1 tokens).
 * Jump-forward off (round_grammar_forced returning at once) fails claim 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_gen_util.h"

#define N_OUT 96

static const char SCHEMA[] = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
                             "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
                             "\"city\":{\"type\":\"string\",\"maxLength\":12}},\"required\":[\"name\",\"age\",\"city\"]}";

typedef struct trace {
    int32_t rounds, unaccepted;
} trace;

static void on_round(void *user, const specdec_round_info *ri) {
    trace *t = user;
    t->rounds++;
    if (ri->n_accepted < ri->n_drafted && ri->n_emitted == ri->n_accepted + 1) t->unaccepted++;
}

static int32_t run(specdec_engine *e, const int32_t *prompt, int32_t np, specdec_generate_params gp, trace *t,
                   int32_t *out, specdec_stats *st) {
    gp.round_callback = t ? on_round : NULL;
    gp.round_user_data = t;
    int32_t n = 0;
    SD_CHECK(specdec_generate(e, prompt, np, &gp, out, N_OUT, &n, st) == SPECDEC_OK, "generate: %s",
             specdec_engine_last_error(e));
    return n;
}

/* 1 if out[0..n) walks the grammar without a refused token (an end token ends the walk). */
static int obeys(const specdec_grammar *g, int32_t eos, const int32_t *out, int32_t n) {
    int32_t s = sd_grammar_start(g);
    for (int32_t i = 0; i < n && out[i] != eos; i++)
        if ((s = sd_grammar_next(g, s, out[i])) < 0) return 0;
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s TARGET_DIR DRAFT_DIR\n", argv[0]);
        return 2;
    }
    gg_env env;
    if (gg_env_load(&env, argv[1], argv[2])) return sd_test_done();
    specdec_model *m = env.m;
    specdec_tokenizer *tok = env.tok;
    specdec_engine *e = env.e;
    specdec_grammar *g = NULL;
    SD_CHECK(specdec_grammar_compile(tok, SPECDEC_GRAMMAR_JSON_SCHEMA, SCHEMA, strlen(SCHEMA), &g) == SPECDEC_OK,
             "compile: %s", specdec_last_error());
    specdec_model_info mi;
    SD_CHECK(specdec_model_get_info(m, &mi) == SPECDEC_OK, "info");
    int32_t *all = malloc(sizeof(int32_t) * (size_t)mi.vocab_size);
    for (int32_t i = 0; all && i < mi.vocab_size; i++) all[i] = i;
    const int32_t eos = specdec_tokenizer_eos_id(tok);
    static const char *const texts[] = {"And God said", "The name of the man was", "In the beginning"};
    int64_t forced = 0, gen = 0, passes = 0;
    for (int k = 0; k < 3 && g && all; k++) {
        int32_t prompt[64], np = 0;
        SD_CHECK(specdec_tokenize(tok, texts[k], strlen(texts[k]), 1, prompt, 64, &np) == SPECDEC_OK, "tokenize");
        for (int mode = 0; mode < 4; mode++) {
            specdec_generate_params gp = specdec_generate_default_params();
            gp.grammar = g;
            gp.n_predict = N_OUT;
            gp.draft_method = SPECDEC_DRAFT_NONE;
            gp.temperature = mode == 0 ? 0.0f : mode == 3 ? 1.0f : 0.8f;
            gp.verify = mode == 0 ? SPECDEC_VERIFY_GREEDY : mode == 3 ? SPECDEC_VERIFY_REJECTION : SPECDEC_VERIFY_MATCH;
            gp.seed = 700 + (uint64_t)(10 * k + mode);
            int32_t a[N_OUT], b[N_OUT], c[N_OUT];
            specdec_stats sa, sb, sc;
            trace t = {0, 0};
            const int32_t na = run(e, prompt, np, gp, &t, a, &sa);
            specdec_generate_params off = gp; /* the reference: jump-forward off */
            off.allowed_token_ids = all;
            off.n_allowed_token_ids = mi.vocab_size;
            const int32_t nb = run(e, prompt, np, off, NULL, b, &sb);
            SD_CHECK(obeys(g, eos, a, na), "prompt %d mode %d: the output breaks the grammar", k, mode);
            SD_CHECK(sa.n_forced > 0 && sa.n_drafted == sa.n_forced && sa.n_target_passes < sa.n_generated,
                     "prompt %d mode %d: forced %lld, drafted %lld, passes %lld for %lld tokens", k, mode,
                     (long long)sa.n_forced, (long long)sa.n_drafted, (long long)sa.n_target_passes,
                     (long long)sa.n_generated);
            SD_CHECK(sb.n_forced == 0 && sb.n_target_passes == sb.n_generated, "prompt %d mode %d: the reference forced",
                     k, mode);
            SD_CHECK(t.unaccepted == 0, "prompt %d mode %d: %d rounds rejected a forced token", k, mode,
                     (int)t.unaccepted);
            forced += sa.n_forced, gen += sa.n_generated, passes += sa.n_target_passes;
            if (mode == 3) continue; /* REJECTION: the same law, other draws */
            SD_CHECK(na == nb && !memcmp(a, b, sizeof(int32_t) * (size_t)na),
                     "prompt %d mode %d: jump-forward changed plain decoding's output (%d vs %d tokens)", k, mode,
                     (int)na, (int)nb);
            for (int d = 0; d < 2; d++) { /* the draft model's chains; the n-gram drafter (extended by forcing) */
                specdec_generate_params gd = gp;
                gd.draft_method = d ? SPECDEC_DRAFT_NGRAM : SPECDEC_DRAFT_MODEL;
                gd.ngram_cost = SPECDEC_NGRAM_COST_OFF;
                const int32_t nc = run(e, prompt, np, gd, NULL, c, &sc);
                SD_CHECK(nc == na && !memcmp(a, c, sizeof(int32_t) * (size_t)na),
                         "prompt %d mode %d: the %s drafter's output differs from plain decoding's", k, mode,
                         d ? "n-gram" : "model");
            }
            if (k == 0 && mode == 0) {
                char txt[1024];
                size_t len = 0;
                if (specdec_detokenize(tok, a, na, 1, txt, sizeof txt, &len) == SPECDEC_OK)
                    printf("greedy: %.*s\n", (int)len, txt);
            }
        }
    }
    printf("plain decoding under the schema: %lld tokens in %lld target passes, %lld forced\n", (long long)gen,
           (long long)passes, (long long)forced);
    free(all);
    specdec_grammar_free(g);
    gg_env_free(&env);
    return sd_test_done();
}
