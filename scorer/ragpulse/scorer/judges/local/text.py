"""Lexical views of text for the local judge: content units, question coverage, non-committal
answers. Pure functions, no model, deterministic; English, Japanese and Chinese.

A *content unit* is what a word is to English: a lower-cased content word (light suffix
stemming, stop words dropped; both from :mod:`.lexicon`) or a number for Latin-script text, and
a character bigram for runs of CJK characters (no tokenizer needed, and bigrams are the standard unit for Japanese and
Chinese retrieval). Bigrams made only of hiragana are grammar (です, ます, した), not content.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Sequence

from .lexicon import LIGHT_SUFFIXES, QUESTION_STOP_WORDS, strip_suffix

__all__ = [
    "content_units",
    "coverage",
    "idf_weights",
    "is_noncommittal",
    "normalize",
    "weighted_coverage",
]

# Interrogatives and their particles carry no content: the context never contains "何年" or
# "哪一年"; their bigrams would only lower every coverage by a constant.
_INTERROGATIVE = re.compile(
    r"何[年月日人回個つ度歳番]?|いつ|どこ|どの|どれ|どう|だれ|誰|なぜ|なに|いくつ|いくら|"
    r"什么|什麼|哪[里裡儿兒个個一些年]?|谁|誰|几|幾|多少|怎么|怎麼|为什么|為什麼|吗|嗎|呢"
)
# Chinese degree questions: "长城有多长" (how long is the Great Wall), 多高, 多大, 多远, 多久… The
# "(有)多 + adjective" frame is the question word, as "how long" is in English; left in, its
# bigrams (有多, 多长, and 城有 across the word boundary) outweighed the one content unit (长城)
# and no context sentence covered the question. Kana-free text only: in Japanese 多大 is a word.
_ZH_INTERROGATIVE = re.compile(
    r"[有是]?多[长長高大远遠久重深宽寬厚快老少]|如何|怎样|怎樣|什么样|什麼樣"
)
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af々ー]+")
_HIRAGANA = re.compile(r"[\u3040-\u309fー]+")
_LATIN = re.compile(r"[^\W_\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
_KANA = re.compile(r"[\u3040-\u30ff]")
# Chinese function characters (particles, copula, prepositions, demonstratives). Chinese has no
# kana to tell grammar from content, so in kana-free text they split Han runs like spaces do
# ("长城是在明朝修建的" -> 长城 / 明朝修建). Japanese text keeps them: there they are
# parts of content words (平和, 存在, 目的).
_ZH_FUNCTION = re.compile(r"[的了是在和与與及或也都就而被把对對从從于於之其这這那个個着著过過吗嗎呢吧啊]")


def normalize(text: str) -> str:
    """NFKC and lower case: full-width digits and Latin fold into ASCII ("２０１５" = "2015")."""
    return unicodedata.normalize("NFKC", text).lower()


def content_units(text: str, *, question: bool = False) -> frozenset[str]:
    """The content units of ``text``; ``question=True`` drops interrogatives first."""
    t = normalize(text)
    if question:
        t = _INTERROGATIVE.sub(" ", t)
        if not _KANA.search(t):
            t = _ZH_INTERROGATIVE.sub(" ", t)
    out: set[str] = set()
    for w in _LATIN.findall(t):
        w = w.strip("'’")
        if w and w not in QUESTION_STOP_WORDS and (len(w) > 1 or w.isdigit()):
            out.add(w if w.isdigit() else strip_suffix(w, LIGHT_SUFFIXES))
    if not _KANA.search(t):
        t = _ZH_FUNCTION.sub(" ", t)
    for run in _CJK_RUN.findall(t):
        if len(run) == 1:
            if not _HIRAGANA.fullmatch(run):
                out.add(run)
            continue
        for i in range(len(run) - 1):
            bg = run[i : i + 2]
            if not _HIRAGANA.fullmatch(bg):
                out.add(bg)
    return frozenset(out)


def idf_weights(units: Iterable[str], documents: Sequence[frozenset[str]]) -> dict[str, float]:
    """Smoothed inverse document frequency of each unit over ``documents`` (here: the sample's
    own context sentences). Units common to many retrieved sentences say little about which one
    answers the question: a retriever returns passages that all share the question's topic words,
    so only the rarer units separate the passage that answers from those that merely match."""
    n = len(documents)
    out: dict[str, float] = {}
    for u in units:
        df = sum(1 for d in documents if u in d)
        out[u] = math.log((n + 1) / (df + 0.5))
    return out


def coverage(units: frozenset[str], other: frozenset[str] | set[str]) -> float:
    """Share of ``units`` found in ``other``; 0.0 when ``units`` is empty."""
    if not units:
        return 0.0
    return len(units & other) / len(units)


def weighted_coverage(weights: dict[str, float], other: frozenset[str] | set[str]) -> float:
    """IDF-weighted share of the weighted units found in ``other``; 0.0 when there are none."""
    total = sum(weights.values())
    if total <= 0.0:
        return 0.0
    return sum(w for u, w in weights.items() if u in other) / total


# Non-committal answers: refusals and "don't know" in the three languages the judge covers.
# Anchored loosely (anywhere in a short answer) because they are often wrapped in politeness.
_I = r"\bi(?:\s+am|['’]m|\s+do|\s+really|\s+simply)?"
_NONCOMMITTAL = re.compile(
    rf"{_I}\s+(?:not|n['’]t|do\s+not|don['’]t)\s+(?:know|sure|have\s+(?:enough\s+)?information)\b"
    rf"|{_I}\s+(?:can\s*not|can['’]t|unable\s+to|not\s+able\s+to)\s+"
    r"(?:answer|say|tell|determine|find|provide|help|be\s+sure)\b"
    r"|\bno\s+(?:information|answer|data)\s+(?:is\s+)?(?:available|provided|given)\b"
    r"|\b(?:context|document|text|passage)s?\s+(?:does|do|did)(?:\s+not|n['’]t)\s+"
    r"(?:contain|mention|provide|say|specify)\b"
    r"|\bnot\s+(?:enough|sufficient)\s+information\b|\bno\s+idea\b|\bcannot\s+be\s+determined\b"
    r"|わかりません|分かりません|わからない|分からない|分かりかね|わかりかね|存じません"
    r"|答えられません|回答できません|お答えできません|判断できません|情報がありません"
    r"|記載がありません|記載されていません"
    r"|不知道|不清楚|无法回答|無法回答|无法确定|無法確定|不能回答|没有相关信息|沒有相關資訊|无可奉告",
    re.IGNORECASE,
)


def is_noncommittal(answer: str) -> bool:
    """True for evasive answers ("I don't know", "わかりません", "无法回答"). Only the first
    400 characters are read: a long answer that mentions uncertainty in passing still commits."""
    return bool(_NONCOMMITTAL.search(normalize(answer[:400])))
