"""Collector throughput: OTLP/HTTP protobuf → collector → Kafka (tansu), ragpulse vs rotel.

Both collectors get the same load on the same broker in one run: pre-serialized realistic RAG
requests (by default 20 traces of 5 RAG spans, ~55 KiB; tests/collector/payloads.py), sent by 1
and by 4 sender processes over keep-alive connections as fast as the collector answers (429/503
are honoured with a short back-off and retried; one sender is one OTLP exporter, which sends one
request at a time, so its rate is the collector's latency). Each collector runs as its own
process:

* ragpulse: ``ragpulse collector`` (RAG filter on, one lz4 record per trace, acks=all);
* rotel: ``rotel-agent`` with the kafka exporter (protobuf, lz4, acks=all, ``--batch-max-size
  1000``; it packs many traces into one unkeyed record).

Spans delivered per second are measured at Kafka: after the run every record of the topic is
read back, its spans counted, and the rate is ``spans in Kafka / (newest record timestamp -
first request)``; a record's timestamp is set by the producer just before it is acknowledged,
so queued-but-unacknowledged spans do not count. CPU seconds of each collector process (and of
the broker) come from /proc, giving spans per CPU-second ("per core").

Usage (from the repository root; rotel lives in its own venv, see docs/benchmarks.md):
    .venv/bin/python bench/collector.py [--senders 1,4] [--workers 1,2] [--write-docs]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragpulse.common import KafkaSettings, ensure_topic
from ragpulse.deploy.broker import TansuBroker, free_port
from tests.collector.payloads import rag_request

DEFAULT_ROTEL = REPO / "bench/.venv-rotel/lib/python3.11/site-packages/rotel/rotel-agent"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (and its reaped children) from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def children_of(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(c) for c in f.read().split()]


def build_requests(count: int, traces: int, words: int, rag_only: bool) -> list[bytes]:
    return [rag_request(traces, seed=1000 + i, words=words, rag_only=rag_only).SerializeToString()
            for i in range(count)]


def sender(port: int, bodies: list[bytes], spans_per_body: list[int], deadline: float,
           results: Any) -> None:
    """Send bodies round-robin until ``deadline``; report (accepted spans, requests, refusals, errors).

    A lean HTTP/1.1 keep-alive client over a raw socket (pre-built request bytes, minimal
    response parsing), so the load generator costs far less CPU than the collectors it drives.
    """
    import socket

    requests_ = [
        (b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
         b"Content-Length: %d\r\n\r\n" % len(body)) + body
        for body in bodies
    ]
    accepted = requests = refused = errors = 0
    i = os.getpid()
    sock: socket.socket | None = None
    buf = b""
    while time.time() < deadline:
        k = i % len(bodies)
        i += 1
        try:
            if sock is None:
                sock = socket.create_connection(("127.0.0.1", port), timeout=60)
                buf = b""
            sock.sendall(requests_[k])
            while b"\r\n\r\n" not in buf:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("closed")
                buf += chunk
            head, _, buf = buf.partition(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            length = 0
            close = False
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"connection" and value.strip().lower() == b"close":
                    close = True
            while len(buf) < length:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("closed")
                buf += chunk
            buf = buf[length:]
            if close:
                sock.close()
                sock = None
        except (OSError, ValueError, IndexError):
            errors += 1
            if sock is not None:
                sock.close()
            sock = None
            time.sleep(0.05)
            continue
        requests += 1
        if status == 200:
            accepted += spans_per_body[k]
        elif status in (429, 503):
            refused += 1
            time.sleep(0.02)  # a client backing off; the collector's queue is full
        else:
            errors += 1
    if sock is not None:
        sock.close()
    results.put((accepted, requests, refused, errors))


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
    import socket

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"collector exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def count_topic(settings: KafkaSettings) -> tuple[int, int, int, int]:
    """(records, spans, keyed records, newest timestamp ms) of every record in the topic."""
    consumer = KafkaConsumer(**settings.client_kwargs(), enable_auto_commit=False,
                             max_poll_records=5000, fetch_max_bytes=64 << 20,
                             max_partition_fetch_bytes=16 << 20)
    try:
        parts = sorted(consumer.partitions_for_topic(settings.topic) or [])
        tps = [TopicPartition(settings.topic, p) for p in parts]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        records = spans = keyed = 0
        newest = 0
        idle = 0
        while idle < 4:
            batch = consumer.poll(timeout_ms=500)
            if not batch:
                idle += 1
                continue
            idle = 0
            for recs in batch.values():
                for r in recs:
                    records += 1
                    keyed += bool(r.key)
                    newest = max(newest, r.timestamp)
                    msg = ExportTraceServiceRequest.FromString(r.value)
                    spans += sum(len(ss.spans) for rs in msg.resource_spans for ss in rs.scope_spans)
        return records, spans, keyed, newest
    finally:
        consumer.close()


def run_one(name: str, cmd: list[str], http_port: int, settings: KafkaSettings, broker: TansuBroker,
            bodies: list[bytes], spans_per_body: list[int], seconds: float, senders: int,
            env: dict[str, str]) -> dict[str, Any]:
    ensure_topic(settings, partitions=6)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_port(http_port, proc)
        # Let the producer connect and any workers start, so start-up CPU is not counted.
        time.sleep(1.0 if "--workers" not in cmd or cmd[cmd.index("--workers") + 1] == "1" else 3.0)
        cpu0 = cpu_seconds(proc.pid) + sum(cpu_seconds(c) for c in children_of(proc.pid))
        broker_cpu0 = cpu_seconds(broker.pid or 0)
        results: Any = mp.Queue()
        start = time.time()
        workers = [mp.Process(target=sender, args=(http_port, bodies, spans_per_body, start + seconds, results))
                   for _ in range(senders)]
        for w in workers:
            w.start()
        totals = [results.get(timeout=seconds + 120) for _ in workers]
        for w in workers:
            w.join()
        sent_end = time.time()
        # Graceful stop: both collectors flush what they accepted on SIGTERM. Reap with wait4
        # to get the process's total CPU time (its /proc entry is gone once it exits).
        proc.send_signal(signal.SIGTERM)
        cpu = reap_cpu(proc, timeout_s=60) - cpu0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    broker_cpu = cpu_seconds(broker.pid or 0) - broker_cpu0
    records, spans, keyed, newest_ms = count_topic(settings)
    accepted = sum(t[0] for t in totals)
    elapsed = max(newest_ms / 1000.0 - start, sent_end - start)
    admin = KafkaAdminClient(**settings.client_kwargs())
    try:
        admin.delete_topics([settings.topic])  # frees the memory broker's copy
    finally:
        admin.close()
    return {
        "name": name,
        "spans_in_kafka": spans,
        "records": records,
        "keyed_records": keyed,
        "accepted_spans": accepted,
        "requests": sum(t[1] for t in totals),
        "refused": sum(t[2] for t in totals),
        "errors": sum(t[3] for t in totals),
        "seconds": elapsed,
        "spans_per_s": spans / elapsed if elapsed else 0.0,
        "cpu_s": cpu if cpu is not None else float("nan"),
        "broker_cpu_s": broker_cpu,
    }


def reap_cpu(proc: subprocess.Popen[bytes], timeout_s: float) -> float:
    """Wait for ``proc`` to exit (SIGKILL after ``timeout_s``); its user+system CPU seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            proc.kill()
        time.sleep(0.1)


def stage_costs(broker: TansuBroker, bodies: list[bytes], spans_per_body: list[int], rounds: int = 10) -> dict[str, float]:
    """CPU microseconds per span of each stage, in this process (process_time covers the
    producer's sender thread too): upb validation, the byte-level split + RAG filter, and the
    kafka-python produce path (send, lz4, network, acknowledgement callbacks)."""
    from ragpulse.collector.config import CollectorSettings
    from ragpulse.collector.exporter import KafkaExporter
    from ragpulse.collector.split import split_request

    spans = sum(spans_per_body) * rounds
    out: dict[str, float] = {}
    t = time.process_time()
    for _ in range(rounds):
        for body in bodies:
            ExportTraceServiceRequest.FromString(body)
    out["validate"] = (time.process_time() - t) / spans * 1e6
    t = time.process_time()
    for _ in range(rounds):
        for body in bodies:
            split_request(body)
    out["split"] = (time.process_time() - t) / spans * 1e6
    records = [split_request(body).records for body in bodies]
    settings = CollectorSettings.model_validate({
        "otlp": {"http_port": 0, "grpc_port": 0},
        "kafka": {"bootstrap_servers": broker.bootstrap, "topic": "bench_stages"},
    })
    exporter = KafkaExporter(settings)
    exporter.start()
    try:
        t = time.process_time()
        for _ in range(rounds):
            for recs in records:
                exporter.export(recs)
    finally:
        exporter.shutdown()  # flushes: every record acknowledged before the clock stops
    out["export"] = (time.process_time() - t) / spans * 1e6
    out["export_kafka_python"] = kafka_python_produce_cost(broker, records, rounds) / spans * 1e6
    out["record_bytes"] = sum(len(r.value) for recs in records for r in recs) / sum(len(recs) for recs in records)
    admin = KafkaAdminClient(**settings.kafka.client_kwargs())
    try:
        admin.delete_topics([settings.kafka.topic])
    finally:
        admin.close()
    return out


def kafka_python_produce_cost(broker: TansuBroker, records: list[list[Any]], rounds: int) -> float:
    """CPU seconds kafka-python (the card's client) spends producing the same keyed records with the
    same settings as the collector (lz4, acks=all, partition chosen by ragpulse's partitioner), flush
    included: the figure the producer choice in README's dependency table rests on."""
    from kafka import KafkaProducer

    from ragpulse.common import partition_for_key

    topic = "bench_stages_kafka_python"
    ensure_topic(KafkaSettings(bootstrap_servers=broker.bootstrap, topic=topic), partitions=6)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", compression_type="lz4",
                             linger_ms=5, batch_size=1 << 20, max_request_size=8 << 20)
    try:
        parts = sorted(producer.partitions_for(topic))
        t = time.process_time()
        for _ in range(rounds):
            for recs in records:
                for r in recs:
                    producer.send(topic, value=r.value, key=r.key, partition=partition_for_key(r.key, len(parts)))
        producer.flush()
        return time.process_time() - t
    finally:
        producer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=8.0, help="load duration per collector and sender count")
    parser.add_argument("--senders", type=lambda v: [int(x) for x in v.split(",")], default=[1, 4],
                        help="sender process counts, each measured for every collector, e.g. 1,4")
    parser.add_argument("--traces-per-request", type=int, default=20)
    parser.add_argument("--words", type=int, default=8, help="words per retrieved document")
    parser.add_argument("--with-plain-spans", action="store_true",
                        help="add each trace's HTTP root and database span (7 spans per trace, not 5)")
    parser.add_argument("--distinct-requests", type=int, default=24)
    parser.add_argument("--rotel", default=str(DEFAULT_ROTEL), help="rotel-agent binary")
    parser.add_argument("--only", choices=["ragpulse", "rotel"], help="run one collector only")
    parser.add_argument("--workers", type=lambda v: [int(x) for x in v.split(",")], default=[],
                        help="extra ragpulse runs with --workers N besides the default, e.g. 1,2")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds; the table shows medians")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()

    bodies = build_requests(args.distinct_requests, args.traces_per_request, args.words,
                            not args.with_plain_spans)
    spans_per_body = [
        sum(len(ss.spans) for rs in ExportTraceServiceRequest.FromString(b).resource_spans for ss in rs.scope_spans)
        for b in bodies
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
    load_before = os.getloadavg()
    rows = []
    with TansuBroker() as broker:
        print("measuring stage costs ...", flush=True)
        stages = stage_costs(broker, bodies, spans_per_body)
        runs = []
        if args.only in (None, "ragpulse"):
            for workers in [None, *args.workers]:
                port = free_port()
                settings = KafkaSettings(bootstrap_servers=broker.bootstrap,
                                         topic=f"bench_ragpulse_{workers or 'default'}")
                cmd = [str(REPO / ".venv/bin/ragpulse"), "collector", "--kafka", broker.bootstrap, "--topic",
                       settings.topic, "--http", f"127.0.0.1:{port}", "--no-grpc", "--status-interval", "0",
                       "--log-level", "WARNING"]
                if workers is not None:
                    cmd += ["--workers", str(workers)]
                name = "ragpulse (default)" if workers is None else f"ragpulse --workers {workers}"
                runs.append((name, cmd, port, settings))
        if args.only in (None, "rotel"):
            if not Path(args.rotel).exists():
                sys.exit(f"rotel not found at {args.rotel}: python3 -m venv bench/.venv-rotel && "
                         "bench/.venv-rotel/bin/pip install --pre rotel")
            port = free_port()
            settings = KafkaSettings(bootstrap_servers=broker.bootstrap, topic="bench_rotel")
            cmd = [args.rotel, "start", "--otlp-http-endpoint", f"127.0.0.1:{port}",
                   "--otlp-grpc-endpoint", f"127.0.0.1:{free_port()}", "--exporter", "kafka",
                   "--kafka-exporter-brokers", broker.bootstrap, "--kafka-exporter-traces-topic", settings.topic,
                   "--kafka-exporter-format", "protobuf", "--kafka-exporter-acks", "all",
                   "--kafka-exporter-compression", "lz4", "--batch-max-size", "1000",
                   "--otlp-receiver-metrics-disabled", "--otlp-receiver-logs-disabled"]
            runs.append(("rotel", cmd, port, settings))
        # Interleaved rounds (A B C, A B C, ...): the machine's load drifts, and each collector
        # should see the same drift. Fresh ports per round (a stopped socket may linger).
        for round_ in range(args.repeat):
            for senders in args.senders:
                for name, cmd, port, settings in runs:
                    new_port = free_port()
                    topic = f"{settings.topic}_r{round_}_s{senders}"
                    round_cmd = [c.replace(f"127.0.0.1:{port}", f"127.0.0.1:{new_port}") for c in cmd]
                    round_cmd = [topic if c == settings.topic else c for c in round_cmd]
                    print(f"round {round_ + 1}: {name}, {senders} sender(s) ...", flush=True)
                    row = run_one(name, round_cmd, new_port, settings.model_copy(update={"topic": topic}),
                                  broker, bodies, spans_per_body, args.seconds, senders, env)
                    row["senders"] = senders
                    rows.append(row)
                    print(f"  {row['spans_per_s']:,.0f} spans/s", flush=True)
    load_after = os.getloadavg()
    report = render(rows, args, load_before, load_after, sum(spans_per_body) // len(spans_per_body),
                    sum(map(len, bodies)) // len(bodies), stages)
    print(report)
    if args.write_docs:
        write_section(REPO / "docs/benchmarks.md", report)


def render(rows: list[dict[str, Any]], args: Any, load_before: tuple[float, ...], load_after: tuple[float, ...],
           spans_per_request: int, bytes_per_request: int, stages: dict[str, float]) -> str:
    senders_arg = ",".join(map(str, args.senders))
    workers_arg = f" --workers {','.join(map(str, args.workers))}" if args.workers else ""
    lines = [
        "## Collector throughput",
        "",
        f"OTLP/HTTP protobuf → collector → tansu (memory, 6 partitions); requests of {spans_per_request} spans "
        f"({args.traces_per_request} RAG traces) / {bytes_per_request // 1024} KiB, pre-serialized "
        "(`tests/collector/payloads.py`), sent over keep-alive connections by 1 or more sender processes as fast "
        "as the collector answers; ragpulse and rotel (`rotel-agent`, kafka exporter, protobuf, lz4, acks=all, "
        "batch 1000) in the same run on the same broker, interleaved. Spans delivered/s = spans read back from "
        "the topic ÷ (newest record timestamp − first request). CPU = user+system seconds of the collector's "
        "processes (wait4), first request to exit after the flush.",
        "",
        f"Command: `.venv/bin/python bench/collector.py --senders {senders_arg}{workers_arg} --seconds "
        f"{args.seconds:g} --repeat {args.repeat} --write-docs` (rotel: `python3 -m venv bench/.venv-rotel && "
        "bench/.venv-rotel/bin/pip install --pre rotel`).  ",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} cores; load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after.",
        "",
        f"| senders | collector | spans delivered/s, median of {args.repeat} (min–max) | ratio to rotel | "
        "spans per collector CPU-s | collector cores used | records (keyed) | 429/503 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in rows:
        r["per_cpu"] = r["spans_in_kafka"] / r["cpu_s"] if r["cpu_s"] and r["cpu_s"] == r["cpu_s"] else float("nan")
        groups.setdefault((r["senders"], r["name"]), []).append(r)
    medians = {key: statistics.median(r["spans_per_s"] for r in runs) for key, runs in groups.items()}
    for (senders, name), runs in groups.items():
        rates = sorted(r["spans_per_s"] for r in runs)
        rotel = medians.get((senders, "rotel"))
        ratio = f"{medians[(senders, name)] / rotel:.2f}" if rotel and name != "rotel" else "-"
        lines.append(
            f"| {senders} | {name} | **{medians[(senders, name)]:,.0f}** ({rates[0]:,.0f}–{rates[-1]:,.0f}) | "
            f"{ratio} | {statistics.median(r['per_cpu'] for r in runs):,.0f} | "
            f"{sum(r['cpu_s'] for r in runs) / sum(r['seconds'] for r in runs):.2f} | "
            f"{sum(r['records'] for r in runs):,} ({sum(r['keyed_records'] for r in runs):,}) | "
            f"{sum(r['refused'] for r in runs)} |"
        )
    total = stages["validate"] + stages["split"] + stages["export"]
    lines += [
        "",
        "Where a ragpulse collector's CPU goes, in-process, CPU µs per span (records average "
        f"{stages['record_bytes'] / 1024:.1f} KiB = one trace):",
        "",
        "| stage | µs/span | share |",
        "|---|---|---|",
    ]
    for name, label in (("validate", "upb parse (validation → 400)"),
                        ("split", "byte-level split per trace + RAG filter"),
                        ("export", "produce with librdkafka (confluent-kafka): partition, send, lz4, network, acks")):
        lines.append(f"| {label} | {stages[name]:.1f} | {stages[name] / total:.0%} |")
    lines.append(f"| total (no HTTP) | {total:.1f} | = {1e6 / total:,.0f} spans per CPU-s |")
    kp = stages.get("export_kafka_python")
    if kp:
        lines.append(f"| *for comparison:* the same records produced with kafka-python | {kp:.1f} | "
                     f"{kp / stages['export']:.1f}x librdkafka's cost |")
    lines += ["", *verdict(medians, load_before[0])]
    return "\n".join(lines) + "\n"


# Issue 14's targets: ragpulse at its default settings against rotel, per sender count.
TARGETS = {1: 0.35, 4: 0.5}


def verdict(medians: dict[tuple[int, str], float], load_before: float) -> list[str]:
    """One line per sender count with a target: the default ragpulse / rotel ratio and whether it holds."""
    out = []
    for senders, target in TARGETS.items():
        ours, rotel = medians.get((senders, "ragpulse (default)")), medians.get((senders, "rotel"))
        if ours and rotel:
            ratio = ours / rotel
            out.append(f"* {senders} sender(s), default settings: {ratio:.2f}x rotel, target >= {target:g}x: "
                       f"{'met' if ratio >= target else 'missed'}.")
    out.append(
        "* Records: ragpulse writes one keyed record per trace (otelcol-contrib's kafka exporter with "
        "`partition_traces_by_id: true` does the same), rotel a few large unkeyed batches; the per-record "
        "produce path is librdkafka (confluent-kafka), chosen by the last row of the stage table."
        + ("" if load_before < 1 else " Load average was >= 1 before the run: re-run on a quiet machine."))
    return out


def write_section(path: Path, section: str) -> None:
    """Replace (or append) the '## Collector throughput' section, leaving the rest untouched."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    start = text.find("## Collector throughput")
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + (text[end + 1:] if end >= 0 else "")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


if __name__ == "__main__":
    main()
