"""What an operator of `ragpulse up` reads and does (issue 19), on the real command in a child
process: its status line adds up (every assembled trace ends in exactly one named outcome), and
when its stdout/stderr pipe dies (`make demo 2>&1 | tee demo.log`, then Ctrl-C, which kills `tee`
too) it still drains: every trace accepted before Ctrl-C is scored and on disk."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragpulse.deploy.broker import free_port
from tests.infra_chdb import query_chdb_dir
from tests.reliability.otlp_post import post_traces
from tests.security.corpus import BASE_NS, _span, rag_spans, request, trace_id

pytestmark = pytest.mark.slow

METRICS = 5
STATUS = re.compile(r"traces assembled (\d+) = (.*?); rows (\d+)")


class Up:
    """`ragpulse up --in-memory` writing stdout and stderr into a pipe this test reads (and can
    close, as a dying `tee` does)."""

    def __init__(self, data: Path, closed_stderr: bool = False, extra: tuple[str, ...] = ()) -> None:
        self.ports = {k: free_port() for k in ("http", "grpc", "ch")}
        self.read_fd, write_fd = os.pipe()
        # closed_stderr: started as `ragpulse up ... 2>&-` (descriptor 2 closed), output on stdout
        shell = ["sh", "-c", 'exec "$@" 2>&-', "sh"] if closed_stderr else []
        cmd = [*shell, sys.executable, "-m", "ragpulse.deploy.cli", "up", "--in-memory", "--data-dir", str(data),
               "--http-port", str(self.ports["http"]), "--grpc-port", str(self.ports["grpc"]),
               "--clickhouse-port", str(self.ports["ch"]), "--grace", "0.5",
               "--status-interval", "0.5", "--drain-timeout", "60", *extra]
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
        self.proc = subprocess.Popen(cmd, stdout=write_fd,
                                     stderr=subprocess.DEVNULL if closed_stderr else write_fd,
                                     env=env, stdin=subprocess.DEVNULL)
        os.close(write_fd)
        self.text = ""

    def read_until(self, pattern: str, timeout_s: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        while True:
            m = None
            for m in re.finditer(pattern, self.text):
                pass
            if m is not None:
                return m
            assert time.monotonic() < deadline, f"no {pattern!r} in:\n{self.text[-4000:]}"
            assert self.proc.poll() is None, self.text[-4000:]
            ready, _, _ = select.select([self.read_fd], [], [], 0.5)
            if ready:
                self.text += os.read(self.read_fd, 65536).decode(errors="replace")

    def read_rest(self) -> str:
        """Everything the exited process still had in the pipe."""
        while chunk := os.read(self.read_fd, 65536):
            self.text += chunk.decode(errors="replace")
        return self.text

    def kill_pipe(self) -> None:
        os.close(self.read_fd)
        self.read_fd = -1

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.read_fd >= 0:
            os.close(self.read_fd)


def _send(up: Up, *groups) -> None:
    status, _ = post_traces("127.0.0.1", up.ports["http"], request(*groups).SerializeToString())
    assert status == 200, status


def _not_rag(tid: str, start: int) -> list:
    """Index building: one embedding span, no question, no answer, no LLM call."""
    return [_span(tid, "embed", None, start, start + 50_000_000,
                  [("openinference.span.kind", "EMBEDDING"),
                   ("embedding.model_name", "text-embedding-3-small")])]


@pytest.fixture
def up(tmp_path: Path):
    u = Up(tmp_path / "data")
    try:
        u.read_until(r"Ctrl-C drains", 120)
        yield u
    finally:
        u.close()


def test_status_line_adds_up_and_a_dead_pipe_does_not_stop_the_drain(up: Up,
                                                                     tmp_path: Path) -> None:
    scored = [trace_id(f"op-scored-{i}") for i in range(2)]
    not_rag = trace_id("op-not-rag")
    no_content = trace_id("op-no-content")  # the LLM span carries no text: null rows
    _send(up, *(rag_spans(t, start=BASE_NS + i * 10**9) for i, t in enumerate(scored)),
          _not_rag(not_rag, BASE_NS), rag_spans(no_content, question=None, answer=None,
                                                start=BASE_NS))
    m = up.read_until(r"traces assembled 4 = [^;]*in progress 0; rows 15,", 120)
    line = up.text[up.text.rfind("\n", 0, m.start()) + 1:up.text.find("\n", m.end())]
    total, parts, rows = STATUS.search(line).groups()
    outcomes = {k: int(v) for k, v in re.findall(r"([a-zA-Z ]+?) (\d+)(?: \([^)]*\))?(?: \+ |$)",
                                                  parts)}
    assert sum(outcomes.values()) == int(total) == 4, line
    assert outcomes == {"sampled out": 0, "not RAG": 1, "expired incomplete": 0, "unscorable": 1,
                        "scored": 2, "failed": 0,
                        "dropped": 0, "in progress": 0}, line
    assert re.search(r"unscorable 1 \((content_not_captured|no_question|no_answer) 1\)", line), line
    assert int(rows) == 3 * METRICS  # two scored traces and the null rows of the third

    # The reader of up's output dies (as `tee` does on Ctrl-C); more traces arrive; Ctrl-C.
    up.kill_pipe()
    late = [trace_id(f"op-late-{i}") for i in range(3)]
    _send(up, *(rag_spans(t, start=BASE_NS + (5 + i) * 10**9) for i, t in enumerate(late)))
    time.sleep(1.5)  # status lines (every 0.5 s) now hit the dead pipe
    assert up.proc.poll() is None, "up died of a failed write to its dead output pipe"
    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(timeout=120) == 0
    ((n,),) = query_chdb_dir(tmp_path / "data" / "chdb",
                             "SELECT count() FROM rag.scores FINAL WHERE status = 'ok'")
    assert n == (len(scored) + len(late)) * METRICS


def test_up_with_a_closed_stderr_runs_and_drains(tmp_path: Path) -> None:
    """Started with descriptor 2 closed: `up` starts, scores, and Ctrl-C drains (its status
    lines go to stdout only if it has one; here they go nowhere, which is the point)."""
    u = Up(tmp_path / "data", closed_stderr=True)
    try:
        deadline = time.monotonic() + 120
        while True:  # ready when the OTLP endpoint accepts (nothing to read from stderr)
            assert u.proc.poll() is None, u.text
            try:
                _send(u, rag_spans(trace_id("closed-0"), start=BASE_NS))
                break
            except (OSError, AssertionError):  # not listening yet, or not ready (503)
                assert time.monotonic() < deadline
                time.sleep(0.5)
        _send(u, *(rag_spans(trace_id(f"closed-{i}"), start=BASE_NS + i * 10**9)
                   for i in range(1, 4)))
        time.sleep(1.0)
        u.proc.send_signal(signal.SIGINT)
        assert u.proc.wait(timeout=120) == 0
    finally:
        u.close()
    ((n,),) = query_chdb_dir(tmp_path / "data" / "chdb",
                             "SELECT uniqExact(trace_id) FROM rag.scores FINAL WHERE status = 'ok'")
    assert n == 4


def test_a_second_ctrl_c_abandons_the_drain_and_still_closes_the_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: the second Ctrl-C raised out of the drain, which left the chDB store open,
    and chDB crashed the process at exit (segmentation fault, exit -11). Now it stops waiting,
    stops every part in order and exits 130; the store opens again. The drain is made to wait
    for certain: the LLM judge's endpoint (a local OpenAI-compatible server) never answers."""
    from testkit.openai_server import FakeOpenAIServer, Reply

    with FakeOpenAIServer() as srv:
        srv.script("*", *[Reply.json({}, delay_s=3600)] * 200)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the local server ignores it
        u = Up(tmp_path / "data", extra=("--judge", "llm", "--model", "m", "--base-url",
                                         srv.base_url))
        try:
            u.read_until(r"Ctrl-C drains", 120)
            _send(u, *(rag_spans(trace_id(f"abandon-{i}"), start=BASE_NS + i * 10**9)
                       for i in range(3)))
            u.read_until(r"in progress [1-9]", 60)  # traces in the judge, which never answers
            u.proc.send_signal(signal.SIGINT)
            u.read_until(r"draining: scoring what was accepted", 60)
            time.sleep(1.0)
            assert u.proc.poll() is None, "the drain did not wait for the judge"
            u.proc.send_signal(signal.SIGINT)
            code = u.proc.wait(timeout=60)
            u.read_rest()
            assert code == 130, (code, u.text[-3000:])
            assert "stopped without the whole drain" in u.text
            assert "global_context->shutdown" not in u.text  # chDB's complaint before the crash
            flat = " ".join(u.text.split())  # rich wraps at the console width
            assert "not waiting for the drain" in flat and "is lost (--in-memory)" in flat, \
                u.text[-1500:]
        finally:
            u.close()
    ((n,),) = query_chdb_dir(tmp_path / "data" / "chdb",
                             "SELECT count() FROM rag.scores WHERE status = 'ok'")
    assert n == 0  # never judged: the in-memory broker lost them, as the line said
