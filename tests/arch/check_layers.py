#!/usr/bin/env python3
"""Layering check: every #include "..." of the library and its tools points to the
including file's own folder or to a LOWER layer (docs/ARCHITECTURE.md):

    rank 0  core/                          errors, allocation, RNG, weights, sampling rules, the backend contract
    rank 1  kernels/cpu/  kernels/cuda/     pure ops
    rank 2  backends/cpu/ backends/cuda/    runners and rounds (implementations of the contract)
            models/  tokenizer/             checkpoint loading, tokenizer.json
    rank 3  runtime/                        engine, generation loop, scheduler
    rank 4  tools/server/                   the HTTP server (a library over the public API)
    rank 5  tools/<program>/                the specdec program (tools/cli), other tools

include/specdec.h (the public ABI) may be included from anywhere. Two folders of the
same rank may not include each other (backends/cuda does not see backends/cpu, models/
does not see tokenizer/). Quoted includes that name no project header (e.g. a system
library's "cjson/cJSON.h") are ignored. A header name present in two folders is an
error (include by bare name would be ambiguous).

Usage: check_layers.py ROOT        check the tree, exit 1 listing every violation
       check_layers.py --self-test plant violations in a temporary tree: each must be caught"""
import os
import re
import sys
import tempfile

RANKS = {
    "core": 0,
    "kernels/cpu": 1, "kernels/cuda": 1,
    "backends/cpu": 2, "backends/cuda": 2, "models": 2, "tokenizer": 2,
    "runtime": 3,
}
TOOLS_LIB_RANKS = {"tools/server": 4}  # libraries of the tools, below the programs
TOOLS_RANK = 5
SRC_EXT = (".c", ".h", ".cu", ".cuh")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def folder_of(root, path):
    rel = os.path.relpath(os.path.dirname(path), root).replace(os.sep, "/")
    for f in RANKS:
        if rel == f or rel.startswith(f + "/"):
            return f, RANKS[f]
    if rel.startswith("tools/"):
        f = "/".join(rel.split("/")[:2])
        return f, TOOLS_LIB_RANKS.get(f, TOOLS_RANK)
    return None, None


def scan(root):
    """Return (files, headers): every source of the layered folders with its folder, and
    header basename -> list of folders that define it."""
    files, headers = [], {}
    for top in list(RANKS) + ["tools"]:
        base = os.path.join(root, top)
        if not os.path.isdir(base):
            continue
        for dp, _, names in os.walk(base):
            for n in sorted(names):
                if not n.endswith(SRC_EXT):
                    continue
                p = os.path.join(dp, n)
                folder, rank = folder_of(root, p)
                if folder is None:
                    continue
                files.append((p, folder, rank))
                if n.endswith((".h", ".cuh")):
                    headers.setdefault(n, set()).add(folder)
    return files, headers


def check(root):
    files, headers = scan(root)
    problems = []
    for name, folders in sorted(headers.items()):
        if len(folders) > 1:
            problems.append(f"header {name} exists in {sorted(folders)}: ambiguous by bare name")
    ranks = {f: r for _, f, r in files}
    for path, folder, rank in files:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for m in INCLUDE_RE.finditer(text):
            inc = os.path.basename(m.group(1))
            if inc == "specdec.h" or inc not in headers:
                continue
            for target in headers[inc]:
                trank = ranks.get(target, RANKS.get(target, TOOLS_RANK))
                if target == folder or trank < rank:
                    continue
                line = text.count("\n", 0, m.start()) + 1
                why = "points up a layer" if trank > rank else "crosses to a sibling folder of the same layer"
                problems.append(f"{os.path.relpath(path, root)}:{line}: includes {inc} ({target}, rank {trank}) "
                                f"from {folder} (rank {rank}): {why}")
    return len(files), problems


def self_test():
    """Plant one violation of each kind in a small tree; every one must be reported."""
    cases = {
        "core/sd_low.c": '#include "sd_engine.h"\n',          # up 3 layers
        "kernels/cpu/sd_k.c": '#include "sd_backend_x.h"\n',   # up one layer
        "backends/cuda/sd_b.c": '#include "sd_backend_x.h"\n', # sibling of the same layer
        "models/sd_m.c": '#include "sd_tok_x.h"\n',            # sibling of the same layer
    }
    headers = {"runtime/sd_engine.h": "", "backends/cpu/sd_backend_x.h": "", "tokenizer/sd_tok_x.h": "",
               "core/sd_ok.h": ""}
    with tempfile.TemporaryDirectory() as root:
        for rel, text in list(cases.items()) + list(headers.items()):
            p = os.path.join(root, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as fh:
                fh.write(text)
        with open(os.path.join(root, "runtime", "sd_fine.c"), "w") as fh:
            fh.write('#include "sd_ok.h"\n#include "sd_backend_x.h"\n#include "specdec.h"\n')
        _, problems = check(root)
    caught = [c for c in cases if any(c in p for p in problems)]
    false_alarm = [p for p in problems if "sd_fine.c" in p]
    print(f"self-test: {len(caught)}/{len(cases)} planted violations caught, {len(false_alarm)} false alarms")
    return 0 if len(caught) == len(cases) and not false_alarm else 1


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    if sys.argv[1] == "--self-test":
        return self_test()
    n, problems = check(sys.argv[1])
    for p in problems:
        print("FAIL " + p)
    print(f"{n} files checked; {len(problems)} layering violations")
    if n == 0:
        print("FAIL no files found: wrong root?")
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
