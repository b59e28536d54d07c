#!/usr/bin/env python3
"""The README's commands, run as written (issue 26): every fenced block that is code runs.

    test_readme.py run README BUILD_DIR SOURCE_DIR      ctest `readme_commands`
    test_readme.py fresh-clone README SOURCE_DIR        tests/run_all.sh, stage "fresh clone"
    test_readme.py list README                          what would run, and what not and why
    test_readme.py --self-test                          the parser and the markers

Which blocks run (fences of three or more backticks or tildes at the start of a line):
- ```sh / ```bash / ```shell: run with `bash -e -o pipefail`, in the source directory,
  each with a timeout (60 s), in document order; a command left running in the background
  (`specdec serve ... &`) stays up for the blocks after it and is stopped at the end;
- ```python: run with this test's interpreter (the test venv), same directory and timeout;
- ```c: all C blocks together are one program: their #include lines first, the rest, in
  order, the body of main(); compiled against the library under test and run;
- a block without a language, or another language (```text, ```json), is not code and is
  not run; a line in such a block that starts like a command ("./build/", "bash ",
  "cmake ", "curl ", "python3 ", "$ ") is an error: put commands in ```sh blocks.

Markers: an HTML comment on the line right before the fence (blank lines between allowed):
    <!-- doctest: skip REASON -->   not run; REASON (at least three words) is printed.
                                    For what cannot run here: needs a GPU, the network,
                                    hours. Say which.
    <!-- doctest: fresh-clone -->   run by `fresh-clone` instead (tests/run_all.sh stage 3):
                                    in a scratch clone of the commit, in document order,
                                    with Debian's /usr/bin/python3 first on PATH and
                                    HOME a scratch directory (blocks that build or install).
    <!-- python-doctest: REASON -->  the Python package's marker (tests/python/readme_example.py
                                    runs that block with the installed package): skipped here.
Anything else after "doctest:" is an error, so a typo cannot silently skip a block. A
new block needs no marker to run.

Substitutions (the only changes made to a block's text before it runs, in `run` mode):
"./build/" becomes BUILD_DIR + "/", so the build under test runs; port 8080 becomes a free
port, so the test does not collide with anything listening on 8080. HOME is a scratch
directory in both modes.

fresh-clone also checks what the README promises of the main job (the first fresh-clone
block): it prints the statistics, creates no Python environment (build/venv), and takes at
most 120 s of CPU (user + sys: 60 s on 2 cores); its wall and CPU times are printed.
"""
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SHELL_LANGS = {"sh", "bash", "shell"}
COMMAND_START = re.compile(r"^\s*(\./build/|bash |cmake |curl |python3? |\$ )")
MARKER = re.compile(r"^\s*<!--\s*(python-)?doctest:\s*(.*?)\s*-->\s*$")
TIMEOUT_S = 60
MAIN_JOB_CPU_S = 120


class Block:
    def __init__(self, line, lang, text, marker):
        self.line, self.lang, self.text, self.marker = line, lang, text, marker

    @property
    def kind(self):
        if self.lang in SHELL_LANGS:
            return "sh"
        return self.lang if self.lang in ("python", "c") else "text"

    def __repr__(self):
        return f"line {self.line} ```{self.lang} ({self.marker or 'run'})"


def parse(text):
    """Blocks of a Markdown text, and the errors found (unknown markers, commands in a
    block that is not code, an unclosed fence)."""
    blocks, errors = [], []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)", lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2).lower(), i
        marker = None
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        mm = MARKER.match(lines[j]) if j >= 0 else None
        if mm and mm.group(1):  # the Python package's own doc test runs this block (tests/python)
            marker = "skip run by the Python package's tests: " + mm.group(2)
        elif mm:
            marker = mm.group(2)
            if marker == "fresh-clone":
                pass
            elif marker.startswith("skip"):
                if len(marker[4:].split()) < 3:
                    errors.append(f"line {j + 1}: 'doctest: skip' needs a reason of at least three words")
            else:
                errors.append(f"line {j + 1}: unknown doctest marker '{marker}' (skip REASON | fresh-clone)")
        body = []
        i += 1
        while i < len(lines) and not re.match(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$",
                                              lines[i]):
            body.append(lines[i])
            i += 1
        if i == len(lines):
            errors.append(f"line {start + 1}: fence not closed")
        b = Block(start + 1, lang, "\n".join(body) + "\n", marker)
        if b.kind == "text":
            for k, ln in enumerate(body):
                if COMMAND_START.match(ln):
                    errors.append(f"line {start + 2 + k}: a command in a block that is not code "
                                  f"(```{lang}): mark the block ```sh, or reword: {ln.strip()!r}")
        blocks.append(b)
        i += 1
    return blocks, errors


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Runner:
    """Runs blocks; keeps the process groups of shell blocks to stop what they left
    running in the background."""

    def __init__(self, cwd, env, scratch):
        self.cwd, self.env, self.scratch = cwd, env, scratch
        self.groups, self.failures = [], []

    def _run(self, argv, what, timeout):
        out_path = os.path.join(self.scratch, "out.txt")
        t0, c0 = time.time(), cpu_children()
        with open(out_path, "wb") as out:  # a file, not a pipe: a background process may keep it open
            p = subprocess.Popen(argv, cwd=self.cwd, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True)
            self.groups.append(p.pid)
            try:
                rc = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                rc = "timeout"
        wall, cpu = time.time() - t0, cpu_children() - c0
        with open(out_path, "rb") as f:
            output = f.read().decode("utf-8", "replace")
        ok = rc == 0
        print(f"{'ok  ' if ok else 'FAIL'} {what}: exit {rc}, {wall:.1f} s wall")
        if not ok:
            self.failures.append(what)
            print("    " + output[-3000:].replace("\n", "\n    "))
        return ok, output, wall, cpu

    def shell(self, text, what, timeout=TIMEOUT_S):
        return self._run(["bash", "-e", "-o", "pipefail", "-c", text], what, timeout)

    def python(self, text, what):
        path = os.path.join(self.scratch, "block.py")
        with open(path, "w") as f:
            f.write(text)
        return self._run([sys.executable, path], what, TIMEOUT_S)

    def c_program(self, blocks, build, source):
        includes, body = [], []
        for b in blocks:
            for ln in b.text.splitlines():
                (includes if ln.startswith("#include") else body).append(ln)
        prog = "\n".join(includes) + "\nint main(void) {\n" + "\n".join(body) + "\nreturn 0;\n}\n"
        src, exe = os.path.join(self.scratch, "readme.c"), os.path.join(self.scratch, "readme_c")
        with open(src, "w") as f:
            f.write(prog)
        what = f"C blocks at lines {', '.join(str(b.line) for b in blocks)} as one program"
        cc = subprocess.run(["cc", "-std=c11", "-Wall", src, "-o", exe, f"-I{source}/include", f"-L{build}",
                             "-lspecdec", f"-Wl,-rpath,{build}"], capture_output=True, text=True)
        if cc.returncode != 0:
            print(f"FAIL {what}: does not compile\n{cc.stderr[-3000:]}\n--- program:\n{prog}")
            self.failures.append(what)
            return
        self._run([exe], what, TIMEOUT_S)

    def stop_background(self):
        for pg in self.groups:
            for sig in (signal.SIGINT, signal.SIGKILL):
                try:
                    os.killpg(pg, sig)
                except ProcessLookupError:
                    break
                deadline = time.time() + 10
                while time.time() < deadline:
                    try:
                        os.killpg(pg, 0)
                    except ProcessLookupError:
                        break
                    time.sleep(0.1)


def cmd_run(readme, build, source):
    blocks, errors = parse(open(readme).read())
    for e in errors:
        print(f"FAIL {readme}: {e}")
    scratch = tempfile.mkdtemp(prefix="specdec_readme_")
    env = dict(os.environ, HOME=os.path.join(scratch, "home"))
    os.makedirs(env["HOME"])
    port = str(free_port())
    r = Runner(source, env, scratch)
    sub = lambda t: t.replace("./build/", build.rstrip("/") + "/").replace("8080", port)  # noqa: E731
    c_blocks = [b for b in blocks if b.kind == "c" and not b.marker]
    try:
        for b in blocks:
            if b.marker and b.marker.startswith("skip"):
                print(f"skip {b!r}: {b.marker[4:].strip()}")
            elif b.marker == "fresh-clone":
                print(f"skip {b!r}: run by tests/run_all.sh (stage 3, fresh clone)")
            elif b.kind == "sh":
                r.shell(sub(b.text), repr(b))
            elif b.kind == "python":
                r.python(sub(b.text), repr(b))
            elif b.kind == "c" and b is c_blocks[-1]:
                r.c_program(c_blocks, build, source)
    finally:
        r.stop_background()
        shutil.rmtree(scratch, ignore_errors=True)
    n_code = sum(1 for b in blocks if b.kind != "text")
    print(f"{n_code} code blocks, {len(errors) + len(r.failures)} failures")
    return 1 if errors or r.failures else 0


def cmd_fresh_clone(readme, source):
    blocks, errors = parse(open(readme).read())
    fresh = [b for b in blocks if b.marker == "fresh-clone"]
    for e in errors:
        print(f"FAIL {readme}: {e}")
    if not fresh:
        print(f"FAIL {readme}: no block is marked fresh-clone (the main job should be)")
        return 1
    head = subprocess.run(["git", "-C", source, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    dirty = subprocess.run(["git", "-C", source, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    if dirty:
        print("note: uncommitted changes are not in the clone (it has the commit)")
    scratch = tempfile.mkdtemp(prefix="specdec_fresh_")
    clone = os.path.join(scratch, "specdec")
    subprocess.run(["git", "clone", "-q", "--no-checkout", source, clone], check=True)
    subprocess.run(["git", "-C", clone, "checkout", "-q", head.stdout.strip()], check=True)
    bindir = os.path.join(scratch, "bin")
    os.makedirs(bindir)
    os.makedirs(os.path.join(scratch, "home"))
    path = os.environ["PATH"]
    if os.path.exists("/usr/bin/python3"):
        os.symlink("/usr/bin/python3", os.path.join(bindir, "python3"))
        path = bindir + os.pathsep + path
        print("python3 on PATH: /usr/bin/python3 (Debian's)")
    else:
        print("note: no /usr/bin/python3 here: PATH unchanged")
    env = dict(os.environ, PATH=path, HOME=os.path.join(scratch, "home"))
    env.pop("VIRTUAL_ENV", None)
    r = Runner(clone, env, scratch)
    try:
        for k, b in enumerate(fresh):
            ok, out, wall, cpu = r.shell(b.text, f"{b!r} in a fresh clone", timeout=900)
            print(f"     {wall:.1f} s wall, {cpu:.1f} s CPU (user + sys)")
            if k == 0 and ok:  # the main job
                checks = (("prints the statistics", "tokens per target pass" in out),
                          ("creates no Python environment", not os.path.exists(os.path.join(clone, "build", "venv"))),
                          (f"takes at most {MAIN_JOB_CPU_S} s of CPU (60 s on 2 cores)", cpu <= MAIN_JOB_CPU_S))
                for what, good in checks:
                    print(f"{'ok  ' if good else 'FAIL'} main job {what}")
                    if not good:
                        r.failures.append(what)
    finally:
        r.stop_background()
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if errors or r.failures else 0


def cmd_list(readme):
    blocks, errors = parse(open(readme).read())
    for b in blocks:
        print(f"{b!r}: {b.kind}")
    for e in errors:
        print(f"error: {e}")
    return 1 if errors else 0


def self_test():
    text = "\n".join([
        "# t", "```sh", "echo a", "```", "", "<!-- doctest: skip needs a GPU here -->", "", "```bash", "nvidia-smi",
        "```", "<!-- doctest: fresh-clone -->", "````sh", "cmake -S . -B build", "```", "still inside", "````",
        "```", "specdec generate [-m DIR]", "```", "```python", "print(1)", "```", "```json", "{}", "```",
        "<!-- python-doctest: tests/python runs it -->", "```python", "import specdec", "```"])
    blocks, errors = parse(text)
    got = [(b.line, b.kind, b.marker) for b in blocks]
    want = [(2, "sh", None), (8, "sh", "skip needs a GPU here"), (12, "sh", "fresh-clone"), (17, "text", None),
            (20, "python", None), (23, "text", None),
            (27, "python", "skip run by the Python package's tests: tests/python runs it")]
    assert got == want and not errors, (got, errors)
    assert "still inside" in blocks[2].text
    bad = [("<!-- doctest: skp typo -->\n```sh\nx\n```\n", "unknown doctest marker"),
           ("<!-- doctest: skip -->\n```sh\nx\n```\n", "needs a reason"),
           ("```\n./build/specdec generate -p x\n```\n", "a command in a block that is not code"),
           ("```text\n$ make\n```\n", "a command in a block that is not code"),
           ("```sh\necho\n", "fence not closed")]
    for t, word in bad:
        _, errs = parse(t)
        assert any(word in e for e in errs), (t, errs)
    print("self-test: ok")
    return 0


if __name__ == "__main__":
    a = sys.argv[1:]
    if a == ["--self-test"]:
        sys.exit(self_test())
    if len(a) == 4 and a[0] == "run":
        sys.exit(cmd_run(a[1], os.path.abspath(a[2]), os.path.abspath(a[3])))
    if len(a) == 3 and a[0] == "fresh-clone":
        sys.exit(cmd_fresh_clone(a[1], os.path.abspath(a[2])))
    if len(a) == 2 and a[0] == "list":
        sys.exit(cmd_list(a[1]))
    sys.exit(__doc__)
