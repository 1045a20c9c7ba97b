"""The answerability head (issue 40, item 4): does a retrieved passage hold the answer to the
question (2), part of it (1), or not (0), however on-topic it is. A second head on the SAME
frozen int8 encoder as the faithfulness output, so ``logits`` stays bit-identical::

    python -m train.answerability build --out DIR      # (question, passage, label) pairs
    python -m train.answerability features --dir DIR   # the int8 graph's head features, batch 1
    python -m train.answerability fit --dir DIR        # the head (torch), thresholds on valid
    python -m train.answerability export --dir DIR --dest scorer/ragpulse/scorer/judges/nli/faith_e5

The faithfulness head reads ``[<s> state ; mean of the hypothesis tokens' states]`` of the last
encoder layer (768 floats, ``train/model.py``): the graph's tensor ``/Concat_output_0``. The
answerability head reads the same pooling of encoder layers 6 and 9 too (:data:`LAYERS`, pooled
by copies of the graph's own nodes: :func:`add_features`), 2,304 floats (:data:`FEATURES`; layer
12 alone gave validation AUROC 0.767, the three layers 0.805). ``features`` exposes them as an
extra output of the shipped int8 graph and runs every (passage window, question) pair alone
through onnxruntime, as the judge does at inference (premise = a window of the passage from
``NliModel.question_windows``, the faithfulness pairs' tokenizer and truncation; hypothesis =
the question). ``fit`` trains a 1-hidden-layer MLP (2304 -> 64, tanh -> 3) on the features of
the training split; ``export`` writes the pooling and the head into the graph as float32 nodes
(a second output ``answerability``, ``[B, 3]`` softmax probabilities) and checks that
``logits`` is bit-identical to the source graph's on sample pairs. ``answerability@1`` (this
recipe) is not bundled: it misses issue 40's goals (train/README.md, docs/benchmarks.md).

Data (``build``), each source read from its pinned snapshot (``train/data/sources.py``):

* the project's RAG corpus (``train/data/rag_corpus.py``, written by this project's developers,
  the project's licence): every passage of a scenario of a TRAINING domain with its
  ``passage_labels`` 2/1/0. Held-out domains are never read here (they are the evaluation set);
* JaQuAD train + dev (SkelterLabsInc/JaQuAD, CC BY-SA 3.0; articles titled as a held-out JSQuAD
  valid article skipped), CMRC 2018 train (ymcui/cmrc2018 via SunYanCN/bert-text, CC BY-SA 4.0)
  and the SQuAD 2.0 dev excerpt (VinACE/san_mrc, CC BY-SA 4.0): a question with its gold
  paragraph = 2; the other paragraph of the same article sharing most of the question's
  vocabulary (and not containing the answer string) = 0 (CMRC 2018 has one paragraph an
  article: the negative is the paragraph of 300 others that shares most of it).

JSQuAD (any split) and everything under ``/work/shared/data`` are evaluation sets: never read.
Scenarios and articles are split train/valid by a hash of their id (``VALID_SHARE``): the
thresholds ``fit`` writes are chosen on the valid split only.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
MODEL_DIR = REPO / "scorer" / "ragpulse" / "scorer" / "judges" / "nli" / "faith_e5"
HEAD_INPUT = "/Concat_output_0"  # the faithfulness head's input: [<s> ; hypothesis mean], [B, 768]
LAYERS = (5, 8)  # encoder layers (0-based) whose [<s> ; hypothesis mean] are read too
FEATURES = "answerability/features"  # [those of LAYERS ; HEAD_INPUT], [B, 768 * (1 + len(LAYERS))]
OUTPUT = "answerability"       # ragpulse.scorer.judges.nli.onnx_model.ANSWERABILITY_OUTPUT
VERSION = "answerability@1"
LABELS = ("not", "partly", "answers")
VALID_SHARE = 0.15
HIDDEN = 64

__all__ = ["FEATURES", "OUTPUT", "VERSION", "add_head", "build_pairs", "choose_thresholds",
           "head_probabilities", "main", "training_pairs"]


def _split(key: str) -> str:
    h = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "valid" if h < VALID_SHARE else "train"


# ---------------------------------------------------------------- data

def corpus_rows() -> list[dict]:
    """Every passage of the RAG corpus's training-domain scenarios, with its label."""
    from train.data import rag_corpus as rc

    rows = []
    for r in rc.committed():
        if rc.DOMAINS.get(r["domain"]) != "train":
            continue
        for j, (c, lab) in enumerate(zip(r["contexts"], r["passage_labels"], strict=True)):
            rows.append({"question": r["question"], "passage": c, "label": int(lab),
                         "lang": r["lang"], "source": "rag_corpus", "group": r["id"],
                         "id": f"{r['id']}:{j}", "split": _split(r["id"])})
    return rows


_WORD = re.compile(r"\w+", re.UNICODE)


def _vocab(text: str, lang: str) -> set[str]:
    """Words (en) or character bigrams (ja, zh) of ``text``, lower-cased."""
    t = text.lower()
    if lang == "en":
        return {w for w in _WORD.findall(t) if len(w) > 2}
    chars = [ch for ch in t if ch.isalnum()]
    return {a + b for a, b in zip(chars, chars[1:], strict=False)}


def reading_rows(items: list[dict], lang: str, source: str, questions: int,
                 seed: int = 0) -> list[dict]:
    """Up to ``questions`` questions of extractive-QA ``items`` (``qa_synth.squad_items``), one
    per paragraph: (question, gold paragraph, 2) and (question, the other paragraph of the
    article sharing most of its vocabulary, 0) when one exists that does not contain the
    answer string. A source with one paragraph an article (CMRC 2018) draws the negative from
    300 paragraphs of other articles, the one sharing most of the question's vocabulary."""
    rng = random.Random(seed)
    by_article: dict[str, list[dict]] = {}
    for it in items:
        by_article.setdefault(it["article"], []).append(it)
    paras = list(items)
    rng.shuffle(paras)
    rows: list[dict] = []
    for it in paras[:questions]:
        qa = rng.choice(it["qas"])
        q, ans = qa["q"], qa["a"]
        qv = _vocab(q, lang)
        pool = by_article[it["article"]]
        if len(pool) == 1:  # one paragraph an article (CMRC 2018): 300 others drawn at random
            pool = rng.sample(items, min(300, len(items)))
        others = [o for o in pool if o is not it and ans not in o["context"]]
        split = _split(it["article"])
        rows.append({"question": q, "passage": it["context"], "label": 2, "lang": lang,
                     "source": source, "group": it["article"], "id": f"{it['para']}:pos",
                     "split": split})
        if others:
            neg = max(others, key=lambda o: (len(qv & _vocab(o["context"], lang)), o["para"]))
            rows.append({"question": q, "passage": neg["context"], "label": 0, "lang": lang,
                         "source": source, "group": it["article"], "id": f"{it['para']}:neg",
                         "split": split})
    return rows


def build_pairs(per_source: int = 1200, seed: int = 0) -> list[dict]:
    """The corpus rows and ``per_source`` questions of each reading-comprehension source."""
    from train.data import qa_synth

    rows = corpus_rows()
    rows += reading_rows(qa_synth.jaquad_items(), "ja", "jaquad", per_source, seed)
    rows += reading_rows(qa_synth.cmrc_train_items(), "zh", "cmrc2018_train", per_source, seed)
    rows += reading_rows(qa_synth.squad2_items(), "en", "squad2_dev_excerpt", per_source, seed)
    return rows


def training_pairs(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """``(train, valid)``: :func:`build_pairs`'s rows as ``train.train --answerability`` reads
    them, premise = the passage, hypothesis = the question (as the judge reads them), label
    0/1/2, split by the rows' own ``split`` (a scenario's or article's hash: the cuts the
    export writes are chosen on the valid part only). Rows already in that form pass as they
    are."""
    out: dict[str, list[dict]] = {"train": [], "valid": []}
    for r in rows:
        if "premise" not in r:
            r = {"premise": r["passage"], "hypothesis": r["question"], "label": int(r["label"]),
                 "source": r.get("source", "?"), "lang": r.get("lang", "?"),
                 "split": r.get("split", "train")}
        if int(r["label"]) not in (0, 1, 2):
            raise ValueError(f"answerability label {r['label']!r}: 0, 1 or 2")
        out["valid" if r.get("split") == "valid" else "train"].append(r)
    return out["train"], out["valid"]


def _write_jsonl_gz(path: Path, rows: list[dict]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def _read_jsonl_gz(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# ---------------------------------------------------------------- graph surgery

def expose(model: Any, tensor: str = FEATURES) -> Any:
    """A copy of ONNX ``model`` with the intermediate ``tensor`` as an extra graph output (for
    :data:`FEATURES`, the nodes that compute it are added first: :func:`add_features`)."""
    import onnx
    from onnx import TensorProto, helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    if tensor == FEATURES and not any(n.output[0] == FEATURES for n in m.graph.node):
        m = add_features(m)
    if tensor not in {o.name for o in m.graph.output}:
        m.graph.output.append(helper.make_tensor_value_info(tensor, TensorProto.FLOAT, None))
    return m


def add_features(model: Any, layers: tuple[int, ...] = LAYERS) -> Any:
    """A copy of the faithfulness graph ``model`` with :data:`FEATURES`: the faithfulness head's
    input, after the same pooling of the output of each encoder layer in ``layers`` (its first
    token's state and the mean of the hypothesis tokens' states, by copies of the graph's own
    ``/Gather_1``, ``/Mul_2``, ``/ReduceSum_1``, ``/Div`` nodes with that layer's states as
    input). Only adds float32 nodes, named ``answerability/...``."""
    import onnx
    from onnx import helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    by_name = {n.name: n for n in g.node}
    try:
        gather, mul, rsum, div = (by_name[k] for k in ("/Gather_1", "/Mul_2", "/ReduceSum_1",
                                                       "/Div"))
    except KeyError as e:
        raise ValueError(f"not the faithfulness graph of train.export: no node {e}") from None
    final = gather.input[0]
    parts: list[str] = []
    for k in layers:
        states = final.replace(".11/", f".{k}/")
        if not any(states in n.output for n in g.node):
            raise ValueError(f"the graph has no tensor {states}")
        p = f"answerability/l{k}/"
        for node, inputs in ((gather, [states, gather.input[1]]),
                             (mul, [states, mul.input[1]]),
                             (rsum, [p + "Mul", rsum.input[1]]),
                             (div, [p + "ReduceSum", div.input[1]])):
            new = helper.make_node(node.op_type, inputs, [p + node.op_type], name=p + node.op_type)
            new.attribute.extend(node.attribute)
            g.node.append(new)
        parts += [p + "Gather", p + "Div"]
    g.node.append(helper.make_node("Concat", [*parts, HEAD_INPUT], [FEATURES], axis=-1,
                                   name="answerability/Concat"))
    onnx.checker.check_model(m)
    return m


def _keep(field: Any, keep: Any) -> None:
    """Keep only the items of the protobuf repeated ``field`` for which ``keep`` is true."""
    kept = [type(x)() for x in field if keep(x)]
    src = [x for x in field if keep(x)]
    for new, old in zip(kept, src, strict=True):
        new.CopyFrom(old)
    del field[:]
    field.extend(kept)


def without_head(model: Any) -> Any:
    """``model`` with what :func:`add_head` added removed (the model as it was before)."""
    g = model.graph
    _keep(g.output, lambda o: o.name != OUTPUT)
    _keep(g.node, lambda n: not n.name.startswith("answerability/"))
    _keep(g.initializer, lambda t: not t.name.startswith("answerability/"))
    return model


def add_head(model: Any, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray,
             tensor: str = FEATURES, output: str = OUTPUT) -> Any:
    """A copy of ONNX ``model`` with ``softmax(tanh(x @ w1 + b1) @ w2 + b2)`` of its tensor
    ``tensor`` (``x``: ``[B, D]``; ``w1 [D, H]``, ``w2 [H, 3]``) as a new float32 graph output
    ``output`` (for :data:`FEATURES`, :func:`add_features` first). Nodes and initializers are
    only added (names prefixed ``answerability/``): every existing output is computed as
    before."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    if tensor == FEATURES and not any(n.output[0] == FEATURES for n in m.graph.node):
        m = add_features(m)
    g = m.graph
    if output in {o.name for o in g.output}:
        raise ValueError(f"the graph already has an output {output!r}")
    p = "answerability/"
    for name, arr in (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2)):
        g.initializer.append(numpy_helper.from_array(np.asarray(arr, dtype=np.float32), p + name))
    g.node.extend([
        helper.make_node("MatMul", [tensor, p + "w1"], [p + "h0"], name=p + "MatMul_1"),
        helper.make_node("Add", [p + "h0", p + "b1"], [p + "h1"], name=p + "Add_1"),
        helper.make_node("Tanh", [p + "h1"], [p + "h2"], name=p + "Tanh"),
        helper.make_node("MatMul", [p + "h2", p + "w2"], [p + "z0"], name=p + "MatMul_2"),
        helper.make_node("Add", [p + "z0", p + "b2"], [p + "z1"], name=p + "Add_2"),
        helper.make_node("Softmax", [p + "z1"], [output], axis=-1, name=p + "Softmax"),
    ])
    g.output.append(helper.make_tensor_value_info(output, TensorProto.FLOAT,
                                                  ["batch", int(np.asarray(w2).shape[1])]))
    onnx.checker.check_model(m)
    return m


def head_probabilities(x: np.ndarray, head: dict[str, np.ndarray]) -> np.ndarray:
    """The head of :func:`add_head` in numpy (float32, as the graph computes it)."""
    h = np.tanh(x.astype(np.float32) @ head["w1"] + head["b1"])
    z = h @ head["w2"] + head["b2"]
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


# ---------------------------------------------------------------- features

def _model_with_features(src: Path, dest: Path) -> Path:
    """``dest``: a model directory like ``src`` whose graph also outputs :data:`FEATURES`."""
    import shutil

    import onnx

    dest.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "config.json"):
        shutil.copy(src / name, dest / name)
    cfg = json.loads((src / "config.json").read_text(encoding="utf-8"))
    cfg.pop("answerability", None)
    (dest / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    onnx.save(expose(without_head(onnx.load(str(src / "model.onnx")))), str(dest / "model.onnx"))
    return dest


def load_model(model_dir: Path, threads: int = 1):
    """The judge's ``NliModel`` on ``model_dir`` (its chunking, tokenizer and session)."""
    from ragpulse.scorer.judges.nli.onnx_model import NliModel
    from ragpulse.scorer.judges.nli.settings import NliJudgeSettings

    return NliModel(NliJudgeSettings(model_dir=model_dir, threads=threads))


def passage_features(nli: Any, question: str, passage: str) -> np.ndarray:
    """``[windows, D]``: the head features of each window of ``passage`` read against
    ``question`` (``NliModel.question_windows``), each pair run alone."""
    hyp, (pieces,) = nli.question_windows(question, [passage])
    return nli.pair_outputs([(p, hyp) for p in pieces], FEATURES).astype(np.float32)


def extract(rows: list[dict], model_dir: Path, threads: int = 1, log_every: int = 500
            ) -> tuple[np.ndarray, np.ndarray]:
    """Every row's windows' features: ``(features [windows, D], owner [windows])``."""
    with tempfile.TemporaryDirectory() as tmp:
        nli = load_model(_model_with_features(model_dir, Path(tmp)), threads)
        feats: list[np.ndarray] = []
        owner: list[int] = []
        t0 = time.perf_counter()
        for i, r in enumerate(rows):
            f = passage_features(nli, r["question"], r["passage"])
            feats.append(f)
            owner += [i] * len(f)
            if log_every and (i + 1) % log_every == 0:
                el = time.perf_counter() - t0
                print(f"  {i + 1}/{len(rows)} rows, {el:.0f} s", file=sys.stderr, flush=True)
    return np.concatenate(feats), np.asarray(owner)


# ---------------------------------------------------------------- fit

def passage_probs(window_probs: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """Per row, the probabilities of its window that reads best (the highest P(part) + 2
    P(answers)), as ``NliModel.answerability_matrix`` picks it."""
    out = np.zeros((n, 3))
    out[:, 0] = 1.0
    score = window_probs[:, 1] + 2 * window_probs[:, 2]
    best = np.full(n, -1.0)
    for k, i in enumerate(owner):
        if score[k] > best[i]:
            best[i] = score[k]
            out[i] = window_probs[k]
    return out


def choose_thresholds(probs: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The cuts, on validation rows: ``useful`` on P(part)+P(answers) maximises the balanced
    accuracy of "holds the answer or part of it" vs not; ``partly`` is the same cut (a rating
    of at least 1 means the same as a useful verdict) and ``answers``, on P(answers), maximises
    the balanced accuracy of "answers" vs "partly" among the rows at or above ``partly``."""
    pos = probs[:, 1] + probs[:, 2]
    grid = np.round(np.arange(0.05, 0.951, 0.01), 2)

    def bal(score: np.ndarray, y: np.ndarray, t: float) -> float:
        if y.all() or not y.any():
            return 0.0
        return 0.5 * ((score[y] >= t).mean() + (score[~y] < t).mean())

    y = labels >= 1
    useful = max(grid, key=lambda t: (bal(pos, y, t), -abs(t - 0.5)))
    sel = labels >= 1
    ans = max(grid, key=lambda t: (bal(probs[sel, 2], labels[sel] == 2, t), -abs(t - 0.5)))
    return {"useful": float(useful), "partly": float(useful), "answers": float(ans)}


def fit_head(x: np.ndarray, y: np.ndarray, hidden: int = HIDDEN, epochs: int = 60,
             seed: int = 0) -> dict[str, np.ndarray]:
    """A 1-hidden-layer MLP (tanh) with class-balanced cross-entropy, AdamW, full batches."""
    import torch

    torch.manual_seed(seed)
    xt = torch.from_numpy(x.astype(np.float32))
    yt = torch.from_numpy(y.astype(np.int64))
    counts = np.bincount(y, minlength=3).astype(np.float64)
    weight = torch.tensor(counts.sum() / (3 * np.maximum(counts, 1)), dtype=torch.float32)
    mu, sd = xt.mean(0), xt.std(0) + 1e-6
    lin1 = torch.nn.Linear(x.shape[1], hidden)
    lin2 = torch.nn.Linear(hidden, 3)
    params = [*lin1.parameters(), *lin2.parameters()]
    opt = torch.optim.AdamW(params, lr=3e-3, weight_decay=1e-2)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        perm = torch.randperm(len(xt), generator=gen)
        for k in range(0, len(perm), 256):
            idx = perm[k : k + 256]
            xb = torch.nn.functional.dropout((xt[idx] - mu) / sd, 0.1, training=True)
            loss = torch.nn.functional.cross_entropy(lin2(torch.tanh(lin1(xb))), yt[idx],
                                                     weight=weight)
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():  # fold the standardisation into the first layer
        w1 = (lin1.weight / sd).T.contiguous()
        b1 = lin1.bias - (mu / sd) @ lin1.weight.T
    return {"w1": w1.numpy().astype(np.float32), "b1": b1.detach().numpy().astype(np.float32),
            "w2": lin2.weight.detach().T.contiguous().numpy().astype(np.float32),
            "b2": lin2.bias.detach().numpy().astype(np.float32)}


def cut_report(probs: np.ndarray, labels: np.ndarray, cuts: dict[str, float]
               ) -> dict[str, Any]:
    """What the ``useful`` cut says on labelled rows: the share of passages that do not answer
    judged NG (``ng_of_not``), of those that answer or hold part judged OK
    (``ok_of_answering``), and of those that answer (``ok_of_answers``); None for a class
    with no row."""
    useful = probs[:, 1] + probs[:, 2] >= cuts["useful"]

    def share(sel: np.ndarray, said: np.ndarray) -> float | None:
        return float(said[sel].mean()) if sel.any() else None

    return {"n": int(len(labels)), "ng_of_not": share(labels == 0, ~useful),
            "ok_of_answering": share(labels >= 1, useful),
            "ok_of_answers": share(labels == 2, useful)}


# ---------------------------------------------------------------- commands

def _cmd_build(out: Path, per_source: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    rows = build_pairs(per_source)
    _write_jsonl_gz(out / "pairs.jsonl.gz", rows)
    c = Counter((r["source"], r["split"], r["label"]) for r in rows)
    for k in sorted(c):
        print(*k, c[k], sep="\t")
    print(f"{len(rows)} rows -> {out / 'pairs.jsonl.gz'}")
    return 0


def _cmd_features(d: Path, model_dir: Path, limit: int | None) -> int:
    rows = _read_jsonl_gz(d / "pairs.jsonl.gz")
    if limit is not None:
        rows = rows[:limit]
    t0 = time.perf_counter()
    x, owner = extract(rows, model_dir)
    el = time.perf_counter() - t0
    np.savez(d / "features.npz", x=x, owner=owner, n=len(rows))
    print(f"{len(rows)} rows, {len(x)} windows, {el:.0f} s ({1000 * el / len(x):.1f} ms a window)")
    return 0


def _cmd_fit(d: Path, hidden: int, epochs: int) -> int:
    rows = _read_jsonl_gz(d / "pairs.jsonl.gz")
    z = np.load(d / "features.npz")
    x, owner, n = z["x"], z["owner"], int(z["n"])
    rows = rows[:n]
    labels = np.array([r["label"] for r in rows])
    split = np.array([r["split"] for r in rows])
    windows = np.bincount(owner, minlength=n)
    # a window's label is its passage's only when the passage is one window, or holds nothing
    ok = (split[owner] == "train") & ((windows[owner] == 1) | (labels[owner] == 0))
    head = fit_head(x[ok], labels[owner][ok], hidden, epochs)
    wp = head_probabilities(x, head)
    probs = passage_probs(wp, owner, n)
    va = split == "valid"
    cuts = choose_thresholds(probs[va], labels[va])
    report: dict[str, Any] = {"version": VERSION, "hidden": hidden, "epochs": epochs,
                              "train_windows": int(ok.sum()), "thresholds": cuts,
                              "valid": cut_report(probs[va], labels[va], cuts)}
    for src in sorted({r["source"] for r in rows}):
        sel = va & (np.array([r["source"] for r in rows]) == src)
        if sel.any():
            report[f"valid:{src}"] = cut_report(probs[sel], labels[sel], cuts)
    np.savez(d / "head.npz", **head)
    (d / "head.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(json.dumps(report, indent=1))
    return 0


def export(d: Path, dest: Path, src: Path = MODEL_DIR) -> dict[str, Any]:
    """Write ``src``'s graph with the head of ``d/head.npz`` into ``dest`` (model.onnx and
    config.json; tokenizer.json copied when ``dest`` is another folder), after checking on
    sample pairs that ``logits`` is bit-identical to the source graph's."""
    import shutil

    import onnx

    head = dict(np.load(d / "head.npz"))
    report = json.loads((d / "head.json").read_text(encoding="utf-8"))
    g = without_head(onnx.load(str(src / "model.onnx")))
    new = add_head(g, head["w1"], head["b1"], head["w2"], head["b2"])
    cfg = json.loads((src / "config.json").read_text(encoding="utf-8"))
    cfg["answerability"] = {
        "version": VERSION, "output": OUTPUT, "labels": list(LABELS),
        "features": "[<s> state ; mean of the hypothesis tokens' states] of encoder layers "
                    + ", ".join(str(k + 1) for k in LAYERS) + " and 12 (train/answerability.py)",
        "head": f"{head['w1'].shape[0]} -> {head['w1'].shape[1]} tanh -> 3 softmax, float32",
        "thresholds": report["thresholds"], "valid": report["valid"],
    }
    with tempfile.TemporaryDirectory() as tmp:
        before, after = Path(tmp) / "before.onnx", Path(tmp) / "after.onnx"
        onnx.save(g, str(before))
        onnx.save(new, str(after))
        diffs = _compare_logits(before, after)
        if diffs:
            raise SystemExit(f"logits changed on {diffs} sample pairs: not written")
        dest.mkdir(parents=True, exist_ok=True)
        if dest.resolve() != src.resolve():
            shutil.copy(src / "tokenizer.json", dest / "tokenizer.json")
        shutil.copy(after, dest / "model.onnx")
    (dest / "config.json").write_text(json.dumps(cfg, indent=1, ensure_ascii=False) + "\n",
                                      encoding="utf-8")
    _move_blend(src, dest)
    return cfg["answerability"]


def _move_blend(src: Path, dest: Path) -> None:
    """Point ``src``'s blend.json (fitted for the graph's ``logits``, keyed by a fingerprint of
    the graph file) at the new file: its ``logits`` were just checked bit-identical, so the
    fitted weights hold. The identity is the judge's own (``judge.model_identity``)."""
    import hashlib

    path = src / "blend.json"
    if not path.is_file():
        return
    blend = json.loads(path.read_text(encoding="utf-8"))
    old = str(blend.get("model_version", ""))
    if "#" not in old:
        return
    h = hashlib.sha256((dest / "model.onnx").read_bytes()).hexdigest()[:12]
    blend["model_version"] = f"{old.rsplit('#', 1)[0]}#{h}"
    blend.setdefault("fitted_on_graph", old)  # a re-export keeps the graph it was fitted on
    blend["model_version_note"] = (f"{VERSION} head added by train.answerability export: "
                                   f"logits bit-identical to those of {blend['fitted_on_graph']}")
    (dest / "blend.json").write_text(json.dumps(blend, indent=1, ensure_ascii=False) + "\n",
                                     encoding="utf-8")


SAMPLE_PAIRS = [
    ("Unused items can be returned for a full refund within 30 days of purchase.",
     "You can get a full refund within 30 days."),
    ("購入後30日以内であれば、未使用の商品は全額返金されます。", "返金は60日以内です。"),
    ("购买后30天内，未使用的商品可以全额退款。", "退货政策是什么？"),
    ("The Basic plan includes email support only; phone support needs Pro.",
     "Does the Basic plan include phone support?"),
]


def _compare_logits(before: Path, after: Path) -> int:
    """How many :data:`SAMPLE_PAIRS` get a different ``logits`` (bit for bit) from the two
    graphs, each pair run alone."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    a = ort.InferenceSession(str(before), so, providers=["CPUExecutionProvider"])
    b = ort.InferenceSession(str(after), so, providers=["CPUExecutionProvider"])
    bad = 0
    for p, h in SAMPLE_PAIRS:
        e = tok.encode(p, h)
        feed = {"input_ids": np.array([e.ids], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask], dtype=np.int64)}
        bad += not np.array_equal(a.run(["logits"], feed)[0], b.run(["logits"], feed)[0])
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m train.answerability",
                                 description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write DIR/pairs.jsonl.gz (question, passage, label)")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--per-source", type=int, default=1200,
                   help="questions read from each reading-comprehension source (default 1200)")
    f = sub.add_parser("features", help="DIR/features.npz: the int8 graph's head features")
    f.add_argument("--dir", type=Path, required=True)
    f.add_argument("--model-dir", type=Path, default=MODEL_DIR)
    f.add_argument("--limit", type=int, default=None, help="only the first N rows")
    t = sub.add_parser("fit", help="DIR/head.npz + head.json (needs torch)")
    t.add_argument("--dir", type=Path, required=True)
    t.add_argument("--hidden", type=int, default=HIDDEN)
    t.add_argument("--epochs", type=int, default=60)
    e = sub.add_parser("export", help="the graph with the head, config.json's answerability")
    e.add_argument("--dir", type=Path, required=True)
    e.add_argument("--dest", type=Path, required=True)
    e.add_argument("--model-dir", type=Path, default=MODEL_DIR, help="the source graph")
    a = ap.parse_args(argv)
    if a.cmd == "build":
        return _cmd_build(a.out, a.per_source)
    if a.cmd == "features":
        return _cmd_features(a.dir, a.model_dir, a.limit)
    if a.cmd == "fit":
        return _cmd_fit(a.dir, a.hidden, a.epochs)
    print(json.dumps(export(a.dir, a.dest, a.model_dir), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
