"""Trace assembly: regroup spans by trace id and decide when a trace is complete.

Spans of one trace reach the scorer in one record (otelcol ``partition_traces_by_id``, the ragpulse
collector) or spread over several records and batches (rotel, BatchSpanProcessor flushing a long
trace twice). OTLP carries no "trace finished" marker, so completeness is inferred, as tail
samplers do (otelcol's ``tailsamplingprocessor`` waits a fixed ``decision_wait``; Phoenix uses a
frontier lag):

* a trace is **complete** ``grace_s`` after its root span (no parent) arrived: a span is exported
  only once it has ended, and children end before their root in well-formed traces, so the grace
  only covers export/batching skew between services;
* a trace whose root never comes (the root is in another service that is not exported, or was
  dropped) is emitted ``max_wait_s`` after its first span (cause ``timeout``);
* when the buffer is over ``max_traces`` or ``max_spans`` the oldest trace still without a root is
  **evicted** (counted), or the oldest trace when every buffered one has its root; the scorer
  then scores it with what it has or drops it, per ``on_evict``;
* a service (``service.name`` of a trace's first spans) may hold at most
  ``max_incomplete_per_service`` traces without a root: beyond, its oldest such trace is evicted.
  A flood of traces whose root never arrives from one service thus evicts its own traces,
  never complete ones, and a complete trace leaves ``grace_s`` after its root whatever the
  flood. (Service names are the sender's to choose: a flood under many names reaches the
  global bound, which evicts the oldest root-less trace of any service; docs/reliability.md,
  "round 4", known limits.)
  The scorer writes no rows for an evicted trace without a root that has nothing to score
  (``traces_expired_incomplete``; ``pipeline.prepare``), so a flood costs no row per trace.

Spans that arrive for a trace that was already emitted are **late**. They are counted; with
``late_spans="ignore"`` they are discarded, with ``"rescore"`` the trace is reopened with its
earlier spans (kept for the last ``late_window_traces`` emitted traces) and scored again after
the grace; the new rows replace the old ones in the deduplicated table (same key, newer version).

Times come from an injectable monotonic clock, never from span timestamps: producers' clocks are
skewed and the grace is about arrival, not about what the span says.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .offsets import RecordRef

__all__ = ["AssembledTrace", "AssemblySettings", "Cause", "TraceAssembler"]


class SpanLike(Protocol):
    """What assembly needs of a span (``ragpulse.scorer.traces.Span`` has it)."""

    @property
    def trace_id(self) -> str: ...

    @property
    def parent_span_id(self) -> str | None: ...


S = TypeVar("S", bound=SpanLike)

Cause = Literal["complete", "timeout", "evicted", "rescore", "drain"]


class AssemblySettings(BaseModel):
    """How long to wait for a trace's spans and how much to buffer (``RAGPULSE_ASSEMBLY__*``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    grace_s: float = Field(
        2.0, ge=0.0, le=600.0, description="wait after the root span arrived for stragglers"
    )
    max_wait_s: float = Field(
        30.0,
        gt=0.0,
        le=3600.0,
        description="emit a trace without a root this long after its first span",
    )
    max_traces: int = Field(
        20_000, ge=1, description="traces buffered at most; the oldest is evicted"
    )
    max_spans: int = Field(
        500_000, ge=1, description="spans buffered at most; the oldest trace is evicted"
    )
    max_incomplete_per_service: int = Field(
        5_000,
        ge=1,
        description="traces without a root span one service may have buffered; beyond, its "
        "oldest such trace is evicted (a flood of root-less traces cannot crowd out others)",
    )
    on_evict: Literal["score", "drop"] = Field(
        "score",
        description="an evicted trace is scored with the spans it has, or dropped (counted)",
    )
    late_spans: Literal["ignore", "rescore"] = Field(
        "ignore",
        description="spans of an already emitted trace: count and discard, or reopen and rescore",
    )
    late_window_traces: int = Field(
        10_000, ge=0, description="emitted trace ids remembered to recognise late spans"
    )
    late_window_spans: int = Field(
        200_000, ge=0, description="spans of emitted traces kept for rescoring (late_spans=rescore)"
    )

    @model_validator(mode="after")
    def _check(self) -> AssemblySettings:
        if self.grace_s >= self.max_wait_s:
            raise ValueError(
                f"grace_s ({self.grace_s:g}; `up --grace`, RAGPULSE_ASSEMBLY__GRACE_S) must be "
                f"less than max_wait_s ({self.max_wait_s:g}; RAGPULSE_ASSEMBLY__MAX_WAIT_S), the "
                "longest a trace is held"
            )
        return self


@dataclass(slots=True)
class AssembledTrace(Generic[S]):
    """The spans of one trace and the records it holds, ready to extract and score."""

    trace_id: str
    spans: list[S]
    refs: list[RecordRef]
    cause: Cause
    has_root: bool
    first_seen: float = 0.0


@dataclass(slots=True)
class _Buffer(Generic[S]):
    spans: list[S] = field(default_factory=list)
    refs: list[RecordRef] = field(default_factory=list)
    first_seen: float = 0.0
    root_seen: float | None = None
    rescore: bool = False


class TraceAssembler(Generic[S]):
    """Buffers spans by trace id and emits assembled traces.

    Not thread-safe: owned by the consumer thread. Never blocks. Memory is bounded by
    ``max_spans`` buffered spans plus ``late_window_spans`` remembered ones.
    """

    def __init__(
        self,
        settings: AssemblySettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings or AssemblySettings()
        self._clock = clock
        self._buffers: OrderedDict[str, _Buffer[S]] = OrderedDict()  # order = first arrival
        self._rooted: OrderedDict[str, float] = OrderedDict()  # order = root arrival
        # Buffered traces without a root: trace id -> service, in first-arrival order, and the
        # same ids per service (the bound). Eviction takes from these first.
        self._rootless: OrderedDict[str, str] = OrderedDict()
        self._rootless_by_service: dict[str, OrderedDict[str, None]] = {}
        self._spans = 0
        self._ready: list[AssembledTrace[S]] = []
        # Emitted trace ids -> (their spans when late_spans="rescore" else None, the partitions
        # their records came from, so a revoked partition's traces can be forgotten).
        self._emitted: OrderedDict[str, tuple[list[S] | None, frozenset[tuple[str, int]]]] = (
            OrderedDict()
        )
        self._emitted_spans = 0
        # Interned ``(None, partitions)`` entries of ``_emitted``: nearly every trace comes from
        # one partition, so the late-window's 10,000 entries share a handful of objects instead
        # of holding two garbage-collected containers each (every full collection walks them).
        self._shared_entries: dict[
            frozenset[tuple[str, int]], tuple[None, frozenset[tuple[str, int]]]
        ] = {}
        self.counters: dict[str, int] = {
            "spans_assembled": 0,
            "spans_late": 0,
            "traces_assembled": 0,
            "traces_timed_out": 0,
            "traces_evicted": 0,
            "traces_rescored": 0,
            "traces_drained": 0,
        }

    # -- gauges --------------------------------------------------------------------------------

    @property
    def traces_buffered(self) -> int:
        return len(self._buffers)

    @property
    def spans_buffered(self) -> int:
        return self._spans

    # -- input ---------------------------------------------------------------------------------

    def add(self, trace_id: str, spans: Sequence[S], ref: RecordRef | None = None) -> bool:
        """Buffer spans of one trace that arrived in the record ``ref``.

        Returns ``True`` when the trace now holds ``ref`` (the caller must count it as pending on
        the record), ``False`` when the spans were late and ignored (nothing holds the record).
        Over-capacity evictions are queued for :meth:`pop_ready`.
        """
        now = self._clock()
        buf = self._buffers.get(trace_id)
        root_here: bool | None = None  # whether ``spans`` hold a root (computed once, if needed)
        if buf is None:
            if trace_id in self._emitted:
                self.counters["spans_late"] += len(spans)
                if self.settings.late_spans == "ignore":
                    self._emitted.move_to_end(trace_id)
                    return False
                earlier = self._emitted.pop(trace_id)[0] or []
                self._emitted_spans -= len(earlier)
                buf = _Buffer(spans=list(earlier), first_seen=now, rescore=True)
                self._spans += len(earlier)
                if any(_is_root(s) for s in earlier):
                    buf.root_seen = now
                    self._rooted[trace_id] = now
            else:
                buf = _Buffer(first_seen=now)
            self._buffers[trace_id] = buf
            root_here = any(_is_root(s) for s in spans)
            if buf.root_seen is None and not root_here:
                first = spans[0] if spans else (buf.spans[0] if buf.spans else None)
                service = (getattr(first, "service_name", None) or "") if first else ""
                self._rootless[trace_id] = service
                self._rootless_by_service.setdefault(service, OrderedDict())[trace_id] = None
        buf.spans.extend(spans)
        self._spans += len(spans)
        self.counters["spans_assembled"] += len(spans)
        # A record adds each of its traces once, so checking the last ref suffices.
        attached = ref is not None and (not buf.refs or buf.refs[-1] is not ref)
        if attached:
            buf.refs.append(ref)  # type: ignore[arg-type]
        if buf.root_seen is None and (
            root_here if root_here is not None else any(_is_root(s) for s in spans)
        ):
            buf.root_seen = now
            self._rooted[trace_id] = now
            self._forget_rootless(trace_id)
        self._enforce_bounds(self._rootless.get(trace_id))
        return attached

    def _enforce_bounds(self, service: str | None) -> None:
        s = self.settings
        if service is not None:
            same = self._rootless_by_service.get(service)
            while same and len(same) > s.max_incomplete_per_service:
                self._emit(next(iter(same)), "evicted")
                self.counters["traces_evicted"] += 1
        while self._buffers and (len(self._buffers) > s.max_traces or self._spans > s.max_spans):
            # Root-less traces first: a rooted one leaves within grace_s anyway.
            trace_id = next(iter(self._rootless)) if self._rootless else next(iter(self._buffers))
            self._emit(trace_id, "evicted")
            self.counters["traces_evicted"] += 1

    def _forget_rootless(self, trace_id: str) -> None:
        service = self._rootless.pop(trace_id, None)
        if service is None:
            return
        same = self._rootless_by_service[service]
        del same[trace_id]
        if not same:
            del self._rootless_by_service[service]

    # -- output --------------------------------------------------------------------------------

    def pop_ready(self) -> list[AssembledTrace[S]]:
        """Traces that are complete, timed out or evicted, oldest first. Never blocks."""
        now = self._clock()
        grace, max_wait = self.settings.grace_s, self.settings.max_wait_s
        while self._rooted:
            trace_id, seen = next(iter(self._rooted.items()))
            if now - seen < grace:
                break
            buf = self._buffers[trace_id]
            self._emit(trace_id, "rescore" if buf.rescore else "complete")
            if buf.rescore:
                self.counters["traces_rescored"] += 1
        while self._buffers:
            trace_id, buf = next(iter(self._buffers.items()))
            if now - buf.first_seen < max_wait:
                break
            rooted = buf.root_seen is not None
            self._emit(trace_id, "complete" if rooted else "timeout")
            if not rooted:
                self.counters["traces_timed_out"] += 1
        ready, self._ready = self._ready, []
        return ready

    def drain(self) -> list[AssembledTrace[S]]:
        """Emit every buffered trace now (shutdown), plus anything already ready."""
        for trace_id in list(self._buffers):
            self._emit(trace_id, "drain")
            self.counters["traces_drained"] += 1
        ready, self._ready = self._ready, []
        return ready

    def forget(self, partitions: Iterable[tuple[str, int]]) -> list[AssembledTrace[S]]:
        """Remove buffered traces holding records of these (revoked) partitions, and forget
        which of their traces were emitted.

        Returned so the caller releases their records; if this consumer later reads their spans
        again they assemble afresh. O(buffered + remembered traces): rebalances are rare.
        """
        gone = set(partitions)
        out: list[AssembledTrace[S]] = []
        for trace_id in [
            t
            for t, b in self._buffers.items()
            if any((r.topic, r.partition) in gone for r in b.refs)
        ]:
            buf = self._buffers.pop(trace_id)
            self._rooted.pop(trace_id, None)
            self._forget_rootless(trace_id)
            self._spans -= len(buf.spans)
            out.append(
                AssembledTrace(
                    trace_id,
                    buf.spans,
                    buf.refs,
                    "drain",
                    buf.root_seen is not None,
                    buf.first_seen,
                )
            )
        keep: list[AssembledTrace[S]] = []
        for t in self._ready:
            (out if any((r.topic, r.partition) in gone for r in t.refs) else keep).append(t)
        self._ready = keep
        # Emitted traces of these partitions are forgotten too: their uncommitted records will be
        # read again (by this consumer after a re-assignment, or by another), and must assemble
        # as new traces rather than be taken for late spans and skipped.
        for trace_id in [t for t, (_, parts) in self._emitted.items() if parts & gone]:
            dropped = self._emitted.pop(trace_id)[0]
            if dropped:
                self._emitted_spans -= len(dropped)
        return out

    def _emit(self, trace_id: str, cause: Cause) -> None:
        # Every trace handed on counts as assembled, whatever the cause: the one definition
        # that the status lines and the pipeline-health panel share (the cause counters are
        # parts of it).
        self.counters["traces_assembled"] += 1
        buf = self._buffers.pop(trace_id)
        self._rooted.pop(trace_id, None)
        self._forget_rootless(trace_id)
        self._spans -= len(buf.spans)
        self._ready.append(
            AssembledTrace(
                trace_id, buf.spans, buf.refs, cause, buf.root_seen is not None, buf.first_seen
            )
        )
        self._remember(trace_id, buf.spans, frozenset((r.topic, r.partition) for r in buf.refs))

    def _remember(self, trace_id: str, spans: list[S], parts: frozenset[tuple[str, int]]) -> None:
        s = self.settings
        if s.late_window_traces == 0:
            return
        keep = spans if s.late_spans == "rescore" else None
        old = self._emitted.pop(trace_id, None)
        if old and old[0]:
            self._emitted_spans -= len(old[0])
        if keep is None:
            entry = self._shared_entries.get(parts)
            if entry is None:
                if len(self._shared_entries) >= _MAX_SHARED_ENTRIES:
                    self._shared_entries.clear()  # bounded: a consumer has few partitions
                entry = self._shared_entries[parts] = (None, parts)
            self._emitted[trace_id] = entry
        else:
            self._emitted[trace_id] = (keep, parts)
        if keep:
            self._emitted_spans += len(keep)
        while self._emitted and (
            len(self._emitted) > s.late_window_traces or self._emitted_spans > s.late_window_spans
        ):
            _, (dropped, _parts) = self._emitted.popitem(last=False)
            if dropped:
                self._emitted_spans -= len(dropped)


_MAX_SHARED_ENTRIES = 1024


def _is_root(span: SpanLike) -> bool:
    return not span.parent_span_id
