"""Minimal span and clock stand-ins for the assembler and offset bookkeeping tests."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class S:
    """A span as the assembler sees it: ids only."""

    trace_id: str
    span_id: str
    parent_span_id: str | None = None


class Clock:
    """A monotonic clock the test moves by hand (``clock.t += 5``)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t
