"""Table statements in a micro-batch (ingester/records/statement.py; docs/LAND.md "Table statements").

TRUNCATE, DROP, RENAME TABLE, partition maintenance and quiet schema changes change a table without rows
events; the daemon publishes each as a table statement entry in the topics of the tables it changes, at its
sequence. The land job applies it there: a batch holding statements lands in *parts*. The tables no
statement of the batch names land as any batch does (part ""); the tables the statements name land their
rows up to the first statement (part ""), then that statement's actions are applied (part "s1.<i>" each), then
their rows up to the next one (part "r1"), and so on. The rows parts' writes are idempotent on their own (the
format's writes of batch N carry the part in their identity: ``LakeFormat.part``), so a batch replayed after a
crash skips exactly the parts that committed; the parts are the same on a replay (the same records). A
statement's actions are applied once by the markers each lake table records (``Action.marker``,
table_statements.py), which also holds where one statement's entries arrive in several batches.

A statement's entries share its sequence: ``plan`` applies them together, as the statement's ``actions`` (a
RENAME's pair once, though both names' topics hold an entry, and its pairs in the statement's order). Rows are
placed by their record's first sequence: a daemon record never holds rows of both sides of a statement (the
daemon publishes a table's rows so far before the statement's entry).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa

from ingester.records.snapshot import decode_descriptor
from ingester.records.statement import TableStatement

from ..decode.arrow_rows import LakeColumn
from ..decode.lake_types import arrow_type, quote
from ..decode.typed import TYPED_HEAD

STATEMENT_COLUMN = "statement"  # a change log's column: the SQL text of a statement row (null for row changes)
RENAME_FROM, RENAME_TO = "rename_from", "rename_to"  # a rename row's old and new name ("<db>.<table>")
STATEMENT_COLUMNS = (STATEMENT_COLUMN, RENAME_FROM, RENAME_TO)  # the change log's columns of statement rows
# A lake table's property: the last statement action it took (marker_text: "<seq hex>:<action index>")
STATEMENT_PROPERTY = "binlake.statement"
# A change log's and a mirror's property: the table ended (dropped, renamed away): JSON {"op", "position", "seq",
# "to"}; cleared when a table of that name is created again (a create entry, or its first rows)
ENDED_PROPERTY = "binlake.ended"
Name = tuple[str, str]


@dataclass(frozen=True)
class StatementAt:
    """A table statement where the batch has it: its place in the source's order and in Kafka."""

    statement: TableStatement
    seq: bytes
    position: str  # file:position:index
    gtid: str
    commit_ts: int  # µs since the epoch
    topic: str
    partition: int
    offset: int
    batch_id: int
    ingest_micros: int

    @classmethod
    def of(cls, row: Any, batch_id: int, ingest_micros: int) -> StatementAt:
        """From a statement's record row (decode.RecordRow, or batch_rows' info row)."""
        d = orjson.loads(row.statement)
        return cls(TableStatement.from_json(d), bytes(row.first_seq), row.first_position, d.get("gtid", ""),
                   int(row.newest or 0), row.topic, int(row.partition), int(row.offset), batch_id, ingest_micros)

    @property
    def name(self) -> Name:
        return (self.statement.database, self.statement.table)

    @property
    def names(self) -> set[Name]:
        """The tables whose lake tables the statement changes: its table, and the other name of a rename."""
        s = self.statement
        return {self.name} | {n for n in (s.to, s.source) if n is not None}


@dataclass(frozen=True)
class Action:
    """What one statement does to one table (a RENAME TABLE's pair: to the old name and the new one), in the
    statement's order (``index``: a RENAME's pairs apply one after the other). An action is applied once: each
    lake table it writes records its ``marker`` (the statement's sequence and the action's index) in the
    commit that writes it, and an action whose marker a table has already (a replay after a crash, or the
    statement's entry in another topic read in a later batch) leaves that table alone."""

    op: str
    name: Name  # the table it changes; a rename's old name
    at: StatementAt  # the entry it comes from (for a rename: one of the pair's entries, the one with columns)
    index: int = 0
    to: Name | None = None  # a rename's new name
    pair_seen: frozenset[str] = frozenset()  # a rename: which of its entries the batch has ("to", "from")

    @property
    def names(self) -> set[Name]:
        return {self.name} | ({self.to} if self.to is not None else set())

    @property
    def marker(self) -> tuple[bytes, int]:
        return self.at.seq, self.index

    @property
    def statement(self) -> TableStatement:
        return self.at.statement

    def describe(self) -> str:
        """The action for the log: op, table(s), position, the statement's text (shortened)."""
        target = f" to `{self.to[0]}`.`{self.to[1]}`" if self.to is not None else ""
        return (f"{self.op} `{self.name[0]}`.`{self.name[1]}`{target} at {self.at.position}: "
                f"{' '.join(self.at.statement.statement.split())[:200]}")


def marker_text(marker: tuple[bytes, int]) -> str:
    """An action's marker as a table property's value (STATEMENT_PROPERTY)."""
    return f"{marker[0].hex()}:{marker[1]}"


def applied(properties: dict[str, str], marker: tuple[bytes, int]) -> bool:
    """Whether a lake table's properties record ``marker`` or a later action's: it has the action already."""
    text = properties.get(STATEMENT_PROPERTY)
    if not text:
        return False
    seq, _, index = text.partition(":")
    return (bytes.fromhex(seq), int(index or 0)) >= marker


@dataclass(frozen=True)
class RowsPart:
    """The rows of the named tables between two statements (the open range ``between``)."""

    part: str
    tables: frozenset[Name]
    between: tuple[bytes | None, bytes | None]


@dataclass(frozen=True)
class ApplyPart:
    part: str
    actions: tuple[Action, ...]

    @property
    def seq(self) -> bytes:
        return self.actions[0].at.seq


def plan(statements: list[StatementAt]) -> Iterator[RowsPart | ApplyPart]:
    """The parts of the statements' tables, in source order (the batch's other tables land before, in part "").
    Entries of one statement (its sequence: in several topics, e.g. a RENAME's old and new name, DROP TABLE a,
    b) are applied together, as the statement's actions (``actions``)."""
    grouped: dict[bytes, list[StatementAt]] = {}
    for at in sorted(statements, key=lambda s: (s.seq, s.topic, s.partition, s.offset)):
        grouped.setdefault(at.seq, []).append(at)
    applies = [ApplyPart(f"s{i + 1}", tuple(actions(entries))) for i, entries in enumerate(grouped.values())]
    named = frozenset(n for a in applies for action in a.actions for n in action.names)
    lo: bytes | None = None
    for i, step in enumerate(applies):
        yield RowsPart("" if i == 0 else f"r{i}", named, (lo, step.seq))
        yield step
        lo = step.seq
    yield RowsPart(f"r{len(applies)}", named, (lo, None))


def actions(entries: list[StatementAt]) -> list[Action]:
    """One statement's entries (in topic order) as its actions, in the order the statement applies them: each
    table's own (truncate, drop, create, alter, partition; once each where several entries say the same), then
    a RENAME's pairs in the statement's order (its text: ``RENAME TABLE a TO tmp, b TO a, tmp TO b``), each pair
    once though both its names' topics hold an entry."""
    out: list[tuple[str, Name, StatementAt, Name | None, frozenset[str]]] = []
    seen: set[tuple[str, Name]] = set()
    pairs: dict[tuple[Name, Name], tuple[StatementAt, set[str]]] = {}
    for at in entries:
        s = at.statement
        if s.op == "rename":
            pair = (at.name, s.to) if s.to is not None else (s.source, at.name) if s.source is not None else None
            if pair is None:
                continue  # a rename entry naming no other table: nothing it can say
            assert pair[0] is not None and pair[1] is not None
            known = pairs.get((pair[0], pair[1]))
            side = "to" if s.to is not None else "from"
            if known is None:
                pairs[(pair[0], pair[1])] = (at, {side})
            else:
                first, sides = known
                sides.add(side)
                if first.statement.columns is None and s.columns is not None:
                    pairs[(pair[0], pair[1])] = (at, sides)
            continue
        if (s.op, at.name) not in seen:
            seen.add((s.op, at.name))
            out.append((s.op, at.name, at, None, frozenset()))
    order = rename_order(entries[0].statement.statement, entries[0].statement.default_database) if pairs else []
    rank = {pair: i for i, pair in enumerate(order)}
    for (old, new), (at, sides) in sorted(pairs.items(), key=lambda kv: rank.get(kv[0], len(rank))):
        out.append(("rename", old, at, new, frozenset(sides)))
    return [Action(op, name, at, i, to, sides) for i, (op, name, at, to, sides) in enumerate(out)]


_TOKEN = re.compile(r"\s+|/\*.*?\*/|--[^\n]*|#[^\n]*|`((?:[^`]|``)*)`|([\w$]+)|(.)", re.DOTALL)


def rename_order(sql: str, default_db: str) -> list[tuple[Name, Name]]:
    """The (old, new) pairs of ``RENAME TABLE[S] a TO b[, c TO d ...]`` or ``ALTER TABLE a ... RENAME [TO|AS] b``
    in their order, unqualified names in ``default_db``; [] where the text is neither."""
    tokens: list[tuple[str, bool]] = []  # (text, quoted)
    for m in _TOKEN.finditer(sql):
        if m.group(1) is not None:
            tokens.append((m.group(1).replace("``", "`"), True))
        elif m.group(2) is not None:
            tokens.append((m.group(2), False))
        elif m.group(3) is not None:
            tokens.append((m.group(3), False))

    def word(i: int, *wanted: str) -> bool:
        return i < len(tokens) and not tokens[i][1] and tokens[i][0].upper() in wanted

    def name(i: int) -> tuple[Name, int] | None:
        if i >= len(tokens) or (not tokens[i][1] and not re.match(r"[\w$]", tokens[i][0])):
            return None
        if i + 2 < len(tokens) and tokens[i + 1] == (".", False):
            return (tokens[i][0], tokens[i + 2][0]), i + 3
        return (default_db, tokens[i][0]), i + 1

    pairs: list[tuple[Name, Name]] = []
    if word(0, "RENAME") and word(1, "TABLE", "TABLES"):
        i = 2
        if word(i, "IF") and word(i + 1, "EXISTS"):
            i += 2
        while True:
            old = name(i)
            if old is None or not word(old[1], "TO"):
                return []
            new = name(old[1] + 1)
            if new is None:
                return []
            if word(new[1], "WAIT", "NOWAIT"):
                new = (new[0], new[1] + (2 if word(new[1], "WAIT") else 1))
            pairs.append((old[0], new[0]))
            if new[1] < len(tokens) and tokens[new[1]] == (",", False):
                i = new[1] + 1
                continue
            return pairs
    i = 1 if word(0, "ALTER") else -1
    while i > 0 and word(i, "ONLINE", "IGNORE"):
        i += 1
    if i > 0 and word(i, "TABLE"):
        i += 1
        if word(i, "IF") and word(i + 1, "EXISTS"):
            i += 2
        old = name(i)
        if old is None:
            return []
        for j in range(old[1], len(tokens)):
            if word(j, "RENAME") and not word(j + 1, "COLUMN", "INDEX", "KEY"):
                k = j + 1 + (1 if word(j + 1, "TO", "AS") else 0)
                new = name(k)
                return [(old[0], new[0])] if new is not None else []
    return []


def statement_columns(statement: TableStatement) -> list[tuple[str, str]] | None:
    """The table's lake columns after the statement, from its descriptor's columns (as decode.py's table maps
    give them: MariaDB's hidden hash columns left out); None where the entry has none (no schema history)."""
    if statement.columns is None:
        return None
    tm, _, _ = decode_descriptor(orjson.dumps({
        "database": statement.database, "table": statement.table, "mariadb": statement.mariadb,
        "columns": statement.columns, "primary_key": statement.primary_key, "binary": []}))
    own = tm.columns[:len(tm.columns) - tm.hidden_columns]
    return [(c.name, LakeColumn(c, tm.is_mariadb).dtype) for c in own]


def statement_row(at: StatementAt, columns: list[tuple[str, str]], index: int = 0,
                  rename: tuple[Name, Name] | None = None) -> pa.Table:
    """The change log's row of a statement: its op, place and text, the row images null (decode.TYPED_HEAD, then
    ``before``/``after`` of ``columns``, then STATEMENT_COLUMNS); the format adds its own columns. ``index``: the
    action's within the statement (its ``row_index``: a swap's two rename rows in one change log differ by it);
    ``rename``: a rename's (old, new) names."""
    image = pa.struct([pa.field(n, arrow_type(t)) for n, t in columns])
    schema = pa.schema([*(pa.field(n, arrow_type(t)) for n, t in TYPED_HEAD), ("before", image), ("after", image),
                        *((n, pa.string()) for n in STATEMENT_COLUMNS)])
    old, new = (f"{rename[0][0]}.{rename[0][1]}", f"{rename[1][0]}.{rename[1][1]}") if rename else (None, None)
    values = {"op": at.statement.op, "seq": at.seq, "position": at.position, "gtid": at.gtid,
              "commit_ts": at.commit_ts, "row_index": index, "kafka_topic": at.topic, "kafka_partition": at.partition,
              "kafka_offset": at.offset, "before": None, "after": None, STATEMENT_COLUMN: at.statement.statement,
              RENAME_FROM: old, RENAME_TO: new}
    return pa.Table.from_pylist([values], schema=schema)


def statement_column_ddl() -> str:
    return ", ".join(f"{quote(n)} string" for n in STATEMENT_COLUMNS)


def statement_key(statement: TableStatement) -> list[str]:
    """The key the table's rows will carry after the statement (its primary key's columns), from the entry's
    descriptor; [] where it names none."""
    if statement.columns is None or not statement.primary_key:
        return []
    return [statement.columns[i]["name"] for i, _ in statement.primary_key]


def ended_value(action: Action) -> str:
    """ENDED_PROPERTY's value for a table an action ends: a drop, or a rename (``to``: the new name)."""
    return orjson.dumps({"op": action.op, "position": action.at.position, "seq": action.at.seq.hex(),
                         "to": f"{action.to[0]}.{action.to[1]}" if action.to is not None else None}).decode()


def ended_of(properties: dict[str, str] | None) -> dict[str, Any] | None:
    """ENDED_PROPERTY read back (None: the table is live, or has no such table)."""
    text = (properties or {}).get(ENDED_PROPERTY)
    return dict(orjson.loads(text)) if text else None
