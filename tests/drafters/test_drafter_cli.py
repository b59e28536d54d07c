#!/usr/bin/env python3
"""test_drafter_cli.py — `specdec generate --drafter ... [--trace]` on the bundled target.

    test_drafter_cli.py SPECDEC_BINARY MODELS_DIR [--quick]

Checks: --drafter ngram with the target alone (no -m: the bundled target without its
draft) in match mode prints the tokens of plain decoding with the same seed, the stats
and parameters name the drafter; --json --trace has one object per round whose emitted
tokens concatenate to the output, whose drafts have parents -1, 0, 1, ... (a chain) or
form a tree (--tree), whose accepted nodes are a root-to-node path with the emitted
tokens; the text mode prints trace lines on stderr; bad input exits 2 (an unknown
drafter, a draft model given with --drafter ngram, naming --drafter; --ngram-cost fixed:x;
ngram_min 0, ngram_max 65, --ngram-cost fixed:200: the library's message naming the field)
or 1 (--drafter model without a draft model); --ngram-cost off|fixed:X are echoed in the
JSON parameters; `batch --ngram-corpus` gives the tokens it gives without the corpus, repeated prompts in
fewer rounds, and refuses a size past 2^26. --quick (sanitizer builds): 8 tokens, one n-gram configuration
with a tree.
"""
import json
import os
import subprocess
import tempfile

from dtest import BIN, DRAFT, QUICK, TARGET, check, check_trace, finish
TEXT = ("In the beginning God created the heaven and the earth. And the earth was without form, and void. "
        "In the beginning God created the heaven and the earth. And the earth was")
BASE = ["-p", TEXT, "-n", "8" if QUICK else "24", "--temp", "0.8", "--verify", "match", "--seed", "3", "--ignore-eos"]


def run(args, expect_rc):
    p = subprocess.run([BIN, "generate"] + args, capture_output=True, text=True, timeout=300)
    check(p.returncode == expect_rc, f"{args}: exit {p.returncode}, expected {expect_rc}; stderr: {p.stderr[-600:]!r}")
    return p


plain = json.loads(run(BASE + ["-m", TARGET, "--json"], 0).stdout)
check(plain["stats"]["draft_method"] == "none", f"plain: drafter {plain['stats']['draft_method']}")
CONFIGS = (([], False), (["--draft-max", "6"], False), (["--tree", "3,2,1"], True),
           (["--draft-nodes", "9", "--ngram-max", "6", "--ngram-min", "2"], True),
           (["--ngram-cost", "off"], False), (["--ngram-cost", "fixed:0.4", "--tree", "2,1,1"], True))
for extra, tree in CONFIGS[2:3] if QUICK else CONFIGS:
    p = run(BASE + ["--drafter", "ngram", "--json", "--trace"] + extra, 0)
    d = json.loads(p.stdout)
    check(d["tokens"] == plain["tokens"], f"ngram {extra}: tokens differ from plain decoding")
    check(d["stats"]["draft_method"] == "ngram" and d["params"]["drafter"] == "ngram" and d["params"]["draft_model"] is None,
          f"ngram {extra}: {d['stats']['draft_method']} / {d['params']}")
    check_trace(d, f"ngram {extra}", tree, ("ngram", "none"))
    cost = extra[extra.index("--ngram-cost") + 1] if "--ngram-cost" in extra else "measured"
    check(d["params"]["ngram_cost"] == cost.split(":")[0] and
          abs(d["params"]["ngram_token_cost"] - (float(cost[6:]) if cost.startswith("fixed:") else 0)) < 1e-6,
          f"ngram {extra}: params {d['params']}")
if not QUICK:
    p = run(BASE + ["--drafter", "ngram", "--trace"], 0)
    check(p.stderr.count("[round ") >= 1 and "[round 0, " in p.stderr and "speculative (ngram draft" in p.stderr,
          f"text trace: {p.stderr[-400:]!r}")

check("--drafter" in run(BASE + ["--drafter", "eagle"], 2).stderr, "an unknown drafter")
p = run(BASE + ["--drafter", "ngram", "-m", TARGET, "-md", DRAFT], 2)
check("--drafter" in p.stderr and "-md" in p.stderr, f"ngram with a draft model: {p.stderr[-300:]!r}")
# the limits are the library's (specdec_generate_params_validate), checked before anything loads: exit 2
check("ngram_min" in run(BASE + ["--drafter", "ngram", "--ngram-min", "0"], 2).stderr, "ngram_min 0")
check("ngram_max" in run(BASE + ["--drafter", "ngram", "--ngram-max", "65"], 2).stderr, "ngram_max 65")
check("--ngram-cost" in run(BASE + ["--drafter", "ngram", "--ngram-cost", "fixed:x"], 2).stderr, "fixed:x")
check("ngram_token_cost" in run(BASE + ["--drafter", "ngram", "--ngram-cost", "fixed:200"], 2).stderr, "fixed:200")
check("MODEL" in run(BASE + ["--drafter", "model", "-m", TARGET], 1).stderr, "model without a draft model")

# --ngram-corpus: `batch` over one prompt three times, one at a time: the same tokens as without the corpus,
# and the repeats (the earlier lines in the corpus) in fewer rounds; a size beyond 2^26 is refused
with tempfile.TemporaryDirectory() as tmp:
    lines = os.path.join(tmp, "prompts.txt")
    with open(lines, "w") as f:
        f.write("And God said\n" * 3)

    def batch(corpus):
        p = subprocess.run([BIN, "batch", "-m", TARGET, "-f", lines, "--parallel", "1", "--drafter", "ngram", "--temp",
                            "0", "-n", "8" if QUICK else "40", "--ignore-eos", "--ngram-corpus", str(corpus), "--json"],
                           capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, f"batch --ngram-corpus {corpus}: exit {p.returncode}: {p.stderr[-300:]!r}")
        rows = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
        return [r for r in rows if "summary" not in r]

    a, b = batch(0), batch(1 << 16)
    check(len(a) == 3 and len(b) == 3 and all(r["tokens"] == a[0]["tokens"] for r in a + b),
          "--ngram-corpus: the same tokens as without it")
    if not QUICK:
        check(b[2]["n_rounds"] < 0.75 * a[2]["n_rounds"],
              f"--ngram-corpus: rounds {[r['n_rounds'] for r in a]} -> {[r['n_rounds'] for r in b]}")
    p = subprocess.run([BIN, "batch", "-m", TARGET, "-f", lines, "--ngram-corpus", str((1 << 26) + 1)],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and "--ngram-corpus" in p.stderr, f"--ngram-corpus 2^26 + 1: {p.returncode} {p.stderr[-200:]!r}")
finish()
