/* sd_weights.c — the one validation of a model description: configuration values
 * (sd_config_validate, used by the config.json parser and by every runner) and the
 * tensor views against them (sd_weights_validate, used by every runner at creation). */
#include "sd_weights.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static specdec_status sd_cfg_range(const char *what, const char *key, int64_t v, int64_t lo, int64_t hi,
                                   sd_errbuf *eb) {
    if (v >= lo && v <= hi) return SPECDEC_OK;
    return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: %s = %lld outside [%lld, %lld]", what, key, (long long)v,
                   (long long)lo, (long long)hi);
}

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

static int sd_finite_pos(double v) { return v > 0.0 && v < 1e30; }

/* The rope type's own parameters (the parser resolved every default). */
static specdec_status sd_cfg_rope_check(const sd_config *c, const char *what, sd_errbuf *eb) {
    switch (c->rope_type) {
    case SD_ROPE_DEFAULT: return SPECDEC_OK;
    case SD_ROPE_LLAMA3:
        if (!(c->rope_factor > 0.0f && c->rope_low_freq_factor > 0.0f &&
              c->rope_high_freq_factor > c->rope_low_freq_factor && c->rope_original_max_pos > 0))
            return sd_fail(eb, SPECDEC_ERR_FORMAT,
                           "%s: rope_scaling (llama3) factor %g, low_freq_factor %g, high_freq_factor %g, "
                           "original_max_position_embeddings %d: all must be positive and high > low",
                           what, (double)c->rope_factor, (double)c->rope_low_freq_factor,
                           (double)c->rope_high_freq_factor, (int)c->rope_original_max_pos);
        return SPECDEC_OK;
    case SD_ROPE_DYNAMIC:
        if (sd_cfg_rope_dim(c) <= 2) /* theta grows with the power d / (d - 2) */
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: rope_scaling (dynamic) needs more than 2 rotary dimensions",
                           what);
        /* fall through */
    case SD_ROPE_LINEAR:
        if (!sd_finite_pos(c->rope_factor))
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: rope_scaling.factor = %g must be positive", what,
                           (double)c->rope_factor);
        return SPECDEC_OK;
    case SD_ROPE_YARN:
        /* the correction range takes log(original / (beta 2 pi)) / log(theta) */
        if (!sd_finite_pos(c->rope_factor) || c->rope_original_max_pos <= 0 || !sd_finite_pos(c->rope_attn_factor) ||
            !sd_finite_pos(c->rope_beta_fast) || !sd_finite_pos(c->rope_beta_slow) || c->rope_theta == 1.0f)
            return sd_fail(eb, SPECDEC_ERR_FORMAT,
                           "%s: rope_scaling (yarn) factor %g, original_max_position_embeddings %d, attention "
                           "factor %g, beta_fast %g, beta_slow %g: all must be positive (and rope_theta != 1)",
                           what, (double)c->rope_factor, (int)c->rope_original_max_pos, (double)c->rope_attn_factor,
                           (double)c->rope_beta_fast, (double)c->rope_beta_slow);
        return SPECDEC_OK;
    case SD_ROPE_LONGROPE:
        if (c->rope_original_max_pos <= 0 || !sd_finite_pos(c->rope_attn_factor))
            return sd_fail(eb, SPECDEC_ERR_FORMAT,
                           "%s: rope_scaling (longrope) original_max_position_embeddings %d, attention factor %g "
                           "must be positive",
                           what, (int)c->rope_original_max_pos, (double)c->rope_attn_factor);
        for (int32_t i = 0; i < sd_cfg_rope_dim(c) / 2; i++)
            if (!sd_finite_pos(c->rope_short_factor[i]) || !sd_finite_pos(c->rope_long_factor[i]))
                return sd_fail(eb, SPECDEC_ERR_FORMAT,
                               "%s: rope_scaling (longrope) short_factor[%d] = %g, long_factor[%d] = %g must be "
                               "positive", what, (int)i, (double)c->rope_short_factor[i], (int)i,
                               (double)c->rope_long_factor[i]);
        return SPECDEC_OK;
    }
    return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: rope type %d unknown", what, (int)c->rope_type);
}

static specdec_status sd_cfg_numbers(const sd_config *c, const char *what, sd_errbuf *eb) {
    if (!(c->rms_norm_eps > 0.0f) || !(c->rms_norm_eps <= 1.0f))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: rms_norm_eps = %g outside (0, 1]", what, (double)c->rms_norm_eps);
    if (!sd_finite_pos(c->rope_theta))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: rope_theta = %g must be positive and finite", what,
                       (double)c->rope_theta);
    if (c->rope_local_theta != 0.0f && !sd_finite_pos(c->rope_local_theta))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: local rope theta = %g must be positive and finite", what,
                       (double)c->rope_local_theta);
    const int32_t rd = sd_cfg_rope_dim(c);
    if (rd < 2 || rd > c->head_dim || rd % 2)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: rotary dimensions %d (partial_rotary_factor x head_dim %d) must be "
                       "even, at least 2 and at most head_dim", what, (int)rd, (int)c->head_dim);
    SD_TRY(sd_cfg_rope_check(c, what, eb));
    const struct { const char *key; float v; } caps[] = {
        {"attention scale (query_pre_attn_scalar)", c->attn_scale},
        {"attn_logit_softcapping", c->attn_softcap},
        {"final_logit_softcapping", c->final_softcap},
        {"embedding scale", c->embed_scale},
        {"norm offset", c->norm_offset},
        {"residual multiplier", c->residual_scale},
        {"logits_scaling", c->logits_divisor},
        {"clip_qkv", c->clip_qkv},
    };
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
        if (!(caps[i].v >= 0.0f && caps[i].v < 1e30f))
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: %s = %g must be finite and >= 0", what, caps[i].key,
                           (double)caps[i].v);
    if ((unsigned)c->act > (unsigned)SD_ACT_GELU)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: activation %d unknown", what, (int)c->act);
    if (c->qk_norm && c->qk_norm_whole)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: per-head and whole-projection q/k norms together", what);
    if (c->post_norms_only && !c->sandwich_norms)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: post-only norms need the post-sublayer norms (sandwich_norms)",
                       what);
    int any_sliding = 0;
    for (int32_t l = 0; l < c->n_layers; l++) any_sliding |= c->layer_sliding[l] != 0;
    if (any_sliding && c->sliding_window < 1)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: sliding_window = %d: a sliding layer needs a window >= 1", what,
                       (int)c->sliding_window);
    if (c->sliding_window < 0)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: sliding_window = %d must be >= 1", what, (int)c->sliding_window);
    return SPECDEC_OK;
}

void sd_cfg_rope_params(const sd_config *c, int32_t n_ctx, int sliding, sd_rope_spec *rs) {
    memset(rs, 0, sizeof *rs);
    sd_rope_params *rp = &rs->p;
    rp->head_dim = sd_cfg_rope_dim(c);
    rs->attn_factor = 1.0;
    if (sliding && c->rope_local_theta > 0.0f) { /* Gemma 3's local layers: plain rope */
        rp->theta = (double)c->rope_local_theta;
        return;
    }
    rp->theta = (double)c->rope_theta;
    rp->factor = rs->factor = (double)c->rope_factor;
    rp->low_freq_factor = (double)c->rope_low_freq_factor;
    rp->high_freq_factor = (double)c->rope_high_freq_factor;
    rp->original_max_pos = rs->original_max_pos = (double)c->rope_original_max_pos;
    rs->beta_fast = (double)c->rope_beta_fast;
    rs->beta_slow = (double)c->rope_beta_slow;
    rs->truncate = c->rope_truncate;
    if (c->rope_attn_factor > 0.0f) rs->attn_factor = (double)c->rope_attn_factor;
    switch (c->rope_type) {
    case SD_ROPE_LLAMA3: rp->llama3 = 1; rs->type = SD_RP_LLAMA3; break;
    case SD_ROPE_LINEAR: rs->type = SD_RP_LINEAR; break;
    case SD_ROPE_YARN: rs->type = SD_RP_YARN; break;
    case SD_ROPE_LONGROPE:
        rs->type = SD_RP_LONGROPE;
        rs->ext_factor = n_ctx > c->rope_original_max_pos ? c->rope_long_factor : c->rope_short_factor;
        break;
    case SD_ROPE_DYNAMIC: {
        const double d = (double)rp->head_dim, mp = (double)c->max_position_embeddings;
        const double len = (double)n_ctx > mp ? (double)n_ctx : mp;
        rp->theta *= pow(rs->factor * len / mp - (rs->factor - 1.0), d / (d - 2.0));
        break;
    }
    default: break;
    }
}

int sd_cfg_window_binds(const sd_config *c, int32_t n_ctx) {
    if (c->sliding_window <= 0 || c->sliding_window >= n_ctx) return 0;
    for (int32_t l = 0; l < c->n_layers; l++)
        if (c->layer_sliding[l]) return 1;
    return 0;
}

int32_t sd_cfg_release_window(const sd_config *c, int32_t n_ctx) {
    if (c->n_layers < 1 || !sd_cfg_window_binds(c, n_ctx)) return 0;
    for (int32_t l = 0; l < c->n_layers; l++)
        if (!c->layer_sliding[l]) return 0;
    return c->sliding_window;
}

static specdec_status sd_cfg_special_ids(const sd_config *c, const char *what, sd_errbuf *eb) {
    SD_TRY(sd_cfg_range(what, "bos_token_id", c->bos_id, -1, (int64_t)c->vocab_size - 1, eb));
    SD_TRY(sd_cfg_range(what, "number of eos_token_id entries", c->n_eos, 0, SPECDEC_MAX_EOS, eb));
    for (int32_t i = 0; i < c->n_eos; i++)
        SD_TRY(sd_cfg_range(what, "eos_token_id", c->eos_ids[i], 0, (int64_t)c->vocab_size - 1, eb));
    return SPECDEC_OK;
}

/* The mixture of experts: sizes when some layer uses it, nothing when none does. */
static specdec_status sd_cfg_moe(const sd_config *c, const char *what, sd_errbuf *eb) {
    if (!sd_cfg_has_moe(c)) {
        if (c->moe_fused || c->experts_mxfp4)
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: fused or MXFP4 experts but no mixture-of-experts layer", what);
        return SPECDEC_OK;
    }
    if (c->experts_mxfp4 && !c->moe_fused)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: MXFP4 experts are only read in the fused layout", what);
    SD_TRY(sd_cfg_range(what, "num_experts", c->n_experts, 1, SD_CFG_MAX_EXPERTS, eb));
    SD_TRY(sd_cfg_range(what, "num_experts_per_tok", c->n_experts_used, 1, c->n_experts, eb));
    SD_TRY(sd_cfg_range(what, "shared_expert_intermediate_size", c->shared_expert_intermediate, 0,
                        SD_CFG_MAX_INTERMEDIATE, eb));
    if (c->moe_fused && (!(c->glu_limit > 0.0f && c->glu_limit < 1e30f) || !(fabsf(c->glu_alpha) < 1e30f)))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: swiglu_limit = %g must be positive and swiglu_alpha = %g finite",
                       what, (double)c->glu_limit, (double)c->glu_alpha);
    if (c->moe_fused && c->shared_expert_intermediate)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: fused experts with a shared expert", what);
    if ((unsigned)c->moe_route > SD_ROUTE_SOFTMAX_GROUPED)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: unknown expert routing %d", what, (int)c->moe_route);
    if (c->moe_fused && c->moe_route != SD_ROUTE_SOFTMAX)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: fused experts with grouped routing", what);
    if (c->shared_ungated && !c->shared_expert_intermediate)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: an ungated shared expert of width 0", what);
    if (c->moe_route != SD_ROUTE_SOFTMAX) {
        const int32_t min_group = c->moe_route == SD_ROUTE_SIGMOID_GROUPED ? 2 : 1; /* top-2 sums / maxima */
        SD_TRY(sd_cfg_range(what, "n_group", c->n_group, 1, c->n_experts, eb));
        SD_TRY(sd_cfg_range(what, "topk_group", c->topk_group, 1, c->n_group, eb));
        if (c->n_experts % c->n_group || c->n_experts / c->n_group < min_group ||
            (int64_t)c->topk_group * (c->n_experts / c->n_group) < c->n_experts_used)
            return sd_fail(eb, SPECDEC_ERR_FORMAT,
                           "%s: %d experts in n_group = %d groups (of >= %d), topk_group = %d of them competing for "
                           "num_experts_per_tok = %d",
                           what, (int)c->n_experts, (int)c->n_group, (int)min_group, (int)c->topk_group,
                           (int)c->n_experts_used);
        if (!(c->routed_scaling > 0.0f && c->routed_scaling < 1e30f))
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: routed_scaling_factor = %g must be positive and finite", what,
                           (double)c->routed_scaling);
    }
    return sd_cfg_range(what, "moe_intermediate_size", c->moe_intermediate, 1, SD_CFG_MAX_INTERMEDIATE, eb);
}

/* Multi-head latent attention: its widths and the layout the runners use (sd_weights.h). */
static specdec_status sd_cfg_mla(const sd_config *c, const char *what, sd_errbuf *eb) {
    if (!c->mla) {
        if (c->q_lora_rank || c->kv_lora_rank || c->qk_nope_dim || c->v_head_dim)
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: latent attention widths without latent attention", what);
        return SPECDEC_OK;
    }
    SD_TRY(sd_cfg_range(what, "q_lora_rank", c->q_lora_rank, 0, SD_CFG_MAX_HIDDEN, eb));
    SD_TRY(sd_cfg_range(what, "kv_lora_rank", c->kv_lora_rank, 1, SD_CFG_MAX_HIDDEN, eb));
    SD_TRY(sd_cfg_range(what, "qk_nope_head_dim", c->qk_nope_dim, 1, SD_CFG_MAX_HEAD_DIM, eb));
    SD_TRY(sd_cfg_range(what, "v_head_dim", c->v_head_dim, 1, c->head_dim, eb));
    if (c->n_kv_heads != c->n_heads || sd_cfg_rope_dim(c) + c->qk_nope_dim != c->head_dim)
        return sd_fail(eb, SPECDEC_ERR_FORMAT,
                       "%s: latent attention: %d key/value heads for %d heads, head_dim %d = rope %d + nope %d "
                       "required",
                       what, (int)c->n_kv_heads, (int)c->n_heads, (int)c->head_dim, (int)sd_cfg_rope_dim(c),
                       (int)c->qk_nope_dim);
    if (c->fused_qkv || c->qk_norm || c->qk_norm_whole || c->clip_qkv > 0.0f || c->attn_sinks)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: latent attention with another attention variant", what);
    return SPECDEC_OK;
}

const char *sd_cfg_cpu_only(const sd_config *c) {
    if (c->fp8_fmt) return "FP8 weights (quantization_config fp8 / compressed-tensors float-quantized)";
    if (c->int4_fmt == SD_INT4_GGUF) return "GGUF block-quantized weights (Q4_0 .. Q8_0, Q2_K .. Q6_K)";
    if (c->int4_fmt) return "4- / 8-bit integer weights (GPTQ / AWQ / compressed-tensors)";
    if (c->mla) return "multi-head latent attention (DeepSeek)";
    if (sd_cfg_has_moe(c)) return "mixture-of-experts layers";
    if (c->qk_norm_whole) return "q/k norms over the whole projection";
    if (c->post_norms_only) return "post-norm blocks without pre-norms";
    if (c->residual_scale > 0.0f) return "a residual multiplier";
    if (c->logits_divisor > 0.0f) return "logits_scaling";
    if (c->clip_qkv > 0.0f) return "clip_qkv";
    for (int32_t l = 0; l < c->n_layers; l++)
        if (c->layer_no_rope[l]) return "layers without rotary embeddings (no_rope_layers)";
    return NULL;
}

specdec_status sd_config_validate(const sd_config *cfg, const char *what, sd_errbuf *eb) {
    if (!what) what = "config";
    if (!cfg) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: NULL configuration", what);
    SD_TRY(sd_cfg_sizes(cfg, what, eb));
    SD_TRY(sd_cfg_numbers(cfg, what, eb));
    SD_TRY(sd_cfg_moe(cfg, what, eb));
    SD_TRY(sd_cfg_mla(cfg, what, eb));
    return sd_cfg_special_ids(cfg, what, eb);
}

/* A 2-D weight must be present with exactly [rows, cols]; a 1-D one [rows]. */
/* mxfp4_ok: an SD_MXFP4 matrix is accepted (GPT-OSS experts of an MXFP4 checkpoint): 2-D, with
 * its scales, cols a multiple of 32. */
static specdec_status sd_check_tensor_q(const sd_tensor *t, const char *name, int32_t layer, int64_t rows,
                                        int64_t cols, int optional, int mxfp4_ok, sd_errbuf *eb) {
    if (!t->data) {
        if (optional) return SPECDEC_OK;
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "weights: layer %d: tensor %s missing", (int)layer, name);
    }
    if (t->dtype == SD_MXFP4 && mxfp4_ok) {
        if (t->ndim != 2 || !t->scales || t->shape[1] % 32)
            return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH,
                           "weights: layer %d: MXFP4 tensor %s needs 2 dimensions, scales and rows of 32k values",
                           (int)layer, name);
    } else if (t->dtype == SD_FP8) { /* any matrix of an FP8 checkpoint (core/sd_weights.h SD_FP8) */
        const float *sc = t->ndim == 2 ? sd_fp8_scales(t) : NULL;
        if (!sc || !(sc[0] >= 1.0f && sc[0] <= 65536.0f && sc[1] >= 1.0f && sc[1] <= 65536.0f))
            return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH,
                           "weights: layer %d: FP8 tensor %s needs 2 dimensions and its block scales", (int)layer,
                           name);
    } else if (sd_dtype_is_int(t->dtype)) { /* a GPTQ / AWQ / compressed-tensors projection (SD_INT4, SD_INT8) */
        const sd_int4_meta *q = t->ndim == 2 ? sd_int4_meta_of(t) : NULL;
        if (!q || q->group < 1 || q->n_groups != (t->shape[1] + q->group - 1) / q->group || t->shape[1] % 2 ||
            q->bits != (t->dtype == SD_INT8 ? 8 : 4))
            return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH,
                           "weights: layer %d: integer tensor %s needs 2 dimensions, an even width and its groups",
                           (int)layer, name);
    } else if (t->dtype != SD_F32 && t->dtype != SD_F16 && t->dtype != SD_BF16) {
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "weights: layer %d: tensor %s has dtype %d", (int)layer, name,
                       (int)t->dtype);
    }
    int ok = cols ? (t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols)
                  : ((t->ndim == 1 || (t->ndim == 2 && t->shape[1] == 1)) && t->shape[0] == rows);
    if (!ok)
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH,
                       "weights: layer %d: tensor %s has shape [%lld, %lld], expected [%lld%s%lld]", (int)layer, name,
                       (long long)t->shape[0], (long long)(t->ndim == 2 ? t->shape[1] : 0), (long long)rows,
                       cols ? ", " : "", (long long)(cols ? cols : 0));
    return SPECDEC_OK;
}

static specdec_status sd_check_tensor(const sd_tensor *t, const char *name, int32_t layer, int64_t rows, int64_t cols,
                                      int optional, sd_errbuf *eb) {
    return sd_check_tensor_q(t, name, layer, rows, cols, optional, 0, eb);
}

/* One expected tensor: present exactly when `want`, then shaped [rows, cols] ([rows] when
 * cols == 0). Optional tensors must follow the configuration: a bias the forward would
 * ignore is as wrong as one it would miss. */
typedef struct sd_want {
    const sd_tensor *t;
    const char *name;
    int64_t rows, cols;
    int want;
} sd_want;

/* ts[0..n) of layer l (of its expert `expert`, or -1 for the layer's own tensors). */
/* mxfp4_ok: the tensors may be SD_MXFP4 (sd_check_tensor_q). */
static specdec_status sd_check_wants_q(const sd_want *ts, size_t n, int32_t l, int64_t expert, int mxfp4_ok,
                                       sd_errbuf *eb) {
    char of[32] = "";
    if (expert >= 0) snprintf(of, sizeof of, " of expert %lld", (long long)expert);
    for (size_t i = 0; i < n; i++) {
        if (!ts[i].want && ts[i].t->data)
            return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH,
                           "weights: layer %d: tensor %s%s is present but the configuration does not use it", (int)l,
                           ts[i].name, of);
        SD_TRY(sd_check_tensor_q(ts[i].t, ts[i].name, l, ts[i].rows, ts[i].cols, !ts[i].want, mxfp4_ok, eb));
    }
    return SPECDEC_OK;
}

static specdec_status sd_check_wants(const sd_want *ts, size_t n, int32_t l, int64_t expert, sd_errbuf *eb) {
    return sd_check_wants_q(ts, n, l, expert, 0, eb);
}

/* A MoE layer's router and experts (present exactly when the layer is one). */
static specdec_status sd_check_experts(const sd_layer *L, int32_t l, const sd_config *c, sd_errbuf *eb) {
    const int64_t H = c->hidden_size, I = c->moe_intermediate, E = c->n_experts;
    if (!c->layer_moe[l]) {
        if (L->router.data || L->router_bias.data || L->router_score_bias.data || L->experts || L->shared ||
            L->shared_gate.data)
            return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH,
                           "weights: layer %d: a router or experts, but the configuration makes its MLP dense", (int)l);
        return SPECDEC_OK;
    }
    const int64_t S = c->shared_expert_intermediate;
    const int gated = S && !c->shared_ungated;
    if (!S != !L->shared)
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "weights: layer %d: a shared expert %s", (int)l,
                       S ? "is missing" : "is present but the configuration has none");
    if (gated != !!L->shared_gate.data)
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "weights: layer %d: a shared expert gate %s", (int)l,
                       gated ? "is missing" : "is present but the configuration has none");
    if (S) {
        SD_TRY(sd_check_tensor(&L->shared->w_gate, "shared expert gate_proj", l, S, H, 0, eb));
        SD_TRY(sd_check_tensor(&L->shared->w_up, "shared expert up_proj", l, S, H, 0, eb));
        SD_TRY(sd_check_tensor(&L->shared->w_down, "shared expert down_proj", l, H, S, 0, eb));
        if (gated) SD_TRY(sd_check_tensor(&L->shared_gate, "mlp.shared_expert_gate.weight", l, 1, H, 0, eb));
    }
    SD_TRY(sd_check_tensor(&L->router, "mlp router (gate.weight)", l, E, H, 0, eb));
    const int scored = c->moe_route == SD_ROUTE_SIGMOID_GROUPED;
    if (!scored != !L->router_score_bias.data)
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "weights: layer %d: a router score bias %s", (int)l,
                       scored ? "is missing" : "is present but the configuration has none");
    if (scored)
        SD_TRY(sd_check_tensor(&L->router_score_bias, "mlp.gate.e_score_correction_bias", l, E, 0, 0, eb));
    if (!c->moe_fused != !L->router_bias.data)
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "weights: layer %d: a router bias %s", (int)l,
                       c->moe_fused ? "is missing" : "is present but the configuration has none");
    if (c->moe_fused) SD_TRY(sd_check_tensor(&L->router_bias, "mlp.router.bias", l, E, 0, 0, eb));
    if (!L->experts) return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "weights: layer %d: experts missing", (int)l);
    const int fused = c->moe_fused != 0, q = fused && c->experts_mxfp4;
    for (int64_t e = 0; e < E; e++) {
        const sd_expert *x = &L->experts[e];
        const sd_want mats[] = { /* MXFP4 (q) or any float dtype */
            {&x->w_down, "expert down projection", H, I, 1},
            {&x->w_gate_up, "expert fused gate_up projection", 2 * I, H, fused},
        };
        SD_TRY(sd_check_wants_q(mats, sizeof mats / sizeof mats[0], l, e, q, eb));
        const sd_want ts[] = {
            {&x->w_gate, "expert gate projection", I, H, !fused},
            {&x->w_up, "expert up projection", I, H, !fused},
            {&x->b_gate_up, "expert gate_up bias", 2 * I, 0, fused},
            {&x->b_down, "expert down bias", H, 0, fused},
        };
        SD_TRY(sd_check_wants(ts, sizeof ts / sizeof ts[0], l, e, eb));
    }
    return SPECDEC_OK;
}

/* Layer l's latent attention tensors (cfg.mla; sd_weights.h): exactly these, no k/v ones (q_proj
 * only when q_lora_rank is 0, checked with the others). */
static specdec_status sd_check_mla(const sd_layer *L, int32_t l, const sd_config *c, sd_errbuf *eb) {
    const int64_t H = c->hidden_size, Q = (int64_t)c->n_heads * c->head_dim, QL = c->q_lora_rank;
    const int64_t KL = c->kv_lora_rank, R = sd_cfg_rope_dim(c);
    const int64_t KVB = (int64_t)c->n_heads * (c->qk_nope_dim + c->v_head_dim);
    const int lora = QL > 0, on = c->mla != 0;
    const sd_want ts[] = {
        {&L->wq_a, "self_attn.q_a_proj.weight", QL, H, on && lora},
        {&L->bq_a, "self_attn.q_a_proj.bias", QL, 0, on && lora && c->attention_bias},
        {&L->q_a_norm, "self_attn.q_a_layernorm.weight", QL, 0, on && lora},
        {&L->wq_b, "self_attn.q_b_proj.weight", Q, QL, on && lora},
        {&L->wkv_a, "self_attn.kv_a_proj_with_mqa.weight", KL + R, H, on},
        {&L->bkv_a, "self_attn.kv_a_proj_with_mqa.bias", KL + R, 0, on && c->attention_bias},
        {&L->kv_a_norm, "self_attn.kv_a_layernorm.weight", KL, 0, on},
        {&L->wkv_b, "self_attn.kv_b_proj.weight", KVB, KL, on},
    };
    return sd_check_wants(ts, sizeof ts / sizeof ts[0], l, -1, eb);
}

static specdec_status sd_check_layer(const sd_layer *L, int32_t l, const sd_config *c, sd_errbuf *eb) {
    const int64_t H = c->hidden_size, I = c->intermediate_size, D = c->head_dim;
    const int dense = !c->layer_moe[l], qkv = !c->mla;
    const int64_t Q = (int64_t)c->n_heads * c->head_dim, KV = (int64_t)c->n_kv_heads * c->head_dim;
    const int64_t O = c->mla ? (int64_t)c->n_heads * c->v_head_dim : Q; /* o_proj's input width */
    const int pre = !c->post_norms_only, whole = c->qk_norm_whole != 0;
    SD_TRY(sd_check_mla(L, l, c, eb));
    const sd_want ts[] = {
        {&L->attn_norm, "input_layernorm.weight", H, 0, pre},
        {&L->wq, "self_attn.q_proj.weight", Q, H, qkv || !c->q_lora_rank},
        {&L->wk, "self_attn.k_proj.weight", KV, H, qkv},
        {&L->wv, "self_attn.v_proj.weight", KV, H, qkv},
        {&L->bq, "self_attn.q_proj.bias", Q, 0, qkv && c->attention_bias},
        {&L->bk, "self_attn.k_proj.bias", KV, 0, qkv && c->attention_bias},
        {&L->bv, "self_attn.v_proj.bias", KV, 0, qkv && c->attention_bias},
        {&L->q_norm, "self_attn.q_norm.weight", whole ? Q : D, 0, c->qk_norm || whole},
        {&L->k_norm, "self_attn.k_norm.weight", whole ? KV : D, 0, c->qk_norm || whole},
        {&L->wo, "self_attn.o_proj.weight", H, O, 1},
        {&L->sinks, "self_attn.sinks", c->n_heads, 0, c->attn_sinks},
        {&L->bo, "self_attn.o_proj.bias", H, 0, c->o_bias},
        {&L->attn_post_norm, "post_attention_layernorm.weight (sandwich)", H, 0, c->sandwich_norms},
        {&L->ffn_norm, "pre-MLP norm weight", H, 0, pre},
        {&L->w_gate, "mlp.gate_proj.weight", I, H, dense},
        {&L->w_up, "mlp.up_proj.weight", I, H, dense},
        {&L->w_down, "mlp.down_proj.weight", H, I, dense},
        {&L->b_gate, "mlp.gate_proj.bias", I, 0, dense && c->mlp_bias},
        {&L->b_up, "mlp.up_proj.bias", I, 0, dense && c->mlp_bias},
        {&L->b_down, "mlp.down_proj.bias", H, 0, dense && c->mlp_bias},
        {&L->ffn_post_norm, "post_feedforward_layernorm.weight", H, 0, c->sandwich_norms},
    };
    SD_TRY(sd_check_wants(ts, sizeof ts / sizeof ts[0], l, -1, eb));
    return sd_check_experts(L, l, c, eb);
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
    /* an MTP layer's front: all three or none */
    const int mtp = w->mtp_eh_proj.data != NULL;
    SD_TRY(sd_check_tensor(&w->mtp_enorm, "enorm.weight (MTP)", -1, H, 0, !mtp, eb));
    SD_TRY(sd_check_tensor(&w->mtp_hnorm, "hnorm.weight (MTP)", -1, H, 0, !mtp, eb));
    SD_TRY(sd_check_tensor(&w->mtp_eh_proj, "eh_proj.weight (MTP)", -1, H, 2 * H, !mtp, eb));
    if (!mtp && (w->mtp_enorm.data || w->mtp_hnorm.data))
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "weights: MTP norms without eh_proj.weight");
    return SPECDEC_OK;
}
