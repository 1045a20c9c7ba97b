"""``build_scorer``: a :class:`~.service.Scorer` wired from :class:`~.settings.ScorerSettings`
with the real parts (judge, evaluator, ClickHouse writer, extractor, sampler, redactor,
``pipeline_health`` recorder). Tests and ``ragpulse up`` pass their own judge or writer.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from typing import Any

from ..evaluator import Evaluator
from ..judges.base import Judge
from .service import RowSink, Scorer
from .settings import ScorerSettings

__all__ = ["build_scorer", "freeze_startup_heap"]

log = logging.getLogger(__name__)


def build_scorer(
    settings: ScorerSettings | None = None,
    *,
    judge: Judge | None = None,
    evaluator: Evaluator | None = None,
    writer: RowSink | None = None,
    client: Any = None,
    clock: Callable[[], float] = time.monotonic,
) -> Scorer:
    """A ready-to-``start()`` :class:`Scorer`.

    * ``evaluator`` or ``judge``: given ones are used as they are and not closed by the scorer;
      otherwise the judge named by ``settings.judge`` is built (and closed on shutdown, on the
      scorer's event loop).
    * ``writer``: a :class:`RowSink` the caller owns and starts; otherwise a
      ``ScoreWriter`` over ``client`` (or a client opened from ``settings.clickhouse``) is built,
      started with the scorer and shut down after it, once the scorer's last rows are written.
    * The schema is created or migrated first when ``settings.init_schema`` (idempotent).
    * With a ClickHouse client (given or opened), the scorer's counters go to ``pipeline_health``
      every ``settings.pipeline_health_interval_s``: the process's one writer of the scorer's
      rows (``ragpulse.scorer.store.PipelineHealthRecorder``), started and stopped with the
      scorer.

    Raises ``ValueError``/``ScorerError`` with a user-facing message for bad options, and the
    store's errors when ClickHouse cannot be opened.
    """
    from ..privacy import build_redactor
    from ..traces.sampling import Sampler
    from .prepare import build_preparer
    from .segments import SegmentReader

    settings = settings or ScorerSettings()
    on_close: list[Callable[[], None]] = []
    owns_judge = False
    if evaluator is None:
        if judge is None:
            from ..judges.factory import build_judge

            judge = build_judge(
                settings.judge,
                model=settings.judge_model,
                base_url=settings.judge_base_url,
                max_concurrency=settings.evaluate.max_concurrency,
                nli=settings.nli,
            )
            owns_judge = True
        evaluator = Evaluator(
            judge,
            list(settings.evaluate.metrics),
            max_concurrency=settings.evaluate.max_concurrency,
        )
    if writer is None:
        if client is None:
            client = _open_client(settings.clickhouse)
        writer = _started_score_writer(settings, client, on_close)
    preparer = build_preparer(
        Sampler(settings.sampling),
        settings.extraction,
        excerpts=settings.write.excerpts and settings.privacy.store_text,
        redactor=build_redactor(settings.privacy) if settings.privacy.redact else None,
        segments=SegmentReader(settings.write.segment_attributes,
                               max_values=settings.write.max_segment_values,
                               max_chars=settings.write.max_segment_chars),
    )
    scorer = Scorer(
        settings,
        evaluator=evaluator,
        writer=writer,
        preparer=preparer,
        clock=clock,
        on_close=on_close,
        owns_judge=owns_judge,
    )
    if client is not None and settings.pipeline_health_interval_s > 0:
        scorer.health = _pipeline_health_recorder(scorer, settings, client)
    return scorer


def _started_score_writer(
    settings: ScorerSettings, client: Any, on_close: list[Callable[[], None]]
) -> RowSink:
    """The schema created or migrated (with ``settings.init_schema``), then a started
    ``ScoreWriter`` over ``client``, shut down by the scorer's ``on_close``. Blocks while the
    schema is applied; raises the store's errors."""
    from ragpulse.common.schema import SchemaSettings, init_schema

    from ..store.writer import build_score_writer, scores_ttl_days

    if settings.init_schema:
        report = init_schema(client, SchemaSettings(database=settings.database))
        for line in report.lines():
            log.info("schema: %s", line)
    # The table's own TTL (db init --ttl-days), so rows it deletes on insert are counted.
    try:
        ttl_days = scores_ttl_days(client, settings.database)
    except Exception as exc:  # e.g. no right to read system.tables: count nothing, run on
        log.warning("schema: cannot read the TTL of %s.scores: %s", settings.database, exc)
        ttl_days = None
    if ttl_days is None:
        log.warning("schema: no ragpulse TTL found on %s.scores; rows it may delete on insert "
                    "are not counted (rows_expired)", settings.database)
    score_writer = build_score_writer(client, settings.database, settings.writer,
                                      ttl_days=ttl_days)
    score_writer.start()
    # Stop upstream first: the scorer has drained into the writer before this runs.
    on_close.insert(0, lambda: score_writer.shutdown(settings.drain_timeout_s))
    return score_writer


def _pipeline_health_recorder(scorer: Scorer, settings: ScorerSettings, client: Any) -> Any:
    """The one writer of this scorer's ``pipeline_health`` rows: every declared counter and
    gauge and the labelled counters, into ``client``'s store."""
    from ..store.pipeline_health import PipelineHealthRecorder

    return PipelineHealthRecorder(
        "scorer",
        scorer.stats,
        lambda: client,
        settings.database,
        labelled=scorer.labelled_counters,
        interval_s=settings.pipeline_health_interval_s,
        instance=settings.instance,
    )


def _open_client(dsn: str) -> Any:
    """A clickhouse-connect client for ``chdb:///path`` or ``http(s)://host:port``."""
    from ..store import open_store

    return open_store(dsn)


def freeze_startup_heap() -> None:
    """Move every object alive now out of the garbage collector's reach (``gc.freeze``).

    For a long-running service process, called once after start-up: the libraries the scorer
    imports (clickhouse-connect pulls in pandas, the judge its model) leave many long-lived
    objects that every full collection would walk again (cost: docs/benchmarks.md, scorer
    overhead). Objects frozen here are still freed by reference counting; only reference cycles among them
    are never collected, which start-up state does not produce in quantity. Not for libraries
    or tests that start many scorers in one process: it is a process-wide decision.
    """
    gc.collect()
    gc.freeze()
