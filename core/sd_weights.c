/* sd_weights.c — the one validation of a model description: configuration values
 * (sd_config_validate, used by the config.json parser and by every runner) and the
 * tensor views against them (sd_weights_validate, used by every runner at creation). */
#include "sd_weights.h"

#include <stdio.h>

static specdec_status sd_cfg_range(const char *what, const char *key, int64_t v, int64_t lo, int64_t hi,
                                   sd_errbuf *eb) {
    if (v >= lo && v <= hi) return SPECDEC_OK;
    return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: %s = %lld outside [%lld, %lld]", what, key, (long long)v,
                   (long long)lo, (long long)hi);
}

#define SD_TRY(x)                               \
    do {                                        \
        specdec_status sd_try_st_ = (x);        \
        if (sd_try_st_ != SPECDEC_OK) return sd_try_st_; \
    } while (0)

static specdec_status sd_cfg_sizes(const sd_config *c, const char *what, sd_errbuf *eb) {
    SD_TRY(sd_cfg_range(what, "vocab_size", c->vocab_size, 1, SD_CFG_MAX_VOCAB, eb));
    SD_TRY(sd_cfg_range(what, "hidden_size", c->hidden_size, 1, SD_CFG_MAX_HIDDEN, eb));
    SD_TRY(sd_cfg_range(what, "intermediate_size", c->intermediate_size, 1, SD_CFG_MAX_INTERMEDIATE, eb));
    SD_TRY(sd_cfg_range(what, "num_hidden_layers", c->n_layers, 1, SD_CFG_MAX_LAYERS, eb));
    SD_TRY(sd_cfg_range(what, "num_attention_heads", c->n_heads, 1, SD_CFG_MAX_HEADS, eb));
    SD_TRY(sd_cfg_range(what, "num_key_value_heads", c->n_kv_heads, 1, c->n_heads, eb));
    SD_TRY(sd_cfg_range(what, "head_dim", c->head_dim, 1, SD_CFG_MAX_HEAD_DIM, eb));
    SD_TRY(sd_cfg_range(what, "max_position_embeddings", c->max_position_embeddings, 0, SD_CFG_MAX_POSITIONS, eb));
    if (c->n_heads % c->n_kv_heads)
        return sd_fail(eb, SPECDEC_ERR_FORMAT,
                       "%s: num_attention_heads (%d) is not a multiple of num_key_value_heads (%d)", what,
                       (int)c->n_heads, (int)c->n_kv_heads);
    if (c->head_dim % 2) /* RoPE rotates pairs of dimensions */
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: head_dim (%d) must be even for rotary embeddings", what,
                       (int)c->head_dim);
    return SPECDEC_OK;
}

static specdec_status sd_cfg_numbers(const sd_config *c, const char *what, sd_errbuf *eb) {
    if (!(c->rms_norm_eps > 0.0f) || !(c->rms_norm_eps <= 1.0f))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: rms_norm_eps = %g outside (0, 1]", what, (double)c->rms_norm_eps);
    if (!(c->rope_theta > 0.0f) || !(c->rope_theta < 1e30f))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: rope_theta = %g must be positive and finite", what,
                       (double)c->rope_theta);
    if (c->rope_type == SD_ROPE_LLAMA3 &&
        !(c->rope_factor > 0.0f && c->rope_low_freq_factor > 0.0f &&
          c->rope_high_freq_factor > c->rope_low_freq_factor && c->rope_original_max_pos > 0))
        return sd_fail(eb, SPECDEC_ERR_FORMAT,
                       "%s: rope_scaling (llama3) factor %g, low_freq_factor %g, high_freq_factor %g, "
                       "original_max_position_embeddings %d: all must be positive and high > low",
                       what, (double)c->rope_factor, (double)c->rope_low_freq_factor,
                       (double)c->rope_high_freq_factor, (int)c->rope_original_max_pos);
    if (c->sliding_window < 0)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: sliding_window = %d must be >= 1 (0: none)", what,
                       (int)c->sliding_window);
    return SPECDEC_OK;
}

static specdec_status sd_cfg_special_ids(const sd_config *c, const char *what, sd_errbuf *eb) {
    SD_TRY(sd_cfg_range(what, "bos_token_id", c->bos_id, -1, (int64_t)c->vocab_size - 1, eb));
    SD_TRY(sd_cfg_range(what, "number of eos_token_id entries", c->n_eos, 0, SPECDEC_MAX_EOS, eb));
    for (int32_t i = 0; i < c->n_eos; i++)
        SD_TRY(sd_cfg_range(what, "eos_token_id", c->eos_ids[i], 0, (int64_t)c->vocab_size - 1, eb));
    return SPECDEC_OK;
}

specdec_status sd_config_validate(const sd_config *cfg, const char *what, sd_errbuf *eb) {
    if (!what) what = "config";
    if (!cfg) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: NULL configuration", what);
    SD_TRY(sd_cfg_sizes(cfg, what, eb));
    SD_TRY(sd_cfg_numbers(cfg, what, eb));
    return sd_cfg_special_ids(cfg, what, eb);
}

/* A 2-D weight must be present with exactly [rows, cols]; a 1-D one [rows]. */
static specdec_status sd_check_tensor(const sd_tensor *t, const char *name, int32_t layer, int64_t rows, int64_t cols,
                                      int optional, sd_errbuf *eb) {
    if (!t->data) {
        if (optional) return SPECDEC_OK;
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "weights: layer %d: tensor %s missing", (int)layer, name);
    }
    if (t->dtype != SD_F32 && t->dtype != SD_F16 && t->dtype != SD_BF16)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "weights: layer %d: tensor %s has dtype %d", (int)layer, name,
                       (int)t->dtype);
    int ok = cols ? (t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols)
                  : ((t->ndim == 1 || (t->ndim == 2 && t->shape[1] == 1)) && t->shape[0] == rows);
    if (!ok)
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH,
                       "weights: layer %d: tensor %s has shape [%lld, %lld], expected [%lld%s%lld]", (int)layer, name,
                       (long long)t->shape[0], (long long)(t->ndim == 2 ? t->shape[1] : 0), (long long)rows,
                       cols ? ", " : "", (long long)(cols ? cols : 0));
    return SPECDEC_OK;
}

static specdec_status sd_check_layer(const sd_layer *L, int32_t l, const sd_config *c, sd_errbuf *eb) {
    const int64_t H = c->hidden_size, I = c->intermediate_size;
    const int64_t Q = (int64_t)c->n_heads * c->head_dim, KV = (int64_t)c->n_kv_heads * c->head_dim;
    SD_TRY(sd_check_tensor(&L->attn_norm, "input_layernorm.weight", l, H, 0, 0, eb));
    SD_TRY(sd_check_tensor(&L->wq, "self_attn.q_proj.weight", l, Q, H, 0, eb));
    SD_TRY(sd_check_tensor(&L->wk, "self_attn.k_proj.weight", l, KV, H, 0, eb));
    SD_TRY(sd_check_tensor(&L->wv, "self_attn.v_proj.weight", l, KV, H, 0, eb));
    SD_TRY(sd_check_tensor(&L->bq, "self_attn.q_proj.bias", l, Q, 0, 1, eb));
    SD_TRY(sd_check_tensor(&L->bk, "self_attn.k_proj.bias", l, KV, 0, 1, eb));
    SD_TRY(sd_check_tensor(&L->bv, "self_attn.v_proj.bias", l, KV, 0, 1, eb));
    SD_TRY(sd_check_tensor(&L->wo, "self_attn.o_proj.weight", l, H, Q, 0, eb));
    SD_TRY(sd_check_tensor(&L->bo, "self_attn.o_proj.bias", l, H, 0, 1, eb));
    SD_TRY(sd_check_tensor(&L->ffn_norm, "post_attention_layernorm.weight", l, H, 0, 0, eb));
    SD_TRY(sd_check_tensor(&L->w_gate, "mlp.gate_proj.weight", l, I, H, 0, eb));
    SD_TRY(sd_check_tensor(&L->w_up, "mlp.up_proj.weight", l, I, H, 0, eb));
    return sd_check_tensor(&L->w_down, "mlp.down_proj.weight", l, H, I, 0, eb);
}

specdec_status sd_weights_validate(const sd_weights *w, sd_errbuf *eb) {
    if (!w) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "weights: NULL");
    const sd_config *c = &w->cfg;
    SD_TRY(sd_config_validate(c, "weights config", eb));
    if (!w->layers) return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "weights: no layers");
    const int64_t V = c->vocab_size, H = c->hidden_size;
    SD_TRY(sd_check_tensor(&w->tok_embd, "model.embed_tokens.weight", -1, V, H, 0, eb));
    SD_TRY(sd_check_tensor(&w->out_norm, "model.norm.weight", -1, H, 0, 0, eb));
    SD_TRY(sd_check_tensor(&w->lm_head, "lm_head.weight", -1, V, H, 0, eb));
    for (int32_t l = 0; l < c->n_layers; l++) SD_TRY(sd_check_layer(&w->layers[l], l, c, eb));
    return SPECDEC_OK;
}
