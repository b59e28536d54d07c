"""Structured output from Python: vLLM's StructuredOutputsParams (SamplingParams(structured_outputs=...),
vLLM >= 0.10.2) and GuidedDecodingParams (SamplingParams(guided_decoding=...), vLLM <= 0.10), over
libspecdec 0.5.1's specdec_grammar_compile and specdec_generate_params.grammar (docs/STRUCTURED.md).

- every kind constrains the output, on the bundled pair (speculative, the draft model) and the target
  alone (plain decoding), at temperature 0 and 1 (fixed seeds), several prompts per generate call:
  regex (the text re.fullmatch-es the pattern), choice (the text is one of the choices), a GBNF grammar
  (grammar=..., vLLM's name; the text re.fullmatch-es an equivalent regex), JSON schema
  with bounded fields (json.loads, then each field's type, enum, length and bounds), json_object
  (finish "stop" -> json.loads gives a dict). Each request must finish "stop": every pattern here has
  a bounded longest match well inside max_tokens, so a request cut by "length" is a failure too;
- exactness: greedy speculative tokens under a grammar equal greedy plain decoding's under it;
- stream() and chat() apply the constraint too, n > 1 gives n constrained samples, a call mixing
  constrained and unconstrained prompts constrains only the former, one call may mix kinds, and four
  threads may compile and generate on one fresh LLM at once;
- errors raise the package's types with the library's message: two constraints or none, wrong types,
  structural_tag / whitespace_pattern / another backend (UnsupportedError), a malformed regex, schema
  or grammar (InvalidArgumentError, the library's detail), an unsupported schema keyword or grammar
  feature (UnsupportedError naming it); nothing is submitted and the LLM stays usable;
- the LLM's grammar cache: the same (kind, spec) gives the same compiled grammar (a dict schema and its
  json.dumps text alike), an LRU bounded by GRAMMAR_CACHE_SIZE; a grammar evicted while requests made
  from it wait to be submitted still serves them, and is freed once they are done; close() frees them all.
Leaks over many compiles and LLM cycles: test_leaks.py.
"""
import gc
import json
import re
import weakref

import pytest

import specdec
import specdec.llm
from conftest import TARGET

SP = specdec.SamplingParams
SO = specdec.StructuredOutputsParams
PROMPTS = ["And God said", "In the beginning", "The Lord is my shepherd;"]

REGEX = r"[0-9]{3}-[a-z]{2,4}"
YES_NO = r"(yes|no|the LORD)"
CHOICES = ["yes", "no", "the LORD", "Moses, the man of God"]
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "tribe": {"enum": ["Judah", "Levi", "Dan"]},
        "faithful": {"type": "boolean"},
        "kin": {"type": "object", "properties": {"father": {"type": "string", "maxLength": 8}},
                "required": ["father"]},
        "sons": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3},
    },
    "required": ["name", "tribe", "faithful", "kin", "sons"],
}


def check_schema_instance(text):
    """The text is a JSON instance of SCHEMA: parsed, then every field by hand."""
    v = json.loads(text)
    assert isinstance(v, dict) and set(v) == {"name", "tribe", "faithful", "kin", "sons"}, text
    assert isinstance(v["name"], str) and len(v["name"]) <= 12, text
    assert v["tribe"] in ("Judah", "Levi", "Dan"), text
    assert isinstance(v["faithful"], bool), text
    assert isinstance(v["kin"], dict) and set(v["kin"]) == {"father"}, text
    assert isinstance(v["kin"]["father"], str) and len(v["kin"]["father"]) <= 8, text
    assert isinstance(v["sons"], list) and len(v["sons"]) <= 3 and all(s in ("a", "b") for s in v["sons"]), text


@pytest.fixture(scope="module")
def llm_plain():
    """The target alone: plain decoding."""
    with specdec.LLM(model=TARGET, backend="cpu") as m:
        yield m


@pytest.fixture(params=["speculative", "plain"])
def engine(request, llm, llm_plain):
    return llm if request.param == "speculative" else llm_plain


def run(m, so, temperature, max_tokens, prompts=PROMPTS, outputs=False):
    """Every prompt's first CompletionOutput (outputs: the RequestOutputs) of one generate call."""
    params = SP(temperature=temperature, seed=11, max_tokens=max_tokens, structured_outputs=so)
    outs = m.generate(prompts, params, use_tqdm=False)
    assert len(outs) == len(prompts)
    return outs if outputs else [o.outputs[0] for o in outs]


# ---- each kind, speculative and plain, temperature 0 and 1 --------------------------------------------
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_regex(engine, temperature):
    for c in run(engine, SO(regex=REGEX), temperature, 24):
        assert c.finish_reason == "stop", (c.text, c.token_ids)
        assert re.fullmatch(REGEX, c.text), c.text


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_regex_utf8_and_alternatives(engine, temperature):
    pattern = r"(Amen|Selah|Hallelujah), (él|ça) [ab]{1,3}!"
    for c in run(engine, SO(regex=pattern), temperature, 40):
        assert c.finish_reason == "stop", c.text
        assert re.fullmatch(pattern, c.text), c.text


GBNF = 'root ::= answer " " num  # a finite language\nanswer ::= "yes" | "no"\nnum ::= [0-9]{1,3}\n'


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_grammar(engine, temperature):
    for c in run(engine, SO(grammar=GBNF), temperature, 24):
        assert c.finish_reason == "stop" and re.fullmatch(r"(yes|no) [0-9]{1,3}", c.text), c.text


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_choice(engine, temperature):
    for c in run(engine, SO(choice=CHOICES), temperature, 16):
        assert c.finish_reason == "stop" and c.text in CHOICES, c.text


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_json_schema(engine, temperature):
    for c in run(engine, SO(json=SCHEMA), temperature, 160):
        assert c.finish_reason == "stop", c.text
        check_schema_instance(c.text)


def json_object_prefix(text):
    """True if text is a prefix of some JSON object text (whitespace allowed before it). The check: json's
    decoder stops at the first byte no continuation can fix, so text is a viable prefix exactly when, for
    one of a few closing pieces (a partial literal, number, escape or string finished), the decoder fails
    only at the very end of the input (or succeeds). The object: the first non-space character is '{'."""
    if not text.lstrip(" \t\n\r").startswith("{"):
        return False
    for piece in ("", '"', "0", "ue", "rue", "e", "alse", "lse", "se", "ull", "ll", "l", 'n"', '0000"'):
        q = text + piece
        try:
            json.loads(q)
            return True
        except json.JSONDecodeError as e:
            if e.pos == len(q):
                return True
    return False


def test_json_object_prefix_check():
    """The helper above accepts prefixes of objects and refuses texts no continuation makes an object."""
    for good in ['{', ' \n{"a', '{"a":', '{"a": tr', '{"a": [1, -', '{"a": "x\\', '{"a": "\\u12', '{"a": 1e',
                 '{"a": {"b": null}, "c": fals', '{}']:
        assert json_object_prefix(good), good
    for bad in ['[', '"a"', '{"a" 1', '{"a": tx', '{"a": 1}}', '{,', '{"a": "\x01', '{}x']:
        assert not json_object_prefix(bad), bad


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_json_object(engine, temperature):
    """Any JSON object: unbounded, and the bundled model writes scripture inside a string, rarely closing
    it, so a request may run to "length": its text must then be a prefix of a JSON object
    (json_object_prefix). One that stops must parse to a dict. To see stops, a second call (temperature 1)
    biases the '"' and '}' tokens by +12 (applied after the grammar's mask): at least one must stop."""
    outs = run(engine, SO(json_object=True), temperature, 64)
    if temperature:
        tok = engine.tokenizer
        bias = {tok.encode('"')[-1]: 12.0, tok.encode("}")[-1]: 12.0}
        outs += [o.outputs[0] for o in engine.generate(PROMPTS, SP(temperature=1.0, seed=11, max_tokens=96,
                                                                   logit_bias=bias,
                                                                   structured_outputs=SO(json_object=True)),
                                                       use_tqdm=False)]
    stopped = [c for c in outs if c.finish_reason == "stop"]
    for c in outs:
        if c.finish_reason == "stop":
            assert isinstance(json.loads(c.text), dict), c.text
        else:
            assert c.finish_reason == "length" and json_object_prefix(c.text), c.text
    assert stopped or not temperature, [c.text for c in outs]


@pytest.mark.quick
def test_guided_decoding_alias(llm):
    """GuidedDecodingParams / guided_decoding and a dict of the fields give what structured_outputs does."""
    assert specdec.GuidedDecodingParams is specdec.StructuredOutputsParams
    c = llm.generate(PROMPTS[0], SP(temperature=0, max_tokens=8,
                                    guided_decoding=specdec.GuidedDecodingParams(regex=YES_NO)),
                     use_tqdm=False)[0].outputs[0]
    assert c.finish_reason == "stop" and re.fullmatch(YES_NO, c.text), c.text
    for so in ({"regex": YES_NO}, SO(regex=YES_NO)):
        d = llm.generate(PROMPTS[0], SP(temperature=0, max_tokens=8, structured_outputs=so),
                         use_tqdm=False)[0].outputs[0]
        assert d.token_ids == c.token_ids


# ---- exactness and the other entry points -------------------------------------------------------------
@pytest.mark.parametrize("so", [SO(regex=REGEX), SO(json=SCHEMA), SO(choice=CHOICES)], ids=["regex", "json", "choice"])
def test_greedy_speculative_equals_plain(llm, llm_plain, so):
    spec = run(llm, so, 0.0, 160, outputs=True)
    plain = run(llm_plain, so, 0.0, 160, outputs=True)
    assert [o.outputs[0].token_ids for o in spec] == [o.outputs[0].token_ids for o in plain]
    assert sum(o.metrics.n_drafted for o in spec) > 0
    # plain decoding drafts only what the grammar forces (jump-forward), and all of it is accepted
    assert all(o.metrics.n_drafted == o.metrics.n_forced == o.metrics.n_accepted for o in plain)


def test_structured_outputs_after(llm, llm_plain):
    """structured_outputs_after (libspecdec 0.5.4): unconstrained through the first marker (here ",", a
    token the model writes mid-output), the regex after it; speculative equals plain; refusals."""
    comma = llm.get_tokenizer().encode(",", add_special_tokens=False)
    assert len(comma) == 1
    free = llm_plain.generate(PROMPTS[0], SP(temperature=0, max_tokens=48), use_tqdm=False)[0].outputs[0]
    at = free.token_ids.index(comma[0])
    params = SP(temperature=0, max_tokens=80, structured_outputs=SO(regex=" (yes|no)\\."), structured_outputs_after=comma)
    spec, plain = (m.generate(PROMPTS[0], params, use_tqdm=False)[0].outputs[0] for m in (llm, llm_plain))
    assert spec.token_ids == plain.token_ids
    assert list(plain.token_ids[:at + 1]) == list(free.token_ids[:at + 1])
    head, _, tail = plain.text.partition(",")
    assert free.text.startswith(head + ",") and tail in (" yes.", " no.") and plain.finish_reason == "stop", plain.text
    with pytest.raises(specdec.InvalidArgumentError, match="structured_outputs_after"):
        SP(structured_outputs_after=comma)  # no constraint to start
    with pytest.raises(specdec.InvalidArgumentError, match="structured_outputs_after"):
        SP(structured_outputs=SO(regex="a"), structured_outputs_after=[])
    with pytest.raises(specdec.InvalidArgumentError, match="structured_outputs_after"):
        SP(structured_outputs=SO(regex="a"), structured_outputs_after=list(range(33)))


def test_mixed_call_and_n(llm):
    """One generate call: a regex, another regex with n=3, an unconstrained prompt."""
    params = [SP(temperature=1.0, seed=3, max_tokens=24, structured_outputs=SO(regex=REGEX)),
              SP(temperature=1.0, seed=4, max_tokens=16, n=3, structured_outputs=SO(regex=YES_NO)),
              SP(temperature=0, max_tokens=8)]
    outs = llm.generate(PROMPTS, params, use_tqdm=False)
    assert re.fullmatch(REGEX, outs[0].outputs[0].text), outs[0].outputs[0].text
    assert len(outs[1].outputs) == 3
    assert all(re.fullmatch(YES_NO, c.text) and c.finish_reason == "stop" for c in outs[1].outputs), outs[1].outputs
    free = llm.generate(PROMPTS[2], SP(temperature=0, max_tokens=8), use_tqdm=False)[0].outputs[0]
    assert outs[2].outputs[0].token_ids == free.token_ids  # the unconstrained one is untouched


def test_mixed_kinds(llm):
    """One generate call: a choice with n=3, a schema, a dict-given choice, json_object."""
    params = [SP(temperature=1.0, seed=4, max_tokens=16, n=3, structured_outputs=SO(choice=CHOICES)),
              SP(temperature=0, max_tokens=160, structured_outputs=SO(json=SCHEMA)),
              SP(temperature=0, max_tokens=16, guided_decoding={"choice": ["yes", "no"]}),
              SP(temperature=0, max_tokens=96, structured_outputs=SO(json_object=True))]
    outs = llm.generate(PROMPTS + ["And Moses said"], params, use_tqdm=False)
    assert len(outs[0].outputs) == 3 and all(c.text in CHOICES and c.finish_reason == "stop" for c in outs[0].outputs)
    check_schema_instance(outs[1].outputs[0].text)
    assert outs[2].outputs[0].text in ("yes", "no")
    assert json_object_prefix(outs[3].outputs[0].text), outs[3].outputs[0].text


def test_stream_and_chat(llm):
    params = SP(temperature=1.0, seed=5, max_tokens=24, structured_outputs=SO(regex=REGEX))
    g = llm.stream(PROMPTS[1], params)
    deltas = []
    try:
        while True:
            deltas.append(next(g))
    except StopIteration as stop:
        out = stop.value
    assert "".join(deltas) == out.outputs[0].text and re.fullmatch(REGEX, out.outputs[0].text), deltas
    assert out.outputs[0].token_ids == llm.generate(PROMPTS[1], params, use_tqdm=False)[0].outputs[0].token_ids
    reply = llm.chat([{"role": "user", "content": "Who made the heaven?"}],
                     SP(temperature=0, max_tokens=16, structured_outputs=SO(regex=YES_NO)), use_tqdm=False)
    assert re.fullmatch(YES_NO, reply[0].outputs[0].text), reply[0].outputs[0].text


# ---- errors -------------------------------------------------------------------------------------------
@pytest.mark.quick
def test_constraint_count_and_types():
    with pytest.raises(specdec.InvalidArgumentError, match="exactly one of .* not regex and choice"):
        SO(regex="a", choice=["a"])
    with pytest.raises(specdec.InvalidArgumentError, match="not none"):
        SO()
    with pytest.raises(specdec.InvalidArgumentError, match="not none"):
        SO(json_object=False)
    assert SO(regex="a", json_object=False).grammar_spec() == ("SPECDEC_GRAMMAR_REGEX", b"a")
    for kw, field in [({"regex": 5}, "regex"), ({"choice": "yes"}, "choice"), ({"choice": ["a", 1]}, "choice"),
                      ({"json": 3}, "json"), ({"json_object": 1}, "json_object"), ({"grammar": ["x"]}, "grammar"),
                      ({"regex": "a", "disable_fallback": "no"}, "disable_fallback")]:
        with pytest.raises(specdec.InvalidArgumentError, match=field):
            SO(**kw)
    with pytest.raises(specdec.InvalidArgumentError, match="structured_outputs"):
        SP(structured_outputs="[0-9]+")
    with pytest.raises(specdec.InvalidArgumentError, match="unexpected keyword"):
        SP(structured_outputs={"regexp": "a"})
    with pytest.raises(specdec.InvalidArgumentError, match="two names for one constraint"):
        SP(structured_outputs=SO(regex="a"), guided_decoding=SO(regex="b"))
    assert SP(structured_outputs=SO(regex="a"), guided_decoding=SO(regex="a")).constraint == SO(regex="a")


@pytest.mark.quick
@pytest.mark.parametrize("kw", [{"structural_tag": "{}"},
                                {"regex": "a", "whitespace_pattern": "[ ]?"}, {"regex": "a", "backend": "xgrammar"}])
def test_unsupported_fields(kw):
    field = next(k for k in kw if k != "regex")
    with pytest.raises(specdec.UnsupportedError, match=field) as e:
        SO(**kw)
    assert e.value.status_name == "SPECDEC_ERR_UNSUPPORTED"


@pytest.mark.quick
def test_library_refusals(llm):
    """A malformed spec is the library's INVALID_ARGUMENT, an unsupported feature its UNSUPPORTED, each with
    its message (naming what and where) after the field's name; nothing is submitted."""
    check_refusals(llm, [(SO(regex="(ab"), specdec.InvalidArgumentError, "structured_outputs.regex: regex"),
                         (SO(regex="a{3,1}"), specdec.InvalidArgumentError, "structured_outputs.regex: regex"),
                         (SO(regex=r"(a)\1"), specdec.UnsupportedError, "structured_outputs.regex: regex")])
    with pytest.raises(specdec.InvalidArgumentError, match="guided_decoding.regex: "):
        llm.generate(PROMPTS[0], SP(max_tokens=4, guided_decoding=SO(regex="(ab")), use_tqdm=False)


@pytest.mark.quick
def test_library_refusals_json_choice(llm):
    check_refusals(llm, [(SO(json="{not json"), specdec.InvalidArgumentError, "structured_outputs.json: "),
                         (SO(json={"type": "object", "patternProperties": {"^a": {}}}), specdec.UnsupportedError,
                          "patternProperties"),
                         (SO(choice=[]), specdec.InvalidArgumentError, "structured_outputs.choice: "),
                         (SO(grammar='root ::= root "a" | "b"'), specdec.InvalidArgumentError, "left-recursive"),
                         (SO(grammar='root ::= (= "a") "a"'), specdec.UnsupportedError, "lookahead"),
                         (SO(grammar=GBNF), None, None),
                         (SO(json_object=True), None, None)])


def check_refusals(llm, cases):
    """Each (constraint, error class, text in the message) raises before any request is submitted; a
    case with class None must work. The LLM serves a constrained request afterwards."""
    before = llm.scheduler_metrics()
    for so, cls, text in cases:
        if cls is None:
            llm._compiled_grammar(so)
            continue
        with pytest.raises(cls) as e:
            llm.generate(PROMPTS, SP(max_tokens=4, structured_outputs=so), use_tqdm=False)
        assert text in e.value.message, (so, e.value.message)
        detail = e.value.message.split(": ", 2)[-1]
        assert detail and detail != e.value.status_name, e.value.message  # the library's own words follow
    after = llm.scheduler_metrics()
    assert (after["submitted"], after["rejected"]) == (before["submitted"], before["rejected"])  # refused first
    c = llm.generate(PROMPTS[0], SP(temperature=0, max_tokens=8, structured_outputs=SO(regex=YES_NO)),
                     use_tqdm=False)[0].outputs[0]
    assert re.fullmatch(YES_NO, c.text), c.text


def test_older_library_refuses(llm, monkeypatch):
    """A libspecdec without specdec_generate_params.grammar (before 0.5.1): UnsupportedError naming it."""
    b = specdec._ffi.binding()
    real = b.has_field
    monkeypatch.setattr(b, "has_field", lambda s, f: False if (s, f) == ("specdec_generate_params", "grammar")
                        else real(s, f))
    with pytest.raises(specdec.UnsupportedError, match="0.5.1"):
        llm.generate(PROMPTS[0], SP(max_tokens=4, structured_outputs=SO(regex="[a-z]+x")), use_tqdm=False)


# ---- the grammar cache --------------------------------------------------------------------------------
@pytest.mark.quick
def test_cache_same_spec_same_grammar(llm):
    g = llm._compiled_grammar(SO(regex=REGEX))
    assert g.handle is not None and llm._compiled_grammar(SO(regex=REGEX)) is g
    assert llm._compiled_grammar(specdec.GuidedDecodingParams(regex=REGEX)) is g
    assert llm._compiled_grammar(SO(regex=REGEX + "x")) is not g


@pytest.mark.quick
def test_cache_same_spec_same_grammar_json_choice(llm):
    j = llm._compiled_grammar(SO(json=SCHEMA))
    assert llm._compiled_grammar(SO(json=json.dumps(SCHEMA))) is j  # the dict is serialised with json.dumps
    assert llm._compiled_grammar(SO(choice=["yes", "no"])) is llm._compiled_grammar(SO(choice=["yes", "no"]))
    assert llm._compiled_grammar(SO(choice=["yes", "no"])) is not llm._compiled_grammar(SO(choice=["no", "yes"]))
    assert llm._compiled_grammar(SO(json_object=True)) is llm._compiled_grammar(SO(json_object=True))


@pytest.mark.quick
def test_cache_lru_and_lifetime(monkeypatch):
    """With a cache of 2, one call of 6 prompts with 6 distinct grammars evicts the first four before their
    requests are submitted (a call compiles all before it submits any): each still constrains its request,
    and every evicted one is freed once the call is done; close() frees the cached ones."""
    monkeypatch.setattr(specdec.llm, "GRAMMAR_CACHE_SIZE", 2)
    words = ["Amen", "Selah", "Lord", "God", "Moses", "Aaron"]
    with specdec.LLM(backend="cpu", max_num_seqs=2) as m:
        params = [SP(temperature=1.0, seed=i, max_tokens=16, structured_outputs=SO(regex=f"{w}( [0-9])?"))
                  for i, w in enumerate(words)]
        firsts = [m._compiled_grammar(p.constraint) for p in params[:2]]
        refs = [weakref.ref(g) for g in firsts]
        del firsts
        outs = m.generate(["And God said"] * len(words), params, use_tqdm=False)
        for w, o in zip(words, outs):
            assert o.outputs[0].finish_reason == "stop" and re.fullmatch(f"{w}( [0-9])?", o.outputs[0].text), \
                (w, o.outputs[0].text)
        gc.collect()
        assert [r() for r in refs] == [None, None]  # evicted and, their requests done, freed
        assert len(m._grammars) == 2
        kept = list(m._grammars.values())
        assert [g.key[1] for g in kept] == [b"Moses( [0-9])?", b"Aaron( [0-9])?"]
    assert all(g.handle is None for g in kept)  # close() freed them
    with pytest.raises(specdec.ShutDownError):
        m.generate("And God said", params[0], use_tqdm=False)


def test_threads_compile_and_generate():
    """Four threads on a fresh LLM at once: the first grammars of its tokenizer compiled concurrently
    (the library indexes the vocabulary with the first), each thread's requests constrained by its own
    spec, plus a shared one compiled by whichever thread comes first and cached once."""
    import threading
    patterns = [r"[0-9]{2}", REGEX, r"(Amen|Selah)!", r"[a-z]{1,6}( [a-z]{1,6})?"]
    specs = [SO(regex=p) for p in patterns]
    checks = [lambda t, p=p: re.fullmatch(p, t) for p in patterns]
    shared = SO(regex="(yea|nay)")
    errors, texts = [], [None] * len(specs)
    with specdec.LLM(backend="cpu", max_num_seqs=4) as m:
        barrier = threading.Barrier(len(specs))

        def work(i):
            try:
                barrier.wait()
                outs = m.generate(PROMPTS, SP(temperature=1.0, seed=i, max_tokens=160, structured_outputs=specs[i]),
                                  use_tqdm=False)
                texts[i] = [o.outputs[0].text for o in outs]
                both = m.generate(PROMPTS[0], SP(temperature=0, max_tokens=8, structured_outputs=shared),
                                  use_tqdm=False)
                texts[i].append(both[0].outputs[0].text)
            except BaseException as e:  # reported by the main thread
                errors.append(e)
        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(specs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert len([k for k in m._grammars if k[1] == b"(yea|nay)"]) == 1
    for i, got in enumerate(texts):
        assert all(checks[i](t) for t in got[:-1]), (i, got)
        assert got[-1] in ("yea", "nay") and len({t[-1] for t in texts}) == 1, texts
