"""Conversations rendered by both transformers and specdec in tests/chat/test_chat_templates.py.
Each is (name, messages); every one is rendered with add_generation_prompt on and off."""

WS = "\xa0\u2028 \x1c\x85"  # characters Python's str.strip() removes (trim in templates)

CONVERSATIONS = [
    ("single_user", [("user", "Hello, who are you?")]),
    ("system_user", [("system", "You are a terse assistant."), ("user", "Name a colour.")]),
    ("multi_turn", [("system", "Be brief."), ("user", "Hi!"), ("assistant", "Hello. How can I help?"),
                    ("user", "Count to three.")]),
    ("ends_with_assistant", [("user", "2+2?"), ("assistant", "4"), ("user", "3+3?"), ("assistant", "6")]),
    ("empty_content", [("system", ""), ("user", "")]),
    ("empty_user", [("user", "")]),
    ("unicode", [("user", "Ünïcødé — 日本語のテキスト 🎉👩‍👩‍👧 ∑ x² ≠ ∞")]),
    ("whitespace", [("user", "  \n padded \t\n"), ("assistant", "  reply  "), ("user", "\u3000x\u3000")]),
    ("unicode_space", [("system", WS + "sys" + WS), ("user", WS + "q" + WS)]),
    ("newlines", [("user", "\n\nLine1\r\nLine2\n\n")]),
    ("template_text", [("user", "{{ bos_token }} {% if x %} <|im_end|> [INST] <s> </s>")]),
    ("two_users", [("user", "first"), ("user", "second")]),
    ("starts_assistant", [("assistant", "I speak first."), ("user", "ok")]),
    ("unknown_role", [("user", "u"), ("critic", "c")]),
    ("only_system", [("system", "S")]),
    ("empty_conversation", []),
    ("two_systems", [("system", "A"), ("system", "B"), ("user", "u")]),
    ("system_middle", [("user", "u1"), ("assistant", "a1"), ("system", "s2"), ("user", "u2")]),
    ("tool_turns", [("user", "weather?"), ("assistant", "calling"), ("tool", "{\"t\": 21}"), ("tool", "sunny"),
                    ("user", "thanks")]),
    ("tool_last", [("user", "q"), ("tool", "r")]),
    ("long_multi", [("system", "sys"), ("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("assistant", "a2"),
                    ("user", "q3"), ("assistant", "a3"), ("user", "q4")]),
]

# Richer messages for the interpreter comparison (test_jinja_templates.py only: the C API's
# messages have a role and a content string): tool calls with dict and string arguments, tool
# results with ids, content as a list of parts, reasoning, and a tools list. Each is rendered with
# and without tools, add_generation_prompt on and off.
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
            "days": {"type": "integer", "description": "How many days"}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                                                       "tags": {"type": "array", "items": {"type": "string"}}},
                       "required": ["query"]}}},
]

CALL = {"id": "call_abc123456", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}
CALL_STR = {"id": "call_xyz987654", "type": "function",
            "function": {"name": "search", "arguments": "{\"query\": \"jinja\"}"}}

RICH_CONVERSATIONS = [
    ("tool_call", [{"role": "system", "content": "You can call tools."},
                   {"role": "user", "content": "Weather in Paris?"},
                   {"role": "assistant", "content": "", "tool_calls": [CALL]},
                   {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "call_abc123456", "name": "get_weather"},
                   {"role": "assistant", "content": "It is 21 °C."},
                   {"role": "user", "content": "Thanks!"}]),
    ("tool_call_str_args", [{"role": "user", "content": "Search jinja"},
                            {"role": "assistant", "content": None, "tool_calls": [CALL_STR, CALL]},
                            {"role": "tool", "content": "results", "tool_call_id": "call_xyz987654"},
                            {"role": "tool", "content": "sunny", "tool_call_id": "call_abc123456"}]),
    ("content_parts", [{"role": "system", "content": [{"type": "text", "text": "Sys part."}]},
                       {"role": "user", "content": [{"type": "text", "text": "Part one. "},
                                                    {"type": "text", "text": "Part two."}]},
                       {"role": "assistant", "content": [{"type": "text", "text": "Answer."}]},
                       {"role": "user", "content": "plain"}]),
    ("reasoning", [{"role": "user", "content": "2+2?"},
                   {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4", "reasoning_content": "add them"},
                   {"role": "user", "content": "and 3+3?"}]),
]
