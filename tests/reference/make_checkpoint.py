#!/usr/bin/env python3
"""make_checkpoint.py — write tiny random Hugging Face Llama-family checkpoints.

Each checkpoint is a directory with config.json and model.safetensors (or shards
model-0000k-of-0000n.safetensors plus model.safetensors.index.json), laid out and
named as transformers saves LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM.
Weights are drawn from a fixed seed with scales that keep activations O(1) and the
logits far from uniform. F16 is numpy's float16 cast (round to nearest even); BF16
is rounded to nearest even by hand and stored as uint16 bits.

The safetensors files are written by hand (numpy has no bfloat16); F32/F16 files are
read back with the `safetensors` package as a cross-check of the writer.

    python3 make_checkpoint.py OUT_DIR [--case NAME ...]   # default: every case
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

# name -> spec. Sizes are tiny (each checkpoint well under 1 MB).
CASES = {
    # GQA (4 query heads share 2 kv heads), untied, F32, one file.
    "llama_gqa_f32": dict(arch="llama", hidden=64, inter=160, layers=2, heads=4, kv_heads=2, vocab=128,
                          tied=False, dtype="F32"),
    # MQA (one kv head), tied embeddings, F16.
    "llama_mqa_tied_f16": dict(arch="llama", hidden=48, inter=96, layers=2, heads=4, kv_heads=1, vocab=97,
                               tied=True, dtype="F16"),
    # MHA, BF16, Mistral, sharded over two files.
    "mistral_mha_bf16_sharded": dict(arch="mistral", hidden=64, inter=128, layers=3, heads=4, kv_heads=4,
                                     vocab=101, tied=False, dtype="BF16", shards=2),
    # Qwen2: q/k/v bias, tied, odd hidden 72, vocab 101.
    "qwen2_bias_f32": dict(arch="qwen2", hidden=72, inter=136, layers=2, heads=6, kv_heads=2, vocab=101,
                           tied=True, dtype="F32", theta=1000000.0, eps=1e-6),
    # llama3 rope scaling, explicit head_dim (24) != hidden / heads (18), F16, sharded in three.
    "llama3_rope_headdim_f16": dict(arch="llama", hidden=72, inter=120, layers=2, heads=4, kv_heads=2, vocab=113,
                                    head_dim=24, tied=False, dtype="F16", theta=500000.0, shards=3,
                                    rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                                      high_freq_factor=4.0, original_max_position_embeddings=64)),
    # Odd sizes everywhere, BF16, Qwen2 bias with GQA 3:1.
    "qwen2_odd_bf16": dict(arch="qwen2", hidden=40, inter=88, layers=3, heads=6, kv_heads=2, vocab=67,
                           head_dim=10, tied=False, dtype="BF16"),
    # Llama with attention_bias: biases on q/k/v and o_proj; BF16, GQA 3:1.
    "llama_attn_bias_bf16": dict(arch="llama", hidden=48, inter=80, layers=2, heads=6, kv_heads=2, vocab=90,
                                 tied=False, dtype="BF16", attention_bias=True),
    # Data region deliberately misaligned (odd header length): the loader must copy.
    "llama_misaligned_f32": dict(arch="llama", hidden=32, inter=64, layers=1, heads=2, kv_heads=1, vocab=50,
                                 tied=False, dtype="F32", align=False),
}

ARCH_NAMES = {"llama": ("LlamaForCausalLM", "llama"), "mistral": ("MistralForCausalLM", "mistral"),
              "qwen2": ("Qwen2ForCausalLM", "qwen2")}
TORCH_DTYPE = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def to_bf16_bits(a):
    """float32 array -> bfloat16 bit patterns (uint16), round to nearest even (no NaN here)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def encode(a, dtype):
    """(bytes, value-as-stored in float32) of a float32 array in the target dtype."""
    if dtype == "F32":
        return a.astype("<f4").tobytes(), a.astype(np.float32)
    if dtype == "F16":
        h = a.astype("<f2")
        return h.tobytes(), h.astype(np.float32)
    if dtype == "BF16":
        b = to_bf16_bits(a)
        return b.astype("<u2").tobytes(), (b.astype(np.uint32) << 16).view(np.float32)
    raise ValueError(dtype)


def write_safetensors(path, tensors, dtype, align=True):
    """tensors: list of (name, float32 array). Data laid out in list order, contiguous."""
    header = {"__metadata__": {"format": "pt"}}
    blobs = []
    off = 0
    for name, a in tensors:
        raw, _ = encode(a, dtype)
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hj = json.dumps(header, separators=(",", ":")).encode()
    if align:
        hj += b" " * (-len(hj) % 8)  # as the reference writer: data starts 8-aligned
    elif len(hj) % 2 == 0:
        hj += b" "                   # odd length: every tensor's data is misaligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def make_weights(spec, rng):
    H, I, V = spec["hidden"], spec["inter"], spec["vocab"]
    nh, nkv = spec["heads"], spec["kv_heads"]
    hd = spec.get("head_dim", H // nh)
    bias = spec["arch"] == "qwen2" or spec.get("attention_bias", False)
    o_bias = spec.get("attention_bias", False)  # Llama attention_bias: o_proj too

    def lin(out_f, in_f, gain=0.8):
        return (rng.standard_normal((out_f, in_f)) * (gain / np.sqrt(in_f))).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    t = [("model.embed_tokens.weight", (rng.standard_normal((V, H)) * 0.4).astype(np.float32))]
    for l in range(spec["layers"]):
        p = f"model.layers.{l}."
        t.append((p + "input_layernorm.weight", norm(H)))
        t.append((p + "self_attn.q_proj.weight", lin(nh * hd, H, 1.2)))
        t.append((p + "self_attn.k_proj.weight", lin(nkv * hd, H, 1.2)))
        t.append((p + "self_attn.v_proj.weight", lin(nkv * hd, H)))
        if bias:
            t.append((p + "self_attn.q_proj.bias", (0.1 * rng.standard_normal(nh * hd)).astype(np.float32)))
            t.append((p + "self_attn.k_proj.bias", (0.1 * rng.standard_normal(nkv * hd)).astype(np.float32)))
            t.append((p + "self_attn.v_proj.bias", (0.1 * rng.standard_normal(nkv * hd)).astype(np.float32)))
        t.append((p + "self_attn.o_proj.weight", lin(H, nh * hd)))
        if o_bias:
            t.append((p + "self_attn.o_proj.bias", (0.1 * rng.standard_normal(H)).astype(np.float32)))
        t.append((p + "post_attention_layernorm.weight", norm(H)))
        t.append((p + "mlp.gate_proj.weight", lin(I, H, 1.5)))
        t.append((p + "mlp.up_proj.weight", lin(I, H, 1.5)))
        t.append((p + "mlp.down_proj.weight", lin(H, I)))
    t.append(("model.norm.weight", norm(H)))
    if not spec["tied"]:
        t.append(("lm_head.weight", lin(V, H, 2.0)))
    return t


def make_config(spec):
    arch_name, model_type = ARCH_NAMES[spec["arch"]]
    H, nh = spec["hidden"], spec["heads"]
    cfg = {
        "architectures": [arch_name],
        "model_type": model_type,
        "hidden_size": H,
        "intermediate_size": spec["inter"],
        "num_hidden_layers": spec["layers"],
        "num_attention_heads": nh,
        "num_key_value_heads": spec["kv_heads"],
        "vocab_size": spec["vocab"],
        "max_position_embeddings": 256,
        "rms_norm_eps": spec.get("eps", 1e-5),
        "rope_theta": spec.get("theta", 10000.0),
        "tie_word_embeddings": spec["tied"],
        "hidden_act": "silu",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": TORCH_DTYPE[spec["dtype"]],
        "rope_scaling": spec.get("rope_scaling"),
    }
    if "head_dim" in spec:
        cfg["head_dim"] = spec["head_dim"]
    if spec["arch"] == "llama":
        cfg["attention_bias"] = bool(spec.get("attention_bias", False))
        cfg["mlp_bias"] = False
    if spec["arch"] == "mistral":
        cfg["sliding_window"] = None
    if spec["arch"] == "qwen2":
        cfg["use_sliding_window"] = False
        cfg["sliding_window"] = None
    return cfg


def write_checkpoint(out_dir, name, seed=1234):
    spec = CASES[name]
    rng = np.random.default_rng([seed, sum(map(ord, name))])
    tensors = make_weights(spec, rng)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(make_config(spec), f, indent=2)
    n_shards = spec.get("shards", 1)
    dtype, align = spec["dtype"], spec.get("align", True)
    files = []
    if n_shards == 1:
        path = os.path.join(out_dir, "model.safetensors")
        write_safetensors(path, tensors, dtype, align)
        files.append((path, tensors))
    else:
        parts = np.array_split(np.arange(len(tensors)), n_shards)
        weight_map, total = {}, 0
        for k, idx in enumerate(parts):
            fname = f"model-{k + 1:05d}-of-{n_shards:05d}.safetensors"
            shard = [tensors[i] for i in idx]
            write_safetensors(os.path.join(out_dir, fname), shard, dtype, align)
            files.append((os.path.join(out_dir, fname), shard))
            for n, a in shard:
                weight_map[n] = fname
                total += len(encode(a, dtype)[0])
        with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    if dtype != "BF16" and align:
        cross_check(files, dtype)
    return out_dir


def cross_check(files, dtype):
    """Read our files back with the safetensors package: the writer must agree with it."""
    try:
        from safetensors.numpy import load_file
    except ImportError:
        sys.exit("make_checkpoint.py: the 'safetensors' package is required (tests/requirements.txt)")
    for path, tensors in files:
        got = load_file(path)
        for n, a in tensors:
            want = encode(a, dtype)[1]
            if n not in got or not np.array_equal(got[n].astype(np.float32), want):
                sys.exit(f"make_checkpoint.py: {path}: tensor {n} does not read back")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="directory receiving one sub-directory per case")
    ap.add_argument("--case", action="append", choices=sorted(CASES), help="case(s) to write (default: all)")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    for name in args.case or sorted(CASES):
        print(write_checkpoint(os.path.join(args.out, name), name, args.seed))


if __name__ == "__main__":
    main()
