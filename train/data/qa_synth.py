"""RAG-shaped pairs from licensed reading-comprehension passages (JSQuAD, CMRC2018, SQuAD 2.0).

A question and its gold answer span become an answer *statement* that restates the question with
the answer filled in. The question is the annotator's own paraphrase of the passage, so these
positives are reworded, not copied. Premise = the sentence(s) around the answer, or two passages
packed together for the fused cases.

Positives (label 1):
  restate      question restated with the gold answer ("J-CASTニュースを運営する会社は株式会社ジェイ・キャストです。")
  fuse         two restatements from the same premise joined into one sentence
  copy         the answer's sentence itself (a few, so verbatim support stays supported)
  yes          "Yes/はい/是的" + restatement
  no-neg       "No/いいえ/不" + negated restatement with a distractor value, premise holds the gold one
Negatives (label 0), mostly right with one wrong part:
  swap-inpassage   gold answer replaced by another question's answer *from the same passage*
  swap-distractor  gold answer replaced by a same-type answer of another article, which is packed
                   into the premise as a distractor passage
  swap-number      digits of a numeric answer changed
  negation         restatement negated
  fuse-wrong       a right restatement joined with a wrong one
  addition         restatement plus an unsupported clause taken from another article
  overgeneralize   restatement with "always / すべての / 所有" inserted
Data v2 (the "Yes."/"No." particle no longer decides the label): ``neg-plain`` (1) is ``no-neg``
without the particle; ``no-wrong`` (0) "No." + the negated true statement; ``yes-wrong`` (0)
"Yes." + a swapped answer.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

from .sources import CMRC2018, CMRC2018_TRAIN, JAQUAD, JGLUE, SQUAD2_SUBSET, read_json

# JSQuAD valid articles 0-29 are the shared context/answer-relevance sets: never read them here.
JSQUAD_VALID_HELD_OUT_ARTICLES = 30
MAX_PREMISE = 420  # characters for ja/zh; en gets 3x


def _row(p, h, label, source, lang, kind):
    return {"premise": p.strip(), "hypothesis": h.strip(), "label": int(label), "source": source,
            "lang": lang, "kind": kind}


# ---------------------------------------------------------------- sentence split, restatement

_SENT = {"ja": re.compile(r"(?<=[。！？])"), "zh": re.compile(r"(?<=[。！？；])"),
         "en": re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")}


def sentences(text: str, lang: str) -> list[str]:
    return [s.strip() for s in _SENT[lang].split(text) if s.strip()]


def window(text: str, start: int, lang: str, limit: int) -> tuple[str, int]:
    """The sentence holding `start` plus neighbours while under `limit` chars; returns (text, offset)."""
    sents, pos, spans = sentences(text, lang), 0, []
    for s in sents:
        i = text.find(s, pos)
        spans.append((i, i + len(s)))
        pos = i + len(s)
    k = next((j for j, (a, b) in enumerate(spans) if a <= start < b), None)
    if k is None:
        return "", 0
    lo = hi = k
    while True:
        grew = False
        for nlo, nhi in ((lo - 1, hi), (lo, hi + 1)):
            if 0 <= nlo and nhi < len(spans) and spans[nhi][1] - spans[nlo][0] <= limit:
                lo, hi, grew = nlo, nhi, True
        if not grew:
            break
    a, b = spans[lo][0], spans[hi][1]
    return text[a:b], a


JA_WH = re.compile(r"(何年|何月|何日|何人|何歳|何回|何個|何本|何色|何語|何という(?:名前|名称|会社|人物|曲|作品)?|何|どこの国|どこ|誰|だれ|いつ|いくつ|どれ|どの(?:国|市|町|村|県|都市|会社|人物|大学|チーム|地域|時代)?|どんな|どのくらい|どれくらい)")
ZH_WH = re.compile(r"(哪一年|哪年|哪个(?:国家|城市|公司)?|哪些|哪位|哪里|哪儿|哪几种|哪国|哪家|哪种|什么|谁|多少|几[个年月日天次位名种条]|何时|何地|何处)")


def restate_ja(q: str, a: str) -> str | None:
    q = q.strip().rstrip("？?。 ")
    if q.endswith("は") or q.endswith("とは"):
        return f"{q}{a}です。"
    for end in ("は何", "はどこ", "は誰", "はいつ", "はだれ", "は何か", "は何でしょう", "は何ですか", "はどこですか",
                "は誰ですか", "はいつですか", "は何という"):
        if q.endswith(end):
            return f"{q[: -len(end)]}は{a}です。"
    if len(a) > 25 or re.search(r"なぜ|どうして|どのように|どうやって", q):
        return None
    m = list(JA_WH.finditer(q))
    if len(m) == 1:
        s = q[: m[0].start()] + a + _unit_tail(a, q[m[0].end():])
        s = re.sub(r"(か|ですか|でしょうか|ますか)$", "", s)
        if s.endswith(("た", "る", "い", "だ", "す")):
            return s + "。"
        return s + "です。"
    return None


def restate_zh(q: str, a: str) -> str | None:
    q = q.strip().rstrip("？?。 ")
    q = re.sub(r"(呢|吗)$", "", q)
    if len(a) > 25 or re.search(r"为什么|为何|怎么|怎样|如何|什么样", q):
        return None
    m = list(ZH_WH.finditer(q))
    if len(m) == 1:
        return q[: m[0].start()] + a + _unit_tail(a, q[m[0].end():]) + "。"
    return None


def _unit_tail(a: str, rest: str) -> str:
    """The question's text after the wh-word, minus a unit the answer already ends with
    ("上位何パーセント" + "15パーセント" -> no second パーセント)."""
    for k in range(min(len(rest), 6), 1, -1):
        if a.endswith(rest[:k]):
            return rest[k:]
    return rest


EN_SUBJ_VERB = re.compile(r"^(who|what|which \w+)\s+(is|was|are|were|has|had|became|led|founded|created|"
                          r"invented|built|wrote|won|discovered|owns|controls|ruled|developed|\w+ed|\w+s)\b(.*)$",
                          re.I)


def restate_en(q: str, a: str) -> str | None:
    q = q.strip().rstrip("?. ")
    m = EN_SUBJ_VERB.match(q)
    if m and m.group(2).lower() not in ("does", "did", "was" if m.group(3).strip().split()[-1:] in (["named"],) else "_"):
        s = f"{a} {m.group(2)}{m.group(3)}."
        return s[0].upper() + s[1:]
    m = re.match(r"^(when|where|in what year|in which year|what year)\s+(was|were|did|is)\s+(.+)$", q, re.I)
    if m and m.group(2).lower() in ("was", "were", "is"):
        prep = "in" if "year" in m.group(1).lower() or m.group(1).lower() == "when" else "in"
        s = f"{m.group(3)} {m.group(2)} {prep} {a}." if m.group(1).lower() != "where" else f"{m.group(3)} {m.group(2)} in {a}."
        return s[0].upper() + s[1:]
    m = re.match(r"^how many (\w+) (were|are|did|does|do|was|is) (.+)$", q, re.I)
    if m and m.group(2).lower() in ("were", "are", "was", "is"):
        s = f"There {m.group(2)} {a} {m.group(1)} {m.group(3)}."
        return s[0].upper() + s[1:]
    return None


RESTATE = {"ja": restate_ja, "zh": restate_zh, "en": restate_en}


def fallback_statement(q: str, a: str, lang: str, rng: random.Random) -> str:
    q = q.strip()
    if lang == "ja":
        return rng.choice([f"{q} {a}です。", f"「{q}」の答えは{a}です。", f"{q}――{a}。"])
    if lang == "zh":
        return rng.choice([f"{q}{a}。", f"关于“{q}”，答案是{a}。", f"{q} 答：{a}。"])
    return rng.choice([f"{q} {a}.", f"The answer to \"{q}\" is {a}.", f"{q} It is {a}."])


# ---------------------------------------------------------------- perturbations

NEG = {
    "ja": [("です。", "ではありません。"), ("した。", "しなかった。"), ("ある。", "ない。"), ("る。", "らない。"),
           ("た。", "なかった。")],
    "zh": [("是", "不是"), ("有", "没有"), ("在", "不在"), ("会", "不会"), ("能", "不能")],
    "en": [(" is ", " is not "), (" was ", " was not "), (" are ", " are not "), (" were ", " were not "),
           (" has ", " does not have "), (" can ", " cannot ")],
}


def negate(s: str, lang: str) -> str | None:
    for a, b in NEG[lang]:
        if lang == "ja" and s.endswith(a):
            return s[: -len(a)] + b
        if lang != "ja" and a in s:
            return s.replace(a, b, 1)
    return None


OVERGEN = {
    "ja": [("", "いつでも"), ("", "例外なく"), ("", "すべての場合に")],
    "zh": [("", "所有情况下"), ("", "一直"), ("", "无一例外地")],
    "en": [("", "Always, "), ("", "In every case, "), ("", "Without exception, ")],
}


def overgeneralize(s: str, lang: str, rng: random.Random) -> str:
    _, pre = rng.choice(OVERGEN[lang])
    if lang == "en":
        return pre + s[0].lower() + s[1:]
    if lang == "ja":
        return pre + "、" + s
    return pre + "，" + s


CONJ = {"ja": ["。また、", "。さらに、", "。なお、"], "zh": ["；此外，", "，而且", "。另外，"], "en": ["; also, ", ", and ", ". In addition, "]}


def join(a: str, b: str, lang: str, rng: random.Random) -> str:
    c = rng.choice(CONJ[lang])
    a = a.rstrip("。.；;")
    if lang == "en" and not c.startswith("."):
        b = b[0].lower() + b[1:] if b[:2] != b[:2].upper() else b
    return a + c + b


YES = {"ja": ["はい。", "はい、"], "zh": ["是的。", "对，"], "en": ["Yes. ", "Yes, "]}
NO = {"ja": ["いいえ。", "いいえ、"], "zh": ["不是。", "不，"], "en": ["No. ", "No, "]}

DIGIT = re.compile(r"\d+")


def swap_number(a: str, rng: random.Random) -> str | None:
    m = list(DIGIT.finditer(a))
    if not m:
        return None
    x = rng.choice(m)
    v = int(x.group())
    nv = v + rng.choice([-3, -2, -1, 1, 2, 5, 10]) if v > 12 else v + rng.choice([1, 2, 3])
    if nv <= 0 or nv == v:
        nv = v + 1
    return a[: x.start()] + str(nv) + a[x.end():]


def _kind_of(a: str) -> str:
    """Answers are swapped only for answers of the same kind: numbers for numbers, short names for
    short names; long answers (clauses) are never swapped."""
    n = len(a.split()) if re.search(r"[A-Za-z]", a) and " " in a else len(a) / 4
    if n > 6 or len(a) > 30:
        return "long"
    if DIGIT.search(a):
        return "num"
    return "short" if n <= 1.5 else "mid"


# ---------------------------------------------------------------- passages

def squad_items(doc: dict, lang: str, source: str, skip_articles: int = 0) -> list[dict]:
    items = []
    for ai, art in enumerate(doc["data"]):
        if ai < skip_articles:
            continue
        for pi, para in enumerate(art["paragraphs"]):
            ctx = para["context"]
            if lang == "ja" and " [SEP] " in ctx:
                title, ctx0 = ctx.split(" [SEP] ", 1)
                off = len(title) + len(" [SEP] ")
            else:
                ctx0, off = ctx, 0
            qas = []
            for qa in para["qas"]:
                if qa.get("is_impossible") or not qa.get("answers"):
                    continue
                ans = qa["answers"][0]
                st = ans["answer_start"] - off
                if st < 0 or ctx0[st: st + len(ans["text"])] != ans["text"]:
                    st = ctx0.find(ans["text"])
                    if st < 0:
                        continue
                a = ans["text"].strip().rstrip("。．.，,、；;")
                if a:
                    qas.append({"q": qa["question"], "a": a, "start": st})
            if qas:
                items.append({"article": f"{source}:{ai}", "para": f"{source}:{ai}:{pi}", "context": ctx0,
                              "qas": qas})
    return items


def jsquad_items() -> list[dict]:
    out = squad_items(read_json(JGLUE, "datasets/jsquad-v1.3/test-v1.3.json"), "ja", "jsquad_test")
    out += squad_items(read_json(JGLUE, "datasets/jsquad-v1.3/valid-v1.3.json"), "ja", "jsquad_valid",
                       skip_articles=JSQUAD_VALID_HELD_OUT_ARTICLES)
    return out


def cmrc_items() -> list[dict]:
    out = squad_items(read_json(CMRC2018, "squad-style-data/cmrc2018_dev.json"), "zh", "cmrc2018_dev")
    out += squad_items(read_json(CMRC2018, "squad-style-data/cmrc2018_trial.json"), "zh", "cmrc2018_trial")
    return out


def cmrc_train_items() -> list[dict]:
    """CMRC 2018 train (data v6): the file the ymcui/cmrc2018 snapshot lacks, from a byte-identical
    copy inside another repository's tar.gz."""
    import io
    import json
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(CMRC2018_TRAIN.read_bytes("data/cmrc2018.tar.gz"))) as t:
        f = t.extractfile("cmrc2018/cmrc2018_train.json")
        assert f is not None
        doc = json.loads(f.read().decode("utf-8"))
    return squad_items(doc, "zh", "cmrc2018_train")


def jsquad_held_out_titles() -> set[str]:
    """Titles of the JSQuAD valid articles the shared evaluation sets use (0-29)."""
    doc = read_json(JGLUE, "datasets/jsquad-v1.3/valid-v1.3.json")
    return {a["title"].replace("_", " ") for a in doc["data"][:JSQUAD_VALID_HELD_OUT_ARTICLES]}


def jaquad_items() -> list[dict]:
    """JaQuAD train (30 files) + dev (4), data v6: Japanese Wikipedia like JSQuAD, so an article
    with the title of a held-out JSQuAD valid article is skipped (the 27-character guard of the
    build drops any other overlap)."""
    held = jsquad_held_out_titles()
    out: list[dict] = []
    for split, n in (("train", 30), ("dev", 4)):
        for k in range(n):
            doc = read_json(JAQUAD, f"data/{split}/jaquad_{split}_{k:04d}.json")
            doc = {"data": [a for a in doc["data"] if a["title"].replace("_", " ") not in held]}
            out += squad_items(doc, "ja", f"jaquad_{split}{k}")
    return out


def squad2_items() -> list[dict]:
    return squad_items(read_json(SQUAD2_SUBSET, "dev-v1.1.json"), "en", "squad2_dev_excerpt")


# ---------------------------------------------------------------- generation

def generate(items: list[dict], lang: str, source: str, seed: int = 0, per_q: int = 2) -> Iterator[dict]:
    """Premise/statement rows from extractive QA ``items``: for each question, up to ``per_q``
    supported statements (the answer restated, fused with another, copied, after a yes) and as
    many unsupported ones (the answer swapped, a number changed, negated, a clause added,
    overgeneralized), each with its premise window.

    Long because: the sentence and answer pools built at the top are shared by every kind of
    pair the loop writes.
    """
    rng = random.Random(seed)
    limit = MAX_PREMISE * (3 if lang == "en" else 1)
    by_kind: dict[str, list[tuple[str, str]]] = {"num": [], "short": [], "mid": [], "long": []}
    sents_of_article: dict[str, list[str]] = {}
    all_sents: list[tuple[str, str]] = []
    for it in items:
        for qa in it["qas"]:
            by_kind[_kind_of(qa["a"])].append((it["article"], qa["a"]))
        for s in sentences(it["context"], lang):
            if 15 <= len(s) <= 120 * (3 if lang == "en" else 1):
                all_sents.append((it["article"], s))
                sents_of_article.setdefault(it["article"], []).append(s)

    def other_answer(article: str, a: str) -> tuple[str, str] | None:
        if _kind_of(a) == "long":
            return None
        pool = by_kind[_kind_of(a)]
        for _ in range(8):
            art, b = rng.choice(pool)
            if art != article and b != a and a not in b and b not in a:
                return art, b
        return None

    para_of_answer: dict[tuple[str, str], tuple[str, int]] = {}
    for it in items:
        for qa in it["qas"]:
            para_of_answer.setdefault((it["article"], qa["a"]), (it["context"], qa["start"]))

    for it in items:
        ctx, art = it["context"], it["article"]
        for qi, qa in enumerate(it["qas"]):
            q, a, st = qa["q"], qa["a"], qa["start"]
            prem, off = window(ctx, st, lang, limit)
            if not prem or a not in prem:
                continue
            stmt = RESTATE[lang](q, a)
            templated = stmt is not None
            if stmt is None:
                stmt = fallback_statement(q, a, lang, rng)
            if a not in stmt:
                continue
            # ---- positives
            pos = [("restate" if templated else "restate-qa", stmt)]
            others = [o for o in it["qas"] if o["a"] != a and o["a"] not in a and a not in o["a"]]
            if others:
                o = rng.choice(others)
                p2, _ = window(ctx, o["start"], lang, limit)
                s2 = RESTATE[lang](o["q"], o["a"]) or None
                if s2 and o["a"] in p2:
                    fused_prem = prem if o["a"] in prem else (prem + (" " if lang == "en" else "") + p2)
                    if len(fused_prem) <= 2 * limit:
                        pos.append(("fuse", join(stmt, s2, lang, rng), fused_prem))
            r = rng.random()
            if r < 0.15:
                sent = next((s for s in sentences(prem, lang) if a in s), None)
                if sent:
                    pos.append(("copy", sent))
            elif r < 0.35:
                pos.append(("yes", rng.choice(YES[lang]) + stmt))
            elif r < 0.55:
                oa = other_answer(art, a)
                if oa:
                    wrong = stmt.replace(a, oa[1], 1)
                    n = negate(wrong, lang)
                    if n:  # v2: half without the particle, so "No." alone does not mean supported
                        pos.append(("no-neg", rng.choice(NO[lang]) + n) if rng.random() < 0.5
                                   else ("neg-plain", n))
            # ---- negatives
            neg = []
            inpass = [o["a"] for o in it["qas"] if o["a"] != a and o["a"] not in a and a not in o["a"]
                      and _kind_of(o["a"]) == _kind_of(a) != "long" and o["a"] in prem]
            if inpass:
                neg.append(("swap-inpassage", stmt.replace(a, rng.choice(inpass), 1), prem))
            oa = other_answer(art, a)
            if oa:
                octx, ost = para_of_answer[oa]
                dp, _ = window(octx, ost, lang, limit // 2 if lang != "en" else limit)
                if dp and oa[1] in dp and len(dp) < limit:
                    packed = [prem, dp]
                    rng.shuffle(packed)
                    neg.append(("swap-distractor", stmt.replace(a, oa[1], 1), (" " if lang == "en" else "\n").join(packed)))
            sn = swap_number(a, rng)
            if sn and sn not in prem:
                neg.append(("swap-number", stmt.replace(a, sn, 1), prem))
            n = negate(stmt, lang)
            if n:
                neg.append(("negation", n, prem))
                if rng.random() < 0.5:  # v2: a particle before a false statement
                    neg.append(("no-wrong", rng.choice(NO[lang]) + n, prem))
            if oa and rng.random() < 0.5:
                neg.append(("yes-wrong", rng.choice(YES[lang]) + stmt.replace(a, oa[1], 1), prem))
            if len(pos) > 1 and pos[1][0] == "fuse" and oa:
                fp = pos[1][2]
                bad = rng.choice(["first", "second"])
                if bad == "first":
                    s2 = pos[1][1]
                    neg.append(("fuse-wrong", s2.replace(a, oa[1], 1), fp))
            # the added clause comes from the same article, outside the premise: on topic, unsupported
            same = [x for x in sents_of_article.get(art, []) if x not in prem and x not in ctx[max(0, off - 200): off + len(prem) + 200]]
            extra = rng.choice(same) if same else None
            if extra and not re.match(r"^(また|なお|さらに|此外|另外|而且|Also|In addition)", extra):
                neg.append(("addition", join(stmt, extra, lang, rng), prem))
            neg.append(("overgeneralize", overgeneralize(stmt, lang, rng), prem))

            rng.shuffle(neg)
            npos = min(len(pos), per_q)
            chosen_pos = [pos[0]] + rng.sample(pos[1:], k=min(len(pos) - 1, npos - 1))
            # overgeneralize is the weakest negative: use it only when nothing else is there
            neg_sorted = [x for x in neg if x[0] != "overgeneralize"] + [x for x in neg if x[0] == "overgeneralize"]
            chosen_neg = neg_sorted[: len(chosen_pos)]
            if rng.random() < 0.08 and neg_sorted[-1][0] == "overgeneralize" and neg_sorted[-1] not in chosen_neg:
                chosen_neg[-1] = neg_sorted[-1]
            for p in chosen_pos:
                yield _row(p[2] if len(p) > 2 else prem, p[1], 1, source, lang, p[0])
            for kind, h, pm in chosen_neg:
                yield _row(pm, h, 0, source, lang, kind)


def build_more(lang: str, seed: int = 0) -> Iterator[dict]:
    """Data v6 (``build --more-sources``): the same pairs from JaQuAD (ja) and CMRC 2018 train
    (zh); English has no new passages."""
    if lang == "ja":
        yield from generate(jaquad_items(), "ja", "synth_jaquad", seed)
    elif lang == "zh":
        yield from generate(cmrc_train_items(), "zh", "synth_cmrc2018_train", seed, per_q=3)


def build(lang: str, seed: int = 0) -> Iterator[dict]:
    if lang == "ja":
        yield from generate(jsquad_items(), "ja", "synth_jsquad", seed)
    elif lang == "zh":
        yield from generate(cmrc_items(), "zh", "synth_cmrc2018", seed, per_q=3)
    else:
        yield from generate(squad2_items(), "en", "synth_squad2", seed, per_q=3)
