"""mysqlbinlog --verbose style text, optionally with the --hexdump layout of each event.

Times are printed in UTC (mysqlbinlog uses the local time zone), so output is reproducible.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import orjson

from ..codec import events as E
from ..codec.decoder import CHECKSUM_CRC32, BinlogDecoder
from ..codec.events import EVENT_NAMES
from ..codec.jsonb import JSON_NULL
from .jsonl import replace_surrogates

_HEX_HEADER = "# Position  Timestamp   Type   Source ID        Size      Source Pos    Flags"


def _stamp(ts: int) -> str:
    return time.strftime("%y%m%d %H:%M:%S", time.gmtime(ts))


def hexdump(raw: bytes, position: int, header_len: int) -> Iterator[str]:
    """The event's bytes laid out as mysqlbinlog --hexdump does: header fields, then 16 per line."""
    yield _HEX_HEADER
    h = raw[:header_len]

    def hx(b: bytes) -> str:
        return " ".join(f"{x:02x}" for x in b)

    if header_len >= 19:
        yield (f"# {position:08x} {hx(h[0:4])}   {hx(h[4:5])}   {hx(h[5:9])}   {hx(h[9:13])}   "
               f"{hx(h[13:17])}   {hx(h[17:19])}")
    else:
        yield f"# {position:08x} {hx(h[0:4])}   {hx(h[4:5])}   {hx(h[5:9])}   {hx(h[9:13])}"
    for off in range(header_len, len(raw), 16):
        chunk = raw[off : off + 16]
        left = hx(chunk[:8])
        right = hx(chunk[8:])
        text = "".join(chr(c) if chr(c).isascii() and chr(c).isalnum() else "." for c in chunk)
        yield f"# {position + off:08x} {left:<23}  {right:<23} |{text}|"


_QUOTED = [chr(b) if 0x20 <= b < 0x7F else f"\\x{b:02x}" for b in range(256)]
_QUOTED[0x27], _QUOTED[0x5C] = "\\'", "\\\\"


def _sql_value(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, bytes):  # as mysqlbinlog quotes strings: printable ASCII as is, other bytes \xNN
        return "'" + "".join(_QUOTED[b] for b in v) + "'"
    if isinstance(v, str):
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(v, list) and all(isinstance(x, float) for x in v):
        return "[" + ",".join(repr(x) for x in v) + "]"
    return "'" + _dumps(v) + "'"


def _dumps(v: Any) -> str:
    """JSON text of ``v``; undecodable bytes in its strings (lone surrogates) become U+FFFD, as in JSONL."""
    try:
        return orjson.dumps(v, default=_json_default).decode()
    except orjson.JSONEncodeError:
        return orjson.dumps(replace_surrogates(v), default=_json_default).decode()


def _json_default(v: Any) -> Any:
    if v is JSON_NULL:
        return None  # the null document: 'null', as mysqlbinlog prints it
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    return str(v)


def _image(label: str, names: list[str], image: dict[str, Any], idx: tuple[int, ...]) -> Iterator[str]:
    yield f"### {label}"
    for i in idx:  # by name: a malformed map may repeat a name, and the image then holds its last value
        col = names[i]
        v = image[col]
        comment = "" if col == f"@{i + 1}" else f" /* {col} */"
        yield f"###   @{i + 1}={_sql_value(v)}{comment}"


def describe(ev: E.Event) -> Iterator[str]:
    """The event's summary line(s) and, for rows events, the pseudo-SQL of each row."""
    name = EVENT_NAMES.get(ev.type_code, "unknown")
    if isinstance(ev, E.RowsEvent):
        tm = ev.table_map
        yield f"{name}: table id {ev.table_id} flags: {ev.rows_flags}"
        target = f"`{tm.database}`.`{tm.table}`"
        names = tm.column_names
        for row in ev.rows:
            if ev.kind == "write":
                yield f"### INSERT INTO {target}"
                yield from _image("SET", names, row["after"], ev.columns_after)
            elif ev.kind == "delete":
                yield f"### DELETE FROM {target}"
                yield from _image("WHERE", names, row["before"], ev.columns_before)
            else:
                yield f"### UPDATE {target}"
                yield from _image("WHERE", names, row["before"], ev.columns_before)
                yield from _image("SET", names, row["after"], ev.columns_after)
        return
    if isinstance(ev, E.QueryEvent):
        yield f"Query\tthread_id={ev.thread_id}\texec_time={ev.exec_time}\terror_code={ev.error_code}"
        if ev.database:
            yield f"use `{ev.database}`/*!*/;"
        yield f"{ev.query}\n/*!*/;"
        return
    if isinstance(ev, E.TableMapEvent):
        tm = ev.table_map
        yield f"Table_map: `{tm.database}`.`{tm.table}` mapped to number {tm.table_id}"
        return
    if isinstance(ev, E.FormatDescriptionEvent):
        yield (f"Start: binlog v {ev.binlog_version}, server v {ev.server_version} created "
               f"{_stamp(ev.create_timestamp)}")
        return
    if isinstance(ev, E.XidEvent):
        yield f"Xid = {ev.xid}\nCOMMIT/*!*/;"
        return
    if isinstance(ev, (E.GtidEvent, E.MariadbGtidEvent)):
        yield f"GTID {ev.gtid}"
        return
    if isinstance(ev, E.RotateEvent):
        yield f"Rotate to {ev.next_file}  pos: {ev.next_position}"
        return
    fields = {k: v for k, v in ev.to_dict().items() if k not in (
        "type", "type_code", "position", "log_pos", "timestamp", "server_id", "flags", "in_payload")}
    body = _dumps(fields) if fields else ""
    yield f"{name} {body}".rstrip()


def event_text(dec: BinlogDecoder, ev: E.Event, raw: bytes | None, with_hexdump: bool) -> str:
    """The text block of one event: '# at N', the header line, hexdump, description."""
    lines = [f"# at {ev.position}" + (" (in compressed transaction)" if ev.in_payload else "")]
    crc = ""
    if raw is not None and dec.checksum == CHECKSUM_CRC32 and not ev.in_payload:
        crc = f" CRC32 0x{int.from_bytes(raw[-4:], 'little'):08x}"
    lines.append(f"#{_stamp(ev.timestamp)} server id {ev.server_id}  end_log_pos {ev.log_pos}{crc}")
    if with_hexdump and raw is not None:
        lines.extend(hexdump(raw, ev.position, dec.header_len))
    lines.extend(describe(ev))
    return "\n".join(lines) + "\n"
