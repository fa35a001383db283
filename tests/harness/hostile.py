"""A hostile source for the daemon: a MySQL-protocol man in the middle that lets a real server do the
handshake, the queries and the registration, then breaks the binlog stream on purpose.

The real server (not a fake of ours) answers everything up to COM_BINLOG_DUMP, so the daemon's
preflight and connection code meet real packets; from the dump on, every server packet goes through
the fault planned for that connection: malformed events, wrong sequence numbers, a huge announced
length, an ERR packet mid-stream, a stall past the heartbeat period, a half-closed socket.
Connections past the planned faults are passed through untouched, so a daemon that reconnects
converges on the server's data.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

COM_BINLOG_DUMP = (0x12, 0x1E)
ROWS_EVENTS = (23, 30)  # WRITE_ROWS v1/v2

# A fault sees each packet of the dump (sequence id, payload, index among event packets) and returns
# the bytes to send instead, or None to end the fault's interference (the rest is passed through).
Fault = Callable[[int, bytes, int], bytes | None]


def packet(seq: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq & 0xFF]) + payload


def _packets(buf: bytearray) -> list[tuple[int, bytes]]:
    """Complete packets at the front of ``buf`` (removed from it)."""
    out = []
    while len(buf) >= 4:
        length = int.from_bytes(buf[:3], "little")
        if len(buf) < 4 + length:
            break
        out.append((buf[3], bytes(buf[4 : 4 + length])))
        del buf[: 4 + length]
    return out


class HostileProxy:
    """Listens on 127.0.0.1:``port``; the Nth binlog dump (from 0) gets ``faults[N]``, if any."""

    def __init__(self, upstream_port: int, faults: list[Fault | None]) -> None:
        self.upstream_port = upstream_port
        self.faults = list(faults)
        self.connections = 0
        self.dumps = 0  # connections that reached COM_BINLOG_DUMP
        self.fired: list[str] = []  # names of the faults that acted
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, user: str = "root", password: str = "") -> str:
        auth = f"{user}:{password}" if password else user
        return f"mysql://{auth}@127.0.0.1:{self.port}?tls=disabled"

    def close(self) -> None:
        self._closed = True
        for s in [self._listener, *self._sockets]:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream_port))
            self._sockets += [client, server]
            self.connections += 1
            dumping: list[Fault | None] = []  # the fault of this connection's dump, once it starts
            threading.Thread(target=self._client_to_server, args=(client, server, dumping), daemon=True).start()
            threading.Thread(target=self._server_to_client, args=(server, client, dumping), daemon=True).start()

    def _client_to_server(self, client: socket.socket, server: socket.socket, dumping: list[Fault | None]) -> None:
        buf = bytearray()
        try:
            while data := client.recv(65536):
                if not dumping:
                    buf += data
                    for seq, payload in _packets(buf):
                        if seq == 0 and payload[:1] and payload[0] in COM_BINLOG_DUMP:
                            # before forwarding: the server answers only after this
                            dumping.append(self.faults[self.dumps] if self.dumps < len(self.faults) else None)
                            self.dumps += 1
                server.sendall(data)
        except OSError:
            pass
        finally:
            _shut(server)

    def _server_to_client(self, server: socket.socket, client: socket.socket, dumping: list[Fault | None]) -> None:
        buf = bytearray()
        events = 0
        fault: Fault | None = None
        started = False
        try:
            while data := server.recv(65536):
                if not started:
                    if not dumping:  # handshake and queries: the real server's bytes, untouched
                        client.sendall(data)
                        continue
                    started, fault = True, dumping[0]
                if fault is None and not buf:
                    client.sendall(data)
                    continue
                buf += data
                out = bytearray()
                for seq, payload in _packets(buf):
                    changed = None if fault is None else fault(seq, payload, events)
                    if payload[:1] == b"\0":
                        events += 1
                    if changed is None:
                        out += packet(seq, payload)
                        continue
                    self.fired.append(getattr(fault, "__name__", "fault"))
                    fault = None
                    out += changed
                    if changed.endswith((_HANG, _HALF_CLOSE)):
                        client.sendall(out[: -len(_HANG)])
                        if changed.endswith(_HALF_CLOSE):
                            client.shutdown(socket.SHUT_WR)
                        server.close()  # the daemon sees silence, never a FIN from the server side
                        return
                if fault is None:  # done: the rest of a packet goes as it came
                    out += buf
                    buf.clear()
                client.sendall(out)
        except OSError:
            pass
        _shut(client)  # the server ended the connection: so do we


_HANG = b"\0HANG\0"  # markers a fault appends: stop sending, keep the socket open
_HALF_CLOSE = b"\0HALF\0"  # or: close our sending side only (FIN), keep reading (same length)


def _shut(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass


# ---------------------------------------------------------------------------------------- faults


def after(n: int, name: str, make: Callable[[int, bytes], bytes]) -> Fault:
    """A fault that acts on the first WRITE_ROWS event packet at or after event packet ``n``."""

    def fault(seq: int, payload: bytes, index: int) -> bytes | None:
        if index < n or payload[:1] != b"\0" or len(payload) < 20 or payload[1 + 4] not in ROWS_EVENTS:
            return None
        return make(seq, payload)

    fault.__name__ = name
    return fault


def corrupt_row(seq: int, payload: bytes) -> bytes:
    """One bit of the last row byte flipped (before the CRC): garbage a server never sends."""
    body = bytearray(payload)
    body[-5] ^= 0x10
    return packet(seq, bytes(body))


def wrong_sequence(seq: int, payload: bytes) -> bytes:
    return packet(seq + 7, payload)


def huge_length(seq: int, payload: bytes) -> bytes:
    """A packet announcing 16 MB - 1 (a multi-packet), of which a few bytes come, then silence."""
    return (0xFFFFFF).to_bytes(3, "little") + bytes([seq]) + payload[:100] + _HANG


def err_packet(code: int, message: str) -> Callable[[int, bytes], bytes]:
    def make(seq: int, payload: bytes) -> bytes:
        return packet(seq, b"\xff" + code.to_bytes(2, "little") + b"#HY000" + message.encode())

    return make


def stall(seq: int, payload: bytes) -> bytes:
    return _HANG


def half_close(seq: int, payload: bytes) -> bytes:
    """Half an event packet, then FIN from our side while the socket stays open for reading."""
    return len(payload).to_bytes(3, "little") + bytes([seq]) + payload[: len(payload) // 2] + _HALF_CLOSE
