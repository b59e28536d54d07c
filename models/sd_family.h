/* sd_family.h — the supported model families as data: for each one, what transformers'
 * config class defaults to when config.json leaves a key out, which keys it reads and
 * how, and the structure of its layers (tensor names, norms, biases, activation,
 * attention variants). sd_config_parse (models/sd_config.c) reads config.json through
 * this table into a resolved sd_config; the loader (models/sd_model_load.c) takes the
 * tensor names from the resolved config; the backends run whatever it describes. A new
 * family is a new row (and, when it needs an op the forward does not have, that op). */
#ifndef SD_FAMILY_H
#define SD_FAMILY_H

#include <stdint.h>

#include "sd_weights.h"

/* How a family decides which layers use the sliding window. */
typedef enum sd_window_rule {
    SD_WIN_NONE = 0,     /* never (sliding_window is not read) */
    SD_WIN_ALL = 1,      /* every layer when sliding_window is set (Mistral, Phi-3) */
    SD_WIN_UPPER = 2,    /* use_sliding_window: layers >= max_window_layers (Qwen2, Qwen3) */
    SD_WIN_PATTERN = 3,  /* every `pattern`-th layer is global, the others slide (Gemma 2/3) */
    SD_WIN_EVEN_LOWER = 4, /* use_sliding_window: even layers below max_window_layers (Qwen2-MoE) */
    SD_WIN_NOPE = 5      /* layer_types, else (use_sliding_window and a window) the layers without
                            rope slide (SmolLM3Config) */
} sd_window_rule;

/* Family traits, bits of sd_family.flags (64 bits: 32 were an enum, which the 32nd trait filled;
 * the next trait takes bit 41). */
#define SD_FAM_QKV_BIAS (UINT64_C(1) << 0) /* q/k/v biases always (Qwen2) */
#define SD_FAM_ATTN_BIAS_KEY (UINT64_C(1) << 1) /* attention_bias: q/k/v and o biases */
#define SD_FAM_MLP_BIAS_KEY (UINT64_C(1) << 2) /* mlp_bias: gate/up/down biases */
#define SD_FAM_QK_NORM (UINT64_C(1) << 3) /* self_attn.q_norm / k_norm (per head, before RoPE) */
#define SD_FAM_SANDWICH (UINT64_C(1) << 4) /* post-attention + pre/post-feed-forward norms */
#define SD_FAM_NORM_PLUS1 (UINT64_C(1) << 5) /* RMSNorm multiplies by (1 + w) */
#define SD_FAM_EMBED_SCALE (UINT64_C(1) << 6) /* embeddings times sqrt(hidden_size) */
#define SD_FAM_FUSED (UINT64_C(1) << 7) /* self_attn.qkv_proj and mlp.gate_up_proj */
#define SD_FAM_SOFTCAP (UINT64_C(1) << 8) /* attn_logit_softcapping applied */
#define SD_FAM_FINAL_SOFTCAP (UINT64_C(1) << 9) /* final_logit_softcapping applied */
#define SD_FAM_QUERY_SCALAR (UINT64_C(1) << 10) /* softmax scale query_pre_attn_scalar^-1/2 */
#define SD_FAM_PARTIAL_ROPE (UINT64_C(1) << 11) /* partial_rotary_factor rotates the first dims only */
#define SD_FAM_HEADS_DIVIDE (UINT64_C(1) << 12) /* hidden_size % num_attention_heads == 0 required */
#define SD_FAM_LOCAL_ROPE (UINT64_C(1) << 13) /* sliding layers: default rope of their own theta */
#define SD_FAM_YARN_IS_LONGROPE (UINT64_C(1) << 14) /* rope_type "yarn"/"su" mean longrope (Phi-3) */
#define SD_FAM_GELU_IS_TANH (UINT64_C(1) << 15) /* hidden_act "gelu" means the tanh approximation (Gemma) */
#define SD_FAM_BIDIR_KEY (UINT64_C(1) << 16) /* use_bidirectional_attention: true is refused */
#define SD_FAM_PATTERN_KEY (UINT64_C(1) << 17) /* sliding_window_pattern read (else the table's pattern) */
#define SD_FAM_USE_WINDOW_KEY (UINT64_C(1) << 18) /* SD_WIN_ALL gated by use_sliding_window (Qwen3-MoE) */
#define SD_FAM_MOE (UINT64_C(1) << 19) /* sparse MoE MLPs (sd_config n_experts ...; tensor names by arch) */
#define SD_FAM_MOE_SPARSE_STEP (UINT64_C(1) << 20) /* decoder_sparse_step / mlp_only_layers / norm_topk_prob read
                                          (Qwen-MoE); else every layer is MoE, top-k renormalised */
#define SD_FAM_QKV_BIAS_KEY (UINT64_C(1) << 21) /* qkv_bias (default true): q/k/v biases, never o (Qwen2-MoE) */
#define SD_FAM_SHARED_EXPERT (UINT64_C(1) << 22) /* shared_expert_intermediate_size: a gated shared expert */
#define SD_FAM_ATTN_BIAS_ON (UINT64_C(1) << 23) /* attention_bias defaults to true (GPT-OSS) */
#define SD_FAM_SINKS (UINT64_C(1) << 24) /* self_attn.sinks: attention sinks (GPT-OSS) */
#define SD_FAM_MOE_FUSED (UINT64_C(1) << 25) /* fused biased experts, router bias, clamped SwiGLU (swiglu_alpha,
                                        swiglu_limit; hidden_act unused), MXFP4 checkpoints (GPT-OSS) */
#define SD_FAM_QK_NORM_WHOLE (UINT64_C(1) << 26) /* self_attn.q_norm / k_norm over the whole projection (OLMo-2, OLMoE) */
#define SD_FAM_POST_NORMS (UINT64_C(1) << 27) /* no pre-norms: post_attention / post_feedforward_layernorm of the
                                        sublayer outputs (OLMo-2) */
#define SD_FAM_MULTIPLIERS (UINT64_C(1) << 28) /* embedding_multiplier, residual_multiplier, attention_multiplier,
                                        logits_scaling (Granite) */
#define SD_FAM_NO_ROPE_KEY (UINT64_C(1) << 29) /* no_rope_layers / no_rope_layer_interval (SmolLM3) */
#define SD_FAM_CLIP_QKV (UINT64_C(1) << 30) /* clip_qkv: q, k, v clamped (OLMoE) */
#define SD_FAM_TOPK_NORM_KEY (UINT64_C(1) << 31) /* norm_topk_prob read (default false) without the Qwen-MoE keys (OLMoE) */
#define SD_FAM_ROPE_INTERLEAVED (UINT64_C(1) << 32) /* rotary pairs (2i, 2i + 1) (ERNIE 4.5, GLM) */
#define SD_FAM_USE_BIAS_KEY (UINT64_C(1) << 33) /* use_bias (default false): q/k/v/o and MLP biases (ERNIE 4.5) */
#define SD_FAM_FUSED_MLP (UINT64_C(1) << 34) /* mlp.gate_up_proj only (q/k/v separate: GLM-4) */
#define SD_FAM_ATTN_BIAS_QKV (UINT64_C(1) << 35) /* attention_bias (default true): q/k/v biases, never o (GLM-4) */
#define SD_FAM_NOPE_GLOBAL (UINT64_C(1) << 36) /* with a sliding window, the full-attention layers apply no rope;
                                                  sliding_window null: every layer full, with rope (EXAONE 4) */
#define SD_FAM_QK_NORM_KEY (UINT64_C(1) << 37) /* use_qk_norm (default false): per-head q/k norms (GLM-4.5) */
#define SD_FAM_MOE_SIGMOID (UINT64_C(1) << 38) /* DeepSeek-V3 routing (SD_ROUTE_SIGMOID_GROUPED): n_routed_experts,
                                        moe_intermediate_size, first_k_dense_replace, n_group, topk_group,
                                        norm_topk_prob, routed_scaling_factor, n_shared_experts ungated
                                        shared experts (GLM-4.5) */
#define SD_FAM_MOE_GREEDY (UINT64_C(1) << 40) /* DeepSeek-V2 routing (SD_ROUTE_SOFTMAX_GROUPED): n_routed_experts /
                                        num_experts, topk_method greedy / group_limited_greedy, n_group, topk_group,
                                        routed_scaling_factor, first_k_dense_replace, n_shared_experts */
#define SD_FAM_Q_POS_SCALE (UINT64_C(1) << 41) /* Ministral 3: rope_parameters.llama_4_scaling_beta and
                                                 .original_max_position_embeddings (both required) scale the
                                                 queries by position (sd_config.q_pos_beta) */
#define SD_FAM_MLA (UINT64_C(1) << 39) /* multi-head latent attention (sd_config.mla): q_lora_rank, kv_lora_rank,
                                        qk_rope_head_dim, qk_nope_head_dim, v_head_dim, rope_interleave
                                        (DeepSeek-V3) */

typedef struct sd_family {
    const char *arch;          /* architectures[0] */
    const char *model_type;    /* model_type (used when architectures is absent) */
    sd_arch id;
    uint64_t flags;            /* SD_FAM_* */
    /* transformers' defaults for absent keys */
    int32_t max_pos;           /* max_position_embeddings */
    double rms_eps;            /* rms_norm_eps */
    int tie;                   /* tie_word_embeddings */
    int32_t head_dim;          /* head_dim; 0 = hidden_size / num_attention_heads */
    double theta;              /* rope_theta */
    double local_theta;        /* SD_FAM_LOCAL_ROPE: rope_local_base_freq */
    const char *act_key;       /* the key naming the activation */
    const char *act_default;
    sd_window_rule window_rule;
    int32_t window;            /* sliding_window when the key is absent (null = none) */
    int32_t window_pattern;    /* SD_WIN_PATTERN: sliding_window_pattern default */
    int32_t max_window_layers; /* SD_WIN_UPPER: max_window_layers default */
    double attn_softcap;       /* attn_logit_softcapping when absent (0 = none) */
    double final_softcap;      /* final_logit_softcapping when absent (0 = none) */
    double query_scalar;       /* query_pre_attn_scalar when absent */
    /* SD_FAM_MOE: transformers' defaults of num_experts / num_experts_per_tok /
     * moe_intermediate_size (0: intermediate_size) */
    int32_t experts, experts_used, moe_intermediate;
    int32_t shared_expert;     /* SD_FAM_SHARED_EXPERT: shared_expert_intermediate_size default */
    const char *rope_default;  /* the rope dictionary (JSON) the config class fills in when config.json
                                  has neither rope_parameters nor rope_scaling; NULL: plain rope */
} sd_family;

/* The family named by architectures[0] (or, with arch NULL, by model_type); NULL if none. */
const sd_family *sd_family_find(const char *arch, const char *model_type);
/* "LlamaForCausalLM, MistralForCausalLM, ..." for messages. */
const char *sd_family_list(void);
/* The family of a resolved configuration (cfg->arch). */
const sd_family *sd_family_of(sd_arch id);

#endif
