"""Pins of what the local judge computes from its lexicon: ``support-lr@5`` probabilities of a
few statements (English, Japanese, Chinese; numbers, names, negation, synonyms, number words,
clause split) and ``content_units`` of a few texts. Recorded before the stop words, stemmer and
number words moved to one module; a change to any of them that moves a score fails here."""

from __future__ import annotations

import numpy as np
import pytest

from ragpulse.scorer.embeddings import USEEmbedder
from ragpulse.scorer.judges.local.support_detector import SupportDetector, featurize
from ragpulse.scorer.judges.local.text import content_units

from .test_support import CONTEXT_EN, CONTEXT_JA, CONTEXT_ZH

# (statement, context, P with the float embedder, P from the lexical features alone)
PINS = [
    ("The film grossed $181,674,817 worldwide.", CONTEXT_EN, 0.962, 0.8266729599250815),
    ("Poseidon was directed by Steven Spielberg in 2011.", CONTEXT_EN,
     0.20270867396935224, 0.2005986566365014),
    ("The ship did not capsize after the wave hit it.", CONTEXT_EN,
     0.4639009529148407, 0.5241618206595795),
    ("It was nominated for an Academy Award, while the film was purchased by twelve studios and "
     "shipped to Europe for colour restoration in nineteen cinemas.", CONTEXT_EN,
     0.5272262541306966, 0.19211185682391652),
    ("東京タワーの高さは333メートルです。", CONTEXT_JA, 0.4223528675500322, 0.42201594306011003),
    ("東京タワーは1960年に大阪で完成しました。", CONTEXT_JA,
     0.2942453581521642, 0.2917537592434683),
    ("长城全长约两万一千公里。", CONTEXT_ZH, 0.711, 0.711),
    ("长城始建于明朝。", CONTEXT_ZH, 0.32280737801750503, 0.3156159780092695),
]


@pytest.fixture(scope="module")
def detector() -> SupportDetector:
    """The pins are float32 maths: the float embedder (the int8 one, the default, moves them
    by far less than any lexicon change would: the test after)."""
    return SupportDetector(USEEmbedder(threads=1, precision="float").warm())


def test_the_default_int8_embedder_moves_the_pins_by_little() -> None:
    det = SupportDetector(USEEmbedder(threads=1, precision="int8").warm())
    got = np.array([det.predict([statement], [context])[0] for statement, context, *_ in PINS])
    assert np.abs(got - np.array([p[2] for p in PINS])).max() < 0.002


@pytest.mark.parametrize(("statement", "context", "with_embedder", "lexical"), PINS)
def test_support_lr_probabilities_are_pinned(detector: SupportDetector, statement: str,
                                             context: str, with_embedder: float,
                                             lexical: float) -> None:
    (p,) = detector.predict([statement], [context])
    assert p == pytest.approx(with_embedder, abs=1e-6)  # the embedding is float32 maths
    x = featurize([statement], [context], None)
    assert float(detector.weights.proba(x)[0]) == pytest.approx(lexical, abs=1e-12)
    assert np.isfinite(x).all()


@pytest.mark.parametrize(("text", "units", "question_units"), [
    ("What are the capitals of the countries?", {"capital", "country"}, {"capital", "country"}),
    ("Shipping takes seven days; purchases arrive quickly.",
     {"arrive", "day", "purchas", "quickly", "seven", "shipp", "tak"},
     {"arrive", "day", "purchas", "quickly", "seven", "shipp", "tak"}),
    ("第190回国会が開催された年は何年ですか？",
     {"190", "が開", "た年", "は何", "会が", "何年", "催さ", "回国", "国会", "年で", "年は", "第", "開催"},
     {"190", "が開", "た年", "会が", "催さ", "回国", "国会", "年は", "第", "開催"}),
    ("长城是在哪个朝代大规模修建的？", {"代大", "修建", "哪", "大规", "朝代", "模修", "规模", "长城"},
     {"代大", "修建", "大规", "朝代", "模修", "规模", "长城"}),
])
def test_content_units_are_pinned(text: str, units: set[str], question_units: set[str]) -> None:
    assert content_units(text) == units
    assert content_units(text, question=True) == question_units
