"""LLM(enable_prefix_caching=...) and RequestOutput.num_cached_tokens (vLLM's names) over the library's
automatic prefix caching (include/specdec.h specdec_prefix_cache; docs/BATCHING.md "Prefix cache"), and
LLM(prefill_chunk=N) / `serve --prefill-chunk N` over its chunked prefill (docs/BATCHING.md "Chunked
prefill": the same outputs, bad values refused).

- None (the default: the library's AUTO) and True: a prompt of >= 2 KV blocks (16 tokens each) reports
  num_cached_tokens 0 the first time and > 0 (at most n_prompt - 1) when sent again, equal to
  metrics.n_cached_prompt; scheduler_metrics()' prefix_cache_queries grow by n_prompt - 1 per request
  and prefix_cache_hits by the cached tokens reported; blocks only the cache holds are counted;
- False: 0 every time, no hit, no block cached;
- exactness: greedy and seeded sampling give the same token ids cached (the second run) as with the cache
  off, and prompt_logprobs (which compute the whole prompt: 0 cached) the same records;
- values other than None / True / False raise InvalidArgumentError;
- `python -m specdec.serve` passes --no-enable-prefix-caching through: a repeated prompt reports
  usage.prompt_tokens_details.cached_tokens 0 there and > 0 on a default server.
"""
import os

import pytest

import specdec
from conftest import Server

# 47 tokens on the bundled tokenizer: two full blocks and some; begun by no other test in this file's LLMs
LONG = ("And the LORD spake unto Moses, saying, Speak unto the children of Israel, and say unto them, When ye "
        "be come into the land which I give unto you, then shall the land keep a sabbath unto the LORD.")
GREEDY = specdec.SamplingParams(temperature=0, max_tokens=8)
SEEDED = specdec.SamplingParams(temperature=0.8, top_k=40, seed=7, max_tokens=8)


@pytest.fixture(scope="module")
def llm_auto():
    with specdec.LLM(backend="cpu", max_num_seqs=2) as m:
        yield m


@pytest.fixture(scope="module")
def llm_off():
    with specdec.LLM(backend="cpu", max_num_seqs=2, enable_prefix_caching=False) as m:
        yield m


def _twice(llm, params):
    return [llm.generate(LONG, params, use_tqdm=False)[0] for _ in range(2)]


@pytest.mark.quick
def test_bad_values():
    for v in ("yes", 1, 0, "True"):
        with pytest.raises(specdec.InvalidArgumentError, match="enable_prefix_caching"):
            specdec.LLM(enable_prefix_caching=v)


@pytest.mark.quick
def test_cached_on_repeat(llm_auto):
    assert llm_auto.enable_prefix_caching is None
    m0 = llm_auto.scheduler_metrics()
    assert {"prefix_cache_queries", "prefix_cache_hits", "kv_blocks_cached", "draft_kv_blocks_cached"} <= set(m0)
    first, second = _twice(llm_auto, GREEDY)
    n = len(first.prompt_token_ids)
    assert n >= 33
    assert first.num_cached_tokens == 0 and 0 < second.num_cached_tokens <= n - 1, \
        (first.num_cached_tokens, second.num_cached_tokens)
    for out in (first, second):
        assert isinstance(out.num_cached_tokens, int) and out.num_cached_tokens == out.metrics.n_cached_prompt
    assert second.outputs[0].token_ids == first.outputs[0].token_ids
    m1 = llm_auto.scheduler_metrics()
    assert m1["prefix_cache_queries"] - m0["prefix_cache_queries"] == 2 * (n - 1)
    assert m1["prefix_cache_hits"] - m0["prefix_cache_hits"] == second.num_cached_tokens
    assert m1["kv_blocks_cached"] > 0


def test_exact_with_and_without(llm_auto, llm_off):
    for params in (GREEDY, SEEDED):
        off = _twice(llm_off, params)
        on = _twice(llm_auto, params)
        assert [o.num_cached_tokens for o in off] == [0, 0]
        assert on[1].num_cached_tokens > 0
        ids = off[0].outputs[0].token_ids
        assert all(o.outputs[0].token_ids == ids for o in off + on), params
        assert all(o.outputs[0].text == off[0].outputs[0].text for o in on), params
    m = llm_off.scheduler_metrics()
    assert m["prefix_cache_hits"] == 0 and m["kv_blocks_cached"] == 0


def test_prompt_logprobs_uncached(llm_auto, llm_off):
    p = specdec.SamplingParams(temperature=0, max_tokens=2, prompt_logprobs=2)
    _twice(llm_auto, GREEDY)  # its blocks are cached
    on = llm_auto.generate(LONG, p, use_tqdm=False)[0]
    off = llm_off.generate(LONG, p, use_tqdm=False)[0]
    assert on.num_cached_tokens == 0
    assert on.prompt_logprobs == off.prompt_logprobs and on.outputs[0].token_ids == off.outputs[0].token_ids


def test_enable_true():
    with specdec.LLM(backend="cpu", max_num_seqs=1, enable_prefix_caching=True) as llm:
        assert llm.enable_prefix_caching is True
        first, second = _twice(llm, GREEDY)
        assert first.num_cached_tokens == 0 and second.num_cached_tokens > 0
        assert first.outputs[0].token_ids == second.outputs[0].token_ids


@pytest.mark.skipif(bool(os.environ.get("SPECDEC_TEST_NO_SERVER")), reason="built without `specdec serve`")
def test_serve_passes_the_option():
    def cached(args):
        srv = Server("--parallel", "1", *args)
        try:
            out = []
            for _ in range(2):
                status, body = srv.post("/v1/completions", {"prompt": LONG, "max_tokens": 2, "temperature": 0})
                assert status == 200, body
                out.append(body["usage"]["prompt_tokens_details"]["cached_tokens"])
            return out
        finally:
            assert srv.stop() == 0
    assert cached(["--no-enable-prefix-caching"]) == [0, 0]
    default = cached([])
    assert default[0] == 0 and default[1] > 0, default


# Chunked prefill (LLM(prefill_chunk=N), the scheduler's prefill_chunk; `serve --prefill-chunk N`): the
# same token ids as a prompt prefilled at once, with the cache on and off; bad values refused.
@pytest.mark.quick
def test_prefill_chunk_bad_values():
    for v in (-1, 1.5, "4", True):
        with pytest.raises(specdec.InvalidArgumentError, match="prefill_chunk"):
            specdec.LLM(prefill_chunk=v)


def test_prefill_chunk_same_outputs(llm_off):
    prompts = [LONG, LONG + " And Moses said", "In the beginning God created the heaven and the earth."]
    want = [o.outputs[0].token_ids for o in llm_off.generate(prompts, GREEDY, use_tqdm=False)]
    for cache in (None, False):
        with specdec.LLM(backend="cpu", max_num_seqs=3, prefill_chunk=5, enable_prefix_caching=cache) as llm:
            assert llm.prefill_chunk == 5
            got = llm.generate(prompts, GREEDY, use_tqdm=False)
            assert [o.outputs[0].token_ids for o in got] == want, cache


@pytest.mark.skipif(bool(os.environ.get("SPECDEC_TEST_NO_SERVER")), reason="built without `specdec serve`")
def test_serve_prefill_chunk():
    srv = Server("--parallel", "2", "--prefill-chunk", "3")
    try:
        status, body = srv.post("/v1/completions", {"prompt": LONG, "max_tokens": 6, "temperature": 0})
        assert status == 200, body
    finally:
        assert srv.stop() == 0
    ref = Server("--parallel", "2")
    try:
        status, want = ref.post("/v1/completions", {"prompt": LONG, "max_tokens": 6, "temperature": 0})
        assert status == 200, want
    finally:
        assert ref.stop() == 0
    assert body["choices"][0]["text"] == want["choices"][0]["text"]


# SamplingParams(n=N) (vLLM's): N CompletionOutputs per prompt, index 0..N-1, one seed and
# sequence_id = the index (as the server's "n"), so sample 0 is the n = 1 output; reproducible with a
# seed; the later samples reuse the prompt's KV; prompt_logprobs computed once; stream() refuses n > 1.
def test_n_samples(llm_auto):
    sp = specdec.SamplingParams(temperature=0.8, top_k=40, seed=5, max_tokens=8, n=3)
    m0 = llm_auto.scheduler_metrics()
    out = llm_auto.generate([LONG, "And God said"], sp, use_tqdm=False)
    m1 = llm_auto.scheduler_metrics()
    assert len(out) == 2 and all(len(o.outputs) == 3 for o in out)
    assert all([c.index for c in o.outputs] == [0, 1, 2] for o in out)
    one = llm_auto.generate([LONG, "And God said"], specdec.SamplingParams(temperature=0.8, top_k=40, seed=5,
                                                                             max_tokens=8), use_tqdm=False)
    for o, ref in zip(out, one):
        assert o.outputs[0].token_ids == ref.outputs[0].token_ids and o.outputs[0].text == ref.outputs[0].text
    ids = [c.token_ids for c in out[0].outputs]
    assert len({tuple(t) for t in ids}) > 1, ids  # three random streams: not all equal (fixed seed)
    again = llm_auto.generate(LONG, sp, use_tqdm=False)[0]
    assert [c.token_ids for c in again.outputs] == ids
    # the long prompt's later samples found its blocks: at least 2 x 32 tokens more hits
    assert m1["prefix_cache_hits"] - m0["prefix_cache_hits"] >= 2 * 32
    pl = llm_auto.generate(LONG, specdec.SamplingParams(temperature=0, max_tokens=2, n=2, prompt_logprobs=1),
                           use_tqdm=False)[0]
    assert len(pl.outputs) == 2 and len(pl.prompt_logprobs) == len(pl.prompt_token_ids)
    assert pl.outputs[0].token_ids == pl.outputs[1].token_ids  # greedy: every sample the same


@pytest.mark.quick
def test_n_bad_values(llm_auto):
    for v in (0, 129, "2", 1.0, True):
        with pytest.raises(specdec.InvalidArgumentError, match="n"):
            specdec.SamplingParams(n=v)
    with pytest.raises(specdec.InvalidArgumentError, match="n = 2"):
        next(llm_auto.stream("And God said", specdec.SamplingParams(n=2)))
