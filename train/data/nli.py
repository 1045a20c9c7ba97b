"""Human-labelled NLI pairs: label 1 = entailment, 0 = neutral or contradiction.

Each builder yields dicts {premise, hypothesis, label, source, lang}. Eval-set rows are never
read: JNLI valid (the shared jnli_ja_valid set) is not opened at all.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator

from .sources import BEGIN, ESNLI, JANLI, JGLUE, JNLI_NEG, PAWSX_ZH


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


def jnli_neg_train() -> Iterator[dict]:
    """JNLI-Neg v1.1 *train* (5,494 pairs): JNLI train pairs and variants with the premise, the
    hypothesis or both negated, labelled again by people. Only the train file is read: the
    repository's valid files are built from JNLI valid, the project's eval set."""
    path = "data/jnli-neg-v1.1/jnli-neg-train-v1.1.jsonl"
    assert "valid" not in path
    for line in JNLI_NEG.read(path).splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        if r["gold_label"] not in ("entailment", "neutral", "contradiction"):
            continue
        yield _row(r["sentence1"]["sentence"], r["sentence2"]["sentence"],
                   r["gold_label"] == "entailment", "jnli_neg_train", "ja")


def pawsx_zh() -> Iterator[dict]:
    """PAWS-X Chinese dev + test (4,000 human-translated pairs): a paraphrase (label 1) says the
    same, a non-paraphrase (word-scrambled, meaning changed, high word overlap) does not. The
    placeholder rows ("NS") are dropped."""
    for split in ("dev", "test"):
        rd = csv.DictReader(io.StringIO(PAWSX_ZH.read(f"PAWS-X/{split}_2k.tsv")), delimiter="\t",
                            quoting=csv.QUOTE_NONE)
        for r in rd:
            a, b, lb = (r.get("sentence1") or "").strip(), (r.get("sentence2") or "").strip(), r.get("label")
            if not a or not b or "NS" in (a, b) or lb not in ("0", "1"):
                continue
            yield _row(a, b, lb == "1", "pawsx_zh", "zh")


def begin_en() -> Iterator[dict]:
    """BEGIN (knowledge snippet, dialogue response) labelled by people: fully attributable (1) or
    not (0); generic responses are dropped. WoW dev + test, CMU-DoG and TopicalChat dev."""
    for path in ("wow/begin_dev_wow.tsv", "wow/begin_test_wow.tsv", "cmu-dog/begin_dev_cmu.tsv",
                 "topicalchat/begin_dev_tc.tsv"):
        rd = csv.DictReader(io.StringIO(BEGIN.read(path)), delimiter="\t", quoting=csv.QUOTE_NONE)
        for r in rd:
            lab = (r.get("begin_label") or "").strip()
            if lab not in ("Fully attributable", "Not fully attributable"):
                continue
            yield _row(r["knowledge"], r["response"], lab == "Fully attributable", "begin", "en")


BUILDERS = {"jnli_test": jnli_test, "jsts_train": jsts_train, "janli_train": janli_train,
            "snli_dev_test": snli_dev_test}
# data v6 (train.data.build --more-sources)
MORE_BUILDERS = {"jnli_neg_train": jnli_neg_train, "pawsx_zh": pawsx_zh, "begin_en": begin_en}
