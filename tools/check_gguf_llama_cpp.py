#!/usr/bin/env python3
"""check_gguf_llama_cpp.py — llama.cpp itself on the committed GGUF fixtures, against their logits.f32.

For each fixture of tests/models/fixtures/gguf_twin_manifest.txt and gguf_manifest.txt (or the names given),
model.gguf is rewritten by gguf-py as an F32 twin: the same metadata and tensor names, every tensor stored as
F32 with the values gguf-py decodes from it (a permuted q / k stays permuted, a Gemma norm keeps its stored
(1 + w)), plus tokenizer.ggml.model "none" when the file has no tokenizer. llama.cpp (llama-cpp-python, F32 KV
cache, one thread) evaluates the fixture's ids on it; its logits are compared with logits.f32 (transformers'
fp32 reference, at the settings llama.cpp runs) as the C tests do: the max over positions of
max |a - b| / max |b|. So this checks, independently of specdec's code, that a fixture's reference is what
llama.cpp computes from the file: its reading of the metadata, names, norms, rope, routing and windows.

Needs gguf and llama-cpp-python (run by hand; not part of the test suite):
    /tmp/ht-venv/bin/python tools/check_gguf_llama_cpp.py [--tol 1e-4] [NAME ...]
Exits 1 when a fixture is off by more than the tolerance.
"""
import argparse
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "tests", "models", "fixtures")


def manifest(name):
    with open(os.path.join(FIX, name)) as f:
        return [line.split() for line in f if line.strip() and not line.startswith("#")]


def f32_twin(src, dst):
    import gguf
    from gguf_fields import copy_fields
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    has_tok = "tokenizer.ggml.model" in r.fields
    copy_fields(r, w)
    if not has_tok:  # no tokenizer: llama.cpp then takes the vocabulary size from <arch>.vocab_size
        w.add_string("tokenizer.ggml.model", "none")
        if f"{arch}.vocab_size" not in r.fields:
            emb = next(t for t in r.tensors if t.name == "token_embd.weight")
            w.add_uint32(f"{arch}.vocab_size", int(emb.shape[1]))
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape)]  # numpy order
        data = gguf.quants.dequantize(np.array(t.data), t.tensor_type).astype(np.float32).reshape(shape)
        w.add_tensor(t.name, np.ascontiguousarray(data))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--verbose", action="store_true", help="llama.cpp's own log (why a file does not load)")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    import llama_cpp
    rows = {r[0]: r for r in manifest("gguf_twin_manifest.txt") + manifest("gguf_manifest.txt")}
    names = a.names or sorted(rows)
    bad = 0
    for name in names:
        _, T, V, _ = rows[name]
        T, V = int(T), int(V)
        d = os.path.join(FIX, name)
        ids = [int(x) for x in open(os.path.join(d, "ids.txt")).read().split()]
        ref = np.fromfile(os.path.join(d, "logits.f32"), dtype=np.float32).reshape(T, V)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "f32.gguf")
            try:
                f32_twin(os.path.join(d, "model.gguf"), path)
                # yarn's betas: -1 lets llama.cpp take the file's (llama-cpp-python's defaults would override)
                llm = llama_cpp.Llama(model_path=path, n_ctx=2 * T, n_batch=2 * T, logits_all=True, type_k=0,
                                      type_v=0, n_threads=1, verbose=a.verbose, yarn_beta_fast=-1.0,
                                      yarn_beta_slow=-1.0)
                llm.eval(ids)
                got = np.array(llm.scores[:T], dtype=np.float32)[:, :V]
                del llm
            except Exception as e:  # llama.cpp refuses the file
                print(f"{name:18s} llama.cpp could not run it: {e}")
                bad += 1
                continue
        err = float((np.abs(got - ref).max(1) / np.abs(ref).max(1)).max())
        argmax = int((got.argmax(1) != ref.argmax(1)).sum())
        ok = err <= a.tol and argmax == 0
        bad += not ok
        print(f"{name:18s} llama.cpp {llama_cpp.__version__} vs logits.f32: row error {err:.2e}, argmax differs at "
              f"{argmax} of {T}  {'ok' if ok else 'OFF'}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
