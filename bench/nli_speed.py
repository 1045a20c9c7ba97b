"""Speed of the NLI judge's model: statement-context pairs per second for a BERT-base-size
cross-encoder on this machine's CPU, through the judge's own runner (``NliModel``).

The model is built here with ``onnx.helper`` and random weights (12 layers, hidden 768, 12 heads,
intermediate 3072, vocabulary 30,522, 512 positions, 3 labels: the shape of
``cross-encoder/nli-deberta-v3-base``'s BERT-base class), so no torch and no download are
needed; speed does not depend on trained weights. The graph is the plain one an unoptimized
export has (no fused attention: onnxruntime's default session optimizations only), so a real
``optimum-cli`` export should run at about this rate; DeBERTa-v3's relative attention costs
somewhat more than BERT's at the same size. The tokenizer is word-level over the same
vocabulary, so the pair lengths are exact; the rate includes tokenization, padding and the
softmax, as in the judge.

    .venv/bin/python bench/nli_speed.py                 # about 2 minutes on 2 cores
    .venv/bin/python bench/nli_speed.py --write-docs    # and write docs/benchmarks.md's section

The machine may be shared: the load average before and after each configuration is printed
beside its figure, and should be read with it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
VOCAB = 30_522
HIDDEN, LAYERS, HEADS, FFN, POSITIONS, LABELS = 768, 12, 12, 3072, 512, 3
HYPOTHESIS_TOKENS = 20  # a statement of about 15 words


def build_bert_base(directory: Path, seed: int = 0) -> Path:
    """Write a BERT-base-size ONNX sequence classifier with random weights, a word-level
    ``tokenizer.json`` and a ``config.json`` into ``directory``.

    Long because: one ONNX graph built layer by layer: the nested helpers append to the same
    initializer and node lists.
    """
    import json

    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    rng = np.random.default_rng(seed)
    inits: list = []
    nodes: list = []

    def w(name: str, *shape: int, scale: float = 0.02) -> str:
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape, dtype=np.float32) * scale), name))
        return name

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    def node(op: str, ins: list[str], out: str, **kw) -> str:
        nodes.append(helper.make_node(op, ins, [out], **kw))
        return out

    def layer_norm(x: str, name: str) -> str:
        g = const(f"{name}.g", np.ones(HIDDEN, dtype=np.float32))
        b = const(f"{name}.b", np.zeros(HIDDEN, dtype=np.float32))
        return node("LayerNormalization", [x, g, b], f"{name}.out", axis=-1, epsilon=1e-12)

    def dense(x: str, name: str, n_in: int, n_out: int) -> str:
        y = node("MatMul", [x, w(f"{name}.w", n_in, n_out)], f"{name}.mm")
        return node("Add", [y, const(f"{name}.b", np.zeros(n_out, dtype=np.float32))],
                    f"{name}.out")

    dh = HIDDEN // HEADS
    const("heads_shape", np.array([0, 0, HEADS, dh], dtype=np.int64))
    const("hidden_shape", np.array([0, 0, HIDDEN], dtype=np.int64))
    const("one", np.array(1, dtype=np.int64))
    const("zero", np.array(0, dtype=np.int64))
    const("axes12", np.array([1, 2], dtype=np.int64))
    const("scale", np.array(1.0 / np.sqrt(dh), dtype=np.float32))
    const("neg", np.array(-10000.0, dtype=np.float32))
    const("onef", np.array(1.0, dtype=np.float32))
    const("sqrt2", np.array(np.sqrt(2.0), dtype=np.float32))
    const("half", np.array(0.5, dtype=np.float32))

    words = node("Gather", [w("word_emb", VOCAB, HIDDEN), "input_ids"], "words")
    shape = node("Shape", ["input_ids"], "ids_shape")
    seq = node("Gather", [shape, "one"], "seq_len", axis=0)
    pos_ids = node("Range", ["zero", seq, "one"], "pos_ids")
    pos = node("Gather", [w("pos_emb", POSITIONS, HIDDEN), pos_ids], "pos")
    types = node("Gather", [w("type_emb", 2, HIDDEN), "token_type_ids"], "types")
    x = node("Add", [node("Add", [words, pos], "wp"), types], "emb")
    x = layer_norm(x, "emb_ln")
    maskf = node("Cast", ["attention_mask"], "maskf", to=TensorProto.FLOAT)
    inv = node("Sub", ["onef", maskf], "mask_inv")
    bias = node("Unsqueeze", [node("Mul", [inv, "neg"], "mask_neg"), "axes12"], "mask_bias")

    for i in range(LAYERS):
        p = f"l{i}"

        def heads(name: str, perm: list[int], p: str = p, x: str = x) -> str:
            y = dense(x, f"{p}.{name}", HIDDEN, HIDDEN)
            y = node("Reshape", [y, "heads_shape"], f"{p}.{name}.r")
            return node("Transpose", [y], f"{p}.{name}.t", perm=perm)

        q = heads("q", [0, 2, 1, 3])
        k = heads("k", [0, 2, 3, 1])
        v = heads("v", [0, 2, 1, 3])
        s = node("Mul", [node("MatMul", [q, k], f"{p}.qk"), "scale"], f"{p}.scaled")
        s = node("Softmax", [node("Add", [s, bias], f"{p}.masked")], f"{p}.probs", axis=-1)
        ctx = node("MatMul", [s, v], f"{p}.ctx")
        ctx = node("Transpose", [ctx], f"{p}.ctx.t", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, "hidden_shape"], f"{p}.ctx.r")
        attn = dense(ctx, f"{p}.o", HIDDEN, HIDDEN)
        x = layer_norm(node("Add", [attn, x], f"{p}.res1"), f"{p}.ln1")
        h = dense(x, f"{p}.ffn1", HIDDEN, FFN)
        erf = node("Erf", [node("Div", [h, "sqrt2"], f"{p}.gd")], f"{p}.erf")
        g = node("Mul", [node("Mul", [h, "half"], f"{p}.gh"),
                         node("Add", [erf, "onef"], f"{p}.ge")], f"{p}.gelu")
        out = dense(g, f"{p}.ffn2", FFN, HIDDEN)
        x = layer_norm(node("Add", [out, x], f"{p}.res2"), f"{p}.ln2")

    cls = node("Gather", [x, "zero"], "cls", axis=1)
    pooled = node("Tanh", [dense(cls, "pooler", HIDDEN, HIDDEN)], "pooled")
    logits = dense(pooled, "classifier", HIDDEN, LABELS)
    nodes.append(helper.make_node("Identity", [logits], ["logits"]))

    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
              for n in ("input_ids", "attention_mask", "token_type_ids")]
    graph = helper.make_graph(nodes, "bert_base_nli", inputs,
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                                             ["batch", LABELS])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    directory.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(directory / "model.onnx"))

    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"])}
    vocab.update({f"w{i}": i for i in range(4, VOCAB)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.save(str(directory / "tokenizer.json"))
    (directory / "config.json").write_text(json.dumps({
        "model_type": "bert", "max_position_embeddings": POSITIONS, "pad_token_id": 0,
        "id2label": {"0": "contradiction", "1": "entailment", "2": "neutral"},
        "_name_or_path": "bench/random-bert-base"}))
    return directory


def _pairs(rng: np.random.Generator, n: int, total_tokens: int) -> list[tuple[str, str]]:
    premise = total_tokens - HYPOTHESIS_TOKENS - 3  # [CLS] p [SEP] h [SEP]

    def text(k: int) -> str:
        return " ".join(f"w{i}" for i in rng.integers(4, VOCAB, size=k))

    return [(text(premise), text(HYPOTHESIS_TOKENS)) for _ in range(n)]


def measure(model_dir: Path, configs: Sequence[tuple[int, int, int]], seconds: float
            ) -> list[dict]:
    from ragpulse.scorer.judges.nli import NliJudgeSettings, NliModel

    rng = np.random.default_rng(1)
    out = []
    models: dict[int, NliModel] = {}
    for tokens, batch, threads in configs:
        if threads not in models:
            t0 = time.perf_counter()
            models[threads] = NliModel(NliJudgeSettings(model_dir=model_dir, threads=threads))
            load_s = time.perf_counter() - t0
        m = NliModel.__new__(NliModel)
        m.__dict__.update(models[threads].__dict__)  # the same session, another batch size
        m.settings = models[threads].settings.model_copy(update={"batch_size": batch})
        # the session's throughput at this batch size, whatever the judge does with it (a
        # batch-dependent graph, such as the bundled int8 one, runs its pairs alone there:
        # NliModel.batch_invariant)
        m.effective_batch_size = batch
        m.pair_probabilities(_pairs(rng, batch, tokens))  # warm-up: allocations, caches
        load_before = os.getloadavg()
        done, t0, c0 = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - t0 < seconds or done < 2 * batch:
            probs = m.pair_probabilities(_pairs(rng, batch, tokens))
            assert probs.shape == (batch,)
            done += batch
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        row = {"tokens": tokens, "batch": batch, "threads": threads, "pairs": done,
               "pairs_per_s": done / wall, "ms_per_pair": 1000 * wall / done,
               "cpu_ms_per_pair": 1000 * cpu / done, "load_before": load_before[0],
               "load_after": os.getloadavg()[0], "load_s": load_s}
        print(f"{tokens} tokens, batch {batch}, {threads} thread(s): "
              f"{row['pairs_per_s']:.1f} pairs/s (load {row['load_before']:.2f} -> "
              f"{row['load_after']:.2f})", file=sys.stderr)
        out.append(row)
    return out


def report(rows: Sequence[dict], build_s: float, size_mb: float) -> str:
    lines = ["| pair tokens | batch | onnxruntime threads | pairs | pairs/s | ms/pair | "
             "CPU ms/pair | pairs per CPU-second | load avg before / after |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['tokens']} | {r['batch']} | {r['threads']} | {r['pairs']} | "
                     f"{r['pairs_per_s']:.1f} | {r['ms_per_pair']:.0f} | "
                     f"{r['cpu_ms_per_pair']:.0f} | {1000 / r['cpu_ms_per_pair']:.1f} | "
                     f"{r['load_before']:.2f} / "
                     f"{r['load_after']:.2f} |")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    best = {t: max(r["pairs_per_s"] for r in rows if r["tokens"] == t and r["threads"] > 1)
            for t in sorted({r["tokens"] for r in rows if r["threads"] > 1})}
    lines += [
        "",
        f"Model: BERT-base size ({LAYERS} layers, hidden {HIDDEN}, {HEADS} heads, intermediate "
        f"{FFN}, vocabulary {VOCAB}), random weights, built with `onnx.helper` in {build_s:.0f} s "
        f"({size_mb:.0f} MB of float32 weights); onnxruntime's default CPU session, no fused "
        f"attention. Load (session + one test pair) {rows[0]['load_s']:.1f} s, not in the rates. "
        f"Peak RSS of the process {rss:.0f} MB (building the model included). Hypotheses are {HYPOTHESIS_TOKENS} tokens, the "
        "premise the rest; the rate includes tokenization and padding.",
        "",
        "What it means for a sample: the judge runs statements x context chunks pairs, so a "
        "typical answer of 4 statements against 5 retrieved passages is 20 pairs: "
        + " and ".join(f"{v / 20:.2f} samples/s at {t} tokens" for t, v in best.items())
        + " on this machine with the best batch size (the local judge: about 10 samples/s, "
        "[Speed (local judge)](#speed-local-judge)). Sample traces (`--sample-rate`) accordingly, "
        "or give the judge a GPU build of onnxruntime.",
        "",
        "A load average above the core count means other work shared the CPU during the run: "
        "pairs/s is then lower than on a quiet machine, and pairs per CPU-second (what one free "
        "core does) is the steadier figure.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", default="128,256", help="pair lengths in tokens")
    p.add_argument("--batches", default="1,8", help="batch sizes")
    p.add_argument("--threads", default="2", help="onnxruntime intra-op thread counts")
    p.add_argument("--seconds", type=float, default=12.0, help="time per configuration")
    p.add_argument("--model-dir", help="reuse a directory written by an earlier run")
    p.add_argument("--write-docs", action="store_true",
                   help="write the result into docs/benchmarks.md")
    args = p.parse_args(argv)
    configs = [(int(t), int(b), int(n)) for n in args.threads.split(",")
               for t in args.tokens.split(",") for b in args.batches.split(",")]
    with tempfile.TemporaryDirectory(prefix="nli-bench-") as tmp:
        t0 = time.perf_counter()
        d = Path(args.model_dir) if args.model_dir else Path(tmp) / "model"
        if not (d / "model.onnx").is_file():
            build_bert_base(d)
        build_s = time.perf_counter() - t0
        size_mb = (d / "model.onnx").stat().st_size / 2**20
        rows = measure(d, configs, args.seconds)
    body = report(rows, build_s, size_mb)
    print(body)
    if args.write_docs:
        from bench.quality import write_docs

        command = "python bench/nli_speed.py " + " ".join(
            shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
        write_docs("Speed (NLI judge model)", body, command)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
