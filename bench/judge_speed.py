"""Samples/s of the two local judges on a typical trace, as ``ragpulse up`` runs them: the
judge built by ``build_judge`` (the scorer's defaults: one BLAS and one onnxruntime thread, the
model judge's 2 workers) behind the ``Evaluator`` with the five default metrics.

A typical trace: 3 answer statements, 5 retrieved contexts of about 900 characters, the samples
cycling through English, Japanese and Chinese (``--langs``), with two kinds of answers
(``--answers``). *written* (the typical trace): a question of the RAG corpus
(``train/corpus/batches``) with its first written answer that has 3 supported statements
(paraphrases and fusions of its passages), each context one of its passages followed by
passages of other rows. *verbatim*: English contexts cut from the news articles of the labeled
sets in ``--data``, Japanese and Chinese ones joined from the corpus's passages, the answer one
sentence copied from each of the first three contexts; such statements reach the model judge's
evidence cut on their best sentence and skip its passage windows, so they cost it less than
written answers do (until 2026-11-30 the bench measured these alone). Contexts are distinct
across samples (a cold embedding cache, as ``bench/speed_local.py``). Judge load and a warm-up
of 4 samples are not in the rate.

    .venv/bin/python bench/judge_speed.py --data ../shared/data [--samples 60] [--rounds 3]
        [--answers written,verbatim] [--write-docs] [--write-constants]

Each judge runs in a process of its own (its peak RSS is that process's), the judges alternating
for ``--rounds`` rounds, so the CPU ratio of the model judge to the fast judge is a same-run
figure whatever else the machine runs. CPU seconds per sample are split by stage (USE
embeddings, the NLI model's premises and its forward passes, the lexical detector, the rest:
segmentation, lexical views, metrics, the event loop), timed per thread: exact with one BLAS
thread (the default), while with ``--threads 2`` the BLAS helper threads' time falls under the
rest; and each worker pool's blocking call is timed whole. The 2-free-core estimate is two
cores' worth of the CPU a sample, capped at each pool's threads' worth of its call and, with
float USE embeddings, at one core's worth of the USE stage (the float embedder runs one forward
pass at a time). The load average before and after is printed beside each figure. ``ragpulse
up`` derives its default sampling rate from the written answers' estimates
(``ragpulse.scorer.SAMPLES_PER_S``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import multiprocessing
import os
import resource
import statistics
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.docs_section import write_constant, write_section
from bench.judges import add_judge_option
from ragpulse.scorer import Evaluator, Sample
from ragpulse.scorer.judges.factory import build_judge
from ragpulse.scorer.metrics import DEFAULT_METRICS
from ragpulse.scorer.segment import split_sentences

REPO = Path(__file__).resolve().parent.parent

CONTEXT_CHARS = 900
STATEMENTS = 3
JUDGES = ("fast", "model")
LANGS = ("en", "ja", "zh")
CORPUS = REPO / "train" / "corpus" / "batches"
STAGES = ("USE embeddings", "NLI premises", "NLI model", "lexical detector")
DOCS = REPO / "docs" / "benchmarks.md"
MARK = "<!-- bench/judge_speed.py -->"
SAMPLING = REPO / "scorer" / "ragpulse" / "scorer" / "judges" / "registry.py"


def _jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _cut(text: str, chars: int) -> str:
    """The first ``chars`` characters of ``text``, ending at a word boundary."""
    return text[:chars].rsplit(" ", 1)[0] if len(text) > chars else text


def _english_contexts(data: Path) -> list[str]:
    """~900-character pieces of the news articles of the labeled sets, each with 2+ sentences."""
    chunks: list[str] = []
    seen: set[str] = set()
    for name in ("faithfulness_qags_cnndm.jsonl", "faithfulness_faithbench.jsonl"):
        for row in _jsonl(data / name):
            for c in row["contexts"]:
                if c in seen:
                    continue
                seen.add(c)
                for k in range(0, len(c) - CONTEXT_CHARS + 1, CONTEXT_CHARS):
                    piece = _cut(c[k:k + CONTEXT_CHARS + 60], CONTEXT_CHARS)
                    if len(split_sentences(piece)) >= 2:
                        chunks.append(piece)
    return chunks


@functools.cache
def _corpus() -> tuple[dict, ...]:
    """The RAG corpus's records in file order (``train.data.rag_corpus.committed``), read once."""
    from train.data.rag_corpus import committed

    return tuple(committed(CORPUS))


def _corpus_rows(lang: str) -> list[dict]:
    return [r for r in _corpus() if r.get("lang") == lang]


def _corpus_contexts(lang: str) -> list[tuple[str, str]]:
    """(context, question): the RAG corpus's ``lang`` passages in file order, their sentences
    joined into contexts of about 900 characters (whole sentences, at most 60 over), each with
    the question of the scenario its first sentence comes from."""
    out: list[tuple[str, str]] = []
    sep = " " if lang == "en" else ""
    sents: list[str] = []
    question = ""
    for row in _corpus_rows(lang):
        for passage in row["contexts"]:
            for s in split_sentences(passage):
                if not sents:
                    question = row["question"]
                if sents and len(sep.join([*sents, s])) > CONTEXT_CHARS + 60:
                    if len(sents) >= 2:
                        out.append((sep.join(sents), question))
                    sents, question = [], row["question"]
                sents.append(s)
                if len(sep.join(sents)) >= CONTEXT_CHARS:
                    out.append((sep.join(sents), question))
                    sents = []
    return out


def make_samples(data: Path, n: int, langs: Sequence[str] = LANGS) -> list[Sample]:
    """``n`` samples, each with five distinct ~900-character contexts and a 3-sentence answer,
    in the languages ``langs`` in turn."""
    questions = [r["question"] for r in _jsonl(data / "answer_relevancy_halueval.jsonl")]
    pools: dict[str, list[tuple[str, str]]] = {}
    for lang in dict.fromkeys(langs):
        if lang == "en":
            pools[lang] = [(c, questions[i % len(questions)])
                           for i, c in enumerate(_english_contexts(data))]
        else:
            pools[lang] = _corpus_contexts(lang)
    taken: Counter = Counter()
    out = []
    for i in range(n):
        lang = langs[i % len(langs)]
        at = 5 * taken[lang]
        taken[lang] += 1
        if at + 5 > len(pools[lang]):
            raise SystemExit(f"{lang}: {len(pools[lang])} distinct contexts, more needed")
        picked = pools[lang][at:at + 5]
        ctx = tuple(c for c, _ in picked)
        sep = " " if lang == "en" else ""
        answer = sep.join(split_sentences(ctx[j])[1] for j in range(STATEMENTS))
        out.append(Sample(id=f"speed-{lang}-{i}", question=picked[0][1], contexts=ctx,
                          answer=answer))
    return out


ANSWERS = ("verbatim", "written")




def _written_answer(row: dict) -> str | None:
    """The first 3 supported statements of the row's first answer that has 3."""
    sep = " " if row["lang"] == "en" else ""
    for answer in row.get("answers", []):
        good = [st["text"] for st in answer["statements"] if st["label"] == 1]
        if len(good) >= STATEMENTS:
            return sep.join(good[:STATEMENTS])
    return None


def written_samples(n: int, langs: Sequence[str] = LANGS) -> list[Sample]:
    """``n`` samples whose answers are the RAG corpus's written ones (paraphrases and fusions
    of their passages, as real answers are): a row's question, its first 3 supported statements,
    and 5 contexts of about 900 characters, each of the row's passages (up to 5) followed by
    passages of other rows of its language, all distinct across samples."""
    out: list[Sample] = []
    pools = {lang: _corpus_rows(lang) for lang in dict.fromkeys(langs)}
    nxt = {lang: 0 for lang in pools}
    fill = {lang: len(rows) - 1 for lang, rows in pools.items()}  # fillers from the end
    seen: set[str] = set()

    spare: dict[str, list[str]] = {lang: [] for lang in pools}

    def filler(lang: str) -> str:
        rows = pools[lang]
        while not spare[lang] and fill[lang] > nxt[lang]:
            spare[lang] = [c for c in rows[fill[lang]]["contexts"] if c not in seen]
            fill[lang] -= 1
        if spare[lang]:
            passage = spare[lang].pop(0)
            seen.add(passage)
            return passage
        raise SystemExit(f"{lang}: not enough distinct corpus passages for --answers written")

    for i in range(n):
        lang = langs[i % len(langs)]
        rows = pools[lang]
        while True:
            if nxt[lang] >= fill[lang]:
                raise SystemExit(f"{lang}: not enough corpus rows for --answers written")
            row = rows[nxt[lang]]
            nxt[lang] += 1
            answer = _written_answer(row)
            if answer and not seen.intersection(row["contexts"]):
                break
        seen.update(row["contexts"])
        contexts = []
        for k in range(5):
            text = row["contexts"][k] if k < len(row["contexts"]) else ""
            while len(text) < CONTEXT_CHARS:
                text = f"{text}\n\n{filler(lang)}" if text else filler(lang)
            contexts.append(text)
        out.append(Sample(id=f"speed-written-{lang}-{i}", question=row["question"],
                          contexts=tuple(contexts), answer=answer))
    return out


def nli_settings(pairs: Sequence[str]) -> Any:
    """``NliJudgeSettings`` from ``FIELD=VALUE`` pairs (``--nli premise=views``), for the nli
    and model judges; None without pairs (each judge's defaults)."""
    if not pairs:
        return None
    from pydantic import ValidationError

    from bench.quality import nli_overrides
    from ragpulse.scorer.judges.nli import NliJudgeSettings

    fields = nli_overrides(pairs)
    try:
        return NliJudgeSettings(**fields)
    except ValidationError as e:
        raise SystemExit(f"--nli: {e.errors()[0]['loc'][0]}: {e.errors()[0]['msg']}") from None


class StageClock:
    """CPU seconds per stage: each wrapped method's thread CPU time, less that of the wrapped
    methods it calls (a stage inside another counts once, as itself). Per thread, so work that
    a library hands to threads of its own (BLAS with ``--threads 2``) is not seen here."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.pools: dict[str, float] = defaultdict(float)
        self._local = threading.local()
        self._lock = threading.Lock()

    def wrap_pool(self, owner: type, attr: str, pool: str) -> None:
        """Time ``owner.attr`` whole into ``pools[pool]`` (the blocking call a judge's worker
        pool runs per sample), leaving the stages as they are."""
        fn: Callable[..., Any] = getattr(owner, attr)
        clock = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.thread_time() - t0
                with clock._lock:
                    clock.pools[pool] += spent

        setattr(owner, attr, timed)

    def wrap(self, owner: type, attr: str, stage: str) -> None:
        fn: Callable[..., Any] = getattr(owner, attr)
        clock = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            stack = clock._local.__dict__.setdefault("stack", [])
            frame = [time.thread_time(), 0.0]
            stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                stack.pop()
                spent = time.thread_time() - frame[0]
                if stack:
                    stack[-1][1] += spent
                with clock._lock:
                    clock.seconds[stage] += spent - frame[1]

        setattr(owner, attr, timed)

    def reset(self) -> None:
        with self._lock:
            self.seconds.clear()
            self.pools.clear()


def _stage_clock() -> StageClock:
    from ragpulse.scorer.embeddings import USEEmbedder
    from ragpulse.scorer.judges.local import LocalJudge
    from ragpulse.scorer.judges.local.support_detector import SupportDetector
    from ragpulse.scorer.judges.nli import NliJudge
    from ragpulse.scorer.judges.nli.onnx_model import NliModel

    clock = StageClock()
    clock.wrap_pool(LocalJudge, "judge", "fast")  # the fast judge's pool (the model judge's too)
    clock.wrap_pool(NliJudge, "judge", "nli")
    clock.wrap(USEEmbedder, "embed", "USE embeddings")
    clock.wrap(NliModel, "support_matrix", "NLI premises")
    clock.wrap(NliModel, "_run_encoded", "NLI model")
    clock.wrap(SupportDetector, "predict", "lexical detector")
    return clock


async def measure(name: str, samples: Sequence[Sample], warm: Sequence[Sample], threads: int,
                  concurrency: int, nli: Any = None, clock: StageClock | None = None) -> dict:
    t0 = time.perf_counter()
    judge = build_judge(name, threads=threads, **({"nli": nli} if nli is not None else {}))
    ev = Evaluator(judge, list(DEFAULT_METRICS), max_concurrency=concurrency)
    statuses: Counter = Counter()
    try:
        async for _ in ev.evaluate_many(list(warm)):
            pass
        load_s = time.perf_counter() - t0
        if clock is not None:
            clock.reset()
        before = os.getloadavg()[0]
        cpu0, t1 = time.process_time(), time.perf_counter()
        async for res in ev.evaluate_many(list(samples)):
            statuses.update(s.status for s in res.scores)
        wall, cpu = time.perf_counter() - t1, time.process_time() - cpu0
    finally:
        await judge.aclose()
    n = len(samples)
    stages = {k: v / n for k, v in (clock.seconds if clock is not None else {}).items()}
    pools = {k: v / n for k, v in (clock.pools if clock is not None else {}).items()}
    local = getattr(judge, "local", judge)  # the model judge's fast part, or the fast judge
    workers = {"fast": local.settings.workers}
    precision = getattr(local.embedder, "precision", "float")
    if local is not judge:
        workers["nli"] = judge.settings.workers
    return {"judge": name, "samples": n, "samples_per_s": n / wall,
            "cpu_s_per_sample": cpu / n, "stages": stages, "pools": pools, "workers": workers,
            "embeddings": precision,
            "load_s": load_s,
            "load_before": before, "load_after": os.getloadavg()[0],
            "ok": statuses.get("ok", 0), "scores": sum(statuses.values())}


def _child(name: str, data: str, samples: int, langs: Sequence[str], threads: int,
           concurrency: int, nli_pairs: Sequence[str], answers: str = "verbatim") -> dict:
    """One judge's measurement in a fresh process: its peak RSS is this judge's alone."""
    pool = (written_samples(samples + 4, langs) if answers == "written"
            else make_samples(Path(data), samples + 4, langs))
    clock = _stage_clock()
    r = asyncio.run(measure(name, pool[4:], pool[:4], threads, concurrency,
                            nli_settings(nli_pairs) if name == "model" else None, clock))
    r["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    r["answers"] = answers
    r["context_chars"] = statistics.fmean(len(c) for smp in pool[4:] for c in smp.contexts)
    return r


def label(judge: str, answers: str) -> str:
    """A table row's name: the judge on written answers (the typical trace), else the judge
    with its answers kind."""
    return judge if answers == "written" else f"{judge} ({answers} answers)"


def _mean(results: list[dict], key: str) -> float:
    return statistics.fmean(r[key] for r in results)


def summary(results: list[dict]) -> dict[str, dict]:
    """Per judge and answers kind (keyed by :func:`label`; rows without ``answers`` were
    measured on verbatim ones): the rounds' mean figures, stages and peak RSS (the largest)."""
    out: dict[str, dict] = {}
    keys = dict.fromkeys((r["judge"], r.get("answers", "verbatim")) for r in results)
    for judge, answers in sorted(keys, key=lambda k: (k[1] != "written", JUDGES.index(k[0])
                                                      if k[0] in JUDGES else 9)):
        name = label(judge, answers)
        rs = [r for r in results if (r["judge"], r.get("answers", "verbatim")) == (judge, answers)]
        stages = {k: statistics.fmean(r["stages"].get(k, 0.0) for r in rs) for k in STAGES}
        cpu = _mean(rs, "cpu_s_per_sample")
        stages["rest"] = max(0.0, cpu - sum(stages.values()))
        pools = {k: statistics.fmean(r.get("pools", {}).get(k, 0.0) for r in rs)
                 for k in rs[0].get("pools", {})}
        out[name] = {"judge": judge, "label": name, "answers": answers, "rounds": len(rs),
                     "samples": rs[0]["samples"],
                     "context_chars": _mean(rs, "context_chars") if "context_chars" in rs[0] else None,
                     "samples_per_s": _mean(rs, "samples_per_s"), "cpu_s_per_sample": cpu,
                     "stages": stages, "pools": pools, "workers": rs[0].get("workers", {}),
                     "embeddings": rs[0].get("embeddings", "float"),
                     "peak_rss_mib": max(r["peak_rss_mib"] for r in rs),
                     "load_s": _mean(rs, "load_s"), "ok": sum(r["ok"] for r in rs),
                     "scores": sum(r["scores"] for r in rs),
                     "load_before": min(r["load_before"] for r in rs),
                     "load_after": max(r["load_after"] for r in rs)}
    return out


def free_cores_estimate(r: dict) -> float:
    """Samples/s on 2 free cores from one judge's summary: two cores' worth of its CPU seconds
    a sample, but no more than each worker pool's threads' worth of the CPU its blocking call
    takes a sample (the fast judge runs a sample at a time on one worker), nor, with float
    embeddings, than one core's worth of its USE stage (the float embedder runs one forward
    pass at a time, on one BLAS thread; the int8 one runs passes side by side)."""
    bounds = [2 / r["cpu_s_per_sample"]]
    use = r["stages"].get("USE embeddings", 0.0)
    if use > 0 and r.get("embeddings", "float") == "float":
        bounds.append(1 / use)
    for pool, seconds in r.get("pools", {}).items():
        if seconds > 0:
            bounds.append(r["workers"][pool] / seconds)
    return min(bounds)


def ratios(results: list[dict], answers: str = "written") -> list[float]:
    """Per round, the model judge's CPU seconds a sample over the fast judge's, on ``answers``
    (rows without the field: verbatim)."""
    by_round: dict[int, dict[str, float]] = defaultdict(dict)
    for r in results:
        if r.get("answers", "verbatim") == answers:
            by_round[r["round"]][r["judge"]] = r["cpu_s_per_sample"]
    return [d["model"] / d["fast"] for _, d in sorted(by_round.items())
            if "model" in d and "fast" in d]


def table(results: list[dict], command: str, langs: Sequence[str], threads: int) -> str:
    s = summary(results)
    lines = [f"Command: `{command}`  ",
             f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on "
             f"{os.cpu_count()} cores shared with other jobs (load average before / after in "
             "the table); each judge in a process of its own, the judges alternating.", "",
             "| judge | rounds x samples | samples/s (this machine) | CPU s/sample | 2 free "
             "cores (est.) | peak RSS (MiB) | scores ok | load + warm-up (s) | load avg "
             "before / after |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in s.values():
        lines.append(f"| {r['label']} | {r['rounds']} x {r['samples']} | "
                     f"{r['samples_per_s']:.1f} | {r['cpu_s_per_sample']:.3f} | "
                     f"{free_cores_estimate(r):.1f} | {r['peak_rss_mib']:.0f} | "
                     f"{r['ok']}/{r['scores']} | {r['load_s']:.1f} | "
                     f"{r['load_before']:.2f} / {r['load_after']:.2f} |")
    lines += ["", "CPU seconds a sample by stage (timed per thread; the rest: segmentation, "
              "lexical views, metrics, the event loop):", "",
              "| judge | " + " | ".join(STAGES) + " | rest | total |",
              "|---|" + "---|" * (len(STAGES) + 2)]
    for r in s.values():
        st = r["stages"]
        lines.append(f"| {r['label']} | " + " | ".join(f"{st[k]:.3f}" for k in STAGES)
                     + f" | {st['rest']:.3f} | {r['cpu_s_per_sample']:.3f} |")
    pools = [f"{r['label']}: " + ", ".join(
        f"{k} {v:.3f} ({r['workers'][k]} worker{'s' if r['workers'][k] > 1 else ''})"
        for k, v in r["pools"].items()) for r in s.values() if r.get("pools")]
    if pools:
        lines += ["", "CPU seconds a sample in each worker pool's blocking call: "
                  + "; ".join(pools) + "."]
    for answers in ANSWERS[::-1]:
        rs = ratios(results, answers)
        if rs:
            lines += ["", f"Same-run ratio, model / fast CPU seconds a sample, {answers} answers: "
                      f"**{statistics.median(rs):.2f}** (median of {len(rs)} round(s): "
                      f"{', '.join(f'{x:.2f}' for x in rs)})."]
    chars = {r["answers"]: r["context_chars"] for r in s.values() if r.get("context_chars")}
    sizes = ", ".join(f"{k} {v:.0f}" for k, v in chars.items())
    embeddings = ", ".join(sorted({r["embeddings"] for r in s.values()}))
    lines += ["", f"Typical trace: {STATEMENTS} answer statements, 5 distinct contexts of about "
              f"{CONTEXT_CHARS} characters (mean characters a context: {sizes}), samples in "
              f"{', '.join(langs)} in turn, the five default metrics; each judge as "
              f"`build_judge(name, threads={threads})` makes it. Two kinds of answers: "
              "*written* (the rows named by the judge alone): the RAG corpus's written answers, "
              "paraphrases and fusions of the passages each context opens with, followed by "
              "other passages of the corpus; *verbatim*: one sentence copied from each of the "
              "first three contexts (English news text; Japanese and Chinese passages of the "
              "RAG corpus). Verbatim statements reach the model judge's evidence cut on their "
              "best sentence and skip the passage windows, so they cost it less than "
              "written answers do; the written figures are the typical trace. On a shared "
              "machine samples/s is lower than on a quiet one and CPU seconds rise with the "
              "load; the same-run ratio is the figure to compare across versions, and two "
              "cores divided by CPU seconds a sample estimates 2 free cores, capped at "
              "each worker pool's threads' worth of its blocking calls (the fast judge: one "
              "worker; the model judge: one for the fast judge's part, two for the model's) "
              "and, with float USE embeddings, at one core's worth of the USE stage (the float "
              f"embedder runs one forward pass at a time). USE embeddings: {embeddings}. "
              "`ragpulse.scorer.SAMPLES_PER_S` takes the written answers' estimates."]
    return "\n".join(lines)


def write_docs(body: str) -> None:
    write_section(MARK, body, heading='## Speed of the local judges on a typical trace',
                  before='## Speed (local judge)', docs=DOCS)


def write_constants(results: list[dict]) -> dict[str, float]:
    """Set ``SAMPLES_PER_S`` in ragpulse.scorer.judges.registry to this run's 2-core estimates
    (both judges needed: the dict is written whole)."""
    s = summary(results)
    if not set(JUDGES) <= set(s):
        raise SystemExit("--write-constants needs both judges on written answers")
    figures = {k: round(free_cores_estimate(s[k]), 1) for k in JUDGES}
    write_constant(SAMPLING, "SAMPLES_PER_S", figures)
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    add_judge_option(p, *JUDGES, nargs="+", default=list(JUDGES))
    p.add_argument("--samples", type=int, default=60)
    p.add_argument("--rounds", type=int, default=1,
                   help="alternate the judges this many times (each run in a fresh process)")
    p.add_argument("--langs", default=",".join(LANGS),
                   help="the samples' languages, in turn (en, ja, zh)")
    p.add_argument("--threads", type=int, default=1,
                   help="BLAS threads (build_judge's threads; the scorer and up run 1)")
    p.add_argument("--concurrency", type=int, default=8, help="samples in flight (Evaluator)")
    p.add_argument("--answers", default=",".join(ANSWERS),
                   help="answer kinds, each measured in turn: written (the RAG corpus's "
                   "written answers: the typical trace) and verbatim (sentences copied from "
                   "the contexts)")
    p.add_argument("--write-docs", action="store_true")
    p.add_argument("--write-constants", action="store_true",
                   help="also set ragpulse.scorer.SAMPLES_PER_S to this run's "
                   "2-core estimates (up's default sampling rate)")
    p.add_argument("--nli", action="append", default=[], metavar="FIELD=VALUE",
                   help="a model-judge setting (NliJudgeSettings), e.g. premise=views; "
                   "not with --write-docs/--write-constants, which describe the defaults")
    args = p.parse_args(argv)
    judges = args.judge
    langs = tuple(x.strip() for x in args.langs.split(",") if x.strip())
    if not langs or not set(langs) <= set(LANGS):
        p.error(f"--langs: some of {', '.join(LANGS)}")
    kinds = tuple(x.strip() for x in args.answers.split(",") if x.strip())
    if not kinds or not set(kinds) <= set(ANSWERS):
        p.error(f"--answers: some of {', '.join(ANSWERS)}")
    if (args.write_docs or args.write_constants) and "written" not in kinds:
        p.error("--write-docs and --write-constants need the written answers (the typical trace)")
    nli_settings(args.nli)  # a bad --nli fails here, before any child starts
    if args.nli and (args.write_docs or args.write_constants):
        p.error("--nli measures a non-default setting: not with --write-docs or --write-constants")
    results = []
    ctx = multiprocessing.get_context("spawn")
    for k in range(args.rounds):
        order = judges if k % 2 == 0 else judges[::-1]
        for answers in kinds:
            for name in order:
                with ctx.Pool(1) as pool:
                    r = pool.apply(_child, (name, args.data, args.samples, langs, args.threads,
                                            args.concurrency, args.nli, answers))
                r["round"] = k
                print(json.dumps(r), file=sys.stderr, flush=True)
                results.append(r)
    argv_s = " ".join(a for a in (argv if argv is not None else sys.argv[1:])
                      if a != "--write-constants")
    body = table(results, f".venv/bin/python bench/judge_speed.py {argv_s}".strip(), langs,
                 args.threads)
    print(body)
    if args.write_docs:
        write_docs(body)
    if args.write_constants:
        print(f"written to {SAMPLING}: {write_constants(results)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
