"""What a continuation round carries to a GPU machine, small enough to travel.

    python -m train.handoff --model-dir scorer/ragpulse/scorer/judges/nli/faith_e5 \\
        --bundle .devrun/faith3/bundle --data .devrun/c2 --out .devrun/handoff

A device call takes at most 64 MiB of working tree (the shipped ``model.onnx`` alone is 53 MB,
so it is moved aside for the call) and a continuation needs three things there: the model to
continue, the frozen word embeddings and the data. ``OUT`` gets

- ``bundle/``: the bundle (``train.bundle``) trimmed to its embeddings and tokenizer, about
  20 MB instead of 33: the encoder layers come from the model, so a trimmed bundle refuses to
  train without ``--init`` (``train.train``);
- ``init.onnx``: the model's graph without its word-embedding table (about 22 MB): on the
  device ``python -m train.from_onnx --onnx OUT/init.onnx --out W`` reads it back into the
  ``--init`` shards, exactly as from the whole graph (``read_weights`` never reads that table);
- ``data/``: ``train.jsonl.xz`` (the training file recompressed: xz's window finds the
  corpus's doubled rows, 3.2 MB where gzip needs 26), ``valid.jsonl.gz`` and ``STATS.txt`` of
  the continuation data (``train.data.continuation``);
- ``data/answerability.jsonl.xz`` with ``--answerability FILE`` (``python -m
  train.answerability build``'s ``pairs.jsonl.gz``, xz-recompressed): the rows of the
  answerability head trained jointly (``train.train --answerability`` reads the ``.xz``);
- ``data/pairs.jsonl.xz`` with ``--pairs FILE`` in place of ``--data`` (``train.truncate
  pairs``' ``pairs.jsonl.gz``, xz-recompressed): the distillation round
  (``train/round_distill.sh``), whose targets the device scores with the model read back;
- ``MANIFEST.txt``: each file's size and sha256, and the total, which must stay under the
  limit given (``--limit-mib``, default 52: the tree without ``model.onnx`` is about 12 MB
  of the 64 MiB a device call takes).

``train/round_corpus.sh`` is the device side (``train/round_multitask.sh`` for the joint
round, which carries the answerability rows).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import lzma
import shutil
import sys
from pathlib import Path

import numpy as np

__all__ = ["strip_onnx", "trim_bundle", "write_handoff"]

_EMBEDDINGS = ("emb.word", "emb.pos", "emb.type", "emb.ln.w", "emb.ln.b")


def trim_bundle(src: Path, out: Path) -> Path:
    """``src``'s bundle with its embeddings, tokenizer and config only (``trimmed`` set)."""
    out.mkdir(parents=True, exist_ok=True)
    with np.load(src / "base.npz") as z:
        cfg = json.loads(z["config"].tobytes().decode())
        cfg["q4"] = [n for n in cfg["q4"] if n in _EMBEDDINGS]
        cfg["trimmed"] = True
        arrays = {n: z[n] for n in ("kept_ids", *_EMBEDDINGS) if n in z.files}
    np.savez(out / "base.npz", config=np.frombuffer(json.dumps(cfg).encode(), np.uint8),
             **arrays)
    shutil.copy(src / "tokenizer.json", out / "tokenizer.json")
    return out


def strip_onnx(model_onnx: Path, out: Path) -> Path:
    """``model_onnx`` without the initializers of its word-embedding table (``word.weight``,
    quantized or not, or ``block8``'s ``word.int4`` and ``word.scales``). Not a runnable graph:
    input for ``train.from_onnx --onnx``."""
    import onnx

    m = onnx.load(str(model_onnx))
    keep = [i for i in m.graph.initializer if not i.name.startswith("word.")]
    if len(keep) == len(m.graph.initializer):
        raise ValueError(f"{model_onnx}: no word-embedding initializer (word.*) to strip")
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep)
    onnx.save(m, str(out))
    return out


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with p.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _recompress_xz(src: Path, dest: Path) -> None:
    """``src`` (gzip, or plain) as xz at preset 9."""
    op = gzip.open if src.suffix == ".gz" else open
    with op(src, "rb") as f, lzma.open(dest, "wb", preset=9) as g:
        shutil.copyfileobj(f, g, 1 << 20)


def write_handoff(model_dir: Path, bundle: Path, data: Path | None, out: Path,
                  limit_mib: float = 52.0, answerability: Path | None = None,
                  pairs: Path | None = None) -> list[tuple[str, int]]:
    """Write ``out`` (see the module docstring); (relative path, bytes) per file. ``data``
    (continuation data) or ``pairs`` (distillation pairs), not both. Raises ValueError when the
    data folder lacks a file or the total is over ``limit_mib``."""
    if (data is None) == (pairs is None):
        raise ValueError("give the continuation data or the distillation pairs, one of them")
    if data is not None:
        missing = [n for n in ("train.jsonl.gz", "valid.jsonl.gz") if not (data / n).is_file()]
        if missing:
            raise ValueError(f"{data}: no {', '.join(missing)} (python -m "
                             "train.data.continuation)")
    if pairs is not None and not pairs.is_file():
        raise ValueError(f"{pairs}: no such file (python -m train.truncate pairs)")
    if answerability is not None and not answerability.is_file():
        raise ValueError(f"{answerability}: no such file (python -m train.answerability build)")
    out.mkdir(parents=True, exist_ok=True)
    trim_bundle(bundle, out / "bundle")
    strip_onnx(model_dir / "model.onnx", out / "init.onnx")
    (out / "data").mkdir(exist_ok=True)
    if pairs is not None:
        _recompress_xz(pairs, out / "data" / "pairs.jsonl.xz")
    else:
        _recompress_xz(data / "train.jsonl.gz", out / "data" / "train.jsonl.xz")
        for n in ("valid.jsonl.gz", "STATS.txt"):
            if (data / n).is_file():
                shutil.copy(data / n, out / "data" / n)
    if answerability is not None:
        _recompress_xz(answerability, out / "data" / "answerability.jsonl.xz")
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.name != "MANIFEST.txt")
    sizes = [(str(p.relative_to(out)), p.stat().st_size) for p in files]
    total = sum(n for _, n in sizes)
    lines = [f"{n:>10}  {_sha256(out / rel)}  {rel}" for rel, n in sizes]
    lines.append(f"{total:>10}  total ({total / 2**20:.1f} MiB)")
    (out / "MANIFEST.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if total > limit_mib * 2**20:
        raise ValueError(f"{out}: {total / 2**20:.1f} MiB, over the {limit_mib:g} MiB limit")
    return sizes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-dir", required=True, help="the exported model to continue")
    ap.add_argument("--bundle", required=True, help="its bundle (train.device --vocab-from)")
    ap.add_argument("--data", help="continuation data (train.data.continuation)")
    ap.add_argument("--pairs", type=Path, default=None, metavar="FILE",
                    help="instead of --data: distillation pairs (train.truncate pairs' "
                    "pairs.jsonl.gz) for train/round_distill.sh")
    ap.add_argument("--out", required=True)
    ap.add_argument("--answerability", type=Path, default=None, metavar="FILE",
                    help="answerability rows to carry (train.answerability build's "
                    "pairs.jsonl.gz): the joint round, train/round_multitask.sh")
    ap.add_argument("--limit-mib", type=float, default=52.0)
    a = ap.parse_args(argv)
    try:
        sizes = write_handoff(Path(a.model_dir), Path(a.bundle),
                              Path(a.data) if a.data else None, Path(a.out), a.limit_mib,
                              a.answerability, a.pairs)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print((Path(a.out) / "MANIFEST.txt").read_text(encoding="utf-8"), end="")
    print(f"{len(sizes)} files", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
