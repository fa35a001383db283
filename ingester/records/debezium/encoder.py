"""``kafka.format: debezium-json``: binlake's records become Debezium change events, one per row, in Kafka
Connect's JSON converter layout (docs/DEBEZIUM.md).

The records of one Kafka transaction are held until its commit (a checkpoint is only ever taken between
binlog transactions, so they hold whole transactions), then their events are merged back into binlog order:
that is what gives each event its place in its transaction (``transaction.total_order``) and lets the
transaction topic say BEGIN before a transaction's events and END after them. Everything goes out in the
same Kafka transaction as the checkpoint, so the change events are exactly once like binlake's records.
Topics of binlake's own (schema history, statements) keep binlake's format.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from ...codec import events as E
from ...codec.table_map import TableMap
from ..format import RecordEvent, record_events
from ..open_records import Record
from ..outbound import BinlakeOut, Message
from .columns import Modes
from .envelope import TRANSACTION_KEY_SCHEMA, TRANSACTION_VALUE_SCHEMA, TableCodec, table_codec, topic_name

_OPS = {"write": "c", "update": "u", "delete": "d"}
VERSION = "3.5.0.Final"  # the Debezium release whose layout this follows (source.version)


@dataclass(frozen=True)
class DebeziumOptions:
    prefix: str  # topic.prefix: topics <prefix>.<db>.<table>, the transaction topic <prefix>.transaction
    modes: Modes = field(default_factory=Modes)
    schemas: bool = True  # the JSON converter's schemas.enable
    tombstones: bool = True  # tombstones.on.delete
    transactions: bool = False  # provide.transaction.metadata


class JsonLayout:
    """Kafka Connect's JsonConverter: ``{"schema":...,"payload":...}`` or, without schemas, the payload."""

    def __init__(self, schemas: bool) -> None:
        self.schemas = schemas

    def encode(self, schema: bytes, payload: Any) -> bytes:
        body = orjson.dumps(payload)
        if not self.schemas:
            return body
        return b'{"schema":' + schema + b',"payload":' + body + b"}"


_TX_KEY = orjson.dumps(TRANSACTION_KEY_SCHEMA)
_TX_VALUE = orjson.dumps(TRANSACTION_VALUE_SCHEMA)


@dataclass
class _Transaction:
    id: str
    ts_ms: int
    total: int = 0
    per_table: dict[str, int] = field(default_factory=dict)


class DebeziumJson:
    """The Outbound strategy of ``kafka.format: debezium-json``. ``file_name`` maps a sequence's binlog
    file number to the file's name (source.file)."""

    def __init__(self, options: DebeziumOptions, file_name: Callable[[int], str], max_record_bytes: int,
                 clock: Callable[[], int] = time.time_ns) -> None:
        self.options = options
        self.file_name = file_name
        self.clock = clock
        self.layout = JsonLayout(options.schemas)
        self._own = BinlakeOut(options.prefix, max_record_bytes)
        self._held: list[Record] = []
        self._codecs: dict[int, tuple[TableMap, TableCodec]] = {}
        self.transaction_topic = topic_name(options.prefix, "transaction")
        self._last_file: tuple[int, str] = (-1, "")

    def _file(self, number: int) -> str:
        if self._last_file[0] != number:
            self._last_file = (number, self.file_name(number))
        return self._last_file[1]

    # -- Outbound

    def messages(self, record: Record) -> Iterator[Message]:
        if record.topic.startswith("_"):  # binlake's own topics
            yield from self._own.messages(record)
        else:
            self._held.append(record)

    def discard(self) -> None:
        self._held.clear()

    def before_commit(self) -> Iterator[Message]:
        held, self._held = self._held, []
        streams = [record_events(dict(r.headers), r.value, f"record {r.topic} at {r.seq}") for r in held]
        tx: _Transaction | None = None
        for item in heapq.merge(*streams, key=lambda e: e.seq):
            ev = item.event
            if not isinstance(ev, E.RowsEvent):
                continue  # table topics hold rows events and their table maps only
            snapshot = isinstance(ev, E.SnapshotRowsEvent)
            if self.options.transactions and not snapshot:
                tx_id = item.gtid or f"file={self._file(item.seq.file_number)},pos={item.seq.position}"
                if tx is None or tx.id != tx_id:
                    if tx is not None:
                        yield self._end(tx)
                    tx = _Transaction(tx_id, item.commit_ts // 1000)
                    yield self._begin(tx)
            yield from self._rows(item, ev, snapshot, None if snapshot else tx)
        if tx is not None:
            yield self._end(tx)

    # -- change events

    def _codec(self, tm: TableMap) -> TableCodec:
        cached = self._codecs.get(id(tm))
        if cached is not None and cached[0] is tm:
            return cached[1]
        codec = table_codec(tm, self.options.prefix, self.options.modes)
        if len(self._codecs) >= 4096:
            self._codecs.clear()
        self._codecs[id(tm)] = (tm, codec)
        return codec

    def _rows(self, item: RecordEvent, ev: E.RowsEvent, snapshot: bool, tx: _Transaction | None) -> Iterator[Message]:
        codec = self._codec(ev.table_map)
        tm = codec.table_map
        encode_key = codec.key_schema is not None
        now = self.clock()
        ts_ms = ev.timestamp * 1000 if not snapshot else item.commit_ts // 1000
        source = {
            "version": VERSION, "connector": "mariadb" if tm.is_mariadb else "mysql", "name": self.options.prefix,
            "ts_ms": ts_ms, "snapshot": "true" if snapshot else "false", "db": tm.database, "sequence": None,
            "ts_us": ts_ms * 1000, "ts_ns": ts_ms * 1_000_000, "table": tm.table,
            "server_id": 0 if snapshot else ev.server_id, "gtid": (item.gtid or None) if not snapshot else None,
            "file": self._file(item.seq.file_number), "pos": item.seq.position + 1 if snapshot else ev.position,
            "row": 0, "thread": None, "query": None}
        kind = "r" if snapshot else _OPS[ev.kind]
        table_name = f"{tm.database}.{tm.table}"
        for index, change in enumerate(ev.rows):
            before = codec.row(change["before"]) if "before" in change else None
            after = codec.row(change["after"]) if "after" in change else None
            if kind == "u" and encode_key and codec.key(before) != codec.key(after):  # type: ignore[arg-type]
                # a changed key: a delete of the old key (and its tombstone), then a create of the new one
                yield from self._event(codec, source, index, "d", before, None, tx, table_name, now)
                yield from self._event(codec, source, index, "c", None, after, tx, table_name, now)
                continue
            yield from self._event(codec, source, index, kind, before, after, tx, table_name, now)

    def _event(self, codec: TableCodec, source: dict[str, Any], index: int, op: str, before: dict[str, Any] | None,
               after: dict[str, Any] | None, tx: _Transaction | None, table_name: str, now: int) -> Iterator[Message]:
        block = None
        if tx is not None:
            tx.total += 1
            tx.per_table[table_name] = tx.per_table.get(table_name, 0) + 1
            block = {"id": tx.id, "total_order": tx.total, "data_collection_order": tx.per_table[table_name]}
        key = None
        if codec.key_schema is not None:
            key = self.layout.encode(codec.key_schema, codec.key(after if after is not None else before))  # type: ignore[arg-type]
        payload = {"before": before, "after": after, "source": {**source, "row": index}, "transaction": block,
                   "op": op, "ts_ms": now // 1_000_000, "ts_us": now // 1000, "ts_ns": now}
        yield Message(codec.topic, key, self.layout.encode(codec.value_schema, payload), [])
        if op == "d" and self.options.tombstones:
            yield Message(codec.topic, key, None, [])

    # -- the transaction topic

    def _begin(self, tx: _Transaction) -> Message:
        return self._tx_message(tx, {"status": "BEGIN", "id": tx.id, "event_count": None, "data_collections": None,
                                     "ts_ms": tx.ts_ms})

    def _end(self, tx: _Transaction) -> Message:
        return self._tx_message(tx, {"status": "END", "id": tx.id, "event_count": tx.total, "data_collections": [
            {"data_collection": name, "event_count": n} for name, n in tx.per_table.items()], "ts_ms": tx.ts_ms})

    def _tx_message(self, tx: _Transaction, payload: dict[str, Any]) -> Message:
        return Message(self.transaction_topic, self.layout.encode(_TX_KEY, {"id": tx.id}),
                       self.layout.encode(_TX_VALUE, payload), [])
