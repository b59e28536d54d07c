/* sd_eagle3_cuda.cu — an EAGLE-3 draft head on the GPU: the sd_eagle3_runner ops (core/
 * sd_eagle3.h: fuse, step, q) over the kernels of kernels/cuda that the target's forward runs
 * (backends/cuda/sd_cuda_runner.cu), with the CPU reference's semantics (backends/cpu/
 * sd_eagle3_cpu.h: the row math, the draft KV cache, chain and tree rows, truncation).
 *
 * Memory, all allocated at creation (nothing per call):
 * - shared by every runner over one e3g_shared (core/sd_eagle3.h sd_eagle3_shared: the slots
 *   of a scheduler), read only, one cudaMalloc arena: weights fc [H, 3tH], wqkv = [Wq; Wk; Wv]
 *   [Q + 2KV, 2H], wo [H, Q], wgu = [Wgate; Wup] [2F, H], wdown [H, F], lm_head [Vd, H] in wdt
 *   (the head's dtype; F32 heads become BF16 unless the target's group kept F32 weights: the
 *   target runner's rule), the head's own embedding [V, H] when it ships one (else the target
 *   group's device embedding is read, in the target's dtype), norms and fc.bias fp32; RoPE
 *   tables [n_ctx + SD_RUNNER_TREE_MAX, hd/2] built with the CPU reference's function (the
 *   same angles bit for bit);
 * - per runner: the draft KV cache, K and V [n_kv][n_ctx][hd] fp32 (one layer: small, and no
 *   second rounding against the CPU reference);
 * - per runner: activations of `rows` rows, the captured rows aux [rows, 3tH] (the target's
 *   group captures into it: sd_eagle3_runner.aux is DEVICE memory here), the attention split
 *   scratch, its stream;
 * - a pinned staging buffer for one call's description (token ids, key maps, tree rows,
 *   attention blocks: sd_eagle3_cuda_layout.h), uploaded once per step.
 * Host side of the ops (core/sd_drafter_eagle3.c works on the host): fuse reads device (or
 * host) aux rows and returns g on the host; step uploads g, runs the layer and copies logits
 * [n, Vd] and g_next [n, H] back; q is the CPU runner's (host logits). A step of rows that
 * only enter the cache (no output wanted) computes k and v alone. Every call ends with one
 * stream synchronisation. GEMMs: sd_cuda_gemm_skinny (batch invariant: a row's bits do not
 * depend on the other rows of the call); attention: GENERAL-mode key maps (a tree row's
 * keys are the prefix, its ancestors and itself, as on the CPU). Numerics: fp32 activations,
 * BF16/F16 tensor-core GEMMs (activations rounded to the weight dtype) or fp32 CUDA-core
 * GEMMs for F32 weights: within the target runner's CUDA-vs-CPU tolerances of the CPU head
 * (tests/eagle3/test_eagle3_cuda.c). Every CUDA call is checked; a sticky error makes the
 * head lost (DEVICE_LOST from then on); it can always be destroyed. */
#include <cuda_runtime.h>
#include <string.h>

#include "sd_cuda_common.cuh"
#include "sd_cuda_backend.h"
#include "sd_cuda_runner.h"
#include "sd_eagle3_cuda_layout.h"

extern "C" {
#include "sd_alloc.h"
#include "sd_cpu_rope.h"
#include "sd_cpu_sample.h"
}

#define E3G_ALIGN 256
#define E3G_BT 16                                  /* key-map block size (identity table) */
#define E3G_ATT_BUDGET ((size_t)64 << 20)          /* attention split scratch, bytes */
#define E3G_STAGE_ELEMS ((size_t)1 << 20)          /* upload conversion buffer, 4-byte elements */

/* The head's weights on the device (pointers into the arena, or the target's embedding). */
typedef struct e3g_weights {
    void *fc;              /* [H, 3tH] */
    float *fc_bias;        /* [H] or NULL */
    float *fc_norm[SD_EAGLE3_N_AUX]; /* [tH] each, or NULL */
    float *input_norm;     /* [3tH] or NULL */
    const void *embed;     /* [V, H] in embed_dt: the head's own (in the arena) or the target's */
    sd_dtype embed_dt;
    float *in_norm, *hidden_norm, *post_norm, *norm; /* [H] */
    void *wqkv;            /* [Q + 2KV, 2H] */
    void *wo;              /* [H, Q] */
    void *wgu;             /* [2F, H] */
    void *wdown;           /* [H, F] */
    void *lm_head;         /* [Vd, H] */
} e3g_weights;

/* The read-only part every runner over one head shares (sd_eagle3_shared). */
typedef struct e3g_shared {
    sd_eagle3_shared base; /* must be first */
    int device;
    sd_dtype wdt;
    int32_t n_ctx;         /* the RoPE tables cover positions < n_ctx + SD_RUNNER_TREE_MAX */
    e3g_weights w;         /* pointers into arena (embed NULL unless the head ships one) */
    float *rope_cos, *rope_sin; /* [n_ctx + SD_RUNNER_TREE_MAX, hd/2], in arena */
    void *arena;
} e3g_shared;

typedef struct e3g {
    sd_eagle3_runner r;    /* must be first: core sees an sd_eagle3_runner / sd_runner */
    int device, lost;
    cudaStream_t stream;
    sd_dtype wdt;
    int32_t H, F, tH, Vd, V, nH, nKV, hd, Q, KV, QKV;
    int32_t n_ctx, rows, rope_rows, att_rows, n_cached;
    float eps;
    int32_t *parent;       /* host [n_ctx]: parent cache row of each row (sd_eagle3_cuda_layout.h) */
    e3g_weights w;         /* the shared weights (r.shared), embed possibly the target's */
    void *kv_arena, *act_arena;
    void *kc, *vc;         /* [nKV][n_ctx][hd] fp32 */
    float *xa, *xb;        /* [rows, 3tH] fuse work */
    float *g, *e, *hn, *h1, *xn, *tmp; /* [rows, H] */
    float *u;              /* [rows, 2H] = [RMSNorm(E[x]) ; RMSNorm(g)] */
    float *qkv;            /* [rows, QKV] */
    float *att;            /* [rows, Q] */
    float *gu;             /* [rows, 2F] */
    float *hh;             /* [rows, F] */
    float *logits;         /* [rows, Vd] */
    float *rope_cos, *rope_sin; /* [rope_rows, hd/2], shared */
    float *part;           /* attention split scratch (part_floats) */
    size_t part_floats;
    void *xconv;           /* GEMM scratch above 17 rows (BF16/F16), or NULL */
    char *h_stage, *d_stage; /* pinned host / device twins: tokens, key maps, tree rows, blocks */
    size_t off_tok, off_ext, off_blk, stage_bytes;
    int32_t ext_cap;
    int32_t *tseg;         /* host [rows] */
    sd_cuda_att_launch *launch; /* host [rows] */
    sd_cuda_layout lo;
    void *scratch;         /* sd_sampling_process scratch */
    size_t scratch_size;
} e3g;

#define E3G_TRY(expr)                                 \
    do {                                              \
        specdec_status e3g_st_ = (expr);              \
        if (e3g_st_ != SPECDEC_OK) return e3g_st_;    \
    } while (0)

static size_t e3g_al(size_t n) { return (n + E3G_ALIGN - 1) / E3G_ALIGN * E3G_ALIGN; }
/* Two-pass placement: base NULL sizes (returns NULL), else places. */
static void *e3g_take(char *base, size_t *off, size_t bytes) {
    void *p = base ? (void *)(base + *off) : NULL;
    *off += e3g_al(bytes);
    return p;
}

/* ---- creation --------------------------------------------------------------------- */

static void e3g_plan_weights(e3g *h, char *base, size_t *off) {
    const sd_eagle3_weights *hw = h->r.hw;
    const size_t es = sd_dtype_size(h->wdt), H = (size_t)h->H, tH = (size_t)h->tH, F = (size_t)h->F;
    h->w.fc = e3g_take(base, off, H * 3 * tH * es);
    h->w.fc_bias = hw->fc_bias.data ? (float *)e3g_take(base, off, H * 4) : NULL;
    for (int i = 0; i < SD_EAGLE3_N_AUX; i++)
        h->w.fc_norm[i] = hw->cfg.fc_norm ? (float *)e3g_take(base, off, tH * 4) : NULL;
    h->w.input_norm = hw->cfg.norm_before_fc ? (float *)e3g_take(base, off, 3 * tH * 4) : NULL;
    if (hw->embed.data) h->w.embed = e3g_take(base, off, (size_t)h->V * H * es);
    h->w.in_norm = (float *)e3g_take(base, off, H * 4);
    h->w.hidden_norm = (float *)e3g_take(base, off, H * 4);
    h->w.post_norm = (float *)e3g_take(base, off, H * 4);
    h->w.norm = (float *)e3g_take(base, off, H * 4);
    h->w.wqkv = e3g_take(base, off, (size_t)h->QKV * 2 * H * es);
    h->w.wo = e3g_take(base, off, H * (size_t)h->Q * es);
    h->w.wgu = e3g_take(base, off, 2 * F * H * es);
    h->w.wdown = e3g_take(base, off, H * F * es);
    h->w.lm_head = e3g_take(base, off, (size_t)h->Vd * H * es);
    const size_t half = (size_t)h->hd / 2;
    h->rope_cos = (float *)e3g_take(base, off, (size_t)h->rope_rows * half * 4);
    h->rope_sin = (float *)e3g_take(base, off, (size_t)h->rope_rows * half * 4);
}

static void e3g_plan_act(e3g *h, char *base, size_t *off) {
    const size_t R = (size_t)h->rows, H = (size_t)h->H, w3 = 3 * (size_t)h->tH;
    size_t kmax = w3 > 2 * H ? w3 : 2 * H;
    if ((size_t)h->Q > kmax) kmax = (size_t)h->Q;
    if ((size_t)h->F > kmax) kmax = (size_t)h->F;
    float **hb[] = {&h->g, &h->e, &h->hn, &h->h1, &h->xn, &h->tmp};
    h->r.aux = (float *)e3g_take(base, off, R * w3 * 4);
    h->xa = (float *)e3g_take(base, off, R * w3 * 4);
    h->xb = (float *)e3g_take(base, off, R * w3 * 4);
    for (size_t i = 0; i < sizeof hb / sizeof hb[0]; i++) *hb[i] = (float *)e3g_take(base, off, R * H * 4);
    h->u = (float *)e3g_take(base, off, R * 2 * H * 4);
    h->qkv = (float *)e3g_take(base, off, R * (size_t)h->QKV * 4);
    h->att = (float *)e3g_take(base, off, R * (size_t)h->Q * 4);
    h->gu = (float *)e3g_take(base, off, R * 2 * (size_t)h->F * 4);
    h->hh = (float *)e3g_take(base, off, R * (size_t)h->F * 4);
    h->logits = (float *)e3g_take(base, off, R * (size_t)h->Vd * 4);
    h->part = (float *)e3g_take(base, off, h->part_floats * 4);
    h->xconv = h->wdt != SD_F32 && R > SD_CUDA_SKINNY_MAX_M ? e3g_take(base, off, R * kmax * sd_dtype_size(h->wdt))
                                                             : NULL;
    h->d_stage = (char *)e3g_take(base, off, h->stage_bytes);
}

/* Sizes from the head's config; rows = compute rows of one call. */
static void e3g_dims(e3g *h, int32_t n_ctx, int32_t rows, sd_dtype target_wdt) {
    const sd_eagle3_weights *hw = h->r.hw;
    const sd_config *c = &hw->cfg.layer;
    h->H = c->hidden_size, h->F = c->intermediate_size, h->tH = hw->cfg.target_hidden;
    h->Vd = hw->cfg.draft_vocab, h->V = c->vocab_size, h->nH = c->n_heads, h->nKV = c->n_kv_heads;
    h->hd = c->head_dim, h->Q = c->n_heads * c->head_dim, h->KV = c->n_kv_heads * c->head_dim;
    h->QKV = h->Q + 2 * h->KV;
    h->eps = c->rms_norm_eps;
    h->wdt = hw->dtype == SD_F32 && target_wdt != SD_F32 ? SD_BF16 : hw->dtype;
    h->n_ctx = n_ctx;
    h->rows = rows;
    h->rope_rows = n_ctx + SD_RUNNER_TREE_MAX;
    const int32_t per = sd_keymap_part_rows(E3G_ATT_BUDGET / sizeof(float), h->nH, h->hd, n_ctx);
    h->att_rows = per < 1 ? 1 : per < rows ? per : rows;
    h->part_floats = sd_cuda_attention_part_floats(h->att_rows, h->nH, h->hd, n_ctx);
    h->ext_cap = rows * SD_RUNNER_TREE_MAX;
    h->off_tok = (size_t)rows * sizeof(int32_t);
    h->off_tok = (h->off_tok + 15) / 16 * 16;
    h->off_ext = h->off_tok + (size_t)rows * sizeof(sd_cuda_tokmap);
    h->off_blk = h->off_ext + ((size_t)h->ext_cap * sizeof(int32_t) + 15) / 16 * 16;
    h->stage_bytes = h->off_blk + (size_t)sd_cuda_layout_blk_cap(rows, h->nH, h->nKV) * sizeof(sd_cuda_attblk);
}

#define E3G_CUDA(stmt)                                                              \
    do {                                                                            \
        cudaError_t e_ = (stmt);                                                    \
        if (e_ != cudaSuccess) {                                                    \
            specdec_status st_ = sd_cuda_fail(eb, e_, #stmt, __FILE__, __LINE__);   \
            (void)cudaGetLastError();                                               \
            return st_;                                                             \
        }                                                                           \
    } while (0)

/* A runner's own memory: the stream, the KV and activation arenas, the pinned stage and the
 * host arrays. */
static specdec_status e3g_alloc(e3g *h, sd_errbuf *eb) {
    E3G_CUDA(cudaSetDevice(h->device));
    E3G_CUDA(cudaStreamCreateWithFlags(&h->stream, cudaStreamNonBlocking));
    const size_t kv = e3g_al((size_t)h->nKV * (size_t)h->n_ctx * (size_t)h->hd * sizeof(float));
    E3G_CUDA(cudaMalloc(&h->kv_arena, 2 * kv));
    h->kc = h->kv_arena;
    h->vc = (char *)h->kv_arena + kv;
    E3G_CUDA(cudaMemsetAsync(h->kv_arena, 0, 2 * kv, h->stream));
    size_t off = 0;
    e3g_plan_act(h, NULL, &off);
    E3G_CUDA(cudaMalloc(&h->act_arena, off));
    E3G_CUDA(cudaMemsetAsync(h->act_arena, 0, off, h->stream)); /* no row is ever read unwritten */
    off = 0;
    e3g_plan_act(h, (char *)h->act_arena, &off);
    E3G_CUDA(cudaMallocHost((void **)&h->h_stage, h->stage_bytes));
    h->parent = (int32_t *)sd_malloc((size_t)h->n_ctx * sizeof(int32_t));
    h->tseg = (int32_t *)sd_malloc((size_t)h->rows * sizeof(int32_t));
    h->launch = (sd_cuda_att_launch *)sd_malloc((size_t)h->rows * sizeof(sd_cuda_att_launch));
    h->scratch_size = sd_sampling_scratch_size(h->V);
    h->scratch = sd_malloc(h->scratch_size);
    if (!h->parent || !h->tseg || !h->launch || !h->scratch)
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "EAGLE-3 head (CUDA): out of host memory");
    return SPECDEC_OK;
}

/* The projection weights (in wdt), the head's own embedding, norms and fc.bias (fp32). */
static specdec_status e3g_upload(e3g *h, void *stage, sd_errbuf *eb) {
    const sd_eagle3_weights *hw = h->r.hw;
    const size_t es = sd_dtype_size(h->wdt), H = (size_t)h->H, tH = (size_t)h->tH, F = (size_t)h->F;
    const size_t Q = (size_t)h->Q, KV = (size_t)h->KV, S = E3G_STAGE_ELEMS;
    const sd_dtype dt = h->wdt;
    E3G_TRY(sd_cuda_upload(h->w.fc, dt, &hw->fc, H * 3 * tH, "fc.weight", -1, stage, S, eb));
    if (h->w.fc_bias) E3G_TRY(sd_cuda_upload(h->w.fc_bias, SD_F32, &hw->fc_bias, H, "fc.bias", -1, stage, S, eb));
    for (int i = 0; i < SD_EAGLE3_N_AUX; i++)
        if (h->w.fc_norm[i])
            E3G_TRY(sd_cuda_upload_norm(h->w.fc_norm[i], &hw->fc_norm[i], tH, 0.0f, "fc_norm", i, (float *)stage, eb));
    if (h->w.input_norm)
        E3G_TRY(sd_cuda_upload_norm(h->w.input_norm, &hw->input_norm, 3 * tH, 0.0f, "input_norm", -1, (float *)stage,
                                    eb));
    if (hw->embed.data)
        E3G_TRY(sd_cuda_upload((void *)h->w.embed, dt, &hw->embed, (size_t)h->V * H, "embed_tokens", -1, stage, S, eb));
    const struct { float *dst; const sd_tensor *t; const char *name; } norms[] = {
        {h->w.in_norm, &hw->in_norm, "input_layernorm"}, {h->w.hidden_norm, &hw->hidden_norm, "hidden_norm"},
        {h->w.post_norm, &hw->post_norm, "post_attention_layernorm"}, {h->w.norm, &hw->norm, "norm"}};
    for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++)
        E3G_TRY(sd_cuda_upload_norm(norms[i].dst, norms[i].t, H, 0.0f, norms[i].name, -1, (float *)stage, eb));
    char *qkv = (char *)h->w.wqkv, *gu = (char *)h->w.wgu;
    E3G_TRY(sd_cuda_upload(qkv, dt, &hw->wq, Q * 2 * H, "q_proj", -1, stage, S, eb));
    E3G_TRY(sd_cuda_upload(qkv + Q * 2 * H * es, dt, &hw->wk, KV * 2 * H, "k_proj", -1, stage, S, eb));
    E3G_TRY(sd_cuda_upload(qkv + (Q + KV) * 2 * H * es, dt, &hw->wv, KV * 2 * H, "v_proj", -1, stage, S, eb));
    E3G_TRY(sd_cuda_upload(h->w.wo, dt, &hw->wo, H * Q, "o_proj", -1, stage, S, eb));
    E3G_TRY(sd_cuda_upload(gu, dt, &hw->w_gate, F * H, "gate_proj", -1, stage, S, eb));
    E3G_TRY(sd_cuda_upload(gu + F * H * es, dt, &hw->w_up, F * H, "up_proj", -1, stage, S, eb));
    E3G_TRY(sd_cuda_upload(h->w.wdown, dt, &hw->w_down, H * F, "down_proj", -1, stage, S, eb));
    return sd_cuda_upload(h->w.lm_head, dt, &hw->lm_head, (size_t)h->Vd * H, "lm_head", -1, stage, S, eb);
}

/* RoPE tables of the head's own RoPE with the CPU reference's functions (sd_eagle3_cpu.c:
 * sd_cpu_rope_table at each position, the same frequencies for the same n_ctx). */
static specdec_status e3g_rope(e3g *h, sd_errbuf *eb) {
    const int32_t half = h->hd / 2;
    const size_t tab = (size_t)h->rope_rows * (size_t)half;
    double *inv = (double *)sd_malloc((size_t)half * sizeof(double));
    float *cs = (float *)sd_malloc(tab * sizeof(float)), *sn = (float *)sd_malloc(tab * sizeof(float));
    cudaError_t e = cudaSuccess;
    if (inv && cs && sn) {
        sd_rope_spec rp;
        sd_cfg_rope_params(&h->r.hw->cfg.layer, h->n_ctx, 0, &rp);
        sd_cpu_rope_spec_inv_freq(&rp, inv);
        for (int32_t p = 0; p < h->rope_rows; p++)
            sd_cpu_rope_table(inv, half, p, cs + (size_t)p * half, sn + (size_t)p * half);
        e = cudaMemcpy(h->rope_cos, cs, tab * sizeof(float), cudaMemcpyHostToDevice);
        if (e == cudaSuccess) e = cudaMemcpy(h->rope_sin, sn, tab * sizeof(float), cudaMemcpyHostToDevice);
    }
    const int oom = !inv || !cs || !sn;
    sd_free(inv);
    sd_free(cs);
    sd_free(sn);
    if (oom) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "EAGLE-3 head (CUDA): rope tables of %d rows", (int)h->rope_rows);
    E3G_CUDA(e);
    return SPECDEC_OK;
}

/* Weights, RoPE tables, then wait for every upload (pageable copies may return early). */
static specdec_status e3g_fill(e3g *h, sd_errbuf *eb) {
    void *stage = sd_malloc(E3G_STAGE_ELEMS * 4);
    if (!stage) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "EAGLE-3 head (CUDA): upload staging buffer");
    specdec_status st = e3g_upload(h, stage, eb);
    sd_free(stage);
    if (st == SPECDEC_OK) st = e3g_rope(h, eb);
    if (st != SPECDEC_OK) return st;
    E3G_CUDA(cudaDeviceSynchronize());
    return SPECDEC_OK;
}

static void e3g_shared_free(sd_eagle3_shared *b) {
    e3g_shared *s = (e3g_shared *)b;
    if (s->arena) {
        (void)cudaSetDevice(s->device);
        (void)cudaFree(s->arena);
        (void)cudaGetLastError();
    }
    sd_free(s);
}

/* s's arena planned, uploaded and filled through p, a runner that has only the head, the
 * device and its sizes (e3g_dims): the weight layout and the uploads are the runner's. */
static specdec_status e3g_shared_fill(e3g_shared *s, e3g *p, sd_errbuf *eb) {
    E3G_CUDA(cudaSetDevice(p->device));
    size_t off = 0;
    e3g_plan_weights(p, NULL, &off);
    E3G_CUDA(cudaMalloc(&s->arena, off ? off : 1));
    off = 0;
    e3g_plan_weights(p, (char *)s->arena, &off);
    p->w.embed_dt = p->wdt; /* the head's own embedding, when it ships one */
    E3G_TRY(e3g_fill(p, eb));
    s->w = p->w;
    s->rope_cos = p->rope_cos;
    s->rope_sin = p->rope_sin;
    s->wdt = p->wdt;
    s->n_ctx = p->n_ctx;
    return SPECDEC_OK;
}
#undef E3G_CUDA

/* ---- the forward ------------------------------------------------------------------ */

/* A failure: a lost device is sticky; anything else is cleared so the next call starts clean. */
static specdec_status e3g_note(e3g *h, specdec_status st) {
    if (st == SPECDEC_OK) return st;
    if (st == SPECDEC_ERR_DEVICE_LOST) h->lost = 1;
    (void)cudaStreamSynchronize(h->stream);
    (void)cudaGetLastError();
    return st;
}

/* y = x W^T (+ bias) over n rows: the batch-invariant skinny GEMM, STORE. */
static specdec_status e3g_gemm(e3g *h, const void *w, const float *bias, const float *x, float *y, int32_t ldy,
                               int32_t n, int32_t n_out, int32_t k_in) {
    const sd_cuda_gemm_args a = {w, h->wdt, bias, x, y, ldy, n, n_out, k_in, h->xconv, SD_GEMM_EPI_STORE};
    return sd_cuda_gemm_skinny(&a, h->stream, &h->r.base.err);
}

/* out = RMSNorm(x [+= delta]) * w over n rows of dim. */
static specdec_status e3g_norm(e3g *h, float *x, const float *delta, const float *w, float *out, int32_t n,
                               int32_t dim) {
    const sd_cuda_rmsnorm_args a = {x, delta, w, out, n, dim, h->eps};
    return sd_cuda_rmsnorm(&a, h->stream, &h->r.base.err);
}

/* Copy n rows of `width` floats between strided fp32 matrices on the head's stream. */
static specdec_status e3g_rows(e3g *h, float *dst, int32_t ld_dst, const float *src, int32_t ld_src, int32_t width,
                               int32_t n, cudaMemcpyKind kind) {
    SD_CUDA_TRY(&h->r.base.err, cudaMemcpy2DAsync(dst, (size_t)ld_dst * 4, src, (size_t)ld_src * 4, (size_t)width * 4,
                                                   (size_t)n, kind, h->stream));
    return SPECDEC_OK;
}

/* g [n, H] (host) = fc(aux rows): the optional fc_norm per captured state and input_norm
 * over the concat, then fc (+ bias). */
static specdec_status e3g_fuse_run(e3g *h, const float *aux, int32_t n, float *g) {
    const int32_t w3 = 3 * h->tH, tH = h->tH;
    E3G_TRY(e3g_rows(h, h->xa, w3, aux, w3, w3, n, cudaMemcpyDefault));
    const float *x = h->xa;
    for (int i = 0; i < SD_EAGLE3_N_AUX && h->w.fc_norm[0]; i++) {
        float *in = h->xb, *out = h->xb + (size_t)n * tH;
        E3G_TRY(e3g_rows(h, in, tH, h->xa + (size_t)i * tH, w3, tH, n, cudaMemcpyDeviceToDevice));
        E3G_TRY(e3g_norm(h, in, NULL, h->w.fc_norm[i], out, n, tH));
        E3G_TRY(e3g_rows(h, h->xa + (size_t)i * tH, w3, out, tH, tH, n, cudaMemcpyDeviceToDevice));
    }
    if (h->w.input_norm) {
        E3G_TRY(e3g_norm(h, h->xa, NULL, h->w.input_norm, h->xb, n, w3));
        x = h->xb;
    }
    E3G_TRY(e3g_gemm(h, h->w.fc, h->w.fc_bias, x, h->g, h->H, n, h->H, w3));
    E3G_TRY(e3g_rows(h, g, h->H, h->g, h->H, h->H, n, cudaMemcpyDeviceToHost));
    SD_CUDA_TRY(&h->r.base.err, cudaStreamSynchronize(h->stream));
    return SPECDEC_OK;
}

/* Lay the call out in the pinned stage and upload it (tokens, key maps, tree rows, blocks). */
static specdec_status e3g_stage(e3g *h, const int32_t *tokens, const int32_t *pos, int32_t n, int tree,
                                int32_t n_shared) {
    sd_cuda_layout *lo = &h->lo;
    memset(lo, 0, sizeof *lo);
    lo->n_heads = h->nH;
    lo->n_kv = h->nKV;
    lo->act_rows = h->rows;
    lo->att_rows = h->att_rows;
    lo->tokens = (int32_t *)h->h_stage;
    lo->tok = (sd_cuda_tokmap *)(h->h_stage + h->off_tok);
    lo->ext = (int32_t *)(h->h_stage + h->off_ext);
    lo->blk = (sd_cuda_attblk *)(h->h_stage + h->off_blk);
    lo->tseg = h->tseg;
    lo->launch = h->launch;
    sd_e3_layout_rows(lo, h->parent, h->n_cached, tokens, pos, n, tree, n_shared);
    sd_cuda_layout_blocks(lo);
    const size_t bytes = h->off_blk + (size_t)lo->n_blk * sizeof(sd_cuda_attblk);
    SD_CUDA_TRY(&h->r.base.err, cudaMemcpyAsync(h->d_stage, h->h_stage, bytes, cudaMemcpyHostToDevice, h->stream));
    return SPECDEC_OK;
}

/* u = [RMSNorm(E[x]; input_layernorm) ; RMSNorm(g; hidden_norm)], then q|k|v (k|v alone when
 * kv_only), RoPE at each row's position and k, v into the cache rows. */
static specdec_status e3g_qkv(e3g *h, int32_t n, int kv_only) {
    sd_errbuf *eb = &h->r.base.err;
    const int32_t H = h->H;
    E3G_TRY(sd_cuda_embed(h->w.embed, h->w.embed_dt, (const int32_t *)h->d_stage, n, H, h->tmp, h->stream, eb));
    E3G_TRY(e3g_norm(h, h->tmp, NULL, h->w.in_norm, h->e, n, H));
    E3G_TRY(e3g_norm(h, h->g, NULL, h->w.hidden_norm, h->hn, n, H));
    E3G_TRY(e3g_rows(h, h->u, 2 * H, h->e, H, H, n, cudaMemcpyDeviceToDevice));
    E3G_TRY(e3g_rows(h, h->u + H, 2 * H, h->hn, H, H, n, cudaMemcpyDeviceToDevice));
    const size_t skip = kv_only ? (size_t)h->Q : 0;
    E3G_TRY(e3g_gemm(h, (const char *)h->w.wqkv + skip * 2 * H * sd_dtype_size(h->wdt), NULL, h->u, h->qkv + skip,
                     h->QKV, n, h->QKV - (int32_t)skip, 2 * H));
    sd_cuda_rope_args ra;
    memset(&ra, 0, sizeof ra);
    ra.qkv = h->qkv;
    ra.ldqkv = h->QKV;
    ra.n = n;
    ra.map.block_tokens = E3G_BT;
    ra.map.tok = (const sd_cuda_tokmap *)(h->d_stage + h->off_tok);
    ra.map.ext = (const int32_t *)(h->d_stage + h->off_ext);
    ra.n_heads = h->nH;
    ra.n_kv = h->nKV;
    ra.hd = h->hd;
    ra.cos_t = h->rope_cos;
    ra.sin_t = h->rope_sin;
    ra.k_cache = h->kc;
    ra.v_cache = h->vc;
    ra.kv_dt = SD_F32;
    ra.n_ctx = h->rope_rows;
    ra.cache_rows = h->n_ctx;
    return sd_cuda_rope_kv(&ra, h->stream, eb);
}

/* Attention of the call's rows over their keys, one launch per sd_cuda_layout launch. */
static specdec_status e3g_attend(e3g *h) {
    const sd_cuda_layout *lo = &h->lo;
    sd_cuda_attention_args aa;
    memset(&aa, 0, sizeof aa);
    aa.ldq = h->QKV;
    aa.k_cache = h->kc;
    aa.v_cache = h->vc;
    aa.kv_dt = SD_F32;
    aa.cache_rows = h->n_ctx;
    aa.n_ctx = h->n_ctx;
    aa.n_heads = h->nH;
    aa.n_kv = h->nKV;
    aa.hd = h->hd;
    aa.part = h->part;
    aa.part_floats = h->part_floats;
    aa.ldo = h->Q;
    const sd_cuda_tokmap *tok = (const sd_cuda_tokmap *)(h->d_stage + h->off_tok);
    const int32_t *ext = (const int32_t *)(h->d_stage + h->off_ext);
    const sd_cuda_attblk *blk = (const sd_cuda_attblk *)(h->d_stage + h->off_blk);
    for (int32_t i = 0; i < lo->n_launch; i++) {
        const sd_cuda_att_launch *L = &lo->launch[i];
        aa.q = h->qkv + (size_t)L->tok0 * h->QKV;
        aa.out = h->att + (size_t)L->tok0 * h->Q;
        aa.n = L->n;
        aa.map = sd_cuda_layout_map(L, tok, ext, blk, E3G_BT);
        E3G_TRY(sd_cuda_attention(&aa, h->stream, &h->r.base.err));
    }
    return SPECDEC_OK;
}

/* The layer after attention: h1 = base + o, h = h1 + MLP(RMSNorm(h1)), hN = RMSNorm(h); the
 * wanted outputs copied to the host. */
static specdec_status e3g_tail(e3g *h, int32_t n, float *logits, float *g_next) {
    const int32_t H = h->H, F = h->F;
    E3G_TRY(e3g_gemm(h, h->w.wo, NULL, h->att, h->tmp, H, n, H, h->Q));
    const float *base = h->r.hw->cfg.norm_before_residual ? h->hn : h->g;
    SD_CUDA_TRY(&h->r.base.err, cudaMemcpyAsync(h->h1, base, (size_t)n * H * 4, cudaMemcpyDeviceToDevice, h->stream));
    E3G_TRY(e3g_norm(h, h->h1, h->tmp, h->w.post_norm, h->xn, n, H)); /* h1 += o */
    E3G_TRY(e3g_gemm(h, h->w.wgu, NULL, h->xn, h->gu, 2 * F, n, 2 * F, H));
    E3G_TRY(sd_cuda_swiglu(h->gu, h->hh, n, F, h->stream, &h->r.base.err));
    E3G_TRY(e3g_gemm(h, h->w.wdown, NULL, h->hh, h->tmp, H, n, H, F));
    E3G_TRY(e3g_norm(h, h->h1, h->tmp, h->w.norm, h->xn, n, H)); /* h1 = h, xn = hN */
    if (logits) {
        E3G_TRY(e3g_gemm(h, h->w.lm_head, NULL, h->xn, h->logits, h->Vd, n, h->Vd, H));
        E3G_TRY(e3g_rows(h, logits, h->Vd, h->logits, h->Vd, h->Vd, n, cudaMemcpyDeviceToHost));
    }
    if (g_next)
        E3G_TRY(e3g_rows(h, g_next, H, h->r.hw->cfg.norm_output ? h->xn : h->h1, H, H, n, cudaMemcpyDeviceToHost));
    return SPECDEC_OK;
}

static specdec_status e3g_step_run(e3g *h, const int32_t *tokens, const float *g, const int32_t *pos, int32_t n,
                                   const int32_t *parents, int32_t n_shared, float *logits, float *g_next) {
    E3G_TRY(e3g_stage(h, tokens, pos, n, parents != NULL, n_shared));
    E3G_TRY(e3g_rows(h, h->g, h->H, g, h->H, h->H, n, cudaMemcpyDefault));
    const int kv_only = !logits && !g_next; /* the rows only enter the cache */
    E3G_TRY(e3g_qkv(h, n, kv_only));
    if (!kv_only) {
        E3G_TRY(e3g_attend(h));
        E3G_TRY(e3g_tail(h, n, logits, g_next));
    }
    SD_CUDA_TRY(&h->r.base.err, cudaStreamSynchronize(h->stream));
    return SPECDEC_OK;
}

/* ---- the runner ops ---------------------------------------------------------------- */

static specdec_status e3g_lost(e3g *h) {
    return sd_fail(&h->r.base.err, SPECDEC_ERR_DEVICE_LOST,
                   "EAGLE-3 head (CUDA): an earlier device error left the device unusable; free the engine");
}

static specdec_status e3g_op_fuse(sd_eagle3_runner *r, const float *aux, int32_t n, float *g) {
    e3g *h = (e3g *)r;
    if (h->lost) return e3g_lost(h);
    if (!aux || !g || n < 1 || n > h->rows)
        return sd_fail(&r->base.err, SPECDEC_ERR_INVALID_ARGUMENT, "eagle3 fuse: n = %d outside [1, %d] or NULL",
                       (int)n, (int)h->rows);
    SD_CUDA_TRY(&r->base.err, cudaSetDevice(h->device));
    return e3g_note(h, e3g_fuse_run(h, aux, n, g));
}

static specdec_status e3g_op_step(sd_eagle3_runner *r, const int32_t *tokens, const float *g, const int32_t *pos,
                                  int32_t n, const int32_t *parents, int32_t n_shared, float *logits, float *g_next) {
    e3g *h = (e3g *)r;
    if (h->lost) return e3g_lost(h);
    if (!tokens || !g || !pos) return sd_fail(&r->base.err, SPECDEC_ERR_INVALID_ARGUMENT, "eagle3 step: NULL argument");
    if (r->base.kv_len < h->n_cached) h->n_cached = r->base.kv_len; /* truncated by core */
    if (r->base.kv_len != h->n_cached)
        return sd_fail(&r->base.err, SPECDEC_ERR_INTERNAL, "EAGLE-3 head (CUDA): kv_len %d but %d cache rows",
                       (int)r->base.kv_len, (int)h->n_cached);
    E3G_TRY(sd_eagle3_check_rows(n, h->rows, h->n_cached, h->n_ctx, h->V, h->rope_rows, tokens, pos, parents, n_shared,
                                 &r->base.err));
    const int64_t ext = sd_e3_layout_parents(h->parent, h->n_cached, n, parents, n_shared);
    if (ext > h->ext_cap)
        return sd_fail(&r->base.err, SPECDEC_ERR_INVALID_ARGUMENT,
                       "eagle3 step: the tree rows' key maps need %lld ancestor rows, at most %d", (long long)ext,
                       (int)h->ext_cap);
    SD_CUDA_TRY(&r->base.err, cudaSetDevice(h->device));
    const specdec_status st = e3g_note(h, e3g_step_run(h, tokens, g, pos, n, parents, n_shared, logits, g_next));
    if (st != SPECDEC_OK) return st;
    h->n_cached += n;
    r->base.kv_len = h->n_cached;
    return SPECDEC_OK;
}

static specdec_status e3g_op_q(sd_eagle3_runner *r, const float *logits, const sd_sampling_params *sp, int greedy,
                               float *q) {
    e3g *h = (e3g *)r;
    return sd_sampling_process_eagle3(r->hw, logits, sp, greedy, h->scratch, h->scratch_size, q, &r->base.err);
}

/* The runner's own memory; its reference to the shared weights is dropped after its stream
 * has finished with them. */
static void e3g_op_destroy(sd_eagle3_runner *r) {
    e3g *h = (e3g *)r;
    if (!h) return;
    (void)cudaSetDevice(h->device);
    if (h->stream) (void)cudaStreamSynchronize(h->stream);
    if (h->stream) (void)cudaStreamDestroy(h->stream);
    if (h->kv_arena) (void)cudaFree(h->kv_arena);
    if (h->act_arena) (void)cudaFree(h->act_arena);
    if (h->h_stage) (void)cudaFreeHost(h->h_stage);
    (void)cudaGetLastError();
    sd_eagle3_runner_fini(r);
    sd_free(h->parent);
    sd_free(h->tseg);
    sd_free(h->launch);
    sd_free(h->scratch);
    sd_free(h);
}

static const sd_eagle3_runner_ops e3g_ops = {e3g_op_fuse, e3g_op_step, e3g_op_q, e3g_op_destroy};

/* What the kernels and this runner cannot serve, before anything is allocated. */
static specdec_status e3g_check(const sd_eagle3_weights *hw, sd_runner *target, const sd_config *target_cfg,
                                int32_t n_ctx, sd_errbuf *eb) {
    if (!hw || !target || !target_cfg)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "EAGLE-3 head (CUDA): head %p, target %p, config %p",
                       (const void *)hw, (void *)target, (const void *)target_cfg);
    if (target->backend != SPECDEC_BACKEND_CUDA || sd_cuda_group_device(target->group) < 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "EAGLE-3 head (CUDA): the target is not a CUDA runner");
    if (n_ctx < 1) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "EAGLE-3 head (CUDA): n_ctx %d", (int)n_ctx);
    E3G_TRY(sd_eagle3_validate(hw, "EAGLE-3 head (CUDA)", eb));
    E3G_TRY(sd_eagle3_check_target(hw, target_cfg, "EAGLE-3 head (CUDA)", eb)); /* before allocating */
    const int32_t hd = hw->cfg.layer.head_dim;
    if (hd > SD_CUDA_ATTN_MAX_HD || hd % 2)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "EAGLE-3 head (CUDA): head_dim %d (even, at most %d)", (int)hd,
                       SD_CUDA_ATTN_MAX_HD);
    return SPECDEC_OK;
}

extern "C" specdec_status sd_cuda_eagle3_shared_create(const sd_eagle3_weights *hw, sd_runner *target,
                                                       const sd_config *target_cfg, int32_t n_ctx,
                                                       sd_eagle3_shared **out, sd_errbuf *eb) {
    if (!out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "EAGLE-3 head (CUDA): out is NULL");
    *out = NULL;
    E3G_TRY(e3g_check(hw, target, target_cfg, n_ctx, eb));
    e3g_shared *s = (e3g_shared *)sd_calloc(1, sizeof *s);
    e3g *p = (e3g *)sd_calloc(1, sizeof *p);
    specdec_status st = SPECDEC_OK;
    if (!s || !p) {
        st = sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "EAGLE-3 head (CUDA): out of memory");
    } else {
        s->base.hw = hw;
        s->base.backend = SPECDEC_BACKEND_CUDA;
        s->base.refs = 1;
        s->base.free_fn = e3g_shared_free;
        s->device = p->device = sd_cuda_runner_device(target);
        p->r.hw = hw;
        e3g_dims(p, n_ctx, SD_RUNNER_TREE_MAX, sd_cuda_runner_weight_dtype(target));
        st = e3g_shared_fill(s, p, eb);
    }
    sd_free(p);
    if (st != SPECDEC_OK) {
        if (s) e3g_shared_free(&s->base);
        return st;
    }
    *out = &s->base;
    return SPECDEC_OK;
}

static const char *e3g_dt_name(sd_dtype t) { return t == SD_F32 ? "F32" : t == SD_F16 ? "F16" : "BF16"; }

extern "C" specdec_status sd_cuda_eagle3_runner_create_shared(sd_eagle3_shared *sh, sd_runner *target,
                                                              const sd_config *target_cfg, int32_t n_ctx,
                                                              int32_t rows, sd_runner **out, sd_errbuf *eb) {
    if (!out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "EAGLE-3 head (CUDA): out is NULL");
    *out = NULL;
    if (!sh || sh->backend != SPECDEC_BACKEND_CUDA)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "EAGLE-3 head (CUDA): the shared head weights are not a CUDA head's");
    const e3g_shared *s = (const e3g_shared *)sh;
    const sd_eagle3_weights *hw = sh->hw;
    E3G_TRY(e3g_check(hw, target, target_cfg, n_ctx, eb));
    /* rows as the CPU head: at least a tree level, at most n_ctx (and never fewer than
     * sd_eagle3_runner_init's rows: the target captures up to that many into aux) */
    int32_t max_rows = rows < SD_RUNNER_TREE_MAX ? SD_RUNNER_TREE_MAX : rows;
    if (max_rows > n_ctx) max_rows = n_ctx;
    const int32_t cap = max_rows < SD_RUNNER_TREE_MAX ? SD_RUNNER_TREE_MAX : max_rows;
    e3g *h = (e3g *)sd_calloc(1, sizeof *h);
    if (!h) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "EAGLE-3 head (CUDA): out of memory");
    h->r.ops = &e3g_ops;
    h->r.hw = hw;
    h->r.shared = sd_eagle3_shared_ref(sh);
    h->r.base.vt = &sd_eagle3_runner_vtbl;
    h->r.aux_backend = 1;
    h->device = sd_cuda_runner_device(target);
    e3g_dims(h, n_ctx, cap, sd_cuda_runner_weight_dtype(target));
    h->w = s->w;
    h->rope_cos = s->rope_cos;
    h->rope_sin = s->rope_sin;
    if (!hw->embed.data) h->w.embed = sd_cuda_runner_device_embed(target, &h->w.embed_dt);
    else h->w.embed_dt = h->wdt;
    specdec_status st = SPECDEC_OK;
    if (h->device != s->device || h->wdt != s->wdt || n_ctx != s->n_ctx)
        st = sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                     "EAGLE-3 head (CUDA): the shared head weights are for device %d, %s, n_ctx %d; this runner "
                     "needs device %d, %s, n_ctx %d",
                     s->device, e3g_dt_name(s->wdt), (int)s->n_ctx, h->device, e3g_dt_name(h->wdt), (int)n_ctx);
    if (st == SPECDEC_OK) st = e3g_alloc(h, eb);
    if (st == SPECDEC_OK) st = sd_eagle3_runner_init(&h->r, target, target_cfg, n_ctx, max_rows, eb);
    if (st != SPECDEC_OK) {
        e3g_op_destroy(&h->r);
        return st;
    }
    *out = &h->r.base;
    return SPECDEC_OK;
}

extern "C" specdec_status sd_cuda_eagle3_runner_create(const sd_eagle3_weights *hw, sd_runner *target,
                                                       const sd_config *target_cfg, int32_t n_ctx, int32_t rows,
                                                       sd_runner **out, sd_errbuf *eb) {
    if (!out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "EAGLE-3 head (CUDA): out is NULL");
    *out = NULL;
    sd_eagle3_shared *sh = NULL;
    specdec_status st = sd_cuda_eagle3_shared_create(hw, target, target_cfg, n_ctx, &sh, eb);
    if (st == SPECDEC_OK) st = sd_cuda_eagle3_runner_create_shared(sh, target, target_cfg, n_ctx, rows, out, eb);
    sd_eagle3_shared_unref(sh); /* the runner holds its own reference */
    return st;
}
