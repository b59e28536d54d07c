"""SamplingParams(prompt_logprobs=N): RequestOutput.prompt_logprobs in vLLM's shape (PromptLogprobs: None for
the first prompt token, then {token id: Logprob} holding the prompt token and the top N), with the values
the C library reports (specdec_generate with prompt_logprobs = 1 on an engine of its own is the
reference), equal to the records of greedy runs on the prompt's prefixes, whatever the drafter, for
text and token-id prompts, through generate, stream and chat; bad values and an old library refused."""
import math
import os

import pytest

import specdec
from conftest import DRAFT, TARGET
from specdec import _ffi
from specdec.sampling import MAX_LOGPROBS
from test_logprobs import CEngine

SP = specdec.SamplingParams
HEAD = os.path.join(os.path.dirname(DRAFT), "kjv-eagle3")
PROMPTS = ["And God said, Let there be light: and there was light.", "In the beginning",
           "The Lord is my shepherd; I shall not want."]


@pytest.fixture(scope="module")
def c_engine():
    e = CEngine(draft=False)  # no drafter at all: the target's plain prefill
    yield e
    e.close()


def gen(llm, prompt, **kw):
    return llm.generate(prompt, SP(**kw), use_tqdm=False)[0]


def check_shape(out, n_top, tokenizer):
    """vLLM's PromptLogprobs: one entry per prompt token, None first; each dict starts with the prompt token
    (rank >= 1), then the top n_top in rank order; N or N + 1 entries."""
    ids, pl = out.prompt_token_ids, out.prompt_logprobs
    assert isinstance(pl, list) and len(pl) == len(ids) > 1
    assert pl[0] is None
    for tok, d in zip(ids[1:], pl[1:]):
        keys = list(d)
        assert keys[0] == tok
        assert d[tok].rank >= 1 and d[tok].logprob <= 0 and math.isfinite(d[tok].logprob)
        assert len(d) in (n_top, n_top + 1) and len(d) >= 1
        if len(d) == n_top + 1:  # the prompt token is not in the top list: one more entry, ranked below it
            top = [d[k] for k in keys[1:]]
            assert n_top == 0 or d[tok].logprob <= top[-1].logprob
        else:  # it is in the top list (listed first, not repeated)
            top = sorted(d.values(), key=lambda v: -v.logprob)
            assert d[tok].rank <= n_top
        assert [v.logprob for v in top] == sorted((v.logprob for v in top), reverse=True)
        assert [d[k].logprob for k in keys[1:]] == sorted((d[k].logprob for k in keys[1:]), reverse=True)
        assert [v.rank for v in top] == [1 + sum(w.logprob > v.logprob for w in top) for v in top]
        for t, v in d.items():
            assert v.decoded_token == tokenizer.decode([t], skip_special_tokens=False)


@pytest.mark.quick
@pytest.mark.parametrize("n_top", [0, 4, MAX_LOGPROBS])
def test_shape(llm, n_top):
    o = gen(llm, PROMPTS[0], temperature=0, max_tokens=3, prompt_logprobs=n_top)
    check_shape(o, n_top, llm.tokenizer)
    # generated-token logprobs stay off unless asked for
    assert o.outputs[0].logprobs is None and o.outputs[0].cumulative_logprob is None


LONG = " ".join(PROMPTS * 4)  # ~100 tokens: the library's prefill hands the records over in chunks of 32


@pytest.mark.quick
@pytest.mark.parametrize("n_top,prompt", [(0, PROMPTS[0]), (3, PROMPTS[0]), (MAX_LOGPROBS, PROMPTS[0]), (5, LONG)])
def test_equals_c_library(llm, c_engine, n_top, prompt):
    """Every value, rank and top id equals the records specdec_generate reports (prompt_logprobs = 1) on an
    engine of its own without a drafter; the generated tokens and their logprobs are the library's too."""
    o = gen(llm, prompt, temperature=0, max_tokens=6, prompt_logprobs=n_top, logprobs=2)
    ids = o.prompt_token_ids
    assert prompt != LONG or len(ids) > 64
    tokens, rows = c_engine.generate(ids, 6, 2, prompt_top=n_top)
    prompt_rows = [r for r in rows if r[3] < len(ids)]
    assert [r[3] for r in prompt_rows] == list(range(1, len(ids)))
    assert o.outputs[0].token_ids == tokens
    assert len(rows) == len(prompt_rows) + len(tokens)
    for d, (tok, lp, rank, pos, top_ids, top_lps) in zip(o.prompt_logprobs[1:], prompt_rows):
        assert tok == ids[pos]
        assert len(top_ids) == n_top
        assert list(d) == [tok] + [t for t in top_ids if t != tok]
        assert (d[tok].logprob, d[tok].rank) == (lp, rank)
        assert [d[t].logprob for t in top_ids] == top_lps
    gen_rows = rows[len(prompt_rows):]
    assert [list(d) [0] for d in o.outputs[0].logprobs] == [r[0] for r in gen_rows]
    assert [d[r[0]].logprob for d, r in zip(o.outputs[0].logprobs, gen_rows)] == [r[1] for r in gen_rows]


def test_equals_prefix_runs(llm):
    """The record of the prompt token at position p is the distribution a greedy run on prompt[:p] reports
    for its first generated token: for every p, the prefix run's top 5 ids carry the same values in the
    prompt record, and where prompt[p] is the greedy token (the second half of this prompt is the model's own
    greedy continuation) the two dicts are equal, key order included. Exact: the CPU forward computes a row
    the same way alone or in a batch of rows."""
    base = llm.tokenizer.encode(PROMPTS[1])
    cont = gen(llm, base, temperature=0, max_tokens=8).outputs[0].token_ids
    prompt = base + cont
    o = gen(llm, prompt, temperature=0, max_tokens=1, prompt_logprobs=5)
    prefixes = [prompt[:p] for p in range(1, len(prompt))]
    runs = llm.generate(prefixes, SP(temperature=0, max_tokens=1, logprobs=5), use_tqdm=False)
    greedy_positions = 0
    for p, run in zip(range(1, len(prompt)), runs):
        first = run.outputs[0].logprobs[0]
        rec = o.prompt_logprobs[p]
        assert set(first) <= set(rec)  # the greedy token and the top 5: all in the prompt record's top 5
        assert all(rec[t] == v for t, v in first.items())
        if run.outputs[0].token_ids[0] == prompt[p]:
            assert rec == first and list(rec) == list(first)
            greedy_positions += 1
    assert greedy_positions >= len(cont)


@pytest.mark.quick
def test_text_and_token_ids_agree(llm):
    by_text = gen(llm, PROMPTS[2], temperature=0, max_tokens=2, prompt_logprobs=3)
    ids = by_text.prompt_token_ids
    by_ids = gen(llm, ids, temperature=0, max_tokens=2, prompt_logprobs=3)
    by_dict = gen(llm, {"prompt_token_ids": ids}, temperature=0, max_tokens=2, prompt_logprobs=3)
    assert by_ids.prompt is None and by_text.prompt == PROMPTS[2]
    assert by_text.prompt_logprobs == by_ids.prompt_logprobs == by_dict.prompt_logprobs


@pytest.mark.quick
def test_short_prompts(llm):
    """One token: nothing precedes it, [None]; two tokens: one record."""
    assert gen(llm, [297], temperature=0, max_tokens=1, prompt_logprobs=2).prompt_logprobs == [None]
    pl = gen(llm, [297, 388], temperature=0, max_tokens=1, prompt_logprobs=2).prompt_logprobs
    assert len(pl) == 2 and pl[0] is None and list(pl[1])[0] == 388


def test_generation_unchanged(llm):
    """Asking for the prompt's records changes nothing else: tokens, text and generated logprobs equal a
    run without them, greedy and sampled."""
    for kw in (dict(temperature=0, max_tokens=12, logprobs=3), dict(temperature=0.9, seed=11, max_tokens=16)):
        ref = gen(llm, PROMPTS[1], **kw).outputs[0]
        o = gen(llm, PROMPTS[1], prompt_logprobs=2, **kw).outputs[0]
        assert (o.token_ids, o.text, o.logprobs, o.cumulative_logprob) == \
            (ref.token_ids, ref.text, ref.logprobs, ref.cumulative_logprob)


def test_batch_mixes_settings(llm):
    """One batch, each request its own prompt_logprobs (None, 0, 5, 20) and logprobs: each equals the
    same request run alone, so concurrent requests' records are not mixed up."""
    params = [SP(temperature=0, max_tokens=6), SP(temperature=0, max_tokens=6, prompt_logprobs=0),
              SP(temperature=0.8, seed=3, max_tokens=8, prompt_logprobs=5, logprobs=1),
              SP(temperature=0, max_tokens=4, prompt_logprobs=MAX_LOGPROBS, logprobs=MAX_LOGPROBS)]
    prompts = [PROMPTS[0], PROMPTS[1], PROMPTS[2], PROMPTS[0]]
    batch = llm.generate(prompts, params, use_tqdm=False)
    for p, sp, b in zip(prompts, params, batch):
        one = llm.generate(p, sp, use_tqdm=False)[0]
        assert one.prompt_logprobs == b.prompt_logprobs
        assert one.outputs[0].token_ids == b.outputs[0].token_ids
        assert one.outputs[0].logprobs == b.outputs[0].logprobs
        if sp.prompt_logprobs is None:
            assert b.prompt_logprobs is None
        else:
            check_shape(b, sp.prompt_logprobs, llm.tokenizer)


@pytest.mark.parametrize("cfg", [{"num_speculative_tokens": 0}, {"tree": [3, 2, 1]},
                                 {"num_speculative_tokens": 2, "verify": "match"},
                                 {"method": "ngram", "prompt_lookup_min": 1, "prompt_lookup_max": 3},
                                 {"method": "eagle3", "model": HEAD, "num_speculative_tokens": 3}])
def test_independent_of_drafter(llm, cfg):
    """The prompt's records are the target's prefill's: no drafter, a draft tree, γ = 2 in match mode, n-gram
    drafting and an EAGLE-3 head (its drafter runs the target's prefill itself) give the default chain's,
    value for value."""
    prompt = PROMPTS[0]
    ref = gen(llm, prompt, temperature=0, max_tokens=8, prompt_logprobs=5)
    model = TARGET if cfg.get("method") == "ngram" else None
    with specdec.LLM(model=model, backend="cpu", speculative_config=cfg, max_num_seqs=2) as m:
        o = gen(m, prompt, temperature=0, max_tokens=8, prompt_logprobs=5)
    assert o.prompt_logprobs == ref.prompt_logprobs
    assert o.outputs[0].token_ids == ref.outputs[0].token_ids


def test_stream_and_chat(llm):
    sp = SP(temperature=0, max_tokens=6, prompt_logprobs=2)
    ref = llm.generate(PROMPTS[2], sp, use_tqdm=False)[0]
    g = llm.stream(PROMPTS[2], sp)
    text = ""
    while True:
        try:
            text += next(g)
        except StopIteration as e:
            final = e.value
            break
    assert text == ref.outputs[0].text
    assert final.prompt_logprobs == ref.prompt_logprobs
    reply = llm.chat([{"role": "user", "content": "Who made the heaven?"}], sp, use_tqdm=False)[0]
    check_shape(reply, 2, llm.tokenizer)  # over the rendered prompt's tokens, template tokens included


@pytest.mark.quick
def test_bad_values_raise():
    for v in (-1, MAX_LOGPROBS + 1, 1000):
        with pytest.raises(ValueError, match=rf"SamplingParams.prompt_logprobs = {v} is outside 0..20") as e:
            SP(prompt_logprobs=v)
        assert isinstance(e.value, specdec.InvalidArgumentError)
    for v in (1.0, "3", True, [1]):
        with pytest.raises(specdec.InvalidArgumentError, match="SamplingParams.prompt_logprobs must be an int"):
            SP(prompt_logprobs=v)
    assert SP(prompt_logprobs=0).prompt_logprobs == 0 and SP(prompt_logprobs=MAX_LOGPROBS).prompt_logprobs == 20


@pytest.mark.quick
def test_library_without_the_field_refuses(llm, monkeypatch):
    """A libspecdec older than 0.4.1 (its header has no specdec_generate_params.prompt_logprobs): UnsupportedError
    naming the field, not a silent None; requests without it still run."""
    b = _ffi.binding()
    real = b.has_field
    monkeypatch.setattr(b, "has_field", lambda s, f: False if f == "prompt_logprobs" else real(s, f))
    with pytest.raises(specdec.UnsupportedError, match=r"specdec_generate_params.prompt_logprobs \(since 0.4.1\)"):
        gen(llm, PROMPTS[0], temperature=0, max_tokens=2, prompt_logprobs=1)
    o = gen(llm, PROMPTS[0], temperature=0, max_tokens=2, logprobs=1)
    assert o.prompt_logprobs is None and len(o.outputs[0].logprobs) == 2
