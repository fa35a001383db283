"""A column type change the table's rows show without an ``alter`` entry that says it (no schema history, an entry
without columns, Debezium's change events): the first row image whose column type cannot join the table's change
log (generations.conflicts: text <-> binary, a DECIMAL scale, another family) gets an ``alter`` statement of its
own just before it, made from the rows' table map (each column's lake type; schema_alter.pseudo_column stands in
for its source type), so that the table's mirror is rewritten and its change log versioned there as for a
statement's entry (docs/LAND.md, "Schema changes"), instead of the job stopping."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from ingester.records.format import Sequence
from ingester.records.snapshot import _COLUMN_FIELDS
from ingester.records.statement import TableStatement

from ..lake.generations import conflicts
from .schema_alter import pseudo_column
from .statements import StatementAt, statement_columns

Name = tuple[str, str]


def type_changes(meta: list[Any], said: list[StatementAt], lake_columns: Callable[[str, str], list[tuple[str, str]]],
                 describe: Callable[[str, str, bytes, str], str], batch_id: int, ingest: int) -> list[StatementAt]:
    """The statements to add to a batch's: one before each row group (``meta``: record rows) of a table whose
    columns conflict with its change log's (``lake_columns``) as the batch's own ``alter`` entries (``said``) leave
    them; ``describe(db, table, seq, position)``: the DDL that made the change, for the statement's text."""
    groups: dict[Name, dict[str, Any]] = {}
    for r in meta:
        key = (r.db, r.tbl)
        found = groups.setdefault(key, {})
        seq = bytes(r.first_seq)
        if r.schema not in found or seq < found[r.schema][0]:
            found[r.schema] = (seq, r)
    out = []
    for (db, table), schemas in groups.items():
        entries = [s for s in said if (db, table) in s.names]
        events: list[tuple[bytes, Any]] = [(seq, r) for seq, r in schemas.values()]
        events += [(s.seq, s) for s in entries if s.statement.op in _FOLLOWED]
        columns = lake_columns(db, table)
        for seq, event in sorted(events, key=lambda e: e[0]):
            if isinstance(event, StatementAt):
                columns = _after(columns, (db, table), event, lake_columns)
                continue
            group = [(n, t) for n, t in orjson.loads(event.schema)["columns"]]
            if not columns:
                columns = group
                continue
            clashes = conflicts(columns, group)
            if clashes:
                out.append(_statement(db, table, event, group, clashes, describe(db, table, seq, event.first_position),
                                      batch_id, ingest))
                columns = _replaced(columns, group)
    return out


_FOLLOWED = ("create", "drop", "rename", "alter")  # the statements that change a name's lake columns


def _after(columns: list[tuple[str, str]], name: Name, at: StatementAt,
           lake_columns: Callable[[str, str], list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """The lake columns of ``name`` after the statement, as table_statements.py leaves them: a created table's
    (none known: its first rows give them), none after a drop or a rename away, the old name's after a rename to
    ``name`` (the entry's columns, else the old name's lake table), an alter's columns replacing theirs."""
    s = at.statement
    said = statement_columns(s) or []
    if s.op == "alter":
        return _replaced(columns, said) if s.columns is not None else columns
    if s.op == "create":
        return said
    if s.op == "drop":
        return []
    old = s.source if s.source is not None else at.name  # a rename: the pair's old name, whichever entry this is
    if name == old:
        return []  # renamed away
    return said or lake_columns(*old)


def _replaced(columns: list[tuple[str, str]], new: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``columns`` with ``new``'s added and their types taking the place of the old ones."""
    types = dict(new)
    out = [(n, types.get(n, t)) for n, t in columns]
    have = {n for n, _ in out}
    return out + [(n, t) for n, t in new if n not in have]


def _statement(db: str, table: str, row: Any, group: list[tuple[str, str]], found: list[tuple[str, str, str]],
               ddl: str, batch_id: int, ingest: int) -> StatementAt:
    meta = orjson.loads(row.schema)
    columns = [{f: getattr(pseudo_column(n, t), f) for f in _COLUMN_FIELDS} for n, t in group]
    names = [n for n, _ in group]
    key = [[names.index(k), 0] for k in meta.get("pk") or [] if k in names]
    changed = ", ".join(f"`{n}` {a} -> {b}" for n, a, b in found)
    text = f"/* binlake: the rows changed the types of {changed}, {ddl} */"
    statement = TableStatement("alter", db, table, text, db, columns=columns, primary_key=key or None)
    first = Sequence.decode(bytes(row.first_seq))
    seq = (Sequence(first.file_number, first.position, first.sub - 1) if first.sub else
           Sequence(first.file_number, first.position - 1, 0)).encode()
    return StatementAt(statement, seq, row.first_position, "", int(row.newest or 0), row.topic, int(row.partition),
                       int(row.offset), batch_id, ingest)
