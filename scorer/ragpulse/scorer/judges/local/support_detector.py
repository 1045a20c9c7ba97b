"""Local faithfulness: P(statement is supported by the contexts), with no API and no download.

:class:`SupportDetector` reads the evidence a careful reader checks first (numbers and names the
contexts never mention, content-word coverage over all contexts and the best sentences, the
USE-aligned sentence and its negation, novel n-grams, rewording-tolerant coverage) and combines
it with a small logistic regression trained on public labelled sets
(``bench/train_faithfulness.py``). A long English statement is scored clause by clause
(:func:`split_clauses`, the mean of its clauses); copy-like and paraphrase-like statements get
at least the weights' ``copy_floor`` / ``paraphrase_floor``
(:func:`featurize_with_copies`, :func:`paraphrase_like`); the logit becomes a probability
through the weights' isotonic ``calibration`` knots (:func:`calibrated_proba`). The features,
their definitions, the training data and the measured quality: docs/local-faithfulness.md.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ...embeddings import Embedder, USEEmbedder
from ...segment import split_sentences
from .lexicon import (
    NUMBER_WORDS,
    SENTENCE_STARTERS,
    STATEMENT_STOP_WORDS,
    stem_word,
    words,
)

__all__ = [
    "DEFAULT_WEIGHTS_PATH",
    "FEATURES",
    "SupportDetector",
    "SupportSettings",
    "SupportWeights",
    "WeightsError",
    "calibrated_proba",
    "clause_means",
    "featurize",
    "featurize_with_copies",
    "paraphrase_like",
    "split_clauses",
]

DEFAULT_WEIGHTS_PATH = Path(__file__).parent / "weights" / "support-lr.json"

FEATURES: tuple[str, ...] = (
    "coverage",  # share of the statement's content units found anywhere in the contexts
    "best_sentence_recall",  # share found in the single best context sentence
    "best_two_recall",  # share found in the best two sentences together (fused summaries)
    "aligned_recall",  # share found in the sentence the embedding + lexical alignment picks
    "embedding_max",  # max USE cosine with the statement's lexically closest sentences
    "novel_bigrams",  # share of the statement's unit bigrams absent from the contexts
    "unsupported_numbers",  # share of the statement's numbers absent from the contexts
    "any_unsupported_number",  # 1 if at least one number is absent
    "unsupported_entities",  # share of names / proper-noun-ish runs absent from the contexts
    "any_unsupported_entity",  # 1 if at least one is absent
    "negation_mismatch",  # negated in the statement xor in the aligned sentence
    "length_ratio",  # log((1 + units in statement) / (1 + units in aligned sentence))
    "soft_coverage",  # coverage tolerant of rewording: synonyms, shared word stems, CJK characters
    "soft_aligned_recall",  # the same, in the aligned sentence and the one before it
)


class WeightsError(ValueError):
    """The weights file is missing, unreadable or does not fit this detector (permanent)."""


class SupportSettings(BaseModel):
    """Bounds that keep one ``predict`` call cheap whatever the trace carries.

    Long retrieved passages are common in production; embedding cost grows with every sentence,
    so the context is cut at ``max_context_sentences`` (in rank order, deduplicated) and each
    text at ``max_text_chars`` before embedding. Only each statement's
    ``max_aligned_candidates`` lexically closest sentences are embedded (the weights are trained
    with the same setting). Lexical features use the full contexts.
    """

    model_config = ConfigDict(frozen=True)

    max_context_sentences: int = Field(default=200, ge=1, le=10_000)
    max_aligned_candidates: int = Field(default=4, ge=1, le=1_000)
    max_text_chars: int = Field(default=1_000, ge=16, le=100_000)
    max_statements: int = Field(default=200, ge=1, le=10_000)
    # A statement longer than this many words is scored clause by clause (``split_clauses``)
    # and gets the mean of its clauses' probabilities; 0 disables the split. The weights are
    # trained with the same value (recorded in the weights file).
    clause_split_words: int = Field(default=20, ge=0, le=10_000)


class SupportWeights(BaseModel):
    """The trained model: feature standardization, logistic coefficients and the verdict
    threshold, stored as JSON beside the code (a few hundred bytes; no hub)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    version: str
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    threshold: float = Field(ge=0.0, le=1.0)
    # P(supported) given to a copy-like statement (see ``featurize_with_copies``) when the
    # linear model says less; None: no floor (weights trained before it existed).
    copy_floor: float | None = Field(default=None, ge=0.0, le=1.0)
    # P(supported) given to a paraphrase-like statement (``paraphrase_like``) when the model
    # says less; None: no floor.
    paraphrase_floor: float | None = Field(default=None, ge=0.0, le=1.0)
    # Monotone calibration of the logit: knots ``[[logit, P], ...]`` with increasing logits and
    # non-decreasing P, linearly interpolated (flat beyond the ends). Empty: the logistic link.
    calibration: tuple[tuple[float, float], ...] = ()
    aggregate: str = "mean"
    l2: float = 1.0
    trained_on: dict[str, Any] = Field(default_factory=dict)
    quality: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> SupportWeights:
        n = len(self.features)
        if not (len(self.mean) == len(self.scale) == len(self.coef) == n):
            raise ValueError("features, mean, scale and coef must have the same length")
        if any(s <= 0 or not math.isfinite(s) for s in self.scale):
            raise ValueError("scale entries must be positive and finite")
        if not all(math.isfinite(v) for v in (*self.mean, *self.coef, self.intercept)):
            raise ValueError("weights must be finite")
        if self.aggregate not in ("mean", "min"):
            raise ValueError("aggregate must be 'mean' or 'min'")
        if self.calibration:
            zs = [k[0] for k in self.calibration]
            ps = [k[1] for k in self.calibration]
            if any(b <= a for a, b in itertools.pairwise(zs)):
                raise ValueError("calibration logits must be strictly increasing")
            if any(b < a for a, b in itertools.pairwise(ps)) or not all(0 <= v <= 1 for v in ps):
                raise ValueError("calibration probabilities must be non-decreasing in [0, 1]")
        return self

    @classmethod
    def load(cls, path: Path) -> SupportWeights:
        """Read and validate a weights file. Raises :class:`WeightsError`."""
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls.model_validate(raw)
        except (OSError, ValueError) as e:  # pydantic's ValidationError is a ValueError
            raise WeightsError(f"cannot load support weights from {path}: {e}") from e

    def logits(self, features: np.ndarray) -> np.ndarray:
        """The linear model's logit per row of a feature matrix (columns :data:`FEATURES`)."""
        z = (features - np.asarray(self.mean)) / np.asarray(self.scale)
        return z @ np.asarray(self.coef) + self.intercept

    def proba(self, features: np.ndarray, copies: np.ndarray | None = None) -> np.ndarray:
        """P(supported) per row of ``features``: the calibrated logit (``calibration``, else the
        logistic link); rows flagged in ``copies`` get at least ``copy_floor``."""
        p = calibrated_proba(self.logits(features), copies, self.copy_floor, self.calibration)
        if self.paraphrase_floor is not None:
            p = np.where(paraphrase_like(features), np.maximum(p, self.paraphrase_floor), p)
        return p


# A paraphrase-like statement: every rewording-tolerant unit in the aligned sentence, USE cosine
# at least this high, no unsupported number or name, negation agreeing.
PARAPHRASE_MIN_COSINE = 0.7


def paraphrase_like(features: np.ndarray) -> np.ndarray:
    """Rows of a feature matrix (columns :data:`FEATURES`) that read as a reworded context
    sentence (every rewording-tolerant unit in the aligned sentence or the one before it): see
    ``PARAPHRASE_MIN_COSINE``. Pure."""
    f = {n: features[:, i] for i, n in enumerate(FEATURES)}
    return (
        (f["soft_aligned_recall"] >= 1.0)
        & (f["embedding_max"] >= PARAPHRASE_MIN_COSINE)
        & (f["any_unsupported_number"] == 0)
        & (f["any_unsupported_entity"] == 0)
        & (f["negation_mismatch"] == 0)
    )


# Share of the logistic link mixed into the isotonic calibration: the knots are flat beyond their
# ends, and the mix keeps the map strictly increasing, so it never ties statements the logit
# ranks apart.
_LINK_MIX = 0.02


def calibrated_proba(
    logits: np.ndarray,
    copies: np.ndarray | None,
    copy_floor: float | None,
    calibration: Sequence[Sequence[float]],
) -> np.ndarray:
    """Map ``logits`` to probabilities (shared by the detector and the training script):
    the isotonic ``calibration`` knots interpolated (with ``_LINK_MIX`` of the logistic link,
    so the map is strictly increasing), or the logistic link when there are no knots; rows
    flagged in ``copies`` are raised to ``copy_floor``. Pure."""
    link = 1.0 / (1.0 + np.exp(-logits))
    if len(calibration):
        knots = np.asarray(calibration, dtype=np.float64)
        p = (1.0 - _LINK_MIX) * np.interp(logits, knots[:, 0], knots[:, 1]) + _LINK_MIX * link
    else:
        p = link
    if copies is not None and copy_floor is not None:
        p = np.where(copies, np.maximum(p, copy_floor), p)
    return p


# --------------------------------------------------------------------------- text analysis


_CJK = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # ideographs
    "\uac00-\ud7af"  # hangul
)
# One CJK char, a number, or a run of non-CJK letters (so "Tokyo駅" gives "Tokyo", "駅").
_UNIT = re.compile(
    rf"[{_CJK}]|\d+(?:[.,]\d+)*|[^\W\d_{_CJK}]+(?:['’][^\W\d_{_CJK}]+)*", re.UNICODE
)
_IS_CJK = re.compile(rf"[{_CJK}]")
_HIRAGANA = re.compile(r"[\u3040-\u309f]")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CAPWORD = re.compile(r"(?<![\w'’])[A-Z][A-Za-z'’\-]*[A-Za-z]|(?<![\w'’])[A-Z](?=\.)")
_KATAKANA_RUN = re.compile(r"[\u30a0-\u30ffー・]{2,}")
_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff々]+")
# Common Sino-Japanese words (abstract nouns, adverbs, verbal nouns of everyday procedure)
# that are never names: a paraphrase that says 可能 where its context says 受け付けます has not
# invented an entity. Concrete nouns (工場, 厨房, 湖) are deliberately not here: swapping one is
# a changed fact.
_COMMON_KANJI_WORDS = frozenset("""
可能 不可 必要 不要 場合 以内 以上 以下 以外 以降 以前 対応 利用 使用 提供 確認 注意 問題 方法 情報 時間 期間 期限 予定 開始 終了 変更 手続 手続き 申請 登録 設定 連絡 受付 現在 今後 最初 最後 最新 全部 一部 部分 全体 結果 原因 理由 目的 内容 状態 状況 同様 同時 通常 一般 特別 簡単 重要 大切 十分 不明 本当 実際 様々 多数 少数 合計 程度 範囲 対象 条件 基本 追加 削除 完了 実施 実行 発生 存在 関係 関連 影響 効果 機能 場所 前後 約束 無料 有料 料金 費用 価格 金額 支払 支払い 返金 受け取り 受取 可能性 必須 任意 自動 手動 直接 間接 個人 全員 各自 毎日 毎月 毎年 当日 翌日 前日 平日 休日 営業日 約 各 全 当 本 該当 適用 有効 無効 正常 異常 成功 失敗 相談 案内 説明 紹介 保証 保存
""".split())
_NEG_EN = re.compile(
    r"\b(?:not|no|never|none|nobody|nothing|neither|nor|without|cannot|unable|fail(?:ed|s)?)\b"
    r"|n['’]t\b",
    re.IGNORECASE,
)
# Japanese: verb/adjective negation, avoiding words that merely end in ない (少ない, 危ない).
_NEG_JA = re.compile(r"(?<![少危汚])ない|ません|なかった|ず(?:に|、|。|$)|ぬ(?:[。、]|$)")
# Chinese (and Sino-Japanese prefixes): 不 没 未 無/无 非 別/别 as negators.
_NEG_ZH = re.compile(r"[不没沒未无無非别]")


# CJK numerals before a counter ("三十天", "十四日", "五个"): written as digits so they meet the
# number checks. A lone 一 is left alone ("一番", "一个" mean "most", "a"), like English "one".
_CJK_DIGITS = {"〇": 0, "零": 0, "一": 1, "二": 2, "两": 2, "兩": 2, "三": 3, "四": 4, "五": 5,
               "六": 6, "七": 7, "八": 8, "九": 9}
_CJK_NUMERAL = re.compile(
    r"[〇零一二两兩三四五六七八九十百千]+(?=[天日年月個个人分回件歳岁時时週周倍度号番台枚秒歲])"
)
# Open-ended ranges written differently: "12 or newer", "12 and later", "12 and above",
# "12及以上", "12或更高", "12以降" all become one form.
_RANGE_UP_EN = re.compile(
    r"(\d+(?:\.\d+)?)\s+(?:or|and)\s+(?:newer|later|above|higher|up|greater|more|over)\b",
    re.IGNORECASE,
)
_RANGE_DOWN_EN = re.compile(
    r"(\d+(?:\.\d+)?)\s+(?:or|and)\s+(?:older|earlier|below|lower|under|less|fewer)\b",
    re.IGNORECASE,
)
_RANGE_UP_CJK = re.compile(r"(\d+)\s*(?:及以上|或以上|或更高|或更新|及更高|以上|以降|或更高版本)")


def _cjk_numeral_value(run: str) -> int | None:
    total, digit = 0, None
    for ch in run:
        if ch in _CJK_DIGITS:
            if digit is not None:  # "二〇二四": digit by digit
                return int("".join(str(_CJK_DIGITS[c]) for c in run)) if all(
                    c in _CJK_DIGITS for c in run) else None
            digit = _CJK_DIGITS[ch]
        else:
            mult = {"十": 10, "百": 100, "千": 1000}[ch]
            total += (1 if digit is None else digit) * mult
            digit = None
    return total + (digit or 0)


def _cjk_numerals(m: re.Match[str]) -> str:
    run = m.group(0)
    if run == "一":
        return run
    v = _cjk_numeral_value(run)
    return run if v is None else str(v)


def _normalize(text: str) -> str:
    """NFKC (full-width digits and Latin fold to ASCII: "１機" -> "1機"), CJK numerals before a
    counter as digits, open-ended ranges ("12 or newer" / "12 and later") in one form. Pure."""
    text = unicodedata.normalize("NFKC", text)
    if _IS_CJK.search(text):
        text = _CJK_NUMERAL.sub(_cjk_numerals, text)
        text = _RANGE_UP_CJK.sub(r"\1以上", text)
    text = _RANGE_UP_EN.sub(r"\1 or later", text)
    return _RANGE_DOWN_EN.sub(r"\1 or earlier", text)


# Left out of the rewording-tolerant units: light verbs and the words an answer uses for its
# reader ("you can get" for "customers can request"), and Chinese function characters (the
# counterpart of the Japanese particles, which are hiragana and never soft units).
_SOFT_SKIP_EN = words("get make take have go come become keep back customer user")
_SOFT_SKIP_CJK = frozenset("的了就也在是和与或及将会把被这那个该其之可能")
def _norm_number(tok: str) -> str:
    t = tok.replace(",", "")
    if "." in t:
        t = t.rstrip("0").rstrip(".")
    return t


@dataclass(frozen=True)
class _Text:
    """The lexical view of one text: units in order (EN stems, numbers, CJK chars), content units
    (EN content stems, numbers, CJK bigrams inside kanji/katakana runs), unit bigrams (none that
    touch hiragana)."""

    units: tuple[str, ...]
    content: frozenset[str]
    bigrams: frozenset[tuple[str, str]]
    all_bigrams: frozenset[tuple[str, str]]  # including pairs that touch hiragana (copy check)
    negated: bool
    # Rewording-tolerant units: English content stems and numbers, single kanji/katakana
    # characters (a reworded Japanese or Chinese sentence keeps most of its characters but
    # few of its bigrams).
    soft: frozenset[str]
    # ``soft`` plus a 6-letter prefix key ("~constr") of every long English stem, for matching
    # "construction" with "constructed".
    soft_keys: frozenset[str]
    # Word order for the copy check: in text without CJK, bigrams of the content units in order
    # (function words skipped, so "the Tower opened" matches "the Tower was opened"); in CJK
    # text, ``all_bigrams`` (particles kept: JNLI's rearranged "neutral" claims).
    order_bigrams: frozenset[tuple[str, str]]


def _is_kana(unit: str) -> bool:
    """One hiragana character (cheaper than the regex in the per-pair loop)."""
    return len(unit) == 1 and "\u3040" <= unit <= "\u309f"


def _analyze(text: str) -> _Text:
    units: list[str] = []
    content: set[str] = set()
    prev_cjk: str | None = None  # the previous CJK char, if it ends right where this one starts
    prev_end = -1
    for m in _UNIT.finditer(text):
        tok = m.group(0)
        if _IS_CJK.fullmatch(tok):
            units.append(tok)
            # Character bigrams stand in for words in space-less scripts. Hiragana is mostly
            # grammar (particles, endings: の, は, です): a bigram that touches it spans a word
            # boundary ("山の", "ルで") and would count paraphrases of the ending as unsupported,
            # so only bigrams inside kanji/katakana runs are content.
            if (
                prev_cjk is not None
                and m.start() == prev_end
                and not (_HIRAGANA.fullmatch(prev_cjk) or _HIRAGANA.fullmatch(tok))
            ):
                content.add(prev_cjk + tok)
            prev_cjk, prev_end = tok, m.end()
            continue
        prev_cjk = None
        if tok[0].isdigit():
            n = _norm_number(tok)
            units.append(n)
            content.add(n)
            continue
        s = stem_word(tok)
        units.append(s)
        if s not in STATEMENT_STOP_WORDS and tok.lower() not in STATEMENT_STOP_WORDS and (len(s) > 1 or s.isdigit()):
            content.add(s)
    # A text too short for any content bigram (a one-kanji answer such as "東") keeps its
    # single non-hiragana CJK characters as content, so it is not vacuously "covered".
    if not content:
        content.update(u for u in units if _IS_CJK.fullmatch(u) and not _HIRAGANA.fullmatch(u))
    # Unit bigrams carry word order. In Japanese a pair that touches hiragana spans a particle
    # or an ending ("山の", "です" for "である"): a faithful paraphrase changes those freely, so
    # such pairs are left out, as they are from the content bigrams.
    all_bigrams = frozenset(itertools.pairwise(units))
    if _HIRAGANA.search(text):
        bigrams = frozenset((u, v) for u, v in all_bigrams if not (_is_kana(u) or _is_kana(v)))
    else:  # most text (all English): nothing to leave out, and no per-pair check to pay for
        bigrams = all_bigrams
    negated = bool(_NEG_EN.search(text) or _NEG_JA.search(text) or _NEG_ZH.search(text))
    soft = {u for u in content if not _IS_CJK.search(u) and u not in _SOFT_SKIP_EN}
    soft.update(
        u for u in units
        if _IS_CJK.fullmatch(u) and not _HIRAGANA.fullmatch(u) and u not in _SOFT_SKIP_CJK
    )
    keys = set(soft)
    keys.update("~" + u[:_SOFT_PREFIX] for u in soft if len(u) >= _SOFT_PREFIX and u.isalpha())
    if _IS_CJK.search(text):
        order = all_bigrams
    else:
        order = frozenset(itertools.pairwise(u for u in units if u in content))
    return _Text(tuple(units), frozenset(content), bigrams, all_bigrams, negated,
                 frozenset(soft), frozenset(keys), order)


_SOFT_PREFIX = 6


def _soft_recall(stmt: _Text, other_keys: frozenset[str] | set[str]) -> float:
    """Share of ``stmt.soft`` found in ``other_keys`` (a ``_Text.soft_keys``), by unit or by
    6-letter prefix."""
    if not stmt.soft:
        return 1.0
    hit = 0
    for u in stmt.soft:
        if u in other_keys or (
            len(u) >= _SOFT_PREFIX and u.isalpha() and "~" + u[:_SOFT_PREFIX] in other_keys
        ):
            hit += 1
    return hit / len(stmt.soft)


def _numbers(text: str) -> set[str]:
    out = {_norm_number(m.group(0)) for m in _NUMBER.finditer(text)}
    for w in re.findall(r"[A-Za-z]+", text):
        n = NUMBER_WORDS.get(w.lower())
        if n is not None and w.lower() not in ("one", "hundred"):  # "one of", "hundreds of"
            out.add(n)
    return out


def _number_supported(n: str, ctx_numbers: set[str]) -> bool:
    if n in ctx_numbers:
        return True
    digits = n.replace(".", "")
    if len(digits) < 2:
        return False
    # Rounded figures: "$181 million" or "181.7 million" for "181,674,817".
    for c in ctx_numbers:
        cd = c.replace(".", "")
        if len(cd) > len(digits) and abs(int(cd[: len(digits)]) - int(digits)) <= 1:
            return True
    return False


def _entities(text: str) -> set[str]:
    """Names and proper-noun-ish runs: capitalized Latin words that are not function words,
    katakana runs, and short kanji compounds in Japanese text (Chinese runs are whole clauses,
    so their evidence comes from bigram coverage instead)."""
    out = {
        w
        for w in _CAPWORD.findall(text)
        if len(w) > 1 and w.lower() not in STATEMENT_STOP_WORDS and w.lower() not in SENTENCE_STARTERS
    }
    out.update(_KATAKANA_RUN.findall(text))
    if _HIRAGANA.search(text):
        out.update(r for r in _HAN_RUN.findall(text)
                   if 2 <= len(r) <= 4 and r not in _COMMON_KANJI_WORDS)
    return out


def _entity_supported(e: str, ctx_lower: str, ctx_stems: frozenset[str]) -> bool:
    if _IS_CJK.search(e):
        # A four-kanji run may be two supported words that the answer joined by dropping a
        # particle ("商品到着" for "商品の…到着"); a new name ("十和田湖") does not split so.
        return e in ctx_lower or (
            len(e) == 4 and _HAN_RUN.fullmatch(e) is not None
            and e[:2] in ctx_lower and e[2:] in ctx_lower
        )
    return stem_word(e) in ctx_stems or re.search(rf"(?<!\w){re.escape(e.lower())}(?!\w)", ctx_lower) is not None


def _recall(stmt: frozenset[str], other: frozenset[str] | set[str]) -> float:
    if not stmt:
        return 1.0
    return len(stmt & other) / len(stmt)


def featurize(
    statements: Sequence[str],
    contexts: Sequence[str],
    embedder: Embedder | None,
    settings: SupportSettings | None = None,
) -> np.ndarray:
    """The ``(len(statements), len(FEATURES))`` feature matrix. Blocking (one embed call).

    With ``embedder=None`` the embedding feature is the lexical best-sentence recall instead (for
    tests and for callers without a model; the shipped weights expect an embedder).
    """
    return featurize_with_copies(statements, contexts, embedder, settings)[0]


# A copy needs this many content units: "Yes" or a lone name inside a sentence is not a claim
# copied from it.
_COPY_MIN_CONTENT = 2


def _context_sentences(ctx_texts: Sequence[str], limit: int) -> tuple[list[str], list[int]]:
    """The contexts' distinct sentences in order (at most ``limit``), and for each the index of
    the sentence before it in its own context (-1: none): "It was first climbed in 1953" is
    about the subject of the sentence before."""
    sentences: list[str] = []
    seen: set[str] = set()
    before: list[int] = []
    for c in ctx_texts:
        last = -1
        for s in split_sentences(c):
            if s not in seen:
                seen.add(s)
                sentences.append(s)
                before.append(last)
                last = len(sentences) - 1
    return sentences[:limit], before


def _without_context(statements: Sequence[str]) -> np.ndarray:
    """Feature rows when there is no context sentence: nothing to be supported by, so every
    statement is unsupported evidence-wise."""
    x = np.zeros((len(statements), len(FEATURES)), dtype=np.float64)
    for i, s in enumerate(statements):
        a = _analyze(s)
        nums, ents = _numbers(s), _entities(s)
        x[i] = [0, 0, 0, 0, 0, 1, 1 if nums else 0, 1 if nums else 0,
                1 if ents else 0, 1 if ents else 0, 0, min(3.0, math.log1p(len(a.units))),
                0, 0]
    return x


@dataclass(frozen=True)
class _Evidence:
    """The contexts as the per-statement checks read them."""

    all: _Text  # every context joined
    lower: str  # the joined contexts, lower case (entity look-ups)
    stems: frozenset[str]  # the units of ``all``
    numbers: set[str]
    sentences: list[_Text]  # the distinct context sentences
    before: list[int]  # per sentence, the one before it in its context (-1: none)


def _statement_row(stmt: str, a: _Text, ev: _Evidence, rec: np.ndarray, order: np.ndarray,
                   emb_max: float, aligned: int) -> tuple[list[float], bool]:
    """One statement's feature row (:data:`FEATURES` order) and whether it is copy-like, given
    its recall in each context sentence (``rec``, sentences ranked in ``order``), its best
    embedding cosine and the index of its aligned sentence."""
    best = float(rec[order[0]])
    two = set(ev.sentences[order[0]].content)
    if len(order) > 1:
        two |= ev.sentences[order[1]].content
    best_two = _recall(a.content, two)
    al = ev.sentences[aligned]
    nums = _numbers(stmt)
    bad_nums = [n for n in nums if not _number_supported(n, ev.numbers)]
    ents = _entities(stmt)
    bad_ents = [e for e in ents if not _entity_supported(e, ev.lower, ev.stems)]
    novel = (
        sum(1 for b in a.bigrams if b not in ev.all.bigrams) / len(a.bigrams)
        if a.bigrams
        else 0.0
    )
    row = [
        _recall(a.content, ev.all.content),
        best,
        best_two,
        _recall(a.content, al.content),
        emb_max,
        novel,
        len(bad_nums) / len(nums) if nums else 0.0,
        1.0 if bad_nums else 0.0,
        len(bad_ents) / len(ents) if ents else 0.0,
        1.0 if bad_ents else 0.0,
        1.0 if a.negated != al.negated else 0.0,
        max(-3.0, min(3.0, math.log((1 + len(a.units)) / (1 + len(al.units))))),
        _soft_recall(a, ev.all.soft_keys),
        _soft_recall(
            a, al.soft_keys | ev.sentences[ev.before[aligned]].soft_keys
            if ev.before[aligned] >= 0 else al.soft_keys
        ),
    ]
    copy_like = (
        len(a.content) >= _COPY_MIN_CONTENT
        and best >= 1.0
        and a.order_bigrams <= ev.all.order_bigrams
        and not bad_nums
        and not bad_ents
        and a.negated == al.negated
    )
    return row, copy_like


def featurize_with_copies(
    statements: Sequence[str],
    contexts: Sequence[str],
    embedder: Embedder | None,
    settings: SupportSettings | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`featurize` plus a boolean mask of *copy-like* statements. Blocking.

    A statement is copy-like when it has at least two content units, all of them in one context
    sentence, its word order occurs in the contexts (English: every bigram of its content
    words in order, so "was opened" / "opened" do not matter; CJK: every unit bigram,
    particles and endings included, since JNLI's "neutral" statements are mostly the
    premise's words rearranged around particles), no number or name is unsupported and its negation agrees with the aligned
    sentence: a verbatim or trimmed copy. The detector raises
    such statements to the ``copy_floor`` of its weights, measured on the labeled sets by the
    training script (the linear model alone leaves a copy near 0.76).
    """
    if isinstance(statements, str) or isinstance(contexts, str):
        # A bare string is a sequence of characters: scoring each character is never meant.
        raise TypeError("statements and contexts must be sequences of strings, not a string")
    cfg = settings or SupportSettings()
    statements = [_normalize(s) for s in statements]
    x = np.zeros((len(statements), len(FEATURES)), dtype=np.float64)
    copies = np.zeros(len(statements), dtype=bool)
    if not statements:
        return x, copies
    ctx_texts = [_normalize(c) for c in contexts if c and c.strip()]
    sentences, before = _context_sentences(ctx_texts, cfg.max_context_sentences)
    if not sentences:
        return _without_context(statements), copies

    joined = "\n".join(ctx_texts)
    ctx_all = _analyze(joined)
    ev = _Evidence(ctx_all, joined.lower(), frozenset(ctx_all.units), _numbers(joined),
                   [_analyze(s) for s in sentences], before)
    stm_an = [_analyze(s) for s in statements]

    # Lexical recall of every statement in every context sentence; only each statement's top
    # ``max_aligned_candidates`` sentences are embedded. Embedding is most of the cost, and the
    # sentence that supports a statement nearly always shares words with it.
    rec_all = np.array([[_recall(a.content, sa.content) for sa in ev.sentences] for a in stm_an])
    orders = np.argsort(-rec_all, axis=1, kind="stable")
    cand = orders[:, : cfg.max_aligned_candidates]
    if embedder is not None:
        uniq = sorted({int(j) for j in cand.ravel()})
        col = {j: k for k, j in enumerate(uniq)}
        texts = [s[: cfg.max_text_chars] for s in statements] + [
            sentences[j][: cfg.max_text_chars] for j in uniq
        ]
        emb = np.asarray(embedder.embed(texts), dtype=np.float64)
        cos = emb[: len(statements)] @ emb[len(statements) :].T
    else:
        cos, col = None, {}

    for i, (stmt, a) in enumerate(zip(statements, stm_an)):
        rec, order = rec_all[i], orders[i]
        if cos is not None:
            sims = np.array([cos[i, col[int(j)]] for j in cand[i]])
            emb_max = float(sims.max())
            aligned = int(cand[i][int(np.argmax(sims + rec[cand[i]]))])
        else:
            emb_max = float(rec[order[0]])
            aligned = int(order[0])
        x[i], copies[i] = _statement_row(stmt, a, ev, rec, order, emb_max, aligned)
    return x, copies


# A clause boundary inside a long English sentence: a comma or semicolon before a conjunction or
# a relative/participial opener, a bare semicolon, or a spaced dash. LLM summaries chain several
# facts in one sentence ("X happened, while Y, leading to Z"); scored whole, the one invented
# clause is diluted by the supported ones. Measured on FaithBench (docs/history/local-faithfulness.md).
_CLAUSE_BREAK = re.compile(
    r"[,;]\s+(?=(?:and|but|while|which|who|whereas|although|though|as|with|including|leading"
    r"|resulting|making)\b)|;\s+|\s+—\s+"
)
_CLAUSE_MIN_WORDS = 4  # a shorter piece is glued back to the previous clause


def clause_means(proba: np.ndarray, sizes: Sequence[int]) -> list[float]:
    """Per statement, the mean probability of its ``sizes[i]`` consecutive clause rows."""
    out, k = [], 0
    for n in sizes:
        out.append(float(np.mean(proba[k : k + n])))
        k += n
    return out


def split_clauses(statement: str, max_words: int = 20) -> list[str]:
    """Clauses of a long English statement (more than ``max_words`` words; 0: never split).

    Shorter statements, and text with any non-ASCII character (CJK has no such comma cues; a
    Japanese statement is one JNLI-style claim), come back as ``[statement]``. Never returns an
    empty list for a non-empty statement; pure and thread-safe.
    """
    if max_words <= 0 or not statement.isascii() or len(statement.split()) <= max_words:
        return [statement]
    out: list[str] = []
    for part in _CLAUSE_BREAK.split(statement):
        part = part.strip()
        if not part:
            continue
        if out and len(part.split()) < _CLAUSE_MIN_WORDS:
            out[-1] += ", " + part
        else:
            out.append(part)
    return out or [statement]


# --------------------------------------------------------------------------- the model


class SupportDetector:
    """Scores statements against contexts with the shipped (or given) logistic weights.

    Construction reads the weights file (raises :class:`WeightsError` if it is missing or does
    not match :data:`FEATURES`); the embedder loads its model lazily on the first ``predict``.
    ``embedder=None`` uses a private :class:`USEEmbedder` with one BLAS thread. Thread-safe: the
    weights are immutable and the embedder is thread-safe; ``predict`` blocks (CPU), so call it
    from a worker thread in async code.
    """

    def __init__(
        self,
        embedder: Embedder | None = None,
        weights_path: Path | None = None,
        *,
        settings: SupportSettings | None = None,
    ) -> None:
        self.weights_path = Path(weights_path) if weights_path is not None else DEFAULT_WEIGHTS_PATH
        self.weights = SupportWeights.load(self.weights_path)
        if tuple(self.weights.features) != FEATURES:
            raise WeightsError(
                f"{self.weights_path}: trained on features {list(self.weights.features)}, "
                f"this detector computes {list(FEATURES)}; retrain with bench/train_faithfulness.py"
            )
        self.settings = settings or SupportSettings()
        self._embedder = embedder
        self._embedder_lock = threading.Lock()
        self.threshold: float = self.weights.threshold
        self.version: str = self.weights.version
        self.aggregate: str = self.weights.aggregate

    @property
    def embedder(self) -> Embedder:
        """The embedder given, else a private one-thread USE built on first use (under a lock,
        so concurrent first calls build one). Blocking the first time: loads the model."""
        if self._embedder is None:
            with self._embedder_lock:
                if self._embedder is None:
                    self._embedder = USEEmbedder(threads=1)
        return self._embedder

    def predict(self, statements: Sequence[str], contexts: Sequence[str]) -> list[float]:
        """Blocking, thread-safe. P(statement is supported by the contexts) for each statement.

        Empty ``statements`` gives ``[]``; no usable context gives low probabilities (nothing
        can support a statement). A statement longer than ``settings.clause_split_words`` words
        is scored per clause (:func:`split_clauses`) and gets the mean of its clauses.
        Statements past ``settings.max_statements`` are scored too, in chunks, so the result is
        always aligned with the input. Raises ``TypeError`` when either argument is a bare
        string.
        """
        if isinstance(statements, str) or isinstance(contexts, str):
            raise TypeError("statements and contexts must be sequences of strings, not a string")
        if not statements:
            return []
        out: list[float] = []
        step = self.settings.max_statements
        for k in range(0, len(statements), step):
            chunk = list(statements[k : k + step])
            pieces = [split_clauses(s, self.settings.clause_split_words) for s in chunk]
            flat = [c for p in pieces for c in p]
            x, copies = featurize_with_copies(flat, contexts, self.embedder, self.settings)
            out.extend(clause_means(self.weights.proba(x, copies), [len(p) for p in pieces]))
        return out

    def verdicts(self, statements: Sequence[str], contexts: Sequence[str]) -> list[int]:
        """``predict`` thresholded at ``threshold``: 1 supported, 0 not."""
        return [int(p >= self.threshold) for p in self.predict(statements, contexts)]
