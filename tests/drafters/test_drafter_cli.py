#!/usr/bin/env python3
"""test_drafter_cli.py — `specdec generate --drafter ... [--trace]` on the bundled target.

    test_drafter_cli.py SPECDEC_BINARY MODELS_DIR [--quick]

Checks: --drafter ngram with the target alone (no -m: the bundled target without its
draft) in match mode prints the tokens of plain decoding with the same seed, the stats
and parameters name the drafter; --json --trace has one object per round whose emitted
tokens concatenate to the output, whose drafts have parents -1, 0, 1, ... (a chain) or
form a tree (--tree), whose accepted nodes are a root-to-node path with the emitted
tokens; the text mode prints trace lines on stderr; bad input exits 2 (an unknown
drafter, a draft model given with --drafter ngram, naming --drafter) or 1 (ngram_min 0,
ngram_max 65, --drafter model without a draft model: the library's message naming the
field). --quick (sanitizer builds): 8 tokens, one n-gram configuration with a tree.
"""
import json
import subprocess

from dtest import BIN, DRAFT, QUICK, TARGET, check, finish
TEXT = ("In the beginning God created the heaven and the earth. And the earth was without form, and void. "
        "In the beginning God created the heaven and the earth. And the earth was")
BASE = ["-p", TEXT, "-n", "8" if QUICK else "24", "--temp", "0.8", "--verify", "match", "--seed", "3", "--ignore-eos"]


def run(args, expect_rc):
    p = subprocess.run([BIN, "generate"] + args, capture_output=True, text=True, timeout=300)
    check(p.returncode == expect_rc, f"{args}: exit {p.returncode}, expected {expect_rc}; stderr: {p.stderr[-600:]!r}")
    return p


def check_trace(d, what, tree):
    t = d.get("trace", [])
    check(len(t) == d["stats"]["n_rounds"], f"{what}: {len(t)} trace records for {d['stats']['n_rounds']} rounds")
    check([x for r in t for x in r["emitted"]] == d["tokens"], f"{what}: emitted tokens != output")
    drafted = 0
    for r in t:
        n = len(r["draft_tokens"])
        drafted += n
        check(len(r["draft_parents"]) == n and r["drafter"] in ("ngram", "none"), f"{what}: round {r['round']}")
        check((n == 0) == (r["drafter"] == "none"), f"{what}: round {r['round']} drafter {r['drafter']} with {n} drafts")
        if not tree:
            check(r["draft_parents"] == list(range(-1, n - 1)), f"{what}: chain parents {r['draft_parents']}")
        check(all(-1 <= p < i for i, p in enumerate(r["draft_parents"])), f"{what}: parents {r['draft_parents']}")
        prev = -1
        for j, nd in enumerate(r["accepted_nodes"]):
            check(r["draft_parents"][nd] == prev and r["draft_tokens"][nd] == r["emitted"][j],
                  f"{what}: round {r['round']} accepted node {nd}")
            prev = nd
        check(r["n_accepted"] == len(r["accepted_nodes"]) and len(r["emitted"]) <= r["n_accepted"] + 1,
              f"{what}: round {r['round']} counts")
    check(drafted == d["stats"]["n_drafted"] and drafted > 0, f"{what}: {drafted} drafted")


plain = json.loads(run(BASE + ["-m", TARGET, "--json"], 0).stdout)
check(plain["stats"]["draft_method"] == "none", f"plain: drafter {plain['stats']['draft_method']}")
CONFIGS = (([], False), (["--draft-max", "6"], False), (["--tree", "3,2,1"], True),
           (["--draft-nodes", "9", "--ngram-max", "6", "--ngram-min", "2"], True))
for extra, tree in CONFIGS[2:3] if QUICK else CONFIGS:
    p = run(BASE + ["--drafter", "ngram", "--json", "--trace"] + extra, 0)
    d = json.loads(p.stdout)
    check(d["tokens"] == plain["tokens"], f"ngram {extra}: tokens differ from plain decoding")
    check(d["stats"]["draft_method"] == "ngram" and d["params"]["drafter"] == "ngram" and d["params"]["draft_model"] is None,
          f"ngram {extra}: {d['stats']['draft_method']} / {d['params']}")
    check_trace(d, f"ngram {extra}", tree)
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
check("MODEL" in run(BASE + ["--drafter", "model", "-m", TARGET], 1).stderr, "model without a draft model")
finish()
