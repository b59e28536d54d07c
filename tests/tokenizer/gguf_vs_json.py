#!/usr/bin/env python3
"""gguf_vs_json.py — the GGUF-embedded tokenizers against the published tokenizer.json files.

For each tokenizer of --shared (../shared/tokenizers): writes the vocab-only GGUF that
convert_hf_to_gguf would write (tools/gen_gguf_tokenizer_fixtures.py) into --out, a varied corpus
(gen_fixtures.make_strings: ASCII, code, CJK, emoji, whitespace runs, digits, the tokenizer's special
tokens written in text, invalid UTF-8), and runs gguf_compare (specdec on the .gguf against specdec on
the tokenizer.json: ids, decodes, pieces, chat template; it fails on any difference).

With --hf only it instead loads each .gguf with transformers (AutoTokenizer.from_pretrained(dir,
gguf_file=...)) and prints every way its ids differ from the `tokenizers` library on the original
tokenizer.json (transformers' conversion, not specdec, is then the one that differs: these are
reported, not failed on; a load error is a failure).

usage: gguf_vs_json.py --bin GGUF_COMPARE --out DIR [--shared DIR] [--n N] [--hf no|only]
Exit 77 (skip) also when --hf only finds transformers unable to read GGUF files (an ImportError).
Without --shared's folder it prints "skipped: ../shared not found" and exits 77 (CTest's skip code).
"""
import argparse
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))


def write_strings(path, strings):
    with open(path, "wb") as f:
        f.write(b"SDGS1\n" + struct.pack("<I", len(strings)))
        for b in strings:
            f.write(struct.pack("<I", len(b)) + b)


def hf_differences(out, name, shared, strings):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer
    t = AutoTokenizer.from_pretrained(out, gguf_file=name + ".gguf")
    ref = Tokenizer.from_file(os.path.join(shared, name, "tokenizer.json"))
    ref.no_truncation()  # GPT-2's file truncates; transformers' own tokenizer does not
    ref.no_padding()
    diffs = []
    for b in strings:
        s = b.decode("utf-8", errors="replace")
        a, r = t.encode(s, add_special_tokens=False), ref.encode(s, add_special_tokens=False).ids
        if a != r:
            diffs.append((s, a, r))
    print("transformers %s: %d of %d strings tokenized differently from tokenizer.json%s" % (
        name, len(diffs), len(strings), ":" if diffs else ""))
    for s, a, r in diffs[:4]:
        i = next((k for k in range(min(len(a), len(r))) if a[k] != r[k]), min(len(a), len(r)))
        print("    %r (%d / %d ids; first difference at id %d)\n      transformers(GGUF) ...%s\n      tokenizer.json     ...%s"
              % (s[:60], len(a), len(r), i, a[max(0, i - 2):i + 6], r[max(0, i - 2):i + 6]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared", "tokenizers"))
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--hf", default="no", choices=["no", "only"])
    ap.add_argument("--seed", type=int, default=4321)
    a = ap.parse_args()
    if not os.path.isdir(a.shared):
        print("skipped: ../shared not found (%s)" % a.shared)
        return 77
    import gen_fixtures
    import gen_gguf_tokenizer_fixtures as gen
    from tokenizers import Tokenizer
    os.makedirs(a.out, exist_ok=True)
    failed = []
    for name in gen.PUBLISHED:
        gen.published(a.shared, a.out, [name])
        ref = Tokenizer.from_file(os.path.join(a.shared, name, "tokenizer.json"))
        strings = gen_fixtures.make_strings(a.n, a.seed, gen_fixtures.specials_of(ref))
        sp = os.path.join(a.out, name + ".strings")
        write_strings(sp, strings)
        if a.hf == "only":
            try:
                hf_differences(a.out, name, a.shared, strings)
            except ImportError as e:
                print("skipped: transformers cannot read GGUF files here: %s" % e)
                return 77
            except Exception as e:  # a file transformers cannot load is a finding, not a skip
                print("transformers failed to load %s.gguf: %r" % (name, e))
                failed.append(name + " (transformers)")
            continue
        r = subprocess.run([a.bin, os.path.join(a.shared, name), os.path.join(a.out, name + ".gguf"), sp],
                           capture_output=True, text=True, errors="replace")
        sys.stdout.write(r.stdout)
        sys.stdout.write(r.stderr[-4000:])
        if r.returncode != 0:
            failed.append(name)
    print("%d passed, %d failed%s" % (len(gen.PUBLISHED) - len(failed), len(failed),
                                      (" (" + ", ".join(failed) + ")") if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
