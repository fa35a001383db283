"""Kafka records -> row changes, on the executors (``mapInArrow``), in two steps.

1. ``decode_partition``: the generic step. Every record becomes one row per table and schema it
   holds rows of (RECORD_DDL): the table, its lake schema as JSON (from the TABLE_MAP), the first
   sequence, row count and newest commit time (all the driver needs to plan the batch), and the
   row changes themselves, already typed: an Arrow IPC stream of (op, seq, position, gtid,
   commit_ts, row_index, before, after) in the record's own schema, built column by column. A
   record that cannot be decoded becomes an ``error`` row carrying its bytes, never nothing; chunks
   of a record that a split of the partition's offsets (minPartitions) or the batch's end cut off
   become ``chunk`` rows, which the driver reassembles (``reassemble``).
2. ``typed_batches`` (typed.py): per table, those streams are cast to the union schema of the batch (added
   columns null, widened types) -- Arrow casts only, no value touched in Python again. The change log
   (writer.py) and the mirror (mirror.py) both read them.

Record bytes and headers are only ever read through ``ingester.records.format``.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import orjson
import pyarrow as pa

from ingester.codec.events import RowsEvent, VerifyRowsEvent
from ingester.codec.rows import RowImages
from ingester.records.format import ChunkAssembler, chunk_index, record_events
from ingester.records.statement import TableStatementEvent

from ..runtime.spark_archives import keep_spark_archive_listings
from .arrow_rows import ArrowImages, Buffers, LakeColumn, WalkedColumn, compile_arrow_rows

RECORD_FIELDS: list[tuple[str, pa.DataType, str]] = [
    ("kind", pa.string(), "string"),  # row | verify | error | chunk | withheld
    ("topic", pa.string(), "string"),
    ("partition", pa.int32(), "int"),
    ("offset", pa.int64(), "bigint"),
    ("db", pa.string(), "string"),
    ("tbl", pa.string(), "string"),
    ("schema", pa.string(), "string"),
    ("first_seq", pa.binary(), "binary"),
    ("first_position", pa.string(), "string"),
    ("rows", pa.int64(), "bigint"),
    ("newest", pa.int64(), "bigint"),  # commit time, microseconds since the epoch
    ("partial", pa.bool_(), "boolean"),
    ("data", pa.binary(), "binary"),  # Arrow IPC stream of the row changes (CHANGE_HEAD + before/after)
    ("error", pa.string(), "string"),
    ("raw", pa.binary(), "binary"),
    ("headers", pa.binary(), "binary"),
    ("verify", pa.string(), "string"),  # a verify row's chunk (JSON: streaming_job/land/verify.py)
    ("mark", pa.binary(), "binary"),  # Debezium's change events: the newest position of the row's (debezium_decode.py)
    ("statement", pa.string(), "string"),  # a statement row's table statement (JSON: ingester/records/statement.py)
]


class RecordRow(NamedTuple):
    """One record row (RECORD_FIELDS, in their order), built by name."""

    kind: str  # row | verify | statement | error | chunk | withheld
    topic: str
    partition: int
    offset: int
    db: str | None = None
    tbl: str | None = None
    schema: str | None = None
    first_seq: bytes | None = None
    first_position: str | None = None
    rows: int | None = None
    newest: int | None = None
    partial: bool | None = None
    data: bytes | None = None
    error: str | None = None
    raw: bytes | None = None
    headers: bytes | None = None
    verify: str | None = None
    mark: bytes | None = None
    statement: str | None = None


assert list(RecordRow._fields) == [n for n, _, _ in RECORD_FIELDS]
RECORD_ARROW = pa.schema([(n, t) for n, t, _ in RECORD_FIELDS])
RECORD_DDL = ", ".join(f"`{n}` {d}" for n, _, d in RECORD_FIELDS)
# read: snapshot rows, and verify rows (compared with the mirror, never landed: streaming_job/land/verify.py)
_OPS = {"write": "insert", "update": "update", "delete": "delete", "read": "read", "verify": "read"}
_PICKLE = pickle.HIGHEST_PROTOCOL
_TS = pa.timestamp("us", tz="UTC")
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")  # cached and shipped to Python twice: 4-5x smaller
# A few rows' streams are not made smaller by lz4 (its frames cost more than they save: 3.4 KB instead of
# 2.8 for one row of 8 columns) and take 6x longer to write (0.35 ms instead of 0.06): a batch touching
# hundreds of tables writes one per table and record
_IPC_PLAIN = pa.ipc.IpcWriteOptions()
_IPC_COMPRESSED_ROWS = 64
CHANGE_HEAD = [("op", pa.string()), ("seq", pa.binary()), ("position", pa.string()), ("gtid", pa.string()),
               ("commit_ts", _TS), ("row_index", pa.int32())]


class _Shape:
    """What one table map means for the lake: schema JSON, and each column's lake type and conversions."""

    __slots__ = ("columns", "image_type", "names", "schema")

    def __init__(self, event: RowsEvent) -> None:
        tm = event.table_map
        own = tm.columns[:len(tm.columns) - tm.hidden_columns]  # MariaDB's hidden hashes are not the table's
        self.columns = [LakeColumn(c, tm.is_mariadb) for c in own]
        self.names = [c.name for c in own]
        pk = [tm.columns[i].name for i, _ in tm.primary_key] if tm.primary_key else []
        self.schema = orjson.dumps({"columns": [(n, lc.dtype) for n, lc in zip(self.names, self.columns, strict=True)],
                                    "pk": pk}).decode()
        self.image_type = pa.struct([pa.field(n, lc.type) for n, lc in zip(self.names, self.columns, strict=True)])

    def image(self, parts: list[_Part]) -> pa.StructArray:
        """One struct array of row images, built column by column from the events' columns: runs of
        events the C walker read are joined as buffers and finished once; the codec's values (events
        the Python decoder read, raw columns, snapshot rows) become arrays in one go per run."""
        absent = any(slots is None for _, slots, _ in parts)
        arrays = []
        for j, lake in enumerate(self.columns):
            chunks: list[pa.Array] = []
            values: list[Any] = []
            run: list[tuple[int, Buffers | None]] = []
            rows = 0
            walker: WalkedColumn | None = None
            for n, slots, aligned in parts:
                col = None if slots is None else slots[j]
                w = None if aligned is None else aligned[j]
                if w is not None and not w.raw:  # C's buffers
                    if values:
                        chunks.append(lake.array(values))
                        values = []
                    run.append((n, col))
                    rows += n
                    walker = walker or w
                elif col is None and walker is not None:
                    run.append((n, None))
                    rows += n
                else:
                    if walker is not None:
                        chunks.append(walker.array(run, rows))
                        run, rows, walker = [], 0, None
                    if col is None:
                        values += [None] * n
                    elif len(parts) == 1:
                        values = col  # the only part: no copy
                    else:
                        values += col  # list += tuple: no copy of the tuple
            if walker is not None:
                chunks.append(walker.array(run, rows))
            if len(values) or not chunks:
                chunks.append(lake.array(values))
            arrays.append(chunks[0] if len(chunks) == 1 else pa.concat_arrays(chunks))
        mask = pa.array([slots is None for n, slots, _ in parts for _ in range(n)], pa.bool_()) if absent else None
        return pa.StructArray.from_arrays(arrays, fields=list(self.image_type), mask=mask)


# The images of one rows event: (row count, one value sequence (or C's buffers) per table column (None: not
# in the image), or None: the event has no such image; the walker's columns by table column, or None)
_Part = tuple[int, list[Any] | None, list[WalkedColumn | None] | None]


def _parts(ev: RowsEvent) -> tuple[_Part, _Part]:
    """The event's before and after images as columns (``ArrowImages`` from the C walker, ``RowImages``
    from the columnar decoder; a snapshot's row dicts are turned into columns here)."""
    rows = ev.rows
    n = len(rows)
    if isinstance(rows, ArrowImages):
        before, after = rows.images()
        return (n, *(before or (None, None))), (n, *(after or (None, None)))
    width = len(ev.table_map.columns)
    images: tuple[tuple[tuple[int, ...], Any], ...]
    if isinstance(rows, RowImages):
        images = ((ev.columns_before, rows.before), (ev.columns_after, rows.after))
    else:
        names = [c.name for c in ev.table_map.columns]
        images = tuple((present, None if not rows or key not in rows[0] else
                        [[row[key].get(names[i]) for row in rows] for i in present])
                       for key, present in (("before", ev.columns_before), ("after", ev.columns_after)))
    out: list[_Part] = []
    for present, cols in images:
        if cols is None:
            out.append((n, None, None))
            continue
        slots: list[Any] = [None] * width
        for i, col in zip(present, cols, strict=True):
            slots[i] = col
        out.append((n, slots, None))
    return out[0], out[1]


class _Group:
    """The row changes of one record for one table and schema, as columns."""

    __slots__ = ("after", "before", "commit_ts", "db", "first_position", "first_seq", "gtid", "op", "partial",
                 "position", "row_index", "seq", "shape", "tbl")

    def __init__(self, db: str, tbl: str, shape: _Shape, seq: bytes, position: str) -> None:
        self.db, self.tbl, self.shape = db, tbl, shape
        self.first_seq, self.first_position = seq, position
        self.partial = False
        self.op: list[str] = []
        self.seq: list[bytes] = []
        self.position: list[str] = []
        self.gtid: list[str] = []
        self.commit_ts: list[int] = []
        self.row_index: list[int] = []
        self.before: list[_Part] = []
        self.after: list[_Part] = []

    def add(self, item: Any, ev: RowsEvent, seq: bytes, position: str) -> None:
        """One rows event's row changes (``item``: its record entry, for the GTID and commit time)."""
        n = len(ev.rows)
        self.op += [_OPS[ev.kind]] * n
        self.seq += [seq] * n
        self.position += [position] * n
        self.gtid += [item.gtid] * n
        self.commit_ts += [item.commit_ts] * n
        self.row_index += range(n)
        before, after = _parts(ev)
        self.before.append(before)
        self.after.append(after)
        self.partial = self.partial or min(len(ev.columns_before or ev.columns_after),
                                           len(ev.columns_after or ev.columns_before)) < ev.column_count

    def ipc(self) -> bytes:
        shape = self.shape
        arrays = [pa.array(v, t) for v, (_, t) in zip(
            (self.op, self.seq, self.position, self.gtid, self.commit_ts, self.row_index), CHANGE_HEAD, strict=True)]
        arrays += [shape.image(self.before), shape.image(self.after)]
        schema = pa.schema([*CHANGE_HEAD, ("before", shape.image_type), ("after", shape.image_type)])
        sink = pa.BufferOutputStream()
        options = _IPC_OPTIONS if len(self.op) >= _IPC_COMPRESSED_ROWS else _IPC_PLAIN
        with pa.ipc.new_stream(sink, schema, options=options) as writer:
            writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=schema))
        return sink.getvalue().to_pybytes()


def withheld(topic: str, partition: int, offset: int) -> pa.RecordBatch:
    """The one row of a task that stopped shipping its batch to the driver (decode_partition's ``ship``)."""
    out = _Out()
    out.rows = [RecordRow("withheld", topic, partition, offset)]
    return out.batch()


class _Out:
    """Record rows of one output batch."""

    def __init__(self) -> None:
        self.rows: list[RecordRow] = []

    def special(self, kind: str, topic: str, partition: int, offset: int, error: str | None,
                raw: bytes, headers: dict[str, bytes]) -> None:
        self.rows.append(RecordRow(kind, topic, partition, offset, first_position=f"{topic}[{partition}]@{offset}",
                                   error=error, raw=raw, headers=pickle.dumps(headers, _PICKLE)))

    def batch(self) -> pa.RecordBatch:
        columns = list(zip(*self.rows, strict=True)) if self.rows else [() for _ in RECORD_FIELDS]
        return pa.RecordBatch.from_arrays([pa.array(c, t) for c, (_, t, _) in zip(columns, RECORD_FIELDS,
                                                                                   strict=True)],
                                          schema=RECORD_ARROW)


_shapes: dict[Any, _Shape] = {}  # per executor process: table maps repeat in every record


def _shape(event: RowsEvent) -> _Shape:
    tm = event.table_map
    shape = tm._decoders.get("shape")  # the codec reuses table map objects: look the key up once per map
    if shape is not None:
        return shape
    key = (tm.database, tm.table, tuple((c.name, c.type, c.meta, c.unsigned, c.collation) for c in tm.columns),
           tuple(tm.primary_key or ()))
    shape = _shapes.get(key)
    if shape is None:
        if len(_shapes) > 10_000:
            _shapes.clear()
        shape = _shapes[key] = _Shape(event)
    tm._decoders["shape"] = shape
    return shape


def decode_record(out: _Out, topic: str, partition: int, offset: int, headers: dict[str, bytes],
                  value: bytes) -> None:
    """Append the record's row changes to ``out`` (one row per table and schema), or one error row if
    any part of it fails."""
    where = f"{topic}[{partition}]@{offset}"
    try:
        groups: dict[tuple[str, str, int], _Group] = {}
        verified: list[tuple[dict[str, Any], _Group]] = []  # a verify entry's rows: a group of their own
        statements: list[RecordRow] = []  # table statement entries: a record of them holds nothing else
        for item in record_events(headers, value, where, columnar=compile_arrow_rows):
            ev = item.event
            if isinstance(ev, TableStatementEvent):
                s = ev.statement
                statements.append(RecordRow("statement", topic, partition, offset, s.database, s.table,
                                            first_seq=item.seq.encode(), first_position=str(item.seq), rows=0,
                                            newest=item.commit_ts, partial=False,
                                            statement=orjson.dumps({**s.to_json(), "gtid": item.gtid}).decode()))
                continue
            if not isinstance(ev, RowsEvent):
                continue
            shape = _shape(ev)
            seq = item.seq.encode()
            position = str(item.seq)
            if isinstance(ev, VerifyRowsEvent):
                g = _Group(ev.database, ev.table, shape, seq, position)
                verified.append((ev.verify, g))
            else:
                found = groups.get((ev.database, ev.table, id(shape)))
                if found is None:
                    found = groups[(ev.database, ev.table, id(shape))] = _Group(ev.database, ev.table, shape, seq,
                                                                                position)
                g = found
            g.add(item, ev, seq, position)
        rows: list[RecordRow] = [
            RecordRow("row", topic, partition, offset, g.db, g.tbl, g.shape.schema, g.first_seq, g.first_position,
                      len(g.op), max(g.commit_ts), g.partial, g.ipc()) for g in groups.values()]
        rows += [RecordRow("verify", topic, partition, offset, g.db, g.tbl, g.shape.schema, g.first_seq,
                           g.first_position, len(g.op), max(g.commit_ts, default=0), False, g.ipc(),
                           verify=orjson.dumps(chunk).decode())
                 for chunk, g in verified]
        rows += statements
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


def decode_partition(batches: Iterable[pa.RecordBatch], ship: int | None = None) -> Iterator[pa.RecordBatch]:
    """mapInArrow function over the Kafka source's columns (topic, partition, offset, headers, value).
    ``ship``: the output goes to the driver whole (sink.Lander._decode); past this many row
    changes the task stops and says so with one ``withheld`` row instead, so the driver's memory stays
    bounded (it then decodes the batch the cached way)."""
    keep_spark_archive_listings()
    reader = Reader()
    shipped = 0
    for batch in batches:
        out = _Out()
        cols = batch.to_pydict()
        for topic, partition, offset, headers, value in zip(cols["topic"], cols["partition"], cols["offset"],
                                                            cols["headers"], cols["value"], strict=True):
            before = len(out.rows)
            reader.feed(out, topic, partition, offset, {h["key"]: h["value"] for h in headers or ()}, value)
            if ship is not None:
                shipped += sum(r.rows or 0 for r in out.rows[before:])
                if shipped > ship:
                    yield withheld(topic, partition, offset)
                    return
        yield out.batch()
    out = _Out()
    reader.finish(out)
    if out.rows:
        yield out.batch()


class ChunkPiece(NamedTuple):
    """A chunk of a record that its decode task could not reassemble (its other chunks were in another task's
    partition or another batch): the driver reassembles it (``reassemble``)."""

    topic: str
    partition: int
    offset: int
    headers: bytes  # pickled dict
    value: bytes


def reassemble(pieces: list[ChunkPiece],
               fetch: Callable[[str, int, int, int], list[tuple[int, dict[str, bytes], bytes]]],
               ) -> tuple[list[RecordRow], list[tuple[str, int, int]]]:
    """Driver side: one batch's chunk pieces -> record rows, and the (topic, partition, offset) of chunks
    carried over to the next batch.

    A batch's bound may cut a chunked record between micro-batches: its first chunks end one
    batch (carried over: they land with the next) and its last ones start the next, which ``fetch``es
    (topic, partition, start, end) the first ones again from Kafka. A chunk is at offset o - i from its
    record's chunk 0 (chunks are consecutive in one Kafka transaction), so replays after a crash find
    them the same way."""
    by_partition: dict[tuple[str, int], list[tuple[int, dict[str, bytes], bytes]]] = {}
    for topic, partition, offset, pickled, value in pieces:
        by_partition.setdefault((topic, partition), []).append((offset, pickle.loads(pickled), value))
    reader = Reader()
    out = _Out()
    for (topic, partition), items in sorted(by_partition.items()):
        items.sort(key=lambda item: item[0])
        offset, headers, _ = items[0]
        index = (chunk_index(headers) or (0, 0))[0]
        if index:  # the record began in an earlier micro-batch
            items[:0] = fetch(topic, partition, offset - index, offset)
        for offset, headers, value in items:
            reader.feed(out, topic, partition, offset, headers, value)
    carried = [(topic, partition, offset) for (topic, partition), rest in reader.pending.items()
               for offset, _, _ in rest]
    reader.pending.clear()
    rows = [r if r.kind != "chunk" else r._replace(kind="error", error="chunk of a record whose earlier chunks are "
                                                                     "missing") for r in out.rows]
    return rows, carried
