#!/usr/bin/env python3
"""prepare_cases.py — fixtures for the forward tests: random checkpoints of every
shape (tests/reference/make_checkpoint.py), a token sequence per checkpoint and the
float64 numpy reference logits of that sequence (tests/reference/llama_ref.py).

    python3 prepare_cases.py OUT_DIR
writes OUT_DIR/<case>/{config.json, *.safetensors, tokens.bin (int32), ref.bin
(float64 [T, V], row-major)} and OUT_DIR/manifest.txt: "<case> <dir> <T> <V>" per line.
"""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "reference"))
try:
    import numpy as np
    import make_checkpoint
    import llama_ref
except ImportError as e:  # fail loudly: the packages are in tests/requirements.txt
    sys.exit(f"prepare_cases.py: missing Python dependency ({e}); run tools/deps.sh")

# Sequence length per case: long enough for several chunk sizes; the llama3 case goes
# past original_max_position_embeddings (64).
SEQ_LEN = {"llama3_rope_headdim_f16": 72}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    lines = []
    for i, name in enumerate(sorted(make_checkpoint.CASES)):
        d = make_checkpoint.write_checkpoint(os.path.join(out, name), name)
        cfg, W = llama_ref.load_checkpoint(d)
        T = SEQ_LEN.get(name, 40)
        V = cfg["vocab_size"]
        rng = np.random.default_rng(100 + i)
        ids = rng.integers(0, V, T).astype(np.int32)
        ids[0] = 0          # the extreme ids are always exercised
        ids[T - 1] = V - 1
        logits = llama_ref.forward(cfg, W, ids)
        ids.astype("<i4").tofile(os.path.join(d, "tokens.bin"))
        logits.astype("<f8").tofile(os.path.join(d, "ref.bin"))
        lines.append(f"{name} {os.path.abspath(d)} {T} {V}\n")
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.writelines(lines)
    print(f"prepare_cases.py: {len(lines)} cases in {out}")


if __name__ == "__main__":
    main()
