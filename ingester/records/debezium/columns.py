"""Each column type as Debezium's MySQL/MariaDB connectors give it to Kafka Connect: a field schema (the
Connect JSON converter's layout) and a converter from the codec's value to the payload's value.

One small builder per binlog column type in a registry keyed by type code (``_BUILDERS``). The codec's
values are the input: integers, floats, DECIMAL and temporal values as the server prints them, text as
str, binary as bytes, BIT as an int, geometry as MySQL's internal bytes (SRID + WKB). What Debezium does
with each, and where binlake differs on purpose, is in docs/DEBEZIUM.md.
"""

from __future__ import annotations

import base64
import datetime as dt
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

import orjson

from ...codec.charsets import keeps_bytes
from ...codec.constants import ColumnType as T
from ...codec.errors import BinlogError
from ...codec.json_default import json_default
from ...codec.table_map import Column
from ...config import BigintMode, BinaryMode, DecimalMode, TimeMode


@dataclass(frozen=True)
class Modes:
    """Debezium's value-handling options (their defaults are Debezium's)."""

    decimal: DecimalMode = "precise"
    time: TimeMode = "adaptive_time_microseconds"
    bigint_unsigned: BigintMode = "long"
    binary: BinaryMode = "bytes"


Convert = Callable[[Any], Any]


@dataclass(frozen=True)
class ColumnCodec:
    schema: dict[str, Any]  # the field's Connect schema without its "field" name
    convert: Convert | None  # codec value (never None) -> payload value; None: the value as it is


Builder = Callable[[Column, Modes], ColumnCodec]
_BUILDERS: dict[int, Builder] = {}
_EPOCH = dt.date(1970, 1, 1).toordinal()


def _builds(*codes: int) -> Callable[[Builder], Builder]:
    def register(fn: Builder) -> Builder:
        for code in codes:
            _BUILDERS[code] = fn
        return fn
    return register


def column_codec(col: Column, modes: Modes, where: str) -> ColumnCodec:
    """The Connect schema and converter of one column (``where`` names the table in errors)."""
    build = _BUILDERS.get(col.type)
    if build is None:
        raise BinlogError(f"column {col.name} of {where}: type {col.type} has no Debezium encoding")
    return build(col, modes)


def _schema(kind: str, name: str | None = None, parameters: dict[str, str] | None = None) -> dict[str, Any]:
    """A field schema in JsonConverter's key order (type, optional, name, version, parameters); ``optional``
    is set per column by the caller."""
    schema: dict[str, Any] = {"type": kind, "optional": True}
    if name is not None:
        schema["name"] = name
        schema["version"] = 1
    if parameters:
        schema["parameters"] = parameters
    return schema


def _plain(kind: str, name: str | None = None) -> ColumnCodec:
    return ColumnCodec(_schema(kind, name), None)


# -- integers, floats, bits

@_builds(T.TINY)
def _tiny(col: Column, modes: Modes) -> ColumnCodec:
    return _plain("int16")  # TINYINT and TINYINT(1)/BOOLEAN (Debezium's snapshot view of BOOLEAN)


@_builds(T.SHORT)
def _short(col: Column, modes: Modes) -> ColumnCodec:
    return _plain("int32" if col.unsigned else "int16")


@_builds(T.INT24)
def _medium(col: Column, modes: Modes) -> ColumnCodec:
    return _plain("int32")


@_builds(T.LONG)
def _long(col: Column, modes: Modes) -> ColumnCodec:
    return _plain("int64" if col.unsigned else "int32")


@_builds(T.LONGLONG)
def _longlong(col: Column, modes: Modes) -> ColumnCodec:
    if not col.unsigned:
        return _plain("int64")
    if modes.bigint_unsigned == "precise":
        return ColumnCodec(_schema("bytes", "org.apache.kafka.connect.data.Decimal",
                                   {"scale": "0", "connect.decimal.precision": "20"}), _unscaled_bytes)
    return ColumnCodec(_schema("int64"), _wrap64)  # "long": 2^63 and above wrap negative, as in Java


def _wrap64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


@_builds(T.FLOAT)
def _float(col: Column, modes: Modes) -> ColumnCodec:
    return ColumnCodec(_schema("float"), shortest_float32)


@_builds(T.DOUBLE)
def _double(col: Column, modes: Modes) -> ColumnCodec:
    return _plain("double")


_F32 = struct.Struct("<f")


def shortest_float32(value: float) -> float:
    """The double whose shortest text is the float32's shortest (3.14, not 3.140000104904175), as Java's
    Float.toString writes a FLOAT column's value."""
    stored = _F32.pack(value)
    for digits in range(6, 10):
        candidate = float(f"{value:.{digits}g}")
        if _F32.pack(candidate) == stored:
            return candidate
    return value


@_builds(T.BIT)
def _bit(col: Column, modes: Modes) -> ColumnCodec:
    bits = (col.meta >> 8) * 8 + (col.meta & 0xFF)
    if bits <= 1:
        return ColumnCodec(_schema("boolean"), bool)
    size = (bits + 7) // 8  # bytes whatever binary.handling.mode says
    return ColumnCodec(_schema("bytes", "io.debezium.data.Bits", {"length": str(bits)}),
                       lambda value: base64.b64encode(value.to_bytes(size, "little")).decode())


@_builds(T.YEAR)
def _year(col: Column, modes: Modes) -> ColumnCodec:
    # The binlog's byte 0 (the zero year) is 1900 + 0 to Debezium's reader.
    return ColumnCodec(_schema("int32", "io.debezium.time.Year"), lambda value: value or 1900)


# -- DECIMAL

@_builds(T.NEWDECIMAL)
def _decimal(col: Column, modes: Modes) -> ColumnCodec:
    precision, scale = col.meta >> 8, col.meta & 0xFF
    if modes.decimal == "double":
        return ColumnCodec(_schema("double"), float)
    if modes.decimal == "string":
        return ColumnCodec(_schema("string"), None)  # the server's text, its scale kept (BigDecimal's plain string)
    return ColumnCodec(_schema("bytes", "org.apache.kafka.connect.data.Decimal",
                               {"scale": str(scale), "connect.decimal.precision": str(precision)}),
                       lambda text: _unscaled_bytes(int(text.replace(".", ""))))


def _unscaled_bytes(unscaled: int) -> str:
    """A Connect Decimal's value: the unscaled integer as minimal big-endian two's complement (Java's
    BigInteger.toByteArray), base64 as JsonConverter writes bytes."""
    size = (unscaled + (unscaled < 0)).bit_length() // 8 + 1
    return base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode()


# -- temporal: the codec gives the server's text

def _zero(text: str) -> bool:
    """A date with a zero year, month or day, which Debezium's binlog reader reads as null."""
    return text[0:4] == "0000" or text[5:7] == "00" or text[8:10] == "00"


def _days(text: str) -> int:
    return dt.date(int(text[0:4]), int(text[5:7]), int(text[8:10])).toordinal() - _EPOCH


def _micros_of_day(clock: str) -> int:
    """'hh:mm:ss[.ffffff]' -> microseconds."""
    hms, _, frac = clock.partition(".")
    h, m, s = hms.split(":")
    return ((int(h) * 60 + int(m)) * 60 + int(s)) * 1_000_000 + int((frac + "000000")[:6])


_EPOCH_DT = dt.datetime(1970, 1, 1)
_MICROSECOND = dt.timedelta(microseconds=1)


def _datetime_micros(text: str) -> int:
    """'YYYY-MM-DD hh:mm:ss[.f]' (1 to 6 fraction digits) read as UTC -> microseconds since the epoch."""
    return (dt.datetime.fromisoformat(text) - _EPOCH_DT) // _MICROSECOND


def _nullable(col: Column, fallback: Any, convert: Convert) -> Convert:
    """Debezium gives a zero date null in a nullable column, else the type's fallback (the epoch)."""
    def zero_checked(text: str) -> Any:
        if _zero(text):
            return None if col.nullable else fallback
        return convert(text)
    return zero_checked


@_builds(T.DATE, T.NEWDATE)
def _date(col: Column, modes: Modes) -> ColumnCodec:
    name = "org.apache.kafka.connect.data.Date" if modes.time == "connect" else "io.debezium.time.Date"
    return ColumnCodec(_schema("int32", name), _nullable(col, 0, _days))


@_builds(T.TIME, T.TIME2)
def _time(col: Column, modes: Modes) -> ColumnCodec:
    if modes.time == "connect":  # a time of day: Debezium gives other durations null (or 0 when NOT NULL)
        def time_of_day(text: str) -> int | None:
            micros = _signed_time(text)
            if 0 <= micros < 86_400_000_000:
                return micros // 1000
            return None if col.nullable else 0
        return ColumnCodec(_schema("int32", "org.apache.kafka.connect.data.Time"), time_of_day)
    return ColumnCodec(_schema("int64", "io.debezium.time.MicroTime"), _signed_time)


def _signed_time(text: str) -> int:
    """'-838:59:59.000000' -> signed microseconds (hours beyond 24 kept, as Debezium's Duration does)."""
    if text.startswith("-"):
        return -_micros_of_day(text[1:])
    return _micros_of_day(text)


@_builds(T.DATETIME, T.DATETIME2)
def _datetime(col: Column, modes: Modes) -> ColumnCodec:
    fsp = col.meta if col.type == T.DATETIME2 else 0
    if modes.time == "connect":
        return ColumnCodec(_schema("int64", "org.apache.kafka.connect.data.Timestamp"),
                           _nullable(col, 0, lambda text: _datetime_micros(text) // 1000))
    if fsp <= 3:
        return ColumnCodec(_schema("int64", "io.debezium.time.Timestamp"),
                           _nullable(col, 0, lambda text: _datetime_micros(text) // 1000))
    return ColumnCodec(_schema("int64", "io.debezium.time.MicroTimestamp"), _nullable(col, 0, _datetime_micros))


@_builds(T.TIMESTAMP, T.TIMESTAMP2)
def _timestamp(col: Column, modes: Modes) -> ColumnCodec:
    fsp = col.meta if col.type == T.TIMESTAMP2 else 0

    def zoned(text: str) -> str:  # the codec's UTC text -> ISO 8601 with exactly fsp fraction digits
        if text.startswith("0000"):  # the zero timestamp is epoch second 0
            text = "1970-01-01 00:00:00" + ("." + "0" * fsp if fsp else "")
        return f"{text[:10]}T{text[11:]}Z"

    return ColumnCodec(_schema("string", "io.debezium.time.ZonedTimestamp"), zoned)


# -- text, binary, ENUM, SET, JSON, geometry

def _binary_schema(modes: Modes) -> dict[str, Any]:
    return _schema("bytes" if modes.binary == "bytes" else "string")


def _binary_encoder(modes: Modes) -> Callable[[bytes], str]:
    if modes.binary == "hex":
        return bytes.hex
    if modes.binary == "base64-url-safe":
        return lambda raw: base64.urlsafe_b64encode(raw).decode()
    return lambda raw: base64.b64encode(raw).decode()  # bytes (JsonConverter's base64) and base64


def _text_or_bytes(col: Column, modes: Modes, is_mariadb: bool = True) -> ColumnCodec:
    if keeps_bytes(col.collation, is_mariadb):
        return ColumnCodec(_binary_schema(modes), _binary_encoder(modes))
    return _plain("string")


@_builds(T.VARCHAR, T.VAR_STRING, T.STRING, T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB,
         T.VARCHAR_COMPRESSED, T.BLOB_COMPRESSED)
def _string(col: Column, modes: Modes) -> ColumnCodec:
    return _text_or_bytes(col, modes)


def _label(value: str | int) -> str:
    """An ENUM/SET value: its label(s), or without labels (no metadata, no schema history) its index or mask as
    text, the field being a string."""
    return value if isinstance(value, str) else str(value)


@_builds(T.ENUM)
def _enum(col: Column, modes: Modes) -> ColumnCodec:
    return ColumnCodec(_schema("string", "io.debezium.data.Enum", {"allowed": ",".join(col.enum_values or ())}),
                       _label)


@_builds(T.SET)
def _set(col: Column, modes: Modes) -> ColumnCodec:
    return ColumnCodec(_schema("string", "io.debezium.data.EnumSet", {"allowed": ",".join(col.set_values or ())}),
                       _label)


@_builds(T.JSON)
def _json(col: Column, modes: Modes) -> ColumnCodec:
    # MySQL's binary JSON, written compact as Debezium's binlog reader renders it
    return ColumnCodec(_schema("string", "io.debezium.data.Json"),
                       lambda doc: doc if isinstance(doc, str) else orjson.dumps(doc, default=json_default).decode())


_POINT = 1  # the table map's geometry type of a POINT column


@_builds(T.GEOMETRY)
def _geometry(col: Column, modes: Modes) -> ColumnCodec:
    if col.geometry_type == _POINT:
        schema = {"type": "struct", "fields": [
            {"type": "double", "optional": False, "field": "x"}, {"type": "double", "optional": False, "field": "y"},
            {"type": "bytes", "optional": True, "field": "wkb"}, {"type": "int32", "optional": True, "field": "srid"}],
            "optional": True, "name": "io.debezium.data.geometry.Point", "version": 1, "doc": "Geometry (POINT)"}
        return ColumnCodec(schema, _point)
    schema = {"type": "struct", "fields": [
        {"type": "bytes", "optional": False, "field": "wkb"}, {"type": "int32", "optional": True, "field": "srid"}],
        "optional": True, "name": "io.debezium.data.geometry.Geometry", "version": 1, "doc": "Geometry"}
    return ColumnCodec(schema, _geometry_value)


def _srid_wkb(raw: bytes) -> tuple[int | None, bytes]:
    """MySQL's internal geometry: a little-endian SRID, then the WKB; SRID 0 is no SRID."""
    srid = int.from_bytes(raw[:4], "little")
    return (srid or None), raw[4:]


def _geometry_value(raw: bytes) -> dict[str, Any]:
    srid, wkb = _srid_wkb(raw)
    return {"wkb": base64.b64encode(wkb).decode(), "srid": srid}


_XY_LE, _XY_BE = struct.Struct("<dd"), struct.Struct(">dd")


def _point(raw: bytes) -> dict[str, Any]:
    srid, wkb = _srid_wkb(raw)
    x, y = (_XY_LE if wkb[0] == 1 else _XY_BE).unpack_from(wkb, 5)
    return {"x": x, "y": y, "wkb": base64.b64encode(wkb).decode(), "srid": srid}


@_builds(T.VECTOR)
def _vector(col: Column, modes: Modes) -> ColumnCodec:
    return ColumnCodec({"type": "array", "items": {"type": "float", "optional": False}, "optional": True,
                        "name": "io.debezium.data.FloatVector", "version": 1},
                       lambda values: [shortest_float32(v) for v in values])


@_builds(T.NULL)
def _null(col: Column, modes: Modes) -> ColumnCodec:
    return _plain("string")


# -- a NOT NULL column's DEFAULT (the schema history's literal) as its field's Connect default

_INTEGERS = frozenset((T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.YEAR, T.BIT))
_DATE = re.compile(r"\d{4}-\d\d-\d\d")
_TIME = re.compile(r"-?\d{1,3}:\d\d:\d\d(\.\d{1,6})?")
_DATETIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})?")
_TEXT_FORMS: dict[int, re.Pattern[str]] = {  # temporal literals in the server's own form, as the codec gives values
    T.DATE: _DATE, T.NEWDATE: _DATE, T.TIME: _TIME, T.TIME2: _TIME, T.DATETIME: _DATETIME, T.DATETIME2: _DATETIME}
_TEXTS = frozenset((T.VARCHAR, T.VAR_STRING, T.STRING, T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB,
                    T.VARCHAR_COMPRESSED, T.BLOB_COMPRESSED))


def connect_default(col: Column, codec: ColumnCodec, is_mariadb: bool = True) -> Any:
    """The field's Connect default (as its values are written) of a column's literal DEFAULT (``col.default``,
    a NOT NULL column's), as Debezium gives it; None where binlake gives none: TIMESTAMP (a literal of the DDL
    session's time zone, which the history does not know), binary columns, values that are not the type's."""
    value = _codec_value(col, col.default, is_mariadb)
    if value is None:
        return None
    return value if codec.convert is None else codec.convert(value)


def _codec_value(col: Column, default: str | int | None, is_mariadb: bool) -> Any:
    """A literal DEFAULT as the codec gives the column's values (int, float, the server's text, str)."""
    if default is None:
        return None
    text = str(default)
    try:
        if col.type in _INTEGERS:
            return int(Decimal(text).to_integral_value(ROUND_HALF_UP))
        if col.type in (T.FLOAT, T.DOUBLE):
            return float(text)
        if col.type == T.NEWDECIMAL:
            return format(Decimal(text).quantize(Decimal(1).scaleb(-(col.meta & 0xFF)), ROUND_HALF_UP), "f")
    except (InvalidOperation, ValueError):
        return None
    form = _TEXT_FORMS.get(col.type)
    if form is not None:
        return text if form.fullmatch(text) else None
    if col.type in _TEXTS:
        return None if keeps_bytes(col.collation, is_mariadb) else text
    if col.type == T.ENUM:
        return text if col.enum_values is None or text in col.enum_values else None
    if col.type == T.SET:
        labels = col.set_values or []
        members = [m for m in text.split(",") if m]
        if any(m not in labels for m in members):
            return None
        return ",".join(label for label in labels if label in members)  # the server's order
    return None
