"""The built-in recognisers of personal data: for each kind, the spans of a text that hold
one value. Pure functions of the text, linear in its length; no I/O, no state, safe from any
thread. :mod:`.redactor` decides which run and what replaces the spans.

Recognition works on the text as sent (no Unicode normalisation, which would change what the judge
reads): digits are matched with ``\\d``, so full-width ``０９０－１２３４－５６７８`` is found as well as
``090-1234-5678``; e-mail parts are ASCII, so CJK text around an address does not leak into it.

What is recognised, and the trade-offs (precision over recall where a pattern would otherwise
eat ordinary numbers):

* phone: digit groups joined by single separators (space, ideographic space, hyphens including
  ``－`` and ``ー``, dots, parentheses) with 8-15 digits in all, that either start with ``+``
  (international), start with a trunk ``0`` and have at least 10 digits (JP ``090-1234-5678``,
  ``03-1234-5678``, UK ``020 7946 0958``), are a Chinese mobile ``1[3-9]`` + 9 digits, or have
  the North American 3-3-4 shape with separators. Plain digit runs such as order numbers or
  dates are left alone.
* card: 13-19 digits, optionally grouped by spaces or hyphens, first digit 2-6 (the major
  networks' ranges), passing the Luhn check.
* iban: two capital letters, two check digits and 11-30 alphanumerics (optionally grouped by
  spaces) passing the mod-97 check, cut to the country's registered length when it is known.
* address: Japanese addresses from a prefecture (or a 〒 postal code) through the block number
  (``東京都千代田区丸の内1-1-1``, ``〒100-0005``); Chinese addresses from a province or
  city through the street number (``北京市朝阳区建国路88号``); English street addresses with a house
  number and a street type (``221B Baker Street``, ``1600 Pennsylvania Avenue NW``), with what
  follows on the same line up to a ZIP or UK postcode. A place name alone (``東京都``,
  ``Paris``) is not an address and stays.
* person: a name the text marks as one — with an honorific or a label. Japanese: a name
  before さん, 様, さま, 氏, 殿, 君, くん, ちゃん, 先生 or after 氏名/名前/担当者/お客様名；
  Chinese: after 姓名/名字/联系人/客户/收件人 or before 先生, 女士, 小姐; English: after Mr, Mrs,
  Ms, Miss, Mx, Dr, Prof, Sir, Madam, "Dear", "my name is", "Name:"/"Customer:"/"Contact:".
  A bare name in running text (``山田太郎は…``, ``王小明说``, ``Taro Yamada said``) is **not**
  recognised by default: set ``unmarked_names`` for the common EN/JA/ZH patterns by name lists
  (:mod:`ragpulse.scorer.person_names`, false positives measured in docs/reliability.md), or
  plug in a model with ``redactor``.

Matching is linear in the text length (every pattern is free of nested ambiguous repetition),
so a one-megabyte hostile context costs milliseconds, not minutes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from ..person_names import unmarked_name_spans

__all__ = [
    "BUILTIN_KINDS",
    "Recogniser",
    "builtin_recognisers",
    "count_digits",
    "decimal_digits",
    "iban_ok",
    "luhn_ok",
    "pattern_recogniser",
]

BUILTIN_KINDS: tuple[str, ...] = ("iban", "card", "email", "phone", "address", "person")
"""The built-in recognisers, in the order they run: the most specific, checksum-validated ones first
(an IBAN's digit groups could pass for a card number, a card number for a phone)."""


Spans = Callable[[str], list[tuple[int, int]]]
"""A recogniser's finder: the sorted, non-empty ``(start, end)`` spans of the values in a text."""


class Recogniser(NamedTuple):
    """One kind of personal data: how to find it and when not to bother."""

    kind: str
    """The placeholder label (``email`` gives ``[EMAIL_n]``)."""
    spans: Spans
    needed: Callable[[str], bool]
    """A cheap pre-filter: False when ``spans`` cannot find anything in the text."""
    min_digits: int
    """The fewest decimal digits a match needs (0: no bound; then ``needed`` is the filter)."""


_EMAIL = re.compile(
    # ASCII-only parts: CJK text glued to an address ("連絡先はtaro@example.jpまで") stays outside it.
    r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]{1,64}[@＠][A-Za-z0-9\-]{1,63}"
    r"(?:\.[A-Za-z0-9\-]{1,63}){0,8}\.[A-Za-z]{2,24}(?![A-Za-z0-9\-])"
)

# Phone shapes, tried left to right at each position. Every repetition is bounded, so the work per
# position is bounded and a scan is linear in the text. One separator: a dash or dot with optional
# spaces around it, or one space (plain, no-break or ideographic).
_S = r"(?:[ \u00a0\u3000]?[\-‐‑‒–—―−－ー.．][ \u00a0\u3000]?|[ \u00a0\u3000])"
_PHONE = re.compile(
    r"(?<![\dA-Za-z+＋])(?:"
    # international: +81 90-1234-5678, +44 (0)20 7946 0958, +86 138 1234 5678
    rf"[+＋][ \u00a0\u3000]?\d{{1,3}}(?:(?:{_S}|[)）]{_S}?|{_S}?[(（])?\d{{1,4}}[)）]?){{1,5}}"
    # mainland China mobile: 13812345678, 138-1234-5678, 138 1234 5678
    rf"|1[3-9１-９]\d{_S}?\d{{4}}{_S}?\d{{4}}"
    # trunk prefix 0: 090-1234-5678, 03-1234-5678, (03) 1234-5678, 020 7946 0958, 09012345678
    rf"|[(（]?[0０]\d{{0,4}}(?:[)）]{_S}?|{_S})?\d{{1,4}}{_S}?\d{{3,4}}"
    # North American: 555-123-4567, (555) 123-4567, 1 555 123 4567
    rf"|(?:[1１]{_S})?[(（]?\d{{3}}(?:[)）]{_S}?|{_S})\d{{3}}{_S}\d{{4}}"
    r")(?![\dA-Za-z])"
)

# Card numbers as printed: contiguous, or in the networks' groupings (4-4-4[-4[-3]], 4-6-4/5) with
# one kind of separator. Free-form grouping is not accepted: it would join adjacent numbers (two
# phone numbers side by side) into a "card" that passes Luhn one time in ten.
_CARD = re.compile(
    r"(?<![\dA-Za-z])(?:"
    r"(?P<plain>[2-6２-６]\d{12,18})"
    r"|(?P<g4>[2-6２-６]\d{3}(?P<s>[ \-－])\d{4}(?P=s)\d{4}(?:(?P=s)\d{4})?)(?P<tail>(?P=s)\d{3})?"
    r"|(?P<g6>[2-6２-６]\d{3}(?P<t>[ \-－])\d{6}(?P=t)\d{4,5})"
    r")(?![\dA-Za-z])"
)

_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![a-z0-9])")

# ISO 13616 registry lengths (SWIFT IBAN registry); unknown countries fall back to trying lengths.
_IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18,
    "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24,
    "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24,
    "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}


def decimal_digits(text: str) -> str:
    """The decimal digits of ``text`` as ASCII (full-width and other Unicode digits included)."""
    # int() understands every Unicode decimal digit, so full-width digits check like ASCII ones.
    return "".join(str(int(c)) for c in text if c.isdecimal())


def luhn_ok(digits: str) -> bool:
    """The Luhn (mod 10) check of a string of ASCII digits."""
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = ord(c) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_ok(iban: str) -> bool:
    """The ISO 13616 mod-97 check of an IBAN without spaces (upper case)."""
    if len(iban) < 15 or len(iban) > 34:
        return False
    moved = iban[4:] + iban[:4]
    try:
        number = int("".join(str(int(c, 36)) for c in moved))
    except ValueError:
        return False
    return number % 97 == 1


def _card_spans(text: str) -> list[tuple[int, int]]:
    out = []
    for m in _CARD.finditer(text):
        if m.group("g4") and m.group("tail"):
            # "4111 1111 1111 1111 123": the card may be the 16 digits before a separate number.
            for start, end in (m.span(), m.span("g4")):
                d = decimal_digits(text[start:end])
                if 13 <= len(d) <= 19 and luhn_ok(d):
                    out.append((start, end))
                    break
            continue
        d = decimal_digits(m.group())
        if 13 <= len(d) <= 19 and luhn_ok(d):
            out.append(m.span())
    return out


def _iban_spans(text: str) -> list[tuple[int, int]]:
    out = []
    pos = 0
    while (m := _IBAN.search(text, pos)) is not None:
        s = m.group()
        # Map compact positions back to the original span so a trailing word is left out, and
        # resume after the IBAN, not after the match (which may have run into the next one).
        ends = [i + 1 for i, c in enumerate(s) if c != " "]
        compact = s.replace(" ", "")
        known = _IBAN_LENGTHS.get(compact[:2])
        lengths = [known] if known else range(min(34, len(compact)), 14, -1)
        pos = m.start() + 1
        for n in lengths:
            if n <= len(compact) and iban_ok(compact[:n]):
                out.append((m.start(), m.start() + ends[n - 1]))
                pos = m.start() + ends[n - 1]
                break
    return out


def _email_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _EMAIL.finditer(text)]


# Addresses. Japanese: 〒 code, or prefecture + municipality + the rest up to a block number.
_KANJI = r"\u3005\u4e00-\u9fff"
_KANA = r"\u3041-\u3096\u30a1-\u30fa\u30fc"
_NUM = r"0-9０-９〇一二三四五六七八九十百千"
_DASH = r"\-‐‑‒–—―−－ー"
_PREFECTURES = (
    "青森|岩手|宮城|秋田|山形|福島|茨城|栃木|群馬|埼玉|千葉|神奈川|新潟|富山|石川|福井|山梨|長野|"
    "岐阜|静岡|愛知|三重|滋賀|兵庫|奈良|和歌山|鳥取|島根|岡山|広島|山口|徳島|香川|愛媛|高知|福岡|"
    "佐賀|長崎|熊本|大分|宮崎|鹿児島|沖縄")
_JA_ADDRESS = re.compile(
    rf"〒[ \u3000]?\d{{3}}[{_DASH}]?\d{{4}}"
    rf"|(?:東京都|北海道|(?:京都|大阪)府|(?:{_PREFECTURES})県)"
    rf"[{_KANJI}{_KANA}]{{1,8}}?[市区町村郡]"
    rf"[{_KANJI}{_KANA}]{{0,12}}?[{_NUM}]{{1,4}}(?:丁目|番地?|号|[{_DASH}])"
    rf"(?:[{_NUM}]{{1,4}}(?:丁目|番地?|号|[{_DASH}])?){{0,3}}"
)
# Chinese: anchored on the street number (路/街/道... + number + 号) and extended to the left
# over ideographs that are not function words, so "他住在北京市朝阳区建国路88号" yields the
# address from 北京, not from 他; it must name a 省/市/区/县 on the way.
_ZH_STOP = "在住是的于到从去往为和与给对把被叫说位我你他她们您请送寄"
_ZH_ADDRESS = re.compile(
    rf"(?:[^\W\d_{_ZH_STOP}a-zA-Z\u3041-\u30ff]{{1,16}}?(?:省|市|区|县|自治区)){{1,3}}"
    rf"[^\W\d_{_ZH_STOP}a-zA-Z\u3041-\u30ff]{{0,10}}?(?:路|街|大道|道|巷|弄|胡同)"
    rf"[{_NUM}]{{1,5}}号(?:[{_KANJI}{_NUM}]{{0,6}}?(?:室|楼|层|栋|单元)){{0,3}}"
)
# English: house number, 1-4 capitalised words, a street type; then the rest of the line up to
# a ZIP/postcode if one follows within 60 characters.
_STREET_TYPES = (
    "Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Place|Pl|Way|"
    "Terrace|Square|Sq|Highway|Hwy|Parkway|Pkwy|Crescent|Close|Row|Gardens|Mews")
_EN_ADDRESS = re.compile(
    rf"\b\d{{1,6}}[A-Za-z]?(?:[ \-]\d{{1,4}})?,? (?:[A-Z][A-Za-z'\-]+ ){{1,4}}(?:{_STREET_TYPES})\b\.?"
    r"(?:,? (?:(?:NW|NE|SW|SE|N|S|E|W)\b,?)?(?:(?:Apt|Suite|Unit|Flat|#) ?\w{1,6},? )?"
    r"[^\n.;:!?]{0,60}?(?:\b\d{5}(?:-\d{4})?\b|\b[A-Z]{1,2}\d[A-Z\d]? ?\d[A-Z]{2}\b))?"
)


_STREET_WORD = re.compile(_STREET_TYPES)  # no \b: a literal-only pattern scans fastest
_JA_MARK = re.compile("[〒都道府県]")


def _address_spans(text: str) -> list[tuple[int, int]]:
    # Each form has a marker that a cheap test finds: most texts skip all three patterns, and
    # the Japanese one is only tried just before a 〒, 都, 道, 府 or 県 (prefecture names
    # have at most three characters), not at every position.
    spans: list[tuple[int, int]] = []
    if not text.isascii():
        end = -1
        for mark in _JA_MARK.finditer(text):
            i = mark.start()
            for start in range(i if mark.group() == "〒" else max(0, i - 3), i + 1):
                if start < end:
                    continue
                m = _JA_ADDRESS.match(text, start)
                if m is not None:
                    spans.append(m.span())
                    end = m.end()
                    break
        if "号" in text:
            spans += [m.span() for m in _ZH_ADDRESS.finditer(text)]
    if _STREET_WORD.search(text) is not None:
        spans += [m.span() for m in _EN_ADDRESS.finditer(text)]
    return _merged(spans, text)


# Names, only where the text marks them. Japanese/Chinese names are 1-4 ideographs (a Japanese
# given name may be kana); English names are 1-3 capitalised words. Each pattern starts with its
# marker (or, for honorifics after the name, is anchored on the honorific and looks back), so
# the engine skips most of a text by its first character: a name recogniser costs a few
# microseconds on a text without markers.
_PARTICLES = "はがをにでとのもへやかよねわ"  # a name does not go on into a particle: 担当は佐藤様
_JA_NAME = (rf"[{_KANJI}]{{1,6}}(?:(?![{_PARTICLES}])[{_KANA}]{{1,4}}"
            # "山田　太郎": a space-separated given name, unless it is the next label (電話：)
            rf"|[ \u3000](?![{_PARTICLES}])[{_KANJI}{_KANA}]{{1,4}}(?![{_KANJI}{_KANA}：:]))?")
_EN_NAME = r"[A-Z][a-z'\-]+(?: [A-Z]\.)?(?: [A-Z][a-z'\-]+){0,2}"
_CJK_LABELS = ("氏名", "名前", "担当者", "お客様名", "契約者", "姓名", "名字", "联系人", "客户",
               "收件人", "寄件人")
_EN_TITLES = ("Mr", "Ms", "Miss", "Mx", "Dr", "Prof", "Sir", "Madam", "Dear", "name is",
              "am called")
_CJK_LABEL_NAME = re.compile(rf"(?:{'|'.join(_CJK_LABELS)})[ \u3000]*[：:は]?[ \u3000]*"
                             rf"(?P<name>{_JA_NAME})")
_EN_LABEL_NAME = re.compile(rf"\b(?:[Nn]ame|[Cc]ustomer|[Cc]ontact|[Pp]atient|[Ss]ender|"
                            rf"[Rr]ecipient)[ \t]*:[ \t]*(?P<name>{_EN_NAME})")
_EN_TITLE_NAME = re.compile(rf"\b(?:[Mm]y name is|I am called|Dear|Mr|Mrs|Ms|Miss|Mx|Dr|Prof|"
                            rf"Sir|Madam)\.?[ \t]+(?P<name>{_EN_NAME})")
_HONORIFIC = re.compile("さん|様|さま|氏|殿|君|くん|ちゃん|先生|女士|小姐")
_NAME_BEFORE = re.compile(rf"(?:{_JA_NAME})$")


def _person_spans(text: str) -> list[tuple[int, int]]:
    # Plain substring tests (C speed) decide which patterns can match at all: a pattern with
    # many alternatives costs tens of microseconds per kilobyte even when nothing matches.
    out = []
    if ":" in text:
        out += [m.span("name") for m in _EN_LABEL_NAME.finditer(text)]
    if any(t in text for t in _EN_TITLES):
        out += [m.span("name") for m in _EN_TITLE_NAME.finditer(text)]
    if not text.isascii():
        if any(label in text for label in _CJK_LABELS):
            out += [m.span("name") for m in _CJK_LABEL_NAME.finditer(text)]
        for m in _HONORIFIC.finditer(text):  # 山田太郎さん, 王小明先生: the name ends here
            start = m.start()
            before = _NAME_BEFORE.search(text, max(0, start - 9), start)
            if before is not None:
                out.append(before.span())
    return _merged(out, text)


def _person_and_unmarked_spans(text: str) -> list[tuple[int, int]]:
    # Marked names first; an unmarked match overlapping one ("Mr. Taro Yamada") merges into it.
    return _merged(_person_spans(text) + unmarked_name_spans(text), text)


def _merged(spans: list[tuple[int, int]], text: str) -> list[tuple[int, int]]:
    """Sorted spans with overlaps merged, and neighbours separated by one space joined (a postal
    code and the address after it are one address)."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and (start < out[-1][1] or (start - out[-1][1] == 1 and text[start - 1].isspace())):
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


_GROUP = re.compile(r"\d+")
_NA_MARKS = frozenset("-‐‑‒–—―−－ー.．()（）")


def _is_phone(candidate: str) -> bool:
    # Called once per candidate (and per window of a long candidate): cheapest tests first.
    # "+44 (0)20 7946 0958": the bracketed trunk zero is dialled only from inside the country.
    groups = _GROUP.findall(candidate.replace("(0)", " ").replace("（0）", " "))
    sizes = [len(g) for g in groups]
    n = sum(sizes)
    if not 8 <= n <= 15:
        return False
    # Groups after the first are at least two digits: "0.5 0.25" or "1 2 3" are not phones.
    if min(sizes[1:], default=2) < 2:
        return False
    if candidate.lstrip("(（")[:1] in "+＋":
        return True
    first = groups[0][0]
    if first in "0０":
        return n >= 10
    if n == 11 and first in "1１" and (len(groups) == 1 or sizes == [3, 4, 4]):
        # mainland China mobile 1[3-9]x xxxx xxxx, grouped 3-4-4 or not
        return decimal_digits(groups[0][1]) in "3456789"
    # North American 555-123-4567 / (555) 123-4567 / 1 555.123.4567. A dash, dot or bracket is
    # required: three space-separated numbers ("ids 456 789 2024") are usually not a phone.
    if sizes == [3, 3, 4] or (sizes == [1, 3, 3, 4] and first in "1１"):
        return any(c in _NA_MARKS for c in candidate)
    return False


def _phone_spans(text: str) -> list[tuple[int, int]]:
    out = []
    pos = 0
    while (m := _PHONE.search(text, pos)) is not None:
        if _is_phone(m.group()):
            out.append(m.span())
            pos = m.end()
        else:
            # A rejected shape ("(0)20 7946") must not hide a phone that starts inside it.
            # Matches are at most ~40 characters long, so rescanning keeps the scan linear.
            pos = m.start() + 1
    return out


_BUILTIN: dict[str, Callable[[str], list[tuple[int, int]]]] = {
    "card": _card_spans,
    "iban": _iban_spans,
    "email": _email_spans,
    "phone": _phone_spans,
    "address": _address_spans,
    "person": _person_spans,
}

# Cheap pre-filters: most texts contain no '@' and few digits; skip a recogniser outright then.
_DIGIT = re.compile(r"\d")
_NEEDS: dict[str, Callable[[str], bool]] = {
    "card": lambda t: _DIGIT.search(t) is not None,
    "iban": lambda t: _DIGIT.search(t) is not None,
    "email": lambda t: "@" in t or "＠" in t,
    "phone": lambda t: _DIGIT.search(t) is not None,
    # Every English address holds an ASCII digit; CJK ones may use ideographic numerals.
    "address": lambda t: not t.isascii() or any(d in t for d in "0123456789"),
    "person": lambda t: True,
}
# The fewest decimal digits (``\d``, Unicode category Nd, what ``str.isdecimal`` and
# ``decimal_digits`` count) a text must hold for a recogniser to find anything in it: a card passes only with 13 to
# 19 digits, a phone with 8 to 15 (``_is_phone``), an IBAN's pattern starts with 2. A sentence
# such as "returns within 30 days of order 4471" has fewer, so its three digit recognisers (each
# a regex that tries every position of the text) are skipped after one C-level count.
_MIN_DIGITS: dict[str, int] = {"card": 13, "iban": 2, "phone": 8}


def count_digits(text: str) -> int:
    """The decimal digits in ``text``: ten C-level counts for ASCII text (the usual case, 3x
    faster than the regex on a 4 KB context), the regex otherwise (full-width and other Nd
    digits are digits to ``decimal_digits`` too)."""
    if text.isascii():
        return sum(map(text.count, "0123456789"))
    return len(_DIGIT.findall(text))


def builtin_recognisers(kinds: tuple[str, ...], *, unmarked_names: bool = False) -> list[Recogniser]:
    """The built-in recognisers named in ``kinds``, in :data:`BUILTIN_KINDS` order (the order they
    must run in); ``unmarked_names`` widens ``person`` to bare names
    (:func:`ragpulse.scorer.person_names.unmarked_name_spans`)."""
    builtin = dict(_BUILTIN)
    if unmarked_names:
        builtin["person"] = _person_and_unmarked_spans
    return [Recogniser(k, builtin[k], _NEEDS[k], _MIN_DIGITS.get(k, 0))
            for k in BUILTIN_KINDS if k in kinds]


def pattern_recogniser(name: str, pattern: str) -> Recogniser:
    """A recogniser for a user's regular expression: every non-empty match is a value. Raises
    ``re.error`` when ``pattern`` does not compile (:class:`PrivacySettings` checks it first)."""
    rx = re.compile(pattern)
    return Recogniser(name, lambda t: [m.span() for m in rx.finditer(t) if m.end() > m.start()],
                      lambda t: True, 0)
