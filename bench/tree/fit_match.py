#!/usr/bin/env python3
"""fit_match.py: the MATCH children rule's numbers (docs/TREE.md "Children of a node",
"Scores") from the data of tree_match_data (plain decoding of the bundled pair, positions
with the draft's and the target's processed rows, the SAMPLE uniform u and the target's
token t = inverse CDF of p at u).

Prints, over all positions:
  - how often the coupled sample x = inverse CDF of q at u is t, by the distance from u to
    the nearer edge of x's interval in the q-CDF (the geometry the rule uses);
  - when it is not, where t lies: the k-th token with q > 0 before / after x in id order
    (the walk order of the inverse CDF), or outside q's support;
  - how often the first k children hold t (k = 1..8) for the rule of the issue (the
    coupled sample, then the most probable tokens of q) and for the kernel rule
    (sd_tree_match_children: the tokens ranked by the mass of a Laplace kernel around u,
    scale s0 sqrt(u (1 - u)), on their q-CDF intervals) for a grid of s0, with the mean
    log-likelihood of t under the kernel estimates (t outside q's support: log 0.03);
  - the match rate of the k-th child under both rules;
  - the calibration of the kernel estimates (the first 8 children of each position,
    binned by estimate: mean estimate vs match rate).

usage: fit_match.py DATA.txt [--s0 0.2]       (pure Python, no dependencies)
"""
import math
import sys


def parse_row(text):
    parts = text.split()
    ids, vals = [], []
    for kv in parts[1:]:
        a, b = kv.split(":")
        ids.append(int(a))
        vals.append(float(b))
    return ids, vals


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            head, qs, _ps, _rs = line.rstrip("\n").split(" | ")
            _pos, u, t = head.split()
            ids, vals = parse_row(qs)
            tot = sum(vals)
            lo, c = [], 0.0
            for v in vals:
                lo.append(c / tot)
                c += v
            hi = lo[1:] + [1.0]
            x = len(ids) - 1  # the coupled sample: the interval holding u
            for i in range(len(ids)):
                if float(u) <= hi[i]:
                    x = i
                    break
            rows.append(dict(u=float(u), t=int(t), ids=ids, q=vals, lo=lo, hi=hi, x=x))
    return rows


def lap_cdf(z):
    return 0.5 * math.exp(z) if z < 0 else 1.0 - 0.5 * math.exp(-z)


def kernel(r, s0):
    u = r["u"]
    s = max(s0 * math.sqrt(u * (1.0 - u)), 1e-300)
    z = lap_cdf((1.0 - u) / s) - lap_cdf(-u / s)
    return [(lap_cdf((h - u) / s) - lap_cdf((l - u) / s)) / z for l, h in zip(r["lo"], r["hi"])]


def gap(r, i):
    return max(r["lo"][i] - r["u"], r["u"] - r["hi"][i], 0.0)


def order_kernel(r, m):
    return sorted(range(len(m)), key=lambda i: (-m[i], gap(r, i), r["ids"][i]))


def order_topq(r):
    rest = sorted((i for i in range(len(r["ids"])) if i != r["x"]), key=lambda i: (-r["q"][i], r["ids"][i]))
    return [r["x"]] + rest


def coverage(rows, orders, K=8):
    cov = [0] * K
    for r, o in zip(rows, orders):
        ids = [r["ids"][i] for i in o[:K]]
        if r["t"] in ids:
            for k in range(ids.index(r["t"]), K):
                cov[k] += 1
    return [c / len(rows) for c in cov]


def geometry(rows):
    n = len(rows)
    bins = [0, 0.005, 0.01, 0.02, 0.04, 0.07, 0.1, 0.15, 0.25, 0.5, 2]
    hits = [[0, 0] for _ in bins[1:]]
    where = {}
    for r in rows:
        x, u = r["x"], r["u"]
        ml = u - r["lo"][x] if x > 0 else 2.0  # an outer edge is where both CDFs agree
        mr = r["hi"][x] - u if x < len(r["ids"]) - 1 else 2.0
        m = min(ml, mr)
        b = max(i for i in range(len(bins) - 1) if m >= bins[i])
        hit = r["ids"][x] == r["t"]
        hits[b][0] += 1
        hits[b][1] += hit
        if not hit:
            k = r["ids"].index(r["t"]) - x if r["t"] in r["ids"] else None
            key = "outside q" if k is None else ("%+d" % k if abs(k) <= 3 else ("<= -4" if k < 0 else ">= +4"))
            where[key] = where.get(key, 0) + 1
    print("positions %d; the coupled sample is the target's token at %.4f of them" %
          (n, sum(h[1] for h in hits) / n))
    print("| distance from u to the nearer inner edge of the coupled interval | positions | match rate |")
    print("|---|---|---|")
    for i, h in enumerate(hits):
        if h[0]:
            print("| %.3f-%s | %d | %.3f |" % (bins[i], "%.3f" % bins[i + 1] if bins[i + 1] < 2 else "", h[0], h[1] / h[0]))
    print("when it misses, the target's token is (fraction of all positions):")
    for key in ["<= -4", "-3", "-2", "-1", "+1", "+2", "+3", ">= +4", "outside q"]:
        print("  %-9s %.4f" % (key, where.get(key, 0) / n))


def calibration(rows, s0):
    bins = [0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.01]
    acc = [[0, 0.0, 0] for _ in bins[1:]]
    for r in rows:
        m = kernel(r, s0)
        for i in order_kernel(r, m)[:8]:
            b = max(j for j in range(len(bins) - 1) if m[i] >= bins[j])
            acc[b][0] += 1
            acc[b][1] += m[i]
            acc[b][2] += r["ids"][i] == r["t"]
    print("calibration (s0 = %g, first 8 children of each position)" % s0)
    print("| estimate | children | mean estimate | match rate |")
    print("|---|---|---|---|")
    for j, a in enumerate(acc):
        if a[0]:
            print("| %.2f-%.2f | %d | %.3f | %.3f |" % (bins[j], min(bins[j + 1], 1.0), a[0], a[1] / a[0], a[2] / a[0]))


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    s0 = float(sys.argv[sys.argv.index("--s0") + 1]) if "--s0" in sys.argv else 0.2
    rows = load(sys.argv[1])
    geometry(rows)
    print("first k children hold the target's token, k = 1..8")
    top = coverage(rows, [order_topq(r) for r in rows])
    print("coupled + top q    " + " ".join("%.4f" % c for c in top))
    ker = None
    for g in sorted({0.1, 0.15, 0.2, 0.25, 0.3, s0}):
        ms = [kernel(r, g) for r in rows]
        ll = sum(math.log(max(m[r["ids"].index(r["t"])], 1e-4)) if r["t"] in r["ids"] else math.log(0.03)
                 for r, m in zip(rows, ms)) / len(rows)
        cov = coverage(rows, [order_kernel(r, m) for r, m in zip(rows, ms)])
        ker = cov if g == s0 else ker
        print("kernel s0 = %-5g  %s   mean log-likelihood %.4f" % (g, " ".join("%.4f" % c for c in cov), ll))
    print("match rate of the k-th child, k = 1..8 (of all positions)")
    for name, cov in [("coupled + top q", top), ("kernel s0 = %g" % s0, ker)]:
        print("%-18s %s" % (name, " ".join("%.4f" % (c - (cov[k - 1] if k else 0.0)) for k, c in enumerate(cov))))
    calibration(rows, s0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
