#!/usr/bin/env python3
"""No work on the LEGACY default stream in the CUDA library code (issue 24 (d)).

The runner, the rounds and the kernels enqueue on non-blocking streams
(cudaStreamNonBlocking), which do not wait for the legacy stream. A plain cudaMemcpy /
cudaMemset / cudaMemcpy2D / cudaMemcpyToSymbol, a kernel launch without a stream
(<<<grid, block>>> or <<<grid, block, smem>>>) or one on stream 0 / NULL / nullptr /
cudaStreamLegacy runs on the legacy stream: unordered with that work (a pageable
cudaMemcpy may even return before its DMA lands). The identity block table of a
standalone runner was copied that way. Every such call must be on a stream.

Exceptions (ALLOW, by file and function, each with its reason): creation-time uploads
that finish with a device-wide synchronisation before anything else runs.

Usage: check_cuda_streams.py ROOT      exit 1 listing every legacy-stream operation
       check_cuda_streams.py --self-test (planted faults must be found, clean code not)"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_functions import blank, functions, source_files  # noqa: E402

DIRS = ["kernels/cuda", "backends/cuda"]
ALLOW = {
    # weights and RoPE tables, uploaded while the group is created: sd_create_finish's
    # cudaDeviceSynchronize completes them before the group is handed out
    ("backends/cuda/sd_cuda_runner.cu", "sd_create_rope"),
    ("backends/cuda/sd_cuda_runner.cu", "sd_cuda_upload"),
    # the EAGLE-3 head's RoPE tables (and its weights, through sd_cuda_upload), uploaded while
    # it is created: e3g_fill's cudaDeviceSynchronize completes them before it is handed out
    ("backends/cuda/sd_eagle3_cuda.cu", "e3g_rope"),
}
SYNC_CALL = re.compile(r"\b(cudaMemcpy|cudaMemset|cudaMemcpy2D|cudaMemcpyToSymbol|cudaMemcpyFromSymbol)\s*\(")
LAUNCH = re.compile(r"<<<(.*?)>>>", re.S)
LEGACY = {"0", "NULL", "nullptr", "cudaStreamLegacy", "(cudaStream_t)0", "(cudaStream_t)NULL"}


def split_args(s):
    out, depth, cur = [], 0, ""
    for c in s:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
    out.append(cur.strip())
    return out


def scan(path_rel, text):
    """Yield (line, what) of every legacy-stream operation outside ALLOW."""
    b = blank(text)
    spans = [(name, first, last) for name, first, last in functions(text)]

    def owner(line):
        for name, first, last in spans:
            if first <= line <= last:
                return name
        return None

    hits = []
    for m in SYNC_CALL.finditer(b):
        hits.append((b.count("\n", 0, m.start()) + 1, m.group(1) + "() on the legacy stream"))
    for m in LAUNCH.finditer(b):
        args = split_args(m.group(1))
        if len(args) < 4 or args[3].replace(" ", "") in LEGACY:
            hits.append((b.count("\n", 0, m.start()) + 1, "kernel launch <<<%s>>> on the legacy stream" % m.group(1).strip()))
    for line, what in sorted(hits):
        if (path_rel, owner(line)) in ALLOW:
            continue
        yield line, what


def check(root):
    bad = []
    for p in source_files(root, DIRS):
        rel = os.path.relpath(p, root).replace(os.sep, "/")
        with open(p, encoding="utf-8") as fh:
            text = fh.read()
        for line, what in scan(rel, text):
            bad.append("%s:%d: %s" % (rel, line, what))
    return bad


def self_test():
    planted = (
        "static int f(int *d, const int *h, cudaStream_t s) {\n"
        "    cudaMemcpy(d, h, 4, cudaMemcpyHostToDevice);\n"  # 2
        "    k<<<1, 32>>>(d);\n"  # 3
        "    k<<<1, 32, 0, 0>>>(d);\n"  # 4
        "    k<<<dim3(1, 2), 32, smem(1, 2), nullptr>>>(d);\n"  # 5
        "    cudaMemcpyAsync(d, h, 4, cudaMemcpyHostToDevice, s);\n"
        "    k<<<dim3(1, 2), 32, 0, s>>>(d); /* cudaMemset(d, 0, 4) in a comment */\n"
        "    return 0;\n}\n"
        "static int sd_cuda_upload(int *d, const int *h) {\n    return cudaMemcpy(d, h, 4, cudaMemcpyHostToDevice);\n}\n"
    )
    got = [line for line, _ in scan("kernels/cuda/x.cu", planted)]
    allowed = [line for line, _ in scan("backends/cuda/sd_cuda_runner.cu", planted)]
    ok = got == [2, 3, 4, 5, 11] and allowed == [2, 3, 4, 5]
    print("self-test %s: found %s (want [2, 3, 4, 5, 11]), allowed function skipped: %s" %
          ("passed" if ok else "FAILED", got, allowed))
    return 0 if ok else 1


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    bad = check(sys.argv[1])
    for b in bad:
        print(b)
    print("%d legacy-stream operations in %s" % (len(bad), ", ".join(DIRS)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
