"""Millions of tiny list items in a few KB of gzip, against the real receivers (issue 38, item 2).

A list item is two bytes on the wire (an empty string in an array: ``0A 00``; an empty event:
``5A 00``; an empty attribute: ``4A 00``) and gzip packs two million of them into 4 KB. Before,
the receiver decoded them all (upb, ~50 bytes an item), the exporter's list-item drop listed
them in Python (~400 bytes and ~8 µs an item) and the in-flight budget had reserved only the
4 KB: a 4 KB request cost ``up`` +770 MiB of RSS and 17 s, and 64 MiB of body (32 million items)
could cost gigabytes. Now (``ragpulse.collector.items``) a request over ``otlp.max_items`` is
refused before anything is decoded (413 / RESOURCE_EXHAUSTED without RetryInfo, counted
``requests_too_many_items``); under it, a record with more than ``shrink.MAX_LIST_ITEMS``
droppable items is rejected without listing them; and the decompressed body is reserved in the
budget as it is inflated.
"""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import grpc
import pytest
from google.protobuf import json_format
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ragpulse.collector.items import count_items, count_json_containers
from ragpulse.collector.service import Collector
from ragpulse.collector.shrink import MAX_LIST_ITEMS, shrink_request

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
MiB = 1 << 20


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _frame(tag: int, payload: bytes) -> bytes:
    return bytes((tag,)) + _varint(len(payload)) + payload


def _span_head(trace_id: bytes) -> bytes:
    """A valid RAG span's fields up to its attributes: ids, name, times, the RETRIEVER kind."""
    now = time.time_ns()
    kind = _frame(0x0A, b"openinference.span.kind") + _frame(0x12, _frame(0x0A, b"RETRIEVER"))
    return (_frame(0x0A, trace_id) + _frame(0x12, os.urandom(8)) + _frame(0x2A, b"retrieve")
            + b"\x39" + now.to_bytes(8, "little") + b"\x41" + (now + 1).to_bytes(8, "little")
            + _frame(0x4A, kind))


def attack(shape: str, items: int, trace_id: bytes | None = None) -> bytes:
    """One request holding one RAG span with ``items`` two-byte list items of ``shape``: empty
    strings in one array attribute, empty span events, or empty attributes."""
    span = _span_head(trace_id or os.urandom(16))
    if shape == "array":
        values = _frame(0x2A, b"\x0a\x00" * items)  # AnyValue.array_value of empty strings
        span += _frame(0x4A, _frame(0x0A, b"retrieval.documents") + _frame(0x12, values))
    elif shape == "events":
        span += b"\x5a\x00" * items
    else:
        span += b"\x4a\x00" * items
    return _frame(0x0A, _frame(0x12, _frame(0x12, span)))


def as_json(body: bytes) -> bytes:
    """The same request as OTLP/JSON (hex ids)."""
    doc = json_format.MessageToDict(ExportTraceServiceRequest.FromString(body))
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId"):
                    span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(doc, separators=(",", ":")).encode()


@contextmanager
def peak_growth() -> Iterator[list[int]]:
    """The growth of this process's peak RSS over the block, in bytes (``[value]``, filled at
    the end). The collector runs in this process; the peak is reset first (clear_refs 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status("VmRSS")
    out: list[int] = []
    yield out
    out.append(_status("VmHWM") - before)


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(field)


def _post(collector: Collector, body: bytes, content_type: str,
          gzipped: bool = True) -> tuple[int, bytes]:
    url = urlsplit(collector.http_endpoint or "")
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
    try:
        headers = {"Content-Type": content_type}
        if gzipped:
            headers["Content-Encoding"] = "gzip"
        conn.request("POST", "/v1/traces", body=gzip.compress(body, 9) if gzipped else body,
                     headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _grpc_export(collector: Collector, body: bytes) -> tuple[grpc.StatusCode, str, bytes, bool]:
    """(status, details, response, whether a RetryInfo came) of a gzip-compressed Export."""
    with grpc.insecure_channel(collector.grpc_endpoint or "") as channel:
        call = channel.unary_unary(EXPORT)
        try:
            response, rpc = call.with_call(body, timeout=120, compression=grpc.Compression.Gzip)
            return rpc.code(), "", response, False
        except grpc.RpcError as exc:
            trailers = dict(exc.trailing_metadata() or ())  # type: ignore[attr-defined]
            rich = trailers.get("grpc-status-details-bin")
            retry = bool(rich) and any(d.type_url.endswith("RetryInfo")
                                       for d in status_pb2.Status.FromString(rich).details)
            return exc.code(), exc.details(), b"", retry  # type: ignore[attr-defined]


@pytest.mark.parametrize("shape", ["array", "events", "attributes"])
@pytest.mark.parametrize("transport", ["http-protobuf", "http-json", "grpc"])
def test_millions_of_tiny_items_in_a_small_gzip_body_are_refused_before_decoding(
        make_collector: Callable[..., Collector], shape: str, transport: str) -> None:
    """4 million two-byte items (8 MB, ~8 KB of gzip) cost +1.5 GB and 27 s before; now a 413 /
    RESOURCE_EXHAUSTED (not retryable) before anything is decoded, counted, with the
    decompressed body the largest thing held (a generous bound: 4 bytes per body byte)."""
    collector = make_collector()
    body = attack(shape, 4_000_000 if transport != "http-json" else 400_000)
    if transport == "http-json":
        body = as_json(body)
    with peak_growth() as growth:
        if transport == "grpc":
            code, details, _, retry = _grpc_export(collector, body)
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and not retry
            assert "otlp.max_items" in details
        else:
            content_type = "application/json" if transport == "http-json" else "application/x-protobuf"
            status, answer = _post(collector, body, content_type)
            assert status == 413
            message = (json.loads(answer)["message"] if transport == "http-json"
                       else status_pb2.Status.FromString(answer).message)
            assert "otlp.max_items" in message
    assert growth[0] < 4 * len(body) + 16 * MiB, growth[0]
    stats = collector.stats()
    assert stats["requests_too_many_items"] == 1
    assert stats["spans_received"] == 0 and stats["traces_exported"] == 0


def test_a_request_under_the_bound_with_too_many_droppable_items_is_rejected_unlisted(
        make_collector: Callable[..., Collector]) -> None:
    """900,000 array items (1.8 MB, under max_items) in one trace over the Kafka record limit:
    before, the list-item drop listed every item (~360 MB, ~8 s) to keep the first half; now a
    record with more than MAX_LIST_ITEMS droppable items is rejected (partial success) after
    counting them (a generous bound: 40 bytes per body byte, upb's decoded copy included)."""
    collector = make_collector()
    body = attack("array", 900_000)
    with peak_growth() as growth:
        status, answer = _post(collector, body, "application/x-protobuf")
    assert status == 200
    partial = ExportTraceServiceResponse.FromString(answer).partial_success
    assert partial.rejected_spans == 1 and "record limit" in partial.error_message
    assert growth[0] < 40 * len(body), growth[0]
    stats = collector.stats()
    assert stats["records_rejected"] == 1 and stats["list_items_dropped"] == 0


def test_the_decompressed_body_is_reserved_as_it_is_inflated(
        make_collector: Callable[..., Collector]) -> None:
    """A body held in progress (its declared 1 MiB reserved) and a 9 KB gzip body that inflates
    to 8 MiB, with a 4 MiB budget: before, only the 9 KB was checked against the budget and the
    8 MiB were added after the fact (200); now the inflation stops at the budget: 429 with
    Retry-After, counted, and the connection is left usable."""
    collector = make_collector(otlp={"max_body_bytes": MiB, "max_inflight_bytes": 4 * MiB,
                                     "max_decompressed_bytes": 16 * MiB})
    url = urlsplit(collector.http_endpoint or "")
    body = attack("events", 4 * MiB)  # 8 MiB of empty events: stopped before they are counted
    with socket.create_connection((url.hostname, url.port), timeout=30) as held:
        held.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf"
                     b"\r\nContent-Length: 1048576\r\n\r\nab")
        deadline = time.monotonic() + 10
        while collector.stats()["http_inflight_bytes"] < MiB and time.monotonic() < deadline:
            time.sleep(0.02)
        assert collector.stats()["http_inflight_bytes"] == MiB
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        try:
            conn.request("POST", "/v1/traces", body=gzip.compress(body, 9), headers={
                "Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"})
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 429 and resp.getheader("Retry-After") == "2"
            # The same connection serves the next request.
            conn.request("POST", "/v1/traces", body=attack("events", 10),
                         headers={"Content-Type": "application/x-protobuf"})
            again = conn.getresponse()
            again.read()
            assert again.status == 200
        finally:
            conn.close()
    stats = collector.stats()
    assert stats["http_refused_busy"] == 1 and stats["spans_received"] == 1


def test_the_item_count_stops_at_its_bound() -> None:
    """Refusing costs at most ``limit`` steps of the walk, whatever the body holds; a request
    laid out as SDKs write it counts one item per attribute (it is not walked field by field)."""
    for shape in ("array", "events", "attributes"):
        assert count_items(attack(shape, 3_000_000), 100_000) == 100_001
    one = attack("array", 5)
    # resource spans, scope spans, span; its ids, name and times; the kind attribute (one
    # item); the array attribute, its key and value; the array; 5 items
    assert count_items(one, 10**9) == 1 + 1 + 1 + 5 + 1 + 1 + 2 + 1 + 5
    assert count_json_containers(b'{"a":[{},{"s":"{[{[not counted"}],"b":"\\"{"}') == 4


def test_a_record_with_too_many_list_items_is_not_listed() -> None:
    """The drop path counts droppable items before listing them: over MAX_LIST_ITEMS the record
    is rejected (None); at it, the first items that fit are kept."""
    over = attack("events", MAX_LIST_ITEMS + 1)
    assert shrink_request(over, len(over) // 2).value is None
    at = attack("events", MAX_LIST_ITEMS)
    kept = shrink_request(at, len(at) // 2)
    assert kept.value is not None and 0 < kept.items_dropped <= MAX_LIST_ITEMS


def test_json_errors_are_still_answered_as_before(make_collector: Callable[..., Collector]) -> None:
    """A small malformed JSON body is not counted as too many items (the count is skipped when
    the body cannot hold that many): 400 as before."""
    collector = make_collector()
    status, answer = _post(collector, b'{"resourceSpans": [{"scopeSpans": 5}]}', "application/json",
                           gzipped=False)
    assert status == 400
    assert json.loads(answer)["code"] == code_pb2.INVALID_ARGUMENT
    assert collector.stats()["requests_too_many_items"] == 0
