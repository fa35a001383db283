"""The sans-I/O binlog decoder: complete event bytes in, typed events out.

It owns the decoding state that events depend on: the FORMAT_DESCRIPTION_EVENT (header and
post-header lengths, checksum algorithm), the binlog version (v1/v3 START_EVENT_V3 layouts) and
the table maps that rows events refer to. Files, the network stream and Kafka consumers all feed
it the same way: ``decode(event_bytes, position)``, or ``events(...)`` to also expand compressed
transaction payloads into their inner events.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Iterator
from typing import Any

from . import events as E
from . import header
from .constants import HEADER_V1, HEADER_V3, LOG_EVENT_BINLOG_IN_USE_F
from .constants import EventType as ET
from .cursor import Cursor
from .decoders import REGISTRY
from .errors import BinlogError
from .rows import RowsCompiler
from .table_map import TableMap

_HEADER = header.HEADER
_HEADER_V1 = struct.Struct("<IBII")
_U32 = struct.Struct("<I").unpack_from
_FDE = int(ET.FORMAT_DESCRIPTION_EVENT)  # plain ints: enum lookups cost on the per-event path
_START_V3 = int(ET.START_EVENT_V3)
# Rows events whose table id sits right after the header (all but pre-GA v0): routable unparsed.
ROUTABLE_ROWS = frozenset(int(t) for t in (
    ET.WRITE_ROWS_EVENT_V1, ET.UPDATE_ROWS_EVENT_V1, ET.DELETE_ROWS_EVENT_V1, ET.WRITE_ROWS_EVENT,
    ET.UPDATE_ROWS_EVENT, ET.DELETE_ROWS_EVENT, ET.PARTIAL_UPDATE_ROWS_EVENT, ET.WRITE_ROWS_COMPRESSED_EVENT_V1,
    ET.UPDATE_ROWS_COMPRESSED_EVENT_V1, ET.DELETE_ROWS_COMPRESSED_EVENT_V1, ET.WRITE_ROWS_COMPRESSED_EVENT,
    ET.UPDATE_ROWS_COMPRESSED_EVENT, ET.DELETE_ROWS_COMPRESSED_EVENT))
CHECKSUM_OFF = 0
CHECKSUM_CRC32 = 1
# Post-header lengths before FORMAT_DESCRIPTION_EVENT existed (binlog v1 and v3), by type code.
_V1_POST_HEADERS = {1: 56, 2: 11, 4: 0, 6: 18, 8: 22, 9: 4, 10: 4, 11: 4, 12: 18}
_V3_POST_HEADERS = {1: 56, 2: 11, 4: 8, 6: 18, 8: 22, 9: 4, 10: 4, 11: 4, 12: 18}
_MAX_INNER_EVENT = 1 << 30
_VERSION = re.compile(rb"^(\d+)\.(\d+)\.(\d+)")
# MySQL 5.1.0-5.1.15 and the "a_drop" 5.1/5.2 trees numbered the row events 16-19 and XID and the
# LOAD DATA query events 20-22; their FDEs list 22 post-header lengths. Map them to today's codes.
_PRE_GA_51_TYPES = {16: 19, 17: 20, 18: 21, 19: 22, 20: 16, 21: 17, 22: 18}


def _uses_pre_ga_51_numbering(version: bytes, type_count: int) -> bool:
    m = _VERSION.match(version)
    if not m or type_count != 22:
        return False
    v = tuple(int(x) for x in m.groups())
    return (5, 1, 0) <= v <= (5, 1, 15) or b"a_drop" in version


def server_has_checksum_field(version: bytes) -> bool:
    """FDEs of MySQL >= 5.6.1 and MariaDB >= 5.3 end with a checksum algorithm byte and a CRC."""
    m = _VERSION.match(version)
    if not m:
        return False
    v = tuple(int(x) for x in m.groups())
    if b"MariaDB" in version:
        return v >= (5, 3, 0)
    return v >= (5, 6, 1)


class BinlogDecoder:
    """Decodes one binlog stream; not thread-safe (one instance per stream)."""

    def __init__(self, source: str = "<binlog>", *, verify_checksums: bool = True,
                 checksum: int | None = None, columnar: bool | RowsCompiler = False) -> None:
        self.source = source
        # Rows events hold their images as columns (codec.rows.RowImages) rather than one dict per row;
        # or, given a RowsCompiler, whatever the decoders it compiles return.
        self.columnar = columnar
        self.verify_checksums = verify_checksums
        self.checksum = checksum or CHECKSUM_OFF  # until an FDE says otherwise
        self.binlog_version = 4
        self.header_len = HEADER_V3
        # Before any FORMAT_DESCRIPTION (a replication stream starts with an artificial ROTATE),
        # v4 layouts apply.
        self.post_header_lengths: dict[int, int] = {int(ET.ROTATE_EVENT): 8}
        self.server_version = ""
        self.is_mariadb = False
        self.table_maps: dict[int, TableMap] = {}
        self.table_map_cache: dict[bytes, TableMap] = {}
        self._format_description_bytes = b""
        self.format_description: E.FormatDescriptionEvent | None = None
        self.type_permutation: dict[int, int] = {}
        self._plain_v4 = True  # 19-byte headers, today's type codes: the fast path in _decode

    # ------------------------------------------------------------------ state

    def post_header_len(self, type_code: int) -> int:
        return self.post_header_lengths.get(type_code, 0)

    def start_v1(self) -> None:
        """A binlog v1 (MySQL 3.23) stream: 13-byte headers, fixed post-header lengths."""
        self.binlog_version, self.header_len = 1, HEADER_V1
        self._plain_v4 = False
        self.post_header_lengths = dict(_V1_POST_HEADERS)

    def start_v3(self) -> None:
        self.binlog_version, self.header_len = 3, HEADER_V3
        self._plain_v4 = False
        self.post_header_lengths = dict(_V3_POST_HEADERS)

    # ------------------------------------------------------------------ decoding

    def header(self, buf: bytes, position: int) -> dict[str, Any]:
        if self.header_len == HEADER_V1:
            if len(buf) < HEADER_V1:
                raise BinlogError(f"event header needs {HEADER_V1} bytes, {len(buf)} present", position)
            ts, code, server_id, size = _HEADER_V1.unpack_from(buf)
            log_pos, flags = position + size, 0
        else:
            if len(buf) < HEADER_V3:
                raise BinlogError(f"event header needs {HEADER_V3} bytes, {len(buf)} present", position)
            ts, code, server_id, size, log_pos, flags = _HEADER.unpack_from(buf)
        if self.type_permutation:
            code = self.type_permutation.get(code, code)
        return {"type_code": code, "timestamp": ts, "server_id": server_id, "event_size": size,
                "log_pos": log_pos, "flags": flags, "position": position}

    def decode(self, buf: bytes, position: int = 0, *, in_payload: bool = False) -> E.Event:
        """Decode one complete event (header included); raises BinlogError naming the position."""
        try:
            return self._decode(buf, position, in_payload)
        except BinlogError as exc:
            raise exc.located(self.source, position) from None
        except RecursionError:
            raise BinlogError("nesting too deep", position, self.source) from None

    def _decode(self, buf: bytes, position: int, in_payload: bool) -> E.Event:
        if self._plain_v4 and len(buf) >= HEADER_V3:
            ts, code, server_id, size, log_pos, flags = _HEADER.unpack_from(buf)  # the hot path
            h = {"type_code": code, "timestamp": ts, "server_id": server_id, "event_size": size,
                 "log_pos": log_pos, "flags": flags, "position": position, "in_payload": in_payload}
        else:
            h = self.header(buf, position)
            h["in_payload"] = in_payload
            code, size = h["type_code"], h["event_size"]
        if size != len(buf):
            raise BinlogError(f"event size field says {size} bytes but the event has {len(buf)}", position)
        if code == _FDE:
            del h["in_payload"]
            return self._format_description(buf, h)
        if code == _START_V3:
            del h["in_payload"]
            return self._start_v3(buf, h)
        end = size
        if self.checksum == CHECKSUM_CRC32 and not in_payload:
            end -= 4
            if end < self.header_len:
                raise BinlogError("event too short for its checksum", position)
            if self.verify_checksums:
                stored = _U32(buf, end)[0]
                actual = zlib.crc32(buf[:end] if end < 4096 else memoryview(buf)[:end])
                if stored != actual:
                    raise BinlogError(f"CRC32 mismatch: stored 0x{stored:08x}, computed 0x{actual:08x}",
                                      position)
        decoder = REGISTRY.get(code)
        if decoder is None:
            return E.UnknownEvent(**h, body=bytes(buf[self.header_len:end]))
        return decoder(self, h, Cursor(buf, self.header_len, end, position))

    @property
    def plain_v4(self) -> bool:
        """19-byte headers and today's type codes: the layout ``verify`` and ``rows_table_id`` serve."""
        return self._plain_v4

    def verify(self, buf: bytes, position: int = 0, *, in_payload: bool = False) -> int:
        """Check an event's size field and checksum without decoding it; returns where its body ends.

        For pipelines that forward events undecoded (the daemon), on the ``plain_v4`` layout."""
        if len(buf) < HEADER_V3:
            raise BinlogError(f"event header needs {HEADER_V3} bytes, {len(buf)} present", position, self.source)
        size = _U32(buf, 9)[0]
        if size != len(buf):
            raise BinlogError(f"event size field says {size} bytes but the event has {len(buf)}", position,
                              self.source)
        if self.checksum != CHECKSUM_CRC32 or in_payload:
            return size
        end = size - 4
        if end < HEADER_V3:
            raise BinlogError("event too short for its checksum", position, self.source)
        if self.verify_checksums:
            stored = _U32(buf, end)[0]
            actual = zlib.crc32(buf[:end] if end < 4096 else memoryview(buf)[:end])
            if stored != actual:
                raise BinlogError(f"CRC32 mismatch: stored 0x{stored:08x}, computed 0x{actual:08x}", position,
                                  self.source)
        return end

    def rows_table_id(self, buf: bytes, position: int = 0, *, in_payload: bool = False) -> int | None:
        """The table id of a rows event, its size and checksum verified, without decoding its rows
        (the consumer decodes them). None for any other event, and for layouts that need the full
        decoder."""
        if not self._plain_v4 or len(buf) < HEADER_V3 + 8 or buf[4] not in ROUTABLE_ROWS:
            return None
        if self.post_header_lengths.get(buf[4], 0) < 8:
            return None
        if self.verify(buf, position, in_payload=in_payload) < HEADER_V3 + 8:
            return None  # truncated: the full decoder says what is wrong
        return int.from_bytes(buf[19:25], "little")

    def _start_v3(self, buf: bytes, h: dict[str, Any]) -> E.Event:
        cur = Cursor(buf, self.header_len, len(buf), h["position"])
        version = cur.u16()
        server = cur.take(50, "server version").split(b"\0", 1)[0]
        created = cur.u32()
        self.server_version = server.decode("ascii", "replace")
        return E.StartV3Event(**h, binlog_version=version, server_version=self.server_version,
                              create_timestamp=created)

    def _format_description(self, buf: bytes, h: dict[str, Any]) -> E.Event:
        pos = h["position"]
        cur = Cursor(buf, HEADER_V3, len(buf), pos)
        version = cur.u16()
        server = cur.take(50, "server version").split(b"\0", 1)[0]
        created = cur.u32()
        header_len = cur.u8()
        if header_len < HEADER_V3:
            raise cur.error(f"format description declares a {header_len}-byte event header")
        algorithm: int | None = None
        end = len(buf)
        if server_has_checksum_field(server):
            if cur.remaining < 5:
                raise cur.error("format description too short for its checksum fields")
            end -= 5
            algorithm = buf[end]
            if algorithm not in (CHECKSUM_OFF, CHECKSUM_CRC32):
                raise BinlogError(f"unsupported binlog checksum algorithm {algorithm}", pos + end)
            if algorithm == CHECKSUM_CRC32 and self.verify_checksums:
                stored = int.from_bytes(buf[-4:], "little")
                body = bytearray(buf[:-4])
                body[17] &= ~LOG_EVENT_BINLOG_IN_USE_F & 0xFF  # the CRC was computed before the flag
                actual = zlib.crc32(body)
                if stored != actual:
                    raise BinlogError(
                        f"CRC32 mismatch in format description: stored 0x{stored:08x}, "
                        f"computed 0x{actual:08x}", pos)
        lengths = list(buf[cur.pos:end])
        self.binlog_version = version
        self.header_len = header_len
        self.type_permutation = _PRE_GA_51_TYPES if _uses_pre_ga_51_numbering(server, len(lengths)) else {}
        self.post_header_lengths = {
            self.type_permutation.get(i + 1, i + 1): n for i, n in enumerate(lengths)
        }
        self._plain_v4 = header_len == HEADER_V3 and not self.type_permutation
        self.checksum = algorithm or CHECKSUM_OFF
        self.server_version = server.decode("ascii", "replace")
        self.is_mariadb = b"MariaDB" in server
        if bytes(buf) != self._format_description_bytes:  # a new format: cached maps may not apply
            self.table_maps.clear()
            self.table_map_cache.clear()
            self._format_description_bytes = bytes(buf)
        ev = E.FormatDescriptionEvent(**h, binlog_version=version, server_version=self.server_version,
                                      create_timestamp=created, header_length=header_len,
                                      post_header_lengths=lengths, checksum_algorithm=algorithm)
        self.format_description = ev
        return ev

    # ------------------------------------------------------------------ compressed payloads

    def events(self, buf: bytes, position: int = 0) -> Iterator[E.Event]:
        """Decode one event; a TRANSACTION_PAYLOAD is followed by its inner events."""
        ev = self.decode(buf, position)
        yield ev
        if type(ev) is E.TransactionPayloadEvent:
            yield from self.payload_events(ev)

    def expand(self, ev: E.TransactionPayloadEvent) -> Iterator[E.Event]:
        """A decoded TRANSACTION_PAYLOAD followed by its inner events."""
        yield ev
        yield from self.payload_events(ev)

    def payload_events(self, ev: E.TransactionPayloadEvent) -> Iterator[E.Event]:
        """Stream-decompress a compressed transaction and decode its events one at a time."""
        try:
            yield from self._payload_events(ev)
        except BinlogError as exc:
            raise exc.located(self.source, ev.position) from None

    def _payload_events(self, ev: E.TransactionPayloadEvent) -> Iterator[E.Event]:
        for raw in self._payload_raw(ev):
            yield self.decode(raw, ev.position, in_payload=True)

    def payload_raw_events(self, ev: E.TransactionPayloadEvent) -> Iterator[bytes]:
        """The inner events' bytes (no checksums), decompressed as they are read."""
        try:
            yield from self._payload_raw(ev)
        except BinlogError as exc:
            raise exc.located(self.source, ev.position) from None

    def _payload_raw(self, ev: E.TransactionPayloadEvent) -> Iterator[bytes]:
        import zstandard  # only compressed transactions need it

        pos = ev.position
        if ev.compression_type == 255:
            reader: Any = _BytesReader(ev.payload)
        elif ev.compression_type == 0:
            dctx = zstandard.ZstdDecompressor(max_window_size=1 << 27)
            reader = dctx.stream_reader(ev.payload, read_across_frames=True)
        else:
            raise BinlogError(f"unsupported transaction compression type {ev.compression_type}", pos,
                              self.source)
        total = 0
        try:
            while True:
                head = _read_exact(reader, self.header_len, allow_eof=True)
                if not head:
                    break
                size = int.from_bytes(head[9:13], "little")
                if not self.header_len <= size <= _MAX_INNER_EVENT:
                    raise BinlogError(f"inner event at payload offset {total} has impossible size {size}",
                                      pos)
                body = _read_exact(reader, size - self.header_len)
                total += size
                yield head + body
        except zstandard.ZstdError as exc:
            raise BinlogError(f"corrupt zstd payload: {exc}", pos, self.source) from None
        if ev.uncompressed_size is not None and total != ev.uncompressed_size:
            raise BinlogError(f"payload decompressed to {total} bytes, header says {ev.uncompressed_size}",
                              pos, self.source)


class _BytesReader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def read(self, n: int) -> bytes:
        chunk = self.data[self.pos : self.pos + n]
        self.pos += len(chunk)
        return chunk


def _read_exact(reader: Any, n: int, allow_eof: bool = False) -> bytes:
    parts = []
    need = n
    while need:
        chunk = reader.read(min(need, 1 << 20))
        if not chunk:
            if allow_eof and need == n:
                return b""
            raise BinlogError(f"compressed payload ends inside an event ({n - need} of {n} bytes)")
        parts.append(chunk)
        need -= len(chunk)
    return b"".join(parts)
