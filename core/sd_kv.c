/* sd_kv.c — paged KV-cache bookkeeping (see sd_kv.h). */
#include "sd_kv.h"

#include <string.h>

#include "sd_alloc.h"

specdec_status sd_kv_pool_init(sd_kv_pool *pool, int32_t n_blocks, int32_t block_tokens, sd_errbuf *eb) {
    memset(pool, 0, sizeof *pool);
    if (n_blocks < 1 || block_tokens < 1)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "KV pool: %d blocks of %d tokens (both must be >= 1)",
                       (int)n_blocks, (int)block_tokens);
    pool->free_ids = sd_malloc((size_t)n_blocks * sizeof(int32_t));
    if (!pool->free_ids)
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "KV pool: out of memory (free list of %d blocks)", (int)n_blocks);
    pool->block_tokens = block_tokens;
    pool->n_blocks = n_blocks;
    pool->n_free = n_blocks;
    for (int32_t i = 0; i < n_blocks; i++) pool->free_ids[i] = n_blocks - 1 - i; /* block 0 on top */
    return SPECDEC_OK;
}

void sd_kv_pool_free(sd_kv_pool *pool) {
    if (!pool) return;
    sd_free(pool->free_ids);
    memset(pool, 0, sizeof *pool);
}

specdec_status sd_kv_table_init(sd_kv_table *t, int32_t n_ctx, int32_t block_tokens, sd_errbuf *eb) {
    memset(t, 0, sizeof *t);
    if (n_ctx < 1 || block_tokens < 1)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "KV table: n_ctx %d, block_tokens %d (both must be >= 1)",
                       (int)n_ctx, (int)block_tokens);
    const int32_t cap = sd_kv_blocks_for(n_ctx, block_tokens);
    t->blocks = sd_malloc((size_t)cap * sizeof(int32_t));
    if (!t->blocks) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "KV table: out of memory (%d blocks)", (int)cap);
    t->cap = cap;
    return SPECDEC_OK;
}

void sd_kv_table_free(sd_kv_table *t) {
    if (!t) return;
    sd_free(t->blocks);
    memset(t, 0, sizeof *t);
}

specdec_status sd_kv_hold(sd_kv_table *t, sd_kv_pool *pool, int32_t rows, sd_errbuf *eb) {
    const int32_t want = sd_kv_blocks_for(rows, pool->block_tokens);
    if (want <= t->n) return SPECDEC_OK;
    if (want > t->cap)
        return sd_fail(eb, SPECDEC_ERR_CONTEXT_FULL, "KV cache: %d rows need %d blocks; a sequence holds at most %d",
                       (int)rows, (int)want, (int)t->cap);
    if (want - t->n > pool->n_free)
        return sd_fail(eb, SPECDEC_ERR_CONTEXT_FULL,
                       "KV pool exhausted: %d rows need %d more blocks of %d tokens, %d of %d are free", (int)rows,
                       (int)(want - t->n), (int)pool->block_tokens, (int)pool->n_free, (int)pool->n_blocks);
    while (t->n < want) t->blocks[t->n++] = pool->free_ids[--pool->n_free];
    return SPECDEC_OK;
}

void sd_kv_trim(sd_kv_table *t, sd_kv_pool *pool, int32_t rows) {
    const int32_t keep = sd_kv_blocks_for(rows, pool->block_tokens);
    while (t->n > keep && t->n > t->lo) pool->free_ids[pool->n_free++] = t->blocks[--t->n];
    if (rows <= 0) t->n = t->lo = 0; /* an empty sequence starts over */
}

int32_t sd_kv_release(sd_kv_table *t, sd_kv_pool *pool, int32_t row) {
    int32_t below = row <= 0 ? 0 : row / pool->block_tokens, given = 0;
    if (below > t->n - 1) below = t->n - 1; /* the last block stays */
    while (t->lo < below) {
        pool->free_ids[pool->n_free++] = t->blocks[t->lo];
        t->blocks[t->lo++] = SD_KV_RELEASED;
        given++;
    }
    return given;
}
