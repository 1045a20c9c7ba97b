"""Collector throughput: OTLP/HTTP protobuf → collector → Kafka (tansu), ragpulse vs rotel.

Both collectors get the same load on the same broker in one run: pre-serialized realistic RAG
requests (~490 spans, ~350 KiB each; tests/collector/payloads.py), sent by several sender
processes over keep-alive connections as fast as the collector answers (429/503 are honoured
with a short back-off and retried). Each collector runs as its own process:

* ragpulse: ``ragpulse collector`` (RAG filter on, one lz4 record per trace, acks=all);
* rotel: ``rotel-agent`` with the kafka exporter (protobuf, lz4, acks=all, ``--batch-max-size
  1000``; it packs many traces into one unkeyed record).

Spans delivered per second are measured at Kafka: after the run every record of the topic is
read back, its spans counted, and the rate is ``spans in Kafka / (newest record timestamp -
first request)``; a record's timestamp is set by the producer just before it is acknowledged,
so queued-but-unacknowledged spans do not count. CPU seconds of each collector process (and of
the broker) come from /proc, giving spans per CPU-second ("per core").

Usage (from the repository root; rotel lives in its own venv, see docs/benchmarks.md):
    .venv/bin/python bench/collector.py --seconds 10 --senders 4 [--write-docs]
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

from ragpulse.collector.kafka import KafkaSettings, ensure_topic
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


def build_requests(count: int, traces: int) -> list[bytes]:
    return [rag_request(traces, seed=1000 + i).SerializeToString() for i in range(count)]


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
    out["record_bytes"] = sum(len(r.value) for recs in records for r in recs) / sum(len(recs) for recs in records)
    admin = KafkaAdminClient(**settings.kafka.client_kwargs())
    try:
        admin.delete_topics([settings.kafka.topic])
    finally:
        admin.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="load duration per collector")
    parser.add_argument("--senders", type=int, default=4, help="concurrent sender processes")
    parser.add_argument("--traces-per-request", type=int, default=70, help="7 spans each: 70 → 490 spans")
    parser.add_argument("--distinct-requests", type=int, default=24)
    parser.add_argument("--rotel", default=str(DEFAULT_ROTEL), help="rotel-agent binary")
    parser.add_argument("--only", choices=["ragpulse", "rotel"], help="run one collector only")
    parser.add_argument("--workers", type=lambda v: [int(x) for x in v.split(",")], default=[1, 2],
                        help="ragpulse collector process counts to run, e.g. 1,2")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds; the table shows medians")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()

    bodies = build_requests(args.distinct_requests, args.traces_per_request)
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
            for workers in args.workers:
                port = free_port()
                settings = KafkaSettings(bootstrap_servers=broker.bootstrap, topic=f"bench_ragpulse_{workers}")
                cmd = [str(REPO / ".venv/bin/ragpulse"), "collector", "--kafka", broker.bootstrap, "--topic",
                       settings.topic, "--http", f"127.0.0.1:{port}", "--no-grpc", "--status-interval", "0",
                       "--log-level", "WARNING", "--workers", str(workers)]
                runs.append((f"ragpulse, {workers} process{'es' if workers > 1 else ''}", cmd, port, settings))
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
            for name, cmd, port, settings in runs:
                new_port = free_port()
                topic = f"{settings.topic}_r{round_}"
                round_cmd = [c.replace(f"127.0.0.1:{port}", f"127.0.0.1:{new_port}") for c in cmd]
                round_cmd = [topic if c == settings.topic else c for c in round_cmd]
                print(f"round {round_ + 1}: {name} ...", flush=True)
                rows.append(run_one(name, round_cmd, new_port, settings.model_copy(update={"topic": topic}),
                                    broker, bodies, spans_per_body, args.seconds, args.senders, env))
    load_after = os.getloadavg()
    report = render(rows, args, load_before, load_after, sum(spans_per_body) // len(spans_per_body),
                    sum(map(len, bodies)) // len(bodies), stages)
    print(report)
    if args.write_docs:
        write_section(REPO / "docs/benchmarks.md", report)


def render(rows: list[dict[str, Any]], args: Any, load_before: tuple[float, ...], load_after: tuple[float, ...],
           spans_per_request: int, bytes_per_request: int, stages: dict[str, float]) -> str:
    lines = [
        "## Collector throughput",
        "",
        f"OTLP/HTTP protobuf → collector → tansu (memory, 6 partitions), {args.senders} sender processes, "
        f"{args.seconds:g} s per collector, requests of {spans_per_request} spans / {bytes_per_request // 1024} KiB "
        "(pre-serialized RAG traces: HTTP root, CHAIN, EMBEDDING, RETRIEVER with 5 documents, RERANKER, LLM, DB; "
        "`tests/collector/payloads.py`). Spans delivered/s = spans read back from the topic ÷ (newest record "
        "timestamp − first request). CPU = user+system seconds of the collector process and its workers (wait4), from the "
        "first request to its exit after the flush.",
        "",
        f"Command: `.venv/bin/python bench/collector.py --seconds {args.seconds:g} --senders {args.senders} "
        f"--workers {','.join(map(str, args.workers))} --repeat {args.repeat}`"
        " (rotel: `python3 -m venv bench/.venv-rotel && bench/.venv-rotel/bin/pip install --pre rotel`).",
        f"Machine: {os.cpu_count()} cores shared with other engineers' work; load average before "
        f"{load_before[0]:.2f} / after {load_after[0]:.2f} (`uptime`). Numbers are noisy; re-run on a quiet machine.",
        "",
        f"| collector | spans delivered/s, median of {args.repeat} (min–max) | spans in Kafka (all rounds) | "
        "records (keyed) | accepted by HTTP | 429/503 | collector CPU s (cores used) | spans per collector CPU-s (median) | "
        "broker CPU s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    by_name: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        r["per_cpu"] = r["spans_in_kafka"] / r["cpu_s"] if r["cpu_s"] and r["cpu_s"] == r["cpu_s"] else float("nan")
        by_name.setdefault(r["name"], []).append(r)
    medians: dict[str, float] = {}
    for name, runs in by_name.items():
        rates = sorted(r["spans_per_s"] for r in runs)
        medians[name] = statistics.median(rates)
        lines.append(
            f"| {name} | **{medians[name]:,.0f}** ({rates[0]:,.0f}–{rates[-1]:,.0f}) | "
            f"{sum(r['spans_in_kafka'] for r in runs):,} | {sum(r['records'] for r in runs):,} "
            f"({sum(r['keyed_records'] for r in runs):,}) | {sum(r['accepted_spans'] for r in runs):,} | "
            f"{sum(r['refused'] for r in runs)} | {sum(r['cpu_s'] for r in runs):.1f} "
            f"({sum(r['cpu_s'] for r in runs) / sum(r['seconds'] for r in runs):.2f} cores) | "
            f"{statistics.median(r['per_cpu'] for r in runs):,.0f} | {sum(r['broker_cpu_s'] for r in runs):.1f} |"
        )
    total = stages["validate"] + stages["split"] + stages["export"]
    lines += [
        "",
        "Where a ragpulse collector's CPU goes (same run, in-process, CPU µs per span; "
        f"records average {stages['record_bytes'] / 1024:.1f} KiB = one trace):",
        "",
        "| stage | µs/span | share |",
        "|---|---|---|",
    ]
    for name, label in (("validate", "upb parse (validation → 400)"),
                        ("split", "byte-level split per trace + RAG filter"),
                        ("export", "kafka-python produce: send, lz4, network, acks")):
        lines.append(f"| {label} | {stages[name]:.1f} | {stages[name] / total:.0%} |")
    lines.append(f"| total (no HTTP) | {total:.1f} | = {1e6 / total:,.0f} spans per CPU-s |")
    if medians.get("rotel"):
        lines.append("")
        for name, median in medians.items():
            if name != "rotel":
                lines.append(f"* {name} / rotel (medians) = {median / medians['rotel']:.2f}")
    lines += [
        "",
        "Reading it: ragpulse produces one Kafka record per trace (what otelcol's kafka exporter does with "
        "`partition_traces_by_id: true`), about 70 times more records than rotel's unkeyed 1000-span batches, "
        "and kafka-python's per-record path is Python: it is most of the collector's CPU (stage table), while "
        "decoding and splitting on the wire bytes cost a few µs per span. One Python process uses one core; "
        "`ragpulse collector --workers N` runs N processes on the same ports (SO_REUSEPORT) to use more. "
        "\"cores used\" well below the machine's cores means a collector was held back by the shared machine "
        "or the senders, not by its own CPU: compare spans per CPU-s for efficiency, and re-run on a quiet "
        "machine for absolute rates.",
    ]
    return "\n".join(lines) + "\n"


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
