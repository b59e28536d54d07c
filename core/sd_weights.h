/* sd_weights.h — the model description every layer shares: dtypes, the decoder's
 * configuration (sd_config), weight tensor views (sd_tensor, sd_layer) and the whole
 * set a backend runs (sd_weights). Plain data, no ownership: models/ fills it from a
 * Hugging Face directory (the views point into the mapped files), backends/ read it.
 *
 * Weights are in PyTorch nn.Linear layout ([out_features, in_features], row-major) and
 * in the checkpoint's dtype; every sd_tensor.data is aligned to its element size.
 *
 * sd_config_validate() is THE check of a configuration's values and their consistency
 * (one status per fault, SPECDEC_ERR_FORMAT: the values a config.json may not have).
 * The loader calls it after parsing; backends rely on it and never re-validate;
 * synthetic configurations (benchmarks, tests) go through it too. */
#ifndef SD_WEIGHTS_H
#define SD_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "specdec.h"
#include "sd_error.h"
#include "sd_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bounds on config values: anything outside is refused before any allocation. */
#define SD_CFG_MAX_LAYERS 1024
#define SD_CFG_MAX_HIDDEN 65536
#define SD_CFG_MAX_INTERMEDIATE 1048576
#define SD_CFG_MAX_HEADS 1024
#define SD_CFG_MAX_HEAD_DIM 1024
#define SD_CFG_MAX_VOCAB 16777216
#define SD_CFG_MAX_POSITIONS 1073741824
#define SD_CFG_MAX_EXPERTS 512 /* routed experts per MoE layer (Qwen3-MoE: 128, DeepSeek-V3: 256) */

/* The families config.json may name (models/sd_family.c describes each one as data:
 * tensor names, config defaults, which keys it reads). The forward never branches on
 * the family: it reads the resolved description below. */
typedef enum sd_arch {
    SD_ARCH_LLAMA = 0,    /* LlamaForCausalLM (Llama 2/3/3.x, TinyLlama, SmolLM) */
    SD_ARCH_MISTRAL = 1,  /* MistralForCausalLM: sliding window on every layer */
    SD_ARCH_QWEN2 = 2,    /* Qwen2ForCausalLM: q/k/v bias, optional windows on the upper layers */
    SD_ARCH_QWEN3 = 3,    /* Qwen3ForCausalLM: q_norm / k_norm */
    SD_ARCH_PHI3 = 4,     /* Phi3ForCausalLM (Phi-3, Phi-3.5, Phi-4): fused qkv / gate_up, longrope */
    SD_ARCH_GEMMA = 5,    /* GemmaForCausalLM: GeGLU, (1 + w) norms, sqrt(hidden) embedding scale */
    SD_ARCH_GEMMA2 = 6,   /* Gemma2ForCausalLM: + sandwich norms, soft-capping, alternating windows */
    SD_ARCH_GEMMA3 = 7,   /* Gemma3ForCausalLM (gemma3_text): + q/k norms, local rope theta */
    SD_ARCH_MIXTRAL = 8,  /* MixtralForCausalLM: a Mistral whose MLPs are sparse mixtures of experts */
    SD_ARCH_QWEN3_MOE = 9, /* Qwen3MoeForCausalLM: a Qwen3 with sparse MoE MLPs (decoder_sparse_step,
                              mlp_only_layers, norm_topk_prob) */
    SD_ARCH_QWEN2_MOE = 10, /* Qwen2MoeForCausalLM (Qwen1.5-MoE, Qwen2-57B-A14B): a Qwen2 with sparse
                              MoE MLPs plus a sigmoid-gated shared expert */
    SD_ARCH_GPT_OSS = 11,  /* GptOssForCausalLM (gpt-oss-20b / 120b): attention sinks and biases,
                              alternating sliding / full layers, yarn rope, fused biased experts with
                              a clamped SwiGLU (MXFP4 checkpoints dequantized at load) */
    SD_ARCH_OLMO2 = 12,    /* Olmo2ForCausalLM (OLMo-2): post-norm blocks (no pre-norms), q/k norms over
                              the whole projection */
    SD_ARCH_GRANITE = 13,  /* GraniteForCausalLM (Granite 3.x): embedding / residual / attention
                              multipliers, logits divided by logits_scaling */
    SD_ARCH_SMOLLM3 = 14,  /* SmolLM3ForCausalLM: a Llama whose no_rope_layers skip RoPE */
    SD_ARCH_OLMOE = 15,    /* OlmoeForCausalLM (OLMoE): q/k norms over the whole projection, optional
                              clip_qkv, sparse MoE MLPs (softmax, top-k, norm_topk_prob) */
    SD_ARCH_GRANITE_MOE = 16, /* GraniteMoeForCausalLM (Granite 3.x MoE): Granite's multipliers, experts
                              stacked per layer ([E, 2I, hidden], [E, hidden, I]), top-k renormalised */
    SD_ARCH_ERNIE4_5 = 17, /* Ernie4_5ForCausalLM (ERNIE-4.5-0.3B): a Llama with interleaved rotary pairs
                              and use_bias (every projection biased or none) */
    SD_ARCH_GLM4 = 18,     /* Glm4ForCausalLM (GLM-4-0414, GLM-Z1): sandwich norms under GLM's names,
                              fused gate_up_proj, q/k/v biases, interleaved rotary pairs on half of
                              each head (partial_rotary_factor 0.5) */
    SD_ARCH_EXAONE4 = 19,  /* Exaone4ForCausalLM (EXAONE 4.0): OLMo-2's post-norm blocks, per-head q/k
                              norms, local/global layers (sliding_window_pattern) whose global layers
                              apply no rope when the model has a window */
    SD_ARCH_GLM4_MOE = 20, /* Glm4MoeForCausalLM (GLM-4.5, GLM-4.5-Air, GLM-4.6): first_k_dense_replace
                              dense layers, then sparse MoE MLPs with DeepSeek-V3's routing (sigmoid
                              scores, e_score_correction_bias, grouped top-k, routed_scaling_factor)
                              plus ungated shared experts; optional q/k norms, partial rope (halves);
                              the checkpoint's MTP layers (num_nextn_predict_layers) are not read */
    SD_ARCH_DEEPSEEK_V3 = 21, /* DeepseekV3ForCausalLM (DeepSeek-V3 / R1, Kimi K2, Moonlight): multi-head
                              latent attention (cfg.mla) and GLM-4.5's MoE (first_k_dense_replace, sigmoid
                              grouped routing, ungated shared experts); MTP layers not read */
    SD_ARCH_DEEPSEEK_V2 = 22, /* DeepseekV2ForCausalLM (DeepSeek-V2 / V2-Lite, DeepSeek-Coder-V2): V3's latent
                              attention, softmax routing (greedy or group-limited), ungated shared experts */
    SD_ARCH_MINISTRAL3 = 23 /* Ministral3ForCausalLM (Ministral 3, the text of Mistral3ForConditionalGeneration
                              2512 checkpoints): Mistral with yarn and the queries scaled by position
                              (q_pos_beta, q_pos_orig) */
} sd_arch;

typedef enum sd_rope_type {
    SD_ROPE_DEFAULT = 0,  /* no rope_scaling */
    SD_ROPE_LLAMA3 = 1,   /* rope_type "llama3" */
    SD_ROPE_LINEAR = 2,   /* "linear": inv_freq / factor */
    SD_ROPE_DYNAMIC = 3,  /* "dynamic" NTK: theta grown for a context of n_ctx tokens */
    SD_ROPE_YARN = 4,     /* "yarn" */
    SD_ROPE_LONGROPE = 5  /* "longrope" (Phi-3 "su"): per-pair factors, short or long by n_ctx */
} sd_rope_type;

/* The gated MLP's activation: out = act(gate) * up. */
typedef enum sd_act {
    SD_ACT_SILU = 0,      /* "silu", "swish" (SwiGLU) */
    SD_ACT_GELU_TANH = 1, /* "gelu_pytorch_tanh", "gelu_new" (GeGLU, tanh approximation) */
    SD_ACT_GELU = 2       /* "gelu" (erf) */
} sd_act;

/* Longrope factor lists hold rope_dim / 2 entries. */
#define SD_CFG_MAX_ROPE_PAIRS (SD_CFG_MAX_HEAD_DIM / 2)

/* Every value a backend needs to run the model, resolved from config.json and the
 * family's defaults. A zero in any of the optional fields (marked "0 =") means the
 * plain Llama behaviour, so a configuration built by hand (tests, benchmarks) that
 * sets only the sizes is a Llama. */
typedef struct sd_config {
    sd_arch arch;
    char architecture[64];
    /* 1: the language model of a vision-language checkpoint (config.json's text_config; its tensors named
     * language_model.model.* / model.language_model.*, the vision tower's left alone: models/sd_config.c
     * sd_cfg_vlm_text) */
    uint8_t vlm_text;
    int32_t vocab_size;
    int32_t hidden_size;
    int32_t intermediate_size;
    int32_t n_layers;
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t head_dim;              /* config head_dim, else the family's default */
    int32_t max_position_embeddings;
    float rms_norm_eps;
    /* rotary embedding of full-attention layers (and of sliding ones unless rope_local_theta) */
    float rope_theta;
    sd_rope_type rope_type;
    float rope_factor;             /* llama3, linear, dynamic, yarn: factor; longrope: unused */
    float rope_low_freq_factor;    /* llama3: low_freq_factor */
    float rope_high_freq_factor;   /* llama3: high_freq_factor */
    int32_t rope_original_max_pos; /* llama3, yarn, longrope: original_max_position_embeddings */
    float rope_attn_factor;        /* yarn, longrope: multiplier of cos and sin (resolved); 0 = 1 */
    float rope_beta_fast, rope_beta_slow; /* yarn (resolved defaults 32 / 1) */
    int32_t rope_truncate;         /* yarn: floor/ceil the correction range (transformers' default 1) */
    /* Ministral 3 (rope_parameters.llama_4_scaling_beta, .original_max_position_embeddings): after rope the
     * queries of position p are scaled by 1 + q_pos_beta x ln(1 + floor(p / q_pos_orig)), so 1 below q_pos_orig;
     * 0 = none */
    float q_pos_beta;
    int32_t q_pos_orig;
    int32_t rope_dim;              /* rotary dimensions (partial_rotary_factor * head_dim, even); 0 = head_dim */
    int32_t rope_interleaved;      /* 1: the rotary pairs are (2i, 2i + 1), GPT-J / GLM style (transformers'
                                      ERNIE 4.5 / GLM rotate_half over x[0::2], x[1::2] with each frequency
                                      repeated twice); 0: (i, i + rope_dim / 2), the rotate_half default */
    float rope_short_factor[SD_CFG_MAX_ROPE_PAIRS]; /* longrope: rope_dim / 2 factors */
    float rope_long_factor[SD_CFG_MAX_ROPE_PAIRS];
    float rope_local_theta;        /* sliding layers: plain rope with this theta (Gemma 3); 0 = as full layers */
    /* attention */
    int32_t sliding_window;        /* keys a sliding layer's query sees, itself included; 0 = none */
    uint8_t layer_sliding[SD_CFG_MAX_LAYERS]; /* 1: layer l attends within sliding_window */
    float attn_scale;              /* softmax scale (query_pre_attn_scalar^-1/2, Granite attention_multiplier);
                                      0 = head_dim^-1/2 */
    float attn_softcap;            /* scores = cap * tanh(scores / cap); 0 = none */
    float final_softcap;           /* logits = cap * tanh(logits / cap); 0 = none */
    int32_t qk_norm;               /* per-head RMSNorm of q and k before RoPE (q_norm, k_norm) */
    int32_t qk_norm_whole;         /* RMSNorm of the whole projected q [n_heads*head_dim] and k
                                      [n_kv_heads*head_dim] before RoPE (OLMo-2, OLMoE); excludes qk_norm */
    float clip_qkv;                /* q, k, v clamped to [-clip, clip] after the q/k norms (OLMoE); 0 = none */
    uint8_t layer_no_rope[SD_CFG_MAX_LAYERS]; /* 1: layer l applies no rotary embedding (SmolLM3) */
    /* layer structure */
    sd_act act;                    /* gated MLP activation */
    float norm_offset;             /* RMSNorm multiplies by (offset + w): 1 for Gemma, else 0 */
    float embed_scale;             /* embeddings times this (Gemma: sqrt(hidden_size); Granite:
                                      embedding_multiplier); 0 = 1 */
    int32_t sandwich_norms;        /* Gemma 2/3: post-attention and pre/post-feed-forward norms */
    int32_t post_norms_only;       /* OLMo-2: no input / pre-MLP norms; each sublayer's output is normed
                                      (post_attention_layernorm, post_feedforward_layernorm) before the
                                      residual add */
    float residual_scale;          /* x += residual_scale * sublayer output (Granite residual_multiplier);
                                      0 = 1 */
    float logits_divisor;          /* logits divided by this (Granite logits_scaling); 0 = 1 */
    int32_t fused_qkv;             /* tensors: self_attn.qkv_proj (Phi-3), else q/k/v_proj */
    int32_t fused_gate_up;         /* tensors: mlp.gate_up_proj (Phi-3), else gate/up_proj */
    int32_t tie_word_embeddings;
    int32_t attention_bias;        /* q/k/v biases present */
    int32_t o_bias;                /* o_proj bias present (Llama/Qwen3/Gemma attention_bias) */
    int32_t mlp_bias;              /* gate/up/down biases present (Llama mlp_bias) */
    /* sparse mixture of experts (Mixtral, Qwen3-MoE); n_experts 0 = every MLP is dense. A MoE
     * layer's MLP: router logits r = h R^T, p = softmax(r) (over all experts), the
     * n_experts_used largest p (ties: the lower expert id) — divided by their sum when
     * norm_topk_prob — weigh the outputs of those experts' gated MLPs (moe_intermediate wide),
     * summed in expert-id order (transformers' MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock). */
    int32_t n_experts;             /* num_local_experts / num_experts */
    int32_t n_experts_used;        /* num_experts_per_tok, 1..n_experts */
    int32_t moe_intermediate;      /* an expert's intermediate size (Mixtral: intermediate_size) */
    int32_t norm_topk_prob;        /* 1: the chosen probabilities renormalised to sum to 1 */
    int32_t shared_expert_intermediate; /* Qwen2-MoE: a shared expert of this width added to every
                                      MoE layer's output, times sigmoid(h . shared_gate); 0 = none */
    uint8_t layer_moe[SD_CFG_MAX_LAYERS]; /* 1: layer l's MLP is the mixture (else dense, intermediate_size) */
    /* GPT-OSS (transformers' GptOssExperts / GptOssTopKRouter / GptOssAttention) */
    int32_t attn_sinks;            /* self_attn.sinks: per head a learned logit s joins the softmax of
                                      the scores and is dropped: out = sum_j e^(x_j - m) v_j /
                                      (sum_j e^(x_j - m) + e^(s - m)), m = max(x, s) */
    int32_t moe_fused;             /* experts stored fused with biases: a router bias; each expert
                                      y = swiglu_clamped(h Wgu^T + bgu) Wd^T + bd with Wgu [2I, hidden]
                                      gate and up rows interleaved (gate i = row 2i, up i = row 2i+1);
                                      weights = softmax over the chosen top-k logits (= norm_topk_prob) */
    float glu_alpha, glu_limit;    /* moe_fused: act = (clamp(u, -limit, limit) + 1) * g * sigmoid(alpha g),
                                      g = min(gate, limit) (swiglu_alpha, swiglu_limit) */
    int32_t fp8_fmt;               /* sd_fp8_fmt: how a checkpoint's float8_e4m3fn matrices are scaled (they
                                      load as SD_FP8); 0 = none */
    int32_t fp8_block[2];          /* SD_FP8_BLOCK_INV / SD_FP8_CT_BLOCK: the block [bm, bn] (weight_block_size,
                                      block_structure) */
    int32_t int4_fmt;              /* sd_int4_fmt: quantization_config "gptq" / "awq" / "compressed-tensors"
                                      4-bit weights (a projection stored as qweight / qzeros / scales, or
                                      weight_packed / weight_scale, loads as SD_INT4); 0 = none */
    int32_t int4_bits;             /* int4_fmt: 4 (SD_INT4) or 8 (SD_INT8: GPTQ bits 8, compressed-tensors W8A16) */
    int32_t int4_group;            /* int4_fmt: group_size (input columns per scale; -1 in the config, one
                                      group per column of the whole input, is stored as 0 here) */
    int32_t int4_zero_points;      /* SD_INT4_CT: 1 every config group asymmetric (weight_zero_point required),
                                      0 every group symmetric (none allowed), -1 both kinds (either) */
    int32_t experts_mxfp4;         /* moe_fused: the checkpoint stores the experts in MXFP4
                                      (quantization_config.quant_method "mxfp4"): the expert weights
                                      stay MXFP4 (SD_MXFP4 views of the mapping; the CPU backend's
                                      linear layers decode a row at a time) */
    int32_t moe_route;             /* sd_moe_route: how the router chooses and weighs the experts */
    int32_t n_group, topk_group;   /* grouped routes: expert groups and how many compete (1 <= topk_group <=
                                      n_group, n_group divides n_experts; SIGMOID_GROUPED: groups of >= 2) */
    float routed_scaling;          /* grouped routes: routed_scaling_factor (> 0) */
    /* DeepSeek's multi-head latent attention (transformers' DeepseekV3Attention): q = q_b(norm(q_a(h)))
     * (or q_proj(h) when q_lora_rank is 0), [n_heads, qk_nope_dim + rope_dim] per token ([nope | pe]);
     * kv_a_proj_with_mqa(h) = [latent kv_lora_rank | k_pe rope_dim]; kv_b(norm(latent)) = per head
     * [k_nope qk_nope_dim | v v_head_dim]; a head's key is [k_nope | rope(k_pe)] (k_pe shared by every
     * head), its value v; softmax scale head_dim^-1/2 (head_dim = qk_nope_dim + rope_dim) unless
     * attn_scale says otherwise; o_proj [hidden, n_heads * v_head_dim] reads the heads' outputs. The
     * q_a / kv_a norms use eps 1e-6 (DeepseekV3RMSNorm's default, not rms_norm_eps).
     * n_kv_heads = n_heads. The CPU backend caches the normed latent c and rope(k_pe) only, with
     * kv_b's parts absorbed (backends/cpu/sd_cpu_runner.c cpu_mla_qkv). */
    int32_t mla;                   /* 1: this attention */
    int32_t q_lora_rank;           /* mla: q_a_proj width; 0 = q_proj */
    int32_t kv_lora_rank;          /* mla: the latent width */
    int32_t qk_nope_dim;           /* mla: head_dim - rope_dim */
    int32_t v_head_dim;            /* mla: 1 .. head_dim */
    int32_t mtp_layers;            /* num_nextn_predict_layers (GLM-4.5, DeepSeek-V3): multi-token-prediction
                                      layers stored after the decoder layers (model.layers.<n_layers + i>.*);
                                      the target never runs them, an MTP draft model (specdec_model_params
                                      .mtp) is layer n_layers alone; 0 = none */
    int32_t mtp_moe;               /* mtp_layers: 1 when that layer's MLP is the mixture (it comes after the
                                      first_k_dense_replace dense layers) */
    int32_t shared_ungated;        /* the shared expert is added as is, without shared_expert_gate
                                      (GLM-4.5 mlp.shared_experts, n_shared_experts x moe_intermediate
                                      wide) */
    int32_t bos_id;                /* -1 if none */
    int32_t n_eos;
    int32_t eos_ids[SPECDEC_MAX_EOS];
} sd_config;

/* How a MoE router chooses and weighs the experts (sd_config.moe_route). */
typedef enum sd_moe_route {
    /* p = softmax(router logits) over all experts; the n_experts_used largest (ties: the lower id),
     * weights p, divided by their sum when norm_topk_prob (Mixtral, Qwen-MoE, OLMoE, GPT-OSS) */
    SD_ROUTE_SOFTMAX = 0,
    /* DeepSeek-V3 / GLM-4.5 (transformers' DeepseekV3TopkRouter, Glm4MoeTopkRouter): s = sigmoid(router
     * logits); c = s + e_score_correction_bias ranks the choice. The experts form n_group equal groups;
     * a group's score is the sum of its two largest c; only the topk_group best groups (ties: the lower
     * group id) compete, and the n_experts_used largest c among their experts are chosen (ties: the
     * lower id). Weights s (not c), divided by (their sum + 1e-20) when norm_topk_prob, then times
     * routed_scaling_factor. A score bias per MoE layer. */
    SD_ROUTE_SIGMOID_GROUPED = 1,
    /* DeepSeek-V2 (DeepseekV2TopkRouter): p = softmax over all experts; with n_group > 1 a group's score
     * is its largest p and only the topk_group best groups compete (topk_method group_limited_greedy;
     * greedy: n_group 1); the n_experts_used largest p among them, weights p times
     * routed_scaling_factor, never renormalised. */
    SD_ROUTE_SOFTMAX_GROUPED = 2
} sd_moe_route;

typedef enum sd_dtype {
    SD_F32 = SPECDEC_DTYPE_F32,
    SD_F16 = SPECDEC_DTYPE_F16,
    SD_BF16 = SPECDEC_DTYPE_BF16,
    /* Internal, never a public dtype: MXFP4 (OCP microscaling, models/sd_mxfp4.h), a 2-D
     * [rows, cols] matrix with cols a multiple of 32: data = rows x cols / 32 blocks of 16 bytes
     * of E2M1 codes, scales = rows x cols / 32 E8M0 bytes (none 0xFF: the loader refuses NaN).
     * Only GPT-OSS experts (cfg.experts_mxfp4) and only the CPU backend's linear layers read it:
     * each row decodes to exactly the floats transformers' BF16 dequantisation gives. */
    SD_MXFP4 = 64,
    /* Internal: fine-grained FP8 (quantization_config quant_method "fp8": DeepSeek-V3 / R1, Kimi K2,
     * Qwen3-*-FP8, GLM-4.5-FP8), a 2-D [rows, cols] matrix of float8_e4m3fn codes, one byte each;
     * scales points to floats (sd_fp8_scales): bm, bn (weight_block_size), then the
     * ceil(rows / bm) x ceil(cols / bn) block scales (weight_scale_inv) row-major. Value (r, c) =
     * e4m3(code) x scale[r / bm][c / bn], the weight-only dequantisation (activations stay fp32).
     * Only the CPU backend reads it (sd_cfg_cpu_only). */
    SD_FP8 = 65,
    /* Internal: 4-bit integer weights with a scale and a zero point per group of input columns (GPTQ
     * and AWQ checkpoints, cfg.int4_fmt), a 2-D [rows, cols] matrix, cols even: data = rows x cols / 2
     * owned bytes, row-major, column 2j in the low nibble of byte j and 2j + 1 in the high one (the
     * loader repacks the checkpoint's int32 words into this); scales points to an sd_int4_meta. Value
     * (r, c) = (float)(q - zero[r][g]) * scale[r][g], g = gidx ? gidx[c] : c / group: exact in float
     * (a 5-bit integer times an fp16 / bf16 scale). Only the CPU backend reads it (sd_cfg_cpu_only). */
    SD_INT4 = 66,
    /* Internal: as SD_INT4 with 8-bit codes (GPTQ bits 8: Qwen's -GPTQ-Int8; compressed-tensors W8A16), one
     * byte per code, row-major; the same sd_int4_meta (bits 8). Value (r, c) = (float)(q - zero) x scale,
     * exact for fp16 / bf16 scales (|q - z| < 256). */
    SD_INT8 = 67
} sd_dtype;

/* cfg.fp8_fmt: where an FP8 matrix `<p>.weight`'s scales are and what they cover (models/sd_model_load.c
 * sd_load_fp8_scales); each becomes SD_FP8's [bm, bn] blocks. */
typedef enum sd_fp8_fmt {
    SD_FP8_NONE = 0,
    SD_FP8_BLOCK_INV = 1,  /* quantization_config "fp8": `<p>.weight_scale_inv` per cfg.fp8_block block */
    SD_FP8_CT_BLOCK = 2,   /* compressed-tensors "float-quantized", strategy block: `<p>.weight_scale` per block */
    SD_FP8_CT_CHANNEL = 3, /* ... strategy channel: `<p>.weight_scale` [rows, 1], one per output (blocks [1, cols]) */
    SD_FP8_CT_TENSOR = 4   /* ... strategy tensor: one `<p>.weight_scale` for the matrix (one block [rows, cols]) */
} sd_fp8_fmt;

/* cfg.int4_fmt: how a checkpoint packs its 4-bit weights (models/sd_model_load.c sd_load_int4). */
typedef enum sd_int4_fmt {
    SD_INT4_NONE = 0,
    SD_INT4_GPTQ = 1,    /* qweight int32 [in / 8, out] (nibble k of word [r, o]: input 8r + k), qzeros int32
                            [groups, out / 8] holding zero - 1 (the v1 format; read back (stored + 1) & 15, as
                            transformers' GPTQ loader does), scales [groups, out], g_idx int32 [in] */
    SD_INT4_GPTQ_V2 = 2, /* as GPTQ, checkpoint_format "gptq_v2": qzeros hold the zeros themselves */
    SD_INT4_AWQ = 3,     /* AWQ GEMM: qweight int32 [in, out / 8], nibble k of word [i, c] holds output
                            8c + {0, 2, 4, 6, 1, 3, 5, 7}[k]; qzeros [in / group, out / 8] likewise, no offset;
                            scales [in / group, out] */
    SD_INT4_CT = 4,      /* compressed-tensors "pack-quantized" (llm-compressor W4A16): weight_packed int32
                            [out, in / 8] row-major (element 8j + k of a row at bits 4k of word j, stored q + 8:
                            the SD_INT4 byte order already), weight_scale [out, groups], weight_zero_point int32
                            [out / 8, groups] packed along the outputs (stored zp + 8) or none (symmetric: 8),
                            weight_g_idx int32 [in] when written with activation ordering */
    SD_INT4_GGUF = 5     /* a GGUF file's ggml block-quantized matrices (Q4_0 .. Q8_0, Q2_K .. Q6_K: models/
                            sd_ggml.h), each repacked from its blocks: codes of up to 4 bits as SD_INT4, 5 to 8
                            as SD_INT8, a scale and zero (and for the types with a minimum, a bias) per block
                            or sub-block */
} sd_int4_fmt;

/* An SD_INT4 matrix's groups (core/sd_weights.h SD_INT4), owned by the model with its codes. */
typedef struct sd_int4_meta {
    int32_t bits;        /* 4 (SD_INT4) or 8 (SD_INT8) */
    int32_t group;       /* columns per group when gidx is NULL (the last group may be shorter) */
    int32_t n_groups;    /* groups per row */
    const int32_t *gidx; /* NULL (groups of `group` consecutive columns) or [cols]: each column's group
                            (GPTQ act-order, desc_act: not monotonic) */
    const float *scale;  /* [rows, n_groups] */
    const int32_t *zero; /* [rows, n_groups], 0..2^bits - 1 (32-bit: the AVX2 path gathers them by g_idx) */
    const float *bias;   /* NULL, or [rows, n_groups] subtracted after the scale (GGUF's Q4_1, Q5_1, Q2_K, Q4_K,
                            Q5_K: value = (float)(q - zero) x scale - bias, the order ggml dequantizes in) */
} sd_int4_meta;

/* A 1-D or 2-D weight. data == NULL means absent (optional tensors only). */
typedef struct sd_tensor {
    const void *data;   /* aligned to the element size; points into the mapping or an owned copy */
    sd_dtype dtype;
    int32_t ndim;       /* 1 or 2 */
    int64_t shape[2];   /* [rows, cols] for 2-D; [n, 1] for 1-D */
    const uint8_t *scales; /* SD_MXFP4 only: [rows, cols / 32] scale bytes (else NULL) */
} sd_tensor;

/* One decoder layer. A fused checkpoint tensor (Phi-3 qkv_proj, gate_up_proj) is
 * loaded as views of its row blocks, so backends always see the separate matrices.
 * Norm weights are used as (cfg.norm_offset + w). */
typedef struct sd_layer {
    sd_tensor attn_norm;  /* [hidden] input_layernorm */
    sd_tensor wq;         /* [n_heads*head_dim, hidden] */
    sd_tensor wk;         /* [n_kv_heads*head_dim, hidden] */
    sd_tensor wv;         /* [n_kv_heads*head_dim, hidden] */
    sd_tensor bq;         /* [n_heads*head_dim] (attention_bias) or absent */
    sd_tensor bk;         /* [n_kv_heads*head_dim] or absent */
    sd_tensor bv;         /* [n_kv_heads*head_dim] or absent */
    sd_tensor q_norm;     /* [head_dim] per-head norm of q (cfg.qk_norm) or absent */
    sd_tensor k_norm;     /* [head_dim] per-head norm of k (cfg.qk_norm) or absent */
    sd_tensor wo;         /* [hidden, n_heads*head_dim] */
    sd_tensor bo;         /* [hidden] o_proj bias (cfg.o_bias) or absent */
    sd_tensor attn_post_norm; /* [hidden] norm of the attention output (cfg.sandwich_norms:
                                 post_attention_layernorm) or absent */
    sd_tensor ffn_norm;   /* [hidden] norm before the MLP: post_attention_layernorm, or
                             pre_feedforward_layernorm with sandwich norms */
    sd_tensor w_gate;     /* [intermediate, hidden] */
    sd_tensor w_up;       /* [intermediate, hidden] */
    sd_tensor w_down;     /* [hidden, intermediate] */
    sd_tensor b_gate;     /* [intermediate] (cfg.mlp_bias) or absent */
    sd_tensor b_up;       /* [intermediate] or absent */
    sd_tensor b_down;     /* [hidden] or absent */
    sd_tensor ffn_post_norm; /* [hidden] norm of the MLP output (cfg.sandwich_norms:
                                post_feedforward_layernorm) or absent */
    /* cfg.layer_moe[l]: the router and the experts instead of w_gate / w_up / w_down (absent) */
    sd_tensor router;     /* [n_experts, hidden] (block_sparse_moe.gate / mlp.gate) or absent */
    const struct sd_expert *experts; /* [n_experts] (owned by the model) or NULL */
    const struct sd_expert *shared;  /* cfg.shared_expert_intermediate: mlp.shared_expert (GLM-4.5:
                                        mlp.shared_experts) (owned) or NULL */
    sd_tensor shared_gate; /* [1, hidden] mlp.shared_expert_gate (absent with cfg.shared_ungated) or absent */
    sd_tensor sinks;      /* [n_heads] self_attn.sinks (cfg.attn_sinks) or absent */
    sd_tensor router_bias; /* [n_experts] mlp.router.bias (cfg.moe_fused) or absent */
    sd_tensor router_score_bias; /* [n_experts] mlp.gate.e_score_correction_bias (SIGMOID_GROUPED): added
                                    to the sigmoid scores for the choice only, or absent */
    /* cfg.mla (wq is q_proj when q_lora_rank is 0; wk / wv absent; wo [hidden, n_heads * v_head_dim]) */
    sd_tensor wq_a;       /* [q_lora_rank, hidden] self_attn.q_a_proj.weight or absent */
    sd_tensor bq_a;       /* [q_lora_rank] its bias (attention_bias) or absent */
    sd_tensor q_a_norm;   /* [q_lora_rank] self_attn.q_a_layernorm.weight or absent */
    sd_tensor wq_b;       /* [n_heads * head_dim, q_lora_rank] self_attn.q_b_proj.weight or absent */
    sd_tensor wkv_a;      /* [kv_lora_rank + rope_dim, hidden] self_attn.kv_a_proj_with_mqa.weight */
    sd_tensor bkv_a;      /* [kv_lora_rank + rope_dim] its bias (attention_bias) or absent */
    sd_tensor kv_a_norm;  /* [kv_lora_rank] self_attn.kv_a_layernorm.weight */
    sd_tensor wkv_b;      /* [n_heads * (qk_nope_dim + v_head_dim), kv_lora_rank] self_attn.kv_b_proj.weight */
} sd_layer;

/* One expert of a MoE layer: a gated MLP [moe_intermediate, hidden] x2, [hidden, moe_intermediate];
 * with cfg.moe_fused (GPT-OSS) w_gate_up and the biases instead of w_gate / w_up (absent). */
typedef struct sd_expert {
    sd_tensor w_gate; /* Mixtral w1, Qwen3-MoE gate_proj */
    sd_tensor w_up;   /* Mixtral w3, Qwen3-MoE up_proj */
    sd_tensor w_down; /* Mixtral w2, Qwen3-MoE down_proj; GPT-OSS down_proj[e] transposed */
    sd_tensor w_gate_up; /* [2 * moe_intermediate, hidden] GPT-OSS gate_up_proj[e] transposed
                            (rows gate 0, up 0, gate 1, ...) or absent */
    sd_tensor b_gate_up; /* [2 * moe_intermediate] gate_up_proj_bias[e] or absent */
    sd_tensor b_down;    /* [hidden] down_proj_bias[e] or absent */
} sd_expert;

/* Everything a backend needs to run a model: the configuration and the tensors
 * (borrowed views). Filled by the loader (struct specdec_model embeds one). */
typedef struct sd_weights {
    sd_config cfg;
    sd_tensor tok_embd;   /* [vocab, hidden] model.embed_tokens.weight */
    sd_layer *layers;     /* [n_layers] */
    sd_tensor out_norm;   /* [hidden] model.norm.weight */
    sd_tensor lm_head;    /* [vocab, hidden]; == tok_embd when tied */
    sd_dtype dtype;       /* dtype of the projection weights */
    /* An MTP layer run as a draft model (GLM-4.5 / DeepSeek-V3 model.layers.<L>.*, vLLM's
     * DeepSeekMultiTokenPredictorLayer), or all absent for a plain model. Then layers[0] is the
     * MTP block, tok_embd its embed_tokens (or the model's), out_norm shared_head.norm, lm_head
     * shared_head.head (or the model's lm_head), and every row enters with a hidden state h
     * (sd_runner_seg.hin): x = eh_proj([RMSNorm(e; enorm) ; RMSNorm(h; hnorm)]), e = the token's
     * embedding, zero at position 0 (vLLM masks it: not needed by MTP). */
    sd_tensor mtp_enorm;   /* [hidden] */
    sd_tensor mtp_hnorm;   /* [hidden] */
    sd_tensor mtp_eh_proj; /* [hidden, 2 * hidden] */
} sd_weights;

/* Why the CUDA backend cannot run c (a description of the first such feature), or NULL: it has
 * no kernels for mixtures of experts, whole-projection q/k norms, post-only norms, residual or
 * logit multipliers, clip_qkv or layers without rope; those models run on the CPU backend. */
const char *sd_cfg_cpu_only(const sd_config *c);

/* 1 when some layer's MLP is a mixture of experts. */
static inline int sd_cfg_has_moe(const sd_config *c) {
    for (int32_t l = 0; l < c->n_layers; l++)
        if (c->layer_moe[l]) return 1;
    return 0;
}

/* The resolved per-model numbers with their "0 =" defaults applied. */
static inline int32_t sd_cfg_rope_dim(const sd_config *c) { return c->rope_dim > 0 ? c->rope_dim : c->head_dim; }
static inline double sd_cfg_embed_scale(const sd_config *c) { return c->embed_scale > 0.0f ? (double)c->embed_scale : 1.0; }
/* Keys a query at position p of layer l sees: positions [sd_cfg_first_key(c, l, p), p]. */
static inline int32_t sd_cfg_first_key(const sd_config *c, int32_t l, int32_t p) {
    if (!c->sliding_window || !c->layer_sliding[l] || p < c->sliding_window) return 0;
    return p - c->sliding_window + 1;
}
/* 1 when some layer slides with a window shorter than n_ctx (the window can matter). */
int sd_cfg_window_binds(const sd_config *c, int32_t n_ctx);
/* The window behind which a paged cache of n_ctx rows may give blocks back (core/
 * sd_runner.h "Sliding-window release"): sliding_window when EVERY layer slides with a
 * window shorter than n_ctx (Mistral v0.1's sliding_window, Qwen2/3 with
 * use_sliding_window and max_window_layers 0, Phi-3 with a window), else 0 — no window,
 * or a full-attention layer that reads every row (Gemma 2/3, Qwen2/3 with
 * max_window_layers > 0): one block table serves all layers, so they keep every block. */
int32_t sd_cfg_release_window(const sd_config *c, int32_t n_ctx);

/* The rotary embedding of the layers of one kind (sliding = 1: the sliding layers, which
 * differ only with rope_local_theta) for a runner of n_ctx positions, as transformers
 * computes it for a sequence of n_ctx tokens. Two rope types depend on that length in
 * transformers (its frequencies follow the longest position of each call): "dynamic"
 * grows theta to theta * (factor * L / max_position_embeddings - (factor - 1))^(d/(d-2))
 * with L = max(n_ctx, max_position_embeddings), and "longrope" takes long_factor when
 * n_ctx > original_max_position_embeddings, else short_factor. A runner fixes both for
 * its context, so its logits are a function of the position alone (batch invariant):
 * they equal transformers' for a forward over a whole sequence of n_ctx tokens, and for
 * any sequence while n_ctx stays within the original length. rp->ext_factor points into c. */
void sd_cfg_rope_params(const sd_config *c, int32_t n_ctx, int sliding, sd_rope_spec *rp);

/* Element size in bytes of a dtype (F32 / F16 / BF16; SD_MXFP4 has no whole-byte element: its
 * readers use sd_mxfp4_row_bytes). */
static inline size_t sd_dtype_size(sd_dtype t) { return t == SD_F32 ? 4u : t == SD_FP8 ? 1u : 2u; }
/* An SD_FP8 tensor's scales (core/sd_weights.h SD_FP8): [0] bm, [1] bn, then the block scales. */
static inline const float *sd_fp8_scales(const sd_tensor *t) { return (const float *)(const void *)t->scales; }
/* 1 for the integer-quantized dtypes (SD_INT4, SD_INT8), which carry an sd_int4_meta. */
static inline int sd_dtype_is_int(sd_dtype t) { return t == SD_INT4 || t == SD_INT8; }
/* Bytes of one row of `cols` codes of an SD_INT4 / SD_INT8 matrix. */
static inline size_t sd_int_row_bytes(sd_dtype t, int64_t cols) { return (size_t)(t == SD_INT8 ? cols : cols / 2); }
/* An SD_INT4 / SD_INT8 tensor's groups. */
static inline const sd_int4_meta *sd_int4_meta_of(const sd_tensor *t) {
    return (const sd_int4_meta *)(const void *)t->scales;
}
/* Value (row, col) of an SD_INT4 / SD_INT8 matrix: (float)(code - zero) x scale of the column's group, exact,
 * minus the group's bias when there is one (GGUF's types with a minimum), as ggml dequantizes. */
static inline float sd_int_value(const sd_tensor *t, int64_t row, int64_t col) {
    const sd_int4_meta *q = sd_int4_meta_of(t);
    const uint8_t *codes = (const uint8_t *)t->data;
    int v;
    if (q->bits == 8) {
        v = codes[row * t->shape[1] + col];
    } else {
        const uint8_t byte = codes[row * (t->shape[1] / 2) + col / 2];
        v = (col & 1) ? byte >> 4 : byte & 15;
    }
    const int64_t g = row * q->n_groups + (q->gidx ? q->gidx[col] : col / q->group);
    const float x = (float)(v - (int)q->zero[g]) * q->scale[g];
    return q->bias ? x - q->bias[g] : x;
}
/* Bytes of one SD_MXFP4 row of `cols` values in data (its scales: cols / 32 bytes). */
static inline size_t sd_mxfp4_row_bytes(int64_t cols) { return (size_t)(cols / 32) * 16u; }

/* Check cfg's values: sizes in [1, SD_CFG_MAX_*], n_heads a multiple of n_kv_heads,
 * head_dim even (RoPE rotates pairs), rope_dim even and <= head_dim, rms_norm_eps > 0,
 * rope_theta > 0, the rope type's parameters (llama3: positive, high_freq_factor >
 * low_freq_factor; linear/dynamic/yarn: factor > 0; yarn/longrope: original
 * max positions > 0, longrope factors positive), a sliding window >= 1 whenever a layer
 * slides, finite non-negative scales and caps, bos/eos ids inside the vocabulary,
 * n_eos in [0, SPECDEC_MAX_EOS]. SPECDEC_ERR_FORMAT naming the field and value
 * (prefixed by `what`, e.g. the file name), else SPECDEC_OK. */
specdec_status sd_config_validate(const sd_config *cfg, const char *what, sd_errbuf *eb);

/* sd_config_validate(&w->cfg), then every tensor view: present exactly when the
 * configuration says so (biases, q/k norms, sandwich norms), F32/F16/BF16, shaped as the
 * configuration implies. MODEL_MISMATCH naming the layer and tensor (UNSUPPORTED for
 * another dtype). Runners call it at creation. */
specdec_status sd_weights_validate(const sd_weights *w, sd_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif
