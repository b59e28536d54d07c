/* test_engine_dist.c — the full speculative loop emits exactly the target's
 * distribution.
 *
 * Models: a second-order Markov chain target (its logits read its own KV cache, so a
 * wrong rollback samples from wrong rows) and a first-order chain draft, V = 8, with
 * some -inf logits; see markov.h. Each sample is one specdec_generate() call
 * (prompt [3, 5], n_predict 6, sequence_id = sample index, fixed seed), so every
 * sample goes through draft proposals, the one-pass target verification, the
 * verifier, KV rollback of both runners and the draft catching up.
 *
 * Hypothesis H0: the joint law of generated tokens (1,2,3) and, separately, of
 * tokens (4,5,6) equals the exact law of the processed target chain (p rows after
 * the same temperature / top-k / top-p / min-p processing, computed in double from
 * sd_sampling_process rows). G-test over the V^3 = 512 cells (cells with expected
 * count < 5 pooled), p-value from the chi-square law, reject at α = 1e-6 per window.
 * A token the exact law gives probability 0 fails immediately.
 * Sample count: argv[1] per case (default 200000; CTest runs 500000 in Release and
 * 20000 under ASan). Cases: rejection with γ = 1, 2, 4 and several sampling
 * settings, disjoint draft/target supports, match mode, and plain decoding.
 * argv[2] "ngram" runs the n-gram drafter's cases instead (no draft model,
 * deterministic q; docs/DRAFTERS.md): rejection chains (sd_verify_det: accept with
 * p(x), the residual p without x) with and without filters, a rejection tree
 * (deterministic children), match, and a rejection chain through the cost gate (FIXED
 * 0.3: what is proposed depends on the outcomes of earlier rounds), and a rejection chain and tree with the
 * cross-request corpus (core/sd_ngram_corpus.c: every earlier sample's output in it, so what is proposed depends
 * on earlier samples; suffixes up to 6); the prompt repeats itself (3 5 1 3 5 1 3 5, the
 * chain's state still (3, 5)) so that lookups match from the first round. Built with
 * SD_NGRAM_MUTANT (tests/drafters/ngram_mutants.c linked instead of the library's
 * sd_verify_det) the rejection chain cases must be REJECTED (p <= 1e-6 in a window).
 * Also checked: no runner contract violation, one target call per round. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../verify/vstats.h"
#include "markov.h"
#include "sd_engine.h"
#include "sd_cpu_sample.h"
#include "sd_test.h"

#define V 8
#define NP 6

static float g_target[V * V * V], g_draft[V * V];
static double g_p2[V][V][V]; /* processed target: P(c | a, b) */

static void exact_laws(const sd_sampling_params *sp, double *pa, double *pb) {
    float probs[V];
    size_t ss = sd_sampling_scratch_size(V);
    void *scratch = malloc(ss);
    for (int a = 0; a < V; a++)
        for (int b = 0; b < V; b++) {
            specdec_status st = sd_sampling_process(g_target + (size_t)(a * V + b) * V, V, sp, scratch, ss, probs, NULL);
            SD_CHECK(st == SPECDEC_OK, "sd_sampling_process: %s", specdec_last_error());
            double s = 0;
            for (int c = 0; c < V; c++) s += probs[c];
            for (int c = 0; c < V; c++) g_p2[a][b][c] = probs[c] / s;
        }
    free(scratch);
    double state[V][V];
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
                        pb[(t4 * V + t5) * V + t6] +=
                            state[t2][t3] * g_p2[t2][t3][t4] * g_p2[t3][t4][t5] * g_p2[t4][t5][t6];
}

typedef struct dcase {
    const char *name;
    int ngram;       /* the n-gram drafter (no draft runner): 1 every match proposed (ngram_cost OFF),
                        2 the cost gate (FIXED 0.3), 3 as 1 with the cross-request corpus (every earlier
                        sample's output in it, suffixes up to 6); tree[0] > 0: a tree of widths tree[] */
    int32_t tree[3];
    int use_draft;
    int disjoint;
    int mutant;      /* the target runner's rollback is broken: the test must reject */
    specdec_verify_mode mode;
    int32_t gamma;
    float temp;
    int32_t top_k;
    float top_p, min_p;
} dcase;

static void run_case(const dcase *c, long N) {
    mk_fill_table(g_target, V * V, V, 1.2, 0.1, 101);
    if (c->ngram) /* a likely cycle 3 -> 5 -> 1 -> 3 (others t -> t + 1): lookups are often
                   * accepted and often rejected */
        for (int r = 0; r < V * V; r++) {
            const int b = r % V, next = b == 3 ? 5 : b == 5 ? 1 : b == 1 ? 3 : (b + 1) % V;
            g_target[r * V + next] = g_target[r * V + next] == -INFINITY ? 1.0f : g_target[r * V + next] + 2.5f;
        }
    mk_fill_table(g_draft, V, V, 1.2, 0.1, 202);
    if (c->disjoint) { /* target only even tokens, draft only odd ones: every draft rejected */
        for (int r = 0; r < V * V; r++)
            for (int i = 1; i < V; i += 2) g_target[r * V + i] = -INFINITY;
        for (int r = 0; r < V; r++)
            for (int i = 0; i < V; i += 2) g_draft[r * V + i] = -INFINITY;
    }
    mk_runner *mt = mk_runner_new(2, g_target, V, 64, 64);
    mt->mutant_stale = c->mutant;
    mk_runner *md = c->use_draft ? mk_runner_new(1, g_draft, V, 64, 64) : NULL;
    specdec_engine *e = NULL;
    specdec_status st = sd_engine_create_from_runners(&mt->base, md ? &md->base : NULL, NULL, &e);
    SD_CHECK(st == SPECDEC_OK, "%s: create: %s", c->name, specdec_last_error());
    if (st != SPECDEC_OK) return;

    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = NP;
    gp.temperature = c->temp;
    gp.top_k = c->top_k;
    gp.top_p = c->top_p;
    gp.min_p = c->min_p;
    gp.verify = c->mode;
    gp.n_draft = c->gamma;
    gp.seed = 0x5eed0000ull + (uint64_t)c->gamma;
    if (c->ngram == 3 && (st = sd_ngram_corpus_create(4096, &e->env.corpus, NULL)) != SPECDEC_OK) {
        SD_CHECK(0, "%s: corpus: %s", c->name, specdec_last_error());
        specdec_engine_free(e);
        return;
    }
    if (c->ngram) {
        gp.draft_method = SPECDEC_DRAFT_NGRAM;
        gp.ngram_max = c->ngram == 3 ? 6 : 3;
        gp.ngram_cost = c->ngram == 2 ? SPECDEC_NGRAM_COST_FIXED : SPECDEC_NGRAM_COST_OFF;
        gp.ngram_token_cost = 0.3f;
        if (c->tree[0] > 0) SD_CHECK(specdec_generate_params_set_tree(&gp, c->tree, 3) == SPECDEC_OK, "tree");
    }
    sd_sampling_params sp = sd_sampling_params_from(&gp);

    static double pa[V * V * V], pb[V * V * V];
    static long ca[V * V * V], cb[V * V * V];
    exact_laws(&sp, pa, pb);
    memset(ca, 0, sizeof ca);
    memset(cb, 0, sizeof cb);
    static const int32_t prompts[2][8] = {{3, 5}, {3, 5, 1, 3, 5, 1, 3, 5}};
    const int32_t *prompt = prompts[c->ngram != 0], n_prompt = c->ngram ? 8 : 2;
    int32_t out[NP];
    long rounds = 0, drafted = 0, accepted = 0, bad = 0;
    for (long i = 0; i < N; i++) {
        gp.sequence_id = (uint64_t)i;
        int32_t n = 0;
        specdec_stats stats;
        st = specdec_generate(e, prompt, n_prompt, &gp, out, NP, &n, &stats);
        if (st != SPECDEC_OK || n != NP) {
            if (bad++ < 3) fprintf(stderr, "%s: sample %ld: status %d n %d: %s\n", c->name, i, (int)st, (int)n,
                                   specdec_engine_last_error(e));
            continue;
        }
        ca[(out[0] * V + out[1]) * V + out[2]]++;
        cb[(out[3] * V + out[4]) * V + out[5]]++;
        rounds += stats.n_rounds;
        drafted += stats.n_drafted;
        accepted += stats.n_accepted;
    }
    SD_CHECK(bad == 0, "%s: %ld failed generate calls", c->name, bad);
    SD_CHECK(mt->violations == 0 && (!md || md->violations == 0), "%s: runner contract violations %ld/%ld", c->name,
             mt->violations, md ? md->violations : 0);
    /* prefill is one call (one prompt token before the last), then one target call per round */
    if (c->tree[0] == 0) /* trees: the Markov runner has no tree ops, sd_runner.c emulates them call by call */
        SD_CHECK(mt->calls == N + rounds, "%s: target calls %ld != prefills %ld + rounds %ld", c->name, mt->calls, N,
                 rounds);
    if (c->disjoint) SD_CHECK(accepted == 0, "%s: %ld drafts accepted with disjoint supports", c->name, accepted);
    if ((c->use_draft || c->ngram) && !c->disjoint)
        SD_CHECK(drafted > 0 && accepted > 0 && accepted < drafted, "%s: drafted %ld, accepted %ld", c->name, drafted,
                 accepted);
    int df;
    double G;
    double pva = g_test_pvalue(ca, pa, V * V * V, N - bad, &df, &G);
    printf("%-28s N=%ld  tokens 1-3: G=%.1f df=%d p=%.3g", c->name, N, G, df, pva);
    double pvb = g_test_pvalue(cb, pb, V * V * V, N - bad, &df, &G);
    printf("  tokens 4-6: G=%.1f df=%d p=%.3g  acc=%.3f tok/round=%.2f\n", G, df, pvb,
           drafted ? (double)accepted / (double)drafted : 0.0, rounds ? (double)(N * NP) / (double)rounds : 0.0);
#ifdef SD_NGRAM_MUTANT
    SD_CHECK(pva <= 1e-6 || pvb <= 1e-6, "%s: the broken deterministic verifier was NOT detected (p=%.3g, %.3g)",
             c->name, pva, pvb);
    specdec_engine_free(e);
    return;
#endif
    if (c->mutant) {
        /* tokens 1-3 may come out right (rollback matters only after a rejection);
         * the later window must be caught */
        SD_CHECK(pvb <= 1e-6, "%s: the broken rollback was NOT detected (p=%.3g)", c->name, pvb);
    } else {
        SD_CHECK(pva > 1e-6, "%s: tokens 1-3 deviate from the target law: p=%.3g", c->name, pva);
        SD_CHECK(pvb > 1e-6, "%s: tokens 4-6 deviate from the target law: p=%.3g", c->name, pvb);
    }
    specdec_engine_free(e);
}

int main(int argc, char **argv) {
    long N = argc > 1 ? atol(argv[1]) : 200000;
    const int ngram = argc > 2 && !strcmp(argv[2], "ngram");
    const dcase cases[] = {
        /* name                        ngram tree    draft disj mutant mode               γ  temp  top_k top_p min_p */
        {"rejection g=1 T=1",            0, {0}, 1, 0, 0, SPECDEC_VERIFY_REJECTION, 1, 1.0f, 0, 1.0f, 0.0f},
        {"rejection g=2 T=1",            0, {0}, 1, 0, 0, SPECDEC_VERIFY_REJECTION, 2, 1.0f, 0, 1.0f, 0.0f},
        {"rejection g=4 T=1",            0, {0}, 1, 0, 0, SPECDEC_VERIFY_REJECTION, 4, 1.0f, 0, 1.0f, 0.0f},
        {"rejection g=2 T=.7 k5 p.9",    0, {0}, 1, 0, 0, SPECDEC_VERIFY_REJECTION, 2, 0.7f, 5, 0.9f, 0.0f},
        {"rejection g=4 T=1.5 minp.1",   0, {0}, 1, 0, 0, SPECDEC_VERIFY_REJECTION, 4, 1.5f, 0, 1.0f, 0.1f},
        {"auto g=3 T=.5 k3 p.95",        0, {0}, 1, 0, 0, SPECDEC_VERIFY_AUTO, 3, 0.5f, 3, 0.95f, 0.0f},
        {"rejection g=3 disjoint",       0, {0}, 1, 1, 0, SPECDEC_VERIFY_REJECTION, 3, 1.0f, 0, 1.0f, 0.0f},
        {"match g=3 T=1",                0, {0}, 1, 0, 0, SPECDEC_VERIFY_MATCH, 3, 1.0f, 0, 1.0f, 0.0f},
        {"plain T=1 k5",                 0, {0}, 0, 0, 0, SPECDEC_VERIFY_AUTO, 0, 1.0f, 5, 1.0f, 0.0f},
        {"MUTANT stale KV g=2 T=1",      0, {0}, 1, 0, 1, SPECDEC_VERIFY_REJECTION, 2, 1.0f, 0, 1.0f, 0.0f},
        {"ngram rejection g=3 T=1",      1, {0}, 0, 0, 0, SPECDEC_VERIFY_REJECTION, 3, 1.0f, 0, 1.0f, 0.0f},
        {"ngram rejection g=4 T=.7 k5 p.9", 1, {0}, 0, 0, 0, SPECDEC_VERIFY_REJECTION, 4, 0.7f, 5, 0.9f, 0.0f},
        {"ngram gated rejection g=4 T=1", 2, {0}, 0, 0, 0, SPECDEC_VERIFY_REJECTION, 4, 1.0f, 0, 1.0f, 0.0f},
#ifndef SD_NGRAM_MUTANT
        {"ngram rejection tree 2,2,1",   1, {2, 2, 1}, 0, 0, 0, SPECDEC_VERIFY_REJECTION, 3, 1.0f, 0, 1.0f, 0.0f},
        {"ngram match g=4 T=1",          1, {0}, 0, 0, 0, SPECDEC_VERIFY_MATCH, 4, 1.0f, 0, 1.0f, 0.0f},
        {"ngram corpus rejection g=4 T=1", 3, {0}, 0, 0, 0, SPECDEC_VERIFY_REJECTION, 4, 1.0f, 0, 1.0f, 0.0f},
        {"ngram corpus rejection tree 2,2,1", 3, {2, 2, 1}, 0, 0, 0, SPECDEC_VERIFY_REJECTION, 3, 1.0f, 0, 1.0f, 0.0f},
#endif
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if ((cases[i].ngram != 0) == ngram) run_case(&cases[i], N);
    return sd_test_done();
}
