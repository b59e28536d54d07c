/* test_model_configs.c — config.json of every family through sd_config_parse: the
 * values transformers would build (class defaults for absent keys, absent vs null,
 * the older key spellings of published configs), and inconsistent or unsupported
 * configs refused with SPECDEC_ERR_FORMAT / SPECDEC_ERR_UNSUPPORTED and the key named.
 * (The fixture test, test_model_fixtures.c, checks what the values compute.) */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sd_test.h"
#include "sd_config.h"

/* A small config of each family: these sizes, then the case's extra keys. A key the
 * base already has must be replaced, not repeated (a JSON object's later duplicate is
 * refused as a duplicate, which is not the check a case names): cases that change a
 * size give it as `over` ("key": value, ...), which replaces the base's value. */
static const char *const SIZE_KEYS[] = {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                        "num_attention_heads", "num_key_value_heads"};
static const char *const SIZE_VALUES[] = {"64", "32", "48", "4", "4", "2"};

/* The base sizes with the keys named in over ("\"key\": value" pairs, comma-separated)
 * taking their values from over. */
static void sizes(const char *over, char *out, size_t cap) {
    size_t off = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof SIZE_KEYS / sizeof SIZE_KEYS[0]; i++) {
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\":", SIZE_KEYS[i]);
        const char *at = strstr(over, quoted);
        char value[32];
        if (at) {
            at += strlen(quoted);
            size_t n = strcspn(at, ",}");
            snprintf(value, sizeof value, "%.*s", (int)(n < sizeof value - 1 ? n : sizeof value - 1), at);
        } else {
            snprintf(value, sizeof value, " %s", SIZE_VALUES[i]);
        }
        off += (size_t)snprintf(out + off, cap - off, "%s%s%s", i ? ", " : "", quoted, value);
        if (off >= cap) return;
    }
}

static specdec_status parse_over(const char *arch, const char *over, const char *extra, sd_config *c,
                                 sd_errbuf *eb) {
    char base[512], buf[8192];
    sizes(over, base, sizeof base);
    snprintf(buf, sizeof buf, "{\"architectures\": [\"%s\"], %s%s%s}", arch, base, extra[0] ? ", " : "", extra);
    return sd_config_parse(buf, strlen(buf), "config.json", c, eb);
}

static specdec_status parse(const char *arch, const char *extra, sd_config *c, sd_errbuf *eb) {
    return parse_over(arch, "", extra, c, eb);
}

static void ok(const char *what, const char *arch, const char *extra, sd_config *c) {
    sd_errbuf eb = {{0}};
    specdec_status st = parse(arch, extra, c, &eb);
    SD_CHECK(st == SPECDEC_OK, "%s: %s", what, eb.msg);
}

/* A refused config: the status, a fragment of the message that only the intended check
 * writes (a key name alone would also match a duplicate-key or a type error), and never
 * the duplicate-key refusal (a case that repeats a base key tests the wrong check). */
static void bad_over(const char *what, const char *arch, const char *over, const char *extra, specdec_status want,
                     const char *fragment) {
    sd_config c;
    sd_errbuf eb = {{0}};
    specdec_status st = parse_over(arch, over, extra, &c, &eb);
    SD_CHECK(st == want, "%s: status %s, expected %s (%s)", what, specdec_status_string(st),
             specdec_status_string(want), eb.msg);
    SD_CHECK(strstr(eb.msg, fragment) != NULL, "%s: message lacks '%s': %s", what, fragment, eb.msg);
    SD_CHECK(strstr(eb.msg, "duplicate key") == NULL, "%s: refused for a duplicate key, not its check: %s", what,
             eb.msg);
}

static void bad(const char *what, const char *arch, const char *extra, specdec_status want, const char *key) {
    bad_over(what, arch, "", extra, want, key);
}

/* Bit l set when per_layer[l] (layer_sliding, layer_moe, layer_no_rope) is. */
static int layer_mask(const sd_config *c, const uint8_t *per_layer) {
    int m = 0;
    for (int32_t l = 0; l < c->n_layers; l++) m |= (per_layer[l] != 0) << l;
    return m;
}
#define sliding_mask(c) layer_mask((c), (c)->layer_sliding)
#define moe_mask(c) layer_mask((c), (c)->layer_moe)
#define no_rope_mask(c) layer_mask((c), (c)->layer_no_rope)

static void families(void) {
    sd_config c;
    ok("mistral absent window", "MistralForCausalLM", "", &c);
    SD_CHECK(c.sliding_window == 4096 && sliding_mask(&c) == 0xf, "mistral: absent window %d (MistralConfig: 4096)",
             c.sliding_window);
    ok("mistral null window", "MistralForCausalLM", "\"sliding_window\": null", &c);
    SD_CHECK(c.sliding_window == 0 && sliding_mask(&c) == 0, "mistral: null window %d", c.sliding_window);

    ok("qwen2 windows off", "Qwen2ForCausalLM", "\"sliding_window\": 8, \"max_window_layers\": 1", &c);
    SD_CHECK(c.sliding_window == 0 && sliding_mask(&c) == 0 && c.attention_bias && !c.o_bias, "qwen2: defaults");
    ok("qwen2 windows", "Qwen2ForCausalLM", "\"use_sliding_window\": true, \"sliding_window\": 8, \"max_window_layers\": 1",
       &c);
    SD_CHECK(c.sliding_window == 8 && sliding_mask(&c) == 0xe, "qwen2: layers >= max_window_layers slide (mask %x)",
             sliding_mask(&c));
    ok("qwen2 layer_types", "Qwen2ForCausalLM", "\"use_sliding_window\": true, \"layer_types\": [\"full_attention\", "
       "\"sliding_attention\", \"full_attention\", \"sliding_attention\"]", &c);
    SD_CHECK(c.sliding_window == 4096 && sliding_mask(&c) == 0xa, "qwen2: layer_types win (mask %x)", sliding_mask(&c));

    ok("qwen3", "Qwen3ForCausalLM", "", &c);
    SD_CHECK(c.head_dim == 128 && c.qk_norm && !c.attention_bias && c.max_position_embeddings == 32768,
             "qwen3: head_dim default 128, q/k norms");

    /* Phi-3: fused, longrope spelled "su", the top-level original_max_position_embeddings */
    ok("phi3 su", "Phi3ForCausalLM",
       "\"max_position_embeddings\": 1024, \"original_max_position_embeddings\": 256, \"rope_scaling\": {\"type\": "
       "\"su\", \"short_factor\": [1,1,1,1], \"long_factor\": [2,2,2,2], \"original_max_position_embeddings\": 9}",
       &c);
    SD_CHECK(c.rope_type == SD_ROPE_LONGROPE && c.rope_original_max_pos == 256 && c.fused_qkv && c.fused_gate_up,
             "phi3: su = longrope, top-level original max %d", c.rope_original_max_pos);
    SD_CHECK(fabs(c.rope_attn_factor - sqrt(1.0 + log(4.0) / log(256.0))) < 1e-6,
             "phi3: longrope attention factor %g", (double)c.rope_attn_factor);
    ok("phi4-mini partial", "Phi3ForCausalLM", "\"partial_rotary_factor\": 0.75, \"sliding_window\": 64", &c);
    SD_CHECK(c.rope_dim == 6 && c.sliding_window == 64 && sliding_mask(&c) == 0xf && c.rms_norm_eps == 1e-5f,
             "phi3: rope_dim %d of 8, window on every layer", c.rope_dim);

    /* Gemma: hidden_act "gelu" is the tanh approximation; 256 head_dim; tied; (1 + w) */
    ok("gemma gelu", "GemmaForCausalLM", "\"hidden_act\": \"gelu\"", &c);
    SD_CHECK(c.act == SD_ACT_GELU_TANH && c.head_dim == 256 && c.tie_word_embeddings && c.norm_offset == 1.0f &&
             c.embed_scale == (float)sqrt(32.0) && !c.sandwich_norms, "gemma: defaults");
    ok("llama gelu", "LlamaForCausalLM", "\"hidden_act\": \"gelu\", \"attention_bias\": true, \"mlp_bias\": true", &c);
    SD_CHECK(c.act == SD_ACT_GELU && c.attention_bias && c.o_bias && c.mlp_bias, "llama: erf gelu, biases");

    ok("gemma2 defaults", "Gemma2ForCausalLM", "", &c);
    SD_CHECK(c.attn_softcap == 50.0f && c.final_softcap == 30.0f && c.attn_scale == 0.0625f && c.sandwich_norms &&
             c.sliding_window == 4096 && sliding_mask(&c) == 0x5, "gemma2: class defaults (mask %x)", sliding_mask(&c));
    ok("gemma2 null caps", "Gemma2ForCausalLM", "\"attn_logit_softcapping\": null, \"final_logit_softcapping\": null",
       &c);
    SD_CHECK(c.attn_softcap == 0.0f && c.final_softcap == 0.0f, "gemma2: null caps are none");

    /* Gemma 3 as published (rope_local_base_freq, sliding_window_pattern, rope_scaling) */
    ok("gemma3 hub", "Gemma3ForCausalLM",
       "\"rope_theta\": 1000000, \"rope_local_base_freq\": 10000, \"sliding_window\": 512, "
       "\"sliding_window_pattern\": 2, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 8.0}, "
       "\"attn_logit_softcapping\": 50.0", &c);
    SD_CHECK(c.rope_local_theta == 10000.0f && c.rope_theta == 1e6f && c.rope_type == SD_ROPE_LINEAR &&
             c.rope_factor == 8.0f && sliding_mask(&c) == 0x5 && c.qk_norm && c.attn_softcap == 0.0f,
             "gemma3: local rope, linear global rope, pattern 2, attention soft-cap ignored as transformers does");
    ok("gemma3 nested", "Gemma3ForCausalLM",
       "\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"yarn\", \"factor\": 2.0, \"rope_theta\": 5e5}, "
       "\"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 20.0}}", &c);
    SD_CHECK(c.rope_local_theta == 20.0f && c.rope_theta == 5e5f && c.rope_type == SD_ROPE_YARN &&
             c.rope_original_max_pos == 131072 && fabs(c.rope_attn_factor - (0.1 * log(2.0) + 1.0)) < 1e-6 &&
             c.rope_beta_fast == 32.0f && c.rope_beta_slow == 1.0f && c.rope_truncate == 1,
             "gemma3: nested rope_parameters, yarn defaults");
    ok("llama dynamic", "LlamaForCausalLM", "\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2.0}", &c);
    SD_CHECK(c.rope_type == SD_ROPE_DYNAMIC && c.rope_factor == 2.0f, "llama: dynamic");
}

/* Mixture-of-experts families: transformers' class defaults, both spellings of the expert
 * count, which layers are sparse, and the dense configs untouched. */
static void moe_families(void) {
    sd_config c;
    ok("mixtral defaults", "MixtralForCausalLM", "", &c);
    SD_CHECK(c.n_experts == 8 && c.n_experts_used == 2 && c.moe_intermediate == 48 && c.norm_topk_prob &&
             moe_mask(&c) == 0xf && c.sliding_window == 0 && c.rope_theta == 1e6f && c.rms_norm_eps == 1e-5f &&
             !c.attention_bias, "mixtral: MixtralConfig defaults (8 experts, top 2, renormalised, every layer)");
    ok("qwen3-moe defaults", "Qwen3MoeForCausalLM", "", &c);
    SD_CHECK(c.n_experts == 128 && c.n_experts_used == 8 && c.moe_intermediate == 768 && !c.norm_topk_prob &&
             moe_mask(&c) == 0xf && c.qk_norm && c.head_dim == 8 && c.sliding_window == 0,
             "qwen3-moe: Qwen3MoeConfig defaults (128 experts, top 8, not renormalised; head_dim from the sizes)");
    ok("qwen3-moe hub", "Qwen3MoeForCausalLM",
       "\"num_experts\": 16, \"num_experts_per_tok\": 4, \"moe_intermediate_size\": 24, \"norm_topk_prob\": true, "
       "\"decoder_sparse_step\": 2, \"mlp_only_layers\": [3], \"max_window_layers\": 2, \"use_sliding_window\": false",
       &c);
    SD_CHECK(c.n_experts == 16 && c.n_experts_used == 4 && c.moe_intermediate == 24 && c.norm_topk_prob &&
             moe_mask(&c) == 0x2 && sliding_mask(&c) == 0,
             "qwen3-moe: sparse step 2 minus mlp_only_layers (mask %x), max_window_layers ignored", moe_mask(&c));
    ok("qwen3-moe window", "Qwen3MoeForCausalLM", "\"use_sliding_window\": true, \"sliding_window\": 16", &c);
    SD_CHECK(c.sliding_window == 16 && sliding_mask(&c) == 0xf, "qwen3-moe: use_sliding_window slides every layer");
    ok("num_local_experts", "Qwen3MoeForCausalLM", "\"num_local_experts\": 6, \"num_experts_per_tok\": 6", &c);
    SD_CHECK(c.n_experts == 6 && c.n_experts_used == 6, "qwen3-moe: transformers 5's num_local_experts");
    ok("qwen2-moe defaults", "Qwen2MoeForCausalLM", "", &c);
    SD_CHECK(c.n_experts == 60 && c.n_experts_used == 4 && c.moe_intermediate == 1408 &&
             c.shared_expert_intermediate == 5632 && !c.norm_topk_prob && c.attention_bias && !c.o_bias &&
             moe_mask(&c) == 0xf && sliding_mask(&c) == 0,
             "qwen2-moe: Qwen2MoeConfig defaults (60 experts, top 4, shared expert 5632, q/k/v biases)");
    ok("qwen2-moe windows", "Qwen2MoeForCausalLM",
       "\"use_sliding_window\": true, \"sliding_window\": 16, \"max_window_layers\": 3, \"qkv_bias\": false", &c);
    SD_CHECK(c.sliding_window == 16 && sliding_mask(&c) == 0x5 && !c.attention_bias,
             "qwen2-moe: even layers below max_window_layers slide (mask %x), qkv_bias false", sliding_mask(&c));
    ok("llama has no experts", "LlamaForCausalLM", "\"num_experts\": 8", &c);
    SD_CHECK(c.n_experts == 0 && moe_mask(&c) == 0, "llama: num_experts is not read");
    SD_CHECK(!c.attn_sinks && !c.moe_fused && !c.experts_mxfp4, "llama: no sinks, no fused experts");
}

/* GPT-OSS: GptOssConfig's defaults (yarn rope when config.json has none, even layers slide
 * within 128, q/k/v/o biases, sinks, 128 experts top 4, the clamped SwiGLU's 1.702 / 7.0),
 * and the published config.json (rope_scaling + rope_theta, MXFP4 quantization_config). */
static void gpt_oss(void) {
    sd_config c;
    ok("gpt-oss defaults", "GptOssForCausalLM", "", &c);
    SD_CHECK(c.head_dim == 64 && c.n_experts == 128 && c.n_experts_used == 4 && c.moe_intermediate == 48 &&
                 c.norm_topk_prob && moe_mask(&c) == 0xf && c.sliding_window == 128 && sliding_mask(&c) == 0x5 &&
                 c.attention_bias && c.o_bias && c.attn_sinks && c.moe_fused && !c.experts_mxfp4 &&
                 c.glu_alpha == 1.702f && c.glu_limit == 7.0f && c.rms_norm_eps == 1e-5f &&
                 c.max_position_embeddings == 131072 && !c.tie_word_embeddings,
             "gpt-oss: GptOssConfig defaults");
    SD_CHECK(c.rope_type == SD_ROPE_YARN && c.rope_theta == 150000.0f && c.rope_factor == 32.0f &&
                 c.rope_original_max_pos == 4096 && c.rope_beta_fast == 32.0f && c.rope_beta_slow == 1.0f &&
                 !c.rope_truncate && fabsf(c.rope_attn_factor - (float)(0.1 * log(32.0) + 1.0)) < 1e-6f,
             "gpt-oss: no rope dictionary means GptOssConfig's yarn (factor 32, original 4096, no truncation)");
    ok("gpt-oss theta only", "GptOssForCausalLM", "\"rope_theta\": 1000", &c);
    SD_CHECK(c.rope_type == SD_ROPE_YARN && c.rope_theta == 1000.0f, "gpt-oss: top-level rope_theta with the yarn");
    ok("gpt-oss hub", "GptOssForCausalLM",
       "\"head_dim\": 64, \"rope_theta\": 150000, \"rope_scaling\": {\"beta_fast\": 32.0, \"beta_slow\": 1.0, "
       "\"factor\": 32.0, \"original_max_position_embeddings\": 4096, \"rope_type\": \"yarn\", \"truncate\": false}, "
       "\"experts_per_token\": 4, \"num_experts_per_tok\": 4, \"num_local_experts\": 32, \"swiglu_limit\": 7.0, "
       "\"sliding_window\": 128, \"initial_context_length\": 4096, \"hidden_act\": \"silu\", "
       "\"layer_types\": [\"sliding_attention\", \"full_attention\", \"sliding_attention\", \"full_attention\"], "
       "\"quantization_config\": {\"modules_to_not_convert\": [\"model.layers.*.self_attn\", "
       "\"model.layers.*.mlp.router\", \"model.embed_tokens\", \"lm_head\"], \"quant_method\": \"mxfp4\"}",
       &c);
    SD_CHECK(c.n_experts == 32 && c.n_experts_used == 4 && c.experts_mxfp4 && sliding_mask(&c) == 0x5 &&
                 c.rope_type == SD_ROPE_YARN && !c.rope_truncate && c.rope_factor == 32.0f,
             "gpt-oss: the published gpt-oss-20b config.json");
    ok("gpt-oss options", "GptOssForCausalLM",
       "\"attention_bias\": false, \"hidden_act\": \"gelu\", \"swiglu_alpha\": -0.5, \"swiglu_limit\": 3, "
       "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 100}, \"sliding_window\": 9, "
       "\"layer_types\": [\"full_attention\", \"sliding_attention\", \"sliding_attention\", \"full_attention\"], "
       "\"quantization_config\": null",
       &c);
    SD_CHECK(!c.attention_bias && !c.o_bias && c.glu_alpha == -0.5f && c.glu_limit == 3.0f &&
                 c.rope_type == SD_ROPE_DEFAULT && c.rope_theta == 100.0f && c.sliding_window == 9 &&
                 sliding_mask(&c) == 0x6 && !c.experts_mxfp4 && c.act == SD_ACT_SILU,
             "gpt-oss: attention_bias false, alpha / limit / rope / layer_types read, hidden_act unused");
}

/* OLMo-2, Granite, SmolLM3, OLMoE: their config classes' defaults, the keys each reads, and
 * which features the CUDA backend must refuse (sd_cfg_cpu_only). */
/* Ministral3ForCausalLM: the query scale's two keys from the rope dictionary, both required. */
static void ministral3(void) {
    sd_config c;
    ok("ministral3 defaults", "Ministral3ForCausalLM", "", &c);
    SD_CHECK(c.arch == SD_ARCH_MINISTRAL3 && c.q_pos_beta == 0.1f && c.q_pos_orig == 16384 && c.rope_type == SD_ROPE_YARN &&
                 c.sliding_window == 0 && !c.tie_word_embeddings && c.rms_norm_eps == 1e-5f,
             "ministral3 defaults: beta %g orig %d", (double)c.q_pos_beta, c.q_pos_orig);
    ok("ministral3 beta 0", "Ministral3ForCausalLM", "\"rope_parameters\": {\"rope_type\": \"default\", "
       "\"llama_4_scaling_beta\": 0, \"original_max_position_embeddings\": 8}", &c);
    SD_CHECK(c.q_pos_beta == 0.0f && c.rope_type == SD_ROPE_DEFAULT, "ministral3 beta 0");
    bad("ministral3 no beta", "Ministral3ForCausalLM", "\"rope_parameters\": {\"rope_type\": \"default\", "
        "\"original_max_position_embeddings\": 8}", SPECDEC_ERR_FORMAT, "missing key 'rope_parameters.llama_4_scaling_beta'");
    bad("ministral3 no orig", "Ministral3ForCausalLM", "\"rope_parameters\": {\"rope_type\": \"default\", "
        "\"llama_4_scaling_beta\": 0.1}", SPECDEC_ERR_FORMAT, "original_max_position_embeddings");
    bad("ministral3 orig 2.5", "Ministral3ForCausalLM", "\"rope_parameters\": {\"rope_type\": \"default\", "
        "\"llama_4_scaling_beta\": 0.1, \"original_max_position_embeddings\": 2.5}", SPECDEC_ERR_FORMAT, "must be an integer");
}

static void more_families(void) {
    sd_config c;
    ok("olmo2 defaults", "Olmo2ForCausalLM", "\"mlp_bias\": true", &c);
    SD_CHECK(c.qk_norm_whole && !c.qk_norm && c.post_norms_only && c.sandwich_norms && !c.attention_bias &&
                 !c.o_bias && !c.mlp_bias && c.rms_norm_eps == 1e-5f && c.max_position_embeddings == 2048 &&
                 c.rope_theta == 10000.0f && !c.tie_word_embeddings && c.act == SD_ACT_SILU && c.attn_scale == 0.0f,
             "olmo2: Olmo2Config defaults (post-norms, whole q/k norms; mlp_bias not read)");
    SD_CHECK(sd_cfg_cpu_only(&c) != NULL, "olmo2: CPU-only");
    ok("olmo2 biases", "Olmo2ForCausalLM", "\"attention_bias\": true, \"rope_theta\": 500000", &c);
    SD_CHECK(c.attention_bias && c.o_bias && c.rope_theta == 500000.0f, "olmo2: attention_bias, rope_theta");

    ok("granite defaults", "GraniteForCausalLM", "", &c);
    SD_CHECK(c.embed_scale == 1.0f && c.residual_scale == 1.0f && c.attn_scale == 1.0f && c.logits_divisor == 1.0f &&
                 c.rms_norm_eps == 1e-6f && c.max_position_embeddings == 2048 && !c.tie_word_embeddings &&
                 !c.qk_norm_whole && !c.post_norms_only,
             "granite: GraniteConfig defaults (every multiplier 1; attention_multiplier replaces head_dim^-1/2)");
    ok("granite 3.1", "GraniteForCausalLM",
       "\"embedding_multiplier\": 12.0, \"residual_multiplier\": 0.22, \"attention_multiplier\": 0.0078125, "
       "\"logits_scaling\": 16.0, \"attention_bias\": false, \"mlp_bias\": false, \"tie_word_embeddings\": true, "
       "\"rope_theta\": 10000000.0, \"max_position_embeddings\": 131072",
       &c);
    SD_CHECK(c.embed_scale == 12.0f && c.residual_scale == 0.22f && c.attn_scale == 0.0078125f &&
                 c.logits_divisor == 16.0f && c.tie_word_embeddings && c.rope_theta == 1e7f,
             "granite: the published granite-3.1 multipliers");
    SD_CHECK(sd_cfg_cpu_only(&c) != NULL, "granite: CPU-only");

    ok("smollm3 defaults", "SmolLM3ForCausalLM", "", &c);
    SD_CHECK(no_rope_mask(&c) == 0x8 && sliding_mask(&c) == 0 && c.rope_theta == 2000000.0f && c.tie_word_embeddings &&
                 c.max_position_embeddings == 32768 && c.rms_norm_eps == 1e-6f,
             "smollm3: SmolLM3Config defaults (layer 3 of 4 without rope, theta 2e6, tied; mask %x)",
             no_rope_mask(&c));
    SD_CHECK(sd_cfg_cpu_only(&c) != NULL, "smollm3: CPU-only");
    ok("smollm3 interval + window", "SmolLM3ForCausalLM",
       "\"no_rope_layer_interval\": 2, \"use_sliding_window\": true, \"sliding_window\": 8", &c);
    SD_CHECK(no_rope_mask(&c) == 0xa && sliding_mask(&c) == 0xa && c.sliding_window == 8,
             "smollm3: every 2nd layer without rope, and those slide (rope %x, sliding %x)", no_rope_mask(&c),
             sliding_mask(&c));
    ok("smollm3 window off", "SmolLM3ForCausalLM", "\"sliding_window\": 8", &c);
    SD_CHECK(sliding_mask(&c) == 0 && c.sliding_window == 0, "smollm3: use_sliding_window false: no window");
    ok("smollm3 hub", "SmolLM3ForCausalLM",
       "\"no_rope_layers\": [1, 0, true, false], \"no_rope_layer_interval\": 4, \"use_sliding_window\": false, "
       "\"sliding_window\": null, \"layer_types\": [\"full_attention\", \"full_attention\", \"full_attention\", "
       "\"full_attention\"], \"rope_theta\": 5000000.0",
       &c);
    SD_CHECK(no_rope_mask(&c) == 0xa && sliding_mask(&c) == 0 && c.rope_theta == 5e6f,
             "smollm3: an explicit no_rope_layers list (1 = rope) wins over the interval (mask %x)", no_rope_mask(&c));
    ok("smollm3 all rope", "SmolLM3ForCausalLM", "\"no_rope_layers\": [1, 1, 1, 1]", &c);
    SD_CHECK(no_rope_mask(&c) == 0, "smollm3: every layer with rope");
    ok("llama ignores no_rope", "LlamaForCausalLM", "\"no_rope_layers\": [0, 0, 0, 0]", &c);
    SD_CHECK(no_rope_mask(&c) == 0 && sd_cfg_cpu_only(&c) == NULL, "llama: no_rope_layers not read; CUDA runs it");

    ok("olmoe defaults", "OlmoeForCausalLM", "", &c);
    SD_CHECK(c.n_experts == 64 && c.n_experts_used == 8 && c.moe_intermediate == 48 && !c.norm_topk_prob &&
                 moe_mask(&c) == 0xf && c.qk_norm_whole && !c.post_norms_only && !c.sandwich_norms &&
                 c.clip_qkv == 0.0f && c.max_position_embeddings == 4096 && c.rms_norm_eps == 1e-5f &&
                 !c.shared_expert_intermediate,
             "olmoe: OlmoeConfig defaults (64 experts, top 8, not renormalised, experts intermediate_size wide)");
    ok("olmoe options", "OlmoeForCausalLM",
       "\"num_experts\": 16, \"num_experts_per_tok\": 2, \"norm_topk_prob\": true, \"clip_qkv\": 8, "
       "\"decoder_sparse_step\": 2, \"mlp_only_layers\": [0], \"moe_intermediate_size\": 8",
       &c);
    SD_CHECK(c.n_experts == 16 && c.n_experts_used == 2 && c.norm_topk_prob && c.clip_qkv == 8.0f &&
                 moe_mask(&c) == 0xf && c.moe_intermediate == 48,
             "olmoe: norm_topk_prob and clip_qkv read; Qwen-MoE's sparse-step keys are not");
    ok("olmoe clip null", "OlmoeForCausalLM", "\"clip_qkv\": null", &c);
    SD_CHECK(c.clip_qkv == 0.0f, "olmoe: clip_qkv null is none");

    ok("granite-moe defaults", "GraniteMoeForCausalLM", "", &c);
    SD_CHECK(c.n_experts == 8 && c.n_experts_used == 2 && c.moe_intermediate == 48 && c.norm_topk_prob &&
                 moe_mask(&c) == 0xf && c.embed_scale == 1.0f && c.residual_scale == 1.0f && c.attn_scale == 1.0f &&
                 c.logits_divisor == 1.0f && !c.attention_bias && !c.qk_norm_whole,
             "granite-moe: GraniteMoeConfig defaults (8 experts, top 2 renormalised, every multiplier 1)");
    ok("granite-moe 3.1", "GraniteMoeForCausalLM",
       "\"num_local_experts\": 40, \"num_experts_per_tok\": 8, \"embedding_multiplier\": 12.0, "
       "\"residual_multiplier\": 0.22, \"attention_multiplier\": 0.015625, \"logits_scaling\": 6.0, "
       "\"norm_topk_prob\": false, \"tie_word_embeddings\": true",
       &c);
    SD_CHECK(c.n_experts == 40 && c.n_experts_used == 8 && c.norm_topk_prob && c.embed_scale == 12.0f &&
                 c.attn_scale == 0.015625f && c.logits_divisor == 6.0f && c.tie_word_embeddings,
             "granite-moe: the published granite-3.1-3b-a800m values; norm_topk_prob is not read (always renormalised)");
    SD_CHECK(sd_cfg_cpu_only(&c) != NULL, "granite-moe: CPU-only");
}

/* GPTQ / AWQ 4-bit (models/sd_int4.h): the format and group read, what they cannot load refused */
static void int4_configs(void) {
    const specdec_status F = SPECDEC_ERR_FORMAT, U = SPECDEC_ERR_UNSUPPORTED;
    sd_config c;
    ok("gptq", "LlamaForCausalLM", "\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 128, "
       "\"desc_act\": true, \"sym\": false}", &c);
    SD_CHECK(c.int4_fmt == SD_INT4_GPTQ && c.int4_group == 128 && c.int4_bits == 4 && sd_cfg_cpu_only(&c) &&
                 strstr(sd_cfg_cpu_only(&c), "GPTQ"),
             "gptq: v1 format, 4 bits, group 128, CPU only");
    ok("gptq v2 per column", "Qwen3ForCausalLM", "\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, "
       "\"group_size\": -1, \"checkpoint_format\": \"gptq_v2\", \"lm_head\": false}", &c);
    SD_CHECK(c.int4_fmt == SD_INT4_GPTQ_V2 && c.int4_group == 0, "gptq_v2, group_size -1 (one group) read as 0");
    ok("awq", "Qwen2ForCausalLM", "\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 64, "
       "\"zero_point\": true, \"version\": \"GEMM\", \"modules_to_not_convert\": [\"visual\"]}", &c);
    SD_CHECK(c.int4_fmt == SD_INT4_AWQ && c.int4_group == 64, "awq: GEMM (any case), group 64");
    ok("gptq 8 bits", "Qwen2ForCausalLM", "\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 8, "
       "\"group_size\": 128}", &c);
    SD_CHECK(c.int4_fmt == SD_INT4_GPTQ && c.int4_bits == 8, "gptq bits 8 (Qwen's -GPTQ-Int8)");
    bad("gptq 3 bits", "LlamaForCausalLM", "\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 3, "
        "\"group_size\": 128}", U, "bits must be 4 or 8 for gptq");
    bad("awq 8 bits", "LlamaForCausalLM", "\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 8, "
        "\"group_size\": 128}", U, "bits must be 4 for awq");
    bad("gptq no group", "LlamaForCausalLM", "\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4}", F,
        "group_size must be an integer in 1..65536 or -1");
    bad("gptq group 0", "LlamaForCausalLM", "\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, "
        "\"group_size\": 0}", F, "group_size");
    bad("awq group -1", "LlamaForCausalLM", "\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4, "
        "\"group_size\": -1}", F, "group_size must be an integer in 1..65536");
    bad("gptq marlin", "LlamaForCausalLM", "\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, "
        "\"group_size\": 128, \"checkpoint_format\": \"marlin\"}", U, "checkpoint_format");
    bad("gptq lm_head", "LlamaForCausalLM", "\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, "
        "\"group_size\": 128, \"lm_head\": true}", U, "lm_head true");
    bad("awq gemv", "LlamaForCausalLM", "\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4, "
        "\"group_size\": 128, \"version\": \"gemv\"}", U, "version must be");
    bad("awq no zero point", "LlamaForCausalLM", "\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4, "
        "\"group_size\": 128, \"zero_point\": false}", U, "zero_point must be true");
    /* compressed-tensors pack-quantized (W4A16) */
#define CT_Q(fmt, weights, grp, top)                                                                                \
    "\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": \"" fmt "\", "                 \
    "\"config_groups\": {\"group_0\": {\"targets\": [\"Linear\"], " weights grp "}}" top "}"
#define CT_W(bits, strat, dyn)                                                                                      \
    "\"weights\": {\"num_bits\": " bits ", \"type\": \"int\", \"symmetric\": true, " strat ", \"dynamic\": " dyn "}"
#define CT_NOACT ", \"input_activations\": null, \"output_activations\": null"
#define CT_G64 "\"strategy\": \"group\", \"group_size\": 64"
    ok("ct w4a16", "LlamaForCausalLM", CT_Q("pack-quantized", CT_W("4", CT_G64, "false"), CT_NOACT, ""), &c);
    SD_CHECK(c.int4_fmt == SD_INT4_CT && c.int4_group == 64 && c.int4_zero_points == 0,
             "compressed-tensors: pack-quantized, group 64, symmetric (no zero points)");
    ok("ct mixed symmetry", "LlamaForCausalLM",
       "\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": \"pack-quantized\", "
       "\"config_groups\": {\"a\": {\"weights\": {\"num_bits\": 4, \"type\": \"int\", \"symmetric\": false, " CT_G64 "}}, "
       "\"b\": {" CT_W("4", CT_G64, "false") "}}}", &c);
    SD_CHECK(c.int4_zero_points == -1, "compressed-tensors: symmetric and asymmetric groups: zero points either way");
    bad("ct symmetric type", "LlamaForCausalLM",
        "\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": \"pack-quantized\", "
        "\"config_groups\": {\"a\": {\"weights\": {\"num_bits\": 4, \"type\": \"int\", \"symmetric\": 0, " CT_G64 "}}}}",
        F, "symmetric must be true or false");
    ok("ct channel", "LlamaForCausalLM",
       CT_Q("pack-quantized", CT_W("4", "\"strategy\": \"channel\"", "false"), CT_NOACT, ""), &c);
    SD_CHECK(c.int4_fmt == SD_INT4_CT && c.int4_group == 0, "compressed-tensors: channel strategy read as one group");
    bad("ct int8", "LlamaForCausalLM", CT_Q("naive-quantized", CT_W("4", CT_G64, "false"), CT_NOACT, ""), U,
        "format must be \"pack-quantized\" or \"float-quantized\"");
    bad("ct 4-bit as float-quantized", "LlamaForCausalLM",
        CT_Q("float-quantized", CT_W("4", CT_G64, "false"), CT_NOACT, ""), U, "only 8-bit \"float\" weights");
    /* compressed-tensors float-quantized (FP8 / FP8-dynamic / FP8-block) */
#define CT_F(strat, extra) "\"weights\": {\"num_bits\": 8, \"type\": \"float\", \"symmetric\": true, " strat extra "}"
#define CT_FDYN ", \"input_activations\": {\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"token\", \"dynamic\": true}"
    ok("ct fp8 dynamic", "LlamaForCausalLM",
       CT_Q("float-quantized", CT_F("\"strategy\": \"channel\"", ", \"dynamic\": false"), CT_FDYN, ""), &c);
    SD_CHECK(c.fp8_fmt == SD_FP8_CT_CHANNEL && !c.int4_fmt && sd_cfg_cpu_only(&c),
             "compressed-tensors FP8-dynamic: per-channel scales, activations left unquantized, CPU only");
    ok("ct fp8 tensor", "LlamaForCausalLM", CT_Q("float-quantized", CT_F("\"strategy\": \"tensor\"", ""), "", ""), &c);
    SD_CHECK(c.fp8_fmt == SD_FP8_CT_TENSOR, "compressed-tensors FP8 per tensor");
    ok("ct fp8 block", "LlamaForCausalLM",
       CT_Q("float-quantized", CT_F("\"strategy\": \"block\"", ", \"block_structure\": [128, 64]"), CT_FDYN, ""), &c);
    SD_CHECK(c.fp8_fmt == SD_FP8_CT_BLOCK && c.fp8_block[0] == 128 && c.fp8_block[1] == 64,
             "compressed-tensors FP8 block [128, 64]");
    bad("ct fp8 block without structure", "LlamaForCausalLM",
        CT_Q("float-quantized", CT_F("\"strategy\": \"block\"", ""), "", ""), F, "block_structure must be");
    bad("ct fp8 group", "LlamaForCausalLM",
        CT_Q("float-quantized", CT_F("\"strategy\": \"group\"", ", \"group_size\": 128"), "", ""), U,
        "strategy must be \"channel\", \"tensor\" or \"block\"");
    bad("ct fp8 dynamic weights", "LlamaForCausalLM",
        CT_Q("float-quantized", CT_F("\"strategy\": \"channel\"", ", \"dynamic\": true"), "", ""), U,
        "must be static (dynamic false) and symmetric");
    bad("ct fp8 int8 activations", "LlamaForCausalLM",
        CT_Q("float-quantized", CT_F("\"strategy\": \"channel\"", ""),
             ", \"input_activations\": {\"num_bits\": 8, \"type\": \"int\"}", ""), U, "other than as 8-bit floats");
    bad("ct fp8 two schemes", "LlamaForCausalLM",
        "\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": \"float-quantized\", "
        "\"config_groups\": {\"a\": {" CT_F("\"strategy\": \"channel\"", "") "}, \"b\": {"
        CT_F("\"strategy\": \"tensor\"", "") "}}}", U, "groups of different schemes");
#undef CT_F
#undef CT_FDYN
    bad("ct w4a8", "LlamaForCausalLM",
        CT_Q("pack-quantized", CT_W("4", CT_G64, "false"), ", \"input_activations\": {\"num_bits\": 8}", ""), U,
        "quantizes activations");
    ok("ct 8 bits", "LlamaForCausalLM", CT_Q("pack-quantized", CT_W("8", CT_G64, "false"), CT_NOACT, ""), &c);
    SD_CHECK(c.int4_fmt == SD_INT4_CT && c.int4_bits == 8, "compressed-tensors W8A16: 8-bit ints");
    bad("ct 2 bits", "LlamaForCausalLM", CT_Q("pack-quantized", CT_W("2", CT_G64, "false"), CT_NOACT, ""), U,
        "only 4- or 8-bit \"int\" weights");
    bad("ct tensor", "LlamaForCausalLM",
        CT_Q("pack-quantized", CT_W("4", "\"strategy\": \"tensor\"", "false"), CT_NOACT, ""), U, "strategy must be");
    bad("ct dynamic", "LlamaForCausalLM", CT_Q("pack-quantized", CT_W("4", CT_G64, "true"), CT_NOACT, ""), U,
        "dynamic must be false");
    bad("ct kv cache", "LlamaForCausalLM",
        CT_Q("pack-quantized", CT_W("4", CT_G64, "false"), CT_NOACT, ", \"kv_cache_scheme\": {\"num_bits\": 8}"), U,
        "kv_cache_scheme is not supported");
    bad("ct two sizes", "LlamaForCausalLM",
        "\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": \"pack-quantized\", "
        "\"config_groups\": {\"a\": {" CT_W("4", CT_G64, "false") "}, \"b\": {"
        CT_W("4", "\"strategy\": \"group\", \"group_size\": 32", "false") "}}}", U, "groups of different sizes");
#undef CT_Q
#undef CT_W
#undef CT_NOACT
#undef CT_G64
}

static void bad_configs(void) {
    const specdec_status F = SPECDEC_ERR_FORMAT, U = SPECDEC_ERR_UNSUPPORTED;
    /* hidden_size 30 over 4 heads, no head_dim: the head size cannot be derived */
    bad_over("head_dim x heads", "MistralForCausalLM", "\"hidden_size\": 30", "", F,
             "hidden_size (30) is not a multiple of num_attention_heads (4) and there is no 'head_dim'");
    /* Gemma 2 has a head_dim of its own (256) but transformers still requires the division */
    bad_over("gemma2 heads", "Gemma2ForCausalLM", "\"num_attention_heads\": 3, \"num_key_value_heads\": 1", "", F,
             "hidden_size (32) is not a multiple of num_attention_heads (3), which Gemma2ForCausalLM requires");
    bad("window 0", "MistralForCausalLM", "\"sliding_window\": 0", F, "sliding_window");
    bad("window < 0", "Phi3ForCausalLM", "\"sliding_window\": -1", F, "sliding_window");
    bad("window fraction", "Gemma2ForCausalLM", "\"sliding_window\": 3.5", F, "sliding_window");
    bad("sliding layer, null window", "Qwen3ForCausalLM",
        "\"layer_types\": [\"sliding_attention\", \"full_attention\", \"full_attention\", \"full_attention\"]", F,
        "sliding_window");
    bad("layer_types length", "Gemma3ForCausalLM", "\"layer_types\": [\"full_attention\"]", F, "layer_types");
    bad("layer_types value", "Gemma2ForCausalLM",
        "\"layer_types\": [\"chunked_attention\", \"full_attention\", \"full_attention\", \"full_attention\"]", U,
        "chunked_attention");
    bad("unknown rope type", "LlamaForCausalLM", "\"rope_scaling\": {\"rope_type\": \"mrope\"}", U, "mrope");
    bad("rope type not a string", "LlamaForCausalLM", "\"rope_scaling\": {\"rope_type\": 3}", F, "rope_type");
    bad("linear without factor", "Qwen2ForCausalLM", "\"rope_scaling\": {\"rope_type\": \"linear\"}", F, "factor");
    bad("yarn factor 0", "LlamaForCausalLM", "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 0}", F, "factor");
    bad("longrope short list", "Phi3ForCausalLM",
        "\"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1, 1, 1], \"long_factor\": [1, 1, 1, 1]}", F,
        "short_factor");
    bad("longrope long list", "LlamaForCausalLM",
        "\"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1, 1, 1, 1], \"long_factor\": [1, 1, 1, 1, 1]}",
        F, "long_factor");
    bad("longrope factor 0", "LlamaForCausalLM",
        "\"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1, 0, 1, 1], \"long_factor\": [1, 1, 1, 1]}", F,
        "short_factor");
    bad("phi3 linear", "Phi3ForCausalLM", "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2}", F, "rope_type");
    bad("partial rotary llama", "LlamaForCausalLM", "\"partial_rotary_factor\": 0.5", U, "partial_rotary_factor");
    bad("partial rotary odd", "Phi3ForCausalLM", "\"partial_rotary_factor\": 0.375", F, "partial_rotary_factor");
    bad("activation", "Qwen3ForCausalLM", "\"hidden_act\": \"relu\"", U, "hidden_act");
    bad("gemma2 activation", "Gemma2ForCausalLM", "\"hidden_activation\": \"gelu_fast\"", U, "hidden_activation");
    bad("softcap 0", "Gemma2ForCausalLM", "\"final_logit_softcapping\": 0", F, "final_logit_softcapping");
    bad("query scalar 0", "Gemma3ForCausalLM", "\"query_pre_attn_scalar\": 0", F, "query_pre_attn_scalar");
    bad("bidirectional", "Gemma3ForCausalLM", "\"use_bidirectional_attention\": true", U,
        "use_bidirectional_attention");
    bad("gemma3 local rope scaled", "Gemma3ForCausalLM",
        "\"rope_parameters\": {\"sliding_attention\": {\"rope_type\": \"linear\", \"factor\": 2}}", U,
        "sliding_attention");
    bad("nested rope on llama", "LlamaForCausalLM", "\"rope_parameters\": {\"full_attention\": {}}", U,
        "per-layer-type");
    bad("pattern 0", "Gemma3ForCausalLM", "\"sliding_window_pattern\": 0", F, "sliding_window_pattern");
    bad("dynamic 2 dims", "LlamaForCausalLM", "\"head_dim\": 2, \"rope_scaling\": {\"type\": \"dynamic\", "
        "\"factor\": 2}", F, "dynamic");
    bad("yarn original 0", "LlamaForCausalLM", "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 2, "
        "\"original_max_position_embeddings\": 0}", F, "original_max_position_embeddings");
    bad("gemma3 multimodal, no text_config", "Gemma3ForConditionalGeneration", "", F, "needs an object 'text_config'");
    bad("experts 0", "MixtralForCausalLM", "\"num_local_experts\": 0", F, "num_local_experts");
    bad("top-k > experts", "MixtralForCausalLM", "\"num_local_experts\": 4, \"num_experts_per_tok\": 5", F,
        "num_experts_per_tok");
    bad("too many experts", "Qwen3MoeForCausalLM", "\"num_experts\": 100000", F, "num_experts");
    bad("expert counts disagree", "Qwen3MoeForCausalLM", "\"num_experts\": 8, \"num_local_experts\": 4", F,
        "disagree");
    bad("mlp_only_layers out of range", "Qwen3MoeForCausalLM", "\"mlp_only_layers\": [4]", F, "mlp_only_layers");
    bad("mlp_only_layers type", "Qwen3MoeForCausalLM", "\"mlp_only_layers\": 1", F, "mlp_only_layers");
    bad("sparse step 0", "Qwen3MoeForCausalLM", "\"decoder_sparse_step\": 0", F, "decoder_sparse_step");
    bad("moe width 0", "Qwen3MoeForCausalLM", "\"moe_intermediate_size\": 0", F, "moe_intermediate_size");
    bad("shared expert width 0", "Qwen2MoeForCausalLM", "\"shared_expert_intermediate_size\": 0", F,
        "shared_expert_intermediate_size");
    bad("swiglu_limit 0", "GptOssForCausalLM", "\"swiglu_limit\": 0", F, "swiglu_limit");
    bad("swiglu_limit string", "GptOssForCausalLM", "\"swiglu_limit\": \"7\"", F, "swiglu_limit");
    bad("swiglu_alpha huge", "GptOssForCausalLM", "\"swiglu_alpha\": 1e300", F, "swiglu_alpha");
    bad("gpt-oss null window", "GptOssForCausalLM", "\"sliding_window\": null", F, "sliding_window is null");
    bad("gpt-oss bitsandbytes", "GptOssForCausalLM", "\"quantization_config\": {\"quant_method\": \"bitsandbytes\"}",
        U, "quant_method 'bitsandbytes'");
    bad("mxfp4 on llama", "LlamaForCausalLM", "\"quantization_config\": {\"quant_method\": \"mxfp4\"}", U,
        "quant_method 'mxfp4' is not supported for LlamaForCausalLM");
    bad("quantization_config type", "GptOssForCausalLM", "\"quantization_config\": 4", F, "quantization_config");
    bad("quant_method missing", "GptOssForCausalLM", "\"quantization_config\": {\"bits\": 4}", F,
        "quantization_config.quant_method");
    bad("granite multiplier 0", "GraniteForCausalLM", "\"residual_multiplier\": 0", F, "residual_multiplier");
    bad("granite multiplier < 0", "GraniteForCausalLM", "\"attention_multiplier\": -0.5", F, "attention_multiplier");
    bad("granite logits_scaling string", "GraniteForCausalLM", "\"logits_scaling\": \"16\"", F, "logits_scaling");
    bad("granite embedding_multiplier huge", "GraniteForCausalLM", "\"embedding_multiplier\": 1e31", F,
        "embedding_multiplier");
    bad("smollm3 no_rope_layers length", "SmolLM3ForCausalLM", "\"no_rope_layers\": [1, 0]", F,
        "'no_rope_layers' must be a list of num_hidden_layers (4)");
    bad("smollm3 no_rope_layers value", "SmolLM3ForCausalLM", "\"no_rope_layers\": [1, 2, 1, 1]", F,
        "'no_rope_layers'[1] must be 0 or 1");
    bad("smollm3 no_rope_layers type", "SmolLM3ForCausalLM", "\"no_rope_layers\": 4", F, "no_rope_layers");
    bad("smollm3 interval 0", "SmolLM3ForCausalLM", "\"no_rope_layer_interval\": 0", F, "no_rope_layer_interval");
    bad("smollm3 sliding, no window", "SmolLM3ForCausalLM", "\"use_sliding_window\": true, \"layer_types\": "
        "[\"full_attention\", \"sliding_attention\", \"full_attention\", \"full_attention\"]", F,
        "sliding_window is null");
    bad("smollm3 layer_types value", "SmolLM3ForCausalLM", "\"layer_types\": [\"full_attention\", "
        "\"chunked_attention\", \"full_attention\", \"full_attention\"]", U, "chunked_attention");
    bad("olmoe clip 0", "OlmoeForCausalLM", "\"clip_qkv\": 0", F, "clip_qkv");
    bad("olmoe clip < 0", "OlmoeForCausalLM", "\"clip_qkv\": -1", F, "clip_qkv");
    bad("olmoe norm_topk_prob type", "OlmoeForCausalLM", "\"norm_topk_prob\": \"yes\"", F, "norm_topk_prob");
    bad("olmoe head_dim", "OlmoeForCausalLM", "\"head_dim\": 16", F,
        "num_attention_heads (4) x head_dim (16) must equal hidden_size (32)");
    bad("olmoe experts 0", "OlmoeForCausalLM", "\"num_experts\": 0", F, "num_experts");
    bad("granite-moe multiplier 0", "GraniteMoeForCausalLM", "\"logits_scaling\": 0", F, "logits_scaling");
    bad("granite-moe top-k > experts", "GraniteMoeForCausalLM", "\"num_local_experts\": 4, \"num_experts_per_tok\": 6",
        F, "num_experts_per_tok");
    bad("olmo2 rope type", "Olmo2ForCausalLM", "\"rope_scaling\": {\"rope_type\": \"mrope\"}", U, "mrope");
    bad("olmo2 activation", "Olmo2ForCausalLM", "\"hidden_act\": \"relu2\"", U, "hidden_act");
    bad("olmo2 partial rotary", "Olmo2ForCausalLM", "\"partial_rotary_factor\": 0.5", U, "partial_rotary_factor");
}

/* ERNIE 4.5: Ernie4_5Config's defaults, the published ERNIE-4.5-0.3B-PT values, use_bias. */
static void ernie(void) {
    const specdec_status F = SPECDEC_ERR_FORMAT, U = SPECDEC_ERR_UNSUPPORTED;
    sd_config c;
    ok("ernie4_5 defaults", "Ernie4_5ForCausalLM", "", &c);
    SD_CHECK(c.rope_interleaved && c.head_dim == 128 && c.tie_word_embeddings && c.rms_norm_eps == 1e-5f &&
                 c.max_position_embeddings == 131072 && c.rope_theta == 10000.0f && !c.attention_bias && !c.o_bias &&
                 !c.mlp_bias && !c.qk_norm && !c.sandwich_norms && c.act == SD_ACT_SILU,
             "ernie4_5: Ernie4_5Config defaults (interleaved rope, head_dim 128, tied, no biases)");
    SD_CHECK(sd_cfg_cpu_only(&c) == NULL, "ernie4_5: the CUDA backend runs it (interleaved rope on the GPU too)");
    ok("ernie4_5 0.3B", "Ernie4_5ForCausalLM",
       "\"head_dim\": 128, \"rope_theta\": 500000, \"use_bias\": false, \"tie_word_embeddings\": true, "
       "\"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-05, \"use_cache\": false",
       &c);
    SD_CHECK(c.rope_theta == 500000.0f && !c.attention_bias && c.tie_word_embeddings, "ernie4_5: the 0.3B values");
    ok("ernie4_5 use_bias", "Ernie4_5ForCausalLM", "\"use_bias\": true", &c);
    SD_CHECK(c.attention_bias && c.o_bias && c.mlp_bias, "ernie4_5: use_bias biases every projection");
    ok("ernie4_5 use_bias null", "Ernie4_5ForCausalLM", "\"use_bias\": null", &c);
    SD_CHECK(!c.attention_bias && !c.mlp_bias, "ernie4_5: use_bias null is false");
    ok("llama not interleaved", "LlamaForCausalLM", "", &c);
    SD_CHECK(!c.rope_interleaved, "llama: rotate_half pairs");
    bad("ernie4_5 use_bias type", "Ernie4_5ForCausalLM", "\"use_bias\": 1", F, "use_bias");
    bad("ernie4_5 rope type", "Ernie4_5ForCausalLM", "\"rope_scaling\": {\"rope_type\": \"mrope\"}", U, "mrope");
    bad("ernie4_5 activation", "Ernie4_5ForCausalLM", "\"hidden_act\": \"relu2\"", U, "hidden_act");

    /* GLM-4-0414: Glm4Config's defaults and the published GLM-4-9B-0414 values */
    ok("glm4 defaults", "Glm4ForCausalLM", "", &c);
    SD_CHECK(c.rope_interleaved && c.head_dim == 128 && c.rope_dim == 64 && c.rms_norm_eps == 1.5625e-7f &&
                 c.attention_bias && !c.o_bias && !c.mlp_bias && c.sandwich_norms && !c.post_norms_only &&
                 c.fused_gate_up && !c.fused_qkv && !c.tie_word_embeddings && c.max_position_embeddings == 131072 &&
                 c.norm_offset == 0.0f && c.embed_scale == 0.0f,
             "glm4: Glm4Config defaults (partial_rotary_factor 0.5 interleaved, q/k/v biases, sandwich norms, fused "
             "gate_up)");
    SD_CHECK(sd_cfg_cpu_only(&c) == NULL, "glm4: the CUDA backend runs it (interleaved half-head rope, sandwich norms)");
    ok("glm4 9b-0414", "Glm4ForCausalLM",
       "\"head_dim\": 128, \"partial_rotary_factor\": 0.5, \"rope_theta\": 10000.0, \"attention_bias\": true, "
       "\"rms_norm_eps\": 1e-05, \"max_position_embeddings\": 32768, \"eos_token_id\": [61, 62, 63], "
       "\"pad_token_id\": 61, \"attention_dropout\": 0.0",
       &c);
    SD_CHECK(c.rope_dim == 64 && c.rms_norm_eps == 1e-5f && c.n_eos == 3 && c.eos_ids[2] == 63,
             "glm4: the 9B-0414 values (three eos ids, as its list; the ids of the test's vocabulary)");
    ok("glm4 no biases, whole rotary", "Glm4ForCausalLM", "\"attention_bias\": false, \"partial_rotary_factor\": 1.0",
       &c);
    SD_CHECK(!c.attention_bias && c.rope_dim == 128, "glm4: attention_bias false, partial_rotary_factor 1");
    bad("glm4 attention_bias type", "Glm4ForCausalLM", "\"attention_bias\": \"yes\"", F, "attention_bias");
    bad("glm4 rotary dims odd", "Glm4ForCausalLM", "\"partial_rotary_factor\": 0.01", F, "must be even");

    /* EXAONE 4: Exaone4Config's defaults (4 layers here: 0-2 local, 3 global without rope), the window
     * off, layer_types */
    ok("exaone4 defaults", "Exaone4ForCausalLM", "", &c);
    SD_CHECK(c.post_norms_only && c.sandwich_norms && c.qk_norm && !c.qk_norm_whole && c.sliding_window == 4096 &&
                 sliding_mask(&c) == 0x7 && no_rope_mask(&c) == 0x8 && !c.attention_bias && !c.mlp_bias &&
                 c.max_position_embeddings == 2048 && c.rms_norm_eps == 1e-5f && !c.tie_word_embeddings,
             "exaone4: Exaone4Config defaults (post-norms, q/k norms, window 4096 on 3 of 4 layers, the global one "
             "without rope): sliding 0x%x no-rope 0x%x", sliding_mask(&c), no_rope_mask(&c));
    SD_CHECK(sd_cfg_cpu_only(&c) != NULL, "exaone4: CPU-only");
    ok("exaone4 window null", "Exaone4ForCausalLM", "\"sliding_window\": null", &c);
    SD_CHECK(c.sliding_window == 0 && sliding_mask(&c) == 0 && no_rope_mask(&c) == 0,
             "exaone4: sliding_window null: every layer global, with rope");
    ok("exaone4 pattern 2", "Exaone4ForCausalLM", "\"sliding_window_pattern\": 2, \"sliding_window\": 128", &c);
    SD_CHECK(sliding_mask(&c) == 0x5 && no_rope_mask(&c) == 0xa && c.sliding_window == 128, "exaone4: pattern 2");
    ok("exaone4 32B form", "Exaone4ForCausalLM",
       "\"sliding_window\": 4096, \"sliding_window_pattern\": \"LLLG\", \"layer_types\": [\"sliding_attention\", "
       "\"full_attention\", \"sliding_attention\", \"full_attention\"], \"rope_scaling\": {\"rope_type\": "
       "\"llama3\", \"factor\": 16.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
       "\"original_max_position_embeddings\": 8192}, \"rope_theta\": 1000000, \"max_position_embeddings\": 131072",
       &c);
    SD_CHECK(sliding_mask(&c) == 0x5 && no_rope_mask(&c) == 0xa && c.rope_type == SD_ROPE_LLAMA3,
             "exaone4: layer_types given (the string pattern beside them unread), llama3 rope");
    bad("exaone4 pattern 0", "Exaone4ForCausalLM", "\"sliding_window_pattern\": 0", F, "sliding_window_pattern");
    bad("exaone4 string pattern alone", "Exaone4ForCausalLM", "\"sliding_window_pattern\": \"LLLG\"", F,
        "sliding_window_pattern");
    bad("exaone4 sliding layer, window null", "Exaone4ForCausalLM",
        "\"sliding_window\": null, \"layer_types\": [\"sliding_attention\", \"full_attention\", \"full_attention\", "
        "\"full_attention\"]", F, "sliding_window is null");
}

/* GLM-4.5: Glm4MoeConfig's defaults, the published GLM-4.5-Air / GLM-4.5 routing values (on the
 * test's small sizes), the ungrouped form, and the refusals of the grouped routing's sizes. */
static void glm4_moe(void) {
    const specdec_status F = SPECDEC_ERR_FORMAT;
    sd_config c;
    ok("glm4_moe defaults", "Glm4MoeForCausalLM", "", &c);
    SD_CHECK(c.moe_route == SD_ROUTE_SIGMOID_GROUPED && c.n_experts == 128 && c.n_experts_used == 8 && c.moe_intermediate == 1408 &&
                 c.n_group == 1 && c.topk_group == 1 && c.routed_scaling == 1.0f && c.norm_topk_prob &&
                 c.shared_expert_intermediate == 1408 && c.shared_ungated && moe_mask(&c) == 0xe && !c.qk_norm &&
                 !c.attention_bias && !c.o_bias && !c.mlp_bias && !c.rope_interleaved && c.head_dim == 8 &&
                 c.rope_dim == 4 && c.rms_norm_eps == 1e-5f && c.max_position_embeddings == 131072 &&
                 !c.tie_word_embeddings && !c.sandwich_norms && !c.fused_gate_up,
             "glm4_moe: Glm4MoeConfig defaults (128 experts top 8 of width 1408, one ungated shared expert, layer 0 "
             "dense, no q/k norms or biases, half of each head rotated by halves)");
    SD_CHECK(sd_cfg_cpu_only(&c) && strstr(sd_cfg_cpu_only(&c), "mixture"), "glm4_moe: CPU-only (experts)");
    ok("glm4_moe air", "Glm4MoeForCausalLM",
       "\"attention_bias\": true, \"attention_dropout\": 0.0, \"pad_token_id\": 61, \"eos_token_id\": [61, 62, 63], "
       "\"head_dim\": 128, \"hidden_act\": \"silu\", \"partial_rotary_factor\": 0.5, \"initializer_range\": 0.02, "
       "\"max_position_embeddings\": 131072, \"model_type\": \"glm4_moe\", \"moe_intermediate_size\": 1408, "
       "\"norm_topk_prob\": true, \"n_group\": 1, \"topk_group\": 1, \"n_routed_experts\": 128, "
       "\"n_shared_experts\": 1, \"routed_scaling_factor\": 1.0, \"num_experts_per_tok\": 8, "
       "\"first_k_dense_replace\": 1, \"rms_norm_eps\": 1e-05, \"rope_scaling\": null, \"rope_theta\": 1000000, "
       "\"num_nextn_predict_layers\": 1, \"tie_word_embeddings\": false, \"use_qk_norm\": false",
       &c);
    SD_CHECK(c.attention_bias && !c.o_bias && c.head_dim == 128 && c.rope_dim == 64 && c.rope_theta == 1e6f &&
                 c.n_eos == 3 && moe_mask(&c) == 0xe && c.shared_expert_intermediate == 1408,
             "glm4_moe: GLM-4.5-Air's values (q/k/v biases without an o bias, 64 of 128 dims rotated, MTP key "
             "ignored)");
    ok("glm4_moe 355b routing", "Glm4MoeForCausalLM",
       "\"n_routed_experts\": 160, \"num_experts_per_tok\": 8, \"first_k_dense_replace\": 3, "
       "\"routed_scaling_factor\": 2.5, \"use_qk_norm\": true, \"moe_intermediate_size\": 1536, "
       "\"n_shared_experts\": 1, \"n_group\": 1, \"topk_group\": 1",
       &c);
    SD_CHECK(c.n_experts == 160 && moe_mask(&c) == 0x8 && c.routed_scaling == 2.5f && c.qk_norm &&
                 c.shared_expert_intermediate == 1536,
             "glm4_moe: GLM-4.5's routing (3 dense layers, scaling 2.5, q/k norms)");
    ok("glm4_moe groups", "Glm4MoeForCausalLM",
       "\"n_routed_experts\": 16, \"num_experts_per_tok\": 4, \"n_group\": 4, \"topk_group\": 2, "
       "\"n_shared_experts\": 3, \"moe_intermediate_size\": 20, \"norm_topk_prob\": false, "
       "\"first_k_dense_replace\": 0",
       &c);
    SD_CHECK(c.n_group == 4 && c.topk_group == 2 && !c.norm_topk_prob && c.shared_expert_intermediate == 60 &&
                 moe_mask(&c) == 0xf,
             "glm4_moe: groups, three shared experts as one MLP 3 x 20 wide, every layer sparse");
    ok("glm4_moe no shared, all dense", "Glm4MoeForCausalLM",
       "\"n_shared_experts\": 0, \"first_k_dense_replace\": 9", &c);
    SD_CHECK(!c.shared_expert_intermediate && !c.shared_ungated && moe_mask(&c) == 0 && sd_cfg_cpu_only(&c) == NULL,
             "glm4_moe: no shared expert; first_k_dense_replace past the last layer leaves every MLP dense");
    ok("glm4_moe num_local_experts", "Glm4MoeForCausalLM", "\"num_local_experts\": 32, \"n_routed_experts\": 32",
       &c);
    SD_CHECK(c.n_experts == 32, "glm4_moe: num_local_experts (Glm4MoeConfig's attribute_map name)");
    bad("glm4_moe expert names disagree", "Glm4MoeForCausalLM", "\"num_local_experts\": 32, \"n_routed_experts\": 16",
        F, "disagree");
    bad("glm4_moe groups don't divide", "Glm4MoeForCausalLM", "\"n_routed_experts\": 10, \"n_group\": 4", F,
        "n_group (4) must divide");
    bad("glm4_moe groups of one", "Glm4MoeForCausalLM", "\"n_routed_experts\": 8, \"n_group\": 8", F,
        "groups of at least 2");
    bad("glm4_moe topk_group > n_group", "Glm4MoeForCausalLM", "\"n_group\": 2, \"topk_group\": 3", F,
        "topk_group");
    bad("glm4_moe too few competing", "Glm4MoeForCausalLM",
        "\"n_routed_experts\": 16, \"n_group\": 8, \"topk_group\": 1, \"num_experts_per_tok\": 4", F,
        "exceeds the 2 experts");
    bad("glm4_moe scaling 0", "Glm4MoeForCausalLM", "\"routed_scaling_factor\": 0", F, "routed_scaling_factor");
    bad("glm4_moe scaling type", "Glm4MoeForCausalLM", "\"routed_scaling_factor\": \"2.5\"", F,
        "routed_scaling_factor");
    bad("glm4_moe use_qk_norm type", "Glm4MoeForCausalLM", "\"use_qk_norm\": 1", F, "use_qk_norm");
    bad("glm4_moe negative dense layers", "Glm4MoeForCausalLM", "\"first_k_dense_replace\": -1", F,
        "first_k_dense_replace");
    bad("glm4_moe negative shared", "Glm4MoeForCausalLM", "\"n_shared_experts\": -1", F, "n_shared_experts");
    bad("glm4_moe shared too wide", "Glm4MoeForCausalLM", "\"n_shared_experts\": 100000", F, "n_shared_experts");
    /* the validator catches a resolved description that the parser could never produce */
    ok("glm4_moe groups", "Glm4MoeForCausalLM", "\"n_routed_experts\": 16, \"n_group\": 4, \"topk_group\": 2", &c);
    sd_config v = c;
    v.topk_group = 1; /* 1 group of 4 experts for top 8 */
    sd_errbuf eb = {{0}};
    SD_CHECK(sd_config_validate(&v, "cfg", &eb) == SPECDEC_ERR_FORMAT && strstr(eb.msg, "topk_group = 1"),
             "glm4_moe: validate refuses fewer competing experts than num_experts_per_tok: %s", eb.msg);
    v = c;
    v.routed_scaling = NAN;
    SD_CHECK(sd_config_validate(&v, "cfg", &eb) == SPECDEC_ERR_FORMAT && strstr(eb.msg, "routed_scaling_factor"),
             "glm4_moe: validate refuses a NaN scaling: %s", eb.msg);
    v = c;
    v.shared_expert_intermediate = 0;
    SD_CHECK(sd_config_validate(&v, "cfg", &eb) == SPECDEC_ERR_FORMAT && strstr(eb.msg, "ungated shared expert"),
             "glm4_moe: validate refuses an ungated shared expert of width 0: %s", eb.msg);
}

/* DeepSeek-V3: DeepseekV3Config's defaults, the published DeepSeek-V3 / Kimi-K2 / Moonlight forms (on
 * the test's small sizes), the latent attention's layout, and its refusals. */
/* DeepSeek's configs: the base sizes with as many key/value heads as heads (latent attention). */
#define DS_KV "\"num_key_value_heads\": 4"
static void ok_ds(const char *what, const char *extra, sd_config *c) {
    sd_errbuf eb = {{0}};
    specdec_status st = parse_over("DeepseekV3ForCausalLM", DS_KV, extra, c, &eb);
    SD_CHECK(st == SPECDEC_OK, "%s: %s", what, eb.msg);
}

static void deepseek_v3(void) {
    const specdec_status F = SPECDEC_ERR_FORMAT, U = SPECDEC_ERR_UNSUPPORTED;
    sd_config c;
    ok_ds("deepseek_v3 defaults", "", &c);
    SD_CHECK(c.mla && c.q_lora_rank == 1536 && c.kv_lora_rank == 512 && c.qk_nope_dim == 128 && c.v_head_dim == 128 &&
                 c.head_dim == 192 && sd_cfg_rope_dim(&c) == 64 && c.rope_interleaved && c.attn_scale == 0.0f &&
                 c.n_experts == 256 && c.n_experts_used == 8 && c.moe_intermediate == 2048 && c.n_group == 8 &&
                 c.topk_group == 4 && c.routed_scaling == 2.5f && c.moe_route == SD_ROUTE_SIGMOID_GROUPED && c.shared_ungated &&
                 c.shared_expert_intermediate == 2048 && moe_mask(&c) == 0x8 && !c.attention_bias && !c.o_bias &&
                 c.rms_norm_eps == 1e-6f && c.max_position_embeddings == 4096 && c.n_kv_heads == c.n_heads,
             "deepseek_v3: DeepseekV3Config defaults (q/kv latents 1536/512, heads rope 64 + nope 128, v 128, "
             "interleaved rope; 256 experts top 8 in 8 groups of which 4 compete, scaling 2.5, 3 dense layers)");
    SD_CHECK(sd_cfg_cpu_only(&c) && strstr(sd_cfg_cpu_only(&c), "latent"), "deepseek_v3: CPU-only (latent attention)");
    ok_ds("deepseek_v3 published",
       "\"attention_bias\": false, \"bos_token_id\": 0, \"eos_token_id\": 1, \"ep_size\": 1, "
       "\"first_k_dense_replace\": 3, \"kv_lora_rank\": 512, \"max_position_embeddings\": 163840, "
       "\"model_type\": \"deepseek_v3\", \"moe_intermediate_size\": 2048, \"moe_layer_freq\": 1, \"n_group\": 8, "
       "\"n_routed_experts\": 256, \"n_shared_experts\": 1, \"norm_topk_prob\": true, \"num_experts_per_tok\": 8, "
       "\"num_nextn_predict_layers\": 1, \"pretraining_tp\": 1, \"q_lora_rank\": 1536, \"qk_nope_head_dim\": 128, "
       "\"qk_rope_head_dim\": 64, \"rms_norm_eps\": 1e-06, \"rope_scaling\": {\"beta_fast\": 32, \"beta_slow\": 1, "
       "\"factor\": 40, \"mscale\": 1.0, \"mscale_all_dim\": 1.0, \"original_max_position_embeddings\": 4096, "
       "\"type\": \"yarn\"}, \"rope_theta\": 10000, \"routed_scaling_factor\": 2.5, \"scoring_func\": \"sigmoid\", "
       "\"seq_aux\": true, \"topk_group\": 4, \"topk_method\": \"noaux_tc\", \"v_head_dim\": 128",
       &c);
    /* softmax scale 192^-1/2 * mscale^2, mscale = 0.1 * 1.0 * ln(40) + 1 */
    const double m = 0.1 * log(40.0) + 1.0, want = m * m / sqrt(192.0);
    SD_CHECK(c.rope_type == SD_ROPE_YARN && fabs((double)c.attn_scale - want) < 1e-7 * want &&
                 c.rope_attn_factor == 1.0f && c.bos_id == 0 && c.n_eos == 1 && c.eos_ids[0] == 1,
             "deepseek_v3: the published values (yarn 40, softmax scale %g, expected %g)", (double)c.attn_scale, want);
    ok_ds("deepseek_v3 moonlight",
       "\"q_lora_rank\": null, \"n_group\": 1, \"topk_group\": 1, \"n_routed_experts\": 64, "
       "\"num_experts_per_tok\": 6, \"first_k_dense_replace\": 1, \"n_shared_experts\": 2, "
       "\"moe_intermediate_size\": 1408, \"routed_scaling_factor\": 2.446, \"rope_theta\": 50000.0",
       &c);
    SD_CHECK(c.q_lora_rank == 0 && c.n_group == 1 && c.shared_expert_intermediate == 2816 && moe_mask(&c) == 0xe &&
                 c.rope_type == SD_ROPE_DEFAULT && c.attn_scale == 0.0f,
             "deepseek_v3: Moonlight's form (q_proj without a latent, no groups, two shared experts)");
    ok_ds("deepseek_v3 kimi k2 rope",
       "\"rope_scaling\": {\"beta_fast\": 1.0, \"beta_slow\": 1.0, \"factor\": 32.0, \"mscale\": 1.0, "
       "\"mscale_all_dim\": 1.0, \"original_max_position_embeddings\": 4096, \"type\": \"yarn\"}, "
       "\"n_group\": 1, \"topk_group\": 1, \"n_routed_experts\": 384, \"first_k_dense_replace\": 1, "
       "\"routed_scaling_factor\": 2.827",
       &c);
    SD_CHECK(c.n_experts == 384 && c.rope_beta_fast == 1.0f && c.attn_scale > 0.0f, "deepseek_v3: Kimi K2's form");
    ok_ds("deepseek_v3 rotate-half, biases",
       "\"rope_interleave\": false, \"attention_bias\": true, \"qk_rope_head_dim\": 32, \"qk_nope_head_dim\": 64, "
       "\"v_head_dim\": 96, \"head_dim\": 999",
       &c);
    SD_CHECK(!c.rope_interleaved && c.attention_bias && c.o_bias && c.head_dim == 96 && sd_cfg_rope_dim(&c) == 32 &&
                 c.v_head_dim == 96,
             "deepseek_v3: rope_interleave false, q_a / kv_a / o biases, head 32 + 64 (a head_dim key ignored, as "
             "transformers overrides it)");
    bad("deepseek_v3 kv heads", "DeepseekV3ForCausalLM", "", F, "must equal"); /* the base: 2 of 4 */
    bad_over("deepseek_v3 odd rope", "DeepseekV3ForCausalLM", DS_KV, "\"qk_rope_head_dim\": 63", F, "must be even");
    bad_over("deepseek_v3 v too wide", "DeepseekV3ForCausalLM", DS_KV, "\"v_head_dim\": 200", U, "v_head_dim");
    bad_over("deepseek_v3 head too wide", "DeepseekV3ForCausalLM", DS_KV, "\"qk_nope_head_dim\": 1000", F, "exceeds");
    bad_over("deepseek_v3 kv_lora 0", "DeepseekV3ForCausalLM", DS_KV, "\"kv_lora_rank\": 0", F, "kv_lora_rank");
    bad_over("deepseek_v3 softmax scoring", "DeepseekV3ForCausalLM", DS_KV, "\"scoring_func\": \"softmax\"", U, "scoring_func");
    bad_over("deepseek_v3 greedy topk", "DeepseekV3ForCausalLM", DS_KV, "\"topk_method\": \"greedy\"", U, "topk_method");
    bad_over("deepseek_v3 moe_layer_freq 2", "DeepseekV3ForCausalLM", DS_KV, "\"moe_layer_freq\": 2", U, "moe_layer_freq");
    /* the published FP8 checkpoint's quantization_config: block-scaled float8_e4m3fn, CPU only */
    sd_config q;
    ok_ds("deepseek_v3 fp8 checkpoint",
          "\"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", \"quant_method\": \"fp8\", "
          "\"weight_block_size\": [128, 64]}",
          &q);
    SD_CHECK(q.fp8_block[0] == 128 && q.fp8_block[1] == 64 && sd_cfg_cpu_only(&q) && strstr(sd_cfg_cpu_only(&q), "FP8"),
             "deepseek_v3 fp8: weight_block_size [128, 64], CPU only");
    ok_ds("deepseek_v3 fp8 default block", "\"quantization_config\": {\"quant_method\": \"fp8\"}", &q);
    SD_CHECK(q.fp8_block[0] == 128 && q.fp8_block[1] == 128, "deepseek_v3 fp8: weight_block_size defaults to [128, 128]");
    bad_over("deepseek_v3 fp8 e5m2", "DeepseekV3ForCausalLM", DS_KV,
             "\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e5m2\"}", U, "fmt");
    bad_over("deepseek_v3 fp8 block 0", "DeepseekV3ForCausalLM", DS_KV,
             "\"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [0, 128]}", F,
             "weight_block_size");
    bad_over("deepseek_v3 fp8 per-tensor", "DeepseekV3ForCausalLM", DS_KV,
             "\"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": null}", U,
             "weight_block_size");
    bad_over("deepseek_v3 hqq", "DeepseekV3ForCausalLM", DS_KV, "\"quantization_config\": {\"quant_method\": \"hqq\"}",
             U, "'hqq'");
    bad_over("deepseek_v3 partial rope", "DeepseekV3ForCausalLM", DS_KV, "\"partial_rotary_factor\": 0.5", U,
        "partial_rotary_factor");
    /* the validator: latent widths without latent attention, and a head that does not add up */
    ok_ds("deepseek_v3 defaults", "", &c);
    sd_config v = c;
    sd_errbuf eb = {{0}};
    v.qk_nope_dim = 100;
    SD_CHECK(sd_config_validate(&v, "cfg", &eb) == SPECDEC_ERR_FORMAT && strstr(eb.msg, "head_dim 192"),
             "deepseek_v3: validate refuses rope + nope != head_dim: %s", eb.msg);
    v = c;
    v.mla = 0;
    v.attn_scale = 0.0f;
    SD_CHECK(sd_config_validate(&v, "cfg", &eb) == SPECDEC_ERR_FORMAT && strstr(eb.msg, "without latent"),
             "deepseek_v3: validate refuses latent widths without latent attention: %s", eb.msg);
    v = c;
    v.qk_norm = 1;
    SD_CHECK(sd_config_validate(&v, "cfg", &eb) == SPECDEC_ERR_FORMAT && strstr(eb.msg, "another attention"),
             "deepseek_v3: validate refuses latent attention with q/k norms: %s", eb.msg);
}

/* DeepSeek-V2: DeepseekV2Config's defaults (num_experts_per_tok required), the published V2-Lite and V2
 * forms, and the refusals of what its router cannot run as configured. */
static void deepseek_v2(void) {
    const specdec_status F = SPECDEC_ERR_FORMAT, U = SPECDEC_ERR_UNSUPPORTED;
    const char *A = "DeepseekV2ForCausalLM";
    sd_config c;
    sd_errbuf eb = {{0}};
    SD_CHECK(parse_over(A, DS_KV, "", &c, &eb) == F && strstr(eb.msg, "num_experts_per_tok"),
             "deepseek_v2: num_experts_per_tok has no default (DeepseekV2Config: None): %s", eb.msg);
    SD_CHECK(parse_over(A, DS_KV, "\"num_experts_per_tok\": 6", &c, &eb) == SPECDEC_OK, "deepseek_v2 defaults: %s",
             eb.msg);
    SD_CHECK(c.mla && c.moe_route == SD_ROUTE_SOFTMAX_GROUPED && c.n_group == 1 && c.topk_group == 1 &&
                 c.n_experts == 64 && c.moe_intermediate == 1407 && c.shared_expert_intermediate == 2 * 1407 &&
                 moe_mask(&c) == 0xf && !c.norm_topk_prob && c.routed_scaling == 1.0f && c.rope_interleaved &&
                 c.head_dim == 192 && c.max_position_embeddings == 2048,
             "deepseek_v2: DeepseekV2Config defaults (64 experts of 1407, greedy, 2 shared experts, every layer "
             "sparse, interleaved rope)");
    SD_CHECK(parse_over(A, DS_KV,
                        "\"attention_bias\": false, \"bos_token_id\": 0, \"eos_token_id\": 1, "
                        "\"first_k_dense_replace\": 1, \"kv_lora_rank\": 512, \"max_position_embeddings\": 163840, "
                        "\"model_type\": \"deepseek_v2\", \"moe_intermediate_size\": 1408, \"moe_layer_freq\": 1, "
                        "\"n_group\": 1, \"n_routed_experts\": 64, \"n_shared_experts\": 2, \"norm_topk_prob\": false, "
                        "\"num_experts_per_tok\": 6, \"q_lora_rank\": null, \"qk_nope_head_dim\": 128, "
                        "\"qk_rope_head_dim\": 64, \"rms_norm_eps\": 1e-06, \"rope_scaling\": {\"beta_fast\": 32, "
                        "\"beta_slow\": 1, \"factor\": 40, \"mscale\": 0.707, \"mscale_all_dim\": 0.707, "
                        "\"original_max_position_embeddings\": 4096, \"type\": \"yarn\"}, \"rope_theta\": 10000, "
                        "\"routed_scaling_factor\": 1.0, \"scoring_func\": \"softmax\", \"seq_aux\": true, "
                        "\"topk_group\": 1, \"topk_method\": \"greedy\", \"v_head_dim\": 128, \"rope_interleave\": false",
                        &c, &eb) == SPECDEC_OK,
             "deepseek_v2 lite: %s", eb.msg);
    const double m = 0.1 * 0.707 * log(40.0) + 1.0, want = m * m / sqrt(192.0);
    SD_CHECK(c.q_lora_rank == 0 && moe_mask(&c) == 0xe && c.n_experts_used == 6 && c.n_group == 1 &&
                 fabs((double)c.attn_scale - want) < 1e-7 * want && c.rope_interleaved,
             "deepseek_v2: V2-Lite's values (q_proj, layer 0 dense, softmax scale %g expected %g, interleaved "
             "whatever rope_interleave says)", (double)c.attn_scale, want);
    SD_CHECK(parse_over(A, DS_KV,
                        "\"num_experts_per_tok\": 6, \"n_routed_experts\": 160, \"n_group\": 8, \"topk_group\": 3, "
                        "\"topk_method\": \"group_limited_greedy\", \"routed_scaling_factor\": 16.0, "
                        "\"first_k_dense_replace\": 1",
                        &c, &eb) == SPECDEC_OK &&
                 c.n_group == 8 && c.topk_group == 3 && c.routed_scaling == 16.0f,
             "deepseek_v2: V2's group-limited routing (8 groups, 3 compete, scaling 16): %s", eb.msg);
    bad_over("deepseek_v2 noaux_tc", A, DS_KV, "\"num_experts_per_tok\": 6, \"topk_method\": \"noaux_tc\"", U,
             "topk_method 'noaux_tc'");
    bad_over("deepseek_v2 sigmoid", A, DS_KV, "\"num_experts_per_tok\": 6, \"scoring_func\": \"sigmoid\"", U,
             "scoring_func");
    bad_over("deepseek_v2 renormalised", A, DS_KV, "\"num_experts_per_tok\": 6, \"norm_topk_prob\": true", U,
             "norm_topk_prob");
    bad_over("deepseek_v2 groups missing", A, DS_KV,
             "\"num_experts_per_tok\": 6, \"topk_method\": \"group_limited_greedy\"", F, "n_group");
    bad_over("deepseek_v2 too few competing", A, DS_KV,
             "\"num_experts_per_tok\": 6, \"topk_method\": \"group_limited_greedy\", \"n_group\": 16, "
             "\"topk_group\": 1",
             F, "exceeds the 4 experts");
    bad_over("deepseek_v2 moe_layer_freq", A, DS_KV, "\"num_experts_per_tok\": 6, \"moe_layer_freq\": 2", U,
             "moe_layer_freq");
    bad_over("deepseek_v2 heads divide", A, "\"num_key_value_heads\": 3, \"num_attention_heads\": 3",
             "\"num_experts_per_tok\": 6", F, "not a multiple");
    bad_over("deepseek_v2 num_experts disagree", A, DS_KV,
             "\"num_experts_per_tok\": 6, \"num_experts\": 8, \"n_routed_experts\": 16", F, "disagree");
}

/* Vision-language checkpoints (models/sd_config.c sd_cfg_vlm_text): the language model's configuration from
 * text_config, tie_word_embeddings and the special ids from the top level, Gemma 3's final soft-capping
 * dropped (its multimodal class never applies it); refused: another text model_type, no text_config, a
 * quantized checkpoint. (Their logits: model_fixtures_vlm.) */
static void vlm_configs(void) {
    static const char *const text = "\"vocab_size\": 64, \"hidden_size\": 32, \"intermediate_size\": 48, "
                                    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                                    "\"head_dim\": 8";
    char j[1024];
    sd_config c;
    sd_errbuf eb = {{0}};
    snprintf(j, sizeof j, "{\"architectures\": [\"Gemma3ForConditionalGeneration\"], \"eos_token_id\": [1, 60], "
             "\"text_config\": {\"model_type\": \"gemma3_text\", \"final_logit_softcapping\": 30.0, "
             "\"tie_word_embeddings\": false, %s}, \"vision_config\": {\"model_type\": \"siglip_vision_model\"}}", text);
    specdec_status st = sd_config_parse(j, strlen(j), "vlm", &c, &eb);
    SD_CHECK(st == SPECDEC_OK && c.vlm_text && c.arch == SD_ARCH_GEMMA3 && c.tie_word_embeddings == 1 &&
                 c.final_softcap == 0.0f && c.n_eos == 2 && c.eos_ids[1] == 60 && c.n_layers == 2,
             "gemma3 vlm: %s (vlm %d, tie %d, softcap %g, n_eos %d)", eb.msg, c.vlm_text, c.tie_word_embeddings,
             (double)c.final_softcap, c.n_eos);
    snprintf(j, sizeof j, "{\"architectures\": [\"Mistral3ForConditionalGeneration\"], \"tie_word_embeddings\": false, "
             "\"text_config\": {\"model_type\": \"mistral\", \"tie_word_embeddings\": true, %s}}", text);
    st = sd_config_parse(j, strlen(j), "vlm", &c, &eb);
    SD_CHECK(st == SPECDEC_OK && c.vlm_text && c.arch == SD_ARCH_MISTRAL && c.tie_word_embeddings == 0,
             "mistral3 vlm: %s (tie %d)", eb.msg, c.tie_word_embeddings);
    snprintf(j, sizeof j, "{\"architectures\": [\"Mistral3ForConditionalGeneration\"], \"text_config\": "
             "{\"model_type\": \"ministral3\", %s}}", text);
    st = sd_config_parse(j, strlen(j), "vlm", &c, &eb);
    SD_CHECK(st == SPECDEC_OK && c.vlm_text && c.arch == SD_ARCH_MINISTRAL3 && c.rope_type == SD_ROPE_YARN &&
                 c.rope_factor == 16.0f && c.q_pos_beta == 0.1f && c.q_pos_orig == 16384 && c.sliding_window == 0 &&
                 c.tie_word_embeddings == 1,
             "ministral3 vlm (the class's default rope): %s (beta %g, orig %d)", eb.msg, (double)c.q_pos_beta,
             c.q_pos_orig);
    /* Qwen2.5-VL as the Hub has it: flat (the top level is the language model's), rope_scaling "mrope" = the plain
     * rope on text, untied unless the top level says (the class's default) */
    snprintf(j, sizeof j, "{\"architectures\": [\"Qwen2_5_VLForConditionalGeneration\"], \"model_type\": \"qwen2_5_vl\", "
             "\"rope_theta\": 1000000.0, \"rope_scaling\": {\"type\": \"mrope\", \"mrope_section\": [1, 1, 2]}, "
             "\"vision_config\": {\"depth\": 1}, %s}", text);
    st = sd_config_parse(j, strlen(j), "vlm", &c, &eb);
    SD_CHECK(st == SPECDEC_OK && c.vlm_text && c.arch == SD_ARCH_QWEN2 && c.rope_type == SD_ROPE_DEFAULT &&
                 c.rope_theta == 1e6f && c.tie_word_embeddings == 0,
             "qwen2.5-vl flat: %s (rope %d, theta %g, tie %d)", eb.msg, (int)c.rope_type, (double)c.rope_theta,
             c.tie_word_embeddings);
    static const struct { const char *what, *json, *fragment; specdec_status want; } refused[] = {
        {"llama text", "{\"architectures\": [\"Mistral3ForConditionalGeneration\"], \"text_config\": "
                       "{\"model_type\": \"llama\"}}", "'llama' is not supported (specdec runs its language model "
                       "when it is 'mistral' or 'ministral3')", SPECDEC_ERR_UNSUPPORTED},
        {"no text_config", "{\"architectures\": [\"Gemma3ForConditionalGeneration\"]}", "'text_config'",
         SPECDEC_ERR_FORMAT},
        {"quantized", "{\"architectures\": [\"Mistral3ForConditionalGeneration\"], \"quantization_config\": {}, "
                      "\"text_config\": {\"model_type\": \"mistral\"}}", "quantized", SPECDEC_ERR_UNSUPPORTED},
        {"other wrapper", "{\"architectures\": [\"Llama4ForConditionalGeneration\"], \"text_config\": {}}",
         "is not supported", SPECDEC_ERR_UNSUPPORTED},
        {"qwen2.5-vl, other text", "{\"architectures\": [\"Qwen2_5_VLForConditionalGeneration\"], \"text_config\": "
                                   "{\"model_type\": \"qwen2\"}}", "'qwen2' is not supported", SPECDEC_ERR_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        sd_err_clear(&eb);
        st = sd_config_parse(refused[i].json, strlen(refused[i].json), "vlm", &c, &eb);
        SD_CHECK(st == refused[i].want && strstr(eb.msg, refused[i].fragment), "vlm %s: %s (%s)", refused[i].what,
                 specdec_status_string(st), eb.msg);
    }
}

int main(void) {
    vlm_configs();
    ministral3();
    families();
    ernie();
    moe_families();
    gpt_oss();
    more_families();
    glm4_moe();
    deepseek_v3();
    deepseek_v2();
    bad_configs();
    int4_configs();
    return sd_test_done();
}
