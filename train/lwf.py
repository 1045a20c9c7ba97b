"""Rows that keep a continued model's own judgement where the new data has nothing to teach
(learning without forgetting, Li and Hoiem 2016):

    python -m train.lwf --rows TRAIN.jsonl --teacher W --bundle B --out OUT.jsonl \\
        [--new-source paraphrase_twins] [--new-times 1] [--replay 6000] [--near-copies 4000] \\
        [--foreign] [--seed 10]

``TRAIN.jsonl`` holds training pairs (``train.train``'s format). Its rows of ``--new-source``
are the new data: written ``--new-times`` times with their hard labels. From the other rows,
``--replay`` are drawn at random and ``--near-copies`` pairs are made from their premises: one
sentence of a premise as its hypothesis, verbatim (``copy``), cut at a comma (``cut``), with two
of its numbers or two of its names swapped (``swap-num``, ``swap-name``: capitalised words in
English, katakana runs in Japanese) and, with ``--foreign``, one of them replaced by a number or
name taken from another premise of the same language that this premise does not hold
(``foreign``: the novel value or entity of a hallucinated answer). A premise with a swap or a
foreign form gives one of those; the others give a copy or a cut, at most 800 of each. Every
replayed and near-copy row gets ``target``: the teacher's P (the weights ``W`` of
``train.train``'s output, read with bundle ``B``), which ``train.train``'s loss reads instead
of the label, so the continued model is held to the teacher's judgement on them, lenient where
the teacher was lenient. Their ``label`` stays (a replayed row's own; a near-copy's 1 for a copy
or cut, 0 otherwise) for the statistics. All rows shuffled; deterministic for a ``--seed``.

docs/history/faithfulness-data.md, "C10" and "C11", has the runs made with it.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

NUM = re.compile(r"\d+(?:[.,]\d+)?")
CAP = re.compile(r"(?<=\s)[A-Z][a-z]+(?:\s[A-Z][a-z]+)*")
KATA = re.compile(r"[\u30A0-\u30FF]{2,}")
KINDS = ("copy", "cut", "swap-num", "swap-name", "foreign")
PLAIN_CAP = 800  # copies and cuts, each


def _names(lang: str) -> re.Pattern[str]:
    return CAP if lang == "en" else KATA


def _distinct(pat: re.Pattern[str], text: str) -> list[str]:
    """The whole matches of ``pat`` in ``text``, each once, in order."""
    return list(dict.fromkeys(m.group(0) for m in pat.finditer(text)))


def _swap(sent: str, pat: re.Pattern[str], rng: random.Random) -> str | None:
    found = _distinct(pat, sent)
    if len(found) < 2:
        return None
    a, b = rng.sample(found, 2)
    trade = {a: b, b: a}
    out = pat.sub(lambda m: trade.get(m.group(0), m.group(0)), sent)
    return out if out != sent else None


def _replace(sent: str, pat: re.Pattern[str], old: str, new: str) -> str:
    """``sent`` with every whole match of ``pat`` equal to ``old`` replaced by ``new`` (never
    inside a longer match: a "9" in "1998" stays)."""
    return pat.sub(lambda m: new if m.group(0) == old else m.group(0), sent)


def _cut(sent: str, lang: str, rng: random.Random) -> str | None:
    parts = re.split(r"(?<=[,，、;；])", sent)
    if len(parts) < 2:
        return None
    k = rng.randrange(1, len(parts))
    return "".join(parts[:k]).rstrip(",，、;； ") + ("." if lang == "en" else "。")


def _pools(rows: Iterable[dict]) -> dict[str, dict[str, list[str]]]:
    """Per language and pattern, every number and name of the rows' premises, in order."""
    pools: dict[str, dict[str, list[str]]] = {}
    for r in rows:
        d = pools.setdefault(r.get("lang", "en"), {})
        for pat in (NUM, CAP, KATA):
            d.setdefault(pat.pattern, []).extend(m.group(0) for m in pat.finditer(r["premise"]))
    return {lang: {k: list(dict.fromkeys(v)) for k, v in d.items()} for lang, d in pools.items()}


def near_copies(rows: list[dict], n: int, rng: random.Random, *,
                foreign: bool = False) -> list[dict]:
    """Up to ``n`` near-copy pairs from the premises of ``rows`` (see the module doc), their
    ``source`` ``lwf_<kind>``."""
    from ragpulse.scorer.segment import split_sentences

    premises = list(dict.fromkeys(r["premise"] for r in rows))
    pools = _pools(rows) if foreign else {}
    rng.shuffle(premises)
    lang_of = {r["premise"]: r.get("lang", "en") for r in rows}
    out: list[dict] = []
    plain: Counter[str] = Counter()
    for p in premises:
        if len(out) >= n:
            break
        lang = lang_of[p]
        sents = [s for s in split_sentences(p) if len(s) >= (40 if lang == "en" else 15)]
        if not sents:
            continue
        s = rng.choice(sents)
        cands = [("copy", s)]
        for name, pat in (("swap-num", NUM), ("swap-name", _names(lang))):
            h = _swap(s, pat, rng)
            if h:
                cands.append((name, h))
        if foreign:
            pool = pools[lang]
            for pat in (NUM, _names(lang)):
                found = _distinct(pat, s)
                if found and pool.get(pat.pattern):
                    a = rng.choice(found)
                    alien = rng.choice(pool[pat.pattern])
                    if alien not in p:
                        cands.append(("foreign", _replace(s, pat, a, alien)))
                        break
        h = _cut(s, lang, rng)
        if h:
            cands.append(("cut", h))
        changed = [c for c in cands if c[0] not in ("copy", "cut")]
        if changed:
            kind, h = rng.choice(changed)
        else:
            kind, h = rng.choice(cands)
            if plain[kind] >= PLAIN_CAP:
                continue
            plain[kind] += 1
        out.append({"premise": p, "hypothesis": h, "label": int(kind in ("copy", "cut")),
                    "source": f"lwf_{kind}", "lang": lang})
    return out


def teacher_targets(rows: list[dict], bundle: Path, weights: Path, max_len: int = 256,
                    threads: int = 2) -> list[float]:
    """The teacher's P(supported) of each row (fp32 on the CPU), also set as its ``target``."""
    import numpy as np
    import torch

    from .train import logits_of

    torch.set_num_threads(threads)
    z = logits_of(bundle, weights, rows, max_len)
    probs = [round(float(v), 5) for v in 1 / (1 + np.exp(-z))]
    for r, v in zip(rows, probs, strict=True):
        r["target"] = v
    return probs


def build_rows(rows: list[dict], *, new_source: str, new_times: int, replay: int,
               copies: int, foreign: bool, seed: int, bundle: Path, teacher: Path,
               max_len: int = 256) -> tuple[list[dict], dict]:
    """The shuffled training rows and a summary (counts, the teacher's mean P per kind)."""
    rng = random.Random(seed)
    new = [r for r in rows if r.get("source") == new_source]
    other = [r for r in rows if r.get("source") != new_source]
    if replay > len(other):
        raise SystemExit(f"--replay {replay}: only {len(other)} rows besides {new_source}")
    kept = rng.sample(other, replay)
    made = near_copies(other, copies, rng, foreign=foreign)
    teach = kept + made
    probs = teacher_targets(teach, bundle, teacher, max_len)
    by_kind: dict[str, list[float]] = {}
    for r, v in zip(made, probs[len(kept):], strict=True):
        by_kind.setdefault(r["source"], []).append(v)
    out = new * new_times + teach
    rng.shuffle(out)
    summary = {"new": len(new), "new_times": new_times, "replay": len(kept),
               "replay_teacher_mean": round(sum(probs[:len(kept)]) / max(1, len(kept)), 4),
               "near_copies": {k: {"n": len(v), "teacher_mean": round(sum(v) / len(v), 4)}
                               for k, v in sorted(by_kind.items())},
               "rows": len(out)}
    return out, summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=Path, required=True, help="training pairs (jsonl)")
    ap.add_argument("--teacher", type=Path, required=True, help="train.train output (weights)")
    ap.add_argument("--bundle", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--new-source", default="paraphrase_twins")
    ap.add_argument("--new-times", type=int, default=1)
    ap.add_argument("--replay", type=int, default=6000)
    ap.add_argument("--near-copies", type=int, default=4000)
    ap.add_argument("--foreign", action="store_true")
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("--max-len", type=int, default=256)
    a = ap.parse_args(argv)
    from .train import read_pairs

    out, summary = build_rows(read_pairs(a.rows), new_source=a.new_source,
                              new_times=a.new_times, replay=a.replay, copies=a.near_copies,
                              foreign=a.foreign, seed=a.seed, bundle=a.bundle,
                              teacher=a.teacher, max_len=a.max_len)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with a.out.open("w", encoding="utf-8") as fh:
        for r in out:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    json.dump(summary, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
