/* sd_cuda_mb.h — the plan of the multi-block sampling / verify kernels
 * (kernels/cuda/sd_cuda_verify_mb.cu), header-only and SD_HD, so the kernels and their
 * host model (tests/cuda_sample/sample_ref_mb.h) share one definition of how a row is
 * cut into blocks and how per-block partial results combine.
 *
 * A row of V entries is split into nb contiguous chunks (sd_mb_chunk: equal lengths
 * rounded up to 32, the last chunks may be short or empty). Every stage of the row
 * (core/sd_sample_rules.h steps 1-8, the sampling searches) is a per-chunk partial
 * result followed by a combine that every block performs identically after a per-row
 * barrier:
 *   - max logit: max of the order-preserving 32-bit keys (sd_mb_fkey) of the chunk
 *     maxima (NaN counts as -inf); greedy argmax: sd_rule_argmax_better merges;
 *   - fixed-point sums (normaliser, top-p mass, inverse-CDF / residual mass) and counts:
 *     exact integer sums of the chunk sums, so neither the order blocks finish in nor
 *     nb can change a bit;
 *   - the top-k / top-p cut: an MSB-first radix select over the 63-bit key of w
 *     (sd_rule_key), digits sd_mb_level_shift / sd_mb_level_bits (11,11,11,10,10,10);
 *     per pass every chunk's histogram (count, 128-bit mass, largest key per bucket) is
 *     added into one row histogram (integer atomics) and every block picks the same
 *     bucket from it: the lowest non-empty bucket b, scanning from the top, whose
 *     measure-before (above + mass of the buckets > b) is < thr. A bucket holding one
 *     candidate ends the select (its largest key is the cut: {w, INT_MAX}); after all
 *     63 bits, sd_mb_tie_keep says how many exact ties are kept, and the kept ties end
 *     at the keep-th tie by id, located by the crossing-chunk search below;
 *   - prefix searches (inverse CDF, residual, k-th tie): the first chunk j whose
 *     inclusive prefix of chunk sums reaches the target searches inside itself; if the
 *     total falls short, the last present element of the last chunk that has one.
 * sd_mb_hbuf: histogram buffers rotate over three slots so that a slot is zeroed (at
 * the first barrier after its last read) at least one barrier before it is reused. */
#ifndef SD_CUDA_MB_H
#define SD_CUDA_MB_H

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sd_hostdev.h"
#include "sd_sample_rules.h"

#define SD_MB_MAX_BLOCKS 64  /* blocks per row */
#define SD_MB_CHUNK_MAX 4096 /* entries per chunk: the chunk's w (double) lives in shared memory */
#define SD_MB_CHUNK_MIN 512  /* below this a chunk is not worth a block */
#define SD_MB_HBINS 2048     /* buckets of the widest radix digit */
#define SD_MB_LEVELS 6
#define SD_MB_HBUFS 3

/* Radix digit of pass lv: bits [shift, shift + bits) of the 63-bit key. */
SD_HD int sd_mb_level_shift(int lv) { return lv < 3 ? 52 - 11 * lv : 50 - 10 * lv; }
SD_HD int sd_mb_level_bits(int lv) { return lv < 3 ? 11 : 10; }

/* Entries per chunk for nb chunks (a multiple of 32). */
SD_HD int32_t sd_mb_chunk_len(int32_t V, int32_t nb) {
    const int32_t per = (V + nb - 1) / nb;
    return (per + 31) & ~31;
}

/* Chunk j of nb: [*lo, *hi) (possibly empty). */
SD_HD void sd_mb_chunk(int32_t V, int32_t nb, int32_t j, int32_t *lo, int32_t *hi) {
    const int64_t per = sd_mb_chunk_len(V, nb);
    const int64_t a = per * j, b = a + per;
    *lo = (int32_t)(a < V ? a : V);
    *hi = (int32_t)(b < V ? b : V);
}

/* Fewest chunks whose length fits SD_MB_CHUNK_MAX. */
SD_HD int32_t sd_mb_min_blocks(int32_t V) { return (V + SD_MB_CHUNK_MAX - 1) / SD_MB_CHUNK_MAX; }

/* Order-preserving key of a float (NaN ranks as -inf): a < b <=> key(a) < key(b). */
SD_HD uint32_t sd_mb_fkey(float v) {
    uint32_t u;
    if (v != v) v = -INFINITY;
    memcpy(&u, &v, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
SD_HD float sd_mb_fkey_value(uint32_t k) {
    const uint32_t u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* The double whose sd_rule_key is k. */
SD_HD double sd_mb_key_value(uint64_t k) {
    double d;
    memcpy(&d, &k, sizeof d);
    return d;
}

/* bcount exact ties of measure m each (1 per candidate for top-k, F(w) for top-p) sit
 * where the remaining threshold is need > 0: how many are kept (their measure-before,
 * j * m, is < need; the first always). */
SD_HD uint32_t sd_mb_tie_keep(sd_u128 need, uint64_t m, uint32_t bcount) {
    if (m == 0) return bcount;
    const double est = (double)need / (double)m;
    uint32_t j = est >= (double)bcount ? bcount : (uint32_t)est;
    while (j < bcount && (sd_u128)j * m < need) j++;
    while (j > 0 && (sd_u128)(j - 1) * m >= need) j--;
    if (j == 0) j = 1;
    return j < bcount ? j : bcount;
}

/* --- workspace records (global memory, shared by the blocks of a row) ------------- */
#define SD_MB_MAX_ROWS 64 /* rows per launch with a multi-block workspace */
#define SD_MB_AUTO (-1)   /* blocks_per_row: choose the count (one-block kernel if none fits) */

typedef struct sd_mb_ctrl { /* per row; zero between launches */
    unsigned bar;   /* barrier arrivals */
    unsigned exitc; /* blocks that left */
    int bcast;      /* the tie id, published by the crossing block */
    unsigned pad;
} sd_mb_ctrl;

typedef struct sd_mb_part { /* one block's partial result of a stage */
    unsigned long long a_lo, a_hi, b_lo, b_hi; /* two 128-bit sums */
    unsigned kmax, n;                          /* float key max, count */
    int a_last, b_last;                        /* last present element of each measure */
    float fv;                                  /* argmax value / id */
    int fi;
} sd_mb_part;

typedef struct sd_mb_hist { /* one radix pass of a row (also a block's own, in shared memory) */
    unsigned cnt[SD_MB_HBINS];
    unsigned long long lo[SD_MB_HBINS], hi[SD_MB_HBINS], key[SD_MB_HBINS];
} sd_mb_hist;

/* Bytes of the multi-block region for `rows` rows (0 when rows > SD_MB_MAX_ROWS). */
SD_HD size_t sd_mb_region_bytes(int64_t rows) {
    if (rows <= 0 || rows > SD_MB_MAX_ROWS) return 0;
    const size_t r = (size_t)rows;
    return ((r * sizeof(sd_mb_ctrl) + 255) & ~(size_t)255) +
           ((r * 2 * SD_MB_MAX_BLOCKS * sizeof(sd_mb_part) + 255) & ~(size_t)255) + r * SD_MB_HBUFS * sizeof(sd_mb_hist);
}

/* Histogram slot of radix pass number `pass` (counted over the whole row). */
SD_HD int sd_mb_hbuf(int pass) { return pass % SD_MB_HBUFS; }

#endif
