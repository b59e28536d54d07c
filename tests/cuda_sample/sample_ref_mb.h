/* sample_ref_mb.h — host emulation of the MULTI-BLOCK sampling / verify kernels
 * (kernels/cuda/sd_cuda_verify_mb.cu) for any block count nb: for every stage it
 * computes, chunk by chunk (sd_mb_chunk), exactly the partial results the blocks of a
 * row compute — chunk max keys, chunk argmaxes, chunk fixed-point sums and counts, chunk
 * radix histograms (count, 128-bit mass, largest key per bucket) per pass, chunk tie
 * counts, chunk inverse-CDF / residual masses with their last present element — and
 * then the combine step every block performs after the row barrier (key max, integer
 * sums, the bucket pick, the crossing-chunk search). Header-only, plain C, tests only.
 * tests/cuda_sample/test_sample_ref_mb.c checks it against the CPU reference
 * (kernels/cpu: heap ranking, sequential scans) bit for bit.
 *
 * srm_mutant selects a deliberately broken variant (compiled into the test only) that
 * the test must catch: SRM_FLOAT_SUM (chunk normalisers summed in float instead of
 * fixed point), SRM_RADIX_SHIFT (pass 1 of the radix select reads its digit one bit too
 * high), SRM_CROSS_BASE (the crossing chunk searches from 0 instead of the prefix of the
 * chunks before it).
 *
 * Workspace emulation (sample_ref_ws.h, issue 24 (a)): when srm_ws points at a row's
 * records inside an emulated workspace, the model keeps the kernels' cross-launch state
 * there exactly as they do — the barrier records (every barrier checks the arrival
 * counter holds what a clean launch leaves, gen * nb, else the barrier would pass
 * early or hang: srm_ws->fault), the published partials (two slots by barrier parity),
 * the radix histograms (added into the row's slot sd_mb_hbuf(pass), never cleared
 * before a pass; zeroed at the kernel's start when it may select and after the first
 * barrier that follows their last read) and the exit reset. Stale bytes of an earlier
 * launch then change the picks or trip a barrier, as on the device. */
#ifndef SAMPLE_REF_MB_H
#define SAMPLE_REF_MB_H

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sd_cuda_mb.h"
#include "sd_sample_rules.h"
#include "specdec.h"

enum { SRM_NONE, SRM_FLOAT_SUM, SRM_RADIX_SHIFT, SRM_CROSS_BASE, SRM_NMUT };
static int srm_mutant = SRM_NONE;

typedef struct { double w; int32_t id; } srm_cut; /* as RowCut: prefix of the rank order */
static inline srm_cut srm_cut_all(void) { srm_cut c = {0.0, INT_MAX}; return c; }
static inline int srm_in_cut(srm_cut c, double w, int32_t i) { return !sd_rule_ranks_before(c.w, c.id, w, i); }

/* --- the row's records in an emulated workspace (NULL: none, a private histogram) --- */
typedef struct srm_ws_row {
    sd_mb_ctrl *ctrl;  /* the row's barrier record */
    sd_mb_part *parts; /* [2][SD_MB_MAX_BLOCKS] */
    sd_mb_hist *hist;  /* [SD_MB_HBUFS] */
    int32_t nb;
    unsigned gen;      /* barriers passed */
    int pass, pending; /* radix passes so far; slot to zero at the next barrier (-1: none) */
    int no_clear;      /* mutant: the kernel's start-of-launch histogram zeroing left out */
    int fault;         /* a barrier counter held a value no clean launch leaves */
} srm_ws_row;
static srm_ws_row *srm_ws = NULL;

static inline void srm_ws_begin(const sd_sampling_params *sp) { /* mb_process's first lines */
    if (srm_ws && !srm_ws->no_clear && sd_mb_may_select(sp)) memset(srm_ws->hist, 0, SD_MB_HBUFS * sizeof(sd_mb_hist));
}

/* mb_sync: nb arrivals on the row's counter (nb > 1), then the pending slot zeroed. */
static inline void srm_bar(void) {
    srm_ws_row *R = srm_ws;
    if (!R) return;
    R->gen++;
    if (R->nb > 1) {
        if (R->ctrl->bar != (R->gen - 1u) * (unsigned)R->nb) R->fault = 1;
        R->ctrl->bar += (unsigned)R->nb;
    }
    if (R->pending >= 0) memset(&R->hist[R->pending], 0, sizeof(sd_mb_hist));
    R->pending = -1;
}

/* mb_publish: every block writes its partial into the parity slot, then the barrier.
 * (The values are the kernels' placeholders; the bytes land where the kernels put theirs.) */
static inline void srm_publish(void) {
    srm_ws_row *R = srm_ws;
    if (!R) return;
    sd_mb_part *slot = R->parts + (size_t)(R->gen & 1u) * SD_MB_MAX_BLOCKS;
    for (int32_t j = 0; j < R->nb; j++) {
        memset(&slot[j], 0, sizeof slot[j]);
        slot[j].a_last = slot[j].b_last = -1;
        slot[j].fv = -INFINITY;
        slot[j].fi = INT_MAX;
    }
    srm_bar();
}

/* mb_exit: the block whose exit count reaches nb - 1 resets the record. */
static inline void srm_exit(void) {
    srm_ws_row *R = srm_ws;
    if (!R || R->nb <= 1) return;
    for (int32_t j = 0; j < R->nb; j++)
        if (R->ctrl->exitc++ == (unsigned)R->nb - 1u) R->ctrl->bar = 0, R->ctrl->exitc = 0;
}

/* --- stage A: max logit / greedy argmax ------------------------------------------- */
static inline float srm_max(const float *l, int32_t V, int32_t nb) {
    uint32_t row = sd_mb_fkey(-INFINITY);
    for (int32_t j = 0; j < nb; j++) {
        int32_t lo, hi;
        sd_mb_chunk(V, nb, j, &lo, &hi);
        uint32_t k = sd_mb_fkey(-INFINITY); /* chunk partial */
        for (int32_t i = lo; i < hi; i++) k = sd_mb_fkey(l[i]) > k ? sd_mb_fkey(l[i]) : k;
        if (k > row) row = k;
    }
    return sd_mb_fkey_value(row);
}

static inline int32_t srm_argmax(const float *x, int32_t V, int32_t nb) {
    float bv = -INFINITY;
    int32_t bi = INT_MAX;
    for (int32_t j = 0; j < nb; j++) {
        int32_t lo, hi;
        sd_mb_chunk(V, nb, j, &lo, &hi);
        float cv = -INFINITY;
        int32_t ci = INT_MAX;
        for (int32_t i = lo; i < hi; i++)
            if (sd_rule_argmax_better(x[i], i, cv, ci)) cv = x[i], ci = i;
        if (sd_rule_argmax_better(cv, ci, bv, bi)) bv = cv, bi = ci;
    }
    return bi == INT_MAX ? 0 : bi;
}

/* Fixed-point sum of the w kept by (ck, cp, min_p) — or all candidates — by chunks. */
static inline sd_u128 srm_sum(const double *w, int32_t V, int32_t nb, const srm_cut *ck, const srm_cut *cp,
                              float min_p) {
    sd_u128 S = 0;
    float fs = 0.0f;
    for (int32_t j = 0; j < nb; j++) {
        int32_t lo, hi;
        sd_mb_chunk(V, nb, j, &lo, &hi);
        sd_u128 part = 0;
        float fpart = 0.0f; /* the mutant: a float accumulation */
        for (int32_t i = lo; i < hi; i++) {
            const double wi = w[i];
            if (!(wi > 0.0) || (ck && !srm_in_cut(*ck, wi, i)) || (cp && !srm_in_cut(*cp, wi, i)) ||
                !sd_rule_minp_keep(wi, min_p))
                continue;
            part += sd_rule_fix(wi);
            fpart += (float)wi;
        }
        S += part;
        fs += fpart;
    }
    if (srm_mutant == SRM_FLOAT_SUM) return (sd_u128)((long double)fs * 0x1p62L);
    return S;
}

/* --- radix select -------------------------------------------------------------------- */
static inline int srm_digit_shift(int lv) {
    return sd_mb_level_shift(lv) + (srm_mutant == SRM_RADIX_SHIFT && lv == 1);
}

/* One pass: every chunk's histogram, added into h (as the kernels: counts and largest
 * keys always, the 128-bit mass only when selecting by mass). */
static inline void srm_hist_pass(const double *w, int32_t V, int32_t nb, srm_cut prev, int by_count, uint64_t prefix,
                                 int lv, sd_mb_hist *h) {
    const int sft = srm_digit_shift(lv), bits = sd_mb_level_bits(lv);
    static sd_mb_hist part; /* one chunk's histogram (tests are single-threaded) */
    for (int32_t j = 0; j < nb; j++) {
        int32_t lo, hi;
        sd_mb_chunk(V, nb, j, &lo, &hi);
        int touched = 0;
        for (int32_t i = lo; i < hi; i++) {
            const double wi = w[i];
            const uint64_t key = sd_rule_key(wi);
            if (!(wi > 0.0) || !srm_in_cut(prev, wi, i) || (key >> (sd_mb_level_shift(lv) + bits)) != prefix) continue;
            const unsigned b = (unsigned)(key >> sft) & ((1u << bits) - 1u);
            if (!touched) memset(&part, 0, sizeof part), touched = 1;
            part.cnt[b]++;
            if (key > part.key[b]) part.key[b] = key;
            if (by_count) continue;
            const uint64_t m = sd_rule_fix(wi), old = part.lo[b];
            part.lo[b] += m;
            part.hi[b] += part.lo[b] < old;
        }
        for (int b = 0; touched && b < (1 << bits); b++) {
            if (part.cnt[b] == 0) continue;
            h->cnt[b] += part.cnt[b];
            if (part.key[b] > h->key[b]) h->key[b] = part.key[b];
            if (by_count) continue;
            const uint64_t old = h->lo[b];
            h->lo[b] += part.lo[b];
            h->hi[b] += part.hi[b] + (h->lo[b] < old);
        }
    }
}

/* Bucket b's measure: its count (top-k) or its 128-bit mass (top-p). */
static inline sd_u128 srm_hist_meas(const sd_mb_hist *h, int b, int by_count) {
    return by_count ? (sd_u128)h->cnt[b] : ((sd_u128)h->hi[b] << 64) | h->lo[b];
}

/* Ties after 63 bits: the keep-th tie (by id) of key K inside prev, by chunk counts. */
static inline int32_t srm_tie_id(const double *w, int32_t V, int32_t nb, srm_cut prev, uint64_t K, uint32_t keep) {
    uint32_t base = 0;
    for (int32_t j = 0; j < nb; j++) {
        int32_t lo, hi;
        sd_mb_chunk(V, nb, j, &lo, &hi);
        uint32_t c = 0;
        for (int32_t i = lo; i < hi; i++) c += w[i] > 0.0 && sd_rule_key(w[i]) == K && srm_in_cut(prev, w[i], i);
        if (base + c >= keep) { /* the crossing chunk */
            for (int32_t i = lo; i < hi; i++)
                if (w[i] > 0.0 && sd_rule_key(w[i]) == K && srm_in_cut(prev, w[i], i) && ++base == keep) return i;
        }
        base += c;
    }
    return INT_MAX; /* unreachable: keep <= number of ties */
}

static inline srm_cut srm_select(const double *w, int32_t V, int32_t nb, srm_cut prev, int by_count, sd_u128 thr) {
    static sd_mb_hist own; /* without a workspace: a fresh histogram per pass */
    uint64_t prefix = 0;
    sd_u128 above = 0;
    uint32_t count = 0;
    for (int lv = 0; lv < SD_MB_LEVELS; lv++) {
        const int bits = sd_mb_level_bits(lv);
        sd_mb_hist *h = &own;
        if (srm_ws) h = &srm_ws->hist[sd_mb_hbuf(srm_ws->pass)];
        else memset(h, 0, sizeof *h);
        srm_hist_pass(w, V, nb, prev, by_count, prefix, lv, h);
        srm_bar();
        int found = -1;
        sd_u128 a = above, fa = 0;
        for (int b = (1 << bits) - 1; b >= 0; b--) { /* the pick every block makes */
            if (h->cnt[b] == 0) continue;
            if (!(a < thr)) break;
            found = b, fa = a;
            a += srm_hist_meas(h, b, by_count);
        }
        const uint64_t fkey = found >= 0 ? h->key[found] : 0;
        const uint32_t fcnt = found >= 0 ? h->cnt[found] : 0;
        if (srm_ws) srm_ws->pending = sd_mb_hbuf(srm_ws->pass++);
        if (found < 0) return prev;
        prefix = (prefix << bits) | (uint64_t)found;
        above = fa;
        count = fcnt;
        if (count == 1) {
            srm_cut c = {sd_mb_key_value(fkey), INT_MAX};
            return c;
        }
    }
    const double wk = sd_mb_key_value(prefix);
    const uint32_t keep = sd_mb_tie_keep(thr - above, by_count ? 1u : sd_rule_fix(wk), count);
    srm_cut c = {wk, INT_MAX};
    if (keep < count) {
        c.id = srm_tie_id(w, V, nb, prev, prefix, keep);
        srm_publish(); /* mb_tie_id: the chunk counts, then the broadcast barrier */
        srm_bar();
    }
    return c;
}

/* --- the whole row ------------------------------------------------------------------- */
/* logits -> probs with nb blocks (w: V doubles of scratch). Returns the argmax of probs. */
static inline int32_t srm_process(const float *l, int32_t V, const sd_sampling_params *sp, int32_t nb, double *w,
                                  float *probs) {
    srm_ws_begin(sp);
    if (sp->temperature == 0.0f) {
        const int32_t a = srm_argmax(l, V, nb);
        srm_publish();
        for (int32_t i = 0; i < V; i++) probs[i] = i == a ? 1.0f : 0.0f;
        return a;
    }
    const double T = (double)sp->temperature, m = sd_rule_scale(srm_max(l, V, nb), T);
    srm_publish();
    if (m == -INFINITY) {
        for (int32_t i = 0; i < V; i++) probs[i] = i == 0 ? 1.0f : 0.0f;
        return 0;
    }
    sd_u128 ncand = 0;
    for (int32_t i = 0; i < V; i++) {
        w[i] = sd_rule_weight(l[i], T, m);
        ncand += w[i] > 0.0;
    }
    const sd_u128 s0 = srm_sum(w, V, nb, NULL, NULL, 0.0f);
    srm_publish();
    srm_cut ck = srm_cut_all(), cp = srm_cut_all();
    const int topk = sd_rule_topk_on(sp->top_k, (int64_t)ncand), topp = sd_rule_topp_on(sp->top_p);
    if (topk) ck = srm_select(w, V, nb, srm_cut_all(), 1, (sd_u128)(unsigned)sp->top_k);
    if (topp) {
        const sd_u128 S = topk ? srm_sum(w, V, nb, &ck, NULL, 0.0f) : s0;
        if (topk) srm_publish();
        cp = srm_select(w, V, nb, ck, 0, sd_rule_topp_threshold(sp->top_p, S));
    }
    const int cut = topk || topp || sd_rule_minp_on(sp->min_p);
    const sd_u128 S = cut ? srm_sum(w, V, nb, &ck, &cp, sp->min_p) : s0;
    if (cut) srm_publish();
    for (int32_t i = 0; i < V; i++) {
        const double wi = w[i];
        const int kept = wi > 0.0 && srm_in_cut(ck, wi, i) && srm_in_cut(cp, wi, i) && sd_rule_minp_keep(wi, sp->min_p);
        probs[i] = kept ? sd_rule_norm(wi, S) : 0.0f;
    }
    return srm_argmax(probs, V, nb);
}

/* --- prefix search by chunks ----------------------------------------------------------- */
/* Measure of element i: q == NULL -> sd_rule_prob_mass(p_i), else sd_rule_residual. */
static inline uint64_t srm_meas(const float *p, const float *q, int32_t i, int *pos) {
    return q ? sd_rule_residual(p[i], q[i], pos) : sd_rule_prob_mass(p[i], pos);
}

/* Every chunk's (sum, last present); the total in *tot, the row's last present in *last. */
static inline void srm_parts(const float *p, const float *q, int32_t V, int32_t nb, sd_u128 *part, sd_u128 *tot,
                             int32_t *last) {
    *tot = 0;
    *last = -1;
    for (int32_t j = 0; j < nb; j++) {
        int32_t lo, hi;
        sd_mb_chunk(V, nb, j, &lo, &hi);
        part[j] = 0;
        for (int32_t i = lo; i < hi; i++) {
            int pos = 0;
            part[j] += srm_meas(p, q, i, &pos);
            if (pos) *last = i;
        }
        *tot += part[j];
    }
}

/* First present i whose inclusive prefix reaches target (0 -> 1); the crossing chunk
 * searches itself from the prefix of the chunks before it. Short: the last present. */
static inline int32_t srm_cross(const float *p, const float *q, int32_t V, int32_t nb, sd_u128 target) {
    sd_u128 part[SD_MB_MAX_BLOCKS], tot, base = 0;
    int32_t last;
    srm_parts(p, q, V, nb, part, &tot, &last);
    if (target == 0) target = 1;
    for (int32_t j = 0; j < nb; j++) {
        if (base + part[j] >= target) {
            int32_t lo, hi;
            sd_mb_chunk(V, nb, j, &lo, &hi);
            sd_u128 c = srm_mutant == SRM_CROSS_BASE ? 0 : base;
            for (int32_t i = lo; i < hi; i++) {
                int pos = 0;
                c += srm_meas(p, q, i, &pos);
                if (pos && c >= target) return i;
            }
            break; /* cannot happen (defensive, as the kernel) */
        }
        base += part[j];
    }
    return last >= 0 ? last : 0;
}

static inline int32_t srm_sample(const float *p, int32_t V, int32_t nb, uint32_t x) {
    return srm_cross(p, NULL, V, nb, sd_rule_cdf_target(x));
}

static inline int32_t srm_residual(const float *p, const float *q, int32_t V, int32_t nb, uint32_t x) {
    sd_u128 part[SD_MB_MAX_BLOCKS], D;
    int32_t last;
    srm_parts(p, q, V, nb, part, &D, &last);
    if (D == 0) return srm_sample(p, V, nb, x);
    return srm_cross(p, q, V, nb, sd_rule_scaled_target(x, D));
}

/* One row's outcome, as the kernel's blocks write it: (token, accepted). */
static inline void srm_row_outcome(specdec_verify_mode mode, int32_t r, int32_t g, int32_t V, int32_t nb,
                                   const float *p, int32_t am, const float *q, int32_t x, uint32_t wacc,
                                   uint32_t wsmp, int32_t *tok, int *acc) {
    srm_publish(); /* mb_outcome_parts: the chunk masses and argmaxes */
    *acc = 0;
    if (mode == SPECDEC_VERIFY_GREEDY) *tok = am;
    else if (mode == SPECDEC_VERIFY_MATCH || r == g) *tok = srm_sample(p, V, nb, wsmp);
    else {
        if (x >= 0 && x < V) *acc = sd_rule_accept(sd_rule_word_to_u(wacc), p[x], q[x]);
        *tok = srm_residual(p, q, V, nb, wsmp);
    }
}

/* The verifier from target LOGITS (rows processed with nb blocks into P) and the
 * processed draft rows Q; then the chain (the second kernel). Returns n. */
static inline int32_t srm_verify(specdec_verify_mode mode, int32_t g, int32_t V, int32_t nb, const float *L,
                                 const sd_sampling_params *sp, const float *Q, const int32_t *draft,
                                 const uint32_t *wacc, const uint32_t *wsmp, double *w, float *P, int32_t *out) {
    int32_t tok[SPECDEC_MAX_DRAFT + 1];
    int acc[SPECDEC_MAX_DRAFT + 1];
    for (int32_t r = 0; r <= g; r++) {
        float *p = P + (size_t)r * V;
        const int32_t am = srm_process(L + (size_t)r * V, V, sp, nb, w, p);
        srm_row_outcome(mode, r, g, V, nb, p, am, r < g ? Q + (size_t)r * V : NULL, r < g ? draft[r] : -1,
                        r < g ? wacc[r] : 0u, wsmp[r], &tok[r], &acc[r]);
    }
    int32_t n = 0;
    if (mode == SPECDEC_VERIFY_REJECTION)
        while (n < g && acc[n]) n++;
    else
        while (n < g && draft[n] == tok[n]) n++;
    for (int32_t i = 0; i < n; i++) out[i] = draft[i];
    out[n] = tok[n];
    return n;
}

/* The draft step: q = process(logits) with nb blocks, then the token (word x used
 * unless mode is GREEDY). */
static inline int32_t srm_draft(specdec_verify_mode mode, const float *l, int32_t V, const sd_sampling_params *sp,
                                int32_t nb, uint32_t x, double *w, float *q) {
    const int32_t am = srm_process(l, V, sp, nb, w, q);
    srm_publish(); /* mb_outcome_parts */
    return sd_rule_draft_purpose(mode) >= 0 ? srm_sample(q, V, nb, x) : am;
}

#endif
