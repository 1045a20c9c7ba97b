"""Human-labelled NLI pairs: label 1 = entailment, 0 = neutral or contradiction.

Each builder yields dicts {premise, hypothesis, label, source, lang}. Eval-set rows are never
read: JNLI valid (the shared jnli_ja_valid set) is not opened at all.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator

from .sources import ESNLI, JANLI, JGLUE


def _row(p: str, h: str, label: int, source: str, lang: str) -> dict:
    return {"premise": p.strip(), "hypothesis": h.strip(), "label": int(label), "source": source, "lang": lang}


def jnli_test() -> Iterator[dict]:
    """JGLUE JNLI v1.3 *test* (2,508 pairs). JNLI valid is the project's eval set and is never read;
    the snapshot has no train file."""
    for line in JGLUE.read("datasets/jnli-v1.3/test-v1.3.json").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        yield _row(r["sentence1"], r["sentence2"], r["label"] == "entailment", "jnli_test", "ja")


def jsts_train(hi: float = 4.4, lo: float = 0.6) -> Iterator[dict]:
    """JGLUE JSTS v1.3 train: near-paraphrases (score >= hi) as supported rewordings, unrelated
    caption pairs (score <= lo) as unsupported; the middle is ambiguous and dropped."""
    for line in JGLUE.read("datasets/jsts-v1.3/train-v1.3.json").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        s = float(r["label"])
        if s >= hi:
            yield _row(r["sentence1"], r["sentence2"], 1, "jsts_train", "ja")
        elif s <= lo:
            yield _row(r["sentence1"], r["sentence2"], 0, "jsts_train", "ja")


def janli_train() -> Iterator[dict]:
    """JaNLI (adversarial Japanese NLI: word order, scrambling, subject/object swaps), split == train."""
    rd = csv.DictReader(io.StringIO(JANLI.read("janli.tsv")), delimiter="\t")
    for r in rd:
        if r["split"] != "train":
            continue
        yield _row(r["sentence_A_Ja"], r["sentence_B_Ja"], r["entailment_label_Ja"] == "entailment", "janli_train", "ja")


def _detok(s: str) -> str:
    s = s.strip()
    for a, b in ((" .", "."), (" ,", ","), (" '", "'"), (" n't", "n't"), (" ?", "?"), (" !", "!")):
        s = s.replace(a, b)
    return s


def snli_dev_test() -> Iterator[dict]:
    """SNLI 1.0 dev + test pairs (19.6k with a gold label) as copied into the e-SNLI repository."""
    for split in ("dev", "test"):
        s1 = ESNLI.read(f"dataset/eSNLI/s1.{split}").splitlines()
        s2 = ESNLI.read(f"dataset/eSNLI/s2.{split}").splitlines()
        lab = ESNLI.read(f"dataset/eSNLI/labels.{split}").splitlines()
        assert len(s1) == len(s2) == len(lab), split
        for p, h, lb in zip(s1, s2, lab, strict=True):
            if lb.strip() not in ("entailment", "neutral", "contradiction"):
                continue
            yield _row(_detok(p), _detok(h), lb.strip() == "entailment", f"snli_{split}", "en")


BUILDERS = {"jnli_test": jnli_test, "jsts_train": jsts_train, "janli_train": janli_train,
            "snli_dev_test": snli_dev_test}
