#!/usr/bin/env python3
"""Plot aggregate tokens/s against concurrency (speculative and plain) from a JSON written
by bench/batch/batch_throughput.py:  python3 bench/batch/plot_batch.py RESULT.json OUT.png
Needs matplotlib."""
import json
import sys


def plot(doc, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = doc["rows"]
    c = [r["concurrency"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    ax.plot(c, [r["speculative"]["tokens_per_second"] for r in rows], "o-", label="speculative (draft + target)")
    ax.plot(c, [r["plain"]["tokens_per_second"] for r in rows], "s--", label="plain (target only)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(c)
    ax.set_xticklabels([str(x) for x in c])
    ax.set_xlabel("concurrent requests (--parallel)")
    ax.set_ylabel("aggregate tokens/s")
    ax.set_title(f"specdec scheduler, {doc['backend']} backend, {doc['model']}\n{doc['date']} {doc['commit']}",
                 fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        plot(json.load(f), sys.argv[2])
