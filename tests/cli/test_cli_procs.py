#!/usr/bin/env python3
"""The logits processors on the command line (`specdec generate` / `specdec batch`:
--logit-bias ID=BIAS, --stop-token-id ID, --min-tokens N, --presence-penalty, --frequency-penalty,
--repetition-penalty, --allowed-token-ids ID,..., --bad-words WORD; include/specdec.h "Logits
processors"), bundled pair, CPU backend, greedy.

Checks, against the plain greedy output T = t0 t1 ... of the same prompt:
  - --logit-bias t0=-100: the first token is not t0;
  - --stop-token-id t_k (t_k's first occurrence, k >= 1): the output is T[0..k] (the stop token
    kept), stop_reason "stop_token_id"; several ids stop at the first met;
  - --min-tokens 3 with --stop-token-id t0: t0 cannot come before 3 tokens, so the output does not
    stop at 1 token and, when it stops on t0, has at least 4;
  - --presence-penalty 2 / --frequency-penalty 2 / --repetition-penalty 3: a greedy output that
    repeats a token changes;
  - --allowed-token-ids (T's ids but t0, in two lists): every token is one of them, the first is
    not t0; --bad-words w (a word of T's text): neither of w's sequences as vLLM tokenizes it
    (`specdec tokenize --no-special` of w and " w") occurs in the output, which changes; a word
    of white space only exits 2;
  - batch with the options: every line equals generate on that line alone (tokens);
  - bad values exit 2 with the library's message naming the field (before any model loads), a
    malformed --logit-bias names its form; --help lists every flag.

Usage: test_cli_procs.py SPECDEC_BIN MODELS_DIR TMPDIR"""
import json
import os
import subprocess
import sys

specdec, models, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(tmp, exist_ok=True)
TARGET, DRAFT = os.path.join(models, "kjv-target"), os.path.join(models, "kjv-draft")
COMMON = ["-m", TARGET, "-md", DRAFT, "--backend", "cpu", "--temp", "0", "--seed", "5"]
N = 24
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sd_checks import check, done  # noqa: E402


def run(args):
    return subprocess.run([specdec] + args, capture_output=True, text=True, timeout=600)


def gen(prompt, *extra, n=N):
    p = run(["generate", "-p", prompt, "-n", str(n), "--json"] + COMMON + list(extra))
    check(p.returncode == 0, f"generate {extra}: exit {p.returncode}: {p.stderr[-300:]}")
    return json.loads(p.stdout) if p.returncode == 0 else {"tokens": [], "text": "", "stats": {}}


PROMPT = "And God said"
ref = gen(PROMPT)
T = ref["tokens"]
check(len(T) == N, f"reference: {N} tokens ({len(T)})")
t0 = T[0]

g = gen(PROMPT, "--logit-bias", f"{t0}=-100")
check(g["tokens"] and g["tokens"][0] != t0, f"--logit-bias {t0}=-100: first token {g['tokens'][:1]} is not {t0}")
g = gen(PROMPT, "--logit-bias", f"{t0}=0", "--logit-bias", "5=0")
check(g["tokens"] == T, "--logit-bias of 0 changes nothing")

k = next((i for i in range(1, len(T)) if T[i] not in T[:i]), None)
check(k is not None, f"a token first met after the start: {T}")
if k is not None:
    g = gen(PROMPT, "--stop-token-id", str(T[k]))
    check(g["tokens"] == T[: k + 1] and g["stats"].get("stop_reason") == "stop_token_id",
          f"--stop-token-id {T[k]}: {g['tokens']} (want {T[:k + 1]}), {g['stats'].get('stop_reason')}")
    g = gen(PROMPT, "--stop-token-id", str(T[k]), "--stop-token-id", str(t0))
    check(g["tokens"] == [t0] and g["stats"].get("stop_reason") == "stop_token_id",
          f"two stop ids stop at the first met: {g['tokens']}")

g = gen(PROMPT, "--stop-token-id", str(t0), "--min-tokens", "3")
check(len(g["tokens"]) >= 3 and (g["stats"].get("stop_reason") != "stop_token_id" or len(g["tokens"]) >= 4)
      and t0 not in g["tokens"][:3], f"--min-tokens 3 holds {t0} off: {g['tokens']} {g['stats'].get('stop_reason')}")

check(len(set(T)) < len(T), f"the greedy reference repeats a token: {T}")
for opt in ("--presence-penalty", "--frequency-penalty", "--repetition-penalty"):
    g = gen(PROMPT, opt, "3" if opt == "--repetition-penalty" else "2")
    check(g["tokens"] != T, f"{opt} changes a repeating greedy output: {g['tokens']}")

allowed = sorted(set(T) - {t0})
half = len(allowed) // 2
g = gen(PROMPT, "--allowed-token-ids", ",".join(map(str, allowed[:half])), "--allowed-token-ids",
        ",".join(map(str, allowed[half:])))
check(g["tokens"] and g["tokens"][0] != t0 and all(t in allowed for t in g["tokens"]),
      f"--allowed-token-ids {allowed}: {g['tokens']}")


def tokenize(text):
    p = run(["tokenize", "-m", TARGET, "-p", text, "--no-special"])
    return [int(x) for x in p.stdout.split()]


def has_seq(toks, w):
    return any(toks[i:i + len(w)] == w for i in range(len(toks) - len(w) + 1))


word = max(ref["text"].split(), key=len).strip(",.;:")
plain, spaced = tokenize(word), tokenize(" " + word)
seqs = [plain] + ([spaced] if len(spaced) == len(plain) and spaced[0] != plain[0] else [])  # vLLM's rule
check(any(has_seq(T, w) for w in seqs), f"the bad word {word!r} ({seqs}) is in the reference {T}")
g = gen(PROMPT, "--bad-words", word)
check(g["tokens"] != T and not any(has_seq(g["tokens"], w) for w in seqs),
      f"--bad-words {word!r} ({seqs}): {g['tokens']}")
p = run(["generate", "-p", "x", "-n", "2"] + COMMON + ["--bad-words", " \t"])
check(p.returncode == 2 and "--bad-words" in p.stderr and "white space" in p.stderr,
      f"--bad-words of white space: exit {p.returncode} {p.stderr[-200:]}")

prompts = ["And God said", "In the beginning", "Blessed are the meek"]
path = os.path.join(tmp, "procs.txt")
with open(path, "w") as f:
    f.write("\n".join(prompts) + "\n")
opts = ["--presence-penalty", "0.5", "--logit-bias", f"{t0}=-5", "--stop-token-id", "13", "--min-tokens", "2",
        "--repetition-penalty", "1.3", "--frequency-penalty", "0.25", "--bad-words", "Lord"]
b = run(["batch", "-f", path, "--json", "--no-progress", "--parallel", "3", "-n", "12"] + COMMON + opts)
lines = [json.loads(x) for x in b.stdout.splitlines() if x.strip()]
check(b.returncode == 0 and len(lines) == len(prompts) + 1, f"batch: exit {b.returncode}, {len(lines)} lines")
for i, p in enumerate(prompts):
    alone = gen(p, *opts, n=12)
    check(i < len(lines) and lines[i].get("tokens") == alone["tokens"],
          f"batch line {i} equals generate alone: {lines[i].get('tokens') if i < len(lines) else None} vs "
          f"{alone['tokens']}")

bad = [(["--presence-penalty", "2.5"], "presence_penalty"), (["--frequency-penalty", "-3"], "frequency_penalty"),
       (["--repetition-penalty", "-1"], "repetition_penalty"), (["--min-tokens", "-1"], "min_tokens"),
       (["--stop-token-id", "-1"], "stop_token_ids"), (["--logit-bias", "5=101"], "logit_bias"),
       (["--logit-bias", "-2=1"], "logit_bias"), (["--logit-bias", "5"], "ID=BIAS"), (["--logit-bias", "=1"], "ID=BIAS"),
       (["--logit-bias", "x=1"], "ID=BIAS"), (["--stop-token-id", "x"], "--stop-token-id"),
       (["--min-tokens", "1.5"], "--min-tokens"), (["--allowed-token-ids", "3,-1"], "allowed_token_ids[1]"),
       (["--allowed-token-ids", "1,,2"], "--allowed-token-ids"), (["--allowed-token-ids", "x"], "--allowed-token-ids")]
bad.append(([a for i in range(65) for a in ("--stop-token-id", str(i))], "n_stop_token_ids"))
for extra, word in bad:
    p = run(["generate", "-p", "x", "-m", "/nonexistent"] + extra)  # refused before the model is loaded
    check(p.returncode == 2 and word in p.stderr, f"{extra[:4]}: exit 2 naming {word}: {p.returncode} "
                                                  f"{p.stderr.splitlines()[:1]}")
h = run(["generate", "--help"])
for flag in ("--presence-penalty", "--frequency-penalty", "--repetition-penalty", "--logit-bias", "--min-tokens",
             "--stop-token-id", "--allowed-token-ids", "--bad-words"):
    check(flag in h.stdout + h.stderr, f"generate --help lists {flag}")

sys.exit(done())
