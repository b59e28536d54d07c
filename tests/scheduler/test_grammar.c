/* test_grammar.c — structured output (specdec_grammar_compile, specdec_generate_params.grammar) on
 * the bundled pair and its EAGLE-3 head, compiled against the pair's real tokenizer.
 * (Exactness in law: tests/engine/test_grammar_dist.c.)
 *  1. Every drafter gives plain decoding's output under a grammar: the draft model's chains and
 *     trees, the n-gram drafter, the EAGLE-3 head's chains and trees; GREEDY and MATCH; a regex,
 *     a choice, a JSON schema, json_object and a GBNF grammar (model and EAGLE-3 chains only: CI
 *     time). The output obeys the grammar, checked without it:
 *     the choice is one of the strings; the schema's output parses (cJSON) with the fields' types
 *     and bounds; json_object parses as an object; the regex's (and the GBNF grammar's,
 *     the same language) output by a hand-written matcher. Sampling under the GBNF grammar (rejection,
 *     T = 1) repeats with its seed.
 *  2. The scheduler (runner groups, several requests per round, with and without grammars) gives
 *     specdec_generate's output; the caller frees each grammar right after submitting (the
 *     requests hold their own references: a use after free would show under ASan).
 *  4. Gated grammars (grammar_after_tokens, since 0.5.4; the server's reasoning parsers): with the
 *     marker "," (a token the model writes mid-output), plain decoding gives the unconstrained
 *     output through the first marker, then text obeying the regex; every drafter (model chain and
 *     tree, n-gram, EAGLE-3 chain and tree; greedy and match) equals it, and some round emits
 *     tokens past the marker (a chain crossed it); a marker that never comes leaves the output
 *     unconstrained; the scheduler equals specdec_generate; a marker without a grammar, an id
 *     outside the vocabulary or more than SPECDEC_MAX_GRAMMAR_AFTER_TOKENS ids are refused.
 *  3. specdec_grammar_compile refuses what it must: a malformed regex / schema / choice list is
 *     INVALID_ARGUMENT, a schema keyword it does not support UNSUPPORTED, json_object with a spec,
 *     an unknown kind, NULL arguments. */
#include "sched_common.h"

#include <cjson/cJSON.h>

#define NPRED 64
#define MAXP 64

enum { G_REGEX, G_CHOICE, G_SCHEMA, G_OBJECT, G_GBNF, N_G };
static const char *const G_NAME[N_G] = {"regex", "choice", "json schema", "json_object", "gbnf"};
static const char RE_SPEC[] = "(And|Then) [a-z]+( [a-z]+){0,5}\\.";
static const char CHOICE_SPEC[] = "[\"the LORD\", \"Moses\", \"Jesus wept.\", \"Καὶ\"]";
static const char SCHEMA_SPEC[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
    "\"age\":{\"type\":\"integer\"},\"ok\":{\"type\":\"boolean\"},"
    "\"kind\":{\"enum\":[\"prophet\",\"king\"]}},\"required\":[\"name\",\"age\",\"ok\",\"kind\"]}";
/* RE_SPEC's language as a GBNF grammar (core/sd_gbnf.h): its outputs are checked by re_match. */
static const char GBNF_SPEC[] = "root ::= opener \" \" words \".\"  # a sentence\n"
                                "opener ::= \"And\" | \"Then\"\n"
                                "words ::= word (\" \" word){0,5}\n"
                                "word ::= [a-z]+\n";
static specdec_grammar *g_gram[N_G];

static int g_quick; /* the sanitizer builds: part 1 with the EAGLE-3 chain drafter only */

static specdec_status compile(const sc_env *e, int k, specdec_grammar **g) {
    switch (k) {
    case G_REGEX: return specdec_grammar_compile(e->tok, SPECDEC_GRAMMAR_REGEX, RE_SPEC, strlen(RE_SPEC), g);
    case G_CHOICE: return specdec_grammar_compile(e->tok, SPECDEC_GRAMMAR_CHOICE, CHOICE_SPEC, strlen(CHOICE_SPEC), g);
    case G_SCHEMA:
        return specdec_grammar_compile(e->tok, SPECDEC_GRAMMAR_JSON_SCHEMA, SCHEMA_SPEC, strlen(SCHEMA_SPEC), g);
    case G_GBNF: return specdec_grammar_compile(e->tok, SPECDEC_GRAMMAR_GBNF, GBNF_SPEC, strlen(GBNF_SPEC), g);
    default: return specdec_grammar_compile(e->tok, SPECDEC_GRAMMAR_JSON_OBJECT, NULL, 0, g);
    }
}

/* [a-z]+ at *p; returns 1 and advances when at least one letter is there. */
static int word(const char **p) {
    const char *s = *p;
    while (**p >= 'a' && **p <= 'z') (*p)++;
    return *p > s;
}

/* The regex of RE_SPEC, by hand. */
static int re_match(const char *t) {
    if (!strncmp(t, "And ", 4)) t += 4;
    else if (!strncmp(t, "Then ", 5)) t += 5;
    else return 0;
    if (!word(&t)) return 0;
    for (int i = 0; i < 5 && *t == ' '; i++) {
        t++;
        if (!word(&t)) return 0;
    }
    return !strcmp(t, ".");
}

static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static int schema_match(const char *t) {
    cJSON *j = cJSON_Parse(t);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name"), *age = cJSON_GetObjectItemCaseSensitive(j, "age");
    const cJSON *ok = cJSON_GetObjectItemCaseSensitive(j, "ok"), *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
    const int good = cJSON_IsObject(j) && cJSON_GetArraySize(j) == 4 && cJSON_IsString(name) &&
                     utf8_chars(name->valuestring) <= 12 && cJSON_IsNumber(age) && age->valuedouble == (double)(long long)age->valuedouble &&
                     cJSON_IsBool(ok) && cJSON_IsString(kind) &&
                     (!strcmp(kind->valuestring, "prophet") || !strcmp(kind->valuestring, "king"));
    cJSON_Delete(j);
    return good;
}

/* The output's text obeys grammar k (complete: it ended with an end token). */
static int obeys(const sc_env *e, int k, const int32_t *out, int32_t n, const specdec_stats *st) {
    char text[4096];
    size_t len = 0;
    const int ended = st->stop_reason == SPECDEC_STOP_EOS;
    if (specdec_detokenize(e->tok, out, n, 1, text, sizeof text, &len) != SPECDEC_OK) return 0;
    if (!ended) return 1; /* cut by n_predict: nothing more to check here than the masks did */
    switch (k) {
    case G_REGEX:
    case G_GBNF: return re_match(text);
    case G_CHOICE:
        return !strcmp(text, "the LORD") || !strcmp(text, "Moses") || !strcmp(text, "Jesus wept.") ||
               !strcmp(text, "Καὶ");
    case G_SCHEMA: return schema_match(text);
    default: {
        cJSON *j = cJSON_Parse(text);
        const int good = cJSON_IsObject(j);
        cJSON_Delete(j);
        return good;
    }
    }
}

static int32_t gen(specdec_engine *e, const int32_t *prompt, int32_t n_prompt, const specdec_generate_params *gp,
                   int32_t *out, specdec_stats *st) {
    int32_t n = 0;
    const specdec_status s = specdec_generate(e, prompt, n_prompt, gp, out, NPRED, &n, st);
    if (s != SPECDEC_OK) {
        fprintf(stderr, "generate: %s: %s\n", specdec_status_string(s), specdec_engine_last_error(e));
        return -1;
    }
    return n;
}

/* One drafter's settings (d: 0 model chain, 1 model tree, 2 ngram, 3 eagle3 chain, 4 eagle3 tree). */
static const char *drafter(specdec_generate_params *g2, int d, specdec_engine **eng, specdec_engine *eh) {
    static const int32_t widths[3] = {2, 2, 1};
    g2->draft_method = SPECDEC_DRAFT_MODEL;
    switch (d) {
    case 1: SD_CHECK(specdec_generate_params_set_tree(g2, widths, 3) == SPECDEC_OK, "tree"); return "model tree 2,2,1";
    case 2: g2->draft_method = SPECDEC_DRAFT_NGRAM, g2->ngram_cost = SPECDEC_NGRAM_COST_OFF; return "ngram";
    case 3: g2->draft_method = SPECDEC_DRAFT_EAGLE3, *eng = eh; return "eagle3 chain";
    case 4: g2->draft_method = SPECDEC_DRAFT_EAGLE3, g2->draft_nodes = 8, *eng = eh; return "eagle3 tree";
    default: return "model chain";
    }
}

/* Part 1: every drafter equals plain decoding, and the output obeys the grammar. */
static void part1(sc_env *e, specdec_engine *eh) {
    int32_t prompt[MAXP], ref[NPRED], out[NPRED];
    long ended = 0, runs = 0;
    for (int k = 0; k < N_G; k++)
        for (int mode = 0; mode < 2; mode++)
            for (int pi = 0; pi < 1; pi++) {
                const int32_t np = sc_encode(e, SC_PROMPTS[(pi + 2 * k) % SC_N_PROMPTS], prompt, MAXP);
                specdec_generate_params gp = sc_params(mode, 0x6a0 + (uint64_t)k, NPRED, 4);
                gp.grammar = g_gram[k];
                gp.draft_method = SPECDEC_DRAFT_NONE;
                specdec_stats rst;
                const int32_t nr = gen(e->ref, prompt, np, &gp, ref, &rst);
                SD_CHECK(nr > 0 && obeys(e, k, ref, nr, &rst), "part 1: %s, %s, prompt %d: plain decoding obeys the grammar",
                         G_NAME[k], mode ? "match" : "greedy", pi);
                ended += rst.stop_reason == SPECDEC_STOP_EOS;
                runs++;
                for (int d = g_quick ? 3 : 0; d < (g_quick ? 4 : 5); d++) {
                    if (k == G_GBNF && d != 0 && d != 3) continue; /* CI time: the two chain drafters */
                    specdec_generate_params g2 = gp;
                    specdec_engine *eng = e->ref;
                    const char *what = drafter(&g2, d, &eng, eh);
                    specdec_stats st;
                    const int32_t n = gen(eng, prompt, np, &g2, out, &st);
                    SD_CHECK(nr > 0 && n == nr && sc_same(out, ref, n) && st.stop_reason == rst.stop_reason,
                             "part 1: %s, %s, %s, prompt %d: equals plain decoding", G_NAME[k], mode ? "match" : "greedy",
                             what, pi);
                }
            }
    printf("part 1: %ld of %ld plain outputs completed their grammar (EOS)\n", ended, runs);
    SD_CHECK(ended * 2 >= runs, "part 1: most outputs complete their grammar within %d tokens (%ld of %ld)", NPRED,
             ended, runs);
}

/* Part 2: the scheduler equals specdec_generate; grammars freed right after submit. */
static void part2(sc_env *e) {
    enum { NR = 8 };
    int32_t prompt[NR][MAXP], np[NR], ref[NR][NPRED], nref[NR], out[NPRED];
    specdec_generate_params gp[NR];
    specdec_stats rst[NR];
    specdec_grammar *own[NR] = {0};
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
        gp[i] = sc_params(i % 2, 91 + (uint64_t)i, NPRED, 3);
        if (i % 4 != 3) SD_CHECK(compile(e, i % N_G, &own[i]) == SPECDEC_OK, "part 2: compile: %s", specdec_last_error());
        gp[i].grammar = own[i];
        if (i == 5) gp[i].draft_method = SPECDEC_DRAFT_NGRAM, gp[i].ngram_cost = SPECDEC_NGRAM_COST_OFF;
        nref[i] = gen(e->ref, prompt[i], np[i], &gp[i], ref[i], &rst[i]);
    }
    for (int i = 0; i < NR; i++) {
        SD_CHECK(specdec_scheduler_submit(s, prompt[i], np[i], &gp[i], &id[i]) == SPECDEC_OK, "part 2: submit %d: %s", i,
                 specdec_scheduler_last_error(s));
        specdec_grammar_free(own[i]); /* the request keeps its own reference */
    }
    for (int i = 0; i < NR; i++) {
        int32_t n = 0;
        specdec_status outcome = SPECDEC_OK;
        specdec_stats st;
        SD_CHECK(specdec_scheduler_wait(s, id[i], -1, out, NPRED, &n, &st, &outcome) == SPECDEC_OK && outcome == SPECDEC_OK,
                 "part 2: wait %d", i);
        SD_CHECK(n == nref[i] && sc_same(out, ref[i], n) && st.stop_reason == rst[i].stop_reason,
                 "part 2: request %d equals specdec_generate (%d vs %d tokens)", i, (int)n, (int)nref[i]);
    }
    specdec_scheduler_free(s);
}

/* Seeds: sampled (rejection, T = 1) under the GBNF grammar with the draft model, each seed twice:
 * the same output again, and it obeys the grammar; different seeds do not all agree. */
static void part_seeds(sc_env *e) {
    int32_t prompt[MAXP], out[2][NPRED], first[NPRED], nfirst = -1;
    const int32_t np = sc_encode(e, SC_PROMPTS[1], prompt, MAXP);
    int differ = 0;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        specdec_generate_params gp = sc_params(1, seed, NPRED, 3);
        gp.verify = SPECDEC_VERIFY_REJECTION;
        gp.temperature = 1.0f;
        gp.grammar = g_gram[G_GBNF];
        specdec_stats st[2];
        const int32_t n0 = gen(e->ref, prompt, np, &gp, out[0], &st[0]), n1 = gen(e->ref, prompt, np, &gp, out[1], &st[1]);
        SD_CHECK(n0 > 0 && n0 == n1 && sc_same(out[0], out[1], n0), "seeds: seed %d repeats its output", (int)seed);
        SD_CHECK(n0 > 0 && obeys(e, G_GBNF, out[0], n0, &st[0]), "seeds: seed %d obeys the grammar", (int)seed);
        if (nfirst < 0) nfirst = n0, memcpy(first, out[0], sizeof first);
        else differ |= n0 != nfirst || !sc_same(out[0], first, n0);
    }
    SD_CHECK(differ, "seeds: three seeds gave one output");
}

/* Part 4: gated grammars. A round that emitted tokens after the marker's (a chain crossed it). */
static int32_t g_marker;
static long g_crossed;
static void on_round(void *ud, const specdec_round_info *ri) {
    (void)ud;
    for (int32_t i = 0; i + 1 < ri->n_emitted; i++) g_crossed += ri->emitted[i] == g_marker;
}

static void part_gate(sc_env *e, specdec_engine *eh) {
    int32_t prompt[MAXP], free_out[NPRED], ref[NPRED], out[NPRED];
    const int32_t np = sc_encode(e, SC_PROMPTS[0], prompt, MAXP);
    int32_t n_m = 0;
    SD_CHECK(specdec_tokenize(e->tok, ",", 1, 0, &g_marker, 1, &n_m) == SPECDEC_OK && n_m == 1, "gate: ',' is one token");
    specdec_stats st;
    long runs = 0;
    for (int mode = 0; mode < 2; mode++) {
        specdec_generate_params gp = sc_params(mode, 0x9a7e, NPRED, 4);
        gp.draft_method = SPECDEC_DRAFT_NONE;
        const int32_t nf = gen(e->ref, prompt, np, &gp, free_out, &st);
        int32_t at = -1; /* the first marker of the unconstrained output */
        for (int32_t i = 0; i < nf && at < 0; i++) at = free_out[i] == g_marker ? i : -1;
        SD_CHECK(at > 0 && at + 8 < NPRED, "gate: the unconstrained output holds ',' early (at %d)", (int)at);
        if (at <= 0) return;
        gp.grammar = g_gram[G_REGEX];
        gp.grammar_after_tokens = &g_marker;
        gp.n_grammar_after_tokens = 1;
        specdec_stats rst;
        const int32_t nr = gen(e->ref, prompt, np, &gp, ref, &rst);
        SD_CHECK(nr > at && sc_same(ref, free_out, at + 1), "gate %d: unconstrained through the marker", mode);
        SD_CHECK(nr > at && obeys(e, G_REGEX, ref + at + 1, nr - at - 1, &rst) && ref[at + 1] != free_out[at + 1],
                 "gate %d: the regex after the marker", mode);
        for (int d = g_quick ? 3 : 0; d < (g_quick ? 4 : 5); d++) {
            specdec_generate_params g2 = gp;
            specdec_engine *eng = e->ref;
            const char *what = drafter(&g2, d, &eng, eh);
            g2.round_callback = on_round;
            const int32_t n = gen(eng, prompt, np, &g2, out, &st);
            SD_CHECK(n == nr && sc_same(out, ref, n) && st.stop_reason == rst.stop_reason,
                     "gate %d, %s: equals plain decoding (%d vs %d tokens)", mode, what, (int)n, (int)nr);
            runs++;
        }
        /* a marker that never comes: the unconstrained output */
        const int32_t never = free_out[0] == 7 ? 8 : 7;
        int32_t never_seen = 1;
        for (int32_t i = 0; i < nf; i++) never_seen &= free_out[i] != never;
        gp.grammar_after_tokens = &never;
        const int32_t nn = gen(e->ref, prompt, np, &gp, out, &st);
        SD_CHECK(!never_seen || (nn == nf && sc_same(out, free_out, nf)), "gate %d: an absent marker constrains nothing",
                 mode);
    }
    printf("part 4: %ld drafted runs equal plain decoding; %ld rounds emitted tokens past the marker\n", runs,
           g_crossed);
    SD_CHECK(g_crossed > 0, "gate: no round's chain crossed the marker");
    /* the scheduler: gated requests among others equal specdec_generate */
    specdec_engine_params ep = sc_engine_params();
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = 3;
    specdec_scheduler *s = NULL;
    SD_CHECK(specdec_scheduler_create(e->tm, e->dm, &ep, &sp, &s) == SPECDEC_OK, "gate: scheduler");
    if (!s) return;
    enum { NR = 4 };
    specdec_generate_params gp[NR];
    int32_t want[NR][NPRED], nw[NR];
    specdec_request_id id[NR];
    for (int i = 0; i < NR; i++) {
        gp[i] = sc_params(i % 2, 5 + (uint64_t)i, NPRED, 3);
        gp[i].grammar = g_gram[i % 2 ? G_OBJECT : G_REGEX];
        int32_t marker = g_marker; /* the scheduler copies it at submit */
        gp[i].grammar_after_tokens = i == 3 ? NULL : &marker;
        gp[i].n_grammar_after_tokens = i == 3 ? 0 : 1;
        nw[i] = gen(e->ref, prompt, np, &gp[i], want[i], &st);
        SD_CHECK(specdec_scheduler_submit(s, prompt, np, &gp[i], &id[i]) == SPECDEC_OK, "gate: submit %d", i);
        marker = -1;
    }
    for (int i = 0; i < NR; i++) {
        int32_t n = 0;
        specdec_status outcome = SPECDEC_OK;
        SD_CHECK(specdec_scheduler_wait(s, id[i], -1, out, NPRED, &n, &st, &outcome) == SPECDEC_OK && outcome == SPECDEC_OK &&
                     n == nw[i] && sc_same(out, want[i], n),
                 "gate: scheduler request %d equals specdec_generate", i);
    }
    specdec_scheduler_free(s);
    /* refusals */
    specdec_generate_params bad = sc_params(0, 1, NPRED, 3);
    int32_t ids[SPECDEC_MAX_GRAMMAR_AFTER_TOKENS + 1] = {0};
    bad.grammar_after_tokens = ids, bad.n_grammar_after_tokens = 1;
    int32_t n = 0;
    SD_CHECK(specdec_generate(e->ref, prompt, np, &bad, out, NPRED, &n, &st) == SPECDEC_ERR_INVALID_ARGUMENT &&
                 strstr(specdec_engine_last_error(e->ref), "grammar_after_tokens"),
             "gate: a marker without a grammar is refused");
    bad.grammar = g_gram[G_REGEX];
    ids[0] = 1 << 30;
    SD_CHECK(specdec_generate(e->ref, prompt, np, &bad, out, NPRED, &n, &st) == SPECDEC_ERR_INVALID_ARGUMENT,
             "gate: an id outside the vocabulary is refused");
    ids[0] = 0, bad.n_grammar_after_tokens = SPECDEC_MAX_GRAMMAR_AFTER_TOKENS + 1;
    SD_CHECK(specdec_generate_params_validate(&bad) == SPECDEC_ERR_INVALID_ARGUMENT, "gate: too many ids are refused");
}

/* Part 3: what compile refuses. */
static void part3(sc_env *e) {
    static const struct {
        specdec_grammar_kind kind;
        const char *spec;
        specdec_status want;
    } bad[] = {
        {SPECDEC_GRAMMAR_REGEX, "(ab", SPECDEC_ERR_INVALID_ARGUMENT},
        {SPECDEC_GRAMMAR_REGEX, "a[b", SPECDEC_ERR_INVALID_ARGUMENT},
        {SPECDEC_GRAMMAR_REGEX, "(a)\\1", SPECDEC_ERR_UNSUPPORTED},
        {SPECDEC_GRAMMAR_JSON_SCHEMA, "{\"type\":", SPECDEC_ERR_INVALID_ARGUMENT},
        {SPECDEC_GRAMMAR_JSON_SCHEMA, "{\"type\":\"object\",\"patternProperties\":{}}", SPECDEC_ERR_UNSUPPORTED},
        {SPECDEC_GRAMMAR_CHOICE, "[]", SPECDEC_ERR_INVALID_ARGUMENT},
        {SPECDEC_GRAMMAR_CHOICE, "[\"a\", 3]", SPECDEC_ERR_INVALID_ARGUMENT},
        {SPECDEC_GRAMMAR_CHOICE, "\"a\"", SPECDEC_ERR_INVALID_ARGUMENT},
        {SPECDEC_GRAMMAR_JSON_OBJECT, "{}", SPECDEC_ERR_INVALID_ARGUMENT},
        {SPECDEC_GRAMMAR_GBNF, "root ::= root \"a\" | \"b\"", SPECDEC_ERR_INVALID_ARGUMENT},
        {SPECDEC_GRAMMAR_GBNF, "root ::= x", SPECDEC_ERR_INVALID_ARGUMENT},
        {SPECDEC_GRAMMAR_GBNF, "root ::= (= \"a\") [a-z]", SPECDEC_ERR_UNSUPPORTED},
        {SPECDEC_GRAMMAR_GBNF, "start: \"a\"", SPECDEC_ERR_INVALID_ARGUMENT},
        {(specdec_grammar_kind)9, "a", SPECDEC_ERR_INVALID_ARGUMENT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        specdec_grammar *g = (specdec_grammar *)&g;
        const specdec_status st = specdec_grammar_compile(e->tok, bad[i].kind, bad[i].spec, strlen(bad[i].spec), &g);
        SD_CHECK(st == bad[i].want && !g && *specdec_last_error(), "part 3: kind %d %s: %s (want %s): %s", (int)bad[i].kind,
                 bad[i].spec, specdec_status_string(st), specdec_status_string(bad[i].want), specdec_last_error());
    }
    specdec_grammar *g = NULL;
    SD_CHECK(specdec_grammar_compile(NULL, SPECDEC_GRAMMAR_REGEX, "a", 1, &g) == SPECDEC_ERR_INVALID_ARGUMENT, "NULL tok");
    SD_CHECK(specdec_grammar_compile(e->tok, SPECDEC_GRAMMAR_REGEX, "a", 1, NULL) == SPECDEC_ERR_INVALID_ARGUMENT,
             "NULL out");
    SD_CHECK(specdec_grammar_compile(e->tok, SPECDEC_GRAMMAR_REGEX, NULL, 1, &g) == SPECDEC_ERR_INVALID_ARGUMENT,
             "NULL spec");
    specdec_grammar_free(NULL);
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
    int ok = 1;
    for (int k = 0; k < N_G; k++) {
        const specdec_status st = compile(&e, k, &g_gram[k]);
        SD_CHECK(st == SPECDEC_OK, "compile %s: %s", G_NAME[k], specdec_last_error());
        ok &= st == SPECDEC_OK;
    }
    if (ok) {
        part1(&e, eh);
        part2(&e);
        part_seeds(&e);
        part_gate(&e, eh);
    }
    part3(&e);
    for (int k = 0; k < N_G; k++) specdec_grammar_free(g_gram[k]);
    specdec_engine_free(eh);
    specdec_model_free(head);
    sc_env_free(&e);
    return sd_test_done();
}
