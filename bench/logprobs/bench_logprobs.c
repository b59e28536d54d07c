/* bench_logprobs.c — the cost of sd_cpu_logprobs (kernels/cpu/sd_cpu_logprobs.c) per
 * vocabulary id, against
 *   - "old": the 0.4.1 implementation (three passes, a double exp and a double lp_value
 *     per id), kept here verbatim for the before/after ratio;
 *   - "floor": one max pass and one plain sum pass over the row (no exp), vectorised the
 *     same way: the memory/compute floor of any two-pass method;
 * on rows of V = 4096, 32000, 128256, 152064 with a realistic spread (N(-3, 2.5^2) logits,
 * 40 ids raised by 8..20, a NaN-free row), top 0 and top 20, the emitted token the
 * row's most likely id and a mid-ranked one. Each measurement is the time of enough calls
 * to take ~20 ms, repeated `repeats` times (default 7): min, median and max ns per id.
 * Also prints max |new - old| over the reported values and the count of ranks / top ids
 * that differ (values may differ by an ulp, the sum of exponentials being rounded
 * differently, and a rank or a tie order with them; each version is exact for its values;
 * a differing rank is recomputed by its definition and printed on stderr).
 * Output: a markdown table on stdout. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "sd_cpu_logprobs.h"

/* ---- the 0.4.1 implementation (before), unchanged but for the names ---- */
static void old_normaliser(const float *row, int32_t V, double *m_out, double *log_sum_out) {
    float m = -INFINITY;
    for (int32_t i = 0; i < V; i++)
        if (row[i] > m) m = row[i];
    *m_out = (double)m;
    if (isinf(m)) {
        int64_t n_inf = 0;
        for (int32_t i = 0; i < V; i++) n_inf += row[i] == m;
        *log_sum_out = m > 0 ? log((double)n_inf) : 0.0;
        return;
    }
    double sum = 0.0;
    for (int32_t i = 0; i < V; i++)
        if (row[i] >= -INFINITY) sum += exp((double)row[i] - (double)m);
    *log_sum_out = log(sum);
}

static float old_value(float x, double m, double log_sum) {
    if (isinf(m)) return m > 0 && x == (float)m ? (float)-log_sum : -INFINITY;
    if (!(x >= -INFINITY)) return -INFINITY;
    return (float)(((double)x - m) - log_sum);
}

static void old_logprobs(const float *row, int32_t n_vocab, int32_t token, int32_t n_top, sd_logprob *out) {
    const int32_t V = n_vocab;
    if (n_top > SPECDEC_MAX_TOP_LOGPROBS) n_top = SPECDEC_MAX_TOP_LOGPROBS;
    if (n_top > V) n_top = V;
    if (n_top < 0) n_top = 0;
    double m, log_sum;
    old_normaliser(row, V, &m, &log_sum);
    const float lt = old_value(row[token], m, log_sum);
    int32_t above = 0, k = 0;
    for (int32_t i = 0; i < V; i++) {
        const float v = old_value(row[i], m, log_sum);
        above += v > lt;
        if (n_top == 0 || (k == n_top && !(v > out->top_logprobs[k - 1]))) continue;
        int32_t j = k < n_top ? k++ : k - 1;
        while (j > 0 && v > out->top_logprobs[j - 1]) {
            out->top_logprobs[j] = out->top_logprobs[j - 1];
            out->top_tokens[j] = out->top_tokens[j - 1];
            j--;
        }
        out->top_logprobs[j] = v;
        out->top_tokens[j] = i;
    }
    out->token = token;
    out->logprob = lt;
    out->rank = 1 + above;
    out->n_top = k;
}

/* ---- the floor: a max pass and a sum pass, 8 lanes each (V a multiple of 8) ---- */
static void floor_logprobs(const float *row, int32_t V, int32_t token, int32_t n_top, sd_logprob *out) {
    float l[8], s[8] = {0};
    for (int j = 0; j < 8; j++) l[j] = -INFINITY;
    int32_t i = 0;
    for (; i + 8 <= V; i += 8)
        for (int j = 0; j < 8; j++) l[j] = row[i + j] > l[j] ? row[i + j] : l[j];
    float m = l[0];
    for (int j = 1; j < 8; j++) m = l[j] > m ? l[j] : m;
    for (i = 0; i + 8 <= V; i += 8)
        for (int j = 0; j < 8; j++) s[j] += row[i + j] - m;
    float t = 0;
    for (int j = 0; j < 8; j++) t += s[j];
    out->token = token;
    out->logprob = t;
    out->rank = 1;
    out->n_top = 0;
    (void)n_top;
}

typedef void (*lp_fn)(const float *, int32_t, int32_t, int32_t, sd_logprob *);

static uint64_t rng = 0x2545f4914f6cdd1dULL;
static double urand(void) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (double)((rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}
static double gauss(void) {
    double u = urand(), v = urand();
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

static volatile float sink;

/* ns per id of one call: calls batched to ~20 ms, `reps` times; min, median, max */
static void measure(lp_fn f, const float *row, int32_t V, int32_t token, int32_t top, int reps, double out[3]) {
    sd_logprob lp;
    int64_t n = 1;
    for (;;) { /* calibrate */
        const double t0 = bench_now_s();
        for (int64_t c = 0; c < n; c++) f(row, V, token, top, &lp);
        if (bench_now_s() - t0 > 0.02) break;
        n *= 2;
    }
    double ts[64];
    for (int r = 0; r < reps; r++) {
        const double t0 = bench_now_s();
        for (int64_t c = 0; c < n; c++) {
            f(row, V, token, top, &lp);
            sink = lp.logprob;
        }
        ts[r] = (bench_now_s() - t0) * 1e9 / ((double)n * (double)V);
    }
    bench_sort(ts, reps);
    out[0] = ts[0];
    out[1] = ts[reps / 2];
    out[2] = ts[reps - 1];
}

/* every token of the row: new vs old values (max |diff|), ranks; the top lists */
static void compare(const float *row, int32_t V, double *max_diff, int *mismatch) {
    for (int32_t i = 0; i < V; i += V > 4096 ? 97 : 1) {
        sd_logprob a, b;
        sd_cpu_logprobs(row, V, i, 20, &a);
        old_logprobs(row, V, i, 20, &b);
        const double d = fabs((double)a.logprob - (double)b.logprob);
        if (d > *max_diff) *max_diff = d;
        if (a.rank != b.rank || a.n_top != b.n_top) {
            /* the new rank by its definition: ids above the token's raw logit whose new value is
             * larger (values computed for the ids within 1e-3 of it; further ones are above) */
            int32_t r = 1;
            for (int32_t j = 0; j < V; j++) {
                if (!(row[j] > row[i])) continue;
                sd_logprob c;
                if (row[j] - row[i] > 1e-3f) r++;
                else sd_cpu_logprobs(row, V, j, 0, &c), r += c.logprob > a.logprob;
            }
            fprintf(stderr, "V %d id %d: rank %d (value %.9g; by its definition %d) vs old %d (value %.9g)\n", (int)V,
                    (int)i, (int)a.rank, (double)a.logprob, (int)r, (int)b.rank, (double)b.logprob);
            ++*mismatch;
        }
        for (int32_t k = 0; k < a.n_top && k < b.n_top; k++) {
            *mismatch += a.top_tokens[k] != b.top_tokens[k];
            const double dk = fabs((double)a.top_logprobs[k] - (double)b.top_logprobs[k]);
            if (dk > *max_diff) *max_diff = dk;
        }
    }
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 7;
    if (reps < 1 || reps > 64) {
        fprintf(stderr, "usage: bench_logprobs [repeats 1..64]\n");
        return 2;
    }
    static const int32_t sizes[] = {4096, 32000, 128256, 152064};
    printf("| V | top | token | new ns/id min / med / max | old ns/id min / med / max | floor ns/id min / med "
           "/ max | old/new (med) | new/floor (med) |\n|---|---|---|---|---|---|---|---|\n");
    double max_diff = 0;
    int mismatch = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int32_t V = sizes[s];
        float *row = malloc((size_t)V * sizeof *row);
        if (!row) return 1;
        for (int32_t i = 0; i < V; i++) row[i] = (float)(2.5 * gauss() - 3.0);
        for (int c = 0; c < 40; c++) row[(int32_t)(urand() * V)] += (float)(8.0 + 12.0 * urand());
        int32_t best = 0;
        for (int32_t i = 1; i < V; i++) best = row[i] > row[best] ? i : best;
        const int32_t tokens[2] = {best, V / 2}; /* the most likely id; an arbitrary (mid-ranked) one */
        compare(row, V, &max_diff, &mismatch);
        for (int top = 0; top <= 20; top += 20)
            for (int t = 0; t < 2; t++) {
                double a[3], b[3], c[3];
                measure(sd_cpu_logprobs, row, V, tokens[t], top, reps, a);
                measure(old_logprobs, row, V, tokens[t], top, reps, b);
                measure(floor_logprobs, row, V, tokens[t], top, reps, c);
                printf("| %d | %d | %s | %.3f / %.3f / %.3f | %.3f / %.3f / %.3f | %.3f / %.3f / %.3f | %.1f | %.1f |\n",
                       (int)V, top, t == 0 ? "argmax" : "mid", a[0], a[1], a[2], b[0], b[1], b[2], c[0], c[1], c[2],
                       b[1] / a[1], a[1] / c[1]);
                fflush(stdout);
            }
        free(row);
    }
    printf("\nnew vs old over the rows (every id at V = 4096, every 97th above; top 20): max |diff| %.3g, "
           "rank/top-id mismatches %d\n",
           max_diff, mismatch);
    return 0; /* values may differ by an ulp from the old ones, and ranks with them (see the results) */
}
