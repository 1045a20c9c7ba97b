"""The same RAG trace in every convention yields the same (question, contexts, answer).

Path under test, all real: OpenTelemetry SDK spans → the SDK's OTLP protobuf encoder → record
bytes → SpanDecoder → group by trace → extract.
"""

from __future__ import annotations

import pytest

from ragpulse.scorer.traces import SpanDecoder, extract, group_by_trace

from .conventions import ANSWER, DOCS, EXPECTED_SOURCES, MODEL, MODELS, QUESTION, WRITERS
from .sdk import Recorder, one_trace, to_record


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_same_sample_from_every_convention(writer: str) -> None:
    rec = Recorder()
    WRITERS[writer](rec)
    spans = one_trace(to_record(rec.finished()))

    ex = extract(spans)

    assert ex.reason is None, (ex.reason, ex.meta.sources)
    assert ex.sample is not None
    assert ex.sample.id == spans[0].trace_id
    assert ex.sample.question == QUESTION
    assert ex.sample.contexts == DOCS
    assert ex.sample.answer == ANSWER
    for part, source in EXPECTED_SOURCES[writer].items():
        assert ex.meta.sources[part] == source, (part, ex.meta.sources)
    assert ex.meta.service == "rag-app" and ex.meta.environment == "prod"
    assert ex.meta.model == MODELS.get(writer, MODEL)


def test_every_convention_in_one_unkeyed_record() -> None:
    """rotel / otelcol without partitioning: many traces of several services in one record."""
    recs = [Recorder(service=f"svc-{i % 3}") for i in range(len(WRITERS))]
    expected_service = {}
    spans = []
    for rec, (name, write) in zip(recs, sorted(WRITERS.items())):
        write(rec)
        finished = rec.finished()
        expected_service[format(finished[0].context.trace_id, "032x")] = (
            name,
            rec.provider.resource.attributes["service.name"],
        )
        spans.extend(finished)
    record = to_record(spans)
    decoder = SpanDecoder()

    traces = group_by_trace(decoder.decode(record))

    assert len(traces) == len(WRITERS)
    assert decoder.stats()["spans_decoded"] == len(spans)
    for trace_id, trace_spans in traces.items():
        ex = extract(trace_spans)
        assert ex.sample is not None, expected_service[trace_id]
        assert (ex.sample.question, ex.sample.contexts, ex.sample.answer) == (
            QUESTION,
            DOCS,
            ANSWER,
        )
        assert ex.meta.service == expected_service[trace_id][1]


def test_spans_split_across_records_reassemble() -> None:
    """otelcol with partition_traces_by_id: a trace whose spans came in two batches is two records
    with the same key; regrouped spans extract the same as one record."""
    rec = Recorder()
    WRITERS["openinference"](rec)
    finished = rec.finished()
    decoder = SpanDecoder()
    spans = decoder.decode(to_record(finished[:1])) + decoder.decode(to_record(finished[1:]))

    (trace_spans,) = group_by_trace(spans).values()
    ex = extract(trace_spans)

    assert ex.sample is not None and ex.sample.contexts == DOCS and ex.sample.answer == ANSWER
    assert decoder.stats()["records_decoded"] == 2


def test_records_of_this_projects_collector() -> None:
    """The collector splits an export into one keyed record per trace (otelcol's
    partition_traces_by_id shape); each record decodes to exactly the trace its key names."""
    from ragpulse.collector.split import split_request

    rec = Recorder()
    for name in sorted(WRITERS):
        WRITERS[name](rec)
    result = split_request(to_record(rec.finished()))
    decoder = SpanDecoder()

    assert len(result.records) == len(WRITERS)
    for record in result.records:
        spans = decoder.decode(record.value)
        assert {s.trace_id for s in spans} == {record.key.decode()}
        ex = extract(spans)
        assert ex.sample is not None
        assert (ex.sample.question, ex.sample.contexts, ex.sample.answer) == (
            QUESTION,
            DOCS,
            ANSWER,
        )
