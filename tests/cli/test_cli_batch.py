#!/usr/bin/env python3
"""`specdec batch` (tools/cli/cmd_batch.c) on the bundled pair, CPU backend.

Checks: every prompt's tokens and text equal `specdec generate` on that line alone
(greedy, and match mode at T = 0.8 with --seed 11, line i being generate --seed 11+i:
the scheduler must not change a sequence's output), for --parallel 1 and 3 (the prompts outnumber the parallel slots,
so requests queue and join as others leave); lines are 0-indexed in file order, CRLF
and a missing final newline handled; --json ends with one summary line whose counts
add up; text mode prints "[i] text"; a failing prompt (an empty line with a tokenizer
that adds no BOS would be one, but the bundled tokenizer adds BOS, so a prompt made
too long for the context is used) is reported in its own line with exit code 1 while
the others complete; usage errors exit 2 with a message.
Prefix cache (vLLM's --enable-prefix-caching / --no-enable-prefix-caching; default AUTO): a file
holding one prompt of >= 2 KV blocks (16 tokens each) three times and a short one, --parallel 1 (each
line begins after the one before ended): by default and with --enable-prefix-caching lines 1 and 2
report n_cached_prompt > 0 (line 0: 0), with --no-enable-prefix-caching every line 0; the tokens are
generate's alone either way, greedy and match mode (the exactness claim); the summary's n_prompt and
n_cached_prompt are the lines' sums; --help lists both options. Chunked prefill (--prefill-chunk 5,
and 3 with the cache off): the same tokens and hits; --prefill-chunk -1 is a usage error.
KV pool (--kv-blocks 22 --kv-block-size 8, --kv-admission optimistic / reserve): four lines of 80
greedy tokens (--ignore-eos), --parallel 4, in a pool that holds one at a time: the tokens are
generate's alone; optimistic preempts (the summary's n_preemptions, the lines' sum, > 0), reserve
does not; bad values of the three options are usage errors naming them.

Usage: test_cli_batch.py SPECDEC_BIN MODELS_DIR TMPDIR"""
import json
import os
import subprocess
import sys

specdec, models, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(tmp, exist_ok=True)
TARGET, DRAFT = os.path.join(models, "kjv-target"), os.path.join(models, "kjv-draft")
failed = passed = 0


def check(ok, what):
    global failed, passed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what}", file=sys.stderr)


def run(args, expect_rc=None):
    p = subprocess.run([specdec] + args, capture_output=True, timeout=600)
    if expect_rc is not None:
        check(p.returncode == expect_rc, f"{args[:6]}...: exit {p.returncode}, expected {expect_rc}; "
                                         f"stderr {p.stderr[-400:]!r}")
    return p


PROMPTS = ["And God said", "In the beginning", "The LORD is my shepherd", "Blessed are the meek",
           "And it came to pass", "Thou shalt not", "Behold"]
path = os.path.join(tmp, "prompts.txt")
with open(path, "wb") as f:  # CRLF on one line, no final newline
    f.write(("\n".join(PROMPTS[:3]) + "\r\n" + "\n".join(PROMPTS[3:])).encode())

for mode in (["--temp", "0"], ["--verify", "match", "--temp", "0.8"]):
    common = ["-m", TARGET, "-md", DRAFT, "-n", "20", "--backend", "cpu", "--draft-max", "3"] + mode
    alone = []
    for i, p in enumerate(PROMPTS):  # line i samples with seed S + i (S = 11 here)
        g = run(["generate", "-p", p, "--json", "--seed", str(11 + i)] + common, 0)
        alone.append(json.loads(g.stdout) if g.returncode == 0 else None)
    for par in ("1", "3"):
        b = run(["batch", "-f", path, "--parallel", par, "--json", "--seed", "11"] + common, 0)
        lines = [json.loads(x) for x in b.stdout.decode().splitlines() if x.strip()]
        check(len(lines) == len(PROMPTS) + 1, f"{mode} parallel {par}: {len(lines)} JSON lines")
        if len(lines) != len(PROMPTS) + 1:
            continue
        for i, (got, ref) in enumerate(zip(lines, alone)):
            check(got["index"] == i, f"{mode} parallel {par}: line {i} has index {got['index']}")
            check(ref is not None and got["tokens"] == ref["tokens"],
                  f"{mode} parallel {par}: prompt {i} tokens differ from generate alone")
            check(ref is not None and got["text"] == ref["text"], f"{mode} parallel {par}: prompt {i} text differs")
        s = lines[-1].get("summary", {})
        check(s.get("prompts") == len(PROMPTS) and s.get("failed") == 0, f"summary counts: {s}")
        check(s.get("tokens") == sum(len(x["tokens"]) for x in lines[:-1]), f"summary tokens: {s}")
        check(s.get("seconds", 0) > 0 and abs(s["tokens_per_second"] - s["tokens"] / s["seconds"]) < 1e-6 * s["tokens"] / s["seconds"] + 1e-9,
              f"summary rate: {s}")

t = run(["batch", "-f", path, "--parallel", "2", "-n", "8", "--temp", "0", "--backend", "cpu"], 0)
out = t.stdout.decode().splitlines()
check(len(out) == len(PROMPTS) and all(line.startswith(f"[{i}] ") for i, line in enumerate(out)),
      f"text mode lines: {out[:3]}")
check(b"tokens/s" in t.stderr, "text mode: no summary on stderr")

# A prompt too long for a 64-token context fails alone; the others complete.
bad = os.path.join(tmp, "one_bad.txt")
with open(bad, "w") as f:
    f.write("And God said\n" + " ".join(["the"] * 200) + "\nBehold\n")
p = run(["batch", "-f", bad, "--json", "--ctx", "64", "-n", "8", "--temp", "0", "--backend", "cpu"], 1)
lines = [json.loads(x) for x in p.stdout.decode().splitlines() if x.strip()]
check(len(lines) == 4 and lines[1]["status"].startswith("SPECDEC_ERR_CONTEXT_FULL") and lines[1]["tokens"] == []
      and lines[0]["status"].startswith("SPECDEC_OK") and lines[2]["status"].startswith("SPECDEC_OK")
      and lines[3]["summary"]["failed"] == 1, f"one bad prompt: {lines}")

# Prefix cache: one long prompt three times (line i: seed 11 + i), then a short one.
LONG = ("And the LORD spake unto Moses, saying, Speak unto the children of Israel, and say unto them, When ye "
        "be come into the land which I give unto you, then shall the land keep a sabbath unto the LORD.")
pc_prompts = [LONG, LONG, LONG, "Behold"]
pc_path = os.path.join(tmp, "prefix_cache.txt")
with open(pc_path, "w") as f:
    f.write("\n".join(pc_prompts) + "\n")
for mode in (["--temp", "0"], ["--verify", "match", "--temp", "0.8"]):
    common = ["-m", TARGET, "-md", DRAFT, "-n", "12", "--backend", "cpu"] + mode
    alone = [run(["generate", "-p", p, "--json", "--seed", str(11 + i)] + common, 0) for i, p in enumerate(pc_prompts)]
    alone = [json.loads(g.stdout)["tokens"] if g.returncode == 0 else None for g in alone]
    for opt, want_hits in (([], True), (["--enable-prefix-caching"], True), (["--no-enable-prefix-caching"], False),
                           (["--prefill-chunk", "5"], True), (["--prefill-chunk", "3", "--no-enable-prefix-caching"], False)):
        b = run(["batch", "-f", pc_path, "--parallel", "1", "--json", "--seed", "11"] + opt + common, 0)
        lines = [json.loads(x) for x in b.stdout.decode().splitlines() if x.strip()]
        if not lines or "summary" not in lines[-1]:
            check(False, f"prefix cache {opt} {mode}: no summary: {b.stderr[-300:]!r}")
            continue
        cached = [x.get("n_cached_prompt") for x in lines[:-1]]
        n_long = lines[0]["n_prompt"]
        ok = cached[0] == 0 and cached[3] == 0 and (all(0 < c <= n_long - 1 for c in cached[1:3]) if want_hits
                                                     else cached[1:3] == [0, 0])
        check(n_long >= 33 and ok, f"prefix cache {opt or ['(default)']} {mode}: n_cached_prompt {cached} "
                                   f"(prompt {n_long} tokens)")
        check([x["tokens"] for x in lines[:-1]] == alone, f"prefix cache {opt} {mode}: tokens == generate alone")
        s = lines[-1]["summary"]
        check(s.get("n_cached_prompt") == sum(c or 0 for c in cached) and
              s.get("n_prompt") == sum(x["n_prompt"] for x in lines[:-1]), f"prefix cache {opt}: summary {s}")
# KV pool: four long greedy lines in a pool of 22 blocks of 8 tokens (one line's ~90 rows at a time).
kv_prompts = ["And God said", "In the beginning", "The LORD is my shepherd", "Blessed are the"]
kv_path = os.path.join(tmp, "kv.txt")
with open(kv_path, "w") as f:
    f.write("\n".join(kv_prompts) + "\n")
common = ["-m", TARGET, "-md", DRAFT, "-n", "80", "--temp", "0", "--ignore-eos", "--backend", "cpu"]
alone = [run(["generate", "-p", p, "--json"] + common, 0) for p in kv_prompts]
alone = [json.loads(g.stdout)["tokens"] if g.returncode == 0 else None for g in alone]
for adm in ("optimistic", "reserve"):
    b = run(["batch", "-f", kv_path, "--parallel", "4", "--json", "--kv-blocks", "22", "--kv-block-size", "8",
             "--kv-admission", adm] + common, 0)
    lines = [json.loads(x) for x in b.stdout.decode().splitlines() if x.strip()]
    if not lines or "summary" not in lines[-1]:
        check(False, f"kv {adm}: no summary: {b.stderr[-300:]!r}")
        continue
    check([x["tokens"] for x in lines[:-1]] == alone, f"kv {adm}: tokens == generate alone")
    pre = [x.get("n_preemptions") for x in lines[:-1]]
    s = lines[-1]["summary"]
    check(s.get("n_preemptions") == sum(pre) and (sum(pre) > 0 if adm == "optimistic" else sum(pre) == 0),
          f"kv {adm}: n_preemptions {pre}, summary {s.get('n_preemptions')}")
for args in (["--kv-blocks", "-1"], ["--kv-block-size", "0"], ["--kv-admission", "eager"], ["--kv-blocks"]):
    p = run(["batch", "-f", kv_path] + args, 2)
    check(args[0].encode() in p.stderr, f"batch {args}: {p.stderr[:300]!r}")

h = run(["batch", "--help"], 0).stdout
check(b"--enable-prefix-caching" in h and b"--no-enable-prefix-caching" in h and b"--prefill-chunk" in h and
      b"--kv-blocks" in h and b"--kv-admission" in h, "batch --help lists the prefix cache, --prefill-chunk and the KV pool")

for args, rc, word in ((["batch"], 2, b"-f PROMPTS is required"), (["batch", "-f", path, "-p", "x"], 2, b"-p is not"),
                       (["batch", "-f", path, "--parallel", "0"], 2, b"--parallel"),
                       (["batch", "-f", path, "--parallel"], 2, b"needs a value"),
                       (["batch", "-f", path, "--prefill-chunk", "-1"], 2, b"--prefill-chunk"),
                       (["batch", "-f", path, "--bogus"], 2, b"unknown option"),
                       (["batch", "-f", os.path.join(tmp, "missing.txt")], 1, b"reading the prompts")):
    p = run(args, rc)
    check(word in p.stderr, f"{args}: stderr lacks {word!r}: {p.stderr[:300]!r}")
check(run(["batch", "--help"], 0).stdout.startswith(b"usage: specdec batch"), "--help")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
