/* sd_cpu_runner.c — the CPU reference runner: one model's fp32 KV cache and the
 * plain-C forward pass of every family the configuration can describe (core/
 * sd_weights.h sd_config; models/sd_family.c): Llama, Mistral, Qwen2/3, Phi-3, Gemma 1-3,
 * Mixtral, Qwen2-MoE, Qwen3-MoE, GPT-OSS, OLMo-2, OLMoE, Granite, Granite-MoE, SmolLM3, ERNIE 4.5,
 * GLM-4, EXAONE 4, GLM-4.5 and DeepSeek-V3.
 *
 * forward(tokens[0..n), pos): for each token t (absolute position p = pos + t); every
 * norm is RMSNorm with weight (norm_offset + w), every bracket only when configured:
 *   x = embed(token) [* embed_scale]
 *   per layer l: h = norm(x, attn_norm)   [h = x: post_norms_only (OLMo-2)]
 *               q, k, v = h Wq^T [+bq], h Wk^T [+bk], h Wv^T [+bv]
 *               [DeepSeek's latent attention instead (cfg.mla, cpu_mla_qkv), with W_UK_h / W_UV_h
 *                head h's key / value rows of kv_b_proj absorbed: one cached key per token,
 *                k = [c | k_pe] (c the normed kv latent), also its value; head h's query
 *                [W_UK_h^T q_nope | q_pe]; o from W_UV_h (the latent part of each head's
 *                output) (cpu_mla_out)]
 *               [q, k = per-head norm(q, q_norm), norm(k, k_norm); or one norm over the whole
 *                projected q and k (qk_norm_whole: OLMo-2, OLMoE)]  [q, k, v clamped: clip_qkv]
 *               rope(q, p), rope(k, p) over the first rope_dim dims of each head, with
 *               the tables of the layer's kind (sliding layers: rope_local_theta)
 *               [none on layer_no_rope layers (SmolLM3)]
 *               K[p], V[p] = k, v   (cache rows of this layer)
 *               o = attention(q over K[f..p], V[f..p]) Wo^T [+bo], f = p - window + 1
 *                   on sliding layers (else 0); scores scaled by attn_scale, [soft-capped],
 *                   [the head's sink logit in the softmax's denominator: GPT-OSS]
 *               x += o  [o = norm(o, attn_post_norm) first: sandwich norms]
 *                       [o times residual_scale first (Granite)]
 *               h = norm(x, ffn_norm)   [h = x: post_norms_only]
 *               y = (act(h Wg^T [+bg]) * (h Wu^T [+bu])) Wd^T [+bd]    (SwiGLU / GeGLU)
 *                   [a MoE layer (Mixtral, Qwen2/3-MoE): y = sum over the token's chosen experts e,
 *                    in id order, of w_e * (act(h Wg_e^T) * (h Wu_e^T)) Wd_e^T, plus Qwen2-MoE's
 *                    sigmoid(h Wsg^T) * shared expert MLP(h); GPT-OSS: router and experts
 *                    with biases, the expert MLP swiglu_clamped(h Wgu_e^T + bgu_e) Wd_e^T + bd_e;
 *                    GLM-4.5 / DeepSeek-V3: sigmoid grouped routing (cpu_moe_route_sigmoid) and an
 *                    ungated shared expert; cpu_moe_block]
 *               x += y  [y = norm(y, ffn_post_norm) first]  [y times residual_scale first]
 *   logits = norm(x, out_norm) W_lm^T [/ logits_divisor (Granite)] [soft-capped]
 *            (W_lm = tok_embd when tied)
 * Every op computes each token's row with the same loop order whatever n is, so a
 * position's logits are bitwise identical in a 1-token call and inside a k-token
 * call. Tree calls (core/sd_runner.h "Trees") run the same code with per-token
 * positions and key lists: a node attends to the cache and then its ancestors in the
 * order plain decoding of its path would, so its logits are bitwise those of that
 * path decoded plainly; compaction moves the kept rows down (memcpy per row).
 *
 * Groups (core/sd_runner.h "Groups and batches"): the model instance is an
 * sd_cpu_group (weights, the paged K/V pool [n_layers][n_blocks * block_tokens][kv_dim],
 * activations and scratch for max_batch tokens); every runner of the group is one
 * sequence with its block table. One pass runs the tokens of several sequences
 * together: matmuls over all of them (each weight row read once per pass), RoPE, the
 * K/V write (each token into its own sequence's row) and attention per token over its
 * own sequence's keys (sd_cpu_attention_keys, through its block table). Every op
 * computes a token's row the same way whatever else is in the pass, so a sequence's
 * results are bitwise those of running it alone. sd_cpu_runner_create makes a
 * standalone runner: a private group of ceil(n_ctx / 16) blocks that the runner owns.
 * All memory is allocated when the group and its runners are created; a forward
 * allocates nothing. Deterministic: this is the oracle the CUDA backend is checked
 * against. Threads: a group may own a pool (sd_cpu_group_set_threads; kernels/cpu/
 * sd_cpu_pool.h), bound for the length of each pass; the linear layers (the LM head and the
 * experts' included) split their output rows over it, each value computed by one thread as on
 * one, so every result is bitwise the same for any thread count. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sd_cpu_runner.h"
#include "sd_alloc.h"
#include "sd_kv.h"
#include "sd_math.h"
#include "sd_cpu_attention.h"
#include "sd_cpu_dequant.h"
#include "sd_cpu_embed.h"
#include "sd_cpu_matmul.h"
#include "sd_cpu_pool.h"
#include "sd_cpu_rmsnorm.h"
#include "sd_cpu_rope.h"
#include "sd_cpu_swiglu.h"

typedef struct sd_cpu_group {
    sd_runner_group base;        /* must be first: core sees an sd_runner_group * */
    const sd_weights *w;         /* borrowed */
    sd_config cfg;
    int32_t q_dim;               /* n_heads * a_hd */
    int32_t kv_dim;              /* a_kvh * a_hd */
    int32_t a_hd, a_kvh;         /* the attention's head width and key/value heads: head_dim and n_kv_heads,
                                    or for latent attention (cfg.mla) kv_lora_rank + rope_dim and 1 */
    int latent;                  /* cfg.mla: the cache holds [c | k_pe] per token and layer, one row serving
                                    as key and value (v_cache == k_cache) */
    int64_t pool_rows;           /* n_blocks * block_tokens */
    float *k_cache;              /* [n_layers][pool_rows][kv_dim] */
    float *v_cache;              /* [n_layers][pool_rows][kv_dim] */
    float *x;                    /* [max_batch, hidden] residual stream */
    float *h;                    /* [max_batch, hidden] normed input / sublayer output */
    float *q;                    /* [max_batch, q_dim] */
    float *k;                    /* [max_batch, kv_dim] */
    float *v;                    /* [max_batch, kv_dim] */
    float *att;                  /* [max_batch, q_dim] attention output */
    float *gate;                 /* [max_batch, intermediate] */
    float *up;                   /* [max_batch, intermediate] */
    float *rowbuf;               /* [max(hidden, q_dim, intermediate)] a dequantised weight row */
    size_t row_max;              /* rowbuf's length (each pool worker has its own) */
    sd_cpu_pool *pool;           /* NULL: one thread */
    int pool_borrowed;           /* sd_cpu_group_use_pool: another group's pool, never destroyed here */
    int32_t n_ropes;             /* 1, or 2 when sliding layers have their own rope */
    float *rope_cos;             /* [n_ropes][max_batch, rope_dim/2] */
    float *rope_sin;             /* [n_ropes][max_batch, rope_dim/2] */
    double *inv_freq;            /* [n_ropes][rope_dim/2] */
    double rope_scale[2];        /* cos/sin multiplier of each rope (yarn, longrope) */
    sd_cpu_attn_opts attn;       /* score scale and soft-cap */
    float *sinks;                /* [n_layers][n_heads] attention sink logits (cfg.attn_sinks; else NULL) */
    double *scores;              /* [n_ctx] attention scores of one head */
    double *acc;                 /* [head_dim] attention accumulator */
    int64_t *keys;               /* [n_ctx] physical key rows of one token */
    /* the pool's workers' own attention scratch (cpu_attend_all): worker w (1..attn_parts-1) has
     * scores/acc/keys at (w - 1) * n_ctx (acc: * head_dim); attn_parts 1: attention on the caller */
    int32_t attn_parts;
    int attn_serial;             /* sd_cpu_group_set_attn_split(0): attention on the caller */
    double *w_scores, *w_acc;
    int64_t *w_keys;
    int32_t *tok;                /* [max_batch] token ids of a pass */
    int32_t *tpos;               /* [max_batch] absolute position of each token */
    int64_t *wrow;               /* [max_batch] physical row each token's K/V is written to */
    const sd_kv_table **ttab;    /* [max_batch] the block table of each token's sequence */
    int32_t *kpre;               /* [max_batch] logical rows [0, kpre) each token attends to first */
    int32_t *next;               /* [max_batch] then this many logical rows of kext (tree nodes) */
    int32_t *kext;               /* [max_batch][SD_RUNNER_TREE_MAX] a node's ancestors' rows and its own */
    float **lrow;                /* [max_batch] where each token's logits go (NULL: none) */
    /* mixture of experts (cfg.n_experts > 0; else NULL) */
    float *moe_logits;           /* [max_batch, n_experts] router logits */
    int32_t *moe_sel;            /* [max_batch, n_experts_used] chosen experts of each token */
    double *moe_w;               /* [max_batch, n_experts_used] their weights */
    int32_t *moe_tok;            /* [max_batch] tokens routed to the expert being run */
    double *moe_tw;              /* [max_batch] their weights for it */
    float *moe_x;                /* [max_batch, hidden] those tokens' normed inputs, gathered */
    double *moe_acc;             /* [max_batch, hidden] each token's weighted sum of expert outputs */
    float *moe_sg;               /* [max_batch] shared expert gate logits (Qwen2-MoE) */
    /* DeepSeek's latent attention (cfg.mla; else NULL) */
    float *mla_a;                /* [max_batch, max(q_lora_rank, kv_lora_rank + rope_dim)] */
    float *mla_b;                /* [max_batch, n_heads * max(head_dim, qk_nope_dim + v_head_dim)] */
    float *mla_c;                /* [max_batch, kv_lora_rank] one head's latent outputs, gathered */
    double *mla_acc;             /* [max_batch, kv_lora_rank] W_UK_h^T q_nope being accumulated */
    float *mtp_u;                /* an MTP layer (w->mtp_eh_proj): [max_batch, 2 * hidden] [enorm(e) ; hnorm(h)] */
} sd_cpu_group;

typedef struct sd_cpu_runner {
    sd_runner base;              /* must be first: the engine sees an sd_runner * */
    sd_cpu_group *g;
    int owns_group;              /* standalone: the runner frees its private group */
} sd_cpu_runner;

static void cpu_group_destroy(sd_runner_group *gb) {
    sd_cpu_group *g = (sd_cpu_group *)gb;
    if (!g) return;
    if (g->latent) g->v_cache = NULL; /* the keys are the values */
    void *bufs[] = {g->k_cache, g->v_cache, g->x,        g->h,        g->q,      g->k,      g->v,
                    g->att,     g->gate,    g->up,       g->rowbuf,   g->rope_cos, g->rope_sin, g->inv_freq,
                    g->scores,  g->acc,     g->keys,     g->w_scores, g->w_acc,  g->w_keys, g->tok,      g->tpos,   g->wrow,   (void *)g->ttab,
                    g->kpre,    g->next,    g->kext,     (void *)g->lrow, g->moe_logits, g->moe_sel, g->moe_w,
                    g->moe_tok, g->moe_tw,  g->moe_x,    g->moe_acc,  g->moe_sg, g->sinks,
                    g->mla_a,   g->mla_b,   g->mla_c,    g->mla_acc, g->mtp_u};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sd_free(bufs[i]);
    if (!g->pool_borrowed) sd_cpu_pool_destroy(g->pool);
    sd_kv_pool_free(&g->base.pool);
    sd_free(g);
}

static void cpu_destroy(sd_runner *base) {
    sd_cpu_runner *r = (sd_cpu_runner *)base;
    if (!r) return;
    sd_cpu_group *g = r->g;
    sd_runner_group_detach(base);
    if (r->owns_group) cpu_group_destroy(&g->base);
    sd_free(r);
}

/* Token t of a pass attends to its sequence's logical rows [0, kpre[t]) and then to
 * rows kext[t][0 .. next[t]) (a tree node's ancestors and itself; none in a chain),
 * each mapped through the sequence's block table. That virtual key sequence holds
 * positions 0 .. p in order (p = tpos[t]), so layer l's window keeps its tail: the
 * keys of positions >= sd_cfg_first_key(l, p), the same keys in the same order for a
 * chain token and a tree node at the same place of the same path. Writes them to keys;
 * returns their count. */
static int32_t cpu_attn_keys(const sd_cpu_group *g, int32_t l, int32_t t, int64_t *keys) {
    const sd_kv_table *tab = g->ttab[t];
    const int32_t bt = g->base.pool.block_tokens, npre = g->kpre[t], next = g->next[t];
    const int32_t first = sd_cfg_first_key(&g->cfg, l, g->tpos[t]);
    const int32_t *ext = g->kext + (int64_t)t * SD_RUNNER_TREE_MAX;
    int32_t nk = 0;
    for (int32_t j = first; j < npre; j++) keys[nk++] = sd_kv_row(tab, bt, j);
    for (int32_t j = first > npre ? first - npre : 0; j < next; j++) keys[nk++] = sd_kv_row(tab, bt, ext[j]);
    return nk;
}

/* One layer's attention over the n tokens of a pass, as units (token t, head h) = t * n_heads + h;
 * part `part` of n_parts takes the units u with u % n_parts == part (interleaved: a causal
 * prefill's long and short rows spread evenly), each head with sd_cpu_attention_heads' exact
 * arithmetic, so g->att is bitwise that of one thread. */
typedef struct cpu_attn_job {
    sd_cpu_group *g;
    int32_t l, n;
    const float *kc, *vc;
} cpu_attn_job;

static void cpu_attn_part(void *arg, int part, int n_parts, float *scratch) {
    (void)scratch;
    const cpu_attn_job *j = arg;
    sd_cpu_group *g = j->g;
    const sd_config *c = &g->cfg;
    const int64_t cap = g->base.n_ctx;
    double *scores = part ? g->w_scores + (part - 1) * cap : g->scores;
    double *acc = part ? g->w_acc + (int64_t)(part - 1) * g->a_hd : g->acc;
    int64_t *keys = part ? g->w_keys + (part - 1) * cap : g->keys;
    sd_cpu_attn_opts opt = g->attn;
    if (g->sinks) opt.sinks = g->sinks + (int64_t)j->l * c->n_heads;
    for (int32_t t = 0; t < j->n; t++) {
        const int64_t u0 = (int64_t)t * c->n_heads; /* this part's first head of token t */
        const int32_t h0 = (int32_t)(((part - u0) % n_parts + n_parts) % n_parts);
        if (h0 >= c->n_heads) continue;
        const int32_t nk = cpu_attn_keys(g, j->l, t, keys);
        sd_cpu_attention_heads(g->q + (int64_t)t * g->q_dim, j->kc, j->vc, keys, nk, c->n_heads, g->a_kvh, g->a_hd,
                               &opt, h0, c->n_heads, n_parts, scores, acc, g->att + (int64_t)t * g->q_dim);
    }
}

/* Layer l's attention for the pass's n tokens: split over the pool's threads when the work
 * (key rows x heads x head_dim over the tokens) reaches its threshold, else on the caller. */
static void cpu_attend_all(sd_cpu_group *g, int32_t l, int32_t n, const float *kc, const float *vc) {
    cpu_attn_job job = {g, l, n, kc, vc};
    int parts = g->pool ? sd_cpu_pool_threads(g->pool) : 1;
    if (g->attn_serial) parts = 1;
    else if (parts > g->attn_parts) parts = g->attn_parts;
    if (parts > n * g->cfg.n_heads) parts = n * g->cfg.n_heads;
    int64_t work = 0;
    for (int32_t t = 0; t < n && parts > 1; t++) work += (int64_t)g->kpre[t] + g->next[t];
    work *= (int64_t)g->cfg.n_heads * g->a_hd;
    if (parts > 1 && work >= sd_cpu_pool_min_work(g->pool)) sd_cpu_pool_run(g->pool, parts, cpu_attn_part, &job, NULL);
    else cpu_attn_part(&job, 0, 1, NULL);
}

/* x += the sublayer output in h [n, hidden], times residual_scale when set (Granite). */
static void cpu_residual(sd_cpu_group *g, int32_t n) {
    const int64_t m = (int64_t)n * g->cfg.hidden_size;
    const float s = g->cfg.residual_scale;
    if (s > 0.0f) sd_cpu_scale(g->h, m, s);
    sd_cpu_add(g->x, g->h, m);
}

/* A sublayer's input: norm(x) in h, or x itself when the family has no pre-norms (OLMo-2). */
static const float *cpu_sublayer_in(sd_cpu_group *g, const sd_tensor *norm, int32_t n) {
    const sd_config *c = &g->cfg;
    if (c->post_norms_only) return g->x;
    sd_cpu_rmsnorm_off(g->x, norm, (double)c->norm_offset, n, c->hidden_size, (double)c->rms_norm_eps, g->h);
    return g->h;
}

/* q, k (and v) after the projections: per-head or whole-projection norms, clip_qkv. */
static void cpu_qkv_post(sd_cpu_group *g, const sd_layer *L, int32_t n) {
    const sd_config *c = &g->cfg;
    const double eps = (double)c->rms_norm_eps, off = (double)c->norm_offset;
    if (c->qk_norm) { /* q [n * n_heads, hd] and k [n * n_kv, hd] row by row */
        sd_cpu_rmsnorm_off(g->q, &L->q_norm, off, n * c->n_heads, c->head_dim, eps, g->q);
        sd_cpu_rmsnorm_off(g->k, &L->k_norm, off, n * c->n_kv_heads, c->head_dim, eps, g->k);
    } else if (c->qk_norm_whole) { /* q [n, q_dim] and k [n, kv_dim]: one norm per token */
        sd_cpu_rmsnorm_off(g->q, &L->q_norm, off, n, g->q_dim, eps, g->q);
        sd_cpu_rmsnorm_off(g->k, &L->k_norm, off, n, g->kv_dim, eps, g->k);
    }
    if (c->clip_qkv > 0.0f) {
        sd_cpu_clamp(g->q, (int64_t)n * g->q_dim, c->clip_qkv);
        sd_cpu_clamp(g->k, (int64_t)n * g->kv_dim, c->clip_qkv);
        sd_cpu_clamp(g->v, (int64_t)n * g->kv_dim, c->clip_qkv);
    }
}

/* DeepSeek's latent attention (core/sd_weights.h, mla) of the pass's n tokens, absorbed: kv_b_proj's
 * rows of head h are W_UK_h [qk_nope_dim, KL] (its key part) then W_UV_h [v_head_dim, KL]; a head's
 * transformers key is [W_UK_h c | k_pe] and its value W_UV_h c, so its score is
 * (W_UK_h^T q_nope) . c + q_pe . k_pe and its output W_UV_h (sum_j p_j c_j). The cache keeps one row
 * per token, k = [c | k_pe] (KL + R floats, c = the normed kv latent), the value too (its last R
 * outputs are ignored); head h's query is [W_UK_h^T q_nope_h | q_pe_h]; the rope rotates the last R
 * values (cpu_attn_block). Writes q [n, n_heads, KL + R] and k [n, KL + R]. */
static void cpu_mla_qkv(sd_cpu_group *g, const sd_layer *L, const float *in, int32_t n) {
    const sd_config *c = &g->cfg;
    const int32_t nh = c->n_heads, hd = c->head_dim, R = sd_cfg_rope_dim(c), N = c->qk_nope_dim;
    const int32_t VD = c->v_head_dim, KL = c->kv_lora_rank, QL = c->q_lora_rank, AH = g->a_hd;
    const double eps = 1e-6; /* DeepseekV3RMSNorm's default: the q_a / kv_a norms never read rms_norm_eps */
    float *qf = g->mla_b;    /* [n, nh * hd], each head as transformers lays it out: [nope | pe] */
    if (QL) {
        sd_cpu_matmul(in, n, &L->wq_a, &L->bq_a, g->mla_a, g->rowbuf);
        sd_cpu_rmsnorm_off(g->mla_a, &L->q_a_norm, 0.0, n, QL, eps, g->mla_a);
        sd_cpu_matmul(g->mla_a, n, &L->wq_b, NULL, qf, g->rowbuf);
    } else {
        sd_cpu_matmul(in, n, &L->wq, NULL, qf, g->rowbuf);
    }
    /* q_lat = W_UK_h^T q_nope per head, each W row read once for the pass (double sums, i in order) */
    for (int32_t h = 0; h < nh; h++) {
        memset(g->mla_acc, 0, sizeof(double) * (size_t)n * (size_t)KL);
        for (int32_t i = 0; i < N; i++) {
            const float *w = sd_cpu_row_f32(&L->wkv_b, (int64_t)h * (N + VD) + i, g->rowbuf);
            for (int32_t t = 0; t < n; t++) {
                const double qi = (double)qf[((int64_t)t * nh + h) * hd + i];
                double *acc = g->mla_acc + (int64_t)t * KL;
                for (int32_t j = 0; j < KL; j++) acc[j] += qi * (double)w[j];
            }
        }
        for (int32_t t = 0; t < n; t++) {
            float *dst = g->q + ((int64_t)t * nh + h) * AH;
            const double *acc = g->mla_acc + (int64_t)t * KL;
            for (int32_t j = 0; j < KL; j++) dst[j] = (float)acc[j];
            memcpy(dst + KL, qf + ((int64_t)t * nh + h) * hd + N, sizeof(float) * (size_t)R);
        }
    }
    sd_cpu_matmul(in, n, &L->wkv_a, &L->bkv_a, g->mla_a, g->rowbuf); /* [n, KL + R]: latent | k_pe */
    for (int32_t t = 0; t < n; t++) {
        const float *a = g->mla_a + (int64_t)t * (KL + R);
        float *k = g->k + (int64_t)t * AH;
        sd_cpu_rmsnorm_off(a, &L->kv_a_norm, 0.0, 1, KL, eps, k);
        memcpy(k + KL, a + KL, sizeof(float) * (size_t)R);
    }
}

/* Each head's output W_UV_h (the first KL values of its attention output), [n, n_heads * v_head_dim]
 * into q (free after the attention) for o_proj: per head, its n latent outputs gathered, one pass
 * over W_UV_h's rows. */
static const float *cpu_mla_out(sd_cpu_group *g, const sd_layer *L, int32_t n) {
    const sd_config *c = &g->cfg;
    const int32_t nh = c->n_heads, N = c->qk_nope_dim, VD = c->v_head_dim, KL = c->kv_lora_rank, AH = g->a_hd;
    if (L->wkv_b.dtype == SD_FP8 || sd_dtype_is_int(L->wkv_b.dtype)) {
        /* quantized: its scales make no row view, one decoded row at a time */
        for (int32_t h = 0; h < nh; h++)
            for (int32_t v = 0; v < VD; v++) {
                const float *w = sd_cpu_row_f32(&L->wkv_b, (int64_t)h * (N + VD) + N + v, g->rowbuf);
                for (int32_t t = 0; t < n; t++)
                    g->q[((int64_t)t * nh + h) * VD + v] =
                        (float)sd_cpu_dot(w, g->att + ((int64_t)t * nh + h) * AH, KL);
            }
        return g->q;
    }
    sd_tensor wuv = L->wkv_b; /* rows h * (N + VD) + N .. + VD of kv_b_proj */
    wuv.shape[0] = VD;
    const size_t esz = sd_dtype_size(L->wkv_b.dtype);
    for (int32_t h = 0; h < nh; h++) {
        for (int32_t t = 0; t < n; t++) {
            memcpy(g->mla_c + (int64_t)t * KL, g->att + ((int64_t)t * nh + h) * AH, sizeof(float) * (size_t)KL);
            g->lrow[t] = g->q + ((int64_t)t * nh + h) * VD;
        }
        wuv.data = (const char *)L->wkv_b.data + (size_t)((int64_t)h * (N + VD) + N) * (size_t)KL * esz;
        sd_cpu_matmul_rows(g->mla_c, n, &wuv, NULL, g->lrow, g->rowbuf);
    }
    return g->q;
}

/* The attention block of layer l over the n tokens of a pass (x += its output). */
static void cpu_attn_block(sd_cpu_group *g, int32_t l, const sd_layer *L, float *kc, float *vc, int32_t n) {
    const sd_config *c = &g->cfg;
    const int32_t hidden = c->hidden_size, hd = g->a_hd, rd = sd_cfg_rope_dim(c), half = rd / 2;
    const int32_t ro = g->latent ? c->kv_lora_rank : 0; /* where each head's rotary values start */
    const int32_t q_dim = g->q_dim, kv_dim = g->kv_dim;
    const double eps = (double)c->rms_norm_eps, off = (double)c->norm_offset;
    const float *in = cpu_sublayer_in(g, &L->attn_norm, n);
    if (c->mla) {
        cpu_mla_qkv(g, L, in, n);
    } else {
        sd_cpu_matmul(in, n, &L->wq, &L->bq, g->q, g->rowbuf);
        sd_cpu_matmul(in, n, &L->wk, &L->bk, g->k, g->rowbuf);
        sd_cpu_matmul(in, n, &L->wv, &L->bv, g->v, g->rowbuf);
        cpu_qkv_post(g, L, n);
    }
    const int64_t tab = (g->n_ropes > 1 && c->layer_sliding[l]) ? (int64_t)g->base.max_batch * half : 0;
    for (int32_t t = 0; t < n; t++) {
        const float *ct = g->rope_cos + tab + (int64_t)t * half, *st = g->rope_sin + tab + (int64_t)t * half;
        if (!c->layer_no_rope[l] && c->rope_interleaved) {
            sd_cpu_rope_part_interleaved(g->q + (int64_t)t * q_dim + ro, c->n_heads, hd, rd, ct, st);
            sd_cpu_rope_part_interleaved(g->k + (int64_t)t * kv_dim + ro, g->a_kvh, hd, rd, ct, st);
        } else if (!c->layer_no_rope[l]) {
            sd_cpu_rope_part(g->q + (int64_t)t * q_dim + ro, c->n_heads, hd, rd, ct, st);
            sd_cpu_rope_part(g->k + (int64_t)t * kv_dim + ro, g->a_kvh, hd, rd, ct, st);
        }
        if (c->q_pos_beta > 0.0f) { /* Ministral 3: 1 + beta ln(1 + floor(p / orig)), in float as transformers */
            const float s = 1.0f + c->q_pos_beta * logf(1.0f + floorf((float)g->tpos[t] / (float)c->q_pos_orig));
            float *q = g->q + (int64_t)t * q_dim;
            for (int32_t i = 0; s != 1.0f && i < q_dim; i++) q[i] *= s;
        }
        memcpy(kc + g->wrow[t] * kv_dim, g->k + (int64_t)t * kv_dim, sizeof(float) * (size_t)kv_dim);
        if (!g->latent) memcpy(vc + g->wrow[t] * kv_dim, g->v + (int64_t)t * kv_dim, sizeof(float) * (size_t)kv_dim);
    }
    cpu_attend_all(g, l, n, kc, vc);
    sd_cpu_matmul(c->mla ? cpu_mla_out(g, L, n) : g->att, n, &L->wo, &L->bo, g->h, g->rowbuf);
    if (c->sandwich_norms) sd_cpu_rmsnorm_off(g->h, &L->attn_post_norm, off, n, hidden, eps, g->h);
    cpu_residual(g, n);
}

/* Token t's experts: the n_experts_used largest of p = softmax(router logits) in double (ties:
 * the lower id, as a stable descending sort), weights p — divided by their sum when
 * norm_topk_prob (core/sd_weights.h). DeepSeek-V2 (SD_ROUTE_SOFTMAX_GROUPED): only the experts of
 * the topk_group groups with the largest maxima compete (n_group > 1), and the weights are p
 * times routed_scaling_factor. */
static void cpu_moe_route(sd_cpu_group *g, int32_t t) {
    const sd_config *c = &g->cfg;
    const int32_t E = c->n_experts, K = c->n_experts_used;
    const float *r = g->moe_logits + (int64_t)t * E;
    int32_t *sel = g->moe_sel + (int64_t)t * K;
    double *w = g->moe_w + (int64_t)t * K;
    double mx = -INFINITY, z = 0.0, sum = 0.0;
    uint8_t open[SD_CFG_MAX_EXPERTS];
    for (int32_t e = 0; e < E; e++) mx = (double)r[e] > mx ? (double)r[e] : mx;
    for (int32_t e = 0; e < E; e++) z += exp((double)r[e] - mx);
    const int grouped = c->moe_route == SD_ROUTE_SOFTMAX_GROUPED && c->n_group > 1;
    memset(open, !grouped, (size_t)E);
    if (grouped) { /* the topk_group groups of the largest maxima (p is monotone in r); ties: the lower group */
        const int32_t G = c->n_group, per = E / G;
        uint8_t gtaken[SD_CFG_MAX_EXPERTS] = {0};
        for (int32_t k = 0; k < c->topk_group; k++) {
            int32_t best = -1;
            float bmax = 0.0f;
            for (int32_t q = 0; q < G; q++) {
                if (gtaken[q]) continue;
                float m = r[q * per];
                for (int32_t e = q * per + 1; e < (q + 1) * per; e++) m = r[e] > m ? r[e] : m;
                if (best < 0 || m > bmax) best = q, bmax = m;
            }
            gtaken[best] = 1;
            memset(open + best * per, 1, (size_t)per);
        }
    }
    for (int32_t k = 0; k < K; k++) { /* selection: K passes over E (K, E small); open experts >= K */
        int32_t best = -1;
        for (int32_t e = 0; e < E; e++)
            if (open[e] && (best < 0 || r[e] > r[best])) best = e;
        open[best] = 0;
        sel[k] = best;
        w[k] = exp((double)r[best] - mx) / z;
        sum += w[k];
    }
    if (c->norm_topk_prob)
        for (int32_t k = 0; k < K; k++) w[k] /= sum;
    if (c->moe_route == SD_ROUTE_SOFTMAX_GROUPED)
        for (int32_t k = 0; k < K; k++) w[k] *= (double)c->routed_scaling;
}

/* DeepSeek-V3 / GLM-4.5 routing (core/sd_weights.h, SD_ROUTE_SIGMOID_GROUPED) of token t, in double: scores
 * s = sigmoid(r), choice values s + the layer's score bias; the topk_group groups of the best
 * top-2 sums (ties: the lower group), then the n_experts_used best choice values inside them
 * (ties: the lower id); weights s / (sum + 1e-20) when norm_topk_prob, times the scaling. */
static void cpu_moe_route_sigmoid(sd_cpu_group *g, const sd_layer *L, int32_t t) {
    const sd_config *c = &g->cfg;
    const int32_t E = c->n_experts, K = c->n_experts_used, G = c->n_group, per = E / G;
    const float *r = g->moe_logits + (int64_t)t * E;
    int32_t *sel = g->moe_sel + (int64_t)t * K;
    double *w = g->moe_w + (int64_t)t * K;
    double sc[SD_CFG_MAX_EXPERTS], ch[SD_CFG_MAX_EXPERTS], gs[SD_CFG_MAX_EXPERTS];
    uint8_t open[SD_CFG_MAX_EXPERTS], gopen[SD_CFG_MAX_EXPERTS];
    for (int32_t e = 0; e < E; e++) {
        sc[e] = 1.0 / (1.0 + exp(-(double)r[e]));
        ch[e] = sc[e] + (double)sd_cpu_elem(&L->router_score_bias, e);
        open[e] = 0;
    }
    for (int32_t q = 0; q < G; q++) { /* a group's score: its two largest choice values */
        double a = -INFINITY, b = -INFINITY;
        for (int32_t e = q * per; e < (q + 1) * per; e++) {
            if (ch[e] > a) b = a, a = ch[e];
            else if (ch[e] > b) b = ch[e];
        }
        gs[q] = a + b;
        gopen[q] = 0;
    }
    for (int32_t k = 0; k < c->topk_group; k++) {
        int32_t best = -1;
        for (int32_t q = 0; q < G; q++)
            if (!gopen[q] && (best < 0 || gs[q] > gs[best])) best = q;
        gopen[best] = 1;
        for (int32_t e = best * per; e < (best + 1) * per; e++) open[e] = 1;
    }
    double sum = 0.0;
    for (int32_t k = 0; k < K; k++) { /* open experts >= K (sd_config_validate) */
        int32_t best = -1;
        for (int32_t e = 0; e < E; e++)
            if (open[e] && (best < 0 || ch[e] > ch[best])) best = e;
        open[best] = 0;
        sel[k] = best;
        w[k] = sc[best];
        sum += w[k];
    }
    const double scale = (double)c->routed_scaling;
    for (int32_t k = 0; k < K; k++) w[k] = (c->norm_topk_prob ? w[k] / (sum + 1e-20) : w[k]) * scale;
}

/* Qwen2-MoE's shared expert: every token's acc += sigmoid(h . shared_gate) * shared MLP(h),
 * after the routed experts (transformers: expert_output + sigmoid(gate) * shared_output);
 * GLM-4.5's (cfg.shared_ungated) is added as is. */
static void cpu_moe_shared(sd_cpu_group *g, const sd_layer *L, int32_t n) {
    const sd_config *c = &g->cfg;
    const int32_t H = c->hidden_size;
    if (!c->shared_ungated) sd_cpu_matmul(g->h, n, &L->shared_gate, NULL, g->moe_sg, g->rowbuf);
    sd_cpu_matmul(g->h, n, &L->shared->w_gate, NULL, g->gate, g->rowbuf);
    sd_cpu_matmul(g->h, n, &L->shared->w_up, NULL, g->up, g->rowbuf);
    sd_cpu_glu((int32_t)c->act, g->gate, g->up, (int64_t)n * c->shared_expert_intermediate, g->gate);
    sd_cpu_matmul(g->gate, n, &L->shared->w_down, NULL, g->moe_x, g->rowbuf);
    for (int32_t t = 0; t < n; t++) {
        const double s = c->shared_ungated ? 1.0 : 1.0 / (1.0 + exp(-(double)g->moe_sg[t]));
        double *acc = g->moe_acc + (int64_t)t * H;
        const float *y = g->moe_x + (int64_t)t * H;
        for (int32_t d = 0; d < H; d++) acc[d] += s * (double)y[d];
    }
}

/* The MoE MLP over the n tokens of a pass (x += its output): each expert, in id order, runs
 * the gated MLP over the tokens routed to it, gathered into one matmul batch; a token's sum
 * takes its experts in id order. Every value is computed per token row as in a 1-token pass
 * (matmuls are batch invariant), so the pass stays bitwise a token-by-token run. */
static void cpu_moe_block(sd_cpu_group *g, const sd_layer *L, int32_t n) {
    const sd_config *c = &g->cfg;
    const int32_t H = c->hidden_size, I = c->moe_intermediate, K = c->n_experts_used;
    sd_cpu_matmul(g->h, n, &L->router, &L->router_bias, g->moe_logits, g->rowbuf);
    for (int32_t t = 0; t < n; t++) {
        if (c->moe_route == SD_ROUTE_SIGMOID_GROUPED) cpu_moe_route_sigmoid(g, L, t);
        else cpu_moe_route(g, t);
    }
    memset(g->moe_acc, 0, sizeof(double) * (size_t)n * (size_t)H);
    for (int32_t e = 0; e < c->n_experts; e++) {
        int32_t m = 0;
        for (int32_t t = 0; t < n; t++)
            for (int32_t k = 0; k < K; k++)
                if (g->moe_sel[(int64_t)t * K + k] == e) {
                    g->moe_tok[m] = t;
                    g->moe_tw[m] = g->moe_w[(int64_t)t * K + k];
                    memcpy(g->moe_x + (int64_t)m * H, g->h + (int64_t)t * H, sizeof(float) * (size_t)H);
                    m++;
                }
        if (!m) continue;
        const sd_expert *ex = &L->experts[e];
        if (ex->w_gate_up.data) { /* GPT-OSS: one interleaved [m, 2I] projection, clamped SwiGLU */
            sd_cpu_matmul(g->moe_x, m, &ex->w_gate_up, &ex->b_gate_up, g->gate, g->rowbuf);
            sd_cpu_swiglu_clamped(g->gate, (int64_t)m * I, (double)c->glu_alpha, (double)c->glu_limit, g->gate);
        } else {
            sd_cpu_matmul(g->moe_x, m, &ex->w_gate, NULL, g->gate, g->rowbuf);
            sd_cpu_matmul(g->moe_x, m, &ex->w_up, NULL, g->up, g->rowbuf);
            sd_cpu_glu((int32_t)c->act, g->gate, g->up, (int64_t)m * I, g->gate);
        }
        sd_cpu_matmul(g->gate, m, &ex->w_down, &ex->b_down, g->moe_x, g->rowbuf);
        for (int32_t j = 0; j < m; j++) {
            double *acc = g->moe_acc + (int64_t)g->moe_tok[j] * H;
            const float *y = g->moe_x + (int64_t)j * H;
            for (int32_t d = 0; d < H; d++) acc[d] += g->moe_tw[j] * (double)y[d];
        }
    }
    if (L->shared) cpu_moe_shared(g, L, n);
    for (int64_t i = 0; i < (int64_t)n * H; i++) g->h[i] = (float)g->moe_acc[i];
}

/* The MLP block of a layer over the n tokens of a pass (x += its output). */
static void cpu_mlp_block(sd_cpu_group *g, const sd_layer *L, int32_t n) {
    const sd_config *c = &g->cfg;
    const int32_t hidden = c->hidden_size, inter = c->intermediate_size;
    const double eps = (double)c->rms_norm_eps, off = (double)c->norm_offset;
    if (c->post_norms_only) memcpy(g->h, g->x, sizeof(float) * (size_t)n * (size_t)hidden);
    else sd_cpu_rmsnorm_off(g->x, &L->ffn_norm, off, n, hidden, eps, g->h);
    if (L->experts) {
        cpu_moe_block(g, L, n);
    } else {
        sd_cpu_matmul(g->h, n, &L->w_gate, &L->b_gate, g->gate, g->rowbuf);
        sd_cpu_matmul(g->h, n, &L->w_up, &L->b_up, g->up, g->rowbuf);
        sd_cpu_glu((int32_t)c->act, g->gate, g->up, (int64_t)n * inter, g->gate);
        sd_cpu_matmul(g->gate, n, &L->w_down, &L->b_down, g->h, g->rowbuf);
    }
    if (c->sandwich_norms) sd_cpu_rmsnorm_off(g->h, &L->ffn_post_norm, off, n, hidden, eps, g->h);
    cpu_residual(g, n);
}

/* Lay out segment s's tokens from index t0 of the pass: ids, positions, the rows
 * their K/V go to and the keys they see. A chain token at pos + i sees rows
 * [0, pos + i]; tree node v at depth k sees rows [0, base) and then its ancestors'
 * rows base + a root-first and its own. Returns the tokens laid out. */
static int32_t cpu_layout_seg(sd_cpu_group *g, const sd_runner_seg *s, int32_t t0) {
    const sd_kv_table *tab = &s->r->kv;
    const sd_runner_tree *tr = &s->r->tree;
    const int32_t bt = g->base.pool.block_tokens;
    for (int32_t i = 0; i < s->n; i++) {
        const int32_t t = t0 + i;
        g->ttab[t] = tab;
        g->tok[t] = s->tokens[i];
        if (!s->parent) {
            g->tpos[t] = s->pos + i;
            g->kpre[t] = s->pos + i + 1;
            g->next[t] = 0;
            g->wrow[t] = sd_kv_row(tab, bt, s->pos + i);
            continue;
        }
        const int32_t v = s->first + i, k = tr->depth[v];
        int32_t *rows = g->kext + (int64_t)t * SD_RUNNER_TREE_MAX;
        for (int32_t a = v, d = k; d >= 0; a = tr->parent[a], d--) rows[d] = tr->base + a;
        g->tpos[t] = tr->base + k;
        g->kpre[t] = tr->base;
        g->next[t] = k + 1;
        g->wrow[t] = sd_kv_row(tab, bt, tr->base + v);
    }
    return s->n;
}

/* The LM head of every token whose segment wants logits, in one pass over W_lm. */
static void cpu_logits(sd_cpu_group *g, const sd_runner_seg *segs, int32_t n_segs, int32_t n) {
    const sd_config *c = &g->cfg;
    int any = 0;
    for (int32_t i = 0, t = 0; i < n_segs; i++)
        for (int32_t k = 0; k < segs[i].n; k++, t++) {
            g->lrow[t] = segs[i].logits ? segs[i].logits + (int64_t)k * c->vocab_size : NULL;
            any |= segs[i].logits != NULL;
        }
    if (!any) return;
    sd_cpu_rmsnorm_off(g->x, &g->w->out_norm, (double)c->norm_offset, n, c->hidden_size, (double)c->rms_norm_eps,
                       g->h);
    sd_cpu_matmul_rows(g->h, n, &g->w->lm_head, NULL, g->lrow, g->rowbuf);
    if (c->logits_divisor > 0.0f) /* Granite: logits / logits_scaling */
        for (int32_t t = 0; t < n; t++)
            if (g->lrow[t]) sd_cpu_div(g->lrow[t], c->vocab_size, c->logits_divisor);
    if (c->final_softcap > 0.0f)
        for (int32_t t = 0; t < n; t++)
            if (g->lrow[t]) sd_cpu_softcap(g->lrow[t], c->vocab_size, (double)c->final_softcap);
}

/* The capture hook (core/sd_runner.h "Captured hidden states"): the residual stream x
 * is hs[level] (level n_layers + 1: x after the final norm, computed into h); every token
 * of a segment with aux set gets it in its row's block k (capture[k] == level). */
static void cpu_capture(sd_cpu_group *g, const sd_runner_seg *segs, int32_t n_segs, int32_t level, int32_t n) {
    const sd_runner_group *b = &g->base;
    const sd_config *c = &g->cfg;
    const int32_t H = c->hidden_size, nc = b->n_capture;
    for (int32_t k = 0; k < nc; k++) {
        if (b->capture[k] != level) continue;
        const float *src = g->x;
        if (level > c->n_layers) {
            sd_cpu_rmsnorm_off(g->x, &g->w->out_norm, (double)c->norm_offset, n, H, (double)c->rms_norm_eps, g->h);
            src = g->h;
        }
        for (int32_t i = 0, t = 0; i < n_segs; t += segs[i].n, i++)
            for (int32_t j = 0; segs[i].aux && j < segs[i].n; j++)
                memcpy(segs[i].aux + ((int64_t)j * nc + k) * H, src + (int64_t)(t + j) * H, sizeof(float) * (size_t)H);
    }
}

/* An MTP layer's input (core/sd_weights.h): x = eh_proj([enorm(e) ; hnorm(h)]) for each token, e
 * its embedding in x (zeroed at position 0, as vLLM masks it), h its segment's hidden row. */
static void cpu_mtp_front(sd_cpu_group *g, const sd_runner_seg *segs, int32_t n_segs, int32_t n) {
    const sd_config *c = &g->cfg;
    const int32_t H = c->hidden_size;
    const double eps = (double)c->rms_norm_eps, off = (double)c->norm_offset;
    for (int32_t t = 0; t < n; t++)
        if (g->tpos[t] == 0) memset(g->x + (int64_t)t * H, 0, sizeof(float) * (size_t)H);
    for (int32_t i = 0, t = 0; i < n_segs; t += segs[i].n, i++)
        for (int32_t j = 0; j < segs[i].n; j++) {
            float *u = g->mtp_u + (int64_t)(t + j) * 2 * H;
            sd_cpu_rmsnorm_off(g->x + (int64_t)(t + j) * H, &g->w->mtp_enorm, off, 1, H, eps, u);
            sd_cpu_rmsnorm_off(segs[i].hin + (int64_t)j * H, &g->w->mtp_hnorm, off, 1, H, eps, u + H);
        }
    sd_cpu_matmul(g->mtp_u, n, &g->w->mtp_eh_proj, NULL, g->x, g->rowbuf);
}

/* One pass over segments whose blocks are held (total tokens <= max_batch): every
 * runner ends at the row its segment ends at. */
static void cpu_pass(sd_cpu_group *g, const sd_runner_seg *segs, int32_t n_segs) {
    sd_cpu_pool *prev = sd_cpu_pool_bind(g->pool);
    const sd_config *c = &g->cfg;
    const sd_weights *m = g->w;
    const int32_t half = sd_cfg_rope_dim(c) / 2;
    const int64_t layer_stride = g->pool_rows * g->kv_dim, tab = (int64_t)g->base.max_batch * half;
    int32_t n = 0;
    for (int32_t i = 0; i < n_segs; i++) n += cpu_layout_seg(g, &segs[i], n);
    for (int32_t k = 0; k < g->n_ropes; k++)
        for (int32_t t = 0; t < n; t++)
            sd_cpu_rope_table_scaled(g->inv_freq + k * half, half, g->tpos[t], g->rope_scale[k],
                                     g->rope_cos + k * tab + (int64_t)t * half, g->rope_sin + k * tab + (int64_t)t * half);
    sd_cpu_embed(&m->tok_embd, g->tok, n, g->x);
    if (c->embed_scale > 0.0f) sd_cpu_scale(g->x, (int64_t)n * c->hidden_size, c->embed_scale);
    if (m->mtp_eh_proj.data) cpu_mtp_front(g, segs, n_segs, n);
    /* The layers, one after the other; the capture hook takes hs[l] before layer l,
     * hs[n_layers] after the last and hs[n_layers + 1] after the final norm (hidden states for
     * a drafter head). */
    const int capture = g->base.n_capture > 0;
    for (int32_t l = 0; l < c->n_layers; l++) {
        if (capture) cpu_capture(g, segs, n_segs, l, n);
        float *kc = g->k_cache + l * layer_stride, *vc = g->v_cache + l * layer_stride;
        cpu_attn_block(g, l, &m->layers[l], kc, vc, n);
        cpu_mlp_block(g, &m->layers[l], n);
    }
    if (capture) {
        cpu_capture(g, segs, n_segs, c->n_layers, n);
        cpu_capture(g, segs, n_segs, c->n_layers + 1, n);
    }
    for (int32_t i = 0; i < n_segs; i++) {
        const sd_runner_seg *s = &segs[i];
        s->r->kv_len = s->parent ? s->pos + s->first + s->n : s->pos + s->n;
    }
    cpu_logits(g, segs, n_segs, n);
    sd_cpu_pool_bind(prev);
}

static specdec_status cpu_group_forward(sd_runner_group *gb, const sd_runner_seg *segs, int32_t n_segs) {
    cpu_pass((sd_cpu_group *)gb, segs, n_segs);
    return SPECDEC_OK;
}

static specdec_status cpu_forward(sd_runner *base, const int32_t *tokens, int32_t n, int32_t pos, float *logits) {
    sd_cpu_runner *r = (sd_cpu_runner *)base;
    const sd_config *c = &r->g->cfg;

    /* Validate everything before touching any state: a failed check changes nothing. */
    if (!tokens) return sd_fail(&base->err, SPECDEC_ERR_INVALID_ARGUMENT, "cpu forward: tokens is NULL");
    if (n <= 0) return sd_fail(&base->err, SPECDEC_ERR_INVALID_ARGUMENT, "cpu forward: n_tokens = %d (must be > 0)", n);
    if (n > base->max_batch)
        return sd_fail(&base->err, SPECDEC_ERR_INVALID_ARGUMENT, "cpu forward: n_tokens = %d exceeds max_batch %d", n,
                       base->max_batch);
    if (pos < 0 || pos > base->kv_len)
        return sd_fail(&base->err, SPECDEC_ERR_INVALID_ARGUMENT, "cpu forward: pos = %d outside [0, kv_len = %d]", pos,
                       base->kv_len);
    if ((int64_t)pos + n > base->n_ctx)
        return sd_fail(&base->err, SPECDEC_ERR_CONTEXT_FULL, "cpu forward: pos %d + n_tokens %d exceeds n_ctx %d", pos, n,
                       base->n_ctx);
    for (int32_t t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size)
            return sd_fail(&base->err, SPECDEC_ERR_INVALID_ARGUMENT,
                           "cpu forward: token id %d at index %d outside [0, %d)", tokens[t], t, c->vocab_size);
    sd_runner_truncate(base, pos);
    specdec_status st = sd_runner_hold(base, pos + n);
    if (st != SPECDEC_OK) return st;
    const sd_runner_seg seg = {base, tokens, n, pos, NULL, 0, logits, NULL, NULL};
    cpu_pass(r->g, &seg, 1);
    return SPECDEC_OK;
}

/* Nodes first .. first + n - 1 of base->tree (validated and recorded by
 * sd_runner_forward_tree): one pass with a tree segment. */
static specdec_status cpu_forward_tree(sd_runner *base, int32_t first, int32_t n, float *logits) {
    sd_cpu_runner *r = (sd_cpu_runner *)base;
    const sd_runner_tree *tr = &base->tree;
    specdec_status st = sd_runner_hold(base, tr->base + first + n);
    if (st != SPECDEC_OK) return st;
    const sd_runner_seg seg = {base, tr->token + first, n, tr->base, tr->parent + first, first, logits, NULL, NULL};
    cpu_pass(r->g, &seg, 1);
    return SPECDEC_OK;
}

/* Move the rows of the kept path down (keep[] increases: a node's parent precedes it,
 * so copying upwards never overwrites a row still to be moved). */
static specdec_status cpu_compact(sd_runner *base, const int32_t *keep, int32_t n_keep) {
    sd_cpu_runner *r = (sd_cpu_runner *)base;
    const sd_cpu_group *g = r->g;
    const int32_t b = base->tree.base, bt = g->base.pool.block_tokens;
    const int64_t kv_dim = g->kv_dim, layer_stride = g->pool_rows * kv_dim;
    const size_t bytes = sizeof(float) * (size_t)kv_dim;
    for (int32_t l = 0; l < g->cfg.n_layers; l++)
        for (int32_t j = 0; j < n_keep; j++) {
            if (keep[j] == j) continue;
            const int64_t from = l * layer_stride + sd_kv_row(&base->kv, bt, b + keep[j]) * kv_dim;
            const int64_t to = l * layer_stride + sd_kv_row(&base->kv, bt, b + j) * kv_dim;
            memcpy(g->k_cache + to, g->k_cache + from, bytes);
            memcpy(g->v_cache + to, g->v_cache + from, bytes);
        }
    base->kv_len = b + n_keep;
    return SPECDEC_OK;
}

static const sd_runner_vtbl sd_cpu_vtbl = {cpu_forward, cpu_destroy};
static const sd_runner_tree_ops sd_cpu_tree_ops = {cpu_forward_tree, cpu_compact};

static specdec_status cpu_add_runner(sd_runner_group *gb, sd_runner **out, sd_errbuf *eb) {
    *out = NULL;
    sd_cpu_runner *r = sd_calloc(1, sizeof *r);
    if (!r) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "cpu runner: out of memory (runner struct)");
    r->base.vt = &sd_cpu_vtbl;
    r->base.tree_ops = &sd_cpu_tree_ops;
    r->g = (sd_cpu_group *)gb;
    specdec_status st = sd_runner_group_attach(gb, &r->base, eb);
    if (st != SPECDEC_OK) {
        sd_free(r);
        return st;
    }
    *out = &r->base;
    return SPECDEC_OK;
}

static const sd_runner_group_vtbl sd_cpu_group_vtbl = {cpu_add_runner, cpu_group_forward, cpu_group_destroy};

/* count * size floats/doubles, or NULL with *fail set (overflow counts as OOM). */
static void *alloc_array(size_t count, size_t size, int *fail) {
    if (*fail) return NULL;
    if (size && count > SIZE_MAX / size) {
        *fail = 1;
        return NULL;
    }
    void *p = sd_malloc(count * size);
    if (!p) *fail = 1;
    return p;
}

/* The pool's K/V storage, activations and scratch; 0 on success, else the cache
 * element count that failed (for the message) or SIZE_MAX. */
static int cpu_group_alloc(sd_cpu_group *g, size_t *cache_elems) {
    const sd_config *c = &g->cfg;
    const size_t B = (size_t)g->base.max_batch, hd = (size_t)c->head_dim, n_ctx = (size_t)g->base.n_ctx;
    size_t row_max = (size_t)c->hidden_size;
    if ((size_t)g->q_dim > row_max) row_max = (size_t)g->q_dim;
    size_t inter = (size_t)c->intermediate_size;
    if (c->n_experts && (size_t)c->moe_intermediate * (c->moe_fused ? 2u : 1u) > inter)
        inter = (size_t)c->moe_intermediate * (c->moe_fused ? 2u : 1u); /* fused: gate and up in one row */
    if ((size_t)c->shared_expert_intermediate > inter) inter = (size_t)c->shared_expert_intermediate;
    if (inter > row_max) row_max = inter;
    if ((size_t)c->q_lora_rank > row_max) row_max = (size_t)c->q_lora_rank; /* latent inputs (cfg.mla) */
    if ((size_t)c->kv_lora_rank > row_max) row_max = (size_t)c->kv_lora_rank;
    if (g->w->mtp_eh_proj.data && 2 * (size_t)c->hidden_size > row_max) row_max = 2 * (size_t)c->hidden_size;
    g->row_max = row_max;
    size_t elems = (size_t)c->n_layers * (size_t)g->pool_rows;
    int fail = (size_t)g->kv_dim && elems > SIZE_MAX / (size_t)g->kv_dim;
    elems *= (size_t)g->kv_dim;
    *cache_elems = elems;
    g->k_cache = alloc_array(elems, sizeof(float), &fail);
    g->v_cache = g->latent ? g->k_cache : alloc_array(elems, sizeof(float), &fail);
    g->x = alloc_array(B * (size_t)c->hidden_size, sizeof(float), &fail);
    g->h = alloc_array(B * (size_t)c->hidden_size, sizeof(float), &fail);
    /* latent attention: q also takes the heads' v_head_dim outputs for o_proj (cpu_mla_out) */
    const size_t q_cols = (size_t)g->q_dim > (size_t)c->n_heads * (size_t)c->v_head_dim
                              ? (size_t)g->q_dim
                              : (size_t)c->n_heads * (size_t)c->v_head_dim;
    g->q = alloc_array(B * q_cols, sizeof(float), &fail);
    g->k = alloc_array(B * (size_t)g->kv_dim, sizeof(float), &fail);
    g->v = alloc_array(B * (size_t)g->kv_dim, sizeof(float), &fail);
    g->att = alloc_array(B * (size_t)g->q_dim, sizeof(float), &fail);
    g->gate = alloc_array(B * inter, sizeof(float), &fail);
    g->up = alloc_array(B * inter, sizeof(float), &fail);
    g->rowbuf = alloc_array(row_max, sizeof(float), &fail);
    g->rope_cos = alloc_array(2 * B * (hd / 2), sizeof(float), &fail);
    g->rope_sin = alloc_array(2 * B * (hd / 2), sizeof(float), &fail);
    g->inv_freq = alloc_array(2 * (hd / 2), sizeof(double), &fail);
    g->scores = alloc_array(n_ctx, sizeof(double), &fail);
    g->acc = alloc_array((size_t)g->a_hd, sizeof(double), &fail);
    g->keys = alloc_array(n_ctx, sizeof(int64_t), &fail);
    g->tok = alloc_array(B, sizeof(int32_t), &fail);
    g->tpos = alloc_array(B, sizeof(int32_t), &fail);
    g->wrow = alloc_array(B, sizeof(int64_t), &fail);
    g->ttab = alloc_array(B, sizeof(*g->ttab), &fail);
    g->kpre = alloc_array(B, sizeof(int32_t), &fail);
    g->next = alloc_array(B, sizeof(int32_t), &fail);
    g->kext = alloc_array(B * SD_RUNNER_TREE_MAX, sizeof(int32_t), &fail);
    g->lrow = alloc_array(B, sizeof(float *), &fail);
    if (c->n_experts) {
        const size_t E = (size_t)c->n_experts, K = (size_t)c->n_experts_used, H = (size_t)c->hidden_size;
        g->moe_logits = alloc_array(B * E, sizeof(float), &fail);
        g->moe_sel = alloc_array(B * K, sizeof(int32_t), &fail);
        g->moe_w = alloc_array(B * K, sizeof(double), &fail);
        g->moe_tok = alloc_array(B, sizeof(int32_t), &fail);
        g->moe_tw = alloc_array(B, sizeof(double), &fail);
        g->moe_x = alloc_array(B * H, sizeof(float), &fail);
        g->moe_acc = alloc_array(B * H, sizeof(double), &fail);
        g->moe_sg = alloc_array(B, sizeof(float), &fail);
    }
    if (c->attn_sinks) g->sinks = alloc_array((size_t)c->n_layers * (size_t)c->n_heads, sizeof(float), &fail);
    if (c->mla) {
        const size_t QL = (size_t)c->q_lora_rank, KA = (size_t)c->kv_lora_rank + (size_t)sd_cfg_rope_dim(c);
        g->mla_a = alloc_array(B * (QL > KA ? QL : KA), sizeof(float), &fail);
        g->mla_b = alloc_array(B * (size_t)c->n_heads * hd, sizeof(float), &fail);
        g->mla_c = alloc_array(B * (size_t)c->kv_lora_rank, sizeof(float), &fail);
        g->mla_acc = alloc_array(B * (size_t)c->kv_lora_rank, sizeof(double), &fail);
    }
    if (g->w->mtp_eh_proj.data) g->mtp_u = alloc_array(B * 2 * (size_t)c->hidden_size, sizeof(float), &fail);
    return fail;
}

/* The frequencies of the full layers' rope and, when the sliding layers have their own
 * (Gemma 3), of theirs, for this group's context (core/sd_weights.h). */
static void cpu_group_rope(sd_cpu_group *g) {
    const sd_config *c = &g->cfg;
    const int32_t half = sd_cfg_rope_dim(c) / 2;
    g->n_ropes = c->rope_local_theta > 0.0f ? 2 : 1;
    for (int32_t k = 0; k < g->n_ropes; k++) {
        sd_rope_spec rp;
        sd_cfg_rope_params(c, g->base.n_ctx, k, &rp);
        sd_cpu_rope_spec_inv_freq(&rp, g->inv_freq + k * half);
        g->rope_scale[k] = rp.attn_factor;
    }
    /* latent attention's head width is not the model's: its default scale is head_dim^-1/2 all the same */
    g->attn.scale = c->attn_scale > 0.0f ? (double)c->attn_scale : g->latent ? 1.0 / sqrt((double)c->head_dim) : 0.0;
    g->attn.softcap = (double)c->attn_softcap;
    for (int32_t l = 0; g->sinks && l < c->n_layers; l++) /* the sink logits as fp32, once */
        for (int32_t h = 0; h < c->n_heads; h++)
            g->sinks[(int64_t)l * c->n_heads + h] = sd_cpu_elem(&g->w->layers[l].sinks, h);
}

static specdec_status cpu_group_check(const sd_weights *w, int32_t n_ctx, int32_t max_batch, int32_t n_blocks,
                                      int32_t block_tokens, sd_errbuf *eb) {
    if (!w) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cpu runner: weights are NULL");
    if (n_ctx <= 0) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cpu runner: n_ctx = %d (must be > 0)", n_ctx);
    if (max_batch <= 0 || max_batch > n_ctx)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cpu runner: max_batch = %d outside [1, n_ctx = %d]", max_batch,
                       n_ctx);
    if (block_tokens < 1 || n_blocks < 1 || (int64_t)n_blocks * block_tokens > INT32_MAX)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cpu runner: KV pool of %d blocks of %d tokens", (int)n_blocks,
                       (int)block_tokens);
    return sd_weights_validate(w, eb);
}

specdec_status sd_cpu_group_create(const sd_weights *w, int32_t n_ctx, int32_t max_batch, int32_t n_blocks,
                                   int32_t block_tokens, sd_runner_group **out, sd_errbuf *eb) {
    if (!out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cpu runner: out is NULL");
    *out = NULL;
    specdec_status st = cpu_group_check(w, n_ctx, max_batch, n_blocks, block_tokens, eb);
    if (st != SPECDEC_OK) return st;
    const sd_config *c = &w->cfg;
    sd_cpu_group *g = sd_calloc(1, sizeof *g);
    if (!g) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "cpu runner: out of memory (group struct)");
    g->base.vt = &sd_cpu_group_vtbl;
    g->base.backend = SPECDEC_BACKEND_CPU;
    g->base.n_vocab = c->vocab_size;
    g->base.n_ctx = n_ctx;
    g->base.max_batch = max_batch;
    g->w = w;
    g->cfg = *c;
    g->latent = c->mla != 0;
    g->a_hd = g->latent ? c->kv_lora_rank + sd_cfg_rope_dim(c) : c->head_dim;
    g->a_kvh = g->latent ? 1 : c->n_kv_heads;
    g->q_dim = c->n_heads * g->a_hd;
    g->kv_dim = g->a_kvh * g->a_hd;
    g->pool_rows = (int64_t)n_blocks * block_tokens;
    g->base.capture_max = c->n_layers + 1; /* n_layers + 1: after the final norm (an MTP layer's input) */
    g->base.capture_width = c->hidden_size;
    g->base.hin_width = w->mtp_eh_proj.data ? c->hidden_size : 0;
    size_t cache_elems = 0;
    if ((st = sd_kv_pool_init(&g->base.pool, n_blocks, block_tokens, eb)) != SPECDEC_OK) {
        cpu_group_destroy(&g->base);
        return st;
    }
    if (cpu_group_alloc(g, &cache_elems)) {
        cpu_group_destroy(&g->base);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY,
                       "cpu runner: out of memory allocating the KV pool (%zu floats x 2: %d blocks of %d tokens) "
                       "and activations for n_ctx %d, max_batch %d",
                       cache_elems, (int)n_blocks, (int)block_tokens, n_ctx, max_batch);
    }
    cpu_group_rope(g);
    *out = &g->base;
    return SPECDEC_OK;
}

specdec_status sd_cpu_runner_create(const sd_weights *w, int32_t n_ctx, int32_t max_batch, sd_runner **out,
                                    sd_errbuf *eb) {
    if (!out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cpu runner: out is NULL");
    *out = NULL;
    sd_runner_group *g = NULL;
    const int32_t bt = SD_KV_DEFAULT_BLOCK_TOKENS;
    specdec_status st = sd_cpu_group_create(w, n_ctx, max_batch, n_ctx > 0 ? sd_kv_blocks_for(n_ctx, bt) : 0, bt, &g, eb);
    if (st != SPECDEC_OK) return st;
    if ((st = cpu_add_runner(g, out, eb)) != SPECDEC_OK) {
        cpu_group_destroy(g);
        return st;
    }
    ((sd_cpu_runner *)*out)->owns_group = 1;
    return SPECDEC_OK;
}

/* The attention scratch of g->pool's workers; without it attention stays on the caller (same results). */
static void cpu_group_reserve_workers(sd_cpu_group *g) {
    sd_free(g->w_scores), sd_free(g->w_acc), sd_free(g->w_keys);
    g->w_scores = g->w_acc = NULL;
    g->w_keys = NULL;
    g->attn_parts = 1;
    const size_t workers = (size_t)sd_cpu_pool_threads(g->pool) - 1, cap = (size_t)g->base.n_ctx;
    if (!workers) return;
    int fail = 0;
    g->w_scores = alloc_array(workers * cap, sizeof(double), &fail);
    g->w_acc = alloc_array(workers * (size_t)g->a_hd, sizeof(double), &fail);
    g->w_keys = alloc_array(workers * cap, sizeof(int64_t), &fail);
    if (!fail) g->attn_parts = (int32_t)workers + 1;
}

void sd_cpu_group_set_threads(sd_runner_group *gb, int32_t n_threads) {
    sd_cpu_group *g = (sd_cpu_group *)gb;
    if (!g->pool_borrowed) sd_cpu_pool_destroy(g->pool);
    g->pool_borrowed = 0;
    g->pool = sd_cpu_pool_create(n_threads, g->row_max);
    cpu_group_reserve_workers(g);
}

void sd_cpu_group_use_pool(sd_runner_group *gb, struct sd_cpu_pool *pool) {
    sd_cpu_group *g = (sd_cpu_group *)gb;
    if (!g->pool_borrowed) sd_cpu_pool_destroy(g->pool);
    g->pool = pool;
    g->pool_borrowed = pool != NULL;
    cpu_group_reserve_workers(g);
}

int64_t sd_cpu_group_kv_floats(const sd_runner_group *gb) {
    const sd_cpu_group *g = (const sd_cpu_group *)gb;
    return (g->latent ? 1 : 2) * (int64_t)g->kv_dim;
}

void sd_cpu_group_set_attn_split(sd_runner_group *gb, int on) { ((sd_cpu_group *)gb)->attn_serial = !on; }

int32_t sd_cpu_group_threads(const sd_runner_group *gb) { return sd_cpu_pool_threads(((const sd_cpu_group *)gb)->pool); }

sd_cpu_pool *sd_cpu_group_pool(sd_runner_group *gb) { return ((sd_cpu_group *)gb)->pool; }

sd_runner_group *sd_cpu_runner_group(sd_runner *r) { return &((sd_cpu_runner *)r)->g->base; }

sd_cpu_pool *sd_cpu_runner_pool(sd_runner *r) {
    return r && r->vt == &sd_cpu_vtbl ? ((sd_cpu_runner *)r)->g->pool : NULL;
}
