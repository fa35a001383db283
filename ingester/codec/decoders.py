"""One small decoder per event type, registered by type code.

A decoder gets the decoding context (format description, table maps), the common header
fields and a Cursor over the event body (post-header + payload, checksum excluded).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Protocol

from . import events as E
from .charsets import decoder_for
from .constants import EventType as ET
from .cursor import Cursor
from .errors import BinlogError, EncryptedBinlogError
from .rows import RowsCompiler, compile_rows, mariadb_uncompress_event
from .table_map import TableMap, parse_table_map
from .values import compile_decimal


class DecodeContext(Protocol):
    """The stream's state an event's decoder reads and keeps (decoder.BinlogDecoder holds it)."""

    binlog_version: int
    is_mariadb: bool
    columnar: bool | RowsCompiler
    post_header_lengths: dict[int, int]
    table_maps: dict[int, TableMap]
    table_map_cache: dict[bytes, TableMap]

    def post_header_len(self, type_code: int) -> int: ...


Decoder = Callable[[DecodeContext, dict[str, Any], Cursor], E.Event]
REGISTRY: dict[int, Decoder] = {}


def register(*codes: int) -> Callable[[Decoder], Decoder]:
    def add(fn: Decoder) -> Decoder:
        for code in codes:
            REGISTRY[code] = fn
        return fn

    return add


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _uuid(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# ---------------------------------------------------------------- QUERY and friends

def _status_vars(cur: Cursor, end: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    while cur.pos < end:
        code = cur.u8()
        if code == 0:
            out["flags2"] = cur.u32()
        elif code == 1:
            out["sql_mode"] = cur.u64()
        elif code == 2:
            n = cur.u8()
            out["catalog"] = _text(cur.take(n))
            cur.u8()
        elif code == 3:
            out["auto_increment_increment"] = cur.u16()
            out["auto_increment_offset"] = cur.u16()
        elif code == 4:
            out["character_set_client"] = cur.u16()
            out["collation_connection"] = cur.u16()
            out["collation_server"] = cur.u16()
        elif code == 5:
            out["time_zone"] = _text(cur.take(cur.u8()))
        elif code == 6:
            out["catalog"] = _text(cur.take(cur.u8()))
        elif code == 7:
            out["lc_time_names"] = cur.u16()
        elif code == 8:
            out["collation_database"] = cur.u16()
        elif code == 9:
            out["table_map_for_update"] = cur.u64()
        elif code == 10:
            out["master_data_written"] = cur.u32()
        elif code == 11:
            user = _text(cur.take(cur.u8()))
            host = _text(cur.take(cur.u8()))
            out["invoker"] = f"{user}@{host}"
        elif code == 12:
            n = cur.u8()
            if n == 254:  # OVER_MAX_DBS_IN_EVENT_MTS
                out["updated_db_names"] = None
            else:
                out["updated_db_names"] = [_text(cur.cstring()) for _ in range(n)]
        elif code == 13:
            out["microseconds"] = cur.u24()
        elif code == 14:  # Q_COMMIT_TS (NDB)
            out["commit_ts"] = cur.u64()
        elif code == 15:  # Q_COMMIT_TS2 (NDB)
            out["commit_ts2"] = cur.u64()
        elif code == 16:
            out["explicit_defaults_for_timestamp"] = cur.u8()
        elif code == 17:
            out["ddl_xid"] = cur.u64()
        elif code == 18:
            out["default_collation_for_utf8mb4"] = cur.u16()
        elif code == 19:
            out["sql_require_primary_key"] = cur.u8()
        elif code == 20:
            out["default_table_encryption"] = cur.u8()
        elif code == 128:  # MariaDB Q_HRNOW
            out["hrnow"] = cur.u24()
        elif code == 129:  # MariaDB Q_XID
            out["xid"] = cur.u64()
        elif code == 130:  # MariaDB Q_GTID_FLAGS3
            out["gtid_flags3"] = cur.u8()
        elif code == 131:  # MariaDB Q_CHARACTER_SET_COLLATIONS
            n = cur.u8()
            out["character_set_collations"] = [(cur.u16(), cur.u16()) for _ in range(n)]
        else:
            # Unknown variables have no length: keep the rest raw rather than guess.
            out[f"unknown_{code}"] = cur.take(end - cur.pos).hex()
    if cur.pos != end:
        raise cur.error("status variables overrun their declared length")
    return out


def _query_text(raw: bytes, status: dict[str, Any]) -> str:
    """The statement in the client's character set (the charsets module knows every collation id)."""
    text = decoder_for(status.get("character_set_client", 33))(raw)
    return text if isinstance(text, str) else raw.decode("utf-8", "surrogateescape")


def _query_common(ctx: DecodeContext, h: dict[str, Any], cur: Cursor, extra_post_header: int = 0,
                  compressed: bool = False) -> dict[str, Any]:
    post = ctx.post_header_len(h["type_code"])
    start = cur.pos
    thread_id = cur.u32()
    exec_time = cur.u32()
    db_len = cur.u8()
    error_code = cur.u16()
    status_len = cur.u16() if post - extra_post_header >= 13 else 0
    extra = {}
    if extra_post_header:
        extra = {"file_id": cur.u32(), "fn_pos_start": cur.u32(), "fn_pos_end": cur.u32(),
                 "dup_handling": cur.u8()}
    cur.pos = start + post
    cur.need(status_len, "status variables")
    status = _status_vars(cur, cur.pos + status_len)
    database = _text(cur.take(db_len, "database name"))
    cur.u8()
    raw = cur.rest()
    if compressed:
        try:
            raw = mariadb_uncompress_event(raw)
        except BinlogError as exc:
            raise cur.error(f"QUERY_COMPRESSED: {exc.reason}") from None
    return dict(thread_id=thread_id, exec_time=exec_time, error_code=error_code, database=database,
                query=_query_text(raw, status), status_vars=status, compressed=compressed, **extra)


@register(ET.QUERY_EVENT)
def query(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return E.QueryEvent(**h, **_query_common(ctx, h, cur))


@register(ET.QUERY_COMPRESSED_EVENT)
def query_compressed(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return E.QueryEvent(**h, **_query_common(ctx, h, cur, compressed=True))


@register(ET.EXECUTE_LOAD_QUERY_EVENT)
def execute_load_query(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return E.ExecuteLoadQueryEvent(**h, **_query_common(ctx, h, cur, extra_post_header=13))


# ---------------------------------------------------------------- small control events


@register(ET.STOP_EVENT)
def stop(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return E.StopEvent(**h)


@register(ET.ROTATE_EVENT)
def rotate(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    pos = cur.u64() if ctx.post_header_len(ET.ROTATE_EVENT) >= 8 else 4
    return E.RotateEvent(**h, next_position=pos, next_file=_text(cur.rest()))


@register(ET.XID_EVENT)
def xid(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    if cur.end - cur.pos != 8:
        raise cur.error(f"XID event body is {cur.end - cur.pos} bytes, not 8")
    return E.XidEvent(**h, xid=_U64(cur.buf, cur.pos)[0])


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
    name = _text(cur.take(cur.u32(), "variable name"))
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
        value = raw if charset == 63 else _text(raw)
    else:
        value = raw
    return E.UserVarEvent(**h, name=name, value_type=_USER_VAR_TYPES.get(vtype, str(vtype)),
                          charset=charset, value=value, unsigned=unsigned)


@register(ET.INCIDENT_EVENT)
def incident(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    kind = cur.u16()
    msg = _text(cur.take(cur.u8(), "incident message")) if cur.remaining else ""
    return E.IncidentEvent(**h, incident=kind, message=msg)


@register(ET.HEARTBEAT_LOG_EVENT)
def heartbeat(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return E.HeartbeatEvent(**h, log_file=_text(cur.rest()))


@register(ET.HEARTBEAT_LOG_EVENT_V2)
def heartbeat_v2(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    log_file, log_position = "", None
    while cur.remaining:
        field = cur.u8()
        if field == 0:  # end mark
            break
        value = cur.take(cur.packed())
        if field == 1:
            log_file = _text(value)
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
    return E.RowsQueryEvent(**h, query=_text(cur.rest()))


@register(ET.ANNOTATE_ROWS_EVENT)
def annotate_rows(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return E.AnnotateRowsEvent(**h, query=_text(cur.rest()))


@register(ET.START_ENCRYPTION_EVENT)
def start_encryption(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    raise EncryptedBinlogError(
        "encrypted binlogs are not supported (MariaDB START_ENCRYPTION_EVENT); read them "
        "through the server's replication stream instead", h["position"])


# ---------------------------------------------------------------- table map and rows


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


# ---------------------------------------------------------------- GTIDs


def _gtid_fields(cur: Cursor) -> dict[str, Any]:
    out: dict[str, Any] = {"gtid_flags": cur.u8(), "uuid": _uuid(cur.take(16)), "gno": cur.i64()}
    if cur.remaining >= 17 and cur.buf[cur.pos] == 2:  # LOGICAL_TIMESTAMP_TYPECODE
        cur.u8()
        out["last_committed"] = cur.i64()
        out["sequence_number"] = cur.i64()
        if cur.remaining >= 7:
            ts = cur.uint(7)
            if ts & (1 << 55):
                out["immediate_commit_timestamp"] = ts & ~(1 << 55)
                out["original_commit_timestamp"] = cur.uint(7)
            else:
                out["immediate_commit_timestamp"] = out["original_commit_timestamp"] = ts
            if cur.remaining:
                out["transaction_length"] = cur.packed()
            if cur.remaining >= 4:
                v = cur.u32()
                if v & (1 << 31):
                    out["immediate_server_version"] = v & ~(1 << 31)
                    out["original_server_version"] = cur.u32()
                else:
                    out["immediate_server_version"] = out["original_server_version"] = v
            if cur.remaining >= 8:
                out["commit_group_ticket"] = cur.u64()
    return out


@register(ET.GTID_LOG_EVENT)
def gtid(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return E.GtidEvent(**h, **_gtid_fields(cur))


@register(ET.ANONYMOUS_GTID_LOG_EVENT)
def anonymous_gtid(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return E.AnonymousGtidEvent(**h, **_gtid_fields(cur))


_TAGGED_FIELDS = ("gtid_flags", "uuid", "gno", "tag", "last_committed", "sequence_number",
                  "immediate_commit_timestamp", "original_commit_timestamp", "transaction_length",
                  "immediate_server_version", "original_server_version", "commit_group_ticket")
_TAGGED_SIGNED = frozenset(("gno", "last_committed", "sequence_number"))


@register(ET.GTID_TAGGED_LOG_EVENT)
def gtid_tagged(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    """MySQL 8.4+ GTID with a tag, in the mysql::serialization format (field id + value)."""
    version = cur.serialized_uint()
    if version != 1:
        raise cur.error(f"unsupported GTID_TAGGED serialization version {version}")
    start = cur.pos - 1
    size = cur.serialized_uint()
    end = start + size
    if size < 3 or end > cur.end:
        raise cur.error(f"GTID_TAGGED message size {size} does not fit the event")
    cur.serialized_uint()  # last non-ignorable field id
    out: dict[str, Any] = {"gtid_flags": 0, "uuid": "", "gno": 0}
    while cur.pos < end:
        fid = cur.serialized_uint()
        if fid >= len(_TAGGED_FIELDS):
            raise cur.error(f"unknown GTID_TAGGED field {fid}")
        name = _TAGGED_FIELDS[fid]
        if name == "uuid":
            out[name] = _uuid(bytes(cur.serialized_uint() & 0xFF for _ in range(16)))
        elif name == "tag":
            out[name] = _text(cur.take(cur.serialized_uint(), "tag"))
        elif name in _TAGGED_SIGNED:
            out[name] = cur.serialized_int()
        else:
            out[name] = cur.serialized_uint()
    out.setdefault("original_commit_timestamp", out.get("immediate_commit_timestamp"))
    out.setdefault("original_server_version", out.get("immediate_server_version"))
    return E.GtidTaggedEvent(**h, **out)


def _intervals(cur: Cursor) -> list[tuple[int, int]]:
    n = cur.u64()
    cur.need(n * 16, "GTID intervals")
    return [(cur.i64(), cur.i64()) for _ in range(n)]


def format_gtid_set(sids: list[dict[str, Any]]) -> str:
    parts = []
    for sid in sids:
        ranges = ":".join(f"{s}" if e == s + 1 else f"{s}-{e - 1}" for s, e in sid["intervals"])
        tag = f":{sid['tag']}" if sid.get("tag") else ""
        parts.append(f"{sid['uuid']}{tag}:{ranges}")
    return ",".join(parts)


@register(ET.PREVIOUS_GTIDS_LOG_EVENT)
def previous_gtids(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    head = cur.take(8, "GTID count")
    tagged = head[0] == 1 and head[7] == 1  # MySQL 8.3+ tagged format marker in first and last byte
    count = int.from_bytes(head[1:7], "little") if tagged else int.from_bytes(head, "little")
    cur.need(count * (16 if tagged else 24), "GTID set")
    sids = []
    for _ in range(count):
        uuid = _uuid(cur.take(16))
        tag = _text(cur.take(cur.serialized_uint(), "tag")) if tagged else ""
        sids.append({"uuid": uuid, "tag": tag, "intervals": _intervals(cur)})
    return E.PreviousGtidsEvent(**h, gtid_set=format_gtid_set(sids), sids=sids)


_MARIADB_GTID = struct.Struct("<QIB").unpack_from
_U64 = struct.Struct("<Q").unpack_from


@register(ET.GTID_EVENT)
def mariadb_gtid(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    cur.need(13, "GTID")
    seq, domain, flags = _MARIADB_GTID(cur.buf, cur.pos)
    cur.pos += 13
    if flags & 2:  # FL_GROUP_COMMIT_ID
        commit_id = cur.u64()
    else:
        commit_id = None
    if cur.end - cur.pos == 6 and not flags & (64 | 128):  # the common case: 6 bytes of padding
        return E.MariadbGtidEvent(**h, domain_id=domain, sequence=seq, gtid_flags=flags, commit_id=commit_id)
    out: dict[str, Any] = {"commit_id": commit_id}
    if commit_id is None:
        if flags & (64 | 128):  # FL_PREPARED_XA | FL_COMPLETED_XA
            fmt = cur.u32()
            glen = cur.u8()
            blen = cur.u8()
            data = cur.take(glen + blen, "XA xid")
            out["xid"] = {"format_id": fmt, "gtrid": data[:glen], "bqual": data[glen:]}
        else:
            cur.take(min(6, cur.remaining))
    if cur.remaining:
        extra_flags = cur.u8()
        out["flags_extra"] = extra_flags
        if extra_flags & 1:  # FL_EXTRA_MULTI_ENGINE_E1
            out["extra_engines"] = cur.u8()
        if extra_flags & (2 | 4 | 8) and cur.remaining >= 8:  # start/commit/rollback ALTER
            out["sa_seq_no"] = cur.u64()
        if cur.remaining:
            out["extra"] = cur.rest()
    return E.MariadbGtidEvent(**h, domain_id=domain, sequence=seq, gtid_flags=flags, **out)


@register(ET.GTID_LIST_EVENT)
def mariadb_gtid_list(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    word = cur.u32()
    count, list_flags = word & 0x0FFFFFFF, word >> 28
    cur.need(count * 16, "GTID list")
    gtids = []
    for _ in range(count):
        domain = cur.u32()
        server = cur.u32()
        gtids.append(f"{domain}-{server}-{cur.u64()}")
    return E.MariadbGtidListEvent(**h, list_flags=list_flags, gtids=gtids)


@register(ET.BINLOG_CHECKPOINT_EVENT)
def binlog_checkpoint(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    return E.BinlogCheckpointEvent(**h, log_file=_text(cur.take(cur.u32(), "file name")))


# ---------------------------------------------------------------- group replication, XA


@register(ET.TRANSACTION_CONTEXT_EVENT)
def transaction_context(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    uuid_len = cur.u8()
    thread_id = cur.u32()
    gtid_specified = bool(cur.u8())
    snap_len = cur.u32()
    write_len = cur.u32()
    read_len = cur.u32()
    server_uuid = _text(cur.take(uuid_len))
    snapshot = cur.take(snap_len)
    write_set = [cur.take(cur.u16()) for _ in range(write_len)]
    read_set = [cur.take(cur.u16()) for _ in range(read_len)]
    return E.TransactionContextEvent(**h, server_uuid=server_uuid, thread_id=thread_id,
                                     gtid_specified=gtid_specified, snapshot_version=snapshot,
                                     write_set=write_set, read_set=read_set)


@register(ET.VIEW_CHANGE_EVENT)
def view_change(ctx: DecodeContext, h: dict[str, Any], cur: Cursor) -> E.Event:
    view_id = _text(cur.take(40).rstrip(b"\0"))
    seq = cur.u64()
    n = cur.u32()
    info = {}
    for _ in range(n):
        key = _text(cur.take(cur.u16()))
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


# ---------------------------------------------------------------- compressed transactions


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


# ---------------------------------------------------------------- LOAD DATA family (MySQL <= 5.0)


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
        fields.append(_text(cur.take(n)))
        cur.u8()
    table = _text(cur.take(table_len))
    cur.u8()
    db = _text(cur.take(db_len))
    cur.u8()
    if file_id:
        file_name = _text(cur.cstring()) if cur.remaining else ""
        block = cur.rest()
    else:
        file_name, block = _text(cur.rest().rstrip(b"\0")), None
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
