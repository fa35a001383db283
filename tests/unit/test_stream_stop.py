"""A replication stream the server sends nothing on (no events, no heartbeats) still sees a stop request."""

from __future__ import annotations

import socket
import time

import pytest

from ingester.sources import replication


def test_a_quiet_stream_ends_soon_after_stopping_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    ours, server = socket.socketpair()

    def connect(stream: replication.BinlogStream) -> None:
        stream._conn = type("Conn", (), {"_sock": ours, "close": lambda self: None})()

    monkeypatch.setattr(replication.BinlogStream, "_connect", connect)
    monkeypatch.setattr(replication.BinlogStream, "_register", lambda stream: None)
    monkeypatch.setattr(replication.BinlogStream, "_dump", lambda stream: None)
    stream = replication.BinlogStream("mysql://root@127.0.0.1:1", server_id=1, start_file="binlog.000001",
                                      heartbeat=0)
    asked: list[float] = []
    stop_at = time.monotonic() + 1.0

    def stopping() -> bool:
        asked.append(time.monotonic())
        return asked[-1] >= stop_at

    stream.stopping = stopping
    try:
        assert list(stream.positioned()) == []
    finally:
        ours.close()
        server.close()
    assert asked[-1] - stop_at < replication._POLL + 0.2
    assert len(asked) <= 1.0 / replication._POLL + 2  # asked every _POLL s, no busy loop
