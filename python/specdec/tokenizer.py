"""specdec.Tokenizer: a model directory's tokenizer.json (or a GGUF file's embedded tokenizer: the path
goes to specdec_tokenizer_load as given) through specdec_tokenize / specdec_detokenize,
and its chat template through specdec_chat_apply / specdec_chat_tokenize."""
from __future__ import annotations

import json
import operator
import os
from typing import Iterable, Sequence

from ._ffi import binding
from .errors import InvalidArgumentError, ShutDownError


def _utf8(value, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a str, not {type(value).__name__}")
    return value.encode("utf-8", "surrogatepass")


class _Messages:
    """A conversation as a specdec_chat_message array (and the bytes it points to, kept alive)."""

    def __init__(self, messages):
        b = binding()
        if isinstance(messages, dict) or not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
            raise InvalidArgumentError("messages must be a list of {'role': ..., 'content': ...} dicts")
        self.keep = []
        self.n = len(messages)
        self.arr = b.ffi.new("specdec_chat_message[]", max(self.n, 1))
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or "role" not in m or "content" not in m:
                raise InvalidArgumentError(f"messages[{i}] must be a dict with 'role' and 'content'")
            role = b.ffi.new("char[]", _utf8(m["role"], f"messages[{i}]['role']"))
            content = b.ffi.new("char[]", _utf8(m["content"], f"messages[{i}]['content']"))
            self.keep += [role, content]
            self.arr[i].role = role
            self.arr[i].content = content


class Tokenizer:
    """Encode and decode exactly as the Hugging Face `tokenizers` library does for tokenizer.json."""

    def __init__(self, path: str | os.PathLike):
        b = binding()
        out = b.ffi.new("specdec_tokenizer **")
        b.check(b.lib.specdec_tokenizer_load(os.fsencode(path), out), b.lib.specdec_last_error,
                f"loading the tokenizer of {os.fspath(path)}")
        self._h = out[0]
        self.path = os.fspath(path)

    # ---- handle ---------------------------------------------------------------------------------
    @property
    def handle(self):
        if self._h is None:
            raise ShutDownError("the tokenizer was closed")
        return self._h

    def close(self) -> None:
        if getattr(self, "_h", None) is not None:
            binding().lib.specdec_tokenizer_free(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _check(self, status: int, context: str) -> None:
        # Calls on a (const) tokenizer record their detail per thread: specdec_last_error() (the
        # header; specdec_tokenizer_last_error() is documented the same but returns the handle's own
        # slot, which these calls leave empty), so read that one, the handle's as a fallback.
        b = binding()

        def detail():
            d = b.lib.specdec_last_error()
            return d if b.string(d) else b.lib.specdec_tokenizer_last_error(self.handle)
        b.check(status, detail, context)

    # ---- properties -----------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return int(binding().lib.specdec_tokenizer_vocab_size(self.handle))

    @property
    def bos_token_id(self) -> int | None:
        v = binding().lib.specdec_tokenizer_bos_id(self.handle)
        return None if v < 0 else int(v)

    @property
    def eos_token_id(self) -> int | None:
        v = binding().lib.specdec_tokenizer_eos_id(self.handle)
        return None if v < 0 else int(v)

    # ---- calls that fill a caller's buffer (grown as BUFFER_TOO_SMALL reports) ----------------
    def _ids(self, fn, cap: int, context: str) -> list:
        """fn(ids, capacity, n_ids) -> status; the ids it wrote."""
        b = binding()
        n = b.ffi.new("int32_t *")
        while True:
            ids = b.ffi.new("int32_t[]", cap)
            st = fn(ids, cap, n)
            if st != b.status_values["SPECDEC_ERR_BUFFER_TOO_SMALL"]:
                self._check(st, context)
                return list(b.ffi.unpack(ids, n[0]))
            cap = n[0]

    def _text(self, fn, cap: int, context: str) -> str:
        """fn(text, capacity, len) -> status; the NUL-terminated text it wrote."""
        b = binding()
        length = b.ffi.new("size_t *")
        while True:
            buf = b.ffi.new("char[]", cap)
            st = fn(buf, cap, length)
            if st != b.status_values["SPECDEC_ERR_BUFFER_TOO_SMALL"]:
                self._check(st, context)
                return b.ffi.unpack(buf, length[0]).decode("utf-8", "replace")
            cap = length[0] + 1

    # ---- encode / decode ------------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Ids of `text`; add_special_tokens applies the post-processor (BOS), as `specdec generate` does."""
        lib = binding().lib
        data = _utf8(text, "text")
        special = int(bool(add_special_tokens))
        return self._ids(lambda ids, cap, n: lib.specdec_tokenize(self.handle, data, len(data), special, ids, cap, n),
                         max(16, len(data) + 8), "encoding text")

    def decode(self, token_ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        b = binding()
        ids = token_id_array(token_ids, "token_ids")
        n = len(ids) if ids is not None else 0
        skip = int(bool(skip_special_tokens))
        return self._text(lambda buf, cap, length: b.lib.specdec_detokenize(
            self.handle, ids if n else b.ffi.NULL, n, skip, buf, cap, length), 64 + 16 * n, "decoding ids")

    def __call__(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.encode(text, add_special_tokens)

    # ---- chat -----------------------------------------------------------------------------------
    def chat_template_name(self) -> str:
        """The family specdec renders this tokenizer's chat template as ("plain" without one)."""
        b = binding()
        name = b.ffi.new("char **")
        self._check(b.lib.specdec_chat_template_detect(self.handle, name), "detecting the chat template")
        return b.string(name[0])

    def apply_chat_template(self, messages, tokenize: bool = False, add_generation_prompt: bool = True,
                            chat_template: str | None = None, tools=None, chat_template_kwargs=None,
                            continue_final_message: bool = False):
        """As transformers' apply_chat_template: the prompt text, or its ids with tokenize=True.
        chat_template forces a family by name ("llama3", "chatml", ..., "plain"). Messages in the
        OpenAI format (tool_calls, tool results, content null or a list of parts, reasoning), tools
        (a list of {"type": "function", "function": {...}}) and chat_template_kwargs (extra template
        variables, e.g. {"enable_thinking": False}) go through specdec_chat_apply_json, which
        normalises the messages as vLLM does. continue_final_message (transformers' and vLLM's; with
        add_generation_prompt False, else InvalidArgumentError): the text ends right after the last
        message's content, stripped of white space (its last occurrence in the rendering; InvalidArgumentError
        when the template does not write it), so a model continues that message."""
        b = binding()
        if continue_final_message:
            return self._continue_final(messages, tokenize, add_generation_prompt, chat_template, tools,
                                        chat_template_kwargs)
        if tools is not None or chat_template_kwargs is not None or not _plain_messages(messages):
            return self._apply_json(messages, tokenize, add_generation_prompt, chat_template, tools, chat_template_kwargs)
        msgs = _Messages(messages)
        tname = b.ffi.new("char[]", chat_template.encode()) if chat_template else b.ffi.NULL
        gen = int(bool(add_generation_prompt))
        lib = b.lib
        if tokenize:
            return self._ids(lambda ids, cap, n: lib.specdec_chat_tokenize(self.handle, tname, msgs.arr, msgs.n, gen,
                                                                          ids, cap, n),
                             256, "applying the chat template")
        return self._text(lambda buf, cap, length: lib.specdec_chat_apply(self.handle, tname, msgs.arr, msgs.n, gen,
                                                                        buf, cap, length),
                          1024, "applying the chat template")

    def _continue_final(self, messages, tokenize, add_generation_prompt, chat_template, tools, kwargs):
        if add_generation_prompt:
            raise InvalidArgumentError("continue_final_message and add_generation_prompt are not compatible: set "
                                       "add_generation_prompt=False to continue the final message")
        if isinstance(messages, dict) or not isinstance(messages, Sequence) or not messages or \
                not isinstance(messages[-1], dict):
            raise InvalidArgumentError("messages must be a non-empty list of message dicts")
        content = messages[-1].get("content")
        if isinstance(content, (list, tuple)):  # vLLM joins the text parts with "\n" before rendering
            content = "\n".join(p if isinstance(p, str) else (p.get("text") or "") for p in content
                                if isinstance(p, str) or (isinstance(p, dict) and p.get("text") is not None))
        final = (content or "").strip()
        text = self._apply_json(messages, False, False, chat_template, tools, kwargs)
        if final not in text:
            raise InvalidArgumentError("continue_final_message is set but the final message does not appear in the "
                                       "chat after applying the chat template")
        text = text[:text.rindex(final) + len(final)]
        if not tokenize:
            return text
        b = binding()
        tname = b.ffi.new("char[]", chat_template.encode()) if chat_template else b.ffi.NULL
        special = b.ffi.new("int *")
        self._check(b.lib.specdec_chat_add_special(self.handle, tname, special), "applying the chat template")
        return self.encode(text, bool(special[0]))

    def _apply_json(self, messages, tokenize, add_generation_prompt, chat_template, tools, kwargs):
        b = binding()
        if isinstance(messages, dict) or not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
            raise InvalidArgumentError("messages must be a list of message dicts")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise InvalidArgumentError("chat_template_kwargs must be a dict")
        try:
            texts = [json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass") if v is not None else None
                     for v in (list(messages), None if tools is None else list(tools), kwargs)]
        except (TypeError, ValueError) as e:
            raise InvalidArgumentError(f"messages, tools and chat_template_kwargs must be JSON values: {e}") from None
        m, t, k = (b.ffi.new("char[]", x) if x is not None else b.ffi.NULL for x in texts)
        tname = b.ffi.new("char[]", chat_template.encode()) if chat_template else b.ffi.NULL
        gen = int(bool(add_generation_prompt))
        lib = b.lib
        text = self._text(lambda buf, cap, length: lib.specdec_chat_apply_json(self.handle, tname, m, t, k, gen, buf, cap,
                                                                             length),
                          1024, "applying the chat template")
        if not tokenize:
            return text
        special = b.ffi.new("int *")
        self._check(lib.specdec_chat_add_special(self.handle, tname, special), "applying the chat template")
        return self.encode(text, bool(special[0]))


def _plain_messages(messages) -> bool:
    """Every message is exactly {"role": str, "content": str} (the struct API renders it)."""
    try:
        return all(isinstance(m, dict) and set(m) == {"role", "content"} and isinstance(m["content"], str)
                   for m in messages)
    except TypeError:
        return False


def token_id_array(token_ids, what: str):
    """An int32_t[] of the ids (None when empty); InvalidArgumentError for non-integers or values
    outside int32 (the library checks the vocabulary range)."""
    b = binding()
    try:
        ids = [operator.index(t) for t in token_ids]
    except TypeError:
        raise InvalidArgumentError(f"{what} must be a sequence of integer token ids") from None
    for i, t in enumerate(ids):
        if not -2**31 <= t < 2**31:
            raise InvalidArgumentError(f"{what}[{i}] = {t} is not a token id (outside int32)")
    if not ids:
        return None
    return b.ffi.new("int32_t[]", ids)
