/* sd_cuda_ops.h — C-callable host launchers of the CUDA kernels in kernels/cuda.
 *
 * Each op family lives in one .cu file whose header comment gives shapes, math and
 * launch geometry; this header is the one C view of all of them, used by the CUDA
 * runner, the GPU tests (plain C) and the benchmark. A launcher with more than a few
 * operands takes them in an argument struct (fields documented below; the struct is
 * only read during the call). Every launcher enqueues work on `stream`, checks the
 * launch (cudaGetLastError) and returns a specdec_status with an sd_fail() detail
 * naming the statement, file and line; it never synchronises and never allocates. All pointers are device pointers unless stated. Activations are
 * fp32 row-major; weights are F32/F16/BF16 (sd_dtype) in PyTorch nn.Linear layout
 * [out, in]. A sticky device error maps to SPECDEC_ERR_DEVICE_LOST. */
#ifndef SD_CUDA_OPS_H
#define SD_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#include <cublas_v2.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Inside extern "C": these private headers have no C++ guards of their own. */
#include "specdec.h"
#include "sd_error.h"
#include "sd_weights.h"
#include "sd_cuda_keymap.h"

/* Rows up to which the projections use the hand-written skinny GEMM (decode and
 * verify: γ + 1 <= SPECDEC_MAX_DRAFT + 1); above it prefill goes through cuBLAS. */
#define SD_CUDA_SKINNY_MAX_M (SPECDEC_MAX_DRAFT + 1)
/* Rows one skinny-GEMM launch handles; more rows are split into launches of this size. */
#define SD_CUDA_SKINNY_ROWS 16
/* Rows one launch of the M-looped tensor-core GEMM (sd_cuda_gemm_tcb) handles with its
 * weights streamed once; more rows are split into launches of this size. */
#define SD_CUDA_GEMM_BATCH_ROWS 512
/* Virtual keys per attention split (SD_CUDA_ATTN_SPLIT, sd_cuda_keymap.h): fixed, never
 * derived from the query count, so a query's reduction order is the same in a 1-token
 * step, inside a k-token step and inside a batch of several sequences. */
/* Largest head_dim the attention kernel supports. */
#define SD_CUDA_ATTN_MAX_HD 256

/* --- error plumbing (sd_cuda_device.cu) --------------------------------------- */
/* Status for a CUDA runtime error: sticky errors (illegal address, launch failure,
 * ...) -> SPECDEC_ERR_DEVICE_LOST, allocation -> SPECDEC_ERR_OUT_OF_MEMORY,
 * no device/driver -> SPECDEC_ERR_BACKEND_UNAVAILABLE, else SPECDEC_ERR_INTERNAL. */
specdec_status sd_cuda_status_of(cudaError_t e);
/* Record "file:line: stmt: cudaErrorName (text)" in eb and return sd_cuda_status_of(e). */
specdec_status sd_cuda_fail(sd_errbuf *eb, cudaError_t e, const char *stmt, const char *file, int line);
specdec_status sd_cublas_fail(sd_errbuf *eb, cublasStatus_t s, const char *stmt, const char *file, int line);

/* --- embedding (sd_cuda_embed.cu) ---------------------------------------------
 * x[m, c] = table[tokens[m], c] as fp32; table [vocab, hidden] in dt. Token ids must
 * already be validated on the host. */
specdec_status sd_cuda_embed(const void *table, sd_dtype dt, const int32_t *tokens, int32_t n, int32_t hidden,
                             float *x, cudaStream_t stream, sd_errbuf *eb);

/* --- RMSNorm fused with the residual add (sd_cuda_rmsnorm.cu) ------------------
 * For each row m < n: if delta != NULL, x[m] += delta[m] (written back); then
 * out[m, c] = x[m, c] * rsqrt(mean_c x[m]^2 + eps) * w[c]. */
typedef struct sd_cuda_rmsnorm_args {
    float *x;            /* [n, dim] residual stream (updated when delta != NULL) */
    const float *delta;  /* [n, dim] or NULL */
    const float *w;      /* [dim] fp32 */
    float *out;          /* [n, dim]; may alias delta but not x */
    int32_t n;           /* rows (<= 0: nothing launched) */
    int32_t dim;
    float eps;
} sd_cuda_rmsnorm_args;
specdec_status sd_cuda_rmsnorm(const sd_cuda_rmsnorm_args *a, cudaStream_t stream, sd_errbuf *eb);

/* --- RoPE + KV-cache append (sd_cuda_rope.cu) ----------------------------------
 * qkv [n, ldqkv] fp32 holds per token q [n_heads*hd] | k [n_kv*hd] | v [n_kv*hd].
 * Rotates q and k of token m with the table row of its position (rotate_half:
 * elements i and i + hd/2), in place, then stores k and v of token m into the caches
 * at the physical row of its write row (sd_cuda_keymap.h: CHAIN mode position = write
 * row = pos0 (+ *pos_dev) + m; GENERAL mode tok[m].pos / tok[m].wrow, through the
 * token's block table). Host-given CHAIN positions are checked to lie in [0, n_ctx);
 * device-side ones and GENERAL maps are the caller's to keep inside the tables. */
typedef struct sd_cuda_rope_args {
    float *qkv;             /* [n, ldqkv] */
    int32_t ldqkv;
    int32_t n;              /* tokens (<= 0: nothing launched) */
    sd_cuda_keymap map;     /* positions and write rows (only the write side is used) */
    int32_t n_heads, n_kv, hd; /* hd even */
    const float *cos_t, *sin_t; /* [n_ctx, hd/2] fp32 */
    void *k_cache, *v_cache;    /* [n_kv][cache_rows][hd] in kv_dt */
    sd_dtype kv_dt;
    int32_t n_ctx;          /* rows of the cos / sin tables: positions < n_ctx */
    int32_t cache_rows;     /* physical rows per kv head (n_blocks * block_tokens) */
    int32_t rot_dim;        /* rotary dims of a head (partial rotary: the first rot_dim rotate,
                               pairs i, i + rot_dim/2; tables [n_ctx, rot_dim/2]); 0 = hd */
    int32_t interleaved;    /* 1: pairs (2i, 2i + 1) of the first rot_dim (cfg.rope_interleaved) */
} sd_cuda_rope_args;
specdec_status sd_cuda_rope_kv(const sd_cuda_rope_args *a, cudaStream_t stream, sd_errbuf *eb);

/* --- attention (sd_cuda_attention.cu) -------------------------------------------
 * GQA attention of n query tokens, each over its own virtual key sequence
 * (sd_cuda_keymap.h: CHAIN mode token m at p = pos0 (+ *pos_dev) + m sees logical rows
 * 0..p, causal; GENERAL mode tok[m]'s cache prefix then its extra tree rows), read
 * through the block tables. part: split scratch of part_floats floats; a launch needs
 * sd_keymap_part_floats(n, n_heads, hd, keys) with keys its key bound (the last
 * position + 1 in CHAIN mode, n_ctx with pos_dev, map.max_keys in GENERAL mode);
 * sd_cuda_attention_part_floats(n, n_heads, hd, n_ctx) always suffices. A launch
 * needing more is refused (SPECDEC_ERR_INVALID_ARGUMENT, nothing written): query
 * chunks larger than the scratch are the caller's to split (sd_keymap_part_rows). With pos_dev != NULL (CUDA-graph replay) the positions are read on the
 * device and kept inside [0, n_ctx - n] by the caller; the grid then covers all
 * ceil(n_ctx / SD_CUDA_ATTN_SPLIT) splits (idle ones exit at once), bitwise the same
 * rows as with the position given on the host. GENERAL mode: map.max_keys bounds the
 * grid, map.blk lists the attention blocks (one unit of one sequence each). Optional
 * (zero = off): a score scale, soft-capping, a sliding window (sd_cuda_keymap.h
 * sd_keymap_first_key). */
typedef struct sd_cuda_attention_args {
    const float *q;             /* [n, ldq] fp32, head h at column h*hd */
    int32_t ldq;
    const void *k_cache, *v_cache; /* [n_kv][cache_rows][hd] in kv_dt */
    sd_dtype kv_dt;
    int32_t cache_rows;         /* physical rows per kv head */
    int32_t n_ctx;              /* most keys of any token (CHAIN mode bound, scratch) */
    int32_t n;                  /* query tokens (<= 0: nothing launched) */
    sd_cuda_keymap map;         /* the keys each token sees */
    int32_t n_heads, n_kv, hd;  /* n_heads % n_kv == 0, hd <= SD_CUDA_ATTN_MAX_HD */
    float *part;                /* split scratch, see above */
    size_t part_floats;         /* floats at part (the launch is refused if it needs more) */
    float *out;                 /* [n, ldo] fp32 */
    int32_t ldo;
    float scale;                /* score scale; 0 = 1/sqrt(hd) */
    float softcap;              /* scores = softcap * tanh(scores / softcap); 0 = none */
    int32_t window;             /* sliding window: keys of positions > p - window; 0 = none */
} sd_cuda_attention_args;
size_t sd_cuda_attention_part_floats(int32_t n, int32_t n_heads, int32_t hd, int32_t n_ctx);
specdec_status sd_cuda_attention(const sd_cuda_attention_args *a, cudaStream_t stream, sd_errbuf *eb);

/* --- KV-row copies (sd_cuda_kvcopy.cu) --------------------------------------------
 * Tree compaction: for i = 0 .. n_moves - 1 IN ORDER, physical row moves[2i] is copied
 * to row moves[2i + 1] in every one of the n_mats matrices [n_kv][cache_rows][hd]
 * (K and V of every layer, mat_stride elements apart, starting at `cache`), raw bits.
 * Each thread copies one element position through all moves in order, so a row that
 * is first read and later overwritten (keep[] increasing) is always read first. */
typedef struct sd_cuda_kv_copy_args {
    void *cache;            /* matrix 0 (layer 0 K) */
    size_t mat_stride;      /* elements from one matrix to the next */
    int32_t n_mats;         /* 2 * n_layers */
    int32_t n_kv, hd, cache_rows;
    sd_dtype kv_dt;
    const int32_t *moves;   /* [n_moves][2] (from, to) physical rows, device */
    int32_t n_moves;        /* <= 0: nothing launched */
} sd_cuda_kv_copy_args;
specdec_status sd_cuda_kv_copy(const sd_cuda_kv_copy_args *a, cudaStream_t stream, sd_errbuf *eb);

/* --- SwiGLU (sd_cuda_swiglu.cu) -------------------------------------------------
 * gu [n, 2*inter] = gate | up per row; h[m, j] = silu(gate[m, j]) * up[m, j]. */
specdec_status sd_cuda_swiglu(const float *gu, float *h, int32_t n, int32_t inter, cudaStream_t stream,
                              sd_errbuf *eb);

/* --- per-family ops (sd_cuda_model_ops.cu) ----------------------------------------
 * q_norm / k_norm: every head of q and k in qkv [n, ldqkv] (q [n_heads*hd] | k
 * [n_kv*hd] | v) RMS-normalised with weights wq / wk [hd] fp32, in place. */
typedef struct sd_cuda_head_norm_args {
    float *qkv;             /* [n, ldqkv] */
    int32_t ldqkv;
    int32_t n;              /* tokens (<= 0: nothing launched) */
    int32_t n_heads, n_kv, hd;
    const float *wq, *wk;   /* [hd] fp32 ((1 + w) folded in for Gemma) */
    float eps;
} sd_cuda_head_norm_args;
specdec_status sd_cuda_head_rmsnorm(const sd_cuda_head_norm_args *a, cudaStream_t stream, sd_errbuf *eb);
/* h[m, j] = act(gate) * up over gu [n, 2*inter] = gate | up (act: sd_act, SiLU / GELU-tanh
 * / GELU). */
specdec_status sd_cuda_glu(const float *gu, float *h, int32_t n, int32_t inter, int32_t act, cudaStream_t stream,
                           sd_errbuf *eb);
/* x[r * ld + c] = cap * tanh(x / cap) for r < n, c < cols (cap > 0). */
specdec_status sd_cuda_softcap(float *x, int32_t n, size_t ld, int32_t cols, float cap, cudaStream_t stream,
                               sd_errbuf *eb);
/* x[i] *= s for i < count. */
specdec_status sd_cuda_scale(float *x, size_t count, float s, cudaStream_t stream, sd_errbuf *eb);

/* --- GEMM (sd_cuda_gemm.cu, sd_cuda_gemm_tc.cu) ----------------------------------
 * y[m, o] = sum_k x[m, k] * W[o, k] (+ bias[o]) for m < n, o < n_out.
 * Skinny: any n, BATCH INVARIANT (row m's bits depend only on row m of x, W, bias and
 * K — never on n or on the other rows); BF16/F16 weights run on tensor cores
 * (sd_cuda_gemm_tc: activations rounded to the weight dtype, fp32 accumulation, a
 * fixed 8-way k-split and reduction order), F32 weights on the CUDA-core kernel
 * (launches of SD_CUDA_SKINNY_ROWS rows, STORE only). sd_cuda_gemm_tc runs n <=
 * SD_CUDA_SKINNY_MAX_M in launches of SD_CUDA_SKINNY_ROWS rows, and larger n, when
 * xconv is given, with sd_cuda_gemm_tcb (below); both give every row the same bits.
 * M-looped (sd_cuda_gemm_tcb, BF16/F16, xconv required): x rounded into xconv once,
 * then launches of up to SD_CUDA_GEMM_BATCH_ROWS rows, each reading every weight once;
 * bitwise the skinny tensor-core result for every row and every n.
 * BLAS: cuBLAS GemmEx, x converted to wdt into xconv (unused for F32), fp32
 * accumulation; the handle must be bound to `stream`; STORE only; NOT batch invariant
 * (cuBLAS picks its algorithm by shape).
 * Epilogues (tensor-core paths):
 *   STORE  y[m, o] = acc + b[o]
 *   ADD    y[m, o] = y[m, o] + (acc + b[o])  (the residual add of the o / down projection)
 *   SWIGLU W holds 2 n_out rows [gate; up] (bias too when given) and
 *          y[m, j] = silu(gate) * up exactly as sd_cuda_swiglu computes it. */
enum { SD_GEMM_EPI_STORE = 0, SD_GEMM_EPI_ADD = 1, SD_GEMM_EPI_SWIGLU = 2 };
typedef struct sd_cuda_gemm_args {
    const void *w;       /* [n_out, k_in] in wdt */
    sd_dtype wdt;
    const float *bias;   /* [n_out] fp32 or NULL */
    const float *x;      /* [n, k_in] fp32 */
    float *y;            /* [n, ldy] fp32 */
    int32_t ldy;         /* >= n_out */
    int32_t n;           /* rows (<= 0: nothing launched) */
    int32_t n_out, k_in;
    void *xconv;         /* scratch of n * k_in elements of wdt: BLAS (unused for F32), the
                            M-looped kernel (required), sd_cuda_gemm_tc above 17 rows
                            (optional); NULL otherwise. Overwritten. */
    int32_t epi;         /* SD_GEMM_EPI_*; 0 = STORE */
} sd_cuda_gemm_args;
specdec_status sd_cuda_gemm_skinny(const sd_cuda_gemm_args *a, cudaStream_t stream, sd_errbuf *eb);
/* The tensor-core kernels (BF16/F16 weights; sd_cuda_gemm_skinny dispatches to it). */
specdec_status sd_cuda_gemm_tc(const sd_cuda_gemm_args *a, cudaStream_t stream, sd_errbuf *eb);
/* The M-looped tensor-core kernel alone, any n >= 1 (the benchmark and tests call it
 * directly, also for n <= 16). */
specdec_status sd_cuda_gemm_tcb(const sd_cuda_gemm_args *a, cudaStream_t stream, sd_errbuf *eb);
/* The CUDA-core kernel alone, any dtype, STORE only (the pre-tensor-core path; kept
 * for F32 weights and as the benchmark's baseline). */
specdec_status sd_cuda_gemm_simt(const sd_cuda_gemm_args *a, cudaStream_t stream, sd_errbuf *eb);
specdec_status sd_cuda_gemm_blas(cublasHandle_t blas, const sd_cuda_gemm_args *a, cudaStream_t stream,
                                 sd_errbuf *eb);
/* dst[i] = (dt) src[i] for i < count (round to nearest even). */
specdec_status sd_cuda_convert_f32(const float *src, void *dst, sd_dtype dt, size_t count, cudaStream_t stream,
                                   sd_errbuf *eb);

/* --- random fill with cuRAND's Philox (sd_cuda_fill.cu) ----------------------------
 * dst[i] = (dt)(mean + std * N(0,1)) from curand_init(seed, i, 0): the same values
 * whatever the launch geometry. */
specdec_status sd_cuda_fill_normal(void *dst, sd_dtype dt, size_t count, uint64_t seed, float mean, float std,
                                   cudaStream_t stream, sd_errbuf *eb);

/* Launch a kernel that writes through a NULL pointer: a real sticky fault, for the
 * DEVICE_LOST test only. */
specdec_status sd_cuda_inject_fault(cudaStream_t stream, sd_errbuf *eb);

/* --- stream ordering (sd_cuda_device.cu, issue 24 (c)) -------------------------------
 * Work enqueued on `waiter` after this call runs after everything enqueued on
 * `producer` before it, with no host wait: ev (the caller's, created with
 * cudaEventDisableTiming) is recorded on producer and waited on by waiter. The event may
 * be reused at once (a wait binds the record made before it). Nothing happens when the
 * streams are the same. Never while either stream is being captured into a graph (the
 * waiter would join the capture): order around cudaGraphLaunch instead. */
specdec_status sd_cuda_stream_after(cudaStream_t waiter, cudaStream_t producer, cudaEvent_t ev, sd_errbuf *eb);
/* Test hook: one thread waits about `ns` nanoseconds on the device clock, then stores
 * `value` at *dst (tests/cuda/test_cuda_streams.c: ordering that a race would break). */
specdec_status sd_cuda_delayed_store(int32_t *dst, int32_t value, uint64_t ns, cudaStream_t stream, sd_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif
