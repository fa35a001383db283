"""Rows events -> Arrow arrays of the lake types, walked in C (ingester/codec/_columns.c).

The land job's decoder gives ``compile_arrow_rows`` to the codec (``record_events(..., columnar=...)``).
For each table map, rows event type and column bitmaps it builds a plan of one op per present column
from the column's binlog type and its lake type (lake_types.py); the decoder it returns gives
``ArrowImages``: per image, C's buffers per present column, in Arrow's layout of the lake type, with
no Python object per value. decode.py joins a record's events per table column (in C, ``concat``) and
wraps the result as Arrow arrays once (``WalkedColumn.array``). Values C does not convert itself (JSON,
SET labels, pre-5.6 temporal types, DECIMAL wider than 38 digits, text of other charsets or with bytes
its charset check refuses) come back as their bytes and go through the codec's own value code
(``compile_value``) and lake_types' conversions, as in the Python path. An event C leaves alone (anything
unusual or malformed) is decoded by the Python columnar decoder, which gives the same values or raises
the codec's error. ``BINLAKE_PURE_PYTHON=1`` (or a missing extension) leaves every event to Python.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ingester.codec.charsets import charset_for, keeps_bytes
from ingester.codec.constants import ColumnType as T
from ingester.codec.rows import RowsDecoder, compile_rows, compile_value, text_decoder
from ingester.codec.table_map import Column, TableMap
from ingester.codec.values import decimal_size
from ingester.extensions import load as load_extension

from .lake_types import (
    MAX_DECIMAL_PRECISION,
    arrow_type,
    converter,
    date_days,
    datetime_micros,
    identity,
    lake_type,
    text_value,
    to_decimal,
)

native = load_extension("ingester.codec._columns")

# Column ops of _columns.c (its enum, in order).
(OP_INT, OP_COPY, OP_YEAR, OP_DECIMAL, OP_DATE, OP_DATETIME2, OP_TIMESTAMP2, OP_TIME2, OP_BIT, OP_NUMBER,
 OP_STRING, OP_RAW_FIXED, OP_RAW_PREFIXED, OP_NULL) = range(1, 15)
CHECK_NONE, CHECK_UTF8, CHECK_ASCII = 0, 1, 2

_INT_WIDTH: dict[int, int] = {T.TINY: 1, T.SHORT: 2, T.INT24: 3, T.LONG: 4, T.LONGLONG: 8}
_SIMPLE: dict[int, tuple[int, int]] = {  # -1: the column's fsp
    T.FLOAT: (OP_COPY, 4), T.DOUBLE: (OP_COPY, 8), T.YEAR: (OP_YEAR, 0), T.DATE: (OP_DATE, 0),
    T.NEWDATE: (OP_DATE, 0), T.DATETIME2: (OP_DATETIME2, -1), T.TIMESTAMP2: (OP_TIMESTAMP2, -1),
    T.TIME2: (OP_TIME2, -1)}
_OLD_TEMPORAL: dict[int, int] = {T.TIMESTAMP: 4, T.DATETIME: 8, T.TIME: 3}
_STRINGS = (T.VARCHAR, T.VAR_STRING, T.STRING)
_BLOBS = (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.GEOMETRY)
_CHECKS = {"utf8mb4": CHECK_UTF8, "utf8mb3": CHECK_UTF8, "utf8": CHECK_UTF8, "latin1": CHECK_ASCII,
           "ascii": CHECK_ASCII}  # charsets whose text C can pass on as it is (ASCII ones: below 0x80)
# Arrow's parse of the codec's text
_PARSED: dict[Callable[[Any], Any], pa.DataType] = {date_days: pa.date32(), datetime_micros: pa.timestamp("us")}

# C's result for one column: validity bitmap (None: no NULLs), data, offsets (None: fixed width),
# NULL count, and whether a string failed its charset check
Buffers = tuple[bytes | None, bytes, bytes | None, int, bool]
Finish = Callable[[int, Buffers], pa.Array]


class LakeColumn:
    """A column's lake type and how the codec's values of it become Arrow values."""

    __slots__ = ("dtype", "fix", "text", "type")

    def __init__(self, col: Column, mariadb: bool) -> None:
        self.dtype = lake_type(col, mariadb)
        self.type = arrow_type(self.dtype)
        fix = converter(col, self.dtype)
        # None: Arrow takes the codec's values as they are; text: a string column whose rare non-str
        # values (no charset metadata, ENUM/SET without labels) need text_value
        self.fix = None if fix is identity or fix is text_value else fix
        self.text = fix is text_value

    def array(self, values: Sequence[Any]) -> pa.Array:
        return column_array(values, self.type, self.fix, self.text)


def column_array(values: Sequence[Any], typ: pa.DataType, fix: Callable[[Any], Any] | None, text: bool) -> pa.Array:
    """The codec's values of one column -> an Arrow array of its lake type. ``fix`` converts a non-null
    value (lake_types.converter; None: Arrow takes it as it is); ``text``: a string column whose rare
    non-str values need text_value. Dates and decimals go through Arrow's own parsing (exact, or an
    error), the reference conversions only where Arrow refuses: zero dates, BIGINT UNSIGNED ints."""
    if pa.types.is_decimal(typ):  # the codec's exact digits (or BIGINT UNSIGNED's int): no loss
        try:
            return pa.array(values, pa.string()).cast(typ)
        except pa.ArrowTypeError:
            return pa.array([None if v is None else to_decimal(v) for v in values], typ)
    parse = None if fix is None else _PARSED.get(fix)
    if parse is not None:  # Arrow parses valid dates; zero dates (-> NULL) make it fall back to Python,
        # and so does year 0, which Arrow takes as a year (a partly-zero date: NULL, as the C walker has it)
        as_text = pa.array(values, pa.string())
        if not pc.any(pc.starts_with(as_text, "0000")).as_py():
            try:
                return as_text.cast(parse).view(typ)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                pass
    if fix is not None:
        return pa.array([None if v is None else fix(v) for v in values], typ)
    try:
        return pa.array(values, typ)
    except (pa.ArrowTypeError, pa.ArrowInvalid, TypeError):
        if not text:
            raise
        return pa.array([None if v is None else text_value(v) for v in values], typ)


class WalkedColumn:
    """One table column as the C walker reads it: its op, its lake value's width in bytes (0: offsets
    and data; None: no buffers, always NULL), how its buffers become the lake array, and whether C
    passes it on as bytes that the codec decodes while the event is decoded (``raw``: the event then
    holds the codec's values for it, not buffers)."""

    __slots__ = ("finish", "op", "raw", "type", "width")

    def __init__(self, op: tuple[int, int, int, int], width: int | None, typ: pa.DataType,
                 finish: Finish | _Raw) -> None:
        self.op, self.width, self.type, self.finish = op, width, typ, finish
        self.raw = isinstance(finish, _Raw)

    def array(self, run: list[tuple[int, Buffers | None]], rows: int) -> pa.Array:
        """The lake array of consecutive events' buffers (None: that many NULLs, the column not in
        the image), ``rows`` in all, joined in C first: one finish per run, not one per event."""
        finish = self.finish
        assert not isinstance(finish, _Raw), "a raw column's values come with the event, not as buffers"
        if len(run) == 1 and run[0][1] is not None:
            return finish(run[0][0], run[0][1])
        if self.width is None:
            return pa.nulls(rows, self.type)
        assert native is not None
        joined = native.concat(run, self.width)
        if joined is None:  # more than int32 offsets hold: Arrow joins the arrays (or says why it cannot)
            return pa.concat_arrays([pa.nulls(n, self.type) if got is None else finish(n, got) for n, got in run])
        return finish(rows, joined)


# One image of one event, by table column: the walker's entries (C's buffers, or the codec's values of a raw
# column) and the WalkedColumn of each (None: not in the image)
WalkedImage = tuple[Sequence[Any], list["WalkedColumn | None"]]


class ArrowImages:
    """A rows event's images from the C walker. ``images()`` gives ``(before, after)``: a ``WalkedImage``,
    or None for an image the kind has not. The lake arrays are built later (decode.py joins a record's
    events per table first), outside the codec's decode call, so a value the lake cannot hold fails as on
    the Python path (a lake conversion error, not the codec's malformed data)."""

    __slots__ = ("aligned", "count", "kind", "present", "walked")

    def __init__(self, count: int, kind: str, walked: Sequence[Sequence[Buffers | list[Any]]],
                 present: list[tuple[int, ...]], aligned: list[list[WalkedColumn | None]]) -> None:
        self.count, self.kind, self.walked, self.present, self.aligned = count, kind, walked, present, aligned

    def __len__(self) -> int:
        return self.count

    def images(self) -> tuple[WalkedImage | None, WalkedImage | None]:
        images = []
        for present, entries, aligned in zip(self.present, self.walked, self.aligned, strict=True):
            if len(present) == len(aligned):  # every column (FULL row images): already in table order
                images.append((entries, aligned))
                continue
            slots: list[Any] = [None] * len(aligned)
            for i, entry in zip(present, entries, strict=True):
                slots[i] = entry
            images.append((slots, aligned))
        if self.kind == "update":
            return images[0], images[1]
        return (None, images[0]) if self.kind == "write" else (images[0], None)


def _buffers(typ: pa.DataType, n: int, got: Buffers) -> pa.Array:
    valid, data, offsets, nulls, _ = got
    bufs = [None if valid is None else pa.py_buffer(valid)]
    if offsets is not None:
        bufs.append(pa.py_buffer(offsets))
    bufs.append(pa.py_buffer(data))
    return pa.Array.from_buffers(typ, n, bufs, null_count=nulls)


def _fixed(lake: LakeColumn) -> Finish:
    return lambda n, got: _buffers(lake.type, n, got)


def _string(lake: LakeColumn, decode: Callable[[bytes], Any]) -> Finish:
    """Text C checked: the array as it is; else each value through the codec's charset decoder."""
    def finish(n: int, got: Buffers) -> pa.Array:
        if not got[4]:
            return _buffers(lake.type, n, got)
        raw = _buffers(pa.binary(), n, got).to_pylist()
        return lake.array([None if v is None else decode(v) for v in raw])
    return finish


class _Raw:
    """Values C passes on as bytes: the codec's value code reads them while the event is decoded (its
    errors are the codec's, at the event's position); the lake conversion comes later with the others
    (``LakeColumn.array`` of these values, in decode.py)."""

    def __init__(self, value: Callable[[bytes], Any]) -> None:
        self.value = value

    def values(self, n: int, got: Buffers) -> list[Any]:
        value = self.value
        return [None if v is None else value(v) for v in _buffers(pa.binary(), n, got).to_pylist()]


def _labels(lake: LakeColumn, col: Column) -> Finish:
    """ENUM index / SET mask -> its label(s), or the number as text when the table map has no labels."""
    enum = col.type == T.ENUM
    labels = col.enum_values if enum else col.set_values
    table = None
    if labels is not None and enum:
        try:
            table = pa.array(["", *labels], pa.string())
        except (UnicodeEncodeError, pa.ArrowException):  # labels Arrow cannot hold: per value, failing there
            table = None

    def finish(n: int, got: Buffers) -> pa.Array:
        numbers = _buffers(pa.int64(), n, got)
        if labels is None:
            return numbers.cast(pa.string())
        if table is not None and (pc.max(numbers).as_py() or 0) < len(table):
            return table.take(numbers)
        return lake.array([None if v is None else _label(labels, v, enum) for v in numbers.to_pylist()])
    return finish


def _label(labels: list[str], v: int, enum: bool) -> str:
    if enum:
        return ("", *labels)[v] if v <= len(labels) else str(v)
    return ",".join(name for i, name in enumerate(labels) if v >> i & 1)


def walked_column(tm: TableMap, i: int) -> WalkedColumn:
    """Column ``i`` of ``tm`` for the C walker (cached on the table map: every plan shares it)."""
    key = ("walked", i)
    column = tm._decoders.get(key)
    if column is None:
        op, finish = _column_op(tm, tm.columns[i])
        lake = LakeColumn(tm.columns[i], tm.is_mariadb).type
        column = tm._decoders[key] = WalkedColumn(op, _lake_width(op), lake, finish)
    return column


def _lake_width(op: tuple[int, int, int, int]) -> int | None:
    """Bytes of one lake value in C's data buffer: 0 variable (offsets), None no buffers (always NULL)."""
    code, a, _, c = op
    if code == OP_NULL:
        return None
    if code in (OP_STRING, OP_RAW_FIXED, OP_RAW_PREFIXED):
        return 0
    return {OP_INT: c, OP_COPY: a, OP_YEAR: 4, OP_DATE: 4, OP_DECIMAL: 16}.get(code, 8)


def _column_op(tm: TableMap, col: Column) -> tuple[tuple[int, int, int, int], Finish | _Raw]:
    """C's op for one column and how its buffers become the lake array."""
    lake = LakeColumn(col, tm.is_mariadb)
    t, meta = col.type, col.meta
    if t in _INT_WIDTH:
        width = 16 if pa.types.is_decimal(lake.type) else lake.type.bit_width // 8
        return (OP_INT, _INT_WIDTH[t], 0 if col.unsigned else 1, width), _fixed(lake)
    if t in _SIMPLE:
        op, a = _SIMPLE[t]
        return (op, meta if a < 0 else a, 0, 0), _fixed(lake)
    if t == T.NEWDECIMAL:
        precision, scale = meta >> 8, meta & 0xFF
        if precision <= MAX_DECIMAL_PRECISION:
            return (OP_DECIMAL, precision, scale, 0), _fixed(lake)
        return (OP_RAW_FIXED, decimal_size(precision, scale), 0, 0), _Raw(compile_value(tm, col))
    if t == T.BIT:
        return (OP_BIT, (meta >> 8) + (1 if meta & 0xFF else 0), 0, 0), _fixed(lake)
    if t in (T.ENUM, T.SET):
        return (OP_NUMBER, meta & 0xFF, 0, 0), _labels(lake, col)
    if t in _OLD_TEMPORAL:
        return (OP_RAW_FIXED, _OLD_TEMPORAL[t], 0, 0), _Raw(compile_value(tm, col))
    if t == T.NULL:
        return (OP_NULL, 0, 0, 0), lambda n, got: pa.nulls(n, lake.type)
    if t in _STRINGS or t in _BLOBS:
        prefix = meta if t in _BLOBS else 1 if col.max_length < 256 else 2
        if keeps_bytes(col.collation, tm.is_mariadb) or t == T.GEOMETRY:
            pad = col.max_length if t == T.STRING and col.collation == 63 else 0
            return (OP_STRING, prefix, CHECK_NONE, pad), _fixed(lake)
        check = _CHECKS.get(charset_for(col.collation, tm.is_mariadb))  # type: ignore[arg-type]
        if check is not None:
            return (OP_STRING, prefix, check, 0), _string(lake, text_decoder(col, tm.is_mariadb))
        return (OP_RAW_PREFIXED, prefix, 0, 0), _Raw(compile_value(tm, col))
    # JSON, VECTOR, MariaDB's compressed columns: a length prefix, then bytes only the codec reads
    prefix = (1 if meta < 256 else 2) if t == T.VARCHAR_COMPRESSED else meta
    return (OP_RAW_PREFIXED, prefix, 0, 0), _Raw(compile_value(tm, col))


def compile_arrow_rows(tm: TableMap, kind: str, before: tuple[int, ...], after: tuple[int, ...],
                       partial: bool, pre_ga: bool) -> RowsDecoder:
    """A ``RowsCompiler`` (codec.rows): the decoder of rows events of ``tm`` giving ``ArrowImages``,
    with the Python columnar decoder behind it."""
    python = compile_rows(tm, kind, before, after, partial, pre_ga, columnar=True)  # raises what it raises
    images = [cols for cols, wanted in ((before, kind != "write"), (after, kind != "delete")) if wanted]
    if native is None or partial or pre_ga or not all(images):
        return python
    columns = [[walked_column(tm, i) for i in cols] for cols in images]
    aligned: list[list[WalkedColumn | None]] = []
    for cols, walkers in zip(images, columns, strict=True):
        aligned.append([None] * len(tm.columns))
        for i, w in zip(cols, walkers, strict=True):
            aligned[-1][i] = w
    try:
        plan = native.plan(tuple(tuple(c.op for c in image) for image in columns))
    except ValueError:  # metadata outside what C reads (e.g. a 0- or 5-byte length prefix): Python's
        return python

    raws = [(i, k, c.finish) for i, image in enumerate(columns) for k, c in enumerate(image)
            if isinstance(c.finish, _Raw)]

    def decode(b: bytes, p: int, end: int) -> Any:
        got = native.decode(plan, b, p, end)
        if got is None:
            return python(b, p, end)
        n, walked = got
        if raws:
            walked = [list(image) for image in walked]
            try:
                for i, k, raw in raws:
                    walked[i][k] = raw.values(n, walked[i][k])
            except Exception:  # the first bad value in row order is the Python decoder's to name
                return python(b, p, end)
        return ArrowImages(n, kind, walked, images, aligned)

    return decode
