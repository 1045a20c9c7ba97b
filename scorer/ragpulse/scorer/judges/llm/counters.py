"""Counters of the LLM judge, as a plain object for self-telemetry."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LLMJudgeStats"]


@dataclass
class LLMJudgeStats:
    """Monotonic counters since the judge was built. Loop-confined: mutated only on the judge's
    event loop; read a consistent copy with :meth:`as_dict`."""

    requests: int = 0
    """HTTP requests sent (every attempt, repairs included)."""
    completions: int = 0
    """Requests answered with a completion (what is billed)."""
    retries: int = 0
    """Attempts after a retryable error."""
    rate_limited_429: int = 0
    timeouts: int = 0
    repairs: int = 0
    """Second requests asking the model to fix an unusable reply."""
    refusals: int = 0
    """Refused calls: ``message.refusal``, ``finish_reason: content_filter``, Azure's 400
    ``content_filter``."""
    prompt_truncated: int = 0
    """Replies whose ``usage.prompt_tokens`` shows the server cut the prompt short."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    budget_skipped_calls: int = 0
    budget_skipped_findings: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    errors_by_reason: Counter[str] = field(default_factory=Counter)
    """Findings without a value, by reason (``judge_timeout``, ``rate_limited``, ...)."""

    def as_dict(self) -> dict[str, Any]:
        """A snapshot: plain ints and a plain dict, safe to serialize or hand to another thread."""
        out: dict[str, Any] = {k: v for k, v in vars(self).items() if k != "errors_by_reason"}
        out["errors_by_reason"] = dict(self.errors_by_reason)
        return out
