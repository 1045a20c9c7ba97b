"""ragpulse.common: contracts and building blocks every ragpulse component shares.

It imports nothing else from ragpulse but :mod:`ragpulse.instrument` (for the attribute names),
so the collector, the scorer, the dashboards and deploy can all depend on it without depending
on each other. Its source tree is ``common/``.

* the span attribute names ragpulse defines (feedback, versions), re-exported from
  :mod:`ragpulse.instrument`, which owns them because it runs in apps without this package.
* :mod:`.conventions` — the instrumentation conventions ragpulse reads, each declared once
  (:data:`CONVENTIONS`): the collector's RAG filter (:data:`RAG_MARKERS`), the extractor's
  detection and simple readers, the content advice and the docs' table derive from it.
* :mod:`.telemetry` — every counter and gauge the collector, the scorer and the facade report
  about themselves, declared once (:data:`SELF_METRICS`): ``/metrics``, OTLP metrics,
  ``pipeline_health`` rows, the dashboards' health queries and the docs' table derive from it.
* :mod:`.kafka` — the Kafka wire contract: :class:`KafkaSettings` (connection and topic),
  :func:`ensure_topic`, and the trace-id partitioner otelcol-contrib's kafka exporter uses
  (:func:`partition_for_key`).
* :mod:`.http` — HTTP/1.1 server hardening shared by the OTLP/HTTP receiver and the
  ClickHouse-HTTP facade: a connection-capped threading server that evicts idle and slow clients,
  read deadlines, one bounded body decoder (``Content-Length`` and chunked) and one bounded
  decompressor (gzip, deflate: :func:`inflate_bounded`).
* :mod:`.schema` — a package of its own (``ragpulse.common.schema``): the ClickHouse tables,
  migrations and null-row reasons the scorer writes and the dashboards read.
* :func:`env_list` — a list setting's environment value, comma-separated or a JSON list.
* :func:`lazy_exports` — PEP 562 lazy attributes, so a package can list its public surface in
  ``__all__`` without importing heavy modules until they are used.

Import from this package, not from its modules.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from ragpulse.instrument import (
    FEEDBACK_COMMENT,
    FEEDBACK_EVENT,
    FEEDBACK_LABEL,
    FEEDBACK_SCORE,
    PROMPT_VERSION,
    RETRIEVER_VERSION,
)

from .conventions import (
    CONVENTIONS,
    RAG_MARKERS,
    Convention,
    Read,
    SpanKind,
    convention_matrix,
    conventions_in,
)
from .http import (
    BodyError,
    BodyTooLarge,
    ConnectionLimits,
    GuardedHTTPServer,
    GuardedRequestHandler,
    MalformedBody,
    bearer_ok,
    browser_refusal,
    inflate_bounded,
    is_loopback,
    names_this_machine,
    origin_allowed,
    read_body,
    read_chunked,
    serve_in_thread,
)
from .kafka import (
    KafkaSettings,
    KafkaUnavailable,
    TopicError,
    ensure_topic,
    partition_for_key,
    partitions_for_keys,
)
from .telemetry import SELF_METRICS, SelfMetric, self_metric, self_metrics, self_metrics_table

__all__ = [
    "CONVENTIONS",
    "FEEDBACK_COMMENT",
    "FEEDBACK_EVENT",
    "FEEDBACK_LABEL",
    "FEEDBACK_SCORE",
    "PROMPT_VERSION",
    "RAG_MARKERS",
    "RETRIEVER_VERSION",
    "SELF_METRICS",
    "BodyError",
    "BodyTooLarge",
    "ConnectionLimits",
    "Convention",
    "GuardedHTTPServer",
    "GuardedRequestHandler",
    "KafkaSettings",
    "KafkaUnavailable",
    "MalformedBody",
    "Read",
    "SelfMetric",
    "SpanKind",
    "TopicError",
    "bearer_ok",
    "browser_refusal",
    "convention_matrix",
    "conventions_in",
    "ensure_topic",
    "env_list",
    "inflate_bounded",
    "is_loopback",
    "lazy_exports",
    "names_this_machine",
    "origin_allowed",
    "partition_for_key",
    "partitions_for_keys",
    "read_body",
    "read_chunked",
    "self_metric",
    "self_metrics",
    "self_metrics_table",
    "serve_in_thread",
]


def env_list(value: object) -> object:
    """A list setting as the environment gives it (``a,b`` or a JSON list ``["a", "b"]``),
    split into its stripped, non-empty items; any other value is returned as it is (a
    ``pydantic`` ``mode="before"`` validator of a ``NoDecode`` field)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        return json.loads(text)
    return [item.strip() for item in text.split(",") if item.strip()]


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for ``package``: attribute ``name`` is imported from
    the submodule ``where[name]`` (relative, e.g. ``".service"``) on first access and cached in
    the package's namespace. Unknown names raise ``AttributeError`` as usual. Thread-safe as
    far as the import system is (a module is imported once)."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(importlib.import_module(package), name, value)
        return value

    return __getattr__
