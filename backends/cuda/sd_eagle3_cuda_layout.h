/* sd_eagle3_cuda_layout.h — the host side of a CUDA EAGLE-3 head's step (backends/cuda/
 * sd_eagle3_cuda.cu): the n new rows of one call as the per-token key maps of
 * kernels/cuda/sd_cuda_keymap.h, so the target's RoPE and attention kernels run the head's
 * chain and tree rows. Plain C, host only, no CUDA types: tests/eagle3/test_eagle3_cuda_layout.c
 * runs it on the CPU against the CPU reference's key lists (backends/cpu/sd_eagle3_cpu.c
 * e3c_keys) without a GPU.
 *
 * The head's draft cache is one contiguous array of n_ctx rows (block table NULL: the
 * identity). Row r = n_cached + i of a call (i < n):
 *   - writes its k, v to cache row r, rotated at its own position pos[i];
 *   - chain row (parents NULL): keys = rows 0 .. r (kpre = r + 1, no extra rows);
 *   - tree row: keys = rows [0, n_shared), then its ancestors through rows >= n_shared
 *     root-first, then r (kpre = n_shared, ext = those rows) — the CPU reference's order,
 *     so the virtual key sequence (and the kernels' split / tile boundaries over it) is the
 *     same whether the row runs alone or with others.
 * parent[] (the head's, host, one entry per cache row) records each row's parent cache row
 * (-1 or a row < n_shared: directly on the prefix; a chain row: r - 1), as the CPU does. */
#ifndef SD_EAGLE3_CUDA_LAYOUT_H
#define SD_EAGLE3_CUDA_LAYOUT_H

#include <stdint.h>

#include "sd_cuda_layout.h"

/* Record the parents of rows n_cached .. n_cached + n - 1 in parent[] (checked arguments:
 * sd_eagle3_check_rows) and return the extra (tree) rows their key maps need: for each tree
 * row, its ancestors at or above n_shared plus itself; 0 for chain rows. */
static inline int64_t sd_e3_layout_parents(int32_t *parent, int32_t n_cached, int32_t n, const int32_t *parents,
                                           int32_t n_shared) {
    int64_t need = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t r = n_cached + i;
        parent[r] = parents ? parents[i] : r - 1;
        if (!parents) continue;
        need++;
        for (int32_t a = parent[r]; a >= n_shared; a = parent[a]) need++;
    }
    return need;
}

/* Lay the rows out in lo from token lo->n on (tokens, tseg, tok, ext: capacities set by the
 * caller; parents already recorded by sd_e3_layout_parents). Every row is of unit 0 (one
 * sequence: a unit never mixes block tables, and the head has one). Then
 * sd_cuda_layout_blocks(lo) cuts the attention launches and blocks. */
static inline void sd_e3_layout_rows(sd_cuda_layout *lo, const int32_t *parent, int32_t n_cached,
                                     const int32_t *tokens, const int32_t *pos, int32_t n, int tree,
                                     int32_t n_shared) {
    for (int32_t i = 0; i < n; i++) {
        const int32_t t = lo->n++, r = n_cached + i;
        sd_cuda_tokmap *e = &lo->tok[t];
        lo->tokens[t] = tokens[i];
        lo->tseg[t] = 0;
        e->table = 0;
        e->pad_ = 0;
        e->ext_off = 0;
        e->pos = pos[i];
        e->wrow = r;
        if (!tree) {
            e->kpre = r + 1;
            e->next = 0;
            continue;
        }
        int32_t k = 0; /* ancestors at or above n_shared */
        for (int32_t a = parent[r]; a >= n_shared; a = parent[a]) k++;
        int32_t *rows = lo->ext + lo->n_ext;
        rows[k] = r;
        int32_t d = k;
        for (int32_t a = parent[r]; a >= n_shared; a = parent[a]) rows[--d] = a;
        e->kpre = n_shared;
        e->next = k + 1;
        e->ext_off = lo->n_ext;
        lo->n_ext += k + 1;
        lo->has_tree = 1;
    }
}

#endif
