#!/usr/bin/env python3
"""Other users' latency during a burst of big prompts (issue 25): small streamed completions
from a few clients, first alone, then while bursts of 64 concurrent 1.9 MB prompts (each
refused 400 by the prompt limits) hit the same server. Reports p50/p99 latency and TTFT of
the small requests in both phases, the bursts' own time, and the server's peak RSS.

  python3 bench/serve/burst.py --specdec build/specdec   # -> bench/results/serve_burst_cpu_<date>.json

It starts the server itself (bundled pair, CPU backend by default, --port 0) unless --url is
given (loopback only). Each phase lasts --seconds; in the burst phase, bursts follow one
another back to back, and the small requests sent while one was in flight are counted as
"during".
"""
import argparse
import datetime
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import load  # noqa: E402  (the server options, one_request, percentile, cpu_name)

ROOT = load.ROOT


def rss_mb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def small_clients(port, n, seconds, max_tokens):
    """n clients sending small streamed completions back to back for `seconds`:
    [(t_start, t_end, latency, ttft)], errors."""
    out, errors, lock = [], [], threading.Lock()
    end = time.perf_counter() + seconds

    def client(k):
        i = k
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            try:
                lat, ttft, _, _ = load.one_request(port, load.PROMPTS[i % len(load.PROMPTS)], max_tokens)
                with lock:
                    out.append((t0, t0 + lat, lat, ttft))
            except Exception as e:  # noqa: BLE001 - counted and reported
                with lock:
                    errors.append(repr(e))
            i += n

    threads = [threading.Thread(target=client, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out, errors


def one_big(port, body, codes, lock):
    import http.client
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        c.close()
        st = r.status
    except OSError as e:
        st = repr(e)
    with lock:
        codes.append(st)


def bursts(port, n, size, seconds, windows, codes):
    """Bursts of n concurrent prompts of `size` bytes, back to back for `seconds`: their
    (start, end) windows."""
    prompt = ("In the beginning God created the heaven and the earth. " * (size // 56 + 1))[:size]
    body = json.dumps({"prompt": prompt, "max_tokens": 4})
    lock = threading.Lock()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        threads = [threading.Thread(target=one_big, args=(port, body, codes, lock)) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        windows.append((t0, time.perf_counter()))


def summary(rows):
    lat = [r[2] for r in rows]
    ttft = [r[3] for r in rows]
    return {"requests": len(rows), "latency_p50_s": round(load.percentile(lat, 50), 4),
            "latency_p99_s": round(load.percentile(lat, 99), 4), "latency_max_s": round(max(lat), 4) if lat else None,
            "ttft_p50_s": round(load.percentile(ttft, 50), 4), "ttft_p99_s": round(load.percentile(ttft, 99), 4)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    load.add_server_args(ap)
    ap.add_argument("--clients", type=int, default=2, help="clients sending small requests")
    ap.add_argument("--max-tokens", type=int, default=8, help="of each small request")
    ap.add_argument("--burst", type=int, default=64, help="big prompts per burst, sent at once")
    ap.add_argument("--size", type=int, default=1900000, help="bytes of each big prompt")
    ap.add_argument("--seconds", type=float, default=20, help="length of each phase")
    args = ap.parse_args()
    proc, port = load.server_from_args(args, "burst.py")
    peak = [0.0]
    done = [False]

    def sample_rss():
        while not done[0]:
            peak[0] = max(peak[0], rss_mb(proc.pid) if proc else 0.0)
            time.sleep(0.01)

    try:
        for i in range(4):  # warm-up
            load.one_request(port, load.PROMPTS[i % len(load.PROMPTS)], args.max_tokens)
        base_rss = rss_mb(proc.pid) if proc else 0.0
        alone, err_alone = small_clients(port, args.clients, args.seconds, args.max_tokens)
        windows, codes = [], []
        sampler = threading.Thread(target=sample_rss)
        sampler.start()
        burster = threading.Thread(target=bursts, args=(port, args.burst, args.size, args.seconds, windows, codes))
        t_b = time.perf_counter()
        burster.start()
        mixed, err_mixed = small_clients(port, args.clients, args.seconds, args.max_tokens)
        burster.join()
        t_e = time.perf_counter()
        done[0] = True
        sampler.join()
    finally:
        if proc:
            proc.send_signal(2)
            proc.wait(timeout=60)
    during = [r for r in mixed if any(w0 <= r[0] < w1 for w0, w1 in windows)]  # sent while a burst was in flight
    doc = {"benchmark": "small requests during big-prompt bursts (bench/serve/burst.py)",
           "date": datetime.date.today().isoformat(),
           "machine": {"cpu": load.cpu_name(), "cores": os.cpu_count(), "loadavg_at_end": os.getloadavg()},
           "server": {"backend": args.backend, "parallel": args.parallel, "url": args.url},
           "workload": {"clients": args.clients, "max_tokens": args.max_tokens, "stream": True,
                        "burst": args.burst, "prompt_bytes": args.size, "phase_seconds": args.seconds},
           "alone": dict(summary(alone), errors=len(err_alone)),
           "during_bursts": dict(summary(during), errors=len(err_mixed)),
           "bursts": {"count": len(windows), "seconds_each": [round(w1 - w0, 3) for w0, w1 in windows],
                      "answers": {c: list(map(str, codes)).count(c) for c in sorted(set(map(str, codes)))},
                      "burst_phase_s": round(t_e - t_b, 3)},
           "server_rss_mb": {"base": round(base_rss, 1), "peak_during_bursts": round(peak[0], 1)}}
    a, d = doc["alone"], doc["during_bursts"]
    print("alone:  %4d requests, latency p50 %.3f s p99 %.3f s, ttft p50 %.3f s p99 %.3f s" %
          (a["requests"], a["latency_p50_s"], a["latency_p99_s"], a["ttft_p50_s"], a["ttft_p99_s"]))
    print("bursts: %4d requests, latency p50 %.3f s p99 %.3f s, ttft p50 %.3f s p99 %.3f s (%d bursts: %s s)" %
          (d["requests"], d["latency_p50_s"], d["latency_p99_s"], d["ttft_p50_s"], d["ttft_p99_s"],
           len(windows), doc["bursts"]["seconds_each"]))
    print("rss: base %.0f MB, peak %.0f MB; burst answers %r" % (base_rss, peak[0], doc["bursts"]["answers"]))
    out = args.out or os.path.join(ROOT, "bench", "results", "serve_burst_%s_%s.json" % (args.backend, doc["date"]))
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print("wrote", out)
    return 1 if err_alone or err_mixed else 0


if __name__ == "__main__":
    sys.exit(main())
