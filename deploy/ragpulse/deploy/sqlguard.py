"""What the ClickHouse-HTTP facade lets a client run: read-only statements on the ragpulse data.

chDB is the whole ClickHouse engine running as the facade's own process: its ``file()`` reads
any file the process can read, ``url()`` fetches any address, ``INTO OUTFILE`` writes files, and
it executes every statement of a ``;``-separated batch — and it does some of that even with the
``readonly`` setting on (``SELECT file(...)`` and ``INTO OUTFILE`` work under ``readonly = 1``).
So the facade does not trust settings alone; every statement passes :func:`check` first:

1. the statement is parsed by ClickHouse's own parser (``formatQuery``), which refuses
   multi-statement input; what runs afterwards is that canonical single statement, so nothing
   that the check did not see (a second statement, a comment trick) can run;
2. its syntax tree (``EXPLAIN AST``, parse only: nothing is executed, no schema is inferred) is
   walked: the statement kind must be a read (SELECT, SHOW TABLES/DATABASES, DESCRIBE, EXISTS,
   SHOW CREATE TABLE; not SHOW CLUSTERS/MERGES/DICTIONARIES, which read other system tables);
   every table must be in the ragpulse database or an allow-listed system table; table functions are limited to generators (``numbers``, ``values``...); functions that
   touch the outside world (``file``) or only waste the server's time (``sleep``) are refused;
   ``INTO OUTFILE`` (which DESCRIBE, SHOW and EXISTS take as well as SELECT) and query-level
   ``SETTINGS`` are refused.

The facade then runs the statement on a connection set to ``readonly = 2`` (no writes, no change
of ``readonly``) after applying the client's URL settings that :func:`filter_settings` admits: an
exact list of names (output format switches, limits, time zone; timeouts, memory and result
sizes capped), never a prefix, as several ``format_*`` settings take file paths or queries.
References: ClickHouse HTTP interface https://clickhouse.com/docs/interfaces/http ; readonly https://clickhouse.com/docs/operations/settings/permissions-for-queries
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

__all__ = ["DEFAULT_POLICY", "GuardPolicy", "Refused", "check", "filter_settings", "parse_ast"]

# Error codes and the HTTP status ClickHouse answers them with (HTTPHandler.cpp).
SYNTAX_ERROR, UNKNOWN_DATABASE, READONLY, ACCESS_DENIED = 62, 81, 164, 497
_STATUS = {SYNTAX_ERROR: 400, UNKNOWN_DATABASE: 404, READONLY: 403, ACCESS_DENIED: 403}


class Refused(Exception):
    """The statement or a setting is not allowed; ``code`` is ClickHouse's error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = _STATUS.get(code, 400)


@dataclass(frozen=True)
class GuardPolicy:
    """What is readable. The defaults serve Grafana's ClickHouse plugin (its query editor reads
    databases, tables, columns and functions), clickhouse-connect (``system.settings`` at
    connect) and ``ragpulse status``/``report``."""

    database: str = "rag"
    system_tables: frozenset[str] = frozenset({
        "one", "numbers", "numbers_mt", "zeros", "zeros_mt", "settings", "functions",
        "databases", "tables", "columns", "data_type_families", "time_zones", "formats",
        "table_functions", "aggregate_function_combinators", "collations", "keywords",
    })
    table_functions: frozenset[str] = frozenset({
        "numbers", "numbers_mt", "zeros", "zeros_mt", "values", "generateseries",
        "generate_series", "primes",
    })
    # Lower-case names. file() reads files even in readonly mode; sleep*() only holds a slot.
    # getServerSetting('path') names the server's directories.
    denied_functions: frozenset[str] = frozenset({"file", "sleep", "sleepeachrow",
                                                  "getserversetting"})
    statements: frozenset[str] = frozenset({
        "SelectWithUnionQuery", "ShowTables", "DescribeQuery", "ExistsTableQuery",
        "ShowCreateTableQuery", "ExistsDatabaseQuery",
    })
    # URL settings, by exact name: what the Grafana plugin (clickhouse-go: max_execution_time,
    # limit, output_format_native_write_json_as_string) and clickhouse-connect (date_time_input_format,
    # cast_string_to_dynamic_use_inference, output_format_arrow_string_as_string, limits) send, and
    # output switches of the same kind. Never a prefix: chDB takes file paths, schemas and whole
    # queries in several format settings (format_template_*, format_schema*, output_format_schema).
    # Each is a number, a flag, an enum or a time zone, never free text: a test checks every
    # setting chDB knows against this list (tests/security/test_facade_settings.py).
    settings: frozenset[str] = frozenset({
        # limits (capped by `caps`) and overflow behaviour
        "max_execution_time", "max_result_rows", "max_result_bytes", "result_overflow_mode",
        "limit", "offset", "max_rows_to_read", "max_bytes_to_read", "read_overflow_mode",
        "max_block_size", "max_threads", "timeout_overflow_mode", "max_memory_usage",
        # query semantics
        "date_time_input_format", "cast_string_to_dynamic_use_inference", "session_timezone",
        "join_use_nulls", "extremes", "prefer_column_name_to_alias", "totals_mode",
        "date_time_overflow_behavior",
        # output formats
        "date_time_output_format", "interval_output_format", "output_format_decimal_trailing_zeros",
        "output_format_arrow_string_as_string", "output_format_arrow_low_cardinality_as_dictionary",
        "output_format_parquet_string_as_string", "output_format_native_write_json_as_string",
        "output_format_json_quote_64bit_integers", "output_format_json_quote_64bit_floats",
        "output_format_json_quote_denormals", "output_format_json_quote_decimals",
        "output_format_json_named_tuples_as_objects", "output_format_json_escape_forward_slashes",
        "output_format_json_validate_utf8", "output_format_json_array_of_rows",
        "output_format_tsv_crlf_end_of_line", "output_format_csv_crlf_end_of_line",
        "format_csv_delimiter", "format_csv_allow_single_quotes", "format_csv_allow_double_quotes",
        "output_format_pretty_max_rows", "output_format_pretty_max_column_pad_width",
        "output_format_pretty_max_value_width", "output_format_pretty_color",
        "output_format_pretty_row_numbers", "output_format_pretty_display_footer_column_names",
    })
    caps: Mapping[str, int] = field(default_factory=lambda: {
        "max_execution_time": 60, "max_result_bytes": 512 << 20,
        "max_memory_usage": 2 << 30, "max_threads": 4,
        # ClickHouse's defaults as ceilings: past them Pretty output pads every cell (round 5:
        # 100 KB of data padded to 2 GB) and a block holds more formatted rows
        "max_block_size": 65536, "output_format_pretty_max_rows": 10000,
        "output_format_pretty_max_column_pad_width": 250,
        "output_format_pretty_max_value_width": 10000,
    })

    def database_allowed(self, name: str) -> bool:
        """Whether a statement may name database ``name``: this one or ``system``."""
        return name in (self.database, "system")

    def table_allowed(self, database: str, table: str) -> bool:
        """Whether ``database.table`` may be read: any table of this database, only the
        allow-listed ones of ``system``."""
        if database == self.database:
            return True
        return database == "system" and table in self.system_tables


DEFAULT_POLICY = GuardPolicy()


@dataclass
class Node:
    """One node of ``EXPLAIN AST`` output: its type, the first word after it, its children."""

    kind: str
    name: str
    children: list[Node] = field(default_factory=list)

    def walk(self, parent: Node | None = None) -> Iterator[tuple[Node, Node | None]]:
        """This node and every descendant, depth first, each with its parent."""
        yield self, parent
        for child in self.children:
            yield from child.walk(self)


_ANNOTATION = re.compile(r"\s+\((?:alias [^)]*|children \d+)\)")


def parse_ast(text: str) -> Node:
    """The tree of ``EXPLAIN AST`` TabSeparated output (one space of indentation per level).

    Names keep the TSV escaping of the output; they are only compared with allow-lists, so an
    odd name can only fail a comparison, never pass one.
    """
    root = Node("", "")
    stack: list[tuple[int, Node]] = [(-1, root)]
    for line in text.splitlines():
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip(" "))
        words = _ANNOTATION.sub("", line.strip()).split(" ")
        node = Node(words[0], words[1] if len(words) > 1 else "")
        while stack[-1][0] >= depth:
            stack.pop()
        stack[-1][1].children.append(node)
        stack.append((depth, node))
    if len(root.children) != 1:
        raise Refused(SYNTAX_ERROR, "cannot read the statement's syntax tree")
    return root.children[0]


_IN_FUNCTIONS = frozenset({"in", "notin", "globalin", "globalnotin", "nullin", "notnullin",
                           "globalnullin", "globalnotnullin"})


# The parser gives SHOW TABLES, DATABASES, DICTIONARIES, CLUSTERS, MERGES, FILESYSTEM CACHES and
# TEMPORARY TABLES one node kind (ShowTables); only the first two read allow-listed tables.
_SHOW_ALLOWED = re.compile(r"SHOW\s+(?:FULL\s+)?(?:TABLES|DATABASES)\b", re.IGNORECASE)


def check(tree: Node, current_database: str, policy: GuardPolicy = DEFAULT_POLICY, *,
          output_format: str | None = None, statement: str = "") -> None:
    """Raise :class:`Refused` unless the statement ``tree`` only reads what ``policy`` allows.

    ``current_database`` resolves unqualified table names (CTE names resolve the same way, so
    with the ragpulse database current they pass, as the tables they shadow would).
    ``output_format`` is the statement's ``FORMAT`` clause, if any: the parser prints it as the
    statement's last ``Identifier`` child, which is not a database or table name.
    ``statement`` is the canonical text the tree was parsed from: it tells the ``SHOW`` forms
    apart (without it, ``SHOW`` of any kind is refused).
    """
    if output_format and tree.children and tree.children[-1].kind == "Identifier" \
            and tree.children[-1].name.lower() == output_format.lower():
        tree = Node(tree.kind, tree.name, tree.children[:-1])
    if tree.kind not in policy.statements:
        raise Refused(READONLY, f"Cannot execute query in readonly mode: the ragpulse facade "
                      f"serves reads only ({tree.kind or 'empty statement'})")
    # INTO OUTFILE 'path' [COMPRESSION 'x'] is a Literal child of the statement itself, for every
    # statement kind that takes it (SELECT, DESCRIBE, SHOW, EXISTS): none has another one there.
    if any(c.kind == "Literal" for c in tree.children):
        raise Refused(READONLY, "Cannot execute query in readonly mode: INTO OUTFILE is not "
                      "allowed through the ragpulse facade")
    if tree.kind == "ShowTables" and not _SHOW_ALLOWED.match(statement.lstrip()):
        raise Refused(ACCESS_DENIED, f"Not enough privileges: {' '.join(statement.split()[:2])} "
                      "reads system tables the ragpulse facade does not serve (SHOW TABLES and "
                      "SHOW DATABASES do)")
    if tree.kind in ("ShowTables", "ExistsDatabaseQuery"):
        for child in tree.children:
            if child.kind == "Identifier" and not policy.database_allowed(child.name):
                raise _denied_database(child.name)
    if tree.kind in ("ExistsTableQuery", "ShowCreateTableQuery"):
        names = [c.name for c in tree.children if c.kind == "Identifier"]
        db, table = (names[0], names[1]) if len(names) == 2 else (current_database, names[-1] if names else "")
        _check_table(db, table, policy)
    for node, parent in tree.walk():
        if node.kind == "Set":
            raise Refused(READONLY, "Cannot modify settings in readonly mode: pass settings as URL "
                          "parameters, not in a SETTINGS clause")
        if node.kind == "Function":
            name = node.name.lower()
            if parent is not None and parent.kind == "TableExpression":
                if name not in policy.table_functions:
                    raise Refused(ACCESS_DENIED, f"Not enough privileges: table function "
                                  f"{node.name} is not allowed through the ragpulse facade")
            elif name in policy.denied_functions:
                raise Refused(ACCESS_DENIED, f"Not enough privileges: function {node.name} is "
                              "not allowed through the ragpulse facade")
            if name in _IN_FUNCTIONS and node.children and len(node.children[0].children) == 2:
                rhs = node.children[0].children[1]
                if rhs.kind == "Identifier":  # `x IN db.table` reads that table
                    _check_table(*_split(rhs.name, current_database), policy)
        elif node.kind == "TableIdentifier":
            _check_table(*_split(node.name, current_database), policy)


def _split(name: str, current_database: str) -> tuple[str, str]:
    db, dot, table = name.partition(".")
    return (db, table) if dot else (current_database, name)


def _check_table(database: str, table: str, policy: GuardPolicy) -> None:
    if not policy.database_allowed(database):
        raise _denied_database(database)
    if not policy.table_allowed(database, table):
        raise Refused(ACCESS_DENIED, f"Not enough privileges: {database}.{table} is not readable "
                      f"through the ragpulse facade (allowed: the {policy.database} database and "
                      f"system.{{{','.join(sorted(policy.system_tables))}}})")


def _denied_database(name: str) -> Refused:
    return Refused(ACCESS_DENIED, f"Not enough privileges: database {name} is not readable "
                   "through the ragpulse facade")


def filter_settings(requested: Mapping[str, str],
                    policy: GuardPolicy = DEFAULT_POLICY) -> dict[str, str]:
    """The client's URL settings the facade applies, with the caps of ``policy`` enforced.

    ``readonly = 1`` may be asked for (writes are refused anyway); any other value is refused
    (``readonly = 0`` would ask for writes, ``2`` for setting changes the guard decides). Any other
    setting outside the allow-list raises :class:`Refused` (READONLY), as a read-only
    ClickHouse user would get. Caps are applied to what the client asked and set when absent.
    """
    out: dict[str, str] = {}
    for name, value in requested.items():
        if name == "readonly":
            if value.strip() != "1":
                raise Refused(READONLY, "Cannot modify 'readonly' setting in readonly mode")
            continue
        if name not in policy.settings:
            raise Refused(READONLY, f"Cannot modify '{name}' setting in readonly mode: the "
                          "ragpulse facade accepts a fixed list of output-format, limit and "
                          "time-zone settings")
        out[name] = value
    for name, cap in policy.caps.items():
        asked = _int_or_none(out.get(name))
        out[name] = str(cap if asked is None or asked <= 0 or asked > cap else asked)
    return out


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(float(value)) if value is not None else None
    except ValueError:
        raise Refused(SYNTAX_ERROR, f"invalid setting value {value!r}") from None

