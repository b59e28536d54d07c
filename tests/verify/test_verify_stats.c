/* test_verify_stats.c — the statistical proof that speculative verification is exact.
 *
 * Setup: synthetic context-free models over a vocabulary of V tokens: the target's
 * processed row at absolute position k is P[k], the draft's is Q[k] (both from random
 * logits through sd_sampling_process with the case's parameters). One sample = one
 * sequence id s: generate L tokens from position 0 by speculative rounds (draft tokens
 * from sd_verify_draft_sample, uniforms from sd_verify_fetch_uniforms keyed by
 * (seed, s), sd_verify on the rows), exactly as the engine does.
 *
 * Hypotheses (H0, each tested with Pearson chi-square, bins with expectation < 5
 * pooled, a token of probability 0 ever emitted = immediate rejection):
 *  (a) for each position k < L the emitted token is distributed as P[k];
 *  (b) the number n accepted in the first round has P(n) = a_1…a_n (1 − a_{n+1}),
 *      a_i = Σ_x min(P[i](x), Q[i](x)) in REJECTION mode; in MATCH mode a_i is the
 *      overlap of the two inverse-CDF partitions of (0,1] (same uniform for both).
 * Significance: α = 1e-6 family-wise, Bonferroni over all tests of all cases.
 * Samples: --samples (default 1e6) per small-vocab case; --big-samples (default 5e4)
 * for V = 151936 and 256000, where each sample costs O(V) and the mass is concentrated
 * on 64 heavy tokens spread over the whole id range (the tail, ~10-20 % of the mass,
 * is spread over every other id and pooled into one bin) so that the per-token test
 * keeps power with fewer samples; only the first round is run there (L = 1).
 *
 * Mutation check: linked with a broken verifier (tests/verify/verify_mutants.c compiled
 * with -DSD_VERIFY_MUTANT=N), or run with --mutant-qraw (the verifier is
 * given the draft's unprocessed softmax instead of the row it sampled from), the test
 * inverts: it passes only if some hypothesis is rejected at the same α. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sd_rng.h"
#include "sd_cpu_sample.h"
#include "sd_test.h"
#include "sd_test_util.h"
#include "sd_cpu_verify.h"
#include "vstats.h"

#ifndef SD_VERIFY_MUTANT
#define SD_VERIFY_MUTANT 0
#endif

static uint64_t rs;
static uint64_t next_u64(void) { return sd_test_splitmix64(&rs); }
static double unit(void) { return (double)((next_u64() >> 11) + 1) * 0x1.0p-53; }
static double normal(void) { return sqrt(-2 * log(unit())) * cos(6.283185307179586 * unit()); }

typedef enum { LOG_NOISY, LOG_SAME, LOG_DISJOINT, LOG_ONEHOT_P, LOG_SPECIAL, LOG_BIG } logit_kind;

typedef struct {
    const char *name;
    int mode;
    int V, gamma;
    float T;
    int top_k;
    float top_p, min_p;
    logit_kind kind;
    int big;
} vcase;

static const vcase cases[] = {
    {"T=1", SPECDEC_VERIFY_REJECTION, 32, 4, 1.0f, 0, 1.0f, 0.0f, LOG_NOISY, 0},
    {"T=0.5", SPECDEC_VERIFY_REJECTION, 32, 4, 0.5f, 0, 1.0f, 0.0f, LOG_NOISY, 0},
    {"T=2", SPECDEC_VERIFY_REJECTION, 32, 4, 2.0f, 0, 1.0f, 0.0f, LOG_NOISY, 0},
    {"top-k 1", SPECDEC_VERIFY_REJECTION, 32, 4, 1.0f, 1, 1.0f, 0.0f, LOG_NOISY, 0},
    {"top-k 5", SPECDEC_VERIFY_REJECTION, 32, 4, 1.0f, 5, 1.0f, 0.0f, LOG_NOISY, 0},
    {"top-p 0.5", SPECDEC_VERIFY_REJECTION, 32, 4, 1.0f, 0, 0.5f, 0.0f, LOG_NOISY, 0},
    {"top-p 0.9", SPECDEC_VERIFY_REJECTION, 32, 4, 1.0f, 0, 0.9f, 0.0f, LOG_NOISY, 0},
    {"top-k 5 + top-p 0.9, T=0.7", SPECDEC_VERIFY_REJECTION, 32, 4, 0.7f, 5, 0.9f, 0.0f, LOG_NOISY, 0},
    {"top-k 10 + top-p 0.95 + min-p 0.05", SPECDEC_VERIFY_REJECTION, 48, 4, 0.8f, 10, 0.95f, 0.05f, LOG_NOISY, 0},
    {"q == p", SPECDEC_VERIFY_REJECTION, 32, 4, 1.0f, 0, 1.0f, 0.0f, LOG_SAME, 0},
    {"disjoint supports", SPECDEC_VERIFY_REJECTION, 32, 4, 1.0f, 0, 1.0f, 0.0f, LOG_DISJOINT, 0},
    {"one-hot p", SPECDEC_VERIFY_REJECTION, 32, 4, 1.0f, 0, 1.0f, 0.0f, LOG_ONEHOT_P, 0},
    {"NaN/Inf logits", SPECDEC_VERIFY_REJECTION, 32, 4, 1.0f, 0, 1.0f, 0.0f, LOG_SPECIAL, 0},
    {"V=61 (prime), gamma 3", SPECDEC_VERIFY_REJECTION, 61, 3, 0.8f, 0, 1.0f, 0.0f, LOG_NOISY, 0},
    {"V=16, gamma 8", SPECDEC_VERIFY_REJECTION, 16, 8, 1.0f, 0, 1.0f, 0.0f, LOG_NOISY, 0},
    {"V=64, gamma 1", SPECDEC_VERIFY_REJECTION, 64, 1, 1.0f, 0, 1.0f, 0.0f, LOG_NOISY, 0},
    {"match T=1", SPECDEC_VERIFY_MATCH, 32, 4, 1.0f, 0, 1.0f, 0.0f, LOG_NOISY, 0},
    {"match top-k 5 + top-p 0.9", SPECDEC_VERIFY_MATCH, 32, 4, 1.0f, 5, 0.9f, 0.0f, LOG_NOISY, 0},
    {"V=151936", SPECDEC_VERIFY_REJECTION, 151936, 2, 1.0f, 0, 1.0f, 0.0f, LOG_BIG, 1},
    {"V=256000, T=0.8 top-k 50 top-p 0.9", SPECDEC_VERIFY_REJECTION, 256000, 2, 0.8f, 50, 0.9f, 0.0f, LOG_BIG, 1},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

static int case_len(const vcase *c) { return c->big ? 1 : c->gamma + 2; }

static void gen_logits(const vcase *c, int k, float *lp, float *lq) {
    const int V = c->V;
    if (c->kind == LOG_BIG) {
        for (int i = 0; i < V; i++) {
            lp[i] = (float)normal();
            lq[i] = lp[i];
        }
        for (int h = 0; h < 64; h++) { /* heavy ids spread over the range, incl. the last */
            int id = h == 63 ? V - 1 : (int)(next_u64() % (uint64_t)V);
            lp[id] = (float)(11.0 + 1.5 * normal());
            lq[id] = (float)(0.8 * lp[id] + 1.5 + normal());
        }
        return;
    }
    for (int i = 0; i < V; i++) {
        lp[i] = (float)(2.0 * normal());
        lq[i] = (float)(0.8 * lp[i] + 1.2 * normal());
    }
    if (c->kind == LOG_SAME) memcpy(lq, lp, sizeof(float) * (size_t)V);
    if (c->kind == LOG_DISJOINT)
        for (int i = 0; i < V; i++) {
            if (i < V / 2) lq[i] = -INFINITY;
            else lp[i] = -INFINITY;
        }
    if (c->kind == LOG_SPECIAL) {
        lp[(3 + k) % V] = NAN;
        lq[(5 + k) % V] = NAN;
        lp[(7 + 2 * k) % V] = -INFINITY;
        if (k % 2 == 0) { /* two +inf tokens share the target's mass at even positions */
            lp[(11 + k) % V] = INFINITY;
            lp[(20 + k) % V] = INFINITY;
        }
        if (k % 3 == 0) lq[(11 + k) % V] = INFINITY;
    }
}

/* Acceptance probability of draft position i in MATCH mode: overlap of the partitions. */
static double match_overlap(const float *p, const float *q, int V) {
    double cp = 0, cq = 0, ov = 0;
    for (int j = 0; j < V; j++) {
        double lo = fmax(cp, cq);
        cp += p[j] > 0 ? p[j] : 0;
        cq += q[j] > 0 ? q[j] : 0;
        double hi = fmin(cp, cq);
        if (p[j] > 0 && q[j] > 0 && hi > lo) ov += hi - lo;
    }
    return ov;
}

typedef struct {
    double min_pvalue;
    const char *worst;
    int worst_pos;
    int n_tests;
} case_result;

static long n_samples = 1000000, n_big = 50000;
static int qraw = 0;

/* Run one case; appends p-values. Returns the number of tests run. */
static int run_case(int ci, double *pvals) {
    const vcase *c = &cases[ci];
    const int V = c->V, g = c->gamma, L = case_len(c);
    const int R = L + g; /* rows needed: a round may start at L-1 and look γ ahead */
    const long N = c->big ? n_big : n_samples;
    rs = 0x5eed0000ull + (uint64_t)ci;
    float *P = malloc(sizeof(float) * (size_t)R * V), *Q = malloc(sizeof(float) * (size_t)R * V);
    float *Qv = malloc(sizeof(float) * (size_t)R * V); /* rows handed to the verifier */
    float *lp = malloc(sizeof(float) * V), *lq = malloc(sizeof(float) * V);
    double *cdfq = malloc(sizeof(double) * (size_t)R * V);
    size_t ss = sd_sampling_scratch_size(V);
    void *scratch = malloc(ss);
    double *cnt = calloc((size_t)L * V, sizeof(double)), ncnt[SPECDEC_MAX_DRAFT + 1] = {0};
    sd_sampling_params sp = {c->T, c->top_k, c->top_p, c->min_p};
    sd_sampling_params raw = {1.0f, 0, 1.0f, 0.0f};
    for (int k = 0; k < R; k++) {
        gen_logits(c, k, lp, lq);
        sd_sampling_params spp = sp;
        if (c->kind == LOG_ONEHOT_P) spp.temperature = 0.0f;
        sd_sampling_process(lp, V, &spp, scratch, ss, P + (size_t)k * V, NULL);
        sd_sampling_process(lq, V, &sp, scratch, ss, Q + (size_t)k * V, NULL);
        if (qraw) sd_sampling_process(lq, V, &raw, scratch, ss, Qv + (size_t)k * V, NULL);
        else memcpy(Qv + (size_t)k * V, Q + (size_t)k * V, sizeof(float) * V);
        double cc = 0;
        for (int j = 0; j < V; j++) cdfq[(size_t)k * V + j] = (cc += Q[(size_t)k * V + j] > 0 ? Q[(size_t)k * V + j] : 0);
    }
    const uint64_t seed = 0xC0FFEEull + (uint64_t)ci;
    int draft[SPECDEC_MAX_DRAFT], out[SPECDEC_MAX_DRAFT + 1], n, errors = 0, helper_mismatch = 0;
    for (long s = 0; s < N; s++) {
        int len = 0, first = 1;
        while (len < L) {
            for (int i = 0; i < g; i++) {
                const float *qrow = Q + (size_t)(len + i) * V;
                if (c->big) { /* binary search on the precomputed CDF == the linear inverse CDF */
                    int purpose = c->mode == SPECDEC_VERIFY_MATCH ? SD_RNG_PURPOSE_SAMPLE : SD_RNG_PURPOSE_DRAFT;
                    double u = sd_rng_uniform_at(seed, (uint64_t)s, len + i, purpose);
                    const double *cd = cdfq + (size_t)(len + i) * V;
                    int lo = 0, hi = V - 1;
                    while (lo < hi) {
                        int mid = (lo + hi) / 2;
                        if (u <= cd[mid]) hi = mid;
                        else lo = mid + 1;
                    }
                    while (lo > 0 && qrow[lo] <= 0) lo--; /* u past the end: last positive */
                    draft[i] = lo;
                    if (s < 50 && draft[i] != sd_verify_draft_sample((specdec_verify_mode)c->mode, qrow, V, seed,
                                                                     (uint64_t)s, len + i))
                        helper_mismatch++;
                } else {
                    draft[i] = sd_verify_draft_sample((specdec_verify_mode)c->mode, qrow, V, seed, (uint64_t)s, len + i);
                }
            }
            sd_verify_uniforms u;
            sd_verify_fetch_uniforms(seed, (uint64_t)s, len, g, &u);
            if (sd_verify((specdec_verify_mode)c->mode, g, V, P + (size_t)len * V, Qv + (size_t)len * V, draft, &u, out,
                          &n, NULL) != SPECDEC_OK) {
                errors++;
                break;
            }
            if (first) ncnt[n] += 1;
            first = 0;
            for (int i = 0; i <= n && len < L; i++, len++) cnt[(size_t)len * V + out[i]] += 1;
        }
    }
    SD_CHECK(errors == 0 && helper_mismatch == 0, "%s: %d verifier errors, %d CDF-search mismatches", c->name, errors,
             helper_mismatch);
    int nt = 0;
    double *prob = malloc(sizeof(double) * V);
    for (int k = 0; k < L; k++) {
        for (int j = 0; j < V; j++) prob[j] = P[(size_t)k * V + j];
        double tot = 0;
        for (int j = 0; j < V; j++) tot += prob[j];
        for (int j = 0; j < V; j++) prob[j] /= tot;
        double x;
        int df;
        pvals[nt++] = gof_pvalue(cnt + (size_t)k * V, prob, V, (double)N, &x, &df);
        if (k == 0 || pvals[nt - 1] < 1e-3)
            printf("  %-36s pos %d: chi2 %.1f df %d p %.3g\n", c->name, k, x, df, pvals[nt - 1]);
    }
    double a[SPECDEC_MAX_DRAFT], pn[SPECDEC_MAX_DRAFT + 1], prod = 1;
    for (int i = 0; i < g; i++) {
        const float *pr = P + (size_t)i * V, *qr = Q + (size_t)i * V;
        if (c->mode == SPECDEC_VERIFY_MATCH) {
            a[i] = match_overlap(pr, qr, V);
        } else {
            a[i] = 0;
            for (int j = 0; j < V; j++) a[i] += fmin(pr[j], qr[j]);
        }
        if (a[i] > 1) a[i] = 1;
    }
    for (int k = 0; k <= g; k++) {
        pn[k] = prod * (k < g ? (1 - a[k]) : 1);
        if (pn[k] < 1e-12) pn[k] = 0; /* rounding residue of an impossible count */
        if (k < g) prod *= a[k];
    }
    double x;
    int df;
    pvals[nt++] = gof_pvalue(ncnt, pn, g + 1, (double)N, &x, &df);
    printf("  %-36s accepted-count: chi2 %.1f df %d p %.3g (a1 %.3f)\n", c->name, x, df, pvals[nt - 1], g ? a[0] : 0);
    free(prob); free(P); free(Q); free(Qv); free(lp); free(lq); free(cdfq); free(scratch); free(cnt);
    return nt;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--samples") && i + 1 < argc) n_samples = atol(argv[++i]);
        else if (!strcmp(argv[i], "--big-samples") && i + 1 < argc) n_big = atol(argv[++i]);
        else if (!strcmp(argv[i], "--mutant-qraw")) qraw = 1;
        else {
            fprintf(stderr, "usage: %s [--samples N] [--big-samples N] [--mutant-qraw]\n", argv[0]);
            return 2;
        }
    }
    const int expect_failure = SD_VERIFY_MUTANT != 0 || qraw;
    int m = 0;
    for (int ci = 0; ci < NCASES; ci++) m += case_len(&cases[ci]) + 1;
    const double alpha = 1e-6, thr = alpha / m;
    printf("H0: emitted tokens ~ p per position, accepted count ~ closed form; %d tests, alpha %g family-wise, "
           "per-test %.3g; samples %ld (big vocab %ld); mutant %d%s\n",
           m, alpha, thr, n_samples, n_big, SD_VERIFY_MUTANT, qraw ? " (q before processing)" : "");
    double pv[64];
    int rejected = 0;
    for (int ci = 0; ci < NCASES; ci++) {
        clock_t t0 = clock();
        int nt = run_case(ci, pv);
        int rej = 0;
        for (int t = 0; t < nt; t++) rej += pv[t] < thr;
        printf("case %2d %-36s %s (%.2fs)\n", ci, cases[ci].name, rej ? "REJECTED" : "ok",
               (double)(clock() - t0) / CLOCKS_PER_SEC);
        rejected += rej;
        if (expect_failure && rejected) break; /* the mutant is caught: done */
    }
    if (expect_failure) {
        SD_CHECK(rejected > 0, "the broken verifier was NOT caught at alpha %g", alpha);
        if (rejected) printf("mutant caught\n");
    } else {
        SD_CHECK(rejected == 0, "%d hypotheses rejected at per-test level %.3g", rejected, thr);
    }
    return sd_test_done();
}
