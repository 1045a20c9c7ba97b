"""SIGINT/SIGTERM handling shared by every long-running ragpulse command.

Each command (``collector``, ``scorer``, ``up`` and the collector's worker processes) runs the
same shape: start, then repeat a periodic action (a status line, a stats report) until the first
SIGINT or SIGTERM, then drain. :class:`StopSignals` is that shape's signal half; the drain stays
with the command, because what "drain" means differs per component.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType

__all__ = ["StopSignals"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """A SIGINT/SIGTERM while :attr:`stop` is clear: set it (and call ``on_first`` with the
    signal's name, e.g. to print "draining"); one while it is set: call ``on_second``, which normally raises
    (``SystemExit(130)`` or ``KeyboardInterrupt``) to abandon the drain.

    A context manager: the handlers are installed on entry and the previous ones restored on
    exit. Entering it outside the main thread raises ``ValueError`` (Python only delivers signals
    to the main thread). :attr:`stop` is a ``threading.Event``; setting it from any thread stops
    :meth:`every` as a signal would.
    """

    def __init__(self, *, on_first: Callable[[str], None] | None = None,
                 on_second: Callable[[str], None] | None = None) -> None:
        self.stop = threading.Event()
        self._on_first = on_first
        self._on_second = on_second
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopSignals:
        self._previous = {sig: signal.signal(sig, self._handle) for sig in _SIGNALS}
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous = {}

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if not self.stop.is_set():
            self.stop.set()
            if self._on_first is not None:
                self._on_first(name)
        elif self._on_second is not None:
            self._on_second(name)

    def every(self, interval_s: float | None, action: Callable[[], None],
              until: Callable[[], bool] | None = None) -> None:
        """Call ``action`` every ``interval_s`` seconds until a signal arrives (or ``until()``
        returns true after an action). ``interval_s`` ``None`` or 0: no action, only wait for
        the signal. Blocks the calling thread; exceptions from ``action`` propagate."""
        wait = interval_s or None
        while not self.stop.wait(wait):
            action()
            if until is not None and until():
                return
