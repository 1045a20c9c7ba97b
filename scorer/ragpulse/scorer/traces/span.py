"""The light span model the scorer works on, decoupled from protobuf.

A :class:`Span` is what :mod:`.decode` produces from OTLP bytes: ids as lowercase hex, typed
attribute values (``str``, ``bool``, ``int``, ``float``, ``bytes``, ``tuple`` for arrays, ``dict``
for kvlists), events, the resource attributes and the instrumentation scope. Spans are immutable
named tuples, not pydantic models or frozen dataclasses: the decoder builds tens of thousands of
them per second per core, a frozen dataclass ``__init__`` costs about three times as much, and the
wire format was already validated by the protobuf parser. (The attribute dicts are shared and must
be treated as read-only.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, Union

__all__ = [
    "AttrValue",
    "Attributes",
    "Span",
    "SpanEvent",
    "SpanKind",
    "StatusCode",
]

# Union, not "|": the recursive string references must stay resolvable by typing tools
AttrValue = Union[  # noqa: UP007
    str, bool, int, float, bytes, tuple["AttrValue", ...], dict[str, "AttrValue"], None
]
"""An OTLP ``AnyValue``: arrays become tuples, kvlists become dicts, an empty value ``None``."""

Attributes = Mapping[str, AttrValue]

_EMPTY: dict[str, AttrValue] = {}


class SpanKind:
    """OTLP ``Span.SpanKind`` numbers (opentelemetry-proto ``trace.proto``)."""

    UNSPECIFIED = 0
    INTERNAL = 1
    SERVER = 2
    CLIENT = 3
    PRODUCER = 4
    CONSUMER = 5


class StatusCode:
    """OTLP ``Status.StatusCode`` numbers."""

    UNSET = 0
    OK = 1
    ERROR = 2


class SpanEvent(NamedTuple):
    """A span event: a name, a time and attributes (``db.query.result``, ``gen_ai.choice``, ...)."""

    name: str
    time_ns: int
    attributes: Attributes = _EMPTY


class Span(NamedTuple):
    """One finished span of one trace.

    ``resource`` is shared by every span of the same OTLP ``ResourceSpans`` (do not mutate it).
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: int = SpanKind.INTERNAL
    start_ns: int = 0
    end_ns: int = 0
    status_code: int = StatusCode.UNSET
    status_message: str = ""
    attributes: Attributes = _EMPTY
    events: tuple[SpanEvent, ...] = ()
    resource: Attributes = _EMPTY
    scope_name: str = ""
    scope_version: str = ""

    @property
    def is_error(self) -> bool:
        return self.status_code == StatusCode.ERROR

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    @property
    def service_name(self) -> str | None:
        v = self.resource.get("service.name")
        return v if isinstance(v, str) and v else None

    @property
    def environment(self) -> str | None:
        """``deployment.environment.name`` (semconv >= 1.27), else ``deployment.environment``."""
        for key in ("deployment.environment.name", "deployment.environment"):
            v = self.resource.get(key)
            if isinstance(v, str) and v:
                return v
        return None

    def attr(self, key: str) -> AttrValue:
        """The attribute ``key`` of the span, else of its resource, else ``None``."""
        v = self.attributes.get(key)
        if v is None:
            v = self.resource.get(key)
        return v
