#!/usr/bin/env python3
"""make_random_head.py — a random-weight EAGLE-3 head for a given target checkpoint, in the
published flat layout (EAGLE / SpecForge / sglang: `fc.weight`, `midlayer.*`, flat config;
../shared/EAGLE3.md), shaped like the released Llama-3.1-8B heads (yuhuili/EAGLE3-LLaMA3.1-
Instruct-8B: the target's hidden size, heads, head_dim and intermediate size, one decoder layer,
a draft vocabulary of 32000 ids mapped by d2t/t2d, no embedding of its own). numpy only.

Weights: N(0, 0.02) BF16 like tools/make_random_checkpoint.py (cut from one pool of random
values, so the 8B-shape head, ~0.43B parameters, is written at disk speed), norms 1.0. The
draft vocabulary is a random sorted subset of the target's ids. Capture ids: the default rule
(hs[2], hs[L/2], hs[L-3]) for targets of >= 7 layers, else explicit hs[0], hs[L/2], hs[L].

usage: make_random_head.py --target DIR --out DIR [--draft-vocab N] [--seed S]
       (--draft-vocab default: 32000, or half the vocabulary when that is smaller)"""
import argparse
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import make_random_checkpoint as mrc  # noqa: E402


def head_config(t, vd):
    H, L = t["hidden_size"], t["num_hidden_layers"]
    c = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": H,
         "intermediate_size": t["intermediate_size"], "num_hidden_layers": 1,
         "num_attention_heads": t["num_attention_heads"], "num_key_value_heads": t["num_key_value_heads"],
         "head_dim": t.get("head_dim", H // t["num_attention_heads"]), "rms_norm_eps": t.get("rms_norm_eps", 1e-5),
         "vocab_size": t["vocab_size"], "draft_vocab_size": vd, "max_position_embeddings": 2048,
         "hidden_act": "silu", "tie_word_embeddings": False, "bos_token_id": t.get("bos_token_id", 0),
         "eos_token_id": t.get("eos_token_id", 1), "torch_dtype": "bfloat16"}
    # EAGLE's Llama-3.1-8B config has no rope_theta (the head runs theta 10000, ../shared/EAGLE3.md)
    if L < 7:
        c["eagle_aux_hidden_state_layer_ids"] = [0, L // 2, L]
    return c


def tensors(c):
    """(name, dtype, shape, kind): kind 'w' random, 'norm' ones, or an array for the maps."""
    H, F, hd = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    Q, KV = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    p = "midlayer."
    return [("fc.weight", "BF16", (H, 3 * H), "w"),
            (p + "input_layernorm.weight", "BF16", (H,), "norm"), (p + "hidden_norm.weight", "BF16", (H,), "norm"),
            (p + "post_attention_layernorm.weight", "BF16", (H,), "norm"),
            (p + "self_attn.q_proj.weight", "BF16", (Q, 2 * H), "w"),
            (p + "self_attn.k_proj.weight", "BF16", (KV, 2 * H), "w"),
            (p + "self_attn.v_proj.weight", "BF16", (KV, 2 * H), "w"),
            (p + "self_attn.o_proj.weight", "BF16", (H, Q), "w"),
            (p + "mlp.gate_proj.weight", "BF16", (F, H), "w"), (p + "mlp.up_proj.weight", "BF16", (F, H), "w"),
            (p + "mlp.down_proj.weight", "BF16", (H, F), "w"),
            ("norm.weight", "BF16", (H,), "norm"), ("lm_head.weight", "BF16", (c["draft_vocab_size"], H), "w")]


def write(path, entries, maps, pool):
    """entries: BF16 tensors (written from the pool); maps: [(name, dtype, array)] I64 / BOOL."""
    header, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, dt, a in maps:
        raw = np.asarray(a, dtype="<i8").tobytes() if dt == "I64" else np.asarray(a, dtype=np.uint8).tobytes()
        header[name] = {"dtype": dt, "shape": list(np.shape(a)), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    for name, dt, shape, _ in entries:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)
        for _, _, shape, kind in entries:
            count = int(np.prod(shape))
            for c0 in range(0, count, 1 << 26):
                f.write(pool.take(min(1 << 26, count - c0), kind).tobytes())
    return off


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", required=True, help="the target checkpoint's folder (its config.json)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--draft-vocab", type=int, default=0)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    with open(os.path.join(a.target, "config.json")) as f:
        t = json.load(f)
    V = t["vocab_size"]
    vd = a.draft_vocab or min(32000, V // 2)
    if not 1 <= vd <= V:
        print(f"error: --draft-vocab {vd} outside [1, {V}]", file=sys.stderr)
        return 1
    c = head_config(t, vd)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    rng = np.random.default_rng(a.seed)
    sel = np.sort(rng.choice(V, vd, replace=False))
    t2d = np.zeros(V, dtype=bool)
    t2d[sel] = True
    maps = [("d2t", "I64", sel - np.arange(vd)), ("t2d", "BOOL", t2d)]
    pool = mrc.Pool(16 << 20, a.seed)
    ents = tensors(c)
    size = write(os.path.join(a.out, "model.safetensors"), ents, maps, pool)
    n_params = sum(int(np.prod(s)) for _, _, s, _ in ents)
    print(json.dumps({"out": a.out, "params": n_params, "bytes": size, "draft_vocab": vd,
                      "aux_ids": c.get("eagle_aux_hidden_state_layer_ids", "default rule")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
