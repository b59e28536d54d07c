#!/usr/bin/env python3
"""Aggregate throughput against concurrency through the request scheduler.

Runs `specdec batch -f PROMPTS --parallel C --json` for every C in --concurrency, once
speculative (with the draft) and once plain (no draft), on the same prompts, and records
the summary of each run (tokens, seconds, tokens/s, acceptance). The ratios that matter
are computed inside this one run: tokens/s at C over tokens/s at 1, and speculative over
plain at each C (where speculation stops paying). Greedy by default so both modes emit
the same tokens (checked: a run whose tokens differ from the plain run's is an error).

  python3 bench/batch/batch_throughput.py --specdec build/specdec --out bench/results/batch_cpu_DATE.json \
      [--model DIR --draft DIR] [--backend cpu|cuda] [--prompts 64] [-n 64] [--concurrency 1,2,4,...] \
      [--plot bench/results/batch_cpu_DATE.png]

Without --model the bundled pair is used. --plot needs matplotlib (pip install matplotlib);
bench/batch/plot_batch.py draws the same figure from a saved JSON."""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SEEDS = ["And God said", "In the beginning", "The LORD is my shepherd", "Blessed are the meek",
         "And it came to pass", "Thou shalt not", "Behold", "Now the serpent was", "And Jesus answered",
         "Hear, O Israel", "Let there be light", "For God so loved"]


def run_batch(args, prompts_path, parallel, with_draft):
    cmd = [args.specdec, "batch", "-f", prompts_path, "--parallel", str(parallel), "--json", "-n", str(args.n),
           "--temp", "0", "--ignore-eos", "--backend", args.backend, "--draft-max", str(args.draft_max)]
    if args.model:
        cmd += ["-m", args.model]
        if with_draft:
            cmd += ["-md", args.draft]
    elif not with_draft:
        cmd += ["-m", os.path.join(ROOT, "models", "kjv-target")]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        sys.exit(f"batch_throughput: {' '.join(cmd)} failed ({p.returncode}): {p.stderr[-800:]}")
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    return lines[-1]["summary"], [x["tokens"] for x in lines[:-1]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--specdec", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model")
    ap.add_argument("--draft")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--draft-max", type=int, default=4)
    ap.add_argument("--concurrency", default="1,2,4,8,16,32,64")
    ap.add_argument("--plot")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    if args.model and not args.draft:
        sys.exit("batch_throughput: --model needs --draft (the speculative runs)")
    conc = [int(x) for x in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        prompts_path = os.path.join(tmp, "prompts.txt")
        with open(prompts_path, "w") as f:
            f.write("\n".join(SEEDS[i % len(SEEDS)] + " " * (i // len(SEEDS)) for i in range(args.prompts)) + "\n")
        rows = []
        for c in conc:
            spec, spec_tokens = run_batch(args, prompts_path, c, True)
            plain, plain_tokens = run_batch(args, prompts_path, c, False)
            if spec_tokens != plain_tokens:
                sys.exit(f"batch_throughput: speculative and plain outputs differ at concurrency {c}")
            rows.append({"concurrency": c, "speculative": spec, "plain": plain,
                         "speculative_over_plain": spec["tokens_per_second"] / plain["tokens_per_second"]})
            print(f"C={c:3d}: speculative {spec['tokens_per_second']:9.1f} tok/s (acceptance "
                  f"{spec['acceptance_rate']:.2f}), plain {plain['tokens_per_second']:9.1f} tok/s, "
                  f"ratio {rows[-1]['speculative_over_plain']:.2f}", flush=True)
    base_s, base_p = rows[0]["speculative"]["tokens_per_second"], rows[0]["plain"]["tokens_per_second"]
    for r in rows:
        r["speculative_scaling"] = r["speculative"]["tokens_per_second"] / base_s
        r["plain_scaling"] = r["plain"]["tokens_per_second"] / base_p
    gpu = ""
    if args.backend == "cuda":
        q = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
        gpu = q.stdout.strip().splitlines()[0] if q.returncode == 0 and q.stdout.strip() else "unknown"
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    doc = {"benchmark": "scheduler throughput vs concurrency (specdec batch)",
           "date": datetime.date.today().isoformat(), "commit": commit, "machine": platform.processor() or
           platform.machine(), "cpus": os.cpu_count(), "gpu": gpu, "backend": args.backend,
           "model": args.model or "bundled kjv-target", "draft": args.draft or "bundled kjv-draft",
           "prompts": args.prompts, "n_predict": args.n, "draft_max": args.draft_max, "verify": "greedy",
           "note": args.note, "rows": rows}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    if args.plot:
        sys.path.insert(0, HERE)
        from plot_batch import plot
        plot(doc, args.plot)


if __name__ == "__main__":
    main()
