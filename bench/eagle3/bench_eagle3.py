#!/usr/bin/env python3
"""bench_eagle3.py — the bundled EAGLE-3 head against the bundled draft model on the CPU.

For held-out prompts (verses of the books kept out of training, tools/train_pair.py's
"heldout" list in the training corpus JSON) the script runs `specdec generate --json` with
plain decoding, the kjv-draft model and the kjv-eagle3 head, greedy, chains of --gamma, and
reports per drafter: tokens per round (target passes), acceptance, decode tokens/s and the
speedup over plain decoding (sum of plain decode seconds / sum of speculative ones, prefill
excluded). Every speculative output is checked equal to plain decoding (greedy is exact).

    python3 bench/eagle3/bench_eagle3.py [--specdec build/specdec] [--corpus /tmp/kjv-eagle3/corpus.json]
                                         [--prompts 24] [--n-new 64] [--gamma 4] [--reps 2] [--head DIR] [--out FILE.json]
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")


def machine():
    try:
        with open("/proc/cpuinfo") as f:
            model = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    return f"{model}, {os.cpu_count()} cores online, load {os.getloadavg()[0]:.1f} at start"


def prompts(corpus, n):
    with open(corpus) as f:
        held = json.load(f)["heldout"]
    step = max(1, len(held) // n)
    # the first ~12 words of every step-th held-out verse
    return [" ".join(v.split()[:12]) for v in held[::step][:n]]


def run(args, prompt, md, extra=()):
    cmd = [args.specdec, "generate", "-m", os.path.join(args.models, "kjv-target"), "-p", prompt, "-n",
           str(args.n_new), "--temp", "0", "--ignore-eos", "--json", "--backend", "cpu", "--draft-max", str(args.gamma)]
    if md:
        cmd += ["-md", md if os.path.isabs(md) else os.path.join(args.models, md)]
    cmd += list(extra)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specdec", default=os.path.join(ROOT, "build", "specdec"))
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--corpus", default="/tmp/kjv-eagle3/corpus.json")
    ap.add_argument("--prompts", type=int, default=24)
    ap.add_argument("--n-new", type=int, default=64)
    ap.add_argument("--gamma", type=int, default=4)
    ap.add_argument("--reps", type=int, default=2, help="timing repetitions (the fastest counts)")
    ap.add_argument("--head", default="kjv-eagle3", help="the head directory (relative: under --models)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    ps = prompts(args.corpus, args.prompts)
    names = [("plain", None, ()), ("kjv-draft", "kjv-draft", ()), ("kjv-eagle3", args.head, ()),
             ("kjv-draft tree 3,3,3", "kjv-draft", ("--tree", "3,3,3")),
             ("kjv-eagle3 tree 3,3,3", args.head, ("--tree", "3,3,3"))]
    tot = {k: dict(gen=0, rounds=0, drafted=0, accepted=0, decode_s=0.0) for k, _, _ in names}
    mismatches = 0
    for p in ps:
        ref = None
        for name, md, extra in names:
            best = None
            for _ in range(args.reps):
                r = run(args, p, md, extra)
                s = r["stats"]
                dec = s["t_total_s"] - s["t_prefill_s"]
                if best is None or dec < best[1]:
                    best = (r, dec)
            r, dec = best
            s = r["stats"]
            if ref is None:
                ref = r["tokens"]
            elif r["tokens"] != ref:
                mismatches += 1
                print(f"MISMATCH {name}: {p!r}", file=sys.stderr)
            t = tot[name]
            t["gen"] += s["n_generated"]
            t["rounds"] += s["n_rounds"]
            t["drafted"] += s["n_drafted"]
            t["accepted"] += s["n_accepted"]
            t["decode_s"] += dec
    res = {}
    for name, _, _ in names:
        t = tot[name]
        res[name] = dict(tokens_per_round=round(t["gen"] / t["rounds"], 4),
                         drafted_per_round=round(t["drafted"] / t["rounds"], 3),
                         acceptance=round(t["accepted"] / t["drafted"], 4) if t["drafted"] else None,
                         decode_tokens_per_s=round(t["gen"] / t["decode_s"], 1),
                         speedup_vs_plain=round(tot["plain"]["decode_s"] / t["decode_s"], 3))
        print(f"{name:22s} tokens/round {res[name]['tokens_per_round']:.3f}  acceptance {res[name]['acceptance']}  "
              f"decode {res[name]['decode_tokens_per_s']:.1f} tok/s  speedup {res[name]['speedup_vs_plain']:.3f}")
    doc = {"benchmark": "EAGLE-3 head (kjv-eagle3) vs draft model (kjv-draft), bundled kjv-target, greedy, "
                        "chains of gamma and trees 3,3,3 (eagle3: EAGLE-2 dynamic tree, k 3, depth 3)",
           "date": datetime.date.today().isoformat(), "machine": machine(), "backend": "cpu",
           "prompts": len(ps), "prompt_source": "first 12 words of held-out verses (books never trained on)",
           "n_new": args.n_new, "gamma": args.gamma, "reps": args.reps,
           "outputs_equal_plain": mismatches == 0, "results": res}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
