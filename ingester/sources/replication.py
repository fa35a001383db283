"""The replication stream: register as a replica and read the server's binlog over the network.

pymysql connects and authenticates (TLS and every auth plugin it supports); after COM_BINLOG_DUMP
this module reads the socket itself in large chunks. ``PacketFramer`` is the sans-I/O part: bytes
in, MySQL protocol packets out (16 MB multi-packets reassembled), so the framing is testable
without a server and shared by any transport.
"""

from __future__ import annotations

import math
import select
import socket
import ssl
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from ..codec import BinlogDecoder, BinlogError
from ..codec import header as H
from ..codec.decoder import CHECKSUM_CRC32, CHECKSUM_OFF
from ..codec.events import Event, RotateEvent, TransactionPayloadEvent
from ..redact import redact
from .errors import ReplicationError, SourceUnreachable
from .hints import SERVER_HINTS, certificate_hint

if TYPE_CHECKING:
    from ..records.builder import RecordBuilder

COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15
# The host binlake reports when it registers (the Host column of SHOW SLAVE HOSTS / SHOW REPLICAS): tells a
# registration of ours, left by a daemon that just stopped, from another replica's (daemon/server_id.py)
REPORT_PREFIX = "binlake@"
REPORT_HOST = f"{REPORT_PREFIX}{socket.gethostname()}"[:60]
COM_BINLOG_DUMP_GTID = 0x1E
BINLOG_THROUGH_GTID = 0x04
BINLOG_DUMP_NON_BLOCK = 0x01
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02  # MariaDB
_MAX_PACKET = 0xFFFFFF
_MAX_PAYLOAD = (1 << 30) + 1  # an event is at most max_allowed_packet's ceiling (1 GiB), after the OK byte
_READ_SIZE = 1 << 20
_POLL = 0.25  # seconds a read waits for the server before the stream asks whether to stop
_U32 = struct.Struct("<I").unpack_from
_NO_TLS = 2026  # pymysql: "SSL is required but the server doesn't support it"
_ROTATE = 4
_UNREACHABLE = (2003, 2006, 2013)  # pymysql: cannot connect, server gone, connection lost while connecting


TLS_MODES = ("verify-identity", "verify-ca", "required", "preferred", "disabled")


@dataclass(frozen=True)
class SourceURL:
    """Where the source is and how to reach it: ``mysql://USER[:PASSWORD]@HOST[:PORT][?tls=MODE&tls-ca=FILE
    &tls-cert=FILE&tls-key=FILE]``. TLS verifies the server's certificate and name by default
    (``verify-identity``); anything weaker has to be asked for."""

    host: str
    port: int
    user: str
    password: str = field(default="", repr=False)
    tls: str = "verify-identity"
    tls_ca: str | None = None  # default: the system's trusted CAs
    tls_cert: str | None = None  # client certificate (X509 users)
    tls_key: str | None = None

    @classmethod
    def parse(cls, url: str) -> SourceURL:
        """Percent-encoding is allowed in user and password."""
        parts = urlsplit(url)
        if parts.scheme not in ("mysql", "mariadb") or not parts.hostname:
            raise ValueError(f"source must look like mysql://USER[:PASSWORD]@HOST:PORT, got {redact(url)}")
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        unknown = set(query) - {"tls", "tls-ca", "tls-cert", "tls-key"}
        if unknown:
            raise ValueError(f"source URL {redact(url)}: unknown parameter {', '.join(sorted(unknown))} "
                             "(known: tls, tls-ca, tls-cert, tls-key)")
        tls = query.get("tls", "verify-identity")
        if tls not in TLS_MODES:
            raise ValueError(f"source URL {redact(url)}: tls must be one of {', '.join(TLS_MODES)}, got {tls!r}")
        return cls(parts.hostname, parts.port or 3306, unquote(parts.username or "root"),
                   unquote(parts.password or ""), tls, query.get("tls-ca"), query.get("tls-cert"),
                   query.get("tls-key"))

    def __str__(self) -> str:  # never shows the password
        return f"mysql://{self.user}@{self.host}:{self.port}"

    def ssl_context(self) -> ssl.SSLContext | None:
        if self.tls in ("disabled", "preferred"):
            return None
        ctx = ssl.create_default_context(cafile=self.tls_ca)
        if self.tls == "required":  # encrypted, but the server is not authenticated
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif self.tls == "verify-ca":
            ctx.check_hostname = False
        if self.tls_cert:
            ctx.load_cert_chain(self.tls_cert, self.tls_key)
        return ctx

    def connect(self, **options: Any) -> Any:
        """A pymysql connection with this URL's TLS settings. pymysql quietly stays in plaintext when
        the server offers no TLS: unless TLS is ``preferred`` or ``disabled``, that is refused here."""
        import pymysql

        context = self.ssl_context()
        if self.tls == "disabled":
            options["ssl_disabled"] = True  # pymysql would otherwise try TLS on its own
        elif self.tls != "preferred":  # pymysql's own default is the preferred mode
            options["ssl"] = context
        try:
            conn = pymysql.connect(host=self.host, port=self.port, user=self.user, password=self.password,
                                   **options)
        except pymysql.err.OperationalError as exc:
            code = exc.args[0] if exc.args else 0
            hint = SERVER_HINTS.get(code, "")
            if code == _NO_TLS:
                hint = (f"the server does not offer TLS, and tls={self.tls} requires it: configure TLS on the "
                        "server, or set tls=disabled explicitly")
            elif "CERTIFICATE_VERIFY_FAILED" in str(exc):
                hint = certificate_hint(str(exc), self.host, self.tls_ca)
            error = SourceUnreachable if code in _UNREACHABLE else ReplicationError
            raise error(f"{self}: cannot connect: {_message(exc)}" + (f" ({hint})" if hint else ""),
                        code or None) from None
        if context is not None and not isinstance(conn._sock, ssl.SSLSocket):
            conn.close()  # older pymysql stays in plaintext quietly
            raise ReplicationError(f"{self}: the server does not offer TLS, and tls={self.tls} requires it "
                                   "(configure TLS on the server, or set tls=disabled explicitly)")
        return conn


class PacketFramer:
    """Sans-I/O MySQL packet framing: feed bytes, take complete payloads.

    A payload of exactly 0xFFFFFF bytes continues in the next packet; the pieces are joined. The
    sequence id must increase by one per packet (mod 256): anything else is a broken stream. Input
    is kept as immutable chunks, so each payload is copied once; the chunks of a large packet are
    joined once it is complete, not at every read.
    """

    def __init__(self, first_seq: int = 1, max_payload: int = _MAX_PAYLOAD) -> None:
        """``max_payload``: a multi-packet growing past it is refused (a hostile server's endless pieces)."""
        self.max_payload = max_payload
        self._buf = b""
        self._pos = 0
        self._chunks: list[bytes] = []
        self._chunked = 0  # bytes in _chunks
        self._need = 4  # bytes the first incomplete packet needs (header included)
        self._parts: list[bytes] = []
        self.next_seq = first_seq

    def feed(self, data: bytes) -> None:
        self._chunks.append(data)
        self._chunked += len(data)

    def packets(self, limit: int = -1) -> list[bytes]:
        """Every complete payload fed so far (at most ``limit`` of them when given), in order. A packet out of
        step raises once the payloads before it have been taken."""
        if self._chunks and len(self._buf) - self._pos + self._chunked >= self._need:
            self.pending()
        elif self._need > 4 or self._pos == len(self._buf):
            return []
        buf, pos, end = self._buf, self._pos, len(self._buf)
        out: list[bytes] = []
        while end - pos >= 4 and len(out) != limit:
            header = _U32(buf, pos)[0]
            length = header & 0xFFFFFF
            if end - pos - 4 < length:
                self._need = length + 4
                break
            seq = header >> 24
            if seq != self.next_seq:
                self._pos, self._need = pos, 4
                if out:  # the packets before it are taken first; the next call raises
                    return out
                raise ReplicationError(f"packet sequence {seq}, expected {self.next_seq}: the stream is out of step")
            self.next_seq = (seq + 1) & 0xFF
            start = pos + 4
            pos = start + length
            payload = buf[start:pos]
            if length == _MAX_PACKET:
                self._parts.append(payload)
                if len(self._parts) * _MAX_PACKET > self.max_payload:
                    self._pos = pos
                    raise ReplicationError(f"a packet of more than {self.max_payload} bytes, more than a server "
                                           "sends: the stream is broken")
                continue
            if self._parts:
                self._parts.append(payload)
                payload = b"".join(self._parts)
                self._parts = []
            out.append(payload)
        else:
            self._need = 4
        self._pos = pos
        return out

    def pending(self) -> tuple[bytes, int]:
        """(buffer, position): the bytes fed and not yet taken start at the position (those of an incomplete
        packet may be left out). For a reader that takes whole packets itself (the native router) and then
        moves on with ``advance``."""
        if self._chunks and len(self._buf) - self._pos + self._chunked >= self._need:
            self._buf = b"".join([self._buf[self._pos :], *self._chunks])
            self._pos = 0
            self._chunks.clear()
            self._chunked = 0
            self._need = 4
        return self._buf, self._pos

    @property
    def in_multi_packet(self) -> bool:
        return bool(self._parts)

    @property
    def buffered(self) -> int:
        """Bytes fed and not taken yet."""
        return len(self._buf) - self._pos + self._chunked

    def advance(self, pos: int, next_seq: int) -> None:
        """Packets up to ``pos`` of ``pending()``'s buffer were taken, the next has sequence id ``next_seq``.
        Only between whole packets: never inside a multi-packet."""
        assert not self._parts
        self._pos, self.next_seq = pos, next_seq


def parse_err(payload: bytes) -> tuple[int, str]:
    """An ERR packet's (error code, message)."""
    code = int.from_bytes(payload[1:3], "little") if len(payload) >= 3 else 0
    rest = payload[3:]
    if rest[:1] == b"#":
        rest = rest[6:]
    return code, rest.decode("utf-8", "replace")


class BinlogStream:
    """One replication connection: negotiate, register, dump, then yield events in order.

    ``position`` is (binlog file, next event position) after each yielded event, ready to resume.
    """

    def __init__(self, source: str | SourceURL, *, server_id: int, start_file: str | None = None,
                 start_position: int = 4, non_blocking: bool = False, heartbeat: float = 5.0,
                 connect_timeout: float = 10.0, gtid_set: str | None = None) -> None:
        """``gtid_set``: resume after these executed GTIDs (MySQL set text or MariaDB ``d-s-n,...``)
        instead of at ``start_file``/``start_position``: what survives a failover to another server."""
        self.source = source if isinstance(source, SourceURL) else SourceURL.parse(source)
        self.server_id = server_id
        self.file = start_file
        self.next_position = start_position
        self.non_blocking = non_blocking
        self.heartbeat = heartbeat
        self.connect_timeout = connect_timeout
        self.gtid_set = gtid_set
        self.checksum = CHECKSUM_OFF
        self.is_mariadb = False
        self._conn: Any = None
        self.decoder: BinlogDecoder | None = None
        # Called when every received event has been handed out and the next read would wait:
        # the daemon commits its pending Kafka transaction then, so idle streams have no lag.
        self.on_idle: Callable[[], None] | None = None
        # Asked before each native run (positioned with a builder): should it stop at the next transaction's
        # end, so the caller can commit there?
        self.commit_wanted: Callable[[], bool] = lambda: True
        # Asked while the server sends nothing (every _POLL s): True ends the stream there, as the end of a
        # non-blocking dump does, so a stop request is seen even when no event or heartbeat comes.
        self.stopping: Callable[[], bool] = lambda: False
        self.routed = (0, 0, 0)  # the last native run: events, bytes, last timestamp

    # ------------------------------------------------------------------ connection

    def _connect(self) -> None:
        conn = self.source.connect(connect_timeout=self.connect_timeout, autocommit=True, charset="utf8mb4")
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
        host = REPORT_HOST.encode()
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

    def positioned(self, builder: RecordBuilder | None = None) -> Iterator[tuple[bytes | None, int]]:
        """(raw event, its position) in stream order, OK byte stripped, until EOF in non-blocking mode.

        Events stay undecoded except ROTATE; ``decoder`` is ready for the caller. Tracks ``file`` and
        ``next_position`` so the stream can be resumed. This is the daemon's hot loop. With ``builder``,
        the runs of events its native router takes (``RecordBuilder.route``) are fed to it right here,
        each yielded as (None, events in the run), its byte count and last timestamp in ``routed``; the
        other events are yielded as usual, for the caller to feed."""
        import pymysql

        try:
            self._connect()
            self._register()
            self._dump()
        except pymysql.err.MySQLError as exc:
            self.close()
            raise ReplicationError(f"{self.source}: {_message(exc)}", _code(exc)) from None
        # From here on the socket is read directly: pymysql's buffered reader holds nothing, as the server sends
        # nothing unasked before the dump. Short waits let a quiet stream ask ``stopping``; the connection is
        # dead after three heartbeats' silence (never without heartbeats).
        sock: socket.socket = self._conn._sock
        sock.settimeout(_POLL)
        silence = max(self.heartbeat * 3, 5.0) if self.heartbeat else math.inf
        framer = PacketFramer(first_seq=1)
        dec = self.decoder = BinlogDecoder(f"{self.source}/{self.file}", checksum=self.checksum)
        routing = builder is not None and builder.routes_natively
        readable = select.poll()  # (not select.select: a process with more than 1,024 files open could not use it)
        readable.register(sock, select.POLLIN)
        try:
            while True:
                if self.on_idle is not None and not readable.poll(0):
                    self.on_idle()
                waited = 0.0
                while True:
                    try:
                        chunk = sock.recv(_READ_SIZE)
                        break
                    except TimeoutError:
                        if self.stopping():
                            return
                        waited += _POLL
                        if waited >= silence:
                            raise ReplicationError(f"{self.source}: no data or heartbeat for {silence:.0f} s: the "
                                                   "connection is dead") from None
                if not chunk:
                    raise ReplicationError(f"{self.source}: the server closed the replication connection")
                framer.feed(chunk)
                for payload in (self._routed(framer, builder, dec) if routing and builder is not None
                                else self._payloads(framer)):
                    if payload is None:
                        yield None, self.routed[0]
                        continue
                    if not payload or payload[0]:
                        if self._end_of_stream(payload):
                            return
                        continue
                    if len(payload) < 20:
                        raise BinlogError(f"event of {len(payload) - 1} bytes", self.next_position, dec.source)
                    raw = payload[1:]
                    size, log_pos = H.size_and_log_pos(raw)
                    position = log_pos - size if log_pos >= size else 0
                    if raw[H.TYPE] == _ROTATE:
                        ev = dec.decode(raw, position)
                        assert type(ev) is RotateEvent
                        self.file, self.next_position = ev.next_file, ev.next_position
                        dec.source = f"{self.source}/{self.file}"
                    elif log_pos:
                        self.next_position = log_pos
                    yield raw, position
        finally:
            self.close()

    def _payloads(self, framer: PacketFramer) -> Iterator[bytes]:
        """The framer's payloads until it needs more bytes (an error after some of them is raised after them)."""
        while payloads := self._framed(framer):
            yield from payloads

    def _framed(self, framer: PacketFramer, limit: int | None = None) -> list[bytes]:
        """``framer.packets(limit)``, its errors naming the stream (the sans-I/O framer does not know it)."""
        try:
            return framer.packets() if limit is None else framer.packets(limit)
        except ReplicationError as exc:
            raise ReplicationError(f"{self.source}: {exc} (after {self.file}:{self.next_position})") from None

    def _routed(self, framer: PacketFramer, builder: RecordBuilder, dec: BinlogDecoder) -> Iterator[bytes | None]:
        """The framer's payloads, except runs of events the builder's native router takes: None for each run."""
        while True:
            if not framer.in_multi_packet:
                buf, pos = framer.pending()
                routed = builder.route(dec, buf, pos, framer.next_seq, self.commit_wanted())
                if routed is not None and routed.events:
                    framer.advance(routed.pos, routed.next_seq)
                    if routed.next_position:
                        self.next_position = routed.next_position
                    self.routed = (routed.events, routed.bytes, routed.timestamp)
                    yield None
                    if routed.stopped:  # stopped at a commit for the caller: the next event may well be native too
                        continue
            payloads = self._framed(framer, 1)
            if not payloads:
                return
            yield payloads[0]

    def _end_of_stream(self, payload: bytes) -> bool:
        """A packet that is not an event: EOF (True when caught up in non-blocking mode) or an error."""
        head = payload[0] if payload else -1
        if head == 0xFF:
            code, message = parse_err(payload)
            hint = f" ({SERVER_HINTS[code]})" if code in SERVER_HINTS else ""
            raise ReplicationError(f"{self.source}: server error {code}: {message}{hint}", code)
        if head == 0xFE and len(payload) < 9:
            if self.non_blocking:
                return True
            raise ReplicationError(f"{self.source}: the server ended the binlog stream (shutting down?)")
        raise ReplicationError(f"{self.source}: unexpected packet {payload[:1].hex() or 'of 0 bytes'} in the binlog "
                               "stream")

    def frames(self) -> Iterator[tuple[bytes, Event]]:
        """(raw event, decoded outer event) in stream order; ``decoder`` expands payloads."""
        for raw, position in self.positioned():  # no builder: nothing is routed, every event comes raw
            assert self.decoder is not None and raw is not None
            yield raw, self.decoder.decode(raw, position)

    def events(self) -> Iterator[Event]:
        """Decoded events, compressed transactions expanded."""
        for _, ev in self.frames():
            yield ev
            if type(ev) is TransactionPayloadEvent:
                assert self.decoder is not None
                yield from self.decoder.payload_events(ev)


def _code(exc: BaseException) -> int | None:
    """A pymysql error's server error number, if it has one."""
    args: tuple[Any, ...] = getattr(exc, "args", ())
    return args[0] if len(args) >= 2 and isinstance(args[0], int) else None


def _message(exc: BaseException) -> str:
    args: tuple[Any, ...] = getattr(exc, "args", ())
    if len(args) >= 2:
        return f"error {args[0]}: {args[1]}"
    return str(exc)
