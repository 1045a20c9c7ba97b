"""The NLI model runner on a tiny ONNX model built here: loading, labels, windows, batching and
the start-up errors a bad model directory must give."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from ragpulse.scorer.judges.nli import NliJudgeSettings, NliModel, NliModelError

from .tiny import build_tiny_nli


def model(d: Path, **kw) -> NliModel:
    return NliModel(NliJudgeSettings(model_dir=d, **kw))


def test_loads_labels_window_and_name(tiny_dir: Path) -> None:
    m = model(tiny_dir)
    assert m.labels == ["contradiction", "entailment", "neutral"]
    assert m.positive_index == 1 and m.positive_label == "entailment"
    assert m.max_length == 32  # config.json's max_position_embeddings
    assert m.special_tokens == 3  # [CLS] a [SEP] b [SEP]
    assert m.name == "tests/tiny-nli"  # a hub-style _name_or_path is kept
    assert model(tiny_dir, max_length=20).max_length == 20
    assert model(tiny_dir, max_length=4096).max_length == 32  # never past the model's own limit
    p = m.pair_probabilities([("the evidence is here .", "paris is the capital ."),
                              ("paris is the capital .", "paris"),
                              ("it contradicts paris .", "paris")])
    assert p[0] > 0.99 and 0.05 < p[1] < 0.2 and p[2] < 0.01


def test_local_path_is_not_stored_as_the_model_name(tmp_path: Path) -> None:
    d = build_tiny_nli(tmp_path / "my-export", config_extra={"_name_or_path": "/home/x/ckpt"})
    assert model(d).name == "my-export"
    assert model(d, model_name="nli-deberta").name == "nli-deberta"


def test_graph_without_token_type_ids(tmp_path: Path) -> None:
    m = model(build_tiny_nli(tmp_path / "m", token_type_ids=False))
    assert set(m._inputs) == {"input_ids", "attention_mask"}
    assert m.predict(["paris"], ["the evidence ."])[0] > 0.99


@pytest.mark.parametrize(
    ("labels", "positive", "wanted", "index"),
    [
        ({0: "entailment", 1: "neutral", 2: "contradiction"}, 0, None, 0),
        ({0: "not_entailment", 1: "entailment"}, 1, None, 1),  # not fooled by "not_entailment"
        ({0: "Hallucinated", 1: "Consistent"}, 1, None, 1),
        ({0: "LABEL_0", 1: "LABEL_1"}, 1, "1", 1),  # HHEM-style: an index
        ({0: "contradiction", 1: "entailment", 2: "neutral"}, 1, "NEUTRAL", 2),  # by name
    ],
)
def test_positive_label(tmp_path: Path, labels, positive, wanted, index) -> None:
    m = model(build_tiny_nli(tmp_path / "m", labels=labels, positive=positive),
              positive_label=wanted)
    assert m.positive_index == index


def test_positive_label_decides_the_probability(tiny_dir: Path) -> None:
    pair = [("paris", "unsupported paris")]  # the tiny model reads this as neutral
    assert model(tiny_dir).pair_probabilities(pair)[0] < 0.01
    assert model(tiny_dir, positive_label="neutral").pair_probabilities(pair)[0] > 0.99


@pytest.mark.parametrize(
    ("labels", "wanted", "message"),
    [
        ({0: "contradiction", 1: "entailment", 2: "neutral"}, "supported", "is not among"),
        ({0: "contradiction", 1: "entailment", 2: "neutral"}, "7", "is not among"),
        ({0: "LABEL_0", 1: "LABEL_1"}, None, "--positive-label"),
        ({0: "entailment", 1: "supported"}, None, "cannot tell"),
    ],
)
def test_bad_or_unknown_labels_fail_at_construction(tmp_path: Path, labels, wanted,
                                                    message) -> None:
    d = build_tiny_nli(tmp_path / "m", labels=labels)
    with pytest.raises(ValueError, match=message):
        model(d, positive_label=wanted)


def test_one_logit_model_uses_a_sigmoid(tmp_path: Path) -> None:
    d = build_tiny_nli(tmp_path / "m", labels={})
    with pytest.raises(ValueError, match="no id2label"):
        model(d)
    m = model(d, positive_label="0")
    p = m.pair_probabilities([("the evidence .", "paris"), ("paris", "paris")])
    assert p[0] > 0.99 and p[1] == pytest.approx(1 / (1 + np.exp(4.0)), rel=1e-4)


def _long_context(n_filler: int, tail: str) -> str:
    return " ".join(["the filler text of the city ."] * n_filler) + " " + tail


def test_long_context_is_chunked_and_the_late_support_found(tiny_dir: Path) -> None:
    m = model(tiny_dir, chunk_overlap=4)
    ctx = _long_context(20, "paris evidence .")  # ~143 tokens; the window is 32
    pieces = m.chunks(ctx, 20)
    assert len(pieces) > 5 and "evidence" in pieces[-1] and "evidence" not in pieces[0]
    matrix, pairs = m.support_matrix(["paris is the capital ."], [ctx, "the city ."])
    assert pairs == len(m.chunks(ctx, 32 - 3 - 5)) + 1  # window: 32 - specials - statement
    assert matrix[0, 0] > 0.99 and matrix[0, 1] < 0.2
    # the same context cut at the window (what truncation alone does) misses it
    assert m.pair_probabilities([(ctx, "paris is the capital .")])[0] < 0.2


def test_chunks_cover_every_token_and_overlap(tiny_dir: Path) -> None:
    words = [f"w{i}" for i in range(50)]  # unknown words: one token each
    pieces = model(tiny_dir, chunk_overlap=0).chunks(" ".join(words), 7)
    assert [w for p in pieces for w in p.split()] == words
    pieces = model(tiny_dir, chunk_overlap=3).chunks(" ".join(words), 7)
    assert [p.split() for p in pieces[:2]] == [words[0:7], words[4:11]]
    assert pieces[-1].split()[-1] == "w49" and all(len(p.split()) <= 7 for p in pieces)
    # an overlap larger than half the window is cut to half: the chunks still advance
    assert len(model(tiny_dir, chunk_overlap=100).chunks(" ".join(words), 8)) == 12


def test_long_statement_is_cut_not_the_premise(tiny_dir: Path) -> None:
    m = model(tiny_dir)
    stmt = " ".join(["paris"] * 100)
    p = m.predict([stmt], ["the evidence ."])
    assert p[0] > 0.99


@pytest.mark.parametrize("slack", [None, 100.0])
def test_batch_size_does_not_change_scores(tiny_dir: Path, slack: float | None,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Batched or alone, the same P; with a slack of 100x the batches are padded (8 pairs of
    lengths 3 to 40 tokens in one), by default they hold pairs of about one length."""
    from ragpulse.scorer.judges.nli import onnx_model

    if slack is not None:
        monkeypatch.setattr(onnx_model, "PADDING_SLACK", slack)
    pairs = [(" ".join(["the city"] * k) + (" evidence" if k % 3 == 0 else ""),
              "paris" + " is" * (k % 4)) for k in range(1, 14)]
    one = model(tiny_dir, batch_size=1).pair_probabilities(pairs)
    eight = model(tiny_dir, batch_size=8).pair_probabilities(pairs)
    assert np.allclose(one, eight, atol=1e-6)
    assert (one > 0.99).sum() == 4  # the pairs with "evidence" only, padding or not
    # a float graph: padded batches give the same logits, so pairs run batched
    assert model(tiny_dir, batch_size=8).batch_invariant


def test_too_many_pairs_raise_before_running(tiny_dir: Path) -> None:
    from ragpulse.scorer.judges.nli.onnx_model import PairsTooMany

    m = model(tiny_dir, max_pairs=5)
    with pytest.raises(PairsTooMany, match="max_pairs 5"):
        m.support_matrix(["a", "b", "c"], ["x", "y"])
    assert m.support_matrix(["a"], ["", "  "])[1] == 0  # blank contexts: no pair


def test_candidates_run_each_statement_against_its_most_overlapping_chunks(tiny_dir: Path
                                                                          ) -> None:
    m = model(tiny_dir, candidates=1)
    ctx = ["the evidence is here .", "paris is the capital ."]
    p, pairs = m.support_matrix(["paris is the capital .", "the evidence"], ctx)
    assert pairs == 2  # one chunk per statement instead of two
    assert p[0, 0] == 0.0 and p[1, 1] == 0.0  # not a candidate: not run, counts as 0
    full, n = model(tiny_dir).support_matrix(["paris is the capital .", "the evidence"], ctx)
    assert n == 4 and p[0, 1] == pytest.approx(full[0, 1]) and p[1, 0] == pytest.approx(full[1, 0])


# ---------------------------------------------------------------------- start-up errors


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_missing_or_malformed_directory_fails_at_construction(tiny_dir: Path,
                                                              tmp_path: Path) -> None:
    assert issubclass(NliModelError, ValueError)  # the factory's user-facing error type
    with pytest.raises(NliModelError, match="needs a model directory"):
        NliModel(NliJudgeSettings())
    with pytest.raises(ValueError, match="does not exist"):
        model(tmp_path / "nowhere")
    d = _copy(tiny_dir, tmp_path / "no-onnx")
    (d / "model.onnx").unlink()
    with pytest.raises(ValueError, match="no model.onnx"):
        model(d)
    d = _copy(tiny_dir, tmp_path / "nested")  # Xenova-style layout: onnx/model.onnx
    (d / "onnx").mkdir()
    (d / "model.onnx").rename(d / "onnx" / "model.onnx")
    assert model(d).positive_index == 1
    d = _copy(tiny_dir, tmp_path / "no-tok")
    (d / "tokenizer.json").unlink()
    with pytest.raises(ValueError, match="no tokenizer.json"):
        model(d)
    d = _copy(tiny_dir, tmp_path / "bad-tok")
    (d / "tokenizer.json").write_text("{}")
    with pytest.raises(ValueError, match="tokenizer.json cannot be loaded"):
        model(d)
    d = _copy(tiny_dir, tmp_path / "no-config")
    (d / "config.json").unlink()
    with pytest.raises(ValueError, match="no config.json"):
        model(d)
    d = _copy(tiny_dir, tmp_path / "bad-config")
    (d / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="cannot be read as JSON"):
        model(d)
    d = _copy(tiny_dir, tmp_path / "bad-id2label")
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "id2label": {"0": "a", "2": "b"}}))
    with pytest.raises(ValueError, match="0..n-1"):
        model(d)
    d = _copy(tiny_dir, tmp_path / "garbage-onnx")
    (d / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="onnxruntime cannot load it"):
        model(d)


def test_a_block8_graph_on_an_old_onnxruntime_names_the_version_it_needs(
        tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph whose MatMulNBits the runtime cannot run (here: 3 bits, which no version runs)
    is refused; on an onnxruntime older than 1.22 the error says what a block8 export needs."""
    import numpy as np
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    d = _copy(tiny_dir, tmp_path / "nbits")
    node = helper.make_node("MatMulNBits", ["x", "B", "scales"], ["logits"],
                            domain="com.microsoft", K=32, N=3, bits=3, block_size=32)
    g = helper.make_graph([helper.make_node("Cast", ["input_ids"], ["x0"], to=TensorProto.FLOAT),
                           helper.make_node("Tile", ["x0", "reps"], ["x"]), node], "g",
                          [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", 1])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["b", 3])],
                          initializer=[numpy_helper.from_array(np.zeros((3, 1, 12), np.uint8), "B"),
                                       numpy_helper.from_array(np.ones(3, np.float32), "scales"),
                                       numpy_helper.from_array(np.array([1, 32]), "reps")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                  helper.make_opsetid("com.microsoft", 1)]),
              str(d / "model.onnx"))
    with pytest.raises(ValueError, match="onnxruntime cannot load it") as now:
        model(d)
    assert "needs onnxruntime >= 1.22" not in str(now.value)
    monkeypatch.setattr(onnxruntime, "__version__", "1.20.1")
    with pytest.raises(ValueError, match="block8 model needs onnxruntime >= 1.22, this is 1.20.1"):
        model(d)


def test_label_count_must_match_the_graph(tmp_path: Path) -> None:
    d = build_tiny_nli(tmp_path / "m")  # three logits
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps(
        {**cfg, "id2label": {"0": "not_entailment", "1": "entailment"}}))
    with pytest.raises(ValueError, match="shape"):
        model(d)


def test_a_graph_with_other_inputs_is_refused(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    d = build_tiny_nli(tmp_path / "m")
    g = helper.make_graph(
        [helper.make_node("Identity", ["pixel_values"], ["logits"])], "g",
        [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["b", 3])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["b", 3])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
              str(d / "model.onnx"))
    with pytest.raises(ValueError, match="unsupported input 'pixel_values'"):
        model(d)


def test_missing_packages_name_the_extra(tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if not installed
    with pytest.raises(ValueError, match=r"pip install 'ragpulse\[nli\]'"):
        model(tiny_dir)


def test_batches_hold_pairs_of_about_one_length() -> None:
    """``padded_batches``: every pair once, at most ``batch_size`` a batch, each batch padded
    by at most the slack; on the CPU a padded token costs what a real one does, so the typical
    trace's batches of 8 padded to their longest cost 1.4x the pairs alone."""
    import random

    from ragpulse.scorer.judges.nli.onnx_model import PADDING_SLACK, padded_batches

    rng = random.Random(3)
    for _ in range(200):
        lengths = [rng.randint(5, 256) for _ in range(rng.randint(0, 40))]
        for size in (1, 2, 8, 64):
            batches = padded_batches(lengths, size)
            assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
            for b in batches:
                assert 1 <= len(b) <= size
                real = sum(lengths[i] for i in b)
                assert max(lengths[i] for i in b) * len(b) <= (1 + PADDING_SLACK) * real + 1e-9
            if size == 1:
                assert all(len(b) == 1 for b in batches)
    # equal lengths fill whole batches; a long pair does not join short ones
    assert padded_batches([10] * 10, 4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert padded_batches([10, 10, 200], 8) == [[0, 1], [2]]
    assert padded_batches([10, 10, 200], 8, slack=100.0) == [[0, 1, 2]]
