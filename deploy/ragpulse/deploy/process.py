"""A helper process that ``ragpulse up`` starts and owns: tansu, SeaweedFS.

:class:`ChildProcess` spawns the command in its own session (a Ctrl-C aimed at the parent's
terminal is the parent's to handle), keeps its output (a bounded ring of lines, or a log file),
waits until it is ready, and stops it: SIGTERM with a grace period, then SIGKILL of its whole
process group, always waiting until it is gone (a successor on the same port or directory must
not meet it).

``die_with_parent`` ties the child's life to the thread that started it: Linux delivers SIGKILL
to the child when that thread ends, so a ``ragpulse up`` killed with SIGKILL (OOM killer, a crash)
leaves no orphaned broker or storage server holding ports and the data directory for the next
start. It uses util-linux ``setpriv --pdeathsig`` (no ``preexec_fn``, which is unsafe in a
process with threads); where ``setpriv`` is missing the option is a no-op, logged once. Start
such a child from a thread that lives as long as the child should (the main thread).

Not thread-safe: one owner starts and stops it.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Self

__all__ = ["ChildOwner", "ChildProcess"]

log = logging.getLogger(__name__)

_warned_no_setpriv = False


def _pdeathsig_prefix() -> list[str]:
    global _warned_no_setpriv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        if not _warned_no_setpriv:
            log.warning("setpriv (util-linux) not found: helper processes will outlive a killed "
                        "ragpulse up")
            _warned_no_setpriv = True
        return []
    return [setpriv, "--pdeathsig", "KILL", "--"]


class ChildProcess:
    """One child process: ``start()``, ``wait_ready()``, ``stop()``/``kill()`` (idempotent)."""

    def __init__(self, name: str, cmd: Sequence[str], *, env: dict[str, str] | None = None,
                 cwd: str | Path | None = None, log_path: Path | None = None,
                 die_with_parent: bool = False) -> None:
        self.name = name
        self.cmd = list(cmd)
        self._env = env
        self._cwd = cwd
        self._log_path = log_path
        self._die_with_parent = die_with_parent
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: deque[str] = deque(maxlen=50)
        self._reader: threading.Thread | None = None
        self._log_start = 0  # size of log_path at start(): what came before is earlier runs'

    @property
    def running(self) -> bool:
        """Whether the process was started and has not exited."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The process id once started."""
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        """The exit status once it has exited, else ``None``."""
        return self._proc.poll() if self._proc is not None else None

    def start(self) -> None:
        """Spawn the process (does not wait for readiness). Raises ``OSError`` if it cannot."""
        if self.running:
            raise RuntimeError(f"{self.name} already running")
        cmd = (_pdeathsig_prefix() if self._die_with_parent else []) + self.cmd
        self._lines.clear()
        if self._log_path is not None:
            with open(self._log_path, "ab") as out:
                self._log_start = out.tell()
                self._proc = subprocess.Popen(cmd, env=self._env, cwd=self._cwd,
                                              stdin=subprocess.DEVNULL, stdout=out,
                                              stderr=subprocess.STDOUT, start_new_session=True)
            return
        self._proc = subprocess.Popen(cmd, env=self._env, cwd=self._cwd, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        # Drain the pipe so a chatty process can never block on a full pipe buffer.
        self._reader = threading.Thread(target=self._drain, args=(self._proc,),
                                        name=f"{self.name}-output", daemon=True)
        self._reader.start()

    def wait_ready(self, ready: Callable[[], bool], timeout_s: float, *,
                   poll_s: float = 0.02) -> None:
        """Poll ``ready()`` until it is true. Raises ``RuntimeError`` (with the recent output)
        when the process exits first or ``timeout_s`` passes. Blocks."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self._proc is None or self._proc.poll() is not None:
                code = self._proc.returncode if self._proc is not None else None
                raise RuntimeError(f"{self.name} exited with {code}: {self.recent_output()}")
            if ready():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} was not ready within {timeout_s} s: "
                                   f"{self.recent_output()}")
            # Readiness of a child we just spawned has no signal to wait on: poll it.
            time.sleep(poll_s)

    def stop(self, grace_s: float) -> None:
        """SIGTERM, wait up to ``grace_s``, then SIGKILL; returns once the process is gone.
        Idempotent; safe without ``start()``."""
        proc = self._proc
        if proc is not None and proc.poll() is None and grace_s > 0:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(grace_s)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                pass
        self.kill()

    def kill(self) -> None:
        """SIGKILL the process group at once (a crash: nothing flushed) and reap it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        if self._reader is not None:
            self._reader.join(timeout=1.0)
            self._reader = None

    def recent_output(self, lines: int = 20) -> str:
        """The last lines this run of the process printed (for error messages): with a
        ``log_path``, only what was appended since :meth:`start`, never an earlier run's lines."""
        if self._log_path is not None:
            return " | ".join(self.logged_lines()[-lines:]) or "(no output)"
        return " | ".join(list(self._lines)[-lines:]) or "(no output)"

    def logged_lines(self) -> list[str]:
        """The lines this run appended to ``log_path`` since :meth:`start` (``[]`` without a
        log file or before the first start)."""
        if self._log_path is None:
            return []
        try:
            with open(self._log_path, "rb") as log_file:
                log_file.seek(self._log_start)
                text = log_file.read().decode("utf-8", "replace")
        except OSError:
            return []
        return text.splitlines()

    def _drain(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            self._lines.append(raw.decode("utf-8", "replace").rstrip())


class ChildOwner:
    """Base of a wrapper that owns one :class:`ChildProcess` (the broker, SeaweedFS): the
    ``running``/``pid`` view of it and the context-manager protocol (``start()`` on entry,
    ``shutdown()`` on exit). Subclasses set ``self._child`` in ``start()``."""

    _child: ChildProcess | None = None

    @property
    def running(self) -> bool:
        """Whether the owned process runs."""
        return self._child is not None and self._child.running

    @property
    def pid(self) -> int | None:
        """The owned process's id once started."""
        return self._child.pid if self._child is not None else None

    def start(self) -> Self:
        """Start the process and return ``self`` once it is ready (subclasses)."""
        raise NotImplementedError

    def shutdown(self) -> None:
        """Stop the process (subclasses; idempotent)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
