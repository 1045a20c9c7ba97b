"""Two conventions, checked by walking the source with ``ast`` (docs/architecture.md,
"Conventions"). Product code is the six packages' source trees (``<package>/ragpulse/<package>``);
the repository's own tools are ``bench/``, ``train/`` and ``testkit/`` (not tests or examples).

1. **No one-letter public parameters.** A public function or method (its name has no leading
   underscore or is a dunder such as ``__init__``; its classes and its module are public too; not
   nested in another function) names every parameter with more than one letter: ``settings``,
   not ``s``. ``self`` and ``cls`` are fine; so is a lone ``_`` (a parameter the function
   ignores, never passed by keyword). Private helpers may use short names. Holds for the product
   and ``testkit`` (what tests and benchmarks call); bench and train scripts are commands, not
   interfaces, and keep their formulas' names (``x``, ``y``, ``n``).
2. **Long functions say why.** A function (public or not, nested too) longer than
   :data:`MAX_LINES` lines (``def`` to its last line) has a docstring line that starts with
   ``Long because:`` and gives the reason in one line. Holds for the product and every tool.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PRODUCT = ["instrument", "common", "collector", "scorer", "dashboards", "deploy"]
TOOLS = ["bench", "train", "testkit"]
NAMED_TOOLS = {"testkit"}  # the tools whose public parameters follow rule 1
# Offences another change owns: each entry says whose, and fails once it no longer offends.
PENDING = {
    # bench/collector.py is being rewritten by issue 41's collector work; its main gets a reason
    # (or a split) there.
    "bench/collector.py::main [long]",
}
MAX_LINES = 80
LONG_MARKER = "Long because:"
ALLOWED_SHORT = {"_"}

_Function = ast.FunctionDef | ast.AsyncFunctionDef


def _is_public_name(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def offences(source: str, where: str, public_module: bool = True,
             parameters: bool = True) -> dict[str, str]:
    """Every breach of the two conventions in one module's ``source`` (rule 1 only when
    ``parameters``): key (``path::function(parameter)`` or ``path::function [long]``) ->
    message."""
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
                if parameters and public and not in_function and _is_public_name(child.name):
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


def _offences_under(root: Path, parameters: bool) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(REPO)
        if any(part.startswith(".") for part in rel.parts):  # bench/.venv-ragas and the like
            continue
        public = all(_is_public_name(part) for part in rel.with_suffix("").parts)
        found.update(offences(path.read_text(), rel.as_posix(), public, parameters))
    return found


@pytest.fixture(scope="module")
def product_offences() -> dict[str, str]:
    found: dict[str, str] = {}
    for package in PRODUCT:
        found.update(_offences_under(REPO / package / "ragpulse", parameters=True))
    return found


@pytest.fixture(scope="module")
def tool_offences() -> dict[str, str]:
    found: dict[str, str] = {}
    for tool in TOOLS:
        found.update(_offences_under(REPO / tool, parameters=tool in NAMED_TOOLS))
    return found


def test_product_code_keeps_the_conventions(product_offences: dict[str, str]) -> None:
    assert not product_offences, "\n".join(msg for _, msg in sorted(product_offences.items()))


def test_bench_train_and_testkit_keep_the_conventions(tool_offences: dict[str, str]) -> None:
    new = {key: msg for key, msg in tool_offences.items() if key not in PENDING}
    assert not new, "\n".join(msg for _, msg in sorted(new.items()))
    stale = sorted(PENDING - set(tool_offences))
    assert not stale, f"no longer offending, remove from PENDING: {stale}"


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
    assert sorted(offences(source, "bench/m.py", parameters=False)) == [
        "bench/m.py::long_one [long]", "bench/m.py::long_with_empty_marker [long]"]
