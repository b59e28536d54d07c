#!/usr/bin/env python3
"""make_seeds.py — (re)generate the seed corpora of the fuzz targets in tests/fuzz/seeds/.

Seed names say what the entry function must return: ok_* must load, bad_* must be
refused, any_* only must not crash. For tokenizer seeds ok_/bad_ agree with what the
`tokenizers` library does with the same file. The seeds are committed; run this after changing
it:  python3 tests/fuzz/make_seeds.py [target ...]   (default: every target)
Regression inputs found by fuzzing (any_issue16_*, any_empty_*, regress_*) are added by
hand or below and kept: this script never deletes a seed.
Needs numpy and safetensors (tests/requirements.txt); the tokenizer seeds are cut
down from the real tokenizer.json files in ../shared/tokenizers."""
import json
import os
import struct
import sys

import numpy as np
from safetensors.numpy import save as st_save

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.join(HERE, "seeds")
SHARED = os.path.join(HERE, "..", "..", "..", "shared", "tokenizers")


def put(target, name, data):
    d = os.path.join(SEEDS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def st_raw(header, data=b"", hlen=None):
    h = header.encode("utf-8") if isinstance(header, str) else header
    return struct.pack("<Q", len(h) if hlen is None else hlen) + h + data


def entry(dtype, shape, b, e):
    return {"dtype": dtype, "shape": shape, "data_offsets": [b, e]}


def safetensors_seeds():
    rng = np.random.default_rng(0)
    # Written by the reference implementation (padding, __metadata__ as it does it).
    put("safetensors", "ok_reference_writer.safetensors",
        st_save({"model.embed_tokens.weight": rng.standard_normal((8, 4)).astype(np.float16),
                 "model.norm.weight": rng.standard_normal(4).astype(np.float32),
                 "scalar": np.array(3.0, dtype=np.float64),
                 "empty": np.zeros((0, 5), dtype=np.int32)}, metadata={"format": "pt"}))
    put("safetensors", "ok_empty_header.safetensors", st_raw("{}"))
    put("safetensors", "ok_all_dtypes.safetensors", all_dtypes())
    h = json.dumps({"w": entry("F32", [2], 0, 8), "__metadata__": {"a": "b"}})
    put("safetensors", "ok_misaligned.safetensors", st_raw(h + " ", bytes(8)))  # odd data start
    put("safetensors", "bad_short.safetensors", b"\x02\x00\x00")
    put("safetensors", "bad_header_too_big.safetensors", st_raw("{}", hlen=100_000_001))
    put("safetensors", "bad_header_past_eof.safetensors", st_raw("{}", hlen=50))
    put("safetensors", "bad_not_brace.safetensors", st_raw("[]"))
    put("safetensors", "bad_utf8.safetensors", st_raw(b'{"\xff": 1}'))
    put("safetensors", "bad_not_json.safetensors", st_raw('{"w": {"dtype": "F32",'))
    one = lambda name, e, n: st_raw(json.dumps({name: e}), bytes(n))
    put("safetensors", "bad_unknown_dtype.safetensors", one("w", entry("F12", [1], 0, 4), 4))
    put("safetensors", "bad_size_mismatch.safetensors", one("w", entry("F32", [3], 0, 8), 8))
    put("safetensors", "bad_end_before_begin.safetensors", one("w", entry("F32", [0], 8, 0), 8))
    put("safetensors", "bad_shape_overflow.safetensors",
        one("w", entry("F32", [2**32, 2**32, 2**32], 0, 4), 4))
    put("safetensors", "bad_shape_negative.safetensors", one("w", entry("F32", [-1], 0, 4), 4))
    put("safetensors", "bad_trailing_data.safetensors", one("w", entry("F32", [1], 0, 4), 12))
    put("safetensors", "bad_nul_name.safetensors",
        st_raw('{"a\\u0000b": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}', b"\0"))
    put("safetensors", "bad_overlap.safetensors",
        st_raw(json.dumps({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)}), bytes(12)))
    put("safetensors", "bad_hole.safetensors",
        st_raw(json.dumps({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)}), bytes(12)))
    put("safetensors", "bad_duplicate.safetensors",
        st_raw('{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, '
               '"a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}', bytes(2)))
    put("safetensors", "bad_metadata_value.safetensors", st_raw('{"__metadata__": {"k": 1}}'))
    put("safetensors", "bad_sub_byte.safetensors", one("w", entry("F4", [3], 0, 2), 2))


def all_dtypes():
    names = [("BOOL", 1), ("U8", 1), ("I8", 1), ("F8_E5M2", 1), ("F8_E4M3", 1), ("F8_E8M0", 1),
             ("I16", 2), ("U16", 2), ("F16", 2), ("BF16", 2), ("I32", 4), ("U32", 4), ("F32", 4),
             ("I64", 8), ("U64", 8), ("F64", 8), ("C64", 8)]
    hdr, off = {}, 0
    for n, sz in names:
        hdr["t_" + n] = entry(n, [2, 3], off, off + 6 * sz)
        off += 6 * sz
    hdr["t_F4"] = entry("F4", [4], off, off + 2)
    off += 2
    hdr["t_F6_E2M3"] = entry("F6_E2M3", [4], off, off + 3)
    off += 3
    hdr["t_F6_E3M2"] = entry("F6_E3M2", [4], off, off + 3)
    off += 3
    return st_raw(json.dumps(hdr), bytes(off))


LLAMA = {
    "architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 2048, "intermediate_size": 5632, "max_position_embeddings": 2048, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 22, "num_key_value_heads": 4, "rms_norm_eps": 1e-05,
    "rope_scaling": None, "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "vocab_size": 32000}
LLAMA3 = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009], "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048,
    "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": True, "vocab_size": 128256}
QWEN2 = {
    "architectures": ["Qwen2ForCausalLM"], "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu",
    "hidden_size": 896, "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21,
    "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False, "vocab_size": 151936}
MISTRAL = {
    "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_theta": 1000000.0, "sliding_window": None, "tie_word_embeddings": False, "vocab_size": 32768}


# The other families, as their published config.json files spell them (sizes and keys
# of Qwen3-0.6B, Phi-3-mini-4k, Phi-3.5-mini, Phi-4-mini, Gemma-2b, Gemma-2-2b,
# Gemma-3-1b; a Mistral v0.1 window; Qwen2.5 with yarn). Longrope lists are made up
# (their length is what matters: rotary dimensions / 2).
QWEN3 = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "bos_token_id": 151643, "eos_token_id": 151645,
    "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024, "intermediate_size": 3072,
    "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3", "num_attention_heads": 16,
    "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": None,
    "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": True, "use_sliding_window": False,
    "vocab_size": 151936}
PHI3 = {
    "architectures": ["Phi3ForCausalLM"], "bos_token_id": 1, "eos_token_id": 32000, "hidden_act": "silu",
    "hidden_size": 3072, "intermediate_size": 8192, "max_position_embeddings": 4096, "model_type": "phi3",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0,
    "sliding_window": 2047, "tie_word_embeddings": False, "vocab_size": 32064}
PHI35 = {**PHI3, "max_position_embeddings": 131072, "sliding_window": 262144,
         "rope_scaling": {"type": "longrope", "short_factor": [1.0 + 0.01 * i for i in range(48)],
                          "long_factor": [1.0 + 0.5 * i for i in range(48)]}}
PHI4_MINI = {**PHI3, "hidden_size": 3072, "num_attention_heads": 24, "num_key_value_heads": 8,
             "partial_rotary_factor": 0.75, "max_position_embeddings": 131072, "sliding_window": 262144,
             "tie_word_embeddings": True, "vocab_size": 200064, "eos_token_id": 199999, "bos_token_id": 199999,
             "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 48, "long_factor": [1.5] * 48}}
GEMMA = {
    "architectures": ["GemmaForCausalLM"], "bos_token_id": 2, "eos_token_id": 1, "head_dim": 256, "hidden_act": "gelu",
    "hidden_size": 2048, "intermediate_size": 16384, "max_position_embeddings": 8192, "model_type": "gemma",
    "num_attention_heads": 8, "num_hidden_layers": 18, "num_key_value_heads": 1, "rms_norm_eps": 1e-06,
    "rope_theta": 10000.0, "vocab_size": 256000}
GEMMA2 = {
    "architectures": ["Gemma2ForCausalLM"], "attn_logit_softcapping": 50.0, "bos_token_id": 2, "eos_token_id": [1, 107],
    "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304, "intermediate_size": 9216,
    "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 8, "num_hidden_layers": 26,
    "num_key_value_heads": 4, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
    "sliding_window": 4096, "vocab_size": 256000}
GEMMA3 = {
    "architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attn_logit_softcapping": None, "bos_token_id": 2,
    "eos_token_id": [1, 106], "final_logit_softcapping": None, "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152, "intermediate_size": 6912,
    "max_position_embeddings": 32768, "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 26,
    "num_key_value_heads": 1, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
    "rope_scaling": None, "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6,
    "vocab_size": 262144}

# gpt-oss-20b's config.json (its MXFP4 quantization_config, rope_scaling + rope_theta)
GPT_OSS = {
    "architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0, "eos_token_id": 200002,
    "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880, "initial_context_length": 4096,
    "initializer_range": 0.02, "intermediate_size": 2880,
    "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(24)],
    "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64, "num_experts_per_tok": 4,
    "num_hidden_layers": 24, "num_key_value_heads": 8, "num_local_experts": 32, "output_router_logits": False,
    "pad_token_id": 199999,
    "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                       "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
    "rms_norm_eps": 1e-05, "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                                            "original_max_position_embeddings": 4096, "rope_type": "yarn",
                                            "truncate": False},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
    "tie_word_embeddings": False, "use_cache": True, "vocab_size": 201088}

# The newer families, in the form of their published config.json files (OLMo-2-1124-7B,
# granite-3.1-8b-instruct, SmolLM3-3B, OLMoE-1B-7B-0924)
OLMO2 = {
    "architectures": ["Olmo2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "eos_token_id": 100257,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008,
    "max_position_embeddings": 4096, "model_type": "olmo2", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "pad_token_id": 100277, "rms_norm_eps": 1e-06, "rope_scaling": None,
    "rope_theta": 500000, "tie_word_embeddings": False, "torch_dtype": "float32", "use_cache": True,
    "vocab_size": 100352}
GRANITE = {
    "architectures": ["GraniteForCausalLM"], "attention_bias": False, "attention_dropout": 0.1,
    "attention_multiplier": 0.0078125, "bos_token_id": 0, "embedding_multiplier": 12.0, "eos_token_id": 0,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 12800,
    "logits_scaling": 16.0, "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "granite",
    "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8, "pad_token_id": 0,
    "residual_multiplier": 0.22, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000000.0,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 49155}
SMOLLM3 = {
    "architectures": ["SmolLM3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": None,
    "eos_token_id": 128012, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 11008, "layer_types": ["full_attention"] * 36, "max_position_embeddings": 65536,
    "max_window_layers": 28, "mlp_bias": False, "model_type": "smollm3", "no_rope_layer_interval": 4,
    "no_rope_layers": [1, 1, 1, 0] * 9, "num_attention_heads": 16, "num_hidden_layers": 36, "num_key_value_heads": 4,
    "pad_token_id": 128004, "pretraining_tp": 2, "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 5000000.0,
    "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "bfloat16", "use_cache": False,
    "use_sliding_window": False, "vocab_size": 128256}
OLMOE = {
    "architectures": ["OlmoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "clip_qkv": None,
    "eos_token_id": 50279, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 1024, "max_position_embeddings": 4096, "model_type": "olmoe", "norm_topk_prob": False,
    "num_attention_heads": 16, "num_experts": 64, "num_experts_per_tok": 8, "num_hidden_layers": 16,
    "num_key_value_heads": 16, "output_router_logits": False, "pad_token_id": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": None, "rope_theta": 10000.0, "router_aux_loss_coef": 0.01, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 50304}

# granite-3.1-3b-a800m-instruct's form: Granite's multipliers, 40 experts top 8
GRANITE_MOE = {
    **{k: v for k, v in GRANITE.items() if k not in ("intermediate_size", "num_hidden_layers", "hidden_size")},
    "architectures": ["GraniteMoeForCausalLM"], "model_type": "granitemoe", "hidden_size": 1536,
    "intermediate_size": 512, "num_hidden_layers": 32, "num_attention_heads": 24, "num_key_value_heads": 8,
    "num_local_experts": 40, "num_experts_per_tok": 8, "attention_multiplier": 0.015625, "logits_scaling": 6.0,
    "output_router_logits": False, "router_aux_loss_coef": 0.0}

# ERNIE-4.5-0.3B-PT's form: interleaved rope (implied by the family), use_bias, tied, head_dim 128
ERNIE = {
    "architectures": ["Ernie4_5ForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 1024, "intermediate_size": 3072, "max_position_embeddings": 131072,
    "model_type": "ernie4_5", "num_attention_heads": 16, "num_hidden_layers": 18, "num_key_value_heads": 2,
    "pad_token_id": 0, "rms_norm_eps": 1e-05, "rope_theta": 500000, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "use_bias": False, "use_cache": False, "vocab_size": 103424}

# GLM-4-9B-0414's form: sandwich norms, fused gate_up, q/k/v biases, half-head interleaved rope
GLM4 = {
    "architectures": ["Glm4ForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
    "eos_token_id": [151329, 151336, 151338], "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 13696, "max_position_embeddings": 32768, "model_type": "glm4",
    "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 2, "pad_token_id": 151329,
    "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 151552}

# EXAONE-4.0-32B's form: post-norms, q/k norms, layer_types (3 local : 1 global), llama3 rope
EXAONE4 = {
    "architectures": ["Exaone4ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 361,
    "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120, "initializer_range": 0.02,
    "intermediate_size": 27392, "layer_types": ["sliding_attention"] * 3 + ["full_attention"] + (
        ["sliding_attention"] * 3 + ["full_attention"]) * 15, "max_position_embeddings": 131072,
    "model_type": "exaone4", "num_attention_heads": 40, "num_hidden_layers": 64, "num_key_value_heads": 8,
    "pad_token_id": 0, "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 16.0, "high_freq_factor": 4.0,
    "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "rope_theta": 1000000,
    "sliding_window": 4096, "sliding_window_pattern": "LLLG", "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "use_cache": True, "vocab_size": 102400}

# GLM-4.5-Air's form: a dense first layer, 128 routed experts top 8, sigmoid routing, one shared
# expert, q/k/v biases, half-head rope, one MTP layer in the checkpoint
GLM45_AIR = {
    "architectures": ["Glm4MoeForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
    "pad_token_id": 151329, "eos_token_id": [151329, 151336, 151338], "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 4096, "partial_rotary_factor": 0.5, "initializer_range": 0.02, "intermediate_size": 10944,
    "max_position_embeddings": 131072, "model_type": "glm4_moe", "moe_intermediate_size": 1408,
    "norm_topk_prob": True, "num_attention_heads": 96, "n_group": 1, "topk_group": 1, "n_routed_experts": 128,
    "n_shared_experts": 1, "routed_scaling_factor": 1.0, "num_experts_per_tok": 8, "first_k_dense_replace": 1,
    "num_hidden_layers": 46, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_scaling": None,
    "rope_theta": 1000000, "num_nextn_predict_layers": 1, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "use_cache": True, "use_qk_norm": False, "vocab_size": 151552}

# DeepSeek-V3's form: latent attention, yarn with mscale_all_dim, grouped sigmoid routing, the keys
# of DeepSeek's own code (scoring_func, topk_method, moe_layer_freq), an FP8-free copy
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1, "first_k_dense_replace": 3, "hidden_act": "silu",
    "hidden_size": 7168, "initializer_range": 0.02, "intermediate_size": 18432, "kv_lora_rank": 512,
    "max_position_embeddings": 163840, "model_type": "deepseek_v3", "moe_intermediate_size": 2048,
    "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": True,
    "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1, "pretraining_tp": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06, "rope_scaling": {
        "beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096, "type": "yarn"}, "rope_theta": 10000,
    "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "seq_aux": True, "tie_word_embeddings": False,
    "topk_group": 4, "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "use_cache": True, "v_head_dim": 128,
    "vocab_size": 129280}

# DeepSeek-V2-Lite's form: latent attention with q_proj, yarn (mscale 0.707), greedy softmax routing
DEEPSEEK_V2_LITE = {
    "architectures": ["DeepseekV2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "aux_loss_alpha": 0.001, "bos_token_id": 100000, "eos_token_id": 100001, "first_k_dense_replace": 1,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 10944,
    "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v2", "moe_intermediate_size": 1408,
    "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 64, "n_shared_experts": 2, "norm_topk_prob": False,
    "num_attention_heads": 16, "num_experts_per_tok": 6, "num_hidden_layers": 27, "num_key_value_heads": 16,
    "pretraining_tp": 1, "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707, "mscale_all_dim": 0.707,
                     "original_max_position_embeddings": 4096, "type": "yarn"}, "rope_theta": 10000,
    "routed_scaling_factor": 1.0, "scoring_func": "softmax", "seq_aux": True, "tie_word_embeddings": False,
    "topk_group": 1, "topk_method": "greedy", "torch_dtype": "bfloat16", "use_cache": True, "v_head_dim": 128,
    "vocab_size": 102400}


def config_seeds():
    put("config", "ok_tinyllama.json", json.dumps(LLAMA, indent=2))
    put("config", "ok_llama3.json", json.dumps(LLAMA3, indent=2))
    put("config", "ok_qwen2.json", json.dumps(QWEN2, indent=2))
    put("config", "ok_mistral.json", json.dumps(MISTRAL, indent=2))
    put("config", "ok_model_type_only.json",
        json.dumps({k: v for k, v in LLAMA.items() if k != "architectures"}))
    put("config", "ok_rope_parameters.json",
        json.dumps({**{k: v for k, v in LLAMA.items() if k not in ("rope_theta", "rope_scaling")},
                    "rope_parameters": {"rope_type": "default", "rope_theta": 50000.0}}))
    fam = {"qwen3": QWEN3, "phi3_mini": PHI3, "phi35_longrope": PHI35, "phi4_mini": PHI4_MINI, "gemma": GEMMA,
           "gemma2": GEMMA2, "gemma3": GEMMA3, "gpt_oss_20b": GPT_OSS, "olmo2_7b": OLMO2, "granite31_8b": GRANITE,
           "smollm3_3b": SMOLLM3, "olmoe_1b_7b": OLMOE, "granite31_moe_3b": GRANITE_MOE, "ernie45_0p3b": ERNIE,
           "glm4_9b_0414": GLM4, "exaone4_32b": EXAONE4, "glm45_air": GLM45_AIR,
           "glm45_grouped": {**GLM45_AIR, "n_group": 8, "topk_group": 4, "routed_scaling_factor": 2.5,
                             "use_qk_norm": True, "first_k_dense_replace": 3},
           "deepseek_v3": DEEPSEEK_V3,
           "deepseek_v3_fp8": {**DEEPSEEK_V3, "quantization_config": {
               "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}},
           "moonlight": {**DEEPSEEK_V3, "q_lora_rank": None, "n_group": 1, "topk_group": 1, "n_routed_experts": 64,
                         "num_experts_per_tok": 6, "first_k_dense_replace": 1, "n_shared_experts": 2,
                         "num_attention_heads": 16, "num_key_value_heads": 16, "hidden_size": 2048,
                         "rope_scaling": None, "rope_theta": 50000.0},
           "deepseek_v2_lite": DEEPSEEK_V2_LITE,
           "deepseek_v2": {**DEEPSEEK_V2_LITE, "q_lora_rank": 1536, "n_group": 8, "topk_group": 3,
                           "topk_method": "group_limited_greedy", "routed_scaling_factor": 16.0,
                           "n_routed_experts": 160, "num_attention_heads": 128, "num_key_value_heads": 128,
                           "hidden_size": 5120}}
    for name, d in fam.items():
        put("config", "ok_" + name + ".json", json.dumps(d, indent=2))
    put("config", "ok_mistral_window.json", json.dumps({**MISTRAL, "sliding_window": 4096}))
    put("config", "ok_qwen2_window.json", json.dumps({**QWEN2, "use_sliding_window": True, "sliding_window": 4096}))
    # transformers: a null window makes every layer a full one
    put("config", "ok_qwen2_window_null.json", json.dumps({**QWEN2, "use_sliding_window": True, "sliding_window": None}))
    put("config", "ok_qwen25_yarn.json", json.dumps({**QWEN2, "rope_scaling": {
        "type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}))
    put("config", "ok_rope_yarn.json", json.dumps({**LLAMA, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}))
    put("config", "ok_rope_linear.json", json.dumps({**LLAMA, "rope_scaling": {"type": "linear", "factor": 2.0}}))
    put("config", "ok_rope_dynamic.json", json.dumps({**LLAMA, "rope_scaling": {"type": "dynamic", "factor": 2.0}}))
    put("config", "ok_act_gelu.json", json.dumps({**LLAMA, "hidden_act": "gelu"}))
    put("config", "ok_llama_mlp_bias.json", json.dumps({**LLAMA, "attention_bias": True, "mlp_bias": True}))
    put("config", "ok_gemma3_nested_rope.json", json.dumps({
        **{k: v for k, v in GEMMA3.items() if k not in ("rope_theta", "rope_scaling", "rope_local_base_freq")},
        "layer_types": ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(26)],
        "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}}))

    def bad(name, base=LLAMA, **kw):
        d = dict(base)
        for k, v in kw.items():
            if v is ...:
                d.pop(k, None)
            else:
                d[k] = v
        put("config", "bad_" + name + ".json", json.dumps(d))
    bad("layers_1e9", num_hidden_layers=10**9)
    bad("gpt_oss_swiglu_limit", GPT_OSS, swiglu_limit=0)
    bad("gpt_oss_quant_awq", GPT_OSS, quantization_config={"quant_method": "awq", "bits": 4})
    bad("gpt_oss_layer_types", GPT_OSS, layer_types=["sliding_attention"] * 23)
    bad("granite_residual_zero", GRANITE, residual_multiplier=0)
    bad("smollm3_no_rope_short", SMOLLM3, no_rope_layers=[1, 1, 1, 0])
    bad("olmoe_clip_negative", OLMOE, clip_qkv=-8.0)
    bad("olmoe_head_dim", OLMOE, head_dim=64)
    bad("olmo2_rope_unknown", OLMO2, rope_scaling={"rope_type": "mrope"})
    bad("granite_moe_topk", GRANITE_MOE, num_experts_per_tok=41)
    bad("ernie_use_bias_string", ERNIE, use_bias="yes")
    bad("glm4_rotary_odd", GLM4, partial_rotary_factor=0.0079)
    bad("exaone4_pattern_string_alone", EXAONE4, layer_types=...)
    bad("glm45_groups_of_one", GLM45_AIR, n_group=128)
    bad("glm45_topk_group", GLM45_AIR, n_group=4, topk_group=5)
    bad("deepseek_v3_kv_heads", DEEPSEEK_V3, num_key_value_heads=8)
    bad("deepseek_v3_scoring_softmax", DEEPSEEK_V3, scoring_func="softmax")
    bad("deepseek_v3_fp8_e5m2", DEEPSEEK_V3, quantization_config={"quant_method": "fp8", "fmt": "e5m2"})
    bad("deepseek_v2_topk_missing", DEEPSEEK_V2_LITE, num_experts_per_tok=...)
    bad("deepseek_v2_noaux", DEEPSEEK_V2_LITE, topk_method="noaux_tc")
    bad("layers_negative", num_hidden_layers=-1)
    bad("vocab_huge", vocab_size=2**40)
    bad("hidden_string", hidden_size="2048")
    bad("hidden_missing", hidden_size=...)
    bad("arch_gpt2", architectures=["GPT2LMHeadModel"])
    bad("arch_empty", architectures=[])
    bad("rope_unknown", rope_scaling={"rope_type": "proportional", "factor": 4.0})
    bad("rope_llama3_partial", rope_scaling={"rope_type": "llama3", "factor": 8.0})
    bad("head_dim_inconsistent", num_attention_heads=30, num_key_value_heads=30)
    bad("kv_not_divisor", num_key_value_heads=5)
    bad("eos_too_many", eos_token_id=list(range(9)))
    bad("eos_bad_type", eos_token_id="2")
    bad("tie_number", tie_word_embeddings=1)
    bad("act_relu", hidden_act="relu")
    bad("rope_linear_no_factor", rope_scaling={"rope_type": "linear"})
    bad("rope_dynamic_zero", rope_scaling={"rope_type": "dynamic", "factor": 0})
    bad("partial_rotary_llama", partial_rotary_factor=0.5)
    bad("window_zero", MISTRAL, sliding_window=0)
    bad("window_negative", MISTRAL, sliding_window=-4)
    bad("window_fraction", MISTRAL, sliding_window=12.5)
    bad("qwen2_layer_types_short", QWEN2, layer_types=["full_attention"] * 3)
    bad("qwen2_layer_type_unknown", QWEN2, layer_types=["chunked_attention"] * 24)
    bad("qwen3_layer_types_sliding_no_window", QWEN3, layer_types=["sliding_attention"] * 28)
    bad("phi3_longrope_short_list", PHI35, rope_scaling={"type": "longrope", "short_factor": [1.0] * 47,
                                                         "long_factor": [1.0] * 48})
    bad("phi3_longrope_no_long", PHI35, rope_scaling={"type": "longrope", "short_factor": [1.0] * 48})
    bad("phi3_longrope_negative", PHI35, rope_scaling={"type": "longrope", "short_factor": [-1.0] * 48,
                                                       "long_factor": [1.0] * 48})
    bad("phi3_rope_linear", PHI3, rope_scaling={"type": "linear", "factor": 2.0})
    bad("phi4_partial_odd", PHI4_MINI, partial_rotary_factor=0.7)
    bad("gemma2_heads_not_dividing", GEMMA2, hidden_size=2300)
    bad("gemma2_softcap_zero", GEMMA2, attn_logit_softcapping=0.0)
    bad("gemma2_bidirectional", GEMMA2, use_bidirectional_attention=True)
    bad("gemma3_local_rope_scaled", GEMMA3, rope_parameters={
        "full_attention": {"rope_type": "default"}, "sliding_attention": {"rope_type": "linear", "factor": 2.0}})
    bad("gemma3_pattern_zero", GEMMA3, sliding_window_pattern=0)
    bad("gemma_query_scalar_zero", GEMMA2, query_pre_attn_scalar=0)
    bad("yarn_negative_beta", rope_scaling={"rope_type": "yarn", "factor": 4.0, "beta_fast": -2, "beta_slow": 1})
    put("config", "ok_yarn_equal_betas.json", json.dumps({**LLAMA, "rope_scaling": {
        "rope_type": "yarn", "factor": 4.0, "beta_fast": 2, "beta_slow": 2}}))
    bad("nested_rope_llama", rope_parameters={"full_attention": {"rope_type": "default"}}, rope_scaling=None)
    put("config", "bad_not_json.json", '{"hidden_size": 2048,')
    put("config", "bad_array.json", "[1, 2, 3]")
    put("config", "bad_empty.json", "")
    put("config", "bad_duplicate_key.json", '{"vocab_size": 10, "vocab_size": 20}')
    put("config", "bad_deep_nesting.json", "[" * 5000 + "]" * 5000)


def shrink_tokenizer(src, n_vocab):
    """The tokenizer.json at src with only ids < n_vocab and the merges among them."""
    with open(src, encoding="utf-8") as f:
        t = json.load(f)
    m = t["model"]
    vocab = {k: v for k, v in m["vocab"].items() if v < n_vocab}
    merges = []
    for mg in m.get("merges", []):
        a, b = mg.split(" ", 1) if isinstance(mg, str) else mg
        if a in vocab and b in vocab and (a + b) in vocab:
            merges.append(mg)
    m["vocab"] = vocab
    m["merges"] = merges
    added = [a for a in t.get("added_tokens", []) if a["id"] < n_vocab]
    t["added_tokens"] = added
    return t


def tokenizer_seeds():
    for name, n in (("tinyllama-1.1b-chat-v1.0", 600), ("gpt2", 600), ("llama-3-8b", 600)):
        src = os.path.join(SHARED, name, "tokenizer.json")
        if not os.path.exists(src):
            sys.exit(f"make_seeds.py: {src} is missing")
        t = shrink_tokenizer(src, n)
        put("tokenizer", f"ok_{name}_small.json", json.dumps(t, ensure_ascii=False))
    put("tokenizer", "bad_not_json.json", '{"model": {"type": "BPE", "vocab": {')
    put("tokenizer", "bad_empty.json", "")
    put("tokenizer", "bad_array.json", "[]")
    put("tokenizer", "bad_model_missing.json", '{"version": "1.0", "added_tokens": []}')
    put("tokenizer", "bad_vocab_wrong_type.json", '{"model": {"type": "BPE", "vocab": [1, 2], "merges": []}}')
    put("tokenizer", "bad_merge_unknown.json",
        '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a c"]}}')
    put("tokenizer", "bad_ids_huge.json",
        '{"model": {"type": "BPE", "vocab": {"a": 2147483647, "b": -5}, "merges": []}}')


REAL_TOKENIZERS = sorted(d for d in os.listdir(SHARED) if os.path.exists(os.path.join(SHARED, d, "tokenizer.json"))) \
    if os.path.isdir(SHARED) else []


def tokenizer_real_seeds():
    """fuzz_tokenizer_real: byte 0 picks a tokenizer (sorted folder names), byte 1 flags,
    2 bytes text length, the text, then ids as 4-byte words (value + 2 = the id)."""
    def inp(which, flags, text, ids=()):
        t = text.encode("utf-8") if isinstance(text, str) else text
        return bytes([which, flags]) + struct.pack("<H", len(t)) + t + b"".join(struct.pack("<I", i + 2) for i in ids)
    texts = ["Hello world", "  leading spaces and\ttabs\n\nnew lines", "caf\u00e9 na\u00efve \u65e5\u672c\u8a9e \U0001F600",
             "<s> <|endoftext|> <|begin_of_text|> [INST] special-looking text", "12345 3.14159 1e-10 0x1F",
             b"invalid \xff\xfe utf-8 \xc3 \xe2\x82"]
    for k, name in enumerate(REAL_TOKENIZERS):
        for j, text in enumerate(texts):
            put("tokenizer_real", f"any_{name}_{j}", inp(k, j % 4, text, ids=range(j * 7, j * 7 + 9)))
    if "tinyllama-1.1b-chat-v1.0" in REAL_TOKENIZERS:
        # <0x2C> <0x8B> "\u2581b": the byte run turns invalid after ',' was streamed; the
        # streaming decoder used to fail with INTERNAL ("invalid prefix" in the library)
        k = REAL_TOKENIZERS.index("tinyllama-1.1b-chat-v1.0")
        put("tokenizer_real", "regress_stream_byte_run_rewrites_emitted_text", inp(k, 0, "", ids=[47, 142, 289]))


def gen_input(engine, ops):
    return bytes(engine) + b"".join(bytes(o) for o in ops)


def generate_seeds():
    """fuzz_generate: see the decoding order in fuzz_generate.c. engine = [draft flags,
    backend, n_ctx, max_batch]; a generate op = [0, mask, n_predict+1, (fields), verify,
    n_draft+1, adaptive, stops, flags, prompt length, ids..., capacity, again]."""
    def gen(mask, n_predict, verify, n_draft, adaptive=0, stops=(), flags=3, prompt=(1, 20, 21, 22), cap=64, again=3,
            extra=b"", stop_after=None, lp=None, plp=0, plen=None, proc=None):
        st = bytes([len(stops)]) + b"".join(bytes([len(x), len(x)]) + x for x in stops)
        sa = b"" if stop_after is None else bytes([stop_after])
        # lp: the logprobs byte, read after `adaptive` when mask has bit 7 and (adaptive >> 3) % 16 == 3,
        # then plp, the prompt logprobs byte; plen: the prompt length byte (240..249: (plen - 240) * 12 ids)
        lpb = b"" if lp is None else bytes([lp, plp])
        # proc: the logits processors' bytes (fgen_decode_proc), read after `adaptive` when mask has
        # bit 7 and (adaptive >> 3) % 16 == 4
        if proc is not None:
            lpb = bytes(proc)
        return bytes([0, mask, n_predict + 1]) + extra + bytes([verify, n_draft + 1, adaptive]) + lpb + st + \
            bytes([flags]) + sa + bytes([len(prompt) if plen is None else plen]) + bytes(prompt) + bytes([cap, again])
    plain = [0, 1, 0, 0]
    spec = [1, 1, 0, 0]
    put("generate", "any_plain_greedy", gen_input(plain, [gen(2, 16, 0, 4)]))
    put("generate", "any_spec_greedy", gen_input(spec, [gen(2, 20, 2, 4)]))
    put("generate", "any_spec_rejection", gen_input(spec, [gen(32, 20, 1, 3, extra=struct.pack("<Q", 7))]))
    put("generate", "any_spec_match_adaptive", gen_input(spec, [gen(32, 30, 3, 2, adaptive=1, extra=struct.pack("<Q", 9))]))
    put("generate", "any_spec_stops", gen_input(spec, [gen(0, 40, 1, 4, stops=[b"a", b" the", b"\xef\xbf\xbd"])]))
    put("generate", "any_context_full", gen_input([1, 1, 140, 0], [gen(2, 60, 2, 5, prompt=tuple(range(3, 13)), cap=40)]))
    put("generate", "any_small_batch", gen_input([1, 1, 0, 170], [gen(2, 10, 0, 6, prompt=tuple(range(3, 40)))]))
    put("generate", "any_callback_stop", gen_input(spec, [gen(0, 30, 3, 4, flags=7, stop_after=5)]))
    # forward 4 tokens at 0, truncate, forward again at a fuzzed position
    put("generate", "any_forward_truncate", gen_input(spec, [bytes([2, 0, 6, 1, 3]) + bytes(range(10, 14)),
                                                              bytes([3, 0, 3]), bytes([2, 3, 6, 0, 3]) + bytes(range(20, 24))]))
    put("generate", "any_engine_other_vocab", gen_input([3, 1, 0, 0], []))
    # logprobs (0.4.1): byte lp = on (lp % 8 in 1..5; 7 -> 2, 6 -> -1), top = ((lp >> 3) % 16) % 6
    # (13 -> 20, 14 -> -1, 15 -> 21), bit 7: no logprob_callback
    lpa = 3 << 3  # adaptive byte selecting the logprobs branch (adaptive off, ignore_eos off)
    put("generate", "any_logprobs_spec_greedy_top3", gen_input(spec, [gen(2 | 128, 20, 2, 4, adaptive=lpa, lp=1 | 3 << 3)]))
    put("generate", "any_logprobs_spec_rejection_top20",
        gen_input(spec, [gen(32 | 128, 20, 1, 3, adaptive=lpa, extra=struct.pack("<Q", 7), lp=1 | 13 << 3)]))
    put("generate", "any_logprobs_spec_match_top0",
        gen_input(spec, [gen(32 | 128, 24, 3, 4, adaptive=lpa, extra=struct.pack("<Q", 5), lp=1)]))
    put("generate", "any_logprobs_plain_top5", gen_input(plain, [gen(2 | 128, 16, 0, 4, adaptive=lpa, lp=1 | 5 << 3)]))
    put("generate", "any_logprobs_callback_stop",
        gen_input(spec, [gen(128, 30, 3, 4, adaptive=lpa, flags=7, stop_after=5, lp=1 | 2 << 3)]))
    put("generate", "any_logprobs_stops",
        gen_input(spec, [gen(128, 40, 1, 4, adaptive=lpa, stops=[b"a", b" the"], lp=1 | 4 << 3)]))
    for name, lp in (("value_2", 7), ("value_minus1", 6), ("top_21", 1 | 15 << 3), ("top_minus1", 1 | 14 << 3),
                     ("no_callback", 1 | 128), ("top_without_logprobs", 2 << 3)):
        put("generate", "any_logprobs_bad_" + name, gen_input(spec, [gen(2 | 128, 8, 2, 4, adaptive=lpa, lp=lp)]))
    # prompt logprobs (0.4.1): byte plp = on (plp % 8 in 3..5; 7 -> 2, 6 -> -1), top = ((plp >> 3) % 16) % 4
    # (13 -> 20, 14 -> -1, 15 -> 21); lp = 0 keeps the callback with generated-token logprobs off
    long_prompt = tuple(3 + i % 40 for i in range(36))  # 36 ids: two prefill chunks of prompt rows
    put("generate", "any_prompt_logprobs_spec_greedy_top2",
        gen_input(spec, [gen(2 | 128, 12, 2, 4, adaptive=lpa, lp=1 | 3 << 3, plp=3 | 2 << 3)]))
    put("generate", "any_prompt_logprobs_only_long_top20",
        gen_input(spec, [gen(32 | 128, 8, 1, 3, adaptive=lpa, extra=struct.pack("<Q", 7), lp=0, plp=4 | 13 << 3,
                             prompt=long_prompt, plen=243)]))
    put("generate", "any_prompt_logprobs_plain_long",
        gen_input(plain, [gen(2 | 128, 6, 0, 4, adaptive=lpa, lp=1, plp=5, prompt=long_prompt, plen=243)]))
    for name, plp in (("value_2", 7), ("value_minus1", 6), ("top_21", 3 | 15 << 3), ("top_without", 1 << 3)):
        put("generate", "any_prompt_logprobs_bad_" + name,
            gen_input(spec, [gen(2 | 128, 8, 2, 4, adaptive=lpa, lp=1, plp=plp)]))
    put("generate", "any_prompt_logprobs_no_callback", gen_input(spec, [gen(2 | 128, 8, 2, 4, adaptive=lpa, lp=128, plp=3)]))
    # logits processors (0.5; fgen_decode_proc): k = count | count-mode << 2 | array-mode << 5, then per
    # bias entry (id byte, bias byte: (b - 128) * 0.8; 14 -> -100; 15 -> a fuzzed float), m = min_tokens |
    # stop-count << 3 | stop-mode << 5, the stop id bytes, p = presence | frequency << 3 | repetition << 6
    pra = 4 << 3  # adaptive byte selecting the processors branch
    good = [2, 5, 138, 7, 14, 3 | 1 << 3, 9, 5 | 4 << 3 | 1 << 6]  # 2 biases, min_tokens 3, stop id 9, 1.6 / 0.5 / 0.5
    put("generate", "any_proc_spec_greedy", gen_input(spec, [gen(2 | 128, 24, 2, 4, adaptive=pra, proc=good)]))
    put("generate", "any_proc_spec_rejection",
        gen_input(spec, [gen(32 | 128, 24, 1, 3, adaptive=pra, extra=struct.pack("<Q", 7), proc=good)]))
    put("generate", "any_proc_spec_match", gen_input(spec, [gen(32 | 128, 24, 3, 4, adaptive=pra, extra=struct.pack("<Q", 5),
                                                                proc=[1, 2, 200, 0, 4, 3 << 3 | 1 << 6])]))
    put("generate", "any_proc_plain_stop_id", gen_input(plain, [gen(2 | 128, 30, 0, 4, adaptive=pra,
                                                                    proc=[0, 2 << 3, 20, 21, 3])]))
    for name, proc in (("bias_id_outside", [1, 50, 130, 0, 3]), ("bias_nan", [1, 5, 15, 16, 0, 3]),
                       ("bias_count_minus1", [7 << 2, 0, 3]), ("bias_count_1025", [6 << 2, 0, 3]),
                       ("bias_null", [1 | 7 << 5, 5, 130, 0, 3]), ("min_tokens_minus1", [0, 7, 3]),
                       ("stop_id_outside", [0, 1 << 3, 49, 3]), ("stop_null", [0, 1 << 3 | 5 << 5, 9, 3]),
                       ("presence_2_4", [0, 0, 6]), ("repetition_100_5", [1, 5, 130, 0, 3 | 2 << 6])):
        put("generate", "any_proc_bad_" + name, gen_input(spec, [gen(2 | 128, 8, 2, 4, adaptive=pra, proc=proc)]))
    put("generate", "any_engine_cuda_or_reserved", gen_input([0xc0, 10, 0, 0], []))


def cli_seeds():
    """fuzz_cli: byte 0 picks generate / info / tokenize, the rest is argv split at NULs."""
    def argv(which, *args):
        return bytes([which]) + b"\0".join(a.encode() for a in args)
    put("cli", "any_generate_all", argv(0, "-m", "t", "-md", "d", "-p", "hi", "-n", "12", "--temp", "0.7", "--top-k", "5",
                                        "--top-p", "0.9", "--min-p", "0.1", "--seed", "42", "--draft-max", "3",
                                        "--adaptive", "--verify", "match", "--backend", "cpu", "--ctx", "256",
                                        "--ignore-eos", "--stop", "x", "--stop", "yz", "--json"))
    put("cli", "any_generate_aliases", argv(0, "--model", "t", "--model-draft", "d", "--prompt", "p", "--n-predict", "1",
                                            "-s", "1", "--draft", "1", "-c", "1", "--ctx-size", "2"))
    put("cli", "any_generate_help", argv(0, "-p", "x", "--help"))
    put("cli", "any_generate_bad_value", argv(0, "-p", "x", "-n", "1e3"))
    put("cli", "any_generate_needs_value", argv(0, "-p"))
    put("cli", "any_generate_unknown", argv(0, "--nope"))
    put("cli", "any_generate_floats", argv(0, "-p", "x", "--temp", "nan", "--top-p", "inf", "--min-p", "-0x1p-3"))
    put("cli", "any_generate_logprobs", argv(0, "-p", "x", "--logprobs", "20", "--json"))
    put("cli", "any_generate_procs", argv(0, "-p", "x", "--presence-penalty", "2", "--frequency-penalty", "-2",
                                          "--repetition-penalty", "1.3", "--min-tokens", "3", "--stop-token-id", "13",
                                          "--stop-token-id", "2", "--logit-bias", "5=-100", "--logit-bias", "7=0.5"))
    put("cli", "any_generate_procs_bad", argv(0, "-p", "x", "--logit-bias", "5=", "--logit-bias", "=1",
                                              "--stop-token-id", "-1", "--min-tokens", "x"))
    put("cli", "any_generate_logprobs_bad", argv(0, "-p", "x", "--logprobs", "21"))
    put("cli", "any_generate_regex", argv(0, "-p", "x", "--regex", "[0-9]{3}-[a-z]{2,4}", "--json"))
    put("cli", "any_generate_choice", argv(0, "-p", "x", "--choice", '["yes", "no"]'))
    put("cli", "any_generate_schema", argv(0, "-p", "x", "--json-schema", "schema.json", "-n", "64"))
    put("cli", "any_generate_two_constraints", argv(0, "-p", "x", "--json-object", "--regex", "a"))
    put("cli", "any_generate_regex_needs_value", argv(0, "-p", "x", "--regex"))
    put("cli", "any_batch_json_object", argv(3, "-f", "f", "--json-object", "--parallel", "2"))
    put("cli", "any_batch_refuses_logprobs", argv(3, "-f", "f", "--logprobs", "2"))
    put("cli", "any_generate_prompt_logprobs", argv(0, "-p", "x", "--prompt-logprobs", "20", "--logprobs", "0"))
    put("cli", "any_generate_prompt_logprobs_bad", argv(0, "-p", "x", "--prompt-logprobs", "-1"))
    put("cli", "any_batch_refuses_prompt_logprobs", argv(3, "-f", "f", "--prompt-logprobs", "2"))
    put("cli", "any_batch_prefix_cache", argv(3, "-f", "f", "--enable-prefix-caching", "--parallel", "2",
                                              "--no-enable-prefix-caching", "--jsonl"))
    put("cli", "any_info", argv(1, "-m", "dir", "--no-mmap"))
    put("cli", "any_info_incomplete", argv(1, "-m"))
    put("cli", "any_tokenize", argv(2, "-m", "d", "-p", "text", "--pieces", "--no-special", "--decode"))
    put("cli", "any_tokenize_both", argv(2, "-m", "d", "-p", "text", "-f", "file"))


def server_seeds():
    """fuzz_server: flags byte, then method, url, Authorization, Content-Length (NUL-terminated,
    empty = absent), then the body. Flags: bit 0 chat, bit 1 API key "s3cret", bit 2 model id
    "kjv-target" checked, bits 3-4 body limit (0, 64, 4096, 2 MiB), bits 5-7 chat family
    (specdec_chat_template_name index; 7 = the tokenizer's own). ok_* pass the head and the body."""
    families = ["llama3", "chatml", "llama2", "mistral", "zephyr", "phi3", "plain"]

    def req(body, chat=False, key=True, model=True, limit=3, family=7, method="POST", url=None,
            auth="Bearer s3cret", length=True):
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode("utf-8")
        flags = int(chat) | int(key) << 1 | int(model) << 2 | limit << 3 | family << 5
        url = url or ("/v1/chat/completions" if chat else "/v1/completions")
        cl = (str(len(body)) if length is True else length or "").encode()
        return bytes([flags]) + b"\0".join([method.encode(), url.encode(), auth.encode(), cl]) + b"\0" + body

    every_field = {"model": "kjv-target", "prompt": "And God said", "max_tokens": 16, "temperature": 0.7,
                   "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": -7, "stop": ["\n", "Amen"], "stream": True,
                   "stream_options": {"include_usage": True}, "n": 1, "n_draft": 4, "verify": "match",
                   "tree": [4, 2, 1], "draft_nodes": 12, "logprobs": None, "user": "u", "frobnicate": {"a": [1]}}
    put("server", "ok_completions_every_field", req(every_field))
    put("server", "ok_completions_ids", req({"prompt": [[1, 2, 3]], "max_tokens": 1}, key=False, model=False))
    put("server", "ok_completions_no_v1", req({"prompt": "x"}, url="/completions", length=False))
    conv = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Who made "}, {"type": "text", "text": "the sky?"}]},
            {"role": "assistant", "content": None}, {"role": "developer", "content": "d"},
            {"role": "tool", "content": "t"}, {"role": "user", "content": "\u00e9\u4e2d\U0001f600"}]
    chat_all = {"model": "kjv-target", "messages": conv, "max_completion_tokens": 8, "temperature": 0,
                "top_p": 1, "seed": 123456789012, "stop": "\n", "stream": False, "verify": "greedy",
                "tree": [2, 2], "draft_nodes": 0, "n_draft": 0}
    put("server", "ok_chat_every_field", req(chat_all, chat=True))
    simple = [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi"},
              {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Who made the heaven?"}]
    for i, f in enumerate(families):
        put("server", "ok_chat_" + f, req({"messages": simple, "max_tokens": 4}, chat=True, family=i))
        put("server", "ok_chat_%s_every_role" % f, req({"messages": conv}, chat=True, family=i))
        # regression (campaign of 2026-11-24): empty content with no system message left
        # llama2's scratch buffer unallocated and the renderer added 0 to its NULL pointer
        put("server", "ok_chat_%s_empty_content" % f,
            req({"messages": [{"role": "user", "content": ""}, {"role": "assistant", "content": ""},
                              {"role": "user", "content": ""}]}, chat=True, family=i))
    # fields of the OpenAI / vLLM APIs specdec does not implement: the defaults a UI sends pass,
    # any other value is refused (sd_nf_fields in tools/server/sd_server_request.c)
    defaults = {"presence_penalty": 0, "frequency_penalty": 0.0, "repetition_penalty": 1, "logit_bias": {},
                "response_format": {"type": "text"}, "tools": [], "functions": [], "tool_choice": "auto",
                "function_call": "none", "best_of": 1, "echo": False, "suffix": "", "min_tokens": 0,
                "stop_token_ids": [], "prompt_logprobs": None, "include_stop_str_in_output": False,
                "use_beam_search": False, "allowed_token_ids": None, "bad_words": [], "guided_json": None,
                "guided_regex": None, "guided_choice": None, "guided_grammar": None, "structured_outputs": None,
                "user": "u", "metadata": {"k": "v"}, "store": False, "service_tier": "auto",
                "parallel_tool_calls": True, "ignore_eos": True}
    put("server", "ok_completions_unsupported_defaults", req({"prompt": "x", "logprobs": None, **defaults}))
    put("server", "ok_chat_unsupported_defaults",
        req({"messages": simple, "logprobs": False, "top_logprobs": 0, **defaults}, chat=True))
    # the logits processors: values in range pass (whether an id is in the vocabulary is the
    # server's check, not the parser's); out of range, wrong types and the limits are refused
    procs = {"presence_penalty": 0.5, "frequency_penalty": -1, "repetition_penalty": 1.2,
             "logit_bias": {"50256": -100, "7": 2.5}, "min_tokens": 3, "stop_token_ids": [2, 13],
             "allowed_token_ids": [1, 5, 50256], "bad_words": [" x", "y z"], "include_stop_str_in_output": True}
    for name, value in procs.items():
        put("server", "ok_proc_" + name, req({"prompt": "x", name: value}))
    put("server", "ok_chat_procs", req({"messages": simple, "max_tokens": 8, **procs}, chat=True))
    put("server", "ok_proc_limits", req({"prompt": "x", "logit_bias": {str(i): -1 for i in range(1024)},
                                         "stop_token_ids": list(range(64))}))
    bad_procs = {"presence_penalty": 2.5, "frequency_penalty": "1", "repetition_penalty": 0,
                 "logit_bias_key": {"logit_bias": {"-5": 1}}, "logit_bias_value": {"logit_bias": {"5": 101}},
                 "logit_bias_twice": '{"prompt": "x", "logit_bias": {"5": 1, "5": 2}}',
                 "logit_bias_1025": {"logit_bias": {str(i): -1 for i in range(1025)}},
                 "min_tokens": -1, "min_tokens_over_max": {"min_tokens": 5, "max_tokens": 4},
                 "stop_token_ids": [-1], "stop_token_ids_65": {"stop_token_ids": list(range(65))},
                 "allowed_token_ids": [], "allowed_token_ids_neg": {"allowed_token_ids": [3, -1]},
                 "allowed_token_ids_str": {"allowed_token_ids": "1"}, "bad_words": [" \t"],
                 "bad_words_type": {"bad_words": [1]}, "bad_words_129": {"bad_words": ["w"] * 129},
                 "include_stop_str_in_output": 1}
    for name, value in bad_procs.items():
        body = value if isinstance(value, str) else dict({"prompt": "x"}, **value) if isinstance(value, dict) \
            else {"prompt": "x", name: value}
        put("server", "bad_proc_" + name, req(body))
    refused = {"functions": [{"name": "f"}], "function_call": {"name": "f"}, "best_of": 2,
               "suffix": "x", "use_beam_search": True}
    for name, value in refused.items():
        put("server", "bad_unsupported_" + name, req({"prompt": "x", name: value}))
    # tool calling (tools/server/sd_server_tools.c): each tool_choice, a conversation with a call and
    # its result, chat_template_kwargs; bad shapes, duplicates, an unknown name, the limits
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "w", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
        {"function": {"name": "search", "parameters": {"$defs": {"q": {"type": "string"}},
                                                       "properties": {"q": {"$ref": "#/$defs/q"}}}}}]
    calls = simple[:2] + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
        {"id": "c2", "type": "function", "function": {"name": "search", "arguments": "not json"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "<tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call>"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "[TOOL_CALLS] [{\"name\": \"y\"}]"}]}]
    for i, (label, extra) in enumerate([("none", {"tool_choice": "none"}), ("auto", {}),
                                         ("required", {"tool_choice": "required"}),
                                         ("named", {"tool_choice": {"type": "function", "function": {"name": "search"}}})]):
        put("server", "ok_chat_tools_" + label, req(dict({"messages": calls, "tools": tools}, **extra), chat=True,
                                                    family=(1, 6, 7, 0)[i]))
    put("server", "ok_chat_template_kwargs",
        req({"messages": simple, "chat_template_kwargs": {"enable_thinking": False, "x": [1, {"y": None}]}}, chat=True))
    put("server", "ok_chat_template_kwargs_refused_key",
        req({"messages": simple, "chat_template_kwargs": {"chat_template": "x", "continue_final_message": True}},
            chat=True, family=1))
    # reasoning outputs (tools/server/sd_server_reasoning.c): the body's bytes also run through the
    # split as a model's output, so bodies holding think tags, split and unclosed, and tool calls
    for label, text in [("closed", "<think>a</think>b"), ("unclosed", "<think>plan <tool_call>{}"),
                        ("no_start", "x</think><tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"),
                        ("partial", "<thi</thin</think"), ("twice", "</think></think><think>")]:
        put("server", "ok_chat_reasoning_" + label,
            req({"messages": [{"role": "user", "content": text}], "chat_template_kwargs": {"enable_thinking": False},
                 "response_format": {"type": "json_object"}}, chat=True))
    # tool-call formats with tagged arguments (tools/server/sd_server_tools_xml.c): the body's bytes
    # after the JSON, as a model's output (the body itself is then refused)
    for label, text in [("glm45", "a<tool_call>f\n<arg_key>s</arg_key>\n<arg_value> x </arg_value><arg_key>n"
                                  "</arg_key><arg_value>{'k': (1, 0x1f, 1e400)}</arg_value></tool_call>"),
                        ("glm45_cut", "<tool_call>g\n<arg_key>a</arg_key>x<arg_key>b</arg_key> <arg_value>[1, \"\\u00e9\""
                                      "</arg_value></tool_call><tool_call>f\n<arg_key>x</arg_key><arg_value>1</arg_va"),
                        ("qwen3_coder", "a<tool_call>\n<function=f>\n<parameter=n>\n 0_7 \n</parameter>\n<parameter=r>\n2.5"
                                        "\n</parameter>\n<parameter=o>\n{'k': (1, b'x')}\n</parameter>\n</function>\n</tool_call>"),
                        ("qwen3_coder_cut", "<function=h>\n<parameter=q>\n1<parameter=b>TRUE</function><tool_call>"
                                            "<function=g><parameter=z>\n[1, {2}]\n"),
                        ("deepseek_v3", "a<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>function"
                                        "<\uff5ctool\u2581sep\uff5c>f\n```json\n{\"a\": 1}\n```<\uff5ctool\u2581call\u2581end\uff5c>"
                                        "<\uff5ctool\u2581call\u2581begin\uff5c>function<\uff5ctool\u2581sep\uff5c>g\n```json\n")]:
        put("server", "any_chat_tools_text_" + label,
            req(json.dumps({"messages": simple}) + "\n" + text, chat=True))
    bad_tools = {"dup": {"tools": [tools[0], tools[0]]}, "not_list": {"tools": {"a": 1}},
                 "unknown_named": {"tools": tools, "tool_choice": {"type": "function", "function": {"name": "z"}}},
                 "choice_without_tools": {"tool_choice": "required"},
                 "required_and_regex": {"tools": tools, "tool_choice": "required", "guided_regex": "a"},
                 "129": {"tools": [{"function": {"name": "f%d" % i}} for i in range(129)]},
                 "deep": {"tools": [{"function": {"name": "f", "parameters": json.loads("{\"a\":" * 40 + "{}" + "}" * 40)}}]},
                 "kwargs_list": {"chat_template_kwargs": [1]},
                 "tool_calls_shape": {"messages": simple[:1] + [{"role": "assistant", "tool_calls": [{"id": "x"}]}]}}
    for name, extra in bad_tools.items():
        put("server", "bad_chat_tools_" + name, req(dict({"messages": simple}, **extra), chat=True))
    # structured output (parse_guided): one constraint per request, each field's forms; the parser
    # checks shapes and sizes, the grammar compile (not fuzzed here) the spec itself
    schema = {"type": "object", "properties": {"a": {"enum": [1, "\u00e9"]}, "b": {"type": "array", "maxItems": 2}},
              "required": ["a"]}
    guided_ok = {"regex": {"guided_regex": "[0-9]{3}-[a-z]{2,4}"}, "choice": {"guided_choice": ["yes", "no", ""]},
                 "json": {"guided_json": schema}, "json_string": {"guided_json": json.dumps(schema)},
                 "response_format_object": {"response_format": {"type": "json_object"}},
                 "response_format_schema": {"response_format": {"type": "json_schema", "json_schema": {
                     "name": "n", "strict": True, "schema": schema}}},
                 "structured_outputs_json_object": {"structured_outputs": {"json_object": True}},
                 "structured_outputs_regex": {"structured_outputs": {"regex": "a+", "disable_any_whitespace": True}},
                 "backend_named": {"guided_choice": ["a"], "guided_decoding_backend": "xgrammar",
                                   "guided_whitespace_pattern": None},
                 "grammar": {"guided_grammar": "root ::= [a-z]+ (\" \" [a-z]+)*"},
                 "structured_outputs_grammar": {"structured_outputs": {"grammar": "root ::= \"a\" | \"b\""}},
                 "llama_grammar": {"grammar": "root ::= x\nx ::= [0-9]{1,3}"}}
    for name, value in guided_ok.items():
        put("server", "ok_guided_" + name, req({"prompt": "x", **value}))
    put("server", "ok_chat_guided_schema", req({"messages": simple, **guided_ok["response_format_schema"]},
                                               chat=True))
    guided_bad = {"two": {"guided_regex": "a", "guided_choice": ["a"]},
                  "two_kinds": {"response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a"}},
                  "regex_type": {"guided_regex": ["a"]}, "choice_empty": {"guided_choice": []},
                  "choice_item": {"guided_choice": ["a", 1]}, "json_type": {"guided_json": 3},
                  "schema_missing": {"response_format": {"type": "json_schema", "json_schema": {"name": "n"}}},
                  "schema_bool": {"response_format": {"type": "json_schema", "json_schema": {"schema": True}}},
                  "format_type": {"response_format": {"type": "xml"}},
                  "structural_tag": {"response_format": {"type": "structural_tag"}},
                  "structured_empty": {"structured_outputs": {}},
                  "structured_grammar_type": {"structured_outputs": {"grammar": 5}},
                  "grammar_two": {"guided_regex": "a", "grammar": "root ::= x"},
                  "whitespace": {"guided_json": {}, "guided_whitespace_pattern": " *"},
                  "too_long": {"guided_regex": "a" * (64 * 1024 + 1)}}
    for name, value in guided_bad.items():
        put("server", "bad_guided_" + name, req({"prompt": "x", **value}))
    put("server", "bad_unsupported_wrong_type", req({"prompt": "x", "logit_bias": [], "user": 5}))
    put("server", "ok_completions_logprobs", req({"prompt": "x", "logprobs": 5}))
    put("server", "ok_chat_logprobs", req({"messages": simple, "logprobs": True, "top_logprobs": 20}, chat=True))
    put("server", "bad_logprobs_21", req({"prompt": "x", "logprobs": 21}))
    put("server", "bad_chat_logprobs_int", req({"messages": simple, "logprobs": 1}, chat=True))
    put("server", "bad_top_logprobs_without_logprobs", req({"messages": simple, "top_logprobs": 2}, chat=True))
    put("server", "bad_ignore_eos_type", req({"prompt": "x", "ignore_eos": "true"}))
    # echo (completions; chat refuses it) and vLLM's prompt_logprobs (0..20, not with stream)
    put("server", "ok_completions_echo_logprobs", req({"prompt": "x y", "echo": True, "logprobs": 1, "max_tokens": 1}))
    put("server", "ok_completions_echo_ids_n", req({"prompt": [1, 2, 3], "echo": True, "n": 2}))
    put("server", "ok_completions_prompt_logprobs", req({"prompt": "x y", "prompt_logprobs": 20, "echo": True}))
    put("server", "ok_chat_prompt_logprobs", req({"messages": simple, "prompt_logprobs": 0}, chat=True))
    put("server", "bad_chat_echo", req({"messages": simple, "echo": True}, chat=True))
    put("server", "bad_echo_type", req({"prompt": "x", "echo": "yes"}))
    put("server", "bad_prompt_logprobs_21", req({"prompt": "x", "prompt_logprobs": 21}))
    put("server", "bad_prompt_logprobs_stream", req({"prompt": "x", "prompt_logprobs": 1, "stream": True}))
    # vLLM's cache_salt: a non-empty string (the prefix cache's tenant)
    put("server", "ok_cache_salt", req({"prompt": "x y z", "cache_salt": "tenant-\u00e9", "n": 2}))
    put("server", "ok_chat_cache_salt_null", req({"messages": simple, "cache_salt": None}, chat=True))
    put("server", "bad_cache_salt_empty", req({"prompt": "x", "cache_salt": ""}))
    put("server", "bad_cache_salt_type", req({"prompt": "x", "cache_salt": 3}))
    # several choices: a batch of prompts (texts or id lists) and n, up to the caps (64 each, 64 in all)
    put("server", "ok_prompt_batch", req({"prompt": ["a", "b", "c"], "max_tokens": 2}))
    put("server", "ok_prompt_batch_ids", req({"prompt": [[1, 2], [3], [4, 5, 6]], "logprobs": 2}))
    put("server", "ok_prompt_batch_64", req({"prompt": ["p"] * 64}))
    put("server", "ok_n_three_seeded", req({"prompt": "x", "n": 3, "seed": 5, "stream": True,
                                            "stream_options": {"include_usage": True}}))
    put("server", "ok_n_64", req({"prompt": "x", "n": 64}))
    put("server", "ok_batch_times_n", req({"prompt": ["a", "b"], "n": 32, "logprobs": 1}))
    put("server", "ok_chat_n_four", req({"messages": [{"role": "user", "content": "hi"}], "n": 4, "logprobs": True,
                                         "top_logprobs": 2}, chat=True))
    put("server", "bad_chat_n_65", req({"messages": [{"role": "user", "content": "hi"}], "n": 65}, chat=True))
    put("server", "ok_health_without_key", req("{\"prompt\": \"x\"}", method="GET", url="/health", auth=""))
    bad = {
        "bad_json": "{\"prompt\": \"x\",",
        "bad_trailing": "{\"prompt\": \"x\"} {}",
        "bad_not_object": "[1, 2]",
        "bad_empty": "",
        "bad_prompt_type": {"prompt": 5},
        "bad_prompt_ids_negative": {"prompt": [1, -2]},
        "bad_prompt_batch_mixed": {"prompt": ["a", [1, 2]]},
        "bad_prompt_batch_empty_ids": {"prompt": [[1], []]},
        "bad_prompt_batch_65": {"prompt": ["p"] * 65},
        "bad_max_tokens_zero": {"prompt": "x", "max_tokens": 0},
        "bad_max_tokens_type": {"prompt": "x", "max_tokens": "ten"},
        "bad_temperature": {"prompt": "x", "temperature": 2.5},
        "bad_top_p_zero": {"prompt": "x", "top_p": 0},
        "bad_seed_fraction": {"prompt": "x", "seed": 0.5},
        "bad_stop_empty": {"prompt": "x", "stop": [""]},
        "bad_stop_five": {"prompt": "x", "stop": ["a", "b", "c", "d", "e"]},
        "bad_stream_type": {"prompt": "x", "stream": "yes"},
        "bad_n_zero": {"prompt": "x", "n": 0},
        "bad_n_65": {"prompt": "x", "n": 65},
        "bad_n_fraction": {"prompt": "x", "n": 1.5},
        "bad_n_times_prompts": {"prompt": ["a", "b", "c"], "n": 22},
        "bad_n_draft": {"prompt": "x", "n_draft": 17},
        "bad_verify": {"prompt": "x", "verify": "maybe"},
        "bad_tree_zero": {"prompt": "x", "tree": [0]},
        "bad_tree_too_many_nodes": {"prompt": "x", "tree": [64, 64]},
        "bad_tree_too_deep": {"prompt": "x", "tree": [1] * 17},
        "bad_tree_type": {"prompt": "x", "tree": "2"},
        "bad_tree_huge": {"prompt": "x", "tree": [1e300]},
        "bad_draft_nodes": {"prompt": "x", "draft_nodes": 65},
        "bad_unknown_model": {"model": "gpt-9", "prompt": "x"},
        # a model name whose quoted copy in the message is cut inside a two-byte character
        "bad_model_name_cut_utf8": {"model": "m" * 119 + "\u00e9" * 8, "prompt": "x"},
    }
    for name, body in bad.items():
        put("server", name, req(body))
    put("server", "bad_invalid_utf8", req(b'{"prompt": "\xff\xfe x"}'))
    put("server", "bad_overlong_utf8", req(b'{"prompt": "\xc0\xaf"}'))
    put("server", "bad_chat_empty_messages", req({"messages": []}, chat=True))
    put("server", "bad_chat_role", req({"messages": [{"role": "wizard", "content": "x"}]}, chat=True))
    put("server", "bad_chat_image_part", req({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
                                             chat=True))
    ok_body = {"prompt": "x"}
    put("server", "bad_auth_missing", req(ok_body, auth=""))
    put("server", "bad_auth_wrong", req(ok_body, auth="Bearer s3cre"))
    put("server", "bad_auth_no_bearer", req(ok_body, auth="s3cret"))
    put("server", "bad_path", req(ok_body, url="/v1/embeddings"))
    put("server", "bad_method", req(ok_body, method="GET"))
    put("server", "bad_declared_length", req(ok_body, limit=0))
    put("server", "bad_declared_length_huge", req(ok_body, length="99999999999999999999999999"))


def jinja_seeds():
    """fuzz_jinja: byte 0 flags (bit 0 add_generation_prompt, bit 1 a tools list, bits 2-3 the
    messages: role/content, tool calls, content parts, none; bit 4 extra variables), then the
    template text. ok_<file>: every published template of tests/chat/templates in the supported
    subset, the flags cycling over the conversations; bad_*: what specdec refuses at load
    (tests/chat/jinja_snippets.py REFUSED and the refused published ones); snippet_*: the
    language-feature snippets (any outcome: their variables are not given)."""
    sys.path.insert(0, os.path.join(HERE, "..", "chat"))
    from jinja_snippets import REFUSED, SNIPPETS
    tdir = os.path.join(HERE, "..", "chat", "templates")
    manifest = json.load(open(os.path.join(tdir, "manifest.json"), encoding="utf-8"))
    flags = [0x01, 0x07, 0x19, 0x00, 0x0B, 0x0D]
    for i, m in enumerate(manifest):
        with open(os.path.join(tdir, m["file"]), "rb") as f:
            text = f.read()
        stem = m["file"][:-len(".jinja")]
        put("jinja", ("bad_" if "refused" in m else "ok_") + stem, bytes([flags[i % len(flags)]]) + text)
    for i, (t, _) in enumerate(REFUSED):
        put("jinja", "bad_refused_%02d" % i, b"\x01" + t.encode("utf-8"))
    k = 0
    for group, snippets in SNIPPETS:
        for t in snippets:
            put("jinja", "snippet_%s_%02d" % (group, k), bytes([k & 0x1f]) + t.encode("utf-8"))
            k += 1


# ---- eagle3 (fuzz_eagle3.c) --------------------------------------------------------------
E3_V = 40
E3_TARGET_H = {0: 8, 1: 12}  # T0: 8 layers, T1: 3 layers (fuzz_eagle3.c fe_tspec)


def e3_b0(raw, target=0, mode=0, tree=False, second=False, budget=False, small_ctx=False):
    """Header byte 0 (fuzz_eagle3.c): raw, target, verify mode (0 greedy, 1 match, 2 rejection), tree,
    a second call, a node budget, n_ctx 24."""
    return bytes([int(raw) | target << 1 | mode << 2 | int(tree) << 4 | int(second) << 5 | int(budget) << 6 |
                  int(small_ctx) << 7])


def e3_gen_header(raw, b1=3, n_predict=12, sampling=0, prompt=5, no_mmap=False, **kw):
    return e3_b0(raw, **kw) + bytes([b1, (n_predict - 1) | (0x80 if no_mmap else 0), sampling, prompt])


def e3_head(layout="flat", dtype="F32", H=8, tH=8, nH=2, nKV=1, hd=None, F=16, vd=None, d2t=False, t2d=False,
            embed=False, bias=False, fc_norm=False, nbfc=False, cfg=None, layer_cfg=None, top_ids=None,
            eagle_config=None, drop=(), shapes=None, dtypes=None, full_data=False, misalign=False, seed=0):
    """(config.json text, safetensors bytes) of a head for fuzz_eagle3's raw form. d2t / t2d (with their
    bytes) come first in the data region; the float tensors' bytes are left out (the target's fill
    completes them) unless full_data."""
    rng = np.random.default_rng(seed)
    V = E3_V
    hdim = hd or H // nH
    vd = vd or V
    pfx = "midlayer." if layout == "flat" else "layers.0."
    sel = np.sort(rng.choice(V, vd, replace=False)) if vd < V else np.arange(V)
    tens = []
    dtypes = dtypes or {}
    if d2t:
        v = sel - np.arange(vd)
        dt = dtypes.get("d2t", "I64")
        tens.append(("d2t", dt, [vd], v.astype("<i8" if dt == "I64" else "<f4").tobytes()))
    if t2d:
        m = np.zeros(V, dtype=np.uint8)
        m[sel] = 1
        tens.append(("t2d", dtypes.get("t2d", "BOOL"), [V], m.tobytes()))
    fl = [("fc.weight", [H, 3 * tH])]
    if bias:
        fl.append(("fc.bias", [H]))
    fl += [("fc_norm.%d.weight" % i, [tH]) for i in range(3 if fc_norm else 0)]
    if nbfc:
        fl.append(("input_norm.weight", [3 * tH]))
    fl += [(pfx + n + ".weight", [H]) for n in ("input_layernorm", "hidden_norm", "post_attention_layernorm")]
    fl += [(pfx + "self_attn.q_proj.weight", [nH * hdim, 2 * H]), (pfx + "self_attn.k_proj.weight", [nKV * hdim, 2 * H]),
           (pfx + "self_attn.v_proj.weight", [nKV * hdim, 2 * H]), (pfx + "self_attn.o_proj.weight", [H, nH * hdim]),
           (pfx + "mlp.gate_proj.weight", [F, H]), (pfx + "mlp.up_proj.weight", [F, H]),
           (pfx + "mlp.down_proj.weight", [H, F]), ("norm.weight", [H]), ("lm_head.weight", [vd, H])]
    if embed:
        fl.append(("embed_tokens.weight", [V, H]))
    size = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "BOOL": 1}
    for name, shape in sorted(fl):
        if name in drop:
            continue
        shape = (shapes or {}).get(name, shape)
        dt = dtypes.get(name, dtype)
        raw = None
        if full_data:
            a = (rng.standard_normal(int(np.prod(shape))) * 0.3).astype(np.float32)
            raw = a.tobytes() if dt == "F32" else a.astype(np.float16).tobytes() if dt == "F16" else \
                (a.view(np.uint32) >> 16).astype("<u2").tobytes()
        tens.append((name, dt, shape, raw))
    hdr, off, data = {"__metadata__": {"format": "pt"}}, 0, b""
    for name, dt, shape, raw in tens:
        n = int(np.prod(shape)) * size[dt]
        hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
        if raw is not None and len(data) == hdr[name]["data_offsets"][0]:
            data += raw
    hj = json.dumps(hdr, separators=(",", ":")).encode()
    hj += b" " * ((-len(hj) % 8) + (1 if misalign else 0))
    st = struct.pack("<Q", len(hj)) + hj + data
    layer = {"model_type": "llama", "hidden_size": H, "intermediate_size": F, "num_hidden_layers": 1,
             "num_attention_heads": nH, "num_key_value_heads": nKV, "rms_norm_eps": 1e-5, "vocab_size": V,
             "max_position_embeddings": 2048, "hidden_act": "silu", "tie_word_embeddings": False,
             "rope_theta": 10000.0}
    if hd:
        layer["head_dim"] = hd
    layer.update(layer_cfg or {})
    extra = {"target_hidden_size": tH}
    if vd != V or d2t or t2d:
        extra["draft_vocab_size"] = vd
    if bias:
        extra["bias"] = True
    if fc_norm:
        extra["fc_norm"] = True
    if nbfc:
        extra["norm_before_fc"] = True
    if top_ids is not None:
        extra["eagle_aux_hidden_state_layer_ids"] = top_ids
    extra.update(cfg or {})
    if layout == "flat":
        conf = dict(layer, architectures=["LlamaForCausalLMEagle3"], **extra)
        conf["eagle_config"] = eagle_config if eagle_config is not None else {"use_aux_hidden_state": True}
    else:
        conf = dict(architectures=["Eagle3Speculator"], speculators_model_type="eagle3",
                    transformer_layer_config=layer, **extra)
        if eagle_config is not None:
            conf["eagle_config"] = eagle_config
    return json.dumps(conf), st


def e3_raw(head, fill=True, **hdr):
    cfg, st = head
    return e3_gen_header(True, **hdr) + cfg.encode() + b"\0" + bytes([1 if fill else 0]) + st


def e3_gen(g0=0, g1=0, g6=0, g2=0, g3=0, g4=0, ids=(0, 0, 0), g5=0, g5b=0, w=0, inject=(), corrupt=(0, 0), **hdr):
    """Generated form: the decode order of fuzz_eagle3.c (shape g0 g1 g6, map g2 g3, capture g4 + 3 ids,
    layer g5 g5b, weights w (+ 3 bytes per injection: w bits 6-7), corruption which how)."""
    w = (w & 0x3f) | len(inject) << 6
    return e3_gen_header(False, **hdr) + bytes([g0, g1, g6, g2, g3, g4, *ids, g5, g5b, w]) + \
        b"".join(bytes(i) for i in inject) + bytes(corrupt)


def eagle3_seeds():
    """fuzz_eagle3: raw heads (config.json + safetensors, data completed by the target) in both layouts
    and the three dtypes for both targets, the bad heads of tests/eagle3/make_heads.py in raw form, and
    generated heads (a compact description the target expands)."""
    base = dict(layout="flat", dtype="F32", vd=24, d2t=True, t2d=True)
    ok = {
        # EAGLE / SpecForge: F32, d2t + t2d, the target's embedding, default capture rule (T0: hs[2, 4, 5])
        "ok_raw_flat_f32_d2t_t2d": e3_raw(e3_head(**base), b1=3),
        # sglang: BF16, own embedding, fc.bias, llama3 RoPE, head_dim 6 != H / nH, SpecForge ids +1
        "ok_raw_flat_bf16_embed_bias_llama3": e3_raw(e3_head(
            dtype="BF16", embed=True, bias=True, hd=6, vd=40, d2t=True, t2d=True,
            layer_cfg={"rope_theta": 500000.0, "rope_scaling": {
                "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16}},
            eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 3, 6]}), mode=1, tree=True, b1=0x29),
        # T1 (3 layers): explicit hs ids, F16, d2t only, rejection
        "ok_raw_flat_f16_t1_ids": e3_raw(e3_head(dtype="F16", H=12, tH=12, hd=6, vd=33, d2t=True,
                                                 top_ids=[0, 1, 3]), target=1, mode=2, b1=2, sampling=0x2d),
        # speculators (vLLM): F16, t2d only, top-level ids incl. hs[L], fc_norm + norm_output
        "ok_raw_spec_f16_t2d_fc_norm": e3_raw(e3_head(layout="speculators", dtype="F16", vd=30, t2d=True,
                                                      fc_norm=True, top_ids=[2, 5, 8], cfg={"norm_output": True}),
                                              mode=2, tree=True, budget=True, b1=9),
        # speculators: F32, full vocabulary, norm_before_fc, own embedding, norm_before_residual false, MHA
        "ok_raw_spec_f32_fullvocab": e3_raw(e3_head(layout="speculators", nKV=2, embed=True, nbfc=True,
                                                    cfg={"norm_before_residual": False}), mode=1, second=True),
        # speculators: BF16, d2t + t2d, misaligned data, a short context, no mmap
        "ok_raw_spec_bf16_misaligned": e3_raw(e3_head(layout="speculators", dtype="BF16", vd=16, d2t=True,
                                                      t2d=True, misalign=True), small_ctx=True, no_mmap=True),
        # a complete file (nothing for the fill to do)
        "ok_raw_flat_f32_full_data": e3_raw(e3_head(**base, full_data=True, seed=3), fill=False, n_predict=6),
    }
    for name, data in ok.items():
        put("eagle3", name, data)
    # tests/eagle3/make_heads.py's bad heads, on the first raw head
    full = e3_head(**base, full_data=True, seed=4)
    pfx = "midlayer."
    bad = {
        "truncated": e3_raw((full[0], full[1][:-100]), fill=False),
        "q_shape": e3_raw(e3_head(**base, shapes={pfx + "self_attn.q_proj.weight": [8, 8]})),
        "no_lm_head": e3_raw(e3_head(**base, drop=("lm_head.weight",))),
        "d2t_dtype": e3_raw(e3_head(**base, dtypes={"d2t": "F32"})),
        "aux_range": e3_raw(e3_head(**base, top_ids=[2, 4, 9])),
        "aux_list": e3_raw(e3_head(**base, top_ids=[2, 4])),
        "two_layers": e3_raw(e3_head(**base, layer_cfg={"num_hidden_layers": 2})),
        "eagle1": e3_raw(e3_head(**base, eagle_config={"use_aux_hidden_state": False})),
        "vocab_too_small": e3_raw(e3_head(**base, cfg={"draft_vocab_size": E3_V + 1})),
        "qwen3_layer": e3_raw(e3_head(**base, layer_cfg={"model_type": "qwen3"})),
        "mlp_bias": e3_raw(e3_head(**base, layer_cfg={"mlp_bias": True})),
        "hidden_act_gelu": e3_raw(e3_head(**base, layer_cfg={"hidden_act": "gelu"})),
    }
    # d2t broken in place: out of range, a duplicate, t2d inverted, an int64 that overflows d2t[i] + i
    cfg, st = e3_head(**base)
    hl = struct.unpack("<Q", st[:8])[0]
    d2t = np.frombuffer(st[8 + hl:8 + hl + 8 * 24], dtype="<i8").copy()
    t2d_at = 8 + hl + 8 * 24

    def with_d2t(v, flip_t2d=False):
        b = st[:8 + hl] + v.astype("<i8").tobytes() + st[t2d_at:]
        if flip_t2d:
            b = b[:t2d_at] + bytes(1 - x for x in b[t2d_at:t2d_at + E3_V]) + b[t2d_at + E3_V:]
        return e3_raw((cfg, b))
    v = d2t.copy(); v[-1] += 1000; bad["d2t_range"] = with_d2t(v)
    v = d2t.copy(); v[1] = v[0] - 1; bad["d2t_dup"] = with_d2t(v)
    bad["t2d_mismatch"] = with_d2t(d2t, flip_t2d=True)
    v = d2t.copy(); v[2] = 2**63 - 1; bad["d2t_int64_overflow"] = with_d2t(v)
    for name, data in bad.items():
        put("eagle3", "bad_raw_" + name, data)
    # generated heads (all-zero fields: a valid head for the chosen target)
    gen_ok = {
        "ok_gen_default": e3_gen(),
        "ok_gen_spec_bf16_embed_bias_fc_norm": e3_gen(g0=0x01 | 2 << 1 | 0x08 | 0x10 | 0x20 | 0x80, g1=0x15,
                                                      g2=0x41 | 0x02, mode=1, tree=True, b1=0x2b),
        "ok_gen_f16_t2d_nbfc_rope_llama3": e3_gen(g0=1 << 1 | 0x40, g2=0x32, g5=2, mode=2, b1=5, sampling=0x3c),
        "ok_gen_mixed_dtypes_d2t_shuffled_yarn": e3_gen(g0=3 << 1, g2=0x80 | 0x1d, g5=5, mode=1, second=True),
        "ok_gen_t1_eagle_config_ids": e3_gen(g4=2, ids=(0, 1, 3), target=1, g5=1, g5b=2, small_ctx=True),
        "ok_gen_sglang_plus_one_h4": e3_gen(g0=0x08, g1=0x01, g4=2, ids=(1, 3, 6), mode=2, tree=True,
                                            budget=True, b1=12),
        "ok_gen_nan_inf_weights": e3_gen(g2=0x41, w=5, inject=((2, 0, 0), (15, 3, 1), (0, 7, 3)), mode=2, b1=6),
        "ok_gen_misaligned_no_mmap": e3_gen(g6=0x40, no_mmap=True, g5=6),
        "ok_gen_norm_before_residual_eps": e3_gen(g6=0x01 | 0x08 | 0x04, g0=0x80, g5=3, mode=1),
    }
    gen_bad = {
        "bad_gen_hidden_act_gelu": e3_gen(g5=2 << 3),
        "bad_gen_mlp_bias": e3_gen(g5=0x20),
        "bad_gen_attention_bias": e3_gen(g5=0x40),
        "bad_gen_d2t_int64_max": e3_gen(g2=0x41, g3=0x31),
        "bad_gen_d2t_target_v": e3_gen(g2=0x41, g3=0x04),
        "bad_gen_t2d_count": e3_gen(g2=0x42, g3=0x07),
        "bad_gen_default_rule_short_target": e3_gen(target=1),
        "bad_gen_fc_width": e3_gen(g0=0x08, g6=0x20),
        "bad_gen_vocab_41": e3_gen(g6=0x10),
        "bad_gen_ids_not_increasing": e3_gen(g4=1, ids=(4, 2, 6)),
        "bad_gen_head_dim_odd": e3_gen(g0=0x08, g1=0x01 | 2 << 2),  # H 4, 4 heads: head_dim 1
        "bad_gen_missing_q_proj": e3_gen(corrupt=(7, 0)),
        "bad_gen_norm_f64": e3_gen(corrupt=(3, 4)),
    }
    for name, data in {**gen_ok, **gen_bad}.items():
        put("eagle3", name, data)


def sched_create(max_active=2, queued=8, head=False, block=16, pool=None, n_ctx=64, draft=True):
    """fuzz_scheduler's five create bytes (fz_create): max_active, max_queued (bit 6: the EAGLE-3
    head instead of the draft model), KV block tokens, pool blocks (None: the default), n_ctx
    16..64 (bit 7: no draft)."""
    c = n_ctx - 16 if draft else 128 + (n_ctx - 16 - 30) % 49
    return bytes([max_active - 1, (queued - 1) | (0x40 if head else 0), block - 1,
                  0 if pool is None else 144 + pool, c])


SCHED_METHOD = {"auto": 0, "model": 2, "ngram": 3, "eagle3": 4, "none": 5, "bad": 7}


def sched_submit(prompt, mode=0, seed=0, n_predict=8, n_draft=3, tree=0, nodes=0, stop=0, cb=True, method="auto",
                 ngram=0, logprobs=False, top=0, lp_stop=0, lp_cb=True, raw_l=None, sampling=0, plp=None):
    """One submit operation (fz_make_request): mode 0 greedy / 1 match / 2 rejection, n_predict 0
    is the invalid one, tree 1 the fixed shape (2, 1) / 2 a node budget (1 + 3 * nodes),
    stop / lp_stop: the token / logprob callback stops at that call (1..8), ngram: the
    n-gram knobs (bits 3..7 of the method byte, given in place), top: 0..20 valid, 21 / -1 refused,
    sampling: the byte of top_k / top_p / min_p / temperature (0: the defaults, temperature 0.8),
    plp: prompt logprobs with that top (0..5; the logprob callback then never stops)."""
    k = 199 + stop if stop else (0 if cb else 190)
    d = SCHED_METHOD[method] | ngram
    t = 22 if top == -1 else top
    l = (1 | t << 1) if logprobs else (0 if top == 0 else 144 + 2 * t)
    j = 199 + lp_stop if lp_stop else (0 if lp_cb else 255)
    if plp is not None:
        j = 3 | plp << 2
    return bytes([0, 0, len(prompt) - 1, *prompt, mode | seed << 2, 255 if n_predict == 0 else n_predict - 1,
                  n_draft | tree << 3 | nodes << 6, k, d, l if raw_l is None else raw_l, j, sampling])


def sched_input(create, *ops):
    return create + bytes([len(ops)]) + b"".join(ops)


def scheduler_seeds():
    """fuzz_scheduler: scheduler params, then up to 12 operations (submit, cancel, wait 0, metrics)."""
    def cancel(which):
        return bytes([2, which])

    def wait0(which):
        return bytes([3, which])

    metrics = bytes([4, 0])
    p1, p2 = [1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11, 12]
    seeds = {
        "bad_create": bytes([255, 0, 0, 0, 0]),
        "ok_two_requests": sched_input(sched_create(4, 5), sched_submit(p1, n_predict=11, n_draft=2),
                                       sched_submit(p2, mode=1, seed=1, n_predict=6, n_draft=3), wait0(0), metrics),
        "cancel_unknown": sched_input(sched_create(3, 3), sched_submit([7], n_predict=3), cancel(250), cancel(0)),
        "no_draft_tree_refused": sched_input(sched_create(2, 2, draft=False), sched_submit(p1, tree=1),
                                             sched_submit(p1, method="ngram", tree=1, n_predict=9), metrics),
        "tight_pool_trees": sched_input(sched_create(6, 8, block=4, pool=10, n_ctx=36),
                                        sched_submit([3, 1, 2, 3, 1, 2], tree=1, n_predict=19),
                                        sched_submit([4, 5], mode=2, seed=3, tree=2, nodes=2, stop=3),
                                        sched_submit([9, 9, 9, 9], mode=1, n_predict=12), wait0(1), metrics),
        # log-probabilities: top 0 / 5 / 20 in the same rounds, stops from either callback, cancel
        "ok_logprobs_mix": sched_input(sched_create(3, 8), sched_submit(p1, n_predict=12, logprobs=True),
                                       sched_submit(p2, mode=1, seed=5, logprobs=True, top=5, n_predict=14),
                                       sched_submit(p1, mode=2, seed=9, logprobs=True, top=20, tree=1, n_predict=10),
                                       sched_submit([3, 4, 3, 4, 3], method="ngram", logprobs=True, top=3, lp_stop=4),
                                       sched_submit(p2, logprobs=True, top=2, stop=2, lp_stop=5, method="none"),
                                       sched_submit(p1, logprobs=True, top=1, cb=False, n_predict=9),
                                       cancel(1), metrics),
        "logprobs_refused": sched_input(sched_create(2, 8), sched_submit(p1, logprobs=True, top=21),
                                        sched_submit(p1, logprobs=True, top=-1),
                                        sched_submit(p1, top=4),  # top_logprobs without logprobs
                                        sched_submit(p1, logprobs=True, lp_cb=False),
                                        sched_submit(p1, raw_l=254),  # logprobs 2
                                        sched_submit(p1, logprobs=False, lp_stop=1, n_predict=5), metrics),
        # prompt log-probabilities (byte j % 4 == 3): with and without generated-token logprobs,
        # drafters mixed, one cancelled (its prompt records may stop early)
        "ok_prompt_logprobs": sched_input(sched_create(3, 8),
                                          sched_submit(p2, n_predict=10, plp=0),
                                          sched_submit(p1, mode=1, seed=2, logprobs=True, top=3, plp=5, n_predict=8),
                                          sched_submit(p2, mode=2, seed=4, tree=1, logprobs=True, plp=2),
                                          sched_submit([3, 4, 3, 4, 3, 4, 3, 4, 3, 4, 3], method="ngram", plp=4),
                                          cancel(2), metrics),
        "ok_prompt_logprobs_head": sched_input(sched_create(3, 8, head=True),
                                               sched_submit(p2, n_predict=10, n_draft=4, plp=3),
                                               sched_submit(p1, mode=1, seed=3, method="eagle3", tree=1, logprobs=True,
                                                            top=2, plp=1),
                                               sched_submit(p2, method="none", plp=5, n_predict=4), wait0(0), metrics),
        # the EAGLE-3 head as the draft: eagle3 chains and trees, n-gram and plain requests in
        # the same rounds, logprobs on some; MODEL refused at submit
        "ok_head_mix": sched_input(sched_create(4, 8, head=True),
                                   sched_submit(p1, n_predict=14, n_draft=4, logprobs=True, top=4),
                                   sched_submit(p2, mode=1, seed=2, method="eagle3", tree=1, n_predict=12),
                                   sched_submit(p1, mode=2, seed=7, tree=2, nodes=3, logprobs=True, top=20),
                                   sched_submit([5, 6, 5, 6, 5, 6], method="ngram", ngram=0x10, n_predict=10),
                                   sched_submit(p2, method="none", logprobs=True, top=1, n_predict=6),
                                   sched_submit(p1, mode=2, seed=3, method="ngram", ngram=0x40, n_draft=2),
                                   wait0(0), metrics),
        # one prompt, many ways: the records at a shared context must not depend on the drafter,
        # the mode or the sampling values (fz_check_across)
        "ok_same_prompt_records": sched_input(
            sched_create(4, 8), sched_submit(p1, n_predict=10, logprobs=True, top=20),
            sched_submit(p1, mode=1, seed=1, logprobs=True, top=4, sampling=0x06, method="ngram"),
            sched_submit(p1, mode=2, seed=2, logprobs=True, top=20, sampling=0xD9, tree=1),
            sched_submit(p1, mode=1, seed=1, logprobs=True, top=7, sampling=0x25, method="none"),
            sched_submit(p1, mode=2, seed=5, logprobs=True, top=1, sampling=0x4A, tree=2, nodes=1), metrics),
        "head_model_refused": sched_input(sched_create(2, 4, head=True), sched_submit(p1, method="model"),
                                          sched_submit(p1, method="bad"), sched_submit(p1, method="eagle3", stop=2),
                                          metrics),
        "eagle3_without_head_refused": sched_input(sched_create(2, 4), sched_submit(p1, method="eagle3"),
                                                   sched_submit(p1, method="model", n_predict=4),
                                                   sched_submit(p2, method="eagle3", logprobs=True),
                                                   metrics),
        "head_one_slot_cancel": sched_input(sched_create(1, 8, head=True, block=4, pool=12, n_ctx=40),
                                            sched_submit(p1, n_predict=20, logprobs=True, top=2, lp_stop=6),
                                            sched_submit(p2, mode=1, tree=1, n_predict=18, logprobs=True),
                                            cancel(1), sched_submit(p1, mode=2, seed=4, n_draft=5, stop=7),
                                            wait0(2), metrics),
    }
    for name, data in seeds.items():
        put("scheduler", name, data)


if __name__ == "__main__":
    every = {"safetensors": lambda: safetensors_seeds(), "config": lambda: config_seeds(),
             "tokenizer": lambda: tokenizer_seeds(), "tokenizer_real": tokenizer_real_seeds,
             "generate": generate_seeds, "cli": cli_seeds, "server": server_seeds, "jinja": jinja_seeds,
             "eagle3": eagle3_seeds, "scheduler": scheduler_seeds}
    for name in sys.argv[1:] or list(every):
        every[name]()
    print("seeds written to", SEEDS)
