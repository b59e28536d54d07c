/* sd_cuda_sample_row.cuh — block-level device building blocks of the sampling / verify
 * kernels (included by sd_cuda_sample.cu and sd_cuda_verify.cu only).
 *
 * Every per-element decision is a function of core/sd_sample_rules.h (the CPU reference
 * kernels/cpu/sd_cpu_sample.c, sd_cpu_verify.c calls the same ones): argmax merges
 * (sd_rule_argmax_better), weights (sd_rule_scale, sd_rule_weight), rank order
 * (sd_rule_ranks_before), whether top-k / top-p / min-p act and what min-p keeps,
 * fixed-point masses (sd_rule_fix, sd_rule_prob_mass, sd_rule_residual), the
 * normalisation (sd_rule_norm) and the targets of the prefix searches. What is CUDA's
 * own here is the order of the work: block reductions, a radix select and tiled prefix
 * searches, all over exact integer sums, hence the same bits as the CPU's heap and
 * sequential scans.
 *
 * Every function here is called by ALL threads of a 1024-thread block (it contains
 * __syncthreads) and works on one row of V <= 262144 entries in global memory:
 *
 * row_process_row: logits -> processed probabilities, the steps of sd_sample_rules.h:
 *   greedy (T == 0): one-hot of the logit argmax (row_greedy);
 *   else m = sd_rule_scale(max logit, T) (division by T > 0 is monotone, so this is
 *   max z); m == -inf: one-hot of 0; else w = sd_rule_weight(logit, T, m), stored
 *   (double) in the caller's row buffer (row_weights); top-k / top-p select a prefix
 *   of the rank order with row_rank_cut (row_cuts); min-p keeps sd_rule_minp_keep;
 *   probs = sd_rule_norm(w, S) with S the exact fixed-point sum of the kept w
 *   (row_normalise). Returns the argmax of the written probabilities.
 *
 * row_rank_cut: the last element of the rank order whose measure-before is < thr
 *   (measure = 1 per candidate for top-k with thr = k, fixed-point w for top-p with
 *   thr = sd_rule_topp_threshold). MSB-first radix descent over the 63 significant
 *   bits of w's bit pattern (sd_rule_key: monotone for w >= 0; digits 11,11,11,10,10,10
 *   bits; per-bucket counts and exact 128-bit masses via shared-memory integer atomics:
 *   order independent, hence deterministic); stops early when the chosen bucket holds
 *   one element (row_cut_single); ties of the final key are cut by id with row_find
 *   (row_cut_ties).
 *
 * row_tiles / row_find: first index i with pos(i) whose inclusive prefix of the
 *   fixed-point measure reaches a target (inverse CDF, residual sampling, k-th tie);
 *   the last index with pos(i) if the total falls short; -1 if none. Tiles of 1024
 *   ids: pass 1 (all warps, coalesced) stores each tile's exact sum; warp 0 then scans
 *   the <= 256 tile sums and the crossing tile.
 *
 * row_philox_word (per thread, no block contract): the cuRAND Philox word of slot
 *   (position, purpose), the device side of sd_rng_u32_at(). */
#ifndef SD_CUDA_SAMPLE_ROW_CUH
#define SD_CUDA_SAMPLE_ROW_CUH

#include <curand_kernel.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "sd_sample_rules.h"

extern "C" {
#include "sd_rng.h"
}

#define ROW_NT 1024
#define ROW_NW 32
#define ROW_TILE 1024
#define ROW_MAX_TILES 256
#define ROW_HBINS 2048
#define ROW_FULL 0xffffffffu

typedef unsigned long long row_ull;

struct RowShared {
    union {
        struct {
            unsigned cnt[ROW_HBINS];
            row_ull lo[ROW_HBINS];
            row_ull hi[ROW_HBINS];
        } h;
        struct {
            row_ull lo[ROW_MAX_TILES];
            row_ull hi[ROW_MAX_TILES];
            int last[ROW_MAX_TILES];
        } t;
    } u;
    sd_u128 r128[ROW_NW];
    float rf[ROW_NW];
    int ri[ROW_NW];
    sd_u128 bc128;
    row_ull bckey;
    int bcint;
    int bcint2;
    unsigned bccnt;
    float bcf;
};

/* cuRAND word of slot (position, purpose) of stream (seed, seq): sd_rng_u32_at(). */
static __device__ uint32_t row_philox_word(uint64_t seed, uint64_t seq, int64_t position, int purpose) {
    curandStatePhilox4_32_10_t st;
    curand_init((unsigned long long)seed, (unsigned long long)seq, (unsigned long long)sd_rng_offset(position, purpose),
                &st);
    return curand(&st);
}

/* A prefix of the rank order (sd_rule_ranks_before), ending at element (w, id): a
 * candidate (w_i > 0, i) is inside iff (w, id) does not rank before it. row_cut_all()
 * = {0, INT_MAX} holds every candidate. */
struct RowCut {
    double w;
    int id;
};
static __device__ __forceinline__ RowCut row_cut_all() { return RowCut{0.0, INT_MAX}; }

static __device__ __forceinline__ bool row_in_cut(RowCut c, double w, int i) {
    return !sd_rule_ranks_before(c.w, c.id, w, i);
}

/* --- 128-bit warp / block helpers ------------------------------------------------- */
static __device__ __forceinline__ sd_u128 row_mk128(row_ull hi, row_ull lo) { return ((sd_u128)hi << 64) | lo; }
static __device__ __forceinline__ sd_u128 row_shfl_xor128(sd_u128 v, int m) {
    row_ull lo = __shfl_xor_sync(ROW_FULL, (row_ull)v, m);
    row_ull hi = __shfl_xor_sync(ROW_FULL, (row_ull)(v >> 64), m);
    return row_mk128(hi, lo);
}
static __device__ __forceinline__ sd_u128 row_shfl_up128(sd_u128 v, int d) {
    row_ull lo = __shfl_up_sync(ROW_FULL, (row_ull)v, d);
    row_ull hi = __shfl_up_sync(ROW_FULL, (row_ull)(v >> 64), d);
    return row_mk128(hi, lo);
}
static __device__ __forceinline__ sd_u128 row_shfl_down128(sd_u128 v, int d) {
    row_ull lo = __shfl_down_sync(ROW_FULL, (row_ull)v, d);
    row_ull hi = __shfl_down_sync(ROW_FULL, (row_ull)(v >> 64), d);
    return row_mk128(hi, lo);
}
static __device__ __forceinline__ sd_u128 row_shfl128(sd_u128 v, int src) {
    row_ull lo = __shfl_sync(ROW_FULL, (row_ull)v, src);
    row_ull hi = __shfl_sync(ROW_FULL, (row_ull)(v >> 64), src);
    return row_mk128(hi, lo);
}
static __device__ __forceinline__ sd_u128 row_warp_sum128(sd_u128 v) {
    for (int m = 16; m > 0; m >>= 1) v += row_shfl_xor128(v, m);
    return v;
}
/* Inclusive prefix sum over lanes. */
static __device__ __forceinline__ sd_u128 row_warp_scan128(sd_u128 v, int lane) {
    for (int d = 1; d < 32; d <<= 1) {
        sd_u128 o = row_shfl_up128(v, d);
        if (lane >= d) v += o;
    }
    return v;
}
/* Inclusive suffix sum over lanes (lane l gets the sum of lanes l..31). */
static __device__ __forceinline__ sd_u128 row_warp_suffix128(sd_u128 v, int lane) {
    for (int d = 1; d < 32; d <<= 1) {
        sd_u128 o = row_shfl_down128(v, d);
        if (lane + d < 32) v += o;
    }
    return v;
}

static __device__ sd_u128 row_block_sum128(sd_u128 v, RowShared &sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = row_warp_sum128(v);
    if (lane == 0) sh.r128[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = sh.r128[lane];
        v = row_warp_sum128(v);
        if (lane == 0) sh.bc128 = v;
    }
    __syncthreads();
    sd_u128 r = sh.bc128;
    __syncthreads();
    return r;
}

static __device__ float row_block_max(float v, RowShared &sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(ROW_FULL, v, m));
    if (lane == 0) sh.rf[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = sh.rf[lane];
        for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(ROW_FULL, v, m));
        if (lane == 0) sh.bcf = v;
    }
    __syncthreads();
    float r = sh.bcf;
    __syncthreads();
    return r;
}

/* Argmax merged with sd_rule_argmax_better (the CPU's rule: larger value wins, equal
 * values -> lower id, -inf / NaN never win); a thread that saw nothing but -inf / NaN
 * carries (-inf, INT_MAX). Returns 0 if nobody found one. */
static __device__ int row_block_argmax(float v, int id, RowShared &sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int m = 16; m > 0; m >>= 1) {
        float ov = __shfl_xor_sync(ROW_FULL, v, m);
        int oi = __shfl_xor_sync(ROW_FULL, id, m);
        if (sd_rule_argmax_better(ov, oi, v, id)) {
            v = ov;
            id = oi;
        }
    }
    if (lane == 0) {
        sh.rf[warp] = v;
        sh.ri[warp] = id;
    }
    __syncthreads();
    if (warp == 0) {
        v = sh.rf[lane];
        id = sh.ri[lane];
        for (int m = 16; m > 0; m >>= 1) {
            float ov = __shfl_xor_sync(ROW_FULL, v, m);
            int oi = __shfl_xor_sync(ROW_FULL, id, m);
            if (sd_rule_argmax_better(ov, oi, v, id)) {
                v = ov;
                id = oi;
            }
        }
        if (lane == 0) sh.bcint = (id == INT_MAX) ? 0 : id;
    }
    __syncthreads();
    int r = sh.bcint;
    __syncthreads();
    return r;
}

/* --- prefix search ------------------------------------------------------------------
 * F: struct with  __device__ uint64_t operator()(int i, int &pos) const
 * returning the fixed-point measure of element i and whether it counts as present. */
template <class F>
static __device__ sd_u128 row_tiles(int V, const F &f, RowShared &sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int ntiles = (V + ROW_TILE - 1) / ROW_TILE;
    for (int t = warp; t < ntiles; t += ROW_NW) {
        sd_u128 s = 0;
        int last = -1;
        for (int j = 0; j < ROW_TILE / 32; j++) {
            int i = t * ROW_TILE + j * 32 + lane;
            if (i < V) {
                int pos = 0;
                uint64_t m = f(i, pos);
                s += m;
                if (pos) last = i;
            }
        }
        s = row_warp_sum128(s);
        for (int m = 16; m > 0; m >>= 1) last = max(last, __shfl_xor_sync(ROW_FULL, last, m));
        if (lane == 0) {
            sh.u.t.lo[t] = (row_ull)s;
            sh.u.t.hi[t] = (row_ull)(s >> 64);
            sh.u.t.last[t] = last;
        }
    }
    __syncthreads();
    if (warp == 0) {
        sd_u128 s = 0;
        for (int t = lane; t < ntiles; t += 32) s += row_mk128(sh.u.t.hi[t], sh.u.t.lo[t]);
        s = row_warp_sum128(s);
        if (lane == 0) sh.bc128 = s;
    }
    __syncthreads();
    sd_u128 r = sh.bc128;
    __syncthreads();
    return r;
}

/* Needs the tile sums of row_tiles(V, f) (same f, no shared-memory use in between). */
template <class F>
static __device__ int row_find(int V, const F &f, sd_u128 target, RowShared &sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int ntiles = (V + ROW_TILE - 1) / ROW_TILE;
    if (target == 0) target = 1;
    if (warp == 0) {
        const int tpl = (ntiles + 31) / 32;
        const int t0 = lane * tpl, t1 = min(t0 + tpl, ntiles);
        sd_u128 ls = 0;
        int llast = -1;
        for (int t = t0; t < t1; t++) {
            ls += row_mk128(sh.u.t.hi[t], sh.u.t.lo[t]);
            llast = max(llast, sh.u.t.last[t]);
        }
        for (int m = 16; m > 0; m >>= 1) llast = max(llast, __shfl_xor_sync(ROW_FULL, llast, m));
        sd_u128 incl = row_warp_scan128(ls, lane);
        unsigned ball = __ballot_sync(ROW_FULL, incl >= target);
        int result;
        if (ball == 0) {
            result = llast; /* the total falls short: last present element (or -1) */
        } else {
            const int src = __ffs(ball) - 1;
            /* the crossing lane locates the tile */
            int tile = -1;
            sd_u128 base = incl - ls;
            if (lane == src) {
                for (int t = t0; t < t1; t++) {
                    sd_u128 ts = row_mk128(sh.u.t.hi[t], sh.u.t.lo[t]);
                    if (base + ts >= target) {
                        tile = t;
                        break;
                    }
                    base += ts;
                }
            }
            tile = __shfl_sync(ROW_FULL, tile, src);
            base = row_shfl128(base, src);
            /* inside the tile: lane owns 32 consecutive ids */
            const int e0 = tile * ROW_TILE + lane * 32;
            sd_u128 es = 0;
            for (int j = 0; j < 32; j++) {
                int i = e0 + j;
                if (i < V) {
                    int pos = 0;
                    es += f(i, pos);
                }
            }
            sd_u128 eincl = row_warp_scan128(es, lane);
            unsigned eb = __ballot_sync(ROW_FULL, base + eincl >= target);
            const int esrc = eb ? __ffs(eb) - 1 : 31;
            int found = -1;
            if (lane == esrc) {
                sd_u128 c = base + eincl - es;
                for (int j = 0; j < 32; j++) {
                    int i = e0 + j;
                    if (i >= V) break;
                    int pos = 0;
                    uint64_t m = f(i, pos);
                    c += m;
                    if (pos && c >= target) {
                        found = i;
                        break;
                    }
                }
            }
            found = __shfl_sync(ROW_FULL, found, esrc);
            result = found >= 0 ? found : llast; /* cannot miss; defensive */
        }
        if (lane == 0) sh.bcint2 = result;
    }
    __syncthreads();
    int r = sh.bcint2;
    __syncthreads();
    return r;
}

/* Measures used with row_tiles / row_find. */
struct RowProbMeas { /* processed probabilities: inverse CDF */
    const float *p;
    __device__ uint64_t operator()(int i, int &pos) const { return sd_rule_prob_mass(p[i], &pos); }
};
struct RowResidMeas { /* max(0, p - q) in double */
    const float *p, *q;
    __device__ uint64_t operator()(int i, int &pos) const { return sd_rule_residual(p[i], q[i], &pos); }
};
struct RowResidDetMeas { /* max(0, p - onehot(x)) in double: a deterministic draft x */
    const float *p;
    int x;
    __device__ uint64_t operator()(int i, int &pos) const { return sd_rule_residual(p[i], i == x ? 1.0f : 0.0f, &pos); }
};
struct RowTieMeas { /* candidates whose key equals k, inside the previous cut */
    const double *w;
    uint64_t k;
    RowCut prev;
    __device__ uint64_t operator()(int i, int &pos) const {
        double wi = w[i];
        uint64_t key = sd_rule_key(wi);
        pos = wi > 0.0 && key == k && row_in_cut(prev, wi, i);
        return pos ? 1u : 0u;
    }
};

/* Inverse-CDF sample of a processed row with Philox word x (sd_sample_inverse_cdf). */
static __device__ int row_sample_row(const float *p, int V, uint32_t x, RowShared &sh) {
    RowProbMeas f{p};
    row_tiles(V, f, sh);
    int r = row_find(V, f, sd_rule_cdf_target(x), sh);
    return r < 0 ? 0 : r;
}

/* Residual sample norm(max(0, p - q)) with word x; p itself when the residual is empty. */
template <class M> static __device__ int row_sample_resid_meas(const float *p, const M &f, int V, uint32_t x,
                                                                RowShared &sh) {
    sd_u128 d = row_tiles(V, f, sh);
    if (d == 0) return row_sample_row(p, V, x, sh);
    int r = row_find(V, f, sd_rule_scaled_target(x, d), sh);
    return r < 0 ? 0 : r;
}
static __device__ int row_sample_residual(const float *p, const float *q, int V, uint32_t x, RowShared &sh) {
    return row_sample_resid_meas(p, RowResidMeas{p, q}, V, x, sh);
}
/* The residual of a deterministic draft xd (q one-hot on it): p without xd. */
static __device__ int row_sample_residual_det(const float *p, int xd, int V, uint32_t x, RowShared &sh) {
    return row_sample_resid_meas(p, RowResidDetMeas{p, xd}, V, x, sh);
}

/* --- rank cut (top-k, top-p) ----------------------------------------------------------- */

/* One level of the radix descent: per-bucket counts and masses (1 per candidate, or
 * its fixed-point weight) of the candidates inside prev whose key bits above sft + nb
 * equal prefix, bucketed by the nb bits from sft. Two barriers. */
static __device__ __forceinline__ void row_hist(const double *w, int V, RowCut prev, bool by_count, uint64_t prefix,
                                                int sft, int nb, RowShared &sh) {
    const int tid = threadIdx.x, nbins = 1 << nb;
    for (int b = tid; b < nbins; b += ROW_NT) {
        sh.u.h.cnt[b] = 0;
        sh.u.h.lo[b] = 0;
        sh.u.h.hi[b] = 0;
    }
    __syncthreads();
    for (int i = tid; i < V; i += ROW_NT) {
        double wi = w[i];
        if (!(wi > 0.0)) continue;
        uint64_t key = sd_rule_key(wi);
        if (!row_in_cut(prev, wi, i) || (key >> (sft + nb)) != prefix) continue;
        unsigned b = (unsigned)(key >> sft) & (unsigned)(nbins - 1);
        atomicAdd(&sh.u.h.cnt[b], 1u);
        row_ull mv = by_count ? 1ull : (row_ull)sd_rule_fix(wi);
        if (mv) {
            row_ull old = atomicAdd(&sh.u.h.lo[b], mv);
            if (old + mv < old) atomicAdd(&sh.u.h.hi[b], 1ull);
        }
    }
    __syncthreads();
}

/* The bucket the cut falls in. */
struct RowPick {
    int bucket;     /* -1: no candidate */
    sd_u128 above;  /* measure of the candidates ranked before the bucket */
    unsigned count; /* candidates in the bucket */
};

/* Warp 0 picks the lowest non-empty bucket b with above + mass(buckets > b) < thr from
 * row_hist's bins; every thread gets the pick. Two barriers. */
static __device__ __forceinline__ RowPick row_pick(int nbins, sd_u128 above, sd_u128 thr, RowShared &sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (warp == 0) {
        const int per = nbins / 32;
        const int b0 = lane * per;
        sd_u128 lm = 0;
        for (int j = 0; j < per; j++) lm += row_mk128(sh.u.h.hi[b0 + j], sh.u.h.lo[b0 + j]);
        sd_u128 a = above + row_warp_suffix128(lm, lane) - lm; /* mass of higher lanes */
        int found = -1;
        sd_u128 fa = 0;
        unsigned fc = 0;
        for (int j = per - 1; j >= 0; j--) {
            const int b = b0 + j;
            if (sh.u.h.cnt[b] == 0) continue;
            if (!(a < thr)) break;
            found = b;
            fa = a;
            fc = sh.u.h.cnt[b];
            a += row_mk128(sh.u.h.hi[b], sh.u.h.lo[b]);
        }
        unsigned ball = __ballot_sync(ROW_FULL, found >= 0);
        const int src = ball ? __ffs(ball) - 1 : 0;
        found = __shfl_sync(ROW_FULL, found, src);
        fa = row_shfl128(fa, src);
        fc = __shfl_sync(ROW_FULL, fc, src);
        if (lane == 0) {
            sh.bcint = found;
            sh.bc128 = fa;
            sh.bccnt = fc;
        }
    }
    __syncthreads();
    const RowPick pk = {sh.bcint, sh.bc128, sh.bccnt};
    __syncthreads();
    return pk;
}

/* One candidate inside prev has key bits from `low` up equal to prefix: it is the last
 * kept one. Two barriers. */
static __device__ __forceinline__ RowCut row_cut_single(const double *w, int V, RowCut prev, uint64_t prefix, int low,
                                                        RowShared &sh) {
    for (int i = threadIdx.x; i < V; i += ROW_NT) {
        double wi = w[i];
        if (!(wi > 0.0)) continue;
        uint64_t key = sd_rule_key(wi);
        if (row_in_cut(prev, wi, i) && (key >> low) == prefix) {
            sh.bckey = key;
            sh.bcint = i;
        }
    }
    __syncthreads();
    RowCut c = {__longlong_as_double((long long)sh.bckey), sh.bcint};
    __syncthreads();
    return c;
}

/* All 63 bits fixed: bcount tied candidates with key K, each of measure m; keep the
 * ties whose measure-before (above + j m) is < thr, cut by id. */
static __device__ __forceinline__ RowCut row_cut_ties(const double *w, int V, RowCut prev, bool by_count,
                                                      sd_u128 thr, uint64_t K, sd_u128 above, unsigned bcount,
                                                      RowShared &sh) {
    const double wk = __longlong_as_double((long long)K);
    const uint64_t m = by_count ? 1u : sd_rule_fix(wk);
    const sd_u128 need = thr - above; /* > 0 */
    unsigned keep = bcount;
    if (m != 0) {
        /* smallest j with j * m >= need (the ties before the j-th have mass < need) */
        double est = (double)need / (double)m;
        unsigned j = est >= (double)bcount ? bcount : (unsigned)est;
        while (j < bcount && (sd_u128)j * m < need) j++;
        while (j > 0 && (sd_u128)(j - 1) * m >= need) j--;
        keep = j < bcount ? j : bcount;
        if (keep == 0) keep = 1; /* need > 0: the first tie is always kept */
    }
    RowCut c = {wk, INT_MAX};
    if (keep < bcount) {
        RowTieMeas f{w, K, prev};
        row_tiles(V, f, sh);
        c.id = row_find(V, f, (sd_u128)keep, sh);
    }
    return c;
}

static __device__ RowCut row_rank_cut(const double *w, int V, RowCut prev, bool by_count, sd_u128 thr,
                                      RowShared &sh) {
    const int shifts[6] = {52, 41, 30, 20, 10, 0};
    const int widths[6] = {11, 11, 11, 10, 10, 10};
    uint64_t prefix = 0;
    sd_u128 above = 0;
    unsigned bcount = 0;
    int low = 63; /* bits below `low` are not yet fixed */
    for (int lv = 0; lv < 6; lv++) {
        const int sft = shifts[lv], nb = widths[lv];
        row_hist(w, V, prev, by_count, prefix, sft, nb, sh);
        const RowPick pk = row_pick(1 << nb, above, thr, sh);
        if (pk.bucket < 0) { /* no candidate at all: cannot happen (caller checked); keep all */
            return prev;
        }
        prefix = (prefix << nb) | (uint64_t)pk.bucket;
        above = pk.above;
        bcount = pk.count;
        low = sft;
        if (bcount == 1) break;
    }
    if (bcount == 1) return row_cut_single(w, V, prev, prefix, low, sh);
    return row_cut_ties(w, V, prev, by_count, thr, prefix, above, bcount, sh);
}

/* --- the whole row --------------------------------------------------------------------- */

/* probs = one-hot of a; the barrier makes the row visible to the block. */
static __device__ __forceinline__ int row_one_hot(float *probs, int V, int a) {
    for (int i = threadIdx.x; i < V; i += ROW_NT) probs[i] = (i == a) ? 1.0f : 0.0f;
    __syncthreads();
    return a;
}

/* Step 1 (T == 0): one-hot of the logit argmax. */
static __device__ __forceinline__ int row_greedy(const float *logits, int V, float *probs, RowShared &sh) {
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int i = threadIdx.x; i < V; i += ROW_NT) {
        float v = logits[i];
        if (sd_rule_argmax_better(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
    return row_one_hot(probs, V, row_block_argmax(bv, bi, sh));
}

/* Steps 2-3 over the block. */
struct RowWeights {
    double m;      /* sd_rule_scale(max logit, T); -inf: no weight was written */
    sd_u128 s0;    /* sum of F(w) over the row */
    sd_u128 ncand; /* candidates (w > 0) */
};

static __device__ __forceinline__ RowWeights row_weights(const float *logits, int V, double T, double *w,
                                                         RowShared &sh) {
    const int tid = threadIdx.x;
    float mx = -INFINITY;
    for (int i = tid; i < V; i += ROW_NT) mx = fmaxf(mx, logits[i]); /* fmaxf drops NaN */
    mx = row_block_max(mx, sh);
    RowWeights r = {sd_rule_scale(mx, T), 0, 0};
    if (r.m == -INFINITY) return r;
    for (int i = tid; i < V; i += ROW_NT) {
        const double wi = sd_rule_weight(logits[i], T, r.m); /* the shared exp: bitwise the CPU's */
        w[i] = wi;
        r.s0 += sd_rule_fix(wi);
        r.ncand += (wi > 0.0) ? 1u : 0u;
    }
    r.s0 = row_block_sum128(r.s0, sh);
    r.ncand = row_block_sum128(r.ncand, sh);
    return r;
}

/* Steps 5-6: the top-k cut k and the top-p cut p (row_cut_all() when off). */
struct RowCuts {
    RowCut k, p;
    bool on; /* top-k or top-p acts */
};

static __device__ __forceinline__ RowCuts row_cuts(const double *w, int V, sd_sampling_params sp,
                                                   const RowWeights &rw, RowShared &sh) {
    RowCuts c = {row_cut_all(), row_cut_all(), false};
    const bool topk_on = sd_rule_topk_on(sp.top_k, (int64_t)rw.ncand);
    const bool topp_on = sd_rule_topp_on(sp.top_p);
    c.on = topk_on || topp_on;
    if (topk_on) c.k = row_rank_cut(w, V, row_cut_all(), true, (sd_u128)(unsigned)sp.top_k, sh);
    if (topp_on) {
        sd_u128 S = rw.s0;
        if (topk_on) {
            S = 0;
            for (int i = threadIdx.x; i < V; i += ROW_NT) {
                double wi = w[i];
                if (wi > 0.0 && row_in_cut(c.k, wi, i)) S += sd_rule_fix(wi);
            }
            S = row_block_sum128(S, sh);
        }
        c.p = row_rank_cut(w, V, c.k, false, sd_rule_topp_threshold(sp.top_p, S), sh);
    }
    return c;
}

/* Steps 5-7: does token i with weight wi survive? */
static __device__ __forceinline__ bool row_kept(const RowCuts &c, double wi, int i, float min_p) {
    return wi > 0.0 && row_in_cut(c.k, wi, i) && row_in_cut(c.p, wi, i) && sd_rule_minp_keep(wi, min_p);
}

/* Step 8: probs = sd_rule_norm(w, S) over the kept tokens (S = s0 unless something was
 * cut); returns the argmax of probs (its last barrier makes probs visible). */
static __device__ __forceinline__ int row_normalise(const double *w, int V, const RowCuts &c, float min_p,
                                                    sd_u128 s0, float *probs, RowShared &sh) {
    const int tid = threadIdx.x;
    sd_u128 S = s0;
    if (c.on || sd_rule_minp_on(min_p)) {
        S = 0;
        for (int i = tid; i < V; i += ROW_NT) {
            double wi = w[i];
            if (row_kept(c, wi, i, min_p)) S += sd_rule_fix(wi);
        }
        S = row_block_sum128(S, sh);
    }
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int i = tid; i < V; i += ROW_NT) {
        double wi = w[i];
        float p = 0.0f;
        if (row_kept(c, wi, i, min_p)) p = sd_rule_norm(wi, S);
        probs[i] = p;
        if (sd_rule_argmax_better(p, i, bv, bi)) {
            bv = p;
            bi = i;
        }
    }
    return row_block_argmax(bv, bi, sh); /* ends with __syncthreads: probs visible */
}

static __device__ int row_process_row(const float *logits, int V, sd_sampling_params sp, double *w, float *probs,
                                      RowShared &sh) {
    if (sp.temperature == 0.0f) return row_greedy(logits, V, probs, sh);
    const RowWeights rw = row_weights(logits, V, (double)sp.temperature, w, sh);
    if (rw.m == -INFINITY) return row_one_hot(probs, V, 0);
    const RowCuts c = row_cuts(w, V, sp, rw, sh);
    return row_normalise(w, V, c, sp.min_p, rw.s0, probs, sh);
}

#endif
