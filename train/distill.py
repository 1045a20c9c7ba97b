"""A shallower faithfulness model whose encoder is trained: a student of the shipped model's first
``N`` encoder layers, trained on the shipped model's own P (knowledge distillation; issue 39,
item 4: the cross-encoder is two thirds of the default judge's CPU, and its cost is linear in
the layers it runs). ``train/truncate.py`` cuts the shipped graph with its layers frozen and
only a new head; here every layer of the student trains::

    python -m train.truncate pairs --out DIR                   # the pairs (5.5 min)
    python -m train.truncate features --dir DIR --layers 8     # + the teacher's logit (7.5 min)
    python -m train.distill rows --dir DIR --out ROWS          # targets and the valid split (5 s)
    python -m train.from_onnx --model-dir scorer/ragpulse/scorer/judges/nli/faith_e5 --out W
    python -m train.device --dest H --vocab-from scorer/ragpulse/scorer/judges/nli/faith_e5/tokenizer.json
    python -m train.train --bundle H/bundle --init W --student-layers 0,1,2,3 \\
        --train ROWS/train.jsonl.gz --valid ROWS/valid.jsonl.gz --out RUN --max-len 256 ...
    python -m train.distill report --rows ROWS --run RUN       # agreement with the teacher
    python -m train.export --bundle H/bundle --weights RUN --calibration ROWS/identity.json \\
        --format gptq8 --calibration-pairs ROWS/train.jsonl.gz --dest MODEL_DIR

The pairs (``train.truncate pairs``: the RAG corpus's training-domain pairs, the pairs the
``model`` judge itself runs on training-domain answers, and NLI training sources; never an
evaluation set) carry no label of their own here: a row's ``target`` is the teacher's
P(supported) (its calibrated logit through a sigmoid, which ``train.train``'s loss reads instead
of a label), so the student learns the teacher's calibrated P and is exported with the identity
calibration (``identity.json``: ``a`` 1, ``b`` 0). The validation rows (the pairs' own
``split``) keep the teacher's logit as ``teacher_logit`` and its decision (P >= 0.5) as
``label``, so ``train.train``'s validation AUROC is agreement with the teacher; ``report`` adds
the correlation of the logits and the P gaps.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from train.answerability import _read_jsonl_gz, _write_jsonl_gz

GROUP_MIN = 10  # rows a source or language needs for a line of its own in the report
IDENTITY = {"a": 1.0, "b": 0.0, "note": "a distilled student learns the teacher's calibrated P"}


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(z, dtype=np.float64)))


def make_rows(pairs: list[dict], logits: np.ndarray) -> tuple[list[dict], list[dict]]:
    """``(train, valid)`` rows of ``pairs`` with the teacher's ``logits`` (same order): training
    rows carry ``target`` (the teacher's P), validation rows ``label`` (P >= 0.5) and
    ``teacher_logit``."""
    if len(pairs) != len(logits):
        raise ValueError(f"{len(pairs)} pairs but {len(logits)} teacher logits: the features "
                         "file is not of these pairs")
    train, valid = [], []
    for r, z in zip(pairs, np.asarray(logits, dtype=np.float64), strict=True):
        if not np.isfinite(z):
            raise ValueError(f"the teacher's logit of a pair is {z}")
        base = {"premise": r["premise"], "hypothesis": r["hypothesis"],
                "source": r.get("source", "?"), "lang": r.get("lang", "?")}
        if r.get("split") == "valid":
            valid.append({**base, "label": int(z >= 0.0), "teacher_logit": round(float(z), 5)})
        else:
            train.append({**base, "target": round(float(_sigmoid(z)), 6)})
    if not train or not valid:
        raise ValueError(f"{len(train)} training and {len(valid)} validation rows: both needed")
    return train, valid


def agreement(teacher: np.ndarray, student: np.ndarray) -> dict[str, float]:
    """How closely a student's logits follow the teacher's on the same pairs."""
    t, s = np.asarray(teacher, np.float64), np.asarray(student, np.float64)
    dp = np.abs(_sigmoid(t) - _sigmoid(s))
    return {"n": int(len(t)), "corr": float(np.corrcoef(t, s)[0, 1]),
            "mean_abs_dp": float(dp.mean()), "p90_abs_dp": float(np.quantile(dp, 0.9)),
            "max_abs_dp": float(dp.max()), "decision_agree": float(((t >= 0) == (s >= 0)).mean())}


def _cmd_rows(a: argparse.Namespace) -> int:
    pairs = _read_jsonl_gz(a.dir / "pairs.jsonl.gz")
    logits = np.load(a.dir / "features.npz")["logits"]
    train, valid = make_rows(pairs, logits)
    a.out.mkdir(parents=True, exist_ok=True)
    _write_jsonl_gz(a.out / "train.jsonl.gz", train)
    _write_jsonl_gz(a.out / "valid.jsonl.gz", valid)
    (a.out / "identity.json").write_text(json.dumps(IDENTITY, indent=1) + "\n")
    print(f"{len(train)} training rows (mean target {np.mean([r['target'] for r in train]):.3f}),"
          f" {len(valid)} validation rows -> {a.out}")
    return 0


def _cmd_targets(a: argparse.Namespace) -> int:
    """The teacher's calibrated logits of the pairs (``train.from_onnx`` of the shipped graph:
    its calibration travels in the shards), scored in torch: fp32 on the CPU, bf16 on a GPU
    (``train.truncate features`` scores the int8 graph itself, batch 1, on the CPU)."""
    from train.train import logits_of, read_pairs, resolve_device

    same = (a.dir / "pairs.jsonl.gz").resolve() == a.pairs.resolve()
    if same and a.limit:
        raise SystemExit(f"--limit with --pairs in --dir would leave {a.pairs} longer than its "
                         "logits: give another --dir")
    device = resolve_device(a.device)
    pairs = read_pairs(a.pairs, a.limit)
    if not pairs:
        raise SystemExit(f"{a.pairs}: no pairs")
    z = logits_of(a.bundle, a.weights, pairs, a.max_len, device, calibrated=True)
    a.dir.mkdir(parents=True, exist_ok=True)
    if not same:
        _write_jsonl_gz(a.dir / "pairs.jsonl.gz", pairs)
    np.savez(a.dir / "features.npz", logits=z)
    print(f"{len(pairs)} pairs scored by {a.weights} on {device} -> {a.dir}/features.npz "
          f"(mean P {float(np.mean(_sigmoid(z))):.3f})")
    return 0


def _cmd_report(a: argparse.Namespace) -> int:
    valid = _read_jsonl_gz(a.rows / "valid.jsonl.gz")
    z = np.load(a.run / "valid_scores.npz")["logit"]
    if len(z) != len(valid):
        raise SystemExit(f"{a.run} scored {len(z)} validation rows, {a.rows} has {len(valid)}")
    t = np.array([r["teacher_logit"] for r in valid])
    rep = {"all": agreement(t, z)}
    for key in ("source", "lang"):
        for v in sorted({r[key] for r in valid} - {"?"}):  # "?": the pairs did not say
            ix = [i for i, r in enumerate(valid) if r[key] == v]
            if len(ix) >= GROUP_MIN:
                rep[f"{key}:{v}"] = agreement(t[ix], z[ix])
    print(json.dumps(rep, indent=1))
    if a.json:
        a.json.write_text(json.dumps(rep, indent=1) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m train.distill",
                                 description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("rows", help="training and validation rows from train.truncate's pairs "
                       "and the teacher's logits")
    r.add_argument("--dir", type=Path, required=True,
                   help="train.truncate's folder: pairs.jsonl.gz and features.npz")
    r.add_argument("--out", type=Path, required=True)
    t = sub.add_parser("targets", help="the teacher's logits of pairs, scored in torch (a GPU "
                       "round; train.truncate features scores the int8 graph on the CPU)")
    t.add_argument("--pairs", type=Path, required=True,
                   help="train.truncate's pairs.jsonl.gz (or a hand-off's pairs.jsonl.xz)")
    t.add_argument("--bundle", type=Path, required=True)
    t.add_argument("--weights", type=Path, required=True,
                   help="the teacher's shards (python -m train.from_onnx of the shipped graph)")
    t.add_argument("--dir", type=Path, required=True, help="writes pairs.jsonl.gz, features.npz")
    t.add_argument("--max-len", type=int, default=256)
    t.add_argument("--device", default="auto")
    t.add_argument("--limit", type=int, default=None, help="the first N pairs only (dry runs)")
    p = sub.add_parser("report", help="a trained student's agreement with the teacher")
    p.add_argument("--rows", type=Path, required=True, help="the rows folder")
    p.add_argument("--run", type=Path, required=True, help="train.train's OUT")
    p.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    return {"rows": _cmd_rows, "targets": _cmd_targets, "report": _cmd_report}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
