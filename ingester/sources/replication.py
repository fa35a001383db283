"""The replication stream: register as a replica and read the server's binlog over the network.

pymysql connects and authenticates (TLS and every auth plugin it supports); after COM_BINLOG_DUMP
this module reads the socket itself in large chunks. ``PacketFramer`` is the sans-I/O part: bytes
in, MySQL protocol packets out (16 MB multi-packets reassembled), so the framing is testable
without a server and shared by any transport.
"""

from __future__ import annotations

import select
import socket
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from ..codec import BinlogDecoder, BinlogError
from ..codec.decoder import CHECKSUM_CRC32, CHECKSUM_OFF
from ..codec.events import Event, RotateEvent, TransactionPayloadEvent
from .errors import ReplicationError

COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15
COM_BINLOG_DUMP_GTID = 0x1E
BINLOG_THROUGH_GTID = 0x04
BINLOG_DUMP_NON_BLOCK = 0x01
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02  # MariaDB
_MAX_PACKET = 0xFFFFFF
_READ_SIZE = 1 << 20


@dataclass(frozen=True)
class SourceURL:
    host: str
    port: int
    user: str
    password: str = ""

    @classmethod
    def parse(cls, url: str) -> SourceURL:
        """``mysql://USER[:PASSWORD]@HOST[:PORT]`` (percent-encoding allowed in user and password)."""
        parts = urlsplit(url)
        if parts.scheme not in ("mysql", "mariadb") or not parts.hostname:
            raise ValueError(f"source must look like mysql://USER[:PASSWORD]@HOST:PORT, got {redact(url)}")
        return cls(parts.hostname, parts.port or 3306, unquote(parts.username or "root"),
                   unquote(parts.password or ""))

    def __str__(self) -> str:  # never shows the password
        return f"mysql://{self.user}@{self.host}:{self.port}"


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


class PacketFramer:
    """Sans-I/O MySQL packet framing: feed bytes, take complete payloads.

    A payload of exactly 0xFFFFFF bytes continues in the next packet; the pieces are joined. The
    sequence id must increase by one per packet (mod 256): anything else is a broken stream.
    """

    def __init__(self, first_seq: int = 1) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._parts: list[bytes] = []
        self.next_seq = first_seq

    def feed(self, data: bytes) -> None:
        if self._pos > (1 << 20) and self._pos > len(self._buf) // 2:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    def packets(self) -> Iterator[bytes]:
        buf = self._buf
        while len(buf) - self._pos >= 4:
            header = int.from_bytes(buf[self._pos : self._pos + 4], "little")
            length, seq = header & 0xFFFFFF, header >> 24
            if len(buf) - self._pos - 4 < length:
                return
            if seq != self.next_seq:
                raise ReplicationError(f"packet sequence {seq}, expected {self.next_seq}: the stream is out of step")
            self.next_seq = (seq + 1) & 0xFF
            start = self._pos + 4
            payload = bytes(buf[start : start + length])
            self._pos = start + length
            if length == _MAX_PACKET:
                self._parts.append(payload)
                continue
            if self._parts:
                self._parts.append(payload)
                payload = b"".join(self._parts)
                self._parts = []
            yield payload


def parse_err(payload: bytes) -> tuple[int, str]:
    """An ERR packet's (error code, message)."""
    code = int.from_bytes(payload[1:3], "little") if len(payload) >= 3 else 0
    rest = payload[3:]
    if rest[:1] == b"#":
        rest = rest[6:]
    return code, rest.decode("utf-8", "replace")


_HINTS = {
    1236: "the requested binlog position is not on the server (purged, or never existed): resume from a "
          "position it still has (SHOW BINARY LOGS) or take a new snapshot",
    1045: "check the user and password",
    1227: "the user needs the REPLICATION SLAVE privilege",
    1044: "the user needs the REPLICATION SLAVE privilege",
}


class BinlogStream:
    """One replication connection: negotiate, register, dump, then yield events in order.

    ``position`` is (binlog file, next event position) after each yielded event, ready to resume.
    """

    def __init__(self, source: str | SourceURL, *, server_id: int, start_file: str | None = None,
                 start_position: int = 4, non_blocking: bool = False, heartbeat: float = 5.0,
                 connect_timeout: float = 10.0, ssl: dict[str, Any] | None = None,
                 gtid_set: str | None = None) -> None:
        """``gtid_set``: resume after these executed GTIDs (MySQL set text or MariaDB ``d-s-n,...``)
        instead of at ``start_file``/``start_position``: what survives a failover to another server."""
        self.source = source if isinstance(source, SourceURL) else SourceURL.parse(source)
        self.server_id = server_id
        self.file = start_file
        self.next_position = start_position
        self.non_blocking = non_blocking
        self.heartbeat = heartbeat
        self.connect_timeout = connect_timeout
        self.ssl = ssl
        self.gtid_set = gtid_set
        self.checksum = CHECKSUM_OFF
        self.is_mariadb = False
        self._conn: Any = None
        self.decoder: BinlogDecoder | None = None
        # Called when every received event has been handed out and the next read would wait:
        # the daemon commits its pending Kafka transaction then, so idle streams have no lag.
        self.on_idle: Callable[[], None] | None = None

    # ------------------------------------------------------------------ connection

    def _connect(self) -> None:
        import pymysql

        try:
            conn = pymysql.connect(host=self.source.host, port=self.source.port, user=self.source.user,
                                   password=self.source.password, connect_timeout=self.connect_timeout,
                                   ssl=self.ssl, autocommit=True, charset="utf8mb4")
        except pymysql.err.OperationalError as exc:
            code = exc.args[0] if exc.args else 0
            raise ReplicationError(f"{self.source}: cannot connect: {_message(exc)}"
                                   + (f" ({_HINTS[code]})" if code in _HINTS else "")) from None
        self._conn = conn
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION(), @@global.binlog_checksum")
            version, checksum = cur.fetchone()
            self.is_mariadb = "MariaDB" in version
            self.checksum = CHECKSUM_CRC32 if str(checksum).upper() == "CRC32" else CHECKSUM_OFF
            # Tell the server we understand its checksums (both spellings: MySQL 8.0.26 renamed it).
            cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
            cur.execute("SET @source_binlog_checksum = @@global.binlog_checksum")
            if self.heartbeat:
                cur.execute(f"SET @master_heartbeat_period = {int(self.heartbeat * 1e9)}")
            if self.is_mariadb:
                cur.execute("SET @mariadb_slave_capability = 4")  # send GTID and annotate events as-is
                if self.gtid_set is not None:
                    cur.execute("SET @slave_connect_state = %s", (self.gtid_set,))
                    cur.execute("SET @slave_gtid_strict_mode = 1")
                    cur.execute("SET @slave_gtid_ignore_duplicates = 0")
            if self.gtid_set is not None:
                self.file, self.next_position = "", 4
            elif self.file is None:
                cur.execute("SHOW BINARY LOGS")
                self.file = cur.fetchall()[0][0]
                self.next_position = 4

    def _command(self, command: int, payload: bytes) -> None:
        self._conn._execute_command(command, payload)

    def _register(self) -> None:
        host = b""
        user = self.source.user.encode()
        body = (struct.pack("<I", self.server_id) + bytes([len(host)]) + host + bytes([len(user)]) + user
                + b"\0" + struct.pack("<HII", 0, 0, 0))
        self._command(COM_REGISTER_SLAVE, body)
        payload = self._conn._read_packet()._data  # raises pymysql errors on ERR
        if payload[:1] != b"\0":
            raise ReplicationError(f"{self.source}: COM_REGISTER_SLAVE was not acknowledged")

    def _dump(self) -> None:
        assert self.file is not None
        flags = BINLOG_DUMP_NON_BLOCK if self.non_blocking else 0
        if self.gtid_set is not None and not self.is_mariadb:
            from ..records.gtid import MysqlGtidSet

            data = MysqlGtidSet.parse(self.gtid_set).encode()
            body = (struct.pack("<HII", flags | BINLOG_THROUGH_GTID, self.server_id, 0) + struct.pack("<Q", 4)
                    + struct.pack("<I", len(data)) + data)
            self._command(COM_BINLOG_DUMP_GTID, body)
            return
        if self.is_mariadb:
            flags |= BINLOG_SEND_ANNOTATE_ROWS_EVENT
        body = struct.pack("<IHI", self.next_position, flags, self.server_id) + self.file.encode()
        self._command(COM_BINLOG_DUMP, body)

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # the socket may already be gone
                pass
            self._conn = None

    # ------------------------------------------------------------------ reading

    def raw_events(self) -> Iterator[bytes]:
        """Event bytes as the server sends them (OK byte stripped), until EOF in non-blocking mode."""
        import pymysql

        try:
            self._connect()
            self._register()
            self._dump()
        except pymysql.err.MySQLError as exc:
            self.close()
            raise ReplicationError(f"{self.source}: {_message(exc)}") from None
        sock: socket.socket = self._conn._sock
        sock.settimeout(None if not self.heartbeat else max(self.heartbeat * 3, 5.0))
        rfile = self._conn._rfile
        framer = PacketFramer(first_seq=1)
        try:
            while True:
                if self.on_idle is not None and not select.select([sock], [], [], 0)[0]:
                    self.on_idle()
                try:
                    chunk = rfile.read1(_READ_SIZE)
                except TimeoutError:
                    raise ReplicationError(f"{self.source}: no data or heartbeat for {sock.gettimeout():.0f} s: "
                                           "the connection is dead") from None
                if not chunk:
                    raise ReplicationError(f"{self.source}: the server closed the replication connection")
                framer.feed(chunk)
                for payload in framer.packets():
                    head = payload[:1]
                    if head == b"\0":
                        yield payload[1:]
                    elif head == b"\xff":
                        code, message = parse_err(payload)
                        hint = f" ({_HINTS[code]})" if code in _HINTS else ""
                        raise ReplicationError(f"{self.source}: server error {code}: {message}{hint}")
                    elif head == b"\xfe" and len(payload) < 9:
                        if self.non_blocking:
                            return  # EOF: caught up
                        raise ReplicationError(f"{self.source}: the server ended the binlog stream "
                                               "(shutting down?)")
                    else:
                        raise ReplicationError(f"{self.source}: unexpected packet 0x{payload[0]:02x} "
                                               "in the binlog stream")
        finally:
            self.close()

    def frames(self) -> Iterator[tuple[bytes, Event]]:
        """(raw event, decoded outer event) in stream order; ``decoder`` expands payloads.

        Tracks ``file`` and ``next_position`` so the stream can be resumed after any event.
        """
        for raw in self.raw_events():
            if self.decoder is None:
                self.decoder = BinlogDecoder(f"{self.source}", checksum=self.checksum)
            dec = self.decoder
            if len(raw) < 19:
                raise BinlogError(f"event of {len(raw)} bytes", self.next_position, f"{self.source}/{self.file}")
            size = int.from_bytes(raw[9:13], "little")
            log_pos = int.from_bytes(raw[13:17], "little")
            position = log_pos - size if log_pos >= size else 0
            dec.source = f"{self.source}/{self.file}"
            ev = dec.decode(raw, position)
            if type(ev) is RotateEvent:
                self.file, self.next_position = ev.next_file, ev.next_position
            elif log_pos:
                self.next_position = log_pos
            yield raw, ev

    def events(self) -> Iterator[Event]:
        """Decoded events, compressed transactions expanded."""
        for _, ev in self.frames():
            yield ev
            if type(ev) is TransactionPayloadEvent:
                assert self.decoder is not None
                yield from self.decoder.payload_events(ev)


def _message(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    if len(args) >= 2:
        return f"error {args[0]}: {args[1]}"
    return str(exc)
