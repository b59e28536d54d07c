"""LLM(num_gpu_blocks_override=, block_size=, kv_admission=) over the scheduler's kv_pool_blocks,
kv_block_tokens and kv_admission (libspecdec 0.5.4), bundled pair, CPU backend:

- four long requests (ignore_eos, 96 tokens) in a pool of 22 blocks of 8 tokens, which holds one of
  them alone: "optimistic" runs them together and preempts (RequestOutput.metrics["n_preemptions"]
  sums to > 0), "reserve" preempts nothing; greedy and seeded outputs are the same token ids in both
  and with the default pool;
- bad values (a negative or bool block count, block_size 0 or 4097, kv_admission "eager") raise
  InvalidArgumentError naming the argument; a pool too small for one request refuses it with
  specdec's CONTEXT_FULL error.
"""
import pytest

import specdec

PROMPTS = ["And God said", "In the beginning", "The LORD is my shepherd", "Blessed are the"]
GREEDY = specdec.SamplingParams(temperature=0, max_tokens=96, ignore_eos=True)
SEEDED = specdec.SamplingParams(temperature=0.8, top_k=40, seed=7, max_tokens=96, ignore_eos=True)


def run(params, **kw):
    with specdec.LLM(backend="cpu", max_num_seqs=4, **kw) as m:
        outs = m.generate(PROMPTS, params)
    return [o.outputs[0].token_ids for o in outs], sum(o.metrics["n_preemptions"] for o in outs)


@pytest.mark.parametrize("params", [GREEDY, SEEDED], ids=["greedy", "seeded"])
def test_same_outputs_with_and_without_preemption(params):
    ref, none = run(params)
    assert none == 0 and all(len(t) == 96 for t in ref)
    small = dict(num_gpu_blocks_override=22, block_size=8)
    got, preempted = run(params, kv_admission="optimistic", **small)
    assert got == ref
    assert preempted > 0, "a pool of 22 blocks for four requests of ~100 rows preempted nothing"
    got, reserved = run(params, kv_admission="reserve", **small)
    assert got == ref and reserved == 0


@pytest.mark.quick
@pytest.mark.parametrize("kw, name", [({"num_gpu_blocks_override": -1}, "num_gpu_blocks_override"),
                                      ({"num_gpu_blocks_override": True}, "num_gpu_blocks_override"),
                                      ({"block_size": 0}, "block_size"), ({"block_size": 4097}, "block_size"),
                                      ({"kv_admission": "eager"}, "kv_admission")])
def test_bad_values(kw, name):
    with pytest.raises(specdec.InvalidArgumentError, match=name):
        specdec.LLM(backend="cpu", max_num_seqs=1, **kw)


@pytest.mark.quick
def test_pool_too_small_for_a_request():
    with specdec.LLM(backend="cpu", max_num_seqs=1, num_gpu_blocks_override=2, block_size=8) as m:
        with pytest.raises(specdec.ContextFullError, match="KV blocks"):
            m.generate(["And God said"], GREEDY)
