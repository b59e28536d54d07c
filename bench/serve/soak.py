#!/usr/bin/env python3
"""Bounded soak of `specdec serve` on loopback: load, disconnects, slow clients, idle
keep-alive, connections over the limit, and restarts (SIGTERM drain, then a new server on
the same port), for --minutes (at most 30). Every few seconds it samples the server's RSS
(VmRSS) and open file descriptors, and at the end writes a JSON report with the time series
and the totals: requests sent, answered by status, wrong answers (a greedy completion must
equal the reference text), failures (anything but the answers each client kind allows).

  python3 bench/serve/soak.py --specdec build/specdec --minutes 30   # -> bench/results/serve_soak_<date>.json
  python3 bench/serve/soak.py --specdec build/specdec --quick        # ~17 s, CI (exit 1 on a failure)

Client kinds (threads, each in a loop): "complete" (non-streamed, greedy, checked against
the reference), "stream" (streamed, checked), "disconnect" (a stream reset after its first
event), "slow" (a request head dribbled past --body-timeout: must be closed by the server),
"idle" (one answer, then kept open idle: must be closed by the server), and "burst"
(more connections than --max-connections at once: each gets 200, 503 or 429). Pass
criteria: no wrong answer, no unexpected status or error, RSS growth from the first to the
last sample of each server under --rss-growth-mb, fds back to their first level.
"""
import argparse
import datetime
import json
import os
import platform
import select
import signal
import socket
import subprocess
import sys
import threading
import time

PROMPTS = ["And God said", "In the beginning God created", "Blessed are they that"]
N_TOK = 8


class Server:
    def __init__(self, specdec, models, port, args):
        cmd = [specdec, "serve", "--port", str(port), "--backend", "cpu", "-m", os.path.join(models, "kjv-target"),
               "-md", os.path.join(models, "kjv-draft"), *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.port, deadline = None, time.time() + 120
        while time.time() < deadline and self.port is None and self.proc.poll() is None:
            if select.select([self.proc.stdout], [], [], 0.5)[0]:
                line = self.proc.stdout.readline()
                if "listening on http://" in line:
                    self.port = int(line.split("http://", 1)[1].split()[0].rsplit(":", 1)[1])
        if self.port is None:
            raise RuntimeError("server did not start")
        while time.time() < deadline:
            try:
                if request(self.port, "GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server never became healthy")

    def sample(self):
        pid = self.proc.pid
        try:
            with open("/proc/%d/status" % pid) as f:
                rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024.0
            fds = len(os.listdir("/proc/%d/fd" % pid))
        except (OSError, StopIteration):
            return None
        return rss, fds

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def request(port, method, path, body=None, timeout=60):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else b""
        s.sendall(b"%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                  b"Connection: close\r\n\r\n%s" % (method.encode(), path.encode(), len(data), data))
        raw = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            raw += d
    finally:
        s.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in head.lower():
        rest = dechunk(rest)
    return int(head.split(b" ", 2)[1]), rest


def dechunk(b):
    out, i = b"", 0
    while i < len(b):
        j = b.find(b"\r\n", i)
        n = int(b[i:j].split(b";")[0], 16) if j > i else 0
        if n == 0:
            break
        out += b[j + 2:j + 2 + n]
        i = j + 2 + n + 2
    return out


class Soak:
    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.counts = {}
        self.failures = []
        self.stop = threading.Event()
        self.port = 0
        self.refs = {}

    def count(self, key, fail=None):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + 1
            if fail and len(self.failures) < 50:
                self.failures.append("%s: %s" % (key, fail))
            elif fail:
                self.counts["failures_not_listed"] = self.counts.get("failures_not_listed", 0) + 1

    def body(self, i, stream):
        return {"prompt": PROMPTS[i % 3], "max_tokens": N_TOK, "temperature": 0, "stream": stream}

    def complete(self, i):
        st, raw = request(self.port, "POST", "/v1/completions", self.body(i, False))
        if st == 200:
            text = json.loads(raw)["choices"][0]["text"]
            self.count("complete 200", None if text == self.refs[i % 3] else "wrong text %r" % text)
        else:
            self.count("complete %d" % st, None if st in (429, 503) else raw[:100])

    def stream(self, i):
        st, raw = request(self.port, "POST", "/v1/completions", self.body(i, True))
        if st != 200:
            self.count("stream %d" % st, None if st in (429, 503) else raw[:100])
            return
        text = "".join(json.loads(e[6:])["choices"][0]["text"] for e in raw.split(b"\n\n")
                       if e.startswith(b"data: {") and b'"choices"' in e)
        self.count("stream 200", None if text == self.refs[i % 3] and raw.rstrip().endswith(b"[DONE]") else
                   "wrong stream %r" % text)

    def disconnect(self, i):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        b = json.dumps(dict(self.body(i, True), max_tokens=200)).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(b), b))
        s.recv(256)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # reset
        s.close()
        self.count("disconnect")

    def slow(self, i):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        t0 = time.time()
        try:
            for ch in b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200:
                s.send(bytes([ch]))
                if select.select([s], [], [], 0.5)[0] and not s.recv(1):
                    break
        except OSError:
            pass
        took = time.time() - t0
        s.close()
        self.count("slow closed", None if took < self.a.body_timeout + 2 else "open after %.1f s" % took)

    def idle(self, i):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        b = json.dumps(self.body(i, False)).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(b), b))
        t0, closed = time.time(), False
        s.settimeout(1)
        while time.time() - t0 < self.a.body_timeout + 10 and not closed:
            try:
                closed = not s.recv(65536)
            except socket.timeout:
                pass
            except OSError:
                closed = True
        s.close()
        self.count("idle closed", None if closed else "idle connection still open")

    def burst(self, i):
        # An error while the server restarts is not a failure (the loop's rule for exceptions);
        # counted on its own line so a soak shows how many connections the restarts refused.
        socks, codes = [], []
        for _ in range(self.a.max_connections + 4):
            try:
                socks.append(socket.create_connection(("127.0.0.1", self.port), timeout=10))
            except OSError as e:
                codes.append("during restart" if getattr(self, "restarting", False) else repr(e))
        b = json.dumps(self.body(i, False)).encode()
        for s in socks:
            try:
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(b), b))
            except OSError as e:
                codes.append("during restart" if getattr(self, "restarting", False) else repr(e))
        for s in socks:
            try:
                codes.append(s.recv(16)[9:12].decode())
            except OSError as e:
                codes.append("during restart" if getattr(self, "restarting", False) else repr(e))
            s.close()
        for c in codes:
            self.count("burst %s" % c, None if c in ("200", "503", "429", "during restart") else c)

    def loop(self, kind, pause):
        fn, i = getattr(self, kind), 0
        while not self.stop.is_set():
            try:
                fn(i)
            except Exception as e:  # noqa: BLE001 - a client error is a failure, counted
                if not self.stop.is_set() and not getattr(self, "restarting", False):
                    self.count(kind + " error", repr(e))
            i += 1
            self.stop.wait(pause)


def reference(a):
    refs = {}
    for i, p in enumerate(PROMPTS):
        out = subprocess.run([a.specdec, "generate", "-m", os.path.join(a.models, "kjv-target"), "-md",
                              os.path.join(a.models, "kjv-draft"), "-p", p, "-n", str(N_TOK), "--temp", "0",
                              "--backend", "cpu", "--json"], capture_output=True, text=True, timeout=300, check=True)
        refs[i] = json.loads(out.stdout)["text"]
    return refs


def run(a):
    soak = Soak(a)
    soak.refs = reference(a)
    args = ["--parallel", "4", "--queue", "16", "--max-connections", str(a.max_connections), "--body-timeout",
            str(a.body_timeout), "--idle-timeout", "2", "--shutdown-timeout", "5"]
    srv = Server(a.specdec, a.models, 0, args)
    soak.port = srv.port
    kinds = [("complete", 0.0), ("complete", 0.0), ("stream", 0.0), ("stream", 0.0), ("disconnect", 0.5),
             ("slow", 0.5), ("idle", 0.5), ("burst", 2.0)]
    threads = [threading.Thread(target=soak.loop, args=k, daemon=True) for k in kinds]
    for t in threads:
        t.start()
    t0, series, servers, next_restart = time.time(), [], [[]], time.time() + a.restart_every
    while time.time() - t0 < a.seconds:
        time.sleep(a.sample_every)
        smp = srv.sample()
        with soak.lock:
            done = sum(v for k, v in soak.counts.items() if k.startswith(("complete 2", "stream 2")))
        if smp:
            series.append({"t": round(time.time() - t0, 1), "rss_mb": round(smp[0], 1), "fds": smp[1],
                           "answered": done})
            servers[-1].append(series[-1])
        if time.time() >= next_restart and time.time() - t0 < a.seconds - 5:
            soak.restarting = True
            rc = srv.stop()
            soak.count("restart", None if rc == 0 else "exit %r after SIGTERM" % rc)
            srv = Server(a.specdec, a.models, soak.port, args)  # the same port: no SO_REUSEPORT sharing
            soak.restarting = False
            servers.append([])
            next_restart = time.time() + a.restart_every
    soak.stop.set()
    for t in threads:
        t.join(60)
    rc = srv.stop()
    soak.count("final stop", None if rc == 0 else "exit %r" % rc)
    for k, pts in enumerate(servers):  # per server: RSS growth and fds after its warm-up sample
        if len(pts) >= 3:
            growth = pts[-1]["rss_mb"] - pts[1]["rss_mb"]
            if growth > a.rss_growth_mb:
                soak.count("rss", "server %d grew %.1f MB" % (k, growth))
            if pts[-1]["fds"] > pts[1]["fds"] + a.max_connections + 8:
                soak.count("fds", "server %d: fds %d -> %d" % (k, pts[1]["fds"], pts[-1]["fds"]))
    return soak, series


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--specdec", default="build/specdec")
    ap.add_argument("--models", default=os.path.join(os.path.dirname(__file__), "..", "..", "models"))
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--quick", action="store_true", help="15 s, one restart (CI)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    a.seconds = min(a.minutes, 30) * 60
    a.restart_every, a.sample_every, a.body_timeout, a.max_connections, a.rss_growth_mb = 300, 10, 3, 24, 40
    if a.quick:
        a.seconds, a.restart_every, a.sample_every = 15, 7, 1
    t_start = time.time()
    soak, series = run(a)
    failures = sum(1 for k in soak.failures) + soak.counts.get("failures_not_listed", 0)
    report = {"date": datetime.date.today().isoformat(), "machine": "%s, %d CPUs, %s" % (
        platform.node(), os.cpu_count(), platform.processor() or platform.machine()),
        "seconds": round(time.time() - t_start, 1), "quick": a.quick, "counts": soak.counts,
        "failures": failures, "failure_detail": soak.failures, "series": series}
    print(json.dumps({k: v for k, v in report.items() if k != "series"}, indent=1))
    if series:
        print("RSS MB first/last: %.1f / %.1f, fds first/last: %d / %d" % (
            series[0]["rss_mb"], series[-1]["rss_mb"], series[0]["fds"], series[-1]["fds"]))
    if not a.quick or a.out:
        out = a.out or os.path.join(os.path.dirname(__file__), "..", "results",
                                    "serve_soak_%s.json" % report["date"])
        with open(out, "w") as f:
            json.dump(report, f, indent=1)
        print("wrote", out)
    print("%d passed, %d failed" % (1 if failures == 0 else 0, 1 if failures else 0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
