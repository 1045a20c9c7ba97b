"""Read an exported model directory back into trainable weights: continue from a shipped model.

    python -m train.from_onnx --model-dir scorer/ragpulse/scorer/judges/nli/faith_e5 --out W

Only the int8 ``model.onnx`` of a shipped version is kept (no float checkpoint is committed), so
continuing from it means dequantizing it: every quantized MatMul weight is ``(q - zero_point) *
scale`` per output channel, the position embeddings likewise per tensor. ``W`` gets the shards
:func:`train.train.load_shards` reads (``--init W`` of ``train.train``), everything but the word
embeddings, which stay the bundle's (they were frozen in training). A jointly trained
answerability head (``answer_head``, ``train.train --answerability``) reads back with the rest;
``answerability@1``'s nodes (``train.answerability``, on the frozen encoder) are skipped. The calibration folded into
the graph (``cal_a``, ``cal_b``) is read back as well, so the raw logit trains on as before
(calibrate again after continuing: ``train.export --calibration``).

Graphs of the other ``train.export --format``s read back too: ``block8``'s ``MatMulNBits``
weights (``(q - 128) * scale`` per block of 32), ``gptq8``'s int8 codes per output channel (its
``DynamicQuantizeMatMul`` and per-row ``MatMulInteger`` nodes), ``fp16``'s weights behind their
``Cast``, and ``fp32``'s plain ones.

Quantizing the dequantized weights again gives the same int8 tensors (the per-channel scale is
the column's largest magnitude / 127, which dequantizing keeps), so a model rebuilt this way
differs from the shipped one only where its weights were trained further.

Anonymous weights (``onnx::MatMul_1361``) and initializers the exporter shares between equal
tensors are named by the node that uses them (``/layers.0/q/MatMul_quant`` -> ``layers.0.q``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

__all__ = ["read_weights"]


def _module(node_name: str) -> str:
    """The torch module a node belongs to, from the exporter's node name:
    ``/layers.0/q/MatMul_quant`` -> ``layers.0.q``, ``/head/head.0/Gemm_Add`` -> ``head.0``,
    ``/answer_head/answer_head.2/Gemm`` -> ``answer_head.2``."""
    parts = node_name.strip("/").split("/")[:-1]
    if parts[:1] in (["head"], ["answer_head"]) and len(parts) > 1:
        return parts[1]
    return ".".join(parts)


def read_weights(model_onnx: Path) -> dict[str, np.ndarray]:
    """The float32 state (``FaithModel`` names, no ``word.weight``) of an exported graph."""
    import onnx
    from onnx import numpy_helper

    g = onnx.load(str(model_onnx)).graph
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    # equal tensors are stored once and passed on by Identity nodes (the exporter's dedup)
    alias = {n.output[0]: n.input[0] for n in g.node if n.op_type == "Identity"}
    for name in list(alias):
        src = name
        while src in alias and src not in inits:
            src = alias[src]
        if src in inits:
            inits[name] = inits[src]

    def dequant(base: str, per_column: bool) -> np.ndarray:
        q = inits[f"{base}_quantized"].astype(np.float32)
        scale = inits[f"{base}_scale"].astype(np.float32)
        zp = inits[f"{base}_zero_point"].astype(np.float32)
        if per_column and scale.ndim == 1:  # per output channel: [in, out] with scale [out]
            return (q - zp[None, :]) * scale[None, :]
        return (q - zp) * scale

    state: dict[str, np.ndarray] = {}
    for k in ("ttype", "cal_a", "cal_b"):
        state[k] = np.asarray(inits[k], dtype=np.float32)
    state["pos.weight"] = np.asarray(inits["pos.weight"], dtype=np.float32) \
        if "pos.weight" in inits else dequant("pos.weight", per_column=False)
    cast = {n.output[0]: n.input[0] for n in g.node if n.op_type == "Cast"}
    for n in g.node:
        if n.name.startswith("answerability/"):
            continue  # answerability@1's head on the frozen encoder (train.answerability): no weights of FaithModel
        mod = _module(n.name)
        if n.op_type in ("MatMulInteger", "DynamicQuantizeMatMul") and \
                n.input[1].endswith("_quantized"):
            # [in, out] in the graph, [out, in] in torch
            w = dequant(n.input[1][: -len("_quantized")], per_column=True)
            state[f"{mod}.weight"] = w.T.copy()
        elif n.op_type == "MatMulNBits":
            attrs = {a.name: a.i for a in n.attribute}
            q = inits[n.input[1]].astype(np.float32) - 2 ** (attrs["bits"] - 1)
            scale = inits[n.input[2]].astype(np.float32).reshape(q.shape[0], q.shape[1], 1)
            state[f"{mod}.weight"] = (q * scale).reshape(attrs["N"], attrs["K"])
        elif n.op_type == "MatMul" and (src := cast.get(n.input[1], n.input[1])) in inits:
            w = np.asarray(inits[src], dtype=np.float32)
            if w.ndim == 2:
                state[f"{mod}.weight"] = w.T.copy()
        elif n.op_type == "Gemm" and n.input[1] in inits:  # the head, left in float
            transb = next((a.i for a in n.attribute if a.name == "transB"), 0)
            w = np.asarray(inits[n.input[1]], dtype=np.float32)
            state[f"{mod}.weight"] = w if transb else w.T.copy()
            if len(n.input) > 2 and n.input[2] in inits:
                state[f"{mod}.bias"] = np.asarray(inits[n.input[2]], dtype=np.float32)
        elif n.op_type == "LayerNormalization":
            state[f"{mod}.weight"] = np.asarray(inits[n.input[1]], dtype=np.float32)
            state[f"{mod}.bias"] = np.asarray(inits[n.input[2]], dtype=np.float32)
        elif n.op_type == "Add" and mod.startswith(("layers.", "head.", "answer_head.")) and \
                n.name.endswith(("/Add", "Gemm_Add")):
            bias = [i for i in n.input if i in inits]
            if len(bias) == 1 and inits[bias[0]].ndim == 1:
                state[f"{mod}.bias"] = np.asarray(inits[bias[0]], dtype=np.float32)
    return state


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--model-dir", help="an exported model directory (model.onnx)")
    src.add_argument("--onnx", help="a graph file: model.onnx, or train.handoff's init.onnx "
                     "(the graph without its word embeddings)")
    ap.add_argument("--out", required=True, help="folder for the weight shards")
    a = ap.parse_args(argv)
    import torch

    from .train import save_shards

    state = read_weights(Path(a.onnx) if a.onnx else Path(a.model_dir) / "model.onnx")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    paths = save_shards({k: torch.from_numpy(v) for k, v in state.items()}, out)
    print(f"{len(state)} tensors -> " + ", ".join(p.name for p in paths), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
