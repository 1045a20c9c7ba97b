"""The local judge on small English, Japanese and Chinese examples, with the real USE model and
the shipped support detector, through the real Evaluator where a metric is the point."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from ragpulse.scorer import Evaluator, Fact, Reason, Sample
from ragpulse.scorer.embeddings import USEEmbedder
from ragpulse.scorer.judges.base import Judge, Needs
from ragpulse.scorer.judges.local import LocalJudge, LocalJudgeSettings
from ragpulse.scorer.metrics import DEFAULT_METRICS

ALL_FACTS = frozenset(Fact)

EN = Sample(
    id="en",
    question="What is the capital of France?",
    contexts=(
        "The Amazon river flows through Brazil. It carries more water than any other river.",
        "Paris is the capital and the largest city of France. It lies on the Seine.",
    ),
    answer="Paris is the capital and the largest city of France.",
    reference="Paris is the capital and the largest city of France.",
)
JA = Sample(
    id="ja",
    question="第190回国会が開催された年は何年ですか？",
    contexts=(
        "富士山は日本で最も高い山である。標高は3776メートルである。",
        "第190回国会は2015年に開催された。この国会では安全保障関連法が審議された。",
    ),
    answer="第190回国会は2015年に開催された。",
)
ZH = Sample(
    id="zh",
    question="长城是在哪个朝代大规模修建的？",
    contexts=(
        "熊猫主要生活在中国四川省的山区，以竹子为食。",
        "长城在明朝进行了大规模修建，全长超过两万公里。",
    ),
    answer="长城在明朝进行了大规模修建。",
)


async def facts(judge: LocalJudge, sample: Sample, *wanted: Fact) -> dict:
    out = await judge.gather(sample, Needs(frozenset(wanted)))
    assert set(out) == set(wanted)
    return out


def test_judge_implements_the_protocol(local_judge: LocalJudge) -> None:
    assert isinstance(local_judge, Judge)
    assert local_judge.name == "fast" and local_judge.model == "use-multilingual-v3"


def test_settings_are_frozen_validated_and_explicit_about_threads() -> None:
    s = LocalJudgeSettings()
    assert s.threads == 1
    with pytest.raises(ValidationError):
        s.threads = 4  # type: ignore[misc]
    with pytest.raises(ValidationError):
        LocalJudgeSettings(cos_low=0.5, cos_high=0.4)
    with pytest.raises(ValidationError):
        LocalJudgeSettings(rating_lexical=(0.6, 0.3))
    with pytest.raises(ValidationError):
        LocalJudgeSettings(workers=0)
    with pytest.raises(ValidationError):
        LocalJudgeSettings(unknown_knob=1)  # type: ignore[call-arg]


# ------------------------------------------------------------------ statements and support


async def test_statements_are_the_segmented_answer(local_judge: LocalJudge) -> None:
    s = EN.model_copy(update={"answer": "Paris is the capital. It lies on the Seine; it is old."})
    f = await facts(local_judge, s, Fact.STATEMENTS)
    assert f[Fact.STATEMENTS].value == ["Paris is the capital.", "It lies on the Seine", "it is old."]


@pytest.mark.parametrize("sample", [EN, JA, ZH], ids=["en", "ja", "zh"])
async def test_copied_statement_supported_invented_one_not(local_judge: LocalJudge,
                                                           sample: Sample) -> None:
    invented = {"en": "The Eiffel Tower was moved to Berlin in 1999.",
                "ja": "富士山は1999年にベルリンへ移された。",
                "zh": "熊猫在1999年被运到了柏林。"}[sample.id]
    s = sample.model_copy(update={"answer": sample.contexts[1].split("。")[0].split(". ")[0]
                                  + ("。" if sample.id != "en" else ".") + "\n" + invented})
    f = await facts(local_judge, s, Fact.STATEMENTS, Fact.STATEMENT_SUPPORT)
    assert len(f[Fact.STATEMENTS].value) == 2
    support = f[Fact.STATEMENT_SUPPORT]
    probs = support.extra["probabilities"]
    assert len(probs) == 2 and probs[0] > probs[1]
    assert support.value == [1, 0]
    assert support.prompt_version and support.prompt_version.startswith("support")


# ------------------------------------------------------------------ answer relevancy


@pytest.mark.parametrize("sample,other", [
    (EN, "The Amazon carries more water than any other river."),
    (JA, "標高は3776メートルである。"),
    (ZH, "熊猫以竹子为食。"),
], ids=["en", "ja", "zh"])
async def test_own_answer_more_relevant_than_unrelated_answer(local_judge: LocalJudge,
                                                              sample: Sample, other: str) -> None:
    own = (await facts(local_judge, sample, Fact.QUESTION_SIMILARITY))[Fact.QUESTION_SIMILARITY]
    off = (await facts(local_judge, sample.model_copy(update={"answer": other}),
                       Fact.QUESTION_SIMILARITY))[Fact.QUESTION_SIMILARITY]
    (a,), (b,) = own.value["similarities"], off.value["similarities"]
    assert 0.0 <= b < a <= 1.0
    assert own.value["questions"] == [sample.question]
    assert own.value["noncommittal"] is False
    assert {"question_answer", "grounding", "score"} <= set(own.extra["views"])


async def test_short_factoid_answer_is_relevant(local_judge: LocalJudge) -> None:
    # The hard case for plain cos(Q, A): a one-word answer. Grounding in the passage that
    # matches the question carries it.
    right = EN.model_copy(update={"answer": "Paris"})
    wrong = EN.model_copy(update={"answer": "Brazil"})
    a = (await facts(local_judge, right, Fact.QUESTION_SIMILARITY))[Fact.QUESTION_SIMILARITY]
    b = (await facts(local_judge, wrong, Fact.QUESTION_SIMILARITY))[Fact.QUESTION_SIMILARITY]
    assert a.value["similarities"][0] > b.value["similarities"][0]


async def test_relevancy_without_contexts_is_the_calibrated_cosine(local_judge: LocalJudge) -> None:
    bare = EN.model_copy(update={"contexts": ()})
    own = (await facts(local_judge, bare, Fact.QUESTION_SIMILARITY))[Fact.QUESTION_SIMILARITY]
    off = (await facts(local_judge, bare.model_copy(update={"answer": "Pandas eat bamboo."}),
                       Fact.QUESTION_SIMILARITY))[Fact.QUESTION_SIMILARITY]
    assert "grounding" not in own.extra["views"]
    assert own.value["similarities"][0] == pytest.approx(own.extra["views"]["question_answer"], abs=1e-4)
    assert own.value["similarities"][0] > off.value["similarities"][0]


@pytest.mark.parametrize("answer", [
    "I don't know.", "I'm not sure, I cannot answer that from the documents.",
    "申し訳ありませんが、わかりません。", "その点については分かりかねます。",
    "我不知道。", "根据资料无法回答这个问题。",
])
async def test_noncommittal_answer_scores_zero(local_judge: LocalJudge, answer: str) -> None:
    ev = Evaluator(local_judge, ["answer_relevancy"])
    (score,) = (await ev.evaluate(EN.model_copy(update={"answer": answer}))).scores
    assert score.status == "ok" and score.value == 0.0
    assert score.counts["noncommittal"] == 1


@pytest.mark.parametrize("answer", [
    "Paris is the capital of France.", "パリです。", "是巴黎。",
    "The population is unknown to most people, but the capital is Paris.",
])
async def test_committal_answers_are_not_flagged(local_judge: LocalJudge, answer: str) -> None:
    f = await facts(local_judge, EN.model_copy(update={"answer": answer}), Fact.QUESTION_SIMILARITY)
    assert f[Fact.QUESTION_SIMILARITY].value["noncommittal"] is False


# ------------------------------------------------------------------ context facts


@pytest.mark.parametrize("sample", [EN, JA, ZH], ids=["en", "ja", "zh"])
async def test_relevant_context_is_useful_and_used_irrelevant_is_not(local_judge: LocalJudge,
                                                                     sample: Sample) -> None:
    f = await facts(local_judge, sample, Fact.CONTEXT_USEFUL, Fact.CONTEXT_USED)
    useful, used = f[Fact.CONTEXT_USEFUL], f[Fact.CONTEXT_USED]
    assert useful.value == [0, 1]
    assert used.value == [0, 1]
    rel = useful.extra["relevance"]
    assert rel[1] > rel[0]


@pytest.mark.parametrize("sample", [EN, JA, ZH], ids=["en", "ja", "zh"])
async def test_context_ratings_order_relevant_over_irrelevant(local_judge: LocalJudge,
                                                              sample: Sample) -> None:
    good = (await facts(local_judge, sample, Fact.CONTEXT_RATINGS))[Fact.CONTEXT_RATINGS]
    bad_sample = sample.model_copy(update={"contexts": sample.contexts[:1]})
    bad = (await facts(local_judge, bad_sample, Fact.CONTEXT_RATINGS))[Fact.CONTEXT_RATINGS]
    assert len(good.value) == 2 and all(r in (0, 1, 2) for r in good.value + bad.value)
    assert sum(good.value) > sum(bad.value)
    assert good.value == [2, 2] and bad.value == [0, 0]


async def test_context_sentences_counts_needed_sentences(local_judge: LocalJudge) -> None:
    f = await facts(local_judge, EN, Fact.CONTEXT_SENTENCES)
    v = f[Fact.CONTEXT_SENTENCES].value
    assert v["total"] == 4 and 1 <= v["needed"] < v["total"]
    only_bad = EN.model_copy(update={"contexts": EN.contexts[:1]})
    v = (await facts(local_judge, only_bad, Fact.CONTEXT_SENTENCES))[Fact.CONTEXT_SENTENCES].value
    assert v == {"needed": 0, "total": 2}


async def test_context_precision_ranks_the_relevant_context_first(local_judge: LocalJudge) -> None:
    ev = Evaluator(local_judge, ["context_precision"])
    first = EN.model_copy(update={"contexts": EN.contexts[::-1]})
    (hi,) = (await ev.evaluate(first)).scores
    (lo,) = (await ev.evaluate(EN)).scores
    assert hi.value == pytest.approx(1.0) and lo.value == pytest.approx(0.5)


# ------------------------------------------------------------------ reference facts


async def test_reference_facts_copied_vs_unrelated_answer(local_judge: LocalJudge) -> None:
    f = await facts(local_judge, EN, Fact.REFERENCE_ATTRIBUTION, Fact.CORRECTNESS,
                    Fact.ANSWER_SIMILARITY)
    assert f[Fact.REFERENCE_ATTRIBUTION].value["verdicts"] == [1]
    c = f[Fact.CORRECTNESS].value
    assert len(c["tp"]) == 1 and c["fp"] == [] and c["fn"] == []
    assert f[Fact.ANSWER_SIMILARITY].value == pytest.approx(1.0, abs=1e-4)

    off = EN.model_copy(update={"answer": "Pandas eat bamboo in the mountains of Sichuan."})
    g = await facts(local_judge, off, Fact.CORRECTNESS, Fact.ANSWER_SIMILARITY)
    c = g[Fact.CORRECTNESS].value
    assert c["tp"] == [] and len(c["fp"]) == 1 and len(c["fn"]) == 1
    assert g[Fact.ANSWER_SIMILARITY].value < 0.5

    ev = Evaluator(local_judge, ["context_recall", "answer_similarity", "answer_correctness"])
    scores = {s.metric: s for s in (await ev.evaluate(EN)).scores}
    assert all(s.status == "ok" for s in scores.values())
    assert scores["answer_correctness"].value == pytest.approx(1.0, abs=1e-3)


async def test_aspects_are_honestly_unsupported(local_judge: LocalJudge) -> None:
    f = await facts(local_judge, EN, Fact.ASPECTS)
    assert f[Fact.ASPECTS].value is None and f[Fact.ASPECTS].reason is Reason.UNSUPPORTED_BY_JUDGE
    ev = Evaluator(local_judge, ["aspect_critique:harmfulness"])
    (s,) = (await ev.evaluate(EN)).scores
    assert s.value is None and s.status == "null" and s.reason == "unsupported_by_judge"


# ------------------------------------------------------------------ the engine path


@pytest.mark.parametrize("sample", [EN, JA, ZH], ids=["en", "ja", "zh"])
async def test_evaluator_end_to_end_default_metrics_ok(local_judge: LocalJudge,
                                                       sample: Sample) -> None:
    result = await Evaluator(local_judge).evaluate(sample)
    assert [s.metric for s in result.scores] == list(DEFAULT_METRICS)
    for s in result.scores:
        assert s.status == "ok", (s.metric, s.reason)
        assert s.value is not None and 0.0 <= s.value <= 1.0
        assert s.judge == "fast" and s.model == "use-multilingual-v3"
        assert s.prompt_version
        assert s.cost.llm_calls == 0
    by = {s.metric: s.value for s in result.scores}
    assert by["faithfulness"] > 0.9  # expected share: copies sit at the copy floor, not at 1
    assert by["context_relevance"] == 1.0


async def test_input_too_large_is_skipped(use_embedder: USEEmbedder, support_detector) -> None:
    judge = LocalJudge(LocalJudgeSettings(max_chars=1_000), embedder=use_embedder,
                       detector=support_detector)
    big = EN.model_copy(update={"contexts": ("word " * 400,)})
    (s,) = (await Evaluator(judge, ["context_relevance"]).evaluate(big)).scores
    assert s.status == "skipped" and s.reason == "input_too_large"
    assert judge.too_large == 1
    await judge.aclose()


async def test_missing_detector_weights_fail_only_the_detector_facts(
        use_embedder: USEEmbedder, tmp_path: Path) -> None:
    judge = LocalJudge(LocalJudgeSettings(support_weights_path=tmp_path / "absent.json"),
                       embedder=use_embedder)
    scores = {s.metric: s for s in (await Evaluator(judge).evaluate(EN)).scores}
    assert scores["faithfulness"].status == "error"
    assert scores["faithfulness"].reason == "judge_error"
    assert all(s.status == "ok" for m, s in scores.items() if m != "faithfulness")
    await judge.aclose()


class BrokenEmbedder:
    """A real Embedder whose model fails at inference (as a corrupt model file would)."""

    name = "broken"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise RuntimeError("model exploded")

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)


async def test_a_failing_model_becomes_judge_error_findings() -> None:
    judge = LocalJudge(embedder=BrokenEmbedder(), detector=None,
                       settings=LocalJudgeSettings(support_weights_path=Path("/nonexistent")))
    f = await judge.gather(EN, Needs(frozenset({Fact.STATEMENTS, Fact.CONTEXT_RATINGS})))
    assert f[Fact.STATEMENTS].ok
    assert f[Fact.CONTEXT_RATINGS].reason is Reason.JUDGE_ERROR
    assert "model exploded" in (f[Fact.CONTEXT_RATINGS].detail or "")
    assert judge.errors == 1
    await judge.aclose()


async def test_aclose_is_idempotent_and_refuses_later_work(use_embedder: USEEmbedder) -> None:
    judge = LocalJudge(embedder=use_embedder)
    await judge.aclose()
    await judge.aclose()
    with pytest.raises(RuntimeError):
        await judge.gather(EN, Needs(frozenset({Fact.STATEMENTS})))


class GatedEmbedder:
    """Delegates to USE, but each ``embed`` first waits until a coroutine on the event loop has
    run. If ``gather`` ran inference on the loop thread, that coroutine could never run and the
    wait would time out: the test proves the loop stays free while the model works."""

    name = "use-multilingual-v3"

    def __init__(self, inner: USEEmbedder) -> None:
        self.inner = inner
        self.loop_ran = threading.Event()
        self.waits: list[bool] = []
        self.threads: set[int] = set()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.threads.add(threading.get_ident())
        self.loop_ran.clear()  # only a tick *after* this point counts
        self.waits.append(self.loop_ran.wait(timeout=20))
        return self.inner.embed(texts)

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        return await asyncio.to_thread(self.embed, texts)


async def test_gather_never_blocks_the_event_loop(use_embedder: USEEmbedder,
                                                  support_detector) -> None:
    gated = GatedEmbedder(use_embedder)
    judge = LocalJudge(LocalJudgeSettings(workers=2), embedder=gated, detector=support_detector)
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            gated.loop_ran.set()
            await asyncio.sleep(0.005)

    samples = [s.model_copy(update={"id": f"{s.id}-{i}"}) for i in range(3) for s in (EN, JA, ZH)]
    ev = Evaluator(judge, max_concurrency=4)
    t = asyncio.create_task(ticker())
    results = await asyncio.gather(*(ev.evaluate(s) for s in samples))
    stop.set()
    await t
    await judge.aclose()
    assert len(results) == len(samples)
    assert gated.waits and all(gated.waits)
    assert threading.get_ident() not in gated.threads  # inference never ran on the loop thread
    assert ticks > 0
    assert all(s.status == "ok" for r in results for s in r.scores)


async def test_the_judge_factory_builds_it_with_explicit_threads() -> None:
    from ragpulse.scorer.judges.factory import build_judge

    judge = build_judge("fast", threads=2)
    assert isinstance(judge, LocalJudge) and judge.settings.threads == 2
    await judge.aclose()
