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
