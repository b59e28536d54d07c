/* sd_sampling.c — the reference logits → probabilities pipeline (temperature, top-k,
 * top-p, min-p) and inverse-CDF / argmax sampling. The exact order of operations and
 * tie-breaking is specified in sd_sampling.h; exp and every sum come from
 * kernels/sd_sample_math.h, shared with the CUDA kernels, so both compute the same bits. */
#include "sd_sampling.h"

#include <math.h>
#include <string.h>

#include "sd_sample_math.h"

sd_sampling_params sd_sampling_params_from(const specdec_generate_params *gp) {
    sd_sampling_params sp;
    sp.temperature = gp->temperature;
    sp.top_k = gp->top_k;
    sp.top_p = gp->top_p;
    sp.min_p = gp->min_p;
    return sp;
}

specdec_status sd_sampling_check_params(const sd_sampling_params *sp, sd_errbuf *eb) {
    if (!sp) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sampling: params is NULL");
    if (!(sp->temperature >= 0.0f) || isinf(sp->temperature))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sampling: temperature %g must be finite and >= 0",
                       (double)sp->temperature);
    if (sp->top_k < 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sampling: top_k %d must be >= 0", (int)sp->top_k);
    if (!(sp->top_p > 0.0f && sp->top_p <= 1.0f))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sampling: top_p %g must be in (0, 1]", (double)sp->top_p);
    if (!(sp->min_p >= 0.0f && sp->min_p <= 1.0f))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sampling: min_p %g must be in [0, 1]", (double)sp->min_p);
    return SPECDEC_OK;
}

size_t sd_sampling_scratch_size(int32_t n_vocab) {
    if (n_vocab <= 0) return 0;
    return (size_t)n_vocab * (sizeof(double) + sizeof(int32_t)) + sizeof(double);
}

int32_t sd_sample_argmax(const float *x, int32_t n_vocab) {
    if (!x || n_vocab <= 0) return 0;
    int32_t best = 0;
    float bestv = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++) {
        float v = x[i];
        if (v > bestv) { /* NaN compares false: ignored; strict: lowest id wins ties */
            bestv = v;
            best = i;
        }
    }
    return best;
}

/* ceil(u * 2^62): the fixed-point prefix a token must reach; 1 for u <= 0 / NaN (the
 * first token with mass), all ones for u >= 2^64 (nothing reaches it: the last one). */
static sd_u128 cdf_target(double u) {
    if (!(u > 0.0)) return 1;
    if (u <= 1.0) return sd_spec_u_target(u, (sd_u128)1 << SD_SPEC_FIX_BITS);
    if (u >= 0x1p64) return ~(sd_u128)0;
    return (sd_u128)ceil(u * 0x1p62); /* exact: u * 2^62 < 2^126 is a double */
}

int32_t sd_sample_inverse_cdf(const float *probs, int32_t n_vocab, double u) {
    if (!probs || n_vocab <= 0) return 0;
    const sd_u128 target = cdf_target(u);
    sd_u128 c = 0;
    int32_t last = -1;
    for (int32_t i = 0; i < n_vocab; i++) {
        float pi = probs[i];
        if (!(pi > 0.0f)) continue; /* zero (or NaN) mass: empty segment */
        c += sd_spec_fix((double)pi);
        last = i;
        if (c >= target) return i;
    }
    return last >= 0 ? last : 0;
}

/* Rank order: a before b iff w[a] > w[b], or equal weights and a < b. */
static inline int ranks_before(const double *w, int32_t a, int32_t b) {
    return w[a] > w[b] || (w[a] == w[b] && a < b);
}

/* Binary heap over ids with the best-ranked id at the root. */
static void heap_sift_down(int32_t *h, int32_t n, int32_t i, const double *w) {
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && ranks_before(w, h[l], h[m])) m = l;
        if (r < n && ranks_before(w, h[r], h[m])) m = r;
        if (m == i) return;
        int32_t t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void heap_build(int32_t *h, int32_t n, const double *w) {
    for (int32_t i = n / 2 - 1; i >= 0; i--) heap_sift_down(h, n, i, w);
}

/* Remove the best id; it lands at h[n-1]. Returns the new heap size. */
static int32_t heap_pop(int32_t *h, int32_t n, const double *w) {
    int32_t t = h[0];
    h[0] = h[n - 1];
    h[n - 1] = t;
    heap_sift_down(h, n - 1, 0, w);
    return n - 1;
}

static void one_hot(float *probs, int32_t n_vocab, int32_t id) {
    memset(probs, 0, (size_t)n_vocab * sizeof(float));
    probs[id] = 1.0f;
}

specdec_status sd_sampling_process(const float *logits, int32_t n_vocab, const sd_sampling_params *sp,
                                   void *scratch, size_t scratch_size, float *probs_out, sd_errbuf *eb) {
    if (!logits || !probs_out || !sp)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sampling: NULL logits, probs or params");
    if (n_vocab <= 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sampling: n_vocab %d must be > 0", (int)n_vocab);
    specdec_status st = sd_sampling_check_params(sp, eb);
    if (st != SPECDEC_OK) return st;
    if (!scratch || scratch_size < sd_sampling_scratch_size(n_vocab))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sampling: scratch of %zu bytes, %zu needed for V=%d",
                       scratch ? scratch_size : (size_t)0, sd_sampling_scratch_size(n_vocab), (int)n_vocab);

    /* 1. greedy */
    if (sp->temperature == 0.0f) {
        one_hot(probs_out, n_vocab, sd_sample_argmax(logits, n_vocab));
        return SPECDEC_OK;
    }

    uintptr_t base = (uintptr_t)scratch;
    base = (base + sizeof(double) - 1) & ~(uintptr_t)(sizeof(double) - 1);
    double *w = (double *)base;
    int32_t *idx = (int32_t *)(w + n_vocab);
    const int32_t V = n_vocab;

    /* 0 + 2. sanitise, temperature; m = max z */
    const double T = (double)sp->temperature;
    double m = -INFINITY;
    for (int32_t i = 0; i < V; i++) {
        float l = logits[i];
        double z = isnan(l) ? -INFINITY : (double)l / T;
        w[i] = z;
        if (z > m) m = z;
    }
    /* 3. weights */
    if (m == -INFINITY) {
        one_hot(probs_out, V, 0);
        return SPECDEC_OK;
    }
    if (m == INFINITY) {
        for (int32_t i = 0; i < V; i++) w[i] = (w[i] == INFINITY) ? 1.0 : 0.0;
    } else {
        for (int32_t i = 0; i < V; i++) w[i] = sd_spec_exp(w[i] - m); /* exp(-inf) = 0 */
    }

    /* 4. candidates: ids with w > 0, ascending id */
    int32_t n = 0;
    for (int32_t i = 0; i < V; i++)
        if (w[i] > 0.0) idx[n++] = i;

    const int topk_on = sp->top_k > 0 && sp->top_k < n; /* k >= #candidates keeps all */
    const int topp_on = sp->top_p < 1.0f;
    int32_t h = n;        /* heap idx[0..h); popped ids, best first, are idx[n-1], idx[n-2], ... */
    int32_t popped = 0;
    if (topk_on || topp_on) heap_build(idx, n, w);

    /* 5. top-k: pop the k best, zero the rest */
    if (topk_on) {
        for (int32_t j = 0; j < sp->top_k; j++) h = heap_pop(idx, h, w);
        popped = sp->top_k;
        for (int32_t j = 0; j < h; j++) w[idx[j]] = 0.0;
        h = 0;
    }

    /* 6. top-p over the kept tokens in rank order */
    if (topp_on) {
        sd_u128 S = 0; /* exact: the threshold test below is exact too */
        for (int32_t i = 0; i < V; i++) S += sd_spec_fix(w[i]);
        const sd_u128 thr = sd_spec_topp_threshold(sp->top_p, S); /* c < thr <=> c < top_p * S */
        sd_u128 c = 0;
        int32_t r = 0;
        for (;;) {
            int32_t id;
            if (r < popped) {
                id = idx[n - 1 - r];
            } else if (h > 0) {
                h = heap_pop(idx, h, w);
                id = idx[h];
                popped++;
            } else {
                break;
            }
            r++;
            if (c < thr) {
                c += sd_spec_fix(w[id]);
            } else {
                w[id] = 0.0;
            }
            if (!(c < thr) && r >= popped && h > 0) {
                /* the nucleus is complete: everything still in the heap goes */
                for (int32_t j = 0; j < h; j++) w[idx[j]] = 0.0;
                h = 0;
            }
        }
    }

    /* 7. min-p relative to the largest weight */
    if (sp->min_p > 0.0f) {
        double wmax = 0.0;
        for (int32_t i = 0; i < V; i++)
            if (w[i] > wmax) wmax = w[i];
        const double thr = (double)sp->min_p * wmax;
        for (int32_t i = 0; i < V; i++)
            if (w[i] < thr) w[i] = 0.0;
    }

    /* 8. normalise by the exact fixed-point total */
    sd_u128 S = 0;
    for (int32_t i = 0; i < V; i++) S += sd_spec_fix(w[i]);
    for (int32_t i = 0; i < V; i++) probs_out[i] = w[i] > 0.0 ? sd_spec_norm(w[i], S) : 0.0f;
    return SPECDEC_OK;
}
