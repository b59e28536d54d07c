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
gguf_gpt_oss fixture rewritten by gguf-py loads, and with a swiglu_clamp_exp key, F16 experts, a NaN MXFP4
scale or Q8_0 expert biases it is refused naming the cause; --tokenizer gives a GGUF without one the tokenizer.json of its twin;
gguf_glm4_moe loads without its MTP block (blk.3) and drafts with it (--drafter mtp == plain; without the block's
embedding / head copies too; without its eh_proj refused), and a block past it,
an undeclared MTP block or softmax gating are refused; so are an olmoe file with attention.clamp_kqv, an exaone4 file whose window pattern does not
cover its layers and deepseek2 files with an unknown gating function or no non-rotary key part.
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



def rewrite(name, path, keys=None, tensor=None, extra=None, drop=()):
    """Fixture `name`'s model.gguf rewritten by gguf-py into path with changes: keys {key: (value, GGUFValueType)}
    replace / add metadata, tensor(name, data, type) -> (data, type) edits each tensor, extra {name: array}
    adds F32 tensors, the tensors named in drop are left out."""
    import gguf as gg
    import numpy as np
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
    from gguf_fields import copy_fields
    r = gg.GGUFReader(gguf(name))
    arch = r.fields["general.architecture"].contents()
    w = gg.GGUFWriter(path, arch)
    keys = dict(keys or {})
    copy_fields(r, w, skip=keys)
    for k, (v, t) in keys.items():
        if t == gg.GGUFValueType.ARRAY:
            w.add_array(k, v)
        else:
            w.add_key_value(k, v, t)
    for t in r.tensors:
        if t.name in drop:
            continue
        data, qt = np.array(t.data), t.tensor_type
        if tensor:
            data, qt = tensor(t.name, data, qt)
        w.add_tensor(t.name, data, raw_dtype=qt)
    for n, a in (extra or {}).items():
        w.add_tensor(n, np.asarray(a, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def oss_tensor(f16_gate=False, nan_scale=False, q8_bias=False):
    """gpt-oss edits: layer 0's gate experts stored F16 (decoded), a NaN scale (0xFF) in layer 0's first up
    block, or layer 0's gate biases stored Q8_0."""
    import gguf as gg
    import numpy as np

    def edit(name, data, qt):
        if q8_bias and name == "blk.0.ffn_gate_exps.bias":
            return gg.quants.quantize(np.zeros((data.shape[0], 32), dtype=np.float32), gg.GGMLQuantizationType.Q8_0), \
                gg.GGMLQuantizationType.Q8_0
        if f16_gate and name == "blk.0.ffn_gate_exps.weight":
            return gg.quants.dequantize(data, qt).astype(np.float16), gg.GGMLQuantizationType.F16
        if nan_scale and name == "blk.0.ffn_up_exps.weight":
            data.reshape(-1)[0] = 0xFF
        return data, qt
    return edit


def refused(path, needle, what):
    p = subprocess.run([BIN, "info", "-m", path], capture_output=True, text=True, timeout=60)
    check(p.returncode != 0 and needle in p.stderr, f"{what}: refused naming {needle!r}: {p.stderr[-300:]!r}")


# --tokenizer: a GGUF without a tokenizer (gguf_deepseek_v3) runs with its Hugging Face twin's tokenizer.json,
# drafting (n-gram) equal to plain decoding; without it the tokenizer is missing
tok = os.path.join(FIX, "deepseek_v3", "tokenizer.json")
a = generate(gguf("gguf_deepseek_v3"), "--tokenizer", tok, "--temp", "0", "--drafter", "none")
b = generate(gguf("gguf_deepseek_v3"), "--tokenizer", tok, "--temp", "0", "--drafter", "ngram")
check(a is not None and b is not None and len(a["tokens"]) == N and a["tokens"] == b["tokens"],
      "--tokenizer: a GGUF without a tokenizer generates with a tokenizer.json")
p = subprocess.run([BIN, "generate", "-m", gguf("gguf_deepseek_v3"), "-p", PROMPT, "-n", "2", "--backend", "cpu"],
                   capture_output=True, text=True, timeout=60)
check(p.returncode != 0 and "holds no tokenizer" in p.stderr, f"no --tokenizer: {p.stderr[-200:]!r}")

# GPT-OSS: its MXFP4 experts repacked (the fixture's logits: model_fixtures_gguf_twin); what is refused. GLM-4.5:
# its MTP block (blk.3) left out of the target, a block beyond it or another gating function refused; the block
# drafts for the file (--drafter mtp: its logits are mtp_draft's claim), greedy output equal to plain decoding.
info = run("info", "-m", gguf("gguf_gpt_oss")).stdout
check("GptOssForCausalLM" in info and "yarn" in info, f"info gguf_gpt_oss: {info!r}")
info = run("info", "-m", gguf("gguf_glm4_moe")).stdout
check("Glm4MoeForCausalLM" in info and "layers:                  3" in info and "mtp_layers:              1" in info,
      f"info gguf_glm4_moe: {info!r}")
glm_tok = os.path.join(FIX, "glm4_moe", "tokenizer.json")


def glm_mtp(model, drafter):
    return generate(model, "--tokenizer", glm_tok, "--temp", "0", "--drafter", drafter, "--draft-max", "3")


glm_plain = glm_mtp(gguf("gguf_glm4_moe"), "none")
glm = glm_mtp(gguf("gguf_glm4_moe"), "mtp")
check(glm_plain is not None and glm is not None and len(glm["tokens"]) == N and glm["tokens"] == glm_plain["tokens"]
      and glm["stats"]["draft_method"] == "mtp" and glm["stats"]["n_drafted"] > 0,
      f"gguf_glm4_moe --drafter mtp: greedy == plain, drafting: {glm and glm['stats']}")
with tempfile.TemporaryDirectory() as tmp:
    import gguf as gg
    same = os.path.join(tmp, "same.gguf")
    rewrite("gguf_gpt_oss", same)
    check("GptOssForCausalLM" in run("info", "-m", same).stdout, "gpt-oss rewritten unchanged by gguf-py loads")
    bad = os.path.join(tmp, "bad.gguf")
    rewrite("gguf_gpt_oss", bad, keys={"gpt-oss.swiglu_clamp_exp": (7.0, gg.GGUFValueType.FLOAT32)})
    refused(bad, "swiglu_clamp_exp", "gpt-oss with swiglu_clamp_exp")
    rewrite("gguf_gpt_oss", bad, tensor=oss_tensor(f16_gate=True))
    refused(bad, "load in MXFP4", "gpt-oss with F16 experts")
    rewrite("gguf_gpt_oss", bad, tensor=oss_tensor(nan_scale=True))
    refused(bad, "scale 0xFF", "gpt-oss with a NaN MXFP4 scale")
    rewrite("gguf_gpt_oss", bad, tensor=oss_tensor(q8_bias=True))
    refused(bad, "must be F32, F16 or BF16", "gpt-oss with block-quantized expert biases")
    rewrite("gguf_glm4_moe", bad, keys={"glm4moe.expert_gating_func": (1, gg.GGUFValueType.UINT32)})
    refused(bad, "expert_gating_func", "glm4moe routing by the softmax")
    rewrite("gguf_glm4_moe", bad, extra={"blk.4.attn_norm.weight": [1.0] * 32})
    refused(bad, "blk.4.attn_norm", "glm4moe with a block past its MTP block")
    rewrite("gguf_glm4_moe", bad, keys={"glm4moe.nextn_predict_layers": (0, gg.GGUFValueType.UINT32)})
    refused(bad, "model.layers.3.eh_proj", "glm4moe whose MTP block is not declared")
    # the MTP block without its own embedding and head copies (llama.cpp reads them as optional): the model's
    # stand in; without eh_proj, an MTP load is refused naming it (the target still loads)
    rewrite("gguf_glm4_moe", bad, drop={"blk.3.nextn.embed_tokens.weight", "blk.3.nextn.shared_head_head.weight"})
    g2 = glm_mtp(bad, "mtp")
    check(g2 is not None and glm_plain is not None and g2["tokens"] == glm_plain["tokens"] and g2["stats"]["n_drafted"] > 0,
          "glm4moe MTP block without embed_tokens / shared_head_head copies drafts, greedy == plain")
    rewrite("gguf_glm4_moe", bad, drop={"blk.3.nextn.eh_proj.weight"})
    p = subprocess.run([BIN, "generate", "-m", bad, "--tokenizer", glm_tok, "--drafter", "mtp", "-p", PROMPT, "-n",
                        "2", "--backend", "cpu"], capture_output=True, text=True, timeout=60)
    check(p.returncode != 0 and "model.layers.3.eh_proj" in p.stderr, f"MTP block without eh_proj: {p.stderr[-300:]!r}")
    check("Glm4MoeForCausalLM" in run("info", "-m", bad).stdout, "the target loads without the MTP block's eh_proj")
    p = subprocess.run([BIN, "generate", "-m", gguf("gguf_qwen3"), "--drafter", "mtp", "-p", PROMPT, "-n", "2",
                        "--backend", "cpu"], capture_output=True, text=True, timeout=60)
    check(p.returncode != 0 and "no MTP block" in p.stderr, f"--drafter mtp on a GGUF without one: {p.stderr[-300:]!r}")
    rewrite("gguf_olmoe", bad, keys={"olmoe.attention.clamp_kqv": (8.0, gg.GGUFValueType.FLOAT32)})
    refused(bad, "clamp_kqv", "olmoe with a q / k / v clamp")
    rewrite("gguf_deepseek_v3", bad, keys={"deepseek2.expert_gating_func": (5, gg.GGUFValueType.UINT32)})
    refused(bad, "expert_gating_func", "deepseek2 with an unknown gating function")
    rewrite("gguf_deepseek_v3", bad, keys={"deepseek2.attention.key_length_mla": (4, gg.GGUFValueType.UINT32)})
    refused(bad, "must exceed the rotary part", "deepseek2 whose key width is the rotary part")
    rewrite("gguf_exaone4", bad, keys={"exaone4.attention.sliding_window_pattern": ([True, False], gg.GGUFValueType.ARRAY)})
    refused(bad, "one bool per layer", "exaone4 with a window pattern of 2 for 4 layers")

if SERVER:
    srv = Server("-m", gguf("gguf_qwen3"), "-md", gguf("gguf_qwen3"))
    try:
        st, r = srv.post({"prompt": PROMPT, "max_tokens": N, "temperature": 0, "ignore_eos": True})
        check(st == 200 and plain.get("gguf_qwen3") and r["choices"][0]["text"] == plain["gguf_qwen3"]["text"],
              f"server -m FILE.gguf: {st} {r}")
    finally:
        srv.stop()
    srv = Server("-m", gguf("gguf_deepseek_v3"), "--tokenizer", tok)  # a GGUF without a tokenizer, given one
    try:
        st, r = srv.post({"prompt": PROMPT, "max_tokens": N, "temperature": 0, "ignore_eos": True})
        check(st == 200 and a is not None and r["choices"][0]["text"] == a["text"],
              f"server -m FILE.gguf --tokenizer tokenizer.json: {st} {r}")
    finally:
        srv.stop()
    srv = Server("-m", gguf("gguf_glm4_moe"), "--tokenizer", glm_tok, "--speculative-config",
                 '{"method": "mtp", "num_speculative_tokens": 3}')  # the file's MTP block drafts
    try:
        st, r = srv.post({"prompt": PROMPT, "max_tokens": N, "temperature": 0, "ignore_eos": True})
        check(st == 200 and glm_plain is not None and r["choices"][0]["text"] == glm_plain["text"] and
              r["speculative"]["draft_method"] == "mtp" and r["speculative"]["n_drafted"] > 0,
              f"server -m FILE.gguf with its MTP block drafting: {st} {r}")
    finally:
        srv.stop()
finish()
