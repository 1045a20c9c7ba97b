"""The ClickHouse-HTTP facade's limits on one client, attacked over real sockets (issue 17):
password guessing (3,000 wrong passwords at ~1,480/s drew no 429 and no delay) and queries that
took the memory and the slots of everyone else."""

from __future__ import annotations

import base64
import http.client
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragpulse.deploy.facade import (
    COUNTERS,
    ClickHouseHttpFacade,
    FacadeSettings,
    LoginThrottle,
    build_facade,
)
from ragpulse.deploy.telemetry import StatsSource, render_prometheus, undeclared

OTHER_ADDRESS = "127.0.0.2"  # the whole of 127/8 is loopback on Linux: a second client address


@pytest.fixture
def guarded(chdb_dir: Path, rag_schema: Any) -> Iterator[ClickHouseHttpFacade]:
    f = build_facade(str(chdb_dir), FacadeSettings(
        database=rag_schema.database, username="grafana", password="pw", login_free_failures=3,
        login_lockout_s=30, advertise=False))
    f.start()
    yield f
    f.shutdown()


def request(f: ClickHouseHttpFacade, sql: str, *, password: str | None = None,
            source: str = "127.0.0.1", params: str = "") -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", f.port, timeout=60, source_address=(source, 0))
    headers = {}
    if password is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(f"grafana:{password}".encode()).decode()
    try:
        conn.request("POST", f"/?{params}", body=sql.encode(), headers=headers)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read().decode()
    finally:
        conn.close()


def test_failed_logins_are_throttled_per_address(guarded: ClickHouseHttpFacade) -> None:
    f = guarded
    statuses = [request(f, "SELECT 1", password=f"guess-{i}")[0] for i in range(50)]
    # Three wrong passwords are answered 401; the rest get 429 without being checked.
    assert statuses == [401] * 3 + [429] * 47
    status, headers, body = request(f, "SELECT 1", password="guess-x")
    assert status == 429 and headers["X-ClickHouse-Exception-Code"] == "516"
    assert 1 <= int(headers["Retry-After"]) <= 30 and "too many failed logins" in body
    # The right password from the locked-out address is refused too: a lucky guess tells nothing.
    assert request(f, "SELECT 1", password="pw")[0] == 429
    # Another address is not affected, and its own failures are its own.
    assert request(f, "SELECT 1", password="pw", source=OTHER_ADDRESS)[:3:2] == (200, "1\n")
    assert request(f, "SELECT 1", password="nope", source=OTHER_ADDRESS)[0] == 401
    assert request(f, "SELECT 1", password="pw", source=OTHER_ADDRESS)[0] == 200
    st = f.stats()
    assert st["refused_auth"] == 4 and st["refused_login_throttled"] == 49
    assert undeclared("facade", st) == [] and set(st) == set(COUNTERS)
    text = render_prometheus([StatsSource("facade", f.stats)])
    assert "ragpulse_facade_refused_login_throttled_total 49" in text.splitlines()


def test_the_lockout_grows_and_is_capped() -> None:
    now = [1000.0]
    t = LoginThrottle(free_failures=3, lockout_s=1.0, max_s=8.0, max_addresses=2,
                      clock=lambda: now[0])
    assert [t.failed("a") for _ in range(2)] == [0.0, 0.0] and t.retry_after("a") == 0
    waits = []
    for _ in range(6):
        waits.append(t.failed("a"))
        assert t.retry_after("a") == waits[-1]
        now[0] += waits[-1]  # the lockout ends; the next guess fails again
        assert t.retry_after("a") == 0
    assert waits == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    now[0] += 9.0  # quiet for longer than the longest lockout: the address starts over
    assert t.failed("a") == 0.0
    t.succeeded("a")
    assert [t.failed("a") for _ in range(3)] == [0.0, 0.0, 1.0]
    t.failed("b")
    t.failed("c")  # at most two addresses are remembered: the oldest ("a") goes
    assert t.retry_after("a") == 0
