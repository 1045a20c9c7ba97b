"""The LLM judge never hangs and never crashes, whatever the endpoint does (issue 10, part 3).

Over real HTTP, the real openai client, the project's OpenAI-compatible server:
* a server that accepts the request and never answers, or drips its reply one byte at a time
  (no socket read ever times out), used to keep `ragpulse score` running far past its deadline;
  now each sample's judge work ends at its deadline with null + ``judge_timeout``;
* a 200 whose JSON body is cut short raised ``JSONDecodeError`` out of the judge (a traceback,
  exit 1, no output); now it is a retryable judge error, then null + ``judge_error``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragpulse.scorer.judges.llm import LLMJudge
from ragpulse.scorer.model import Reason
from testkit.judge import SAMPLE
from testkit.openai_server import FakeOpenAIServer, Reply


async def _faithfulness(judge: LLMJudge) -> Any:
    from ragpulse.scorer.evaluator import Evaluator
    from ragpulse.scorer.metrics import resolve_metrics

    evaluator = Evaluator(judge, resolve_metrics(["faithfulness"]))
    result = await evaluator.evaluate(SAMPLE)
    return next(s for s in result.scores if s.metric == "faithfulness")


async def test_a_server_that_never_answers_ends_at_the_deadline(
        make_judge: Callable[..., LLMJudge], server: FakeOpenAIServer) -> None:
    server.script("*", *[Reply.json({}, delay_s=3600)] * 10)
    # Each retry used to get a deadline of its own, so the sample took a multiple of its
    # deadline. Faithfulness is one call (grounding: statements with their verdicts).
    judge = make_judge(request_timeout_s=2.0, deadline_s=2.0, max_retries=10)
    score = await _faithfulness(judge)
    assert score.value is None and score.reason == Reason.JUDGE_TIMEOUT
    # Each request is cut where the sample's deadline falls, so the retries end there, far short
    # of max_retries.
    st = judge.stats
    assert st.completions == 0 and st.timeouts == st.requests and st.retries == st.requests - 1
    assert 1 <= st.requests <= 2, st
    assert {r.prompt.split("@")[0] for r in server.requests} == {"grounding"}


async def test_a_dripping_server_ends_at_the_deadline(
        make_judge: Callable[..., LLMJudge], server: FakeOpenAIServer) -> None:
    # One byte every 0.1 s: each read arrives well within the 0.5 s read timeout, and the whole
    # reply would take minutes.
    server.script("*", *[Reply.json({"statements": ["a"]}, drip_s=0.1)] * 10)
    judge = make_judge(request_timeout_s=0.5, deadline_s=2.0, max_retries=10)
    score = await _faithfulness(judge)
    assert score.value is None and score.reason == Reason.JUDGE_TIMEOUT
    # Every request was cut by its total timeout (a per-read timeout never fires on a drip),
    # none was answered, and the retries stopped at the deadline, not at max_retries.
    st = judge.stats
    assert st.completions == 0 and st.requests >= 1 and st.timeouts == st.requests
    assert st.retries == st.requests - 1 < 10
    assert {r.prompt.split("@")[0] for r in server.requests} == {"grounding"}


async def test_a_truncated_json_body_is_retried(make_judge: Callable[..., LLMJudge],
                                                server: FakeOpenAIServer) -> None:
    server.script("*", Reply.json({"statements": ["x"]}, truncate_at=60))
    judge = make_judge()  # then the content-aware replies
    score = await _faithfulness(judge)
    # The retried request gets the content-aware reply: the answer's one statement ("You can
    # get a refund ... if you have a receipt.") has words ("get", "have") that the context
    # lacks, so it is unsupported and faithfulness is 0/1.
    assert score.value == 0.0 and score.status == "ok", score
    assert judge.stats.retries == 1


async def test_truncated_json_bodies_become_a_counted_null(make_judge: Callable[..., LLMJudge],
                                                           server: FakeOpenAIServer) -> None:
    server.script("*", *[Reply.json({"statements": ["x"]}, truncate_at=40)] * 20)
    judge = make_judge(max_retries=2)
    score = await _faithfulness(judge)
    assert score.value is None and score.reason == Reason.JUDGE_ERROR
    assert judge.stats.retries >= 2 and judge.stats.errors_by_reason["judge_error"] >= 1


def test_ragpulse_score_finishes_with_a_line_per_input(tmp_path: Path) -> None:
    """The reported run: `ragpulse score --judge llm` against a server that never answers (and
    one that answers with cut JSON) ends, and every input line gets its output line."""
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"id": f"q{i}", "question": SAMPLE.question,
                                       "contexts": SAMPLE.contexts, "answer": SAMPLE.answer}) + "\n"
                           for i in range(3)))
    # Cut JSON is retried until max_retries (judge_error) or, on a loaded machine, until the
    # deadline comes first (judge_timeout); a server that never answers can only time out.
    for reply, reasons in ((Reply.json({}, delay_s=3600), {"judge_timeout"}),
                           (Reply.json({"statements": []}, truncate_at=30),
                            {"judge_error", "judge_timeout"})):
        out = tmp_path / "out.jsonl"
        with FakeOpenAIServer() as srv:
            srv.script("*", *[reply] * 200)
            res = subprocess.run(
                [sys.executable, "-c", "from ragpulse.deploy.cli import main; main()", "score",
                 "--input", str(inp), "--output", str(out), "--judge", "llm", "--model", "m",
                 "--base-url", srv.base_url, "--metrics", "faithfulness,answer_relevancy",
                 "--deadline", "2", "--quiet"],
                capture_output=True, text=True, timeout=120,
                env={"OPENAI_API_KEY": "sk-test", "PATH": "/usr/bin:/bin"})
        # Every score failed: exit 1, with the causes on stderr (a run that scored nothing
        # must not look like a success to the script that started it).
        assert res.returncode == 1, res.stderr[-2000:]
        assert "no score came out ok" in res.stderr and "error score" in res.stderr
        assert "Traceback" not in res.stderr
        lines = [json.loads(x) for x in out.read_text().splitlines()]
        assert [x["id"] for x in lines] == ["q0", "q1", "q2"]
        for line in lines:
            faith = line["scores"]["faithfulness"]
            assert faith["value"] is None
            assert faith["reason"] in reasons, faith


async def test_a_judge_that_never_answers_gives_one_reason_for_every_metric(
        make_judge: Callable[..., LLMJudge], server: FakeOpenAIServer) -> None:
    """Issue 17: with every request hanging, some metrics ended ``judge_timeout`` and others
    ``rate_limited`` (the adaptive limiter, slowed by the timeouts, pushed their first request
    past the deadline, and that was reported as rate limiting though no 429 ever came). The
    sample's deadline ended them all: one reason."""
    from ragpulse.scorer.evaluator import Evaluator
    from ragpulse.scorer.metrics import DEFAULT_METRICS, resolve_metrics

    server.script("*", *[Reply.json({}, delay_s=3600)] * 50)
    judge = make_judge(request_timeout_s=1.0, deadline_s=2.5, max_retries=10)
    evaluator = Evaluator(judge, resolve_metrics(list(DEFAULT_METRICS)))
    result = await evaluator.evaluate(SAMPLE)
    reasons = {s.metric: s.reason for s in result.scores}
    assert len(reasons) == len(DEFAULT_METRICS)
    assert set(reasons.values()) == {Reason.JUDGE_TIMEOUT}, reasons
    assert judge.stats.rate_limited_429 == 0


async def test_a_server_asking_to_wait_past_the_deadline_is_rate_limited_throughout(
        make_judge: Callable[..., LLMJudge], server: FakeOpenAIServer) -> None:
    """The other side of the one-reason rule: when a 429's Retry-After is why the sample runs
    out of time, every metric says ``rate_limited``, including those whose calls never reached
    the server (they waited behind the limiter's cool-down)."""
    from ragpulse.scorer.evaluator import Evaluator
    from ragpulse.scorer.metrics import DEFAULT_METRICS, resolve_metrics

    server.script("*", *[Reply.rate_limited(retry_after_s=30)] * 50)
    judge = make_judge(deadline_s=5.0)
    evaluator = Evaluator(judge, resolve_metrics(list(DEFAULT_METRICS)))
    result = await evaluator.evaluate(SAMPLE)
    reasons = {s.metric: s.reason for s in result.scores}
    assert set(reasons.values()) == {Reason.RATE_LIMITED}, reasons
    assert judge.stats.rate_limited_429 >= 1
