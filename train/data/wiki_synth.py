"""English long-document pairs from WikiText-2 (data v3).

Why: the shipped model's weakest sets are English long documents (QAGS-CNNDM 0.686, FaithBench
0.545), while its English training premises are mostly SNLI captions, a 5-article SQuAD excerpt
and invented templates. WikiText-2 valid + test are 124 Wikipedia Good/Featured articles.

Premise: a window of consecutive sentences of one article (about 110-230 tokens), or, for about a
quarter of the rows, the 3-6 sentences of the article sharing the most words with the statement,
in document order (the "packed" premise shape). About a third of the premises get news-style
formatting noise (``noise.news_noise``); statements stay clean.

Positives (label 1):
  wiki-copy       one sentence of the premise, verbatim
  wiki-fuse       two sentences fused (", and" / "; " / a relative clause)
  wiki-compress   a sentence with a parenthetical, an appositive or a trailing clause removed
  wiki-title      a sentence whose pronoun / "The <noun>" subject is replaced by the article title
  wiki-summary    two facts of the premise, compressed, in the other order
Negatives (label 0), exactly one wrong part each:
  wiki-swap-number   a number, year or month replaced by another one of the same article
  wiki-swap-entity   a capitalised multi-word name replaced by another name of the same article
  wiki-swap-subject  a sentence with the subject of another premise sentence
  wiki-negation      "was" -> "was not", "did not" -> "did", ...
  wiki-add           a premise sentence fused with a sentence of the article not in the premise
  wiki-overgen       a hedge made absolute ("usually" -> "always", "some" -> "all", ...)
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass

from . import qa_synth
from .noise import maybe_noise
from .sources import WIKITEXT2

FILES = ("word_language_model/data/wikitext-2/valid.txt", "word_language_model/data/wikitext-2/test.txt")
BUDGET = (450, 760)  # premise characters: about 110-220 tokens of the pruned vocabulary (noise adds ~10 %), so
# that premise + statement fit the 256-token training pairs (longest_first truncation cuts the premise end)
NOISE_SHARE = 1 / 3
PACKED_SHARE = 1 / 4
PASSES = 3  # window tilings per article: 4.8k usable sentences (two thirds of WikiText's hold "<unk>")
SOURCE = "wiki_wikitext2"


# ---------------------------------------------------------------- parsing

_H1 = re.compile(r"^ ?= ([^=].*?) = ?$")
_H2 = re.compile(r"^ ?(= ){2,}.*?( =){2,} ?$")


def detok(s: str) -> str:
    """WikiText's tokenization undone: "@-@" "@,@" "@.@" joiners, spaces before punctuation,
    "( x )", " 's", " n't", '" x "'."""
    s = s.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    s = re.sub(r'" (.*?) "', r'"\1"', s)
    s = re.sub(r"\( ", "(", s)
    s = re.sub(r" \)", ")", s)
    s = re.sub(r" ([,.;:!?%])", r"\1", s)
    s = re.sub(r" (n't|'s|'re|'ve|'ll|'d|'m|'t)\b", r"\1", s)
    s = re.sub(r" ?’ ?(s|t|re|ve|ll|d|m)\b", r"’\1", s)
    s = re.sub(r"(\w) ' ", r"\1' ", s)
    s = re.sub(r"([$£€]) (?=\d)", r"\1", s)
    s = re.sub(r"(\d): (?=\d)", r"\1:", s)
    return re.sub(r"\s+", " ", s).strip()


_ABBREV = re.compile(r"(?:\b[A-Z]|\b(?:Mr|Mrs|Ms|Dr|St|Jr|Sr|No|Lt|Col|Gen|Capt|Sgt|Mt|Ft|vs|c|ca|U\.S|U\.K))\.$")


def split_sentences(text: str) -> list[str]:
    """qa_synth's English split, re-joining after initials and common abbreviations."""
    out: list[str] = []
    for s in qa_synth.sentences(text, "en"):
        if out and _ABBREV.search(out[-1]):
            out[-1] += " " + s
        else:
            out.append(s)
    return out


@dataclass
class Article:
    title: str
    sentences: list[str]  # detokenized, without "<unk>" ones, in document order


def parse(text: str) -> list[Article]:
    """Articles of a WikiText file: " = Title = " starts one, " = = Section = = " lines are
    skipped; sentences holding "<unk>" are dropped."""
    arts: list[Article] = []
    for line in text.splitlines():
        if not line.strip() or _H2.match(line):
            continue
        m = _H1.match(line)
        if m:
            arts.append(Article(detok(m.group(1)), []))
            continue
        if not arts:
            continue
        arts[-1].sentences += [s for s in split_sentences(detok(line)) if "<unk>" not in s]
    return [a for a in arts if len(a.sentences) >= 8]


def articles() -> list[Article]:
    return [a for path in FILES for a in parse(WIKITEXT2.read(path))]


# ---------------------------------------------------------------- perturbations

NUM = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\w,])|(?<![\w.,])\d+(?:\.\d+)?(?![\w])")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
MONTH = re.compile(r"\b(" + "|".join(MONTHS) + r")\b")
ENTITY = re.compile(r"\b[A-Z][a-z]+(?:(?: of| de| the| von| van)? [A-Z][a-z]+)+\b")
_LEAD = re.compile(r"^(?:The|In|On|At|During|After|Before|By|As|A|An|This|It|He|She|They|His|Her|When|While) ")


def _num_kind(x: str) -> str:
    v = x.replace(",", "")
    if re.fullmatch(r"1[0-9]{3}|20[0-9]{2}", v):
        return "year"
    if "." in v:
        return "dec"
    return "small" if float(v) <= 31 else "big"


def article_numbers(sents: list[str]) -> dict[str, list[str]]:
    by: dict[str, set[str]] = {}
    for s in sents:
        for m in NUM.finditer(s):
            by.setdefault(_num_kind(m.group()), set()).add(m.group())
        for m in MONTH.finditer(s):
            by.setdefault("month", set()).add(m.group())
    return {k: sorted(v) for k, v in by.items()}


def swap_number(sent: str, numbers: dict[str, list[str]], rng: random.Random) -> str | None:
    """``sent`` with one number / year / month replaced by another of the same kind from the
    article (``article_numbers``) that ``sent`` does not contain."""
    spots = [(m, _num_kind(m.group())) for m in NUM.finditer(sent)] + [(m, "month") for m in MONTH.finditer(sent)]
    rng.shuffle(spots)
    for m, kind in spots:
        others = [x for x in numbers.get(kind, []) if x != m.group() and x not in sent]
        if others:
            return sent[: m.start()] + rng.choice(others) + sent[m.end():]
    return None


def entities(sent: str) -> list[str]:
    """Capitalised multi-word spans, without a sentence-initial function word ("In May 1940")."""
    out = []
    for m in ENTITY.finditer(sent):
        e = _LEAD.sub("", m.group()) if m.start() == 0 else m.group()
        if " " in e and not MONTH.search(e):
            out.append(e)
    return out


def swap_entity(sent: str, pool: list[str], rng: random.Random, prefer: list[str] = ()) -> str | None:
    """``sent`` with one multi-word name replaced by another name of ``pool`` (the article's),
    taken from ``prefer`` (the premise's) half the time: a wrong attribution word overlap cannot
    see."""
    mine = entities(sent)
    rng.shuffle(mine)
    for e in mine:
        cands = [o for o in (prefer if prefer and rng.random() < 0.5 else pool)
                 if o not in sent and e not in o and o not in e]
        if cands:
            return sent.replace(e, rng.choice(cands), 1)
    return None


PRONOUN = re.compile(r"^(It|He|She) (?=[a-z])")
TYPE_NOUNS = ("album", "song", "single", "film", "game", "ship", "storm", "hurricane", "species", "episode",
              "church", "band", "novel", "station", "building", "series", "team", "club", "battle", "bridge",
              "road", "highway", "route", "cyclone", "castle", "temple", "book", "play", "opera", "video",
              "show", "school", "college", "river", "town", "village", "city", "park", "company", "magazine")
TYPE_SUBJ = re.compile(r"^The (" + "|".join(TYPE_NOUNS) + r") (?=[a-z])")


_CLEFT = re.compile(r"^It (?:is|was) (?:.*\bthat\b|said|believed|thought|known|possible|likely|unclear|not )")


def title_subject(sent: str, title: str) -> str | None:
    """``sent`` with a pronoun or "The <type noun>" subject replaced by the article title."""
    m = PRONOUN.match(sent) or TYPE_SUBJ.match(sent)
    if not m or len(title) > 60 or _CLEFT.match(sent):
        return None
    return title + " " + sent[m.end():]


VERB = re.compile(r" (is|was|are|were|has|had|have|became|received|won|played|made|took|released|"
                  r"served|led|wrote|married|joined|began|returned|moved|died|remained|reached)\b")
_SING, _PLUR = {"is", "was", "has"}, {"are", "were", "have"}


_NP = re.compile(r"^(?:(?:The|A|An) (?:[\w'-]+)(?: [\w'.-]+){0,4}|[A-Z][\w'.-]*(?: (?:of|the|de|[A-Z][\w'.-]*)){0,4})$")
_NOT_NP = re.compile(r"\b(that|which|who|whom|after|before|when|while|said|says|and|or|but|if|because)\b")


def subject(sent: str) -> tuple[str, str] | None:
    """(subject, its verb) when ``sent`` starts with a name or "The ..." noun phrase of 1-5 words
    followed by a listed verb; pronoun and "The <type noun>" subjects are not returned."""
    m = VERB.search(sent)
    if not m or m.start() == 0:
        return None
    subj = sent[: m.start()]
    if not _NP.match(subj) or _NOT_NP.search(subj):
        return None
    if PRONOUN.match(sent) or TYPE_SUBJ.match(sent) or subj.split()[0] in ("It", "He", "She", "They", "This",
                                                                             "These", "There", "In", "On",
                                                                             "After", "During", "Before", "By"):
        return None
    return subj, m.group(1)


def swap_subject(a: str, b: str) -> str | None:
    """``a`` with the subject of ``b`` (agreeing in number when the verb is is/was/...)."""
    sa, sb = subject(a), subject(b)
    if not sa or not sb or sa[0] == sb[0] or sa[0] in sb[0] or sb[0] in sa[0]:
        return None
    if (sa[1] in _SING and sb[1] in _PLUR) or (sa[1] in _PLUR and sb[1] in _SING):
        return None
    if sa[1] in _SING and sb[0].split()[0] in ("The", "A") and sb[0].endswith("s") and not sb[0].endswith("ss"):
        return None  # "The libraries was"
    return sb[0] + a[len(sa[0]):]


_NEG_REMOVE = [(re.compile(r"\b(is|was|are|were|did|does|do|could|would|has|had|have|can) not\b"), r"\1"),
               (re.compile(r"\b(is|was|are|were|did|does|do|could|would|has|had|have)n't\b"), r"\1"),
               (re.compile(r"\bcannot\b"), "can")]
_NEG_ADD = [(" is ", " is not "), (" was ", " was not "), (" are ", " are not "), (" were ", " were not "),
            (" had ", " had not "), (" has ", " has not "), (" can ", " cannot "), (" did ", " did not ")]


def flip_negation(sent: str) -> str | None:
    """A negated sentence made positive ("did not" -> "did"), or a positive one negated ("was" ->
    "was not"); None for a sentence with another negation word (never, no, ...)."""
    for pat, rep in _NEG_REMOVE:
        if pat.search(sent):
            out = pat.sub(rep, sent, count=1)
            return None if re.search(r"\b(not|never|no|nor|neither)\b|n't", out) else out
    if re.search(r"\b(not|never|no|nor|neither|none|without)\b|n't", sent):
        return None
    for a, b in _NEG_ADD:
        if a in sent:
            return sent.replace(a, b, 1)
    return None


_OVERGEN = [(r"\b(usually|often|sometimes|typically|generally|occasionally|frequently|commonly)\b", "always"),
            (r"\b(largely|mostly|mainly|primarily|partly|partially)\b", "completely"),
            (r"(?<!\bthe )(?<!\ba )(?<!\bat least )\b(some|many|several)\b(?= [a-z]+s\b)", "all"),
            (r"\bmost of the\b", "all of the"),
            (r"\b(rarely|seldom)\b", "never")]


def overgeneralize(sent: str, rng: random.Random) -> str | None:
    """A hedge made absolute: "usually" -> "always", "some"/"many"/"most" -> "all", "rarely" ->
    "never" (the hedged original is in the premise, so the absolute claim is unsupported)."""
    cands = [(p, r) for p, r in _OVERGEN if re.search(p, sent, re.I)]
    if not cands:
        return None
    p, r = rng.choice(cands)
    m = re.search(p, sent, re.I)
    rep = r.capitalize() if m.group()[0].isupper() else r
    return sent[: m.start()] + rep + sent[m.end():]


_PAREN = re.compile(r" \([^()]{1,80}\)")
_APPOS = re.compile(r"(?<!\d), ([^,]{3,60}),(?=\s)")
_APPOS_START = re.compile(r"(the|a|an|who|which|known|also|born|then|now|formerly|later|its|his|her|their)\b")
_TRAIL = re.compile(r", (?:which|who|where|when|while|although|though|including|as well as|making|with|"
                    r"after|before|and|but)\b[^,]*[.!?]$")


def compress(sent: str, rng: random.Random) -> str | None:
    """``sent`` with a parenthetical, an appositive (", ... ,", 2-8 words) or a trailing clause
    after a comma removed: a shorter statement the full sentence still supports."""
    opts = []
    for m in _PAREN.finditer(sent):
        opts.append(sent[: m.start()] + sent[m.end():])
    for m in _APPOS.finditer(sent):
        # only an appositive right after a short subject, followed by its verb ("Tomas Reyl, the
        # first mayor, opened ..."): a comma pair later in a sentence often closes a phrase that
        # what follows depends on
        inner, head, nxt = m.group(1), sent[: m.start()], sent[m.end():].split()[:1]
        if 2 <= len(inner.split()) <= 8 and len(head.split()) <= 5 and "," not in head \
                and _APPOS_START.match(inner) and nxt and nxt[0].islower() \
                and nxt[0] not in ("the", "a", "an", "and", "or", "but", "one", "which", "who") \
                and not re.search(r"\b(not|never|no)\b", inner):
            opts.append(head + sent[m.end():])
    m = _TRAIL.search(sent)
    if m:
        opts.append(sent[: m.start()] + sent[-1])
    opts = [o for o in opts if len(o.split()) >= 6 and o != sent and _balanced(o)]
    return rng.choice(opts) if opts else None


def _balanced(s: str) -> bool:
    return s.count('"') % 2 == 0 and s.count("(") == s.count(")")


def prose(s: str) -> bool:
    """A sentence to build statements from: 30-320 characters, ends like a sentence, mostly
    lower-case words (not a list of titles and awards), balanced quotes and brackets."""
    w = s.split()
    return (30 <= len(s) <= 320 and s[-1] in '.!?"' and _balanced(s) and len(w) >= 6
            and sum(x[0].isupper() for x in w) <= 0.4 * len(w))


_REL = re.compile(r"^(It|He|She) (is|was|has|had|became|remains|remained) ")


def lower_first(s: str, vocab: set[str]) -> str:
    """``s`` with its first word lower-cased when the article writes that word lower-case
    mid-sentence ("Tropical activity" -> "tropical activity"; "Manila" stays)."""
    w = s.split(" ", 1)[0]
    return w.lower() + s[len(w):] if w.lower() in vocab or w in ("The", "A", "An", "It", "He", "She", "They",
                                                                   "In", "On", "At", "This", "During") else s


def fuse(a: str, b: str, title: str, rng: random.Random, vocab: set[str] = frozenset()) -> str:
    """Two sentences as one: "a, and b" / "a; b", or "<title>, which/who <b's predicate>, <a's
    predicate>" when ``a`` starts with the title and ``b`` with a pronoun."""
    m = _REL.match(b)
    if m and a.startswith(title + " ") and rng.random() < 0.7:
        rel = "which" if m.group(1) == "It" else "who"
        return f"{title}, {rel} {b[len(m.group(1)) + 1:].rstrip('.!?')}, {a[len(title) + 1:]}"
    return a.rstrip(".!?") + rng.choice([", and ", "; "]) + lower_first(b, vocab)


def words(s: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", s.lower()) if len(w) > 3 or w.isdigit()}


def packed_premise(sents: list[str], hyp: str, need: set[int], ban: set[int], rng: random.Random) -> str | None:
    """The 3-6 sentences of ``sents`` sharing the most words with ``hyp`` (``need`` always in,
    ``ban`` never), in document order, within the premise budget."""
    hw = words(hyp)
    order = sorted((i for i in range(len(sents)) if i not in ban and i not in need),
                   key=lambda i: (-len(words(sents[i]) & hw), i))
    n = rng.randint(3, 6)
    pick = list(need)
    size = sum(len(sents[i]) + 1 for i in pick)
    for i in order:
        if len(pick) >= n:
            break
        if size + len(sents[i]) + 1 > BUDGET[1]:
            continue
        pick.append(i)
        size += len(sents[i]) + 1
    if len(pick) < 3:
        return None
    return " ".join(sents[i] for i in sorted(pick))


# ---------------------------------------------------------------- pairs

def windows(art: Article, rng: random.Random, passes: int = PASSES) -> Iterator[tuple[int, int]]:
    """[i, j) sentence windows of about BUDGET characters: ``passes`` tilings of the article, each
    from a random offset with random sizes (so windows of different passes overlap but differ)."""
    for _ in range(passes):
        yield from _tiling(art, rng)


def _tiling(art: Article, rng: random.Random) -> Iterator[tuple[int, int]]:
    lo, hi = BUDGET
    s = art.sentences
    i = rng.randint(0, 3)
    while i < len(s):
        target, j, size = rng.randint(lo, hi), i, 0
        while j < len(s) and size + len(s[j]) + 1 <= hi and size < target:
            size += len(s[j]) + 1
            j += 1
        if j - i >= 3 and size >= lo:
            yield i, j
        i = max(j, i + 1)


def _hyps(art: Article, i: int, j: int, numbers: dict[str, list[str]], ents: list[str],
          rng: random.Random) -> tuple[list[tuple], list[tuple]]:
    """(positives, negatives) for the window [i, j): tuples (kind, statement, need, ban) with the
    sentence indices the statement's label depends on (``need``) or that must not be in a premise
    (``ban``)."""
    s = art.sentences
    title = art.title.split(" (")[0]  # "Kiss You (One Direction song)" -> "Kiss You"
    vocab = {w for x in s for w in re.findall(r"(?<=\s)[a-z][a-z'-]*", x)}
    idx = [k for k in range(i, j) if prose(s[k])]
    if len(idx) < 3:
        return [], []
    prem = " ".join(s[i:j])
    wents = [e for k in range(i, j) for e in entities(s[k])]
    pos: list[tuple] = []
    neg: list[tuple] = []
    k = rng.choice(idx)
    pos.append(("wiki-copy", s[k], {k}, set()))
    a, b = sorted(rng.sample(idx, 2))
    pos.append(("wiki-fuse", fuse(s[a], s[b], title, rng, vocab), {a, b}, set()))
    for k in rng.sample(idx, len(idx)):
        c = compress(s[k], rng)
        if c:
            pos.append(("wiki-compress", c, {k}, set()))
            break
    if title in prem:
        for k in rng.sample(idx, len(idx)):
            t = title_subject(s[k], title)
            if t:
                pos.append(("wiki-title", t, {k}, set()))
                break
    a, b = sorted(rng.sample(idx, 2))
    ca, cb = compress(s[a], rng) or s[a], compress(s[b], rng) or s[b]
    tail = lower_first(ca, vocab)
    pos.append(("wiki-summary", cb.rstrip(".!?") + rng.choice(["; ", ", and "]) + tail, {a, b}, set()))

    for k in rng.sample(idx, len(idx)):
        t = swap_number(s[k], numbers, rng)
        if t:
            neg.append(("wiki-swap-number", t, {k}, set()))
            break
    for k in rng.sample(idx, len(idx)):
        t = swap_entity(s[k], ents, rng, prefer=wents)
        if t:
            neg.append(("wiki-swap-entity", t, {k}, set()))
            break
    pairs = [(a, b) for a in idx for b in idx if a != b]
    rng.shuffle(pairs)
    for a, b in pairs[:12]:
        t = swap_subject(s[a], s[b])
        if t:
            neg.append(("wiki-swap-subject", t, {a, b}, set()))
            break
    for k in rng.sample(idx, len(idx)):
        t = flip_negation(s[k])
        if t:
            neg.append(("wiki-negation", t, {k}, set()))
            break
    outside = [k for k in range(len(s)) if not i <= k < j and prose(s[k]) and len(s[k]) <= 200]
    if outside:
        pw = words(prem)
        k = rng.choice(idx)
        cands = [o for o in rng.sample(outside, min(20, len(outside)))
                 if len(words(s[o]) - pw) >= max(3, 0.3 * len(words(s[o])))]  # mostly new content
        if cands:  # the outside sentence closest to the premise: the addition looks on-topic
            o = max(cands, key=lambda o: len(words(s[o]) & pw))
            neg.append(("wiki-add", fuse(s[k], s[o], "", rng, vocab), {k}, {o}))
    for k in rng.sample(idx, len(idx)):
        t = overgeneralize(s[k], rng)
        if t:
            neg.append(("wiki-overgen", t, {k}, set()))
            break
    return pos, neg


def generate(arts: list[Article], seed: int = 0, per_window: int = 3, source: str = SOURCE,
             passes: int = PASSES) -> Iterator[dict]:
    """Balanced rows (``per_window`` of each label per window, fewer when a window offers fewer)."""
    rng = random.Random(f"wiki-{seed}")
    for art in arts:
        numbers = article_numbers(art.sentences)
        ents = sorted({e for x in art.sentences for e in entities(x)})
        title = art.title.split(" (")[0]
        for i, j in windows(art, rng, passes):
            pos, neg = _hyps(art, i, j, numbers, ents, rng)
            window = " ".join(art.sentences[i:j])
            neg = [q for q in neg if q[1] not in window and len(q[1]) <= 330]
            pos = [p for p in pos if len(p[1]) <= 330]  # two long sentences fused would be cut at 256 tokens
            rng.shuffle(pos)
            rng.shuffle(neg)
            n = min(per_window, len(pos), len(neg))
            for (kind, hyp, need, ban), y in [*((p, 1) for p in pos[:n]), *((q, 0) for q in neg[:n])]:
                clean, shape = window, "window"
                if rng.random() < PACKED_SHARE:
                    packed = packed_premise(art.sentences, hyp, need, ban, rng)
                    if packed and (y == 1 or hyp not in packed) and (kind != "wiki-title" or title in packed):
                        clean, shape = packed, "packed"
                prem = maybe_noise(clean, seed, NOISE_SHARE)
                r = qa_synth._row(prem, hyp, y, source, "en", kind)
                r["shape"] = shape + ("-noisy" if prem != clean else "")
                if prem != clean:
                    r["premise_clean"] = clean  # build.collect checks the guards on it too
                yield r


def build(seed: int = 0, passes: int = PASSES) -> Iterator[dict]:
    yield from generate(articles(), seed, passes=passes)
