"""LLM.chat / Tokenizer.apply_chat_template with tools, tool calls and chat_template_kwargs (vLLM's
LLM.chat arguments; specdec_chat_apply_json), on the bundled weights behind Qwen3's published chat
template: the rendered prompt against transformers (when installed), LLM.chat's reply against
`specdec serve` given the same conversation, and the errors."""
import json
import os
import shutil

import pytest

import specdec
from conftest import TARGET, Server

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CONV = [{"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees"}]


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("kjv-qwen3")
    for f in ("generation_config.json", "model.safetensors", "tokenizer.json"):
        os.symlink(os.path.join(TARGET, f), d / f)
    with open(os.path.join(TARGET, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["max_position_embeddings"] = 2048  # Qwen3's tool preamble in the KJV tokenizer's tokens
    (d / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    with open(os.path.join(ROOT, "tests", "chat", "templates", "Qwen__Qwen3-0.6B.jinja"), encoding="utf-8",
              newline="") as f:
        tmpl = f.read()
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>", "chat_template": tmpl}),
                                             encoding="utf-8")
    yield str(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.quick
def test_render(qwen3_dir):
    tok = specdec.Tokenizer(qwen3_dir)
    text = tok.apply_chat_template(CONV, tools=TOOLS, chat_template_kwargs={"enable_thinking": False})
    # the tools in the system turn, the call with its arguments parsed from the JSON string, the result,
    # and Qwen3's empty think block that enable_thinking=False asks for
    assert '<tools>\n{"type": "function", "function": {"name": "get_weather"' in text
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in text
    assert "<tool_response>\n21 degrees\n</tool_response>" in text
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert tok.apply_chat_template(CONV, tokenize=True, tools=TOOLS) == tok.encode(tok.apply_chat_template(CONV, tools=TOOLS),
                                                                                 add_special_tokens=False)
    try:
        import transformers.utils.chat_template_utils as ctu
    except ImportError:
        return
    with open(os.path.join(qwen3_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        template = json.load(f)["chat_template"]
    conv = json.loads(json.dumps(CONV))
    conv[0], conv[1]["content"] = dict(conv[0]), ""  # vLLM's normalisation: null content -> "", arguments parsed
    conv[1]["tool_calls"][0]["function"]["arguments"] = {"city": "Paris"}
    want = ctu.render_jinja_template(conversations=[conv], tools=TOOLS, chat_template=template,
                                     add_generation_prompt=True, enable_thinking=False,
                                     eos_token="<|im_end|>")[0][0]
    assert text == want


def test_chat_equals_server(qwen3_dir):
    if os.environ.get("SPECDEC_TEST_NO_SERVER"):
        pytest.skip("built without `specdec serve` (SPECDEC_SERVER=OFF)")
    kwargs = {"enable_thinking": False}
    with specdec.LLM(qwen3_dir, backend="cpu") as m:
        out = m.chat(CONV, specdec.SamplingParams(temperature=0, max_tokens=12), use_tqdm=False, tools=TOOLS,
                     chat_template_kwargs=kwargs)[0]
        assert out.prompt == m.tokenizer.apply_chat_template(CONV, tools=TOOLS, chat_template_kwargs=kwargs)
    srv = Server("-m", qwen3_dir)
    try:
        status, body = srv.post("/v1/chat/completions", {"messages": CONV, "tools": TOOLS, "tool_choice": "none",
                                                         "chat_template_kwargs": kwargs, "max_tokens": 12,
                                                         "temperature": 0})
        assert status == 200, body
        assert body["usage"]["prompt_tokens"] == len(out.prompt_token_ids)
        assert body["choices"][0]["message"]["content"] == out.outputs[0].text
    finally:
        srv.stop()


@pytest.mark.quick
def test_errors(llm, qwen3_dir):
    # the bundled tokenizer has no template: the plain format, which reads role and content only
    assert llm.tokenizer.apply_chat_template(CONV, tools=TOOLS) == "User: Weather in Paris?\nAssistant: \nTool: 21 degrees\nAssistant:"
    tok = specdec.Tokenizer(qwen3_dir)
    with pytest.raises(specdec.InvalidArgumentError):
        tok.apply_chat_template(CONV, chat_template_kwargs=["x"])
    with pytest.raises(specdec.InvalidArgumentError, match="chat_template"):
        tok.apply_chat_template(CONV, chat_template_kwargs={"chat_template": "x"})
    with pytest.raises(specdec.InvalidArgumentError):
        tok.apply_chat_template([{"role": "user", "content": object()}], tools=TOOLS)
    with pytest.raises(specdec.InvalidArgumentError, match="tool_calls"):
        tok.apply_chat_template([{"role": "assistant", "tool_calls": {"a": 1}}])
