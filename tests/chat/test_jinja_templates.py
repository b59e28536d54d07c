#!/usr/bin/env python3
"""specdec's Jinja interpreter (tokenizer/sd_jinja*) against jinja2 exactly as transformers renders
chat templates (transformers.utils.chat_template_utils: its sandboxed environment with
trim_blocks/lstrip_blocks, raise_exception, strftime_now, tojson, namespace; the expectations are
computed here, at test time, by transformers itself).

  1. Every published template of templates/ (manifest.json: the model, where the text was copied
     from, its special tokens) over the conversations of chat_conversations.py with
     add_generation_prompt on and off, and over RICH_CONVERSATIONS (tool calls, tool results, content
     parts, reasoning) with and without a tools list; a few renders pass enable_thinking=False.
  2. The snippets of jinja_snippets.py (one language feature each) over SNIPPET_VARS; the
     constructs specdec refuses at load, which must be refused with the construct named; and what
     it refuses at run time (UNSUPPORTED, named) where transformers renders.
  3. The built-in templates of the forced family names equal their published files.
  4. With --specdec: `specdec tokenize -m DIR --chat FILE.json [--text]` on a model directory
     holding the bundled tokenizer.json and a tokenizer_config.json with a published template
     (the public C API end to end: load, parse, render, tokenize): the text equals transformers',
     the ids equal the `tokenizers` library's encoding of it without special tokens, and a
     template that raises exits 1 with its message.
A render agrees when the text is byte-identical, or when both raise: raise_exception's message must
then be specdec's message verbatim (after "chat template: "), other jinja2 errors must be
INVALID_ARGUMENT. strftime_now reads one fixed time in both (TZ=UTC). Exit 77 when transformers or
jinja2 is not installed (tests/requirements.txt)."""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chat_conversations import CONVERSATIONS, RICH_CONVERSATIONS, TOOLS  # noqa: E402
from chat_driver_util import outcome, run_driver  # noqa: E402
from jinja_snippets import REFUSED, RUNTIME_UNSUPPORTED, SNIPPET_VARS, SNIPPETS  # noqa: E402

NOW = 1751706303  # 2025-07-05 09:05:03 UTC: a one-digit day and hour for %-d / %e / %I
INVALID_ARGUMENT, UNSUPPORTED = 1, 5


def setup_transformers():
    os.environ["TZ"] = "UTC"
    time.tzset()
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import jinja2  # noqa: F401
    import transformers.utils.chat_template_utils as ctu
    from datetime import datetime

    class FixedClock:  # strftime_now calls datetime.now() through the module's global
        @staticmethod
        def now():
            return datetime.fromtimestamp(NOW)

    ctu.datetime = FixedClock
    return ctu


def template_messages(ctu, msgs):
    """The messages as transformers hands them to the template (plain dicts, reasoning aliased)."""
    msgs = copy.deepcopy(msgs)
    if hasattr(ctu, "_plain_template_data"):
        msgs = ctu._plain_template_data(msgs)
    if hasattr(ctu, "_alias_reasoning_fields"):
        msgs = ctu._alias_reasoning_fields(msgs)
    return msgs


def agrees(want, got):
    kind, val = want
    if kind == "ok":
        return got["status"] == 0 and got.get("text") == val
    if kind == "raise":
        return got["status"] == INVALID_ARGUMENT and got["error"] == "chat template: " + val
    return got["status"] == INVALID_ARGUMENT


def render_cases(ctu, text, special):
    """[(label, vars for the driver, transformers' outcome)] for one template."""
    cases = []

    def add(label, msgs, agp, tools=None, extra=None):
        kw = dict(special)
        kw.update(extra or {})
        want = outcome(lambda: ctu.render_jinja_template(conversations=[copy.deepcopy(msgs)], tools=tools,
                                                         chat_template=text, add_generation_prompt=agp, **kw)[0][0])
        v = {"messages": template_messages(ctu, msgs), "add_generation_prompt": agp, "tools": tools,
             "documents": None}
        v.update(kw)
        cases.append((label, v, want))

    for name, msgs in CONVERSATIONS:
        for agp in (True, False):
            add(f"{name} agp={int(agp)}", [{"role": r, "content": c} for r, c in msgs], agp)
    for name, msgs in RICH_CONVERSATIONS:
        for tools in (None, TOOLS):
            for agp in (True, False):
                add(f"{name} agp={int(agp)} tools={int(tools is not None)}", msgs, agp, tools)
        add(f"{name} enable_thinking=False", msgs, True, None, {"enable_thinking": False})
    return cases


CLI_TEMPLATES = ["Qwen__Qwen2.5-7B-Instruct.jinja", "mistralai__Mistral-Large-Instruct-2411.jinja",
                 "google__gemma-3-x-it.jinja"]


def check_cli(ctu, specdec, templates, manifest, fail):
    """specdec tokenize --chat on model directories written here; returns the number of runs."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tokjson = os.path.join(root, "models", "kjv-target", "tokenizer.json")
    try:
        from tokenizers import Tokenizer
        raw = Tokenizer.from_file(tokjson)
    except ImportError:
        raw = None
    runs = 0
    convs = [(name, msgs, agp) for name, msgs in CONVERSATIONS if name in ("multi_turn", "unicode", "system_middle")
             for agp in ((True, False) if name == "multi_turn" else (True,))]
    with tempfile.TemporaryDirectory() as tmp:
        for fname in CLI_TEMPLATES:
            m = next(x for x in manifest if x["file"] == fname)
            with open(os.path.join(templates, fname), encoding="utf-8", newline="") as f:
                text = f.read()
            mdir = os.path.join(tmp, fname)
            os.makedirs(mdir)
            os.symlink(tokjson, os.path.join(mdir, "tokenizer.json"))
            with open(os.path.join(mdir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(dict(m["special_tokens"], chat_template=text), f, ensure_ascii=False)
            for name, msgs, agp in convs:
                conv = [{"role": r, "content": c} for r, c in msgs]
                want = outcome(lambda: ctu.render_jinja_template(conversations=[conv], chat_template=text,
                                                                 add_generation_prompt=agp,
                                                                 **m["special_tokens"])[0][0])
                cfile = os.path.join(tmp, "conv.json")
                with open(cfile, "w", encoding="utf-8") as f:
                    json.dump({"messages": conv, "add_generation_prompt": agp}, f, ensure_ascii=False)
                outs = [subprocess.run([specdec, "tokenize", "-m", mdir, "--chat", cfile] + extra, capture_output=True,
                                       timeout=60) for extra in (["--text"], [])]
                runs += 2
                what = f"specdec tokenize --chat: {fname} {name} agp={int(agp)}"
                if want[0] == "ok":
                    got = outs[0].stdout.decode("utf-8")
                    if outs[0].returncode != 0 or got != want[1]:
                        fail(f"{what}: --text {outs[0].returncode} {got!r:.300} {outs[0].stderr!r:.200}\n"
                             f"    transformers {want[1]!r:.300}")
                    ids = outs[1].stdout.decode().split()
                    if raw is not None and [int(i) for i in ids] != raw.encode(want[1], add_special_tokens=False).ids:
                        fail(f"{what}: ids {ids[:20]} differ from tokenizers' encoding of the text")
                elif not all(o.returncode == 1 and (want[0] != "raise" or want[1].encode() in o.stderr) for o in outs):
                    fail(f"{what}: transformers raised {want!r}; specdec {[o.returncode for o in outs]} {outs[0].stderr!r}")
    return runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--templates", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates"))
    ap.add_argument("--specdec", help="the specdec program: also check `specdec tokenize --chat`")
    args = ap.parse_args()
    try:
        ctu = setup_transformers()
    except ImportError as e:
        print(f"skipped: transformers/jinja2 not installed ({e})")
        return 77
    t0 = time.time()
    manifest = json.load(open(os.path.join(args.templates, "manifest.json"), encoding="utf-8"))
    req = {"now": NOW, "templates": [], "builtins": [m["builtin"] for m in manifest if "builtin" in m]}
    plan = []  # (kind, label, [(case label, want)], extra)
    for m in manifest:
        with open(os.path.join(args.templates, m["file"]), encoding="utf-8", newline="") as f:
            text = f.read()
        cases = [] if "refused" in m else render_cases(ctu, text, m["special_tokens"])
        req["templates"].append({"template": text, "renders": [{"vars": v} for _, v, _ in cases]})
        plan.append(("template", m, [(lbl, w) for lbl, _, w in cases], text))
    for group, snippets in SNIPPETS:
        for s in snippets:
            want = outcome(lambda: ctu._compile_jinja_template(s).render(**copy.deepcopy(SNIPPET_VARS)))
            req["templates"].append({"template": s, "renders": [{"vars": SNIPPET_VARS}]})
            plan.append(("snippet", group, [(s, want)], None))
    for s, construct in REFUSED:
        req["templates"].append({"template": s, "renders": []})
        plan.append(("refused", construct, [], s))
    for s, what in RUNTIME_UNSUPPORTED:
        want = outcome(lambda: ctu._compile_jinja_template(s).render(**copy.deepcopy(SNIPPET_VARS)))
        req["templates"].append({"template": s, "renders": [{"vars": SNIPPET_VARS}]})
        plan.append(("unsupported", what, [(s, want)], s))
    t_py = time.time() - t0
    t1 = time.time()
    res = run_driver(args.driver, req)
    t_c = time.time() - t1

    failed, renders, families = 0, 0, Counter()

    def fail(msg):
        nonlocal failed
        failed += 1
        if failed <= 40:
            print("FAIL", msg)

    for (kind, what, cases, text), r in zip(plan, res["templates"]):
        if kind == "refused":
            if not (r["parse_status"] == UNSUPPORTED and what in r["parse_error"]):
                fail(f"{text!r} should be refused naming {what!r}: {r['parse_status']} {r['parse_error']!r}")
            continue
        if kind == "unsupported":
            got = r["renders"][0] if r["renders"] else {"status": r["parse_status"], "error": r["parse_error"]}
            if cases[0][1][0] != "ok" or got["status"] != UNSUPPORTED or what not in got["error"]:
                fail(f"{text!r}: transformers should render it ({cases[0][1][0]}) and specdec refuse it naming {what!r}: "
                     f"{got['status']} {got['error']!r}")
            continue
        label = what["file"] if kind == "template" else f"[{what}] {cases[0][0]!r:.100}"
        if kind == "template" and "refused" in what:
            if not (r["parse_status"] == UNSUPPORTED and what["refused"] in r["parse_error"]):
                fail(f"{label}: expected a refusal naming {what['refused']!r}, got {r['parse_error']!r}")
            else:
                print(f"  {label}: refused as expected: {r['parse_error']}")
            continue
        if r["parse_status"] != 0:
            fail(f"{label}: refused at load: {r['parse_error']}")
            continue
        bad = 0
        for (clabel, want), got in zip(cases, r["renders"]):
            renders += 1
            if not agrees(want, got):
                bad += 1
                if bad <= 3:
                    fail(f"{label} {clabel if kind == 'template' else ''}\n    transformers {want[0]}: {want[1]!r:.600}\n"
                         f"    specdec      {got['status']}: {got.get('text', got['error'])!r:.600}")
        if kind == "template" and not bad:
            families[what["family"]] += 1
    for m in manifest:
        if "builtin" in m:
            with open(os.path.join(args.templates, m["file"]), encoding="utf-8", newline="") as f:
                if res["builtins"].get(m["builtin"]) != f.read():
                    fail(f"built-in template {m['builtin']!r} differs from {m['file']}")
    cli_runs = check_cli(ctu, args.specdec, args.templates, manifest, fail) if args.specdec else 0
    print(f"{len(manifest)} templates of {len({m['family'] for m in manifest})} families, "
          f"{sum(len(s) for _, s in SNIPPETS)} snippets, {len(REFUSED)} refusals at load, {len(RUNTIME_UNSUPPORTED)} at run "
          f"time; {renders} renders compared, {cli_runs} runs of specdec tokenize --chat "
          f"(transformers {t_py:.1f} s, specdec {t_c:.2f} s)")
    print("families that agree on every render:", ", ".join(f"{k} ({v})" for k, v in sorted(families.items())))
    print(f"{failed} failures")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
