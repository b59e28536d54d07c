/* sd_cpu_sample.c — the CPU reference of row processing (temperature, top-k, top-p,
 * min-p) and inverse-CDF / argmax sampling. The rules, their order and every per-token
 * decision come from core/sd_sample_rules.h (shared with the CUDA kernels), so both
 * sides compute the same bits. */
#include "sd_cpu_sample.h"

#include <math.h>
#include <string.h>

#include "sd_cpu_clones.h"

size_t sd_sampling_scratch_size(int32_t n_vocab) {
    if (n_vocab <= 0) return 0;
    return (size_t)n_vocab * (sizeof(double) + sizeof(int32_t)) + sizeof(double);
}

int32_t sd_sample_argmax(const float *x, int32_t n_vocab) {
    if (!x || n_vocab <= 0) return 0;
    int32_t best = INT32_MAX;
    float bestv = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++)
        if (sd_rule_argmax_better(x[i], i, bestv, best)) {
            bestv = x[i];
            best = i;
        }
    return best == INT32_MAX ? 0 : best;
}

/* ceil(u * 2^62): the fixed-point prefix a token must reach; 1 for u <= 0 / NaN (the
 * first token with mass), all ones for u >= 2^64 (nothing reaches it: the last one). */
static sd_u128 cdf_target(double u) {
    if (!(u > 0.0)) return 1;
    if (u <= 1.0) return sd_rule_u_target(u, (sd_u128)1 << SD_RULE_FIX_BITS);
    if (u >= 0x1p64) return ~(sd_u128)0;
    return (sd_u128)ceil(u * 0x1p62); /* exact: u * 2^62 < 2^126 is a double */
}

int32_t sd_sample_inverse_cdf(const float *probs, int32_t n_vocab, double u) {
    if (!probs || n_vocab <= 0) return 0;
    const sd_u128 target = cdf_target(u);
    sd_u128 c = 0;
    int32_t last = -1;
    for (int32_t i = 0; i < n_vocab; i++) {
        int pos;
        const uint64_t m = sd_rule_prob_mass(probs[i], &pos);
        if (!pos) continue; /* zero (or NaN) mass: empty segment */
        c += m;
        last = i;
        if (c >= target) return i;
    }
    return last >= 0 ? last : 0;
}

/* Binary heap over ids with the best-ranked id (sd_rule_ranks_before) at the root. */
static inline int ranks_before(const double *w, int32_t a, int32_t b) { return sd_rule_ranks_before(w[a], a, w[b], b); }

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

/* The row's working state: weights w[V] (double) and candidate ids idx[] in scratch. */
typedef struct sd_row {
    const sd_sampling_params *sp;
    int32_t V;
    double *w;
    int32_t *idx;
    int32_t n;      /* candidates (w > 0) in idx[0..n), ascending id */
    int32_t h;      /* heap idx[0..h); popped ids, best first, are idx[n-1], idx[n-2], ... */
    int32_t popped;
} sd_row;

/* Steps 0, 2, 3: weights. Returns 0 after writing a one-hot row (all -inf), else 1.
 * sd_rule_exp is 16 explicit fma() per id: without an FMA target each is a libm call (~60% of
 * this function's time, bench/sampling); the FMA clone makes them instructions, with the same
 * results (an fma is correctly rounded either way). */
SD_CPU_CLONES_FMA static int row_weights(sd_row *r, const float *logits, float *probs_out) {
    const double T = (double)r->sp->temperature;
    float mx = -INFINITY;
    for (int32_t i = 0; i < r->V; i++)
        if (logits[i] > mx) mx = logits[i]; /* NaN never wins */
    const double m = sd_rule_scale(mx, T);
    if (m == -INFINITY) {
        one_hot(probs_out, r->V, 0);
        return 0;
    }
    r->n = 0;
    for (int32_t i = 0; i < r->V; i++) {
        r->w[i] = sd_rule_weight(logits[i], T, m);
        if (r->w[i] > 0.0) r->idx[r->n++] = i; /* step 4: candidates */
    }
    return 1;
}

/* Step 5: pop the k best, zero the rest. */
static void row_topk(sd_row *r) {
    for (int32_t j = 0; j < r->sp->top_k; j++) r->h = heap_pop(r->idx, r->h, r->w);
    r->popped = r->sp->top_k;
    for (int32_t j = 0; j < r->h; j++) r->w[r->idx[j]] = 0.0;
    r->h = 0;
}

/* Step 6: top-p over the kept tokens in rank order. */
static void row_topp(sd_row *r) {
    double *w = r->w;
    sd_u128 S = 0; /* exact: the threshold test below is exact too */
    for (int32_t i = 0; i < r->V; i++) S += sd_rule_fix(w[i]);
    const sd_u128 thr = sd_rule_topp_threshold(r->sp->top_p, S); /* c < thr <=> c < top_p * S */
    sd_u128 c = 0;
    for (int32_t rank = 0;; rank++) {
        int32_t id;
        if (rank < r->popped) {
            id = r->idx[r->n - 1 - rank];
        } else if (r->h > 0) {
            r->h = heap_pop(r->idx, r->h, w);
            id = r->idx[r->h];
            r->popped++;
        } else {
            break;
        }
        if (c < thr) c += sd_rule_fix(w[id]);
        else w[id] = 0.0;
        if (!(c < thr) && rank + 1 >= r->popped && r->h > 0) {
            /* the nucleus is complete: everything still in the heap goes */
            for (int32_t j = 0; j < r->h; j++) w[r->idx[j]] = 0.0;
            r->h = 0;
        }
    }
}

/* Steps 7 and 8: min-p, then normalise by the exact fixed-point total. */
static void row_finish(sd_row *r, float *probs_out) {
    double *w = r->w;
    for (int32_t i = 0; i < r->V; i++)
        if (!sd_rule_minp_keep(w[i], r->sp->min_p)) w[i] = 0.0;
    sd_u128 S = 0;
    for (int32_t i = 0; i < r->V; i++) S += sd_rule_fix(w[i]);
    for (int32_t i = 0; i < r->V; i++) probs_out[i] = w[i] > 0.0 ? sd_rule_norm(w[i], S) : 0.0f;
}

specdec_status sd_sampling_process_eagle3(const sd_eagle3_weights *hw, const float *logits, const sd_sampling_params *sp,
                                          int greedy, void *scratch, size_t scratch_size, float *q, sd_errbuf *eb) {
    if (!hw || !logits || !q) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sampling: NULL EAGLE-3 row");
    if (greedy) {
        (void)sd_eagle3_q(hw, logits, q);
        return SPECDEC_OK;
    }
    const int32_t Vd = hw->cfg.draft_vocab, V = hw->cfg.layer.vocab_size;
    for (int32_t t = 0; t < V; t++) q[t] = -INFINITY;
    for (int32_t i = 0; i < Vd; i++) q[hw->d2t[i]] = logits[i];
    return sd_sampling_process(q, V, sp, scratch, scratch_size, q, eb);
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
    if (sp->temperature == 0.0f) { /* step 1: greedy */
        one_hot(probs_out, n_vocab, sd_sample_argmax(logits, n_vocab));
        return SPECDEC_OK;
    }
    uintptr_t base = ((uintptr_t)scratch + sizeof(double) - 1) & ~(uintptr_t)(sizeof(double) - 1);
    sd_row r;
    memset(&r, 0, sizeof r);
    r.sp = sp;
    r.V = n_vocab;
    r.w = (double *)base;
    r.idx = (int32_t *)(r.w + n_vocab);
    if (!row_weights(&r, logits, probs_out)) return SPECDEC_OK;
    const int topk_on = sd_rule_topk_on(sp->top_k, r.n), topp_on = sd_rule_topp_on(sp->top_p);
    r.h = r.n;
    if (topk_on || topp_on) heap_build(r.idx, r.n, r.w);
    if (topk_on) row_topk(&r);
    if (topp_on) row_topp(&r);
    row_finish(&r, probs_out);
    return SPECDEC_OK;
}
