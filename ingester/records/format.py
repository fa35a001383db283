"""Record format v1 (docs/FORMAT.md): what the daemon publishes and consumers decode.

A record's value carries the raw bytes of the event plus the events it needs to be decoded on
its own (the FORMAT_DESCRIPTION and, for rows events, the TABLE_MAP), so any consumer decodes it
with this project's codec alone. Routing facts (position, GTID, commit time, type, table) ride in
Kafka headers, readable without touching the value. Pure functions: no Kafka client here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ..codec import BinlogDecoder, BinlogError
from ..codec.events import Event

MAGIC = b"BLK"
VERSION = 1
_SEQ = struct.Struct(">IQI")


@dataclass(frozen=True, order=True)
class Sequence:
    """Total order of everything published from one source: binlog file number, position, and the
    index of an event inside a compressed transaction (0 outside one). Encoded big-endian, so the
    bytes sort like the values."""

    file_number: int
    position: int
    sub: int = 0

    def encode(self) -> bytes:
        return _SEQ.pack(self.file_number, self.position, self.sub)

    @classmethod
    def decode(cls, data: bytes) -> Sequence:
        if len(data) != _SEQ.size:
            raise ValueError(f"sequence must be {_SEQ.size} bytes, got {len(data)}")
        return cls(*_SEQ.unpack(data))

    def __str__(self) -> str:
        return f"{self.file_number}:{self.position}:{self.sub}"


def file_number(name: str) -> int:
    """The numeric suffix of a binlog file name (binlog.000042 -> 42)."""
    suffix = name.rsplit(".", 1)[-1]
    if not suffix.isdigit():
        raise ValueError(f"binlog file name without a numeric suffix: {name!r}")
    return int(suffix)


@dataclass(frozen=True)
class RecordValue:
    """The decoded container: the context events and the event itself, all raw bytes."""

    format_description: bytes
    table_map: bytes | None
    event: bytes
    in_payload: bool  # event and table map came out of a compressed transaction: no CRC of their own


def encode_value(format_description: bytes, table_map: bytes | None, event: bytes, in_payload: bool) -> bytes:
    """``BLK`` 1 | flags u8 (1: from a compressed transaction) | len u32 + FDE | len u32 + TABLE_MAP
    (0 = none) | event. Events keep their checksums, so consumers can verify them."""
    tm = table_map or b""
    return b"".join((MAGIC, bytes((VERSION, 1 if in_payload else 0)), struct.pack("<I", len(format_description)),
                     format_description, struct.pack("<I", len(tm)), tm, event))


def decode_value(data: bytes) -> RecordValue:
    if len(data) < 13 or data[:3] != MAGIC:
        raise BinlogError("not a binlake record (bad magic)")
    if data[3] != VERSION:
        raise BinlogError(f"record format version {data[3]} is newer than this reader ({VERSION})")
    flags = data[4]
    p = 5
    parts = []
    for what in ("format description", "table map"):
        if p + 4 > len(data):
            raise BinlogError(f"record ends inside its {what} length")
        (n,) = struct.unpack_from("<I", data, p)
        p += 4
        if p + n > len(data):
            raise BinlogError(f"record's {what} of {n} bytes runs past its end")
        parts.append(data[p : p + n])
        p += n
    return RecordValue(parts[0], parts[1] or None, data[p:], bool(flags & 1))


@dataclass(frozen=True, slots=True)
class RecordEvent:
    """One event of a record with the facts a lake needs about it."""

    seq: Sequence
    gtid: str  # empty without GTIDs
    commit_ts: int  # microseconds since the epoch
    event: Event


def record_events(headers: Mapping[str, bytes], value: bytes, source: str = "<record>") -> Iterator[RecordEvent]:
    """The events of one (reassembled) record, each with its sequence, GTID and commit time.

    This is the consumer API: it hides the format version, so consumers (``binlake consume``, the
    Spark job) never parse record bytes or headers themselves."""
    seq = Sequence.decode(headers["binlake.seq"])
    gtid = headers.get("binlake.gtid", b"").decode()
    commit_ts = int(headers.get("binlake.commit_ts") or 0)
    for ev in decode_record(value, source, seq.position):
        yield RecordEvent(seq, gtid, commit_ts, ev)


def chunk_index(headers: Mapping[str, bytes]) -> tuple[int, int] | None:
    """(index, count) of a record's chunk, None for a whole record. For readers that split one
    partition's offsets between workers (Spark's minPartitions) and must carry chunks across a split."""
    chunk = headers.get("binlake.chunk")
    if chunk is None:
        return None
    index, count = (int(x) for x in chunk.split(b"/"))
    return index, count


class ChunkAssembler:
    """Rebuilds records published as consecutive chunks (header ``binlake.chunk: i/n``) of one partition."""

    def __init__(self) -> None:
        self._parts: dict[object, list[bytes]] = {}

    def feed(self, partition: object, headers: Mapping[str, bytes], value: bytes,
             where: str = "<record>", offset: int = 0) -> bytes | None:
        """The whole record value, or None while chunks of it are still missing."""
        chunk = chunk_index(headers)
        if chunk is None:
            if partition in self._parts:
                raise BinlogError("a record follows an incomplete chunked record", offset, where)
            return value
        index, count = chunk
        parts = self._parts.setdefault(partition, [])
        if index != len(parts):
            raise BinlogError(f"chunk {index}/{count} follows {len(parts)} chunks", offset, where)
        parts.append(value)
        if index + 1 < count:
            return None
        del self._parts[partition]
        return b"".join(parts)

    @property
    def pending(self) -> bool:
        return bool(self._parts)


def decode_record(data: bytes, source: str = "<record>", position: int = 0) -> Iterator[Event]:
    """The event of a record (a compressed transaction followed by its inner events)."""
    value = decode_value(data)
    dec = _decoder(value.format_description, source)
    if value.table_map is not None:
        dec.decode(value.table_map, position, in_payload=value.in_payload)
    if value.in_payload:
        yield dec.decode(value.event, position, in_payload=True)
    else:
        yield from dec.events(value.event, position)


_decoders: dict[bytes, BinlogDecoder] = {}


def _decoder(format_description: bytes, source: str) -> BinlogDecoder:
    """One decoder per FORMAT_DESCRIPTION: every record repeats its table map, and a decoder that has
    seen the same map bytes before reuses the parsed map and its compiled row decoders."""
    dec = _decoders.get(format_description)
    if dec is None:
        dec = BinlogDecoder(source)
        dec.decode(format_description, 4)
        if len(_decoders) >= 64:
            _decoders.clear()
        _decoders[format_description] = dec
    dec.source = source
    return dec
