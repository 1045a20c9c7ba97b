"""The judge endpoint answers 429 for a while, then recovers: the scorer's backlog stays bounded
(consumption paused by backpressure at ``evaluate.max_in_flight``), nothing is committed while
nothing is written, and afterwards every trace is scored — none lost, none turned into an error.

Real parts: tansu broker, chDB, the scorer service, the real LLM judge against the real fake
OpenAI server (testkit/openai_server.py), whose handler answers 429 with ``retry-after-ms``
while the outage lasts and like the content-aware model afterwards.
"""

from __future__ import annotations

import threading

import pytest

from ragpulse.scorer.evaluator import Evaluator
from ragpulse.scorer.judges.llm import LLMJudge, LLMJudgeSettings
from ragpulse.scorer.pipeline import Scorer
from ragpulse.scorer.pipeline.prepare import build_preparer
from ragpulse.scorer.traces import Sampler
from testkit.judge import TableEmbedder
from testkit.openai_server import FakeOpenAIServer, Recorded, Reply
from testkit.traffic import make_traces, otelcol_records
from tests.scorer.llm.conftest import content_aware
from tests.scorer.pipeline.conftest import METRICS, committed, end_offsets, produce, wait_for

# Real processes and outages of a few seconds each: the project's 'slow' marker (still run in CI).
pytestmark = pytest.mark.slow

N_TRACES = 24
MAX_IN_FLIGHT = 6


def test_judge_rate_limited_for_a_while_pauses_consumption_then_everything_is_scored(
    kafka_broker_module, topic, make_settings, writer, chdb_client, rag_schema
):
    down = threading.Event()
    down.set()

    def handler(rec: Recorded) -> Reply:
        if down.is_set():
            return Reply.rate_limited(retry_after_ms=150)
        return content_aware(rec)

    produce(kafka_broker_module.bootstrap, topic,
            otelcol_records(make_traces(N_TRACES, seed=9)))
    settings = make_settings(evaluate={"metrics": list(METRICS), "max_in_flight": MAX_IN_FLIGHT,
                                       "max_concurrency": 3})
    with FakeOpenAIServer(handler=handler) as server:
        judge = LLMJudge(LLMJudgeSettings(
            base_url=server.base_url, api_key="sk-test", model="fake-judge",
            requests_per_minute=60_000, request_timeout_s=5.0, deadline_s=120.0,
            max_retries=20, backoff_initial_s=0.05, backoff_max_s=0.3,
        ), embedder=TableEmbedder())
        evaluator = Evaluator(judge, list(METRICS), max_concurrency=3)
        # Scorer itself rather than build_scorer: owns_judge closes the judge on the scorer's
        # event loop, the one its HTTP connections belong to.
        svc = Scorer(settings, evaluator=evaluator, writer=writer, owns_judge=True,
                     preparer=build_preparer(Sampler(settings.sampling), settings.extraction)
                     ).start()
        try:
            wait_for(lambda: svc.stats()["paused"] == 1
                     and svc.stats()["traces_in_flight"] == MAX_IN_FLIGHT,
                     what="paused with the in-flight bound reached")
            wait_for(lambda: judge.stats.as_dict()["rate_limited_429"] >= 10,
                     what="the judge retrying through 429s")
            st = svc.stats()
            # bounded: never more traces in evaluation than the bound, nothing written or
            # committed while the judge cannot answer
            assert st["traces_in_flight"] == MAX_IN_FLIGHT and st["traces_done"] == 0
            assert committed(kafka_broker_module.bootstrap, settings.consumer.group_id) == {}
            limited = judge.stats.as_dict()["rate_limited_429"]
            down.clear()  # the endpoint recovers
            wait_for(lambda: svc.stats()["traces_done"] == N_TRACES, what="every trace scored")
            ends = end_offsets(kafka_broker_module.bootstrap, topic)
            wait_for(lambda: committed(kafka_broker_module.bootstrap,
                                       settings.consumer.group_id) == ends,
                     what="offsets committed to the end")
            assert svc.stats()["paused"] == 0
        finally:
            svc.shutdown()
    rows = chdb_client.query(
        f"SELECT status, reason, count() FROM `{rag_schema.database}`.scores FINAL "
        "GROUP BY status, reason"
    ).result_rows
    by_status = {(s, r): n for s, r, n in rows}
    scorable = sum(n for (s, r), n in by_status.items() if r != "no_contexts")
    # nothing became a rate_limited/judge_error score: the outage only delayed the scores
    assert not [k for k in by_status if k[1] in ("rate_limited", "judge_error", "judge_timeout")]
    assert sum(by_status.values()) == N_TRACES * len(METRICS) and scorable > 0
    print(f"\njudge outage: 429s served {limited}+, max in flight {MAX_IN_FLIGHT}, "
          f"traces scored {N_TRACES}, error scores 0")
