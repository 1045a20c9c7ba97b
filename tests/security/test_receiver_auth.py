"""Optional bearer-token authentication on the OTLP receivers (``otlp.auth_token``): requests
without the token, or with a wrong one, are refused (401 / UNAUTHENTICATED) before their body is
read and counted; the real OpenTelemetry SDK exporters, configured with the header, get through."""

from __future__ import annotations

import http.client
from collections.abc import Callable
from urllib.parse import urlsplit

import grpc
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from ragpulse.collector.config import OtlpSettings
from ragpulse.collector.service import Collector
from ragpulse.common import bearer_ok
from tests.collector.conftest import read_records
from tests.security.corpus import good_request

TOKEN = "otlp-t0ken-Kd8"
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _post(collector: Collector, body: bytes, auth: str | None) -> tuple[int, dict[str, str]]:
    url = urlsplit(collector.http_endpoint or "")
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    headers = {"Content-Type": "application/x-protobuf"}
    if auth is not None:
        headers["Authorization"] = auth
    try:
        conn.request("POST", "/v1/traces", body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()


def test_bearer_check() -> None:
    assert bearer_ok(f"Bearer {TOKEN}", TOKEN) and bearer_ok(f"bearer  {TOKEN} ", TOKEN)
    for bad in (None, "", TOKEN, f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer ", "Bearer"):
        assert not bearer_ok(bad, TOKEN)


def test_the_token_is_a_secret_and_off_by_default() -> None:
    assert OtlpSettings().auth_token is None
    s = OtlpSettings(auth_token=TOKEN)
    assert TOKEN not in repr(s) and TOKEN not in s.model_dump_json()


def test_http_and_grpc_refuse_without_the_token(make_collector: Callable[..., Collector]) -> None:
    collector = make_collector(otlp={"auth_token": TOKEN})
    sent = []
    for i, auth in enumerate([None, "Bearer wrong", TOKEN, f"Basic {TOKEN}"]):
        status, headers = _post(collector, good_request(500 + i)[1].SerializeToString(), auth)
        assert status == 401 and headers["www-authenticate"].startswith("Bearer")
    tid, req = good_request(600)
    assert _post(collector, req.SerializeToString(), f"Bearer {TOKEN}")[0] == 200
    sent.append(tid)
    with grpc.insecure_channel(collector.grpc_endpoint or "") as channel:
        call = channel.unary_unary(EXPORT)
        for md in ([], [("authorization", "Bearer wrong")]):
            try:
                call(good_request(700)[1].SerializeToString(), metadata=md, timeout=10)
                code = grpc.StatusCode.OK
            except grpc.RpcError as exc:
                code = exc.code()
            assert code == grpc.StatusCode.UNAUTHENTICATED
        tid, req = good_request(601)
        call(req.SerializeToString(), metadata=[("authorization", f"Bearer {TOKEN}")], timeout=10)
        sent.append(tid)
    st = collector.stats()
    assert st["http_unauthenticated"] == 4 and st["grpc_unauthenticated"] == 2
    assert st["requests_received"] == 2  # refused bodies were never read
    keys = {r.key.decode() for r in read_records(collector.settings.kafka, expected=2)}
    assert keys == set(sent)


def test_sdk_exporters_with_the_header_get_through(make_collector: Callable[..., Collector]) -> None:
    collector = make_collector(otlp={"auth_token": TOKEN}, filter={"mode": "all"})
    auth = {"authorization": f"Bearer {TOKEN}"}
    for exporter in (
        HttpSpanExporter(endpoint=collector.http_endpoint, headers=auth, timeout=10),
        GrpcSpanExporter(endpoint=collector.grpc_endpoint, insecure=True, headers=auth, timeout=10),
    ):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        with provider.get_tracer("t").start_as_current_span("hello"):
            pass
        provider.shutdown()
    st = collector.stats()
    assert st["http_unauthenticated"] == 0 and st["grpc_unauthenticated"] == 0, st
    assert len(read_records(collector.settings.kafka, expected=2)) == 2, st


def _silent_calls(channel: grpc.Channel, n: int, metadata: list[tuple[str, str]]) -> list:
    """``n`` Export streams that send their metadata and never a message (a stream-unary call
    fed by an iterator that blocks), as an attacker holds calls open."""
    import threading

    never = threading.Event()

    def blocked():
        never.wait()
        yield b""  # pragma: no cover

    call = channel.stream_unary(EXPORT)
    return [call.future(blocked(), metadata=metadata, timeout=120) for _ in range(n)]


def test_grpc_calls_without_the_token_take_no_slot(make_collector: Callable[..., Collector]) -> None:
    """The token was checked after the message was read, and an admission slot was taken
    before: 16 streams without the token that never sent a message held every slot, and the
    clients that had the token got RESOURCE_EXHAUSTED for as long as they stayed open."""
    collector = make_collector(otlp={"auth_token": TOKEN, "grpc_workers": 2,
                                     "max_concurrent_requests": 4})
    with grpc.insecure_channel(collector.grpc_endpoint or "") as attacker, \
            grpc.insecure_channel(collector.grpc_endpoint or "") as client:
        held = _silent_calls(attacker, 16, [])
        for f in held:  # refused at once, before a message
            with_code = f.exception(timeout=30)
            assert with_code is not None and with_code.code() == grpc.StatusCode.UNAUTHENTICATED
        tid, req = good_request(801)
        client.unary_unary(EXPORT)(req.SerializeToString(),
                                   metadata=[("authorization", f"Bearer {TOKEN}")], timeout=10)
    assert collector.stats()["grpc_unauthenticated"] == 16
    assert {r.key.decode() for r in read_records(collector.settings.kafka, expected=1)} == {tid}


def test_a_grpc_call_that_never_sends_its_message_is_cut(make_collector: Callable[..., Collector]) -> None:
    """With the token (or on loopback without one), a call that never sends its message is
    cancelled after the time an HTTP body of the largest size gets, and its slot comes back."""
    collector = make_collector(otlp={"grpc_workers": 1, "max_concurrent_requests": 2,
                                     "body_timeout_s": 1.0, "max_body_bytes": 64 * 1024,
                                     "body_min_bytes_per_s": 64 * 1024})  # 2 s to send it
    with grpc.insecure_channel(collector.grpc_endpoint or "") as slow, \
            grpc.insecure_channel(collector.grpc_endpoint or "") as client:
        held = _silent_calls(slow, 2, [])
        for f in held:
            err = f.exception(timeout=60)
            assert err is not None and err.code() == grpc.StatusCode.CANCELLED, err
        tid, req = good_request(802)
        client.unary_unary(EXPORT)(req.SerializeToString(), timeout=10)
    assert {r.key.decode() for r in read_records(collector.settings.kafka, expected=1)} == {tid}
