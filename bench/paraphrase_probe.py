"""Does a faithfulness judge read meaning or words? A probe of minimal pairs (issue 22).

Each of the 36 items of ``bench/data/paraphrase_probe.jsonl`` (12 English, 12 Japanese, 12
Chinese, written for this probe, never trained on) is one premise of one or two sentences and
three statements about it:

* ``copy``: the premise's sentence, trimmed: what an extractive answer writes;
* ``paraphrase``: the same fact in other words and another construction ("Do not drink alcohol
  ... for at least 72 hours after the last dose" -> "Wait at least three days after your final
  tablet before having any alcohol"): supported;
* ``wrong``: the paraphrase with one part wrong (a value, two roles swapped, the polarity, a
  place): unsupported, and worded like the paraphrase, so only its meaning tells them apart.

A judge that reads meaning scores ``paraphrase`` high and above ``wrong``; one that reads words
scores ``copy`` high and ``paraphrase`` as low as ``wrong``. Each statement is judged against the
premise alone (no premise selection): ``model`` and ``nli`` give the model's P of the pair,
``fast`` the statement-support detector's P (``--judge`` takes the old names too, with the
registry's warning).

    .venv/bin/python bench/paraphrase_probe.py [--judge model|nli|fast] [--model-dir DIR]
        [--json OUT] [--write-docs]

Prints, per language and overall: mean P of each kind, the share of items whose paraphrase is
above its wrong twin, and the AUROC of paraphrase against wrong. ``--write-docs`` puts the table
in docs/benchmarks.md. A diagnostic: it decides nothing (train/README.md's ship rules do).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

from bench import docs_section
from bench.judges import add_judge_option
from bench.quality import auroc
from ragpulse.scorer.judges.registry import JUDGE_ALIASES, JUDGE_NAMES

REPO = Path(__file__).resolve().parents[1]

DATA = REPO / "bench" / "data" / "paraphrase_probe.jsonl"
KINDS = ("copy", "paraphrase", "wrong")
JUDGES = ("model", "nli", "fast")
"""The judges the probe runs (ragpulse.scorer.judges.registry): the two with a model, the
lexical one."""
MARK = "<!-- paraphrase-probe -->"


def load(path: Path = DATA) -> list[dict]:
    """The probe's items. Raises ``ValueError`` for an item without every field or whose
    paraphrase equals its wrong twin."""
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for it in items:
        missing = [k for k in ("id", "lang", "premise", "wrong_kind", *KINDS) if not it.get(k)]
        if missing:
            raise ValueError(f"{path}: item {it.get('id')} lacks {missing}")
        if it["paraphrase"] == it["wrong"]:
            raise ValueError(f"{path}: item {it['id']}: paraphrase and wrong are the same")
    return items


def scorer(judge: str, model_dir: Path | None, threads: int):
    """A function (premise, statements) -> P per statement for ``judge``."""
    if judge == "fast":
        from ragpulse.scorer.embeddings import USEEmbedder
        from ragpulse.scorer.judges.local.support_detector import SupportDetector

        det = SupportDetector(USEEmbedder(threads=threads).warm())
        return lambda premise, statements: det.predict(statements, [premise])
    from ragpulse.scorer.judges.factory import _local_model_settings
    from ragpulse.scorer.judges.nli import NliJudgeSettings
    from ragpulse.scorer.judges.nli.onnx_model import NliModel

    if judge == "model":
        settings = _local_model_settings(NliJudgeSettings(threads=threads, model_dir=model_dir))
    else:
        if model_dir is None:
            raise SystemExit("--judge nli needs --model-dir")
        settings = NliJudgeSettings(model_dir=model_dir, threads=threads)
    model = NliModel(settings)
    return lambda premise, statements: [float(p) for p in
                                        model.pair_probabilities([(premise, s) for s in statements])]


def summarize(rows: list[dict]) -> dict:
    """Per language (and ``all``): n, mean P of each kind, paraphrase-above-wrong share, AUROC
    of paraphrase against wrong."""
    out: dict[str, dict] = {}
    for lang in (*sorted({r["lang"] for r in rows}), "all"):
        sel = [r for r in rows if lang in ("all", r["lang"])]
        out[lang] = {
            "n": len(sel),
            **{f"{k}_mean": round(float(np.mean([r[k] for r in sel])), 3) for k in KINDS},
            "paraphrase_above_wrong": round(sum(r["paraphrase"] > r["wrong"] for r in sel) / len(sel), 3),
            "auroc_paraphrase_vs_wrong": round(auroc(
                [r["paraphrase"] for r in sel] + [r["wrong"] for r in sel],
                [1] * len(sel) + [0] * len(sel)), 3),
        }
    return out


def table(summary: dict, judge: str) -> str:
    lines = [f"`{judge}`, each statement against its premise alone:", "",
             "| language | items | copy | paraphrase | wrong | paraphrase > wrong | AUROC paraphrase vs wrong |",
             "|---|---|---|---|---|---|---|"]
    for lang, s in summary.items():
        lines.append(f"| {lang} | {s['n']} | {s['copy_mean']:.2f} | {s['paraphrase_mean']:.2f} | "
                     f"{s['wrong_mean']:.2f} | {s['paraphrase_above_wrong']:.0%} | "
                     f"{s['auroc_paraphrase_vs_wrong']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_judge_option(ap, *JUDGES, default="model")
    ap.add_argument("--model-dir", type=Path, help="another exported model (nli, model)")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write every item's P and the summary here")
    ap.add_argument("--write-docs", action="store_true",
                    help="put the table in docs/benchmarks.md (bundled judges only)")
    args = ap.parse_args(argv)
    if args.write_docs and args.model_dir is not None:
        ap.error("--write-docs documents the bundled judges: drop --model-dir")
    items = load(args.data)
    score = scorer(args.judge, args.model_dir, args.threads)
    rows = []
    for it in items:
        p = score(it["premise"], [it[k] for k in KINDS])
        rows.append({"id": it["id"], "lang": it["lang"], "wrong_kind": it["wrong_kind"],
                     **{k: round(v, 4) for k, v in zip(KINDS, p, strict=True)}})
    summary = summarize(rows)
    text = table(summary, args.judge)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"judge": args.judge, "summary": summary, "rows": rows},
                                        ensure_ascii=False, indent=1), encoding="utf-8")
    if args.write_docs:
        _write_docs(args.judge, text)
    return 0


def _write_docs(judge: str, text: str) -> None:
    """Keep one table per judge between the markers (re-running one judge replaces its own,
    also a table written under the judge's old name), in the registry's order."""
    docs = docs_section.DOCS.read_text(encoding="utf-8")
    tables: dict[str, str] = {}
    if MARK in docs:
        start = docs.index(MARK) + len(MARK)
        old = docs[start:docs.index(MARK, start)]
        for m in re.finditer(r"^`([^`]+)`, each statement.*?(?=\n\n\n|\Z)", old, re.S | re.M):
            tables[JUDGE_ALIASES.get(m.group(1), m.group(1))] = m.group(0).strip()
    tables[judge] = text
    order = [j for j in JUDGE_NAMES if j in tables]
    body = ("`bench/paraphrase_probe.py`: 36 minimal items (12 each EN/JA/ZH, "
            "bench/data/paraphrase_probe.jsonl): a premise, its trimmed copy, a faithful "
            "paraphrase, and the paraphrase with one wrong part. Command: `.venv/bin/python "
            "bench/paraphrase_probe.py --judge J --write-docs`.\n\n\n"
            + "\n\n\n".join(tables[j] for j in order))
    docs_section.write_section(MARK, body, "## Paraphrase probe: meaning or words (issue 22)",
                               before="## Faithfulness score distributions (local judges)",
                               docs=docs_section.DOCS)


if __name__ == "__main__":
    raise SystemExit(main())
