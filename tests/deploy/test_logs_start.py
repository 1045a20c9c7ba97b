"""A command that cannot start prints one verdict, not the client's retry chatter: `ragpulse
scorer` with no broker printed some 40 kafka ERROR lines and then `KafkaTimeoutError:
KafkaTimeoutError: Unable to bootstrap ...` (the class named twice)."""

from __future__ import annotations

import logging

import pytest
from kafka.errors import KafkaTimeoutError

from ragpulse.deploy.logs import describe_error, quiet_logger


def test_describe_error_names_the_class_once() -> None:
    assert describe_error(KafkaTimeoutError("Unable to bootstrap from ['127.0.0.1:9']")) == \
        "KafkaTimeoutError: Unable to bootstrap from ['127.0.0.1:9']"
    assert str(KafkaTimeoutError("x")).startswith("KafkaTimeoutError")  # why: kafka's own str
    assert describe_error(ValueError("bad")) == "ValueError: bad"
    assert describe_error(RuntimeError()) == "RuntimeError"


def test_quiet_logger_holds_the_client_logs_while_starting(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("kafka.net.connection")
    root = logging.getLogger()
    before = root.level
    root.setLevel(logging.WARNING)
    try:
        with caplog.at_level(logging.WARNING), quiet_logger("kafka"):
            log.error("connect attempt to 127.0.0.1:9 failed")
        assert "connect attempt" not in caplog.text
        log.error("after start-up, errors show again")
        assert "after start-up" in caplog.text
        root.setLevel(logging.DEBUG)  # asked for the detail: nothing is held
        with quiet_logger("kafka"):
            log.error("shown at DEBUG")
        assert "shown at DEBUG" in caplog.text
        assert logging.getLogger("kafka").level == logging.NOTSET  # restored
    finally:
        root.setLevel(before)
