#!/usr/bin/env python3
"""Structured output through `specdec serve` (docs/STRUCTURED.md), end to end on loopback with
the bundled pair (kjv-target + kjv-draft, CPU backend).

Every output is checked against its constraint, for each way a request may draft (the draft
model, plain decoding with "n_draft": 0, prompt lookup with "speculative_config": {"method":
"ngram"}) and sampling (greedy; temperature 1 with seeds 1 and 2):
  - regex (vLLM's guided_regex, structured_outputs.regex): `(yes|no)`, `[0-9]{3}-[a-z]{2,4}` and
    a pattern with UTF-8 literals; finish_reason "stop" (each language is finite, so the model
    must end at EOS within max_tokens) and Python's re.fullmatch holds;
  - choice (guided_choice, structured_outputs.choice): the text is one of the strings (one of them
    non-ASCII), finish_reason "stop";
  - json_schema (OpenAI's response_format, guided_json as an object and as a string,
    structured_outputs.json; the official openai client for one): a schema of bounded fields (enum,
    boolean, integer range, string maxLength, a nested object, an array with maxItems) whose
    every instance fits max_tokens: json.loads, then each field by its schema (every spelling of
    the field in the first mode, the response_format one in the others);
  - json_object (response_format, structured_outputs.json_object): finish_reason "stop" ->
    json.loads gives a dict; "length" -> the text is a prefix of some JSON text whose value is an
    object (json_object_prefix: a pushdown check of RFC 8259, itself checked first on prefixes of
    known objects and on texts that are no such prefix; both spellings in the first mode);
  - GBNF grammars (vLLM's guided_grammar and structured_outputs.grammar, llama.cpp server's
    grammar; core/sd_gbnf.h): a finite language of three rules, finish_reason "stop" and the
    text checked with an equivalent Python regex (every spelling in the first mode);
  - with the rest of a request: a streamed request (completions and chat: the deltas concatenate to
    a full match, one finish_reason, [DONE]); n = 3 (every choice satisfies it); a stop string with
    logprobs (the text is the unconstrained-by-stop text cut at the stop string, a logprob per
    token);
  - the grammar cache: a repeated constraint is a hit in /metrics (specdec_grammar_cache_lookups_total),
    --grammar-cache 2 evicts the least recently used, --grammar-cache 0 keeps none;
  - errors, each a 400 naming the field (param) while the server keeps serving: a bad regex, an
    unsupported schema keyword, two constraints, a left-recursive grammar, a lookahead in a grammar,
    wrong types;
  - hostile constraints, each refused in under a second with the server still serving: a 1 MiB
    schema, a schema nested 10,000 deep (as an object and as a string), a regex `(a{1000}){1000}`,
    groups nested 5,000 deep (regex and grammar), a grammar of 201 x [a]{1000}.

Usage: test_structured.py SPECDEC_BINARY MODELS_DIR [--quick]
--quick (the sanitizer builds): the regex and choice kinds with one drafter and the greedy run,
the rest once. Prints "N passed, N failed"; exit status 0 only when nothing failed.
"""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402  (the Server harness and check; reads the same argv)
from test_server import check  # noqa: E402

QUICK = "--quick" in sys.argv
PROMPT = "And God said"
CHAT = [{"role": "user", "content": "Answer the question."}]
DRAFTING = [("draft model", {}), ("plain", {"n_draft": 0}), ("ngram", {"speculative_config": {"method": "ngram"}})]
SAMPLING = [("greedy", {"temperature": 0}), ("T=1 seed 1", {"temperature": 1, "seed": 1}),
            ("T=1 seed 2", {"temperature": 1, "seed": 2})]
if QUICK:
    DRAFTING, SAMPLING = DRAFTING[:1], SAMPLING[:2]

REGEXES = [r"(yes|no)", r"[0-9]{3}-[a-z]{2,4}", "\u00ab[a-z]{1,6}\u00bb \u2627 (Amen|Sela\u00e9)"]
CHOICES = ["Genesis", "Exodus", "Psalms", "\u00c9sa\u00efe \u2627"]
SCHEMA = {
    "type": "object",
    "properties": {
        "book": {"enum": ["Genesis", "Exodus", "Psalms"]},
        "holy": {"type": "boolean"},
        "chapter": {"type": "integer", "minimum": 1, "maximum": 150},
        "word": {"type": "string", "maxLength": 8},
        "where": {"type": "object", "properties": {"verse": {"type": "integer", "minimum": 0, "maximum": 99}},
                  "required": ["verse"]},
        "tags": {"type": "array", "items": {"enum": ["law", "song"]}, "maxItems": 3},
    },
    "required": ["book", "holy", "chapter", "word", "where", "tags"],
}
# The longest instance is under 160 bytes, so 200 tokens (each at least one byte) always reach its end.
SCHEMA_TOKENS = 200


# ----------------------------------------------------------------------------------------------
# requests
# ----------------------------------------------------------------------------------------------
def generate(srv, chat, body, max_tokens=24):
    """One request: (status, text, finish_reason, response) of choice 0."""
    path = "/v1/chat/completions" if chat else "/v1/completions"
    full = dict(body, max_tokens=max_tokens, **({"messages": CHAT} if chat else {"prompt": PROMPT}))
    st, raw, _ = srv.request("POST", path, full)
    r = json.loads(raw)
    if st != 200:
        return st, None, None, r
    c = r["choices"][0]
    return st, c["message"]["content"] if chat else c["text"], c["finish_reason"], r


def each_mode(fn):
    """fn(what, extra) for every drafting x sampling mode (completions), and for chat greedy + T=1."""
    for dname, dkw in DRAFTING:
        for sname, skw in SAMPLING:
            fn("completions, %s, %s" % (dname, sname), False, dict(dkw, **skw))
    for sname, skw in SAMPLING[:2]:
        fn("chat, %s" % sname, True, dict(skw))


def param_of(r):
    return (r.get("error") or {}).get("param")


# ----------------------------------------------------------------------------------------------
# JSON prefixes
# ----------------------------------------------------------------------------------------------
_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_NUMBER_CHARS = re.compile(r"[-+0-9.eE]*")


def _string_end(s, i):
    """s[i] is '"': the index after the closing quote; None when s ends inside a valid string; -1
    when the string is invalid (a raw control character, a bad escape)."""
    j = i + 1
    while j < len(s):
        ch = s[j]
        if ch == '"':
            return j + 1
        if ord(ch) < 0x20:
            return -1
        if ch != "\\":
            j += 1
            continue
        if j + 1 == len(s):
            return None
        e = s[j + 1]
        if e in '"\\/bfnrt':
            j += 2
        elif e == "u":
            hexpart = s[j + 2: j + 6]
            if not all(h in "0123456789abcdefABCDEF" for h in hexpart):
                return -1
            if len(hexpart) < 4:
                return None
            j += 6
        else:
            return -1
    return None


def _scalar(s, i):
    """A literal or number at s[i]: (next index, None), or (None, verdict) when s ends in it or it is
    invalid."""
    c = s[i]
    if c in "tfn":
        lit = {"t": "true", "f": "false", "n": "null"}[c]
        chunk = s[i: i + len(lit)]
        if not lit.startswith(chunk):
            return None, False
        return (i + len(lit), None) if len(chunk) == len(lit) else (None, True)
    if c in "-0123456789":
        j = _NUMBER_CHARS.match(s, i).end()
        tok = s[i:j]
        if j == len(s):  # the end of the text: a prefix of a number
            return None, bool(_NUMBER.fullmatch(tok) or _NUMBER.fullmatch(tok + "0"))
        return (j, None) if _NUMBER.fullmatch(tok) else (None, False)
    return None, False


def json_object_prefix(s):
    """True when s is a prefix of some JSON text (RFC 8259, whitespace wherever it allows) whose
    value is an object: containers on a stack, strings with their escapes, numbers and literals by
    their grammar, checked character by character."""
    stack, want, can_close, i = [], "top", False, 0
    while i < len(s):
        c = s[i]
        if c in " \t\n\r":
            i += 1
            continue
        if want == "done" or (want == "top" and c != "{"):
            return False
        if want in ("top", "value") and c in "{[":
            stack.append(c)
            want, can_close, i = ("key" if c == "{" else "value"), True, i + 1
        elif (want in ("key", "value") and can_close and c == ("}" if stack[-1] == "{" else "]")) or \
                (want == "after" and c in "}]" and c == ("}" if stack[-1] == "{" else "]")):
            stack.pop()
            want, i = ("after" if stack else "done"), i + 1
        elif want == "after" and c == ",":
            want, can_close, i = ("key" if stack[-1] == "{" else "value"), False, i + 1
        elif want == "colon" and c == ":":
            want, can_close, i = "value", False, i + 1
        elif want in ("key", "value") and c == '"':
            j = _string_end(s, i)
            if j is None or j < 0:
                return j is None
            want, i = ("colon" if want == "key" else "after"), j
        elif want == "value":
            j, verdict = _scalar(s, i)
            if j is None:
                return verdict
            want, i = "after", j
        else:
            return False
    return True


def test_prefix_checker():
    """The prefix check itself: every prefix of known objects (compact and spaced, escapes, numbers,
    nesting) is accepted; texts that no object starts with are not."""
    objs = [{}, {"a": 1}, {"a": [1, -2.5e-3, True, None, {"b": "x\"y\\u00e9\n"}], "c": {}},
            {"k": "\u00e9\u2627", "n": [[], [0, 10.25E+2]], "f": False}]
    ok = True
    for o in objs:
        for text in (json.dumps(o), json.dumps(o, separators=(",", ":")), json.dumps(o, indent=1)):
            ok = ok and all(json_object_prefix(text[:k]) for k in range(len(text) + 1))
    check(ok, "json_object_prefix accepts every prefix of known objects")
    bad = ['[1]', '"a"', '1', '{"a" 1}', '{"a":trux', '{"a":nul]', '{"a":01', '{"a":1}}', '{"a":1} x', '{"a":"\x01', '{,',
           '{"a":1,}', '{"a":[1,]', '{"a":"\\q', '{"a":1.e', '{"a":-}', '{1:2}', '{"a":[}']
    check(not any(json_object_prefix(t) for t in bad),
          "json_object_prefix refuses non-prefixes: %r" % [t for t in bad if json_object_prefix(t)])


# ----------------------------------------------------------------------------------------------
# each kind
# ----------------------------------------------------------------------------------------------
def test_regex(srv):
    for pattern in REGEXES[: 2 if QUICK else 3]:
        def one(what, chat, extra, pattern=pattern):
            for field in ({"guided_regex": pattern}, {"structured_outputs": {"regex": pattern}}):
                st, text, finish, r = generate(srv, chat, dict(extra, **field))
                check(st == 200 and finish == "stop" and re.fullmatch(pattern, text) is not None,
                      "regex %r (%s, %s): %d %r %s %s" % (pattern, what, list(field)[0], st, text, finish,
                                                         r.get("error")))
                if QUICK:
                    break
        each_mode(one)


GBNF = 'root ::= answer " " num  # a finite language\nanswer ::= "yes" | "no"\nnum ::= [0-9]{1,3}\n'
GBNF_RE = r"(yes|no) [0-9]{1,3}"


def test_grammar(srv):
    first = [True]

    def one(what, chat, extra):  # every spelling of the field in the first mode, the first after
        fields = [{"guided_grammar": GBNF}, {"structured_outputs": {"grammar": GBNF}}, {"grammar": GBNF}]
        for field in fields if first[0] else fields[:1]:
            st, text, finish, r = generate(srv, chat, dict(extra, **field))
            check(st == 200 and finish == "stop" and re.fullmatch(GBNF_RE, text) is not None,
                  "grammar (%s, %s): %d %r %s %s" % (what, list(field)[0], st, text, finish, r.get("error")))
        first[0] = False
    each_mode(one)


def test_choice(srv):
    def one(what, chat, extra):
        for field in ({"guided_choice": CHOICES}, {"structured_outputs": {"choice": CHOICES}}):
            st, text, finish, r = generate(srv, chat, dict(extra, **field))
            check(st == 200 and finish == "stop" and text in CHOICES,
                  "choice (%s, %s): %d %r %s %s" % (what, list(field)[0], st, text, finish, r.get("error")))
    each_mode(one)


def check_schema_instance(text, what):
    """text parses as JSON and every field follows SCHEMA."""
    try:
        v = json.loads(text)
    except (ValueError, TypeError):
        return check(False, "%s: not JSON: %r" % (what, text))
    ok = isinstance(v, dict) and list(v) == ["book", "holy", "chapter", "word", "where", "tags"]
    ok = ok and v["book"] in ("Genesis", "Exodus", "Psalms") and isinstance(v["holy"], bool)
    ok = ok and type(v["chapter"]) is int and 1 <= v["chapter"] <= 150
    ok = ok and isinstance(v["word"], str) and len(v["word"]) <= 8
    ok = ok and isinstance(v["where"], dict) and list(v["where"]) == ["verse"] and \
        type(v["where"]["verse"]) is int and 0 <= v["where"]["verse"] <= 99
    ok = ok and isinstance(v["tags"], list) and len(v["tags"]) <= 3 and all(t in ("law", "song") for t in v["tags"])
    return check(ok, "%s: %r follows the schema" % (what, text))


def test_json_schema(srv):
    fields = [{"response_format": {"type": "json_schema", "json_schema": {"name": "verse", "schema": SCHEMA,
                                                                          "strict": True}}},
              {"guided_json": SCHEMA}, {"guided_json": json.dumps(SCHEMA, indent=2)},
              {"structured_outputs": {"json": SCHEMA}}]

    calls = [0]

    def one(what, chat, extra):  # every spelling of the field in the first mode, the first after
        calls[0] += 1
        for field in fields[: 1 if QUICK or calls[0] > 1 else len(fields)]:
            st, text, finish, r = generate(srv, chat, dict(extra, **field), SCHEMA_TOKENS)
            if check(st == 200 and finish == "stop", "json_schema (%s, %s): %d %s %s" % (
                    what, list(field)[0], st, finish, r.get("error"))):
                check_schema_instance(text, "json_schema (%s, %s)" % (what, list(field)[0]))
    each_mode(one)
    r = srv.client().chat.completions.create(
        model="kjv-target", messages=CHAT, max_tokens=SCHEMA_TOKENS, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "verse", "schema": SCHEMA}})
    check(r.choices[0].finish_reason == "stop", "the openai client's json_schema request ends: %s" %
          r.choices[0].finish_reason)
    check_schema_instance(r.choices[0].message.content, "the openai client's json_schema request")


def test_json_object(srv):
    counts = {"stop": 0, "length": 0}

    calls = [0]
    spellings = ({"response_format": {"type": "json_object"}}, {"structured_outputs": {"json_object": True}})

    def one(what, chat, extra):  # both spellings of the field in the first mode, the first after
        calls[0] += 1
        for field in spellings[: 1 if calls[0] > 1 else 2]:
            for max_tokens in (16, 96):
                st, text, finish, r = generate(srv, chat, dict(extra, **field), max_tokens)
                if not check(st == 200 and finish in ("stop", "length"), "json_object (%s): %d %s %s" % (
                        what, st, finish, r.get("error"))):
                    continue
                counts[finish] += 1
                if finish == "stop":
                    try:
                        ok = isinstance(json.loads(text), dict)
                    except ValueError:
                        ok = False
                    check(ok, "json_object (%s, %d tokens) ended: %r is a JSON object" % (what, max_tokens, text))
                else:
                    check(json_object_prefix(text), "json_object (%s, %d tokens) cut: %r is a prefix of a JSON "
                          "object" % (what, max_tokens, text))
    each_mode(one)
    print("  json_object outputs: %d ended (stop), %d cut (length)" % (counts["stop"], counts["length"]))


# ----------------------------------------------------------------------------------------------
# with the rest of a request
# ----------------------------------------------------------------------------------------------
def test_stream(srv):
    pattern = REGEXES[1]
    for path, body in (("/v1/completions", {"prompt": PROMPT}), ("/v1/chat/completions", {"messages": CHAT})):
        st, ctype, events = ts.sse_events(srv, path, dict(body, max_tokens=24, stream=True, temperature=1, seed=3,
                                                          guided_regex=pattern))
        pieces, finish = [], []
        for e in events[:-1]:
            c = json.loads(e.decode()[len("data: "):])["choices"][0]
            pieces.append((c.get("delta") or {}).get("content") or "" if "delta" in c else c.get("text") or "")
            finish.append(c.get("finish_reason"))
        text = "".join(pieces)
        check(st == 200 and events and events[-1] == b"data: [DONE]" and finish and finish[-1] == "stop" and
              all(f is None for f in finish[:-1]) and re.fullmatch(pattern, text) is not None,
              "%s streamed with a regex: %r %r" % (path, text, finish))


def test_n_stop_logprobs(srv):
    st, raw, _ = srv.request("POST", "/v1/completions", dict(prompt=PROMPT, max_tokens=24, n=3, temperature=1,
                                                             seed=5, guided_choice=CHOICES))
    r = json.loads(raw)
    texts = [c["text"] for c in r.get("choices", [])]
    check(st == 200 and len(texts) == 3 and all(t in CHOICES for t in texts) and
          all(c["finish_reason"] == "stop" for c in r["choices"]), "n = 3 with a choice: %r" % texts)
    pattern, base = REGEXES[1], dict(prompt=PROMPT, max_tokens=24, temperature=1, seed=4)
    st1, full, _, _ = generate(srv, False, dict(base, guided_regex=pattern))
    st2, raw, _ = srv.request("POST", "/v1/completions", dict(base, guided_regex=pattern, stop=["-"], logprobs=2))
    c = json.loads(raw)["choices"][0] if st2 == 200 else {}
    lp = c.get("logprobs") or {}
    check(st1 == st2 == 200 and full and c.get("text") == full.split("-")[0] and c.get("finish_reason") == "stop" and
          c.get("stop_reason") == "-" and re.fullmatch(r"[0-9]{3}", c.get("text", "")) is not None and
          len(lp.get("token_logprobs") or []) >= 1 and all(len(t) >= 1 for t in lp.get("top_logprobs") or [{}]),
          "a stop string and logprobs with a regex: %r (whole %r), logprobs %r" % (c.get("text"), full, lp))


# ----------------------------------------------------------------------------------------------
# the cache
# ----------------------------------------------------------------------------------------------
def cache_counts(srv):
    m = srv.metrics()
    return (int(m.get('specdec_grammar_cache_lookups_total{result="hit"}', -1)),
            int(m.get('specdec_grammar_cache_lookups_total{result="miss"}', -1)),
            int(m.get("specdec_grammar_cache_entries", -1)))


def test_cache(srv):
    h0, m0, _ = cache_counts(srv)
    rx = r"(amen|selah) [0-9]"
    for k in range(2):
        generate(srv, False, {"temperature": 0, "guided_regex": rx})
    h1, m1, e1 = cache_counts(srv)
    check(m1 == m0 + 1 and h1 == h0 + 1 and e1 >= 1, "a repeated regex compiles once: hits %d->%d misses %d->%d" % (
        h0, h1, m0, m1))
    generate(srv, False, {"temperature": 0, "guided_regex": rx + " "})  # another spec byte: another grammar
    check(cache_counts(srv)[1] == m1 + 1, "the key is the exact spec")
    for size, seq, want in (("2", "ABCAC", (1, 4, 2)), ("0", "AA", (0, 2, 0))):
        with ts.Server("--grammar-cache", size) as s2:
            for name in seq:
                st = generate(s2, False, {"temperature": 0, "guided_regex": "%s[0-9]" % name})[0]
                check(st == 200, "--grammar-cache %s: %s answered" % (size, name))
            check(cache_counts(s2) == want, "--grammar-cache %s after %s: (hits, misses, entries) %r, want %r" % (
                size, seq, cache_counts(s2), want))


# ----------------------------------------------------------------------------------------------
# errors and hostile constraints
# ----------------------------------------------------------------------------------------------
def expect_400(srv, what, body, param, chat=False, code=None, limit_s=None):
    """body: the constraint's fields (a dict), or a whole completions body as text."""
    t = time.time()
    if isinstance(body, str):
        st, raw, _ = srv.request("POST", "/v1/completions", body)
        r = json.loads(raw)
    else:
        st, _, _, r = generate(srv, chat, body)
    dt = time.time() - t
    err = r.get("error") or {}
    check(st == 400 and err.get("param") == param and err.get("message") and
          err.get("type") == "invalid_request_error" and (code is None or err.get("code") == code) and
          (limit_s is None or dt < limit_s),
          "%s: %d param %r code %r in %.3f s: %s" % (what, st, err.get("param"), err.get("code"), dt,
                                                     err.get("message")))
    if limit_s is not None:
        print("  %-44s refused in %.3f s" % (what, dt))
    ts.still_serving(srv, what)


def test_errors(srv):
    expect_400(srv, "a bad regex", {"guided_regex": "(a"}, "guided_regex")
    expect_400(srv, "a bad regex (structured_outputs)", {"structured_outputs": {"regex": "a{2,1}"}},
               "structured_outputs.regex")
    expect_400(srv, "an unsupported schema keyword", {"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object", "patternProperties": {"^a": {}}}}}}, "response_format", chat=True,
        code="unsupported_value")
    expect_400(srv, "a malformed schema string", {"guided_json": "{\"type\": "}, "guided_json")
    expect_400(srv, "a bad choice", {"guided_choice": ["a", 3]}, "guided_choice")
    expect_400(srv, "two constraints", {"guided_regex": "a", "guided_choice": ["a"]}, "guided_choice")
    expect_400(srv, "response_format + guided_json", {"response_format": {"type": "json_object"},
                                                      "guided_json": {"type": "object"}}, "guided_json", chat=True)
    expect_400(srv, "a left-recursive grammar", {"guided_grammar": "root ::= root \"a\" | \"b\""}, "guided_grammar")
    expect_400(srv, "a grammar with a lookahead", {"structured_outputs": {"grammar": "root ::= (= \"a\") [a-z]"}},
               "structured_outputs.grammar", chat=True, code="unsupported_value")
    expect_400(srv, "a grammar without root", {"grammar": "start ::= \"a\""}, "grammar")
    expect_400(srv, "a whitespace pattern", {"guided_json": {}, "guided_whitespace_pattern": "[ ]*"},
               "guided_whitespace_pattern", code="unsupported_value")
    for what, body, param in (("guided_regex of the wrong type", {"guided_regex": ["a"]}, "guided_regex"),
                              ("guided_json of the wrong type", {"guided_json": 5}, "guided_json"),
                              ("grammar of the wrong type", {"grammar": ["root ::= x"]}, "grammar"),
                              ("a json_schema without a schema", {"response_format": {"type": "json_schema",
                                                                                      "json_schema": {"name": "x"}}},
                               "response_format"),
                              ("an unknown response_format type", {"response_format": {"type": "xml"}},
                               "response_format"),
                              ("structured_outputs of the wrong type", {"structured_outputs": "json"},
                               "structured_outputs")):
        expect_400(srv, what, body, param)


def test_hostile(srv):
    # as text: json.dumps would recurse 20,000 levels
    deep = '{"prompt":"x","max_tokens":4,"guided_json":%s{}%s}' % ('{"type":"object","properties":{"a":' * 10000,
                                                                   "}}" * 10000)
    nested_text = '{"items":' * 10000 + "{}" + "}" * 10000
    mid_text = '{"items":' * 900 + "{}" + "}" * 900  # under the body's nesting limit and the size limit
    cases = [("a 1 MiB schema", {"response_format": {"type": "json_schema", "json_schema": {
                 "name": "x", "schema": {"type": "object", "description": "x" * (1 << 20)}}}}, "response_format"),
             ("a schema nested 10,000 deep", deep, None),
             ("a schema string nested 10,000 deep", {"guided_json": nested_text}, "guided_json"),
             ("a schema string nested 900 deep", {"guided_json": mid_text}, "guided_json"),
             ("the regex (a{1000}){1000}", {"guided_regex": "(a{1000}){1000}"}, "guided_regex"),
             ("a regex of groups nested 5,000 deep", {"guided_regex": "(" * 5000 + "a" + ")" * 5000}, "guided_regex"),
             ("a regex of 30 x [^x]{1000}", {"guided_regex": "[^x]{1000}" * 30}, "guided_regex"),
             ("a grammar of groups nested 5,000 deep", {"guided_grammar": "root ::= " + "(" * 5000 + '"a"' + ")" * 5000},
              "guided_grammar"),
             ("a grammar of 201 x [a]{1000}", {"guided_grammar": "root ::= " + "[a]{1000} " * 201}, "guided_grammar")]
    for what, body, param in cases:
        expect_400(srv, what, body, param, limit_s=1.0)


def main():
    t0 = time.time()
    test_prefix_checker()
    with ts.Server("--parallel", "4") as srv:
        tests = [test_regex, test_grammar, test_choice, test_json_schema, test_json_object, test_stream, test_n_stop_logprobs,
                 test_cache, test_errors, test_hostile]
        for fn in tests:
            ts.timed(fn, srv)
    print("structured output tests took %.1f s" % (time.time() - t0))
    print("%d passed, %d failed" % (ts.passed, ts.failed))
    return 1 if ts.failed else 0


if __name__ == "__main__":
    sys.exit(main())
