"""The judge's parts on their own: budget, rate limiter, Retry-After, reply parsing, prompt
files, settings, the Azure wiring, and the real multilingual embedder."""

from __future__ import annotations

import asyncio
from pathlib import Path

import openai
import pytest
from pydantic import ValidationError

from ragpulse.scorer import Evaluator, Fact, Reason
from ragpulse.scorer.judges.base import Needs
from ragpulse.scorer.judges.llm import (
    AdaptiveRateLimiter,
    LLMJudge,
    LLMJudgeSettings,
    PromptError,
    PromptLibrary,
    TokenBudget,
    estimate_prompt_tokens,
    parse_retry_after,
)
from ragpulse.scorer.judges.llm.parsing import ParseFailure, parse_reply_object, parse_task
from ragpulse.scorer.judges.llm.plan import PROMPT_NAMES, fit_contexts
from ragpulse.scorer.judges.llm.prompts import neutralize, parse_prompt
from testkit.openai_server import Reply, usage_tokens

from .test_call_plan import GEN_QS, QUESTION, SAMPLE


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


# --- budget ---------------------------------------------------------------------------------

def test_budget_reserves_settles_releases_and_slides():
    clock = Clock()
    b = TokenBudget(1000, clock=clock)
    r1 = b.reserve(600)
    assert r1 is not None and b.reserve(500) is None  # 1100 > 1000
    b.settle(r1, 150)  # the server used less than the upper bound
    r2 = b.reserve(800)
    assert r2 is not None and b.used() == 950
    b.release(r2)  # a 429: nothing spent
    assert b.used() == 150
    r3 = b.reserve(850)
    b.settle(r3, None)  # usage unknown (timeout): the estimate stays spent
    assert b.used() == 1000 and b.reserve(1) is None
    clock.t += 3600.0  # both charges leave the window
    assert b.used() == 0 and b.reserve(1000) is not None


def test_budget_settles_at_the_time_of_spending():
    clock = Clock()
    b = TokenBudget(100, window_s=10.0, clock=clock)
    r = b.reserve(100)
    clock.t += 9.0
    b.settle(r, 80)  # charged at t+9: still counted until t+19
    clock.t += 5.0
    assert b.used() == 80 and b.reserve(30) is None


def test_unlimited_budget_and_bad_values():
    assert TokenBudget(None).reserve(10**12) is not None
    with pytest.raises(ValueError):
        TokenBudget(0)


def test_estimate_bounds_the_fake_servers_usage():
    msgs = [{"role": "system", "content": "x" * 1000}, {"role": "user", "content": "日本語" * 50}]
    billed = sum(usage_tokens(m["content"]) for m in msgs) + 4 * len(msgs)
    assert estimate_prompt_tokens(msgs) >= billed
    assert estimate_prompt_tokens(msgs) >= 1000 + 450  # UTF-8 bytes: the BPE upper bound


# --- rate limiter ---------------------------------------------------------------------------

def test_limiter_paces_halves_on_429_and_recovers_additively():
    clock = Clock()
    lim = AdaptiveRateLimiter(120, recover_steps=4, clock=clock)  # 2 per second
    assert lim.delay() == 0.0 and lim.delay() == pytest.approx(0.5)
    lim.on_rate_limited(None)
    assert lim.rate == pytest.approx(1.0)
    lim.on_rate_limited(3.0)  # Retry-After: everyone waits 3 s
    assert lim.rate == pytest.approx(0.5)
    assert lim.delay() >= 3.0 - 1e-9
    for _ in range(10):
        lim.on_success()
    assert lim.rate == pytest.approx(2.0)  # back to the ceiling, never above


async def test_limiter_acquire_awaits_without_blocking_the_loop():
    lim = AdaptiveRateLimiter(600)  # 10 per second
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    t = asyncio.create_task(ticker())
    for _ in range(3):
        await lim.acquire()
    t.cancel()
    assert ticks > 3  # the loop kept running while acquire waited


@pytest.mark.parametrize(("headers", "expected"), [
    ({"retry-after-ms": "250"}, 0.25),
    ({"Retry-After": "2"}, 2.0),
    ({"retry-after-ms": "100", "retry-after": "9"}, 0.1),
    ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),
    ({"retry-after": "-1"}, None),
    ({"retry-after": "100000"}, 600.0),
    ({}, None),
])
def test_parse_retry_after(headers, expected):
    assert parse_retry_after(headers) == expected


# --- reply parsing --------------------------------------------------------------------------

@pytest.mark.parametrize("content", [
    '{"rating": 2}', '```json\n{"rating": 2}\n```', '  {"rating": 2}\n',
])
def test_one_json_object_parses(content):
    assert parse_task("rating", parse_reply_object(content), {}) == 2


@pytest.mark.parametrize("content", [
    None, "", "2", '["rating", 2]', '{"rating": 2} {"rating": 0}', 'Rating: {"rating": 2}',
    '{"rating": 2', "```\n{\"rating\": 2}\n``` and more",
])
def test_anything_else_is_unparseable(content):
    got = parse_reply_object(content)
    assert isinstance(got, ParseFailure) and got.reason is Reason.UNPARSEABLE_JUDGE_OUTPUT


@pytest.mark.parametrize(("obj", "reason"), [
    ({"rating": 3}, Reason.UNPARSEABLE_JUDGE_OUTPUT),
    ({"rating": "2"}, Reason.UNPARSEABLE_JUDGE_OUTPUT),
    ({}, Reason.UNPARSEABLE_JUDGE_OUTPUT),
])
def test_rating_schema(obj, reason):
    assert parse_task("rating", obj, {}).reason is reason


def test_sentence_numbers_out_of_range_are_a_mismatch():
    assert parse_task("sentences", {"needed": [1, 3]}, {"sentences": 3}) == [1, 3]
    assert parse_task("sentences", {"needed": [4]}, {"sentences": 3}).reason is \
        Reason.VERDICTS_MISMATCH


def test_aspect_verdicts_must_name_the_criteria_in_order():
    counts = {"criteria_names": ["a", "b"]}
    ok = {"verdicts": [{"criterion": "a", "verdict": 1}, {"criterion": "b", "verdict": 0}]}
    assert parse_task("aspects", ok, counts) == {"a": 1, "b": 0}
    swapped = {"verdicts": ok["verdicts"][::-1]}
    assert parse_task("aspects", swapped, counts).reason is Reason.VERDICTS_MISMATCH


def test_more_questions_than_asked_is_a_mismatch():
    obj = {"questions": ["a?", "b?", "c?", "d?"], "noncommittal": 0}
    assert parse_task("questions", obj, {"questions": 3}).reason is Reason.VERDICTS_MISMATCH


# --- prompts --------------------------------------------------------------------------------

def test_every_packaged_prompt_loads_and_declares_the_data_policy():
    lib = PromptLibrary.load()
    lib.require(PROMPT_NAMES)
    for p in lib.prompts.values():
        assert p.version >= 1 and p.source.startswith("package:")
        msgs = p.render(list(p.tasks), {k: ["x"] for k in p.inputs}, nonce="abc",
                        params={"n_questions": "3", "criteria": "1. c: d"})
        assert "<data-abc" in msgs[0]["content"] and "untrusted" in msgs[0]["content"].lower()
        assert "${" not in msgs[0]["content"] + msgs[1]["content"]


def test_an_override_directory_replaces_a_prompt_and_its_version(tmp_path: Path):
    src = PromptLibrary.load()["context_rating_a"].source
    text = (Path(__file__).parents[3] / "scorer/ragpulse/scorer/prompts" /
            src.removeprefix("package:")).read_text()
    (tmp_path / "context_rating_a.toml").write_text(text.replace("version = 2", "version = 7"))
    lib = PromptLibrary.load(tmp_path)
    assert lib["context_rating_a"].ref == "context_rating_a@7"
    assert lib["assess"].ref == "assess@2"


@pytest.mark.parametrize(("text", "match"), [
    ('name = "x"', "missing key"),
    ('name = "x"\nversion = 0\ninputs = []\nsystem = "${nonce}"\nuser = "${data}${tasks}${output}"'
     '\n[tasks.t]\ninputs = []\ninstruction = "i"\noutput = "o"', "version"),
    ('name = "x"\nversion = 1\ninputs = []\nsystem = "s"\nuser = "${data}${tasks}${output}"'
     '\n[tasks.t]\ninputs = []\ninstruction = "i"\noutput = "o"', "nonce"),
    ('name = "x"\nversion = 1\ninputs = ["question"]\nsystem = "${nonce}"\n'
     'user = "${data}${tasks}${output}"\n[tasks.t]\ninputs = ["answer"]\ninstruction = "i"\n'
     'output = "o"', "does not declare"),
    ("name = ", "x.toml"),
])
def test_malformed_prompts_fail_at_load_time(text, match):
    with pytest.raises(PromptError, match=match):
        parse_prompt(text, "x.toml")


def test_neutralize_defangs_tags_and_removes_the_nonce():
    nonce = "a1b2"
    out = neutralize(f"x </data-{nonce}> < data-zz kind=1> a1a1b2b2 {nonce}", nonce)
    assert nonce not in out and "<" not in out


def test_contexts_are_cut_fairly():
    out, cut = fit_contexts(["a" * 50, "b" * 1000, "c" * 1000], 450)
    assert cut and out[0] == "a" * 50
    assert out[1].startswith("b" * 200) and out[1].endswith("[...truncated]")
    assert len(out[1]) == len(out[2])
    assert fit_contexts(["a", "b"], 450) == (["a", "b"], False)


async def test_truncation_is_visible_in_the_findings(server, make_judge):
    judge = make_judge(max_context_chars=200)
    f = await judge.gather(SAMPLE.model_copy(update={"contexts": ("Delhi " * 100,) * 2}),
                           Needs(frozenset({Fact.CONTEXT_USEFUL})))
    assert f[Fact.CONTEXT_USEFUL].extra["truncated_contexts"] is True
    assert "[...truncated]" in server.requests[0].messages[-1]["content"]


# --- settings and wiring --------------------------------------------------------------------

@pytest.mark.parametrize("kw", [
    {"votes": 0},
    {"vote_temperature": 0.0},  # votes at temperature 0 could not disagree
    {"base_url": "ftp://x"},
    {"deadline_s": 1.0, "request_timeout_s": 5.0},
    {"api_version": "2024-10-21"},  # Azure without an endpoint
    {"max_concurrency": 0},
    {"tokens_per_hour": 0},
    {"model": " "},
    {"unknown_field": 1},
])
def test_settings_validation(kw):
    with pytest.raises(ValidationError):
        LLMJudgeSettings(api_key="k", **kw)


def test_settings_are_frozen_and_key_comes_from_env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    s = LLMJudgeSettings()
    assert s.api_key.get_secret_value() == "sk-from-env" and "sk-from-env" not in repr(s)
    with pytest.raises(ValidationError):
        s.model = "x"  # type: ignore[misc]


async def test_no_key_for_api_openai_com_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        LLMJudge(LLMJudgeSettings())
    judge = LLMJudge(LLMJudgeSettings(base_url="http://127.0.0.1:1/v1"))  # local: no key needed
    await judge.aclose()


async def test_azure_deployments_are_reached_through_the_azure_client(server):
    s = LLMJudgeSettings(base_url=server.base_url.removesuffix("/v1"), api_version="2024-10-21",
                         api_key="azure-key", model="my-deployment")
    judge = LLMJudge(s)
    try:
        assert isinstance(judge.transport._client, openai.AsyncAzureOpenAI)
        server.script("assess", Reply.json({"context_useful": [
            {"context": i, "useful": 1} for i in range(1, 6)]}))
        f = await judge.gather(SAMPLE, Needs(frozenset({Fact.CONTEXT_USEFUL})))
        assert f[Fact.CONTEXT_USEFUL].value == [1] * 5
        (req,) = server.requests
        assert req.path.startswith("/openai/deployments/my-deployment/chat/completions")
        assert "api-version=2024-10-21" in req.path and req.headers["api-key"] == "azure-key"
    finally:
        await judge.aclose()


# --- the real embedder ----------------------------------------------------------------------

@pytest.mark.slow
async def test_answer_relevancy_with_the_real_multilingual_embedder(server, make_judge):
    from ragpulse.scorer.embeddings import USEEmbedder

    off_topic = ["What is the boiling point of water?", "Who painted the Mona Lisa?",
                 "How do I reset my password?"]
    server.script("decompose", Reply.json({"questions": GEN_QS[:1] * 3, "noncommittal": 0}),
                  Reply.json({"questions": off_topic, "noncommittal": 0}))
    judge = make_judge(embedder=USEEmbedder(threads=1))
    assert judge.embedder.name == "use-multilingual-v3"
    ev = Evaluator(judge, ["answer_relevancy"])
    on = (await ev.evaluate(SAMPLE)).scores[0]
    off = (await ev.evaluate(SAMPLE.model_copy(update={"answer": "Water boils at 100 C."}))
           ).scores[0]
    assert on.value > 0.8 and off.value < 0.4, (on.value, off.value)
    assert QUESTION != GEN_QS[0]


async def test_the_judge_implements_the_protocol(make_judge):
    from ragpulse.scorer.judges.base import Judge

    judge = make_judge()
    assert isinstance(judge, Judge) and judge.name == "llm" and judge.model == "fake-judge"


async def test_saturated_concurrency_respects_the_deadline(server, make_judge):
    # one slot, held by a request the server answers after 2 s; the second call's deadline
    # (1 s) passes while it waits for the slot, so it is never sent
    server.script("context_rating_a", Reply.json({"rating": 2}, delay_s=2.0))
    server.script("context_rating_b", Reply.json({"rating": 2}, delay_s=2.0))
    judge = make_judge(max_concurrency=1, request_timeout_s=1.0, deadline_s=1.0, max_retries=0)
    f = await judge.gather(SAMPLE, Needs(frozenset({Fact.CONTEXT_RATINGS})))
    assert len(server.requests) == 1
    fd = f[Fact.CONTEXT_RATINGS]
    assert fd.value is None and fd.reason is Reason.JUDGE_TIMEOUT
