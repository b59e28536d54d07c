#!/usr/bin/env python3
"""specdec_chat_apply_json against vLLM's message handling + transformers' rendering.

For every published template of tests/chat/templates (written with its special tokens into a
tokenizer_config.json next to the bundled tokenizer.json), OpenAI-format conversations with tool
calls (arguments as JSON strings, as objects, invalid, empty), tool results, content null / parts,
reasoning, with and without tools and with chat_template_kwargs (enable_thinking=false, an
add_generation_prompt override, a custom variable), are rendered by chat_json_driver (the C API,
given the JSON text) and by transformers' render_jinja_template on the messages as vLLM hands them
to apply_chat_template (vllm_messages below restates vllm/entrypoints/chat_utils.py:
_parse_chat_message_content + _postprocess_messages, "string" content format), with vLLM's
keyword precedence (chat_template_kwargs update add_generation_prompt/tools/special tokens).
The text must be byte-identical; where transformers raises, specdec must fail with
INVALID_ARGUMENT (the template's own message for raise_exception). Also: refusals of bad JSON
shapes, kwargs specdec refuses, and the plain format. Exit 77 without jinja2/transformers.
With --specdec: `specdec tokenize -m DIR --chat FILE.json [--text]` on the tool round with tools,
with and without chat_template_kwargs, for every template: the text is transformers' and the ids
are the `tokenizers` library's encoding of it without special tokens (where it is installed).
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chat_conversations import RICH_CONVERSATIONS, TOOLS  # noqa: E402
from chat_driver_util import outcome, run_driver  # noqa: E402

INVALID_ARGUMENT, UNSUPPORTED = 1, 5

CALL_STR = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2}"}}
CALL_BAD = {"id": "call_2", "type": "function", "function": {"name": "search", "arguments": "not json"}}
CALL_EMPTY = {"id": "call_3", "type": "function", "function": {"name": "search", "arguments": ""}}
CALL_NONE = {"id": "call_4", "type": "function", "function": {"name": "search"}}

OPENAI_CONVERSATIONS = RICH_CONVERSATIONS + [
    ("openai_tool_round", [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Weather in Paris for 2 days?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL_STR]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 21}"},
        {"role": "user", "content": "And search jinja"}]),
    ("bad_and_empty_args", [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [CALL_BAD, CALL_EMPTY, CALL_NONE]},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "r1"}, {"type": "text", "text": "r2"}]},
        {"role": "tool", "tool_call_id": "call_3", "content": "r3"},
        {"role": "tool", "tool_call_id": "call_4", "content": "r4"}]),
    ("empty_tool_calls", [{"role": "user", "content": "hi", "extra_field": 1},
                          {"role": "assistant", "content": "hello", "tool_calls": []},
                          {"role": "user", "content": "again", "name": "bob"}]),
    ("reasoning_field", [{"role": "user", "content": "2+2?"},
                         {"role": "assistant", "content": "4", "reasoning": "2 and 2 make 4"},
                         {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": None},
                                                      "b"]}]),
]


def part_text(p):
    if isinstance(p, str):
        return p
    key = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal", "thinking": "thinking"}[p["type"]]
    return p.get(key)


def vllm_messages(msgs):
    """The conversation as vLLM passes it to apply_chat_template ("string" content format)."""
    out = []
    for m in msgs:
        role, c = m["role"], m.get("content")
        if c is None:
            text = ""
        elif isinstance(c, str):
            text = c
        else:
            text = "\n".join(t for t in (part_text(p) for p in c) if t is not None)
        r = {"role": role, "content": text}
        reasoning = m.get("reasoning")
        if reasoning is None:
            reasoning = m.get("reasoning_content")  # the older field name, accepted as vLLM's deprecation shim does
        if role == "assistant":
            if m.get("tool_calls") is not None:
                r["tool_calls"] = copy.deepcopy(list(m["tool_calls"]))
            if reasoning is not None:
                r["reasoning"] = reasoning
                r["reasoning_content"] = reasoning
        elif role == "tool" and "tool_call_id" in m:
            r["tool_call_id"] = m["tool_call_id"]
        if isinstance(m.get("name"), str):
            r["name"] = m["name"]
        out.append(r)
    for r in out:  # _postprocess_messages
        if r["role"] == "assistant" and isinstance(r.get("tool_calls"), list):
            if not r["tool_calls"]:
                del r["tool_calls"]
                continue
            for item in r["tool_calls"]:
                a = item["function"].get("arguments")
                if isinstance(a, str):
                    try:
                        item["function"]["arguments"] = json.loads(a)
                    except json.JSONDecodeError:
                        item["function"]["arguments"] = {}
                elif not isinstance(a, (dict, list)):
                    item["function"]["arguments"] = {}
    return out


KWARGS = [None, {"enable_thinking": False}, {"add_generation_prompt": False, "custom_flag": [1, "x"]}]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--templates", required=True)
    ap.add_argument("--tokenizer", required=True, help="a tokenizer.json to load the templates with")
    ap.add_argument("--specdec", help="the specdec program: also check `specdec tokenize --chat` with tools")
    ap.add_argument("--cli-every", type=int, default=1,
                    help="check the program on every N-th template only (the sanitizer builds: 8)")
    args = ap.parse_args()
    os.environ["TZ"] = "UTC"
    with tempfile.TemporaryDirectory() as tmp:  # specdec alone: refusals and the plain format
        refused = check_refusals(args.driver, args.tokenizer, tmp)
    if refused:
        return 1
    try:
        import time
        time.tzset()
        import transformers.utils.chat_template_utils as ctu
    except ImportError as e:
        print(f"refusals and plain format passed; skipped the comparison: {e}")
        return 77
    with open(os.path.join(args.templates, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    failed = compared = cli_runs = 0
    try:
        from tokenizers import Tokenizer
        raw = Tokenizer.from_file(args.tokenizer)
    except ImportError:
        raw = None
    with tempfile.TemporaryDirectory() as tmp:
        for mi, m in enumerate(manifest):
            if m.get("refused"):  # outside the interpreter's subset: test_jinja_templates checks the refusal
                continue
            with open(os.path.join(args.templates, m["file"]), encoding="utf-8", newline="") as f:
                text = f.read()
            mdir = os.path.join(tmp, m["file"])
            os.makedirs(mdir)
            os.symlink(os.path.abspath(args.tokenizer), os.path.join(mdir, "tokenizer.json"))
            with open(os.path.join(mdir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(dict(m["special_tokens"], chat_template=text), f, ensure_ascii=False)
            renders, wants, labels = [], [], []
            for name, msgs in OPENAI_CONVERSATIONS:
                for tools in (None, TOOLS):
                    for kw in KWARGS:
                        for agp in (True, False):
                            if kw is not None and not agp:
                                continue
                            conv = vllm_messages(msgs)
                            var = dict(m["special_tokens"], add_generation_prompt=agp, tools=copy.deepcopy(tools),
                                       documents=None)
                            var.update(kw or {})
                            wants.append(outcome(lambda: ctu.render_jinja_template(
                                conversations=[conv], chat_template=text, **var)[0][0]))
                            rq = {"messages": msgs, "agp": agp}
                            if tools is not None:
                                rq["tools"] = tools
                            if kw is not None:
                                rq["kwargs"] = kw
                            renders.append(rq)
                            labels.append(f"{m['file']} {name} tools={int(tools is not None)} kwargs={kw} agp={int(agp)}")
            got = run_driver(args.driver, {"dir": mdir, "name": None, "renders": renders})["results"]
            if args.specdec and mi % max(args.cli_every, 1) == 0:
                for rq, label, want in zip(renders, labels, wants):
                    if label.split()[1] == "openai_tool_round" and "tools" in rq and rq["agp"]:
                        cli_runs += 1
                        failed += check_cli(args.specdec, mdir, rq, want, label, raw, tmp)
            for label, want, g in zip(labels, wants, got):
                compared += 1
                kind, val = want
                ok = (g["status"] == 0 and g.get("text") == val if kind == "ok" else
                      g["status"] == INVALID_ARGUMENT and g["error"] == "chat template: " + val if kind == "raise" else
                      g["status"] == INVALID_ARGUMENT)
                if not ok:
                    failed += 1
                    if failed <= 15:
                        print(f"FAIL {label}\n    transformers {kind}: {val!r:.500}\n"
                              f"    specdec      {g['status']}: {g.get('text', g['error'])!r:.500}")
    print(f"{compared} renders compared with transformers over {len(manifest)} templates, {cli_runs} through "
          f"`specdec tokenize --chat`; {failed} failures")
    return 1 if failed else 0


def check_cli(specdec, mdir, rq, want, label, raw, tmp):
    """`specdec tokenize --chat` with tools (and kwargs) against transformers' render; 1 on failure."""
    conv = {"messages": rq["messages"], "tools": rq["tools"], "add_generation_prompt": rq["agp"]}
    if "kwargs" in rq:
        conv["chat_template_kwargs"] = rq["kwargs"]
    cfile = os.path.join(tmp, "conv.json")
    with open(cfile, "w", encoding="utf-8") as f:
        json.dump(conv, f, ensure_ascii=False)
    outs = [subprocess.run([specdec, "tokenize", "-m", mdir, "--chat", cfile] + extra, capture_output=True, timeout=60)
            for extra in (["--text"], [])]
    kind, val = want
    if kind != "ok":
        ok = all(o.returncode == 1 for o in outs)
    else:
        ok = outs[0].returncode == 0 and outs[0].stdout.decode("utf-8") == val and outs[1].returncode == 0
        if ok and raw is not None:
            ok = [int(i) for i in outs[1].stdout.split()] == raw.encode(val, add_special_tokens=False).ids
    if not ok:
        print(f"FAIL specdec tokenize --chat: {label}: exit {[o.returncode for o in outs]}, "
              f"{outs[0].stdout[:300]!r} {outs[0].stderr[:300]!r}\n    transformers {kind}: {val!r:.300}")
    return 0 if ok else 1


def check_refusals(driver, tokenizer, tmp):
    """Bad shapes and refused kwargs on the bundled tokenizer (plain) and on a template."""
    plain = os.path.join(tmp, "plain")
    os.makedirs(plain)
    os.symlink(os.path.abspath(tokenizer), os.path.join(plain, "tokenizer.json"))
    user = [{"role": "user", "content": "hi"}]
    cases = [  # (request, name, status, substring of the message)
        ({"raw": "[{\"role\": \"user\", \"content\": \"hi\"}"}, None, INVALID_ARGUMENT, "not JSON"),
        ({"raw": "{\"role\": \"user\"}"}, None, INVALID_ARGUMENT, "non-empty JSON list"),
        ({"messages": []}, None, INVALID_ARGUMENT, "non-empty JSON list"),
        ({"messages": [{"content": "x"}]}, None, INVALID_ARGUMENT, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 5}]}, None, INVALID_ARGUMENT, "messages[0].content"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, None,
         UNSUPPORTED, "image_url"),
        ({"messages": user + [{"role": "assistant", "tool_calls": {"a": 1}}]}, None, INVALID_ARGUMENT,
         "messages[1].tool_calls"),
        ({"messages": user + [{"role": "assistant", "tool_calls": [{"id": "x"}]}]}, "chatml", INVALID_ARGUMENT,
         "messages[1].tool_calls[0].function"),
        ({"messages": user, "tools": {"a": 1}}, None, INVALID_ARGUMENT, "tools"),
        ({"messages": user, "kwargs": [1]}, None, INVALID_ARGUMENT, "not a JSON object"),
        ({"messages": user, "kwargs": {"messages": []}}, "chatml", INVALID_ARGUMENT, "\"messages\""),
        ({"messages": user, "kwargs": {"chat_template": "x"}}, "chatml", INVALID_ARGUMENT, "chat_template"),
        ({"messages": user, "kwargs": {"continue_final_message": True}}, "chatml", UNSUPPORTED, "continue_final"),
        ({"messages": user, "kwargs": {f"k{i}": i for i in range(257)}}, "chatml", INVALID_ARGUMENT, "256"),
        ({"messages": user, "tools": TOOLS}, "nosuch", INVALID_ARGUMENT, "unknown name"),
    ]
    oks = [  # (request, name, text)
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, "b"]},
                       {"role": "assistant", "content": None}], "agp": True}, None, "User: a\nb\nAssistant: \nAssistant:"),
        ({"messages": user, "tools": None, "kwargs": {"add_generation_prompt": False}, "agp": True}, None, "User: hi\n"),
        # plain reads role and content only: tools and tool calls do not appear
        ({"messages": user + [{"role": "assistant", "content": None, "tool_calls": [CALL_STR]}], "tools": TOOLS,
          "agp": False}, None, "User: hi\nAssistant: \n"),
        ({"messages": user, "kwargs": {"enable_thinking": False}, "agp": True}, "chatml",
         "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"),
    ]
    reqs = [dict(r, agp=r.get("agp", True)) for r, _, _, _ in cases] + [r for r, _, _ in oks]
    names = [n for _, n, _, _ in cases] + [n for _, n, _ in oks]
    failed = 0
    for i, (rq, name) in enumerate(zip(reqs, names)):
        g = run_driver(driver, {"dir": plain, "name": name, "renders": [rq]})["results"][0]
        if i < len(cases):
            _, _, st, sub = cases[i]
            ok = g["status"] == st and sub in g["error"]
        else:
            st, sub = 0, oks[i - len(cases)][2]
            ok = g["status"] == 0 and g["text"] == sub
        if not ok:
            failed += 1
            print(f"FAIL refusal/plain case {i}: want {st} {sub!r}, got {g}")
    return failed


if __name__ == "__main__":
    sys.exit(main())
