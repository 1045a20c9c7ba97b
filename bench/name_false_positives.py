"""False positives of the unmarked-name recogniser (``privacy.unmarked_names``) on real text.

Reads ``ragpulse score`` JSONL files (their ``contexts``; JNLI's ``sentence1``/``sentence2``)
or plain-text/Markdown files (their paragraphs) given by path, runs :func:`ragpulse.scorer.person_names.unmarked_name_spans` on every text and
reports, per file: texts, characters, matches, texts with a match, matches per 10,000 characters,
and the recogniser's speed. The data is not part of the project (../shared/data/README.md).

Two readings:

* ``--name-free FILE``: text known to hold no person names (JNLI's image captions): every match
  is a false positive, and the share of texts with a match is the false-positive rate.
* other files (news, Wikipedia) hold real names: the matches are printed (``--show N``, a
  seeded sample, with their surroundings) to be judged by hand; docs/reliability.md gives the
  count judged wrong.

    .venv/bin/python bench/name_false_positives.py \\
        --name-free ../shared/data/jnli_ja_valid.jsonl \\
        ../shared/data/context_relevance_jsquad_ja.jsonl ../shared/data/faithfulness_qags_cnndm.jsonl \\
        ../shared/data/context_relevance_halueval.jsonl --show 40 --zh-dict DIR/jieba/dict.txt
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path

from ragpulse.scorer.person_names import unmarked_name_spans


def texts(path: Path) -> Iterator[str]:
    """Each distinct text of the file, in order (contexts repeat across lines of a set)."""
    seen: set[str] = set()
    if path.suffix != ".jsonl":  # plain text or Markdown: its paragraphs
        yield from (p for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip())
        return
    with path.open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            obj = json.loads(line)
            candidates = list(obj.get("contexts") or []) + [
                obj[k] for k in ("sentence1", "sentence2") if isinstance(obj.get(k), str)]
            for t in candidates:
                if isinstance(t, str) and t and t not in seen:
                    seen.add(t)
                    yield t


def measure(path: Path, name_free: bool, show: int, rng: random.Random) -> dict[str, object]:
    n_texts = n_chars = n_hit_texts = n_matches = 0
    examples: list[str] = []
    elapsed = 0.0
    for t in texts(path):
        t0 = time.perf_counter()
        spans = unmarked_name_spans(t)
        elapsed += time.perf_counter() - t0
        n_texts += 1
        n_chars += len(t)
        if spans:
            n_hit_texts += 1
        for start, end in spans:
            n_matches += 1
            example = f"{t[max(0, start - 20):start]}[[{t[start:end]}]]{t[end:end + 20]}"
            # reservoir sample of `show` matches
            if len(examples) < show:
                examples.append(example)
            elif (j := rng.randrange(n_matches)) < show:
                examples[j] = example
    return {
        "file": path.name, "name_free": name_free, "texts": n_texts, "chars": n_chars,
        "matches": n_matches, "texts_with_match": n_hit_texts,
        "share_of_texts": n_hit_texts / n_texts if n_texts else 0.0,
        "matches_per_10k_chars": 1e4 * n_matches / n_chars if n_chars else 0.0,
        "us_per_kb": 1e6 * elapsed / (n_chars / 1000) if n_chars else 0.0,
        "examples": examples,
    }


def chinese_dictionary(path: Path, sentences: int, rng: random.Random) -> dict[str, object]:
    """Chinese, from a segmenter's dictionary (jieba's ``dict.txt``: word, frequency, part of
    speech; ``nr*`` tags mark person names). Two readings:

    * every three-character word that starts with a listed surname, alone before a comma (the
      recogniser's own shape): words not tagged ``nr*`` matched (false positives) and words
      tagged ``nr*`` matched (recall on real names);
    * ``sentences`` synthetic sentences of 8-15 non-name words drawn by frequency: the share
      with a match (running text without names; every match is a false positive).
    """
    from ragpulse.scorer.person_names import _ZH_SURNAMES

    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 3 and all("\u4e00" <= c <= "\u9fff" for c in parts[0]):
            entries.append((parts[0], int(parts[1]), parts[2]))
    shaped = [e for e in entries if len(e[0]) == 3 and e[0][0] in _ZH_SURNAMES]
    names = [e for e in shaped if e[2].startswith("nr")]
    others = [e for e in shaped if not e[2].startswith("nr")]
    wrong = [e for e in others if unmarked_name_spans(e[0] + "，")]
    found = [e for e in names if unmarked_name_spans(e[0] + "，")]
    words = [(w, f) for w, f, tag in entries if not tag.startswith("nr")]
    hit = 0
    examples: list[str] = []
    for _ in range(sentences):
        text = "".join(rng.choices([w for w, _ in words], weights=[f for _, f in words],
                                   k=rng.randint(8, 15))) + "。"
        if spans := unmarked_name_spans(text):
            hit += 1
            examples.append(text[spans[0][0]:spans[0][1]])
    return {"non_name_words": len(others), "non_name_matched": len(wrong),
            "wrong_examples": [w for w, _, _ in sorted(wrong, key=lambda e: -e[1])[:20]],
            "name_words": len(names), "names_matched": len(found),
            "sentences": sentences, "sentences_with_match": hit, "sentence_examples": examples[:20]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, help="JSONL files that may hold names")
    ap.add_argument("--name-free", type=Path, action="append", default=[],
                    help="JSONL file known to hold no person names (every match is wrong)")
    ap.add_argument("--show", type=int, default=20, help="matches printed per file")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--zh-dict", type=Path,
                    help="jieba's dict.txt (pip install --target DIR jieba): Chinese words with "
                         "part-of-speech tags, for the Chinese pattern")
    ap.add_argument("--zh-sentences", type=int, default=2000)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    rows = [measure(p, True, args.show, rng) for p in args.name_free]
    rows += [measure(p, False, args.show, rng) for p in args.files]
    print(f"{'file':42} {'texts':>6} {'chars':>9} {'matches':>7} {'texts hit':>9} "
          f"{'share':>7} {'/10k ch':>7} {'us/KB':>6}")
    for r in rows:
        print(f"{r['file'] + (' (name-free)' if r['name_free'] else ''):42} {r['texts']:>6} "
              f"{r['chars']:>9} {r['matches']:>7} {r['texts_with_match']:>9} "
              f"{r['share_of_texts']:>7.2%} {r['matches_per_10k_chars']:>7.2f} "
              f"{r['us_per_kb']:>6.0f}")
    for r in rows:
        if r["examples"]:
            print(f"\n{r['file']}: {len(r['examples'])} of {r['matches']} matches")
            for e in r["examples"]:
                print("  " + " ".join(str(e).split()))
    if args.zh_dict:
        z = chinese_dictionary(args.zh_dict, args.zh_sentences, rng)
        print(f"\nChinese ({args.zh_dict}): three-character words starting with a listed surname: "
              f"{z['non_name_matched']} of {z['non_name_words']} non-name words matched "
              f"(false positives), {z['names_matched']} of {z['name_words']} names matched; "
              f"{z['sentences_with_match']} of {z['sentences']} synthetic name-free sentences "
              "with a match")
        print("  non-name words matched, most frequent first: " + " ".join(z["wrong_examples"]))
        if z["sentence_examples"]:
            print("  in sentences: " + " ".join(z["sentence_examples"]))


if __name__ == "__main__":
    main()
