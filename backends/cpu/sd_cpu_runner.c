/* sd_cpu_runner.c — the CPU reference runner: one model's fp32 KV cache and the
 * plain-C forward pass of a Llama-family decoder (Llama, Mistral, Qwen2).
 *
 * forward(tokens[0..n), pos): for each token t (absolute position p = pos + t)
 *   x = embed(token)
 *   per layer:  h = rmsnorm(x, attn_norm)
 *               q, k, v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv)   (biases: Qwen2,
 *                                                   Llama attention_bias)
 *               rope(q, p), rope(k, p); K[p], V[p] = k, v   (cache rows of this layer)
 *               x += attention(q over K[0..p], V[0..p]) Wo^T (+bo)
 *               h = rmsnorm(x, ffn_norm)
 *               x += (silu(h Wg^T) * (h Wu^T)) Wd^T
 *   logits = rmsnorm(x, out_norm) W_lm^T              (W_lm = tok_embd when tied)
 * Every op computes each token's row with the same loop order whatever n is, so a
 * position's logits are bitwise identical in a 1-token call and inside a k-token
 * call. Tree calls (core/sd_runner.h "Trees") run the same code with per-token
 * positions and key lists: a node attends to the cache and then its ancestors in the
 * order plain decoding of its path would, so its logits are bitwise those of that
 * path decoded plainly; compaction moves the kept rows down (memcpy per row). All memory (KV cache [n_layers][n_ctx][n_kv_heads][head_dim] for K and V,
 * activations for max_batch tokens, attention scratch for n_ctx keys) is allocated
 * in create; forward allocates nothing. Single-threaded and deterministic: this is
 * the oracle the CUDA backend is checked against. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sd_cpu_runner.h"
#include "sd_alloc.h"
#include "sd_math.h"
#include "sd_cpu_attention.h"
#include "sd_cpu_embed.h"
#include "sd_cpu_matmul.h"
#include "sd_cpu_rmsnorm.h"
#include "sd_cpu_rope.h"
#include "sd_cpu_swiglu.h"

typedef struct sd_cpu_runner {
    sd_runner base;              /* must be first: the engine sees an sd_runner * */
    const sd_weights *w;         /* borrowed */
    sd_config cfg;
    int32_t q_dim;               /* n_heads * head_dim */
    int32_t kv_dim;              /* n_kv_heads * head_dim */
    float *k_cache;              /* [n_layers][n_ctx][kv_dim] */
    float *v_cache;              /* [n_layers][n_ctx][kv_dim] */
    float *x;                    /* [max_batch, hidden] residual stream */
    float *h;                    /* [max_batch, hidden] normed input / sublayer output */
    float *q;                    /* [max_batch, q_dim] */
    float *k;                    /* [max_batch, kv_dim] */
    float *v;                    /* [max_batch, kv_dim] */
    float *att;                  /* [max_batch, q_dim] attention output */
    float *gate;                 /* [max_batch, intermediate] */
    float *up;                   /* [max_batch, intermediate] */
    float *rowbuf;               /* [max(hidden, q_dim, intermediate)] a dequantised weight row */
    float *rope_cos;             /* [max_batch, head_dim/2] */
    float *rope_sin;             /* [max_batch, head_dim/2] */
    double *inv_freq;            /* [head_dim/2] */
    double *scores;              /* [n_ctx] attention scores of one head */
    double *acc;                 /* [head_dim] attention accumulator */
    int32_t *tpos;               /* [max_batch] absolute position of each token of a call */
    int32_t *kpre;               /* [max_batch] cache rows [0, kpre) each token attends to first */
    int32_t *next;               /* [max_batch] then this many rows of kext (tree calls) */
    int32_t *kext;               /* [tree_cap][SD_RUNNER_TREE_MAX] a tree node's ancestors' rows and its own */
    int32_t tree_cap;            /* most nodes per tree call: min(max_batch, SD_RUNNER_TREE_MAX) */
} sd_cpu_runner;

static void cpu_destroy(sd_runner *base) {
    sd_cpu_runner *r = (sd_cpu_runner *)base;
    if (!r) return;
    sd_free(r->k_cache);
    sd_free(r->v_cache);
    sd_free(r->x);
    sd_free(r->h);
    sd_free(r->q);
    sd_free(r->k);
    sd_free(r->v);
    sd_free(r->att);
    sd_free(r->gate);
    sd_free(r->up);
    sd_free(r->rowbuf);
    sd_free(r->rope_cos);
    sd_free(r->rope_sin);
    sd_free(r->inv_freq);
    sd_free(r->scores);
    sd_free(r->acc);
    sd_free(r->tpos);
    sd_free(r->kpre);
    sd_free(r->next);
    sd_free(r->kext);
    sd_free(r);
}

/* Token t of a batch: absolute position tpos[t], K/V written to cache row row0 + t,
 * attending to cache rows [0, kpre[t]) and then to rows kext[t][0 .. next[t]) (a tree
 * node's ancestors and itself; none in a chain). */
static void cpu_attend(sd_cpu_runner *r, int32_t t, const float *kc, const float *vc) {
    const sd_config *c = &r->cfg;
    sd_cpu_attention_rows(r->q + (int64_t)t * r->q_dim, kc, vc, r->kpre[t], r->kext + (int64_t)t * SD_RUNNER_TREE_MAX,
                          r->next[t], c->n_heads, c->n_kv_heads, c->head_dim, r->scores, r->acc,
                          r->att + (int64_t)t * r->q_dim);
}

/* One decoder layer over the batch of n tokens whose K/V rows start at row0. */
static void cpu_layer(sd_cpu_runner *r, const sd_layer *L, float *kc, float *vc, int32_t n, int32_t row0) {
    const sd_config *c = &r->cfg;
    const int32_t hidden = c->hidden_size, inter = c->intermediate_size, hd = c->head_dim, half = hd / 2;
    const int32_t q_dim = r->q_dim, kv_dim = r->kv_dim;
    const double eps = (double)c->rms_norm_eps;
    sd_cpu_rmsnorm(r->x, &L->attn_norm, n, hidden, eps, r->h);
    sd_cpu_matmul(r->h, n, &L->wq, &L->bq, r->q, r->rowbuf);
    sd_cpu_matmul(r->h, n, &L->wk, &L->bk, r->k, r->rowbuf);
    sd_cpu_matmul(r->h, n, &L->wv, &L->bv, r->v, r->rowbuf);
    for (int32_t t = 0; t < n; t++) {
        const float *ct = r->rope_cos + (int64_t)t * half, *st = r->rope_sin + (int64_t)t * half;
        sd_cpu_rope(r->q + (int64_t)t * q_dim, c->n_heads, hd, ct, st);
        sd_cpu_rope(r->k + (int64_t)t * kv_dim, c->n_kv_heads, hd, ct, st);
        memcpy(kc + (int64_t)(row0 + t) * kv_dim, r->k + (int64_t)t * kv_dim, sizeof(float) * (size_t)kv_dim);
        memcpy(vc + (int64_t)(row0 + t) * kv_dim, r->v + (int64_t)t * kv_dim, sizeof(float) * (size_t)kv_dim);
    }
    for (int32_t t = 0; t < n; t++) cpu_attend(r, t, kc, vc);
    sd_cpu_matmul(r->att, n, &L->wo, &L->bo, r->h, r->rowbuf);
    sd_cpu_add(r->x, r->h, (int64_t)n * hidden);

    sd_cpu_rmsnorm(r->x, &L->ffn_norm, n, hidden, eps, r->h);
    sd_cpu_matmul(r->h, n, &L->w_gate, NULL, r->gate, r->rowbuf);
    sd_cpu_matmul(r->h, n, &L->w_up, NULL, r->up, r->rowbuf);
    sd_cpu_swiglu(r->gate, r->up, (int64_t)n * inter, r->gate);
    sd_cpu_matmul(r->gate, n, &L->w_down, NULL, r->h, r->rowbuf);
    sd_cpu_add(r->x, r->h, (int64_t)n * hidden);
}

/* The forward pass of a validated batch (tpos / kpre / kext / next filled): the cache
 * is truncated to row0, then extended to row0 + n. */
static void cpu_run(sd_cpu_runner *r, const int32_t *tokens, int32_t n, int32_t row0, float *logits) {
    const sd_config *c = &r->cfg;
    const sd_weights *m = r->w;
    const int32_t half = c->head_dim / 2;
    const int64_t layer_stride = (int64_t)r->base.n_ctx * r->kv_dim;
    r->base.kv_len = row0;
    for (int32_t t = 0; t < n; t++)
        sd_cpu_rope_table(r->inv_freq, half, r->tpos[t], r->rope_cos + (int64_t)t * half, r->rope_sin + (int64_t)t * half);
    sd_cpu_embed(&m->tok_embd, tokens, n, r->x);
    for (int32_t l = 0; l < c->n_layers; l++)
        cpu_layer(r, &m->layers[l], r->k_cache + l * layer_stride, r->v_cache + l * layer_stride, n, row0);
    r->base.kv_len = row0 + n;
    if (logits) {
        sd_cpu_rmsnorm(r->x, &m->out_norm, n, c->hidden_size, (double)c->rms_norm_eps, r->h);
        sd_cpu_matmul(r->h, n, &m->lm_head, NULL, logits, r->rowbuf);
    }
}

static specdec_status cpu_forward(sd_runner *base, const int32_t *tokens, int32_t n, int32_t pos, float *logits) {
    sd_cpu_runner *r = (sd_cpu_runner *)base;
    const sd_config *c = &r->cfg;

    /* Validate everything before touching any state: a failed call changes nothing. */
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
    /* a chain: token t at pos + t sees rows 0 .. pos + t */
    for (int32_t t = 0; t < n; t++) {
        r->tpos[t] = pos + t;
        r->kpre[t] = pos + t + 1;
        r->next[t] = 0;
    }
    cpu_run(r, tokens, n, pos, logits);
    return SPECDEC_OK;
}

/* Nodes first .. first + n - 1 of base->tree (validated by sd_runner_forward_tree):
 * node v at position tree.base + depth, in row tree.base + v, attending to rows
 * [0, tree.base) and then its ancestors' rows root-first and its own. */
static specdec_status cpu_forward_tree(sd_runner *base, int32_t first, int32_t n, float *logits) {
    sd_cpu_runner *r = (sd_cpu_runner *)base;
    const sd_runner_tree *tr = &base->tree;
    if (n > r->tree_cap)
        return sd_fail(&base->err, SPECDEC_ERR_INVALID_ARGUMENT, "cpu tree forward: %d nodes exceed %d", (int)n,
                       (int)r->tree_cap);
    for (int32_t i = 0; i < n; i++) {
        const int32_t v = first + i, k = tr->depth[v];
        int32_t *rows = r->kext + (int64_t)i * SD_RUNNER_TREE_MAX;
        for (int32_t a = v, d = k; d >= 0; a = tr->parent[a], d--) rows[d] = tr->base + a;
        r->tpos[i] = tr->base + k;
        r->kpre[i] = tr->base;
        r->next[i] = k + 1;
    }
    cpu_run(r, tr->token + first, n, tr->base + first, logits);
    return SPECDEC_OK;
}

/* Move the rows of the kept path down (keep[] increases: a node's parent precedes it,
 * so copying upwards never overwrites a row still to be moved). */
static specdec_status cpu_compact(sd_runner *base, const int32_t *keep, int32_t n_keep) {
    sd_cpu_runner *r = (sd_cpu_runner *)base;
    const int32_t b = base->tree.base;
    const int64_t kv_dim = r->kv_dim, layer_stride = (int64_t)base->n_ctx * kv_dim;
    const size_t bytes = sizeof(float) * (size_t)kv_dim;
    for (int32_t l = 0; l < r->cfg.n_layers; l++)
        for (int32_t j = 0; j < n_keep; j++) {
            if (keep[j] == j) continue;
            const int64_t from = l * layer_stride + (int64_t)(b + keep[j]) * kv_dim;
            const int64_t to = l * layer_stride + (int64_t)(b + j) * kv_dim;
            memcpy(r->k_cache + to, r->k_cache + from, bytes);
            memcpy(r->v_cache + to, r->v_cache + from, bytes);
        }
    base->kv_len = b + n_keep;
    return SPECDEC_OK;
}

static const sd_runner_vtbl sd_cpu_vtbl = {cpu_forward, cpu_destroy};
static const sd_runner_tree_ops sd_cpu_tree_ops = {cpu_forward_tree, cpu_compact};

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

specdec_status sd_cpu_runner_create(const sd_weights *w, int32_t n_ctx, int32_t max_batch, sd_runner **out,
                                    sd_errbuf *eb) {
    if (!out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cpu runner: out is NULL");
    *out = NULL;
    if (!w) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cpu runner: weights are NULL");
    if (n_ctx <= 0) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cpu runner: n_ctx = %d (must be > 0)", n_ctx);
    if (max_batch <= 0 || max_batch > n_ctx)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cpu runner: max_batch = %d outside [1, n_ctx = %d]", max_batch,
                       n_ctx);
    specdec_status st = sd_weights_validate(w, eb);
    if (st != SPECDEC_OK) return st;

    const sd_config *c = &w->cfg;
    sd_cpu_runner *r = sd_calloc(1, sizeof *r);
    if (!r) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "cpu runner: out of memory (runner struct)");
    r->base.vt = &sd_cpu_vtbl;
    r->base.tree_ops = &sd_cpu_tree_ops;
    r->base.backend = SPECDEC_BACKEND_CPU;
    r->base.n_vocab = c->vocab_size;
    r->base.n_ctx = n_ctx;
    r->base.max_batch = max_batch;
    r->base.kv_len = 0;
    r->w = w;
    r->cfg = *c;
    r->q_dim = c->n_heads * c->head_dim;
    r->kv_dim = c->n_kv_heads * c->head_dim;

    size_t B = (size_t)max_batch, hd = (size_t)c->head_dim;
    size_t row_max = (size_t)c->hidden_size;
    if ((size_t)r->q_dim > row_max) row_max = (size_t)r->q_dim;
    if ((size_t)c->intermediate_size > row_max) row_max = (size_t)c->intermediate_size;
    size_t cache_elems = (size_t)c->n_layers * (size_t)n_ctx;
    int fail = (size_t)r->kv_dim && cache_elems > SIZE_MAX / (size_t)r->kv_dim;
    cache_elems *= (size_t)r->kv_dim;
    r->k_cache = alloc_array(cache_elems, sizeof(float), &fail);
    r->v_cache = alloc_array(cache_elems, sizeof(float), &fail);
    r->x = alloc_array(B * (size_t)c->hidden_size, sizeof(float), &fail);
    r->h = alloc_array(B * (size_t)c->hidden_size, sizeof(float), &fail);
    r->q = alloc_array(B * (size_t)r->q_dim, sizeof(float), &fail);
    r->k = alloc_array(B * (size_t)r->kv_dim, sizeof(float), &fail);
    r->v = alloc_array(B * (size_t)r->kv_dim, sizeof(float), &fail);
    r->att = alloc_array(B * (size_t)r->q_dim, sizeof(float), &fail);
    r->gate = alloc_array(B * (size_t)c->intermediate_size, sizeof(float), &fail);
    r->up = alloc_array(B * (size_t)c->intermediate_size, sizeof(float), &fail);
    r->rowbuf = alloc_array(row_max, sizeof(float), &fail);
    r->rope_cos = alloc_array(B * (hd / 2), sizeof(float), &fail);
    r->rope_sin = alloc_array(B * (hd / 2), sizeof(float), &fail);
    r->inv_freq = alloc_array(hd / 2, sizeof(double), &fail);
    r->scores = alloc_array((size_t)n_ctx, sizeof(double), &fail);
    r->acc = alloc_array(hd, sizeof(double), &fail);
    r->tree_cap = max_batch < SD_RUNNER_TREE_MAX ? max_batch : SD_RUNNER_TREE_MAX;
    r->tpos = alloc_array(B, sizeof(int32_t), &fail);
    r->kpre = alloc_array(B, sizeof(int32_t), &fail);
    r->next = alloc_array(B, sizeof(int32_t), &fail);
    r->kext = alloc_array((size_t)r->tree_cap * SD_RUNNER_TREE_MAX, sizeof(int32_t), &fail);
    if (fail) {
        cpu_destroy(&r->base);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY,
                       "cpu runner: out of memory allocating KV cache (%zu floats x 2) and activations for "
                       "n_ctx %d, max_batch %d",
                       cache_elems, n_ctx, max_batch);
    }

    sd_rope_params rp = {0};
    rp.head_dim = c->head_dim;
    rp.theta = (double)c->rope_theta;
    rp.llama3 = c->rope_type == SD_ROPE_LLAMA3;
    rp.factor = (double)c->rope_factor;
    rp.low_freq_factor = (double)c->rope_low_freq_factor;
    rp.high_freq_factor = (double)c->rope_high_freq_factor;
    rp.original_max_pos = (double)c->rope_original_max_pos;
    sd_cpu_rope_inv_freq(&rp, r->inv_freq);

    *out = &r->base;
    return SPECDEC_OK;
}
