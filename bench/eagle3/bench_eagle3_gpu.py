#!/usr/bin/env python3
"""bench_eagle3_gpu.py — EAGLE-3 chains and trees on a GPU (issue 22 item 6): target-pass cost
ratios and the predicted tok/s at the published acceptance lengths, on a random-weight
Llama-3.1-8B-shape target (tools/make_random_checkpoint.py) and a random head of that shape
(bench/eagle3/make_random_head.py). Random weights accept almost nothing, so the speedup is
predicted from the measured costs (bench/eagle3/bench_eagle3_cost.c says how); the published
acceptance lengths are 3.1 tokens per round for chains (vLLM, Llama-3.1-8B, EAGLE-3 chain) and 4.0
for EAGLE-2 trees (sglang), both overridable.

    python3 bench/eagle3/bench_eagle3_gpu.py [--build build] [--work /tmp/specdec-eagle3]
        [--tokenizer ../shared/tokenizers/llama-3-8b] [--out bench/results/eagle3_gpu_<date>.json]
    python3 bench/eagle3/bench_eagle3_gpu.py --tiny --backend cpu --bin B --work W --out F   (CI dry run)

Budget on one H100 (built tree; the build itself not counted): writing the 16 GB checkpoint
(~1 min at disk speed), the head (0.9 GB), loading and uploading both (~0.5 min), validation and
the measurements (~1 min at the defaults): about 3 minutes. The checkpoint is reused when --work
already holds one. --tiny: the 2-layer `tiny` shape with models/kjv-target's tokenizer and a head
of its shape, short runs; it checks that every part works, its numbers mean nothing.
Exit status 0 only when the program validated (eagle3 greedy output == plain decoding) and wrote a
JSON whose every time is positive and finite."""
import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def run(cmd, what):
    t0 = time.time()
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd)
    if r.returncode != 0:
        sys.exit(f"bench_eagle3_gpu: {what} failed (exit {r.returncode})")
    return time.time() - t0


def check(doc):
    """Every number positive and finite, the expected rows present."""
    bad = []

    def walk(x, path):
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, f"{path}.{k}")
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]")
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            if not math.isfinite(x) or x <= 0:
                bad.append(f"{path} = {x}")
    walk({k: doc[k] for k in ("plain", "target_pass_ms", "head_ms", "chains", "trees")}, "")
    if not doc["chains"] or len(doc["trees"]) != 3:
        bad.append("chains / trees missing")
    for row in doc["chains"] + doc["trees"]:
        for k in ("pass_ratio_vs_M1", "t_round_ms", "predicted_tok_s", "predicted_speedup", "break_even_tau"):
            if k not in row:
                bad.append(f"{k} missing")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="the dry run: a 2-layer pair, short runs")
    ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--bin", default="", help="bench_eagle3_cost (default: BUILD/bench/eagle3/bench_eagle3_cost)")
    ap.add_argument("--work", default="/tmp/specdec-eagle3")
    ap.add_argument("--tokenizer", default="")
    ap.add_argument("--out", default="")
    ap.add_argument("--ctx", type=int, default=0)
    ap.add_argument("--predict", type=int, default=0)
    ap.add_argument("--reps", type=int, default=0)
    ap.add_argument("--tau-chain", type=float, default=3.1)
    ap.add_argument("--tau-tree", type=float, default=4.0)
    a = ap.parse_args()
    shape = "tiny" if a.tiny else "llama-3.1-8b"
    tok = a.tokenizer or (os.path.join(ROOT, "models", "kjv-target") if a.tiny
                          else os.path.join(ROOT, "..", "shared", "tokenizers", "llama-3-8b"))
    binp = a.bin or os.path.join(a.build, "bench", "eagle3", "bench_eagle3_cost")
    if not os.path.exists(binp):
        run(["cmake", "--build", a.build, "--target", "bench_eagle3_cost", "-j"], "building bench_eagle3_cost")
    date = datetime.date.today().isoformat()
    out = a.out or os.path.join(ROOT, "bench", "results", f"eagle3_{a.backend}_{date}.json")
    target, head = os.path.join(a.work, "target-" + shape), os.path.join(a.work, "head-" + shape)
    setup = {}
    if not os.path.exists(os.path.join(target, "config.json")):
        setup["write_target_s"] = run([sys.executable, os.path.join(ROOT, "tools", "make_random_checkpoint.py"),
                                       "--shape", shape, "--out", target, "--tokenizer", tok], "the target checkpoint")
    if not os.path.exists(os.path.join(head, "config.json")):
        setup["write_head_s"] = run([sys.executable, os.path.join(HERE, "make_random_head.py"), "--target", target,
                                     "--out", head], "the head")
    ctx, predict, reps = a.ctx or (48 if a.tiny else 1024), a.predict or (24 if a.tiny else 128), a.reps or (1 if a.tiny else 3)
    cmd = [binp, target, head, out, "--backend", a.backend, "--ctx", str(ctx), "--predict", str(predict),
           "--reps", str(reps), "--tau-chain", str(a.tau_chain), "--tau-tree", str(a.tau_tree)]
    if a.tiny:
        cmd += ["--gammas", "3,5"]
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    setup["bench_s"] = run(cmd, "bench_eagle3_cost")
    with open(out) as f:
        doc = json.load(f)
    bad = check(doc)
    if bad:
        sys.exit("bench_eagle3_gpu: bad results in %s: %s" % (out, "; ".join(bad[:8])))
    doc.update(date=date, shape=shape, host=platform.node() or "unknown", setup_s=setup,
               command=" ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]))
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"bench_eagle3_gpu: {out}: {len(doc['chains'])} chains, {len(doc['trees'])} trees, all times positive")
    return 0


if __name__ == "__main__":
    sys.exit(main())
