"""The log filter every command installs masks credential values, whatever library logs them."""

from __future__ import annotations

import logging

import pytest

from ragpulse.deploy.logs import SecretFilter, mask_secrets


@pytest.mark.parametrize(("line", "secret"), [
    ("Starting KafkaAdminClient with configuration: {'sasl_plain_password': 'kafka-s3cret'}", "kafka-s3cret"),
    ('{"api_key": "sk-live-123"}', "sk-live-123"),
    ("cannot connect to http://svc:ch-s3cret@127.0.0.1:8123/", "ch-s3cret"),
    ("Authorization: Bearer abc.def.ghi", "abc.def.ghi"),
    ("authorization=Basic eHl6OnB3", "eHl6OnB3"),
    ("password=hunter2 user=svc", "hunter2"),
    ("client_secret: 'two words'", "two words"),
])
def test_values_are_masked(line: str, secret: str) -> None:
    masked = mask_secrets(line)
    assert secret not in masked and "***" in masked


@pytest.mark.parametrize("line", ["tokens_per_hour=5000", "sasl_plain_username='svc'",
                                  "prompt_tokens: 120", "no secrets here"])
def test_other_values_are_left_alone(line: str) -> None:
    assert mask_secrets(line) == line


def test_filter_rewrites_formatted_records(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("kafka.admin.client")
    handler = caplog.handler
    handler.addFilter(SecretFilter())
    try:
        with caplog.at_level(logging.DEBUG, logger="kafka"):
            log.debug("Starting with configuration: %s", {"sasl_plain_password": "pw-123"})
    finally:
        handler.filters.clear()
    assert "pw-123" not in caplog.text and "'sasl_plain_password': '***'" in caplog.text
