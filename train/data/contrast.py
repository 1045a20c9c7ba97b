"""Paraphrase contrasts (EN/JA/ZH): a human-labelled supported pair and the same hypothesis with
one value changed.

Why: the paraphrase probe (bench/paraphrase_probe.py) finds that the shipped model reads words:
a reworded right statement and the same rewording with one wrong value get nearly the same P
(AUROC 0.54 between them), while a copy gets 0.88. The synthetic data teaches the contrast
"right value vs wrong value" almost only on hypotheses copied from their premise. Here the
positive is a person's rewording (an SNLI, JNLI, JSTS, JaNLI, JNLI-Neg, PAWS-X or BEGIN pair
labelled supported) and the negative is that rewording with one value changed:

* a number (a digit string, a year, an English number word, a Japanese or Chinese numeral
  before a counter);
* a colour, a gender or family word (man/woman, 男性/女性, 男孩/女孩, ...);
* inside/outside, day/night, a month or weekday.

The original value must be in the premise too (so the changed hypothesis contradicts what the
premise says) and the new value must not be (so it cannot be supported by another part of
it). Nothing else of the rewording changes, so the words shared with the premise stay the same
and only the value decides. Rows keep the pair's language; the source is ``contrast_<source>``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator

# sources whose label-1 rows are people's judgements (train.data.nli)
HUMAN = ("snli_dev", "snli_test", "jnli_test", "jsts_train", "janli_train", "jnli_neg_train",
         "pawsx_zh", "begin")

_EN_NUM = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "twelve"]
# Gender and family words per language (edited only when a pair has no other value), then the
# other value groups; each group's words replace one another.
_GENDER_GROUPS = {
    "en": [["man", "woman"], ["men", "women"], ["boy", "girl"], ["boys", "girls"],
           ["male", "female"], ["husband", "wife"], ["father", "mother"], ["son", "daughter"],
           ["brother", "sister"], ["king", "queen"], ["gentleman", "lady"]],
    "ja": [["男性", "女性"], ["男の子", "女の子"], ["男の人", "女の人"], ["少年", "少女"], ["父親", "母親"]],
    "zh": [["男人", "女人"], ["男子", "女子"], ["男孩", "女孩"], ["男性", "女性"], ["丈夫", "妻子"],
           ["父亲", "母亲"], ["儿子", "女儿"], ["哥哥", "姐姐"], ["弟弟", "妹妹"]],
}
_EN_GROUPS = _GENDER_GROUPS["en"] + [
    ["red", "blue", "green", "yellow", "black", "white", "orange", "pink", "purple", "brown"],
    ["inside", "outside"], ["indoors", "outdoors"], ["day", "night"], ["morning", "evening"],
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"],
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"],
]
# "may" and "march" are also a verb and a noun: months only before a number or after "in"
_EN_MONTH_ONLY = {"may", "march"}

_JA_GROUPS = _GENDER_GROUPS["ja"] + [["赤い", "青い", "白い", "黒い", "黄色い", "茶色い"], ["屋内", "屋外"]]
_ZH_GROUPS = _GENDER_GROUPS["zh"] + [["红色", "蓝色", "白色", "黑色", "绿色", "黄色"], ["室内", "室外"]]
_CJK_DIGITS = "一二三四五六七八九十"
_JA_COUNTERS = "人匹頭台本枚つ個羽機両杯"
_ZH_COUNTERS = "个名位只条辆本次天岁座部场届杆击"
_CJK_NUM = {"ja": re.compile(f"([{_CJK_DIGITS}])(?=[{_JA_COUNTERS}])"),
            "zh": re.compile(f"([{_CJK_DIGITS}两])(?=[{_ZH_COUNTERS}])")}
_DIGITS = re.compile(r"(?<![\d.,])\d{1,4}(?!\d)(?![.,]\d)")
_FULLWIDTH = str.maketrans("０１２３４５６７８９", "0123456789")


def _digit_edit(value: str, rng: random.Random) -> str:
    n = int(value)
    if 1800 <= n <= 2100:                                    # a year
        return str(n + rng.choice([-5, -3, -2, -1, 1, 2, 3, 4]))
    if n <= 12:
        return str(rng.choice([m for m in range(1, 13) if m != n]))
    return str(n + rng.choice([-1, 1]) * max(1, round(n * rng.uniform(0.1, 0.5))))


def _en_candidates(p: str, h: str, rng: random.Random) -> Iterator[tuple[int, int, str]]:
    pl = p.lower()
    pwords = set(re.findall(r"[a-z]+", pl))
    for m in re.finditer(r"[A-Za-z]+", h):
        w = m.group().lower()
        if w in _EN_NUM and w in pwords:
            new = rng.choice([x for x in _EN_NUM if x != w])
            if new not in pwords:
                yield m.start(), m.end(), _case_like(m.group(), new)
        for group in _EN_GROUPS:
            if w not in group or w not in pwords:
                continue
            if w in _EN_MONTH_ONLY and not re.search(rf"\b(in|on) {w}\b|\b{w} \d", h.lower()):
                continue
            options = [x for x in group if x != w and x not in pwords and x not in h.lower()]
            if options:
                yield m.start(), m.end(), _case_like(m.group(), rng.choice(options))


def _cjk_candidates(p: str, h: str, lang: str, rng: random.Random) -> Iterator[tuple[int, int, str]]:
    for group in (_JA_GROUPS if lang == "ja" else _ZH_GROUPS):
        for w in group:
            i = h.find(w)
            if i < 0 or w not in p:
                continue
            options = [x for x in group if x != w and x not in p and x not in h]
            if options:
                yield i, i + len(w), rng.choice(options)
    for m in _CJK_NUM[lang].finditer(h):
        here = m.group(1) + h[m.end()]
        if here not in p:
            continue
        digits = _CJK_DIGITS[1:9] if lang == "ja" else "两三四五六七八九"
        options = [c for c in digits if c != m.group(1) and c + h[m.end()] not in p]
        if options:
            yield m.start(1), m.end(1), rng.choice(options)


_GENDER = {w for groups in _GENDER_GROUPS.values() for g in groups for w in g}


def _is_gender(word: str, lang: str) -> bool:
    return (word.lower() if lang == "en" else word) in _GENDER


def _case_like(old: str, new: str) -> str:
    if old.isupper() and len(old) > 1:
        return new.upper()
    return new.capitalize() if old[:1].isupper() else new


def _fix_articles(text: str) -> str:
    """"a orange" -> "an orange", "an red" -> "a red" after an English edit."""
    def fix(m: re.Match) -> str:
        art = "an" if m.group(2)[0].lower() in "aeiou" else "a"
        return (art.capitalize() if m.group(1)[0].isupper() else art) + " " + m.group(2)
    return re.sub(r"\b(an?|An?) ([A-Za-z]+)", fix, text)


def edit(premise: str, hypothesis: str, lang: str, rng: random.Random) -> str | None:
    """``hypothesis`` with one value changed against ``premise``, or None when it has no value
    that the premise also states (see the module docstring)."""
    cands = list(_en_candidates(premise, hypothesis, rng) if lang == "en"
                 else _cjk_candidates(premise, hypothesis, lang, rng))
    p_ascii, h_ascii = premise.translate(_FULLWIDTH), hypothesis.translate(_FULLWIDTH)
    p_numbers = set(_DIGITS.findall(p_ascii))
    for m in _DIGITS.finditer(h_ascii):
        if m.group() in p_numbers:
            new = _digit_edit(m.group(), rng)
            if new not in p_numbers and int(new) >= 0:
                cands.append((m.start(), m.end(), new))
    if not cands:
        return None
    # values first: a gender word is the easiest edit and would otherwise be most of them
    values = [c for c in cands if not _is_gender(hypothesis[c[0]:c[1]], lang)]
    if not values and rng.random() < 0.5:
        return None
    start, end, new = rng.choice(values or cands)
    out = hypothesis[:start] + new + hypothesis[end:]
    return _fix_articles(out) if lang == "en" else out


def pairs(rows: Iterable[dict], seed: int = 0) -> Iterator[dict]:
    """For each label-1 row of a ``HUMAN`` source that has a value to change: the row itself and
    its changed twin (label 0), both as ``contrast_<source>`` (the twin's ``kind`` is
    ``contrast-wrong``, the row's ``contrast-right``)."""
    rng = random.Random(seed)
    for r in rows:
        if r.get("label") != 1 or r.get("source") not in HUMAN:
            continue
        wrong = edit(r["premise"], r["hypothesis"], r["lang"], rng)
        if wrong is None or wrong == r["hypothesis"]:
            continue
        src = "contrast_" + r["source"]
        yield {"premise": r["premise"], "hypothesis": r["hypothesis"], "label": 1, "source": src,
               "lang": r["lang"], "kind": "contrast-right"}
        yield {"premise": r["premise"], "hypothesis": wrong, "label": 0, "source": src,
               "lang": r["lang"], "kind": "contrast-wrong"}
