"""Real framework apps under their real instrumentors, nothing in between.

Each test instruments one framework with one instrumentor for its own ``TracerProvider`` (an
in-memory exporter), runs an unmodified framework app (:mod:`.apps`) on fake models, and hands
the finished spans to the scorer the way production does: the SDK's OTLP protobuf encoder makes
an ``ExportTraceServiceRequest``, the scorer's :class:`SpanDecoder` reads it back, and
:func:`extract` runs on each trace. The versions are pinned in pyproject's ``compat`` extra.

No test here may use the network: a framework that downloads at import or run time (nltk data,
tiktoken encodings, a telemetry ping) fails its test, even if the framework swallows the error.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.openai_server import FakeOpenAIServer, Reply
from tests.scorer.traces.sdk import Recorder

from .apps import ANSWER


def _loopback(address: Any) -> bool:
    if not isinstance(address, tuple):  # AF_UNIX paths, socketpairs
        return True
    host = str(address[0])
    return host.startswith("127.") or host in ("::1", "localhost")


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Refuse every connection and name lookup beyond loopback, and fail the test if one was
    tried (libraries that download on first use often catch the error and go on)."""
    tried: list[str] = []
    connect = socket.socket.connect
    connect_ex = socket.socket.connect_ex
    getaddrinfo = socket.getaddrinfo

    def refuse(what: Any) -> OSError:
        tried.append(repr(what))
        return OSError(101, f"tests/compat: network access refused ({what!r})")

    def guarded_connect(self: socket.socket, address: Any) -> Any:
        if not _loopback(address):
            raise refuse(address)
        return connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> Any:
        if not _loopback(address):
            raise refuse(address)
        return connect_ex(self, address)

    def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None and not _loopback((host,)):
            raise refuse(host)
        return getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
    yield tried
    assert not tried, f"the app tried to reach the network: {tried}"


@pytest.fixture
def rec() -> Recorder:
    """A TracerProvider exporting into memory (service ``compat-app``, environment ``test``)."""
    return Recorder(service="compat-app", env="test")


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    """The project's OpenAI-compatible server on loopback; every chat completion is ANSWER."""
    with FakeOpenAIServer(handler=lambda _request: Reply(ANSWER)) as srv:
        yield srv
