"""The one refusal table both OTLP transports answer from."""

from __future__ import annotations

import pytest
from google.rpc import code_pb2

from ragpulse.collector.exporter import ExportUnavailable, QueueFull
from ragpulse.collector.refusals import Busy, ShuttingDown, TooLarge, Unauthenticated, refusal_for
from ragpulse.collector.split import MalformedRequest


@pytest.mark.parametrize(("exc", "http", "rpc", "retry"), [
    (Unauthenticated(), 401, code_pb2.UNAUTHENTICATED, None),
    (TooLarge("body exceeds 10 bytes"), 413, code_pb2.RESOURCE_EXHAUSTED, None),
    (MalformedRequest("not protobuf"), 400, code_pb2.INVALID_ARGUMENT, None),
    (QueueFull("queue full", 7), 429, code_pb2.RESOURCE_EXHAUSTED, 7),
    (Busy("too many calls"), 429, code_pb2.RESOURCE_EXHAUSTED, 3),
    (ExportUnavailable("kafka down", 9), 503, code_pb2.UNAVAILABLE, 9),
    (ShuttingDown(), 503, code_pb2.UNAVAILABLE, 3),
])
def test_each_refusal_maps_to_the_spec_pair(exc: Exception, http: int, rpc: int, retry: int | None) -> None:
    r = refusal_for(exc, retry_after_s=3)
    assert (r.http_status, r.rpc_code, r.retry_after_s) == (http, rpc, retry)
    assert r.message == str(exc)


def test_anything_else_is_a_logged_internal_error_that_does_not_echo_the_request(
        caplog: pytest.LogCaptureFixture) -> None:
    r = refusal_for(KeyError("the secret question text"), retry_after_s=3)
    assert (r.http_status, r.rpc_code, r.retry_after_s) == (500, code_pb2.INTERNAL, None)
    assert "secret" not in r.message and "KeyError" in r.message
    (record,) = [r for r in caplog.records if r.name == "ragpulse.collector.refusals"]
    assert record.levelname == "ERROR" and record.exc_info[0] is KeyError


def test_a_table_refusal_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    refusal_for(MalformedRequest("not protobuf"), retry_after_s=3)
    assert not [r for r in caplog.records if r.name == "ragpulse.collector.refusals"]
