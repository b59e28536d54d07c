#!/usr/bin/env python3
"""hf_assisted.py — the peer for bench_cuda_round: Hugging Face transformers greedy
generation on the bundled pair (models/kjv-target, models/kjv-draft) on the same GPU,
plain and with assisted generation (assistant_model = the draft), same prompt ids and
token count as bench_cuda_round.c (8 ids, 256 new tokens, EOS ignored).

Writes JSON {"plain_tps", "assisted_tps", "assisted_equal_plain", "device", "dtype"}:
medians of 5 runs after a warm-up, timed with torch.cuda.synchronize around generate.
Usage: hf_assisted.py TARGET_DIR DRAFT_DIR OUT.json
Exit 2 (with a message) when torch / transformers / a CUDA device is missing."""
import json
import statistics
import sys
import time

PROMPT = [12, 85, 301, 7, 44, 1021, 9, 530]
N_NEW = 256
REPS = 5


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError as e:  # the peer is optional on machines without torch
        print(f"hf_assisted: needs torch and transformers: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("hf_assisted: no CUDA device", file=sys.stderr)
        return 2
    dev = "cuda"
    dtype = torch.float16  # the bundled pair is stored in F16
    tgt = AutoModelForCausalLM.from_pretrained(sys.argv[1], torch_dtype=dtype).to(dev).eval()
    drf = AutoModelForCausalLM.from_pretrained(sys.argv[2], torch_dtype=dtype).to(dev).eval()
    ids = torch.tensor([PROMPT], device=dev)
    kw = dict(max_new_tokens=N_NEW, min_new_tokens=N_NEW, do_sample=False, pad_token_id=0)

    def timed(**extra):
        times, out = [], None
        for r in range(REPS + 1):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.no_grad():
                out = tgt.generate(ids, **kw, **extra)
            torch.cuda.synchronize()
            if r > 0:
                times.append(time.perf_counter() - t0)
        n = out.shape[1] - ids.shape[1]
        return n / statistics.median(times), out[0, ids.shape[1]:].tolist()

    plain_tps, plain = timed()
    asst_tps, asst = timed(assistant_model=drf)
    res = {"plain_tps": plain_tps, "assisted_tps": asst_tps, "assisted_equal_plain": plain == asst,
           "device": torch.cuda.get_device_name(0), "dtype": str(dtype), "n_new": N_NEW}
    with open(sys.argv[3], "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
