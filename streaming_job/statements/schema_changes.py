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

from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from ingester.codec.constants import ColumnType as T
from ingester.codec.table_map import Column

from .column_kinds import (
    WIDE,
    ZERO,
    Statement,
    Unknown,
    column_charset,
    decimal_shape,
    fsp,
    int_bounds,
    kind,
    max_bytes,
    max_chars,
    type_name,
)
from .convert_numbers import as_decimal, as_float, as_integer
from .convert_text import as_bytes, as_labels, as_text, fit_binary, fit_text, mysql_json, python_codec
from .convert_time import as_temporal


def same_values(old: Column, new: Column, mariadb: bool = True) -> bool:
    """Whether every value of ``old`` is the same value of ``new`` (no conversion can change one): the same
    family and nothing that cuts, clamps, relabels or re-encodes."""
    ok, nk = kind(old, mariadb), kind(new, mariadb)
    if ok != nk:
        return (ok, nk) in (("date", "datetime"), ("float", "double"))
    if ok == "int":
        lo, hi = int_bounds(old)
        nlo, nhi = int_bounds(new)
        return nlo <= lo and hi <= nhi
    if ok == "decimal":
        (p, s), (np_, ns) = decimal_shape(old), decimal_shape(new)
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
        return (column_charset(old, mariadb) == column_charset(new, mariadb)
                and max_chars(new, mariadb) >= max_chars(old, mariadb))
    if ok == "binary":
        return (new.type != T.STRING or old.type == T.STRING) and max_bytes(new) >= max_bytes(old)
    return ok == nk


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


def converter(old: Column, new: Column, stmt: Statement) -> Callable[[Any], Any]:
    """old lake value -> new lake value as the server's ALTER TABLE converted it; None stays None (a NULL), and
    ``ZERO`` stands for an old zero date. Raises Unknown for a pair only the server knows; the function it
    returns may raise Unknown for a value."""
    mariadb = stmt.mariadb
    ok, nk = kind(old, mariadb), kind(new, mariadb)
    if "other" in (ok, nk):
        raise Unknown(f"{type_name(old)} -> {type_name(new)}")
    if ok == "bit" or nk == "bit":
        if ok == nk or (nk == "int" and ok == "bit"):
            return _bits_to_int(new) if nk == "int" else (lambda v: v)
        raise Unknown(f"{type_name(old)} -> {type_name(new)}")
    if "json" in (ok, nk) and not mariadb and ok != nk:
        return mysql_json(old, new, ok, nk)
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
            raise Unknown(f"{type_name(old)} -> {type_name(new)}")
    local = {"date", "datetime", "time", "text", "binary", "enum", "set", "int", "decimal"}
    if stmt.offset is None and (((ok == "timestamp") != (nk == "timestamp") and {ok, nk} - {"timestamp"} <= local)
                                or (ok == "time" and nk in ("date", "datetime", "timestamp"))):
        raise Unknown(f"{type_name(old)} -> {type_name(new)}: local time of the session time zone SYSTEM")
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
    if ok == "text" and nk == "binary" and new.type != T.STRING \
            and python_codec(column_charset(old, stmt.mariadb)) == "utf-8":
        limit = max_bytes(new)
        return lambda array: pc.binary_slice(array.cast(pa.binary()), 0, limit) if limit < 1 << 31 \
            else array.cast(pa.binary())
    if ok == nk == "int":
        lo, hi = int_bounds(new)
        d20 = pa.decimal128(20, 0)
        low, high = pa.scalar(Decimal(lo), d20), pa.scalar(Decimal(hi), d20)
        return lambda array: pc.min_element_wise(pc.max_element_wise(array.cast(d20), low), high)
    if ok == nk == "decimal" and old.meta & 0xFF <= 38 and (old.meta >> 8) <= 38 and (new.meta >> 8) <= 38:
        os, (p, s) = decimal_shape(old)[1], decimal_shape(new)
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


def _bits_to_int(new: Column) -> Callable[[Any], Any]:
    lo, hi = int_bounds(new)
    return lambda v: min(max(v + (1 << 64) if v < 0 else v, lo), hi)


def _store(old: Column, new: Column, ok: str, nk: str, stmt: Statement) -> Callable[[Any], Any]:
    mariadb = stmt.mariadb
    if nk == "int":
        lo, hi = int_bounds(new)
        integer = as_integer(old, ok, mariadb)
        return lambda v: min(max(integer(v), lo), hi)
    if nk == "decimal":
        p, s = decimal_shape(new)
        quantum = Decimal(1).scaleb(-s)
        most = Decimal(10) ** (p - s) - quantum
        exact = as_decimal(old, ok, mariadb)
        least = Decimal(0) if new.unsigned else -most

        def to_decimal(v: Any) -> Decimal:
            d = exact(v)
            if not d.is_finite():
                return Decimal(0)
            if d > most or d < least:
                return most if d > most else least
            return d.quantize(quantum, ROUND_HALF_UP, WIDE)

        return to_decimal
    if nk in ("float", "double"):
        real = as_float(old, ok, mariadb)
        top = 3.4028234663852886e38 if nk == "float" else 1.7976931348623157e308

        def to_float(v: Any) -> float:
            f = real(v)
            f = min(max(f, -top), top)
            return max(f, 0.0) if new.unsigned else f

        return to_float
    if nk == "text":
        text = as_text(old, ok, stmt)
        fit = fit_text(new, mariadb)
        return lambda v: fit(text(v))
    if nk == "binary":
        raw = as_bytes(old, ok, stmt)
        fit_raw = fit_binary(new)
        return lambda v: fit_raw(raw(v))
    if nk in ("enum", "set"):
        return as_labels(old, new, ok, nk, stmt)
    if nk in ("date", "datetime", "timestamp", "time"):
        return as_temporal(old, new, ok, nk, stmt)
    raise Unknown(f"{type_name(old)} -> {type_name(new)}")
