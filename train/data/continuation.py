"""Training pairs for continuing a shipped model on CPU (``train.train --init``):

    python -m train.data.continuation --base DATA4 --out DIR [--replay 12000] [--polarity 2000]

``DIR/train.jsonl.gz``: ``--replay`` rows drawn at random from the base data's training file
(so the model keeps what it learned) plus ``--polarity`` pairs per language from
``polarity.py`` (and ``--exceptions`` list-with-an-exception pairs, ``--shapes``
``rag_shapes.py`` pairs per language). With ``--replay`` at least the base's size it is the
base data plus those pairs: data v5 is ``--base DATA4 --replay 1000000 --polarity 2000
--exceptions 1000 --shapes 3000``; ``DIR/valid.jsonl.gz``: the base validation file plus 2 % of the polarity pairs,
split by premise. ``--extra DATA6 --extra-sources begin pawsx_zh ...`` adds every training and
validation row of those sources from another build (human-labelled sets that the base lacks,
for a continuation on CPU: docs/history/faithfulness-data.md, "A CPU continuation on the data v6
sources"). ``--contrasts-from DIR`` adds ``contrast.py``'s pairs made from the human-labelled
rows of that build's training file (a supported pair and its one-value-changed twin; pairs whose
premise is in the base's validation file are left out, 2 % of the rest by premise go to
validation). ``--corpus N`` adds the RAG corpus's training-domain pairs N times
(``rag_corpus.py``; 2 % of its scenarios to validation). ``--paraphrase N`` adds the paraphrase
twins' training pairs N times and their validation split to validation (``paraphrase.py``: short
passages, statements in other words beside wrong twins worded alike). ``--replay-all S ...`` adds every training row of those base sources once more
(beside the random replay: the sources a continuation must not forget get a larger share).
Rows touching the hand-written dev or confirmation sets are dropped, as in ``build``.
Deterministic for a given ``--seed``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from collections import Counter
from pathlib import Path

from . import contrast, paraphrase, polarity, rag_corpus, rag_shapes
from .build import dev_shingles, touches_dev, write_rows


def _read(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _of_sources(path: Path, sources: set[str]) -> list[dict]:
    return [r for r in _read(path) if r.get("source") in sources]


def build(base: Path, out: Path, replay: int, per_lang: int, seed: int = 0,
          exceptions: int = 0, shapes: int = 0, extra: Path | None = None,
          extra_sources: tuple[str, ...] = (), contrasts_from: Path | None = None,
          replay_all: tuple[str, ...] = (), corpus: int = 0, paraphrase_times: int = 0) -> Counter:
    if bool(extra) != bool(extra_sources):
        raise ValueError("--extra and --extra-sources go together")
    rng = random.Random(seed)
    base_train = _read(base / "train.jsonl.gz")
    # the whole base kept in its order (train.train shuffles; the file stays as compressible)
    full = replay >= len(base_train)
    rows = base_train if full else rng.sample(base_train, replay)
    if replay_all:
        again = [r for r in base_train if r.get("source") in set(replay_all)]
        missing = set(replay_all) - {r["source"] for r in again}
        if missing:
            raise ValueError(f"{base} has no training rows of {sorted(missing)}")
        rows = rows + again
    dev = dev_shingles()
    made: Counter = Counter()
    new: list[dict] = []
    for name, fn, n in (("polarity", polarity.build, per_lang),
                        ("exceptions", polarity.build_exceptions, exceptions),
                        ("shapes", rag_shapes.build, shapes)):
        got = [r for lang in ("en", "ja", "zh") for r in fn(lang, n, seed)]
        made[name] = len(got)
        new += got
    base_valid = _read(base / "valid.jsonl.gz")
    if contrasts_from is not None:
        seen = {r["premise"] for r in base_valid}
        got = [r for r in contrast.pairs(_read(contrasts_from / "train.jsonl.gz"), seed)
               if r["premise"] not in seen]
        made["contrasts"] = len(got)
        new += got
    dropped = sum(touches_dev(r, dev) for r in new)
    new = [r for r in new if not touches_dev(r, dev)]
    premises = sorted({r["premise"] for r in new})
    held = set(rng.sample(premises, max(1, len(premises) // 50))) if premises else set()
    train = rows + [r for r in new if r["premise"] not in held]
    valid = base_valid + [r for r in new if r["premise"] in held]
    if extra is not None:
        wanted = set(extra_sources)
        more = _of_sources(extra / "train.jsonl.gz", wanted)
        found = {r["source"] for r in more}
        if found != wanted:
            raise ValueError(f"{extra} has no training rows of {sorted(wanted - found)}")
        if any(r.get("source") in wanted for r in base_train):
            raise ValueError(f"the base already holds rows of {sorted(wanted)}")
        kept = [r for r in more if not touches_dev(r, dev)]
        dropped += len(more) - len(kept)
        made["extra"] = len(kept)
        train += kept
        valid += _of_sources(extra / "valid.jsonl.gz", wanted)
    if corpus:
        got_train, got_valid = _corpus_pairs(rng)
        made["corpus"] = len(got_train)
        train += got_train * corpus
        valid += got_valid
    if paraphrase_times:
        units = paraphrase.committed()
        if not units:
            raise ValueError(f"--paraphrase: no unit in {paraphrase.UNITS}")
        split = paraphrase.pairs_by_split(units)
        made["paraphrase"] = len(split["train"])
        train += split["train"] * paraphrase_times
        valid += split["valid"]
    if not full:
        rng.shuffle(train)
    out.mkdir(parents=True, exist_ok=True)
    write_rows(out / "train.jsonl.gz", train)
    write_rows(out / "valid.jsonl.gz", valid)
    stats = Counter({"train": len(train), "valid": len(valid), "replay": len(rows), **made,
                     "dropped_dev": dropped})
    (out / "STATS.txt").write_text("\n".join(f"{k} {v}" for k, v in stats.items()) + "\n")
    return stats


def _corpus_pairs(rng: random.Random) -> tuple[list[dict], list[dict]]:
    """The RAG corpus's pairs of its training domains (``rag_corpus.nli_pairs``), split by
    scenario: 2 % of the scenarios to validation. Its held-out domains never come here."""
    recs = [r for r in rag_corpus.committed() if rag_corpus.DOMAINS[r["domain"]] == "train"]
    if not recs:
        raise ValueError(f"--corpus: no scenario in {rag_corpus.BATCHES}")
    ids = sorted(r["id"] for r in recs)
    held = set(rng.sample(ids, max(1, len(ids) // 50)))
    pairs = rag_corpus.nli_pairs(recs)
    return ([r for r in pairs if r["scenario"] not in held],
            [r for r in pairs if r["scenario"] in held])


def parser() -> argparse.ArgumentParser:
    """The command line (train/ablate_v5.sh's variants are checked against it)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True, help="a train.data.build output folder")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--replay", type=int, default=12000)
    ap.add_argument("--polarity", type=int, default=2000, help="polarity pairs per language")
    ap.add_argument("--exceptions", type=int, default=0,
                    help="list-with-an-exception pairs per language (polarity.build_exceptions)")
    ap.add_argument("--shapes", type=int, default=0,
                    help="value-format and two-passage pairs per language (rag_shapes.build)")
    ap.add_argument("--extra", type=Path, default=None,
                    help="another train.data.build output folder (with --extra-sources)")
    ap.add_argument("--extra-sources", nargs="+", default=(),
                    help="its sources whose rows are added whole (e.g. begin pawsx_zh)")
    ap.add_argument("--contrasts-from", type=Path, default=None,
                    help="a train.data.build output folder whose human-labelled supported pairs "
                         "become paraphrase contrasts (contrast.py)")
    ap.add_argument("--replay-all", nargs="+", default=(),
                    help="base sources whose every training row is added once more "
                         "(e.g. jnli_test jsts_train pack_jnli_janli)")
    ap.add_argument("--corpus", type=int, default=0,
                    help="add the RAG corpus's training-domain pairs this many times "
                         "(rag_corpus.py; 2 %% of its scenarios go to validation)")
    ap.add_argument("--paraphrase", type=int, default=0,
                    help="add the paraphrase twins' training pairs this many times "
                         "(paraphrase.py; their validation split goes to validation)")
    ap.add_argument("--seed", type=int, default=0)
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    print(dict(build(a.base, a.out, a.replay, a.polarity, a.seed, a.exceptions, a.shapes,
                     a.extra, tuple(a.extra_sources), a.contrasts_from,
                     tuple(a.replay_all), a.corpus, a.paraphrase)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
