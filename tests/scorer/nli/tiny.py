"""A tiny NLI model built here, so no test downloads one: an ONNX graph made with ``onnx.helper``
(a masked bag of token embeddings -> logits), a word-level ``tokenizer.json`` and a
``config.json``.

The model's verdict is a known word pattern: a pair containing ``evidence`` reads as
entailment, one containing ``contradicts`` as contradiction, anything else as neutral; a
hypothesis with ``unsupported`` is pushed to neutral. ``[PAD]`` has a large embedding on
purpose: a runner that ignored the attention mask would score padded pairs differently.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
WORDS = (
    "the a an is of in and to was it on . , paris capital france city river seine amazon brazil "
    "water evidence contradicts unsupported filler word text statement premise answer tokyo "
    "japan largest flows through carries more than any other lies"
).split()
VOCAB = {w: i for i, w in enumerate(SPECIAL + sorted(set(WORDS)))}
NLI_LABELS = {0: "contradiction", 1: "entailment", 2: "neutral"}


def _weights(n_out: int, positive: int) -> tuple[np.ndarray, np.ndarray]:
    emb = np.zeros((len(VOCAB), n_out), dtype=np.float32)
    bias = np.zeros(n_out, dtype=np.float32)
    if n_out == 1:  # one logit: P(supported) = sigmoid
        bias[0] = -4.0
        emb[VOCAB["evidence"], 0] = 10.0
        emb[VOCAB["contradicts"], 0] = -10.0
        emb[VOCAB["unsupported"], 0] = -30.0
        emb[VOCAB["[PAD]"], 0] = 7.0
        return emb, bias
    other = [i for i in range(n_out) if i != positive]
    neutral = other[-1]
    bias[neutral] = 2.0
    emb[VOCAB["evidence"], positive] = 10.0
    emb[VOCAB["contradicts"], other[0]] = 10.0
    emb[VOCAB["unsupported"], neutral] = 30.0
    emb[VOCAB["[PAD]"], positive] = 7.0
    return emb, bias


def build_tiny_nli(
    directory: Path,
    *,
    labels: dict[int, str] | None = None,
    positive: int = 1,
    token_type_ids: bool = True,
    max_position_embeddings: int = 32,
    config_extra: dict | None = None,
) -> Path:
    """Write ``model.onnx``, ``tokenizer.json`` and ``config.json`` into ``directory`` and
    return it. ``labels`` ``{}`` writes no id2label and a one-logit model."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    labels = NLI_LABELS if labels is None else labels
    n_out = max(1, len(labels))
    emb, bias = _weights(n_out, positive)
    directory.mkdir(parents=True, exist_ok=True)

    inits = [numpy_helper.from_array(emb, "emb"), numpy_helper.from_array(bias, "bias"),
             numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
             numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1")]
    nodes = [
        helper.make_node("Gather", ["emb", "input_ids"], ["tok"]),              # B,L,K
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["maskf", "axis2"], ["mask3"]),           # B,L,1
    ]
    summed = "tok"
    if token_type_ids:  # a zero segment embedding: the graph takes the input, the scores ignore it
        inits.append(numpy_helper.from_array(np.zeros((2, n_out), dtype=np.float32), "seg"))
        nodes += [helper.make_node("Gather", ["seg", "token_type_ids"], ["segv"]),
                  helper.make_node("Add", ["tok", "segv"], ["toks"])]
        summed = "toks"
    nodes += [
        helper.make_node("Mul", [summed, "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis1"], ["pooled"], keepdims=0),  # B,K
        helper.make_node("Add", ["pooled", "bias"], ["logits"]),
    ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
              for n in ["input_ids", "attention_mask"] + (["token_type_ids"] if token_type_ids else [])]
    graph = helper.make_graph(nodes, "tiny_nli", inputs,
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                                             ["batch", n_out])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(directory / "model.onnx"))

    tok = Tokenizer(models.WordLevel(VOCAB, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", VOCAB["[CLS]"]), ("[SEP]", VOCAB["[SEP]"])])
    tok.save(str(directory / "tokenizer.json"))

    config: dict = {"model_type": "bert", "max_position_embeddings": max_position_embeddings,
                    "pad_token_id": 0, "_name_or_path": "tests/tiny-nli"}
    if labels:
        config["id2label"] = {str(k): v for k, v in labels.items()}
    config.update(config_extra or {})
    (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return directory


def spy(m: Any, monkeypatch: Any) -> list[tuple[str, str]]:
    """Record every pair ``m`` runs."""
    seen: list[tuple[str, str]] = []
    real = m.pair_probabilities

    def run(pairs):
        seen.extend(pairs)
        return real(pairs)

    monkeypatch.setattr(m, "pair_probabilities", run)
    return seen
