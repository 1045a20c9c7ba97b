"""Decode Kafka record values (OTLP ``ExportTraceServiceRequest`` protobuf) into :class:`Span`.

Every producer on the topic writes the same message, with a different grouping:

* otelcol-contrib's kafka exporter with ``partition_traces_by_id: true`` and this project's
  collector: one trace per record, key = the trace id as 32 lowercase hex characters;
* otelcol without partitioning, and rotel: one exporter batch per record, many traces, no key.

So the decoder never trusts the key: it returns the spans of every trace in the record and the
caller regroups them (:func:`group_by_trace`). ``ExportTraceServiceRequest`` and ``TracesData``
share one wire format (field 1 = ``resource_spans``), so either parses the same bytes.

Speed: the upb messages are walked directly (no ``json_format``, which builds a dict per
message first).

Robustness: proto3 ``string`` fields must be valid UTF-8 and upb rejects a whole message if one
is not. Instrumentations do emit broken text (truncated multi-byte characters from a naive
length cap are common), and dropping a whole batch of traces for one bad character would be
wrong, so a record that fails the strict parse is parsed again against a copy of the OTLP schema
whose ``string`` fields are ``bytes``, and every text is decoded with replacement characters
(counted). Only bytes that fail both parses raise :class:`DecodeError` (a permanent error: the
record belongs on the dead-letter topic).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError as _ProtobufDecodeError
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
from pydantic import BaseModel, ConfigDict, Field

from .span import AttrValue, Span, SpanEvent

__all__ = ["DecodeError", "DecodeLimits", "SpanDecoder", "group_by_trace"]

_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)
_TRUNCATION_MARK = "…"


class DecodeError(ValueError):
    """A record that cannot be decoded. Permanent: retrying the same bytes gives the same error.

    ``reason`` is a stable, machine-readable string for the dead-letter record's header
    (``malformed_protobuf``, ``record_too_large``, ``no_valid_spans``); ``detail`` is for humans.
    """

    permanent = True

    MALFORMED = "malformed_protobuf"
    TOO_LARGE = "record_too_large"
    NO_VALID_SPANS = "no_valid_spans"

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class DecodeLimits(BaseModel):
    """Caps that keep one hostile or buggy span from costing unbounded memory or CPU.

    Everything cut is counted in :meth:`SpanDecoder.stats`, never silently lost.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_record_bytes: int = Field(64 * 1024 * 1024, ge=1, description="larger records are refused")
    max_attributes: int = Field(
        512, ge=1, description="per span, event or resource; the rest dropped"
    )
    max_events: int = Field(256, ge=0, description="per span; the rest dropped")
    max_value_chars: int = Field(
        256 * 1024, ge=16, description="string values (characters) and bytes values are cut here"
    )
    max_array_items: int = Field(4096, ge=1, description="array/kvlist items kept per value")
    max_depth: int = Field(
        8, ge=1, description="array/kvlist nesting kept; deeper values become None"
    )


def _bytes_schema_classes() -> tuple[type[Any], Any]:
    """``TracesData`` from a private descriptor pool whose ``string`` fields are ``bytes``."""
    pool = descriptor_pool.DescriptorPool()

    def bytesify(msg: descriptor_pb2.DescriptorProto) -> None:
        for f in msg.field:
            if f.type == descriptor_pb2.FieldDescriptorProto.TYPE_STRING:
                f.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
        for nested in msg.nested_type:
            bytesify(nested)

    for module in (common_pb2, resource_pb2, trace_pb2):
        fdp = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(fdp)
        for msg in fdp.message_type:
            bytesify(msg)
        pool.Add(fdp)
    desc = pool.FindMessageTypeByName("opentelemetry.proto.trace.v1.TracesData")
    return message_factory.GetMessageClass(desc), pool


_LenientTracesData, _LENIENT_POOL = _bytes_schema_classes()


class SpanDecoder:
    """Turns record values into spans, counting what it had to cut or refuse.

    Not thread-safe (plain counters): use one decoder per consumer thread, or hold a lock.
    :meth:`decode` never blocks on I/O; it raises only :class:`DecodeError`.
    """

    def __init__(self, limits: DecodeLimits | None = None) -> None:
        self.limits = limits or DecodeLimits()
        self._records_decoded = 0
        self._records_failed = 0
        self._records_lenient = 0
        self._spans_decoded = 0
        self._spans_invalid = 0
        self._attributes_dropped = 0
        self._events_dropped = 0
        self._values_truncated = 0
        self._values_dropped = 0
        self._invalid_utf8_values = 0

    def stats(self) -> dict[str, int]:
        """Self-telemetry counters since construction (monotonic)."""
        return {
            "records_decoded": self._records_decoded,
            "records_failed": self._records_failed,
            "records_lenient": self._records_lenient,
            "spans_decoded": self._spans_decoded,
            "spans_invalid": self._spans_invalid,
            "attributes_dropped": self._attributes_dropped,
            "events_dropped": self._events_dropped,
            "values_truncated": self._values_truncated,
            "values_dropped": self._values_dropped,
            "invalid_utf8_values": self._invalid_utf8_values,
        }

    def decode(self, value: bytes | bytearray | memoryview | None) -> list[Span]:
        """All valid spans in one record value, in wire order.

        An empty or ``None`` value (a tombstone, or an export with no spans) gives ``[]``. Spans
        with a trace id that is not 16 non-zero bytes or a span id that is not 8 bytes are
        skipped and counted (``spans_invalid``); if a record has spans but none is valid, that
        is a :class:`DecodeError` (``no_valid_spans``) so the record is dead-lettered, not lost.
        """
        if not value:
            self._records_decoded += 1
            return []
        if len(value) > self.limits.max_record_bytes:
            self._records_failed += 1
            raise DecodeError(
                DecodeError.TOO_LARGE, f"{len(value)} bytes > {self.limits.max_record_bytes}"
            )
        data = bytes(value)
        msg = trace_pb2.TracesData()
        try:
            msg.ParseFromString(data)
            lenient = False
        except _ProtobufDecodeError:
            msg = _LenientTracesData()
            try:
                msg.ParseFromString(data)
            except _ProtobufDecodeError as exc:
                self._records_failed += 1
                raise DecodeError(
                    DecodeError.MALFORMED, str(exc) or "not an OTLP TracesData"
                ) from None
            lenient = True
            self._records_lenient += 1
        invalid_before = self._spans_invalid
        if lenient:
            spans = self._walk(msg, self._lenient_name, self._lenient_text)
        else:
            spans = self._walk(msg, str, self._strict_text)
        if not spans and self._spans_invalid > invalid_before:
            self._records_failed += 1
            raise DecodeError(
                DecodeError.NO_VALID_SPANS,
                f"{self._spans_invalid - invalid_before} spans, none with valid trace/span ids",
            )
        self._records_decoded += 1
        self._spans_decoded += len(spans)
        return spans

    # -- walking upb messages ------------------------------------------------------------------

    def _strict_text(self, s: str) -> str:
        if len(s) > self.limits.max_value_chars:
            self._values_truncated += 1
            return s[: self.limits.max_value_chars] + _TRUNCATION_MARK
        return s

    def _lenient_name(self, b: bytes) -> str:
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            self._invalid_utf8_values += 1
            return b.decode("utf-8", "replace")

    def _lenient_text(self, b: bytes) -> str:
        if len(b) > self.limits.max_value_chars * 4:  # cut before decoding a huge value
            b = b[: self.limits.max_value_chars * 4]
        return self._strict_text(self._lenient_name(b))

    def _walk(self, msg: Any, name: Callable[[Any], str], text: Callable[[Any], str]) -> list[Span]:
        """``name`` converts keys and names (never cut: the record size bounds them); ``text``
        converts string values (cut at ``max_value_chars``). In the strict parse (``name`` is
        ``str``) keys and names already are ``str`` and are used as they are."""
        out: list[Span] = []
        append = out.append
        max_events = self.limits.max_events
        max_chars = self.limits.max_value_chars
        strict = name is str
        attrs = self._attrs
        for rs in msg.resource_spans:
            resource = attrs(rs.resource.attributes, name, text) if rs.HasField("resource") else {}
            for ss in rs.scope_spans:
                scope = ss.scope
                scope_name = scope.name if strict else name(scope.name)
                scope_version = scope.version if strict else name(scope.version)
                for s in ss.spans:
                    tid = s.trace_id
                    sid = s.span_id
                    if len(tid) != 16 or tid == _ZERO_TRACE or len(sid) != 8 or sid == _ZERO_SPAN:
                        self._spans_invalid += 1
                        continue
                    pid = s.parent_span_id
                    evs = s.events
                    if evs:
                        if len(evs) > max_events:
                            self._events_dropped += len(evs) - max_events
                            evs = evs[:max_events]
                        events = tuple(
                            [
                                SpanEvent(
                                    name(e.name), e.time_unix_nano, attrs(e.attributes, name, text)
                                )
                                for e in evs
                            ]
                        )
                    else:
                        events = ()
                    status = s.status
                    message = status.message
                    if not strict or len(message) > max_chars:
                        message = text(message)
                    # positional: the field order of Span (fastest NamedTuple construction)
                    append(
                        Span(
                            tid.hex(),
                            sid.hex(),
                            pid.hex() if len(pid) == 8 and pid != _ZERO_SPAN else None,
                            s.name if strict else name(s.name),
                            s.kind,
                            s.start_time_unix_nano,
                            s.end_time_unix_nano,
                            status.code,
                            message,
                            attrs(s.attributes, name, text),
                            events,
                            resource,
                            scope_name,
                            scope_version,
                        )
                    )
        return out

    def _attrs(
        self, kvs: Any, name: Callable[[Any], str], text: Callable[[Any], str]
    ) -> dict[str, AttrValue]:
        n = len(kvs)
        if not n:
            return {}
        if n > self.limits.max_attributes:
            self._attributes_dropped += n - self.limits.max_attributes
            kvs = kvs[: self.limits.max_attributes]
        max_chars = self.limits.max_value_chars
        out: dict[str, AttrValue] = {}
        if name is not str:  # the lenient parse: keys and values are bytes
            for kv in kvs:
                out[name(kv.key)] = self._value(kv.value, name, text, 0)
            return out
        # The strict loop is inlined: it runs for every attribute of every span. Most values are
        # non-empty strings; reading string_value first (it is "" when another member is set)
        # saves the WhichOneof call for them.
        for kv in kvs:
            v = kv.value
            sv = v.string_value
            if sv:
                out[kv.key] = sv if len(sv) <= max_chars else text(sv)
                continue
            which = v.WhichOneof("value")
            if which == "int_value":
                out[kv.key] = v.int_value
            elif which == "double_value":
                out[kv.key] = v.double_value
            elif which == "bool_value":
                out[kv.key] = v.bool_value
            elif which == "string_value":
                out[kv.key] = sv  # the empty string
            else:
                out[kv.key] = self._value(v, name, text, 0)
        return out

    def _value(
        self, v: Any, name: Callable[[Any], str], text: Callable[[Any], str], depth: int
    ) -> AttrValue:
        which = v.WhichOneof("value")
        if which == "string_value":
            return text(v.string_value)
        if which == "int_value":
            return v.int_value
        if which == "double_value":
            return v.double_value
        if which == "bool_value":
            return v.bool_value
        if which is None:
            return None
        if which == "bytes_value":
            b = v.bytes_value
            if len(b) > self.limits.max_value_chars:
                self._values_truncated += 1
                return b[: self.limits.max_value_chars]
            return b
        if depth >= self.limits.max_depth:
            self._values_dropped += 1
            return None
        items = v.array_value.values if which == "array_value" else v.kvlist_value.values
        if len(items) > self.limits.max_array_items:
            self._values_truncated += 1
            items = items[: self.limits.max_array_items]
        if which == "array_value":
            return tuple([self._value(x, name, text, depth + 1) for x in items])
        return {name(kv.key): self._value(kv.value, name, text, depth + 1) for kv in items}


def group_by_trace(spans: Iterable[Span]) -> dict[str, list[Span]]:
    """Spans regrouped by trace id, first-seen order of traces and of spans kept."""
    out: dict[str, list[Span]] = {}
    for s in spans:
        lst = out.get(s.trace_id)
        if lst is None:
            out[s.trace_id] = [s]
        else:
            lst.append(s)
    return out
