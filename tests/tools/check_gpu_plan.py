#!/usr/bin/env python3
"""check_gpu_plan.py — the GPU run scripts (tools/gpu/issue24_run*.sh) name only what exists.

A GPU session gets one ~9-minute call; a test name that no longer exists, a benchmark that moved
or a misspelt label costs that call. This check runs in CI, on a build tree of any configuration
(CUDA on or off: the GPU tests are registered either way), in seconds, and fails when a script
  - lists in a variable `*_TESTS` a test that CTest does not register (`ctest --show-only=json-v1`),
    or, outside PREP_TESTS, one that is not labelled `gpu` or that is not a program;
  - lists in PREP_TESTS a test that sets up no fixture, or leaves a fixture some GPU test needs
    without its setup in PREP_TESTS (run 1 runs them itself and stops CTest adding them: -FA '.*');
  - selects a label (`-L x`, `-LE x`) no test carries, or a literal `ctest -R 're'` matching none;
  - names a program under the build tree (BENCH_BINS, literal "$BDIR/<dir>/<name>") that no
    add_executable() of the CMake tree builds into <dir>;
  - names a repository file ("$PROJ/<path>") that does not exist.
--self-test plants a misspelling of each kind into copies of the scripts and fails unless every
planted fault is caught and the unplanted copies pass.

usage: check_gpu_plan.py --build BDIR --source SRC [--ctest CTEST] [--self-test] SCRIPT...
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

VAR_RE = re.compile(r'^([A-Z][A-Z0-9_]*)=(?:\$\{\1:-)?"([^"$]*)"', re.M)
LABEL_RE = re.compile(r'(?:^|\s)-L(E?)\s+([A-Za-z0-9_]+)')
REGEX_RE = re.compile(r"ctest\b[^\n]*?\s-R\s+'([^'$]+)'")
BDIR_RE = re.compile(r'\$(?:BDIR|\{BDIR\})/([A-Za-z0-9_./-]+)')
PROJ_RE = re.compile(r'\$(?:PROJ|\{PROJ\})/([A-Za-z0-9_./-]+)')
# Build-tree files that are not programs, and repository paths made at run time.
BDIR_SKIP = ("CMakeFiles/", "CMakeCache.txt", "CTestTestfile.cmake")
PROJ_SKIP = (".deb", ".peers", "out", "build")


def registered(build, ctest):
    r = subprocess.run([ctest, "--show-only=json-v1"], cwd=build, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"check_gpu_plan: ctest --show-only in {build} failed: {r.stderr.strip()}")
    tests = {}
    for t in json.loads(r.stdout).get("tests", []):
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        tests[t["name"]] = {
            "labels": set(props.get("LABELS", [])),
            "setup": set(props.get("FIXTURES_SETUP", [])),
            "required": set(props.get("FIXTURES_REQUIRED", [])),
            "command": t.get("command") or [],
        }
    return tests


def executables(source):
    """Programs of the CMake tree: name -> build-tree folder their binary lands in."""
    out = {}
    for dirpath, dirs, files in os.walk(source):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build"))]
        if "CMakeLists.txt" not in files:
            continue
        text = open(os.path.join(dirpath, "CMakeLists.txt"), encoding="utf-8").read()
        rel = os.path.relpath(dirpath, source)
        for m in re.finditer(r'add_executable\(\s*([A-Za-z0-9_]+)', text):
            name = m.group(1)
            o = re.search(r'set_target_properties\(\s*' + name + r'\b[^)]*RUNTIME_OUTPUT_DIRECTORY\s+'
                          r'\$\{PROJECT_BINARY_DIR\}/?([A-Za-z0-9_./-]*)', text)
            out[name] = os.path.normpath(o.group(1) or ".") if o else os.path.normpath(rel)
    return out


def is_program(t):
    exe = os.path.basename(t["command"][0]) if t["command"] else ""
    return not ("python" in exe or exe == "cmake")


def check_script(path, tests, exes, source):
    text = open(path, encoding="utf-8").read()
    name = os.path.basename(path)
    errs = []
    variables = {m.group(1): m.group(2).split() for m in VAR_RE.finditer(text)}
    lists = {k: v for k, v in variables.items() if k.endswith("_TESTS")}
    if not lists:
        errs.append(f"{name}: no *_TESTS variable found (the check would prove nothing)")
    for var, names in lists.items():
        for n in names:
            t = tests.get(n)
            if t is None:
                errs.append(f"{name}: {var} names '{n}', which no CMakeLists.txt registers")
            elif var != "PREP_TESTS" and "gpu" not in t["labels"]:
                errs.append(f"{name}: {var} names '{n}', which is not labelled gpu")
            elif var != "PREP_TESTS" and t["command"] and not is_program(t):
                errs.append(f"{name}: {var} names '{n}', which is not a program (a sanitizer cannot run it)")
            elif var == "PREP_TESTS" and not t["setup"]:
                errs.append(f"{name}: PREP_TESTS names '{n}', which sets up no fixture")
    if "PREP_TESTS" in lists:
        provided = set().union(*[tests[n]["setup"] for n in lists["PREP_TESTS"] if n in tests])
        for n, t in sorted(tests.items()):
            if "gpu" in t["labels"]:
                for fx in sorted(t["required"] - provided):
                    errs.append(f"{name}: GPU test '{n}' needs fixture '{fx}', set up by no test in PREP_TESTS")
    all_labels = set().union(*[t["labels"] for t in tests.values()])
    for m in LABEL_RE.finditer(text):
        if m.group(2) not in all_labels:
            errs.append(f"{name}: label '{m.group(2)}' (-L{m.group(1)}) is on no registered test")
    for m in REGEX_RE.finditer(text):
        if not any(re.search(m.group(1), n) for n in tests):
            errs.append(f"{name}: ctest -R '{m.group(1)}' matches no registered test")
    bins = set(variables.get("BENCH_BINS", [])) | {p for p in BDIR_RE.findall(text) if not p.startswith(BDIR_SKIP)}
    for b in sorted(bins):
        d, exe = os.path.split(os.path.normpath(b))
        if exe not in exes:
            errs.append(f"{name}: build-tree program '{b}': no add_executable({exe}) in the CMake tree")
        elif exes[exe] != os.path.normpath(d or "."):
            errs.append(f"{name}: build-tree program '{b}': {exe} is built into '{exes[exe]}'")
    for p in sorted(set(PROJ_RE.findall(text))):
        if not p.startswith(PROJ_SKIP) and not os.path.exists(os.path.join(source, p)):
            errs.append(f"{name}: repository file '{p}' does not exist")
    return errs


def self_test(scripts, tests, exes, source):
    """Each planted fault must be caught; the scripts as they are must pass."""
    base = {s: open(s, encoding="utf-8").read() for s in scripts}
    for s in scripts:
        if check_script(s, tests, exes, source):
            sys.exit(f"check_gpu_plan --self-test: {s} fails as it is; fix that first")
    plants = [
        ("misspelt test in SAN_TESTS", "issue24_run1", r'(SAN_TESTS:-"[^"]*?)\bcuda_paged\b', r"\1cuda_pagd"),
        ("misspelt test in RACE_TESTS", "issue24_run2", r'(RACE_TESTS:-"[^"]*?)\bcuda_gemm_batch\b', r"\1cuda_gemm_btch"),
        ("CPU test in SAN_TESTS", "issue24_run1", r'(SAN_TESTS:-")', r"\1cuda_keymap "),
        ("fixture setup dropped", "issue24_run1", r'PREP_TESTS="cuda_prepare eagle3_prepare"', 'PREP_TESTS="cuda_prepare"'),
        ("misspelt label", "issue24_run1", r"-LE gpu_fault", "-LE gpu_faults"),
        ("moved benchmark", "issue24_run1", r"bench/cuda_verify/bench_cuda_verify", "bench/bench_cuda_verify"),
        ("misspelt repository file", "issue24_run2", r"\$PROJ/bench/eagle3/bench_eagle3_gpu\.py", "$PROJ/bench/eagle3/bench_eagle3_gpu2.py"),
    ]
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for what, stem, pat, rep in plants:
            src = next((s for s in scripts if os.path.basename(s).startswith(stem)), None)
            if src is None:
                print(f"self-test: no script {stem}*: cannot plant '{what}'")
                bad += 1
                continue
            planted, n = re.subn(pat, rep, base[src], count=1)
            if n != 1:
                print(f"self-test: '{what}': pattern not found in {src} (update the self-test)")
                bad += 1
                continue
            copy = os.path.join(tmp, os.path.basename(src))
            shutil.copyfile(src, copy)
            with open(copy, "w", encoding="utf-8") as f:
                f.write(planted)
            errs = check_script(copy, tests, exes, source)
            print(f"self-test: {what}: {'caught: ' + errs[0] if errs else 'NOT caught'}")
            bad += not errs
    if bad:
        sys.exit(f"check_gpu_plan --self-test: {bad} planted fault(s) not caught")
    print(f"check_gpu_plan --self-test: all {len(plants)} planted faults caught")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--ctest", default="ctest")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("scripts", nargs="+")
    a = ap.parse_args()
    tests = registered(a.build, a.ctest)
    if not any("gpu" in t["labels"] for t in tests.values()):
        sys.exit(f"check_gpu_plan: {a.build} registers no gpu-labelled test")
    exes = executables(a.source)
    if a.self_test:
        self_test(a.scripts, tests, exes, a.source)
        return 0
    errs = [e for s in a.scripts for e in check_script(s, tests, exes, a.source)]
    for e in errs:
        print("FAIL " + e)
    if errs:
        return 1
    print(f"check_gpu_plan: {len(a.scripts)} scripts: every test, label, fixture, program and file they name exists "
          f"({len(tests)} tests registered, {len(exes)} programs in the CMake tree)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
