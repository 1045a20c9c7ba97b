"""A RAG trace with a context larger than the 1 MB Kafka record limit is still scored (issue 10,
part 5). It used to be refused as a whole (no rows at all); now the collector cuts its longest
values to fit, counts it, and the scorer judges the shortened trace.

Real parts: the collector over OTLP/HTTP with its default limits, the tansu broker, the scorer
service, chDB; the judge records what it was sent.
"""

from __future__ import annotations

import http.client
import time
from typing import Any
from urllib.parse import urlsplit

import pytest

from ragpulse.collector.service import build_collector
from ragpulse.scorer.judges.base import Needs
from ragpulse.scorer.model import Fact, Finding, Sample
from ragpulse.scorer.pipeline import build_scorer
from tests.collector.conftest import collector_settings
from tests.scorer.doubles import TableJudge
from tests.scorer.pipeline.conftest import FACTS, METRICS, wait_for
from tests.security.corpus import rag_spans, request, trace_id

pytestmark = pytest.mark.slow


class RecordingJudge(TableJudge):
    def __init__(self) -> None:
        super().__init__(FACTS)
        self.samples: list[Sample] = []

    async def gather(self, sample: Sample, needs: Needs) -> dict[Fact, Finding]:
        self.samples.append(sample)
        return await super().gather(sample, needs)


def test_a_context_over_the_record_limit_is_cut_and_the_trace_scored(
        kafka_broker_module: Any, topic: str, make_settings: Any, writer: Any, chdb_client: Any,
        rag_schema: Any) -> None:
    big = "The warranty covers parts and labour for two years. " * 40_000  # ~2 MB
    tid = trace_id("oversized")
    body = request(rag_spans(tid, contexts=[big, "Returns are accepted within 30 days."],
                             start=time.time_ns())).SerializeToString()
    assert len(body) > 2_000_000
    collector = build_collector(collector_settings(kafka_broker_module.bootstrap, topic)).start()
    try:
        url = urlsplit(collector.http_endpoint or "")
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        conn.request("POST", "/v1/traces", body=body,
                     headers={"Content-Type": "application/x-protobuf"})
        resp = conn.getresponse()
        resp.read()
        conn.close()
        assert resp.status == 200
        stats = collector.stats()
        assert stats["records_truncated"] == 1 and stats["spans_rejected"] == 0
    finally:
        collector.shutdown(drain_timeout_s=10)

    judge = RecordingJudge()
    svc = build_scorer(make_settings(), judge=judge, writer=writer, client=chdb_client).start()
    try:
        wait_for(lambda: svc.stats()["traces_done"] >= 1, what="the oversized trace written")
    finally:
        svc.shutdown()
    (sample,) = judge.samples
    assert len(sample.contexts) == 2
    cut = next(c for c in sample.contexts if c.startswith("The warranty"))
    assert len(cut) < len(big)  # the collector cut it (and the scorer bounds text it judges)
    assert "Returns are accepted within 30 days." in sample.contexts
    rows = chdb_client.query(
        f"SELECT metric, status FROM `{rag_schema.database}`.scores FINAL WHERE trace_id = {{t:String}}",
        parameters={"t": tid}).result_rows
    assert {m for m, _ in rows} == set(METRICS) and {s for _, s in rows} == {"ok"}
