#!/usr/bin/env python3
"""test_gguf_cli.py — GGUF files end to end: `specdec generate`, `info`, `tokenize`, `batch` and `serve` with
`-m FILE.gguf` (the model and its embedded tokenizer from one file) on the gguf_* fixtures
(tools/gen_gguf_fixtures.py: llama with Q4_K / Q6_K / Q8_0 blocks and rope_freqs, qwen3 in every legacy and
K-quant type, qwen2 in F16 / BF16; each embeds a byte-level BPE tokenizer and ships its tokenizer.json).

    test_gguf_cli.py SPECDEC_BINARY FIXTURE_DIR [--quick] [--no-server]

Checks: greedy output with the file drafting for itself (-md the same .gguf) equals plain decoding
(--drafter none) token for token, and every draft is accepted; so does the n-gram drafter, and match mode
at temperature 0.9; a GGUF target with its safetensors-free twin as a draft across two files (qwen3 target,
qwen3 draft copy); `specdec info` names the format and the block types; `specdec tokenize -m FILE.gguf` gives
the ids `specdec tokenize` gives from the fixture's tokenizer.json; `batch` over two prompts equals the
single runs; the server started with -m FILE.gguf answers a completion equal to plain decoding; the
gguf_gpt_oss fixture rewritten by gguf-py loads, and with a swiglu_clamp_exp key, F16 experts or a NaN MXFP4
scale it is refused naming the cause.
--quick (sanitizer builds): 8 tokens, no match mode. --no-server: a build without `specdec serve`.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from dtest import BIN, QUICK, Server, check, finish

FIX = sys.argv[2]
SERVER = "--no-server" not in sys.argv[3:]
N = 8 if QUICK else 20
PROMPT = "the cat and the ring"


def gguf(name):
    return os.path.join(FIX, name, "model.gguf")


def run(*args, expect_rc=0):
    p = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=300)
    check(p.returncode == expect_rc, f"{args[:3]}: exit {p.returncode}, stderr {p.stderr[-500:]!r}")
    return p


def generate(model, *args):
    p = run("generate", "-m", model, "-p", PROMPT, "-n", N, "--backend", "cpu", "--json", "--ignore-eos", *args)
    return json.loads(p.stdout) if p.returncode == 0 else None


plain = {}
for name in ("gguf_llama", "gguf_qwen3", "gguf_qwen2"):
    m = gguf(name)
    modes = (["--temp", "0"],) + (() if QUICK else (["--temp", "0.9", "--verify", "match", "--seed", "7"],))
    for mode in modes:
        base = generate(m, *mode, "--drafter", "none")
        if mode[1] == "0":
            plain[name] = base
        for extra in (["-md", m], ["--drafter", "ngram"]):
            d = generate(m, *mode, *extra)
            if d and base:
                check(d["tokens"] == base["tokens"] and d["text"] == base["text"],
                      f"{name} {mode} {extra}: output differs from plain decoding")
                if extra[0] == "-md":
                    st = d["stats"]
                    check(st["n_drafted"] > 0 and st["n_accepted"] == st["n_drafted"],
                          f"{name} {mode}: drafting for itself accepts every draft: {st}")
    if plain.get(name):
        check(len(plain[name]["tokens"]) == N, f"{name}: {len(plain[name]['tokens'])} tokens")

# the draft in another file (a copy): a GGUF target with a GGUF draft
with tempfile.TemporaryDirectory() as tmp:
    copy = os.path.join(tmp, "draft-q.gguf")
    shutil.copy(gguf("gguf_qwen3"), copy)
    d = generate(gguf("gguf_qwen3"), "--temp", "0", "-md", copy)
    check(d is not None and plain.get("gguf_qwen3") and d["tokens"] == plain["gguf_qwen3"]["tokens"],
          "qwen3 with a draft copy: output differs from plain decoding")

# info: the format and the block types
info = run("info", "-m", gguf("gguf_llama")).stdout
check("format:                  GGUF" in info and "dtype:                   INT4 (GGUF" in info and
      "LlamaForCausalLM" in info, f"info gguf_llama: {info!r}")
info = run("info", "-m", gguf("gguf_qwen2")).stdout
check("format:                  GGUF" in info and "Qwen2ForCausalLM" in info and "INT" not in info,
      f"info gguf_qwen2 (F16 / BF16): {info!r}")

# tokenize: the embedded tokenizer == the fixture's tokenizer.json
for name in ("gguf_llama", "gguf_qwen3"):
    text = "the cat and the ring, where 42 went"
    a = run("tokenize", "-m", gguf(name), "-p", text).stdout
    b = run("tokenize", "-m", os.path.join(FIX, name, "tokenizer.json"), "-p", text).stdout
    check(a.strip() and a == b, f"{name}: tokenize from the GGUF {a!r} vs tokenizer.json {b!r}")

# batch: two prompts through the scheduler, greedy, the file drafting for itself
with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    f.write(PROMPT + "\nwhere the red mat\n")
    prompts = f.name
b = run("batch", "-m", gguf("gguf_llama"), "-md", gguf("gguf_llama"), "-f", prompts, "--parallel", "2", "-n", N,
        "--temp", "0", "--ignore-eos", "--backend", "cpu", "--json")
os.remove(prompts)
if b.returncode == 0 and plain.get("gguf_llama"):
    items = [x for x in (json.loads(line) for line in b.stdout.splitlines() if line.startswith("{")) if "index" in x]
    check(len(items) == 2 and items[0]["tokens"] == plain["gguf_llama"]["tokens"] and items[1]["n_generated"] == N,
          f"batch: {b.stdout[:400]!r}")



def oss_variant(path, extra_key=False, f16_gate=False, nan_scale=False):
    """The gguf_gpt_oss fixture rewritten by gguf-py with one change: a swiglu_clamp_exp key, layer 0's gate
    experts stored F16 (decoded), or a NaN scale (0xFF) in layer 0's first up block."""
    import gguf as gg
    import numpy as np
    r = gg.GGUFReader(gguf("gguf_gpt_oss"))
    w = gg.GGUFWriter(path, "gpt-oss")
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        t = f.types[0]
        if t == gg.GGUFValueType.STRING:
            w.add_string(f.name, f.contents())
        elif t == gg.GGUFValueType.ARRAY:
            w.add_array(f.name, f.contents())
        else:
            w.add_key_value(f.name, f.contents(), t)
    if extra_key:
        w.add_float32("gpt-oss.swiglu_clamp_exp", 7.0)
    for t in r.tensors:
        data, qt = np.array(t.data), t.tensor_type
        if f16_gate and t.name == "blk.0.ffn_gate_exps.weight":
            data, qt = gg.quants.dequantize(data, qt).astype(np.float16), gg.GGMLQuantizationType.F16
        if nan_scale and t.name == "blk.0.ffn_up_exps.weight":
            data.reshape(-1)[0] = 0xFF
        w.add_tensor(t.name, data, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# GPT-OSS: its MXFP4 experts repacked (the fixture's logits: model_fixtures_gguf_twin); what is refused
info = run("info", "-m", gguf("gguf_gpt_oss")).stdout
check("GptOssForCausalLM" in info and "yarn" in info, f"info gguf_gpt_oss: {info!r}")
with tempfile.TemporaryDirectory() as tmp:
    same = os.path.join(tmp, "same.gguf")
    oss_variant(same)
    check("GptOssForCausalLM" in run("info", "-m", same).stdout, "gpt-oss rewritten unchanged by gguf-py loads")
    for kw, needle in ((dict(extra_key=True), "swiglu_clamp_exp"), (dict(f16_gate=True), "load in MXFP4"),
                       (dict(nan_scale=True), "scale 0xFF")):
        bad = os.path.join(tmp, "bad.gguf")
        oss_variant(bad, **kw)
        p = subprocess.run([BIN, "info", "-m", bad], capture_output=True, text=True, timeout=60)
        check(p.returncode != 0 and needle in p.stderr, f"gpt-oss {kw}: refused naming {needle!r}: {p.stderr[-300:]!r}")

if SERVER:
    srv = Server("-m", gguf("gguf_qwen3"), "-md", gguf("gguf_qwen3"))
    try:
        st, r = srv.post({"prompt": PROMPT, "max_tokens": N, "temperature": 0, "ignore_eos": True})
        check(st == 200 and plain.get("gguf_qwen3") and r["choices"][0]["text"] == plain["gguf_qwen3"]["text"],
              f"server -m FILE.gguf: {st} {r}")
    finally:
        srv.stop()
finish()
