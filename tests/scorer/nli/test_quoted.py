"""A statement that repeats a context's sentences word for word is supported (P 1), whatever the
model says: the bundled model read "Standard delivery takes 3 days." and
"博物馆9:00开门，17:30关门。" against themselves as unsupported (0.22 and 0.19)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragpulse.scorer.judges.base import Needs
from ragpulse.scorer.judges.factory import BUNDLED_MODEL_DIR, _local_model_settings
from ragpulse.scorer.judges.nli import NliJudge, NliJudgeSettings, NliModel
from ragpulse.scorer.judges.nli.quoted import QUOTED_VERSION, quote_key, quoted
from ragpulse.scorer.judges.nli.settings import settings_tag
from ragpulse.scorer.model import Fact, Sample
from ragpulse.scorer.segment import split_sentences

CTX = ("Orders ship from the Leeds warehouse. Standard delivery takes 3 days. Express delivery "
       "takes 1 day and costs 7 pounds.")


@pytest.mark.parametrize(("a", "b"), [
    ("Standard delivery takes 3 days.", "standard delivery takes 3 days"),
    ("Standard delivery takes 3 days [1].", "Standard  delivery takes 3 days."),
    ("**Standard delivery** takes 3 days.", "- Standard delivery takes 3 days"),
    ("標準配送は３日かかります。【2】", "標準配送は3日かかります"),
    ("退款将在5个工作日内退回原支付方式。", "退款将在5个工作日内退回原支付方式"),
])
def test_the_key_ignores_case_spacing_markdown_and_citations(a: str, b: str) -> None:
    assert quote_key(a) == quote_key(b)


@pytest.mark.parametrize(("a", "b"), [
    ("Standard delivery takes 3 days.", "Standard delivery takes 4 days."),
    ("The warranty covers water damage.", "The warranty does not cover water damage."),
    ("退款将在5个工作日内退回。", "退款将在7个工作日内退回。"),
])
def test_the_key_keeps_every_word_and_value(a: str, b: str) -> None:
    assert quote_key(a) != quote_key(b)


def test_a_sentence_or_a_run_of_sentences_is_a_quote() -> None:
    statements = [
        "Standard delivery takes 3 days.",                                   # one sentence
        "Orders ship from the Leeds warehouse; standard delivery takes 3 days.",  # a run of two
        "Express delivery takes 1 day and costs 7 pounds [2].",               # citation marker
        "Standard delivery takes 2 days.",                                    # another value
        "Express delivery takes 1 day.",                                      # part of a sentence
        "Standard delivery",                                                  # part of a sentence
        "Yes.",                                                               # too short
    ]
    found = quoted(statements, ["Yes.", CTX], split_sentences)
    assert set(found) == {0, 1, 2}
    assert found[0] == (1, "Standard delivery takes 3 days.")
    assert found[1] == (1, "Orders ship from the Leeds warehouse. Standard delivery takes 3 days.")


def test_a_part_of_a_sentence_is_never_a_quote() -> None:
    ctx = ["It is false that the warranty covers water damage."]
    assert quoted(["The warranty covers water damage."], ctx, split_sentences) == {}


def test_the_first_context_that_holds_it_wins() -> None:
    s = ["Standard delivery takes 3 days."]
    assert quoted(s, ["Nothing here.", CTX, "Standard delivery takes 3 days."],
                  split_sentences) == {0: (1, "Standard delivery takes 3 days.")}


def test_the_setting_is_on_by_default_and_named_in_the_stored_version() -> None:
    on = NliJudgeSettings(premise="evidence")
    off = on.model_copy(update={"quoted_support": False})
    assert on.quoted_support
    assert settings_tag(on) == f"{settings_tag(off)}+{QUOTED_VERSION}"
    assert QUOTED_VERSION in settings_tag(_local_model_settings(None))


@pytest.mark.parametrize("premise", ["chunks", "views", "evidence"])
def test_a_quote_has_p_1_and_its_sentences_as_evidence(tiny_dir: Path, premise: str) -> None:
    statements = ["Standard delivery takes 3 days.", "paris"]
    ctx = ["paris evidence", CTX]
    on = NliModel(NliJudgeSettings(model_dir=tiny_dir, premise=premise))
    off = NliModel(NliJudgeSettings(model_dir=tiny_dir, premise=premise, quoted_support=False))
    closest: list = []
    p_on, pairs_on = on.support_matrix(statements, ctx, closest=closest)
    p_off, pairs_off = off.support_matrix(statements, ctx)
    assert p_off[0, 1] < 0.5  # the tiny model knows only "paris evidence"
    assert p_on[0, 1] == 1.0 and closest[0] == (1.0, "Standard delivery takes 3 days.", (1,))
    assert p_on[1].tolist() == p_off[1].tolist() and pairs_on == pairs_off  # the rest as it was


@pytest.mark.parametrize(("context", "statement"), [
    (CTX, "Standard delivery takes 3 days."),
    ("博物馆周一闭馆。博物馆9:00开门，17:30关门。", "博物馆9:00开门，17:30关门。"),
    ("返品は30日以内に受け付けます。標準配送は3日かかります。", "標準配送は3日かかります。"),
])
async def test_the_model_judge_reads_a_quoted_sentence_as_faithful(context: str,
                                                                     statement: str) -> None:
    from ragpulse.scorer.embeddings import USEEmbedder

    settings = _local_model_settings(None)
    assert settings.model_dir == BUNDLED_MODEL_DIR
    judge = NliJudge(settings, embedder=USEEmbedder(threads=1))
    try:
        sample = Sample(id="q", question="How long does it take?", contexts=(context,),
                        answer=statement)
        out = await judge.gather(sample, Needs(frozenset({Fact.STATEMENT_SUPPORT})))
    finally:
        await judge.aclose()
    finding = out[Fact.STATEMENT_SUPPORT]
    assert QUOTED_VERSION in finding.prompt_version
    assert finding.extra["model_probabilities"] == [1.0], finding
    assert finding.value == [1] and finding.extra["probabilities"][0] >= 0.95, finding
