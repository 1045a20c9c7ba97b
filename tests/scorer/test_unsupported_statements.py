"""A trace with one made-up statement stores that statement with the passage that came closest,
for every kind of judge: the fast judge's best-matching sentence, the default model judge's
best-scoring premise, the context an LLM judge cited. The way the scorer does it: the sample
redacted once (``prepare``), the real judge, the scorer's row builder, the real writer into
chDB, and the worst-traces panel and the report's table over what was stored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ragpulse.dashboards.frames import context, run_panel
from ragpulse.dashboards.queries import panels
from ragpulse.dashboards.report import html_table
from ragpulse.dashboards.settings import DashboardsSettings
from ragpulse.scorer import DEFAULT_JUDGE, Evaluator, Sample, build_judge
from ragpulse.scorer.judges.llm.findings import cited
from ragpulse.scorer.pipeline import ScorerSettings
from ragpulse.scorer.pipeline.evaluate import row_builder
from ragpulse.scorer.privacy import build_redactor
from ragpulse.scorer.segment import split_sentences
from ragpulse.scorer.store import SchemaSettings, ScoredTraceMeta
from testkit.openai_server import FakeOpenAIServer, Reply
from tests.scorer.store.helpers import write_rows

EMAIL = "jane.doe@example.com"
MADE_UP = f"The Premium plan also includes a free laptop from {EMAIL}."
SAMPLE = Sample(
    id="t1",
    question="What does the Premium plan cost and include?",
    contexts=(
        "Our support desk answers on weekdays. The Basic plan costs 10 dollars a month.",
        f"The Premium plan costs 25 dollars a month. It includes phone support by {EMAIL}. "
        "Refunds are possible within 30 days of purchase.",
        "Shipping is free for orders above 50 dollars.",
    ),
    answer="The Premium plan costs 25 dollars a month. Refunds are possible within 30 days of "
           f"purchase. {MADE_UP}",
)


async def _stored(judge: Any, chdb_client: Any, db: str, settings: ScorerSettings,
                  ) -> tuple[Sample, Any]:
    """Score SAMPLE as the scorer would and write its faithfulness row; returns the redacted
    sample and the stored ``unsupported`` value."""
    sample = build_redactor().redact_sample(SAMPLE)  # what the prepare step does, once
    try:
        result = await Evaluator(judge, ["faithfulness"]).evaluate(sample)
    finally:
        await judge.aclose()
    meta = ScoredTraceMeta(trace_id="ab" * 16, ts=datetime.now(UTC), service="shop",
                           prompt_version="v2", question_excerpt=sample.question,
                           answer_excerpt=sample.answer)
    rows = row_builder(settings)(result.scores, meta)
    write_rows(chdb_client, db, rows)
    (got,) = chdb_client.query(f"SELECT unsupported FROM `{db}`.scores_dedup "
                               "WHERE metric = 'faithfulness'").result_rows
    assert EMAIL not in repr(chdb_client.query(f"SELECT * FROM `{db}`.scores").result_rows)
    return sample, [tuple(u.values()) for u in got[0]]


def _check_made_up_first(sample: Sample, unsupported: list[tuple]) -> str:
    """The made-up statement is stored first (lowest support), redacted, with the passage about
    the Premium plan (context 1) and a span taken from it; the copied statements are not."""
    statement, ctx, passage, support = unsupported[0]
    assert statement == MADE_UP.replace(EMAIL, "[EMAIL_1]")
    assert ctx == 1 and passage and support is not None and support < 0.5
    assert all(s in sample.contexts[1] for s in split_sentences(passage))
    assert not any(u[0].startswith(("The Premium plan costs", "Refunds")) for u in unsupported)
    return passage


def _worst_table(chdb_client: Any, db: str, trace_url: str | None = None) -> str:
    s = DashboardsSettings(database=db, trace_url_template=trace_url)
    panel = next(p for p in panels(s) if p.key == "worst_traces")
    now = datetime.now(UTC)
    frame = run_panel(chdb_client, panel, context(now - timedelta(hours=1), now + timedelta(minutes=1)))
    assert frame.error is None and frame.rows
    return html_table(frame, s)


async def test_fast_judge_stores_the_made_up_statement_with_its_best_sentence(
        chdb_client: Any, rag_schema: SchemaSettings) -> None:
    sample, unsupported = await _stored(build_judge("fast"), chdb_client, rag_schema.database,
                                        ScorerSettings())
    passage = _check_made_up_first(sample, unsupported)
    assert passage in split_sentences(sample.contexts[1])  # one whole sentence of it

    table = _worst_table(chdb_client, rag_schema.database)
    assert "free laptop from [EMAIL_1]" in table and passage in table
    assert "<a " not in table  # trace links only with a trace URL
    linked = _worst_table(chdb_client, rag_schema.database, "https://jaeger.example/trace/{trace_id}")
    assert f'<a href="https://jaeger.example/trace/{"ab" * 16}">' in linked


@pytest.mark.slow
async def test_default_model_judge_stores_its_best_scoring_premise(
        chdb_client: Any, rag_schema: SchemaSettings) -> None:
    sample, unsupported = await _stored(build_judge(DEFAULT_JUDGE), chdb_client,
                                        rag_schema.database, ScorerSettings())
    _check_made_up_first(sample, unsupported)


async def test_llm_judge_stores_the_context_it_cited(chdb_client: Any,
                                                     rag_schema: SchemaSettings) -> None:
    redacted = build_redactor().redact_sample(SAMPLE)
    statements = split_sentences(redacted.answer)
    claims = [{"statement": statements[0], "reason": "in [2]", "contexts": [2], "supported": 1},
              {"statement": statements[1], "reason": "in [2]", "contexts": [2], "supported": 1},
              {"statement": statements[2], "reason": "[2] names phone support, no laptop",
               "contexts": [2], "supported": 0}]
    with FakeOpenAIServer() as server:
        server.script("grounding", Reply.json({"claims": claims}))
        judge = build_judge("llm", model="fake-judge", base_url=server.base_url,
                            api_key="sk-test", deadline_s=20.0)
        sample, unsupported = await _stored(judge, chdb_client, rag_schema.database,
                                            ScorerSettings())
    # No P from an LLM; the passage is the sentence of the cited context sharing most words.
    assert unsupported == [(statements[2], 1, "The Premium plan costs 25 dollars a month.", None)]


async def test_with_excerpts_off_nothing_is_stored(chdb_client: Any,
                                                   rag_schema: SchemaSettings) -> None:
    _, unsupported = await _stored(build_judge("fast"), chdb_client, rag_schema.database,
                                   ScorerSettings(write={"excerpts": False}))
    assert unsupported == []


def test_cited_takes_the_first_cited_context_and_its_closest_sentence() -> None:
    texts = ["Alpha is red. Beta is blue.", "Gamma is green. Delta is a big yellow bird."]
    got = cited(["Delta is a small yellow bird.", "Alpha is red.", "Omega is black."],
                [0, 1, 0], [[2, 1], [1], []], texts)
    assert got == [(1, "Delta is a big yellow bird."), None, None]
    # A context number out of range (the parser drops those; a defect must not raise) names none.
    assert cited(["x"], [0], [[7]], texts) == [None]
