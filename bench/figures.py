"""Figures that README.md and docs/ quote from the benches' tables in docs/benchmarks.md.

Every measured figure a page states outside docs/benchmarks.md is a quote of one cell of a table
a bench wrote there, never a retyped number:

    <!-- fig SOURCE; ROW; COLUMN -->VALUE<!-- /fig -->

* ``SOURCE``: a section of docs/benchmarks.md, either the name between its two marker comments
  (``bench/judge_speed.py`` for the section between two ``<!-- bench/judge_speed.py -->`` lines)
  or its heading (``## Collector throughput``: the text up to the next ``## `` heading), for the
  benches that rewrite their section by heading.
* ``ROW``: the row's leading cells, comma-separated (``model`` or ``model, dev (all), faithful``;
  ``*`` matches any cell: ``fast, *, HaluEval``).
  Bold and code marks are ignored, and judge names are compared under their current names, so
  ``model`` finds a row a bench wrote as ``local-model`` before the rename (issue 39).
* ``COLUMN``: the column's header; ``COLUMN[i]`` takes the i-th part (from 0) of a cell that
  holds several values split by `` / `` (``load avg before / after``).

A rendered page shows only ``VALUE``. ``python bench/figures.py --write`` sets every quote to
its cell (:func:`bench.docs_section.write_section` does it after a bench rewrites its section;
run it after the benches that write their own section by heading); ``--check`` lists the quotes
that differ from their tables or do not resolve, and exits 1. ``tests/test_docs_figures.py``
runs the check, so a figure retyped by hand that drifts from its table fails the tests.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["QUOTE", "Quote", "check", "pages", "quotes", "resolve", "tables", "write"]

REPO = Path(__file__).resolve().parent.parent
BENCHMARKS = REPO / "docs" / "benchmarks.md"
QUOTE = re.compile(r"<!-- fig (?P<address>[^>]*?) -->(?P<value>[^<`]*)<!-- /fig -->")
_PART = re.compile(r"^(?P<column>.*?)\[(?P<index>\d+)\]$")


@dataclass(frozen=True)
class Quote:
    """One quote on a page: where it is, what it addresses and the value it shows."""

    page: Path
    line: int
    source: str
    row: tuple[str, ...]
    column: str
    value: str


def pages(repo: Path = REPO) -> list[Path]:
    """The pages that may quote: README.md and every page of docs/ (benchmarks.md's own prose
    included; a quote inside a generated section would be overwritten by its bench). Not
    docs/history/: a dated record keeps the figures of its day."""
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


def _canonical(cell: str) -> str:
    """A cell as rows are matched: marks and spaces stripped, old judge names made current."""
    text = cell.replace("**", "").replace("`", "").strip()
    try:
        from ragpulse.scorer.judges.registry import JUDGE_ALIASES
    except ImportError:  # the figures of a checkout without ragpulse installed: names as written
        return text
    return JUDGE_ALIASES.get(text, text)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def section(source: str, text: str) -> str:
    """The text of ``source`` (a marker name or a ``## `` heading) in ``text``; raises
    ``KeyError`` when the page has no such section."""
    if source.startswith("#"):
        lines = text.splitlines()
        try:
            start = next(i for i, ln in enumerate(lines) if ln.strip() == source)
        except StopIteration:
            raise KeyError(f"no heading {source!r} in docs/benchmarks.md") from None
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
                   len(lines))
        return "\n".join(lines[start:end])
    mark = f"<!-- {source} -->"
    if text.count(mark) < 2:
        raise KeyError(f"no section between two {mark!r} lines in docs/benchmarks.md")
    start = text.index(mark) + len(mark)
    return text[start:text.index(mark, start)]


def tables(body: str) -> list[tuple[list[str], list[list[str]]]]:
    """The markdown tables of ``body``: (header cells, rows of cells), the separator dropped."""
    out: list[tuple[list[str], list[list[str]]]] = []
    block: list[str] = []
    for line in [*body.splitlines(), ""]:
        if line.lstrip().startswith("|"):
            block.append(line)
            continue
        if len(block) >= 2 and set(block[1].replace("|", "").strip()) <= set("-: "):
            out.append((_cells(block[0]), [_cells(r) for r in block[2:]]))
        block = []
    return out


def resolve(source: str, row: tuple[str, ...], column: str, text: str | None = None) -> str:
    """The cell a quote addresses, bold marks dropped. Raises ``KeyError`` naming what is
    missing, or ``ValueError`` when two tables of the section give different values."""
    text = BENCHMARKS.read_text(encoding="utf-8") if text is None else text
    index = None
    m = _PART.match(column)
    if m:
        column, index = m.group("column"), int(m.group("index"))
    want = tuple(_canonical(r) for r in row)
    found: set[str] = set()
    for header, rows in tables(section(source, text)):
        if column not in header:
            continue
        at = header.index(column)
        for cells in rows:
            lead = tuple(_canonical(c) for c in cells[:len(want)])
            if len(cells) > at and len(lead) == len(want) and all(
                    w in ("*", c) for w, c in zip(want, lead, strict=True)):
                value = cells[at].replace("**", "").strip()
                if index is not None:
                    parts = [p.strip() for p in value.split(" / ")]
                    if index >= len(parts):
                        raise KeyError(f"{source}; {', '.join(row)}; {column}: {value!r} has no part {index}")
                    value = parts[index]
                found.add(value)
    if not found:
        raise KeyError(f"{source}: no row {', '.join(row)!r} with a column {column!r}")
    if len(found) > 1:
        raise ValueError(f"{source}; {', '.join(row)}; {column}: tables disagree: {sorted(found)}")
    return found.pop()


def quotes(page: Path) -> list[Quote]:
    """Every quote on ``page``; raises ``ValueError`` on one whose address is malformed."""
    out = []
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        for m in QUOTE.finditer(line):
            parts = [p.strip() for p in m.group("address").split(";")]
            if len(parts) != 3 or not all(parts):
                raise ValueError(f"{page}:{n}: a quote is <!-- fig SOURCE; ROW; COLUMN -->: "
                                 f"{m.group(0)!r}")
            out.append(Quote(page, n, parts[0], tuple(r.strip() for r in parts[1].split(",")),
                             parts[2], m.group("value")))
    return out


def check(repo: Path = REPO) -> list[str]:
    """One line per quote that does not resolve or differs from its table; [] when all agree."""
    text = (repo / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    problems = []
    for page in pages(repo):
        for q in quotes(page):
            where = f"{page.relative_to(repo)}:{q.line}"
            try:
                value = resolve(q.source, q.row, q.column, text)
            except (KeyError, ValueError) as exc:
                problems.append(f"{where}: {exc.args[0]}")
                continue
            if value != q.value:
                problems.append(f"{where}: quotes {q.value!r}, the table has {value!r} "
                                f"({q.source}; {', '.join(q.row)}; {q.column})")
    return problems


def write(repo: Path = REPO) -> list[str]:
    """Set every quote to its table's cell; returns the quotes that do not resolve (left as
    they are)."""
    text = (repo / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    unresolved: list[str] = []
    for page in pages(repo):
        old = page.read_text(encoding="utf-8")

        def fill(m: re.Match[str], page: Path = page) -> str:
            source, row, column = (p.strip() for p in m.group("address").split(";"))
            try:
                value = resolve(source, tuple(r.strip() for r in row.split(",")), column, text)
            except (KeyError, ValueError) as exc:
                unresolved.append(f"{page.relative_to(repo)}: {exc.args[0]}")
                return m.group(0)
            return f"<!-- fig {m.group('address')} -->{value}<!-- /fig -->"

        new = QUOTE.sub(fill, old)
        if new != old:
            page.write_text(new, encoding="utf-8")
    return unresolved


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", action="store_true", help="list quotes that differ; exit 1 if any")
    g.add_argument("--write", action="store_true", help="set every quote to its table's cell")
    args = p.parse_args(argv)
    problems = check() if args.check else write()
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
