"""The live scorer service: a Kafka consumer group that scores RAG traces into ClickHouse.

Data path (stages are verbs, each a step module; every step has the interface of :mod:`.steps`,
after getsentry/arroyo's processing strategies)::

    consume: processor.StreamProcessor ── the group, offsets, traces in flight; pauses, rebalances
      → decode: decode.DecodeStep ── OTLP protobuf → spans by trace; refused → dead_letter
      → assemble: assemble.AssembleStep ── spans into traces (trace_buffer.TraceAssembler)
      → prepare: prepare.PrepareStep ── extract, sample, redact; traces not scored → commit
      → evaluate: evaluate.EvaluateStep ── in-flight bound, judges on an event loop
      → write: write.WriteStep ── ClickHouse writer; refused or failed rows held and retried
      → commit: commit.CommitStep ── release finished records, have low watermarks committed
    dead_letter: dead_letter.DeadLetterStep ── undecodable records → the dead-letter topic

What flows between steps and threads is declared in :mod:`.messages`; the wiring, threads and
guarantees are in :mod:`.service`; ``build_scorer(settings)`` (:mod:`.factory`) wires the real
parts. The command line is ``ragpulse scorer`` (``ragpulse.deploy.commands.scorer``); counter
names are in :mod:`.telemetry`. This module only re-exports.
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
