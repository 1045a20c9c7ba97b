"""Kafka fixtures: a real tansu broker (memory storage) on a free loopback port.

``kafka_broker`` gives each test its own broker (clean topics, no cross-test state);
``kafka_broker_module`` shares one per test module for suites that isolate by topic name
(see :func:`unique_topic`). Both yield a started :class:`ragpulse.deploy.broker.TansuBroker`;
use ``broker.bootstrap`` for ``bootstrap_servers``. Registered in ``tests/conftest.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from ragpulse.deploy.broker import TansuBroker


def unique_topic(prefix: str = "t") -> str:
    """A topic name no other test uses, e.g. ``t_1a2b3c4d``."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kafka_broker() -> Iterator[TansuBroker]:
    """A fresh tansu broker for one test; SIGKILLed (memory storage) and reaped afterwards."""
    broker = TansuBroker().start()
    try:
        yield broker
    finally:
        broker.shutdown()


@pytest.fixture(scope="module")
def kafka_broker_module() -> Iterator[TansuBroker]:
    """One tansu broker shared by the tests of a module; isolate them with unique topic names."""
    broker = TansuBroker().start()
    try:
        yield broker
    finally:
        broker.shutdown()
