/* fwd_pool_check.h — the paged KV pool running dry, for any backend's runner group
 * (header-only; tests/forward/test_runner_batch.c on the CPU, tests/cuda/
 * test_cuda_group.c on a GPU). `g` must be a fresh group of 4 blocks of 4 tokens, n_ctx
 * 16, max_batch 16, over a model of config cfg; the check destroys it. */
#ifndef FWD_POOL_CHECK_H
#define FWD_POOL_CHECK_H

#include <stdlib.h>
#include <string.h>

#include "sd_kv.h"
#include "sd_runner.h"
#include "sd_test.h"
#include "sd_weights.h"

/* A batch that needs more blocks than are free fails with CONTEXT_FULL before
 * computing anything; single forwards and trees past the pool too; trimming gives
 * blocks back; destroying the runners returns every block. */
static inline void fwd_check_pool_exhaustion(sd_runner_group *g, const sd_config *cfg) {
    sd_errbuf eb = {{0}};
    sd_runner *a = NULL, *b = NULL;
    SD_CHECK(sd_runner_group_add(g, &a, &eb) == SPECDEC_OK && sd_runner_group_add(g, &b, &eb) == SPECDEC_OK, "%s",
             eb.msg);
    if (!a || !b) return;
    int32_t tok[16];
    for (int i = 0; i < 16; i++) tok[i] = (i * 7 + 3) % cfg->vocab_size;
    float *la = malloc(sizeof(float) * 16 * (size_t)cfg->vocab_size), *lb = malloc(sizeof(float) * 16 * (size_t)cfg->vocab_size);
    SD_CHECK(sd_runner_forward(a, tok, 12, 0, NULL) == SPECDEC_OK, "%s", a->err.msg); /* 3 blocks */
    sd_runner_seg segs[2] = {{a, tok + 12, 1, 12, NULL, 0, la, NULL, NULL}, {b, tok, 8, 0, NULL, 0, lb, NULL, NULL}};
    SD_CHECK(sd_runner_forward_batch(segs, 2, &eb) == SPECDEC_ERR_CONTEXT_FULL, "pool exhaustion not reported");
    SD_CHECK(strstr(eb.msg, "pool") != NULL, "detail: %s", eb.msg);
    SD_CHECK(a->kv_len == 12 && b->kv_len == 0 && sd_kv_pool_used(&g->pool) == 3, "state after: %d %d %d",
             (int)a->kv_len, (int)b->kv_len, (int)sd_kv_pool_used(&g->pool));
    SD_CHECK(sd_runner_forward(b, tok, 5, 0, NULL) == SPECDEC_ERR_CONTEXT_FULL, "single forward past the pool");
    const int32_t par[2] = {-1, 0}, par3[3] = {1, 2, 3};
    SD_CHECK(sd_runner_forward_tree(b, tok, 2, 0, 0, par, NULL) == SPECDEC_OK, "a tree in the last block: %s", b->err.msg);
    SD_CHECK(sd_runner_forward_tree(b, tok, 3, 0, 2, par3, NULL) == SPECDEC_ERR_CONTEXT_FULL, "a tree past the pool");
    SD_CHECK(b->kv_len <= 2 && b->tree.n == 0 && sd_kv_pool_used(&g->pool) == 4, "after the refused tree: %d %d %d",
             (int)b->kv_len, (int)b->tree.n, (int)sd_kv_pool_used(&g->pool));
    sd_runner_truncate(a, 4); /* gives 2 blocks back */
    sd_runner_truncate(b, 0);
    segs[0].tokens = tok + 4;
    segs[0].pos = 4;
    SD_CHECK(sd_runner_forward_batch(segs, 2, &eb) == SPECDEC_OK, "after trimming: %s", eb.msg);
    SD_CHECK(sd_kv_pool_used(&g->pool) == 4 && a->kv_len == 5 && b->kv_len == 8, "accounting %d",
             (int)sd_kv_pool_used(&g->pool));
    sd_runner_destroy(a);
    sd_runner_destroy(b);
    SD_CHECK(g->pool.n_free == 4 && g->n_runners == 0, "blocks returned");
    sd_runner_group_destroy(g);
    free(la);
    free(lb);
}

#endif
