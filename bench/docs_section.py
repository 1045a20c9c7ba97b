"""One generated section of docs/benchmarks.md, between two copies of a marker comment.

Benches that rewrite their own table call :func:`write_section`; a re-run replaces the text
between the markers and leaves the rest of the page alone, then sets the figures that README.md
and docs/ quote from the page's tables to the new values (:mod:`figures`).
"""

from __future__ import annotations

import sys
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


def _refresh_quotes() -> None:
    """Set every quoted figure to the rewritten tables; say which quotes no longer resolve
    (a row or column the bench no longer writes), which tests/test_docs_figures.py fails on."""
    from bench import figures
    for line in figures.write():
        print(f"warning: quoted figure not found: {line}", file=sys.stderr)
