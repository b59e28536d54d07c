/* test_ngram.c — the n-gram drafter (core/sd_ngram.c) and the drafter API:
 *  - the lookup (sd_ngram_chain): the longest suffix first (ngram_max down to
 *    ngram_min), the most recent earlier occurrence, continuations cut at the sequence's
 *    end and at γ, self-overlapping matches, nothing found -> 0;
 *  - the tree (the drafter's plan on a tree shape): candidates' continuations in rank
 *    order inserted into a trie within the widths and the node budget, laid out
 *    breadth-first with contiguous children, every child deterministic;
 *  - the engine (a second-order Markov target, no draft model): NGRAM chains and trees
 *    in GREEDY and MATCH emit exactly plain decoding's tokens (and a REJECTION tree too:
 *    deterministic children are sampled by the target's own uniform), the statistics
 *    name the drafter, a round with nothing to propose is a plain step (the round
 *    callback says NONE); the trace is consistent (emitted tokens = the output, chain
 *    parents, the accepted path's tokens);
 *  - with a draft model (the Markov pair): NGRAM leaves the draft's cache alone, MODEL
 *    and AUTO are the draft model, NONE is plain decoding; a model tree's trace is a
 *    root-to-node path;
 *  - bad input: ngram_min < 1, ngram_max < ngram_min, ngram_max > 64, NGRAM with
 *    adaptive_draft, EAGLE3, MODEL without a draft model, an unknown draft_method:
 *    INVALID_ARGUMENT with a message naming the field, nothing changed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tree/markov_tree.h"
#include "sd_engine.h"
#include "sd_round.h"
#include "sd_test.h"

#define V 16
static float g_t[V * V * V], g_d[V * V];

/* ---- the lookup ------------------------------------------------------------------ */
static void expect_chain(const char *what, const int32_t *t, int32_t L, int32_t nmin, int32_t nmax, int32_t g,
                         const int32_t *want, int32_t n_want) {
    int32_t out[SPECDEC_MAX_DRAFT];
    const int32_t n = sd_ngram_chain(t, L, nmin, nmax, g, out);
    SD_CHECK(n == n_want && (n == 0 || !memcmp(out, want, (size_t)n * sizeof *out)), "%s: %d tokens (want %d), first %d",
             what, (int)n, (int)n_want, n ? (int)out[0] : -1);
}

static void test_lookup(void) {
    const int32_t a[] = {1, 2, 3, 4, 9, 1, 2, 3, 4, 7, 1, 2, 3, 4};
    const int32_t wa[] = {7, 1, 2};
    expect_chain("most recent of two 4-gram matches", a, 14, 1, 4, 3, wa, 3);
    const int32_t b[] = {1, 2, 3, 4, 5, 9, 3, 4, 6, 2, 3, 4};
    const int32_t wb3[] = {5, 9, 3, 4}, wb2[] = {6, 2, 3};
    expect_chain("the longest suffix before a more recent shorter one", b, 12, 1, 4, 4, wb3, 4);
    expect_chain("ngram_max 2: the more recent 2-gram", b, 12, 1, 2, 3, wb2, 3);
    expect_chain("ngram_min 4: no 4-gram", b, 12, 4, 4, 3, NULL, 0);
    const int32_t c[] = {7, 7, 7, 7};
    const int32_t wc[] = {7};
    expect_chain("self-overlap: the continuation ends at the sequence", c, 4, 1, 4, 8, wc, 1);
    const int32_t d[] = {1, 2, 3, 4, 5};
    expect_chain("no earlier occurrence", d, 5, 1, 4, 8, NULL, 0);
    expect_chain("one token", d, 1, 1, 4, 8, NULL, 0);
    const int32_t e[] = {4, 5, 6, 8, 4, 5, 6};
    const int32_t we[] = {8, 4};
    expect_chain("γ caps the continuation", e, 7, 1, 3, 2, we, 2);
}

/* ---- the tree ---------------------------------------------------------------------- */
static void plan_tree(const int32_t *tokens, int32_t L, const sd_draft_shape *sh, sd_round_slot *x, sd_round_seq *s) {
    memset(s, 0, sizeof *s);
    memset(x, 0, sizeof *x);
    s->tokens = tokens;
    s->length = L;
    s->shape = *sh;
    s->ngram_min = 1;
    s->ngram_max = 4;
    x->s = s;
    x->tree = 1;
    x->budget = (int32_t)sd_draft_shape_nodes(sh);
    sd_errbuf eb;
    SD_CHECK(sd_drafter_ngram()->ops->plan(sd_drafter_ngram(), x, &eb) == SPECDEC_OK, "plan: %s", eb.msg);
}

/* Breadth-first, contiguous children, deterministic, distinct siblings. */
static void check_tree_form(const sd_tree *t, const char *what) {
    for (int32_t i = 1; i < t->n; i++) {
        const int32_t pa = t->parent[i];
        SD_CHECK(pa >= 0 && pa < i && t->depth[i] == t->depth[pa] + 1 && t->depth[i] >= t->depth[i - 1], "%s: node %d",
                 what, (int)i);
        SD_CHECK(i >= t->child0[pa] && i < t->child0[pa] + t->n_child[pa], "%s: node %d outside its parent's children",
                 what, (int)i);
        for (int32_t j = t->child0[pa]; j < i; j++) SD_CHECK(t->token[j] != t->token[i], "%s: twin siblings", what);
    }
    for (int32_t i = 0; i < t->n; i++) SD_CHECK(!t->sampled[i] && t->qrow[i] == -1, "%s: node %d not deterministic", what, (int)i);
}

static void test_tree(void) {
    /* suffix [1 2] follows three earlier occurrences: ... 5 1 2 | 4 1 2 5 | 3 1 2 4 */
    const int32_t t[] = {1, 2, 3, 1, 2, 4, 1, 2, 5, 1, 2};
    sd_draft_shape sh = sd_draft_chain(3);
    sh.width[0] = 3;
    sd_round_slot x;
    sd_round_seq s;
    plan_tree(t, 11, &sh, &x, &s);
    static const int32_t tok9[10] = {2, 5, 4, 3, 1, 1, 1, 2, 2, 2}, par9[10] = {-1, 0, 0, 0, 1, 2, 3, 4, 5, 6};
    SD_CHECK(x.depth == 3 && x.det && x.tr.n == 10, "shape 3,1,1: depth %d, %d nodes", (int)x.depth, (int)x.tr.n);
    for (int32_t i = 0; i < x.tr.n && x.tr.n == 10; i++)
        SD_CHECK(x.tr.token[i] == tok9[i] && x.tr.parent[i] == par9[i], "shape 3,1,1: node %d = %d (parent %d)", (int)i,
                 (int)x.tr.token[i], (int)x.tr.parent[i]);
    check_tree_form(&x.tr, "shape 3,1,1");
    sh.n_nodes = 5; /* the budget stops the second continuation after 2 nodes */
    plan_tree(t, 11, &sh, &x, &s);
    static const int32_t tok5[6] = {2, 5, 4, 1, 1, 2}, par5[6] = {-1, 0, 0, 1, 2, 3};
    SD_CHECK(x.tr.n == 6, "budget 5: %d nodes", (int)x.tr.n);
    for (int32_t i = 0; i < x.tr.n && x.tr.n == 6; i++)
        SD_CHECK(x.tr.token[i] == tok5[i] && x.tr.parent[i] == par5[i], "budget 5: node %d", (int)i);
    check_tree_form(&x.tr, "budget 5");
    const int32_t none[] = {1, 2, 3, 4};
    plan_tree(none, 4, &sh, &x, &s);
    SD_CHECK(x.depth == 0, "no match: depth %d", (int)x.depth);
}

/* ---- engines ---------------------------------------------------------------------- */
static specdec_engine *markov_engine(int with_draft) {
    mk_runner *mt = mkt_runner_new(2, g_t, V, 256, 65, 1);
    mk_runner *md = with_draft ? mkt_runner_new(1, g_d, V, 256, 65, 1) : NULL;
    specdec_engine *e = NULL;
    SD_CHECK(sd_engine_create_from_runners(&mt->base, md ? &md->base : NULL, NULL, &e) == SPECDEC_OK, "engine: %s",
             specdec_last_error());
    return e;
}

/* A prompt that repeats itself (lookups match from the first round) and one that does
 * not (its first round has nothing to propose). */
static const int32_t REP[9] = {3, 5, 7, 9, 3, 5, 7, 9, 3};
static const int32_t ONCE[4] = {1, 2, 4, 8};

static specdec_generate_params gparams(specdec_verify_mode mode, int32_t gamma) {
    specdec_generate_params p = specdec_generate_default_params();
    p.n_predict = 40;
    p.temperature = mode == SPECDEC_VERIFY_GREEDY ? 0.0f : 0.9f;
    p.verify = mode;
    p.seed = 77;
    p.ignore_eos = 1;
    p.n_draft = gamma;
    return p;
}

/* The round callback's record of a generation. */
typedef struct trace {
    int32_t emitted[128], n_emitted, rounds, plain, drafted, bad, first_plain;
    specdec_draft_method method;
} trace;

static void on_round(void *ud, const specdec_round_info *r) {
    trace *t = ud;
    t->bad |= r->round != t->rounds++;
    t->bad |= r->n_emitted < 1 || r->n_emitted > r->n_accepted + 1 || r->n_accepted > r->n_drafted;
    if (r->n_drafted == 0) {
        t->plain++;
        t->first_plain |= r->round == 0;
        t->bad |= r->draft_method != SPECDEC_DRAFT_NONE;
    } else {
        t->method = r->draft_method;
        t->drafted += r->n_drafted;
    }
    int32_t prev = -1;
    for (int32_t j = 0; j < r->n_accepted; j++) { /* a root-to-node path whose tokens were emitted */
        const int32_t nd = r->accepted_nodes[j];
        t->bad |= nd < 0 || nd >= r->n_drafted || r->draft_parents[nd] != prev ||
                  (j < r->n_emitted && r->draft_tokens[nd] != r->emitted[j]);
        prev = nd;
    }
    for (int32_t j = 0; j < r->n_emitted && t->n_emitted < 128; j++) t->emitted[t->n_emitted++] = r->emitted[j];
}

/* Generate with p on e; with a trace when tr is set. Returns the token count or -1. */
static int gen(specdec_engine *e, const int32_t *prompt, int32_t n_prompt, specdec_generate_params p, int32_t *out,
               specdec_stats *st, trace *tr) {
    if (tr) {
        memset(tr, 0, sizeof *tr);
        p.round_callback = on_round;
        p.round_user_data = tr;
    }
    int32_t n = 0;
    specdec_stats local;
    const specdec_status s = specdec_generate(e, prompt, n_prompt, &p, out, 64, &n, st ? st : &local);
    SD_CHECK(s == SPECDEC_OK, "generate: %s", specdec_engine_last_error(e));
    return s == SPECDEC_OK ? n : -1;
}

static int same(const int32_t *a, int na, const int32_t *b, int nb) {
    return na == nb && na > 0 && !memcmp(a, b, (size_t)na * sizeof *a);
}

/* Chains γ 1..8 and two trees == plain decoding; stats and traces. */
static void check_equal_plain(specdec_engine *e, specdec_verify_mode mode, const char *name) {
    int32_t ref[64], out[64];
    specdec_generate_params p = gparams(mode, 0);
    const int nr = gen(e, REP, 9, p, ref, NULL, NULL);
    long drafted = 0, accepted = 0;
    for (int g = 1; g <= 8 + 2; g++) {
        p = gparams(mode, g <= 8 ? g : 4);
        p.draft_method = SPECDEC_DRAFT_NGRAM;
        if (g == 9) { const int32_t w[3] = {3, 2, 1}; specdec_generate_params_set_tree(&p, w, 3); }
        if (g == 10) p.draft_nodes = 10;
        if (mode == SPECDEC_VERIFY_REJECTION && g <= 8) continue; /* chains: a different but exact law */
        specdec_stats st;
        trace tr;
        const int n = gen(e, REP, 9, p, out, &st, &tr);
        SD_CHECK(same(ref, nr, out, n), "%s ngram %s %d: output differs from plain decoding", name,
                 g <= 8 ? "gamma" : "tree", g);
        SD_CHECK(st.draft_method == SPECDEC_DRAFT_NGRAM && st.n_draft_rounds > 0 && tr.method == SPECDEC_DRAFT_NGRAM,
                 "%s ngram %d: stats method %d, %lld draft rounds", name, g, (int)st.draft_method,
                 (long long)st.n_draft_rounds);
        SD_CHECK(!tr.bad && tr.rounds == st.n_rounds && same(tr.emitted, tr.n_emitted, out, n) &&
                     tr.drafted == st.n_drafted && tr.plain == st.n_rounds - st.n_draft_rounds,
                 "%s ngram %d: trace inconsistent (bad %d, rounds %d/%lld)", name, g, tr.bad, tr.rounds,
                 (long long)st.n_rounds);
        drafted += st.n_drafted;
        accepted += st.n_accepted;
    }
    printf("%-10s ngram chains 1..8 and trees == plain decoding; %ld of %ld drafts accepted\n", name, accepted, drafted);
    SD_CHECK(accepted > 0, "%s: nothing accepted", name);
}

static void test_engine_no_draft(void) {
    specdec_engine *e = markov_engine(0);
    if (!e) return;
    check_equal_plain(e, SPECDEC_VERIFY_GREEDY, "greedy");
    check_equal_plain(e, SPECDEC_VERIFY_MATCH, "match");
    check_equal_plain(e, SPECDEC_VERIFY_REJECTION, "rejection");
    /* nothing to propose in the first round: a plain step, no verify pass of drafts */
    int32_t out[64];
    specdec_generate_params p = gparams(SPECDEC_VERIFY_MATCH, 4);
    p.draft_method = SPECDEC_DRAFT_NGRAM;
    p.n_predict = 8;
    specdec_stats st;
    trace tr;
    SD_CHECK(gen(e, ONCE, 4, p, out, &st, &tr) == 8 && tr.first_plain && !tr.bad &&
                 tr.plain == st.n_rounds - st.n_draft_rounds,
             "no match: the first round was not a plain step (%d plain rounds of %d)", tr.plain, tr.rounds);
    /* REJECTION chains: exact in law (tests/engine engine_dist "ngram"), and drafts accepted */
    p = gparams(SPECDEC_VERIFY_REJECTION, 4);
    p.draft_method = SPECDEC_DRAFT_NGRAM;
    SD_CHECK(gen(e, REP, 9, p, out, &st, NULL) == 40 && st.n_drafted > 0 && st.draft_method == SPECDEC_DRAFT_NGRAM,
             "rejection chains: %lld drafted", (long long)st.n_drafted);
    specdec_engine_free(e);
}

/* The Markov pair: every drafter on one engine. */
static void test_engine_with_draft(void) {
    specdec_engine *e = markov_engine(1);
    if (!e) return;
    int32_t ref[64], out[64];
    specdec_stats st;
    specdec_generate_params p = gparams(SPECDEC_VERIFY_MATCH, 0);
    const int nr = gen(e, REP, 9, p, ref, NULL, NULL);
    const int32_t kd = specdec_engine_kv_length(e, SPECDEC_ROLE_DRAFT);
    p = gparams(SPECDEC_VERIFY_MATCH, 4);
    p.draft_method = SPECDEC_DRAFT_NGRAM;
    SD_CHECK(same(ref, nr, out, gen(e, REP, 9, p, out, &st, NULL)) && st.draft_method == SPECDEC_DRAFT_NGRAM &&
                 specdec_engine_kv_length(e, SPECDEC_ROLE_DRAFT) == 0 && kd == 0,
             "NGRAM on an engine with a draft model: method %d, draft kv %d", (int)st.draft_method,
             (int)specdec_engine_kv_length(e, SPECDEC_ROLE_DRAFT));
    const specdec_draft_method ms[3] = {SPECDEC_DRAFT_AUTO, SPECDEC_DRAFT_MODEL, SPECDEC_DRAFT_NONE};
    for (int i = 0; i < 3; i++) {
        p.draft_method = ms[i];
        const int n = gen(e, REP, 9, p, out, &st, NULL);
        const specdec_draft_method want = ms[i] == SPECDEC_DRAFT_NONE ? SPECDEC_DRAFT_NONE : SPECDEC_DRAFT_MODEL;
        SD_CHECK(same(ref, nr, out, n) && st.draft_method == want && (want == SPECDEC_DRAFT_NONE) == (st.n_drafted == 0),
                 "draft_method %d: stats method %d, %lld drafted", (int)ms[i], (int)st.draft_method,
                 (long long)st.n_drafted);
    }
    /* a model tree's trace: root-to-node paths (checked in on_round) */
    trace tr;
    p.draft_method = SPECDEC_DRAFT_MODEL;
    const int32_t w[3] = {3, 2, 1};
    specdec_generate_params_set_tree(&p, w, 3);
    const int n = gen(e, REP, 9, p, out, &st, &tr);
    SD_CHECK(same(ref, nr, out, n) && !tr.bad && tr.method == SPECDEC_DRAFT_MODEL && same(tr.emitted, tr.n_emitted, out, n),
             "model tree trace (bad %d)", tr.bad);
    specdec_engine_free(e);
}

/* ---- bad input ----------------------------------------------------------------------- */
static void test_bad_input(void) {
    specdec_engine *e = markov_engine(0);
    if (!e) return;
    struct {
        specdec_draft_method m;
        int32_t nmin, nmax, adaptive;
        const char *field;
    } bad[] = {{SPECDEC_DRAFT_NGRAM, 0, 4, 0, "ngram_min"},
               {SPECDEC_DRAFT_NGRAM, -3, 4, 0, "ngram_min"},
               {SPECDEC_DRAFT_NGRAM, 3, 2, 0, "ngram_max"},
               {SPECDEC_DRAFT_NGRAM, 1, SD_NGRAM_MAX + 1, 0, "ngram_max"},
               {SPECDEC_DRAFT_NGRAM, 1, 4, 1, "adaptive_draft"},
               {SPECDEC_DRAFT_EAGLE3, 1, 4, 0, "EAGLE3"},
               {SPECDEC_DRAFT_MODEL, 1, 4, 0, "draft_method MODEL"},
               {(specdec_draft_method)17, 1, 4, 0, "draft_method"},
               {(specdec_draft_method)-1, 1, 4, 0, "draft_method"}};
    int32_t out[64], n = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        specdec_generate_params p = gparams(SPECDEC_VERIFY_MATCH, 4);
        p.draft_method = bad[i].m;
        p.ngram_min = bad[i].nmin;
        p.ngram_max = bad[i].nmax;
        p.adaptive_draft = bad[i].adaptive;
        n = -1;
        const specdec_status st = specdec_generate(e, REP, 9, &p, out, 64, &n, NULL);
        SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT && n == 0 && strstr(specdec_engine_last_error(e), bad[i].field) &&
                     specdec_engine_kv_length(e, SPECDEC_ROLE_TARGET) == 0,
                 "bad %zu: status %d, '%s' (want '%s')", i, (int)st, specdec_engine_last_error(e), bad[i].field);
    }
    /* the limits are not checked when the n-gram drafter is not asked for */
    specdec_generate_params p = gparams(SPECDEC_VERIFY_MATCH, 4);
    p.ngram_min = 0;
    p.ngram_max = 0;
    SD_CHECK(specdec_generate(e, REP, 9, &p, out, 64, &n, NULL) == SPECDEC_OK, "AUTO with zero n-gram limits: %s",
             specdec_engine_last_error(e));
    p = gparams(SPECDEC_VERIFY_MATCH, 4);
    p.draft_method = SPECDEC_DRAFT_NGRAM;
    p.ngram_min = p.ngram_max = SD_NGRAM_MAX;
    SD_CHECK(specdec_generate(e, REP, 9, &p, out, 64, &n, NULL) == SPECDEC_OK, "ngram 64..64: %s",
             specdec_engine_last_error(e));
    specdec_engine_free(e);
}

int main(void) {
    mk_fill_table(g_t, V * V, V, 2.0, 0.1, 5);
    mk_fill_table(g_d, V, V, 2.0, 0.1, 6);
    test_lookup();
    test_tree();
    test_engine_no_draft();
    test_engine_with_draft();
    test_bad_input();
    return sd_test_done();
}
