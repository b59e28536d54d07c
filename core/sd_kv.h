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
 * Sliding windows (core/sd_weights.h sd_config). When EVERY layer of a model slides with
 * window W, a query at position p reads rows >= p - W + 1 only, so the rows far enough
 * behind a sequence's end are never read again — as long as the sequence is not rolled
 * back far. sd_kv_release gives the blocks wholly below a row back to the pool: the
 * table keeps its logical numbering, blocks [0, lo) hold SD_KV_RELEASED and [lo, n) are
 * held (the runner decides when, core/sd_runner.h "Sliding-window release"). The rows a
 * released table still serves follow from its first held row: a position p can be
 * computed iff p == 0 (a fresh start) or sd_kv_window_min_len(first row, W) <= p. The
 * release point is rounded down to SD_KV_WINDOW_ALIGN rows because the CUDA attention
 * kernel loads keys in tiles of 32 aligned rows (kernels/cuda/sd_cuda_keymap.h
 * sd_keymap_tile_begin): rows of the tile that holds a window's first key are loaded
 * (then masked) too, so they must stay held. Models mixing local and global layers
 * (Gemma 2/3, Qwen2 with max_window_layers > 0) keep every block: a global layer reads
 * every row, and the table is shared by all layers.
 *
 * Prefix cache (optional per pool: sd_kv_prefix_enable; the scheduler's groups, see
 * specdec_prefix_cache in specdec.h). A pool with one remembers FULL blocks whose rows a
 * sequence computed for known tokens, keyed by the exact token ids of every row from
 * position 0 up to the block's end: the block's own block_tokens ids and its PARENT, the
 * cached block of the rows before it (none for a sequence's first block). A later table
 * starting empty attaches the longest run of cached blocks matching its tokens
 * (sd_kv_prefix_attach) instead of computing those rows; a table that computed rows
 * publishes its full blocks (sd_kv_prefix_publish). Blocks are then shared: each holds a
 * reference count of the tables holding it, and a table never writes its first `shared`
 * blocks (core/sd_runner.h: sd_runner_min_len; only a trim to 0 lets them go). A cached
 * block no table holds stays remembered but counts as free: sd_kv_hold takes blocks from
 * the free stack first, then evicts cached ones, least recently given back first (a
 * table gives its blocks back last first, so a sequence's tail goes before its head).
 * Every call names a SALT (specdec_generate_params.cache_salt): blocks published with one
 * salt match only lookups with the same salt (a tenant's rows are not found by another).
 * Lookups compare every token id (the 64-bit key only picks the bucket) and the parent's
 * identity: each block has a generation, bumped when it is evicted, and a cached block
 * records its parent's, so a block whose parent was evicted (and perhaps reused for
 * other rows) never matches again. Without a prefix cache nothing here changes: no
 * counts, the free stack alone.
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

/* A pool's prefix cache (see "Prefix cache" above; sd_kv.c owns it). */
typedef struct sd_kv_prefix {
    int32_t *ref;         /* [n_blocks] tables holding the block */
    uint8_t *cached;      /* [n_blocks] 1: the block is in the cache (the index and, while ref is 0, the LRU list) */
    int32_t *tokens;      /* [n_blocks * block_tokens] a cached block's token ids */
    uint64_t *key;        /* [n_blocks] a cached block's key (its tokens' and its parent's) */
    int32_t *parent;      /* [n_blocks] a cached block's parent (-1: the block of rows 0..) */
    uint32_t *gen;        /* [n_blocks] generation: bumped when the block is evicted */
    uint32_t *parent_gen; /* [n_blocks] the parent's generation when the block was cached */
    uint64_t *salt;       /* [n_blocks] a cached block's salt (its sequence's: only equal salts share) */
    int32_t *hnext;       /* [n_blocks] bucket chains of cached blocks */
    int32_t *bucket;      /* [mask + 1] chain heads (-1: empty) */
    uint32_t mask;
    int32_t *prev, *next; /* [n_blocks] the LRU list of cached blocks no table holds */
    int32_t lru_head, lru_tail, n_lru;
} sd_kv_prefix;

typedef struct sd_kv_pool {
    int32_t block_tokens; /* rows per block, >= 1 */
    int32_t n_blocks;     /* blocks in the pool */
    int32_t n_free;       /* blocks a hold can take: the free stack's, and cached blocks no table holds */
    int32_t *free_ids;    /* [n_blocks] stack of free block ids, top at n_stack - 1 */
    int32_t n_stack;      /* blocks on the free stack (n_free without a prefix cache) */
    sd_kv_prefix *prefix; /* NULL: no prefix cache */
} sd_kv_pool;

/* The id a table holds for a block given back by sd_kv_release (never a pool id). */
#define SD_KV_RELEASED (-1)
/* Rows a window's release point is rounded down to (a multiple of the CUDA attention
 * tile, SD_KEYMAP_TILE: tests/kv/test_kv_window.c checks both). */
#define SD_KV_WINDOW_ALIGN 32

typedef struct sd_kv_table {
    int32_t *blocks;      /* [cap] block ids of rows [0, n * block_tokens); SD_KV_RELEASED below lo */
    int32_t cap;          /* most blocks: ceil(n_ctx / block_tokens) */
    int32_t n;            /* blocks [0, n) are in the table's numbering */
    int32_t lo;           /* blocks [0, lo) were released; [lo, n) are held (n - lo from the pool) */
    int32_t shared;       /* blocks [0, shared) are in the pool's prefix cache: never written */
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

/* Make t hold the blocks of rows [lo * block_tokens, rows): takes the missing ones from the
 * pool. CONTEXT_FULL when rows exceed the table's capacity or the pool has too few free
 * blocks (then nothing is taken). */
specdec_status sd_kv_hold(sd_kv_table *t, sd_kv_pool *pool, int32_t rows, sd_errbuf *eb);

/* Give the held blocks beyond rows [0, rows) back to the pool (rows >= held: nothing;
 * with a prefix cache a shared block goes back when its last table gives it back);
 * released blocks stay released. rows <= 0: the table starts over empty (lo = n = 0).
 * (A cut inside the released rows, 0 < rows <= the first held row, leaves no block
 * held and those rows released: the runner refuses such truncations, see above.) */
void sd_kv_trim(sd_kv_table *t, sd_kv_pool *pool, int32_t rows);

/* Give back the held blocks whose rows all lie below `row` (blocks [lo, row / bt)),
 * their ids replaced by SD_KV_RELEASED; returns how many. Never the block of row n*bt-1
 * or later (row is capped at the table's end). */
int32_t sd_kv_release(sd_kv_table *t, sd_kv_pool *pool, int32_t row);

/* ---- prefix cache (see "Prefix cache" above) ------------------------------------------
 * Give the pool a prefix cache: only while every block is free (INVALID_ARGUMENT
 * otherwise, nothing changed); OUT_OF_MEMORY. Freed with the pool. */
specdec_status sd_kv_prefix_enable(sd_kv_pool *pool, sd_errbuf *eb);
/* For an empty table (n == 0; else nothing): attach the longest run of cached blocks
 * holding tokens[0 .. k * block_tokens) for k * block_tokens <= rows; returns the rows
 * attached (k * block_tokens; 0 without a prefix cache). The table then holds k blocks,
 * all shared. */
int32_t sd_kv_prefix_attach(sd_kv_table *t, sd_kv_pool *pool, const int32_t *tokens, int32_t rows, uint64_t salt);
/* The table's rows [0, rows) hold tokens[0 .. rows) (computed, never to be rewritten):
 * cache its full blocks among them, in order from its first unshared one. A block whose
 * rows another cached block already holds is swapped for that one (this table's copy
 * goes back to the pool), so equal prefixes end up in one copy. Returns the table's
 * shared blocks (0 without a prefix cache). */
int32_t sd_kv_prefix_publish(sd_kv_table *t, sd_kv_pool *pool, const int32_t *tokens, int32_t rows, uint64_t salt);
/* Cached blocks no table holds (free to evict; counted in n_free). */
static inline int32_t sd_kv_cached(const sd_kv_pool *pool) { return pool->prefix ? pool->prefix->n_lru : 0; }

/* Blocks t takes from the pool now. */
static inline int32_t sd_kv_held(const sd_kv_table *t) { return t->n - t->lo; }
/* Its first held row (0 when nothing was released). */
static inline int32_t sd_kv_first_row(const sd_kv_table *t, int32_t block_tokens) { return t->lo * block_tokens; }

/* ---- window arithmetic (window W >= 1, margin M >= 0 rows) ---------------------------
 * sd_kv_window_keep(len, W, M): the first row any position >= len - M reads, rounded
 * down to SD_KV_WINDOW_ALIGN: release below it after the sequence reached len and the
 * positions the caller may still go back to (len - M and later) keep their keys. */
static inline int32_t sd_kv_window_keep(int32_t len, int32_t window, int32_t margin) {
    const int64_t first = (int64_t)len - margin - window + 1;
    return first <= 0 ? 0 : (int32_t)(first / SD_KV_WINDOW_ALIGN * SD_KV_WINDOW_ALIGN);
}
/* The smallest position > 0 whose keys (and the aligned tile the CUDA kernel loads them
 * in) all lie at or above first_row (0 when first_row is 0: every position). */
static inline int32_t sd_kv_window_min_len(int32_t first_row, int32_t window) {
    if (first_row <= 0) return 0;
    const int64_t up = ((int64_t)first_row + SD_KV_WINDOW_ALIGN - 1) / SD_KV_WINDOW_ALIGN * SD_KV_WINDOW_ALIGN;
    return (int32_t)(up + window - 1);
}
/* Most blocks a sequence holds at any time when it releases with sd_kv_window_keep(len,
 * W, M) after every call and no call appends more than `chunk` rows to its cache: the
 * rows from the release point (rounded down to a block) to the end of the last call
 * (rounded up to a block) — chunk + M + W - 1 rows, plus ALIGN - 1 and two partial
 * blocks. Checked against a simulation in tests/kv/test_kv_window.c. */
static inline int32_t sd_kv_window_blocks(int32_t window, int32_t margin, int32_t chunk, int32_t block_tokens) {
    const int64_t rows = (int64_t)chunk + margin + window - 1 + (SD_KV_WINDOW_ALIGN - 1) + 2 * (int64_t)(block_tokens - 1);
    const int64_t b = rows / block_tokens;
    return b > INT32_MAX ? INT32_MAX : (int32_t)b;
}

/* Physical row of logical row j (lo * block_tokens <= j < n * block_tokens). */
static inline int64_t sd_kv_row(const sd_kv_table *t, int32_t block_tokens, int32_t j) {
    return (int64_t)t->blocks[j / block_tokens] * block_tokens + j % block_tokens;
}

#ifdef __cplusplus
}
#endif

#endif
