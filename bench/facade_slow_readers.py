"""The facade's memory while clients never read their replies (issue 38, item 4).

Starts a standalone facade in this process over a fresh chDB directory, with ``--memory-limit``
as its bound, then opens ``--connections`` connections (spread over ``--sources`` loopback
addresses, 127.0.0.2, 127.0.0.3, ...) that each send a query whose reply is just under the
facade's result cap and never read a byte. Reports the process's resident memory before and at
its peak (``VmRSS`` sampled every 50 ms), and how long a fresh client (another address) waits
for ``SELECT 1`` to be answered 200. Only settings every version has are passed, so the same
command measures the code before and after a fix.

Usage (from the repository root):
    nice .venv/bin/python bench/facade_slow_readers.py --memory-limit 2GiB --connections 16
"""

from __future__ import annotations

import argparse
import http.client
import socket
import tempfile
import threading
import time

from ragpulse.deploy.facade import FacadeSettings, build_facade


def rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def size(text: str) -> int:
    units = {"gib": 1 << 30, "mib": 1 << 20, "kib": 1 << 10}
    low = text.lower()
    for unit, factor in units.items():
        if low.endswith(unit):
            return int(float(low[: -len(unit)]) * factor)
    return int(low)


def unread_query(port: int, source: str, sql: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), source_address=(source, 0))
    body = sql.encode()
    sock.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n%s"
                 % (len(body), body))
    return sock  # never read


def fresh_client_wait(port: int, source: str, limit_s: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30,
                                          source_address=(source, 0))
        try:
            conn.request("POST", "/", body=b"SELECT 1")
            r = conn.getresponse()
            r.read()
            if r.status == 200:
                return time.monotonic() - t0
        except OSError:
            pass
        finally:
            conn.close()
        time.sleep(0.2)
    return float("inf")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memory-limit", default="2GiB")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--sources", type=int, default=8)
    ap.add_argument("--pace-s", type=float, default=0.5,
                    help="between two connections (so each query has run before the next)")
    ap.add_argument("--hold-s", type=float, default=8.0, help="how long the attack lasts")
    args = ap.parse_args()
    settings = FacadeSettings(memory_limit_bytes=size(args.memory_limit), advertise=False)
    _, result_bytes = settings.memory_limits()
    rows = int(result_bytes * 0.95) // 101  # TabSeparated: 100 x 'x' and a newline a row
    sql = f"SELECT repeat('x', 100) FROM numbers({rows})"
    with tempfile.TemporaryDirectory() as tmp:
        facade = build_facade(tmp, settings)
        facade.start()
        try:
            unread_query(facade.port, "127.0.0.1", sql).close()  # warm the engine once
            time.sleep(1.0)
            base = rss_mib()
            peak = [base]
            stop = threading.Event()

            def sample() -> None:
                while not stop.wait(0.05):
                    peak[0] = max(peak[0], rss_mib())

            threading.Thread(target=sample, daemon=True).start()
            socks = []
            for i in range(args.connections):
                socks.append(unread_query(facade.port, f"127.0.0.{2 + i % args.sources}", sql))
                time.sleep(args.pace_s)
            time.sleep(2.0)
            wait = fresh_client_wait(facade.port, "127.0.1.1", 120)
            time.sleep(max(0.0, args.hold_s - 2.0 - wait))
            stop.set()
            for s in socks:
                s.close()
            print(f"memory bound {settings.memory_limit_bytes / 2**20:.0f} MiB, reply "
                  f"{rows * 101 / 2**20:.0f} MiB x {args.connections} unread connections from "
                  f"{args.sources} addresses: RSS {base:.0f} -> peak {peak[0]:.0f} MiB "
                  f"(+{peak[0] - base:.0f}); a fresh client served after {wait:.1f} s")
            print({k: v for k, v in facade.stats().items() if v})
        finally:
            facade.shutdown()


if __name__ == "__main__":
    main()
