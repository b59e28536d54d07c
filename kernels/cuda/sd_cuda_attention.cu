/* sd_cuda_attention.cu — causal grouped-query attention over the KV cache for decode,
 * verify and prefill (CPU reference: sd_cpu_attention, one query at a time).
 *
 * Shapes: q [n, ldq] fp32 (query head h at columns h*hd..), caches k/v
 * [n_kv][n_ctx][hd] in kv_dt, out [n, ldo] fp32. Token m sits at p_m = pos0 + m and
 * sees keys 0..p_m. Head h reads kv head h / G, G = n_heads / n_kv.
 *   s_j = (q_h . K[j]) / sqrt(hd);  out_h = sum_j softmax(s)_j V[j]     (fp32)
 *
 * Split-KV ("flash decoding"), two kernels:
 * 1. sd_attn_split_kernel, grid (n_kv, n_split, ceil(n*G / 32)), 256 threads: block
 *    (g, s, z) takes the keys of split s = [s*S, (s+1)*S), S = SD_CUDA_ATTN_SPLIT, and
 *    32 (token, head-of-group-g) pairs. Each K/V tile (32 keys) is loaded into shared
 *    memory once and used by every query head of the group and every token of the
 *    block (GQA-aware). Each warp owns 4 pairs; lane t scores key t of the tile
 *    (full dot product over hd in order d = 0..hd-1), the warp takes the tile max and
 *    sum with fixed shuffle trees and updates an online softmax (running max, sum,
 *    accumulator with lane l owning dims l, l+32, ...). Keys after p_m are masked
 *    (causal inside the new block); tiles fully masked are skipped. The state of
 *    each (token, head, split) goes to `part`.
 * 2. sd_attn_combine_kernel, one warp per (token, head): merges the splits that hold
 *    at least one key of the token, in ascending split order.
 * The split size is a constant and tile boundaries are multiples of 32 from the split
 * start, so a token's operations and their order depend only on its own q and keys
 * 0..p_m — not on n, on its place in the batch, or on the other tokens of the block:
 * decode, verify and prefill give bitwise the same rows (batch invariance). Long
 * contexts get n_split = ceil((pos0 + n) / S) blocks per kv head. Prefill is the same
 * kernel: tiled over keys (32) and queries (32 pairs per block) with online softmax.
 * With pos_dev (CUDA-graph replay) pos0 is read from device memory and the grid has
 * ceil(n_ctx / S) splits; the ones past the position return at once.
 * The kernels take the launcher's argument struct by value and name its pointers as
 * __restrict__ locals (the aliasing facts of __restrict__ parameters). */
#include <math.h>

#include "sd_cuda_common.cuh"

#define SD_ATT_TILE 32
#define SD_ATT_WARPS 8
#define SD_ATT_PAIRS 32
#define SD_ATT_PPW (SD_ATT_PAIRS / SD_ATT_WARPS)

static size_t sd_att_smem_bytes(int hd) {
    return (size_t)(SD_ATT_TILE * (hd + 1) + SD_ATT_TILE * hd + SD_ATT_PAIRS * hd) * sizeof(float);
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

/* The block's share of the work: kv head g, split s, pairs pair0 .. pair0 + npairs. */
struct SdAttBlock {
    int G, g, s, pair0, npairs;
    int s_begin, s_end; /* keys of the split the block's tokens can see */
};

/* Online-softmax state of the SD_ATT_PPW (token, head) pairs of one warp; pair j is
 * p = warp + j * SD_ATT_WARPS of the block, qpos[j] its position (-1: no pair). */
template <int DPL>
struct SdAttPairs {
    float mx[SD_ATT_PPW], l[SD_ATT_PPW], acc[SD_ATT_PPW][DPL];
    int qpos[SD_ATT_PPW];
};

/* Qs[p * hd + d] = q of pair p, dim d. */
static __device__ __forceinline__ void sd_att_load_q(const float *__restrict__ q, int32_t ldq, int hd,
                                                     const SdAttBlock &B, float *Qs) {
    for (int idx = threadIdx.x; idx < B.npairs * hd; idx += blockDim.x) {
        const int p = idx / hd, d = idx - p * hd;
        const int gp = B.pair0 + p;
        const int m = gp / B.G, h = B.g * B.G + (gp - m * B.G);
        Qs[idx] = q[(size_t)m * ldq + (size_t)h * hd + d];
    }
}

/* K/V tile of keys t0 .. t0 + 31 into shared memory (zeros past s_end). */
static __device__ __forceinline__ void sd_att_load_tile(const void *__restrict__ kc, const void *__restrict__ vc,
                                                        sd_dtype kv_dt, size_t head_base, int hd, int ks, int t0,
                                                        int s_end, float *Ks, float *Vs) {
    for (int idx = threadIdx.x; idx < SD_ATT_TILE * hd; idx += blockDim.x) {
        const int r = idx / hd, d = idx - r * hd;
        float kv = 0.0f, vv = 0.0f;
        if (t0 + r < s_end) {
            const size_t src = head_base + (size_t)(t0 + r) * hd + d;
            kv = sd_ld_dt(kc, kv_dt, src);
            vv = sd_ld_dt(vc, kv_dt, src);
        }
        Ks[r * ks + d] = kv;
        Vs[idx] = vv;
    }
}

/* One tile for pair j of the warp (qpos >= t0): lane t scores key t0 + t, then the
 * online-softmax update of (mx, l, acc). */
template <int DPL>
static __device__ __forceinline__ void sd_att_tile_pair(SdAttPairs<DPL> &P, int j, const float *Qs, const float *Ks,
                                                        const float *Vs, int p, int hd, int ks, int t0, int s_end,
                                                        float scale) {
    const int lane = threadIdx.x & 31;
    const int key = t0 + lane;
    const bool valid = key < s_end && key <= P.qpos[j];
    float sc = -INFINITY;
    if (valid) {
        const float *qv = Qs + p * hd;
        const float *kr = Ks + lane * ks;
        float dot = 0.0f;
        for (int d = 0; d < hd; d++) dot = fmaf(qv[d], kr[d], dot);
        sc = dot * scale;
    }
    const float tmax = sd_warp_max(sc); /* finite: key t0 is valid */
    const float m_new = fmaxf(P.mx[j], tmax);
    const float corr = expf(P.mx[j] - m_new); /* 0 on the first tile (mx = -inf) */
    const float pe = valid ? expf(sc - m_new) : 0.0f;
    P.l[j] = P.l[j] * corr + sd_warp_sum(pe);
#pragma unroll
    for (int dd = 0; dd < DPL; dd++) P.acc[j][dd] *= corr;
    for (int tt = 0; tt < SD_ATT_TILE; tt++) {
        const float pt = __shfl_sync(0xffffffffu, pe, tt);
        const float *vr = Vs + tt * hd;
#pragma unroll
        for (int dd = 0; dd < DPL; dd++) {
            const int d = lane + 32 * dd;
            if (d < hd) P.acc[j][dd] = fmaf(pt, vr[d], P.acc[j][dd]);
        }
    }
    P.mx[j] = m_new;
}

/* The state of each pair that sees a key of this split -> part[(m, h, s)]. */
template <int DPL>
static __device__ __forceinline__ void sd_att_store(const SdAttPairs<DPL> &P, const SdAttBlock &B, int n_heads,
                                                    int hd, int n_split, float *__restrict__ part) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < SD_ATT_PPW; j++) {
        const int p = warp + j * SD_ATT_WARPS;
        if (P.qpos[j] < B.s_begin) continue; /* no pair, or no key of this split is visible to it */
        const int gp = B.pair0 + p;
        const int m = gp / B.G, h = B.g * B.G + (gp - m * B.G);
        float *dst = part + (((size_t)m * n_heads + h) * n_split + B.s) * (size_t)(hd + 2);
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

/* DPL: head dims per lane (hd <= 32 * DPL). Positional __restrict__ parameters (the
 * launcher unpacks the argument struct): a struct by value measurably changes ptxas's
 * code for this kernel, and this is the decode path's hot loop. */
template <int DPL>
static __global__ void __launch_bounds__(SD_ATT_WARPS * 32)
sd_attn_split_kernel(const float *__restrict__ q, int32_t ldq, const void *__restrict__ kc,
                     const void *__restrict__ vc, sd_dtype kv_dt, int32_t n_ctx, int32_t n, int32_t pos0,
                     const int64_t *__restrict__ pos_dev, int32_t n_heads, int32_t n_kv, int32_t hd, int32_t n_split,
                     float scale, float *__restrict__ part) {
    extern __shared__ float sd_att_sm[];
    if (pos_dev) pos0 += (int32_t)*pos_dev; /* graph replay: the position lives on the device */
    SdAttBlock B;
    B.G = n_heads / n_kv;
    B.g = blockIdx.x;
    B.s = blockIdx.y;
    B.pair0 = blockIdx.z * SD_ATT_PAIRS;
    B.npairs = min(SD_ATT_PAIRS, n * B.G - B.pair0);
    const int ks = hd + 1; /* padded K rows: lane t reads row t without bank conflicts */
    float *Ks = sd_att_sm;
    float *Vs = Ks + SD_ATT_TILE * ks;
    float *Qs = Vs + SD_ATT_TILE * hd;

    const int kv_end = pos0 + (B.pair0 + B.npairs - 1) / B.G + 1; /* keys the block's last token sees */
    B.s_begin = B.s * SD_CUDA_ATTN_SPLIT;
    if (B.s_begin >= kv_end) return; /* uniform over the block, before any barrier */
    B.s_end = min(B.s_begin + SD_CUDA_ATTN_SPLIT, kv_end);

    sd_att_load_q(q, ldq, hd, B, Qs);

    const int warp = threadIdx.x >> 5;
    SdAttPairs<DPL> P;
#pragma unroll
    for (int j = 0; j < SD_ATT_PPW; j++) {
        const int p = warp + j * SD_ATT_WARPS;
        P.qpos[j] = p < B.npairs ? pos0 + (B.pair0 + p) / B.G : -1;
        P.mx[j] = -INFINITY;
        P.l[j] = 0.0f;
#pragma unroll
        for (int dd = 0; dd < DPL; dd++) P.acc[j][dd] = 0.0f;
    }

    const size_t head_base = (size_t)B.g * n_ctx * hd;
    for (int t0 = B.s_begin; t0 < B.s_end; t0 += SD_ATT_TILE) {
        __syncthreads(); /* the previous tile is consumed (and Qs is written) */
        sd_att_load_tile(kc, vc, kv_dt, head_base, hd, ks, t0, B.s_end, Ks, Vs);
        __syncthreads();
#pragma unroll
        for (int j = 0; j < SD_ATT_PPW; j++) {
            if (P.qpos[j] < t0) continue; /* no pair, or the whole tile is in its future (warp-uniform) */
            sd_att_tile_pair<DPL>(P, j, Qs, Ks, Vs, warp + j * SD_ATT_WARPS, hd, ks, t0, B.s_end, scale);
        }
    }
    sd_att_store<DPL>(P, B, n_heads, hd, n_split, part);
}

static __global__ void sd_attn_combine_kernel(sd_cuda_attention_args a, int32_t n_split) {
    const float *__restrict__ part = a.part;
    float *__restrict__ out = a.out;
    const int64_t *__restrict__ pos_dev = a.pos_dev;
    const int32_t n = a.n, n_heads = a.n_heads, hd = a.hd, ldo = a.ldo;
    int32_t pos0 = a.pos0;
    if (pos_dev) pos0 += (int32_t)*pos_dev;
    const int idx = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (idx >= n * n_heads) return;
    const int m = idx / n_heads, h = idx - m * n_heads;
    const int ns = (pos0 + m) / SD_CUDA_ATTN_SPLIT + 1; /* splits holding keys 0..p_m */
    const float *src = part + ((size_t)m * n_heads + h) * n_split * (size_t)(hd + 2);
    float gmax = -INFINITY;
    for (int s = 0; s < ns; s++) gmax = fmaxf(gmax, src[(size_t)s * (hd + 2)]);
    float den = 0.0f;
    for (int s = 0; s < ns; s++) {
        const float *ps = src + (size_t)s * (hd + 2);
        den = fmaf(ps[1], expf(ps[0] - gmax), den);
    }
    for (int d = lane; d < hd; d += 32) {
        float num = 0.0f;
        for (int s = 0; s < ns; s++) {
            const float *ps = src + (size_t)s * (hd + 2);
            num = fmaf(ps[2 + d], expf(ps[0] - gmax), num);
        }
        out[(size_t)m * ldo + (size_t)h * hd + d] = num / den;
    }
}

extern "C" size_t sd_cuda_attention_part_floats(int32_t n, int32_t n_heads, int32_t hd, int32_t n_ctx) {
    const size_t n_split = ((size_t)n_ctx + SD_CUDA_ATTN_SPLIT - 1) / SD_CUDA_ATTN_SPLIT;
    return (size_t)n * n_heads * n_split * (size_t)(hd + 2);
}

template <int DPL>
static specdec_status sd_attn_launch(dim3 grid, size_t smem, const sd_cuda_attention_args *a, int32_t n_split,
                                     float scale, cudaStream_t stream, sd_errbuf *eb) {
    /* Above 48 KB of dynamic shared memory a kernel must opt in, once per process and
     * size (done on the first launch, outside any graph capture in practice). */
    static size_t opted = 48 * 1024;
    if (smem > opted) {
        SD_CUDA_TRY(eb, cudaFuncSetAttribute(sd_attn_split_kernel<DPL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)smem));
        opted = smem;
    }
    sd_attn_split_kernel<DPL><<<grid, SD_ATT_WARPS * 32, smem, stream>>>(a->q, a->ldq, a->k_cache, a->v_cache, a->kv_dt,
                                                                         a->n_ctx, a->n, a->pos0, a->pos_dev, a->n_heads,
                                                                         a->n_kv, a->hd, n_split, scale, a->part);
    SD_CUDA_LAUNCHED(eb, "sd_attn_split_kernel");
    return SPECDEC_OK;
}

/* With pos_dev != NULL the queries sit at *pos_dev + pos0 (read on the device, so a
 * captured graph replays at the current position) and the grid covers every split of
 * n_ctx; splits past the position exit at once. */
extern "C" specdec_status sd_cuda_attention(const sd_cuda_attention_args *a, cudaStream_t stream, sd_errbuf *eb) {
    if (!a) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_attention: NULL args");
    const int32_t n = a->n, n_ctx = a->n_ctx, pos0 = a->pos0, hd = a->hd;
    if (n <= 0) return SPECDEC_OK;
    const int32_t last = a->pos_dev ? n_ctx - n : pos0; /* largest start the call may see */
    if (hd <= 0 || hd > SD_CUDA_ATTN_MAX_HD || a->n_kv <= 0 || a->n_heads % a->n_kv != 0 ||
        (!a->pos_dev && pos0 < 0) || last + n > n_ctx || n > n_ctx)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "sd_cuda_attention: head_dim %d (max %d), heads %d / kv heads %d, positions %d..%d, n_ctx %d",
                       (int)hd, SD_CUDA_ATTN_MAX_HD, (int)a->n_heads, (int)a->n_kv, (int)pos0, (int)(pos0 + n),
                       (int)n_ctx);
    const int G = a->n_heads / a->n_kv;
    const int n_split = ((a->pos_dev ? n_ctx : pos0 + n) + SD_CUDA_ATTN_SPLIT - 1) / SD_CUDA_ATTN_SPLIT;
    const dim3 grid((unsigned)a->n_kv, (unsigned)n_split, sd_cdiv((size_t)n * G, SD_ATT_PAIRS));
    if (grid.z > 65535u)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_attention: %d query tokens in one launch", (int)n);
    const size_t smem = sd_att_smem_bytes(hd);
    const float scale = (float)(1.0 / sqrt((double)hd));
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
