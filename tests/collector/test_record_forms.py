"""Issue 41, item 3, end to end: the same OTLP requests through a real collector, once as
per-trace records (keyed, otelcol's ``partition_traces_by_id`` format) and once as
per-partition records (unkeyed, each holding a request's traces of one partition), to a real
tansu broker, read by the real scorer into real chDB: the same traces get the same scores, and
every trace's spans are in exactly one partition, the one its trace id picks."""

from __future__ import annotations

import urllib.request
from collections import defaultdict
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragpulse.collector.service import build_collector
from ragpulse.common import KafkaSettings, ensure_topic, partition_for_key
from ragpulse.scorer.pipeline import build_scorer
from testkit.traffic import encode, make_traces
from tests.collector.conftest import collector_settings, read_records
from tests.infra_kafka import unique_topic
from tests.scorer.pipeline.conftest import (  # noqa: F401 (fixtures)
    make_settings,
    table_judge,
    topic,
    wait_for,
    writer,
)

pytestmark = pytest.mark.slow

TRACES = make_traces(24, seed=41, unscorable_every=6)


def _requests() -> list[bytes]:
    """Three requests of 8 traces over two services; the first trace's root span comes in a
    request of its own later (a trace in two records, assembled by the scorer)."""
    out = []
    for i in range(0, 24, 8):
        groups = []
        for t in TRACES[i:i + 8]:
            spans = t.spans()
            if t is TRACES[0]:
                spans = [s for s in spans if s.parent_span_id]
            groups.append((t.service, spans))
        out.append(encode(groups))
    root = [s for s in TRACES[0].spans() if not s.parent_span_id]
    out.append(encode([(TRACES[0].service, root)]))
    return out


def _collect(bootstrap: str, name: str, form: str) -> list[Any]:
    """The requests through a collector producing ``form`` records to topic ``name``; its
    records."""
    settings = collector_settings(bootstrap, name, otlp={"grpc_enabled": False},
                                  producer={"records": form, "create_topic": False})
    collector = build_collector(settings).start()
    try:
        for body in _requests():
            request = urllib.request.Request(collector.http_endpoint or "", data=body,
                                             headers={"Content-Type": "application/x-protobuf"})
            with urllib.request.urlopen(request, timeout=30) as resp:
                assert resp.status == 200
    finally:
        collector.shutdown(drain_timeout_s=10)
    assert collector.stats()["spans_acked"] == 24 * 3
    return read_records(settings.kafka, 1)


def _partitions_by_trace(records: list[Any]) -> dict[str, set[int]]:
    where: dict[str, set[int]] = defaultdict(set)
    for record in records:
        for rs in ExportTraceServiceRequest.FromString(record.value).resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    where[span.trace_id.hex()].add(record.partition)
    return where


def _scores(make_settings: Any, name: str, writer: Any, chdb_client: Any,  # noqa: F811
            database: str) -> dict[tuple[str, str], tuple[Any, ...]]:
    settings = make_settings(kafka={"topic": name, "dlq_topic": f"{name}.dlq"})
    scorer = build_scorer(settings, judge=table_judge(), writer=writer, client=chdb_client).start()
    try:
        wait_for(lambda: scorer.stats()["traces_done"] >= 24, what="24 traces scored")
    finally:
        scorer.shutdown()
    rows = chdb_client.query(
        f"SELECT trace_id, metric, value, status, reason, service, question, answer "
        f"FROM `{database}`.scores FINAL").result_rows
    return {(r[0], r[1]): r[2:] for r in rows}


def test_the_scorer_scores_the_same_traces_from_either_record_form(
        kafka_broker_module: Any, make_settings: Any, writer: Any, chdb_client: Any,  # noqa: F811
        rag_schema: Any) -> None:
    bootstrap = kafka_broker_module.bootstrap
    scores = {}
    records_of = {}
    for form in ("per_trace", "per_partition"):
        name = unique_topic(form)
        ensure_topic(KafkaSettings(bootstrap_servers=bootstrap, topic=name,
                                   dlq_topic=f"{name}.dlq"), partitions=3)
        records = records_of[form] = _collect(bootstrap, name, form)
        where = _partitions_by_trace(records)
        assert sorted(where) == sorted(t.trace_id for t in TRACES)
        for trace_id, partitions in where.items():  # one partition, the one otelcol picks
            assert partitions == {partition_for_key(trace_id.encode(), 3)}, trace_id
        chdb_client.command(f"TRUNCATE TABLE `{rag_schema.database}`.scores")
        scores[form] = _scores(make_settings, name, writer, chdb_client, rag_schema.database)
    keyed, grouped = records_of["per_trace"], records_of["per_partition"]
    assert len(keyed) == 25 and all(r.key for r in keyed)  # 24 traces + the late root
    assert len(grouped) <= 3 * 4 and all(r.key is None for r in grouped)  # <= a record per partition and request
    assert len(grouped) < len(keyed)
    assert len(scores["per_trace"]) == 24 * 3
    assert scores["per_partition"] == scores["per_trace"]
