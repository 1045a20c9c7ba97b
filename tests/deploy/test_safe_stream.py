"""SafeStream: a write to a dead pipe (its reader gone, as `tee` after Ctrl-C) never raises; the
stream turns into a counted sink and its descriptor into /dev/null, so the bytes still buffered
flush harmlessly at exit."""

from __future__ import annotations

import os

from ragpulse.deploy.logs import SafeStream


def test_a_dead_pipe_becomes_a_counted_sink() -> None:
    r, w = os.pipe()
    raw = open(w, "w", encoding="utf-8")
    s = SafeStream(raw)
    try:
        assert s.write("alive\n") == 6 and not s.dead
        assert os.read(r, 100) == b"alive\n"
        os.close(r)  # the reader dies
        for _ in range(3):
            assert s.write("status line\n") == 12  # never raises
        s.flush()
        assert s.dead and s.dropped_writes == 3
        assert os.path.samefile(f"/proc/self/fd/{w}", os.devnull)
        raw.write("buffered before the end\n")
        raw.flush()  # the descriptor is /dev/null now: no BrokenPipeError at exit
    finally:
        raw.close()
