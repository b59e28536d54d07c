"""LLM(cpu_threads=N) over specdec_engine_params.cpu_threads (libspecdec 0.5.3; llama.cpp's -t):

- greedy and seeded sampling give the same token ids with cpu_threads 1, 2 and 3 (and the default),
  speculative (the bundled pair) and plain;
- the value reaches the library: with SPECDEC_CPU_THREADS=abc in the environment, LLM() without
  cpu_threads raises InvalidArgumentError naming the variable, LLM(cpu_threads=2) works;
- values other than None or an int in 1..256 (0, -1, 257, 2.0, True, "2") raise InvalidArgumentError.
"""
import pytest

import specdec

PROMPTS = ["And God said", "In the beginning"]
GREEDY = specdec.SamplingParams(temperature=0, max_tokens=12)
SEEDED = specdec.SamplingParams(temperature=0.8, top_k=40, seed=7, max_tokens=12)


def ids(llm, params):
    return [o.outputs[0].token_ids for o in llm.generate(PROMPTS, params)]


@pytest.mark.quick
@pytest.mark.parametrize("spec", [None, {"method": "ngram"}])
def test_same_tokens_for_every_count(spec):
    ref = None
    for n in (1, 2, 3, None):
        with specdec.LLM(backend="cpu", max_num_seqs=2, speculative_config=spec, cpu_threads=n) as m:
            assert m.cpu_threads == n
            got = (ids(m, GREEDY), ids(m, SEEDED))
        assert all(len(t) == 12 for t in got[0] + got[1])
        if ref is None:
            ref = got
        assert got == ref, f"cpu_threads={n}"


@pytest.mark.quick
def test_reaches_the_library(monkeypatch):
    monkeypatch.setenv("SPECDEC_CPU_THREADS", "abc")
    with pytest.raises(specdec.InvalidArgumentError, match="SPECDEC_CPU_THREADS"):
        specdec.LLM(backend="cpu", max_num_seqs=1)
    with specdec.LLM(backend="cpu", max_num_seqs=1, cpu_threads=2) as m:
        assert len(ids(m, GREEDY)[0]) == 12


@pytest.mark.quick
@pytest.mark.parametrize("bad", [0, -1, 257, 2.0, True, "2"])
def test_bad_values(bad):
    with pytest.raises(specdec.InvalidArgumentError, match="cpu_threads"):
        specdec.LLM(backend="cpu", cpu_threads=bad)
