"""Debezium's row images rendered in C (``_native.c``), with the Python reference path behind it.

``rows_compiler(modes)`` gives the encoder a ``RowsCompiler`` (codec.rows) that renders each row's Value and
Key structs as JSON bytes straight from the binlog bytes, without the Python row decoder and converters. It
works at two levels: ``walk`` reads a whole record in C (its index, table maps and rows events: what a
table's record holds), and as the codec's rows compiler it renders the rows events of records Python reads
(``record_events``: those ``walk`` leaves alone), as ``RenderedRows``.

For each table map, rows event type and column bitmaps a plan holds one entry per table column and image,
mirroring columns.py's converter for the column in the modes. A table or event the plan does not cover
(JSON, pre-5.6 temporal types, compressed columns, other charsets, FLOAT keys...) is decoded by the codec's
Python decoder and goes through the converters, and so does any event C leaves alone (anything unusual or
malformed), which then gives the same values or raises the codec's error. ``BINLAKE_PURE_PYTHON=1`` (or a
missing extension) leaves every event to Python.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from ...codec.charsets import charset_for, keeps_bytes
from ...codec.constants import ColumnType as T
from ...codec.decoder import CHECKSUM_CRC32
from ...codec.errors import BinlogError
from ...codec.rows import RowsDecoder, check_rows, compile_rows
from ...codec.table_map import Column, TableMap
from ...extensions import load as load_extension
from ..format import entry_table_map, record_decoder
from ..outbound import Message
from .columns import Modes

native = load_extension("ingester.records.debezium._native")

# Column ops and mode codes of _native.c (its enums, in order).
(OP_INT, OP_UNSIGNED_DECIMAL, OP_FLOAT, OP_DOUBLE, OP_YEAR, OP_DECIMAL, OP_DATE, OP_DATETIME2, OP_TIMESTAMP2,
 OP_TIME2, OP_BOOL, OP_BITS, OP_ENUM, OP_SET, OP_TEXT, OP_BINARY, OP_GEOMETRY, OP_VECTOR, OP_NULL) = range(1, 20)
DECIMAL_BYTES, DECIMAL_STRING, DECIMAL_DOUBLE = range(3)
BINARY_BASE64, BINARY_URL_SAFE, BINARY_HEX = range(3)

_INT_WIDTH: dict[int, int] = {T.TINY: 1, T.SHORT: 2, T.INT24: 3, T.LONG: 4, T.LONGLONG: 8}
_DECIMAL_MODES = {"precise": DECIMAL_BYTES, "string": DECIMAL_STRING, "double": DECIMAL_DOUBLE}
_BINARY_MODES = {"bytes": BINARY_BASE64, "base64": BINARY_BASE64, "base64-url-safe": BINARY_URL_SAFE,
                 "hex": BINARY_HEX}
_STRINGS = (T.VARCHAR, T.VAR_STRING, T.STRING)
_BLOBS = (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB)
_UTF8 = frozenset(("utf8mb4", "utf8mb3", "utf8"))
_ASCII_COMPATIBLE = frozenset(("latin1", "ascii"))  # decoded like ASCII below 0x80
_POINT = 1  # the table map's geometry type of a POINT column
# Values whose JSON does not tell equal keys apart as Python's == does (0.0 and -0.0): a key of them is Python's
_FLOATING = frozenset((OP_FLOAT, OP_DOUBLE, OP_GEOMETRY, OP_VECTOR))

_KINDS = {23: "write", 30: "write", 24: "update", 31: "update", 25: "delete", 32: "delete"}
_V1_ROWS, _V2_ROWS = (23, 24, 25), (30, 31, 32)

ColumnOp = tuple[int, int, int, int, tuple[bytes, ...] | None]
Rendered = tuple[bytes | None, bytes | None, bytes | None, bytes | None]  # before, after, their keys' structs
# A rows event C rendered: (file number, position, sub) of its sequence, GTID, commit time (microseconds),
# the event's timestamp, server id and type code, its TableMap and its rows
RenderedEvent = tuple[int, int, int, str, int, int, int, int, TableMap, list[Rendered]]


class RenderedRows:
    """A rows event's rows as C rendered them: per row (before, after, key of before, key of after), each the
    JSON of a Value or Key struct, None where the event kind or the table has none."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[Rendered]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)


class RowsRenderer:
    """Debezium's structs of one set of modes rendered in C: whole records (``walk``), and as the codec's
    ``RowsCompiler`` C's renderer where a plan covers the event, else the codec's Python decoder (whose row
    dicts the encoder converts itself)."""

    def __init__(self, modes: Modes) -> None:
        self.modes = modes
        # per FORMAT_DESCRIPTION: the table maps walk() met, by their bytes (body and schema entry), each with
        # its plans by rows event type and column bitmaps
        self._maps: dict[bytes, dict[bytes, tuple[TableMap, dict[bytes, Any]]]] = {}

    def __call__(self, tm: TableMap, kind: str, before: tuple[int, ...], after: tuple[int, ...], partial: bool,
                 pre_ga: bool) -> RowsDecoder:
        python = compile_rows(tm, kind, before, after, partial, pre_ga)  # raises what it raises
        plan = None if native is None or partial or pre_ga else rows_plan(tm, kind, before, after, self.modes)
        if plan is None:
            return python
        def decode(b: bytes, p: int, end: int) -> Any:
            rows = native.render(plan, b, p, end)  # type: ignore[union-attr]
            if rows is None:
                return python(b, p, end)
            return RenderedRows(rows)

        return decode

    def walk(self, headers: Mapping[str, bytes], value: bytes, source: str) -> list[RenderedEvent] | None:
        """The rows events of a table's record rendered by C, in record order; None when Python must read the
        record (``record_events``, which gives the same events or raises)."""
        index = headers.get("binlake.index")
        dec = None if native is None or index is None else record_decoder(value, source, self)
        walk = native.walk  # type: ignore[union-attr]
        if dec is None or not dec.plain_v4:
            return None
        fde = value[9 : 9 + int.from_bytes(value[5:9], "little")]  # record_decoder checked the record's head
        maps = self._maps.get(fde)
        if maps is None or len(maps) >= 4096:
            if len(self._maps) >= 64:
                self._maps.clear()
            maps = self._maps[fde] = {}
        posts = dec.post_header_lengths
        args = (value, index, 9 + len(fde), dec.checksum == CHECKSUM_CRC32, dec.verify_checksums,
                all(posts.get(c) == 8 for c in _V1_ROWS), all(posts.get(c) == 10 for c in _V2_ROWS), maps)
        while True:  # each round learns a table map or a plan (a record holds a few)
            got = walk(*args)
            if got is None or type(got) is list:
                return got
            if type(got[0]) is bytes:
                key, offset, position = got
                try:
                    tm = entry_table_map(dec, value, offset, position, source)
                except BinlogError:
                    return None
                maps[key] = (tm, {})
            else:
                (tm, plans), key = got
                plans[key] = self._plan(tm, key)

    def envelopes(self, walked: list[RenderedEvent], shape_of: Callable[[TableMap, int], tuple[Any, ...] | None],
                  now: int,
                  tombstones: bool) -> list[Message] | None:
        """The change events of ``walk``'s rows events as messages (_envelope.h; no transaction metadata):
        ``shape_of(table map, file number)`` gives a table's pieces (None: Python composes them), ``now`` is their
        ts_ns; None when an event is Python's (the Avro transcoder leaves it, _avro.h)."""
        return native.envelopes(walked, shape_of, now, tombstones, Message)  # type: ignore[union-attr, no-any-return]

    def _plan(self, tm: TableMap, key: bytes) -> Any:
        """The plan of rows events of type ``key[0]`` with column bitmaps ``key[1:]`` on ``tm`` (None: Python's),
        as the codec reads their columns (decode_rows.rows)."""
        kind, width = _KINDS[key[0]], len(tm.columns)
        nbytes = (width + 7) >> 3
        if len(key) != 1 + nbytes * (2 if kind == "update" else 1):
            return None
        present = int.from_bytes(key[1 : 1 + nbytes], "little")
        present_after = int.from_bytes(key[1 + nbytes :], "little") if kind == "update" else present
        before = tuple(i for i in range(width) if present >> i & 1) if kind != "write" else ()
        after = tuple(i for i in range(width) if present_after >> i & 1) if kind != "delete" else ()
        try:
            check_rows(tm, kind, before, after)
        except BinlogError:  # metadata the codec refuses: its error, from Python's read of the record
            return None
        return rows_plan(tm, kind, before, after, self.modes)


_renderers: dict[Modes, RowsRenderer] = {}


def rows_renderer(modes: Modes) -> RowsRenderer | None:
    """The renderer of Debezium's structs in these modes; None without the extension. One per modes, so the
    codec's decoders (cached by rows compiler) are reused from record to record."""
    if native is None:
        return None
    renderer = _renderers.get(modes)
    if renderer is None:
        renderer = _renderers[modes] = RowsRenderer(modes)
    return renderer


def rows_plan(tm: TableMap, kind: str, before: Sequence[int], after: Sequence[int], modes: Modes) -> Any:
    """The RowsPlan of rows events of ``kind`` on ``tm`` whose images hold the columns ``before`` and
    ``after``, or None when Python must convert them (envelope.table_codec's structs, converted by
    columns.py's converters)."""
    names = tm.column_names
    key_columns = [i for i, _ in tm.primary_key or ()]
    if len(set(names)) != len(names) or len(set(key_columns)) != len(key_columns) or \
            any(not tm.columns[i].visible for i in key_columns):
        return None  # duplicate names collapse in Python's dicts; an invisible key column has no field
    images = {"write": [after], "delete": [before], "update": [before, after]}[kind]
    try:
        fields = _fields(tm.columns, names)
        keys = tuple((b"," if k else b"") + orjson.dumps(names[i]) + b":" for k, i in enumerate(key_columns))
    except orjson.JSONEncodeError:  # a name Python writes with U+FFFD... or fails on: its business
        return None
    key_place = {i: k for k, i in enumerate(key_columns)}
    spec: list[tuple[tuple[Any, ...], ...]] = []
    for image in images:
        present = set(image)
        if not present:
            return None
        entries: list[tuple[Any, ...]] = []
        for col in tm.columns:
            if col.index not in present:
                entries.append((False, fields[col.index], key_place.get(col.index, -1), 0, 0, 0, 0, None))
                continue
            op = column_op(col, modes, tm.is_mariadb)
            if op is None or (col.index in key_place and op[0] in _FLOATING) or \
                    (col.index in key_place and op[0] == OP_DECIMAL and op[3] == DECIMAL_DOUBLE):
                return None
            entries.append((True, fields[col.index], key_place.get(col.index, -1), *op))
        spec.append(tuple(entries))
    assert native is not None
    return native.RowsPlan((kind == "write", tuple(spec), keys))


def _fields(columns: list[Column], names: list[str]) -> list[bytes | None]:
    """Each column's '"name":' in the Value struct (',' before all but the first field), None for invisible
    columns (no field)."""
    fields: list[bytes | None] = []
    first = True
    for col, name in zip(columns, names, strict=True):
        if not col.visible:
            fields.append(None)
            continue
        fields.append((b"" if first else b",") + orjson.dumps(name) + b":")
        first = False
    return fields


def column_op(col: Column, modes: Modes, mariadb: bool) -> ColumnOp | None:
    """How C reads and renders a column's value exactly as the codec decodes it and columns.py converts it in
    these modes; None if it does not."""
    t, meta = col.type, col.meta
    unsigned = bool(col.unsigned)
    if t in _INT_WIDTH:
        if t == T.LONGLONG and unsigned:  # "long": the 64 bits as a signed long, as Java wraps them
            return (OP_UNSIGNED_DECIMAL, 0, 0, 0, None) if modes.bigint_unsigned == "precise" else \
                (OP_INT, 8, 0, 0, None)
        return OP_INT, _INT_WIDTH[t], int(unsigned), 0, None
    if t == T.FLOAT:
        return OP_FLOAT, 0, 0, 0, None
    if t == T.DOUBLE:
        return OP_DOUBLE, 0, 0, 0, None
    if t == T.YEAR:
        return OP_YEAR, 0, 0, 0, None
    if t == T.NULL:
        return OP_NULL, 0, 0, 0, None
    if t == T.NEWDECIMAL:
        precision, scale = meta >> 8, meta & 0xFF
        if 0 < precision <= 65 and 0 <= scale <= 30 and scale <= precision:
            return OP_DECIMAL, precision, scale, _DECIMAL_MODES[modes.decimal], None
        return None
    if t in (T.DATE, T.NEWDATE):
        return OP_DATE, 0, 0, int(col.nullable), None
    if t in (T.DATETIME2, T.TIMESTAMP2, T.TIME2) and not 0 <= meta <= 6:
        return None
    if t == T.DATETIME2:
        return OP_DATETIME2, meta, int(modes.time == "connect" or meta <= 3), int(col.nullable), None
    if t == T.TIMESTAMP2:
        return OP_TIMESTAMP2, meta, 0, 0, None
    if t == T.TIME2:
        return OP_TIME2, meta, int(modes.time == "connect"), int(col.nullable), None
    if t == T.BIT:
        nbytes = (meta >> 8) + (1 if meta & 0xFF else 0)
        if not 1 <= nbytes <= 8 or meta & 0xFF > 7:
            return None
        return (OP_BOOL if (meta >> 8) * 8 + (meta & 0xFF) <= 1 else OP_BITS), nbytes, 0, 0, None
    if t in (T.ENUM, T.SET):
        return _labelled(col)
    if t in _STRINGS or t in _BLOBS:
        return _string(col, modes, mariadb)
    if t in (T.GEOMETRY, T.VECTOR):
        if not 1 <= meta <= 4:
            return None
        return (OP_GEOMETRY, meta, int(col.geometry_type == _POINT), 0, None) if t == T.GEOMETRY else \
            (OP_VECTOR, meta, 0, 0, None)
    return None  # JSON, pre-5.6 TIME/DATETIME/TIMESTAMP, MariaDB's compressed columns


def _labelled(col: Column) -> ColumnOp | None:
    """ENUM: its label (the number as text beyond the labels, or without them); SET: its labels joined, or the
    mask as text without labels."""
    size = col.meta & 0xFF
    if not 1 <= size <= 8:
        return None
    try:
        if col.type == T.ENUM:
            labels = () if col.enum_values is None else ("", *col.enum_values)
            return OP_ENUM, size, 0, 0, tuple(orjson.dumps(label) for label in labels)
        if col.set_values is None:
            return OP_SET, size, 0, 0, ()
        return OP_SET, size, 1, 0, tuple(orjson.dumps(label)[1:-1] for label in col.set_values)
    except orjson.JSONEncodeError:  # a label with undecodable bytes: Python's
        return None


def _string(col: Column, modes: Modes, mariadb: bool) -> ColumnOp | None:
    """Text as a JSON string, bytes in the binary mode's encoding. Python's converter decides text or bytes by
    MariaDB's collation ids (columns._text_or_bytes), the decoder by the flavour's: where they disagree, Python
    says what happens."""
    t, meta = col.type, col.meta
    if t in _STRINGS:
        prefix = 1 if col.max_length < 256 else 2
    elif 1 <= meta <= 4:
        prefix = meta
    else:
        return None
    decoded_bytes = col.collation is None or keeps_bytes(col.collation, mariadb)
    if decoded_bytes != keeps_bytes(col.collation, True):
        return None
    if decoded_bytes:
        pad = col.max_length if t == T.STRING and col.collation == 63 else 0
        return OP_BINARY, prefix, pad, _BINARY_MODES[modes.binary], None
    charset = charset_for(col.collation, mariadb)  # type: ignore[arg-type]
    if charset in _UTF8:
        return OP_TEXT, prefix, 0, 0, None
    if charset in _ASCII_COMPATIBLE:
        return OP_TEXT, prefix, 1, 0, None
    return None
