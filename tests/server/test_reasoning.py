#!/usr/bin/env python3
"""Reasoning outputs through `specdec serve --reasoning-parser` (README "Reasoning outputs"), end to
end on loopback.

The model: the bundled kjv-target in a directory with Qwen3's published chat template (as
test_tools.py builds it). It never writes "<think>" or "</think>", so two kinds of server:
  - default tags: with thinking on (the template leaves the thinking open) the whole output is
    reasoning (vLLM's qwen3 and deepseek_r1: no end tag = still thinking) and content is null, and
    a response_format never acts (its grammar waits for "</think>"): the text equals the
    unconstrained one; with chat_template_kwargs {"enable_thinking": false} the template closes
    the thinking in the prompt, so the output is all content and the constraint acts from the
    first token;
  - SPECDEC_REASONING_TAGS="assistant ," (the end tag a token the model writes; the start tag
    ends the template's prompt, as "<think>\n" ends Qwen3.5's, so the tools' commas in the prompt
    do not close the thinking): the reasoning is
    the text before the first ",", equal to the unconstrained output's; the content after it obeys
    guided_regex / response_format (the grammar activated by the "," token, in the middle of the
    output) and a named tool call's schema; "auto" tool calls (hermes) are parsed from the content
    only; streamed, reasoning deltas come first, never hold the tag, and add up to the
    non-streamed fields, with and without n-gram drafts crossing the marker;
  - usage.completion_tokens_details.reasoning_tokens (whole and streamed, n = 1 and 2): every
    completion token without an end tag, none with thinking off, with the comma tag the tokens whose
    text begins before the content (counted independently from the logprobs' bytes);
  - /v1/completions is not parsed; a server without the flag has no reasoning fields; unknown
    parser names and malformed tags stop the start with the known names.

Usage: test_reasoning.py SPECDEC_BINARY MODELS_DIR TEMPLATES_DIR [--quick]
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402
import test_tools as tt  # noqa: E402  (model_dir, post, the tools)
from test_server import check  # noqa: E402

SPECDEC = sys.argv[1]
USER = tt.USER


def stream(srv, body, tag=None):
    """(reasoning, content, calls, finish, ordered): ordered = no reasoning after content, every
    reasoning delta carries both fields equal (and not the end tag)."""
    st, _, events = ts.sse_events(srv, "/v1/chat/completions", dict(body, stream=True))
    check(st == 200 and events and events[-1] == b"data: [DONE]", "stream status %d" % st)
    reasoning, content, calls, finish, ordered = "", "", {}, None, True
    for ev in events[:-1]:
        ch = json.loads(ev[len(b"data: "):])["choices"][0]
        d = ch["delta"]
        if d.get("reasoning") is not None:
            ordered &= content == "" and d.get("reasoning_content") == d["reasoning"] and (
                not tag or tag not in d["reasoning"])
            reasoning += d["reasoning"]
        content += d.get("content") or ""
        for tc in d.get("tool_calls") or []:
            calls.setdefault(tc["index"], ["", ""])
            calls[tc["index"]][0] = tc["function"].get("name") or calls[tc["index"]][0]
            calls[tc["index"]][1] += tc["function"].get("arguments", "")
        finish = ch.get("finish_reason") or finish
    return reasoning, content, calls, finish, ordered


def msg(srv, body):
    st, r = tt.post(srv, body)
    check(st == 200, "%s: %d %s" % (list(body), st, r))
    return (r["choices"][0]["message"], r["choices"][0]["finish_reason"]) if st == 200 else ({}, None)


def usage_of(srv, body):
    """(usage of the whole answer, usage of the streamed one's include_usage chunk)."""
    st, r = tt.post(srv, body)
    check(st == 200, "usage: %d %s" % (st, r))
    st2, _, events = ts.sse_events(srv, "/v1/chat/completions",
                                   dict(body, stream=True, stream_options={"include_usage": True}))
    chunks = [json.loads(ev[len(b"data: "):]) for ev in events[:-1]] if st2 == 200 else []
    streamed = [c["usage"] for c in chunks if c.get("usage")]
    check(len(streamed) == 1, "one usage chunk: %s" % streamed)
    return (r.get("usage") if st == 200 else {}), (streamed[0] if streamed else {})


def reasoning_tokens_by_bytes(srv, body, c_off):
    """The tokens whose text begins before byte c_off of the output, from the logprobs' "bytes"."""
    st, r = tt.post(srv, dict(body, logprobs=True))
    check(st == 200, "logprobs: %d %s" % (st, r))
    at, k = 0, 0
    for t in (r["choices"][0]["logprobs"]["content"] if st == 200 else []):
        k += at < c_off
        at += len(t["bytes"])
    return k


def test_reasoning_usage(srv, expect):
    """usage.completion_tokens_details.reasoning_tokens, whole and streamed, n = 1 and n = 2 (summed);
    expect(usage) -> the reasoning tokens of one choice."""
    body = dict(messages=USER, max_tokens=30, temperature=0)
    for n in (1, 2):
        whole, streamed = usage_of(srv, dict(body, n=n))
        for u, how in ((whole, "whole"), (streamed, "streamed")):
            want = n * expect(dict(u, completion_tokens=u.get("completion_tokens", 0) // n))
            got = (u.get("completion_tokens_details") or {}).get("reasoning_tokens")
            check(got == want, "n=%d %s: reasoning_tokens %s, expected %s (usage %s)" % (n, how, got, want, u))


def test_default_tags(srv, plain_text):
    body = dict(messages=USER, max_tokens=30, temperature=0)
    # no end tag: every completion token is reasoning; thinking off: none
    test_reasoning_usage(srv, lambda u: u["completion_tokens"])
    off_usage, _ = usage_of(srv, dict(body, chat_template_kwargs={"enable_thinking": False}))
    check((off_usage.get("completion_tokens_details") or {}).get("reasoning_tokens") == 0,
          "thinking off: 0 reasoning tokens: %s" % off_usage)
    st, raw, _ = srv.request("POST", "/v1/completions", dict(prompt="And God said", max_tokens=4, temperature=0))
    check(st == 200 and "completion_tokens_details" not in json.loads(raw).get("usage", {}),
          "completions: no completion_tokens_details")
    m, _ = msg(srv, body)
    check(m.get("reasoning") == plain_text and m.get("reasoning_content") == plain_text and m.get("content") is None,
          "no end tag: all reasoning, content null: %s" % m)
    r, c, _, _, ordered = stream(srv, body)
    check(r == plain_text and c == "" and ordered, "streamed: all reasoning: %r %r" % (r, c))
    # the constraint waits for "</think>", which never comes: the unconstrained text
    m, _ = msg(srv, dict(body, guided_regex=" Amen\\."))
    check(m.get("reasoning") == plain_text and m.get("content") is None, "a grammar before the end tag: %s" % m)
    # enable_thinking false: the template closes the thinking in the prompt; all content, constrained at once
    off = dict(body, chat_template_kwargs={"enable_thinking": False})
    m, fin = msg(srv, dict(off, guided_regex=" Amen\\."))
    check(m.get("content") == " Amen." and m.get("reasoning") is None and fin == "stop",
          "thinking off: content constrained from the start: %s %s" % (m, fin))
    r, c, _, _, _ = stream(srv, dict(off, guided_regex=" Amen\\."))
    check(r == "" and c == " Amen.", "thinking off, streamed: %r %r" % (r, c))
    # /v1/completions: no parsing
    st, raw, _ = srv.request("POST", "/v1/completions", dict(prompt="<think>And God said", max_tokens=8, temperature=0))
    ch = json.loads(raw)["choices"][0] if st == 200 else {}
    check(st == 200 and "reasoning" not in ch and isinstance(ch.get("text"), str), "completions not parsed: %s" % ch)


def test_comma_tags(srv, plain_text):
    head, _, tail = plain_text.partition(",")
    check(tail != "", "the unconstrained text holds the end tag: %r" % plain_text)
    body = dict(messages=USER, max_tokens=30, temperature=0)
    # the tokens whose text begins before the content (the end tag's included): counted independently
    # from the logprobs' bytes, and strictly between none and all
    k = reasoning_tokens_by_bytes(srv, body, len(head.encode()) + 1)
    check(0 < k < 30, "the comma splits the 30 tokens: %d reasoning" % k)
    test_reasoning_usage(srv, lambda u: k)
    # a stop string in the thinking cuts it before its end tag: every token is reasoning; one in the
    # content keeps the split: still k (the count follows the returned text, not the generated one)
    word = tail.strip()[-5:]
    check(len(word) == 5 and plain_text.find(word) > len(head), "a stop string of the content: %r" % word)
    for stop, expect in ((",", None), (word, k)):
        for u, how in zip(usage_of(srv, dict(body, stop=[stop])), ("whole", "streamed")):
            want = u.get("completion_tokens") if expect is None else expect
            got = (u.get("completion_tokens_details") or {}).get("reasoning_tokens")
            check(got == want and 0 < got <= u.get("completion_tokens", 0),
                  "stop %r, %s: reasoning_tokens %s, expected %s (usage %s)" % (stop, how, got, want, u))
    m, _ = msg(srv, body)
    check(m.get("reasoning") == head and m.get("content") == tail, "split at the first end tag: %s" % m)
    for extra in ({}, {"speculative_config": {"method": "ngram", "num_speculative_tokens": 4}}):
        r, c, _, _, ordered = stream(srv, dict(body, **extra), ",")
        check(r == head and c == tail and ordered, "streamed %s: %r | %r" % (extra, r, c))
    # the grammar acts after the end tag only: the reasoning is the unconstrained one
    for extra in ({}, {"speculative_config": {"method": "ngram", "num_speculative_tokens": 4}}):
        b = dict(body, guided_regex=" Amen\\.", max_tokens=60, **extra)
        m, fin = msg(srv, b)
        check(m.get("reasoning") == head and m.get("content") == " Amen." and fin == "stop",
              "regex after the thinking %s: %s %s" % (extra, m, fin))
        r, c, _, fin, ordered = stream(srv, b, ",")
        check(r == head and c == " Amen." and fin == "stop" and ordered, "streamed regex %s: %r %r" % (extra, r, c))
    m, _ = msg(srv, dict(body, response_format={"type": "json_object"}))
    check(m.get("reasoning") == head and (m.get("content") or "").lstrip().startswith("{") and
          not tail.lstrip().startswith("{"), "json_object after the thinking: %s" % m)
    # a named tool call: its arguments (the content) obey the schema, the thinking before them
    # unconstrained: that of the same prompt (tools rendered) with tool_choice "none"
    m, _ = msg(srv, dict(body, tools=tt.TOOLS, tool_choice="none"))
    head = m.get("reasoning")
    check(head and m.get("content") and "tool_calls" not in m, "tools rendered, none called: %s" % m)
    named = dict(body, tools=tt.TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}},
                 max_tokens=80)
    m, fin = msg(srv, named)
    calls = m.get("tool_calls") or []
    check(m.get("reasoning") == head and len(calls) == 1 and tt.weather_ok(calls[0]["function"]["arguments"]) and
          fin == "stop", "named call after the thinking: %s" % m)
    r, c, scalls, _, ordered = stream(srv, named, ",")
    check(r == head and calls and scalls.get(0, ["", ""])[1] == calls[0]["function"]["arguments"] and ordered,
          "named call streamed: %r %s" % (r, scalls))
    # "auto" (hermes): the call parsed from the content only
    auto = dict(body, tools=tt.TOOLS, guided_regex=tt.AUTO_REGEX, max_tokens=200)
    m, fin = msg(srv, auto)
    calls = m.get("tool_calls") or []
    check(m.get("reasoning") == head and m.get("content") == "Sure. " and len(calls) == 1 and fin == "tool_calls",
          "auto call after the thinking: %s %s" % (m, fin))
    r, c, scalls, fin, ordered = stream(srv, auto, ",")
    check(r == head and c == "Sure. " and list(scalls) == [0] and fin == "tool_calls" and ordered,
          "auto streamed: %r %r %s %s" % (r, c, scalls, fin))


def test_start_flags(model):
    for args, env, what in ((["--reasoning-parser", "qwen"], {}, "unknown parser"),
                            (["--reasoning-parser", "qwen3"], {"SPECDEC_REASONING_TAGS": "one"}, "malformed tags")):
        p = subprocess.run([SPECDEC, "serve", "-m", model, "--port", "0", "--backend", "cpu", *args], capture_output=True,
                           text=True, timeout=60, env=dict(os.environ, **env))
        check(p.returncode == 2 and "reasoning" in p.stderr and (what != "unknown parser" or
                                                                 "qwen3, deepseek_r1, glm45" in p.stderr),
              "serve with %s: %d %r" % (what, p.returncode, p.stderr[-300:]))


def main():
    os.environ.pop("SPECDEC_REASONING_TAGS", None)
    with tempfile.TemporaryDirectory() as tmp:
        d = tt.model_dir(tmp)
        test_start_flags(d)
        with ts.Server("-m", d) as srv:  # no parser: the unconstrained text, no reasoning fields
            m, _ = msg(srv, dict(messages=USER, max_tokens=30, temperature=0))
            plain = m.get("content") or ""
            check("reasoning" not in m and "reasoning_content" not in m, "no parser, no fields: %s" % m)
            u, _ = usage_of(srv, dict(messages=USER, max_tokens=8, temperature=0))
            check("completion_tokens_details" not in u, "no parser: no completion_tokens_details: %s" % u)
        with ts.Server("-m", d, "--reasoning-parser", "qwen3") as srv:
            ts.timed(test_default_tags, srv, plain)
        with ts.Server("-m", d, "--reasoning-parser", "deepseek_r1") as srv:
            ts.timed(test_default_tags, srv, plain)
        os.environ["SPECDEC_REASONING_TAGS"] = "assistant ,"
        try:
            with ts.Server("-m", d, "--reasoning-parser", "qwen3", "--enable-auto-tool-choice", "--tool-call-parser",
                           "hermes") as srv:
                ts.timed(test_comma_tags, srv, plain)
        finally:
            os.environ.pop("SPECDEC_REASONING_TAGS", None)
    print("%d passed, %d failed" % (ts.passed, ts.failed))
    return 1 if ts.failed else 0


if __name__ == "__main__":
    sys.exit(main())
