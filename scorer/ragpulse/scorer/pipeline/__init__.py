"""The live scorer service: a Kafka consumer group that scores RAG traces into ClickHouse.

The chain of steps (consume, decode, assemble, prepare, evaluate, write, commit, with
dead_letter beside decode), each a module named for its stage behind the interface of
:mod:`.steps`, is drawn once, with the message on each link, in docs/architecture.md ("Path 2");
the wiring, threads and guarantees are in :mod:`.service`; ``build_scorer(settings)``
(:mod:`.factory`) wires the real parts. The command line is ``ragpulse scorer``
(``ragpulse.deploy.commands.scorer``); counter names are in :mod:`.telemetry`. This module only re-exports.
"""

from __future__ import annotations

from .factory import build_scorer, freeze_startup_heap
from .offsets import OffsetTracker, RecordRef
from .service import RowSink, Scorer, ScorerError, ScoringDecision, TracePreparer
from .settings import ConsumerSettings, EvaluateSettings, ScorerSettings, WriteSettings
from .telemetry import COUNTERS, GAUGES, PARTS
from .trace_buffer import AssembledTrace, AssemblySettings, TraceAssembler

__all__ = [
    "COUNTERS",
    "GAUGES",
    "PARTS",
    "AssembledTrace",
    "AssemblySettings",
    "ConsumerSettings",
    "EvaluateSettings",
    "OffsetTracker",
    "RecordRef",
    "RowSink",
    "Scorer",
    "ScorerError",
    "ScorerSettings",
    "ScoringDecision",
    "TraceAssembler",
    "TracePreparer",
    "WriteSettings",
    "build_scorer",
    "freeze_startup_heap",
]
