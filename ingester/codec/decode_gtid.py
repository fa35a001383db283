"""The decoders of GTID events: MySQL's (anonymous, tagged, PREVIOUS_GTIDS) and MariaDB's (GTID, GTID_LIST,
BINLOG_CHECKPOINT)."""

from __future__ import annotations

import struct
from typing import Any

from . import events as E
from .constants import EventType as ET
from .cursor import Cursor
from .decoding import DecodeContext, register, text, uuid_text


def _gtid_fields(cur: Cursor) -> dict[str, Any]:
    out: dict[str, Any] = {"gtid_flags": cur.u8(), "uuid": uuid_text(cur.take(16)), "gno": cur.i64()}
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
            out[name] = uuid_text(bytes(cur.serialized_uint() & 0xFF for _ in range(16)))
        elif name == "tag":
            out[name] = text(cur.take(cur.serialized_uint(), "tag"))
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
        uuid = uuid_text(cur.take(16))
        tag = text(cur.take(cur.serialized_uint(), "tag")) if tagged else ""
        sids.append({"uuid": uuid, "tag": tag, "intervals": _intervals(cur)})
    return E.PreviousGtidsEvent(**h, gtid_set=format_gtid_set(sids), sids=sids)


_MARIADB_GTID = struct.Struct("<QIB").unpack_from


U64 = struct.Struct("<Q").unpack_from


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
    return E.BinlogCheckpointEvent(**h, log_file=text(cur.take(cur.u32(), "file name")))
