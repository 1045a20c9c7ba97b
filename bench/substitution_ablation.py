"""Ablation: does an alignment-diff ("substitution in an otherwise copied sentence") signal help
the local faithfulness detector? Measured, not shipped (docs/history/local-faithfulness.md, *Substitution
in an aligned sentence*).

JNLI's contradictions are near-copies of the premise with one slot swapped ("黒いTシャツ" ->
"白いTシャツ", "座って" -> "立って", "テニスラケット" -> "バット"); its entailments are mostly
subsets or generalizations. This script aligns every statement (clause) to the context sentence
it copies most of (characters for CJK, stems for English; ``difflib``) and adds four columns to
the training script's cached features:

- ``near_copy``: share of the statement's units inside matching blocks;
- ``substitution``: 1 if a replaced block swaps material (:func:`swapped`);
- ``copy_substitution``: ``near_copy * substitution`` (a near-copy with a swapped slot);
- ``dropped``: share of the sentence's content units the statement only deletes.

Then it fits the shipped model (``train_faithfulness.Model``, equal weight per set and class)
with and without them, in full (what ``bench/quality.py`` would measure for shipped weights) and
leave-one-dataset-out, and prints AUROC per set plus JNLI entailment vs contradiction / neutral.

    .venv/bin/python bench/substitution_ablation.py --data ../shared/data \\
        --features-cache /tmp/feats.pkl      # the cache of train_faithfulness.py --features-cache
"""

from __future__ import annotations

import argparse
import difflib
import json
import pickle
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bench import train_faithfulness as T
from ragpulse.scorer.judges.local.lexicon import STATEMENT_STOP_WORDS
from ragpulse.scorer.judges.local.support_detector import (
    _IS_CJK,
    FEATURES,
    SupportSettings,
    _analyze,
    _is_kana,
    _normalize,
    _recall,
    split_clauses,
)
from ragpulse.scorer.segment import split_sentences

NEW = ("near_copy", "substitution", "copy_substitution", "dropped")


def is_content(u: str) -> bool:
    """A kanji or katakana character, a number, or an English stem that is not a function word."""
    if len(u) == 1 and _IS_CJK.match(u):
        return not _is_kana(u) and u not in "ー・"
    return u[0].isdigit() or (len(u) > 1 and u not in STATEMENT_STOP_WORDS)


def swapped(old: Sequence[str], new: Sequence[str], in_sent: set[str], in_stmt: set[str],
            mode: str = "loose", in_ctx: frozenset[str] = frozenset()) -> bool:
    """A replaced block swaps material when either side has a content unit the other text
    lacks (a reordering moves units that occur on both sides; particles and endings are kana,
    never content). ``strict``: also similar lengths (a long clause replaced by "he" is a
    generalization), the sentence's side loses a content unit and the statement's side brings
    one (or, in Japanese, a kana word for a kanji one: "波に乗って" -> "おぼれて"). ``novel``:
    the sentence's side loses a content unit and the statement's side brings one found nowhere
    in the contexts (``in_ctx``; a fused summary swaps in words of other sentences), or a kana
    word for a kanji one."""
    if mode == "loose":
        return any(is_content(u) and u not in in_sent for u in new) or any(
            is_content(u) and u not in in_stmt for u in old)
    if mode == "novel":
        return any(is_content(u) and u not in in_stmt for u in old) and (
            any(is_content(u) and u not in in_ctx for u in new)
            or (len(new) >= 2 and all(_is_kana(u) for u in new)))
    if max(len(old), len(new)) > 2 * min(len(old), len(new)) + 2:
        return False
    if not any(is_content(u) and u not in in_stmt for u in old):
        return False
    return any(is_content(u) and u not in in_sent for u in new) or (
        len(new) >= 2 and all(_is_kana(u) for u in new))


def alignment(stmt: Sequence[str], sent: Sequence[str], mode: str = "loose",
              in_ctx: frozenset[str] = frozenset()) -> tuple[float, float, float]:
    """``(near_copy, substitution, dropped)`` of statement units aligned to sentence units."""
    if not stmt or not sent:
        return 0.0, 0.0, 0.0
    in_stmt, in_sent = set(stmt), set(sent)
    copied, sub, drop = 0, 0.0, 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, sent, stmt,
                                                      autojunk=False).get_opcodes():
        if op == "equal":
            copied += j2 - j1
        elif op == "replace" and swapped(sent[i1:i2], stmt[j1:j2], in_sent, in_stmt, mode,
                                             in_ctx):
            sub = 1.0
        elif op == "delete":
            drop += sum(1 for u in sent[i1:i2] if is_content(u) and u not in in_stmt)
    n_content = sum(1 for u in sent if is_content(u))
    return copied / len(stmt), sub, drop / n_content if n_content else 0.0


def columns(statements: Sequence[str], contexts: Sequence[str], mode: str,
            cfg: SupportSettings) -> np.ndarray:
    """The four columns per statement, against the best of its ``max_aligned_candidates``
    lexically closest context sentences (as ``featurize_with_copies`` picks candidates)."""
    sentences: list[str] = []
    seen: set[str] = set()
    for c in contexts:
        if c and c.strip():
            for s in split_sentences(_normalize(c)):
                if s not in seen:
                    seen.add(s)
                    sentences.append(s)
    sent_an = [_analyze(s) for s in sentences[: cfg.max_context_sentences]]
    in_ctx = frozenset(u for sa in sent_an for u in sa.units)
    out = np.zeros((len(statements), len(NEW)))
    for i, s in enumerate(statements):
        a = _analyze(_normalize(s))
        if not sent_an:
            continue
        rec = np.array([_recall(a.content, sa.content) for sa in sent_an])
        cand = np.argsort(-rec, kind="stable")[: cfg.max_aligned_candidates]
        near, sub, dropped = max((alignment(a.units, sent_an[int(j)].units, mode, in_ctx)
                                  for j in sorted(cand.tolist())), key=lambda t: (t[0], -t[1]))
        out[i] = [near, sub, near * sub, dropped]
    return out


def table(proba: Callable[[np.ndarray], np.ndarray], ex: Sequence[T.Example],
          feats: Sequence[np.ndarray], labels: dict[str, str], sets: Sequence[str]) -> dict:
    out: dict[str, float] = {}
    for n in sets:
        idx = [i for i, e in enumerate(ex) if e.dataset == n]
        s = np.array([float(np.mean(T.clause_means(proba(feats[i]), ex[i].clauses or [1])))
                      for i in idx])
        y = np.array([ex[i].label for i in idx])
        if n == "jnli_ja":
            lab = np.array([labels[ex[i].id] for i in idx])
            for other, key in (("contradiction", "jnli_e_vs_c"), ("neutral", "jnli_e_vs_n")):
                m = lab != ("neutral" if other == "contradiction" else "contradiction")
                out[key] = round(T.auroc(s[m], (lab[m] == "entailment").astype(int)), 3)
        else:
            out[n] = round(T.auroc(s, y), 3)
            if n == "halueval":
                out["halueval_faithful_mean"] = round(float(s[y == 1].mean()), 3)
                out["halueval_hallucinated_mean"] = round(float(s[y == 0].mean()), 3)
    return out


SETS = ("faithbench", "qags_cnndm", "halueval", "jnli_ja")


def run(ex: list[T.Example], feats: list[np.ndarray], l2: float, decisive: Sequence[int],
        labels: dict[str, str]) -> dict:
    def model(rows: list[int]) -> T.Model:
        return T.Model(l2, synthetic_weight=0, decisive=decisive).fit(
            [feats[i] for i in rows], [ex[i] for i in rows])

    full = model(list(range(len(ex))))
    lodo: dict[str, float] = {}
    for n in SETS:
        tr = [i for i, e in enumerate(ex) if e.dataset != n and e.source != n]
        lodo.update(table(model(tr).proba, ex, feats, labels, (n,)))
    return {"full": table(full.proba, ex, feats, labels, SETS), "lodo": lodo}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=T.REPO.parent / "shared" / "data")
    ap.add_argument("--features-cache", type=Path, required=True,
                    help="train_faithfulness.py --features-cache file (written if missing)")
    ap.add_argument("--l2", type=float, default=1e4)
    ap.add_argument("--report", type=Path, default=None)
    args = ap.parse_args(argv)
    ex = T.load(args.data)
    ex += T.synthesize(ex, 2)
    if not args.features_cache.exists():
        T.main(["--data", str(args.data), "--no-eval", "--out", "/dev/null",
                "--features-cache", str(args.features_cache)])
    base, clauses = pickle.loads(args.features_cache.read_bytes())
    for e, c in zip(ex, clauses):
        e.clauses = c
    labels = {"jnli-" + str(r["sentence_pair_id"]): r["label"] for r in
              T._jsonl(args.data / "jnli_ja_valid.jsonl")}
    cfg = SupportSettings()
    n_old = len(FEATURES)
    report: dict = {}
    variants: dict[str, list[np.ndarray]] = {
        "base": [np.hstack([f[:, :-1], np.zeros((len(f), len(NEW))), f[:, -1:]]) for f in base]}
    for mode in ("loose", "strict", "novel"):
        cols = [columns([c for s in e.statements for c in split_clauses(s, cfg.clause_split_words)],
                        e.contexts, mode, cfg) for e in ex]
        variants[mode] = [
            np.hstack([f[:, :-1], c, f[:, -1:]]) for f, c in zip(base, cols)]
    cs, neg = n_old + NEW.index("copy_substitution"), FEATURES.index("negation_mismatch")
    plan = [("base", "base", ()), ("+alignment", "loose", ()),
            ("+alignment (strict slots)", "strict", ()),
            ("+alignment (novel swaps)", "novel", ()),
            ("+alignment (novel swaps), decisive copy_substitution", "novel", (cs,)),
            ("+alignment, decisive copy_substitution", "loose", (cs,)),
            ("+alignment, decisive copy_substitution + negation", "loose", (cs, neg))]
    for name, var, dec in plan:
        r = run(ex, variants[var], args.l2, dec, labels)
        report[name] = r
        print(f"{name:52s} full {json.dumps(r['full'])}\n{'':52s} LODO {json.dumps(r['lodo'])}",
              flush=True)
    if args.report:
        args.report.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
