#!/usr/bin/env python3
"""test_cli.py — `specdec generate` end to end on the make_pair.py checkpoints.

    test_cli.py SPECDEC_BINARY PAIR_DIR

Checks: --json prints one object whose fields are consistent (tokens decode, with the
`tokenizers` library, to the text; statistics add up; parameters echoed); the prompt
ids equal the `tokenizers` encoding (BOS from the post-processor); streaming mode
prints the same text on stdout and the statistics on stderr; greedy speculative ==
greedy plain, match speculative == plain with the same seed; usage errors exit 2,
runtime errors exit 1 with the status string.
"""
import json
import os
import subprocess
import sys

try:
    from tokenizers import Tokenizer
except ImportError as e:
    sys.exit(f"test_cli.py: missing Python package ({e}); run tools/deps.sh")

passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what}", file=sys.stderr)


def run(args, expect_rc=0):
    p = subprocess.run([BIN, "generate"] + args, capture_output=True, timeout=120)
    check(p.returncode == expect_rc, f"{args}: exit {p.returncode}, expected {expect_rc}; stderr: {p.stderr[-800:]!r}")
    return p


def gen_json(extra):
    p = run(["-m", TARGET, "-p", PROMPT, "--json"] + extra)
    try:
        return json.loads(p.stdout)
    except ValueError:
        check(False, f"not JSON: {p.stdout[:300]!r}")
        return None


BIN, PAIR = sys.argv[1], sys.argv[2]
TARGET, DRAFT = os.path.join(PAIR, "target"), os.path.join(PAIR, "draft")
PROMPT = "And God said"
tok = Tokenizer.from_file(os.path.join(TARGET, "tokenizer.json"))
want_prompt = tok.encode(PROMPT).ids

# speculative, rejection sampling
j = gen_json(["-md", DRAFT, "-n", "24", "--temp", "0.9", "--seed", "7", "--draft-max", "3", "--ignore-eos",
              "--backend", "cpu"])
if j:
    for key in ("text", "tokens", "prompt_tokens", "stats", "params"):
        check(key in j, f"JSON lacks '{key}'")
    s, p = j["stats"], j["params"]
    for key in ("n_prompt", "n_generated", "n_rounds", "n_drafted", "n_accepted", "acceptance_rate",
                "tokens_per_round", "t_prefill_s", "t_draft_s", "t_target_s", "t_verify_s", "t_total_s",
                "tokens_per_second", "final_n_draft", "stop_reason", "backend"):
        check(key in s, f"stats lacks '{key}'")
    check(j["prompt_tokens"] == want_prompt, f"prompt ids {j['prompt_tokens']} != tokenizers {want_prompt}")
    check(len(j["tokens"]) == 24 and s["n_generated"] == 24, f"generated {len(j['tokens'])}")
    check(all(0 <= t < tok.get_vocab_size() for t in j["tokens"]), "token ids out of range")
    check(tok.decode(j["tokens"], skip_special_tokens=True) == j["text"], "text != tokenizers decode of the ids")
    check(s["n_prompt"] == len(want_prompt), "n_prompt")
    check(s["stop_reason"] == "n_predict", f"stop_reason {s['stop_reason']}")
    check(s["backend"] == "cpu", f"backend {s['backend']}")
    check(0 <= s["n_accepted"] <= s["n_drafted"] <= 3 * s["n_rounds"], "drafted/accepted/rounds")
    check(s["n_accepted"] + s["n_rounds"] == 24, "every round emits accepted + 1 tokens")
    check(abs(s["tokens_per_round"] - 24 / s["n_rounds"]) < 1e-9, "tokens_per_round")
    check(s["t_total_s"] >= s["t_prefill_s"] >= 0 and s["tokens_per_second"] > 0, "timings")
    check(p["n_predict"] == 24 and p["seed"] == 7 and p["n_draft"] == 3 and p["verify"] == "rejection" and
          abs(p["temperature"] - 0.9) < 1e-6 and p["ignore_eos"] is True and p["draft_model"] == DRAFT,
          f"params echoed wrong: {p}")
    # same seed -> same output
    j2 = gen_json(["-md", DRAFT, "-n", "24", "--temp", "0.9", "--seed", "7", "--draft-max", "3", "--ignore-eos"])
    check(j2 is not None and j2["tokens"] == j["tokens"], "same seed, different tokens")

    # streaming mode prints the same text, statistics on stderr
    r = run(["-m", TARGET, "-md", DRAFT, "-p", PROMPT, "-n", "24", "--temp", "0.9", "--seed", "7",
             "--draft-max", "3", "--ignore-eos"])
    check(r.stdout.decode("utf-8", "replace").rstrip("\n") == j["text"], "streamed text != JSON text")
    err = r.stderr.decode("utf-8", "replace")
    for word in ("acceptance rate", "tokens per target pass", "tokens/s", "backend cpu", "drafted", "seed 7"):
        check(word in err, f"statistics on stderr lack '{word}': {err!r}")

# greedy speculative == greedy plain; match == plain with the same seed; adaptive
g_plain = gen_json(["-n", "30", "--temp", "0", "--ignore-eos"])
g_spec = gen_json(["-md", DRAFT, "-n", "30", "--temp", "0", "--draft-max", "5", "--ignore-eos"])
g_adapt = gen_json(["-md", DRAFT, "-n", "30", "--temp", "0", "--adaptive", "--ignore-eos"])
if g_plain and g_spec and g_adapt:
    check(g_plain["tokens"] == g_spec["tokens"] == g_adapt["tokens"], "greedy speculative != greedy plain")
    check(g_spec["params"]["verify"] == "greedy" and g_plain["stats"]["n_drafted"] == 0, "greedy params")
    check(1 <= g_adapt["stats"]["final_n_draft"] <= 16 and g_adapt["params"]["adaptive_draft"] is True, "adaptive")
for seed in ("1", "2"):
    m_plain = gen_json(["-n", "30", "--temp", "1.0", "--top-k", "0", "--top-p", "1", "--min-p", "0", "--seed", seed,
                        "--verify", "match", "--ignore-eos"])
    m_spec = gen_json(["-md", DRAFT, "-n", "30", "--temp", "1.0", "--top-k", "0", "--top-p", "1", "--min-p", "0",
                       "--seed", seed, "--verify", "match", "--draft-max", "6", "--ignore-eos"])
    if m_plain and m_spec:
        check(m_plain["tokens"] == m_spec["tokens"], f"match speculative != plain (seed {seed})")

# stop string taken from a generated text
if g_plain and len(g_plain["text"]) > 10:
    stop = g_plain["text"][5:8]
    js = gen_json(["-n", "30", "--temp", "0", "--ignore-eos", "--stop", stop])
    if js:
        check(js["stats"]["stop_reason"] == "stop_string" and stop in js["text"] and
              len(js["tokens"]) <= len(g_plain["tokens"]), f"stop string {stop!r}: {js['stats']['stop_reason']}")
        check(js["params"]["stop"] == [stop], "stop strings echoed")

# errors
r = run(["-m", TARGET], expect_rc=2)                                        # no prompt
r = run(["-m", TARGET, "-p", "x", "--temp", "abc"], expect_rc=2)            # not a number
r = run(["-m", TARGET, "-p", "x", "--verify", "maybe"], expect_rc=2)
r = run(["-m", TARGET, "-p", "x", "--bogus"], expect_rc=2)
r = run(["-m", os.path.join(PAIR, "missing"), "-p", "x"], expect_rc=1)
check(b"SPECDEC_ERR_IO" in r.stderr, f"missing model: {r.stderr!r}")
r = run(["-m", TARGET, "-md", os.path.join(PAIR, "draft_badvocab"), "-p", "x"], expect_rc=1)
check(b"SPECDEC_ERR_MODEL_MISMATCH" in r.stderr, f"mismatched draft: {r.stderr!r}")
# values the library refuses are usage errors found before anything loads (the missing
# model directory would be a runtime error, exit 1, if it were reached)
missing = os.path.join(PAIR, "missing")
r = run(["-m", missing, "-p", "x", "--top-p", "0"], expect_rc=2)
check(b"top_p" in r.stderr, f"bad top_p: {r.stderr!r}")
r = run(["-m", missing, "-md", DRAFT, "-p", "x", "--draft-max", "17"], expect_rc=2)
check(b"n_draft" in r.stderr, f"bad γ: {r.stderr!r}")
r = run(["-m", missing, "-p", "x", "-n", "0"], expect_rc=2)
r = run(["-m", TARGET, "-p", PROMPT * 40, "--ctx", "16"], expect_rc=1)
check(b"SPECDEC_ERR_CONTEXT_FULL" in r.stderr, f"prompt longer than the context: {r.stderr!r}")
r = run(["--help"], expect_rc=0)
check(b"--draft-max" in r.stdout, "help text")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
