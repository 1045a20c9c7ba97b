"""Two conventions of the product code, checked by walking its source with ``ast``
(docs/architecture.md, "Conventions"). Product code is the six packages' source trees
(``<package>/ragpulse/<package>``), not tests, bench, train or examples.

1. **No one-letter public parameters.** A public function or method (its name has no leading
   underscore or is a dunder such as ``__init__``; its classes and its module are public too; not
   nested in another function) names every parameter with more than one letter: ``settings``,
   not ``s``. ``self`` and ``cls`` are fine; so is a lone ``_`` (a parameter the function
   ignores, never passed by keyword). Private helpers may use short names.
2. **Long functions say why.** A function (public or not, nested too) longer than
   :data:`MAX_LINES` lines (``def`` to its last line) has a docstring line that starts with
   ``Long because:`` and gives the reason in one line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PRODUCT = ["instrument", "common", "collector", "scorer", "dashboards", "deploy"]
MAX_LINES = 80
LONG_MARKER = "Long because:"
ALLOWED_SHORT = {"_"}

_Function = ast.FunctionDef | ast.AsyncFunctionDef


def _is_public_name(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def offences(source: str, where: str, public_module: bool = True) -> dict[str, str]:
    """Every breach of the two conventions in one module's ``source``: key
    (``path::function(parameter)`` or ``path::function [long]``) -> message."""
    found: dict[str, str] = {}

    def visit(node: ast.AST, scope: list[str], public: bool, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, [*scope, child.name], public and _is_public_name(child.name),
                      in_function)
            elif isinstance(child, _Function):
                name = ".".join([*scope, child.name])
                length = child.end_lineno - child.lineno + 1  # type: ignore[operator]
                doc = ast.get_docstring(child) or ""
                if length > MAX_LINES and not any(
                        line.strip().startswith(LONG_MARKER) and line.strip() != LONG_MARKER
                        for line in doc.splitlines()):
                    found[f"{where}::{name} [long]"] = (
                        f"{where}:{child.lineno}: {name} is {length} lines (> {MAX_LINES}) and its "
                        f"docstring has no '{LONG_MARKER} <reason>' line")
                if public and not in_function and _is_public_name(child.name):
                    a = child.args
                    params = [*a.posonlyargs, *a.args, *a.kwonlyargs,
                              *(p for p in (a.vararg, a.kwarg) if p is not None)]
                    for p in params:
                        if len(p.arg) == 1 and p.arg not in ALLOWED_SHORT:
                            found[f"{where}::{name}({p.arg})"] = (
                                f"{where}:{child.lineno}: public {name} has a one-letter "
                                f"parameter {p.arg!r}: name what it is")
                visit(child, [*scope, child.name], False, True)
            else:
                visit(child, scope, public, in_function)

    visit(ast.parse(source, where), [], public_module, False)
    return found


def _product_offences() -> dict[str, str]:
    found: dict[str, str] = {}
    for package in PRODUCT:
        for path in sorted((REPO / package / "ragpulse").rglob("*.py")):
            rel = path.relative_to(REPO)
            public = all(_is_public_name(part) for part in rel.with_suffix("").parts)
            found.update(offences(path.read_text(), rel.as_posix(), public))
    return found


@pytest.fixture(scope="module")
def product_offences() -> dict[str, str]:
    return _product_offences()


def test_product_code_keeps_the_conventions(product_offences: dict[str, str]) -> None:
    assert not product_offences, "\n".join(msg for _, msg in sorted(product_offences.items()))


def test_the_checker_finds_what_it_should() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    source = f'''
def settings_sql(s, _, *, limit): ...
def _private(s): ...
class Chart:
    def __init__(self, w): ...
    def scale(self, value, *a): ...
    def _draw(self, x): ...
class _Hidden:
    def draw(self, x): ...
def outer(value):
    def inner(s): ...
def long_one():
{body}
def long_with_reason():
    """Draws it.

    Long because: one table of rows.
    """
{body}
def long_with_empty_marker():
    """Long because:"""
{body}
'''
    assert sorted(offences(source, "m.py")) == [
        "m.py::Chart.__init__(w)", "m.py::Chart.scale(a)", "m.py::long_one [long]",
        "m.py::long_with_empty_marker [long]", "m.py::settings_sql(s)"]
    assert sorted(offences(source, "_m.py", public_module=False)) == [
        "_m.py::long_one [long]", "_m.py::long_with_empty_marker [long]"]
