#!/usr/bin/env python3
"""test_tree_cli.py — `specdec generate --tree B1,B2,... | --draft-nodes N` on the bundled pair.

    test_tree_cli.py SPECDEC_BINARY MODELS_DIR

Checks: a tree in match mode prints the same tokens as plain decoding with the same seed
(--json and the stats fields n_draft_rounds / mean_accepted_length / nodes_per_round,
the shape echoed in the parameters); the text mode prints the tree statistics line;
bad shapes (a zero, more than 64 nodes, depth above 16, widths that are not numbers,
--draft-nodes 0 or 65) exit 2 with a message naming the problem; a tree without a draft
model exits 1 with the library's message.
"""
import json
import subprocess
import sys

passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what}", file=sys.stderr)


BIN, MODELS = sys.argv[1], sys.argv[2]
TARGET, DRAFT = f"{MODELS}/kjv-target", f"{MODELS}/kjv-draft"
BASE = ["-m", TARGET, "-p", "And God said", "-n", "24", "--temp", "0.8", "--verify", "match", "--seed", "3",
        "--ignore-eos"]


def run(args, expect_rc):
    p = subprocess.run([BIN, "generate"] + args, capture_output=True, text=True, timeout=300)
    check(p.returncode == expect_rc, f"{args}: exit {p.returncode}, expected {expect_rc}; stderr: {p.stderr[-600:]!r}")
    return p


def gen_json(extra):
    p = run(BASE + ["--json"] + extra, 0)
    try:
        return json.loads(p.stdout)
    except ValueError:
        check(False, f"not JSON: {p.stdout[:300]!r}")
        return None


plain = gen_json(["-md", DRAFT, "--draft-max", "0"])
for extra, nodes in ((["--tree", "4,2,1,1"], None), (["--draft-nodes", "12"], 12),
                     (["--tree", "3,3", "--draft-nodes", "5"], 5)):
    d = gen_json(["-md", DRAFT] + extra)
    if plain and d:
        check(d["tokens"] == plain["tokens"], f"{extra}: tokens differ from plain decoding")
        s = d["stats"]
        check(s["n_draft_rounds"] > 0 and abs(s["nodes_per_round"] * s["n_draft_rounds"] - s["n_drafted"]) < 1e-6,
              f"{extra}: nodes_per_round inconsistent: {s}")
        check(abs(s["mean_accepted_length"] * s["n_draft_rounds"] - s["n_accepted"]) < 1e-6,
              f"{extra}: mean_accepted_length inconsistent: {s}")
        check(nodes is None or s["nodes_per_round"] <= nodes, f"{extra}: more nodes than the budget")
        check(d["params"]["draft_nodes"] == (nodes or 0), f"{extra}: draft_nodes not echoed")
        if extra[0] == "--tree":
            check(d["params"]["tree"] == [int(x) for x in extra[1].split(",")], f"{extra}: tree not echoed")

p = run(BASE + ["-md", DRAFT, "--tree", "2,2"], 0)
check("nodes verified per round" in p.stderr and "mean accepted length" in p.stderr and "acceptance by depth" in p.stderr,
      f"text mode: no tree statistics line: {p.stderr[-400:]!r}")

for bad, word in ((["--tree", "2,0,1"], "width 0"), (["--tree", "8,8"], "more than 64 nodes"),
                  (["--tree", ",".join(["1"] * 17)], "depth 17"), (["--tree", "2,x"], "comma-separated"),
                  (["--tree", ""], "comma-separated"), (["--tree", "65"], "width 65"),
                  (["--draft-nodes", "0"], "node budget"), (["--draft-nodes", "65"], "node budget"),
                  (["--tree"], "needs a value")):
    p = run(BASE + ["-md", DRAFT] + bad, 2)
    check(word in p.stderr, f"{bad}: the message does not say '{word}': {p.stderr[:300]!r}")

p = run(BASE + ["--tree", "2,2"], 1)  # -m without -md: no draft model
check("draft tree needs a draft model" in p.stderr, f"tree without a draft: {p.stderr[-300:]!r}")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
