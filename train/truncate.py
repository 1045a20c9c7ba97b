"""A shallower faithfulness model without training the encoder: the shipped int8 graph cut after
encoder layer ``K``, its own pooling moved to that layer's states, and a new head distilled to
the shipped model's calibrated logit on the frozen features (issue 39, item 4: the cross-encoder
is two thirds of the default judge's CPU, and its cost is linear in the layers it runs)::

    python -m train.truncate pairs --out DIR                  # the distillation pairs (1 min)
    python -m train.truncate features --dir DIR --layers 7 8  # teacher logit + pooled features
    python -m train.truncate fit --dir DIR --layer 7 --dest MODEL_DIR   # head, student graph

Nothing here trains the encoder: the student's layers 0..K are the shipped graph's own (int8,
bit-identical up to layer K), so only the head (``[<s> ; mean of the hypothesis tokens]`` of
layer K, 768 -> ``--hidden`` -> 1, tanh, as the shipped head) is new. It is fitted by mean
squared error to the teacher's calibrated logit, so the student inherits the teacher's
calibration instead of learning one from labels. :func:`student_graph` with layer 11 and the
teacher's own head (:func:`teacher_head`) rebuilds the teacher exactly (tested).

Pairs (``pairs``; every source a training source, never an evaluation set):

* ``corpus``: the RAG corpus's training-domain pairs (``train/data/rag_corpus.py nli_pairs``,
  written by this project's developers, the project's licence), ``--corpus`` of them drawn;
* ``judge``: the (premise, hypothesis) pairs the ``model`` judge itself runs (its ``evidence``
  premises: best sentence, packed sentences, passage windows) on ``--judge-answers``
  training-domain corpus answers: the pairs a student meets in production;
* ``nli``: JNLI test, JSTS train, JaNLI train, SNLI dev + test and JNLI-Neg train
  (``train/data/nli.py``, their licences in ``train/data/sources.py``), ``--nli-per-source``
  each, screened as ``train.data.build`` screens (27 characters shared with the dev set or a
  shared evaluation set drop a pair). Needs those sources' snapshots (``RAGPULSE_MIRROR``).

``split`` = valid for 15 % of the corpus scenarios and 10 % of the other pairs (a hash of the
scenario or the pair): ``fit`` reports the student's agreement with the teacher there.
Measured (2026-11-30, docs/history/judges.md, "Speed levers that did not ship"): not shipped;
with these defaults the 9-layer student (layer 8) meets the RAG sets and loses 0.015 AUROC on
QAGS-CNNDM, the 8-layer one loses 0.011 on the RAG sets pooled.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import sys
import time
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import numpy as np

from train.answerability import _keep, _read_jsonl_gz, _write_jsonl_gz

REPO = Path(__file__).resolve().parents[1]
MODEL_DIR = REPO / "scorer" / "ragpulse" / "scorer" / "judges" / "nli" / "faith_e5"
LAST = 11  # the shipped encoder's last layer (0-based)
POOL_NODES = ("/Gather_1", "/Mul_2")  # the pooling nodes that read the last layer's states
HEAD = ("head.0.weight", "head.0.bias", "head.3.weight", "head.3.bias")
WIDTH = 768  # [<s> ; hypothesis mean] of one layer


def _states(layer: int) -> str:
    return f"/layers.{layer}/oln/LayerNormalization_output_0"


def _split(key: str, share: int) -> str:
    return "valid" if int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 100 < share else "train"


# ---------------------------------------------------------------- pairs

def corpus_pairs(n: int, seed: int) -> list[dict]:
    """``n`` of the corpus's training-domain pairs (all when ``n`` is larger), drawn."""
    from train.data import rag_corpus as rc

    recs = [r for r in rc.committed() if rc.DOMAINS[r["domain"]] == "train"]
    rows = rc.nli_pairs(recs)
    random.Random(seed).shuffle(rows)
    return [{"premise": r["premise"], "hypothesis": r["hypothesis"], "source": "corpus",
             "split": _split(r["scenario"], 15)} for r in rows[:n]]


def judge_pairs(n_answers: int, seed: int, model_dir: Path = MODEL_DIR) -> list[dict]:
    """The distinct pairs the ``model`` judge runs on ``n_answers`` training-domain answers."""
    from ragpulse.scorer.judges.factory import _local_model_settings
    from ragpulse.scorer.judges.nli.onnx_model import NliModel
    from ragpulse.scorer.judges.nli.settings import NliJudgeSettings
    from ragpulse.scorer.segment import split_statements
    from train.data import rag_corpus as rc

    recs = [r for r in rc.committed() if rc.DOMAINS[r["domain"]] == "train"]
    rows = rc.eval_rows(recs)
    random.Random(seed).shuffle(rows)
    nli = NliModel(_local_model_settings(NliJudgeSettings(model_dir=model_dir, blend="off")))
    seen: dict[tuple[str, str], str] = {}  # pair -> the answer that first ran it
    run = nli._probabilities
    current = [""]

    def capture(pairs: Any) -> np.ndarray:
        for p, h in pairs:
            seen.setdefault((p, h), current[0])
        return run(pairs)

    nli._probabilities = capture  # type: ignore[method-assign]
    for r in rows[:n_answers]:
        current[0] = r["id"]
        nli.support_matrix(split_statements(r["answer"]), r["contexts"])
    return [{"premise": p, "hypothesis": h, "source": "judge", "split": _split(rid, 10)}
            for (p, h), rid in seen.items()]


def nli_source_pairs(per_source: int, seed: int) -> list[dict]:
    """``per_source`` pairs of each NLI training source, screened as train.data.build does."""
    from train.data import build, nli

    ev, dev = build.eval_shingles(), build.dev_shingles()
    out: list[dict] = []
    for fn in (nli.jnli_test, nli.jsts_train, nli.janli_train, nli.snli_dev_test,
               nli.jnli_neg_train):
        rows = list(fn())
        random.Random(seed).shuffle(rows)
        kept = 0
        for r in rows:
            r = build._clean(r)
            if r is None or build.touches_dev(r, dev) or build.touches_eval(r, ev):
                continue
            out.append({"premise": r["premise"], "hypothesis": r["hypothesis"],
                        "source": r["source"],
                        "split": _split(r["premise"] + "\x00" + r["hypothesis"], 10)})
            kept += 1
            if kept >= per_source:
                break
    return out


# ---------------------------------------------------------------- features

def features_graph(model: Any, layers: tuple[int, ...]) -> Any:
    """A copy of the shipped graph that also outputs ``truncate/features``: the head's pooling of
    each of ``layers`` (``train.answerability.add_features``), ``[B, 768 * len(layers)]``."""
    import onnx

    from train import answerability as ans

    m = ans.add_features(model, layers=layers)
    g = m.graph
    concat = next(n for n in g.node if n.name == "answerability/Concat")
    concat.input.pop()  # the last layer's own pooling: not wanted twice
    concat.output[0] = "truncate/features"
    g.output.append(onnx.helper.make_tensor_value_info("truncate/features",
                                                       onnx.TensorProto.FLOAT, None))
    return m


def _extract(job: tuple[Path, list[dict], int, int]) -> tuple[np.ndarray, np.ndarray]:
    model_dir, rows, shard, shards = job
    from ragpulse.scorer.judges.nli.onnx_model import NliModel
    from ragpulse.scorer.judges.nli.settings import NliJudgeSettings

    nli = NliModel(NliJudgeSettings(model_dir=model_dir, threads=1))
    _, cap = nli._statement_room()
    feats, logits = [], []
    t0 = time.time()
    for i, r in enumerate(rows[shard::shards]):
        hyp, _ = nli._hypothesis(r["hypothesis"], cap)
        e = nli._pair_tok.encode_batch([(r["premise"], hyp)])[0]
        arrays = {"input_ids": [e.ids], "attention_mask": [e.attention_mask],
                  "token_type_ids": [e.type_ids]}
        feed = {k: np.asarray(arrays[k]).astype(dt) for k, dt in nli._inputs.items()}
        z, f = nli._session.run(["logits", "truncate/features"], feed)
        feats.append(f[0].astype(np.float32))
        logits.append(float(np.asarray(z).reshape(-1)[0]))
        if shard == 0 and i % 2000 == 0:
            print(f"  {i * shards} of {len(rows)} pairs, {time.time() - t0:.0f} s", flush=True)
    return np.asarray(feats, np.float32), np.asarray(logits)


def extract(rows: list[dict], layers: tuple[int, ...], workers: int = 2,
            model_dir: Path = MODEL_DIR) -> tuple[np.ndarray, np.ndarray]:
    """Every pair alone through the shipped int8 graph (batch 1, as the judge runs it): the
    teacher's calibrated logit and the pooled features of ``layers``, in the order of ``rows``."""
    import tempfile

    import onnx

    if not rows:
        raise ValueError("no pairs to extract")
    workers = max(1, min(workers, len(rows)))
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for name in ("tokenizer.json", "config.json"):
            shutil.copy(model_dir / name, d / name)
        onnx.save(features_graph(onnx.load(str(model_dir / "model.onnx")), layers),
                  str(d / "model.onnx"))
        jobs = [(d, rows, k, workers) for k in range(workers)]
        with Pool(workers) as pool:
            parts = pool.map(_extract, jobs)
    feats = np.empty((len(rows), parts[0][0].shape[1]), np.float32)
    logits = np.empty(len(rows))
    for k, (f, z) in enumerate(parts):
        feats[k::workers], logits[k::workers] = f, z
    return feats, logits


# ---------------------------------------------------------------- head and graph

def fit_head(x: np.ndarray, z: np.ndarray, hidden: int = 128, epochs: int = 60,
             seed: int = 0) -> dict[str, np.ndarray]:
    """A 1-hidden-layer MLP (tanh) regressing the teacher's logit ``z`` (mean squared error,
    AdamW, batches of 256), the standardisation folded into the first layer: ``w1 [H, D]``,
    ``b1 [H]``, ``w2 [1, H]``, ``b2 [1]`` (``Gemm`` with ``transB``, as the shipped head)."""
    import torch

    torch.manual_seed(seed)
    mu, sd = x.mean(0), x.std(0) + 1e-6
    xt = torch.from_numpy(((x - mu) / sd).astype(np.float32))
    zt = torch.from_numpy(z.astype(np.float32))
    net = torch.nn.Sequential(torch.nn.Linear(x.shape[1], hidden), torch.nn.Tanh(),
                              torch.nn.Linear(hidden, 1))
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-2)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        perm = torch.randperm(len(xt), generator=gen)
        for k in range(0, len(perm), 256):
            idx = perm[k : k + 256]
            loss = ((net(xt[idx]).squeeze(1) - zt[idx]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    w1 = net[0].weight.detach().numpy().astype(np.float64)
    b1 = net[0].bias.detach().numpy().astype(np.float64)
    return {"w1": (w1 / sd).astype(np.float32), "b1": (b1 - w1 @ (mu / sd)).astype(np.float32),
            "w2": net[2].weight.detach().numpy().astype(np.float32),
            "b2": net[2].bias.detach().numpy().astype(np.float32)}


def head_logits(x: np.ndarray, head: dict[str, np.ndarray]) -> np.ndarray:
    """The head of :func:`fit_head` in numpy."""
    return (np.tanh(x @ head["w1"].T + head["b1"]) @ head["w2"].T + head["b2"])[:, 0]


def _replace(g: Any, name: str, arr: np.ndarray) -> None:
    from onnx import numpy_helper

    if not any(t.name == name for t in g.initializer):
        raise ValueError(f"the graph has no initializer {name}")
    _keep(g.initializer, lambda t: t.name != name)
    g.initializer.append(numpy_helper.from_array(np.asarray(arr, np.float32), name))


def student_graph(model: Any, layer: int, head: dict[str, np.ndarray],
                  calibration: tuple[float, float] = (1.0, 0.0)) -> Any:
    """A copy of the shipped graph ``model`` whose head reads encoder layer ``layer`` through
    ``head`` (:func:`fit_head`'s arrays), with ``a * z + b`` = ``calibration`` after it (the
    head regresses the calibrated logit: identity), and every node and initializer that no
    longer feeds ``logits`` (the later layers) removed."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    if not any(_states(layer) in n.output for n in g.node):
        raise ValueError(f"the graph has no encoder layer {layer} ({_states(layer)})")
    pool = [n for n in g.node if n.name in POOL_NODES]
    if len(pool) != len(POOL_NODES) or any(n.input[0] != _states(LAST) for n in pool):
        raise ValueError("not the faithfulness graph of train.export (its head's pooling nodes "
                         f"{POOL_NODES} do not read {_states(LAST)})")
    for n in pool:
        n.input[0] = _states(layer)
    for name, key in zip(HEAD, ("w1", "b1", "w2", "b2"), strict=True):
        _replace(g, name, head[key])
    _replace(g, "cal_a", np.array(calibration[0], np.float32))
    _replace(g, "cal_b", np.array(calibration[1], np.float32))
    while True:  # dead nodes out, then the initializers nothing reads
        before = len(g.node)
        used = {i for n in g.node for i in n.input} | {o.name for o in g.output}
        _keep(g.node, lambda n: any(o in used for o in n.output))
        if len(g.node) == before:
            break
    used = {i for n in g.node for i in n.input}
    _keep(g.initializer, lambda t: t.name in used)
    del g.value_info[:]  # shapes of the old head and of removed layers
    onnx.checker.check_model(m)
    return m


def teacher_head(model: Any) -> tuple[dict[str, np.ndarray], tuple[float, float]]:
    """The shipped graph's own head arrays and calibration (for the identity check)."""
    from onnx import numpy_helper

    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    head = dict(zip(("w1", "b1", "w2", "b2"), (init[k] for k in HEAD), strict=True))
    return head, (float(init["cal_a"]), float(init["cal_b"]))


def write_student(dest: Path, layer: int, head: dict[str, np.ndarray], info: dict[str, Any],
                  src: Path = MODEL_DIR) -> Path:
    """A model directory (``model.onnx``, ``tokenizer.json``, ``config.json``) for the student."""
    import onnx

    dest.mkdir(parents=True, exist_ok=True)
    onnx.save(student_graph(onnx.load(str(src / "model.onnx")), layer, head),
              str(dest / "model.onnx"))
    shutil.copy(src / "tokenizer.json", dest / "tokenizer.json")
    cfg = json.loads((src / "config.json").read_text(encoding="utf-8"))
    cfg.pop("calibration", None)
    cfg.pop("answerability", None)
    cfg["_name_or_path"] = f"{cfg.get('_name_or_path', 'model')}-L{layer + 1}"
    cfg["num_hidden_layers"] = layer + 1
    cfg["truncated"] = info
    (dest / "config.json").write_text(json.dumps(cfg, indent=1), encoding="utf-8")
    return dest


# ---------------------------------------------------------------- commands

def _cmd_pairs(a: argparse.Namespace) -> int:
    a.out.mkdir(parents=True, exist_ok=True)
    rows = corpus_pairs(a.corpus, a.seed)
    print(f"corpus: {len(rows)} pairs", flush=True)
    if a.judge_answers:
        more = judge_pairs(a.judge_answers, a.seed)
        print(f"judge: {len(more)} pairs from {a.judge_answers} answers", flush=True)
        rows += more
    if a.nli_per_source:
        more = nli_source_pairs(a.nli_per_source, a.seed)
        print(f"nli: {len(more)} pairs", flush=True)
        rows += more
    _write_jsonl_gz(a.out / "pairs.jsonl.gz", rows)
    print(f"{a.out / 'pairs.jsonl.gz'}: {len(rows)} pairs")
    return 0


def _cmd_features(a: argparse.Namespace) -> int:
    rows = _read_jsonl_gz(a.dir / "pairs.jsonl.gz")
    t0 = time.time()
    feats, logits = extract(rows, tuple(a.layers), a.workers)
    np.savez(a.dir / "features.npz", features=feats, logits=logits, layers=np.asarray(a.layers))
    print(f"{a.dir / 'features.npz'}: {len(rows)} pairs, layers {a.layers}, "
          f"{time.time() - t0:.0f} s")
    return 0


def _cmd_fit(a: argparse.Namespace) -> int:
    rows = _read_jsonl_gz(a.dir / "pairs.jsonl.gz")
    d = np.load(a.dir / "features.npz")
    layers = [int(k) for k in d["layers"]]
    if a.layer not in layers:
        raise SystemExit(f"features.npz has layers {layers}, not {a.layer}")
    k = layers.index(a.layer)
    x = d["features"][:, k * WIDTH : (k + 1) * WIDTH]
    z = d["logits"]
    train = np.array([r["split"] == "train" for r in rows])
    head = fit_head(x[train], z[train], a.hidden, a.epochs, a.seed)
    pred = head_logits(x, head)
    report: dict[str, Any] = {}
    for src in sorted({r["source"] for r in rows}):
        v = ~train & np.array([r["source"] == src for r in rows])
        if v.sum() > 2:
            report[src] = {"n": int(v.sum()),
                           "corr": round(float(np.corrcoef(pred[v], z[v])[0, 1]), 4),
                           "rmse": round(float(np.sqrt(np.mean((pred[v] - z[v]) ** 2))), 4)}
    for src, r in report.items():
        print(f"  valid {src:15s} n {r['n']:5d}  corr with the teacher {r['corr']:.4f}  "
              f"rmse {r['rmse']:.3f}")
    info = {"layers": a.layer + 1, "hidden": a.hidden, "pairs": int(train.sum()),
            "valid": report, "recipe": "train/truncate.py"}
    write_student(a.dest, a.layer, head, info)
    print(f"{a.dest}: layers 0..{a.layer} of {MODEL_DIR.name} with a distilled head")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m train.truncate",
                                 description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pairs")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--corpus", type=int, default=12_000)
    p.add_argument("--judge-answers", type=int, default=2_400)
    p.add_argument("--nli-per-source", type=int, default=2_000)
    p.add_argument("--seed", type=int, default=27)
    f = sub.add_parser("features")
    f.add_argument("--dir", type=Path, required=True)
    f.add_argument("--layers", type=int, nargs="+", default=[7, 8])
    f.add_argument("--workers", type=int, default=2)
    t = sub.add_parser("fit")
    t.add_argument("--dir", type=Path, required=True)
    t.add_argument("--layer", type=int, required=True)
    t.add_argument("--dest", type=Path, required=True)
    t.add_argument("--hidden", type=int, default=128)
    t.add_argument("--epochs", type=int, default=60)
    t.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    return {"pairs": _cmd_pairs, "features": _cmd_features, "fit": _cmd_fit}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
