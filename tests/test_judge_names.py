"""The benches and train's commands name the judges as the product does (issue 39 item 2, issue
43 item 3): ``ragpulse.scorer.judges.registry`` declares them once, and a bench/ or train/
script that names a judge by its old name (``local-model``, ``local``) or runs a judge the
registry does not declare fails here. Found by walking each script with ``ast``, so module
paths (``ragpulse.scorer.judges.local``), the attribute ``judge.local`` and prose about "local
judges" are not judge names; docstrings and shell scripts are read for the commands they show
(``--judge local-model``).

Where an old name is a judge name:

- anywhere in a string that is not a docstring, for an old name no identifier can be
  (``local-model``: a cache file ``local-model__dev.json``, a help text);
- ``choices=`` holding it, of a ``--judge`` option or beside a judge's name (``("local",
  "llm")``); ``judge=`` or a ``--judge`` option's ``default=`` being it;
- the value after ``"--judge"`` in a list or tuple (an argv);
- a comparison of something named ``*judge*`` with it (``args.judge in ("local", "fast")``);
- a value assigned to a name with ``judge`` in it (``JUDGES = ("local", ...)``, a dict keyed
  by judge);
- the first argument of a call whose function has ``judge`` in its name, or is ``build``;
- after ``--judge``/``--judges`` in a docstring's or a shell script's command.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from ragpulse.scorer.judges.registry import JUDGE_ALIASES, JUDGE_NAMES

REPO = Path(__file__).resolve().parent.parent
OLD = frozenset(JUDGE_ALIASES)
NOT_IDENTIFIERS = tuple(n for n in OLD if not n.isidentifier())  # never a module or attribute
_COMMAND = re.compile(r"--judges?((?:[ =|\[\]]+\w[\w-]*)+)")
_FLAGS = ("--judge", "--judges")


def scripts() -> list[Path]:
    """Every Python file of bench/ and train/ (not a virtual environment's)."""
    return sorted(p for root in ("bench", "train") for p in (REPO / root).rglob("*.py")
                  if not any(part.startswith(".") for part in p.relative_to(REPO).parts))


def command_names(text: str) -> list[str]:
    """The judges that ``--judge``/``--judges`` take in the commands of ``text``."""
    return [name for m in _COMMAND.finditer(text)
            for name in re.split(r"[ =|\[\]]+", m.group(1)) if name]


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Subscript):
        return _dotted(node.value)
    return ""


def _strings(node: ast.AST) -> list[ast.Constant]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _old(node: ast.AST) -> list[ast.Constant]:
    return [c for c in _strings(node) if c.value in OLD]


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                out.add(id(body[0].value))
    return out


def _call_uses(node: ast.Call) -> list[tuple[ast.AST, str]]:
    found: list[tuple[ast.AST, str]] = []
    flag = any(isinstance(a, ast.Constant) and a.value in _FLAGS for a in node.args)
    for kw in node.keywords:
        if kw.arg == "choices" and (flag or any(c.value in JUDGE_NAMES
                                                 for c in _strings(kw.value))):
            found += [(c, "in choices=") for c in _old(kw.value)]
        elif kw.arg == "judge" or (kw.arg == "default" and flag):
            found += [(c, f"as {kw.arg}=") for c in _old(kw.value)]
    name = _dotted(node.func).rsplit(".", 1)[-1]
    if node.args and ("judge" in name.lower() or name == "build"):
        found += [(c, f"passed to {name}()") for c in _old(node.args[0])
                  if c is node.args[0]]
    return found


def old_judge_names(source: str, where: str) -> list[str]:
    """Every use of an old judge name as a judge name in one script's ``source``:
    ``where:line: 'name' how``."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found: list[tuple[ast.AST, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in docs:
                found += [(node, f"in the command `--judge ... {n}`")
                          for n in command_names(node.value) if n in OLD]
            else:
                found += [(node, f"contains {n!r}") for n in NOT_IDENTIFIERS if n in node.value]
        elif isinstance(node, ast.Call):
            found += _call_uses(node)
        elif isinstance(node, ast.List | ast.Tuple):
            items = node.elts
            found += [(b, "after --judge") for a, b in zip(items, items[1:], strict=False)
                      if isinstance(a, ast.Constant) and a.value in _FLAGS
                      and isinstance(b, ast.Constant) and b.value in OLD]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any("judge" in _dotted(s).lower() for s in sides):
                found += [(c, "compared with a judge") for s in sides for c in _old(s)
                          if isinstance(s, ast.Constant | ast.Tuple | ast.List | ast.Set)]
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any("judge" in _dotted(t).lower() for t in targets):
                found += [(c, "assigned to a judge name") for c in _old(node.value)]
    return sorted({f"{where}:{n.lineno}: {n.value[:60]!r} {why}" for n, why in found})


def unknown_judges(source: str, where: str) -> list[str]:
    """Judge names a script runs that the registry does not declare: the names given to
    ``add_judge_option``/``judge_type`` and the tuples assigned to a ``*JUDGES`` name."""
    out = []
    for node in ast.walk(ast.parse(source)):
        names: list[ast.Constant] = []
        if isinstance(node, ast.Call) and _dotted(node.func).rsplit(".", 1)[-1] in (
                "add_judge_option", "judge_type"):
            names = [a for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        elif isinstance(node, ast.Assign) and any(_dotted(t).endswith("JUDGES")
                                                  for t in node.targets):
            names = _strings(node.value)
        out += [f"{where}:{c.lineno}: {c.value!r}" for c in names if c.value not in JUDGE_NAMES]
    return out


@pytest.mark.parametrize("path", scripts(), ids=lambda p: str(p.relative_to(REPO)))
def test_scripts_name_judges_as_the_registry_does(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    where = str(path.relative_to(REPO))
    assert old_judge_names(source, where) == [], "use the registry's names (model, fast, ...)"
    assert unknown_judges(source, where) == [], f"not a judge of the registry: {JUDGE_NAMES}"


def test_shell_scripts_and_the_makefile_run_judges_by_their_names() -> None:
    files = [REPO / "Makefile", *sorted((REPO / "train").glob("*.sh")),
             *sorted((REPO / "bench").glob("*.sh"))]
    found = [f"{p.relative_to(REPO)}: --judge {n}" for p in files
             for n in command_names(p.read_text(encoding="utf-8")) if n in OLD]
    assert found == []
    assert "--judge fast model" in (REPO / "Makefile").read_text(encoding="utf-8")


BAD = '''\
"""Run it with ``bench/x.py --judge local-model`` or [--judge model|local]."""
import ragpulse.scorer.judges.local as local
from ragpulse.scorer.judges.local import LocalJudge
JUDGES = ("local", "local-model")
ROW_JUDGE = {"local": "fast"}
cache = f"local-model__{name}.json"
p.add_argument("--judge", choices=("local", "llm"), default="local")
p.add_argument("--judge", nargs="+", default=["local"])
cmd = ["up", "--judge", "local", "--http-port", "0"]
Score(metric="faithfulness", judge="local")
if args.judge in ("local", "fast"):
    judge = build("local", None, None)
if judge_name == "local":
    build_judge("local")
'''
GOOD = '''\
"""The local judges; the fast one lives in ``ragpulse.scorer.judges.local``."""
import ragpulse.scorer.judges.local as local
from ragpulse.scorer.judges.local import LocalJudge
import threading
state = threading.local()
part = getattr(judge, "local", judge)
where = local.__file__
p.add_argument("--scope", choices=("global", "local"), default="local")
p.add_argument("--judge", nargs="+", default=["fast", "model"])
JUDGES = ("fast", "model")
'''


def test_the_check_finds_old_names_and_spares_module_paths() -> None:
    found = old_judge_names(BAD, "x.py")
    lines = sorted({int(f.split(":")[1]) for f in found})
    assert lines == [1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14], found
    assert unknown_judges(BAD, "x.py") == ["x.py:4: 'local'", "x.py:4: 'local-model'"]
    # a module path, an attribute, a threading.local, another option's choices are not judges
    assert old_judge_names(GOOD, "y.py") == []
    assert unknown_judges(GOOD, "y.py") == []
    assert command_names("x.py --judge fast model --cache local; y.py [--judges nli|local]") \
        == ["fast", "model", "nli", "local"]


def test_a_script_names_its_judges_from_the_registry() -> None:
    """bench.judges refuses a subset naming an old name or no judge at all, so a script cannot
    declare a list of its own; a summary is the registry's, under either name."""
    from bench.judges import judge_summary, judge_type
    from ragpulse.scorer.judges.registry import JUDGES

    for bad in ("local", "local-model", "embedding"):
        with pytest.raises(ValueError, match="not judges of the registry"):
            judge_type("fast", bad)
    assert judge_type()("local-model") == "model"
    spec = next(j for j in JUDGES if j.name == "model")
    assert judge_summary("local-model") == judge_summary("model") == spec.summary
