/* test_window_keymap.c — host emulation (no GPU) of the CUDA attention kernel's sliding-
 * window index arithmetic (kernels/cuda/sd_cuda_keymap.h, the functions the kernel
 * itself calls): for blocks of tokens with random key counts and windows, walking the
 * splits and tiles as sd_attn_split_kernel does (tiles from sd_keymap_tile_begin, a
 * pair on a tile iff sd_keymap_pair_in_tile, its lanes [max(t0, k0), min(nk, t0 + 32,
 * split end)), a state stored iff sd_keymap_pair_in_split), every token must score
 * exactly the keys [sd_keymap_first_key(nk, W), nk) once each, each stored split must
 * hold one of its keys (a state with mx = -inf would poison the combine), and the
 * combine's range [first / S, n_splits) must be exactly the stored splits. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sd_test.h"
#include "sd_cuda_keymap.h"

#define MAXK 1400

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int check_block(const int32_t *nk, int n_tok, int32_t window) {
    static uint8_t seen[8][MAXK];
    int32_t kv_end = 0, first = INT32_MAX;
    for (int m = 0; m < n_tok; m++) {
        if (nk[m] > kv_end) kv_end = nk[m];
        int32_t f = sd_keymap_first_key(nk[m], window);
        if (f < first) first = f;
    }
    memset(seen, 0, sizeof seen);
    int stored[8][MAXK / SD_CUDA_ATTN_SPLIT + 2];
    memset(stored, 0, sizeof stored);
    const int n_split = (kv_end + SD_CUDA_ATTN_SPLIT - 1) / SD_CUDA_ATTN_SPLIT;
    for (int s = 0; s < n_split; s++) {
        const int32_t s_begin = s * SD_CUDA_ATTN_SPLIT;
        const int32_t s_end = s_begin + SD_CUDA_ATTN_SPLIT < kv_end ? s_begin + SD_CUDA_ATTN_SPLIT : kv_end;
        if (first >= s_end) continue; /* the block returns */
        for (int32_t t0 = sd_keymap_tile_begin(s_begin, first); t0 < s_end; t0 += SD_KEYMAP_TILE)
            for (int m = 0; m < n_tok; m++) {
                const int32_t k0 = sd_keymap_first_key(nk[m], window);
                if (!sd_keymap_pair_in_tile(nk[m], k0, t0)) continue;
                const int32_t kend = nk[m] < s_end ? nk[m] : s_end;
                int any = 0;
                for (int32_t lane = 0; lane < SD_KEYMAP_TILE; lane++)
                    if (t0 + lane < kend && t0 + lane >= k0) {
                        seen[m][t0 + lane]++;
                        any = 1;
                    }
                if (!any) return 0; /* the warp max would be -inf */
            }
        for (int m = 0; m < n_tok; m++) {
            const int32_t k0 = sd_keymap_first_key(nk[m], window);
            if (!sd_keymap_pair_in_split(nk[m], k0, s_begin)) continue;
            int has = 0;
            for (int32_t j = s_begin; j < s_begin + SD_CUDA_ATTN_SPLIT && j < MAXK; j++) has |= seen[m][j] != 0;
            if (!has) return 0;
            stored[m][s] = 1;
        }
    }
    for (int m = 0; m < n_tok; m++) {
        const int32_t k0 = sd_keymap_first_key(nk[m], window);
        for (int32_t j = 0; j < MAXK; j++)
            if (seen[m][j] != (j >= k0 && j < nk[m])) return 0;
        const int s0 = k0 / SD_CUDA_ATTN_SPLIT, ns = sd_keymap_n_splits(nk[m]);
        for (int s = 0; s < n_split; s++)
            if (stored[m][s] != (s >= s0 && s < ns)) return 0;
    }
    return 1;
}

int main(void) {
    uint64_t rs = 23;
    int bad = 0, n = 0;
    const int32_t windows[] = {0, 1, 2, 5, 31, 32, 33, 100, 127, 128, 129, 300, 4096};
    for (int it = 0; it < 4000; it++) {
        const int32_t window = windows[rng_next(&rs) % (sizeof windows / sizeof windows[0])];
        const int n_tok = 1 + (int)(rng_next(&rs) % 8);
        int32_t nk[8];
        const int32_t base = 1 + (int32_t)(rng_next(&rs) % 1200);
        for (int m = 0; m < n_tok; m++) /* a chain (consecutive) or scattered key counts */
            nk[m] = it % 2 ? base + m : 1 + (int32_t)(rng_next(&rs) % (MAXK - 1));
        if (!check_block(nk, n_tok, window)) {
            if (bad++ < 5) fprintf(stderr, "  block of %d tokens, window %d, nk[0] %d: wrong keys\n", n_tok, window, nk[0]);
        }
        n++;
    }
    SD_CHECK(bad == 0, "%d of %d blocks score the wrong keys or store wrong splits", bad, n);
    /* the checker itself can fail: a split stored before the window */
    const int32_t one[1] = {700};
    SD_CHECK(check_block(one, 1, 300), "the 700-key token with window 300");
    SD_CHECK(sd_keymap_first_key(700, 300) == 400 && sd_keymap_first_key(5, 0) == 0 && sd_keymap_first_key(5, 5) == 0,
             "first key");
    return sd_test_done();
}
