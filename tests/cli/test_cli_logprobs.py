#!/usr/bin/env python3
"""`specdec generate --logprobs N` (docs/LOGPROBS.md) on the bundled pair, CPU backend.

    test_cli_logprobs.py SPECDEC_BIN SOURCE_DIR

Checks:
- --json gets a "logprobs" array, one record per emitted token (as many as "tokens", the
  same ids), each {"token", "logprob", "rank", "top": [[id, logprob], ...]} with N top
  entries, most likely first (ties: the lower id first), logprob <= 0, rank >= 1; a token
  found in its top list has that entry's value and rank = its place among strictly larger
  values; rank 1 means its value equals the top value;
- independence of the drafter: greedy with the draft model (chain and tree), n-gram and
  plain decoding give the same tokens and the same records;
- the text output is unchanged by --logprobs (greedy, same seed), and without --logprobs
  --json has no "logprobs" key;
- --logprobs 0 gives empty top lists; a value outside 0..20 or not a number is a usage
  error (exit 2) naming the option; batch refuses --logprobs.
- --prompt-logprobs N: a "prompt_logprobs" array, null then one record per prompt token but the
  first (n_prompt - 1 records), each for that prompt token (ids = `specdec tokenize`'s) with N
  top entries and the invariants above; the same records for plain decoding (--draft-max 0),
  the draft model's chain and n-gram, with or without --logprobs; the generated tokens and text
  unchanged; bad values refused (exit 2, naming the option); batch refuses it.
"""
import json
import os
import subprocess
import sys

BIN, SRC = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "tests", "common"))
from sd_checks import check, done  # noqa: E402

MODELS = os.path.join(SRC, "models")
TARGET = os.path.join(MODELS, "kjv-target")
DRAFT = os.path.join(MODELS, "kjv-draft")
BASE = [BIN, "generate", "-m", TARGET, "-p", "And God said", "-n", "24", "--temp", "0", "--seed", "3",
        "--ignore-eos", "--backend", "cpu"]


def run(extra, json_out=True):
    r = subprocess.run(BASE + extra + (["--json"] if json_out else []), capture_output=True, text=True, timeout=120)
    return r, (json.loads(r.stdout) if json_out and r.returncode == 0 else None)


def check_records(name, d, n_top):
    lps = d.get("logprobs")
    if not check(isinstance(lps, list) and len(lps) == len(d["tokens"]), f"{name}: one record per token"):
        return
    for i, (rec, tok) in enumerate(zip(lps, d["tokens"])):
        top = rec["top"]
        ok = rec["token"] == tok and rec["logprob"] <= 0 and rec["rank"] >= 1 and len(top) == n_top
        ok = ok and all(top[k][1] > top[k + 1][1] or (top[k][1] == top[k + 1][1] and top[k][0] < top[k + 1][0])
                        for k in range(len(top) - 1))
        ids = [t[0] for t in top]
        if tok in ids:
            k = ids.index(tok)
            ok = ok and top[k][1] == rec["logprob"] and rec["rank"] == 1 + sum(1 for t in top if t[1] > rec["logprob"])
        elif top:
            ok = ok and rec["rank"] > n_top and rec["logprob"] <= top[-1][1]
        if top and rec["rank"] == 1:
            ok = ok and rec["logprob"] == top[0][1]
        check(ok, f"{name}: record {i} {rec} for token {tok}")


_, plain = run(["--drafter", "none", "--logprobs", "5"])
check(plain is not None, "plain --logprobs 5 runs")
if plain:
    check_records("plain", plain, 5)
    for name, extra in [("model chain", ["-md", DRAFT, "--draft-max", "4"]),
                        ("model tree", ["-md", DRAFT, "--tree", "2,2,1"]),
                        ("ngram", ["--drafter", "ngram", "--ngram-cost", "off"])]:
        _, d = run(extra + ["--logprobs", "5"])
        if check(d is not None, f"{name} runs"):
            check(d["stats"]["n_drafted"] > 0, f"{name}: drafted")
            check(d["tokens"] == plain["tokens"], f"{name}: plain decoding's tokens")
            check(d["logprobs"] == plain["logprobs"], f"{name}: plain decoding's records")
            check_records(name, d, 5)

_, zero = run(["-md", DRAFT, "--logprobs", "0"])
check(zero is not None and all(r["top"] == [] for r in zero["logprobs"]) and len(zero["logprobs"]) == 24,
      "--logprobs 0: records with empty top lists")
_, none = run(["-md", DRAFT])
check(none is not None and "logprobs" not in none, "no --logprobs: no \"logprobs\" key")

a, _ = run(["-md", DRAFT], json_out=False)
b, _ = run(["-md", DRAFT, "--logprobs", "3"], json_out=False)
check(a.returncode == 0 and a.stdout == b.stdout and a.stdout.strip() != "", "text output unchanged by --logprobs")

for opt in ["--logprobs", "--prompt-logprobs"]:
    for bad in ["21", "-1", "x"]:
        r, _ = run([opt, bad])
        check(r.returncode == 2 and opt in r.stderr, f"{opt} {bad}: usage error naming it ({r.stderr[:80]!r})")
    r = subprocess.run([BIN, "batch", "-f", os.devnull, opt, "2"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and f"{opt} is not a batch option" in r.stderr, f"batch refuses {opt}")

# --prompt-logprobs: a prompt long enough for several records and for n-gram matches
PROMPT = "In the beginning God created the heaven and the earth. And the earth was without form"
tk = subprocess.run([BIN, "tokenize", "-m", TARGET, "-p", PROMPT], capture_output=True, text=True, timeout=60)
prompt_ids = [int(x) for x in tk.stdout.split()] if tk.returncode == 0 else []
check(len(prompt_ids) > 10, f"tokenize gives the prompt's ids ({tk.stdout[:60]!r})")
pbase = BASE[:BASE.index("-p") + 1] + [PROMPT] + BASE[BASE.index("-p") + 2:]


def prun(extra, json_out=True):
    r = subprocess.run(pbase + extra + (["--json"] if json_out else []), capture_output=True, text=True, timeout=120)
    return r, (json.loads(r.stdout) if json_out and r.returncode == 0 else None)


_, pref = prun(["-md", DRAFT, "--draft-max", "0"])
_, p0 = prun(["-md", DRAFT, "--draft-max", "0", "--prompt-logprobs", "4"])
if check(p0 is not None and pref is not None, "--draft-max 0 --prompt-logprobs 4 runs"):
    plp = p0.get("prompt_logprobs")
    check(p0["prompt_tokens"] == prompt_ids, "prompt ids are tokenize's")
    check(isinstance(plp, list) and len(plp) == len(prompt_ids) and plp[0] is None,
          f"prompt_logprobs: null + n_prompt - 1 records ({len(plp or [])} for {len(prompt_ids)} ids)")
    check("logprobs" not in p0, "no --logprobs: no \"logprobs\" key")
    check(p0["tokens"] == pref["tokens"] and p0["text"] == pref["text"], "generated tokens and text unchanged")
    if plp and plp[0] is None:
        check_records("prompt", {"logprobs": plp[1:], "tokens": prompt_ids[1:]}, 4)
    for name, extra in [("model chain", ["-md", DRAFT, "--draft-max", "4"]),
                        ("ngram", ["--drafter", "ngram", "--ngram-cost", "off"]),
                        ("chain + logprobs", ["-md", DRAFT, "--draft-max", "3", "--logprobs", "2"])]:
        _, d = prun(extra + ["--prompt-logprobs", "4"])
        if check(d is not None, f"prompt_logprobs, {name} runs"):
            check(d["stats"]["n_drafted"] > 0, f"prompt_logprobs, {name}: drafted")
            check(d["prompt_logprobs"] == plp, f"prompt_logprobs, {name}: --draft-max 0's records")
            check(d["tokens"] == p0["tokens"], f"prompt_logprobs, {name}: the same tokens")
            if "--logprobs" in extra:
                check(len(d["logprobs"]) == len(d["tokens"]), f"{name}: generated records too")
    _, pz = prun(["-md", DRAFT, "--prompt-logprobs", "0"])
    check(pz is not None and [r and r["top"] for r in pz["prompt_logprobs"]] == [None] + [[]] * (len(prompt_ids) - 1),
          "--prompt-logprobs 0: records with empty top lists")
    a, _ = prun(["-md", DRAFT], json_out=False)
    b, _ = prun(["-md", DRAFT, "--prompt-logprobs", "3"], json_out=False)
    check(a.returncode == 0 and a.stdout == b.stdout, "text output unchanged by --prompt-logprobs")
    # -n 0 scores the prompt alone (the library's n_predict 0); without --prompt-logprobs, or with
    # --baseline, it is refused
    n_at = pbase.index("-n") + 1
    zbase = pbase[:n_at] + ["0"] + pbase[n_at + 1:]
    r = subprocess.run(zbase + ["-md", DRAFT, "--prompt-logprobs", "4", "--json"], capture_output=True, text=True,
                       timeout=120)
    z = json.loads(r.stdout) if r.returncode == 0 else None
    check(z is not None and z["tokens"] == [] and z["prompt_logprobs"] == plp and z["stats"]["n_rounds"] == 0,
          f"-n 0 --prompt-logprobs 4: no token, --draft-max 0's records ({r.stderr[-200:]!r})")
    for extra, why in ((["--json"], "n_predict 0"), (["--prompt-logprobs", "1", "--baseline"], "--baseline")):
        r = subprocess.run(zbase + extra, capture_output=True, text=True, timeout=120)
        check(r.returncode == 2 and why in r.stderr, f"-n 0 {' '.join(extra)} refused naming {why}: {r.stderr[-160:]!r}")
sys.exit(done())
