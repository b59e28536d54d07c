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


@pytest.mark.quick
def test_priority_reaches_the_scheduler():
    """LLM(scheduling_policy="priority", max_num_seqs=1): generate(..., priority=[5, 1, 3, 1]) reaches the
    scheduler (the order it serves them in is checked by the C test scheduler_preemption and the
    server's test_priority_scheduling) and gives the fcfs run's outputs. Priorities other than 0
    without the policy, a wrong count or non-ints raise InvalidArgumentError; a bad policy name too."""
    prompts = ["And God said", "In the beginning", "Blessed are the", "The LORD is my"]
    params = specdec.SamplingParams(temperature=0, max_tokens=4)
    with specdec.LLM(backend="cpu", max_num_seqs=1) as m:
        ref = [o.outputs[0].token_ids for o in m.generate(prompts, params)]
        with pytest.raises(specdec.InvalidArgumentError, match="scheduling_policy"):
            m.generate(prompts, params, priority=[0, 1, 0, 0])
    with specdec.LLM(backend="cpu", max_num_seqs=1, scheduling_policy="priority") as m:
        outs = m.generate(prompts, params, priority=[5, 1, 3, 1])
        assert [o.outputs[0].token_ids for o in outs] == ref
        for bad in ([1, 2], ["a", 1, 1, 1], [True, 0, 0, 0], 3):
            with pytest.raises(specdec.InvalidArgumentError, match="priority"):
                m.generate(prompts, params, priority=bad)
    with pytest.raises(specdec.InvalidArgumentError, match="scheduling_policy"):
        specdec.LLM(backend="cpu", max_num_seqs=1, scheduling_policy="lottery")
