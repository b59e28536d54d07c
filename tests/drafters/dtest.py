"""dtest.py — what the drafter tests' Python scripts share: the counted check, the
arguments (SPECDEC_BINARY MODELS_DIR [--quick]), a `specdec serve` on loopback and the exit status."""
import http.client
import json
import select
import subprocess
import sys
import time

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


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen([BIN, "serve", "--port", "0", "--backend", "cpu", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline and self.proc.poll() is None and self.port is None:
            if select.select([self.proc.stdout], [], [], 0.5)[0]:
                line = self.proc.stdout.readline()
                if "listening on http://" in line:
                    self.port = int(line.split("http://", 1)[1].split()[0].rsplit(":", 1)[1])
        if self.port is None:
            self.stop()
            raise RuntimeError("server did not start")
        while time.time() < deadline:  # it listens before its models are loaded: wait for /health 200
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            try:
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            finally:
                c.close()
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("server never became healthy")

    def post(self, body):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, json.loads(r.read())
        finally:
            c.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
