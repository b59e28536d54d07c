#!/usr/bin/env python3
"""make_mla_checkpoint.py — a random DeepSeek-V2-Lite-shaped checkpoint for bench/mla/bench_mla_cache.sh:
DeepSeek-V2-Lite's attention exactly (16 heads, kv_lora_rank 512, qk_rope 64, qk_nope 128, v_head_dim 128,
no q latent), with the rest scaled down so the CPU runs it in seconds (hidden 512, 4 layers, 8 small
experts, vocabulary 2048). Written by transformers (DeepseekV2ForCausalLM.save_pretrained), BF16, plus a
byte-level tokenizer.json of single characters, so `specdec generate` runs it.

    make_mla_checkpoint.py OUT_DIR      (needs torch + transformers)
"""
import os
import sys

import torch
from transformers import DeepseekV2Config, DeepseekV2ForCausalLM

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from gen_model_fixtures import write_tiny_tokenizer  # noqa: E402

out = sys.argv[1]
V = 2048
cfg = DeepseekV2Config(vocab_size=V, hidden_size=512, intermediate_size=1024, moe_intermediate_size=256,
                       num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=16, n_routed_experts=8,
                       num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, q_lora_rank=None,
                       kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                       max_position_embeddings=4096, topk_method="greedy", n_group=1, topk_group=1,
                       bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
torch.manual_seed(0)
model = DeepseekV2ForCausalLM(cfg).to(torch.bfloat16).eval()
model.save_pretrained(out)
write_tiny_tokenizer(out, chars=[chr(b) for b in range(32, 127)] + ["\n"], size=V)
print(f"{out}: DeepSeek-V2-Lite attention, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters")
