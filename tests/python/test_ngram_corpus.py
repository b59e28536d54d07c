"""LLM(ngram_corpus_tokens=N) over specdec_engine_params.ngram_corpus_tokens (libspecdec 0.5.10): the n-gram
drafter's cross-request corpus.

- a prompt generated twice (greedy, and seeded match-mode sampling) gives the same token ids with and without
  the corpus, and with the first generation in the corpus the second takes fewer rounds;
- values other than an int in 0..2**26 (-1, 2**26 + 1, 1.5, True, "8") raise InvalidArgumentError.
"""
import pytest

import specdec

PROMPT = "And God said"


def run(corpus, params, verify):
    spec = {"method": "ngram", "verify": verify}
    with specdec.LLM(backend="cpu", max_num_seqs=1, speculative_config=spec, ngram_corpus_tokens=corpus) as m:
        outs = [m.generate([PROMPT], params)[0] for _ in range(2)]
    return [o.outputs[0].token_ids for o in outs], [o.metrics["n_rounds"] for o in outs]


@pytest.mark.quick
@pytest.mark.parametrize("verify,params", [
    ("greedy", specdec.SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)),
    ("match", specdec.SamplingParams(temperature=0.8, seed=11, max_tokens=40, ignore_eos=True))])
def test_same_tokens_fewer_rounds(verify, params):
    """Without a corpus the n-gram drafter's GREEDY / MATCH output is plain decoding's (tests/drafters); with
    one, the same ids, and the second generation takes fewer rounds."""
    ids0, rounds0 = run(0, params, verify)
    ids1, rounds1 = run(1 << 16, params, verify)
    assert len(ids0[0]) == 40 and ids0[1] == ids0[0] and ids1 == ids0
    # (the drafter's default cost gate reads measured times: round counts vary a little from run to run)
    assert rounds1[1] < 0.75 * rounds0[1], (rounds0, rounds1)


@pytest.mark.quick
def test_suffix_method():
    """speculative_config {"method": "suffix"}: the n-gram drafter with a corpus (kept by default); vLLM's
    suffix_decoding_* keys are refused."""
    params = specdec.SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)
    with specdec.LLM(backend="cpu", max_num_seqs=1, speculative_config={"method": "suffix"}) as m:
        outs = [m.generate([PROMPT], params)[0] for _ in range(2)]
    ids, rounds = [o.outputs[0].token_ids for o in outs], [o.metrics["n_rounds"] for o in outs]
    ref, ref_rounds = run(0, params, "greedy")
    assert ids == ref and outs[1].metrics["draft_method"] == "ngram"
    assert rounds[1] < 0.75 * ref_rounds[1], (ref_rounds, rounds)
    with pytest.raises(specdec.InvalidArgumentError, match="suffix_decoding_max_tree_depth"):
        specdec.LLM(backend="cpu", speculative_config={"method": "suffix", "suffix_decoding_max_tree_depth": 8})


@pytest.mark.quick
@pytest.mark.parametrize("bad", [-1, (1 << 26) + 1, 1.5, True, "8"])
def test_bad_values(bad):
    with pytest.raises(specdec.InvalidArgumentError, match="ngram_corpus_tokens"):
        specdec.LLM(backend="cpu", ngram_corpus_tokens=bad)
