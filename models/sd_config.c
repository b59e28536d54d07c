/* sd_config.c — config.json -> sd_config, with every key type- and range-checked.
 *
 * Defaults follow the transformers library's config classes where a key is optional
 * (num_key_value_heads = heads, rope_theta = 10000, rms_norm_eps = 1e-6,
 * tie_word_embeddings = false). Sizes are bounded (core/sd_weights.h) so an absurd config
 * fails here, before the loader allocates anything from it. */
#include "sd_config.h"

#include <stdio.h>
#include <string.h>

#include "sd_json.h"

#define TRY(x)                                \
    do {                                      \
        specdec_status sd_try_st_ = (x);      \
        if (sd_try_st_) return sd_try_st_;    \
    } while (0)

static const struct {
    const char *arch;
    const char *model_type;
    sd_arch id;
    int32_t default_max_pos;
} sd_cfg_archs[] = {
    {"LlamaForCausalLM", "llama", SD_ARCH_LLAMA, 2048},
    {"MistralForCausalLM", "mistral", SD_ARCH_MISTRAL, 131072},
    {"Qwen2ForCausalLM", "qwen2", SD_ARCH_QWEN2, 32768},
};
#define SD_CFG_N_ARCHS (int)(sizeof sd_cfg_archs / sizeof sd_cfg_archs[0])

static specdec_status sd_cfg_arch(const cJSON *root, const char *fname, sd_config *cfg, int *which,
                                  sd_errbuf *eb) {
    const cJSON *archs = sd_json_member(root, "architectures");
    const char *name = NULL;
    if (archs) {
        if (!cJSON_IsArray(archs) || !archs->child || !cJSON_IsString(archs->child))
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: key 'architectures' must be a non-empty list of strings",
                           fname);
        name = archs->child->valuestring;
        for (int i = 0; i < SD_CFG_N_ARCHS; i++)
            if (!strcmp(name, sd_cfg_archs[i].arch)) *which = i;
    } else {
        const cJSON *mt = sd_json_member(root, "model_type");
        if (!mt) return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: missing key 'architectures' (and no 'model_type')", fname);
        if (!cJSON_IsString(mt)) return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: key 'model_type' must be a string", fname);
        name = mt->valuestring;
        for (int i = 0; i < SD_CFG_N_ARCHS; i++)
            if (!strcmp(name, sd_cfg_archs[i].model_type)) *which = i;
    }
    if (*which < 0)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED,
                       "%s: architecture '%.64s' is not supported (LlamaForCausalLM, MistralForCausalLM, "
                       "Qwen2ForCausalLM)",
                       fname, name);
    cfg->arch = sd_cfg_archs[*which].id;
    snprintf(cfg->architecture, sizeof cfg->architecture, "%s", sd_cfg_archs[*which].arch);
    return SPECDEC_OK;
}

static specdec_status sd_cfg_i32(const cJSON *o, const char *key, int required, int64_t def, int64_t lo, int64_t hi,
                                 int32_t *out, const char *fname, sd_errbuf *eb) {
    int64_t v;
    TRY(sd_json_get_int(o, key, required, def, lo, hi, &v, fname, eb));
    *out = (int32_t)v;
    return SPECDEC_OK;
}

static specdec_status sd_cfg_rope(const cJSON *root, const char *fname, sd_config *cfg, sd_errbuf *eb) {
    /* transformers >= 5 writes rope_parameters {rope_type, rope_theta, ...}; older
     * configs write rope_theta at the top level and rope_scaling for scaled RoPE. */
    const cJSON *params = sd_json_member(root, "rope_parameters");
    if (params && !cJSON_IsObject(params))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: key 'rope_parameters' must be an object or null", fname);
    double theta;
    const cJSON *theta_src = sd_json_member(root, "rope_theta") ? root : (params ? params : root);
    TRY(sd_json_get_num(theta_src, "rope_theta", 0, 10000.0, 1.0, 1e12, &theta, fname, eb));
    cfg->rope_theta = (float)theta;
    cfg->rope_type = SD_ROPE_DEFAULT;

    const char *key = "rope_scaling";
    const cJSON *rs = sd_json_member(root, key);
    if (!rs && params) {
        rs = params;
        key = "rope_parameters";
    }
    if (!rs) return SPECDEC_OK;
    if (!cJSON_IsObject(rs)) return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: key '%s' must be an object or null", fname, key);
    const cJSON *ty = sd_json_member(rs, "rope_type");
    if (!ty) ty = sd_json_member(rs, "type");
    if (!ty) {
        if (rs == params) return SPECDEC_OK; /* rope_parameters holding only rope_theta */
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: key '%s.rope_type' is missing", fname, key);
    }
    if (!cJSON_IsString(ty)) return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: key '%s.rope_type' must be a string", fname, key);
    if (!strcmp(ty->valuestring, "default")) return SPECDEC_OK;
    if (strcmp(ty->valuestring, "llama3") != 0)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "%s: %s.rope_type '%.64s' is not supported (only 'llama3')", fname,
                       key, ty->valuestring);
    double factor, lo, hi;
    int64_t omax;
    const char *names[4] = {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
    for (int i = 0; i < 4; i++)
        if (!sd_json_member(rs, names[i]))
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: missing key '%s.%s' (rope_type llama3)", fname, key, names[i]);
    TRY(sd_json_get_num(rs, "factor", 1, 0, 1e-6, 1e6, &factor, fname, eb));
    TRY(sd_json_get_num(rs, "low_freq_factor", 1, 0, 1e-6, 1e6, &lo, fname, eb));
    TRY(sd_json_get_num(rs, "high_freq_factor", 1, 0, 1e-6, 1e6, &hi, fname, eb));
    TRY(sd_json_get_int(rs, "original_max_position_embeddings", 1, 0, 1, SD_CFG_MAX_POSITIONS, &omax, fname, eb));
    /* The llama3 ramp divides by (high - low). */
    if (!(hi > lo))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: %s.high_freq_factor (%g) must exceed low_freq_factor (%g)", fname,
                       key, hi, lo);
    cfg->rope_type = SD_ROPE_LLAMA3;
    cfg->rope_factor = (float)factor;
    cfg->rope_low_freq_factor = (float)lo;
    cfg->rope_high_freq_factor = (float)hi;
    cfg->rope_original_max_pos = (int32_t)omax;
    return SPECDEC_OK;
}

static specdec_status sd_cfg_special(const cJSON *root, const char *fname, sd_config *cfg, sd_errbuf *eb) {
    int64_t v;
    TRY(sd_json_get_int(root, "bos_token_id", 0, -1, 0, cfg->vocab_size - 1, &v, fname, eb));
    cfg->bos_id = (int32_t)v;
    cfg->n_eos = 0;
    const cJSON *eos = sd_json_member(root, "eos_token_id");
    if (!eos) return SPECDEC_OK;
    if (cJSON_IsNumber(eos)) {
        TRY(sd_json_get_int(root, "eos_token_id", 1, 0, 0, cfg->vocab_size - 1, &v, fname, eb));
        cfg->eos_ids[cfg->n_eos++] = (int32_t)v;
        return SPECDEC_OK;
    }
    if (!cJSON_IsArray(eos))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: key 'eos_token_id' must be an integer, a list of integers or null",
                       fname);
    int i = 0;
    for (const cJSON *e = eos->child; e; e = e->next, i++) {
        if (!sd_json_is_int(e) || e->valuedouble < 0 || e->valuedouble >= cfg->vocab_size)
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: key 'eos_token_id'[%d] must be an integer in [0, %d)", fname,
                           i, cfg->vocab_size);
        if (cfg->n_eos >= SPECDEC_MAX_EOS)
            return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "%s: key 'eos_token_id' lists more than %d ids", fname,
                           SPECDEC_MAX_EOS);
        cfg->eos_ids[cfg->n_eos++] = (int32_t)e->valuedouble;
    }
    return SPECDEC_OK;
}

static specdec_status sd_cfg_fill(const cJSON *root, const char *fname, sd_config *cfg, sd_errbuf *eb) {
    if (!cJSON_IsObject(root)) return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: top level is not a JSON object", fname);
    TRY(sd_json_check_unique(root, "the top-level object", fname, eb));
    int which = -1;
    TRY(sd_cfg_arch(root, fname, cfg, &which, eb));

    TRY(sd_cfg_i32(root, "vocab_size", 1, 0, 1, SD_CFG_MAX_VOCAB, &cfg->vocab_size, fname, eb));
    TRY(sd_cfg_i32(root, "hidden_size", 1, 0, 1, SD_CFG_MAX_HIDDEN, &cfg->hidden_size, fname, eb));
    TRY(sd_cfg_i32(root, "intermediate_size", 1, 0, 1, SD_CFG_MAX_INTERMEDIATE, &cfg->intermediate_size, fname, eb));
    TRY(sd_cfg_i32(root, "num_hidden_layers", 1, 0, 1, SD_CFG_MAX_LAYERS, &cfg->n_layers, fname, eb));
    TRY(sd_cfg_i32(root, "num_attention_heads", 1, 0, 1, SD_CFG_MAX_HEADS, &cfg->n_heads, fname, eb));
    TRY(sd_cfg_i32(root, "num_key_value_heads", 0, cfg->n_heads, 1, cfg->n_heads, &cfg->n_kv_heads, fname, eb));
    if (sd_json_member(root, "head_dim")) {
        TRY(sd_cfg_i32(root, "head_dim", 1, 0, 1, SD_CFG_MAX_HEAD_DIM, &cfg->head_dim, fname, eb));
    } else {
        if (cfg->hidden_size % cfg->n_heads)
            return sd_fail(eb, SPECDEC_ERR_FORMAT,
                           "%s: hidden_size (%d) is not a multiple of num_attention_heads (%d) and there is no "
                           "'head_dim'",
                           fname, cfg->hidden_size, cfg->n_heads);
        cfg->head_dim = cfg->hidden_size / cfg->n_heads;
        if (cfg->head_dim > SD_CFG_MAX_HEAD_DIM)
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: head_dim = hidden_size / num_attention_heads = %d exceeds %d",
                           fname, cfg->head_dim, SD_CFG_MAX_HEAD_DIM);
    }
    TRY(sd_cfg_i32(root, "max_position_embeddings", 0, sd_cfg_archs[which].default_max_pos, 1, SD_CFG_MAX_POSITIONS,
                   &cfg->max_position_embeddings, fname, eb));
    double eps;
    TRY(sd_json_get_num(root, "rms_norm_eps", 0, 1e-6, 1e-30, 1.0, &eps, fname, eb));
    cfg->rms_norm_eps = (float)eps;
    TRY(sd_cfg_rope(root, fname, cfg, eb));
    TRY(sd_json_get_bool(root, "tie_word_embeddings", 0, 0, &cfg->tie_word_embeddings, fname, eb));

    const cJSON *act = sd_json_member(root, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "%s: hidden_act '%.32s' is not supported (only 'silu')", fname,
                       cJSON_IsString(act) ? act->valuestring : "(not a string)");
    if (cfg->arch == SD_ARCH_QWEN2) {
        cfg->attention_bias = 1; /* Qwen2 attention always has q/k/v biases */
        int sliding = 0;
        TRY(sd_json_get_bool(root, "use_sliding_window", 0, 0, &sliding, fname, eb));
        if (sliding)
            return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "%s: use_sliding_window = true is not supported", fname);
    } else if (cfg->arch == SD_ARCH_LLAMA) {
        TRY(sd_json_get_bool(root, "attention_bias", 0, 0, &cfg->attention_bias, fname, eb));
        int mlp_bias = 0;
        TRY(sd_json_get_bool(root, "mlp_bias", 0, 0, &mlp_bias, fname, eb));
        if (mlp_bias) return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "%s: mlp_bias = true is not supported", fname);
    } else {
        cfg->attention_bias = 0; /* Mistral attention has no biases */
        /* MistralConfig: an absent key means 4096, null means no window */
        const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
        int64_t w = 4096;
        if (sw && cJSON_IsNull(sw)) w = 0;
        else if (sw) TRY(sd_json_get_int(root, "sliding_window", 1, 0, 1, SD_CFG_MAX_POSITIONS, &w, fname, eb));
        cfg->sliding_window = (int32_t)w;
    }
    return sd_cfg_special(root, fname, cfg, eb);
}

specdec_status sd_config_parse(const char *json, size_t len, const char *fname, sd_config *cfg, sd_errbuf *eb) {
    if (!fname) fname = "config.json";
    memset(cfg, 0, sizeof *cfg);
    if (!json && len) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: NULL text", fname);
    cJSON *root = NULL;
    TRY(sd_json_parse(json ? json : "", len, fname, &root, eb));
    specdec_status st = sd_cfg_fill(root, fname, cfg, eb);
    cJSON_Delete(root);
    /* value consistency (heads, head_dim, rope, special ids): the one shared check */
    return st != SPECDEC_OK ? st : sd_config_validate(cfg, fname, eb);
}

const char *sd_config_rope_name(const sd_config *cfg) {
    return cfg->rope_type == SD_ROPE_LLAMA3 ? "llama3" : "none";
}
