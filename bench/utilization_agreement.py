"""Context utilization of the two local judges against the truth, and against each other
(issue 39, item 3).

    python bench/utilization_agreement.py [--limit N] [--sensitivity] [--write-docs]
    python bench/utilization_agreement.py --write-fixture tests/scorer/data/utilization_agreement.jsonl

The truth comes from the RAG corpus (``train/corpus``, ``train.data.rag_corpus``): every statement
of a faithful answer carries ``support``, the passages it is taken from, so the passages the
answer used are the union of its statements' support, and its true utilization is the average
precision of that used/unused vector in retrieval order (``docs/metrics.md``). Each faithful
answer (every language; answers whose statements cite no passage, such as refusals, left out)
is judged in three retrievals of its passages:

- ``as retrieved``: the corpus's order (the used passage is mostly first);
- ``reversed``: the same passages in reverse order, so used passages sit at every rank;
- ``used only``: for an answer that uses two passages or more, only those, in their order:
  an answer that uses all its passages.

Both judges run as ``build_judge`` makes them (``fast``: USE embeddings and lexical views;
``model``: the bundled cross-encoder), on the CONTEXT_USED fact only, the fact context
utilization is computed from. Printed per group: the mean utilization (truth, fast, model),
each judge's mean absolute error against the truth, the gap (mean absolute difference between
the judges, sample by sample), and per passage each judge's precision and recall of "used".

``--sensitivity`` adds the fast judge with other constants (the lexical weight of a
statement's match, the floor): the figures behind the shipped ones. ``--write-fixture`` writes
the agreement test's fixed set (``fixture_answers``) instead.

Then a check nobody tuned on: the hand-written dev set (``bench/data/faithfulness_rag_
handwritten.jsonl``), every row's mean per judge and the gap, and the MAE on the faithful rows
whose passages were marked by hand (``faithfulness_rag_evidence.json``). The confirmation and
blind sets are evaluation sets and are not read.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.docs_section import write_section
from ragpulse.scorer.stats import average_precision
from train.data.rag_corpus import answer_text, committed

REPO = Path(__file__).resolve().parent.parent

DEV = REPO / "bench" / "data" / "faithfulness_rag_handwritten.jsonl"
EVIDENCE = REPO / "bench" / "data" / "faithfulness_rag_evidence.json"
MARK = "<!-- bench/utilization_agreement.py -->"
HEADING = "## Context utilization across judges (issue 39, item 3)"
BEFORE = "## Speed of the local judges on a typical trace"
JUDGES = ("fast", "model")


def corpus_cases(limit: int | None = None) -> list[dict[str, Any]]:
    """The corpus's faithful answers in their three retrievals (module docstring): ``id``,
    ``lang``, ``variant``, ``question``, ``contexts``, ``answer``, ``used`` (0/1 per context).
    ``limit``: that many answers, spread evenly over the corpus's order (its files are written
    a language at a time, so the first N would be one language)."""
    out: list[dict[str, Any]] = []
    answers = [(r, j, a) for r in committed() for j, a in enumerate(r["answers"])
               if all(s["label"] == 1 for s in a["statements"])]
    if limit is not None and limit < len(answers):
        answers = [answers[k * len(answers) // limit] for k in range(limit)]
    for r, j, a in answers:
        support = {i for s in a["statements"] for i in s["support"]}
        if not support:
            continue
        order = list(range(len(r["contexts"])))
        variants = [("as retrieved", order), ("reversed", order[::-1])]
        if len(support) >= 2:
            variants.append(("used only", sorted(support)))
        for name, keep in variants:
            out.append({"id": f"{r['id']}{'abcde'[j]}", "lang": r["lang"], "variant": name,
                        "question": r["question"], "contexts": [r["contexts"][i] for i in keep],
                        "answer": answer_text(r["lang"], a["style"], a["statements"]),
                        "used": [int(i in support) for i in keep]})
    return out


def fixture_answers() -> list[dict[str, Any]]:
    """The small fixed set of the agreement test (``--write-fixture``): per language, the
    corpus's first faithful answers (in ``committed()`` order, one per scenario) that use one
    passage ranked first, one passage ranked lower, two passages (two answers) and three
    passages (where the language has one). Each row is a scenario's question, passages and one
    answer with ``used`` (0/1 per passage, as retrieved)."""
    want = {(lang, kind): n for lang in ("en", "ja", "zh")
            for kind, n in (("1 first", 1), ("1 lower", 1), ("2", 2), ("3", 1))}
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for r in committed():
        for j, a in enumerate(r["answers"]):
            support = sorted({i for s in a["statements"] for i in s["support"]})
            if not support or any(s["label"] == 0 for s in a["statements"]) or r["id"] in seen:
                continue
            kind = str(len(support)) if len(support) > 1 else (
                "1 first" if support == [0] else "1 lower")
            if want.get((r["lang"], kind), 0) > 0:
                want[(r["lang"], kind)] -= 1
                seen.add(r["id"])
                out.append({"id": f"{r['id']}{'abcde'[j]}", "lang": r["lang"],
                            "question": r["question"], "contexts": r["contexts"],
                            "answer": answer_text(r["lang"], a["style"], a["statements"]),
                            "used": [int(i in support) for i in range(len(r["contexts"]))]})
    return out


def dev_cases() -> list[dict[str, Any]]:
    """Every dev row; ``used`` from the hand marks where the row has them, else ``None``."""
    marks = json.loads(EVIDENCE.read_text(encoding="utf-8"))
    out = []
    for line in DEV.read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            mark = marks.get(r["id"])
            out.append({"id": r["id"], "lang": r["lang"], "variant": "dev",
                        "question": r["question"], "contexts": r["contexts"],
                        "answer": r["answer"],
                        "used": None if mark is None else
                        [int(i in mark) for i in range(len(r["contexts"]))]})
    return out


def judge_cases(cases: list[dict[str, Any]], threads: int = 1) -> dict[str, Any]:
    """Each judge's CONTEXT_USED verdicts per case (``verdicts[judge]``), its stored version
    and the seconds it took, every judge as ``build_judge`` makes it."""
    from ragpulse.scorer import Fact, Sample
    from ragpulse.scorer.judges.base import Needs
    from ragpulse.scorer.judges.factory import build_judge

    out: dict[str, Any] = {"verdicts": {}, "version": {}, "seconds": {}, "judges": {}}
    for name in JUDGES:
        judge: Any = build_judge(name, threads=threads)
        out["judges"][name] = judge
        if name == "model":
            def run(s: Sample, j: Any = judge) -> Any:
                return j.judge(s, frozenset({Fact.CONTEXT_USED}))[Fact.CONTEXT_USED]
        else:
            def run(s: Sample, j: Any = judge) -> Any:
                return j.judge(s, Needs(frozenset({Fact.CONTEXT_USED})))[Fact.CONTEXT_USED]
        t0 = time.perf_counter()
        found = [run(Sample(id=f"{c['id']}-{c['variant']}", question=c["question"],
                            contexts=c["contexts"], answer=c["answer"])) for c in cases]
        out["seconds"][name] = time.perf_counter() - t0
        out["verdicts"][name] = [f.value for f in found]
        out["version"][name] = found[0].prompt_version if found else ""
    return out


SENSITIVITY = ((0.5, 0.1), (0.3, 0.1), (0.7, 0.1), (0.5, 0.05), (0.5, 0.2), (0.5, 0.33))
"""(lexical weight of the match, floor) pairs ``--sensitivity`` runs the fast judge with; the
first is the shipped pair."""


def sensitivity(cases: list[dict[str, Any]], embedder: Any) -> list[str]:
    """The fast judge's utilization with other constants: the lexical weight of a statement's
    match (``analysis._MATCH_LEXICAL_WEIGHT``) and the floor (``used_threshold``). Reuses
    ``embedder`` (its cache already holds every text), so each row costs the lexical work."""
    import asyncio

    from ragpulse.scorer import Fact, Sample
    from ragpulse.scorer.judges.base import Needs
    from ragpulse.scorer.judges.local import LocalJudge, LocalJudgeSettings, analysis

    truth = np.array([average_precision(c["used"]) for c in cases])
    lines = ["| lexical weight | floor | fast mean | fast MAE |", "|---|---|---|---|"]
    shipped = analysis._MATCH_LEXICAL_WEIGHT
    needs = Needs(frozenset({Fact.CONTEXT_USED}))
    try:
        for weight, floor in SENSITIVITY:
            analysis._MATCH_LEXICAL_WEIGHT = weight
            judge = LocalJudge(LocalJudgeSettings(used_threshold=floor), embedder=embedder)
            vals = np.array([average_precision(judge.judge(
                Sample(id=c["id"], question=c["question"], contexts=c["contexts"],
                       answer=c["answer"]), needs)[Fact.CONTEXT_USED].value) for c in cases])
            asyncio.run(judge.aclose())
            lines.append(f"| {weight} | {floor} | {vals.mean():.3f} | "
                         f"{np.abs(vals - truth).mean():.3f} |")
    finally:
        analysis._MATCH_LEXICAL_WEIGHT = shipped
    return lines


def _row(title: str, cases: list[dict[str, Any]], verdicts: dict[str, list[list[int]]]) -> str:
    n = len(cases)
    truth = np.array([average_precision(c["used"]) for c in cases])
    vals = {j: np.array([average_precision(v) for v in verdicts[j]]) for j in JUDGES}
    cells = [title, str(n), f"{truth.mean():.3f}"]
    cells += [f"{vals[j].mean():.3f}" for j in JUDGES]
    cells += [f"{np.abs(vals[j] - truth).mean():.3f}" for j in JUDGES]
    cells.append(f"{np.abs(vals['fast'] - vals['model']).mean():.3f}")
    for j in JUDGES:
        pairs = [(p, t) for c, v in zip(cases, verdicts[j]) for p, t in zip(v, c["used"])]
        tp = sum(p and t for p, t in pairs)
        cells.append(f"{tp / max(1, sum(p for p, _ in pairs)):.2f} / "
                     f"{tp / max(1, sum(t for _, t in pairs)):.2f}")
    return "| " + " | ".join(cells) + " |"


def _groups(cases: list[dict[str, Any]]) -> list[tuple[str, Callable[[dict[str, Any]], bool]]]:
    def used(c: dict[str, Any]) -> int:
        return sum(c["used"])

    groups: list[tuple[str, Callable[[dict[str, Any]], bool]]] = [("all", lambda c: True)]
    for v in ("as retrieved", "reversed", "used only"):
        groups.append((f"retrieval: {v}", lambda c, v=v: c["variant"] == v))
    for lang in ("en", "ja", "zh"):
        groups.append((f"language: {lang}", lambda c, lang=lang: c["lang"] == lang))
    for k in (1, 2, 3):
        groups.append((f"passages used: {k} (not all)",
                       lambda c, k=k: used(c) == k < len(c["used"])))
    groups.append(("passages used: all", lambda c: used(c) == len(c["used"])))
    ranks = sorted({c["used"].index(1) + 1 for c in cases if used(c) == 1})
    for rank in ranks:
        groups.append((f"one passage used, at rank {rank}",
                       lambda c, r=rank: used(c) == 1 and c["used"].index(1) + 1 == r))
    return groups


def table(cases: list[dict[str, Any]], verdicts: dict[str, list[list[int]]]) -> list[str]:
    lines = ["| group | n | truth | fast | model | MAE fast | MAE model | gap | "
             "fast P / R (per passage) | model P / R |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for title, keep in _groups(cases):
        idx = [i for i, c in enumerate(cases) if keep(c)]
        if idx:
            lines.append(_row(title, [cases[i] for i in idx],
                              {j: [verdicts[j][i] for i in idx] for j in JUDGES}))
    return lines


def dev_lines(cases: list[dict[str, Any]], verdicts: dict[str, list[list[int]]]) -> list[str]:
    vals = {j: np.array([average_precision(v) for v in verdicts[j]]) for j in JUDGES}
    marked = [i for i, c in enumerate(cases) if c["used"] is not None]
    lines = [f"Dev set, all {len(cases)} rows (faithful and unfaithful, no truth needed for the "
             f"gap): fast {vals['fast'].mean():.3f}, model {vals['model'].mean():.3f}, gap "
             f"{np.abs(vals['fast'] - vals['model']).mean():.3f}."]
    if marked:
        lines.append("")
        lines.append(_dev_marked(marked, cases, verdicts))
    return lines


def _dev_marked(marked: list[int], cases: list[dict[str, Any]],
                     verdicts: dict[str, list[list[int]]]) -> str:
    sub = [cases[i] for i in marked]
    truth = np.array([average_precision(c["used"]) for c in sub])
    mae = {j: np.abs(np.array([average_precision(verdicts[j][i]) for i in marked]) - truth).mean()
           for j in JUDGES}
    return (f"Dev set, the {len(sub)} faithful rows with hand-marked passages: truth "
            f"{truth.mean():.3f}, MAE fast {mae['fast']:.3f}, model {mae['model']:.3f}.")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--limit", type=int, help="N of the corpus's faithful answers, spread evenly "
                   "over it (without: all 7,063, about an hour of CPU)")
    p.add_argument("--no-dev", action="store_true", help="skip the dev-set check")
    p.add_argument("--sensitivity", action="store_true",
                   help="also the fast judge with other constants (SENSITIVITY)")
    p.add_argument("--write-docs", action="store_true",
                   help="write the result into docs/benchmarks.md")
    p.add_argument("--write-fixture", type=Path, metavar="JSONL",
                   help="write the agreement test's fixed set (fixture_answers) and stop")
    args = p.parse_args(argv)
    if args.write_fixture:
        rows = fixture_answers()
        args.write_fixture.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n"
                                              for r in rows), encoding="utf-8")
        print(f"{len(rows)} answers -> {args.write_fixture}")
        return 0
    cases = corpus_cases(args.limit)
    got = judge_cases(cases)
    lines = table(cases, got["verdicts"])
    answers = len({c["id"] for c in cases})
    head = [f"{answers} faithful corpus answers, {len(cases)} retrievals "
            f"(as retrieved, reversed, used passages only). Versions: "
            + ", ".join(f"{j} `{got['version'][j]}`" for j in JUDGES) + "; seconds: "
            + ", ".join(f"{j} {got['seconds'][j]:.0f}" for j in JUDGES) + ".", ""]
    lines = head + lines
    if args.sensitivity:
        lines += ["", "The fast judge with other constants (the shipped pair first):", "",
                  *sensitivity(cases, got["judges"]["fast"].embedder)]
    if not args.no_dev:
        dev = dev_cases()
        lines += ["", *dev_lines(dev, judge_cases(dev)["verdicts"])]
    text = "\n".join(lines)
    print(text)
    if args.write_docs:
        cmd = "python bench/utilization_agreement.py" + (
            f" --limit {args.limit}" if args.limit else "") + (
            " --sensitivity" if args.sensitivity else "") + " --write-docs"
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        write_section(MARK, f"Command: `{cmd}`  \nMeasured {stamp}.\n\n{text}", HEADING,
                      before=BEFORE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
