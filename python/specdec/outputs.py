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
class CompletionOutput:
    index: int
    text: str
    token_ids: list
    cumulative_logprob: Optional[float] = None
    logprobs: Optional[Any] = None
    finish_reason: Optional[str] = None  # "stop" (EOS or a stop string), "length", "abort"
    stop_reason: Any = None  # the stop string matched, or the EOS id; None otherwise

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    request_id: str
    prompt: Optional[str]
    prompt_token_ids: list
    outputs: list
    finished: bool = True
    metrics: RequestMetrics = field(default_factory=RequestMetrics)
    prompt_logprobs: Optional[Any] = None
