/* e3_gen.h — generation helpers of the EAGLE-3 engine tests (test_eagle3_gen.c on the CPU,
 * test_eagle3_cuda.c on CUDA): generate, and check that greedy and match output with the
 * head equals plain decoding of the same engine, token for token. Header-only, static. */
#ifndef E3_GEN_H
#define E3_GEN_H

#include <stdio.h>
#include <string.h>

#include "sd_test.h"
#include "specdec.h"

static int32_t gen(specdec_engine *e, const int32_t *prompt, int32_t np, const specdec_generate_params *gp,
                   int32_t *out, int32_t cap, specdec_stats *stats) {
    int32_t n = 0;
    const specdec_status st = specdec_generate(e, prompt, np, gp, out, cap, &n, stats);
    SD_CHECK(st == SPECDEC_OK, "generate: %s", specdec_engine_last_error(e));
    return st == SPECDEC_OK ? n : -1;
}

/* 1. greedy and match: the head's output equals plain decoding's, token for token */
static void check_equal_plain(const char *name, specdec_engine *e, const int32_t *prompt, int32_t np, int32_t n_predict,
                              const int32_t *tree, int32_t tree_depth) {
    static const struct {
        specdec_verify_mode mode;
        float temp;
    } modes[] = {{SPECDEC_VERIFY_GREEDY, 0.0f}, {SPECDEC_VERIFY_MATCH, 0.9f}};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        specdec_generate_params gp = specdec_generate_default_params();
        gp.n_predict = n_predict;
        gp.temperature = modes[m].temp;
        gp.verify = modes[m].mode;
        gp.seed = 11;
        gp.ignore_eos = 1;
        int32_t a[256], b[256];
        specdec_stats sa, sb;
        gp.n_draft = 4;
        if (tree) SD_CHECK(specdec_generate_params_set_tree(&gp, tree, tree_depth) == SPECDEC_OK, "tree");
        const int32_t na = gen(e, prompt, np, &gp, a, 256, &sa);
        gp = specdec_generate_default_params();
        gp.n_predict = n_predict;
        gp.temperature = modes[m].temp;
        gp.verify = modes[m].mode;
        gp.seed = 11;
        gp.ignore_eos = 1;
        gp.n_draft = 0;
        const int32_t nb = gen(e, prompt, np, &gp, b, 256, &sb);
        SD_CHECK(na == nb && na > 0 && !memcmp(a, b, sizeof(int32_t) * (size_t)(na > 0 ? na : 0)),
                 "%s %s: speculative output (%d tokens) differs from plain (%d)", name,
                 m ? "match" : "greedy", (int)na, (int)nb);
        SD_CHECK(sa.draft_method == SPECDEC_DRAFT_EAGLE3 && sa.n_drafted > 0, "%s: drafted by %d, %lld drafts", name,
                 (int)sa.draft_method, (long long)sa.n_drafted);
        printf("%-28s %-6s %-5s %3d tokens equal plain; %.2f tokens per round\n", name, m ? "match" : "greedy",
               tree ? "tree" : "chain", (int)na,
               sa.n_rounds ? (double)na / (double)sa.n_rounds : 0.0);
    }
}

#endif
