"""Per-class faithfulness score distributions of the local judges, on every faithfulness set
(issue 22: distributions, calibration, alert levels).

    python bench/faithfulness_distributions.py --data ../shared/data \
        --judge fast model --cache /tmp/alerts22 [--write-docs]

For each judge it scores every set once through the real engine path (``Evaluator`` + the judge,
as ``train/evaluate.py`` and ``bench/quality.py``) and keeps the per-sample scores in
``<cache>/<judge>.jsonl`` (the first line names the judge's version: a retrained model or new
weights give another version and are scored again; ``--rescore`` forces it). The files are named
by the judges' names since the rename of issue 39 (``fast.jsonl``, ``model.jsonl``); a cache
written under the old names is not read, so those judges are scored again once. ``--judge``
takes the old names too, with the registry's warning. Then it prints, from the cached scores
only:

- per set and class (faithful / unfaithful; JNLI valid: entailment / contradiction, neutral
  apart): n, mean, deciles p10 ... p90 and a text histogram;
- calibration (``bench/faithfulness_calibration.py``): reliability and ECE per judge;
- the default absolute alert level per judge (``bench/faithfulness_calibration.alert_level``).

Sets: ``dev`` (bench/data/faithfulness_rag_handwritten.jsonl, reported per language), ``jnli``
(JGLUE JNLI valid), ``qags_cnndm``, ``halueval``, ``faithbench``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.docs_section import write_constant, write_section
from bench.judges import add_judge_option, judge_summary
from bench.quality import FILES, lang_of, read_jsonl, score_set

REPO = Path(__file__).resolve().parent.parent

SETS = ("dev", "jnli", "qags_cnndm", "halueval", "faithbench")
JUDGES = ("fast", "model")
"""The judges this bench measures: the two bundled ones (ragpulse.scorer.judges.registry)."""
DOCS = REPO / "docs" / "benchmarks.md"
MARK = "<!-- bench/faithfulness_distributions.py -->"
LEVELS = REPO / "scorer" / "ragpulse" / "scorer" / "judges" / "registry.py"


def load_rows(key: str, data: Path, dev: Path, limit: int | None) -> list[dict[str, Any]]:
    """Rows with ``label`` 1 (faithful / entailment), 0 (unfaithful / contradiction) or
    ``"neutral"`` (JNLI only) and ``lang``."""
    if key == "jnli":
        lab = {"entailment": 1, "contradiction": 0, "neutral": "neutral"}
        return [{"id": f"jnli-{r['sentence_pair_id']}", "question": "", "contexts": [r["sentence1"]],
                 "answer": r["sentence2"], "label": lab[r["label"]], "lang": "ja"}
                for r in read_jsonl(data / FILES["jnli"], limit)]
    rows = read_jsonl(dev if key == "dev" else data / FILES[key], limit)
    return [{**r, "label": int(r["label"]["faithful"]), "lang": lang_of(r)} for r in rows]


def weight_files(name: str) -> list[Path]:
    """The files that decide the judge's scores: the bundled model or the detector's weights."""
    from ragpulse.scorer.judges.factory import BUNDLED_MODEL_DIR

    if name == "model":
        return sorted(p for p in Path(BUNDLED_MODEL_DIR).iterdir() if p.is_file())
    import ragpulse.scorer.judges.local as local

    return sorted((Path(local.__file__).parent / "weights").glob("*.json"))


def judge_version(name: str) -> str:
    """A fingerprint of the judge's weight files and, for ``model``, of its default nli
    settings other than resources (premises, windows, claims): a retrained model, refitted
    weights or another premise selection give another one, so its cached scores are not
    reused."""
    h = hashlib.sha256()
    for p in weight_files(name):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    if name == "model":
        from ragpulse.scorer.judges.factory import _local_model_settings
        from ragpulse.scorer.judges.nli.onnx_model import _VERSION
        from ragpulse.scorer.judges.nli.settings import scoring_settings

        h.update(_VERSION.encode())  # how the model's pairs run (nli-support@2: one at a time)

        own = scoring_settings(_local_model_settings(None))
        h.update(json.dumps(own, sort_keys=True).encode())
    return f"{name}:{h.hexdigest()[:12]}"


def build_judge(name: str, threads: int) -> Any:
    from ragpulse.scorer.judges.factory import build_judge as bj

    return bj(name, threads=threads)


async def score_judge(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    judge = build_judge(name, args.threads)
    path = Path(args.cache) / f"{name}.jsonl"
    t0 = time.perf_counter()
    out: list[dict[str, Any]] = []
    try:
        version = judge_version(name)
        for key in args.sets:
            rows = load_rows(key, Path(args.data), Path(args.dev), args.limit)
            clean = [{k: v for k, v in r.items() if k not in ("lang",)} for r in rows]
            vals = await score_set(judge, clean, "faithfulness", f"{name}/{key}", args.concurrency)
            out += [{"set": key, "id": r["id"], "lang": r["lang"], "label": r["label"], "score": v}
                    for r, v in zip(rows, vals, strict=True)]
    finally:
        await judge.aclose()
    path.parent.mkdir(parents=True, exist_ok=True)
    head = {"judge": name, "version": version, "sets": list(args.sets), "limit": args.limit,
            "seconds": round(time.perf_counter() - t0, 1),
            "scored_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    with path.open("w", encoding="utf-8") as f:
        f.write(json.dumps(head) + "\n")
        for r in out:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return out


def read_cache(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return json.loads(lines[0]), [json.loads(x) for x in lines[1:]]


# --------------------------------------------------------------------------- report

DECILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def groups(samples: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """(title, samples) per reported set: dev per language and pooled, the shared sets."""
    out: list[tuple[str, list[dict[str, Any]]]] = []
    for key in SETS:
        rows = [r for r in samples if r["set"] == key and r["score"] is not None]
        if not rows:
            continue
        if key == "dev":
            for lg in sorted({r["lang"] for r in rows}):
                out.append((f"dev-{lg}", [r for r in rows if r["lang"] == lg]))
            out.append(("dev (all)", rows))
        else:
            out.append(({"jnli": "jnli-valid"}.get(key, key), rows))
    return out


def hist(x: np.ndarray, bins: int = 10) -> str:
    """Ten bins over [0, 1] as block characters, each scaled to the largest bin."""
    counts, _ = np.histogram(np.clip(x, 0, 1), bins=bins, range=(0.0, 1.0))
    top = counts.max() or 1
    blocks = " ▁▂▃▄▅▆▇█"
    return "`" + "".join(blocks[int(round(8 * c / top))] for c in counts) + "`"


def class_rows(judge: str, title: str, rows: list[dict[str, Any]]) -> list[str]:
    names = ((1, "entailment"), (0, "contradiction"), ("neutral", "neutral")) \
        if title.startswith("jnli") else ((1, "faithful"), (0, "unfaithful"))
    lines = []
    for cls, name in names:
        x = np.asarray([r["score"] for r in rows if r["label"] == cls], dtype=np.float64)
        if not len(x):
            continue
        q = np.quantile(x, DECILES)
        lines.append(f"| {judge} | {title} | {name} | {len(x)} | {x.mean():.3f} | "
                     + " | ".join(f"{v:.3f}" for v in q) + f" | {hist(x)} |")
    return lines


def distributions(caches: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]) -> list[str]:
    lines = ["| judge | set | class | n | mean | p10 | p25 | p50 | p75 | p90 | histogram 0 … 1 |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, (_, samples) in caches.items():
        for title, rows in groups(samples):
            lines += class_rows(name, title, rows)
    return lines


def report(caches: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]], command: str) -> str:
    from bench.faithfulness_calibration import alert_section, calibration_section

    heads = "; ".join(f"`{n}` ({judge_summary(n)}), version `{h['version']}`, scored "
                      f"{h['scored_at']} in {h['seconds']:.0f} s" for n, (h, _) in caches.items())
    body = [
        f"Command: `{command}`  ",
        f"Judges: {heads}.",
        "",
        "Score = the sample's `faithfulness` value through the engine (`Evaluator`). Classes: the "
        "set's `faithful` label; JNLI valid (premise = context, hypothesis = answer): entailment "
        "as faithful, contradiction as unfaithful, neutral listed apart. Histogram: ten bins of "
        "width 0.1 from 0 to 1, each scaled to the class's largest bin.",
        "",
        *distributions(caches),
        "",
        *calibration_section(caches),
        "",
        *alert_section(caches),
    ]
    return "\n".join(body)


def write_docs(body: str) -> None:
    write_section(MARK, body, heading='## Faithfulness score distributions (local judges)', before='## Quality (fast judge): calibration', docs=DOCS)


def write_levels(caches: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]) -> dict[str, float]:
    """Set ``FAITHFULNESS_LEVELS`` in ragpulse.scorer.judges.registry to the measured levels (both
    judges needed: the dict is written whole)."""
    from bench.faithfulness_calibration import measured_levels

    found = measured_levels(caches)
    levels = dict(found)
    if set(levels) != set(JUDGES):
        raise SystemExit(f"--write-levels needs both judges (--judge {' '.join(JUDGES)})")
    write_constant(LEVELS, "FAITHFULNESS_LEVELS", levels, ".2f")
    return levels


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_judge_option(ap, *JUDGES, nargs="+", default=list(JUDGES))
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--dev", default=str(REPO / "bench" / "data" / "faithfulness_rag_handwritten.jsonl"))
    ap.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    ap.add_argument("--cache", default="/tmp/ragpulse-faithfulness-scores",
                    help="folder of the per-sample score files, one per judge")
    ap.add_argument("--rescore", action="store_true", help="score again even if cached")
    ap.add_argument("--limit", type=int, help="first N rows per set (a quick check)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--write-levels", action="store_true",
                    help="also set the default alert levels (ragpulse.dashboards.levels); then "
                    "run `ragpulse dashboards export dashboards/generated`")
    args = ap.parse_args(argv)
    caches = {}
    for name in args.judge:
        path = Path(args.cache) / f"{name}.jsonl"
        fresh = None
        if path.exists() and not args.rescore:
            head, samples = read_cache(path)
            version = judge_version(name)
            if head["version"] == version and set(args.sets) <= set(head["sets"]) \
                    and head.get("limit") == args.limit:
                fresh = (head, samples)
            else:
                print(f"{name}: cache is for {head['version']}, judge is {version}: scoring again",
                      file=sys.stderr)
        if fresh is None:
            asyncio.run(score_judge(name, args))
            fresh = read_cache(path)
        caches[name] = (fresh[0], [r for r in fresh[1] if r["set"] in args.sets])
    argv_s = " ".join(a for a in (argv if argv is not None else sys.argv[1:])
                      if a not in ("--rescore", "--write-levels"))
    body = report(caches, f"python bench/faithfulness_distributions.py {argv_s}".strip())
    print(body)
    if args.write_docs:
        write_docs(body)
    if args.write_levels:
        print(f"levels written to {LEVELS}: {write_levels(caches)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
