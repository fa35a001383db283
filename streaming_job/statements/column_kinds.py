"""What the value conversions of a changed column (schema_changes.py) stand on: the ALTER's statement (its
day, session time zone, server flavour), a column's kind and its bounds, and ``Unknown``: a conversion only the server
knows."""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from decimal import Context

from ingester.codec.charsets import BINARY_COLLATION, MAX_CHAR_BYTES, charset_for
from ingester.codec.constants import ColumnType as T
from ingester.codec.table_map import Column


class Unknown(Exception):
    """A conversion only the server knows (the column's old rows are re-read: ``binlake snapshot``)."""


ZERO = "zero date"  # a NOT NULL temporal column's null in the lake: the server's zero date


_INT_RANGE: dict[int, int] = {T.TINY: 8, T.SHORT: 16, T.INT24: 24, T.LONG: 32, T.LONGLONG: 64}


_TEXT_TYPES = frozenset((T.VARCHAR, T.VAR_STRING, T.STRING, T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB,
                         T.VARCHAR_COMPRESSED, T.BLOB_COMPRESSED))


_BLOB_BYTES = {1: 255, 2: 65_535, 3: 16_777_215, 4: 4_294_967_295}


_KINDS: dict[int, str] = {
    T.YEAR: "year", T.BIT: "bit", T.NEWDECIMAL: "decimal", T.DECIMAL: "decimal", T.FLOAT: "float", T.DOUBLE: "double",
    T.DATE: "date", T.NEWDATE: "date", T.DATETIME: "datetime", T.DATETIME2: "datetime", T.TIMESTAMP: "timestamp",
    T.TIMESTAMP2: "timestamp", T.TIME: "time", T.TIME2: "time", T.ENUM: "enum", T.SET: "set", T.JSON: "json"}


EPOCH = datetime.datetime(1970, 1, 1)


UTC = datetime.UTC


DAY_US = 86_400_000_000


WIDE = Context(prec=100)  # DECIMAL has at most 65 digits


@dataclass(frozen=True)
class Statement:
    """What a conversion needs of the ALTER: its start (µs since the epoch: CURRENT_DATE), its session time
    zone's offset from UTC in µs (None: not resolvable from the binlog), the server's flavour."""

    micros: int = 0
    offset: int | None = 0
    mariadb: bool = True


def time_zone_offset(time_zone: str | None) -> int | None:
    """A session time zone as the binlog names it, as an offset from UTC in µs (None: ``SYSTEM`` or a named
    zone, which the binlog does not resolve)."""
    tz = (time_zone or "SYSTEM").strip()
    if tz.upper() in ("UTC", "GMT"):
        return 0
    m = re.match(r"([+-])(\d{1,2}):(\d\d)$", tz)
    if m is None:
        return None
    sign = -1 if m.group(1) == "-" else 1
    return sign * (int(m.group(2)) * 3600 + int(m.group(3)) * 60) * 1_000_000


def kind(col: Column, mariadb: bool = True) -> str:
    """A source column's family for the conversions."""
    t = col.type
    if t in _INT_RANGE:
        return "int"
    if t in _KINDS:
        return _KINDS[t]
    if t in _TEXT_TYPES:
        return "binary" if col.collation == BINARY_COLLATION else "text"
    return "other"  # GEOMETRY, VECTOR, ...


def fsp(col: Column) -> int:
    """Fractional second digits of a temporal column (0 for the old types without them)."""
    return col.meta if col.type in (T.DATETIME2, T.TIMESTAMP2, T.TIME2) else 0


def int_bounds(col: Column) -> tuple[int, int]:
    bits = _INT_RANGE[col.type]
    if col.unsigned:
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def decimal_shape(col: Column) -> tuple[int, int]:
    return col.meta >> 8, col.meta & 0xFF


def column_charset(col: Column, mariadb: bool) -> str | None:
    return None if col.collation is None else charset_for(col.collation, mariadb)


def max_bytes(col: Column) -> int:
    if col.type in (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.BLOB_COMPRESSED):
        return _BLOB_BYTES.get(col.meta, 4_294_967_295)
    return col.max_length


def max_chars(col: Column, mariadb: bool) -> int:
    charset = column_charset(col, mariadb) or "utf8mb4"
    return max_bytes(col) // MAX_CHAR_BYTES.get(charset, 1)


def type_name(col: Column) -> str:
    return T(col.type).name if col.type in T._value2member_map_ else str(col.type)


def labels_of(col: Column, k: str) -> list[str]:
    return list((col.enum_values if k == "enum" else col.set_values) or [])


def local(v: datetime.datetime, stmt: Statement) -> datetime.datetime:
    """A TIMESTAMP (an aware UTC datetime) as the session's local time."""
    if stmt.offset is None:
        raise Unknown("a TIMESTAMP as local time of the session time zone SYSTEM")
    return v.astimezone(UTC).replace(tzinfo=None) + datetime.timedelta(microseconds=stmt.offset)
