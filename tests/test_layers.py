"""The packages depend on each other in one direction, only through each other's public surface,
and every package's ``__all__`` is exactly what it exports.

Layers (an arrow means "may import")::

    deploy (and the ragpulse command) ──> dashboards ──> scorer ──> common ──> instrument
          └────────────────────────────> collector ─────────────> common
          └──────────────────────────────────────────────────────────────────> instrument

``instrument`` runs inside users' apps and imports nothing else from ragpulse (it owns the span
attribute names ragpulse defines; ``common`` re-exports them). ``common`` holds the contracts
both sides of Kafka share; nothing below ``deploy`` imports
``deploy``, and the collector and the scorer never import each other. A cross-package import
names a package (an ``__init__``) and only names from its ``__all__``: ``from
ragpulse.scorer.store import open_store``, never ``from ragpulse.scorer.store.client import ...``.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SOURCE_ROOTS = ["instrument", "common", "collector", "scorer", "dashboards", "deploy"]

ALLOWED: dict[str, set[str]] = {
    "instrument": set(),
    "common": {"instrument"},
    "collector": {"common", "instrument"},
    "scorer": {"common", "instrument"},
    "dashboards": {"common", "instrument", "scorer"},
    "deploy": {"common", "collector", "scorer", "dashboards", "instrument"},
}


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the distribution."""
    out = {}
    for root in SOURCE_ROOTS:
        for path in sorted((REPO / root / "ragpulse").rglob("*.py")):
            parts = list(path.relative_to(REPO / root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()
PACKAGES = sorted(name for name, path in MODULES.items() if path.name == "__init__.py")


def _layer(module: str) -> str:
    return module.split(".")[1]


def _imports(module: str, path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, absolute target module, imported names) of every ragpulse import in ``path``."""
    is_package = path.name == "__init__.py"
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names if a.name.startswith("ragpulse.")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("ragpulse.") or target == "ragpulse":
                out.append((node.lineno, target, [a.name for a in node.names]))
    return out


def test_layers_point_one_way_and_cross_only_public_surfaces() -> None:
    problems = []
    for module, path in MODULES.items():
        if module == "ragpulse":
            continue
        layer = _layer(module)
        for line, target, names in _imports(module, path):
            if target == "ragpulse":  # `from ragpulse import X` names a layer
                targets = [(f"ragpulse.{n}", []) for n in names]
            else:
                targets = [(target, names)]
            for target_module, imported in targets:
                other = _layer(target_module)
                if other == layer:
                    continue
                where = f"{path.relative_to(REPO)}:{line}"
                if other not in ALLOWED[layer]:
                    problems.append(f"{where}: {layer} must not import {other} ({target_module})")
                    continue
                if target_module not in PACKAGES and target_module.count(".") > 1:
                    problems.append(f"{where}: deep import {target_module}: import from its package")
                    continue
                public = set(getattr(importlib.import_module(target_module), "__all__", ()))
                hidden = [n for n in imported if n not in public]
                if hidden:
                    problems.append(f"{where}: {target_module} does not export {hidden}")
    assert not problems, "\n".join(problems)


def test_no_cycle_between_layers() -> None:
    """The allowed graph itself is acyclic (a later edit to ALLOWED cannot sneak one in)."""
    seen: dict[str, int] = {}

    def visit(node: str, stack: tuple[str, ...]) -> None:
        assert node not in stack, " -> ".join((*stack, node))
        if seen.get(node):
            return
        for nxt in ALLOWED[node]:
            visit(nxt, (*stack, node))
        seen[node] = 1

    for layer in ALLOWED:
        visit(layer, ())


# The repository's own tools (docs/architecture.md, "Repository layers"); an arrow means "may
# import", and every one of them may import ragpulse, which imports none of them:
#
#   tests ──> train (its commands) ──> bench ──> testkit
#     │                                  └─────> train.data
#     └──> any of them
#
# testkit holds what tests and benches share (fakes, trace and request builders); train's
# evaluation commands score through bench's harness; bench reads the RAG corpus through
# train.data. Nothing imports tests, and no file edits sys.path: the editable install puts the
# repository root on the path.
TOOL_ALLOWED: dict[str, set[str]] = {
    "tests": {"train", "bench", "testkit", "train.data"},
    "train": {"bench", "train.data"},
    "bench": {"testkit", "train.data"},
    "testkit": set(),
    "train.data": set(),
}
TOOL_ROOTS = ["tests", "bench", "train", "testkit"]


def _tool_files() -> dict[Path, str]:
    """Every Python file of the tools -> its unit."""
    out = {}
    for root in TOOL_ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            rel = path.relative_to(REPO)
            if any(part.startswith(".") for part in rel.parts):  # bench/.venv-ragas and the like
                continue
            out[path] = "train.data" if rel.parts[:2] == ("train", "data") else rel.parts[0]
    return out


def _tool_unit(module: str, names: list[str]) -> list[str]:
    """The tool units an import of ``module`` (``names`` from it) reaches; [] for others."""
    parts = module.split(".")
    if parts[0] == "train":
        if parts[1:2] == ["data"]:
            return ["train.data"]
        if len(parts) == 1:
            return sorted({"train.data" if n == "data" else "train" for n in names} or {"train"})
        return ["train"]
    return [parts[0]] if parts[0] in TOOL_ALLOWED else []


def _absolute_imports(path: Path, tree: ast.AST) -> list[tuple[int, str, list[str]]]:
    package = list(path.relative_to(REPO).with_suffix("").parts)[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - (node.level - 1)] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            out.append((node.lineno, target, [a.name for a in node.names]))
    return out


def _edits_sys_path(tree: ast.AST) -> list[int]:
    def is_sys_path(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "path"
                and isinstance(node.value, ast.Name) and node.value.id == "sys")

    lines = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and is_sys_path(node.func.value)):
            lines.append(node.lineno)  # sys.path.insert/append/extend/remove
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(is_sys_path(t) or isinstance(t, ast.Subscript) and is_sys_path(t.value)
                   for t in targets):
                lines.append(node.lineno)
    return sorted(lines)


def test_tools_import_one_way_without_sys_path_edits() -> None:
    problems = []
    for path, unit in _tool_files().items():
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(REPO)
        problems += [f"{where}:{line}: edits sys.path" for line in _edits_sys_path(tree)]
        for line, target, names in _absolute_imports(path, tree):
            for other in _tool_unit(target, names):
                if other != unit and other not in TOOL_ALLOWED[unit]:
                    problems.append(f"{where}:{line}: {unit} must not import {other} ({target})")
    for module, path in MODULES.items():
        for line, target, names in _absolute_imports(path, ast.parse(path.read_text())):
            if _tool_unit(target, names):
                problems.append(f"{path.relative_to(REPO)}:{line}: the product imports {target}")
    assert not problems, "\n".join(problems)


def test_the_tool_import_check_sees_what_it_should() -> None:
    assert _tool_unit("train.data.rag_corpus", ["committed"]) == ["train.data"]
    assert _tool_unit("train", ["data", "spm"]) == ["train", "train.data"]
    assert _tool_unit("train.evaluate", ["lang_of"]) == ["train"]
    assert _tool_unit("tests.infra_chdb", []) == ["tests"]
    assert _tool_unit("ragpulse.scorer", ["Sample"]) == []
    tree = ast.parse("import sys\nsys.path.insert(0, 'x')\nsys.path[:0] = ['y']\n"
                     "sys.path = []\nprint(sys.path)\n")
    assert _edits_sys_path(tree) == [2, 3, 4]


# Inside the scorer, one unit per top-level module or subpackage of ``ragpulse.scorer``; an
# arrow means "may import" (docs/architecture.md draws it):
#
#   pipeline ──> evaluator ──> judges ──> metrics ──> stats ──> model
#       │                         └──> segment, embeddings ──> use_int8
#       │                                                          ▲
#       ├──> traces ─────────────────────────────────────────────────┤
#       ├──> store ──────────────────────────────────────────────────┤
#       └──> privacy ──> person_names, model ─────────────────────────┘
#
# Only the direction is checked here: the pipeline, which wires everything, may import any
# module of the units below it.
SCORER_ALLOWED: dict[str, set[str]] = {
    "model": set(),
    "stats": {"model"},
    "segment": set(),
    "use_int8": set(),
    "embeddings": {"use_int8"},
    "person_names": set(),
    "metrics": {"model", "stats"},
    "traces": {"model"},
    "store": {"model"},
    "privacy": {"model", "person_names"},
    "judges": {"model", "stats", "segment", "embeddings", "metrics"},
    "evaluator": {"model", "stats", "metrics", "judges"},
    "pipeline": {"model", "stats", "segment", "embeddings", "person_names", "metrics", "traces",
                 "store", "privacy", "judges", "evaluator"},
}


def _scorer_unit(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == ["ragpulse", "scorer"] and len(parts) > 2 else None


def test_scorer_units_point_one_way() -> None:
    problems = []
    for module, path in MODULES.items():
        unit = _scorer_unit(module)
        if unit is None:
            continue
        if unit not in SCORER_ALLOWED:
            problems.append(f"{path.relative_to(REPO)}: new scorer unit {unit!r}: place it in "
                            "SCORER_ALLOWED and docs/architecture.md")
            continue
        for line, target, names in _imports(module, path):
            targets = [f"{target}.{n}" for n in names] if target == "ragpulse.scorer" else [target]
            for t in targets:
                other = _scorer_unit(t)
                if other is None or other == unit:
                    continue
                if other not in SCORER_ALLOWED[unit]:
                    problems.append(f"{path.relative_to(REPO)}:{line}: scorer.{unit} must not "
                                    f"import scorer.{other} ({t})")
    assert not problems, "\n".join(problems)


# Inside the live scorer's pipeline (docs/architecture.md, path 2): the steps share nothing but
# the foundation modules (the messages, the step interface, the record references, counters,
# settings, the trace buffer, the segment reader); none imports another step or the processing loop, which knows
# the steps only through its chain factory. Only the service wires steps and loop together, and
# only the factory builds the service from settings.
PIPELINE_FOUNDATION = {"offsets", "telemetry", "trace_buffer", "settings", "steps", "messages",
                       "segments"}
PIPELINE_STEPS = {"decode", "assemble", "prepare", "evaluate", "write", "dead_letter", "commit"}
PIPELINE_ALLOWED: dict[str, set[str]] = {
    "offsets": set(),
    "telemetry": set(),
    "segments": set(),
    "trace_buffer": {"offsets"},
    "settings": {"trace_buffer"},
    "steps": {"offsets"},
    "messages": {"offsets", "trace_buffer"},
    **{step: PIPELINE_FOUNDATION for step in PIPELINE_STEPS},
    "processor": PIPELINE_FOUNDATION,
    "service": PIPELINE_FOUNDATION | PIPELINE_STEPS | {"processor"},
    "factory": PIPELINE_FOUNDATION | {"service", "prepare"},
}


def test_pipeline_steps_share_nothing_but_the_foundation() -> None:
    prefix = "ragpulse.scorer.pipeline."
    problems = []
    for module, path in MODULES.items():
        if not module.startswith(prefix):
            continue  # the package's __init__ only re-exports
        name = module[len(prefix):]
        if name not in PIPELINE_ALLOWED:
            problems.append(f"{path.relative_to(REPO)}: new pipeline module {name!r}: place it "
                            "in PIPELINE_ALLOWED and docs/architecture.md")
            continue
        for line, target, names in _imports(module, path):
            targets = [f"{target}.{n}" for n in names] if target == prefix[:-1] else [target]
            for t in targets:
                if not t.startswith(prefix):
                    continue
                other = t[len(prefix):].split(".")[0]
                if other != name and other not in PIPELINE_ALLOWED[name]:
                    problems.append(f"{path.relative_to(REPO)}:{line}: pipeline.{name} must not "
                                    f"import pipeline.{other}")
    assert not problems, "\n".join(problems)


def test_no_cycle_between_scorer_units() -> None:
    for graph in (ALLOWED, SCORER_ALLOWED, PIPELINE_ALLOWED, TOOL_ALLOWED):
        seen: set[str] = set()

        def visit(node: str, stack: tuple[str, ...], graph: dict[str, set[str]] = graph) -> None:
            assert node not in stack, " -> ".join((*stack, node))
            if node in seen:
                return
            for nxt in graph[node]:
                visit(nxt, (*stack, node))
            seen.add(node)

        for unit in graph:
            visit(unit, ())


@pytest.mark.parametrize("package", ["common", "instrument", "collector", "scorer", "dashboards",
                                     "deploy"])
def test_each_layer_imports_alone(package: str) -> None:
    """Each layer's public surface imports in a fresh interpreter (an import cycle fails here),
    and without loading any layer it must not depend on."""
    code = (
        "import sys, importlib\n"
        f"m = importlib.import_module('ragpulse.{package}')\n"
        "[getattr(m, n) for n in getattr(m, '__all__', [])]\n"
        "print(' '.join(sorted({k.split('.')[1] for k in sys.modules "
        "if k.startswith('ragpulse.') and k.count('.') >= 1})))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert loaded <= ALLOWED[package] | {package}, loaded - ALLOWED[package] - {package}


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_the_public_surface(package: str) -> None:
    """Like httpx's test: every name in ``__all__`` exists, none twice, in ruff's order (constants,
    classes, functions); and every public name defined in the package (its own modules, not
    its submodules or third-party imports) is listed."""
    module = importlib.import_module(package)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{package} has no __all__"
    assert len(set(exported)) == len(exported)
    order = sorted(exported, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n))
    assert list(exported) == order, f"{package}.__all__ is not sorted"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, missing
    public = {
        n for n, v in vars(module).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType) and n != "annotations"
        and str(getattr(v, "__module__", package)).startswith(package)
    }
    assert public <= set(exported), sorted(public - set(exported))


# Inside a unit, modules split by concern keep their own one-way order: a module listed here may
# import, from its own package, only the modules named (docs/architecture.md, docs/judges.md).
MODULE_ALLOWED: dict[str, set[str]] = {
    # the LLM judge: transport <- calls <- findings <- judge
    "ragpulse.scorer.judges.llm.transport": {"counters", "limits", "parsing", "prompts", "settings"},
    "ragpulse.scorer.judges.llm.calls": {"parsing", "plan", "prompts", "settings", "transport"},
    "ragpulse.scorer.judges.llm.findings": {"calls", "plan", "prompts"},
    # privacy: the recognisers know nothing of the redactor
    "ragpulse.scorer.privacy.recognisers": set(),
    # the local judge: one lexicon under the lexical views and the detector
    "ragpulse.scorer.judges.local.lexicon": set(),
    "ragpulse.scorer.judges.local.text": {"lexicon"},
    "ragpulse.scorer.judges.local.support_detector": {"lexicon"},
    # the NLI judge's value normaliser and quote finder: standard library only (the quote
    # finder is given its sentence splitter), under settings and the model
    "ragpulse.scorer.judges.nli.values": set(),
    "ragpulse.scorer.judges.nli.quoted": set(),
    "ragpulse.scorer.judges.nli.settings": {"quoted", "values"},
    # trace extraction: value readers <- messages, families <- simple readers <- one module per
    # convention family <- source tables <- facts <- the walk (trace)
    **{f"ragpulse.scorer.traces.extract.{name}": allowed for name, allowed in {
        "values": set(),
        "families": set(),
        "results": set(),
        "messages": {"values"},
        "readers": {"families", "messages", "values"},
        "prompt": {"readers"},
        "events": {"messages", "readers", "values"},
        "genai": {"families", "messages", "readers", "values"},
        "openinference": {"families", "messages", "readers", "values"},
        "openllmetry": {"families", "messages", "prompt", "readers", "values"},
        "sources": {"events", "genai", "openinference", "openllmetry", "readers", "values"},
        "facts": {"families", "sources", "values"},
        "trace": {"facts", "families", "messages", "openinference", "openllmetry", "prompt",
                  "readers", "results", "sources", "values"},
    }.items()},
}


@pytest.mark.parametrize("module", sorted(MODULE_ALLOWED))
def test_split_modules_point_one_way(module: str) -> None:
    package = module.rsplit(".", 1)[0]
    siblings = {name.rsplit(".", 1)[1] for name in MODULES
                if name.rsplit(".", 1)[0] == package and name != package}
    assert module in MODULES, f"{module} is gone: update MODULE_ALLOWED"
    imported = {target.rsplit(".", 1)[1] for _, target, _ in _imports(module, MODULES[module])
                if target.rsplit(".", 1)[0] == package}
    imported |= {n for _, target, names in _imports(module, MODULES[module]) if target == package
                 for n in names if n in siblings}
    assert imported <= MODULE_ALLOWED[module], sorted(imported - MODULE_ALLOWED[module])


# Packages split into modules whose names are their interfaces: no module imports another's
# ``_``-prefixed name (``from .values import _x``) or reaches into it (``genai._x``), from inside
# the package or outside it.
PRIVATE_KEPT = ("ragpulse.scorer.traces.extract",)


@pytest.mark.parametrize("package", PRIVATE_KEPT)
def test_private_names_stay_in_their_module(package: str) -> None:
    problems = []
    for module, path in MODULES.items():
        where = path.relative_to(REPO)
        for line, target, names in _imports(module, path):
            if (target == package or target.startswith(package + ".")) and target != module:
                hidden = [n for n in names if n.startswith("_")]
                if hidden:
                    problems.append(f"{where}:{line}: imports {hidden} from {target}")
        if module.rsplit(".", 1)[0] != package:
            continue
        tree = ast.parse(path.read_text(), str(path))
        sibling_modules = {a.asname or a.name for node in ast.walk(tree)
                           if isinstance(node, ast.ImportFrom) and node.level == 1
                           and node.module is None for a in node.names}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in sibling_modules and node.attr.startswith("_")):
                problems.append(f"{where}:{node.lineno}: reaches {node.value.id}.{node.attr}")
    assert not problems, "\n".join(problems)
