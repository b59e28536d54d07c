"""dtest.py — what the drafter tests' Python scripts share: the counted check, the
arguments (SPECDEC_BINARY MODELS_DIR [--quick]) and the exit status."""
import sys

BIN, MODELS = sys.argv[1], sys.argv[2]
QUICK = "--quick" in sys.argv[3:]
TARGET, DRAFT = f"{MODELS}/kjv-target", f"{MODELS}/kjv-draft"
counts = {"passed": 0, "failed": 0}


def check(cond, what):
    counts["passed" if cond else "failed"] += 1
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)


def check_trace(d, what, tree, drafters):
    """`generate --json --trace` output d: one record per round, its emitted tokens concatenate to
    the output, the drafts form a chain (parents -1, 0, 1, ...) or a tree (parents before
    children), the accepted nodes are a root-to-node path carrying the emitted tokens, the
    drafter of every round is one of `drafters` ("none" exactly when nothing was drafted), and
    the drafts add up to the statistics'."""
    t = d.get("trace", [])
    check(len(t) == d["stats"]["n_rounds"], f"{what}: {len(t)} trace records for {d['stats']['n_rounds']} rounds")
    check([x for r in t for x in r["emitted"]] == d["tokens"], f"{what}: emitted tokens != output")
    drafted = 0
    for r in t:
        n = len(r["draft_tokens"])
        drafted += n
        check(len(r["draft_parents"]) == n and r["drafter"] in drafters, f"{what}: round {r['round']}")
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


def finish():
    print(f"{counts['passed']} passed, {counts['failed']} failed")
    sys.exit(1 if counts["failed"] else 0)
