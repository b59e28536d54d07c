/* sd_eagle3_cpu.c — CPU reference forward of an EAGLE-3 head (backends/cpu/sd_eagle3_cpu.h),
 * built from the kernels/cpu ops the target's forward uses. */
#include "sd_eagle3_cpu.h"

#include <math.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_cpu_attention.h"
#include "sd_cpu_dequant.h"
#include "sd_cpu_embed.h"
#include "sd_cpu_matmul.h"
#include "sd_cpu_pool.h"
#include "sd_cpu_runner.h"
#include "sd_cpu_rmsnorm.h"
#include "sd_cpu_rope.h"
#include "sd_cpu_sample.h"
#include "sd_cpu_swiglu.h"

/* The weights every forward over one head reads (core/sd_eagle3.h sd_eagle3_shared). */
typedef struct e3c_shared {
    sd_eagle3_shared base;   /* must be first */
    sd_eagle3_weights hw32;  /* base.hw with the F16/BF16 matrices widened to F32 (into f32) */
    float *f32;              /* [sum of the matrices' sizes], or NULL: not widened */
} e3c_shared;

struct sd_eagle3_cpu {
    const sd_eagle3_weights *hw;   /* the weights used: sd_eagle3_cpu_shared_weights(sh) */
    sd_eagle3_shared *sh;    /* a reference, dropped in destroy */
    sd_tensor embed;         /* [V, H] */
    int32_t H, F, tH, Vd, V, nH, nKV, hd, Q, KV;
    int32_t n_ctx, max_rows, n_cached;
    double eps;
    float *k_cache, *v_cache; /* [n_ctx, KV] (k after RoPE) */
    int32_t *parent;          /* [n_ctx] parent cache row, -1 = on the prefix */
    /* scratch, [max_rows, ...] */
    float *e, *hn, *u, *q, *attn, *h1, *xn, *gate, *up, *tmp, *h, *aux;
    float *rowbuf;            /* [max(2H, 3tH, F, Q)] */
    float *rope_cos, *rope_sin; /* [hd/2] */
    double *inv_freq;         /* [hd/2] */
    double *scores;           /* [n_ctx] */
    double *acc;              /* [hd] */
    int64_t *keys;            /* [n_ctx] */
    int32_t *chain;           /* [n_ctx] ancestors, leaf-first */
    /* attention on the bound pool's threads (e3c_attn_part): parts 1..w_parts-1 have their own
     * scores [n_ctx] and acc [hd] at (part - 1) * n_ctx / * hd (e3c_reserve_parts, at creation) */
    int32_t w_parts;
    double *w_scores, *w_acc;
    sd_errbuf err;
};

static int32_t e3c_max(int32_t a, int32_t b) { return a > b ? a : b; }

static specdec_status e3c_alloc(sd_eagle3_cpu *e) {
    const size_t R = (size_t)e->max_rows, C = (size_t)e->n_ctx;
    const size_t H = (size_t)e->H, F = (size_t)e->F, Q = (size_t)e->Q, half = (size_t)e->hd / 2;
    const size_t rb = (size_t)e3c_max(e3c_max(2 * e->H, 3 * e->tH), e3c_max(e->F, e->Q));
    float **f32[] = {&e->e, &e->hn, &e->u, &e->q, &e->attn, &e->h1, &e->xn, &e->gate, &e->up, &e->tmp, &e->h,
                     &e->aux, &e->rowbuf, &e->rope_cos, &e->rope_sin, &e->k_cache, &e->v_cache};
    const size_t n32[] = {R * H, R * H, R * 2 * H, R * Q, R * Q, R * H, R * H, R * F, R * F, R * H, R * H,
                          R * 3 * (size_t)e->tH, rb, half, half, C * (size_t)e->KV, C * (size_t)e->KV};
    for (size_t i = 0; i < sizeof n32 / sizeof n32[0]; i++)
        if (!(*f32[i] = sd_malloc(n32[i] * sizeof(float)))) return SPECDEC_ERR_OUT_OF_MEMORY;
    e->inv_freq = sd_malloc(half * sizeof(double));
    e->scores = sd_malloc(C * sizeof(double));
    e->acc = sd_malloc((size_t)e->hd * sizeof(double));
    e->keys = sd_malloc(C * sizeof(int64_t));
    e->parent = sd_malloc(C * sizeof(int32_t));
    e->chain = sd_malloc(C * sizeof(int32_t));
    if (!e->inv_freq || !e->scores || !e->acc || !e->keys || !e->parent || !e->chain) return SPECDEC_ERR_OUT_OF_MEMORY;
    return SPECDEC_OK;
}

/* F16/BF16 matrices are converted once to F32 (exact) when the copy is small enough: the
 * matmul then skips the per-call row conversion (a draft step runs every weight once per call).
 * The copy is an optimisation only: when it is too large or its allocation fails the matmul
 * converts each row per call, with the same results. */
#define SD_E3C_WIDEN_MAX ((int64_t)64 << 20) /* floats */
static void e3c_widen(e3c_shared *s) {
    const sd_eagle3_weights *hw = s->base.hw;
    if (hw->dtype == SD_F32) return;
    s->hw32 = *hw;
    sd_tensor *m[] = {&s->hw32.fc, &s->hw32.wq, &s->hw32.wk, &s->hw32.wv, &s->hw32.wo,
                      &s->hw32.w_gate, &s->hw32.w_up, &s->hw32.w_down, &s->hw32.lm_head};
    int64_t total = 0;
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) total += m[i]->shape[0] * m[i]->shape[1];
    if (total > SD_E3C_WIDEN_MAX || !(s->f32 = sd_malloc((size_t)total * sizeof(float)))) return;
    float *dst = s->f32;
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        const int64_t rows = m[i]->shape[0], cols = m[i]->shape[1];
        for (int64_t r = 0; r < rows; r++) {
            const float *src = sd_cpu_row_f32(m[i], r, dst + r * cols);
            if (src != dst + r * cols) memcpy(dst + r * cols, src, (size_t)cols * sizeof(float));
        }
        m[i]->data = dst;
        m[i]->dtype = SD_F32;
        dst += rows * cols;
    }
    s->hw32.dtype = SD_F32;
}

static void e3c_shared_free(sd_eagle3_shared *b) {
    e3c_shared *s = (e3c_shared *)b;
    sd_free(s->f32);
    sd_free(s);
}

specdec_status sd_eagle3_cpu_shared_create(const sd_eagle3_weights *hw, sd_eagle3_shared **out, sd_errbuf *eb) {
    if (out) *out = NULL;
    if (!hw || !out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "eagle3 cpu: NULL argument");
    specdec_status st = sd_eagle3_validate(hw, "eagle3 cpu", eb);
    if (st) return st;
    e3c_shared *s = sd_calloc(1, sizeof *s);
    if (!s) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "eagle3 cpu: out of memory");
    s->base.hw = hw;
    s->base.backend = SPECDEC_BACKEND_CPU;
    s->base.refs = 1;
    s->base.free_fn = e3c_shared_free;
    e3c_widen(s);
    *out = &s->base;
    return SPECDEC_OK;
}

const sd_eagle3_weights *sd_eagle3_cpu_shared_weights(const sd_eagle3_shared *sh) {
    if (!sh || sh->backend != SPECDEC_BACKEND_CPU) return NULL;
    const e3c_shared *s = (const e3c_shared *)sh;
    return s->f32 ? &s->hw32 : s->base.hw;
}

static specdec_status e3c_check_sizes(int32_t n_ctx, int32_t max_rows, sd_errbuf *eb) {
    if (n_ctx < 1 || max_rows < 1 || max_rows > n_ctx)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "eagle3 cpu: n_ctx %d / max_rows %d (need 1 <= max_rows <= n_ctx)",
                       (int)n_ctx, (int)max_rows);
    return SPECDEC_OK;
}

specdec_status sd_eagle3_cpu_create_shared(sd_eagle3_shared *sh, const sd_tensor *embed, int32_t n_ctx,
                                           int32_t max_rows, sd_eagle3_cpu **out, sd_errbuf *eb) {
    if (out) *out = NULL;
    if (!sh || !embed || !out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "eagle3 cpu: NULL argument");
    if (sh->backend != SPECDEC_BACKEND_CPU)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "eagle3 cpu: the shared head weights are not the CPU head's");
    specdec_status st = e3c_check_sizes(n_ctx, max_rows, eb);
    if (st) return st;
    const sd_eagle3_weights *hw = sh->hw;
    const sd_config *c = &hw->cfg.layer;
    if (!embed->data || embed->ndim != 2 || embed->shape[0] != c->vocab_size || embed->shape[1] != c->hidden_size)
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "eagle3 cpu: the embedding is not [%d, %d]", (int)c->vocab_size,
                       (int)c->hidden_size);
    sd_eagle3_cpu *e = sd_calloc(1, sizeof *e);
    if (!e) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "eagle3 cpu: out of memory");
    e->sh = sd_eagle3_shared_ref(sh);
    e->hw = sd_eagle3_cpu_shared_weights(sh);
    e->embed = *embed;
    e->H = c->hidden_size, e->F = c->intermediate_size, e->tH = hw->cfg.target_hidden;
    e->Vd = hw->cfg.draft_vocab, e->V = c->vocab_size, e->nH = c->n_heads, e->nKV = c->n_kv_heads;
    e->hd = c->head_dim, e->Q = c->n_heads * c->head_dim, e->KV = c->n_kv_heads * c->head_dim;
    e->n_ctx = n_ctx, e->max_rows = max_rows;
    e->eps = (double)c->rms_norm_eps;
    if (e3c_alloc(e)) {
        sd_eagle3_cpu_destroy(e);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "eagle3 cpu: out of memory for %d cache rows", (int)n_ctx);
    }
    sd_rope_spec rope;
    sd_cfg_rope_params(c, n_ctx, 0, &rope);
    sd_cpu_rope_spec_inv_freq(&rope, e->inv_freq);
    *out = e;
    return SPECDEC_OK;
}

specdec_status sd_eagle3_cpu_create(const sd_eagle3_weights *hw, const sd_tensor *embed, int32_t n_ctx,
                                    int32_t max_rows, sd_eagle3_cpu **out, sd_errbuf *eb) {
    if (out) *out = NULL;
    if (!hw || !embed || !out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "eagle3 cpu: NULL argument");
    specdec_status st = e3c_check_sizes(n_ctx, max_rows, eb);
    sd_eagle3_shared *sh = NULL;
    if (st == SPECDEC_OK) st = sd_eagle3_cpu_shared_create(hw, &sh, eb);
    if (st == SPECDEC_OK) st = sd_eagle3_cpu_create_shared(sh, embed, n_ctx, max_rows, out, eb);
    sd_eagle3_shared_unref(sh); /* *out holds its own reference */
    return st;
}

void sd_eagle3_cpu_destroy(sd_eagle3_cpu *e) {
    if (!e) return;
    void *p[] = {e->e, e->hn, e->u, e->q, e->attn, e->h1, e->xn, e->gate, e->up, e->tmp, e->h, e->aux, e->rowbuf,
                 e->rope_cos, e->rope_sin, e->k_cache, e->v_cache, e->inv_freq, e->scores, e->acc, e->keys,
                 e->parent, e->chain, e->w_scores, e->w_acc};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) sd_free(p[i]);
    sd_eagle3_shared_unref(e->sh);
    sd_free(e);
}

specdec_status sd_eagle3_cpu_fuse(sd_eagle3_cpu *e, const float *aux, int32_t n, float *g) {
    if (!e || !aux || !g || n < 1 || n > e->max_rows)
        return sd_fail(e ? &e->err : NULL, SPECDEC_ERR_INVALID_ARGUMENT, "eagle3 fuse: n = %d outside [1, %d] or NULL",
                       (int)n, e ? (int)e->max_rows : 0);
    const sd_eagle3_weights *hw = e->hw;
    const int32_t w3 = 3 * e->tH;
    const float *x = aux;
    if (hw->cfg.fc_norm || hw->cfg.norm_before_fc) {
        memcpy(e->aux, aux, (size_t)n * (size_t)w3 * sizeof(float));
        for (int32_t t = 0; t < n && hw->cfg.fc_norm; t++)
            for (int i = 0; i < SD_EAGLE3_N_AUX; i++) {
                float *s = e->aux + (int64_t)t * w3 + (int64_t)i * e->tH;
                sd_cpu_rmsnorm(s, &hw->fc_norm[i], 1, e->tH, e->eps, s);
            }
        if (hw->cfg.norm_before_fc) sd_cpu_rmsnorm(e->aux, &hw->input_norm, n, w3, e->eps, e->aux);
        x = e->aux;
    }
    sd_cpu_matmul(x, n, &hw->fc, &hw->fc_bias, g, e->rowbuf);
    return SPECDEC_OK;
}

/* Key list of cache row r into e->keys; returns its length. */
static int32_t e3c_keys(sd_eagle3_cpu *e, int32_t r, int tree, int32_t n_shared) {
    if (!tree) {
        for (int32_t j = 0; j <= r; j++) e->keys[j] = j;
        return r + 1;
    }
    int32_t n = 0, nc = 0;
    for (int32_t j = 0; j < n_shared; j++) e->keys[n++] = j;
    for (int32_t a = e->parent[r]; a >= n_shared; a = e->parent[a]) e->chain[nc++] = a;
    while (nc > 0) e->keys[n++] = e->chain[--nc];
    e->keys[n++] = r;
    return n;
}

/* q, k, v of rows [0, n) from u; k, v into the cache at rows base..; RoPE at pos. */
/* q (unless kv_only), k, v of n rows; k and v into the cache rows n_cached ... */
static void e3c_qkv(sd_eagle3_cpu *e, int32_t n, const int32_t *pos, int kv_only) {
    const sd_eagle3_weights *hw = e->hw;
    float *krow = e->k_cache + (int64_t)e->n_cached * e->KV, *vrow = e->v_cache + (int64_t)e->n_cached * e->KV;
    if (!kv_only) sd_cpu_matmul(e->u, n, &hw->wq, NULL, e->q, e->rowbuf);
    sd_cpu_matmul(e->u, n, &hw->wk, NULL, krow, e->rowbuf);
    sd_cpu_matmul(e->u, n, &hw->wv, NULL, vrow, e->rowbuf);
    const int32_t half = e->hd / 2;
    for (int32_t t = 0; t < n; t++) {
        sd_cpu_rope_table(e->inv_freq, half, pos[t], e->rope_cos, e->rope_sin);
        if (!kv_only) sd_cpu_rope(e->q + (int64_t)t * e->Q, e->nH, e->hd, e->rope_cos, e->rope_sin);
        sd_cpu_rope(krow + (int64_t)t * e->KV, e->nKV, e->hd, e->rope_cos, e->rope_sin);
    }
}

/* The layer after attention: h = h1 + MLP(h1), logits, g_next. */
static void e3c_tail(sd_eagle3_cpu *e, const float *g, int32_t n, float *logits, float *g_next) {
    const sd_eagle3_weights *hw = e->hw;
    const int64_t nH = (int64_t)n * e->H;
    sd_cpu_matmul(e->attn, n, &hw->wo, NULL, e->tmp, e->rowbuf);
    memcpy(e->h1, hw->cfg.norm_before_residual ? e->hn : g, (size_t)nH * sizeof(float));
    sd_cpu_add(e->h1, e->tmp, nH);
    sd_cpu_rmsnorm(e->h1, &hw->post_norm, n, e->H, e->eps, e->xn);
    sd_cpu_matmul(e->xn, n, &hw->w_gate, NULL, e->gate, e->rowbuf);
    sd_cpu_matmul(e->xn, n, &hw->w_up, NULL, e->up, e->rowbuf);
    sd_cpu_swiglu(e->gate, e->up, (int64_t)n * e->F, e->gate);
    sd_cpu_matmul(e->gate, n, &hw->w_down, NULL, e->tmp, e->rowbuf);
    memcpy(e->h, e->h1, (size_t)nH * sizeof(float));
    sd_cpu_add(e->h, e->tmp, nH);
    sd_cpu_rmsnorm(e->h, &hw->norm, n, e->H, e->eps, e->xn); /* xn = hN */
    if (logits) sd_cpu_matmul(e->xn, n, &hw->lm_head, NULL, logits, e->rowbuf);
    if (g_next) memcpy(g_next, hw->cfg.norm_output ? e->xn : e->h, (size_t)nH * sizeof(float));
}

/* One token's attention split over the heads: part p takes heads p, p + n_parts, ... with
 * sd_cpu_attention_heads' exact arithmetic, so the output is bitwise the one-thread result. */
typedef struct e3c_attn_job {
    sd_eagle3_cpu *e;
    const float *q;
    float *out;
    int32_t nk;
} e3c_attn_job;

static void e3c_attn_part(void *arg, int part, int n_parts, float *scratch) {
    (void)scratch;
    const e3c_attn_job *j = arg;
    sd_eagle3_cpu *e = j->e;
    double *scores = part ? e->w_scores + (int64_t)(part - 1) * e->n_ctx : e->scores;
    double *acc = part ? e->w_acc + (int64_t)(part - 1) * e->hd : e->acc;
    sd_cpu_attention_heads(j->q, e->k_cache, e->v_cache, e->keys, j->nk, e->nH, e->nKV, e->hd, NULL, part, e->nH,
                           n_parts, scores, acc, j->out);
}

/* Parts the bound pool can run the attention in (1: the calling thread alone): at most the heads and
 * the parts whose scratch the runner reserved at creation (e3c_reserve_parts; nothing is allocated
 * here, in the decode loop). */
static int e3c_attn_parts(const sd_eagle3_cpu *e, int32_t nk) {
    const sd_cpu_pool *pool = sd_cpu_pool_current();
    int parts = sd_cpu_pool_threads(pool);
    if (parts > e->nH) parts = e->nH;
    if (parts > e->w_parts) parts = e->w_parts;
    if (parts <= 1 || (int64_t)nk * e->nH * e->hd < sd_cpu_pool_min_work(pool)) return 1;
    return parts;
}

/* The workers' attention scratch for a pool of `threads` (the target's, bound around every call);
 * an allocation that fails keeps the head on fewer parts, never an error. */
static void e3c_reserve_parts(sd_eagle3_cpu *e, int threads) {
    const int parts = threads < e->nH ? threads : e->nH;
    if (parts <= 1) return;
    e->w_scores = sd_malloc((size_t)(parts - 1) * (size_t)e->n_ctx * sizeof(double));
    e->w_acc = e->w_scores ? sd_malloc((size_t)(parts - 1) * (size_t)e->hd * sizeof(double)) : NULL;
    e->w_parts = e->w_acc ? parts : 0;
}

specdec_status sd_eagle3_cpu_step(sd_eagle3_cpu *e, const int32_t *tokens, const float *g, const int32_t *pos,
                                  int32_t n, const int32_t *parents, int32_t n_shared, float *logits, float *g_next) {
    if (!e || !tokens || !g || !pos)
        return sd_fail(e ? &e->err : NULL, SPECDEC_ERR_INVALID_ARGUMENT, "eagle3 step: NULL argument");
    specdec_status st = sd_eagle3_check_rows(n, e->max_rows, e->n_cached, e->n_ctx, e->V, 0, tokens, pos, parents,
                                             n_shared, &e->err);
    if (st) return st;
    const sd_eagle3_weights *hw = e->hw;
    const int32_t H = e->H;
    sd_cpu_embed(&e->embed, tokens, n, e->e);
    sd_cpu_rmsnorm(e->e, &hw->in_norm, n, H, e->eps, e->e);
    sd_cpu_rmsnorm(g, &hw->hidden_norm, n, H, e->eps, e->hn);
    for (int32_t t = 0; t < n; t++) {
        memcpy(e->u + (int64_t)t * 2 * H, e->e + (int64_t)t * H, (size_t)H * sizeof(float));
        memcpy(e->u + (int64_t)t * 2 * H + H, e->hn + (int64_t)t * H, (size_t)H * sizeof(float));
    }
    /* no output wanted: the rows only enter the cache (k, v need no attention, no MLP) */
    const int kv_only = !logits && !g_next;
    e3c_qkv(e, n, pos, kv_only);
    for (int32_t t = 0; t < n; t++) {
        const int32_t r = e->n_cached + t;
        e->parent[r] = parents ? parents[t] : r - 1;
        if (kv_only) continue;
        const int32_t nk = e3c_keys(e, r, parents != NULL, n_shared);
        e3c_attn_job job = {e, e->q + (int64_t)t * e->Q, e->attn + (int64_t)t * e->Q, nk};
        const int parts = e3c_attn_parts(e, nk);
        if (parts > 1) sd_cpu_pool_run(sd_cpu_pool_current(), parts, e3c_attn_part, &job, NULL);
        else e3c_attn_part(&job, 0, 1, NULL);
    }
    e->n_cached += n;
    if (!kv_only) e3c_tail(e, g, n, logits, g_next);
    return SPECDEC_OK;
}

specdec_status sd_eagle3_cpu_truncate(sd_eagle3_cpu *e, int32_t n) {
    if (!e || n < 0 || n > e->n_cached)
        return sd_fail(e ? &e->err : NULL, SPECDEC_ERR_INVALID_ARGUMENT, "eagle3 truncate: %d outside [0, %d]", (int)n,
                       e ? (int)e->n_cached : 0);
    e->n_cached = n;
    return SPECDEC_OK;
}

int32_t sd_eagle3_cpu_n_cached(const sd_eagle3_cpu *e) { return e ? e->n_cached : 0; }

const char *sd_eagle3_cpu_last_error(const sd_eagle3_cpu *e) { return e ? e->err.msg : ""; }

/* ------------------------------------------------------------------------- */
/* the CPU head runner (core/sd_eagle3.h sd_eagle3_runner)                    */
/* ------------------------------------------------------------------------- */
typedef struct e3c_runner {
    sd_eagle3_runner r; /* must be first */
    sd_eagle3_cpu *e;
    void *scratch;      /* sd_sampling_process scratch */
    size_t scratch_size;
} e3c_runner;

/* The head's linear layers (fc, q/k/v/o, the MLP, the LM head over the draft vocabulary) and its
 * attention (split over the heads, e3c_attn_part) run on the threads of its target's pool
 * (sd_cpu_runner_pool; LLM(cpu_threads=)): the head and the target never run at once (a round
 * drafts, then verifies), and neither result depends on the thread count. */
static specdec_status e3c_r_fuse(sd_eagle3_runner *r, const float *aux, int32_t n, float *g) {
    e3c_runner *c = (e3c_runner *)r;
    sd_cpu_pool *prev = sd_cpu_pool_bind(sd_cpu_runner_pool(r->target));
    const specdec_status st = sd_eagle3_cpu_fuse(c->e, aux, n, g);
    sd_cpu_pool_bind(prev);
    return st == SPECDEC_OK ? SPECDEC_OK : sd_fail(&r->base.err, st, "%s", c->e->err.msg);
}

static specdec_status e3c_r_step(sd_eagle3_runner *r, const int32_t *tokens, const float *g, const int32_t *pos,
                                 int32_t n, const int32_t *parents, int32_t n_shared, float *logits, float *g_next) {
    e3c_runner *c = (e3c_runner *)r;
    if (r->base.kv_len < c->e->n_cached) sd_eagle3_cpu_truncate(c->e, r->base.kv_len);
    if (r->base.kv_len != c->e->n_cached)
        return sd_fail(&r->base.err, SPECDEC_ERR_INTERNAL, "EAGLE-3 head: kv_len %d but %d cache rows",
                       (int)r->base.kv_len, (int)c->e->n_cached);
    sd_cpu_pool *prev = sd_cpu_pool_bind(sd_cpu_runner_pool(r->target));
    const specdec_status st = sd_eagle3_cpu_step(c->e, tokens, g, pos, n, parents, n_shared, logits, g_next);
    sd_cpu_pool_bind(prev);
    if (st != SPECDEC_OK) return sd_fail(&r->base.err, st, "%s", c->e->err.msg);
    r->base.kv_len = c->e->n_cached;
    return SPECDEC_OK;
}

static specdec_status e3c_r_q(sd_eagle3_runner *r, const float *logits, const sd_sampling_params *sp, int greedy,
                              float *q) {
    e3c_runner *c = (e3c_runner *)r;
    return sd_sampling_process_eagle3(r->hw, logits, sp, greedy, c->scratch, c->scratch_size, q, &r->base.err);
}

static void e3c_r_destroy(sd_eagle3_runner *r) {
    e3c_runner *c = (e3c_runner *)r;
    sd_eagle3_runner_fini(r);
    sd_eagle3_cpu_destroy(c->e);
    sd_free(c->scratch);
    sd_free(c);
}

static const sd_eagle3_runner_ops e3c_runner_ops = {e3c_r_fuse, e3c_r_step, e3c_r_q, e3c_r_destroy};

specdec_status sd_eagle3_cpu_runner_create(sd_eagle3_shared *sh, const sd_tensor *embed, sd_runner *target,
                                           const sd_config *target_cfg, int32_t n_ctx, int32_t rows, sd_runner **out,
                                           sd_errbuf *eb) {
    *out = NULL;
    if (!sh) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "EAGLE-3 head: no shared head weights");
    if (rows < SD_RUNNER_TREE_MAX) rows = SD_RUNNER_TREE_MAX;
    if (rows > n_ctx) rows = n_ctx;
    e3c_runner *c = sd_calloc(1, sizeof *c);
    if (!c) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "EAGLE-3 head: out of memory");
    c->r.ops = &e3c_runner_ops;
    c->r.hw = sh->hw;
    c->r.shared = sd_eagle3_shared_ref(sh);
    c->r.base.vt = &sd_eagle3_runner_vtbl;
    specdec_status st = sd_eagle3_cpu_create_shared(sh, embed, n_ctx, rows, &c->e, eb);
    if (st == SPECDEC_OK) e3c_reserve_parts(c->e, sd_cpu_pool_threads(sd_cpu_runner_pool(target)));
    if (st == SPECDEC_OK) st = sd_eagle3_runner_init(&c->r, target, target_cfg, n_ctx, rows, eb);
    if (st == SPECDEC_OK) {
        c->scratch_size = sd_sampling_scratch_size(sh->hw->cfg.layer.vocab_size);
        if (!(c->scratch = sd_malloc(c->scratch_size)))
            st = sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "EAGLE-3 head: sampling scratch");
    }
    if (st != SPECDEC_OK) {
        e3c_r_destroy(&c->r);
        return st;
    }
    *out = &c->r.base;
    return SPECDEC_OK;
}

const sd_eagle3_weights *sd_eagle3_cpu_runner_weights(sd_runner *r) {
    const sd_eagle3_runner *h = sd_eagle3_runner_of(r);
    return h && h->ops == &e3c_runner_ops ? ((const e3c_runner *)h)->e->hw : NULL;
}
