#!/usr/bin/env python3
"""KV admission: RESERVE against OPTIMISTIC (preemption by recomputation) in one run.

The workload where they differ: a bounded KV pool and requests whose max_tokens is far above what
they generate (they stop early: here at the first newline, as a chat turn ends at EOS). RESERVE
claims every block a request may ever hold (prompt + max_tokens), so few run at once;
OPTIMISTIC claims the prompt and one round, so up to --parallel run, and preempts (recomputes)
the newest when the pool runs short. Also the adversarial case: every request runs to max_tokens
(--ignore-eos), where OPTIMISTIC can only lose (preemptions recompute rows for nothing).

Runs `specdec batch -f PROMPTS --parallel P --kv-blocks B --kv-block-size 16 --kv-admission A
--json` for A in (reserve, optimistic), alternating, --reps times each, on the same prompts (T 0.8 in
match mode, line i seed 7 + i: both emit the same tokens, checked; greedy decoding of the bundled
model loops without a newline), and reports the median tokens/s of each and their ratio, the
preemptions, and the average number of requests running (tokens / rounds per request is not it: the
summary's seconds and tokens are).

  python3 bench/batch/bench_admission.py --specdec build/specdec --out bench/results/admission_cpu_DATE.json \
      [--model DIR --draft DIR] [--backend cpu|cuda] [--prompts 64] [-n 256] [--parallel 32] [--kv-blocks 68]
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

SEEDS = ["And God said", "In the beginning", "The LORD is my shepherd", "Blessed are the meek",
         "And it came to pass", "Thou shalt not", "Behold", "Now the serpent was", "And Jesus answered",
         "Hear, O Israel", "Let there be light", "For God so loved"]


def run_batch(a, path, adm, extra):
    cmd = [a.specdec, "batch", "-f", path, "--parallel", str(a.parallel), "--json", "--no-progress", "-n", str(a.n),
           "--temp", "0.8", "--verify", "match", "--seed", "7", "--backend", a.backend, "--kv-blocks", str(a.kv_blocks), "--kv-block-size", "16",
           "--kv-admission", adm] + extra
    if a.model:
        cmd += ["-m", a.model] + (["-md", a.draft] if a.draft else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr[-500:]}")
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    return [x["tokens"] for x in lines[:-1]], lines[-1]["summary"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specdec", default="build/specdec")
    ap.add_argument("--model")
    ap.add_argument("--draft")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("-n", type=int, default=256)
    ap.add_argument("--parallel", type=int, default=32)
    ap.add_argument("--kv-blocks", type=int, default=68)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "prompts.txt")
        with open(path, "w") as f:
            f.write("\n".join(SEEDS[i % len(SEEDS)] for i in range(a.prompts)) + "\n")
        cases = {}
        for case, extra in (("stop_at_newline", ["--stop", "\n"]), ("run_to_max_tokens", ["--ignore-eos"])):
            runs = {"reserve": [], "optimistic": []}
            tokens = {}
            for _ in range(a.reps):
                for adm in runs:  # alternating: drift hits both alike
                    toks, s = run_batch(a, path, adm, extra)
                    if adm in tokens and tokens[adm] != toks:
                        sys.exit(f"{case} {adm}: tokens differ between repetitions")
                    tokens[adm] = toks
                    runs[adm].append(s)
            if tokens["reserve"] != tokens["optimistic"]:
                sys.exit(f"{case}: optimistic's tokens differ from reserve's")
            res = {}
            for adm, ss in runs.items():
                tps = [s["tokens_per_second"] for s in ss]
                res[adm] = {"tokens": ss[0]["tokens"], "tokens_per_second": tps,
                            "median_tokens_per_second": statistics.median(tps),
                            "n_preemptions": [s["n_preemptions"] for s in ss],
                            "seconds": [s["seconds"] for s in ss]}
            res["optimistic_over_reserve"] = (res["optimistic"]["median_tokens_per_second"] /
                                              res["reserve"]["median_tokens_per_second"])
            cases[case] = res
            print(f"{case}: reserve {res['reserve']['median_tokens_per_second']:.1f} tok/s, optimistic "
                  f"{res['optimistic']['median_tokens_per_second']:.1f} tok/s (x{res['optimistic_over_reserve']:.2f}), "
                  f"{res['reserve']['tokens']} tokens, preemptions {res['optimistic']['n_preemptions']}")
    out = {"date": datetime.date.today().isoformat(), "machine": f"{platform.node()} {platform.processor()} "
           f"{os.cpu_count()} CPUs", "backend": a.backend, "model": a.model or "bundled kjv pair",
           "prompts": a.prompts, "max_tokens": a.n, "parallel": a.parallel, "kv_blocks": a.kv_blocks,
           "kv_block_size": 16, "reps": a.reps, "cases": cases}
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
