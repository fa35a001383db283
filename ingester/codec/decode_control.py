"""The decoders of the small control events: STOP, ROTATE, XID, INTVAR, RAND, USER_VAR, INCIDENT, heartbeats,
ignorable events, ROWS_QUERY / ANNOTATE_ROWS, START_ENCRYPTION."""

from __future__ import annotations

from typing import Any

from . import events as E
from .constants import EventType as ET
from .cursor import Cursor
from .decode_gtid import U64
from .decoding import DecodeContext, register, text
from .errors import EncryptedBinlogError
from .values import compile_decimal


@register(ET.STOP_EVENT)
def stop(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return E.StopEvent(**h)


@register(ET.ROTATE_EVENT)
def rotate(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    pos = cur.u64() if ctx.post_header_len(ET.ROTATE_EVENT) >= 8 else 4
    return E.RotateEvent(**h, next_position=pos, next_file=text(cur.rest()))


@register(ET.XID_EVENT)
def xid(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    if cur.end - cur.pos != 8:
        raise cur.error(f"XID event body is {cur.end - cur.pos} bytes, not 8")
    return E.XidEvent(**h, xid=U64(cur.buf, cur.pos)[0])


@register(ET.INTVAR_EVENT)
def intvar(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    kind = cur.u8()
    names = {1: "LAST_INSERT_ID", 2: "INSERT_ID"}
    return E.IntvarEvent(**h, kind=names.get(kind, f"INVALID_{kind}"), value=cur.u64())


@register(ET.RAND_EVENT)
def rand(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return E.RandEvent(**h, seed1=cur.u64(), seed2=cur.u64())


_USER_VAR_TYPES = {0: "string", 1: "real", 2: "int", 3: "row", 4: "decimal"}


@register(ET.USER_VAR_EVENT)
def user_var(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    name = text(cur.take(cur.u32(), "variable name"))
    if cur.u8():
        return E.UserVarEvent(**h, name=name, value_type=None, charset=None, value=None)
    vtype = cur.u8()
    charset = cur.u32()
    raw = cur.take(cur.u32(), "variable value")
    unsigned = bool(cur.u8() & 1) if cur.remaining else False
    value: Any
    if vtype == 1:
        value = Cursor(raw, base=cur.base).f64()
    elif vtype == 2:
        value = int.from_bytes(raw[:8], "little", signed=not unsigned)
    elif vtype == 4:
        if len(raw) < 2:
            raise cur.error("short DECIMAL user variable")
        size, fn = compile_decimal(raw[0], raw[1])
        if len(raw) < 2 + size:
            raise cur.error("short DECIMAL user variable")
        value = fn(raw, 2)
    elif vtype == 0:
        value = raw if charset == 63 else text(raw)
    else:
        value = raw
    return E.UserVarEvent(**h, name=name, value_type=_USER_VAR_TYPES.get(vtype, str(vtype)),
                          charset=charset, value=value, unsigned=unsigned)


@register(ET.INCIDENT_EVENT)
def incident(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    kind = cur.u16()
    msg = text(cur.take(cur.u8(), "incident message")) if cur.remaining else ""
    return E.IncidentEvent(**h, incident=kind, message=msg)


@register(ET.HEARTBEAT_LOG_EVENT)
def heartbeat(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return E.HeartbeatEvent(**h, log_file=text(cur.rest()))


@register(ET.HEARTBEAT_LOG_EVENT_V2)
def heartbeat_v2(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    log_file, log_position = "", None
    while cur.remaining:
        field = cur.u8()
        if field == 0:  # end mark
            break
        value = cur.take(cur.packed())
        if field == 1:
            log_file = text(value)
        elif field == 2:
            log_position = Cursor(value, base=cur.base).packed()
    return E.HeartbeatEvent(**h, log_file=log_file, log_position=log_position)


@register(ET.IGNORABLE_LOG_EVENT)
def ignorable(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return E.IgnorableEvent(**h, body=cur.rest())


@register(ET.SLAVE_EVENT)
def slave(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return E.SlaveEvent(**h, body=cur.rest())


@register(ET.ROWS_QUERY_LOG_EVENT)
def rows_query(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    cur.u8()  # a truncated length; the text runs to the end of the event
    return E.RowsQueryEvent(**h, query=text(cur.rest()))


@register(ET.ANNOTATE_ROWS_EVENT)
def annotate_rows(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return E.AnnotateRowsEvent(**h, query=text(cur.rest()))


@register(ET.START_ENCRYPTION_EVENT)
def start_encryption(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    raise EncryptedBinlogError(
        "encrypted binlogs are not supported (MariaDB START_ENCRYPTION_EVENT); read them "
        "through the server's replication stream instead", h["position"])
