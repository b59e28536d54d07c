#!/usr/bin/env python3
"""`--threads N` / `-t N` of `specdec generate`, `specdec batch` and `specdec serve`
(specdec_engine_params.cpu_threads, since libspecdec 0.5.3), bundled pair, CPU backend.

Checks:
  - generate, speculative with sampling (seed 5) and greedy: the same tokens with --threads 1, 2
    and 3 (-t 2 too), and with no flag (the default);
  - the flag reaches the engine: with SPECDEC_CPU_THREADS=abc in the environment, generate and
    batch without --threads exit 1 naming the variable, with --threads 2 they run (an explicit
    count wins over the variable); serve likewise fails to start, or starts ("ready");
  - bad values (-1, 257, x) exit 2 naming the flag; --help of generate and serve lists it.

Usage: test_cli_threads.py SPECDEC_BIN MODELS_DIR TMPDIR"""
import json
import os
import subprocess
import sys
import time

specdec, models, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(tmp, exist_ok=True)
TARGET, DRAFT = os.path.join(models, "kjv-target"), os.path.join(models, "kjv-draft")
COMMON = ["-m", TARGET, "-md", DRAFT, "--backend", "cpu", "--seed", "5"]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sd_checks import check, done  # noqa: E402


def run(args, env_threads=None):
    env = dict(os.environ)
    env.pop("SPECDEC_CPU_THREADS", None)
    if env_threads is not None:
        env["SPECDEC_CPU_THREADS"] = env_threads
    return subprocess.run([specdec] + args, capture_output=True, text=True, timeout=600, env=env)


def gen(*extra, temp="0.8", env_threads=None):
    p = run(["generate", "-p", "And God said", "-n", "32", "--temp", temp, "--json"] + COMMON + list(extra),
            env_threads)
    check(p.returncode == 0, f"generate {extra}: exit {p.returncode}: {p.stderr[-300:]}")
    return json.loads(p.stdout)["tokens"] if p.returncode == 0 else None


for temp in ("0.8", "0"):
    ref = gen("--threads", "1", temp=temp)
    check(ref and len(ref) == 32, f"temp {temp}: reference of 32 tokens: {ref}")
    for extra in (["--threads", "2"], ["--threads", "3"], ["-t", "2"], []):
        got = gen(*extra, temp=temp)
        check(got == ref, f"temp {temp}, {extra or 'default'}: {got} != one thread's {ref}")

# The flag reaches the engine: the bad variable is read only when no count is given.
p = run(["generate", "-p", "And God said", "-n", "4", "--json"] + COMMON, "abc")
check(p.returncode == 1 and "SPECDEC_CPU_THREADS" in p.stderr,
      f"generate with SPECDEC_CPU_THREADS=abc: exit {p.returncode}: {p.stderr[-300:]}")
check(gen("--threads", "2", env_threads="abc") is not None, "generate --threads 2 with SPECDEC_CPU_THREADS=abc")

lines = os.path.join(tmp, "prompts.txt")
with open(lines, "w") as f:
    f.write("And God said\nIn the beginning\n")
p = run(["batch", "-f", lines, "-n", "4"] + COMMON, "abc")
check(p.returncode == 1 and "SPECDEC_CPU_THREADS" in p.stderr,
      f"batch with SPECDEC_CPU_THREADS=abc: exit {p.returncode}: {p.stderr[-300:]}")
p = run(["batch", "-f", lines, "-n", "4", "--threads", "2"] + COMMON, "abc")
check(p.returncode == 0, f"batch --threads 2 with SPECDEC_CPU_THREADS=abc: exit {p.returncode}: {p.stderr[-300:]}")


def serve_starts(extra, env_threads):
    """(ready, stderr): whether `specdec serve` printed its ready line within 60 s."""
    env = dict(os.environ)
    env["SPECDEC_CPU_THREADS"] = env_threads
    proc = subprocess.Popen([specdec, "serve", "--port", "0", "-m", TARGET, "--backend", "cpu"] + extra,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    ready = False
    deadline = time.time() + 60
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if "ready" in line:
            ready = True
            break
    proc.terminate()
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return ready, err


ready, err = serve_starts([], "abc")
check(not ready and "SPECDEC_CPU_THREADS" in err, f"serve with SPECDEC_CPU_THREADS=abc started: {err[-300:]}")
ready, err = serve_starts(["--threads", "2"], "abc")
check(ready, f"serve --threads 2 with SPECDEC_CPU_THREADS=abc did not start: {err[-300:]}")

for bad in ("-1", "257", "x"):
    p = run(["generate", "-p", "x", "--threads", bad] + COMMON)
    check(p.returncode == 2 and "--threads" in p.stderr, f"generate --threads {bad}: exit {p.returncode}: {p.stderr}")
    p = run(["serve", "--threads", bad])
    check(p.returncode == 2 and "--threads" in p.stderr, f"serve --threads {bad}: exit {p.returncode}: {p.stderr}")
for cmd in ("generate", "serve"):
    p = run([cmd, "--help"])
    check("--threads" in p.stdout + p.stderr, f"{cmd} --help lists --threads")

sys.exit(done())
