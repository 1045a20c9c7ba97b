"""One table from why a request was refused to what each OTLP transport answers.

The OTLP specification (https://opentelemetry.io/docs/specs/otlp/#failures and
#otlphttp-throttling) fixes the pairs: a malformed request is not retryable (HTTP 400, gRPC
INVALID_ARGUMENT); back-pressure and outages are (HTTP 429/503 with ``Retry-After``, gRPC
RESOURCE_EXHAUSTED/UNAVAILABLE with a ``google.rpc.RetryInfo`` detail). Both receivers call
:func:`refusal_for` and render the :class:`Refusal` in their own framing, so they cannot drift
apart. Thread-safe; the only side effect is the log line of an unexpected error.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from google.rpc import code_pb2

from ragpulse.collector.exporter import ExportRefused, QueueFull
from ragpulse.collector.split import MalformedRequest

__all__ = ["Busy", "ForeignOrigin", "Refusal", "ShuttingDown", "TooLarge", "TooManyItems",
           "Unauthenticated", "refusal_for"]

log = logging.getLogger(__name__)


class TooLarge(Exception):
    """The body (before or after decompression) exceeds its limit."""

    def __init__(self, message: str, body_consumed: bool = False) -> None:
        super().__init__(message)
        self.body_consumed = body_consumed


class TooManyItems(TooLarge):
    """The request holds more items (spans, attributes, events, links, list values) than
    ``otlp.max_items`` allows; found before it was decoded (:mod:`.items`). Permanent, as
    :class:`TooLarge`: HTTP 413, gRPC RESOURCE_EXHAUSTED without RetryInfo."""

    def __init__(self, message: str) -> None:
        super().__init__(message, body_consumed=True)


class ShuttingDown(Exception):
    """The receiver is draining and takes no new requests."""

    def __init__(self, message: str = "collector is shutting down") -> None:
        super().__init__(message)


class Busy(Exception):
    """The receiver holds as many requests as it may (HTTP: bodies at ``max_inflight_bytes``;
    gRPC: calls at its concurrency limit); refused before the body is read."""


class Unauthenticated(Exception):
    """No bearer token, or the wrong one."""

    def __init__(self, message: str = "missing or invalid bearer token") -> None:
        super().__init__(message)


class ForeignOrigin(Exception):
    """A request a web page of another site made a browser send (a foreign ``Origin``,
    ``Sec-Fetch-Site: cross-site``), or, on a loopback listener, a ``Host`` that does not name
    this machine (DNS rebinding): :func:`ragpulse.common.browser_refusal`."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """The answer to a refused request: the HTTP status, the ``google.rpc.Code`` (the gRPC
    status of the same number), the message, and the back-off to suggest (``None``: the client
    must not retry)."""

    http_status: int
    rpc_code: int
    message: str
    retry_after_s: int | None = None


# (exception type, HTTP status, google.rpc code, retryable); the first matching row wins, so
# subclasses come before their bases.
_TABLE: tuple[tuple[type[BaseException], int, int, bool], ...] = (
    (Unauthenticated, 401, code_pb2.UNAUTHENTICATED, False),
    (ForeignOrigin, 403, code_pb2.PERMISSION_DENIED, False),
    (TooLarge, 413, code_pb2.RESOURCE_EXHAUSTED, False),
    (MalformedRequest, 400, code_pb2.INVALID_ARGUMENT, False),
    (QueueFull, 429, code_pb2.RESOURCE_EXHAUSTED, True),
    (Busy, 429, code_pb2.RESOURCE_EXHAUSTED, True),
    (ExportRefused, 503, code_pb2.UNAVAILABLE, True),
    (ShuttingDown, 503, code_pb2.UNAVAILABLE, True),
)


def refusal_for(exc: BaseException, retry_after_s: int) -> Refusal:
    """The answer for ``exc``. Retryable refusals carry the exception's own ``retry_after_s``
    when it has one, else ``retry_after_s``. Anything not in the table is a bug in the
    collector: HTTP 500 / INTERNAL, not retryable, naming only the exception's type (its text
    may quote the request), and logged here with its traceback."""
    for kind, http_status, rpc_code, retryable in _TABLE:
        if isinstance(exc, kind):
            retry = getattr(exc, "retry_after_s", retry_after_s) if retryable else None
            return Refusal(http_status, rpc_code, str(exc), retry)
    log.error("receive: unexpected error", exc_info=exc)
    return Refusal(500, code_pb2.INTERNAL, f"internal error: {type(exc).__name__}")
