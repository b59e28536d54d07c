#!/usr/bin/env python3
"""bench_tokenizer.py — encode throughput, specdec vs the Hugging Face `tokenizers`
library, single-threaded, on the same few MB of text, in the same run.

For each tokenizer: generate documents (English prose, code, CJK, emoji, numbers; fixed
seed), encode them with the library (TOKENIZERS_PARALLELISM=false so encode_batch is
serial; one warm-up pass, median of REPEATS timed passes), write the documents and the
library's ids, run bench_tokenizer (which first checks its ids equal the library's, then
times the same way), and report MB/s for both and the ratio. Writes JSON to --json.

usage: bench_tokenizer.py --bin BENCH_BINARY [--mb 4] [--repeats 5] [--json out.json]
                          [--tokenizers gpt2,llama-3-8b,...]
"""
import os
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"
import argparse
import json
import random
import struct
import subprocess
import sys
import time

try:
    from tokenizers import Tokenizer
except ImportError:
    print("FAIL: the Python package `tokenizers` is missing (pip install -r tests/requirements.txt)")
    sys.exit(1)

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "..", "shared", "tokenizers")
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "tokenizer"))
import gen_fixtures as gf  # noqa: E402  (the test's text generators)


def make_docs(mb, seed):
    rng = random.Random(seed)
    docs, total = [], 0
    while total < mb * 1e6:
        parts = []
        for _ in range(rng.randint(20, 80)):
            k = rng.random()
            if k < 0.6:
                parts.append(" ".join(gf.rand_word(rng) for _ in range(rng.randint(5, 25))) + rng.choice([". ", ", ", "\n"]))
            else:
                parts.append(gf.rand_piece(rng, []))
        b = " ".join(parts).encode("utf-8", "surrogatepass").decode("utf-8", "replace").encode()
        docs.append(b)
        total += len(b)
    return docs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--mb", type=float, default=4.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default="bench_tokenizer.json")
    ap.add_argument("--tokenizers", default="gpt2,llama-3-8b,qwen2.5-1.5b-instruct,tinyllama-1.1b-chat-v1.0")
    ap.add_argument("--tmp", default="/tmp")
    a = ap.parse_args()
    docs = make_docs(a.mb, 99)
    nbytes = sum(len(d) for d in docs)
    texts = [d.decode() for d in docs]
    rows = []
    for name in a.tokenizers.split(","):
        path = os.path.join(SHARED, name)
        tok = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
        tok.no_truncation()
        tok.no_padding()
        enc = tok.encode_batch(texts, add_special_tokens=False)  # warm-up + expected ids
        times = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            tok.encode_batch(texts, add_special_tokens=False)
            times.append(time.perf_counter() - t0)
        times.sort()
        hf_s = times[len(times) // 2]
        fx = os.path.join(a.tmp, "bench_tok_%s.bin" % name)
        with open(fx, "wb") as f:
            f.write(b"SDBN1\n" + struct.pack("<I", len(docs)))
            for d, e in zip(docs, enc):
                f.write(struct.pack("<I", len(d)) + d + struct.pack("<I", len(e.ids)) + struct.pack("<%di" % len(e.ids), *e.ids))
        r = subprocess.run([a.bin, path, fx, str(a.repeats)], capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL %s: %s" % (name, r.stderr.strip()))
            return 1
        c = json.loads(r.stdout)
        row = {"tokenizer": name, "bytes": nbytes, "docs": len(docs), "ids": c["ids"],
               "specdec_mb_s": c["mb_per_s"], "hf_mb_s": nbytes / hf_s / 1e6,
               "specdec_median_s": c["median_s"], "hf_median_s": hf_s, "specdec_load_s": c["load_s"]}
        row["ratio"] = row["specdec_mb_s"] / row["hf_mb_s"]
        rows.append(row)
        os.remove(fx)
    print("%-28s %10s %12s %10s %8s" % ("tokenizer", "MB", "specdec MB/s", "HF MB/s", "ratio"))
    for r in rows:
        print("%-28s %10.2f %12.2f %10.2f %8.2f" % (r["tokenizer"], r["bytes"] / 1e6, r["specdec_mb_s"], r["hf_mb_s"], r["ratio"]))
    with open(a.json, "w") as f:
        json.dump({"single_thread": True, "repeats": a.repeats, "results": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
