#!/usr/bin/env python3
"""test_reference_writer.py — interoperability: checkpoints written by the Hugging Face
`safetensors` library (the format's reference writer) load through specdec_model_load
with every weight byte-identical.

Writes a single-file Llama (F16 weights, F32 norms, untied) and a two-shard Qwen2
(F32, tied, GQA, with an ignored rotary inv_freq buffer) with safetensors.numpy, then
runs `test_checkpoint --dump DIR MMAP` for mmap 0 and 1 and compares the dtype, shape
and FNV-1a hash of every tensor, and the info line, with what Python wrote.
usage: test_reference_writer.py TEST_CHECKPOINT_BINARY WORKDIR"""
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    from safetensors.numpy import save_file
except ImportError as e:  # fail loudly, never skip
    sys.exit(f"test_reference_writer.py: missing Python dependency ({e}); pip install -r tests/requirements.txt")

passed = failed = 0


def check(cond, msg):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", msg)


def fnv1a(b):
    h = 1469598103934665603
    for x in b:
        h = ((h ^ x) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def make(arch, V, H, I, L, NH, NKV, wdt, ndt, tie, bias, extra, seed):
    rng = np.random.default_rng(seed)
    hd = H // NH
    t = {}
    r = lambda *s, dt: rng.standard_normal(s).astype(dt)
    t["model.embed_tokens.weight"] = r(V, H, dt=wdt)
    for l in range(L):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = r(H, dt=ndt)
        t[p + "self_attn.q_proj.weight"] = r(NH * hd, H, dt=wdt)
        t[p + "self_attn.k_proj.weight"] = r(NKV * hd, H, dt=wdt)
        t[p + "self_attn.v_proj.weight"] = r(NKV * hd, H, dt=wdt)
        if bias:
            t[p + "self_attn.q_proj.bias"] = r(NH * hd, dt=ndt)
            t[p + "self_attn.k_proj.bias"] = r(NKV * hd, dt=ndt)
            t[p + "self_attn.v_proj.bias"] = r(NKV * hd, dt=ndt)
        t[p + "self_attn.o_proj.weight"] = r(H, NH * hd, dt=wdt)
        t[p + "post_attention_layernorm.weight"] = r(H, dt=ndt)
        t[p + "mlp.gate_proj.weight"] = r(I, H, dt=wdt)
        t[p + "mlp.up_proj.weight"] = r(I, H, dt=wdt)
        t[p + "mlp.down_proj.weight"] = r(H, I, dt=wdt)
        if extra:
            t[p + "self_attn.rotary_emb.inv_freq"] = r(hd // 2, dt=np.float32)
    t["model.norm.weight"] = r(H, dt=ndt)
    if not tie:
        t["lm_head.weight"] = r(V, H, dt=wdt)
    cfg = {"architectures": [arch], "vocab_size": V, "hidden_size": H, "intermediate_size": I,
           "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": NKV,
           "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 512,
           "tie_word_embeddings": tie, "bos_token_id": 0, "eos_token_id": 1, "hidden_act": "silu"}
    return t, cfg


def write(d, tensors, cfg, shards):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    if shards == 1:
        save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        return
    names = list(tensors)
    wm = {}
    for s in range(shards):
        fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s::shards]}
        save_file(part, os.path.join(d, fn), metadata={"format": "pt"})
        wm.update({n: fn for n in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": wm}, f)


def run_case(binary, d, tensors, cfg, wdt_name, bias):
    dn = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}
    n_params = sum(a.size for n, a in tensors.items() if "inv_freq" not in n)
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    want_info = (f"info {cfg['architectures'][0]} {cfg['vocab_size']} {cfg['hidden_size']} "
                 f"{cfg['intermediate_size']} {cfg['num_hidden_layers']} {cfg['num_attention_heads']} "
                 f"{cfg['num_key_value_heads']} {hd} {int(cfg['tie_word_embeddings'])} {n_params} {int(bias)} 0 "
                 f"{ {'F32': 0, 'F16': 1}[wdt_name] }")
    for mm in (0, 1):
        out = subprocess.run([binary, "--dump", d, str(mm)], capture_output=True, text=True)
        check(out.returncode == 0, f"{d} mmap={mm}: exit {out.returncode}: {out.stdout} {out.stderr}")
        lines = out.stdout.splitlines()
        check(lines and lines[0] == want_info, f"{d} mmap={mm}: info line {lines[:1]} != {want_info!r}")
        got = {}
        for ln in lines[1:]:
            parts = ln.split()
            got[parts[0]] = parts[1:]
        for n, a in tensors.items():
            if "inv_freq" in n:
                check(n not in got, f"{n} should be ignored")
                continue
            shape = list(a.shape) + ([0] if a.ndim == 1 else [])
            want = [dn[a.dtype], str(shape[0]), str(shape[1]), f"{fnv1a(a.tobytes()):016x}"]
            check(got.get(n) == want, f"{d} mmap={mm}: {n}: got {got.get(n)}, want {want}")
        check(len(got) == sum(1 for n in tensors if "inv_freq" not in n), f"{d}: tensor count {len(got)}")


def main():
    binary, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    t, cfg = make("LlamaForCausalLM", 40, 16, 24, 2, 4, 4, np.float16, np.float32, False, False, False, 1)
    write(os.path.join(work, "llama"), t, cfg, 1)
    run_case(binary, os.path.join(work, "llama"), t, cfg, "F16", False)
    t, cfg = make("Qwen2ForCausalLM", 36, 24, 20, 3, 6, 2, np.float32, np.float32, True, True, True, 2)
    write(os.path.join(work, "qwen2"), t, cfg, 2)
    run_case(binary, os.path.join(work, "qwen2"), t, cfg, "F32", True)
    shutil.rmtree(work, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


main()
