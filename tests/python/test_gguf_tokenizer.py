"""specdec.Tokenizer (and specdec.LLM) take a GGUF file's path as they take a directory (the path goes to
specdec_tokenizer_load unchanged): the committed tiny GGUF fixtures encode, decode and render their chat
template exactly as the tokenizer.json they were made from."""
import os

import pytest

import specdec

FIX = os.path.join(os.path.dirname(__file__), "..", "tokenizer", "fixtures", "gguf")


@pytest.mark.quick
@pytest.mark.parametrize("name", ["tiny-gpt2", "tiny-spm"])
def test_gguf_path(name):
    d = os.path.join(FIX, name)
    ref, gg = specdec.Tokenizer(d), specdec.Tokenizer(os.path.join(d, "tokenizer.gguf"))
    for text in ["the speculative decoding of a thing", "  two  spaces\n", "<s>a</s> b", "x\u4e16\u754c!"]:
        assert gg.encode(text) == ref.encode(text)
        ids = ref.encode(text)
        assert gg.decode(ids) == ref.decode(ids)
    if name == "tiny-spm":
        conv = [{"role": "user", "content": "hi"}]
        assert gg.apply_chat_template(conv) == ref.apply_chat_template(conv) == "<s>[user] hi</s>"


def test_gguf_bad(tmp_path):
    p = tmp_path / "model.gguf"
    p.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 16)  # a valid GGUF without a tokenizer
    with pytest.raises(specdec.SpecdecError, match="tokenizer.ggml.model"):
        specdec.Tokenizer(p)


MODELS = os.path.join(os.path.dirname(__file__), "..", "models", "fixtures")


@pytest.mark.quick
def test_gguf_llm():
    """specdec.LLM(model=FILE.gguf): the model and its tokenizer from one file; drafting for itself (the same
    file as the speculative model) gives plain decoding's greedy output."""
    m = os.path.join(MODELS, "gguf_qwen3", "model.gguf")
    sp = specdec.SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    plain = specdec.LLM(model=m).generate(["the cat and the"], sp)[0].outputs[0]
    spec = specdec.LLM(model=m, speculative_config={"model": m, "num_speculative_tokens": 3})
    out = spec.generate(["the cat and the"], sp)[0].outputs[0]
    assert len(plain.token_ids) == 12 and out.token_ids == plain.token_ids and out.text == plain.text
