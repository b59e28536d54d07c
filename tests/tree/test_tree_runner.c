/* test_tree_runner.c — the tree contract of a runner (core/sd_runner.h "Trees") on the
 * CPU runner with the bundled models (models/kjv-draft, and kjv-target for one case),
 * natively (tree attention) and emulated (tree_ops removed: sd_runner.c's fallback).
 *
 * Checked, bitwise (memcmp of fp32 logits):
 *  - every node of random trees (one call, and grown over several calls with first > 0)
 *    has the logits plain decoding gives for its path: the prefix, then the path's
 *    tokens one by one;
 *  - after compaction to a random root path, the next plain forward gives the logits
 *    of plain decoding of prefix + path + token (so the kept K/V rows are right);
 *  - bad calls (parent out of range, a tree extended on a wrong base or count, a keep
 *    list that is not a root path, compact without a tree, token out of range, more
 *    nodes than max_batch or the context) return INVALID_ARGUMENT / CONTEXT_FULL.
 * argv[1], argv[2]: target and draft model directories; argv[3] = "quick": fewer trees. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_cpu_runner.h"
#include "sd_model.h"
#include "sd_test.h"
#include "sd_test_util.h"

#define NCTX 160
static int32_t g_V;
static float *g_ref, *g_tree;

/* Logits of plain decoding: prefix[0..np) then path[0..k], the last row. */
static void plain_last(sd_runner *r, const int32_t *prefix, int32_t np, const int32_t *path, int32_t k, float *out) {
    int32_t seq[NCTX];
    memcpy(seq, prefix, (size_t)np * sizeof *seq);
    memcpy(seq + np, path, (size_t)(k + 1) * sizeof *seq);
    specdec_status st = sd_runner_forward(r, seq, np + k, 0, NULL);
    if (st == SPECDEC_OK) st = sd_runner_forward(r, seq + np + k, 1, np + k, out);
    SD_CHECK(st == SPECDEC_OK, "plain forward: %s", r->err.msg);
}

/* A random tree of n nodes over the vocabulary (parent[i] in [-1, i)). */
static void random_tree(uint64_t *rs, int32_t n, int32_t *tok, int32_t *par) {
    for (int32_t i = 0; i < n; i++) {
        tok[i] = (int32_t)(sd_test_splitmix64(rs) % (uint64_t)g_V);
        par[i] = (int32_t)(sd_test_splitmix64(rs) % (uint64_t)(i + 1)) - 1;
        if (i > 0 && sd_test_splitmix64(rs) % 3 == 0) par[i] = i - 1; /* some long chains */
    }
}

/* The path of node v root-first into path[], returns its depth. */
static int32_t path_of(const int32_t *tok, const int32_t *par, int32_t v, int32_t *path) {
    int32_t k = 0, a;
    for (a = v; a >= 0; a = par[a]) k++;
    int32_t d = k - 1;
    for (a = v; a >= 0; a = par[a]) path[d--] = tok[a];
    return k - 1;
}

/* One tree case: forward the tree in `calls` calls, compare every node with plain
 * decoding, compact to a random path and check the continuation. */
static void tree_case(sd_runner *r, sd_runner *ref, uint64_t seed, int32_t n, int calls, const char *what) {
    uint64_t rs = seed;
    int32_t prefix[NCTX], tok[SD_RUNNER_TREE_MAX], par[SD_RUNNER_TREE_MAX], path[SD_RUNNER_TREE_MAX];
    const int32_t np = 3 + (int32_t)(sd_test_splitmix64(&rs) % 20);
    for (int32_t i = 0; i < np; i++) prefix[i] = (int32_t)(sd_test_splitmix64(&rs) % (uint64_t)g_V);
    random_tree(&rs, n, tok, par);
    specdec_status st = sd_runner_forward(r, prefix, np, 0, NULL);
    for (int32_t done = 0, c = 0; st == SPECDEC_OK && done < n; c++) {
        const int32_t m = c == calls - 1 ? n - done : (n - done + 1) / 2;
        st = sd_runner_forward_tree(r, tok + done, m, np, done, par + done, g_tree + (size_t)done * (size_t)g_V);
        done += m;
    }
    SD_CHECK(st == SPECDEC_OK, "%s: tree forward: %s", what, r->err.msg);
    if (st != SPECDEC_OK) return;
    int mism = 0;
    for (int32_t v = 0; v < n; v++) {
        const int32_t k = path_of(tok, par, v, path);
        plain_last(ref, prefix, np, path, k, g_ref);
        if (memcmp(g_ref, g_tree + (size_t)v * (size_t)g_V, (size_t)g_V * sizeof(float)) != 0 && mism++ < 3)
            fprintf(stderr, "%s: node %d (depth %d) differs from plain decoding\n", what, (int)v, (int)k);
    }
    SD_CHECK(mism == 0, "%s: %d of %d nodes differ from plain decoding", what, mism, (int)n);
    /* compact to the path of a random node, then continue plainly */
    const int32_t v = (int32_t)(sd_test_splitmix64(&rs) % (uint64_t)n);
    int32_t keep[SD_RUNNER_TREE_MAX], nk = 0;
    for (int32_t a = v; a >= 0; a = par[a]) nk++;
    for (int32_t a = v, j = nk - 1; a >= 0; a = par[a]) keep[j--] = a;
    st = sd_runner_compact(r, keep, nk);
    SD_CHECK(st == SPECDEC_OK && sd_runner_kv_len(r) == np + nk, "%s: compact: %s, kv %d", what, r->err.msg,
             (int)sd_runner_kv_len(r));
    const int32_t next = (int32_t)(sd_test_splitmix64(&rs) % (uint64_t)g_V);
    st = sd_runner_forward(r, &next, 1, np + nk, g_tree);
    const int32_t k = path_of(tok, par, v, path);
    path[k + 1] = next;
    plain_last(ref, prefix, np, path, k + 1, g_ref);
    SD_CHECK(st == SPECDEC_OK && !memcmp(g_ref, g_tree, (size_t)g_V * sizeof(float)),
             "%s: the continuation after compaction differs from plain decoding", what);
}

static void bad_calls(sd_runner *r) {
    const int32_t prefix[4] = {5, 6, 7, 8}, tok[3] = {1, 2, 3};
    int32_t par[3] = {-1, 0, 0};
    SD_CHECK(sd_runner_forward(r, prefix, 4, 0, NULL) == SPECDEC_OK, "prefix");
    par[1] = 1;
    SD_CHECK(sd_runner_forward_tree(r, tok, 3, 4, 0, par, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "self parent");
    par[1] = -2;
    SD_CHECK(sd_runner_forward_tree(r, tok, 3, 4, 0, par, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "parent -2");
    par[1] = 0;
    SD_CHECK(sd_runner_forward_tree(r, tok, 3, 5, 0, par, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "base past kv");
    SD_CHECK(sd_runner_kv_len(r) == 4, "a refused call changed the cache (kv %d)", (int)sd_runner_kv_len(r));
    int32_t keep[2] = {0, 1};
    SD_CHECK(sd_runner_compact(r, keep, 2) == SPECDEC_ERR_INVALID_ARGUMENT, "compact without a tree");
    const int32_t badtok[1] = {g_V};
    SD_CHECK(sd_runner_forward_tree(r, badtok, 1, 4, 0, par, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "token >= V");
    SD_CHECK(sd_runner_forward_tree(r, tok, 3, 4, 0, par, NULL) == SPECDEC_OK, "good tree: %s", r->err.msg);
    SD_CHECK(sd_runner_forward_tree(r, tok, 1, 4, 2, par, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "wrong first");
    SD_CHECK(sd_runner_forward_tree(r, tok, 1, 3, 3, par, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "wrong base");
    keep[1] = 2; /* 2's parent is 0: a path */
    int32_t bad_keep[2] = {1, 2};
    SD_CHECK(sd_runner_compact(r, bad_keep, 2) == SPECDEC_ERR_INVALID_ARGUMENT, "keep not a root path");
    SD_CHECK(sd_runner_compact(r, keep, 2) == SPECDEC_OK && sd_runner_kv_len(r) == 6, "compact: %s", r->err.msg);
    SD_CHECK(sd_runner_compact(r, keep, 2) == SPECDEC_ERR_INVALID_ARGUMENT, "a second compact");
    int32_t many[SD_RUNNER_TREE_MAX + 1], mpar[SD_RUNNER_TREE_MAX + 1];
    for (int i = 0; i <= SD_RUNNER_TREE_MAX; i++) {
        many[i] = 1;
        mpar[i] = i - 1;
    }
    SD_CHECK(sd_runner_forward_tree(r, many, SD_RUNNER_TREE_MAX + 1, 0, 0, mpar, NULL) == SPECDEC_ERR_INVALID_ARGUMENT,
             "66 nodes");
    SD_CHECK(sd_runner_forward_tree(r, many, 10, NCTX - 5, 0, mpar, NULL) != SPECDEC_OK, "past the context");
}

int main(int argc, char **argv) {
    if (argc < 3) return sd_test_skip("usage: test_tree_runner TARGET_DIR DRAFT_DIR [quick]");
    const int quick = argc > 3 && !strcmp(argv[3], "quick");
    specdec_model *mt = NULL, *md = NULL;
    if (specdec_model_load(argv[1], NULL, &mt) != SPECDEC_OK || specdec_model_load(argv[2], NULL, &md) != SPECDEC_OK) {
        fprintf(stderr, "loading the bundled models: %s\n", specdec_last_error());
        return 1;
    }
    sd_errbuf eb;
    sd_runner *rd = NULL, *rd_emu = NULL, *rd_ref = NULL, *rt = NULL, *rt_ref = NULL;
    SD_CHECK(sd_cpu_runner_create(&md->w, NCTX, NCTX, &rd, &eb) == SPECDEC_OK, "draft runner");
    SD_CHECK(sd_cpu_runner_create(&md->w, NCTX, NCTX, &rd_emu, &eb) == SPECDEC_OK, "draft runner");
    SD_CHECK(sd_cpu_runner_create(&md->w, NCTX, NCTX, &rd_ref, &eb) == SPECDEC_OK, "draft runner");
    SD_CHECK(sd_cpu_runner_create(&mt->w, NCTX, NCTX, &rt, &eb) == SPECDEC_OK, "target runner");
    SD_CHECK(sd_cpu_runner_create(&mt->w, NCTX, NCTX, &rt_ref, &eb) == SPECDEC_OK, "target runner");
    if (rd && rd_emu && rd_ref && rt && rt_ref) {
        rd_emu->tree_ops = NULL; /* sd_runner.c's emulation with forward() */
        g_V = rd->n_vocab;
        g_ref = malloc((size_t)g_V * sizeof(float));
        g_tree = malloc((size_t)SD_RUNNER_TREE_MAX * (size_t)g_V * sizeof(float));
        const int n_cases = quick ? 3 : 12;
        for (int c = 0; c < n_cases; c++) {
            const int32_t n = c == 0 ? SD_RUNNER_TREE_MAX : 1 + (int32_t)((c * 37) % SD_RUNNER_TREE_MAX);
            char what[64];
            snprintf(what, sizeof what, "native draft case %d (%d nodes, %d calls)", c, (int)n, 1 + c % 3);
            tree_case(rd, rd_ref, 1000 + (uint64_t)c, n, 1 + c % 3, what);
            snprintf(what, sizeof what, "emulated draft case %d (%d nodes, %d calls)", c, (int)n, 1 + c % 3);
            tree_case(rd_emu, rd_ref, 1000 + (uint64_t)c, n, 1 + c % 3, what);
        }
        tree_case(rt, rt_ref, 77, quick ? 12 : 40, 1, "native target");
        bad_calls(rd);
        bad_calls(rd_emu);
        free(g_ref);
        free(g_tree);
    }
    sd_runner_destroy(rd);
    sd_runner_destroy(rd_emu);
    sd_runner_destroy(rd_ref);
    sd_runner_destroy(rt);
    sd_runner_destroy(rt_ref);
    specdec_model_free(md);
    specdec_model_free(mt);
    return sd_test_done();
}
