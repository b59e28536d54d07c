"""SamplingParams(logprobs=N): CompletionOutput.logprobs / .cumulative_logprob in vLLM's shapes, with the
values the C library reports (specdec_generate's logprob_callback on an engine of its own, outside the
scheduler, is the reference), whatever the drafter, and with the requests of one batch kept apart."""
import math
import struct
import threading

import pytest

import specdec
from conftest import DRAFT, TARGET, cli_generate
from specdec import _ffi
from specdec.llm import _top_ranks
from specdec.sampling import MAX_LOGPROBS

SP = specdec.SamplingParams
PROMPTS = ["And God said", "In the beginning", "The Lord is my shepherd;"]


class CEngine:
    """An engine of its own (CPU backend) over the bundled pair: specdec_generate with logprob_callback,
    each row copied as (token, logprob, rank, position, top ids, top logprobs)."""

    def __init__(self, draft=True):
        b = self.b = _ffi.binding()
        ffi, lib = b.ffi, b.lib
        self.models = []
        for path in (TARGET, DRAFT) if draft else (TARGET,):
            out = ffi.new("specdec_model **")
            b.check(lib.specdec_model_load(path.encode(), ffi.NULL, out), lib.specdec_last_error, path)
            self.models.append(out[0])
        ep = ffi.new("specdec_engine_params *", lib.specdec_engine_default_params())
        ep.backend = b.enum_value("specdec_backend", "SPECDEC_BACKEND_CPU")
        out = ffi.new("specdec_engine **")
        b.check(lib.specdec_engine_create(self.models[0], self.models[1] if draft else ffi.NULL, ep, out),
                lib.specdec_last_error, "engine")
        self.engine = out[0]

    def generate(self, ids, n, top, temperature=0.0, seed=0, top_k=0, top_p=1.0, min_p=0.0, prompt_top=None):
        """(tokens, rows); top None: no generated-token records; prompt_top N: the prompt's records too
        (prompt_logprobs = 1, prompt_top_logprobs = N), first in rows (position < len(ids))."""
        b = self.b
        ffi, lib = b.ffi, b.lib
        gp = ffi.new("specdec_generate_params *", lib.specdec_generate_default_params())
        gp.n_predict, gp.temperature, gp.seed = n, temperature, seed
        gp.top_k, gp.top_p, gp.min_p = top_k, top_p, min_p
        rows = []

        def on_logprob(user_data, lp):
            k = lp.n_top
            rows.append((lp.token, lp.logprob, lp.rank, lp.position, ffi.unpack(lp.top_tokens, k) if k else [],
                         ffi.unpack(lp.top_logprobs, k) if k else []))
            return 0

        cb = ffi.callback("specdec_logprob_callback", on_logprob)
        gp.logprob_callback = cb
        if top is not None:
            gp.logprobs, gp.top_logprobs = 1, top
        if prompt_top is not None:
            gp.prompt_logprobs, gp.prompt_top_logprobs = 1, prompt_top
        c_ids = ffi.new("int32_t[]", ids)
        out, n_out = ffi.new("int32_t[]", n), ffi.new("int32_t *")
        b.check(lib.specdec_generate(self.engine, c_ids, len(ids), gp, out, n, n_out, ffi.NULL),
                lambda: lib.specdec_engine_last_error(self.engine), "specdec_generate")
        return list(ffi.unpack(out, n_out[0])), rows

    def close(self):
        lib = self.b.lib
        lib.specdec_engine_free(self.engine)
        for m in self.models:
            lib.specdec_model_free(m)


@pytest.fixture(scope="module")
def c_engine():
    e = CEngine()
    yield e
    e.close()


def gen(llm, prompt, **kw):
    return llm.generate(prompt, SP(**kw), use_tqdm=False)[0]


def assert_equals_rows(o, tokens, rows, n_prompt, n_top):
    """o (a CompletionOutput) carries exactly the library's rows, in vLLM's shape."""
    assert o.token_ids == tokens
    assert len(o.logprobs) == len(rows) == len(tokens)
    for i, (d, (tok, lp, rank, pos, top_ids, top_lps)) in enumerate(zip(o.logprobs, rows)):
        assert pos == n_prompt + i
        assert len(top_ids) == n_top
        keys = list(d)
        assert keys[0] == tok  # the sampled token first, then the top n in rank order (vLLM's order)
        assert keys[1:] == [t for t in top_ids if t != tok]
        assert len(d) in (n_top, n_top + 1) and (len(d) == n_top) == (tok in top_ids)
        assert (d[tok].logprob, d[tok].rank) == (lp, rank)
        for j, (t, v) in enumerate(zip(top_ids, top_lps)):
            assert d[t].logprob == v
            assert d[t].rank == 1 + sum(w > v for w in top_lps)  # the library's rank (ties share one)
    assert o.cumulative_logprob == sum(r[1] for r in rows)


@pytest.mark.quick
@pytest.mark.parametrize("n_top", [0, 5, MAX_LOGPROBS])
def test_greedy_equals_c_generate(llm, c_engine, n_top):
    prompt = PROMPTS[0]
    o = gen(llm, prompt, temperature=0, max_tokens=12, logprobs=n_top)
    ids = o.prompt_token_ids
    tokens, rows = c_engine.generate(ids, 12, n_top)
    assert_equals_rows(o.outputs[0], tokens, rows, len(ids), n_top)
    for d, tok in zip(o.outputs[0].logprobs, tokens):
        assert d[tok].rank == 1  # greedy: the most likely token (the bundled model has no exact ties here)
        assert all(v.logprob <= d[tok].logprob for v in d.values())


def f32(x):
    """x as the float32 it came from (the CLI's JSON prints 16 significant digits, not always 17)."""
    return struct.unpack("f", struct.pack("f", x))[0]


@pytest.mark.parametrize("n_top,cli_args,kw", [
    (3, ("--temp", 0), dict(temperature=0)),
    (MAX_LOGPROBS, ("--temp", 0.8, "--top-k", 0, "--top-p", 1, "--min-p", 0, "--seed", 42),
     dict(temperature=0.8, seed=42)),
])
def test_equals_cli(llm, n_top, cli_args, kw):
    """`specdec generate --logprobs N --json` (the CLI on the same library) reports the same rows."""
    ref = cli_generate(PROMPTS[1], 16, *cli_args, "--logprobs", n_top)
    o = gen(llm, PROMPTS[1], max_tokens=16, logprobs=n_top, **kw).outputs[0]
    assert o.token_ids == ref["tokens"] == [row["token"] for row in ref["logprobs"]]
    for d, row in zip(o.logprobs, ref["logprobs"]):
        tok = row["token"]
        assert (f32(d[tok].logprob), d[tok].rank) == (f32(row["logprob"]), row["rank"])
        assert list(d)[1:] == [t for t, _ in row["top"] if t != tok]
        assert [f32(d[t].logprob) for t, _ in row["top"]] == [f32(v) for _, v in row["top"]]


@pytest.mark.parametrize("prompt,seed", [(PROMPTS[1], 5), (PROMPTS[2], 123)])
def test_sampled_equals_c_generate(llm, c_engine, prompt, seed):
    """Sampling at temperature 0.9 with top-k 40 (rejection verify): the logprobs are still the raw
    distribution's, so sampled tokens of rank > 1 appear, and values match the library's."""
    o = gen(llm, prompt, temperature=0.9, top_k=40, max_tokens=24, seed=seed, logprobs=3)
    ids = o.prompt_token_ids
    tokens, rows = c_engine.generate(ids, 24, 3, temperature=0.9, seed=seed, top_k=40)
    assert_equals_rows(o.outputs[0], tokens, rows, len(ids), 3)


def test_sampled_ranks_beyond_one(llm):
    """Hypothesis: at temperature 1.5 (no truncation) some sampled tokens are not among the 2 most likely,
    and those are reported with their rank (> 2) as one more entry after the top 2. Sample: 3 fixed seeds x
    32 tokens = 96 draws. Measured rate of rank > 2 there: 565 of 640 draws (88%) over 20 other seeds; were
    it only 20%, 96 draws with none would have P = 0.8^96 < 1e-9, the test's significance level."""
    seen = 0
    for seed in (1, 2, 3):
        o = gen(llm, PROMPTS[1], temperature=1.5, max_tokens=32, seed=seed, logprobs=2).outputs[0]
        for d, tok in zip(o.logprobs, o.token_ids):
            keys = list(d)
            assert keys[0] == tok
            if d[tok].rank > 2:
                seen += 1
                assert len(d) == 3 and tok not in keys[1:]
                assert all(d[k].logprob >= d[tok].logprob for k in keys[1:])
    assert seen > 0


def test_decoded_tokens(llm):
    o = gen(llm, PROMPTS[0], temperature=0, max_tokens=8, logprobs=4).outputs[0]
    tok = llm.tokenizer
    for d in o.logprobs:
        for t, v in d.items():
            assert v.decoded_token == tok.decode([t], skip_special_tokens=False)
    assert "".join(d[t].decoded_token for d, t in zip(o.logprobs, o.token_ids)) == o.text


@pytest.mark.quick
def test_top_ranks_share_ties():
    """Rank = 1 + the ids strictly more likely (the library's definition), so tied entries share a rank;
    the model gives no exact ties to see this end to end."""
    assert _top_ranks([]) == []
    assert _top_ranks([-0.5, -1.0, -1.0, -2.0, -2.0, -2.0, -3.0]) == [1, 2, 2, 4, 4, 4, 7]
    assert _top_ranks([-1.0, -1.0]) == [1, 1]


@pytest.mark.quick
def test_no_logprobs_is_none(llm):
    r = gen(llm, PROMPTS[0], temperature=0, max_tokens=4)
    o = r.outputs[0]
    assert o.logprobs is None and o.cumulative_logprob is None and r.prompt_logprobs is None
    assert SP().logprobs is None and SP().prompt_logprobs is None


@pytest.mark.quick
def test_bad_values_raise():
    for v in (-1, MAX_LOGPROBS + 1, 1000):
        with pytest.raises(specdec.InvalidArgumentError, match=rf"SamplingParams.logprobs = {v}\b"):
            SP(logprobs=v)
    for v in (1.0, "3", True):
        with pytest.raises(specdec.InvalidArgumentError, match="SamplingParams.logprobs must be an int"):
            SP(logprobs=v)
    # the Python bound is the header's (vLLM's default max_logprobs is also 20)
    assert MAX_LOGPROBS == _ffi.binding().lib.SPECDEC_MAX_TOP_LOGPROBS == 20
    assert specdec.Logprob(-0.5).rank is None and "Logprob" in specdec.__all__


def test_stop_string_keeps_the_completing_tokens_logprobs(llm):
    """Text is cut before the stop string; token_ids and logprobs keep every generated token, the one that
    completed the stop string included (vLLM does not truncate them either)."""
    full = gen(llm, PROMPTS[0], temperature=0, max_tokens=24, logprobs=2).outputs[0]
    o = gen(llm, PROMPTS[0], temperature=0, max_tokens=24, stop="man", logprobs=2).outputs[0]
    assert (o.finish_reason, o.stop_reason) == ("stop", "man")
    assert "man" in full.text and o.text == full.text[:full.text.index("man")]
    assert 0 < len(o.token_ids) < len(full.token_ids)
    assert len(o.logprobs) == len(o.token_ids)
    assert o.logprobs == full.logprobs[:len(o.token_ids)]
    assert o.cumulative_logprob == sum(d[t].logprob for d, t in zip(o.logprobs, o.token_ids))


def test_stream_and_chat_carry_logprobs(llm):
    sp = SP(temperature=0, max_tokens=16, logprobs=3)
    ref = llm.generate(PROMPTS[0], sp, use_tqdm=False)[0].outputs[0]
    g = llm.stream(PROMPTS[0], sp)
    while True:
        try:
            next(g)
        except StopIteration as e:
            final = e.value.outputs[0]
            break
    assert final.token_ids == ref.token_ids
    assert final.logprobs == ref.logprobs and final.cumulative_logprob == ref.cumulative_logprob
    reply = llm.chat([{"role": "user", "content": "Who made the heaven?"}], sp, use_tqdm=False)[0].outputs[0]
    assert len(reply.logprobs) == len(reply.token_ids) > 0
    assert all(len(d) in (3, 4) for d in reply.logprobs)


def test_batch_mixes_settings(llm):
    """One batch, each request its own setting (None, 0, 7, 20, sampled): each equals the same request run
    alone, so the callbacks of concurrent requests are not mixed up."""
    params = [SP(temperature=0, max_tokens=12), SP(temperature=0, max_tokens=12, logprobs=0),
              SP(temperature=0.8, max_tokens=16, seed=9, logprobs=7),
              SP(temperature=0, max_tokens=10, logprobs=MAX_LOGPROBS),
              SP(temperature=1.0, max_tokens=16, seed=4, logprobs=1, stop=["\n"])]
    prompts = [PROMPTS[0], PROMPTS[1], PROMPTS[2], PROMPTS[0], PROMPTS[1]]
    batch = llm.generate(prompts, params, use_tqdm=False)
    for p, sp, b in zip(prompts, params, batch):
        one = llm.generate(p, sp, use_tqdm=False)[0].outputs[0]
        assert one.token_ids == b.outputs[0].token_ids
        assert one.logprobs == b.outputs[0].logprobs
        assert one.cumulative_logprob == b.outputs[0].cumulative_logprob
        if sp.logprobs is None:
            assert b.outputs[0].logprobs is None
        else:
            assert all(len(d) in (sp.logprobs, sp.logprobs + 1) for d in b.outputs[0].logprobs)


def test_threads_each_get_their_own(llm):
    sp = [SP(temperature=0, max_tokens=14, logprobs=k) for k in (1, 4, 9, 0)]
    ref = [gen(llm, PROMPTS[i % 3], temperature=0, max_tokens=14, logprobs=s.logprobs).outputs[0].logprobs
           for i, s in enumerate(sp)]
    got = [None] * len(sp)

    def one(i):
        got[i] = llm.generate(PROMPTS[i % 3], sp[i], use_tqdm=False)[0].outputs[0].logprobs

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(sp))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == ref


@pytest.mark.parametrize("cfg", [{"num_speculative_tokens": 0}, {"tree": [3, 2, 1]},
                                 {"num_speculative_tokens": 2, "verify": "match"},
                                 {"method": "ngram", "prompt_lookup_min": 1, "prompt_lookup_max": 3}])
def test_independent_of_speculation(llm, cfg):
    """The target's distribution does not depend on who drafted: greedy logprobs with plain decoding, a
    draft tree, γ = 2 in match mode and n-gram drafting equal the default chain's, value for value."""
    prompt = "And God said, Let there be light: and there was light. And God said"
    ref = gen(llm, prompt, temperature=0, max_tokens=16, logprobs=5).outputs[0]
    model = TARGET if cfg.get("method") == "ngram" else None
    with specdec.LLM(model=model, backend="cpu", speculative_config=cfg, max_num_seqs=2) as m:
        o = gen(m, prompt, temperature=0, max_tokens=16, logprobs=5).outputs[0]
    assert o.token_ids == ref.token_ids
    assert o.logprobs == ref.logprobs
    assert math.isfinite(o.cumulative_logprob) and o.cumulative_logprob == ref.cumulative_logprob


@pytest.mark.quick
def test_library_without_the_field_refuses(llm, monkeypatch):
    """A libspecdec older than 0.4.1 (its header has no specdec_generate_params.logprobs) cannot report
    logprobs: UnsupportedError naming the field, not a silent None."""
    b = _ffi.binding()
    real = b.has_field
    monkeypatch.setattr(b, "has_field", lambda s, f: False if f == "logprobs" else real(s, f))
    with pytest.raises(specdec.UnsupportedError, match="specdec_generate_params.logprobs"):
        gen(llm, PROMPTS[0], temperature=0, max_tokens=2, logprobs=1)
    assert gen(llm, PROMPTS[0], temperature=0, max_tokens=2).outputs[0].logprobs is None
