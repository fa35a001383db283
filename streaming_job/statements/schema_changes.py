"""Schema changes applied at their statement (docs/LAND.md, "Schema changes"): the format-independent plan of
an ``alter`` table statement (ingester/records/statement.py) against a table's lake columns, and the value
conversions of a column whose type changed as the server converts them on ALTER TABLE ... MODIFY.

A column's new value is the server's ``Field::store`` of its old value in the new type, with the session's
``sql_mode`` non-strict (a strict ALTER succeeds only where every value converts exactly, so the non-strict
rules give the same values there). The rules, each measured on MariaDB 10.11 and MySQL 8.0.31 (tests/integration/
test_schema_conversions.py compares them with each server's SELECT after the ALTER); ``Statement.mariadb`` picks
the server's rule where the two differ:

- numbers: clamped to the new type's range; DECIMAL -> integer and DECIMAL -> DECIMAL round half away from
  zero, FLOAT/DOUBLE -> integer to the nearest even (``rint``), FLOAT/DOUBLE -> DECIMAL from the number's
  shortest decimal text (FLOAT: 6 significant digits) rounded half away from zero;
- text -> integer: MariaDB takes the leading integer (``' 1.5'`` 1, ``'1e3'`` 1, ``'abc'`` 0) through a signed
  64-bit value, MySQL the leading number rounded (``' 1.5'`` 2, ``'1e3'`` 1000); text -> DECIMAL/FLOAT/DOUBLE
  the leading number with its exponent (``'1.2.3'`` 1.2, ``''`` 0);
- numbers -> text: integers and DECIMAL as written, DOUBLE its shortest round-trip digits and FLOAT 6 digits, in
  the server's ``my_gcvt`` layout (``1e20``, ``0.000012345``, ``1.2345678901234568e17``);
- text <-> binary: the text's bytes in its old charset (latin1 is cp1252-like: ingester/codec/charsets.py),
  BINARY(n) padded with zero bytes; bytes read in the new charset, an invalid sequence of a multi-byte charset a
  ``?`` a byte (MariaDB) or the text cut before it (MySQL), a single-byte charset keeping every byte (read as the
  codec reads it); text into another charset: characters it lacks become ``?``; cut to the new length;
- ENUM/SET relabelled: by label (case-insensitively under a ``_ci`` collation, the new definition's spelling),
  a label the new type lacks is ``''`` (ENUM) or left out (SET, the members in the new order); text into
  ENUM/SET the same; integers into ENUM/SET by index/bits (MySQL: bits past a SET's members give ``''``),
  ENUM/SET into numbers their index/bits;
- dates and times: fractional digits cut (MariaDB truncates; MySQL rounds, unless TIME_TRUNCATE_FRACTIONAL, text's
  digits past the sixth by the seventh), DATETIME -> DATE its day (MySQL: rounded to the second first), DATE ->
  DATETIME midnight, DATETIME -> TIME its time of day (MySQL: then rounded), TIME -> DATETIME the
  statement's day (CURRENT_DATE in its session time zone) plus the time, DATETIME <-> TIMESTAMP in the
  statement's session time zone; text in the canonical layouts (``YYYY-MM-DD[ hh:mm:ss[.f]]``, ``YYYYMMDD``,
  ``YYYYMMDDhhmmss``) parsed, an invalid date the zero date (null in the lake); integers ``YYYYMMDD[hhmmss]``;
- JSON: MariaDB's JSON is LONGTEXT, so JSON <-> text keeps the text; MySQL's JSON as text is the document in the
  server's layout (jsonb.to_json_text), text as JSON the parsed document as the lake holds it;
- YEAR as text: four digits (``'0000'``).

What only the server knows is ``Unknown``: TIMESTAMP <-> local times in a session time zone the binlog names only
as ``SYSTEM``, text in other date layouts, MySQL's binary JSON <-> anything but text, dates into numbers, BIT <-> text,
spatial and VECTOR columns, and text whose old charset the lake does not know (no schema history: non-ASCII
text into binary). The column's old rows are then null in the mirror and the job says so in one warning line
naming ``binlake snapshot --tables db.table``, which reads the rows again.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any

import orjson

from ingester.codec.charsets import BINARY_COLLATION, MAX_CHAR_BYTES, PYTHON_CODEC, charset_for, decoder_for
from ingester.codec.constants import ColumnType as T
from ingester.codec.jsonb import to_json_text
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
_EPOCH = datetime.datetime(1970, 1, 1)
_UTC = datetime.UTC
_DAY_US = 86_400_000_000
_WIDE = Context(prec=100)  # DECIMAL has at most 65 digits


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


def _int_bounds(col: Column) -> tuple[int, int]:
    bits = _INT_RANGE[col.type]
    if col.unsigned:
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _decimal_shape(col: Column) -> tuple[int, int]:
    return col.meta >> 8, col.meta & 0xFF


def _charset(col: Column, mariadb: bool) -> str | None:
    return None if col.collation is None else charset_for(col.collation, mariadb)


def same_values(old: Column, new: Column, mariadb: bool = True) -> bool:
    """Whether every value of ``old`` is the same value of ``new`` (no conversion can change one): the same
    family and nothing that cuts, clamps, relabels or re-encodes."""
    ok, nk = kind(old, mariadb), kind(new, mariadb)
    if ok != nk:
        return (ok, nk) in (("date", "datetime"), ("float", "double"))
    if ok == "int":
        lo, hi = _int_bounds(old)
        nlo, nhi = _int_bounds(new)
        return nlo <= lo and hi <= nhi
    if ok == "decimal":
        (p, s), (np_, ns) = _decimal_shape(old), _decimal_shape(new)
        return ns >= s and np_ - ns >= p - s
    if ok == "float":
        return True
    if ok in ("datetime", "timestamp", "time"):
        return fsp(new) >= fsp(old)
    if ok in ("enum", "set"):
        labels = (old.enum_values if ok == "enum" else old.set_values) or []
        new_labels = (new.enum_values if ok == "enum" else new.set_values) or []
        return new_labels[:len(labels)] == labels
    if ok == "text":
        return _charset(old, mariadb) == _charset(new, mariadb) and _max_chars(new, mariadb) >= _max_chars(old, mariadb)
    if ok == "binary":
        return (new.type != T.STRING or old.type == T.STRING) and _max_bytes(new) >= _max_bytes(old)
    return ok == nk


def _max_bytes(col: Column) -> int:
    if col.type in (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.BLOB_COMPRESSED):
        return _BLOB_BYTES.get(col.meta, 4_294_967_295)
    return col.max_length


def _max_chars(col: Column, mariadb: bool) -> int:
    charset = _charset(col, mariadb) or "utf8mb4"
    return _max_bytes(col) // MAX_CHAR_BYTES.get(charset, 1)


# --- old lake value -> the server's value ---------------------------------------------------------------------

def _source(col: Column, mariadb: bool) -> Callable[[Any], Any]:
    """The old column's lake value (as Arrow's to_pylist gives it) as the value the server had."""
    k = kind(col, mariadb)
    if k == "bit":
        return lambda v: v + (1 << 64) if v < 0 else v
    if k == "int":
        return int
    if k == "decimal":
        return lambda v: v if isinstance(v, Decimal) else Decimal(v)
    if k == "text":
        return lambda v: v if isinstance(v, str) else bytes(v).decode("utf-8", "replace")
    if k == "binary":
        return bytes
    return lambda v: v


# --- the server's value -> the new column's lake value ---------------------------------------------------------

def converter(old: Column, new: Column, stmt: Statement) -> Callable[[Any], Any]:
    """old lake value -> new lake value as the server's ALTER TABLE converted it; None stays None (a NULL), and
    ``ZERO`` stands for an old zero date. Raises Unknown for a pair only the server knows; the function it
    returns may raise Unknown for a value."""
    mariadb = stmt.mariadb
    ok, nk = kind(old, mariadb), kind(new, mariadb)
    if "other" in (ok, nk):
        raise Unknown(f"{_type_name(old)} -> {_type_name(new)}")
    if ok == "bit" or nk == "bit":
        if ok == nk or (nk == "int" and ok == "bit"):
            return _bits_to_int(new) if nk == "int" else (lambda v: v)
        raise Unknown(f"{_type_name(old)} -> {_type_name(new)}")
    if "json" in (ok, nk) and not mariadb and ok != nk:
        return _mysql_json(old, new, ok, nk)
    if ok == "json":
        ok = "text"
    if nk == "json":
        nk = "text"
    if "year" in (ok, nk):
        if ok == nk:
            return lambda v: v
        if ok == "year" and nk in ("int", "decimal", "float", "double"):
            ok = "int"
        elif ok == "year" and nk in ("text", "binary"):
            pass  # four digits: 0 is '0000'
        else:
            raise Unknown(f"{_type_name(old)} -> {_type_name(new)}")
    local = {"date", "datetime", "time", "text", "binary", "enum", "set", "int", "decimal"}
    if stmt.offset is None and (((ok == "timestamp") != (nk == "timestamp") and {ok, nk} - {"timestamp"} <= local)
                                or (ok == "time" and nk in ("date", "datetime", "timestamp"))):
        raise Unknown(f"{_type_name(old)} -> {_type_name(new)}: local time of the session time zone SYSTEM")
    read = _source(old, mariadb)
    store = _store(old, new, ok, nk, stmt)

    def convert(v: Any) -> Any:
        if v is None or v is ZERO:
            return store(ZERO) if v is ZERO else None
        return store(read(v))

    return convert


def vector_converter(old: Column, new: Column, stmt: Statement) -> Callable[[Any], Any] | None:
    """``converter``'s conversion of a whole Arrow array at once where Arrow's kernels give the same values (UTF-8
    text into VARBINARY/BLOB: its bytes, cut to the new length); None: value by value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ok, nk = kind(old, stmt.mariadb), kind(new, stmt.mariadb)
    if ok == "text" and nk == "binary" and new.type != T.STRING and _codec(_charset(old, stmt.mariadb)) == "utf-8":
        limit = _max_bytes(new)
        return lambda array: pc.binary_slice(array.cast(pa.binary()), 0, limit) if limit < 1 << 31 \
            else array.cast(pa.binary())
    if ok == nk == "int":
        lo, hi = _int_bounds(new)
        d20 = pa.decimal128(20, 0)
        low, high = pa.scalar(Decimal(lo), d20), pa.scalar(Decimal(hi), d20)
        return lambda array: pc.min_element_wise(pc.max_element_wise(array.cast(d20), low), high)
    if ok == nk == "decimal" and old.meta & 0xFF <= 38 and (old.meta >> 8) <= 38 and (new.meta >> 8) <= 38:
        os, (p, s) = _decimal_shape(old)[1], _decimal_shape(new)
        wide = pa.decimal128(38, max(os, s))
        most = Decimal(10) ** (p - s) - Decimal(1).scaleb(-s)
        least = Decimal(0) if new.unsigned else -most

        def rescale(array: Any) -> Any:
            array = array.cast(wide)  # first: a rounding up past the old precision must not overflow
            if s < os:
                array = pc.round(array, ndigits=s, round_mode="half_towards_infinity")
            bounded = pc.min_element_wise(pc.max_element_wise(array, pa.scalar(least, wide)), pa.scalar(most, wide))
            return bounded.cast(pa.decimal128(p, s))

        return rescale
    return None


def _mysql_json(old: Column, new: Column, ok: str, nk: str) -> Callable[[Any], Any]:
    """MySQL's binary JSON <-> text. The lake holds a JSON document as compact JSON text (lake_types._json: the
    decoded document, its objects' keys in the server's order); the server's text of it is its own layout
    (``{"a": 1, "b": [1, 2]}``, jsonb.to_json_text), and text into JSON the parsed document (keys sorted by
    length, then bytes; the last of duplicate keys; integers past 64 bits doubles)."""
    if ok == "json" and nk == "text":
        fit = _fit_text(new, False)
        return lambda v: None if v is None or v is ZERO else fit(to_json_text(_lake_json(v)))
    if ok == "text" and nk == "json":
        return lambda v: None if v is None or v is ZERO else _json_document(v)
    raise Unknown(f"{_type_name(old)} -> {_type_name(new)} (MySQL's binary JSON)")


def _lake_json(text: str) -> Any:
    """A JSON column's lake text as the codec's document: a number with digits a double does not print
    (json_default writes DECIMAL with its stored digits) a Decimal."""
    def number(token: str) -> float | Decimal:
        f = float(token)
        return f if orjson.dumps(f).decode() == token else Decimal(token)

    return json.loads(text, parse_float=number)


def _json_document(text: Any) -> str:
    """Text into MySQL's JSON as the lake holds the document the server stored; text that is not JSON the server
    refuses (the ALTER fails), so it never gets here."""
    def key(name: str) -> tuple[int, bytes]:
        raw = name.encode("utf-8")
        return len(raw), raw

    def stored(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: stored(v[k]) for k in sorted(v, key=key)}
        if isinstance(v, list):
            return [stored(x) for x in v]
        if isinstance(v, int) and not isinstance(v, bool) and not -(1 << 63) <= v < 1 << 64:
            return float(v)
        return v

    try:
        document = json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
    except ValueError as exc:
        raise Unknown(f"text that is not JSON as MySQL's JSON: {exc}") from None
    return orjson.dumps(stored(document)).decode()


def _type_name(col: Column) -> str:
    return T(col.type).name if col.type in T._value2member_map_ else str(col.type)


def _bits_to_int(new: Column) -> Callable[[Any], Any]:
    lo, hi = _int_bounds(new)
    return lambda v: min(max(v + (1 << 64) if v < 0 else v, lo), hi)


def _store(old: Column, new: Column, ok: str, nk: str, stmt: Statement) -> Callable[[Any], Any]:
    mariadb = stmt.mariadb
    if nk == "int":
        lo, hi = _int_bounds(new)
        integer = _as_integer(old, ok, mariadb)
        return lambda v: min(max(integer(v), lo), hi)
    if nk == "decimal":
        p, s = _decimal_shape(new)
        quantum = Decimal(1).scaleb(-s)
        most = Decimal(10) ** (p - s) - quantum
        exact = _as_decimal(old, ok, mariadb)
        least = Decimal(0) if new.unsigned else -most

        def to_decimal(v: Any) -> Decimal:
            d = exact(v)
            if not d.is_finite():
                return Decimal(0)
            if d > most or d < least:
                return most if d > most else least
            return d.quantize(quantum, ROUND_HALF_UP, _WIDE)

        return to_decimal
    if nk in ("float", "double"):
        real = _as_float(old, ok, mariadb)
        top = 3.4028234663852886e38 if nk == "float" else 1.7976931348623157e308

        def to_float(v: Any) -> float:
            f = real(v)
            f = min(max(f, -top), top)
            return max(f, 0.0) if new.unsigned else f

        return to_float
    if nk == "text":
        text = _as_text(old, ok, stmt)
        fit = _fit_text(new, mariadb)
        return lambda v: fit(text(v))
    if nk == "binary":
        raw = _as_bytes(old, ok, stmt)
        fit_bytes = _fit_bytes(new)
        return lambda v: fit_bytes(raw(v))
    if nk in ("enum", "set"):
        return _as_labels(old, new, ok, nk, stmt)
    if nk in ("date", "datetime", "timestamp", "time"):
        return _as_temporal(old, new, ok, nk, stmt)
    raise Unknown(f"{_type_name(old)} -> {_type_name(new)}")


def _labels_of(col: Column, k: str) -> list[str]:
    return list((col.enum_values if k == "enum" else col.set_values) or [])


def _as_integer(old: Column, ok: str, mariadb: bool) -> Callable[[Any], int]:
    if ok == "int":
        return int
    if ok == "decimal":
        return lambda d: int(d.quantize(Decimal(1), ROUND_HALF_UP, _WIDE))
    if ok in ("float", "double"):
        return lambda f: round(f) if abs(f) != float("inf") else (1 << 64 if f > 0 else -(1 << 64))
    if ok in ("text", "binary"):
        if mariadb:
            return lambda v: _clamp64(_leading_integer(v))
        return lambda v: int(_leading_decimal(v).quantize(Decimal(1), ROUND_HALF_UP, _WIDE))
    if ok in ("enum", "set"):
        labels = _labels_of(old, ok)
        return lambda v: _index(v, labels) if ok == "enum" else _mask(v, labels)
    raise Unknown(f"{_type_name(old)} -> an integer")


def _clamp64(n: int) -> int:
    return min(max(n, -(1 << 63)), (1 << 63) - 1)


def _as_decimal(old: Column, ok: str, mariadb: bool) -> Callable[[Any], Decimal]:
    if ok == "int":
        return Decimal
    if ok == "decimal":
        return lambda d: d
    if ok in ("float", "double"):  # a FLOAT as the double it is
        return lambda f: Decimal(repr(f)) if f == f and abs(f) != float("inf") else Decimal(0)
    if ok in ("text", "binary"):
        return _leading_decimal
    if ok in ("enum", "set"):
        integer = _as_integer(old, ok, mariadb)
        return lambda v: Decimal(integer(v))
    raise Unknown(f"{_type_name(old)} -> DECIMAL")


def _as_float(old: Column, ok: str, mariadb: bool) -> Callable[[Any], float]:
    if ok in ("int", "decimal", "float", "double"):
        return float
    if ok in ("text", "binary"):
        return lambda v: float(_leading_decimal(v, exact=False))
    if ok in ("enum", "set"):
        integer = _as_integer(old, ok, mariadb)
        return lambda v: float(integer(v))
    raise Unknown(f"{_type_name(old)} -> FLOAT/DOUBLE")


_LEADING_INT = re.compile(rb"[ \t\n\r\f\v]*([+-]?)(\d*)")
_LEADING_NUMBER = re.compile(rb"[ \t\n\r\f\v]*([+-]?(?:\d+\.?\d*|\.\d+))([eE][+-]?\d+)?")


def _ascii(v: str | bytes) -> bytes:
    return v if isinstance(v, bytes) else v.encode("utf-8", "replace")


def _leading_integer(v: str | bytes) -> int:
    m = _LEADING_INT.match(_ascii(v))
    assert m is not None  # the pattern matches the empty string
    digits = m.group(2)
    return 0 if not digits else int(m.group(1) + digits)


def _leading_decimal(v: str | bytes, exact: bool = True) -> Decimal:
    m = _LEADING_NUMBER.match(_ascii(v))
    if m is None:
        return Decimal(0)
    text = (m.group(1) + (m.group(2) or b"")).decode()
    try:
        d = Decimal(text)
    except InvalidOperation:
        return Decimal(0)
    if exact and abs(d.adjusted()) > 400:  # beyond any column: clamped by the caller
        return Decimal("1e400").copy_sign(d) if d.adjusted() > 0 else Decimal(0)
    return d


def _index(v: str, labels: list[str]) -> int:
    low = [x.lower() for x in labels]
    return low.index(v.lower()) + 1 if v.lower() in low else 0


def _mask(v: str, labels: list[str]) -> int:
    low = [x.lower() for x in labels]
    bits = 0
    for member in v.split(",") if v else []:
        if member.lower() in low:
            bits |= 1 << low.index(member.lower())
    return bits


def _float_digits(f: float, digits: int) -> str:
    """A FLOAT's value to ``digits`` significant digits (as the server prints a FLOAT), trailing zeros cut."""
    return f"{f:.{digits - 1}e}"


def gcvt(f: float, single: bool) -> str:
    """A FLOAT (``single``: 6 significant digits) or DOUBLE (its shortest round-trip digits) as the server's
    ``my_gcvt`` writes it: fixed notation while the decimal point is within 15 digits of the first, else
    ``<d>[.<ddd>]e<exp>``."""
    if f != f:
        return "nan"
    if f == 0:
        return "-0" if str(f).startswith("-") else "0"
    d = Decimal(_float_digits(f, 6) if single else repr(float(f)))
    sign, digits_t, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digits_t)).rstrip("0") or "0"
    decpt = len(digits_t) + exponent  # the decimal point's place after the first digit's
    neg = "-" if sign else ""
    n = len(digits)
    if -14 <= decpt and (decpt <= 15 or n > decpt):  # MAX_DECPT_FOR_F_FORMAT = DBL_DIG
        if decpt <= 0:
            return f"{neg}0.{'0' * -decpt}{digits}"
        if decpt >= n:
            return f"{neg}{digits}{'0' * (decpt - n)}"
        return f"{neg}{digits[:decpt]}.{digits[decpt:]}"
    mantissa = digits[0] + ("." + digits[1:] if n > 1 else "")
    return f"{neg}{mantissa}e{decpt - 1}"


def _as_text(old: Column, ok: str, stmt: Statement) -> Callable[[Any], str | bytes]:
    """The old value as the server's text (``str``; ``bytes`` of a binary column, read in the new charset)."""
    if ok == "int":
        return str
    if ok == "year":
        return lambda v: f"{v:04d}"
    if ok == "decimal":
        scale = _decimal_shape(old)[1]
        return lambda d: f"{d:.{scale}f}"
    if ok in ("float", "double"):
        single = ok == "float"
        return lambda f: gcvt(f, single)
    if ok in ("text", "enum", "set"):
        return lambda v: v
    if ok == "binary":
        return lambda v: v
    if ok in ("date", "datetime", "timestamp", "time"):
        digits = fsp(old)
        return lambda v: _temporal_text(v, ok, digits, stmt)
    raise Unknown(f"{_type_name(old)} -> text")


def _temporal_text(v: Any, k: str, digits: int, stmt: Statement) -> str:
    if v is ZERO:
        return {"date": "0000-00-00", "time": "00:00:00"}.get(k, "0000-00-00 00:00:00") + (
            "." + "0" * digits if digits and k != "date" else "")
    if k == "date":
        return v.isoformat()
    if k == "time":
        sign = "-" if v < 0 else ""
        us = abs(v)
        s, frac = divmod(us, 1_000_000)
        text = f"{sign}{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
        return text + (f".{frac:06d}"[:digits + 1] if digits else "")
    if k == "timestamp":
        v = _local(v, stmt)
    text = v.strftime("%Y-%m-%d %H:%M:%S")
    return text + (f".{v.microsecond:06d}"[:digits + 1] if digits else "")


def _local(v: datetime.datetime, stmt: Statement) -> datetime.datetime:
    """A TIMESTAMP (an aware UTC datetime) as the session's local time."""
    if stmt.offset is None:
        raise Unknown("a TIMESTAMP as local time of the session time zone SYSTEM")
    return v.astimezone(_UTC).replace(tzinfo=None) + datetime.timedelta(microseconds=stmt.offset)


def _codec(charset: str | None) -> str | None:
    return None if charset is None else PYTHON_CODEC.get(charset)


def _fit_text(new: Column, mariadb: bool) -> Callable[[str | bytes], str]:
    """Text (or bytes of a binary column) as the new text column holds it: in its charset, cut to its length."""
    charset = _charset(new, mariadb)
    codec = _codec(charset)
    if charset is None or codec is None:
        raise Unknown("text of a charset the lake does not know")
    blob = new.type in (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB)
    limit_chars = None if blob else _max_chars(new, mariadb)
    limit_bytes = _max_bytes(new)
    bmp_only = charset in ("utf8mb3", "ucs2")
    # Bytes into a single-byte charset are kept as they are (no sequence is invalid): the lake reads them as the
    # codec does (a byte the charset leaves undefined U+FFFD)
    single_byte = decoder_for(new.collation, mariadb) if MAX_CHAR_BYTES.get(charset, 1) == 1 else None

    def fit(v: str | bytes) -> str:
        if isinstance(v, bytes) and single_byte is not None:
            read = single_byte(v[:limit_bytes])  # a byte a character
            text = read if isinstance(read, str) else read.decode(codec, "replace")
        elif isinstance(v, bytes):
            text = _decode_each_byte(v, codec) if mariadb else _decode_valid_prefix(v, codec)
        else:
            text = v.encode(codec, "replace").decode(codec, "replace")
        if bmp_only:
            text = "".join(c if ord(c) <= 0xFFFF else "?" for c in text)
        if limit_chars is not None and len(text) > limit_chars:
            text = text[:limit_chars]
        elif limit_chars is None and len(text.encode(codec, "replace")) > limit_bytes:
            text = text.encode(codec)[:limit_bytes].decode(codec, "ignore")
        if new.type == T.STRING:  # CHAR: trailing spaces are not kept
            text = text.rstrip(" ")
        return text

    return fit


def _decode_each_byte(data: bytes, codec: str) -> str:
    """Bytes read in a charset, each byte of an invalid sequence a ``?`` (the server's way)."""
    out: list[str] = []
    i = 0
    while i < len(data):
        try:
            out.append(data[i:].decode(codec))
            break
        except UnicodeDecodeError as exc:
            out.append(data[i:i + exc.start].decode(codec))
            bad = max(exc.end - exc.start, 1)
            out.append("?" * bad)
            i += exc.start + bad
    return "".join(out).replace("\ufffe", "?")


def _decode_valid_prefix(data: bytes, codec: str) -> str:
    """Bytes read in a charset as MySQL reads them: cut at the first invalid sequence."""
    try:
        text = data.decode(codec)
    except UnicodeDecodeError as exc:
        text = data[:exc.start].decode(codec)
    cut = text.find("\ufffe")
    return text if cut < 0 else text[:cut]


def _as_bytes(old: Column, ok: str, stmt: Statement) -> Callable[[Any], bytes]:
    if ok == "binary":
        return lambda v: v
    if ok in ("text", "enum", "set"):
        codec = _codec(_charset(old, stmt.mariadb))

        def encode(v: str) -> bytes:
            if codec is None:
                if v.isascii():
                    return v.encode("ascii")
                raise Unknown("non-ASCII text of a charset the lake does not know, as bytes")
            return v.encode(codec, "replace")

        return encode
    text = _as_text(old, ok, stmt)
    return lambda v: str(text(v)).encode("ascii")


def _fit_bytes(new: Column) -> Callable[[bytes], bytes]:
    limit = _max_bytes(new)
    if new.type == T.STRING:  # BINARY(n): zero bytes pad it
        return lambda b: b[:limit].ljust(limit, b"\0")
    return lambda b: b[:limit]


def _as_labels(old: Column, new: Column, ok: str, nk: str, stmt: Statement) -> Callable[[Any], str]:
    labels = _labels_of(new, nk)
    low = {x.lower(): x for x in reversed(labels)}
    if ok in ("int", "decimal", "float", "double"):
        integer = _as_integer(old, ok, stmt.mariadb)

        def by_number(v: Any) -> str:
            n = integer(v)
            if nk == "enum":
                return labels[n - 1] if 1 <= n <= len(labels) else ""
            if n < 0 or (not stmt.mariadb and n >> len(labels)):  # MySQL: bits past the members, ''
                return ""
            return ",".join(x for i, x in enumerate(labels) if n >> i & 1)

        return by_number
    if ok not in ("text", "binary", "enum", "set"):
        raise Unknown(f"{_type_name(old)} -> {nk.upper()}")

    def by_label(v: Any) -> str:
        text = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
        if nk == "enum":
            return low.get(text.lower(), "")
        members = {low[m.lower()] for m in text.split(",") if m.lower() in low} if text else set()
        return ",".join(x for x in labels if x in members)

    return by_label


_DATE_TEXT = re.compile(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})"
                        r"(?:[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,6})(\d*))?)?)?\s*$")
_DIGITS_TEXT = re.compile(r"\s*(\d{8}|\d{14})\s*$")
_TIME_TEXT = re.compile(r"\s*(-?)(\d{1,3}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6})(\d*))?\s*$")


def _micros(frac: str | None, rest: str | None, mariadb: bool) -> int:
    """Fractional digits as µs: MariaDB cuts the digits past the sixth, MySQL rounds by the seventh (which may
    give 1,000,000: the caller carries it)."""
    us = int((frac or "").ljust(6, "0"))
    return us + 1 if not mariadb and rest and rest[0] >= "5" else us


def _parts(text: str, mariadb: bool = True) -> tuple[int, int, int, int, int, int, int] | None:
    """A date or datetime in text (the canonical layouts), as (y, m, d, h, mi, s, µs); None: not one of them."""
    m = _DATE_TEXT.match(text)
    if m is not None:
        y, mo, d, h, mi, s, frac, rest = m.groups()
        return (int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0), _micros(frac, rest, mariadb))
    m = _DIGITS_TEXT.match(text)
    if m is not None:
        g = m.group(1)
        if len(g) == 8:
            return int(g[:4]), int(g[4:6]), int(g[6:8]), 0, 0, 0, 0
        return int(g[:4]), int(g[4:6]), int(g[6:8]), int(g[8:10]), int(g[10:12]), int(g[12:14]), 0
    return None


def _datetime_of(parts: tuple[int, ...]) -> datetime.datetime | str:
    y, mo, d, h, mi, s, us = parts
    try:
        return datetime.datetime(y, mo, d, h, mi, s) + datetime.timedelta(microseconds=us)
    except ValueError:
        return ZERO  # an invalid or zero date: the server's zero date


def _cut(us: int, digits: int, mariadb: bool) -> int:
    """Microseconds cut (MariaDB) or rounded (MySQL) to ``digits`` fractional digits."""
    unit = 10 ** (6 - digits)
    if mariadb or unit == 1:
        return us - us % unit if us >= 0 else -((-us) - (-us) % unit)
    return (us + unit // 2) // unit * unit if us >= 0 else -(((-us) + unit // 2) // unit * unit)


def _as_temporal(old: Column, new: Column, ok: str, nk: str, stmt: Statement) -> Callable[[Any], Any]:
    digits = fsp(new)
    mariadb = stmt.mariadb

    def point(v: Any) -> datetime.datetime | int | str:
        """The old value as a naive local datetime, TIME microseconds (int), or ZERO."""
        if v is ZERO:
            return ZERO
        if ok == "datetime":
            return v
        if ok == "date":
            return datetime.datetime(v.year, v.month, v.day)
        if ok == "timestamp":
            return _local(v, stmt)
        if ok == "time":
            return int(v)
        if ok in ("text", "binary", "enum", "set"):
            text = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
            if nk == "time" and _TIME_TEXT.match(text):
                sign, h, mi, s, frac, rest = _TIME_TEXT.match(text).groups()  # type: ignore[union-attr]
                us = ((int(h) * 60 + int(mi)) * 60 + int(s)) * 1_000_000 + _micros(frac, rest, mariadb)
                return -us if sign else us
            parts = _parts(text, mariadb)
            if parts is None:
                if not text.strip():
                    return ZERO
                raise Unknown(f"the text {text[:40]!r} as a date (a layout only the server reads)")
            return _datetime_of(parts)
        if ok in ("int", "decimal"):
            number = v if ok == "decimal" else Decimal(v)
            whole = int(number)
            frac = int(((number - whole) * 1_000_000).to_integral_value()) if ok == "decimal" else 0
            if whole == 0:
                return ZERO
            text = str(whole)
            if len(text) not in (8, 14):
                raise Unknown(f"the number {v} as a date (a layout only the server reads)")
            found = _datetime_of(_parts(text) or (0, 0, 0, 0, 0, 0, 0))
            return found if found is ZERO or not isinstance(found, datetime.datetime) else found.replace(
                microsecond=frac)
        raise Unknown(f"{_type_name(old)} -> {_type_name(new)}")

    def store(v: Any) -> Any:
        p = point(v)
        if p is ZERO:
            return None
        if isinstance(p, int):  # a TIME
            if nk == "time":
                return _cut(p, digits, mariadb)
            if stmt.offset is None:
                raise Unknown("a TIME as a date: the statement's day in the session time zone SYSTEM")
            day = (stmt.micros + stmt.offset) // _DAY_US
            p = _EPOCH + datetime.timedelta(days=day, microseconds=p)
        assert isinstance(p, datetime.datetime)
        micros = (p - _EPOCH) // datetime.timedelta(microseconds=1)
        if nk == "date":  # MySQL rounds to the second first ('23:59:59.5' is the next day)
            return p.date() if mariadb else (_EPOCH + datetime.timedelta(microseconds=_cut(micros, 0, False))).date()
        if nk == "time":
            return _cut(micros % _DAY_US, digits, mariadb)
        cut = _cut(micros, digits, mariadb)
        local = _EPOCH + datetime.timedelta(microseconds=cut)
        if nk == "datetime":
            return local
        if stmt.offset is None:
            raise Unknown("a local time as a TIMESTAMP in the session time zone SYSTEM")
        return (local - datetime.timedelta(microseconds=stmt.offset)).replace(tzinfo=_UTC)

    return store
