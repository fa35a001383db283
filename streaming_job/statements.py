"""Table statements in a micro-batch (ingester/records/statement.py; docs/LAND.md "Table statements").

TRUNCATE, DROP, RENAME TABLE, partition maintenance and quiet schema changes change a table without rows
events; the daemon publishes each as a table statement entry in the topics of the tables it changes, at its
sequence. The land job applies it there: a batch holding statements lands in *parts*. The tables no
statement of the batch names land as any batch does (part ""); the tables the statements name land their
rows up to the first statement (part ""), then that statement is applied (part "s1"), then their rows up to
the next one (part "r1"), and so on. Each part's writes are idempotent on their own (the format's writes of
batch N carry the part in their identity: ``LakeFormat.part``), so a batch replayed after a crash skips
exactly the parts that committed, and the parts are the same on a replay (the same records).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa

from ingester.records.snapshot import decode_descriptor
from ingester.records.statement import TableStatement

from .arrow_rows import LakeColumn
from .decode import TYPED_HEAD, quote
from .lake_types import arrow_type

STATEMENT_COLUMN = "statement"  # a change log's column: the SQL text of a statement row (null for row changes)
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
class RowsPart:
    """The rows of the named tables between two statements (the open range ``between``)."""

    part: str
    tables: frozenset[Name]
    between: tuple[bytes | None, bytes | None]


@dataclass(frozen=True)
class ApplyPart:
    part: str
    at: StatementAt


def plan(statements: list[StatementAt]) -> Iterator[RowsPart | ApplyPart]:
    """The parts of the statements' tables, in source order (the batch's other tables land before, in part "")."""
    ordered = sorted(statements, key=lambda s: s.seq)
    named = frozenset(n for s in ordered for n in s.names)
    lo: bytes | None = None
    for i, at in enumerate(ordered):
        yield RowsPart("" if i == 0 else f"r{i}", named, (lo, at.seq))
        yield ApplyPart(f"s{i + 1}", at)
        lo = at.seq
    yield RowsPart(f"r{len(ordered)}", named, (lo, None))


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


def statement_row(at: StatementAt, columns: list[tuple[str, str]]) -> pa.Table:
    """The change log's row of a statement: its op, place and text, the row images null (decode.TYPED_HEAD, then
    ``before``/``after`` of ``columns``, then STATEMENT_COLUMN); the format adds its own columns."""
    image = pa.struct([pa.field(n, arrow_type(t)) for n, t in columns])
    schema = pa.schema([*(pa.field(n, arrow_type(t)) for n, t in TYPED_HEAD), ("before", image), ("after", image),
                        (STATEMENT_COLUMN, pa.string())])
    values = {"op": at.statement.op, "seq": at.seq, "position": at.position, "gtid": at.gtid,
              "commit_ts": at.commit_ts, "row_index": 0, "kafka_topic": at.topic, "kafka_partition": at.partition,
              "kafka_offset": at.offset, "before": None, "after": None, STATEMENT_COLUMN: at.statement.statement}
    return pa.Table.from_pylist([values], schema=schema)


def statement_column_ddl() -> str:
    return f"{quote(STATEMENT_COLUMN)} string"
