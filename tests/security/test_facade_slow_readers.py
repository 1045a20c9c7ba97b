"""Clients that never read their replies, against the real facade over real sockets (issue 38,
item 4).

The query slot was given back before the reply was written, so a reply waiting for its client
held memory outside the facade's bound: 16 connections that never read 151 MB replies took `up`
from 921 to 3,531 MiB, and at 64 of them new clients got 503 for 30 s. Now a reply holds its
slot (its share of ``memory_limit_bytes``) until it is written, and a client that reads it slower
than ``write_min_bytes_per_s`` after ``write_timeout_s`` is reset, freeing both.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragpulse.deploy.facade import ClickHouseHttpFacade, FacadeSettings, build_facade

ATTACKERS = [f"127.0.0.{i}" for i in range(2, 10)]  # 8 addresses: the client share is no limit
FRESH = "127.0.1.1"


def rss_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def unread(port: int, source: str, sql: str) -> socket.socket:
    """A connection that sends ``sql`` and never reads a byte of the reply."""
    sock = socket.create_connection(("127.0.0.1", port), source_address=(source, 0))
    body = sql.encode()
    sock.sendall(b"POST /?max_block_size=8192 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    return sock


def get(port: int, sql: str, source: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60, source_address=(source, 0))
    try:
        conn.request("POST", "/?max_block_size=8192", body=sql.encode())
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


@pytest.fixture
def facade(chdb_dir: Path, rag_schema: Any) -> Iterator[ClickHouseHttpFacade]:
    f = build_facade(str(chdb_dir), FacadeSettings(
        database=rag_schema.database, memory_limit_bytes=512 << 20, write_timeout_s=3.0,
        advertise=False))
    f.start()
    yield f
    f.shutdown()


class PeakRss:
    """The process's peak VmRSS, sampled every 20 ms while in the ``with`` block."""

    def __enter__(self) -> PeakRss:
        self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_bytes())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def settled(f: ClickHouseHttpFacade, answered: int) -> None:
    """Wait (at most 10 s) until ``answered`` requests have run or been refused: each attack
    query has its outcome before the next is sent."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        st = f.stats()
        if st["queries"] + st["errors"] >= answered:
            return
        time.sleep(0.01)


def test_unread_replies_stay_within_the_memory_bound(facade: ClickHouseHttpFacade) -> None:
    bound = facade.settings.memory_limit_bytes
    _, result_bytes = facade.settings.memory_limits()  # 16 MiB of reply a query
    rows = int(result_bytes * 0.9) // 101
    sql = f"SELECT repeat('x', 100) FROM numbers({rows})"
    # A client that reads gets the whole reply (and the engine is warm before the baseline).
    status, body = get(facade.port, sql, FRESH)
    assert status == 200 and len(body) == rows * 101
    time.sleep(0.5)
    base = rss_bytes()
    socks: list[socket.socket] = []
    try:
        with PeakRss() as rss:
            for i in range(48):  # before the fix: 48 replies of 14 MiB held at once
                socks.append(unread(facade.port, ATTACKERS[i % len(ATTACKERS)], sql))
                settled(facade, answered=i + 2)
            t0 = time.monotonic()
            while get(facade.port, "SELECT 1", FRESH) != (200, b"1\n"):
                assert time.monotonic() - t0 < 60, "a fresh client was starved"  # liveness bound
                time.sleep(0.2)
        growth = rss.peak - base
        assert growth < bound, f"RSS grew {growth >> 20} MiB, over the {bound >> 20} MiB bound"
        st = facade.stats()
        assert st["replies_cut_slow"] >= 1 and st["refused_busy"] >= 1, st
    finally:
        for s in socks:
            s.close()
    # Every slot is free again: an attacker's address is served too.
    assert get(facade.port, "SELECT 1", ATTACKERS[0]) == (200, b"1\n")
