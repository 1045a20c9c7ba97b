"""train.answerability: the graph surgery that adds the answerability head, the head's fit and
its thresholds, the reading-comprehension pairs."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from train import answerability as ans


def _graph() -> onnx.ModelProto:
    """x [B, 4] -> feat = tanh(x @ a) [B, 6] -> logits = feat @ b [B, 1]: a stand-in for the
    encoder, with ``feat`` where the real graph has its head's features."""
    rng = np.random.default_rng(0)
    a = numpy_helper.from_array(rng.normal(size=(4, 6)).astype(np.float32), "a")
    b = numpy_helper.from_array(rng.normal(size=(6, 1)).astype(np.float32), "b")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "a"], ["pre"]), helper.make_node("Tanh", ["pre"], ["feat"]),
         helper.make_node("MatMul", ["feat", "b"], ["logits"])],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])], [a, b])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _run(m: onnx.ModelProto, x: np.ndarray, outputs: list[str]) -> list[np.ndarray]:
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(outputs, {"x": x})


def _head(rng: np.random.Generator, d: int = 6, h: int = 5) -> dict[str, np.ndarray]:
    return {"w1": rng.normal(size=(d, h)).astype(np.float32),
            "b1": rng.normal(size=h).astype(np.float32),
            "w2": rng.normal(size=(h, 3)).astype(np.float32),
            "b2": rng.normal(size=3).astype(np.float32)}


def test_the_head_adds_an_output_and_leaves_the_first_one_bit_identical() -> None:
    base = _graph()
    head = _head(np.random.default_rng(1))
    new = ans.add_head(base, **head, tensor="feat")
    x = np.random.default_rng(2).normal(size=(3, 4)).astype(np.float32)
    (before,) = _run(base, x, ["logits"])
    after, probs = _run(new, x, ["logits", ans.OUTPUT])
    assert np.array_equal(before, after)
    assert probs.shape == (3, 3) and np.allclose(probs.sum(axis=1), 1.0, atol=1e-6)
    (feat,) = _run(ans.expose(base, "feat"), x, ["feat"])
    assert np.allclose(probs, ans.head_probabilities(feat, head), atol=1e-5)
    with pytest.raises(ValueError, match="already has an output"):
        ans.add_head(new, **head, tensor="feat")


def test_without_head_gives_back_the_graph_it_was_added_to() -> None:
    base = _graph()
    new = ans.add_head(base, **_head(np.random.default_rng(3)), tensor="feat")
    back = ans.without_head(new)
    assert [n.name for n in back.graph.node] == [n.name for n in base.graph.node]
    assert [o.name for o in back.graph.output] == ["logits"]
    assert {t.name for t in back.graph.initializer} == {"a", "b"}


def test_thresholds_separate_the_validation_rows() -> None:
    rng = np.random.default_rng(0)
    labels = np.repeat([0, 1, 2], 200)
    probs = np.zeros((600, 3))
    probs[:, 2] = np.where(labels == 2, rng.uniform(0.6, 0.9, 600), rng.uniform(0.0, 0.2, 600))
    probs[:, 1] = np.where(labels == 1, rng.uniform(0.5, 0.8, 600), rng.uniform(0.0, 0.1, 600))
    probs[:, 0] = 1 - probs[:, 1] - probs[:, 2]
    cuts = ans.choose_thresholds(probs, labels)
    reach = probs[:, 1] + probs[:, 2]
    assert ((reach >= cuts["useful"]) == (labels >= 1)).all()
    assert cuts["partly"] == cuts["useful"]
    sel = labels >= 1
    assert ((probs[sel, 2] >= cuts["answers"]) == (labels[sel] == 2)).all()


def test_fit_head_learns_three_separable_classes() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 600)
    x = rng.normal(size=(600, 8)).astype(np.float32) + 3.0 * np.eye(8, dtype=np.float32)[y]
    head = ans.fit_head(x, y, hidden=8, epochs=30)
    assert head["w1"].shape == (8, 8) and head["w2"].shape == (8, 3)
    assert (ans.head_probabilities(x, head).argmax(axis=1) == y).mean() > 0.95


def test_passage_probs_take_each_rows_best_window() -> None:
    wp = np.array([[0.9, 0.05, 0.05], [0.1, 0.1, 0.8], [0.2, 0.7, 0.1]])
    got = ans.passage_probs(wp, np.array([0, 0, 1]), 3)
    assert np.allclose(got, [[0.1, 0.1, 0.8], [0.2, 0.7, 0.1], [1.0, 0.0, 0.0]])


def test_reading_rows_pair_a_question_with_its_paragraph_and_a_close_one_without_the_answer(
        ) -> None:
    items = [
        {"article": "a", "para": "a:0", "context": "The river Seine flows through Paris.",
         "qas": [{"q": "Which river flows through Paris?", "a": "Seine", "start": 4}]},
        {"article": "a", "para": "a:1", "context": "Paris is the capital of France, a river city.",
         "qas": [{"q": "What is the capital of France?", "a": "Paris", "start": 0}]},
        {"article": "a", "para": "a:2", "context": "The Seine is long.",
         "qas": [{"q": "How long is it?", "a": "long", "start": 11}]},
    ]
    rows = ans.reading_rows(items, "en", "test", questions=10)
    by_id = {r["id"]: r for r in rows}
    pos = by_id["a:0:pos"]
    assert pos["label"] == 2 and pos["passage"] == items[0]["context"]
    neg = by_id["a:0:neg"]  # a:2 holds "Seine": never the negative
    assert neg["label"] == 0 and neg["passage"] == items[1]["context"]
    assert {r["split"] for r in rows} <= {"train", "valid"}
    assert len({r["split"] for r in rows if r["group"] == "a"}) == 1  # one article, one split
