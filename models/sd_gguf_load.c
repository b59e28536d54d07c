/* sd_gguf_load.c — a GGUF file as the model loader's input (see sd_gguf_load.h). The metadata becomes
 * the config.json text the Hugging Face checkpoint would have (then sd_config_parse checks it like any
 * other), the tensor table an sd_st_header of Hugging Face names over the mapped file. */
#define _POSIX_C_SOURCE 200809L
#include "sd_gguf_load.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sd_alloc.h"
#include "sd_config.h"
#include "sd_ggml.h"
#include "sd_gguf.h"
#include "sd_json.h"

/* Most files of a split GGUF (llama.cpp's gguf-split: split.count). */
#define SD_GGUF_MAX_SHARDS 1024

int sd_gguf_path(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char magic[4];
    const int ok = fread(magic, 1, 4, f) == 4 && !memcmp(magic, "GGUF", 4);
    fclose(f);
    return ok;
}

typedef struct gguf_arch {
    const char *name, *cls, *model_type;
    int interleaved; /* llama.cpp's converter permuted attn_q / attn_k for ggml's adjacent-pair rope */
    int norm_shifted; /* Gemma: the converter stored every RMSNorm weight as (1 + w), which llama.cpp multiplies by */
} gguf_arch;

static const gguf_arch gguf_archs[] = {
    {"llama", "LlamaForCausalLM", "llama", 1, 0},
    {"qwen2", "Qwen2ForCausalLM", "qwen2", 0, 0},
    {"qwen2vl", "Qwen2ForCausalLM", "qwen2", 0, 0}, /* Qwen2-VL / Qwen2.5-VL's text: its sectioned rope is the plain
                                                       rope on text positions (rope.dimension_sections not read) */
    {"qwen3", "Qwen3ForCausalLM", "qwen3", 0, 0},
    {"qwen2moe", "Qwen2MoeForCausalLM", "qwen2_moe", 0, 0},
    {"qwen3moe", "Qwen3MoeForCausalLM", "qwen3_moe", 0, 0},
    {"llama", "MixtralForCausalLM", "mixtral", 1, 0}, /* "llama" with llama.expert_count > 0 (gguf_arch_of) */
    {"phi3", "Phi3ForCausalLM", "phi3", 0, 0},        /* fused attn_qkv and ffn_up (gate and up), longrope */
    {"gemma", "GemmaForCausalLM", "gemma", 0, 1},
    {"gemma2", "Gemma2ForCausalLM", "gemma2", 0, 1}, /* sandwich norms, soft-capping, a window on even layers */
    {"gemma3", "Gemma3ForCausalLM", "gemma3_text", 0, 1}, /* the text model of Gemma 3 (1B-27B; not 3n) */
    {"gpt-oss", "GptOssForCausalLM", "gpt_oss", 0, 0}, /* MXFP4 experts (repacked at load), sinks, biases */
    {"smollm3", "SmolLM3ForCausalLM", "smollm3", 1, 0}, /* llama's q / k permutation; every 4th layer no rope */
    {"olmo2", "Olmo2ForCausalLM", "olmo2", 0, 0},      /* post-norm blocks, whole-projection q / k norms */
    {"granite", "GraniteForCausalLM", "granite", 1, 0}, /* llama's q / k permutation; four multipliers */
    {"glm4moe", "Glm4MoeForCausalLM", "glm4_moe", 0, 0}, /* GLM-4.5 / 4.6 / Air; its MTP block is not loaded */
    {"glm4", "Glm4ForCausalLM", "glm4", 1, 0},           /* GLM-4-0414 / Z1: GLM's adjacent-pair rope, fused up */
    {"olmoe", "OlmoeForCausalLM", "olmoe", 0, 0},        /* OLMoE: whole-projection q / k norms, top-k unnormalised */
    {"ernie4_5", "Ernie4_5ForCausalLM", "ernie4_5", 1, 0}, /* ERNIE-4.5 dense (0.3B): adjacent-pair rope */
    {"exaone4", "Exaone4ForCausalLM", "exaone4", 0, 0},  /* EXAONE 4.0: post norms, windows by layer, NoPE global */
    {"granitemoe", "GraniteMoeForCausalLM", "granitemoe", 1, 0}, /* Granite 3.x MoE: the multipliers, experts */
    /* DeepSeek-V2 / V3 (and Kimi K2, Moonlight): latent attention; the V3 class when routing by the sigmoid */
    {"deepseek2", "DeepseekV2ForCausalLM", "deepseek_v2", 1, 0},
};

/* Tensors read into the configuration, not loaded: Llama 3.1's rope divisors, Phi-3's longrope factors. */
static int gguf_config_tensor(const char *name) {
    return !strcmp(name, "rope_freqs.weight") || !strcmp(name, "rope_factors_long.weight") ||
           !strcmp(name, "rope_factors_short.weight");
}

static const char *const gguf_global[][2] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

/* A GGUF tensor name part (blk.N.<gguf>.weight) and its Hugging Face one (model.layers.N.<hf>.weight); bare:
 * transformers' name has no ".weight" / ".bias" (GPT-OSS's sinks, DeepSeek's score bias). */
typedef struct gguf_name {
    const char *gguf, *hf;
    int bare;
} gguf_name;
#define GN(g, h) {g, h, 0}
#define GN_BARE(g, h) {g, h, 1}

static const gguf_name gguf_layer[] = {
    GN("attn_norm", "input_layernorm"),     GN("attn_q", "self_attn.q_proj"),         GN("attn_k", "self_attn.k_proj"),
    GN("attn_v", "self_attn.v_proj"),       GN("attn_output", "self_attn.o_proj"),    GN("attn_q_norm", "self_attn.q_norm"),
    GN("attn_k_norm", "self_attn.k_norm"),  GN("ffn_norm", "post_attention_layernorm"), GN("ffn_gate", "mlp.gate_proj"),
    GN("ffn_up", "mlp.up_proj"),            GN("ffn_down", "mlp.down_proj"),
    GN("ffn_gate_inp", "mlp.gate"),         GN("ffn_gate_shexp", "mlp.shared_expert.gate_proj"),
    GN("ffn_up_shexp", "mlp.shared_expert.up_proj"), GN("ffn_down_shexp", "mlp.shared_expert.down_proj"),
    GN("ffn_gate_inp_shexp", "mlp.shared_expert_gate"), GN("attn_qkv", "self_attn.qkv_proj"),
};

/* Gemma 2 / 3's four norms a layer (gguf-py's names for them): ffn_norm is the one before the MLP there;
 * OLMo 2's and EXAONE 4's two (post-norm blocks) are the post ones. */
static const gguf_name gguf_sandwich[] = {
    GN("post_attention_norm", "post_attention_layernorm"), GN("ffn_norm", "pre_feedforward_layernorm"),
    GN("post_ffw_norm", "post_feedforward_layernorm"),
};

/* GPT-OSS's names: the pre-MLP norm, the router, the attention sinks and the experts' biases; its stacked MXFP4
 * experts stay whole, `mlp.experts.{gate,up,down}_proj.weight` [E, rows, cols] (the loader interleaves gate
 * and up into transformers' gate_up_proj). */
static const gguf_name gguf_oss[] = {
    GN("post_attention_norm", "post_attention_layernorm"), GN("ffn_gate_inp", "mlp.router"),
    GN_BARE("attn_sinks", "self_attn.sinks"), GN("ffn_gate_exps", "mlp.experts.gate_proj"),
    GN("ffn_up_exps", "mlp.experts.up_proj"), GN("ffn_down_exps", "mlp.experts.down_proj"),
};

/* DeepSeek's latent attention and shared experts; attn_k_b / attn_v_b (the converter's split of kv_b_proj)
 * are put back together by the loader (models/sd_model_load.c). */
static const gguf_name gguf_ds2_names[] = {
    GN("attn_q_a", "self_attn.q_a_proj"),       GN("attn_q_a_norm", "self_attn.q_a_layernorm"),
    GN("attn_q_b", "self_attn.q_b_proj"),       GN("attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa"),
    GN("attn_kv_a_norm", "self_attn.kv_a_layernorm"), GN("attn_kv_b", "self_attn.kv_b_proj"),
    GN("attn_k_b", "self_attn.k_b_proj"),       GN("attn_v_b", "self_attn.v_b_proj"),
    GN("ffn_gate_shexp", "mlp.shared_experts.gate_proj"), GN("ffn_up_shexp", "mlp.shared_experts.up_proj"),
    GN("ffn_down_shexp", "mlp.shared_experts.down_proj"), GN_BARE("exp_probs_b", "mlp.gate.e_score_correction_bias"),
};

/* GLM-4-0414's names: its sandwich norms, the fused gate_up (as Phi-3's ffn_up). */
static const gguf_name gguf_glm4[] = {
    GN("post_attention_norm", "post_self_attn_layernorm"), GN("post_ffw_norm", "post_mlp_layernorm"),
    GN("ffn_up", "mlp.gate_up_proj"),
};

/* GLM-4.5's names: the pre-MLP norm, the ungated shared experts (plural), the router's score bias; the MTP
 * block's front and head (gguf-py's NEXTN_* names; embed_tokens and shared_head_head are optional copies). */
static const gguf_name gguf_glm4moe[] = {
    GN("post_attention_norm", "post_attention_layernorm"), GN("ffn_gate_shexp", "mlp.shared_experts.gate_proj"),
    GN("ffn_up_shexp", "mlp.shared_experts.up_proj"),      GN("ffn_down_shexp", "mlp.shared_experts.down_proj"),
    GN_BARE("exp_probs_b", "mlp.gate.e_score_correction_bias"),
    GN("nextn.eh_proj", "eh_proj"),                        GN("nextn.enorm", "enorm"),
    GN("nextn.hnorm", "hnorm"),                            GN("nextn.shared_head_norm", "shared_head.norm"),
    GN("nextn.shared_head_head", "shared_head.head"),      GN("nextn.embed_tokens", "embed_tokens"),
};

/* Granite MoE's router. */
static const gguf_name gguf_granitemoe[] = {GN("ffn_gate_inp", "block_sparse_moe.router.layer")};

#define GN_TABLE(t) t, sizeof t / sizeof t[0]
/* The names a family reads differently from gguf_layer's, looked up first. */
static const struct {
    sd_arch fam;
    const gguf_name *names;
    size_t n;
} gguf_family_names[] = {
    {SD_ARCH_GEMMA2, GN_TABLE(gguf_sandwich)},      {SD_ARCH_GEMMA3, GN_TABLE(gguf_sandwich)},
    {SD_ARCH_OLMO2, GN_TABLE(gguf_sandwich)},       {SD_ARCH_EXAONE4, GN_TABLE(gguf_sandwich)},
    {SD_ARCH_GPT_OSS, GN_TABLE(gguf_oss)},          {SD_ARCH_GRANITE_MOE, GN_TABLE(gguf_granitemoe)},
    {SD_ARCH_DEEPSEEK_V2, GN_TABLE(gguf_ds2_names)}, {SD_ARCH_DEEPSEEK_V3, GN_TABLE(gguf_ds2_names)},
    {SD_ARCH_GLM4, GN_TABLE(gguf_glm4)},            {SD_ARCH_GLM4_MOE, GN_TABLE(gguf_glm4moe)},
};

/* The entry of names[0..n) for the name part [part, part + len), or NULL. */
static const gguf_name *gguf_name_find(const gguf_name *names, size_t n, const char *part, size_t len) {
    for (size_t i = 0; i < n; i++)
        if (strlen(names[i].gguf) == len && !strncmp(part, names[i].gguf, len)) return &names[i];
    return NULL;
}

/* A mixture of experts' stacked experts: [E, rows, cols] (ne = {cols, rows, E}), split into E matrices. */
static const char *const gguf_experts[][2] = {
    {"ffn_gate_exps", "gate_proj"}, {"ffn_up_exps", "up_proj"}, {"ffn_down_exps", "down_proj"},
};

/* The Hugging Face name of GGUF tensor `name` into hf (1), or 0 when specdec does not map it. */
static int gguf_hf_name(const char *name, int64_t n_layers, sd_arch fam, char *hf, size_t cap) {
    for (size_t i = 0; i < sizeof gguf_global / sizeof gguf_global[0]; i++)
        if (!strcmp(name, gguf_global[i][0])) return snprintf(hf, cap, "%s", gguf_global[i][1]) > 0;
    if (strncmp(name, "blk.", 4)) return 0;
    char *end = NULL;
    const char *p = name + 4;
    if (*p < '0' || *p > '9') return 0;
    const long l = strtol(p, &end, 10);
    if (*end != '.' || l < 0 || l >= n_layers || (p[0] == '0' && end != p + 1)) return 0;
    const char *part = end + 1, *dot = strrchr(part, '.');
    if (!dot || (strcmp(dot, ".weight") && strcmp(dot, ".bias"))) return 0;
    const size_t n_part = (size_t)(dot - part);
    const gguf_name *e = NULL;
    for (size_t i = 0; !e && i < sizeof gguf_family_names / sizeof gguf_family_names[0]; i++)
        if (gguf_family_names[i].fam == fam)
            e = gguf_name_find(gguf_family_names[i].names, gguf_family_names[i].n, part, n_part);
    if (!e) e = gguf_name_find(gguf_layer, sizeof gguf_layer / sizeof gguf_layer[0], part, n_part);
    if (e) return snprintf(hf, cap, "model.layers.%ld.%s%s", l, e->hf, e->bare ? "" : dot) > 0;
    return 0;
}

/* Mixtral's names for the router and the experts' gate / up / down. */
static const char *const gguf_mixtral[][2] = {
    {"mlp.gate", "block_sparse_moe.gate"}, {"gate_proj", "w1"}, {"up_proj", "w3"}, {"down_proj", "w2"},
};

/* The experts' projection of a stacked GGUF tensor `name` (blk.N.ffn_*_exps.weight) into *proj and its
 * layer into *layer (1), or 0. */
static int gguf_experts_of(const char *name, int64_t n_layers, const char **proj, long *layer) {
    char *end = NULL;
    if (strncmp(name, "blk.", 4) || name[4] < '0' || name[4] > '9') return 0;
    const long l = strtol(name + 4, &end, 10);
    if (*end != '.' || l < 0 || l >= n_layers) return 0;
    for (size_t i = 0; i < sizeof gguf_experts / sizeof gguf_experts[0]; i++) {
        const size_t n = strlen(gguf_experts[i][0]);
        if (!strncmp(end + 1, gguf_experts[i][0], n) && !strcmp(end + 1 + n, ".weight")) {
            *proj = gguf_experts[i][1], *layer = l;
            return 1;
        }
    }
    return 0;
}

typedef struct gguf_ctx {
    const sd_gguf *g;
    const char *path, *arch;
    cJSON *cfg;
} gguf_ctx;

/* `<arch>.<key>` as an integer in [lo, hi] into cfg[json] (required, or skipped when absent). */
static specdec_status gguf_int(gguf_ctx *x, const char *key, const char *json, int required, int64_t lo, int64_t hi,
                               int64_t *out) {
    char k[160];
    snprintf(k, sizeof k, "%s.%s", x->arch, key);
    const sd_gguf_kv *kv = sd_gguf_find(x->g, k);
    int64_t v = 0;
    if (!kv) {
        if (required) return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF metadata '%s' is missing", x->path, k);
        return SPECDEC_OK;
    }
    if (kv->type == SD_GGUF_ARRAY)
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF metadata '%s' is a per-layer array (layers of different "
                       "shapes are not supported)", x->path, k);
    if (!sd_gguf_get_i64(x->g, k, &v) || v < lo || v > hi)
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF metadata '%s' must be an integer in [%lld, %lld]", x->path, k,
                       (long long)lo, (long long)hi);
    if (json) cJSON_AddNumberToObject(x->cfg, json, (double)v);
    if (out) *out = v;
    return SPECDEC_OK;
}

static specdec_status gguf_num(gguf_ctx *x, const char *key, const char *json, int required, double *out) {
    char k[160];
    snprintf(k, sizeof k, "%s.%s", x->arch, key);
    double v = 0.0;
    if (!sd_gguf_find(x->g, k)) {
        if (required) return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF metadata '%s' is missing", x->path, k);
        return SPECDEC_OK;
    }
    if (!sd_gguf_get_f64(x->g, k, &v) || !(v > 0.0) || !(v < 1e30))
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF metadata '%s' must be a positive number", x->path, k);
    if (json) cJSON_AddNumberToObject(x->cfg, json, v);
    if (out) *out = v;
    return SPECDEC_OK;
}

/* Phi-3's longrope (Phi-3-*-128k, Phi-3.5, Phi-4-mini): rope_factors_short / rope_factors_long (F32, one
 * per rotary pair), phi3.rope.scaling.original_context_length and phi3.rope.scaling.attn_factor (the cos /
 * sin multiplier the converter computed, as transformers does). */
static specdec_status gguf_longrope(gguf_ctx *x, int64_t rd, const uint8_t *data) {
    static const char *const names[2][2] = {{"rope_factors_short.weight", "short_factor"},
                                            {"rope_factors_long.weight", "long_factor"}};
    cJSON *rs = cJSON_AddObjectToObject(x->cfg, "rope_scaling");
    cJSON_AddStringToObject(rs, "rope_type", "longrope");
    for (int i = 0; i < 2; i++) {
        const sd_gguf_tensor *t = sd_gguf_find_tensor(x->g, names[i][0]);
        if (!t || t->type != SD_GGML_F32 || t->ndim != 1 || t->ne[0] != rd / 2)
            return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF tensor '%s' must be F32 [%lld] (one factor per rotary "
                           "pair)", x->path, names[i][0], (long long)(rd / 2));
        cJSON *a = cJSON_AddArrayToObject(rs, names[i][1]);
        for (int64_t j = 0; j < rd / 2; j++) {
            float v;
            memcpy(&v, data + t->offset + 4 * (uint64_t)j, 4);
            cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v));
        }
    }
    double orig = 0.0, af = 1.0;
    SD_TRY(gguf_num(x, "rope.scaling.original_context_length", NULL, 1, &orig));
    SD_TRY(gguf_num(x, "rope.scaling.attn_factor", NULL, 0, &af));
    cJSON_AddNumberToObject(rs, "original_max_position_embeddings", orig);
    cJSON_AddNumberToObject(rs, "attention_factor", af);
    /* Phi3Config's own key (default 4096) is what picks the long factors beyond it (transformers' rule) */
    cJSON_AddNumberToObject(x->cfg, "original_max_position_embeddings", orig);
    return SPECDEC_OK;
}

/* yarn (Qwen2.5 / Qwen3 long-context files): rope.scaling.factor, .original_context_length and the optional
 * .yarn_beta_fast / .yarn_beta_slow (transformers' defaults 32 / 1 otherwise), as llama.cpp runs them: the
 * ramp between the floor / ceil correction dimensions, extrapolation factor 1, and cos / sin scaled by
 * 0.1 ln(factor) + 1 — transformers' yarn without attention_factor. The keys that would change that
 * (.yarn_ext_factor other than 1, .attn_factor, .yarn_log_multiplier other than 0 outside deepseek2, where
 * llama.cpp's and transformers' conventions differ) are refused, naming the key; deepseek2's log multiplier is
 * 0.1 x mscale_all_dim (and mscale the same: llama.cpp's softmax scale mscale^2 / sqrt(head), cos / sin
 * unscaled). */
static specdec_status gguf_yarn(gguf_ctx *x) {
    static const char *const odd[] = {"rope.scaling.yarn_ext_factor", "rope.scaling.attn_factor",
                                      "rope.scaling.yarn_attn_factor", "rope.scaling.yarn_log_multiplier"};
    const int mla = !strcmp(x->arch, "deepseek2");
    double log_mul = 0.0;
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        char k[160];
        double v = 0.0;
        snprintf(k, sizeof k, "%s.%s", x->arch, odd[i]);
        if (!sd_gguf_find(x->g, k)) continue;
        if (i == 3 && mla) { /* DeepSeek: 0.1 x mscale_all_dim (llama.cpp scales the softmax by its square) */
            if (!sd_gguf_get_f64(x->g, k, &log_mul) || !(log_mul >= 0.0) || !(log_mul < 100.0))
                return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF metadata '%s' must be a number in [0, 100)",
                               x->path, k);
            continue;
        }
        const double neutral = i == 0 ? 1.0 : i == 3 ? 0.0 : NAN;
        if (!sd_gguf_get_f64(x->g, k, &v) || !(v == neutral))
            return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF metadata '%s' with yarn rope scaling is not "
                           "supported (llama.cpp's reading of it is not transformers')", x->path, k);
    }
    double f = 1.0, orig = 0.0, bf = 32.0, bs = 1.0;
    SD_TRY(gguf_num(x, "rope.scaling.factor", NULL, 1, &f));
    SD_TRY(gguf_num(x, "rope.scaling.original_context_length", NULL, 1, &orig));
    SD_TRY(gguf_num(x, "rope.scaling.yarn_beta_fast", NULL, 0, &bf));
    SD_TRY(gguf_num(x, "rope.scaling.yarn_beta_slow", NULL, 0, &bs));
    cJSON *rs = cJSON_AddObjectToObject(x->cfg, "rope_scaling");
    cJSON_AddStringToObject(rs, "rope_type", "yarn");
    cJSON_AddNumberToObject(rs, "factor", f);
    cJSON_AddNumberToObject(rs, "original_max_position_embeddings", orig);
    cJSON_AddNumberToObject(rs, "beta_fast", bf);
    cJSON_AddNumberToObject(rs, "beta_slow", bs);
    if (mla && log_mul > 0.0) { /* llama.cpp leaves cos / sin unscaled: transformers' mscale == mscale_all_dim */
        cJSON_AddNumberToObject(rs, "mscale_all_dim", log_mul / 0.1);
        cJSON_AddNumberToObject(rs, "mscale", log_mul / 0.1);
    }
    return SPECDEC_OK;
}

/* rope: rope.freq_base, rope.dimension_count (must be the head), rope.scaling.type none / linear / yarn, and
 * rope_freqs.weight (F32 [head_dim / 2]: per-pair divisors of the frequencies). */
static specdec_status gguf_rope(gguf_ctx *x, int64_t head_dim, int64_t max_pos, const uint8_t *data) {
    SD_TRY(gguf_num(x, "rope.freq_base", "rope_theta", 0, NULL));
    int64_t rd = head_dim;
    const int phi3 = !strcmp(x->arch, "phi3"), partial = phi3 || !strncmp(x->arch, "glm4", 4);
    SD_TRY(gguf_int(x, "rope.dimension_count", NULL, 0, 2, 65536, &rd));
    if (rd != head_dim && !partial)
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF metadata '%s.rope.dimension_count' is %lld, the head "
                       "%lld (partial rotary embeddings are not supported for '%s')", x->path, x->arch, (long long)rd,
                       (long long)head_dim, x->arch);
    if (partial) /* Phi-4-mini: 96 of 128 dimensions; GLM-4 / 4.5: half */
        cJSON_AddNumberToObject(x->cfg, "partial_rotary_factor", (double)rd / (double)head_dim);
    if (phi3 && (sd_gguf_find_tensor(x->g, "rope_factors_long.weight") || sd_gguf_find_tensor(x->g, "rope_factors_short.weight")))
        return gguf_longrope(x, rd, data);
    char k[160];
    snprintf(k, sizeof k, "%s.rope.scaling.type", x->arch);
    sd_gguf_str ty = {"none", 4};
    if (sd_gguf_find(x->g, k) && !sd_gguf_get_str(x->g, k, &ty))
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF metadata '%s' must be a string", x->path, k);
    const sd_gguf_tensor *ff = sd_gguf_find_tensor(x->g, "rope_freqs.weight");
    const int linear = ty.len == 6 && !memcmp(ty.s, "linear", 6), yarn = ty.len == 4 && !memcmp(ty.s, "yarn", 4);
    if (!(ty.len == 4 && !memcmp(ty.s, "none", 4)) && !linear && !yarn)
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF metadata '%s' is '%.*s' (none, linear and yarn are "
                       "supported)", x->path, k, (int)(ty.len < 40 ? ty.len : 40), ty.s);
    if ((linear || yarn) && ff)
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF has both %s rope scaling and rope_freqs.weight",
                       x->path, linear ? "linear" : "yarn");
    cJSON *rs = NULL;
    if (yarn) return gguf_yarn(x);
    if (linear) {
        double f = 1.0;
        SD_TRY(gguf_num(x, "rope.scaling.factor", NULL, 1, &f));
        rs = cJSON_AddObjectToObject(x->cfg, "rope_scaling");
        cJSON_AddStringToObject(rs, "rope_type", "linear");
        cJSON_AddNumberToObject(rs, "factor", f);
    } else if (ff) {
        if (ff->type != SD_GGML_F32 || ff->ndim != 1 || ff->ne[0] != head_dim / 2)
            return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF tensor 'rope_freqs.weight' must be F32 [%lld] (one "
                           "divisor per rotary pair)", x->path, (long long)(head_dim / 2));
        rs = cJSON_AddObjectToObject(x->cfg, "rope_scaling");
        cJSON_AddStringToObject(rs, "rope_type", "longrope");
        cJSON *sf = cJSON_AddArrayToObject(rs, "short_factor"), *lf = cJSON_AddArrayToObject(rs, "long_factor");
        for (int64_t i = 0; i < head_dim / 2; i++) {
            float v;
            memcpy(&v, data + ff->offset + 4 * (uint64_t)i, 4);
            cJSON_AddItemToArray(sf, cJSON_CreateNumber((double)v));
            cJSON_AddItemToArray(lf, cJSON_CreateNumber((double)v));
        }
        cJSON_AddNumberToObject(rs, "original_max_position_embeddings", (double)max_pos);
        cJSON_AddNumberToObject(rs, "attention_factor", 1.0);
    }
    return SPECDEC_OK;
}

/* The token ids config.json (and generation_config.json) would carry: bos_token_id from
 * tokenizer.ggml.bos_token_id; eos_token_id the list of tokenizer.ggml.eos_token_id, eot_token_id and
 * eom_token_id (end of turn / of message: llama.cpp ends generation at each), when present and in range. */
static void gguf_special_ids(gguf_ctx *x, int64_t vocab) {
    static const char *const eos_keys[3] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                            "tokenizer.ggml.eom_token_id"};
    int64_t v, ids[3];
    int n = 0;
    if (sd_gguf_get_i64(x->g, "tokenizer.ggml.bos_token_id", &v) && v >= 0 && v < vocab)
        cJSON_AddNumberToObject(x->cfg, "bos_token_id", (double)v);
    for (int i = 0; i < 3; i++) {
        int dup = 0;
        if (!sd_gguf_get_i64(x->g, eos_keys[i], &v) || v < 0 || v >= vocab) continue;
        for (int j = 0; j < n; j++) dup |= ids[j] == v;
        if (!dup) ids[n++] = v;
    }
    if (n) {
        cJSON *a = cJSON_AddArrayToObject(x->cfg, "eos_token_id");
        for (int j = 0; j < n; j++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)ids[j]));
    }
}

/* A mixture of experts (qwen2moe, qwen3moe): expert_count, expert_used_count, expert_feed_forward_length,
 * (qwen2moe) expert_shared_feed_forward_length; the top-k weights renormalised as llama.cpp does
 * (`expert_weights_norm` when present, else qwen3moe yes, qwen2moe no); layers without a router
 * (blk.N.ffn_gate_inp.weight) are dense: mlp_only_layers. */
static specdec_status gguf_moe(gguf_ctx *x, const gguf_arch *a) {
    int64_t n_layers = 0;
    SD_TRY(gguf_int(x, "block_count", NULL, 1, 1, 4096, &n_layers));
    SD_TRY(gguf_int(x, "expert_count", "num_experts", 1, 1, 4096, NULL));
    SD_TRY(gguf_int(x, "expert_used_count", "num_experts_per_tok", 1, 1, 4096, NULL));
    SD_TRY(gguf_int(x, "expert_feed_forward_length", "moe_intermediate_size", 1, 1, 1 << 22, NULL));
    const int v2 = !strcmp(a->name, "qwen2moe");
    if (v2) SD_TRY(gguf_int(x, "expert_shared_feed_forward_length", "shared_expert_intermediate_size", 1, 1, 1 << 22, NULL));
    char k[160];
    snprintf(k, sizeof k, "%s.expert_weights_norm", x->arch);
    int norm = !v2;
    if (sd_gguf_find(x->g, k) && !sd_gguf_get_bool(x->g, k, &norm))
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF metadata '%s' must be a bool", x->path, k);
    cJSON_AddBoolToObject(x->cfg, "norm_topk_prob", norm);
    cJSON_AddNumberToObject(x->cfg, "decoder_sparse_step", 1);
    cJSON *only = cJSON_AddArrayToObject(x->cfg, "mlp_only_layers");
    for (int64_t l = 0; l < n_layers; l++) {
        char t[64];
        snprintf(t, sizeof t, "blk.%lld.ffn_gate_inp.weight", (long long)l);
        if (!sd_gguf_find_tensor(x->g, t)) cJSON_AddItemToArray(only, cJSON_CreateNumber((double)l));
    }
    return SPECDEC_OK;
}

/* Gemma 2 / Gemma 3 as llama.cpp runs them (its converter writes neither query_pre_attn_scalar nor the layer
 * pattern): the attention scale 1 / sqrt(head_dim), but 1 / sqrt(hidden / heads) on the 27B models, which
 * llama.cpp knows by their 46 (Gemma 2) / 62 (Gemma 3) layers; a window on layer l when l % 2 < 1 (Gemma 2)
 * / l % 6 < 5 (Gemma 3); Gemma 2's soft-capping (absent keys: the class defaults, 50 / 30, llama.cpp's too);
 * Gemma 3's sliding layers turn with base rope.freq_base_swa, else 10000, unscaled (rope.freq_base and the
 * linear scaling are the global layers'). Gemma 1: nothing beyond the common keys. */
static specdec_status gguf_gemma(gguf_ctx *x, int64_t hidden, int64_t heads, int64_t head_dim) {
    const int v2 = !strcmp(x->arch, "gemma2"), v3 = !strcmp(x->arch, "gemma3");
    if (!v2 && !v3) return SPECDEC_OK;
    int64_t n_layers = 0;
    SD_TRY(gguf_int(x, "block_count", NULL, 1, 1, 4096, &n_layers));
    SD_TRY(gguf_int(x, "attention.sliding_window", "sliding_window", 1, 1, (int64_t)1 << 30, NULL));
    const int big = n_layers == (v2 ? 46 : 62);
    cJSON_AddNumberToObject(x->cfg, "query_pre_attn_scalar", (double)(big ? hidden / heads : head_dim));
    const int64_t pat = v2 ? 2 : 6;
    cJSON *lt = cJSON_AddArrayToObject(x->cfg, "layer_types");
    for (int64_t l = 0; l < n_layers; l++)
        cJSON_AddItemToArray(lt, cJSON_CreateString(l % pat < pat - 1 ? "sliding_attention" : "full_attention"));
    SD_TRY(gguf_num(x, "final_logit_softcapping", "final_logit_softcapping", 0, NULL));
    if (v2) return gguf_num(x, "attn_logit_softcapping", "attn_logit_softcapping", 0, NULL);
    double local = 10000.0;
    SD_TRY(gguf_num(x, "rope.freq_base_swa", NULL, 0, &local));
    cJSON_AddNumberToObject(x->cfg, "rope_local_base_freq", local);
    return SPECDEC_OK;
}

/* GPT-OSS as llama.cpp runs it: experts expert_count / expert_used_count of expert_feed_forward_length, the
 * window attention.sliding_window on the even layers, MXFP4 experts (quantization_config mxfp4), the clamped
 * SwiGLU's constants transformers' defaults (1.702, 7), which llama.cpp hard-codes (a file that states
 * swiglu_clamp_exp is refused); yarn from the rope keys (gguf_rope). */
static specdec_status gguf_gpt_oss(gguf_ctx *x) {
    int64_t n_layers = 0;
    SD_TRY(gguf_int(x, "block_count", NULL, 1, 1, 4096, &n_layers));
    SD_TRY(gguf_int(x, "expert_count", "num_local_experts", 1, 1, 4096, NULL));
    SD_TRY(gguf_int(x, "expert_used_count", "num_experts_per_tok", 1, 1, 4096, NULL));
    cJSON_DeleteItemFromObject(x->cfg, "intermediate_size");
    SD_TRY(gguf_int(x, "expert_feed_forward_length", "intermediate_size", 1, 1, 1 << 22, NULL));
    SD_TRY(gguf_int(x, "attention.sliding_window", "sliding_window", 1, 1, (int64_t)1 << 30, NULL));
    char k[160];
    snprintf(k, sizeof k, "%s.swiglu_clamp_exp", x->arch);
    if (sd_gguf_find(x->g, k))
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF metadata '%s' is not supported (GPT-OSS's clamp is 7)",
                       x->path, k);
    cJSON *lt = cJSON_AddArrayToObject(x->cfg, "layer_types");
    for (int64_t l = 0; l < n_layers; l++)
        cJSON_AddItemToArray(lt, cJSON_CreateString(l % 2 == 0 ? "sliding_attention" : "full_attention"));
    cJSON *q = cJSON_AddObjectToObject(x->cfg, "quantization_config");
    cJSON_AddStringToObject(q, "quant_method", "mxfp4");
    return SPECDEC_OK;
}

/* SmolLM3, OLMo 2, OLMoE, EXAONE 4 and Granite (dense and MoE: expert_count / expert_used_count experts
 * of feed_forward_length, the router ffn_gate_inp) as llama.cpp runs them. EXAONE 4: the window
 * attention.sliding_window on the layers attention.sliding_window_pattern (one bool a layer) marks, the
 * others global without rope (its config's rule); no window: every layer global, with rope. OLMoE: experts expert_count / expert_used_count
 * of feed_forward_length, top-k weights renormalised only when expert_weights_norm says so (llama.cpp: no),
 * a clip of q / k / v (attention.clamp_kqv) refused. SmolLM3: no rope on every 4th layer (llama.cpp's fixed
 * step; no key says it), no window. OLMo 2: no window (an OLMo 3 file, which has one, is refused). Granite:
 * attention.scale, embedding_scale, residual_scale and logit_scale are the config's attention_multiplier,
 * embedding_multiplier, residual_multiplier and logits_scaling; absent, llama.cpp scales by nothing but
 * the attention by 1 / sqrt(head_dim), which is what is set then. */
static specdec_status gguf_small_families(gguf_ctx *x, int64_t head_dim) {
    if (!strcmp(x->arch, "smollm3")) {
        cJSON_AddNumberToObject(x->cfg, "no_rope_layer_interval", 4);
        cJSON_AddBoolToObject(x->cfg, "use_sliding_window", 0);
        return SPECDEC_OK;
    }
    if (!strcmp(x->arch, "olmo2")) {
        char k[160];
        snprintf(k, sizeof k, "%s.attention.sliding_window", x->arch);
        if (sd_gguf_find(x->g, k))
            return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF metadata '%s': an OLMo 3 file (its sliding window) "
                           "is not supported", x->path, k);
        return SPECDEC_OK;
    }
    if (!strcmp(x->arch, "olmoe")) { /* experts of feed_forward_length; a clamp (attention.clamp_kqv) refused */
        char k[160];
        snprintf(k, sizeof k, "%s.attention.clamp_kqv", x->arch);
        if (sd_gguf_find(x->g, k))
            return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF metadata '%s' is not supported", x->path, k);
        SD_TRY(gguf_int(x, "expert_count", "num_experts", 1, 1, 4096, NULL));
        SD_TRY(gguf_int(x, "expert_used_count", "num_experts_per_tok", 1, 1, 4096, NULL));
        snprintf(k, sizeof k, "%s.expert_weights_norm", x->arch);
        int norm = 0;
        if (sd_gguf_find(x->g, k) && !sd_gguf_get_bool(x->g, k, &norm))
            return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF metadata '%s' must be a bool", x->path, k);
        cJSON_AddBoolToObject(x->cfg, "norm_topk_prob", norm);
        return SPECDEC_OK;
    }
    if (!strcmp(x->arch, "exaone4")) { /* the window on the layers attention.sliding_window_pattern marks */
        int64_t n_layers = 0, win = 0;
        SD_TRY(gguf_int(x, "block_count", NULL, 1, 1, 4096, &n_layers));
        SD_TRY(gguf_int(x, "attention.sliding_window", NULL, 0, 0, (int64_t)1 << 30, &win));
        char k[160];
        snprintf(k, sizeof k, "%s.attention.sliding_window_pattern", x->arch);
        const sd_gguf_kv *pat = sd_gguf_find(x->g, k);
        if (win <= 0) {
            if (pat) return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF metadata '%s' without a window", x->path, k);
            cJSON_AddNullToObject(x->cfg, "sliding_window");
            return SPECDEC_OK;
        }
        if (!pat || pat->type != SD_GGUF_ARRAY || pat->arr_type != SD_GGUF_BOOL || pat->n != (uint64_t)n_layers)
            return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF metadata '%s' must be one bool per layer (%lld)", x->path,
                           k, (long long)n_layers);
        cJSON_AddNumberToObject(x->cfg, "sliding_window", (double)win);
        cJSON *lt = cJSON_AddArrayToObject(x->cfg, "layer_types");
        for (int64_t l = 0; l < n_layers; l++)
            cJSON_AddItemToArray(lt, cJSON_CreateString(pat->data[l] ? "sliding_attention" : "full_attention"));
        return SPECDEC_OK;
    }
    if (!strcmp(x->arch, "granitemoe")) { /* the experts (of feed_forward_length), then Granite's multipliers */
        char k[160];
        snprintf(k, sizeof k, "%s.expert_shared_feed_forward_length", x->arch);
        if (sd_gguf_find(x->g, k))
            return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF metadata '%s': Granite MoE's shared expert "
                           "(GraniteMoeShared) is not supported", x->path, k);
        SD_TRY(gguf_int(x, "expert_count", "num_local_experts", 1, 1, 4096, NULL));
        SD_TRY(gguf_int(x, "expert_used_count", "num_experts_per_tok", 1, 1, 4096, NULL));
    } else if (strcmp(x->arch, "granite")) {
        return SPECDEC_OK;
    }
    double att = 1.0 / sqrt((double)head_dim);
    SD_TRY(gguf_num(x, "attention.scale", NULL, 0, &att));
    cJSON_AddNumberToObject(x->cfg, "attention_multiplier", att);
    SD_TRY(gguf_num(x, "embedding_scale", "embedding_multiplier", 0, NULL));
    SD_TRY(gguf_num(x, "residual_scale", "residual_multiplier", 0, NULL));
    return gguf_num(x, "logit_scale", "logits_scaling", 0, NULL);
}

/* GLM-4.5 (glm4moe): block_count counts the nextn_predict_layers MTP blocks at the end (num_hidden_layers
 * the others; num_nextn_predict_layers, so a load with specdec_model_params.mtp drafts with the first); experts expert_count /
 * expert_used_count of expert_feed_forward_length, expert_shared_count ungated shared experts,
 * leading_dense_block_count dense layers, sigmoid routing (expert_gating_func 2) with the score bias,
 * expert_weights_scale and _norm, groups expert_group_count / _used_count (else 1); q / k norms when the file
 * has them; the rotary part rope.dimension_count (gguf_rope). */
static specdec_status gguf_glm4moe_cfg(gguf_ctx *x) {
    int64_t blocks = 0, nextn = 0, func = 2, groups = 1, used_groups = 1;
    SD_TRY(gguf_int(x, "block_count", NULL, 1, 1, 4096, &blocks));
    SD_TRY(gguf_int(x, "nextn_predict_layers", NULL, 0, 0, blocks - 1 < 16 ? blocks - 1 : 16, &nextn));
    cJSON_ReplaceItemInObject(x->cfg, "num_hidden_layers", cJSON_CreateNumber((double)(blocks - nextn)));
    cJSON_AddNumberToObject(x->cfg, "num_nextn_predict_layers", (double)nextn);
    SD_TRY(gguf_int(x, "expert_count", "n_routed_experts", 1, 1, 4096, NULL));
    SD_TRY(gguf_int(x, "expert_used_count", "num_experts_per_tok", 1, 1, 4096, NULL));
    SD_TRY(gguf_int(x, "expert_feed_forward_length", "moe_intermediate_size", 1, 1, 1 << 22, NULL));
    SD_TRY(gguf_int(x, "expert_shared_count", "n_shared_experts", 0, 0, 4096, NULL));
    SD_TRY(gguf_int(x, "leading_dense_block_count", "first_k_dense_replace", 0, 0, blocks - nextn, NULL));
    SD_TRY(gguf_num(x, "expert_weights_scale", "routed_scaling_factor", 0, NULL));
    SD_TRY(gguf_int(x, "expert_gating_func", NULL, 0, 0, 16, &func));
    if (func != 2)
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF metadata '%s.expert_gating_func' is %lld (GLM-4.5 "
                       "routes by the sigmoid, 2)", x->path, x->arch, (long long)func);
    SD_TRY(gguf_int(x, "expert_group_count", NULL, 0, 1, 4096, &groups));
    SD_TRY(gguf_int(x, "expert_group_used_count", NULL, 0, 1, 4096, &used_groups));
    cJSON_AddNumberToObject(x->cfg, "n_group", (double)groups);
    cJSON_AddNumberToObject(x->cfg, "topk_group", (double)used_groups);
    char k[160];
    snprintf(k, sizeof k, "%s.expert_weights_norm", x->arch);
    int norm = 0;
    if (sd_gguf_find(x->g, k) && !sd_gguf_get_bool(x->g, k, &norm))
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF metadata '%s' must be a bool", x->path, k);
    cJSON_AddBoolToObject(x->cfg, "norm_topk_prob", norm);
    cJSON_AddBoolToObject(x->cfg, "use_qk_norm", sd_gguf_find_tensor(x->g, "blk.0.attn_q_norm.weight") != NULL);
    return SPECDEC_OK;
}

/* DeepSeek-V2 / V3 (deepseek2): the converter writes the latent attention as MQA — head_count_kv 1, key_length
 * kv_lora_rank + the rotary part, value_length kv_lora_rank — with the heads' own sizes in key_length_mla /
 * value_length_mla (older files: in key_length / value_length, with kv_b_proj whole); rope.dimension_count
 * the rotary part, attention.q_lora_rank when q is low-rank, attention.kv_lora_rank; experts expert_count /
 * expert_used_count of expert_feed_forward_length, expert_shared_count, leading_dense_block_count,
 * expert_weights_scale / _norm, groups expert_group_count / _used_count (else 1); expert_gating_func 2 (the
 * sigmoid with the score bias: DeepSeek-V3's class), else the softmax (V2's). *rope_dim: the rotary part. */
static specdec_status gguf_deepseek2(gguf_ctx *x, int64_t heads, int64_t *rope_dim) {
    int64_t kl = 0, ql = 0, qk = 0, v = 0, rd = 0, func = 1, groups = 1, used_groups = 1, blocks = 0;
    SD_TRY(gguf_int(x, "block_count", NULL, 1, 1, 4096, &blocks));
    SD_TRY(gguf_int(x, "attention.kv_lora_rank", "kv_lora_rank", 1, 1, 65536, &kl));
    SD_TRY(gguf_int(x, "attention.q_lora_rank", NULL, 0, 1, 65536, &ql));
    if (ql) cJSON_AddNumberToObject(x->cfg, "q_lora_rank", (double)ql);
    else cJSON_AddNullToObject(x->cfg, "q_lora_rank");
    SD_TRY(gguf_int(x, "rope.dimension_count", NULL, 1, 2, 65536, &rd));
    char k[160];
    snprintf(k, sizeof k, "%s.attention.key_length_mla", x->arch);
    const int split = sd_gguf_find(x->g, k) != NULL;
    SD_TRY(gguf_int(x, split ? "attention.key_length_mla" : "attention.key_length", NULL, 1, 1, 65536, &qk));
    SD_TRY(gguf_int(x, split ? "attention.value_length_mla" : "attention.value_length", NULL, 1, 1, 65536, &v));
    if (qk <= rd)
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF: the heads' key width %lld must exceed the rotary part %lld",
                       x->path, (long long)qk, (long long)rd);
    cJSON_ReplaceItemInObject(x->cfg, "num_key_value_heads", cJSON_CreateNumber((double)heads));
    cJSON_AddNumberToObject(x->cfg, "qk_rope_head_dim", (double)rd);
    cJSON_AddNumberToObject(x->cfg, "qk_nope_head_dim", (double)(qk - rd));
    cJSON_AddNumberToObject(x->cfg, "v_head_dim", (double)v);
    cJSON_AddNumberToObject(x->cfg, "head_dim", (double)rd);
    SD_TRY(gguf_int(x, "expert_count", "n_routed_experts", 1, 1, 4096, NULL));
    SD_TRY(gguf_int(x, "expert_used_count", "num_experts_per_tok", 1, 1, 4096, NULL));
    SD_TRY(gguf_int(x, "expert_feed_forward_length", "moe_intermediate_size", 1, 1, 1 << 22, NULL));
    SD_TRY(gguf_int(x, "expert_shared_count", "n_shared_experts", 0, 0, 4096, NULL));
    SD_TRY(gguf_int(x, "leading_dense_block_count", "first_k_dense_replace", 0, 0, blocks, NULL));
    SD_TRY(gguf_num(x, "expert_weights_scale", "routed_scaling_factor", 0, NULL));
    SD_TRY(gguf_int(x, "expert_gating_func", NULL, 0, 0, 16, &func));
    SD_TRY(gguf_int(x, "expert_group_count", NULL, 0, 1, 4096, &groups));
    SD_TRY(gguf_int(x, "expert_group_used_count", NULL, 0, 1, 4096, &used_groups));
    if (func != 0 && func != 1 && func != 2)
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF metadata '%s.expert_gating_func' is %lld (1 softmax, 2 "
                       "sigmoid)", x->path, x->arch, (long long)func);
    snprintf(k, sizeof k, "%s.expert_weights_norm", x->arch);
    int norm = 0;
    if (sd_gguf_find(x->g, k) && !sd_gguf_get_bool(x->g, k, &norm))
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF metadata '%s' must be a bool", x->path, k);
    cJSON_AddBoolToObject(x->cfg, "norm_topk_prob", norm);
    cJSON_AddNumberToObject(x->cfg, "n_group", (double)groups);
    cJSON_AddNumberToObject(x->cfg, "topk_group", (double)used_groups);
    cJSON_AddNumberToObject(x->cfg, "num_nextn_predict_layers", 0);
    if (func == 2) { /* DeepSeek-V3: sigmoid scores, the score bias, groups by their two best */
        cJSON *arr = cJSON_CreateArray();
        cJSON_AddItemToArray(arr, cJSON_CreateString("DeepseekV3ForCausalLM"));
        cJSON_ReplaceItemInObject(x->cfg, "architectures", arr);
        cJSON_ReplaceItemInObject(x->cfg, "model_type", cJSON_CreateString("deepseek_v3"));
    } else {
        cJSON_AddStringToObject(x->cfg, "topk_method", groups > 1 ? "group_limited_greedy" : "greedy");
    }
    *rope_dim = rd;
    return SPECDEC_OK;
}

/* config.json's fields from the metadata (the names llama.cpp's converter writes them under). */
static specdec_status gguf_config(gguf_ctx *x, const gguf_arch *a, const uint8_t *data) {
    const sd_gguf_tensor *emb = sd_gguf_find_tensor(x->g, "token_embd.weight");
    if (!emb || emb->ndim != 2)
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF tensor 'token_embd.weight' is missing or not 2-D", x->path);
    cJSON *arr = cJSON_AddArrayToObject(x->cfg, "architectures");
    cJSON_AddItemToArray(arr, cJSON_CreateString(a->cls));
    cJSON_AddStringToObject(x->cfg, "model_type", a->model_type);
    int64_t hidden = 0, heads = 0, kv = 0, head_dim = 0, vdim = 0, max_pos = 0;
    SD_TRY(gguf_int(x, "embedding_length", "hidden_size", 1, 1, 1 << 20, &hidden));
    SD_TRY(gguf_int(x, "block_count", "num_hidden_layers", 1, 1, 4096, NULL));
    SD_TRY(gguf_int(x, "feed_forward_length", "intermediate_size", 1, 1, 1 << 22, NULL));
    SD_TRY(gguf_int(x, "attention.head_count", "num_attention_heads", 1, 1, 65536, &heads));
    kv = heads;
    SD_TRY(gguf_int(x, "attention.head_count_kv", NULL, 0, 1, 65536, &kv));
    cJSON_AddNumberToObject(x->cfg, "num_key_value_heads", (double)kv);
    SD_TRY(gguf_int(x, "context_length", "max_position_embeddings", 1, 1, (int64_t)1 << 30, &max_pos));
    const int mla = !strcmp(a->name, "deepseek2");
    if (mla) {
        SD_TRY(gguf_deepseek2(x, heads, &head_dim));
    } else {
        head_dim = hidden / heads;
        SD_TRY(gguf_int(x, "attention.key_length", NULL, 0, 1, 65536, &head_dim));
        vdim = head_dim;
        SD_TRY(gguf_int(x, "attention.value_length", NULL, 0, 1, 65536, &vdim));
        if (vdim != head_dim)
            return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF key_length %lld differs from value_length %lld",
                           x->path, (long long)head_dim, (long long)vdim);
        cJSON_AddNumberToObject(x->cfg, "head_dim", (double)head_dim);
    }
    SD_TRY(gguf_num(x, "attention.layer_norm_rms_epsilon", "rms_norm_eps", 1, NULL));
    cJSON_AddNumberToObject(x->cfg, "vocab_size", (double)emb->ne[1]);
    cJSON_AddBoolToObject(x->cfg, "tie_word_embeddings", !sd_gguf_find_tensor(x->g, "output.weight"));
    /* biases: Llama, Qwen3(-MoE) q/k/v/o together (attention_bias); Qwen2 q/k/v always; Qwen2-MoE q/k/v (qkv_bias) */
    const int has_bias = sd_gguf_find_tensor(x->g, "blk.0.attn_q.bias") != NULL;
    if (!strcmp(a->name, "qwen2moe")) cJSON_AddBoolToObject(x->cfg, "qkv_bias", has_bias);
    else if (!strcmp(a->name, "ernie4_5")) cJSON_AddBoolToObject(x->cfg, "use_bias", has_bias);
    else if (strcmp(a->name, "qwen2") && strcmp(a->name, "qwen2vl")) cJSON_AddBoolToObject(x->cfg, "attention_bias", has_bias);
    gguf_special_ids(x, emb->ne[1]);
    if (!strcmp(a->name, "phi3")) { /* its window as the checkpoint defines it (llama.cpp currently ignores it) */
        int64_t win = 0;
        SD_TRY(gguf_int(x, "attention.sliding_window", NULL, 0, 0, (int64_t)1 << 30, &win));
        if (win > 0) cJSON_AddNumberToObject(x->cfg, "sliding_window", (double)win);
        else cJSON_AddNullToObject(x->cfg, "sliding_window");
    }
    if (!strcmp(a->name, "qwen2moe") || !strcmp(a->name, "qwen3moe")) SD_TRY(gguf_moe(x, a));
    SD_TRY(gguf_gemma(x, hidden, heads, head_dim));
    if (!strcmp(a->name, "gpt-oss")) SD_TRY(gguf_gpt_oss(x));
    SD_TRY(gguf_small_families(x, head_dim));
    if (!strcmp(a->name, "glm4moe")) SD_TRY(gguf_glm4moe_cfg(x));
    if (!strcmp(a->cls, "MixtralForCausalLM")) { /* experts of feed_forward_length, top-k renormalised */
        SD_TRY(gguf_int(x, "expert_count", "num_local_experts", 1, 1, 4096, NULL));
        SD_TRY(gguf_int(x, "expert_used_count", "num_experts_per_tok", 1, 1, 4096, NULL));
    }
    return gguf_rope(x, head_dim, max_pos, data);
}

/* Mixtral's names: the router "mlp.gate" in hf becomes "block_sparse_moe.gate", an expert projection
 * gate_proj / up_proj / down_proj w1 / w3 / w2. */
static void gguf_mixtral_names(char *hf, size_t cap, const char **proj) {
    char *p = strstr(hf, ".mlp.gate.");
    if (p) {
        char tail[96];
        snprintf(tail, sizeof tail, "%s", p + strlen(".mlp.gate"));
        snprintf(p, cap - (size_t)(p - hf), ".%s%s", gguf_mixtral[0][1], tail);
    }
    for (size_t i = 1; *proj && i < sizeof gguf_mixtral / sizeof gguf_mixtral[0]; i++)
        if (!strcmp(*proj, gguf_mixtral[i][0])) {
            *proj = gguf_mixtral[i][1];
            break;
        }
}

static int gguf_cmp_tensor(const void *a, const void *b) {
    return strcmp(((const sd_st_tensor *)a)->name, ((const sd_st_tensor *)b)->name);
}

/* The blocks a load reads, [lo, hi), of the file's n_blocks: a target's decoder layers [0, n_layers) (a GLM-4.5
 * file's MTP blocks follow them), or specdec_model_params.mtp's first MTP block [n_layers, n_layers + 1). */
typedef struct gguf_blocks {
    int64_t lo, hi, n;
} gguf_blocks;

/* 1 when tensor `name` belongs to a block of the file that this load leaves out. */
static int gguf_skipped_block(const char *name, gguf_blocks b) {
    if (strncmp(name, "blk.", 4) || name[4] < '0' || name[4] > '9') return 0;
    char *end = NULL;
    const long l = strtol(name + 4, &end, 10);
    return *end == '.' && l >= 0 && l < b.n && (l < b.lo || l >= b.hi);
}

/* The header: every tensor under its Hugging Face name; rope_freqs.weight is read into the config. Blocks
 * outside [b.lo, b.hi) are left out. */
static specdec_status gguf_header(const sd_gguf *g, const char *path, gguf_blocks b, sd_arch fam, int *quantized,
                                  sd_st_header *h) {
    const int64_t n_layers = b.hi; /* the names of blocks past it are not the model's */
    const int mixtral = fam == SD_ARCH_MIXTRAL, phi3 = fam == SD_ARCH_PHI3;
    memset(h, 0, sizeof *h);
    const int oss = fam == SD_ARCH_GPT_OSS; /* its experts stay stacked */
    uint64_t n = 0; /* entries: a stacked experts tensor gives one per expert */
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const char *proj;
        long l;
        if (gguf_skipped_block(g->tensors[i].name, b)) continue;
        const int split = !oss && g->tensors[i].ndim == 3 && gguf_experts_of(g->tensors[i].name, n_layers, &proj, &l);
        n += split ? (uint64_t)g->tensors[i].ne[2] : 1;
    }
    if (n > SD_GGUF_MAX_TENSORS)
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF holds %llu matrices (experts counted), more than %u", path,
                       (unsigned long long)n, SD_GGUF_MAX_TENSORS);
    h->tensors = sd_calloc((size_t)(n ? n : 1), sizeof *h->tensors);
    h->names = sd_malloc((size_t)(n ? n : 1) * 96);
    if (!h->tensors || !h->names) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    h->data_start = g->data_start;
    h->data_size = g->data_size;
    char *names = h->names;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const sd_gguf_tensor *t = &g->tensors[i];
        if (gguf_config_tensor(t->name) || gguf_skipped_block(t->name, b)) continue;
        char hf[96] = "";
        const char *proj = NULL;
        long layer = 0;
        const int stacked = t->ndim == 3 && gguf_experts_of(t->name, n_layers, &proj, &layer);
        const int split = stacked && !oss;
        const int flat3 = t->ndim == 3 && (fam == SD_ARCH_DEEPSEEK_V2 || fam == SD_ARCH_DEEPSEEK_V3) &&
                          (strstr(t->name, ".attn_k_b.") || strstr(t->name, ".attn_v_b."));
        if (!split && !gguf_hf_name(t->name, n_layers, fam, hf, sizeof hf))
            return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF tensor '%.200s' is not one specdec knows for this "
                           "architecture (a feature it would silently drop)", path, t->name);
        if (mixtral) gguf_mixtral_names(hf, sizeof hf, &proj);
        char *up = phi3 ? strstr(hf, ".mlp.up_proj.") : NULL; /* Phi-3's ffn_up holds gate and up */
        if (up) {
            char suffix[16];
            snprintf(suffix, sizeof suffix, "%s", up + strlen(".mlp.up_proj."));
            snprintf(up, sizeof hf - (size_t)(up - hf), ".mlp.gate_up_proj.%s", suffix);
        }
        const sd_ggml_type_info ti = sd_ggml_type_info_of(t->type);
        sd_st_tensor *o = &h->tensors[h->n_tensors++];
        if (oss && stacked) { /* [E, rows, cols] MXFP4 blocks, as the file has them */
            if (t->type != SD_GGML_MXFP4)
                return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF tensor '%.200s' has type %s (GPT-OSS experts "
                               "load in MXFP4, as published)", path, t->name, ti.name);
            *o = (sd_st_tensor){.dtype = SD_ST_U8, .ndim = 3, .shape = {t->ne[2], t->ne[1], t->ne[0]},
                                .n_elements = t->n_elements, .begin = t->offset, .end = t->offset + t->nbytes,
                                .gguf_quant = 1 + (uint32_t)t->type};
            snprintf(names, 96, "%s", hf);
            o->name = names;
            names += 96;
            *quantized = 1;
            continue;
        }
        o->dtype = t->type == SD_GGML_F32 ? SD_ST_F32 : t->type == SD_GGML_F16 ? SD_ST_F16
                   : t->type == SD_GGML_BF16 ? SD_ST_BF16 : SD_ST_U8;
        if (o->dtype == SD_ST_U8) {
            if (!sd_ggml_repackable(t->type))
                return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF tensor '%.200s' has type %s (specdec reads F32, "
                               "F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, "
                               "IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL and IQ4_XS)", path,
                               t->name, ti.name);
            if (t->ndim != 2 && !split && !flat3)
                return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF tensor '%.200s' is a %d-D %s tensor (only "
                               "matrices may be block-quantized)", path, t->name, (int)t->ndim, ti.name);
            o->gguf_quant = 1 + (uint32_t)t->type;
            *quantized = 1;
        }
        if (t->ndim > (split || flat3 ? 3 : 2))
            return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF tensor '%.200s' has %d dimensions", path, t->name,
                           (int)t->ndim);
        const int gate_vec = strstr(hf, "shared_expert_gate.") != NULL && t->ne[1] == 1; /* HF [1, H] */
        if (flat3) { /* DeepSeek's attn_k_b / attn_v_b [heads, rows, cols] as [heads x rows, cols] */
            o->ndim = 2, o->shape[0] = t->ne[1] * t->ne[2], o->shape[1] = t->ne[0];
            o->n_elements = t->n_elements, o->begin = t->offset, o->end = t->offset + t->nbytes;
            snprintf(names, 96, "%s", hf);
            o->name = names;
            names += 96;
            continue;
        }
        o->ndim = t->ndim == 1 && !gate_vec ? 1 : 2;
        o->shape[0] = gate_vec ? 1 : t->ndim >= 2 ? t->ne[1] : t->ne[0];
        o->shape[1] = gate_vec ? t->ne[0] : t->ndim >= 2 ? t->ne[0] : 0;
        const int64_t E = split ? t->ne[2] : 1;
        const uint64_t per = t->nbytes / (uint64_t)E;
        for (int64_t e = 0; e < E; e++) {
            if (e) { /* the next expert: a copy of the previous entry, further along */
                const sd_st_tensor *prev = o;
                o = &h->tensors[h->n_tensors++];
                *o = *prev;
            }
            o->n_elements = t->n_elements / (uint64_t)E;
            o->begin = t->offset + per * (uint64_t)e;
            o->end = o->begin + per;
            if (split)
                snprintf(names, 96, "model.layers.%ld.%s.%lld.%s.weight", layer,
                         mixtral ? "block_sparse_moe.experts" : "mlp.experts", (long long)e, proj);
            else snprintf(names, 96, "%s", hf);
            o->name = names;
            names += 96;
        }
    }
    qsort(h->tensors, (size_t)h->n_tensors, sizeof *h->tensors, gguf_cmp_tensor);
    return SPECDEC_OK;
}

static specdec_status gguf_arch_of(const sd_gguf *g, const char *path, const gguf_arch **out) {
    sd_gguf_str s;
    if (!sd_gguf_get_str(g, "general.architecture", &s))
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF metadata 'general.architecture' is missing or not a string",
                       path);
    int64_t experts = 0; /* llama.cpp writes Mixtral as "llama" with experts */
    const int moe = s.len == 5 && !memcmp(s.s, "llama", 5) && sd_gguf_get_i64(g, "llama.expert_count", &experts) &&
                    experts > 0;
    for (size_t i = 0; i < sizeof gguf_archs / sizeof gguf_archs[0]; i++)
        if (strlen(gguf_archs[i].name) == s.len && !memcmp(gguf_archs[i].name, s.s, s.len) &&
            (strcmp(gguf_archs[i].cls, "MixtralForCausalLM") == 0) == moe) {
            *out = &gguf_archs[i];
            return SPECDEC_OK;
        }
    return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: GGUF general.architecture '%.*s' is not supported (llama, "
                   "qwen2, qwen2vl, qwen3, qwen2moe, qwen3moe, phi3, gemma, gemma2, gemma3, gpt-oss, smollm3, olmo2, olmoe, "
                   "granite, granitemoe, glm4, glm4moe, ernie4_5, exaone4 and deepseek2 GGUF files load; other families load from their Hugging Face checkpoint)", path,
                   (int)(s.len < 64 ? s.len : 64), s.s);
}

/* The configuration (from the first file's metadata) and the first file's header. */
static specdec_status gguf_split_of(const sd_gguf *g, const char *path, int64_t *no, int64_t *count);

static specdec_status gguf_open(specdec_model *m, sd_st_file *f, sd_gguf *g, int mtp, int *quantized,
                                gguf_blocks *b) {
    SD_TRY(sd_gguf_parse(f->base ? f->base : (const uint8_t *)"", f->base ? f->size : 0, m->path, g, NULL));
    int64_t no = 0, count = 1;
    SD_TRY(gguf_split_of(g, m->path, &no, &count));
    if (no != 0)
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: this is file %lld of a GGUF split into %lld: pass the first",
                       m->path, (long long)(no + 1), (long long)count);
    const gguf_arch *a = NULL;
    SD_TRY(gguf_arch_of(g, m->path, &a));
    char arch[32];
    snprintf(arch, sizeof arch, "%s", a->name);
    gguf_ctx x = {g, m->path, arch, cJSON_CreateObject()};
    if (!x.cfg) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", m->path);
    specdec_status st = gguf_config(&x, a, f->base + g->data_start);
    char *text = st ? NULL : cJSON_PrintUnformatted(x.cfg);
    cJSON_Delete(x.cfg);
    if (!st && !text) st = sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", m->path);
    if (!st) st = sd_config_parse(text, strlen(text), m->path, &m->w.cfg, NULL);
    cJSON_free(text);
    if (st) return st;
    m->w.cfg.rope_interleaved = a->interleaved;
    if (a->norm_shifted) m->w.cfg.norm_offset = 0.0f; /* the (1 + w) already in the stored weights */
    *b = (gguf_blocks){0, m->w.cfg.n_layers, m->w.cfg.n_layers};
    char key[64];
    snprintf(key, sizeof key, "%s.block_count", a->name);
    if (m->w.cfg.arch == SD_ARCH_GLM4_MOE) sd_gguf_get_i64(g, key, &b->n); /* GLM-4.5: its MTP blocks follow */
    if (mtp) {
        if (m->w.cfg.mtp_layers < 1)
            return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: this GGUF has no MTP block (MTP drafting reads a "
                           "GLM-4.5 file's %s.nextn_predict_layers blocks; DeepSeek's converter leaves its MTP "
                           "layer out)", m->path, a->name);
        b->lo = m->w.cfg.n_layers, b->hi = b->lo + 1;
    }
    return gguf_header(g, m->path, *b, m->w.cfg.arch, quantized, &f->hdr);
}

/* split.no / split.count of a file (0 / 1 when it is not split); FORMAT when they are malformed. */
static specdec_status gguf_split_of(const sd_gguf *g, const char *path, int64_t *no, int64_t *count) {
    *no = 0, *count = 1;
    const int has_no = sd_gguf_find(g, "split.no") != NULL, has_count = sd_gguf_find(g, "split.count") != NULL;
    if (!has_no && !has_count) return SPECDEC_OK;
    if (!sd_gguf_get_i64(g, "split.no", no) || !sd_gguf_get_i64(g, "split.count", count) || *count < 1 ||
        *count > SD_GGUF_MAX_SHARDS || *no < 0 || *no >= *count)
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF split.no / split.count missing or out of range (at most "
                       "%d shards)", path, SD_GGUF_MAX_SHARDS);
    return SPECDEC_OK;
}

/* Shard k's path from the first one's, PREFIX-00001-of-NNNNN.gguf (llama.cpp's gguf-split naming). */
static specdec_status gguf_shard_path(const char *first, int64_t k, int64_t count, char *out, size_t cap) {
    const size_t n = strlen(first), tail = strlen("-00001-of-00000.gguf");
    char want[48];
    snprintf(want, sizeof want, "-00001-of-%05d.gguf", (int)count); /* count <= SD_GGUF_MAX_SHARDS */
    if (n <= tail || strcmp(first + n - tail, want))
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: a GGUF split into %lld files: pass its first file, named "
                       "PREFIX%s", first, (long long)count, want);
    if (n + 1 > cap) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: path too long", first);
    snprintf(out, cap, "%.*s-%05d-of-%05d.gguf", (int)(n - tail), first, (int)(k + 1), (int)count);
    return SPECDEC_OK;
}

/* Shards 1 .. count - 1 of a split GGUF into files[1..]: each with its split.no, the same count, tensors
 * under their Hugging Face names; the tensor total must be split.tensors.count when given. */
static specdec_status gguf_open_shards(specdec_model *m, int use_mmap, int64_t count, uint64_t n0, int64_t want,
                                       gguf_blocks b, sd_st_file **files, int32_t *n_files, int *quantized) {
    uint64_t total = n0;
    for (int64_t k = 1; k < count; k++) {
        char p[sizeof m->path + 32];
        SD_TRY(gguf_shard_path(m->path, k, count, p, sizeof p));
        SD_TRY(sd_st_map(p, use_mmap, &files[k], NULL));
        (*n_files)++;
        sd_gguf g;
        specdec_status st = sd_gguf_parse(files[k]->base ? files[k]->base : (const uint8_t *)"",
                                          files[k]->base ? files[k]->size : 0, p, &g, NULL);
        int64_t no = 0, c = 0;
        if (!st) st = gguf_split_of(&g, p, &no, &c);
        if (!st && (no != k || c != count))
            st = sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF split.no %lld of %lld, expected %lld of %lld", p,
                         (long long)no, (long long)c, (long long)k, (long long)count);
        if (!st)
            st = gguf_header(&g, p, b, m->w.cfg.arch, quantized, &files[k]->hdr);
        total += g.n_tensors;
        sd_gguf_free(&g);
        if (st) return st;
    }
    if (want >= 0 && (uint64_t)want != total)
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF split.tensors.count is %lld, the %lld files hold %llu",
                       m->path, (long long)want, (long long)count, (unsigned long long)total);
    return SPECDEC_OK;
}

specdec_status sd_gguf_open_model(specdec_model *m, int use_mmap, int mtp, sd_st_file ***out, int32_t *n_out) {
    *out = NULL, *n_out = 0;
    sd_st_file *f = NULL;
    SD_TRY(sd_st_map(m->path, use_mmap, &f, NULL));
    sd_gguf g;
    memset(&g, 0, sizeof g);
    int quantized = 0;
    int64_t no = 0, count = 1;
    gguf_blocks b = {0, 0, 0};
    specdec_status st = gguf_open(m, f, &g, mtp, &quantized, &b);
    if (!st) st = gguf_split_of(&g, m->path, &no, &count);
    const uint64_t n0 = g.n_tensors;
    int64_t want = -1; /* split.tensors.count: every file's tensors together */
    if (!st && sd_gguf_find(&g, "split.tensors.count") && (!sd_gguf_get_i64(&g, "split.tensors.count", &want) || want < 0))
        st = sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: GGUF split.tensors.count must be a count", m->path);
    sd_gguf_free(&g);
    sd_st_file **files = st ? NULL : sd_calloc((size_t)count, sizeof *files);
    if (!st && !files) st = sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", m->path);
    if (st) {
        sd_st_close(f);
        return st;
    }
    files[0] = f;
    int32_t n = 1;
    st = gguf_open_shards(m, use_mmap, count, n0, want, b, files, &n, &quantized);
    if (quantized) m->w.cfg.int4_fmt = SD_INT4_GGUF;
    *out = files, *n_out = n; /* the caller closes them, on failure too */
    return st;
}
