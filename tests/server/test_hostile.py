#!/usr/bin/env python3
"""`specdec serve` against hostile and unlucky clients, at the socket level, on loopback.

Each check is one failure found when the server was tried as an operator would (issue 25);
each failed on the server before the fix. Bounded in count and time (a few seconds each).

  slowloris       a request head dribbled a byte at a time is cut at --body-timeout from the
                  accept, and --max-connections such sockets do not lock a legitimate client out
  slow body       a body dribbled too slowly is cut at the same deadline
  keep-alive      after an answer the connection goes back to the idle bound (not 600 s)
  idle timeout    with --body-timeout far above --idle-timeout (the deadline sweep cannot be
                  what closes it), an idle keep-alive connection is closed after ~--idle-timeout
                  from its answer, and one that sends its next request sooner is served
  loading         /health answers 503 {"status":"loading"} (and a completion 503) while the
                  models load, then 200: the load is held by serve_load_gate (--load-gate), the
                  real server with a test-only hook that the CLI cannot reach
  limit           a connection over --max-connections gets 503 + Retry-After, then close; one
                  beyond that plus the slack max(16, N/4) is closed by libmicrohttpd unanswered
  framing         Content-Length with Transfer-Encoding, two different Content-Lengths: 400 and
                  the connection closed (a pipelined request behind it is not answered); an
                  unknown transfer coding: 501 at once (was a 30 s hang)
  content type    a POST that is not application/json: 415 (no CORS "simple request")
  host            a Host that is not the loopback's: 403; --allowed-hosts admits one
  nul             a NUL (raw or \\u0000) in a prompt, a chat content, a stop string: 400
  half-close      a client that shuts down its sending side still gets its answer
  bearer          the auth scheme is case-insensitive ("bearer KEY")
  empty key       --api-key "" or an empty SPECDEC_API_KEY: exit 2 with a message
  port in use     a second server on a busy port: exit 1, "address already in use"
  abort           a request timed out in the queue, or cut by the drain: finish_reason "abort"
                  with the reason in speculative.stop_reason, never "length"
  drain           SIGTERM: a running request finishes, a new one gets 503, /health 503 draining
  big prompts     64 concurrent 1.9 MB prompts keep the server under +300 MB RSS and leave
                  nothing held; with a byte limit raised, the running token count refuses a
                  1.9 MB prompt early
  metrics         /metrics parsed by the text exposition format's rules (a strict parser here):
                  vLLM's names, types and labels beside specdec_*, histogram invariants, values
  grammar churn   8 clients with distinct regexes on --grammar-cache 1 (entries evicted while
                  their requests run) all get matching text; a grammar stream reset mid-way is
                  cancelled; nothing is left running

Usage: test_hostile.py SPECDEC_BINARY MODELS_DIR [--quick] [--sanitized] [--only NAME,NAME]
                      [--load-gate SERVE_LOAD_GATE_BINARY]  (without it the loading check fails)
Prints "N passed, N failed"; exit 0 only when nothing failed.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402  (Server, check, the counters)

SPECDEC = ts.SPECDEC
ONLY = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
SANITIZED = "--sanitized" in sys.argv  # ASan keeps freed memory in quarantine: RSS bounds are not checked
# Waits for a completion to come back stretch by SLOW: a sanitized build is several times slower, and
# a loaded 2-core machine slower still (seen: a 4-token completion past 5 s under ASan at load 5).
# Only waits for work stretch; the deadlines the server must keep (closing a dribbling socket, a 501
# at once) keep their bounds. SPECDEC_TEST_SLOW overrides.
SLOW = float(os.environ.get("SPECDEC_TEST_SLOW", "4" if SANITIZED else "1"))
LOAD_GATE = sys.argv[sys.argv.index("--load-gate") + 1] if "--load-gate" in sys.argv else None
BODY = json.dumps({"prompt": "And God said", "max_tokens": 4, "temperature": 0}).encode()
# Several cases need a request that is still running when something else happens (a drain, a
# reset, --timeout 1): 480 tokens of the bundled pair, the most its 512-token context allows.
# The AVX2 linear layers (kernels/cpu/sd_cpu_matmul_x86.c) finish those in ~0.8 s on an idle
# machine, under the 1.4 s the drain case waits; the servers here run the portable loop
# (SPECDEC_CPU_ISA=generic, bit-identical output, ~2.5x slower), which those bounds were sized for.
os.environ.setdefault("SPECDEC_CPU_ISA", "generic")


def check(cond, what):
    return ts.check(cond, what)


_shared = []


class _Borrowed:
    """One `--parallel 1` server shared by the checks that need no flags of their own (stopped,
    and its clean exit checked, at the end)."""

    def __enter__(self):
        if not _shared:
            _shared.append(ts.Server("--parallel", "1"))
        return _shared[0]

    def __exit__(self, *exc):
        return False


def shared():
    return _Borrowed()


def conn(srv, timeout=10):
    return socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)


def post_bytes(body=BODY, path="/v1/completions", extra=b"", ctype=b"application/json", host=b"127.0.0.1"):
    return (b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n%s" %
            (path.encode(), host, ctype, len(body), extra, body))


def read_all(s, limit=10.0):
    """Everything until the peer closes or `limit` seconds pass: (bytes, closed)."""
    data, end = b"", time.time() + limit
    s.settimeout(0.2)
    while time.time() < end:
        try:
            d = s.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            return data, True
        if not d:
            return data, True
        data += d
    return data, False


def closed_within(s, seconds):
    """True if the server closes s (EOF or reset) within seconds; the time it took."""
    t0 = time.time()
    _, closed = read_all(s, seconds)
    return closed, time.time() - t0


def responses(data):
    return re.findall(rb"HTTP/1\.1 (\d{3})", data)


# ---------------------------------------------------------------------------------------
def test_slowloris():
    with ts.Server("--parallel", "1", "--body-timeout", "2", "--max-connections", "4") as srv:
        socks = [conn(srv) for _ in range(4)]
        for s in socks:
            s.sendall(b"P")
        t0, stop = time.time(), [False]

        def dribble():  # one byte per 0.5 s on each: the idle timer never fires
            for b in b"OST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 40:
                if stop[0]:
                    return
                for s in socks:
                    try:
                        s.send(bytes([b]))
                    except OSError:
                        pass
                time.sleep(0.5)

        th = threading.Thread(target=dribble)
        th.start()
        got = None
        while time.time() - t0 < 8 * SLOW and got is None:  # a legitimate client, retrying as clients do
            try:
                s = conn(srv, 3 * SLOW)
                s.sendall(post_bytes())
                data, _ = read_all(s, 3 * SLOW)
                s.close()
                if data.startswith(b"HTTP/1.1 200"):
                    got = time.time() - t0
            except OSError:
                time.sleep(0.2)
        closed = [closed_within(s, 0.1 if got is None else max(0.1, 4 - (time.time() - t0)))[0] for s in socks]
        stop[0] = True
        th.join()
        for s in socks:
            s.close()
        check(got is not None and got < 2 + 4 * SLOW, "slowloris: a legitimate request got through after %r s" % got)
        check(all(closed), "slowloris: the dribbling sockets were closed by the deadline: %r" % closed)


def test_slow_body():
    with ts.Server("--parallel", "1", "--body-timeout", "2") as srv:
        s = conn(srv)
        body = json.dumps({"prompt": "And", "max_tokens": 2}).encode()
        s.sendall(post_bytes(body)[: -len(body)])
        t0, closed = time.time(), False
        for b in body:
            try:
                s.send(bytes([b]))
            except OSError:
                closed = True
                break
            c, _ = closed_within(s, 0.3)
            if c:
                closed = True
                break
        check(closed and time.time() - t0 < 4, "slow body cut at the deadline (%s after %.1f s)" %
              (closed, time.time() - t0))
        s.close()


def test_keepalive():
    with ts.Server("--parallel", "1", "--body-timeout", "2") as srv:
        s = conn(srv)
        s.sendall(post_bytes())
        s.settimeout(30)
        data = b""
        while b'"usage"' not in data:
            data += s.recv(65536)
        t0 = time.time()
        closed, took = closed_within(s, 6)
        s.close()
        check(data.startswith(b"HTTP/1.1 200") and closed and took < 4,
              "an idle keep-alive connection is closed after its answer (closed %s after %.1f s)" % (closed, took))


def read_response(s, limit=30.0):
    """One whole response with a Content-Length body (the connection stays open): bytes."""
    data, end = b"", time.time() + limit
    s.settimeout(limit)
    while time.time() < end:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep:
            m = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
            if m and len(rest) >= int(m.group(1)):
                return data
        d = s.recv(65536)
        if not d:
            return data
        data += d
    return data


def test_idle_timeout():
    # --body-timeout 60: the arrival-deadline sweep would close a connection only after a
    # minute, so a close within seconds is libmicrohttpd's idle timer, restored after the
    # answer (the bug: raised to --timeout + --body-timeout + 1 = 631 s and left there)
    idle = 2
    with ts.Server("--parallel", "1", "--body-timeout", "60", "--idle-timeout", str(idle)) as srv:
        s = conn(srv)
        s.sendall(post_bytes())
        first = read_response(s)
        closed, took = closed_within(s, idle + 6)  # from the end of the answer
        s.close()
        check(first.startswith(b"HTTP/1.1 200") and b"connection: close" not in first.lower(),
              "idle timeout: the answer keeps the connection open: %r" % first[:60])
        check(closed and idle - 1 <= took <= idle + 3,
              "idle timeout: an idle keep-alive connection is closed ~%d s after its answer (closed %s after "
              "%.1f s; the deadline sweep would take 60 s)" % (idle, closed, took))
        s = conn(srv)
        s.sendall(post_bytes())
        one = read_response(s)
        time.sleep(idle / 4)  # well inside the idle bound
        s.sendall(post_bytes())
        two = read_response(s)
        closed2, took2 = closed_within(s, idle + 6)
        s.close()
        check(one.startswith(b"HTTP/1.1 200") and two.startswith(b"HTTP/1.1 200") and b'"usage"' in two,
              "idle timeout: a second request sent %.1f s after the first answer is served on the same "
              "connection (%r / %r)" % (idle / 4, one[:20], two[:20]))
        check(closed2 and idle - 1 <= took2 <= idle + 3,
              "idle timeout: restored after the second answer too (closed %s after %.1f s)" % (closed2, took2))


class _Gated(ts.Server):
    """serve_load_gate: the real server, its load held until the gate file exists."""

    def __init__(self, gate):  # noqa: D401 - no _wait_healthy: it is not healthy yet
        self.log = open(os.path.join(os.getcwd(), "server_test_%d.log" % id(self)), "w+")
        self.proc = subprocess.Popen([LOAD_GATE, gate, ts.TARGET], stdout=subprocess.PIPE, stderr=self.log,
                                     text=True)
        self.port = self._read_port()


def _health(srv):
    try:
        st, body, _ = srv.request("GET", "/health", timeout=10)
        return st, body
    except OSError as e:
        return None, repr(e).encode()


def test_loading():
    if not check(LOAD_GATE is not None, "loading: needs --load-gate SERVE_LOAD_GATE_BINARY"):
        return
    gate = os.path.join(os.getcwd(), "server_load_gate_%d" % os.getpid())
    if os.path.exists(gate):
        os.unlink(gate)
    with _Gated(gate) as srv:
        try:
            # the gate is shut: the load has not begun, whatever the machine's speed
            held = [_health(srv) for _ in range(3)]
            st, body, _ = srv.request("POST", "/v1/completions", json.loads(BODY))
            check(all(h == (503, b'{"status":"loading"}') for h in held),
                  "loading: /health answers 503 {\"status\":\"loading\"} before the models load: %r" % held)
            check(st == 503 and b"loading" in body, "loading: a completion gets 503 (loading): %d %r" % (st, body[:80]))
            # vLLM's utility endpoints: /ping is /health; /tokenize, /detokenize and /version wait for the load
            for method in ("GET", "POST"):
                got = srv.request(method, "/ping", None, {})[:2]
                check(got == (503, b'{"status":"loading"}'), "loading: %s /ping answers as /health: %r" % (method, got))
            for method, path, body in (("POST", "/tokenize", {"prompt": "And"}), ("POST", "/detokenize", {"tokens": [1]}),
                                       ("GET", "/version", None)):
                got = srv.request(method, path, body)[:2]
                check(got[0] == 503 and b"loading" in got[1], "loading: %s gets 503 (loading): %r" % (path, got))
            open(gate, "w").close()
            seen, deadline = [], time.time() + ts.START_TIMEOUT
            while time.time() < deadline and (not seen or seen[-1][0] != 200):
                seen.append(_health(srv))
                time.sleep(0.02)
            codes = [h[0] for h in seen]
            check(codes and codes[-1] == 200 and seen[-1][1] == b'{"status":"ok"}' and
                  all(h == (503, b'{"status":"loading"}') for h in seen[:-1]),
                  "loading: then 503 loading until 200 ok, nothing else: %r" % codes[-5:])
            st, body, _ = srv.request("POST", "/v1/completions", json.loads(BODY))
            check(st == 200 and b'"usage"' in body, "loading: once ready, a completion is answered: %d" % st)
            st, body, _ = srv.request("POST", "/tokenize", {"prompt": "And"})
            check(st == 200 and json.loads(body).get("count", 0) > 0, "loading: once ready, /tokenize answers: %d" % st)
        finally:  # a gated server takes SIGTERM only once it has loaded: open the gate before stopping it
            if not os.path.exists(gate):
                open(gate, "w").close()
    os.unlink(gate)


def test_limit():
    with ts.Server("--parallel", "1", "--max-connections", "3", "--body-timeout", "5") as srv:
        held = [conn(srv) for _ in range(3)]
        time.sleep(0.3)
        s = conn(srv, 5)
        try:
            s.sendall(post_bytes())
            data, closed = read_all(s, 3)
        except OSError as e:
            data, closed = repr(e).encode(), True
        s.close()
        check(data.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in data and closed,
              "over --max-connections: 503 + Retry-After, then closed: %r" % data[:120])
        for h in held:
            h.close()
        time.sleep(0.3)
        ts.still_serving(srv, "connections over the limit")


def _limit_slack_attempt():
    """One try of test_limit_slack: (beyond-limit data, closed, within-slack answer, seconds from
    the first held connection to the last answer)."""
    with ts.Server("--parallel", "1", "--max-connections", "4", "--body-timeout", "10") as srv:
        t0 = time.time()
        held = [conn(srv) for _ in range(20)]
        time.sleep(0.3)  # let the server accept them all before the 21st
        s = conn(srv, 5)
        try:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            data, closed = read_all(s, 1.5)
        except OSError as e:
            data, closed = repr(e).encode(), True
        s.close()
        inside = held[-1]  # the 20th: over --max-connections but within the slack
        inside.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer, _ = read_all(inside, 3)
        took = time.time() - t0
        for h in held:
            h.close()
        return data, closed, answer, took


def test_limit_slack():
    # libmicrohttpd's own limit is --max-connections + max(16, N/4) (sd_http_start): up to it
    # a connection is accepted and answered 503; beyond it libmicrohttpd closes it at accept,
    # unanswered (README "Limits"). N = 4: 4 + 16 = 20 held, the 21st is closed unanswered.
    # Premise: the 16 held over-limit connections stay open, i.e. everything happens within
    # their 2 s head deadline (SD_OVER_LIMIT_S, sd_server_conn.c). On a starved machine the
    # server may accept late and close held ones first, so the 21st fits and the 20th is gone.
    # That happened within 0.3 s too (CI's ASan stage on a 2-core VM shared with two builds:
    # the 21st answered 503, the 20th empty), so a failing try is repeated, up to 4 tries; a
    # broken limit fails every one.
    for attempt in range(1, 5):
        data, closed, answer, took = _limit_slack_attempt()
        ok_beyond = closed and not data.startswith(b"HTTP/")
        ok_inside = answer.startswith(b"HTTP/1.1 503") and b"Retry-After" in answer
        if (ok_beyond and ok_inside) or attempt == 4:
            break
        print("limit_slack: try %d (%.1f s) failed; again" % (attempt, took))
    check(ok_beyond, "beyond --max-connections + slack: closed without an HTTP answer (%r, closed %s, %.1f s)"
          % (data[:40], closed, took))
    check(ok_inside, "within the slack: 503 + Retry-After: %r (%.1f s)" % (answer[:40], took))


def test_framing():
    with shared() as srv:
        cases = [("Content-Length with Transfer-Encoding",
                  b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" %
                  (len(BODY) + 12, len(BODY), BODY), b"400"),
                 ("two different Content-Lengths",
                  b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), len(BODY) - 5, BODY), b"400")]
        pipelined = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        for what, req, code in cases:
            s = conn(srv)
            s.sendall(req + pipelined)
            data, closed = read_all(s, 5)
            s.close()
            codes = responses(data)
            check(codes == [code] and closed, "%s: %r and closed (%s); got %r" % (what, code, closed, codes))
        s = conn(srv)
        t0 = time.time()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: gzip\r\n\r\n" + BODY)
        data, closed = read_all(s, 5)
        s.close()
        check(responses(data) == [b"501"] and time.time() - t0 < 3,
              "unknown transfer coding: 501 at once (%.1f s): %r" % (time.time() - t0, data[:60]))
        ts.still_serving(srv, "bad framing")


def test_content_type():
    with shared() as srv:
        st = srv.request("POST", "/v1/completions", BODY, {"Content-Type": "text/plain"})[0]
        check(st == 415, "a text/plain POST: %d (want 415)" % st)
        st = srv.request("POST", "/v1/completions", BODY, {"X-No-Type": "1"})[0]
        check(st == 415, "a POST without Content-Type: %d (want 415)" % st)
        st = srv.request("POST", "/v1/completions", BODY, {"Content-Type": "Application/JSON; charset=utf-8"})[0]
        check(st == 200, "application/json with a charset: %d" % st)


def host_status(srv, host):
    s = conn(srv)
    s.sendall(post_bytes(host=host, extra=b"Connection: close\r\n"))
    data, _ = read_all(s, 5 * SLOW)
    s.close()
    return responses(data)[:1]


def test_host():
    with shared() as srv:
        for host, want in ((b"evil.example", b"403"), (b"evil.example:%d" % srv.port, b"403"),
                           (b"localhost:%d" % srv.port, b"200"), (b"[::1]:80", b"200")):
            got = host_status(srv, host)
            check(got == [want], "Host %r: %r (want %r)" % (host, got, want))


def test_allowed_hosts():
    with ts.Server("--parallel", "1", "--allowed-hosts", "myhost.lan,other.lan") as srv:
        for host, want in ((b"myhost.lan", b"200"), (b"OTHER.lan:8080", b"200"), (b"evil.example", b"403")):
            got = host_status(srv, host)
            check(got == [want], "--allowed-hosts, Host %r: %r (want %r)" % (host, got, want))


def test_nul():
    with shared() as srv:
        for what, body in (("\\u0000 in a prompt", b'{"prompt":"And\\u0000God","max_tokens":2}'),
                           ("a raw NUL in a prompt", b'{"prompt":"And\x00God","max_tokens":2}'),
                           ("\\u0000 in a stop string", b'{"prompt":"And","max_tokens":2,"stop":["a\\u0000"]}')):
            ts.expect_error(srv, what, 400, "POST", "/v1/completions", body)
        ts.expect_error(srv, "\\u0000 in a chat content", 400, "POST", "/v1/chat/completions",
                        b'{"messages":[{"role":"user","content":"hi\\u0000there"}],"max_tokens":2}')
        st, raw, _ = srv.request("POST", "/v1/completions", b'{"prompt":"a\\\\u0000b","max_tokens":2}')
        check(st == 200, "an escaped backslash before u0000 is no NUL: %d" % st)


def test_bearer():
    with ts.Server("--parallel", "1", "--api-key", "s3cret") as srv:
        for scheme in ("bearer", "BEARER", "Bearer"):
            st = srv.request("POST", "/v1/completions", BODY, {"Content-Type": "application/json",
                                                                "Authorization": scheme + " s3cret"})[0]
            check(st == 200, "the scheme %r is case-insensitive: %d" % (scheme, st))


def test_half_close():
    with shared() as srv:
        for stream in (False, True):
            body = json.dumps({"prompt": "And God said", "max_tokens": 8, "temperature": 0,
                               "stream": stream}).encode()
            s = conn(srv, 30)
            s.sendall(post_bytes(body, extra=b"Connection: close\r\n"))
            s.shutdown(socket.SHUT_WR)  # done sending; still reading
            data, _ = read_all(s, 30)
            s.close()
            ok = data.startswith(b"HTTP/1.1 200") and (b"[DONE]" in data if stream else b'"usage"' in data)
            check(ok, "a half-closed client gets its %s answer: %r" % ("streamed" if stream else "whole",
                                                                      data[:80]))


def start_fails(args, env=None, want_rc=None, want_msg=""):
    p = subprocess.Popen([SPECDEC, "serve", "--backend", "cpu", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:  # it started: stop it
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        return False, "still running: %r" % out[:100]
    return p.returncode == want_rc and want_msg in err.lower(), "exit %d: %r" % (p.returncode, err[-200:])


def test_start_refusals():
    ok, why = start_fails(["--port", "0", "--api-key", ""], want_rc=2, want_msg="api key is empty")
    check(ok, "--api-key '' is refused: %s" % why)
    env = dict(os.environ, SPECDEC_API_KEY="")
    ok, why = start_fails(["--port", "0"], env=env, want_rc=2, want_msg="api key is empty")
    check(ok, "an empty SPECDEC_API_KEY is refused: %s" % why)
    with ts.Server("--parallel", "1") as srv:
        ok, why = start_fails(["--port", str(srv.port)], want_rc=1, want_msg="address already in use")
        check(ok, "a second server on a busy port: %s" % why)


def completion(srv, body, timeout=120):
    st, raw, _ = srv.request("POST", "/v1/completions", body, timeout=timeout)
    try:
        return st, json.loads(raw)
    except ValueError:
        return st, {"raw": raw[:200]}


def scrape(srv):
    """/metrics parsed by the text-format rules (a parse failure fails the caller's checks)."""
    st, raw, _ = srv.request("GET", "/metrics")
    try:
        return parse_exposition(raw.decode("utf-8"))
    except (ValueError, KeyError, UnicodeDecodeError) as e:
        check(False, "/metrics does not parse: %r" % e)
        return {}


def answer_of(srv, req, limit=5.0):
    """(status bytes or None, Content-Type, body) of the first answer to raw request bytes."""
    s = conn(srv)
    try:
        s.sendall(req)
    except OSError:
        pass  # answered and closed before all of it was sent
    try:
        data, _ = read_all(s, limit)
    except OSError:
        data = b""
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    m = re.match(rb"HTTP/1\.1 (\d{3})", head)
    ct = re.search(rb"\r\nContent-Type: ([^\r]*)", head)
    return (m.group(1) if m else None), (ct.group(1) if ct else b""), body


J = b"Host: 127.0.0.1\r\nContent-Type: application/json\r\n"
POST = b"POST /v1/completions HTTP/1.1\r\n" + J
# (what, request, status, endpoint counted, who answers: "json" = this server, "mhd" = libmicrohttpd's HTML)
PROTOCOL_CASES = [
    ("HTTP/1.1 without Host", b"GET /health HTTP/1.1\r\n\r\n", b"400", "/health", "json"),
    ("a space in the target", b"GET /hea lth HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", b"404", "other", "json"),
    ("a 20 kB head", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", b"431",
     "/health", "json"),
    ("a 10 kB target", b"GET /" + b"a" * 10000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", b"414", "other", "json"),
    ("a bad version", b"GET /health HTTX/1.1\r\nHost: 127.0.0.1\r\n\r\n", b"400", "other", "mhd"),
    ("HTTP/2.0", b"GET /health HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n", b"505", "other", "mhd"),
    ("a header without colon", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nNoColon\r\n\r\n", b"400", "/health",
     "mhd"),
    ("Content-Length: abc", POST + b"Content-Length: abc\r\n\r\n", b"400", "/v1/completions", "mhd"),
    ("a chunk size that is no hex", POST + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", b"400",
     "/v1/completions", "mhd"),
    ("a chunk size that overflows", POST + b"Transfer-Encoding: chunked\r\n\r\n" + b"f" * 20 + b"\r\nabc\r\n", b"413",
     "/v1/completions", "mhd"),
    ("a 100 kB head", b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 100000 + b"\r\n\r\n", b"431",
     "/metrics", "mhd"),
]


def http_counts(fams):
    out = {}
    for fam in ("specdec_http_requests_total", "specdec_http_library_answers_total"):
        for _, lb, v in (fams.get(fam) or {"samples": []})["samples"]:
            out[(fam, lb.get("endpoint"), lb["code"])] = v
    return out


def test_protocol_errors():
    """Malformed HTTP: answered in JSON by this server where libmicrohttpd lets it (a missing Host,
    a space in the target, heads up to 16 kB over the limit), and counted by endpoint and code where
    libmicrohttpd answers by itself (its HTML; specdec_http_library_answers_total apart)."""
    with shared() as srv:
        before = http_counts(scrape(srv))
        want = {}
        for what, req, code, ep, who in PROTOCOL_CASES:
            st, ct, body = answer_of(srv, req)
            big = len(req) > 65536  # answered while the rest is unread: the reset may beat the answer
            if who == "json":
                try:
                    err = json.loads(body)["error"]
                except (ValueError, KeyError, TypeError):
                    err = None
                check(st == code and ct.startswith(b"application/json") and err and err.get("message"),
                      "%s: %r %r %r (want %r, an OpenAI error in JSON)" % (what, st, ct, body[:80], code))
            else:
                check(st == code or (big and st is None), "%s: %r (want %r from libmicrohttpd)" % (what, st, code))
            for key in [("specdec_http_requests_total", ep, code.decode())] + \
                    ([("specdec_http_library_answers_total", None, code.decode())] if who == "mhd" else []):
                want[key] = want.get(key, 0) + 1
        after = http_counts(scrape(srv))
        got = {k: after.get(k, 0) - before.get(k, 0) for k in set(after) | set(before)}
        got = {k: v for k, v in got.items() if v and not (k[1] == "/metrics" and k[2] == "200")}
        check(got == want, "every answer counted by endpoint and code: got %r, want %r" %
              (sorted(got.items()), sorted(want.items())))
        ts.still_serving(srv, "malformed HTTP")


def outcome(fams, stream, what, endpoint="/v1/completions"):
    return sample(fams, "specdec_generation_outcomes_total", endpoint=endpoint, stream=stream, outcome=what)


def reset_close(s):
    """Close with a reset (RST), as a killed client does: noticed at once. (A plain close is a FIN,
    which a half-closing client sends too: the server notices the client is gone only when it next
    writes to it, and a slow build may reach --timeout first.)"""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()


def stream_request(srv, body, read_events=None, reset=False):
    """A streamed completion on a raw socket: all its events, or (read_events) close after that many
    (reset: with a reset)."""
    s = conn(srv, 60)
    s.sendall(post_bytes(json.dumps(dict(body, stream=True)).encode(), extra=b"Connection: close\r\n"))
    data, end = b"", time.time() + 60
    while time.time() < end:
        if read_events is not None and data.count(b"data: ") >= read_events:
            break
        d = s.recv(65536)
        if not d:
            break
        data += d
    if reset:
        reset_close(s)
    s.close()
    return [json.loads(e[6:]) for e in re.findall(rb"data: \{[^\n]*", dechunk(data.partition(b"\r\n\r\n")[2]))]


def dechunk(body):
    out, i = b"", 0
    while i < len(body):
        j = body.find(b"\r\n", i)
        n = int(body[i:j], 16) if j > i else 0
        if n == 0:
            break
        out += body[j + 2:j + 2 + n]
        i = j + 4 + n
    return out


def final_of(events):
    fin = [e for e in events if (e.get("choices") or [{}])[0].get("finish_reason")]
    return (fin[-1]["choices"][0]["finish_reason"], (fin[-1].get("speculative") or {}).get("stop_reason")) \
        if fin else (None, None)


def wait_for(srv, cond, seconds):
    end = time.time() + seconds
    while True:
        fams = scrape(srv)
        if cond(fams) or time.time() > end:
            return fams
        time.sleep(0.05)


def outcomes_of(fams):
    return {(lb["stream"], lb["outcome"]): v for _, lb, v in fams["specdec_generation_outcomes_total"]["samples"]
            if v and lb["endpoint"] == "/v1/completions"}


def test_cut_requests():
    """Requests that end without running to their end: finish_reason "abort" with the cause in
    speculative.stop_reason, and counted by that cause (specdec_generation_outcomes_total, vLLM's
    request_success_total{finished_reason="abort"}) while a cut stream keeps its 200. A server without
    --timeout: one stream completed, one cut by its client, and a queued request whose client resets
    is cancelled in the queue while the running one still runs. A server with --timeout 1: a stream
    cut by it, and three at once behind one engine all time out (the last ones in the queue, with no
    token). (The cases that must not time out run where nothing can: a sanitized build on a loaded
    machine once took over a second for a 4-token stream.)"""
    long = {"prompt": ts.PROMPTS[1], "max_tokens": 480, "temperature": 0}
    with ts.Server("--parallel", "1") as srv:
        ev = stream_request(srv, {"prompt": ts.PROMPTS[0], "max_tokens": 4, "temperature": 0})
        check(final_of(ev)[0] == "length", "a completed stream ends length: %r" % (final_of(ev),))
        stream_request(srv, long, read_events=2, reset=True)
        fams = wait_for(srv, lambda f: outcome(f, "true", "disconnect") == 1, 30)
        check(outcome(fams, "true", "disconnect") == 1, "a stream cut by its client counted as a disconnect: %r" %
              outcome(fams, "true", "disconnect"))
        # a queued request whose client resets (RST) is cancelled in the queue
        out = {}
        # it must outlast the queued request's reset (a fast idle machine: 480 tokens ~2 s); the
        # sanitized build is ~10x slower, 160 tokens do there
        run_body = dict(long, max_tokens=160 if SANITIZED else 480)
        runner = threading.Thread(target=lambda: out.setdefault("runner", completion(srv, run_body)))
        runner.start()
        wait_for(srv, lambda f: sample(f, "vllm:num_requests_running") == 1, 10)
        q = conn(srv)
        q.sendall(post_bytes(json.dumps(long).encode()))
        wait_for(srv, lambda f: sample(f, "vllm:num_requests_waiting") == 1, 10)
        reset_close(q)
        fams = wait_for(srv, lambda f: outcome(f, "false", "disconnect") == 1, 10)
        check(outcome(fams, "false", "disconnect") == 1 and sample(fams, "vllm:num_requests_waiting") == 0 and
              sample(fams, "vllm:num_requests_running") == 1, "a queued request whose client reset: cancelled in "
              "the queue while the running one runs (disconnect %r, waiting %r, running %r)" %
              (outcome(fams, "false", "disconnect"), sample(fams, "vllm:num_requests_waiting"),
               sample(fams, "vllm:num_requests_running")))
        runner.join(300)
        st, d = out.get("runner", (0, {}))
        check(st == 200 and (d.get("choices") or [{}])[0].get("finish_reason") == "length",
              "the running request ran to its end: %r" % ((d.get("choices") or [{}])[0].get("finish_reason"),))
        fams = scrape(srv)
        want = {("true", "length"): 1, ("true", "disconnect"): 1, ("false", "disconnect"): 1, ("false", "length"): 1}
        check(outcomes_of(fams) == want, "outcomes by stream: %r (want %r)" % (outcomes_of(fams), want))
        ok = {r: sample(fams, "vllm:request_success_total", finished_reason=r) for r in ("stop", "length", "abort")}
        check(ok == {"stop": 0, "length": 2, "abort": 2}, "vLLM's finished_reason: %r" % ok)
        check(sample(fams, "specdec_http_requests_total", endpoint="/v1/completions", code="200") == 3,
              "the status sent stays 200 for the 2 streams and the answered request: %r" %
              sample(fams, "specdec_http_requests_total", endpoint="/v1/completions", code="200"))
    with ts.Server("--parallel", "1", "--timeout", "1") as srv:
        ev = stream_request(srv, long)
        check(final_of(ev) == ("abort", "timeout"), "a stream cut by --timeout: %r" % (final_of(ev),))
        out = {}
        threads = [threading.Thread(target=lambda k=k: out.setdefault(k, completion(srv, long))) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        got = [(d.get("choices") or [{}])[0].get("finish_reason") for st, d in out.values()]
        why = [(d.get("speculative") or {}).get("stop_reason") for st, d in out.values()]
        toks = sorted((d.get("usage") or {}).get("completion_tokens", -1) for st, d in out.values())
        check(got == ["abort"] * 3 and why == ["timeout"] * 3 and toks[0] == 0,
              "three at once behind one engine, --timeout 1: %r %r, tokens %r" % (got, why, toks))
        fams = scrape(srv)
        want = {("true", "timeout"): 1, ("false", "timeout"): 3}
        check(outcomes_of(fams) == want, "outcomes by stream, --timeout 1: %r (want %r)" % (outcomes_of(fams), want))
        ok = {r: sample(fams, "vllm:request_success_total", finished_reason=r) for r in ("stop", "length", "abort")}
        check(ok == {"stop": 0, "length": 0, "abort": 4}, "vLLM's finished_reason, --timeout 1: %r" % ok)
        check(sample(fams, "specdec_http_requests_total", endpoint="/v1/completions", code="200") == 4,
              "the status sent stays 200 for the stream and the 3 answered requests: %r" %
              sample(fams, "specdec_http_requests_total", endpoint="/v1/completions", code="200"))


def test_drain():
    # The running request must outlast the SIGTERM and the two probes after it on a fast, idle
    # machine too (120 tokens took 0.5 s there, so the server had nothing left to drain), and
    # finish within the drain on a slow one (ASan, load): 480 tokens (~2 s idle) and 120 s.
    srv = ts.Server("--parallel", "1", "--shutdown-timeout", "120")
    out = {}
    n_tok = 160 if SANITIZED else 480  # the sanitized build is ~10x slower: 160 tokens outlast the probes
    t = threading.Thread(target=lambda: out.setdefault("r", completion(srv, {"prompt": ts.PROMPTS[1],
                                                                               "max_tokens": n_tok,
                                                                               "temperature": 0, "seed": 1})))
    t.start()
    time.sleep(0.5)
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    st_h, raw_h, _ = srv.request("GET", "/health")
    st_n = srv.request("POST", "/v1/completions", BODY)[0]
    st_p, raw_p, _ = srv.request("GET", "/ping", None, {})  # answered at the door: no time taken from the drain
    st_t = srv.request("POST", "/tokenize", {"prompt": "And"})[0]
    t.join(300)
    st, d = out.get("r", (0, {}))
    rc = srv.proc.wait(120)
    srv.log.close()
    os.unlink(srv.log.name)
    check(st_h == 503 and b"draining" in raw_h, "/health while draining: %d %r" % (st_h, raw_h))
    check(st_n == 503, "a new request while draining: %d" % st_n)
    check(st_p == 503 and b"draining" in raw_p, "/ping while draining answers as /health: %d %r" % (st_p, raw_p))
    check(st_t == 503, "/tokenize while draining: %d" % st_t)
    fin = (d.get("choices") or [{}])[0].get("finish_reason")
    check(st == 200 and (fin == "stop" or (fin == "length" and d["usage"]["completion_tokens"] == n_tok)),
          "the running request finished during the drain: %d %r %r" % (st, fin, d.get("usage")))
    check(rc == 0, "exit 0 after the drain (%r)" % rc)
    # cut by the drain: a running request, a queued one, a queued stream (its final event says so)
    srv = ts.Server("--parallel", "1", "--shutdown-timeout", "0.5")
    out, threads = {}, []
    body = {"prompt": ts.PROMPTS[1], "max_tokens": 480, "temperature": 0}
    for k in ("running", "queued", "stream"):
        run = (lambda: out.setdefault("stream", stream_request(srv, body))) if k == "stream" else \
            (lambda k=k: out.setdefault(k, completion(srv, body)))
        threads.append(threading.Thread(target=run))
        threads[-1].start()
        time.sleep(0.3)
    srv.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(120)
    rc = srv.proc.wait(120)
    log = srv.log_text()
    srv.log.close()
    os.unlink(srv.log.name)
    for k in ("running", "queued"):
        st, d = out.get(k, (0, {}))
        fin = (d.get("choices") or [{}])[0].get("finish_reason")
        reason = (d.get("speculative") or {}).get("stop_reason")
        n = (d.get("usage") or {}).get("completion_tokens", -1)
        check(st == 200 and fin == "abort" and reason == "shutdown" and ((n > 0) if k == "running" else n == 0),
              "%s, cut by the drain: finish_reason %r, stop_reason %r, %d tokens" % (k, fin, reason, n))
    check(final_of(out.get("stream", [])) == ("abort", "shutdown"), "a queued stream cut by the drain: %r" %
          (final_of(out.get("stream", [])),))
    m = re.search(r"by outcome \(streamed\):.*shutdown (\d+) \((\d+)\)", log)
    check(m and m.groups() == ("3", "1"), "the exit summary counts 3 cut by the drain, 1 streamed: %r" %
          (m.group(0) if m else log[-300:]))
    check(rc == 0, "exit 0 after cancelling (%r)" % rc)


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def big_burst(srv, n, size):
    prompt = ("In the beginning God created the heaven and the earth. " * (size // 56 + 1))[:size]
    body = json.dumps({"prompt": prompt, "max_tokens": 4}).encode()
    codes, peak, done = [], [0.0], [False]

    def sample():
        while not done[0]:
            peak[0] = max(peak[0], rss_mb(srv.proc.pid))
            time.sleep(0.005)

    def one():
        try:
            codes.append(srv.request("POST", "/v1/completions", body, timeout=300)[0])
        except OSError as e:
            codes.append(repr(e))

    sm = threading.Thread(target=sample)
    sm.start()
    t0 = time.time()
    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    took = time.time() - t0
    done[0] = True
    sm.join()
    return codes, peak[0], took


def test_big_prompts():
    with ts.Server("--parallel", "2") as srv:
        ts.still_serving(srv, "warm-up")
        base = rss_mb(srv.proc.pid)
        codes, peak, took = big_burst(srv, 64, 1900000)
        time.sleep(1.5)  # the sweep gives freed memory back once connections are gone
        after = rss_mb(srv.proc.pid)
        check(codes == [400] * 64, "64 prompts of 1.9 MB refused (400): %r" % sorted(set(map(str, codes))))
        if not SANITIZED:
            check(peak - base < 300, "RSS during the burst: +%.0f MB (bound 300; base %.0f MB)" % (peak - base, base))
            check(after - base < 40, "RSS after the burst: +%.0f MB (bound 40)" % (after - base))
        print("  big prompts: base %.0f MB, peak +%.0f MB, after +%.0f MB, %.1f s" % (base, peak - base,
                                                                                      after - base, took))
    with ts.Server("--parallel", "1", "--max-prompt-bytes", "2000000") as srv:
        prompt = "And God said, Let there be light: and there was light. " * 34000  # 1.9 MB
        t0 = time.time()
        st, d = completion(srv, {"prompt": prompt, "max_tokens": 4})
        took = time.time() - t0
        msg = (d.get("error") or {}).get("message", "")
        check(st == 400 and "counted up to byte" in msg and (d.get("error") or {}).get("code") ==
              "context_length_exceeded", "running count refuses early: %d %r (%.2f s)" % (st, msg, took))
        # the count that refuses is a lower bound of the exact one (no prompt that fits is refused)
        prompt = "And God said, Let there be light: and there was light. " * 800  # 44 KB, 3 pieces
        st, d = completion(srv, {"prompt": prompt, "max_tokens": 4})
        m = re.search(r"more than (\d+)", (d.get("error") or {}).get("message", ""))
        exact = len(ts.tokenize_plain(prompt))
        check(st == 400 and m and 512 < int(m.group(1)) <= exact,
              "the running count (%s) is a lower bound of the exact count %d" % (m and m.group(1), exact))


# ---------------------------------------------------------------------------------------
# The text exposition format (version 0.0.4), strictly: every line is a comment (# HELP /
# # TYPE / other), or a sample `name{label="value",...} value [timestamp]`; names and label
# names by their grammar, label values with \\ \" \n escapes only; a family's TYPE comes
# before its samples, once; a family's samples are contiguous; no sample twice; histogram
# families have _bucket (with le, ascending, cumulative, ending with +Inf) _count (= the +Inf
# bucket) and _sum per label set; counters end in _total in this server.
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


def parse_sample(line):
    """`name{l="v",...} value [timestamp]` -> (name, {labels}, value); raises ValueError."""
    m = re.match(NAME, line)
    if not m:
        raise ValueError("no metric name: %r" % line)
    name, i, labels = m.group(0), m.end(), {}
    if line[i:i + 1] == "{":
        i += 1
        while line[i:i + 1] != "}":
            lm = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="').match(line, i)
            if not lm or lm.group(1) in labels:
                raise ValueError("bad or repeated label at %d: %r" % (i, line))
            i, val = lm.end(), ""
            while line[i:i + 1] != '"':
                if i >= len(line) or line[i] == "\n":
                    raise ValueError("unterminated label value: %r" % line)
                if line[i] == "\\":
                    if line[i + 1:i + 2] not in ("\\", '"', "n"):
                        raise ValueError("bad escape: %r" % line)
                    val += {"n": "\n"}.get(line[i + 1], line[i + 1])
                    i += 2
                else:
                    val += line[i]
                    i += 1
            labels[lm.group(1)] = val
            i += 1
            if line[i:i + 1] == ",":
                i += 1
            elif line[i:i + 1] != "}":
                raise ValueError("expected , or } at %d: %r" % (i, line))
        i += 1
    parts = line[i:].split(" ")
    if parts[0] != "" or len(parts) not in (2, 3) or (len(parts) == 3 and not re.match(r"^-?\d+$", parts[2])):
        raise ValueError("bad value / timestamp: %r" % line)
    return name, labels, parse_float(parts[1])


def parse_float(v):
    if v in ("+Inf", "-Inf", "NaN"):
        return float(v.replace("Inf", "inf"))
    if not re.match(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$", v):
        raise ValueError("bad value %r" % v)
    return float(v)


def family_of(name, types):
    for suffix in ("_bucket", "_count", "_sum"):
        base = name[: -len(suffix)] if name.endswith(suffix) else None
        if base and types.get(base) in ("histogram", "summary"):
            return base
    return name


def parse_exposition(text):
    """-> {family: {"type", "help", "samples": [(name, {labels}, value)]}}; raises ValueError."""
    if not text.endswith("\n"):
        raise ValueError("the text does not end with a newline")
    fams, types, seen, order, current = {}, {}, set(), [], None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if line.startswith("#"):
            m = re.match(r"^# (HELP|TYPE) (%s) (.*)$" % NAME, line)
            if not m:
                continue  # a plain comment
            kind, name, rest = m.groups()
            f = fams.setdefault(name, {"type": None, "help": None, "samples": []})
            if kind == "TYPE":
                if rest not in TYPES or f["type"] or f["samples"]:
                    raise ValueError("line %d: TYPE %r repeated, unknown or after samples" % (n, rest))
                f["type"] = types[name] = rest
            elif f["help"] is not None:
                raise ValueError("line %d: HELP repeated" % n)
            else:
                f["help"] = rest
            continue
        if not line.strip():
            raise ValueError("line %d: empty line" % n)
        name, labels, value = parse_sample(line)
        fam = family_of(name, types)
        if fam != current:
            if fam in order:
                raise ValueError("line %d: family %s not contiguous" % (n, fam))
            order.append(fam)
            current = fam
        key = (name, tuple(sorted(labels.items())))
        if key in seen:
            raise ValueError("line %d: sample repeated: %r" % (n, key))
        seen.add(key)
        fams.setdefault(fam, {"type": None, "help": None, "samples": []})["samples"].append((name, labels, value))
    for fam, f in fams.items():
        if f["type"] == "histogram":
            check_histogram(fam, f["samples"])
        if f["type"] == "counter" and not fam.endswith("_total"):
            raise ValueError("counter %s without _total" % fam)
    return fams


def check_histogram(fam, samples):
    groups = {}
    for name, labels, value in samples:
        rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        g = groups.setdefault(rest, {"buckets": [], "count": None, "sum": None})
        if name == fam + "_bucket":
            g["buckets"].append((parse_float(labels["le"]), value))
        elif name == fam + "_count":
            g["count"] = value
        elif name == fam + "_sum":
            g["sum"] = value
    for rest, g in groups.items():
        les = [le for le, _ in g["buckets"]]
        counts = [c for _, c in g["buckets"]]
        if not les or les != sorted(les) or les[-1] != float("inf") or counts != sorted(counts) or \
                g["count"] != counts[-1] or g["sum"] is None:
            raise ValueError("histogram %s %r: buckets %r count %r sum %r" % (fam, rest, g["buckets"][-3:],
                                                                             g["count"], g["sum"]))


def sample(fams, fam, name=None, **labels):
    for n, lb, v in fams.get(fam, {"samples": []})["samples"]:
        if n == (name or fam) and all(lb.get(k) == v2 for k, v2 in labels.items()):
            return v
    return None


def test_metrics():
    with ts.Server("--parallel", "2") as srv:
        usage = [0, 0, 0]
        for stream in (False, True, False):
            body = {"prompt": ts.PROMPTS[0], "max_tokens": 6, "temperature": 0, "stream": stream,
                    "stream_options": {"include_usage": True}} if stream else \
                {"prompt": ts.PROMPTS[0], "max_tokens": 6, "temperature": 0}
            st, raw, _ = srv.request("POST", "/v1/completions", body)
            u = json.loads(raw)["usage"] if not stream else \
                json.loads([e for e in raw.split(b"\n\n") if b'"usage"' in e][-1][6:])["usage"]
            usage[0] += u["prompt_tokens"]
            usage[1] += u["completion_tokens"]
            usage[2] += u["prompt_tokens_details"]["cached_tokens"]
        st, raw, hdr = srv.request("GET", "/metrics")
        try:
            fams = parse_exposition(raw.decode("utf-8"))
            err = None
        except (ValueError, KeyError, UnicodeDecodeError) as e:
            fams, err = {}, repr(e)
        check(st == 200 and err is None and hdr.get("Content-Type", "").startswith("text/plain; version=0.0.4"),
              "/metrics follows the text format: %r" % err)
        want = {"vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge",
                "vllm:kv_cache_usage_perc": "gauge", "vllm:prompt_tokens_total": "counter",
                "vllm:generation_tokens_total": "counter", "vllm:request_success_total": "counter",
                "vllm:time_to_first_token_seconds": "histogram", "vllm:inter_token_latency_seconds": "histogram",
                "vllm:e2e_request_latency_seconds": "histogram", "vllm:request_queue_time_seconds": "histogram",
                "vllm:spec_decode_num_drafts_total": "counter", "vllm:spec_decode_num_draft_tokens_total": "counter",
                "vllm:spec_decode_num_accepted_tokens_total": "counter",
                "vllm:spec_decode_num_accepted_tokens_per_pos_total": "counter",
                "specdec_http_requests_total": "counter", "specdec_requests_total": "counter",
                "vllm:prefix_cache_queries_total": "counter", "vllm:prefix_cache_hits_total": "counter",
                "vllm:prompt_tokens_cached_total": "counter", "specdec_prefix_cache_queries_total": "counter",
                "specdec_prefix_cache_hits_total": "counter", "specdec_kv_blocks_cached": "gauge"}
        bad = {k: (fams.get(k) or {}).get("type") for k, t in want.items() if (fams.get(k) or {}).get("type") != t}
        check(not bad, "families and types: wrong or missing %r" % bad)
        vl = [lb for f, d in fams.items() if f.startswith("vllm:") for _, lb, _ in d["samples"]]
        check(vl and all(lb.get("model_name") == "kjv-target" and lb.get("engine") == "0" for lb in vl),
              "every vllm: sample has model_name and engine labels")
        g = lambda f, n=None, **kw: sample(fams, f, n, **kw)  # noqa: E731
        check(g("vllm:prompt_tokens_total") == usage[0], "prompt tokens %r == usage %d" %
              (g("vllm:prompt_tokens_total"), usage[0]))
        check(g("vllm:generation_tokens_total") == usage[1], "generation tokens %r == usage %d" %
              (g("vllm:generation_tokens_total"), usage[1]))
        check(g("vllm:prompt_tokens_cached_total") == usage[2] == g("specdec_prefix_cache_hits_total") and
              g("vllm:prefix_cache_hits_total") == usage[2] and
              g("vllm:prefix_cache_queries_total") == g("specdec_prefix_cache_queries_total"),
              "prefix cache: cached prompt tokens and hits == usage's cached_tokens %d, queries alike: %r %r %r" %
              (usage[2], g("vllm:prompt_tokens_cached_total"), g("vllm:prefix_cache_hits_total"),
               g("vllm:prefix_cache_queries_total")))
        check(g("vllm:request_success_total", finished_reason="length") == 3 and
              g("vllm:request_success_total", finished_reason="abort") == 0, "request_success by reason")
        for h in ("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
                  "vllm:request_queue_time_seconds"):
            check(g(h, h + "_count") == 3, "%s counts 3 requests: %r" % (h, g(h, h + "_count")))
        itl = g("vllm:inter_token_latency_seconds", "vllm:inter_token_latency_seconds_count")
        check(itl is not None and 0 < itl < usage[1], "ITL counted per step (%r < %d tokens)" % (itl, usage[1]))
        acc = g("vllm:spec_decode_num_accepted_tokens_total")
        pos = [v for n, lb, v in fams.get("vllm:spec_decode_num_accepted_tokens_per_pos_total",
                                          {"samples": []})["samples"]]
        check(acc is not None and acc > 0 and sum(pos) == acc and pos == sorted(pos, reverse=True) and
              g("vllm:spec_decode_num_drafts_total") >= pos[0],
              "accepted per position sums to accepted (%r vs %r), falls with the position" % (pos, acc))
        check(g("vllm:num_requests_running") == 0 and g("vllm:kv_cache_usage_perc") == 0, "idle gauges")
    bad_text = ["x_total 1\n# TYPE x_total counter\n", "a{b=\"c} 1\n", "a 1\na 1\n", "a 1", "# TYPE h histogram\n"
                "h_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\nh_sum 0\n"]
    caught = 0
    for t in bad_text:
        try:
            parse_exposition(t)
        except (ValueError, KeyError):
            caught += 1
    check(caught == len(bad_text), "the parser refuses malformed text (%d of %d)" % (caught, len(bad_text)))


def test_grammar_churn():
    """Structured output under churn: 8 clients at once, each with its own regex and n 2, on a server
    that keeps one compiled grammar (--grammar-cache 1), so entries are evicted while the requests
    that took them are still being admitted and run; then a streamed grammar request reset by its
    client mid-stream. Every answer fullmatches its regex, the cache holds one entry, nothing is left
    running, and the server exits 0 (under ASan: no leak, no use after free)."""
    with ts.Server("--parallel", "4", "--grammar-cache", "1") as srv:
        results = {}

        def one(i):
            rx = "%d-[a-z]{1,%d}" % (i, 2 + i % 4)
            body = {"prompt": "And God said", "max_tokens": 12, "n": 2, "temperature": 1, "seed": i,
                    "guided_regex": rx}
            results[i] = (rx,) + completion(srv, body, timeout=120 * SLOW)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i in range(8):
            rx, st, r = results.get(i, ("?", 0, {}))
            texts = [c.get("text", "") for c in r.get("choices", [])]
            check(st == 200 and len(texts) == 2 and all(re.fullmatch(rx, t) for t in texts),
                  "client %d under grammar churn: %d %r (regex %s)" % (i, st, texts or r, rx))
        stream_request(srv, {"prompt": "And", "max_tokens": 400, "temperature": 1, "seed": 3,
                             "guided_regex": "[a-z ]{1,1000}"}, read_events=2, reset=True)
        fams = wait_for(srv, lambda f: outcome(f, "true", "disconnect") == 1, 30 * SLOW)
        check(outcome(fams, "true", "disconnect") == 1, "a grammar stream reset by its client is cancelled")
        fams = wait_for(srv, lambda f: sample(f, "specdec_active_requests") == 0, 30 * SLOW)
        check(sample(fams, "specdec_active_requests") == 0 and sample(fams, "specdec_grammar_cache_entries") == 1,
              "nothing left running, one grammar kept: active %r, entries %r" % (
                  sample(fams, "specdec_active_requests"), sample(fams, "specdec_grammar_cache_entries")))
        ts.still_serving(srv, "grammar churn")


TESTS = [test_slowloris, test_slow_body, test_keepalive, test_idle_timeout, test_loading, test_limit, test_limit_slack, test_framing, test_content_type, test_host,
         test_allowed_hosts, test_nul, test_bearer, test_half_close, test_start_refusals, test_protocol_errors,
         test_cut_requests, test_drain, test_big_prompts, test_metrics, test_grammar_churn]


def main():
    t0 = time.time()
    for fn in TESTS:
        if ONLY and fn.__name__[5:] not in ONLY:
            continue
        try:
            ts.timed(fn)
        except Exception as e:  # noqa: BLE001 - a test that raised failed
            check(False, "%s raised %r" % (fn.__name__, e))
    if _shared:
        _shared[0].__exit__(None, None, None)
    print("hostile-client tests took %.1f s" % (time.time() - t0))
    print("%d passed, %d failed" % (ts.passed, ts.failed))
    return 1 if ts.failed else 0


if __name__ == "__main__":
    sys.exit(main())
