"""vLLM's allowed_token_ids, bad_words and include_stop_str_in_output on SamplingParams (libspecdec 0.5.2's
specdec_generate_params.allowed_token_ids / bad_words_*, specdec_tokenize_bad_words; docs/SAMPLING.md).

- allowed_token_ids: every generated id is listed (the greedy first id left out is never first);
- bad_words: a word of the greedy output whose sequences occur in it, tokenized as vLLM does (tokenizer.encode of the word and of " " +
  word without special tokens, the second kept when it starts with another id and is as long): neither
  sequence occurs in the output, which changes;
- exactness: with the masks the speculative LLM's greedy tokens equal a draft-less LLM's (which drafts
  nothing while the speculative one does);
- include_stop_str_in_output: a stop string ends the text (generate and stream() alike), without it the
  text ends before it; a stop id's text is in the text only with it (vLLM's detokenizer), the token in
  token_ids either way;
- bad values raise InvalidArgumentError naming the field (construction; ids past the vocabulary at
  generate); an older library (fields hidden from has_field) raises UnsupportedError naming the field.
"""
import pytest

import specdec
from conftest import TARGET
from specdec import _ffi
from specdec.sampling import MASK_FIELDS, MAX_ALLOWED_TOKEN_IDS, MAX_BAD_WORDS

SP = specdec.SamplingParams
PROMPTS = ["And God said", "In the beginning", "The Lord is my shepherd;"]


def gen(llm, prompt, **kw):
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 16)
    return llm.generate(prompt, SP(**kw), use_tqdm=False)[0].outputs[0]


def streamed(llm, prompt, **kw):
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 16)
    it = llm.stream(prompt, SP(**kw))
    deltas = []
    while True:
        try:
            deltas.append(next(it))
        except StopIteration as e:
            return "".join(deltas), e.value.outputs[0]


def has_seq(toks, w):
    return any(toks[i:i + len(w)] == w for i in range(len(toks) - len(w) + 1))


@pytest.mark.quick
def test_constants_match_header():
    b = _ffi.binding()
    assert MAX_ALLOWED_TOKEN_IDS == b.lib.SPECDEC_MAX_ALLOWED_TOKEN_IDS
    assert MAX_BAD_WORDS == b.lib.SPECDEC_MAX_BAD_WORDS
    for field in MASK_FIELDS.values():
        assert b.has_field("specdec_generate_params", field), field


@pytest.mark.quick
def test_allowed_token_ids(llm):
    base = gen(llm, PROMPTS[0]).token_ids
    allowed = sorted(set(base) - {base[0]})
    out = gen(llm, PROMPTS[0], allowed_token_ids=allowed).token_ids
    assert out and out[0] != base[0] and set(out) <= set(allowed), (base, out)
    assert gen(llm, PROMPTS[0], allowed_token_ids=[base[3]], max_tokens=4).token_ids == [base[3]] * 4


@pytest.mark.quick
def test_bad_words(llm):
    c = gen(llm, PROMPTS[1])
    tok = llm.get_tokenizer()
    found = []
    for word in sorted({w.strip(",.;:") for w in c.text.split()}, key=len, reverse=True):
        plain, spaced = tok.encode(word, add_special_tokens=False), tok.encode(" " + word, add_special_tokens=False)
        seqs = [plain] + ([spaced] if len(spaced) == len(plain) and spaced[0] != plain[0] else [])  # vLLM's rule
        if any(has_seq(c.token_ids, w) for w in seqs):
            found.append((word, seqs))
    assert found, ("no word of the output is banned by its own sequences", c.text)
    word, seqs = found[0]
    out = gen(llm, PROMPTS[1], bad_words=["  " + word]).token_ids  # leading white space is dropped
    assert out != c.token_ids and not any(has_seq(out, w) for w in seqs), (word, seqs, out)


@pytest.mark.quick
def test_exact_against_plain_decoding(llm):
    drafted = 0
    with specdec.LLM(model=TARGET, backend="cpu") as plain_llm:  # the target alone: plain decoding
        for prompt in PROMPTS:
            base = gen(llm, prompt, max_tokens=24).token_ids
            kw = dict(max_tokens=24, allowed_token_ids=sorted(set(base) - {base[1]}) + [5, 7], bad_words=["Lord"],
                      presence_penalty=0.5)
            spec = llm.generate(prompt, SP(temperature=0, **kw), use_tqdm=False)[0]
            plain = plain_llm.generate(prompt, SP(temperature=0, **kw), use_tqdm=False)[0]
            assert spec.outputs[0].token_ids == plain.outputs[0].token_ids, prompt
            assert plain.metrics.n_drafted == 0
            drafted += spec.metrics.n_drafted
    assert drafted > 0, "the speculative LLM drafted nothing: the comparison would be vacuous"


@pytest.mark.quick
def test_include_stop_str_in_output(llm):
    base = gen(llm, PROMPTS[0], max_tokens=24)
    text = base.text
    stop = text[len(text) // 2: len(text) // 2 + 3]
    cut = text.index(stop)
    for include, want in ((False, text[:cut]), (True, text[:cut + len(stop)])):
        c = gen(llm, PROMPTS[0], max_tokens=24, stop=[stop], include_stop_str_in_output=include)
        s, res = streamed(llm, PROMPTS[0], max_tokens=24, stop=[stop], include_stop_str_in_output=include)
        assert c.text == want == s == res.text and (c.finish_reason, c.stop_reason) == ("stop", stop), include
    ids = base.token_ids
    k = next(i for i in range(2, len(ids)) if ids[i] not in ids[:i])
    before = gen(llm, PROMPTS[0], max_tokens=k).text
    without = gen(llm, PROMPTS[0], max_tokens=24, stop_token_ids=[ids[k]])
    kept = gen(llm, PROMPTS[0], max_tokens=24, stop_token_ids=[ids[k]], include_stop_str_in_output=True)
    assert without.token_ids == kept.token_ids == ids[:k + 1]
    assert without.text == before and kept.text.startswith(before) and len(kept.text) > len(before)
    s, _ = streamed(llm, PROMPTS[0], max_tokens=24, stop_token_ids=[ids[k]])
    s_kept, _ = streamed(llm, PROMPTS[0], max_tokens=24, stop_token_ids=[ids[k]], include_stop_str_in_output=True)
    assert (s, s_kept) == (without.text, kept.text)


BAD = [(dict(allowed_token_ids=[]), "allowed_token_ids"), (dict(allowed_token_ids="5"), "allowed_token_ids"),
       (dict(allowed_token_ids=[3, -1]), "allowed_token_ids"), (dict(allowed_token_ids=[1.0]), "allowed_token_ids"),
       (dict(bad_words="x"), "bad_words"), (dict(bad_words=[""]), "bad_words"), (dict(bad_words=[" \t"]), "bad_words"),
       (dict(bad_words=[1]), "bad_words"), (dict(bad_words=["w"] * (MAX_BAD_WORDS + 1)), "bad_words"),
       (dict(include_stop_str_in_output=1), "include_stop_str_in_output")]


@pytest.mark.quick
@pytest.mark.parametrize("kwargs,field", BAD, ids=[f"{i}-{f}" for i, (_, f) in enumerate(BAD)])
def test_bad_values_at_construction(kwargs, field):
    with pytest.raises(specdec.InvalidArgumentError, match=field):
        SP(**kwargs)


@pytest.mark.quick
def test_refused_by_the_library(llm):
    with pytest.raises(specdec.InvalidArgumentError, match=r"allowed_token_ids\[0\]"):
        gen(llm, PROMPTS[0], max_tokens=2, allowed_token_ids=[10**6])
    with pytest.raises(specdec.InvalidArgumentError, match="bad_words"):
        gen(llm, PROMPTS[0], max_tokens=2, bad_words=["w"] * 65 + ["Jesus"] * 63)  # > 128 sequences
    assert gen(llm, PROMPTS[0], max_tokens=2).finish_reason == "length"  # the LLM goes on


@pytest.mark.quick
def test_older_library(llm, monkeypatch):
    b = _ffi.binding()
    real = b.has_field
    monkeypatch.setattr(b, "has_field", lambda s, f: False if f in MASK_FIELDS.values() else real(s, f))
    for name, value in (("allowed_token_ids", [5]), ("bad_words", ["x"])):
        with pytest.raises(specdec.UnsupportedError, match=f"SamplingParams.{name}.*since 0.5.2"):
            gen(llm, PROMPTS[0], max_tokens=3, **{name: value})
    assert gen(llm, PROMPTS[0], max_tokens=3, bad_words=[]).finish_reason == "length"
