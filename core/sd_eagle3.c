/* sd_eagle3.c — checks of an EAGLE-3 head, on its own and against a target; the proposal
 * distribution q over the target vocabulary (core/sd_eagle3.h). */
#include "sd_eagle3.h"

#include <math.h>
#include <stdio.h>

#include "sd_alloc.h"

specdec_status sd_eagle3_aux_layers(const sd_eagle3_config *cfg, int32_t target_layers, int32_t out[SD_EAGLE3_N_AUX],
                                    sd_errbuf *eb) {
    const int32_t L = target_layers;
    const int expl = cfg->aux_ids[0] >= 0;
    if (expl) {
        for (int i = 0; i < SD_EAGLE3_N_AUX; i++) out[i] = cfg->aux_ids[i];
    } else {
        out[0] = 2;
        out[1] = L / 2;
        out[2] = L - 3;
    }
    for (int i = 0; i < SD_EAGLE3_N_AUX; i++) {
        if (out[i] < 0 || out[i] > L)
            return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH,
                           "EAGLE-3 %s capture layer id %d is outside the target's hidden states hs[0..%d] "
                           "(target has %d layers)",
                           expl ? "explicit" : "default-rule", (int)out[i], (int)L, (int)L);
        if (i && out[i] <= out[i - 1])
            return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH,
                           "EAGLE-3 capture layers hs[%d, %d, %d] for a %d-layer target are not three distinct "
                           "increasing ids%s",
                           (int)out[0], (int)out[1], (int)out[2], (int)L,
                           expl ? "" : " (the default rule 2, L/2, L-3 needs L >= 7; this head has no explicit "
                                       "eagle_aux_hidden_state_layer_ids)");
    }
    return SPECDEC_OK;
}

specdec_status sd_eagle3_check_target(const sd_eagle3_weights *hw, const sd_config *target, const char *what,
                                      sd_errbuf *eb) {
    const sd_eagle3_config *c = &hw->cfg;
    const int64_t fc_in = hw->fc.shape[1];
    if (fc_in != 3 * (int64_t)target->hidden_size)
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH,
                       "%s: EAGLE-3 head fc.weight takes %lld inputs (3 x target_hidden_size %d), but the target's "
                       "hidden_size is %d (3 x %d = %lld)",
                       what, (long long)fc_in, (int)c->target_hidden, (int)target->hidden_size,
                       (int)target->hidden_size, 3LL * target->hidden_size);
    if (c->layer.vocab_size != target->vocab_size)
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH,
                       "%s: EAGLE-3 head vocab_size %d differs from the target's vocab_size %d", what,
                       (int)c->layer.vocab_size, (int)target->vocab_size);
    if (!hw->embed.data && c->layer.hidden_size != target->hidden_size)
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH,
                       "%s: EAGLE-3 head has no embed_tokens.weight and its hidden_size %d differs from the "
                       "target's %d, so it cannot borrow the target's embedding",
                       what, (int)c->layer.hidden_size, (int)target->hidden_size);
    int32_t ids[SD_EAGLE3_N_AUX];
    specdec_status st = sd_eagle3_aux_layers(c, target->n_layers, ids, eb);
    if (st) {
        char tmp[SD_ERRBUF_SIZE];
        snprintf(tmp, sizeof tmp, "%s", eb ? eb->msg : specdec_last_error());
        return sd_fail(eb, st, "%s: %s", what, tmp);
    }
    return SPECDEC_OK;
}

static specdec_status sd_e3_tensor(const sd_tensor *t, const char *name, int64_t rows, int64_t cols, int optional,
                                   const char *what, sd_errbuf *eb) {
    if (!t->data) {
        if (optional) return SPECDEC_OK;
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "%s: EAGLE-3 head: missing tensor '%s'", what, name);
    }
    if (t->dtype != SD_F32 && t->dtype != SD_F16 && t->dtype != SD_BF16)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "%s: EAGLE-3 head: tensor '%s' has an unsupported dtype", what,
                       name);
    const int nd = cols ? 2 : 1;
    if (t->ndim != nd || t->shape[0] != rows || (cols && t->shape[1] != cols))
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH,
                       "%s: EAGLE-3 head: tensor '%s' is [%lld, %lld], the config implies [%lld, %lld]", what, name,
                       (long long)t->shape[0], (long long)(t->ndim == 2 ? t->shape[1] : 0), (long long)rows,
                       (long long)cols);
    return SPECDEC_OK;
}

static specdec_status sd_e3_check_layer(const sd_eagle3_weights *hw, const char *what, sd_errbuf *eb) {
    const sd_config *l = &hw->cfg.layer;
    const int64_t H = l->hidden_size, F = l->intermediate_size;
    const int64_t Q = (int64_t)l->n_heads * l->head_dim, KV = (int64_t)l->n_kv_heads * l->head_dim;
    SD_TRY(sd_e3_tensor(&hw->in_norm, "input_layernorm.weight", H, 0, 0, what, eb));
    SD_TRY(sd_e3_tensor(&hw->hidden_norm, "hidden_norm.weight", H, 0, 0, what, eb));
    SD_TRY(sd_e3_tensor(&hw->wq, "self_attn.q_proj.weight", Q, 2 * H, 0, what, eb));
    SD_TRY(sd_e3_tensor(&hw->wk, "self_attn.k_proj.weight", KV, 2 * H, 0, what, eb));
    SD_TRY(sd_e3_tensor(&hw->wv, "self_attn.v_proj.weight", KV, 2 * H, 0, what, eb));
    SD_TRY(sd_e3_tensor(&hw->wo, "self_attn.o_proj.weight", H, Q, 0, what, eb));
    SD_TRY(sd_e3_tensor(&hw->post_norm, "post_attention_layernorm.weight", H, 0, 0, what, eb));
    SD_TRY(sd_e3_tensor(&hw->w_gate, "mlp.gate_proj.weight", F, H, 0, what, eb));
    SD_TRY(sd_e3_tensor(&hw->w_up, "mlp.up_proj.weight", F, H, 0, what, eb));
    return sd_e3_tensor(&hw->w_down, "mlp.down_proj.weight", H, F, 0, what, eb);
}

specdec_status sd_eagle3_validate(const sd_eagle3_weights *hw, const char *what, sd_errbuf *eb) {
    const sd_eagle3_config *c = &hw->cfg;
    SD_TRY(sd_config_validate(&c->layer, what, eb));
    const int64_t H = c->layer.hidden_size, V = c->layer.vocab_size, tH = c->target_hidden;
    if (tH < 1 || tH > SD_CFG_MAX_HIDDEN)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: target_hidden_size %lld is outside [1, %d]", what, (long long)tH,
                       SD_CFG_MAX_HIDDEN);
    if (c->draft_vocab < 1 || c->draft_vocab > V)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: draft_vocab_size %d is outside [1, vocab_size %lld]", what,
                       (int)c->draft_vocab, (long long)V);
    SD_TRY(sd_e3_tensor(&hw->fc, "fc.weight", H, 3 * tH, 0, what, eb));
    SD_TRY(sd_e3_tensor(&hw->fc_bias, "fc.bias", H, 0, 1, what, eb));
    for (int i = 0; i < SD_EAGLE3_N_AUX; i++)
        SD_TRY(sd_e3_tensor(&hw->fc_norm[i], "fc_norm.N.weight", tH, 0, !c->fc_norm, what, eb));
    SD_TRY(sd_e3_tensor(&hw->input_norm, "input_norm.weight", 3 * tH, 0, !c->norm_before_fc, what, eb));
    SD_TRY(sd_e3_tensor(&hw->embed, "embed_tokens.weight", V, H, 1, what, eb));
    if (!hw->embed.data && tH != H)
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH,
                       "%s: EAGLE-3 head with target_hidden_size %lld != hidden_size %lld must ship "
                       "embed_tokens.weight",
                       what, (long long)tH, (long long)H);
    SD_TRY(sd_e3_check_layer(hw, what, eb));
    SD_TRY(sd_e3_tensor(&hw->norm, "norm.weight", H, 0, 0, what, eb));
    SD_TRY(sd_e3_tensor(&hw->lm_head, "lm_head.weight", c->draft_vocab, H, 0, what, eb));
    if (!hw->d2t) return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "%s: EAGLE-3 head: no draft-to-target map", what);
    return SPECDEC_OK;
}

specdec_status sd_eagle3_check_rows(int32_t n, int32_t max_rows, int32_t n_cached, int32_t n_ctx, int32_t V,
                                    int32_t pos_limit, const int32_t *tokens, const int32_t *pos,
                                    const int32_t *parents, int32_t n_shared, sd_errbuf *eb) {
    if (n < 1 || n > max_rows)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "eagle3 step: n = %d outside [1, %d]", (int)n, (int)max_rows);
    if (n_cached + n > n_ctx)
        return sd_fail(eb, SPECDEC_ERR_CONTEXT_FULL, "eagle3 step: %d cached + %d rows exceed n_ctx %d", (int)n_cached,
                       (int)n, (int)n_ctx);
    if (parents && (n_shared < 0 || n_shared > n_cached))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "eagle3 step: n_shared %d outside [0, %d]", (int)n_shared,
                       (int)n_cached);
    for (int32_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= V)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "eagle3 step: token[%d] = %d outside [0, %d)", (int)i,
                           (int)tokens[i], (int)V);
        if (pos[i] < 0 || (pos_limit > 0 && pos[i] >= pos_limit))
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "eagle3 step: pos[%d] = %d outside [0, %d)", (int)i,
                           (int)pos[i], (int)(pos_limit > 0 ? pos_limit : INT32_MAX));
        if (parents && (parents[i] < -1 || parents[i] >= n_cached + i))
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                           "eagle3 step: parents[%d] = %d is not -1 or an earlier cache row (< %d)", (int)i,
                           (int)parents[i], (int)(n_cached + i));
    }
    return SPECDEC_OK;
}

int32_t sd_eagle3_q(const sd_eagle3_weights *hw, const float *logits, float *q) {
    const int32_t Vd = hw->cfg.draft_vocab, V = hw->cfg.layer.vocab_size;
    int32_t best = 0;
    for (int32_t i = 1; i < Vd; i++)
        if (logits[i] > logits[best]) best = i;
    double mx = (double)logits[best], z = 0.0;
    for (int32_t i = 0; i < Vd; i++) z += exp((double)logits[i] - mx);
    for (int32_t t = 0; t < V; t++) q[t] = 0.0f;
    for (int32_t i = 0; i < Vd; i++) q[hw->d2t[i]] = (float)(exp((double)logits[i] - mx) / z);
    return hw->d2t[best];
}

/* ------------------------------------------------------------------------- */
/* head runners                                                               */
/* ------------------------------------------------------------------------- */
static specdec_status e3r_forward(sd_runner *r, const int32_t *tokens, int32_t n, int32_t pos, float *logits) {
    (void)tokens, (void)n, (void)pos, (void)logits;
    return sd_fail(&r->err, SPECDEC_ERR_UNSUPPORTED,
                   "EAGLE-3 head: forward() of tokens alone is not defined (its rows need the target's hidden states)");
}

static void e3r_destroy(sd_runner *r) {
    sd_eagle3_runner *e = (sd_eagle3_runner *)r;
    if (e) e->ops->destroy(e);
}

const sd_runner_vtbl sd_eagle3_runner_vtbl = {e3r_forward, e3r_destroy};

sd_eagle3_runner *sd_eagle3_runner_of(sd_runner *r) {
    return r && r->vt == &sd_eagle3_runner_vtbl ? (sd_eagle3_runner *)r : NULL;
}

specdec_status sd_head_runner_init(sd_eagle3_runner *r, sd_runner *target, const int32_t *capture, int32_t n_capture,
                                   int32_t V, int32_t hid, int32_t aux_w, int32_t vd, const int32_t *d2t, int32_t n_ctx,
                                   int32_t rows, sd_errbuf *eb) {
    if (!target->group)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "draft head: the target runner captures no hidden states");
    SD_TRY(sd_runner_group_set_capture(target->group, capture, n_capture, eb));
    if (rows < SD_RUNNER_TREE_MAX) rows = SD_RUNNER_TREE_MAX;
    r->base.vt = &sd_eagle3_runner_vtbl;
    r->base.backend = target->backend;
    r->base.n_vocab = V;
    r->base.n_ctx = n_ctx;
    r->base.max_batch = rows;
    r->base.kv_len = 0;
    r->target = target;
    r->rows = rows;
    r->root_row = -1;
    r->hid = hid;
    r->aux_w = aux_w;
    r->vd = vd;
    r->d2t = d2t;
    const size_t R = (size_t)rows, H = (size_t)hid, Vd = (size_t)vd;
    if (!r->aux_backend) r->aux = sd_malloc(R * (size_t)aux_w * sizeof(float));
    r->g = sd_malloc(R * H * sizeof(float));
    r->gnext = sd_malloc(R * H * sizeof(float));
    r->logits = sd_malloc(R * Vd * sizeof(float));
    r->root = sd_malloc(Vd * sizeof(float));
    r->groot = sd_malloc(H * sizeof(float));
    r->tok = sd_malloc(R * sizeof(int32_t));
    r->pos = sd_malloc(R * sizeof(int32_t));
    if (!r->aux || !r->g || !r->gnext || !r->logits || !r->root || !r->groot || !r->tok || !r->pos)
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "draft head: buffers of %d rows", (int)rows);
    return SPECDEC_OK;
}

specdec_status sd_eagle3_runner_init(sd_eagle3_runner *r, sd_runner *target, const sd_config *target_cfg,
                                     int32_t n_ctx, int32_t rows, sd_errbuf *eb) {
    const sd_eagle3_config *c = &r->hw->cfg;
    SD_TRY(sd_eagle3_check_target(r->hw, target_cfg, "EAGLE-3 head", eb));
    SD_TRY(sd_eagle3_aux_layers(c, target_cfg->n_layers, r->aux_ids, eb));
    return sd_head_runner_init(r, target, r->aux_ids, SD_EAGLE3_N_AUX, c->layer.vocab_size, c->layer.hidden_size,
                               SD_EAGLE3_N_AUX * c->target_hidden, c->draft_vocab, r->hw->d2t, n_ctx, rows, eb);
}

sd_eagle3_shared *sd_eagle3_shared_ref(sd_eagle3_shared *s) {
    if (s) s->refs++;
    return s;
}

void sd_eagle3_shared_unref(sd_eagle3_shared *s) {
    if (s && --s->refs <= 0) s->free_fn(s);
}

void sd_eagle3_runner_fini(sd_eagle3_runner *r) {
    if (!r) return;
    sd_eagle3_shared_unref(r->shared);
    r->shared = NULL;
    void *bufs[] = {r->aux_backend ? NULL : r->aux, r->g, r->gnext, r->logits, r->root, r->groot, r->tok, r->pos,
                    r->work, r->gmask};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sd_free(bufs[i]);
    if (!r->aux_backend) r->aux = NULL;
    r->g = r->gnext = r->logits = r->root = r->groot = NULL;
    r->tok = r->pos = NULL;
    r->work = NULL;
    r->gmask = NULL;
}
