/* test_logits_proc_dist.c — logits processors (logit_bias, min_tokens, repetition / frequency /
 * presence penalties, allowed_token_ids, bad words; core/sd_logits_proc.h) keep speculative
 * decoding exact.
 *
 * Part 0, the masks on hand-made rows: allowed_token_ids keeps exactly its ids; bad words of
 * 1, 2 and 3 ids ban their last id exactly when the generated tokens end with the rest (at the
 * end of the history only, across the history / draft path boundary, never from the prompt).
 *
 * Part 1, the row kernel: sd_cpu_logits_proc against the brute-force reference of
 * logits_proc_ref.h (for every token id, count its occurrences in the prompt and in the
 * generated part of the history by scanning; then the formula of
 * kernels/cpu/sd_cpu_logits_proc.h), on 3 000 random rows,
 * histories, drafts and processor settings: bitwise equal, and the counts scratch is all zero
 * again after every call.
 *
 * Part 2, the full loop: the Markov models of test_engine_dist.c (a second-order target, a
 * first-order draft, V = 8, some -inf logits), prompt [3, 5], 6 tokens per sample, sequence_id
 * = sample index, fixed seed. The processors make every token's law depend on the whole
 * history, so a row processed with the wrong history (a draft path off by one, the pending
 * token missed, the prompt counted as output) changes the law.
 * Hypothesis H0: the joint law of tokens (1,2,3) and, separately, of tokens (4,5,6) equals the
 * exact law of plain decoding with the processors, computed in double by enumerating every
 * history (the part-1 reference, then sd_sampling_process for temperature / top-k / top-p).
 * G-test over the 512 cells (cells with expected count < 5 pooled), reject at α = 1e-6 per
 * window; a token of exact probability 0 fails at once. Sample count: argv[1] per case
 * (CTest: 200 000 in Release, 20 000 under the sanitizers). Cases: rejection with a draft model
 * (γ = 2 and 4, two sampling settings), match, the n-gram drafter and plain decoding; four of the
 * six cases add the masks (ALLOWED, BAD_IDS: a k = 3 bad word whose prefix is the prompt
 * checks that only the output counts).
 * Built with SD_LOGITS_PROC_MUTANT (logits_proc_mutant.c linked: rows processed with the history
 * of the round's start only, the drafts before a row left out) the test runs a rejection case
 * and must REJECT it. min_tokens = 6 with stop_token_ids {7}: token 7 is never generated (and so
 * never stops a sample early). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../verify/vstats.h"
#include "logits_proc_ref.h"
#include "markov.h"
#include "sd_cpu_logits_proc.h"
#include "sd_cpu_sample.h"
#include "sd_engine.h"
#include "sd_test.h"
#include "sd_test_util.h"

static int same_bits(const float *a, const float *b, int32_t n) { return memcmp(a, b, (size_t)n * sizeof(float)) == 0; }

/* The kernel on row 0..9 (row[t] = t) after hist[0..n_hist) + path[0..n_path), n_prompt 2;
 * returns the banned ids (-inf) as a bit mask, -1 if a kept id changed. */
static int unit_row(const sd_logits_proc *base, const int32_t *hist, int32_t n_hist, const int32_t *path,
                    int32_t n_path) {
    float row[10];
    int32_t counts[10] = {0}, list[10];
    for (int t = 0; t < 10; t++) row[t] = (float)t;
    sd_logits_proc lp = *base;
    lp.repetition = 1.0f;
    lp.n_prompt = 2;
    sd_cpu_logits_proc(&lp, row, 10, hist, n_hist, path, n_path, counts, list);
    int mask = 0;
    for (int t = 0; t < 10; t++) {
        if (row[t] == -INFINITY) mask |= 1 << t;
        else if (row[t] != (float)t) return -1;
        if (counts[t]) return -1;
    }
    return mask;
}

/* Part 0: allowed_token_ids and bad words on hand-made rows (expected masks from the rule). */
static void part0_masks(void) {
    sd_logits_proc lp;
    memset(&lp, 0, sizeof lp);
    const int32_t allowed[3] = {5, 2, 5}; /* a repeat is harmless */
    lp.allowed = allowed;
    lp.n_allowed = 3;
    const int32_t h[6] = {1, 3, 1, 3, 4, 9};
    SD_CHECK(unit_row(&lp, h, 3, NULL, 0) == (0x3ff & ~((1 << 2) | (1 << 5))), "part 0: allowed {5, 2} keeps only them");
    lp.n_allowed = 0;
    /* bad words {7}, {1, 2}, {3, 4, 6} */
    const int32_t ids[6] = {7, 1, 2, 3, 4, 6}, off[4] = {0, 1, 3, 6};
    lp.bad_ids = ids;
    lp.bad_offsets = off;
    lp.n_bad = 3;
    const int b7 = 1 << 7, b2 = 1 << 2, b6 = 1 << 6;
    const int32_t p1[1] = {1}, p4[1] = {4}, p34[2] = {3, 4};
    SD_CHECK(unit_row(&lp, h, 2, NULL, 0) == b7, "part 0: k=1 bans always (empty output; prompt {1, 3} not counted)");
    SD_CHECK(unit_row(&lp, h, 3, NULL, 0) == (b7 | b2), "part 0: k=2: output ends with 1 -> 2 banned");
    SD_CHECK(unit_row(&lp, h, 4, NULL, 0) == b7, "part 0: k=2: 1 not at the end -> nothing more");
    SD_CHECK(unit_row(&lp, h, 5, NULL, 0) == (b7 | b6), "part 0: k=3: output ends with 3, 4 -> 6 banned");
    SD_CHECK(unit_row(&lp, h, 6, NULL, 0) == b7, "part 0: k=3: 3, 4 not at the end -> nothing more");
    SD_CHECK(unit_row(&lp, h, 4, p4, 1) == (b7 | b6), "part 0: k=3 across the draft path (3 | 4) -> 6 banned");
    SD_CHECK(unit_row(&lp, h, 2, p34, 2) == (b7 | b6), "part 0: k=3 all in the draft path -> 6 banned");
    SD_CHECK(unit_row(&lp, h, 2, p1, 1) == (b7 | b2), "part 0: k=2 in the draft path -> 2 banned");
    const int32_t hp[2] = {3, 5}; /* prompt 3 then path 4: the prefix 3 is in the prompt */
    SD_CHECK(unit_row(&lp, hp, 2, p4, 1) == b7, "part 0: k=3 with its prefix partly in the prompt -> not banned");
    const int32_t hq[2] = {9, 1};
    SD_CHECK(unit_row(&lp, hq, 2, NULL, 0) == b7, "part 0: k=2 with its prefix in the prompt -> not banned");
}

static void part1_kernel(void) {
    enum { KV = 50, MAXH = 40 };
    uint64_t rng = 0x10c175ull;
    int32_t counts[KV], list[KV];
    memset(counts, 0, sizeof counts);
    long bad = 0, dirty = 0;
    for (int it = 0; it < 3000; it++) {
        specdec_logit_bias bias[6];
        sd_logits_proc lp;
        memset(&lp, 0, sizeof lp);
        lp.n_bias = (int32_t)(sd_test_splitmix64(&rng) % 7);
        for (int32_t i = 0; i < lp.n_bias; i++) {
            bias[i].token = (int32_t)(sd_test_splitmix64(&rng) % KV);
            bias[i].bias = (float)((int)(sd_test_splitmix64(&rng) % 401) - 200) / 2.0f; /* -100..100 */
        }
        lp.bias = bias;
        lp.min_tokens = (int32_t)(sd_test_splitmix64(&rng) % 5);
        lp.n_ban = (int32_t)(sd_test_splitmix64(&rng) % 3);
        for (int32_t i = 0; i < lp.n_ban; i++) lp.ban[i] = (int32_t)(sd_test_splitmix64(&rng) % KV);
        static const float pens[] = {0.0f, 0.0f, 0.5f, -0.75f, 2.0f, -2.0f};
        static const float reps[] = {1.0f, 1.0f, 1.3f, 0.6f, 100.0f};
        lp.presence = pens[sd_test_splitmix64(&rng) % 6];
        lp.frequency = pens[sd_test_splitmix64(&rng) % 6];
        lp.repetition = reps[sd_test_splitmix64(&rng) % 5];
        const int32_t n = 1 + (int32_t)(sd_test_splitmix64(&rng) % MAXH);
        lp.n_prompt = 1 + (int32_t)(sd_test_splitmix64(&rng) % (uint64_t)n);
        int32_t allowed[8], bad_ids[12], bad_off[5] = {0};
        if (it % 3 == 0) { /* ids from the same 0..11 as the history, so matches are likely */
            lp.n_allowed = 1 + (int32_t)(sd_test_splitmix64(&rng) % 8);
            for (int32_t i = 0; i < lp.n_allowed; i++) allowed[i] = (int32_t)(sd_test_splitmix64(&rng) % 12);
            lp.allowed = allowed;
        }
        lp.n_bad = (int32_t)(sd_test_splitmix64(&rng) % 5);
        for (int32_t i = 0; i < lp.n_bad; i++) {
            bad_off[i + 1] = bad_off[i] + 1 + (int32_t)(sd_test_splitmix64(&rng) % 3);
            for (int32_t j = bad_off[i]; j < bad_off[i + 1]; j++) bad_ids[j] = (int32_t)(sd_test_splitmix64(&rng) % 4);
        }
        lp.bad_ids = bad_ids;
        lp.bad_offsets = bad_off;
        const int32_t n_path = (int32_t)(sd_test_splitmix64(&rng) % (uint64_t)(n - lp.n_prompt + 1));
        int32_t hist[MAXH];
        for (int32_t j = 0; j < n; j++) /* repeats likely; ids < 4 in one history in two, for bad words */
            hist[j] = (int32_t)(sd_test_splitmix64(&rng) % (it % 2 ? 12 : 4));
        float row[KV], want[KV];
        for (int32_t t = 0; t < KV; t++) row[t] = (float)((int)(sd_test_splitmix64(&rng) % 2001) - 1000) / 97.0f;
        if (it % 7 == 0) row[3] = -INFINITY;
        memcpy(want, row, sizeof row);
        ref_proc(&lp, want, KV, hist, n);
        sd_cpu_logits_proc(&lp, row, KV, hist, n - n_path, hist + n - n_path, n_path, counts, list);
        if (!same_bits(row, want, KV) && bad++ < 3) fprintf(stderr, "part 1: case %d differs\n", it);
        for (int32_t t = 0; t < KV; t++) dirty += counts[t] != 0;
    }
    SD_CHECK(bad == 0, "part 1: %ld of 3000 rows differ from the brute-force reference", bad);
    SD_CHECK(dirty == 0, "part 1: the counts scratch was left non-zero");
}

/* ---- part 2 ---- */

#define V 8
#define NP 6
static float g_target[V * V * V], g_draft[V * V];
static const int32_t PROMPT[2] = {3, 5};
static const specdec_logit_bias BIAS[3] = {{2, 1.5f}, {6, -100.0f}, {2, 0.25f}}; /* token 2 twice: they add */
static const int32_t STOP_IDS[1] = {7};
/* the masks (cases with masks = 1): token 1 not allowed; bad words {4}, {5, 2}, {2, 3, 0} and
 * {3, 5, 2} (the prompt is [3, 5]: vLLM looks at the output only, so token 2 stays allowed first) */
static const int32_t ALLOWED[6] = {0, 2, 3, 4, 5, 6};
static const int32_t BAD_IDS[9] = {4, 5, 2, 2, 3, 0, 3, 5, 2}, BAD_OFF[5] = {0, 1, 3, 6, 9};

typedef struct dcase {
    const char *name;
    int draft;   /* 1: the draft model; 2: the n-gram drafter; 0: plain */
    specdec_verify_mode mode;
    int32_t gamma;
    float temp;
    int32_t top_k;
    float top_p;
    float presence, frequency, repetition;
    int masks; /* 1: ALLOWED and the bad words too */
} dcase;

static void fill_proc(const dcase *c, sd_logits_proc *lp) {
    memset(lp, 0, sizeof *lp);
    lp->bias = BIAS;
    lp->n_bias = 3;
    lp->min_tokens = NP;
    lp->n_ban = 1;
    lp->ban[0] = STOP_IDS[0];
    lp->presence = c->presence;
    lp->frequency = c->frequency;
    lp->repetition = c->repetition == 0.0f ? 1.0f : c->repetition;
    lp->n_prompt = 2;
    if (c->masks) {
        lp->allowed = ALLOWED;
        lp->n_allowed = 6;
        lp->bad_ids = BAD_IDS;
        lp->bad_offsets = BAD_OFF;
        lp->n_bad = 4;
    }
}

/* The processed distribution of the token after hist[0..n) (double, normalised). */
static void exact_row(const sd_logits_proc *lp, const sd_sampling_params *sp, const int32_t *hist, int32_t n,
                      double *out) {
    float row[V], probs[V];
    static char scratch[1 << 12];
    memcpy(row, g_target + (size_t)(hist[n - 2] * V + hist[n - 1]) * V, sizeof row);
    ref_proc(lp, row, V, hist, n);
    SD_CHECK(sd_sampling_process(row, V, sp, scratch, sizeof scratch, probs, NULL) == SPECDEC_OK, "process: %s",
             specdec_last_error());
    double s = 0;
    for (int c = 0; c < V; c++) s += probs[c];
    for (int c = 0; c < V; c++) out[c] = probs[c] / s;
}

/* pa: law of tokens 1-3; pb: of tokens 4-6 (by enumerating every history). */
static void exact_laws(const sd_logits_proc *lp, const sd_sampling_params *sp, double *pa, double *pb) {
    int32_t h[2 + NP] = {PROMPT[0], PROMPT[1]};
    double r1[V], r2[V], r3[V], r4[V], r5[V], r6[V];
    memset(pa, 0, sizeof(double) * V * V * V);
    memset(pb, 0, sizeof(double) * V * V * V);
    exact_row(lp, sp, h, 2, r1);
    for (h[2] = 0; h[2] < V; h[2]++) {
        if (r1[h[2]] == 0) continue;
        exact_row(lp, sp, h, 3, r2);
        for (h[3] = 0; h[3] < V; h[3]++) {
            if (r2[h[3]] == 0) continue;
            exact_row(lp, sp, h, 4, r3);
            for (h[4] = 0; h[4] < V; h[4]++) {
                const double p3 = r1[h[2]] * r2[h[3]] * r3[h[4]];
                if (p3 == 0) continue;
                pa[(h[2] * V + h[3]) * V + h[4]] += p3;
                exact_row(lp, sp, h, 5, r4);
                for (h[5] = 0; h[5] < V; h[5]++) {
                    if (r4[h[5]] == 0) continue;
                    exact_row(lp, sp, h, 6, r5);
                    for (h[6] = 0; h[6] < V; h[6]++) {
                        if (r5[h[6]] == 0) continue;
                        exact_row(lp, sp, h, 7, r6);
                        for (h[7] = 0; h[7] < V; h[7]++)
                            pb[(h[5] * V + h[6]) * V + h[7]] += p3 * r4[h[5]] * r5[h[6]] * r6[h[7]];
                    }
                }
            }
        }
    }
}

static void run_case(const dcase *c, long N) {
    mk_fill_table(g_target, V * V, V, 1.2, 0.1, 101);
    mk_fill_table(g_draft, V, V, 1.2, 0.1, 202);
    mk_runner *mt = mk_runner_new(2, g_target, V, 64, 64);
    mk_runner *md = c->draft == 1 ? mk_runner_new(1, g_draft, V, 64, 64) : NULL;
    specdec_engine *e = NULL;
    specdec_status st = sd_engine_create_from_runners(&mt->base, md ? &md->base : NULL, NULL, &e);
    SD_CHECK(st == SPECDEC_OK, "%s: create: %s", c->name, specdec_last_error());
    if (st != SPECDEC_OK) return;
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = NP;
    gp.temperature = c->temp;
    gp.top_k = c->top_k;
    gp.top_p = c->top_p;
    gp.min_p = 0.0f;
    gp.verify = c->mode;
    gp.n_draft = c->gamma;
    gp.seed = 0x10c1700ull + (uint64_t)c->gamma;
    gp.logit_bias = BIAS;
    gp.n_logit_bias = 3;
    gp.min_tokens = NP;
    gp.stop_token_ids = STOP_IDS;
    gp.n_stop_token_ids = 1;
    gp.presence_penalty = c->presence;
    gp.frequency_penalty = c->frequency;
    gp.repetition_penalty = c->repetition;
    if (c->masks) {
        gp.allowed_token_ids = ALLOWED;
        gp.n_allowed_token_ids = 6;
        gp.bad_words_ids = BAD_IDS;
        gp.bad_words_offsets = BAD_OFF;
        gp.n_bad_words = 4;
    }
    if (c->draft == 2) {
        gp.draft_method = SPECDEC_DRAFT_NGRAM;
        gp.ngram_min = 1;
        gp.ngram_max = 2;
        gp.ngram_cost = SPECDEC_NGRAM_COST_OFF;
    }
    if (c->draft == 0) gp.draft_method = SPECDEC_DRAFT_NONE;
    sd_logits_proc lp;
    fill_proc(c, &lp);
    const sd_sampling_params sp = sd_sampling_params_from(&gp);
    static double pa[V * V * V], pb[V * V * V];
    static long ca[V * V * V], cb[V * V * V];
    exact_laws(&lp, &sp, pa, pb);
    memset(ca, 0, sizeof ca);
    memset(cb, 0, sizeof cb);
    int32_t out[NP];
    long drafted = 0, accepted = 0, bad = 0;
    for (long i = 0; i < N; i++) {
        gp.sequence_id = (uint64_t)i;
        int32_t n = 0;
        specdec_stats stats;
        st = specdec_generate(e, PROMPT, 2, &gp, out, NP, &n, &stats);
        if (st != SPECDEC_OK || n != NP) {
            if (bad++ < 3)
                fprintf(stderr, "%s: sample %ld: status %d n %d: %s\n", c->name, i, (int)st, (int)n,
                        specdec_engine_last_error(e));
            continue;
        }
        ca[(out[0] * V + out[1]) * V + out[2]]++;
        cb[(out[3] * V + out[4]) * V + out[5]]++;
        drafted += stats.n_drafted;
        accepted += stats.n_accepted;
    }
    SD_CHECK(bad == 0, "%s: %ld failed generate calls", c->name, bad);
    SD_CHECK(mt->violations == 0 && (!md || md->violations == 0), "%s: runner contract violations", c->name);
    if (c->draft) SD_CHECK(drafted > 0 && accepted > 0, "%s: drafted %ld, accepted %ld", c->name, drafted, accepted);
    int df;
    double G;
    const double pva = g_test_pvalue(ca, pa, V * V * V, N - bad, &df, &G);
    printf("%-34s N=%ld  tokens 1-3: G=%.1f df=%d p=%.3g", c->name, N, G, df, pva);
    const double pvb = g_test_pvalue(cb, pb, V * V * V, N - bad, &df, &G);
    printf("  tokens 4-6: G=%.1f df=%d p=%.3g  acc=%.3f\n", G, df, pvb,
           drafted ? (double)accepted / (double)drafted : 0.0);
#ifdef SD_LOGITS_PROC_MUTANT
    if (1) {
        SD_CHECK(pva <= 1e-6 || pvb <= 1e-6, "%s: rows processed with the wrong history were NOT detected (p=%.3g, %.3g)",
                 c->name, pva, pvb);
    } else {
        SD_CHECK(pva > 1e-6, "%s: tokens 1-3 deviate from the law of plain decoding: p=%.3g", c->name, pva);
        SD_CHECK(pvb > 1e-6, "%s: tokens 4-6 deviate from the law of plain decoding: p=%.3g", c->name, pvb);
    }
#else
    SD_CHECK(pva > 1e-6, "%s: tokens 1-3 deviate from the law of plain decoding: p=%.3g", c->name, pva);
    SD_CHECK(pvb > 1e-6, "%s: tokens 4-6 deviate from the law of plain decoding: p=%.3g", c->name, pvb);
#endif
    specdec_engine_free(e);
}

int main(int argc, char **argv) {
    const long N = argc > 1 ? atol(argv[1]) : 200000;
#ifdef SD_LOGITS_PROC_MUTANT
    const dcase mutant = {"MUTANT drafts left out g=4 T=1", 1, SPECDEC_VERIFY_REJECTION, 4, 1.0f, 0, 1.0f, 2.0f, 2.0f, 1.0f, 1};
    run_case(&mutant, N);
    (void)part1_kernel, (void)part0_masks;
#else
    part0_masks();
    part1_kernel();
    const dcase cases[] = {
        /* name                              draft mode                       γ  temp  k  top_p pres  freq  rep  masks */
        {"rejection g=2 T=1 all+masks",       1, SPECDEC_VERIFY_REJECTION, 2, 1.0f, 0, 1.0f, 0.8f, 0.5f, 1.4f, 1},
        {"rejection g=4 T=.7 k5 p.9 freq",    1, SPECDEC_VERIFY_REJECTION, 4, 0.7f, 5, 0.9f, 0.0f, 1.2f, 0.0f, 0},
        {"rejection g=4 T=1 repetition .5",   1, SPECDEC_VERIFY_REJECTION, 4, 1.0f, 0, 1.0f, 0.0f, 0.0f, 0.5f, 0},
        {"match g=3 T=1 all+masks",           1, SPECDEC_VERIFY_MATCH, 3, 1.0f, 0, 1.0f, -0.6f, 0.7f, 1.2f, 1},
        {"ngram rejection g=3 T=1 all+masks", 2, SPECDEC_VERIFY_REJECTION, 3, 1.0f, 0, 1.0f, 0.8f, 0.5f, 1.4f, 1},
        {"plain T=1 all+masks",               0, SPECDEC_VERIFY_AUTO, 0, 1.0f, 0, 1.0f, 0.8f, 0.5f, 1.4f, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], N);
#endif
    return sd_test_done();
}
