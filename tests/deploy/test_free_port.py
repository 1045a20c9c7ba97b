"""``free_port`` draws below the kernel's ephemeral range: the CI failure it fixes was a health
port probed free, then taken (by an outgoing connection's source port or another bind-to-0
probe) before the collector bound it ("cannot start the health endpoint: [Errno 98]")."""

from __future__ import annotations

import socket

import pytest

from ragpulse.deploy import broker
from ragpulse.deploy.broker import free_port


def test_ports_come_from_below_the_ephemeral_range() -> None:
    low, _ = broker._ephemeral_range()
    if low - 20000 < 1000:
        pytest.skip(f"this machine's ephemeral range starts at {low}: nothing below to draw from")
    ports = {free_port() for _ in range(50)}
    assert all(20000 <= port < low for port in ports), sorted(ports)
    assert len(ports) > 40  # drawn at random, not one fixed port
    for port in list(ports)[:5]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # was free, is free


def test_a_held_port_is_never_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the draw narrowed to two ports, one held: the other comes back every time."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        other = taken + 1 if taken < 60000 else taken - 1
        monkeypatch.setattr(broker, "_ephemeral_range", lambda: (20000 + 1000, 61000))

        class TwoPorts:
            def __init__(self) -> None:
                self.flip = False

            def randrange(self, start: int, stop: int) -> int:
                self.flip = not self.flip
                return taken if self.flip else other

        import random

        monkeypatch.setattr(random, "SystemRandom", TwoPorts)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", other))
            except OSError:
                pytest.skip(f"port {other} is in use on this machine")
        assert {free_port() for _ in range(10)} == {other}


def test_a_range_with_no_room_below_falls_back_to_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(broker, "_ephemeral_range", lambda: (20500, 60999))
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
    assert not 20000 <= port < 20500
