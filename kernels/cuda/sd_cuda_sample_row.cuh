/* sd_cuda_sample_row.cuh — block-level device building blocks of the sampling / verify
 * kernels (included by sd_cuda_sample.cu and sd_cuda_verify.cu only).
 *
 * Every function here is called by ALL threads of a 1024-thread block (it contains
 * __syncthreads) and works on one row of V <= 262144 entries in global memory:
 *
 * row_process_row: logits -> processed probabilities, the steps of sd_cpu_sample.h:
 *   greedy (T == 0): one-hot of the logit argmax (NaN ignored, lowest id wins);
 *   else m = (double)max_logit / T (division by T > 0 is monotone, so this is max z);
 *   m == -inf: one-hot of 0; m == +inf: w = [logit == +inf]; else w = sd_rule_exp(z - m)
 *   (kernels/sd_sample_rules.h, the same function as the CPU reference's);
 *   w is stored (double) in the caller's row buffer; top-k / top-p select a prefix of
 *   the rank order (w desc, id asc) with row_rank_cut; min-p keeps w >= min_p;
 *   probs = (float)(w / S) with S the exact fixed-point sum of the kept w
 *   (sd_cuda_sample_fixed.cuh). Returns the argmax of the written probabilities.
 *
 * row_rank_cut: the last element of the rank order whose measure-before is < thr
 *   (measure = 1 per candidate for top-k with thr = k, fixed-point w for top-p with
 *   thr = sd_rule_topp_threshold). MSB-first radix descent over the 63 significant
 *   bits of w's bit pattern (digits 11,11,11,10,10,10 bits; per-bucket counts and
 *   exact 128-bit masses via shared-memory integer atomics: order independent, hence
 *   deterministic); stops early when the chosen bucket holds one element; ties of
 *   the final key are cut by id with row_find.
 *
 * row_tiles / row_find: first index i with pos(i) whose inclusive prefix of the
 *   fixed-point measure reaches a target (inverse CDF, residual sampling, k-th tie);
 *   the last index with pos(i) if the total falls short; -1 if none. Tiles of 1024
 *   ids: pass 1 (all warps, coalesced) stores each tile's exact sum; warp 0 then scans
 *   the <= 256 tile sums and the crossing tile.
 *
 * row_philox_word (per thread, no block contract): the cuRAND Philox word of slot
 *   (position, purpose), the device side of sd_rng_u32_at(). */
#ifndef SD_CUDA_SPEC_ROW_CUH
#define SD_CUDA_SPEC_ROW_CUH

#include <curand_kernel.h>
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
    const unsigned long long off =
        ((unsigned long long)position * SD_RNG_PURPOSES + (unsigned long long)purpose) * SD_RNG_WORDS_PER_SLOT;
    curand_init((unsigned long long)seed, (unsigned long long)seq, off, &st);
    return curand(&st);
}

/* A prefix of the rank order: element (key, id) is inside iff key > k or (key == k and
 * id <= id_cut). {0, INT_MAX} holds everything. */
struct RowCut {
    uint64_t key;
    int id;
};

static __device__ __forceinline__ bool row_in_cut(RowCut c, uint64_t key, int i) {
    return key > c.key || (key == c.key && i <= c.id);
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

/* Argmax with the CPU's rule: larger value wins, equal values -> lower id; a thread
 * that saw nothing but -inf / NaN carries id INT_MAX. Returns 0 if nobody found one. */
static __device__ int row_block_argmax(float v, int id, RowShared &sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int m = 16; m > 0; m >>= 1) {
        float ov = __shfl_xor_sync(ROW_FULL, v, m);
        int oi = __shfl_xor_sync(ROW_FULL, id, m);
        if (ov > v || (ov == v && oi < id)) {
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
            if (ov > v || (ov == v && oi < id)) {
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
 * F: struct with  __device__ uint64_t operator()(int i, bool &pos) const
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
                bool pos = false;
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
                    bool pos = false;
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
                    bool pos = false;
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
    __device__ uint64_t operator()(int i, bool &pos) const {
        float v = p[i];
        pos = v > 0.0f;
        return pos ? sd_rule_fix((double)v) : 0;
    }
};
struct RowResidMeas { /* max(0, p - q) in double */
    const float *p, *q;
    __device__ uint64_t operator()(int i, bool &pos) const {
        double d = __dsub_rn((double)p[i], (double)q[i]);
        pos = d > 0.0;
        return pos ? sd_rule_fix(d) : 0;
    }
};
struct RowTieMeas { /* candidates whose key equals k, inside the previous cut */
    const double *w;
    uint64_t k;
    RowCut prev;
    __device__ uint64_t operator()(int i, bool &pos) const {
        double wi = w[i];
        uint64_t key = sd_rule_key(wi);
        pos = wi > 0.0 && key == k && row_in_cut(prev, key, i);
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
static __device__ int row_sample_residual(const float *p, const float *q, int V, uint32_t x, RowShared &sh) {
    RowResidMeas f{p, q};
    sd_u128 d = row_tiles(V, f, sh);
    if (d == 0) return row_sample_row(p, V, x, sh);
    int r = row_find(V, f, sd_rule_scaled_target(x, d), sh);
    return r < 0 ? 0 : r;
}

/* --- rank cut (top-k, top-p) ----------------------------------------------------------- */
static __device__ RowCut row_rank_cut(const double *w, int V, RowCut prev, bool by_count, sd_u128 thr,
                                        RowShared &sh) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int shifts[6] = {52, 41, 30, 20, 10, 0};
    const int widths[6] = {11, 11, 11, 10, 10, 10};
    uint64_t prefix = 0;
    sd_u128 above = 0;
    unsigned bcount = 0;
    int low = 63; /* bits below `low` are not yet fixed */
    for (int lv = 0; lv < 6; lv++) {
        const int sft = shifts[lv], nb = widths[lv], nbins = 1 << nb;
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
            if (!row_in_cut(prev, key, i) || (key >> (sft + nb)) != prefix) continue;
            unsigned b = (unsigned)(key >> sft) & (unsigned)(nbins - 1);
            atomicAdd(&sh.u.h.cnt[b], 1u);
            row_ull mv = by_count ? 1ull : (row_ull)sd_rule_fix(wi);
            if (mv) {
                row_ull old = atomicAdd(&sh.u.h.lo[b], mv);
                if (old + mv < old) atomicAdd(&sh.u.h.hi[b], 1ull);
            }
        }
        __syncthreads();
        if (warp == 0) {
            /* lowest non-empty bucket b with above + mass(buckets > b) < thr */
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
        const int bsel = sh.bcint;
        const sd_u128 fa = sh.bc128;
        const unsigned fc = sh.bccnt;
        __syncthreads();
        if (bsel < 0) { /* no candidate at all: cannot happen (caller checked); keep all */
            return prev;
        }
        prefix = (prefix << nb) | (uint64_t)bsel;
        above = fa;
        bcount = fc;
        low = sft;
        if (bcount == 1) break;
    }
    if (bcount == 1) {
        /* one element left under the prefix: it is the last kept one */
        for (int i = tid; i < V; i += ROW_NT) {
            double wi = w[i];
            if (!(wi > 0.0)) continue;
            uint64_t key = sd_rule_key(wi);
            if (row_in_cut(prev, key, i) && (key >> low) == prefix) {
                sh.bckey = key;
                sh.bcint = i;
            }
        }
        __syncthreads();
        RowCut c = {sh.bckey, sh.bcint};
        __syncthreads();
        return c;
    }
    /* all 63 bits fixed: bcount tied candidates with key == prefix, each of measure m */
    const uint64_t K = prefix;
    double wk;
    {
        long long kb = (long long)K;
        wk = __longlong_as_double(kb);
    }
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
    RowCut c = {K, INT_MAX};
    if (keep < bcount) {
        RowTieMeas f{w, K, prev};
        row_tiles(V, f, sh);
        c.id = row_find(V, f, (sd_u128)keep, sh);
    }
    return c;
}

/* --- the whole row --------------------------------------------------------------------- */
static __device__ int row_process_row(const float *logits, int V, sd_sampling_params sp, double *w, float *probs,
                                       RowShared &sh) {
    const int tid = threadIdx.x;
    if (sp.temperature == 0.0f) {
        float bv = -INFINITY;
        int bi = INT_MAX;
        for (int i = tid; i < V; i += ROW_NT) {
            float v = logits[i];
            if (v > bv) {
                bv = v;
                bi = i;
            }
        }
        const int a = row_block_argmax(bv, bi, sh);
        for (int i = tid; i < V; i += ROW_NT) probs[i] = (i == a) ? 1.0f : 0.0f;
        __syncthreads();
        return a;
    }
    float mx = -INFINITY;
    for (int i = tid; i < V; i += ROW_NT) mx = fmaxf(mx, logits[i]); /* fmaxf drops NaN */
    mx = row_block_max(mx, sh);
    const double T = (double)sp.temperature;
    const double m = __ddiv_rn((double)mx, T);
    if (m == -INFINITY) {
        for (int i = tid; i < V; i += ROW_NT) probs[i] = (i == 0) ? 1.0f : 0.0f;
        __syncthreads();
        return 0;
    }
    const bool inf_branch = (m == INFINITY);
    sd_u128 s0 = 0;
    sd_u128 ncand = 0;
    for (int i = tid; i < V; i += ROW_NT) {
        float l = logits[i];
        double wi;
        if (inf_branch) {
            wi = (l == INFINITY) ? 1.0 : 0.0;
        } else {
            double z = (l != l) ? -INFINITY : __ddiv_rn((double)l, T);
            wi = sd_rule_exp(__dsub_rn(z, m)); /* the shared exp: bitwise the CPU's */
        }
        w[i] = wi;
        s0 += sd_rule_fix(wi);
        ncand += (wi > 0.0) ? 1u : 0u;
    }
    s0 = row_block_sum128(s0, sh);
    ncand = row_block_sum128(ncand, sh);

    const RowCut all = {0, INT_MAX};
    RowCut c1 = all, c2 = all;
    const bool topk_on = sp.top_k > 0 && (sd_u128)(unsigned)sp.top_k < ncand;
    const bool topp_on = sp.top_p < 1.0f;
    if (topk_on) c1 = row_rank_cut(w, V, all, true, (sd_u128)(unsigned)sp.top_k, sh);
    if (topp_on) {
        sd_u128 S = s0;
        if (topk_on) {
            S = 0;
            for (int i = tid; i < V; i += ROW_NT) {
                double wi = w[i];
                if (wi > 0.0 && row_in_cut(c1, sd_rule_key(wi), i)) S += sd_rule_fix(wi);
            }
            S = row_block_sum128(S, sh);
        }
        c2 = row_rank_cut(w, V, c1, false, sd_rule_topp_threshold(sp.top_p, S), sh);
    }
    const bool minp_on = sp.min_p > 0.0f;
    const double mthr = (double)sp.min_p; /* min_p * w_top, w_top == 1 */
    sd_u128 S = s0;
    if (topk_on || topp_on || minp_on) {
        S = 0;
        for (int i = tid; i < V; i += ROW_NT) {
            double wi = w[i];
            uint64_t key = sd_rule_key(wi);
            if (wi > 0.0 && row_in_cut(c1, key, i) && row_in_cut(c2, key, i) && (!minp_on || wi >= mthr))
                S += sd_rule_fix(wi);
        }
        S = row_block_sum128(S, sh);
    }
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int i = tid; i < V; i += ROW_NT) {
        double wi = w[i];
        uint64_t key = sd_rule_key(wi);
        float p = 0.0f;
        if (wi > 0.0 && row_in_cut(c1, key, i) && row_in_cut(c2, key, i) && (!minp_on || wi >= mthr))
            p = sd_rule_norm(wi, S);
        probs[i] = p;
        if (p > bv) {
            bv = p;
            bi = i;
        }
    }
    const int a = row_block_argmax(bv, bi, sh); /* ends with __syncthreads: probs visible */
    return a;
}

#endif
