"""librdkafka's log goes through ragpulse's logging: with Kafka unreachable, one clear,
rate-limited line ("waiting for Kafka at HOST:PORT: connection refused; retrying") instead of
librdkafka's own FAIL line on stderr about every 50 ms. Real librdkafka clients, a closed port."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys

import pytest

from ragpulse.collector.kafka import RdkafkaLog, topic_partitions
from ragpulse.common import KafkaUnavailable
from ragpulse.deploy.broker import free_port

CLI = [sys.executable, "-m", "ragpulse.deploy.cli", "collector"]


def test_unreachable_kafka_is_one_clear_line_not_a_flood() -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
    env["RAGPULSE_KAFKA__BOOTSTRAP_TIMEOUT_MS"] = "3000"
    proc = subprocess.run(
        [*CLI, "--kafka", f"127.0.0.1:{port}", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"],
        env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and f"is Kafka reachable at 127.0.0.1:{port}?" in proc.stderr
    assert not re.search(r"^%\d\|", proc.stderr, re.M), proc.stderr[:2000]  # librdkafka's printer
    waiting = [ln for ln in proc.stderr.splitlines() if "waiting for Kafka" in ln]
    # 3 s of retries every ~50 ms: one line (the limit is one per 10 s)
    assert len(waiting) == 1, proc.stderr
    assert waiting[0].endswith(f"WARNING ragpulse.collector.rdkafka: waiting for Kafka at "
                               f"127.0.0.1:{port}: connection refused; retrying")


def test_repeats_are_counted_in_the_next_line(caplog: pytest.LogCaptureFixture) -> None:
    from confluent_kafka.admin import AdminClient

    port = free_port()
    rd = RdkafkaLog("ragpulse.collector.rdkafka.test", interval_s=1.0)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}, logger=rd)
    with caplog.at_level(logging.DEBUG, logger="ragpulse.collector"), \
            pytest.raises(KafkaUnavailable):
        topic_partitions(admin, "t", 2.5)
    lines = [r.getMessage() for r in caplog.records if r.name == rd.name
             and r.levelno == logging.WARNING]
    assert 2 <= len(lines) <= 4, lines
    assert lines[0] == f"waiting for Kafka at 127.0.0.1:{port}: connection refused; retrying"
    assert re.fullmatch(rf"waiting for Kafka at 127\.0\.0\.1:{port}: connection refused; "
                        r"retrying \(\d+ more attempts since the last line\)", lines[1]), lines
