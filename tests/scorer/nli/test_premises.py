"""Premise selection before the model (``NliJudgeSettings.premise``): ``chunks`` runs exactly the
pairs it always ran; ``sentences`` judges a statement against its best-overlapping sentences with
their neighbours; ``packed`` joins them across contexts into one premise, and credits every
context that gave it a sentence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragpulse.scorer.judges.factory import BUNDLED_MODEL_DIR
from ragpulse.scorer.judges.nli import NliJudge, NliJudgeSettings, NliModel
from ragpulse.scorer.model import Fact, Sample
from ragpulse.scorer.segment import split_sentences

from .tiny import spy


def model(d: Path, **kw) -> NliModel:
    return NliModel(NliJudgeSettings(model_dir=d, **kw))


FILLER = "The city is on the river . "


# ---------------------------------------------------------------------- chunks: unchanged


@pytest.mark.parametrize("candidates", [None, 1, 2])
def test_chunks_runs_the_same_pairs_whatever_the_sentence_knobs(
        tiny_dir: Path, monkeypatch: pytest.MonkeyPatch, candidates) -> None:
    ctx = [FILLER * 12 + "Paris evidence .", "The capital of France .", "   ",
           FILLER * 3 + "It contradicts Paris ."]
    stmts = ["paris is the capital .", "the amazon carries water .", "tokyo"]
    default = model(tiny_dir, chunk_overlap=4, candidates=candidates)
    knobs = model(tiny_dir, chunk_overlap=4, candidates=candidates, premise="chunks",
                  premise_sentences=1, premise_neighbours=0, premise_tokens=16)
    seen_default, seen_knobs = spy(default, monkeypatch), spy(knobs, monkeypatch)
    a, na = default.support_matrix(stmts, ctx)
    b, nb = knobs.support_matrix(stmts, ctx)
    assert na == nb and seen_default == seen_knobs and np.array_equal(a, b)
    # and they are the context chunks of the window (32 - 3 specials - the longest statement)
    window = 32 - 3 - max(len(default._tok.encode(s, add_special_tokens=False).ids)
                          for s in stmts)
    pieces = [p for c in ctx for p in default.chunks(c, window)]
    assert {p for p, _ in seen_default} <= set(pieces)
    assert len(seen_default) == len(stmts) * min(candidates or len(pieces), len(pieces))


def test_chunks_is_the_default() -> None:
    assert NliJudgeSettings().premise == "chunks"


# ---------------------------------------------------------------------- sentence units


def test_sentence_units_are_the_splitters_sentences_as_spans(tiny_dir: Path) -> None:
    m = model(tiny_dir)
    ctx = ["Paris is the capital. It lies on the Seine!\nThe city is large.",
           "未使用の商品は、お届けから14日以内であれば返品を受け付けています。送料はお客様負担です。",
           "会员卡自开卡之日起两年内有效，到期前一个月可在线续期。续期费用为五十元！",
           "   "]
    units = m.sentence_units(ctx, 24)
    got = [(u.context, ctx[u.context][u.start:u.end]) for u in units]
    assert got == [(j, s) for j, c in enumerate(ctx) for s in split_sentences(c)]
    assert [c for c, _ in got].count(1) == 2 and [c for c, _ in got].count(2) == 2


def test_a_sentence_longer_than_the_cap_is_cut_into_overlapping_pieces(tiny_dir: Path) -> None:
    m = model(tiny_dir, chunk_overlap=2)
    words = [f"w{i}" for i in range(20)]  # one sentence, one token a word
    units = m.sentence_units([" ".join(words) + " ."], 8)
    assert all(u.tokens <= 8 for u in units) and len(units) > 2
    text = " ".join(words) + " ."
    assert text[units[0].start:units[0].end].split() == words[:8]
    assert text[units[1].start:units[1].end].split() == words[6:14]  # overlap 2
    assert text[units[-1].start:units[-1].end].endswith(".")


# ---------------------------------------------------------------------- sentences


def test_sentences_judges_the_best_sentence_with_its_neighbours(
        tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = [FILLER * 6 + "Paris evidence . Tokyo is the largest city in Japan . " + FILLER * 6]
    m = model(tiny_dir, premise="sentences", premise_sentences=1, premise_neighbours=1,
              premise_tokens=24)
    seen = spy(m, monkeypatch)
    p, pairs = m.support_matrix(["paris"], ctx)
    assert pairs == 1 and p[0, 0] > 0.99
    assert seen == [("The city is on the river . Paris evidence . Tokyo is the largest city in "
                     "Japan .", "paris")]
    # without neighbours: the sentence alone; a cap below the neighbours leaves them out
    m0 = model(tiny_dir, premise="sentences", premise_sentences=1, premise_neighbours=0)
    seen0 = spy(m0, monkeypatch)
    m0.support_matrix(["paris"], ctx)
    assert seen0[0][0] == "Paris evidence ."
    m1 = model(tiny_dir, premise="sentences", premise_sentences=1, premise_tokens=16)
    seen1 = spy(m1, monkeypatch)
    m1.support_matrix(["paris"], ctx)
    # 3 + 7 tokens fit in 16, the 8 of the next sentence do not
    assert seen1[0][0] == "The city is on the river . Paris evidence ."


def test_sentences_credits_each_context_its_own_windows(tiny_dir: Path) -> None:
    ctx = ["Paris is the capital .", "The amazon evidence .", FILLER]
    m = model(tiny_dir, premise="sentences", premise_sentences=2)
    p, pairs = m.support_matrix(["paris amazon"], ctx)
    assert pairs == 2  # the two best sentences, one window each
    assert p[0, 0] < 0.2 and p[0, 1] > 0.99 and p[0, 2] == 0.0  # not chosen: 0


def test_sentences_respects_max_pairs(tiny_dir: Path) -> None:
    from ragpulse.scorer.judges.nli.onnx_model import PairsTooMany

    m = model(tiny_dir, premise="sentences", premise_sentences=3, premise_neighbours=0,
              max_pairs=5)
    ctx = ["Paris is here . Tokyo is there . The river is long .", "The city is large ."]
    with pytest.raises(PairsTooMany, match="max_pairs 5"):
        m.support_matrix(["paris", "tokyo"], ctx)  # 2 x 3 windows
    assert m.support_matrix(["paris"], ["", "  "])[1] == 0


@pytest.mark.parametrize(("ctx", "stmt", "want"), [
    (["返品について。未使用の商品は、お届けから14日以内であれば返品を受け付けています。送料はお客様"
      "負担です。ポイントは購入金額の1%が付与されます。会員ランクは年に一度見直されます。"],
     "未使用であれば、商品到着後14日以内に返品できます。", "14日以内"),
    (["会员须知。会员卡自开卡之日起两年内有效，到期前一个月可在线续期。积分可以兑换礼品。"
      "门店营业时间为上午十点到晚上九点。停车场免费两小时。"],
     "会员卡从开卡那天起有效期为两年。", "两年内有效"),
])
def test_sentences_ranks_japanese_and_chinese_sentences(
        monkeypatch: pytest.MonkeyPatch, ctx, stmt, want) -> None:
    m = model(BUNDLED_MODEL_DIR, premise="sentences", premise_sentences=1, premise_neighbours=0)
    seen = spy(m, monkeypatch)
    m.support_matrix([stmt], ctx)
    assert len(seen) == 1 and want in seen[0][0]
    assert seen[0][0] in split_sentences(ctx[0])  # one sentence, as the splitter cut it


# ---------------------------------------------------------------------- packed


def test_packed_joins_the_best_sentences_of_two_contexts_in_document_order(
        tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = ["The amazon evidence . " + FILLER, FILLER + "Paris is the capital ."]
    m = model(tiny_dir, premise="packed", premise_sentences=2, premise_neighbours=0)
    seen = spy(m, monkeypatch)
    p, pairs = m.support_matrix(["paris is the capital of the amazon ."], ctx)
    assert pairs == 1
    assert seen[0][0] == "The amazon evidence . Paris is the capital ."  # context 0 first
    assert p[0, 0] == p[0, 1] > 0.99  # one premise: both contexts get its P


def test_packed_premise_stays_within_its_tokens(tiny_dir: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = ["Paris is the capital of France .", "Paris evidence .", "The city of Paris ."]
    m = model(tiny_dir, premise="packed", premise_sentences=3, premise_neighbours=0,
              premise_tokens=16)
    seen = spy(m, monkeypatch)
    p, _ = m.support_matrix(["the capital of paris"], ctx)
    # ranked: context 0 (7 tokens), 2 (5), 1 (3): 7 + 5 fit in 16, the third (3) too: 15
    assert seen[0][0] == "Paris is the capital of France . Paris evidence . The city of Paris ."
    m2 = model(tiny_dir, premise="packed", premise_sentences=3, premise_neighbours=0,
               premise_tokens=12)
    seen2 = spy(m2, monkeypatch)
    p2, _ = m2.support_matrix(["the capital of paris"], ctx)
    assert seen2[0][0] == "Paris is the capital of France . The city of Paris ."
    assert p2[0, 1] == 0.0 and p2[0, 0] == p2[0, 2]  # context 1 gave nothing: no credit


async def test_a_packed_premise_credits_the_context_the_statement_draws_on(
        tiny_dir: Path, use_embedder) -> None:
    """Context utilization (``context-used@2``): a statement draws on the context it matches
    best, the model's P added to the match. Under ``packed`` both contexts of the premise get
    the statement's P, so the match decides: the statement's words are in context 1. (Until
    @2 every context of the premise counted as used, distractors included: docs/benchmarks.md,
    "Context utilization across judges".) Under
    ``sentences`` the tiny model's P (its word ``evidence``, in context 0 only) outweighs
    the match."""
    sample = Sample(id="fuse", question="", answer="Paris is the capital of the amazon.",
                    contexts=("The amazon evidence .", "Paris is the capital .", FILLER))
    facts = frozenset({Fact.STATEMENT_SUPPORT, Fact.CONTEXT_USED})
    got = {}
    for premise in ("sentences", "packed"):
        judge = NliJudge(NliJudgeSettings(model_dir=tiny_dir, premise=premise,
                                          premise_sentences=2, premise_neighbours=0),
                         embedder=use_embedder)
        try:
            got[premise] = judge.judge(sample, facts)
        finally:
            await judge.aclose()
    assert got["sentences"][Fact.CONTEXT_USED].value == [1, 0, 0]
    packed = got["packed"][Fact.CONTEXT_USED]
    assert packed.value == [0, 1, 0]
    p = packed.extra["entailment"]
    assert p[0] == p[1] > 0.9 and p[2] == 0.0  # the premise's P, credited to both
    match = packed.extra["alignment"]
    assert match[1] > match[0] > 0.1
    for f in got.values():
        assert f[Fact.STATEMENT_SUPPORT].value == [1]


# ---------------------------------------------------------------------- headings


def test_a_short_first_sentence_heads_the_premise_of_a_later_one(
        tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = ["Fixed deposit terms . " + FILLER * 3 + "Paris evidence .",
           "The city of Tokyo is on the river today . Paris evidence here ."]
    m = model(tiny_dir, premise="sentences", premise_sentences=2, premise_neighbours=0,
              premise_heading=8)
    seen = spy(m, monkeypatch)
    m.support_matrix(["paris evidence"], ctx)
    # context 0's 4-token title heads its sentence; context 1's first sentence (10 tokens) is
    # longer than premise_heading: no title
    assert [p for p, _ in seen] == ["Fixed deposit terms . Paris evidence .",
                                    "Paris evidence here ."]
    # off by default: the sentence alone
    m0 = model(tiny_dir, premise="sentences", premise_sentences=2, premise_neighbours=0)
    assert m0.settings.premise_heading == 0
    seen0 = spy(m0, monkeypatch)
    m0.support_matrix(["paris evidence"], ctx)
    assert [p for p, _ in seen0] == ["Paris evidence .", "Paris evidence here ."]


def test_a_heading_is_never_doubled_nor_past_the_cap(tiny_dir: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # the title picked itself, a one-sentence context (no later sentence to head) and a window
    # that leaves no room for it
    ctx = ["Paris evidence . The city is on the river .", "Paris evidence alone ."]
    m = model(tiny_dir, premise="sentences", premise_sentences=2, premise_neighbours=1,
              premise_heading=8, premise_tokens=16)
    seen = spy(m, monkeypatch)
    m.support_matrix(["paris evidence"], ctx)
    assert sorted(p for p, _ in seen) == ["Paris evidence . The city is on the river .",
                                          "Paris evidence alone ."]
    long_ctx = ["Short title here . " + FILLER + "Paris evidence is long enough now ."]
    tight = model(tiny_dir, premise="sentences", premise_sentences=1, premise_neighbours=0,
                  premise_heading=8, premise_tokens=8)
    seen_tight = spy(tight, monkeypatch)
    tight.support_matrix(["paris evidence"], long_ctx)
    assert seen_tight[0][0] == "Paris evidence is long enough now ."  # 7 + 4 > 8


def test_packed_premises_carry_each_contexts_heading_once(
        tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = ["Amazon notes . Rain fell hard . The amazon evidence .",
           "Paris notes . Rain fell hard . Paris is the capital ."]
    m = model(tiny_dir, premise="packed", premise_sentences=2, premise_neighbours=0,
              premise_heading=4)
    seen = spy(m, monkeypatch)
    p, pairs = m.support_matrix(["paris is the capital of the amazon ."], ctx)
    assert pairs == 1
    assert seen[0][0] == ("Amazon notes . The amazon evidence . Paris notes . Paris is the "
                          "capital .")
    assert p[0, 0] == p[0, 1]


# ---------------------------------------------------------------------- auto


def test_auto_packs_across_passages_and_judges_one_document_by_sentence(
        tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stmt = ["paris is the capital of the amazon ."]
    two = ["The amazon evidence . Rain fell hard .", "Rain fell hard . Paris is the capital ."]
    one = ["The amazon evidence . Rain fell hard . Paris is the capital ."]
    auto = model(tiny_dir, premise="auto", premise_sentences=2, premise_neighbours=0)
    for ctx, like in ((two, "packed"), (one, "sentences"), (one + ["  ", ""], "sentences")):
        ref = model(tiny_dir, premise=like, premise_sentences=2, premise_neighbours=0)
        seen_auto, seen_ref = spy(auto, monkeypatch), spy(ref, monkeypatch)
        p_auto, n_auto = auto.support_matrix(stmt, ctx)
        p_ref, n_ref = ref.support_matrix(stmt, ctx)
        assert seen_auto == seen_ref and n_auto == n_ref and np.array_equal(p_auto, p_ref)
    # two passages: one premise of both; one document (blank contexts do not count): each
    # sentence alone
    seen = spy(auto, monkeypatch)
    auto.support_matrix(stmt, two)
    assert [p for p, _ in seen] == ["The amazon evidence . Paris is the capital ."]
    seen = spy(auto, monkeypatch)
    auto.support_matrix(stmt, one + ["  "])
    assert len(seen) == 2


# ---------------------------------------------------------------------- views


TWO = ["The amazon evidence . Rain fell hard .", "Rain fell hard . Paris is the capital ."]
STMT = ["paris is the capital of the amazon .", "rain fell hard in paris ."]


def test_views_averages_the_sentence_and_packed_matrices_across_passages(
        tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kw = {"premise_sentences": 2, "premise_neighbours": 0}
    views = model(tiny_dir, premise="views", **kw)
    sent = model(tiny_dir, premise="sentences", **kw)
    packed = model(tiny_dir, premise="packed", **kw)
    seen = spy(views, monkeypatch)
    p, n = views.support_matrix(STMT, TWO)
    p_s, n_s = sent.support_matrix(STMT, TWO)
    p_p, n_p = packed.support_matrix(STMT, TWO)
    assert n == n_s + n_p == len(seen) == 3 * len(STMT)
    # a statement's P: the mean of the two views' matrices, its best context's
    mean = (p_s + p_p) / 2
    np.testing.assert_allclose(p.max(axis=1), mean.max(axis=1), atol=1e-6)
    # each context of its packed premise was used together: it gets the statement's P
    for i in range(len(STMT)):
        credited = p_p[i] > 0
        np.testing.assert_allclose(p[i, credited], mean[i].max(), atol=1e-6)
        np.testing.assert_allclose(p[i, ~credited], mean[i, ~credited], atol=1e-6)
    # one document: sentences alone
    one = [" ".join(TWO)]
    p1, n1 = views.support_matrix(STMT, one)
    q1, m1 = sent.support_matrix(STMT, one)
    assert n1 == m1 and np.allclose(p1, q1, atol=1e-6)


def test_views_sentence_view_can_run_the_best_sentence_alone(
        tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kw = {"premise_sentences": 2, "premise_neighbours": 0}
    v1 = model(tiny_dir, premise="views", premise_view_sentences=1, **kw)
    best = model(tiny_dir, premise="sentences", premise_sentences=1, premise_neighbours=0)
    packed = model(tiny_dir, premise="packed", **kw)
    seen = spy(v1, monkeypatch)
    p, n = v1.support_matrix(STMT, TWO)
    # two pairs a statement, as sentences: its best sentence alone, both packed
    assert n == len(seen) == 2 * len(STMT)
    assert sum(1 for prem, _ in seen if prem.count(".") == 2) == len(STMT)
    p_b, _ = best.support_matrix(STMT, TWO)
    p_p, _ = packed.support_matrix(STMT, TWO)
    np.testing.assert_allclose(p.max(axis=1), ((p_b + p_p) / 2).max(axis=1), atol=1e-6)
    # the knob belongs to views: sentences alone still runs every best sentence
    sent = model(tiny_dir, premise="sentences", premise_view_sentences=1, **kw)
    assert sent.support_matrix(STMT, TWO)[1] == 2 * len(STMT)


async def test_views_credit_the_context_the_statement_draws_on(
        tiny_dir: Path, use_embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sentence view runs the best sentence (one passage) alone, the packed premise both
    passages; each passage that gave the packed premise a sentence gets the statement's P
    (statement support reads the row's best). Context utilization then counts the passage the
    statement matches best, as under ``packed``, not every passage of the premise."""
    sample = Sample(id="fuse", question="", answer="Paris is the capital of the amazon.",
                    contexts=("The amazon evidence .", "Paris is the capital .", FILLER))
    facts = frozenset({Fact.STATEMENT_SUPPORT, Fact.CONTEXT_USED})
    judge = NliJudge(NliJudgeSettings(model_dir=tiny_dir, premise="views",
                                      premise_view_sentences=1, premise_sentences=2,
                                      premise_neighbours=0), embedder=use_embedder)
    seen = spy(judge.nli, monkeypatch)
    try:
        got = judge.judge(sample, facts)
    finally:
        await judge.aclose()
    assert len(seen) == 2  # the best sentence alone, both packed
    assert got[Fact.CONTEXT_USED].value == [0, 1, 0]
    assert got[Fact.STATEMENT_SUPPORT].value == [1]
    used = got[Fact.CONTEXT_USED].extra["entailment"]
    best = got[Fact.STATEMENT_SUPPORT].extra["probabilities"][0]
    assert used[0] == used[1] == pytest.approx(best, abs=1e-3)


# ---------------------------------------------------------------------- evidence (issue 39)


def test_evidence_takes_the_best_of_chunks_sentences_and_the_packed_premise(
        tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A statement's P is its best premise's, never a mean: the passage it fits in whole (a chunk),
    its best sentence alone, or its best sentences packed across passages; every pair runs once
    and the cells credit the contexts each premise drew on."""
    kw = {"premise_sentences": 2, "premise_neighbours": 0, "premise_view_sentences": 1,
          "candidates": 2}
    ev = model(tiny_dir, premise="evidence", **kw)
    chunks = model(tiny_dir, premise="chunks", candidates=2)
    best = model(tiny_dir, premise="sentences", premise_sentences=1, premise_neighbours=0)
    packed = model(tiny_dir, premise="packed", premise_sentences=2, premise_neighbours=0)
    seen = spy(ev, monkeypatch)
    p, n = ev.support_matrix(STMT, TWO)
    p_c, n_c = chunks.support_matrix(STMT, TWO)
    p_b, n_b = best.support_matrix(STMT, TWO)
    p_p, n_p = packed.support_matrix(STMT, TWO)
    assert n == len(seen) == n_c + n_b + n_p == 4 * len(STMT)
    np.testing.assert_allclose(p, np.maximum.reduce([p_c, p_b, p_p]), atol=1e-6)
    # the whole passage is among the premises: a statement fusing two of its sentences can be
    # supported by it
    assert any(prem == TWO[0] for prem, _ in seen) and any(prem == TWO[1] for prem, _ in seen)
    # one passage: its chunk and its best sentence, no packed premise across passages
    one = [TWO[0]]
    _, n1 = ev.support_matrix(STMT, one)
    assert n1 == 2 * len(STMT)


def test_evidence_checks_every_pair_it_would_run_before_running_any(
        tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragpulse.scorer.judges.nli.onnx_model import PairsTooMany

    ev = model(tiny_dir, premise="evidence", premise_sentences=2, premise_neighbours=0,
               premise_view_sentences=1, candidates=2, max_pairs=7)
    seen = spy(ev, monkeypatch)
    with pytest.raises(PairsTooMany, match="at least 8 pairs; max_pairs 7"):
        ev.support_matrix(STMT, TWO)  # 2 statements x (2 chunks + 1 sentence + 1 packed)
    assert seen == []


def test_evidence_cut_skips_the_windows_of_statements_the_sentences_support(
        tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``evidence`` with ``evidence_cut``, a statement whose sentence premises reach the
    cut runs no passage window; one below it runs every pair it ran without the cut."""
    ctx = ["paris evidence . the river is long . the city is on the seine .",
           "nothing here at all ."]
    sts = ["paris", "amazon unsupported"]
    runs = {}
    for cut in (None, 0.9):
        m = model(tiny_dir, premise="evidence", premise_view_sentences=1, evidence_cut=cut)
        seen = spy(m, monkeypatch)
        got, pairs = m.support_matrix(sts, ctx)
        assert pairs == len(seen)
        runs[cut] = (got, {h: sum(1 for _, x in seen if x == h) for h in sts})
    (full, n_full), (cut, n_cut) = runs[None], runs[0.9]
    assert full[0, 0] > 0.99 and cut[0, 0] > 0.99 and full[1].max() < 0.5
    assert n_cut["paris"] < n_full["paris"]  # its windows skipped
    assert n_cut["amazon unsupported"] == n_full["amazon unsupported"]
    assert np.allclose(cut, full, atol=0.1)
