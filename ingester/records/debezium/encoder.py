"""``kafka.format: debezium-json`` and ``debezium-avro``: binlake's records become Debezium change events, one
per row, serialized as Kafka Connect's JSON converter or Confluent's Avro converter would (layouts.py;
docs/DEBEZIUM.md).

A record's change events are published as the record comes, in the open Kafka transaction: a table's records
come in binlog order, and memory holds one record's events, however large the binlog transaction (the Kafka
transaction stays open until its checkpoint commits with it). With transaction metadata the events are merged
back into binlog order across tables: that is what gives each event its place in its transaction
(``transaction.total_order``) and lets the transaction topic say BEGIN before a transaction's events and END
after them; records are then held until a complete one (``Record.complete``: every event before its last is in
the records so far), which the record builder closes together with the other open records (``together``), so
a few records are held, never a whole transaction. Everything goes out in the same Kafka transaction as the
checkpoint, so the change events are exactly once like binlake's records.
Topics of binlake's own (schema history, statements) keep binlake's format; the statements are also held, for
the schema change topic ``<prefix>`` (schema_change.py): an event per DDL statement in binlog order, its tables
described by the schema history's entries of the statement.

The rows events of the held records are decoded straight to each row's Value and Key structs as JSON
(native.py: ``_native.c``), and each payload is put together from byte pieces: the event's source block,
the row's structs; the layout frames it (JSON) or encodes it (Avro: transcoded in C, _avro.h). Without
transaction metadata C puts whole messages together (_envelope.h), in either layout (composed_events.py).
Events C leaves to Python (and every event without the extension or with ``BINLAKE_PURE_PYTHON=1``) take the
reference path: the codec's row dicts, columns.py's converters and orjson (and for Avro payload_fixer and
fastavro), to the same messages (python_events.py). Both take each table's shape from table_shapes.py's cache;
this module orders the events and hands each to one of them.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import orjson

from ...codec import events as E
from ...codec.errors import BinlogError
from ...codec.table_map import TableMap
from ...schema.ddl_operations import Name
from ...schema.history import HISTORY_TOPIC, enrich
from ..builder import SCHEMA_TOPIC
from ..format import RecordEvent, record_decoder, record_events
from ..open_records import Record
from ..outbound import BinlakeOut, Message
from ..statement import TableStatementEvent, is_statement_record
from .composed_events import ComposedEvents
from .envelope import snapshot_marker, table_codec, topic_name
from .layouts import AvroLayout, JsonLayout, Layout, Role, SchemaIds
from .native import RenderedEvent, RenderedRows, rows_renderer
from .options import DebeziumOptions
from .python_events import NEW_KEY, OLD_KEY, PythonEvents
from .schema_change import SNAPSHOT_TOPIC
from .schema_events import SchemaEvents, Snapshot, Statement
from .table_shapes import TableShapes
from .transaction_topic import Transaction as _Transaction
from .transaction_topic import TransactionTopic

# what other modules import from here (the options, a changed key's headers, source.snapshot's marker)
__all__ = ["NEW_KEY", "OLD_KEY", "DebeziumAvro", "DebeziumJson", "DebeziumOptions", "DebeziumOut", "snapshot_marker"]


def _order(item: RenderedEvent | RecordEvent | Statement | Snapshot) -> tuple[int, int, int]:
    """Where an event of a record is in the binlog (its sequence's fields, as Sequence orders them)."""
    if type(item) is tuple:
        return item[:3]
    seq = item.seq  # type: ignore[union-attr]
    return seq.file_number, seq.position, seq.sub


# records queued for the encoder (the publisher's queue): a change event is a few times its row's binlog bytes, and
# the encoder is the slower side, so a few MiB of records keep it busy
_QUEUED_BYTES = 8 << 20
# rows events composed at once (each up to ~8 KiB of row images): their messages are in memory together
_COMPOSED = 16


class _Unpacked(NamedTuple):
    """A record's rows event as the ordering reads it (``DebeziumOut._unpack``)."""

    file_number: int
    position: int
    gtid: str
    commit_ts: int
    snapshot: bool
    rendered: RenderedEvent | None  # C's rendering (None: the reference path's row dicts)


# builds an _Unpacked in C: its class's own __new__ is a Python function, a call more per event
_unpacked = tuple.__new__


class DebeziumOut:
    """The Outbound strategy of the Debezium formats: change events, serialized by ``layout`` (the Kafka
    Connect converter: layouts.py). ``file_name`` maps a sequence's binlog file number to the file's name
    (source.file)."""

    def __init__(self, options: DebeziumOptions, layout: Layout, file_name: Callable[[int], str],
                 max_record_bytes: int, clock: Callable[[], int] = time.time_ns) -> None:
        self.options = options
        self.across_tables = options.transactions  # the transaction topic's counts need binlog order
        self.max_queued_bytes: int | None = _QUEUED_BYTES
        self.file_name = file_name
        self.clock = clock
        self.layout = layout
        self._own = BinlakeOut(options.prefix, max_record_bytes)
        # with transaction metadata: the records whose events wait for the next complete one (binlog order)
        self._held: list[Record] = []
        self._held_bytes = 0
        self._tx: _Transaction | None = None  # the binlog transaction whose END is next (transaction metadata)
        self._now: int | None = None  # the open Kafka transaction's processing time (ns): read at its first event
        self._native = rows_renderer(options.modes)  # C's structs (None: Python's)
        # the tables' shapes (cached by table map), and what turns an event into change events from them: the
        # reference path (row dicts) and the composition of C's rendered structs; their methods bound once, the
        # per-event calls as cheap as methods of this class
        shapes = TableShapes(options, layout, file_name, bool(self._native))
        python, composer = PythonEvents(options, layout, shapes), ComposedEvents(options, layout, shapes, self._native)
        self._file, self._new_schemas = shapes.file, shapes.new_schemas
        self._rows, self._table_statement = python.rows, python.table_statement
        self._rendered, self._composed = composer.rendered, composer.composed
        self.transaction_topic = topic_name(options.prefix, "transaction")
        self._tx_topic = TransactionTopic(layout, self.transaction_topic)
        self.schema_topic = topic_name(options.prefix)
        self._schema_events = SchemaEvents(layout, self.schema_topic, options.prefix, options.accept, self._file)
        self._history: dict[str, dict[Name, dict[str, Any]]] = {}  # seq -> the history's entries of a statement

    # -- Outbound

    def messages(self, record: Record) -> Iterator[Message]:
        if record.topic == SNAPSHOT_TOPIC:  # the snapshot's schema: its schema change events (nothing as it is)
            if self.options.schema_changes:
                yield from self._events(record)
        elif record.topic.startswith("_"):  # binlake's own topics
            yield from self._own.messages(record)
            if self.options.schema_changes and record.topic == SCHEMA_TOPIC:
                yield from self._events(record)  # its DDL, for the schema change topic
            elif self.options.schema_changes and record.topic == HISTORY_TOPIC:
                entry = orjson.loads(record.value)
                if "table" in entry:
                    self._history.setdefault(entry["seq"], {})[(entry["database"], entry["table"])] = entry
        else:
            yield from self._events(record)

    def _events(self, record: Record) -> Iterator[Message]:
        """A record's change events, published as it comes (its events are the next of its table), or with
        transaction metadata once the records before a complete one can be put in binlog order."""
        if not self.options.transactions:
            yield from self._release([record])
            return
        self._held.append(record)
        self._held_bytes += len(record.value)
        if record.complete:
            yield from self._release_held()

    def _release_held(self) -> Iterator[Message]:
        held, self._held, self._held_bytes = self._held, [], 0
        yield from self._release(held)

    @property
    def held_bytes(self) -> int:
        """The bytes of the records held back (transaction metadata: until a complete record comes)."""
        return self._held_bytes

    def discard(self) -> None:
        self._held.clear()
        self._held_bytes = 0
        self._history.clear()
        self._tx = self._now = None

    def mapped(self, record_topic: str, table_map: TableMap, schema_entry: bytes) -> None:
        """Avro: the table's key and value schemas registered now, beside other tables', so that its records find
        their ids ready; a subject's versions are registered in the order their maps come: binlog order."""
        if not self.layout.ahead:
            return
        try:
            codec = table_codec(enrich(table_map, schema_entry) if schema_entry else table_map, self.options.prefix,
                                self.options.modes)
        except (BinlogError, ValueError, KeyError, TypeError, AttributeError):
            return  # the table's first event meets it again, and stops the daemon saying why
        schemas: list[tuple[str, Role, bytes]] = [(codec.topic, "value", codec.value_schema)]
        if codec.key_schema is not None:  # the key's first, as the table's first event asks
            schemas.insert(0, (codec.topic, "key", codec.key_schema))
        self.layout.prepare(schemas)

    def topics(self, record_topics: Iterable[str]) -> set[str]:
        record_topics = list(record_topics)
        own = [t for t in record_topics if t.startswith("_") and t != SNAPSHOT_TOPIC]
        topics = {topic_name(self.options.prefix, t) for t in record_topics if not t.startswith("_")}
        if self.options.transactions and topics:
            topics.add(self.transaction_topic)
        return topics | self._own.topics(own)

    def describe(self, message: Message) -> str:
        """A change event's table and source position (read back from the message)."""
        try:
            source = self.layout.payload(message.value or b"")["source"]
            return (f"the change event of `{source['db']}`.`{source['table']}` at binlog {source['file']}:"
                    f"{source['pos']} row {source['row']}")
        except (ValueError, KeyError, TypeError, AttributeError, EOFError):  # orjson's and fastavro's errors too
            return f"a message of {message.topic}"

    def before_commit(self) -> Iterator[Message]:
        yield from self._release_held()
        if self._tx is not None:
            yield self._tx_topic.end(self._tx)
        self._history.clear()
        self._tx = self._now = None

    def _release(self, records: list[Record]) -> Iterator[Message]:
        """The change events of records (and schema change events of statements): with transaction metadata in
        binlog order across them, BEGIN and END around each binlog transaction's events."""
        if self._now is None:
            self._now = self.clock()  # the processing time of every event of this Kafka transaction
        now, history = self._now, self._history
        streams: list[Iterable[RenderedEvent | RecordEvent | Statement | Snapshot]] = []
        tables: list[tuple[str, Iterable[RenderedEvent | RecordEvent]]] = []
        for r in records:
            headers, where = dict(r.headers), f"record {r.topic} at {r.seq}"
            if r.topic == SNAPSHOT_TOPIC:
                streams.append((Snapshot(r),))  # a tuple: C composes lists
                continue
            if r.topic == SCHEMA_TOPIC:
                dec = record_decoder(r.value, where, False)
                connector = "mariadb" if dec is not None and dec.is_mariadb else "mysql"
                streams.append(Statement(item, connector) for item in record_events(headers, r.value, where))
                continue
            if is_statement_record(r.value):  # what a statement did to the table (a tuple: C composes lists)
                streams.append(tuple(record_events(headers, r.value, where)))
                continue
            walked = self._native.walk(headers, r.value, where) if self._native else None
            events = walked if walked is not None else record_events(headers, r.value, where, self._native or False)
            streams.append(events)
            tables.append((r.topic, events))
        self.layout.prepare(self._new_schemas(tables))  # Avro: the registrations of new tables' schemas, side by side
        if not self.options.transactions:  # no order across tables to give: record by record (a table's in order)
            for stream in streams:
                if type(stream) is list and self._native:  # C walked it and composes its events, a few at a time
                    for i in range(0, len(stream), _COMPOSED):
                        yield from self._composed(stream[i : i + _COMPOSED], now)
                    continue
                for item in stream:
                    if isinstance(item, (Statement, Snapshot)):
                        yield from self._schema_events.of(item, history, now)
                        continue
                    if isinstance(item, RecordEvent) and type(item.event) is TableStatementEvent:
                        yield from self._table_statement(item, item.event.statement, None, now)
                        continue
                    event = self._unpack(item)
                    if event is not None:
                        yield from self._messages(item, event, None, now)
            return
        for item in heapq.merge(*streams, key=_order):
            if isinstance(item, (Statement, Snapshot)):
                yield from self._schema_events.of(item, history, now)
                continue
            if isinstance(item, RecordEvent) and type(item.event) is TableStatementEvent:
                statement = item.event.statement
                if statement.op == "truncate" and "t" not in self.options.skipped:
                    yield from self._transaction(item.gtid, item.seq.file_number, item.seq.position, item.commit_ts)
                yield from self._table_statement(item, statement, self._tx, now)
                continue
            event = self._unpack(item)
            if event is None:
                continue
            file_number, position, gtid, commit_ts, snapshot, _ = event
            if not snapshot:
                yield from self._transaction(gtid, file_number, position, commit_ts)
            yield from self._messages(item, event, None if snapshot else self._tx, now)

    def _transaction(self, gtid: str, file_number: int, position: int, commit_ts: int) -> Iterator[Message]:
        """The transaction topic's END of the transaction before an event's, and its BEGIN, where they change."""
        tx, tx_id = self._tx, gtid or f"file={self._file(file_number)},pos={position}"
        if tx is None or tx.id != tx_id:
            if tx is not None:
                yield self._tx_topic.end(tx)
            self._tx = _Transaction(tx_id, commit_ts // 1000)
            yield self._tx_topic.begin(self._tx)

    @staticmethod
    def _unpack(item: RenderedEvent | RecordEvent) -> _Unpacked | None:
        """A record's event as where it is, GTID, commit time, whether a snapshot's and C's rendering (if any); None
        for what is not a rows event (table topics hold rows events and their table maps only)."""
        if type(item) is tuple:  # a rows event C rendered
            return _unpacked(_Unpacked, (item[0], item[1], item[3], item[4], False, item))
        assert isinstance(item, RecordEvent)
        ev = item.event
        if not isinstance(ev, E.RowsEvent):
            return None
        seq = item.seq
        rendered = None
        if type(ev.rows) is RenderedRows:  # the codec's rows compiler rendered this one
            rendered = (seq.file_number, seq.position, seq.sub, item.gtid, item.commit_ts, ev.timestamp,
                        ev.server_id, ev.type_code, ev.table_map, ev.rows.rows)
        return _unpacked(_Unpacked, (seq.file_number, seq.position, item.gtid, item.commit_ts,
                                     isinstance(ev, E.SnapshotRowsEvent), rendered))

    def _messages(self, item: RenderedEvent | RecordEvent, event: _Unpacked, tx: _Transaction | None,
                  now: int) -> Iterator[Message]:
        rendered = event.rendered
        if rendered is not None:
            return self._rendered(rendered, tx, now)
        return self._rows(item, item.event, event.snapshot, tx, now)  # type: ignore[union-attr, arg-type]


class DebeziumJson(DebeziumOut):
    """``kafka.format: debezium-json``: Kafka Connect's JsonConverter."""

    def __init__(self, options: DebeziumOptions, file_name: Callable[[int], str], max_record_bytes: int,
                 clock: Callable[[], int] = time.time_ns) -> None:
        super().__init__(options, JsonLayout(options.schemas), file_name, max_record_bytes, clock)


class DebeziumAvro(DebeziumOut):
    """``kafka.format: debezium-avro``: Confluent's AvroConverter, its schemas in a registry (``ids``)."""

    def __init__(self, options: DebeziumOptions, ids: SchemaIds, file_name: Callable[[int], str],
                 max_record_bytes: int, clock: Callable[[], int] = time.time_ns) -> None:
        super().__init__(options, AvroLayout(ids, *options.subjects), file_name, max_record_bytes, clock)
