"""specdec.LLM drafting with the target checkpoint's own MTP layer (speculative_config {"method": "mtp"},
vLLM's "deepseek_mtp" spelling too) on the glm4_moe fixture (GLM-4.5's layout, an MTP layer, random
weights, an 80-id tokenizer): greedy output and statistics equal `specdec generate --drafter mtp`, the
output equals plain decoding, the metrics name "mtp"; a model without an MTP layer is refused when
the LLM is made."""
import json
import os
import subprocess

import pytest

import specdec
from conftest import specdec_bin

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "fixtures")
GLM = os.path.join(FIX, "glm4_moe")
PROMPTS = ["The ark rested", "Noah said: (7 days)."]


def cli(prompt, n, *extra):
    cmd = [specdec_bin(), "generate", "-m", GLM, "-p", prompt, "-n", str(n), "--backend", "cpu", "--temp", "0",
           "--ignore-eos", "--json", *map(str, extra)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{cmd}: {r.stderr}"
    return json.loads(r.stdout)


@pytest.mark.quick
@pytest.mark.parametrize("method", ["mtp", "deepseek_mtp"])
def test_mtp_greedy_equals_cli_and_plain(method):
    n = 16
    refs = [cli(p, n, "--drafter", "mtp", "--draft-max", 3) for p in PROMPTS]
    plain = [cli(p, n, "--drafter", "none") for p in PROMPTS]
    with specdec.LLM(model=GLM, backend="cpu", speculative_config={"method": method,
                                                                   "num_speculative_tokens": 3}) as m:
        assert m.draft == os.fspath(GLM)
        outs = m.generate(PROMPTS, specdec.SamplingParams(temperature=0, max_tokens=n, ignore_eos=True),
                          use_tqdm=False)
    for o, ref, pl in zip(outs, refs, plain):
        assert o.outputs[0].token_ids == ref["tokens"] == pl["tokens"]
        assert o.outputs[0].text == pl["text"]
        assert o.metrics["draft_method"] == "mtp" and ref["stats"]["draft_method"] == "mtp"
        for k in ("n_rounds", "n_drafted", "n_accepted"):
            assert o.metrics[k] == ref["stats"][k], k
    assert sum(o.metrics["n_drafted"] for o in outs) > 0


@pytest.mark.quick
def test_mtp_needs_the_layer():
    with pytest.raises(specdec.SpecdecError) as ei:
        specdec.LLM(model=os.path.join(FIX, "glm4_moe_flat"), backend="cpu", speculative_config={"method": "mtp"})
    assert "MTP layer" in str(ei.value)
