"""Kafka records -> row changes, on the executors (``mapInArrow``), in two steps.

1. ``decode_partition``: the generic step. Every record of any table becomes one row per row change
   (GENERIC_DDL): source facts (seq, GTID, commit time), the table's lake schema as JSON, and the
   before/after images as pickled dicts of plain values (``types.converter``). A record that cannot
   be decoded becomes an ``error`` row carrying its bytes, never nothing; chunks of a record that a
   split of the partition's offsets (minPartitions) cut off become ``chunk`` rows, which the driver
   reassembles (``Orphans``).
2. ``typed_partition``: per table, the images become typed struct columns of the union schema.

Record bytes and headers are only ever read through ``ingester.records.format``.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson
import pyarrow as pa

from ingester.codec.events import RowsEvent
from ingester.records.format import ChunkAssembler, chunk_index, record_events

from .lake_types import converter, identity, lake_type, text_value, to_decimal

GENERIC_FIELDS: list[tuple[str, pa.DataType, str]] = [
    ("kind", pa.string(), "string"),  # row | error | chunk
    ("topic", pa.string(), "string"),
    ("partition", pa.int32(), "int"),
    ("offset", pa.int64(), "bigint"),
    ("db", pa.string(), "string"),
    ("tbl", pa.string(), "string"),
    ("op", pa.string(), "string"),
    ("seq", pa.binary(), "binary"),
    ("position", pa.string(), "string"),
    ("gtid", pa.string(), "string"),
    ("commit_ts", pa.int64(), "bigint"),
    ("row_index", pa.int32(), "int"),
    ("schema", pa.string(), "string"),
    ("before", pa.binary(), "binary"),
    ("after", pa.binary(), "binary"),
    ("partial", pa.bool_(), "boolean"),
    ("error", pa.string(), "string"),
    ("raw", pa.binary(), "binary"),
    ("headers", pa.binary(), "binary"),
]
GENERIC_ARROW = pa.schema([(n, t) for n, t, _ in GENERIC_FIELDS])
GENERIC_DDL = ", ".join(f"`{n}` {d}" for n, _, d in GENERIC_FIELDS)
_OPS = {"write": "insert", "update": "update", "delete": "delete", "read": "read"}  # read: snapshot rows
_PICKLE = pickle.HIGHEST_PROTOCOL


class _Shape:
    """What one table map means for the lake: schema JSON and the conversions its values need."""

    __slots__ = ("fixes", "schema", "texts")

    def __init__(self, event: RowsEvent) -> None:
        tm = event.table_map
        columns = [(c.name, lake_type(c)) for c in tm.columns]
        pk = [tm.columns[i].name for i, _ in tm.primary_key] if tm.primary_key else []
        self.schema = orjson.dumps({"columns": columns, "pk": pk}).decode()
        convert = [(c.name, converter(c, t)) for c, (_, t) in zip(tm.columns, columns, strict=True)]
        # Most values are already what Arrow takes: only the others are touched, text only when not str.
        self.texts = [(n, f) for n, f in convert if f is text_value]
        self.fixes = [(n, f) for n, f in convert if f is not text_value and f is not identity]

    def image(self, values: dict[str, Any] | None) -> bytes | None:
        if values is None:
            return None
        for name, fix in self.fixes:  # the codec's dict is ours alone: converted in place
            v = values.get(name)
            if v is not None:
                values[name] = fix(v)
        for name, fix in self.texts:
            v = values.get(name)
            if v is not None and type(v) is not str:
                values[name] = fix(v)
        return pickle.dumps(values, _PICKLE)


class _Out:
    """Column lists of one output batch."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def special(self, kind: str, topic: str, partition: int, offset: int, error: str | None,
                raw: bytes, headers: dict[str, bytes]) -> None:
        self.rows.append((kind, topic, partition, offset, None, None, None, None, f"{topic}[{partition}]@{offset}",
                          None, None, None, None, None, None, None, error, raw, pickle.dumps(headers, _PICKLE)))

    def batch(self) -> pa.RecordBatch:
        columns = list(zip(*self.rows, strict=True)) if self.rows else [() for _ in GENERIC_FIELDS]
        return pa.RecordBatch.from_arrays([pa.array(c, t) for c, (_, t, _) in zip(columns, GENERIC_FIELDS,
                                                                                   strict=True)],
                                          schema=GENERIC_ARROW)


_shapes: dict[Any, _Shape] = {}  # per executor process: table maps repeat in every record


def _shape(event: RowsEvent) -> _Shape:
    tm = event.table_map
    key = (tm.database, tm.table, tuple((c.name, c.type, c.meta, c.unsigned, c.collation) for c in tm.columns),
           tuple(tm.primary_key or ()))
    shape = _shapes.get(key)
    if shape is None:
        if len(_shapes) > 10_000:
            _shapes.clear()
        shape = _shapes[key] = _Shape(event)
    return shape


def decode_record(out: _Out, topic: str, partition: int, offset: int, headers: dict[str, bytes],
                  value: bytes) -> None:
    """Append the record's row changes to ``out``, or one error row if any part of it fails."""
    where = f"{topic}[{partition}]@{offset}"
    rows = []
    try:
        for item in record_events(headers, value, where):
            ev = item.event
            if not isinstance(ev, RowsEvent):
                continue
            shape = _shape(ev)
            op = _OPS[ev.kind]
            seq = item.seq.encode()
            position = str(item.seq)
            partial = min(len(ev.columns_before or ev.columns_after), len(ev.columns_after or ev.columns_before)) \
                < ev.column_count
            for i, row in enumerate(ev.rows):
                rows.append(("row", topic, partition, offset, ev.database, ev.table, op, seq, position, item.gtid,
                             item.commit_ts, i, shape.schema, shape.image(row.get("before")),
                             shape.image(row.get("after")), partial, None, None, None))
    except Exception as exc:  # any failure quarantines or stops with the record's position
        out.special("error", topic, partition, offset, f"{type(exc).__name__}: {exc}", value, headers)
        return
    out.rows.extend(rows)


class Reader:
    """Feeds one task's records (in offset order per partition) through the chunk assembler."""

    def __init__(self) -> None:
        self.chunks = ChunkAssembler()
        self.seen: set[tuple[str, int]] = set()
        self.orphaned: set[tuple[str, int]] = set()  # partitions whose range began inside a chunked record
        self.pending: dict[tuple[str, int], list[tuple[int, dict[str, bytes], bytes]]] = {}

    def feed(self, out: _Out, topic: str, partition: int, offset: int, headers: dict[str, bytes],
             value: bytes) -> None:
        key = (topic, partition)
        chunk = chunk_index(headers)
        if key not in self.seen:
            self.seen.add(key)
            if chunk is not None and chunk[0] != 0:
                self.orphaned.add(key)
        if key in self.orphaned:
            if chunk is not None and chunk[0] != 0:
                out.special("chunk", topic, partition, offset, None, value, headers)
                return
            self.orphaned.discard(key)
        if chunk is not None:
            self.pending.setdefault(key, []).append((offset, headers, value))
        try:
            whole = self.chunks.feed(key, headers, value, f"{topic}[{partition}]", offset)
        except Exception as exc:
            out.special("error", topic, partition, offset, f"{type(exc).__name__}: {exc}", value, headers)
            return
        if whole is not None:
            self.pending.pop(key, None)
            decode_record(out, topic, partition, offset, headers, whole)

    def finish(self, out: _Out) -> None:
        """Chunks of a record whose end lies beyond this task's range go to the driver."""
        for (topic, partition), pieces in self.pending.items():
            for offset, headers, value in pieces:
                out.special("chunk", topic, partition, offset, None, value, headers)
        self.pending.clear()


def decode_partition(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function over the Kafka source's columns (topic, partition, offset, headers, value)."""
    reader = Reader()
    for batch in batches:
        out = _Out()
        cols = batch.to_pydict()
        for topic, partition, offset, headers, value in zip(cols["topic"], cols["partition"], cols["offset"],
                                                            cols["headers"], cols["value"], strict=True):
            reader.feed(out, topic, partition, offset, {h["key"]: h["value"] for h in headers or ()}, value)
        yield out.batch()
    out = _Out()
    reader.finish(out)
    if out.rows:
        yield out.batch()


def reassemble(pieces: list[tuple[str, int, int, bytes, bytes]]) -> list[tuple[Any, ...]]:
    """Driver side: chunk rows (topic, partition, offset, headers pickle, value) of one batch -> generic
    rows. Chunks still incomplete at the end of the batch become errors naming their offsets."""
    reader = Reader()
    out = _Out()
    for topic, partition, offset, headers, value in sorted(pieces, key=lambda p: (p[0], p[1], p[2])):
        reader.feed(out, topic, partition, offset, pickle.loads(headers), value)
    tail = _Out()
    reader.finish(tail)
    for row in tail.rows:
        out.rows.append(("error", *row[1:16], "chunked record incomplete at the end of the micro-batch "
                         "(maxOffsetsPerTrigger cut it)", *row[17:]))
    return out.rows


# --- step 2: typed images ---------------------------------------------------------------------

_ARROW_TYPES: dict[str, pa.DataType] = {
    "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"),
    "string": pa.string(), "binary": pa.binary(), "array<float>": pa.list_(pa.float32()),
    "boolean": pa.bool_(),
}


def arrow_type(dtype: str) -> pa.DataType:
    if dtype.startswith("decimal("):
        precision, scale = (int(x) for x in dtype[8:-1].split(","))
        return pa.decimal128(precision, scale)
    return _ARROW_TYPES[dtype]


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def struct_ddl(columns: list[tuple[str, str]]) -> str:
    return "struct<" + ", ".join(f"{quote(n)}: {t}" for n, t in columns) + ">"


TYPED_HEAD = [("op", "string"), ("seq", "binary"), ("position", "string"), ("gtid", "string"),
              ("commit_ts", "timestamp"), ("row_index", "int"), ("kafka_topic", "string"),
              ("kafka_partition", "int"), ("kafka_offset", "bigint")]


def typed_ddl(columns: list[tuple[str, str]]) -> str:
    image = struct_ddl(columns)
    return ", ".join([f"{quote(n)} {t}" for n, t in TYPED_HEAD] + [f"before {image}", f"after {image}"])


def _image_array(images: list[bytes | None], columns: list[tuple[str, str]]) -> pa.StructArray:
    decoded = [None if b is None else pickle.loads(b) for b in images]
    arrays = []
    for name, dtype in columns:
        values = [None if d is None else d.get(name) for d in decoded]
        if dtype.startswith("decimal("):
            values = [None if v is None else to_decimal(v) for v in values]
        arrays.append(pa.array(values, arrow_type(dtype)))
    fields = [pa.field(n, arrow_type(t)) for n, t in columns]
    mask = pa.array([d is None for d in decoded], pa.bool_())
    return pa.StructArray.from_arrays(arrays, fields=fields, mask=mask)


def typed_partition(columns: list[tuple[str, str]]) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow function: generic rows of one table -> TYPED_HEAD + typed before/after structs."""
    head = [pa.field(n, arrow_type(t)) for n, t in TYPED_HEAD]

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            ts = batch.column("commit_ts").cast(pa.timestamp("us", tz="UTC"))
            arrays = [batch.column("op"), batch.column("seq"), batch.column("position"), batch.column("gtid"),
                      ts, batch.column("row_index"), batch.column("topic"), batch.column("partition"),
                      batch.column("offset"),
                      _image_array(batch.column("before").to_pylist(), columns),
                      _image_array(batch.column("after").to_pylist(), columns)]
            image = pa.struct([pa.field(n, arrow_type(t)) for n, t in columns])
            schema = pa.schema([*head, pa.field("before", image), pa.field("after", image)])
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)

    return run
