"""One generated section of docs/benchmarks.md, between two copies of a marker comment.

Benches that rewrite their own table call :func:`write_section`; a re-run replaces the text
between the markers and leaves the rest of the page alone, then sets the figures that README.md
and docs/ quote from the page's tables to the new values (:mod:`figures`). Benches that also
set a measured constant in the product's code (the judges' speeds and alert levels in
``registry.py``) call :func:`write_constant`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
_PAGE = DOCS  # the repository's page (tests point DOCS at a copy; quotes follow only this one)


def write_section(mark: str, body: str, heading: str, before: str | None = None,
                  docs: Path = DOCS) -> None:
    """Put ``body`` between two ``mark`` lines in ``docs``: in place of the marked section when
    there is one, else as a new ``heading`` section just before the line ``before`` (at the end
    of the page when ``before`` is None). Raises ``ValueError`` when neither the marker nor
    ``before`` is on the page (nothing is written)."""
    text = docs.read_text(encoding="utf-8")
    section = f"{mark}\n{body}\n{mark}"
    if mark in text:
        start = text.index(mark)
        end = text.index(mark, start + len(mark)) + len(mark)
        text = text[:start] + section + text[end:]
    elif before is None:
        text += f"\n{heading}\n\n{section}\n"
    elif before in text:
        text = text.replace(before, f"{heading}\n\n{section}\n\n{before}", 1)
    else:
        raise ValueError(f"{docs}: neither {mark!r} nor {before!r} found")
    docs.write_text(text, encoding="utf-8")
    if docs.resolve() == _PAGE:
        _refresh_quotes()


def write_constant(path: Path, name: str, values: Mapping[str, float], fmt: str = "") -> None:
    """Rewrite the line ``NAME: dict[str, float] = {...}`` of ``path`` with ``values`` (keys
    sorted, each value formatted with ``fmt``). Raises ``SystemExit`` when the file has no such
    line (nothing is written)."""
    new = f"{name}: dict[str, float] = {{" + ", ".join(
        f'"{k}": {v:{fmt}}' for k, v in sorted(values.items())) + "}"
    text, n = re.subn(rf"^{re.escape(name)}: dict\[str, float\] = \{{[^}}]*\}}",
                      lambda _: new, path.read_text(encoding="utf-8"), flags=re.M)
    if n != 1:
        raise SystemExit(f"{path}: {name} line not found")
    path.write_text(text, encoding="utf-8")


def _refresh_quotes() -> None:
    """Set every quoted figure to the rewritten tables; say which quotes no longer resolve
    (a row or column the bench no longer writes), which tests/test_docs_figures.py fails on."""
    from bench import figures
    for line in figures.write():
        print(f"warning: quoted figure not found: {line}", file=sys.stderr)
