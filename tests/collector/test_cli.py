"""``ragpulse collector`` as a process: settings validation, endpoints, SIGTERM drains."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from ragpulse.common import KafkaSettings, partition_for_key
from ragpulse.deploy.broker import free_port
from testkit.payloads import rag_request
from tests.collector.conftest import read_traces

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
    # The default record form (per partition): 5 traces, 35 spans, each trace in the
    # partition its id picks.
    traces = read_traces(KafkaSettings(bootstrap_servers=kafka_broker.bootstrap, topic="cli_spans"), 5)
    assert len(traces) == 5 and sum(map(len, traces.values())) == 35
    for trace_id, where in traces.items():
        assert set(where) == {partition_for_key(trace_id.encode(), 6)}


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
    # Every span of every request, each trace in one partition (the default record form, per
    # partition): the 8 requests of seeds 0-7 hold 16 traces, the rounds resent seed 0's 2.
    traces = read_traces(KafkaSettings(bootstrap_servers=kafka_broker.bootstrap, topic="cli_workers"), 16)
    assert len(traces) == 16
    assert sum(map(len, traces.values())) == (8 + rounds * 4) * 2 * 7  # 7 spans a trace
    assert all(len(set(where)) == 1 for where in traces.values())


def _metric_samples(text: str, name: str) -> dict[str, float]:
    """``{worker: value}`` of a per-worker metric in a Prometheus text page."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, value = line[len(name) + 1:].split("} ")
            out[labels.split('"')[1]] = float(value)
    return out


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_port_opens_once_every_worker_serves_and_a_burst_reaches_them_all(
        kafka_broker: Any) -> None:
    """Issue 41, item 1: the first process listened at once, while its workers were still
    starting (1-3 s), so the keep-alive clients that connected first all stayed on it. Now the
    port opens only once every worker serves: 4 clients that connect within 10 ms of the port
    opening reach every worker (by the per-worker request counters, not by timing), and
    /readyz answers 200 only when the port is open."""
    http_port, health_port = free_port(), free_port()
    workers = 2
    proc = subprocess.Popen(
        [*CLI, "--kafka", kafka_broker.bootstrap, "--topic", "cli_burst", "--http",
         f"127.0.0.1:{http_port}", "--no-grpc", "--workers", str(workers),
         "--status-interval", "0", "--health-port", str(health_port)],
        env=_env(RAGPULSE_HEALTH__CHECK_INTERVAL_S="0"), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    clients: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 60
        early_readiness = []
        while True:  # the moment the port answers, as a client retrying after a restart
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
            first = socket.socket()
            try:
                first.connect(("127.0.0.1", http_port))
            except ConnectionRefusedError:
                first.close()
                if len(early_readiness) < 5:  # /readyz while the port is shut: not ready
                    try:
                        early_readiness.append(_get(f"http://127.0.0.1:{health_port}/readyz"))
                    except OSError:
                        pass
                time.sleep(0.001)
                continue
            opened = time.monotonic()
            clients = [first, *(socket.create_connection(("127.0.0.1", http_port))
                                for _ in range(3))]
            print(f"4 connections within {(time.monotonic() - opened) * 1000:.1f} ms of the port opening")
            break
        for code, body in early_readiness:
            assert code == 503 and '"workers"' in body, body
        # Requests on the 4 keep-alive connections (one client each, in turn).
        body = rag_request(2, seed=3).SerializeToString()
        conns = []
        for sock in clients:
            conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=30)
            conn.sock = sock
            conns.append(conn)
        for _ in range(5):
            for conn in conns:
                conn.request("POST", "/v1/traces", body=body,
                             headers={"Content-Type": "application/x-protobuf"})
                response = conn.getresponse()
                response.read()
                assert response.status == 200
        code, text = _get(f"http://127.0.0.1:{health_port}/readyz")
        assert code == 200, text
        # Every worker served (each reports its counters once a second).
        deadline = time.monotonic() + 30
        while True:
            _, page = _get(f"http://127.0.0.1:{health_port}/metrics")
            served = _metric_samples(page, "ragpulse_collector_worker_http_requests_total")
            if sum(served.values()) >= 20 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert sorted(served) == [str(i) for i in range(workers)], page
        assert sum(served.values()) == 20 and all(served.values()), served
        connections = _metric_samples(page, "ragpulse_collector_worker_http_connections")
        assert sorted(connections.values()) == [2, 2], connections
        for conn in conns:
            conn.close()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        for sock in clients:
            sock.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# The wrapper of the spawn-order test: the real command, noting when the parent spawns its
# workers whether gRPC (its C core: every server, channel and thread) or librdkafka is loaded
# yet, and its Python threads. (Native threads are not counted: importing numpy, which the CLI
# does, starts OpenBLAS's pool, which fork and vfork handle.)
_SPAWN_PROBE = """
import importlib, sys, threading
command = importlib.import_module("ragpulse.deploy.commands.collector")
spawn = command._Workers.start

def start(self):
    loaded = {m: m in sys.modules for m in ("grpc._cython.cygrpc", "confluent_kafka.cimpl")}
    sys.stderr.write(f"SPAWN threads={threading.active_count()} loaded={loaded}\\n")
    spawn(self)

command._Workers.start = start
from ragpulse.deploy.cli import main
main()
"""


def test_workers_are_spawned_before_the_parent_runs_grpc(kafka_broker: Any) -> None:
    """The -6 start failure (issue 41): the parent forked its workers after its gRPC server
    started, so gRPC's fork handlers ran beside busy gRPC threads and the child aborted before
    its exec ("worker N exited with status -6 before serving"). The workers are now spawned
    while the parent has not even loaded gRPC or librdkafka, from its only Python thread; the
    start then completes."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _SPAWN_PROBE, "collector", "--kafka", kafka_broker.bootstrap,
         "--topic", "cli_spawn", "--http", f"127.0.0.1:{free_port()}",
         "--grpc", f"127.0.0.1:{free_port()}", "--workers", "2", "--status-interval", "0"],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert first.startswith("OTLP/HTTP"), err
    assert proc.returncode == 0, err
    spawn = "SPAWN threads=1 loaded={'grpc._cython.cygrpc': False, 'confluent_kafka.cimpl': False}"
    assert spawn in err.splitlines(), err


def test_workers_spawn_without_fork_handlers() -> None:
    """Nothing runs in a worker's child between fork and exec (no preexec_fn), so subprocess
    uses vfork, which runs no fork handlers: neither Python's (checked here, with a hook) nor
    the pthread_atfork ones of gRPC that aborted the child. The workers get invalid settings
    and exit at once with status 2."""
    probe = """
import os, sys
from ragpulse.deploy.commands.collector import _Workers
forks = []
os.register_at_fork(before=lambda: forks.append(1))
sys.argv = ["ragpulse", "collector", "--queue-max-spans", "0"]
workers = _Workers(3)
workers.start()
workers.wait(60)
print(len(forks), [p.returncode for p in workers._procs])
"""
    done = subprocess.run([sys.executable, "-c", probe], env=_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "0 [2, 2, 2]", done.stdout + done.stderr


def _grpc_export(port: int, body: bytes, stop: Any) -> None:
    """Until ``stop`` is set: connect to the OTLP/gRPC port and export, as an exporter retrying
    through a restart does (the gRPC traffic that kept gRPC's threads busy when it forked)."""
    import grpc

    while not stop.is_set():
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        try:
            grpc.channel_ready_future(channel).result(timeout=0.2)
            channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")(
                body, timeout=5)
        except Exception:  # refused until the port opens, or busy: retry
            stop.wait(0.01)
        finally:
            channel.close()


def test_every_default_worker_serves_after_each_of_several_starts(kafka_broker: Any) -> None:
    """The standalone collector with its default workers (one per usable core; at least 2
    here), started three times under gRPC exporters retrying from before the start: every
    start completes, and every worker serves (its own request counters, not time). A worker
    dying at start fails the start ("worker N exited with status ... before serving")."""
    import threading

    from ragpulse.collector import available_cores

    body = rag_request(1, seed=5).SerializeToString()
    workers_flag = [] if available_cores() >= 2 else ["--workers", "2"]
    for start in range(3):
        http_port, grpc_port, health_port = free_port(), free_port(), free_port()
        stop = threading.Event()
        senders = [threading.Thread(target=_grpc_export, args=(grpc_port, body, stop), daemon=True)
                   for _ in range(2)]
        for sender in senders:
            sender.start()
        proc = subprocess.Popen(
            [*CLI, "--kafka", kafka_broker.bootstrap, "--topic", f"cli_restart_{start}",
             "--http", f"127.0.0.1:{http_port}", "--grpc", f"127.0.0.1:{grpc_port}",
             *workers_flag, "--status-interval", "0", "--health-port", str(health_port)],
            env=_env(RAGPULSE_HEALTH__CHECK_INTERVAL_S="0"), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )
        try:
            assert proc.stdout is not None
            banner = [proc.stdout.readline() for _ in range(3)]  # OTLP/HTTP, OTLP/gRPC, Kafka
            assert banner[0].startswith("OTLP/HTTP"), (start, proc.wait(60), proc.stderr.read())
            line = proc.stdout.readline()
            assert line.startswith("workers"), line
            processes = int(line.split()[1])
            assert processes >= 2
            # New connections until every process served one (each goes to a process holding
            # the fewest); the deadline only bounds a failure.
            served: dict[str, float] = {}
            deadline = time.monotonic() + 60
            while len([n for n in served.values() if n > 0]) < processes:
                assert time.monotonic() < deadline, (start, served)
                assert proc.poll() is None, (start, proc.stderr.read())
                for _ in range(2 * processes):
                    req = urllib.request.Request(
                        f"http://127.0.0.1:{http_port}/v1/traces", data=body,
                        headers={"Content-Type": "application/x-protobuf"})
                    with urllib.request.urlopen(req, timeout=30) as resp:
                        assert resp.status == 200
                time.sleep(0.5)  # workers report their counters once a second
                _, page = _get(f"http://127.0.0.1:{health_port}/metrics")
                served = _metric_samples(page, "ragpulse_collector_worker_http_requests_total")
            assert sorted(served, key=int) == [str(i) for i in range(processes)], served
            code, text = _get(f"http://127.0.0.1:{health_port}/readyz")
            assert code == 200, text
            stop.set()
            for sender in senders:
                sender.join(timeout=30)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            assert "before serving" not in err, err
        finally:
            stop.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _exited(pid: int) -> bool:
    """Whether ``pid`` is gone or a zombie (exited; its new parent has not reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1].startswith("Z")
    except FileNotFoundError:
        return True


def test_a_killed_parent_leaves_no_worker_holding_the_ports(kafka_broker: Any) -> None:
    """Each worker asks for SIGTERM at its parent's death itself (PR_SET_PDEATHSIG after its
    exec; it was a preexec_fn, which made subprocess fork with handlers): after a SIGKILL of
    the parent the worker drains and exits, and the ports are free again."""
    http_port, grpc_port = free_port(), free_port()
    proc = subprocess.Popen(
        [*CLI, "--kafka", kafka_broker.bootstrap, "--topic", "cli_orphan", "--http",
         f"127.0.0.1:{http_port}", "--grpc", f"127.0.0.1:{grpc_port}", "--workers", "2",
         "--status-interval", "0"],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    child = ""
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("OTLP/HTTP")
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
            (child,) = f.read().split()
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 60  # bounds a failure: the worker drains, then exits
        while not _exited(int(child)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _exited(int(child))
        for port in (http_port, grpc_port):  # nobody listens any more
            with socket.socket() as probe:
                assert probe.connect_ex(("127.0.0.1", port)) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if child and not _exited(int(child)):
            os.kill(int(child), signal.SIGKILL)  # the failure under test: an orphan worker
