/* sd_cuda_keymap.h — which cache rows each query token of a forward pass reads and
 * writes, and how the split-KV attention kernel cuts that work into blocks, splits and
 * tiles. Plain C, host + device (SD_HD): the kernels (sd_cuda_attention.cu,
 * sd_cuda_rope.cu) run these functions, and tests/cuda/test_cuda_keymap.c runs the same
 * functions on the CPU to check the index arithmetic against a straightforward
 * reference without a GPU. No CUDA types here.
 *
 * Paged cache (core/sd_kv.h): a sequence's LOGICAL row l (its token at position l, or a
 * tree node's row) lives in PHYSICAL row table[l / bt] * bt + l % bt of the group's
 * per-layer K and V arrays [n_kv][cache_rows][hd]; table NULL = the identity (kernel
 * tests with one contiguous cache).
 *
 * Key map of token m. Its keys are a VIRTUAL sequence j = 0 .. nkeys - 1:
 *   j <  kpre : logical row j                      (the sequence's cache)
 *   j >= kpre : logical row ext[j - kpre]           (a tree node: its ancestors'
 *                                                    rows root-first, then its own)
 * A chain token at position p has kpre = p + 1 and no extra rows; tree node v at depth
 * k of a tree at `base` has kpre = base and ext = base + (ancestor at depth 0 .. k), so
 * its virtual keys are exactly the keys plain decoding of its path sees, in order.
 * The kernel keeps its split boundaries (multiples of SD_CUDA_ATTN_SPLIT) and its tile
 * boundaries (multiples of SD_KEYMAP_TILE from the split start) in VIRTUAL order, and a
 * token's work is fixed by (its q, its virtual key sequence): batched == alone, tree
 * node == plain decoding of its path, paged == contiguous, all bitwise.
 *
 * Two ways to describe the tokens of a launch:
 * - CHAIN mode (tok == NULL): n consecutive tokens of ONE sequence at positions
 *   pos0 (+ *pos_dev, read on the device for CUDA-graph replay) + m, block table
 *   `table`; one attention unit of all n tokens. The device round and kernel tests.
 * - GENERAL mode: a tok[] entry per token (its own table, position, key map) and a
 *   list of attention blocks blk[] (below). Every host-path forward of the runner.
 *
 * Attention blocking (sd_cuda_attention.cu, grid (n_kv, n_split, n_blocks)): a block
 * works on up to SD_KEYMAP_PAIRS (token, query-head-of-its-kv-group) pairs of ONE UNIT
 * = consecutive tokens of one segment of one sequence (so one block table). Pair p of
 * a unit is token m0 + p / G, head g * G + p % G (G = n_heads / n_kv). A K/V tile is
 * loaded into shared memory once and used by every pair of the block when it is
 * SHARED: no token of the block has an extra (tree) key in it — virtual keys below
 * every tree token's kpre map to logical rows j for all of them. A tile that holds a
 * tree token's extra keys is loaded once PER TOKEN (its own mapping) and used by that
 * token's pairs only. Chain units share every tile; a tree's nodes share the prefix
 * [0, base) tile by tile and load at most 4 tiles (their ≤ 65 ancestor rows) alone. */
#ifndef SD_CUDA_KEYMAP_H
#define SD_CUDA_KEYMAP_H

#include <stddef.h>
#include <stdint.h>

#include "sd_hostdev.h"

/* Keys per tile (one per lane of a warp) and (token, head) pairs per attention block. */
#define SD_KEYMAP_TILE 32
#define SD_KEYMAP_PAIRS 32
/* Virtual keys per split: a constant, never derived from the batch. */
#define SD_CUDA_ATTN_SPLIT 128

/* One query token of a GENERAL-mode launch (device memory, 32 bytes). */
typedef struct sd_cuda_tokmap {
    const int32_t *table; /* its sequence's block table (device), NULL = identity */
    int32_t pos;          /* absolute position: the RoPE angle */
    int32_t wrow;         /* logical row its K / V are written to */
    int32_t kpre;         /* virtual keys [0, kpre) = logical rows [0, kpre) */
    int32_t next;         /* then logical rows ext[ext_off .. ext_off + next) */
    int32_t ext_off;      /* into sd_cuda_keymap.ext */
    int32_t pad_;
} sd_cuda_tokmap;

/* One attention block of a GENERAL-mode launch: pairs pair0 .. of the unit of tokens
 * m0 .. m0 + n_tok - 1 (launch-relative). */
typedef struct sd_cuda_attblk {
    int32_t m0, n_tok, pair0;
} sd_cuda_attblk;

/* The key map of a launch (part of the RoPE and attention argument structs). Fields a
 * mode does not use are ignored. */
typedef struct sd_cuda_keymap {
    int32_t block_tokens;       /* rows per KV block (>= 1) */
    /* CHAIN mode */
    const int32_t *table;       /* the sequence's block table, NULL = identity */
    int32_t pos0;               /* first position, or the offset from *pos_dev */
    const int64_t *pos_dev;     /* NULL, or a device int64 added to pos0 */
    /* GENERAL mode */
    const sd_cuda_tokmap *tok;  /* [n] per token; NULL selects CHAIN mode */
    const int32_t *ext;         /* the extra (tree) rows of all tokens */
    const sd_cuda_attblk *blk;  /* [n_blk] attention blocks */
    int32_t n_blk;
    int32_t max_keys;           /* largest nkeys of the launch's tokens (grid: splits) */
} sd_cuda_keymap;

/* Token m, resolved. */
typedef struct sd_cuda_tok {
    const int32_t *table;
    const int32_t *ext;  /* its extra rows (NULL: none) */
    int32_t pos, wrow, kpre, nkeys;
} sd_cuda_tok;

/* The launch's base position: CHAIN mode pos0 (+ *pos_dev, read where the map lives:
 * on the device in the kernels), 0 in GENERAL mode. Kernels read it once. */
SD_HD int32_t sd_keymap_base(const sd_cuda_keymap *k) {
    return k->tok ? 0 : k->pos0 + (k->pos_dev ? (int32_t)*k->pos_dev : 0);
}

/* Token m of the launch; base = sd_keymap_base(k). */
SD_HD sd_cuda_tok sd_keymap_tok(const sd_cuda_keymap *k, int32_t m, int32_t base) {
    sd_cuda_tok t;
    if (!k->tok) {
        t.table = k->table;
        t.ext = 0;
        t.pos = base + m;
        t.wrow = t.pos;
        t.kpre = t.pos + 1;
        t.nkeys = t.kpre;
        return t;
    }
    const sd_cuda_tokmap *e = &k->tok[m];
    t.table = e->table;
    t.ext = e->next > 0 ? k->ext + e->ext_off : 0;
    t.pos = e->pos;
    t.wrow = e->wrow;
    t.kpre = e->kpre;
    t.nkeys = e->kpre + e->next;
    return t;
}

/* Logical row of virtual key j (0 <= j < nkeys). */
SD_HD int32_t sd_keymap_lrow(const sd_cuda_tok *t, int32_t j) { return j < t->kpre ? j : t->ext[j - t->kpre]; }

/* Physical row of logical row l through a block table (NULL: identity). */
SD_HD int64_t sd_keymap_phys(const int32_t *table, int32_t bt, int32_t l) {
    return table ? (int64_t)table[l / bt] * bt + l % bt : (int64_t)l;
}

/* Attention blocks of a launch of n tokens (grid.z). */
SD_HD int32_t sd_keymap_n_blocks(const sd_cuda_keymap *k, int32_t n, int32_t G) {
    return k->tok ? k->n_blk : (int32_t)(((int64_t)n * G + SD_KEYMAP_PAIRS - 1) / SD_KEYMAP_PAIRS);
}

/* Block z's share of the work. */
typedef struct sd_cuda_attunit {
    int32_t m0;       /* the unit's first token */
    int32_t pair0;    /* the block's first pair within the unit */
    int32_t npairs;   /* pairs of the block (1 .. SD_KEYMAP_PAIRS) */
    int32_t m_first, m_last; /* the tokens those pairs belong to */
} sd_cuda_attunit;

SD_HD sd_cuda_attunit sd_keymap_unit(const sd_cuda_keymap *k, int32_t n, int32_t G, int32_t z) {
    sd_cuda_attunit u;
    int32_t n_tok = n;
    if (k->tok) {
        u.m0 = k->blk[z].m0;
        n_tok = k->blk[z].n_tok;
        u.pair0 = k->blk[z].pair0;
    } else {
        u.m0 = 0;
        u.pair0 = z * SD_KEYMAP_PAIRS;
    }
    const int32_t left = n_tok * G - u.pair0;
    u.npairs = left < SD_KEYMAP_PAIRS ? left : SD_KEYMAP_PAIRS;
    u.m_first = u.m0 + u.pair0 / G;
    u.m_last = u.m0 + (u.pair0 + u.npairs - 1) / G;
    return u;
}

/* Token and query head of pair p (0 <= p < npairs) of block u. */
SD_HD int32_t sd_keymap_pair_tok(const sd_cuda_attunit *u, int32_t G, int32_t p) { return u->m0 + (u->pair0 + p) / G; }
SD_HD int32_t sd_keymap_pair_head(const sd_cuda_attunit *u, int32_t G, int32_t g, int32_t p) {
    return g * G + (u->pair0 + p) % G;
}

/* The block's key range: kv_end = the most keys any of its tokens sees; shared_end =
 * virtual keys below it map identically for all its tokens (the smallest kpre of a
 * token with extra keys; INT32_MAX when none has any). */
SD_HD void sd_keymap_block_keys(const sd_cuda_keymap *k, const sd_cuda_attunit *u, int32_t base, int32_t *kv_end,
                                int32_t *shared_end) {
    int32_t e = 0, s = INT32_MAX;
    for (int32_t m = u->m_first; m <= u->m_last; m++) {
        const sd_cuda_tok t = sd_keymap_tok(k, m, base);
        if (t.nkeys > e) e = t.nkeys;
        if (t.nkeys > t.kpre && t.kpre < s) s = t.kpre;
    }
    *kv_end = e;
    *shared_end = s;
}

/* A tile [t0, t0 + SD_KEYMAP_TILE) is loaded once for the whole block. */
SD_HD int sd_keymap_tile_shared(int32_t t0, int32_t shared_end) {
    return (int64_t)t0 + SD_KEYMAP_TILE <= (int64_t)shared_end;
}

/* Physical row that row r of tile t0 holds, or -1 (zeros): shared tile (tok NULL):
 * logical row t0 + r of the unit's table for t0 + r < key_end; per-token tile: that
 * token's virtual key t0 + r for t0 + r < key_end (key_end <= its nkeys). */
SD_HD int64_t sd_keymap_tile_row(const sd_cuda_tok *tok, const int32_t *unit_table, int32_t bt, int32_t t0, int32_t r,
                                 int32_t key_end) {
    const int32_t j = t0 + r;
    if (j >= key_end) return -1;
    if (!tok) return sd_keymap_phys(unit_table, bt, j);
    return sd_keymap_phys(tok->table, bt, sd_keymap_lrow(tok, j));
}

/* Splits holding keys of a token with nkeys keys (what the combine step merges; the
 * split kernel stores a state for split s iff nkeys > s * SD_CUDA_ATTN_SPLIT). */
SD_HD int32_t sd_keymap_n_splits(int32_t nkeys) { return (nkeys - 1) / SD_CUDA_ATTN_SPLIT + 1; }

/* Sliding window (window > 0; 0 = none): virtual key j is the key of position j, so a
 * token with nkeys keys (position nkeys - 1) sees virtual keys [first, nkeys) with
 * first = nkeys - window when that is positive (transformers: keys > p - window). The
 * split kernel stores a state for split s iff the token has a visible key in it, the
 * combine step merges splits first / S .. n_splits - 1. */
SD_HD int32_t sd_keymap_first_key(int32_t nkeys, int32_t window) {
    return window > 0 && nkeys > window ? nkeys - window : 0;
}
/* A pair with keys [k0, nk) works on tile t0 iff one of them is in it. */
SD_HD int sd_keymap_pair_in_tile(int32_t nk, int32_t k0, int32_t t0) { return nk > t0 && k0 < t0 + SD_KEYMAP_TILE; }
/* ... and stores a state for the split starting at s_begin iff one of them is in it. */
SD_HD int sd_keymap_pair_in_split(int32_t nk, int32_t k0, int32_t s_begin) {
    return nk > s_begin && k0 < s_begin + SD_CUDA_ATTN_SPLIT;
}
/* The first tile of the split at s_begin a block whose tokens' windows start at `first`
 * (the smallest of them) works on: tiles stay at multiples of SD_KEYMAP_TILE from the
 * split start; the ones before every window are skipped. */
SD_HD int32_t sd_keymap_tile_begin(int32_t s_begin, int32_t first) {
    return first > s_begin ? s_begin + (first - s_begin) / SD_KEYMAP_TILE * SD_KEYMAP_TILE : s_begin;
}

/* --- the split scratch `part` (issue 24 (b)) -------------------------------------------
 * The split kernel stores the state of (token m, query head h, split s) — running max,
 * sum, hd accumulators: hd + 2 floats — at part + sd_keymap_part_at(...); a launch of n
 * tokens whose tokens see at most `keys` virtual keys has n_split = ceil(keys / S) splits
 * and needs sd_keymap_part_floats(n, n_heads, hd, keys) floats. keys is the launch's key
 * bound (sd_keymap_key_bound), which grows with the POSITION in CHAIN mode: a chain
 * launch of many tokens at a high position needs far more than one of few tokens, so
 * the launcher checks the need against the scratch it is given and refuses (never
 * writes past it); callers cut longer launches with sd_keymap_part_rows. */
SD_HD int32_t sd_keymap_part_splits(int64_t keys) {
    return keys >= 1 ? (int32_t)((keys + SD_CUDA_ATTN_SPLIT - 1) / SD_CUDA_ATTN_SPLIT) : 0;
}

SD_HD size_t sd_keymap_part_at(int32_t m, int32_t h, int32_t s, int32_t n_heads, int32_t n_split, int32_t hd) {
    return (((size_t)m * (size_t)n_heads + (size_t)h) * (size_t)n_split + (size_t)s) * (size_t)(hd + 2);
}

/* Floats for n tokens over at most `keys` keys; 0 if an argument is < 1, SIZE_MAX when
 * the product does not fit a size_t. */
SD_HD size_t sd_keymap_part_floats(int64_t n, int32_t n_heads, int32_t hd, int64_t keys) {
    if (n < 1 || n_heads < 1 || hd < 1 || keys < 1) return 0;
    const size_t per_tok = (size_t)n_heads * (size_t)sd_keymap_part_splits(keys) * (size_t)(hd + 2);
    if ((size_t)n > (size_t)-1 / per_tok) return (size_t)-1;
    return (size_t)n * per_tok;
}

/* Most tokens (<= INT32_MAX) whose states over `keys` keys fit `floats` floats. */
SD_HD int32_t sd_keymap_part_rows(size_t floats, int32_t n_heads, int32_t hd, int64_t keys) {
    const size_t per_tok = sd_keymap_part_floats(1, n_heads, hd, keys);
    if (per_tok == 0 || per_tok == (size_t)-1) return 0;
    const size_t r = floats / per_tok;
    return r > (size_t)INT32_MAX ? INT32_MAX : (int32_t)r;
}

/* The keys a launch of n tokens may address — CHAIN mode from the host: the last
 * position + 1; CHAIN mode with a device position: n_ctx (the caller keeps
 * *pos_dev + pos0 + n <= n_ctx); GENERAL mode: max_keys — or -1 when the map is
 * inconsistent with n, n_ctx and the cache's rows. */
SD_HD int64_t sd_keymap_key_bound(const sd_cuda_keymap *k, int32_t n, int32_t n_ctx, int32_t cache_rows) {
    if (n < 1 || n > n_ctx || cache_rows <= 0) return -1;
    if (k->tok) {
        if (!k->blk || k->n_blk < 1 || k->block_tokens < 1 || k->max_keys < 1 || k->max_keys > n_ctx) return -1;
        return k->max_keys;
    }
    if (k->table && k->block_tokens < 1) return -1;
    if (k->pos_dev) return k->table || n_ctx <= cache_rows ? n_ctx : -1;
    const int64_t end = (int64_t)k->pos0 + n;
    if (k->pos0 < 0 || end > n_ctx || (!k->table && end > cache_rows)) return -1;
    return end;
}

#endif
