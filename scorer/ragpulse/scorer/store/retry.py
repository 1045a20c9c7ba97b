"""The one retry policy of the scorer's writes: exponential backoff with full jitter, a deadline,
an escape on shutdown, and only for errors classified retryable.

Configured once, by :class:`RetrySettings` (``writer.retry`` in the scorer's settings,
``RAGPULSE_WRITER__RETRY__*``), and applied at two places that never retry on their own terms:

* :class:`~ragpulse.scorer.store.writer.BatchWriter` retries one insert with :meth:`RetryPolicy.call`
  until it is acknowledged, a permanent error says retrying cannot help, the deadline passed, or
  the writer shuts down;
* the scorer's write and dead-letter steps (``ragpulse.scorer.pipeline.write``,
  ``.dead_letter``) wait :meth:`RetryPolicy.backoff` before they submit again what the writer
  or the producer gave back, since those records' offsets may not be committed before their
  rows or dead letters are acknowledged.

Backoff: the wait after failed attempt ``n`` is drawn uniformly from
``[0, min(max_backoff_s, initial_backoff_s * 2 ** (n - 1))]`` ("full jitter",
https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/), so many writers that
failed together do not retry in step. Which errors are retryable is decided where they arise
(:func:`ragpulse.scorer.store.errors.is_retryable`), as the OpenTelemetry collector's
``consumererror`` package splits permanent from retryable errors.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .errors import is_retryable

__all__ = ["RetryOutcome", "RetryPolicy", "RetrySettings"]

T = TypeVar("T")


class RetrySettings(BaseModel):
    """How a failed write is retried (``RAGPULSE_WRITER__RETRY__*``). Frozen; validated."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    initial_backoff_s: float = Field(
        0.1, gt=0, description="the first wait's upper bound; it doubles per failed attempt"
    )
    max_backoff_s: float = Field(5.0, gt=0, description="upper bound of any one wait")
    deadline_s: float = Field(
        60.0,
        gt=0,
        description="one insert is given up after this long (its rows fail with a retryable "
        "error; the scorer submits them again and holds their offsets back meanwhile)",
    )

    @model_validator(mode="after")
    def _check(self) -> RetrySettings:
        if self.max_backoff_s < self.initial_backoff_s:
            raise ValueError("max_backoff_s must be at least initial_backoff_s")
        return self


class RetryOutcome(Exception):
    """Raised by :meth:`RetryPolicy.call` when it stops retrying.

    ``error`` is the last error, ``attempts`` the number of calls made, ``retryable`` whether
    the error was retryable (the deadline or the shutdown ended the retries) and ``why`` says
    which of the three ended them (``"permanent"``, ``"deadline"``, ``"shutdown"``).
    """

    def __init__(self, error: Exception, attempts: int, why: str) -> None:
        super().__init__(f"{why} after {attempts} attempts: {error}")
        self.error = error
        self.attempts = attempts
        self.why = why

    @property
    def retryable(self) -> bool:
        return self.why != "permanent"


class RetryPolicy:
    """:class:`RetrySettings` applied. Thread-safe if ``rng`` is (``random.Random`` is)."""

    def __init__(
        self,
        settings: RetrySettings | None = None,
        *,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings or RetrySettings()
        self._rng = rng or random.Random()
        self._clock = clock

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1 for the first). Never blocks."""
        s = self.settings
        cap = min(s.max_backoff_s, s.initial_backoff_s * 2.0 ** min(max(attempt, 1) - 1, 60))
        return self._rng.uniform(0.0, cap)

    def call(
        self,
        fn: Callable[[], T],
        *,
        abort: threading.Event,
        retryable: Callable[[BaseException], bool] = is_retryable,
        on_error: Callable[[Exception, int, float | None], None] | None = None,
    ) -> tuple[T, int]:
        """Call ``fn`` until it returns; ``(its result, attempts)``.

        Blocks while it waits between attempts (on ``abort``: a shutdown ends the wait at once,
        and the attempt after it is the last one). After each failure ``on_error(error, attempt, wait_s)`` is called, with
        ``wait_s=None`` when no retry follows. Raises :class:`RetryOutcome` for a permanent
        error, when the next wait would pass ``settings.deadline_s`` (counted from the first
        call), or once ``abort`` is set; ``BaseException`` that is not an ``Exception``
        propagates untouched.
        """
        deadline = self._clock() + self.settings.deadline_s
        attempt = 0
        while True:
            attempt += 1
            try:
                return fn(), attempt
            except Exception as exc:
                if not retryable(exc):
                    why = "permanent"
                elif abort.is_set():
                    why = "shutdown"
                else:
                    delay = self.backoff(attempt)
                    if self._clock() + delay <= deadline:
                        if on_error is not None:
                            on_error(exc, attempt, delay)
                        # A shutdown ends the wait early; the attempt after it is the last.
                        abort.wait(delay)
                        continue
                    why = "deadline"
                if on_error is not None:
                    on_error(exc, attempt, None)
                raise RetryOutcome(exc, attempt, why) from exc
