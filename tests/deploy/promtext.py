"""A strict parser of the Prometheus text exposition format 0.0.4, for tests.

https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format. Stricter than
Prometheus itself where our output must be clean: every sample's metric has exactly one ``# TYPE``
line before its first sample, ``# HELP``/``# TYPE`` appear at most once per name, counters end in
``_total``, names and label names match the grammar, label values use only the three escapes,
values are floats, and the text ends with a newline.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


class ParseError(ValueError):
    pass


@dataclass
class Family:
    name: str
    type: str = ""
    help: str | None = None
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)


def _labels(text: str, lineno: int) -> tuple[dict[str, str], str]:
    """Parse ``{a="b",...}`` at the start of ``text``; returns the labels and the rest."""
    assert text.startswith("{")
    i, labels = 1, {}
    while True:
        if text[i] == "}":
            return labels, text[i + 1 :]
        m = _LABEL.match(text, i)
        if not m:
            raise ParseError(f"line {lineno}: bad label name at {text[i:]!r}")
        name = m.group(0)
        i = m.end()
        if text[i : i + 2] != '="':
            raise ParseError(f'line {lineno}: expected =" after label {name}')
        i += 2
        value = []
        while text[i] != '"':
            if text[i] == "\\":
                nxt = text[i + 1]
                if nxt not in 'n"\\':
                    raise ParseError(f"line {lineno}: bad escape \\{nxt}")
                value.append("\n" if nxt == "n" else nxt)
                i += 2
            else:
                value.append(text[i])
                i += 1
        i += 1
        if name in labels:
            raise ParseError(f"line {lineno}: duplicate label {name}")
        labels[name] = "".join(value)
        if text[i] == ",":
            i += 1
        elif text[i] != "}":
            raise ParseError(f"line {lineno}: expected , or }} in labels")


def parse(text: str) -> dict[str, Family]:
    if not text.endswith("\n"):
        raise ParseError("exposition must end with a newline")
    families: dict[str, Family] = {}
    seen_samples: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for lineno, line in enumerate(text[:-1].split("\n"), 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not _NAME.fullmatch(name):
                    raise ParseError(f"line {lineno}: bad metric name {name!r}")
                fam = families.setdefault(name, Family(name))
                if parts[1] == "HELP":
                    if fam.help is not None:
                        raise ParseError(f"line {lineno}: second HELP for {name}")
                    fam.help = parts[3] if len(parts) > 3 else ""
                else:
                    if fam.type:
                        raise ParseError(f"line {lineno}: second TYPE for {name}")
                    if fam.samples:
                        raise ParseError(f"line {lineno}: TYPE after samples of {name}")
                    kind = parts[3] if len(parts) > 3 else ""
                    if kind not in _TYPES:
                        raise ParseError(f"line {lineno}: unknown type {kind!r}")
                    if kind == "counter" and not name.endswith("_total"):
                        raise ParseError(f"line {lineno}: counter {name} must end in _total")
                    fam.type = kind
            continue
        m = _NAME.match(line)
        if not m:
            raise ParseError(f"line {lineno}: bad sample {line!r}")
        name, rest = m.group(0), line[m.end() :]
        labels: dict[str, str] = {}
        if rest.startswith("{"):
            labels, rest = _labels(rest, lineno)
        fields = rest.strip().split(" ")
        if not rest.startswith(" ") or len(fields) not in (1, 2):
            raise ParseError(f"line {lineno}: expected ' value [timestamp]' in {line!r}")
        try:
            value = float(fields[0])
        except ValueError:
            raise ParseError(f"line {lineno}: bad value {fields[0]!r}") from None
        if math.isnan(value) and fields[0] != "NaN":
            raise ParseError(f"line {lineno}: bad NaN spelling")
        fam = families.get(name)
        if fam is None or not fam.type:
            raise ParseError(f"line {lineno}: sample of {name} without a TYPE line before it")
        key = (name, tuple(sorted(labels.items())))
        if key in seen_samples:
            raise ParseError(f"line {lineno}: duplicate sample {name}{labels}")
        seen_samples.add(key)
        fam.samples.append((labels, value))
    return families
