"""No leaks across 1,000 LLM create/close cycles (models, tokenizer, scheduler; every 10th cycle also a
generate with a stop string, one with logprobs and prompt logprobs, a stream closed early and a generate
under a structured-output regex, whose grammar the LLM frees at close): the resident set after cycle
1000 is within 4 MiB of its size after cycle 200 (a leak of 5 KiB per cycle would exceed it; one unfreed
model, tokenizer or KV pool per cycle is 100s of KiB). Likewise for one LLM's grammar cache: N_GRAMMARS
distinct specs compiled through a cache of 4, so every grammar but the last four is evicted and freed
(every 10th also constrains a generate): the resident set after the last is within 4 MiB of its size
after the first GRAMMAR_CHECK_FROM. ctest python_leaks (not under ASan, whose quarantine makes RSS
meaningless; the C tests check the library's leaks there)."""
import gc

import specdec
import specdec.llm

N_CYCLES = 1000
CHECK_FROM = 200
BOUND_BYTES = 4 << 20


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def cycle(i):
    with specdec.LLM(backend="cpu", n_ctx=64, max_num_seqs=1, seed=i) as m:
        if i % 10 == 0:
            m.generate("And God said", specdec.SamplingParams(max_tokens=2, stop=["xyz"]), use_tqdm=False)
            m.generate("And God said", specdec.SamplingParams(max_tokens=2, logprobs=5, prompt_logprobs=3),
                       use_tqdm=False)
            g = m.stream("And God said", specdec.SamplingParams(max_tokens=50))
            next(g)
            g.close()
            m.generate("And God said", specdec.SamplingParams(
                max_tokens=4, structured_outputs=specdec.StructuredOutputsParams(regex="[a-z ]{1,12}")), use_tqdm=False)


def test_create_free_cycles_rss_bounded():
    base = None
    for i in range(N_CYCLES):
        cycle(i)
        if i + 1 == CHECK_FROM:
            gc.collect()
            base = rss_bytes()
    gc.collect()
    grown = rss_bytes() - base
    assert grown < BOUND_BYTES, f"RSS grew by {grown / 2**20:.1f} MiB over {N_CYCLES - CHECK_FROM} cycles"


N_GRAMMARS = 1000
GRAMMAR_CHECK_FROM = 200


def test_grammar_cache_evictions_rss_bounded(monkeypatch):
    monkeypatch.setattr(specdec.llm, "GRAMMAR_CACHE_SIZE", 4)
    base = None
    with specdec.LLM(backend="cpu", n_ctx=64, max_num_seqs=1, seed=1) as m:
        for i in range(N_GRAMMARS):
            so = specdec.StructuredOutputsParams(regex=f"(Amen|Selah|[a-z]{{{i % 7 + 1}}}) {i}")
            m._compiled_grammar(so)
            if i % 10 == 0:
                out = m.generate("And God said", specdec.SamplingParams(max_tokens=16, structured_outputs=so),
                                 use_tqdm=False)[0].outputs[0]
                assert out.text.endswith(f" {i}"), out.text
            if i + 1 == GRAMMAR_CHECK_FROM:
                gc.collect()
                base = rss_bytes()
        assert len(m._grammars) == 4
        gc.collect()
        grown = rss_bytes() - base
    assert grown < BOUND_BYTES, f"RSS grew by {grown / 2**20:.1f} MiB over {N_GRAMMARS - GRAMMAR_CHECK_FROM} grammars"


N_ASYNC = 1200
ASYNC_CHECK_FROM = 240


def test_async_requests_rss_bounded():
    """AsyncLLM: N_ASYNC requests (every 3rd left after its first output, every 5th aborted), 8 at a time;
    the resident set after the last is within 4 MiB of its size after ASYNC_CHECK_FROM; nothing stays in
    the engine's tables; 20 create/shutdown cycles leave no thread behind."""
    import asyncio
    import threading
    sp = specdec.SamplingParams(temperature=0, max_tokens=6)
    spl = specdec.SamplingParams(temperature=0, max_tokens=60, ignore_eos=True)
    base = None
    with_threads = threading.active_count()
    eng = specdec.AsyncLLM(backend="cpu", n_ctx=128, max_num_seqs=4)
    try:
        async def one(i):
            if i % 3 == 0:
                gen = eng.generate("And God said", spl, f"r{i}")
                await gen.__anext__()
                await gen.aclose()
                return
            if i % 5 == 0:
                async def later():
                    await asyncio.sleep(0.002)
                    await eng.abort(f"r{i}")
                t = asyncio.create_task(later())
                async for _ in eng.generate("And God said", spl, f"r{i}"):
                    pass
                await t
                return
            async for o in eng.generate("And God said", sp, f"r{i}"):
                last = o
            assert last.finished and len(last.outputs[0].token_ids) == 6

        async def batch(lo, hi):
            await asyncio.gather(*[one(i) for i in range(lo, hi)])

        for lo in range(0, N_ASYNC, 8):
            asyncio.run(batch(lo, lo + 8))
            if base is None and lo + 8 >= ASYNC_CHECK_FROM:
                gc.collect()
                base = rss_bytes()
        for _ in range(200):  # the requests left early are collected once they end
            if not eng._by_cid:
                break
            asyncio.run(asyncio.sleep(0.01))
        assert not eng._streams and not eng._by_cid
        gc.collect()
        grown = rss_bytes() - base
        assert grown < BOUND_BYTES, f"RSS grew by {grown / 2**20:.1f} MiB over {N_ASYNC - ASYNC_CHECK_FROM} requests"
    finally:
        eng.shutdown()
    for _ in range(20):
        with specdec.AsyncLLM(backend="cpu", n_ctx=64, max_num_seqs=1) as e:
            assert e.is_running
    assert threading.active_count() == with_threads
