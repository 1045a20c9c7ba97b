"""The local faithfulness detector: shipped weights, obvious verdicts in EN/JA/ZH, edge cases,
the weights file format, the numpy logistic fit (in the training script), and the training script
end to end."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import numpy as np
import pytest

from ragpulse.scorer.embeddings import USEEmbedder
from ragpulse.scorer.judges.local.support_detector import (
    DEFAULT_WEIGHTS_PATH,
    FEATURES,
    SupportDetector,
    SupportSettings,
    SupportWeights,
    WeightsError,
    _analyze,
    featurize,
    featurize_with_copies,
    split_clauses,
)

REPO = Path(__file__).resolve().parents[3]

CONTEXT_EN = (
    "Poseidon is a 2006 American disaster film directed by Wolfgang Petersen. "
    "The film grossed $181,674,817 at the worldwide box office on a budget of $160 million. "
    "It was nominated for an Academy Award for Best Visual Effects. "
    "The ship capsizes after a rogue wave hits it on New Year's Eve."
)
CONTEXT_JA = (
    "東京タワーは東京都港区にある電波塔である。高さは333メートルで、1958年に完成した。"
    "展望台からは富士山を見ることができる。"
)
CONTEXT_ZH = "长城位于中国北方，全长约两万一千公里。它始建于春秋战国时期。每年有数百万游客前来参观。"


@pytest.fixture(scope="module")
def embedder() -> USEEmbedder:
    return USEEmbedder(threads=1).warm()


@pytest.fixture(scope="module")
def detector(embedder: USEEmbedder) -> SupportDetector:
    return SupportDetector(embedder)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a connection fails loudly: the detector must work offline."""

    def refuse(*args, **kwargs):
        raise AssertionError("the support detector tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_shipped_weights_load_and_predict_without_network(no_network: None) -> None:
    det = SupportDetector(USEEmbedder(threads=1))  # a fresh model load, under the network guard
    assert det.version.startswith("support-lr@")
    assert 0.0 < det.threshold < 1.0
    assert det.aggregate in ("mean", "min")
    (p,) = det.predict(["Poseidon is a 2006 American disaster film."], [CONTEXT_EN])
    assert 0.0 <= p <= 1.0


def test_copied_statement_is_supported(detector: SupportDetector) -> None:
    stmts = [
        "The film grossed $181,674,817 at the worldwide box office on a budget of $160 million.",
        "Poseidon is a 2006 American disaster film directed by Wolfgang Petersen.",
    ]
    probs = detector.predict(stmts, [CONTEXT_EN])
    assert all(p >= detector.threshold for p in probs), probs
    assert detector.verdicts(stmts, [CONTEXT_EN]) == [1, 1]


def test_changed_number_is_unsupported(detector: SupportDetector) -> None:
    orig, changed = detector.predict(
        ["Poseidon is a 2006 American disaster film directed by Wolfgang Petersen.",
         "Poseidon is a 1987 American disaster film directed by Wolfgang Petersen."],
        [CONTEXT_EN],
    )
    assert changed < orig
    assert changed < detector.threshold


def test_changed_entity_is_unsupported(detector: SupportDetector) -> None:
    orig, changed = detector.predict(
        ["Poseidon is a 2006 American disaster film directed by Wolfgang Petersen.",
         "Poseidon is a 2006 American disaster film directed by Steven Spielberg."],
        [CONTEXT_EN],
    )
    assert changed < orig
    assert changed < detector.threshold


def test_negated_statement_scores_lower(detector: SupportDetector) -> None:
    orig, negated = detector.predict(
        ["It was nominated for an Academy Award for Best Visual Effects.",
         "It was never nominated for an Academy Award for Best Visual Effects."],
        [CONTEXT_EN],
    )
    assert negated < orig


def test_invented_statement_is_unsupported(detector: SupportDetector) -> None:
    (p,) = detector.predict(["The director later apologized to the cast in a Paris hotel."],
                            [CONTEXT_EN])
    assert p < detector.threshold


def test_japanese(detector: SupportDetector) -> None:
    copied, number, kept, negated, invented = detector.predict(
        ["高さは333メートルで、1958年に完成した。",
         "高さは450メートルで、1958年に完成した。",
         "展望台からは富士山を見ることができる。",
         "展望台からは富士山を見ることができない。",
         "大阪城は豊臣秀吉によって建てられた。"],
        [CONTEXT_JA],
    )
    assert copied >= detector.threshold
    assert number < copied and number < detector.threshold
    assert negated < kept
    assert invented < detector.threshold


FUJI = "富士山は静岡県と山梨県にまたがる活火山で、標高は3776メートルである。"


def test_japanese_near_verbatim_answer_is_supported(detector: SupportDetector) -> None:
    """The case tests/e2e/test_up.py runs through the whole pipeline: the answer restates the
    context's fact with another ending (です for である) and particle (の for は)."""
    faithful, number, invented = detector.predict(
        ["富士山の標高は3776メートルです。", "富士山の標高は2000メートルです。",
         "エベレストの標高は8848メートルです。"],
        [FUJI],
    )
    assert faithful >= detector.threshold
    assert faithful >= 0.5
    assert number < detector.threshold and number < faithful
    assert invented < detector.threshold


def test_japanese_units_do_not_span_particles() -> None:
    """Content bigrams and order bigrams stay inside kanji/katakana runs: "山の" or "です" is a
    word boundary (a particle, an ending), not evidence."""
    a = _analyze("富士山の標高は3776メートルです。")
    assert {"富士", "士山", "標高", "3776", "メー", "ート", "トル"} <= a.content
    assert not any("の" in u or "は" in u or "で" in u for u in a.content)
    assert not any(("の" in b) or ("す" in b) for b in a.bigrams)
    assert ("で", "す") in a.all_bigrams  # the copy check still sees the ending
    x = featurize(["富士山の標高は3776メートルです。"], [FUJI], None)
    col = {name: i for i, name in enumerate(FEATURES)}
    assert x[0, col["coverage"]] == 1.0
    assert x[0, col["novel_bigrams"]] == 0.0


def test_copy_like_statements_are_near_certain(detector: SupportDetector) -> None:
    """A verbatim or trimmed copy of a context sentence in EN/JA/ZH gets the measured copy floor;
    a copy with a changed number, name or negation, a reordering, or a one-word answer is not
    copy-like and keeps the linear probability."""
    floor = detector.weights.copy_floor
    assert floor is not None and floor > 0.9
    cases = [
        (["Poseidon is a 2006 American disaster film directed by Wolfgang Petersen.",
          "It was nominated for an Academy Award for Best Visual Effects.",
          "Poseidon is a 1987 American disaster film directed by Wolfgang Petersen.",
          "It was not nominated for an Academy Award for Best Visual Effects.",
          "Wolfgang Petersen directed the 2006 disaster film Poseidon.",
          "Poseidon."], [CONTEXT_EN], [True, True, False, False, False, False]),
        (["高さは333メートルで、1958年に完成した。", "東京タワーは東京都港区にある電波塔である。",
          "東京タワーは大阪府にある電波塔である。"], [CONTEXT_JA], [True, True, False]),
        (["长城位于中国北方。", "它始建于春秋战国时期。", "长城不位于中国北方。"], [CONTEXT_ZH],
         [True, True, False]),
    ]
    for stmts, ctx, want in cases:
        _, copies = featurize_with_copies(stmts, ctx, None)
        assert copies.tolist() == want, stmts
        probs = detector.predict(stmts, ctx)
        for p, is_copy, st in zip(probs, want, stmts):
            if is_copy:
                assert p >= floor - 1e-9, (st, p)
            else:
                assert p < floor, (st, p)
        assert detector.verdicts(stmts, ctx)[: want.count(True)] == [1] * want.count(True)


def test_weights_without_copy_floor_still_load(tmp_path: Path, embedder: USEEmbedder) -> None:
    """Weights written before the copy floor existed load with no floor: copies keep the
    linear probability (backward compatible)."""
    raw = json.loads(DEFAULT_WEIGHTS_PATH.read_text(encoding="utf-8"))
    raw.pop("copy_floor", None)
    (tmp_path / "old.json").write_text(json.dumps(raw), encoding="utf-8")
    old = SupportDetector(embedder, tmp_path / "old.json")
    assert old.weights.copy_floor is None
    new = SupportDetector(embedder)
    stmt = ["Poseidon is a 2006 American disaster film directed by Wolfgang Petersen."]
    (p_old,) = old.predict(stmt, [CONTEXT_EN])
    (p_new,) = new.predict(stmt, [CONTEXT_EN])
    assert p_old < p_new == pytest.approx(max(p_old, new.weights.copy_floor))


def test_chinese(detector: SupportDetector) -> None:
    copied, negated, invented = detector.predict(
        ["长城位于中国北方。", "长城不位于中国北方。", "故宫是明朝皇帝的住所。"],
        [CONTEXT_ZH],
    )
    assert copied >= detector.threshold
    assert negated < copied
    assert invented < detector.threshold


def test_empty_inputs(detector: SupportDetector) -> None:
    assert detector.predict([], [CONTEXT_EN]) == []
    assert detector.predict([], []) == []
    no_ctx = detector.predict(["Poseidon is a 2006 film."], [])
    blank_ctx = detector.predict(["Poseidon is a 2006 film."], ["", "   "])
    assert no_ctx == blank_ctx
    assert no_ctx[0] < detector.threshold
    (p,) = detector.predict([""], [CONTEXT_EN])  # an empty statement still gets a probability
    assert 0.0 <= p <= 1.0


def test_results_stay_aligned_when_statements_are_chunked(embedder: USEEmbedder) -> None:
    stmts = [f"Statement {i} says the film was directed by Wolfgang Petersen." for i in range(5)]
    whole = SupportDetector(embedder).predict(stmts, [CONTEXT_EN])
    chunked = SupportDetector(embedder, settings=SupportSettings(max_statements=2)).predict(
        stmts, [CONTEXT_EN])
    assert len(chunked) == 5
    assert chunked == pytest.approx(whole)


LONG_EN = ("Poseidon is a 2006 American disaster film directed by Wolfgang Petersen, while the "
           "sequel was shot in Canada by Steven Spielberg, leading to four Academy Awards in 2009.")


def test_long_english_statements_are_split_into_clauses() -> None:
    assert split_clauses(LONG_EN) == [
        "Poseidon is a 2006 American disaster film directed by Wolfgang Petersen",
        "while the sequel was shot in Canada by Steven Spielberg",
        "leading to four Academy Awards in 2009.",
    ]
    short = "Poseidon is a 2006 film, and it was directed by Wolfgang Petersen."
    assert split_clauses(short) == [short]  # at most 20 words: one claim, kept whole
    assert split_clauses(LONG_EN, max_words=0) == [LONG_EN]  # 0 disables the split
    ja = "東京タワーは東京都港区にある電波塔であり、高さは333メートルで、1958年に完成し、" * 3
    assert split_clauses(ja) == [ja]  # no comma cues for CJK: never split
    # A piece under four words is glued back to the clause before it, never left alone.
    tail = ("The film grossed $181,674,817 at the worldwide box office on a budget of $160 "
            "million, which made it a commercial disappointment for the studio, with ease.")
    assert split_clauses(tail) == [
        "The film grossed $181,674,817 at the worldwide box office on a budget of $160 million",
        "which made it a commercial disappointment for the studio, with ease.",
    ]


def test_a_long_statement_scores_the_mean_of_its_clauses(embedder: USEEmbedder) -> None:
    split = SupportDetector(embedder)
    whole = SupportDetector(embedder, settings=SupportSettings(clause_split_words=0))
    clauses = whole.predict(split_clauses(LONG_EN), [CONTEXT_EN])
    (p,) = split.predict([LONG_EN], [CONTEXT_EN])
    assert p == pytest.approx(float(np.mean(clauses)))
    # The supported first clause outscores the invented ones, and the invention is not diluted
    # by it: the statement scores below the supported clause and below the threshold.
    assert clauses[0] > max(clauses[1:])
    assert p < clauses[0] and p < split.threshold


def test_predict_is_thread_safe(detector: SupportDetector) -> None:
    cases = [
        (["Poseidon is a 2006 film.", "It was directed by Steven Spielberg."], [CONTEXT_EN]),
        (["東京タワーは1958年に完成した。"], [CONTEXT_JA]),
        (["长城位于中国北方。"], [CONTEXT_ZH]),
    ]
    expected = [detector.predict(s, c) for s, c in cases]
    results: dict[int, list[list[float]]] = {}

    def worker(k: int) -> None:
        results[k] = [detector.predict(s, c) for s, c in cases]

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        for got, want in zip(results[k], expected):
            assert got == pytest.approx(want)


def test_weights_round_trip(tmp_path: Path) -> None:
    w = SupportWeights.load(DEFAULT_WEIGHTS_PATH)
    assert w.features == FEATURES
    out = tmp_path / "w.json"
    _load_training_script().save_weights(w, out)
    again = SupportWeights.load(out)
    assert again == w
    x = np.random.default_rng(0).normal(size=(4, len(FEATURES)))
    assert again.logits(x) == pytest.approx(w.logits(x))


def test_bad_weights_are_rejected(tmp_path: Path, embedder: USEEmbedder) -> None:
    raw = json.loads(DEFAULT_WEIGHTS_PATH.read_text(encoding="utf-8"))
    short = dict(raw, coef=raw["coef"][:-1])
    (tmp_path / "short.json").write_text(json.dumps(short), encoding="utf-8")
    with pytest.raises(WeightsError, match="same length"):
        SupportDetector(embedder, tmp_path / "short.json")
    renamed = dict(raw, features=["x"] * len(raw["features"]))
    (tmp_path / "renamed.json").write_text(json.dumps(renamed), encoding="utf-8")
    with pytest.raises(WeightsError, match="retrain"):
        SupportDetector(embedder, tmp_path / "renamed.json")
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    with pytest.raises(WeightsError):
        SupportDetector(embedder, tmp_path / "broken.json")
    with pytest.raises(WeightsError):
        SupportDetector(embedder, tmp_path / "missing.json")
    (tmp_path / "floor.json").write_text(json.dumps(dict(raw, copy_floor=1.5)), encoding="utf-8")
    with pytest.raises(WeightsError, match="copy_floor"):
        SupportDetector(embedder, tmp_path / "floor.json")


def test_featurize_shape_and_evidence_without_embedder() -> None:
    x = featurize(["Poseidon grossed $181 million.", "Titanic grossed $2 billion."], [CONTEXT_EN],
                  None)
    assert x.shape == (2, len(FEATURES))
    col = {name: i for i, name in enumerate(FEATURES)}
    assert x[0, col["any_unsupported_number"]] == 0.0  # a rounded figure of 181,674,817
    assert x[1, col["any_unsupported_number"]] == 1.0
    assert x[1, col["any_unsupported_entity"]] == 1.0  # Titanic is not in the context
    assert x[0, col["coverage"]] > x[1, col["coverage"]]


def test_fit_logistic_reaches_the_regularized_optimum() -> None:
    fit_logistic = _load_training_script().fit_logistic
    rng = np.random.default_rng(7)
    x = rng.normal(size=(400, 3))
    y = (x @ np.array([2.0, -1.0, 0.0]) + 0.3 + rng.logistic(size=400) > 0).astype(float)
    w = rng.uniform(0.5, 2.0, size=400)
    coef, b = fit_logistic(x, y, w, l2=5.0)
    p = 1 / (1 + np.exp(-(x @ coef + b)))
    # First-order optimality of sum w*logloss + l2/2 |coef|^2 (intercept unpenalized).
    assert np.abs(x.T @ (w * (p - y)) + 5.0 * coef).max() < 1e-6
    assert abs(float(np.sum(w * (p - y)))) < 1e-6
    assert coef[0] > 1.0 and coef[1] < -0.5 and abs(coef[2]) < 0.3
    with pytest.raises(ValueError):
        fit_logistic(x, np.ones(400))


def _load_training_script():
    from bench import train_faithfulness

    return train_faithfulness


def _tiny_dataset(root: Path) -> None:
    """A few articles with faithful and corrupted one-sentence summaries, plus JNLI-shaped pairs."""
    facts = [
        ("Alice Romero founded the Harbor Bakery in Lisbon in 1998.", "Lisbon", "Madrid",
         "1998", "2011"),
        ("The bridge over the Tamar river opened in 1961 and cost 1.8 million pounds.", "Tamar",
         "Severn", "1961", "1975"),
        ("Professor Kenji Sato won the Draper Prize in 2004 for his work on batteries.", "Draper",
         "Nobel", "2004", "2019"),
        ("The festival in Bergen attracted 40,000 visitors over three days.", "Bergen", "Oslo",
         "40,000", "90,000"),
        ("Engineers at Norvik Labs built a turbine that produces 12 megawatts.", "Norvik",
         "Halden", "12", "45"),
        ("The Orchid Museum in Quito reopened after a flood closed it for 8 months.", "Quito",
         "Lima", "8", "30"),
    ]
    rows = []
    for k, (sent, ent, ent2, num, num2) in enumerate(facts):
        ctx = f"{sent} Local officials welcomed the news. More details will follow next week."
        variants = [(sent, 1), (sent.replace(ent, ent2), 0), (sent.replace(num, num2), 0),
                    ("Officials welcomed the news.", 1)]
        for j, (ans, lab) in enumerate(variants):
            rows.append({"id": f"qags-cnndm-{k}-{j}", "question": "Summarize the article.",
                         "contexts": [ctx], "answer": ans, "label": {"faithful": lab}})
    (root / "faithfulness_qags_cnndm.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    jnli = []
    pairs = [("公園で犬が走っています。", "犬が走っています。", "entailment"),
             ("公園で犬が走っています。", "猫が寝ています。", "contradiction"),
             ("机の上にりんごが三つあります。", "机の上にりんごがあります。", "entailment"),
             ("机の上にりんごが三つあります。", "机の上にバナナが五本あります。", "neutral")]
    for i, (s1, s2, lab) in enumerate(pairs * 2):
        jnli.append({"sentence_pair_id": str(i), "yjcaptions_id": f"{i % 4}-1-2",
                     "sentence1": s1, "sentence2": s2, "label": lab})
    (root / "jnli_ja_valid.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in jnli), encoding="utf-8")


def test_training_script_end_to_end(tmp_path: Path, embedder: USEEmbedder) -> None:
    train = _load_training_script()
    data = tmp_path / "data"
    data.mkdir()
    _tiny_dataset(data)
    out, report = tmp_path / "w.json", tmp_path / "report.json"
    rc = train.main(["--data", str(data), "--out", str(out), "--folds", "2",
                     "--l2", "1", "10", "--report", str(report)])
    assert rc == 0
    rep = json.loads(report.read_text(encoding="utf-8"))
    assert set(rep["grouped_cv"]) == {"qags_cnndm", "jnli_ja"}
    assert set(rep["leave_one_dataset_out"]) == {"qags_cnndm", "jnli_ja"}
    det = SupportDetector(embedder, out)
    assert det.weights.trained_on["qags_cnndm"] == {"samples": 24, "faithful": 12}
    good, bad = det.predict(["Alice Romero founded the Harbor Bakery in Lisbon in 1998.",
                             "Alice Romero founded the Harbor Bakery in Madrid in 2011."],
                            ["Alice Romero founded the Harbor Bakery in Lisbon in 1998."])
    assert good > bad


def test_auroc_helper_matches_pairwise_definition() -> None:
    train = _load_training_script()
    rng = np.random.default_rng(3)
    s = rng.integers(0, 5, size=60).astype(float)  # many ties
    y = rng.integers(0, 2, size=60)
    pos, neg = s[y == 1], s[y == 0]
    pairwise = np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg])
    assert train.auroc(s, y) == pytest.approx(pairwise)


def test_a_bare_string_is_refused(detector: SupportDetector) -> None:
    with pytest.raises(TypeError):
        detector.predict(["Poseidon is a film."], CONTEXT_EN)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        detector.predict("Poseidon is a film.", [CONTEXT_EN])  # type: ignore[arg-type]


def test_threshold_is_the_lowest_within_tolerance_of_the_best_balanced_accuracy() -> None:
    """Two sets; balanced accuracy is equal for thresholds between the faithful statements'
    lowest probability and the unfaithful ones' highest: the lowest such threshold is kept."""
    train = _load_training_script()
    ex, oof = [], []
    for name in ("a", "b"):
        for k, (p, y) in enumerate([(0.9, 1), (0.8, 1), (0.62, 1), (0.58, 0), (0.3, 0),
                                    (0.2, 0)]):
            ex.append(train.Example(name, f"{name}:{k}", f"{name}-{k}", ["s"], ["c"], y, 1))
            oof.append(np.array([p]))
    got = train._pick_threshold(ex, oof, tolerance=0.005)
    assert got["balanced_accuracy"] == got["best_balanced_accuracy"] == 1.0
    assert 0.58 < got["value"] <= 0.62
    assert got["value"] == pytest.approx(0.59)  # the lowest grid point that separates them
    strict = train._pick_threshold(ex, oof, tolerance=0.0)
    assert strict["value"] == pytest.approx(0.59)
    # A wide tolerance trades accuracy for recall of supported statements, never below it.
    loose = train._pick_threshold(ex, oof, tolerance=0.2)
    assert loose["value"] < 0.59 and loose["balanced_accuracy"] >= 1.0 - 0.2
