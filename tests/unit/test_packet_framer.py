"""The sans-I/O packet framing of the replication stream."""

from __future__ import annotations

import pytest

from ingester.redact import redact
from ingester.sources.replication import PacketFramer, ReplicationError, SourceURL, parse_err


def _packet(payload: bytes, seq: int) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq & 0xFF]) + payload


def _stream(payloads: list[bytes], first_seq: int = 1) -> tuple[bytes, int]:
    out = bytearray()
    seq = first_seq
    for payload in payloads:
        while True:  # split as a server does: 0xFFFFFF-byte pieces, then the rest (maybe empty)
            piece, payload = payload[:0xFFFFFF], payload[0xFFFFFF:]
            out += _packet(piece, seq)
            seq += 1
            if len(piece) < 0xFFFFFF:
                break
    return bytes(out), seq


def test_packets_split_at_every_byte_boundary() -> None:
    payloads = [b"\x00event-one", b"\x00" + bytes(range(256)) * 3, b"\xfe\x00\x00\x02\x00"]
    data, _ = _stream(payloads)
    for cut in range(len(data) + 1):
        framer = PacketFramer()
        got = []
        framer.feed(data[:cut])
        got += framer.packets()
        framer.feed(data[cut:])
        got += framer.packets()
        assert got == payloads


def test_multi_packet_payloads_are_reassembled() -> None:
    big = b"\x00" + b"x" * (0xFFFFFF * 2)  # needs two full packets and a third
    exact = b"\x00" + b"y" * (0xFFFFFF - 1)  # exactly 0xFFFFFF: followed by an empty packet
    data, seq = _stream([big, exact, b"\x00tail"])
    framer = PacketFramer()
    got = []
    for i in range(0, len(data), 1 << 22):  # fed in 4 MiB reads, as the socket delivers them
        framer.feed(data[i : i + (1 << 22)])
        got += framer.packets()
    assert [len(p) for p in got] == [len(big), len(exact), 5]
    assert got[0] == big and got[1] == exact
    assert framer.next_seq == seq & 0xFF


def test_out_of_step_sequence_is_an_error() -> None:
    framer = PacketFramer()
    framer.feed(_packet(b"\x00a", 1) + _packet(b"\x00b", 3))
    assert framer.packets() == [b"\x00a"]  # the packets before it first: nothing before the damage is lost
    with pytest.raises(ReplicationError, match="sequence 3, expected 2"):
        framer.packets()


def test_err_packet_and_urls() -> None:
    err = b"\xff" + (1236).to_bytes(2, "little") + b"#HY000" + b"Could not find first log file name"
    assert parse_err(err) == (1236, "Could not find first log file name")
    url = SourceURL.parse("mysql://repl:s%40cret@db.example:3307")
    assert (url.user, url.password, url.host, url.port) == ("repl", "s@cret", "db.example", 3307)
    assert "s@cret" not in str(url) and "cret" not in redact("mysql://repl:s%40cret@db.example:3307")
    with pytest.raises(ValueError, match=r"\*\*\*"):
        SourceURL.parse("http://u:topsecret@x")


def test_endless_multi_packet_is_refused_at_the_bound() -> None:
    """A hostile server's 0xFFFFFF-byte pieces that never end: refused once past max_payload, so
    memory stays bounded (the default bound is the 1 GiB a server may send)."""
    framer = PacketFramer(max_payload=3 * 0xFFFFFF)
    piece = b"\0" * 0xFFFFFF
    for seq in range(1, 4):
        framer.feed(_packet(piece, seq))
        assert framer.packets() == []
    framer.feed(_packet(piece, 4))
    with pytest.raises(ReplicationError, match="more than 50331645 bytes"):
        framer.packets()
    assert PacketFramer().max_payload == (1 << 30) + 1
