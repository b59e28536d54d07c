"""Shared fixtures of the Python package tests (tests/python; run by ctest python_api / python_leaks).

The package is imported from the source tree (PYTHONPATH=python) with the CTest build's library and
program (SPECDEC_LIBRARY, SPECDEC_BIN set by tests/python/CMakeLists.txt); python_install tests the
same package after `pip install .` in a fresh virtual environment.
"""
import json
import os
import select
import subprocess
import sys
import tempfile
import time

import pytest

import specdec
from specdec import _paths

TARGET, DRAFT = specdec.bundled_pair()
# Sanitizer builds (ctest sets SPECDEC_TEST_SLOW) decode ~20x slower: time bounds scale with it.
SLOW = 10 if os.environ.get("SPECDEC_TEST_SLOW") else 1


def pytest_configure(config):
    config.addinivalue_line("markers", "quick: cheap tests, also run against the ASan build (python_api there)")


def specdec_bin():
    b = _paths.binary_path()
    assert b and os.path.exists(b), f"the specdec program is missing ({b})"
    return b


def cli_generate(prompt, n, *extra, draft=DRAFT):
    """`specdec generate --json` on the bundled pair (or the target with another draft), CPU backend: the
    reference."""
    cmd = [specdec_bin(), "generate", "-m", TARGET, "-md", draft, "-p", prompt, "-n", str(n), "--backend", "cpu",
           "--json", *map(str, extra)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{cmd}: {r.stderr}"
    return json.loads(r.stdout)


@pytest.fixture(scope="session")
def llm():
    with specdec.LLM(backend="cpu") as m:
        yield m


@pytest.fixture(scope="session")
def llm_match():
    with specdec.LLM(backend="cpu", speculative_config={"verify": "match"}) as m:
        yield m


class Server:
    """`python -m specdec.serve` on a port the OS picks (--port 0; the "listening on" line names it),
    returned once /health answers 200."""

    def __init__(self, *args):
        self.log = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "specdec.serve", "--port", "0", "--backend", "cpu",
                                      *args], stdout=subprocess.PIPE, stderr=self.log, text=True)
        deadline = time.time() + 60
        self.port = None
        while time.time() < deadline and self.proc.poll() is None and self.port is None:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if ready:
                line = self.proc.stdout.readline()
                if "listening on http://" in line:
                    self.port = int(line.split("http://", 1)[1].split()[0].rsplit(":", 1)[1])
        while self.port is not None and time.time() < deadline:  # listening comes before the models load
            try:
                if self.request("GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        self.log.seek(0)
        raise RuntimeError(f"server did not start or never became healthy: {self.log.read()}")

    def request(self, method, path, body=None):
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        c.request(method, path, None if body is None else json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def post(self, path, body):
        status, data = self.request("POST", path, body)
        return status, json.loads(data)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(2)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
