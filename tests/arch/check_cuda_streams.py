#!/usr/bin/env python3
"""Stream discipline of the CUDA library code (issue 24 (c) and (d)).

Part 1 — no work on the LEGACY default stream (issue 24 (d)).

The runner, the rounds and the kernels enqueue on non-blocking streams
(cudaStreamNonBlocking), which do not wait for the legacy stream. A plain cudaMemcpy /
cudaMemset / cudaMemcpy2D / cudaMemcpyToSymbol, a kernel launch without a stream
(<<<grid, block>>> or <<<grid, block, smem>>>) or one on stream 0 / NULL / nullptr /
cudaStreamLegacy runs on the legacy stream: unordered with that work (a pageable
cudaMemcpy may even return before its DMA lands). The identity block table of a
standalone runner was copied that way. Every such call must be on a stream.

Exceptions (ALLOW, by file and function, each with its reason): creation-time uploads
that finish with a device-wide synchronisation before anything else runs.

Part 2 — the round executors' streams are ordered by events at every hand-over (issue 24
(c)). An executor (EXECUTORS) enqueues on its own stream, `rd->stream`; the runners and
groups it drives have streams of their own (prefill, the host path of the fallback
executor, a group's forward) that use the same buffers. Those must be ordered on the
device by sd_cuda_stream_after (an event recorded on one stream, waited for on the other:
a LINK), not only by host synchronisations. Each function is read as the sequence of its
calls in source order, calls of the file's own functions expanded (both branches of a
conditional count, in the order written):
  (a) a call that runs on a runner's or group's own stream (FOREIGN: a group or runner
      forward) has a link before it and a link after it, in the same function;
  (b) an executor that uses its runners' device buffers on its own stream (it calls
      sd_cuda_runner_device_tokens / _logits / sd_cuda_runner_enqueue*) links in its
      sd_exec_ops `wave_begin` before its first operation on its stream, and in its
      `wave_end` after its last one (the protocol may run the runners' streams between
      two waves);
  (c) an executor that captures CUDA graphs links in none of its stage ops
      (draft_forward .. verify): a stream that waits on an event recorded in a capture
      joins the capture.
Host waits (cudaStreamSynchronize, cudaEventSynchronize) and ending a capture are not
operations on the stream here. Limits: the direction of a link is not checked, nor that
every path takes it (a link on one branch counts for both), so a link that points the wrong
way, or one whose removal leaves another link in its place in the sequence (today: the
second link of cr_sync, the one of cr_wave_begin itself), is left to the GPU test
cuda_streams. (a) asks for both links where the forward is written, even where an earlier
link would order it. On the code before the fix (21e3a47^) it finds the batched round's
unlinked forward (cbr_forward) and the device round's unlinked prefill (cuda_round_begin;
the fix itself ordered that prefill by the round's links around it, which (a) does not
accept: the prefill has since moved to the protocol). The executors before the round
protocol (issue 21) had no sd_exec_ops: (b) and (c) say nothing about such a file.

Usage: check_cuda_streams.py ROOT      exit 1 listing every legacy-stream operation and
                                       every unlinked hand-over
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


# ---------------------------------------------------------------------------------------
# Part 2: hand-overs between an executor's stream and its runners' / groups' streams
EXECUTORS = ["backends/cuda/sd_cuda_round.cu", "backends/cuda/sd_cuda_batch_round.cu"]
ROUND_H = "core/sd_round.h"
OWN = r"rd->stream"
LINK = "sd_cuda_stream_after"
FOREIGN = re.compile(r"^(sd_cuda_group_forward\w*|sd_runner_forward\w*|sd_cuda_runner_forward\w*)$")
NOT_ON_STREAM = {"cudaStreamSynchronize", "cudaEventSynchronize", "cudaStreamEndCapture", "cudaStreamDestroy",
                 "cudaStreamQuery", "cudaDeviceSynchronize", "cudaStreamIsCapturing"}
RUNNER_BUFFERS = re.compile(r"\bsd_cuda_runner_(device_tokens|device_logits|enqueue\w*)\s*\(")
KEYWORDS = {"if", "while", "for", "switch", "return", "sizeof", "defined"}
STAGES = ("draft_forward", "draft_sample", "tree_grow", "tree_keep", "verify_pass", "verify")


def exec_fields(header_text):
    """The sd_exec_ops members in declaration order (the initializers are positional)."""
    m = re.search(r"typedef struct sd_exec_ops\s*\{(.*?)\}\s*sd_exec_ops\s*;", blank(header_text), re.S)
    if not m:
        return []
    fields = []
    for decl in m.group(1).split(";"):
        f = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl) or re.search(r"(\w+)\s*$", decl.strip())
        if f:
            fields.append(f.group(1))
    return fields


def _balanced(b, i):
    """b[i] == '(' : the offset after its matching ')'."""
    d = 0
    while i < len(b):
        d += b[i] == "("
        d -= b[i] == ")"
        i += 1
        if d == 0:
            return i
    return i


def _events(b, funcs, name, cache, stack):
    """The calls of function `name` in source order as (kind, line, function written in): L a
    link, F a forward on a foreign stream, E an operation on the executor's own stream; the
    file's own functions expanded."""
    if name in cache:
        return cache[name]
    if name in stack or name not in funcs:
        return []
    first, last = funcs[name]
    lines = b.split("\n")
    body = "\n".join(lines[first - 1:last])
    own = re.compile(r"\b(%s|%s)\b" % (OWN, "|".join(
        re.findall(r"cudaStream_t\s+(?:const\s+)?(\w+)\s*=\s*" + re.escape(OWN) + r"\s*;", body)) or "$^"))
    out = []
    head = body.find("{")
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*(<<<.*?>>>\s*)?\(", body[head:], re.S):
        callee, launch = m.group(1), m.group(2)
        if callee in KEYWORDS or callee.isupper():  # a wrapper macro: the calls inside it count
            continue
        start = head + m.end() - 1
        args = body[start:_balanced(body, start)]
        line = first + body.count("\n", 0, head + m.start())
        if callee == LINK:
            out.append(("L", line, name))
        elif FOREIGN.match(callee):
            out.append(("F", line, name))
        elif callee in funcs and callee != name:
            out.extend(_events(b, funcs, callee, cache, stack | {name}))
        elif callee not in NOT_ON_STREAM and own.search(launch if launch else args):
            out.append(("E", line, name))
    cache[name] = out
    return out


def _ops_table(b, fields):
    """{member: function} of the file's sd_exec_ops initializer, or {}."""
    m = re.search(r"\bsd_exec_ops\s+\w+\s*=\s*\{(.*?)\}\s*;", b, re.S)
    if not m:
        return {}
    vals = split_args(m.group(1))
    return {f: v for f, v in zip(fields, vals) if re.match(r"^[A-Za-z_]\w*$", v) and v not in ("NULL", "nullptr")}


def scan_handover(path_rel, text, fields):
    """Yield (line, what) for every hand-over without its link (rules (a)-(c) above)."""
    b = blank(text)
    funcs = {nm: (first, last) for nm, first, last in functions(text)}
    cache = {}
    for nm in funcs:
        ev = _events(b, funcs, nm, cache, frozenset())
        for i, (k, line, where) in enumerate(ev):
            if k != "F" or where != nm:  # reported where it is written (links may come from callees)
                continue
            before = any(e[0] == "L" for e in ev[:i])
            after = any(e[0] == "L" for e in ev[i + 1:])
            if not (before and after):
                yield line, "%s: a forward on a runner's / group's stream with no link %s it" % (
                    nm, "before or after" if not (before or after) else "before" if not before else "after")
    ops = _ops_table(b, fields)
    if ops and RUNNER_BUFFERS.search(b):
        for op, pick, where in (("wave_begin", 0, "before its first"), ("wave_end", -1, "after its last")):
            fn = ops.get(op)
            ev = _events(b, funcs, fn, cache, frozenset()) if fn else []
            es = [i for i, e in enumerate(ev) if e[0] == "E"]
            if not es:
                continue
            i = es[pick]
            linked = any(e[0] == "L" for e in (ev[:i] if pick == 0 else ev[i + 1:]))
            if not linked:
                yield ev[i][1], "%s (%s): no link with the runners' streams %s operation on the executor's stream" % (
                    fn, op, where)
    if ops and "cudaStreamBeginCapture" in b:
        for op in STAGES:
            fn = ops.get(op)
            for k, line, _ in (_events(b, funcs, fn, cache, frozenset()) if fn else []):
                if k == "L":
                    yield line, "%s (%s): a link inside a stage that may be captured" % (fn, op)


def check_handover(root):
    bad = []
    hp = os.path.join(root, ROUND_H)
    fields = exec_fields(open(hp, encoding="utf-8").read()) if os.path.exists(hp) else []
    for rel in EXECUTORS:
        p = os.path.join(root, rel)
        if not os.path.exists(p):
            bad.append("%s: missing (the executors this check reads)" % rel)
            continue
        with open(p, encoding="utf-8") as fh:
            for line, what in scan_handover(rel, fh.read(), fields):
                bad.append("%s:%d: %s" % (rel, line, what))
    return bad


def self_test_handover():
    header = ("typedef struct sd_exec_ops {\n    const char *name;\n"
              "    int (*wave_begin)(sd_exec *ex);\n    int (*verify)(sd_exec *ex);\n"
              "    int (*wave_end)(sd_exec *ex);\n} sd_exec_ops;\n")
    fields = exec_fields(header)
    good = (
        "static int join(R *rd, int out) {\n"                                             # 1
        "    return out ? sd_cuda_stream_after(rs, rd->stream, rd->order, 0)\n"
        "               : sd_cuda_stream_after(rd->stream, rs, rd->order, 0);\n}\n"
        "static int fwd(R *rd, G *g) {\n"                                                 # 5
        "    int st = sd_cuda_stream_after(gs, rd->stream, rd->order, 0);\n"
        "    if (!st) st = sd_cuda_group_forward_device(rd->segs, 1, 0, 0);\n"
        "    if (!st) st = sd_cuda_stream_after(rd->stream, gs, rd->order, 0);\n"
        "    return st;\n}\n"
        "static int up(R *rd) {\n"                                                        # 11
        "    cudaStream_t st = rd->stream;\n"
        "    int e = join(rd, 0);\n"
        "    if (!e) e = cudaMemcpyAsync(sd_cuda_runner_device_tokens(rd->t), h, 4, H2D, st);\n"
        "    return e;\n}\n"
        "static int wb(R *rd) {\n"                                                        # 17
        "    int e = up(rd);\n"
        "    if (!e) e = cudaStreamBeginCapture(rd->stream, 0);\n"
        "    return e;\n}\n"
        "static int ver(R *rd) {\n"                                                       # 21
        "    k<<<1, 32, 0, rd->stream>>>(sd_cuda_runner_device_tokens(rd->t));\n"
        "    return 0;\n}\n"
        "static int we(R *rd) {\n"                                                        # 24
        "    int e = cudaStreamEndCapture(rd->stream, &g);\n"
        "    if (!e) e = cudaMemcpyAsync(h, rb, 8, D2H, rd->stream);\n"
        "    if (!e) e = join(rd, 1);\n"
        "    if (!e) e = cudaStreamSynchronize(rd->stream);\n"
        "    return e;\n}\n"
        "static const sd_exec_ops ops = {\"x\", wb, ver, we};\n"
    )
    clean = list(scan_handover("x.cu", good, fields))
    faults = {
        "forward unlinked after": good.replace("    if (!st) st = sd_cuda_stream_after(rd->stream, gs, rd->order, 0);\n",
                                               "    if (!st) st = 0;\n"),
        "forward unlinked": good.replace("sd_cuda_stream_after(gs, rd->stream, rd->order, 0)", "0").replace(
            "sd_cuda_stream_after(rd->stream, gs, rd->order, 0)", "0"),
        "wave_begin late": good.replace("    int e = join(rd, 0);\n    if (!e) e = cudaMemcpyAsync(",
                                        "    int e = cudaMemcpyAsync(").replace(
            "H2D, st);\n    return e;", "H2D, st);\n    if (!e) e = join(rd, 0);\n    return e;"),
        "wave_end early": good.replace("    if (!e) e = cudaMemcpyAsync(h, rb, 8, D2H, rd->stream);\n    if (!e) e = join(rd, 1);\n",
                                       "    if (!e) e = join(rd, 1);\n    if (!e) e = cudaMemcpyAsync(h, rb, 8, D2H, rd->stream);\n"),
        "link in a stage": good.replace("    return 0;\n}\nstatic int we(", "    return join(rd, 1);\n}\nstatic int we("),
    }
    found = {}
    for what, text in faults.items():
        assert text != good, what
        found[what] = [line for line, _ in scan_handover("x.cu", text, fields)]
    ok = not clean and all(found.values()) and fields == ["name", "wave_begin", "verify", "wave_end"]
    print("self-test (hand-overs) %s: clean code %s; planted: %s" %
          ("passed" if ok else "FAILED", clean or "no finding", found))
    return 0 if ok else 1


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
        return self_test() | self_test_handover()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    bad = check(sys.argv[1])
    for b in bad:
        print(b)
    print("%d legacy-stream operations in %s" % (len(bad), ", ".join(DIRS)))
    bad2 = check_handover(sys.argv[1])
    for b in bad2:
        print(b)
    print("%d unlinked stream hand-overs in %s" % (len(bad2), ", ".join(EXECUTORS)))
    return 1 if bad or bad2 else 0


if __name__ == "__main__":
    sys.exit(main())
