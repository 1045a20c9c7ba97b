"""One generated section of docs/benchmarks.md, between two copies of a marker comment.

Benches that rewrite their own table call :func:`write_section`; a re-run replaces the text
between the markers and leaves the rest of the page alone.
"""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


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
