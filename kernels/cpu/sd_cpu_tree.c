/* sd_cpu_tree.c — children candidates, the best-first pool and the finished tree
 * (see sd_cpu_tree.h). The verifier is in sd_cpu_tree_verify.c. */
#include "sd_cpu_tree.h"

#include <math.h>

#include "sd_sample_rules.h"

/* does (va, a) rank before (vb, b)? value descending, id ascending */
static int top_before(float va, int32_t a, float vb, int32_t b) { return va > vb || (va == vb && a < b); }

int32_t sd_tree_top_tokens(const float *x, int32_t n_vocab, float floor, int32_t k, int32_t skip, int32_t *out) {
    int32_t n = 0;
    if (!x || !out || k <= 0) return 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        const float v = x[i];
        if (!(v > floor) || i == skip) continue;
        if (n == k && !top_before(v, i, x[out[n - 1]], out[n - 1])) continue;
        int32_t j = n < k ? n++ : k - 1; /* insertion into the sorted list */
        while (j > 0 && top_before(v, i, x[out[j - 1]], out[j - 1])) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = i;
    }
    return n;
}

/* Mass of the Laplace kernel (centre u, scale s) on [lo, hi), each side computed from
 * the tails so that far intervals keep their relative precision; *gap = the distance
 * from u to the interval (0 when it holds u). */
static double match_kernel_mass(double lo, double hi, double u, double s, double *gap) {
    if (lo >= u) {
        *gap = lo - u;
        return 0.5 * (sd_rule_exp(-(lo - u) / s) - sd_rule_exp(-(hi - u) / s));
    }
    if (hi <= u) {
        *gap = u - hi;
        return 0.5 * (sd_rule_exp((hi - u) / s) - sd_rule_exp((lo - u) / s));
    }
    *gap = 0.0;
    return 1.0 - 0.5 * sd_rule_exp(-(hi - u) / s) - 0.5 * sd_rule_exp((lo - u) / s);
}

/* does (ma, ga, a) rank before (mb, gb, b)? mass descending, gap ascending, id ascending */
static int match_before(double ma, double ga, int32_t a, double mb, double gb, int32_t b) {
    return ma > mb || (ma == mb && (ga < gb || (ga == gb && a < b)));
}

int32_t sd_tree_match_children(const float *q, int32_t n_vocab, double u, double s0, int32_t k, int32_t *out,
                               double *est) {
    double mass[SPECDEC_MAX_TREE_NODES], gap[SPECDEC_MAX_TREE_NODES];
    sd_u128 total = 0, c = 0;
    int32_t n = 0;
    if (!q || !out || k <= 0 || n_vocab <= 0) return 0;
    if (k > SPECDEC_MAX_TREE_NODES) k = SPECDEC_MAX_TREE_NODES;
    int pos;
    for (int32_t i = 0; i < n_vocab; i++) total += sd_rule_prob_mass(q[i], &pos);
    if (total == 0) return 0;
    if (!(u >= 0.0)) u = 0.0; /* NaN too */
    if (u > 1.0) u = 1.0;
    double s = s0 * sqrt(u * (1.0 - u));
    if (!(s >= 1e-300)) s = 1e-300; /* u at an end: the kernel is a point */
    const double z = 1.0 - 0.5 * sd_rule_exp(-(1.0 - u) / s) - 0.5 * sd_rule_exp(-u / s);
    const double td = (double)total;
    for (int32_t i = 0; i < n_vocab; i++) {
        const uint64_t m = sd_rule_prob_mass(q[i], &pos);
        if (!pos) continue;
        const double lo = (double)c / td;
        c += m;
        double g;
        double v = match_kernel_mass(lo, (double)c / td, u, s, &g) / z;
        if (!(v <= 1.0)) v = v > 1.0 ? 1.0 : 0.0;
        if (n == k && !match_before(v, g, i, mass[n - 1], gap[n - 1], out[n - 1])) continue;
        int32_t j = n < k ? n++ : k - 1; /* insertion into the sorted list */
        while (j > 0 && match_before(v, g, i, mass[j - 1], gap[j - 1], out[j - 1])) {
            out[j] = out[j - 1];
            mass[j] = mass[j - 1];
            gap[j] = gap[j - 1];
            j--;
        }
        out[j] = i;
        mass[j] = v;
        gap[j] = g;
    }
    for (int32_t j = 0; est && j < n; j++) est[j] = mass[j];
    return n;
}

void sd_tree_pool_reset(sd_tree_pool *pl, int32_t root_token) {
    pl->n = 1;
    pl->token[0] = root_token;
    pl->parent[0] = -1;
    pl->depth[0] = 0;
    pl->score[0] = 1.0;
    pl->qrow[0] = -1;
    pl->drow[0] = -1;
    pl->child0[0] = 0;
    pl->n_child[0] = 0;
    pl->sampled[0] = 0;
    pl->chosen[0] = 1;
}

specdec_status sd_tree_pool_expand(sd_tree_pool *pl, int32_t e, int32_t qrow, int sampled, const int32_t *tokens,
                                   const double *qv, int32_t k) {
    if (e < 0 || e >= pl->n || k < 0 || k > SD_TREE_POOL_MAX - pl->n) return SPECDEC_ERR_INTERNAL;
    pl->qrow[e] = qrow;
    pl->sampled[e] = (uint8_t)(sampled != 0);
    pl->child0[e] = pl->n;
    pl->n_child[e] = k;
    double m = 1.0; /* min of the siblings' q so far: scores never increase along the siblings */
    for (int32_t i = 0; i < k; i++) {
        const int32_t c = pl->n++;
        const double v = qv[i] >= 0.0 ? qv[i] : 0.0; /* NaN -> 0 */
        if (v < m) m = v;
        pl->token[c] = tokens[i];
        pl->parent[c] = e;
        pl->depth[c] = pl->depth[e] + 1;
        pl->score[c] = pl->score[e] * m;
        pl->qrow[c] = -1;
        pl->drow[c] = -1;
        pl->child0[c] = 0;
        pl->n_child[c] = 0;
        pl->sampled[c] = 0;
        pl->chosen[c] = 0;
    }
    return SPECDEC_OK;
}

/* does entry a rank before entry b? score descending, index ascending */
static int pool_before(const sd_tree_pool *pl, int32_t a, int32_t b) {
    return pl->score[a] > pl->score[b] || (pl->score[a] == pl->score[b] && a < b);
}

int32_t sd_tree_pool_select(sd_tree_pool *pl, int32_t budget) {
    int32_t top[SPECDEC_MAX_TREE_NODES], n = 0;
    if (budget > SPECDEC_MAX_TREE_NODES) budget = SPECDEC_MAX_TREE_NODES;
    for (int32_t e = 1; e < pl->n; e++) {
        pl->chosen[e] = 0;
        if (budget <= 0 || (n == budget && !pool_before(pl, e, top[n - 1]))) continue;
        int32_t j = n < budget ? n++ : budget - 1;
        while (j > 0 && pool_before(pl, e, top[j - 1])) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = e;
    }
    for (int32_t i = 0; i < n; i++) pl->chosen[top[i]] = 1;
    return n;
}

void sd_tree_from_pool(const sd_tree_pool *pl, sd_tree *t, int32_t *map) {
    int32_t n = 0;
    /* pool order is breadth-first and chosen sets are closed under parent and earlier
     * sibling, so the chosen entries in pool order are the tree's nodes in order */
    for (int32_t e = 0; e < pl->n && n < SD_RUNNER_TREE_MAX; e++) {
        if (!pl->chosen[e]) continue;
        map[n] = e;
        t->token[n] = pl->token[e];
        t->depth[n] = pl->depth[e];
        t->parent[n] = -1;
        if (e > 0)
            for (int32_t i = n - 1; i >= 0; i--)
                if (map[i] == pl->parent[e]) {
                    t->parent[n] = i;
                    break;
                }
        t->child0[n] = 0;
        t->n_child[n] = 0;
        t->qrow[n] = pl->qrow[e];
        t->sampled[n] = pl->sampled[e];
        if (t->parent[n] >= 0) {
            const int32_t pa = t->parent[n];
            if (t->n_child[pa]++ == 0) t->child0[pa] = n;
        }
        n++;
    }
    t->n = n;
}
