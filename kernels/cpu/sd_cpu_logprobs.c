/* sd_cpu_logprobs.c — log_softmax of one row, the emitted token's value and rank, and the
 * top list (sd_cpu_logprobs.h).
 *
 * Passes written as independent lanes, so that the compiler vectorises them without
 * reassociating floating point (no -ffast-math: NaN and inf keep their meaning):
 *   1. the maximum of each block of ids (NaN skipped), and so the row's maximum m;
 *   2. sum of exp(x_i - m): exp by a float polynomial, summed in double lanes;
 *   3. the rank and the top list, on RAW floats. lp_value is a monotone non-decreasing
 *      function of key(x) (x, NaN as -inf), so
 *      - an id is strictly above the token iff its raw value is above the largest float
 *        whose value is not above the token's (found by bisection over floats): a count
 *        of raw compares, blocks whose maximum is not above it skipped;
 *      - an id whose value is below the n-th largest block maximum's cannot be in the top
 *        n (n other ids are strictly above it): only blocks above that raw bound are
 *        scanned, in id order, and in them lp_value is computed only for ids above the
 *        full list's last raw key (the insertion rule is the definition's).
 * The results are the ones the definition gives (sd_cpu_logprobs.h), in a fixed order of
 * operations: deterministic per row. */
#include "sd_cpu_logprobs.h"

#include <math.h>
#include <string.h>

#include "sd_cpu_clones.h"

#define LP_LANES 8           /* independent accumulators of a pass (vectorised by the compiler) */
#define LP_MAX_BLOCKS 2048   /* block maxima kept on the stack (8 KiB) */
#define LP_EXP_BLOCK 64      /* ids per block of the exp pass */
#define LP_EXP_MIN (-87.0f)  /* below: exp counted as 0 (e^-87 < 2^-125; the sum is >= 1) */

/* The exp pass dominates; on x86-64 it is also compiled for AVX2 and picked at load time
 * (kernels/cpu/sd_cpu_clones.h). Both versions give bitwise equal results: every lane is the
 * same sequence of IEEE operations (the lanes are explicit, ISO C mode contracts no FMA),
 * only the vector width differs. */
#define LP_CLONES SD_CPU_CLONES_AVX2

/* The row cut into blocks of `bs` ids (a multiple of LP_LANES; the last one shorter) and
 * each block's maximum, NaN skipped (-inf for a block without any non-NaN value). Small
 * blocks keep the top list's scans short; at most LP_MAX_BLOCKS of them. */
typedef struct lp_blocks {
    int32_t bs, n;
    float max[LP_MAX_BLOCKS];
} lp_blocks;

static float lp_max_n(const float *x, int32_t n) {
    float l[LP_LANES];
    for (int j = 0; j < LP_LANES; j++) l[j] = -INFINITY;
    int32_t i = 0;
    for (; i + LP_LANES <= n; i += LP_LANES)
        for (int j = 0; j < LP_LANES; j++) l[j] = x[i + j] > l[j] ? x[i + j] : l[j];
    for (; i < n; i++) l[0] = x[i] > l[0] ? x[i] : l[0];
    float m = l[0];
    for (int j = 1; j < LP_LANES; j++) m = l[j] > m ? l[j] : m;
    return m;
}

/* Pass 1: the block maxima; returns the row's maximum. */
static float lp_block_maxima(const float *row, int32_t V, lp_blocks *b) {
    int32_t bs = 16; /* 16 ids (two lane groups) at most V = 32768; doubled above */
    while ((V + bs - 1) / bs > LP_MAX_BLOCKS) bs *= 2;
    b->bs = bs;
    b->n = (V + bs - 1) / bs;
    float m = -INFINITY;
    for (int32_t k = 0; k < b->n; k++) {
        const int32_t i = k * bs, n = V - i < bs ? V - i : bs;
        b->max[k] = lp_max_n(row + i, n);
        m = b->max[k] > m ? b->max[k] : m;
    }
    return m;
}

/* exp(d) for d <= 0, relative error about 1e-7 (Cody-Waite reduction by ln 2, then the
 * Cephes degree-5 minimax polynomial of expf); d below LP_EXP_MIN, -inf and NaN give 0. */
static inline float lp_exp(float d) {
    const float dc = d > LP_EXP_MIN ? d : LP_EXP_MIN;
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const float n = (dc * 1.44269504088896341f + magic) - magic;
    const float r = (dc - n * 0.693359375f) - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23; /* 2^n, n in [-126, 0] */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale * (float)(d > LP_EXP_MIN); /* a product, not a branch: vectorises */
}

/* Pass 2: sum_i exp(x_i - m) for a finite m: exp of a block in float, then the block
 * summed in double lanes (fixed order). */
LP_CLONES static double lp_sum_exp(const float *row, int32_t V, float m) {
    float e[LP_EXP_BLOCK];
    double l[LP_LANES] = {0};
    for (int32_t i = 0; i < V; i += LP_EXP_BLOCK) {
        const int32_t n = V - i < LP_EXP_BLOCK ? V - i : LP_EXP_BLOCK;
        for (int32_t j = 0; j < n; j++) e[j] = lp_exp(row[i + j] - m);
        for (int32_t j = n; j < LP_EXP_BLOCK; j++) e[j] = 0.0f;
        for (int32_t j = 0; j < LP_EXP_BLOCK; j += LP_LANES)
            for (int a = 0; a < LP_LANES; a++) l[a] += (double)e[j + a];
    }
    double s = 0.0;
    for (int j = 0; j < LP_LANES; j++) s += l[j];
    return s;
}

/* The row's log-normaliser split as (m, log_sum): lp_i = (x_i - m) - log_sum. With no
 * finite maximum, m = +inf (count: +inf entries) or -inf. */
static void lp_normaliser(const float *row, int32_t V, lp_blocks *b, double *m_out, double *log_sum_out) {
    const float m = lp_block_maxima(row, V, b);
    *m_out = (double)m;
    if (isinf(m)) {
        int64_t n_inf = 0;
        for (int32_t i = 0; i < V; i++) n_inf += row[i] == m;
        *log_sum_out = m > 0 ? log((double)n_inf) : 0.0;
        return;
    }
    *log_sum_out = log(lp_sum_exp(row, V, m));
}

static float lp_value(float x, double m, double log_sum) {
    if (isinf(m)) return m > 0 && x == (float)m ? (float)-log_sum : -INFINITY;
    if (!(x >= -INFINITY)) return -INFINITY; /* NaN */
    return (float)(((double)x - m) - log_sum);
}

/* Floats in increasing order <-> integers in increasing order (NaN excluded). */
static int64_t lp_ord(float x) {
    int32_t b;
    memcpy(&b, &x, sizeof b);
    return b >= 0 ? b : (int64_t)INT32_MIN - b - 1;
}
static float lp_unord(int64_t o) {
    const int32_t b = (int32_t)(o >= 0 ? o : (int64_t)INT32_MIN - (o + 1));
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* The last float y in [lo, hi] with value(y) <= v, given value(lo) <= v (lp_value is
 * monotone); bisection over the floats' order. */
static float lp_last_at_most(float lo_f, float hi_f, float v, double m, double log_sum) {
    int64_t lo = lp_ord(lo_f), hi = lp_ord(hi_f);
    if (!(lp_value(hi_f, m, log_sum) > v)) return hi_f;
    while (hi - lo > 1) { /* invariant: value(lo) <= v < value(hi) */
        const int64_t mid = lo + (hi - lo) / 2;
        if (lp_value(lp_unord(mid), m, log_sum) > v) hi = mid;
        else lo = mid;
    }
    return lp_unord(lo);
}

/* The count of raw values above `bound` (NaN: not above); blocks whose maximum is not
 * above it hold none. */
static int32_t lp_count_above(const float *row, int32_t V, const lp_blocks *b, float bound) {
    int32_t c[LP_LANES] = {0};
    for (int32_t k = 0; k < b->n; k++) {
        if (!(b->max[k] > bound)) continue;
        const int32_t i0 = k * b->bs, e = V - i0 < b->bs ? V : i0 + b->bs;
        int32_t i = i0;
        for (; i + LP_LANES <= e; i += LP_LANES)
            for (int j = 0; j < LP_LANES; j++) c[j] += row[i + j] > bound;
        for (; i < e; i++) c[0] += row[i] > bound;
    }
    int32_t n = 0;
    for (int j = 0; j < LP_LANES; j++) n += c[j];
    return n;
}

/* The top list state: values and ids as reported, and each entry's raw key. */
typedef struct lp_top {
    sd_logprob *out;
    int32_t n_top, k;
    float key[SPECDEC_MAX_TOP_LOGPROBS];
} lp_top;

/* Insert id i (value v, key x) after every entry >= v: equal values keep id order. */
static void lp_top_insert(lp_top *t, int32_t i, float v, float x) {
    sd_logprob *o = t->out;
    if (t->k == t->n_top && !(v > o->top_logprobs[t->k - 1])) return;
    int32_t j = t->k < t->n_top ? t->k++ : t->k - 1;
    while (j > 0 && v > o->top_logprobs[j - 1]) {
        o->top_logprobs[j] = o->top_logprobs[j - 1];
        o->top_tokens[j] = o->top_tokens[j - 1];
        t->key[j] = t->key[j - 1];
        j--;
    }
    o->top_logprobs[j] = v;
    o->top_tokens[j] = i;
    t->key[j] = x;
}

/* Ids [b, e) into the top list: a full list's last key filters them on raw values first. */
static void lp_top_scan(lp_top *t, const float *row, int32_t b, int32_t e, double m, double log_sum) {
    for (int32_t i = b; i < e; i++) {
        const float x = row[i] >= -INFINITY ? row[i] : -INFINITY; /* NaN as -inf */
        if (t->k == t->n_top && !(x > t->key[t->k - 1])) continue;
        lp_top_insert(t, i, lp_value(row[i], m, log_sum), x);
    }
}

/* A raw bound below which no id is in the top n: the n-th largest block maximum B has
 * n ids (one per block) at or above it, so an id whose value is strictly below value(B)
 * is out; those are the raw values <= the returned float (NaN: nothing is skipped). */
static float lp_top_skip_bound(const lp_blocks *b, int32_t n, double m, double log_sum) {
    if (n > b->n) return NAN;
    float best[SPECDEC_MAX_TOP_LOGPROBS]; /* the n largest block maxima, descending */
    int32_t k = 0;
    for (int32_t i = 0; i < b->n; i++) {
        const float x = b->max[i];
        if (k == n && !(x > best[n - 1])) continue;
        int32_t j = k < n ? k++ : n - 1;
        for (; j > 0 && x > best[j - 1]; j--) best[j] = best[j - 1];
        best[j] = x;
    }
    const float vb = lp_value(best[n - 1], m, log_sum);
    if (!(lp_value(-INFINITY, m, log_sum) < vb)) return NAN;
    /* the last float whose value is below vb: the last whose value is <= the float before it */
    return lp_last_at_most(-INFINITY, best[n - 1], nextafterf(vb, -INFINITY), m, log_sum);
}

/* The top list: blocks that may hold an entry, in id order. */
static void lp_top_row(const float *row, int32_t V, const lp_blocks *b, lp_top *t, double m, double log_sum) {
    if (t->n_top == 0) return;
    const float skip = lp_top_skip_bound(b, t->n_top, m, log_sum);
    for (int32_t k = 0; k < b->n; k++) {
        if (b->max[k] <= skip) continue; /* NaN skip: no block skipped */
        if (t->k == t->n_top && !(b->max[k] > t->key[t->k - 1])) continue;
        const int32_t i = k * b->bs;
        lp_top_scan(t, row, i, V - i < b->bs ? V : i + b->bs, m, log_sum);
    }
}

void sd_cpu_logprobs(const float *row, int32_t n_vocab, int32_t token, int32_t n_top, sd_logprob *out) {
    const int32_t V = n_vocab;
    if (n_top > SPECDEC_MAX_TOP_LOGPROBS) n_top = SPECDEC_MAX_TOP_LOGPROBS;
    if (n_top > V) n_top = V;
    if (n_top < 0) n_top = 0;
    lp_blocks b;
    double m, log_sum;
    lp_normaliser(row, V, &b, &m, &log_sum);
    const float lt = lp_value(row[token], m, log_sum);
    const float key = row[token] >= -INFINITY ? row[token] : -INFINITY;
    const float bound = lp_last_at_most(key, INFINITY, lt, m, log_sum);
    lp_top t = {.out = out, .n_top = n_top, .k = 0};
    out->n_top = 0;
    out->token = token;
    out->logprob = lt;
    out->rank = 1 + lp_count_above(row, V, &b, bound);
    lp_top_row(row, V, &b, &t, m, log_sum);
    out->n_top = t.k;
}
