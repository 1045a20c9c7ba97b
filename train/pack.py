"""A training run's output packed small enough to come back from a GPU machine, and unpacked.

    python -m train.pack --weights OUT --dest PACK/run-a          # on the GPU machine
    python -m train.pack --unpack PACK/run-a --weights W          # here: W as train.train wrote it

A device machine returns at most 16 MiB a file and 64 MiB in all, and one run's fp16 shards are
43 MB. Packed, the encoder's and the head's 2-D ``Linear`` weights are int8 per output channel
(scale = max |w| / 127 of the fp16 value, round half to even): the scheme ``train.export``'s
onnxruntime quantization applies to the same weights (per output channel, symmetric), so the
exported int8 graph is the one a direct export gives (``tests/train/test_pipeline.py``).
Everything else (biases, LayerNorms, position and type embeddings, calibration) stays fp16; the
frozen word embeddings are not in a run's shards anyway. ``valid_scores.npz`` and
``metrics.json`` travel inside the first part. About 22 MB a run, in ``--parts`` files.

A joint run's answerability head (``answer_head.*``, ``train.train --answerability``) travels
as the faithfulness head does; packed against a ``--base`` without that head (the shipped
model), its 2-D weights travel as themselves (int8 per output channel), not as a change. Its
validation probabilities (``answer_probs``, ``answer_label``) and cuts (``metrics.json``'s
``answerability``, which ``train.export`` writes into ``config.json``) come back with them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

KEEP_FLOAT = ("pos.", "ttype", "word.")  # Gathers, not MatMuls: kept as they are
Q, S = "__q__", "__scale__"
D = "__dq__"  # int8 of (weight - base) per output channel, scale under S: a continuation's change
BASE = "__base__"  # the base's fingerprint (:func:`fingerprint`), when packed against one


def _quantize(w: np.ndarray, fp16: bool = True) -> tuple[np.ndarray, np.ndarray]:
    w = w.astype(np.float16).astype(np.float32) if fp16 else w.astype(np.float32)
    scale = (np.abs(w).max(axis=1) / np.float32(127.0)).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1.0))
    q = np.clip(np.round(w / safe[:, None]), -127, 127).astype(np.int8)
    return q, scale


def read_shards(folder: Path, prefix: str = "weights") -> dict[str, np.ndarray]:
    """Every tensor of ``folder/PREFIX-K.npz`` (``train.train``'s shards), as stored; empty when
    there are none."""
    state: dict[str, np.ndarray] = {}
    for p in sorted(folder.glob(f"{prefix}-*.npz")):
        z = np.load(p)
        state.update({k: z[k] for k in z.files})
    return state


def fingerprint(state: dict[str, np.ndarray]) -> str:
    """sha256 over a state's names and fp16 values: which base a delta pack was made against."""
    import hashlib

    h = hashlib.sha256()
    for k in sorted(state):
        h.update(k.encode())
        h.update(np.ascontiguousarray(state[k], dtype=np.float16).tobytes())
    return h.hexdigest()


def pack(weights: Path, dest: Path, parts: int = 2, base: Path | None = None) -> list[Path]:
    """``weights`` (a ``train.train`` output folder) as ``dest-K.npz``, ``parts`` files.

    With ``base`` (the ``--init`` shards a continuation started from), each 2-D weight travels
    as its change from the base, int8 per output channel: a continuation at a small learning
    rate moves weights by less than one step of the weights' own int8 grid, which quantizing
    the weights themselves would erase; its change keeps about 1 % of its own largest value."""
    state = read_shards(weights)
    if not state:
        raise SystemExit(f"no weights-*.npz in {weights}")
    ref = read_shards(base) if base is not None else {}
    if base is not None and not ref:
        raise SystemExit(f"no weights-*.npz in {base}")
    arrays: list[dict[str, np.ndarray]] = [{} for _ in range(parts)]
    sizes = [0] * parts
    for k in sorted(state, key=lambda k: -state[k].size):  # biggest first, to the lightest part
        v = state[k]
        i = sizes.index(min(sizes))
        if v.ndim == 2 and k.endswith(".weight") and not k.startswith(KEEP_FLOAT):
            if k in ref and ref[k].shape == v.shape:
                q, s = _quantize(v.astype(np.float32) - ref[k].astype(np.float32), fp16=False)
                arrays[i][D + k], arrays[i][S + k] = q, s
            else:
                q, s = _quantize(v)
                arrays[i][Q + k], arrays[i][S + k] = q, s
            sizes[i] += q.nbytes
        else:
            arrays[i][k] = v.astype(np.float16)
            sizes[i] += v.size * 2
    scores = weights / "valid_scores.npz"
    if scores.is_file():
        z = np.load(scores)
        arrays[0].update({f"__valid__{k}": z[k] for k in z.files})
    metrics = weights / "metrics.json"
    if metrics.is_file():
        arrays[0]["__metrics__"] = np.frombuffer(metrics.read_bytes(), dtype=np.uint8)
    if ref:
        arrays[0][BASE] = np.frombuffer(fingerprint(ref).encode(), dtype=np.uint8)
    dest.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for i, a in enumerate(arrays):
        p = dest.parent / f"{dest.name}-{i}.npz"
        np.savez_compressed(p, **a)
        out.append(p)
    return out


def unpack(src: Path, weights: Path, base: Path | None = None) -> Path:
    """``src-K.npz`` back into ``weights``: ``weights-0.npz`` (fp16, what ``train.export
    --weights`` and ``train.train --init`` read), ``valid_scores.npz``, ``metrics.json``.
    A pack made against a base needs the same ``base`` (its fingerprint is checked)."""
    files = sorted(src.parent.glob(f"{src.name}-*.npz"))
    if not files:
        raise SystemExit(f"no {src.name}-*.npz in {src.parent}")
    ref = read_shards(base) if base is not None else {}
    with np.load(files[0]) as z:  # pack() puts the base's fingerprint in the first part
        packed_base = z[BASE].tobytes().decode() if BASE in z.files else None
    if packed_base is not None:
        if not ref:
            raise SystemExit(f"{src.name} holds changes from a base: give --base (the --init "
                             "shards the run started from)")
        if fingerprint(ref) != packed_base:
            raise SystemExit(f"{src.name} was packed against another base than {base}")
    state: dict[str, np.ndarray] = {}
    valid: dict[str, np.ndarray] = {}
    weights.mkdir(parents=True, exist_ok=True)
    for p in files:
        z = np.load(p)
        for k in z.files:
            if k.startswith(Q):
                name = k[len(Q):]
                w = z[k].astype(np.float32) * z[S + name][:, None]
                state[name] = w.astype(np.float16)
            elif k.startswith(D):
                name = k[len(D):]
                w = ref[name].astype(np.float32) + z[k].astype(np.float32) * z[S + name][:, None]
                state[name] = w.astype(np.float16)
            elif k.startswith(S) or k == BASE:
                continue
            elif k.startswith("__valid__"):
                valid[k[len("__valid__"):]] = z[k]
            elif k == "__metrics__":
                (weights / "metrics.json").write_bytes(z[k].tobytes())
            else:
                state[k] = z[k]
    np.savez(weights / "weights-0.npz", **state)
    if valid:
        np.savez(weights / "valid_scores.npz", **valid)
    return weights


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", required=True, type=Path, help="a train.train output folder")
    ap.add_argument("--dest", type=Path, help="pack into DEST-K.npz")
    ap.add_argument("--unpack", type=Path, help="unpack SRC-K.npz into --weights")
    ap.add_argument("--parts", type=int, default=2)
    ap.add_argument("--base", type=Path, help="the --init shards the run continued from: pack "
                    "its 2-D weights as changes from them (and unpack them so)")
    a = ap.parse_args(argv)
    if (a.dest is None) == (a.unpack is None):
        ap.error("give --dest (pack) or --unpack")
    if a.dest is not None:
        paths = pack(a.weights, a.dest, a.parts, a.base)
        print(json.dumps({str(p): p.stat().st_size for p in paths}))
    else:
        print(unpack(a.unpack, a.weights, a.base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
