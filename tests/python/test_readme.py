"""The README's Python example runs as written (a doc test), in a fresh interpreter."""
import os
import re
import subprocess
import sys

import readme_example
import specdec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_readme_python_example(tmp_path):
    code = readme_example.extract(os.path.join(ROOT, "README.md"))
    assert "specdec.LLM(" in code
    env = dict(os.environ)  # the same package as this test imports, whatever the working directory
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(specdec.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([pkg_parent, *filter(None, [env.get("PYTHONPATH")])])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env=env)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "acceptance" in out and "tokens/round" in out
    # logprobs=2, greedy: the first step, the sampled ' unto' (rank 1) then ',' (2); CPU: -0.659, -1.402, -5.229
    assert "[(' unto', -0.6" in out and "), (',', -1.4" in out and "cumulative -5.2" in out
    assert "SPECDEC_ERR_INVALID_ARGUMENT - request 0" in out and "top_p" in out
    assert "Assistant:" in out
    assert re.search(r"^[0-9]{3}-[a-z]{2,4}$", out, re.M), out  # the structured-output line


def test_readme_async_example(tmp_path):
    blocks = readme_example.extract_all(os.path.join(ROOT, "README.md"))
    assert len(blocks) == 2 and "specdec.AsyncLLM(" in blocks[1]
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(specdec.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([pkg_parent, *filter(None, [env.get("PYTHONPATH")])])
    r = subprocess.run([sys.executable, "-c", blocks[1]], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env=env)
    assert r.returncode == 0, r.stderr
    with specdec.LLM() as llm:
        want = [llm.generate(p, specdec.SamplingParams(temperature=0, max_tokens=16))[0].outputs[0].text
                for p in ("And God said", "In the beginning")]
    assert r.stdout.strip() == repr(want)
