/* test_tree_verify.c — the tree kernels (kernels/cpu/sd_cpu_tree.h) in isolation:
 *  - sd_tree_top_tokens equals a brute-force sort (value desc, id asc, > floor, skip);
 *  - a chain-shaped tree (one sampled child per node) verifies exactly as the chain
 *    verifier sd_verify, decision for decision, in REJECTION, GREEDY and MATCH, over
 *    random rows and injected uniforms (20000 rounds per mode);
 *  - hand-made trees: MATCH/GREEDY descend into the child equal to the target's token
 *    whatever its rank; REJECTION descends into a deterministic child exactly when the
 *    residual's sample is that child;
 *  - the best-first selection is closed under parent and earlier sibling and makes a
 *    well-formed breadth-first tree with contiguous children (random pools);
 *  - malformed trees are refused with INVALID_ARGUMENT and the outputs untouched. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sd_cpu_sample.h"
#include "sd_cpu_tree.h"
#include "sd_cpu_verify.h"
#include "sd_test.h"
#include "sd_test_util.h"

#define V 16
static uint64_t rs = 42;
static double unit(void) { return (double)((sd_test_splitmix64(&rs) >> 11) + 1) * 0x1.0p-53; }

/* a processed row with some zeros */
static void random_row(float *row) {
    float logit[V];
    for (int i = 0; i < V; i++) logit[i] = unit() < 0.2 ? -INFINITY : (float)(3.0 * unit());
    logit[sd_test_splitmix64(&rs) % V] = 1.0f;
    sd_sampling_params sp = {1.0f, 0, 1.0f, 0.0f};
    static char scratch[1 << 16];
    sd_sampling_process(logit, V, &sp, scratch, sizeof scratch, row, NULL);
}

static void test_top_tokens(void) {
    for (int trial = 0; trial < 2000; trial++) {
        float x[V];
        for (int i = 0; i < V; i++) x[i] = (float)(sd_test_splitmix64(&rs) % 5) * 0.25f; /* many ties, zeros */
        const int32_t k = 1 + (int32_t)(sd_test_splitmix64(&rs) % V), skip = (int32_t)(sd_test_splitmix64(&rs) % V) - 1;
        int32_t got[V], want[V], nw = 0;
        const int32_t ng = sd_tree_top_tokens(x, V, 0.0f, k, skip, got);
        int used[V] = {0};
        while (nw < k) { /* brute force: repeatedly the best unused */
            int32_t b = -1;
            for (int32_t i = 0; i < V; i++)
                if (!used[i] && i != skip && x[i] > 0.0f && (b < 0 || x[i] > x[b])) b = i;
            if (b < 0) break;
            used[b] = 1;
            want[nw++] = b;
        }
        SD_CHECK(ng == nw && !memcmp(got, want, (size_t)nw * sizeof *got), "top tokens trial %d: %d vs %d", trial,
                 (int)ng, (int)nw);
    }
}

/* chain of gamma as a tree: node i (depth i) has child i + 1 */
static void chain_tree(sd_tree *t, const int32_t *root_and_drafts, int32_t gamma, int sampled) {
    t->n = gamma + 1;
    for (int32_t i = 0; i <= gamma; i++) {
        t->token[i] = root_and_drafts[i];
        t->parent[i] = i - 1;
        t->depth[i] = i;
        t->child0[i] = i < gamma ? i + 1 : 0;
        t->n_child[i] = i < gamma ? 1 : 0;
        t->qrow[i] = i < gamma ? i : -1;
        t->sampled[i] = (uint8_t)sampled;
    }
}

static void test_chain_equivalence(specdec_verify_mode mode) {
    static float p[(SPECDEC_MAX_DRAFT + 1) * V], q[SPECDEC_MAX_DRAFT * V];
    int bad = 0;
    for (int trial = 0; trial < 20000; trial++) {
        const int32_t gamma = 1 + (int32_t)(sd_test_splitmix64(&rs) % 8);
        int32_t toks[SPECDEC_MAX_DRAFT + 1];
        toks[0] = 3;
        for (int32_t i = 0; i <= gamma; i++) random_row(p + (size_t)i * V);
        for (int32_t i = 0; i < gamma; i++) {
            random_row(q + (size_t)i * V);
            if (i % 2) memcpy(q + (size_t)i * V, p + (size_t)i * V, sizeof(float) * V); /* some accepted runs */
            toks[1 + i] = mode == SPECDEC_VERIFY_GREEDY ? sd_sample_argmax(q + (size_t)i * V, V)
                                                        : sd_sample_inverse_cdf(q + (size_t)i * V, V, unit());
        }
        sd_verify_uniforms u;
        for (int32_t i = 0; i <= gamma; i++) {
            u.accept[i < SPECDEC_MAX_DRAFT ? i : 0] = unit();
            u.sample[i] = unit();
        }
        int32_t out_c[SPECDEC_MAX_DRAFT + 1], out_t[SPECDEC_MAX_DRAFT + 1], nc = -1, nt = -2, path[SPECDEC_MAX_DRAFT];
        sd_tree t;
        chain_tree(&t, toks, gamma, mode == SPECDEC_VERIFY_REJECTION);
        specdec_status s1 = sd_verify(mode, gamma, V, p, q, toks + 1, &u, out_c, &nc, NULL);
        specdec_status s2 = sd_tree_verify(mode, &t, V, p, q, &u, path, out_t, &nt, NULL);
        if (s1 != SPECDEC_OK || s2 != SPECDEC_OK || nc != nt || memcmp(out_c, out_t, (size_t)(nc + 1) * sizeof(int32_t))) {
            if (bad++ < 3) fprintf(stderr, "mode %d trial %d: chain n=%d tree n=%d\n", (int)mode, trial, nc, nt);
        }
        for (int32_t j = 0; j < nt && s2 == SPECDEC_OK; j++)
            if (path[j] != j + 1) bad++;
    }
    SD_CHECK(bad == 0, "mode %d: %d chain rounds verified differently as trees", (int)mode, bad);
}

/* root with children [a (sampled), b, c] (c with one child d); p one-hot rows */
static void test_hand_trees(void) {
    static float p[5 * V], q[2 * V];
    sd_tree t;
    memset(&t, 0, sizeof t);
    const int32_t tok[5] = {0, 4, 7, 9, 11}, par[5] = {-1, 0, 0, 0, 3}, dep[5] = {0, 1, 1, 1, 2};
    t.n = 5;
    for (int i = 0; i < 5; i++) {
        t.token[i] = tok[i];
        t.parent[i] = par[i];
        t.depth[i] = dep[i];
        t.qrow[i] = -1;
    }
    t.child0[0] = 1, t.n_child[0] = 3, t.qrow[0] = 0, t.sampled[0] = 1;
    t.child0[3] = 4, t.n_child[3] = 1, t.qrow[3] = 1;
    memset(p, 0, sizeof p);
    memset(q, 0, sizeof q);
    for (int i = 0; i < 5; i++) p[(size_t)i * V + 9] = 1.0f; /* the target wants 9 everywhere */
    p[3 * V + 9] = 0.0f, p[3 * V + 11] = 1.0f;           /* after 9: 11 */
    q[4] = 1.0f;                                           /* the draft sampled 4 from q = one-hot 4 */
    q[V + 11] = 1.0f;
    sd_verify_uniforms u;
    for (int i = 0; i <= SPECDEC_MAX_DRAFT; i++) u.sample[i] = 0.5, u.accept[i < SPECDEC_MAX_DRAFT ? i : 0] = 0.5;
    int32_t path[SPECDEC_MAX_DRAFT], out[SPECDEC_MAX_DRAFT + 1], n = -1;
    for (int m = 0; m < 3; m++) {
        const specdec_verify_mode mode = m == 0 ? SPECDEC_VERIFY_MATCH : m == 1 ? SPECDEC_VERIFY_GREEDY : SPECDEC_VERIFY_REJECTION;
        specdec_status st = sd_tree_verify(mode, &t, V, p, q, &u, path, out, &n, NULL);
        /* 4 rejected (p(4) = 0), the residual is one-hot 9 = child 3, then 11 = child 4, then the bonus 9 */
        SD_CHECK(st == SPECDEC_OK && n == 2 && path[0] == 3 && path[1] == 4 && out[0] == 9 && out[1] == 11 && out[2] == 9,
                 "hand tree mode %d: n %d path %d,%d out %d,%d,%d", (int)mode, (int)n, (int)path[0], (int)path[1],
                 (int)out[0], (int)out[1], (int)out[2]);
    }
    /* malformed: a child whose parent disagrees; outputs untouched */
    t.parent[2] = 1;
    n = -7;
    SD_CHECK(sd_tree_verify(SPECDEC_VERIFY_MATCH, &t, V, p, q, &u, path, out, &n, NULL) ==
                 SPECDEC_ERR_INVALID_ARGUMENT && n == -7, "malformed tree accepted");
    t.parent[2] = 0;
    t.qrow[0] = -1; /* a sampled child without its q row */
    SD_CHECK(sd_tree_verify(SPECDEC_VERIFY_REJECTION, &t, V, p, q, &u, path, out, &n, NULL) ==
                 SPECDEC_ERR_INVALID_ARGUMENT, "sampled child without q accepted");
    t.qrow[0] = 0;
    t.token[2] = V;
    SD_CHECK(sd_tree_verify(SPECDEC_VERIFY_GREEDY, &t, V, p, q, &u, path, out, &n, NULL) ==
                 SPECDEC_ERR_INVALID_ARGUMENT, "token out of range accepted");
}

static void test_pool(void) {
    static sd_tree_pool pl;
    static sd_tree t;
    int bad = 0;
    for (int trial = 0; trial < 500; trial++) {
        sd_tree_pool_reset(&pl, 1);
        for (int32_t e = 0; e < pl.n && pl.n < 300; e++) {
            if (e > 0 && unit() < 0.4) continue;
            int32_t tok[8];
            double qv[8];
            const int32_t k = 1 + (int32_t)(sd_test_splitmix64(&rs) % 8);
            for (int32_t i = 0; i < k; i++) tok[i] = i, qv[i] = unit() < 0.2 ? 1.0 : unit();
            if (sd_tree_pool_expand(&pl, e, e, 1, tok, qv, k) != SPECDEC_OK) bad++;
        }
        const int32_t B = 1 + (int32_t)(sd_test_splitmix64(&rs) % SPECDEC_MAX_TREE_NODES);
        const int32_t n = sd_tree_pool_select(&pl, B);
        if (n != (pl.n - 1 < B ? pl.n - 1 : B)) bad++;
        for (int32_t e = 1; e < pl.n; e++) {
            if (!pl.chosen[e]) continue;
            if (!pl.chosen[pl.parent[e]]) bad++;                       /* parent closure */
            if (e > pl.child0[pl.parent[e]] && !pl.chosen[e - 1]) bad++; /* sibling closure */
        }
        int32_t map[SD_RUNNER_TREE_MAX];
        sd_tree_from_pool(&pl, &t, map);
        if (t.n != n + 1) bad++;
        for (int32_t i = 1; i < t.n; i++) {
            const int32_t pa = t.parent[i];
            if (pa < 0 || pa >= i || i < t.child0[pa] || i >= t.child0[pa] + t.n_child[pa] || t.depth[i] != t.depth[pa] + 1)
                bad++;
        }
    }
    SD_CHECK(bad == 0, "best-first pool: %d violations", bad);
}

int main(void) {
    test_top_tokens();
    test_chain_equivalence(SPECDEC_VERIFY_REJECTION);
    test_chain_equivalence(SPECDEC_VERIFY_GREEDY);
    test_chain_equivalence(SPECDEC_VERIFY_MATCH);
    test_hand_trees();
    test_pool();
    return sd_test_done();
}
