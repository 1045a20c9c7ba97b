"""Health endpoints, Prometheus text and OTLP metrics of ``ragpulse.deploy`` on real servers.

Kafka readiness runs against the real tansu broker (then killed); ClickHouse readiness against
the real ClickHouse-HTTP facade over chDB; the OTLP export against a loopback HTTP server that
decodes the protobuf requests like an OTLP receiver does.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ragpulse.common import KafkaSettings
from ragpulse.deploy.health import (
    HealthServer,
    HealthSettings,
    ObservabilitySettings,
    ProbeError,
    clickhouse_probe,
    kafka_probe,
    start_observability,
)
from ragpulse.deploy.telemetry import (
    METRICS,
    OtlpMetricsExporter,
    StatsSource,
    TelemetrySettings,
    render_prometheus,
    undeclared,
)

from . import promtext

FAST = HealthSettings(enabled=True, port=0, check_timeout_s=2.0, check_interval_s=0.0)


def get(url: str) -> tuple[int, bytes, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("Content-Type", "")


def test_start_then_shutdown_twice_and_shutdown_without_start() -> None:
    HealthServer(FAST).shutdown()
    server = HealthServer(FAST).start()
    url = server.endpoint
    assert url is not None and get(url + "/healthz")[0] == 200
    server.shutdown()
    server.shutdown()
    with pytest.raises(OSError):
        urllib.request.urlopen(url + "/healthz", timeout=2)
    with pytest.raises(RuntimeError):
        server.start()


def test_liveness_and_draining() -> None:
    failure: list[str] = []

    def live() -> None:
        if failure:
            raise RuntimeError(failure[0])

    server = HealthServer(FAST, live=live).start()
    try:
        code, body, ctype = get(server.endpoint + "/healthz")
        assert (code, json.loads(body)) == (200, {"status": "live"}) and ctype == "application/json"
        assert get(server.endpoint + "/readyz")[0] == 200  # no checks: ready
        assert get(server.endpoint + "/nope")[0] == 404
        failure.append("scorer stopped: boom")
        code, body, _ = get(server.endpoint + "/healthz")
        assert code == 503 and "boom" in json.loads(body)["detail"]
        assert get(server.endpoint + "/readyz")[0] == 503
        failure.clear()
        server.drain()
        code, body, _ = get(server.endpoint + "/readyz")
        assert (code, json.loads(body)["status"]) == (503, "draining")
        assert get(server.endpoint + "/healthz")[0] == 200  # draining is alive: no restart
    finally:
        server.shutdown()


def test_readyz_follows_the_kafka_broker(kafka_broker: Any) -> None:
    probe = kafka_probe(KafkaSettings(bootstrap_servers=kafka_broker.bootstrap), timeout_s=2.0)
    server = HealthServer(FAST, ready={"kafka": probe}).start()
    try:
        code, body, _ = get(server.endpoint + "/readyz")
        assert code == 200, body
        assert json.loads(body) == {
            "status": "ready",
            "checks": {"kafka": {"ok": True, "detail": "ok"}},
        }
        kafka_broker.shutdown()  # SIGKILL: the broker is gone
        code, body, _ = get(server.endpoint + "/readyz")
        doc = json.loads(body)
        assert code == 503 and doc["status"] == "unready"
        assert (
            doc["checks"]["kafka"]["ok"] is False
            and "no Kafka broker answered" in doc["checks"]["kafka"]["detail"]
        )
        assert get(server.endpoint + "/healthz")[0] == 200  # a dependency outage is not death
    finally:
        server.shutdown()


def test_kafka_probe_refuses_a_non_kafka_listener() -> None:
    # An HTTP server is not a broker: the probe must not take any answer for readiness.
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        port = server.server_address[1]
        with pytest.raises(ProbeError):
            kafka_probe(KafkaSettings(bootstrap_servers=f"127.0.0.1:{port}"), timeout_s=2.0)()
    finally:
        server.shutdown()
        server.server_close()


def test_slow_checks_time_out_and_are_cached() -> None:
    release = threading.Event()
    calls: list[int] = []

    def hang() -> None:
        calls.append(1)
        release.wait(10)

    settings = HealthSettings(enabled=True, port=0, check_timeout_s=0.2, check_interval_s=60.0)
    server = HealthServer(settings, ready={"slow": hang}).start()
    try:
        code, body, _ = get(server.endpoint + "/readyz")
        assert (
            code == 503 and "no answer within 0.2s" in json.loads(body)["checks"]["slow"]["detail"]
        )
        get(server.endpoint + "/readyz")  # cached for check_interval_s: no second probe
        assert len(calls) == 1
    finally:
        release.set()
        server.shutdown()


def test_clickhouse_probe_against_the_http_facade(chdb_dir: Any) -> None:
    from pydantic import SecretStr

    from ragpulse.deploy.facade import FacadeSettings, build_facade

    facade = build_facade(
        str(chdb_dir),
        FacadeSettings(username="ragpulse", password=SecretStr("s3cret"), advertise=False),
    )
    facade.start()
    try:
        host_port = facade.url.removeprefix("http://")
        clickhouse_probe(f"http://ragpulse:s3cret@{host_port}")()  # answers SELECT 1
        with pytest.raises(ProbeError, match="HTTP 4"):
            clickhouse_probe(f"http://ragpulse:wrong@{host_port}")()
    finally:
        facade.shutdown()
    with pytest.raises(OSError):
        clickhouse_probe(f"http://{host_port}", timeout_s=1.0)()
    assert clickhouse_probe("chdb:///tmp/x") is None  # in-process: nothing to probe


def test_metrics_endpoint_parses_and_carries_the_collector_counters() -> None:
    from ragpulse.collector.config import CollectorSettings
    from ragpulse.collector.service import build_collector

    collector = build_collector(CollectorSettings())  # never started: real stats(), all zero
    try:
        stats = collector.stats()
        assert undeclared("collector", stats) == []
        server = HealthServer(
            FAST, sources=[StatsSource("collector", collector.stats)], build_version="1.2.3"
        ).start()
        try:
            code, body, ctype = get(server.endpoint + "/metrics")
        finally:
            server.shutdown()
    finally:
        collector.shutdown()
    assert code == 200 and ctype.startswith("text/plain; version=0.0.4")
    fams = promtext.parse(body.decode())
    for key, spec in METRICS["collector"].items():
        if spec.label is not None:  # per worker: only `ragpulse collector --workers N` has them
            assert key not in stats and spec.prometheus_name not in fams
            continue
        fam = fams[spec.prometheus_name]
        assert fam.type == spec.kind and fam.help
        assert fam.samples == [({}, float(stats[key]))]
    assert fams["ragpulse_collector_spans_received_total"].type == "counter"
    assert fams["ragpulse_collector_queue_spans"].type == "gauge"
    assert fams["ragpulse_build_info"].samples == [({"version": "1.2.3"}, 1.0)]
    assert fams["ragpulse_telemetry_source_up"].samples == [({"component": "collector"}, 1.0)]


def test_per_worker_counters_are_labelled_samples() -> None:
    """Issue 41: ``ragpulse collector --workers N`` reports each worker's requests and
    connections as a ``{worker: value}`` mapping; /metrics shows one labelled sample each."""
    stats = {"http_requests": 7, "worker_http_requests": {"0": 3, "1": 4},
             "worker_http_connections": {"0": 2, "1": 2}, "worker_grpc_requests": {"0": "x"}}
    fams = promtext.parse(render_prometheus([StatsSource("collector", lambda: stats)]))
    assert fams["ragpulse_collector_http_requests_total"].samples == [({}, 7.0)]
    assert fams["ragpulse_collector_worker_http_requests_total"].samples == [
        ({"worker": "0"}, 3.0), ({"worker": "1"}, 4.0)]
    assert fams["ragpulse_collector_worker_http_connections"].type == "gauge"
    assert fams["ragpulse_collector_worker_http_connections"].samples == [
        ({"worker": "0"}, 2.0), ({"worker": "1"}, 2.0)]
    assert "ragpulse_collector_worker_grpc_requests_total" not in fams  # no number: no sample


def test_render_survives_a_broken_source_and_odd_values() -> None:
    def broken() -> dict[str, Any]:
        raise RuntimeError("boom")

    text = render_prometheus(
        [
            StatsSource("scorer", broken),
            StatsSource(
                "collector",
                lambda: {
                    "spans_received": 7,
                    "queue_spans": float("nan"),
                    "last_error": "x",
                    "unknown_key": 3,
                },
            ),
        ]
    )
    fams = promtext.parse(text)
    assert fams["ragpulse_telemetry_source_up"].samples == [
        ({"component": "scorer"}, 0.0),
        ({"component": "collector"}, 1.0),
    ]
    assert fams["ragpulse_collector_spans_received_total"].samples == [({}, 7.0)]
    assert "ragpulse_collector_queue_spans" not in fams  # NaN is not exported
    assert undeclared("collector", {"unknown_key": 3, "last_error": "x"}) == ["unknown_key"]


def test_parser_rejects_malformed_exposition() -> None:
    for bad in (
        "x 1",
        "# TYPE x counter\nx 1\n",
        "# TYPE x_total counter\nx_total one\n",
        '# TYPE g gauge\ng{a="\\q"} 1\n',
        "# TYPE g gauge\ng 1\n# TYPE g gauge\n",
    ):
        with pytest.raises(promtext.ParseError):
            promtext.parse(bad)


class _OtlpReceiver:
    """POST /v1/metrics → decoded ExportMetricsServiceRequest objects (the OTLP/HTTP contract)."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as pb

        self.requests: list[Any] = []
        self.got = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                assert self.path == "/v1/metrics"
                assert self.headers["Content-Type"] == "application/x-protobuf"
                req = pb.ExportMetricsServiceRequest()
                req.ParseFromString(body)
                owner.requests.append(req)
                owner.got.set()
                out = pb.ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/metrics"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def otlp_receiver() -> Iterator[_OtlpReceiver]:
    r = _OtlpReceiver()
    yield r
    r.close()


def test_otlp_export_carries_the_declared_metrics(otlp_receiver: _OtlpReceiver) -> None:
    stats = {"spans_received": 41, "spans_acked": 40, "queue_spans": 3}
    settings = TelemetrySettings(otlp_endpoint=otlp_receiver.url, export_interval_s=3600)
    exporter = OtlpMetricsExporter(
        settings, [StatsSource("collector", lambda: dict(stats))], instance="pod-a"
    ).start()
    try:
        assert exporter.force_flush(10.0)
    finally:
        exporter.shutdown()
        exporter.shutdown()
    assert otlp_receiver.requests
    req = otlp_receiver.requests[0]
    rm = req.resource_metrics[0]
    attrs = {a.key: a.value.string_value for a in rm.resource.attributes}
    assert attrs["service.name"] == "ragpulse-collector" and attrs["service.instance.id"] == "pod-a"
    points: dict[str, tuple[str, float]] = {}
    for sm in rm.scope_metrics:
        for metric in sm.metrics:
            kind = metric.WhichOneof("data")
            dp = getattr(metric, kind).data_points
            points[metric.name] = (
                kind,
                dp[0].as_int if dp[0].HasField("as_int") else dp[0].as_double,
            )
    assert points["ragpulse.collector.spans_received"] == ("sum", 41)
    assert points["ragpulse.collector.spans_acked"] == ("sum", 40)
    assert points["ragpulse.collector.queue_spans"] == ("gauge", 3)
    # Keys absent from stats() produce no data point rather than a fake zero.
    assert "ragpulse.collector.records_failed" not in points


def test_start_observability_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, otlp_receiver: _OtlpReceiver
) -> None:
    monkeypatch.setenv("RAGPULSE_HEALTH__ENABLED", "true")
    monkeypatch.setenv("RAGPULSE_HEALTH__PORT", "0")
    monkeypatch.setenv("RAGPULSE_TELEMETRY__OTLP_ENDPOINT", otlp_receiver.url)
    monkeypatch.setenv("RAGPULSE_TELEMETRY__EXPORT_INTERVAL_S", "3600")
    settings = ObservabilitySettings()
    assert settings.health.enabled and settings.telemetry.otlp_endpoint == otlp_receiver.url
    obs = start_observability(
        "scorer", lambda: {"rows_written": 5}, settings=settings, ready={"clickhouse": None}
    )
    try:
        assert get(obs.endpoint + "/readyz")[0] == 200
        assert "ragpulse_scorer_rows_written_total 5" in get(obs.endpoint + "/metrics")[1].decode()
    finally:
        obs.shutdown()  # the final export goes out on shutdown
        obs.shutdown()
    assert otlp_receiver.got.wait(10)
    with pytest.raises(ValueError):
        TelemetrySettings(otlp_endpoint="otelcol:4318")


def test_pipeline_health_recorder_writes_rows(chdb_client: Any, rag_schema: Any) -> None:
    from ragpulse.deploy.telemetry import pipeline_health_recorder

    stats = {"records_consumed": 10, "rows_written": 4, "consumer_lag": 7, "last_write_error": "x"}
    rec = pipeline_health_recorder(
        StatsSource("scorer", lambda: dict(stats)),
        lambda: chdb_client,
        rag_schema.database,
        interval_s=3600,
        instance="replica-a",
    )
    rec.shutdown()  # safe without start
    rec = pipeline_health_recorder(
        StatsSource("scorer", lambda: dict(stats)),
        lambda: chdb_client,
        rag_schema.database,
        interval_s=3600,
        instance="replica-a",
    ).start()
    rec.record()
    stats["records_consumed"] = 25
    rec.shutdown()  # writes a last sample of the same minute: it replaces the first
    rec.shutdown()
    assert rec.samples_dropped == 0 and rec.samples_written == 2
    rows = chdb_client.query(
        f"SELECT name, kind, value FROM `{rag_schema.database}`.pipeline_health FINAL "
        "WHERE component = 'scorer' AND instance = 'replica-a' ORDER BY name"
    ).result_rows
    got = {name: (kind, value) for name, kind, value in rows}
    assert got == {
        "consumer_lag": ("gauge", 7.0),
        "records_consumed": ("counter", 25.0),
        "rows_written": ("counter", 4.0),
    }


def test_requests_beyond_the_limit_are_refused_not_queued() -> None:
    entered, release = threading.Event(), threading.Event()

    def blocking() -> None:
        entered.set()
        release.wait(10)

    settings = HealthSettings(enabled=True, port=0, check_timeout_s=10.0, max_concurrent_requests=1)
    server = HealthServer(settings, ready={"slow": blocking}).start()
    try:
        first = threading.Thread(target=get, args=(server.endpoint + "/readyz",))
        first.start()
        assert entered.wait(10)  # the only slot is taken by a request inside its check
        code, body, _ = get(server.endpoint + "/healthz")
        assert (code, body) == (503, b"busy\n") and server.requests_refused == 1
        release.set()
        first.join(10)
        # The slot is given back once the server thread has finished the request, which can be
        # a moment after the client read its answer (CI once got the 503 again): wait for it.
        deadline = time.monotonic() + 10
        while (code := get(server.endpoint + "/healthz")[0]) == 503 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert code == 200 and server.requests_refused >= 1
    finally:
        release.set()
        server.shutdown()


def test_pipeline_health_recorder_survives_an_unreachable_clickhouse(
    chdb_client: Any, rag_schema: Any
) -> None:
    from ragpulse.deploy.telemetry import pipeline_health_recorder
    from ragpulse.scorer.store import open_store

    attempts: list[str] = []

    def connect() -> Any:
        attempts.append("x")
        if len(attempts) == 1:  # a ClickHouse that is down at first: a real refused connection
            return open_store("http://127.0.0.1:9/", connect_timeout=1)
        return chdb_client

    rec = pipeline_health_recorder(
        StatsSource("collector", lambda: {"spans_received": 3}),
        connect,
        rag_schema.database,
        interval_s=3600,
        instance="collector-0",
    ).start()  # does not connect: start-up never waits for ClickHouse
    assert attempts == []
    rec.record()
    assert rec.samples_dropped == 1 and rec.samples_written == 0
    rec.shutdown()  # the last sample connects again and is written
    assert len(attempts) == 2 and rec.samples_written == 1
    n = chdb_client.command(
        f"SELECT count() FROM `{rag_schema.database}`.pipeline_health "
        "WHERE component = 'collector' AND name = 'spans_received' AND value = 3"
    )
    assert n == 1
