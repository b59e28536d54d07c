#!/usr/bin/env python3
"""ggml_iq_check.py — specdec's decoding of ggml's block types against gguf-py's (the `gguf` package's
quants.dequantize, an implementation independent of specdec's, with its own copies of ggml's IQ codebooks).

    ggml_iq_check.py --bin ggml_decode --out SCRATCH_DIR [--rows R]

For every block type specdec repacks (models/sd_ggml.h), R x 4096 values of random blocks (fixed seed; the
fp16 scales set to ordinary values, every other byte random, so the grid indices of the IQ1-IQ3 codebooks
are uniform: with R = 64, IQ1's 2048 rows get 32,768 draws, a row left out with probability e^-16) go
through ggml_decode (sd_ggml_repack, then sd_cpu_row_f32 / sd_cpu_elem) and must equal gguf-py's values
bitwise. Exit 0 when all equal; 1 (the first differing values printed) otherwise.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
from gguf import GGMLQuantizationType as T, quants, GGML_QUANT_SIZES

TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS",
         "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"]
# byte offsets of each block's fp16 scales (d, and dmin where the type has one)
SCALES = {"Q2_K": (80, 82), "Q3_K": (108,), "Q6_K": (208,), "Q4_1": (0, 2), "Q5_1": (0, 2), "Q4_K": (0, 2),
          "Q5_K": (0, 2)}
COLS = 4096


def blocks_for(name, n_blocks, rng):
    """n_blocks random blocks of type `name`, their scales ordinary fp16 numbers of either sign."""
    bs, ts = GGML_QUANT_SIZES[T[name]]
    b = rng.integers(0, 256, size=(n_blocks, ts), dtype=np.uint8)
    d = ((rng.integers(1, 201, size=(n_blocks, 2)) * 1e-4) * np.where(rng.integers(0, 4, size=(n_blocks, 2)) == 0,
                                                                       -1, 1)).astype(np.float16).view(np.uint16)
    if name == "IQ1_M":  # d's 16 bits in the top nibbles of the four uint16 scales (bytes 48..55)
        s = b[:, 48:56].copy().view(np.uint16)
        for i in range(4):
            s[:, i] = (s[:, i] & 0x0FFF) | (((d[:, 0] >> (4 * i)) & 0xF) << 12)
        b[:, 48:56] = s.view(np.uint8)
        return b
    for i, off in enumerate(SCALES.get(name, (0,))):
        b[:, off:off + 2] = d[:, i:i + 1].view(np.uint8)
    return b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", type=int, default=64)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(20261129)
    failed = 0
    for name in TYPES:
        bs, ts = GGML_QUANT_SIZES[T[name]]
        blocks = blocks_for(name, a.rows * COLS // bs, rng)
        ref = quants.dequantize(blocks.reshape(a.rows, -1), T[name]).astype(np.float32).reshape(a.rows, COLS)
        src, out = os.path.join(a.out, f"{name}.bin"), os.path.join(a.out, f"{name}.f32")
        blocks.tofile(src)
        p = subprocess.run([a.bin, name, str(a.rows), str(COLS), src, out], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"FAIL {name}: ggml_decode exit {p.returncode}: {p.stderr.strip()}")
            failed += 1
            continue
        got = np.fromfile(out, dtype="<f4").reshape(a.rows, COLS)
        diff = got.view(np.uint32) != ref.view(np.uint32)
        if diff.any():
            r, c = np.argwhere(diff)[0]
            print(f"FAIL {name}: {int(diff.sum())} of {diff.size} values differ from gguf-py's; first at row {r}, "
                  f"column {c}: {got[r, c]!r} vs {ref[r, c]!r}")
            failed += 1
        else:
            print(f"{name:8s} {diff.size} values bitwise equal to gguf-py's dequantize "
                  f"(max |value| {float(np.abs(ref).max()):.3g})")
    print(f"{len(TYPES) - failed} of {len(TYPES)} block types equal")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
