#!/usr/bin/env python3
"""gen_ggml_iq_grids.py — writes models/sd_ggml_iq_grids.h: the codebooks ("grids") of ggml's IQ1 / IQ2 / IQ3
block types, which models/sd_ggml.c needs to repack those blocks.

The grids are data, not code: each row lists the 8 (IQ1 / IQ2) or 4 (IQ3) magnitudes one grid index stands
for. They are taken from gguf-py (the `gguf` package, GGUF's Python reference, whose classes IQ2_XXS,
IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S and IQ1_S hold ggml's iq2xxs_grid, iq2xs_grid, iq2s_grid, iq3xxs_grid,
iq3s_grid and iq1s_grid with each value replaced by its index in a short map), kept in that packed form:
element e of row r is bits [b*(k % per), b*(k % per) + b) of byte k / per, k = r * width + e, b = 2 bits for
IQ1 / IQ2 (4 values a byte), 4 bits for IQ3 (2 a byte), the value map[that index].

    python3 tools/gen_ggml_iq_grids.py [--out models/sd_ggml_iq_grids.h]

Needs numpy and gguf (tests/requirements.txt). tests/models/ggml_iq_check.py compares specdec's decoding
with gguf-py's own on every row of every grid.
"""
import argparse
import os

import numpy as np
from gguf import quants

GRIDS = [("iq2xxs", quants.IQ2_XXS), ("iq2xs", quants.IQ2_XS), ("iq2s", quants.IQ2_S),
         ("iq3xxs", quants.IQ3_XXS), ("iq3s", quants.IQ3_S), ("iq1s", quants.IQ1_S)]


def packed(cls):
    """gguf-py's grid_hex as bytes (two hex characters a byte, as its init_grid reads them)."""
    h = np.frombuffer(cls.grid_hex, dtype=np.uint8).reshape(-1, 2)
    nib = np.where(h > 0x40, h + 9, h) & 0x0F
    return ((nib[:, 0] << 4) | nib[:, 1]).astype(np.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "models", "sd_ggml_iq_grids.h"))
    a = ap.parse_args()
    out = ["/* sd_ggml_iq_grids.h — written by tools/gen_ggml_iq_grids.py; do not edit.",
           " * ggml's IQ1 / IQ2 / IQ3 codebooks (data, from gguf-py's quants.py), packed: row r, element e of a grid",
           " * of `width` elements a row is index (bytes[k / per] >> (bits * (k % per))) & mask, k = r * width + e,",
           " * into the grid's map. */",
           "#ifndef SD_GGML_IQ_GRIDS_H", "#define SD_GGML_IQ_GRIDS_H", "", "#include <stdint.h>", ""]
    for name, cls in GRIDS:
        rows, width = cls.grid_shape
        data = packed(cls)
        bits = 2 if len(cls.grid_map) <= 4 else 4
        assert len(data) * (8 // bits) == rows * width, name
        cls.init_grid()  # check the packing against gguf-py's own decoding
        k = np.arange(rows * width)
        idx = (data[k // (8 // bits)] >> (bits * (k % (8 // bits)))) & ((1 << bits) - 1)
        assert np.array_equal(np.asarray(cls.grid_map, dtype=np.float32)[idx].reshape(rows, width),
                              cls.grid.reshape(rows, width)), name
        vals = ", ".join(str(int(v)) for v in cls.grid_map)
        out.append(f"/* {name}_grid: {rows} rows of {width}, {bits}-bit indices into {{{vals}}} */")
        out.append(f"#define SD_{name.upper()}_ROWS {rows}")
        out.append(f"static const int8_t sd_{name}_map[{len(cls.grid_map)}] = {{{vals}}};")
        out.append(f"static const uint8_t sd_{name}_grid[{len(data)}] = {{")
        for i in range(0, len(data), 16):
            out.append("    " + ", ".join(f"0x{b:02x}" for b in data[i:i + 16]) + ",")
        out.append("};")
        out.append("")
    out.append("#endif")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
