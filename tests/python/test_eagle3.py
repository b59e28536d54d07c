"""specdec.LLM with an EAGLE-3 head (speculative_config {"method": "eagle3", "model": kjv-eagle3}): the
scheduler drafts with the head, and greedy output and statistics equal `specdec generate -md HEAD`; a
head with "draft_model", or "eagle3" with a draft model, is refused when the LLM is made."""
import os

import pytest

import specdec
from conftest import DRAFT, cli_generate

HEAD = os.path.join(os.path.dirname(DRAFT), "kjv-eagle3")
PROMPTS = ["And God said", "In the beginning", "And it came to pass, when the king"]


def cli_generate_head(prompt, n, *extra):
    return cli_generate(prompt, n, *extra, draft=HEAD)


@pytest.fixture(scope="module")
def llm_head():
    with specdec.LLM(backend="cpu", speculative_config={"method": "eagle3", "model": HEAD,
                                                        "num_speculative_tokens": 3}) as m:
        yield m


@pytest.mark.quick
def test_eagle3_greedy_equals_cli(llm_head):
    n = 8 if os.environ.get("SPECDEC_TEST_SLOW") else 24
    refs = [cli_generate_head(p, n, "--temp", 0, "--draft-max", 3) for p in PROMPTS]
    outs = llm_head.generate(PROMPTS, specdec.SamplingParams(temperature=0, max_tokens=n), use_tqdm=False)
    assert llm_head.draft == HEAD
    for o, ref in zip(outs, refs):  # the three decoded together in the scheduler's rounds
        assert o.outputs[0].token_ids == ref["tokens"]
        assert o.outputs[0].text == ref["text"]
        assert o.metrics["draft_method"] == "eagle3" and ref["stats"]["draft_method"] == "eagle3"
        for k in ("n_rounds", "n_drafted", "n_accepted", "stop_reason"):
            assert o.metrics[k] == ref["stats"][k], k
    assert sum(o.metrics["n_drafted"] for o in outs) > 0


def test_eagle3_without_method_and_tree():
    # no "method": the head given drafts as eagle3 (as `-md HEAD`), here as an EAGLE-2 tree
    ref = cli_generate_head(PROMPTS[0], 24, "--temp", 0, "--tree", "3,2")
    with specdec.LLM(draft=HEAD, backend="cpu", speculative_config={"tree": [3, 2]}) as m:
        o = m.generate(PROMPTS[0], specdec.SamplingParams(temperature=0, max_tokens=24), use_tqdm=False)[0]
    assert o.outputs[0].token_ids == ref["tokens"]
    assert o.metrics["draft_method"] == "eagle3" and o.metrics["n_drafted"] == ref["stats"]["n_drafted"]


@pytest.mark.quick
@pytest.mark.parametrize("kwargs, word", [
    (dict(speculative_config={"method": "draft_model", "model": HEAD}), "EAGLE-3 head"),
    (dict(speculative_config={"method": "eagle3", "model": DRAFT}), "not an EAGLE-3 head"),
])
def test_method_must_fit_the_draft(kwargs, word):
    with pytest.raises(specdec.InvalidArgumentError) as ei:
        specdec.LLM(backend="cpu", **kwargs)
    assert word in str(ei.value)
