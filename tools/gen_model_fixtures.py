#!/usr/bin/env python3
"""gen_model_fixtures.py — tiny random checkpoints of every model family specdec runs,
written by transformers itself, with transformers' fp32 logits for fixed token ids.

For each variant (VARIANTS below) it builds the model from its config class with random
weights (every tensor, norms and biases included, drawn from a seeded generator so the
fixture is reproducible), saves it with save_pretrained (config.json + model.safetensors,
fp32, exactly as a user's checkpoint directory), runs one forward over the fixture's ids
(eager attention, fp32) and writes

    OUT/<name>/config.json, model.safetensors   (transformers' own files)
    OUT/<name>/ids.txt                           T token ids, one line
    OUT/<name>/logits.f32                        [T, V] float32 little-endian
    OUT/manifest.txt                             "<name> <T> <V> <n_ctx>" per fixture

An MTP variant (MTP below) also gets its checkpoint's MTP layer with vLLM's MTP reference
(mtp_logits.f32, mtp.txt: add_mtp_layer) and a tokenizer.json of its 80 ids (write_tiny_tokenizer)
so that it runs end to end through the CLI, the server and the Python API.

An MXFP4 variant (MXFP4 below) has its experts quantized by this script's own encoder before
the forward; it is saved as the published gpt-oss checkpoints are (`*_blocks` / `*_scales`,
quantization_config mxfp4) and loaded back with transformers' MXFP4 reader, which must give
the same expert values and logits (check_mxfp4).

A GPTQ / AWQ variant (INT4 below) has its decoder projections quantized to 4 bits (GPTQ also 8) by this
script's own packer before the forward (the reference logits are those of the dequantized weights); it is saved as
the published GPTQ (v1 zeros, act-order g_idx) / AWQ GEMM checkpoints are (qweight / qzeros / scales,
quantization_config) and read back with transformers' GPTQ / AWQ loader, whose gptqmodel kernels must
dequantize every module to exactly the weights written (check_int4).

A compressed-tensors variant (CT below: llm-compressor's W4A16 / W8A16 "pack-quantized" format) has its decoder
projections quantized to signed 4-bit codes with bfloat16 group scales (or 8-bit ones, a scale per row) by
this script, packed by compressed-tensors' own PackedQuantizationCompressor, its quantization_config written by
compressed-tensors' ModelCompressor, and read back with transformers' compressed-tensors loader (check_ct).
A CT_FP8 variant (its "float-quantized" FP8 format: llm-compressor's FP8_DYNAMIC / FP8_BLOCK / FP8 presets)
has them as float8_e4m3fn codes with a scale per output row / block / matrix, written by compressed-tensors'
FloatQuantizationCompressor, read weight-only (activations unquantized) and checked alike (check_ct_fp8).

A variant is re-drawn (next seed) until every position's top-2 logit margin exceeds
MARGIN, so "argmax identical" is a fair requirement on a checker within 1e-4. n_ctx is
the context the checker must give its runner: T (rope types whose frequencies depend on
the length — dynamic, longrope — match transformers' whole-sequence forward there).

Needs torch + transformers (run by hand; CI reads the committed fixtures):
    /work/venv-torch/bin/python tools/gen_model_fixtures.py [--out tests/models/fixtures] [NAME ...]
(the INT4 variants' check also needs gptqmodel and optimum: transformers' GPTQ / AWQ loaders; the CT
variants need compressed-tensors, which writes and reads them)
"""
import argparse
import json
import os
import shutil
import sys
import zlib

try:
    import numpy as np
    import torch
    import transformers
    from safetensors.torch import load_file, save_file
    from transformers import (Gemma2Config, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig, GemmaConfig,
                              GemmaForCausalLM, GptOssConfig, GptOssForCausalLM, LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                              MixtralConfig, MixtralForCausalLM, Phi3Config, Phi3ForCausalLM, Qwen2Config,
                              Qwen2ForCausalLM, Qwen2MoeConfig, Qwen2MoeForCausalLM, Qwen3Config, Qwen3ForCausalLM,
                              Qwen3MoeConfig, Qwen3MoeForCausalLM, Olmo2Config, Olmo2ForCausalLM, GraniteConfig,
                              GraniteForCausalLM, SmolLM3Config, SmolLM3ForCausalLM, OlmoeConfig, OlmoeForCausalLM,
                              GraniteMoeConfig, GraniteMoeForCausalLM, Ernie4_5Config, Ernie4_5ForCausalLM,
                              Glm4Config, Glm4ForCausalLM, Exaone4Config, Exaone4ForCausalLM,
                              Glm4MoeConfig, Glm4MoeForCausalLM, DeepseekV3Config, DeepseekV3ForCausalLM,
                              DeepseekV2Config, DeepseekV2ForCausalLM)
except ImportError as e:
    sys.exit(f"gen_model_fixtures.py: needs torch, transformers and numpy ({e})")

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MARGIN = 1e-3
T = 24          # tokens per fixture: longer than every window below
V = 80          # vocabulary

# Shapes shared by the variants (tiny: the whole set stays far below 5 MB).
BASE = dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, tie_word_embeddings=False,
            bos_token_id=1, eos_token_id=2, pad_token_id=0)


def longrope(n, scale):
    """A longrope factor list of n entries (made up; only the length is fixed)."""
    return [round(1.0 + scale * i, 4) for i in range(n)]


def llama(**kw):
    return LlamaConfig, LlamaForCausalLM, {**BASE, **kw}


# name -> (config class, model class, config kwargs, zero-centred norms (Gemma's (1 + w)))
VARIANTS = {
    "llama_bias": (*llama(attention_bias=True, mlp_bias=True), False),
    "llama_rope_linear": (*llama(rope_parameters={"rope_type": "linear", "factor": 3.0, "rope_theta": 100.0}), False),
    # max_position_embeddings < T: the frequencies grow (transformers: seq_len = T)
    "llama_rope_dynamic": (*llama(max_position_embeddings=16,
                                  rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 100.0}),
                           False),
    "llama_rope_yarn": (*llama(rope_parameters={"rope_type": "yarn", "factor": 4.0, "rope_theta": 500.0,
                                                "original_max_position_embeddings": 16, "beta_fast": 8.0,
                                                "beta_slow": 0.5}), False),
    "llama_rope_yarn_mscale": (*llama(rope_parameters={"rope_type": "yarn", "factor": 8.0, "rope_theta": 300.0,
                                                       "original_max_position_embeddings": 8, "mscale": 0.7,
                                                       "mscale_all_dim": 0.3, "truncate": False}), False),
    "llama_rope_llama3": (*llama(rope_parameters={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 16,
                                                  "rope_theta": 500.0}), False),
    # T > original_max_position_embeddings: the long factors
    "llama_rope_longrope": (*llama(rope_parameters={"rope_type": "longrope", "rope_theta": 200.0,
                                                    "short_factor": longrope(4, 0.1), "long_factor": longrope(4, 1.5),
                                                    "original_max_position_embeddings": 16}), False),
    "mistral_window": (MistralConfig, MistralForCausalLM, {**BASE, "sliding_window": 5}, False),
    # Ministral 3: yarn over 8 original positions and the queries scaled by position past them (x1.07 from
    # position 8, x1.11 from 16: llama_4_scaling_beta 0.1)
    "ministral3": (transformers.Ministral3Config, transformers.Ministral3ForCausalLM,
                   {**BASE, "head_dim": 16, "rope_parameters": {
                       "rope_type": "yarn", "rope_theta": 1e6, "factor": 2.0, "original_max_position_embeddings": 8,
                       "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                       "llama_4_scaling_beta": 0.1}}, False),
    "qwen2_window": (Qwen2Config, Qwen2ForCausalLM,
                     {**BASE, "num_hidden_layers": 3, "use_sliding_window": True, "sliding_window": 6,
                      "max_window_layers": 1, "tie_word_embeddings": True}, False),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM, {**BASE, "head_dim": 16}, False),
    # Qwen3 saved as the published "-FP8" checkpoints are (FP8 below): every decoder projection in
    # float8_e4m3fn with a float32 weight_scale_inv per 16 x 16 block (2-4 blocks each way; transformers'
    # dequantizer needs whole blocks: partial ones, as DeepSeek-V3's kv_a_proj has, are tested in C)
    "qwen3_fp8": (Qwen3Config, Qwen3ForCausalLM, {**BASE, "head_dim": 16}, False),
    # GPTQ / AWQ 4-bit checkpoints (INT4 below): every decoder projection as packed int32 codes with a
    # float16 scale and a 4-bit zero per 16 inputs; the reference logits are those of the dequantized weights
    "llama_gptq": (*llama(), False),
    "qwen2_gptq_actorder": (Qwen2Config, Qwen2ForCausalLM, dict(BASE), False),  # q/k/v biases stay float32
    "qwen3_awq": (Qwen3Config, Qwen3ForCausalLM, {**BASE, "head_dim": 16}, False),
    # a GPTQ Phi-3 (Phi-3 / Phi-4 GPTQ releases): the fused qkv_proj and gate_up_proj quantized whole
    "phi3_gptq": (Phi3Config, Phi3ForCausalLM, {**BASE, "original_max_position_embeddings": 64}, False),
    # Qwen's "-GPTQ-Int8" releases: 8-bit codes, four to a word, an 8-bit zero per 16 inputs (INT4 below)
    "qwen2_gptq_int8": (Qwen2Config, Qwen2ForCausalLM, dict(BASE), False),  # q/k/v biases stay float32
    # compressed-tensors pack-quantized 4-bit checkpoints (CT below): every decoder projection as int32
    # words of 8 signed 4-bit codes with a bfloat16 scale (and, asymmetric, a 4-bit zero) per 16 inputs
    "llama_ct_w4a16": (*llama(), False),
    "qwen3_ct_w4a16_asym": (Qwen3Config, Qwen3ForCausalLM, {**BASE, "head_dim": 16}, False),
    # llm-compressor's W8A16: int32 words of 4 signed 8-bit codes, a bfloat16 scale per output row (CT below)
    "llama_ct_w8a16": (*llama(), False),
    # compressed-tensors float-quantized FP8 checkpoints (CT_FP8 below): every decoder projection not ignored
    # as float8_e4m3fn codes with a scale per output row / 16 x 16 block / matrix
    "llama_ct_fp8_channel": (*llama(), False),
    "qwen3_ct_fp8_block": (Qwen3Config, Qwen3ForCausalLM, {**BASE, "head_dim": 16}, False),
    "mistral_ct_fp8_tensor": (MistralConfig, MistralForCausalLM, {**BASE, "sliding_window": None}, False),
    "qwen3_window_bias": (Qwen3Config, Qwen3ForCausalLM,
                          {**BASE, "num_hidden_layers": 3, "head_dim": 16, "attention_bias": True,
                           "use_sliding_window": True, "sliding_window": 4, "max_window_layers": 2}, False),
    "phi3_window": (Phi3Config, Phi3ForCausalLM, {**BASE, "sliding_window": 7, "original_max_position_embeddings": 64},
                    False),
    # Phi-3.5-mini style: longrope, T > original 16 (long factors)
    "phi35_longrope": (Phi3Config, Phi3ForCausalLM,
                       {**BASE, "original_max_position_embeddings": 16,
                        "rope_parameters": {"rope_type": "longrope", "short_factor": longrope(4, 0.05),
                                            "long_factor": longrope(4, 2.0), "rope_theta": 300.0}}, False),
    # Phi-4-mini style: partial rotary 0.75 of head_dim 16 (6 pairs), longrope within the
    # original length (short factors), tied embeddings
    "phi4_mini": (Phi3Config, Phi3ForCausalLM,
                  {**BASE, "num_attention_heads": 2, "num_key_value_heads": 1, "partial_rotary_factor": 0.75,
                   "original_max_position_embeddings": 32, "max_position_embeddings": 128, "tie_word_embeddings": True,
                   "rope_parameters": {"rope_type": "longrope", "short_factor": longrope(6, 0.2),
                                       "long_factor": longrope(6, 3.0), "rope_theta": 1000.0,
                                       "partial_rotary_factor": 0.75}}, False),
    "phi4": (Phi3Config, Phi3ForCausalLM, {**BASE, "original_max_position_embeddings": 64,
                                           "rope_parameters": {"rope_type": "default", "rope_theta": 250.0}}, False),
    "gemma": (GemmaConfig, GemmaForCausalLM,
              {**BASE, "head_dim": 16, "num_key_value_heads": 1, "tie_word_embeddings": True,
               "hidden_act": "gelu_pytorch_tanh"}, True),
    "gemma2": (Gemma2Config, Gemma2ForCausalLM,
               {**BASE, "num_hidden_layers": 3, "head_dim": 16, "tie_word_embeddings": True, "sliding_window": 4,
                "attn_logit_softcapping": 2.0, "final_logit_softcapping": 15.0, "query_pre_attn_scalar": 24}, True),
    "gemma3": (Gemma3TextConfig, Gemma3ForCausalLM,
               {**BASE, "num_hidden_layers": 3, "head_dim": 16, "tie_word_embeddings": True, "sliding_window": 4,
                "query_pre_attn_scalar": 12, "final_logit_softcapping": 20.0,
                "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
                "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000.0},
                                    "sliding_attention": {"rope_type": "default", "rope_theta": 50.0}}}, True),
    # Mixture of experts: every layer sparse, top-2 of 4, renormalised (Mixtral always is)
    "mixtral": (MixtralConfig, MixtralForCausalLM,
                {**BASE, "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": None}, False),
    # Qwen3-MoE: a dense layer among sparse ones (mlp_only_layers), top-3 of 6 renormalised,
    # expert width 24 != intermediate_size 48, attention biases
    "qwen3_moe": (Qwen3MoeConfig, Qwen3MoeForCausalLM,
                  {**BASE, "num_hidden_layers": 3, "head_dim": 16, "num_experts": 6, "num_experts_per_tok": 3,
                   "moe_intermediate_size": 24, "norm_topk_prob": True, "mlp_only_layers": [1],
                   "attention_bias": True}, False),
    # Qwen3-MoE: every second layer sparse (decoder_sparse_step 2), top-2 of 4 NOT renormalised;
    # config.json rewritten as the Hub's checkpoints have it (CONFIG_EDITS)
    "qwen3_moe_step": (Qwen3MoeConfig, Qwen3MoeForCausalLM,
                       {**BASE, "num_hidden_layers": 2, "head_dim": 8, "num_experts": 4, "num_experts_per_tok": 2,
                        "moe_intermediate_size": 16, "norm_topk_prob": False, "decoder_sparse_step": 2}, False),
    # Qwen2-MoE: a sigmoid-gated shared expert in every sparse layer, q/k/v biases, a dense layer
    # (mlp_only_layers), and its window rule (even layers below max_window_layers slide: layer 0)
    "qwen2_moe_window": (Qwen2MoeConfig, Qwen2MoeForCausalLM,
                         {**BASE, "num_hidden_layers": 3, "num_experts": 4, "num_experts_per_tok": 2,
                          "moe_intermediate_size": 16, "shared_expert_intermediate_size": 40,
                          "norm_topk_prob": False, "mlp_only_layers": [1], "use_sliding_window": True,
                          "sliding_window": 5, "max_window_layers": 2}, False),
    # GPT-OSS: attention sinks, q/k/v/o biases, sliding (window 5) / full layers by layer_types,
    # yarn rope, a router with a bias, fused interleaved gate/up experts with biases and the
    # clamped SwiGLU (limit 1.0 so that both clamps bind on these random weights)
    "gpt_oss": (GptOssConfig, GptOssForCausalLM,
                {**BASE, "num_hidden_layers": 3, "head_dim": 8, "intermediate_size": 16, "num_local_experts": 4,
                 "num_experts_per_tok": 2, "sliding_window": 5, "swiglu_limit": 1.0,
                 "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 500.0, "beta_fast": 8.0,
                                     "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 8}},
                False),
    # GPT-OSS as published: experts in MXFP4 (MXFP4 below), 2 blocks of 32 per row, alpha and
    # limit off their defaults, explicit layer_types (full first), top-3 of 4
    "gpt_oss_mxfp4": (GptOssConfig, GptOssForCausalLM,
                      {**BASE, "hidden_size": 64, "num_hidden_layers": 2, "head_dim": 16, "intermediate_size": 32,
                       "num_local_experts": 4, "num_experts_per_tok": 3, "sliding_window": 6, "swiglu_alpha": 1.5,
                       "swiglu_limit": 2.0, "layer_types": ["full_attention", "sliding_attention"],
                       "rope_parameters": {"rope_type": "yarn", "factor": 2.0, "rope_theta": 1000.0,
                                           "original_max_position_embeddings": 16}}, False),
    # OLMo-2: post-norm blocks (no pre-norms), q/k norms over the whole projection, GQA
    "olmo2": (Olmo2Config, Olmo2ForCausalLM,
              {**BASE, "num_hidden_layers": 3, "rope_parameters": {"rope_type": "default", "rope_theta": 500.0}},
              False),
    # Granite 3.x: the four multipliers off 1 (attention_multiplier replaces head_dim^-1/2), tied
    "granite": (GraniteConfig, GraniteForCausalLM,
                {**BASE, "tie_word_embeddings": True, "embedding_multiplier": 2.5, "residual_multiplier": 0.4,
                 "attention_multiplier": 0.3, "logits_scaling": 3.0,
                 "rope_parameters": {"rope_type": "default", "rope_theta": 300.0}}, False),
    # SmolLM3: every 2nd layer without rope, and those layers slide (window 5); config.json
    # without the derived no_rope_layers / layer_types (CONFIG_EDITS): the reader derives them
    "smollm3_window": (SmolLM3Config, SmolLM3ForCausalLM,
                       {**BASE, "num_hidden_layers": 4, "no_rope_layer_interval": 2, "use_sliding_window": True,
                        "sliding_window": 5, "tie_word_embeddings": True,
                        "rope_parameters": {"rope_type": "default", "rope_theta": 1000.0}}, False),
    # OLMoE: whole-projection q/k norms, clip_qkv (1.5: binds on these weights), top-3 of 6 of the
    # softmax, not renormalised
    "olmoe": (OlmoeConfig, OlmoeForCausalLM,
              {**BASE, "intermediate_size": 24, "num_experts": 6, "num_experts_per_tok": 3, "norm_topk_prob": False,
               "clip_qkv": 1.5}, False),
    # Granite-MoE: Granite's multipliers, stacked experts (input_linear / output_linear), top-2 of 4
    "granite_moe": (GraniteMoeConfig, GraniteMoeForCausalLM,
                    {**BASE, "intermediate_size": 16, "num_local_experts": 4, "num_experts_per_tok": 2,
                     "embedding_multiplier": 1.5, "residual_multiplier": 0.6, "attention_multiplier": 0.2,
                     "logits_scaling": 2.0}, False),
    # ERNIE 4.5: interleaved rotary pairs over the whole head, use_bias (q/k/v/o and MLP biases), tied
    "ernie4_5": (Ernie4_5Config, Ernie4_5ForCausalLM,
                 {**BASE, "head_dim": 8, "use_bias": True, "tie_word_embeddings": True,
                  "rope_parameters": {"rope_type": "default", "rope_theta": 500.0}}, False),
    # GLM-4-0414: sandwich norms (GLM's names), fused gate_up_proj, q/k/v biases (no o bias),
    # interleaved rotary pairs on half of each head (partial_rotary_factor 0.5: the class default)
    "glm4": (Glm4Config, Glm4ForCausalLM,
             {**BASE, "head_dim": 8, "rope_parameters": {"rope_type": "default", "rope_theta": 700.0}}, False),
    # EXAONE 4: post-norm blocks, per-head q/k norms; layers 0 and 2 slide (window 5), 1 and 3 are
    # global without rope (sliding_window_pattern 2; config.json keeps transformers' layer_types)
    "exaone4_window": (Exaone4Config, Exaone4ForCausalLM,
                       {**BASE, "num_hidden_layers": 4, "sliding_window": 5, "sliding_window_pattern": 2,
                        "rope_parameters": {"rope_type": "default", "rope_theta": 800.0}}, False),
    # GLM-4.5: layer 0 dense (first_k_dense_replace 1), then 8 routed experts in 4 groups, 2 groups
    # compete, top-3 by sigmoid + e_score_correction_bias, renormalised, times 2.5; two shared
    # experts (one MLP 2 x 16 wide); q/k norms, q/k/v biases, rope on half of each head (the class
    # default 0.5, rotate-half pairs); an MTP layer (MTP: the target never reads it)
    "glm4_moe": (Glm4MoeConfig, Glm4MoeForCausalLM,
                 {**BASE, "num_hidden_layers": 3, "head_dim": 8, "n_routed_experts": 8, "num_experts_per_tok": 3,
                  "moe_intermediate_size": 16, "n_shared_experts": 2, "n_group": 4, "topk_group": 2,
                  "first_k_dense_replace": 1, "routed_scaling_factor": 2.5, "norm_topk_prob": True,
                  "use_qk_norm": True, "attention_bias": True, "num_nextn_predict_layers": 1,
                  "rope_parameters": {"rope_type": "default", "rope_theta": 600.0}}, False),
    # GLM-4.5 routing without groups: every layer sparse, top-2 of 6 NOT renormalised, no shared
    # expert, no q/k norms or biases, the whole head rotated (partial_rotary_factor 1.0)
    "glm4_moe_flat": (Glm4MoeConfig, Glm4MoeForCausalLM,
                      {**BASE, "n_routed_experts": 6, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                       "n_shared_experts": 0, "first_k_dense_replace": 0, "norm_topk_prob": False,
                       "routed_scaling_factor": 0.75, "partial_rotary_factor": 1.0,
                       "rope_parameters": {"rope_type": "default", "rope_theta": 900.0}}, False),
    # DeepSeek-V3: latent attention (q through a rank-12 latent, kv through rank 10; heads of rope 4 +
    # nope 6, values 5 wide), interleaved rope pairs, yarn with mscale != mscale_all_dim (the softmax
    # scale times mscale^2); GLM-4.5's routing (8 experts in 4 groups, 2 compete, top 3, scaling 2.5),
    # layer 0 dense, one shared expert; an MTP layer in the checkpoint (MTP)
    "deepseek_v3": (DeepseekV3Config, DeepseekV3ForCausalLM,
                    {**BASE, "num_hidden_layers": 3, "num_key_value_heads": 4, "q_lora_rank": 12, "kv_lora_rank": 10,
                     "qk_rope_head_dim": 4, "qk_nope_head_dim": 6, "v_head_dim": 5, "n_routed_experts": 8,
                     "num_experts_per_tok": 3, "moe_intermediate_size": 16, "n_shared_experts": 1, "n_group": 4,
                     "topk_group": 2, "first_k_dense_replace": 1, "routed_scaling_factor": 2.5,
                     "num_nextn_predict_layers": 1,
                     "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "mscale": 0.8, "mscale_all_dim": 0.6,
                                         "original_max_position_embeddings": 8, "rope_theta": 500.0,
                                         "beta_fast": 8.0, "beta_slow": 1.0}}, False),
    # DeepSeek-V3 without the q latent (q_proj), rotate-half rope (rope_interleave false), attention
    # biases on kv_a and o, values wider than the nope part (8 > 6), plain rope; every layer sparse,
    # no groups, top-2 of 4 not renormalised; rms_norm_eps 0.3, which the q_a / kv_a norms must NOT
    # use (their eps is DeepseekV3RMSNorm's default 1e-6)
    "deepseek_v3_plain": (DeepseekV3Config, DeepseekV3ForCausalLM,
                          {**BASE, "num_key_value_heads": 4, "rms_norm_eps": 0.3, "q_lora_rank": None, "kv_lora_rank": 12,
                           "qk_rope_head_dim": 6, "qk_nope_head_dim": 6, "v_head_dim": 8, "rope_interleave": False,
                           "attention_bias": True, "n_routed_experts": 4, "num_experts_per_tok": 2,
                           "moe_intermediate_size": 16, "n_shared_experts": 1, "n_group": 1, "topk_group": 1,
                           "first_k_dense_replace": 0, "norm_topk_prob": False, "routed_scaling_factor": 1.5,
                           "rope_parameters": {"rope_type": "default", "rope_theta": 700.0}}, False),
    # DeepSeek-V2-Lite's form: latent attention with q_proj, interleaved (complex) rope, yarn with
    # mscale = mscale_all_dim (softmax scale times mscale^2); softmax routing, greedy top-3 of 8, weights
    # times 1.7 (never renormalised), two shared experts, layer 0 dense
    "deepseek_v2_lite": (DeepseekV2Config, DeepseekV2ForCausalLM,
                         {**BASE, "num_hidden_layers": 3, "num_key_value_heads": 4, "q_lora_rank": None,
                          "kv_lora_rank": 10, "qk_rope_head_dim": 4, "qk_nope_head_dim": 6, "v_head_dim": 6,
                          "n_routed_experts": 8, "num_experts_per_tok": 3, "moe_intermediate_size": 12,
                          "n_shared_experts": 2, "first_k_dense_replace": 1, "topk_method": "greedy",
                          "routed_scaling_factor": 1.7,
                          "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "mscale": 0.707,
                                              "mscale_all_dim": 0.707, "original_max_position_embeddings": 8,
                                              "rope_theta": 400.0, "beta_fast": 8.0, "beta_slow": 1.0}}, False),
    # DeepSeek-V2's grouped routing: group_limited_greedy, 8 experts in 4 groups (score: the group's
    # maximum), 2 compete, top-3, scaling 2.0; the q latent, attention biases, every layer sparse
    "deepseek_v2_grouped": (DeepseekV2Config, DeepseekV2ForCausalLM,
                            {**BASE, "num_key_value_heads": 4, "q_lora_rank": 12, "kv_lora_rank": 8,
                             "qk_rope_head_dim": 4, "qk_nope_head_dim": 4, "v_head_dim": 6, "attention_bias": True,
                             "n_routed_experts": 8, "num_experts_per_tok": 3, "moe_intermediate_size": 16,
                             "n_shared_experts": 1, "first_k_dense_replace": 0, "topk_method": "group_limited_greedy",
                             "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.0,
                             "rope_parameters": {"rope_type": "default", "rope_theta": 650.0}}, False),
}

# DeepSeek-V3 as its published FP8 checkpoint (FP8 below), 2 x 2 blocks so every matrix of the
# tiny latent attention splits into whole blocks (transformers' dequantizer needs them): q_a, q_b,
# kv_a, kv_b (read row by row by the absorbed attention), o, the dense and shared MLPs
VARIANTS["deepseek_v3_fp8"] = (DeepseekV3Config, DeepseekV3ForCausalLM,
                               {**VARIANTS["deepseek_v3"][2], "num_nextn_predict_layers": 0}, False)

# Variants whose checkpoint also carries num_nextn_predict_layers MTP layers after the decoder
# layers (as GLM-4.5's and DeepSeek-V3's do: model.layers.<num_hidden_layers>.*): transformers and
# specdec's target loader ignore them; specdec's MTP drafter reads them (add_mtp_layer writes its
# reference).
MTP = {"glm4_moe", "deepseek_v3"}

# Variants saved with their experts quantized to MXFP4 as the published gpt-oss checkpoints are.
MXFP4 = {"gpt_oss_mxfp4"}

# Variants saved with fine-grained FP8 weights (DeepSeek-V3 / Qwen3-FP8 / GLM-4.5-FP8 style:
# quantization_config quant_method "fp8", weight_block_size) and the block size used.
FP8 = {"qwen3_fp8": (16, 16), "deepseek_v3_fp8": (2, 2)}
FP8_MAX = 448.0  # float8_e4m3fn's largest finite value


def hub_qwen_moe_config(cfg):
    """Qwen3-MoE checkpoints on the Hub name the expert count num_experts (transformers 5 saves
    num_local_experts) and carry max_window_layers, which Qwen3-MoE ignores."""
    cfg["num_experts"] = cfg.pop("num_local_experts")
    cfg["max_window_layers"] = 1
    return cfg


def without_layer_types(cfg):
    """As Qwen1.5-MoE / Qwen2-MoE checkpoints on the Hub: no layer_types (transformers 5 writes the
    list it derived), so the reader must derive the windows from use_sliding_window itself."""
    del cfg["layer_types"]
    return cfg


def without_derived_layers(cfg):
    """SmolLM3Config derives no_rope_layers (from no_rope_layer_interval) and layer_types (the
    layers without rope slide when use_sliding_window); drop both so the reader derives them."""
    del cfg["no_rope_layers"], cfg["layer_types"]
    return cfg


# name -> an edit of the saved config.json (the model and its logits are unchanged by it)
CONFIG_EDITS = {"qwen3_moe_step": hub_qwen_moe_config, "qwen2_moe_window": without_layer_types,
                "smollm3_window": without_derived_layers}


# ---- MXFP4 (OCP Microscaling FP4): written here from the format's definition, independently of
# transformers' reader, so that loading the result with transformers cross-checks both sides.
# A block is 32 consecutive values of a row (of the nn.Linear layout [out, in]); it stores
# one E8M0 scale byte s (2^(s - 127)) and 32 E2M1 codes, two per byte, the even element in
# the low nibble. E2M1 code c: sign bit 3, magnitude E2M1_VALUES[c & 7].
E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def mxfp4_quantize(w):
    """w [..., rows, cols] (cols % 32 == 0) -> (blocks uint8 [..., rows, cols/32, 16],
    scales uint8 [..., rows, cols/32], the dequantized values as float64)."""
    w = np.asarray(w, dtype=np.float64)
    *lead, rows, cols = w.shape
    b = w.reshape(*lead, rows, cols // 32, 32)
    amax = np.abs(b).max(axis=-1)
    # the smallest power of two that brings the block's largest magnitude within 6
    e = np.where(amax > 0, np.ceil(np.log2(np.maximum(amax, 1e-300) / 6.0)), -127).clip(-127, 127)
    scaled = b / np.exp2(e)[..., None]
    mag = np.abs(scaled)
    code = np.abs(mag[..., None] - E2M1_VALUES).argmin(axis=-1)  # nearest magnitude (ties: the smaller)
    code = code + 8 * (scaled < 0)
    deq = np.where(code >= 8, -1.0, 1.0) * E2M1_VALUES[code & 7] * np.exp2(e)[..., None]
    packed = (code[..., 0::2] | (code[..., 1::2] << 4)).astype(np.uint8)
    return packed, (e + 127).astype(np.uint8), deq.reshape(w.shape)


def mxfp4_experts(model):
    """Quantize every layer's experts in place (the model then computes with the dequantized
    values) and return the checkpoint tensors that replace gate_up_proj / down_proj."""
    out = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not (name.endswith("mlp.experts.gate_up_proj") or name.endswith("mlp.experts.down_proj")):
                continue
            lin = p.detach().double().numpy().transpose(0, 2, 1)  # [E, out, in] (nn.Linear layout)
            blocks, scales, deq = mxfp4_quantize(lin)
            p.copy_(torch.from_numpy(deq.transpose(0, 2, 1).copy()))
            out[name + "_blocks"] = torch.from_numpy(np.ascontiguousarray(blocks))
            out[name + "_scales"] = torch.from_numpy(np.ascontiguousarray(scales))
    return out


def fp8_linears(model):
    """The decoder layers' projections (what the published FP8 checkpoints quantize; embeddings, norms,
    lm_head stay as they are)."""
    return [(n, p) for n, p in model.named_parameters()
            if ".layers." in n and n.endswith("proj.weight") and p.dim() == 2]


def fp8_quantize(w, bm, bn, scale_dtype=torch.float32):
    """w [out, in] -> (float8_e4m3fn codes [out, in], weight_scale_inv [ceil(out/bm), ceil(in/bn)] in
    scale_dtype, the dequantized float32 weights): per block scale = absmax / 448 (rounded to scale_dtype),
    codes = round(w / scale) (at most 448 in magnitude)."""
    rows, cols = w.shape
    sr, sc = -(-rows // bm), -(-cols // bn)
    scale = torch.zeros(sr, sc, dtype=torch.float32)
    codes = torch.zeros(rows, cols, dtype=torch.float8_e4m3fn)
    deq = torch.zeros(rows, cols, dtype=torch.float32)
    for i in range(sr):
        for j in range(sc):
            blk = w[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn].double()
            s_ = float(blk.abs().max()) / FP8_MAX or 1.0
            scale[i, j] = torch.tensor(s_).to(scale_dtype).float()
            q = (blk / scale[i, j].double()).clamp(-FP8_MAX, FP8_MAX).float().to(torch.float8_e4m3fn)
            codes[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn] = q
            deq[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn] = q.float() * scale[i, j]
    return codes, scale.to(scale_dtype), deq


def fp8_weights(model, bm, bn):
    """Quantize the model's projections in place (their values become the dequantized ones, so the
    reference logits are those of the FP8 weights); returns {name: (codes, scale_inv)}."""
    out = {}
    with torch.no_grad():
        for n, p in fp8_linears(model):
            codes, scale, deq = fp8_quantize(p.detach(), bm, bn)
            p.copy_(deq)
            out[n] = (codes, scale)
    return out


def save_fp8(name, model, d):
    """Rewrite the saved projections as float8_e4m3fn codes + weight_scale_inv and declare
    quantization_config as the published FP8 checkpoints do."""
    bm, bn = FP8[name]
    packed = fp8_weights(model, bm, bn)  # already FP8 values: re-quantizing gives the same codes
    path = os.path.join(d, "model.safetensors")
    sd = load_file(path)
    for n, (codes, scale) in packed.items():
        sd[n] = codes
        sd[n + "_scale_inv"] = scale
    save_file(sd, path, metadata={"format": "pt"})
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                  "weight_block_size": [bm, bn]}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def logits_diff(hf, ids, logits):
    """Max |logit| difference between transformers' model hf on the prompt ids and the reference logits."""
    with torch.no_grad():
        return np.abs(hf(input_ids=torch.from_numpy(ids[None].astype(np.int64))).logits[0].float().numpy()
                      - logits).max()


def require_logits(d, hf, ids, logits, what):
    """logits_diff, which must be within 1e-5 (else the script stops naming `what`)."""
    err = logits_diff(hf, ids, logits)
    if err > 1e-5:
        sys.exit(f"{d}: transformers' {what} differs from the reference logits by {err:g}")
    return err


def check_fp8(d, model, ids, logits):
    """transformers' own fine-grained FP8 reader, dequantizing on the CPU, must give back exactly the
    weights this script wrote and the same logits."""
    from transformers import FineGrainedFP8Config
    hf = type(model).from_pretrained(d, dtype=torch.float32, attn_implementation="eager",
                                     quantization_config=FineGrainedFP8Config(dequantize=True)).eval()
    mine = dict(model.named_parameters())
    for n, p in hf.named_parameters():
        if n in mine and not torch.equal(p.detach().float(), mine[n].detach().float()):
            sys.exit(f"{d}: transformers reads {n} differently from the FP8 this script wrote")
    err = require_logits(d, hf, ids, logits, "dequantized FP8 model")
    print(f"{os.path.basename(d)}: transformers' FP8 reader gives the same weights and logits (max diff {err:.1e})")


# ---- GPTQ / AWQ 4-bit (weight-only, group-wise): written here from the formats' definitions; check_int4
# reads the result back with transformers' GPTQ / AWQ loaders (gptqmodel's kernels on the CPU). Each decoder
# projection of nn.Linear layout [out, in] becomes codes q(o, i) in 0..15, and per (group, output) a float16
# scale s and a zero z in 0..15; the weight is float32(s[g(i), o]) * (q(o, i) - z[g(i), o]), exact in float32.
# GPTQ (b = bits 4 or 8, f = 32 / b codes a word): qweight int32 [in/f, out] (bits bk..bk+b-1 of word [r, o]:
# input fr + k), qzeros int32 [groups, out/f] (field k of word [g, c]: output fc + k), scales float16 [groups, out],
# g_idx int32 [in] (the group of each input). Codes and zeros are 0..2^b - 1. checkpoint_format "gptq" (v1, also
# when the key is absent) stores each zero minus one: (z - 1) & (2^b - 1).
# AWQ GEMM: qweight int32 [in, out/8] and qzeros int32 [groups, out/8] with the outputs of a word interleaved
# (nibble k holds output 8c + AWQ_ORDER[k]), zeros stored as they are, scales float16 [groups, out], no g_idx.
# name -> the checkpoint's quantization_config
INT4 = {
    # sym: every zero 8
    "llama_gptq": {"quant_method": "gptq", "bits": 4, "group_size": 16, "desc_act": False, "sym": True,
                   "checkpoint_format": "gptq", "lm_head": False, "damp_percent": 0.01, "true_sequential": True,
                   "static_groups": False},
    # act-order: input i belongs to group perm[i] // 16 for a random permutation (g_idx not monotonic);
    # asymmetric zeros 0..15 (stored 15 and 14 included), no checkpoint_format (v1)
    "qwen2_gptq_actorder": {"quant_method": "gptq", "bits": 4, "group_size": 16, "desc_act": True, "sym": False,
                            "damp_percent": 0.01, "true_sequential": True},
    # layer 1's MLP left in float32 (modules_to_not_convert): both kinds of projection in one checkpoint
    "qwen3_awq": {"quant_method": "awq", "bits": 4, "group_size": 16, "zero_point": True, "version": "gemm",
                  "modules_to_not_convert": ["model.layers.1.mlp"]},
    # Phi-3's fused projections, asymmetric (v1 zeros), groups in order
    "phi3_gptq": {"quant_method": "gptq", "bits": 4, "group_size": 16, "desc_act": False, "sym": False,
                  "checkpoint_format": "gptq", "lm_head": False, "damp_percent": 0.01, "true_sequential": True,
                  "static_groups": False},
    # 8 bits: asymmetric zeros 0..255 (stored 255 and 254 included), groups in order
    "qwen2_gptq_int8": {"quant_method": "gptq", "bits": 8, "group_size": 16, "desc_act": False, "sym": False,
                        "checkpoint_format": "gptq", "lm_head": False, "damp_percent": 0.01, "true_sequential": True,
                        "static_groups": False},
}
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def int4_linears(model, qcfg):
    """The projections a 4-bit checkpoint quantizes: fp8_linears less modules_to_not_convert."""
    skip = tuple(m + "." for m in qcfg.get("modules_to_not_convert") or ())
    return [(n, p) for n, p in fp8_linears(model) if not n.startswith(skip)]


def int4_quantize(w, qcfg, rng):
    """w [out, in] -> (q [out, in], z [groups, out], float16 scales [groups, out], g_idx [in], the dequantized
    float32 weights), with m = 2^bits - 1: sym: z = (m + 1) / 2 and s = absmax / (m / 2); otherwise z is drawn
    in 0..m (one 0 and one m at least) and s = absmax / max(z, m - z), so that the codes span the group's values
    on z's side."""
    rows, cols = w.shape
    gs = qcfg["group_size"]
    groups = cols // gs
    maxq = (1 << qcfg["bits"]) - 1
    g_idx = (rng.permutation(cols) if qcfg.get("desc_act") else np.arange(cols)) // gs
    if qcfg.get("sym"):
        z = np.full((groups, rows), (maxq + 1) // 2)
        span = np.full((groups, rows), maxq / 2)
    else:
        z = rng.integers(0, maxq + 1, (groups, rows))
        z.flat[rng.choice(z.size, 2, replace=False)] = (0, maxq)
        span = np.maximum(z, maxq - z).astype(np.float64)
    wd = w.double().numpy()
    amax = np.stack([np.abs(wd[:, g_idx == g]).max(axis=1) for g in range(groups)])  # [groups, out]
    scale = (amax / span).astype(np.float16)
    s_oi = scale.astype(np.float32)[g_idx].T  # [out, in]
    z_oi = z[g_idx].T
    q = np.clip(np.rint(wd / s_oi) + z_oi, 0, maxq).astype(np.int64)
    deq = s_oi * (q - z_oi).astype(np.float32)  # float32 throughout: exact
    return q, z, scale, g_idx, deq


def pack_fields(v, axis, bits=4):
    """Values 0..2^bits - 1 -> int32 words along `axis`: element fc + k of that axis (f = 32 / bits) in bits
    bits * k .. bits * (k + 1) - 1 of word c."""
    f = 32 // bits
    v = np.moveaxis(np.asarray(v), axis, -1)
    v = v.reshape(*v.shape[:-1], v.shape[-1] // f, f).astype(np.uint32)
    words = np.bitwise_or.reduce(v << (bits * np.arange(f, dtype=np.uint32)), axis=-1)
    return torch.from_numpy(np.ascontiguousarray(np.moveaxis(words, -1, axis)).view(np.int32))


def int4_weights(model, qcfg, seed):
    """Quantize the model's projections in place (their values become the dequantized ones, so the reference
    logits are those of the 4- / 8-bit weights); returns {module name: {tensor suffix: checkpoint tensor}}."""
    rng = np.random.default_rng(5000 + seed)
    out = {}
    with torch.no_grad():
        for n, p in int4_linears(model, qcfg):
            q, z, scale, g_idx, deq = int4_quantize(p.detach(), qcfg, rng)
            p.copy_(torch.from_numpy(deq))
            if qcfg["quant_method"] == "awq":
                cols = (8 * np.arange(q.shape[0] // 8)[:, None] + np.array(AWQ_ORDER)).ravel()
                t = {"qweight": pack_fields(q.T[:, cols], 1), "qzeros": pack_fields(z[:, cols], 1)}
            else:  # v1 zeros (INT4's GPTQ variants are all checkpoint_format "gptq")
                bits = qcfg["bits"]
                t = {"qweight": pack_fields(q.T, 0, bits), "qzeros": pack_fields((z - 1) & ((1 << bits) - 1), 1, bits),
                     "g_idx": torch.from_numpy(g_idx.astype(np.int32))}
            t["scales"] = torch.from_numpy(scale)
            out[n[:-len(".weight")]] = t
    return out


def save_int4(name, model, d):
    """Replace the saved projections' weights by their 4-bit tensors (int4_weights' result, kept by build)
    and declare the variant's quantization_config."""
    path = os.path.join(d, "model.safetensors")
    sd = load_file(path)
    for mod, tensors in model.int4_tensors.items():
        del sd[mod + ".weight"]
        sd.update({f"{mod}.{k}": v for k, v in tensors.items()})
    save_file(sd, path, metadata={"format": "pt"})
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = INT4[name]
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def unpack_fields(words, axis, bits):
    """pack_fields' inverse, this script's own reading of the layout: int32 words -> values 0..2^bits - 1 along
    `axis` (element fc + k from bits bits * k .. of word c)."""
    f = 32 // bits
    v = np.moveaxis(words.numpy().view(np.uint32), axis, -1)
    v = (v[..., None] >> (bits * np.arange(f, dtype=np.uint32))) & ((1 << bits) - 1)
    return np.moveaxis(v.reshape(*v.shape[:-2], -1).astype(np.int64), -1, axis)


def gptq_decode(d, saved, mine, mods, bits, gs):
    """A GPTQ checkpoint's tensors, decoded by this script's own unpack_fields: names, dtypes and shapes as the
    comment above INT4 says, g_idx as the weights were drawn with it, float32(scale) * (q - ((stored + 1) & m))
    the weights written. Returns the stored zero fields seen."""
    f, maxq = 32 // bits, (1 << bits) - 1
    zeros = set()
    for mod in mods:
        rows, cols = mine[mod + ".weight"].shape
        want = {"qweight": (torch.int32, (cols // f, rows)), "qzeros": (torch.int32, (cols // gs, rows // f)),
                "scales": (torch.float16, (cols // gs, rows)), "g_idx": (torch.int32, (cols,))}
        got = {k[len(mod) + 1:]: v for k, v in saved.items() if k.startswith(mod + ".") and not k.endswith(".bias")}
        if {k: (v.dtype, tuple(v.shape)) for k, v in got.items()} != want:
            sys.exit(f"{d}: {mod} is saved as {[(k, v.dtype, tuple(v.shape)) for k, v in got.items()]}")
        g_idx = got["g_idx"].numpy().astype(np.int64)
        stored = unpack_fields(got["qzeros"], 1, bits)  # [groups, out]
        zeros |= set(stored.ravel().tolist())
        z_oi = ((stored + 1) & maxq)[g_idx].T
        s_oi = got["scales"].numpy().astype(np.float32)[g_idx].T
        w = torch.from_numpy(s_oi * (unpack_fields(got["qweight"], 0, bits).T - z_oi).astype(np.float32))
        if not torch.equal(w, mine[mod + ".weight"]):
            sys.exit(f"{d}: {mod}'s saved tensors decode to other weights than those written")
    return zeros


def check_int4(d, model, ids, logits, qcfg):
    """Read the checkpoint back with transformers' own GPTQ / AWQ loader (gptqmodel's torch kernels on the CPU):
    every 4- / 8-bit module, dequantized in float32 by gptqmodel, must equal the weights this script wrote, every
    other parameter must be as saved, and the forward must give the same logits. GPTQ: TorchLinear's
    dequantize_weight, its zeros converted from v1 by gptqmodel's _correct_gptq_v1_qzeros ((stored + 1) & m
    per field, m = 2^bits - 1). transformers' own load converts them with a packed-word add (+0x11111111,
    8 bits: +0x01010101), which carries a stored m (z = 0) into the next output's zero: the check requires that
    to differ exactly in those words, then puts the per-field zeros in. The saved tensors are also decoded
    by this script's own code (gptq_decode). AWQ: packing_utils.dequantize_gemm on the loaded qweight / qzeros /
    scales. gptqmodel holds a 4-bit module's bias in float16 (here: the float32 one put back after checking
    that it is the same, rounded)."""
    from gptqmodel.quantization.awq.utils.packing_utils import dequantize_gemm
    from gptqmodel.utils.model_dequant import _correct_gptq_v1_qzeros
    from transformers import AwqConfig, GPTQConfig
    torch._dynamo.config.disable = True  # gptqmodel compiles its kernels: plain eager code here
    # gptqmodel's plain torch kernels (dequantize_weight, then a float matmul): its fused CPU kernel
    # (aten _weight_int4pack_mm) takes groups of 32 and more only
    awq = qcfg["quant_method"] == "awq"
    load = AwqConfig(backend="torch_awq") if awq else GPTQConfig(bits=qcfg["bits"], backend="torch")
    hf = type(model).from_pretrained(d, dtype=torch.float32, attn_implementation="eager", device_map="cpu",
                                     quantization_config=load).eval()
    saved = load_file(os.path.join(d, "model.safetensors"))
    mine = dict(model.named_parameters())
    n_int4 = carried = 0
    bits, maxq = qcfg["bits"], (1 << qcfg["bits"]) - 1
    if not awq:
        zeros = gptq_decode(d, saved, mine, model.int4_tensors, bits, qcfg["group_size"])
    as_loaded = logits_diff(hf, ids, logits)
    with torch.no_grad():
        for n, mod in list(hf.named_modules()):
            if not hasattr(mod, "qweight"):
                continue
            mod.scales = mod.scales.float()  # float16 * code is exact in float32, not in float16
            bias = None
            if mod.bias is not None:  # gptqmodel keeps it in a float16 buffer: the saved float32 one put back
                bias = saved[n + ".bias"]
                if not (torch.equal(bias, mine[n + ".bias"]) and torch.equal(mod.bias, bias.to(mod.bias.dtype))):
                    sys.exit(f"{d}: transformers reads {n}.bias differently from what this script wrote")
                mod.bias = bias
            if awq:
                w = dequantize_gemm(mod.qweight, mod.qzeros, mod.scales, qcfg["bits"], qcfg["group_size"])
                # its kernel computes in float16 whatever the input: a float32 Linear of its weights instead
                lin = torch.nn.Linear(w.shape[0], w.shape[1], bias=bias is not None)
                lin.weight.copy_(w.T)
                if bias is not None:
                    lin.bias.copy_(bias)
                parent, child = n.rsplit(".", 1)
                setattr(hf.get_submodule(parent), child, lin)
            else:
                stored = saved[n + ".qzeros"]
                per_field = _correct_gptq_v1_qzeros(stored.clone(), bits)
                low_max = (unpack_fields(stored, 1, bits).reshape(*stored.shape, 32 // bits)[..., :-1]
                           == maxq).any(-1)  # a stored m below the top field: the packed add carries
                if not np.array_equal((mod.qzeros != per_field).numpy(), low_max):
                    sys.exit(f"{d}: transformers' v1 zeros of {n} differ from (stored + 1) & {maxq} elsewhere than "
                             f"after a stored {maxq}")
                carried += int(low_max.sum())
                mod.qzeros.copy_(per_field)
                mod.clear_weight_cache()
                w = mod.dequantize_weight()
            diff = (w.T.float() - mine[n + ".weight"]).abs()
            if diff.max() != 0:
                bad = diff.nonzero()
                sys.exit(f"{d}: gptqmodel dequantizes {n} differently from what this script wrote at {len(bad)} of "
                         f"{diff.numel()} places, e.g. [out, in] {bad[:4].tolist()}")
            n_int4 += 1
        if n_int4 != len(model.int4_tensors):
            sys.exit(f"{d}: transformers loaded {n_int4} {bits}-bit modules, this script wrote "
                     f"{len(model.int4_tensors)}")
        for n, p in hf.named_parameters():
            if n in mine and not torch.equal(p.detach().float(), mine[n].detach()):
                sys.exit(f"{d}: transformers reads {n} differently from what this script wrote")
    err = require_logits(d, hf, ids, logits, f"{qcfg['quant_method']} model")
    own = "" if awq else f"decoded here (stored zeros {min(zeros)}..{max(zeros)}, {len(zeros)} values) and "
    print(f"{os.path.basename(d)}: {own}gptqmodel dequantizes the {n_int4} {bits}-bit modules transformers loaded "
          f"exactly as written, other weights and logits the same (max diff {err:.1e}; as loaded, with its float16 "
          f"parts"
          f"{' and carried zeros (' + str(carried) + ' words)' if carried else ''}: {as_loaded:.1e})")


# ---- compressed-tensors pack-quantized 4-bit (llm-compressor's W4A16; weight-only, group-wise) and 8-bit
# (W8A16: a scale per output row, strategy "channel"). The codes and scales are drawn here; compressed-tensors'
# own PackedQuantizationCompressor packs them and its ModelCompressor writes quantization_config; check_ct
# decodes the tensors by the layout below with this script's own code, then reads the checkpoint back with
# transformers' compressed-tensors loader. Each quantized projection (nn.Linear layout [out, in]) has signed
# b-bit codes q(o, i) in -2^(b-1)..2^(b-1) - 1 (b = num_bits 4 or 8, f = 32 / b codes a word) and per (output,
# group of G inputs: 16, or all of them for "channel") a bfloat16 scale s and a signed zero z in the same range
# (0 when symmetric); its weight is float32(s[o, i / G]) * (q(o, i) - z[o, i / G]), exact in float32. Tensors of
# projection P:
#   P.weight_packed      int32 [out, in/f]: code of input fj + k in bits bk..bk+b-1 of word [o, j], as
#                        q + 2^(b-1)
#   P.weight_scale       bfloat16 [out, in/G]
#   P.weight_zero_point  int32 [out/f, in/G] (asymmetric only), packed along the OUTPUT dim: zero of output
#                        fw + k in bits bk..bk+b-1 of word [w, g], as z + 2^(b-1)
#   P.weight_shape       int64 [2] = [out, in]
# compressed-tensors 0.20.1 has no g_idx: actorder "group" (llm-compressor's old weight_g_idx checkpoints)
# is rejected by its config validator and nothing reads weight_g_idx; actorder "weight" changes only how
# GPTQ calibrates, not the format. name -> the scheme's settings (num_bits 4 and group size 16 unless given)
# and `ignore`.
CT = {
    "llama_ct_w4a16": {"symmetric": True, "actorder": None, "ignore": ["lm_head"]},
    # zeros -8..7 (both ends at least once, so every stored nibble occurs); layer 1's o_proj stays float32
    "qwen3_ct_w4a16_asym": {"symmetric": False, "actorder": "weight",
                            "ignore": ["lm_head", "model.layers.1.self_attn.o_proj"]},
    # llm-compressor's W8A16 preset: symmetric 8-bit codes (stored 0..255), a bfloat16 scale per output row
    "llama_ct_w8a16": {"bits": 8, "strategy": "channel", "symmetric": True, "actorder": None, "ignore": ["lm_head"]},
}
CT_GROUP = 16


def ct_scheme(spec):
    """The variant's compressed-tensors QuantizationConfig (as llm-compressor's W4A16 recipe sets it) and its
    one scheme."""
    from compressed_tensors.quantization import QuantizationArgs, QuantizationConfig, QuantizationScheme
    args = dict(num_bits=spec.get("bits", 4), type="int", symmetric=spec["symmetric"],
                strategy=spec.get("strategy", "group"), observer="minmax")
    if args["strategy"] == "group":
        args["group_size"] = CT_GROUP
    if spec["actorder"]:
        args["actorder"] = spec["actorder"]
    scheme = QuantizationScheme(targets=["Linear"], weights=QuantizationArgs(**args), format="pack-quantized")
    qc = QuantizationConfig(config_groups={"group_0": scheme}, format="pack-quantized",
                            quantization_status="compressed", ignore=list(spec["ignore"]))
    return qc, scheme


def ct_linears(model, spec):
    """The projections a CT checkpoint quantizes: fp8_linears less `ignore`."""
    return [(n, p) for n, p in fp8_linears(model) if n[:-len(".weight")] not in spec["ignore"]]


def ct_group(spec, cols):
    """The inputs a scale covers: CT_GROUP, or all of a row's for strategy "channel"."""
    return cols if spec.get("strategy") == "channel" else CT_GROUP


def ct_weights(model, spec, seed):
    """Quantize the model's projections in place (their values become the dequantized ones, so the reference
    logits are those of the 4- / 8-bit weights); returns ({module: {tensor suffix: checkpoint tensor}}, {module:
    (codes [out, in], zeros [out, groups]) as drawn}). With h = 2^(bits-1): symmetric: z = 0, s = absmax / (h - 0.5)
    (compressed-tensors' minmax range); asymmetric: z drawn in -h..h-1 (one -h and one h - 1 at least),
    s = absmax / max(h + z, h - 1 - z)."""
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    _, scheme = ct_scheme(spec)
    rng = np.random.default_rng(6000 + seed)
    tensors, codes = {}, {}
    with torch.no_grad():
        for n, p in ct_linears(model, spec):
            w = p.detach().double().numpy()
            rows, cols = w.shape
            gs, h = ct_group(spec, cols), 1 << (spec.get("bits", 4) - 1)
            groups = cols // gs
            if spec["symmetric"]:
                z = np.zeros((rows, groups), dtype=np.int64)
                span = np.full((rows, groups), h - 0.5)
            else:
                z = rng.integers(-h, h, (rows, groups))
                z.flat[rng.choice(z.size, 2, replace=False)] = (-h, h - 1)
                span = np.maximum(h + z, h - 1 - z).astype(np.float64)
            amax = np.abs(w.reshape(rows, groups, gs)).max(axis=2)
            scale = torch.from_numpy(amax / span).to(torch.bfloat16)  # [out, groups]
            s_oi = np.repeat(scale.float().numpy(), gs, axis=1)
            z_oi = np.repeat(z, gs, axis=1)
            q = np.clip(np.rint(w / s_oi) + z_oi, -h, h - 1).astype(np.int64)
            deq = torch.from_numpy(s_oi * (q - z_oi).astype(np.float32))  # float32 throughout: exact
            p.copy_(deq)
            sd = {"weight": deq.clone(), "weight_scale": scale}
            if not spec["symmetric"]:
                sd["weight_zero_point"] = torch.from_numpy(z.astype(np.int8))
            mod = n[:-len(".weight")]
            tensors[mod] = PackedQuantizationCompressor.compress(sd, scheme)
            codes[mod] = (q, z)
    return tensors, codes


def save_ct(name, model, d):
    """Replace the saved projections' weights by their compressed tensors (ct_weights' result, kept by build);
    quantization_config as compressed-tensors' ModelCompressor writes it (what llm-compressor saves)."""
    from compressed_tensors.compressors import ModelCompressor
    path = os.path.join(d, "model.safetensors")
    sd = load_file(path)
    for mod, tensors in model.ct_tensors.items():
        del sd[mod + ".weight"]
        sd.update({f"{mod}.{k}": v.contiguous() for k, v in tensors.items()})
    save_file(sd, path, metadata={"format": "pt"})
    qc = ct_scheme(CT[name])[0] if name in CT else ct_fp8_scheme(CT_FP8[name])[0]
    ModelCompressor(quantization_config=qc).update_config(d)


def ct_unpack(words, axis, bits):
    """int32 words -> signed b-bit values along `axis`: element fj + k of that axis (f = 32 / b) from bits
    bk..bk+b-1 of word j, stored as value + 2^(b-1) (unpack_fields: this script's reading of the format,
    independent of compressed-tensors')."""
    return unpack_fields(words, axis, bits) - (1 << (bits - 1))


def check_ct(d, model, ids, logits, spec):
    """(1) The saved tensors, decoded by ct_unpack, hold exactly the codes and zeros drawn (names, dtypes and
    shapes as the comment above CT says; no g_idx); the ignored projections are float32 `.weight`s.
    (2) transformers' compressed-tensors loader (CompressedTensorsConfig(dequantize=True): compressed-tensors'
    PackedQuantizationCompressor.decompress on each module) gives every quantized projection the weights
    written, rounded to bfloat16: it dequantizes in the scale's dtype. (3) That same decompress, given the
    scales in float32, gives them exactly; with those in place, every other parameter is as written and the
    forward gives the reference logits."""
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    _, scheme = ct_scheme(spec)
    saved = load_file(os.path.join(d, "model.safetensors"))
    bits = spec.get("bits", 4)
    f, h = 32 // bits, 1 << (bits - 1)
    nibbles = set()
    for mod, (q, z) in model.ct_codes.items():
        rows, cols = q.shape
        groups = cols // ct_group(spec, cols)
        want = {"weight_packed": (torch.int32, (rows, cols // f)), "weight_scale": (torch.bfloat16, (rows, groups)),
                "weight_shape": (torch.int64, (2,))}
        if not spec["symmetric"]:
            want["weight_zero_point"] = (torch.int32, (rows // f, groups))
        got = {k[len(mod) + 1:]: v for k, v in saved.items() if k.startswith(mod + ".")}
        if {k: (v.dtype, tuple(v.shape)) for k, v in got.items()} != want:
            sys.exit(f"{d}: {mod} is saved as {[(k, v.dtype, tuple(v.shape)) for k, v in got.items()]}")
        if got["weight_shape"].tolist() != [rows, cols] or \
                not np.array_equal(ct_unpack(got["weight_packed"], 1, bits), q):
            sys.exit(f"{d}: {mod}.weight_packed / weight_shape do not hold the codes drawn")
        if not spec["symmetric"] and not np.array_equal(ct_unpack(got["weight_zero_point"], 0, bits), z):
            sys.exit(f"{d}: {mod}.weight_zero_point does not hold the zeros drawn")
        s_oi = np.repeat(got["weight_scale"].float().numpy(), cols // groups, axis=1)
        z_oi = np.repeat(z, cols // groups, axis=1)
        own = s_oi * (ct_unpack(got["weight_packed"], 1, bits) - z_oi).astype(np.float32)
        if not torch.equal(torch.from_numpy(own), model.get_parameter(mod + ".weight")):
            sys.exit(f"{d}: {mod}'s saved tensors decode to other weights than those written")
        nibbles |= set((q + h).ravel().tolist()) | (set((z + h).ravel().tolist()) if not spec["symmetric"] else set())
    exact, as_loaded, err = ct_reload(d, model, ids, logits, spec, saved, PackedQuantizationCompressor, scheme)
    print(f"{os.path.basename(d)}: {len(model.ct_codes)} pack-quantized {bits}-bit modules decode to the codes drawn "
          f"and weights written (stored fields {min(nibbles)}..{max(nibbles)}, {len(nibbles)} values); transformers "
          f"decompresses them "
          f"to the weights written in bfloat16 ({exact} exactly), in float32 exactly: logits max diff {err:.1e} "
          f"(as loaded, bfloat16: {as_loaded:.1e})")


def ct_reload(d, model, ids, logits, spec, saved, compressor, scheme):
    """check_ct's and check_ct_fp8's steps after decoding: the ignored projections are saved as their float32
    `.weight`s; transformers' compressed-tensors loader (CompressedTensorsConfig(dequantize=True): `compressor`'s
    decompress on each module) gives every quantized projection the weights written, rounded to the
    weight_scale's dtype (it dequantizes in that dtype); that same decompress, given the scales in float32,
    gives them exactly; with those in place, every other parameter is as written and the forward gives the
    reference logits within 1e-5. Returns (projections loaded exactly, logits' max diff as loaded, with the
    float32 decompress)."""
    from transformers import CompressedTensorsConfig
    mine = dict(model.named_parameters())
    for mod in spec["ignore"]:
        if mod + ".weight" not in mine or not torch.equal(saved.get(mod + ".weight", torch.empty(0)),
                                                          mine[mod + ".weight"]):
            sys.exit(f"{d}: {mod} (ignored) is not saved as its float32 weight")
    hf = type(model).from_pretrained(d, dtype=torch.float32, attn_implementation="eager", device_map="cpu",
                                     quantization_config=CompressedTensorsConfig(dequantize=True)).eval()
    exact = 0
    as_loaded = logits_diff(hf, ids, logits)
    with torch.no_grad():
        for mod in model.ct_codes:
            w = mine[mod + ".weight"]
            loaded = hf.get_parameter(mod + ".weight")
            exact += int(torch.equal(loaded, w))
            scale_dtype = saved[mod + ".weight_scale"].dtype
            if not torch.equal(loaded, w.to(scale_dtype).float()):
                sys.exit(f"{d}: transformers decompresses {mod} to other values than the weights written in {scale_dtype}")
            sd = {k[len(mod) + 1:]: v for k, v in saved.items() if k.startswith(mod + ".")}
            sd["weight_scale"] = sd["weight_scale"].float()
            dec = compressor.decompress(sd, scheme)["weight"]
            if not torch.equal(dec, w):
                sys.exit(f"{d}: compressed-tensors decompresses {mod} (float32 scales) differently from what this "
                         f"script wrote at {int((dec != w).sum())} places")
            loaded.copy_(dec)
        for n, p in hf.named_parameters():
            if n not in mine or not torch.equal(p.detach(), mine[n].detach()):
                sys.exit(f"{d}: transformers reads {n} differently from what this script wrote")
        if len(list(hf.named_parameters())) != len(mine):
            sys.exit(f"{d}: transformers' model has other parameters than this script's")
    err = require_logits(d, hf, ids, logits, "compressed-tensors model")
    return exact, as_loaded, err


# ---- compressed-tensors float-quantized FP8 (llm-compressor's FP8_DYNAMIC / FP8_BLOCK / FP8 presets; read
# weight-only: the activation scheme is written in the config but the reference does not quantize
# activations). fp8_quantize draws the codes and scales (scale = absmax / 448 per row / block / matrix);
# compressed-tensors' own FloatQuantizationCompressor writes the tensors and its ModelCompressor the
# quantization_config (format "float-quantized"). Each quantized projection P ([out, in]) is saved as
#   P.weight        float8_e4m3fn [out, in]: the codes q(o, i)
#   P.weight_scale  strategy "channel" [out, 1], "block" [ceil(out/16), ceil(in/16)], "tensor" [1], in the
#                   dtype given below (llm-compressor writes the model's dtype)
#   P.input_scale   float32 [1], only with static (dynamic false) tensor-wise input activations
# and nothing else (compressed-tensors drops the symmetric zero points); its weight is float32(q(o, i)) *
# float32(s) with the scale s of (o, i), exact in float32. name -> llm-compressor's preset (its weight strategy
# and input activations), the scale's dtype, FP8_BLOCK's block (also the activations' group size), `ignore`.
CT_FP8 = {
    # RedHat's "-FP8-dynamic" checkpoints: a bfloat16 scale per output row, dynamic per-token activations
    "llama_ct_fp8_channel": {"preset": "FP8_DYNAMIC", "scale_dtype": torch.bfloat16, "ignore": ["lm_head"]},
    # FP8_BLOCK with 16 x 16 blocks (2-3 each way) and dynamic activation groups of 16; layer 1's down_proj
    # stays float32
    "qwen3_ct_fp8_block": {"preset": "FP8_BLOCK", "scale_dtype": torch.float32, "block": [16, 16],
                           "ignore": ["lm_head", "model.layers.1.mlp.down_proj"]},
    # FP8 (static): one scale per matrix and a static input_scale per projection
    "mistral_ct_fp8_tensor": {"preset": "FP8", "scale_dtype": torch.float32, "ignore": ["lm_head"]},
}


def ct_fp8_scheme(spec):
    """The variant's compressed-tensors QuantizationConfig and its one scheme: llm-compressor's preset, for
    FP8_BLOCK with the weights' block_structure and the activations' group_size set to spec["block"]."""
    from compressed_tensors.quantization import QuantizationConfig, QuantizationScheme
    from compressed_tensors.quantization.quant_scheme import preset_name_to_scheme
    scheme = preset_name_to_scheme(spec["preset"], ["Linear"])
    if "block" in spec:
        w = scheme.weights.model_dump()
        a = scheme.input_activations.model_dump()
        scheme = QuantizationScheme(targets=["Linear"], weights={**w, "block_structure": list(spec["block"])},
                                    input_activations={**a, "group_size": spec["block"][1]})
    scheme = QuantizationScheme(**{**scheme.model_dump(), "format": "float-quantized"})
    qc = QuantizationConfig(config_groups={"group_0": scheme}, format="float-quantized",
                            quantization_status="compressed", ignore=list(spec["ignore"]))
    return qc, scheme


def ct_fp8_blocks(scheme, rows, cols):
    """The rows and columns a weight_scale of an [rows, cols] projection covers, and its shape as saved."""
    strategy = scheme.weights.strategy
    bm, bn = (1, cols) if strategy == "channel" else (rows, cols) if strategy == "tensor" else \
        tuple(scheme.weights.block_structure)
    return bm, bn, (1,) if strategy == "tensor" else (-(-rows // bm), -(-cols // bn))


def ct_fp8_weights(model, spec, seed):
    """Quantize the model's projections in place (fp8_quantize per row / block / matrix; their values become
    the dequantized ones, so the reference logits are those of the FP8 weights with float activations);
    returns ({module: {tensor suffix: checkpoint tensor}}, {module: (codes, scale as stored)})."""
    from compressed_tensors.compressors.naive_quantized.base import FloatQuantizationCompressor
    _, scheme = ct_fp8_scheme(spec)
    rng = np.random.default_rng(6000 + seed)
    tensors, codes = {}, {}
    with torch.no_grad():
        for n, p in ct_linears(model, spec):
            bm, bn, shape = ct_fp8_blocks(scheme, *p.shape)
            q, scale, deq = fp8_quantize(p.detach(), bm, bn, spec["scale_dtype"])
            scale = scale.reshape(shape)
            p.copy_(deq)
            sd = {"weight": deq.clone(), "weight_scale": scale}
            if not scheme.input_activations.dynamic:
                sd["input_scale"] = torch.tensor([rng.uniform(0.01, 0.1)], dtype=torch.float32)
            mod = n[:-len(".weight")]
            tensors[mod] = FloatQuantizationCompressor.compress(sd, scheme)
            codes[mod] = (q, scale)
    return tensors, codes


def check_ct_fp8(d, model, ids, logits, spec):
    """(1) The saved tensors of each quantized projection are exactly those the comment above CT_FP8 lists (no
    zero points), weight holds the codes drawn and weight_scale the scales, and this script's own decoding
    (float32(code) * float32(scale), the scale of (o, i) at [o / bm, i / bn]) gives the weights written;
    (2)-(3) as check_ct (ct_reload): transformers' loader gives them rounded to the scale's dtype and drops
    input_scale (its float32 model does not quantize activations), compressed-tensors' decompress with
    float32 scales gives them exactly and the forward the reference logits."""
    from compressed_tensors.compressors.naive_quantized.base import FloatQuantizationCompressor
    _, scheme = ct_fp8_scheme(spec)
    saved = load_file(os.path.join(d, "model.safetensors"))
    mine = dict(model.named_parameters())
    static = not scheme.input_activations.dynamic
    codes = set()
    for mod, (q, scale) in model.ct_codes.items():
        rows, cols = q.shape
        bm, bn, shape = ct_fp8_blocks(scheme, rows, cols)
        want = {"weight": (torch.float8_e4m3fn, (rows, cols)), "weight_scale": (spec["scale_dtype"], shape)}
        if static:
            want["input_scale"] = (torch.float32, (1,))
        got = {k[len(mod) + 1:]: v for k, v in saved.items() if k.startswith(mod + ".")}
        if {k: (v.dtype, tuple(v.shape)) for k, v in got.items()} != want:
            sys.exit(f"{d}: {mod} is saved as {[(k, v.dtype, tuple(v.shape)) for k, v in got.items()]}")
        if not torch.equal(got["weight"].view(torch.uint8), q.view(torch.uint8)) or \
                not torch.equal(got["weight_scale"], scale):
            sys.exit(f"{d}: {mod}.weight / weight_scale do not hold the codes and scales drawn")
        if static and not got["input_scale"].item() > 0:
            sys.exit(f"{d}: {mod}.input_scale is not positive")
        s_oi = got["weight_scale"].float().reshape(-(-rows // bm), -(-cols // bn))
        s_oi = s_oi.repeat_interleave(bm, 0)[:rows].repeat_interleave(bn, 1)[:, :cols]
        if not torch.equal(got["weight"].float() * s_oi, mine[mod + ".weight"]):
            sys.exit(f"{d}: {mod} decodes to other weights than those written")
        codes |= set(got["weight"].view(torch.uint8).ravel().tolist())
    exact, as_loaded, err = ct_reload(d, model, ids, logits, spec, saved, FloatQuantizationCompressor, scheme)
    print(f"{os.path.basename(d)}: {len(model.ct_codes)} float-quantized ({scheme.weights.strategy}) modules decode "
          f"to the weights written ({len(codes)} distinct e4m3 codes); transformers decompresses them to those in "
          f"{spec['scale_dtype']} ({exact} exactly), in float32 exactly: logits max diff {err:.1e} (as loaded: "
          f"{as_loaded:.1e})")


def save(name, model, d, ids, seed):
    """save_pretrained, for an MTP variant its MTP layer, and for an MXFP4 variant its experts as
    the published checkpoints store them (blocks + scales, quantization_config quant_method mxfp4)."""
    model.save_pretrained(d)
    if name in MTP:
        add_mtp_layer(model, d, ids, seed)
        write_tiny_tokenizer(d)
    if name in FP8:
        save_fp8(name, model, d)
    if name in INT4:
        save_int4(name, model, d)
    if name in CT or name in CT_FP8:
        save_ct(name, model, d)
    if name not in MXFP4:
        return
    packed = mxfp4_experts(model)  # the experts already hold MXFP4 values: encoded exactly, unchanged
    path = os.path.join(d, "model.safetensors")
    sd = load_file(path)
    for k in packed:
        sd.pop(k.rsplit("_", 1)[0], None)
    sd.update(packed)
    save_file(sd, path, metadata={"format": "pt"})
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = {"quant_method": "mxfp4",
                                  "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                             "model.embed_tokens", "lm_head"]}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def add_mtp_layer(model, d, ids, seed):
    """The checkpoint's MTP layer (GLM-4.5 / DeepSeek-V3 name it model.layers.<L>.*, L =
    num_hidden_layers: eh_proj, enorm, hnorm, shared_head.{norm,head}, embed_tokens and a decoder
    layer of the model's own kind, here a MoE one), with random weights, and the reference of what
    an MTP drafter computes with it, by vLLM's DeepSeekMultiTokenPredictorLayer /
    Glm4MoeMultiTokenPredictorLayer:
        row p (p = 0 .. T-2): token ids[p+1], hidden h_p = the target's output after its final norm
        at position p, RoPE position p; the embedding is zeroed at position 0;
        x = eh_proj([enorm(embed(token)) ; hnorm(h)]); y = decoder_layer(x) (causal over the rows,
        the residual added); logits = shared_head.head(shared_head.norm(y)).
    Row T-1 is a second draft step: token = the argmax of row T-2's logits, hidden = y[T-2] (the
    layer's output BEFORE shared_head.norm, as vLLM chains MTP steps), position T-1.
    Writes mtp_logits.f32 [T, V] and mtp.txt (that token). transformers itself never reads these
    tensors (nor may specdec's target loader)."""
    cfg = model.config
    n, h = cfg.num_hidden_layers, cfg.hidden_size
    big_cfg = type(cfg)(**{**cfg.to_dict(), "num_hidden_layers": n + 1})
    big_cfg._attn_implementation = "eager"
    big = type(model)(big_cfg).to(torch.float32).eval()
    randomize(big, 7000 + seed, False)
    missing = big.load_state_dict(model.state_dict(), strict=False).missing_keys
    assert all(k.startswith(f"model.layers.{n}.") for k in missing), missing
    g = torch.Generator().manual_seed(9000 + seed)
    norm_cls = type(big.model.norm)
    mods = {k: norm_cls(h, eps=cfg.rms_norm_eps) for k in ("enorm", "hnorm", "shared_head.norm")}
    with torch.no_grad():
        for m in mods.values():
            m.weight.copy_(0.3 * torch.randn(h, generator=g) + 1.0)
        eh = torch.randn(h, 2 * h, generator=g) / (2 * h) ** 0.5
        emb, lm = model.model.embed_tokens.weight, model.lm_head.weight
    logits2, step_tok = mtp_reference(model, big, mods, eh, emb, lm, ids)
    tmp = d + ".mtp-tmp"
    big.save_pretrained(tmp)
    layer_sd = {k: v for k, v in load_file(os.path.join(tmp, "model.safetensors")).items()
                if k.startswith(f"model.layers.{n}.")}
    shutil.rmtree(tmp)
    path = os.path.join(d, "model.safetensors")
    sd = load_file(path)
    sd.update(layer_sd)
    pre = f"model.layers.{n}."
    sd[pre + "eh_proj.weight"] = eh.contiguous()
    for k, m in mods.items():
        sd[pre + k + ".weight"] = m.weight.detach().clone()
    sd[pre + "embed_tokens.weight"] = emb.detach().clone()  # the checkpoints ship copies of both
    sd[pre + "shared_head.head.weight"] = lm.detach().clone()
    save_file(sd, path, metadata={"format": "pt"})
    logits2.numpy().astype("<f4").tofile(os.path.join(d, "mtp_logits.f32"))
    with open(os.path.join(d, "mtp.txt"), "w") as f:
        f.write(f"{step_tok}\n")
    top2 = np.sort(logits2.numpy(), axis=-1)[:, -2:]
    print(f"{os.path.basename(d)}: MTP layer {n}, reference rows {T}, min top-2 margin {(top2[:, 1] - top2[:, 0]).min():.2e}")


def mtp_reference(model, big, mods, eh, emb, lm, ids):
    """What an MTP drafter computes (add_mtp_layer's docstring) with the decoder layer big.model.layers[n]
    (n = model's num_hidden_layers), the norms mods {"enorm", "hnorm", "shared_head.norm"}, eh_proj eh
    [h, 2h], the embedding emb and the head lm, over the target model's post-norm states for ids:
    returns (logits [T, V]: rows 0..T-2 and the chained step, that step's token). Also used by
    gen_gguf_twin_fixtures.py on the weights decoded from a GGUF's MTP block."""
    layer = big.model.layers[model.config.num_hidden_layers]
    with torch.no_grad():
        x_ids = torch.from_numpy(np.asarray(ids)[None].astype(np.int64))
        hid = model.model(input_ids=x_ids).last_hidden_state[0]  # after the final norm
        tok = torch.from_numpy(np.asarray(ids)[1:].astype(np.int64))

        def run(tokens, hiddens):
            e = emb[tokens].clone()
            e[0] = 0.0  # position 0
            u = torch.cat([mods["enorm"](e), mods["hnorm"](hiddens)], dim=-1)
            x = (u @ eh.T)[None]
            T_ = x.shape[1]
            pos = torch.arange(T_)[None]
            pe = big.model.rotary_emb(x, pos)
            mask = torch.full((T_, T_), float("-inf")).triu(1)[None, None]
            out = layer(x, attention_mask=mask, position_ids=pos, position_embeddings=pe)
            y = (out[0] if isinstance(out, tuple) else out)[0]
            return y, mods["shared_head.norm"](y) @ lm.T

        y, logits = run(tok, hid[:-1])
        step_tok = int(torch.argmax(logits[-1]))
        y2, logits2 = run(torch.cat([tok, torch.tensor([step_tok])]), torch.cat([hid[:-1], y[-1:]]))
        assert torch.allclose(logits2[:-1], logits, atol=1e-5)  # causal: the new row changes no earlier one
    return logits2, step_tok


TINY_CHARS = ([" "] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + [chr(c) for c in range(ord("A"), ord("Z") + 1)]
              + [str(i) for i in range(10)] + list(".,!?'-:;\n()\"/&"))


def write_tiny_tokenizer(d, chars=TINY_CHARS, size=V):
    """A byte-level BPE tokenizer.json of `size` ids (<pad> 0, <s> 1, </s> 2, then the single characters
    `chars` — by default the fixtures' V = 80: space, letters, digits, punctuation, newline — then
    <unusedN> fillers; no merges), so the CLI, the server and the Python API can run a checkpoint end
    to end on text of those characters (also bench/mla/make_mla_checkpoint.py's)."""
    assert len(chars) <= size - 3
    byte_char = {ord(" "): "\u0120", ord("\n"): "\u010a"}  # GPT-2's byte-level symbols of space and newline
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    for c in chars:
        vocab[byte_char.get(ord(c), c)] = len(vocab)
    for i in range(len(vocab), size):  # ids the tokenizer never produces (the model's vocabulary is larger)
        vocab[f"<unused{i}>"] = i
    special = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
                "special": True} for t, i in (("<pad>", 0), ("<s>", 1), ("</s>", 2))]
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": special, "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": vocab, "merges": []}}
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tok, f, indent=1)


def randomize(model, seed, zero_centred_norms):
    """Every parameter from a seeded generator: matrices N(0, 1/fan_in), embeddings N(0, 1),
    biases N(0, 0.2^2), norm weights around 1 (around 0 for (1 + w) norms)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if "norm" in name:
                p.copy_(0.3 * r + (0.0 if zero_centred_norms else 1.0))
            elif name.endswith("bias"):
                p.copy_(0.2 * r)
            elif "embed_tokens" in name:
                p.copy_(r)
            else:
                p.copy_(r / p.shape[-1] ** 0.5)  # fan-in (the last dim; MoE experts are 3-D)
        for name, b in model.named_buffers():  # DeepSeek-style routers' score bias (a buffer)
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.2 * torch.randn(b.shape, generator=g, dtype=torch.float32))


def build(name, seed):
    cfg_cls, model_cls, kw, zero_norms = VARIANTS[name]
    cfg = cfg_cls(**kw)
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = model_cls(cfg).to(torch.float32).eval()
    randomize(model, seed, zero_norms)
    if name in MXFP4:
        mxfp4_experts(model)
    if name in FP8:
        fp8_weights(model, *FP8[name])
    if name in INT4:
        model.int4_tensors = int4_weights(model, INT4[name], seed)
    if name in CT:
        model.ct_tensors, model.ct_codes = ct_weights(model, CT[name], seed)
    if name in CT_FP8:
        model.ct_tensors, model.ct_codes = ct_fp8_weights(model, CT_FP8[name], seed)
    return model


def margins_ok(logits):
    top2 = np.sort(logits, axis=-1)[:, -2:]
    return bool((top2[:, 1] - top2[:, 0] > MARGIN).all())


def first_seed(name, ids, make):
    """(seed, *make(seed), logits) for the first seed 1..49 whose model (make(seed)[0]) gives finite
    logits on ids with every top-2 margin above MARGIN."""
    for seed in range(1, 50):
        made = make(seed)
        with torch.no_grad():
            logits = made[0](input_ids=torch.from_numpy(ids[None].astype(np.int64))).logits[0].float().numpy()
        if np.isfinite(logits).all() and margins_ok(logits):
            return (seed, *made, logits)
    sys.exit(f"{name}: no seed gave top-2 margins above {MARGIN}")


def write_fixture(out, name):
    # the ids' seed: the variant's place among the others (INT4's, CT's and CT_FP8's excluded: adding them
    # changed no fixture)
    by_crc = {**INT4, **CT, **CT_FP8}
    if name in by_crc:
        rng = np.random.default_rng(1000 + zlib.crc32(name.encode()) % 100000)
    else:
        rng = np.random.default_rng(1000 + sorted(n for n in VARIANTS if n not in by_crc).index(name))
    ids = rng.integers(3, V, T)
    ids[0] = 1  # bos
    seed, model, logits = first_seed(name, ids, lambda s: (build(name, s),))
    d = os.path.join(out, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    save(name, model, d, ids, seed)
    if name in MXFP4:
        check_mxfp4(d, model, ids, logits)
    if name in FP8:
        check_fp8(d, model, ids, logits)
    if name in INT4:
        check_int4(d, model, ids, logits, INT4[name])
    if name in CT:
        check_ct(d, model, ids, logits, CT[name])
    if name in CT_FP8:
        check_ct_fp8(d, model, ids, logits, CT_FP8[name])
    if name in CONFIG_EDITS:
        with open(os.path.join(d, "config.json")) as f:
            cfg = CONFIG_EDITS[name](json.load(f))
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(d, extra)):
            os.remove(os.path.join(d, extra))
    with open(os.path.join(d, "ids.txt"), "w") as f:
        f.write(" ".join(str(int(i)) for i in ids) + "\n")
    logits.astype("<f4").tofile(os.path.join(d, "logits.f32"))
    print(f"{name:24s} seed {seed}  T={T} V={V}  |logits| max {np.abs(logits).max():.2f}")
    return f"{name} {T} {V} {T}\n"


def check_mxfp4(d, model, ids, logits):
    """transformers' own MXFP4 reader (dequantized on the CPU) must give back exactly the
    expert values this script quantized, and the same logits."""
    from transformers import Mxfp4Config
    hf = GptOssForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager",
                                           quantization_config=Mxfp4Config(dequantize=True)).eval()
    mine = dict(model.named_parameters())
    for n, p in hf.named_parameters():
        if "experts" in n and not torch.equal(p.detach().float(), mine[n].detach().float()):
            sys.exit(f"{d}: transformers reads {n} differently from the MXFP4 this script wrote")
    err = require_logits(d, hf, ids, logits, "dequantized model")
    print(f"{os.path.basename(d)}: transformers' MXFP4 reader gives the same experts and logits (max diff {err:.1e})")


def main():
    out, names, _ = fixture_args(__doc__, VARIANTS)
    lines = {n: write_fixture(out, n) for n in names}
    write_manifest(os.path.join(out, "manifest.txt"), lines, VARIANTS, "name T V n_ctx (tools/gen_model_fixtures.py)")
    print(f"{len(names)} fixtures in {out}")


def fixture_args(doc, known, flags=None):
    """The command line of a fixture script: (output directory, created; the names to write: those
    given, else all of `known`; the parsed options, with a boolean --NAME per flags {NAME: help}).
    Uses one torch thread."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "models", "fixtures"))
    for flag, help_ in (flags or {}).items():
        ap.add_argument(f"--{flag}", action="store_true", help=help_)
    ap.add_argument("names", nargs="*", help="fixtures to (re)write (default: all)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    names = args.names or sorted(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit(f"unknown fixtures {unknown}; known: {sorted(known)}")
    os.makedirs(args.out, exist_ok=True)
    return args.out, names, args


def write_manifest(path, lines, known, what):
    """path: a comment naming the versions and `what`, then the manifest line of each fixture: those in
    lines ({name: line}), and the other `known` fixtures' lines kept from the existing file."""
    lines = dict(lines)
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip() and not line.startswith("#") and line.split()[0] not in lines \
                        and line.split()[0] in known:
                    lines[line.split()[0]] = line
    with open(path, "w") as f:
        f.write(f"# transformers {transformers.__version__}, torch {torch.__version__}: {what}\n")
        f.writelines(lines[n] for n in sorted(lines))


if __name__ == "__main__":
    main()
