#!/usr/bin/env python3
"""eagle3_ref.py — an independent float64 numpy forward of an EAGLE-3 draft head.

Written from the published description (../shared/EAGLE3.md §4-7: EAGLE cnets.py, sglang and
vLLM llama_eagle3.py), not from specdec's C code, so the two check each other:
  - layout: flat (`midlayer.`, flat config) or speculators (`layers.0.`, the Llama keys in
    `transformer_layer_config`, norm_before_residual defaulting to true there)
  - draft ids -> target ids: d2t[i] + i; else the set ids of t2d ascending; else identity
  - fuse: optional fc_norm (per captured state) / input_norm (whole concat), g = fc(aux) (+ bias)
  - step: e = RMSNorm(E[x]), hn = RMSNorm(g), u = [e; hn], q/k/v from u, HF rotate_half RoPE
    with the head's own rope config, GQA softmax attention over the draft KV cache (chain rows:
    every earlier row; tree rows: the shared prefix, the ancestors, itself), h1 = res + o,
    h = h1 + MLP(RMSNorm(h1)), logits = lm_head(RMSNorm(h)), g_next = h (or the normed state
    with norm_output)
  - q over the target vocabulary = softmax(draft logits) placed at the mapped ids, 0 elsewhere.
Everything in float64 (weights decoded exactly from F32/F16/BF16).
"""
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import llama_ref  # noqa: E402  (safetensors reader, rope_inv_freq: transformers' default and llama3 frequencies)


def read_safetensors(path):
    """name -> array (floats as float64, I64 as int64, BOOL as bool)."""
    return llama_ref.read_safetensors(path)


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rotate_half(x):
    d = x.shape[-1] // 2
    return np.concatenate([-x[..., d:], x[..., :d]], axis=-1)


class Eagle3Ref:
    def __init__(self, head_dir, target_embed=None):
        with open(os.path.join(head_dir, "config.json")) as f:
            self.cfg = cfg = json.load(f)
        self.W = W = read_safetensors(os.path.join(head_dir, "model.safetensors"))
        nested = "transformer_layer_config" in cfg
        lc = cfg["transformer_layer_config"] if nested else cfg
        self.lc = lc
        self.pfx = "midlayer." if "midlayer.hidden_norm.weight" in W else "layers.0."
        self.H = lc["hidden_size"]
        self.nH = lc["num_attention_heads"]
        self.nKV = lc.get("num_key_value_heads", self.nH)
        self.hd = lc.get("head_dim") or self.H // self.nH
        self.eps = lc.get("rms_norm_eps", 1e-6)
        self.V = lc["vocab_size"]
        self.tH = cfg.get("target_hidden_size") or self.H
        self.Vd = cfg.get("draft_vocab_size") or self.V
        self.norm_before_residual = cfg.get("norm_before_residual", nested)
        self.norm_output = cfg.get("norm_output", False)
        self.fc_norm = cfg.get("fc_norm", False)
        self.norm_before_fc = cfg.get("norm_before_fc", False)
        if "d2t" in W:
            self.d2t = W["d2t"] + np.arange(self.Vd)
        elif "t2d" in W:
            self.d2t = np.nonzero(W["t2d"])[0]
        else:
            self.d2t = np.arange(self.Vd)
        self.E = W["embed_tokens.weight"] if "embed_tokens.weight" in W else target_embed
        self.inv_freq = llama_ref.rope_inv_freq(lc, self.hd)
        self.K, self.Vc, self.parent = [], [], []

    def w(self, name):
        return self.W[self.pfx + name]

    def fuse(self, aux):
        aux = np.array(aux, dtype=np.float64)
        if self.fc_norm:
            t = self.tH
            aux = np.concatenate([rms(aux[:, i * t:(i + 1) * t], self.W[f"fc_norm.{i}.weight"], self.eps)
                                  for i in range(3)], -1)
        if self.norm_before_fc:
            aux = rms(aux, self.W["input_norm.weight"], self.eps)
        g = aux @ self.W["fc.weight"].T
        if "fc.bias" in self.W:
            g = g + self.W["fc.bias"]
        return g

    def rope(self, x, pos):
        ang = pos * self.inv_freq
        cos = np.cos(np.concatenate([ang, ang]))
        sin = np.sin(np.concatenate([ang, ang]))
        return x * cos + rotate_half(x) * sin

    def keys_of(self, r, tree, n_shared):
        if not tree:
            return list(range(r + 1))
        chain, a = [], self.parent[r]
        while a >= n_shared:
            chain.append(a)
            a = self.parent[a]
        return list(range(n_shared)) + chain[::-1] + [r]

    def step(self, tokens, g, pos, parents=None, n_shared=0):
        """Rows appended to the cache; returns (logits [n, Vd], g_next [n, H])."""
        g = np.asarray(g, dtype=np.float64)
        n = len(tokens)
        e = rms(self.E[np.asarray(tokens)], self.w("input_layernorm.weight"), self.eps)
        hn = rms(g, self.w("hidden_norm.weight"), self.eps)
        u = np.concatenate([e, hn], -1)
        q = (u @ self.w("self_attn.q_proj.weight").T).reshape(n, self.nH, self.hd)
        k = (u @ self.w("self_attn.k_proj.weight").T).reshape(n, self.nKV, self.hd)
        v = (u @ self.w("self_attn.v_proj.weight").T).reshape(n, self.nKV, self.hd)
        base = len(self.K)
        for t in range(n):
            q[t] = self.rope(q[t], pos[t])
            self.K.append(self.rope(k[t], pos[t]))
            self.Vc.append(v[t])
            self.parent.append(parents[t] if parents is not None else base + t - 1)
        rep = self.nH // self.nKV
        attn = np.zeros((n, self.nH * self.hd))
        for t in range(n):
            ks = self.keys_of(base + t, parents is not None, n_shared)
            Kt = np.stack([self.K[j] for j in ks])   # [S, nKV, hd]
            Vt = np.stack([self.Vc[j] for j in ks])
            for hh in range(self.nH):
                s = Kt[:, hh // rep] @ q[t, hh] / math.sqrt(self.hd)
                p = np.exp(s - s.max())
                p /= p.sum()
                attn[t, hh * self.hd:(hh + 1) * self.hd] = p @ Vt[:, hh // rep]
        res = hn if self.norm_before_residual else g
        h1 = res + attn @ self.w("self_attn.o_proj.weight").T
        x = rms(h1, self.w("post_attention_layernorm.weight"), self.eps)
        gate = x @ self.w("mlp.gate_proj.weight").T
        up = x @ self.w("mlp.up_proj.weight").T
        h = h1 + (gate / (1.0 + np.exp(-gate)) * up) @ self.w("mlp.down_proj.weight").T
        hN = rms(h, self.W["norm.weight"], self.eps)
        logits = hN @ self.W["lm_head.weight"].T
        return logits, (hN if self.norm_output else h)

    def truncate(self, n):
        del self.K[n:], self.Vc[n:], self.parent[n:]

    def q(self, logits):
        """The proposal distribution over the target vocabulary for each row."""
        z = logits - logits.max(-1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(-1, keepdims=True)
        out = np.zeros((logits.shape[0], self.V))
        out[:, self.d2t] = p
        return out
