"""What the durable default of `ragpulse up` costs: start-up time, memory, stop time.

Starts the real `ragpulse up` (no demo traffic) on a fresh data directory, ``--repeat`` times in
each mode — durable (the default: SeaweedFS + tansu on s3://, requests acknowledged once Kafka
has them) and ``--in-memory`` — and reports the time from launch until it prints its endpoints
("Ctrl-C drains"), the resident memory of the whole process tree at that moment (``up`` and its
helpers, from /proc), and the time a Ctrl-C takes to stop it.

Usage (from the repository root):
    .venv/bin/python bench/up_startup.py --repeat 3 [--write-docs]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.docs_section import write_section
from ragpulse.deploy.broker import free_port

REPO = Path(__file__).resolve().parent.parent

MARK = "<!-- bench/up_startup.py -->"


def tree_rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` and all its descendants, MiB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += next(int(line.split()[1]) for line in status.splitlines()
                          if line.startswith("VmRSS:"))
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, StopIteration):
            continue
    return total / 1024


def one_run(durable: bool) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory(prefix="ragpulse-up-bench-") as d:
        log = Path(d) / "up.log"
        cmd = [sys.executable, "-m", "ragpulse.deploy.cli", "up", "--data-dir", str(Path(d) / "data"),
               "--http-port", str(free_port()), "--grpc-port", str(free_port()),
               "--clickhouse-port", str(free_port())]
        if not durable:
            cmd.append("--in-memory")
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)
        while "Ctrl-C drains" not in log.read_text(errors="replace"):
            if proc.poll() is not None:
                raise RuntimeError(log.read_text())
            time.sleep(0.05)
        ready = time.monotonic() - t0
        rss = tree_rss_mib(proc.pid)
        t1 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(120)
        return ready, rss, time.monotonic() - t1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-docs", action="store_true")
    a = ap.parse_args()
    load_before = os.getloadavg()
    rows = []
    for durable in (True, False):
        runs = [one_run(durable) for _ in range(a.repeat)]
        med = [statistics.median(x) for x in zip(*runs)]
        rows.append((durable, runs, med))
        print(f"{'durable' if durable else 'in-memory'}: ready " +
              ", ".join(f"{r[0]:.1f}" for r in runs) + " s; RSS " +
              ", ".join(f"{r[1]:.0f}" for r in runs) + " MiB; stop " +
              ", ".join(f"{r[2]:.1f}" for r in runs) + " s")
    load_after = os.getloadavg()
    lines = [
        f"Command: `.venv/bin/python bench/up_startup.py --repeat {a.repeat} --write-docs`  ",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
        f"{load_before[0]:.2f} before and {load_after[0]:.2f} after, on {os.cpu_count()} cores.",
        "",
        "| `ragpulse up` mode | ready after (median, s) | RSS of the process tree (median, MiB) | Ctrl-C to stopped (median, s) |",
        "|---|---|---|---|",
    ]
    for durable, runs, med in rows:
        name = "durable (default)" if durable else "`--in-memory`"
        lines.append(f"| {name} | {med[0]:.1f} | {med[1]:.0f} | {med[2]:.1f} |")
    text = "\n".join(lines)
    print(text)
    if a.write_docs:
        write_section(MARK, text, "## `ragpulse up`: the cost of the durable default",
                      docs=REPO / "docs/benchmarks.md")


if __name__ == "__main__":
    main()
