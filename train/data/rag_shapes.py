"""RAG-shaped pairs of data v5 (EN/JA/ZH, invented facts): values in another format, and one
entity's facts fused across two passages.

Why (the dev set's misses with ``@4``, statement by statement): faithful statements that give a
value in another format than the context ("21時" as "夜9時", "14 days" as "two weeks") get
P 0.01-0.2, because every number change in the training data is a wrong value; and a faithful
sentence that joins an entity's facts from two passages ("the Pro plan costs $29 and takes up to
10 users", price and seats in different passages) is judged against a premise whose other
sentences give other entities' values for the same attributes. The template data
(``templates.py``) fuses facts of two *different* entities of *one* passage only.

Kinds:

* ``format-reword`` / ``format-terse`` (1): the target's value in an equivalent format, in an
  answer wording / after the question;
* ``format-swap`` / ``format-spare`` (0): a distractor's value / a value nowhere in the context,
  in such a format, so that a format change decides nothing;
* ``profile-fuse`` (1): two facts of one entity from two passages in one sentence (a value
  sometimes reformatted); ``profile-wrong`` (0): the same with one clause's value taken from
  another entity of the other passage; ``profile-attribution`` (0): both clauses of the wrong
  entity's values for one, the other right.

Premises: the whole context (passages separated by a blank line) or, half the time, the
sentences the judge's packed premise would keep (the evidence and the sentences sharing most
words with the statement, in document order, joined by a space). Every name and value is
invented (``templates.py``); no licence to track.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

from .templates import FRAMES, FUSE, collect, distinct_values

EN_NUM = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
          "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
          "eighteen", "nineteen", "twenty"]
ZH_NUM = "零一二三四五六七八九十"
WEEKS = {"en": {1: "one week", 2: "two weeks", 3: "three weeks"},
         "ja": {1: "1週間", 2: "2週間", 3: "3週間"},
         "zh": {1: "一周", 2: "两周", 3: "三周"}}


def _zh_num(n: int) -> str | None:
    if n <= 10:
        return ZH_NUM[n]
    if n < 20:
        return "十" + ZH_NUM[n - 10]
    if n < 100 and n % 10 == 0:
        return ZH_NUM[n // 10] + "十"
    return None


def _days(lang: str, n: int) -> list[str]:
    out = [WEEKS[lang][n // 7]] if n % 7 == 0 and n // 7 in WEEKS[lang] else []
    if lang == "en" and n <= 20:
        out.append(f"{EN_NUM[n]} days")
    if lang == "ja":
        out.append(f"{n}日間")
    if lang == "zh" and _zh_num(n):
        out.append(f"{_zh_num(n)}天")
    return out


def equivalents(frame: str, lang: str, v: str) -> list[str]:
    """The value ``v`` (as ``templates.FRAMES[frame]["val"]`` writes it) in other formats that
    say exactly the same; empty when there is none (years, cities)."""
    n = [int(x) for x in re.findall(r"\d+", v.replace(",", ""))]
    if frame == "price":
        if lang == "en":
            return [f"{n[0]} dollars", f"${n[0]}.00"]
        if lang == "ja":
            return [f"{n[0]}円"] if n[0] >= 1000 else []
        return [f"{n[0]}块钱", f"人民币{n[0]}元"]
    if frame in ("returns", "leave"):
        return _days(lang, n[0])
    if frame == "seats":
        if lang == "en":
            return [EN_NUM[n[0]]] if n[0] <= 20 else []
        return [f"{n[0]}名"]
    if frame == "dose":
        if n[0] < 100:
            return []
        g = f"{n[0] / 1000:g}"
        return [f"{g} g" if lang == "en" else f"{g}g"]
    if frame == "hours":
        h, half = n[0], ("半" in v or ":30" in v)
        if lang == "en":
            return [f"{h}.{30 if half else '00'} in the morning", f"{h:02d}:{30 if half else 0:02d}"]
        if lang == "ja":
            return [f"朝{h}時" + ("半" if half else ""), f"{h}:{30 if half else 0:02d}"]
        return [f"早上{h}点" + ("半" if half else ""), f"{h}:{30 if half else 0:02d}"]
    return []


FORMAT_FRAMES = ("price", "returns", "leave", "seats", "dose", "hours")
# two frames about one kind of entity: a "profile" whose facts sit in two passages
PROFILES = (("price", "seats"), ("founded", "hq"))


STARTERS = {"The", "A", "An", "You", "Up", "If", "On", "From", "Each", "Adults", "Every"}


def join(a: str, b: str, lang: str) -> str:
    """Two statements as one sentence; an English second clause keeps a name's capital."""
    a = a.rstrip("。.")
    if lang != "en":
        return FUSE[lang].format(a=a, b=b)
    first = b.split(" ", 1)[0]
    return f"{a}, and {b[:1].lower() + b[1:] if first in STARTERS else b}"


def _overlap(a: str, b: str, lang: str) -> float:
    if lang == "en":
        wa, wb = set(re.findall(r"\w+", a.lower())), set(re.findall(r"\w+", b.lower()))
    else:
        wa = {a[i:i + 2] for i in range(len(a) - 1)}
        wb = {b[i:i + 2] for i in range(len(b) - 1)}
    return len(wa & wb) / max(1, len(wa))


def _premise(passages: list[list[str]], need: set[str], hyp: str, lang: str,
             rng: random.Random) -> str:
    """The whole context, or the packed sentences a judge keeps: the evidence plus the sentences
    sharing most with the statement, 3-4 in all, in document order."""
    sep = " " if lang == "en" else ""
    if rng.random() < 0.5:
        return "\n\n".join(sep.join(p) for p in passages)
    flat = [s for p in passages for s in p]
    rest = sorted((s for s in flat if s not in need), key=lambda s: -_overlap(hyp, s, lang))
    keep = need | set(rest[: max(0, rng.randint(3, 4) - len(need))])
    return sep.join(s for s in flat if s in keep)


def _format_sample(lang: str, rng: random.Random) -> Iterator[tuple[str, str, str, int]]:
    name = rng.choice(FORMAT_FRAMES)
    fr = FRAMES[name]
    ents = rng.sample(fr["ents"][lang], k=rng.randint(2, 4))
    vals = distinct_values(fr, lang, rng, len(ents) + 1)
    spare = vals.pop()
    eq = {v: equivalents(name, lang, v) for v in [*vals, spare]}
    if not eq[vals[0]] or not (eq[vals[1]] or eq[spare]):
        return
    sents = [rng.choice(fr["ctx"][lang]).format(e=e, v=v) for e, v in zip(ents, vals, strict=True)]
    rng.shuffle(sents)
    a = lambda e, v: rng.choice(fr["ans"][lang]).format(e=e, v=v)  # noqa: E731
    e1, v1, v2 = ents[0], vals[0], vals[1]
    q = fr["q"][lang].format(e=e1)
    need = {s for s in sents if e1 in s}
    pos = [("format-reword", a(e1, rng.choice(eq[v1]))),
           ("format-terse", f"{q} {rng.choice(eq[v1])}")]
    wrong = [("format-swap", v2), ("format-spare", spare)]
    negs = [(k, a(e1, rng.choice(eq[w]))) for k, w in wrong if eq[w]]
    for kind, h in pos:
        yield kind, _premise([sents], need, h, lang, rng), h, 1
    for kind, h in negs[:2]:
        yield kind, _premise([sents], need, h, lang, rng), h, 0


def _profile_sample(lang: str, rng: random.Random) -> Iterator[tuple[str, str, str, int]]:
    n1, n2 = rng.choice(PROFILES)
    f1, f2 = FRAMES[n1], FRAMES[n2]
    ents = rng.sample(f1["ents"][lang], k=rng.randint(2, 4))
    va, vb = distinct_values(f1, lang, rng, len(ents)), distinct_values(f2, lang, rng, len(ents))
    p1 = [rng.choice(f1["ctx"][lang]).format(e=e, v=v) for e, v in zip(ents, va, strict=True)]
    p2 = [rng.choice(f2["ctx"][lang]).format(e=e, v=v) for e, v in zip(ents, vb, strict=True)]
    other = FRAMES[rng.choice([k for k in FRAMES if k not in (n1, n2)])]
    p2.append(rng.choice(other["ctx"][lang]).format(e=rng.choice(other["ents"][lang]),
                                                    v=other["val"](lang, rng)))
    rng.shuffle(p1)
    rng.shuffle(p2)
    passages = [p1, p2] if rng.random() < 0.5 else [p2, p1]
    e1, e2 = ents[0], ents[1]
    need = {s for s in p1 + p2 if e1 in s}

    def said(fr: dict, name: str, e: str, v: str) -> str:
        eq = equivalents(name, lang, v)
        if eq and rng.random() < 0.3:
            v = rng.choice(eq)
        return rng.choice(fr["ans"][lang]).format(e=e, v=v)

    def fused(x: str, y: str) -> str:
        if rng.random() < 0.5:
            x, y = y, x
        return join(x, y, lang)

    right = fused(said(f1, n1, e1, va[0]), said(f2, n2, e1, vb[0]))
    wrong1 = fused(said(f1, n1, e1, va[0]), said(f2, n2, e1, vb[1]))
    wrong2 = fused(said(f1, n1, e1, va[1]), said(f2, n2, e1, vb[0]))
    attr = fused(said(f1, n1, e2, va[0]), said(f2, n2, e2, vb[1]))
    yield "profile-fuse", _premise(passages, need, right, lang, rng), right, 1
    right2 = fused(said(f1, n1, e1, va[0]), said(f2, n2, e1, vb[0]))
    if right2 != right:
        yield "profile-fuse", _premise(passages, need, right2, lang, rng), right2, 1
    for kind, h in rng.sample([("profile-wrong", wrong1), ("profile-wrong", wrong2),
                               ("profile-attribution", attr)], 2):
        yield kind, _premise(passages, need, h, lang, rng), h, 0


def build(lang: str, n: int, seed: int = 0) -> Iterator[dict]:
    """About ``n`` pairs in ``lang``: half value-format rows, half two-passage profiles."""
    rng = random.Random(f"rag-shapes-{seed}-{lang}")
    return collect(lambda: (_format_sample if rng.random() < 0.5 else _profile_sample)(lang, rng),
                   n, "synth_rag_shapes", lang, max_draws=50 * n)
