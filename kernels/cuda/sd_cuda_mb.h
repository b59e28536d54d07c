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

/* Does row processing with these parameters run a radix select (then the row's
 * histogram slots are zeroed by the kernel when it starts, see the layouts below)? */
SD_HD int sd_mb_may_select(const sd_sampling_params *sp) {
    return sp->temperature != 0.0f && (sp->top_k > 0 || sd_rule_topp_on(sp->top_p));
}

/* --- workspace layouts (issue 24 (a)) ------------------------------------------------
 * The verifier's and the draft step's workspaces (sd_cuda_verify_ws_bytes,
 * sd_cuda_sample_ws_bytes) begin with a CONTROL HEADER holding every word that must be
 * zero when a launch begins: the one-block verifier's per-sequence counters
 * [SD_CUDA_VERIFY_MAX_SEQ] and the multi-block barrier records (sd_mb_ctrl)
 * [SD_MB_MAX_ROWS]. Their offsets depend only on the sequence / row index, never on
 * the launch shape (n_seq, gamma, V), and every launch leaves the words it used at zero
 * again. Everything after the header moves with the shape and is written before it is
 * read inside one launch: outcomes, p / w rows, partials, and the multi-block radix
 * histograms, which the kernel zeroes itself when it starts (only when it may select,
 * sd_mb_may_select). So ONE zero fill at creation serves launches of any shapes that
 * fit the workspace, in any order, and graphs of them replay. (Before issue 24 the
 * counters sat after shape-dependent regions: a launch of another shape read an
 * earlier launch's rows as barrier counts and histograms.) */
#define SD_CUDA_VERIFY_MAX_SEQ 65535 /* sequences per verifier launch (grid y) */
#define SD_WS_ALIGN 256

SD_HD size_t sd_ws_al(size_t x) { return (x + (SD_WS_ALIGN - 1)) & ~(size_t)(SD_WS_ALIGN - 1); }

/* The control header: counters at 0, barrier records after them. */
#define SD_WS_CTRL_OFF sd_ws_al((size_t)SD_CUDA_VERIFY_MAX_SEQ * sizeof(uint32_t))
#define SD_WS_HEADER_BYTES (SD_WS_CTRL_OFF + sd_ws_al((size_t)SD_MB_MAX_ROWS * sizeof(sd_mb_ctrl)))

/* The multi-block region after `off` for `rows` rows (parts, hist; none when rows is
 * outside [1, SD_MB_MAX_ROWS]): offsets, returns the end. */
SD_HD size_t sd_mb_region_at(size_t off, int64_t rows, size_t *parts, size_t *hist) {
    *parts = *hist = 0;
    if (rows <= 0 || rows > SD_MB_MAX_ROWS) return off;
    const size_t r = (size_t)rows;
    *parts = off;
    *hist = *parts + sd_ws_al(r * 2 * SD_MB_MAX_BLOCKS * sizeof(sd_mb_part));
    return *hist + sd_ws_al(r * SD_MB_HBUFS * sizeof(sd_mb_hist));
}

typedef struct sd_verify_layout { /* byte offsets into the verifier's workspace */
    size_t counters;  /* uint32 [SD_CUDA_VERIFY_MAX_SEQ]    header */
    size_t mb_ctrl;   /* sd_mb_ctrl [SD_MB_MAX_ROWS]         header */
    size_t outcomes;  /* int32 [n_seq][SPECDEC_MAX_DRAFT + 1][2] (token, accepted) */
    size_t p;         /* float [n_seq][gamma + 1][V]  the processed target rows */
    size_t w;         /* double [n_seq][gamma + 1][V] the one-block kernel's weights */
    size_t mb_parts;  /* sd_mb_part [rows][2][SD_MB_MAX_BLOCKS] (0: no multi-block region) */
    size_t mb_hist;   /* sd_mb_hist [rows][SD_MB_HBUFS] */
    size_t total;     /* bytes (0: shape outside the verifier's limits) */
} sd_verify_layout;

SD_HD sd_verify_layout sd_verify_ws_layout(int32_t n_seq, int32_t gamma, int32_t V) {
    sd_verify_layout L;
    memset(&L, 0, sizeof L);
    if (n_seq <= 0 || n_seq > SD_CUDA_VERIFY_MAX_SEQ || gamma < 0 || gamma > SPECDEC_MAX_DRAFT || V <= 0) return L;
    const size_t rows = (size_t)n_seq * (size_t)(gamma + 1);
    L.counters = 0;
    L.mb_ctrl = SD_WS_CTRL_OFF;
    L.outcomes = SD_WS_HEADER_BYTES;
    L.p = L.outcomes + sd_ws_al((size_t)n_seq * (SPECDEC_MAX_DRAFT + 1) * 2 * sizeof(int32_t));
    L.w = L.p + sd_ws_al(rows * (size_t)V * sizeof(float));
    L.total = sd_mb_region_at(L.w + sd_ws_al(rows * (size_t)V * sizeof(double)), (int64_t)rows, &L.mb_parts, &L.mb_hist);
    return L;
}

typedef struct sd_draft_layout { /* byte offsets into the draft step's / row processing's workspace */
    size_t mb_ctrl;  /* sd_mb_ctrl [SD_MB_MAX_ROWS]   header (no counters: offset SD_WS_CTRL_OFF kept) */
    size_t w;        /* double [n_rows][V] the one-block kernels' weights */
    size_t mb_parts, mb_hist; /* as in sd_verify_layout, rows = n_rows */
    size_t total;
} sd_draft_layout;

SD_HD sd_draft_layout sd_draft_ws_layout(int32_t n_rows, int32_t V) {
    sd_draft_layout L;
    memset(&L, 0, sizeof L);
    if (n_rows <= 0 || V <= 0) return L;
    L.mb_ctrl = SD_WS_CTRL_OFF;
    L.w = SD_WS_HEADER_BYTES;
    L.total = sd_mb_region_at(L.w + sd_ws_al((size_t)n_rows * (size_t)V * sizeof(double)), n_rows, &L.mb_parts,
                              &L.mb_hist);
    return L;
}

/* --- the launch plan (issue 24 (f)) ----------------------------------------------------
 * What a device offers a multi-block kernel (queried once per device and kernel by the
 * launcher; host tests pass made-up devices). */
typedef struct sd_mb_dev {
    int sms;           /* multiprocessors */
    int per_sm;        /* blocks of the kernel resident per SM with its shared memory (0: none fit) */
    int coop;          /* cooperative launches supported (cudaDevAttrCooperativeLaunch) */
    size_t smem_optin; /* most shared memory per block the kernel may opt in to */
} sd_mb_dev;

#define SD_MB_PLAN_OK 0
#define SD_MB_PLAN_UNSUPPORTED 1 /* an explicit block count that cannot run here */

/* Blocks per row for `rows` rows of V entries, each block needing `smem` bytes of shared
 * memory: *nb >= 1 (launch the multi-block kernel) or *nb = 0 (req == SD_MB_AUTO only:
 * run the one-block kernel instead). With nb > 1 the blocks of a row wait for each other,
 * so the launch is cooperative and every block of the grid must be co-resident:
 * nb * rows <= sms * per_sm — which the driver checks too, refusing the launch rather
 * than falling back. AUTO never fails: whatever cannot run (too little shared memory,
 * no cooperative launch, too many rows, V needing more blocks than fit) gives *nb = 0.
 * An explicit count (1..SD_MB_MAX_BLOCKS) that cannot run gives SD_MB_PLAN_UNSUPPORTED. */
SD_HD int sd_mb_plan_blocks(const sd_mb_dev *d, size_t smem, int32_t V, int64_t rows, int32_t req, int32_t *nb) {
    *nb = 0;
    const int64_t cap = (int64_t)(d->per_sm > 0 ? d->per_sm : 0) * (int64_t)(d->sms > 0 ? d->sms : 0);
    const int runs = smem <= d->smem_optin && cap > 0 && rows >= 1 && rows <= SD_MB_MAX_ROWS && V >= 1;
    const int32_t lo = sd_mb_min_blocks(V);
    int64_t n = req;
    if (req == SD_MB_AUTO) {
        if (!runs) return SD_MB_PLAN_OK;
        n = cap / rows;
        const int64_t useful = V / SD_MB_CHUNK_MIN > 0 ? V / SD_MB_CHUNK_MIN : 1;
        if (n > SD_MB_MAX_BLOCKS) n = SD_MB_MAX_BLOCKS;
        if (n > useful) n = useful < lo ? lo : useful;
        if (n > 1 && !d->coop) n = lo == 1 ? 1 : 0;
    }
    const int ok = runs && n >= lo && n >= 1 && n <= SD_MB_MAX_BLOCKS && (n == 1 || (d->coop && n * rows <= cap));
    if (ok) *nb = (int32_t)n;
    return ok || req == SD_MB_AUTO ? SD_MB_PLAN_OK : SD_MB_PLAN_UNSUPPORTED;
}

/* Histogram slot of radix pass number `pass` (counted over the whole row). */
SD_HD int sd_mb_hbuf(int pass) { return pass % SD_MB_HBUFS; }

#endif
