"""Fixtures for the LLM judge tests: a real OpenAI-compatible server on loopback, a tiny
embedder, and a judge factory that closes what it builds."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from ragpulse.scorer.judges.llm import LLMJudge, LLMJudgeSettings
from ragpulse.scorer.segment import split_sentences
from testkit.judge import TableEmbedder
from testkit.openai_server import FakeOpenAIServer, Recorded, Reply, data_blocks

_WORD = re.compile(r"[a-z0-9]+")
_STOP = {"the", "a", "an", "is", "of", "in", "and", "to", "what", "which", "was", "it", "its",
         "with", "for", "on", "at", "by", "where", "who", "did", "does"}


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def content_aware(rec: Recorded) -> Reply:
    """A deterministic 'model' that answers from the data blocks of the request, so tests can
    check what the judge showed it: a statement is supported when all its content words occur
    in one context; a context is useful when it shares a content word with the question, used
    when it shares one with the answer. It reads only what the request shows: a task whose
    input is missing from the request cannot be answered from it."""
    text = rec.text()
    blocks = data_blocks(text)
    get = lambda kind: [c for (_, k, _, c) in blocks if k == kind]  # noqa: E731
    question = " ".join(get("question"))
    contexts = get("context")
    answer = " ".join(get("answer"))
    name = rec.prompt.split("@")[0]
    user = rec.messages[-1]["content"]
    if name == "decompose":
        out: dict[str, Any] = {}
        if '"statements"' in user:
            out["statements"] = [s.strip() + "." for s in re.split(r"(?<=\.)\s+", answer)
                                 if s.strip(" .")]
            out["statements"] = [s.replace("..", ".") for s in out["statements"]]
        if '"questions"' in user:
            out["questions"] = [f"What about {s.strip(' .')}?" for s in answer.split(".")
                                if s.strip()][:3] or ["What?"]
            out["noncommittal"] = int("don't know" in answer.lower())
        if '"reference_statements"' in user:
            out["reference_statements"] = [s.strip() + "." for s in
                                           " ".join(get("reference")).split(".") if s.strip()]
        return Reply.json(out)
    if name == "grounding":
        out = {}
        if '"claims"' in user:
            claims = []
            for s in split_sentences(answer):
                ctx = [i for i, c in enumerate(contexts, start=1) if words(s) <= words(c)]
                claims.append({"statement": s, "reason": "word overlap", "contexts": ctx[:1],
                               "supported": int(bool(ctx))})
            out["claims"] = claims
        if '"context_used"' in user:
            out["context_used"] = [{"context": i, "used": int(bool(words(c) & words(answer)))}
                                   for i, c in enumerate(contexts, start=1)]
        return Reply.json(out)
    if name == "assess":
        out = {}
        stmts = get("statement")
        if '"context_useful"' in user:
            out["context_useful"] = [{"context": i, "useful": int(bool(words(c) & words(question)))}
                                     for i, c in enumerate(contexts, start=1)]
        refs = get("reference_statement")
        if '"reference_attribution"' in user:
            out["reference_attribution"] = [
                {"statement": i, "attributed": int(any(words(s) <= words(c) for c in contexts))}
                for i, s in enumerate(refs, start=1)]
        if '"correctness"' in user:
            out["correctness"] = {
                "answer": [{"statement": i, "in_reference": int(any(words(s) <= words(r)
                                                                    for r in refs))}
                           for i, s in enumerate(stmts, start=1)],
                "reference": [{"statement": i, "in_answer": int(any(words(r) <= words(s)
                                                                    for s in stmts))}
                              for i, r in enumerate(refs, start=1)]}
        return Reply.json(out)
    if name.startswith("context_rating"):
        return Reply.json({"rating": 2 if any(words(c) & words(question) for c in contexts)
                           else 0})
    if name == "context_sentences":
        needed = [int(m.group(1)) for m in re.finditer(r"\[S(\d+)\] ([^\n<]*)", text)
                  if words(m.group(2)) & words(question)]
        return Reply.json({"needed": needed})
    if name == "aspects":
        names = re.findall(r"^\d+\. (\S+):", user, re.MULTILINE)
        return Reply.json({"verdicts": [{"criterion": n, "verdict": 0} for n in names]})
    return Reply.fail(400, f"unknown prompt {rec.prompt}", type_="invalid_request_error")


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(handler=content_aware) as srv:
        yield srv


@pytest.fixture
async def make_judge(server: FakeOpenAIServer) -> AsyncIterator[Callable[..., LLMJudge]]:
    built: list[LLMJudge] = []

    def make(embedder: Any = None, **overrides: Any) -> LLMJudge:
        kw: dict[str, Any] = {"base_url": server.base_url, "api_key": "sk-test-secret",
                              "model": "fake-judge", "requests_per_minute": 60_000,
                              "request_timeout_s": 5.0, "deadline_s": 20.0,
                              "backoff_initial_s": 0.01, "backoff_max_s": 0.05}
        kw.update(overrides)
        judge = LLMJudge(LLMJudgeSettings(**kw), embedder=embedder or TableEmbedder())
        built.append(judge)
        return judge

    yield make
    for j in built:
        await j.aclose()
