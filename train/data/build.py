"""Build the faithfulness training set: python -m train.data.build --out DIR

Writes DIR/train.jsonl.gz, DIR/valid.jsonl.gz (2%, split by premise so no premise is in both) and
DIR/STATS.txt. One JSON per line: premise, hypothesis, label (1 supported, 0 not), source, lang,
kind (synthetic rows only). Deterministic for a given --seed. Sources and licences:
train/data/sources.py and docs/faithfulness-data.md.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
from collections import Counter
from pathlib import Path

import numpy as np

from . import long_synth, nli, qa_synth, templates, wiki_synth

# per-source caps (None = all); chosen so EN/JA/ZH end up of similar size as far as data allows
CAPS = {"janli_train": 8000, "jsts_train": None, "jnli_test": None, "snli_dev_test": None}
DROPPED_DEV = 0
TEMPLATE_ROWS = {"en": 16000, "ja": 10000, "zh": 22000}
# data v2: packed-premise NLI pairs per language (long_synth.build_packed)
PACKED_ROWS = {"en": 8000, "ja": 3000}
DROPPED_EVAL = 0
# data v6: JaQuAD gives 138k question pairs, seven times JSQuAD's; capped so Japanese does not
# swamp the other languages
MORE_CAPS = {"synth_jaquad": 20000, "long_jaquad": 8000, "synth_cmrc2018_train": 15000}
DROPPED_BY: Counter = Counter()  # (dev | eval, source) -> rows dropped
EVAL_FILES = ("faithfulness_qags_cnndm.jsonl", "faithfulness_halueval.jsonl",
              "faithfulness_faithbench.jsonl", "jnli_ja_valid.jsonl")


REPO = Path(__file__).resolve().parents[2]
SHINGLE = 20


PROBE_FIELDS = ("premise", "copy", "paraphrase", "wrong")


def dev_shingles() -> set[str]:
    """Every 20-character substring of the hand-written dev sets' contexts and answers
    (bench/data/faithfulness_*.jsonl) and of the paraphrase probe's statements
    (bench/data/paraphrase_probe.jsonl): a training row sharing 27+ characters with one is
    dropped."""
    out: set[str] = set()
    data = REPO / "bench" / "data"
    for path in [*sorted(data.glob("faithfulness_*.jsonl")), data / "paraphrase_probe.jsonl"]:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            texts = [r[k] for k in PROBE_FIELDS] if "premise" in r else [*r["contexts"], r["answer"]]
            for t in texts:
                out.update(t[i: i + SHINGLE] for i in range(len(t) - SHINGLE + 1))
    return out


def touches_dev(r: dict, dev: set[str]) -> bool:
    for t in (r["premise"], r["hypothesis"]):
        hits = [t[i: i + SHINGLE] in dev for i in range(0, len(t) - SHINGLE + 1, 4)]
        if any(a and b for a, b in zip(hits, hits[1:])):
            return True
    return False


def eval_shingles(data: Path | None = None) -> np.ndarray:
    """Hashes of every 20-character substring of the shared evaluation sets (QAGS, HaluEval,
    FaithBench, JNLI valid in ``data``, default ../shared/data), sorted; empty when the folder is
    not there. A training row sharing 27+ characters with one of them is dropped, as for the dev
    set: Wikipedia and news text can reach a training source by another route."""
    data = data or Path(os.environ.get("RAGPULSE_EVAL_DATA", REPO.parent / "shared" / "data"))
    hs: list[int] = []
    for name in EVAL_FILES:
        path = data / name
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            texts = [r.get("sentence1", ""), r.get("sentence2", ""), *r.get("contexts", []),
                     r.get("answer", "")]
            for t in dict.fromkeys(texts):
                hs.extend(_h(t[i: i + SHINGLE]) for i in range(len(t) - SHINGLE + 1))
    return np.unique(np.asarray(hs, dtype=np.uint64))


def _h(s: str) -> int:
    return int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little")


def touches_eval(r: dict, ev: np.ndarray) -> bool:
    if not len(ev):
        return False
    for t in (r["premise"], r["hypothesis"]):
        keys = np.asarray([_h(t[i: i + SHINGLE]) for i in range(0, len(t) - SHINGLE + 1, 4)],
                          dtype=np.uint64)
        if len(keys) < 2:
            continue
        pos = np.searchsorted(ev, keys).clip(0, len(ev) - 1)
        hits = ev[pos] == keys
        if (hits[1:] & hits[:-1]).any():
            return True
    return False


def _clean(r: dict) -> dict | None:
    p, h = r["premise"].replace("a.m..", "a.m.").replace("。。", "。"), r["hypothesis"].replace("a.m..", "a.m.").replace("。。", "。")
    if not p or not h or len(h) > 600 or len(p) > 2000:
        return None
    r = dict(r, premise=p, hypothesis=h)
    return r


def collect(seed: int, exclude: frozenset[str] = frozenset(), wiki_passes: int = wiki_synth.PASSES,
            more_sources: bool = False) -> list[dict]:
    rng = random.Random(seed)
    rows: list[dict] = []
    builders = {**nli.BUILDERS, **(nli.MORE_BUILDERS if more_sources else {})}
    for name, fn in builders.items():
        if name in exclude:
            continue
        got = list(fn())
        cap = CAPS.get(name)
        if cap and len(got) > cap:
            got = rng.sample(got, cap)
        rows += got
    for lang in ("ja", "zh", "en"):
        if f"qa_{lang}" not in exclude:
            rows += list(qa_synth.build(lang, seed))
    if "templates" not in exclude:
        for lang, n in TEMPLATE_ROWS.items():
            rows += list(templates.build(lang, n, seed))
    for lang in ("ja", "zh", "en"):
        if f"long_{lang}" not in exclude:
            rows += list(long_synth.build_qa(lang, seed))
    for lang, n in PACKED_ROWS.items():
        if f"pack_{lang}" not in exclude:
            rows += list(long_synth.build_packed(lang, n, seed))
    if "wiki_en" not in exclude:  # data v3
        rows += list(wiki_synth.build(seed, wiki_passes))
    if more_sources:  # data v6: JaQuAD and CMRC 2018 train passages, capped (MORE_CAPS)
        for lang in ("ja", "zh"):
            for key, fn in ((f"qa_more_{lang}", qa_synth.build_more),
                            (f"long_more_{lang}", long_synth.build_more_qa)):
                if key not in exclude:
                    got = list(fn(lang, seed))
                    cap = MORE_CAPS.get(got[0]["source"]) if got else None
                    rows += rng.sample(got, cap) if cap and len(got) > cap else got
    out, seen = [], set()
    dev = dev_shingles()
    ev = eval_shingles()
    global DROPPED_DEV, DROPPED_EVAL
    for r in rows:
        # a noised premise (data v3) is checked as written and as it was before the noise
        clean = r.pop("premise_clean", None)
        r = _clean(r)
        if r is None:
            continue
        alt = [r] if clean is None else [r, dict(r, premise=clean)]
        if any(touches_dev(x, dev) for x in alt):
            DROPPED_DEV += 1
            DROPPED_BY[("dev", r["source"])] += 1
            continue
        if any(touches_eval(x, ev) for x in alt):
            DROPPED_EVAL += 1
            DROPPED_BY[("eval", r["source"])] += 1
            continue
        key = (r["premise"], r["hypothesis"])
        if key in seen:
            continue
        seen.add(key)
        out.append(r)
    # shuffled by premise group: pairs sharing a premise stay adjacent (mixed labels), which lets
    # gzip store each premise about once; the trainer shuffles rows anyway
    groups: dict[str, list[dict]] = {}
    for r in out:
        groups.setdefault(r["premise"], []).append(r)
    keys = list(groups)
    rng.shuffle(keys)
    out = []
    for k in keys:
        g = groups[k]
        rng.shuffle(g)
        out += g
    return out


def _is_valid(premise: str, share: float) -> bool:
    h = int(hashlib.sha1(premise.encode()).hexdigest()[:8], 16)
    return (h % 10000) < share * 10000


def stats(rows: list[dict]) -> str:
    lines = [f"rows: {len(rows)} (dropped for sharing 27+ characters with a hand-written dev set: {DROPPED_DEV}, "
             f"with a shared evaluation set: {DROPPED_EVAL})"]
    lines += [f"  dropped ({why}) {src}: {n}" for (why, src), n in sorted(DROPPED_BY.items())] + [""]
    by = Counter((r["source"], r["lang"], r["label"]) for r in rows)
    srcs = sorted({(s, lg) for s, lg, _ in by})
    lines.append(f"{'source':24} {'lang':4} {'label=1':>8} {'label=0':>8} {'total':>8}")
    for s, lg in srcs:
        a, b = by[(s, lg, 1)], by[(s, lg, 0)]
        lines.append(f"{s:24} {lg:4} {a:8} {b:8} {a + b:8}")
    lines.append("")
    lang = Counter((r["lang"], r["label"]) for r in rows)
    for lg in ("en", "ja", "zh"):
        lines.append(f"lang {lg}: label=1 {lang[(lg, 1)]}, label=0 {lang[(lg, 0)]}")
    kinds = Counter((r.get("kind", "-"), r["label"]) for r in rows if "kind" in r)
    lines += ["", "synthetic kinds (kind, label): count"]
    lines += [f"  {k} {y}: {n}" for (k, y), n in sorted(kinds.items())]
    shapes = Counter((r["source"], r["shape"]) for r in rows if "shape" in r)
    if shapes:  # data v3: premise shapes (window / packed, with or without news-style noise)
        lines += ["", "premise shapes (source, shape): count"]
        lines += [f"  {s} {sh}: {n}" for (s, sh), n in sorted(shapes.items())]
    return "\n".join(lines) + "\n"


def write_rows(path: Path, rows: list[dict]) -> None:
    """``rows`` as gzipped JSON lines (what ``train.train --train/--valid`` reads)."""
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--valid-share", type=float, default=0.02)
    ap.add_argument("--name", default="train", help="file stem for the training file (train, train2, ...)")
    ap.add_argument("--wiki-passes", type=int, default=wiki_synth.PASSES,
                    help="window tilings per WikiText article (data v3: 3; v4: 6)")
    ap.add_argument("--more-sources", action="store_true",
                    help="data v6: add JNLI-Neg train, PAWS-X zh, BEGIN, JaQuAD and CMRC 2018 train "
                         "(docs/history/faithfulness-data.md, \"Data v6 sources\")")
    ap.add_argument("--exclude", nargs="*", default=[],
                    help=f"builders to leave out: {', '.join([*nli.BUILDERS, *nli.MORE_BUILDERS])}, "
                         "qa_ja, qa_zh, qa_en, templates, long_ja, long_zh, long_en, pack_en, pack_ja, "
                         "wiki_en, qa_more_ja, qa_more_zh, long_more_ja, long_more_zh")
    a = ap.parse_args()
    rows = collect(a.seed, frozenset(a.exclude), a.wiki_passes, a.more_sources)
    train = [r for r in rows if not _is_valid(r["premise"], a.valid_share)]
    valid = [r for r in rows if _is_valid(r["premise"], a.valid_share)]
    a.out.mkdir(parents=True, exist_ok=True)
    for name, part in ((a.name, train), ("valid" if a.name == "train" else f"valid{a.name[5:]}", valid)):
        write_rows(a.out / f"{name}.jsonl.gz", part)
    suffix = "" if a.name == "train" else a.name[5:]
    (a.out / f"STATS{suffix}.txt").write_text(f"== {a.name}.jsonl.gz\n" + stats(train) + "\n== valid\n" + stats(valid))
    print((a.out / f"STATS{suffix}.txt").read_text())


if __name__ == "__main__":
    main()
