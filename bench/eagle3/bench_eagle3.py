#!/usr/bin/env python3
"""bench_eagle3.py — the bundled EAGLE-3 head against the bundled draft model on the CPU.

For held-out prompts (verses of the books kept out of training, tools/train_pair.py's
"heldout" list in the training corpus JSON) the script runs `specdec generate --json` with
plain decoding, then the kjv-draft model and the kjv-eagle3 head as greedy chains of every
--gammas value and as the --trees shapes (kjv-draft: a static tree, or best-first within it with
--draft-nodes; the head: the EAGLE-2 dynamic tree). Every speculative output is checked equal to
plain decoding (greedy is exact).

Timing on a shared machine: --reps repetitions, each a pass over every (prompt, config) pair in a
seeded shuffled order, so load drift hits every config alike. Per repetition and config the
decode seconds (total minus prefill) are summed over the prompts; speedup = plain's sum / the
config's sum in the same repetition. The report gives the median over repetitions and the
min..max spread; tokens per round (target passes) are deterministic.

    python3 bench/eagle3/bench_eagle3.py [--specdec build/specdec] [--corpus /tmp/kjv-eagle3/corpus.json]
        [--prompts 24] [--n-new 64] [--gammas 2,3,4,5,6] [--trees "3,3,3;3,3,3@8;2,2,2,2,2@10"] [--reps 3]
        [--head DIR] [--out FILE.json]
"""
import argparse
import datetime
import json
import os
import platform
import random
import statistics
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
    return f"{model}, {os.cpu_count()} cores online"


def prompts(corpus, n):
    with open(corpus) as f:
        held = json.load(f)["heldout"]
    step = max(1, len(held) // n)
    # the first ~12 words of every step-th held-out verse
    return [" ".join(v.split()[:12]) for v in held[::step][:n]]


def configs(args):
    """[(name, draft dir or None, extra flags)]: plain, chains per gamma, trees."""
    out = [("plain", None, ("--draft-max", "4"))]
    for name, md in (("kjv-draft", "kjv-draft"), ("kjv-eagle3", args.head)):
        out += [(f"{name} chain {g}", md, ("--draft-max", str(g))) for g in args.gammas]
    for spec in args.trees:
        shape, _, nodes = spec.partition("@")
        extra = ("--tree", shape) + (("--draft-nodes", nodes) if nodes else ())
        label = f"tree {shape}" + (f" nodes {nodes}" if nodes else "")
        out += [(f"kjv-draft {label}", "kjv-draft", extra), (f"kjv-eagle3 {label}", args.head, extra)]
    return out


def run(args, prompt, md, extra):
    cmd = [args.specdec, "generate", "-m", os.path.join(args.models, "kjv-target"), "-p", prompt, "-n",
           str(args.n_new), "--temp", "0", "--ignore-eos", "--json", "--backend", "cpu"]
    if md:
        cmd += ["-md", md if os.path.isabs(md) else os.path.join(args.models, md)]
    cmd += list(extra)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def summarise(cfgs, tot, reps):
    res = {}
    for name, _, _ in cfgs:
        t = tot[name]
        dec = t["decode_s"]
        sp = [tot["plain"]["decode_s"][r] / dec[r] for r in range(reps)]
        gen = t["gen"] / reps
        res[name] = dict(tokens_per_round=round(t["gen"] / t["rounds"], 4),
                         drafted_per_round=round(t["drafted"] / t["rounds"], 3),
                         acceptance=round(t["accepted"] / t["drafted"], 4) if t["drafted"] else None,
                         decode_tokens_per_s=round(gen / statistics.median(dec), 1),
                         ms_per_round=round(1e3 * statistics.median(dec) / (t["rounds"] / reps), 2),
                         speedup_vs_plain=round(statistics.median(sp), 3),
                         speedup_min=round(min(sp), 3), speedup_max=round(max(sp), 3),
                         speedup_per_rep=[round(v, 3) for v in sp])
        print(f"{name:34s} tok/round {res[name]['tokens_per_round']:.3f}  {res[name]['ms_per_round']:6.2f} ms/round  "
              f"speedup {res[name]['speedup_vs_plain']:.3f} ({res[name]['speedup_min']:.3f}..{res[name]['speedup_max']:.3f})")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specdec", default=os.path.join(ROOT, "build", "specdec"))
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--corpus", default="/tmp/kjv-eagle3/corpus.json")
    ap.add_argument("--prompts", type=int, default=24)
    ap.add_argument("--n-new", type=int, default=64)
    ap.add_argument("--gammas", default="2,3,4,5,6")
    ap.add_argument("--trees", default="3,3,3;3,3,3@8;2,2,2,2,2@10",
                    help="tree shapes separated by ';', each optionally @NODES (--draft-nodes)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved timing repetitions")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--head", default="kjv-eagle3", help="the head directory (relative: under --models)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    args.gammas = [int(g) for g in args.gammas.split(",") if g]
    args.trees = [t for t in args.trees.split(";") if t]
    ps = prompts(args.corpus, args.prompts)
    cfgs = configs(args)
    tot = {k: dict(gen=0, rounds=0, drafted=0, accepted=0, decode_s=[0.0] * args.reps) for k, _, _ in cfgs}
    load0 = os.getloadavg()[0]
    rnd = random.Random(args.seed)
    mismatches = 0
    ref = {}
    for rep in range(args.reps):
        for i, p in enumerate(ps):
            order = list(cfgs)
            rnd.shuffle(order)
            for name, md, extra in order:
                r = run(args, p, md, extra)
                s = r["stats"]
                if rep == 0:
                    ref.setdefault(i, {})[name] = r["tokens"]
                    t = tot[name]
                    t["gen"] += s["n_generated"]
                    t["rounds"] += s["n_rounds"]
                    t["drafted"] += s["n_drafted"]
                    t["accepted"] += s["n_accepted"]
                tot[name]["decode_s"][rep] += s["t_total_s"] - s["t_prefill_s"]
        print(f"repetition {rep + 1}/{args.reps} done, load {os.getloadavg()[0]:.1f}", file=sys.stderr)
    for i in ref:
        for name, toks in ref[i].items():
            if toks != ref[i]["plain"]:
                mismatches += 1
                print(f"MISMATCH {name}: {ps[i]!r}", file=sys.stderr)
    for t in tot.values():  # rounds etc. were counted in repetition 0 only
        t["gen"], t["rounds"], t["drafted"], t["accepted"] = (t[k] * args.reps for k in ("gen", "rounds", "drafted", "accepted"))
    res = summarise(cfgs, tot, args.reps)
    load1 = os.getloadavg()[0]
    best = {}
    for d in ("kjv-draft", "kjv-eagle3"):
        chains = {g: res[f"{d} chain {g}"]["speedup_vs_plain"] for g in args.gammas}
        best[d] = max(chains, key=chains.get)
    doc = {"benchmark": "EAGLE-3 head (kjv-eagle3) vs draft model (kjv-draft), bundled kjv-target, greedy, chains of "
                        "each gamma and trees (kjv-draft: static / best-first within the shape; kjv-eagle3: EAGLE-2 "
                        "dynamic tree, k = the widest level, depth = the shape's)",
           "date": datetime.date.today().isoformat(), "machine": machine(),
           "load_average_start_end": [round(load0, 1), round(load1, 1)], "backend": "cpu",
           "specdec": "specdec generate --backend cpu (Release, -DSPECDEC_CUDA=OFF)",
           "head": args.head,
           "prompts": len(ps), "prompt_source": "first 12 words of held-out verses (books never trained on)",
           "n_new": args.n_new, "gammas": args.gammas, "trees": args.trees, "reps": args.reps,
           "timing": "per repetition: decode seconds (total - prefill) summed over the prompts, configs in a shuffled "
                     "order per prompt; speedup = plain / config in the same repetition; median and min..max over "
                     "repetitions",
           "outputs_equal_plain": mismatches == 0, "best_gamma_by_speedup": best, "results": res}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
