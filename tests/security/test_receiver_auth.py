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
from ragpulse.collector.otlp_http import bearer_ok
from ragpulse.collector.service import Collector
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
