#!/usr/bin/env python3
"""The specdec program's seeds, statistics, Ctrl-C, batch progress and early errors
(issue 26), on the bundled pair, CPU backend.

    test_cli_stats.py SPECDEC_BIN SOURCE_DIR TMPDIR

Checks:
- one set of names: generate --json's "stats", every batch --json line and the server's
  `speculative` object carry every field of `specdec_stats` as include/specdec.h names
  it (parsed from the header, reserved excluded), with the same values where the run is
  the same (greedy: generate vs batch vs server on one prompt);
- seeds as llama.cpp: the default -1 draws a seed, printed in the statistics and --json,
  different run to run (two 32-bit draws collide with probability 2^-32), and
  `--seed <that>` reproduces the run; batch line i samples with S + i (printed S when
  -1), so identical lines give different samples (match mode at T = 1: 6 lines of 16
  tokens all equal has probability far below 1e-9 on this model), and a --jsonl line's
  own seed wins;
- text statistics: seed, load, prompt tokens/s, first token, tokens per target pass,
  acceptance by position; a tree run reports per-depth acceptance and labels its
  per-node rate "node acceptance"; --baseline in greedy mode reports the same tokens
  and a speedup;
- Ctrl-C (SIGINT): generate prints the text so far and the statistics (stop
  "interrupted"), --json too ("interrupted": true), exit 130; batch cancels what is
  unfinished, prints every line and the summary, exit 130;
- batch progress on stderr: a line per finished prompt; on a terminal (a pty) a bar;
- early errors: bad sampling values and --verify greedy with --temp > 0 are usage
  errors (exit 2) naming the value, found before anything loads (the model directory
  given does not exist); --verify greedy alone means temperature 0; --ctx beyond
  max_position_embeddings exits 1 naming both numbers; tokenize's long options and
  --help on stdout.
"""
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

BIN, SRC, TMP = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.join(SRC, "tests", "common"))
from sd_checks import check, done  # noqa: E402

os.makedirs(TMP, exist_ok=True)
MODELS = os.path.join(SRC, "models")
TARGET = os.path.join(MODELS, "kjv-target")
MISSING = os.path.join(TMP, "no-such-model")


def run(args, rc=0, **kw):
    p = subprocess.run([BIN] + args, capture_output=True, timeout=120, **kw)
    check(p.returncode == rc, f"{args}: exit {p.returncode}, expected {rc}; stderr {p.stderr[-600:]!r}")
    return p


def gen_json(args, rc=0):
    p = run(["generate", "--backend", "cpu", "--json"] + args, rc)
    try:
        return json.loads(p.stdout)
    except ValueError:
        check(False, f"{args}: not JSON: {p.stdout[:300]!r}")
        return {"stats": {}, "params": {}, "tokens": None}


def stats_fields():
    """The field names of specdec_stats in include/specdec.h (reserved excluded)."""
    h = open(os.path.join(SRC, "include", "specdec.h")).read()
    body = re.search(r"typedef struct specdec_stats \{(.*?)\} specdec_stats;", h, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    names = re.findall(r"(\w+)\s*(?:\[[^\]]*\])?\s*;", body)
    return [n for n in names if n != "reserved"]


FIELDS = stats_fields()
check(len(FIELDS) >= 30 and "acceptance_at_pos" in FIELDS and "seed" in FIELDS, f"header parse: {FIELDS}")

# --- one set of names, same values: generate, batch, server (greedy) ----------------
PROMPT = "And God said"
g = gen_json(["-p", PROMPT, "-n", "24", "--temp", "0"])
s = g["stats"]
check(not [f for f in FIELDS if f not in s], f"generate --json lacks {[f for f in FIELDS if f not in s]}")
prompts = os.path.join(TMP, "one.txt")
with open(prompts, "w") as f:
    f.write(PROMPT + "\n")
b = run(["batch", "-f", prompts, "-n", "24", "--temp", "0", "--backend", "cpu", "--json"])
line = json.loads(b.stdout.decode().splitlines()[0])
check(not [f for f in FIELDS if f not in line], f"batch --json lacks {[f for f in FIELDS if f not in line]}")
COUNTS = ("n_prompt", "n_generated", "n_rounds", "n_drafted", "n_accepted", "n_target_passes", "n_drafted_at_pos",
          "n_accepted_at_pos", "tree_width", "draft_method", "verify", "n_draft", "draft_nodes", "stop_reason")
check(all(line[k] == s[k] for k in COUNTS), f"batch vs generate: {[(k, line[k], s[k]) for k in COUNTS if line[k] != s[k]]}")

srv = subprocess.Popen([BIN, "serve", "--port", "0", "--backend", "cpu"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, start_new_session=True)
try:
    port = None
    deadline = time.time() + 60
    buf = b""
    while port is None and time.time() < deadline and srv.poll() is None:
        r, _, _ = select.select([srv.stdout], [], [], 1)
        if r:
            buf += os.read(srv.stdout.fileno(), 4096)
            m = re.search(rb"listening on http://[\d.]+:(\d+)", buf)
            port = int(m.group(1)) if m else None
    check(port is not None, f"server did not start: {buf[-300:]!r}")
    if port:
        import urllib.request
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", method="POST",
                                     headers={"Content-Type": "application/json"},
                                     data=json.dumps({"prompt": PROMPT, "max_tokens": 24, "temperature": 0}).encode())
        spec = json.loads(urllib.request.urlopen(req, timeout=60).read())["speculative"]
        check(not [f for f in FIELDS if f not in spec], f"server lacks {[f for f in FIELDS if f not in spec]}")
        check(all(spec[k] == s[k] for k in COUNTS), f"server vs generate: "
              f"{[(k, spec[k], s[k]) for k in COUNTS if spec[k] != s[k]]}")
finally:
    srv.send_signal(signal.SIGINT)
    try:
        srv.wait(timeout=30)
    except subprocess.TimeoutExpired:
        srv.kill()

# --- values of the statistics ------------------------------------------------------
check(s["n_target_passes"] == s["n_rounds"] and abs(s["tokens_per_target_pass"] - 24 / s["n_target_passes"]) < 1e-9,
      f"target passes: {s}")
check(s["draft_method"] == "model" and s["verify"] == "greedy" and s["n_draft"] == 4 and s["tree_width"] == [],
      f"settings: {s}")
check(len(s["acceptance_at_pos"]) == 4 and all(abs(a - (n and c / n)) < 1e-12 for a, c, n in
      zip(s["acceptance_at_pos"], s["n_accepted_at_pos"], s["n_drafted_at_pos"])), f"by position: {s}")
check(s["t_prefill_s"] <= s["t_first_token_s"] <= s["t_total_s"] and s["t_load_s"] > 0, f"timings: {s}")
plain = gen_json(["-m", TARGET, "-p", PROMPT, "-n", "8"])["stats"]
check(plain.get("draft_method") == "none" and plain.get("n_target_passes") == 8 and plain.get("n_draft") == 0,
      f"plain: {plain}")

# --- seeds ----------------------------------------------------------------------------
a = gen_json(["-p", PROMPT, "-n", "16", "--temp", "1"])
c = gen_json(["-p", PROMPT, "-n", "16", "--temp", "1", "--seed", "-1"])
sa, sc = a["stats"].get("seed"), c["stats"].get("seed")
check(a["params"].get("seed") == -1 and isinstance(sa, int) and 0 <= sa < 2**32 and sa != sc,
      f"random seeds: {sa} {sc}, params {a['params'].get('seed')}")
r = gen_json(["-p", PROMPT, "-n", "16", "--temp", "1", "--seed", str(sa)])
check(r["tokens"] == a["tokens"] and r["stats"].get("seed") == sa, f"--seed {sa} did not reproduce the run")
t = run(["generate", "-p", PROMPT, "-n", "4", "--seed", "123", "--backend", "cpu"])
check(b"seed 123" in t.stderr, f"text statistics lack the seed: {t.stderr!r}")
big = gen_json(["-p", PROMPT, "-n", "4", "--seed", str(2**64 - 2)])
check(big["stats"].get("seed") == 2**64 - 2 and big["params"].get("seed") == 2**64 - 2, "largest seed not exact")
for bad in ("-2", str(2**64 - 1), "1.5", "+3"):
    p = run(["generate", "-p", "x", "-m", MISSING, "--seed", bad], 2)
    check(b"--seed" in p.stderr, f"--seed {bad}: {p.stderr!r}")

same = os.path.join(TMP, "same.txt")
with open(same, "w") as f:
    f.write((PROMPT + "\n") * 6)
BATCH = ["batch", "-f", same, "-n", "16", "--temp", "1", "--verify", "match", "--backend", "cpu", "--json",
         "--no-progress"]
lines = [json.loads(x) for x in run(BATCH + ["--seed", "100"]).stdout.decode().splitlines()]
check([x.get("seed") for x in lines[:-1]] == [100 + i for i in range(6)] and lines[-1]["summary"]["seed"] == 100,
      f"batch seeds: {[x.get('seed') for x in lines]}")
check(len({tuple(x["tokens"]) for x in lines[:-1]}) > 1, "identical lines gave identical samples")
alone = gen_json(["-p", PROMPT, "-n", "16", "--temp", "1", "--verify", "match", "--seed", "103"])
check(alone["tokens"] == lines[3]["tokens"], "batch line 3 != generate --seed 103")
lines = [json.loads(x) for x in run(BATCH).stdout.decode().splitlines()]
S = lines[-1]["summary"]["seed"]
check([x.get("seed") for x in lines[:-1]] == [S + i for i in range(6)], f"random S: {S}, {[x.get('seed') for x in lines]}")
jl = os.path.join(TMP, "lines.jsonl")
with open(jl, "w") as f:
    f.write(json.dumps({"prompt": PROMPT, "seed": 103}) + "\n" + json.dumps({"prompt": PROMPT}) + "\n"
            + "{\"seed\": 1}\n")
p = run(["batch", "-f", jl, "--jsonl", "-n", "16", "--temp", "1", "--verify", "match", "--backend", "cpu", "--json",
         "--seed", "50", "--no-progress"], 1)
lines = [json.loads(x) for x in p.stdout.decode().splitlines()]
check(lines[0]["tokens"] == alone["tokens"] and lines[0]["seed"] == 103 and lines[1]["seed"] == 51 and
      lines[2]["status"].startswith("SPECDEC_ERR_INVALID_ARGUMENT") and "prompt" in lines[2]["error"],
      f"--jsonl: {[(x.get('seed'), x.get('status'), x.get('error')) for x in lines]}")

# --- text statistics, trees, baseline ------------------------------------------------
t = run(["generate", "-p", PROMPT, "-n", "24", "--temp", "0", "--backend", "cpu"]).stderr.decode()
for word in ("seed ", "load ", "tokens/s", "first token after", "tokens per target pass", "acceptance by position",
             "mean accepted length", "decode "):
    check(word in t, f"text statistics lack {word!r}: {t!r}")
t = run(["generate", "-p", PROMPT, "-n", "24", "--temp", "0", "--backend", "cpu", "--tree", "3,2",
         "--draft-nodes", "6"]).stderr.decode()
check("acceptance by depth" in t and "node acceptance" in t and "tree 3,2, 6 nodes" in t and "γ" not in t,
      f"tree statistics: {t!r}")
j = gen_json(["-p", PROMPT, "-n", "24", "--temp", "0", "--baseline"])
base = j.get("baseline", {})
check(base.get("same_tokens") is True and base.get("draft_method") == "none" and base.get("speedup", 0) > 0 and
      abs(base["speedup"] - j["stats"]["tokens_per_second"] / base["tokens_per_second"]) < 1e-9, f"baseline: {base}")
t = run(["generate", "-p", PROMPT, "-n", "8", "--temp", "0", "--backend", "cpu", "--baseline"]).stderr.decode()
check("speedup" in t and "same tokens: yes" in t, f"baseline text: {t!r}")


# --- Ctrl-C --------------------------------------------------------------------------
def interrupt(args, wait_for):
    """Start args, send SIGINT once `wait_for` appeared on stdout or stderr, return
    (rc, stdout, stderr)."""
    p = subprocess.Popen([BIN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = {p.stdout.fileno(): b"", p.stderr.fileno(): b""}
    open_fds = set(out)
    sent, deadline = False, time.time() + 60
    while open_fds and time.time() < deadline:
        for fd in select.select(list(open_fds), [], [], 0.5)[0]:
            chunk = os.read(fd, 65536)
            out[fd] += chunk
            if not chunk:
                open_fds.discard(fd)
        if not sent and any(wait_for in v for v in out.values()):
            p.send_signal(signal.SIGINT)
            sent = True
    rc = p.wait(timeout=60)
    return rc, out[p.stdout.fileno()], out[p.stderr.fileno()], sent


LONG = ["-m", TARGET, "-p", PROMPT, "-n", "100000", "--ignore-eos", "--backend", "cpu", "--temp", "0"]
p = subprocess.Popen([BIN, "generate"] + LONG, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
first = p.stdout.read(8)  # text is streaming: the generation runs
p.send_signal(signal.SIGINT)
rest, err = p.communicate(timeout=60)
check(p.returncode == 130 and len(first) == 8, f"Ctrl-C: exit {p.returncode}")
err = err.decode()
check("stop: interrupted (Ctrl-C)" in err and "tokens per target pass" in err, f"Ctrl-C statistics: {err!r}")
# --json prints nothing until the end, so the signal goes after a fixed delay: the run must still be
# going then. With the AVX2 linear layers the whole context (~500 tokens) takes ~1 s on an idle
# machine; the portable loop (SPECDEC_CPU_ISA=generic, same tokens) takes ~2.5 s.
p = subprocess.Popen([BIN, "generate", "--json"] + LONG, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     env=dict(os.environ, SPECDEC_CPU_ISA="generic"))
time.sleep(0.6)
p.send_signal(signal.SIGINT)
out, err = p.communicate(timeout=60)
try:
    j = json.loads(out)
except ValueError:
    j = {}
# (a SIGINT that came before the first token, while loading, gives an empty run: no tokens)
check(p.returncode == 130 and j.get("interrupted") is True and len(j.get("tokens", [1] * 600)) < 500 and
      (j["stats"].get("stop_reason") == "callback" or not j["tokens"]),
      f"Ctrl-C --json: exit {p.returncode}, {out[:200]!r} {err[-300:]!r}")

many = os.path.join(TMP, "many.txt")
with open(many, "w") as f:
    f.write((PROMPT + "\n") * 12)
rc, out, err, sent = interrupt(["batch", "-f", many, "-n", "150", "--ignore-eos", "--parallel", "2", "--backend", "cpu",
                                "--temp", "0", "--json", "-m", TARGET], b"1/12 done")
lines = [json.loads(x) for x in out.decode().splitlines() if x.strip()]
cancelled = [x for x in lines[:-1] if x["status"].startswith("SPECDEC_ERR_CANCELLED")]
check(sent and rc == 130 and len(lines) == 13 and lines[-1]["summary"].get("interrupted") is True and cancelled,
      f"batch Ctrl-C: exit {rc}, {len(lines)} lines, {len(cancelled)} cancelled; {err[-300:]!r}")

# --- batch progress ------------------------------------------------------------------
p = run(["batch", "-f", same, "-n", "4", "--temp", "0", "--backend", "cpu"])
check(len(re.findall(rb"specdec batch: \d+/6 done: line \d", p.stderr)) == 6, f"progress lines: {p.stderr!r}")
check(b"done" not in run(["batch", "-f", same, "-n", "4", "--temp", "0", "--backend", "cpu", "--no-progress"]).stderr,
      "--no-progress")
master, slave = pty.openpty()
p = subprocess.run([BIN, "batch", "-f", same, "-n", "4", "--temp", "0", "--backend", "cpu"], stdout=subprocess.PIPE,
                   stderr=slave, timeout=120)
os.close(slave)
tty = b""
while select.select([master], [], [], 0.2)[0]:
    try:
        chunk = os.read(master, 65536)
    except OSError:
        break
    if not chunk:
        break
    tty += chunk
os.close(master)
check(p.returncode == 0 and b"\r[" in tty and b"6/6 prompts" in tty and b"done: line" not in tty, f"tty bar: {tty!r}")

# --- early errors ----------------------------------------------------------------------
for args, word in ((["--temp", "-1"], b"temperature"), (["--top-p", "0"], b"top_p"), (["--min-p", "2"], b"min_p"),
                   (["--top-k", "-1"], b"top_k"), (["-n", "0"], b"n_predict"), (["--draft-max", "17"], b"n_draft"),
                   (["--verify", "greedy", "--temp", "0.7"], b"--verify greedy conflicts with --temp 0.7")):
    p = run(["generate", "-m", MISSING, "-p", "x"] + args, 2)  # refused before loading MISSING
    check(word in p.stderr and b"loading" not in p.stderr, f"{args}: {p.stderr[:300]!r}")
    p = run(["batch", "-m", MISSING, "-f", same] + args, 2)
    check(word in p.stderr, f"batch {args}: {p.stderr[:300]!r}")
j = gen_json(["-p", PROMPT, "-n", "4", "--verify", "greedy"])
check(j["params"].get("temperature") == 0 and j["stats"].get("verify") == "greedy", f"greedy alone: {j['params']}")
p = run(["generate", "-p", PROMPT, "--ctx", "100000", "--backend", "cpu"], 1)
check(b"n_ctx 100000" in p.stderr and b"max_position_embeddings 512" in p.stderr, f"--ctx: {p.stderr!r}")
p = run(["tokenize", "--model", TARGET, "--prompt", "In the beginning"])
check(re.fullmatch(rb"[\d ]+\n", p.stdout) is not None, f"tokenize long options: {p.stdout!r}")
p = run(["tokenize", "--help"])
check(p.stdout.startswith(b"usage: specdec tokenize") and not p.stderr, "tokenize --help on stdout")

sys.exit(done())
