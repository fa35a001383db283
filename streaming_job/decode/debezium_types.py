"""Kafka Connect field schemas (as Debezium's MySQL/MariaDB connectors write them) -> lake column types, and the
conversion of each payload value (Kafka Connect's JSON converter layout) to the value Arrow takes.

Pure Python, no Spark: it runs in the decode tasks. The lake types are those of docs/LAND.md as far as a Connect
schema tells them (docs/DEBEZIUM.md, "Landing Debezium topics"): a Connect schema names the width of an integer
but not whether the column was unsigned, so an INT UNSIGNED that Debezium gives as int64 lands as BIGINT.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

MAX_DECIMAL_PRECISION = 38  # Spark's

Convert = Callable[[Any], Any]
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)


class UnknownField(ValueError):
    """A Connect field this job has no lake type for."""


def _times(factor: int) -> Convert:
    return lambda v: v * factor


def _bytes(v: str) -> bytes:
    return base64.b64decode(v)


def _zoned_micros(text: str) -> int:
    """ISO 8601 with a zone ('2024-02-29T10:11:12.5Z', '...+02:00') -> microseconds since the epoch."""
    return (dt.datetime.fromisoformat(text) - _EPOCH) // _MICROSECOND


def _bits(v: str) -> int:
    """io.debezium.data.Bits: little-endian bytes; BIT(64) values of 2^63 and above keep their 64 bits."""
    n = int.from_bytes(base64.b64decode(v), "little")
    return n - (1 << 64) if n >= 1 << 63 else n


def _unscaled(raw: str, scale: int) -> Decimal:
    """A Connect Decimal's bytes (base64 of the unscaled value, big-endian two's complement) -> the exact number
    (made from text: no context rounds it)."""
    return Decimal(f"{int.from_bytes(base64.b64decode(raw), 'big', signed=True)}E-{scale}")


def _decimal(scale: int) -> Convert:
    return lambda v: _unscaled(v, scale)


def _variable_decimal(v: dict[str, Any]) -> str:
    """io.debezium.data.VariableScaleDecimal {scale, value} -> the number's exact text."""
    return format(_unscaled(v["value"], v["scale"]), "f")


def _geometry(v: dict[str, Any]) -> bytes:
    """Debezium's geometry struct -> MySQL's internal form (little-endian SRID, then the WKB), as binlake lands
    GEOMETRY from the binlog."""
    return (v.get("srid") or 0).to_bytes(4, "little") + base64.b64decode(v["wkb"])


_NAMED: dict[str, tuple[str, Convert | None]] = {
    "io.debezium.time.Date": ("date", None),
    "org.apache.kafka.connect.data.Date": ("date", None),
    "io.debezium.time.Year": ("int", None),
    "io.debezium.time.Time": ("bigint", _times(1000)),  # milliseconds of the day -> microseconds (TIME: BIGINT)
    "org.apache.kafka.connect.data.Time": ("bigint", _times(1000)),
    "io.debezium.time.MicroTime": ("bigint", None),
    "io.debezium.time.NanoTime": ("bigint", lambda v: v // 1000),
    "io.debezium.time.Timestamp": ("timestamp_ntz", _times(1000)),  # DATETIME: civil time
    "org.apache.kafka.connect.data.Timestamp": ("timestamp_ntz", _times(1000)),
    "io.debezium.time.MicroTimestamp": ("timestamp_ntz", None),
    "io.debezium.time.NanoTimestamp": ("timestamp_ntz", lambda v: v // 1000),
    "io.debezium.time.ZonedTimestamp": ("timestamp", _zoned_micros),  # TIMESTAMP: an instant
    "io.debezium.data.Enum": ("string", None),
    "io.debezium.data.EnumSet": ("string", None),
    "io.debezium.data.Json": ("string", None),
    "io.debezium.data.Bits": ("bigint", _bits),
    "io.debezium.data.VariableScaleDecimal": ("string", _variable_decimal),
    "io.debezium.data.geometry.Point": ("binary", _geometry),
    "io.debezium.data.geometry.Geometry": ("binary", _geometry),
    "io.debezium.data.FloatVector": ("array<float>", None),
}
_PLAIN: dict[str, tuple[str, Convert | None]] = {
    "int8": ("tinyint", None), "int16": ("smallint", None), "int32": ("int", None), "int64": ("bigint", None),
    "float": ("float", None), "double": ("double", None), "boolean": ("boolean", None), "string": ("string", None),
    "bytes": ("binary", _bytes),
}


def lake_column(field: dict[str, Any]) -> tuple[str, Convert | None]:
    """A Connect field schema -> (lake type, converter of its non-null payload values; None: as it is)."""
    name = field.get("name")
    if name == "org.apache.kafka.connect.data.Decimal":
        parameters = field.get("parameters") or {}
        scale = int(parameters.get("scale", "0"))
        precision = int(parameters.get("connect.decimal.precision", str(MAX_DECIMAL_PRECISION)))
        if precision > MAX_DECIMAL_PRECISION:
            return "string", lambda v: format(_decimal(scale)(v), "f")  # the exact text, its scale kept
        return f"decimal({precision},{scale})", _decimal(scale)
    if name in _NAMED:
        return _NAMED[name]
    kind = field.get("type")
    if kind in _PLAIN:
        return _PLAIN[kind]
    raise UnknownField(f"field `{field.get('field')}` of Connect type {kind}"
                       + (f" ({name})" if name else "") + " has no lake type")


_SQL_INTS = ("tinyint", "smallint", "int", "bigint")


def default_sql(value: Any, dtype: str) -> str | None:
    """A column's default as its Connect schema gives it (the payload's JSON value), converted like its values
    (``lake_column``), as a Spark SQL expression of lake type ``dtype``; None: NULL. What the mirror gives rows
    written before the column was added (streaming_job/batch/defaults.py)."""
    if value is None:
        return None
    if dtype in _SQL_INTS or dtype == "boolean":
        return f"CAST({int(value)} AS {dtype})"
    if dtype in ("float", "double"):
        return f"CAST('{float(value)!r}' AS {dtype})"
    if dtype.startswith("decimal("):
        return f"CAST('{format(value, 'f')}' AS {dtype})"
    if dtype == "date":
        return f"DATE_FROM_UNIX_DATE({int(value)})"
    if dtype == "timestamp_ntz":
        return f"CAST(TIMESTAMP_MICROS({int(value)}) AS TIMESTAMP_NTZ)"
    if dtype == "timestamp":
        return f"TIMESTAMP_MICROS({int(value)})"
    if dtype == "binary":
        return f"X'{bytes(value).hex()}'"
    if dtype == "string":
        text = str(value)
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise UnknownField(f"a default of lake type {dtype}")
