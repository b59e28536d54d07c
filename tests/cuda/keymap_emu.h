/* keymap_emu.h — the CUDA split-attention kernel's loop structure replayed on the CPU
 * (kernels/cuda/sd_cuda_attention.cu, through the SD_HD index functions of
 * kernels/cuda/sd_cuda_keymap.h): which (virtual key, physical row, split, tile) every
 * (token, head) of a launch consumes, and which split states it stores. Shared by
 * tests/cuda/test_cuda_keymap.c (the runner's pass layouts) and
 * tests/eagle3/test_eagle3_cuda_layout.c (the CUDA EAGLE-3 head's). The includer defines
 * MAX_TOK, MAX_HEADS and MAX_KEYS (the emulator's capacities) first. */
#ifndef KEYMAP_EMU_H
#define KEYMAP_EMU_H

#include <stdint.h>
#include <string.h>

#include "sd_cuda_keymap.h"

typedef struct rec {
    int32_t j;        /* virtual key */
    int64_t row;      /* physical row it was read from */
    int32_t split, tile;
} rec;

typedef struct emu {
    rec *got;          /* [MAX_TOK][MAX_HEADS][MAX_KEYS] */
    int32_t *n_got;    /* [MAX_TOK][MAX_HEADS] */
    uint8_t *stored;   /* [MAX_TOK][MAX_HEADS][splits] */
    int mutant;        /* 1: every tile shared; 2: units across sequences */
    int bad;           /* mismatches found */
} emu;

/* Lane records of one tile for the pairs of token `only` (-1: all) of block u. */
static void emu_tile(emu *e, const sd_cuda_keymap *map, const sd_cuda_attunit *u, int32_t G, int32_t g, int32_t s,
                     int32_t t0, int32_t s_end, int32_t only, const int64_t *rows) {
    for (int32_t p = 0; p < u->npairs; p++) {
        const int32_t m = sd_keymap_pair_tok(u, G, p), h = sd_keymap_pair_head(u, G, g, p);
        const int32_t nk = sd_keymap_tok(map, m, sd_keymap_base(map)).nkeys;
        if (nk <= t0 || (only >= 0 && m != only)) continue;
        const int32_t kend = nk < s_end ? nk : s_end;
        for (int32_t r = 0; r < SD_KEYMAP_TILE && t0 + r < kend; r++) {
            const size_t at = (size_t)m * MAX_HEADS + (size_t)h;
            if (e->n_got[at] >= MAX_KEYS) continue;
            rec *x = &e->got[at * MAX_KEYS + (size_t)e->n_got[at]++];
            x->j = t0 + r;
            x->row = rows[r];
            x->split = s;
            x->tile = t0;
        }
    }
}

/* One block (g, s, z) of the split kernel: its tiles, then its stores. */
static void emu_block(emu *e, const sd_cuda_keymap *map, int32_t n, int32_t G, int32_t g, int32_t s, int32_t z,
                      int32_t bt, int32_t n_split) {
    const sd_cuda_attunit u = sd_keymap_unit(map, n, G, z);
    const int32_t base = sd_keymap_base(map);
    int32_t kv_end = 0, shared_end = 0;
    sd_keymap_block_keys(map, &u, base, &kv_end, &shared_end);
    const int32_t s_begin = s * SD_CUDA_ATTN_SPLIT;
    if (s_begin >= kv_end) return;
    const int32_t s_end = s_begin + SD_CUDA_ATTN_SPLIT < kv_end ? s_begin + SD_CUDA_ATTN_SPLIT : kv_end;
    const int32_t *table = sd_keymap_tok(map, u.m_first, base).table;
    int64_t rows[SD_KEYMAP_TILE];
    for (int32_t t0 = s_begin; t0 < s_end; t0 += SD_KEYMAP_TILE) {
        if (e->mutant == 1 || sd_keymap_tile_shared(t0, shared_end)) {
            for (int32_t r = 0; r < SD_KEYMAP_TILE; r++) rows[r] = sd_keymap_tile_row(NULL, table, bt, t0, r, s_end);
            emu_tile(e, map, &u, G, g, s, t0, s_end, -1, rows);
            continue;
        }
        for (int32_t m = u.m_first; m <= u.m_last; m++) {
            const sd_cuda_tok tk = sd_keymap_tok(map, m, base);
            const int32_t kend = tk.nkeys < s_end ? tk.nkeys : s_end;
            if (kend <= t0) continue;
            for (int32_t r = 0; r < SD_KEYMAP_TILE; r++) rows[r] = sd_keymap_tile_row(&tk, table, bt, t0, r, kend);
            emu_tile(e, map, &u, G, g, s, t0, s_end, m, rows);
        }
    }
    for (int32_t p = 0; p < u.npairs; p++) { /* sd_att_store */
        const int32_t m = sd_keymap_pair_tok(&u, G, p), h = sd_keymap_pair_head(&u, G, g, p);
        if (sd_keymap_tok(map, m, base).nkeys <= s_begin) continue;
        uint8_t *st = &e->stored[((size_t)m * MAX_HEADS + (size_t)h) * (size_t)n_split + (size_t)s];
        if (*st) e->bad++;
        *st = 1;
    }
}

/* Every block of a launch of n tokens (map), then the combine's view. */
static void emu_launch(emu *e, const sd_cuda_keymap *map, int32_t n, int32_t n_heads, int32_t n_kv, int32_t bt) {
    const int32_t G = n_heads / n_kv, base = sd_keymap_base(map);
    int32_t max_keys = 0;
    for (int32_t m = 0; m < n; m++) {
        const int32_t nk = sd_keymap_tok(map, m, base).nkeys;
        if (nk > max_keys) max_keys = nk;
    }
    const int32_t n_split = (max_keys + SD_CUDA_ATTN_SPLIT - 1) / SD_CUDA_ATTN_SPLIT;
    memset(e->n_got, 0, sizeof(int32_t) * MAX_TOK * MAX_HEADS);
    memset(e->stored, 0, (size_t)MAX_TOK * MAX_HEADS * (size_t)n_split);
    for (int32_t z = 0; z < sd_keymap_n_blocks(map, n, G); z++)
        for (int32_t s = 0; s < n_split; s++)
            for (int32_t g = 0; g < n_kv; g++) emu_block(e, map, n, G, g, s, z, bt, n_split);
    for (int32_t m = 0; m < n; m++) /* sd_attn_combine_kernel merges splits 0 .. ns - 1 */
        for (int32_t h = 0; h < n_heads; h++) {
            const int32_t ns = sd_keymap_n_splits(sd_keymap_tok(map, m, base).nkeys);
            for (int32_t s = 0; s < n_split; s++)
                if (e->stored[((size_t)m * MAX_HEADS + (size_t)h) * (size_t)n_split + (size_t)s] != (s < ns)) e->bad++;
        }
}

#endif
