"""Failure handling over the wire: retries only for retryable errors, Retry-After honoured,
timeouts, one repair for bad JSON, refusals, verdict mismatches, shutdown escape."""

from __future__ import annotations

import asyncio
import json

import pytest

from ragpulse.scorer import Evaluator, Fact, Reason
from ragpulse.scorer.judges.base import Needs
from testkit.openai_server import Reply

from .conftest import content_aware
from .test_call_plan import ASSESS, EMBEDDER, GROUNDING, SAMPLE

USEFUL = Needs(frozenset({Fact.CONTEXT_USEFUL}))
GOOD_USEFUL = Reply.json({"context_useful": ASSESS["context_useful"]})


def _record_waits(judge, server) -> list[tuple[float, int]]:
    """Every pause the judge takes, as (seconds asked, requests the server had seen by then):
    what it waited for and when, without reading a clock."""
    waits: list[tuple[float, int]] = []
    wait = judge.transport.wait

    async def recording(seconds: float) -> None:
        waits.append((seconds, len(server.requests)))
        await wait(seconds)

    judge.transport.wait = recording
    return waits


async def test_retry_after_ms_is_honoured_before_the_retry(server, make_judge):
    server.script("assess", Reply.rate_limited(retry_after_ms=400), GOOD_USEFUL)
    judge = make_judge()
    waits = _record_waits(judge, server)
    f = await judge.gather(SAMPLE, USEFUL)
    assert f[Fact.CONTEXT_USEFUL].value == [0, 1, 1, 0, 0]
    assert len(server.requests) == 2
    # The pause between the 429 and the retry is at least what the server asked for.
    assert [s >= 0.4 for s, seen in waits if seen == 1 and s > 0] == [True]
    st = judge.stats.as_dict()
    assert st["rate_limited_429"] == 1 and st["retries"] == 1 and st["requests"] == 2
    assert judge.limiter.decreases == 1 and judge.limiter.rate < judge.limiter.max_rate


async def test_retry_after_seconds_header_is_honoured(server, make_judge):
    server.script("assess", Reply.rate_limited(retry_after_s=1), GOOD_USEFUL)
    judge = make_judge()
    waits = _record_waits(judge, server)
    await judge.gather(SAMPLE, USEFUL)
    assert len(server.requests) == 2
    assert [s >= 1.0 for s, seen in waits if seen == 1 and s > 0] == [True]


async def test_server_errors_are_retried(server, make_judge):
    server.script("assess", Reply.fail(500), Reply.fail(503), GOOD_USEFUL)
    judge = make_judge()
    f = await judge.gather(SAMPLE, USEFUL)
    assert f[Fact.CONTEXT_USEFUL].ok and len(server.requests) == 3
    assert judge.stats.retries == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_never_retried(server, make_judge, status):
    server.script("assess", Reply.fail(status, "nope", type_="invalid_request_error"))
    judge = make_judge()
    f = await judge.gather(SAMPLE, USEFUL)
    assert len(server.requests) == 1 and judge.stats.retries == 0
    fd = f[Fact.CONTEXT_USEFUL]
    assert fd.value is None and fd.reason is Reason.JUDGE_ERROR and str(status) in fd.detail
    assert judge.stats.as_dict()["errors_by_reason"] == {"judge_error": 1}


async def test_insufficient_quota_is_permanent(server, make_judge):
    server.script("assess", Reply.fail(429, "quota", type_="insufficient_quota",
                                       code="insufficient_quota"))
    f = await make_judge().gather(SAMPLE, USEFUL)
    assert len(server.requests) == 1 and f[Fact.CONTEXT_USEFUL].reason is Reason.RATE_LIMITED


async def test_exhausted_retries_on_429_give_rate_limited(server, make_judge):
    server.script("assess", *[Reply.rate_limited(retry_after_ms=10)] * 3)
    judge = make_judge(max_retries=2)
    f = await judge.gather(SAMPLE, USEFUL)
    assert len(server.requests) == 3
    assert f[Fact.CONTEXT_USEFUL].reason is Reason.RATE_LIMITED
    assert judge.stats.rate_limited_429 == 3


async def test_exhausted_retries_on_5xx_give_judge_error(server, make_judge):
    server.script("assess", *[Reply.fail(502)] * 2)
    f = await make_judge(max_retries=1).gather(SAMPLE, USEFUL)
    assert len(server.requests) == 2 and f[Fact.CONTEXT_USEFUL].reason is Reason.JUDGE_ERROR


async def test_a_retry_after_beyond_the_deadline_stops_retrying(server, make_judge):
    server.script("assess", Reply.rate_limited(retry_after_s=30))
    f = await make_judge(deadline_s=5.0).gather(SAMPLE, USEFUL)
    assert len(server.requests) == 1
    assert f[Fact.CONTEXT_USEFUL].reason is Reason.RATE_LIMITED
    assert "deadline" in f[Fact.CONTEXT_USEFUL].detail


async def test_timeouts_are_retried_then_reported(server, make_judge):
    server.script("assess", Reply.json({}, delay_s=3.0), Reply.json({}, delay_s=3.0))
    judge = make_judge(request_timeout_s=0.3, deadline_s=5.0, max_retries=1)
    f = await judge.gather(SAMPLE, USEFUL)
    assert len(server.requests) == 2
    assert f[Fact.CONTEXT_USEFUL].reason is Reason.JUDGE_TIMEOUT
    assert judge.stats.timeouts == 2


async def test_truncated_json_gets_one_repair_then_null(server, make_judge):
    broken = '{"context_useful": [{"context": 1, "useful": 0}, {"cont'
    server.script("assess", Reply(content=broken, finish_reason="length"),
                  Reply(content=broken, finish_reason="length"))
    judge = make_judge()
    f = await judge.gather(SAMPLE, USEFUL)
    first, repair = server.requests
    assert f[Fact.CONTEXT_USEFUL].reason is Reason.UNPARSEABLE_JUDGE_OUTPUT
    assert repair.messages[:2] == first.messages
    assert repair.messages[2] == {"role": "assistant", "content": broken}
    assert "truncated" in repair.messages[3]["content"]
    assert repair.body["max_tokens"] == 2 * first.body["max_tokens"]
    assert judge.stats.repairs == 1
    # the spend of both requests is still attributed
    assert f[Fact.CONTEXT_USEFUL].cost.llm_calls == pytest.approx(2)


async def test_a_successful_repair_gives_the_value(server, make_judge):
    server.script("assess", Reply(content="Sure! Here are the verdicts: {oops"), GOOD_USEFUL)
    f = await make_judge().gather(SAMPLE, USEFUL)
    assert f[Fact.CONTEXT_USEFUL].value == [0, 1, 1, 0, 0]
    assert "invalid JSON" in server.requests[1].messages[-1]["content"]


async def test_wrong_schema_twice_is_unparseable(server, make_judge):
    bad = Reply.json({"context_useful": [{"context": i, "useful": "yes"} for i in range(1, 6)]})
    server.script("assess", bad, bad)
    f = await make_judge().gather(SAMPLE, USEFUL)
    assert f[Fact.CONTEXT_USEFUL].reason is Reason.UNPARSEABLE_JUDGE_OUTPUT
    assert len(server.requests) == 2


async def test_verdict_arrays_of_the_wrong_length_are_a_mismatch(server, make_judge):
    short = {"claims": GROUNDING["claims"], "context_used": GROUNDING["context_used"][:4]}
    server.script("grounding", Reply.json(short), Reply.json(short))
    res = await Evaluator(make_judge(embedder=EMBEDDER),
                          ["faithfulness", "context_utilization"]).evaluate(SAMPLE)
    s = {x.metric: x for x in res.scores}
    assert s["context_utilization"].value is None
    assert s["context_utilization"].reason == "verdicts_mismatch"
    assert s["context_utilization"].status == "error"
    assert s["faithfulness"].value == pytest.approx(2 / 3)  # the good part of the reply is kept


async def test_misnumbered_verdicts_are_a_mismatch(server, make_judge):
    rows = [{"context": i, "useful": 1} for i in (1, 2, 2, 4, 5)]
    server.script("assess", *[Reply.json({"context_useful": rows})] * 2)
    f = await make_judge().gather(SAMPLE, USEFUL)
    assert f[Fact.CONTEXT_USEFUL].reason is Reason.VERDICTS_MISMATCH


@pytest.mark.parametrize("reply", [
    Reply(content=None, refusal="I can't help with that."),
    Reply(content="", finish_reason="content_filter"),
])
async def test_refusals_are_final(server, make_judge, reply):
    server.script("assess", reply)
    judge = make_judge()
    f = await judge.gather(SAMPLE, USEFUL)
    assert f[Fact.CONTEXT_USEFUL].reason is Reason.JUDGE_REFUSED
    assert len(server.requests) == 1 and judge.stats.refusals == 1


async def test_one_failed_call_leaves_the_others(server, make_judge):
    server.script("decompose", Reply.fail(400))
    server.script("grounding", Reply.fail(500), Reply.fail(500))
    res = await Evaluator(make_judge(embedder=EMBEDDER, max_retries=1),
                          ["faithfulness", "answer_relevancy", "context_precision"]
                          ).evaluate(SAMPLE)
    s = {x.metric: x for x in res.scores}
    assert s["faithfulness"].reason == "judge_error" and s["answer_relevancy"].reason == "judge_error"
    # The content-aware reply: contexts 1-3 share a word (Oberoi, head office, group) with the
    # question, 4-5 do not, so every useful context ranks first.
    assert s["context_precision"].value == pytest.approx(1.0) and s["context_precision"].status == "ok"


async def test_failures_are_not_cached(server, make_judge):
    server.script("assess", Reply.fail(400), GOOD_USEFUL)
    judge = make_judge()
    assert not (await judge.gather(SAMPLE, USEFUL))[Fact.CONTEXT_USEFUL].ok
    assert (await judge.gather(SAMPLE, USEFUL))[Fact.CONTEXT_USEFUL].ok


async def test_aclose_ends_a_pending_retry_wait(server, make_judge):
    server.script("assess", Reply.rate_limited(retry_after_s=60))
    judge = make_judge(deadline_s=120.0)
    task = asyncio.create_task(judge.gather(SAMPLE, USEFUL))
    while not server.requests:
        await asyncio.sleep(0.01)
    await judge.aclose()
    f = await asyncio.wait_for(task, 10)  # would be 60 s without the escape
    assert f[Fact.CONTEXT_USEFUL].reason is Reason.JUDGE_ERROR
    assert "closed" in f[Fact.CONTEXT_USEFUL].detail
    await judge.aclose()  # idempotent
    f2 = await judge.gather(SAMPLE, USEFUL)  # after close: findings, not exceptions
    assert f2[Fact.CONTEXT_USEFUL].reason is Reason.JUDGE_ERROR
    assert len(server.requests) == 1


async def test_aclose_cancels_an_in_flight_request(server, make_judge):
    server.script("assess", Reply.json({}, delay_s=30.0))
    judge = make_judge(request_timeout_s=60.0, deadline_s=120.0)
    task = asyncio.create_task(judge.gather(SAMPLE, USEFUL))
    while not server.requests:
        await asyncio.sleep(0.01)
    await judge.aclose()
    f = await asyncio.wait_for(task, 10)
    assert f[Fact.CONTEXT_USEFUL].reason is Reason.JUDGE_ERROR


async def test_the_api_key_never_shows(make_judge):
    judge = make_judge()
    assert "sk-test-secret" not in repr(judge.settings)
    assert "sk-test-secret" not in json.dumps(judge.settings.model_dump(mode="json"))


async def test_concurrency_is_bounded_across_samples(server, make_judge):
    slow = lambda rec: Reply(**{**vars(content_aware(rec)), "delay_s": 0.05})  # noqa: E731
    server.handler = slow
    judge = make_judge(embedder=EMBEDDER, max_concurrency=2)
    ev = Evaluator(judge, ["faithfulness", "context_relevance"], max_concurrency=8)
    samples = [SAMPLE.model_copy(update={"id": str(i), "answer": f"Delhi has {i} hotels."})
               for i in range(6)]
    results = [r async for r in ev.evaluate_many(samples)]
    assert len(results) == 6 and all(s.status == "ok" for r in results for s in r.scores)
    assert len(server.requests) == 6 * 3  # grounding, two ratings per sample
    assert server.max_in_flight <= 2


async def test_connection_errors_are_retried_then_reported(make_judge):
    from ragpulse.scorer.judges.llm import LLMJudge, LLMJudgeSettings
    from testkit.openai_server import FakeOpenAIServer

    with FakeOpenAIServer() as gone:
        url = gone.base_url  # a port that was just free and is closed again below
    judge = LLMJudge(LLMJudgeSettings(base_url=url, api_key="k", max_retries=2,
                                      backoff_initial_s=0.01, backoff_max_s=0.02))
    try:
        f = await judge.gather(SAMPLE, USEFUL)
    finally:
        await judge.aclose()
    assert f[Fact.CONTEXT_USEFUL].reason is Reason.JUDGE_ERROR
    assert "APIConnectionError" in f[Fact.CONTEXT_USEFUL].detail
    assert judge.stats.requests == 3 and judge.stats.retries == 2


async def test_a_deeply_nested_reply_is_unparseable_not_a_crash(server, make_judge):
    """Issue 38: a reply nested thousands deep (a judge steered by the text it reads) raised
    RecursionError out of json.loads, through the judge; now it is bad JSON: one repair, then
    unparseable_judge_output."""
    deep = '{"context_useful": ' + "[" * 5000 + "]" * 5000 + "}"
    server.script("assess", Reply(content=deep), Reply(content=deep))
    f = await make_judge().gather(SAMPLE, USEFUL)
    assert f[Fact.CONTEXT_USEFUL].reason is Reason.UNPARSEABLE_JUDGE_OUTPUT
    assert "nested too deeply" in server.requests[1].messages[-1]["content"]
