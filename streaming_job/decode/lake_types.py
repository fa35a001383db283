"""MySQL column (from the binlog's TABLE_MAP) -> lake column type, and the value conversions.

Pure Python, no Spark import: executors convert the codec's values (temporal values and DECIMAL
are strings, see ingester/codec/values.py) into plain values that Arrow takes directly. Types are
named with Spark's DDL names so the driver can turn them into Spark types (``spark_type``).

Mapping (docs/LAND.md): signed integers keep their width, unsigned ones take the next wider type
(BIGINT UNSIGNED -> DECIMAL(20,0)); DECIMAL(p,s) -> DECIMAL(p,s) up to Spark's 38 digits, wider
ones as exact strings; DATE -> DATE; DATETIME -> TIMESTAMP_NTZ; TIMESTAMP -> TIMESTAMP (UTC);
TIME -> BIGINT microseconds (signed: MySQL TIME is a duration of up to +-838 hours); zero and
partly-zero dates -> NULL; BIT -> BIGINT (BIT(64) values >= 2^63 keep their 64 bits, as the
negative two's complement); YEAR -> INT; ENUM/SET/JSON -> STRING; binary-collation strings,
BLOBs and GEOMETRY -> BINARY.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson
import pyarrow as pa

from ingester.codec.charsets import keeps_bytes
from ingester.codec.constants import ColumnType as T
from ingester.codec.json_default import json_default
from ingester.codec.jsonb import JSON_NULL
from ingester.codec.rows import JsonDiff
from ingester.codec.table_map import Column

MAX_DECIMAL_PRECISION = 38  # Spark's
_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()
_DAY_US = 86_400_000_000

_INTS: dict[int, tuple[str, str]] = {  # type -> (signed, unsigned)
    T.TINY: ("tinyint", "smallint"),
    T.SHORT: ("smallint", "int"),
    T.INT24: ("int", "int"),
    T.LONG: ("int", "bigint"),
    T.LONGLONG: ("bigint", "decimal(20,0)"),
}
_TEXT = frozenset((T.VARCHAR, T.VAR_STRING, T.STRING, T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB,
                   T.VARCHAR_COMPRESSED, T.BLOB_COMPRESSED))


def lake_type(col: Column, mariadb: bool = False) -> str:
    """The Spark DDL type name a column lands as (``mariadb``: how its collation id is numbered)."""
    t = col.type
    if t in _INTS:
        signed, unsigned = _INTS[t]
        return unsigned if col.unsigned else signed
    if t == T.YEAR:
        return "int"
    if t == T.BIT or t in (T.TIME, T.TIME2):
        return "bigint"
    if t == T.FLOAT:
        return "float"
    if t == T.DOUBLE:
        return "double"
    if t == T.NEWDECIMAL:
        precision, scale = col.meta >> 8, col.meta & 0xFF
        return f"decimal({precision},{scale})" if precision <= MAX_DECIMAL_PRECISION else "string"
    if t in (T.DATE, T.NEWDATE):
        return "date"
    if t in (T.DATETIME, T.DATETIME2):
        return "timestamp_ntz"
    if t in (T.TIMESTAMP, T.TIMESTAMP2):
        return "timestamp"
    if t in _TEXT:
        return "binary" if keeps_bytes(col.collation, mariadb) else "string"
    if t == T.GEOMETRY:
        return "binary"
    if t == T.VECTOR:
        return "array<float>"
    return "string"  # ENUM, SET, JSON, NULL, and anything the codec renders as text


_ARROW_TYPES: dict[str, pa.DataType] = {
    "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"),
    "string": pa.string(), "binary": pa.binary(), "array<float>": pa.list_(pa.float32()),
    "boolean": pa.bool_(),
}


def quote(name: str) -> str:
    """A column's or table's name in Spark SQL: in backquotes, its own doubled."""
    return "`" + name.replace("`", "``") + "`"


def arrow_type(dtype: str) -> pa.DataType:
    """The Arrow type of a lake type (its Spark DDL name)."""
    if dtype.startswith("decimal("):
        precision, scale = (int(x) for x in dtype[8:-1].split(","))
        return pa.decimal128(precision, scale)
    return _ARROW_TYPES[dtype]


def _days(text: str) -> int | None:
    y, m, d = int(text[0:4]), int(text[5:7]), int(text[8:10])
    if not (y and m and d):
        return None  # zero or partly-zero date: no calendar day
    return datetime.date(y, m, d).toordinal() - _EPOCH_ORDINAL


def date_days(text: str) -> int | None:
    """'YYYY-MM-DD' -> days since 1970-01-01 (None for zero dates)."""
    return _days(text)


def datetime_micros(text: str) -> int | None:
    """'YYYY-MM-DD hh:mm:ss[.f]' -> microseconds since 1970-01-01 00:00 (None for zero dates)."""
    days = _days(text)
    if days is None:
        return None
    seconds = int(text[11:13]) * 3600 + int(text[14:16]) * 60 + int(text[17:19])
    frac = text[20:26]
    return days * _DAY_US + seconds * 1_000_000 + (int(frac.ljust(6, "0")) if frac else 0)


_TIME = re.compile(r"(-?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?$")


def time_micros(text: str) -> int:
    """'[-]hhh:mm:ss[.f]' -> signed microseconds."""
    m = _TIME.match(text)
    if m is None:
        raise ValueError(f"not a TIME value: {text!r}")
    sign, h, mi, s, frac = m.groups()
    us = ((int(h) * 60 + int(mi)) * 60 + int(s)) * 1_000_000 + int((frac or "").ljust(6, "0"))
    return -us if sign else us


def _bit(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def text_value(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bytes):  # text column without charset metadata that is not valid UTF-8
        return v.decode("utf-8", "surrogateescape")
    return str(v)  # ENUM/SET without labels: index or mask


def _binary(v: Any) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode()


def _json(v: Any) -> str:
    """MySQL JSON (the decoded document) as JSON text, the null document as ``null`` (SQL NULL is the
    lake's NULL and never gets here); MariaDB's JSON is LONGTEXT and never gets here either."""
    if v is JSON_NULL:
        return "null"
    if isinstance(v, JsonDiff):
        v = v.to_json()
    return orjson.dumps(v, default=json_default).decode()


def identity(v: Any) -> Any:
    return v


def converter(col: Column, dtype: str) -> Callable[[Any], Any]:
    """From the codec's (non-NULL) value to the plain value Arrow takes for ``dtype``."""
    t = col.type
    if t == T.BIT:
        return _bit
    if t in (T.TIME, T.TIME2):
        return time_micros
    if dtype == "date":
        return date_days
    if dtype in ("timestamp", "timestamp_ntz"):
        return datetime_micros
    if dtype == "string":
        return _json if t == T.JSON else text_value
    if dtype == "binary":
        return _binary
    return identity  # integers, floats, DECIMAL strings (made Decimal when building arrays)


# --- schema compatibility (driver side) -------------------------------------------------------

_INT_RANK = {"tinyint": 1, "smallint": 2, "int": 3, "bigint": 4}
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)$")


def _decimal(dtype: str) -> tuple[int, int] | None:
    m = _DECIMAL.match(dtype)
    return (int(m.group(1)), int(m.group(2))) if m else None


def widens(old: str, new: str) -> bool:
    """Whether every value of ``old`` is exactly a value of ``new`` (Delta type widening can follow)."""
    if old == new:
        return True
    if old in _INT_RANK and new in _INT_RANK:
        return _INT_RANK[old] <= _INT_RANK[new]
    if old == "float" and new == "double":
        return True
    if old == "date" and new == "timestamp_ntz":
        return True
    integer_digits = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}
    nd = _decimal(new)
    if nd is None:
        return False
    if old in integer_digits:
        return nd[0] - nd[1] >= integer_digits[old]
    od = _decimal(old)
    return od is not None and nd[1] >= od[1] and nd[0] - nd[1] >= od[0] - od[1]


def to_decimal(v: Any) -> Decimal:
    return Decimal(v)
