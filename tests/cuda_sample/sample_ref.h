/* sample_ref.h — sequential host model of the GPU sampling / verify kernels
 * (kernels/cuda/sd_cuda_sample.cu, sd_cuda_verify.cu), header-only, plain C, for the tests.
 *
 * It follows the specification of core/sd_sample_rules.h with its exact helpers only
 * (sd_rule_exp, sd_rule_fix, sd_rule_norm, the top-p threshold and the sampling targets);
 * the per-element rules (argmax, scaling, weights, rank order, filters, masses,
 * acceptance) are spelled out here on purpose instead of calling the sd_rule_*
 * element functions that the CPU reference and the kernels share, so a wrong rule
 * there shows up as a difference here. Both the CPU reference and the GPU must
 * reproduce it BIT FOR BIT (w_in: optional w to use instead of sd_rule_exp, e.g. the
 * GPU's, to localise a difference). The ranking uses qsort on (w desc, id asc), the
 * sampling takes Philox words (integer targets) instead of doubles — different
 * algorithms from both the CPU's heap / sd_rule_u_target and the GPU's radix descent,
 * so agreement tests the selection, not a copy of it. */
#ifndef SPEC_REF_H
#define SPEC_REF_H

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sd_sample_rules.h"
#include "sd_cpu_sample.h"
#include "specdec.h"

static const double *sr_sort_w; /* qsort has no context argument (tests only) */
static int sr_rank_cmp(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    double wx = sr_sort_w[x], wy = sr_sort_w[y];
    if (wx > wy) return -1;
    if (wx < wy) return 1;
    return x < y ? -1 : (x > y);
}

static inline int32_t sr_argmax(const float *x, int32_t V) {
    int32_t best = 0;
    float bv = -INFINITY;
    for (int32_t i = 0; i < V; i++)
        if (x[i] > bv) {
            bv = x[i];
            best = i;
        }
    return best;
}

/* logits -> probs. w: V doubles of scratch (gets w); w_in: optional w to use instead of
 * sd_rule_exp (the GPU's). idx: V int32 scratch. Returns the argmax of probs. */
static inline int32_t sr_process(const float *logits, int32_t V, const sd_sampling_params *sp, const double *w_in,
                                 double *w, int32_t *idx, float *probs) {
    if (sp->temperature == 0.0f) {
        int32_t a = sr_argmax(logits, V);
        for (int32_t i = 0; i < V; i++) probs[i] = i == a ? 1.0f : 0.0f;
        return a;
    }
    float mx = -INFINITY;
    for (int32_t i = 0; i < V; i++)
        if (logits[i] > mx) mx = logits[i];
    const double T = (double)sp->temperature, m = (double)mx / T;
    if (m == -INFINITY) {
        for (int32_t i = 0; i < V; i++) probs[i] = i == 0 ? 1.0f : 0.0f;
        return 0;
    }
    int32_t n = 0;
    for (int32_t i = 0; i < V; i++) {
        float l = logits[i];
        if (m == INFINITY) w[i] = l == INFINITY ? 1.0 : 0.0;
        else if (w_in) w[i] = w_in[i];
        else w[i] = sd_rule_exp((isnan(l) ? -INFINITY : (double)l / T) - m);
        if (w[i] > 0.0) idx[n++] = i;
    }
    sr_sort_w = w;
    qsort(idx, (size_t)n, sizeof(int32_t), sr_rank_cmp);
    int32_t kept = n;
    if (sp->top_k > 0 && sp->top_k < n) kept = sp->top_k;
    if (sp->top_p < 1.0f) {
        sd_u128 S = 0, c = 0;
        for (int32_t r = 0; r < kept; r++) S += sd_rule_fix(w[idx[r]]);
        const sd_u128 thr = sd_rule_topp_threshold(sp->top_p, S);
        int32_t r = 0;
        while (r < kept && c < thr) c += sd_rule_fix(w[idx[r++]]);
        kept = r;
    }
    for (int32_t r = kept; r < n; r++) w[idx[r]] = 0.0;
    if (sp->min_p > 0.0f)
        for (int32_t i = 0; i < V; i++)
            if (w[i] < (double)sp->min_p) w[i] = 0.0;
    sd_u128 S = 0;
    for (int32_t i = 0; i < V; i++) S += sd_rule_fix(w[i]);
    for (int32_t i = 0; i < V; i++) probs[i] = w[i] > 0.0 ? sd_rule_norm(w[i], S) : 0.0f;
    return sr_argmax(probs, V);
}

/* First i with p_i > 0 and fixed prefix >= target; last such i if short; 0 if none. */
static inline int32_t sr_find(const float *p, const float *q, int32_t V, sd_u128 target) {
    sd_u128 c = 0;
    int32_t last = -1;
    if (target == 0) target = 1;
    for (int32_t i = 0; i < V; i++) {
        double d = q ? (double)p[i] - (double)q[i] : (double)p[i];
        if (!(d > 0.0)) continue;
        c += sd_rule_fix(d);
        last = i;
        if (c >= target) return i;
    }
    return last >= 0 ? last : 0;
}

static inline int32_t sr_sample(const float *p, int32_t V, uint32_t x) { return sr_find(p, NULL, V, sd_rule_cdf_target(x)); }

static inline int32_t sr_residual(const float *p, const float *q, int32_t V, uint32_t x) {
    sd_u128 D = 0;
    for (int32_t i = 0; i < V; i++) {
        double d = (double)p[i] - (double)q[i];
        if (d > 0.0) D += sd_rule_fix(d);
    }
    if (D == 0) return sr_sample(p, V, x);
    return sr_find(p, q, V, sd_rule_scaled_target(x, D));
}

/* The verifier on processed rows (layout of sd_cpu_verify.h), words instead of doubles. */
static inline int32_t sr_verify(specdec_verify_mode mode, int32_t g, int32_t V, const float *p, const float *q,
                                const int32_t *draft, const uint32_t *wacc, const uint32_t *wsmp, int32_t *out) {
    int32_t n = 0, t = 0;
    const size_t Vs = (size_t)V;
    if (mode == SPECDEC_VERIFY_REJECTION) {
        for (n = 0; n < g; n++) {
            int32_t x = draft[n];
            if (x < 0 || x >= V) break;
            double px = p[(size_t)n * Vs + (size_t)x], qx = q[(size_t)n * Vs + (size_t)x];
            if (!(px > 0.0 && sd_rule_word_to_u(wacc[n]) * qx <= px)) break;
        }
        t = n < g ? sr_residual(p + (size_t)n * Vs, q + (size_t)n * Vs, V, wsmp[n])
                  : sr_sample(p + (size_t)g * Vs, V, wsmp[g]);
    } else {
        for (n = 0; n <= g; n++) {
            const float *row = p + (size_t)n * Vs;
            t = mode == SPECDEC_VERIFY_GREEDY ? sr_argmax(row, V) : sr_sample(row, V, wsmp[n]);
            if (n == g || draft[n] != t) break;
        }
    }
    for (int32_t i = 0; i < n; i++) out[i] = draft[i];
    out[n] = t;
    return n;
}

#endif
