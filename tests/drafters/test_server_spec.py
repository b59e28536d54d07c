#!/usr/bin/env python3
"""test_server_spec.py — `specdec serve --speculative-config JSON` and the per-request
"speculative_config" extension (vLLM's keys), on loopback, the bundled pair on the CPU.

    test_server_spec.py SPECDEC_BINARY MODELS_DIR [--quick]

Checks: a server started with {"method": "ngram", ...} and no -m runs the bundled target
alone, its completions (temperature 0) equal `specdec generate` plain decoding and report
"speculative": {"draft_method": "ngram"}; a request's own speculative_config overrides it
(draft_model on a server with -md, ngram with a tree); with --ngram-corpus, or started with "suffix", a
request repeated drafts from the first one's output (fewer rounds, the same text), suffix_decoding_* keys and
"suffix" on a server without a corpus answer 400; bad values answer 400 with
"param" naming the field (method, num_speculative_tokens, prompt_lookup_min/max, model
with ngram, draft_model without a draft model, a tree without a drafter); bad
--speculative-config text exits 2 with a message. With the EAGLE-3 head (-md kjv-eagle3, or
{"method": "eagle3", "model": HEAD} at start): requests draft with eagle3 by default and with a
request's {"method": "eagle3"} (chains and a tree), their text equal to plain decoding and
their statistics to `specdec generate -md HEAD`; {"method": "draft_model"} is a 400 naming
speculative_config.method, as {"method": "eagle3"} is on a server with a draft model; a start
whose method does not fit the draft exits 2. --quick (sanitizer builds): 4 tokens, the first
server and the head server only.
"""
import json
import subprocess

from dtest import BIN, DRAFT, MODELS, QUICK, TARGET, Server, check, finish

N = 4 if QUICK else 16
PROMPT = ("In the beginning God created the heaven and the earth. And the earth was without form, and void. "
          "In the beginning God created the heaven and the earth. And the earth was")


def completion(extra):
    return dict({"prompt": PROMPT, "max_tokens": N, "temperature": 0}, **extra)


HEAD = f"{MODELS}/kjv-eagle3"
ref = json.loads(subprocess.run([BIN, "generate", "-m", TARGET, "-p", PROMPT, "-n", str(N), "--temp", "0", "--json",
                                 "--ignore-eos"], capture_output=True, text=True, timeout=120).stdout)


def generate_head(*extra):
    """`specdec generate -md HEAD` (the engine), the server's reference with the head."""
    return json.loads(subprocess.run([BIN, "generate", "-m", TARGET, "-md", HEAD, "-p", PROMPT, "-n", str(N), "--temp",
                                      "0", "--json", "--ignore-eos", "--backend", "cpu", *extra],
                                     capture_output=True, text=True, timeout=120).stdout)


def check_head_server(srv, what):
    """A server with the head: eagle3 by default, by request (a chain of 3, a tree), refusals."""
    for extra, args in (({}, []), ({"speculative_config": {"method": "eagle3", "num_speculative_tokens": 3}},
                                   ["--draft-max", "3"]),
                        ({"speculative_config": {"method": "eagle3"}, "tree": [3, 2]}, ["--tree", "3,2"])):
        st, r = srv.post(completion(dict(extra, ignore_eos=True)))
        eng = generate_head(*args)
        sp = r.get("speculative", {}) if st == 200 else {}
        check(st == 200 and sp.get("draft_method") == "eagle3" and r["choices"][0]["text"] == ref["text"] and
              sp.get("n_drafted") == eng["stats"]["n_drafted"] and sp.get("n_accepted") == eng["stats"]["n_accepted"]
              and sp.get("n_drafted", 0) > 0, f"{what} {extra}: {st} {r} / {eng['stats']}")
    st, r = srv.post(completion({"speculative_config": {"method": "draft_model"}}))
    check(st == 400 and r["error"]["param"] == "speculative_config.method" and "EAGLE-3" in r["error"]["message"],
          f"{what}: draft_model with a head: {st} {r}")
    st, r = srv.post(completion({"speculative_config": {"method": "ngram"}}))
    check(st == 200 and r["speculative"]["draft_method"] == "ngram" and r["choices"][0]["text"] == ref["text"],
          f"{what}: ngram beside a head: {st} {r}")

srv = Server("--speculative-config", '{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 3}')
try:
    st, r = srv.post(completion({}))
    spec = r.get("speculative", {}) if st == 200 else {}
    check(st == 200 and spec.get("draft_method") == "ngram" and spec.get("n_draft") == 5, f"server default ngram: {st} {r}")
    check(st == 200 and r["choices"][0]["text"] == ref["text"], f"ngram text != plain: {r} / {ref['text']!r}")
    st, r = srv.post(completion({"speculative_config": {"method": "ngram", "num_speculative_tokens": 2}, "tree": [2, 2]}))
    check(st == 200 and r["speculative"]["draft_method"] == "ngram" and r["choices"][0]["text"] == ref["text"],
          f"request ngram tree: {st} {r}")
    bad = [({"method": "medusa"}, "speculative_config.method"),
           ({"method": "draft_model"}, "speculative_config.method"),
           ({"method": "eagle3"}, "speculative_config.method"),
           ({"num_speculative_tokens": 17}, "speculative_config.num_speculative_tokens"),
           ({"prompt_lookup_min": 0}, "speculative_config.prompt_lookup_min"),
           ({"prompt_lookup_max": 65}, "speculative_config.prompt_lookup_max"),
           ({"prompt_lookup_min": 5, "prompt_lookup_max": 3}, "speculative_config.prompt_lookup_max"),
           ({"method": "ngram", "model": DRAFT}, "speculative_config.model"),
           ("ngram", "speculative_config")]
    for cfg, param in bad:
        st, r = srv.post(completion({"speculative_config": cfg}))
        err = r.get("error", {})
        check(st == 400 and (param is None or err.get("param") == param) and err.get("message"),
              f"bad speculative_config {cfg}: {st} {r}")
    st, r = srv.post(completion({"speculative_config": {"method": "eagle3"}}))
    check(st == 400 and "EAGLE" in r.get("error", {}).get("message", ""), f"eagle3: {st} {r}")
finally:
    srv.stop()

# --ngram-corpus, and vLLM's "suffix" method (the n-gram drafter with a corpus, one kept by default): the same
# request twice; the second drafts from the first's output (fewer rounds), the same text
for args in (("--speculative-config", '{"method": "ngram"}', "--ngram-corpus", "65536"),
             ("--speculative-config", '{"method": "suffix", "num_speculative_tokens": 6}')):
    srv = Server(*args)
    try:
        rs = [srv.post(completion({"ignore_eos": True})) for _ in range(2)]
        check(all(st == 200 and r["choices"][0]["text"] == ref["text"] and r["speculative"]["draft_method"] == "ngram"
                  for st, r in rs), f"{args}: {rs}")
        if all(st == 200 for st, _ in rs) and not QUICK:
            n = [r["speculative"]["n_rounds"] for _, r in rs]
            check(n[1] < n[0], f"{args}: rounds {n}")
        st, r = srv.post(completion({"speculative_config": {"method": "suffix", "suffix_decoding_max_tree_depth": 8}}))
        check(st == 400 and r.get("error", {}).get("param") == "speculative_config.suffix_decoding_max_tree_depth",
              f"suffix_decoding_*: {st} {r}")
    finally:
        srv.stop()
srv = Server("--speculative-config", '{"method": "ngram"}')  # no corpus: a request's "suffix" is refused
try:
    st, r = srv.post(completion({"speculative_config": {"method": "suffix"}}))
    check(st == 400 and r.get("error", {}).get("param") == "speculative_config.method" and
          "--ngram-corpus" in r["error"]["message"], f"suffix without a corpus: {st} {r}")
finally:
    srv.stop()

srv = Server("-m", TARGET, "-md", HEAD)
try:
    check_head_server(srv, "-md HEAD")
finally:
    srv.stop()

if QUICK:
    finish()
srv = Server("--speculative-config", json.dumps({"method": "eagle3", "model": HEAD}))
try:
    check_head_server(srv, "--speculative-config eagle3")
finally:
    srv.stop()

srv = Server("-m", TARGET, "-md", DRAFT, "--speculative-config", '{"method": "ngram"}')
try:
    st, r = srv.post(completion({"speculative_config": {"method": "draft_model", "num_speculative_tokens": 3}}))
    check(st == 200 and r["speculative"]["draft_method"] == "model" and r["speculative"]["n_draft"] == 3 and
          r["choices"][0]["text"] == ref["text"], f"draft_model over the server's ngram: {st} {r}")
    st, r = srv.post(completion({}))
    check(st == 200 and r["speculative"]["draft_method"] == "ngram", f"server default ngram with -md: {st} {r}")
    st, r = srv.post(completion({"speculative_config": {"model": "other-draft"}}))
    check(st == 400 and r["error"]["param"] == "speculative_config.model", f"another draft model: {st} {r}")
    st, r = srv.post(completion({"speculative_config": {"method": "eagle3"}}))
    check(st == 400 and r["error"]["param"] == "speculative_config.method" and "EAGLE-3" in r["error"]["message"],
          f"eagle3 with a draft model: {st} {r}")
finally:
    srv.stop()

srv = Server("-m", TARGET)
try:
    st, r = srv.post(completion({"tree": [2, 2]}))
    check(st == 400 and r["error"]["param"] == "tree", f"a tree without a drafter: {st} {r}")
    st, r = srv.post(completion({}))
    check(st == 200 and r["speculative"]["draft_method"] == "none", f"plain: {st} {r}")
finally:
    srv.stop()

for text in ('{"method": "ngram", "model": "x"}', '{"method": 3}', "[1]", "{", '{"method": "draft_model"}',
             '{"method": "eagle3"}'):
    p = subprocess.run([BIN, "serve", "--port", "0", "-m", TARGET, "--speculative-config", text], capture_output=True,
                       text=True, timeout=60)
    check(p.returncode == 2 and "--speculative-config" in p.stderr, f"bad --speculative-config {text}: {p.returncode} "
          f"{p.stderr[-300:]!r}")
# a method that does not fit the draft loaded: refused once it is loaded, exit 2
for md, text in ((HEAD, '{"method": "draft_model"}'), (DRAFT, '{"method": "eagle3"}')):
    p = subprocess.run([BIN, "serve", "--port", "0", "--backend", "cpu", "-m", TARGET, "-md", md,
                        "--speculative-config", text], capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and "--speculative-config" in p.stderr and "EAGLE-3 head" in p.stderr,
          f"-md {md} --speculative-config {text}: {p.returncode} {p.stderr[-300:]!r}")
finish()
