"""Privacy wired into the live scorer: real tansu broker, real chDB, ``build_scorer``.

The judge the scorer builds around is a recording table judge, so the test sees exactly what a
judge would have been sent; ClickHouse is read back to see what was stored.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ragpulse.scorer.judges.base import Needs
from ragpulse.scorer.metrics import EVIDENCE
from ragpulse.scorer.model import Fact, Finding, Sample
from ragpulse.scorer.pipeline import build_scorer
from testkit.traffic import BASE_NS, RagTrace, otelcol_records
from tests.scorer.doubles import TableJudge
from tests.scorer.pipeline.conftest import FACTS, METRICS, produce, wait_for

PII = ("ann.lee@example.com", "090-1234-5678", "4111 1111 1111 1111", "13812345678")
TRACES = [
    RagTrace(
        trace_id=f"{i + 1:032x}",
        service="support-bot",
        question=q,
        contexts=("Warranty claims: mail ann.lee@example.com or call 090-1234-5678.",
                  "カード番号4111 1111 1111 1111は使えません。"),
        answer=a,
        start_ns=BASE_NS + i * 1_000_000_000,
    )
    for i, (q, a) in enumerate([
        ("How do I claim? My number is 090-1234-5678.",
         "Mail ann.lee@example.com; we will call 090-1234-5678."),
        ("我的手机是13812345678，怎么保修？", "请发邮件到ann.lee@example.com。"),
        ("What does the warranty cover?", "The warranty covers parts."),
    ])
]


class RecordingJudge(TableJudge):
    """Records the samples it is sent; like a real judge, names the passage that came closest
    to its unsupported statement from the sample it was given (its first context)."""

    def __init__(self) -> None:
        super().__init__(FACTS)
        self.samples: list[Sample] = []

    async def gather(self, sample: Sample, needs: Needs) -> dict[Fact, Finding]:
        self.samples.append(sample)
        out = await super().gather(sample, needs)
        support = out.get(Fact.STATEMENT_SUPPORT)
        if support is not None:
            evidence = [None if ok else (0, sample.contexts[0]) for ok in support.value]
            out[Fact.STATEMENT_SUPPORT] = dataclasses.replace(
                support, extra={**support.extra, EVIDENCE: evidence})
        return out


def _stored(client: Any, db: str) -> list[tuple[str, str, str, str]]:
    return client.query(
        f"SELECT trace_id, question, answer, explanation FROM `{db}`.scores FINAL "
        "ORDER BY trace_id, metric"
    ).result_rows


@pytest.mark.parametrize("store_text", [True, False], ids=["redacted-excerpts", "no-text"])
def test_the_judge_and_clickhouse_never_see_recognised_values(
    kafka_broker_module, topic, make_settings, writer, chdb_client, rag_schema, store_text
):
    produce(kafka_broker_module.bootstrap, topic, otelcol_records(TRACES))
    settings = make_settings(privacy={"store_text": store_text})
    judge = RecordingJudge()
    svc = build_scorer(settings, judge=judge, writer=writer, client=chdb_client).start()
    try:
        wait_for(lambda: svc.stats()["traces_done"] >= len(TRACES), what="traces written")
    finally:
        svc.shutdown()
    # the judge saw every trace, redacted
    assert len(judge.samples) == len(TRACES)
    seen = "\n".join(s.question + s.answer + "".join(s.contexts) for s in judge.samples)
    for value in PII:
        assert value not in seen
    assert "[EMAIL_1]" in seen and "[PHONE_1]" in seen and "[CARD_1]" in seen
    # ClickHouse holds every trace, with redacted excerpts or none at all
    rows = _stored(chdb_client, rag_schema.database)
    assert len(rows) == len(TRACES) * len(METRICS)
    stored = "\n".join(q + a + e for (_, q, a, e) in rows)
    for value in PII:
        assert value not in stored
    by_trace = {t: (q, a) for (t, q, a, _) in rows}
    # The unsupported statement and the passage that came closest: redacted, or not stored.
    unsupported = chdb_client.query(
        f"SELECT trace_id, unsupported FROM `{rag_schema.database}`.scores FINAL "
        "WHERE metric = 'faithfulness' ORDER BY trace_id").result_rows
    assert len(unsupported) == len(TRACES)
    for value in PII:
        assert value not in repr(unsupported)
    if store_text:  # the first context as the judge saw it: "... call [PHONE_1]." (or _2)
        sent = {s.id: s.contexts[0] for s in judge.samples}
        assert all(sent[t].startswith("Warranty claims: mail [EMAIL_1] or call [PHONE_")
                   for t in sent)
        assert {t: [tuple(u.values()) for u in us] for t, us in unsupported} == {
            t: [("It lasts years.", 0, c, None)] for t, c in sent.items()}
    else:
        assert [us for _, us in unsupported] == [[]] * len(TRACES)
    if store_text:
        assert by_trace[TRACES[0].trace_id] == (
            "How do I claim? My number is [PHONE_1].", "Mail [EMAIL_1]; we will call [PHONE_1].")
        assert by_trace[TRACES[1].trace_id][0] == "我的手机是[PHONE_1]，怎么保修？"
        assert by_trace[TRACES[2].trace_id] == (TRACES[2].question, TRACES[2].answer)
    else:
        assert stored.strip() == ""


NAMED = [
    RagTrace(trace_id=f"{0xa0 + i:032x}", service="support-bot", question=q,
             contexts=("Refunds are accepted within 30 days of purchase.",), answer=a,
             start_ns=BASE_NS + i * 1_000_000_000)
    for i, (q, a) in enumerate([
        ("Did Taro Yamada get his refund?", "Taro Yamada was refunded on Monday."),
        ("山田太郎は返金を受けましたか。", "山田太郎は月曜日に返金されました。"),
        ("王小明说他的退款到了吗？", "王小明，您的退款已到账。"),
    ])
]


@pytest.mark.parametrize("unmarked", [False, True], ids=["default", "unmarked_names"])
def test_bare_person_names_are_stored_as_written_unless_unmarked_names_is_on(
    kafka_broker_module, topic, make_settings, writer, chdb_client, rag_schema, unmarked
):
    """Issue 17: bare names are not recognised by default (up's start-up line says so);
    ``privacy.unmarked_names`` recognises the common EN/JA/ZH patterns before judge and store."""
    produce(kafka_broker_module.bootstrap, topic, otelcol_records(NAMED))
    settings = make_settings(privacy={"unmarked_names": unmarked})
    judge = RecordingJudge()
    svc = build_scorer(settings, judge=judge, writer=writer, client=chdb_client).start()
    try:
        wait_for(lambda: svc.stats()["traces_done"] >= len(NAMED), what="traces written")
    finally:
        svc.shutdown()
    by_trace = {t: (q, a) for (t, q, a, _) in _stored(chdb_client, rag_schema.database)}
    seen = "\n".join(s.question + s.answer for s in judge.samples)
    if not unmarked:
        assert by_trace[NAMED[0].trace_id] == (NAMED[0].question, NAMED[0].answer)
        assert "山田太郎" in seen and "王小明" in seen
        return
    assert by_trace[NAMED[0].trace_id] == ("Did [PERSON_1] get his refund?",
                                           "[PERSON_1] was refunded on Monday.")
    assert by_trace[NAMED[1].trace_id] == ("[PERSON_1]は返金を受けましたか。",
                                           "[PERSON_1]は月曜日に返金されました。")
    assert by_trace[NAMED[2].trace_id] == ("[PERSON_1]说他的退款到了吗？", "[PERSON_1]，您的退款已到账。")
    for name in ("Taro Yamada", "山田太郎", "王小明"):
        assert name not in seen
