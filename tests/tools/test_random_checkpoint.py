#!/usr/bin/env python3
"""tools/make_random_checkpoint.py writes a checkpoint that the `safetensors` library and
specdec both read as the config says: the tiny shape with the bundled tokenizer (always),
sharded; every tensor's shape and dtype against config.json; norms exactly 1.0;
projections with std near 0.02 (a wrong BF16 conversion or offset shows here);
`specdec info` and a 4-token greedy CPU generation succeed.
usage: test_random_checkpoint.py REPO_ROOT SPECDEC_BINARY WORKDIR"""
import json
import os
import subprocess
import sys

import numpy as np
from safetensors import safe_open

root, cli, work = sys.argv[1:4]
out = os.path.join(work, "tiny_random")
r = subprocess.run([sys.executable, os.path.join(root, "tools", "make_random_checkpoint.py"), "--shape", "tiny",
                    "--out", out, "--tokenizer", os.path.join(root, "models", "kjv-target"), "--shard-gb", "0.0002",
                    "--pool-mi", "1"], capture_output=True, text=True)
fails = []
if r.returncode != 0:
    print(r.stdout, r.stderr)
    sys.exit(1)
info = json.loads(r.stdout.strip().splitlines()[-1])
cfg = json.load(open(os.path.join(out, "config.json")))
idx = json.load(open(os.path.join(out, "model.safetensors.index.json")))
if info["shards"] < 2:
    fails.append("expected a sharded checkpoint")
H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
hd = cfg["head_dim"]
want = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,)}
for l in range(cfg["num_hidden_layers"]):
    p = f"model.layers.{l}."
    want.update({p + "input_layernorm.weight": (H,), p + "post_attention_layernorm.weight": (H,),
                 p + "self_attn.q_proj.weight": (cfg["num_attention_heads"] * hd, H),
                 p + "self_attn.k_proj.weight": (cfg["num_key_value_heads"] * hd, H),
                 p + "self_attn.v_proj.weight": (cfg["num_key_value_heads"] * hd, H),
                 p + "self_attn.o_proj.weight": (H, cfg["num_attention_heads"] * hd),
                 p + "mlp.gate_proj.weight": (I, H), p + "mlp.up_proj.weight": (I, H),
                 p + "mlp.down_proj.weight": (H, I)})
if set(idx["weight_map"]) != set(want):
    fails.append(f"tensor names differ: {sorted(set(idx['weight_map']) ^ set(want))[:5]}")
for name, shard in idx["weight_map"].items():
    with safe_open(os.path.join(out, shard), framework="numpy") as f:
        sl = f.get_slice(name)
        if sl.get_dtype() != "BF16" or tuple(sl.get_shape()) != want.get(name):
            fails.append(f"{name}: {sl.get_dtype()} {sl.get_shape()} (want BF16 {want.get(name)})")
# values: read the raw BF16 bits of one projection and one norm
def bf16(path, name):
    with open(path, "rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
        hdr = json.loads(fh.read(n))
        a, b = hdr[name]["data_offsets"]
        fh.seek(8 + n + a)
        u = np.frombuffer(fh.read(b - a), dtype=np.uint16).astype(np.uint32) << 16
        return u.view(np.float32)
q = bf16(os.path.join(out, idx["weight_map"]["model.layers.0.self_attn.q_proj.weight"]), "model.layers.0.self_attn.q_proj.weight")
nrm = bf16(os.path.join(out, idx["weight_map"]["model.norm.weight"]), "model.norm.weight")
if not (0.015 < float(q.std()) < 0.025 and abs(float(q.mean())) < 0.005):
    fails.append(f"q_proj mean {q.mean():.4f} std {q.std():.4f}, want N(0, 0.02)")
if not np.all(nrm == 1.0):
    fails.append("norm weights are not exactly 1.0")
r = subprocess.run([cli, "info", "-m", out], capture_output=True, text=True)
if r.returncode != 0 or "LlamaForCausalLM" not in r.stdout:
    fails.append("specdec info: " + r.stderr)
r = subprocess.run([cli, "generate", "-m", out, "-p", "And God said", "-n", "4", "--temp", "0", "--backend", "cpu",
                    "--json"], capture_output=True, text=True)
if r.returncode != 0 or json.loads(r.stdout)["stats"]["n_generated"] != 4:
    fails.append("specdec generate: " + r.stdout[-300:] + r.stderr[-300:])
for f in fails:
    print("FAIL " + f)
print(f"{info['params']} params in {info['shards']} shards; {len(want)} tensors checked; {len(fails)} failures")
sys.exit(1 if fails else 0)
