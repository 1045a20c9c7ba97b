"""One surface form for each value, so that a value said another way reads as the same value.

The faithfulness model reads "8 am" and "8:00", "three weeks" and "21 days", "half the fare" and
"50% of the fare" as different values and scores a faithful paraphrase near 0. :func:`canonical`
rewrites values into one canonical form before the model sees a premise or a hypothesis (each
text on its own: the form never depends on the other text), in English, Japanese and Chinese:

=================  ==========================================================================
numbers            number words before a noun ("eight books" -> "8 books", "twenty-one days",
                   "one" only before a unit: "one week"); kanji numerals before a counter
                   (三十日以内 -> 30日以内, 两盒 -> 2盒, 十五歳 -> 15歳; 一 only before a unit of
                   time or money; not after 第, 周/星期 (周五 is Friday) or in 一般, 统一 ...)
clock times        24-hour ``H:MM`` without a leading zero: "8 am", "8:00 a.m.", "08:00",
                   午前8時, 上午8点 -> ``8:00``; "6 pm", 午後6時, 夜6時, 下午6点, 晚上六点 ->
                   ``18:00``; 午後6時半, 下午6点半 -> ``18:30``; "noon"/正午 -> ``12:00``,
                   "midnight" -> ``0:00``
durations          in the largest unit of its chain that holds it whole: seconds, minutes,
                   hours, days, weeks ("48 hours" -> "2 days", "21 days" -> "3 weeks",
                   "1.5 hours" -> "90 minutes", "half an hour" -> "30 minutes") and months,
                   years ("24 months" -> "2 years", 半年 -> 6か月); 3週間 and 21日間 -> 3週間,
                   两周 and 14天 -> 2周
fractions          "half the/of", "a quarter of", "three quarters of" -> "50% of" ...;
                   "per cent"/"percent"/パーセント/百分之N -> ``%``; N割 -> N0%; 一半/半分 -> 50%
weekdays           "Monday to Friday", "Mon-Fri" -> "weekdays"; 月曜日から金曜日 -> 平日;
                   星期一到星期五, 工作日 -> 周一至周五
weekends           "Saturdays and Sundays" -> "weekends"; 土曜日と日曜日, 土曜・日曜, 週末
                   -> 土日; 星期六和星期日, 周六周日, 双休日 -> 周末
money              "€12", "12€" -> "12 euros", "$5" -> "5 dollars", "£3" -> "3 pounds";
                   十块 -> 10元
=================  ==========================================================================

Only exact equivalences: "a month" is not 30 days and stays "1 month"; "business days" and
営業日/工作日 counts are not calendar days and are left; "ten to nine" or "half past three"
(morning or afternoon?) are left; a day is 24 hours (how "within 48 hours" and "within two days"
are read), except in "24-hour" used as an adjective and 24時間営業/24小时营业 (round the clock),
which are left. Text it does not understand is returned unchanged, and
``canonical(canonical(x)) == canonical(x)`` (for text: a random soup of stacked markers such as
"3a.m.p.m." or 晚上晚上 can need a second pass). Pure standard library; tables and regular
expressions compiled once at import; each rule runs only when the text holds a word it needs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction

__all__ = ["VALUES_VERSION", "canonical"]

VALUES_VERSION = "values@1"
"""What the stored scoring version says when premises and statements are normalised: a change
of the rules below that changes any output is a new version."""

Repl = str | Callable[[re.Match[str]], str]
Rule = tuple[tuple[str, ...], re.Pattern[str], Repl]
"""A rewrite: the substrings one of which the text must hold for it to run (a cheap gate:
most texts have no value of most kinds; empty: always), the pattern, the replacement."""


def _apply(rules: list[Rule], text: str, *, lower: bool) -> str:
    key = text.lower() if lower else text
    for gate, pattern, repl in rules:
        if gate and not any(g in key for g in gate):
            continue
        new = pattern.sub(repl, text)
        if new != text:
            text = new
            key = text.lower() if lower else text
    return text


def _after(m: re.Match[str], chars: str) -> bool:
    """Whether the character before ``m`` is one of ``chars`` (patterns are anchored on their
    first character for speed; what may not come before is checked here)."""
    return m.start() > 0 and m.string[m.start() - 1] in chars


_WORDISH = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_'-"


def _cap(words: list[str] | tuple[str, ...]) -> str:
    """An alternation matching each word in lower case or capitalised ("[Tt]wenty")."""
    return "|".join(f"[{w[0].upper()}{w[0]}]{w[1:]}" for w in words)


# ------------------------------------------------------------------------------ number words

_ONES = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
         "nine": 9}
_TEENS = {"ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
          "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
         "eighty": 80, "ninety": 90}
_NUMBERS = {**_ONES, **_TEENS, **_TENS}

# the units a bare "one" may count
_EN_UNIT_ONLY = re.compile(
    r"(?:seconds?|minutes?|hours?|days?|weeks?|fortnights?|months?|years?|euros?|dollars?"
    r"|pounds?|percent|%|times?|kilometres?|kilometers?|miles?|metres?|meters?|kilograms?"
    r"|kilos?|grams?|litres?|liters?|people|persons?)$")
# words after which a number word is not read as a count of the next word ("eight thirty" and
# "eight o'clock" are times of day, morning or evening: left)
_EN_NOT_A_NOUN = frozenset("""
of and or nor to the a an in on at by for with from into onto over under than then is are was
were be been being am do does did has have had will would can could may might must shall should
more less most least another other others each either neither every all any some no not who whom
which that this these those it its they them their he him his she her we us our you your i me
my but so if as per too very o'clock oclock thirty fifteen
""".split())
# words before "one" + unit that make it a count: "within one week", "costs one euro"
_ONE_AFTER = frozenset("""
within for in after than over under about around least most nearly almost only just last lasts
lasted take takes took every per to is are was were be cost costs pay pays charge charges of
""".split())
_LAST_WORD = re.compile(r"([A-Za-z]+)\W*$")

# a word that may be a number word (checked in the callback: a pattern that starts with one
# character class is scanned fast, an alternation of words is not), a ones word after a tens
# word ("twenty-one"), and what follows
_EN_NUMBER = re.compile(r"\b([EFNOSTefnost][a-z]{2,8})(?:(?<=ty)([\s-])(" + "|".join(_ONES)
                        + r"))?"
                        r"(?=([\s-])([A-Za-z%][\w'-]*|%))")
# a number word before "to", "or", "-" and a number: "six to 12" -> "6 to 12"
_EN_RANGE = re.compile(r"\b([EFNOSTefnost][a-z]{2,8})(?=(?:\s+(?:to|or|and)\s+|\s*[-–]\s*)\d)")


def _last_word(m: re.Match[str]) -> str:
    before = _LAST_WORD.search(m.string[max(0, m.start() - 24) : m.start()])
    return before.group(1).lower() if before else ""


def _en_number(m: re.Match[str]) -> str:
    first, second = m.group(1), m.group(3)
    low = first.lower()
    if low not in _NUMBERS or _after(m, _WORDISH):
        return m.group(0)
    if second is not None and low in _TENS:  # twenty-one, twenty one
        value, rest, gap, nxt = _TENS[low] + _ONES[second], "", m.group(4), m.group(5)
    elif second is not None:  # not a number before it (safety one): the word is left
        return m.group(0)
    else:
        value, rest, gap, nxt = _NUMBERS[low], "", m.group(4), m.group(5)
    nxt = nxt.lower()
    if nxt in _EN_NOT_A_NOUN:
        return m.group(0)
    if value == 1 and not (  # "one of", "no one", "one day" (some day)
            _EN_UNIT_ONLY.match(nxt) and (gap == "-" or _last_word(m) in _ONE_AFTER)):
        return m.group(0)
    return f"{value}{rest}"


def _en_range(m: re.Match[str]) -> str:
    low = m.group(1).lower()
    return str(_NUMBERS[low]) if low in _NUMBERS and not _after(m, _WORDISH) else m.group(0)


# ------------------------------------------------------------------------------ durations

# each chain: unit name -> its size in the chain's smallest unit
_TIME_CHAIN = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}
_MONTH_CHAIN = {"month": 1, "year": 12}
_CHAIN_OF = {**{u: _TIME_CHAIN for u in _TIME_CHAIN}, **{u: _MONTH_CHAIN for u in _MONTH_CHAIN}}
_LARGEST_FIRST = {id(c): sorted(c.items(), key=lambda kv: -kv[1]) for c in (_TIME_CHAIN,
                                                                            _MONTH_CHAIN)}


def _in_largest(amount: Fraction | int, unit: str, *, keep_hours: bool = False
                ) -> tuple[int, str] | None:
    """``amount`` ``unit`` in the largest unit of its chain that holds it whole (``keep_hours``:
    never seconds, minutes or hours into days), or None when no unit does."""
    chain = _CHAIN_OF[unit]
    base = amount * chain[unit]
    if base <= 0 or base.denominator != 1:
        return None
    whole = base.numerator
    for name, size in _LARGEST_FIRST[id(chain)]:
        if keep_hours and name in ("day", "week") and unit in ("second", "minute", "hour"):
            continue
        if whole % size == 0:
            return whole // size, name
    return None


def _amount(num: str) -> Fraction | int:
    """A number as written (digits, maybe one decimal point), exactly."""
    return int(num) if "." not in num else Fraction(num)


_EN_UNITS = ("second", "minute", "hour", "day", "week", "month", "year")
_EN_DURATION = re.compile(r"(\d+(?:\.\d+)?)([ -])(" + _cap(_EN_UNITS) + r")(s?)(?![\w-])")


def _en_duration(m: re.Match[str]) -> str:
    if _after(m, _WORDISH + ".:/"):
        return m.group(0)
    num, sep, unit = m.group(1), m.group(2), m.group(3).lower()
    adjective = sep == "-" or m.string[m.end() : m.end() + 1] == "-"
    # "a 24-hour helpline" is round the clock, not a day: hours stay hours in adjectives
    got = _in_largest(_amount(num), unit, keep_hours=adjective)
    if got is None:
        return m.group(0)
    n, name = got
    return f"{n}{sep}{name}" if n == 1 or sep == "-" else f"{n}{sep}{name}s"


# words before "a"/"an" + unit that make it one unit: "within a day" (not "twice a day",
# "3 euros an hour", which are rates)
_A_AFTER = frozenset("""
within for in after than over under about around least most nearly almost only just last lasts
lasted take takes took every
""".split())


def _en_one_unit(m: re.Match[str]) -> str:
    return f"1 {m.group(2)}" if _last_word(m) in _A_AFTER and not _after(m, _WORDISH) \
        else m.group(0)


_EN_PHRASES: list[Rule] = [
    (("quarter",), re.compile(r"\b(?:[Aa]\s+)?quarter\s+of\s+an\s+hour\b"), "15 minutes"),
    (("quarters",), re.compile(r"\b3\s+quarters\s+of\s+an\s+hour\b"), "45 minutes"),
    (("half",), re.compile(r"\b[Hh]alf(?:\s+an\s+|-)hour\b"), "30 minutes"),
    (("half",), re.compile(r"\b[Hh]alf\s+a\s+year\b"), "6 months"),
    (("and a half",), re.compile(r"\b(?:[Aa]n|1)\s+hour\s+and\s+a\s+half\b"), "90 minutes"),
    (("and a half",), re.compile(r"\b(?:[Aa]|1)\s+year\s+and\s+a\s+half\b"), "18 months"),
    (("and a half",), re.compile(r"\b(\d+)\s+and\s+a\s+half\s+(hours|days|weeks|minutes|years)\b"),
     lambda m: m.group(0) if _after(m, ":.") else f"{m.group(1)}.5 {m.group(2)}"),
    (("fortnight",), re.compile(r"\b[Aa]\s+fortnight\b"), "2 weeks"),
    (("fortnight",), re.compile(r"\b(\d+)\s+fortnights\b"), lambda m: f"{2 * int(m.group(1))} weeks"),
    # not "a second" (a second opinion)
    (("minute", "hour", "day", "week", "month", "year"),
     re.compile(r"\b(an?)\s+(minute|hour|day|week|month|year)\b"), _en_one_unit),
]

# ------------------------------------------------------------------------------ fractions, %

_EN_FRACTIONS: list[Rule] = [
    (("cent",), re.compile(r"(\d)\s*(?:per\s*cent|percent)\b", re.I), r"\1%"),
    (("half",), re.compile(r"(?<![\w-])(?:[Oo]ne\s+)?[Hh]alf\s+(?:of\s+)?the\b"), "50% of the"),
    (("half",), re.compile(r"(?<![\w-])(?:[Oo]ne\s+)?[Hh]alf\s+of\b"), "50% of"),
    (("quarter",), re.compile(r"(?<![\w-])(?:[Aa]|[Oo]ne)\s+quarter\s+of\b"), "25% of"),
    (("quarters",), re.compile(r"(?<![\w-])3\s+quarters\s+of\b"), "75% of"),
]

# ------------------------------------------------------------------------------ clock times

_EN_AMPM = re.compile(r"(\d{1,2})(?:[:.](\d{2}))?\s?([ap])(?:\.m\.|m\b\.?|\.m\b)", re.I)
_EN_CLOCK_WORDS: list[Rule] = [
    (("noon", "midday"), re.compile(r"\b12(?::00)?\s+(?:noon|midday)\b"), "12:00"),
    (("midnight",), re.compile(r"\b12(?::00)?\s+midnight\b"), "0:00"),
    (("noon", "midday"), re.compile(r"(?<![\w-])(?:[Nn]oon|[Mm]idday)\b(?!-)"), "12:00"),
    (("midnight",), re.compile(r"(?<![\w-])[Mm]idnight\b(?!-)"), "0:00"),
]
_LEADING_ZERO = re.compile(r"0(\d):([0-5]\d)(?![\d:])")
# capitalised words that follow "6 p.m." inside a sentence
_NAMES = frozenset("""
monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat
sun january february march april may june july august september october november december jan feb
mar apr jun jul aug sep sept oct nov dec
""".split())


def _en_ampm(m: re.Match[str]) -> str:
    if _after(m, _WORDISH + ":."):
        return m.group(0)
    h, mins, half = int(m.group(1)), m.group(2) or "00", m.group(3).lower()
    if not 1 <= h <= 12 or int(mins) > 59:
        return m.group(0)
    h = (0 if h == 12 else h) + (12 if half == "p" else 0)
    out = f"{h}:{mins}"
    if m.group(0).endswith("."):  # "6 p.m." ending a sentence: keep the sentence's full stop
        rest = m.string[m.end() :]
        word = rest.split(None, 1)[0].rstrip(".,;:!?").lower() if rest.strip() else ""
        nxt = rest.lstrip()[:1]
        if not nxt or rest[0].isspace() and not (nxt.islower() or word in _NAMES):
            out += "."
    return out


def _leading_zero(m: re.Match[str]) -> str:
    return m.group(0) if _after(m, "0123456789:.") else f"{m.group(1)}:{m.group(2)}"


# ------------------------------------------------------------------------------ weekdays, money

_DASH = r"(?:to|through|thru|until|till|-|–|—)"
_EN_DAYS: list[Rule] = [
    (("mon",), re.compile(r"\b[Ff]rom\s+[Mm]ondays?\s*" + _DASH + r"\s*[Ff]ridays?\b"),
     "on weekdays"),
    (("mon",), re.compile(r"\b[Mm]ondays?\s*" + _DASH + r"\s*[Ff]ridays?\b"), "weekdays"),
    (("mon",), re.compile(r"\b[Mm]on\.?\s*(?:-|–|—|to)\s*[Ff]ri\b"), "weekdays"),
    (("sat",), re.compile(r"\b[Ss]aturdays?\s*(?:and|&|\+|or)\s*[Ss]undays?\b"), "weekends"),
    (("sat",), re.compile(r"\b[Ss]at\.?\s*(?:-|–|—|&|and)\s*[Ss]un\b"), "weekends"),
]

_MONEY = {"€": "euros", "$": "dollars", "£": "pounds"}
_EN_MONEY: list[Rule] = [
    (tuple(_MONEY), re.compile(r"(?<![\w.€$£])([€$£])\s?(\d+(?:[.,]\d+)?)(?![\w:])"),
     lambda m: f"{m.group(2)} {_MONEY[m.group(1)]}"),
    (("€", "£"), re.compile(r"(?<![\w.:])(\d+(?:[.,]\d+)?)\s?([€£])(?!\w)"),
     lambda m: f"{m.group(1)} {_MONEY[m.group(2)]}"),
]


def _english(text: str) -> str:
    text = _EN_NUMBER.sub(_en_number, text)
    text = _apply(_EN_CLOCK_WORDS, text, lower=True)
    text = _EN_RANGE.sub(_en_range, text)
    text = _apply(_EN_PHRASES, text, lower=True)
    text = _EN_DURATION.sub(_en_duration, text)
    low = text.lower()
    if "am" in low or "pm" in low or "a.m" in low or "p.m" in low:
        text = _EN_AMPM.sub(_en_ampm, text)
    text = _apply(_EN_FRACTIONS, text, lower=True)  # after the clocks: "noon per cent" reads once
    text = _apply(_EN_DAYS, text, lower=True)
    return _apply(_EN_MONEY, text, lower=False)


# ------------------------------------------------------------------------------ CJK

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")
_KANA = re.compile(r"[\u3040-\u30ff]")
_LATIN = re.compile(r"[A-Za-z€$£]")
_FULLWIDTH = str.maketrans("０１２３４５６７８９：", "0123456789:")

_KANJI_DIGIT = {"〇": 0, "零": 0, "一": 1, "二": 2, "两": 2, "兩": 2, "三": 3, "四": 4, "五": 5,
                "六": 6, "七": 7, "八": 8, "九": 9}
_KANJI_UNIT = {"十": 10, "百": 100, "千": 1000}
_KANJI_CHARS = "〇零一二两兩三四五六七八九十百千"
_KANJI_NUM = f"[{_KANJI_CHARS}]+"


def _kanji_value(text: str) -> int | None:
    """The value of a kanji numeral below 10,000 (三十 30, 十五 15, 二百五十 250, 二〇 20 read
    digit by digit); None for what is not one numeral (三五: three or five)."""
    if all(c in _KANJI_DIGIT for c in text):
        if len(text) > 1 and "〇" not in text and "零" not in text:
            return None
        return int("".join(str(_KANJI_DIGIT[c]) for c in text))
    total, digit, last_unit = 0, None, 10_000
    for c in text:
        if c in _KANJI_DIGIT:
            if digit is not None and _KANJI_DIGIT[c] != 0:
                return None
            digit = _KANJI_DIGIT[c] or None
        else:
            unit = _KANJI_UNIT[c]
            if unit >= last_unit:
                return None
            total += (1 if digit is None else digit) * unit
            digit, last_unit = None, unit
    return total + (digit or 0)


# counters after which a kanji numeral is a quantity. Units of time and money take any
# numeral; the others (people, items, times) not 一, an article or an idiom there (一人で,
# 一个问题, 一次性)
_TIME_COUNTERS = (
    r"个半(?=小时|钟头)|個半(?=小時|鐘頭)|時間半|か月|ヶ月|カ月|ヵ月|ケ月|箇月|个月|個月|个小时"
    r"|个钟头|个星期|个礼拜|个工作日|時間|小时|钟头|分钟|分間|秒钟|秒間|秒|週間|星期|礼拜"
    r"|周(?![一二三四五六日末\d])|天|日間|年間|年(?![级級代纪紀轻輕龄齡度生月底初末])"
    r"|日(?=以内|以上|後|后|ごと|毎|おき|前|程度|ほど|くらい|ぐらい|内|之内|まで|間)"
    r"|円|元|块钱|块(?!儿)|割|パーセント")
_COUNT_COUNTERS = (
    r"人|名|位|冊|本|個|件|枚|台|杯|回(?!り)|次(?!性|要|序|第)|盒|瓶|节|節|张|張|歳|才|岁"
    r"|周岁|階|层|層|倍|种|種|项|項|间|軒|家|所|条|道|页|頁|份|袋|箱|辆|輛|粒|錠|泊|部屋"
    r"|点(?=以上|まで)")
_IS_COUNT = re.compile(_COUNT_COUNTERS)
_KANJI_BEFORE = re.compile(r"(" + _KANJI_NUM + r")(?=(" + _TIME_COUNTERS + r"|"
                           + _COUNT_COUNTERS + r"))")
# what may not precede a kanji numeral read as a number: an ordinal (第), a word it is part of
# (周五, 星期五, 礼拜五: Friday; 每周三次 is left too, 每周三 being Wednesday)
_KANJI_NOT_AFTER = _KANJI_CHARS + "第唯统統单單同逐万萬周期拜"
_KANJI_CLOCK = re.compile(r"(" + _KANJI_NUM + r")(?=[時时点點](?!間|间|点|限|代|期|刻|候|速|頃))")
# minutes in kanji after an hour already in digits (六時十分 -> 6時10分)
_KANJI_MINUTE = re.compile(r"(?<=\d[時时点點])(" + _KANJI_NUM + r")(?=分)")
_KUAI = re.compile(r"(?<=\d)块钱|(?<=\d)块(?!儿)")  # 十块 (colloquial) is 10元

_PERIODS_JA = ("午前", "午後", "朝", "夜", "夕方", "昼")
_PERIODS_ZH = ("上午", "早上", "早晨", "清晨", "凌晨", "中午", "下午", "傍晚", "晚上", "夜里",
               "夜间", "夜裡", "夜間")
_PERIODS = _PERIODS_ZH + _PERIODS_JA
# what makes N点 o'clock without a period word: minutes, 半, 钟, 整, or a word of time
_ZH_DOT_AFTER = re.compile(r"[半钟鐘整]|[〇零一二三四五六七八九十\d]+分|"
                           r"前|后|後|以前|以后|之前|之后|到|至|开|起|~|～|-|—|–|左右|关|截")


def _period(m: re.Match[str]) -> str:
    """The period word (午後, 下午 ...) just before ``m``, unless it follows 毎/每 (毎朝8時:
    every morning at 8, where the word is not only the clock's)."""
    before = m.string[max(0, m.start() - 3) : m.start()]
    for p in _PERIODS:
        if before.endswith(p) and not before[: len(before) - len(p)].endswith(("毎", "每")):
            return p
    return ""


def _kanji_number(m: re.Match[str]) -> str:
    text = m.group(1)
    value = _kanji_value(text)
    if value is None or _after(m, _KANJI_NOT_AFTER):
        return text
    counter = m.group(2) if m.re.groups >= 2 else ""
    if text == "一" and counter and _IS_COUNT.match(counter):
        return text
    return str(value)


def _kanji_clock(m: re.Match[str]) -> str:
    text = m.group(1)
    value = _kanji_value(text)
    if value is None or value > 24 or _after(m, _KANJI_CHARS + "同暂暫臨临当當周期拜"):
        return text
    period = _period(m)
    if text == "一" and not period:
        return text  # 一時的, 一時停止 (for a while), 一点 (a little)
    if m.string[m.end()] in "点點" and not period \
            and not _ZH_DOT_AFTER.match(m.string, m.end() + 1):
        return text  # 三点建议: three points
    return str(value)


def _hour(period: str, h: int) -> int | None:
    """Hour ``h`` said after ``period`` on the 24-hour clock; None when it could be either
    (午前12時: midnight or noon). A 24-hour value stays as it is."""
    if period in ("午後", "下午", "傍晚", "夕方") and 1 <= h <= 11:
        return h + 12
    if period in ("夜", "晚上", "夜里", "夜间", "夜裡", "夜間"):
        return h + 12 if 6 <= h <= 11 else (0 if h == 12 else h)
    if period in ("昼", "中午") and 1 <= h <= 5:
        return h + 12
    if period == "凌晨" and h == 12:
        return 0
    if period == "午前" and h == 12:
        return None
    return h


def _clock_text(m: re.Match[str], period: str) -> str:
    h = int(m.group("h"))
    mins = m.group("m") or ("30" if m.groupdict().get("half") else "00")
    hour = _hour(period, h) if h <= 24 and int(mins) <= 59 else None
    return m.group(0) if hour is None else f"{hour}:{int(mins):02d}"


def _ja_clock(m: re.Match[str]) -> str:
    """9時, 午後6時 (the period word is dropped by :data:`_PERIOD_CLOCK`), 9時30分, 9時半."""
    return m.group(0) if _after(m, "0123456789.:") else _clock_text(m, _period(m))


def _zh_dot_clock(m: re.Match[str]) -> str:
    """下午6点, 8点半, 8点30(分), 12点前: 点 is o'clock after a period word, or when a minute,
    半, 钟, 整 or a word of time (前, 后, 到, 至, 开始 ...) follows; else it is "points" (3点建议)."""
    if _after(m, "0123456789.:第"):
        return m.group(0)
    period = _period(m)
    if not (period or m.group("m") or m.group("half") or m.group(0).endswith(("钟", "整"))) \
            and not _ZH_DOT_AFTER.match(m.string, m.end()):
        return m.group(0)
    return _clock_text(m, period)


def _period_clock(m: re.Match[str]) -> str:
    """A period word before ``H:MM`` (晚上18:30, and what the clocks above wrote): the hour
    on the 24-hour clock, the word dropped."""
    if _after(m, "毎每"):
        return m.group(0)
    return m.group(0) if (out := _clock_text(m, m.group("p"))) == m.group(0) else out


_CJK_CLOCKS: list[Rule] = [
    (("正午", "中午"), re.compile(r"正午|中午12点|中午十二点"), "12:00"),
    (("時", "时"), re.compile(r"(?P<h>\d{1,2})(?:時(?!間|点|限|代|期)|时(?!间|代|期))"
                              r"(?:(?P<m>[0-5]?\d)分|(?P<half>半))?"), _ja_clock),
    (("点", "點"), re.compile(r"(?P<h>\d{1,2})[点點](?:(?P<m>[0-5]\d)(?:分|(?![\d%.]))|(?P<half>半)"
                             r"|钟|整)?"),
     _zh_dot_clock),
    ((":",), re.compile(r"(?P<p>" + "|".join(_PERIODS) + r")(?P<h>\d{1,2}):(?P<m>[0-5]\d)"
                        r"(?!\d)"), _period_clock),
]


def _zh_context(m: re.Match[str]) -> bool:
    """Whether the text around a match reads as Chinese (no kana near it)."""
    return not _KANA.search(m.string, max(0, m.start() - 20), m.end() + 20)


_NOT_HALF_AFTER = "0123456789一二三四五六七八九十两大"
_CJK_HALVES: list[Rule] = [
    (("半",), re.compile(r"(\d+)(?:个|個)?半(?:个|個)?(?:小时|钟头|鐘頭)"),
     lambda m: m.group(0) if _after(m, "0123456789.")
     else f"{int(m.group(1)) * 60 + 30}分钟"),
    (("半",), re.compile(r"(\d+)時間半"),
     lambda m: m.group(0) if _after(m, "0123456789.") else f"{int(m.group(1)) * 60 + 30}分"),
    (("半",), re.compile(r"半(?:个|個)?(?:小时|钟头|鐘頭)"),
     lambda m: m.group(0) if _after(m, _NOT_HALF_AFTER) else "30分钟"),
    (("半",), re.compile(r"半時間"),
     lambda m: m.group(0) if _after(m, _NOT_HALF_AFTER) else "30分"),
    (("半",), re.compile(r"半年(?!生|度|级|級)"),
     lambda m: m.group(0) if _after(m, _NOT_HALF_AFTER + "多前後后")
     else ("6个月" if _zh_context(m) else "6か月")),
    (("ひと月",), re.compile(r"ひと月"), "1か月"),
]

_JA_DAY_SUFFIX = r"(?=以内|以上|未満|後|ごと|毎|おき|前|程度|ほど|くらい|ぐらい|まで|分)"
_CJK_DURATION = re.compile(
    r"(\d+(?:\.\d+)?)(?:"
    r"(?P<ja_m>か月間?|ヶ月間?|カ月間?|ヵ月間?|ケ月間?|箇月間?)|(?P<zh_m>个月|個月)"
    r"|(?P<ja_h>時間)|(?P<zh_h>个小时|個小時|小时|小時|个钟头|钟头)"
    r"|(?P<ja_min>分間|分(?!の|間|钟|鐘|\d))|(?P<zh_min>分钟|分鐘)"
    r"|(?P<ja_s>秒間?)|(?P<zh_s>秒钟|秒鐘|秒(?!钟))"
    r"|(?P<ja_w>週間|週(?=以内|後|ごと|毎|おき|前|間))"
    r"|(?P<zh_w>个星期|個星期|个礼拜|星期|礼拜|周(?![一二三四五六日末年]))"
    r"|(?P<ja_d>日間|日" + _JA_DAY_SUFFIX + r")|(?P<zh_d>天)"
    r"|(?P<ja_y>年間|年" + _JA_DAY_SUFFIX + r")"
    r"|(?P<zh_y>年(?![级級代纪紀轻輕龄齡度生月底初末份会會]))"
    r")(?P<rest>营业|營業|服务|服務|开放|值班|在线|営業|対応|受付|体制|稼働|サポート)?")
_CJK_OUT = {
    "ja": {"second": "秒", "minute": "分", "hour": "時間", "day": "日", "week": "週間",
           "month": "か月", "year": "年"},
    "zh": {"second": "秒", "minute": "分钟", "hour": "小时", "day": "天", "week": "周",
           "month": "个月", "year": "年"},
}
_CJK_UNIT_OF = {"m": "month", "h": "hour", "min": "minute", "s": "second", "w": "week",
                "d": "day", "y": "year"}
_JA_SUFFIX = re.compile(_JA_DAY_SUFFIX)


def _cjk_duration(m: re.Match[str]) -> str:
    if _after(m, "0123456789.:第"):
        return m.group(0)
    key = next(k for k, v in m.groupdict().items() if v is not None and k != "rest")
    lang, short = key.split("_")
    unit = _CJK_UNIT_OF[short]
    num = m.group(1)
    if m.group(key) == "分" and not _KANA.search(m.string):
        return m.group(0)  # 60分 in Chinese: 60 points (a score) or cents, not minutes
    if unit == "year" and lang == "zh" and _amount(num) > 100:
        return m.group(0)  # 2024年: a year of the calendar
    rest = m.group("rest") or ""
    got = _in_largest(_amount(num), unit, keep_hours=bool(rest))
    if got is None:
        return m.group(0)
    n, name = got
    text = f"{n}{_CJK_OUT[lang][name]}"
    if lang == "ja" and name in ("day", "year") and not rest \
            and not _JA_SUFFIX.match(m.string, m.end()):
        text += "間"  # 3日間, 2年間: without 間 (or a suffix) a day or a year reads as a date
    return text + rest


def _percent_of_kanji(m: re.Match[str]) -> str:
    value = _kanji_value(m.group(1))
    return m.group(0) if value is None else f"{value}%"


_CJK_FRACTIONS: list[Rule] = [
    (("一半",), re.compile(r"一半"), lambda m: m.group(0) if _after(m, "一大多") else "50%"),
    (("半分",), re.compile(r"半分(?!钟|鐘|間)"),
     lambda m: m.group(0) if _after(m, "0123456789一二三四五六七八九十時间間") else "50%"),
    (("パーセント",), re.compile(r"(\d+(?:\.\d+)?)\s?パーセント"), r"\1%"),
    (("百分之",), re.compile(r"百分之(\d+(?:\.\d+)?)"), r"\1%"),
    (("百分之",), re.compile(r"百分之(" + _KANJI_NUM + r")"), _percent_of_kanji),
    (("割",), re.compile(r"(\d)割(?!引|増|安|高|以|程|ほ|く|ぐ|前|後|の|が|は|を|に|で|と|も|減"
                        r"|超|弱|強|近)?"),
     lambda m: m.group(0) if _after(m, "0123456789.") else f"{int(m.group(1)) * 10}%"),
]

_ZH_DAY = r"(?:周|星期|礼拜|禮拜)"
_CJK_DAYS: list[Rule] = [
    # each pattern starts with one character, which the regex engine finds fast
    (("曜", "月"), re.compile(r"月(?:曜日?\s*(?:から|〜|～|~|-|ー|－)\s*金曜日?(?:まで)?"
                             r"|\s*(?:〜|～|~|-|－)\s*金(?![\w]))"), "平日"),
    (("曜", "週末"), re.compile(r"[土週](?:(?<=土)曜日?\s*(?:と|・|、|及び|および|や)\s*日曜日?"
                              r"|(?<=週)末)"), "土日"),
    (("周", "星期", "礼拜", "禮拜"),
     re.compile(_ZH_DAY + r"一\s*(?:至|到|~|～|-|—|–)\s*" + _ZH_DAY + r"?五"), "周一至周五"),
    (("工作日",), re.compile(r"工作日(?!内|之内|以内)"),
     lambda m: m.group(0) if _after(m, "0123456789个個非一二三四五六七八九十") else "周一至周五"),
    (("周", "星期", "礼拜", "禮拜", "双休", "雙休"),
     re.compile(_ZH_DAY + r"六\s*(?:和|与|與|及|、|,|，|至|到)?\s*" + _ZH_DAY + r"?[日天]"
                r"|双休日|雙休日"), "周末"),
]


def _cjk(text: str) -> str:
    text = text.translate(_FULLWIDTH)
    if "時" in text or "时" in text or "点" in text or "點" in text:
        text = _KANJI_CLOCK.sub(_kanji_clock, text)
        if "分" in text:
            text = _KANJI_MINUTE.sub(_kanji_number, text)
    text = _KANJI_BEFORE.sub(_kanji_number, text)
    text = _apply(_CJK_HALVES, text, lower=False)
    text = _apply(_CJK_CLOCKS, text, lower=False)
    if "块" in text:
        text = _KUAI.sub("元", text)
    text = _CJK_DURATION.sub(_cjk_duration, text)
    text = _apply(_CJK_FRACTIONS, text, lower=False)
    return _apply(_CJK_DAYS, text, lower=False)


def canonical(text: str, lang: str | None = None) -> str:
    """``text`` with its values in one canonical form (see the module doc): numbers as digits,
    clock times as 24-hour ``H:MM``, durations in the largest unit that holds them whole,
    fractions as percentages, weekday and weekend ranges as one word. ``lang`` (``en``, ``ja``,
    ``zh``; None: every language whose script the text has) chooses the rules: English rules
    read Latin text, the Japanese and Chinese ones (shared: kanji numerals, clocks, durations)
    CJK text. Deterministic, idempotent; raises ``ValueError`` only for an unknown ``lang``."""
    if lang is not None and lang not in ("en", "ja", "zh"):
        raise ValueError(f"lang must be 'en', 'ja', 'zh' or None, not {lang!r}")
    # CJK first: its rules read digits before CJK units, which the English rules never write
    if lang in (None, "ja", "zh") and (_CJK.search(text) or "：" in text):
        text = _cjk(text)
    if lang in (None, "en") and _LATIN.search(text):
        english = _english(text)
        if english != text and lang is None and _CJK.search(english):
            # mixed scripts: what one language's rules wrote can be read by the other's (夜4
            # p.m. -> 夜16:00 -> 16:00): again until nothing changes (twice at most)
            for _ in range(2):
                again = _english(_cjk(english))
                if again == english:
                    break
                english = again
        text = english
    if ":" in text:
        text = _LEADING_ZERO.sub(_leading_zero, text)
    return text
