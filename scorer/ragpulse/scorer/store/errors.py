"""Store errors, split the OpenTelemetry-collector way into retryable and permanent."""

from __future__ import annotations

import re

__all__ = [
    "PermanentStoreError",
    "RetryableStoreError",
    "StoreError",
    "StoreLockedError",
    "WriterClosed",
    "WriterFull",
    "clickhouse_error_code",
    "is_retryable",
]


class StoreError(RuntimeError):
    """Base class of every ragpulse.scorer.store error."""


class RetryableStoreError(StoreError):
    """Transient: the same rows may succeed later (network, overload, deadline passed)."""


class PermanentStoreError(StoreError):
    """Retrying the same rows cannot succeed (schema mismatch, bad value, unknown table)."""


class WriterFull(RetryableStoreError):
    """Backpressure: the writer holds ``max_pending_rows`` already. Pause input and retry later."""


class WriterClosed(StoreError):
    """The writer is not started or already shut down and takes no new rows."""


class StoreLockedError(StoreError):
    """The chDB directory is owned by another process (a running ``ragpulse up``, whose pid is
    ``owner_pid`` when it advertises itself)."""

    def __init__(self, message: str, *, owner_pid: int | None = None) -> None:
        super().__init__(message)
        self.owner_pid = owner_pid


# ClickHouse error codes (src/Common/ErrorCodes.cpp) worth retrying: the server or the network
# was briefly unable, the statement itself is fine.
_RETRYABLE_CODES = frozenset({
    3,    # UNEXPECTED_END_OF_FILE
    159,  # TIMEOUT_EXCEEDED
    201,  # QUOTA_EXCEEDED
    202,  # TOO_MANY_SIMULTANEOUS_QUERIES
    203,  # NO_FREE_CONNECTION
    209,  # SOCKET_TIMEOUT
    210,  # NETWORK_ERROR
    236,  # ABORTED
    241,  # MEMORY_LIMIT_EXCEEDED
    242,  # TABLE_IS_READ_ONLY (replica lost its keeper session)
    252,  # TOO_MANY_PARTS
    285,  # TOO_FEW_LIVE_REPLICAS
    319,  # UNKNOWN_STATUS_OF_INSERT
    373,  # SESSION_IS_LOCKED
    394,  # QUERY_WAS_CANCELLED
    425,  # SYSTEM_ERROR
    473,  # DEADLOCK_AVOIDED
    999,  # KEEPER_EXCEPTION
})
_CODE = re.compile(r"\bCode:\s*(\d+)")


def clickhouse_error_code(exc: BaseException) -> int | None:
    """The ClickHouse error code carried by ``exc`` (or its causes), if any."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        code = getattr(e, "code", None)
        if isinstance(code, int) and code > 0:
            return code
        m = _CODE.search(str(e))
        if m:
            return int(m.group(1))
        e = e.__cause__ or e.__context__
    return None


def is_retryable(exc: BaseException) -> bool:
    """Classify an exception raised by a ClickHouse client call.

    A ClickHouse error code decides when present. Otherwise connection-level failures
    (clickhouse-connect's ``OperationalError``, ``OSError``, timeouts) are retryable, and
    everything else (``TypeError`` from a bad value, ``ProgrammingError``…) is permanent.
    """
    if isinstance(exc, RetryableStoreError):
        return True
    if isinstance(exc, PermanentStoreError):
        return False
    code = clickhouse_error_code(exc)
    if code is not None:
        return code in _RETRYABLE_CODES
    from clickhouse_connect.driver.exceptions import OperationalError

    return isinstance(exc, (OperationalError, OSError, TimeoutError, ConnectionError))
