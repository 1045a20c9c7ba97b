"""What flows between the scorer's steps and threads: small typed values.

Messages between steps, all on the consumer thread: which one travels on which link of the
chain is drawn in docs/architecture.md ("Path 2").

Messages from other threads to the consumer thread, through :class:`~.steps.Inbox`:

* :class:`Scored` and :class:`Unwritable` from the event-loop thread (a judged trace's rows, or
  why they could not be built);
* :class:`WriteOutcome` from the thread that completes the writer's future;
* :class:`DeadLetterOutcome` from kafka-python's producer I/O thread.

Messages are frozen. :class:`TraceWork` and :class:`DeadLetter` are not: they are the unit of
work a message refers to, mutated by the consumer thread only (attempts, the retry time); the
other threads only read them, or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..model import Sample
from ..store.rows import ScoredTraceMeta, ScoreRow
from ..traces.span import Span
from .offsets import RecordRef
from .trace_buffer import AssembledTrace

__all__ = [
    "DeadLetter",
    "DeadLetterOutcome",
    "DecodedRecord",
    "Done",
    "KeptTrace",
    "Record",
    "Scored",
    "ScoringDecision",
    "TracePreparer",
    "TraceWork",
    "Undecodable",
    "Unwritable",
    "WriteOutcome",
]


@dataclass(frozen=True, slots=True)
class Record:
    """A consumed Kafka record, tracked under ``ref``."""

    ref: RecordRef
    key: bytes | None
    value: bytes
    headers: Sequence[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class DecodedRecord:
    """A record's spans grouped by trace id."""

    ref: RecordRef
    traces: Mapping[str, list[Span]]


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A record the decoder refused: ``reason`` is a short code, ``detail`` the message."""

    record: Record
    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class ScoringDecision:
    """The prepare step's decision for one assembled trace (what the preparer returns).

    ``keep`` is the sampling decision and ``rate`` its probability (stored on every row for
    reweighting). A kept trace with ``sample=None`` is unscorable: it is written as one null row
    per metric carrying ``reason``. A trace that is no RAG query at all (``reason`` ``not_rag``,
    ``keep`` false) is counted and gets no rows. ``meta`` is the row metadata (``None`` drops
    the trace, e.g. when its spans carry no usable trace id; counted).
    """

    keep: bool
    rate: float
    sample: Sample | None
    reason: str | None
    meta: ScoredTraceMeta | None


TracePreparer = Callable[[AssembledTrace[Span]], ScoringDecision]
"""Extract and sample one assembled trace (default: ``pipeline.prepare.build_preparer``)."""


@dataclass(eq=False, slots=True)
class TraceWork:
    """One trace from the prepare step until the commit step (identity-hashed, mutable)."""

    trace_id: str
    refs: list[RecordRef]
    rows: list[ScoreRow] = field(default_factory=list)
    attempts: int = 0
    retry_at: float = 0.0


@dataclass(frozen=True, slots=True)
class KeptTrace:
    """A trace the sampler kept, with its decision: the prepare step's message to the evaluate
    step, on its way to the judge (or to null rows when it is unscorable)."""

    work: TraceWork
    decision: ScoringDecision


@dataclass(frozen=True, slots=True)
class Scored:
    """A trace's score rows, ready to write."""

    work: TraceWork
    rows: list[ScoreRow]


@dataclass(frozen=True, slots=True)
class Unwritable:
    """A trace whose rows could not be built (malformed metadata): it is dropped, counted."""

    work: TraceWork
    error: BaseException


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """One writer submission settled: ``error`` is ``None`` once ClickHouse acknowledged it;
    ``expired`` rows of it the table's TTL deleted on insert."""

    works: tuple[TraceWork, ...]
    error: BaseException | None
    expired: int = 0


@dataclass(eq=False, slots=True)
class DeadLetter:
    """An undecodable record on its way to the dead-letter topic (mutable: retries)."""

    ref: RecordRef
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]
    attempts: int = 0
    retry_at: float = 0.0


@dataclass(frozen=True, slots=True)
class DeadLetterOutcome:
    """One dead-letter send settled: ``error`` is ``None`` once the topic acknowledged it."""

    letter: DeadLetter
    error: BaseException | None


@dataclass(frozen=True, slots=True)
class Done:
    """Records a trace (``trace``) or a dead letter no longer holds: the commit step's input."""

    refs: Sequence[RecordRef]
    trace: TraceWork | None = None

