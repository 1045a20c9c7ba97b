"""The receive stage shared by OTLP/HTTP and OTLP/gRPC: validate, split per trace, filter, export.

Both receivers hand raw request bytes to :class:`Ingest`; it never sees HTTP or gRPC. Errors are
classified here: :class:`~ragpulse.collector.split.MalformedRequest` is permanent (400 /
INVALID_ARGUMENT), :class:`~ragpulse.collector.exporter.ExportRefused` is retryable (429/503 /
RESOURCE_EXHAUSTED/UNAVAILABLE), spans refused individually come back as a partial success.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragpulse.collector.config import FilterSettings
from ragpulse.collector.exporter import ExportRefused, ExportResult, TraceExporter
from ragpulse.collector.items import count_items, count_json_containers, may_exceed
from ragpulse.collector.refusals import TooManyItems
from ragpulse.collector.split import MalformedRequest, TraceRecord, split_request

__all__ = ["DEFAULT_MAX_ITEMS", "Ingest", "otlp_json_to_proto"]

DEFAULT_MAX_ITEMS = 1_000_000
"""``otlp.max_items``'s default: items one request may hold (:mod:`.items`)."""

# OTLP/JSON costs ~200 bytes and ~10 µs per object or array once json.loads and json_format
# have built it (a protobuf item: ~50 bytes in upb): a JSON body may hold this share of max_items.
_JSON_SHARE = 4


class _RecentTraces:
    """Trace ids recently seen with a RAG span, in two generations. Thread-safe.

    Ids go into the current generation, a dict filled by one C-level ``update`` per request;
    once it holds ``capacity`` ids it becomes the previous generation and the one before is
    dropped. So the last ``capacity`` RAG trace ids are always remembered and at most about
    twice as many are held. (An ``OrderedDict`` LRU, ``move_to_end`` per id, cost 7.2 µs a
    request of 20 RAG traces; this 1.5.)"""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._current: dict[bytes, None] = {}
        self._previous: dict[bytes, None] = {}
        self._lock = threading.Lock()

    def remember_and_match(self, rag: list[bytes], others: list[bytes]) -> set[bytes]:
        """Record ``rag`` ids; return those of ``others`` that were seen with a RAG span."""
        if self._capacity == 0:
            return set()
        with self._lock:
            current = self._current
            current.update(dict.fromkeys(rag))
            if len(current) >= self._capacity:
                self._previous, self._current = current, {}
            if not others:
                return set()
            current, previous = self._current, self._previous
            return {key for key in others if key in current or key in previous}

    def __contains__(self, key: bytes) -> bool:
        with self._lock:
            return key in self._current or key in self._previous

    def __len__(self) -> int:
        return len(self._current) + len(self._previous)


class Ingest:
    """Validates a request, splits it per trace, keeps RAG traces and exports them.

    ``consume_proto``/``consume_json`` are thread-safe, block on CPU and on ``exporter.export``,
    and raise ``MalformedRequest`` (permanent), ``TooManyItems`` (permanent: more than
    ``max_items`` items, found before decoding) or ``ExportRefused`` (retryable, whole request).
    One OTLP/JSON body is converted at a time (its Python objects are the costly part, and
    under the GIL two conversions would interleave, not run in parallel).
    """

    def __init__(self, filter_settings: FilterSettings, exporter: TraceExporter, *,
                 max_items: int = DEFAULT_MAX_ITEMS, max_span_age_days: int = 0) -> None:
        self._max_items = max_items
        self._max_age_ns = max_span_age_days * 86_400 * 10**9 or None
        self._json_lock = threading.Lock()
        self._keep_all = filter_settings.mode == "all"
        self._recent = _RecentTraces(filter_settings.remember_traces)
        self._exporter = exporter
        # An exporter that builds its records from the request's layout (per-partition records)
        # gets records without a message per trace (split_request(..., assemble=False)).
        self._exporter_assembles = bool(getattr(exporter, "assembles", False))
        self._lock = threading.Lock()
        self._stats = {
            "requests_received": 0,
            "requests_malformed": 0,
            "requests_too_many_items": 0,
            "requests_refused": 0,
            "spans_received": 0,
            "spans_accepted": 0,
            "spans_rejected": 0,
            "spans_rejected_retention": 0,
            "spans_refused": 0,
            "spans_dropped_non_rag": 0,
            "traces_dropped_non_rag": 0,
            "traces_exported": 0,
            "bytes_received": 0,
        }

    def _count(self, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                self._stats[name] += delta

    def _too_many(self, limit: int, what: str, received: int) -> TooManyItems:
        self._count(requests_received=1, requests_too_many_items=1, bytes_received=received)
        return TooManyItems(f"request holds more than {limit} {what} (spans, attributes, events, "
                            "links, list values; otlp.max_items): send smaller batches")

    def consume_json(self, body: bytes) -> ExportResult:
        """OTLP/JSON body → :meth:`consume_proto`; its objects and arrays are counted first."""
        limit = self._max_items // _JSON_SHARE
        if may_exceed(len(body), limit):
            if count_json_containers(body) > limit:
                raise self._too_many(limit, "JSON objects and arrays", len(body))
        try:
            with self._json_lock:
                proto = otlp_json_to_proto(body)
        except MalformedRequest:
            self._count(requests_received=1, requests_malformed=1, bytes_received=len(body))
            raise
        return self.consume_proto(proto, _validated=True, _wire_bytes=len(body))

    def consume_proto(self, body: bytes, *, _validated: bool = False, _wire_bytes: int | None = None) -> ExportResult:
        """Serialized ``ExportTraceServiceRequest`` → per-trace records → exporter."""
        received = len(body) if _wire_bytes is None else _wire_bytes
        try:
            if not _validated and may_exceed(len(body), self._max_items):
                if count_items(body, self._max_items) > self._max_items:
                    raise self._too_many(self._max_items, "items", received)
            if not _validated:
                # upb parses and validates the whole message in C (wire format, UTF-8 strings);
                # the byte-level split below then only walks frames known to be well formed.
                ExportTraceServiceRequest.FromString(body)
            split = split_request(body, keep_all=self._keep_all, max_age_ns=self._max_age_ns,
                                  assemble=not self._exporter_assembles)
        except (DecodeError, MalformedRequest, ValueError, IndexError) as exc:
            # ValueError/IndexError: framing the item count could not follow (truncated, overrun)
            self._count(requests_received=1, requests_malformed=1, bytes_received=received)
            raise MalformedRequest(f"invalid ExportTraceServiceRequest: {exc}") from exc

        keep: list[TraceRecord]
        dropped: list[TraceRecord] = []
        if self._keep_all:
            keep = split.records
        elif all([r.rag for r in split.records]):  # the usual request: every trace is kept
            keep = split.records
            self._recent.remember_and_match([r.key for r in keep], [])
        else:
            rag_ids = [bytes(r.key) for r in split.records if r.rag]
            others = [r for r in split.records if not r.rag]
            late = self._recent.remember_and_match(rag_ids, [r.key for r in others])
            keep = [r for r in split.records if r.rag or r.key in late]
            dropped = [r for r in others if r.key not in late]
        dropped_spans = sum(r.spans for r in dropped)
        kept_spans = sum(r.spans for r in keep)
        try:
            result = self._exporter.export(keep) if keep else ExportResult(accepted_spans=0)
        except ExportRefused:
            self._count(
                requests_received=1,
                requests_refused=1,
                bytes_received=received,
                spans_received=split.spans_total,
                spans_refused=kept_spans,
                spans_dropped_non_rag=dropped_spans,
                traces_dropped_non_rag=len(dropped),
            )
            raise
        rejected = split.spans_invalid + result.rejected_spans
        self._count(
            requests_received=1,
            bytes_received=received,
            spans_received=split.spans_total,
            spans_accepted=result.accepted_spans,
            spans_rejected=rejected,
            spans_rejected_retention=split.invalid.get("retention", 0),
            spans_dropped_non_rag=dropped_spans,
            traces_dropped_non_rag=len(dropped),
            traces_exported=result.accepted_records,
        )
        message = "; ".join(m for m in (split.invalid_message, result.message) if m)
        return ExportResult(
            accepted_spans=result.accepted_spans,
            rejected_spans=rejected,
            message=message,
            accepted_records=result.accepted_records,
        )

    def stats(self) -> dict[str, int]:
        """A snapshot of the ingest counters (``telemetry.COUNTERS``). Thread-safe."""
        with self._lock:
            out = dict(self._stats)
        out["recent_rag_traces"] = len(self._recent)
        return out


# OTLP/JSON ------------------------------------------------------------------------------------
# https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding : the proto3 JSON mapping,
# except that trace and span ids are hex strings (not base64) and enums are integers only.

_ID_FIELDS = {"traceId", "trace_id", "spanId", "span_id", "parentSpanId", "parent_span_id"}


def _hex_to_b64(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise MalformedRequest(f"{field} must be a hex string")
    try:
        return base64.b64encode(bytes.fromhex(value)).decode("ascii")
    except ValueError as exc:
        raise MalformedRequest(f"{field} is not hex: {value[:40]!r}") from exc


def _fix_ids(obj: dict[str, Any]) -> None:
    for key in _ID_FIELDS.intersection(obj):
        obj[key] = _hex_to_b64(obj[key], key)


def otlp_json_to_proto(body: bytes) -> bytes:
    """Convert an OTLP/JSON trace request to serialized protobuf. Raises MalformedRequest.

    Unknown fields are ignored, as the OTLP spec requires of receivers.
    """
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedRequest(f"invalid JSON: {exc}") from exc
    except RecursionError:
        # json's C scanner recurses per level; OTLP needs a few dozen at most.
        raise MalformedRequest("invalid JSON: nested too deeply") from None
    if not isinstance(doc, dict):
        raise MalformedRequest("JSON body must be an object")
    try:
        for rs in _list(doc, "resourceSpans", "resource_spans"):
            for ss in _list(rs, "scopeSpans", "scope_spans"):
                for span in _list(ss, "spans"):
                    _fix_ids(span)
                    for link in _list(span, "links"):
                        _fix_ids(link)
        message = json_format.ParseDict(doc, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except MalformedRequest:
        raise
    except (json_format.ParseError, TypeError, ValueError, AttributeError, binascii.Error) as exc:
        raise MalformedRequest(f"invalid OTLP/JSON: {exc}") from exc
    except RecursionError:  # AnyValue arrays/kvlists nested beyond the interpreter's stack
        raise MalformedRequest("invalid OTLP/JSON: values nested too deeply") from None
    return message.SerializeToString()


def _list(obj: Any, *names: str) -> list[Any]:
    if not isinstance(obj, dict):
        raise MalformedRequest("expected a JSON object")
    for name in names:
        if name in obj:
            value = obj[name]
            if value is None:
                return []
            if not isinstance(value, list):
                raise MalformedRequest(f"{name} must be an array")
            return [v for v in value if isinstance(v, dict) or _bad(name)]
    return []


def _bad(name: str) -> bool:
    raise MalformedRequest(f"{name} items must be objects")
