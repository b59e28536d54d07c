/* vstats.h — statistics helpers for the verify/sampling tests (header-only):
 * the chi-square upper tail and a Pearson goodness-of-fit test with pooling of
 * small-expectation bins. */
#ifndef VSTATS_H
#define VSTATS_H

#include <math.h>
#include <stdio.h>
#include <stdint.h>

/* Upper tail of the chi-square distribution, Q(k/2, x/2), by series / continued fraction. */
static inline double chi2_sf(double x, double k) {
    double a = k / 2.0, z = x / 2.0;
    if (z <= 0) return 1.0;
    double lg = lgamma(a);
    if (z < a + 1.0) {
        double sum = 1.0 / a, term = sum;
        for (int n = 1; n < 100000; n++) {
            term *= z / (a + n);
            sum += term;
            if (term < sum * 1e-16) break;
        }
        return 1.0 - sum * exp(-z + a * log(z) - lg);
    }
    double b = z + 1.0 - a, c = 1.0 / 1e-300, d = 1.0 / b, h = d;
    for (int i = 1; i < 100000; i++) {
        double an = -i * (i - a);
        b += 2.0;
        d = an * d + b;
        if (fabs(d) < 1e-300) d = 1e-300;
        c = b + an / c;
        if (fabs(c) < 1e-300) c = 1e-300;
        d = 1.0 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1.0) < 1e-16) break;
    }
    return exp(-z + a * log(z) - lg) * h;
}

/* Pearson chi-square goodness of fit of counts[0..k) (total n) against probabilities
 * prob[0..k) (sum 1). Bins with expected count < 5 are pooled into one bin. A count in a
 * bin of probability 0 is an impossible event: returns p = 0. *stat / *df get the
 * statistic and degrees of freedom (df 0 → p = 1). */
static inline double gof_pvalue(const double *counts, const double *prob, int k, double n, double *stat, int *df) {
    double x = 0, pool_o = 0, pool_e = 0;
    int bins = 0;
    for (int i = 0; i < k; i++) {
        double e = prob[i] * n;
        if (prob[i] <= 0) {
            if (counts[i] > 0) {
                if (stat) *stat = INFINITY;
                if (df) *df = 0;
                return 0.0;
            }
            continue;
        }
        if (e < 5) {
            pool_o += counts[i];
            pool_e += e;
            continue;
        }
        x += (counts[i] - e) * (counts[i] - e) / e;
        bins++;
    }
    if (pool_e > 0) {
        if (pool_e < 1e-9) {
            if (pool_o > 0) x = INFINITY;
        } else {
            x += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
            bins++;
        }
    }
    if (stat) *stat = x;
    if (df) *df = bins - 1;
    if (bins <= 1) return isinf(x) ? 0.0 : 1.0;
    if (isinf(x)) return 0.0;
    return chi2_sf(x, bins - 1);
}

/* G-test of counts[n] against probabilities prob[n]; returns the p-value (0 when an
 * impossible cell was observed). */
static inline double g_test_pvalue(const long *counts, const double *prob, int n, long total, int *df_out, double *g_out) {
    double G = 0, pooled_e = 0;
    long pooled_o = 0;
    int cells = 0;
    for (int i = 0; i < n; i++) {
        double e = prob[i] * (double)total;
        if (prob[i] <= 0) {
            if (counts[i] > 0) {
                fprintf(stderr, "  cell %d has probability 0 but was observed %ld times\n", i, counts[i]);
                *df_out = 0;
                *g_out = INFINITY;
                return 0.0;
            }
            continue;
        }
        if (e < 5) {
            pooled_e += e;
            pooled_o += counts[i];
            continue;
        }
        if (counts[i] > 0) G += 2.0 * (double)counts[i] * log((double)counts[i] / e);
        G -= 2.0 * ((double)counts[i] - e); /* exact G when the sums differ by rounding */
        cells++;
    }
    if (pooled_e > 0) {
        if (pooled_o > 0) G += 2.0 * (double)pooled_o * log((double)pooled_o / pooled_e);
        G -= 2.0 * ((double)pooled_o - pooled_e);
        cells++;
    }
    int df = cells - 1;
    *df_out = df;
    *g_out = G;
    return df > 0 ? chi2_sf(G, df) : 1.0; /* Q(df/2, G/2) */
}

#endif
