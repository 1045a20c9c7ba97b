"""End to end on real parts: the OpenTelemetry SDK's OTLP exporters (HTTP and gRPC) → the
collector → the tansu broker → the scorer (local judge) → chDB, all started by the real
``ragpulse up`` command in a child process; the data is read back through its ClickHouse-HTTP
facade while it runs, and directly from the chDB directory after Ctrl-C drained it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragpulse.deploy.broker import free_port
from tests.infra_chdb import query_chdb_dir

pytestmark = pytest.mark.slow

FAITHFUL = ("When did the Eiffel Tower open to the public?",
            ["The Eiffel Tower was opened to the public on 31 March 1889, after two years of "
             "construction for the Exposition Universelle.",
             "Paris hosts more than 30 million tourists every year."],
            "The Eiffel Tower opened to the public on 31 March 1889.")
HALLUCINATED = ("When did the Eiffel Tower open to the public?",
                FAITHFUL[1],
                "The Eiffel Tower opened in 1925 and was designed by Le Corbusier as a radio mast.")
JAPANESE = ("富士山の標高は何メートルですか？",
            ["富士山は静岡県と山梨県にまたがる活火山で、標高は3776メートルである。"],
            "富士山の標高は3776メートルです。")
METRICS = {"faithfulness", "answer_relevancy", "context_precision", "context_utilization",
           "context_relevance"}


def _provider(exporter):
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    p = TracerProvider(resource=Resource.create({"service.name": "e2e-app",
                                                 "deployment.environment.name": "test"}))
    p.add_span_processor(SimpleSpanProcessor(exporter))
    return p


def _emit(provider, question, contexts, answer) -> str:
    from ragpulse.instrument import RagTracer

    rag = RagTracer(provider)
    with rag.query(question, prompt_version="p1") as q:
        with rag.retrieve(question) as r:
            r.set_documents(contexts)
        with rag.llm("gpt-4o-mini", messages=[("user", question)]) as call:
            call.set_output(answer)
        q.set_answer(answer)
    return q.trace_id


@pytest.fixture
def up(tmp_path: Path):
    ports = {k: free_port() for k in ("http", "grpc", "ch")}
    cmd = [sys.executable, "-m", "ragpulse.deploy.cli", "up", "--data-dir", str(tmp_path / "data"),
           "--http-port", str(ports["http"]), "--grpc-port", str(ports["grpc"]),
           "--clickhouse-port", str(ports["ch"]), "--status-interval", "2",
           "--drain-timeout", "60"]
    env = {**os.environ, "RAGPULSE_UP__GRACE_S": "1"}
    log = (tmp_path / "up.log").open("w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        import clickhouse_connect

        deadline = time.monotonic() + 90
        client = None
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "up.log").read_text()
            try:
                client = clickhouse_connect.get_client(host="127.0.0.1", port=ports["ch"])
                client.query("SELECT 1")
                if "Ctrl-C" in (tmp_path / "up.log").read_text():
                    break
            except Exception:
                pass
            time.sleep(0.5)
        else:
            pytest.fail("ragpulse up did not start:\n" + (tmp_path / "up.log").read_text())
        yield proc, ports, client, tmp_path
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


def _rows(client, trace_ids):
    return client.query(
        "SELECT trace_id, metric, value, status, service FROM rag.scores FINAL "
        "WHERE trace_id IN {ids:Array(String)}", parameters={"ids": list(trace_ids)}).result_rows


def test_otlp_http_and_grpc_to_scores_in_chdb(up):
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExp
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExp

    proc, ports, client, tmp_path = up
    http = _provider(HttpExp(endpoint=f"http://127.0.0.1:{ports['http']}/v1/traces"))
    grpc = _provider(GrpcExp(endpoint=f"127.0.0.1:{ports['grpc']}", insecure=True))
    ids = {
        "faithful": _emit(http, *FAITHFUL),
        "hallucinated": _emit(grpc, *HALLUCINATED),
        "japanese": _emit(http, *JAPANESE),
    }
    http.shutdown()
    grpc.shutdown()

    deadline = time.monotonic() + 120
    rows = []
    while time.monotonic() < deadline:
        rows = _rows(client, ids.values())
        if len(rows) >= 3 * len(METRICS):
            break
        time.sleep(1)
    log = (tmp_path / "up.log").read_text()
    assert len(rows) == 3 * len(METRICS), log
    by = {(t, m): (v, s) for t, m, v, s, _ in rows}
    for name, tid in ids.items():
        assert {m for (t, m) in by if t == tid} == METRICS, name
        assert all(by[(tid, m)][1] == "ok" for m in METRICS), (name, by)
    assert {svc for *_, svc in rows} == {"e2e-app"}
    faith = {name: by[(tid, "faithfulness")][0] for name, tid in ids.items()}
    assert faith["faithful"] > faith["hallucinated"], faith
    assert faith["japanese"] >= 0.5, faith

    # While `up` runs, the chDB directory belongs to it: direct opens are refused with a pointer
    # to the facade, and `ragpulse db status` follows the owner.
    from ragpulse.scorer.store import StoreLockedError, open_store

    with pytest.raises(StoreLockedError, match=str(ports["ch"])):
        open_store(f"chdb://{tmp_path / 'data' / 'chdb'}")
    # A second `up` on the same data directory (and the same ports, as a user repeats the same
    # command) says so, and what to do: not that its first port is taken, not --clickhouse,
    # which `up` does not take.
    second = subprocess.run(
        [sys.executable, "-m", "ragpulse.deploy.cli", "up", "--data-dir", str(tmp_path / "data"),
         "--http-port", str(ports["http"]), "--grpc-port", str(ports["grpc"]),
         "--clickhouse-port", str(ports["ch"])],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "300"})
    said = " ".join((second.stdout + second.stderr).split())
    assert second.returncode == 1, said
    assert f"another `ragpulse up` (pid {proc.pid}) already runs on" in said, said
    assert "another --data-dir" in said and "--clickhouse" not in said, said

    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=90) == 0, (tmp_path / "up.log").read_text()
    log_text = (tmp_path / "up.log").read_text()
    assert "stopped." in log_text
    # It says which judge scores and where that judge's quality is documented.
    assert ("model (ragpulse's own faithfulness cross-encoder, bundled (no API, nothing "
            "downloaded); the default); quality and alert levels per judge: docs/judges.md") \
        in " ".join(log_text.split())

    # After the drain the data is on disk; read it from a fresh process that now owns it.
    ((count,),) = query_chdb_dir(tmp_path / "data" / "chdb", "SELECT count() FROM rag.scores FINAL")
    assert count == 3 * len(METRICS)
