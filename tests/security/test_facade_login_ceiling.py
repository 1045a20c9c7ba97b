"""Password guessing from many addresses against the facade (issue 38, item 6).

The login throttle was per address and forgot: 2,000 source addresses x 5 guesses gave 10,000
checked guesses at 1,066/s with no 429, and after 10,001 other addresses failed once a
locked-out address could guess again. Now failed checks have ceilings per configured login and
in total (token buckets), locked-out addresses are never the ones forgotten, and addresses that
logged in lately keep getting in while an attack spends the ceilings.

The end-to-end test uses distinct loopback sources (127.0.x.y: every one is a client address of
its own to the facade); the throttle's table and buckets are also tested with a hand-moved clock.
"""

from __future__ import annotations

import base64
import http.client
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragpulse.deploy.facade import ClickHouseHttpFacade, FacadeSettings, LoginThrottle, build_facade
from ragpulse.deploy.telemetry import StatsSource, render_prometheus

USER_BURST, USER_PER_S = 20, 1.0  # test-sized ceilings (defaults: 30 at 0.1/s, 100 at 1/s)


@pytest.fixture
def facade(chdb_dir: Path, rag_schema: Any) -> Iterator[ClickHouseHttpFacade]:
    f = build_facade(str(chdb_dir), FacadeSettings(
        database=rag_schema.database, username="grafana", password="right", advertise=False,
        login_user_ceiling_burst=USER_BURST, login_user_ceiling_per_s=USER_PER_S,
        login_ceiling_burst=50, login_ceiling_per_s=2.0))
    f.start()
    yield f
    f.shutdown()


def login(f: ClickHouseHttpFacade, source: str, password: str) -> tuple[int, dict[str, str]]:
    conn = http.client.HTTPConnection("127.0.0.1", f.port, timeout=30, source_address=(source, 0))
    basic = base64.b64encode(f"grafana:{password}".encode()).decode()
    try:
        conn.request("GET", "/?query=SELECT%201", headers={"Authorization": f"Basic {basic}"})
        r = conn.getresponse()
        r.read()
        return r.status, dict(r.getheaders())
    finally:
        conn.close()


def test_many_addresses_cannot_multiply_the_guesses(facade: ClickHouseHttpFacade) -> None:
    f = facade
    known = "127.0.3.1"
    assert login(f, known, "right")[0] == 200  # Grafana, say, before the attack
    # 200 addresses x 5 wrong passwords (each address stays under its own lockout).
    t0 = time.monotonic()
    outcomes = Counter(login(f, f"127.0.{1 + i // 250}.{1 + i % 250}", f"guess-{i}-{k}")[0]
                       for i in range(200) for k in range(5))
    elapsed = time.monotonic() - t0
    # Before: 1,000 x 401, every guess checked. Now the user name's ceiling decides.
    assert outcomes[401] <= USER_BURST + USER_PER_S * elapsed + 1, (outcomes, elapsed)
    assert outcomes[401] + outcomes[429] == 1000, outcomes
    # While the ceiling is spent: the known address gets in with its first request ...
    assert login(f, known, "right")[0] == 200
    # ... a new address waits for the ceiling's next token (Retry-After), its login unchecked,
    status, headers = login(f, "127.0.4.1", "right")
    if status == 429:
        assert headers["X-ClickHouse-Exception-Code"] == "516"
        assert 1 <= int(headers["Retry-After"]) <= 1 / USER_PER_S + 1
    # and with the attack over it gets in within a few tokens' time (a liveness bound).
    deadline = time.monotonic() + 10
    while status != 200:
        assert time.monotonic() < deadline, "the right password never got in"
        time.sleep(0.5)
        status, _ = login(f, "127.0.4.1", "right")
    st = f.stats()
    assert st["refused_login_ceiling"] >= outcomes[429] and st["refused_login_throttled"] == 0
    text = render_prometheus([StatsSource("facade", f.stats)])
    assert f"ragpulse_facade_refused_login_ceiling_total {st['refused_login_ceiling']}" in text


def test_failing_once_from_many_addresses_does_not_reset_a_lockout() -> None:
    now = [1000.0]
    t = LoginThrottle(5, 1.0, 300.0, clock=lambda: now[0])  # the default table: 10,000 addresses
    assert [t.failed("victim") for _ in range(5)] == [0, 0, 0, 0, 1.0]
    for i in range(10_001):  # the flush: each of 10,001 other addresses fails once
        t.failed(f"10.{i >> 16}.{(i >> 8) & 255}.{i & 255}")
    assert t.retry_after("victim") == 1.0  # still locked out (before: forgotten, 0)
    now[0] += 1.0
    assert t.failed("victim") == 2.0  # and its count kept: the next lockout doubles

    # A table full of addresses it may not forget fails closed for addresses it does not hold.
    t = LoginThrottle(2, 10.0, 60.0, max_addresses=3, clock=lambda: now[0])
    t.succeeded("grafana")  # a right login: a known address
    for address in ("a", "b", "c"):
        t.failed(address)
        t.failed(address)  # locked out for 10 s
    t.failed("d")
    assert t.retry_after("d") > 0 and t.retry_after("e") > 0  # refused, though never seen
    assert t.retry_after("grafana") == 0  # the known address is not
    assert all(t.retry_after(x) == 10.0 for x in "abc")


def test_the_ceilings_count_checks_not_addresses() -> None:
    now = [0.0]
    t = LoginThrottle(5, 1.0, 300.0, user_burst=30, user_per_s=0.1, global_burst=100,
                      global_per_s=1.0, clock=lambda: now[0])
    # The user name's ceiling: 30 checks from 1,000 addresses, then one every 10 s.
    admitted = [t.admit(f"10.0.{i >> 8}.{i & 255}", "user") == 0 for i in range(1000)]
    assert sum(admitted) == 30 and all(admitted[:30])
    assert t.admit("10.9.9.9", "user") == pytest.approx(10.0)
    now[0] += 10.0
    assert t.admit("10.9.9.9", "user") == 0 and t.admit("10.9.9.10", "user") > 0
    # Any other name spends the global ceiling only: 100 at once (31 spent above), 1 a second.
    others = sum(t.admit(f"10.1.{i >> 8}.{i & 255}", None) == 0 for i in range(1000))
    assert others == 100 - 31 + 10  # what was left, and what 10 s refilled
    # A right login gives its tokens back and makes its address known: exempt from both.
    t.succeeded("10.0.0.0", "user")  # its check, admitted first above, was right
    assert t.admit("10.2.0.1", None) == 0 and t.admit("10.2.0.2", None) > 0  # the token back
    assert t.admit("10.0.0.0", "user") == 0 and t.admit("10.0.0.0", None) == 0
    # Known for a day after its last right login, then it shares the ceilings again.
    now[0] += 86_400.0 + 1
    while t.admit("10.2.0.1", None) == 0:
        pass
    assert t.admit("10.0.0.0", None) > 0
