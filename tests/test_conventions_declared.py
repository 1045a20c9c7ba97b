"""Each instrumentation convention is declared once (``ragpulse.common.conventions``), and every
part that knows conventions agrees with the declarations: the collector's RAG filter, the
extractor, the content advice, docs/instrumentation.md's table and otelcol's filter.

The end-to-end test sends one trace of every documented convention (the writers of
``tests/scorer/traces/conventions.py``, spans made by the OpenTelemetry SDK) through the real
collector's ingest with its default filter, decodes what it exported and extracts it.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from ragpulse.collector.config import FilterSettings
from ragpulse.collector.exporter import ExportResult
from ragpulse.collector.ingest import Ingest
from ragpulse.collector.split import RAG_MARKERS, TraceRecord
from ragpulse.common import CONVENTIONS, convention_matrix, conventions_in
from ragpulse.common.schema import CONTENT_SETTINGS, content_advice
from ragpulse.scorer.traces import SpanDecoder, extract
from ragpulse.scorer.traces.extract.sources import TABLES

from .scorer.traces.conventions import ANSWER, DOCS, QUESTION, WRITERS
from .scorer.traces.sdk import Recorder, to_record

REPO = Path(__file__).resolve().parents[1]
OTELCOL = REPO / "deploy" / "otelcol" / "config.yaml"
DOC = REPO / "docs" / "instrumentation.md"
NIL_CHECK = re.compile(r'attributes\["([^"]+)"\] == nil')


class _Sink:
    """The collector's exporter protocol, keeping what it is given (the Kafka leg is tested in
    tests/collector)."""

    def __init__(self) -> None:
        self.records: list[TraceRecord] = []

    def export(self, records: Sequence[TraceRecord]) -> ExportResult:
        self.records.extend(records)
        return ExportResult(accepted_spans=sum(r.spans for r in records),
                            accepted_records=len(records))


def _otelcol_keys() -> list[str]:
    """The keys of otelcol's ``filter/rag``, which drops a span when all of them are absent."""
    (condition,) = yaml.safe_load(OTELCOL.read_text())["processors"]["filter/rag"]["traces"]["span"]
    checks = [c.strip() for c in condition.split(" and ")]
    keys = [m.group(1) for c in checks if (m := NIL_CHECK.fullmatch(c))]
    assert len(keys) == len(checks), f"filter/rag is not a conjunction of nil checks: {condition}"
    return keys


def _otelcol_keeps(attributes: dict[str, object]) -> bool:
    return any(k in attributes for k in _otelcol_keys())


def _writer_spans(name: str):  # type: ignore[no-untyped-def]
    rec = Recorder()
    WRITERS[name](rec)
    return rec.finished()


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_every_documented_convention_passes_the_collector_and_is_extracted(writer: str) -> None:
    sink = _Sink()
    ingest = Ingest(FilterSettings(), sink)  # the default filter: mode "rag"

    result = ingest.consume_proto(to_record(_writer_spans(writer)))

    assert ingest.stats()["traces_dropped_non_rag"] == 0, f"{writer}: dropped as non-RAG"
    (record,) = sink.records
    assert record.rag and result.accepted_spans == record.spans
    ex = extract(SpanDecoder().decode(record.value))
    assert ex.sample is not None, (writer, ex.reason)
    assert (ex.sample.question, ex.sample.contexts, ex.sample.answer) == (QUESTION, DOCS, ANSWER)


def test_every_declared_convention_has_a_documented_trace() -> None:
    """Each declaration is exercised: some writer's trace shows it (by the extractor's
    detection), so the end-to-end test above covers every convention."""
    shown: set[str] = set()
    for name in WRITERS:
        sink = _Sink()
        Ingest(FilterSettings(), sink).consume_proto(to_record(_writer_spans(name)))
        shown.update(extract(SpanDecoder().decode(sink.records[0].value)).meta.conventions)
    assert {c.id for c in CONVENTIONS} <= shown, {c.id for c in CONVENTIONS} - shown


def test_otelcol_filter_tests_the_declared_keys() -> None:
    keys = _otelcol_keys()
    declared = [k for c in CONVENTIONS for k in c.otelcol]
    assert sorted(keys) == sorted(declared), (
        "deploy/otelcol/config.yaml's filter/rag and the `otelcol` keys of "
        "ragpulse.common.conventions differ"
    )
    comments = OTELCOL.read_text()
    for c in CONVENTIONS:
        for key in c.otelcol:
            assert key.startswith(c.markers + c.keeps), (c.id, key)
        if not c.otelcol:  # marked by span events only: the config must say it drops them
            assert all(f"`{m}`" in comments for m in c.markers), c.id


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_otelcol_filter_keeps_every_span_that_shows_a_convention(writer: str) -> None:
    """otelcol's filter, evaluated as its conjunction of nil checks, keeps each span whose
    attributes show a declared convention (a span marked only by events cannot be kept: the
    config says so)."""
    for span in _writer_spans(writer):
        attributes = dict(span.attributes or {})
        if conventions_in(attributes):
            assert _otelcol_keeps(attributes), (writer, span.name, sorted(attributes))


def test_collector_markers_are_the_declared_ones() -> None:
    assert set(RAG_MARKERS) == {m for c in CONVENTIONS for m in c.markers + c.keeps}


def test_content_advice_names_each_declared_switch() -> None:
    for c in CONVENTIONS:
        if c.content:
            assert CONTENT_SETTINGS[c.id] == c.content
            assert c.content in content_advice([c.id])
    # OpenLLMetry's LLM spans carry gen_ai.* too: its own switch is the one named.
    assert CONTENT_SETTINGS["gen_ai"] not in content_advice(["openllmetry", "gen_ai"])


def test_declared_reader_modules_hold_rows_of_their_convention() -> None:
    rows = [row for table in TABLES.values() for row in table]
    for c in CONVENTIONS:
        names = {getattr(row, "convention") for row in rows}
        assert c.name in names, f"{c.id}: no source row reads it"
        if c.readers is not None:
            module = importlib.import_module(f"ragpulse.scorer.traces.extract.{c.readers}")
            assert any(getattr(row.read, "__module__", "") == module.__name__
                       and row.convention.startswith(c.name) for row in rows), c.id


def test_docs_convention_table_is_the_declarations() -> None:
    found = re.search(r"<!-- conventions:[^>]*-->\n(.*?)<!-- /conventions -->", DOC.read_text(),
                      re.DOTALL)
    assert found is not None, "docs/instrumentation.md lost its conventions block"
    assert found.group(1) == convention_matrix(), (
        "docs/instrumentation.md's convention table differs from the declarations; paste "
        "ragpulse.common.convention_matrix() between the markers"
    )
