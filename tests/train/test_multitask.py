"""The answerability head trained jointly with the faithfulness head (issue 40, item 4):
the model with and without it, a mixed-task training run, the export with both outputs the
``nli`` judge reads, and the trip back from a GPU machine (``train.pack`` against a base)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs the train extra: make test runs tests/train in bench/.venv-train")

# (passage, question, label): 2 answers, 1 part, 0 not
QA = [("the Basic plan is email support.", "the Basic plan is email support", 2),
      ("the plan is phone support.", "the Basic plan is email support", 1),
      ("未使用商品日以内返品", "会员卡年", 0), ("会员卡年", "会员卡年", 2),
      ("the Basic plan is not phone support.", "会员卡日", 0)]


@pytest.fixture(scope="module")
def answer_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Rows as ``python -m train.answerability build`` writes them (question, passage, split)."""
    p = tmp_path_factory.mktemp("ans") / "pairs.jsonl.gz"
    with gzip.open(p, "wt", encoding="utf-8") as f:
        for k in range(4):
            for j, (passage, q, y) in enumerate(QA):
                f.write(json.dumps({"question": q, "passage": passage, "label": y, "lang": "en",
                                    "source": "t", "group": f"g{j}", "id": f"{k}:{j}",
                                    "split": "valid" if k == 3 else "train"},
                                   ensure_ascii=False) + "\n")
    return p


def _train(bundle: Path, data: Path, out: Path, *extra: str) -> int:
    from train.train import main

    return main(["--bundle", str(bundle), "--train", str(data / "train.jsonl.gz"),
                 "--valid", str(data / "valid.jsonl.gz"), "--out", str(out), "--max-len", "48",
                 "--batch", "4", "--epochs", "2", "--device", "cpu", *extra])


def _model(bundle: Path, answerability: bool):
    from train.train import build

    torch.manual_seed(0)
    m = build(bundle)
    if answerability:
        m.add_answer_head()
    return m


def test_the_second_head_is_optional_and_leaves_the_logit_alone(tiny_bundle: Path) -> None:
    plain, both = _model(tiny_bundle, False), _model(tiny_bundle, True)
    both.load_state_dict(plain.state_dict(), strict=False)
    plain.eval()
    both.eval()
    ids = torch.tensor([[0, 5, 6, 2, 2, 7, 8, 2], [0, 5, 2, 2, 7, 2, 1, 1]])
    mask = (ids != 1).long()
    z = plain(ids, mask)
    assert z.shape == (2, 1) and plain.answer_head is None
    with pytest.raises(RuntimeError, match="no answerability head"):
        plain.answer_logits(ids, mask)
    z2, probs = both(ids, mask)
    assert torch.equal(z, z2)  # the faithfulness output is computed as without the head
    assert probs.shape == (2, 3)
    assert torch.allclose(probs.sum(-1), torch.ones(2))
    assert not any(k.startswith("answer_head") for k in plain.trained_state())
    assert "answer_head.3.weight" in both.trained_state()


def test_a_mixed_batch_schedule_overfits_both_tasks(tiny_bundle: Path) -> None:
    """Both heads on the shared encoder learn a tiny set: each task's loss falls."""
    from tokenizers import Tokenizer

    from train.train import collate, task_batches

    tk = Tokenizer.from_file(str(tiny_bundle / "tokenizer.json"))
    faith = [("the Basic plan is email support.", "the Basic plan is email support.", 1),
             ("the Basic plan is email support.", "the Basic plan is phone support.", 0)]
    rows = [(p, h, y, 0) for p, h, y in faith] + [(p, q, y, 1) for p, q, y in QA]
    ids = [tk.encode(p, h).ids for p, h, _, _ in rows]
    y = torch.tensor([float(r[2]) for r in rows])
    tasks = [r[3] for r in rows]
    order = task_batches([len(x) for x in ids], tasks, 2, 0)
    assert sorted(i for b in order for i in b) == list(range(len(rows)))
    assert all(len({tasks[i] for i in b}) == 1 for b in order)  # one task a batch
    m = _model(tiny_bundle, True)
    m.drop.p = 0.0
    for mod in (m.head, m.answer_head):
        mod[2].p = 0.0
    opt = torch.optim.AdamW([p for n, p in m.named_parameters() if not n.startswith("word.")],
                            lr=3e-3)

    def losses() -> tuple[float, float]:
        with torch.no_grad():
            f = [i for i, t in enumerate(tasks) if t == 0]
            a = [i for i, t in enumerate(tasks) if t == 1]
            xf, mf = collate(ids, f, 1, "cpu")
            xa, ma = collate(ids, a, 1, "cpu")
            lf = torch.nn.functional.binary_cross_entropy_with_logits(m.logit(xf, mf), y[f])
            la = torch.nn.functional.cross_entropy(m.answer_logits(xa, ma), y[a].long())
        return float(lf), float(la)

    before = losses()
    for epoch in range(40):
        for b in task_batches([len(x) for x in ids], tasks, 2, epoch):
            x, mk = collate(ids, b, 1, "cpu")
            if tasks[b[0]] == 0:
                loss = torch.nn.functional.binary_cross_entropy_with_logits(m.logit(x, mk), y[b])
            else:
                loss = torch.nn.functional.cross_entropy(m.answer_logits(x, mk), y[b].long())
            opt.zero_grad()
            loss.backward()
            opt.step()
    after = losses()
    assert after[0] < 0.5 * before[0] and after[1] < 0.5 * before[1], (before, after)


def test_answerability_rows_that_do_not_fit_are_left_out(tiny_bundle: Path, tmp_path: Path
                                                         ) -> None:
    """A cut passage may lose its answer, and cut passages that hold nothing alone would teach
    that a full window holds no answer: every row over --max-len is left out."""
    import argparse

    from train.train import answerability_rows

    long = "the Basic plan is email support. " * 20
    rows = [("the plan is email support.", 2, "train"), (long, 2, "train"), (long, 0, "train"),
            ("the plan is phone support.", 0, "train"), ("the plan.", 1, "valid")]
    p = tmp_path / "a.jsonl"
    p.write_text("".join(json.dumps({"question": "the Basic plan", "passage": t, "label": y,
                                     "split": s}) + "\n" for t, y, s in rows))
    a = argparse.Namespace(answerability=str(p), limit=None, valid_limit=None, max_len=48)
    (tr, tr_ids), (va, va_ids) = answerability_rows(a, tiny_bundle / "tokenizer.json")
    assert [len(x) for x in (tr_ids, va_ids)] == [len(tr), len(va)]
    assert all(len(ids) <= 48 for ids in tr_ids + va_ids)
    assert [(r["premise"], r["label"]) for r in tr] == [(rows[0][0], 2), (rows[3][0], 0)]
    assert [(r["premise"], r["hypothesis"], r["label"]) for r in va] == \
        [("the plan.", "the Basic plan", 1)]


def test_a_joint_run_exports_both_outputs_the_judge_reads(tiny_bundle: Path, tiny_data: Path,
                                                          answer_file: Path, tmp_path: Path
                                                          ) -> None:
    from tokenizers import Tokenizer

    from ragpulse.scorer.judges.nli import NliJudgeSettings, NliModel
    from train.export import ANSWERABILITY_VERSION, export
    from train.train import build, load_shards

    out = tmp_path / "out"
    assert _train(tiny_bundle, tiny_data, out, "--answerability", str(answer_file),
                  "--answerability-weight", "0.5", "--answer-head-lr", "1e-3") == 0
    m = json.loads((out / "metrics.json").read_text())
    rep = m["answerability"]
    assert m["answerability_train_pairs"] == 15 and rep["n"] == 5 and m["train_pairs"] == 24
    assert 0.0 <= rep["auroc"] <= 1.0 and 0.0 <= rep["accuracy"] <= 1.0
    assert set(rep["thresholds"]) == {"useful", "partly", "answers"}
    scores = np.load(out / "valid_scores.npz")
    assert scores["answer_probs"].shape == (5, 3) and list(scores["answer_label"]) == \
        [y for _, _, y in QA]
    assert scores["logit"].shape == (8,)  # the faithfulness validation as before

    cal = {"a": 0.5, "b": 0.25}
    dest = export(tiny_bundle, out, tmp_path / "model", cal, max_len=48)
    cfg = json.loads((dest / "config.json").read_text())
    assert cfg["answerability"]["version"] == ANSWERABILITY_VERSION
    assert cfg["answerability"]["thresholds"] == rep["thresholds"]
    nli = NliModel(NliJudgeSettings(model_dir=dest))
    assert nli.answerability is not None
    assert nli.answerability.useful == rep["thresholds"]["useful"]
    wm = build(tiny_bundle)
    load_shards(wm, out)
    wm.eval()
    tk = Tokenizer.from_file(str(dest / "tokenizer.json"))
    pairs = [(p, q) for p, q, _ in QA]
    got_p = nli.pair_probabilities(pairs)
    got_a = nli.pair_outputs(pairs, "answerability")
    for (p, q), gp, ga in zip(pairs, got_p, got_a, strict=True):
        ids = torch.tensor([tk.encode(p, q).ids])
        with torch.no_grad():
            z, probs = wm(ids, torch.ones_like(ids))
        assert gp == pytest.approx(float(torch.sigmoid(z[0, 0])), abs=0.03)  # int8
        assert np.abs(ga - probs[0].numpy()).max() < 0.03
    matrix = nli.answerability_matrix("the Basic plan is email support", [QA[0][0], ""])
    assert matrix.shape == (2, 3) and list(matrix[1]) == [1.0, 0.0, 0.0]
    # the first output's semantics: the same as the same weights exported without the head
    plain_w = tmp_path / "plain"
    plain_w.mkdir()
    w = dict(np.load(out / "weights-0.npz"))
    np.savez(plain_w / "weights-0.npz", **{k: v for k, v in w.items()
                                           if not k.startswith("answer_head.")})
    plain = NliModel(NliJudgeSettings(model_dir=export(tiny_bundle, plain_w, tmp_path / "pm",
                                                       cal, max_len=48)))
    assert plain.answerability is None
    assert np.array_equal(plain.pair_probabilities(pairs), got_p)


def test_export_refuses_a_head_without_validation_cuts(tiny_bundle: Path, tiny_data: Path,
                                                       answer_file: Path, tmp_path: Path) -> None:
    from train.export import export

    out = tmp_path / "out"
    assert _train(tiny_bundle, tiny_data, out, "--answerability", str(answer_file),
                  "--stop-after", "2") == 0  # no metrics yet: weights from a checkpoint
    st = torch.load(out / "ckpt" / "ckpt.pt", weights_only=False)["model"]
    assert "answer_head.0.weight" in st
    from train.train import save_shards

    save_shards(st, tmp_path / "w")
    with pytest.raises(ValueError, match="never guessed"):
        export(tiny_bundle, tmp_path / "w", tmp_path / "model", max_len=48)


def test_the_second_head_survives_pack_unpack_and_reads_back(tiny_bundle: Path,
                                                             tiny_data: Path, answer_file: Path,
                                                             tmp_path: Path) -> None:
    """A joint run continued from a faithfulness-only model comes back (train.pack --base):
    the new head as weights, the encoder as its change; the unpacked run exports both
    outputs, and train.from_onnx reads the second head back out of the graph."""
    from train.export import export
    from train.from_onnx import read_weights
    from train.pack import pack, read_shards, unpack

    base = tmp_path / "base"
    _train(tiny_bundle, tiny_data, base, "--epochs", "1")
    out = tmp_path / "out"
    assert _train(tiny_bundle, tiny_data, out, "--init", str(base), "--answerability",
                  str(answer_file), "--lr", "1e-5") == 0
    pack(out, tmp_path / "trip" / "run", parts=2, base=base)
    back = unpack(tmp_path / "trip" / "run", tmp_path / "back", base=base)
    a, b = read_shards(out), read_shards(back)
    assert a.keys() == b.keys() and "answer_head.0.weight" in b
    for k in ("answer_head.0.weight", "answer_head.3.weight"):
        step = np.abs(a[k].astype(np.float32)).max(axis=1, keepdims=True) / 127
        assert np.all(np.abs(a[k].astype(np.float32) - b[k].astype(np.float32)) <= step * 0.51
                      + 1e-3)
    assert np.array_equal(a["answer_head.3.bias"], b["answer_head.3.bias"])
    assert json.loads((back / "metrics.json").read_text())["answerability"]["thresholds"]
    assert np.load(back / "valid_scores.npz")["answer_probs"].shape == (5, 3)
    dest = export(tiny_bundle, back, tmp_path / "model", max_len=48)
    assert "answerability" in json.loads((dest / "config.json").read_text())
    state = read_weights(dest / "model.onnx")
    for k in ("answer_head.0.weight", "answer_head.0.bias", "answer_head.3.weight",
              "answer_head.3.bias"):
        assert np.allclose(state[k], b[k].astype(np.float32), atol=1e-3), k
