"""specdec.SamplingParams: vLLM's names and defaults for the fields specdec implements."""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Optional, Union

from .errors import InvalidArgumentError

# The most top log-probabilities one token may ask for: include/specdec.h's SPECDEC_MAX_TOP_LOGPROBS, which
# is vLLM's default max_logprobs (tests/python/test_logprobs.py checks the two agree).
MAX_LOGPROBS = 20
MAX_N = 128  # SamplingParams.n: most samples per prompt


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
    Types, the seed's range and the two logprob counts' ranges are checked here, at construction; the
    other ranges by the library when the request is submitted (InvalidArgumentError, a ValueError,
    naming the field either way).
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
