/* sd_cuda_runner.cu — the CUDA runner: one model's weights, KV cache and activations on
 * one device, and the forward pass built from the kernels of kernels/cuda/.
 *
 * Memory (all allocated in create, nothing in forward):
 * - weights: ONE cudaMalloc arena. Per layer: attn_norm, ffn_norm (fp32), W_qkv =
 *   [W_q; W_k; W_v] as one [(H+2KV)*hd, hidden] matrix with its fp32 bias (Qwen2),
 *   W_o (with its fp32 bias for Llama attention_bias), W_gu = [W_gate; W_up]
 *   [2*inter, hidden], W_down; then the embedding, the final norm and the LM head (shared with the embedding when tied). Projections
 *   stay in the checkpoint dtype; F32 checkpoints become BF16 unless keep_f32.
 * - KV cache: one arena, per layer K and V [n_kv][n_ctx][hd] in the weight dtype
 *   (F32 only with keep_f32); rollback just lowers kv_len.
 * - activations for act_rows = min(max_batch, 512) rows (longer prompts are run in
 *   chunks of act_rows against the cache), rope cos/sin tables [n_ctx, hd/2] built
 *   with the CPU reference's own functions (bitwise the same angles), attention
 *   split scratch, the cuBLAS workspace, SD_CUDA_LOGIT_ROWS (a whole verify pass) rows of
 *   logits, the token ids.
 * Forward of n rows: n <= SD_CUDA_SKINNY_MAX_M uses the batch-invariant skinny GEMM
 * for every projection (decode and verify: a position's logits are bitwise the
 * same alone or inside a k-token step); longer chunks (prefill) use cuBLAS. The LM
 * head always runs through the skinny GEMM, 16 rows at a time, and the logits are
 * copied to the host (the CPU verifier reads them until the fused verifier lands).
 * sd_cuda_runner_enqueue_dpos is the device-resident round's variant: positions read
 * from device memory (graph replay), any stream, logits left on the device.
 * Every CUDA call is checked; a sticky error sets `lost` and every later forward
 * returns SPECDEC_ERR_DEVICE_LOST; the runner can always be destroyed. */
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <string.h>

#include "sd_cuda_common.cuh"
#include "sd_cuda_backend.h"
#include "sd_cuda_runner.h"

extern "C" {
#include "sd_alloc.h"
#include "sd_cpu_rope.h"
}

#define SD_CUDA_ACT_ROWS_MAX 512
#define SD_CUDA_ATT_SCRATCH_BUDGET ((size_t)64 << 20)
#define SD_CUDA_BLAS_WS_BYTES ((size_t)32 << 20)
#define SD_CUDA_ALIGN 256
/* Logits rows kept on the device: a whole verify pass (γ + 1 <= SD_CUDA_SKINNY_MAX_M)
 * for the device round; the host path uses the first SD_CUDA_SKINNY_ROWS. */
#define SD_CUDA_LOGIT_ROWS (SD_CUDA_SKINNY_MAX_M > SD_CUDA_SKINNY_ROWS ? SD_CUDA_SKINNY_MAX_M : SD_CUDA_SKINNY_ROWS)

typedef struct sd_cuda_layer {
    float *attn_norm;  /* [hidden] */
    float *ffn_norm;   /* [hidden] */
    void *wqkv;        /* [q_dim + 2 kv_dim, hidden] */
    float *bqkv;       /* [q_dim + 2 kv_dim] or NULL */
    void *wo;          /* [hidden, q_dim] */
    float *bo;         /* [hidden] o_proj bias (Llama attention_bias) or NULL */
    void *wgu;         /* [2 inter, hidden] */
    void *wdown;       /* [hidden, inter] */
    void *kc, *vc;     /* [n_kv][n_ctx][hd] in kv_dt */
} sd_cuda_layer;

typedef struct sd_cuda_runner {
    sd_runner base; /* must be first: the engine sees an sd_runner * */
    sd_config cfg;
    int device;
    sd_dtype wdt, kv_dt;
    int32_t q_dim, kv_dim, qkv_dim;
    int32_t act_rows;  /* rows of every activation buffer */
    int32_t att_rows;  /* query rows per attention launch (scratch size) */
    int lost;
    int has_bo;        /* o_proj carries a bias */
    cudaStream_t stream;
    cublasHandle_t blas;
    void *w_arena; size_t w_bytes;
    void *kv_arena; size_t kv_bytes;
    void *act_arena; size_t act_bytes;
    sd_cuda_layer *layers;  /* host array [n_layers] of device pointers */
    void *tok_embd;    /* [vocab, hidden] */
    float *out_norm;   /* [hidden] */
    void *lm_head;     /* [vocab, hidden]; == tok_embd when tied */
    float *x, *xn, *delta;  /* [act_rows, hidden] */
    float *qkv;        /* [act_rows, qkv_dim] */
    float *att;        /* [act_rows, q_dim] */
    float *gu;         /* [act_rows, 2 inter] */
    float *h;          /* [act_rows, inter] */
    void *xconv;       /* [act_rows, max(hidden, q_dim, inter)] in wdt (cuBLAS input) */
    float *part;       /* attention split scratch for att_rows queries */
    float *logits;     /* [SD_CUDA_LOGIT_ROWS, vocab] */
    float *rope_cos, *rope_sin; /* [n_ctx, hd/2] */
    int32_t *tokens;   /* [max_batch] */
    void *blas_ws;     /* SD_CUDA_BLAS_WS_BYTES */
} sd_cuda_runner;

static size_t sd_align_up(size_t n) { return (n + SD_CUDA_ALIGN - 1) / SD_CUDA_ALIGN * SD_CUDA_ALIGN; }

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

/* Record a CUDA failure on the runner; a sticky one makes the runner lost. */
static specdec_status sd_runner_note(sd_cuda_runner *r, specdec_status st) {
    if (st == SPECDEC_ERR_DEVICE_LOST) r->lost = 1;
    return st;
}

static void cuda_destroy(sd_runner *base) {
    sd_cuda_runner *r = (sd_cuda_runner *)base;
    if (!r) return;
    /* Errors are ignored here: after a sticky error frees fail, and there is nothing
     * else to do; the handle must still be releasable. */
    (void)cudaSetDevice(r->device);
    if (r->stream) (void)cudaStreamSynchronize(r->stream);
    if (r->blas) (void)cublasDestroy(r->blas);
    if (r->stream) (void)cudaStreamDestroy(r->stream);
    if (r->w_arena) (void)cudaFree(r->w_arena);
    if (r->kv_arena) (void)cudaFree(r->kv_arena);
    if (r->act_arena) (void)cudaFree(r->act_arena);
    (void)cudaGetLastError();
    sd_free(r->layers);
    sd_free(r);
}

/* ---- the forward pass --------------------------------------------------------- */

/* `s`: the stream to enqueue on (r->stream, or a device round's stream); cuBLAS is
 * bound to r->stream, so only r->stream may take the n > SD_CUDA_SKINNY_MAX_M path. */
static specdec_status sd_gemm(sd_cuda_runner *r, const void *w, const float *bias, const float *x, float *y,
                              int32_t n, int32_t n_out, int32_t k_in, int32_t epi, cudaStream_t s) {
    sd_cuda_gemm_args g;
    memset(&g, 0, sizeof g);
    g.w = w;
    g.wdt = r->wdt;
    g.bias = bias;
    g.x = x;
    g.y = y;
    g.ldy = n_out;
    g.n = n;
    g.n_out = n_out;
    g.k_in = k_in;
    g.epi = epi;
    if (n <= SD_CUDA_SKINNY_MAX_M) return sd_cuda_gemm_skinny(&g, s, &r->base.err);
    g.xconv = r->xconv;
    return sd_cuda_gemm_blas(r->blas, &g, r->stream, &r->base.err);
}

static specdec_status sd_rmsnorm(sd_cuda_runner *r, const float *delta, const float *w, int32_t n, cudaStream_t s) {
    sd_cuda_rmsnorm_args a;
    a.x = r->x;
    a.delta = delta;
    a.w = w;
    a.out = r->xn;
    a.n = n;
    a.dim = r->cfg.hidden_size;
    a.eps = r->cfg.rms_norm_eps;
    return sd_cuda_rmsnorm(&a, s, &r->base.err);
}

#define SD_TRY(expr)                                  \
    do {                                              \
        specdec_status sd_st_ = (expr);               \
        if (sd_st_ != SPECDEC_OK) return sd_st_;      \
    } while (0)

/* RoPE + cache append, then attention of layer L for n rows at positions pos.. (dpos:
 * *dpos + pos.. on the device, one launch) into r->att. */
static specdec_status sd_attend(sd_cuda_runner *r, const sd_cuda_layer *L, int32_t n, int32_t pos,
                                const int64_t *dpos, cudaStream_t s) {
    const sd_config *c = &r->cfg;
    sd_errbuf *eb = &r->base.err;
    sd_cuda_rope_args ra;
    ra.qkv = r->qkv;
    ra.ldqkv = r->qkv_dim;
    ra.n = n;
    ra.pos0 = pos;
    ra.pos_dev = dpos;
    ra.n_heads = c->n_heads;
    ra.n_kv = c->n_kv_heads;
    ra.hd = c->head_dim;
    ra.cos_t = r->rope_cos;
    ra.sin_t = r->rope_sin;
    ra.k_cache = L->kc;
    ra.v_cache = L->vc;
    ra.kv_dt = r->kv_dt;
    ra.n_ctx = r->base.n_ctx;
    SD_TRY(sd_cuda_rope_kv(&ra, s, eb));
    sd_cuda_attention_args aa;
    aa.q = r->qkv;
    aa.ldq = r->qkv_dim;
    aa.k_cache = L->kc;
    aa.v_cache = L->vc;
    aa.kv_dt = r->kv_dt;
    aa.n_ctx = r->base.n_ctx;
    aa.n = n;
    aa.pos0 = pos;
    aa.pos_dev = dpos;
    aa.n_heads = c->n_heads;
    aa.n_kv = c->n_kv_heads;
    aa.hd = c->head_dim;
    aa.part = r->part;
    aa.out = r->att;
    aa.ldo = r->q_dim;
    if (dpos) return sd_cuda_attention(&aa, s, eb); /* n <= SD_CUDA_SKINNY_MAX_M <= att_rows: one launch */
    for (int32_t q0 = 0; q0 < n; q0 += r->att_rows) {
        aa.q = r->qkv + (size_t)q0 * r->qkv_dim;
        aa.n = n - q0 < r->att_rows ? n - q0 : r->att_rows;
        aa.pos0 = pos + q0;
        aa.out = r->att + (size_t)q0 * r->q_dim;
        SD_TRY(sd_cuda_attention(&aa, s, eb));
    }
    return SPECDEC_OK;
}

/* n rows (n <= act_rows) whose ids are at tokens[first..], positions pos..pos+n-1
 * (with dpos != NULL: *dpos + pos .. on the device, n <= SD_CUDA_SKINNY_MAX_M), on
 * stream s: leaves the final-normed hidden states in r->xn.
 * Fused (decode / verify with BF16/F16 weights, the tensor-core skinny GEMM): the o and
 * down projections add into the residual stream x in their epilogue (the same fp32
 * add the RMSNorm kernel does with a stored delta, so bitwise the same result) and the
 * gate/up projection applies SwiGLU in its epilogue (no gu round trip): 9 launches
 * per layer instead of 10 (docs/GPU_FORWARD.md). Prefill (cuBLAS) and F32 weights run
 * unfused. */
static specdec_status sd_body(sd_cuda_runner *r, int32_t first, int32_t n, int32_t pos, const int64_t *dpos,
                              cudaStream_t s) {
    const sd_config *c = &r->cfg;
    const int32_t H = c->hidden_size, I = c->intermediate_size;
    sd_errbuf *eb = &r->base.err;
    const int fuse = n <= SD_CUDA_SKINNY_MAX_M && r->wdt != SD_F32;
    float *res = fuse ? r->x : r->delta;              /* where o / down write */
    const int32_t res_epi = fuse ? SD_GEMM_EPI_ADD : SD_GEMM_EPI_STORE;
    const float *pend = NULL;                         /* delta the next RMSNorm adds */
    SD_TRY(sd_cuda_embed(r->tok_embd, r->wdt, r->tokens + first, n, H, r->x, s, eb));
    for (int32_t l = 0; l < c->n_layers; l++) {
        const sd_cuda_layer *L = &r->layers[l];
        SD_TRY(sd_rmsnorm(r, pend, L->attn_norm, n, s));
        SD_TRY(sd_gemm(r, L->wqkv, L->bqkv, r->xn, r->qkv, n, r->qkv_dim, H, SD_GEMM_EPI_STORE, s));
        SD_TRY(sd_attend(r, L, n, pos, dpos, s));
        SD_TRY(sd_gemm(r, L->wo, L->bo, r->att, res, n, H, r->q_dim, res_epi, s));
        SD_TRY(sd_rmsnorm(r, fuse ? NULL : r->delta, L->ffn_norm, n, s));
        if (fuse) {
            SD_TRY(sd_gemm(r, L->wgu, NULL, r->xn, r->h, n, I, H, SD_GEMM_EPI_SWIGLU, s));
        } else {
            SD_TRY(sd_gemm(r, L->wgu, NULL, r->xn, r->gu, n, 2 * I, H, SD_GEMM_EPI_STORE, s));
            SD_TRY(sd_cuda_swiglu(r->gu, r->h, n, I, s, eb));
        }
        SD_TRY(sd_gemm(r, L->wdown, NULL, r->h, res, n, H, I, res_epi, s));
        pend = fuse ? NULL : r->delta;
    }
    return sd_rmsnorm(r, pend, r->out_norm, n, s);
}

/* LM head of rows [r0, r0 + rows) of r->xn (rows <= SD_CUDA_LOGIT_ROWS) into r->logits. */
static specdec_status sd_lm_head(sd_cuda_runner *r, int32_t r0, int32_t rows, cudaStream_t s) {
    const int32_t H = r->cfg.hidden_size, V = r->cfg.vocab_size;
    sd_cuda_gemm_args g;
    memset(&g, 0, sizeof g);
    g.w = r->lm_head;
    g.wdt = r->wdt;
    g.x = r->xn + (size_t)r0 * H;
    g.y = r->logits;
    g.ldy = V;
    g.n = rows;
    g.n_out = V;
    g.k_in = H;
    return sd_cuda_gemm_skinny(&g, s, &r->base.err);
}

static specdec_status cuda_forward_impl(sd_cuda_runner *r, const int32_t *tokens, int32_t n, int32_t pos,
                                        float *logits_out) {
    sd_errbuf *eb = &r->base.err;
    const int32_t V = r->cfg.vocab_size;
    SD_CUDA_TRY(eb, cudaSetDevice(r->device));
    SD_CUDA_TRY(eb, cudaMemcpyAsync(r->tokens, tokens, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice, r->stream));
    for (int32_t c0 = 0; c0 < n; c0 += r->act_rows) {
        const int32_t rows = n - c0 < r->act_rows ? n - c0 : r->act_rows;
        SD_TRY(sd_body(r, c0, rows, pos + c0, NULL, r->stream));
        if (!logits_out) continue;
        for (int32_t l0 = 0; l0 < rows; l0 += SD_CUDA_SKINNY_ROWS) {
            const int32_t lr = rows - l0 < SD_CUDA_SKINNY_ROWS ? rows - l0 : SD_CUDA_SKINNY_ROWS;
            SD_TRY(sd_lm_head(r, l0, lr, r->stream));
            /* Pageable destination: the copy is ordered after the LM head on the stream
             * and completes before the next kernel reuses r->logits. */
            SD_CUDA_TRY(eb, cudaMemcpyAsync(logits_out + (size_t)(c0 + l0) * V, r->logits, (size_t)lr * V * sizeof(float),
                                            cudaMemcpyDeviceToHost, r->stream));
        }
    }
    SD_CUDA_TRY(eb, cudaStreamSynchronize(r->stream));
    return SPECDEC_OK;
}

static specdec_status cuda_forward(sd_runner *base, const int32_t *tokens, int32_t n, int32_t pos,
                                   float *logits_out) {
    sd_cuda_runner *r = (sd_cuda_runner *)base;
    if (r->lost)
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
        if (tokens[i] < 0 || tokens[i] >= r->cfg.vocab_size)
            return sd_fail(&base->err, SPECDEC_ERR_INVALID_ARGUMENT, "CUDA forward: token %d at index %d outside [0, %d)",
                           (int)tokens[i], (int)i, (int)r->cfg.vocab_size);
    base->kv_len = pos; /* truncate first: a failure below leaves the cache at pos */
    specdec_status st = sd_runner_note(r, cuda_forward_impl(r, tokens, n, pos, logits_out));
    if (st != SPECDEC_OK) {
        (void)cudaGetLastError(); /* clear a non-sticky error so the next call starts clean */
        return st;
    }
    base->kv_len = pos + n;
    return SPECDEC_OK;
}

static const sd_runner_vtbl sd_cuda_vtbl = {cuda_forward, cuda_destroy};

/* ---- creation ----------------------------------------------------------------- */

/* Plan (b.base == NULL) or place every device buffer. */
static void sd_plan_weights(sd_cuda_runner *r, sd_bump *b, int tied) {
    const sd_config *c = &r->cfg;
    const size_t es = sd_dtype_size(r->wdt);
    const size_t H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size;
    for (int32_t l = 0; l < c->n_layers; l++) {
        sd_cuda_layer *L = &r->layers[l];
        L->attn_norm = (float *)sd_bump_take(b, H * 4);
        L->ffn_norm = (float *)sd_bump_take(b, H * 4);
        L->wqkv = sd_bump_take(b, (size_t)r->qkv_dim * H * es);
        L->bqkv = c->attention_bias ? (float *)sd_bump_take(b, (size_t)r->qkv_dim * 4) : NULL;
        L->wo = sd_bump_take(b, H * (size_t)r->q_dim * es);
        L->bo = r->has_bo ? (float *)sd_bump_take(b, H * 4) : NULL;
        L->wgu = sd_bump_take(b, 2 * I * H * es);
        L->wdown = sd_bump_take(b, H * I * es);
    }
    r->tok_embd = sd_bump_take(b, (size_t)c->vocab_size * H * es);
    r->out_norm = (float *)sd_bump_take(b, H * 4);
    r->lm_head = tied ? r->tok_embd : sd_bump_take(b, (size_t)c->vocab_size * H * es);
}

static void sd_plan_kv(sd_cuda_runner *r, sd_bump *b) {
    const size_t per = (size_t)r->cfg.n_kv_heads * r->base.n_ctx * r->cfg.head_dim * sd_dtype_size(r->kv_dt);
    for (int32_t l = 0; l < r->cfg.n_layers; l++) {
        r->layers[l].kc = sd_bump_take(b, per);
        r->layers[l].vc = sd_bump_take(b, per);
    }
}

static void sd_plan_act(sd_cuda_runner *r, sd_bump *b) {
    const sd_config *c = &r->cfg;
    const size_t A = (size_t)r->act_rows, H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size;
    size_t kmax = H;
    if ((size_t)r->q_dim > kmax) kmax = (size_t)r->q_dim;
    if (I > kmax) kmax = I;
    r->x = (float *)sd_bump_take(b, A * H * 4);
    r->xn = (float *)sd_bump_take(b, A * H * 4);
    r->delta = (float *)sd_bump_take(b, A * H * 4);
    r->qkv = (float *)sd_bump_take(b, A * (size_t)r->qkv_dim * 4);
    r->att = (float *)sd_bump_take(b, A * (size_t)r->q_dim * 4);
    r->gu = (float *)sd_bump_take(b, A * 2 * I * 4);
    r->h = (float *)sd_bump_take(b, A * I * 4);
    /* cuBLAS runs only for chunks above the skinny limit */
    r->xconv = A > SD_CUDA_SKINNY_MAX_M && r->wdt != SD_F32 ? sd_bump_take(b, A * kmax * sd_dtype_size(r->wdt)) : NULL;
    r->part = (float *)sd_bump_take(
        b, sd_cuda_attention_part_floats(r->att_rows, c->n_heads, c->head_dim, r->base.n_ctx) * sizeof(float));
    r->logits = (float *)sd_bump_take(b, (size_t)SD_CUDA_LOGIT_ROWS * c->vocab_size * 4);
    r->rope_cos = (float *)sd_bump_take(b, (size_t)r->base.n_ctx * (c->head_dim / 2) * 4);
    r->rope_sin = (float *)sd_bump_take(b, (size_t)r->base.n_ctx * (c->head_dim / 2) * 4);
    r->tokens = (int32_t *)sd_bump_take(b, (size_t)r->base.max_batch * 4);
    r->blas_ws = sd_bump_take(b, SD_CUDA_BLAS_WS_BYTES);
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

/* What a runner is created for (sd_create_common). */
typedef struct sd_runner_spec {
    sd_dtype wdt;      /* projection weights on the device */
    sd_dtype kv_dt;    /* KV cache */
    int tied;          /* the LM head is the embedding */
    int has_bo;        /* o_proj carries a bias */
    int32_t n_ctx;     /* > 0 */
    int32_t max_batch; /* 0 or > n_ctx: n_ctx */
    int32_t device;
} sd_runner_spec;

/* The checks before anything is allocated; *max_batch gets the effective value. */
static specdec_status sd_create_check(const sd_config *cfg, const sd_runner_spec *sp, int32_t *max_batch,
                                      sd_errbuf *eb) {
    specdec_status st = sd_check_config(cfg, eb);
    if (st != SPECDEC_OK) return st;
    if (sp->n_ctx <= 0 || sp->max_batch < 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "CUDA runner: n_ctx %d, max_batch %d", (int)sp->n_ctx,
                       (int)sp->max_batch);
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

/* The host side of a runner: fields, sizes, the layer array (NULL on out of memory). */
static sd_cuda_runner *sd_runner_new(const sd_config *cfg, const sd_runner_spec *sp, int32_t max_batch) {
    sd_cuda_runner *r = (sd_cuda_runner *)sd_calloc(1, sizeof *r);
    if (!r) return NULL;
    r->base.vt = &sd_cuda_vtbl;
    r->base.backend = SPECDEC_BACKEND_CUDA;
    r->base.n_vocab = cfg->vocab_size;
    r->base.n_ctx = sp->n_ctx;
    r->base.max_batch = max_batch;
    r->base.kv_len = 0;
    r->cfg = *cfg;
    r->device = sp->device;
    r->wdt = sp->wdt;
    r->kv_dt = sp->kv_dt;
    r->has_bo = sp->has_bo;
    r->q_dim = cfg->n_heads * cfg->head_dim;
    r->kv_dim = cfg->n_kv_heads * cfg->head_dim;
    r->qkv_dim = r->q_dim + 2 * r->kv_dim;
    r->act_rows = max_batch < SD_CUDA_ACT_ROWS_MAX ? max_batch : SD_CUDA_ACT_ROWS_MAX;
    /* Attention scratch: as many query rows per launch as fit the budget, at least a
     * whole verify step. Row chunking never changes a row's result. */
    const size_t per_row = sd_cuda_attention_part_floats(1, cfg->n_heads, cfg->head_dim, sp->n_ctx) * sizeof(float);
    size_t rows = SD_CUDA_ATT_SCRATCH_BUDGET / (per_row ? per_row : 1);
    const size_t min_rows = r->act_rows < SD_CUDA_SKINNY_MAX_M ? (size_t)r->act_rows : SD_CUDA_SKINNY_MAX_M;
    if (rows < min_rows) rows = min_rows;
    if (rows > (size_t)r->act_rows) rows = (size_t)r->act_rows;
    r->att_rows = (int32_t)rows;
    r->layers = (sd_cuda_layer *)sd_calloc(cfg->n_layers > 0 ? (size_t)cfg->n_layers : 1, sizeof(sd_cuda_layer));
    if (!r->layers) {
        cuda_destroy(&r->base);
        return NULL;
    }
    return r;
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

/* The stream and the three device arenas (weights, KV cache, activations), each sized
 * by a planning pass and then placed. */
static specdec_status sd_create_arenas(sd_cuda_runner *r, int tied, sd_errbuf *eb) {
    SD_CREATE_CUDA(cudaSetDevice(r->device));
    SD_CREATE_CUDA(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking));
    sd_bump b = {NULL, 0};
    sd_plan_weights(r, &b, tied);
    r->w_bytes = b.off;
    SD_CREATE_CUDA(cudaMalloc(&r->w_arena, r->w_bytes));
    b.base = (char *)r->w_arena;
    b.off = 0;
    sd_plan_weights(r, &b, tied);

    b.base = NULL;
    b.off = 0;
    sd_plan_kv(r, &b);
    r->kv_bytes = b.off;
    SD_CREATE_CUDA(cudaMalloc(&r->kv_arena, r->kv_bytes));
    b.base = (char *)r->kv_arena;
    b.off = 0;
    sd_plan_kv(r, &b);

    b.base = NULL;
    b.off = 0;
    sd_plan_act(r, &b);
    r->act_bytes = b.off;
    SD_CREATE_CUDA(cudaMalloc(&r->act_arena, r->act_bytes));
    b.base = (char *)r->act_arena;
    b.off = 0;
    sd_plan_act(r, &b);
    return SPECDEC_OK;
}

/* cuBLAS on the runner's stream with our own workspace (it then never allocates while
 * a forward runs). */
static specdec_status sd_create_blas(sd_cuda_runner *r, sd_errbuf *eb) {
    cublasStatus_t bs = cublasCreate(&r->blas);
    if (bs == CUBLAS_STATUS_SUCCESS) bs = cublasSetStream(r->blas, r->stream);
    if (bs == CUBLAS_STATUS_SUCCESS) bs = cublasSetWorkspace(r->blas, r->blas_ws, SD_CUDA_BLAS_WS_BYTES);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return sd_cublas_fail(eb, bs, "cublasCreate/SetStream/SetWorkspace", __FILE__, __LINE__);
    return SPECDEC_OK;
}

/* RoPE tables with the CPU reference's functions (double, rounded once). */
static specdec_status sd_create_rope(sd_cuda_runner *r, sd_errbuf *eb) {
    const sd_config *cfg = &r->cfg;
    const int32_t half = cfg->head_dim / 2, n_ctx = r->base.n_ctx;
    sd_rope_params rp;
    rp.head_dim = cfg->head_dim;
    rp.theta = cfg->rope_theta;
    rp.llama3 = cfg->rope_type == SD_ROPE_LLAMA3;
    rp.factor = cfg->rope_factor;
    rp.low_freq_factor = cfg->rope_low_freq_factor;
    rp.high_freq_factor = cfg->rope_high_freq_factor;
    rp.original_max_pos = cfg->rope_original_max_pos;
    double *inv = (double *)sd_malloc((size_t)half * sizeof(double));
    float *cs = (float *)sd_malloc((size_t)n_ctx * half * sizeof(float));
    float *sn = (float *)sd_malloc((size_t)n_ctx * half * sizeof(float));
    if (!inv || !cs || !sn) {
        sd_free(inv);
        sd_free(cs);
        sd_free(sn);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "CUDA runner: out of host memory (rope tables, n_ctx %d)",
                       (int)n_ctx);
    }
    sd_cpu_rope_inv_freq(&rp, inv);
    for (int32_t p = 0; p < n_ctx; p++) sd_cpu_rope_table(inv, half, p, cs + (size_t)p * half, sn + (size_t)p * half);
    cudaError_t e1 = cudaMemcpy(r->rope_cos, cs, (size_t)n_ctx * half * sizeof(float), cudaMemcpyHostToDevice);
    cudaError_t e2 = e1 == cudaSuccess
                         ? cudaMemcpy(r->rope_sin, sn, (size_t)n_ctx * half * sizeof(float), cudaMemcpyHostToDevice)
                         : e1;
    sd_free(inv);
    sd_free(cs);
    sd_free(sn);
    SD_CREATE_CUDA(e2);
    return SPECDEC_OK;
}
#undef SD_CREATE_CUDA

/* Everything but the weight values: the runner, its stream, cuBLAS, the three arenas,
 * the rope tables. On failure *out is NULL and nothing is left allocated. */
static specdec_status sd_create_common(const sd_config *cfg, const sd_runner_spec *sp, sd_cuda_runner **out,
                                       sd_errbuf *eb) {
    *out = NULL;
    int32_t max_batch = 0;
    specdec_status st = sd_create_check(cfg, sp, &max_batch, eb);
    if (st != SPECDEC_OK) return st;
    sd_cuda_runner *r = sd_runner_new(cfg, sp, max_batch);
    if (!r)
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "CUDA runner: out of host memory (%d layers)",
                       (int)cfg->n_layers);
    st = sd_create_arenas(r, sp->tied, eb);
    if (st == SPECDEC_OK) st = sd_create_blas(r, eb);
    if (st == SPECDEC_OK) st = sd_create_rope(r, eb);
    if (st != SPECDEC_OK) {
        cuda_destroy(&r->base);
        return st;
    }
    *out = r;
    return SPECDEC_OK;
}

/* Upload host tensor t (any dtype, `count` elements) into dst as dt, converting
 * through a bounded host staging buffer. */
static specdec_status sd_upload(void *dst, sd_dtype dt, const sd_tensor *t, size_t count, const char *what,
                                int32_t layer, void *stage, size_t stage_elems, sd_errbuf *eb) {
    if (!t->data)
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "CUDA upload: tensor %s of layer %d is missing", what,
                       (int)layer);
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

static specdec_status sd_upload_model(sd_cuda_runner *r, const sd_weights *m, sd_errbuf *eb) {
    const sd_config *c = &r->cfg;
    const size_t H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size, hd = (size_t)c->head_dim;
    const size_t qd = (size_t)c->n_heads * hd, kd = (size_t)c->n_kv_heads * hd;
    const size_t es = sd_dtype_size(r->wdt);
    const size_t stage_elems = (size_t)1 << 20;
    void *stage = sd_malloc(stage_elems * 4);
    if (!stage) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "CUDA upload: out of host memory (staging buffer)");
    specdec_status st = SPECDEC_OK;
#define SD_UP(dst, dt, tensor, count, name, layer)                                                  \
    do {                                                                                            \
        st = sd_upload((dst), (dt), (tensor), (count), (name), (layer), stage, stage_elems, eb);    \
        if (st != SPECDEC_OK) goto done;                                                            \
    } while (0)
    for (int32_t l = 0; l < c->n_layers; l++) {
        const sd_layer *S = &m->layers[l];
        sd_cuda_layer *L = &r->layers[l];
        SD_UP(L->attn_norm, SD_F32, &S->attn_norm, H, "attn_norm", l);
        SD_UP(L->ffn_norm, SD_F32, &S->ffn_norm, H, "ffn_norm", l);
        SD_UP(L->wqkv, r->wdt, &S->wq, qd * H, "q_proj", l);
        SD_UP((char *)L->wqkv + qd * H * es, r->wdt, &S->wk, kd * H, "k_proj", l);
        SD_UP((char *)L->wqkv + (qd + kd) * H * es, r->wdt, &S->wv, kd * H, "v_proj", l);
        if (L->bqkv) {
            SD_UP(L->bqkv, SD_F32, &S->bq, qd, "q_proj.bias", l);
            SD_UP(L->bqkv + qd, SD_F32, &S->bk, kd, "k_proj.bias", l);
            SD_UP(L->bqkv + qd + kd, SD_F32, &S->bv, kd, "v_proj.bias", l);
        }
        SD_UP(L->wo, r->wdt, &S->wo, H * qd, "o_proj", l);
        if (L->bo) SD_UP(L->bo, SD_F32, &S->bo, H, "o_proj.bias", l);
        SD_UP(L->wgu, r->wdt, &S->w_gate, I * H, "gate_proj", l);
        SD_UP((char *)L->wgu + I * H * es, r->wdt, &S->w_up, I * H, "up_proj", l);
        SD_UP(L->wdown, r->wdt, &S->w_down, H * I, "down_proj", l);
    }
    SD_UP(r->tok_embd, r->wdt, &m->tok_embd, (size_t)c->vocab_size * H, "embed_tokens", -1);
    SD_UP(r->out_norm, SD_F32, &m->out_norm, H, "norm", -1);
    if (r->lm_head != r->tok_embd) SD_UP(r->lm_head, r->wdt, &m->lm_head, (size_t)c->vocab_size * H, "lm_head", -1);
#undef SD_UP
done:
    sd_free(stage);
    return st;
}

/* Runner groups (sd_cuda_backend.h): not implemented yet; the scheduler falls back to a
 * runner per sequence. */
extern "C" specdec_status sd_cuda_group_create(const sd_weights *w, int32_t n_ctx, int32_t max_batch, int32_t n_blocks,
                                               int32_t block_tokens, int32_t device, int32_t keep_f32,
                                               sd_runner_group **out, sd_errbuf *eb) {
    (void)w; (void)n_ctx; (void)max_batch; (void)n_blocks; (void)block_tokens; (void)device; (void)keep_f32;
    if (out) *out = NULL;
    return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "CUDA runner groups (paged KV, batched forwards) are not implemented yet");
}

extern "C" specdec_status sd_cuda_runner_create(const sd_weights *w, int32_t n_ctx, int32_t max_batch, int32_t device,
                                                int32_t keep_f32, sd_runner **out, sd_errbuf *eb) {
    if (out) *out = NULL;
    if (!w || !out)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_runner_create: weights %p, out %p", (const void *)w,
                       (void *)out);
    specdec_status st = sd_weights_validate(w, eb);
    if (st != SPECDEC_OK) return st;
    sd_dtype wdt = w->dtype;
    if (wdt == SD_F32 && !keep_f32) wdt = SD_BF16;
    /* KV cache: the weight dtype (F16/BF16); F32 only when F32 weights are kept. */
    const sd_dtype kv_dt = wdt;
    const int tied = w->cfg.tie_word_embeddings || w->lm_head.data == w->tok_embd.data;
    const int has_bo = w->layers[0].bo.data != NULL;
    const sd_runner_spec spec = {wdt, kv_dt, tied, has_bo, n_ctx, max_batch, device};
    sd_cuda_runner *r = NULL;
    st = sd_create_common(&w->cfg, &spec, &r, eb);
    if (st != SPECDEC_OK) return st;
    st = sd_upload_model(r, w, eb);
    if (st == SPECDEC_OK) {
        /* A pageable cudaMemcpy may return before its DMA lands, and the runner's
         * stream does not wait for the legacy stream: finish the uploads here. */
        cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess) st = sd_cuda_fail(eb, e, "cudaDeviceSynchronize(upload)", __FILE__, __LINE__);
    }
    if (st != SPECDEC_OK) {
        (void)cudaGetLastError();
        cuda_destroy(&r->base);
        return st;
    }
    *out = &r->base;
    return SPECDEC_OK;
}

extern "C" specdec_status sd_cuda_runner_create_synthetic(const sd_config *cfg, sd_dtype wdt, int32_t n_ctx,
                                                          int32_t max_batch, int32_t device, uint64_t seed,
                                                          sd_runner **out, sd_errbuf *eb) {
    if (out) *out = NULL;
    if (!cfg || !out)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_runner_create_synthetic: NULL argument");
    const sd_runner_spec spec = {wdt, wdt, cfg->tie_word_embeddings, 0, n_ctx, max_batch, device};
    sd_cuda_runner *r = NULL;
    specdec_status st = sd_create_common(cfg, &spec, &r, eb);
    if (st != SPECDEC_OK) return st;
    const size_t H = (size_t)cfg->hidden_size, I = (size_t)cfg->intermediate_size;
    uint64_t k = seed * 1000003ull;
#define SD_FILL(p, dt, count, mean, std)                                                         \
    do {                                                                                         \
        st = sd_cuda_fill_normal((p), (dt), (count), k++, (mean), (std), r->stream, eb);         \
        if (st != SPECDEC_OK) goto fail;                                                         \
    } while (0)
    for (int32_t l = 0; l < cfg->n_layers; l++) {
        sd_cuda_layer *L = &r->layers[l];
        SD_FILL(L->attn_norm, SD_F32, H, 1.0f, 0.0f);
        SD_FILL(L->ffn_norm, SD_F32, H, 1.0f, 0.0f);
        SD_FILL(L->wqkv, wdt, (size_t)r->qkv_dim * H, 0.0f, 0.02f);
        if (L->bqkv) SD_FILL(L->bqkv, SD_F32, (size_t)r->qkv_dim, 0.0f, 0.02f);
        SD_FILL(L->wo, wdt, H * (size_t)r->q_dim, 0.0f, 0.02f);
        SD_FILL(L->wgu, wdt, 2 * I * H, 0.0f, 0.02f);
        SD_FILL(L->wdown, wdt, H * I, 0.0f, 0.02f);
    }
    SD_FILL(r->tok_embd, wdt, (size_t)cfg->vocab_size * H, 0.0f, 0.02f);
    SD_FILL(r->out_norm, SD_F32, H, 1.0f, 0.0f);
    if (r->lm_head != r->tok_embd) SD_FILL(r->lm_head, wdt, (size_t)cfg->vocab_size * H, 0.0f, 0.02f);
    /* A defined KV cache, so timing at a long context reads real numbers. */
    SD_FILL(r->kv_arena, wdt, r->kv_bytes / sd_dtype_size(wdt), 0.0f, 1.0f);
#undef SD_FILL
    {
        cudaError_t e = cudaDeviceSynchronize(); /* the fills and the (legacy-stream) rope uploads */
        if (e != cudaSuccess) {
            st = sd_cuda_fail(eb, e, "cudaDeviceSynchronize(fill)", __FILE__, __LINE__);
            goto fail;
        }
    }
    *out = &r->base;
    return SPECDEC_OK;
fail:
    (void)cudaGetLastError();
    cuda_destroy(&r->base);
    return st;
}

/* ---- accessors for tests and benchmarks --------------------------------------- */
extern "C" cudaStream_t sd_cuda_runner_stream(sd_runner *r) { return ((sd_cuda_runner *)r)->stream; }
extern "C" int32_t *sd_cuda_runner_device_tokens(sd_runner *r) { return ((sd_cuda_runner *)r)->tokens; }
extern "C" const float *sd_cuda_runner_device_logits(sd_runner *r) { return ((sd_cuda_runner *)r)->logits; }
extern "C" int32_t sd_cuda_runner_act_rows(sd_runner *r) { return ((sd_cuda_runner *)r)->act_rows; }
extern "C" int sd_cuda_runner_lost(sd_runner *r) { return ((sd_cuda_runner *)r)->lost; }
extern "C" size_t sd_cuda_runner_weight_bytes(sd_runner *r) { return ((sd_cuda_runner *)r)->w_bytes; }
extern "C" size_t sd_cuda_runner_kv_bytes_per_token(sd_runner *r) {
    sd_cuda_runner *c = (sd_cuda_runner *)r;
    return (size_t)2 * c->cfg.n_layers * c->kv_dim * sd_dtype_size(c->kv_dt);
}

extern "C" specdec_status sd_cuda_runner_enqueue(sd_runner *base, int32_t n, int32_t pos, int want_logits) {
    sd_cuda_runner *r = (sd_cuda_runner *)base;
    if (r->lost) return sd_fail(&base->err, SPECDEC_ERR_DEVICE_LOST, "CUDA runner: device lost");
    if (n <= 0 || n > r->act_rows || pos < 0 || (int64_t)pos + n > base->n_ctx)
        return sd_fail(&base->err, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_runner_enqueue: n %d (max %d), pos %d, n_ctx %d",
                       (int)n, (int)r->act_rows, (int)pos, (int)base->n_ctx);
    specdec_status st = sd_body(r, 0, n, pos, NULL, r->stream);
    if (st == SPECDEC_OK && want_logits) {
        const int32_t lr = n < SD_CUDA_SKINNY_ROWS ? n : SD_CUDA_SKINNY_ROWS;
        st = sd_lm_head(r, n - lr, lr, r->stream);
    }
    return sd_runner_note(r, st);
}

extern "C" specdec_status sd_cuda_runner_enqueue_dpos(sd_runner *base, int32_t n, const int64_t *pos_base,
                                                      int32_t pos_off, int32_t logits_rows, cudaStream_t stream) {
    sd_cuda_runner *r = (sd_cuda_runner *)base;
    if (r->lost) return sd_fail(&base->err, SPECDEC_ERR_DEVICE_LOST, "CUDA runner: device lost");
    if (n <= 0 || n > SD_CUDA_SKINNY_MAX_M || n > r->act_rows || n > base->n_ctx || !pos_base || logits_rows < 0 ||
        logits_rows > n)
        return sd_fail(&base->err, SPECDEC_ERR_INVALID_ARGUMENT,
                       "sd_cuda_runner_enqueue_dpos: n %d (max %d), position %p, logits rows %d", (int)n,
                       (int)(r->act_rows < SD_CUDA_SKINNY_MAX_M ? r->act_rows : SD_CUDA_SKINNY_MAX_M),
                       (const void *)pos_base, (int)logits_rows);
    specdec_status st = sd_body(r, 0, n, pos_off, pos_base, stream);
    if (st == SPECDEC_OK && logits_rows > 0) st = sd_lm_head(r, n - logits_rows, logits_rows, stream);
    return sd_runner_note(r, st);
}

extern "C" int sd_cuda_runner_device(sd_runner *r) { return ((sd_cuda_runner *)r)->device; }

extern "C" void sd_cuda_runner_note_kv(sd_runner *r, int32_t len) {
    r->kv_len = len < 0 ? 0 : len > r->n_ctx ? r->n_ctx : len;
}
