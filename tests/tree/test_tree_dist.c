/* test_tree_dist.c — the full loop with draft trees emits exactly the target's law in
 * REJECTION mode (multi-draft recursive rejection sampling, docs/TREE.md) and in MATCH.
 *
 * Models: a second-order Markov-chain target (a node's logits depend on its parent,
 * and the cache after compaction must hold the accepted path) and a first-order draft,
 * V = 8, some -inf logits, runners with native tree operations (tests/tree/
 * markov_tree.h; one case with sd_runner.c's emulation). Each sample is one
 * specdec_generate() call (prompt [3, 5], n_predict 6, sequence_id = sample index,
 * fixed seed): the draft grows the tree, the target verifies it in one pass, both
 * caches are compacted, later rounds follow.
 *
 * Hypothesis H0: the joint law of generated tokens (1,2,3) and, separately, of tokens
 * (4,5,6) equals the exact law of the processed target chain (computed in double from
 * sd_sampling_process rows). G-test over the V^3 = 512 cells (cells with expected count
 * < 5 pooled), p-value from the chi-square law. Family-wise α = 1e-6, Bonferroni over
 * every window of every case (per-test α = 1e-6 / (2 * cases)). A token of probability 0
 * fails at once. Sample count: argv[1] per case (CTest: 150000 in Release, 10000 under
 * the sanitizers).
 *
 * Mutation check: built with tests/tree/tree_mutants.c (-DSD_TREE_MUTANT=N replaces
 * the library's sd_tree_verify) the test runs the mutant's case and passes only if
 * some window is rejected at the same per-test α (CTest: 50000 samples):
 *   1 the seed's naive scheme (each child compared with its own independently sampled
 *     target token, first match wins), 2 the residual not renormalised (deterministic
 *     children accepted with the unnormalised residual mass), 3 q of the wrong sibling. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../verify/vstats.h"
#include "markov_tree.h"
#include "sd_cpu_sample.h"
#include "sd_engine.h"
#include "sd_test.h"

#ifndef SD_TREE_MUTANT
#define SD_TREE_MUTANT 0
#endif

#define V 8
#define NP 6

typedef struct tcase {
    const char *name;
    specdec_verify_mode mode;
    int32_t w[4], depth, nodes; /* tree_width, draft_nodes */
    float temp;
    int32_t top_k;
    float top_p, min_p;
    int disjoint, emulated;
} tcase;

static const tcase CASES[] = {
    {"rejection 3,2,1 T=1", SPECDEC_VERIFY_REJECTION, {3, 2, 1}, 3, 0, 1.0f, 0, 1.0f, 0.0f, 0, 0},
    {"rejection 2,2,2 T=.7 k5 p.9", SPECDEC_VERIFY_REJECTION, {2, 2, 2}, 3, 0, 0.7f, 5, 0.9f, 0.0f, 0, 0},
    {"rejection 4,1,1 T=1.5 minp.1", SPECDEC_VERIFY_REJECTION, {4, 1, 1}, 3, 0, 1.5f, 0, 1.0f, 0.1f, 0, 0},
    {"rejection budget 8 T=1", SPECDEC_VERIFY_REJECTION, {0}, 0, 8, 1.0f, 0, 1.0f, 0.0f, 0, 0},
    {"rejection budget 6 in 3,2,2", SPECDEC_VERIFY_REJECTION, {3, 2, 2}, 3, 6, 1.0f, 0, 1.0f, 0.0f, 0, 0},
    {"rejection 3,2 disjoint", SPECDEC_VERIFY_REJECTION, {3, 2}, 2, 0, 1.0f, 0, 1.0f, 0.0f, 1, 0},
    {"rejection 2,2,1 emulated", SPECDEC_VERIFY_REJECTION, {2, 2, 1}, 3, 0, 1.0f, 0, 1.0f, 0.0f, 0, 1},
    {"match 3,2,1 T=1", SPECDEC_VERIFY_MATCH, {3, 2, 1}, 3, 0, 1.0f, 0, 1.0f, 0.0f, 0, 0},
};
#define N_CASES (int)(sizeof CASES / sizeof CASES[0])
static double g_alpha; /* per-test α */


static float g_target[V * V * V], g_draft[V * V];
static double g_p2[V][V][V]; /* processed target: P(c | a, b) */

/* Exact laws of tokens 1-3 (pa) and 4-6 (pb) after the prompt [3, 5]. */
static void exact_laws(const sd_sampling_params *sp, double *pa, double *pb) {
    float probs[V];
    size_t ss = sd_sampling_scratch_size(V);
    void *scratch = malloc(ss);
    for (int a = 0; a < V; a++)
        for (int b = 0; b < V; b++) {
            sd_sampling_process(g_target + (size_t)(a * V + b) * V, V, sp, scratch, ss, probs, NULL);
            double s = 0;
            for (int c = 0; c < V; c++) s += probs[c];
            for (int c = 0; c < V; c++) g_p2[a][b][c] = probs[c] / s;
        }
    free(scratch);
    static double state[V][V];
    memset(state, 0, sizeof state);
    for (int t1 = 0; t1 < V; t1++)
        for (int t2 = 0; t2 < V; t2++)
            for (int t3 = 0; t3 < V; t3++) {
                double p = g_p2[3][5][t1] * g_p2[5][t1][t2] * g_p2[t1][t2][t3];
                pa[(t1 * V + t2) * V + t3] = p;
                state[t2][t3] += p;
            }
    memset(pb, 0, sizeof(double) * V * V * V);
    for (int t2 = 0; t2 < V; t2++)
        for (int t3 = 0; t3 < V; t3++)
            for (int t4 = 0; t4 < V; t4++)
                for (int t5 = 0; t5 < V; t5++)
                    for (int t6 = 0; t6 < V; t6++)
                        pb[(t4 * V + t5) * V + t6] += state[t2][t3] * g_p2[t2][t3][t4] * g_p2[t3][t4][t5] * g_p2[t4][t5][t6];
}

static void make_tables(int disjoint) {
    mk_fill_table(g_target, V * V, V, 1.2, 0.1, 101);
    mk_fill_table(g_draft, V, V, 1.2, 0.1, 202);
    if (!disjoint) return;
    for (int r = 0; r < V * V; r++)
        for (int i = 1; i < V; i += 2) g_target[r * V + i] = -INFINITY;
    for (int r = 0; r < V; r++)
        for (int i = 0; i < V; i += 2) g_draft[r * V + i] = -INFINITY;
}

/* Runs one case; returns the smaller p-value of its two windows. */
static double run_case(const tcase *c, long N) {
    make_tables(c->disjoint);
    mk_runner *mt = mkt_runner_new(2, g_target, V, 64, 64, !c->emulated);
    mk_runner *md = mkt_runner_new(1, g_draft, V, 64, 64, !c->emulated);
    specdec_engine *e = NULL;
    if (sd_engine_create_from_runners(&mt->base, &md->base, NULL, &e) != SPECDEC_OK) {
        SD_CHECK(0, "%s: create: %s", c->name, specdec_last_error());
        return 1.0;
    }
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = NP;
    gp.temperature = c->temp;
    gp.top_k = c->top_k;
    gp.top_p = c->top_p;
    gp.min_p = c->min_p;
    gp.verify = c->mode;
    gp.seed = 0x7ee0000ull + (uint64_t)(c - CASES);
    gp.ignore_eos = 1;
    SD_CHECK(specdec_generate_params_set_tree(&gp, c->w, c->depth) == SPECDEC_OK, "%s: shape", c->name);
    gp.draft_nodes = c->nodes;
    sd_sampling_params sp = sd_sampling_params_from(&gp);
    static double pa[V * V * V], pb[V * V * V];
    static long ca[V * V * V], cb[V * V * V];
    exact_laws(&sp, pa, pb);
    memset(ca, 0, sizeof ca);
    memset(cb, 0, sizeof cb);
    const int32_t prompt[2] = {3, 5};
    int32_t out[NP];
    long bad = 0, rounds = 0, nodes = 0, accepted = 0;
    for (long i = 0; i < N; i++) {
        gp.sequence_id = (uint64_t)i;
        int32_t n = 0;
        specdec_stats st;
        if (specdec_generate(e, prompt, 2, &gp, out, NP, &n, &st) != SPECDEC_OK || n != NP) {
            if (bad++ < 3) fprintf(stderr, "%s: sample %ld: %s\n", c->name, i, specdec_engine_last_error(e));
            continue;
        }
        ca[(out[0] * V + out[1]) * V + out[2]]++;
        cb[(out[3] * V + out[4]) * V + out[5]]++;
        rounds += st.n_draft_rounds;
        nodes += st.n_drafted;
        accepted += st.n_accepted;
    }
    SD_CHECK(bad == 0, "%s: %ld failed generate calls", c->name, bad);
    SD_CHECK(mt->violations == 0 && md->violations == 0, "%s: runner contract violations", c->name);
    if (c->disjoint) SD_CHECK(accepted == 0, "%s: %ld drafts accepted with disjoint supports", c->name, accepted);
    else SD_CHECK(accepted > 0 && nodes > rounds, "%s: no tree accepted anything", c->name);
    int df;
    double G;
    const double pva = g_test_pvalue(ca, pa, V * V * V, N - bad, &df, &G);
    printf("%-30s N=%ld  tokens 1-3: G=%.4f df=%d p=%.3g", c->name, N, G, df, pva);
    const double pvb = g_test_pvalue(cb, pb, V * V * V, N - bad, &df, &G);
    printf("  tokens 4-6: G=%.1f df=%d p=%.3g  nodes/round %.2f accepted/round %.2f\n", G, df, pvb,
           rounds ? (double)nodes / (double)rounds : 0.0, rounds ? (double)accepted / (double)rounds : 0.0);
    specdec_engine_free(e);
    return pva < pvb ? pva : pvb;
}

int main(int argc, char **argv) {
    const long N = argc > 1 ? atol(argv[1]) : 150000;
    g_alpha = 1e-6 / (2.0 * N_CASES);
    if (SD_TREE_MUTANT) {
        /* the mutant's case: fixed shape with sampled and deterministic children */
        const double p = run_case(&CASES[0], N);
        SD_CHECK(p <= g_alpha, "mutant %d was NOT detected: p = %.3g > %.3g", SD_TREE_MUTANT, p, g_alpha);
        if (p <= g_alpha) printf("mutant %d detected: p = %.3g <= %.3g\n", SD_TREE_MUTANT, p, g_alpha);
        return sd_test_done();
    }
    for (int i = 0; i < N_CASES; i++) {
        const double p = run_case(&CASES[i], N);
        SD_CHECK(p > g_alpha, "%s: the output deviates from the target law: p = %.3g <= %.3g", CASES[i].name, p, g_alpha);
    }
    return sd_test_done();
}
