"""Table statement entries of record format v2 (docs/FORMAT.md, "Table statements").

Some statements change a table's rows or its identity without a single rows event: TRUNCATE TABLE, DROP
TABLE, RENAME TABLE, partition maintenance (ALTER TABLE ... TRUNCATE/DROP/EXCHANGE PARTITION), and schema
changes whose effect on existing rows (an added column's default, a dropped or renamed column) the binlog
never shows. The daemon publishes such a statement, besides on the schema topic, as a *table statement
entry* in the topic of every captured table it changes, at the statement's sequence: a consumer of one
table's topic then sees it in order with the table's rows. Each entry is a record of its own (a record of
table statement entries holds nothing else, and no format description), so records never straddle one.

An entry is ``flags u8 (FLAG_STATEMENT) | u32le m | descriptor (m bytes, JSON)``; the index gives it the
type code ``TABLE_STATEMENT`` (binlake's own). ``record_events`` decodes it into a ``TableStatementEvent``
whose ``statement`` is a ``TableStatement``. Pure functions: no Kafka, no SQL.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, get_args

import orjson

from ..codec import BinlogError
from ..codec.events import Event
from ..codec.table_map import TableMap
from .snapshot import descriptor_columns

TABLE_STATEMENT = 251  # the index's type code of table statement entries: no server uses it
FLAG_STATEMENT = 32  # entry flag bit 5: a table statement entry (a JSON descriptor, nothing else)
_LEN = struct.Struct("<I")
_INDEX_ENTRY = struct.Struct(">16sQBB")

# What the statement did to the table whose topic the entry is in:
#   truncate   every row removed (TRUNCATE TABLE; ALTER TABLE ... TRUNCATE PARTITION ALL)
#   drop       the table dropped (DROP TABLE, DROP DATABASE, CREATE OR REPLACE's drop): its rows and columns end
#   create     the table created (CREATE TABLE [LIKE]; after a drop: a new table with no rows of the old one)
#   rename     the table renamed: in the old name's topic ``to`` is the new name, in the new name's ``from`` the old
#   alter      its columns changed (ADD/DROP/MODIFY/CHANGE/RENAME COLUMN, defaults, charsets, keys): ``columns``
#              are the table's columns after it, ``renamed`` maps a renamed column's new name to its old one
#   partition  partitions maintained (``partition``: the action, the partitions named, the table exchanged with;
#              ``"reload": true`` where a reload entry follows: the rows the action changed are read again)
#   reload     the table's rows are read again from the source (a re-snapshot, sequenced after this entry): a
#              consumer keeping the table's rows drops them here, and the re-snapshot's rows and the changes after
#              this entry make them the source's again (after partition maintenance that removed or moved rows the
#              binlog does not name, and `binlake snapshot --replace`)
Op = Literal["truncate", "drop", "create", "rename", "alter", "partition", "reload"]
OPS: tuple[str, ...] = get_args(Op)


@dataclass(frozen=True)
class TableStatement:
    """One table statement entry's descriptor (docs/FORMAT.md, "Table statements")."""

    op: Op
    database: str  # the table whose topic the entry is in
    table: str
    statement: str  # the SQL text as the server logged it
    default_database: str = ""  # the QUERY event's database: what unqualified names in ``statement`` mean
    micros: int = 0  # when the statement started, µs since the epoch (its CURRENT_TIMESTAMP: added columns' defaults)
    time_zone: str | None = None  # the session's time zone as the QUERY event names it (None: not logged)
    server_id: int = 0  # the QUERY event's: the server that ran the statement first
    to: tuple[str, str] | None = None  # rename: the table's new name (in the old name's topic)
    source: tuple[str, str] | None = None  # rename: the table's old name (in the new name's topic); JSON "from"
    # The table's columns after the statement (create, alter, truncate, partition, a rename's "from"), as a snapshot
    # descriptor describes them (records/snapshot.py's _COLUMN_FIELDS, plus "default" where the history knows a
    # literal DEFAULT, "default_expression" where only the server evaluates it), from the schema history: equal to
    # the server's FULL TABLE_MAP after the statement; None where the daemon keeps no history or it does not know them
    columns: list[dict[str, Any]] | None = None
    primary_key: list[list[int]] | None = None  # [[column index, prefix length]] of the key the TABLE_MAP would name
    renamed: dict[str, str] = field(default_factory=dict)  # alter: new column name -> old name
    # alter: the table's columns before the statement (the form of ``columns``), where the history knows them: what
    # the land job converts the old values from (a column's charset, signedness, labels, fractional digits)
    before: list[dict[str, Any]] | None = None
    # partition: {"action": one of schema/ddl_operations.py's PARTITION_ACTIONS (truncate, drop, exchange, reorganize,
    #             coalesce, add, remove, rebuild, repartition, discard, import, convert_to_table, convert_from_table),
    #             "names": [partition names] ([]: ALL, or none named), "with": [db, table] of EXCHANGE's or CONVERT's
    #             other table, or absent, "count": COALESCE's and ADD PARTITIONS' number, or absent}
    partition: dict[str, Any] | None = None
    mariadb: bool = False

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"table statement op {self.op!r} is not one of {', '.join(OPS)}")

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"op": self.op, "database": self.database, "table": self.table,
                             "statement": self.statement, "default_database": self.default_database,
                             "micros": self.micros, "time_zone": self.time_zone, "server_id": self.server_id,
                             "mariadb": self.mariadb}
        if self.to is not None:
            d["to"] = list(self.to)
        if self.source is not None:
            d["from"] = list(self.source)
        if self.columns is not None:
            d["columns"] = self.columns
            d["primary_key"] = self.primary_key
        if self.renamed:
            d["renamed"] = self.renamed
        if self.before is not None:
            d["before"] = self.before
        if self.partition is not None:
            d["partition"] = self.partition
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TableStatement:
        to, source = d.get("to"), d.get("from")
        return cls(op=d["op"], database=d["database"], table=d["table"], statement=d["statement"],
                   default_database=d.get("default_database", ""), micros=int(d.get("micros") or 0),
                   time_zone=d.get("time_zone"), server_id=int(d.get("server_id") or 0),
                   to=None if to is None else (to[0], to[1]),
                   source=None if source is None else (source[0], source[1]), columns=d.get("columns"),
                   primary_key=d.get("primary_key"), renamed=dict(d.get("renamed") or {}), before=d.get("before"),
                   partition=d.get("partition"), mariadb=bool(d.get("mariadb", False)))

    def encode(self) -> bytes:
        return orjson.dumps(self.to_json())

    def table_map(self, defaults: bool = False) -> TableMap | None:
        """The table's columns after the statement as the codec's TableMap (as the server's FULL TABLE_MAP describes
        them), None without ``columns``; ``defaults``: NOT NULL columns' literal defaults, as records' schema entries
        give them (docs/FORMAT.md, "Schema entries")."""
        if self.columns is None:
            return None
        key = [(k[0], k[1]) for k in self.primary_key] if self.primary_key else None
        return TableMap(0, 0, self.database, self.table, descriptor_columns(self.columns, defaults), key,
                        has_names=True, is_mariadb=self.mariadb)


@dataclass(slots=True, kw_only=True, eq=False)
class TableStatementEvent(Event):
    """A table statement entry decoded (binlake's own event, type code 251, never a server's): what a statement
    did to the table whose topic holds it, at the statement's sequence. JSONL type ``table_statement``."""

    kind: ClassVar[str] = "statement"
    statement: TableStatement

    def to_dict(self) -> dict[str, Any]:
        return {"type": "table_statement", "type_code": self.type_code, "position": self.position,
                "timestamp": self.timestamp, **self.statement.to_json()}


def statement_value(statements: list[TableStatement]) -> bytes:
    """A record value of table statement entries only: no format description (its length is 0)."""
    parts = [b"BLK", bytes((2, 0)), _LEN.pack(0)]
    for s in statements:
        data = s.encode()
        parts += (bytes((FLAG_STATEMENT,)), _LEN.pack(len(data)), data)
    return b"".join(parts)


def is_statement_record(value: bytes) -> bool:
    """Whether a record value holds table statement entries (which it then holds alone)."""
    return len(value) > 9 and value[5:9] == b"\0\0\0\0" and bool(value[9] & FLAG_STATEMENT)


def index_entry(seq: bytes, commit_ts: int, gtid: bytes = b"") -> bytes:
    """The ``binlake.index`` entry of one table statement entry."""
    return _INDEX_ENTRY.pack(seq, commit_ts, TABLE_STATEMENT, len(gtid)) + gtid


def decode_entry(value: bytes, p: int, position: int, commit_ts: int, source: str) -> tuple[TableStatementEvent, int]:
    """The entry whose descriptor length is at ``value[p:]`` (after its flag byte), and the offset after it."""
    if p + 4 > len(value):
        raise BinlogError("record ends inside a table statement entry's length", p, source)
    (m,) = _LEN.unpack_from(value, p)
    if p + 4 + m > len(value):
        raise BinlogError(f"record's table statement descriptor of {m} bytes runs past its end", p, source)
    try:
        statement = TableStatement.from_json(orjson.loads(value[p + 4 : p + 4 + m]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError) as exc:
        raise BinlogError(f"bad table statement descriptor: {exc}", p, source) from None
    event = TableStatementEvent(type_code=TABLE_STATEMENT, timestamp=commit_ts // 1_000_000, server_id=0,
                                event_size=m, log_pos=0, flags=0, position=position, statement=statement)
    return event, p + 4 + m
