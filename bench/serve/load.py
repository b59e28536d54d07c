#!/usr/bin/env python3
"""Load benchmark of `specdec serve` on loopback: a fixed number of streamed completion
requests at each concurrency level (1, 2, 4, ..., 64), reporting requests/s, completion
tokens/s, p50/p99 latency and p50/p99 time to first token (TTFT).

It starts the server itself (bundled pair, CPU backend by default, --port 0) unless --url
is given, validates before timing (a greedy completion must equal `specdec generate`),
warms up, then runs the levels one after another and writes JSON plus a table.

  python3 bench/serve/load.py --specdec build/specdec            # -> bench/results/serve_cpu_<date>.json

Requests are greedy (temperature 0) over a fixed list of prompts with max_tokens tokens
each; a request's latency is from sending it to the end of its stream, its TTFT from
sending it to the first event carrying text. Loopback only: --url must be 127.0.0.1 or
localhost.
"""
import argparse
import datetime
import http.client
import json
import math
import os
import platform
import select
import signal
import subprocess
import sys
import threading
import time
from urllib.parse import urlparse

PROMPTS = ["And God said", "In the beginning God created", "And the LORD spake unto Moses, saying,",
           "Blessed are they that", "Then answered Jesus and said unto them,", "And it came to pass, when the king"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start_server(args):
    cmd = [args.specdec, "serve", "--port", "0", "--backend", args.backend, "--parallel", str(args.parallel),
           "--queue", "1024", "--max-connections", "512"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline, port = time.time() + 60, None
    while time.time() < deadline and proc.poll() is None:
        if select.select([proc.stdout], [], [], 0.5)[0]:
            line = proc.stdout.readline()
            if "listening on http://" in line:  # it listens first, then loads (503 meanwhile)
                port = int(line.split("http://", 1)[1].split()[0].rsplit(":", 1)[1])
            if port and "specdec serve: ready" in line:
                return proc, port
    proc.kill()
    sys.exit("load.py: the server did not start")


def add_server_args(ap):
    """The options of every bench/serve script that talks to one server."""
    ap.add_argument("--specdec", default=os.path.join(ROOT, "build", "specdec"))
    ap.add_argument("--url", help="an already running server on loopback (default: start one)")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--parallel", type=int, default=4, help="the server's --parallel when started here")
    ap.add_argument("--out", default=None)


def server_from_args(args, name):
    """(process or None, port): the --url server (loopback only), or one started here."""
    if not args.url:
        return start_server(args)
    u = urlparse(args.url)
    if u.hostname not in ("127.0.0.1", "localhost", "::1"):
        sys.exit("%s: loopback only" % name)
    return None, u.port


def one_request(port, prompt, max_tokens):
    """One streamed completion: (latency s, ttft s, completion tokens, text)."""
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}})
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("HTTP %d: %r" % (r.status, r.read()[:200]))
    ttft, tokens, text, buf = None, 0, [], b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            if not event.startswith(b"data: ") or event == b"data: [DONE]":
                continue
            d = json.loads(event[6:])
            if d.get("choices") and d["choices"][0].get("text"):
                text.append(d["choices"][0]["text"])
                if ttft is None:
                    ttft = time.perf_counter() - t0
            if d.get("usage"):
                tokens = d["usage"]["completion_tokens"]
    c.close()
    lat = time.perf_counter() - t0
    return lat, ttft if ttft is not None else lat, tokens, "".join(text)


def percentile(xs, p):
    """Nearest-rank percentile."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, math.ceil(p / 100.0 * len(xs)) - 1))] if xs else float("nan")


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def run_level(port, conc, n_requests, max_tokens):
    results, errors, lock, counter = [], [], threading.Lock(), [0]

    def client():
        while True:
            with lock:
                i = counter[0]
                counter[0] += 1
            if i >= n_requests:
                return
            try:
                res = one_request(port, PROMPTS[i % len(PROMPTS)], max_tokens)
                with lock:
                    results.append(res)
            except Exception as e:  # noqa: BLE001 - counted and reported
                with lock:
                    errors.append(repr(e))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    lat = [r[0] for r in results]
    ttft = [r[1] for r in results]
    toks = sum(r[2] for r in results)
    return {"concurrency": conc, "requests": len(results), "errors": len(errors), "wall_s": round(wall, 3),
            "requests_per_s": round(len(results) / wall, 3), "tokens_per_s": round(toks / wall, 1),
            "completion_tokens": toks, "latency_p50_s": round(percentile(lat, 50), 4),
            "latency_p99_s": round(percentile(lat, 99), 4), "ttft_p50_s": round(percentile(ttft, 50), 4),
            "ttft_p99_s": round(percentile(ttft, 99), 4), "first_errors": errors[:3]}


def validate(args, port):
    ref = subprocess.run([args.specdec, "generate", "-p", PROMPTS[0], "-n", str(args.max_tokens), "--temp", "0",
                          "--backend", args.backend, "--json"], capture_output=True, text=True, timeout=600)
    want = json.loads(ref.stdout)["text"]
    got = one_request(port, PROMPTS[0], args.max_tokens)[3]
    if got != want:
        sys.exit("load.py: validation failed: the server's greedy text differs from specdec generate:\n%r\n%r"
                 % (got, want))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_server_args(ap)
    ap.add_argument("--requests", type=int, default=64, help="requests per concurrency level (bounded)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--concurrency", default="1,2,4,8,16,32,64")
    args = ap.parse_args()
    proc, port = server_from_args(args, "load.py")
    try:
        validate(args, port)
        for i in range(4):  # warm-up: every engine's caches and pages touched
            one_request(port, PROMPTS[i % len(PROMPTS)], args.max_tokens)
        levels = []
        print("%5s %8s %9s %9s %9s %9s %9s %6s" % ("conc", "req/s", "tok/s", "p50 lat", "p99 lat", "p50 ttft",
                                                  "p99 ttft", "errors"))
        for c in [int(x) for x in args.concurrency.split(",")]:
            lv = run_level(port, c, args.requests, args.max_tokens)
            levels.append(lv)
            print("%5d %8.2f %9.1f %9.3f %9.3f %9.3f %9.3f %6d" % (
                c, lv["requests_per_s"], lv["tokens_per_s"], lv["latency_p50_s"], lv["latency_p99_s"],
                lv["ttft_p50_s"], lv["ttft_p99_s"], lv["errors"]), flush=True)
    finally:
        if proc:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    date = datetime.date.today().isoformat()
    out = args.out or os.path.join(ROOT, "bench", "results", "serve_%s_%s.json" % (args.backend, date))
    doc = {"benchmark": "specdec serve load (bench/serve/load.py)", "date": date,
           "machine": {"cpu": cpu_name(), "cores": os.cpu_count(),
                       "loadavg_at_start": os.getloadavg()},
           "server": {"model": "bundled kjv-target + kjv-draft" if not args.url else args.url,
                      "backend": args.backend, "parallel": args.parallel,
                      "scheduler": "0.2: one engine per active request, no batching"},
           "workload": {"requests_per_level": args.requests, "max_tokens": args.max_tokens, "temperature": 0,
                        "stream": True, "prompts": PROMPTS},
           "levels": levels}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print("wrote", out)
    return 1 if any(lv["errors"] for lv in levels) else 0


if __name__ == "__main__":
    sys.exit(main())
