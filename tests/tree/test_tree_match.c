/* test_tree_match.c — "one point on the number line": with a draft tree, MATCH and
 * GREEDY output is bit-identical to plain decoding with the same seed, for every tree
 * shape (fixed shapes, best-first node budgets, budgets inside a shape).
 *
 * Part 1, synthetic: Markov-chain target (order 2: a node's logits depend on its
 * parent, so a wrong tree mask or a wrong compaction changes the output) and draft
 * (order 1), V = 16, runners with native tree operations and with emulated ones
 * (core/sd_runner.c), 20 seeds (quick: 5) x 2 prompts x 11 shapes x 3 sampling
 * settings, 40 tokens each, plus a context of 48 tokens that forces the loop to clip trees at its
 * end. Test of the test: a runner with a chain mask instead of the tree mask must make
 * some output differ.
 * Part 2, the bundled pair on the CPU backend (argv[1], argv[2]): 3 prompts x 8 shapes x
 * (MATCH T = 0.8 with two seeds, GREEDY), 24 tokens ("quick" as argv[3]: one prompt, 3 shapes).
 * With "cuda" as argv[3] (ctest tree_match_cuda, label gpu) only part 2 runs, on the CUDA
 * backend: trees through the CUDA runner's tree attention and compaction against plain
 * decoding on the same CUDA engine; "skipped: no CUDA device" (77) without one.
 * Also checked: no runner contract violation, the statistics of trees (nodes per
 * round, mean accepted length) consistent with the counts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "markov_tree.h"
#include "sd_engine.h"
#include "sd_test.h"

#define MV 16
#define NP 40

typedef struct shape {
    const char *name;
    int32_t w[SPECDEC_MAX_DRAFT];
    int32_t depth, nodes;
} shape;

static const shape SHAPES[] = {
    {"4,2,1,1", {4, 2, 1, 1}, 4, 0},    {"3,3", {3, 3}, 2, 0},           {"8", {8}, 1, 0},
    {"2,2,2,2", {2, 2, 2, 2}, 4, 0},    {"1,1,1 (chain)", {1, 1, 1}, 3, 0}, {"budget 5", {0}, 0, 5},
    {"budget 16", {0}, 0, 16},          {"budget 64", {0}, 0, 64},       {"budget 12 in 4,3,2", {4, 3, 2}, 3, 12},
    {"budget 8", {0}, 0, 8},            {"budget 32", {0}, 0, 32},
};
#define N_SHAPES (int)(sizeof SHAPES / sizeof SHAPES[0])

static void set_shape(specdec_generate_params *gp, const shape *s) {
    SD_CHECK(specdec_generate_params_set_tree(gp, s->w, s->depth) == SPECDEC_OK, "set_tree %s: %s", s->name,
             specdec_last_error());
    gp->draft_nodes = s->nodes;
}

/* generate; returns the count (-1 on failure) */
static int32_t gen(specdec_engine *e, const int32_t *prompt, int32_t np, const specdec_generate_params *gp,
                   int32_t *out, int32_t cap, specdec_stats *st) {
    int32_t n = -1;
    specdec_status s = specdec_generate(e, prompt, np, gp, out, cap, &n, st);
    if (s != SPECDEC_OK) {
        fprintf(stderr, "generate: %s: %s\n", specdec_status_string(s), specdec_engine_last_error(e));
        return -1;
    }
    return n;
}

static int stats_ok(const specdec_stats *st) {
    if (st->n_draft_rounds == 0) return st->n_drafted == 0;
    return fabs(st->nodes_per_round - (double)st->n_drafted / (double)st->n_draft_rounds) < 1e-9 &&
           fabs(st->mean_accepted_length - (double)st->n_accepted / (double)st->n_draft_rounds) < 1e-9 &&
           st->n_draft_rounds <= st->n_rounds;
}

static float g_t[MV * MV * MV], g_d[MV * MV];
static uint64_t g_seeds = 20; /* "quick": 5 */

/* All shapes x settings x seeds on one engine pair; returns the number of outputs
 * that differ from plain decoding. */
static long markov_sweep(specdec_engine *e, int32_t n_ctx, const char *what) {
    static const float temps[3] = {1.0f, 0.7f, 0.0f};
    const int32_t prompts[2][3] = {{3, 5, 7}, {1, 1, 2}};
    long diff = 0, runs = 0, bad_stats = 0;
    int32_t ref[64], out[64];
    for (int set = 0; set < 3; set++)
        for (int pi = 0; pi < 2; pi++)
            for (uint64_t seed = 1; seed <= g_seeds; seed++) {
                specdec_generate_params gp = specdec_generate_default_params();
                gp.n_predict = NP;
                gp.temperature = temps[set];
                gp.top_k = set == 1 ? 5 : 0;
                gp.top_p = set == 1 ? 0.9f : 1.0f;
                gp.min_p = 0.0f;
                gp.verify = set == 2 ? SPECDEC_VERIFY_GREEDY : SPECDEC_VERIFY_MATCH;
                gp.seed = seed;
                gp.ignore_eos = 1;
                gp.n_draft = 0;
                const int32_t nr = gen(e, prompts[pi], 3, &gp, ref, 64, NULL);
                for (int si = 0; si < N_SHAPES; si++) {
                    specdec_generate_params tp = gp;
                    set_shape(&tp, &SHAPES[si]);
                    specdec_stats st;
                    const int32_t n = gen(e, prompts[pi], 3, &tp, out, 64, &st);
                    runs++;
                    if (n != nr || nr < 0 || memcmp(out, ref, (size_t)n * sizeof(int32_t))) {
                        if (diff++ < 3 && !mkt_mutant_mask)
                            fprintf(stderr, "%s: shape %s setting %d seed %llu: differs from plain\n", what,
                                    SHAPES[si].name, set, (unsigned long long)seed);
                    }
                    if (!stats_ok(&st) || (si != 4 && st.n_draft_rounds > 0 && st.nodes_per_round <= 1.0)) bad_stats++;
                }
            }
    SD_CHECK(bad_stats == 0, "%s: %ld runs with inconsistent tree statistics", what, bad_stats);
    printf("%-40s n_ctx %3d: %ld tree runs, %ld differ from plain decoding\n", what, (int)n_ctx, runs, diff);
    return diff;
}

static long markov_case(int native, int mutant, int32_t n_ctx, const char *what) {
    mk_runner *mt = mkt_runner_new(2, g_t, MV, n_ctx, 65, native);
    mk_runner *md = mkt_runner_new(1, g_d, MV, n_ctx, 65, native);
    specdec_engine *e = NULL;
    if (sd_engine_create_from_runners(&mt->base, &md->base, NULL, &e) != SPECDEC_OK) {
        SD_CHECK(0, "%s: engine: %s", what, specdec_last_error());
        return -1;
    }
    mkt_mutant_mask = mutant;
    const long calls0 = mkt_tree_calls;
    const long diff = markov_sweep(e, n_ctx, what);
    mkt_mutant_mask = 0;
    SD_CHECK(mt->violations == 0 && md->violations == 0, "%s: runner contract violations %ld / %ld", what,
             mt->violations, md->violations);
    SD_CHECK(native == (mkt_tree_calls > calls0), "%s: native tree calls %ld", what, mkt_tree_calls - calls0);
    specdec_engine_free(e);
    return diff;
}

static void markov_part(void) {
    mk_fill_table(g_t, MV * MV, MV, 1.5, 0.1, 11);
    mk_fill_table(g_d, MV, MV, 1.5, 0.1, 12);
    /* the draft a noisy copy of the target's rows after token 0: decent acceptance */
    for (int a = 0; a < MV; a++)
        for (int c = 0; c < MV; c++)
            if (isfinite(g_t[a * MV + c])) g_d[a * MV + c] = g_t[a * MV + c] + 0.3f * (g_d[a * MV + c] > 0 ? 1 : -1);
    SD_CHECK(markov_case(1, 0, 128, "markov, native tree ops") == 0, "native: outputs differ from plain decoding");
    SD_CHECK(markov_case(0, 0, 128, "markov, emulated tree ops") == 0, "emulated: outputs differ from plain decoding");
    SD_CHECK(markov_case(1, 0, 48, "markov, native, short context") == 0, "short context: outputs differ");
    SD_CHECK(markov_case(1, 1, 128, "MUTANT chain mask (must differ)") > 0, "the chain-mask mutant was NOT detected");
}

static void pair_part(const char *tdir, const char *ddir, int quick, specdec_backend backend) {
    specdec_model *mt = NULL, *md = NULL;
    if (specdec_model_load(tdir, NULL, &mt) != SPECDEC_OK || specdec_model_load(ddir, NULL, &md) != SPECDEC_OK) {
        SD_CHECK(0, "loading the bundled pair: %s", specdec_last_error());
        specdec_model_free(mt);
        return;
    }
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = backend;
    specdec_engine *e = NULL;
    SD_CHECK(specdec_engine_create(mt, md, &ep, &e) == SPECDEC_OK, "engine: %s", specdec_last_error());
    SD_CHECK(!e || specdec_engine_backend(e) == backend, "engine on backend %d, asked for %d",
             e ? (int)specdec_engine_backend(e) : -1, (int)backend);
    static const int32_t prompts[3][6] = {{0, 322, 333, 13}, {0, 200, 297, 260, 342}, {0, 269, 389}};
    static const int32_t np[3] = {4, 5, 3};
    static const int pshapes[8] = {0, 1, 3, 5, 6, 8, 9, 10};
    long diff = 0, runs = 0;
    for (int m = 0; e && m < 3; m++)
        for (int pi = 0; pi < (quick ? 1 : 3); pi++) {
            if (quick && m == 1) continue;
            specdec_generate_params gp = specdec_generate_default_params();
            gp.n_predict = 24;
            gp.temperature = m < 2 ? 0.8f : 0.0f;
            gp.verify = m < 2 ? SPECDEC_VERIFY_MATCH : SPECDEC_VERIFY_GREEDY;
            gp.seed = 1 + (uint64_t)m;
            gp.ignore_eos = 1;
            gp.n_draft = 0;
            int32_t ref[24], out[24];
            const int32_t nr = gen(e, prompts[pi], np[pi], &gp, ref, 24, NULL);
            for (int k = 0; k < (quick ? 3 : 8); k++) {
                specdec_generate_params tp = gp;
                set_shape(&tp, &SHAPES[pshapes[quick ? k * 2 + 1 : k]]);
                specdec_stats st;
                const int32_t n = gen(e, prompts[pi], np[pi], &tp, out, 24, &st);
                runs++;
                if (n != nr || nr < 0 || memcmp(out, ref, (size_t)n * sizeof(int32_t)) || !stats_ok(&st)) diff++;
            }
        }
    const char *bname = backend == SPECDEC_BACKEND_CUDA ? "CUDA" : "CPU";
    printf("bundled pair (%s): %ld tree runs, %ld differ from plain decoding\n", bname, runs, diff);
    SD_CHECK(diff == 0 && runs > 0, "bundled pair: %ld of %ld tree runs differ from plain decoding", diff, runs);
    specdec_engine_free(e);
    specdec_model_free(md);
    specdec_model_free(mt);
}

int main(int argc, char **argv) {
    if (argc > 3 && !strcmp(argv[3], "cuda")) {
        if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
        const char *q = getenv("SD_CUDA_TEST_QUICK"); /* bench/gpu_check.sh's sanitizer runs */
        pair_part(argv[1], argv[2], q && *q && strcmp(q, "0") != 0, SPECDEC_BACKEND_CUDA);
        return sd_test_done();
    }
    if (argc > 3 && !strcmp(argv[3], "quick")) g_seeds = 5;
    markov_part();
    if (argc > 2) pair_part(argv[1], argv[2], argc > 3 && !strcmp(argv[3], "quick"), SPECDEC_BACKEND_CPU);
    return sd_test_done();
}
