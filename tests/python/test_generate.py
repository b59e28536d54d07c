"""LLM.generate against `specdec generate` (the CLI on the same library), and batch against one by one."""
import json
import subprocess

import pytest

import specdec
from conftest import TARGET, cli_generate, specdec_bin
from specdec import _ffi

PROMPTS = ["And God said", "In the beginning", "Jesus wept. And the", "The Lord is my shepherd;"]


@pytest.mark.parametrize("prompt", PROMPTS[:2])
def test_greedy_equals_cli(llm, prompt):
    ref = cli_generate(prompt, 32, "--temp", 0)
    out = llm.generate(prompt, specdec.SamplingParams(temperature=0, max_tokens=32), use_tqdm=False)
    assert len(out) == 1
    o = out[0]
    assert o.prompt == prompt
    assert o.prompt_token_ids == ref["prompt_tokens"]
    assert o.outputs[0].token_ids == ref["tokens"]
    assert o.outputs[0].text == ref["text"]
    # the same rounds: the scheduler's output equals specdec_generate's, statistics included
    for k in ("n_prompt", "n_generated", "n_rounds", "n_drafted", "n_accepted", "stop_reason", "final_n_draft"):
        assert o.metrics[k] == ref["stats"][k], k


@pytest.mark.parametrize("prompt", ["And God said, Let there be light: and there was light. And God said",
                                    "In the beginning"])
def test_ngram_greedy_equals_cli(prompt):
    """speculative_config {"method": "ngram"} against `specdec generate --drafter ngram` (no draft model
    on either side): the same tokens and text. Only the output is compared: the n-gram cost gate
    (MEASURED, the default on both) proposes by measured round times, so the counts may differ."""
    cmd = [specdec_bin(), "generate", "-m", TARGET, "--drafter", "ngram", "--ngram-min", "1", "--ngram-max", "3",
           "-p", prompt, "-n", "32", "--temp", "0", "--backend", "cpu", "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{cmd}: {r.stderr}"
    ref = json.loads(r.stdout)
    spec = {"method": "ngram", "prompt_lookup_min": 1, "prompt_lookup_max": 3}
    with specdec.LLM(model=TARGET, backend="cpu", speculative_config=spec) as m:
        assert m.draft is None
        o = m.generate(prompt, specdec.SamplingParams(temperature=0, max_tokens=32), use_tqdm=False)[0]
    assert ref["stats"]["draft_method"] == "ngram" and o.metrics.draft_method == "ngram"
    assert o.prompt_token_ids == ref["prompt_tokens"]
    assert len(o.outputs[0].token_ids) == 32
    assert o.outputs[0].token_ids == ref["tokens"]
    assert o.outputs[0].text == ref["text"]


def test_metrics_carry_the_cli_names(llm):
    ref = cli_generate("And God said", 4, "--temp", 0)
    o = llm.generate("And God said", specdec.SamplingParams(temperature=0, max_tokens=4), use_tqdm=False)[0]
    # every name is the CLI's; every specdec_stats field is there (CLI-only derived keys may exist)
    assert set(o.metrics) <= set(ref["stats"]), set(o.metrics) - set(ref["stats"])
    fields = {n for n, _ in _ffi.binding().ffi.typeof("specdec_stats").fields if not n.startswith("reserved")}
    assert fields | {"backend"} <= set(o.metrics)
    assert o.metrics.acceptance_rate == o.metrics["acceptance_rate"]
    assert o.metrics.backend == "cpu"


def test_match_mode_same_seed_equals_cli(llm_match, seed=7):
    sp = dict(temperature=0.9, top_k=40, top_p=0.95, min_p=0.05)
    ref = cli_generate("And God said", 24, "--temp", 0.9, "--top-k", 40, "--top-p", 0.95, "--min-p", 0.05,
                       "--seed", seed, "--verify", "match")
    o = llm_match.generate("And God said", specdec.SamplingParams(**sp, max_tokens=24, seed=seed), use_tqdm=False)[0]
    assert o.outputs[0].token_ids == ref["tokens"]
    assert o.outputs[0].text == ref["text"]
    # match mode: the same text as plain decoding (no draft) with that seed
    plain = cli_generate("And God said", 24, "--temp", 0.9, "--top-k", 40, "--top-p", 0.95, "--min-p", 0.05,
                         "--seed", seed, "--draft-max", 0)
    assert o.outputs[0].token_ids == plain["tokens"]


def test_rejection_same_seed_equals_cli(llm):
    ref = cli_generate("In the beginning", 24, "--temp", 0.8, "--top-k", 0, "--top-p", 1, "--min-p", 0, "--seed", 99)
    o = llm.generate("In the beginning", specdec.SamplingParams(temperature=0.8, max_tokens=24, seed=99),
                     use_tqdm=False)[0]
    assert o.outputs[0].token_ids == ref["tokens"]


def test_batch_equals_one_by_one(llm):
    params = [specdec.SamplingParams(temperature=0, max_tokens=20),
              specdec.SamplingParams(temperature=0.8, max_tokens=16, seed=5),
              specdec.SamplingParams(temperature=1.0, top_k=20, max_tokens=24, seed=6, stop=["\n", "th"]),
              specdec.SamplingParams(temperature=0, max_tokens=12, ignore_eos=True),
              specdec.SamplingParams(temperature=0.8, max_tokens=16, seed=5)]
    prompts = PROMPTS + [PROMPTS[1]]
    batch = llm.generate(prompts, params, use_tqdm=True)
    assert [o.prompt for o in batch] == prompts
    for p, sp, b in zip(prompts, params, batch):
        one = llm.generate([p], sp, use_tqdm=False)[0]
        assert one.outputs[0].token_ids == b.outputs[0].token_ids
        assert one.outputs[0].text == b.outputs[0].text
        assert one.outputs[0].finish_reason == b.outputs[0].finish_reason
    assert len({o.request_id for o in batch}) == len(batch)


def test_token_id_prompts(llm):
    sp = specdec.SamplingParams(temperature=0, max_tokens=6)
    by_text = llm.generate(PROMPTS[:2], sp, use_tqdm=False)
    ids = [o.prompt_token_ids for o in by_text]
    for form in (ids, [{"prompt_token_ids": i} for i in ids]):
        by_ids = llm.generate(form, sp, use_tqdm=False)
        assert [o.outputs[0].token_ids for o in by_ids] == [o.outputs[0].token_ids for o in by_text]
        assert all(o.prompt is None for o in by_ids)
    import numpy as np
    by_np = llm.generate([np.array(i, dtype=np.int64) for i in ids], sp, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in by_np] == [o.outputs[0].token_ids for o in by_text]
    one = llm.generate(ids[0], sp, use_tqdm=False)  # a single list of ids is one prompt
    assert len(one) == 1 and one[0].outputs[0].token_ids == by_text[0].outputs[0].token_ids
    assert llm.generate([], sp) == []


def test_stop_string_cuts_text_keeps_tokens(llm):
    ref = cli_generate("And God said", 24, "--temp", 0, "--stop", "man")
    o = llm.generate("And God said", specdec.SamplingParams(temperature=0, max_tokens=24, stop="man"),
                     use_tqdm=False)[0].outputs[0]
    assert o.token_ids == ref["tokens"]
    assert "man" in ref["text"]
    assert o.text == ref["text"][:ref["text"].index("man")]
    assert (o.finish_reason, o.stop_reason) == ("stop", "man")


def test_finish_reasons(llm):
    sp = specdec.SamplingParams(temperature=0, max_tokens=5)
    o = llm.generate("And God said", sp, use_tqdm=False)[0]
    assert (o.outputs[0].finish_reason, o.metrics.stop_reason) == ("length", "n_predict")
    with specdec.LLM(backend="cpu", n_ctx=24) as small:
        o = small.generate("And God said", specdec.SamplingParams(temperature=0, max_tokens=None, ignore_eos=True),
                           use_tqdm=False)[0]
        assert (o.outputs[0].finish_reason, o.metrics.stop_reason) == ("length", "context_full")
        assert len(o.prompt_token_ids) + len(o.outputs[0].token_ids) == 24


def test_llm_seed_reproducible():
    sp = specdec.SamplingParams(temperature=1.0, max_tokens=16)
    runs = []
    for _ in range(2):
        with specdec.LLM(backend="cpu", seed=3) as m:
            runs.append([o.outputs[0].token_ids for o in m.generate(["And God said"] * 3, sp, use_tqdm=False)])
    assert runs[0] == runs[1]
    assert len({tuple(t) for t in runs[0]}) > 1  # each request its own seed


def test_speculative_config_tree_and_plain(llm):
    ref = llm.generate(PROMPTS[:1], specdec.SamplingParams(temperature=0, max_tokens=12), use_tqdm=False)
    cfgs = [{"tree": [3, 2, 1]}, {"draft_nodes": 8}, {"num_speculative_tokens": 2, "verify": "greedy"},
            {"num_speculative_tokens": 0}]
    for cfg in cfgs:
        with specdec.LLM(backend="cpu", speculative_config=cfg, max_num_seqs=2) as m:
            got = m.generate(PROMPTS[:1], specdec.SamplingParams(temperature=0, max_tokens=12), use_tqdm=False)
        assert [o.outputs[0].token_ids for o in got] == [o.outputs[0].token_ids for o in ref], cfg
        if cfg.get("num_speculative_tokens") == 0:
            assert got[0].metrics.n_drafted == 0
        elif "tree" in cfg or "draft_nodes" in cfg:
            assert got[0].metrics.nodes_per_round > 1
