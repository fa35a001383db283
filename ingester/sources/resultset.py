"""Rows of a text result set, read off the connection in large chunks (snapshots read whole tables).

pymysql sends the query and reads the column definitions; the row packets then come through the same
``PacketFramer`` as the binlog stream, and each row is cut into its values here: ``parse_row`` is the
reference, ``_textrows.c`` the native reader that takes the common packets (every value a string
converted by its column's kind, no per-value Python call). pymysql's row reader costs more than the
rest of a snapshot together; the values come out as pymysql gives them (its encoding per column),
with two conversions fused in: integers and UTF-8 text.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson

from ..extensions import load as load_extension
from .errors import ReplicationError
from .replication import PacketFramer

_native = load_extension("ingester.sources._textrows")
_READ_SIZE = 1 << 20
_LOST = 2013  # pymysql's "Lost connection to MySQL server during query"

# A column's kind: how its value's bytes become the row's value.
BYTES, ASCII, UTF8, UTF8_REPLACE, INT = b"b", b"a", b"u", b"r", b"i"
JSON_KINDS = frozenset(ASCII + UTF8 + UTF8_REPLACE + INT)  # what fetch_json takes


def native() -> bool:
    """Whether the native reader is there (fetch_json without it parses each row in Python: slow)."""
    return _native is not None


class JsonRows(NamedTuple):
    """Rows fetched as JSON: ``groups`` are JSON arrays of rows (orjson's bytes for the rows ``fetch`` would
    give), each within the size asked for unless one row is larger; ``last`` is the last row as ``fetch``
    gives it (None when there are no rows)."""

    groups: list[bytes]
    rows: int
    last: list[Any] | None

    @property
    def size(self) -> int:
        return sum(len(g) for g in self.groups)


class _Groups:
    """Row JSON gathered into groups of at most ``max_bytes`` bracketed (fragments: rows joined by commas)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.done: list[bytes] = []
        self.parts: list[bytes] = []
        self.size = 0  # the open group's bracketed size; 0: none open

    def add(self, fragment: bytes, continues: bool) -> None:
        if not continues:
            self.close()
            self.size = 1
        self.parts.append(fragment)
        self.size += len(fragment) + 1

    def add_row(self, row_json: bytes) -> None:
        self.add(row_json, 0 < self.size and self.size + len(row_json) + 1 <= self.max_bytes)

    def close(self) -> None:
        if self.parts:
            self.done.append(b"[" + b",".join(self.parts) + b"]")
        self.parts, self.size = [], 0


def _value(kind: int, data: bytes) -> Any:
    if kind == 0x62:  # b
        return data
    if kind == 0x61:  # a
        return data.decode("ascii")
    if kind == 0x75:  # u
        return data.decode("utf-8")
    if kind == 0x72:  # r
        return data.decode("utf-8", "replace")
    return int(data.decode("ascii"))  # i


def parse_row(payload: bytes, kinds: bytes) -> list[Any]:
    """One row packet's values, NULL as None (length-encoded strings, 0xFB for NULL). ValueError names
    the byte where the packet goes wrong."""
    row: list[Any] = []
    at, end = 0, len(payload)
    for c, kind in enumerate(kinds):
        if at >= end:
            raise ValueError(f"row packet of {end} bytes ends before its column {c + 1} of {len(kinds)}")
        b = payload[at]
        if b == 0xFB:
            row.append(None)
            at += 1
            continue
        if b < 0xFB:
            length, at = b, at + 1
        elif b in (0xFC, 0xFD, 0xFE):
            size = {0xFC: 2, 0xFD: 3, 0xFE: 8}[b]
            if end - at - 1 < size:
                raise ValueError(f"row packet of {end} bytes cut in column {c + 1}'s length at byte {at}")
            length, at = int.from_bytes(payload[at + 1 : at + 1 + size], "little"), at + 1 + size
        else:
            raise ValueError(f"row packet with length prefix 0x{b:02x} at byte {at} (column {c + 1})")
        if length > end - at:
            raise ValueError(f"row packet of {end} bytes: column {c + 1}'s {length} bytes at byte {at} run past it")
        row.append(_value(kind, payload[at : at + length]))
        at += length
    if at != end:
        raise ValueError(f"row packet of {end} bytes has {end - at} bytes after its {len(kinds)} columns")
    return row


class TextResult:
    """The rest of an unbuffered pymysql cursor's result, read by this module; ``kinds`` has one kind per
    column. ``fetch`` returns lists of values, [] once the result has ended (pymysql's result is then
    finished as its own reader would leave it: the connection is ready for the next query)."""

    def __init__(self, cursor: Any, kinds: bytes, source: str) -> None:
        self.conn = cursor.connection
        self.result = cursor._result
        self.kinds = kinds
        self.source = source
        self.rows = 0
        self.done = self.result is None or not self.result.unbuffered_active
        self.framer = PacketFramer(first_seq=self.conn._next_seq_id)
        if not self.done and len(self.result.fields) != len(kinds):
            raise ReplicationError(f"{source}: {len(self.result.fields)} columns in the result, {len(kinds)} expected")

    def fetch(self, limit: int = -1) -> list[list[Any]]:
        """Up to ``limit`` rows (-1: all)."""
        out: list[list[Any]] = []
        framer = self.framer
        while not self.done and len(out) != limit:
            if _native is not None and not framer.in_multi_packet:
                buf, pos = framer.pending()
                rows, at, seq = _native.text_rows(buf, pos, framer.next_seq, self.kinds,
                                                  -1 if limit < 0 else limit - len(out))
                if rows:
                    framer.advance(at, seq)
                    out += rows
                    self.rows += len(rows)
                    continue
            payloads = framer.packets(1)
            if not payloads:
                self._read()
                continue
            payload = payloads[0]
            if payload[:1] == b"\xff" or (payload[:1] == b"\xfe" and len(payload) < 9):
                self._end(payload)
                break
            try:
                out.append(parse_row(payload, self.kinds))
            except (ValueError, UnicodeDecodeError) as exc:
                raise ReplicationError(f"{self.source}: row {self.rows + 1} of the result: {exc}") from None
            self.rows += 1
        return out

    def fetch_json(self, limit: int, max_bytes: int) -> JsonRows:
        """Up to ``limit`` rows (-1: all) as JSON (``JsonRows``), for columns of ``JSON_KINDS`` only: the
        native reader writes them without Python objects; the packets it leaves are parsed here."""
        groups, rows, last = _Groups(max_bytes), 0, None
        framer = self.framer
        while not self.done and rows != limit:
            if _native is not None and not framer.in_multi_packet:
                buf, pos = framer.pending()
                fragments, continues, n, row, at, seq = _native.text_rows_json(
                    buf, pos, framer.next_seq, self.kinds, -1 if limit < 0 else limit - rows, max_bytes, groups.size)
                if n:
                    framer.advance(at, seq)
                    for k, fragment in enumerate(fragments):
                        groups.add(fragment, continues and k == 0)
                    rows, last = rows + n, row
                    self.rows += n
                    continue
            taken = self.fetch(1)  # reads on; a packet the native reader left, parsed here
            if taken:
                groups.add_row(orjson.dumps(taken[0]))
                rows, last = rows + 1, taken[0]
        groups.close()
        return JsonRows(groups.done, rows, last)

    def _read(self) -> None:
        import pymysql

        try:
            chunk = self.conn._rfile.read1(_READ_SIZE)
        except OSError as exc:
            raise pymysql.err.OperationalError(_LOST, f"Lost connection to MySQL server during query ({exc})") from None
        if not chunk:
            raise pymysql.err.OperationalError(_LOST, "Lost connection to MySQL server during query")
        self.framer.feed(chunk)

    def _end(self, payload: bytes) -> None:
        """EOF or ERR: pymysql's result and connection as its own reader leaves them (ERR raised as it does)."""
        from pymysql.protocol import MysqlPacket

        self.done = True
        result, conn = self.result, self.conn
        result.unbuffered_active = False
        conn._next_seq_id = self.framer.next_seq
        packet = MysqlPacket(payload, conn.encoding)
        if packet.is_error_packet():
            packet.raise_for_error()
        result._check_packet_is_eof(packet)
        if result.has_next or self.framer.buffered:
            raise ReplicationError(f"{self.source}: more data after the result's end (one statement was sent)")
        result.connection = None
        result.rows = None

