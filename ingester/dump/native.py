"""The JSONL renderer of `binlake dump`: the native emitter (``_native.c``) with Python behind it.

The C loop renders the events that dominate row-based binlogs (MariaDB GTIDs, XIDs, ANNOTATE_ROWS,
repeated table maps, rows of common column types) straight from the file's bytes into JSON lines.
At any other event -- or anything unusual or malformed -- it stops, and the Python decoder (the
reference implementation) renders that one event or raises its BinlogError, so the output and the
errors are the same either way. Row images are walked by a plan built here once per table map,
rows event type and column bitmaps; column types the plan does not cover leave the event to Python.

``BINLAKE_PURE_PYTHON=1`` (or a missing extension) makes every event go through Python.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from ..codec import BinlogDecoder
from ..codec.charset_notices import notice_unknown_charsets
from ..codec.charsets import charset_for, keeps_bytes
from ..codec.constants import ColumnType as T
from ..codec.decoder import CHECKSUM_CRC32
from ..codec.events import EVENT_NAMES
from ..codec.table_map import Column, TableMap
from ..extensions import load as load_extension
from ..sources.binlog_file import frames_in
from .jsonl import frame_lines

native = load_extension("ingester.dump._native")

# Column ops of _native.c's RowsPlan (its enum, in order).
(OP_INT, OP_FLOAT, OP_DOUBLE, OP_YEAR, OP_DECIMAL, OP_DATE, OP_DATETIME2, OP_TIMESTAMP2, OP_TIME2, OP_BIT,
 OP_ENUM, OP_SET, OP_TEXT, OP_BINARY, OP_NULL) = range(1, 16)
_INT_WIDTH: dict[int, int] = {T.TINY: 1, T.SHORT: 2, T.INT24: 3, T.LONG: 4, T.LONGLONG: 8}
_SIMPLE: dict[int, int] = {T.FLOAT: OP_FLOAT, T.DOUBLE: OP_DOUBLE, T.YEAR: OP_YEAR, T.DATE: OP_DATE, T.NEWDATE: OP_DATE,
           T.NULL: OP_NULL}
_FRACTIONAL: dict[int, int] = {T.DATETIME2: OP_DATETIME2, T.TIMESTAMP2: OP_TIMESTAMP2, T.TIME2: OP_TIME2}
_STRINGS = (T.VARCHAR, T.VAR_STRING, T.STRING)
_BLOBS = (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB)
_UTF8 = frozenset(("utf8mb4", "utf8mb3", "utf8"))
_ASCII_COMPATIBLE = frozenset(("latin1", "ascii"))  # decoded like ASCII below 0x80
_KINDS = {23: "write", 30: "write", 24: "update", 31: "update", 25: "delete", 32: "delete"}
_IMAGE_PREFIXES = {"write": (b'{"after":{',), "delete": (b'{"before":{',),
                   "update": (b'{"before":{', b',"after":{')}
_V1_ROWS, _V2_ROWS = (23, 24, 25), (30, 31, 32)

ColumnOp = tuple[int, int, int, tuple[bytes, ...] | None]


def render_jsonl(dec: BinlogDecoder, buf: Any, pos: int, stop: int | None, name: str) -> Iterator[bytes]:
    """JSON lines of the events starting in ``buf[pos:stop]``; errors name ``name`` like frames_in's."""
    if native is None:
        yield from frame_lines(dec, frames_in(buf, pos, stop, dec, name))
        return
    end = len(buf) if stop is None else min(stop, len(buf))
    while pos < end:
        if dec._plain_v4:
            posts = dec.post_header_lengths
            lines, pos, missing = native.render(
                buf, pos, end, dec.checksum == CHECKSUM_CRC32, dec.verify_checksums, dec.table_maps,
                dec.table_map_cache, all(posts.get(c) == 8 for c in _V1_ROWS),
                all(posts.get(c) == 10 for c in _V2_ROWS))
            if lines:
                yield lines
            if missing is not None:
                tm, key = missing
                notice_unknown_charsets(tm)
                tm.jsonl_plans[key] = rows_plan(tm, key)
                continue
            if pos >= end:
                break
        # An event the native loop leaves to Python (framing errors are raised here too).
        frame = next(frames_in(buf, pos, end, dec, name))
        yield from frame_lines(dec, (frame,))
        pos += len(frame[1])


def rows_plan(tm: TableMap, key: bytes) -> Any:
    """The RowsPlan for rows events of type ``key[0]`` with column bitmaps ``key[1:]`` on ``tm``,
    or None when Python must render them (a column type or charset the plan does not cover)."""
    kind = _KINDS[key[0]]
    width = len(tm.columns)
    nbytes = (width + 7) >> 3
    bitmaps = key[1:]
    if not width or len(bitmaps) != nbytes * (2 if kind == "update" else 1):
        return None
    images = [int.from_bytes(bitmaps[i : i + nbytes], "little") for i in range(0, len(bitmaps), nbytes)]
    specs = []
    for prefix, bitmap in zip(_IMAGE_PREFIXES[kind], images, strict=True):
        cols = [c for c in tm.columns if bitmap >> c.index & 1]
        if len({c.name for c in cols}) != len(cols):
            return None  # duplicate names: the dict keeps the last value at the first position
        spec = []
        for k, col in enumerate(cols):
            op = _column_op(col, tm.is_mariadb)
            if op is None:
                return None
            try:
                key_json = orjson.dumps(col.name)
            except orjson.JSONEncodeError:
                return None
            spec.append(((b"," if k else b"") + key_json + b":", *op))
        specs.append((prefix, tuple(spec)))
    if not any(spec for _, spec in specs):
        return None
    try:
        head = b'{"type":%s,"type_code":%d,"position":' % (orjson.dumps(EVENT_NAMES[key[0]]), key[0])
        middle = b',"database":%s,"table":%s,"table_id":' % (orjson.dumps(tm.database), orjson.dumps(tm.table))
    except orjson.JSONEncodeError:
        return None
    assert native is not None
    return native.RowsPlan((head, middle, width, tuple(specs)))


def _column_op(col: Column, mariadb: bool) -> ColumnOp | None:
    """How the plan renders one column, exactly as rows.py decodes it; None if it does not."""
    t, meta = col.type, col.meta
    if t in _INT_WIDTH:
        return OP_INT, _INT_WIDTH[t], int(bool(col.unsigned)), None
    if t in _SIMPLE:
        return _SIMPLE[t], 0, 0, None
    if t == T.NEWDECIMAL:
        precision, scale = meta >> 8, meta & 0xFF
        if 0 < precision <= 65 and 0 <= scale <= 30 and scale <= precision:
            return OP_DECIMAL, precision, scale, None
        return None
    if t in _FRACTIONAL:
        return (_FRACTIONAL[t], meta, 0, None) if 0 <= meta <= 6 else None
    if t == T.BIT:
        nbytes = (meta >> 8) + (1 if meta & 0xFF else 0)
        return (OP_BIT, nbytes, 0, None) if 1 <= nbytes <= 8 and meta & 0xFF <= 7 else None
    if t in (T.ENUM, T.SET):
        size = meta & 0xFF
        if not 1 <= size <= 8:
            return None
        try:
            if t == T.ENUM and col.enum_values is not None:
                return OP_ENUM, size, 0, tuple(orjson.dumps(label) for label in ("", *col.enum_values))
            if t == T.SET and col.set_values is not None:
                return OP_SET, size, 0, tuple(orjson.dumps(label)[1:-1] for label in col.set_values)
        except orjson.JSONEncodeError:  # a label with undecodable bytes: Python renders it (U+FFFD)
            return None
        return OP_ENUM, size, 0, ()  # no labels: the number
    if t in _STRINGS:
        prefix = 1 if col.max_length < 256 else 2
        pad = col.max_length if t == T.STRING else 0
    elif t in _BLOBS or t == T.GEOMETRY:
        if not 1 <= meta <= 4:
            return None
        prefix, pad = meta, 0
    else:
        return None
    if col.collation == 63 or t == T.GEOMETRY:
        return OP_BINARY, prefix, pad, None
    if keeps_bytes(col.collation, mariadb):  # charset unknown: the bytes as logged, unpadded
        return OP_BINARY, prefix, 0, None
    charset = charset_for(col.collation, mariadb)  # type: ignore[arg-type]
    if charset in _UTF8:
        return OP_TEXT, prefix, 0, None
    if charset in _ASCII_COMPATIBLE:
        return OP_TEXT, prefix, 1, None
    return None
