"""Paraphrase twins (issue 39, item 0): short passages, each with statements that say its facts
in clearly other words, every one beside a wrong twin worded the same way with one detail wrong.

The faithfulness model read word overlap: "open on weekdays from 8 am until 6 pm" against
"staffed from 8:00 to 18:00, Monday to Friday" scored near 0. A twin pair differs in one
detail and not in its wording, so overlap cannot tell its halves apart; only meaning can.

A unit is one JSON line (the format, the kinds and the writing rules: train/corpus/README.md,
"Paraphrase twins")::

    {"id": "p1-en-0001", "lang": "en", "domain": "hotel", "writer": "p1",
     "passage": "Check-in starts at 15:00 ...",
     "statements": [{"text": "...", "label": 1, "kind": "value-rewrite"},
                    {"text": "...", "label": 0, "kind": "swap-value"}, ...]}

Writers' files are checked with ``check``, added with ``add`` (validated; near-duplicates and
units that share 27+ characters with an evaluation set dropped; gzip-compressed into
``train/corpus/paraphrase/``) and turned into (passage, statement, label) pairs with ``pairs``,
split into training and validation by a hash of the unit id::

    python -m train.data.paraphrase check FILE...
    python -m train.data.paraphrase add FILE...
    python -m train.data.paraphrase stats
    python -m train.data.paraphrase pairs --out DIR [FILE...]

Blind relabelling: ``qc-sample`` writes a share of each writer's units as tasks (the passage and
its statements in a shuffled order, never the writer's labels or kinds); ``qc-agree`` compares a
second writer's labels (one JSON line per task: ``{"task": ID, "labels": [0/1 in the task's
order]}``) with the first writer's, statement by statement, per writer::

    python -m train.data.paraphrase qc-sample --share 0.12 --out TASKS.jsonl FILE...
    python -m train.data.paraphrase qc-agree --tasks TASKS.jsonl --labels LABELS.jsonl FILE...
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from train.data import rag_corpus
from train.data.rag_corpus import (
    FAITHFUL_KINDS,
    REPO,
    UNFAITHFUL_KINDS,
    _write_gz,
    add_files,
    check_files,
    check_identity,
    read_jsonl,
    screen_with,
    texts_share_eval,
)

UNITS = REPO / "train" / "corpus" / "paraphrase"
PASSAGE_MIN, PASSAGE_MAX = 40, 900
STATEMENTS_MIN, STATEMENTS_MAX = 2, 16
STATEMENT_MAX = 400
VALID_SHARE = 0.15   # units whose id hashes below this share are the validation split
_KINDS_1 = tuple(k for k in FAITHFUL_KINDS if k not in ("correct-refusal", "terse", "restate"))
_KINDS_0 = tuple(k for k in UNFAITHFUL_KINDS if k not in ("wrong-refusal",))

__all__ = ["check_unit", "committed", "pairs", "pairs_by_split", "screen", "split_of", "stats"]


def check_unit(u: dict) -> list[str]:
    """What is wrong with one unit, as readable lines (empty when it is fine)."""
    errs = check_identity(u, training_only=True)
    p = u.get("passage")
    if not isinstance(p, str) or not PASSAGE_MIN <= len(p) <= PASSAGE_MAX:
        n = len(p) if isinstance(p, str) else "?"
        errs.append(f"passage: {n} characters, want {PASSAGE_MIN}-{PASSAGE_MAX}")
    st = u.get("statements")
    if not isinstance(st, list) or not STATEMENTS_MIN <= len(st) <= STATEMENTS_MAX:
        return [*errs, f"statements: a list of {STATEMENTS_MIN}-{STATEMENTS_MAX}"]
    for k, s in enumerate(st):
        where = f"statements[{k}]"
        if not isinstance(s, dict) or not isinstance(s.get("text"), str) or not s["text"].strip():
            errs.append(f"{where}: text missing")
            continue
        if len(s["text"]) > STATEMENT_MAX:
            errs.append(f"{where}: {len(s['text'])} characters, at most {STATEMENT_MAX}")
        label, kind = s.get("label"), s.get("kind")
        if label not in (0, 1):
            errs.append(f"{where}: label 1 (supported) or 0 (not)")
        elif label == 1 and kind not in _KINDS_1:
            errs.append(f"{where}: label 1 with kind {kind!r}; supported kinds: {_KINDS_1}")
        elif label == 0 and kind not in _KINDS_0:
            errs.append(f"{where}: label 0 with kind {kind!r}; unsupported kinds: {_KINDS_0}")
    labels = [s.get("label") for s in st if isinstance(s, dict)]
    if 1 not in labels or 0 not in labels:
        errs.append("statements: at least one supported and one unsupported (twins)")
    texts = [s.get("text") for s in st if isinstance(s, dict)]
    if len(set(texts)) != len(texts):
        errs.append("statements: the same text twice")
    return errs


def committed() -> list[dict]:
    """Every unit in the repository."""
    return rag_corpus.committed(UNITS)


def _shares_eval_text(u: dict, guard) -> bool:
    return texts_share_eval((u["passage"], *(s["text"] for s in u["statements"])), guard)


def screen(units: Iterable[dict], existing: list[dict], guard) -> tuple[list[dict], Counter]:
    """Keep the valid units that are no near-duplicate of a kept or committed one (their
    passages' 8-character shingles, Jaccard >= 0.5) and share no 27+ characters with an
    evaluation set; count why the others went."""
    return screen_with(units, existing, guard, check=check_unit, text=lambda u: u["passage"],
                       shares=_shares_eval_text)


def split_of(uid: str) -> str:
    """``train`` or ``valid``: a fixed hash of the unit id, so a unit never moves."""
    h = int(hashlib.sha256(uid.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "valid" if h < VALID_SHARE else "train"


def pairs(units: Iterable[dict]) -> list[dict]:
    """One (premise = the passage, hypothesis = a statement, label) row per statement."""
    return [{"premise": u["passage"], "hypothesis": s["text"], "label": s["label"],
             "source": "paraphrase_twins", "kind": s["kind"], "lang": u["lang"],
             "scenario": u["id"]}
            for u in units for s in u["statements"]]


def pairs_by_split(units: Iterable[dict]) -> dict[str, list[dict]]:
    """:func:`pairs` of the ``train`` and the ``valid`` units (:func:`split_of`)."""
    out: dict[str, list[dict]] = {"train": [], "valid": []}
    for u in units:
        out[split_of(u["id"])] += pairs([u])
    return out


def stats(units: list[dict]) -> str:
    st = [s for u in units for s in u["statements"]]
    lines = [f"units {len(units)}, statements {len(st)} (supported {sum(s['label'] for s in st)})",
             "units by language: " + ", ".join(f"{k} {v}" for k, v in
                                               sorted(Counter(u["lang"] for u in units).items())),
             f"domains {len({u['domain'] for u in units})}",
             f"writers: {dict(Counter(u['writer'] for u in units))}",
             f"kinds: {dict(Counter(s['kind'] for s in st).most_common())}"]
    lens = sorted(len(u["passage"]) for u in units)
    if lens:
        lines.append(f"passage length: min {lens[0]}, median {lens[len(lens) // 2]}, "
                     f"max {lens[-1]}")
    return "\n".join(lines)


def qc_tasks(units: list[dict], share: float, seed: int = 0) -> list[dict]:
    """``share`` of each writer's units (at least one) as blind tasks: the passage and the
    statements in a shuffled order (twins are written side by side; shuffled, their order says
    nothing)."""
    rng = random.Random(seed)
    out = []
    for writer in sorted({u["writer"] for u in units}):
        mine = [u for u in units if u["writer"] == writer]
        for u in rng.sample(mine, max(1, round(share * len(mine)))):
            texts = [s["text"] for s in u["statements"]]
            rng.shuffle(texts)
            out.append({"task": u["id"], "lang": u["lang"], "passage": u["passage"],
                        "statements": texts})
    rng.shuffle(out)
    return out


def qc_agreement(units: list[dict], tasks: list[dict], labels: list[dict]
                 ) -> dict[str, tuple[int, int, list[str]]]:
    """Per writer: (statements agreed, statements relabelled, the disagreements)."""
    by_id = {u["id"]: u for u in units}
    shown = {t["task"]: t["statements"] for t in tasks}
    out: dict[str, tuple[int, int, list[str]]] = {}
    for row in labels:
        u = by_id[row["task"]]
        truth = {s["text"]: s["label"] for s in u["statements"]}
        texts, got = shown[row["task"]], row["labels"]
        if len(got) != len(texts):
            raise ValueError(f"{row['task']}: {len(got)} labels for {len(texts)} statements")
        agreed, n, diff = out.get(u["writer"], (0, 0, []))
        for t, g in zip(texts, got, strict=True):
            n += 1
            if truth[t] == g:
                agreed += 1
            else:
                diff.append(f"{u['id']}: {t!r} writer {truth[t]}, relabelled {g}")
        out[u["writer"]] = (agreed, n, diff)
    return out


def _read_units(paths: list[Path]) -> list[dict]:
    return [u for p in paths for _, u, _ in read_jsonl(p) if u is not None and not check_unit(u)]


def _cmd_check(paths: list[Path]) -> int:
    return check_files(paths, check_unit, _shares_eval_text, stats, "unit")


def _cmd_add(paths: list[Path]) -> int:
    return add_files(paths, committed(), screen, UNITS, "unit")


def _cmd_pairs(out: Path, files: list[Path]) -> int:
    units = _read_units(files) if files else committed()
    for split, rows in pairs_by_split(units).items():
        n = _write_gz(out / f"{split}_pairs.jsonl.gz", rows)
        print(f"{out / f'{split}_pairs.jsonl.gz'}: {n} rows")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m train.data.paraphrase",
                                 description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("check", "add"):
        sp = sub.add_parser(name)
        sp.add_argument("files", nargs="+", type=Path)
    sub.add_parser("stats")
    sp = sub.add_parser("pairs")
    sp.add_argument("--out", type=Path, required=True)
    sp.add_argument("files", nargs="*", type=Path, help="units (default: the committed ones)")
    sp = sub.add_parser("qc-sample")
    sp.add_argument("--share", type=float, default=0.12)
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--out", type=Path, required=True)
    sp.add_argument("files", nargs="*", type=Path, help="units (default: the committed ones)")
    sp = sub.add_parser("qc-agree")
    sp.add_argument("--tasks", type=Path, required=True)
    sp.add_argument("--labels", type=Path, required=True)
    sp.add_argument("--min", type=float, default=0.9)
    sp.add_argument("files", nargs="*", type=Path, help="units (default: the committed ones)")
    a = ap.parse_args(argv)
    if a.cmd in ("qc-sample", "qc-agree"):
        units = _read_units(a.files) if a.files else committed()
        if a.cmd == "qc-sample":
            tasks = qc_tasks(units, a.share, a.seed)
            a.out.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks),
                             encoding="utf-8")
            print(f"{len(tasks)} tasks -> {a.out}")
            return 0
        read = [r for _, r, _ in read_jsonl(a.tasks) if r]
        labels = [r for _, r, _ in read_jsonl(a.labels) if r]
        low = 0
        for writer, (ok, n, diff) in sorted(qc_agreement(units, read, labels).items()):
            print(f"{writer}: {ok}/{n} statements agree ({ok / max(1, n):.1%})")
            for d in diff:
                print("   ", d)
            low += ok / max(1, n) < a.min
        return 1 if low else 0
    if a.cmd == "check":
        return _cmd_check(a.files)
    if a.cmd == "add":
        return _cmd_add(a.files)
    if a.cmd == "stats":
        print(stats(committed()))
        return 0
    return _cmd_pairs(a.out, a.files)


if __name__ == "__main__":
    sys.exit(main())
