/* test_grammar_dist.c — structured output (specdec_generate_params.grammar, core/sd_grammar.h)
 * keeps speculative decoding exact.
 *
 * The grammar: a hand-written byte automaton over {a, b, c} (no "c" right after an "a", at most
 * three "b"; accepting once a "b" was seen) and the vocabulary "a", "b", "ab", "ba", "c", "bc",
 * "x" (never allowed), and token 7 with no text, the request's stop_token_ids: allowed only where
 * the output so far is accepting. Multi-byte tokens make the mask depend on the whole state, and
 * the stop token on acceptance.
 *
 * Part 1, masks: for every state and token, sd_grammar_apply against the automaton walked by hand;
 * sd_grammar_next likewise; a state allowing no text token lets the end tokens through (only_end).
 *
 * Part 2, the full loop: the Markov models of test_engine_dist.c (a second-order target, a
 * first-order draft, V = 8), prompt [3, 5], 6 tokens per sample (after the stop token the sample
 * is padded with 7), sequence_id = sample index, fixed seed.
 * Hypothesis H0: the joint law of tokens (1,2,3) and, separately, of tokens (4,5,6) equals the
 * exact law of plain decoding under the grammar, computed in double by enumerating every history
 * (the mask by walking the automaton by hand, the processors by logits_proc_ref.h, then
 * sd_sampling_process). G-test over the 512 cells (cells with expected count < 5 pooled), reject
 * at α = 1e-6 per window; a token of exact probability 0 (one the grammar forbids) fails at once.
 * Sample count: argv[1] per case (CTest: 100 000 in Release, 20 000 under the sanitizers). Cases:
 * rejection with a draft model (γ = 2, and γ = 4 with top-k/top-p and penalties), match, the
 * n-gram drafter (its drafts are not masked: refused drafts must be rejected) and plain decoding;
 * greedy (γ = 4) must equal the argmax path. The same language written in GBNF (AB_GBNF,
 * core/sd_gbnf.h) gives the same masks and transitions along every history of up to 6 tokens and
 * passes a rejection case (γ = 3) against the same law. Jump-forward (core/sd_round.c
 * round_grammar_forced): a second language, FORCED_GBNF ("c" then "a" or "b", three times), forces
 * every "c" (the only token its state allows); plain decoding (T 1, REJECTION) and the n-gram
 * drafter propose those tokens as drafts, and their law is checked against the exact law computed
 * with that grammar's masks (sd_grammar_apply along each history: H0 is the loop's exactness,
 * the masks being the implementation's); the case also checks that tokens were forced and all of
 * them accepted. Gated grammars (grammar_after_tokens, since 0.5.4): the gate's walk
 * (sd_grammar_step, sd_grammar_state_at with the marker split anywhere between the generated
 * tokens and a path) against a naive suffix check over every sequence of up to 7 tokens from
 * {b, ab, x}, self-overlapping markers included; then the loop with marker {x} (draft model,
 * rejection γ = 4) and {x, b} (n-gram γ = 3, match γ = 3 with a penalty, plain) against the exact
 * law in which rows are unmasked until the generated tokens end with the marker and masked from
 * the grammar's start after it (H0, test and α as above; at least 2% of the samples on each side
 * of the marker, so chains of drafts cross it). Built with SD_GRAMMAR_MUTANT (grammar_mutant.c
 * linked: each row masked with the state of the round's start, the drafts before it left out)
 * the test runs a rejection case and must REJECT it (by the law, or by the loop's check that every
 * committed token obeys the grammar, which fails such generations with SPECDEC_ERR_INTERNAL). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../verify/vstats.h"
#include "logits_proc_ref.h"
#include "markov.h"
#include "sd_alloc.h"
#include "sd_cpu_sample.h"
#include "sd_engine.h"
#include "sd_gbnf.h"
#include "sd_grammar.h"
#include "sd_test.h"
#include "sd_test_util.h"

#define V 8
#define NP 6
#define STOP 7
static const char *const TOK[V] = {"a", "b", "ab", "ba", "c", "bc", "x", NULL};

/* ---- the automaton: state = last_was_a * 4 + number of b (0..3) ---- */
static int32_t ab_step(int32_t s, uint8_t c) {
    const int32_t a = s / 4, nb = s % 4;
    if (s < 0) return s;
    if (c == 'a') return 4 + nb;
    if (c == 'b') return nb < 3 ? nb + 1 : SD_FSM_DEAD;
    if (c == 'c') return a ? SD_FSM_DEAD : nb;
    return SD_FSM_DEAD;
}
static int ab_accepting(int32_t s) { return s % 4 >= 1; }

static int32_t fsm_step(sd_fsm *f, int32_t s, uint8_t b) { return (void)f, ab_step(s, b); }
static int fsm_accepting(const sd_fsm *f, int32_t s) { return (void)f, ab_accepting(s); }
static int32_t fsm_n_states(const sd_fsm *f) { return (void)f, 8; }
static void fsm_destroy(sd_fsm *f) { sd_free(f); }
static const sd_fsm_vtable AB_VT = {fsm_step, fsm_accepting, fsm_n_states, fsm_destroy};

/* The same language in GBNF (core/sd_gbnf.h): the b's split the text into runs with no "c"
 * after an "a", i.e. c*a*; one to three b's. */
static const char AB_GBNF[] = "root ::= p (\"b\" p){1,3}\np ::= \"c\"* \"a\"*\n";

/* Jump-forward's language: every "c" is the only token its state allows. */
static const char FORCED_GBNF[] = "root ::= (\"c\" (\"a\" | \"b\")){3}\n";

/* The vocabulary above with the hand automaton (gbnf = 0), the GBNF one (1) or FORCED_GBNF (2). */
static specdec_grammar *make_grammar_of(int gbnf) {
    uint32_t *off = sd_malloc((V + 1) * sizeof *off);
    uint8_t *bytes = sd_malloc(32), *text = sd_malloc(V);
    uint32_t n = 0;
    for (int t = 0; t < V; t++) {
        off[t] = n;
        text[t] = TOK[t] != NULL;
        for (const char *c = TOK[t] ? TOK[t] : ""; *c; c++) bytes[n++] = (uint8_t)*c;
    }
    off[V] = n;
    sd_grammar_vocab *v = NULL;
    specdec_grammar *g = NULL;
    SD_CHECK(sd_grammar_vocab_create(V, off, bytes, text, &v, NULL) == SPECDEC_OK, "vocab: %s", specdec_last_error());
    sd_fsm *f = NULL;
    if (gbnf) {
        const char *src = gbnf == 2 ? FORCED_GBNF : AB_GBNF;
        SD_CHECK(sd_gbnf_fsm_create(src, strlen(src), 1000, &f, NULL) == SPECDEC_OK, "gbnf: %s", specdec_last_error());
    } else {
        f = sd_malloc(sizeof *f);
        f->vt = &AB_VT;
        f->start = 0;
    }
    if (f) SD_CHECK(sd_grammar_create(v, f, &g, NULL) == SPECDEC_OK, "grammar: %s", specdec_last_error());
    sd_grammar_vocab_release(v);
    return g;
}
static specdec_grammar *make_grammar(void) { return make_grammar_of(0); }

/* By hand: the state after token t from s. */
static int32_t walk(int32_t s, int32_t t) {
    if (!TOK[t]) return SD_FSM_DEAD;
    for (const char *c = TOK[t]; *c && s >= 0; c++) s = ab_step(s, (uint8_t)*c);
    return s;
}

static void part1_masks(const specdec_grammar *g) {
    const int32_t ends[1] = {STOP};
    long bad = 0;
    for (int32_t s = 0; s < 8; s++) {
        float row[V + 2];
        for (int32_t t = 0; t < V + 2; t++) row[t] = (float)t;
        int only_end = -1;
        SD_CHECK(sd_grammar_apply(g, s, row, V + 2, ends, 1, &only_end, NULL) == SPECDEC_OK, "apply: %s",
                 specdec_last_error());
        for (int32_t t = 0; t < V + 2; t++) {
            const int allowed = t < STOP ? walk(s, t) >= 0 : t == STOP ? ab_accepting(s) : 0;
            bad += allowed ? row[t] != (float)t : row[t] != -INFINITY;
            if (t < V) bad += sd_grammar_next(g, s, t) != walk(s, t);
        }
        bad += only_end != 0;
    }
    SD_CHECK(bad == 0, "part 1: %ld mask or transition entries differ from the automaton walked by hand", bad);
    /* a state whose every continuation no token spells: the end tokens are let through */
    uint32_t *off = sd_malloc(3 * sizeof *off);
    uint8_t *bytes = sd_malloc(2), *text = sd_malloc(2);
    off[0] = 0, off[1] = 1, off[2] = 1, bytes[0] = 'x', text[0] = 1, text[1] = 0;
    sd_grammar_vocab *v = NULL;
    specdec_grammar *g2 = NULL;
    SD_CHECK(sd_grammar_vocab_create(2, off, bytes, text, &v, NULL) == SPECDEC_OK, "vocab 2");
    sd_fsm *f = sd_malloc(sizeof *f);
    f->vt = &AB_VT;
    f->start = 4; /* after "a", no b: not accepting, and "x" never continues */
    SD_CHECK(sd_grammar_create(v, f, &g2, NULL) == SPECDEC_OK, "grammar 2");
    float row[2] = {0.5f, 0.25f};
    int only_end = 0;
    const int32_t end2[1] = {1};
    SD_CHECK(sd_grammar_apply(g2, 4, row, 2, end2, 1, &only_end, NULL) == SPECDEC_OK, "apply 2");
    SD_CHECK(only_end == 1 && row[0] == -INFINITY && row[1] == 0.25f,
             "part 1: a state no token can continue must let only the end token through (got %d %g %g)", only_end,
             (double)row[0], (double)row[1]);
    sd_grammar_release(g2);
    sd_grammar_vocab_release(v);
}

/* ---- part 2 ---- */
static float g_target[V * V * V], g_draft[V * V];
static const int32_t PROMPT[2] = {3, 5};
static const int32_t STOP_IDS[1] = {STOP};

typedef struct dcase {
    const char *name;
    int draft; /* 1: the draft model; 2: the n-gram drafter; 0: plain */
    specdec_verify_mode mode;
    int32_t gamma;
    float temp;
    int32_t top_k;
    float top_p;
    float presence, frequency;
} dcase;

/* The GBNF grammar's masks and transitions equal the hand automaton's along every token
 * history of up to 6 tokens (its state ids differ: the two are walked side by side). */
static void part1_gbnf(const specdec_grammar *g, int32_t s_hand, int32_t s_g, int depth, long *bad) {
    const int32_t ends[1] = {STOP};
    float row[V];
    for (int32_t t = 0; t < V; t++) row[t] = (float)t;
    int only_end = -1;
    SD_CHECK(sd_grammar_apply(g, s_g, row, V, ends, 1, &only_end, NULL) == SPECDEC_OK, "gbnf apply: %s",
             specdec_last_error());
    for (int32_t t = 0; t < V; t++) {
        const int allowed = t < STOP ? walk(s_hand, t) >= 0 : ab_accepting(s_hand);
        *bad += allowed ? row[t] != (float)t : row[t] != -INFINITY;
    }
    for (int32_t t = 0; depth < 6 && t < STOP; t++) {
        const int32_t h2 = walk(s_hand, t), g2 = sd_grammar_next(g, s_g, t);
        *bad += (h2 >= 0) != (g2 >= 0);
        if (h2 >= 0 && g2 >= 0) part1_gbnf(g, h2, g2, depth + 1, bad);
    }
}

/* The gate (specdec_generate_params.grammar_after_tokens) of the gated cases; n 0: none. */
static const int32_t *g_gate;
static int32_t g_n_gate;
#define HAND_GATED (-100) /* hist_state: the marker has not appeared, nothing is masked */

/* The grammar's state after the generated tokens hist[2..n) (the stop token keeps it); with a
 * gate, HAND_GATED until the generated tokens end with the marker (checked naively, at every
 * position), then the automaton from its start. */
static int32_t hist_state(const int32_t *hist, int32_t n) {
    int32_t s = g_n_gate ? HAND_GATED : 0;
    for (int32_t j = 2; j < n && s != SD_FSM_DEAD; j++) {
        if (hist[j] == STOP) continue;
        if (s != HAND_GATED) {
            s = walk(s, hist[j]);
            continue;
        }
        if (j + 1 - 2 >= g_n_gate && !memcmp(hist + j + 1 - g_n_gate, g_gate, (size_t)g_n_gate * sizeof(int32_t)))
            s = 0;
    }
    return s;
}

/* NULL: the law masks with the hand automaton; else with this grammar's own masks. */
static const specdec_grammar *g_law_grammar;

/* The law of the token after hist[0..n) (double, normalised); after the stop token: 7 again. */
static void exact_row(const dcase *c, const sd_sampling_params *sp, const int32_t *hist, int32_t n, double *out) {
    memset(out, 0, V * sizeof *out);
    if (n > 2 && hist[n - 1] == STOP) {
        out[STOP] = 1.0;
        return;
    }
    float row[V], probs[V];
    static char scratch[1 << 12];
    memcpy(row, g_target + (size_t)(hist[n - 2] * V + hist[n - 1]) * V, sizeof row);
    if (g_law_grammar) {
        int32_t s = sd_grammar_start(g_law_grammar);
        for (int32_t j = 2; j < n && s >= 0; j++)
            if (hist[j] != STOP) s = sd_grammar_next(g_law_grammar, s, hist[j]);
        int only_end = 0;
        SD_CHECK(s >= 0 && sd_grammar_apply(g_law_grammar, s, row, V, STOP_IDS, 1, &only_end, NULL) == SPECDEC_OK,
                 "law mask");
    } else {
        const int32_t s = hist_state(hist, n);
        for (int32_t t = 0; t < V && s != HAND_GATED; t++)
            if (t == STOP ? !ab_accepting(s) : walk(s, t) < 0) row[t] = -INFINITY;
    }
    sd_logits_proc lp;
    memset(&lp, 0, sizeof lp);
    lp.presence = c->presence;
    lp.frequency = c->frequency;
    lp.repetition = 1.0f;
    lp.n_prompt = 2;
    ref_proc(&lp, row, V, hist, n);
    SD_CHECK(sd_sampling_process(row, V, sp, scratch, sizeof scratch, probs, NULL) == SPECDEC_OK, "process: %s",
             specdec_last_error());
    double sum = 0;
    for (int t = 0; t < V; t++) sum += probs[t];
    for (int t = 0; t < V; t++) out[t] = probs[t] / sum;
}

/* pa: law of tokens 1-3; pb: of tokens 4-6 (enumerating every history, depth-first). */
static void exact_enum(const dcase *c, const sd_sampling_params *sp, int32_t *h, int32_t n, double p, double *pa,
                       double *pb) {
    if (n == 2 + NP) {
        pb[(h[5] * V + h[6]) * V + h[7]] += p;
        return;
    }
    if (n == 5) pa[(h[2] * V + h[3]) * V + h[4]] += p;
    double r[V];
    exact_row(c, sp, h, n, r);
    for (h[n] = 0; h[n] < V; h[n]++)
        if (r[h[n]] > 0) exact_enum(c, sp, h, n + 1, p * r[h[n]], pa, pb);
}

/* The gate's walk (sd_grammar_step, sd_grammar_state_at) against the naive check of hist_state
 * over every token sequence of up to 7 tokens from {1, 2, 6} (all splits gen / path), markers
 * that overlap themselves ({1, 1, 6}: "1 1 1 6" must activate) and one of a single token. */
static void part1_gate(const specdec_grammar *g) {
    static const int32_t G1[3] = {1, 1, 6}, G2[1] = {6}, G3[4] = {1, 2, 1, 6}, ALPHA[3] = {1, 2, 6};
    const int32_t *gates[3] = {G1, G2, G3}, ng[3] = {3, 1, 4}, ends[1] = {STOP};
    long bad = 0, n_open = 0;
    for (int gi = 0; gi < 3; gi++) {
        g_gate = gates[gi], g_n_gate = ng[gi];
        const sd_grammar_gate gate = {gates[gi], ng[gi]};
        for (int32_t len = 1; len <= 7; len++) {
            long n_seq = 1;
            for (int32_t i = 0; i < len; i++) n_seq *= 3;
            for (long code = 0; code < n_seq; code++) {
                int32_t h[2 + 7] = {PROMPT[0], PROMPT[1]};
                long c = code;
                for (int32_t i = 0; i < len; i++, c /= 3) h[2 + i] = ALPHA[c % 3];
                const int32_t want = hist_state(h, 2 + len);
                int32_t s = sd_grammar_initial(g, &gate);
                for (int32_t i = 0; i < len; i++) s = sd_grammar_step(g, s, h[2 + i], ends, 1, &gate);
                const int32_t got = sd_grammar_gated(s) ? HAND_GATED : s;
                bad += got != (want < 0 && want != HAND_GATED ? SD_FSM_DEAD : want);
                n_open += want != HAND_GATED;
                for (int32_t k = 0; k <= len; k++) { /* the marker split across generated tokens and a path */
                    sd_grammar_cursor cur = {0, -1};
                    int32_t s2 = -7;
                    bad += sd_grammar_state_at(g, &cur, h + 2, k, h + 2 + k, len - k, ends, 1, &gate, &s2, NULL) !=
                               SPECDEC_OK && want != SD_FSM_DEAD;
                    if (want != SD_FSM_DEAD) bad += (sd_grammar_gated(s2) ? HAND_GATED : s2) != want;
                }
            }
        }
    }
    g_gate = NULL, g_n_gate = 0;
    SD_CHECK(bad == 0 && n_open > 0, "part 1: %ld gated states differ from the naive marker check (%ld open)", bad,
             n_open);
    /* a gated state masks and forces nothing */
    float row[V];
    for (int32_t t = 0; t < V; t++) row[t] = (float)t;
    int only_end = -1;
    int32_t tok = 0;
    SD_CHECK(sd_grammar_apply(g, SD_GRAMMAR_GATED, row, V, ends, 1, &only_end, NULL) == SPECDEC_OK && only_end == 0 &&
                 row[6] == 6.0f && row[STOP] == (float)STOP &&
                 sd_grammar_forced(g, SD_GRAMMAR_GATED + 1, V, ends, 1, &tok, NULL) == SPECDEC_OK && tok == -1,
             "part 1: a gated state changed the row or forced token %d", (int)tok);
}

static specdec_generate_params case_params(const dcase *c, const specdec_grammar *g) {
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = NP;
    gp.temperature = c->temp;
    gp.top_k = c->top_k;
    gp.top_p = c->top_p;
    gp.min_p = 0.0f;
    gp.verify = c->mode;
    gp.n_draft = c->gamma;
    gp.seed = 0x6a11a5ull + (uint64_t)c->gamma;
    gp.stop_token_ids = STOP_IDS;
    gp.n_stop_token_ids = 1;
    gp.presence_penalty = c->presence;
    gp.frequency_penalty = c->frequency;
    gp.grammar = g;
    gp.grammar_after_tokens = g_gate;
    gp.n_grammar_after_tokens = g_n_gate;
    if (c->draft == 2) {
        gp.draft_method = SPECDEC_DRAFT_NGRAM;
        gp.ngram_min = 1;
        gp.ngram_max = 2;
        gp.ngram_cost = SPECDEC_NGRAM_COST_OFF;
    }
    if (c->draft == 0) gp.draft_method = SPECDEC_DRAFT_NONE;
    return gp;
}

/* The tables' share of -inf logits; 0 for FORCED_GBNF, whose forced tokens must be possible in
 * every context (else plain decoding itself meets rows the grammar leaves empty). */
static double g_p_ninf = 0.1;

static specdec_engine *make_engine(const dcase *c, mk_runner **mt, mk_runner **md) {
    mk_fill_table(g_target, V * V, V, 1.2, g_p_ninf, 101);
    mk_fill_table(g_draft, V, V, 1.2, 0.1, 202);
    *mt = mk_runner_new(2, g_target, V, 64, 64);
    *md = c->draft == 1 ? mk_runner_new(1, g_draft, V, 64, 64) : NULL;
    specdec_engine *e = NULL;
    SD_CHECK(sd_engine_create_from_runners(&(*mt)->base, *md ? &(*md)->base : NULL, NULL, &e) == SPECDEC_OK,
             "%s: create: %s", c->name, specdec_last_error());
    return e;
}

static void run_case(const dcase *c, const specdec_grammar *g, long N) {
    mk_runner *mt, *md;
    specdec_engine *e = make_engine(c, &mt, &md);
    if (!e) return;
    specdec_generate_params gp = case_params(c, g);
    const sd_sampling_params sp = sd_sampling_params_from(&gp);
    static double pa[V * V * V], pb[V * V * V];
    static long ca[V * V * V], cb[V * V * V];
    int32_t h[2 + NP] = {PROMPT[0], PROMPT[1]};
    memset(pa, 0, sizeof pa);
    memset(pb, 0, sizeof pb);
    exact_enum(c, &sp, h, 2, 1.0, pa, pb);
    memset(ca, 0, sizeof ca);
    memset(cb, 0, sizeof cb);
    long drafted = 0, accepted = 0, bad = 0, forced = 0, n_gated_open = 0;
    for (long i = 0; i < N; i++) {
        int32_t out[NP], n = 0;
        specdec_stats stats;
        gp.sequence_id = (uint64_t)i;
        const specdec_status st = specdec_generate(e, PROMPT, 2, &gp, out, NP, &n, &stats);
        const int stopped = n >= 1 && out[n - 1] == STOP;
        if (st != SPECDEC_OK || (n != NP && !stopped)) {
            if (bad++ < 3)
                fprintf(stderr, "%s: sample %ld: status %d n %d: %s\n", c->name, i, (int)st, (int)n,
                        specdec_engine_last_error(e));
            continue;
        }
        for (int32_t j = n; j < NP; j++) out[j] = STOP;
        if (g_n_gate) { /* samples whose output holds the marker (then masked after it) */
            int32_t hh[2 + NP] = {PROMPT[0], PROMPT[1]};
            memcpy(hh + 2, out, sizeof out);
            n_gated_open += hist_state(hh, 2 + NP) != HAND_GATED;
        }
        ca[(out[0] * V + out[1]) * V + out[2]]++;
        cb[(out[3] * V + out[4]) * V + out[5]]++;
        drafted += stats.n_drafted;
        accepted += stats.n_accepted;
        forced += stats.n_forced;
    }
#ifndef SD_GRAMMAR_MUTANT
    SD_CHECK(bad == 0, "%s: %ld failed generate calls", c->name, bad);
#endif
    SD_CHECK(mt->violations == 0 && (!md || md->violations == 0), "%s: runner contract violations", c->name);
    if (c->draft) SD_CHECK(drafted > 0 && accepted > 0, "%s: drafted %ld, accepted %ld", c->name, drafted, accepted);
    if (g_n_gate) { /* both sides of the marker were sampled */
        printf("%s: %ld of %ld samples reached the marker\n", c->name, n_gated_open, N - bad);
        SD_CHECK(n_gated_open > N / 50 && n_gated_open < N - N / 50, "%s: %ld of %ld samples reached the marker",
                 c->name, n_gated_open, N - bad);
    }
    if (g_law_grammar) /* jump-forward ran, and a forced token is never rejected */
        SD_CHECK(forced > 0 && (c->draft || (drafted == forced && accepted == forced)),
                 "%s: forced %ld, drafted %ld, accepted %ld", c->name, forced, drafted, accepted);
    int df;
    double G;
    const double pva = g_test_pvalue(ca, pa, V * V * V, N - bad, &df, &G);
    printf("%-34s N=%ld  tokens 1-3: G=%.1f df=%d p=%.3g", c->name, N, G, df, pva);
    const double pvb = g_test_pvalue(cb, pb, V * V * V, N - bad, &df, &G);
    printf("  tokens 4-6: G=%.1f df=%d p=%.3g  acc=%.3f\n", G, df, pvb,
           drafted ? (double)accepted / (double)drafted : 0.0);
#ifdef SD_GRAMMAR_MUTANT
    /* detected by the law, or by the loop's own check of every committed token */
    SD_CHECK(bad > 0 || pva <= 1e-6 || pvb <= 1e-6,
             "%s: rows masked without their drafts were NOT detected (p=%.3g, %.3g)", c->name, pva, pvb);
    printf("mutant detected: %ld generations failed the committed-token check (INTERNAL)\n", bad);
#else
    SD_CHECK(pva > 1e-6, "%s: tokens 1-3 deviate from the law of plain decoding: p=%.3g", c->name, pva);
    SD_CHECK(pvb > 1e-6, "%s: tokens 4-6 deviate from the law of plain decoding: p=%.3g", c->name, pvb);
#endif
    specdec_engine_free(e);
}

/* Greedy with γ = 4 equals the argmax path of the masked target. */
static void greedy_case(const specdec_grammar *g) {
    const dcase c = {"greedy g=4", 1, SPECDEC_VERIFY_GREEDY, 4, 0.0f, 0, 1.0f, 0.0f, 0.0f};
    mk_runner *mt, *md;
    specdec_engine *e = make_engine(&c, &mt, &md);
    if (!e) return;
    specdec_generate_params gp = case_params(&c, g);
    const sd_sampling_params sp = sd_sampling_params_from(&gp);
    int32_t h[2 + NP] = {PROMPT[0], PROMPT[1]}, n_want = 0;
    for (int32_t k = 2; k < 2 + NP; k++) {
        double r[V];
        exact_row(&c, &sp, h, k, r);
        int32_t best = 0;
        for (int32_t t = 1; t < V; t++) best = r[t] > r[best] ? t : best;
        h[k] = best;
        n_want = k - 1;
        if (best == STOP) break;
    }
    int32_t out[NP], n = 0;
    specdec_stats stats;
    SD_CHECK(specdec_generate(e, PROMPT, 2, &gp, out, NP, &n, &stats) == SPECDEC_OK, "greedy: %s",
             specdec_engine_last_error(e));
    SD_CHECK(n == n_want && !memcmp(out, h + 2, (size_t)n * sizeof(int32_t)),
             "greedy: the output differs from the argmax path of the masked target (n %d, want %d)", (int)n,
             (int)n_want);
    printf("greedy g=4: %d tokens equal the argmax path, accepted %d of %d drafted\n", (int)n,
           (int)stats.n_accepted, (int)stats.n_drafted);
    specdec_engine_free(e);
}

int main(int argc, char **argv) {
    const long N = argc > 1 ? atol(argv[1]) : 100000;
    specdec_grammar *g = make_grammar();
    if (!g) return sd_test_done();
#ifdef SD_GRAMMAR_MUTANT
    const dcase mutant = {"MUTANT drafts left out g=4 T=1", 1, SPECDEC_VERIFY_REJECTION, 4, 1.0f, 0, 1.0f, 0.0f, 0.0f};
    run_case(&mutant, g, N);
    (void)part1_masks, (void)greedy_case, (void)part1_gbnf, (void)make_grammar_of, (void)part1_gate;
#else
    part1_masks(g);
    const dcase cases[] = {
        /* name                              draft mode                       γ  temp  k  top_p pres  freq */
        {"rejection g=2 T=1",                 1, SPECDEC_VERIFY_REJECTION, 2, 1.0f, 0, 1.0f, 0.0f, 0.0f},
        {"rejection g=4 T=.7 k5 p.9 pen",     1, SPECDEC_VERIFY_REJECTION, 4, 0.7f, 5, 0.9f, 0.6f, 0.4f},
        {"match g=3 T=1",                     1, SPECDEC_VERIFY_MATCH, 3, 1.0f, 0, 1.0f, 0.0f, 0.0f},
        {"ngram rejection g=3 T=1",           2, SPECDEC_VERIFY_REJECTION, 3, 1.0f, 0, 1.0f, 0.0f, 0.0f},
        {"plain T=1",                         0, SPECDEC_VERIFY_AUTO, 0, 1.0f, 0, 1.0f, 0.0f, 0.0f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], g, N);
    greedy_case(g);
    /* grammar_after_tokens (since 0.5.4): the grammar acts only after the marker, which a chain
     * of drafts may hold anywhere; "x" (6), which the grammar never allows, is a marker token */
    part1_gate(g);
    static const int32_t GATE1[1] = {6}, GATE2[2] = {6, 1};
    const dcase gated[] = {{"gated {x}: rejection g=4 T=1", 1, SPECDEC_VERIFY_REJECTION, 4, 1.0f, 0, 1.0f, 0.0f, 0.0f},
                           {"gated {x,b}: ngram rejection g=3", 2, SPECDEC_VERIFY_REJECTION, 3, 1.0f, 0, 1.0f, 0.0f, 0.0f},
                           {"gated {x,b}: match g=3 T=.8 pen", 1, SPECDEC_VERIFY_MATCH, 3, 0.8f, 0, 1.0f, 0.5f, 0.0f},
                           {"gated {x,b}: plain T=1", 0, SPECDEC_VERIFY_AUTO, 0, 1.0f, 0, 1.0f, 0.0f, 0.0f}};
    for (size_t i = 0; i < sizeof gated / sizeof gated[0]; i++) {
        g_gate = i == 0 ? GATE1 : GATE2, g_n_gate = i == 0 ? 1 : 2;
        run_case(&gated[i], g, N);
    }
    g_gate = NULL, g_n_gate = 0;
    /* the same language as a GBNF grammar (core/sd_gbnf.h): equal masks, and the loop exact */
    specdec_grammar *gg = make_grammar_of(1);
    if (gg) {
        long bad = 0;
        part1_gbnf(gg, 0, sd_grammar_start(gg), 0, &bad);
        SD_CHECK(bad == 0, "gbnf: %ld mask or transition entries differ from the automaton walked by hand", bad);
        const dcase gc = {"gbnf rejection g=3 T=1", 1, SPECDEC_VERIFY_REJECTION, 3, 1.0f, 0, 1.0f, 0.0f, 0.0f};
        run_case(&gc, gg, N);
        sd_grammar_release(gg);
    }
    /* jump-forward: every "c" of FORCED_GBNF is forced; the law with that grammar's masks */
    specdec_grammar *gf = make_grammar_of(2);
    if (gf) {
        g_law_grammar = gf;
        g_p_ninf = 0.0;
        const dcase fc[] = {{"forced: plain rejection T=1", 0, SPECDEC_VERIFY_REJECTION, 0, 1.0f, 0, 1.0f, 0.0f, 0.0f},
                            {"forced: ngram rejection g=3 T=.8", 2, SPECDEC_VERIFY_REJECTION, 3, 0.8f, 0, 1.0f, 0.0f,
                             0.0f}};
        for (size_t i = 0; i < sizeof fc / sizeof fc[0]; i++) run_case(&fc[i], gf, N);
        g_law_grammar = NULL;
        sd_grammar_release(gf);
    }
#endif
    sd_grammar_release(g);
    return sd_test_done();
}
