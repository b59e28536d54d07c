/* sd_cuda_runner.cu — the CUDA runner GROUP (core/sd_runner.h "Groups and batches"):
 * one model instance on one device — weights, a paged KV pool, activations, stream,
 * cuBLAS — and its runners, one per sequence, each with a block table; the forward
 * pass over the segments of several sequences built from the kernels of kernels/cuda/.
 * backends/cpu/sd_cpu_runner.c is the reference this mirrors.
 *
 * Memory (all allocated when the group and its runners are created, nothing in a
 * forward):
 * - weights: ONE cudaMalloc arena. Per layer: attn_norm, ffn_norm (fp32), W_qkv =
 *   [W_q; W_k; W_v] as one [(H+2KV)*hd, hidden] matrix with its fp32 bias (Qwen2),
 *   W_o (with its fp32 bias for Llama attention_bias), W_gu = [W_gate; W_up]
 *   [2*inter, hidden], W_down; then the embedding, the final norm and the LM head
 *   (shared with the embedding when tied). Projections stay in the checkpoint dtype;
 *   F32 checkpoints become BF16 unless keep_f32.
 * - KV pool: one arena of 2 * n_layers matrices K0, V0, K1, V1, ... each
 *   [n_kv][cache_rows][hd] in the weight dtype (F32 only with keep_f32), cache_rows =
 *   n_blocks * block_tokens, zeroed at creation. A sequence's logical row l lives in
 *   physical row table[l / bt] * bt + l % bt (core/sd_kv.h); each runner keeps its
 *   block table on the host (r->kv, core's bookkeeping) and a device copy the kernels
 *   read, refreshed before a pass where the host table changed (rarely: once per
 *   block_tokens tokens of a sequence).
 * - activations for act_rows = min(max_batch, 512) rows (longer passes run in chunks
 *   of act_rows against the cache), rope cos/sin tables [n_ctx, hd/2] built with the
 *   CPU reference's own functions (bitwise the same angles), attention split scratch
 *   for att_rows query rows, the cuBLAS workspace, logit_rows = min(act_rows, 128) (at
 *   least 17) rows of logits.
 * - the pass description (token ids, per-token key maps, tree rows, attention blocks;
 *   backends/cuda/sd_cuda_layout.h) in a pinned host buffer and its device twin: one
 *   upload per pass.
 *
 * A pass of M tokens: embedding, then per layer RMSNorm, QKV, RoPE + KV append (each
 * token into its own sequence's row), attention (each token over its own virtual key
 * sequence, kernels/cuda/sd_cuda_keymap.h), o, RMSNorm, gate/up + SwiGLU, down — norms
 * and GEMMs over all tokens at once. GEMM path per body chunk of `rows` tokens: the
 * batch-invariant tensor-core GEMM (sd_cuda_gemm_skinny: 16-row launches up to 17 rows,
 * above that the M-looped kernel of sd_cuda_gemm_tc.cu, weights read once per 512 rows
 * and the same bits per row; CUDA cores in 16-row launches for F32 weights) for
 * every pass of several segments, every pass with a tree, and every chunk of <= 17
 * rows (SD_CUDA_SKINNY_MAX_M); cuBLAS (not batch invariant) only for chunks of more
 * than 17 rows of a pass that is ONE chain segment — a prefill, which the engine and
 * the scheduler both run alone with the same chunking. Every other kernel is batch
 * invariant. Hence (docs/GPU_FORWARD.md "Runner groups"): a token's logits and K/V are
 * bitwise the same alone or in any batch, and a tree node's the same as plain decoding
 * of its path, for every decode / verify / draft / tree pass. The LM head always runs
 * batch invariant, over runs of consecutive tokens that want logits (across segments)
 * in windows of logit_rows, logits copied to the segments' host rows — or, for the
 * batched device round (sd_cuda_group_forward_device), the same windows over the wanted
 * rows only, copied to device rows (the logits stay on the GPU).
 *
 * sd_cuda_runner_create (the engine's entry point) is a private group of
 * ceil(n_ctx / 16) blocks with one runner that owns it; its device table is the
 * identity over every block from creation on (the private pool hands blocks out in
 * order, so the host table always agrees), so the device-resident round's CUDA graphs
 * (sd_cuda_runner_enqueue_dpos, positions in device memory) never need a table update.
 * Every CUDA call is checked; a sticky error marks the group lost and every later
 * forward of its runners returns SPECDEC_ERR_DEVICE_LOST; everything can always be
 * destroyed. */
#include <cuda_runtime.h>
#include <cublas_v2.h>

#include "sd_cublas_dl.h"
#include <string.h>

#include "sd_cuda_common.cuh"
#include "sd_cuda_backend.h"
#include "sd_cuda_layout.h"
#include "sd_cuda_runner.h"

extern "C" {
#include "sd_alloc.h"
#include "sd_cpu_rope.h"
}

#define SD_CUDA_ACT_ROWS_MAX 512
#define SD_CUDA_ATT_SCRATCH_BUDGET ((size_t)64 << 20)
#define SD_CUDA_BLAS_WS_BYTES ((size_t)32 << 20)
#define SD_CUDA_ALIGN 256
/* Logits rows kept on the device, at least: a whole verify pass (γ + 1 <= SD_CUDA_SKINNY_MAX_M)
 * for the device round. */
#define SD_CUDA_LOGIT_ROWS (SD_CUDA_SKINNY_MAX_M > SD_CUDA_SKINNY_ROWS ? SD_CUDA_SKINNY_MAX_M : SD_CUDA_SKINNY_ROWS)
/* ... and at most (when act_rows allows): the host path's LM-head window, rows of one
 * weight stream over W_lm (a tree of 65 nodes, or 25 sequences x 5 verify rows, in
 * one; 63 MiB at a vocabulary of 128256). */
#define SD_CUDA_LM_ROWS_MAX 128
/* Token slots at the start of the device pass buffer: the device round writes up to
 * γ + 2 ids there whatever max_batch is. */
#define SD_CUDA_TOK_SLOTS_MIN (SPECDEC_MAX_DRAFT + 2)

typedef struct sd_cuda_layer {
    float *attn_norm;  /* [hidden] */
    float *ffn_norm;   /* [hidden] */
    void *wqkv;        /* [q_dim + 2 kv_dim, hidden] */
    float *bqkv;       /* [q_dim + 2 kv_dim] or NULL */
    void *wo;          /* [hidden, q_dim] */
    float *bo;         /* [hidden] o_proj bias (Llama attention_bias) or NULL */
    void *wgu;         /* [2 inter, hidden] */
    void *wdown;       /* [hidden, inter] */
    void *kc, *vc;     /* [n_kv][cache_rows][hd] in kv_dt (the pool) */
    /* present as the configuration says (core/sd_weights.h), else NULL; norms fp32 with
     * the configuration's norm_offset folded in ((1 + w) for Gemma) */
    float *q_norm, *k_norm;  /* [hd] */
    float *attn_post_norm;   /* [hidden] sandwich norms (Gemma 2/3) */
    float *ffn_post_norm;    /* [hidden] */
    float *bgu;              /* [2 inter] gate | up bias (mlp_bias) */
    float *bdown;            /* [hidden] */
} sd_cuda_layer;

/* Where the current pass's description sits in the staging buffers (same offsets in
 * the pinned host buffer and its device twin). */
typedef struct sd_cuda_plan {
    size_t off_tok, off_ext, off_blk, bytes;
    sd_cuda_layout lo;
} sd_cuda_plan;

typedef struct sd_cuda_group {
    sd_runner_group base;   /* must be first: core sees an sd_runner_group * */
    sd_config cfg;
    int device;
    sd_dtype wdt, kv_dt;
    int32_t q_dim, kv_dim, qkv_dim;
    int32_t act_rows;       /* rows of every activation buffer */
    int32_t logit_rows;     /* rows of the logits buffer (LM-head window) */
    int32_t att_rows;       /* query rows per attention launch (scratch size) */
    int32_t cache_rows;     /* n_blocks * block_tokens */
    size_t kv_mat_bytes;    /* one [n_kv][cache_rows][hd] matrix, aligned */
    int lost;
    int has_bo;             /* o_proj carries a bias */
    cudaStream_t stream;
    cublasHandle_t blas;
    void *w_arena; size_t w_bytes;
    void *kv_arena; size_t kv_bytes;
    void *act_arena; size_t act_bytes;
    sd_cuda_layer *layers;  /* host array [n_layers] of device pointers */
    void *tok_embd;         /* [vocab, hidden] */
    float *out_norm;        /* [hidden] */
    void *lm_head;          /* [vocab, hidden]; == tok_embd when tied */
    float *x, *xn, *delta;  /* [act_rows, hidden] */
    float *post;            /* [act_rows, hidden] a sublayer's output after its sandwich norm, or NULL */
    float *qkv;             /* [act_rows, qkv_dim] */
    float *att;             /* [act_rows, q_dim] */
    float *gu;              /* [act_rows, 2 inter] */
    float *h;               /* [act_rows, inter] */
    void *xconv;            /* [act_rows, max(hidden, q_dim, inter)] in wdt (x rounded: cuBLAS, M-looped GEMM) */
    float *part;            /* attention split scratch for att_rows queries */
    float *logits;          /* [logit_rows, vocab] */
    float *rope_cos, *rope_sin; /* [n_ropes][n_ctx, rope_dim/2]: full layers, then sliding ones (own rope) */
    int32_t n_ropes;        /* 2 when sliding layers have their own rope (Gemma 3) */
    void *blas_ws;          /* SD_CUDA_BLAS_WS_BYTES */
    char *d_stage;          /* device pass buffer: token ids at offset 0, then the plan */
    char *h_stage;          /* its pinned host twin */
    size_t stage_bytes;
    int32_t tok_slots;      /* int32 token ids at offset 0 */
    int32_t *tseg;          /* [max_batch] host: segment of each token of a pass */
    sd_cuda_att_launch *launch; /* [max_batch] host: attention launches of a pass */
    sd_cuda_plan plan;      /* the current pass */
} sd_cuda_group;

typedef struct sd_cuda_runner {
    sd_runner base;         /* must be first: the engine sees an sd_runner * */
    sd_cuda_group *g;
    int owns_group;         /* standalone: the runner frees its private group */
    int32_t *d_table;       /* [kv.cap] device copy of the block table */
    int32_t *mirror;        /* [kv.cap] host: what d_table holds */
    int32_t mirror_n;       /* entries of mirror known to be on the device */
} sd_cuda_runner;

static size_t sd_align_up(size_t n) { return (n + SD_CUDA_ALIGN - 1) / SD_CUDA_ALIGN * SD_CUDA_ALIGN; }
static size_t sd_align16(size_t n) { return (n + 15) / 16 * 16; }

/* Bump allocator over a byte count: first pass sizes (base NULL), second pass places. */
typedef struct sd_bump {
    char *base;
    size_t off;
} sd_bump;
static void *sd_bump_take(sd_bump *b, size_t bytes) {
    void *p = b->base ? (void *)(b->base + b->off) : NULL;
    b->off += sd_align_up(bytes);
    return p;
}

/* Record a CUDA failure on the group; a sticky one makes it lost. */
static specdec_status sd_group_note(sd_cuda_group *g, specdec_status st) {
    if (st == SPECDEC_ERR_DEVICE_LOST) g->lost = 1;
    return st;
}

static void cuda_group_destroy(sd_runner_group *gb) {
    sd_cuda_group *g = (sd_cuda_group *)gb;
    if (!g) return;
    /* Errors are ignored here: after a sticky error frees fail, and there is nothing
     * else to do; the handle must still be releasable. */
    (void)cudaSetDevice(g->device);
    if (g->stream) (void)cudaStreamSynchronize(g->stream);
    if (g->blas) (void)sd_cublas()->destroy(g->blas); /* a handle exists only once cuBLAS loaded */
    if (g->stream) (void)cudaStreamDestroy(g->stream);
    if (g->w_arena) (void)cudaFree(g->w_arena);
    if (g->kv_arena) (void)cudaFree(g->kv_arena);
    if (g->act_arena) (void)cudaFree(g->act_arena);
    if (g->h_stage) (void)cudaFreeHost(g->h_stage);
    (void)cudaGetLastError();
    sd_free(g->layers);
    sd_free(g->tseg);
    sd_free(g->launch);
    sd_kv_pool_free(&g->base.pool);
    sd_free(g);
}

static void cuda_destroy(sd_runner *base) {
    sd_cuda_runner *r = (sd_cuda_runner *)base;
    if (!r) return;
    sd_cuda_group *g = r->g;
    sd_runner_group_detach(base);
    if (r->d_table) {
        (void)cudaSetDevice(g->device);
        if (g->stream) (void)cudaStreamSynchronize(g->stream); /* no pass still reads it */
        (void)cudaFree(r->d_table);
        (void)cudaGetLastError();
    }
    sd_free(r->mirror);
    if (r->owns_group) cuda_group_destroy(&g->base);
    sd_free(r);
}

/* ---- the forward pass --------------------------------------------------------- */

/* One body chunk: rows [first, first + n) of the token buffer. */
typedef struct sd_cuda_fwd {
    int32_t first, n;
    int skinny;                     /* batch-invariant skinny GEMMs (else cuBLAS) */
    sd_cuda_keymap map;             /* RoPE / KV append of the chunk's tokens */
    const sd_cuda_att_launch *att;  /* GENERAL mode: the chunk's attention launches */
    int32_t n_att;                  /* 0: one launch with `map` (CHAIN mode) */
    const sd_runner_seg *segs;      /* the pass's segments (their aux: captured hidden states), or NULL */
    int32_t n_segs;
    cudaStream_t s;
    sd_errbuf *eb;
} sd_cuda_fwd;

/* cuBLAS is bound to g->stream, so only g->stream may take the cuBLAS path. */
static specdec_status sd_gemm(sd_cuda_group *g, const sd_cuda_fwd *f, const void *w, const float *bias, const float *x,
                              float *y, int32_t n_out, int32_t k_in, int32_t epi) {
    sd_cuda_gemm_args a;
    memset(&a, 0, sizeof a);
    a.w = w;
    a.wdt = g->wdt;
    a.bias = bias;
    a.x = x;
    a.y = y;
    a.ldy = n_out;
    a.n = f->n;
    a.n_out = n_out;
    a.k_in = k_in;
    a.epi = epi;
    a.xconv = g->xconv; /* the M-looped kernel rounds x into it above 17 rows, cuBLAS too */
    if (f->skinny) return sd_cuda_gemm_skinny(&a, f->s, f->eb);
    return sd_cuda_gemm_blas(g->blas, &a, g->stream, f->eb);
}

/* out = RMSNorm(x [+= delta]) * w over the chunk's rows. */
static specdec_status sd_rmsnorm_to(sd_cuda_group *g, const sd_cuda_fwd *f, float *x, const float *delta,
                                    const float *w, float *out) {
    sd_cuda_rmsnorm_args a;
    a.x = x;
    a.delta = delta;
    a.w = w;
    a.out = out;
    a.n = f->n;
    a.dim = g->cfg.hidden_size;
    a.eps = g->cfg.rms_norm_eps;
    return sd_cuda_rmsnorm(&a, f->s, f->eb);
}

static specdec_status sd_rmsnorm(sd_cuda_group *g, const sd_cuda_fwd *f, const float *delta, const float *w) {
    return sd_rmsnorm_to(g, f, g->x, delta, w, g->xn);
}

/* Attention of layer l for the chunk's tokens into g->att: one launch per entry of
 * f->att (GENERAL mode), or one CHAIN-mode launch with f->map. The model's score scale
 * and soft-cap; the window on sliding layers. */
static specdec_status sd_attention(sd_cuda_group *g, int32_t l, const sd_cuda_fwd *f) {
    const sd_config *c = &g->cfg;
    const sd_cuda_layer *L = &g->layers[l];
    sd_cuda_attention_args aa;
    memset(&aa, 0, sizeof aa);
    aa.scale = c->attn_scale;
    aa.softcap = c->attn_softcap;
    aa.window = c->layer_sliding[l] ? c->sliding_window : 0;
    aa.ldq = g->qkv_dim;
    aa.k_cache = L->kc;
    aa.v_cache = L->vc;
    aa.kv_dt = g->kv_dt;
    aa.cache_rows = g->cache_rows;
    aa.n_ctx = g->base.n_ctx;
    aa.n_heads = c->n_heads;
    aa.n_kv = c->n_kv_heads;
    aa.hd = c->head_dim;
    aa.part = g->part;
    aa.part_floats = sd_cuda_attention_part_floats(g->att_rows, c->n_heads, c->head_dim, g->base.n_ctx);
    aa.ldo = g->q_dim;
    if (f->n_att == 0) { /* CHAIN mode, in launches of at most att_rows tokens (the scratch's size) */
        for (int32_t q0 = 0; q0 < f->n; q0 += g->att_rows) {
            aa.q = g->qkv + (size_t)q0 * g->qkv_dim;
            aa.out = g->att + (size_t)q0 * g->q_dim;
            aa.n = f->n - q0 < g->att_rows ? f->n - q0 : g->att_rows;
            aa.map = f->map;
            aa.map.pos0 = f->map.pos0 + q0;
            SD_TRY(sd_cuda_attention(&aa, f->s, f->eb));
        }
        return SPECDEC_OK;
    }
    const sd_cuda_plan *pl = &g->plan;
    const sd_cuda_tokmap *tok = (const sd_cuda_tokmap *)(g->d_stage + pl->off_tok);
    const int32_t *ext = (const int32_t *)(g->d_stage + pl->off_ext);
    const sd_cuda_attblk *blk = (const sd_cuda_attblk *)(g->d_stage + pl->off_blk);
    for (int32_t i = 0; i < f->n_att; i++) {
        const sd_cuda_att_launch *La = &f->att[i];
        aa.q = g->qkv + (size_t)(La->tok0 - f->first) * g->qkv_dim;
        aa.out = g->att + (size_t)(La->tok0 - f->first) * g->q_dim;
        aa.n = La->n;
        aa.map = sd_cuda_layout_map(La, tok, ext, blk, g->base.pool.block_tokens);
        SD_TRY(sd_cuda_attention(&aa, f->s, f->eb));
    }
    return SPECDEC_OK;
}

/* [q/k norms,] RoPE (the layer kind's tables) + KV append, then attention of layer l. */
static specdec_status sd_attend(sd_cuda_group *g, int32_t l, const sd_cuda_fwd *f) {
    const sd_config *c = &g->cfg;
    const sd_cuda_layer *L = &g->layers[l];
    if (c->qk_norm) {
        sd_cuda_head_norm_args na;
        memset(&na, 0, sizeof na);
        na.qkv = g->qkv;
        na.ldqkv = g->qkv_dim;
        na.n = f->n;
        na.n_heads = c->n_heads;
        na.n_kv = c->n_kv_heads;
        na.hd = c->head_dim;
        na.wq = L->q_norm;
        na.wk = L->k_norm;
        na.eps = c->rms_norm_eps;
        SD_TRY(sd_cuda_head_rmsnorm(&na, f->s, f->eb));
    }
    const size_t tab = g->n_ropes > 1 && c->layer_sliding[l] ? (size_t)g->base.n_ctx * (sd_cfg_rope_dim(c) / 2) : 0;
    sd_cuda_rope_args ra;
    memset(&ra, 0, sizeof ra);
    ra.qkv = g->qkv;
    ra.ldqkv = g->qkv_dim;
    ra.n = f->n;
    ra.map = f->map;
    ra.n_heads = c->n_heads;
    ra.n_kv = c->n_kv_heads;
    ra.hd = c->head_dim;
    ra.cos_t = g->rope_cos + tab;
    ra.sin_t = g->rope_sin + tab;
    ra.rot_dim = sd_cfg_rope_dim(c);
    ra.interleaved = c->rope_interleaved;
    ra.k_cache = L->kc;
    ra.v_cache = L->vc;
    ra.kv_dt = g->kv_dt;
    ra.n_ctx = g->base.n_ctx;
    ra.cache_rows = g->cache_rows;
    SD_TRY(sd_cuda_rope_kv(&ra, f->s, f->eb));
    return sd_attention(g, l, f);
}

/* With sandwich norms, the sublayer output in g->delta normed with w into g->post (the
 * delta the next RMSNorm adds to the residual stream); *pend says where that delta is. */
static specdec_status sd_post_norm(sd_cuda_group *g, const sd_cuda_fwd *f, const float *w, const float **pend) {
    if (!g->cfg.sandwich_norms) return SPECDEC_OK;
    *pend = g->post;
    return sd_rmsnorm_to(g, f, g->delta, NULL, w, g->post);
}

/* The MLP of layer L from g->xn: h = act(x Wg^T [+bg]) * (x Wu^T [+bu]), then the down
 * projection [+bd] added into x (fuse) or stored in g->delta. */
static specdec_status sd_mlp(sd_cuda_group *g, const sd_cuda_fwd *f, const sd_cuda_layer *L, int fuse_act,
                             int fuse_res) {
    const sd_config *c = &g->cfg;
    const int32_t H = c->hidden_size, I = c->intermediate_size;
    if (fuse_act) {
        SD_TRY(sd_gemm(g, f, L->wgu, L->bgu, g->xn, g->h, I, H, SD_GEMM_EPI_SWIGLU));
    } else {
        SD_TRY(sd_gemm(g, f, L->wgu, L->bgu, g->xn, g->gu, 2 * I, H, SD_GEMM_EPI_STORE));
        if (c->act == SD_ACT_SILU) SD_TRY(sd_cuda_swiglu(g->gu, g->h, f->n, I, f->s, f->eb));
        else SD_TRY(sd_cuda_glu(g->gu, g->h, f->n, I, (int32_t)c->act, f->s, f->eb));
    }
    return sd_gemm(g, f, L->wdown, L->bdown, g->h, fuse_res ? g->x : g->delta, H, I,
                   fuse_res ? SD_GEMM_EPI_ADD : SD_GEMM_EPI_STORE);
}

/* The capture hook (core/sd_runner.h "Captured hidden states"): g->x holds the residual
 * stream hs[level] of the chunk's rows (the pending delta already added); every segment
 * with aux set gets its rows' block k (capture[k] == level): one strided copy per
 * (segment, state) on the pass's stream, cudaMemcpyDefault (device aux, the contract; host
 * aux works too, synchronously). Logits and cache rows are not touched. */
static specdec_status sd_capture(sd_cuda_group *g, const sd_cuda_fwd *f, int32_t level) {
    const sd_runner_group *b = &g->base;
    const size_t H = (size_t)g->cfg.hidden_size, nc = (size_t)b->n_capture;
    for (size_t k = 0; f->segs && k < nc; k++) {
        if (b->capture[k] != level) continue;
        for (int32_t i = 0, t0 = 0; i < f->n_segs; t0 += f->segs[i].n, i++) {
            const sd_runner_seg *s = &f->segs[i];
            const int32_t lo = t0 > f->first ? t0 : f->first;
            const int32_t hi = t0 + s->n < f->first + f->n ? t0 + s->n : f->first + f->n;
            if (!s->aux || lo >= hi) continue;
            SD_CUDA_TRY(f->eb, cudaMemcpy2DAsync(s->aux + ((size_t)(lo - t0) * nc + k) * H, nc * H * sizeof(float),
                                                 g->x + (size_t)(lo - f->first) * H, H * sizeof(float),
                                                 H * sizeof(float), (size_t)(hi - lo), cudaMemcpyDefault, f->s));
        }
    }
    return SPECDEC_OK;
}

/* The chunk's rows through every layer, on stream f->s: leaves the final-normed
 * hidden states in g->xn. Fused (skinny path with BF16/F16 weights, the tensor-core
 * GEMM): the o and down projections add into the residual stream x in their epilogue
 * (the same fp32 add the RMSNorm kernel does with a stored delta, so bitwise the same
 * result) and the gate/up projection applies SwiGLU in its epilogue: 9 launches per
 * layer instead of 10 (docs/GPU_FORWARD.md). cuBLAS and F32 weights run unfused; so do
 * the residual adds of sandwich-normed sublayers (Gemma 2/3: the output is normed
 * first, into g->post) and the activation of GeGLU models (a separate kernel). The
 * layers run one after the other; the capture hook (sd_capture) takes hs[l] after layer
 * l's input norm has added the pending delta (x is then the stream entering layer l,
 * fused or not) and hs[L] after the final norm's add. */
static specdec_status sd_body(sd_cuda_group *g, const sd_cuda_fwd *f) {
    const sd_config *c = &g->cfg;
    const int32_t H = c->hidden_size;
    const int fuse = f->skinny && g->wdt != SD_F32;
    const int fuse_res = fuse && !c->sandwich_norms, fuse_act = fuse && c->act == SD_ACT_SILU;
    float *res = fuse_res ? g->x : g->delta; /* where o writes */
    const float *pend = NULL;                /* delta the next RMSNorm adds */
    const int32_t *tokens = (const int32_t *)g->d_stage + f->first;
    SD_TRY(sd_cuda_embed(g->tok_embd, g->wdt, tokens, f->n, H, g->x, f->s, f->eb));
    if (c->embed_scale > 0.0f) SD_TRY(sd_cuda_scale(g->x, (size_t)f->n * H, c->embed_scale, f->s, f->eb));
    const int capture = f->segs && g->base.n_capture > 0;
    for (int32_t l = 0; l < c->n_layers; l++) {
        const sd_cuda_layer *L = &g->layers[l];
        SD_TRY(sd_rmsnorm(g, f, pend, L->attn_norm));
        if (capture) SD_TRY(sd_capture(g, f, l));
        SD_TRY(sd_gemm(g, f, L->wqkv, L->bqkv, g->xn, g->qkv, g->qkv_dim, H, SD_GEMM_EPI_STORE));
        SD_TRY(sd_attend(g, l, f));
        SD_TRY(sd_gemm(g, f, L->wo, L->bo, g->att, res, H, g->q_dim, fuse_res ? SD_GEMM_EPI_ADD : SD_GEMM_EPI_STORE));
        pend = fuse_res ? NULL : g->delta;
        SD_TRY(sd_post_norm(g, f, L->attn_post_norm, &pend));
        SD_TRY(sd_rmsnorm(g, f, pend, L->ffn_norm));
        SD_TRY(sd_mlp(g, f, L, fuse_act, fuse_res));
        pend = fuse_res ? NULL : g->delta;
        SD_TRY(sd_post_norm(g, f, L->ffn_post_norm, &pend));
    }
    SD_TRY(sd_rmsnorm(g, f, pend, g->out_norm));
    return capture ? sd_capture(g, f, c->n_layers) : SPECDEC_OK;
}

/* LM head of rows [r0, r0 + rows) of g->xn (rows <= g->logit_rows) into g->logits:
 * batch invariant (16-row launches up to 17 rows, else the M-looped kernel). */
static specdec_status sd_lm_head(sd_cuda_group *g, int32_t r0, int32_t rows, cudaStream_t s, sd_errbuf *eb) {
    const int32_t H = g->cfg.hidden_size, V = g->cfg.vocab_size;
    sd_cuda_gemm_args a;
    memset(&a, 0, sizeof a);
    a.w = g->lm_head;
    a.wdt = g->wdt;
    a.x = g->xn + (size_t)r0 * H;
    a.y = g->logits;
    a.ldy = V;
    a.n = rows;
    a.n_out = V;
    a.k_in = H;
    a.xconv = g->xconv;
    SD_TRY(sd_cuda_gemm_skinny(&a, s, eb));
    if (g->cfg.final_softcap > 0.0f) /* Gemma 2: logits = cap * tanh(logits / cap) */
        SD_TRY(sd_cuda_softcap(g->logits, rows, (size_t)V, V, g->cfg.final_softcap, s, eb));
    return SPECDEC_OK;
}

/* The GEMM path of a body chunk of `rows` tokens of a pass of n_segs segments (see
 * the header): batch invariant unless the pass is ONE chain segment (a prefill) and
 * the chunk is longer than a verify step. */
static int sd_chunk_skinny(int32_t rows, int32_t n_segs, int has_tree) {
    return rows <= SD_CUDA_SKINNY_MAX_M || n_segs > 1 || has_tree;
}

/* Lay the pass out in the pinned staging buffer (sd_cuda_layout.h). */
static void sd_pass_layout(sd_cuda_group *g, const sd_runner_seg *segs, int32_t n_segs) {
    sd_cuda_plan *pl = &g->plan;
    sd_cuda_layout *lo = &pl->lo;
    int32_t n = 0;
    for (int32_t i = 0; i < n_segs; i++) n += segs[i].n;
    memset(lo, 0, sizeof *lo);
    lo->n_heads = g->cfg.n_heads;
    lo->n_kv = g->cfg.n_kv_heads;
    lo->act_rows = g->act_rows;
    lo->att_rows = g->att_rows;
    lo->tokens = (int32_t *)g->h_stage;
    lo->tseg = g->tseg;
    lo->launch = g->launch;
    pl->off_tok = sd_align16((size_t)g->tok_slots * sizeof(int32_t));
    pl->off_ext = sd_align16(pl->off_tok + (size_t)n * sizeof(sd_cuda_tokmap));
    lo->tok = (sd_cuda_tokmap *)(g->h_stage + pl->off_tok);
    lo->ext = (int32_t *)(g->h_stage + pl->off_ext);
    for (int32_t i = 0; i < n_segs; i++)
        sd_cuda_layout_seg(lo, &segs[i], ((const sd_cuda_runner *)segs[i].r)->d_table, i);
    pl->off_blk = sd_align16(pl->off_ext + (size_t)lo->n_ext * sizeof(int32_t));
    lo->blk = (sd_cuda_attblk *)(g->h_stage + pl->off_blk);
    sd_cuda_layout_blocks(lo);
    pl->bytes = pl->off_blk + (size_t)lo->n_blk * sizeof(sd_cuda_attblk);
}

/* Bring a runner's device table up to its host table (blocks that changed since the
 * last upload; nothing in the steady state). */
static specdec_status sd_table_sync(sd_cuda_group *g, sd_cuda_runner *r, sd_errbuf *eb) {
    const sd_kv_table *t = &r->base.kv;
    int32_t i = 0;
    while (i < t->n && i < r->mirror_n && r->mirror[i] == t->blocks[i]) i++;
    if (i == t->n) return SPECDEC_OK;
    memcpy(r->mirror + i, t->blocks + i, (size_t)(t->n - i) * sizeof(int32_t));
    if (r->mirror_n < t->n) r->mirror_n = t->n;
    /* pageable source: the call returns once the data is staged */
    SD_CUDA_TRY(eb, cudaMemcpyAsync(r->d_table + i, r->mirror + i, (size_t)(t->n - i) * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, g->stream));
    return SPECDEC_OK;
}

/* Where a pass's logits go: NULL = the segments' host rows (the sd_runner interface:
 * every row of a segment with logits); else DEVICE rows (sd_cuda_group_forward_device):
 * segs[i].logits is a device pointer that receives the segment's last min(tail, n)
 * rows (tail 0: all n), in order. */
typedef struct sd_cuda_dst {
    int32_t tail;
} sd_cuda_dst;

/* The first token of the segment starting at pass token t0 whose logits are wanted. */
static int32_t sd_first_wanted(const sd_runner_seg *s, int32_t t0, const sd_cuda_dst *dst) {
    return dst && dst->tail > 0 && dst->tail < s->n ? t0 + s->n - dst->tail : t0;
}

/* Copy the logits of pass tokens [w0, w1) (in g->logits from row 0) to the rows of the
 * segments they belong to (host rows, or device rows with dst). */
static specdec_status sd_logits_copy(sd_cuda_group *g, const sd_runner_seg *segs, int32_t n_segs, int32_t w0,
                                     int32_t w1, const sd_cuda_dst *dst, sd_errbuf *eb) {
    const int32_t V = g->cfg.vocab_size;
    const cudaMemcpyKind kind = dst ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost;
    for (int32_t i = 0, t0 = 0; i < n_segs && t0 < w1; t0 += segs[i].n, i++) {
        const int32_t ws = sd_first_wanted(&segs[i], t0, dst);
        const int32_t lo = ws > w0 ? ws : w0, hi = t0 + segs[i].n < w1 ? t0 + segs[i].n : w1;
        if (!segs[i].logits || lo >= hi) continue;
        /* Pageable host destination: the copy is ordered after the LM head on the stream
         * and completes before the next kernel reuses g->logits. */
        SD_CUDA_TRY(eb, cudaMemcpyAsync(segs[i].logits + (size_t)(lo - ws) * V, g->logits + (size_t)(lo - w0) * V,
                                        (size_t)(hi - lo) * V * sizeof(float), kind, g->stream));
    }
    return SPECDEC_OK;
}

/* The LM head of pass tokens [r0, r1) of the chunk starting at c0, in windows of up to
 * g->logit_rows rows (one weight stream each; the rows' bits do not depend on the
 * windows), each copied out. */
static specdec_status sd_logits_run(sd_cuda_group *g, const sd_runner_seg *segs, int32_t n_segs, int32_t c0,
                                    int32_t r0, int32_t r1, const sd_cuda_dst *dst, sd_errbuf *eb) {
    for (int32_t t = r0; t < r1;) {
        const int32_t e = r1 - t < g->logit_rows ? r1 : t + g->logit_rows;
        SD_TRY(sd_lm_head(g, t - c0, e - t, g->stream, eb));
        SD_TRY(sd_logits_copy(g, segs, n_segs, t, e, dst, eb));
        t = e;
    }
    return SPECDEC_OK;
}

/* The LM head of the chunk [c0, c0 + rows): every run of consecutive wanted tokens,
 * across segments (sd_logits_run). */
static specdec_status sd_pass_logits(sd_cuda_group *g, const sd_runner_seg *segs, int32_t n_segs, int32_t c0,
                                     int32_t rows, const sd_cuda_dst *dst, sd_errbuf *eb) {
    const int32_t c1 = c0 + rows;
    int32_t r0 = 0, r1 = 0; /* the current run */
    for (int32_t i = 0, t0 = 0; i < n_segs && t0 < c1; t0 += segs[i].n, i++) {
        if (!segs[i].logits || t0 + segs[i].n <= c0) continue;
        const int32_t ws = sd_first_wanted(&segs[i], t0, dst);
        const int32_t lo = ws > c0 ? ws : c0, hi = t0 + segs[i].n < c1 ? t0 + segs[i].n : c1;
        if (lo >= hi) continue;
        if (lo == r1 && r0 < r1) { /* continues the run */
            r1 = hi;
            continue;
        }
        if (r0 < r1) SD_TRY(sd_logits_run(g, segs, n_segs, c0, r0, r1, dst, eb));
        r0 = lo;
        r1 = hi;
    }
    if (r0 < r1) SD_TRY(sd_logits_run(g, segs, n_segs, c0, r0, r1, dst, eb));
    return SPECDEC_OK;
}

/* Upload the laid-out pass, run its body chunks and LM heads, wait for the stream. */
static specdec_status sd_pass_run(sd_cuda_group *g, const sd_runner_seg *segs, int32_t n_segs, const sd_cuda_dst *dst,
                                  sd_errbuf *eb) {
    const sd_cuda_plan *pl = &g->plan;
    SD_CUDA_TRY(eb, cudaSetDevice(g->device));
    for (int32_t i = 0; i < n_segs; i++) SD_TRY(sd_table_sync(g, (sd_cuda_runner *)segs[i].r, eb));
    SD_CUDA_TRY(eb, cudaMemcpyAsync(g->d_stage, g->h_stage, pl->bytes, cudaMemcpyHostToDevice, g->stream));
    sd_cuda_fwd f;
    memset(&f, 0, sizeof f);
    f.s = g->stream;
    f.eb = eb;
    f.segs = segs;
    f.n_segs = n_segs;
    f.map.block_tokens = g->base.pool.block_tokens;
    f.map.ext = (const int32_t *)(g->d_stage + pl->off_ext);
    int32_t li = 0;
    for (int32_t c0 = 0; c0 < pl->lo.n; c0 += g->act_rows) {
        f.first = c0;
        f.n = pl->lo.n - c0 < g->act_rows ? pl->lo.n - c0 : g->act_rows;
        f.skinny = sd_chunk_skinny(f.n, n_segs, pl->lo.has_tree);
        f.map.tok = (const sd_cuda_tokmap *)(g->d_stage + pl->off_tok) + c0;
        f.att = g->launch + li;
        for (f.n_att = 0; li < pl->lo.n_launch && g->launch[li].tok0 < c0 + f.n; li++) f.n_att++;
        SD_TRY(sd_body(g, &f));
        SD_TRY(sd_pass_logits(g, segs, n_segs, c0, f.n, dst, eb));
    }
    SD_CUDA_TRY(eb, cudaStreamSynchronize(g->stream));
    return SPECDEC_OK;
}

/* One pass over segments whose blocks are held (total tokens <= max_batch): on success
 * every runner ends at the row its segment ends at; on failure each gives back the
 * blocks past where its segment started (its kv_len is left there by the caller). */
static specdec_status sd_pass(sd_cuda_group *g, const sd_runner_seg *segs, int32_t n_segs, const sd_cuda_dst *dst,
                              sd_errbuf *eb) {
    if (g->lost)
        return sd_fail(eb, SPECDEC_ERR_DEVICE_LOST,
                       "CUDA runner: an earlier device error left the device unusable; free the engine");
    sd_pass_layout(g, segs, n_segs);
    specdec_status st = sd_group_note(g, sd_pass_run(g, segs, n_segs, dst, eb));
    if (st != SPECDEC_OK) {
        (void)cudaStreamSynchronize(g->stream); /* nothing in flight reads the staging buffers */
        (void)cudaGetLastError();               /* clear a non-sticky error so the next call starts clean */
        for (int32_t i = 0; i < n_segs; i++) {
            const sd_runner_seg *s = &segs[i];
            sd_kv_trim(&s->r->kv, &g->base.pool, s->parent ? s->pos + s->first : s->pos);
        }
        return st;
    }
    for (int32_t i = 0; i < n_segs; i++) {
        const sd_runner_seg *s = &segs[i];
        s->r->kv_len = s->parent ? s->pos + s->first + s->n : s->pos + s->n;
    }
    return SPECDEC_OK;
}

static specdec_status cuda_group_forward(sd_runner_group *gb, const sd_runner_seg *segs, int32_t n_segs) {
    return sd_pass((sd_cuda_group *)gb, segs, n_segs, NULL, &gb->err);
}

static specdec_status cuda_forward(sd_runner *base, const int32_t *tokens, int32_t n, int32_t pos,
                                   float *logits_out) {
    sd_cuda_runner *r = (sd_cuda_runner *)base;
    if (r->g->lost)
        return sd_fail(&base->err, SPECDEC_ERR_DEVICE_LOST,
                       "CUDA runner: an earlier device error left the device unusable; free the engine");
    if (!tokens || n <= 0)
        return sd_fail(&base->err, SPECDEC_ERR_INVALID_ARGUMENT, "CUDA forward: tokens %p, n_tokens %d",
                       (const void *)tokens, (int)n);
    if (n > base->max_batch)
        return sd_fail(&base->err, SPECDEC_ERR_INVALID_ARGUMENT, "CUDA forward: %d tokens > max_batch %d", (int)n,
                       (int)base->max_batch);
    if (pos < 0 || pos > base->kv_len)
        return sd_fail(&base->err, SPECDEC_ERR_INVALID_ARGUMENT, "CUDA forward: pos %d outside [0, kv_len %d]",
                       (int)pos, (int)base->kv_len);
    if ((int64_t)pos + n > base->n_ctx)
        return sd_fail(&base->err, SPECDEC_ERR_CONTEXT_FULL, "CUDA forward: positions %d..%d exceed n_ctx %d",
                       (int)pos, (int)(pos + n - 1), (int)base->n_ctx);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= base->n_vocab)
            return sd_fail(&base->err, SPECDEC_ERR_INVALID_ARGUMENT, "CUDA forward: token %d at index %d outside [0, %d)",
                           (int)tokens[i], (int)i, (int)base->n_vocab);
    sd_runner_truncate(base, pos); /* truncate first: a failure below leaves the cache at pos */
    specdec_status st = sd_runner_hold(base, pos + n);
    if (st != SPECDEC_OK) return st;
    const sd_runner_seg seg = {base, tokens, n, pos, NULL, 0, logits_out, NULL, NULL};
    return sd_pass(r->g, &seg, 1, NULL, &base->err);
}

/* Nodes first .. first + n - 1 of base->tree (validated and recorded by
 * sd_runner_forward_tree): one pass with a tree segment. */
static specdec_status cuda_forward_tree(sd_runner *base, int32_t first, int32_t n, float *logits) {
    sd_cuda_runner *r = (sd_cuda_runner *)base;
    const sd_runner_tree *tr = &base->tree;
    specdec_status st = sd_runner_hold(base, tr->base + first + n);
    if (st != SPECDEC_OK) return st;
    const sd_runner_seg seg = {base, tr->token + first, n, tr->base, tr->parent + first, first, logits, NULL, NULL};
    return sd_pass(r->g, &seg, 1, NULL, &base->err);
}

/* Move the kept path's rows down (every layer, K and V): moves keep[j] -> j in order
 * (keep[] increases, so a row is read before any move overwrites it), one kernel. */
static specdec_status cuda_compact_run(sd_cuda_runner *r, const int32_t *keep, int32_t n_keep, sd_errbuf *eb) {
    sd_cuda_group *g = r->g;
    const int32_t b = r->base.tree.base, bt = g->base.pool.block_tokens;
    int32_t *mv = (int32_t *)g->h_stage, n_moves = 0;
    for (int32_t j = 0; j < n_keep; j++) {
        if (keep[j] == j) continue;
        mv[2 * n_moves] = (int32_t)sd_kv_row(&r->base.kv, bt, b + keep[j]);
        mv[2 * n_moves + 1] = (int32_t)sd_kv_row(&r->base.kv, bt, b + j);
        n_moves++;
    }
    if (n_moves == 0) return SPECDEC_OK;
    SD_CUDA_TRY(eb, cudaSetDevice(g->device));
    SD_CUDA_TRY(eb, cudaMemcpyAsync(g->d_stage, mv, (size_t)n_moves * 2 * sizeof(int32_t), cudaMemcpyHostToDevice,
                                    g->stream));
    sd_cuda_kv_copy_args a;
    a.cache = g->kv_arena;
    a.mat_stride = g->kv_mat_bytes / sd_dtype_size(g->kv_dt);
    a.n_mats = 2 * g->cfg.n_layers;
    a.n_kv = g->cfg.n_kv_heads;
    a.hd = g->cfg.head_dim;
    a.cache_rows = g->cache_rows;
    a.kv_dt = g->kv_dt;
    a.moves = (const int32_t *)g->d_stage;
    a.n_moves = n_moves;
    SD_TRY(sd_cuda_kv_copy(&a, g->stream, eb));
    SD_CUDA_TRY(eb, cudaStreamSynchronize(g->stream));
    return SPECDEC_OK;
}

static specdec_status cuda_compact(sd_runner *base, const int32_t *keep, int32_t n_keep) {
    sd_cuda_runner *r = (sd_cuda_runner *)base;
    if (r->g->lost)
        return sd_fail(&base->err, SPECDEC_ERR_DEVICE_LOST,
                       "CUDA runner: an earlier device error left the device unusable; free the engine");
    specdec_status st = sd_group_note(r->g, cuda_compact_run(r, keep, n_keep, &base->err));
    if (st != SPECDEC_OK) {
        (void)cudaStreamSynchronize(r->g->stream);
        (void)cudaGetLastError();
        return st;
    }
    base->kv_len = base->tree.base + n_keep;
    return SPECDEC_OK;
}

static const sd_runner_vtbl sd_cuda_vtbl = {cuda_forward, cuda_destroy};
static const sd_runner_tree_ops sd_cuda_tree_ops = {cuda_forward_tree, cuda_compact};

/* A new sequence of the group: its table (host, and on the device). */
static specdec_status cuda_add_runner(sd_runner_group *gb, sd_runner **out, sd_errbuf *eb) {
    sd_cuda_group *g = (sd_cuda_group *)gb;
    *out = NULL;
    sd_cuda_runner *r = (sd_cuda_runner *)sd_calloc(1, sizeof *r);
    if (!r) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "CUDA runner: out of host memory (runner struct)");
    r->base.vt = &sd_cuda_vtbl;
    r->base.tree_ops = &sd_cuda_tree_ops;
    r->g = g;
    specdec_status st = sd_runner_group_attach(gb, &r->base, eb);
    if (st != SPECDEC_OK) {
        sd_free(r);
        return st;
    }
    const size_t bytes = (size_t)r->base.kv.cap * sizeof(int32_t);
    r->mirror = (int32_t *)sd_malloc(bytes);
    if (!r->mirror) st = sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "CUDA runner: out of host memory (block table)");
    cudaError_t e = st == SPECDEC_OK ? cudaSetDevice(g->device) : cudaSuccess;
    if (e == cudaSuccess && st == SPECDEC_OK) e = cudaMalloc((void **)&r->d_table, bytes);
    if (e != cudaSuccess) st = sd_cuda_fail(eb, e, "cudaMalloc(block table)", __FILE__, __LINE__);
    if (st != SPECDEC_OK) {
        (void)cudaGetLastError();
        cuda_destroy(&r->base);
        return st;
    }
    *out = &r->base;
    return SPECDEC_OK;
}

static const sd_runner_group_vtbl sd_cuda_group_vtbl = {cuda_add_runner, cuda_group_forward, cuda_group_destroy};

/* ---- creation ----------------------------------------------------------------- */

/* Plan (b.base == NULL) or place every device buffer. */
static void sd_plan_weights(sd_cuda_group *g, sd_bump *b, int tied) {
    const sd_config *c = &g->cfg;
    const size_t es = sd_dtype_size(g->wdt);
    const size_t H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size;
    for (int32_t l = 0; l < c->n_layers; l++) {
        sd_cuda_layer *L = &g->layers[l];
        L->attn_norm = (float *)sd_bump_take(b, H * 4);
        L->ffn_norm = (float *)sd_bump_take(b, H * 4);
        L->wqkv = sd_bump_take(b, (size_t)g->qkv_dim * H * es);
        L->bqkv = c->attention_bias ? (float *)sd_bump_take(b, (size_t)g->qkv_dim * 4) : NULL;
        L->wo = sd_bump_take(b, H * (size_t)g->q_dim * es);
        L->bo = g->has_bo ? (float *)sd_bump_take(b, H * 4) : NULL;
        L->wgu = sd_bump_take(b, 2 * I * H * es);
        L->wdown = sd_bump_take(b, H * I * es);
        const size_t D = (size_t)c->head_dim;
        L->q_norm = c->qk_norm ? (float *)sd_bump_take(b, D * 4) : NULL;
        L->k_norm = c->qk_norm ? (float *)sd_bump_take(b, D * 4) : NULL;
        L->attn_post_norm = c->sandwich_norms ? (float *)sd_bump_take(b, H * 4) : NULL;
        L->ffn_post_norm = c->sandwich_norms ? (float *)sd_bump_take(b, H * 4) : NULL;
        L->bgu = c->mlp_bias ? (float *)sd_bump_take(b, 2 * I * 4) : NULL;
        L->bdown = c->mlp_bias ? (float *)sd_bump_take(b, H * 4) : NULL;
    }
    g->tok_embd = sd_bump_take(b, (size_t)c->vocab_size * H * es);
    g->out_norm = (float *)sd_bump_take(b, H * 4);
    g->lm_head = tied ? g->tok_embd : sd_bump_take(b, (size_t)c->vocab_size * H * es);
}

/* The pool: K and V of layer l are matrices 2l and 2l + 1, kv_mat_bytes apart. */
static void sd_plan_kv(sd_cuda_group *g, sd_bump *b) {
    g->kv_mat_bytes = sd_align_up((size_t)g->cfg.n_kv_heads * (size_t)g->cache_rows * (size_t)g->cfg.head_dim *
                                  sd_dtype_size(g->kv_dt));
    for (int32_t l = 0; l < g->cfg.n_layers; l++) {
        g->layers[l].kc = sd_bump_take(b, g->kv_mat_bytes);
        g->layers[l].vc = sd_bump_take(b, g->kv_mat_bytes);
    }
}

static void sd_plan_act(sd_cuda_group *g, sd_bump *b) {
    const sd_config *c = &g->cfg;
    const size_t A = (size_t)g->act_rows, H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size;
    size_t kmax = H;
    if ((size_t)g->q_dim > kmax) kmax = (size_t)g->q_dim;
    if (I > kmax) kmax = I;
    g->x = (float *)sd_bump_take(b, A * H * 4);
    g->xn = (float *)sd_bump_take(b, A * H * 4);
    g->delta = (float *)sd_bump_take(b, A * H * 4);
    g->post = c->sandwich_norms ? (float *)sd_bump_take(b, A * H * 4) : NULL;
    g->qkv = (float *)sd_bump_take(b, A * (size_t)g->qkv_dim * 4);
    g->att = (float *)sd_bump_take(b, A * (size_t)g->q_dim * 4);
    g->gu = (float *)sd_bump_take(b, A * 2 * I * 4);
    g->h = (float *)sd_bump_take(b, A * I * 4);
    /* cuBLAS and the M-looped GEMM run only for chunks above the 17-row limit */
    g->xconv = A > SD_CUDA_SKINNY_MAX_M && g->wdt != SD_F32 ? sd_bump_take(b, A * kmax * sd_dtype_size(g->wdt)) : NULL;
    g->part = (float *)sd_bump_take(
        b, sd_cuda_attention_part_floats(g->att_rows, c->n_heads, c->head_dim, g->base.n_ctx) * sizeof(float));
    g->logits = (float *)sd_bump_take(b, (size_t)g->logit_rows * c->vocab_size * 4);
    const size_t rope_floats = (size_t)g->n_ropes * g->base.n_ctx * (size_t)(sd_cfg_rope_dim(c) / 2);
    g->rope_cos = (float *)sd_bump_take(b, rope_floats * 4);
    g->rope_sin = (float *)sd_bump_take(b, rope_floats * 4);
    g->d_stage = (char *)sd_bump_take(b, g->stage_bytes);
    g->blas_ws = sd_bump_take(b, SD_CUDA_BLAS_WS_BYTES);
}

/* Bytes of the pass description for max_batch tokens: token slots, key maps, tree
 * rows (SD_RUNNER_TREE_MAX per token at most), attention blocks. */
static size_t sd_stage_bytes(const sd_cuda_group *g) {
    const size_t B = (size_t)g->base.max_batch;
    size_t n = sd_align16((size_t)g->tok_slots * sizeof(int32_t));
    n += sd_align16(B * sizeof(sd_cuda_tokmap));
    n += sd_align16(B * SD_RUNNER_TREE_MAX * sizeof(int32_t));
    n += (size_t)sd_cuda_layout_blk_cap(g->base.max_batch, g->cfg.n_heads, g->cfg.n_kv_heads) * sizeof(sd_cuda_attblk);
    return sd_align16(n);
}

/* What the kernels cannot run (the configuration itself was validated by
 * sd_config_validate): a capability of this backend, not a fault of the model. */
static specdec_status sd_check_config(const sd_config *c, sd_errbuf *eb) {
    specdec_status st = sd_config_validate(c, "CUDA runner", eb);
    if (st != SPECDEC_OK) return st;
    if (c->head_dim > SD_CUDA_ATTN_MAX_HD)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "CUDA runner: head_dim %d above the attention kernel's %d",
                       (int)c->head_dim, SD_CUDA_ATTN_MAX_HD);
    return SPECDEC_OK;
}

/* What a group is created for (sd_create_common). */
typedef struct sd_group_spec {
    sd_dtype wdt;         /* projection weights on the device */
    sd_dtype kv_dt;       /* KV cache */
    int tied;             /* the LM head is the embedding */
    int has_bo;           /* o_proj carries a bias */
    int32_t n_ctx;        /* > 0 */
    int32_t max_batch;    /* 0 or > n_ctx: n_ctx */
    int32_t n_blocks;     /* KV pool */
    int32_t block_tokens;
    int32_t device;
} sd_group_spec;

/* The checks before anything is allocated; *max_batch gets the effective value. */
static specdec_status sd_create_check(const sd_config *cfg, const sd_group_spec *sp, int32_t *max_batch,
                                      sd_errbuf *eb) {
    specdec_status st = sd_check_config(cfg, eb);
    if (st != SPECDEC_OK) return st;
    if (sp->n_ctx <= 0 || sp->max_batch < 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "CUDA runner: n_ctx %d, max_batch %d", (int)sp->n_ctx,
                       (int)sp->max_batch);
    if (sp->block_tokens < 1 || sp->n_blocks < 1 || (int64_t)sp->n_blocks * sp->block_tokens > INT32_MAX)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "CUDA runner: KV pool of %d blocks of %d tokens",
                       (int)sp->n_blocks, (int)sp->block_tokens);
    *max_batch = sp->max_batch == 0 || sp->max_batch > sp->n_ctx ? sp->n_ctx : sp->max_batch;
    int n_dev = 0;
    if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
        (void)cudaGetLastError();
        return sd_fail(eb, SPECDEC_ERR_BACKEND_UNAVAILABLE, "CUDA runner: no CUDA device (driver missing or no GPU)");
    }
    if (sp->device < 0 || sp->device >= n_dev)
        return sd_fail(eb, SPECDEC_ERR_BACKEND_UNAVAILABLE, "CUDA runner: device %d requested, %d present",
                       (int)sp->device, n_dev);
    return SPECDEC_OK;
}

/* Attention scratch rows: as many query rows per launch as fit the budget, at least a
 * whole verify step. Row chunking never changes a row's result. */
static int32_t sd_att_rows(const sd_config *cfg, int32_t n_ctx, int32_t act_rows) {
    const size_t per_row = sd_cuda_attention_part_floats(1, cfg->n_heads, cfg->head_dim, n_ctx) * sizeof(float);
    size_t rows = SD_CUDA_ATT_SCRATCH_BUDGET / (per_row ? per_row : 1);
    const size_t min_rows = act_rows < SD_CUDA_SKINNY_MAX_M ? (size_t)act_rows : SD_CUDA_SKINNY_MAX_M;
    if (rows < min_rows) rows = min_rows;
    if (rows > (size_t)act_rows) rows = (size_t)act_rows;
    return (int32_t)rows;
}

/* The host side of a group: fields, sizes, host arrays, the pool's free list (NULL on
 * out of host memory). */
static sd_cuda_group *sd_group_new(const sd_config *cfg, const sd_group_spec *sp, int32_t max_batch) {
    sd_cuda_group *g = (sd_cuda_group *)sd_calloc(1, sizeof *g);
    if (!g) return NULL;
    g->base.vt = &sd_cuda_group_vtbl;
    g->base.backend = SPECDEC_BACKEND_CUDA;
    g->base.n_vocab = cfg->vocab_size;
    g->base.n_ctx = sp->n_ctx;
    g->base.max_batch = max_batch;
    g->base.capture_max = cfg->n_layers; /* hs[0..L] (sd_capture) */
    g->base.capture_width = cfg->hidden_size;
    g->cfg = *cfg;
    g->device = sp->device;
    g->wdt = sp->wdt;
    g->kv_dt = sp->kv_dt;
    g->has_bo = sp->has_bo;
    g->n_ropes = cfg->rope_local_theta > 0.0f ? 2 : 1;
    g->q_dim = cfg->n_heads * cfg->head_dim;
    g->kv_dim = cfg->n_kv_heads * cfg->head_dim;
    g->qkv_dim = g->q_dim + 2 * g->kv_dim;
    g->act_rows = max_batch < SD_CUDA_ACT_ROWS_MAX ? max_batch : SD_CUDA_ACT_ROWS_MAX;
    g->att_rows = sd_att_rows(cfg, sp->n_ctx, g->act_rows);
    g->logit_rows = g->act_rows < SD_CUDA_LM_ROWS_MAX ? g->act_rows : SD_CUDA_LM_ROWS_MAX;
    if (g->logit_rows < SD_CUDA_LOGIT_ROWS) g->logit_rows = SD_CUDA_LOGIT_ROWS;
    g->cache_rows = sp->n_blocks * sp->block_tokens;
    g->tok_slots = max_batch > SD_CUDA_TOK_SLOTS_MIN ? max_batch : SD_CUDA_TOK_SLOTS_MIN;
    g->stage_bytes = sd_stage_bytes(g);
    g->layers = (sd_cuda_layer *)sd_calloc(cfg->n_layers > 0 ? (size_t)cfg->n_layers : 1, sizeof(sd_cuda_layer));
    g->tseg = (int32_t *)sd_malloc((size_t)max_batch * sizeof(int32_t));
    g->launch = (sd_cuda_att_launch *)sd_malloc((size_t)max_batch * sizeof(sd_cuda_att_launch));
    sd_errbuf eb;
    if (!g->layers || !g->tseg || !g->launch ||
        sd_kv_pool_init(&g->base.pool, sp->n_blocks, sp->block_tokens, &eb) != SPECDEC_OK) {
        cuda_group_destroy(&g->base);
        return NULL;
    }
    return g;
}

#define SD_CREATE_CUDA(stmt)                                                        \
    do {                                                                            \
        cudaError_t e_ = (stmt);                                                    \
        if (e_ != cudaSuccess) {                                                    \
            specdec_status st_ = sd_cuda_fail(eb, e_, #stmt, __FILE__, __LINE__);   \
            (void)cudaGetLastError();                                               \
            return st_;                                                             \
        }                                                                           \
    } while (0)

/* The stream, the pinned staging buffer and the three device arenas (weights, KV
 * pool, activations), each sized by a planning pass and then placed; the pool is
 * zeroed (rows no sequence wrote read as zeros, never as stale bits). */
static specdec_status sd_create_arenas(sd_cuda_group *g, int tied, sd_errbuf *eb) {
    SD_CREATE_CUDA(cudaSetDevice(g->device));
    SD_CREATE_CUDA(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    SD_CREATE_CUDA(cudaMallocHost((void **)&g->h_stage, g->stage_bytes));
    sd_bump b = {NULL, 0};
    sd_plan_weights(g, &b, tied);
    g->w_bytes = b.off;
    SD_CREATE_CUDA(cudaMalloc(&g->w_arena, g->w_bytes));
    b.base = (char *)g->w_arena;
    b.off = 0;
    sd_plan_weights(g, &b, tied);

    b.base = NULL;
    b.off = 0;
    sd_plan_kv(g, &b);
    g->kv_bytes = b.off;
    SD_CREATE_CUDA(cudaMalloc(&g->kv_arena, g->kv_bytes));
    b.base = (char *)g->kv_arena;
    b.off = 0;
    sd_plan_kv(g, &b);
    SD_CREATE_CUDA(cudaMemsetAsync(g->kv_arena, 0, g->kv_bytes, g->stream));

    b.base = NULL;
    b.off = 0;
    sd_plan_act(g, &b);
    g->act_bytes = b.off;
    SD_CREATE_CUDA(cudaMalloc(&g->act_arena, g->act_bytes));
    b.base = (char *)g->act_arena;
    b.off = 0;
    sd_plan_act(g, &b);
    return SPECDEC_OK;
}

/* cuBLAS on the group's stream with our own workspace (it then never allocates while
 * a forward runs). */
static specdec_status sd_create_blas(sd_cuda_group *g, sd_errbuf *eb) {
    const sd_cublas_fns *blas = sd_cublas(); /* loaded here, by the first CUDA runner group */
    if (!blas) return sd_fail(eb, SPECDEC_ERR_BACKEND_UNAVAILABLE, "CUDA runner: %s", sd_cublas_load_error());
    cublasStatus_t bs = blas->create(&g->blas);
    if (bs == CUBLAS_STATUS_SUCCESS) bs = blas->set_stream(g->blas, g->stream);
    if (bs == CUBLAS_STATUS_SUCCESS) bs = blas->set_workspace(g->blas, g->blas_ws, SD_CUDA_BLAS_WS_BYTES);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return sd_cublas_fail(eb, bs, "cublasCreate/SetStream/SetWorkspace", __FILE__, __LINE__);
    return SPECDEC_OK;
}

/* RoPE tables with the CPU reference's functions (double, rounded once): the full
 * layers' rope and, for Gemma 3, the sliding layers' (core/sd_weights.h
 * sd_cfg_rope_params: the frequencies of this group's context). */
static specdec_status sd_create_rope(sd_cuda_group *g, sd_errbuf *eb) {
    const sd_config *cfg = &g->cfg;
    const int32_t half = sd_cfg_rope_dim(cfg) / 2, n_ctx = g->base.n_ctx;
    const size_t tab = (size_t)n_ctx * half;
    double *inv = (double *)sd_malloc((size_t)half * sizeof(double));
    float *cs = (float *)sd_malloc(tab * sizeof(float));
    float *sn = (float *)sd_malloc(tab * sizeof(float));
    cudaError_t e = cudaSuccess;
    for (int32_t k = 0; k < g->n_ropes && inv && cs && sn && e == cudaSuccess; k++) {
        sd_rope_spec rp;
        sd_cfg_rope_params(cfg, n_ctx, k, &rp);
        sd_cpu_rope_spec_inv_freq(&rp, inv);
        for (int32_t p = 0; p < n_ctx; p++)
            sd_cpu_rope_table_scaled(inv, half, p, rp.attn_factor, cs + (size_t)p * half, sn + (size_t)p * half);
        e = cudaMemcpy(g->rope_cos + k * tab, cs, tab * sizeof(float), cudaMemcpyHostToDevice);
        if (e == cudaSuccess) e = cudaMemcpy(g->rope_sin + k * tab, sn, tab * sizeof(float), cudaMemcpyHostToDevice);
    }
    const int oom = !inv || !cs || !sn;
    sd_free(inv);
    sd_free(cs);
    sd_free(sn);
    if (oom)
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "CUDA runner: out of host memory (rope tables, n_ctx %d)",
                       (int)n_ctx);
    SD_CREATE_CUDA(e);
    return SPECDEC_OK;
}
#undef SD_CREATE_CUDA

/* Everything but the weight values: the group, its stream, cuBLAS, the arenas, the
 * rope tables. On failure *out is NULL and nothing is left allocated. */
static specdec_status sd_create_common(const sd_config *cfg, const sd_group_spec *sp, sd_cuda_group **out,
                                       sd_errbuf *eb) {
    *out = NULL;
    int32_t max_batch = 0;
    specdec_status st = sd_create_check(cfg, sp, &max_batch, eb);
    if (st != SPECDEC_OK) return st;
    sd_cuda_group *g = sd_group_new(cfg, sp, max_batch);
    if (!g)
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "CUDA runner: out of host memory (%d layers, %d blocks)",
                       (int)cfg->n_layers, (int)sp->n_blocks);
    st = sd_create_arenas(g, sp->tied, eb);
    if (st == SPECDEC_OK) st = sd_create_blas(g, eb);
    if (st == SPECDEC_OK) st = sd_create_rope(g, eb);
    if (st != SPECDEC_OK) {
        cuda_group_destroy(&g->base);
        return st;
    }
    *out = g;
    return SPECDEC_OK;
}

/* Upload host tensor t (any dtype, `count` elements) into dst as dt, converting
 * through a bounded host staging buffer. */
extern "C" specdec_status sd_cuda_upload(void *dst, sd_dtype dt, const sd_tensor *t, size_t count, const char *what,
                                         int32_t layer, void *stage, size_t stage_elems, sd_errbuf *eb) {
    if (!t->data)
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "CUDA upload: tensor %s of layer %d is missing", what,
                       (int)layer);
    if (t->dtype == SD_MXFP4 || dt == SD_MXFP4) /* GPT-OSS experts: CPU only (refused at load before this) */
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "CUDA upload: tensor %s of layer %d is MXFP4 (CPU backend only)",
                       what, (int)layer);
    const size_t have = (size_t)t->shape[0] * (size_t)(t->ndim == 2 ? t->shape[1] : 1);
    if (have != count)
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH,
                       "CUDA upload: tensor %s of layer %d has %zu elements, the config needs %zu", what, (int)layer,
                       have, count);
    if (t->dtype == dt) {
        SD_CUDA_TRY(eb, cudaMemcpy(dst, t->data, count * sd_dtype_size(dt), cudaMemcpyHostToDevice));
        return SPECDEC_OK;
    }
    const size_t es = sd_dtype_size(dt);
    for (size_t i0 = 0; i0 < count; i0 += stage_elems) {
        const size_t k = count - i0 < stage_elems ? count - i0 : stage_elems;
        for (size_t i = 0; i < k; i++) {
            float v;
            const size_t s = i0 + i;
            if (t->dtype == SD_BF16) v = sd_bf16_to_f32(((const uint16_t *)t->data)[s]);
            else if (t->dtype == SD_F16) v = sd_f16_to_f32(((const uint16_t *)t->data)[s]);
            else v = ((const float *)t->data)[s];
            if (dt == SD_BF16) ((uint16_t *)stage)[i] = sd_f32_to_bf16(v);
            else if (dt == SD_F16) ((uint16_t *)stage)[i] = sd_f32_to_f16(v);
            else ((float *)stage)[i] = v;
        }
        SD_CUDA_TRY(eb, cudaMemcpy((char *)dst + i0 * es, stage, k * es, cudaMemcpyHostToDevice));
    }
    return SPECDEC_OK;
}

/* A norm weight (any dtype, `count` elements) as fp32 (offset + w) (Gemma: (1 + w), as
 * transformers computes it in fp32). */
extern "C" specdec_status sd_cuda_upload_norm(float *dst, const sd_tensor *t, size_t count, float offset,
                                              const char *what, int32_t layer, float *stage, sd_errbuf *eb) {
    if (!t->data || (size_t)t->shape[0] * (size_t)(t->ndim == 2 ? t->shape[1] : 1) != count)
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "CUDA upload: norm %s of layer %d is missing or not [%zu]", what,
                       (int)layer, count);
    for (size_t i = 0; i < count; i++) {
        float v;
        if (t->dtype == SD_BF16) v = sd_bf16_to_f32(((const uint16_t *)t->data)[i]);
        else if (t->dtype == SD_F16) v = sd_f16_to_f32(((const uint16_t *)t->data)[i]);
        else v = ((const float *)t->data)[i];
        stage[i] = offset != 0.0f ? offset + v : v; /* no offset: the bits as stored (-0 stays -0) */
    }
    const sd_tensor host = {stage, SD_F32, 1, {(int64_t)count, 1}, NULL};
    return sd_cuda_upload(dst, SD_F32, &host, count, what, layer, NULL, 0, eb); /* same dtype: one copy, no staging */
}

/* The optional tensors of layer l (q/k norms, sandwich norms, MLP biases). */
static specdec_status sd_upload_layer_extras(sd_cuda_group *g, const sd_layer *S, sd_cuda_layer *L, int32_t l,
                                             void *stage, size_t stage_elems, sd_errbuf *eb) {
    const sd_config *c = &g->cfg;
    const size_t H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size, D = (size_t)c->head_dim;
    const float off = c->norm_offset;
    float *st = (float *)stage;
    if (L->q_norm) SD_TRY(sd_cuda_upload_norm(L->q_norm, &S->q_norm, D, off, "q_norm", l, st, eb));
    if (L->k_norm) SD_TRY(sd_cuda_upload_norm(L->k_norm, &S->k_norm, D, off, "k_norm", l, st, eb));
    if (L->attn_post_norm)
        SD_TRY(sd_cuda_upload_norm(L->attn_post_norm, &S->attn_post_norm, H, off, "post_attention_layernorm", l, st, eb));
    if (L->ffn_post_norm)
        SD_TRY(sd_cuda_upload_norm(L->ffn_post_norm, &S->ffn_post_norm, H, off, "post_feedforward_layernorm", l, st, eb));
    if (L->bgu) {
        SD_TRY(sd_cuda_upload(L->bgu, SD_F32, &S->b_gate, I, "gate_proj.bias", l, stage, stage_elems, eb));
        SD_TRY(sd_cuda_upload(L->bgu + I, SD_F32, &S->b_up, I, "up_proj.bias", l, stage, stage_elems, eb));
        SD_TRY(sd_cuda_upload(L->bdown, SD_F32, &S->b_down, H, "down_proj.bias", l, stage, stage_elems, eb));
    }
    return SPECDEC_OK;
}

static specdec_status sd_upload_model(sd_cuda_group *g, const sd_weights *m, sd_errbuf *eb) {
    const sd_config *c = &g->cfg;
    const size_t H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size, hd = (size_t)c->head_dim;
    const size_t qd = (size_t)c->n_heads * hd, kd = (size_t)c->n_kv_heads * hd;
    const size_t es = sd_dtype_size(g->wdt);
    const size_t stage_elems = (size_t)1 << 20;
    void *stage = sd_malloc(stage_elems * 4);
    if (!stage) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "CUDA upload: out of host memory (staging buffer)");
    specdec_status st = SPECDEC_OK;
#define SD_UP(dst, dt, tensor, count, name, layer)                                                  \
    do {                                                                                            \
        st = sd_cuda_upload((dst), (dt), (tensor), (count), (name), (layer), stage, stage_elems, eb);    \
        if (st != SPECDEC_OK) goto done;                                                            \
    } while (0)
    for (int32_t l = 0; l < c->n_layers; l++) {
        const sd_layer *S = &m->layers[l];
        sd_cuda_layer *L = &g->layers[l];
        st = sd_cuda_upload_norm(L->attn_norm, &S->attn_norm, H, c->norm_offset, "attn_norm", l, (float *)stage, eb);
        if (st == SPECDEC_OK)
            st = sd_cuda_upload_norm(L->ffn_norm, &S->ffn_norm, H, c->norm_offset, "ffn_norm", l, (float *)stage, eb);
        if (st == SPECDEC_OK) st = sd_upload_layer_extras(g, S, L, l, stage, stage_elems, eb);
        if (st != SPECDEC_OK) goto done;
        SD_UP(L->wqkv, g->wdt, &S->wq, qd * H, "q_proj", l);
        SD_UP((char *)L->wqkv + qd * H * es, g->wdt, &S->wk, kd * H, "k_proj", l);
        SD_UP((char *)L->wqkv + (qd + kd) * H * es, g->wdt, &S->wv, kd * H, "v_proj", l);
        if (L->bqkv) {
            SD_UP(L->bqkv, SD_F32, &S->bq, qd, "q_proj.bias", l);
            SD_UP(L->bqkv + qd, SD_F32, &S->bk, kd, "k_proj.bias", l);
            SD_UP(L->bqkv + qd + kd, SD_F32, &S->bv, kd, "v_proj.bias", l);
        }
        SD_UP(L->wo, g->wdt, &S->wo, H * qd, "o_proj", l);
        if (L->bo) SD_UP(L->bo, SD_F32, &S->bo, H, "o_proj.bias", l);
        SD_UP(L->wgu, g->wdt, &S->w_gate, I * H, "gate_proj", l);
        SD_UP((char *)L->wgu + I * H * es, g->wdt, &S->w_up, I * H, "up_proj", l);
        SD_UP(L->wdown, g->wdt, &S->w_down, H * I, "down_proj", l);
    }
    SD_UP(g->tok_embd, g->wdt, &m->tok_embd, (size_t)c->vocab_size * H, "embed_tokens", -1);
    st = sd_cuda_upload_norm(g->out_norm, &m->out_norm, H, c->norm_offset, "norm", -1, (float *)stage, eb);
    if (st != SPECDEC_OK) goto done;
    if (g->lm_head != g->tok_embd) SD_UP(g->lm_head, g->wdt, &m->lm_head, (size_t)c->vocab_size * H, "lm_head", -1);
#undef SD_UP
done:
    sd_free(stage);
    return st;
}

/* Wait for the creation's uploads and fills: a pageable cudaMemcpy may return before
 * its DMA lands, and the group's stream does not wait for the legacy stream. */
static specdec_status sd_create_finish(sd_cuda_group *g, specdec_status st, sd_errbuf *eb) {
    if (st == SPECDEC_OK) {
        cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess) st = sd_cuda_fail(eb, e, "cudaDeviceSynchronize(create)", __FILE__, __LINE__);
    }
    if (st != SPECDEC_OK) {
        (void)cudaGetLastError();
        cuda_group_destroy(&g->base);
    }
    return st;
}

static sd_group_spec sd_spec_of(const sd_weights *w, int32_t n_ctx, int32_t max_batch, int32_t n_blocks,
                                int32_t block_tokens, int32_t device, int32_t keep_f32) {
    sd_group_spec sp;
    sp.wdt = w->dtype == SD_F32 && !keep_f32 ? SD_BF16 : w->dtype;
    sp.kv_dt = sp.wdt; /* the weight dtype (F16/BF16); F32 only when F32 weights are kept */
    sp.tied = w->cfg.tie_word_embeddings || w->lm_head.data == w->tok_embd.data;
    sp.has_bo = w->layers[0].bo.data != NULL;
    sp.n_ctx = n_ctx;
    sp.max_batch = max_batch;
    sp.n_blocks = n_blocks;
    sp.block_tokens = block_tokens;
    sp.device = device;
    return sp;
}

extern "C" specdec_status sd_cuda_group_create(const sd_weights *w, int32_t n_ctx, int32_t max_batch, int32_t n_blocks,
                                               int32_t block_tokens, int32_t device, int32_t keep_f32,
                                               sd_runner_group **out, sd_errbuf *eb) {
    if (out) *out = NULL;
    if (!w || !out)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_group_create: weights %p, out %p", (const void *)w,
                       (void *)out);
    specdec_status st = sd_weights_validate(w, eb);
    if (st != SPECDEC_OK) return st;
    /* README "Model families": MoE, OLMo-2, OLMoE, Granite and SmolLM3's features run on the CPU
     * backend only; no CUDA kernels for them yet */
    const char *cpu_only = w->mtp_eh_proj.data ? "an MTP layer (its rows enter with hidden states)" : sd_cfg_cpu_only(&w->cfg);
    if (cpu_only)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "%s: %s are not supported by the CUDA backend yet (use --backend cpu)",
                       w->cfg.architecture, cpu_only);
    /* Ministral 3's query scale is 1 below q_pos_orig: exact on CUDA (no kernel for it) while every position is */
    if (w->cfg.q_pos_beta > 0.0f && n_ctx > w->cfg.q_pos_orig)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "%s: a context of %d tokens passes rope_parameters."
                       "original_max_position_embeddings %d, beyond which the queries are scaled by position: the CUDA "
                       "backend runs it up to %d tokens (use --ctx %d, or --backend cpu)", w->cfg.architecture,
                       (int)n_ctx, (int)w->cfg.q_pos_orig, (int)w->cfg.q_pos_orig, (int)w->cfg.q_pos_orig);
    const sd_group_spec sp = sd_spec_of(w, n_ctx, max_batch, n_blocks, block_tokens, device, keep_f32);
    sd_cuda_group *g = NULL;
    st = sd_create_common(&w->cfg, &sp, &g, eb);
    if (st != SPECDEC_OK) return st;
    st = sd_create_finish(g, sd_upload_model(g, w, eb), eb);
    if (st != SPECDEC_OK) return st;
    *out = &g->base;
    return SPECDEC_OK;
}

/* A standalone runner: the only sequence of its private group g, which it owns; its
 * device table is the identity over all its blocks from now on (see the header). On
 * failure the group is destroyed too. */
static specdec_status sd_make_standalone(sd_cuda_group *g, sd_runner **out, sd_errbuf *eb) {
    specdec_status st = cuda_add_runner(&g->base, out, eb);
    if (st != SPECDEC_OK) {
        cuda_group_destroy(&g->base);
        return st;
    }
    sd_cuda_runner *r = (sd_cuda_runner *)*out;
    r->owns_group = 1;
    for (int32_t i = 0; i < r->base.kv.cap; i++) r->mirror[i] = i;
    r->mirror_n = r->base.kv.cap;
    /* On the group's own (non-blocking) stream, then waited for: a plain cudaMemcpy runs
     * on the legacy stream, which the group's stream and the device round's do not wait
     * for, and from pageable memory it may return before its DMA lands (issue 24 (d)). */
    cudaError_t e = cudaMemcpyAsync(r->d_table, r->mirror, (size_t)r->base.kv.cap * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, g->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g->stream);
    if (e != cudaSuccess) {
        st = sd_cuda_fail(eb, e, "cudaMemcpyAsync(identity block table)", __FILE__, __LINE__);
        (void)cudaGetLastError();
        cuda_destroy(*out);
        *out = NULL;
        return st;
    }
    return SPECDEC_OK;
}

extern "C" specdec_status sd_cuda_runner_create(const sd_weights *w, int32_t n_ctx, int32_t max_batch, int32_t device,
                                                int32_t keep_f32, sd_runner **out, sd_errbuf *eb) {
    if (out) *out = NULL;
    if (!out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_runner_create: out is NULL");
    const int32_t bt = SD_KV_DEFAULT_BLOCK_TOKENS;
    sd_runner_group *g = NULL;
    specdec_status st =
        sd_cuda_group_create(w, n_ctx, max_batch, n_ctx > 0 ? sd_kv_blocks_for(n_ctx, bt) : 0, bt, device, keep_f32, &g, eb);
    if (st != SPECDEC_OK) return st;
    return sd_make_standalone((sd_cuda_group *)g, out, eb);
}

/* Random weights (and a random KV pool) for a synthetic model, on the device. */
static specdec_status sd_fill_synthetic(sd_cuda_group *g, uint64_t seed, sd_errbuf *eb) {
    const sd_config *cfg = &g->cfg;
    const sd_dtype wdt = g->wdt;
    const size_t H = (size_t)cfg->hidden_size, I = (size_t)cfg->intermediate_size;
    uint64_t k = seed * 1000003ull;
#define SD_FILL(p, dt, count, mean, std) SD_TRY(sd_cuda_fill_normal((p), (dt), (count), k++, (mean), (std), g->stream, eb))
    for (int32_t l = 0; l < cfg->n_layers; l++) {
        sd_cuda_layer *L = &g->layers[l];
        SD_FILL(L->attn_norm, SD_F32, H, 1.0f, 0.0f);
        SD_FILL(L->ffn_norm, SD_F32, H, 1.0f, 0.0f);
        SD_FILL(L->wqkv, wdt, (size_t)g->qkv_dim * H, 0.0f, 0.02f);
        if (L->bqkv) SD_FILL(L->bqkv, SD_F32, (size_t)g->qkv_dim, 0.0f, 0.02f);
        SD_FILL(L->wo, wdt, H * (size_t)g->q_dim, 0.0f, 0.02f);
        SD_FILL(L->wgu, wdt, 2 * I * H, 0.0f, 0.02f);
        SD_FILL(L->wdown, wdt, H * I, 0.0f, 0.02f);
        const size_t D = (size_t)cfg->head_dim;
        if (L->q_norm) SD_FILL(L->q_norm, SD_F32, D, 1.0f, 0.0f);
        if (L->k_norm) SD_FILL(L->k_norm, SD_F32, D, 1.0f, 0.0f);
        if (L->attn_post_norm) SD_FILL(L->attn_post_norm, SD_F32, H, 1.0f, 0.0f);
        if (L->ffn_post_norm) SD_FILL(L->ffn_post_norm, SD_F32, H, 1.0f, 0.0f);
        if (L->bgu) SD_FILL(L->bgu, SD_F32, 2 * I, 0.0f, 0.02f);
        if (L->bdown) SD_FILL(L->bdown, SD_F32, H, 0.0f, 0.02f);
    }
    SD_FILL(g->tok_embd, wdt, (size_t)cfg->vocab_size * H, 0.0f, 0.02f);
    SD_FILL(g->out_norm, SD_F32, H, 1.0f, 0.0f);
    if (g->lm_head != g->tok_embd) SD_FILL(g->lm_head, wdt, (size_t)cfg->vocab_size * H, 0.0f, 0.02f);
    /* A defined KV cache, so timing at a long context reads real numbers. */
    SD_FILL(g->kv_arena, wdt, g->kv_bytes / sd_dtype_size(wdt), 0.0f, 1.0f);
#undef SD_FILL
    return SPECDEC_OK;
}

extern "C" specdec_status sd_cuda_runner_create_synthetic(const sd_config *cfg, sd_dtype wdt, int32_t n_ctx,
                                                          int32_t max_batch, int32_t device, uint64_t seed,
                                                          sd_runner **out, sd_errbuf *eb) {
    if (out) *out = NULL;
    if (!cfg || !out)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_runner_create_synthetic: NULL argument");
    const int32_t bt = SD_KV_DEFAULT_BLOCK_TOKENS;
    sd_group_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.wdt = wdt;
    sp.kv_dt = wdt;
    sp.tied = cfg->tie_word_embeddings;
    sp.n_ctx = n_ctx;
    sp.max_batch = max_batch;
    sp.n_blocks = n_ctx > 0 ? sd_kv_blocks_for(n_ctx, bt) : 1;
    sp.block_tokens = bt;
    sp.device = device;
    sd_cuda_group *g = NULL;
    specdec_status st = sd_create_common(cfg, &sp, &g, eb);
    if (st != SPECDEC_OK) return st;
    st = sd_create_finish(g, sd_fill_synthetic(g, seed, eb), eb);
    if (st != SPECDEC_OK) return st;
    return sd_make_standalone(g, out, eb);
}

/* ---- accessors for tests, benchmarks and the device round ---------------------- */
static sd_cuda_group *sd_group_of(sd_runner *r) { return ((sd_cuda_runner *)r)->g; }
extern "C" cudaStream_t sd_cuda_runner_stream(sd_runner *r) { return sd_group_of(r)->stream; }
extern "C" int32_t *sd_cuda_runner_device_tokens(sd_runner *r) { return (int32_t *)sd_group_of(r)->d_stage; }
extern "C" const float *sd_cuda_runner_device_logits(sd_runner *r) { return sd_group_of(r)->logits; }
extern "C" int32_t sd_cuda_runner_act_rows(sd_runner *r) { return sd_group_of(r)->act_rows; }
extern "C" int sd_cuda_runner_lost(sd_runner *r) { return sd_group_of(r)->lost; }
extern "C" size_t sd_cuda_runner_weight_bytes(sd_runner *r) { return sd_group_of(r)->w_bytes; }
extern "C" size_t sd_cuda_runner_kv_bytes_per_token(sd_runner *r) {
    const sd_cuda_group *g = sd_group_of(r);
    return (size_t)2 * g->cfg.n_layers * g->kv_dim * sd_dtype_size(g->kv_dt);
}
extern "C" int sd_cuda_runner_standalone(sd_runner *r) {
    return r && r->backend == SPECDEC_BACKEND_CUDA && ((sd_cuda_runner *)r)->owns_group;
}
extern "C" int sd_cuda_runner_device(sd_runner *r) { return sd_group_of(r)->device; }
extern "C" sd_dtype sd_cuda_runner_weight_dtype(sd_runner *r) { return sd_group_of(r)->wdt; }
extern "C" const void *sd_cuda_runner_device_embed(sd_runner *r, sd_dtype *dt) {
    if (dt) *dt = sd_group_of(r)->wdt;
    return sd_group_of(r)->tok_embd;
}

/* A CHAIN-mode body over the n ids in the device token buffer of a standalone runner
 * (its identity table): positions pos (+ *pos_dev). */
static specdec_status sd_enqueue_chain(sd_cuda_runner *r, int32_t n, int32_t pos, const int64_t *pos_dev,
                                       cudaStream_t s) {
    sd_cuda_group *g = r->g;
    sd_cuda_fwd f;
    memset(&f, 0, sizeof f);
    f.first = 0;
    f.n = n;
    f.skinny = sd_chunk_skinny(n, 1, 0);
    f.map.block_tokens = g->base.pool.block_tokens;
    f.map.table = r->d_table;
    f.map.pos0 = pos;
    f.map.pos_dev = pos_dev;
    f.s = s;
    f.eb = &r->base.err;
    return sd_body(g, &f);
}

extern "C" specdec_status sd_cuda_runner_enqueue(sd_runner *base, int32_t n, int32_t pos, int want_logits) {
    sd_cuda_runner *r = (sd_cuda_runner *)base;
    sd_cuda_group *g = r->g;
    if (g->lost) return sd_fail(&base->err, SPECDEC_ERR_DEVICE_LOST, "CUDA runner: device lost");
    if (!r->owns_group || n <= 0 || n > g->act_rows || n > g->tok_slots || pos < 0 || (int64_t)pos + n > base->n_ctx)
        return sd_fail(&base->err, SPECDEC_ERR_INVALID_ARGUMENT,
                       "sd_cuda_runner_enqueue: n %d (max %d), pos %d, n_ctx %d, %s runner", (int)n, (int)g->act_rows,
                       (int)pos, (int)base->n_ctx, r->owns_group ? "standalone" : "grouped");
    specdec_status st = sd_enqueue_chain(r, n, pos, NULL, g->stream);
    if (st == SPECDEC_OK && want_logits) {
        const int32_t lr = n < SD_CUDA_SKINNY_ROWS ? n : SD_CUDA_SKINNY_ROWS;
        st = sd_lm_head(g, n - lr, lr, g->stream, &base->err);
    }
    return sd_group_note(g, st);
}

extern "C" specdec_status sd_cuda_runner_enqueue_dpos(sd_runner *base, int32_t n, const int64_t *pos_base,
                                                      int32_t pos_off, int32_t logits_rows, cudaStream_t stream) {
    sd_cuda_runner *r = (sd_cuda_runner *)base;
    sd_cuda_group *g = r->g;
    if (g->lost) return sd_fail(&base->err, SPECDEC_ERR_DEVICE_LOST, "CUDA runner: device lost");
    if (!r->owns_group || n <= 0 || n > SD_CUDA_SKINNY_MAX_M || n > g->act_rows || n > base->n_ctx || !pos_base ||
        logits_rows < 0 || logits_rows > n)
        return sd_fail(&base->err, SPECDEC_ERR_INVALID_ARGUMENT,
                       "sd_cuda_runner_enqueue_dpos: n %d (max %d), position %p, logits rows %d, %s runner", (int)n,
                       (int)(g->act_rows < SD_CUDA_SKINNY_MAX_M ? g->act_rows : SD_CUDA_SKINNY_MAX_M),
                       (const void *)pos_base, (int)logits_rows, r->owns_group ? "standalone" : "grouped");
    specdec_status st = sd_enqueue_chain(r, n, pos_off, pos_base, stream);
    if (st == SPECDEC_OK && logits_rows > 0) st = sd_lm_head(g, n - logits_rows, logits_rows, stream, &base->err);
    return sd_group_note(g, st);
}

/* The device round's forwards wrote rows [kv_len, len) (or the round rolled back):
 * the private pool hands blocks out in order, so the host table stays the identity
 * the device table already holds. */
extern "C" void sd_cuda_runner_note_kv(sd_runner *r, int32_t len) {
    len = len < 0 ? 0 : len > r->n_ctx ? r->n_ctx : len;
    if (len <= r->kv_len) {
        sd_runner_truncate(r, len);
        return;
    }
    if (r->group && sd_kv_hold(&r->kv, &r->group->pool, len, NULL) != SPECDEC_OK) return; /* cannot happen: see above */
    r->kv_len = len;
}

/* ---- the batched device round's forward ------------------------------------------ */
extern "C" int sd_cuda_group_device(const sd_runner_group *g) {
    return g && g->vt == &sd_cuda_group_vtbl ? ((const sd_cuda_group *)g)->device : -1;
}
extern "C" cudaStream_t sd_cuda_group_stream(const sd_runner_group *g) {
    return g && g->vt == &sd_cuda_group_vtbl ? ((const sd_cuda_group *)g)->stream : (cudaStream_t)0;
}

/* One native pass of sd_cuda_group_forward_device (sd_runner_pass_fn). */
static specdec_status sd_device_pass(void *ctx, sd_runner_group *gb, const sd_runner_seg *segs, int32_t n_segs) {
    return sd_pass((sd_cuda_group *)gb, segs, n_segs, (const sd_cuda_dst *)ctx, &gb->err);
}

extern "C" specdec_status sd_cuda_group_forward_device(const sd_runner_seg *segs, int32_t n_segs, int32_t tail,
                                                       sd_errbuf *eb) {
    if (!segs || n_segs < 1 || !segs[0].r || sd_cuda_group_device(segs[0].r->group) < 0 || tail < 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "CUDA device forward: %d segments, tail %d: needs runners of one CUDA group", (int)n_segs,
                       (int)tail);
    sd_cuda_dst dst;
    dst.tail = tail;
    /* core checks that every runner is of the first one's group */
    return sd_runner_forward_batch_via(segs, n_segs, sd_device_pass, &dst, eb);
}
