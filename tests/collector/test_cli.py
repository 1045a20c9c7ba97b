"""``ragpulse collector`` as a process: settings validation, endpoints, SIGTERM drains."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Any

from ragpulse.common import KafkaSettings
from ragpulse.deploy.broker import free_port
from testkit.payloads import rag_request
from tests.collector.conftest import read_records

CLI = [sys.executable, "-c", "from ragpulse.deploy.cli import main; main()", "collector"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
    env.update(extra)
    return env


def test_invalid_settings_exit_2_with_the_variable_name() -> None:
    proc = subprocess.run(
        CLI, env=_env(RAGPULSE_QUEUE__MAX_SPANS="0"), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert "queue.max_spans" in proc.stderr and "RAGPULSE_QUEUE__MAX_SPANS" in proc.stderr


def test_unreachable_kafka_exits_1() -> None:
    port = free_port()
    proc = subprocess.run(
        [*CLI, "--kafka", f"127.0.0.1:{port}", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"],
        env=_env(RAGPULSE_KAFKA__BOOTSTRAP_TIMEOUT_MS="1000"),
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 1 and "is Kafka reachable" in proc.stderr


def test_off_loopback_without_a_token_it_refuses_to_start(tmp_path: Any) -> None:
    """Issue 38, item 14: ``ragpulse collector`` on 0.0.0.0 without a token served anyone (the
    compose file, the Kubernetes manifest and the image's CMD ran it so). Now it exits 2 naming
    what to set, as ``ragpulse up`` does; with a token (or its _FILE, as the manifests give it)
    or --allow-anonymous-ingest it goes on (here to the unreachable Kafka: exit 1)."""
    port = free_port()
    args = [*CLI, "--kafka", f"127.0.0.1:{port}", "--http", "0.0.0.0:0", "--grpc", "0.0.0.0:0"]
    env = {"RAGPULSE_KAFKA__BOOTSTRAP_TIMEOUT_MS": "1000"}
    refused = subprocess.run(args, env=_env(**env), capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2, refused.stderr
    assert "without authentication" in refused.stderr and "RAGPULSE_OTLP__AUTH_TOKEN" in refused.stderr
    assert "--allow-anonymous-ingest" in refused.stderr
    http_only = subprocess.run([*args, "--no-grpc"], env=_env(**env), capture_output=True,
                               text=True, timeout=60)
    assert http_only.returncode == 2

    token_file = tmp_path / "otlp-token"
    token_file.write_text("s3cret\n")
    for extra_args, extra_env in (
            (["--allow-anonymous-ingest"], {}),
            ([], {"RAGPULSE_OTLP__ALLOW_ANONYMOUS_INGEST": "true"}),
            ([], {"RAGPULSE_OTLP__AUTH_TOKEN": "s3cret"}),
            ([], {"RAGPULSE_OTLP__AUTH_TOKEN_FILE": str(token_file)})):
        proc = subprocess.run([*args, *extra_args], env=_env(**env, **extra_env),
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and "is Kafka reachable" in proc.stderr, (extra_env, proc.stderr)


def test_runs_until_sigterm_then_drains(kafka_broker: Any) -> None:
    http_port = free_port()
    proc = subprocess.Popen(
        [*CLI, "--kafka", kafka_broker.bootstrap, "--topic", "cli_spans", "--http", f"127.0.0.1:{http_port}",
         "--grpc", "127.0.0.1:0", "--status-interval", "0"],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("OTLP/HTTP") and f"127.0.0.1:{http_port}/v1/traces" in first
        request = rag_request(5, seed=7)
        req = urllib.request.Request(
            f"http://127.0.0.1:{http_port}/v1/traces", data=request.SerializeToString(),
            headers={"Content-Type": "application/x-protobuf"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.status == 200
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "35 spans acknowledged by Kafka" in out
    records = read_records(KafkaSettings(bootstrap_servers=kafka_broker.bootstrap, topic="cli_spans"), 5)
    assert len(records) == 5


def _connections_by_process(port: int, pids: list[int]) -> list[int]:
    """How many established connections to ``port`` each of ``pids`` holds (socket inodes)."""
    inodes = set()
    with open("/proc/net/tcp") as f:
        for line in f:
            fields = line.split()
            if fields[1].endswith(f":{port:04X}") and fields[3] == "01":
                inodes.add(fields[9])
    counts = []
    for pid in pids:
        held = 0
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            held += link.startswith("socket:[") and link[8:-1] in inodes
        counts.append(held)
    return counts


def test_workers_share_the_ports_and_drain(kafka_broker: Any) -> None:
    http_port, grpc_port = free_port(), free_port()
    proc = subprocess.Popen(
        [*CLI, "--kafka", kafka_broker.bootstrap, "--topic", "cli_workers", "--http", f"127.0.0.1:{http_port}",
         "--grpc", f"127.0.0.1:{grpc_port}", "--workers", "2", "--status-interval", "0"],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("OTLP/HTTP")
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
            (child,) = f.read().split()
        # Both processes serve one OTLP/HTTP listening socket (the worker inherited it); gRPC
        # is bound by each (SO_REUSEPORT). Wait until the worker listens for gRPC too.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            lines = []
            for table in ("/proc/net/tcp", "/proc/net/tcp6"):  # grpcio listens on a v4-mapped address
                with open(table) as f:
                    lines += [line.split() for line in f]
            http_listeners = sum(1 for x in lines if x[1].endswith(f":{http_port:04X}") and x[3] == "0A")
            grpc_listeners = sum(1 for x in lines if x[1].endswith(f":{grpc_port:04X}") and x[3] == "0A")
            if grpc_listeners == 2:
                break
            time.sleep(0.1)
        assert (http_listeners, grpc_listeners) == (1, 2)
        # Four keep-alive clients are spread evenly: two connections each (SO_REUSEPORT's hash
        # put 3 or 4 on one process in most runs). Until the worker serves, the parent takes all.
        body = rag_request(2, seed=0).SerializeToString()
        rounds, deadline = 0, time.monotonic() + 30  # its own budget: a loaded CI machine may be slow to start the worker
        while True:
            rounds += 1
            clients = [http.client.HTTPConnection("127.0.0.1", http_port, timeout=30) for _ in range(4)]
            for client in clients:
                client.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"})
                response = client.getresponse()
                response.read()
                assert response.status == 200
            spread = _connections_by_process(http_port, [proc.pid, int(child)])
            for client in clients:
                client.close()
            if spread == [2, 2] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert spread == [2, 2]
        for seed in range(8):  # a new connection per request
            req = urllib.request.Request(
                f"http://127.0.0.1:{http_port}/v1/traces", data=rag_request(2, seed=seed).SerializeToString(),
                headers={"Content-Type": "application/x-protobuf"},
            )
            with urllib.request.urlopen(req, timeout=30) as resp:
                assert resp.status == 200
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert not os.path.exists(f"/proc/{child}"), "the worker exits with its parent"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    expected = 16 + rounds * 4 * 2  # 2 traces a request
    records = read_records(KafkaSettings(bootstrap_servers=kafka_broker.bootstrap, topic="cli_workers"), expected)
    assert len(records) == expected
