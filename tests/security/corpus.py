"""A corpus of hostile and broken OTLP input, each entry with the outcome it must get.

Two kinds of entries:

* :data:`WIRE` — bodies a receiver must refuse as a whole (malformed protobuf/JSON, wrong content
  type, gzip bomb, over the size limit, invalid UTF-8): the expected HTTP status and gRPC code.
* :func:`trace_cases` — decodable but hostile traces (ten thousand attributes, a thousand
  contexts, a one-megabyte context, attributes of unexpected types, duplicate spans, spans whose
  parent never arrives, clock skew, no question, no answer): the collector must accept them and
  the scorer path (decode → extract → evaluate) must give each one a clear outcome: scores, or a
  stated reason.

Everything is built from the OTLP protobuf classes, deterministically (fixed ids and times).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from testkit.traffic import BASE_NS, anyvalue

QUESTION = "How long is the warranty on the X200 vacuum?"
CONTEXTS = ("The X200 vacuum has a two-year warranty covering parts and labour.",
            "Shipping within Japan takes one to three days.")
ANSWER = "The X200 has a two-year warranty covering parts and labour."

# Body-size limits the wire tests configure on the collector (small, so the cases stay small).
MAX_BODY = 2 * 1024 * 1024
MAX_DECOMPRESSED = 8 * 1024 * 1024


def trace_id(name: str) -> str:
    return hashlib.blake2b(name.encode(), digest_size=16).hexdigest()


def _sid(tid: str, name: str) -> bytes:
    return hashlib.blake2b(f"{tid}/{name}".encode(), digest_size=8).digest()


def _span(tid: str, name: str, parent: str | None, start: int, end: int,
          attrs: list[tuple[str, object]]) -> trace_pb2.Span:
    return trace_pb2.Span(
        trace_id=bytes.fromhex(tid), span_id=_sid(tid, name),
        parent_span_id=_sid(tid, parent) if parent else b"", name=name,
        kind=trace_pb2.Span.SPAN_KIND_INTERNAL, start_time_unix_nano=start,
        end_time_unix_nano=end,
        attributes=[common_pb2.KeyValue(key=k, value=anyvalue(v)) for k, v in attrs])


def rag_spans(tid: str, *, question: object = QUESTION, contexts: object = CONTEXTS,
              answer: object = ANSWER, start: int = BASE_NS, end_skew_ns: int = 0,
              extra_llm_attrs: list[tuple[str, object]] | None = None,
              with_root: bool = True) -> list[trace_pb2.Span]:
    """An OpenInference RAG trace (CHAIN root, RETRIEVER, LLM). ``question``/``answer``/
    ``contexts`` may be any attribute value (or None: attribute absent)."""
    root_attrs: list[tuple[str, object]] = [("openinference.span.kind", "CHAIN")]
    if question is not None:
        root_attrs.append(("input.value", question))
    if answer is not None:
        root_attrs.append(("output.value", answer))
    ret_attrs: list[tuple[str, object]] = [("openinference.span.kind", "RETRIEVER")]
    if isinstance(contexts, (list, tuple)):
        for i, c in enumerate(contexts):
            ret_attrs.append((f"retrieval.documents.{i}.document.content", c))
    elif contexts is not None:
        ret_attrs.append(("retrieval.documents", contexts))
    llm_attrs: list[tuple[str, object]] = [("openinference.span.kind", "LLM"),
                                           ("llm.model_name", "gpt-4o-mini")]
    if extra_llm_attrs:
        llm_attrs.extend(extra_llm_attrs)
    spans = [
        _span(tid, "retrieve", "root", start + 10_000_000, start + 200_000_000, ret_attrs),
        _span(tid, "llm", "root", start + 210_000_000, start + 890_000_000 + end_skew_ns, llm_attrs),
    ]
    if with_root:
        spans.append(_span(tid, "root", None, start, start + 900_000_000 + end_skew_ns, root_attrs))
    return spans


def request(*groups: list[trace_pb2.Span], service: str = "corpus-app") -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.append(common_pb2.KeyValue(key="service.name", value=anyvalue(service)))
    ss = rs.scope_spans.add()
    ss.scope.name = "openinference.instrumentation.langchain"
    for g in groups:
        ss.spans.extend(g)
    return req


def good_request(i: int) -> tuple[str, ExportTraceServiceRequest]:
    """The i-th well-formed trace sent between hostile ones (its trace id and request)."""
    tid = trace_id(f"good-{i}")
    return tid, request(rag_spans(tid, start=BASE_NS + i * 1_000_000_000))


# -- decodable, hostile traces ----------------------------------------------------------------


@dataclass(frozen=True)
class TraceCase:
    """A hostile but decodable trace and what the scorer path must make of it.

    ``outcome`` is ``"scored"`` (every metric has a value or a stated null reason) or the
    extraction reason (``no_question``, ``no_answer``, ...) that makes the trace unscorable.
    ``decoder`` names counters of :class:`~ragpulse.scorer.traces.SpanDecoder` that must grow.
    ``rejected``: the collector refuses every span (partial success naming this field), so
    nothing of the trace reaches Kafka; the scorer path is still checked on its own.
    """

    name: str
    build: Callable[[str], ExportTraceServiceRequest]
    outcome: str
    decoder: tuple[str, ...] = ()
    note: str = ""
    rejected: str = ""
    spans_sent: Callable[[ExportTraceServiceRequest], int] = field(
        default=lambda r: sum(len(ss.spans) for rs in r.resource_spans for ss in rs.scope_spans))


def _ten_thousand_attributes(tid: str) -> ExportTraceServiceRequest:
    junk = [(f"junk.attr.{i:05d}", i) for i in range(10_000)]
    return request(rag_spans(tid, extra_llm_attrs=junk))


def _thousand_contexts(tid: str) -> ExportTraceServiceRequest:
    contexts = [CONTEXTS[0]] + [f"Unrelated document number {i} about gardening." for i in range(999)]
    return request(rag_spans(tid, contexts=contexts))


def _megabyte_context(tid: str) -> ExportTraceServiceRequest:
    big = ("The X200 vacuum has a two-year warranty. " * 30_000)[: 1024 * 1024]
    return request(rag_spans(tid, contexts=[big, CONTEXTS[1]]))


def _unexpected_types(tid: str) -> ExportTraceServiceRequest:
    # question an int, answer an array, contexts a kvlist of bytes: nothing is a string
    return request(rag_spans(tid, question=42, answer=[1.5, True, b"\xff\xfe"],
                             contexts={"a": b"\x00\x01", "b": 7}))


def _nested_values(tid: str) -> ExportTraceServiceRequest:
    deep: object = "bottom"
    for _ in range(24):  # deeper than the decoder keeps (8), within what protobuf itself parses
        deep = [deep]
    return request(rag_spans(tid, extra_llm_attrs=[("deep", deep), ("huge.array", list(range(10_000)))]))


def _duplicate_spans(tid: str) -> ExportTraceServiceRequest:
    spans = rag_spans(tid)
    return request(spans, spans)


def _orphan(tid: str) -> ExportTraceServiceRequest:
    # the root never arrives: retriever and LLM point at a parent nobody sends; the LLM span's
    # messages still carry the question and the answer
    messages = [("llm.input_messages.0.message.role", "user"),
                ("llm.input_messages.0.message.content", QUESTION),
                ("llm.output_messages.0.message.role", "assistant"),
                ("llm.output_messages.0.message.content", ANSWER)]
    return request(rag_spans(tid, with_root=False, extra_llm_attrs=messages))


def _clock_skew(tid: str) -> ExportTraceServiceRequest:
    # ends before it starts
    return request(rag_spans(tid, end_skew_ns=-2_000_000_000))


def _year_2100(tid: str) -> ExportTraceServiceRequest:
    return request(rag_spans(tid, start=4_102_444_800_000_000_000, end_skew_ns=-2_000_000_000))


def _epoch_zero(tid: str) -> ExportTraceServiceRequest:
    return request(rag_spans(tid, start=0))


def _no_question(tid: str) -> ExportTraceServiceRequest:
    return request(rag_spans(tid, question=None))


def _no_answer(tid: str) -> ExportTraceServiceRequest:
    return request(rag_spans(tid, answer=None))


def _empty_strings(tid: str) -> ExportTraceServiceRequest:
    return request(rag_spans(tid, question="", answer="   ", contexts=["", " "]))


def _control_chars(tid: str) -> ExportTraceServiceRequest:
    weird = "\x00\x1b[31mred\x1b[0m \u202eevil\u202c \ufeff \U0001f600 \ud7ff"
    return request(rag_spans(tid, question=QUESTION + weird, answer=ANSWER + weird))


TRACE_CASES: tuple[TraceCase, ...] = (
    TraceCase("ten_thousand_attributes", _ten_thousand_attributes, "scored",
              ("attributes_dropped",), "attributes beyond the per-span cap are dropped, counted"),
    TraceCase("thousand_contexts", _thousand_contexts, "scored",
              note="contexts beyond extraction.max_contexts (64) are not judged"),
    TraceCase("megabyte_context", _megabyte_context, "scored", ("values_truncated",),
              "string values are cut at 256 Ki characters, counted"),
    TraceCase("unexpected_types", _unexpected_types, "no_question",
              note="non-string question/answer/contexts are not text: unscorable, with a reason"),
    TraceCase("deep_and_huge_values", _nested_values, "scored", ("values_dropped",),
              "nesting beyond max_depth becomes None, counted"),
    TraceCase("duplicate_spans", _duplicate_spans, "scored",
              note="the same spans twice: one sample"),
    TraceCase("orphan_spans", _orphan, "scored",
              note="spans whose parent never arrives still make a sample"),
    TraceCase("clock_skew", _clock_skew, "scored", note="end before start"),
    TraceCase("year_2100", _year_2100, "scored", note="starts in 2100, ends before it starts",
              rejected="start_time_unix_nano"),
    TraceCase("epoch_zero", _epoch_zero, "scored", note="timestamps at 1970-01-01",
              rejected="start_time_unix_nano"),
    TraceCase("no_question", _no_question, "no_question"),
    TraceCase("no_answer", _no_answer, "no_answer"),
    TraceCase("empty_strings", _empty_strings, "no_question"),
    TraceCase("control_characters", _control_chars, "scored",
              note="NUL, ANSI escapes, bidi overrides, BOM survive as data"),
)


# -- bodies refused as a whole --------------------------------------------------------------------


@dataclass(frozen=True)
class WireCase:
    """A body the receivers must refuse, with the HTTP status / gRPC code it gets.

    ``grpc`` is False for cases that only exist on HTTP (content types, gzip, JSON)."""

    name: str
    body: bytes
    http_status: int
    content_type: str = "application/x-protobuf"
    headers: dict[str, str] = field(default_factory=dict)
    grpc_code: str | None = None  # grpc.StatusCode name


def _invalid_utf8_protobuf() -> bytes:
    # a span name of invalid UTF-8: proto3 string fields must be valid UTF-8
    tid = trace_id("bad-utf8")
    raw = request(rag_spans(tid)).SerializeToString()
    return raw.replace(b"retrieve", b"retr\xff\xfeve", 1)


def _json_body(obj: object) -> bytes:
    return json.dumps(obj).encode()


WIRE: tuple[WireCase, ...] = (
    WireCase("malformed_protobuf", b"\x0a\xff\xff\xff\x0fgarbage", 400, grpc_code="INVALID_ARGUMENT"),
    WireCase("truncated_protobuf", good_request(0)[1].SerializeToString()[:-7], 400,
             grpc_code="INVALID_ARGUMENT"),
    WireCase("malformed_json", b'{"resourceSpans": [', 400, "application/json"),
    WireCase("json_wrong_shape", _json_body({"resourceSpans": {"not": "a list"}}), 400,
             "application/json"),
    WireCase("invalid_utf8_json", b'{"resourceSpans": [{"resource": "\xff\xfe"}]}', 400,
             "application/json"),
    WireCase("wrong_content_type", b"hello", 415, "text/plain"),
    WireCase("unknown_encoding", b"x", 415, headers={"Content-Encoding": "br"}),
    WireCase("gzip_bomb", gzip.compress(b"\x00" * (64 * 1024 * 1024)), 413,
             headers={"Content-Encoding": "gzip"}),
    WireCase("bad_gzip", b"not gzip at all", 400, headers={"Content-Encoding": "gzip"}),
    WireCase("body_over_limit", b"\x00" * (MAX_BODY + 1), 413, grpc_code="RESOURCE_EXHAUSTED"),
    WireCase("invalid_utf8_protobuf", _invalid_utf8_protobuf(), 400, grpc_code="INVALID_ARGUMENT"),
)
