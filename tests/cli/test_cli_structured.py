#!/usr/bin/env python3
"""Structured output on the command line (`specdec generate` / `specdec batch`: --regex PATTERN,
--json-schema FILE, --json-object, --choice JSON_ARRAY, --grammar FILE (GBNF); docs/STRUCTURED.md),
bundled pair, CPU backend.

Checks:
  - every output satisfies its constraint, with the draft model, plain decoding (--drafter none)
    and prompt lookup (--drafter ngram), greedy and at temperature 1 (seeds 1, 2): --regex
    (Python re.fullmatch, stop_reason eos: each language is finite), --choice (one of the
    strings), --json-schema (a bounded schema, each field checked), --json-object (json.loads is
    a dict when it ends at EOS; when cut at -n, a prefix of a JSON object: the server test's check);
    --grammar (a GBNF file whose language is finite: an equivalent Python regex, stop_reason eos;
    three drafter x sampling pairs only, for CI time);
  - --json reports params.structured_output (the kind; null without one);
  - batch with --regex: every line satisfies it and equals generate --seed S+i on that line alone;
  - errors: two constraints exit 2 naming both flags (before any model loads); a regex or schema the
    library refuses exits 2 with the flag and its message; an unreadable schema file exits 1 naming
    it (and a grammar file likewise); --help lists the five flags.

Usage: test_cli_structured.py SPECDEC_BIN MODELS_DIR TMPDIR"""
import json
import os
import re
import subprocess
import sys

specdec, models, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(tmp, exist_ok=True)
TARGET, DRAFT = os.path.join(models, "kjv-target"), os.path.join(models, "kjv-draft")
COMMON = ["-m", TARGET, "--backend", "cpu"]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
from sd_checks import check, done  # noqa: E402

PROMPT = "And God said"
MODES = [["-md", DRAFT], ["--drafter", "none"], ["--drafter", "ngram"]]
SAMPLING = [["--temp", "0"], ["--temp", "1", "--seed", "1"], ["--temp", "1", "--seed", "2"]]
REGEXES = [r"(yes|no)", r"[0-9]{3}-[a-z]{2,4}", "\u00ab[a-z]{1,6}\u00bb \u2627"]
CHOICES = ["Genesis", "Exodus", "\u00c9sa\u00efe \u2627"]
SCHEMA = {"type": "object",
          "properties": {"book": {"enum": ["Genesis", "Exodus"]}, "holy": {"type": "boolean"},
                         "chapter": {"type": "integer", "minimum": 1, "maximum": 150},
                         "word": {"type": "string", "maxLength": 6},
                         "tags": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9},
                                  "maxItems": 2}},
          "required": ["book", "holy", "chapter", "word", "tags"]}


def json_object_prefix(text):
    """The server test's pushdown check (tests/server/test_structured.py), imported lazily: that
    module reads its own argv."""
    saved = sys.argv
    sys.argv = [saved[0], specdec, models]
    try:
        import test_structured
    finally:
        sys.argv = saved
    return test_structured.json_object_prefix(text)


def run(args):
    return subprocess.run([specdec] + args, capture_output=True, text=True, timeout=600)


def gen(*extra, n=24, prompt=PROMPT):  # no draft model unless extra gives -md
    p = run(["generate", "-p", prompt, "-n", str(n), "--json"] + COMMON + list(extra))
    check(p.returncode == 0, f"generate {extra}: exit {p.returncode}: {p.stderr[-300:]}")
    return json.loads(p.stdout) if p.returncode == 0 else {"tokens": [], "text": "", "stats": {}, "params": {}}


def every_mode(flags, satisfied, n=24, need_eos=True):
    for mode in MODES:
        for samp in SAMPLING:
            g = gen(*flags, *mode, *samp, n=n)
            eos = g["stats"].get("stop_reason") == "eos"
            check((eos or not need_eos) and satisfied(g["text"], eos),
                  f"{flags} {mode} {samp}: {g['text']!r} ({g['stats'].get('stop_reason')})")


for rx in REGEXES:
    every_mode(["--regex", rx], lambda t, eos, rx=rx: re.fullmatch(rx, t) is not None)
every_mode(["--choice", json.dumps(CHOICES)], lambda t, eos: t in CHOICES)

schema_path = os.path.join(tmp, "schema.json")
with open(schema_path, "w") as f:
    json.dump(SCHEMA, f, indent=2)


def schema_ok(text, eos):
    try:
        v = json.loads(text)
    except ValueError:
        return False
    return (isinstance(v, dict) and list(v) == ["book", "holy", "chapter", "word", "tags"] and
            v["book"] in ("Genesis", "Exodus") and isinstance(v["holy"], bool) and type(v["chapter"]) is int and
            1 <= v["chapter"] <= 150 and isinstance(v["word"], str) and len(v["word"]) <= 6 and
            isinstance(v["tags"], list) and len(v["tags"]) <= 2 and
            all(type(x) is int and 0 <= x <= 9 for x in v["tags"]))


every_mode(["--json-schema", schema_path], schema_ok, n=160)  # the longest instance is under 110 bytes


def object_ok(text, eos):
    if not eos:
        return json_object_prefix(text)
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


every_mode(["--json-object"], object_ok, n=32, need_eos=False)

GBNF = 'root ::= answer " " num  # finite\nanswer ::= "yes" | "no"\nnum ::= [0-9]{1,3}\n'
GBNF_RE = r"(yes|no) [0-9]{1,3}"
gbnf_path = os.path.join(tmp, "answer.gbnf")
with open(gbnf_path, "w") as f:
    f.write(GBNF)
for mode, samp in ((MODES[0], SAMPLING[1]), (MODES[1], SAMPLING[2]), (MODES[2], SAMPLING[0])):
    g = gen("--grammar", gbnf_path, *mode, *samp)
    check(g["stats"].get("stop_reason") == "eos" and re.fullmatch(GBNF_RE, g["text"]) is not None,
          f"--grammar {mode} {samp}: {g['text']!r} ({g['stats'].get('stop_reason')})")
check(gen("--grammar", gbnf_path, n=2)["params"].get("structured_output") == "gbnf", "--json params: gbnf")

check(gen("--regex", "(yes|no)")["params"].get("structured_output") == "regex" and
      gen("--json-object", n=2)["params"].get("structured_output") == "json_object" and
      "structured_output" in gen(n=2)["params"] and gen(n=2)["params"]["structured_output"] is None,
      "--json params.structured_output")

# batch: every line satisfies the constraint and equals generate --seed S+i alone
prompts = ["And God said", "In the beginning", "Blessed are they that"]
path = os.path.join(tmp, "prompts.txt")
with open(path, "w") as f:
    f.write("\n".join(prompts) + "\n")
rx = REGEXES[1]
b = run(["batch", "-f", path, "--json", "--no-progress", "--parallel", "3", "-n", "24", "--temp", "1", "--seed", "7",
         "--regex", rx, "-md", DRAFT] + COMMON)
lines = [json.loads(x) for x in b.stdout.splitlines() if x.strip()]
check(b.returncode == 0 and len(lines) == len(prompts) + 1, f"batch --regex: exit {b.returncode}: {b.stderr[-300:]}")
for i, p in enumerate(prompts):
    alone = gen("--regex", rx, "--temp", "1", "--seed", str(7 + i), "-md", DRAFT, prompt=p)
    line = lines[i] if i < len(lines) else {}
    check(re.fullmatch(rx, line.get("text", "")) is not None and line.get("tokens") == alone["tokens"],
          f"batch line {i}: {line.get('text')!r} matches and equals generate alone ({alone['text']!r})")

# errors
for a, b_ in (("--regex", "--choice"), ("--json-object", "--regex"), ("--json-schema", "--json-object"),
              ("--grammar", "--regex")):
    args = {"--regex": ["--regex", "a"], "--choice": ["--choice", '["a"]'], "--json-object": ["--json-object"],
            "--json-schema": ["--json-schema", schema_path], "--grammar": ["--grammar", gbnf_path]}
    for cmd in ("generate", "batch"):
        extra = ["-p", "x"] if cmd == "generate" else ["-f", path]
        p = run([cmd, "-m", "/nonexistent"] + extra + args[a] + args[b_])
        check(p.returncode == 2 and a in p.stderr and b_ in p.stderr and "both constrain" in p.stderr,
              f"{cmd} {a} {b_}: exit {p.returncode} (2, before loading): {p.stderr[:200]}")
bad_schema = os.path.join(tmp, "bad_schema.json")
with open(bad_schema, "w") as f:
    f.write('{"type": "object", "patternProperties": {"^a": {}}}')
bad_gbnf = os.path.join(tmp, "bad.gbnf")
with open(bad_gbnf, "w") as f:
    f.write('root ::= root "a" | "b"\n')
for flags, what in ((["--regex", "(a"], "regex"), (["--choice", "[1]"], "choice"), (["--choice", "nope"], "choice"),
                    (["--json-schema", bad_schema], "json schema"), (["--grammar", bad_gbnf], "gbnf")):
    p = run(["generate", "-p", "x", "-n", "4"] + COMMON + flags)
    check(p.returncode == 2 and f"specdec generate: {flags[0]}: " in p.stderr and len(p.stderr.strip()) > 30,
          f"{flags}: exit {p.returncode} (2) with the library's message: {p.stderr[:200]}")
missing = os.path.join(tmp, "no_such_schema.json")
p = run(["generate", "-p", "x", "-n", "4", "--json-schema", missing] + COMMON)
check(p.returncode == 1 and missing in p.stderr, f"an unreadable schema file: exit {p.returncode}: {p.stderr[:200]}")
missing = os.path.join(tmp, "no_such.gbnf")
p = run(["generate", "-p", "x", "-n", "4", "--grammar", missing] + COMMON)
check(p.returncode == 1 and missing in p.stderr, f"an unreadable grammar file: exit {p.returncode}: {p.stderr[:200]}")
h = run(["generate", "--help"]).stdout
check(all(f in h for f in ("--regex", "--json-schema", "--json-object", "--choice", "--grammar")),
      "--help lists the flags")
sys.exit(done())
