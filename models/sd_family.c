/* sd_family.c — the model families as data (see sd_family.h). The defaults are those of
 * the transformers 5 config classes (LlamaConfig, MistralConfig, ...), so a config.json
 * that leaves a key out gets the model transformers builds from it. */
#include "sd_family.h"

#include <string.h>

#define F(x) SD_FAM_##x

static const sd_family sd_families[] = {
    /* arch, model_type, id, flags,
       max_pos, eps, tie, head_dim, theta, local_theta, act_key, act_default,
       window_rule, window, pattern, max_window_layers, attn_softcap, final_softcap, query_scalar,
       experts, experts_used, moe_intermediate, shared_expert, rope_default */
    {"LlamaForCausalLM", "llama", SD_ARCH_LLAMA, F(ATTN_BIAS_KEY) | F(MLP_BIAS_KEY) | F(HEADS_DIVIDE),
     2048, 1e-6, 0, 0, 10000.0, 0.0, "hidden_act", "silu", SD_WIN_NONE, 0, 0, 0, 0.0, 0.0, 0.0, 0, 0, 0, 0, NULL},
    {"MistralForCausalLM", "mistral", SD_ARCH_MISTRAL, 0,
     131072, 1e-6, 0, 0, 10000.0, 0.0, "hidden_act", "silu", SD_WIN_ALL, 4096, 0, 0, 0.0, 0.0, 0.0, 0, 0, 0, 0, NULL},
    {"Qwen2ForCausalLM", "qwen2", SD_ARCH_QWEN2, F(QKV_BIAS),
     32768, 1e-6, 0, 0, 10000.0, 0.0, "hidden_act", "silu", SD_WIN_UPPER, 4096, 0, 28, 0.0, 0.0, 0.0, 0, 0, 0, 0, NULL},
    {"Qwen3ForCausalLM", "qwen3", SD_ARCH_QWEN3, F(ATTN_BIAS_KEY) | F(QK_NORM),
     32768, 1e-6, 0, 128, 10000.0, 0.0, "hidden_act", "silu", SD_WIN_UPPER, 4096, 0, 28, 0.0, 0.0, 0.0, 0, 0, 0, 0,
     NULL},
    {"Phi3ForCausalLM", "phi3", SD_ARCH_PHI3, F(FUSED) | F(PARTIAL_ROPE) | F(YARN_IS_LONGROPE),
     4096, 1e-5, 0, 0, 10000.0, 0.0, "hidden_act", "silu", SD_WIN_ALL, 0, 0, 0, 0.0, 0.0, 0.0, 0, 0, 0, 0, NULL},
    {"GemmaForCausalLM", "gemma", SD_ARCH_GEMMA,
     F(ATTN_BIAS_KEY) | F(NORM_PLUS1) | F(EMBED_SCALE) | F(GELU_IS_TANH) | F(BIDIR_KEY),
     8192, 1e-6, 1, 256, 10000.0, 0.0, "hidden_act", "gelu_pytorch_tanh", SD_WIN_NONE, 0, 0, 0, 0.0, 0.0, 0.0, 0, 0, 0, 0,
     NULL},
    {"Gemma2ForCausalLM", "gemma2", SD_ARCH_GEMMA2,
     F(ATTN_BIAS_KEY) | F(NORM_PLUS1) | F(EMBED_SCALE) | F(SANDWICH) | F(SOFTCAP) | F(FINAL_SOFTCAP) |
         F(QUERY_SCALAR) | F(HEADS_DIVIDE) | F(BIDIR_KEY),
     8192, 1e-6, 1, 256, 10000.0, 0.0, "hidden_activation", "gelu_pytorch_tanh", SD_WIN_PATTERN, 4096, 2, 0, 50.0,
     30.0, 256.0, 0, 0, 0, 0, NULL},
    /* Gemma 3 keeps attn_logit_softcapping in its config but transformers never applies
     * it (Gemma3Attention passes no softcap): no SOFTCAP flag, the key is ignored. */
    {"Gemma3ForCausalLM", "gemma3_text", SD_ARCH_GEMMA3,
     F(ATTN_BIAS_KEY) | F(NORM_PLUS1) | F(EMBED_SCALE) | F(SANDWICH) | F(QK_NORM) | F(FINAL_SOFTCAP) |
         F(QUERY_SCALAR) | F(HEADS_DIVIDE) | F(LOCAL_ROPE) | F(BIDIR_KEY) | F(PATTERN_KEY),
     131072, 1e-6, 1, 256, 1000000.0, 10000.0, "hidden_activation", "gelu_pytorch_tanh", SD_WIN_PATTERN, 4096, 6, 0,
     0.0, 0.0, 256.0, 0, 0, 0, 0, NULL},
    /* MoE families: tensor names in models/sd_model_load.c (sd_moe_names) */
    {"MixtralForCausalLM", "mixtral", SD_ARCH_MIXTRAL, F(MOE),
     131072, 1e-5, 0, 0, 1000000.0, 0.0, "hidden_act", "silu", SD_WIN_ALL, 0, 0, 0, 0.0, 0.0, 0.0, 8, 2, 0, 0, NULL},
    {"Qwen3MoeForCausalLM", "qwen3_moe", SD_ARCH_QWEN3_MOE,
     F(ATTN_BIAS_KEY) | F(QK_NORM) | F(USE_WINDOW_KEY) | F(MOE) | F(MOE_SPARSE_STEP),
     32768, 1e-6, 0, 0, 10000.0, 0.0, "hidden_act", "silu", SD_WIN_ALL, 4096, 0, 0, 0.0, 0.0, 0.0, 128, 8, 768, 0,
     NULL},
    {"Qwen2MoeForCausalLM", "qwen2_moe", SD_ARCH_QWEN2_MOE,
     F(QKV_BIAS_KEY) | F(MOE) | F(MOE_SPARSE_STEP) | F(SHARED_EXPERT),
     32768, 1e-6, 0, 0, 10000.0, 0.0, "hidden_act", "silu", SD_WIN_EVEN_LOWER, 4096, 0, 28, 0.0, 0.0, 0.0, 60, 4, 1408,
     5632, NULL},
    /* GptOssConfig: head_dim 64, attention_bias true, layer_types default: even layers slide
     * (window 128), 128 experts top 4, yarn rope unless configured otherwise; hidden_act unused */
    {"GptOssForCausalLM", "gpt_oss", SD_ARCH_GPT_OSS,
     F(ATTN_BIAS_KEY) | F(ATTN_BIAS_ON) | F(SINKS) | F(MOE) | F(MOE_FUSED),
     131072, 1e-5, 0, 64, 150000.0, 0.0, NULL, NULL, SD_WIN_PATTERN, 128, 2, 0, 0.0, 0.0, 0.0, 128, 4, 0, 0,
     "{\"rope_type\": \"yarn\", \"factor\": 32.0, \"beta_fast\": 32.0, \"beta_slow\": 1.0, \"truncate\": false, "
     "\"original_max_position_embeddings\": 4096}"},
    /* Olmo2Config: post-norm blocks, q/k norms over the whole projection, no MLP biases */
    {"Olmo2ForCausalLM", "olmo2", SD_ARCH_OLMO2, F(ATTN_BIAS_KEY) | F(QK_NORM_WHOLE) | F(POST_NORMS),
     2048, 1e-5, 0, 0, 10000.0, 0.0, "hidden_act", "silu", SD_WIN_NONE, 0, 0, 0, 0.0, 0.0, 0.0, 0, 0, 0, 0, NULL},
    /* GraniteConfig: a Llama with four multipliers (their defaults 1.0) */
    {"GraniteForCausalLM", "granite", SD_ARCH_GRANITE, F(ATTN_BIAS_KEY) | F(MLP_BIAS_KEY) | F(MULTIPLIERS),
     2048, 1e-6, 0, 0, 10000.0, 0.0, "hidden_act", "silu", SD_WIN_NONE, 0, 0, 0, 0.0, 0.0, 0.0, 0, 0, 0, 0, NULL},
    /* SmolLM3Config: every no_rope_layer_interval-th layer (default 4) without rope, theta 2e6, tied */
    {"SmolLM3ForCausalLM", "smollm3", SD_ARCH_SMOLLM3, F(ATTN_BIAS_KEY) | F(MLP_BIAS_KEY) | F(NO_ROPE_KEY),
     32768, 1e-6, 1, 0, 2000000.0, 0.0, "hidden_act", "silu", SD_WIN_NOPE, 0, 0, 0, 0.0, 0.0, 0.0, 0, 0, 0, 0, NULL},
    /* OlmoeConfig: every layer sparse, top-8 of 64 of the softmax, not renormalised by default */
    {"OlmoeForCausalLM", "olmoe", SD_ARCH_OLMOE,
     F(ATTN_BIAS_KEY) | F(QK_NORM_WHOLE) | F(CLIP_QKV) | F(MOE) | F(TOPK_NORM_KEY),
     4096, 1e-5, 0, 0, 10000.0, 0.0, "hidden_act", "silu", SD_WIN_NONE, 0, 0, 0, 0.0, 0.0, 0.0, 64, 8, 0, 0, NULL},
    /* GraniteMoeConfig: Granite's multipliers, 8 experts top 2 (softmax of the top-k logits) */
    {"GraniteMoeForCausalLM", "granitemoe", SD_ARCH_GRANITE_MOE, F(ATTN_BIAS_KEY) | F(MULTIPLIERS) | F(MOE),
     2048, 1e-6, 0, 0, 10000.0, 0.0, "hidden_act", "silu", SD_WIN_NONE, 0, 0, 0, 0.0, 0.0, 0.0, 8, 2, 0, 0, NULL},
    /* Ernie4_5Config: head_dim 128, tied, eps 1e-5; interleaved rotary pairs over the whole head */
    {"Ernie4_5ForCausalLM", "ernie4_5", SD_ARCH_ERNIE4_5, F(ROPE_INTERLEAVED) | F(USE_BIAS_KEY),
     131072, 1e-5, 1, 128, 10000.0, 0.0, "hidden_act", "silu", SD_WIN_NONE, 0, 0, 0, 0.0, 0.0, 0.0, 0, 0, 0, 0, NULL},
    /* Glm4Config: head_dim 128, eps 1.5625e-7, partial_rotary_factor 0.5 (interleaved pairs), q/k/v
     * biases (attention_bias default true), sandwich norms, fused gate_up_proj */
    {"Glm4ForCausalLM", "glm4", SD_ARCH_GLM4,
     F(SANDWICH) | F(FUSED_MLP) | F(ATTN_BIAS_QKV) | F(ATTN_BIAS_ON) | F(PARTIAL_ROPE) | F(ROPE_INTERLEAVED),
     131072, 1.5625e-7, 0, 128, 10000.0, 0.0, "hidden_act", "silu", SD_WIN_NONE, 0, 0, 0, 0.0, 0.0, 0.0, 0, 0, 0, 0,
     NULL},
    /* Exaone4Config: post-norm blocks, per-head q/k norms, window 4096 on 3 of every 4 layers
     * (sliding_window_pattern 4; layer_types when given), the global ones without rope */
    {"Exaone4ForCausalLM", "exaone4", SD_ARCH_EXAONE4, F(QK_NORM) | F(POST_NORMS) | F(PATTERN_KEY) | F(NOPE_GLOBAL),
     2048, 1e-5, 0, 0, 10000.0, 0.0, "hidden_act", "silu", SD_WIN_PATTERN, 4096, 4, 0, 0.0, 0.0, 0.0, 0, 0, 0, 0, NULL},
    /* Glm4MoeConfig: q/k/v biases by attention_bias (default false), use_qk_norm, partial_rotary_factor
     * 0.5 (rotate-half pairs), 128 routed experts top 8 (width 1408), first_k_dense_replace 1, one
     * shared expert, DeepSeek-V3's sigmoid routing; head_dim hidden / heads unless given */
    {"Glm4MoeForCausalLM", "glm4_moe", SD_ARCH_GLM4_MOE,
     F(ATTN_BIAS_QKV) | F(QK_NORM_KEY) | F(PARTIAL_ROPE) | F(MOE) | F(MOE_SIGMOID),
     131072, 1e-5, 0, 0, 10000.0, 0.0, "hidden_act", "silu", SD_WIN_NONE, 0, 0, 0, 0.0, 0.0, 0.0, 128, 8, 1408, 0,
     NULL},
    /* DeepseekV3Config: latent attention (q_lora_rank 1536, kv_lora_rank 512, rope 64 + nope 128, v 128,
     * interleaved rope pairs), attention_bias on q_a / kv_a / o; 256 routed experts top 8 (width 2048) in
     * 8 groups of which 4 compete, scaling 2.5, 3 dense layers, one shared expert; eps 1e-6 */
    {"DeepseekV3ForCausalLM", "deepseek_v3", SD_ARCH_DEEPSEEK_V3, F(ATTN_BIAS_KEY) | F(MOE) | F(MOE_SIGMOID) | F(MLA),
     4096, 1e-6, 0, 0, 10000.0, 0.0, "hidden_act", "silu", SD_WIN_NONE, 0, 0, 0, 0.0, 0.0, 0.0, 256, 8, 2048, 0,
     NULL},
    /* DeepseekV2Config (DeepSeek-V2 / V2-Lite, DeepSeek-Coder-V2): V3's latent attention; 64 routed experts
     * (num_experts_per_tok required), width 1407, softmax routing greedy or group_limited_greedy, never
     * renormalised, two shared experts, no dense layer by default; hidden_size divisible by the heads */
    {"DeepseekV2ForCausalLM", "deepseek_v2", SD_ARCH_DEEPSEEK_V2,
     F(ATTN_BIAS_KEY) | F(MOE) | F(MOE_GREEDY) | F(MLA) | F(HEADS_DIVIDE),
     2048, 1e-6, 0, 0, 10000.0, 0.0, "hidden_act", "silu", SD_WIN_NONE, 0, 0, 0, 0.0, 0.0, 0.0, 64, 0, 1407, 0,
     NULL},
    /* Ministral3Config: Mistral without a window by default, head_dim 128, yarn (factor 16 over 16384, theta 1e6)
     * and the queries scaled by position (llama_4_scaling_beta 0.1), untied, eps 1e-5 */
    {"Ministral3ForCausalLM", "ministral3", SD_ARCH_MINISTRAL3, F(Q_POS_SCALE),
     262144, 1e-5, 0, 128, 1000000.0, 0.0, "hidden_act", "silu", SD_WIN_ALL, 0, 0, 0, 0.0, 0.0, 0.0, 0, 0, 0, 0,
     "{\"rope_type\": \"yarn\", \"rope_theta\": 1000000.0, \"factor\": 16.0, \"original_max_position_embeddings\": 16384, "
     "\"beta_fast\": 32.0, \"beta_slow\": 1.0, \"mscale_all_dim\": 1.0, \"mscale\": 1.0, \"llama_4_scaling_beta\": 0.1}"},
};
#define SD_N_FAMILIES (int)(sizeof sd_families / sizeof sd_families[0])

const sd_family *sd_family_find(const char *arch, const char *model_type) {
    for (int i = 0; i < SD_N_FAMILIES; i++)
        if (arch ? !strcmp(arch, sd_families[i].arch) : (model_type && !strcmp(model_type, sd_families[i].model_type)))
            return &sd_families[i];
    return NULL;
}

const sd_family *sd_family_of(sd_arch id) {
    for (int i = 0; i < SD_N_FAMILIES; i++)
        if (sd_families[i].id == id) return &sd_families[i];
    return &sd_families[0];
}

const char *sd_family_list(void) {
    return "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, "
           "GemmaForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, MixtralForCausalLM, Qwen3MoeForCausalLM, "
           "Qwen2MoeForCausalLM, GptOssForCausalLM, Olmo2ForCausalLM, GraniteForCausalLM, SmolLM3ForCausalLM, "
           "OlmoeForCausalLM, GraniteMoeForCausalLM, Ernie4_5ForCausalLM, Glm4ForCausalLM, Exaone4ForCausalLM, "
           "Glm4MoeForCausalLM, DeepseekV3ForCausalLM, DeepseekV2ForCausalLM, Ministral3ForCausalLM";
}
