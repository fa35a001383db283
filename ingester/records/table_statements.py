"""What a statement did to the captured tables, as table statement entries (statement.py; docs/FORMAT.md, "Table
statements"): the record builder asks before the schema history applies the statement (``plan``: its operations,
and what the history knew then) and after it (``Plan.entries``: each affected table's entries, with the columns
the history gives it after the statement). Pure: no Kafka, no SQL.

A statement is one or more *steps* in the order the server applies them (each pair of a RENAME TABLE, the drop and
the create of a CREATE OR REPLACE, an ALTER TABLE's rename and then its other changes); the entries of step k have
the statement's sequence with k added to its last field, so entries of several tables' topics sort like the steps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..codec import events as E
from ..column_rules import ColumnRules
from ..schema.ddl import parse_ddl
from ..schema.ddl_operations import (
    AddColumn,
    AddIndex,
    AddPrimaryKey,
    AlterSpec,
    AlterTable,
    ChangeColumn,
    ColumnDefault,
    ConvertCharset,
    CreateTable,
    CreateTableLike,
    DropColumn,
    DropDatabase,
    DropIndex,
    DropPrimaryKey,
    DropTables,
    Name,
    Operation,
    RenameColumn,
    RenameTables,
    TruncateTable,
)
from ..schema.ddl_tokens import UnparsedDDL
from ..schema.history import SchemaHistory
from ..schema.table_columns import Described, history_columns
from .statement import Op, TableStatement

log = logging.getLogger("binlake.statements")
# partition maintenance that removes or moves rows the binlog does not name (a reload entry may follow: builder.py)
ROW_ACTIONS = frozenset(("truncate", "drop", "exchange", "import", "convert_to_table", "convert_from_table"))
# clauses that change what a table's columns or key are (without a schema history, an entry says so: no columns)
_COLUMN_SPECS = (AddColumn, DropColumn, ChangeColumn, RenameColumn, ColumnDefault, ConvertCharset, AddPrimaryKey,
                 DropPrimaryKey, DropIndex)


@dataclass
class _Step:
    """One table statement entry to be: its op, the table whose topic takes it, and the op's fields."""

    op: Op
    table: Name
    fields: dict[str, Any] = field(default_factory=dict)  # to, source, partition, renamed
    columns: bool = False  # with the table's columns after the statement (where the history knows them)
    fixed: Described | None = None  # with these columns (a rename's: the table's before the statement)
    before: Described | None = None  # alter: the table's columns before it (an entry only if they changed)
    changes: bool = True  # alter without a history: whether its clauses change columns or the key


@dataclass
class Plan:
    """A statement's steps (``plan``), made entries once the history has applied it (``entries``)."""

    steps: list[list[_Step]]
    history: SchemaHistory | None  # None: no columns (no history, or one whose state is past this statement)

    def entries(self, base: dict[str, Any], mariadb: bool,
                masks: ColumnRules | None = None) -> list[tuple[int, TableStatement]]:
        """(step, entry) in step order; ``base``: the fields every entry shares (``statement_fields``); ``masks``
        (filters.columns): the columns they name have no default in entries (their values are masked: what existing
        rows would get too)."""
        out = []
        described: dict[Name, Described | None] = {}
        for k, step in enumerate(self.steps):
            for s in step:
                columns = s.fixed
                if columns is None and (s.columns or s.op == "alter") and self.history is not None:
                    if s.table not in described:
                        described[s.table] = _described(self.history, s.table, mariadb)
                    columns = described[s.table]
                if s.op == "alter" and (columns == s.before if columns is not None and s.before is not None
                                        else not s.changes):
                    continue  # neither its columns nor its key changed (an index, a comment, an option)
                entry = TableStatement(s.op, s.table[0], s.table[1], mariadb=mariadb, **base, **s.fields,
                                       columns=None if columns is None else columns[0],
                                       primary_key=None if columns is None else columns[1],
                                       before=s.before[0] if s.op == "alter" and s.before is not None else None)
                if masks is not None and entry.columns is not None and masks.applies_to(*s.table):
                    tm = entry.table_map()
                    assert tm is not None
                    for i in masks.for_table(tm):
                        entry.columns[i].pop("default", None)
                        entry.columns[i].pop("default_expression", None)
                out.append((k, entry))
        return out


def _described(history: SchemaHistory, name: Name, mariadb: bool) -> Described | None:
    schema = history.tables.get(name)
    if schema is None:
        return None
    described = history_columns(schema, mariadb, history.collations)
    if described is None:
        log.warning("table statement of %s.%s: a column of a type table descriptors do not know (%s): its entry comes "
                    "without columns", *name, ", ".join(f"{c.name} {c.type}" for c in schema.columns))
    return described


def statement_fields(ev: E.QueryEvent) -> dict[str, Any]:
    """The fields every entry of a QUERY event has (but op and table): docs/FORMAT.md, "Table statements"."""
    status = ev.status_vars
    micros = ev.timestamp * 1_000_000 + (status.get("microseconds") or status.get("hrnow") or 0)
    return {"statement": ev.query, "default_database": ev.database, "micros": micros,
            "time_zone": status.get("time_zone"), "server_id": ev.server_id}


def plan(ev: E.QueryEvent, accept: Callable[[str, str], bool], history: SchemaHistory | None,
         seen: Iterable[Name], mariadb: bool) -> Plan | None:
    """The steps of a statement that changes captured tables (None for one that changes none), before ``history``
    (None: no history, or one whose state is past the statement) applies it. ``seen``: the tables the stream has
    mapped or gave entries, which a DROP DATABASE drops without a history; ``mariadb``: the server's flavour."""
    try:
        ops = parse_ddl(ev.query, ev.database)
    except UnparsedDDL as exc:  # as far as it was read: its tables' entries without columns
        return _unparsed(exc, accept)
    steps: list[list[_Step]] = []
    planner = _Planner(accept, history, steps, mariadb)
    for op in ops:
        planner.op(op, seen)
    steps = [s for s in steps if s]
    return Plan(steps, history) if steps else None


def _unparsed(exc: UnparsedDDL, accept: Callable[[str, str], bool]) -> Plan | None:
    names = [n for n in dict.fromkeys(exc.tables) if accept(*n)]
    if not names or not exc.tables:
        return None
    first = exc.tables[0]
    steps: list[list[_Step]] = []
    if exc.kind == "create" and accept(*first):
        if exc.replace:
            steps.append([_Step("drop", first)])
        steps.append([_Step("create", first)])
    elif exc.kind == "alter" and accept(*first):
        steps.append([_Step("alter", first)])
    elif exc.kind == "drop":
        steps.append([_Step("drop", n) for n in names])
    elif exc.kind == "truncate":
        steps.append([_Step("truncate", names[0])])
    return Plan(steps, None) if steps else None


class _Planner:
    def __init__(self, accept: Callable[[str, str], bool], history: SchemaHistory | None,
                 steps: list[list[_Step]], mariadb: bool) -> None:
        self.accept = accept
        self.history = history
        self.steps = steps
        self.mariadb = mariadb
        self.present: dict[Name, bool] = {}  # tables the statement's earlier steps created or removed
        self.origin: dict[Name, Name] = {}  # a table renamed by an earlier step: its name before the statement

    def exists(self, name: Name) -> bool | None:
        """Whether the table exists at this step (None: no history to say)."""
        if name in self.present:
            return self.present[name]
        if self.history is None:
            return None
        return name in self.history.tables or name in self.history.skipped

    def step(self, *entries: _Step) -> None:
        self.steps.append([e for e in entries if self.accept(*e.table)])

    def op(self, op: Operation, seen: Iterable[Name]) -> None:
        if isinstance(op, TruncateTable):
            self.step(_Step("truncate", op.name, columns=True))
        elif isinstance(op, DropTables):  # a step each, in the statement's order
            for n in op.names:
                if self.exists(n) is not False:
                    self.step(_Step("drop", n))
                self.present[n] = False
        elif isinstance(op, DropDatabase):
            names = [*self.history.tables, *self.history.skipped] if self.history is not None else list(seen)
            for n in sorted({n for n in names if n[0] == op.database}):
                self.step(_Step("drop", n))
        elif isinstance(op, (CreateTable, CreateTableLike)):
            existed = self.exists(op.name)
            if op.if_not_exists and existed is not False:
                return  # it was there (or may have been): the server changed nothing
            if op.replace and existed is not False:
                self.step(_Step("drop", op.name))
            self.step(_Step("create", op.name, columns=True))
            self.present[op.name] = True
        elif isinstance(op, RenameTables):
            for old, new in op.pairs:
                if self.accept(*old) and self.exists(old) is False:
                    continue  # a view (the history knows every captured table): the history lets it be too
                self.rename(old, new)
        elif isinstance(op, AlterTable):
            self.alter(op)

    def rename(self, old: Name, new: Name) -> None:
        """A pair: "to" in the old name's topic, "from" with the table's columns in the new name's."""
        origin = self.origin.pop(old, old)
        self.origin[new] = origin
        columns = None
        if self.history is not None and self.accept(*new) and origin in self.history.tables:
            columns = _described(self.history, origin, self.mariadb)
        self.step(_Step("rename", old, {"to": new}), _Step("rename", new, {"source": old}, fixed=columns))
        self.present.update({old: False, new: True})

    def alter(self, op: AlterTable) -> None:
        name, partition = op.name, op.partition
        if partition is not None:
            entry: dict[str, Any] = {"action": partition.action, "names": partition.names}
            if partition.with_table is not None:
                entry["with"] = list(partition.with_table)
            if partition.count is not None:
                entry["count"] = partition.count
            entries = [_Step("partition", name, {"partition": entry}, columns=True)]
            if partition.with_table is not None:  # EXCHANGE, CONVERT: the other table's rows change too
                other = {**entry, "with": list(name)}
                entries.append(_Step("partition", partition.with_table, {"partition": other}, columns=True))
            self.step(*entries)
            return
        before = None
        if self.history is not None and name in self.history.tables and self.accept(*(op.rename_to or name)):
            before = _described(self.history, name, self.mariadb)
        if op.rename_to is not None and op.rename_to != name:
            self.rename(name, op.rename_to)
        renamed = _renamed(op.specs)
        changes = any(isinstance(s, _COLUMN_SPECS) or (isinstance(s, AddIndex) and s.index.unique) for s in op.specs)
        self.step(_Step("alter", op.rename_to or name, {"renamed": renamed} if renamed else {}, before=before,
                        changes=changes))


def _renamed(specs: list[AlterSpec]) -> dict[str, str]:
    """New column name -> its name before the statement (RENAME COLUMN, CHANGE), for the columns renamed."""
    origin: dict[str, str] = {}  # current name (lower) -> (original name)
    for spec in specs:
        if isinstance(spec, RenameColumn):
            old, new = spec.old, spec.new
        elif isinstance(spec, ChangeColumn) and spec.old != spec.column.name:
            old, new = spec.old, spec.column.name
        else:
            continue
        origin[new.lower()] = origin.pop(old.lower(), old)
    final = {}
    for spec in specs:  # the new names as written
        named = spec.new if isinstance(spec, RenameColumn) else spec.column.name if isinstance(spec, ChangeColumn) \
            else None
        if named is not None and named.lower() in origin and origin[named.lower()] != named:
            final[named] = origin[named.lower()]
    return final
