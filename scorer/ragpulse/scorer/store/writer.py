"""Batched, acknowledged, idempotent inserts into ClickHouse.

:class:`BatchWriter` collects rows from any number of threads, inserts them column-oriented in
batches (by row count or by age: an insert has a fixed cost, so large batches are far cheaper per
row; docs/schema.md), and resolves each caller's future only once ClickHouse acknowledged the
insert holding its rows. That is what lets the scorer commit Kafka offsets after the write and
never before. Failed inserts are retried under the one retry policy (:mod:`.retry`).
:class:`ScoreWriter` is the writer for ``scores``; :func:`build_pipeline_health_writer` makes one
for ``pipeline_health``.

Idempotency has two layers. The table is a ReplacingMergeTree keyed by (service, metric, day,
trace), so a replayed score replaces the old one. And every batch carries an
``insert_deduplication_token`` derived from its rows, so a retry of an insert that in fact
succeeded (the acknowledgement was lost) is dropped by ClickHouse, the rollup view included.

ClickHouse acknowledges rows its table TTL deletes at once (``scores``: ``TTL toDateTime(ts) +
INTERVAL ttl_days DAY``); such rows are counted as ``rows_expired``, never as written
(:func:`ttl_drops` says which, from the row's time alone).
"""

from __future__ import annotations

import hashlib
import logging
import random
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragpulse.common.schema import HEALTH_COLUMNS, SCORE_COLUMNS, Column, validate_identifier

from .errors import PermanentStoreError, RetryableStoreError, WriterClosed, WriterFull
from .retry import RetryOutcome, RetryPolicy, RetrySettings
from .rows import PipelineHealthRow, ScoreRow, columns_of

__all__ = [
    "BatchWriter",
    "InsertClient",
    "ScoreWriter",
    "WriteAck",
    "WriterSettings",
    "build_pipeline_health_writer",
    "build_score_writer",
    "scores_ttl_days",
    "ttl_drops",
]

log = logging.getLogger(__name__)

R = TypeVar("R", ScoreRow, PipelineHealthRow)


class InsertClient(Protocol):
    """The one call the writer makes: clickhouse-connect's ``Client.insert``."""

    def insert(self, table: str, data: Any, column_names: Any = ..., database: str = ...,
               column_types: Any = ..., column_type_names: Any = ..., column_oriented: bool = ...,
               settings: Any = ..., **kw: Any) -> Any: ...


class WriterSettings(BaseModel):
    """How rows are batched and retried. Frozen; validated on construction."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    batch_rows: int = Field(default=20_000, ge=1, le=1_000_000)
    """Insert as soon as this many rows are pending. An insert has a fixed cost (a new part per
    partition, the rollup view's aggregation): on chDB a 500-row insert costs about as much as a
    5,000-row one, so bigger batches are far cheaper per row (docs/schema.md has the numbers)."""
    flush_interval_s: float = Field(default=0.5, gt=0, le=300)
    """…or once the oldest pending row has waited this long (bounds the write latency)."""
    max_pending_rows: int = Field(default=100_000, ge=1)
    """Rows held (queued + being inserted); ``submit`` beyond this raises :class:`WriterFull`."""
    retry: RetrySettings = Field(default_factory=RetrySettings)
    """How a failed insert is retried (:mod:`.retry`); after ``retry.deadline_s`` the batch's
    futures fail with a retryable error."""
    deduplicate: bool = True
    """Send an ``insert_deduplication_token`` per batch (see the module docstring)."""

    @model_validator(mode="after")
    def _check(self) -> WriterSettings:
        if self.max_pending_rows < self.batch_rows:
            raise ValueError("max_pending_rows must be at least batch_rows")
        return self


@dataclass(frozen=True)
class WriteAck:
    """ClickHouse acknowledged ``rows`` rows of one submission, in ``attempts`` insert calls;
    ``expired`` of them its TTL deleted on insert (they are not stored)."""

    rows: int
    attempts: int
    expired: int = 0


@dataclass
class _Submission(Generic[R]):
    rows: Sequence[R]
    future: Future[WriteAck]
    enqueued: float


_STATS = (
    "rows_submitted",     # rows accepted by submit()
    "rows_refused",       # rows refused with WriterFull (backpressure)
    "rows_written",       # rows ClickHouse acknowledged and kept
    "rows_expired",       # rows ClickHouse acknowledged but its TTL deleted at once (ttl_drops)
    "rows_failed",        # rows whose future failed (permanent error, deadline, shutdown)
    "batches_written",    # successful insert calls
    "insert_retries",     # retried insert attempts after a retryable error
    "insert_errors",      # failed insert attempts, any kind
)


class BatchWriter(Generic[R]):
    """Batches rows of one table and inserts them on a background thread.

    Lifecycle: ``start()`` once, then ``submit``/``write`` from any thread, then ``shutdown()``
    (idempotent, safe without ``start``): it refuses new rows, flushes what is pending (retrying
    within the deadline) and joins the thread. Thread-safe. The client is used from the writer's
    thread only.
    """

    def __init__(
        self,
        client: InsertClient,
        database: str,
        table: str,
        columns: Sequence[Column],
        settings: WriterSettings | None = None,
        *,
        identity: Sequence[str] | None = None,
        ttl: tuple[str, int] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        self._client = client
        self.database = validate_identifier(database, "database")
        self.table = validate_identifier(table, "table")
        self._names = [c.name for c in columns]
        self._types = [c.type for c in columns]
        # DateTime64 columns, sent as integer ticks (see _insert_with_retry): index -> precision.
        self._datetime64 = {
            i: int(m.group(1)) for i, t in enumerate(self._types) if (m := _DATETIME64.match(t))
        }
        # Columns that identify a row for the deduplication token (default: all of them).
        self._identity = [self._names.index(n) for n in identity] if identity else \
            list(range(len(self._names)))
        # (DateTime64 column index, TTL in seconds): rows the table's TTL drops on insert.
        self._ttl: tuple[int, int] | None = None
        if ttl is not None:
            index = self._names.index(ttl[0])
            if index not in self._datetime64:
                raise ValueError(f"TTL column {ttl[0]!r} is not a DateTime64 column")
            self._ttl = (index, ttl[1] * 86_400)
        self.settings = settings or WriterSettings()
        self._clock = clock
        self._wall_clock = wall_clock
        self._retry = RetryPolicy(self.settings.retry, rng=rng)
        self._cond = threading.Condition()
        self._queue: deque[_Submission[R]] = deque()
        self._inflight: list[_Submission[R]] = []  # the batch being inserted
        self._queued_rows = 0
        self._held_rows = 0  # queued + in the batch being inserted: what the bound applies to
        self._flush_requested = False
        self._accepting = False
        self._stopping = False
        self._abort = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = False
        self._stats = dict.fromkeys(_STATS, 0)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the flush thread. Raises ``RuntimeError`` if called twice or after shutdown.

        Blocks for clickhouse-connect's lazy imports the first time in a process (see
        :func:`_preload_client_imports`), so the first batch does not pay them."""
        with self._cond:
            if self._started:
                raise RuntimeError("writer already started")
            self._started = True
            self._accepting = True
        _preload_client_imports()
        self._thread = threading.Thread(
            target=self._run, name=f"ragpulse-write-{self.table}", daemon=True)
        self._thread.start()

    def shutdown(self, timeout_s: float | None = None) -> None:
        """Refuse new rows, flush pending ones, stop. Blocks up to ``timeout_s`` (None: until the
        flush finishes, itself bounded by ``retry.deadline_s`` per batch); after the timeout,
        retries are abandoned and the still-pending futures fail with RetryableStoreError. An
        insert call already in progress is not interrupted (the client's own timeout bounds it)."""
        with self._cond:
            self._accepting = False
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
            if thread is None:
                self._started = True  # a writer shut down before start can never start
                return
        thread.join(timeout_s)
        if thread.is_alive():
            self._abort.set()
            with self._cond:
                self._cond.notify_all()
            thread.join()

    # -- producing -------------------------------------------------------------------------

    def submit(self, rows: Sequence[R]) -> Future[WriteAck]:
        """Queue ``rows``; the future resolves when ClickHouse acknowledged all of them.

        Never blocks. Raises :class:`WriterFull` (retryable: pause and resubmit later) when the
        rows would exceed ``max_pending_rows``, :class:`WriterClosed` before start/after
        shutdown, ``ValueError`` for a submission larger than ``max_pending_rows``. The future
        fails with :class:`PermanentStoreError` or :class:`RetryableStoreError`.
        """
        rows = list(rows)
        fut: Future[WriteAck] = Future()
        n = len(rows)
        if n > self.settings.max_pending_rows:
            raise ValueError(f"{n} rows exceed max_pending_rows={self.settings.max_pending_rows}")
        with self._cond:
            if not self._accepting:
                raise WriterClosed(f"writer for {self.database}.{self.table} is not running")
            if n == 0:
                fut.set_result(WriteAck(0, 0))
                return fut
            if self._held_rows + n > self.settings.max_pending_rows:
                self._stats["rows_refused"] += n
                raise WriterFull(
                    f"{self._held_rows} rows pending for {self.database}.{self.table}; "
                    f"limit {self.settings.max_pending_rows}")
            self._queue.append(_Submission(rows, fut, self._clock()))
            self._queued_rows += n
            self._held_rows += n
            self._stats["rows_submitted"] += n
            if self._queued_rows >= self.settings.batch_rows or len(self._queue) == 1:
                self._cond.notify_all()
        return fut

    def write(self, rows: Sequence[R], timeout_s: float | None = None) -> WriteAck:
        """Submit and block until acknowledged. Raises what :meth:`submit` and its future raise
        (``concurrent.futures.TimeoutError`` after ``timeout_s``; the rows stay queued)."""
        fut = self.submit(rows)
        with self._cond:
            # A synchronous caller waits anyway: do not make it wait for the interval too.
            self._flush_requested = True
            self._cond.notify_all()
        return fut.result(timeout_s)

    def flush(self, timeout_s: float | None = None) -> None:
        """Insert everything pending now and block until it is acknowledged or failed (up to
        ``timeout_s``; raises ``concurrent.futures.TimeoutError`` after it)."""
        with self._cond:
            futures = [s.future for s in self._inflight] + [s.future for s in self._queue]
            self._flush_requested = True
            self._cond.notify_all()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for f in futures:
            f.exception(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def stats(self) -> dict[str, int]:
        """Counters (see ``_STATS``) plus the gauge ``pending_rows``. Thread-safe snapshot."""
        with self._cond:
            out = dict(self._stats)
            out["pending_rows"] = self._held_rows
        return out

    # -- the flush thread ------------------------------------------------------------------

    def _due(self, now: float) -> float | None:
        """0 if a batch should go now, else seconds to wait (None: nothing queued)."""
        if not self._queue:
            return None
        if self._stopping or self._flush_requested or self._queued_rows >= self.settings.batch_rows:
            return 0.0
        return max(0.0, self._queue[0].enqueued + self.settings.flush_interval_s - now)

    def _take(self) -> list[_Submission[R]]:
        batch: list[_Submission[R]] = []
        n = 0
        while self._queue and (not batch or n + len(self._queue[0].rows) <= self.settings.batch_rows):
            s = self._queue.popleft()
            batch.append(s)
            n += len(s.rows)
        self._queued_rows -= n
        self._inflight = batch
        if not self._queue:
            self._flush_requested = False
        return batch

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    wait = self._due(self._clock())
                    if wait == 0.0:
                        break
                    if wait is None and self._stopping:
                        return
                    self._cond.wait(wait)
                batch = self._take()
            try:
                self._insert(batch)
            except BaseException as exc:  # never leave a future hanging
                log.exception("write: unexpected failure")
                self._settle([s for s in batch if not s.future.done()], 0,
                             exc=PermanentStoreError(f"writer failure: {exc!r}"))
            finally:
                with self._cond:
                    self._inflight = []

    def _token(self, columns: list[list[Any]], epoch_us: dict[int, list[int]] | None = None) -> str:
        """A deduplication token naming the batch: a hash of its rows' identity columns (the
        sorting key and the version), so an identical retried batch gets the same token.
        ``epoch_us``: datetime columns already converted by :func:`_epoch_us_column`."""
        h = hashlib.blake2b(digest_size=16)
        h.update(self.table.encode())
        for i in self._identity:
            col = columns[i]
            if epoch_us is not None and i in epoch_us:
                col = epoch_us[i]
            elif col and isinstance(col[0], datetime):
                # Epoch microseconds, not repr(): repr of a datetime costs ~1.5 us, which made
                # the token a measurable part of the write stage. Same rows, same token.
                col = [_epoch_us(d) for d in col]
            h.update(repr(col).encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    def _insert(self, batch: list[_Submission[R]]) -> None:
        rows = [r for s in batch for r in s.rows]
        error, attempts, expired = self._insert_with_retry(rows)
        if error is None:
            self._settle(batch, attempts, expired=expired)
            return
        if isinstance(error, PermanentStoreError) and len(batch) > 1:
            # One bad submission must not fail its neighbours: insert each alone.
            for s in batch:
                e, n, x = self._insert_with_retry(list(s.rows))
                self._settle([s], attempts + n, exc=e, expired=x)
            return
        self._settle(batch, attempts, exc=error)

    def _expired(self, epoch_us: dict[int, list[int]]) -> list[bool] | None:
        """Per row, whether the table's TTL deletes it on insert (None: no TTL to check, or
        the column was not made of aware datetimes)."""
        if self._ttl is None or self._ttl[0] not in epoch_us:
            return None
        ttl_s = self._ttl[1]
        now_s = int(self._wall_clock())
        return [ttl_drops(us, ttl_s, now_s) for us in epoch_us[self._ttl[0]]]

    def _insert_with_retry(self, rows: list[R]) -> tuple[Exception | None, int, list[bool] | None]:
        """Insert ``rows`` under the retry policy: ``(None, attempts, expired)`` once
        acknowledged (``expired``: per row, whether the TTL deleted it at once), else the
        classified error. Blocks (writer thread) while the policy waits between attempts."""
        columns = columns_of(rows)
        # DateTime64 values as integer ticks: clickhouse-connect would otherwise convert every
        # datetime in Python (~1 us each, two per row); here a trace's rows share their datetime
        # objects, so each distinct one is converted once. The token hashes the same epoch
        # microseconds it always did.
        epoch_us: dict[int, list[int]] = {}
        for i, precision in self._datetime64.items():
            us = _epoch_us_column(columns[i])
            if us is not None:
                epoch_us[i] = us
                columns[i] = _ticks(us, precision)
        settings: dict[str, Any] = {}
        if self.settings.deduplicate:
            settings = {"insert_deduplicate": 1,
                        "insert_deduplication_token": self._token(columns, epoch_us),
                        "deduplicate_blocks_in_dependent_materialized_views": 1}

        def insert() -> None:
            self._client.insert(
                self.table, columns, column_names=self._names, database=self.database,
                column_type_names=self._types, column_oriented=True, settings=settings)

        def failed(exc: Exception, attempt: int, wait_s: float | None) -> None:
            with self._cond:
                self._stats["insert_errors"] += 1
                if wait_s is not None:
                    self._stats["insert_retries"] += 1
            if wait_s is not None:
                log.warning("write: retryable error (attempt %d), retrying in %.2fs: %s",
                            attempt, wait_s, exc)

        try:
            _, attempts = self._retry.call(insert, abort=self._abort, on_error=failed)
        except RetryOutcome as out:
            where = f"{self.database}.{self.table}"
            if not out.retryable:
                log.error("write: permanent error inserting %d rows into %s: %s",
                          len(rows), where, out.error)
                return (PermanentStoreError(f"insert into {where} failed: {out.error}"),
                        out.attempts, None)
            why = "shutdown" if out.why == "shutdown" else \
                f"{self.settings.retry.deadline_s}s deadline"
            return RetryableStoreError(
                f"insert into {where} not acknowledged before the {why} after {out.attempts} "
                f"attempts: {out.error}"), out.attempts, None
        with self._cond:
            self._stats["batches_written"] += 1
        return None, attempts, self._expired(epoch_us)

    def _settle(self, batch: list[_Submission[R]], attempts: int,
                exc: BaseException | None = None, expired: list[bool] | None = None) -> None:
        n = sum(len(s.rows) for s in batch)
        # Rows of each submission the TTL deleted on insert, in batch order.
        lost: list[int] = []
        i = 0
        for s in batch:
            k = len(s.rows)
            lost.append(sum(expired[i:i + k]) if expired else 0)
            i += k
        gone = sum(lost)
        if gone and exc is None:
            log.warning("write: %d of %d rows acknowledged but deleted at once by the TTL of "
                        "%s.%s (time outside it); counted in rows_expired",
                        gone, n, self.database, self.table)
        with self._cond:
            self._held_rows -= n
            if exc is not None:
                self._stats["rows_failed"] += n
            else:
                self._stats["rows_written"] += n - gone
                self._stats["rows_expired"] += gone
        for s, x in zip(batch, lost, strict=True):
            if s.future.done():
                continue
            if exc is None:
                s.future.set_result(WriteAck(len(s.rows), attempts, x))
            else:
                s.future.set_exception(exc)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_U32 = 1 << 32


def ttl_drops(epoch_us: int, ttl_s: int, now_s: int) -> bool:
    """Whether a ``TTL toDateTime(col) + INTERVAL ttl_s SECOND DELETE`` deletes a row whose
    ``col`` is ``epoch_us`` at insert time ``now_s``.

    ``DateTime`` is a UInt32 of seconds: ``toDateTime`` of a ``DateTime64`` keeps the low 32 bits
    and adding the interval wraps the same way (measured with chDB 26.9: a row at 2200-01-01 is
    kept as expiring in 2063, one at 2105-12-31 is deleted at once, as are 1969, 1 ns, 2**63 ns
    and 2**64 - 1 ns). So besides rows older than the TTL, rows before 1970 and from within the
    TTL of 2106-02-07 onwards may be deleted at once. Pure; thread-safe."""
    seconds = epoch_us // 1_000_000
    return ((seconds % _U32) + ttl_s) % _U32 <= now_s


def _epoch_us(d: Any) -> Any:
    """Microseconds since the epoch of an aware datetime (rows only carry aware UTC ones); any
    other value as it is, so a column never fails to hash."""
    if isinstance(d, datetime) and d.tzinfo is not None:
        delta = d - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return d


_DATETIME64 = re.compile(r"DateTime64\((\d)\s*[,)]")


def _epoch_us_column(col: list[Any]) -> list[int] | None:
    """Epoch microseconds of a column of aware datetimes, each distinct object converted once
    (consecutive rows usually share one); ``None`` if any value is something else (naive
    datetimes, strings, ints): that column is left for clickhouse-connect to convert."""
    out: list[int] = []
    append = out.append
    last: Any = None
    last_us = 0
    for d in col:
        if d is not last:
            if type(d) is not datetime or d.tzinfo is None:
                return None
            delta = d - _EPOCH
            last, last_us = d, (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        append(last_us)
    return out


def _ticks(epoch_us: list[int], precision: int) -> list[int]:
    """``DateTime64(precision)`` ticks from epoch microseconds, floored like clickhouse-connect's
    own conversion (``(seconds * 10**6 + microsecond) * 10**p // 10**6``)."""
    if precision == 6:
        return epoch_us
    if precision < 6:
        div = 10 ** (6 - precision)
        return [u // div for u in epoch_us]
    mul = 10 ** (precision - 6)
    return [u * mul for u in epoch_us]


def _preload_client_imports() -> None:
    """Resolve clickhouse-connect's lazy optional imports now. Its insert path asks whether the
    data is a pandas DataFrame, which imports pandas (when installed) inside the first insert:
    about a second of CPU that would otherwise stall the first batch and count against it.
    Idempotent and cheap after the first call; any failure is left for the insert to report."""
    try:
        from clickhouse_connect.driver import options

        _ = options.pd  # the module's __getattr__ imports pandas (or records its absence)
    except Exception:  # not clickhouse-connect, or pandas broken: inserts decide
        log.debug("writer: clickhouse-connect optional imports not preloaded", exc_info=True)


class ScoreWriter(BatchWriter[ScoreRow]):
    """The writer for ``scores`` rows (:func:`~ragpulse.scorer.store.rows_from_scores`).

    ``ttl_days``: the table's TTL on ``ts`` (``db init --ttl-days``, default 90); rows it
    deletes on insert are counted in ``rows_expired``, not ``rows_written``. ``None``: not
    checked (the table's TTL is unknown)."""

    def __init__(self, client: InsertClient, database: str = "rag",
                 settings: WriterSettings | None = None, *, ttl_days: int | None = 90,
                 **kw: Any) -> None:
        kw.setdefault("identity", ("service", "metric", "ts", "trace_id", "version"))
        if ttl_days is not None:
            kw.setdefault("ttl", ("ts", ttl_days))
        super().__init__(client, database, "scores", SCORE_COLUMNS, settings, **kw)


_SCORES_TTL = re.compile(r"\bTTL\s+toDateTime\(ts\)\s*\+\s*toIntervalDay\((\d+)\)")


def scores_ttl_days(client: Any, database: str) -> int | None:
    """The TTL in days of ``database.scores`` as ClickHouse reports it (``system.tables``), or
    ``None`` if the table is missing or its TTL is not the one ragpulse creates. Blocks on one
    query; raises the client's errors."""
    result = client.query(
        "SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = 'scores'",
        parameters={"db": database})
    rows = result.result_rows
    match = _SCORES_TTL.search(rows[0][0]) if rows else None
    return int(match.group(1)) if match else None


def build_score_writer(client: InsertClient, database: str = "rag",
                       settings: WriterSettings | None = None, *,
                       ttl_days: int | None = 90) -> ScoreWriter:
    """A started-not :class:`ScoreWriter`; call ``start()`` (the owner decides when)."""
    return ScoreWriter(client, database, settings, ttl_days=ttl_days)


def build_pipeline_health_writer(client: InsertClient, database: str = "rag",
                                 settings: WriterSettings | None = None) -> BatchWriter[PipelineHealthRow]:
    """A writer for ``pipeline_health`` rows (:class:`~ragpulse.scorer.store.rows.PipelineHealthRow`)."""
    return BatchWriter(client, database, "pipeline_health", HEALTH_COLUMNS, settings,
                       identity=("component", "name", "label", "instance", "minute", "written_at"))
