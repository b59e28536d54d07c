"""specdec.AsyncLLM's overhead against LLM.generate, in one run, the bundled pair on the CPU backend.

The same N requests (distinct prompts "<base> <i>", fixed seeds, sampling at T = 0.8, max_tokens
each) go through one engine's scheduler three ways, each repeated --repeats times in turn (median):
  generate   LLM.generate(all prompts): one call, the scheduler's own waiting (the ceiling);
  async      AsyncLLM.generate per request, all gathered on one event loop, CUMULATIVE outputs;
  async_delta  the same with RequestOutputKind.DELTA.
Every way must give the same token ids for every request (checked; the run fails otherwise). Reported:
tokens/s (generated tokens / wall seconds) and each async way's ratio to generate's, measured in the
same run, plus the number of outputs an async request yielded (mean), which is the per-round streaming
granularity. Writes --out (JSON) and prints a Markdown table.

    PYTHONPATH=python build/venv/bin/python bench/python/bench_async.py --n 32 --max-tokens 48
"""
import argparse
import asyncio
import datetime
import json
import os
import platform
import statistics
import time

import specdec
from specdec import RequestOutputKind, SamplingParams


def params(i, args, kind=RequestOutputKind.CUMULATIVE):
    return SamplingParams(temperature=0.8, seed=1000 + i, max_tokens=args.max_tokens, ignore_eos=True,
                          output_kind=kind)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=32, help="requests per pass")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--max-num-seqs", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cpu-threads", type=int, default=None)
    ap.add_argument("--out", default="bench_async.json")
    args = ap.parse_args()
    prompts = [f"And God said {i}" for i in range(args.n)]
    eng = specdec.AsyncLLM(backend="cpu", max_num_seqs=args.max_num_seqs, cpu_threads=args.cpu_threads)

    def run_generate():
        outs = eng.llm.generate(prompts, [params(i, args) for i in range(args.n)], use_tqdm=False)
        return [o.outputs[0].token_ids for o in outs], 1.0

    def run_async(kind):
        async def one(i):
            n_out, toks = 0, []
            async for o in eng.generate(prompts[i], params(i, args, kind), f"{kind}-{i}"):
                n_out += 1
                toks = o.outputs[0].token_ids if kind != RequestOutputKind.DELTA else toks + o.outputs[0].token_ids
            return toks, n_out

        async def all_():
            return await asyncio.gather(*[one(i) for i in range(args.n)])

        res = asyncio.run(all_())
        return [t for t, _ in res], statistics.mean(n for _, n in res)

    ways = {"generate": run_generate, "async": lambda: run_async(RequestOutputKind.CUMULATIVE),
            "async_delta": lambda: run_async(RequestOutputKind.DELTA)}
    ref, _ = run_generate()  # warm-up and the reference ids
    times = {w: [] for w in ways}
    outputs_per_request = {}
    for _ in range(args.repeats):
        for w, fn in ways.items():
            t0 = time.perf_counter()
            toks, per = fn()
            times[w].append(time.perf_counter() - t0)
            outputs_per_request[w] = per
            if toks != ref:
                raise SystemExit(f"{w}: token ids differ from LLM.generate's")
    eng.shutdown()
    n_tokens = sum(len(t) for t in ref)
    rows = {}
    for w in ways:
        med = statistics.median(times[w])
        rows[w] = {"seconds_median": med, "tokens_per_s": n_tokens / med, "outputs_per_request": outputs_per_request[w]}
    for w in ways:
        rows[w]["ratio_to_generate"] = rows[w]["tokens_per_s"] / rows["generate"]["tokens_per_s"]
    result = {"date": datetime.date.today().isoformat(), "machine": f"{platform.node()} {platform.processor()} "
              f"{os.cpu_count()} CPUs", "library": specdec.library_version(), "args": vars(args),
              "generated_tokens": n_tokens, "ways": rows}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"| way | tokens/s | x generate | outputs per request |\n|---|---|---|---|")
    for w, r in rows.items():
        print(f"| {w} | {r['tokens_per_s']:.1f} | {r['ratio_to_generate']:.3f} | {r['outputs_per_request']:.1f} |")


if __name__ == "__main__":
    main()
