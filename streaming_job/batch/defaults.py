"""Defaults of added columns, so that mirrors equal the server's SELECT after ALTER TABLE ... ADD COLUMN.

The server gives every existing row the new column's default (a NOT NULL column without one gets its
type's implicit default: 0, '', the first ENUM label, the zero date), but writes no row events for it:
rows written before the ALTER and not changed since have the default on the server while their binlog
images lack the column. The land job learns the default from the ALTER statement itself (the daemon
publishes it on ``<prefix>._schema``, with its sequence, time and time zone) and gives it to those rows
in the mirror: to the rows already there when the column is added to the mirror (an UPDATE: Delta's in
delta/defaults.py), and to the batch's own images older than the ALTER (``mirror_image``). The change log
keeps the images as written (null: the column did not exist yet).

What the land job cannot compute (expressions, DATETIME/DATE defaults of the current time or TIMESTAMP
literals in a session time zone the binlog names only as ``SYSTEM``) is an ``Uncomputable`` default: the
mirror keeps null there and the job says so; ``binlake snapshot --tables`` re-reads the table's rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import orjson

from ingester.codec.events import QueryEvent
from ingester.schema.column_defaults import Uncomputable, literal
from ingester.schema.ddl import parse_ddl
from ingester.schema.ddl_operations import AddColumn, AlterTable, ChangeColumn, RenameColumn
from ingester.schema.ddl_tokens import UnparsedDDL
from ingester.schema.table_schema import ColumnDef

from ..decode.lake_types import date_days, datetime_micros, time_micros, widens

_NOW = frozenset(("CURRENT_TIMESTAMP", "NOW", "LOCALTIME", "LOCALTIMESTAMP"))
_INTS = frozenset(("tinyint", "smallint", "int", "bigint"))
_OFFSET = re.compile(r"([+-])(\d{1,2}):(\d\d)$")
PROPERTY = "binlake.pendingDefaults"  # mirror table property: defaults being given to existing rows


@dataclass(frozen=True)
class Default:
    """An added column's default, valid for the images older than ``seq`` (the ALTER's sequence)."""

    column: str
    seq: bytes
    sql: str  # the lake value as a Spark SQL expression; of a renamed column: its type
    ddl: str  # the statement, for messages
    source: str = ""  # a renamed column: its old name, whose values the older rows keep

    def value(self, prefix: str = "") -> str:
        """The value as SQL; ``prefix`` qualifies the old column of a rename (``after.``)."""
        from ..decode.lake_types import quote

        return f"CAST({prefix}{quote(self.source)} AS {self.sql})" if self.source else self.sql

    def to_json(self) -> dict[str, str]:
        return {"column": self.column, "seq": self.seq.hex(), "sql": self.sql, "ddl": self.ddl, "source": self.source}

    @classmethod
    def from_json(cls, d: dict[str, str]) -> Default:
        return cls(d["column"], bytes.fromhex(d["seq"]), d["sql"], d["ddl"], d.get("source", ""))


def statement_micros(timestamp: int, status_vars: dict[str, Any]) -> int:
    """When the statement started, as the server's CURRENT_TIMESTAMP saw it (MariaDB's Q_HRNOW: microseconds)."""
    return timestamp * 1_000_000 + int(status_vars.get("hrnow") or 0)


def lake_default(column: ColumnDef, dtype: str, micros: int, time_zone: str | None) -> str | None:
    """The lake value (a Spark SQL expression) the server gives existing rows for ``column`` added with lake
    type ``dtype`` by a statement started at ``micros`` in ``time_zone``; None: NULL."""
    if column.generated:
        raise Uncomputable("a generated column (its value is an expression of each row)")
    toks = column.default
    if toks is None:
        return _implicit(column, dtype) if column.not_null else None
    if toks == [("word", toks[0][1])] and toks[0][1].upper() == "NULL":
        return None
    head = toks[0][1].upper() if toks[0][0] == "word" else ""
    if head in _NOW and (len(toks) == 1 or toks[1] == ("op", "(")):
        return _now(column, dtype, micros, time_zone)
    return _typed(column, dtype, literal(toks), time_zone)


def quote_string(text: str) -> str:
    """A SQL string literal of ``text``."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _typed(column: ColumnDef, dtype: str, value: str | int | bytes, time_zone: str | None) -> str | None:
    kind = column.type
    if dtype == "binary":
        raw = value if isinstance(value, bytes) else str(value).encode()
        if kind == "binary":  # BINARY(n) pads with zero bytes
            raw = raw.ljust(int(column.args or 1), b"\0")
        return f"X'{raw.hex()}'"
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if dtype == "string":
        text = str(value)
        return quote_string(text.rstrip(" ") if kind in ("char", "character", "nchar") else text)
    if kind == "time":
        return str(time_micros(str(value)))
    if kind == "bit":
        bits = int(value) if isinstance(value, int) else int(Decimal(value))
        return str(bits - (1 << 64) if bits >= 1 << 63 else bits)
    if dtype == "date":
        days = date_days(str(value))
        return None if days is None else f"DATE_FROM_UNIX_DATE({days})"
    if dtype == "timestamp_ntz":
        micros = datetime_micros(str(value))
        return None if micros is None else f"CAST(TIMESTAMP_MICROS({micros}) AS TIMESTAMP_NTZ)"
    if dtype == "timestamp":
        micros = datetime_micros(str(value))
        if micros is None:
            return None
        return f"TIMESTAMP_MICROS({micros - _offset(time_zone, 'a TIMESTAMP literal')})"
    number = Decimal(value) if isinstance(value, str) else Decimal(int(value))
    if dtype in _INTS:
        return f"CAST({number.quantize(Decimal(1), ROUND_HALF_UP)} AS {dtype})"
    if dtype.startswith("decimal("):
        scale = int(dtype[:-1].split(",")[1])
        return f"CAST('{number.quantize(Decimal(1).scaleb(-scale), ROUND_HALF_UP)}' AS {dtype})"
    if dtype in ("float", "double"):
        return f"CAST('{number}' AS {dtype})"
    raise Uncomputable(f"a default of lake type {dtype}")


def _now(column: ColumnDef, dtype: str, micros: int, time_zone: str | None) -> str:
    """CURRENT_TIMESTAMP: the ALTER's start, cut to the column's fractional digits."""
    fsp = int(column.args or 0) if column.args.isdigit() else 0
    micros -= micros % 10 ** (6 - fsp)
    if dtype == "timestamp":
        return f"TIMESTAMP_MICROS({micros})"
    local = micros + _offset(time_zone, f"CURRENT_TIMESTAMP for a {column.type.upper()} column")
    if dtype == "timestamp_ntz":
        return f"CAST(TIMESTAMP_MICROS({local}) AS TIMESTAMP_NTZ)"
    if dtype == "date":
        return f"DATE_FROM_UNIX_DATE({local // 86_400_000_000})"
    raise Uncomputable(f"CURRENT_TIMESTAMP for lake type {dtype}")


def _offset(time_zone: str | None, what: str) -> int:
    """The session time zone's offset from UTC in microseconds, when the binlog names it as one."""
    tz = (time_zone or "SYSTEM").strip()
    if tz.upper() in ("UTC", "GMT"):
        return 0
    m = _OFFSET.match(tz)
    if m is None:
        raise Uncomputable(f"{what} is local time of the session's time zone {tz!r}, which the binlog does not "
                           "resolve")
    sign = -1 if m.group(1) == "-" else 1
    return sign * (int(m.group(2)) * 3600 + int(m.group(3)) * 60) * 1_000_000


def _implicit(column: ColumnDef, dtype: str) -> str | None:
    """A NOT NULL column without DEFAULT: its type's zero value (zero dates are null in the lake)."""
    if dtype in ("date", "timestamp", "timestamp_ntz"):
        return None
    if column.type == "enum" and column.enum_values:
        return quote_string(column.enum_values[0])
    if dtype == "string":
        return "''"
    if dtype == "binary":
        return _typed(column, dtype, b"", None)
    if dtype in _INTS or dtype.startswith("decimal(") or dtype in ("float", "double"):
        return f"CAST(0 AS {dtype})"
    raise Uncomputable(f"the implicit default of lake type {dtype}")


@dataclass(frozen=True)
class _Added:
    seq: bytes
    column: ColumnDef
    micros: int
    time_zone: str | None
    ddl: str
    source: str = ""  # RENAME COLUMN / CHANGE: the old name


class AddedColumns:
    """The ADD COLUMN clauses of the schema topic's statements, per table, in source order."""

    def __init__(self) -> None:
        self.tables: dict[tuple[str, str], list[_Added]] = {}

    def feed(self, seq: bytes, event: QueryEvent) -> None:
        try:
            ops = parse_ddl(event.query, event.database)
        except UnparsedDDL:
            return  # not one that adds columns this parser follows (the daemon reports those it needs)
        micros = statement_micros(event.timestamp, event.status_vars)
        tz = event.status_vars.get("time_zone")
        for op in ops:
            if isinstance(op, AlterTable):
                for spec in op.specs:
                    added = None
                    if isinstance(spec, AddColumn):
                        added = _Added(seq, spec.column, micros, tz, event.query)
                    elif isinstance(spec, RenameColumn):
                        added = _Added(seq, ColumnDef(spec.new, ""), micros, tz, event.query, spec.old)
                    elif isinstance(spec, ChangeColumn) and spec.old.lower() != spec.column.name.lower():
                        added = _Added(seq, spec.column, micros, tz, event.query, spec.old)
                    if added is not None:
                        self.tables.setdefault(op.name, []).append(added)

    def default(self, db: str, table: str, name: str, columns: dict[str, str], before: bytes | None) -> Default | None:
        """The default of the last ADD COLUMN ``name`` of the table before ``before`` (None: no bound), or of
        the last RENAME/CHANGE COLUMN that named a column of ``columns`` (the lake's types) ``name``: its old
        column; None when there is none or it is NULL. Uncomputable: only the server knows it."""
        low = name.lower()
        found = [a for a in self.tables.get((db, table), ()) if a.column.name.lower() == low
                 and (before is None or a.seq < before)]
        if not found:
            return None
        added = found[-1]
        dtype = columns[name]
        if added.source:
            old = next((c for c in columns if c.lower() == added.source.lower()), None)
            if old is None:
                return None
            if columns[old] != dtype and not widens(columns[old], dtype):
                raise Uncomputable(f"the renamed column `{old}` {columns[old]}, now {dtype}, by "
                                   f"{' '.join(added.ddl.split())[:300]}")
            return Default(name, added.seq, dtype, added.ddl, old)
        try:
            sql = lake_default(added.column, dtype, added.micros, added.time_zone)
        except Uncomputable as exc:
            raise Uncomputable(f"{exc}, added by {' '.join(added.ddl.split())[:300]}") from None
        return None if sql is None else Default(name, added.seq, sql, added.ddl)


def mirror_images(columns: list[str], defaults: list[Default], image: str = "after.",
                  seq: str = "seq") -> dict[str, Any]:
    """The mirror's columns that ``defaults`` change, from images whose columns are ``image``-prefixed and
    whose sequence is ``seq``: where an image is older than a column's ADD COLUMN (or RENAME), its
    default (or the old column's value, itself perhaps a default)."""
    from pyspark.sql import functions as F

    from ..decode.lake_types import quote

    exprs = {n: f"{image}{quote(n)}" for n in columns}
    changed = []
    for d in defaults:  # in column order; a rename's source gets its own default first
        if d.column in exprs:
            value = f"CAST(({exprs[d.source]}) AS {d.sql})" if d.source in exprs else d.value(image)
            exprs[d.column] = f"CASE WHEN {quote(seq)} < X'{d.seq.hex()}' THEN {value} ELSE {exprs[d.column]} END"
            changed.append(d.column)
    return {n: F.expr(exprs[n]) for n in changed}


def pending_in(properties: dict[str, str]) -> list[Default]:
    """The defaults a table's properties say are pending (``mark_pending``)."""
    value = properties.get(PROPERTY)
    return [Default.from_json(d) for d in orjson.loads(value)] if value else []
