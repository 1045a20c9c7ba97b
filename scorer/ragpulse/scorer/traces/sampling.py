"""Deterministic trace sampling: which assembled traces get judged.

Judging costs model time, so only a fraction of traffic is scored. The decision is a pure
function of the trace id (a salted BLAKE2b hash compared with the rate), so every scorer replica,
a replay after a crash, and a re-run all pick the same traces, and no process state (such as
``PYTHONHASHSEED``) is involved. Rules force a trace in regardless of the hash: error status,
negative user feedback, and configurable attribute matchers. The rate actually applied (the
trace's inclusion probability: the service rate, or 1.0 when a rule forced it in) is returned so
it can be stored on every row and aggregates can be reweighted (Horvitz-Thompson: weight = 1/rate).
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .extract import Extraction
from .span import Span

__all__ = ["AttributeRule", "Sampler", "SamplingDecision", "SamplingSettings", "hash_fraction"]

_TWO_64 = float(1 << 64)


def hash_fraction(trace_id: str, salt: str = "") -> float:
    """A uniform number in [0, 1) derived from the salt and the (case-insensitive) trace id."""
    digest = hashlib.blake2b(
        trace_id.lower().encode("ascii", "replace"), digest_size=8, key=salt.encode()[:64]
    ).digest()
    return int.from_bytes(digest, "big") / _TWO_64


class AttributeRule(BaseModel):
    """Always score traces in which some span (or its resource) has ``attribute``, optionally
    equal to ``equals`` or matching the regular expression ``matches`` (``re.search``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field("", description="counter label; defaults to the attribute name")
    attribute: str = Field(min_length=1)
    equals: str | int | float | bool | None = None
    matches: str | None = None

    @field_validator("matches")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"matches: invalid regular expression {v!r}: {exc}") from None
        return v

    @model_validator(mode="after")
    def _one_condition(self) -> AttributeRule:
        if self.equals is not None and self.matches is not None:
            raise ValueError("give equals or matches, not both")
        return self

    @property
    def label(self) -> str:
        return self.name or self.attribute

    def test(self, value: Any) -> bool:
        if value is None:
            return False
        if self.equals is not None:
            if isinstance(self.equals, str):
                return isinstance(value, str) and value == self.equals
            return value == self.equals and type(value) is not str
        if self.matches is not None:
            return isinstance(value, str) and re.search(self.matches, value) is not None
        return True


class SamplingSettings(BaseModel):
    """Who gets judged. Nested in the scorer settings (``RAGPULSE_SAMPLING__DEFAULT_RATE=0.1``,
    ``RAGPULSE_SAMPLING__SERVICE_RATES='{"checkout-*": 0.5}'``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    salt: str = Field(
        "ragpulse",
        max_length=64,
        description="changing it draws an independent sample (and decorrelates from head sampling)",
    )
    default_rate: float = Field(1.0, ge=0.0, le=1.0, description="share of traces judged")
    service_rates: dict[str, float] = Field(
        default_factory=dict,
        description="per service.name: exact names, then glob patterns in order; else default_rate",
    )
    always_on_error: bool = Field(True, description="judge every trace with a span in ERROR status")
    always_on_negative_feedback: bool = Field(
        True, description="judge every trace with negative feedback"
    )
    always_rules: tuple[AttributeRule, ...] = Field(
        default=(), description="attribute matchers that force judging"
    )

    @field_validator("service_rates")
    @classmethod
    def _rates(cls, v: dict[str, float]) -> dict[str, float]:
        for service, rate in v.items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"service_rates[{service!r}] = {rate}: a rate is within [0, 1]")
        return v


@dataclass(frozen=True, slots=True)
class SamplingDecision:
    """``keep``: judge it. ``rate``: its inclusion probability (store it on the row).
    ``rule``: what forced it in (``error``, ``negative_feedback``, a rule label) or ``None``."""

    keep: bool
    rate: float
    rule: str | None = None


class Sampler:
    """Applies :class:`SamplingSettings`. Pure decisions plus counters.

    Not thread-safe (plain counters and a lookup cache): call from one thread or event loop.
    Never blocks, never raises.
    """

    _CACHE_MAX = 4096

    def __init__(self, settings: SamplingSettings | None = None) -> None:
        self.settings = settings or SamplingSettings()
        self._exact = {k: v for k, v in self.settings.service_rates.items() if not _is_glob(k)}
        self._globs = [(k, v) for k, v in self.settings.service_rates.items() if _is_glob(k)]
        self._cache: dict[str, float] = {}
        self._kept = 0
        self._dropped = 0
        self._forced: dict[str, int] = {}

    def stats(self) -> dict[str, Any]:
        """``traces_sampled`` (kept), ``traces_unsampled`` and ``traces_forced`` per rule."""
        return {
            "traces_sampled": self._kept,
            "traces_unsampled": self._dropped,
            "traces_forced": dict(self._forced),
        }

    def rate_for(self, service: str | None) -> float:
        service = service or ""
        rate = self._exact.get(service)
        if rate is not None:
            return rate
        rate = self._cache.get(service)
        if rate is None:
            rate = next(
                (r for pat, r in self._globs if fnmatch.fnmatchcase(service, pat)),
                self.settings.default_rate,
            )
            if len(self._cache) >= self._CACHE_MAX:
                # services are few; a flood of distinct names must not grow memory
                self._cache.clear()
            self._cache[service] = rate
        return rate

    def decide(self, extraction: Extraction, spans: Sequence[Span] = ()) -> SamplingDecision:
        """Decide for an extracted trace; ``spans`` are needed only for attribute rules."""
        m = extraction.meta
        return self.decide_for(
            m.trace_id or extraction.trace_id,
            m.service,
            error=m.error,
            negative_feedback=m.negative_feedback,
            spans=spans,
        )

    def decide_for(
        self,
        trace_id: str,
        service: str | None,
        *,
        error: bool = False,
        negative_feedback: bool = False,
        spans: Sequence[Span] = (),
    ) -> SamplingDecision:
        s = self.settings
        rule: str | None = None
        if error and s.always_on_error:
            rule = "error"
        elif negative_feedback and s.always_on_negative_feedback:
            rule = "negative_feedback"
        elif s.always_rules and spans:
            rule = _first_matching_rule(s.always_rules, spans)
        if rule is not None:
            self._kept += 1
            self._forced[rule] = self._forced.get(rule, 0) + 1
            return SamplingDecision(True, 1.0, rule)
        rate = self.rate_for(service)
        keep = rate >= 1.0 or (rate > 0.0 and hash_fraction(trace_id, s.salt) < rate)
        if keep:
            self._kept += 1
        else:
            self._dropped += 1
        return SamplingDecision(keep, rate)


def _is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def _first_matching_rule(rules: Sequence[AttributeRule], spans: Sequence[Span]) -> str | None:
    resources: list[Mapping[str, Any]] = []
    for rule in rules:
        for span in spans:
            if rule.test(span.attributes.get(rule.attribute)):
                return rule.label
        if not resources:
            seen: set[int] = set()
            for span in spans:  # spans of one resource share one dict: test each once
                if id(span.resource) not in seen:
                    seen.add(id(span.resource))
                    resources.append(span.resource)
        if any(rule.test(r.get(rule.attribute)) for r in resources):
            return rule.label
    return None
