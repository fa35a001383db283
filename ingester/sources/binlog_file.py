"""Read binlog and relay-log files through the codec, memory-mapped so size never matters."""

from __future__ import annotations

import gzip
import mmap
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..codec import BinlogDecoder, BinlogError
from ..codec.constants import BINLOG_MAGIC, HEADER_V1
from ..codec.constants import EventType as ET
from ..codec.events import Event

_START_V1_SIZE = HEADER_V1 + 56
_START_V3_SIZE = 19 + 56


@contextmanager
def _mapped(path: Path) -> Iterator[Any]:
    if path.suffix == ".gz":
        with gzip.open(path, "rb") as fh:  # test corpora only; decompressed in memory
            yield fh.read()
        return
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            yield b""
            return
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            yield mm


def read_binlog_file(path: str | os.PathLike[str], *, start_position: int | None = None,
                     stop_position: int | None = None, verify_checksums: bool = True,
                     decoder: BinlogDecoder | None = None) -> Iterator[Event]:
    """Yield every event of a binlog file (payload inner events included, in order).

    Raises BinlogError naming the file and byte position on anything malformed.
    """
    dec = decoder or BinlogDecoder(str(path), verify_checksums=verify_checksums)
    for pos, chunk in binlog_frames(path, dec, start_position=start_position, stop_position=stop_position):
        yield from dec.events(chunk, pos)


def binlog_frames(path: str | os.PathLike[str], dec: BinlogDecoder, *, start_position: int | None = None,
                  stop_position: int | None = None) -> Iterator[tuple[int, bytes]]:
    """Yield ``(position, event bytes)`` for each event of a binlog file, undecoded.

    Events before ``start_position`` are skipped, except format descriptions, which are decoded
    into ``dec`` because later events depend on them; iteration stops before the first event that
    starts at or after ``stop_position``.
    """
    name = str(path)
    with open_binlog(path, dec) as buf:
        pos = 4 if start_position is None else skip_to(buf, dec, name, start_position, stop_position)
        yield from frames_in(buf, pos, stop_position, dec, name)


@contextmanager
def open_binlog(path: str | os.PathLike[str], dec: BinlogDecoder) -> Iterator[Any]:
    """The file's bytes, memory-mapped, once its magic is checked (and v1/v3 layouts set in ``dec``)."""
    with _mapped(Path(path)) as buf:
        _check_header(buf, dec, str(path))
        yield buf


def skip_to(buf: Any, dec: BinlogDecoder, name: str, start: int, stop: int | None) -> int:
    """Position of the first event at or after ``start``, decoding the format descriptions before it."""
    pos = 4
    for at, chunk in frames_in(buf, 4, start if stop is None else min(start, stop), dec, name):
        if chunk[4] == ET.FORMAT_DESCRIPTION_EVENT:
            dec.decode(chunk, at)
        pos = at + len(chunk)
    return pos


def prime_segment(buf: Any, dec: BinlogDecoder, name: str) -> None:
    """Decode the event at 4 (the format description) so a segment decodes on its own."""
    for pos, chunk in frames_in(buf, 4, 5, dec, name):
        dec.decode(chunk, pos)


def _check_header(buf: Any, dec: BinlogDecoder, name: str) -> None:
    size = len(buf)
    if size < 4 or buf[:4] != BINLOG_MAGIC:
        raise BinlogError("not a binlog file (missing the fe 62 69 6e magic)", 0, name)
    if size >= 4 + HEADER_V1 and buf[4 + 4] == ET.START_EVENT_V3:
        first = int.from_bytes(buf[4 + 9 : 4 + 13], "little")
        if first == _START_V1_SIZE:
            dec.start_v1()
        elif first == _START_V3_SIZE:
            dec.start_v3()


def frames_in(buf: Any, pos: int, stop: int | None, dec: BinlogDecoder, name: str) -> Iterator[tuple[int, bytes]]:
    """``(position, event bytes)`` of the events starting in ``[pos, stop)``; framing errors name ``name``."""
    size = len(buf)
    end = size if stop is None else min(stop, size)
    while pos < end:
        if size - pos < dec.header_len:
            raise BinlogError(f"file ends inside an event header ({size - pos} of {dec.header_len} bytes)",
                              pos, name)
        ev_size = int.from_bytes(buf[pos + 9 : pos + 13], "little")
        if ev_size < dec.header_len:
            raise BinlogError(f"impossible event size {ev_size}", pos, name)
        if pos + ev_size > size:
            raise BinlogError(f"file ends inside an event ({size - pos} of {ev_size} bytes)", pos, name)
        yield pos, buf[pos : pos + ev_size]
        pos += ev_size


def transaction_starts(path: str | os.PathLike[str], min_gap: int) -> Iterator[int]:
    """Positions of transaction-starting GTID events at least ``min_gap`` bytes apart, lazily.

    A segment between two of them decodes on its own. Splitting stops at a second format
    description (relay logs), so everything after it stays in one segment; files of servers
    without GTIDs yield nothing. Only headers are read; damage is left for the decoders to report.
    """
    from_bytes = int.from_bytes
    with _mapped(Path(path)) as buf:
        size = len(buf)
        if size < 4 + HEADER_V1 or buf[:4] != BINLOG_MAGIC or buf[8] != ET.FORMAT_DESCRIPTION_EVENT:
            return
        pos = 4 + from_bytes(buf[13:17], "little")
        last = 4
        while pos + 13 <= size:
            code = buf[pos + 4]
            if code in _GTID_TYPES and pos - last >= min_gap:
                yield pos
                last = pos
            elif code == ET.FORMAT_DESCRIPTION_EVENT:
                return
            ev_size = from_bytes(buf[pos + 9 : pos + 13], "little")
            if ev_size < HEADER_V1:
                return
            pos += ev_size


_GTID_TYPES = frozenset((ET.GTID_LOG_EVENT, ET.ANONYMOUS_GTID_LOG_EVENT, ET.GTID_TAGGED_LOG_EVENT, ET.GTID_EVENT))
