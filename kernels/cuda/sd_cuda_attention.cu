/* sd_cuda_attention.cu — grouped-query attention over the paged KV cache for decode,
 * verify, prefill, batched sequences and tree nodes (CPU reference:
 * sd_cpu_attention_keys, one query at a time over an explicit key list).
 *
 * Shapes: q [n, ldq] fp32 (query head h at columns h*hd..), caches k/v
 * [n_kv][cache_rows][hd] in kv_dt, out [n, ldo] fp32. Token m sees its VIRTUAL keys
 * j = 0 .. nkeys_m - 1, each mapped to a logical row and through its sequence's block
 * table to a physical row (sd_cuda_keymap.h: a chain token at p sees rows 0..p, a tree
 * node the cache prefix then its ancestors root-first and itself). Head h reads kv
 * head h / G, G = n_heads / n_kv.
 *   s_j = (q_h . K[row(j)]) * scale [then cap * tanh(s_j / cap)];
 *   out_h = sum_j softmax(s)_j V[row(j)]   (fp32)
 * scale = 1/sqrt(hd) unless given (query_pre_attn_scalar^-1/2), cap > 0 the score
 * soft-capping of Gemma 2; a sliding window keeps the virtual keys [first, nkeys) of
 * each token (sd_keymap_first_key: positions > p - window).
 *
 * Split-KV ("flash decoding"), two kernels:
 * 1. sd_attn_split_kernel, grid (n_kv, n_split, n_blocks), 256 threads: block (g, s, z)
 *    takes the virtual keys of split s = [s*S, (s+1)*S), S = SD_CUDA_ATTN_SPLIT, and up
 *    to 32 (token, head-of-group-g) pairs of ONE unit (consecutive tokens of one
 *    sequence segment; sd_cuda_keymap.h "Attention blocking"). Tiles of 32 virtual keys
 *    from the split start: a SHARED tile (no tree key of any of the block's tokens in
 *    it) is loaded into shared memory once and used by every query head of the group
 *    and every token of the block (GQA-aware); a tile holding a tree node's own keys is
 *    loaded once per token of the block with that token's mapping. The physical rows
 *    of a tile are resolved once per tile by 32 threads into shared memory. Each warp
 *    owns 4 pairs; lane t scores key t of the tile (full dot product over hd in order
 *    d = 0..hd-1), the warp takes the tile max and sum with fixed shuffle trees and
 *    updates an online softmax (running max, sum, accumulator with lane l owning dims
 *    l, l+32, ...). A pair's keys past its nkeys are masked and skipped (the V loop
 *    stops at its last key, so whatever rows follow never enter its sums); tiles past
 *    its keys are skipped. The state of each (token, head, split) goes to `part`.
 * 2. sd_attn_combine_kernel, one warp per (token, head): merges the splits that hold
 *    at least one key of the token, in ascending split order.
 * The split size is a constant and tile boundaries are multiples of 32 from the split
 * start, both in virtual key order, so a token's operations and their order depend
 * only on its own q and its key sequence — not on n, on its place in the batch, on the
 * other tokens or sequences of the block, or on where its rows lie in the pool: decode,
 * verify, prefill, batches and tree nodes give bitwise the same rows as plain decoding
 * of the same keys (batch invariance). n_split = ceil(max nkeys / S) blocks per kv
 * head and unit block. With pos_dev (CUDA-graph replay, CHAIN mode) pos0 is read from
 * device memory and the grid has ceil(n_ctx / S) splits; the ones past the position
 * return at once. The split kernel takes its operands as positional __restrict__
 * parameters (the aliasing facts matter in this hot loop), the combine kernel the
 * launcher's argument struct by value. */
#include <math.h>

#include "sd_cuda_common.cuh"
#include "sd_cuda_launch.h"

#define SD_ATT_TILE SD_KEYMAP_TILE
#define SD_ATT_WARPS 8
#define SD_ATT_PAIRS SD_KEYMAP_PAIRS
#define SD_ATT_PPW (SD_ATT_PAIRS / SD_ATT_WARPS)

/* Dynamic shared memory: the tile's physical rows (int64, first for alignment), then
 * K (rows padded to hd + 1), V, and the block's queries. */
static size_t sd_att_smem_bytes(int hd) {
    return (size_t)SD_ATT_TILE * sizeof(int64_t) +
           (size_t)(SD_ATT_TILE * (hd + 1) + SD_ATT_TILE * hd + SD_ATT_PAIRS * hd) * sizeof(float);
}

static __device__ __forceinline__ float sd_warp_max(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}
static __device__ __forceinline__ float sd_warp_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* The block's share of the work: kv head g, split s, the pairs of unit block u. */
struct SdAttBlock {
    int G, g, s, bt, hd, ks;
    sd_cuda_attunit u;
    const int32_t *table;   /* the unit's block table (shared tiles) */
    int s_begin, s_end;     /* keys of the split the block's tokens can see */
    int t_begin;            /* first tile of the split holding a key some token sees (window) */
    int window;             /* 0: none */
    float cap;              /* score soft-capping; 0: none */
    int shared_end;         /* tiles ending at or below it are shared */
    size_t head_base;       /* element offset of kv head g in a cache matrix */
};

/* Shared-memory views. */
struct SdAttSmem {
    int64_t *rows;          /* [SD_ATT_TILE] physical rows of the current tile (-1: none) */
    float *Ks, *Vs, *Qs;
};

/* Online-softmax state of the SD_ATT_PPW (token, head) pairs of one warp; pair j is
 * p = warp + j * SD_ATT_WARPS of the block, of token tok[j] with nk[j] keys (0: no pair). */
template <int DPL>
struct SdAttPairs {
    float mx[SD_ATT_PPW], l[SD_ATT_PPW], acc[SD_ATT_PPW][DPL];
    int nk[SD_ATT_PPW], tok[SD_ATT_PPW];
    int k0[SD_ATT_PPW]; /* first visible virtual key (sliding window; 0: all) */
};

/* Qs[p * hd + d] = q of pair p, dim d. */
static __device__ __forceinline__ void sd_att_load_q(const float *__restrict__ q, int32_t ldq, const SdAttBlock &B,
                                                     float *Qs) {
    const int hd = B.hd;
    for (int idx = threadIdx.x; idx < B.u.npairs * hd; idx += blockDim.x) {
        const int p = idx / hd, d = idx - p * hd;
        const int m = sd_keymap_pair_tok(&B.u, B.G, p), h = sd_keymap_pair_head(&B.u, B.G, B.g, p);
        Qs[idx] = q[(size_t)m * ldq + (size_t)h * hd + d];
    }
}

/* Tile t0 into shared memory: 32 threads resolve its physical rows (tok NULL: the
 * shared mapping, else that token's), then K/V rows are loaded (zeros where none).
 * Callers pass the barrier structure rows -> sync -> load -> sync. */
static __device__ __forceinline__ void sd_att_load_tile(const void *__restrict__ kc, const void *__restrict__ vc,
                                                        sd_dtype kv_dt, const SdAttBlock &B, const sd_cuda_tok *tok,
                                                        int t0, int key_end, const SdAttSmem &S) {
    if (threadIdx.x < SD_ATT_TILE)
        S.rows[threadIdx.x] = sd_keymap_tile_row(tok, B.table, B.bt, t0, (int32_t)threadIdx.x, key_end);
    __syncthreads(); /* rows are resolved, and the previous tile is consumed */
    const int hd = B.hd;
    for (int idx = threadIdx.x; idx < SD_ATT_TILE * hd; idx += blockDim.x) {
        const int r = idx / hd, d = idx - r * hd;
        const int64_t row = S.rows[r];
        float kv = 0.0f, vv = 0.0f;
        if (row >= 0) {
            const size_t src = B.head_base + (size_t)row * hd + d;
            kv = sd_ld_dt(kc, kv_dt, src);
            vv = sd_ld_dt(vc, kv_dt, src);
        }
        S.Ks[r * B.ks + d] = kv;
        S.Vs[idx] = vv;
    }
    __syncthreads();
}

/* One tile for pair j of the warp (its keys [k0, kend) meet the tile: k0 < t0 + 32,
 * kend > t0): lane t scores key t0 + t, then the online-softmax update of (mx, l, acc)
 * over the valid keys only. */
template <int DPL>
static __device__ __forceinline__ void sd_att_tile_pair(SdAttPairs<DPL> &P, int j, const SdAttSmem &S, int p, int hd,
                                                        int ks, int t0, int kend, float scale, float cap) {
    const int lane = threadIdx.x & 31;
    const int k0 = P.k0[j];
    const bool valid = t0 + lane < kend && t0 + lane >= k0;
    float sc = -INFINITY;
    if (valid) {
        const float *qv = S.Qs + p * hd;
        const float *kr = S.Ks + lane * ks;
        float dot = 0.0f;
        for (int d = 0; d < hd; d++) dot = fmaf(qv[d], kr[d], dot);
        sc = dot * scale;
        if (cap > 0.0f) sc = cap * tanhf(sc / cap);
    }
    const float tmax = sd_warp_max(sc); /* finite: a key of the tile is valid */
    const float m_new = fmaxf(P.mx[j], tmax);
    const float corr = expf(P.mx[j] - m_new); /* 0 on the first tile (mx = -inf) */
    const float pe = valid ? expf(sc - m_new) : 0.0f;
    P.l[j] = P.l[j] * corr + sd_warp_sum(pe);
#pragma unroll
    for (int dd = 0; dd < DPL; dd++) P.acc[j][dd] *= corr;
    const int nv = min(SD_ATT_TILE, kend - t0); /* warp-uniform */
    for (int tt = max(0, k0 - t0); tt < nv; tt++) {
        const float pt = __shfl_sync(0xffffffffu, pe, tt);
        const float *vr = S.Vs + tt * hd;
#pragma unroll
        for (int dd = 0; dd < DPL; dd++) {
            const int d = lane + 32 * dd;
            if (d < hd) P.acc[j][dd] = fmaf(pt, vr[d], P.acc[j][dd]);
        }
    }
    P.mx[j] = m_new;
}

/* The loaded tile t0 for the warp's pairs: all of them (only < 0) or those of token
 * `only`. Warp-uniform conditions (a warp owns whole pairs). */
template <int DPL>
static __device__ __forceinline__ void sd_att_tile_pairs(SdAttPairs<DPL> &P, const SdAttBlock &B, const SdAttSmem &S,
                                                         int t0, int only, float scale) {
    const int warp = threadIdx.x >> 5;
#pragma unroll
    for (int j = 0; j < SD_ATT_PPW; j++) {
        /* no pair, tile in its future or before its window, other token */
        if (!sd_keymap_pair_in_tile(P.nk[j], P.k0[j], t0) || (only >= 0 && P.tok[j] != only)) continue;
        const int kend = min(P.nk[j], B.s_end);
        sd_att_tile_pair<DPL>(P, j, S, warp + j * SD_ATT_WARPS, B.hd, B.ks, t0, kend, scale, B.cap);
    }
}

/* The state of each pair that sees a key of this split -> part[(m, h, s)]. */
template <int DPL>
static __device__ __forceinline__ void sd_att_store(const SdAttPairs<DPL> &P, const SdAttBlock &B, int n_heads,
                                                    int n_split, float *__restrict__ part) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, hd = B.hd;
#pragma unroll
    for (int j = 0; j < SD_ATT_PPW; j++) {
        const int p = warp + j * SD_ATT_WARPS;
        /* no pair, or no key of this split is visible to it (its keys end before the
         * split, or its window starts after it) */
        if (!sd_keymap_pair_in_split(P.nk[j], P.k0[j], B.s_begin)) continue;
        const int m = P.tok[j], h = sd_keymap_pair_head(&B.u, B.G, B.g, p);
        float *dst = part + sd_keymap_part_at(m, h, B.s, n_heads, n_split, hd);
        if (lane == 0) {
            dst[0] = P.mx[j];
            dst[1] = P.l[j];
        }
#pragma unroll
        for (int dd = 0; dd < DPL; dd++) {
            const int d = lane + 32 * dd;
            if (d < hd) dst[2 + d] = P.acc[j][dd];
        }
    }
}

/* The first virtual key any token of the block sees (its window starts). */
static __device__ __forceinline__ int sd_att_block_first(const sd_cuda_keymap &map, const sd_cuda_attunit &u,
                                                         int32_t base, int32_t window) {
    int first = INT32_MAX;
    for (int32_t m = u.m_first; m <= u.m_last; m++)
        first = min(first, sd_keymap_first_key(sd_keymap_tok(&map, m, base).nkeys, window));
    return first;
}

/* Block setup: its unit, key range and table; 0 when the split holds none of its keys. */
static __device__ __forceinline__ int sd_att_block(SdAttBlock &B, const sd_cuda_keymap &map, int32_t n, int32_t base,
                                                   int32_t n_heads, int32_t n_kv, int32_t hd, int32_t cache_rows) {
    B.G = n_heads / n_kv;
    B.g = blockIdx.x;
    B.s = blockIdx.y;
    B.hd = hd;
    B.ks = hd + 1; /* padded K rows: lane t reads row t without bank conflicts */
    B.bt = map.block_tokens;
    B.u = sd_keymap_unit(&map, n, B.G, (int32_t)blockIdx.z);
    int32_t kv_end = 0, shared_end = 0;
    sd_keymap_block_keys(&map, &B.u, base, &kv_end, &shared_end);
    B.shared_end = shared_end;
    B.s_begin = B.s * SD_CUDA_ATTN_SPLIT;
    if (B.s_begin >= kv_end) return 0; /* uniform over the block, before any barrier */
    B.s_end = min(B.s_begin + SD_CUDA_ATTN_SPLIT, kv_end);
    /* Tiles stay at multiples of 32 from the split start; the ones before every token's
     * window are skipped (no token's arithmetic changes: none of its keys is there). */
    const int first = B.window > 0 ? sd_att_block_first(map, B.u, base, B.window) : 0;
    if (first >= B.s_end) return 0; /* uniform over the block */
    B.t_begin = sd_keymap_tile_begin(B.s_begin, first);
    B.table = sd_keymap_tok(&map, B.u.m_first, base).table;
    B.head_base = (size_t)B.g * (size_t)cache_rows * (size_t)hd;
    return 1;
}

/* DPL: head dims per lane (hd <= 32 * DPL). Positional __restrict__ parameters for the
 * operands (the launcher unpacks the argument struct): a struct by value measurably
 * changes ptxas's code for this kernel, and this is the decode path's hot loop. */
template <int DPL>
static __global__ void __launch_bounds__(SD_ATT_WARPS * 32, DPL == 2 ? 4 : 2)
sd_attn_split_kernel(const float *__restrict__ q, int32_t ldq, const void *__restrict__ kc,
                     const void *__restrict__ vc, sd_dtype kv_dt, int32_t cache_rows, int32_t n,
                     const __grid_constant__ sd_cuda_keymap map,
                     int32_t n_heads, int32_t n_kv, int32_t hd, int32_t n_split, float scale, float cap,
                     int32_t window, float *__restrict__ part) {
    extern __shared__ int64_t sd_att_sm[];
    const int32_t base = sd_keymap_base(&map); /* graph replay: a chain's position lives on the device */
    SdAttBlock B;
    B.window = window;
    B.cap = cap;
    if (!sd_att_block(B, map, n, base, n_heads, n_kv, hd, cache_rows)) return;
    SdAttSmem S;
    S.rows = sd_att_sm;
    S.Ks = (float *)(sd_att_sm + SD_ATT_TILE);
    S.Vs = S.Ks + SD_ATT_TILE * B.ks;
    S.Qs = S.Vs + SD_ATT_TILE * hd;
    sd_att_load_q(q, ldq, B, S.Qs); /* read after the first tile's barriers */

    const int warp = threadIdx.x >> 5;
    SdAttPairs<DPL> P;
#pragma unroll
    for (int j = 0; j < SD_ATT_PPW; j++) {
        const int p = warp + j * SD_ATT_WARPS;
        P.tok[j] = p < B.u.npairs ? sd_keymap_pair_tok(&B.u, B.G, p) : -1;
        P.nk[j] = p < B.u.npairs ? sd_keymap_tok(&map, P.tok[j], base).nkeys : 0;
        P.k0[j] = sd_keymap_first_key(P.nk[j], window);
        P.mx[j] = -INFINITY;
        P.l[j] = 0.0f;
#pragma unroll
        for (int dd = 0; dd < DPL; dd++) P.acc[j][dd] = 0.0f;
    }

    for (int t0 = B.t_begin; t0 < B.s_end; t0 += SD_ATT_TILE) {
        if (sd_keymap_tile_shared(t0, B.shared_end)) { /* block-uniform */
            sd_att_load_tile(kc, vc, kv_dt, B, NULL, t0, B.s_end, S);
            sd_att_tile_pairs<DPL>(P, B, S, t0, -1, scale);
            continue;
        }
        for (int m = B.u.m_first; m <= B.u.m_last; m++) { /* a tile with tree keys: per token */
            const sd_cuda_tok tk = sd_keymap_tok(&map, m, base);
            const int kend = min(tk.nkeys, B.s_end);
            if (kend <= t0) continue; /* block-uniform */
            sd_att_load_tile(kc, vc, kv_dt, B, &tk, t0, kend, S);
            sd_att_tile_pairs<DPL>(P, B, S, t0, m, scale);
        }
    }
    sd_att_store<DPL>(P, B, n_heads, n_split, part);
}

static __global__ void sd_attn_combine_kernel(const __grid_constant__ sd_cuda_attention_args a, int32_t n_split) {
    const float *__restrict__ part = a.part;
    float *__restrict__ out = a.out;
    const int32_t n = a.n, n_heads = a.n_heads, hd = a.hd, ldo = a.ldo;
    const int32_t base = sd_keymap_base(&a.map);
    const int idx = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (idx >= n * n_heads) return;
    const int m = idx / n_heads, h = idx - m * n_heads;
    const int32_t nkeys = sd_keymap_tok(&a.map, m, base).nkeys;
    int ns = sd_keymap_n_splits(nkeys); /* splits holding its keys, from s0 on (window) */
    if (ns > n_split) ns = n_split; /* a device position past the caller's bound: never read past part */
    const int s0 = sd_keymap_first_key(nkeys, a.window) / SD_CUDA_ATTN_SPLIT;
    const float *src = part + sd_keymap_part_at(m, h, 0, n_heads, n_split, hd);
    float gmax = -INFINITY;
    for (int s = s0; s < ns; s++) gmax = fmaxf(gmax, src[(size_t)s * (hd + 2)]);
    float den = 0.0f;
    for (int s = s0; s < ns; s++) {
        const float *ps = src + (size_t)s * (hd + 2);
        den = fmaf(ps[1], expf(ps[0] - gmax), den);
    }
    for (int d = lane; d < hd; d += 32) {
        float num = 0.0f;
        for (int s = s0; s < ns; s++) {
            const float *ps = src + (size_t)s * (hd + 2);
            num = fmaf(ps[2 + d], expf(ps[0] - gmax), num);
        }
        out[(size_t)m * ldo + (size_t)h * hd + d] = num / den;
    }
}

extern "C" size_t sd_cuda_attention_part_floats(int32_t n, int32_t n_heads, int32_t hd, int32_t n_ctx) {
    return sd_keymap_part_floats(n, n_heads, hd, n_ctx);
}

/* Above 48 KB of dynamic shared memory a kernel must opt in, per DEVICE (issue 24 (e)):
 * once per device and head-dim bucket, to the bucket's largest size (hd = 32 * DPL), so
 * every opt-in of a bucket sets the same value and racing threads agree. */
template <int DPL>
static specdec_status sd_attn_optin(sd_errbuf *eb) {
    static sd_cuda_dev_once once;
    const size_t smem = sd_att_smem_bytes(32 * DPL);
    if (smem <= SD_CUDA_SMEM_DEFAULT) return SPECDEC_OK;
    int dev = 0;
    SD_CUDA_TRY(eb, cudaGetDevice(&dev));
    if (!sd_cuda_once_needed(&once, dev)) return SPECDEC_OK;
    SD_CUDA_TRY(eb, cudaFuncSetAttribute(sd_attn_split_kernel<DPL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem));
    sd_cuda_once_done(&once, dev);
    return SPECDEC_OK;
}

template <int DPL>
static specdec_status sd_attn_launch(dim3 grid, size_t smem, const sd_cuda_attention_args *a, int32_t n_split,
                                     float scale, cudaStream_t stream, sd_errbuf *eb) {
    const float cap = a->softcap > 0.0f ? a->softcap : 0.0f;
    const specdec_status st = sd_attn_optin<DPL>(eb);
    if (st != SPECDEC_OK) return st;
    sd_attn_split_kernel<DPL><<<grid, SD_ATT_WARPS * 32, smem, stream>>>(
        a->q, a->ldq, a->k_cache, a->v_cache, a->kv_dt, a->cache_rows, a->n, a->map, a->n_heads, a->n_kv, a->hd,
        n_split, scale, cap, a->window > 0 ? a->window : 0, a->part);
    SD_CUDA_LAUNCHED(eb, "sd_attn_split_kernel");
    return SPECDEC_OK;
}

/* The keys the launch may address (sd_keymap_key_bound), or -1 when the arguments are
 * inconsistent. */
static int64_t sd_attn_key_bound(const sd_cuda_attention_args *a) {
    if (a->hd <= 0 || a->hd > SD_CUDA_ATTN_MAX_HD || a->n_kv <= 0 || a->n_heads % a->n_kv != 0) return -1;
    return sd_keymap_key_bound(&a->map, a->n, a->n_ctx, a->cache_rows);
}

/* With pos_dev != NULL the queries sit at *pos_dev + pos0 (read on the device, so a
 * captured graph replays at the current position) and the grid covers every split of
 * n_ctx; splits past the position exit at once. */
extern "C" specdec_status sd_cuda_attention(const sd_cuda_attention_args *a, cudaStream_t stream, sd_errbuf *eb) {
    if (!a) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_attention: NULL args");
    const int32_t n = a->n, hd = a->hd;
    if (n <= 0) return SPECDEC_OK;
    const int64_t keys = sd_attn_key_bound(a);
    if (keys < 1)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "sd_cuda_attention: head_dim %d (max %d), heads %d / kv heads %d, %d tokens, %s mode "
                       "(pos0 %d, max_keys %d, %d blocks, block_tokens %d), n_ctx %d, cache rows %d",
                       (int)hd, SD_CUDA_ATTN_MAX_HD, (int)a->n_heads, (int)a->n_kv, (int)n,
                       a->map.tok ? "general" : "chain", (int)a->map.pos0, (int)a->map.max_keys, (int)a->map.n_blk,
                       (int)a->map.block_tokens, (int)a->n_ctx, (int)a->cache_rows);
    const int G = a->n_heads / a->n_kv;
    const int n_split = sd_keymap_part_splits(keys);
    const size_t need = sd_keymap_part_floats(n, a->n_heads, hd, keys); /* issue 24 (b) */
    if (!a->part || need > a->part_floats)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "sd_cuda_attention: split scratch of %zu floats, %zu needed (%d tokens over up to %lld keys "
                       "= %d splits, %d heads, head_dim %d); cut the launch (sd_keymap_part_rows)",
                       a->part ? a->part_floats : (size_t)0, need, (int)n, (long long)keys, n_split, (int)a->n_heads,
                       (int)hd);
    const int32_t n_blk = sd_keymap_n_blocks(&a->map, n, G);
    if (n_blk > 65535)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_attention: %d attention blocks in one launch",
                       (int)n_blk);
    const dim3 grid((unsigned)a->n_kv, (unsigned)n_split, (unsigned)n_blk);
    const size_t smem = sd_att_smem_bytes(hd);
    const float scale = a->scale > 0.0f ? a->scale : (float)(1.0 / sqrt((double)hd));
    specdec_status st;
    if (hd <= 64) st = sd_attn_launch<2>(grid, smem, a, n_split, scale, stream, eb);
    else if (hd <= 128) st = sd_attn_launch<4>(grid, smem, a, n_split, scale, stream, eb);
    else st = sd_attn_launch<8>(grid, smem, a, n_split, scale, stream, eb);
    if (st != SPECDEC_OK) return st;
    const int warps_per_block = 4;
    sd_attn_combine_kernel<<<sd_cdiv((size_t)n * a->n_heads, warps_per_block), warps_per_block * 32, 0, stream>>>(
        *a, n_split);
    SD_CUDA_LAUNCHED(eb, "sd_attn_combine_kernel");
    return SPECDEC_OK;
}
