"""train.truncate: the student graph is the shipped graph cut after one encoder layer with a new
head; cut after the last layer with the teacher's own head it IS the teacher; the features the
head is fitted on are what the student graph computes."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from tests.train.test_data import _mirror
from train import truncate as tr

PAIRS = [("Unused items can be returned for a full refund within 30 days of purchase.",
          "You can return unused items within 30 days for a full refund."),
         ("購入後30日以内であれば、未使用の商品は全額返金されます。", "返金は90日以内です。"),
         ("购买后30天内，未使用的商品可以全额退款。", "未使用的商品可以在30天内退款。")]


@pytest.fixture(scope="module")
def shipped() -> onnx.ModelProto:
    return onnx.load(str(tr.MODEL_DIR / "model.onnx"))


@pytest.fixture(scope="module")
def tok():
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(tr.MODEL_DIR / "tokenizer.json"))


def _run(model: onnx.ModelProto, tok, outputs: list[str]) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = {i.name for i in s.get_inputs()}
    out: list[list[np.ndarray]] = [[] for _ in outputs]
    for p, h in PAIRS:  # one pair at a time, as the judge runs the int8 graph
        e = tok.encode(p, h)
        feed = {"input_ids": np.array([e.ids], np.int64),
                "attention_mask": np.array([e.attention_mask], np.int64),
                "token_type_ids": np.array([e.type_ids], np.int64)}
        for k, v in zip(outputs, s.run(outputs, {k: v for k, v in feed.items() if k in names}),
                        strict=True):
            out[outputs.index(k)].append(np.asarray(v).reshape(1, -1))
    return [np.concatenate(o) for o in out]


def _ops(m: onnx.ModelProto, op: str) -> int:
    return sum(n.op_type == op for n in m.graph.node)


def test_cut_after_the_last_layer_with_the_teachers_head_is_the_teacher(shipped, tok) -> None:
    head, cal = tr.teacher_head(shipped)
    same = tr.student_graph(shipped, tr.LAST, head, cal)
    (a,), (b,) = _run(shipped, tok, ["logits"]), _run(same, tok, ["logits"])
    assert np.array_equal(a, b)


def test_a_cut_student_runs_fewer_layers_and_computes_its_head_on_the_features(shipped,
                                                                                  tok) -> None:
    layer = 7
    rng = np.random.default_rng(0)
    head = {"w1": rng.normal(0, 0.05, (16, tr.WIDTH)).astype(np.float32),
            "b1": rng.normal(0, 0.1, 16).astype(np.float32),
            "w2": rng.normal(0, 0.5, (1, 16)).astype(np.float32),
            "b2": np.array([0.2], np.float32)}
    student = tr.student_graph(shipped, layer, head)
    # 4 quantized products a layer (q, k, v, attention out) and 2 per-row ones (feed-forward)
    assert _ops(shipped, "DynamicQuantizeMatMul") == 4 * (tr.LAST + 1)
    assert _ops(student, "DynamicQuantizeMatMul") == 4 * (layer + 1)
    assert _ops(student, "MatMulInteger") == 2 * (layer + 1)
    assert not any(n.name.startswith(f"/layers.{layer + 1}/") for n in student.graph.node)
    (logits,) = _run(student, tok, ["logits"])
    (feats,) = _run(tr.features_graph(shipped, (5, layer)), tok, ["truncate/features"])
    assert feats.shape == (len(PAIRS), 2 * tr.WIDTH)
    expected = tr.head_logits(feats[:, tr.WIDTH:], head)
    np.testing.assert_allclose(logits[:, 0], expected, rtol=1e-4, atol=1e-4)


def test_the_student_directory_loads_in_the_judges_model(shipped, tmp_path) -> None:
    from ragpulse.scorer.judges.nli.onnx_model import NliModel
    from ragpulse.scorer.judges.nli.settings import NliJudgeSettings

    head, _ = tr.teacher_head(shipped)
    d = tr.write_student(tmp_path / "s", 8, head, {"layers": 9})
    nli = NliModel(NliJudgeSettings(model_dir=d))  # loads, checks labels, runs a test pair
    p = nli.pair_probabilities(PAIRS)
    assert p.shape == (3,) and np.all((p >= 0) & (p <= 1))
    assert nli.name.endswith("-L9")


def test_the_cut_is_refused_where_the_graph_is_not_the_faithfulness_export(shipped) -> None:
    head, _ = tr.teacher_head(shipped)
    with pytest.raises(ValueError, match="no encoder layer 12"):
        tr.student_graph(shipped, 12, head)
    bent = onnx.ModelProto()
    bent.CopyFrom(shipped)
    for n in bent.graph.node:
        if n.name == "/Mul_2":
            n.input[0] = tr._states(3)
    with pytest.raises(ValueError, match="pooling"):
        tr.student_graph(bent, 7, head)


def test_the_head_is_distilled_to_the_teachers_logit() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(3.0, 2.0, (4000, 12)).astype(np.float32)  # off-centre: the folding matters
    z = 2.0 * np.tanh(0.4 * (x[:, 0] - 3.0)) + 0.5 * (x[:, 1] - 3.0) - 0.3
    head = tr.fit_head(x[:3000], z[:3000], hidden=16, epochs=120)
    pred = tr.head_logits(x[3000:], head)
    assert head["w1"].shape == (16, 12) and head["w2"].shape == (1, 16)
    assert np.corrcoef(pred, z[3000:])[0, 1] > 0.99
    assert np.sqrt(np.mean((pred - z[3000:]) ** 2)) < 0.15


def test_corpus_pairs_are_training_domains_split_by_scenario() -> None:
    from train.data import rag_corpus as rc

    rows = tr.corpus_pairs(3000, seed=0)
    held = {r["id"] for r in rc.committed() if rc.DOMAINS[r["domain"]] == "heldout"}
    assert len(rows) == 3000 and {r["source"] for r in rows} == {"corpus"}
    texts = {(r["premise"], r["hypothesis"]) for r in rows}
    train_pairs = rc.nli_pairs([r for r in rc.committed() if r["id"] not in held])
    assert texts <= {(r["premise"], r["hypothesis"]) for r in train_pairs}
    valid = sum(r["split"] == "valid" for r in rows) / len(rows)
    assert 0.08 < valid < 0.25


def test_judge_pairs_are_what_the_judge_runs_each_once() -> None:
    rows = tr.judge_pairs(4, seed=0)
    pairs = [(r["premise"], r["hypothesis"]) for r in rows]
    assert rows and len(set(pairs)) == len(pairs)
    assert {r["source"] for r in rows} == {"judge"} and {r["split"] for r in rows} <= {"train",
                                                                                   "valid"}
    # sentence premises and passage windows both: the judge's evidence cascade
    lengths = sorted(len(p) for p, _ in pairs)
    assert lengths[0] < 300 and lengths[-1] > 300


NLI_SOURCES = ("yahoojapan/JGLUE", "verypluming/JaNLI", "OanaMariaCamburu/e-SNLI",
               "asahi-y/JNLI-Neg")


@pytest.mark.mirror
@pytest.mark.skipif(not _mirror(*NLI_SOURCES), reason=(
    "needs the NLI sources' pinned GitHub snapshots under RAGPULSE_MIRROR; runs where they are "
    "mirrored"))
def test_nli_pairs_take_each_source_alike_and_keep_out_the_eval_sets() -> None:
    from train.data import build

    rows = tr.nli_source_pairs(30, seed=0)
    by: dict[str, int] = {}
    for r in rows:
        by[r["source"]] = by.get(r["source"], 0) + 1
    # SNLI's dev and test are one source of 30, named by their split
    assert by.pop("snli_dev", 0) + by.pop("snli_test", 0) == 30
    assert by == {"jnli_test": 30, "jsts_train": 30, "janli_train": 30, "jnli_neg_train": 30}
    ev = build.eval_shingles()
    assert not any(build.touches_eval(r, ev) for r in rows)


def test_extract_gives_each_pair_its_own_features_in_order_with_more_workers_than_pairs() -> None:
    rows = [{"premise": p, "hypothesis": h} for p, h in PAIRS[:2]]
    feats, logits = tr.extract(rows, (7,), workers=3)
    alone = [tr.extract([r], (7,), workers=1) for r in rows]
    assert feats.shape == (2, tr.WIDTH) and logits.shape == (2,)
    for k, (f, z) in enumerate(alone):
        np.testing.assert_array_equal(feats[k], f[0])
        assert logits[k] == z[0]
    with pytest.raises(ValueError, match="no pairs"):
        tr.extract([], (7,))
