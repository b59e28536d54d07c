/* sd_cuda_layout.h — the host side of a CUDA runner group's forward pass: lay out the
 * segments of one pass (core/sd_runner.h sd_runner_seg) as the per-token key maps and
 * attention blocks of kernels/cuda/sd_cuda_keymap.h. Plain C, host only, no CUDA
 * types: backends/cuda/sd_cuda_runner.cu fills its pinned staging buffer with it, and
 * tests/cuda/test_cuda_keymap.c runs it on the CPU (with host block tables) to check
 * the layout and the kernels' index arithmetic without a GPU.
 *
 * Tokens of a pass are numbered 0 .. n - 1 in segment order. The pass runs in body
 * chunks of act_rows tokens (the activation buffers), each chunk's attention in
 * launches of att_rows tokens (the split scratch); every launch gets its own list of
 * attention blocks: its tokens cut into UNITS (maximal runs of one segment), each unit
 * into blocks of SD_KEYMAP_PAIRS (token, head) pairs. A unit never mixes sequences, so
 * a block reads one block table, and its chain tokens (or a tree's nodes, for the
 * tiles below the tree's base) can share K/V tiles. */
#ifndef SD_CUDA_LAYOUT_H
#define SD_CUDA_LAYOUT_H

#include <stdint.h>

#include "sd_runner.h"
#include "sd_cuda_keymap.h"

/* One attention launch of a pass. */
typedef struct sd_cuda_att_launch {
    int32_t tok0;     /* first token (pass index) */
    int32_t n;        /* tokens */
    int32_t blk_off;  /* its blocks: blk[blk_off .. blk_off + n_blk) */
    int32_t n_blk;
    int32_t max_keys; /* most keys of its tokens */
} sd_cuda_att_launch;

typedef struct sd_cuda_layout {
    /* set by the caller */
    int32_t n_heads, n_kv;       /* G = n_heads / n_kv */
    int32_t act_rows, att_rows;  /* body chunk and attention launch sizes (att_rows <= act_rows) */
    int32_t *tokens;             /* [n] token ids */
    sd_cuda_tokmap *tok;         /* [n] */
    int32_t *ext;                /* extra (tree) rows, SD_RUNNER_TREE_MAX per tree token at most */
    sd_cuda_attblk *blk;         /* set before sd_cuda_layout_blocks */
    int32_t *tseg;               /* [n] segment of each token */
    sd_cuda_att_launch *launch;  /* [n] at most one launch per token */
    /* filled in */
    int32_t n, n_ext, n_blk, n_launch;
    int has_tree;
} sd_cuda_layout;

/* Lay out segment s (index si) from token lo->n on: ids, positions, write rows, key
 * maps. table: the block table the kernels will read for the segment's runner (the
 * device copy; the host table in tests). A chain token at pos + i writes and ends at
 * logical row pos + i; tree node v at depth k of the runner's recorded tree writes row
 * base + v, sits at position base + k and sees [0, base) then base + its ancestors
 * root-first and itself. */
static inline void sd_cuda_layout_seg(sd_cuda_layout *lo, const sd_runner_seg *s, const int32_t *table, int32_t si) {
    const sd_runner_tree *tr = &s->r->tree;
    for (int32_t i = 0; i < s->n; i++) {
        const int32_t t = lo->n++;
        sd_cuda_tokmap *e = &lo->tok[t];
        lo->tokens[t] = s->tokens[i];
        lo->tseg[t] = si;
        e->table = table;
        e->pad_ = 0;
        e->ext_off = 0;
        if (!s->parent) {
            e->pos = s->pos + i;
            e->wrow = e->pos;
            e->kpre = e->pos + 1;
            e->next = 0;
            continue;
        }
        const int32_t v = s->first + i, k = tr->depth[v];
        int32_t *rows = lo->ext + lo->n_ext;
        for (int32_t a = v, d = k; d >= 0; a = tr->parent[a], d--) rows[d] = tr->base + a;
        e->pos = tr->base + k;
        e->wrow = tr->base + v;
        e->kpre = tr->base;
        e->next = k + 1;
        e->ext_off = lo->n_ext;
        lo->n_ext += k + 1;
        lo->has_tree = 1;
    }
}

/* The units of tokens [q0, q0 + na) cut into blocks, appended to blk. */
static inline void sd_cuda_layout_units(sd_cuda_layout *lo, int32_t q0, int32_t na) {
    const int32_t G = lo->n_heads / lo->n_kv;
    for (int32_t u0 = q0; u0 < q0 + na;) {
        int32_t u1 = u0 + 1;
        while (u1 < q0 + na && lo->tseg[u1] == lo->tseg[u0]) u1++;
        for (int32_t pair0 = 0; pair0 < (u1 - u0) * G; pair0 += SD_KEYMAP_PAIRS) {
            sd_cuda_attblk *b = &lo->blk[lo->n_blk++];
            b->m0 = u0 - q0;
            b->n_tok = u1 - u0;
            b->pair0 = pair0;
        }
        u0 = u1;
    }
}

/* The attention launches of every body chunk and their blocks (after every segment
 * is laid out and lo->blk is set). */
static inline void sd_cuda_layout_blocks(sd_cuda_layout *lo) {
    lo->n_blk = 0;
    lo->n_launch = 0;
    for (int32_t c0 = 0; c0 < lo->n; c0 += lo->act_rows) {
        const int32_t rows = lo->n - c0 < lo->act_rows ? lo->n - c0 : lo->act_rows;
        for (int32_t q0 = c0; q0 < c0 + rows; q0 += lo->att_rows) {
            sd_cuda_att_launch *L = &lo->launch[lo->n_launch++];
            L->tok0 = q0;
            L->n = c0 + rows - q0 < lo->att_rows ? c0 + rows - q0 : lo->att_rows;
            L->blk_off = lo->n_blk;
            L->max_keys = 0;
            for (int32_t m = q0; m < q0 + L->n; m++) {
                const int32_t nk = lo->tok[m].kpre + lo->tok[m].next;
                if (nk > L->max_keys) L->max_keys = nk;
            }
            sd_cuda_layout_units(lo, q0, L->n);
            L->n_blk = lo->n_blk - L->blk_off;
        }
    }
}

/* Blocks a pass of n tokens may need at most (each unit adds at most one partial block). */
static inline int64_t sd_cuda_layout_blk_cap(int32_t n, int32_t n_heads, int32_t n_kv) {
    return ((int64_t)n * (n_heads / n_kv) + SD_KEYMAP_PAIRS - 1) / SD_KEYMAP_PAIRS + n;
}

/* The key map of launch L of a laid-out pass, with the pass's token and block arrays
 * at tok / blk (device pointers in the runner, host ones in tests). */
static inline sd_cuda_keymap sd_cuda_layout_map(const sd_cuda_att_launch *L, const sd_cuda_tokmap *tok,
                                                const int32_t *ext, const sd_cuda_attblk *blk, int32_t block_tokens) {
    sd_cuda_keymap k;
    k.block_tokens = block_tokens;
    k.table = 0;
    k.pos0 = 0;
    k.pos_dev = 0;
    k.tok = tok + L->tok0;
    k.ext = ext;
    k.blk = blk + L->blk_off;
    k.n_blk = L->n_blk;
    k.max_keys = L->max_keys;
    return k;
}

#endif
