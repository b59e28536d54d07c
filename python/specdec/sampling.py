"""specdec.SamplingParams: vLLM's names and defaults for the fields specdec implements, and
specdec.StructuredOutputsParams (alias GuidedDecodingParams): vLLM's structured-output constraint."""
from __future__ import annotations

import enum
import json as _json
import numbers
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Optional, Union

from .errors import InvalidArgumentError, UnsupportedError

# The most top log-probabilities one token may ask for: include/specdec.h's SPECDEC_MAX_TOP_LOGPROBS, which
# is vLLM's default max_logprobs (tests/python/test_logprobs.py checks the two agree).
MAX_LOGPROBS = 20
MAX_N = 128  # SamplingParams.n: most samples per prompt
# The logits processors' limits: include/specdec.h's SPECDEC_MAX_LOGIT_BIAS, SPECDEC_MAX_STOP_TOKEN_IDS, the
# bias range and the penalties' (checked against the header by tests/python/test_logits_proc.py).
MAX_LOGIT_BIAS = 1024
MAX_STOP_TOKEN_IDS = 64
LOGIT_BIAS_RANGE = (-100.0, 100.0)
PENALTY_RANGE = (-2.0, 2.0)  # presence_penalty, frequency_penalty
MAX_REPETITION_PENALTY = 100.0
# vLLM's masks (libspecdec 0.5.2): SamplingParams field -> the specdec_generate_params field that carries
# it, and their limits (include/specdec.h's SPECDEC_MAX_ALLOWED_TOKEN_IDS, SPECDEC_MAX_BAD_WORDS).
MAX_GRAMMAR_AFTER_TOKENS = 32  # SPECDEC_MAX_GRAMMAR_AFTER_TOKENS
MASK_FIELDS = {"allowed_token_ids": "allowed_token_ids", "bad_words": "bad_words_ids"}
MAX_ALLOWED_TOKEN_IDS = 1 << 20
MAX_BAD_WORDS = 128


class RequestOutputKind(enum.IntEnum):
    """vLLM's RequestOutputKind (SamplingParams.output_kind): what AsyncLLM.generate's outputs hold. LLM's
    calls return final outputs whatever it says."""
    CUMULATIVE = 0  # everything so far
    DELTA = 1  # what is new since the previous output
    FINAL_ONLY = 2  # only the final output


# The processor fields: name -> the value that leaves them off (the C fields have the same names).
PROCESSOR_DEFAULTS = {"logit_bias": None, "min_tokens": 0, "stop_token_ids": None, "presence_penalty": 0.0,
                      "frequency_penalty": 0.0, "repetition_penalty": 1.0}


def _real(name, v):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise InvalidArgumentError(f"SamplingParams.{name} must be a number, not {type(v).__name__}")
    return float(v)


def _integer(name, v, allow_none=False):
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise InvalidArgumentError(f"SamplingParams.{name} must be an int{' or None' if allow_none else ''}, "
                                   f"not {type(v).__name__}")
    return int(v)


def _token_id(name, v):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 <= v < 2**31:
        raise InvalidArgumentError(f"SamplingParams.{name}: {v!r} is not a token id (an int >= 0)")
    return int(v)


def _in_range(name, v, lo, hi):
    """v as a float, lo <= v <= hi (NaN is outside)."""
    v = _real(name, v)
    if not lo <= v <= hi:
        raise InvalidArgumentError(f"SamplingParams.{name} = {v} is outside [{lo:g}, {hi:g}]")
    return v


def _logit_bias(v):
    if v is None:
        return None
    if not isinstance(v, Mapping):
        raise InvalidArgumentError(f"SamplingParams.logit_bias must be None or a dict {{token id: bias}}, "
                                   f"not {type(v).__name__}")
    if len(v) > MAX_LOGIT_BIAS:
        raise InvalidArgumentError(f"SamplingParams.logit_bias has {len(v)} entries (at most {MAX_LOGIT_BIAS})")
    return {_token_id("logit_bias", t): _in_range(f"logit_bias[{t!r}]", b, *LOGIT_BIAS_RANGE) for t, b in v.items()}


def _id_list(name, v, lo, hi):
    """None, or a list of lo..hi token ids (a tuple too)."""
    if v is None:
        return None
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)):
        raise InvalidArgumentError(f"SamplingParams.{name} must be None or a list of token ids, not {type(v).__name__}")
    if not lo <= len(v) <= hi:
        raise InvalidArgumentError(f"SamplingParams.{name} has {len(v)} ids ({lo}..{hi}; None = off)")
    return [_token_id(name, t) for t in v]


def _bad_words(v):
    if v is None:
        return None
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)):
        raise InvalidArgumentError(f"SamplingParams.bad_words must be None or a list of str, not {type(v).__name__}")
    if len(v) > MAX_BAD_WORDS:
        raise InvalidArgumentError(f"SamplingParams.bad_words has {len(v)} words (at most {MAX_BAD_WORDS})")
    for i, w in enumerate(v):
        if not isinstance(w, str) or not w.lstrip(" \t\n\v\f\r"):
            raise InvalidArgumentError(f"SamplingParams.bad_words[{i}] = {w!r} must be a str, not empty or only "
                                       "white space")
    return list(v)


# The constraint fields of StructuredOutputsParams (vLLM's; exactly one is set) and the kinds of
# include/specdec.h's specdec_grammar_kind that specdec compiles them to (None: not supported).
CONSTRAINTS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")
_KINDS = {"json": "SPECDEC_GRAMMAR_JSON_SCHEMA", "regex": "SPECDEC_GRAMMAR_REGEX", "choice": "SPECDEC_GRAMMAR_CHOICE",
          "json_object": "SPECDEC_GRAMMAR_JSON_OBJECT", "grammar": "SPECDEC_GRAMMAR_GBNF"}
# The backends a request may name: specdec has one, its own compiler (vLLM's V1 engine likewise refuses a
# request-level backend other than the engine's).
_BACKENDS = (None, "auto", "specdec")


@dataclass
class StructuredOutputsParams:
    """Constrain the output to a grammar: vLLM's StructuredOutputsParams (vLLM >= 0.10.2, passed as
    SamplingParams(structured_outputs=...)), also exported as GuidedDecodingParams (vLLM <= 0.10, passed
    as SamplingParams(guided_decoding=...)); libspecdec's specdec_grammar_compile (docs/STRUCTURED.md).

    Exactly one constraint: json (a JSON Schema as a dict, serialised with json.dumps, or as JSON text),
    regex (a str the whole output matches, Python re.fullmatch semantics), choice (a list of str: the
    output is one of them), json_object=True (any JSON object), grammar (a str: a GBNF / xgrammar EBNF
    grammar, llama.cpp's "root ::= ..."; Lark is refused by the library). structural_tag and
    whitespace_pattern raise UnsupportedError (libspecdec compiles neither). backend: None,
    "auto" or "specdec" (other backends raise UnsupportedError). disable_fallback,
    disable_any_whitespace and disable_additional_properties are accepted and change nothing: specdec
    has one backend, and its JSON whitespace and extra-property rules are fixed (docs/STRUCTURED.md). Types and the number of constraints
    are checked here (InvalidArgumentError); the spec itself by the library when a request using it is
    made (InvalidArgumentError for a malformed one, UnsupportedError for a feature specdec lacks, with
    the library's message naming what and where).
    """

    json: Union[None, str, dict] = None
    regex: Optional[str] = None
    choice: Optional[list] = None
    grammar: Optional[str] = None
    json_object: Optional[bool] = None
    disable_fallback: bool = False
    disable_any_whitespace: bool = False
    disable_additional_properties: bool = False
    whitespace_pattern: Optional[str] = None
    structural_tag: Optional[str] = None
    backend: Optional[str] = None

    def __post_init__(self):
        name = type(self).__name__
        for f in ("disable_fallback", "disable_any_whitespace", "disable_additional_properties"):
            if not isinstance(getattr(self, f), bool):
                raise InvalidArgumentError(f"{name}.{f} must be a bool")
        if self.json_object is not None and not isinstance(self.json_object, bool):
            raise InvalidArgumentError(f"{name}.json_object must be True, False or None")
        set_ = [c for c in CONSTRAINTS if getattr(self, c) is not None and getattr(self, c) is not False]
        if len(set_) != 1:
            raise InvalidArgumentError(f"{name}: exactly one of {', '.join(CONSTRAINTS)} must be set, "
                                       f"not {' and '.join(set_) if set_ else 'none'}")
        for f in ("structural_tag", "whitespace_pattern"):
            if getattr(self, f) is not None:
                raise UnsupportedError(f"{name}.{f} is not supported by specdec (it compiles json, regex, choice, "
                                       "grammar and json_object constraints only)")
        if self.backend not in _BACKENDS:
            raise UnsupportedError(f"{name}.backend = {self.backend!r}: specdec compiles grammars itself "
                                   "(None, 'auto' or 'specdec')")
        if self.json is not None and not isinstance(self.json, (str, dict)):
            raise InvalidArgumentError(f"{name}.json must be a JSON Schema as a dict or a str, "
                                       f"not {type(self.json).__name__}")
        for f in ("regex", "grammar"):
            if getattr(self, f) is not None and not isinstance(getattr(self, f), str):
                raise InvalidArgumentError(f"{name}.{f} must be a str, not {type(getattr(self, f)).__name__}")
        if self.choice is not None and (isinstance(self.choice, (str, bytes)) or
                                        not isinstance(self.choice, (list, tuple)) or
                                        not all(isinstance(c, str) for c in self.choice)):
            raise InvalidArgumentError(f"{name}.choice must be a list of str")

    def grammar_spec(self) -> tuple:
        """(specdec_grammar_kind name, spec bytes or None): what specdec_grammar_compile is given, and the
        LLM's cache key."""
        if self.json_object:
            return _KINDS["json_object"], None
        if self.regex is not None:
            return _KINDS["regex"], _utf8(self.regex, "regex")
        if self.choice is not None:
            return _KINDS["choice"], _utf8(_json.dumps(list(self.choice), ensure_ascii=False), "choice")
        if self.grammar is not None:
            return _KINDS["grammar"], _utf8(self.grammar, "grammar")
        spec = self.json if isinstance(self.json, str) else _json.dumps(self.json, ensure_ascii=False)
        return _KINDS["json"], _utf8(spec, "json")


GuidedDecodingParams = StructuredOutputsParams


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgumentError(f"StructuredOutputsParams.{what} is not valid Unicode: {e}") from None


def _structured(v, name):
    if v is None or isinstance(v, StructuredOutputsParams):
        return v
    if isinstance(v, Mapping):  # the server's JSON shape, {"regex": ...}
        try:
            return StructuredOutputsParams(**v)
        except TypeError as e:
            raise InvalidArgumentError(f"SamplingParams.{name}: {e}") from None
    raise InvalidArgumentError(f"SamplingParams.{name} must be a StructuredOutputsParams (GuidedDecodingParams), "
                               f"a dict of its fields or None, not {type(v).__name__}")


@dataclass
class SamplingParams:
    """How one request samples. Defaults follow vLLM (temperature 1, no top-p/top-k/min-p, 16 tokens).

    temperature: 0 = greedy. top_p in (0, 1]; top_k: 0 or -1 = off; min_p in [0, 1].
    max_tokens: most tokens to generate; None = up to the end of the context.
    seed: None = a fresh random seed per request (or drawn from LLM(seed=...)); an int in [0, 2**64)
    reproduces the run (the same as `specdec generate --seed`).
    stop: strings that end generation; the text is cut before the first one found (as vLLM and
    OpenAI do); token_ids keep every generated token (the one completing the stop included).
    ignore_eos: keep going past the model's EOS ids.
    logprobs: None (default) = none; N in 0..20 = every generated token's log-probability plus the N
    most likely tokens' (vLLM's meaning; CompletionOutput.logprobs and .cumulative_logprob). They are
    the target model's raw distribution (log_softmax of its logits before temperature, top-k, top-p,
    min-p: vLLM's default logprobs_mode "raw_logprobs"), whatever the drafter.
    prompt_logprobs: None (default) = none; N in 0..20 = RequestOutput.prompt_logprobs: None for the first
    prompt token, then for every other prompt token its log-probability given the tokens before it plus
    the N most likely tokens' there (vLLM's meaning; the same raw distribution as logprobs, from the
    prefill). vLLM's -1 (the whole vocabulary) is not offered.
    n: sequences sampled per prompt (vLLM's), 1..128; RequestOutput.outputs then holds n CompletionOutputs
    (index 0..n-1). They share the seed and differ by their random stream (specdec_generate_params.
    sequence_id = the index, as the server's "n"), so sample 0 is what n = 1 gives; the scheduler's
    prefix cache lets the later samples reuse the prompt's KV. prompt_logprobs are computed once.
    Logits processors (vLLM's and OpenAI's fields; libspecdec 0.5's, docs/SAMPLING.md "Logits processors"),
    applied to the target's logits before temperature and the filters, in this order: logit_bias and the
    min_tokens mask, repetition_penalty, then frequency_penalty and presence_penalty. Speculation stays
    exact: greedy output equals plain decoding's with the same processors.
    presence_penalty, frequency_penalty in [-2, 2]: subtracted from the logit of every token the output
    holds (once / once per occurrence); 0 = off. repetition_penalty in (0, 100]: the logit of every token
    of the prompt or the output is divided by it when positive, multiplied when not; 1 = off.
    logit_bias: None or {token id: bias in [-100, 100]} (at most 1024 ids), added to the logits.
    min_tokens >= 0 (<= max_tokens): the EOS ids and stop_token_ids cannot be generated before that many
    tokens are. stop_token_ids: None or a list of at most 64 ids; generation stops after one of them
    (finish_reason "stop", CompletionOutput.stop_reason = the id; the token stays in token_ids, its text is
    left out of text unless include_stop_str_in_output, as vLLM's detokenizer does).
    A libspecdec older than 0.5 raises UnsupportedError for any of them set (the defaults work).
    vLLM's masks (libspecdec 0.5.2, before the processors above): allowed_token_ids: None or a non-empty list
    of ids, the only ones that can be generated (EOS too unless listed). bad_words: None or a list of at most
    128 words, tokenized as vLLM does (the word without its leading white space, and " " + it when that
    starts with another id and is as long; specdec_tokenize_bad_words); a word's last id is banned whenever
    the output ends with the ids before it (a one-id word: always). Older libraries: UnsupportedError.
    include_stop_str_in_output: False (default) cuts text before the stop string (and leaves a stop id's text
    out); True keeps the stop string (the text ends after it) and a stop id's text (vLLM's).
    structured_outputs (vLLM >= 0.10.2's name) or guided_decoding (vLLM <= 0.10's): a
    StructuredOutputsParams (GuidedDecodingParams is the same class) or a dict of its fields; every
    generated token then continues a match of its constraint and the output ends (EOS or a stop id)
    only where a whole match is complete (libspecdec 0.5.1's specdec_generate_params.grammar,
    docs/STRUCTURED.md). Setting both to different constraints raises InvalidArgumentError.
    structured_outputs_after (specdec's; libspecdec 0.5.4's grammar_after_tokens): None, or a list of 1..32
    token ids, with a constraint: the constraint acts only after the output first holds that id sequence
    (e.g. the id of "</think>": vLLM's structured outputs with a reasoning parser constrain the answer, not
    the thinking); before it the output is unconstrained. Without a constraint: InvalidArgumentError; an
    older library: UnsupportedError.
    output_kind (vLLM's RequestOutputKind): what AsyncLLM.generate yields, CUMULATIVE (default: the outputs
    so far), DELTA (what is new) or FINAL_ONLY; LLM's calls ignore it (they return final outputs).
    Types, the seed's range, the two logprob counts' ranges and the processors' ranges are checked here,
    at construction; the other ranges (token ids against the vocabulary, temperature, top_p, ...) by the
    library when the request is submitted (InvalidArgumentError, a ValueError, naming the field either way).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    max_tokens: Optional[int] = 16
    seed: Optional[int] = None
    stop: Union[None, str, list] = None
    ignore_eos: bool = False
    logprobs: Optional[int] = None
    prompt_logprobs: Optional[int] = None
    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: Optional[dict] = None
    min_tokens: int = 0
    stop_token_ids: Optional[list] = None
    allowed_token_ids: Optional[list] = None
    bad_words: Optional[list] = None
    include_stop_str_in_output: bool = False
    structured_outputs: Optional[StructuredOutputsParams] = None
    guided_decoding: Optional[StructuredOutputsParams] = None
    structured_outputs_after: Optional[list] = None
    output_kind: RequestOutputKind = RequestOutputKind.CUMULATIVE
    stop_list: list = field(init=False, repr=False, default_factory=list)

    def __post_init__(self):
        self.temperature = _real("temperature", self.temperature)
        self.top_p = _real("top_p", self.top_p)
        self.min_p = _real("min_p", self.min_p)
        self.top_k = _integer("top_k", self.top_k)
        if self.top_k == -1:  # vLLM's "off"
            self.top_k = 0
        self.max_tokens = _integer("max_tokens", self.max_tokens, allow_none=True)
        self.seed = _integer("seed", self.seed, allow_none=True)
        if self.seed is not None and not 0 <= self.seed < 2**64:
            raise InvalidArgumentError(f"SamplingParams.seed = {self.seed} is outside [0, 2**64)")
        if not isinstance(self.ignore_eos, bool):
            raise InvalidArgumentError("SamplingParams.ignore_eos must be a bool")
        stop = [] if self.stop is None else [self.stop] if isinstance(self.stop, str) else self.stop
        if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) for s in stop):
            raise InvalidArgumentError("SamplingParams.stop must be None, a str or a list of str")
        self.stop_list = list(stop)
        self.logprobs = _integer("logprobs", self.logprobs, allow_none=True)
        if self.logprobs is not None and not 0 <= self.logprobs <= MAX_LOGPROBS:
            raise InvalidArgumentError(f"SamplingParams.logprobs = {self.logprobs} is outside 0..{MAX_LOGPROBS} "
                                       "(None = no log-probabilities)")
        self.n = _integer("n", self.n)
        if not 1 <= self.n <= MAX_N:
            raise InvalidArgumentError(f"SamplingParams.n = {self.n} is outside 1..{MAX_N}")
        self.prompt_logprobs = _integer("prompt_logprobs", self.prompt_logprobs, allow_none=True)
        if self.prompt_logprobs is not None and not 0 <= self.prompt_logprobs <= MAX_LOGPROBS:
            raise InvalidArgumentError(f"SamplingParams.prompt_logprobs = {self.prompt_logprobs} is outside "
                                       f"0..{MAX_LOGPROBS} (None = no prompt log-probabilities)")
        self.presence_penalty = _in_range("presence_penalty", self.presence_penalty, *PENALTY_RANGE)
        self.frequency_penalty = _in_range("frequency_penalty", self.frequency_penalty, *PENALTY_RANGE)
        self.repetition_penalty = _real("repetition_penalty", self.repetition_penalty)
        if not 0 < self.repetition_penalty <= MAX_REPETITION_PENALTY:
            raise InvalidArgumentError(f"SamplingParams.repetition_penalty = {self.repetition_penalty} is outside "
                                       f"(0, {MAX_REPETITION_PENALTY:g}] (1 = off)")
        self.logit_bias = _logit_bias(self.logit_bias)
        self.stop_token_ids = _id_list("stop_token_ids", self.stop_token_ids, 0, MAX_STOP_TOKEN_IDS)
        # vLLM refuses an empty allowed_token_ids
        self.allowed_token_ids = _id_list("allowed_token_ids", self.allowed_token_ids, 1, MAX_ALLOWED_TOKEN_IDS)
        self.bad_words = _bad_words(self.bad_words)
        if not isinstance(self.include_stop_str_in_output, bool):
            raise InvalidArgumentError("SamplingParams.include_stop_str_in_output must be a bool")
        self.min_tokens = _integer("min_tokens", self.min_tokens)
        if not 0 <= self.min_tokens < 2**31:
            raise InvalidArgumentError(f"SamplingParams.min_tokens = {self.min_tokens} must be >= 0")
        if self.min_tokens and self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise InvalidArgumentError(f"SamplingParams.min_tokens = {self.min_tokens} is more than max_tokens = "
                                       f"{self.max_tokens}")
        self.structured_outputs = _structured(self.structured_outputs, "structured_outputs")
        self.guided_decoding = _structured(self.guided_decoding, "guided_decoding")
        if self.structured_outputs is not None and self.guided_decoding is not None and \
                self.structured_outputs != self.guided_decoding:
            raise InvalidArgumentError("SamplingParams: structured_outputs and guided_decoding are two names for one "
                                       "constraint; set one of them")
        if isinstance(self.output_kind, bool) or not isinstance(self.output_kind, int) or \
                self.output_kind not in tuple(RequestOutputKind):
            raise InvalidArgumentError(f"SamplingParams.output_kind = {self.output_kind!r}: a RequestOutputKind "
                                       "(CUMULATIVE, DELTA, FINAL_ONLY)")
        self.output_kind = RequestOutputKind(self.output_kind)
        self.structured_outputs_after = _id_list("structured_outputs_after", self.structured_outputs_after, 1,
                                                 MAX_GRAMMAR_AFTER_TOKENS)
        if self.structured_outputs_after is not None and self.constraint is None:
            raise InvalidArgumentError("SamplingParams.structured_outputs_after needs structured_outputs (or "
                                       "guided_decoding): it says when the constraint starts")

    @property
    def constraint(self) -> Optional[StructuredOutputsParams]:
        """The structured-output constraint, from structured_outputs or guided_decoding (None: none)."""
        return self.structured_outputs if self.structured_outputs is not None else self.guided_decoding

    def masks_set(self) -> list:
        """vLLM's masks that are on (allowed_token_ids given, bad_words not empty)."""
        return [k for k in MASK_FIELDS if getattr(self, k)]

    def processors_set(self) -> list:
        """The logits-processor fields that are not off (an empty logit_bias / stop_token_ids is off)."""
        return [k for k, off in PROCESSOR_DEFAULTS.items()
                if (bool(getattr(self, k)) if off is None else getattr(self, k) != off)]
