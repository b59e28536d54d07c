/* test_cuda_keymap.c — the CUDA attention's and RoPE/KV-append's index arithmetic,
 * emulated on the CPU (no GPU needed; runs in every build).
 *
 * The kernels (kernels/cuda/sd_cuda_attention.cu, sd_cuda_rope.cu) take every index
 * decision through the SD_HD functions of kernels/cuda/sd_cuda_keymap.h, and the CUDA
 * runner lays out a pass with backends/cuda/sd_cuda_layout.h. This test runs those same
 * functions on random passes — several sequences with scattered block tables (block
 * sizes 1, 3, 4, 16), chain segments and tree segments (new trees and extensions,
 * random parents, bases up to 300 so trees start mid-tile and mid-split), GQA ratios
 * 1, 3, 4, 8 and 64 (a token's heads spread over several blocks), small body chunks and
 * attention launches — and replays the split kernel's loop structure (blocks, splits,
 * shared vs per-token tiles, the lanes a pair consumes, the split states it stores,
 * the splits the combine step merges). For every (token, head) the sequence of
 * (virtual key, physical row, split, tile) it consumes must equal a straightforward
 * reference: the keys plain decoding of its sequence (or of its tree path) sees, in
 * order, mapped through its block table, in splits of SD_CUDA_ATTN_SPLIT and tiles of
 * 32 virtual keys — which is what makes batched == alone, tree node == plain decoding
 * and paged == contiguous bitwise on a GPU. Also: every (token, head) is covered by
 * exactly one block per split it needs and its stored splits are exactly the ones the
 * combine reads; each token's RoPE position and K/V write row; a chain segment laid
 * out in CHAIN mode (the device round's path) consumes exactly what the GENERAL layout
 * gives it; the staging capacities hold. Two mutants — every tile treated as shared,
 * units merged across sequences — must be caught. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_test.h"
#include "sd_test_util.h"
#include "sd_cuda_layout.h"

#define MAX_SEQ 6
#define MAX_TOK 48
#define N_CTX 400
#define MAX_KEYS (N_CTX + SD_RUNNER_TREE_MAX)
#define MAX_HEADS 64
#include "keymap_emu.h"

typedef struct scen {
    sd_runner r[MAX_SEQ];
    int32_t blocks[MAX_SEQ][N_CTX]; /* the tables' storage */
    sd_runner_seg segs[MAX_SEQ];
    int32_t tok[MAX_SEQ][SD_RUNNER_TREE_MAX], par[MAX_SEQ][SD_RUNNER_TREE_MAX];
    int32_t n_segs, n_tok, bt, n_heads, n_kv, act_rows, att_rows;
} scen;


static uint64_t g_rng = 0x6b65796d6170ull;
static int32_t rnd(int32_t n) { return (int32_t)(sd_test_splitmix64(&g_rng) % (uint64_t)n); }

static int64_t ref_phys(const sd_runner *r, int32_t bt, int32_t l) {
    return (int64_t)r->kv.blocks[l / bt] * bt + l % bt;
}

/* The logical keys plain decoding sees for token i of segment s; returns the count. */
static int32_t ref_keys(const sd_runner_seg *s, int32_t i, int32_t *keys, int32_t *pos, int32_t *wrow) {
    if (!s->parent) {
        for (int32_t j = 0; j <= s->pos + i; j++) keys[j] = j;
        *pos = s->pos + i;
        *wrow = s->pos + i;
        return s->pos + i + 1;
    }
    const sd_runner_tree *t = &s->r->tree;
    const int32_t v = s->first + i;
    int32_t path[SD_RUNNER_TREE_MAX], k = 0;
    for (int32_t a = v; a >= 0; a = t->parent[a]) path[k++] = a;
    int32_t n = 0;
    for (int32_t j = 0; j < t->base; j++) keys[n++] = j;
    for (int32_t d = k - 1; d >= 0; d--) keys[n++] = t->base + path[d];
    *pos = t->base + k - 1;
    *wrow = t->base + v;
    return n;
}

/* A random tree of `total` nodes at `base` recorded in r->tree as core records it. */
static void make_tree(sd_runner *r, int32_t base, int32_t total) {
    sd_runner_tree *t = &r->tree;
    t->base = base;
    t->n = total;
    for (int32_t v = 0; v < total; v++) {
        t->parent[v] = v == 0 || rnd(5) == 0 ? -1 : rnd(v);
        t->depth[v] = t->parent[v] < 0 ? 0 : t->depth[t->parent[v]] + 1;
        t->token[v] = rnd(1000);
    }
}

/* Sequence i: a table of distinct random blocks out of a shared pool, and a segment. */
static void make_seq(scen *c, int32_t i, int32_t *perm, int32_t *used, int32_t max_tok) {
    sd_runner *r = &c->r[i];
    memset(r, 0, sizeof *r);
    const int32_t cap = sd_kv_blocks_for(N_CTX, c->bt);
    for (int32_t b = 0; b < cap; b++) c->blocks[i][b] = perm[(*used)++];
    r->kv.blocks = c->blocks[i];
    r->kv.cap = r->kv.n = cap;
    r->n_ctx = N_CTX;
    sd_runner_seg *s = &c->segs[i];
    memset(s, 0, sizeof *s);
    s->r = r;
    s->tokens = c->tok[i];
    const int32_t n = 1 + rnd(max_tok < SD_RUNNER_TREE_MAX ? max_tok : SD_RUNNER_TREE_MAX);
    if (rnd(2)) { /* chain at a position near a tile or split edge now and then */
        s->pos = rnd(3) ? rnd(N_CTX - n) : (1 + rnd(3)) * 128 - rnd(3);
        if (s->pos + n > N_CTX) s->pos = N_CTX - n;
        s->n = n;
        return;
    }
    const int32_t first = rnd(3) == 0 ? rnd(SD_RUNNER_TREE_MAX - n + 1) : 0;
    make_tree(r, rnd(N_CTX - SD_RUNNER_TREE_MAX), first + n);
    s->pos = r->tree.base;
    s->first = first;
    s->n = n;
    for (int32_t k = 0; k < n; k++) c->par[i][k] = r->tree.parent[first + k];
    s->parent = c->par[i];
}

static void make_scen(scen *c) {
    static const int32_t bts[] = {1, 3, 4, 16};
    static const int32_t heads[][2] = {{4, 4}, {6, 2}, {8, 2}, {16, 2}, {64, 1}};
    memset(c, 0, sizeof *c);
    c->bt = bts[rnd(4)];
    const int32_t hi = rnd(5);
    c->n_heads = heads[hi][0];
    c->n_kv = heads[hi][1];
    c->act_rows = 1 + rnd(MAX_TOK);
    c->att_rows = 1 + rnd(c->act_rows);
    const int32_t cap = sd_kv_blocks_for(N_CTX, c->bt), pool = cap * MAX_SEQ;
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)pool), used = 0;
    for (int32_t b = 0; b < pool; b++) perm[b] = b;
    for (int32_t b = pool - 1; b > 0; b--) {
        const int32_t k = rnd(b + 1), t = perm[b];
        perm[b] = perm[k];
        perm[k] = t;
    }
    c->n_segs = 1 + rnd(MAX_SEQ);
    for (int32_t i = 0; i < c->n_segs; i++) {
        const int32_t left = MAX_TOK - c->n_tok - (c->n_segs - 1 - i);
        make_seq(c, i, perm, &used, left > 1 ? left : 1);
        c->n_tok += c->segs[i].n;
    }
    free(perm);
}

/* Token m of the launch (pass token t, of segment s, index i) consumed the reference. */
static int check_token(emu *e, const sd_runner_seg *s, int32_t i, int32_t m, int32_t n_heads, int32_t bt, int quiet) {
    int32_t keys[MAX_KEYS], pos, wrow;
    const int32_t nk = ref_keys(s, i, keys, &pos, &wrow);
    int ok = 1;
    for (int32_t h = 0; h < n_heads && ok; h++) {
        const size_t at = (size_t)m * MAX_HEADS + (size_t)h;
        ok = e->n_got[at] == nk;
        for (int32_t j = 0; ok && j < nk; j++) {
            const rec *x = &e->got[at * MAX_KEYS + (size_t)j];
            ok = x->j == j && x->row == ref_phys(s->r, bt, keys[j]) && x->split == j / SD_CUDA_ATTN_SPLIT &&
                 x->tile == j / SD_KEYMAP_TILE * SD_KEYMAP_TILE;
        }
        if (!ok && !quiet)
            fprintf(stderr, "  token %d (%s, index %d), head %d: %d keys consumed, %d expected\n", (int)m,
                    s->parent ? "tree" : "chain", (int)i, (int)h, (int)e->n_got[at], (int)nk);
    }
    return ok;
}

/* RoPE / KV append of pass token t (chunk-relative map of its body chunk). */
static int check_rope(const sd_cuda_layout *lo, const scen *c, int32_t t, int32_t si, int32_t i) {
    const int32_t c0 = t / c->act_rows * c->act_rows;
    sd_cuda_keymap rm;
    memset(&rm, 0, sizeof rm);
    rm.block_tokens = c->bt;
    rm.tok = lo->tok + c0;
    rm.ext = lo->ext;
    const sd_cuda_tok tk = sd_keymap_tok(&rm, t - c0, 0);
    int32_t keys[MAX_KEYS], pos, wrow;
    ref_keys(&c->segs[si], i, keys, &pos, &wrow);
    return tk.pos == pos && sd_keymap_phys(tk.table, c->bt, tk.wrow) == ref_phys(c->segs[si].r, c->bt, wrow) &&
           lo->tokens[t] == c->segs[si].tokens[i];
}

typedef struct pass_buf {
    int32_t tokens[MAX_TOK], tseg[MAX_TOK], seg0[MAX_SEQ];
    sd_cuda_tokmap tok[MAX_TOK];
    int32_t ext[MAX_TOK * SD_RUNNER_TREE_MAX];
    sd_cuda_attblk blk[MAX_TOK * 3 + MAX_TOK];
    sd_cuda_att_launch launch[MAX_TOK];
} pass_buf;

/* Lay scenario c out with the runner's code (tables: the host tables). */
static void layout(const scen *c, pass_buf *b, sd_cuda_layout *lo, int mutant) {
    memset(lo, 0, sizeof *lo);
    lo->n_heads = c->n_heads;
    lo->n_kv = c->n_kv;
    lo->act_rows = c->act_rows;
    lo->att_rows = c->att_rows;
    lo->tokens = b->tokens;
    lo->tok = b->tok;
    lo->ext = b->ext;
    lo->tseg = b->tseg;
    lo->launch = b->launch;
    for (int32_t i = 0; i < c->n_segs; i++) {
        b->seg0[i] = lo->n;
        sd_cuda_layout_seg(lo, &c->segs[i], c->r[i].kv.blocks, i);
    }
    lo->blk = b->blk;
    int32_t saved[MAX_TOK];
    memcpy(saved, b->tseg, sizeof saved);
    if (mutant == 2) memset(b->tseg, 0, sizeof saved); /* units across sequences */
    sd_cuda_layout_blocks(lo);
    memcpy(b->tseg, saved, sizeof saved);
}

/* Layout invariants: launches inside body chunks, at most att_rows tokens, capacities. */
static void check_layout(const scen *c, const pass_buf *b, const sd_cuda_layout *lo) {
    SD_CHECK(lo->n == c->n_tok && lo->n_launch <= lo->n, "%d tokens, %d launches", (int)lo->n, (int)lo->n_launch);
    SD_CHECK(lo->n_ext <= lo->n * SD_RUNNER_TREE_MAX, "%d extra rows", (int)lo->n_ext);
    SD_CHECK(lo->n_blk <= sd_cuda_layout_blk_cap(lo->n, c->n_heads, c->n_kv), "%d blocks over the cap", (int)lo->n_blk);
    int32_t next = 0;
    for (int32_t k = 0; k < lo->n_launch; k++) {
        const sd_cuda_att_launch *L = &b->launch[k];
        SD_CHECK(L->tok0 == next && L->n >= 1 && L->n <= c->att_rows &&
                     L->tok0 / c->act_rows == (L->tok0 + L->n - 1) / c->act_rows,
                 "launch %d: tokens %d..%d (att_rows %d, act_rows %d)", (int)k, (int)L->tok0, (int)(L->tok0 + L->n - 1),
                 (int)c->att_rows, (int)c->act_rows);
        next = L->tok0 + L->n;
        for (int32_t z = 0; z < L->n_blk; z++) {
            const sd_cuda_attblk *B = &b->blk[L->blk_off + z];
            for (int32_t m = B->m0; m < B->m0 + B->n_tok; m++)
                SD_CHECK(b->tseg[L->tok0 + m] == b->tseg[L->tok0 + B->m0], "launch %d block %d mixes sequences", (int)k,
                         (int)z);
        }
    }
    SD_CHECK(next == lo->n, "launches cover %d of %d tokens", (int)next, (int)lo->n);
}

/* Emulate every launch of a laid-out pass; returns the tokens whose consumption or
 * rope rows differ from the reference. */
static int32_t run_pass(emu *e, const scen *c, const pass_buf *b, const sd_cuda_layout *lo, int quiet) {
    int32_t bad = 0;
    for (int32_t k = 0; k < lo->n_launch; k++) {
        const sd_cuda_att_launch *L = &b->launch[k];
        const sd_cuda_keymap map = sd_cuda_layout_map(L, b->tok, b->ext, b->blk, c->bt);
        e->bad = 0;
        emu_launch(e, &map, L->n, c->n_heads, c->n_kv, c->bt);
        bad += e->bad;
        for (int32_t m = 0; m < L->n; m++) {
            const int32_t t = L->tok0 + m, si = b->tseg[t], i = t - b->seg0[si];
            if (!check_token(e, &c->segs[si], i, m, c->n_heads, c->bt, quiet)) bad++;
            if (!check_rope(lo, c, t, si, i)) bad++;
        }
    }
    return bad;
}

/* A chain segment alone in CHAIN mode with its position in "device" memory and a
 * negative offset, as the device round describes its forwards. */
static int32_t run_chain_mode(emu *e, const scen *c) {
    int32_t bad = 0;
    for (int32_t si = 0; si < c->n_segs; si++) {
        const sd_runner_seg *s = &c->segs[si];
        if (s->parent) continue;
        const int64_t dev_pos = (int64_t)s->pos + 1;
        sd_cuda_keymap map;
        memset(&map, 0, sizeof map);
        map.block_tokens = c->bt;
        map.table = s->r->kv.blocks;
        map.pos0 = -1;
        map.pos_dev = &dev_pos;
        e->bad = 0;
        emu_launch(e, &map, s->n, c->n_heads, c->n_kv, c->bt);
        bad += e->bad;
        for (int32_t i = 0; i < s->n; i++) {
            if (!check_token(e, s, i, i, c->n_heads, c->bt, 0)) bad++;
            const sd_cuda_tok tk = sd_keymap_tok(&map, i, sd_keymap_base(&map));
            if (tk.pos != s->pos + i || sd_keymap_phys(tk.table, c->bt, tk.wrow) != ref_phys(s->r, c->bt, s->pos + i))
                bad++;
        }
    }
    return bad;
}

int main(void) {
    emu e;
    memset(&e, 0, sizeof e);
    e.got = malloc(sizeof(rec) * MAX_TOK * MAX_HEADS * MAX_KEYS);
    e.n_got = malloc(sizeof(int32_t) * MAX_TOK * MAX_HEADS);
    e.stored = malloc((size_t)MAX_TOK * MAX_HEADS * ((MAX_KEYS + SD_CUDA_ATTN_SPLIT - 1) / SD_CUDA_ATTN_SPLIT));
    scen *c = malloc(sizeof *c);
    pass_buf *b = malloc(sizeof *b);
    const int n_scen = 300;
    int caught[3] = {0, 0, 0}, trees = 0, shared_tree_tiles = 0;
    for (int k = 0; k < n_scen; k++) {
        make_scen(c);
        sd_cuda_layout lo;
        layout(c, b, &lo, 0);
        check_layout(c, b, &lo);
        trees += lo.has_tree;
        for (int32_t t = 0; t < lo.n; t++) shared_tree_tiles += b->tok[t].next > 0 && b->tok[t].kpre >= SD_KEYMAP_TILE;
        e.mutant = 0;
        const int32_t bad = run_pass(&e, c, b, &lo, 0);
        SD_CHECK(bad == 0, "scenario %d (bt %d, heads %d/%d, %d segments, %d tokens, act %d, att %d): %d mismatches", k,
                 (int)c->bt, (int)c->n_heads, (int)c->n_kv, (int)c->n_segs, (int)c->n_tok, (int)c->act_rows,
                 (int)c->att_rows, (int)bad);
        SD_CHECK(run_chain_mode(&e, c) == 0, "scenario %d: CHAIN mode differs from the reference", k);
        for (int mut = 1; mut <= 2; mut++) {
            layout(c, b, &lo, mut);
            e.mutant = mut;
            if (run_pass(&e, c, b, &lo, 1) > 0) caught[mut]++;
        }
    }
    printf("%d random passes (%d with trees, %d tree tokens with shared prefix tiles): index arithmetic == reference\n",
           n_scen, trees, shared_tree_tiles);
    printf("mutants caught: every tile shared in %d passes, units across sequences in %d passes\n", caught[1], caught[2]);
    SD_CHECK(trees > n_scen / 3 && shared_tree_tiles > 100, "too few tree cases (%d, %d)", trees, shared_tree_tiles);
    SD_CHECK(caught[1] > n_scen / 4, "mutant 'every tile shared' caught in only %d passes", caught[1]);
    SD_CHECK(caught[2] > n_scen / 4, "mutant 'units across sequences' caught in only %d passes", caught[2]);
    free(e.got);
    free(e.n_got);
    free(e.stored);
    free(c);
    free(b);
    return sd_test_done();
}
