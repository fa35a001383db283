"""Snapshot entries of record format v2 (docs/FORMAT.md, "Snapshot rows").

A snapshot reads rows with SELECT, not from the binlog, so there are no server bytes to publish. Its
entries carry instead a table descriptor (the columns as a TABLE_MAP would describe them, built from
information_schema) and the rows as JSON arrays in column order, with the values already in the binlog
decoder's representation (docs/JSONL.md); binary values are base64. ``record_events`` turns them into
``SnapshotRowsEvent``s, so consumers keep one decode API. Pure functions: no Kafka, no SQL.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

import orjson
import zstandard

from ..codec import BinlogError
from ..codec.constants import ColumnType as T
from ..codec.events import SnapshotRowsEvent, VerifyRowsEvent
from ..codec.jsonb import JSON_NULL
from ..codec.rows import RowImages
from ..codec.table_map import Column, TableMap

SNAPSHOT_ROWS = 250  # the index's type code of snapshot entries: no server uses it
FLAG_SNAPSHOT = 2  # entry flag bit 1: the entry is a snapshot entry (descriptor + JSON rows)
FLAG_ZSTD = 8  # entry flag bit 3: a snapshot entry's rows are one zstd frame of the JSON
FLAG_VERIFY = 16  # entry flag bit 4: the rows are a verify chunk (compared with the lake's, never applied)
_MAX_ROWS_BYTES = 1 << 31  # a snapshot entry's rows, decompressed: far more than any record holds
_LEN = struct.Struct("<I")
_INDEX_ENTRY = struct.Struct(">16sQBB")
_JSON_NULL_WIRE = JSON_NULL.to_json()
_COLUMN_FIELDS = ("name", "type", "binlog_type", "meta", "nullable", "unsigned", "collation", "enum_values",
                  "set_values", "geometry_type")


def encode_descriptor(tm: TableMap, binary: list[int]) -> bytes:
    """The table descriptor of a snapshot entry: ``binary`` lists the columns whose values are bytes."""
    return orjson.dumps({
        "database": tm.database, "table": tm.table, "mariadb": tm.is_mariadb,
        "columns": [{f: getattr(c, f) for f in _COLUMN_FIELDS} for c in tm.columns],
        "primary_key": tm.primary_key, "binary": binary,
    })


def descriptor_columns(columns: list[dict[str, Any]], defaults: bool = False) -> list[Column]:
    """A descriptor's columns as the codec's (``defaults``: a NOT NULL column's literal ``default`` as the column's
    default, as records' schema entries carry it: docs/FORMAT.md, "Schema entries")."""
    return [Column(i, c["name"], c["type"], c["binlog_type"], c["meta"], c["nullable"], c["unsigned"],
                   c["collation"], c["enum_values"], c["set_values"], c["geometry_type"],
                   default=c.get("default") if defaults and not c["nullable"] else None)
            for i, c in enumerate(columns)]


def decode_descriptor(data: bytes) -> tuple[TableMap, list[int], list[str]]:
    d = orjson.loads(data)
    columns = descriptor_columns(d["columns"])
    pk = [tuple(x) for x in d["primary_key"]] if d["primary_key"] is not None else None
    tm = TableMap(0, 0, d["database"], d["table"], columns, pk, has_names=True, is_mariadb=d["mariadb"])
    return tm, d["binary"], tm.column_names


def marked_descriptor(descriptor: bytes, first_row: bool, last_row: bool, first_table: bool,
                      last_table: bool) -> bytes:
    """A table descriptor that also says where its entry's rows are in the snapshot (``"marks"``: whether the
    first row is the table's first, the last row its last, the table the snapshot's first, its last), for
    Debezium's ``source.snapshot`` markers."""
    return orjson.dumps({**orjson.loads(descriptor), "marks": [first_row, last_row, first_table, last_table]})


def verify_descriptor(descriptor: bytes, chunk: dict[str, Any]) -> bytes:
    """A table descriptor that also says which verify chunk its entry's rows are (``"verify"``: run, chunk,
    part and parts, key range, excluded keys: docs/FORMAT.md, "Verify rows")."""
    return orjson.dumps({**orjson.loads(descriptor), "verify": chunk})


def snapshot_value(descriptor: bytes, rows_json: list[bytes], compress: bool = True, verify: bool = False,
                   compressed: bool = False) -> bytes:
    """A record value of snapshot entries only (one per element of ``rows_json``, each a JSON array of
    rows): no format description (its length is 0), the descriptor with the first entry. ``compress``:
    the rows as a zstd frame (level 1), so what Kafka consumers and the Spark job move is several times
    smaller (the JSON of text columns compresses well) and decompressed only by the decoder;
    ``compressed``: the elements are such frames already."""
    parts = [b"BLK", bytes((2, 0)), _LEN.pack(0)]
    flags = FLAG_SNAPSHOT | (FLAG_ZSTD if compress or compressed else 0) | (FLAG_VERIFY if verify else 0)
    compressor = zstandard.ZstdCompressor(level=1) if compress and not compressed else None
    for i, rows in enumerate(rows_json):
        tm = descriptor if i == 0 else b""
        data = compressor.compress(rows) if compressor is not None else rows
        parts += (bytes((flags,)), _LEN.pack(len(tm)), tm, _LEN.pack(len(data)), data)
    return b"".join(parts)


def held_bytes(value: bytes) -> int:
    """The bytes a record value holds once read: a snapshot-only value's (snapshot_value) entries with their zstd
    frames' rows counted at their decompressed size (the frame's header says it: no decompression here), so that a
    bound in bytes means the same for compressed snapshot and verify rows as for binlog events; any other value
    (binlog events, another format's): its length."""
    if len(value) < 9 or value[:3] != b"BLK" or _LEN.unpack_from(value, 5)[0]:
        return len(value)
    size, p = 9, 9
    while p + 5 <= len(value):
        flags = value[p]
        if not flags & FLAG_SNAPSHOT:
            return len(value)
        (m,) = _LEN.unpack_from(value, p + 1)
        if p + 9 + m > len(value):
            return len(value)
        (k,) = _LEN.unpack_from(value, p + 5 + m)
        rows = value[p + 9 + m : p + 9 + m + k]
        held = zstandard.frame_content_size(rows) if flags & FLAG_ZSTD and k else k
        size += 9 + m + (held if held >= 0 else k)
        p += 9 + m + k
    return size


def index_entry(seq: bytes, commit_ts: int) -> bytes:
    return _INDEX_ENTRY.pack(seq, commit_ts, SNAPSHOT_ROWS, 0)


class SnapshotDecoder:
    """Turns snapshot entries of one record into events; remembers the record's current descriptor.
    ``columnar``: the events hold ``RowImages`` (one tuple per column, as the columnar binlog decoder
    gives) instead of one dict per row."""

    def __init__(self, source: str, columnar: bool = False) -> None:
        self.source = source
        self.columnar = columnar
        self.table: tuple[TableMap, list[int], list[str]] | None = None
        self.verify: dict[str, Any] | None = None  # the current descriptor's verify chunk, if it has one
        self.marks: tuple[bool, bool, bool, bool] | None = None  # the current descriptor's, if it has them

    def event(self, descriptor: bytes, rows: bytes, position: int, commit_ts: int, offset: int,
              flags: int = FLAG_SNAPSHOT) -> SnapshotRowsEvent:
        if descriptor:
            try:
                self.table = decode_descriptor(descriptor)
                whole = orjson.loads(descriptor)
                self.verify = whole.get("verify") if flags & FLAG_VERIFY else None
                marks = whole.get("marks")
                self.marks = (bool(marks[0]), bool(marks[1]), bool(marks[2]), bool(marks[3])) if marks else None
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise BinlogError(f"bad snapshot table descriptor: {exc}", offset, self.source) from None
        if self.table is None:
            raise BinlogError("snapshot entry without a table descriptor", offset, self.source)
        tm, binary, names = self.table
        json_columns = [c.index for c in tm.columns if c.type == T.JSON]
        try:
            if flags & FLAG_ZSTD:
                rows = zstandard.ZstdDecompressor().decompress(rows, max_output_size=_MAX_ROWS_BYTES)
            values = orjson.loads(rows)
            for row in values:
                for i in binary:
                    if row[i] is not None:
                        row[i] = base64.b64decode(row[i])
                for i in json_columns:
                    if row[i] == _JSON_NULL_WIRE:
                        row[i] = JSON_NULL
            if self.columnar:
                if any(len(row) != len(names) for row in values):
                    raise ValueError(f"a row without exactly {len(names)} values")
                columns = list(zip(*values, strict=True)) if values else [()] * len(names)
                out: Any = RowImages(len(values), None, (), columns, tuple(names))
            else:
                out = [{"after": dict(zip(names, row, strict=True))} for row in values]
        except (orjson.JSONDecodeError, LookupError, TypeError, ValueError, zstandard.ZstdError) as exc:
            raise BinlogError(f"bad snapshot rows: {exc}", offset, self.source) from None
        n = len(tm.columns)
        fields = dict(type_code=SNAPSHOT_ROWS, timestamp=commit_ts // 1_000_000, server_id=0, event_size=len(rows),
                      log_pos=0, flags=0, position=position, table_id=0, rows_flags=0, extra_data=None,
                      column_count=n, columns_before=(), columns_after=tuple(range(n)), table_map=tm, rows=out)
        if flags & FLAG_VERIFY:
            if not isinstance(self.verify, dict):
                raise BinlogError("verify rows without their chunk in the descriptor", offset, self.source)
            return VerifyRowsEvent(**fields, verify=self.verify)  # type: ignore[arg-type]
        # marks belong to the entry whose descriptor has them
        return SnapshotRowsEvent(**fields, marks=self.marks if descriptor else None)  # type: ignore[arg-type]
