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
transaction metadata C puts whole messages together (_envelope.h), in either layout. Events C leaves to
Python (and every event without the extension or with ``BINLAKE_PURE_PYTHON=1``) take the reference path:
the codec's row dicts, columns.py's converters and orjson (and for Avro payload_fixer and fastavro), to the
same messages.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from ...codec import events as E
from ...codec.errors import BinlogError
from ...codec.table_map import TableMap
from ...schema.ddl import Name
from ...schema.history import HISTORY_TOPIC, enrich
from ..builder import SCHEMA_TOPIC
from ..format import RecordEvent, record_decoder, record_events
from ..open_records import Record
from ..outbound import BinlakeOut, Message
from ..statement import TableStatement, TableStatementEvent, is_statement_record
from .columns import Modes
from .envelope import TableCodec, snapshot_marker, table_codec, topic_name
from .layouts import AvroLayout, JsonLayout, Layout, Role, SchemaIds, Strategy
from .native import RenderedEvent, RenderedRows, rows_renderer
from .schema_change import SNAPSHOT_TOPIC
from .schema_events import VERSION, SchemaEvents, Snapshot, Statement
from .transaction_topic import Transaction as _Transaction
from .transaction_topic import TransactionTopic

log = logging.getLogger("binlake.debezium")
_OPS = {"write": "c", "update": "u", "delete": "d"}
_OP_FIELDS = {op: b',"op":"%s"' % op.encode() for op in ("c", "u", "d")}
_CODE_OPS = {23: "c", 30: "c", 24: "u", 31: "u", 25: "d", 32: "d"}  # rows event type codes C renders
# Headers of the delete and the create a changed primary key becomes (and of the delete's tombstone): the other
# key, its struct's fields as Kafka Connect's SimpleHeaderConverter writes them (compact JSON)
NEW_KEY, OLD_KEY = "__debezium.newkey", "__debezium.oldkey"


def _every_table(database: str, table: str) -> bool:
    return True


@dataclass(frozen=True)
class DebeziumOptions:
    prefix: str  # topic.prefix: topics <prefix>.<db>.<table>, the transaction topic <prefix>.transaction
    modes: Modes = field(default_factory=Modes)
    schemas: bool = True  # the JSON converter's schemas.enable
    tombstones: bool = True  # tombstones.on.delete
    transactions: bool = False  # provide.transaction.metadata
    schema_changes: bool = True  # include.schema.changes: the schema change topic <prefix>
    accept: Callable[[str, str], bool] = _every_table  # the tables published (filters): their schema changes
    subjects: tuple[Strategy, Strategy] = ("TopicNameStrategy", "TopicNameStrategy")  # Avro: key's, value's
    skipped: frozenset[str] = frozenset(("t",))  # skipped.operations: "t", TRUNCATE's change events not published
    # whether records carry the schema history's column defaults with their table maps (docs/FORMAT.md, "Schema
    # entries"): a table statement's columns give them too then, where a truncate's schema comes from them
    history_defaults: bool = False


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

@dataclass(frozen=True)
class _Table:
    """A table map's Debezium shape, and the source block of its events."""

    codec: TableCodec
    name: str  # db.table, as the transaction topic counts events
    source: bytes  # the source block of a binlog event, to fill in with its ts, server id, gtid, file and pos
    # the native composer's pieces (_envelope.h): (topic, value head, source a, b, c), then the key's head (None:
    # no key) and tail, the value's tail and Avro's transcoder programs and headers (None: JSON, framed as it
    # is); None when C does not compose them
    pieces: tuple[tuple[str, bytes, bytes, bytes, bytes], tuple[Any, ...]] | None


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
        self._tables: dict[int, tuple[TableMap, _Table]] = {}
        self._codecs: dict[int, tuple[TableMap, TableCodec]] = {}  # tables whose schemas _new_schemas gave
        self._native = rows_renderer(options.modes)  # C's structs (None: Python's)
        self.transaction_topic = topic_name(options.prefix, "transaction")
        self._tx_topic = TransactionTopic(layout, self.transaction_topic)
        self._last_file: tuple[int, str] = (-1, "")
        self._last_file_json = b'""'
        self.schema_topic = topic_name(options.prefix)
        self._schema_events = SchemaEvents(layout, self.schema_topic, options.prefix, options.accept, self._file)
        self._history: dict[str, dict[Name, dict[str, Any]]] = {}  # seq -> the history's entries of a statement
        # each table's schema as its latest change events had it, or a table statement's columns since: a truncate's
        self._schemas: dict[Name, TableMap] = {}

    def _file(self, number: int) -> str:
        if self._last_file[0] != number:
            self._last_file = (number, self.file_name(number))
            self._last_file_json = orjson.dumps(self._last_file[1])
        return self._last_file[1]

    def _file_json(self, number: int) -> bytes:
        self._file(number)
        return self._last_file_json

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

    def _composed(self, walked: list[RenderedEvent], now: int) -> Iterable[Message]:
        """The messages of rows events C walked: composed by C, or by Python where C leaves an event to it (Avro)."""
        composed = self._native.envelopes(walked, self._shape, now, self.options.tombstones)  # type: ignore[union-attr]
        if composed is not None:
            return composed
        return (m for item in walked for m in self._rendered(item, None, now))

    @staticmethod
    def _unpack(item: RenderedEvent | RecordEvent) -> tuple[int, int, str, int, bool, RenderedEvent | None] | None:
        """A record's event as (file number, position, GTID, commit time, snapshot, C's rendering or None); None
        for what is not a rows event (table topics hold rows events and their table maps only)."""
        if type(item) is tuple:  # a rows event C rendered
            return item[0], item[1], item[3], item[4], False, item  # type: ignore[return-value]
        assert isinstance(item, RecordEvent)
        ev = item.event
        if not isinstance(ev, E.RowsEvent):
            return None
        seq = item.seq
        rendered = None
        if type(ev.rows) is RenderedRows:  # the codec's rows compiler rendered this one
            rendered = (seq.file_number, seq.position, seq.sub, item.gtid, item.commit_ts, ev.timestamp,
                        ev.server_id, ev.type_code, ev.table_map, ev.rows.rows)
        return (seq.file_number, seq.position, item.gtid, item.commit_ts, isinstance(ev, E.SnapshotRowsEvent),
                rendered)

    def _messages(self, item: RenderedEvent | RecordEvent, event: tuple[int, int, str, int, bool, RenderedEvent | None],
                  tx: _Transaction | None, now: int) -> Iterator[Message]:
        rendered = event[5]
        if rendered is not None:
            return self._rendered(rendered, tx, now)
        return self._rows(item, item.event, event[4], tx, now)  # type: ignore[union-attr, arg-type]

    def _shape(self, tm: TableMap, file_number: int) -> tuple[Any, ...] | None:
        """The pieces of a table's change events in one binlog file, for the native composer (_envelope.h); None
        when it does not compose them."""
        pieces = self._table(tm).pieces
        return None if pieces is None else (*pieces[0], self._file_json(file_number), *pieces[1])

    # -- change events

    def _new_schemas(self, streams: list[tuple[str, Iterable[RenderedEvent | RecordEvent]]]) \
            -> Iterator[tuple[str, Role, bytes]]:
        """The key and value schemas of the tables first met in C's walks of a Kafka transaction's records (topic
        and stream), in the order their events need them. A topic's walks after a record Python reads (whose
        table maps are only known once read) are left out: its events ask in their order."""
        python: set[str] = set()
        seen: set[int] = set()
        for topic, stream in streams:
            if type(stream) is not list:
                python.add(topic)
                continue
            if topic in python:
                continue
            for event in stream:
                tm = event[8]
                if id(tm) in seen:
                    continue
                seen.add(id(tm))
                cached = self._tables.get(id(tm))
                if cached is not None and cached[0] is tm:
                    continue
                codec = table_codec(tm, self.options.prefix, self.options.modes)
                self._codecs[id(tm)] = (tm, codec)
                if codec.key_schema is not None:
                    yield codec.topic, "key", codec.key_schema
                yield codec.topic, "value", codec.value_schema

    def _table(self, tm: TableMap) -> _Table:
        cached = self._tables.get(id(tm))
        if cached is not None and cached[0] is tm:
            self._schemas[(tm.database, tm.table)] = tm
            return cached[1]
        self._schemas[(tm.database, tm.table)] = tm
        known = self._codecs.pop(id(tm), None)
        codec = known[1] if known is not None and known[0] is tm else table_codec(tm, self.options.prefix,
                                                                                  self.options.modes)
        text = [orjson.dumps(x) for x in (VERSION, self.options.prefix, tm.database, tm.table)]
        # as _rows' source dict: a, ts_ms, b, ts_us, "ts_ns", c, server_id, then gtid, file, pos and row
        a = b"".join((b'{"version":', text[0], b',"connector":', b'"mariadb"' if tm.is_mariadb else b'"mysql"',
                      b',"name":', text[1], b',"ts_ms":'))
        b = b"".join((b',"snapshot":"false","db":', text[2], b',"sequence":null,"ts_us":'))
        c = b"".join((b',"table":', text[3], b',"server_id":'))
        a_, b_, c_ = (x.replace(b"%", b"%%") for x in (a, b, c))  # for the bytes % (ts_ms, ts_us, ts_ns, server_id,
        source = a_ + b"%d" + b_ + b'%d,"ts_ns":%d' + c_ + b'%d,"gtid":%b,"file":%b,"pos":%d,"row":'  # gtid, file, pos)
        table = _Table(codec, f"{tm.database}.{tm.table}", source, self._pieces(codec, a, b, c))
        if len(self._tables) >= 4096:
            self._tables.clear()
            self._codecs.clear()
        self._tables[id(tm)] = (tm, table)
        return table

    def _pieces(self, codec: TableCodec, a: bytes, b: bytes, c: bytes) -> tuple[Any, Any] | None:
        """The native composer's pieces of a table's events (_Table.pieces); Avro's schemas registered (the key's
        first, as its first event would)."""
        if not self._native:
            return None
        value_frame = self.layout.json_frame(codec.value_schema)
        if value_frame is not None:  # JSON
            key_frame = self.layout.json_frame(codec.key_schema) if codec.key_schema is not None else None
            return ((codec.topic, value_frame[0], a, b, c),
                    (None, b"", value_frame[1], None) if key_frame is None else (*key_frame, value_frame[1], None))
        key = None if codec.key_schema is None else self.layout.transcoder(codec.topic, "key", codec.key_schema)
        value = self.layout.transcoder(codec.topic, "value", codec.value_schema)
        if value is None or (key is None and codec.key_schema is not None):
            return None
        return ((codec.topic, b"", a, b, c),
                (None if key is None else b"", b"", b"", (*(key or (None, b"")), *value)))

    def _table_statement(self, item: RecordEvent, statement: TableStatement, tx: _Transaction | None,
                         now: int) -> Iterator[Message]:
        """What a table statement entry becomes: a truncate, Debezium's truncate change event (op "t", no key, no
        before or after; unless skipped.operations has "t"), in the table's schema as its change events have it;
        other statements none (Debezium publishes them on the schema change topic alone). Entries with the table's
        columns make its schema for a truncate that comes before its next change event."""
        name = (statement.database, statement.table)
        if statement.op != "truncate":
            if statement.op != "partition":
                self._schemas.pop(name, None)
            tm = statement.table_map(self.options.history_defaults)
            if tm is not None and name not in self._schemas:
                self._schemas[name] = tm
            return
        if "t" in self.options.skipped:
            return
        tm = self._schemas.get(name) or statement.table_map(self.options.history_defaults)
        if tm is None:
            log.warning("the truncate of %s.%s at %s: its columns are not known (no change event of the table yet, no "
                        "schema history): no truncate change event", *name, item.seq)
            return
        codec = self._table(tm).codec
        ts_ms = statement.micros // 1_000_000 * 1000
        source = {
            "version": VERSION, "connector": "mariadb" if statement.mariadb else "mysql", "name": self.options.prefix,
            "ts_ms": ts_ms, "snapshot": "false", "db": statement.database, "sequence": None, "ts_us": ts_ms * 1000,
            "ts_ns": ts_ms * 1_000_000, "table": statement.table, "server_id": statement.server_id,
            "gtid": item.gtid or None, "file": self._file(item.seq.file_number), "pos": item.seq.position, "row": 0,
            "thread": None, "query": None}
        block = None
        if tx is not None:
            total, n = tx.count(f"{statement.database}.{statement.table}")
            block = {"id": tx.id, "total_order": total, "data_collection_order": n}
        payload = {"before": None, "after": None, "source": source, "transaction": block, "op": "t",
                   "ts_ms": now // 1_000_000, "ts_us": now // 1000, "ts_ns": now}
        yield Message(codec.topic, None, self.layout.encode(codec.topic, "value", codec.value_schema, payload), ())

    def _rows(self, item: RecordEvent, ev: E.RowsEvent, snapshot: bool, tx: _Transaction | None,
              now: int) -> Iterator[Message]:
        table = self._table(ev.table_map)
        codec = table.codec
        tm = codec.table_map
        encode_key = codec.key_schema is not None
        ts_ms = ev.timestamp * 1000 if not snapshot else item.commit_ts // 1000
        source = {
            "version": VERSION, "connector": "mariadb" if tm.is_mariadb else "mysql", "name": self.options.prefix,
            "ts_ms": ts_ms, "snapshot": "true" if snapshot else "false", "db": tm.database, "sequence": None,
            "ts_us": ts_ms * 1000, "ts_ns": ts_ms * 1_000_000, "table": tm.table,
            "server_id": 0 if snapshot else ev.server_id, "gtid": (item.gtid or None) if not snapshot else None,
            "file": self._file(item.seq.file_number), "pos": item.seq.position + 1 if snapshot else ev.position,
            "row": 0, "thread": None, "query": None}
        kind = "r" if snapshot else _OPS[ev.kind]
        table_name = table.name
        marks = ev.marks if snapshot else None  # type: ignore[attr-defined]
        last = len(ev.rows) - 1
        for index, change in enumerate(ev.rows):
            if marks is not None:
                source["snapshot"] = snapshot_marker(marks, index, last)
            before = codec.row(change["before"]) if "before" in change else None
            after = codec.row(change["after"]) if "after" in change else None
            if kind == "u" and encode_key and codec.key(before) != codec.key(after):  # type: ignore[arg-type]
                # a changed key: a delete of the old key (and its tombstone), then a create of the new one
                old, new = orjson.dumps(codec.key(before)), orjson.dumps(codec.key(after))  # type: ignore[arg-type]
                yield from self._event(codec, source, index, "d", before, None, tx, table_name, now,
                                       ((NEW_KEY, new),))
                yield from self._event(codec, source, index, "c", None, after, tx, table_name, now,
                                       ((OLD_KEY, old),))
                continue
            yield from self._event(codec, source, index, kind, before, after, tx, table_name, now)

    def _event(self, codec: TableCodec, source: dict[str, Any], index: int, op: str, before: dict[str, Any] | None,
               after: dict[str, Any] | None, tx: _Transaction | None, table_name: str, now: int,
               headers: tuple[tuple[str, bytes], ...] = ()) -> Iterator[Message]:
        block = None
        if tx is not None:
            total, n = tx.count(table_name)
            block = {"id": tx.id, "total_order": total, "data_collection_order": n}
        key = None
        if codec.key_schema is not None:
            key = self.layout.encode(codec.topic, "key", codec.key_schema,
                                     codec.key(after if after is not None else before))  # type: ignore[arg-type]
        payload = {"before": before, "after": after, "source": {**source, "row": index}, "transaction": block,
                   "op": op, "ts_ms": now // 1_000_000, "ts_us": now // 1000, "ts_ns": now}
        yield Message(codec.topic, key, self.layout.encode(codec.topic, "value", codec.value_schema, payload), headers)
        if op == "d" and self.options.tombstones:
            yield Message(codec.topic, key, None, headers)

    def _rendered(self, event: RenderedEvent, tx: _Transaction | None, now: int) -> Iterator[Message]:
        """``_rows`` of the structs C rendered: the same messages, put together from bytes (the reference of the
        native composer, _envelope.h)."""
        file_number, position, _, gtid, _, timestamp, server_id, code, tm, rows = event
        table = self._table(tm)
        ts_ms = timestamp * 1000
        source = table.source % (ts_ms, ts_ms * 1000, ts_ms * 1_000_000, server_id,
                                 orjson.dumps(gtid) if gtid else b"null", self._file_json(file_number), position)
        end = b',"ts_ms":%d,"ts_us":%d,"ts_ns":%d}' % (now // 1_000_000, now // 1000, now)
        kind = _CODE_OPS[code]
        for index, (before, after, key_before, key_after) in enumerate(rows):
            row = b"%d" % index
            if kind == "u" and key_before != key_after:  # a changed key: a delete, then a create (as _rows)
                assert key_before is not None and key_after is not None
                yield from self._compose(table, before, None, source, row, "d", key_before, tx, end,
                                         ((NEW_KEY, key_after),))
                yield from self._compose(table, None, after, source, row, "c", key_after, tx, end,
                                         ((OLD_KEY, key_before),))
            else:
                yield from self._compose(table, before, after, source, row, kind,
                                         key_after if after is not None else key_before, tx, end)

    def _compose(self, table: _Table, before: bytes | None, after: bytes | None, source: bytes, row: bytes, op: str,
                 key_struct: bytes | None, tx: _Transaction | None, end: bytes,
                 headers: tuple[tuple[str, bytes], ...] = ()) -> Iterator[Message]:
        block = b"null"
        if tx is not None:
            total, n = tx.count(table.name)
            block = b'{"id":%b,"total_order":%d,"data_collection_order":%d}' % (tx.id_json, total, n)
        codec = table.codec
        key = None
        if key_struct is not None:
            key = self.layout.encode_json(codec.topic, "key", codec.key_schema, key_struct)  # type: ignore[arg-type]
        value = b"".join((b'{"before":', before or b"null", b',"after":', after or b"null", b',"source":', source,
                          row, b',"thread":null,"query":null},"transaction":', block, _OP_FIELDS[op], end))
        yield Message(codec.topic, key, self.layout.encode_json(codec.topic, "value", codec.value_schema, value),
                      headers)
        if op == "d" and self.options.tombstones:
            yield Message(table.codec.topic, key, None, headers)

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
