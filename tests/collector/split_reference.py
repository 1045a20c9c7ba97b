"""The per-trace split as it was before the run-based assembly (issue 20), kept as the reference
that tests/collector/test_split.py compares ``split_request`` with, byte for byte.

A frozen copy of ``ragpulse.collector.split._split`` and its helpers at f58dc60: one tuple per span,
each trace's message assembled span by span. Do not optimise it; it is the yardstick.
"""

from __future__ import annotations

from ragpulse.collector.split import (
    MalformedRequest,
    SplitResult,
    TraceRecord,
    _fields,
    _frame,
    _is_canonical,
    _is_rag_span,
    _span_trace_id,
)
from ragpulse.collector.wire import read_varint as _varint

__all__ = ["reference_split"]

_ZERO_TRACE = bytes(16)


def reference_split(buf: bytes, *, keep_all: bool = False) -> SplitResult:
    try:
        return _split(buf, keep_all)
    except IndexError as exc:
        raise MalformedRequest("truncated message") from exc


def _split(buf: bytes, keep_all: bool) -> SplitResult:
    result = SplitResult()
    # trace id -> list of (resource index, scope index, span frame start, span frame end)
    traces: dict[bytes, list[tuple[int, int, int, int]]] = {}
    rag: set[bytes] = set()
    # Frames of the fields around the repeated one, kept verbatim and in field-number order:
    # per resource (resource | scope_spans... | schema_url), per scope (scope | spans... | schema_url).
    resource_heads: list[tuple[list[bytes], list[bytes]]] = []
    scope_heads: list[list[tuple[list[bytes], list[bytes]]]] = []
    total = invalid = 0
    check_rag = not keep_all
    for number, wire, rs_start, rs_end, _ in _fields(buf, 0, len(buf)):
        if number != 1 or wire != 2:
            continue  # ExportTraceServiceRequest has only resource_spans; pdata drops unknowns too
        ri = len(resource_heads)
        head: tuple[list[bytes], list[bytes]] = ([], [])
        scopes: list[tuple[list[bytes], list[bytes]]] = []
        resource_heads.append(head)
        scope_heads.append(scopes)
        for rnum, rwire, ss_start, ss_end, rframe in _fields(buf, rs_start, rs_end):
            if rnum != 2 or rwire != 2:
                head[rnum > 2].append(buf[rframe:ss_end])  # resource, schema_url, unknowns
                continue
            si = len(scopes)
            shead: tuple[list[bytes], list[bytes]] = ([], [])
            scopes.append(shead)
            # The hot loop (one iteration per span) parses frames inline: a span is tag 0x12
            # (field 2, LEN) with a one- or two-byte length for all but very large spans.
            pos = ss_start
            while pos < ss_end:
                if buf[pos] != 0x12:
                    snum, _, _, fend, sframe = next(_fields(buf, pos, ss_end))
                    shead[snum > 2].append(buf[sframe:fend])  # scope, schema_url, unknowns
                    pos = fend
                    continue
                sframe = pos
                b = buf[pos + 1]
                if b < 0x80:
                    length, sp_start = b, pos + 2
                else:
                    b2 = buf[pos + 2]
                    if b2 < 0x80:
                        length, sp_start = (b & 0x7F) | (b2 << 7), pos + 3
                    else:
                        length, sp_start = _varint(buf, pos + 1)
                sp_end = pos = sp_start + length
                if sp_end > ss_end:
                    raise MalformedRequest("span overruns its scope")
                total += 1
                if length >= 18 and buf[sp_start] == 0x0A and buf[sp_start + 1] == 0x10:
                    trace_id = buf[sp_start + 2 : sp_start + 18]
                else:
                    trace_id = _span_trace_id(buf, sp_start, sp_end)
                    if trace_id is None or len(trace_id) != 16:
                        invalid += 1
                        continue
                if trace_id == _ZERO_TRACE:
                    invalid += 1
                    continue
                spans = traces.get(trace_id)
                if spans is None:
                    spans = traces[trace_id] = []
                spans.append((ri, si, sframe, sp_end))
                if check_rag and trace_id not in rag and _is_rag_span(buf, sp_start, sp_end):
                    rag.add(trace_id)
    result.spans_total = total
    result.spans_invalid = invalid
    if result.spans_invalid:
        result.invalid_message = (
            f"{result.spans_invalid} span(s) without a valid 16-byte non-zero trace_id"
        )
    records = result.records
    if len(traces) == 1 and not result.spans_invalid and _is_canonical(buf):
        # One trace: the request already is the per-trace message; forward it untouched.
        ((trace_id, spans),) = traces.items()
        records.append(TraceRecord(trace_id.hex().encode(), bytes(buf), len(spans), keep_all or trace_id in rag))
        return result
    for trace_id, spans in traces.items():
        records.append(
            TraceRecord(
                trace_id.hex().encode(),
                _assemble(buf, spans, resource_heads, scope_heads),
                len(spans),
                keep_all or trace_id in rag,
            )
        )
    return result


def _assemble(
    buf: bytes,
    spans: list[tuple[int, int, int, int]],
    resource_heads: list[tuple[list[bytes], list[bytes]]],
    scope_heads: list[list[tuple[list[bytes], list[bytes]]]],
) -> bytes:
    out: list[bytes] = []
    i = 0
    n = len(spans)
    while i < n:
        ri = spans[i][0]
        r_pre, r_post = resource_heads[ri]
        resource_body: list[bytes] = list(r_pre)
        while i < n and spans[i][0] == ri:
            si = spans[i][1]
            s_pre, s_post = scope_heads[ri][si]
            scope_body: list[bytes] = list(s_pre)
            while i < n and spans[i][0] == ri and spans[i][1] == si:
                _, _, start, end = spans[i]
                scope_body.append(buf[start:end])
                i += 1
            scope_body.extend(s_post)
            resource_body.append(_frame(b"\x12", scope_body))
        resource_body.extend(r_post)
        out.append(_frame(b"\x0a", resource_body))
    return b"".join(out)
