#!/usr/bin/env python3
"""gguf_gemma_vs_transformers.py — specdec's Gemma GGUF tokenizer against transformers' on many strings.

Rewrites the tiny-gemma fixture into --out with tools/gen_gguf_tokenizer_fixtures.py (and fails when it
differs from the committed tests/tokenizer/fixtures/gguf/tiny-gemma: the generator or transformers'
GGUF Gemma tokenizer changed, so the fixture must be regenerated and the difference understood), then
encodes and decodes a varied corpus with transformers' GGUF tokenizer (AutoTokenizer.from_pretrained(dir,
gguf_file=...)): gen_fixtures.make_strings (ASCII, code, CJK, emoji, white-space runs, digits, the
vocabulary's special and user-defined tokens written in text, invalid UTF-8) plus strings built from the
vocabulary's own pieces and space runs. tok_compare then requires specdec on the .gguf to give the same
ids (with and without BOS) and decodes (with and without special tokens), and streamed decoding to
match.

usage: gguf_gemma_vs_transformers.py --bin TOK_COMPARE --out DIR [--n N] [--seed S]
Exit 77 (skip) where transformers cannot read GGUF files (an ImportError: e.g. no torch).
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURE = os.path.join(HERE, "fixtures", "gguf", "tiny-gemma")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))


def same_as_committed(out):
    """The regenerated fixture equals the committed one (expected.json up to its generator line)."""
    new_gguf = open(os.path.join(out, "tokenizer.gguf"), "rb").read()
    old_gguf = open(os.path.join(FIXTURE, "tokenizer.gguf"), "rb").read()
    new, old = (json.load(open(os.path.join(d, "expected.json"), encoding="utf-8")) for d in (out, FIXTURE))
    for d in (new, old):
        d.pop("generator", None)
    ok = new_gguf == old_gguf and new == old
    print("regenerated tiny-gemma %s the committed fixture" % ("equals" if ok else "DIFFERS from"))
    return ok


def corpus(n, seed, toks):
    import gen_fixtures
    specials = [t for t in toks if t.startswith("<") and not t.startswith("<0x")] + ["\t\t"]
    out = gen_fixtures.make_strings(n // 2, seed, specials)
    rng = random.Random(seed)
    pieces = [t.replace("\u2581", " ") for t in toks if not t.startswith("<0x")]
    seps = ["", " ", "  ", "   ", "    ", "\n", "\n\n", "\t", " \n ", "\u3000"]
    while len(out) < n:
        out.append("".join(rng.choice(pieces) + rng.choice(seps) for _ in range(rng.randint(1, 12))).encode())
    return out


def write_expected(path, hf, strings):
    """tok_compare's SDTK1 file with transformers' ids and decodes."""
    def u32(v):
        return struct.pack("<I", v)
    with open(path, "wb") as f:
        f.write(b"SDTK1\n" + u32(len(strings)))
        for b in strings:
            s = b.decode("utf-8", errors="replace")
            plain, spec = hf.encode(s, add_special_tokens=False), hf.encode(s, add_special_tokens=True)
            f.write(u32(len(b)) + b)
            for ids in (plain, spec):
                f.write(u32(len(ids)) + struct.pack("<%di" % len(ids), *ids))
            for d in (hf.decode(plain, skip_special_tokens=False), hf.decode(spec, skip_special_tokens=True)):
                e = d.encode("utf-8", "surrogatepass")
                f.write(u32(len(e)) + e)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=20261129)
    a = ap.parse_args()
    import gen_gguf_tokenizer_fixtures as gen
    os.makedirs(a.out, exist_ok=True)
    try:
        from transformers import AutoTokenizer
        gen.tiny_gemma(a.out)
        d = os.path.join(a.out, "tiny-gemma")
        hf = AutoTokenizer.from_pretrained(d, gguf_file="tokenizer.gguf")
    except ImportError as e:
        print("skipped: transformers cannot read GGUF files here: %s" % e)
        return 77
    ok = same_as_committed(d)
    toks, _, _ = gen.gemma_vocab()
    strings = corpus(a.n, a.seed, toks)
    fx = os.path.join(a.out, "tiny-gemma.sdtk")
    write_expected(fx, hf, strings)
    r = subprocess.run([a.bin, os.path.join(d, "tokenizer.gguf"), fx], capture_output=True, text=True, errors="replace")
    sys.stdout.write(r.stdout)
    sys.stdout.write(r.stderr[-4000:])
    return 0 if ok and r.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
