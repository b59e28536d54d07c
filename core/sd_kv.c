/* sd_kv.c — paged KV-cache bookkeeping (see sd_kv.h). */
#include "sd_kv.h"

#include <string.h>

#include "sd_alloc.h"
#include "sd_math.h"

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
    pool->n_free = pool->n_stack = n_blocks;
    for (int32_t i = 0; i < n_blocks; i++) pool->free_ids[i] = n_blocks - 1 - i; /* block 0 on top */
    return SPECDEC_OK;
}

static void prefix_free(sd_kv_prefix *px) {
    if (!px) return;
    sd_free(px->ref);
    sd_free(px->cached);
    sd_free(px->tokens);
    sd_free(px->key);
    sd_free(px->parent);
    sd_free(px->gen);
    sd_free(px->parent_gen);
    sd_free(px->salt);
    sd_free(px->hnext);
    sd_free(px->bucket);
    sd_free(px->prev);
    sd_free(px->next);
    sd_free(px);
}

void sd_kv_pool_free(sd_kv_pool *pool) {
    if (!pool) return;
    prefix_free(pool->prefix);
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

/* ------------------------------------------------------------------------- */
/* the prefix cache (sd_kv.h "Prefix cache")                                  */
/* ------------------------------------------------------------------------- */
static void lru_remove(sd_kv_prefix *px, int32_t b) {
    const int32_t p = px->prev[b], n = px->next[b];
    if (p >= 0) px->next[p] = n;
    else px->lru_head = n;
    if (n >= 0) px->prev[n] = p;
    else px->lru_tail = p;
    px->prev[b] = px->next[b] = -1;
    px->n_lru--;
}

static void lru_push(sd_kv_prefix *px, int32_t b) {
    px->prev[b] = px->lru_tail;
    px->next[b] = -1;
    if (px->lru_tail >= 0) px->next[px->lru_tail] = b;
    else px->lru_head = b;
    px->lru_tail = b;
    px->n_lru++;
}

/* Take cached block b out of the index (its rows are about to be overwritten). */
static void evict(sd_kv_prefix *px, int32_t b) {
    int32_t *link = &px->bucket[px->key[b] & px->mask];
    while (*link >= 0 && *link != b) link = &px->hnext[*link];
    if (*link == b) *link = px->hnext[b];
    px->cached[b] = 0;
    px->gen[b]++;
}

/* A free block for a table: the free stack's top, else the least recently given back
 * cached block (evicted). The caller checked n_free > 0. */
static int32_t take_block(sd_kv_pool *pool) {
    sd_kv_prefix *px = pool->prefix;
    int32_t b;
    if (pool->n_stack > 0) b = pool->free_ids[--pool->n_stack];
    else {
        b = px->lru_head;
        lru_remove(px, b);
        evict(px, b);
    }
    pool->n_free--;
    if (px) px->ref[b] = 1;
    return b;
}

/* A table gives block b back: to the free stack, or (cached) to the LRU list, once no
 * table holds it. */
static void give_block(sd_kv_pool *pool, int32_t b) {
    sd_kv_prefix *px = pool->prefix;
    if (px && --px->ref[b] > 0) return;
    if (px && px->cached[b]) lru_push(px, b);
    else pool->free_ids[pool->n_stack++] = b;
    pool->n_free++;
}

/* A table takes a reference on cached block c (attach, or publish's swap to an equal copy);
 * unheld until now, it leaves the LRU list and no longer counts as free. */
static void ref_cached(sd_kv_pool *pool, int32_t c) {
    if (pool->prefix->ref[c]++ > 0) return;
    lru_remove(pool->prefix, c);
    pool->n_free--;
}

/* The key of a block holding tok[0 .. bt) after the cached block `parent` (-1: none; then the
 * salt starts the key). */
static uint64_t block_key(const sd_kv_prefix *px, int32_t parent, const int32_t *tok, int32_t bt, uint64_t salt) {
    uint64_t h = parent >= 0 ? px->key[parent] : sd_mix64(0x243f6a8885a308d3ull ^ salt);
    for (int32_t i = 0; i < bt; i++) h = sd_mix64(h + 0x9e3779b97f4a7c15ull + (uint32_t)tok[i]);
    return h;
}

/* The cached block holding tok[0 .. bt) after `parent` (-1: none) with `salt`, or -1. */
static int32_t lookup(const sd_kv_pool *pool, int32_t parent, const int32_t *tok, uint64_t key, uint64_t salt) {
    const sd_kv_prefix *px = pool->prefix;
    const int32_t bt = pool->block_tokens;
    for (int32_t c = px->bucket[key & px->mask]; c >= 0; c = px->hnext[c])
        if (px->key[c] == key && px->parent[c] == parent && px->salt[c] == salt &&
            (parent < 0 || px->parent_gen[c] == px->gen[parent]) &&
            memcmp(px->tokens + (size_t)c * bt, tok, (size_t)bt * sizeof(int32_t)) == 0)
            return c;
    return -1;
}

specdec_status sd_kv_prefix_enable(sd_kv_pool *pool, sd_errbuf *eb) {
    if (pool->prefix) return SPECDEC_OK;
    if (!pool->free_ids || pool->n_free != pool->n_blocks)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "KV pool: a prefix cache needs every block free (%d of %d are)",
                       (int)pool->n_free, (int)pool->n_blocks);
    const size_t n = (size_t)pool->n_blocks;
    size_t nb = 16;
    while (nb < 2 * n) nb *= 2;
    sd_kv_prefix *px = sd_calloc(1, sizeof *px);
    if (px) {
        px->ref = sd_calloc(n, sizeof *px->ref);
        px->cached = sd_calloc(n, sizeof *px->cached);
        px->tokens = sd_malloc(n * (size_t)pool->block_tokens * sizeof *px->tokens);
        px->key = sd_calloc(n, sizeof *px->key);
        px->parent = sd_malloc(n * sizeof *px->parent);
        px->gen = sd_calloc(n, sizeof *px->gen);
        px->parent_gen = sd_calloc(n, sizeof *px->parent_gen);
        px->salt = sd_calloc(n, sizeof *px->salt);
        px->hnext = sd_malloc(n * sizeof *px->hnext);
        px->bucket = sd_malloc(nb * sizeof *px->bucket);
        px->prev = sd_malloc(n * sizeof *px->prev);
        px->next = sd_malloc(n * sizeof *px->next);
    }
    if (!px || !px->ref || !px->cached || !px->tokens || !px->key || !px->parent || !px->gen || !px->parent_gen || !px->salt ||
        !px->hnext || !px->bucket || !px->prev || !px->next) {
        prefix_free(px);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "KV pool: out of memory (prefix cache of %d blocks of %d tokens)",
                       (int)pool->n_blocks, (int)pool->block_tokens);
    }
    for (size_t i = 0; i < n; i++) px->prev[i] = px->next[i] = px->hnext[i] = px->parent[i] = -1;
    for (size_t i = 0; i < nb; i++) px->bucket[i] = -1;
    px->mask = (uint32_t)(nb - 1);
    px->lru_head = px->lru_tail = -1;
    pool->prefix = px;
    return SPECDEC_OK;
}

int32_t sd_kv_prefix_attach(sd_kv_table *t, sd_kv_pool *pool, const int32_t *tokens, int32_t rows, uint64_t salt) {
    sd_kv_prefix *px = pool->prefix;
    if (!px || t->n != 0 || rows <= 0) return 0;
    const int32_t bt = pool->block_tokens;
    int32_t want = rows / bt, parent = -1;
    if (want > t->cap) want = t->cap;
    while (t->n < want) {
        const int32_t *tok = tokens + (size_t)t->n * bt;
        const int32_t c = lookup(pool, parent, tok, block_key(px, parent, tok, bt, salt), salt);
        if (c < 0) break;
        ref_cached(pool, c);
        t->blocks[t->n++] = parent = c;
    }
    t->lo = 0;
    t->shared = t->n;
    return t->n * bt;
}

int32_t sd_kv_prefix_publish(sd_kv_table *t, sd_kv_pool *pool, const int32_t *tokens, int32_t rows, uint64_t salt) {
    sd_kv_prefix *px = pool->prefix;
    if (!px || t->lo > 0) return 0; /* released rows are not the table's to publish */
    const int32_t bt = pool->block_tokens;
    int32_t full = rows / bt;
    if (full > t->n) full = t->n;
    while (t->shared < full) {
        const int32_t i = t->shared, b = t->blocks[i], parent = i > 0 ? t->blocks[i - 1] : -1;
        const int32_t *tok = tokens + (size_t)i * bt;
        if (px->cached[b]) break; /* cannot happen: a table's cached blocks lead it */
        const uint64_t key = block_key(px, parent, tok, bt, salt);
        const int32_t c = lookup(pool, parent, tok, key, salt);
        if (c >= 0) { /* the same rows are cached already: share that copy */
            ref_cached(pool, c);
            t->blocks[i] = c;
            give_block(pool, b);
        } else {
            px->cached[b] = 1;
            px->key[b] = key;
            px->parent[b] = parent;
            px->parent_gen[b] = parent >= 0 ? px->gen[parent] : 0;
            px->salt[b] = salt;
            memcpy(px->tokens + (size_t)b * bt, tok, (size_t)bt * sizeof(int32_t));
            px->hnext[b] = px->bucket[key & px->mask];
            px->bucket[key & px->mask] = b;
        }
        t->shared++;
    }
    return t->shared;
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
    while (t->n < want) t->blocks[t->n++] = take_block(pool);
    return SPECDEC_OK;
}

void sd_kv_trim(sd_kv_table *t, sd_kv_pool *pool, int32_t rows) {
    const int32_t keep = sd_kv_blocks_for(rows, pool->block_tokens);
    while (t->n > keep && t->n > t->lo) give_block(pool, t->blocks[--t->n]);
    if (t->shared > t->n) t->shared = t->n;
    if (rows <= 0) t->n = t->lo = t->shared = 0; /* an empty sequence starts over */
}

int32_t sd_kv_release(sd_kv_table *t, sd_kv_pool *pool, int32_t row) {
    int32_t below = row <= 0 ? 0 : row / pool->block_tokens, given = 0;
    if (below > t->n - 1) below = t->n - 1; /* the last block stays */
    while (t->lo < below) {
        give_block(pool, t->blocks[t->lo]);
        t->blocks[t->lo++] = SD_KV_RELEASED;
        given++;
    }
    return given;
}
