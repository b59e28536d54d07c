"""Every bad argument raises the SpecdecError subclass of its status, with the status name and a message
naming what was wrong."""
import json
import os

import pytest

import specdec
from specdec import _ffi

pytestmark = pytest.mark.quick

SP = specdec.SamplingParams


def check(exc_info, cls, *words):
    e = exc_info.value
    assert type(e) is cls, (type(e), e)
    assert isinstance(e, specdec.SpecdecError)
    assert e.status_name == cls.status_name and e.status == _ffi.binding().status_values[cls.status_name]
    assert str(e).startswith(cls.status_name)
    for w in words:
        assert w in e.message, (w, e.message)


@pytest.mark.parametrize("kwargs,words", [
    (dict(temperature=-1.0), ["temperature"]),
    (dict(temperature=float("nan")), ["temperature"]),
    (dict(top_p=0.0), ["top_p"]),
    (dict(top_p=1.5), ["top_p"]),
    (dict(top_k=-5), ["top_k"]),
    (dict(min_p=2.0), ["min_p"]),
    (dict(max_tokens=0), ["n_predict"]),
    (dict(max_tokens=-3), ["n_predict"]),
    (dict(stop=[""]), ["stop"]),
    (dict(stop=["x" * 600]), ["stop"]),
])
def test_bad_sampling_values_refused_by_the_library(llm, kwargs, words):
    with pytest.raises(specdec.InvalidArgumentError) as ei:
        llm.generate("And God said", SP(**kwargs), use_tqdm=False)
    check(ei, specdec.InvalidArgumentError, "request 0", *words)


@pytest.mark.parametrize("kwargs,word", [
    (dict(temperature="hot"), "temperature"), (dict(top_k=2.5), "top_k"), (dict(max_tokens="9"), "max_tokens"),
    (dict(seed=-1), "seed"), (dict(seed=2**64), "seed"), (dict(stop=[1]), "stop"), (dict(stop=5), "stop"),
    (dict(ignore_eos="yes"), "ignore_eos"), (dict(top_p=None), "top_p"),
])
def test_bad_sampling_types(kwargs, word):
    with pytest.raises(specdec.InvalidArgumentError) as ei:
        SP(**kwargs)
    check(ei, specdec.InvalidArgumentError, word)
    assert isinstance(ei.value, ValueError)


def test_bad_prompts(llm):
    with pytest.raises(specdec.InvalidArgumentError) as ei:
        llm.generate([[5, 99999]], SP(max_tokens=2), use_tqdm=False)
    check(ei, specdec.InvalidArgumentError, "99999")
    with pytest.raises(specdec.InvalidArgumentError) as ei:
        llm.generate([[]], SP(max_tokens=2), use_tqdm=False)
    check(ei, specdec.InvalidArgumentError, "request 0")
    with pytest.raises(specdec.InvalidArgumentError) as ei:
        llm.generate([[1.5, 2]], SP(max_tokens=2), use_tqdm=False)
    check(ei, specdec.InvalidArgumentError, "prompts[0]")
    with pytest.raises(specdec.InvalidArgumentError) as ei:
        llm.generate([[2**40]], SP(max_tokens=2), use_tqdm=False)
    check(ei, specdec.InvalidArgumentError, "int32")
    with pytest.raises(specdec.InvalidArgumentError):
        llm.generate(42, use_tqdm=False)
    with pytest.raises(specdec.InvalidArgumentError):
        llm.generate([{"text": "x"}], use_tqdm=False)
    with pytest.raises(specdec.InvalidArgumentError) as ei:
        llm.generate(["a", "b"], [SP()], use_tqdm=False)
    check(ei, specdec.InvalidArgumentError, "1 SamplingParams for 2 prompts")
    with pytest.raises(specdec.InvalidArgumentError):
        llm.generate(["a"], {"temperature": 0}, use_tqdm=False)
    with pytest.raises(specdec.InvalidArgumentError):
        list(llm.stream(["a", "b"]))
    # the request after a refused one in a batch: nothing is left running
    with pytest.raises(specdec.InvalidArgumentError):
        llm.generate(["And God said", [99999]], SP(max_tokens=400, ignore_eos=True), use_tqdm=False)
    m = llm.scheduler_metrics()
    assert (m["active"], m["queued"]) == (0, 0)


def test_prompt_longer_than_context():
    with specdec.LLM(backend="cpu", n_ctx=16) as m:
        with pytest.raises(specdec.ContextFullError) as ei:
            m.generate("And God said, Let there be light: and there was light. " * 3, SP(max_tokens=4), use_tqdm=False)
        check(ei, specdec.ContextFullError, "request 0")


@pytest.mark.parametrize("kwargs,cls,words", [
    (dict(model="/nonexistent/model"), specdec.IoError, ["/nonexistent/model"]),
    (dict(backend="tpu"), specdec.InvalidArgumentError, ["backend"]),
    (dict(n_ctx=0), specdec.InvalidArgumentError, ["n_ctx"]),
    (dict(n_ctx=2**40), specdec.InvalidArgumentError, ["n_ctx"]),
    (dict(max_num_seqs=0), specdec.InvalidArgumentError, ["max_active"]),
    (dict(max_num_seqs=100000), specdec.InvalidArgumentError, ["max_active"]),
    (dict(max_num_seqs=2.0), specdec.InvalidArgumentError, ["max_num_seqs"]),
    (dict(seed=-1), specdec.InvalidArgumentError, ["seed"]),
    (dict(speculative_config={"bogus": 1}), specdec.InvalidArgumentError, ["bogus"]),
    (dict(speculative_config={"method": "medusa"}), specdec.InvalidArgumentError, ["medusa"]),
    (dict(speculative_config=[("method", "ngram")]), specdec.InvalidArgumentError, ["dict"]),
    (dict(speculative_config={"verify": "maybe"}), specdec.InvalidArgumentError, ["verify"]),
    (dict(speculative_config={"tree": [0]}), specdec.InvalidArgumentError, ["tree"]),
    (dict(speculative_config={"tree": [65]}), specdec.InvalidArgumentError, ["tree"]),
    (dict(speculative_config={"tree": "4,2"}), specdec.InvalidArgumentError, ["tree"]),
    (dict(speculative_config={"num_speculative_tokens": "4"}), specdec.InvalidArgumentError, ["num_speculative"]),
    (dict(speculative_config={"prompt_lookup_max": 3}), specdec.InvalidArgumentError, ["ngram"]),
    (dict(speculative_config={"method": "eagle3"}), specdec.InvalidArgumentError, ["eagle3"]),
    (dict(draft="/a", speculative_config={"model": "/b"}), specdec.InvalidArgumentError, ["different"]),
])
def test_bad_llm_arguments(kwargs, cls, words):
    kwargs.setdefault("backend", "cpu")
    with pytest.raises(cls) as ei:
        specdec.LLM(**kwargs)
    check(ei, cls, *words)


def test_bad_speculative_values_at_generate():
    for cfg, word in (({"num_speculative_tokens": 99}, "n_draft"), ({"draft_nodes": 100}, "draft_nodes")):
        with specdec.LLM(backend="cpu", speculative_config=cfg) as m:
            with pytest.raises(specdec.InvalidArgumentError) as ei:
                m.generate("And God said", SP(max_tokens=2), use_tqdm=False)
            check(ei, specdec.InvalidArgumentError, word)
    target, _ = specdec.bundled_pair()
    with specdec.LLM(model=target, backend="cpu", speculative_config={"tree": [2, 2]}) as m:  # no draft model
        with pytest.raises(specdec.InvalidArgumentError) as ei:
            m.generate("And God said", SP(max_tokens=2), use_tqdm=False)
        check(ei, specdec.InvalidArgumentError, "draft")


def test_ngram_runs_without_a_draft_model():
    """speculative_config method 'ngram' (issue 21): no draft model is loaded, and greedy output is the
    target's own greedy output (the same tokens as the bundled pair's, which equal plain decoding)."""
    assert _ffi.binding().has_field("specdec_generate_params", "draft_method")
    greedy = SP(temperature=0, max_tokens=24)
    with specdec.LLM(backend="cpu", speculative_config={"method": "ngram", "prompt_lookup_max": 3}) as m:
        assert m.draft is None
        ngram = m.generate("And God said", greedy, use_tqdm=False)[0]
    with specdec.LLM(backend="cpu") as m:
        pair = m.generate("And God said", greedy, use_tqdm=False)[0]
    assert len(ngram.outputs[0].token_ids) == 24
    assert ngram.outputs[0].token_ids == pair.outputs[0].token_ids
    assert ngram.metrics.draft_method == "ngram" and pair.metrics.draft_method == "model"


def test_bad_model_directory(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(specdec.FormatError) as ei:
        specdec.LLM(model=str(tmp_path), backend="cpu")
    check(ei, specdec.FormatError, "config.json")


def test_cuda_without_a_device():
    b = _ffi.binding()
    if b.lib.specdec_has_cuda() and b.lib.specdec_cuda_device_count() > 0:
        pytest.skip("a CUDA device is present")
    with pytest.raises(specdec.BackendUnavailableError) as ei:
        specdec.LLM(backend="cuda")
    check(ei, specdec.BackendUnavailableError)


def test_chat_and_tokenizer_errors(llm):
    with pytest.raises(specdec.InvalidArgumentError):
        llm.chat([], use_tqdm=False)
    with pytest.raises(specdec.InvalidArgumentError) as ei:
        llm.chat([{"content": "no role"}], use_tqdm=False)
    check(ei, specdec.InvalidArgumentError, "messages[0]")
    with pytest.raises(specdec.InvalidArgumentError) as ei:
        llm.chat([{"role": "user", "content": "Hi"}], chat_template="nonexistent", use_tqdm=False)
    check(ei, specdec.InvalidArgumentError, "nonexistent")
    with pytest.raises(specdec.InvalidArgumentError) as ei:
        llm.chat([{"role": "", "content": "Hi"}], use_tqdm=False)
    check(ei, specdec.InvalidArgumentError, "role")
    with pytest.raises(specdec.InvalidArgumentError):
        llm.tokenizer.decode(["a"])
    with pytest.raises(specdec.InvalidArgumentError):
        llm.tokenizer.encode(None)
    with pytest.raises(specdec.IoError):
        specdec.Tokenizer("/nonexistent/tokenizer")


def test_closed_llm():
    m = specdec.LLM(backend="cpu")
    m.close()
    m.close()  # idempotent
    for call in (lambda: m.generate("x", use_tqdm=False), lambda: list(m.stream("x")),
                 lambda: m.chat([{"role": "user", "content": "x"}]), m.scheduler_metrics):
        with pytest.raises(specdec.ShutDownError) as ei:
            call()
        check(ei, specdec.ShutDownError, "closed")


def test_draft_that_does_not_match_its_config(tmp_path):
    """A draft directory whose config.json disagrees with its tensors (vocab 4000 vs 4096 rows)."""
    _, draft = specdec.bundled_pair()
    for f in os.listdir(draft):
        (tmp_path / f).symlink_to(os.path.join(draft, f))
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").unlink()
    cfg["vocab_size"] = 4000
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(specdec.ModelMismatchError) as ei:
        specdec.LLM(draft=str(tmp_path), backend="cpu")
    check(ei, specdec.ModelMismatchError, "draft")
