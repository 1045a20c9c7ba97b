"""The faithfulness training-data builders (train/data) and the hand-written dev set (bench/data).

Only the pure parts run here: the builders' source snapshots live outside the repository."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from train.data import build, continuation, long_synth, polarity, qa_synth, templates

REPO = Path(__file__).resolve().parents[2]
DEV = REPO / "bench" / "data" / "faithfulness_rag_handwritten.jsonl"
KINDS = {"restate", "reword", "fuse", "no-answer", "terse", "swap-distractor", "swap-value", "negation",
         "attribution", "overgeneralize", "addition"}


def test_restatements_fill_the_question_with_the_answer():
    assert qa_synth.restate_ja("クリミア戦争が開戦したのはいつか。", "1853年10月") == "クリミア戦争が開戦したのは1853年10月です。"
    assert qa_synth.restate_ja("高校生の上位何パーセント？", "15パーセント") == "高校生の上位15パーセントです。"
    assert qa_synth.restate_zh("布鲁塞尔协定主要是为了抵御哪个国家？", "德国") == "布鲁塞尔协定主要是为了抵御德国。"
    assert qa_synth.restate_zh("成都道为什么繁盛？", "因为海岸线") is None
    assert qa_synth.restate_en("Who led the Normans?", "Rollo") == "Rollo led the Normans."


def test_negation_and_number_swap_change_one_thing():
    assert qa_synth.negate("首都は東京です。", "ja") == "首都は東京ではありません。"
    assert qa_synth.negate("The capital is Paris.", "en") == "The capital is not Paris."
    import random
    swapped = qa_synth.swap_number("1853年", random.Random(0))
    assert swapped != "1853年" and swapped.endswith("年")


def test_templates_are_balanced_and_well_formed():
    for lang in ("en", "ja", "zh"):
        rows = list(templates.build(lang, 400, seed=1))
        labels = Counter(r["label"] for r in rows)
        assert abs(labels[1] - labels[0]) <= 0.1 * len(rows)
        assert all(set(r) >= {"premise", "hypothesis", "label", "source", "lang"} and r["lang"] == lang
                   for r in rows)
        # a faithful reworded answer is not the context's own sentence
        rew = [r for r in rows if r["kind"] == "reword"]
        assert rew and all(r["hypothesis"] not in r["premise"] for r in rew)


def test_rows_overlapping_the_dev_set_are_caught():
    dev = build.dev_shingles()
    row = json.loads(DEV.read_text(encoding="utf-8").splitlines()[0])
    assert build.touches_dev({"premise": row["contexts"][0], "hypothesis": "x"}, dev)
    assert not build.touches_dev({"premise": "The museum opens at 9:00 a.m. on weekdays.", "hypothesis": "x"}, dev)
    # the paraphrase probe (bench/paraphrase_probe.py) is guarded too: statements and premises
    probe = [json.loads(line) for line in (DEV.parent / "paraphrase_probe.jsonl").read_text(
        encoding="utf-8").splitlines()]
    for it in probe:
        for k in build.PROBE_FIELDS:
            if len(it[k]) >= 28:
                assert build.touches_dev({"premise": "x", "hypothesis": it[k]}, dev), (it["id"], k)


def test_handwritten_dev_set_shape():
    rows = [json.loads(x) for x in DEV.read_text(encoding="utf-8").splitlines() if x.strip()]
    assert len(rows) >= 150 and len({r["id"] for r in rows}) == len(rows)
    per = Counter(r["lang"] for r in rows)
    assert min(per[lang] for lang in ("en", "ja", "zh")) >= 50
    faithful = sum(r["label"]["faithful"] for r in rows)
    assert 0.4 <= faithful / len(rows) <= 0.6
    for r in rows:
        assert 2 <= len(r["contexts"]) <= 5 and r["question"] and r["answer"]
        assert r["kind"] in KINDS and r["label"]["faithful"] in (0, 1)
    answers = {r["answer"] for r in rows}
    # the three examples of issue 22
    assert "No. The Basic plan only includes email support; phone support comes with the Business plan." in answers
    assert "未使用であれば、商品到着後14日以内に返品できます。" in answers
    assert "会员卡从开卡那天起有效期为两年，到期前一个月可以在网上续期。" in answers


def test_yes_no_particles_do_not_decide_the_label():
    # v1 had "No." + statement only as a positive: the model learnt "No, <anything>" = supported
    for lang, no in (("en", "No. "), ("ja", "いいえ。"), ("zh", "不是。")):
        rows = list(templates.build(lang, 3000, seed=2))
        assert {r["label"] for r in rows if r["hypothesis"].startswith(no)} == {0, 1}
        plain = [r for r in rows if r["kind"] == "neg-plain"]
        assert plain and all(r["label"] == 1 and not r["hypothesis"].startswith(no) for r in plain)


def test_no_negative_statement_positives_for_threshold_values():
    # "Unused books cannot be returned within 15 days" is not supported by a 14-day window
    rows = list(templates.build("en", 3000, seed=3))
    neg_pos = [r["hypothesis"] for r in rows if r["kind"] in ("no-neg", "neg-plain")]
    assert neg_pos
    assert not [h for h in neg_pos if "returned" in h or "users" in h or "paid leave" in h]
    assert {"returns", "seats", "leave"} == set(templates.THRESHOLD_FRAMES)


def _items():
    ctx = ("The Halden Robotics plant opened in Boston in 1987. It employs 420 people. "
           "The plant does not build cars. Its main product is a welding arm called the K7. "
           "A second line was added in Denver in 1999. The company is run by Mara Quill. "
           "Exports go mainly to Canada and Mexico. Sales reached 80 million dollars in 2020. "
           "The founder, Ivo Halden, was born in Lyon. He trained as an engineer in Munich. "
           "Before founding the company he worked for a shipyard for eleven years. "
           "The first welding arm was sold to a bridge builder in the north of the country. "
           "Today the plant runs three shifts and trains apprentices from the local college. ")
    qas = [{"q": "Where did the plant open?", "a": "Boston"}, {"q": "Where was the second line added?", "a": "Denver"},
           {"q": "When did the plant open?", "a": "1987"}, {"q": "When was the second line added?", "a": "1999"},
           {"q": "Who runs the company?", "a": "Mara Quill"}, {"q": "Where was the founder born?", "a": "Lyon"}]
    for q in qas:
        q["start"] = ctx.find(q["a"])
    return [{"article": "a:0", "para": "a:0:0", "context": ctx, "qas": qas}]


def test_long_premise_pairs_point_at_one_sentence_of_a_long_passage():
    rows = []
    for seed in range(40):
        rows += list(long_synth.generate(_items(), "en", "long_test", seed=seed, per_passage=4))
    kinds = Counter((r["kind"], r["label"]) for r in rows)
    assert kinds[("long-copy", 1)] and kinds[("long-swap", 0)] and kinds[("long-restate", 1)]
    assert Counter(r["label"] for r in rows)[0] == Counter(r["label"] for r in rows)[1]
    for r in rows:
        assert len(r["premise"]) >= 0.7 * long_synth.BUDGET["en"][0]
        if r["kind"] == "long-copy":
            assert r["hypothesis"] in r["premise"]
        if r["label"] == 0:
            assert r["hypothesis"] not in r["premise"]
        if r["kind"] == "long-swap":  # the wrong value is one the passage names elsewhere
            assert any(a in r["hypothesis"] for a in ("Boston", "Denver", "1987", "1999", "Lyon"))
    assert long_synth.negate("東京は首都です。", "ja") == "東京は首都ではありません。"
    assert long_synth.negate("彼は東京に行っなかった。", "ja") is None


def test_packed_premises_keep_the_pair_and_add_unrelated_premises():
    pairs = [("A man rides a red bicycle.", "A person is cycling.", "entailment"),
             ("A man rides a red bicycle.", "A woman sleeps.", "contradiction")]
    pairs += [(f"Two children build sandcastle number {i} near water.", "x", "neutral") for i in range(60)]
    pairs += [(f"A chef slices onions for dish {i} in a kitchen.", "y", "neutral") for i in range(60)]
    rows = [r for r in long_synth.pack(pairs, "en", "pack_test", 122) if r["hypothesis"] in
            ("A person is cycling.", "A woman sleeps.")]
    assert {(r["hypothesis"], r["label"]) for r in rows} == {("A person is cycling.", 1), ("A woman sleeps.", 0)}
    for r in rows:
        assert "A man rides a red bicycle." in r["premise"] and len(r["premise"]) >= 0.7 * long_synth.BUDGET["en"][0]


def test_rows_overlapping_the_shared_evaluation_sets_are_caught(tmp_path):
    (tmp_path / "faithfulness_halueval.jsonl").write_text(json.dumps(
        {"contexts": ["Arthur's Magazine (1844-1846) was an American literary periodical."],
         "answer": "Arthur's Magazine"}) + "\n")
    ev = build.eval_shingles(tmp_path)
    assert build.touches_eval({"premise": "It says Arthur's Magazine (1844-1846) was an American literary "
                                          "periodical, they say.", "hypothesis": "x"}, ev)
    assert not build.touches_eval({"premise": "The museum opens at 9:00 a.m. on weekdays.",
                                   "hypothesis": "x"}, ev)
    assert not build.touches_eval({"premise": "anything", "hypothesis": "x"}, build.eval_shingles(tmp_path / "none"))


# ---------------------------------------------------------------- data v3: WikiText-2 pairs

WIKI = """
 = Port Avel =

 Port Avel is a harbour town on the north coast of Veria , with a population of 12 @,@ 400 in 2011 . The harbour was built in 1834 by the Avel Shipping Company , which also owned the first railway . It is usually busy in summer , and most fishing boats leave before dawn .

 = = History = =

 In 1902 , Mara Quill founded the Port Avel Museum ( the oldest in the region ) near the Old Bridge . The museum was not damaged in the flood of 1953 . Tomas Reyl , the first mayor , opened the North Library in 1921 . The library has 40 @,@ 000 books and a reading room . Some visitors come from Lake Orun , a resort to the south , by ferry . The ferry was introduced in 1965 and runs twice a day . A <unk> statue stands in the square .
 The town hall was completed in 1899 , while the church dates from 1750 . Fishing remains the main industry of the town , although tourism has grown since 1990 .
"""


def _wiki():
    from train.data import wiki_synth

    return wiki_synth, wiki_synth.parse(WIKI)


def test_wikitext_detokenizer_and_parser():
    from train.data import wiki_synth

    assert wiki_synth.detok("a mass of 6 @,@ 000 kg ( 13 lb ) , 0 @.@ 7 m and red @-@ tipped ; "
                            "Du Fu 's poems , he didn 't say \" hi \" .") == \
        "a mass of 6,000 kg (13 lb), 0.7 m and red-tipped; Du Fu's poems, he didn't say \"hi\"."
    ws, arts = _wiki()
    assert [a.title for a in arts] == ["Port Avel"]
    sents = arts[0].sentences
    assert sents[0] == "Port Avel is a harbour town on the north coast of Veria, with a population of 12,400 in 2011."
    assert not any("<unk>" in s or "History" in s for s in sents)
    assert ws.split_sentences("He met J. Smith in St. Louis. They left.") == ["He met J. Smith in St. Louis.", "They left."]


def test_wikitext_perturbations_change_exactly_one_part():
    import random

    ws, arts = _wiki()
    s = arts[0].sentences
    rng = random.Random(0)
    nums = ws.article_numbers(s)
    sent = "The harbour was built in 1834 by the Avel Shipping Company, which also owned the first railway."
    for seed in range(20):  # the new year is another year of the article, never an invented one
        out = ws.swap_number(sent, nums, random.Random(seed))
        year = out.split("built in ")[1][:4]
        assert year != "1834" and year in nums["year"] and out.replace(year, "1834", 1) == sent
    ents = sorted({e for x in s for e in ws.entities(x)})
    assert {"Mara Quill", "Tomas Reyl", "Lake Orun", "Old Bridge"} <= set(ents)
    sw = ws.swap_entity("In 1902, Mara Quill founded the Port Avel Museum near the Old Bridge.", ents, rng)
    assert sw and sw != "In 1902, Mara Quill founded the Port Avel Museum near the Old Bridge."
    assert any(e in sw for e in ents if e not in ("Mara Quill", "Port Avel Museum", "Old Bridge"))
    assert ws.swap_subject("The library has 40,000 books and a reading room.",
                           "Tomas Reyl, the first mayor, opened the North Library in 1921.") is None  # no NP subject
    assert ws.swap_subject("The ferry was introduced in 1965 and runs twice a day.",
                           "The museum was not damaged in the flood of 1953.") == \
        "The museum was introduced in 1965 and runs twice a day."
    assert ws.flip_negation("The museum was not damaged in the flood of 1953.") == "The museum was damaged in the flood of 1953."
    assert ws.flip_negation("The ferry was introduced in 1965.") == "The ferry was not introduced in 1965."
    assert ws.flip_negation("It never was not there.") is None
    assert ws.overgeneralize("It is usually busy in summer.", rng) == "It is always busy in summer."
    assert ws.overgeneralize("Some visitors come from Lake Orun.", rng) == "All visitors come from Lake Orun."
    assert ws.overgeneralize("It is the most visited town.", rng) is None
    assert ws.compress("In 1902, Mara Quill founded the Port Avel Museum (the oldest in the region) near the Old Bridge.",
                       rng) == "In 1902, Mara Quill founded the Port Avel Museum near the Old Bridge."
    assert ws.compress("Tomas Reyl, the first mayor, opened the North Library in 1921.", rng) == \
        "Tomas Reyl opened the North Library in 1921."
    assert ws.compress("The town hall was completed in 1899, while the church dates from 1750.", rng) == \
        "The town hall was completed in 1899."
    assert ws.title_subject("It is usually busy in summer.", "Port Avel") == "Port Avel is usually busy in summer."
    assert ws.title_subject("It was in 1902 that the museum opened.", "Port Avel") is None
    assert ws.fuse("Port Avel is a harbour town.", "It is usually busy in summer.", "Port Avel", random.Random(1)) in (
        "Port Avel, which is usually busy in summer, is a harbour town.",
        "Port Avel is a harbour town, and it is usually busy in summer.", "Port Avel is a harbour town; it is usually busy in summer.")


def test_wikitext_rows_are_balanced_and_negatives_are_not_in_the_premise():
    from train.data import noise

    ws, arts = _wiki()
    old = ws.BUDGET
    ws.BUDGET = (200, 420)  # the tiny article is shorter than a real window
    try:
        rows = [r for seed in range(15) for r in ws.generate(arts, seed=seed)]
    finally:
        ws.BUDGET = old
    assert rows and Counter(r["label"] for r in rows)[0] == Counter(r["label"] for r in rows)[1]
    kinds = {r["kind"] for r in rows}
    assert {"wiki-copy", "wiki-fuse", "wiki-swap-number", "wiki-swap-entity", "wiki-negation", "wiki-add"} <= kinds
    shapes = Counter(r["shape"] for r in rows)
    assert shapes["window"] and shapes["packed"] and (shapes["window-noisy"] + shapes["packed-noisy"])
    for r in rows:
        clean = r.get("premise_clean", r["premise"])
        assert "<unk>" not in r["premise"] + r["hypothesis"]
        if r["label"] == 0:
            assert r["hypothesis"] not in clean
        if r["kind"] == "wiki-copy":
            assert r["hypothesis"] in clean
        if r["shape"].startswith("packed"):
            assert 3 <= len(ws.split_sentences(clean)) <= 6
        if r["kind"] == "wiki-add":  # the added half is a sentence of the article the premise lacks
            assert any(x not in clean and x.rstrip(".")[1:] in r["hypothesis"] for x in arts[0].sentences)
    assert noise.spaced_thousands("12,400 people") == "12, 400 people"
    assert noise.space_punct('the diet (evening primrose), he said.') == "the diet ( evening primrose ) , he said ."
    assert noise.tex_quotes('he said "the cleaner your diet" today') == "he said `` the cleaner your diet '' today"
    assert noise.lower_names("Sarah Flower said. He met Mara Quill.") == "Sarah flower said. He met mara quill."


def test_polarity_pairs_let_no_cue_decide_the_label():
    """Neither the opposite state's words, nor "not", nor a "Yes,"/"No," decides the label."""
    for lang in ("en", "ja", "zh"):
        rows = list(polarity.build(lang, 1500, seed=3))
        labels = Counter(r["label"] for r in rows)
        assert abs(labels[1] - labels[0]) <= 0.1 * len(rows)
        kinds = {r["kind"]: r["label"] for r in rows}
        assert kinds == {"pol-same": 1, "pol-not-opposite": 1, "pol-yes": 1, "pol-no": 1,
                         "pol-opposite": 0, "pol-not-same": 0, "pol-other": 0,
                         "pol-yes-wrong": 0, "pol-no-wrong": 0}
        yes, no = polarity.YES[lang], polarity.NO[lang]
        assert {r["label"] for r in rows if r["hypothesis"].startswith(yes)} == {0, 1}
        assert {r["label"] for r in rows if r["hypothesis"].startswith(no)} == {0, 1}
        for r in rows:
            # the premise holds two entities' opposite states; a hypothesis is never copied
            assert r["hypothesis"] not in r["premise"]
            assert r["hypothesis"].removeprefix(yes).removeprefix(no) not in r["premise"] \
                or r["kind"] == "pol-other"


def test_polarity_states_are_opposite_in_every_frame():
    for name, fr in polarity.FRAMES.items():
        for lang in ("en", "ja", "zh"):
            w = fr[lang]
            assert set(w) == {"A", "B", "notA", "notB"} and all(w[k] for k in w), (name, lang)
            assert not set(w["A"]) & set(w["B"]), (name, lang)


def test_continuation_mix_replays_the_base_and_guards_the_dev_sets(tmp_path):
    import gzip

    base = tmp_path / "base"
    base.mkdir()
    dev_row = json.loads(DEV.read_text(encoding="utf-8").splitlines()[0])
    rows = [{"premise": f"Premise {i}.", "hypothesis": f"Hypothesis {i}.", "label": i % 2,
             "source": "t", "lang": "en"} for i in range(50)]
    for name, data in (("train", rows), ("valid", rows[:5])):
        with gzip.open(base / f"{name}.jsonl.gz", "wt", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in data)
    stats = continuation.build(base, tmp_path / "out", replay=20, per_lang=200, seed=1)
    assert stats["replay"] == 20 and stats["polarity"] > 500
    with gzip.open(tmp_path / "out" / "train.jsonl.gz", "rt", encoding="utf-8") as f:
        train = [json.loads(x) for x in f]
    with gzip.open(tmp_path / "out" / "valid.jsonl.gz", "rt", encoding="utf-8") as f:
        valid = [json.loads(x) for x in f]
    assert sum(r["source"] == "t" for r in train) == 20 and len(valid) > 5
    # split by premise: no polarity premise is in both files
    assert not {r["premise"] for r in train} & {r["premise"] for r in valid[5:]}
    dev = build.dev_shingles()
    assert not any(build.touches_dev(r, dev) for r in train)
    assert build.touches_dev({"premise": dev_row["contexts"][0], "hypothesis": "x"}, dev)


def test_continuation_adds_whole_sources_of_another_build(tmp_path):
    import gzip

    def write(d, name, rows):
        d.mkdir(exist_ok=True)
        with gzip.open(d / f"{name}.jsonl.gz", "wt", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)

    def read(path):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return [json.loads(x) for x in f]

    row = lambda src, i: {"premise": f"{src} premise {i}.", "hypothesis": f"Claim {i}.",  # noqa: E731
                          "label": i % 2, "source": src, "lang": "en"}
    base, extra = tmp_path / "base", tmp_path / "extra"
    write(base, "train", [row("t", i) for i in range(30)])
    write(base, "valid", [row("t", 100)])
    dev_premise = json.loads(DEV.read_text(encoding="utf-8").splitlines()[0])["contexts"][0]
    write(extra, "train", [row("a", i) for i in range(7)] + [row("b", i) for i in range(5)]
          + [row("t", i) for i in range(50, 60)]
          + [{**row("a", 99), "premise": dev_premise}])  # touches the dev set: dropped
    write(extra, "valid", [row("a", 200), row("b", 201), row("t", 202)])
    out = tmp_path / "out"
    stats = continuation.build(base, out, replay=10, per_lang=0, seed=3, extra=extra,
                               extra_sources=("a", "b"))
    train, valid = read(out / "train.jsonl.gz"), read(out / "valid.jsonl.gz")
    assert Counter(r["source"] for r in train) == {"t": 10, "a": 7, "b": 5}
    assert stats["extra"] == 12 and stats["dropped_dev"] == 1 and stats["polarity"] == 0
    assert Counter(r["source"] for r in valid) == {"t": 1, "a": 1, "b": 1}
    with pytest.raises(ValueError, match="no training rows"):
        continuation.build(base, out, replay=10, per_lang=0, extra=extra, extra_sources=("zz",))
    with pytest.raises(ValueError, match="already holds"):
        continuation.build(base, out, replay=30, per_lang=0, extra=extra, extra_sources=("t",))
    # the whole base is checked, not only the rows a partial replay draws from it
    mixed = tmp_path / "mixed"
    write(mixed, "train", [row("t", i) for i in range(30)] + [row("b", 0)])
    write(mixed, "valid", [row("t", 100)])
    with pytest.raises(ValueError, match="already holds"):
        continuation.build(mixed, out, replay=1, per_lang=0, seed=3, extra=extra,
                           extra_sources=("b",))
    with pytest.raises(ValueError, match="go together"):
        continuation.build(base, out, replay=10, per_lang=0, extra=extra)


def test_exception_pairs_let_no_member_word_decide():
    """A list and one named exception: the exception said to be included is unsupported though
    all its words are in the premise; "Yes,"/"No," come with both labels."""
    for lang in ("en", "ja", "zh"):
        rows = list(polarity.build_exceptions(lang, 900, seed=2))
        labels = Counter(r["label"] for r in rows)
        assert abs(labels[1] - labels[0]) <= 0.1 * len(rows)
        kinds = {r["kind"]: r["label"] for r in rows}
        assert kinds == {"exc-in": 1, "exc-notin": 1, "exc-yes": 1, "exc-no": 1, "exc-both": 1,
                         "exc-in-wrong": 0, "exc-notin-wrong": 0, "exc-along": 0,
                         "exc-no-wrong": 0, "exc-both-wrong": 0}
        yes, no = polarity.YES[lang], polarity.NO[lang]
        assert {r["label"] for r in rows if r["hypothesis"].startswith(yes)} == {0, 1}
        assert {r["label"] for r in rows if r["hypothesis"].startswith(no)} == {0, 1}
        assert all(r["hypothesis"] not in r["premise"] for r in rows)


def test_value_formats_say_the_same_value():
    from train.data import rag_shapes as rs

    assert "two weeks" in rs.equivalents("returns", "en", "14 days")
    assert "3週間" in rs.equivalents("returns", "ja", "21日")
    assert "两周" in rs.equivalents("returns", "zh", "14天")
    assert rs.equivalents("returns", "en", "45 days") == []  # no exact other format
    assert rs.equivalents("dose", "en", "500 mg") == ["0.5 g"]
    assert rs.equivalents("hours", "ja", "午前9時半") == ["朝9時半", "9:30"]
    assert rs.equivalents("hours", "en", "7:00 a.m.") == ["7.00 in the morning", "07:00"]
    assert rs.equivalents("seats", "en", "10") == ["ten"]
    assert rs.equivalents("price", "ja", "1,200円") == ["1200円"]
    assert rs.equivalents("founded", "en", "1998") == []
    assert rs.join("A Plus workspace has 5 users.", "Plus costs $9.", "en") == \
        "A Plus workspace has 5 users, and Plus costs $9."
    assert rs.join("The Basic plan costs $9.", "The Pro plan costs $19.", "en") == \
        "The Basic plan costs $9, and the Pro plan costs $19."


def test_rag_shape_pairs_are_balanced_and_keep_the_evidence():
    from train.data import rag_shapes

    for lang in ("en", "ja", "zh"):
        rows = list(rag_shapes.build(lang, 1200, seed=4))
        labels = Counter(r["label"] for r in rows)
        assert abs(labels[1] - labels[0]) <= 0.1 * len(rows), (lang, labels)
        kinds = {r["kind"]: r["label"] for r in rows}
        assert kinds == {"format-reword": 1, "format-terse": 1, "format-swap": 0,
                         "format-spare": 0, "profile-fuse": 1, "profile-wrong": 0,
                         "profile-attribution": 0}
        # a format-changed value is never the context's own writing of it
        for r in rows:
            if r["kind"].startswith("format-"):
                assert r["hypothesis"] not in r["premise"]


def _mirror(*repos: str) -> bool:
    from train.data import sources

    try:
        for r in repos:
            next(s for s in sources.ALL.values() if s.repo == r).gitdir()
    except (FileNotFoundError, StopIteration):
        return False
    return True


MORE = ("asahi-y/JNLI-Neg", "zejunwang1/CSTS", "google/BEGIN-dataset", "SunYanCN/bert-text",
        "SkelterLabsInc/JaQuAD", "yahoojapan/JGLUE")


@pytest.mark.mirror
@pytest.mark.skipif(not _mirror(*MORE), reason=(
    "needs the data v6 sources' pinned GitHub snapshots under RAGPULSE_MIRROR (python -m "
    "train.data.sources lists the missing ones); runs where they are mirrored"))
def test_data_v6_sources_read_their_train_sides_only(monkeypatch):
    """JNLI-Neg is read from its train file only (its valid files derive from JNLI valid, an eval
    set); PAWS-X drops its "NS" placeholders; BEGIN drops generic responses; JaQuAD skips
    articles titled as a held-out JSQuAD valid article; CMRC 2018 train is the whole file."""
    from train.data import nli, qa_synth
    from train.data.sources import JNLI_NEG

    opened: list[str] = []
    real = type(JNLI_NEG).read_bytes
    monkeypatch.setattr(type(JNLI_NEG), "read_bytes",
                        lambda self, path: opened.append(path) or real(self, path))
    neg = list(nli.jnli_neg_train())
    assert len(neg) == 5494 and {r["label"] for r in neg} == {0, 1}
    assert opened and not any("valid" in p for p in opened)
    paws = list(nli.pawsx_zh())
    assert 3900 < len(paws) < 4000 and not any("NS" in (r["premise"], r["hypothesis"]) for r in paws)
    begin = list(nli.begin_en())
    assert 4000 < len(begin) < 5000 and {r["lang"] for r in begin} == {"en"}
    assert sum(len(it["qas"]) for it in qa_synth.cmrc_train_items()) == 10142
    held = qa_synth.jsquad_held_out_titles()
    assert len(held) == 30
    from train.data.sources import JAQUAD, read_json

    first = read_json(JAQUAD, "data/train/jaquad_train_0000.json")["data"][0]
    theirs = {p["context"] for p in first["paragraphs"]}
    assert theirs & {it["context"] for it in qa_synth.jaquad_items()}
    monkeypatch.setattr(qa_synth, "jsquad_held_out_titles", lambda: held | {first["title"]})
    assert not theirs & {it["context"] for it in qa_synth.jaquad_items()}


def test_sources_lists_what_a_fresh_machine_must_fetch(monkeypatch, tmp_path, capsys) -> None:
    from train.data import sources

    monkeypatch.setenv("RAGPULSE_MIRROR", str(tmp_path))
    assert sources.main([]) == 1
    out = capsys.readouterr().out
    assert out.count("MISSING") == len(sources.ALL) == 11
    assert "github:yahoojapan/JGLUE" in out and f"11 source(s) to fetch first (RAGPULSE_MIRROR={tmp_path})" in out


def test_continuation_replays_whole_sources_once_more(tmp_path):
    import gzip

    rows = [{"premise": f"{src} premise {i}.", "hypothesis": f"Claim {i}.", "label": i % 2,
             "source": src, "lang": "en"} for src, n in (("t", 40), ("nli", 6)) for i in range(n)]
    base = tmp_path / "base"
    base.mkdir()
    for name, data in (("train", rows), ("valid", rows[:2])):
        with gzip.open(base / f"{name}.jsonl.gz", "wt", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in data)
    out = tmp_path / "out"
    stats = continuation.build(base, out, replay=10, per_lang=0, seed=4, replay_all=("nli",))
    with gzip.open(out / "train.jsonl.gz", "rt", encoding="utf-8") as f:
        train = [json.loads(x) for x in f]
    drawn = Counter(r["source"] for r in train)
    # the random draw of 10 plus all 6 nli rows again
    assert len(train) == stats["replay"] == 16 and drawn["nli"] >= 6
    assert Counter(r["premise"] for r in train if r["source"] == "nli").keys() == \
        {f"nli premise {i}." for i in range(6)}
    with pytest.raises(ValueError, match="no training rows"):
        continuation.build(base, out, replay=10, per_lang=0, replay_all=("zz",))
