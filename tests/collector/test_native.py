"""The collector's C module (``ragpulse.collector._native``, built by hatch_build.py) computes what
split.py and common.kafka compute: the same records, rejections and RAG flags, the same
MalformedRequest messages on broken bytes (never a crash or a read past the buffer), the same
partitions. tests/collector/test_split.py runs every split test on both as well."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from ragpulse.collector import split as split_module
from ragpulse.collector.split import MalformedRequest, split_request
from testkit.payloads import T0, load_request, rag_request
from tests.collector.test_split import _len, _random_request, _random_span

NOW = T0 + 3_600 * 10**9
ROOT = Path(__file__).resolve().parents[2]

needs_native = pytest.mark.skipif(not split_module.NATIVE, reason="ragpulse.collector._native is not built here")


def test_the_install_built_the_c_module() -> None:
    """`make test` installs with the compiler present (CI too): the C module must be there, or
    the collector silently runs ~4x the CPU per span. RAGPULSE_NO_NATIVE opts out."""
    if os.environ.get("RAGPULSE_NO_NATIVE") or os.environ.get("RAGPULSE_PURE_PYTHON"):
        pytest.skip("the C module is switched off here (RAGPULSE_NO_NATIVE / RAGPULSE_PURE_PYTHON)")
    assert split_module.NATIVE, "ragpulse.collector._native did not build: run `python hatch_build.py`"
    source = ROOT / "collector" / "ragpulse" / "collector" / "_native.c"
    built = Path(split_module._native.__file__)
    assert built.stat().st_mtime >= source.stat().st_mtime, (
        f"{built.name} is older than _native.c: rebuild it (`python hatch_build.py`, or `make install`)")


def _outcome(body: bytes, **kw: object) -> object:
    try:
        r = split_request(body, now_ns=NOW, **kw)  # type: ignore[arg-type]
    except MalformedRequest as exc:
        return ("malformed", str(exc))
    return ([(x.key, x.value, x.spans, x.rag) for x in r.records], r.spans_total, r.spans_invalid,
            r.invalid, r.invalid_message)


def _both(body: bytes, monkeypatch: pytest.MonkeyPatch, **kw: object) -> tuple[object, object]:
    native = _outcome(body, **kw)
    with monkeypatch.context() as m:
        m.setattr(split_module, "_native", None)
        python = _outcome(body, **kw)
    return native, python


def _mutate(rng: random.Random, body: bytes) -> bytes:
    """A broken copy: bytes flipped, cut, inserted or a length byte changed."""
    data = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        if not data:
            break
        op = rng.random()
        i = rng.randrange(len(data))
        if op < 0.4:
            data[i] = rng.randrange(256)
        elif op < 0.55:
            del data[i:]
        elif op < 0.7:
            data[i:i] = rng.randbytes(rng.randint(1, 3))
        elif op < 0.85:
            data[i] = rng.choice([0x12, 0x0A, 0x39, 0x41, 0x30, 0x4A, 0x80, 0xFF, 0x7F, 0x00])
        else:
            data[i:i] = b"\xff" * rng.randint(5, 12)  # a varint too long, or a huge length
    return bytes(data)


@needs_native
def test_native_and_python_agree_on_random_and_broken_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(41)
    bodies = [_random_request(rng).SerializeToString() for _ in range(300)]
    latest = NOW + 86_400 * 10**9
    for _ in range(300):
        spans = [_random_span(rng, latest) for _ in range(rng.randrange(1, 12))]
        scope = b"\x0a\x03\x0a\x01s" + b"".join(b"\x12" + _len(s) + s for s in spans) + b"\x1a\x01u"
        rs = b"\x12" + _len(scope) + scope
        bodies.append(b"\x0a" + _len(rs) + rs)
    bodies += [load_request(20, 5, seed=i).SerializeToString() for i in range(3)]
    bodies += [rag_request(20, seed=i, plain_every=4, services=3).SerializeToString() for i in range(3)]
    broken = [_mutate(rng, rng.choice(bodies)) for _ in range(3000)]
    seen = {"records": 0, "rejected": 0, "malformed": 0}
    messages = set()
    for body in bodies + broken:
        for kw in ({}, {"keep_all": True}, {"max_age_ns": 3_600 * 10**9}, {"assemble": False}):
            native, python = _both(body, monkeypatch, **kw)
            assert native == python, (body.hex(), kw)
            if isinstance(native, tuple) and native[0] == "malformed":
                seen["malformed"] += 1
                messages.add(native[1])
            else:
                seen["records"] += bool(native[0])  # type: ignore[index]
                seen["rejected"] += bool(native[2])  # type: ignore[index]
    assert min(seen.values()) > 200, seen  # every outcome was exercised
    assert len(messages) >= 4, messages  # and several kinds of broken framing


@needs_native
def test_rag_markers_right_at_the_attributes_are_found_by_both(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spans laid out as SDKs write them but off the one-match path (a trace_state; a time within
    18 minutes of a bound): the markers are looked for from the attributes on, in both."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

    req = ExportTraceServiceRequest()
    ss = req.resource_spans.add().scope_spans.add()
    for i, (state, start) in enumerate([("k=v", T0), ("", NOW + 86_400 * 10**9 - 1), ("", T0)]):
        span = ss.spans.add(trace_id=bytes([i + 1]) * 16, span_id=b"\x01" * 8, trace_state=state,
                            start_time_unix_nano=start, end_time_unix_nano=T0)
        span.attributes.add(key="input.value", value=AnyValue(string_value="q"))
        span.attributes.add(key="openinference.span.kind", value=AnyValue(string_value="RETRIEVER"))
    native, python = _both(req.SerializeToString(), monkeypatch)
    assert native == python
    assert [rag for *_, rag in native[0]] == [True, True, True]  # type: ignore[index]


@needs_native
def test_partitions_match_otelcols_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragpulse.collector import _native  # type: ignore[attr-defined]
    from ragpulse.common import partition_for_key

    rng = random.Random(7)
    keys = [rng.randbytes(16).hex().encode() for _ in range(2000)] + [b"", b"x", rng.randbytes(100)]
    for n in (1, 2, 3, 6, 7, 64, 1000):
        want = [partition_for_key(k, n) for k in keys]
        assert _native.partitions_for_keys(keys, n) == want
    with pytest.raises(ValueError):
        _native.partitions_for_keys(keys, 0)


def test_the_build_hook_falls_back_when_it_cannot_compile(tmp_path: Path) -> None:
    """No compiler: the build says why and the split runs in Python; the install goes on."""
    env = {**os.environ, "CC": str(tmp_path / "no-such-cc")}
    code = ("import hatch_build, pathlib; t = hatch_build.target(); "
            f"hatch_build.target = lambda: pathlib.Path({str(tmp_path)!r}) / t.name; "
            "print(hatch_build.compile_native())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "cannot compile the collector's C module" in out.stdout
    assert out.stdout.strip().endswith("None")
    assert not list(tmp_path.iterdir())  # nothing half-written left


@pytest.mark.parametrize("native", [True, False])
def test_a_collector_without_the_c_module_says_so_and_shows_it(
        native: bool, make_collector: object, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """An install without a compiler still runs, at about 1 CPU-µs more per span: the operator is
    told at start, once, and the gauge ``ragpulse_collector_split_in_python`` is 1; with the
    module, nothing is said and the gauge is 0."""
    import logging

    monkeypatch.delenv("RAGPULSE_PURE_PYTHON", raising=False)
    if not native:
        monkeypatch.setattr(split_module, "_native", None)
    elif split_module._native is None:
        pytest.skip("ragpulse.collector._native is not built here")
    with caplog.at_level(logging.WARNING, logger="ragpulse.collector"):
        collector = make_collector()  # type: ignore[operator]
    said = [r.getMessage() for r in caplog.records if "runs in Python" in r.getMessage()]
    assert len(said) == (0 if native else 1), said
    assert collector.stats()["split_in_python"] == (0 if native else 1)  # the /metrics gauge
