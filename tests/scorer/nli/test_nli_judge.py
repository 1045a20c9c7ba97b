"""The NLI judge on the tiny model: its own facts, the local judge's delegated ones, the metrics'
values and intervals through the real Evaluator, and how every entry point builds it
(``ragpulse score``, ``ragpulse scorer`` settings and flags, ``ragpulse up``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from ragpulse.scorer import Evaluator, Fact, Reason, Sample
from ragpulse.scorer.judges.base import Judge, Needs
from ragpulse.scorer.judges.factory import build_judge
from ragpulse.scorer.judges.nli import NliJudge, NliJudgeSettings
from ragpulse.scorer.judges.nli.settings import settings_tag
from ragpulse.scorer.metrics import DEFAULT_METRICS

SAMPLE = Sample(
    id="s1",
    question="What is the capital of France?",
    contexts=("The Amazon river flows through Brazil.",
              "Paris is the capital of France. The evidence is clear."),
    answer="Paris is the capital of France. It is unsupported by anything.",
)


@pytest.fixture
async def judge(tiny_dir: Path, use_embedder):
    j = NliJudge(NliJudgeSettings(model_dir=tiny_dir), embedder=use_embedder)
    yield j
    await j.aclose()


async def test_statement_support_and_context_used(judge: NliJudge) -> None:
    assert isinstance(judge, Judge) and judge.name == "nli" and judge.model == "tests/tiny-nli"
    out = await judge.gather(SAMPLE, Needs(frozenset({Fact.STATEMENT_SUPPORT, Fact.CONTEXT_USED,
                                                      Fact.STATEMENTS})))
    assert out[Fact.STATEMENTS].value == ["Paris is the capital of France.",
                                          "It is unsupported by anything."]
    support = out[Fact.STATEMENT_SUPPORT]
    assert support.value == [1, 0] and support.model == "tests/tiny-nli"
    probs = support.extra["probabilities"]
    assert probs[0] > 0.99 and probs[1] < 0.01
    assert support.extra["best_context"][0] == 1 and support.extra["expected_share"] is True
    tag = settings_tag(NliJudgeSettings(model_dir=Path("elsewhere")))  # the default settings'
    assert tag.startswith("chunks#") and tag.endswith("+quoted@1")
    assert len(tag) == len("chunks#") + 8 + len("+quoted@1")
    assert support.prompt_version == f"nli-support@2/{tag}/expected"
    used = out[Fact.CONTEXT_USED]
    assert used.prompt_version == f"nli-support@2/{tag}/context-used@2"
    assert used.value == [0, 1] and used.extra["entailment"][1] > 0.99
    assert judge.samples == 1 and judge.pairs == 4  # 2 statements x 2 contexts, one run


async def test_faithfulness_is_the_mean_probability_with_its_interval(judge: NliJudge) -> None:
    ev = Evaluator(judge, list(DEFAULT_METRICS))
    res = await ev.evaluate(SAMPLE)
    scores = {s.metric: s for s in res.scores}
    faith = scores["faithfulness"]
    assert faith.judge == "nli" and faith.model == "tests/tiny-nli"
    assert faith.value == pytest.approx(0.5, abs=0.01)  # (~1 + ~0) / 2
    assert faith.counts == {"statements": 2, "supported": 1}
    assert faith.interval is not None and faith.interval.low < 0.5 < faith.interval.high
    assert scores["context_utilization"].value == pytest.approx(0.5)  # AP of [0, 1]
    # delegated to the local judge, computed by USE: said so in the score's model
    for name in ("answer_relevancy", "context_precision", "context_relevance"):
        assert scores[name].status == "ok" and scores[name].model == "use-multilingual-v3", name


async def test_verdicts_mode_and_threshold(tiny_dir: Path, use_embedder) -> None:
    j = NliJudge(NliJudgeSettings(model_dir=tiny_dir, faithfulness_value="verdicts",
                                  threshold=0.05), embedder=use_embedder)
    try:
        out = await j.gather(SAMPLE, Needs(frozenset({Fact.STATEMENT_SUPPORT})))
    finally:
        await j.aclose()
    f = out[Fact.STATEMENT_SUPPORT]
    assert "expected_share" not in f.extra
    assert f.prompt_version == f"nli-support@2/{settings_tag(j.settings)}"
    assert f.value == [1, 0]  # the second statement is ~1e-12, under any sane threshold


async def test_reference_facts_run_on_the_nli_model(judge: NliJudge) -> None:
    s = SAMPLE.model_copy(update={"reference": "Paris is the capital. The evidence holds."})
    out = await judge.gather(s, Needs(frozenset({Fact.REFERENCE_ATTRIBUTION})))
    f = out[Fact.REFERENCE_ATTRIBUTION]
    assert f.model == "tests/tiny-nli"
    assert f.prompt_version == f"nli-support@2/{settings_tag(judge.settings)}"  # as the model's
    assert f.value["verdicts"] == [1, 1]  # the second context has "evidence" for both


def test_the_stored_version_names_what_decides_the_scores() -> None:
    """Scores made under other premises, windows or claims are stored under another version;
    resources, the model's display name and the blend (tagged on the samples it blends) leave
    it as it is."""
    base = NliJudgeSettings(premise="views", premise_view_sentences=1, candidates=2)
    tag = settings_tag(base)
    for same in ({"threads": 4, "batch_size": 32, "workers": 3, "max_pending": 9},
                 {"model_dir": Path("/m")}, {"model_name": "other"}, {"blend": "off"},
                 {"blend_max_contexts": 5}, {"max_pairs": 4096}):
        assert settings_tag(base.model_copy(update=same)) == tag, same
    tags = {tag}
    for moved in ({"premise": "sentences"}, {"premise_view_sentences": 2}, {"candidates": 3},
                  {"premise_tokens": 64}, {"terse_claims": "with-question"},
                  {"chunk_overlap": 32}, {"max_length": 128}, {"threshold": 0.6}):
        tags.add(settings_tag(base.model_copy(update=moved)))
        assert settings_tag(base.model_copy(update=moved)) != tag, moved
    assert len(tags) == 9  # each change its own version
    assert settings_tag(base.model_copy(update={"premise": "sentences"})).startswith("sentences#")


async def test_other_premises_store_another_version(tiny_dir: Path, use_embedder) -> None:
    versions = []
    for premise in ("chunks", "sentences"):
        j = NliJudge(NliJudgeSettings(model_dir=tiny_dir, premise=premise), embedder=use_embedder)
        try:
            out = await j.gather(SAMPLE, Needs(frozenset({Fact.STATEMENT_SUPPORT})))
        finally:
            await j.aclose()
        versions.append(out[Fact.STATEMENT_SUPPORT].prompt_version)
    assert versions[0] != versions[1] and versions[1].startswith("nli-support@2/sentences#")


async def test_too_many_pairs_skip_the_sample_not_the_judge(tiny_dir: Path, use_embedder) -> None:
    j = NliJudge(NliJudgeSettings(model_dir=tiny_dir, max_pairs=3), embedder=use_embedder)
    try:
        out = await j.gather(SAMPLE, Needs(frozenset({Fact.STATEMENT_SUPPORT, Fact.CONTEXT_USED})))
        assert {f.reason for f in out.values()} == {Reason.INPUT_TOO_LARGE}
        assert "max_pairs 3" in (out[Fact.STATEMENT_SUPPORT].detail or "")
        small = SAMPLE.model_copy(update={"contexts": ("the evidence .",)})
        out = await j.gather(small, Needs(frozenset({Fact.STATEMENT_SUPPORT})))
        assert out[Fact.STATEMENT_SUPPORT].value == [1, 0] and j.too_large == 1
    finally:
        await j.aclose()


async def test_model_failure_is_a_finding(judge: NliJudge, monkeypatch) -> None:
    def boom(*a, **k):
        raise RuntimeError("session lost")

    monkeypatch.setattr(judge.nli, "support_matrix", boom)
    out = await judge.gather(SAMPLE, Needs(frozenset({Fact.STATEMENT_SUPPORT})))
    f = out[Fact.STATEMENT_SUPPORT]
    assert f.reason is Reason.JUDGE_ERROR and "session lost" in f.detail and judge.errors == 1


async def test_concurrent_samples_score_like_sequential_ones(judge: NliJudge) -> None:
    import asyncio

    samples = [SAMPLE.model_copy(update={"id": str(i), "answer": a}) for i, a in enumerate(
        ["Paris is the capital.", "It is unsupported.", "The river flows.", "Paris. Unsupported."]
        * 4)]
    needs = Needs(frozenset({Fact.STATEMENT_SUPPORT}))
    alone = [(await judge.gather(s, needs))[Fact.STATEMENT_SUPPORT].extra["probabilities"]
             for s in samples[:4]]
    together = await asyncio.gather(*(judge.gather(s, needs) for s in samples))
    assert [t[Fact.STATEMENT_SUPPORT].extra["probabilities"] for t in together] == alone * 4
    await judge.aclose()
    with pytest.raises(RuntimeError):
        await judge.gather(SAMPLE, needs)


# ---------------------------------------------------------------------- entry points


async def test_build_judge(tiny_dir: Path) -> None:
    j = build_judge("nli", model_dir=tiny_dir, positive_label="entailment", batch_size=3,
                    threads=2)
    assert isinstance(j, NliJudge)
    assert j.settings.batch_size == 3 and j.settings.threads == 2 and j.nli.positive_index == 1
    await j.aclose()
    with pytest.raises(ValueError, match="needs a model directory"):
        build_judge("nli")
    with pytest.raises(ValueError, match="is not among"):
        build_judge("nli", model_dir=tiny_dir, positive_label="yes-please")
    with pytest.raises(ValueError, match="nli.batch_size"):
        build_judge("nli", model_dir=tiny_dir, batch_size=0)


@pytest.fixture(scope="module")
def app():
    from ragpulse.deploy import cli as root

    root._register()
    return root.app


def test_ragpulse_score_with_the_nli_judge(app, tiny_dir: Path, tmp_path: Path) -> None:
    inp = tmp_path / "in.jsonl"
    rows = [{"id": "a", "question": SAMPLE.question, "contexts": list(SAMPLE.contexts),
             "answer": SAMPLE.answer},
            {"id": "b", "question": "Where?", "contexts": ["the evidence ."], "answer": "Paris."},
            {"id": "c", "question": "Where?", "contexts": ["nothing here ."], "answer": "Paris."}]
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    res = CliRunner().invoke(app, ["score", "--input", str(inp), "--output", str(out),
                                   "--judge", "nli", "--model-dir", str(tiny_dir),
                                   "--threads", "1", "--quiet"])
    assert res.exit_code == 0, res.output
    lines = {x["id"]: x for x in map(json.loads, out.read_text().splitlines())}
    assert set(lines) == {"a", "b", "c"}
    faith = {k: v["scores"]["faithfulness"] for k, v in lines.items()}
    assert faith["a"]["value"] == pytest.approx(0.5, abs=0.01)
    assert faith["b"]["value"] > 0.99 and faith["c"]["value"] < 0.2
    assert faith["b"]["judge"] == "nli" and faith["b"]["interval"][0] < 0.5 < faith["b"]["interval"][1]  # one statement: wide
    assert lines["a"]["scores"]["answer_relevancy"]["status"] == "ok"


def test_ragpulse_score_refuses_a_bad_model_dir_before_scoring(app, tmp_path: Path) -> None:
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": "a", "question": "q", "contexts": ["c"], "answer": "a"}))
    (tmp_path / "empty").mkdir()
    res = CliRunner().invoke(app, ["score", "--input", str(inp), "--judge", "nli",
                                   "--model-dir", str(tmp_path / "empty"), "--quiet"])
    assert res.exit_code == 2 and "no model.onnx" in " ".join(res.output.split())


def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith("RAGPULSE_"):
            monkeypatch.delenv(k)


async def test_ragpulse_scorer_settings_from_flags_and_env(
    app, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragpulse.scorer.pipeline import ScorerSettings

    _clean_env(monkeypatch)
    monkeypatch.setenv("RAGPULSE_NLI__BATCH_SIZE", "4")
    monkeypatch.setenv("RAGPULSE_NLI__THREADS", "2")
    # what `scorer --judge nli --model-dir DIR --positive-label entailment` builds
    # (ragpulse.deploy.options: the flags given as init arguments, over the environment)
    s = ScorerSettings(judge="nli", nli={"model_dir": str(tiny_dir),
                                         "positive_label": "entailment"})
    assert s.judge == "nli" and s.nli.model_dir == tiny_dir and s.nli.batch_size == 4
    j = build_judge(s.judge, nli=s.nli)  # what build_scorer does
    assert isinstance(j, NliJudge) and j.settings.threads == 2 and j.settings.batch_size == 4
    await j.aclose()
    monkeypatch.setenv("RAGPULSE_JUDGE", "nli")
    monkeypatch.setenv("RAGPULSE_NLI__MODEL_DIR", str(tiny_dir))
    assert ScorerSettings().nli.model_dir == tiny_dir
    # judge nli without a model directory: exit 2 before connecting, the field named
    monkeypatch.delenv("RAGPULSE_NLI__MODEL_DIR")
    res = CliRunner().invoke(app, ["scorer"])
    assert res.exit_code == 2 and "nli.model_dir" in res.output
    res = CliRunner().invoke(app, ["scorer", "--judge", "nli", "--positive-label", "x",
                                   "--model-dir", str(tiny_dir), "--kafka", "no-port"])
    assert res.exit_code == 2 and "kafka.bootstrap_servers" in res.output  # flags accepted


def test_ragpulse_scorer_fails_at_start_up_on_a_bad_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragpulse.scorer.pipeline import ScorerSettings, build_scorer

    _clean_env(monkeypatch)
    (tmp_path / "m").mkdir()
    s = ScorerSettings(judge="nli", nli={"model_dir": tmp_path / "m"})
    with pytest.raises(ValueError, match="no model.onnx"):
        build_scorer(s, client=SimpleNamespace())


def test_ragpulse_up_accepts_the_nli_judge(tiny_dir: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import typer

    from ragpulse.deploy import embedded
    from ragpulse.deploy.commands import up
    from ragpulse.deploy.embedded import Embedded

    _clean_env(monkeypatch)
    seen: list = []
    monkeypatch.setattr(embedded, "run_embedded", lambda settings, console: seen.append(settings) or 0)
    one = typer.Typer()
    one.command()(up)
    res = CliRunner().invoke(one, ["--judge", "nli", "--data-dir", str(tmp_path)])
    assert res.exit_code == 2 and "--model-dir" in res.output and not seen
    res = CliRunner().invoke(one, ["--judge", "nli", "--model-dir", str(tiny_dir),
                                   "--data-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    e = Embedded(seen[0])
    e.broker = SimpleNamespace(bootstrap="127.0.0.1:39092")
    e._chdb_path = str(tmp_path / "chdb")
    monkeypatch.setenv("RAGPULSE_NLI__BATCH_SIZE", "2")
    scorer = e.scorer_settings()
    assert scorer.judge == "nli" and scorer.nli.model_dir == tiny_dir
    assert scorer.nli.batch_size == 2  # the rest of RAGPULSE_NLI__* still applies
    # the model directory from the environment alone is enough too
    monkeypatch.setenv("RAGPULSE_NLI__MODEL_DIR", str(tiny_dir))
    res = CliRunner().invoke(one, ["--judge", "nli", "--data-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    e = Embedded(seen[-1])
    e.broker = SimpleNamespace(bootstrap="127.0.0.1:39092")
    e._chdb_path = str(tmp_path / "chdb")
    assert e.scorer_settings().nli.model_dir == tiny_dir
