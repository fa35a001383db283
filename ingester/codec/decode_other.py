"""The decoders of group replication's and XA's events, MySQL's compressed transaction payloads, and the
LOAD DATA family of MySQL 5.0 and older."""

from __future__ import annotations

from typing import Any

from . import events as E
from .constants import EventType as ET
from .cursor import Cursor
from .decoding import DecodeContext, register, text


@register(ET.TRANSACTION_CONTEXT_EVENT)
def transaction_context(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    uuid_len = cur.u8()
    thread_id = cur.u32()
    gtid_specified = bool(cur.u8())
    snap_len = cur.u32()
    write_len = cur.u32()
    read_len = cur.u32()
    server_uuid = text(cur.take(uuid_len))
    snapshot = cur.take(snap_len)
    write_set = [cur.take(cur.u16()) for _ in range(write_len)]
    read_set = [cur.take(cur.u16()) for _ in range(read_len)]
    return E.TransactionContextEvent(**h, server_uuid=server_uuid, thread_id=thread_id,
                                     gtid_specified=gtid_specified, snapshot_version=snapshot,
                                     write_set=write_set, read_set=read_set)


@register(ET.VIEW_CHANGE_EVENT)
def view_change(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    view_id = text(cur.take(40).rstrip(b"\0"))
    seq = cur.u64()
    n = cur.u32()
    info = {}
    for _ in range(n):
        key = text(cur.take(cur.u16()))
        info[key] = cur.take(cur.u32())
    return E.ViewChangeEvent(**h, view_id=view_id, seq_number=seq, certification_info=info)


@register(ET.XA_PREPARE_LOG_EVENT)
def xa_prepare(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    one_phase = bool(cur.u8())
    fmt = cur.u32()
    glen = cur.u32()
    blen = cur.u32()
    data = cur.take(glen + blen, "XA xid")
    return E.XaPrepareEvent(**h, one_phase=one_phase, format_id=fmt, gtrid=data[:glen], bqual=data[glen:])


@register(ET.TRANSACTION_PAYLOAD_EVENT)
def transaction_payload(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    fields: dict[int, int] = {}
    while cur.remaining:
        kind = cur.packed()
        if kind == 0:  # end of the header
            break
        length = cur.packed()
        cur.need(length, "payload header field")
        fields[kind] = Cursor(cur.buf, cur.pos, cur.pos + length, cur.base).packed()
        cur.pos += length
    size = fields.get(1, cur.remaining)
    if size != cur.remaining:
        raise cur.error(f"payload size {size} but {cur.remaining} bytes remain")
    return E.TransactionPayloadEvent(**h, compression_type=fields.get(2, 255), payload_size=size,
                                     uncompressed_size=fields.get(3), payload=cur.rest())


def _load(ctx: DecodeContext, h: dict[str, Any], cur: Cursor, new_format: bool,
          file_id: bool) -> E.Event:
    thread_id = cur.u32()
    exec_time = cur.u32()
    skip_lines = cur.u32()
    table_len = cur.u8()
    db_len = cur.u8()
    num_fields = cur.u32()
    fid = cur.u32() if file_id else None
    if new_format:
        terms = [cur.take(cur.u8()) for _ in range(5)]
        opt_flags = cur.u8()
        empty_flags = 0
    else:
        terms = [cur.take(1) for _ in range(5)]
        opt_flags = cur.u8()
        empty_flags = cur.u8()
    lens = cur.take(num_fields, "field lengths")
    fields = []
    for n in lens:
        fields.append(text(cur.take(n)))
        cur.u8()
    table = text(cur.take(table_len))
    cur.u8()
    db = text(cur.take(db_len))
    cur.u8()
    if file_id:
        file_name = text(cur.cstring()) if cur.remaining else ""
        block = cur.rest()
    else:
        file_name, block = text(cur.rest().rstrip(b"\0")), None
    return E.LoadEvent(**h, thread_id=thread_id, exec_time=exec_time, skip_lines=skip_lines, database=db,
                       table=table, file_name=file_name, fields=fields, field_term=terms[0],
                       enclosed=terms[1], line_term=terms[2], line_start=terms[3], escaped=terms[4],
                       opt_flags=opt_flags, empty_flags=empty_flags, file_id=fid, block=block)


@register(ET.LOAD_EVENT)
def load(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return _load(ctx, h, cur, new_format=False, file_id=False)


@register(ET.NEW_LOAD_EVENT)
def new_load(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return _load(ctx, h, cur, new_format=True, file_id=False)


@register(ET.CREATE_FILE_EVENT)
def create_file(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return _load(ctx, h, cur, new_format=ctx.binlog_version >= 4, file_id=True)


@register(ET.APPEND_BLOCK_EVENT, ET.BEGIN_LOAD_QUERY_EVENT)
def append_block(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return E.AppendBlockEvent(**h, file_id=cur.u32(), block=cur.rest())


@register(ET.EXEC_LOAD_EVENT, ET.DELETE_FILE_EVENT)
def file_id_event(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return E.FileIdEvent(**h, file_id=cur.u32())
