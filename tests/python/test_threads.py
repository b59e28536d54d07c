"""Threads and Ctrl-C: the GIL is released while the library works, requests from many threads share the
scheduler, and a KeyboardInterrupt cancels the requests of the interrupted call cleanly."""
import _thread
import threading
import time

import pytest

import specdec
from conftest import SLOW

SP = specdec.SamplingParams


def test_gil_released_during_generate(llm):
    """Hypothesis: while one thread is inside generate/stream (the library decoding), another Python
    thread keeps running. Measured as the share of 20 ms slots of the run in which the main thread
    completed at least one loop; with the GIL held across the library calls (100 ms waits) it would be
    near 0. Threshold 0.5 (measured ~1.0 on an idle machine)."""
    def repeat(fn):
        def run():
            t0 = time.monotonic()
            while time.monotonic() - t0 < 0.4:
                fn()
        return run

    sp = SP(temperature=0, max_tokens=12, ignore_eos=True)
    for work in (repeat(lambda: llm.generate(["And God said"] * 2, sp, use_tqdm=False)),
                 repeat(lambda: list(llm.stream("And God said", sp)))):
        t = threading.Thread(target=work)
        ticks = []
        t.start()
        while t.is_alive():
            ticks.append(time.monotonic())
            time.sleep(0.001)
        t.join()
        span = ticks[-1] - ticks[0]
        slots = {int((x - ticks[0]) / 0.02) for x in ticks}
        assert len(slots) / (int(span / 0.02) + 1) > 0.5


def test_many_threads_share_the_scheduler(llm):
    prompts = ["And God said", "In the beginning", "The Lord is my", "Jesus wept. And"]
    sp = SP(temperature=0, max_tokens=16)
    ref = [o.outputs[0].token_ids for o in llm.generate(prompts, sp, use_tqdm=False)]
    got = [None] * len(prompts)

    def one(i):
        if i % 2:
            got[i] = llm.generate(prompts[i], sp, use_tqdm=False)[0].outputs[0].token_ids
        else:
            gen = llm.stream(prompts[i], sp)
            while True:
                try:
                    next(gen)
                except StopIteration as e:
                    got[i] = e.value.outputs[0].token_ids
                    break

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == ref


@pytest.mark.quick
@pytest.mark.parametrize("mode", ["generate", "stream"])
def test_ctrl_c_cancels_cleanly(llm, mode):
    """_thread.interrupt_main() raises KeyboardInterrupt in the main thread as SIGINT's default handler
    does; the call must return within 1.5 s (x10 under ASan), with every request of the call cancelled and nothing
    left running, and the LLM still usable."""
    before = llm.scheduler_metrics()
    sp = SP(temperature=0, max_tokens=400, ignore_eos=True)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    t0 = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        if mode == "generate":
            llm.generate(["And God said"] * 12, sp, use_tqdm=False)
        else:
            for _ in llm.stream("And God said", sp):
                pass
    elapsed = time.monotonic() - t0
    timer.join()
    assert elapsed < 1.5 * SLOW, elapsed
    m = llm.scheduler_metrics()
    n = 12 if mode == "generate" else 1
    assert m["cancelled"] + m["finished"] == before["cancelled"] + before["finished"] + n
    assert m["cancelled"] > before["cancelled"]
    assert (m["active"], m["queued"], m["kv_blocks_used"]) == (0, 0, 0)
    o = llm.generate("And God said", SP(temperature=0, max_tokens=4), use_tqdm=False)[0]
    assert len(o.outputs[0].token_ids) == 4


@pytest.mark.quick
@pytest.mark.parametrize("logprobs", [None, 3])
def test_close_while_other_threads_generate(logprobs):
    """close() from one thread while another is inside generate and a stream is suspended: the running
    requests end as "abort", close() returns once the generate call has left the library, and the
    suspended stream, resumed, raises ShutDownError (after the text it had received); nothing crashes (under ASan too).
    With logprobs, the aborted outputs carry one logprob dict per token they kept."""
    m = specdec.LLM(backend="cpu")
    sp = SP(temperature=0, max_tokens=400, ignore_eos=True, logprobs=logprobs)
    gen = m.stream("And God said", sp)
    assert next(gen)
    result = {}

    def work():
        try:
            result["out"] = m.generate(["And God said"] * 3, sp, use_tqdm=False)
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            result["err"] = e

    t = threading.Thread(target=work)
    t.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    m.close()
    assert time.monotonic() - t0 < 2 * SLOW
    t.join(10 * SLOW)
    assert not t.is_alive()
    assert "err" not in result, result.get("err")
    assert all(o.outputs[0].finish_reason == "abort" for o in result["out"])
    for o in result["out"]:
        c = o.outputs[0]
        assert (c.logprobs is None) if logprobs is None else (len(c.logprobs) == len(c.token_ids))
    with pytest.raises(specdec.ShutDownError):  # after the pieces already received
        for _ in gen:
            pass
    m.close()
