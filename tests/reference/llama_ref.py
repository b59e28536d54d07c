#!/usr/bin/env python3
"""llama_ref.py — an independent float64 numpy forward pass of Llama-family models.

Written from the Hugging Face transformers modeling code (LlamaForCausalLM,
MistralForCausalLM, Qwen2ForCausalLM), not from specdec's C code, so that the two
can check each other:
  - embeddings: embed_tokens[ids]
  - RMSNorm: x * rsqrt(mean(x^2) + eps) * w
  - RoPE: inv_freq = 1 / theta^(arange(0, d, 2) / d), llama3 scaling as in
    _compute_llama3_parameters; emb = cat(freqs, freqs);
    q' = q * cos + rotate_half(q) * sin, rotate_half(x) = cat(-x2, x1)
  - attention: repeat_kv for GQA/MQA, softmax(q k^T / sqrt(d) + causal mask) v
  - MLP: down(silu(gate(x)) * up(x)); Qwen2 adds biases to q/k/v
  - logits: lm_head(norm(x)), lm_head = embed_tokens when tie_word_embeddings.
Weights are read from safetensors by a small parser here (F32/F16/BF16), then the
whole computation runs in float64.

    python3 llama_ref.py CHECKPOINT_DIR 1,2,3,4      # prints the argmax per position
"""
import json
import math
import os
import struct
import sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = data[base + b:base + e]
        dt = info["dtype"]
        if dt == "F32":
            a = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        elif dt == "F16":
            a = np.frombuffer(raw, dtype="<f2").astype(np.float64)
        elif dt == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        elif dt == "I64":  # EAGLE-3 heads' d2t
            a = np.frombuffer(raw, dtype="<i8").astype(np.int64)
        elif dt == "BOOL":  # EAGLE-3 heads' t2d
            a = np.frombuffer(raw, dtype=np.uint8).astype(bool)
        else:
            raise ValueError(f"{path}: {name}: dtype {dt} not handled")
        out[name] = a.reshape(info["shape"])
    return out


def load_checkpoint(path):
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    index = os.path.join(path, "model.safetensors.index.json")
    weights = {}
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        for fn in files:
            weights.update(read_safetensors(os.path.join(path, fn)))
    else:
        weights = read_safetensors(os.path.join(path, "model.safetensors"))
    return cfg, weights


def rope_inv_freq(cfg, head_dim):
    base = float(cfg.get("rope_theta", 10000.0))
    inv_freq = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.int64).astype(np.float64) / head_dim))
    rs = cfg.get("rope_scaling")
    if rs is None:
        return inv_freq
    rtype = rs.get("rope_type", rs.get("type"))
    if rtype == "default":
        return inv_freq
    if rtype != "llama3":
        raise ValueError(f"rope_scaling type {rtype} not handled")
    factor = rs["factor"]
    low_freq_factor = rs["low_freq_factor"]
    high_freq_factor = rs["high_freq_factor"]
    old_context_len = rs["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return np.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def rms_norm(x, w, eps):
    variance = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(variance + eps) * w


def rotate_half(x):
    d = x.shape[-1] // 2
    return np.concatenate([-x[..., d:], x[..., :d]], axis=-1)


def silu(x):
    return x / (1.0 + np.exp(-x))


def forward(cfg, W, ids, hs=None):
    """Logits [len(ids), vocab] in float64 for positions 0..len(ids)-1. hs: None, or a list
    that receives the residual stream at every layer boundary (hs[0] = the embeddings,
    hs[i] = the input of layer i, hs[L] = the last layer's output before the final norm)."""
    ids = np.asarray(ids, dtype=np.int64)
    T = len(ids)
    H = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    hd = cfg.get("head_dim") or H // nh
    eps = cfg["rms_norm_eps"]
    n_rep = nh // nkv
    arch = cfg["architectures"][0]
    # Qwen2: q/k/v always carry a bias, o_proj never. Llama: attention_bias puts a bias
    # on all four projections. Mistral: no biases.
    qkv_bias = arch == "Qwen2ForCausalLM" or (arch == "LlamaForCausalLM" and cfg.get("attention_bias", False))
    o_bias = arch == "LlamaForCausalLM" and cfg.get("attention_bias", False)

    inv_freq = rope_inv_freq(cfg, hd)
    freqs = np.outer(np.arange(T, dtype=np.float64), inv_freq)  # [T, hd/2]
    emb = np.concatenate([freqs, freqs], axis=-1)               # [T, hd]
    cos, sin = np.cos(emb), np.sin(emb)

    mask = np.triu(np.full((T, T), -np.inf), k=1)
    x = W["model.embed_tokens.weight"][ids]
    for l in range(cfg["num_hidden_layers"]):
        if hs is not None:
            hs.append(x)
        p = f"model.layers.{l}."
        res = x
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = h @ W[p + "self_attn.q_proj.weight"].T
        k = h @ W[p + "self_attn.k_proj.weight"].T
        v = h @ W[p + "self_attn.v_proj.weight"].T
        if qkv_bias:
            q = q + W[p + "self_attn.q_proj.bias"]
            k = k + W[p + "self_attn.k_proj.bias"]
            v = v + W[p + "self_attn.v_proj.bias"]
        q = q.reshape(T, nh, hd).transpose(1, 0, 2)   # [nh, T, hd]
        k = k.reshape(T, nkv, hd).transpose(1, 0, 2)  # [nkv, T, hd]
        v = v.reshape(T, nkv, hd).transpose(1, 0, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = np.repeat(k, n_rep, axis=0)               # repeat_kv: head h uses kv head h // n_rep
        v = np.repeat(v, n_rep, axis=0)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd) + mask
        s = s - s.max(axis=-1, keepdims=True)
        pr = np.exp(s)
        pr = pr / pr.sum(axis=-1, keepdims=True)
        a = (pr @ v).transpose(1, 0, 2).reshape(T, nh * hd)
        x = res + a @ W[p + "self_attn.o_proj.weight"].T
        if o_bias:
            x = x + W[p + "self_attn.o_proj.bias"]
        res = x
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        g = h @ W[p + "mlp.gate_proj.weight"].T
        u = h @ W[p + "mlp.up_proj.weight"].T
        x = res + (silu(g) * u) @ W[p + "mlp.down_proj.weight"].T
    if hs is not None:
        hs.append(x)
    x = rms_norm(x, W["model.norm.weight"], eps)
    lm = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else W["lm_head.weight"]
    return x @ lm.T


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    cfg, W = load_checkpoint(sys.argv[1])
    ids = [int(t) for t in sys.argv[2].split(",")]
    logits = forward(cfg, W, ids)
    print(" ".join(str(int(i)) for i in logits.argmax(axis=-1)))


if __name__ == "__main__":
    main()
