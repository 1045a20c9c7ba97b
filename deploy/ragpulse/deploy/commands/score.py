"""``ragpulse score``: batch scoring of JSONL samples, the way teams run ``ragas.evaluate`` today.

Input: one JSON object per line, ``{"id", "question", "contexts": [...], "answer", "reference"?}``;
unknown keys are ignored. Output: one JSON line per input line, in input order:
``{"id", "line", "scores": {metric: {value, status, reason, interval, counts, judge, model,
prompt_version, cost}}, "latency_ms"}`` (values to 4 decimals; ``latency_ms`` is the judge's own
time for the line, the sum of its scores' ``cost.latency_ms``, not the wait behind other
samples), or ``{"line", "id"?, "error"}`` for a line that could not be
read. A score that is not ``ok`` also carries ``explanation`` when the judge said why (an API
error, a timeout). Progress goes to stderr; a summary table follows, then the most frequent
causes of error scores. Exit status 0; 1 when any input line was malformed (every other line is
still scored) or when no score came out ok and some failed (the judge never worked: an
unreachable endpoint, a bad key).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, BinaryIO, TextIO

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ragpulse.deploy.options import env_help
from ragpulse.scorer import (
    DEFAULT_JUDGE,
    DEFAULT_METRICS,
    Criterion,
    Evaluator,
    JudgeChoice,
    Sample,
    SampleResult,
    Score,
    build_judge,
    judge_help,
    resolve_judge,
    resolve_metrics,
)

__all__ = ["read_samples", "score", "score_to_json"]

MAX_LINE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class BadLine:
    """An input line that could not become a :class:`Sample`."""

    line: int
    error: str
    id: str | None = None


def read_samples(stream: BinaryIO) -> Iterator[tuple[int, Sample | BadLine]]:
    """Yield ``(line_number, Sample | BadLine)`` for each non-blank line of a binary stream.
    Streams; never raises for bad input (invalid UTF-8 and JSON become :class:`BadLine`)."""
    for n, raw_bytes in enumerate(stream, start=1):
        if not raw_bytes.strip():
            continue
        if len(raw_bytes) > MAX_LINE_BYTES:
            yield n, BadLine(n, f"line is longer than {MAX_LINE_BYTES} bytes")
            continue
        try:
            raw = raw_bytes.decode("utf-8-sig" if n == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            yield n, BadLine(n, f"invalid UTF-8 at byte {exc.start}")
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            yield n, BadLine(n, f"invalid JSON: {exc.msg} at column {exc.colno}")
            continue
        except RecursionError:  # "[[[[..." thousands deep: one bad line, not a crash
            yield n, BadLine(n, "invalid JSON: nested too deeply")
            continue
        try:
            yield n, _sample(n, obj)
        except RecursionError:  # nested just under json's limit: too deep for the checks
            yield n, BadLine(n, "invalid sample: nested too deeply")


def _sample(n: int, obj: Any) -> Sample | BadLine:
    """One parsed line as a sample, or why it is not one."""
    if not isinstance(obj, dict):
        return BadLine(n, f"expected a JSON object, got {type(obj).__name__}")
    if (where := _lone_surrogate(obj)) is not None:
        sid = obj.get("id")
        ok_id = isinstance(sid, str | int) and _lone_surrogate(sid) is None
        return BadLine(n, f"invalid sample: {where}", str(sid) if ok_id else None)
    try:
        return Sample.model_validate(obj)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'line'}: {e['msg']}" for e in exc.errors()
        )
        sid = obj.get("id")
        return BadLine(n, f"invalid sample: {problems}", str(sid) if sid is not None else None)


DECIMALS = 4
"""Values and intervals are printed to 4 decimals: the judges are not more precise than that,
and ``0.9999999999`` (the ``1e-10`` guard of average precision) reads as a bug."""


def _r(v: float | None, n: int = DECIMALS) -> float | None:
    return None if v is None else round(v, n)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(obj: Any, path: str = "") -> str | None:
    """Where ``obj`` (parsed JSON) holds a lone surrogate, as "field: ..." text, else None.

    JSON may escape one (``"\\ud800"``) and ``json.loads`` keeps it, but it is not a character:
    no UTF-8 encoder (an HTTP client, ClickHouse, a tokenizer) accepts it, so such a line is bad
    input, refused like invalid UTF-8 bytes. A valid pair (``"\\ud83d\\ude00"``) is decoded
    into one character and never seen here."""
    if isinstance(obj, str):
        m = _SURROGATE.search(obj)
        if m is None:
            return None
        return (f"{path or 'line'}: lone surrogate \\u{ord(m.group()):04x} at character "
                f"{m.start()} (not a Unicode character)")
    if isinstance(obj, dict):
        for k, v in obj.items():
            where = _lone_surrogate(k, path or "key") or _lone_surrogate(
                v, f"{path}.{k}" if path else str(k))
            if where is not None:
                return where
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            if (where := _lone_surrogate(v, f"{path}.{i}")) is not None:
                return where
    return None


def score_to_json(score: Score) -> dict[str, Any]:
    """One score as printed by ``ragpulse score``: values rounded to :data:`DECIMALS`, costs to
    what they mean (milliseconds to 0.01, tokens and calls to 4 decimals: shares of a call)."""
    c = score.cost
    return {
        "value": _r(score.value),
        "status": score.status,
        "reason": score.reason,
        "interval": [_r(score.interval.low), _r(score.interval.high)] if score.interval else None,
        "counts": score.counts,
        "judge": score.judge,
        "model": score.model,
        "prompt_version": score.prompt_version,
        "cost": {"llm_calls": _r(c.llm_calls), "prompt_tokens": _r(c.prompt_tokens),
                 "completion_tokens": _r(c.completion_tokens), "latency_ms": _r(c.latency_ms, 2)},
        **({"explanation": score.explanation}
           if score.status != "ok" and score.explanation else {}),
    }


@dataclass
class _Summary:
    values: dict[str, list[float]] = field(default_factory=dict)
    statuses: dict[str, dict[str, int]] = field(default_factory=dict)
    calls: float = 0.0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    samples: int = 0
    bad_lines: int = 0
    errors: dict[str, int] = field(default_factory=dict)  # "reason: explanation" -> scores

    def add(self, result: SampleResult) -> None:
        self.samples += 1
        for s in result.scores:
            self.statuses.setdefault(s.metric, {}).setdefault(s.status, 0)
            self.statuses[s.metric][s.status] += 1
            if s.status == "error":
                key = _error_cause(s)
                if key in self.errors or len(self.errors) < 50:  # a bounded tally
                    self.errors[key] = self.errors.get(key, 0) + 1
            if s.value is not None:
                self.values.setdefault(s.metric, []).append(s.value)
            self.calls += s.cost.llm_calls
            self.prompt_tokens += s.cost.prompt_tokens
            self.completion_tokens += s.cost.completion_tokens

    def table(self) -> Table:
        t = Table(title=f"ragpulse score: {self.samples} samples"
                  + (f", {self.bad_lines} malformed line{'' if self.bad_lines == 1 else 's'}"
                     if self.bad_lines else ""))
        for col in ("metric", "mean", "ok", "null", "error", "skipped"):
            t.add_column(col, justify="left" if col == "metric" else "right")
        for metric, st in self.statuses.items():
            vals = self.values.get(metric, [])
            mean = f"{sum(vals) / len(vals):.3f}" if vals else "-"
            t.add_row(metric, mean, *(str(st.get(k, 0)) for k in ("ok", "null", "error", "skipped")))
        if self.calls:
            t.caption = (f"LLM calls {self.calls:.0f}, prompt tokens {self.prompt_tokens:.0f}, "
                         f"completion tokens {self.completion_tokens:.0f}")
        return t

    def error_lines(self, top: int = 3) -> list[str]:
        """The most frequent causes of error scores, most frequent first."""
        worst = sorted(self.errors.items(), key=lambda kv: -kv[1])
        lines = [f"{n} error score{'' if n == 1 else 's'}: {why}" for why, n in worst[:top]]
        if len(worst) > top:
            lines.append(f"... and {len(worst) - top} other causes")
        return lines

    @property
    def all_failed(self) -> bool:
        """Scores failed and none came out ``ok``: the judge never worked (``null`` scores of
        samples without contexts or an answer do not count as working)."""
        ok = sum(st.get("ok", 0) for st in self.statuses.values())
        return ok == 0 and any(st.get("error", 0) for st in self.statuses.values())


_ERROR_CLASS = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Timeout))\b")
_ERROR_URL = re.compile(r"\((https?://[^)\s]+)\)")


def _error_cause(score: Score) -> str:
    """What an error score's cause is, for the summary's tally: its reason, the exception class
    and the endpoint its explanation names, without the parts that vary per call (attempt
    counts, seconds left, request ids), so one cause is one line."""
    text = score.explanation or ""
    parts = [str(score.reason)]
    if m := _ERROR_CLASS.search(text):
        parts.append(m.group(1))
    if m := _ERROR_URL.search(text):
        parts.append(m.group(1))
    if len(parts) == 1 and text:
        parts.append(text[:120])
    return ": ".join(parts)


def _count_lines(path: Path) -> int | None:
    try:
        with path.open("rb") as f:
            return sum(1 for line in f if line.strip())
    except OSError:
        return None


def _parse_criteria(items: list[str]) -> list[Criterion]:
    out = []
    for item in items:
        name, sep, definition = item.partition("=")
        if not sep or not name.strip() or not definition.strip():
            raise typer.BadParameter(f"--criterion expects NAME=DEFINITION, got {item!r}")
        strictness = 1
        if ":" in name:
            name, _, k = name.partition(":")
            strictness = int(k)
        out.append(Criterion(name.strip(), definition.strip(), strictness))
    return out


async def _run(
    samples: Iterator[tuple[int, Sample | BadLine]],
    evaluator: Evaluator,
    out: TextIO,
    progress: Progress | None,
    task: Any,
    summary: _Summary,
    err: Console,
) -> None:
    """Score with at most ``evaluator.max_concurrency`` samples in flight and write lines in input
    order. The reorder buffer is bounded: reading pauses while the oldest line is still scoring and
    four times the concurrency of later lines wait behind it."""
    sem = asyncio.Semaphore(evaluator.max_concurrency)
    ready: dict[int, str] = {}
    order: deque[int] = deque()
    running: dict[int, asyncio.Task[None]] = {}
    window = 4 * evaluator.max_concurrency

    def flush() -> None:
        while order and order[0] in ready:
            out.write(ready.pop(order.popleft()) + "\n")
        out.flush()

    def done(n: int, line: str) -> None:
        ready[n] = line
        if progress is not None:
            progress.advance(task)

    async def one(n: int, sample: Sample) -> None:
        try:
            result = await evaluator.evaluate(sample)
        finally:
            sem.release()
        summary.add(result)
        done(n, json.dumps({"id": result.sample_id, "line": n,
                            "scores": {s.metric: score_to_json(s) for s in result.scores},
                            # the judge's own time for this sample, not the wait behind others
                            "latency_ms": round(result.cost.latency_ms, 2)}, ensure_ascii=False))

    for n, item in samples:
        while len(order) >= window and order[0] in running:
            await running[order[0]]
            flush()
        order.append(n)
        if isinstance(item, BadLine):
            summary.bad_lines += 1
            err.print(f"[red]line {item.line}[/red]: {escape(str(item.error))}", highlight=False)
            rec: dict[str, Any] = {"line": item.line, "error": item.error}
            if item.id is not None:
                rec["id"] = item.id
            done(n, json.dumps(rec, ensure_ascii=False))
        else:
            await sem.acquire()
            t = asyncio.create_task(one(n, item))
            running[n] = t
            t.add_done_callback(lambda _t, n=n: running.pop(n, None))
        flush()
    if running:
        await asyncio.gather(*running.values())
    flush()


def nli_settings_from_env(threads: int) -> Any:
    """``RAGPULSE_NLI__*`` read as the scorer and ``up`` read them (premise, blend, threads,
    faithfulness_value, ...), or None when none is set; ``--threads`` gives the onnxruntime
    threads unless ``RAGPULSE_NLI__THREADS`` does. Raises ValueError naming a bad variable."""
    import os

    if not any(k.upper().startswith("RAGPULSE_NLI__") for k in os.environ):
        return None
    from pydantic_settings import BaseSettings, SettingsConfigDict

    from ragpulse.scorer.judges.nli import NliJudgeSettings

    class _Env(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="RAGPULSE_", env_nested_delimiter="__",
                                          extra="ignore")
        nli: NliJudgeSettings = NliJudgeSettings()

    try:
        nli = _Env().nli
    except ValidationError as exc:
        raise ValueError("; ".join(f"RAGPULSE_{'__'.join(map(str, e['loc'])).upper()}: {e['msg']}"
                                   for e in exc.errors())) from None
    return nli if "threads" in nli.model_fields_set else nli.model_copy(update={"threads": threads})


def score(
    input: Annotated[Path, typer.Option("--input", "-i", help="JSONL samples: id, question, contexts, answer, reference?",
                                         exists=True, dir_okay=False, readable=True)],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Where to write JSONL scores (default: stdout).")] = None,
    metrics: Annotated[str | None, typer.Option("--metrics", "-m", help="Comma-separated metrics (default: the five reference-free ones). 'aspect_critique' adds all five built-in criteria.")] = None,
    judge: Annotated[JudgeChoice, typer.Option("--judge", help=judge_help() + " docs/judges.md.")] = JudgeChoice(DEFAULT_JUDGE),
    model: Annotated[str | None, typer.Option("--model", help="LLM judge model name.")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help=env_help("OpenAI-compatible base URL (default: the variable, else OpenAI).", "OPENAI_BASE_URL"))] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=256, help="Samples in flight at once.")] = 8,
    votes: Annotated[int, typer.Option("--votes", min=1, max=15, help="LLM self-consistency: votes per verdict.")] = 1,
    tokens_per_hour: Annotated[int | None, typer.Option("--tokens-per-hour", min=1, help="LLM token budget per hour; over it, scores are skipped with reason budget_exhausted.")] = None,
    criterion: Annotated[list[str], typer.Option("--criterion", help="User-defined aspect critique NAME[:STRICTNESS]=DEFINITION (repeatable).")] = [],
    request_timeout: Annotated[float | None, typer.Option("--request-timeout", min=0.1, help="LLM judge: total seconds for one request, however the server answers (default 60).")] = None,
    deadline: Annotated[float | None, typer.Option("--deadline", min=0.1, help="LLM judge: seconds a sample's judge work may take in all; then what is missing is null with judge_timeout (default 180).")] = None,
    threads: Annotated[int, typer.Option("--threads", min=1, max=64, help="Local judge: BLAS threads for the embedding model.")] = 2,
    model_dir: Annotated[Path | None, typer.Option("--model-dir", envvar="RAGPULSE_NLI__MODEL_DIR", file_okay=False, help="NLI judge: directory with model.onnx, tokenizer.json, config.json.")] = None,
    positive_label: Annotated[str | None, typer.Option("--positive-label", envvar="RAGPULSE_NLI__POSITIVE_LABEL", help="NLI judge: the label (name or index) meaning 'supported' (default: detected, e.g. entailment).")] = None,
    batch_size: Annotated[int | None, typer.Option("--batch-size", min=1, max=1024, envvar="RAGPULSE_NLI__BATCH_SIZE", help="NLI judge: pairs per forward pass (default 8).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Score every line of --input and write one JSON line of scores per input line."""
    err = Console(stderr=True)
    custom = _parse_criteria(criterion)
    names = [m for m in metrics.split(",")] if metrics else list(DEFAULT_METRICS)
    names += [f"aspect_critique:{c.name}" for c in custom if f"aspect_critique:{c.name}" not in names]
    try:
        resolved = resolve_metrics(names, custom_criteria=custom)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--metrics") from exc
    try:
        j = build_judge(judge, model=model, base_url=base_url, votes=votes,
                        tokens_per_hour=tokens_per_hour, threads=threads, max_concurrency=concurrency,
                        request_timeout_s=request_timeout, deadline_s=deadline,
                        nli=nli_settings_from_env(threads) if resolve_judge(judge) in ("nli", "model") else None,
                        model_dir=model_dir, positive_label=positive_label, batch_size=batch_size)
    except ValueError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from exc
    evaluator = Evaluator(j, resolved, max_concurrency=concurrency)
    total = _count_lines(input)
    summary = _Summary()
    out_f: TextIO = output.open("w", encoding="utf-8") if output else sys.stdout
    try:
        with input.open("rb") as in_f:
            if quiet:
                asyncio.run(_main(read_samples(in_f), evaluator, out_f, None, None, summary, err, j))
            else:
                with Progress(TextColumn("[bold]scoring"), BarColumn(), MofNCompleteColumn(),
                              TimeElapsedColumn(), console=err, transient=False) as progress:
                    task = progress.add_task("score", total=total)
                    asyncio.run(_main(read_samples(in_f), evaluator, out_f, progress, task,
                                      summary, err, j))
    finally:
        if output:
            out_f.close()
    if not quiet:
        err.print(summary.table())
    for line in summary.error_lines():
        err.print(f"[red]{escape(line)}[/red]", highlight=False)
    if summary.all_failed:
        counts = {k: sum(st.get(k, 0) for st in summary.statuses.values()) for k in ("error", "null")}
        err.print(f"[red]error:[/red] no score came out ok ({counts['error']} error, "
                  f"{counts['null']} null): the judge failed on every sample it could score "
                  "(see above)")
        raise typer.Exit(1)
    if summary.bad_lines:
        raise typer.Exit(1)


async def _main(samples, evaluator, out_f, progress, task, summary, err, judge) -> None:
    try:
        await _run(samples, evaluator, out_f, progress, task, summary, err)
    finally:
        await judge.aclose()
