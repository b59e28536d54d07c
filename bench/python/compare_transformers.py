"""specdec from Python vs transformers' generate(assistant_model=...) on CPU, the bundled pair, one run.

Both decode the same prompt ids (specdec's tokenizer, which equals the `tokenizers` library's) greedily
for up to --max-new-tokens tokens, stopping at EOS. Every configuration must emit the same token ids
for every prompt as transformers' plain greedy decoding of the target (checked on the warm-up pass,
recorded; the run fails otherwise unless --allow-mismatch). Then --repeats rounds time every
configuration in turn over all prompts; the median wall time gives tokens/s (generated tokens /
seconds, prompt processing included, as a user measures it).

Configurations: transformers target alone; transformers assisted (the draft as assistant_model) with
its default schedule and with γ = 4 constant (num_assistant_tokens=4, specdec's default); specdec
plain (no draft), specdec speculative one prompt per call, and all prompts in one call (the
scheduler decodes them together). transformers runs with --torch-threads threads (default 1, as
specdec's CPU backend decodes on one thread; "1,2" adds a second set of rows).

Needs torch + transformers and the specdec package (pip install ., or PYTHONPATH=python with a CMake
build): e.g. PYTHONPATH=python /work/venv-torch/bin/python bench/python/compare_transformers.py
Writes --out (JSON) and prints a Markdown table.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import time

import torch
import transformers
from transformers import AutoModelForCausalLM

import specdec

PROMPTS = ["And God said", "In the beginning", "The Lord is my shepherd;", "Jesus wept. And the",
           "Blessed are the poor in spirit:", "And the LORD spake unto Moses, saying,", "For God so loved the world,",
           "Now the serpent was more subtil"]


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name"))
    except Exception:
        return platform.processor()


ASSISTANT_DEFAULTS = {}


def hf_generate(model, ids, max_new, assistant=None, gamma=None):
    inp = torch.tensor([ids])
    kw = dict(max_new_tokens=max_new, do_sample=False, attention_mask=torch.ones_like(inp),
              pad_token_id=model.generation_config.eos_token_id)
    if assistant is not None:
        kw["assistant_model"] = assistant
        gc = assistant.generation_config
        for k, v in ASSISTANT_DEFAULTS.items():  # transformers' own settings, as loaded
            setattr(gc, k, v)
        if gamma is not None:  # γ fixed, no confidence-based early stop: specdec's chain
            gc.num_assistant_tokens = gamma
            gc.num_assistant_tokens_schedule = "constant"
            gc.assistant_confidence_threshold = 0
    with torch.inference_mode():
        out = model.generate(inp, **kw)
    return out[0, len(ids):].tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--torch-threads", default="1",
                    help="comma list of torch thread counts to run transformers with (default 1: specdec's CPU "
                         "backend decodes on one thread)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--allow-mismatch", action="store_true")
    a = ap.parse_args()
    load_start = os.getloadavg()
    target_dir, draft_dir = specdec.bundled_pair()
    n = a.max_new_tokens

    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    draft = AutoModelForCausalLM.from_pretrained(draft_dir, dtype=torch.float32).eval()
    for k in ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold"):
        ASSISTANT_DEFAULTS[k] = getattr(draft.generation_config, k)
    llm_spec = specdec.LLM(backend="cpu", max_num_seqs=len(PROMPTS))
    llm_plain = specdec.LLM(model=target_dir, backend="cpu", max_num_seqs=len(PROMPTS))
    sp = specdec.SamplingParams(temperature=0, max_tokens=n)
    prompt_ids = [llm_spec.tokenizer.encode(p) for p in PROMPTS]

    def sd_one(llm):
        return lambda: [llm.generate([ids], sp, use_tqdm=False)[0] for ids in prompt_ids]

    configs = []
    thread_counts = [int(t) for t in a.torch_threads.split(",")]
    for threads in thread_counts:
        configs += [
            (f"transformers target alone ({threads} thread{'s' * (threads > 1)})", threads,
             lambda: [hf_generate(target, ids, n) for ids in prompt_ids]),
            (f"transformers assisted, its defaults ({threads} thread{'s' * (threads > 1)})", threads,
             lambda: [hf_generate(target, ids, n, draft) for ids in prompt_ids]),
            (f"transformers assisted, γ=4 ({threads} thread{'s' * (threads > 1)})", threads,
             lambda: [hf_generate(target, ids, n, draft, 4) for ids in prompt_ids]),
        ]
    configs += [
        ("specdec plain (no draft), one prompt per call", None, sd_one(llm_plain)),
        ("specdec speculative γ=4, one prompt per call", None, sd_one(llm_spec)),
        ("specdec speculative γ=4, all prompts in one call", None,
         lambda: llm_spec.generate(prompt_ids, sp, use_tqdm=False)),
    ]

    def tokens_of(res):
        return [r if isinstance(r, list) else r.outputs[0].token_ids for r in res]

    # validation: transformers' plain greedy decoding is the reference
    torch.set_num_threads(thread_counts[0])
    reference = tokens_of(configs[0][2]())
    # timing: one warm-up pass each, then --repeats rounds over all configurations in turn (round
    # robin, so that a change in the machine's load during the run hits every configuration alike)
    results, times = {}, {name: [] for name, _, _ in configs}
    for name, threads, fn in configs:
        if threads is not None:
            torch.set_num_threads(threads)
        results[name] = fn()
    for _ in range(a.repeats):
        for name, threads, fn in configs:
            if threads is not None:
                torch.set_num_threads(threads)
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    rows = []
    mismatches = 0
    for name, threads, fn in configs:
        res = results[name]
        med = statistics.median(times[name])
        toks = tokens_of(res)
        same = [t == r for t, r in zip(toks, reference)]
        mismatches += same.count(False)
        n_tok = sum(len(t) for t in toks)
        row = dict(config=name, torch_threads=threads, seconds_median=med, seconds=times[name], tokens=n_tok,
                   tokens_per_second=n_tok / med, identical_to_reference=f"{sum(same)}/{len(same)}")
        if not isinstance(res[0], list):
            m = [r.metrics for r in res]
            row["acceptance_rate"] = sum(x.n_accepted for x in m) / max(1, sum(x.n_drafted for x in m))
            row["tokens_per_round"] = sum(x.n_generated for x in m) / max(1, sum(x.n_rounds for x in m))
        rows.append(row)
        print(f"{name}: {n_tok / med:.1f} tok/s ({med:.3f} s), identical {row['identical_to_reference']}",
              flush=True)
    base = next(r for r in rows if r["config"].startswith("transformers assisted, γ=4"))
    for r in rows:
        r["speedup_vs_transformers_assisted_g4"] = r["tokens_per_second"] / base["tokens_per_second"]
    result = dict(
        date=datetime.datetime.now().isoformat(timespec="seconds"),
        assistant_defaults=dict(ASSISTANT_DEFAULTS),
        machine=dict(cpu=cpu_name(), cores=os.cpu_count(), load_average_at_start=load_start,
                     load_average_at_end=os.getloadavg()),
        versions=dict(torch=torch.__version__, transformers=transformers.__version__,
                      specdec=specdec.library_version(), python=platform.python_version()),
        prompts=PROMPTS, max_new_tokens=n, repeats=a.repeats, greedy=True,
        reference="transformers target alone, greedy", mismatched_prompt_outputs=mismatches, rows=rows)
    print("\n| configuration | tokens/s | vs transformers assisted γ=4 | identical greedy output | acceptance | tokens/round |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        acc = f"{r['acceptance_rate']:.2f}" if "acceptance_rate" in r else ""
        tpr = f"{r['tokens_per_round']:.2f}" if "tokens_per_round" in r else ""
        print(f"| {r['config']} | {r['tokens_per_second']:.1f} | {r['speedup_vs_transformers_assisted_g4']:.2f}x | "
              f"{r['identical_to_reference']} | {acc} | {tpr} |")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=2)
    llm_spec.close()
    llm_plain.close()
    if mismatches and not a.allow_mismatch:
        raise SystemExit(f"{mismatches} prompt outputs differ from the reference")


if __name__ == "__main__":
    main()
