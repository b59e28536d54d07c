/* sd_kv.h — paged KV-cache bookkeeping, shared by every backend (no storage here: the
 * backend owns the memory the block ids index).
 *
 * A model's cache is a POOL of n_blocks blocks of block_tokens rows each (one pool per
 * model instance, core/sd_runner.h "Groups"). A sequence holds a block TABLE: logical
 * cache row j (the token at position j, or a tree node's row) lives in physical row
 *     table.blocks[j / block_tokens] * block_tokens + j % block_tokens
 * of the backend's per-layer K and V arrays [n_blocks * block_tokens][kv_dim]. A table
 * holds the blocks of rows [0, rows) for the rows its sequence has written: blocks are
 * taken from the pool when a forward needs more rows (sd_kv_hold) and given back when
 * the sequence is rolled back (sd_kv_trim: rollback by length). The pool's free list is
 * a stack, so which physical block a sequence gets is deterministic for a given history,
 * and neither call allocates memory: both run inside the generation loop.
 *
 * Sliding windows (core/sd_weights.h) bound which rows attention reads, not which
 * blocks a table holds: a window's old blocks are not given back, because a sequence
 * may be rolled back to any earlier length (sd_runner_truncate, then reads the rows
 * before it again), models mixing local and global layers (Gemma 2/3, Qwen2 upper
 * layers) keep one table for all layers and their global layers need every row, and
 * the scheduler reserves blocks by sequence length (docs/BATCHING.md).
 *
 * Nothing here is thread-safe: a pool and its tables belong to one thread at a time
 * (the engine's caller, or the scheduler's loop thread). */
#ifndef SD_KV_H
#define SD_KV_H

#include <stdint.h>

#include "specdec.h"
#include "sd_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default rows per block (specdec_scheduler_params.kv_block_tokens). */
#define SD_KV_DEFAULT_BLOCK_TOKENS 16

typedef struct sd_kv_pool {
    int32_t block_tokens; /* rows per block, >= 1 */
    int32_t n_blocks;     /* blocks in the pool */
    int32_t n_free;       /* blocks on the free stack */
    int32_t *free_ids;    /* [n_blocks] stack of free block ids, top at n_free - 1 */
} sd_kv_pool;

typedef struct sd_kv_table {
    int32_t *blocks;      /* [cap] block ids of rows [0, n * block_tokens) */
    int32_t cap;          /* most blocks: ceil(n_ctx / block_tokens) */
    int32_t n;            /* blocks held */
} sd_kv_table;

/* Blocks needed for `rows` rows (rows <= 0: none). */
static inline int32_t sd_kv_blocks_for(int32_t rows, int32_t block_tokens) {
    return rows <= 0 ? 0 : (int32_t)(((int64_t)rows + block_tokens - 1) / block_tokens);
}

/* A pool of n_blocks free blocks (ids 0 .. n_blocks - 1, block 0 on top). INVALID_ARGUMENT
 * for n_blocks < 1 or block_tokens < 1; OUT_OF_MEMORY. On failure the pool is empty
 * (free_ids NULL) and sd_kv_pool_free is still safe. */
specdec_status sd_kv_pool_init(sd_kv_pool *pool, int32_t n_blocks, int32_t block_tokens, sd_errbuf *eb);
void sd_kv_pool_free(sd_kv_pool *pool);
static inline int32_t sd_kv_pool_used(const sd_kv_pool *pool) { return pool->n_blocks - pool->n_free; }

/* A table for sequences of up to n_ctx rows (cap = ceil(n_ctx / block_tokens) ids),
 * holding nothing. INVALID_ARGUMENT / OUT_OF_MEMORY; sd_kv_table_free is always safe. */
specdec_status sd_kv_table_init(sd_kv_table *t, int32_t n_ctx, int32_t block_tokens, sd_errbuf *eb);
void sd_kv_table_free(sd_kv_table *t);

/* Make t hold the blocks of rows [0, rows): takes the missing ones from the pool.
 * CONTEXT_FULL when rows exceed the table's capacity or the pool has too few free
 * blocks (then nothing is taken). */
specdec_status sd_kv_hold(sd_kv_table *t, sd_kv_pool *pool, int32_t rows, sd_errbuf *eb);

/* Give the blocks beyond rows [0, rows) back to the pool (rows >= held: nothing). */
void sd_kv_trim(sd_kv_table *t, sd_kv_pool *pool, int32_t rows);

/* Physical row of logical row j (j < t->n * block_tokens). */
static inline int64_t sd_kv_row(const sd_kv_table *t, int32_t block_tokens, int32_t j) {
    return (int64_t)t->blocks[j / block_tokens] * block_tokens + j % block_tokens;
}

#ifdef __cplusplus
}
#endif

#endif
