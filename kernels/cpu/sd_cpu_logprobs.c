/* sd_cpu_logprobs.c — log_softmax of one row, the emitted token's value and rank, and the
 * top list (sd_cpu_logprobs.h).
 *
 * Three passes, each written as independent lanes so that the compiler vectorises it
 * without reassociating floating point (no -ffast-math: NaN and inf keep their meaning):
 *   1. m = the row's maximum (NaN skipped);
 *   2. sum of exp(x_i - m): exp by a float polynomial, summed in double lanes;
 *   3. the rank and the top list (two short passes), comparing RAW floats. lp_value is a monotone
 *      non-decreasing function of key(x) (x, NaN as -inf), so an id can be strictly above
 *      the token only if its raw value is above the largest raw value whose reported
 *      logprob equals the token's (found by bisection over floats), and can enter a full
 *      top list only if its raw value is above the list's last entry's; lp_value is
 *      computed only for those candidates. The results are the ones the definition gives
 *      (sd_cpu_logprobs.h), in a fixed order of operations: deterministic per row. */
#include "sd_cpu_logprobs.h"

#include <math.h>
#include <string.h>

#define LP_LANES 8   /* independent accumulators of a pass (vectorised by the compiler) */
#define LP_BLOCK 64  /* ids per block of the third pass */
#define LP_EXP_MIN (-87.0f) /* below: exp counted as 0 (e^-87 < 2^-125; the sum is >= 1) */

/* The exp pass dominates; on x86-64 it is also compiled for AVX2 and picked at load time
 * (GNU ifunc). Both versions give bitwise equal results: every lane is the same sequence
 * of IEEE operations (the lanes are explicit, ISO C mode contracts no FMA), only the
 * vector width differs. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define LP_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef LP_CLONES
#define LP_CLONES
#endif

/* The row's maximum, NaN skipped (-inf for a row without any non-NaN value). */
static float lp_max(const float *row, int32_t V) {
    float l[LP_LANES];
    for (int j = 0; j < LP_LANES; j++) l[j] = -INFINITY;
    int32_t i = 0;
    for (; i + LP_LANES <= V; i += LP_LANES)
        for (int j = 0; j < LP_LANES; j++) l[j] = row[i + j] > l[j] ? row[i + j] : l[j];
    for (; i < V; i++) l[0] = row[i] > l[0] ? row[i] : l[0];
    float m = l[0];
    for (int j = 1; j < LP_LANES; j++) m = l[j] > m ? l[j] : m;
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

/* sum_i exp(x_i - m) for a finite m: exp of a block in float, then the block summed in
 * double lanes (fixed order). */
LP_CLONES static double lp_sum_exp(const float *row, int32_t V, float m) {
    float e[LP_BLOCK];
    double l[LP_LANES] = {0};
    for (int32_t i = 0; i < V; i += LP_BLOCK) {
        const int32_t n = V - i < LP_BLOCK ? V - i : LP_BLOCK;
        for (int32_t j = 0; j < n; j++) e[j] = lp_exp(row[i + j] - m);
        for (int32_t j = n; j < LP_BLOCK; j++) e[j] = 0.0f;
        for (int32_t j = 0; j < LP_BLOCK; j += LP_LANES)
            for (int a = 0; a < LP_LANES; a++) l[a] += (double)e[j + a];
    }
    double s = 0.0;
    for (int j = 0; j < LP_LANES; j++) s += l[j];
    return s;
}

/* The row's log-normaliser split as (m, log_sum): lp_i = (x_i - m) - log_sum. With no
 * finite maximum, m = +inf (count: +inf entries) or -inf. */
static void lp_normaliser(const float *row, int32_t V, double *m_out, double *log_sum_out) {
    const float m = lp_max(row, V);
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

/* Floats in increasing order <-> int32 in increasing order (NaN excluded). */
static int32_t lp_ord(float x) {
    int32_t b;
    memcpy(&b, &x, sizeof b);
    return b >= 0 ? b : (int32_t)(INT32_MIN - b) - 1;
}
static float lp_unord(int32_t o) {
    const int32_t b = o >= 0 ? o : (int32_t)(INT32_MIN - (o + 1));
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* The largest float y >= key whose value is not above lt = lp_value(key): an id is
 * strictly above the token iff its raw value is > y (lp_value is monotone in x). */
static float lp_rank_bound(float key, float lt, double m, double log_sum) {
    int64_t lo = lp_ord(key), hi = lp_ord(INFINITY); /* the range spans up to 2^32 */
    if (!(lp_value(INFINITY, m, log_sum) > lt)) return INFINITY;
    while (hi - lo > 1) { /* invariant: value(lo) <= lt < value(hi) */
        const int64_t mid = lo + (hi - lo) / 2;
        if (lp_value(lp_unord((int32_t)mid), m, log_sum) > lt) hi = mid;
        else lo = mid;
    }
    return lp_unord((int32_t)lo);
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

/* The count of raw values above `bound` (NaN: not above). */
static int32_t lp_count_above(const float *row, int32_t V, float bound) {
    int32_t c[LP_LANES] = {0};
    int32_t i = 0;
    for (; i + LP_LANES <= V; i += LP_LANES)
        for (int j = 0; j < LP_LANES; j++) c[j] += row[i + j] > bound;
    for (; i < V; i++) c[0] += row[i] > bound;
    int32_t n = 0;
    for (int j = 0; j < LP_LANES; j++) n += c[j];
    return n;
}

/* The top list over the row: a block whose maximum is not above a full list's last key
 * cannot enter it and is skipped. */
static void lp_top_row(const float *row, int32_t V, lp_top *t, double m, double log_sum) {
    if (t->n_top == 0) return;
    for (int32_t i = 0; i < V; i += LP_BLOCK) {
        const int32_t e = V - i < LP_BLOCK ? V : i + LP_BLOCK;
        if (t->k < t->n_top || lp_max(row + i, e - i) > t->key[t->k - 1]) lp_top_scan(t, row, i, e, m, log_sum);
    }
}

void sd_cpu_logprobs(const float *row, int32_t n_vocab, int32_t token, int32_t n_top, sd_logprob *out) {
    const int32_t V = n_vocab;
    if (n_top > SPECDEC_MAX_TOP_LOGPROBS) n_top = SPECDEC_MAX_TOP_LOGPROBS;
    if (n_top > V) n_top = V;
    if (n_top < 0) n_top = 0;
    double m, log_sum;
    lp_normaliser(row, V, &m, &log_sum);
    const float lt = lp_value(row[token], m, log_sum);
    const float key = row[token] >= -INFINITY ? row[token] : -INFINITY;
    const float bound = lp_rank_bound(key, lt, m, log_sum);
    lp_top t = {.out = out, .n_top = n_top, .k = 0};
    const int32_t above = lp_count_above(row, V, bound);
    lp_top_row(row, V, &t, m, log_sum);
    out->token = token;
    out->logprob = lt;
    out->rank = 1 + above;
    out->n_top = t.k;
}
