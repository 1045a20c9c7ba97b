"""SQL is built only with parameters: a static check over the package sources.

Every string that looks like SQL (starts with a statement keyword) and is assembled at run time
(f-string, ``%`` formatting, ``str.format``, ``+`` concatenation) may interpolate only:

* literals, or values passed through a quoting function (``_quote``, ``quote_identifier``...);
* identifiers the code validated against a pattern before (database and table names), listed
  below by expression text with the reason they are safe.

Anything else — in particular any user data — must travel as a ClickHouse query parameter
(``{name:Type}`` placeholders with ``parameters=``). A new interpolation fails this test until it
is either parameterised or reviewed and added to :data:`REVIEWED` with its reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("instrument/ragpulse", "common/ragpulse", "collector/ragpulse", "scorer/ragpulse", "dashboards/ragpulse",
            "deploy/ragpulse")
SQL = re.compile(
    r"^\s*(SELECT|INSERT|ALTER|CREATE|DROP|SET|USE|OPTIMIZE|WITH|SYSTEM|TRUNCATE|RENAME|SHOW|"
    r"DESCRIBE|EXISTS|KILL|DELETE|UPDATE|GRANT)\b")  # upper case: the code's SQL style; prose
# such as an error message "insert into db.t failed" is not SQL
QUOTING = re.compile(r"(^|\.)(_?quote\w*|_?ident\w*|_?escape\w*|format_identifier|int|float|len)$")

# expression text -> why interpolating it is safe. Database names are validated against
# ^[A-Za-z_][A-Za-z0-9_]{0,62}$ by every settings model that holds one; table names come from the
# code's own schema constants; numbers are ints/floats from validated settings.
REVIEWED: dict[str, str] = {
    "db": "validated database identifier",
    "database": "validated database identifier",
    "self.database": "validated database identifier",
    "settings.database": "validated database identifier",
    "self.settings.database": "validated database identifier",
    "self._db": "validated database identifier",
    "t": "table name from the schema's own constants",
    "table": "table name from the schema's own constants",
    "name": "object name from the schema's own constants",
    "self.table": "table name from the schema's own constants",
}

# Whole files reviewed, with the reason. Keep this list short: a file here is trusted wholesale.
REVIEWED_FILES: dict[str, str] = {
    "common/ragpulse/common/schema/clickhouse.py":
        "DDL rendered from the module's constant schema definitions; its only run-time inputs, "
        "the database and cluster names, pass validate_identifier in SchemaSettings",
    "deploy/ragpulse/deploy/facade.py":
        "the ClickHouse-HTTP facade runs its client's SQL after deploy/sqlguard.py admitted it "
        "(read-only, allow-listed tables); the SET/USE statements it builds take names from the "
        "settings allow-list / policy and values via _quote",
    "dashboards/ragpulse/dashboards/queries.py":
        "panel SQL rendered from DashboardsSettings (database via validate_identifier, numbers) and Grafana "
        "macros; metric names and filter values go through _q (quoted literals), no trace data",
    "dashboards/ragpulse/dashboards/alerts.py":
        "alert SQL rendered from numeric AlertSettings thresholds and _q-quoted names",
    "dashboards/ragpulse/dashboards/dashboard.py":
        "template-variable SQL over the validated database and fixed dimension column names",
}


def _sql_text(node: ast.AST) -> str | None:
    """The leading literal text of a run-time-built string, if it is one."""
    if isinstance(node, ast.JoinedStr):
        first = node.values[0] if node.values else None
        return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) \
            else ""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)):
        left = node.left
        while isinstance(left, ast.BinOp):
            left = left.left
        if isinstance(left, ast.Constant) and isinstance(left.value, str):
            return left.value
        if isinstance(left, ast.JoinedStr):
            return _sql_text(left)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "format" and isinstance(node.func.value, ast.Constant) \
            and isinstance(node.func.value.value, str):
        return node.func.value.value
    return None


def _interpolated(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
    if isinstance(node, ast.BinOp):
        out: list[ast.AST] = []
        for side in (node.left, node.right):
            if isinstance(side, ast.BinOp | ast.JoinedStr):
                out += _interpolated(side)
            elif not (isinstance(side, ast.Constant)):
                out += list(side.elts) if isinstance(side, ast.Tuple) else [side]
        return out
    if isinstance(node, ast.Call):
        return [*node.args, *(k.value for k in node.keywords)]
    return []


def _safe(expr: ast.AST) -> bool:
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Call) and QUOTING.search(ast.unparse(expr.func)):
        return True
    return ast.unparse(expr) in REVIEWED


def findings() -> list[str]:
    out = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if str(path.relative_to(ROOT)) in REVIEWED_FILES:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                text = _sql_text(node)
                if text is None or not SQL.match(text):
                    continue
                for expr in _interpolated(node):
                    if not _safe(expr):
                        rel = path.relative_to(ROOT)
                        out.append(f"{rel}:{node.lineno}: {ast.unparse(expr)}")
    return out


def test_sql_interpolates_only_quoted_or_reviewed_identifiers() -> None:
    bad = findings()
    assert bad == [], "SQL built with unreviewed interpolations (use query parameters):\n" + \
        "\n".join(bad)


def test_the_check_catches_user_data_in_sql(tmp_path: Path) -> None:
    # The detector itself must fire on the pattern it exists for.
    bad = ast.parse('client.query(f"SELECT * FROM t WHERE q = \'{sample.question}\'")')
    call = bad.body[0].value
    (arg,) = call.args
    assert SQL.match(_sql_text(arg) or "")
    assert [ast.unparse(e) for e in _interpolated(arg) if not _safe(e)] == ["sample.question"]
    pct = ast.parse('"SELECT %s FROM x" % user').body[0].value
    assert [ast.unparse(e) for e in _interpolated(pct) if not _safe(e)] == ["user"]
