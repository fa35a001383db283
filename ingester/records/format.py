"""Record format v2 (docs/FORMAT.md): what the daemon publishes and consumers decode.

A record holds consecutive events of one topic (one table's rows events, or statements) as the
server's raw bytes, plus what they need to be decoded on their own: the FORMAT_DESCRIPTION once and
each TABLE_MAP where it changes. Many events per record is what makes publishing fast (the Kafka
client's cost is per record). Each event's sequence, GTID, commit time and type ride in the
``binlake.index`` header, readable without touching the value. Pure functions: no Kafka client here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ..codec import BinlogDecoder, BinlogError
from ..codec.events import Event
from ..codec.rows import RowsCompiler
from ..codec.table_map import TableMap
from ..schema.history import enrich
from .snapshot import FLAG_SNAPSHOT, SnapshotDecoder
from .statement import FLAG_STATEMENT, decode_entry

MAGIC = b"BLK"
VERSION = 2
_SEQ = struct.Struct(">IQI")
_LEN = struct.Struct("<I")
_INDEX_ENTRY = struct.Struct(">16sQBB")  # seq, commit_ts, type code, GTID length; then the GTID
_FLAG_IN_PAYLOAD = 1
FLAG_SCHEMA = 4  # entry flag bit 2: a schema entry (columns from the schema history) follows the TABLE_MAP


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


class RecordWriter:
    """Accumulates the events of one record: value parts and index entries, encoded as they come."""

    __slots__ = ("count", "first_seq", "index", "last_commit_ts", "parts", "schema", "size", "table_map")

    def __init__(self, format_description: bytes) -> None:
        self.parts = [MAGIC, bytes((VERSION, 0)), _LEN.pack(len(format_description)), format_description]
        self.index: list[bytes] = []
        self.size = 9 + len(format_description)
        self.table_map: bytes | None = None
        self.schema = b""
        self.count = 0
        self.first_seq = b""
        self.last_commit_ts = 0

    def add(self, seq: bytes, commit_ts: int, gtid: bytes, event: bytes, table_map: bytes | None,
            in_payload: bool, schema: bytes = b"") -> None:
        """Append one event. ``table_map`` (with its ``schema`` entry, if any) is stored only where it
        differs from the previous one."""
        flags = _FLAG_IN_PAYLOAD if in_payload else 0
        tm, extra = b"", b""
        if table_map is not None and (table_map != self.table_map or schema != self.schema):
            tm, self.table_map, self.schema = table_map, table_map, schema
            if schema:  # the map's schema entry follows it
                flags |= FLAG_SCHEMA
                extra = _LEN.pack(len(schema)) + schema
        self.parts += (bytes((flags,)), _LEN.pack(len(tm)), tm, extra, _LEN.pack(len(event)), event)
        self.index += (_INDEX_ENTRY.pack(seq, commit_ts, event[4], len(gtid)), gtid)
        self.size += 9 + len(tm) + len(extra) + len(event)
        if not self.count:
            self.first_seq = seq
        self.count += 1
        self.last_commit_ts = commit_ts

    def value(self) -> bytes:
        return b"".join(self.parts)

    def index_header(self) -> bytes:
        return b"".join(self.index)


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """What the ``binlake.index`` header says about one event of a record."""

    seq: Sequence
    commit_ts: int  # microseconds since the epoch
    type_code: int
    gtid: str  # empty without GTIDs


def read_index(header: bytes) -> list[IndexEntry]:
    entries = []
    p, end = 0, len(header)
    while p < end:
        if p + _INDEX_ENTRY.size > end:
            raise BinlogError("record index ends inside an entry", p)
        seq, commit_ts, code, n = _INDEX_ENTRY.unpack_from(header, p)
        p += _INDEX_ENTRY.size
        if p + n > end:
            raise BinlogError("record index ends inside a GTID", p)
        entries.append(IndexEntry(Sequence.decode(seq), commit_ts, code, header[p : p + n].decode()))
        p += n
    return entries


@dataclass(frozen=True, slots=True)
class RecordEvent:
    """One event of a record with the facts a lake needs about it."""

    seq: Sequence
    gtid: str  # empty without GTIDs
    commit_ts: int  # microseconds since the epoch
    event: Event


def _check_version(data: bytes) -> None:
    if len(data) < 9 or data[:3] != MAGIC:
        raise BinlogError("not a binlake record (bad magic)", 0)
    if data[3] != VERSION:
        raise BinlogError(f"record format version {data[3]} is not the version this reader knows ({VERSION})", 3)


def record_events(headers: Mapping[str, bytes], value: bytes, source: str = "<record>",
                  columnar: bool | RowsCompiler = False) -> Iterator[RecordEvent]:
    """The events of one (reassembled) record, each with its sequence, GTID and commit time.

    This is the consumer API: consumers (``binlake consume``, the Spark job) never parse record
    bytes or headers themselves. Errors name ``source`` and the byte offset inside the value.
    ``columnar``: binlog rows events hold ``RowImages`` (codec.rows) instead of row dicts, or with a
    ``RowsCompiler`` what its decoders return."""
    _check_version(value)
    index = read_index(headers["binlake.index"])
    data = memoryview(value)
    (n,) = _LEN.unpack_from(value, 5)
    p = 9 + n
    if p > len(value):
        raise BinlogError(f"record's format description of {n} bytes runs past its end", 9, source)
    # snapshot-only records have no format description
    dec = _decoder(bytes(data[9:p]), source, columnar) if n else BinlogDecoder(source, columnar=columnar)
    snapshot: SnapshotDecoder | None = None
    for entry in index:
        if p + 5 > len(value):
            raise BinlogError(f"record holds fewer events than its index ({len(index)})", p, source)
        flags = value[p]
        if flags & FLAG_STATEMENT:  # what a statement did to the table (records/statement.py)
            statement, p = decode_entry(value, p + 1, entry.seq.position, entry.commit_ts, source)
            yield RecordEvent(entry.seq, entry.gtid, entry.commit_ts, statement)
            continue
        in_payload = bool(flags & _FLAG_IN_PAYLOAD)
        (m,) = _LEN.unpack_from(value, p + 1)
        p += 5
        if flags & FLAG_SNAPSHOT:  # rows read by a snapshot: a descriptor and JSON rows (records/snapshot.py)
            if p + m + 4 > len(value):
                raise BinlogError(f"record's snapshot descriptor of {m} bytes runs past its end", p, source)
            (k,) = _LEN.unpack_from(value, p + m)
            if p + m + 4 + k > len(value):
                raise BinlogError(f"record's snapshot rows of {k} bytes run past its end", p + m, source)
            snapshot = snapshot or SnapshotDecoder(source, bool(columnar))
            read = snapshot.event(value[p : p + m], value[p + m + 4 : p + m + 4 + k], entry.seq.position,
                                  entry.commit_ts, p, flags)
            p += m + 4 + k
            yield RecordEvent(entry.seq, entry.gtid, entry.commit_ts, read)
            continue
        if m:
            if p + m > len(value):
                raise BinlogError(f"record's table map of {m} bytes runs past its end", p, source)
            tm_event = dec.decode(bytes(data[p : p + m]), entry.seq.position, in_payload=in_payload)
            p += m
            if flags & FLAG_SCHEMA:  # columns from the schema history (records/schema entries, docs/FORMAT.md)
                if p + 4 > len(value) or p + 4 + _LEN.unpack_from(value, p)[0] > len(value):
                    raise BinlogError("record's schema entry runs past its end", p, source)
                (s,) = _LEN.unpack_from(value, p)
                tm = _with_schema(tm_event, bytes(data[p + 4 : p + 4 + s]), p, source)
                dec.table_maps[tm.table_id] = tm
                p += 4 + s
        if p + 4 > len(value):
            raise BinlogError("record ends inside an event length", p, source)
        (k,) = _LEN.unpack_from(value, p)
        p += 4
        if p + k > len(value) or k < 5:
            raise BinlogError(f"record's event of {k} bytes runs past its end", p, source)
        ev = dec.decode(bytes(data[p : p + k]), entry.seq.position, in_payload=in_payload)
        p += k
        yield RecordEvent(entry.seq, entry.gtid, entry.commit_ts, ev)
    if p != len(value):
        raise BinlogError(f"record has {len(value) - p} bytes after the events its index lists", p, source)


def record_decoder(value: bytes, source: str, columnar: bool | RowsCompiler) -> BinlogDecoder | None:
    """The decoder ``record_events`` reads a record with (one per FORMAT_DESCRIPTION and ``columnar``), for
    readers that walk a record's events themselves (the native Debezium renderer); None for a record without a
    format description, or one this reader does not know (``record_events`` says what is wrong)."""
    if len(value) < 9 or value[:3] != MAGIC or value[3] != VERSION:
        return None
    (n,) = _LEN.unpack_from(value, 5)
    if not n or 9 + n > len(value):
        return None
    try:
        return _decoder(value[9 : 9 + n], source, columnar)
    except BinlogError:
        return None


def entry_table_map(dec: BinlogDecoder, value: bytes, offset: int, position: int, source: str) -> TableMap:
    """The table map of the record entry at ``offset`` (which has one) as ``record_events`` reads it with
    ``dec``: decoded, with its schema entry's names if it has one; ``position`` is the entry's binlog position.
    Raises the codec's BinlogError as ``record_events`` would."""
    flags = value[offset]
    (m,) = _LEN.unpack_from(value, offset + 1)
    p = offset + 5
    tm_event = dec.decode(value[p : p + m], position, in_payload=bool(flags & _FLAG_IN_PAYLOAD))
    p += m
    if not flags & FLAG_SCHEMA:
        return tm_event.table_map  # type: ignore[attr-defined, no-any-return]
    (s,) = _LEN.unpack_from(value, p)
    tm = _with_schema(tm_event, value[p + 4 : p + 4 + s], p, source)
    dec.table_maps[tm.table_id] = tm
    return tm


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


_decoders: dict[tuple[bytes, Any], BinlogDecoder] = {}  # (format description, columnar)
_enriched: dict[tuple[int, bytes], tuple[TableMap, TableMap]] = {}


def _with_schema(event: Event, schema: bytes, offset: int, source: str) -> TableMap:
    """The TABLE_MAP with a schema entry's names, labels and key; one object per (map, entry), so its
    compiled row decoders are reused like those of maps that carry their own names (the decoder returns
    the same parsed map for the same map bytes)."""
    plain = event.table_map  # type: ignore[attr-defined]
    key = (id(plain), schema)
    cached = _enriched.get(key)
    if cached is not None and cached[0] is plain:
        return cached[1]
    try:
        tm = enrich(plain, schema)
    except (ValueError, KeyError, TypeError, AttributeError, orjson.JSONDecodeError) as exc:
        raise BinlogError(f"bad schema entry: {exc}", offset, source) from None
    if len(_enriched) >= 4096:
        _enriched.clear()
    _enriched[key] = (plain, tm)
    return tm


def _decoder(format_description: bytes, source: str, columnar: bool | RowsCompiler) -> BinlogDecoder:
    """One decoder per FORMAT_DESCRIPTION: records repeat their table maps, and a decoder that has seen
    the same map bytes before reuses the parsed map and its compiled row decoders (compiling them again
    for every record cost about 0.5 ms a record)."""
    dec = _decoders.get((format_description, columnar))
    if dec is None:
        dec = BinlogDecoder(source, columnar=columnar)
        dec.decode(format_description, 4)
        if len(_decoders) >= 64:
            _decoders.clear()
        _decoders[(format_description, columnar)] = dec
    dec.source = source
    return dec
