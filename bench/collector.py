"""Collector throughput: OTLP/HTTP protobuf → collector → Kafka (tansu), ragpulse vs rotel.

Both collectors get the same load on the same broker in one run, interleaved. Two loads:

* ``bench`` (default): this script's sender processes (``http.client`` keep-alive, as the
  independent tool), sending pre-built requests as fast as the collector answers (429/503 are
  honoured with a short back-off and retried; one sender is one OTLP exporter, which sends one
  request at a time, so its rate is the collector's latency); ``raw``: the same with a lean
  raw-socket client that takes about a third of the CPU (rotel, which can use every core, then
  gets ~40 % more than under the independent tool on a loaded 2-core machine);
* ``shared``: the independent load tool ``../shared/bench/otlp_load.py`` (``--shared-load``),
  run as ``otlp_load.py URL SECONDS SENDERS TRACES 5``.

The payload of both is by default the independent tool's shape (``--payload load``:
``testkit/payloads.py:load_request``, 20 traces of 5 spans, ~380 bytes a span, string
attributes); ``--payload rich`` sends ``rag_request``'s SDK-shaped traces instead (~570 bytes a
span, 5-document retriever, typed attributes), which costs rotel more than twice the CPU per
span and ragpulse about the same: the payload, not the senders, was why this bench once gave
rotel half the independent run's rate (docs/benchmarks.md).

Each collector runs as its own process:

* ragpulse: ``ragpulse collector`` at its defaults (RAG filter on, lz4, acks=all, records as
  ``producer.records`` says); ``--records per-trace,per-partition`` adds runs with each record
  form, ``--workers N`` with N processes, ``--baseline REV`` the same command run from a
  ``git archive`` of REV;
* rotel: ``rotel-agent`` with the kafka exporter (protobuf, lz4, acks=all, ``--batch-max-size
  1000``; it packs many traces into one unkeyed record), flags as in the independent run.

The load starts the moment the collector's HTTP port answers, as clients retrying after a
restart do and as the independent run does (``--start-delay S`` waits S seconds first; this
script used to wait 3 s, which hid that the first keep-alive connections all landed on the
first process, issue 41). Spans delivered per second are measured at Kafka: after the run every record of the topic is
read back and its spans counted; the rate is ``spans in Kafka / (newest − oldest record
timestamp)`` (a record's timestamp is set by the producer when it hands the record over, so
neither the load tool's start-up nor spans still queued at the end count). The independent
run's count, spans in Kafka ÷ load seconds after a drain, is shown beside it. CPU seconds of
each collector process tree (wait4), of the broker and of the sender processes give spans per
CPU-second ("per core") and show who competes for the cores.

Usage (from the repository root; rotel lives in its own venv, see docs/benchmarks.md):
    .venv/bin/python bench/collector.py [--senders 4] [--load bench,shared] [--baseline REV] [--write-docs]
"""

from __future__ import annotations

import argparse
import inspect
import json
import multiprocessing as mp
import os
import resource
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragpulse.common import KafkaSettings, ensure_topic
from ragpulse.deploy.broker import TansuBroker, free_port
from testkit.payloads import load_request, rag_request

REPO = Path(__file__).resolve().parent.parent

DEFAULT_ROTEL = REPO / "bench/.venv-rotel/lib/python3.11/site-packages/rotel/rotel-agent"
DEFAULT_SHARED_LOAD = REPO.parent / "shared/bench/otlp_load.py"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (and its reaped children) from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def children_of(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(c) for c in f.read().split()]


def build_requests(count: int, payload: str, traces: int, words: int, rag_only: bool) -> list[bytes]:
    if payload == "load":
        return [load_request(traces, 5, seed=1000 + i).SerializeToString() for i in range(count)]
    return [rag_request(traces, seed=1000 + i, words=words, rag_only=rag_only).SerializeToString()
            for i in range(count)]


def sender(port: int, bodies: list[bytes], spans_per_body: list[int], deadline: float,
           results: Any) -> None:
    """Send bodies round-robin until ``deadline`` with ``http.client`` over one keep-alive
    connection, as the independent load tool does (same client, same back-off), so both loads
    take the same CPU from the collectors on a small machine; report (accepted spans, requests,
    refusals, errors)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    accepted = requests = refused = errors = 0
    i = os.getpid()
    headers = {"Content-Type": "application/x-protobuf"}
    while time.time() < deadline:
        k = i % len(bodies)
        i += 1
        try:
            conn.request("POST", "/v1/traces", body=bodies[k], headers=headers)
            response = conn.getresponse()
            response.read()
        except Exception:
            errors += 1
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            time.sleep(0.05)
            continue
        requests += 1
        if response.status == 200:
            accepted += spans_per_body[k]
        elif response.status in (429, 503):
            refused += 1
            time.sleep(0.01)
        else:
            errors += 1
    conn.close()
    results.put((accepted, requests, refused, errors))


def raw_sender(port: int, bodies: list[bytes], spans_per_body: list[int], deadline: float,
               results: Any) -> None:
    """``--sender raw``: like :func:`sender`, with a lean HTTP/1.1 keep-alive client over a raw
    socket (pre-built request bytes, minimal response parsing) that costs the machine about a
    third of the CPU: the collectors get more of a small machine than under the independent tool.
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
            time.sleep(0.002)  # the load starts within a few ms of the port answering
    raise RuntimeError(f"nothing listens on {port}")


def count_topic(settings: KafkaSettings) -> tuple[int, int, int, int, int, int]:
    """(records, spans, keyed records, oldest and newest timestamp ms, traces whose spans are in
    more than one partition) of the topic's records."""
    consumer = KafkaConsumer(**settings.client_kwargs(), enable_auto_commit=False,
                             max_poll_records=5000, fetch_max_bytes=64 << 20,
                             max_partition_fetch_bytes=16 << 20)
    try:
        parts = sorted(consumer.partitions_for_topic(settings.topic) or [])
        tps = [TopicPartition(settings.topic, p) for p in parts]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        records = spans = keyed = 0
        oldest, newest = 1 << 62, 0
        partition_of: dict[bytes, int] = {}
        split: set[bytes] = set()
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
                    oldest, newest = min(oldest, r.timestamp), max(newest, r.timestamp)
                    msg = ExportTraceServiceRequest.FromString(r.value)
                    for rs in msg.resource_spans:
                        for ss in rs.scope_spans:
                            spans += len(ss.spans)
                            for span in ss.spans:
                                if partition_of.setdefault(span.trace_id, r.partition) != r.partition:
                                    split.add(span.trace_id)
        return records, spans, keyed, oldest if records else 0, newest, len(split)
    finally:
        consumer.close()


def run_load(load: str, http_port: int, bodies: list[bytes], spans_per_body: list[int], seconds: float,
             senders: int, traces: int, shared_load: str) -> tuple[list[tuple[int, int, int, int]], float]:
    """Drive the collector on ``http_port`` for ``seconds``; (per-sender (accepted spans, requests,
    refusals, errors), CPU seconds of the sender processes)."""
    if load == "shared":
        # The independent tool, unchanged: its own payload (the shape of load_request), its own
        # http.client senders. Its CPU (and its children's) from wait4.
        proc = subprocess.Popen([sys.executable, shared_load, f"http://127.0.0.1:{http_port}/v1/traces",
                                 f"{seconds:g}", str(senders), str(traces), "5"], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        out = proc.stdout.read()  # the tool ends by itself after SECONDS
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        proc.stdout.close()
        info = json.loads(out)
        spans = info["requests_ok"] * traces * 5
        return ([(spans, info["requests_ok"] + info["refused"] + info["errors"], info["refused"], info["errors"])],
                usage.ru_utime + usage.ru_stime)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    results: Any = mp.Queue()
    deadline = time.time() + seconds
    target = raw_sender if load == "raw" else sender
    workers = [mp.Process(target=target, args=(http_port, bodies, spans_per_body, deadline, results))
               for _ in range(senders)]
    for w in workers:
        w.start()
    totals = [results.get(timeout=seconds + 120) for _ in workers]
    for w in workers:
        w.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return totals, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def run_one(name: str, cmd: list[str], http_port: int, settings: KafkaSettings, broker: TansuBroker,
            bodies: list[bytes], spans_per_body: list[int], seconds: float, senders: int,
            env: dict[str, str], load: str = "bench", traces: int = 20,
            shared_load: str = str(DEFAULT_SHARED_LOAD), start_delay_s: float = 0.0) -> dict[str, Any]:
    """One collector under one load. The load starts the moment the HTTP port answers (as
    clients retrying after a restart do, and as the independent run does), or
    ``start_delay_s`` later; CPU counts from then."""
    ensure_topic(settings, partitions=6)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_port(http_port, proc)
        if start_delay_s:
            time.sleep(start_delay_s)
        cpu0 = cpu_seconds(proc.pid) + sum(cpu_seconds(c) for c in children_of(proc.pid))
        broker_cpu0 = cpu_seconds(broker.pid or 0)
        load_before = os.getloadavg()[0]
        totals, sender_cpu = run_load(load, http_port, bodies, spans_per_body, seconds, senders, traces,
                                      shared_load)
        # Graceful stop: both collectors flush what they accepted on SIGTERM. Reap with wait4
        # to get the process's total CPU time (its /proc entry is gone once it exits).
        proc.send_signal(signal.SIGTERM)
        cpu = reap_cpu(proc, timeout_s=60) - cpu0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    broker_cpu = cpu_seconds(broker.pid or 0) - broker_cpu0
    records, spans, keyed, oldest_ms, newest_ms, split_traces = count_topic(settings)
    elapsed = max((newest_ms - oldest_ms) / 1000.0, seconds / 2)
    admin = KafkaAdminClient(**settings.client_kwargs())
    try:
        admin.delete_topics([settings.topic])  # frees the memory broker's copy
    finally:
        admin.close()
    return {
        "name": name,
        "load": load,
        "spans_in_kafka": spans,
        "records": records,
        "keyed_records": keyed,
        "split_traces": split_traces,
        "accepted_spans": sum(t[0] for t in totals),
        "requests": sum(t[1] for t in totals),
        "refused": sum(t[2] for t in totals),
        "errors": sum(t[3] for t in totals),
        "seconds": elapsed,
        "spans_per_s": spans / elapsed if elapsed else 0.0,
        "spans_per_load_s": spans / seconds,
        "cpu_s": cpu if cpu is not None else float("nan"),
        "sender_cpu_s": sender_cpu,
        "broker_cpu_s": broker_cpu,
        "load_avg": load_before,
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
    settings = CollectorSettings.model_validate({
        "otlp": {"http_port": 0, "grpc_port": 0},
        "kafka": {"bootstrap_servers": broker.bootstrap, "topic": "bench_stages"},
    })
    # The split as the collector runs it: a revision whose default per-partition records are
    # built from the request's layout splits without a message per trace (the records are then
    # built in the export stage).
    layout = "assemble" in inspect.signature(split_request).parameters
    default_lazy = layout and getattr(settings.producer, "records", "per_trace") == "per_partition"
    t = time.process_time()
    for _ in range(rounds):
        for body in bodies:
            split_request(body, assemble=False) if default_lazy else split_request(body)
    out["split"] = (time.process_time() - t) / spans * 1e6
    records = [split_request(body).records for body in bodies]
    lazy_records = [split_request(body, assemble=False).records for body in bodies] if layout else records
    # Both record forms where the revision has them (a --baseline before issue 41 has one).
    has_forms = "records" in type(settings.producer).model_fields
    for form in ("per_trace", "per_partition") if has_forms else ("per_trace",):
        form_settings = settings.model_copy(update={
            "producer": settings.producer.model_copy(update={"records": form})}) if has_forms else settings
        exporter = KafkaExporter(form_settings)
        exporter.start()
        try:
            batches = lazy_records if form == "per_partition" else records
            t = time.process_time()
            for _ in range(rounds):
                for recs in batches:
                    exporter.export(recs)
        finally:
            exporter.shutdown()  # flushes: every record acknowledged before the clock stops
        out[f"export_{form}"] = (time.process_time() - t) / spans * 1e6
    out["export"] = out[f"export_{settings.producer.records if has_forms else 'per_trace'}"]
    out["export_kafka_python"] = kafka_python_produce_cost(broker, records, rounds) / spans * 1e6
    out["http"] = http_cost(bodies, spans_per_body)
    out["record_bytes"] = sum(len(r.value) for recs in records for r in recs) / sum(len(recs) for recs in records)
    admin = KafkaAdminClient(**settings.kafka.client_kwargs())
    try:
        admin.delete_topics([settings.kafka.topic])
    finally:
        admin.close()
    return out


class _NullIngest:
    """Answers every request as accepted: what is left is the OTLP/HTTP receiver's own cost."""

    def __init__(self, spans: int) -> None:
        self.spans = spans

    def consume_proto(self, body: bytes) -> Any:
        from ragpulse.collector.exporter import ExportResult

        return ExportResult(accepted_spans=self.spans)

    def _count(self, **deltas: int) -> None:
        pass


def http_cost(bodies: list[bytes], spans_per_body: list[int], seconds: float = 4.0, senders: int = 2) -> float:
    """CPU µs per span of ragpulse's OTLP/HTTP receiver alone (head parsing, body read, answer,
    sockets, handler threads) in this process, driven by ``senders`` of this script's senders."""
    from ragpulse.collector.config import CollectorSettings
    from ragpulse.collector.otlp_http import HttpReceiver

    settings = CollectorSettings.model_validate({
        "otlp": {"http_port": 0, "grpc_port": 0}, "kafka": {"bootstrap_servers": "127.0.0.1:9", "topic": "x"},
    })
    receiver = HttpReceiver(settings.otlp, _NullIngest(spans_per_body[0]))  # type: ignore[arg-type]
    receiver.start()
    try:
        results: Any = mp.Queue()
        deadline = time.time() + seconds
        procs = [mp.Process(target=sender, args=(receiver.port, bodies, spans_per_body, deadline, results))
                 for _ in range(senders)]
        t = time.process_time()
        for proc in procs:
            proc.start()
        totals = [results.get(timeout=seconds + 60) for _ in procs]
        cpu = time.process_time() - t
        for proc in procs:
            proc.join()
    finally:
        receiver.shutdown(1.0)
    return cpu / max(1, sum(t[0] for t in totals)) * 1e6


def stages_of_revision(rev: str, into: Path, args: Any) -> dict[str, float]:
    """:func:`stage_costs` with ``rev``'s ragpulse, in a fresh interpreter (``--stages-json``)."""
    env = {**os.environ, "PYTHONPATH": export_revision(rev, into)}
    cmd = [sys.executable, __file__, "--stages-json", "--payload", args.payload,
           "--traces-per-request", str(args.traces_per_request), "--words", str(args.words),
           "--distinct-requests", str(args.distinct_requests)] + (["--with-plain-spans"] if args.with_plain_spans else [])
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


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
    parser.add_argument("--senders", type=lambda v: [int(x) for x in v.split(",")], default=[4],
                        help="sender process counts, each measured for every collector, e.g. 1,4")
    parser.add_argument("--load", type=lambda v: v.split(","), default=["bench"],
                        help="bench (this script's http.client senders), shared (the independent tool, "
                        "--shared-load), raw (this script's raw-socket senders), or several: bench,shared")
    parser.add_argument("--shared-load", default=str(DEFAULT_SHARED_LOAD),
                        help="path of the independent load tool otlp_load.py")
    parser.add_argument("--payload", choices=["load", "rich"], default="load",
                        help="the bench load's requests: load = the independent tool's shape (default), "
                        "rich = testkit/payloads.py:rag_request")
    parser.add_argument("--traces-per-request", type=int, default=20)
    parser.add_argument("--words", type=int, default=8, help="rich payload: words per retrieved document")
    parser.add_argument("--with-plain-spans", action="store_true",
                        help="rich payload: add each trace's HTTP root and database span (7 spans per trace)")
    parser.add_argument("--distinct-requests", type=int, default=24)
    parser.add_argument("--rotel", default=str(DEFAULT_ROTEL), help="rotel-agent binary")
    parser.add_argument("--only", choices=["ragpulse", "rotel"], help="run one collector only")
    parser.add_argument("--workers", type=lambda v: [int(x) for x in v.split(",")], default=[],
                        help="extra ragpulse runs with --workers N besides the default, e.g. 1,2")
    parser.add_argument("--records", type=lambda v: v.split(","), default=[],
                        help="extra ragpulse runs with --records FORM besides the default, e.g. "
                        "per-trace,per-partition")
    parser.add_argument("--start-delay", type=float, default=0.0,
                        help="seconds between the HTTP port answering and the load (default 0: at "
                        "once, as clients after a restart and the independent run; issue 41)")
    parser.add_argument("--baseline", metavar="REV",
                        help="also run ragpulse's default collector from this git revision (before/after)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds; the table shows medians")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--stages-json", action="store_true", help="print the stage costs as JSON and stop "
                        "(how --baseline measures the old revision's stages)")
    args = parser.parse_args()
    if "shared" in args.load and not Path(args.shared_load).exists():
        sys.exit(f"independent load tool not found at {args.shared_load} (--shared-load PATH)")

    bodies = build_requests(args.distinct_requests, args.payload, args.traces_per_request, args.words,
                            not args.with_plain_spans)
    spans_per_body = [
        sum(len(ss.spans) for rs in ExportTraceServiceRequest.FromString(b).resource_spans for ss in rs.scope_spans)
        for b in bodies
    ]
    if args.stages_json:
        with TansuBroker() as broker:
            print(json.dumps(stage_costs(broker, bodies, spans_per_body)))
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
    baseline_dir = tempfile.TemporaryDirectory(prefix="ragpulse-baseline-") if args.baseline else None
    baseline_stages: dict[str, float] = {}
    if baseline_dir is not None:
        print(f"measuring {args.baseline}'s stage costs ...", flush=True)
        baseline_stages = stages_of_revision(args.baseline, Path(baseline_dir.name) / "stages", args)
    load_before = os.getloadavg()
    rows = []
    with TansuBroker() as broker:
        print("measuring stage costs ...", flush=True)
        stages = stage_costs(broker, bodies, spans_per_body)
        runs = []

        def ragpulse_cmd(topic: str, port: int, workers: int | None, python: list[str],
                         records: str | None = None) -> list[str]:
            cmd = [*python, "collector", "--kafka", broker.bootstrap, "--topic", topic,
                   "--http", f"127.0.0.1:{port}", "--no-grpc", "--status-interval", "0", "--log-level", "WARNING"]
            return (cmd + (["--workers", str(workers)] if workers is not None else [])
                    + (["--records", records] if records is not None else []))

        if args.only in (None, "ragpulse"):
            variants = [(None, None), *((w, None) for w in args.workers), *((None, r) for r in args.records)]
            for workers, records in variants:
                port = free_port()
                suffix = workers or (records or "default").replace("-", "_")
                settings = KafkaSettings(bootstrap_servers=broker.bootstrap, topic=f"bench_ragpulse_{suffix}")
                name = ("ragpulse (default)" if workers is None and records is None
                        else f"ragpulse --workers {workers}" if workers is not None else f"ragpulse --records {records}")
                runs.append((name, ragpulse_cmd(settings.topic, port, workers, [str(REPO / ".venv/bin/ragpulse")],
                                                records), port, settings, env))
            if baseline_dir is not None:
                base_env = {**env, "PYTHONPATH": export_revision(args.baseline, Path(baseline_dir.name))}
                port = free_port()
                settings = KafkaSettings(bootstrap_servers=broker.bootstrap, topic="bench_ragpulse_baseline")
                python = [sys.executable, "-c", "import sys; from ragpulse.deploy.cli import main; sys.argv[0] = 'ragpulse'; main()"]
                runs.append((f"ragpulse {args.baseline} (default)", ragpulse_cmd(settings.topic, port, None, python),
                             port, settings, base_env))
        if args.only in (None, "rotel"):
            if not Path(args.rotel).exists():
                sys.exit(f"rotel not found at {args.rotel}: python3 -m venv bench/.venv-rotel && "
                         "bench/.venv-rotel/bin/pip install --pre rotel")
            port = free_port()
            settings = KafkaSettings(bootstrap_servers=broker.bootstrap, topic="bench_rotel")
            # The independent run's flags exactly (../shared/bench/README.md), ports moved.
            cmd = [args.rotel, "start", "--otlp-http-endpoint", f"127.0.0.1:{port}",
                   "--otlp-grpc-endpoint", f"127.0.0.1:{free_port()}", "--exporter", "kafka",
                   "--kafka-exporter-brokers", broker.bootstrap, "--kafka-exporter-traces-topic", settings.topic,
                   "--kafka-exporter-format", "protobuf", "--kafka-exporter-acks", "all",
                   "--kafka-exporter-compression", "lz4", "--batch-max-size", "1000"]
            runs.append(("rotel", cmd, port, settings, env))
        # Interleaved rounds (A B C, A B C, ...): the machine's load drifts, and each collector
        # should see the same drift. Fresh ports per round (a stopped socket may linger).
        for round_ in range(args.repeat):
            for load in args.load:
                for senders in args.senders:
                    for name, cmd, port, settings, run_env in runs:
                        new_port = free_port()
                        topic = f"{settings.topic}_r{round_}_s{senders}_{load}"
                        round_cmd = [c.replace(f"127.0.0.1:{port}", f"127.0.0.1:{new_port}") for c in cmd]
                        round_cmd = [topic if c == settings.topic else c for c in round_cmd]
                        print(f"round {round_ + 1}: {name}, {load} load, {senders} sender(s) ...", flush=True)
                        row = run_one(name, round_cmd, new_port, settings.model_copy(update={"topic": topic}),
                                      broker, bodies, spans_per_body, args.seconds, senders, run_env, load,
                                      args.traces_per_request, args.shared_load, args.start_delay)
                        row["senders"] = senders
                        rows.append(row)
                        print(f"  {row['spans_per_s']:,.0f} spans/s, {row['cpu_s']:.1f} collector CPU-s, "
                              f"{row['sender_cpu_s']:.1f} sender CPU-s, load average {row['load_avg']:.2f}", flush=True)
    load_after = os.getloadavg()
    if baseline_dir is not None:
        baseline_dir.cleanup()
    report = render(rows, args, load_before, load_after, sum(spans_per_body) // len(spans_per_body),
                    sum(map(len, bodies)) // len(bodies), stages, baseline_stages)
    print(report)
    if args.write_docs:
        write_section(REPO / "docs/benchmarks.md", report)


def export_revision(rev: str, into: Path) -> str:
    """``git archive`` of ``rev`` unpacked in ``into``; the PYTHONPATH that imports its ragpulse
    (a namespace package over six source folders) ahead of this checkout's."""
    data = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", rev], check=True,
                          capture_output=True).stdout
    into.mkdir(parents=True, exist_ok=True)
    path = into / "src.tar"
    path.write_bytes(data)
    with tarfile.open(path) as tar:
        tar.extractall(into / "src", filter="data")
    return os.pathsep.join(str(into / "src" / part)
                           for part in ("collector", "common", "instrument", "scorer", "dashboards", "deploy"))


def render(rows: list[dict[str, Any]], args: Any, load_before: tuple[float, ...], load_after: tuple[float, ...],
           spans_per_request: int, bytes_per_request: int, stages: dict[str, float],
           baseline_stages: dict[str, float] | None = None) -> str:
    senders_arg = ",".join(map(str, args.senders))
    workers_arg = f" --workers {','.join(map(str, args.workers))}" if args.workers else ""
    baseline_arg = f" --baseline {args.baseline}" if args.baseline else ""
    records_arg = f" --records {','.join(args.records)}" if args.records else ""
    delay_arg = f" --start-delay {args.start_delay:g}" if args.start_delay else ""
    payload_arg = " --payload rich" if args.payload == "rich" else ""
    only_arg = f" --only {args.only}" if args.only else ""
    lines = [
        "## Collector throughput",
        "",
        f"OTLP/HTTP protobuf → collector → tansu (memory, 6 partitions); requests of {spans_per_request} spans "
        f"({args.traces_per_request} RAG traces) / {bytes_per_request // 1024} KiB "
        f"({'the independent load tool' + chr(39) + 's shape' if args.payload == 'load' else 'rag_request, SDK-shaped'}), "
        "sent over keep-alive connections as fast as the collector answers, by this script's sender processes "
        "(load `bench`: http.client, as the tool; `raw`: a raw-socket client) or by the independent tool "
        "`../shared/bench/otlp_load.py` (load `shared`); ragpulse and "
        "rotel (`rotel-agent`, kafka exporter, protobuf, lz4, acks=all, batch 1000: the independent run's flags) "
        "in the same run on the same broker, interleaved. Spans delivered/s = spans read back from the topic ÷ "
        "(newest − oldest record timestamp); the independent run's count (spans in the topic ÷ load seconds) "
        "beside it. CPU = user+system seconds of each process tree (wait4), from the first request to exit "
        "after the flush. "
        + ("The load starts the moment the collector's HTTP port answers (no warm-up, as clients after a "
           "restart and the independent run)." if not args.start_delay else
           f"The load starts {args.start_delay:g} s after the collector's HTTP port answers.")
        + " Split traces: traces whose spans landed in more than one partition (0 = partitioned by trace).",
        "",
        f"Command: `.venv/bin/python bench/collector.py --senders {senders_arg} --load {','.join(args.load)}"
        f"{payload_arg}{workers_arg}{records_arg}{baseline_arg}{only_arg}{delay_arg} --seconds {args.seconds:g} "
        f"--repeat {args.repeat} "
        "--write-docs` "
        "(rotel: `python3 -m venv bench/.venv-rotel && bench/.venv-rotel/bin/pip install --pre rotel`).  ",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} cores; load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after.",
        "",
        f"| load | senders | collector | spans delivered/s, median of {args.repeat} (min–max) | ratio to rotel | "
        "spans ÷ load s | spans per collector CPU-s | collector cores used | sender cores used | "
        "records (keyed) | split traces | 429/503 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for r in rows:
        r["per_cpu"] = r["spans_in_kafka"] / r["cpu_s"] if r["cpu_s"] and r["cpu_s"] == r["cpu_s"] else float("nan")
        groups.setdefault((r["load"], r["senders"], r["name"]), []).append(r)
    medians = {key: statistics.median(r["spans_per_s"] for r in runs) for key, runs in groups.items()}
    per_cpu = {key: statistics.median(r["per_cpu"] for r in runs) for key, runs in groups.items()}
    for (load, senders, name), runs in groups.items():
        rates = sorted(r["spans_per_s"] for r in runs)
        rotel = medians.get((load, senders, "rotel"))
        ratio = f"{medians[(load, senders, name)] / rotel:.2f}" if rotel and name != "rotel" else "-"
        lines.append(
            f"| {load} | {senders} | {name} | **{medians[(load, senders, name)]:,.0f}** "
            f"({rates[0]:,.0f}–{rates[-1]:,.0f}) | {ratio} | "
            f"{statistics.median(r['spans_per_load_s'] for r in runs):,.0f} | "
            f"{per_cpu[(load, senders, name)]:,.0f} | "
            f"{sum(r['cpu_s'] for r in runs) / sum(r['seconds'] for r in runs):.2f} | "
            f"{sum(r['sender_cpu_s'] for r in runs) / (args.seconds * len(runs)):.2f} | "
            f"{sum(r['records'] for r in runs):,} ({sum(r['keyed_records'] for r in runs):,}) | "
            f"{sum(r.get('split_traces', 0) for r in runs)} | {sum(r['refused'] for r in runs)} |"
        )
    lines += stage_table(stages, baseline_stages, per_cpu, groups, args.baseline)
    lines += ["", *verdict(medians, load_before[0])]
    return "\n".join(lines) + "\n"


_STAGES = (
    ("http", "OTLP/HTTP receiver alone (head parse, body read, answer, sockets, handler threads)"),
    ("validate", "upb parse (validation → 400)"),
    ("split", "byte-level split per trace + RAG filter (the default form: where each trace's "
              "spans are; per-trace records are built here only with --records per-trace)"),
    ("export", "produce with librdkafka (confluent-kafka), the default record form: partition, "
               "records built, send, lz4, network, delivery reports"),
)


def stage_table(stages: dict[str, float], before: dict[str, float] | None, per_cpu: dict[tuple[str, int, str], float],
                groups: dict[tuple[str, int, str], list[dict[str, Any]]], baseline: str | None) -> list[str]:
    """Where a collector's CPU goes per span: each stage in-process, and the whole collector's CPU
    per span in the runs (bench load), the difference being what the stages in isolation miss."""
    def whole(name: str) -> float:
        values = [per_cpu[k] for k in per_cpu if k[2] == name and k[0] == "bench"]
        return 1e6 / statistics.median(values) if values else float("nan")

    now_whole, old_whole = whole("ragpulse (default)"), whole(f"ragpulse {baseline} (default)")
    before = before or {}
    head = f"| stage | {baseline}, µs/span | now, µs/span | share now |" if before else "| stage | µs/span | share |"
    lines = [
        "",
        "Where a ragpulse collector's CPU goes, CPU µs per span: each stage alone in one process on this run's "
        "requests (process CPU, librdkafka's threads included; the receiver alone is driven by two of this "
        "script's senders and answers without ingesting), then the whole collector's CPU per span in the runs "
        "above (bench load, default settings: two worker processes, GIL hand-offs between their handler and "
        "delivery-report threads, the parent's stats); the difference is what the stages alone do not show."
        + (f" Before = `{baseline}` measured in a fresh interpreter in the same run." if before else ""),
        "",
        head,
        "|---|---|---|---|" if before else "|---|---|---|",
    ]

    def row(label: str, now: float, old: float | None) -> str:
        share = f"{now / now_whole:.0%}" if now_whole == now_whole else "-"
        if before:
            return f"| {label} | {old:.2f} | {now:.2f} | {share} |" if old is not None else f"| {label} | - | {now:.2f} | {share} |"
        return f"| {label} | {now:.2f} | {share} |"

    for key, label in _STAGES:
        if key in stages:
            lines.append(row(label, stages[key], before.get(key)))
    total = sum(stages.get(k, 0.0) for k, _ in _STAGES)
    old_total = sum(before.get(k, 0.0) for k, _ in _STAGES) if before else None
    lines.append(row("sum of the stages", total, old_total))
    if now_whole == now_whole:
        lines.append(row("rest: contention between threads and processes, scheduling, stats", now_whole - total,
                         old_whole - old_total if old_total is not None and old_whole == old_whole else None))
        lines.append(row("**whole collector** (runs above, bench load)", now_whole,
                         old_whole if old_whole == old_whole else None))
    forms = [(k, stages[f"export_{k}"]) for k in ("per_trace", "per_partition") if f"export_{k}" in stages]
    if len(forms) == 2:
        lines.append("\n*Export by record form* (same records, same run): "
                     + ", ".join(f"{form.replace('_', '-')} {cost:.2f} µs/span" for form, cost in forms)
                     + (f"; before ({baseline}, per-trace) {before['export']:.2f}" if before.get("export") else "")
                     + ".")
    kp = stages.get("export_kafka_python")
    if kp:
        lines.append(f"\n*For comparison:* the same records produced with kafka-python cost {kp:.2f} µs/span, "
                     f"{kp / stages['export']:.1f}x librdkafka's.")
    return lines


# Targets of ragpulse at its default settings against rotel, per sender count (issue 14: 1
# sender 0.35x; issue 41: 4 senders 0.8x, started the moment the port answers).
TARGETS = {1: 0.35, 4: 0.8}


def verdict(medians: dict[tuple[str, int, str], float], load_before: float) -> list[str]:
    """One line per load and sender count with a target: the default ragpulse / rotel ratio."""
    out = []
    for (load, senders, name), ours in medians.items():
        target, rotel = TARGETS.get(senders), medians.get((load, senders, "rotel"))
        if name == "ragpulse (default)" and target and rotel:
            ratio = ours / rotel
            out.append(f"* {load} load, {senders} sender(s), default settings: {ratio:.2f}x rotel, target >= "
                       f"{target:g}x: {'met' if ratio >= target else 'missed'}.")
    out.append(
        "* Records: ragpulse `--records per-trace` writes one keyed record per trace (otelcol-contrib's "
        "kafka exporter with `partition_traces_by_id: true` does the same), `per-partition` one unkeyed "
        "record per partition and request (each trace in the partition its id picks), rotel a few large "
        "unkeyed batches (traces split over partitions)."
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
        text = text[:start] + section.rstrip("\n") + "\n\n" + (text[end + 1:] if end >= 0 else "")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


if __name__ == "__main__":
    main()
