#!/usr/bin/env python3
"""`specdec batch -md HEAD` (the scheduler) with the bundled EAGLE-3 head, CPU backend.

Checks: every line of `specdec batch -m kjv-target -md kjv-eagle3` equals `specdec generate` on
that line alone with the same seed (line i = --seed S + i), tokens and text, and reports
draft_method "eagle3" with drafts made: greedy, match and rejection chains and an EAGLE-2 tree
(--tree), for --parallel 1 and 3 (more prompts than slots: slots are reused); --drafter eagle3
asks for the head in generate and batch, --drafter model with a head is refused naming it, and so
is --drafter eagle3 with a draft model; `generate --json --trace` with the head (a chain and an
EAGLE-2 tree): one record per round, drafter eagle3, the drafts a chain or a tree, the accepted
nodes a path carrying the emitted tokens, the output plain decoding's. --quick (sanitizer builds): fewer prompts and tokens, one
mode.

Usage: test_eagle3_cli.py SPECDEC_BIN MODELS_DIR [--quick]"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "drafters"))
from dtest import BIN, DRAFT, MODELS, QUICK, TARGET, check, check_trace, finish  # noqa: E402 (the drafter tests' helpers)

HEAD = os.path.join(MODELS, "kjv-eagle3")
tmp = tempfile.mkdtemp(prefix="eagle3_cli_")


def run(args, expect_rc=None):
    p = subprocess.run([BIN] + args, capture_output=True, timeout=600)
    if expect_rc is not None:
        check(p.returncode == expect_rc, f"{args[:8]}...: exit {p.returncode}, expected {expect_rc}; "
                                         f"stderr {p.stderr[-400:]!r}")
    return p


PROMPTS = ["And God said", "In the beginning", "And it came to pass, when the king", "Blessed are the meek",
           "Thou shalt not"]
if QUICK:
    PROMPTS = PROMPTS[:3]
N = "8" if QUICK else "24"
path = os.path.join(tmp, "prompts.txt")
with open(path, "w") as f:
    f.write("\n".join(PROMPTS) + "\n")

MODES = [["--temp", "0"], ["--verify", "match", "--temp", "0.8"], ["--temp", "0.9", "--top-k", "40"],
         ["--temp", "0", "--tree", "3,2,1"], ["--temp", "0.8", "--draft-nodes", "10"]]
if QUICK:
    MODES = [MODES[0], MODES[2]]
for mode in MODES:
    common = ["-m", TARGET, "-md", HEAD, "-n", N, "--backend", "cpu", "--draft-max", "3", "--ignore-eos"] + mode
    alone = []
    for i, p in enumerate(PROMPTS):  # line i samples with seed S + i (S = 11 here)
        g = run(["generate", "-p", p, "--json", "--seed", str(11 + i)] + common, 0)
        alone.append(json.loads(g.stdout) if g.returncode == 0 else None)
    drafted = sum(a["stats"]["n_drafted"] for a in alone if a)
    check(all(a and a["stats"]["draft_method"] == "eagle3" for a in alone) and drafted > 0,
          f"{mode}: generate -md HEAD drafts with eagle3 ({drafted} drafts)")
    for par in ("1",) if QUICK else ("1", "3"):
        b = run(["batch", "-f", path, "--parallel", par, "--json", "--seed", "11", "--no-progress"] + common, 0)
        lines = [json.loads(x) for x in b.stdout.decode().splitlines() if x.strip()]
        check(len(lines) == len(PROMPTS) + 1, f"{mode} parallel {par}: {len(lines)} JSON lines")
        for i, (got, ref) in enumerate(zip(lines, alone)):
            check(ref is not None and got["tokens"] == ref["tokens"] and got["text"] == ref["text"],
                  f"{mode} parallel {par}: prompt {i} differs from generate alone: {got.get('tokens')} / "
                  f"{ref and ref['tokens']}")
            st = got  # batch --json: the statistics at the top level
            check(st.get("draft_method") == "eagle3" and ref is not None and
                  st.get("n_drafted") == ref["stats"]["n_drafted"] and
                  st.get("n_accepted") == ref["stats"]["n_accepted"],
                  f"{mode} parallel {par}: prompt {i} stats {st.get('draft_method')} {st.get('n_drafted')} / "
                  f"{ref and ref['stats']['n_drafted']}")

# --drafter: eagle3 asks for the head; model with a head, eagle3 with a draft model are refused
base = ["-m", TARGET, "-p", "And God said", "-n", "8", "--temp", "0", "--backend", "cpu", "--json"]
g = run(["generate", "-md", HEAD, "--drafter", "eagle3"] + base, 0)
check(g.returncode == 0 and json.loads(g.stdout)["stats"]["draft_method"] == "eagle3", "generate --drafter eagle3")
b = run(["batch", "-md", HEAD, "--drafter", "eagle3", "-f", path, "-n", "8", "--temp", "0", "--backend", "cpu",
         "--json", "--no-progress"], 0)
check(b.returncode == 0 and json.loads(b.stdout.decode().splitlines()[0])["draft_method"] == "eagle3",
      "batch --drafter eagle3")
for md, drafter, word in ((HEAD, "model", b"EAGLE-3 head"), (DRAFT, "eagle3", b"EAGLE-3 head")):
    p = run(["generate", "-md", md, "--drafter", drafter] + base)
    check(p.returncode != 0 and word in p.stderr and b"INVALID_ARGUMENT" in p.stderr,
          f"generate -md {md} --drafter {drafter}: exit {p.returncode}, {p.stderr[-300:]!r}")
    p = run(["batch", "-md", md, "--drafter", drafter, "-f", path, "-n", "4", "--temp", "0", "--backend", "cpu",
             "--json", "--no-progress"])
    lines = [json.loads(x) for x in p.stdout.decode().splitlines() if x.strip()]
    check(p.returncode != 0 and lines and all(x["status"].startswith("SPECDEC_ERR_INVALID_ARGUMENT")
                                               for x in lines[:-1]),
          f"batch -md {md} --drafter {drafter}: exit {p.returncode}, {lines[:1]} {p.stderr[-300:]!r}")

# --json --trace: what the head drafted each round (a chain, an EAGLE-2 tree), what was accepted
# and emitted; greedy, so the output is plain decoding's
plain = json.loads(run(["generate", "--drafter", "none"] + base[:-1] + ["-n", "24", "--json"], 0).stdout)
for extra, tree in (([], False), (["--draft-nodes", "8"], True)):
    t = run(["generate", "-md", HEAD, "--trace"] + base[:-1] + ["-n", "24", "--json"] + extra, 0)
    d = json.loads(t.stdout)
    check(d["tokens"] == plain["tokens"], f"eagle3 trace {extra}: tokens differ from plain decoding")
    check_trace(d, f"eagle3 {extra}", tree, ("eagle3", "none"))
    check(not tree or any(len(set(r["draft_parents"])) < len(r["draft_parents"]) for r in d["trace"]),
          f"eagle3 trace {extra}: some round drafts siblings (a tree)")

finish()
