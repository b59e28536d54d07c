"""Results, shaped as vLLM's RequestOutput / CompletionOutput."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


class RequestMetrics(dict):
    """The request's speculative statistics, under the names of `specdec generate --json`'s "stats"
    (n_prompt, n_generated, n_rounds, n_drafted, n_accepted, acceptance_rate, tokens_per_round,
    t_prefill_s, ..., tokens_per_second, stop_reason, backend, ...): every field of the C ABI's
    specdec_stats. A dict whose keys are also attributes (metrics.acceptance_rate)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass
class Logprob:
    """One token's log-probability, as vLLM's Logprob: logprob (natural log, <= 0), rank (1 + the number
    of vocabulary ids more likely, so 1 = the most likely; tied ids share a rank) and decoded_token (the
    token's text decoded alone, special tokens included, as vLLM's tokenizer.decode([id]))."""

    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


@dataclass
class CompletionOutput:
    """One generated sequence. token_ids: every generated token (with a stop string, the token that
    completed it too; text is cut before the stop string). logprobs (SamplingParams.logprobs = N; else
    None): one dict per generated token, {token id: Logprob}, the sampled token first, then the N most
    likely in rank order (N or N + 1 entries: the sampled token may be among the N), as vLLM's
    SampleLogprobs; cumulative_logprob: the sum of the sampled tokens' logprobs (None without logprobs)."""

    index: int
    text: str
    token_ids: list
    cumulative_logprob: Optional[float] = None
    logprobs: Optional[list] = None
    finish_reason: Optional[str] = None  # "stop" (EOS, a stop string or stop token id), "length", "abort"
    stop_reason: Any = None  # vLLM's: the stop string matched or the stop_token_ids id; None otherwise (EOS too)

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    """One request's result, as vLLM's RequestOutput. prompt_logprobs (SamplingParams.prompt_logprobs = N;
    else None): vLLM's PromptLogprobs, one entry per prompt token: None for the first (no distribution
    precedes it), then {token id: Logprob}, the prompt token first, then the N most likely ids at that
    position in rank order (N or N + 1 entries), the same record as CompletionOutput.logprobs'.
    num_cached_tokens (vLLM's field): the prompt tokens whose KV came from the prefix cache
    (LLM(enable_prefix_caching=...); specdec_stats.n_cached_prompt, also metrics.n_cached_prompt)."""

    request_id: str
    prompt: Optional[str]
    prompt_token_ids: list
    outputs: list
    finished: bool = True
    metrics: RequestMetrics = field(default_factory=RequestMetrics)
    prompt_logprobs: Optional[Any] = None
    num_cached_tokens: int = 0
