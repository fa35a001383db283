"""The decoders of TABLE_MAP and rows events (WRITE/UPDATE/DELETE, v1 and v2, MariaDB's compressed ones)."""

from __future__ import annotations

import struct
from typing import Any

from . import events as E
from .compression import mariadb_uncompress_event
from .constants import EventType as ET
from .cursor import Cursor
from .decoding import DecodeContext, register
from .errors import BinlogError
from .rows import compile_rows
from .table_map import parse_table_map


@register(ET.TABLE_MAP_EVENT)
def table_map(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    # Servers repeat the same table map before every rows event: reuse the parsed map (and the
    # row decoders compiled for it) whenever the bytes are identical.
    key = bytes(cur.buf[cur.pos : cur.end])
    tm = ctx.table_map_cache.get(key)
    if tm is None:
        tm = parse_table_map(cur, 4 if ctx.post_header_len(ET.TABLE_MAP_EVENT) == 6 else 6, ctx.is_mariadb)
        if len(ctx.table_map_cache) >= 4096:
            ctx.table_map_cache.clear()
        ctx.table_map_cache[key] = tm
    ctx.table_maps[tm.table_id] = tm
    return E.TableMapEvent(**h, table_map=tm)


_ROWS_KIND = {
    ET.PRE_GA_WRITE_ROWS_EVENT: ("write", 0), ET.PRE_GA_UPDATE_ROWS_EVENT: ("update", 0),
    ET.PRE_GA_DELETE_ROWS_EVENT: ("delete", 0),
    ET.WRITE_ROWS_EVENT_V1: ("write", 1), ET.UPDATE_ROWS_EVENT_V1: ("update", 1),
    ET.DELETE_ROWS_EVENT_V1: ("delete", 1),
    ET.WRITE_ROWS_EVENT: ("write", 2), ET.UPDATE_ROWS_EVENT: ("update", 2),
    ET.DELETE_ROWS_EVENT: ("delete", 2), ET.PARTIAL_UPDATE_ROWS_EVENT: ("update", 2),
    ET.WRITE_ROWS_COMPRESSED_EVENT_V1: ("write", 1), ET.UPDATE_ROWS_COMPRESSED_EVENT_V1: ("update", 1),
    ET.DELETE_ROWS_COMPRESSED_EVENT_V1: ("delete", 1),
    ET.WRITE_ROWS_COMPRESSED_EVENT: ("write", 2), ET.UPDATE_ROWS_COMPRESSED_EVENT: ("update", 2),
    ET.DELETE_ROWS_COMPRESSED_EVENT: ("delete", 2),
}


_ROWS_HEAD = struct.Struct("<IHHH").unpack_from


_ROWS_CLASS = {"write": E.WriteRowsEvent, "update": E.UpdateRowsEvent, "delete": E.DeleteRowsEvent}


_COMPRESSED_ROWS = frozenset(range(ET.WRITE_ROWS_COMPRESSED_EVENT_V1, ET.DELETE_ROWS_COMPRESSED_EVENT + 1))


def _columns(bitmap: int, count: int) -> tuple[int, ...]:
    return tuple(i for i in range(count) if bitmap >> i & 1)


@register(*_ROWS_KIND)
def rows(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    code = h["type_code"]
    kind, version = _ROWS_KIND[code]
    post = ctx.post_header_lengths.get(code, 0)
    extra = None
    if post >= 8 and cur.end - cur.pos >= 11:  # 6-byte table id: one unpack for the fixed part
        low, high, rows_flags, extra_len = _ROWS_HEAD(cur.buf, cur.pos)
        table_id = low | high << 32
        cur.pos += 8
        if version == 2 and post >= 10:
            cur.pos += 2
            if extra_len != 2:
                if extra_len < 2:
                    raise cur.error(f"rows event extra data length {extra_len} < 2")
                extra = cur.take(extra_len - 2, "rows extra data")
    else:
        table_id = cur.uint(4 if post == 6 else 6)
        rows_flags = cur.u16()
        if version == 2 and post >= 10:
            extra_len = cur.u16()
            if extra_len < 2:
                raise cur.error(f"rows event extra data length {extra_len} < 2")
            if extra_len > 2:
                extra = cur.take(extra_len - 2, "rows extra data")
    tm = ctx.table_maps.get(table_id)
    if tm is None:
        raise cur.error(f"rows event for table id {table_id} without a preceding TABLE_MAP event")
    width = cur.buf[cur.pos] if cur.pos < cur.end else 0xFF
    if width < 0xFB:
        cur.pos += 1
    else:
        width = cur.packed()
    if width != len(tm.columns):
        raise cur.error(f"rows event has {width} columns, its table map `{tm.database}`.`{tm.table}` "
                        f"has {len(tm.columns)}")
    nbytes = (width + 7) >> 3
    two = kind == "update" and version  # pre-GA updates have one bitmap for both images
    bitmaps = cur.take(nbytes * 2 if two else nbytes, "column bitmaps")
    key = (code, bitmaps, ctx.columnar)  # the compiled decoder depends only on these
    compiled = tm._decoders.get(key)
    if compiled is None:
        present = int.from_bytes(bitmaps[:nbytes], "little")
        present_after = int.from_bytes(bitmaps[nbytes:], "little") if two else present
        before = _columns(present, width) if kind != "write" else ()
        after = _columns(present_after, width) if kind != "delete" else ()
        partial, pre_ga = code == ET.PARTIAL_UPDATE_ROWS_EVENT, version == 0
        if callable(ctx.columnar):  # a reader's own compiler (the land job's Arrow columns)
            decoder = ctx.columnar(tm, kind, before, after, partial, pre_ga)
        else:
            decoder = compile_rows(tm, kind, before, after, partial, pre_ga, ctx.columnar)
        compiled = tm._decoders[key] = (decoder, before, after)
    decode, before, after = compiled
    if code in _COMPRESSED_ROWS:  # MariaDB compresses the row data after the column bitmaps
        try:
            body = mariadb_uncompress_event(cur.rest())
        except BinlogError as exc:
            raise cur.error(f"compressed rows event: {exc.reason}") from None
        cur = Cursor(body, base=cur.base + cur.pos)
    try:
        data = decode(cur.buf, cur.pos, cur.end)
    except BinlogError as exc:
        exc.position = cur.base + (cur.pos if exc.position is None else exc.position)
        exc.args = (str(exc),)
        raise
    except Exception as exc:  # struct.error, IndexError, UnicodeDecodeError...: all malformed data
        raise cur.error(f"malformed row data for `{tm.database}`.`{tm.table}`: {exc}") from None
    return _ROWS_CLASS[kind](**h, table_id=table_id, rows_flags=rows_flags, extra_data=extra,
                             column_count=width, columns_before=before, columns_after=after,
                             table_map=tm, rows=data)
