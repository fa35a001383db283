"""Debezium change events -> the decode step's record rows (decode.py), on the executors: the same rows binlake's
records become, so everything after decoding (schemas, change logs, mirrors) is the same for both. How the
events are written is an ``EventCodec``: Kafka Connect's JSON converter with schemas (``JsonEvents``, here) or
Avro with a schema registry (debezium_avro.py), both giving the Connect schemas and JsonConverter's payload.

Debezium is at least once: after a crash it publishes again what it had published since its last committed
offset. Each change event says where it comes from (source.file, pos, row), and one topic partition holds its
events in binlog order, so an event is a repeat when its position is before the newest one already seen in that
partition. ``marks`` holds that position per topic partition, from the lake (what earlier batches landed) and
then from the events this task reads. A key change is a delete and a create at the same position: the delete
ranks first. Several rows events can share one binlog position (the rows events of a MySQL compressed transaction
all carry the TRANSACTION_PAYLOAD's position, Debezium's too; binlake's events of an XA transaction all carry its
XA COMMIT's), each numbering its rows from 0: within the newest binlog position, a mark holds a digest of each
event landed there (its row index, rank and images), and an event there is a repeat when its digest is among
them. (Two events there alike in all of these -- a row deleted and inserted again with the same values, twice, in
one such transaction, each in a rows event of its own -- cannot be told from a repeat: the second is dropped. With
Debezium's transaction metadata (``provide.transaction.metadata``) an event's ``transaction.total_order`` tells
them apart.) Snapshot reads (op r) all carry
the snapshot's position: they are never taken for repeats (a read lands as the row's state; a snapshot Debezium
repeats lands its reads again).
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterable, Iterator
from typing import Any, Protocol

import orjson
import pyarrow as pa

from ingester.records.format import Sequence, file_number
from ingester.records.statement import TableStatement

from ..runtime.spark_archives import keep_spark_archive_listings
from .debezium_types import UnknownField, default_sql, lake_column
from .decode import CHANGE_HEAD, RecordRow, _Out, withheld
from .lake_types import arrow_type

OPS = {"c": "insert", "u": "update", "d": "delete", "r": "read"}
_PAYLOAD = b',"payload":'
_SEQ = 16  # bytes of a position's binlog position (records' Sequence)
_MARK_ROW = 4  # bytes of the row index in a position
POSITION = 16 + _MARK_ROW + 1  # a mark's position: sequence, row index, rank; then its digests
DIGEST = 8
_FLUSH_ROWS = 65_536  # a task's change events held as columns before they go out as record rows
# (topic, partition) -> its mark: the newest position landed (position()), then the digests (digest()) of the events
# landed at it; a mark of a position alone (read from the lake, its events gone from Kafka) knows no digests
Marks = dict[tuple[str, int], bytes]


def position(seq: bytes, row: int, op: str) -> bytes:
    """A change event's position as bytes that sort like it: sequence, row, then a delete before a create."""
    return seq + row.to_bytes(_MARK_ROW, "big") + (b"\x00" if op == "delete" else b"\x01")


def digest(at: bytes, before: Any, after: Any, order: int | None = None) -> bytes:
    """A change event at position ``at`` (``position``), hashed with its images (and its ``transaction.total_order``
    where Debezium gives it): what tells the events of one binlog position apart (a repeat has the same)."""
    body = orjson.dumps([at[_SEQ:].hex(), before, after, order], option=orjson.OPT_SORT_KEYS)
    return hashlib.blake2b(body, digest_size=DIGEST).digest()


def event_digest(event: dict[str, Any], op: str) -> bytes:
    """``digest`` of a change event's payload (its op as ``OPS`` names it, or "truncate")."""
    source = event["source"]
    seq = Sequence(file_number(source["file"]), source["pos"]).encode()
    return digest(position(seq, source.get("row") or 0, op), event.get("before"), event.get("after"),
                  (event.get("transaction") or {}).get("total_order"))


def merged(old: bytes | None, new: bytes) -> bytes:
    """Two marks of one topic partition as one: the newer binlog position's, or at the same one the later position
    and every digest."""
    if old is None or new[:_SEQ] > old[:_SEQ]:
        return new
    if new[:_SEQ] < old[:_SEQ]:
        return old
    known = set(_digests(old))
    return max(old[:POSITION], new[:POSITION]) + b"".join([*_digests(old), *(d for d in _digests(new)
                                                                            if d not in known)])


def _digests(mark: bytes) -> list[bytes]:
    return [mark[i:i + DIGEST] for i in range(POSITION, len(mark), DIGEST)]


class DebeziumError(ValueError):
    """A message that is not a change event this job can land."""


class EventCodec(Protocol):
    """How a change event's key and value are written (the converter Kafka Connect was configured with): what
    the reader needs of them, as JsonConverter gives it. Picklable: it goes to the executors."""

    def decode(self, key: bytes | None, value: bytes) -> tuple[Hashable, Any]:
        """(what names the key's and value's schemas, the value's payload: JsonConverter's, bytes as base64)."""

    def schemas(self, shape_id: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The value's and key's Connect schemas (JsonConverter's layout) of a ``decode`` answer's first part."""

    def digest(self, value: bytes) -> bytes:
        """The digest (``digest``) of a change event message's images."""


class JsonEvents:
    """Kafka Connect's JsonConverter with schemas: ``{"schema":S,"payload":P}``."""

    def decode(self, key: bytes | None, value: bytes) -> tuple[Hashable, Any]:
        value_head, payload = _split(value, "value")
        key_head = _split(key, "key")[0] if key is not None else b""
        return (value_head, key_head), orjson.loads(payload)

    def schemas(self, shape_id: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
        value_head, key_head = shape_id
        return (orjson.loads(value_head[len(b'{"schema":'):]),
                orjson.loads(key_head[len(b'{"schema":'):]) if key_head else None)

    def digest(self, value: bytes) -> bytes:
        try:
            event = orjson.loads(_split(value, "value")[1])
            return event_digest(event, OPS.get(event.get("op"), "truncate"))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise DebeziumError(f"not a change event: {exc}") from None


class _Shape:
    """One table schema as its value and key schemas give it."""

    __slots__ = ("converters", "fields", "image_type", "names", "schema")

    def __init__(self, value_schema: dict[str, Any], key_schema: dict[str, Any] | None) -> None:
        by_name = {f["field"]: f for f in value_schema.get("fields", ())}
        image = by_name.get("after") or by_name.get("before")
        if image is None or image.get("type") != "struct":
            raise DebeziumError("the value schema has no before/after struct: not a Debezium change event")
        self.names: list[str] = []
        columns, self.converters = [], []
        defaults = {}  # the columns' defaults (Debezium's schemas carry them; binlake's have none)
        for field in image["fields"]:
            try:
                dtype, convert = lake_column(field)
                default = field.get("default")
                if default is not None:
                    defaults[field["field"]] = default_sql(default if convert is None else convert(default), dtype)
            except (UnknownField, ValueError, TypeError) as exc:
                raise DebeziumError(f"field `{field.get('field')}`: {exc}") from None
            self.names.append(field["field"])
            columns.append((field["field"], dtype))
            self.converters.append(convert)
        pk = [f["field"] for f in (key_schema or {}).get("fields", ())]
        meta: dict[str, Any] = {"columns": columns, "pk": pk}
        if defaults:
            meta["defaults"] = defaults
        self.schema = orjson.dumps(meta).decode()
        self.fields = [pa.field(n, arrow_type(t)) for n, t in columns]
        self.image_type = pa.struct(self.fields)


class _Group:
    """The change events of one topic partition and table schema in a task's batch, as columns."""

    def __init__(self, db: str, tbl: str, shape: _Shape) -> None:
        self.db, self.tbl, self.shape = db, tbl, shape
        self.head: list[list[Any]] = [[] for _ in range(len(CHANGE_HEAD) + 1)]  # + kafka_offset
        self.before: list[list[Any]] = [[] for _ in shape.names]
        self.after: list[list[Any]] = [[] for _ in shape.names]
        self.before_valid: list[bool] = []
        self.after_valid: list[bool] = []
        self.mark = b""
        self.first_offset = -1

    def add(self, offset: int, head: tuple[Any, ...], before: dict[str, Any] | None,
            after: dict[str, Any] | None) -> None:
        if self.first_offset < 0:
            self.first_offset = offset
        for column, value in zip(self.head, (*head, offset), strict=True):
            column.append(value)
        for image, columns, valid in ((before, self.before, self.before_valid), (after, self.after, self.after_valid)):
            valid.append(image is not None)
            for name, convert, column in zip(self.shape.names, self.shape.converters, columns, strict=True):
                value = None if image is None else image.get(name)
                column.append(value if value is None or convert is None else convert(value))

    def row(self, topic: str, partition: int) -> RecordRow:
        op, seq, positions, _, commit_ts, _, _ = self.head
        first = min(range(len(seq)), key=seq.__getitem__)
        return RecordRow("row", topic, partition, self.first_offset, self.db, self.tbl, self.shape.schema, seq[first],
                         positions[first], len(op), max(commit_ts), False, self._ipc(), mark=self.mark or None)

    def _ipc(self) -> bytes:
        shape = self.shape
        head = [pa.array(v, t) for v, (_, t) in zip(self.head, [*CHANGE_HEAD, ("kafka_offset", pa.int64())],
                                                     strict=True)]
        images = [pa.StructArray.from_arrays([_array(v, f) for v, f in zip(columns, shape.fields, strict=True)],
                                             fields=shape.fields, mask=pa.array([not ok for ok in valid], pa.bool_()))
                  for columns, valid in ((self.before, self.before_valid), (self.after, self.after_valid))]
        schema = pa.schema([*CHANGE_HEAD, ("kafka_offset", pa.int64()), ("before", shape.image_type),
                            ("after", shape.image_type)])
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, schema) as writer:
            writer.write_batch(pa.RecordBatch.from_arrays([*head, *images], schema=schema))
        return sink.getvalue().to_pybytes()


def _array(values: list[Any], field: pa.Field) -> pa.Array:
    try:
        return pa.array(values, field.type)
    except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
        raise DebeziumError(f"column `{field.name}`: a value that is not its schema's {field.type}: {exc}") from None


class DebeziumReader:
    """One task's change events, in offset order per topic partition."""

    def __init__(self, marks: Marks, codec: EventCodec | None = None) -> None:
        self.codec = codec or JsonEvents()
        self.marks = dict(marks)
        # the events recorded at a partition's newest position whose digests are not computed yet (_mark)
        self._undigested: dict[tuple[str, int], list[tuple[dict[str, Any], str]]] = {}
        self.shapes: dict[Hashable, _Shape] = {}
        self.groups: dict[tuple[str, int, int], _Group] = {}
        self.repeats = 0
        self.pending = 0  # change events in the groups
        self.closed: list[tuple[str, int, _Group]] = []  # groups ended by a truncate of their table
        self.statements: list[RecordRow] = []  # truncate events, as table statements

    def feed(self, out: _Out, topic: str, partition: int, offset: int, key: bytes | None,
             value: bytes | None) -> None:
        if value is None:
            return  # a tombstone: for log compaction, no change of its own
        try:
            self._event(topic, partition, offset, key, value)
        except (DebeziumError, KeyError, TypeError, ValueError, OverflowError) as exc:
            out.special("error", topic, partition, offset, f"{type(exc).__name__}: {exc}", value,
                        {} if key is None else {"key": key})

    def _event(self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes) -> None:
        shape_id, event = self.codec.decode(key, value)
        shape = self.shapes.get(shape_id)
        if shape is None:
            if len(self.shapes) > 10_000:
                self.shapes.clear()
            shape = self.shapes[shape_id] = _Shape(*self.codec.schemas(shape_id))
        if event.get("op") == "t":
            self._truncate(topic, partition, offset, event)
            return
        op = OPS.get(event.get("op"))
        if op is None:
            raise DebeziumError(f"op {event.get('op')!r} is not a row change (c, u, d, r) or a truncate (t)")
        source = event["source"]
        seq = Sequence(file_number(source["file"]), source["pos"]).encode()
        row = source.get("row") or 0
        before, after = event.get("before"), event.get("after")
        if op != "read" and self._repeat((topic, partition), position(seq, row, op), event, op):
            self.repeats += 1
            return
        ts_us = source.get("ts_us")
        commit_ts = ts_us if ts_us is not None else source["ts_ms"] * 1000
        group = self.groups.get((topic, partition, id(shape)))
        if group is None:
            group = self.groups[(topic, partition, id(shape))] = _Group(source["db"], source["table"], shape)
        self.pending += 1
        group.add(offset, (op, seq, str(Sequence.decode(seq)), source.get("gtid") or "", commit_ts, row),
                  before, after)

    def _truncate(self, topic: str, partition: int, offset: int, event: dict[str, Any]) -> None:
        """A truncate event (op t, no images; Debezium's ``skipped.operations=none``): a table statement of op
        truncate at its position (statements.py), as binlake's own entries are. The topic partition's events
        before it go out as groups of their own, so that none holds events of both sides."""
        source = event["source"]
        seq = Sequence(file_number(source["file"]), source["pos"]).encode()
        if self._repeat((topic, partition), position(seq, source.get("row") or 0, "truncate"), event, "truncate"):
            self.repeats += 1
            return
        for key in [k for k in self.groups if k[:2] == (topic, partition)]:
            self.closed.append((topic, partition, self.groups.pop(key)))
        ts_us = source.get("ts_us")
        commit_ts = ts_us if ts_us is not None else source["ts_ms"] * 1000
        db, table = source["db"], source["table"]
        statement = TableStatement("truncate", db, table, f"TRUNCATE TABLE `{db}`.`{table}`", default_database=db,
                                   micros=commit_ts)
        self.statements.append(RecordRow(
            "statement", topic, partition, offset, db, table, first_seq=seq, first_position=str(Sequence.decode(seq)),
            rows=0, newest=commit_ts, partial=False,
            statement=orjson.dumps({**statement.to_json(), "gtid": source.get("gtid") or ""}).decode()))

    def _repeat(self, key: tuple[str, int], at: bytes, event: dict[str, Any], op: str) -> bool:
        """Whether an event at position ``at`` was seen before in the topic partition ``key`` (else it is
        recorded). Digests are only computed when an event meets the newest binlog position, or the mark goes out."""
        mark = self.marks.get(key)
        if mark is not None and at[:_SEQ] < mark[:_SEQ]:
            return True
        if mark is not None and at[:_SEQ] == mark[:_SEQ]:
            if len(mark) == POSITION and key not in self._undigested:
                return at <= mark  # its events' digests are not known: taken for the events landed up to there
            mark = self._mark(key)
            found = event_digest(event, op)
            if found in _digests(mark):
                return True
            self.marks[key] = max(mark[:POSITION], at) + mark[POSITION:] + found
            return False
        self.marks[key] = at
        self._undigested[key] = [(event, op)]
        return False

    def _mark(self, key: tuple[str, int]) -> bytes:
        """The topic partition's mark with the digests of every event landed at its binlog position."""
        events = self._undigested.pop(key, None)
        if events:
            self.marks[key] += b"".join(event_digest(event, op) for event, op in events)
        return self.marks[key]

    def finish(self, out: _Out) -> None:
        out.rows += self.statements
        self.statements = []
        groups = [*self.closed, *((topic, partition, g) for (topic, partition, _), g in self.groups.items())]
        self.closed = []
        for topic, partition, group in groups:
            group.mark = self._mark((topic, partition)) if (topic, partition) in self.marks else b""
            try:
                out.rows.append(group.row(topic, partition))
            except DebeziumError as exc:
                out.special("error", topic, partition, group.first_offset, f"{group.db}.{group.tbl}: {exc}", b"", {})
        self.groups.clear()
        self.pending = 0


def _split(message: bytes, what: str) -> tuple[bytes, bytes]:
    """Kafka Connect's JSON converter's ``{"schema":S,"payload":P}`` -> (``{"schema":S``, ``P``). The schema is
    what says each column's type: messages without one (schemas.enable=false) cannot be landed."""
    if not message.startswith(b'{"schema":'):
        raise DebeziumError(f"the {what} has no schema: Debezium's topics land with the JSON converter's "
                            "schemas.enable=true (binlake's debezium.schemas_enable)")
    # the payload follows the schema; no JSON string holds an unescaped '"', so the first match is the key
    at = message.find(_PAYLOAD)
    if at < 0 or not message.endswith(b"}"):
        raise DebeziumError(f"the {what} is not the JSON converter's schema and payload")
    return message[:at], message[at + len(_PAYLOAD):-1]


def decode_debezium_partition(batches: Iterable[pa.RecordBatch], marks: Marks, ship: int | None = None,
                              codec: EventCodec | None = None) -> Iterator[pa.RecordBatch]:
    """mapInArrow function over the Kafka source's columns (key, value, topic, partition, offset): the change
    events (written as ``codec`` says: JsonConverter's by default) as decode.RECORD_ARROW rows, a row per topic
    partition and table schema (``ship``: as decode.decode_partition's)."""
    keep_spark_archive_listings()
    shipped = 0
    for out in _outputs(batches, DebeziumReader(marks, codec)):
        shipped += sum(r.rows or 0 for r in out.rows)
        if ship is not None and shipped > ship:
            first = out.rows[0]
            yield withheld(first[1], first[2], first[3])
            return
        yield out.batch()


def _outputs(batches: Iterable[pa.RecordBatch], reader: DebeziumReader) -> Iterator[_Out]:
    for batch in batches:
        out = _Out()
        cols = batch.to_pydict()
        for topic, partition, offset, key, value in zip(cols["topic"], cols["partition"], cols["offset"],
                                                        cols["key"], cols["value"], strict=True):
            reader.feed(out, topic, partition, offset, key, value)
        if reader.pending >= _FLUSH_ROWS:  # memory stays bounded: the groups so far go out
            reader.finish(out)
        yield out
    out = _Out()
    reader.finish(out)
    yield out
