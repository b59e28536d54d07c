#!/usr/bin/env python3
"""make_random_checkpoint.py — write a random-weight Hugging Face Llama checkpoint of a
published model's exact shape: config.json as the model ships it, BF16 safetensors
(single file, or shards of at most --shard-gb with model.safetensors.index.json), and a
real tokenizer.json (+ tokenizer_config.json) copied from a folder such as
../shared/tokenizers/llama-3-8b, so llama.cpp's GGUF converter recognises it.

Used by the GPU benchmarks (bench/decode/run_decode_vs_llamacpp.sh) to compare plain
decoding of specdec and llama.cpp on the same weights, where downloading the real models
is impossible (the GPU machine reaches no network) and committing them is out of the
question (2.5 GB and 16 GB).

Weights: N(0, 0.02) projections and embeddings, norms 1.0 — what a freshly initialised
model looks like; the values do not change the speed of a dense kernel. For speed the
normals are drawn once into a pool of --pool-mi Mi BF16 values and every tensor is cut
from it at a random offset (wrapping), so an 8B checkpoint is written at disk speed.

Shapes (from the models' published config.json files):
  llama-3.2-1b   1.24B params, tied embeddings, llama3 rope (factor 32)
  llama-3.1-8b   8.03B params, untied, llama3 rope (factor 8)
  draft-1b-small 81M params, a small draft of the 1B shape's vocabulary (4 layers, width 512)
  tiny           a 2-layer model of the same family for tests (vocab from the tokenizer)

usage: make_random_checkpoint.py --shape NAME --out DIR --tokenizer DIR [--seed S]
                                 [--shard-gb G] [--pool-mi M]"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

LLAMA3_ROPE = {"rope_type": "llama3", "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}

SHAPES = {
    "llama-3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                         num_key_value_heads=8, head_dim=64, vocab_size=128256, tie_word_embeddings=True,
                         max_position_embeddings=131072, rope_theta=500000.0,
                         rope_scaling=dict(LLAMA3_ROPE, factor=32.0)),
    "llama-3.1-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                         num_key_value_heads=8, head_dim=128, vocab_size=128256, tie_word_embeddings=False,
                         max_position_embeddings=131072, rope_theta=500000.0,
                         rope_scaling=dict(LLAMA3_ROPE, factor=8.0)),
    # a small draft for the 1B shape (same vocabulary and rope): 4 layers of width 512, ~81M
    # params, most of them the tied embedding (bench/batch/run_batch_gpu.sh)
    "draft-1b-small": dict(hidden_size=512, intermediate_size=2048, num_hidden_layers=4, num_attention_heads=8,
                           num_key_value_heads=2, head_dim=64, vocab_size=128256, tie_word_embeddings=True,
                           max_position_embeddings=131072, rope_theta=500000.0,
                           rope_scaling=dict(LLAMA3_ROPE, factor=32.0)),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, vocab_size=None, tie_word_embeddings=True,
                 max_position_embeddings=2048, rope_theta=500000.0, rope_scaling=dict(LLAMA3_ROPE, factor=8.0)),
}


def config_json(shape, vocab):
    c = dict(SHAPES[shape])
    c["vocab_size"] = c["vocab_size"] or vocab
    c.update(architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu", rms_norm_eps=1e-5,
             attention_bias=False, mlp_bias=False, attention_dropout=0.0, initializer_range=0.02,
             bos_token_id=128000, eos_token_id=[128001, 128008, 128009], torch_dtype="bfloat16",
             pretraining_tp=1, use_cache=True)
    if c["vocab_size"] <= 128009:  # a small tokenizer: special ids inside it
        c["bos_token_id"], c["eos_token_id"] = 0, [1]
    return c


def tensor_list(c):
    """(name, shape, kind) in the order transformers writes them; kind 'norm' = ones."""
    H, I, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    hd = c["head_dim"]
    Q, KV = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    out = [("model.embed_tokens.weight", (V, H), "w")]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        out += [(p + "input_layernorm.weight", (H,), "norm"),
                (p + "self_attn.q_proj.weight", (Q, H), "w"), (p + "self_attn.k_proj.weight", (KV, H), "w"),
                (p + "self_attn.v_proj.weight", (KV, H), "w"), (p + "self_attn.o_proj.weight", (H, Q), "w"),
                (p + "post_attention_layernorm.weight", (H,), "norm"),
                (p + "mlp.gate_proj.weight", (I, H), "w"), (p + "mlp.up_proj.weight", (I, H), "w"),
                (p + "mlp.down_proj.weight", (H, I), "w")]
    out.append(("model.norm.weight", (H,), "norm"))
    if not c["tie_word_embeddings"]:
        out.append(("lm_head.weight", (V, H), "w"))
    return out


def bf16_bits(x):
    """float32 array -> uint16 BF16 bit patterns, round to nearest even."""
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


class Pool:
    def __init__(self, n, seed):
        self.rng = np.random.default_rng(seed)
        self.bits = bf16_bits(self.rng.standard_normal(n, dtype=np.float32) * 0.02)
        self.one = bf16_bits(np.ones(1, dtype=np.float32))[0]

    def take(self, count, kind):
        if kind == "norm":
            return np.full(count, self.one, dtype=np.uint16)
        start = int(self.rng.integers(0, len(self.bits)))
        idx = (start + np.arange(count, dtype=np.int64)) % len(self.bits) if count > len(self.bits) - start else None
        return self.bits[idx] if idx is not None else self.bits[start:start + count]


def write_shard(path, entries, pool):
    """entries: [(name, shape, kind)]; writes one safetensors file, data in order."""
    header, off = {}, 0
    for name, shape, _ in entries:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {"format": "pt"}
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for name, shape, kind in entries:
            count = int(np.prod(shape))
            for c0 in range(0, count, 1 << 26):  # 64 Mi values per write
                f.write(pool.take(min(1 << 26, count - c0), kind).tobytes())
    return off


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", required=True, choices=sorted(SHAPES))
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", required=True, help="folder with tokenizer.json (and tokenizer_config.json)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shard-gb", type=float, default=5.0, help="largest shard; a model that fits is one file")
    ap.add_argument("--pool-mi", type=int, default=64, help="Mi random BF16 values drawn once")
    a = ap.parse_args()
    tj = os.path.join(a.tokenizer, "tokenizer.json")
    if not os.path.isfile(tj):
        print(f"error: {tj} not found", file=sys.stderr)
        return 1
    vocab = len(json.load(open(tj, encoding="utf-8"))["model"]["vocab"])
    vocab = max(vocab, 1 + max((t["id"] for t in json.load(open(tj, encoding="utf-8")).get("added_tokens", [])),
                               default=0))
    os.makedirs(a.out, exist_ok=True)
    c = config_json(a.shape, vocab)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    shutil.copyfile(tj, os.path.join(a.out, "tokenizer.json"))
    tc = os.path.join(a.tokenizer, "tokenizer_config.json")
    if os.path.isfile(tc):
        shutil.copyfile(tc, os.path.join(a.out, "tokenizer_config.json"))
    pool = Pool(a.pool_mi << 20, a.seed)
    tensors = tensor_list(c)
    limit = int(a.shard_gb * (1 << 30))
    shards, cur, size = [], [], 0
    for t in tensors:
        n = int(np.prod(t[1])) * 2
        if cur and size + n > limit:
            shards.append(cur)
            cur, size = [], 0
        cur.append(t)
        size += n
    shards.append(cur)
    total, weight_map = 0, {}
    for i, entries in enumerate(shards):
        name = "model.safetensors" if len(shards) == 1 else f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        total += write_shard(os.path.join(a.out, name), entries, pool)
        weight_map.update({e[0]: name for e in entries})
    if len(shards) > 1:
        with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
    n_params = sum(int(np.prod(s)) for _, s, _ in tensors)
    print(json.dumps({"shape": a.shape, "out": a.out, "params": n_params, "bytes": total, "shards": len(shards)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
