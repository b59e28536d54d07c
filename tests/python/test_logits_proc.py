"""SamplingParams' logits processors (vLLM's presence_penalty, frequency_penalty, repetition_penalty,
logit_bias, min_tokens, stop_token_ids) over libspecdec 0.5's specdec_generate_params fields of the same
names (docs/SAMPLING.md "Logits processors"), and vLLM's prompt field cache_salt.

- effects, greedy on the bundled pair: a -100 bias on the first token changes it, a +100 bias on another
  id makes it the first; stop_token_ids stops right after the id with finish_reason "stop" and
  stop_reason = the id (generate with n > 1 and stream() too); min_tokens keeps the id out of the first
  min_tokens tokens; a penalty of 2 (each of the three) changes the output;
- exactness: with the processors, the speculative LLM's greedy tokens equal a draft-less LLM's (plain
  decoding), which drafts nothing while the speculative one does;
- every bad value raises InvalidArgumentError (a ValueError) naming the field: at construction for types
  and ranges, at generate (the library's INVALID_ARGUMENT) for ids past the vocabulary;
- an older library (its header without the fields, simulated by hiding them from has_field) raises
  UnsupportedError naming the field for each one set, while the defaults still work;
- cache_salt: the FNV-1a 64 of the server (its published test vectors, and the constants of
  tools/server/sd_server_request.c's parse_cache_salt), output-neutral, confining the prefix cache to one
  salt (a repeated salted prompt is cached, another salt or none is not); bad salts raise.
"""
import os
import re

import pytest

import specdec
from conftest import TARGET
from specdec import _ffi
from specdec.llm import _enum_short, _fnv1a64, cache_salt_hash
from specdec.sampling import MAX_LOGIT_BIAS, MAX_STOP_TOKEN_IDS, PROCESSOR_DEFAULTS

SP = specdec.SamplingParams
PROMPTS = ["And God said", "In the beginning", "The Lord is my shepherd;"]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
# 47 tokens on the bundled tokenizer (two full KV blocks and some); no other request of this file sends it
LONG = ("And the LORD spake unto Moses, saying, Speak unto the children of Israel, and say unto them, When ye "
        "be come into the land which I give unto you, then shall the land keep a sabbath unto the LORD.")


def gen(llm, prompt, **kw):
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 16)
    return llm.generate(prompt, SP(**kw), use_tqdm=False)[0]


@pytest.fixture(scope="module")
def llm_plain():
    """The target alone: plain decoding, the reference of exactness."""
    with specdec.LLM(model=TARGET, backend="cpu") as m:
        yield m


def first_unique(tokens, start=1):
    """(k, id): the first position >= start whose id does not occur before it."""
    for k in range(start, len(tokens)):
        if tokens[k] not in tokens[:k]:
            return k, tokens[k]
    raise AssertionError(f"no fresh id after position {start} in {tokens}")


@pytest.mark.quick
def test_constants_match_header():
    b = _ffi.binding()
    assert MAX_LOGIT_BIAS == b.lib.SPECDEC_MAX_LOGIT_BIAS
    assert MAX_STOP_TOKEN_IDS == b.lib.SPECDEC_MAX_STOP_TOKEN_IDS
    for name in PROCESSOR_DEFAULTS:
        assert b.has_field("specdec_generate_params", name), name
    reason = b.ffi.typeof("specdec_stop_reason")
    value = reason.relements["SPECDEC_STOP_TOKEN_ID"]
    # metrics' stop_reason uses the CLI's names (specdec_stop_reason_name), the new value included
    assert _enum_short(reason, value) == b.string(b.lib.specdec_stop_reason_name(value)) == "stop_token_id"
    for v in reason.elements:
        assert _enum_short(reason, v) == b.string(b.lib.specdec_stop_reason_name(v)), v


@pytest.mark.quick
def test_logit_bias_moves_the_first_token(llm):
    base = gen(llm, PROMPTS[0], max_tokens=4).outputs[0].token_ids
    banned = gen(llm, PROMPTS[0], max_tokens=4, logit_bias={base[0]: -100}).outputs[0].token_ids
    assert banned[0] != base[0], (base, banned)
    other = base[0] + 1
    forced = gen(llm, PROMPTS[0], max_tokens=4, logit_bias={other: 100.0}).outputs[0].token_ids
    assert forced[0] == other, (base, forced)
    # an empty dict is off
    assert gen(llm, PROMPTS[0], max_tokens=4, logit_bias={}).outputs[0].token_ids == base


@pytest.mark.quick
def test_stop_token_ids(llm):
    base = gen(llm, PROMPTS[0]).outputs[0].token_ids
    k, sid = first_unique(base, 2)
    out = gen(llm, PROMPTS[0], stop_token_ids=[sid, sid])  # a repeated id is fine
    c = out.outputs[0]
    assert c.token_ids == base[:k + 1], (base, c.token_ids)
    assert (c.finish_reason, c.stop_reason) == ("stop", sid)
    assert out.metrics.stop_reason == "stop_token_id"
    # without it the same request ends by length, no stop_reason
    c0 = gen(llm, PROMPTS[0]).outputs[0]
    assert (c0.finish_reason, c0.stop_reason) == ("length", None)
    # n > 1: every sample stops on it (greedy: all equal)
    many = gen(llm, PROMPTS[0], n=3, stop_token_ids=[sid]).outputs
    assert [(o.index, o.token_ids, o.finish_reason, o.stop_reason) for o in many] == \
        [(i, base[:k + 1], "stop", sid) for i in range(3)]
    # stream(): the same text, its RequestOutput the same stop
    it = llm.stream(PROMPTS[0], SP(temperature=0, max_tokens=16, stop_token_ids=[sid]))
    deltas = []
    while True:
        try:
            deltas.append(next(it))
        except StopIteration as e:
            res = e.value
            break
    assert "".join(deltas) == c.text == res.outputs[0].text
    assert (res.outputs[0].token_ids, res.outputs[0].finish_reason, res.outputs[0].stop_reason) == \
        (base[:k + 1], "stop", sid)


@pytest.mark.quick
def test_min_tokens_holds_the_stop_off(llm):
    base = gen(llm, PROMPTS[0]).outputs[0].token_ids
    k, sid = first_unique(base, 2)
    m = k + 3
    c = gen(llm, PROMPTS[0], stop_token_ids=[sid], min_tokens=m).outputs[0]
    assert sid not in c.token_ids[:m], (sid, c.token_ids)
    assert len(c.token_ids) > k + 1, c.token_ids
    if c.finish_reason == "stop":  # a later stop is the id itself, after min_tokens
        assert c.stop_reason == sid and c.token_ids[-1] == sid and len(c.token_ids) > m
    else:
        assert (c.finish_reason, c.stop_reason, len(c.token_ids)) == ("length", None, 16)
    # min_tokens up to the stop's position changes nothing
    assert gen(llm, PROMPTS[0], stop_token_ids=[sid], min_tokens=k).outputs[0].token_ids == base[:k + 1]


@pytest.mark.quick
@pytest.mark.parametrize("name", ["presence_penalty", "frequency_penalty", "repetition_penalty"])
def test_penalties_change_greedy_output(llm, name):
    base = gen(llm, PROMPTS[0], max_tokens=24).outputs[0].token_ids
    assert len(set(base)) < len(base), f"the greedy output repeats no token: {base}"
    got = gen(llm, PROMPTS[0], max_tokens=24, **{name: 2.0}).outputs[0].token_ids
    assert got != base, (name, base)
    if name != "repetition_penalty":  # the off value changes nothing
        assert gen(llm, PROMPTS[0], max_tokens=24, **{name: 0.0}).outputs[0].token_ids == base


PROCS = [dict(logit_bias={13: -100, 305: 5.0}), dict(presence_penalty=1.5), dict(frequency_penalty=-0.5),
         dict(repetition_penalty=1.3), dict(frequency_penalty=1.0, presence_penalty=0.5, repetition_penalty=1.2,
                                           logit_bias={402: -3.0}),
         dict(stop_token_ids=[13], min_tokens=5)]


@pytest.mark.quick
@pytest.mark.parametrize("procs", PROCS, ids=[",".join(p) for p in PROCS])
def test_exact_against_plain_decoding(llm, llm_plain, procs):
    drafted = 0
    for prompt in PROMPTS:
        spec = gen(llm, prompt, max_tokens=24, **procs)
        plain = gen(llm_plain, prompt, max_tokens=24, **procs)
        assert spec.outputs[0].token_ids == plain.outputs[0].token_ids, (prompt, procs)
        assert (spec.outputs[0].finish_reason, spec.outputs[0].stop_reason) == \
            (plain.outputs[0].finish_reason, plain.outputs[0].stop_reason)
        assert plain.metrics.n_drafted == 0
        drafted += spec.metrics.n_drafted
    assert drafted > 0, "the speculative LLM drafted nothing: the comparison would be vacuous"


BAD = [
    (dict(presence_penalty=2.5), "presence_penalty"), (dict(presence_penalty=float("nan")), "presence_penalty"),
    (dict(presence_penalty="1"), "presence_penalty"), (dict(frequency_penalty=-2.01), "frequency_penalty"),
    (dict(frequency_penalty=None), "frequency_penalty"), (dict(repetition_penalty=0), "repetition_penalty"),
    (dict(repetition_penalty=-1.0), "repetition_penalty"), (dict(repetition_penalty=101), "repetition_penalty"),
    (dict(repetition_penalty=float("inf")), "repetition_penalty"), (dict(logit_bias=[(1, 2.0)]), "logit_bias"),
    (dict(logit_bias={1: 100.5}), "logit_bias"), (dict(logit_bias={1: float("nan")}), "logit_bias"),
    (dict(logit_bias={-1: 1.0}), "logit_bias"), (dict(logit_bias={"5": 1.0}), "logit_bias"),
    (dict(logit_bias={True: 1.0}), "logit_bias"), (dict(logit_bias={2**31: 1.0}), "logit_bias"),
    (dict(logit_bias={1: "x"}), "logit_bias"), (dict(logit_bias={i: 1.0 for i in range(MAX_LOGIT_BIAS + 1)}),
                                                "logit_bias"),
    (dict(min_tokens=-1), "min_tokens"), (dict(min_tokens=1.5), "min_tokens"), (dict(min_tokens=None), "min_tokens"),
    (dict(min_tokens=17, max_tokens=16), "min_tokens"), (dict(stop_token_ids=5), "stop_token_ids"),
    (dict(stop_token_ids="5"), "stop_token_ids"), (dict(stop_token_ids=[-2]), "stop_token_ids"),
    (dict(stop_token_ids=[1.0]), "stop_token_ids"), (dict(stop_token_ids=[False]), "stop_token_ids"),
    (dict(stop_token_ids=list(range(MAX_STOP_TOKEN_IDS + 1))), "stop_token_ids"),
]


@pytest.mark.quick
@pytest.mark.parametrize("kwargs,field", BAD, ids=[f"{i}-{f}" for i, (_, f) in enumerate(BAD)])
def test_bad_values_at_construction(kwargs, field):
    with pytest.raises(specdec.InvalidArgumentError, match=field) as e:
        SP(**kwargs)
    assert isinstance(e.value, ValueError)


@pytest.mark.quick
def test_limits_accepted_at_construction():
    p = SP(presence_penalty=-2, frequency_penalty=2, repetition_penalty=100, min_tokens=16, max_tokens=16,
           logit_bias={i: -100 if i % 2 else 100 for i in range(MAX_LOGIT_BIAS)},
           stop_token_ids=tuple(range(MAX_STOP_TOKEN_IDS)))
    assert p.presence_penalty == -2.0 and isinstance(p.logit_bias[1], float)
    assert p.stop_token_ids == list(range(MAX_STOP_TOKEN_IDS))
    assert SP().processors_set() == [] and SP(logit_bias={}, stop_token_ids=[]).processors_set() == []
    assert SP(min_tokens=3, max_tokens=None).processors_set() == ["min_tokens"]


@pytest.mark.quick
@pytest.mark.parametrize("field", ["logit_bias", "stop_token_ids"])
def test_ids_past_the_vocabulary_refused_by_the_library(llm, field):
    big = 10**6  # an int32, past the bundled vocabulary
    kw = {"logit_bias": {big: 1.0}} if field == "logit_bias" else {"stop_token_ids": [big]}
    with pytest.raises(specdec.InvalidArgumentError, match=field):
        gen(llm, PROMPTS[0], max_tokens=2, **kw)
    assert gen(llm, PROMPTS[0], max_tokens=2).outputs[0].finish_reason == "length"  # the LLM goes on


NEW_FIELDS = {"logit_bias": {5: 1.0}, "min_tokens": 1, "stop_token_ids": [5], "presence_penalty": 0.5,
              "frequency_penalty": 0.5, "repetition_penalty": 1.1}


@pytest.mark.quick
def test_older_library(llm, monkeypatch):
    """A libspecdec older than 0.5 (its header has none of the processor fields) cannot apply them:
    UnsupportedError naming the field, not a silent plain run; the defaults (and empty containers) work."""
    assert set(NEW_FIELDS) == set(PROCESSOR_DEFAULTS)
    b = _ffi.binding()
    real = b.has_field
    want = gen(llm, PROMPTS[0], max_tokens=3).outputs[0].token_ids
    monkeypatch.setattr(b, "has_field", lambda s, f: False if f in NEW_FIELDS or f == "cache_salt" else real(s, f))
    for name, value in NEW_FIELDS.items():
        with pytest.raises(specdec.UnsupportedError, match=f"SamplingParams.{name}.*since 0.5"):
            gen(llm, PROMPTS[0], max_tokens=3, **{name: value})
    assert gen(llm, PROMPTS[0], max_tokens=3).outputs[0].token_ids == want
    assert gen(llm, PROMPTS[0], max_tokens=3, logit_bias={}, stop_token_ids=[], repetition_penalty=1.0,
               min_tokens=0).outputs[0].token_ids == want
    with pytest.raises(specdec.UnsupportedError, match="cache_salt"):
        gen(llm, {"prompt": PROMPTS[0], "cache_salt": "a"}, max_tokens=3)
    assert gen(llm, {"prompt": PROMPTS[0], "cache_salt": None}, max_tokens=3).outputs[0].token_ids == want


@pytest.mark.quick
def test_cache_salt_hash_is_the_servers():
    # FNV-1a 64's published vectors (the empty string is the offset basis)
    assert _fnv1a64(b"") == 0xCBF29CE484222325
    assert _fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert _fnv1a64(b"foobar") == 0x85944171F73967E8
    # the server's finish: the same constants and shifts as tools/server/sd_server_request.c
    src = open(os.path.join(ROOT, "tools", "server", "sd_server_request.c"), encoding="utf-8").read()
    body = re.search(r"static int parse_cache_salt\(.*?\n}\n", src, re.S).group(0)
    for const in ("0xcbf29ce484222325ull", "0x100000001b3ull", "h ^= h >> 33;", "h *= 0xff51afd7ed558ccdull;",
                  "h ? h : 1"):
        assert const in body, const
    h = 0xAF63DC4C8601EC8C
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) % 2**64
    assert cache_salt_hash("a") == h ^ (h >> 33)
    salts = ["a", "b", "tenant-1", "tenant-2", "é", "x" * 1000]
    hashes = [cache_salt_hash(s) for s in salts]
    assert len(set(hashes)) == len(salts) and all(0 < v < 2**64 for v in hashes)


@pytest.mark.quick
@pytest.mark.parametrize("salt", ["", 5, b"x", ["a"], "a\0b", "\ud800"])
def test_bad_cache_salt(llm, salt):
    with pytest.raises(specdec.InvalidArgumentError, match=r"prompts\[0\]: cache_salt"):
        llm.generate({"prompt": PROMPTS[0], "cache_salt": salt}, SP(max_tokens=2), use_tqdm=False)


@pytest.mark.quick
def test_cache_salt_confines_the_prefix_cache():
    with specdec.LLM(backend="cpu", max_num_seqs=2) as m:
        ids = m.tokenizer.encode(LONG)
        runs = [("a", LONG), ("a", LONG), ("b", LONG), (None, LONG), ("b", ids), ("a", ids)]
        outs = []
        for salt, p in runs:
            prompt = {"prompt": p} if isinstance(p, str) else {"prompt_token_ids": p}
            if salt is not None:
                prompt["cache_salt"] = salt
            outs.append(gen(m, prompt, max_tokens=6))
        cached = [o.num_cached_tokens for o in outs]
        # a: first 0, then cached; b: not a's rows, then its own; unsalted: none of theirs
        assert cached[0] == 0 and cached[1] > 0 and cached[2] == 0 and cached[3] == 0, cached
        assert cached[4] > 0 and cached[5] > 0, cached
        assert len({tuple(o.outputs[0].token_ids) for o in outs}) == 1  # output-neutral
        assert outs[0].outputs[0].token_ids == gen(m, LONG, max_tokens=6).outputs[0].token_ids
