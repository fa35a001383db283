"""Property tests: random and mutated events only ever raise the codec's own BinlogError."""

from __future__ import annotations

import functools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingester.codec import BinlogDecoder, BinlogError
from ingester.codec.constants import EventType
from ingester.sources.binlog_file import binlog_frames
from tests.corpus import manifest

_SKIP = {"binlog_truncated_event.000001", "binlog_truncated_prev_gtid_event.000001", "corrupt-relay-bin.000624"}


@functools.cache
def _corpus_events() -> list[tuple[str, int, bytes]]:
    """(file, position, event bytes) of every event in the corpus (the sakila file sampled)."""
    out = []
    for entry in manifest():
        if entry.path.name in _SKIP:
            continue
        dec = BinlogDecoder(str(entry.path))
        frames = list(binlog_frames(entry.path, dec))
        if len(frames) > 200:
            frames = frames[:: len(frames) // 200]
        out += [(str(entry.path), pos, bytes(raw)) for pos, raw in frames]
    return out


@functools.cache
def _primed(path: str, position: int) -> list[bytes]:
    """The events a decoder must have seen before ``position`` (FDEs and table maps)."""
    dec = BinlogDecoder(path)
    return [bytes(raw) for pos, raw in binlog_frames(path, dec, stop_position=position)
            if raw[4] in (EventType.FORMAT_DESCRIPTION_EVENT, EventType.TABLE_MAP_EVENT)]


def _decode_all(path: str, position: int, raw: bytes) -> None:
    dec = BinlogDecoder(path, verify_checksums=False)
    for prior in _primed(path, position):
        try:
            dec.decode(prior, 4)
        except BinlogError:
            pass
    for _ in dec.events(raw, position):
        pass


def _mutate(raw: bytes, data: st.DataObject) -> bytes:
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 8))):
        kind = data.draw(st.sampled_from(["flip", "byte", "truncate", "extend", "size"]))
        if kind == "flip" and buf:
            i = data.draw(st.integers(0, len(buf) - 1))
            buf[i] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "byte" and buf:
            buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
        elif kind == "truncate":
            del buf[data.draw(st.integers(0, len(buf))):]
        elif kind == "extend":
            buf += data.draw(st.binary(max_size=64))
        elif kind == "size" and len(buf) >= 13:  # keep the size field consistent with the bytes
            buf[9:13] = len(buf).to_bytes(4, "little")
    return bytes(buf)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_real_events_raise_only_binlog_error(data) -> None:
    path, pos, raw = data.draw(st.sampled_from(_corpus_events()))
    mutated = _mutate(raw, data)
    try:
        _decode_all(path, pos, mutated)
    except BinlogError as exc:
        assert exc.position is not None
        assert path in str(exc)


@settings(max_examples=2000, deadline=None)
@given(st.integers(0, 255), st.binary(max_size=300))
def test_random_event_bodies_raise_only_binlog_error(type_code, body) -> None:
    _fde_path, fde_pos, fde = next(e for e in _corpus_events() if e[0].endswith("mysql-bin.checksum-none"))
    header = (0).to_bytes(4, "little") + bytes([type_code]) + (1).to_bytes(4, "little")
    size = 19 + len(body)
    raw = header + size.to_bytes(4, "little") + (fde_pos + size).to_bytes(4, "little") + b"\0\0" + body
    dec = BinlogDecoder("random")
    dec.decode(fde, fde_pos)
    try:
        list(dec.events(raw, 100))
    except BinlogError:
        pass
