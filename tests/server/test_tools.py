#!/usr/bin/env python3
"""Tool calling through `specdec serve` (README "Tool calling"), end to end on loopback.

The model: the bundled kjv-target weights and tokenizer in a temporary directory whose
tokenizer_config.json carries Qwen3's published chat template (tests/chat/templates), so tools,
tool calls, tool results and chat_template_kwargs are rendered as Qwen3 renders them. Its output
is gibberish, so
  - tool_choice named / "required" are checked as constraints: the arguments parse as JSON and
    satisfy the tool's schema; content "" and finish_reason "stop" (named) or "tool_calls"
    ("required", after a stop), ids "chatcmpl-tool-" + 32 hex digits; streamed, the deltas
    (first: index, id, type, name; then argument fragments) concatenate to the same calls;
  - "auto" (--enable-auto-tool-choice --tool-call-parser hermes) gets its call text from a
    guided_regex that forces "Sure. <tool_call>{...}</tool_call>": content "Sure. ", the call
    parsed, finish_reason "tool_calls"; streamed: content then one call delta; without the
    constraint the text stays content (tool_calls []);
  - "auto" with --tool-call-parser glm45: a guided_regex forces GLM-4.5's tagged call; the declared
    string argument keeps its spaces (the parser read the request's tools); likewise qwen3_coder with
    Qwen3-Coder's <function=...><parameter=...> call;
  - "none" (and tools rendered): the prompt grows by the tools' text; chat_template_kwargs
    {"enable_thinking": false} adds Qwen3's empty think block to the prompt;
  - a conversation with an assistant tool call (arguments as a JSON string) and a tool result is
    accepted and rendered;
  - errors, each a 400 naming its field with the server still serving: bad tool shapes,
    duplicate names, an unknown named tool, tool_choice without tools, "auto" on a server without
    a parser, "required" + response_format, kwargs that are not an object or set
    "chat_template", 129 tools, a schema nested 40 deep, legacy "functions"; on the plain format
    (the bundled pair) tools are not rendered and a named call still works; the server refuses to start with
    --enable-auto-tool-choice alone or an unknown parser.
The parsers' own adversarial cases are C unit tests (test_server_parse.c).

Usage: test_tools.py SPECDEC_BINARY MODELS_DIR TEMPLATES_DIR [--quick]
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402  (the Server harness and check; reads the same argv)
from test_server import check  # noqa: E402

SPECDEC, MODELS, TEMPLATES = sys.argv[1], sys.argv[2], sys.argv[3]

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
SEARCH = {"type": "function", "function": {  # a $ref into $defs: kept for a named call, merged for "required"
    "name": "search", "parameters": {"type": "object", "properties": {"q": {"$ref": "#/$defs/short"}},
                                     "required": ["q"], "additionalProperties": False,
                                     "$defs": {"short": {"type": "string", "maxLength": 6}}}}}
TOOLS = [WEATHER, SEARCH]
USER = [{"role": "user", "content": "Weather in Paris?"}]
ID = re.compile(r"chatcmpl-tool-[0-9a-f]{32}")


def post(srv, body):
    st, raw, _ = srv.request("POST", "/v1/chat/completions", body)
    return st, json.loads(raw)


def stream(srv, body):
    """(content, calls {index: [id, name, args]}, finish_reason, first-delta shapes ok) of a stream."""
    st, ctype, events = ts.sse_events(srv, "/v1/chat/completions", dict(body, stream=True))
    check(st == 200 and events and events[-1] == b"data: [DONE]", "stream status %d" % st)
    content, calls, finish, shapes = "", {}, None, True
    for ev in events[:-1]:
        ch = json.loads(ev[len(b"data: "):])["choices"][0]
        d = ch["delta"]
        content += d.get("content") or ""
        for tc in d.get("tool_calls") or []:
            if tc["index"] not in calls:  # a call's first delta: id, type and name
                shapes &= bool(ID.fullmatch(tc.get("id", ""))) and tc.get("type") == "function" and "name" in tc["function"]
                calls[tc["index"]] = [tc["id"], tc["function"]["name"], ""]
            calls[tc["index"]][2] += tc["function"].get("arguments", "")
        if ch.get("finish_reason"):
            finish = ch["finish_reason"]
    return content, calls, finish, shapes


def weather_ok(args):
    try:
        a = json.loads(args)
    except ValueError:
        return False
    return (isinstance(a, dict) and set(a) == {"city", "unit"} and isinstance(a["city"], str) and
            len(a["city"]) <= 8 and a["unit"] in ("celsius", "fahrenheit"))


def search_ok(args):
    try:
        a = json.loads(args)
    except ValueError:
        return False
    return isinstance(a, dict) and set(a) == {"q"} and isinstance(a["q"], str) and len(a["q"]) <= 6


def test_named(srv):
    body = dict(messages=USER, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}},
                max_tokens=60, temperature=0)
    st, r = post(srv, body)
    c = r["choices"][0] if st == 200 else {}
    m = c.get("message", {})
    calls = m.get("tool_calls") or []
    check(st == 200 and m.get("content") == "" and len(calls) == 1 and c["finish_reason"] == "stop",
          "named: %d %s" % (st, r))
    if calls:
        check(ID.fullmatch(calls[0]["id"]) and calls[0]["type"] == "function" and
              calls[0]["function"]["name"] == "get_weather" and weather_ok(calls[0]["function"]["arguments"]),
              "named call %s" % calls[0])
        content, scalls, finish, shapes = stream(srv, body)
        check(content == "" and list(scalls) == [0] and shapes and scalls[0][1] == "get_weather" and
              scalls[0][2] == calls[0]["function"]["arguments"] and finish == "stop",
              "named streamed: %r %s %s" % (content, scalls, finish))
        # the second tool, sampled: its own schema
        st, r = post(srv, dict(body, tool_choice={"type": "function", "function": {"name": "search"}}, temperature=1,
                               seed=3))
        calls = r["choices"][0]["message"]["tool_calls"] if st == 200 else []
        check(st == 200 and len(calls) == 1 and calls[0]["function"]["name"] == "search" and
              search_ok(calls[0]["function"]["arguments"]), "named search: %s" % r)


def close_bracket_id():
    with open(os.path.join(MODELS, "kjv-target", "tokenizer.json"), encoding="utf-8") as f:
        return json.load(f)["model"]["vocab"]["]"]


def test_required(srv):
    """The tiny model never closes the list by itself (seeds 1..5 of 300 tokens add calls to the
    end): a logit_bias on "]" (masked by the constraint until a call has closed) ends it."""
    ended = 0
    bias = {str(close_bracket_id()): 30}
    st, r = post(srv, dict(messages=USER, tools=TOOLS, tool_choice="required", max_tokens=30, temperature=0))
    c = r["choices"][0] if st == 200 else {}
    check(st == 200 and c["finish_reason"] == "length" and c["message"]["tool_calls"] == [] and
          c["message"]["content"].startswith("[{"), "required cut by max_tokens: the text stays content: %s" % r)
    for seed in range(1, 13):
        body = dict(messages=USER, tools=TOOLS, tool_choice="required", max_tokens=120, temperature=1, seed=seed,
                    logit_bias=bias)
        st, r = post(srv, body)
        if st != 200:
            check(False, "required seed %d: %d %s" % (seed, st, r))
            continue
        c = r["choices"][0]
        calls = c["message"]["tool_calls"]
        if c["finish_reason"] == "length":  # cut: the list did not close; the text stays content
            check(calls == [] and c["message"]["content"].startswith("["), "required cut: %s" % c)
            continue
        ended += 1
        check(c["finish_reason"] == "tool_calls" and c["message"]["content"] == "" and calls and
              all(ID.fullmatch(t["id"]) and (weather_ok(t["function"]["arguments"]) if t["function"]["name"] ==
                                            "get_weather" else search_ok(t["function"]["arguments"])) for t in calls),
              "required seed %d: %s" % (seed, c))
        content, scalls, finish, shapes = stream(srv, body)
        check(content == "" and shapes and finish == "tool_calls" and
              [(v[1], v[2]) for _, v in sorted(scalls.items())] ==
              [(t["function"]["name"], t["function"]["arguments"]) for t in calls],
              "required seed %d streamed: %s %s vs %s" % (seed, scalls, finish, calls))
        if ended >= 2:
            break
    check(ended >= 2, "fewer than two seeds of 1..12 ended their list within 120 tokens")


AUTO_REGEX = r'Sure\. <tool_call>\{"name": "get_weather", "arguments": \{"city": "(Paris|Rome)", "unit": "celsius"\}\}</tool_call>'


def test_auto(srv):
    body = dict(messages=USER, tools=TOOLS, max_tokens=200, temperature=0, guided_regex=AUTO_REGEX)
    st, r = post(srv, body)
    c = r["choices"][0] if st == 200 else {}
    calls = c.get("message", {}).get("tool_calls") or []
    check(st == 200 and c["message"]["content"] == "Sure. " and len(calls) == 1 and
          calls[0]["function"]["name"] == "get_weather" and c["finish_reason"] == "tool_calls" and
          json.loads(calls[0]["function"]["arguments"])["unit"] == "celsius" and
          ": " in calls[0]["function"]["arguments"], "auto (hermes): %d %s" % (st, r))
    content, scalls, finish, shapes = stream(srv, body)
    check(content == "Sure. " and shapes and list(scalls) == [0] and calls and
          scalls[0][1:] == [calls[0]["function"]["name"], calls[0]["function"]["arguments"]] and finish == "tool_calls",
          "auto streamed: %r %s %s" % (content, scalls, finish))
    st, r = post(srv, dict(messages=USER, tools=TOOLS, max_tokens=12, temperature=0))
    c = r["choices"][0] if st == 200 else {}
    check(st == 200 and c["message"]["tool_calls"] == [] and c["message"]["content"] and
          c["finish_reason"] in ("stop", "length"), "auto without a call: %s" % r)


GLM_REGEX = (r'Sure\. <tool_call>get_weather\n<arg_key>city</arg_key><arg_value> (Paris|Rome) </arg_value>'
             r'<arg_key>unit</arg_key><arg_value>celsius</arg_value></tool_call>')


def test_auto_glm45(srv):
    """--tool-call-parser glm45 reads the request's tools: "city" is declared a string, so it stays as
    written (" Paris ", spaces kept), "unit" is not, so it is stripped and, being neither JSON nor a
    Python literal, kept as text."""
    body = dict(messages=USER, tools=TOOLS, max_tokens=200, temperature=0, guided_regex=GLM_REGEX)
    st, r = post(srv, body)
    c = r["choices"][0] if st == 200 else {}
    calls = c.get("message", {}).get("tool_calls") or []
    check(st == 200 and c["message"]["content"] == "Sure. " and len(calls) == 1 and ID.fullmatch(calls[0]["id"]) and
          calls[0]["function"]["name"] == "get_weather" and c["finish_reason"] == "tool_calls" and
          re.fullmatch(r'\{"city": " (Paris|Rome) ", "unit": "celsius"\}', calls[0]["function"]["arguments"]),
          "auto (glm45): %d %s" % (st, r))
    content, scalls, finish, shapes = stream(srv, body)
    check(content == "Sure. " and shapes and list(scalls) == [0] and calls and
          scalls[0][1:] == [calls[0]["function"]["name"], calls[0]["function"]["arguments"]] and finish == "tool_calls",
          "auto (glm45) streamed: %r %s %s" % (content, scalls, finish))


QC_REGEX = (r'Sure\. <tool_call>\n<function=get_weather>\n<parameter=city>\n(Paris|Rome)\n</parameter>\n'
            r'<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>')


def test_auto_qwen3_coder(srv):
    """--tool-call-parser qwen3_coder: Qwen3-Coder's tagged call, each value converted by its declared type
    ("city" a string; "unit", an enum without a type, kept as text)."""
    body = dict(messages=USER, tools=TOOLS, max_tokens=200, temperature=0, guided_regex=QC_REGEX)
    st, r = post(srv, body)
    c = r["choices"][0] if st == 200 else {}
    calls = c.get("message", {}).get("tool_calls") or []
    check(st == 200 and c["message"]["content"] == "Sure. " and len(calls) == 1 and ID.fullmatch(calls[0]["id"]) and
          calls[0]["function"]["name"] == "get_weather" and c["finish_reason"] == "tool_calls" and
          re.fullmatch(r'\{"city": "(Paris|Rome)", "unit": "celsius"\}', calls[0]["function"]["arguments"]),
          "auto (qwen3_coder): %d %s" % (st, r))
    content, scalls, finish, shapes = stream(srv, body)
    check(content == "Sure. " and shapes and list(scalls) == [0] and calls and
          scalls[0][1:] == [calls[0]["function"]["name"], calls[0]["function"]["arguments"]] and finish == "tool_calls",
          "auto (qwen3_coder) streamed: %r %s %s" % (content, scalls, finish))


def usage_prompt(srv, body):
    st, r = post(srv, dict(body, max_tokens=1, temperature=0))
    check(st == 200, "prompt of %s: %d %s" % (list(body), st, r))
    return r["usage"]["prompt_tokens"] if st == 200 else -1


def cli_tokenize(model, body):
    """`specdec tokenize -m model --chat FILE` of body written to FILE (the completed process)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(body, f)
    try:
        return subprocess.run([SPECDEC, "tokenize", "-m", model, "--chat", f.name], capture_output=True, text=True,
                              timeout=120)
    finally:
        os.unlink(f.name)


def tokenize_same(srv, model, body, prompt_tokens):
    """/tokenize's chat form of body (messages, tools, chat_template_kwargs): the count is the chat
    completion's prompt_tokens and the ids are `specdec tokenize --chat`'s for the same file: both read
    it through the request layer (sd_api_tokenize_body + sd_api_parse: messages checked, each tool as
    vLLM's model_dump writes it, continue_final_message, generation-only fields ignored)."""
    st, raw, _ = srv.request("POST", "/tokenize", body)
    got = json.loads(raw) if st == 200 else {}
    cli = cli_tokenize(model, body)
    ids = [int(x) for x in cli.stdout.split()] if cli.returncode == 0 else None
    check(st == 200 and got.get("count") == prompt_tokens == len(got.get("tokens", [])) and got["tokens"] == ids,
          "/tokenize %s: %d, count %s, prompt_tokens %d, CLI %s" % (list(body), st, got.get("count"), prompt_tokens,
                                                                   cli.stderr[-200:] or "%d ids" % len(ids or [])))


def test_render(srv):
    plain = usage_prompt(srv, dict(messages=USER))
    with_tools = usage_prompt(srv, dict(messages=USER, tools=TOOLS, tool_choice="none"))
    check(with_tools > plain + 40, "tools rendered into the prompt: %d vs %d tokens" % (with_tools, plain))
    no_think = usage_prompt(srv, dict(messages=USER, chat_template_kwargs={"enable_thinking": False}))
    check(no_think > plain, "enable_thinking=false adds the empty think block: %d vs %d" % (no_think, plain))
    conv = USER + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                          "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
                   {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees"}]
    n = usage_prompt(srv, dict(messages=conv, tools=TOOLS, tool_choice="none"))
    check(n > with_tools, "a tool call and its result rendered: %d tokens" % n)
    # a tool with neither description nor parameters, and one with an extra key: model_dump's form
    bare = [{"type": "function", "function": {"name": "ping"}},
            {"type": "function", "function": dict(WEATHER["function"], strict=True)}]
    n_bare = usage_prompt(srv, dict(messages=USER, tools=bare, tool_choice="none"))
    # content parts, a call's arguments as an object, continue_final_message, generation-only fields
    parts = [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
             {"role": "user", "content": [{"type": "text", "text": "Weather"}, {"type": "text", "text": "in Paris?"}]}]
    conv_obj = [dict(m) for m in conv]
    conv_obj[1] = dict(conv[1], tool_calls=[dict(conv[1]["tool_calls"][0], function={
        "name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}})])
    cont = dict(messages=USER + [{"role": "assistant", "content": "Let me check the "}], add_generation_prompt=False,
                continue_final_message=True)
    junk = dict(messages=USER, tools=bare, n=1000, temperature="hot", max_tokens=-5, stream="x")
    extra = [(dict(messages=parts), usage_prompt(srv, dict(messages=parts))),
             (dict(messages=conv_obj, tools=bare), usage_prompt(srv, dict(messages=conv_obj, tools=bare))),
             (cont, usage_prompt(srv, cont)), (junk, n_bare)]
    for body, count in [(dict(messages=USER), plain), (dict(messages=USER, tools=TOOLS), with_tools),
                        (dict(messages=USER, chat_template_kwargs={"enable_thinking": False}), no_think),
                        (dict(messages=conv, tools=TOOLS), n), (dict(messages=USER, tools=bare), n_bare)] + extra:
        tokenize_same(srv, srv.model_dir, body, count)
    # what the server refuses, the CLI refuses naming the same field
    for what, body, param in (("an unknown role", dict(messages=[{"role": "bogus", "content": "x"}]), "messages"),
                              ("an image part", dict(messages=[{"role": "user", "content": [
                                  {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]), "messages"),
                              ("a tool of another type", dict(messages=USER, tools=[{"type": "x", "function": {
                                  "name": "f"}}]), "tools"),
                              ("continue_final_message with add_generation_prompt",
                               dict(messages=USER, continue_final_message=True), "continue_final_message")):
        st, raw, _ = srv.request("POST", "/tokenize", body)
        err = json.loads(raw).get("error", {}) if st == 400 else {}
        cli = cli_tokenize(srv.model_dir, body)
        check(st == 400 and err.get("param") == param and cli.returncode == 1 and param in cli.stderr and not cli.stdout,
              "%s: /tokenize %d %s; CLI %d %r" % (what, st, err.get("param"), cli.returncode, cli.stderr[-200:]))


def expect_400(srv, what, body, param, code=None):
    st, r = post(srv, dict({"messages": USER, "max_tokens": 4}, **body))
    err = r.get("error") or {}
    check(st == 400 and err.get("param") == param and err.get("message") and (code is None or err.get("code") == code),
          "%s: %d %s" % (what, st, r))
    ts.still_serving(srv, what)


def deep(n):
    s = {"type": "string"}
    for _ in range(n):
        s = {"type": "object", "properties": {"a": s}}
    return s


def test_errors(srv):
    named = {"type": "function", "function": {"name": "get_weather"}}
    expect_400(srv, "tools not a list", {"tools": {"a": 1}}, "tools")
    expect_400(srv, "a tool without function", {"tools": [{"type": "function"}], "tool_choice": "none"}, "tools")
    expect_400(srv, "a tool of another type", {"tools": [dict(WEATHER, type="retrieval")], "tool_choice": "none"}, "tools")
    expect_400(srv, "a nameless tool", {"tools": [{"function": {"name": ""}}], "tool_choice": "none"}, "tools")
    expect_400(srv, "parameters not an object", {"tools": [{"function": {"name": "f", "parameters": [1]}}]}, "tools")
    expect_400(srv, "duplicate names", {"tools": [WEATHER, WEATHER], "tool_choice": "none"}, "tools")
    expect_400(srv, "unknown named tool", {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "x"}}},
               "tool_choice")
    expect_400(srv, "named without a name", {"tools": TOOLS, "tool_choice": {"type": "function"}}, "tool_choice")
    expect_400(srv, "tool_choice without tools", {"tool_choice": named}, "tool_choice")
    expect_400(srv, "tool_choice other string", {"tools": TOOLS, "tool_choice": "any"}, "tool_choice")
    expect_400(srv, "required + response_format", {"tools": TOOLS, "tool_choice": "required",
                                                   "response_format": {"type": "json_object"}}, "tool_choice")
    expect_400(srv, "kwargs not an object", {"chat_template_kwargs": [1]}, "chat_template_kwargs")
    expect_400(srv, "kwargs setting chat_template", {"chat_template_kwargs": {"chat_template": "x"}},
               "chat_template_kwargs")
    expect_400(srv, "129 tools", {"tools": [{"function": {"name": "f%d" % i}} for i in range(129)],
                                  "tool_choice": "none"}, "tools")
    expect_400(srv, "a schema nested 40 deep", {"tools": [{"function": {"name": "f", "parameters": deep(40)}}],
                                                "tool_choice": "none"}, "tools")
    expect_400(srv, "legacy functions", {"functions": [{"name": "f"}]}, "functions", "unsupported_value")
    expect_400(srv, "bad tool_calls in a message", {"messages": USER + [{"role": "assistant", "tool_calls": [{}]}]},
               "messages")
    # 128 tools: accepted by the parser; rendered, they overflow the context, which is refused by count
    st, r = post(srv, {"messages": USER, "max_tokens": 1, "tool_choice": "none",
                       "tools": [{"function": {"name": "f%d" % i, "parameters": {"type": "object"}}} for i in range(128)]})
    check(st == 400 and r["error"]["code"] == "context_length_exceeded" and r["error"]["param"] == "messages",
          "128 tools: %d %s" % (st, r))


def test_no_parser(srv):
    expect_400(srv, "auto without a parser", {"tools": TOOLS}, "tool_choice")
    expect_400(srv, "auto without a parser (explicit)", {"tools": TOOLS, "tool_choice": "auto"}, "tool_choice")
    st, r = post(srv, {"messages": USER, "max_tokens": 2, "tools": TOOLS, "tool_choice": "none"})
    check(st == 200 and "tool_calls" not in r["choices"][0]["message"], "none without a parser: %s" % r)


def test_plain(srv):
    """The plain format reads role and content only: the tools are not in the prompt, a named call
    still constrains the output (the README's example)."""
    n_plain = usage_prompt(srv, dict(messages=USER))
    check(usage_prompt(srv, dict(messages=USER, tools=TOOLS, tool_choice="none")) == n_plain, "plain: tools not rendered")
    st, r = post(srv, dict(messages=USER, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "search"}},
                           max_tokens=40, temperature=0))
    calls = r["choices"][0]["message"]["tool_calls"] if st == 200 else []
    check(st == 200 and len(calls) == 1 and search_ok(calls[0]["function"]["arguments"]), "plain, named: %s" % r)


def test_start_flags():
    for args, what in ((["--enable-auto-tool-choice"], "no parser"),
                       (["--enable-auto-tool-choice", "--tool-call-parser", "pythonic"], "unknown parser")):
        p = subprocess.run([SPECDEC, "serve", "--port", "0", "--backend", "cpu", *args], capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 2 and "tool" in p.stderr, "serve with %s: %d %r" % (what, p.returncode, p.stderr[-300:]))


def model_dir(tmp):
    tgt = os.path.join(MODELS, "kjv-target")
    d = os.path.join(tmp, "kjv-qwen3")
    os.makedirs(d)
    for f in ("generation_config.json", "model.safetensors", "tokenizer.json"):
        os.symlink(os.path.abspath(os.path.join(tgt, f)), os.path.join(d, f))
    with open(os.path.join(tgt, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["max_position_embeddings"] = 2048  # room for Qwen3's tool preamble in the KJV tokenizer's tokens
    with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    with open(os.path.join(TEMPLATES, "Qwen__Qwen3-0.6B.jinja"), encoding="utf-8", newline="") as f:
        tmpl = f.read()
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "chat_template": tmpl}, f)
    return d


def main():
    test_start_flags()
    with tempfile.TemporaryDirectory() as tmp:
        d = model_dir(tmp)
        with ts.Server("-m", d, "--enable-auto-tool-choice", "--tool-call-parser", "hermes") as srv:
            srv.model_dir = d
            for fn in (test_named, test_required, test_auto, test_render, test_errors):
                ts.timed(fn, srv)
        with ts.Server("-m", d, "--enable-auto-tool-choice", "--tool-call-parser", "glm45") as srv:
            ts.timed(test_auto_glm45, srv)
        with ts.Server("-m", d, "--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder") as srv:
            ts.timed(test_auto_qwen3_coder, srv)
        with ts.Server("-m", d) as srv:
            ts.timed(test_no_parser, srv)
    with ts.Server() as srv:  # the bundled pair: no template, the plain format
        ts.timed(test_plain, srv)
    print("%d passed, %d failed" % (ts.passed, ts.failed))
    return 1 if ts.failed else 0


if __name__ == "__main__":
    sys.exit(main())
