"""A Kafka-protocol man in the middle that refuses a partition's first produce request once, the way a broker
does for a topic it has just created (NOT_LEADER_OR_FOLLOWER: the broker has not taken up the partition's
leadership yet), and keeps that request back until the producer sends its next one to the topic: the interleaving
of a producer with several requests in flight, made deterministic.

The broker advertises the proxy's address (``advertised.listeners``), so every connection of the clients goes
through it; everything but the one request refused is passed through untouched. The refusal is answered just
before the broker's answer to the next request of the topic (or after ``hold`` seconds when none comes: a producer
with one request in flight waits for the first answer before sending more).
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable

PRODUCE = 0
NOT_LEADER_OR_FOLLOWER = 6


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """An unsigned varint at ``at``: its value and the offset after it."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _put_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _skip_tags(data: bytes, at: int) -> int:
    count, at = _varint(data, at)
    for _ in range(count):
        _, at = _varint(data, at)
        size, at = _varint(data, at)
        at += size
    return at


def produce_partitions(frame: bytes) -> tuple[int, int, list[tuple[str, list[int]]]] | None:
    """A request frame's (correlation id, version, [(topic, partitions)]) when it is a produce request; None for
    other requests. Produce v9 to v12 (flexible, topics by name: what librdkafka sends)."""
    api_key, version, correlation = struct.unpack_from(">hhi", frame)
    if api_key != PRODUCE:
        return None
    if not 9 <= version <= 12:
        raise AssertionError(f"produce request version {version}: the proxy reads v9 to v12")
    (client_id,) = struct.unpack_from(">h", frame, 8)
    at = _skip_tags(frame, 10 + max(client_id, 0))  # request header v2: its tagged fields
    size, at = _varint(frame, at)  # transactional id (compact nullable string)
    at += max(size - 1, 0) + 2 + 4  # acks, timeout
    topics: list[tuple[str, list[int]]] = []
    count, at = _varint(frame, at)
    for _ in range(count - 1):
        size, at = _varint(frame, at)
        name = frame[at : at + size - 1].decode()
        at += size - 1
        partitions = []
        parts, at = _varint(frame, at)
        for _ in range(parts - 1):
            (index,) = struct.unpack_from(">i", frame, at)
            size, at = _varint(frame, at + 4)  # records (compact bytes)
            at = _skip_tags(frame, at + max(size - 1, 0))
            partitions.append(index)
        at = _skip_tags(frame, at)
        topics.append((name, partitions))
    return correlation, version, topics


def refusal(correlation: int, topics: list[tuple[str, list[int]]], error: int = NOT_LEADER_OR_FOLLOWER) -> bytes:
    """A produce response (v9 to v12) refusing every partition of a request with ``error``, framed."""
    body = bytearray(struct.pack(">i", correlation) + b"\0")  # response header v1
    body += _put_varint(len(topics) + 1)
    for name, partitions in topics:
        body += _put_varint(len(name.encode()) + 1) + name.encode() + _put_varint(len(partitions) + 1)
        for index in partitions:
            # index, error, base offset, log append time, log start offset; no record errors, no message, no tags
            body += struct.pack(">ihqqq", index, error, -1, -1, -1) + b"\x01" + b"\0" + b"\0"
        body += b"\0"
    body += struct.pack(">i", 0) + b"\0"  # throttle time, tags
    return struct.pack(">i", len(body)) + bytes(body)


def _frames(sock: socket.socket) -> Callable[[], bytes | None]:
    buffer = bytearray()

    def next_frame() -> bytes | None:
        while True:
            if len(buffer) >= 4:
                (size,) = struct.unpack_from(">i", buffer)
                if len(buffer) >= 4 + size:
                    frame = bytes(buffer[4 : 4 + size])
                    del buffer[: 4 + size]
                    return frame
            chunk = sock.recv(65536)
            if not chunk:
                return None
            buffer.extend(chunk)

    return next_frame


class RefuseFirstProduce:
    """Listens on its own port, forwards to ``target()`` (the broker's port, read at each connection); refuses the
    first produce request naming ``topic`` once. ``held`` is set when it keeps that request back; ``refused`` when
    it answered it (``overtaken``: True when the next request of the topic was sent before that answer). Requests
    are only passed through until ``armed`` is set."""

    def __init__(self, target: Callable[[], int], topic: str, hold: float = 2.0) -> None:
        self.target = target
        self.topic = topic
        self.hold = hold
        self.armed = threading.Event()
        self.held = threading.Event()
        self.refused = threading.Event()
        self.overtaken = False
        self._lock = threading.Lock()
        self._pending: tuple[socket.socket, threading.Lock, int, list[tuple[str, list[int]]]] | None = None
        self._next: tuple[socket.socket, int] | None = None  # the topic's next request (its connection, correlation)
        self._done = False
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        for sock in self._sockets:
            try:
                sock.close()
            except OSError:
                pass

    def __enter__(self) -> RefuseFirstProduce:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target()))
            except OSError:  # the broker not listening (yet, or any more): the client tries again
                client.close()
                continue
            self._sockets += [client, server]
            to_client = threading.Lock()
            threading.Thread(target=self._requests, args=(client, server, to_client), daemon=True).start()
            threading.Thread(target=self._responses, args=(server, client, to_client), daemon=True).start()

    def _requests(self, client: socket.socket, server: socket.socket, to_client: threading.Lock) -> None:
        next_frame = _frames(client)
        try:
            while (frame := next_frame()) is not None:
                produced = produce_partitions(frame)
                if produced is not None and self.armed.is_set() and any(name == self.topic for name, _ in produced[2]):
                    with self._lock:
                        if not self._done and self._pending is None:  # the first: kept back, answered later
                            self._pending = (client, to_client, produced[0], produced[2])
                            threading.Timer(self.hold, self._refuse).start()
                            self.held.set()
                            continue
                        if self._pending is not None and self._pending[0] is client and self._next is None:
                            self._next = (client, produced[0])
                            self.overtaken = True
                server.sendall(struct.pack(">i", len(frame)) + frame)
        except OSError:
            pass
        finally:
            _shut(server)

    def _responses(self, server: socket.socket, client: socket.socket, to_client: threading.Lock) -> None:
        next_frame = _frames(server)
        try:
            while (frame := next_frame()) is not None:
                (correlation,) = struct.unpack_from(">i", frame)
                if self._next is not None and self._next == (client, correlation):
                    self._refuse()  # the refusal first, as a broker answers requests in order
                with to_client:
                    client.sendall(struct.pack(">i", len(frame)) + frame)
        except OSError:
            pass
        finally:
            _shut(client)

    def _refuse(self) -> None:
        with self._lock:
            pending, self._pending, self._done = self._pending, None, True
        if pending is None:
            return
        client, to_client, correlation, topics = pending
        with to_client:
            client.sendall(refusal(correlation, topics))
        self.refused.set()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
