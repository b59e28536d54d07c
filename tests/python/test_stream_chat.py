"""LLM.stream against generate, LLM.chat against `specdec serve`'s /v1/chat/completions (started with
`python -m specdec.serve`), and the tokenizer wrapper."""
import os

import pytest

import specdec
from conftest import Server


@pytest.mark.parametrize("prompt,params", [
    pytest.param("And God said", dict(temperature=0, max_tokens=6, stop=["him,"]), marks=pytest.mark.quick),
    ("And God said", dict(temperature=0, max_tokens=24)),
    ("In the beginning", dict(temperature=0.9, max_tokens=20, seed=11)),
    ("And God said", dict(temperature=0, max_tokens=32, stop=["man of"])),
    ("The Lord is my", dict(temperature=1.0, max_tokens=24, seed=3, stop=["\n", "the"])),
])
def test_stream_concatenation_equals_generate(llm, prompt, params):
    sp = specdec.SamplingParams(**params)
    ref = llm.generate(prompt, sp, use_tqdm=False)[0]
    gen = llm.stream(prompt, sp)
    deltas = []
    while True:
        try:
            deltas.append(next(gen))
        except StopIteration as stop:
            final = stop.value
            break
    assert "".join(deltas) == ref.outputs[0].text
    assert len(deltas) > 1
    assert final.outputs[0].token_ids == ref.outputs[0].token_ids
    assert final.outputs[0].finish_reason == ref.outputs[0].finish_reason
    assert final.outputs[0].stop_reason == ref.outputs[0].stop_reason


@pytest.mark.quick
def test_stream_closed_early_cancels(llm):
    before = llm.scheduler_metrics()
    gen = llm.stream("And God said", specdec.SamplingParams(temperature=0, max_tokens=400, ignore_eos=True))
    first = next(gen)
    assert first
    gen.close()
    m = llm.scheduler_metrics()
    assert m["cancelled"] == before["cancelled"] + 1
    assert (m["active"], m["queued"]) == (0, 0)
    assert m["kv_blocks_used"] == 0


def test_chat_equals_server(llm):
    if os.environ.get("SPECDEC_TEST_NO_SERVER"):
        pytest.skip("built without `specdec serve` (SPECDEC_SERVER=OFF)")
    convs = [[{"role": "user", "content": "Who made the heaven?"}],
             [{"role": "system", "content": "Answer as the scripture does."},
              {"role": "user", "content": "What is the light?"}]]
    srv = Server()
    try:
        for conv in convs:
            status, body = srv.post("/v1/chat/completions", {"messages": conv, "max_tokens": 16, "temperature": 0})
            assert status == 200, body
            ours = llm.chat(conv, specdec.SamplingParams(temperature=0, max_tokens=16), use_tqdm=False)[0]
            assert ours.outputs[0].text == body["choices"][0]["message"]["content"]
            assert len(ours.outputs[0].token_ids) == body["usage"]["completion_tokens"]
            assert len(ours.prompt_token_ids) == body["usage"]["prompt_tokens"]
            assert ours.prompt == llm.tokenizer.apply_chat_template(conv)
        # seeded match mode, many conversations at once
        status, body = srv.post("/v1/chat/completions", {"messages": convs[0], "max_tokens": 16, "temperature": 0.8,
                                                         "seed": 5, "verify": "match", "top_p": 1.0})
        assert status == 200, body
    finally:
        assert srv.stop() == 0
    with specdec.LLM(backend="cpu", speculative_config={"verify": "match"}) as m:
        outs = m.chat(convs, specdec.SamplingParams(temperature=0.8, max_tokens=16, seed=5), use_tqdm=False)
    assert outs[0].outputs[0].text == body["choices"][0]["message"]["content"]
    assert len(outs) == 2


def test_chat_continue_final(llm):
    """continue_final_message: the ChatML prompt ends right after the last message's stripped content (its
    leading space kept, transformers' rule); LLM.chat and `specdec serve`'s /tokenize and chat completions (the
    C implementation) agree; add_generation_prompt with it raises (the C cut's "not written" case: server_parse)."""
    conv = [{"role": "user", "content": "Who made the heaven?"},
            {"role": "assistant", "content": [{"type": "text", "text": "In the"}, {"type": "text", "text": "beginning "}]}]
    tok = llm.get_tokenizer()
    text = tok.apply_chat_template(conv, add_generation_prompt=False, chat_template="chatml", continue_final_message=True)
    assert text == ("<|im_start|>user\nWho made the heaven?<|im_end|>\n<|im_start|>assistant\nIn the\nbeginning")
    with pytest.raises(specdec.InvalidArgumentError, match="add_generation_prompt"):
        tok.apply_chat_template(conv, chat_template="chatml", continue_final_message=True)
    sp = specdec.SamplingParams(temperature=0, max_tokens=8)
    ours = llm.chat(conv, sp, use_tqdm=False, add_generation_prompt=False, chat_template="chatml",
                    continue_final_message=True)[0]
    assert ours.prompt == text and ours.prompt_token_ids == tok.apply_chat_template(
        conv, tokenize=True, add_generation_prompt=False, chat_template="chatml", continue_final_message=True)
    if os.environ.get("SPECDEC_TEST_NO_SERVER"):
        pytest.skip("built without `specdec serve` (SPECDEC_SERVER=OFF)")
    srv = Server("--chat-template", "chatml")
    try:
        body = {"messages": conv, "add_generation_prompt": False, "continue_final_message": True}
        status, t = srv.post("/tokenize", body)
        assert status == 200 and t["tokens"] == ours.prompt_token_ids, t
        status, r = srv.post("/v1/chat/completions", dict(body, max_tokens=8, temperature=0))
        assert status == 200 and r["choices"][0]["message"]["content"] == ours.outputs[0].text, r
    finally:
        assert srv.stop() == 0


@pytest.mark.quick
def test_tokenizer(llm):
    tok = llm.get_tokenizer()
    ids = tok.encode("And God said, Let there be light")
    assert ids[0] == tok.bos_token_id
    assert tok.decode(ids) == "And God said, Let there be light"
    assert tok.encode("And", add_special_tokens=False) == ids[1:2]
    assert tok.vocab_size == 4096 and tok.eos_token_id == 1
    assert tok.chat_template_name() == "plain"
    assert tok.apply_chat_template([{"role": "user", "content": "Hi"}]) == "User: Hi\nAssistant:"
    assert tok.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=False) == "User: Hi\n"
    assert tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=True) == tok.encode(
        "User: Hi\nAssistant:")
    long_text = "And God said, Let there be light: and there was light. " * 200
    assert tok.decode(tok.encode(long_text)) == long_text
    conv = [{"role": "user", "content": long_text}]  # past the first buffer of both chat calls: they grow
    rendered = tok.apply_chat_template(conv)
    assert rendered == "User: " + long_text + "\nAssistant:"
    assert tok.apply_chat_template(conv, tokenize=True) == tok.encode(rendered)
