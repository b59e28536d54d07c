#!/usr/bin/env python3
"""test_mtp_cli.py — MTP drafting end to end: `specdec generate --drafter mtp`, `specdec batch`, and
`specdec serve --speculative-config '{"method": "mtp"}'` on the glm4_moe fixture (GLM-4.5's layout
with its checkpoint's MTP layer, random weights, an 80-id tokenizer: tools/gen_model_fixtures.py).

    test_mtp_cli.py SPECDEC_BINARY FIXTURE_DIR [--quick] [--no-server]

Checks: greedy output with the MTP layer drafting equals plain decoding (--drafter none) token for
token, in match mode too (temperature 0.9, same seed), and as a tree, and under a --regex grammar
(chain and tree); the statistics name the drafter "mtp" and it drafted; `specdec info` prints mtp_layers for the checkpoint (and the FP8 dtype
of qwen3_fp8, which has no such layer; INT4 for qwen3_awq, INT8 for qwen2_gptq_int8, FP8 for a
compressed-tensors FP8-dynamic model); -md naming the same checkpoint is accepted; --drafter mtp on a model
without an MTP layer (glm4_moe_flat) exits 1 naming the missing layer. The server started with
{"method": "mtp"} (vLLM's "deepseek_mtp" spelling too) answers completions equal to plain decoding
with "speculative": {"draft_method": "mtp"}; a request asking "eagle3" there, or "mtp" on a server
without the MTP layer, is a 400 naming speculative_config.method. --quick (sanitizer builds): 8
tokens, no match mode, one server. --no-server: the CLI checks only (a build without the server).
"""
import json
import os
import subprocess
import sys

from dtest import BIN, QUICK, Server, check, finish

FIX = sys.argv[2]
SERVER = "--no-server" not in sys.argv[3:]  # a build without `specdec serve`
GLM, FLAT = os.path.join(FIX, "glm4_moe"), os.path.join(FIX, "glm4_moe_flat")
N = 8 if QUICK else 24
PROMPT = "The ark rested, and Noah said"
def generate(*args, expect_rc=0, model=GLM):
    p = subprocess.run([BIN, "generate", "-m", model, "-p", PROMPT, "-n", str(N), "--backend", "cpu", "--json",
                        "--ignore-eos", *map(str, args)], capture_output=True, text=True, timeout=300)
    check(p.returncode == expect_rc, f"generate {args}: exit {p.returncode}, stderr {p.stderr[-500:]!r}")
    return json.loads(p.stdout) if p.returncode == 0 else p


greedy = None
for mode in (["--temp", "0"],) + (() if QUICK else (["--temp", "0.9", "--verify", "match", "--seed", "5"],)):
    plain = generate(*mode, "--drafter", "none")
    greedy = greedy or plain
    for extra in (["--draft-max", "3"], ["--tree", "2,2,1"], ["-md", GLM]):
        d = generate(*mode, "--drafter", "mtp", *extra)
        if isinstance(d, dict):
            check(d["tokens"] == plain["tokens"] and d["text"] == plain["text"],
                  f"mtp {mode} {extra}: output differs from plain decoding")
            check(d["stats"]["draft_method"] == "mtp" and d["stats"]["n_drafted"] > 0,
                  f"mtp {mode} {extra}: stats {d['stats']}")
# structured output: the drafts are masked by the grammar as the target's rows are; still plain's output
RE = "[a-z]{2,8}( [a-z]{2,8}){1,6}[.]"
for extra in (["--draft-max", "3"], ["--tree", "2,2"]):
    con = generate("--temp", "0", "--regex", RE, "--drafter", "none")
    d = generate("--temp", "0", "--regex", RE, "--drafter", "mtp", *extra)
    if isinstance(d, dict) and isinstance(con, dict):
        check(d["tokens"] == con["tokens"] and d["stats"]["draft_method"] == "mtp",
              f"mtp with --regex {extra}: {d['text']!r} vs plain {con['text']!r}")
p = generate("--drafter", "mtp", expect_rc=1, model=FLAT)
check(isinstance(p, subprocess.CompletedProcess) and "MTP layer" in p.stderr and "eh_proj" in p.stderr,
      f"no MTP layer: {getattr(p, 'stderr', '')[-300:]!r}")

# `specdec info` names the layer a checkpoint ships (and a model without one says nothing of it)
info = subprocess.run([BIN, "info", "-m", GLM], capture_output=True, text=True, timeout=60)
check(info.returncode == 0 and "mtp_layers:              1 (drafts for itself: --drafter mtp" in info.stdout,
      f"info: {info.stdout[-400:]!r}")
info = subprocess.run([BIN, "info", "-m", os.path.join(FIX, "qwen3_fp8")], capture_output=True, text=True, timeout=60)
check(info.returncode == 0 and "mtp_layers" not in info.stdout and "dtype:                   FP8_E4M3" in info.stdout,
      f"info of an FP8 model without an MTP layer: {info.stdout[-400:]!r}")
info = subprocess.run([BIN, "info", "-m", os.path.join(FIX, "qwen3_awq")], capture_output=True, text=True, timeout=60)
check(info.returncode == 0 and "dtype:                   INT4 (GPTQ / AWQ" in info.stdout,
      f"info of a 4-bit AWQ model: {info.stdout[-400:]!r}")
info = subprocess.run([BIN, "info", "-m", os.path.join(FIX, "qwen2_gptq_int8")], capture_output=True, text=True,
                      timeout=60)
check(info.returncode == 0 and "dtype:                   INT8 (GPTQ" in info.stdout,
      f"info of an 8-bit GPTQ model: {info.stdout[-400:]!r}")
info = subprocess.run([BIN, "info", "-m", os.path.join(FIX, "llama_ct_fp8_channel")], capture_output=True, text=True,
                      timeout=60)
check(info.returncode == 0 and "dtype:                   FP8_E4M3 (scaled per block, channel" in info.stdout,
      f"info of a compressed-tensors FP8-dynamic model: {info.stdout[-400:]!r}")

# batch: the scheduler (2 sequences at once) with the MTP layer, greedy
prompts = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"mtp_prompts_{os.getpid()}.txt")
with open(prompts, "w") as f:
    f.write(PROMPT + "\nNoah walked with God\n")
b = subprocess.run([BIN, "batch", "-m", GLM, "-f", prompts, "--parallel", "2", "-n", str(N), "--temp", "0",
                    "--ignore-eos", "--backend", "cpu", "--drafter", "mtp", "--json"], capture_output=True, text=True,
                   timeout=300)
os.remove(prompts)
check(b.returncode == 0, f"batch: exit {b.returncode} {b.stderr[-400:]!r}")
if b.returncode == 0:
    items = [x for x in (json.loads(line) for line in b.stdout.splitlines() if line.startswith("{")) if "index" in x]
    check(len(items) == 2 and [x.get("index") for x in items] == [0, 1] and items[0]["tokens"] == greedy["tokens"] and
          items[1]["n_generated"] == N and all(x["draft_method"] == "mtp" for x in items),
          f"batch: no output equal to plain decoding: {b.stdout[:400]!r}")


def completion(extra=None):
    return dict({"prompt": PROMPT, "max_tokens": N, "temperature": 0, "ignore_eos": True}, **(extra or {}))


for method in () if not SERVER else ("mtp",) if QUICK else ("mtp", "deepseek_mtp"):
    srv = Server("-m", GLM, "--speculative-config", json.dumps({"method": method, "num_speculative_tokens": 3}))
    try:
        st, r = srv.post(completion())
        sp = r.get("speculative", {}) if st == 200 else {}
        check(st == 200 and r["choices"][0]["text"] == greedy["text"] and sp.get("draft_method") == "mtp" and
              sp.get("n_drafted", 0) > 0, f"server {method}: {st} {r}")
        st, r = srv.post(completion({"speculative_config": {"method": "eagle3"}}))
        check(st == 400 and r["error"]["param"] == "speculative_config.method" and "MTP" in r["error"]["message"],
              f"server {method}: eagle3 request: {st} {r}")
        st, r = srv.post(completion({"speculative_config": {"method": "ngram"}}))
        check(st == 200 and r["choices"][0]["text"] == greedy["text"] and r["speculative"]["draft_method"] == "ngram",
              f"server {method}: ngram request: {st} {r}")
    finally:
        srv.stop()
if SERVER and not QUICK:
    srv = Server("-m", GLM)
    try:
        st, r = srv.post(completion({"speculative_config": {"method": "mtp"}}))
        check(st == 400 and r["error"]["param"] == "speculative_config.method" and "mtp" in r["error"]["message"],
              f"mtp request on a server without the layer: {st} {r}")
    finally:
        srv.stop()
finish()
