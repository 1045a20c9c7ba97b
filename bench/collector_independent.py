"""The independent side-by-side run of ``../shared/bench/README.md``, automated and interleaved.

Each collector is started fresh and loaded the moment its OTLP/HTTP port answers (as clients
retrying after a restart do): ``otlp_load.py URL 15 4 20 5`` (the shared tool, unchanged), then
10 s to drain, SIGTERM, and ``kafka_count.py BOOTSTRAP TOPIC`` (the shared counter, unchanged);
the rate is spans in the topic / 15 s. rotel runs with the README's flags; ragpulse at its
defaults, with ``--records`` variants and ``--baseline REV`` (a ``git archive`` of REV) beside
it. CPU is the collector's process tree from the port answering to its exit (wait4), so spans
per collector CPU-second include the drain. One tansu broker (memory storage) on loopback for
all; rounds interleave the collectors so that they share the machine's drift.

Usage (repository root; rotel in bench/.venv-rotel, see docs/benchmarks.md):
    .venv/bin/python bench/collector_independent.py [--rounds 3] [--records per-trace] [--baseline REV]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.collector import (
    DEFAULT_ROTEL,
    REPO,
    children_of,
    cpu_seconds,
    export_revision,
    reap_cpu,
    wait_port,
)
from ragpulse.common import KafkaSettings, ensure_topic
from ragpulse.deploy.broker import TansuBroker, free_port

SHARED = REPO.parent / "shared/bench"
LOAD_S, DRAIN_S = 15, 10


def run(name: str, cmd: list[str], port: int, env: dict[str, str], bootstrap: str,
        topic: str) -> dict[str, Any]:
    """One collector, started now and loaded at port-open; its row."""
    errors = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=errors)
    try:
        spawned = time.monotonic()
        try:
            wait_port(port, proc, 60)
        except RuntimeError:
            errors.seek(0)
            sys.stderr.write(errors.read().decode(errors="replace")[-4000:])
            raise
        opened = time.monotonic() - spawned
        cpu0 = cpu_seconds(proc.pid) + sum(cpu_seconds(c) for c in children_of(proc.pid))
        load = os.getloadavg()[0]
        tool = subprocess.run([sys.executable, str(SHARED / "otlp_load.py"),
                               f"http://127.0.0.1:{port}/v1/traces", str(LOAD_S), "4", "20", "5"],
                              capture_output=True, text=True, check=True)
        time.sleep(DRAIN_S)
        proc.send_signal(signal.SIGTERM)
        cpu = reap_cpu(proc, 60) - cpu0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    counted = subprocess.run([sys.executable, str(SHARED / "kafka_count.py"), bootstrap, topic],
                             capture_output=True, text=True, check=True)
    count = json.loads(counted.stdout)[topic]
    return {"name": name, "spans_per_s": count["spans"] / LOAD_S, "spans": count["spans"],
            "records": count["records"], "keyed": count["keyed"],
            "split_traces": count["split_traces"], "cpu_s": cpu,
            "spans_per_cpu_s": count["spans"] / cpu if cpu else float("nan"),
            "port_open_s": opened, "load_avg": load, "tool": json.loads(tool.stdout)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=lambda v: v.split(","), default=[],
                        help="extra ragpulse runs with --records FORM, e.g. per-trace")
    parser.add_argument("--baseline", metavar="REV", help="also run ragpulse from this revision")
    parser.add_argument("--rotel", default=str(DEFAULT_ROTEL))
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
    python = [sys.executable, "-c",
              "import sys; from ragpulse.deploy.cli import main; sys.argv[0] = 'ragpulse'; main()"]
    variants: list[tuple[str, list[str] | None, dict[str, str]]] = [
        ("rotel", None, env), ("ragpulse (default)", [], env),
        *((f"ragpulse --records {form}", ["--records", form], env) for form in args.records)]
    baseline_dir = tempfile.TemporaryDirectory(prefix="ragpulse-baseline-") if args.baseline else None
    if baseline_dir is not None:
        path = export_revision(args.baseline, Path(baseline_dir.name))
        variants.append((f"ragpulse {args.baseline}", [], {**env, "PYTHONPATH": path}))
    rows: list[dict[str, Any]] = []
    before = os.getloadavg()
    with TansuBroker() as broker:
        for round_ in range(args.rounds):
            for i, (name, extra, run_env) in enumerate(variants):
                port, topic = free_port(), f"independent_{i}_{round_}"
                if extra is None:
                    ensure_topic(KafkaSettings(bootstrap_servers=broker.bootstrap, topic=topic), partitions=6)
                    cmd = [args.rotel, "start", "--otlp-http-endpoint", f"127.0.0.1:{port}",
                           "--otlp-grpc-endpoint", f"127.0.0.1:{free_port()}", "--exporter", "kafka",
                           "--kafka-exporter-brokers", broker.bootstrap,
                           "--kafka-exporter-traces-topic", topic, "--kafka-exporter-format", "protobuf",
                           "--kafka-exporter-acks", "all", "--kafka-exporter-compression", "lz4",
                           "--batch-max-size", "1000"]
                else:
                    cmd = [*python, "collector", "--kafka", broker.bootstrap, "--topic", topic,
                           "--http", f"127.0.0.1:{port}", "--grpc", f"127.0.0.1:{free_port()}",
                           "--status-interval", "0", "--log-level", "WARNING", *extra]
                row = run(name, cmd, port, run_env, broker.bootstrap, topic)
                row["round"] = round_
                rows.append(row)
                print(f"round {round_ + 1}: {name}: {row['spans_per_s']:,.0f} spans/s, "
                      f"{row['spans_per_cpu_s']:,.0f} per CPU-s, port answered after "
                      f"{row['port_open_s']:.2f} s, load average {row['load_avg']:.2f}", flush=True)
    after = os.getloadavg()
    if baseline_dir is not None:
        baseline_dir.cleanup()
    print(render(rows, args, before, after))


def render(rows: list[dict[str, Any]], args: Any, before: tuple[float, ...],
           after: tuple[float, ...]) -> str:
    by: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by.setdefault(row["name"], []).append(row)
    rotel = statistics.median(r["spans_per_s"] for r in by.get("rotel", [])) if "rotel" in by else None
    lines = [
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} cores; "
        f"load average {before[0]:.2f} before, {after[0]:.2f} after.",
        "",
        f"| collector | spans in Kafka ÷ {LOAD_S} s, median of {args.rounds} (min–max) | ratio to rotel | "
        "spans per collector CPU-s | records (keyed) | split traces | port answered after |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, runs in by.items():
        rates = sorted(r["spans_per_s"] for r in runs)
        median = statistics.median(rates)
        ratio = f"{median / rotel:.2f}" if rotel and name != "rotel" else "-"
        lines.append(
            f"| {name} | **{median:,.0f}** ({rates[0]:,.0f}–{rates[-1]:,.0f}) | {ratio} | "
            f"{statistics.median(r['spans_per_cpu_s'] for r in runs):,.0f} | "
            f"{sum(r['records'] for r in runs):,} ({sum(r['keyed'] for r in runs):,}) | "
            f"{sum(r['split_traces'] for r in runs)} | "
            f"{statistics.median(r['port_open_s'] for r in runs):.2f} s |")
    lines += ["", *pair_ratios(by)]
    return "\n".join(lines)


def pair_ratios(by: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Each ragpulse variant's same-run ratios: its rate over rotel's in the same round (the
    two ran one after the other), round by round, with their median and minimum (issue 41's
    goal: median >= 0.8, none below 0.65)."""
    rotel = {r["round"]: r["spans_per_s"] for r in by.get("rotel", [])}
    out = []
    for name, runs in by.items():
        if name == "rotel" or not rotel:
            continue
        ratios = [r["spans_per_s"] / rotel[r["round"]] for r in runs if rotel.get(r["round"])]
        if ratios:
            out.append(f"Same-run ratios, {name} / rotel, round by round: "
                       f"{', '.join(f'{x:.2f}' for x in ratios)}; median **{statistics.median(ratios):.2f}**, "
                       f"lowest {min(ratios):.2f}.")
    return out


if __name__ == "__main__":
    main()
