"""No leaks across 1,000 LLM create/close cycles (models, tokenizer, scheduler; every 10th cycle also a
generate with a stop string, one with logprobs and prompt logprobs and a stream closed early): the
resident set after cycle 1000 is within 4 MiB of its size after cycle 200 (a leak of 5 KiB per cycle
would exceed it; one unfreed model, tokenizer or KV pool per cycle is 100s of KiB). ctest python_leaks
(not under ASan, whose quarantine makes RSS meaningless; the C tests check the library's leaks there)."""
import gc

import specdec

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
