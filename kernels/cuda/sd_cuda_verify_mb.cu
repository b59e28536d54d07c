/* sd_cuda_verify_mb.cu — the multi-block verifier and draft sampling step: every row is
 * split into nb chunks, one 512-thread block each (the plan and its combine rules:
 * sd_cuda_mb.h; the host emulation checked against the CPU reference:
 * tests/cuda_sample/sample_ref_mb.h). Grid (nb, rows per sequence, n_seq).
 *
 * A block loads its chunk once: the logits into w (double, shared memory), then every
 * stage is a chunk partial + a per-row barrier (mb_sync: an atomic arrival counter,
 * spin with acquire loads; co-residency of all blocks is guaranteed by a cooperative
 * launch) + the same combine in every block:
 *   max (float keys) | greedy argmax -> weights, S0, #candidates -> [top-k radix passes]
 *   -> [top-k mass] -> [top-p radix passes] -> [S'] -> probs written, chunk masses of p
 *   and of the residual max(0, p - q), argmax -> the crossing chunk samples.
 * Cross-block data (partials, histograms, the tie id) is read with __ldcg (L2, never a
 * stale L1 line). Partials alternate between two slots by barrier parity, histograms
 * rotate over three slots: the kernel zeroes a row's three slots when it starts (only
 * if it may select) and each slot again after the first barrier that follows its last
 * read. The barrier records live in the workspace's control header (sd_cuda_mb.h
 * "workspace layouts") at an offset fixed per row; the last block of a row to leave
 * resets them, so launches of any shape and graph replays start clean.
 * Verify: each row's outcome (token, accepted) goes to ws; the acceptance chain is
 * the second kernel, sd_mb_chain_kernel (one thread per sequence), in the same stream. */
#include <curand_kernel.h>
#include <limits.h>

#include "sd_cuda_common.cuh"
#include "sd_cuda_launch.h"
#include "sd_cuda_mb.h"
#include "sd_cuda_sample.h"
#include "sd_cuda_sample_row.cuh"
#include "sd_cuda_verify_mb.h"

extern "C" {
#include "sd_rng.h"
}

#define MB_NT 512
#define MB_NW (MB_NT / 32)
#define MB_PER (SD_MB_CHUNK_MAX / MB_NT) /* entries per thread in a chunk search */

/* --- block helpers (16 warps) ------------------------------------------------------- */
struct MbShared {
    sd_u128 r128[MB_NW];
    float rf[MB_NW];
    int ri[MB_NW];
    sd_u128 bc128;
    int bcint, bcint2;
    unsigned bccnt;
    row_ull bckey;
    uint32_t w_sample, w_accept;
};

static __device__ sd_u128 mb_block_sum(sd_u128 v, MbShared &sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = row_warp_sum128(v);
    if (lane == 0) sh.r128[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < MB_NW ? sh.r128[lane] : 0;
        v = row_warp_sum128(v);
        if (lane == 0) sh.bc128 = v;
    }
    __syncthreads();
    const sd_u128 r = sh.bc128;
    __syncthreads();
    return r;
}

/* Exclusive prefix of v over the block's threads (in thread order). */
static __device__ sd_u128 mb_block_exscan(sd_u128 v, MbShared &sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const sd_u128 inc = row_warp_scan128(v, lane);
    if (lane == 31) sh.r128[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        sd_u128 t = lane < MB_NW ? sh.r128[lane] : 0;
        const sd_u128 ti = row_warp_scan128(t, lane);
        if (lane < MB_NW) sh.r128[lane] = ti - t;
    }
    __syncthreads();
    const sd_u128 r = sh.r128[warp] + inc - v;
    __syncthreads();
    return r;
}

/* sd_rule_argmax_better over the block; nothing found -> (-inf, INT_MAX) kept. */
static __device__ void mb_block_argmax(float &v, int &id, MbShared &sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int pass = 0; pass < 2; pass++) {
        for (int m = 16; m > 0; m >>= 1) {
            const float ov = __shfl_xor_sync(ROW_FULL, v, m);
            const int oi = __shfl_xor_sync(ROW_FULL, id, m);
            if (sd_rule_argmax_better(ov, oi, v, id)) v = ov, id = oi;
        }
        if (pass == 1) break;
        if (lane == 0) sh.rf[warp] = v, sh.ri[warp] = id;
        __syncthreads();
        v = lane < MB_NW ? sh.rf[lane] : -INFINITY;
        id = lane < MB_NW ? sh.ri[lane] : INT_MAX;
        __syncthreads();
    }
}

/* The kernels' argument struct (by value). */
struct sd_mb_kargs {
    int32_t n_vocab, nb;
    sd_cuda_verify_args v;      /* verify kernel */
    sd_cuda_sample_draft_args d; /* draft kernel */
    sd_mb_ctrl *ctrl;           /* [rows] */
    sd_mb_part *parts;          /* [rows][2][SD_MB_MAX_BLOCKS] */
    sd_mb_hist *hist;           /* [rows][SD_MB_HBUFS] */
    int32_t *outcomes;          /* verify: [n_seq][SPECDEC_MAX_DRAFT + 1][2] (token, accepted) */
    float *prows;               /* verify: the processed target rows */
};

/* --- the row context ---------------------------------------------------------------- */
struct MbRow {
    int V, nb, j, lo, hi;
    sd_mb_ctrl *ctrl;  /* this row's counters and broadcast word */
    sd_mb_part *parts; /* [2][SD_MB_MAX_BLOCKS] */
    sd_mb_hist *hist;  /* [SD_MB_HBUFS] */
    unsigned gen;      /* barriers passed */
    int pass, pending; /* radix passes so far; histogram slot to zero after the next barrier */
    double *w;         /* the chunk's weights (shared memory), index i - lo */
    sd_mb_hist *sh_h;  /* the block's histogram (shared memory) */
};

static __device__ void mb_zero_slice(const MbRow &R, int slot) {
    sd_mb_hist *h = R.hist + slot;
    const int per = (SD_MB_HBINS + R.nb - 1) / R.nb, b0 = R.j * per, b1 = min(SD_MB_HBINS, b0 + per);
    for (int b = b0 + (int)threadIdx.x; b < b1; b += MB_NT) h->cnt[b] = 0, h->lo[b] = 0, h->hi[b] = 0, h->key[b] = 0;
}

/* The per-row barrier: every block of the row arrives, then all leave. */
static __device__ void mb_sync(MbRow &R) {
    __syncthreads();
    R.gen++;
    if (threadIdx.x == 0 && R.nb > 1) {
        __threadfence();
        atomicAdd(&R.ctrl->bar, 1u);
        const unsigned target = R.gen * (unsigned)R.nb;
        while (*(volatile unsigned *)&R.ctrl->bar < target) __nanosleep(20);
        __threadfence();
    }
    __syncthreads();
    if (R.pending >= 0) {
        mb_zero_slice(R, R.pending);
        R.pending = -1;
    }
}

/* Thread 0 publishes the block's partial (slot by barrier parity), then the barrier. */
static __device__ const sd_mb_part *mb_publish(MbRow &R, const sd_mb_part &p) {
    sd_mb_part *slot = R.parts + (size_t)(R.gen & 1u) * SD_MB_MAX_BLOCKS;
    if (threadIdx.x == 0) slot[R.j] = p;
    mb_sync(R);
    return slot;
}

static __device__ __forceinline__ sd_u128 mb_ld128(const row_ull *hi, const row_ull *lo) {
    return row_mk128(__ldcg(hi), __ldcg(lo));
}

/* Warp 0 combines the row's partials: sums a and b, max of cnt (a key), the last
 * present elements and the argmax; result in *out for every thread. */
static __device__ void mb_combine(const MbRow &R, const sd_mb_part *parts, sd_mb_part *out, MbShared &sh) {
    __shared__ sd_mb_part res;
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        sd_u128 a = 0, b = 0;
        unsigned k = 0, n = 0;
        int al = -1, bl = -1, fi = INT_MAX;
        float fv = -INFINITY;
        for (int t = lane; t < R.nb; t += 32) {
            const sd_mb_part *p = parts + t;
            a += mb_ld128(&p->a_hi, &p->a_lo);
            b += mb_ld128(&p->b_hi, &p->b_lo);
            k = max(k, __ldcg(&p->kmax));
            n += __ldcg(&p->n);
            al = max(al, __ldcg(&p->a_last));
            bl = max(bl, __ldcg(&p->b_last));
            const float v = __ldcg(&p->fv);
            const int i = __ldcg(&p->fi);
            if (sd_rule_argmax_better(v, i, fv, fi)) fv = v, fi = i;
        }
        a = row_warp_sum128(a);
        b = row_warp_sum128(b);
        for (int m = 16; m > 0; m >>= 1) {
            k = max(k, __shfl_xor_sync(ROW_FULL, k, m));
            n += __shfl_xor_sync(ROW_FULL, n, m);
            al = max(al, __shfl_xor_sync(ROW_FULL, al, m));
            bl = max(bl, __shfl_xor_sync(ROW_FULL, bl, m));
            const float ov = __shfl_xor_sync(ROW_FULL, fv, m);
            const int oi = __shfl_xor_sync(ROW_FULL, fi, m);
            if (sd_rule_argmax_better(ov, oi, fv, fi)) fv = ov, fi = oi;
        }
        if (lane == 0) {
            res.a_lo = (row_ull)a, res.a_hi = (row_ull)(a >> 64), res.b_lo = (row_ull)b, res.b_hi = (row_ull)(b >> 64);
            res.kmax = k, res.n = n, res.a_last = al, res.b_last = bl, res.fv = fv, res.fi = fi;
        }
    }
    __syncthreads();
    *out = res;
    __syncthreads();
    (void)sh;
}

static __device__ __forceinline__ sd_mb_part mb_part_zero() {
    sd_mb_part p;
    memset(&p, 0, sizeof p);
    p.a_last = p.b_last = -1;
    p.fv = -INFINITY;
    p.fi = INT_MAX;
    return p;
}

/* --- stages ------------------------------------------------------------------------- */
static __device__ unsigned mb_block_max_u(unsigned k) {
    __shared__ unsigned km;
    if (threadIdx.x == 0) km = 0;
    __syncthreads();
    atomicMax(&km, k);
    __syncthreads();
    const unsigned r = km;
    __syncthreads();
    return r;
}

/* Combined partials of one published stage. */
static __device__ sd_mb_part mb_stage(MbRow &R, const sd_mb_part &mine, MbShared &sh, const sd_mb_part **parts) {
    const sd_mb_part *p = mb_publish(R, mine);
    sd_mb_part c;
    mb_combine(R, p, &c, sh);
    if (parts) *parts = p;
    return c;
}

/* Greedy (T == 0): the argmax of the logits over the row; one-hot chunk written. */
static __device__ int mb_greedy(MbRow &R, const float *l, float *probs, MbShared &sh) {
    float v = -INFINITY;
    int id = INT_MAX;
    for (int i = R.lo + (int)threadIdx.x; i < R.hi; i += MB_NT)
        if (sd_rule_argmax_better(l[i], i, v, id)) v = l[i], id = i;
    mb_block_argmax(v, id, sh);
    sd_mb_part p = mb_part_zero();
    p.fv = v, p.fi = id;
    const sd_mb_part c = mb_stage(R, p, sh, NULL);
    const int a = c.fi == INT_MAX ? 0 : c.fi;
    for (int i = R.lo + (int)threadIdx.x; i < R.hi; i += MB_NT) probs[i] = i == a ? 1.0f : 0.0f;
    __syncthreads();
    return a;
}

struct MbW {
    double m;
    sd_u128 s0;
    unsigned ncand;
};

/* Steps 2-3: the row max (float keys), then the chunk's weights into shared memory. */
static __device__ MbW mb_weights(MbRow &R, const float *l, double T, MbShared &sh) {
    unsigned k = sd_mb_fkey(-INFINITY);
    for (int i = R.lo + (int)threadIdx.x; i < R.hi; i += MB_NT) k = max(k, sd_mb_fkey(l[i]));
    sd_mb_part p = mb_part_zero();
    p.kmax = mb_block_max_u(k);
    const sd_mb_part c = mb_stage(R, p, sh, NULL);
    MbW r = {sd_rule_scale(sd_mb_fkey_value(c.kmax), T), 0, 0};
    if (r.m == -INFINITY) return r;
    sd_u128 s = 0, n = 0;
    for (int i = R.lo + (int)threadIdx.x; i < R.hi; i += MB_NT) {
        const double wi = sd_rule_weight(l[i], T, r.m);
        R.w[i - R.lo] = wi;
        s += sd_rule_fix(wi);
        n += wi > 0.0;
    }
    s = mb_block_sum(s, sh);
    n = mb_block_sum(n, sh);
    p = mb_part_zero();
    p.a_lo = (row_ull)s, p.a_hi = (row_ull)(s >> 64), p.n = (unsigned)n;
    const sd_mb_part c2 = mb_stage(R, p, sh, NULL);
    r.s0 = row_mk128(c2.a_hi, c2.a_lo);
    r.ncand = c2.n;
    return r;
}

/* Fixed-point mass of the chunk's w kept by the cuts and min-p, summed over the row. */
static __device__ sd_u128 mb_kept_sum(MbRow &R, RowCut ck, RowCut cp, float min_p, MbShared &sh) {
    sd_u128 s = 0;
    for (int i = R.lo + (int)threadIdx.x; i < R.hi; i += MB_NT) {
        const double wi = R.w[i - R.lo];
        if (wi > 0.0 && row_in_cut(ck, wi, i) && row_in_cut(cp, wi, i) && sd_rule_minp_keep(wi, min_p))
            s += sd_rule_fix(wi);
    }
    s = mb_block_sum(s, sh);
    sd_mb_part p = mb_part_zero();
    p.a_lo = (row_ull)s, p.a_hi = (row_ull)(s >> 64);
    const sd_mb_part c = mb_stage(R, p, sh, NULL);
    return row_mk128(c.a_hi, c.a_lo);
}

/* One radix pass: the chunk's histogram in shared memory, added into the row's. */
static __device__ void mb_hist(MbRow &R, RowCut prev, bool by_count, uint64_t prefix, int lv) {
    const int sft = sd_mb_level_shift(lv), bits = sd_mb_level_bits(lv), nbins = 1 << bits;
    sd_mb_hist *h = R.sh_h, *g = R.hist + sd_mb_hbuf(R.pass);
    for (int b = threadIdx.x; b < nbins; b += MB_NT) h->cnt[b] = 0, h->lo[b] = 0, h->hi[b] = 0, h->key[b] = 0;
    __syncthreads();
    for (int i = R.lo + (int)threadIdx.x; i < R.hi; i += MB_NT) {
        const double wi = R.w[i - R.lo];
        const uint64_t key = sd_rule_key(wi);
        if (!(wi > 0.0) || !row_in_cut(prev, wi, i) || (key >> (sft + bits)) != prefix) continue;
        const unsigned b = (unsigned)(key >> sft) & (unsigned)(nbins - 1);
        atomicAdd(&h->cnt[b], 1u);
        atomicMax(&h->key[b], (row_ull)key);
        if (by_count) continue;
        const row_ull mv = sd_rule_fix(wi), old = atomicAdd(&h->lo[b], mv);
        if (old + mv < old) atomicAdd(&h->hi[b], 1ull);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < nbins; b += MB_NT) {
        if (h->cnt[b] == 0) continue;
        atomicAdd(&g->cnt[b], h->cnt[b]);
        atomicMax(&g->key[b], h->key[b]);
        if (by_count) continue;
        const row_ull old = atomicAdd(&g->lo[b], h->lo[b]);
        const row_ull carry = (old + h->lo[b] < old) ? 1ull : 0ull;
        if (h->hi[b] + carry) atomicAdd(&g->hi[b], h->hi[b] + carry);
    }
}

struct MbPick {
    int bucket;
    sd_u128 above;
    unsigned count;
    row_ull key;
};

/* Warp 0 picks from the row histogram (sd_cuda_mb.h): scanning from the top bucket,
 * the lowest non-empty one whose measure-before is < thr. */
static __device__ MbPick mb_pick(const MbRow &R, int nbins, bool by_count, sd_u128 above, sd_u128 thr,
                                 MbShared &sh) {
    const sd_mb_hist *g = R.hist + sd_mb_hbuf(R.pass);
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x, per = nbins / 32, b0 = lane * per;
        sd_u128 lm = 0;
        for (int j = 0; j < per; j++)
            lm += by_count ? (sd_u128)__ldcg(&g->cnt[b0 + j]) : mb_ld128(&g->hi[b0 + j], &g->lo[b0 + j]);
        sd_u128 a = above + row_warp_suffix128(lm, lane) - lm, fa = 0;
        int found = -1;
        for (int j = per - 1; j >= 0; j--) {
            const int b = b0 + j;
            if (__ldcg(&g->cnt[b]) == 0) continue;
            if (!(a < thr)) break;
            found = b, fa = a;
            a += by_count ? (sd_u128)__ldcg(&g->cnt[b]) : mb_ld128(&g->hi[b], &g->lo[b]);
        }
        const unsigned ball = __ballot_sync(ROW_FULL, found >= 0);
        const int src = ball ? __ffs(ball) - 1 : 0;
        found = __shfl_sync(ROW_FULL, found, src);
        fa = row_shfl128(fa, src);
        if (lane == 0) {
            sh.bcint = found;
            sh.bc128 = fa;
            sh.bccnt = found >= 0 ? __ldcg(&g->cnt[found]) : 0u;
            sh.bckey = found >= 0 ? __ldcg(&g->key[found]) : 0ull;
        }
    }
    __syncthreads();
    const MbPick pk = {sh.bcint, sh.bc128, sh.bccnt, sh.bckey};
    __syncthreads();
    return pk;
}

/* --- searches ---------------------------------------------------------------------- */
struct MbProbMeas {
    const float *p;
    __device__ uint64_t operator()(int i, int &pos) const { return sd_rule_prob_mass(p[i], &pos); }
};
struct MbResidMeas {
    const float *p, *q;
    __device__ uint64_t operator()(int i, int &pos) const { return sd_rule_residual(p[i], q[i], &pos); }
};
struct MbTieMeas { /* 1 per candidate of key K inside prev (w: the chunk in shared memory) */
    const double *w;
    int lo;
    uint64_t K;
    RowCut prev;
    __device__ uint64_t operator()(int i, int &pos) const {
        const double wi = w[i - lo];
        pos = wi > 0.0 && sd_rule_key(wi) == K && row_in_cut(prev, wi, i);
        return pos ? 1u : 0u;
    }
};

/* Inside the chunk: the first present i whose prefix (from the chunk start) reaches
 * target >= 1; -1 if none. Thread t owns a run of consecutive ids. */
template <class F>
static __device__ int mb_chunk_find(const MbRow &R, const F &f, sd_u128 target, MbShared &sh) {
    __shared__ int found;
    const int E = (R.hi - R.lo + MB_NT - 1) / MB_NT, a = R.lo + (int)threadIdx.x * E, b = min(R.hi, a + E);
    sd_u128 s = 0;
    for (int i = a; i < b; i++) {
        int pos = 0;
        s += f(i, pos);
    }
    const sd_u128 ex = mb_block_exscan(s, sh);
    if (threadIdx.x == 0) found = INT_MAX;
    __syncthreads();
    if (ex < target && ex + s >= target) {
        sd_u128 c = ex;
        for (int i = a; i < b; i++) {
            int pos = 0;
            c += f(i, pos);
            if (pos && c >= target) {
                atomicMin(&found, i);
                break;
            }
        }
    }
    __syncthreads();
    const int r = found;
    __syncthreads();
    return r == INT_MAX ? -1 : r;
}

/* The crossing chunk of a published measure (sum a or b of the partials): the first
 * block whose inclusive prefix reaches target searches itself; if the total falls
 * short, block 0 answers `last` (0 if none). *writer: this block holds the answer. */
template <class F>
static __device__ int mb_cross(const MbRow &R, const F &f, const sd_mb_part *parts, bool use_b, sd_u128 target,
                               int last, bool *writer, MbShared &sh) {
    if (target == 0) target = 1;
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        sd_u128 v[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
            const int t = 2 * lane + k;
            if (t < R.nb) v[k] = use_b ? mb_ld128(&parts[t].b_hi, &parts[t].b_lo) : mb_ld128(&parts[t].a_hi, &parts[t].a_lo);
        }
        const sd_u128 inc = row_warp_scan128(v[0] + v[1], lane), ex = inc - v[0] - v[1];
        int jj = -1;
        sd_u128 base = 0;
        if (ex + v[0] >= target) jj = 2 * lane, base = ex;
        else if (ex + v[0] + v[1] >= target) jj = 2 * lane + 1, base = ex + v[0];
        const unsigned ball = __ballot_sync(ROW_FULL, jj >= 0);
        const int src = ball ? __ffs(ball) - 1 : 0;
        const int jsel = __shfl_sync(ROW_FULL, jj, src);
        base = row_shfl128(base, src);
        if (lane == 0) sh.bcint2 = ball ? jsel : -1;
        if (lane == 0) sh.bc128 = base;
    }
    __syncthreads();
    const int jc = sh.bcint2;
    const sd_u128 base = sh.bc128;
    __syncthreads();
    if (jc < 0) {
        *writer = R.j == 0;
        return last >= 0 ? last : 0;
    }
    *writer = jc == R.j;
    if (jc != R.j) return 0;
    const int r = mb_chunk_find(R, f, target - base, sh);
    return r >= 0 ? r : (last >= 0 ? last : 0); /* cannot miss; defensive */
}

/* The keep-th tie of key K inside prev: chunk counts, the crossing chunk finds it and
 * publishes the id (two barriers). */
static __device__ int mb_tie_id(MbRow &R, RowCut prev, uint64_t K, unsigned keep, MbShared &sh) {
    const MbTieMeas f{R.w, R.lo, K, prev};
    sd_u128 n = 0;
    for (int i = R.lo + (int)threadIdx.x; i < R.hi; i += MB_NT) {
        int pos = 0;
        n += f(i, pos);
    }
    n = mb_block_sum(n, sh);
    sd_mb_part p = mb_part_zero();
    p.a_lo = (row_ull)n;
    const sd_mb_part *parts;
    (void)mb_stage(R, p, sh, &parts);
    bool writer = false;
    const int id = mb_cross(R, f, parts, false, (sd_u128)keep, INT_MAX, &writer, sh);
    if (writer && threadIdx.x == 0) R.ctrl->bcast = id;
    mb_sync(R);
    return __ldcg(&R.ctrl->bcast);
}

/* top-k (by_count) / top-p cut by the multi-block radix select. */
static __device__ RowCut mb_select(MbRow &R, RowCut prev, bool by_count, sd_u128 thr, MbShared &sh) {
    uint64_t prefix = 0;
    sd_u128 above = 0;
    unsigned count = 0;
    for (int lv = 0; lv < SD_MB_LEVELS; lv++) {
        const int bits = sd_mb_level_bits(lv);
        mb_hist(R, prev, by_count, prefix, lv);
        mb_sync(R);
        const MbPick pk = mb_pick(R, 1 << bits, by_count, above, thr, sh);
        R.pending = sd_mb_hbuf(R.pass);
        R.pass++;
        if (pk.bucket < 0) return prev; /* no candidate: cannot happen (caller checked) */
        prefix = (prefix << bits) | (uint64_t)pk.bucket;
        above = pk.above;
        count = pk.count;
        if (count == 1) return RowCut{sd_mb_key_value(pk.key), INT_MAX};
    }
    const double wk = sd_mb_key_value(prefix);
    const unsigned keep = sd_mb_tie_keep(thr - above, by_count ? 1u : sd_rule_fix(wk), count);
    RowCut c = {wk, INT_MAX};
    if (keep < count) c.id = mb_tie_id(R, prev, prefix, keep, sh);
    return c;
}

/* --- the row ------------------------------------------------------------------------ */
/* Steps 1-8 on the chunk: probs[lo, hi) written (visible to the block on return). */
static __device__ void mb_process(MbRow &R, const float *l, sd_sampling_params sp, float *probs, MbShared &sh) {
    if (sd_mb_may_select(&sp)) /* the row's histogram slots start at zero (before the first barrier) */
        for (int slot = 0; slot < SD_MB_HBUFS; slot++) mb_zero_slice(R, slot);
    if (sp.temperature == 0.0f) {
        (void)mb_greedy(R, l, probs, sh);
        return;
    }
    const MbW rw = mb_weights(R, l, (double)sp.temperature, sh);
    if (rw.m == -INFINITY) {
        for (int i = R.lo + (int)threadIdx.x; i < R.hi; i += MB_NT) probs[i] = i == 0 ? 1.0f : 0.0f;
        __syncthreads();
        return;
    }
    const bool topk = sd_rule_topk_on(sp.top_k, (int64_t)rw.ncand), topp = sd_rule_topp_on(sp.top_p);
    RowCut ck = row_cut_all(), cp = row_cut_all();
    if (topk) ck = mb_select(R, row_cut_all(), true, (sd_u128)(unsigned)sp.top_k, sh);
    if (topp) {
        const sd_u128 S = topk ? mb_kept_sum(R, ck, row_cut_all(), 0.0f, sh) : rw.s0;
        cp = mb_select(R, ck, false, sd_rule_topp_threshold(sp.top_p, S), sh);
    }
    const sd_u128 S = (topk || topp || sd_rule_minp_on(sp.min_p)) ? mb_kept_sum(R, ck, cp, sp.min_p, sh) : rw.s0;
    for (int i = R.lo + (int)threadIdx.x; i < R.hi; i += MB_NT) {
        const double wi = R.w[i - R.lo];
        const bool kept = wi > 0.0 && row_in_cut(ck, wi, i) && row_in_cut(cp, wi, i) && sd_rule_minp_keep(wi, sp.min_p);
        probs[i] = kept ? sd_rule_norm(wi, S) : 0.0f;
    }
    __syncthreads();
}

/* The chunk's sampling partials: a = sum of F(p) and its last present id, b = the
 * residual max(0, p - q) (q != NULL), the argmax of p. Published and combined. */
static __device__ sd_mb_part mb_outcome_parts(MbRow &R, const float *p, const float *q, MbShared &sh,
                                              const sd_mb_part **parts) {
    sd_u128 a = 0, b = 0;
    int al = -1, bl = -1, fi = INT_MAX;
    float fv = -INFINITY;
    for (int i = R.lo + (int)threadIdx.x; i < R.hi; i += MB_NT) {
        int pos = 0;
        a += sd_rule_prob_mass(p[i], &pos);
        if (pos) al = i;
        if (sd_rule_argmax_better(p[i], i, fv, fi)) fv = p[i], fi = i;
        if (!q) continue;
        b += sd_rule_residual(p[i], q[i], &pos);
        if (pos) bl = i;
    }
    a = mb_block_sum(a, sh);
    b = mb_block_sum(b, sh);
    mb_block_argmax(fv, fi, sh);
    sd_mb_part m = mb_part_zero();
    m.a_lo = (row_ull)a, m.a_hi = (row_ull)(a >> 64), m.b_lo = (row_ull)b, m.b_hi = (row_ull)(b >> 64);
    m.a_last = (int)mb_block_max_u((unsigned)(al + 1)) - 1;
    m.b_last = (int)mb_block_max_u((unsigned)(bl + 1)) - 1;
    m.fv = fv, m.fi = fi;
    return mb_stage(R, m, sh, parts);
}

/* Inverse-CDF sample of the processed row with word x (the crossing chunk). */
static __device__ int mb_sample(const MbRow &R, const float *p, const sd_mb_part *parts, const sd_mb_part &c,
                                uint32_t x, bool *writer, MbShared &sh) {
    return mb_cross(R, MbProbMeas{p}, parts, false, sd_rule_cdf_target(x), c.a_last, writer, sh);
}

static __device__ MbRow mb_row_init(const sd_mb_kargs &k, int row, double *dyn) {
    MbRow R;
    R.V = k.n_vocab;
    R.nb = k.nb;
    R.j = blockIdx.x;
    sd_mb_chunk(R.V, R.nb, R.j, &R.lo, &R.hi);
    R.ctrl = k.ctrl + row;
    R.parts = k.parts + (size_t)row * 2 * SD_MB_MAX_BLOCKS;
    R.hist = k.hist + (size_t)row * SD_MB_HBUFS;
    R.gen = 0;
    R.pass = 0;
    R.pending = -1;
    R.w = dyn;
    R.sh_h = (sd_mb_hist *)(dyn + SD_MB_CHUNK_MAX);
    return R;
}

/* The last block of the row to leave resets its counters (all others are past every
 * barrier: they arrive here only after leaving their last one). */
static __device__ void mb_exit(MbRow &R) {
    __syncthreads();
    if (threadIdx.x == 0 && R.nb > 1) {
        __threadfence();
        if (atomicAdd(&R.ctrl->exitc, 1u) == (unsigned)R.nb - 1u) {
            atomicExch(&R.ctrl->bar, 0u);
            atomicExch(&R.ctrl->exitc, 0u);
        }
    }
}

/* --- kernels ------------------------------------------------------------------------ */
#define MB_SMEM (SD_MB_CHUNK_MAX * sizeof(double) + sizeof(sd_mb_hist))
#define MB_ROWS_MAX (SPECDEC_MAX_DRAFT + 1)

/* The verifier's row outcome (sd_cuda_verify.cu's step 2), by the blocks of row r. */
static __device__ void mb_verify_outcome(const sd_mb_kargs &k, MbRow &R, int r, int b, const float *p,
                                         MbShared &sh) {
    const sd_cuda_verify_args &a = k.v;
    const int g = a.gamma;
    const bool rej = a.mode == SPECDEC_VERIFY_REJECTION && r < g;
    const float *q = rej ? a.q + (size_t)b * a.q_seq_stride + (size_t)r * a.ld_q : NULL;
    const sd_mb_part *parts;
    const sd_mb_part c = mb_outcome_parts(R, p, q, sh, &parts);
    int32_t *o = k.outcomes + ((size_t)b * MB_ROWS_MAX + r) * 2;
    bool writer = false;
    int tok = 0;
    if (a.mode == SPECDEC_VERIFY_GREEDY) {
        tok = c.fi == INT_MAX ? 0 : c.fi;
        writer = R.j == 0;
    } else if (!rej || (c.b_lo == 0 && c.b_hi == 0)) {
        tok = mb_sample(R, p, parts, c, sh.w_sample, &writer, sh);
    } else {
        const sd_u128 D = row_mk128(c.b_hi, c.b_lo);
        tok = mb_cross(R, MbResidMeas{p, q}, parts, true, sd_rule_scaled_target(sh.w_sample, D), c.b_last, &writer, sh);
    }
    if (threadIdx.x != 0) return;
    if (writer) o[0] = tok;
    if (!rej) {
        if (R.j == 0) o[1] = 0;
        return;
    }
    const int x = a.draft[(size_t)b * a.draft_stride + r];
    if (x >= R.lo && x < R.hi) o[1] = sd_rule_accept(sd_rule_word_to_u(sh.w_accept), p[x], q[x]);
    else if ((x < 0 || x >= R.V) && R.j == 0) o[1] = 0;
}

static __global__ void __launch_bounds__(MB_NT, 2) sd_mb_verify_kernel(sd_mb_kargs k) {
    extern __shared__ double mb_dyn[];
    __shared__ MbShared sh;
    const int r = blockIdx.y, b = blockIdx.z;
    const sd_cuda_verify_args &a = k.v;
    const int row = b * (a.gamma + 1) + r;
    MbRow R = mb_row_init(k, row, mb_dyn);
    if (threadIdx.x == 0) { /* the words, as the one-block kernel draws them */
        const int64_t pos = a.pos0[b] + r;
        if (a.u_sample) sh.w_sample = a.u_sample[(size_t)b * (SPECDEC_MAX_DRAFT + 1) + r];
        else sh.w_sample = a.mode != SPECDEC_VERIFY_GREEDY ? row_philox_word(a.seed[b], a.seq_id[b], pos, SD_RNG_PURPOSE_SAMPLE) : 0u;
        sh.w_accept = 0;
        if (a.mode == SPECDEC_VERIFY_REJECTION && r < a.gamma)
            sh.w_accept = a.u_accept ? a.u_accept[(size_t)b * SPECDEC_MAX_DRAFT + r]
                                     : row_philox_word(a.seed[b], a.seq_id[b], pos, SD_RNG_PURPOSE_ACCEPT);
    }
    float *p = k.prows + (size_t)row * (size_t)R.V;
    const float *l = a.logits + (size_t)b * a.logits_seq_stride + (size_t)r * a.ld_logits;
    mb_process(R, l, a.sp, p, sh); /* begins with barriers: the words are visible after it */
    mb_verify_outcome(k, R, r, b, p, sh);
    mb_exit(R);
}

/* The acceptance chain: one thread per sequence, after every row's outcome is in. */
static __global__ void sd_mb_chain_kernel(sd_cuda_verify_args a, const int32_t *outcomes) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= a.n_seq) return;
    const int g = a.gamma;
    const int32_t *oc = outcomes + (size_t)b * MB_ROWS_MAX * 2;
    const int32_t *draft = a.draft + (size_t)b * a.draft_stride;
    int n = 0;
    if (a.mode == SPECDEC_VERIFY_REJECTION) {
        while (n < g && oc[2 * n + 1]) n++;
    } else {
        while (n < g && draft[n] == oc[2 * n]) n++;
    }
    int32_t *out = a.out_tokens + (size_t)b * a.out_stride;
    for (int i = 0; i < n; i++) out[i] = draft[i];
    out[n] = oc[2 * n];
    a.out_n_accepted[b] = n;
}

static __global__ void __launch_bounds__(MB_NT, 2) sd_mb_draft_kernel(sd_mb_kargs k) {
    extern __shared__ double mb_dyn[];
    __shared__ MbShared sh;
    __shared__ int64_t pos;
    const sd_cuda_sample_draft_args &a = k.d;
    const int b = blockIdx.z;
    const int purpose = sd_rule_draft_purpose(a.mode);
    MbRow R = mb_row_init(k, b, mb_dyn);
    if (threadIdx.x == 0) {
        pos = a.position[b]; /* read before the first barrier; the writer advances it after the last */
        if (a.u_words) sh.w_sample = a.u_words[b];
        else sh.w_sample = purpose >= 0 ? row_philox_word(a.seed[b], a.seq_id[b], pos, purpose) : 0u;
    }
    float *q = a.q_out + (size_t)b * a.ld_q;
    mb_process(R, a.logits + (size_t)b * a.ld_logits, a.sp, q, sh);
    const sd_mb_part *parts;
    const sd_mb_part c = mb_outcome_parts(R, q, NULL, sh, &parts);
    bool writer = R.j == 0;
    int tok = c.fi == INT_MAX ? 0 : c.fi;
    if (purpose >= 0) tok = mb_sample(R, q, parts, c, sh.w_sample, &writer, sh);
    if (writer && threadIdx.x == 0) {
        a.tok_out[(size_t)b * a.tok_stride] = tok;
        if (a.tok_out2) a.tok_out2[(size_t)b * a.tok2_stride] = tok;
        if (a.advance_position) a.position[b] = pos + 1;
    }
    mb_exit(R);
}

/* --- launchers ---------------------------------------------------------------------- */
/* What the device offers kernel k (0 verify, 1 draft): queried once per device (the
 * shared-memory opt-in and the occupancy query are not free), sd_cuda_launch.h. */
static sd_cuda_dev_once mb_caps_once[2];
static sd_mb_dev mb_caps[2][SD_CUDA_MAX_DEVICES];
static size_t mb_caps_smem[2][SD_CUDA_MAX_DEVICES];

/* *out: the device's offer; *smem: the shared memory one block needs (dynamic + static). */
static specdec_status mb_device_caps(const void *kernel, int k, sd_mb_dev *out, size_t *smem, sd_errbuf *eb) {
    int dev = 0, sms = 0, coop = 0, optin = 0, per = 0;
    SD_CUDA_TRY(eb, cudaGetDevice(&dev));
    if (!sd_cuda_once_needed(&mb_caps_once[k], dev)) {
        *out = mb_caps[k][dev];
        *smem = mb_caps_smem[k][dev];
        return SPECDEC_OK;
    }
    SD_CUDA_TRY(eb, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    SD_CUDA_TRY(eb, cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    SD_CUDA_TRY(eb, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    cudaFuncAttributes fa;
    SD_CUDA_TRY(eb, cudaFuncGetAttributes(&fa, kernel));
    const size_t need = MB_SMEM + fa.sharedSizeBytes;
    if (need <= (size_t)optin) { /* else the plan refuses: per stays 0 */
        SD_CUDA_TRY(eb, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)MB_SMEM));
        SD_CUDA_TRY(eb, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kernel, MB_NT, MB_SMEM));
    }
    out->sms = sms;
    out->per_sm = per;
    out->coop = coop;
    out->smem_optin = (size_t)optin;
    *smem = need;
    if (dev >= 0 && dev < SD_CUDA_MAX_DEVICES) mb_caps[k][dev] = *out, mb_caps_smem[k][dev] = need;
    sd_cuda_once_done(&mb_caps_once[k], dev);
    return SPECDEC_OK;
}

/* Blocks per row for `rows` rows (sd_mb_plan_blocks): *nb = 0 when AUTO finds none that
 * runs; an explicit count that cannot run is SPECDEC_ERR_UNSUPPORTED. */
static specdec_status mb_plan(const void *kernel, int k, int32_t V, int64_t rows, int32_t req, int32_t *nb,
                              sd_errbuf *eb) {
    sd_mb_dev d;
    size_t smem = 0;
    const specdec_status st = mb_device_caps(kernel, k, &d, &smem, eb);
    if (st != SPECDEC_OK) return st;
    if (sd_mb_plan_blocks(&d, smem, V, rows, req, nb) == SD_MB_PLAN_OK) return SPECDEC_OK;
    return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED,
                   "cuda multi-block: %d blocks per row x %lld rows (V=%d needs >= %d, <= %d; %d SMs x %d resident, "
                   "cooperative %s, <= %d rows, %zu bytes of shared memory of %zu)",
                   (int)req, (long long)rows, (int)V, (int)sd_mb_min_blocks(V), SD_MB_MAX_BLOCKS, d.sms, d.per_sm,
                   d.coop ? "yes" : "no", SD_MB_MAX_ROWS, smem, d.smem_optin);
}

/* The workspace pieces of the multi-block region. */
static void mb_carve(sd_mb_kargs *k, const sd_cuda_mb_ws *w) {
    k->ctrl = w->ctrl;
    k->parts = w->parts;
    k->hist = w->hist;
    k->outcomes = w->outcomes;
    k->prows = w->prows;
}

/* A launch whose blocks must all be resident (they wait for each other). */
static cudaError_t mb_launch(void (*kernel)(sd_mb_kargs), dim3 grid, const sd_mb_kargs &k, cudaStream_t stream) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    cfg.gridDim = grid;
    cfg.blockDim = dim3(MB_NT);
    cfg.dynamicSmemBytes = MB_SMEM;
    cfg.stream = stream;
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = k.nb > 1 ? 1 : 0;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, kernel, k);
}

/* The driver refused a cooperative launch that the plan allowed (e.g. fewer SMs usable
 * than the device reports, under MPS): with AUTO, not an error — the caller runs the
 * one-block kernel (the refusal is not sticky; it is cleared here). */
static int mb_refused(cudaError_t e, int32_t req) {
    if (req != SD_MB_AUTO) return 0;
    if (e != cudaErrorCooperativeLaunchTooLarge && e != cudaErrorNotSupported && e != cudaErrorNotPermitted) return 0;
    (void)cudaGetLastError();
    return 1;
}

extern "C" specdec_status sd_cuda_verify_mb_launch(const sd_cuda_verify_args *a, const sd_cuda_mb_ws *w,
                                                   cudaStream_t stream, int *launched, sd_errbuf *eb) {
    *launched = 0;
    const int64_t rows = (int64_t)a->n_seq * (a->gamma + 1);
    int32_t nb = 0;
    specdec_status st = mb_plan((const void *)sd_mb_verify_kernel, 0, a->n_vocab, rows, a->blocks_per_row, &nb, eb);
    if (st != SPECDEC_OK || nb == 0) return st;
    if (!w->ctrl || !w->parts || !w->hist)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda verify: workspace has no multi-block region for %lld rows",
                       (long long)rows);
    sd_mb_kargs k;
    memset(&k, 0, sizeof k);
    k.n_vocab = a->n_vocab;
    k.nb = nb;
    k.v = *a;
    mb_carve(&k, w);
    const cudaError_t e =
        mb_launch(sd_mb_verify_kernel, dim3((unsigned)nb, (unsigned)(a->gamma + 1), (unsigned)a->n_seq), k, stream);
    if (mb_refused(e, a->blocks_per_row)) return SPECDEC_OK;
    SD_CUDA_TRY(eb, e);
    sd_mb_chain_kernel<<<(unsigned)((a->n_seq + 127) / 128), 128, 0, stream>>>(*a, w->outcomes);
    SD_CUDA_LAUNCHED(eb, "sd_mb_chain_kernel");
    *launched = 1;
    return SPECDEC_OK;
}

extern "C" specdec_status sd_cuda_draft_mb_launch(const sd_cuda_sample_draft_args *a, const sd_cuda_mb_ws *w,
                                                  cudaStream_t stream, int *launched, sd_errbuf *eb) {
    *launched = 0;
    int32_t nb = 0;
    specdec_status st = mb_plan((const void *)sd_mb_draft_kernel, 1, a->n_vocab, a->n_seq, a->blocks_per_row, &nb, eb);
    if (st != SPECDEC_OK || nb == 0) return st;
    if (!w->ctrl || !w->parts || !w->hist)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda draft: workspace has no multi-block region for %d rows",
                       (int)a->n_seq);
    sd_mb_kargs k;
    memset(&k, 0, sizeof k);
    k.n_vocab = a->n_vocab;
    k.nb = nb;
    k.d = *a;
    mb_carve(&k, w);
    const cudaError_t e = mb_launch(sd_mb_draft_kernel, dim3((unsigned)nb, 1u, (unsigned)a->n_seq), k, stream);
    if (mb_refused(e, a->blocks_per_row)) return SPECDEC_OK;
    SD_CUDA_TRY(eb, e);
    *launched = 1;
    return SPECDEC_OK;
}
