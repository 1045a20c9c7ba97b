"""Issue 41, item 2: a long-lived keep-alive connection does not pin a client to one worker.

OTLP/HTTP answers with ``Connection: close`` once a connection is older than about
``otlp.max_connection_age_s`` (or has served ``max_connection_requests``), each connection's
limit drawn within +-10 %; the client reconnects, and the new connection goes to the process
holding the fewest. OTLP/gRPC sends GOAWAY after grpcio's ``max_connection_age`` with a grace
for calls in progress.
"""

from __future__ import annotations

import http.client
import os
import socket
import time
from typing import Any

import grpc

from ragpulse.collector.config import CollectorSettings
from ragpulse.collector.exporter import ExportResult
from ragpulse.collector.otlp_grpc import EXPORT, GrpcReceiver
from ragpulse.collector.otlp_http import HttpReceiver, SharedListener
from ragpulse.deploy.broker import free_port
from testkit.payloads import rag_request

BODY = rag_request(2, seed=5).SerializeToString()


class _Answering:
    """An ingest that accepts every request at once (the receivers alone are under test)."""

    def consume_proto(self, body: bytes) -> ExportResult:
        return ExportResult(accepted_spans=1)

    def _count(self, **deltas: int) -> None:
        pass


def _settings(**otlp: Any) -> CollectorSettings:
    return CollectorSettings.model_validate({
        "otlp": {"http_port": free_port(), "grpc_port": free_port(), "workers": 2, **otlp},
        "kafka": {"bootstrap_servers": "127.0.0.1:9", "topic": "unused"}})


def _post(conn: http.client.HTTPConnection) -> http.client.HTTPResponse:
    conn.request("POST", "/v1/traces", body=BODY, headers={"Content-Type": "application/x-protobuf"})
    response = conn.getresponse()
    response.read()
    assert response.status == 200
    return response


def test_a_skewed_start_evens_out_within_the_connection_age() -> None:
    """4 keep-alive clients all on the first process (the second was not serving when they
    connected, as after a worker's restart or with clients that connected to another collector
    first): within the connection age (+10 %, plus a request), 2 and 2."""
    # long enough that the four first requests finish well before 0.9 of it even on a loaded
    # machine (the suite runs in two processes): at 1 s a slow start retired a connection
    # before the check below counted four
    age = 2.0
    settings = _settings(max_connection_age_s=age)
    first = HttpReceiver(settings.otlp, _Answering())  # type: ignore[arg-type]
    first.start()
    second = None
    clients = []
    try:
        shared = first.shared
        assert shared is not None and not first.is_open
        first.open()  # without waiting for the worker: the skew this test needs
        connected = time.monotonic()  # the connections' ages count from here
        clients = [http.client.HTTPConnection("127.0.0.1", settings.otlp.http_port, timeout=10)
                   for _ in range(4)]
        for client in clients:
            _post(client)
        # The accept loop publishes its count after it hands the connection to its thread,
        # which may answer first: wait for the count (the deadline only bounds a failure).
        deadline = time.monotonic() + 5
        while shared.connections() != [4, None] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert shared.connections() == [4, None]
        worker = SharedListener(socket.socket(fileno=os.dup(shared.socket.fileno())),
                                shared.counts_fd, 1, 2)
        second = HttpReceiver(settings.otlp, _Answering(), shared=worker)  # type: ignore[arg-type]
        second.start()
        retired_early = 0
        while shared.connections() != [2, 2] and time.monotonic() - connected < 10 * age:
            for client in clients:
                response = _post(client)
                if response.getheader("Connection") == "close" and time.monotonic() - connected < 0.9 * age:
                    retired_early += 1  # no connection is retired before 0.9 of the age
        evened = time.monotonic() - connected
        assert shared.connections() == [2, 2]
        print(f"4/0 evened out to 2/2 {evened:.2f} s after the clients connected "
              f"(max_connection_age_s={age})")
        # Within one age (+10 %) and a request; on a loaded machine the second process may not
        # be scheduled within the first one's 0.1 s accept wait, and a connection that comes
        # back to the first waits for its next age: two ages at most.
        assert evened < 2 * 1.1 * age + 0.5, evened
        assert retired_early == 0
        retired = first.stats()["http_connections_retired"] + second.stats()["http_connections_retired"]
        assert retired >= 2  # two moved to the second process
    finally:
        for client in clients:
            client.close()
        if second is not None:
            second.shutdown(drain_timeout_s=1)
        first.shutdown(drain_timeout_s=1)


def test_max_connection_requests_closes_after_about_that_many() -> None:
    settings = _settings(max_connection_requests=10, max_connection_age_s=0, workers=1)
    receiver = HttpReceiver(settings.otlp, _Answering())  # type: ignore[arg-type]
    receiver.start()
    try:
        assert receiver.is_open
        conn = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=10)
        closes = [n for n in range(1, 40) if _post(conn).getheader("Connection") == "close"]
        conn.close()
        assert closes and 9 <= closes[0] <= 11, closes  # 10 +- 10 %, then a new connection
        assert receiver.stats()["http_connections_retired"] == len(closes)
    finally:
        receiver.shutdown(drain_timeout_s=1)


def _client_ports(server_port: int) -> set[int]:
    """Local ports of the established client connections to ``server_port`` (IPv4 and 6)."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                local, remote, state = fields[1], fields[2], fields[3]
                if state == "01" and int(remote.rsplit(":", 1)[1], 16) == server_port:
                    ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def test_grpc_connections_get_goaway_after_the_age_and_calls_go_on() -> None:
    """grpcio's max_connection_age: the client's connection is replaced (a new local port) and
    no call fails for it; calls in progress get the grace."""
    settings = _settings(max_connection_age_s=1.0, max_connection_age_grace_s=2.0, workers=1,
                         http_port=0, grpc_port=0)
    receiver = GrpcReceiver(settings.otlp, _Answering())  # type: ignore[arg-type]
    receiver.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{receiver.port}") as channel:
            export = channel.unary_unary(EXPORT)
            seen: set[int] = set()
            deadline = time.monotonic() + 4.0
            calls = 0
            while time.monotonic() < deadline:
                export(BODY, timeout=10)
                calls += 1
                seen |= _client_ports(receiver.port)
                time.sleep(0.05)
        assert calls > 20
        assert len(seen) >= 2, seen  # reconnected at least once in 4 s of 1 s connections
    finally:
        receiver.shutdown(drain_timeout_s=1)
