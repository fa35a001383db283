"""The decoders of QUERY events and their kin (compressed QUERY, EXECUTE_LOAD_QUERY): status variables, the
statement's text."""

from __future__ import annotations

from typing import Any

from . import events as E
from .charsets import decoder_for
from .compression import mariadb_uncompress_event
from .constants import EventType as ET
from .cursor import Cursor
from .decoding import DecodeContext, register, text
from .errors import BinlogError


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
            out["catalog"] = text(cur.take(n))
            cur.u8()
        elif code == 3:
            out["auto_increment_increment"] = cur.u16()
            out["auto_increment_offset"] = cur.u16()
        elif code == 4:
            out["character_set_client"] = cur.u16()
            out["collation_connection"] = cur.u16()
            out["collation_server"] = cur.u16()
        elif code == 5:
            out["time_zone"] = text(cur.take(cur.u8()))
        elif code == 6:
            out["catalog"] = text(cur.take(cur.u8()))
        elif code == 7:
            out["lc_time_names"] = cur.u16()
        elif code == 8:
            out["collation_database"] = cur.u16()
        elif code == 9:
            out["table_map_for_update"] = cur.u64()
        elif code == 10:
            out["master_data_written"] = cur.u32()
        elif code == 11:
            user = text(cur.take(cur.u8()))
            host = text(cur.take(cur.u8()))
            out["invoker"] = f"{user}@{host}"
        elif code == 12:
            n = cur.u8()
            if n == 254:  # OVER_MAX_DBS_IN_EVENT_MTS
                out["updated_db_names"] = None
            else:
                out["updated_db_names"] = [text(cur.cstring()) for _ in range(n)]
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
    database = text(cur.take(db_len, "database name"))
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
