"""specdec.AsyncLLM (vLLM's AsyncLLM shape) on the bundled pair, CPU backend: the final output of every
request equals LLM.generate's for the same prompt, parameters and seed (text, token_ids, finish and stop
reasons, logprobs, prompt_logprobs), in each output kind, with many requests decoding together; the
intermediate outputs are consistent with it (CUMULATIVE: prefixes; DELTA: pieces that concatenate to it;
FINAL_ONLY: none); abort, a consumer that leaves, a cancelled task, shutdown with requests running, and
LLM calls on the same scheduler at the same time; refusals. Plain asyncio.run: no pytest plugin."""
import asyncio
import threading

import pytest

import specdec
from specdec import RequestOutputKind, SamplingParams

CUMULATIVE, DELTA, FINAL_ONLY = RequestOutputKind.CUMULATIVE, RequestOutputKind.DELTA, RequestOutputKind.FINAL_ONLY

CASES = [  # (prompt, SamplingParams fields)
    ("And God said", dict(temperature=0, max_tokens=24)),
    ("In the beginning", dict(temperature=0.9, max_tokens=20, seed=11)),
    ("And God said", dict(temperature=0, max_tokens=32, stop=["man of"])),
    ("The Lord is my", dict(temperature=1.0, max_tokens=24, seed=3, stop=["\n", "the"], n=3)),
    ("And the earth", dict(temperature=0.7, max_tokens=16, seed=5, logprobs=2, prompt_logprobs=1)),
    ("And God said", dict(temperature=0, max_tokens=30, stop_token_ids=[11])),
]


@pytest.fixture(scope="module")
def engine():
    eng = specdec.AsyncLLM(backend="cpu", max_num_seqs=4)
    yield eng
    eng.shutdown()


def same_completion(a, b):
    assert (a.index, a.text, a.token_ids, a.finish_reason, a.stop_reason) == \
        (b.index, b.text, b.token_ids, b.finish_reason, b.stop_reason)
    assert a.cumulative_logprob == b.cumulative_logprob
    assert a.logprobs == b.logprobs


async def collect(eng, prompt, sp, rid):
    return [o async for o in eng.generate(prompt, sp, rid)]


def check_stream(outs, ref, kind):
    """The outputs of one request against LLM.generate's RequestOutput ref."""
    final = outs[-1]
    assert final.finished and not any(o.finished for o in outs[:-1])
    assert all(o.prompt_token_ids == ref.prompt_token_ids for o in outs)
    assert final.prompt_logprobs == ref.prompt_logprobs
    assert final.metrics["n_generated"] == ref.metrics["n_generated"]
    n = len(ref.outputs)
    if kind == FINAL_ONLY:
        assert len(outs) == 1
    if kind != DELTA:
        assert len(final.outputs) == n
        for a, b in zip(final.outputs, ref.outputs):
            same_completion(a, b)
        for o in outs[:-1]:  # every sample so far: a prefix of its final text and tokens
            assert [c.index for c in o.outputs] == list(range(n))
            for c, b in zip(o.outputs, ref.outputs):
                assert b.text.startswith(c.text) and b.token_ids[:len(c.token_ids)] == c.token_ids
                if c.logprobs is not None:
                    assert c.logprobs == b.logprobs[:len(c.token_ids)]
        return
    texts, toks, lps, ends = [""] * n, [[] for _ in range(n)], [[] for _ in range(n)], [None] * n
    for o in outs:
        for c in o.outputs:
            assert ends[c.index] is None, "a finished sample carried on"
            texts[c.index] += c.text
            toks[c.index] += c.token_ids
            if c.logprobs is not None:
                lps[c.index] += c.logprobs
            ends[c.index] = c.finish_reason
    for j, b in enumerate(ref.outputs):
        assert (texts[j], toks[j], ends[j]) == (b.text, b.token_ids, b.finish_reason)
        if b.logprobs is not None:
            assert lps[j] == b.logprobs


@pytest.mark.parametrize("kind", [CUMULATIVE, DELTA, FINAL_ONLY])
def test_outputs_equal_generate(engine, kind):
    refs = [engine.llm.generate(p, SamplingParams(**f), use_tqdm=False)[0] for p, f in CASES]

    async def main():  # every case at once: they decode together
        return await asyncio.gather(*[collect(engine, p, SamplingParams(**f, output_kind=kind), f"{kind}-{i}")
                                      for i, (p, f) in enumerate(CASES)])

    for outs, ref, (i, _) in zip(asyncio.run(main()), refs, enumerate(CASES)):
        assert all(o.request_id == f"{kind}-{i}" for o in outs)
        check_stream(outs, ref, kind)
    if kind == CUMULATIVE:  # tokens arrive as they are generated, not all at the end
        assert len(asyncio.run(main())[0]) > 2


@pytest.mark.quick
def test_quick_greedy_and_streaming(engine):
    sp = SamplingParams(temperature=0, max_tokens=12)
    ref = engine.llm.generate("And God said", sp, use_tqdm=False)[0]
    outs = asyncio.run(collect(engine, "And God said", sp, "q"))
    check_stream(outs, ref, CUMULATIVE)
    assert len(outs) > 1


def test_sync_calls_alongside(engine):
    """LLM.generate from another thread while async requests run: each side collects its own requests."""
    sp = SamplingParams(temperature=0, max_tokens=20)
    ref = engine.llm.generate("In the beginning", sp, use_tqdm=False)[0]

    async def main():
        sync = asyncio.to_thread(engine.llm.generate, ["In the beginning"] * 3, sp, False)
        outs = await asyncio.gather(sync, *[collect(engine, "In the beginning", sp, f"s{i}") for i in range(3)])
        return outs[0], outs[1:]

    sync_outs, async_outs = asyncio.run(main())
    for o in sync_outs:
        same_completion(o.outputs[0], ref.outputs[0])
    for outs in async_outs:
        check_stream(outs, ref, CUMULATIVE)


@pytest.mark.quick
def test_abort(engine):
    ref = engine.llm.generate("And God said", SamplingParams(temperature=0, max_tokens=400, ignore_eos=True),
                              use_tqdm=False)[0].outputs[0]
    before = engine.scheduler_metrics()

    async def main():
        got = []

        async def consume():
            async for o in engine.generate("And God said", SamplingParams(temperature=0, max_tokens=400,
                                                                          ignore_eos=True), "long"):
                got.append(o)

        task = asyncio.create_task(consume())
        while not got:
            await asyncio.sleep(0.01)
        await engine.abort(["no-such-id", "long"])
        await task
        return got[-1]

    last = asyncio.run(main())
    c = last.outputs[0]
    assert last.finished and c.finish_reason == "abort" and c.stop_reason is None
    assert 0 < len(c.token_ids) < 400 and ref.token_ids[:len(c.token_ids)] == c.token_ids
    assert ref.text.startswith(c.text)
    m = engine.scheduler_metrics()
    assert m["cancelled"] == before["cancelled"] + 1 and m["active"] == 0


def test_consumer_leaves_or_is_cancelled(engine):
    """Leaving the async for early (aclose) or cancelling the consuming task cancels the request."""
    sp = SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)
    before = engine.scheduler_metrics()

    async def main():
        gen = engine.generate("And God said", sp, "leave")
        first = await gen.__anext__()
        assert not first.finished
        await gen.aclose()

        async def consume():
            async for _ in engine.generate("And God said", sp, "task"):
                pass

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(500):  # the collector collects both soon after
            m = engine.scheduler_metrics()
            if m["active"] == 0 and m["cancelled"] == before["cancelled"] + 2:
                return m
            await asyncio.sleep(0.01)
        return engine.scheduler_metrics()

    m = asyncio.run(main())
    assert m["cancelled"] == before["cancelled"] + 2 and m["active"] == 0 and m["kv_blocks_used"] == 0
    # the ids are free again
    outs = asyncio.run(collect(engine, "And God said", SamplingParams(temperature=0, max_tokens=4), "leave"))
    assert outs[-1].finished


@pytest.mark.quick
def test_refusals(engine):
    async def first(prompt, sp=None, rid=None, **kw):
        async for o in engine.generate(prompt, sp, rid, **kw):
            return o

    sp = SamplingParams(temperature=0, max_tokens=200, ignore_eos=True)

    async def duplicate():
        gen = engine.generate("And God said", sp, "dup")
        await gen.__anext__()
        try:
            with pytest.raises(specdec.InvalidArgumentError, match="already running"):
                await first("And God said", sp, "dup")
        finally:
            await gen.aclose()

    asyncio.run(duplicate())
    with pytest.raises(specdec.InvalidArgumentError, match="one prompt"):
        asyncio.run(first(["a", "b"]))
    with pytest.raises(specdec.InvalidArgumentError, match="scheduling_policy"):
        asyncio.run(first("a", priority=3))
    with pytest.raises(specdec.InvalidArgumentError, match="request_id"):
        asyncio.run(first("a", None, 7))
    with pytest.raises(specdec.InvalidArgumentError, match="outside"):  # the library's check, at submit
        asyncio.run(first([1, 2, 10**6]))
    with pytest.raises(specdec.InvalidArgumentError, match="output_kind"):
        SamplingParams(output_kind=3)
    with pytest.raises(specdec.InvalidArgumentError, match="output_kind"):
        SamplingParams(output_kind="delta")
    assert SamplingParams(output_kind=1).output_kind is DELTA
    assert engine.is_running and not engine.errored
    asyncio.run(engine.check_health())


def test_priority_and_engine_args():
    eng = specdec.AsyncLLM.from_engine_args(specdec.AsyncEngineArgs(backend="cpu", max_num_seqs=1,
                                                                    scheduling_policy="priority"))
    try:
        order = []

        async def run(rid, prio, n):
            async for o in eng.generate("And God said", SamplingParams(temperature=0, max_tokens=n,
                                                                       ignore_eos=True), rid, priority=prio):
                if o.finished:
                    order.append(rid)

        async def main():  # one slot: "first" runs; "low" then "high" queue; high (lower value) goes first
            t0 = asyncio.create_task(run("first", 0, 60))
            while eng.scheduler_metrics()["active"] == 0:
                await asyncio.sleep(0.005)
            t1 = asyncio.create_task(run("low", 5, 4))
            await asyncio.sleep(0.05)
            t2 = asyncio.create_task(run("high", -5, 4))
            await asyncio.gather(t0, t1, t2)

        asyncio.run(main())
        assert order == ["first", "high", "low"]
    finally:
        eng.shutdown()


def test_shutdown_with_requests_running():
    eng = specdec.AsyncLLM(backend="cpu", max_num_seqs=2)
    sp = SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)

    async def main():
        lasts = {}

        async def consume(rid):
            async for o in eng.generate("And God said", sp, rid):
                lasts[rid] = o

        tasks = [asyncio.create_task(consume(f"r{i}")) for i in range(4)]  # 2 run, 2 queue
        while len(lasts) < 2:
            await asyncio.sleep(0.01)
        await asyncio.to_thread(eng.shutdown)
        await asyncio.gather(*tasks)
        return lasts

    lasts = asyncio.run(main())
    assert {o.outputs[0].finish_reason for o in lasts.values()} == {"abort"} and all(o.finished for o in lasts.values())
    assert not eng.is_running and eng.is_stopped
    with pytest.raises(specdec.ShutDownError):
        asyncio.run(eng.check_health())

    async def after():
        async for _ in eng.generate("And God said", sp):
            pass

    with pytest.raises(specdec.ShutDownError):
        asyncio.run(after())
    eng.shutdown()  # idempotent


def test_event_loops_in_threads(engine):
    """Two threads, each with its own event loop, share the engine."""
    sp = SamplingParams(temperature=0, max_tokens=16)
    ref = engine.llm.generate("And the earth", sp, use_tqdm=False)[0]
    results = {}

    def worker(k):
        results[k] = asyncio.run(collect(engine, "And the earth", sp, f"t{k}"))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(results) == [0, 1]
    for outs in results.values():
        check_stream(outs, ref, CUMULATIVE)
