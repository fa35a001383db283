"""The reference path of change events: a rows event's row dicts (the codec's) converted by columns.py's
converters (the table's codec) and serialized by the layout (orjson; for Avro payload_fixer and fastavro), one
change event per row; and the truncate change event of a table statement. Events C leaves to Python, and every
event without the extension or with ``BINLAKE_PURE_PYTHON=1``, take it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import orjson

from ...codec import events as E
from ..format import RecordEvent
from ..outbound import Message
from ..statement import TableStatement
from .envelope import TableCodec, snapshot_marker
from .layouts import Layout
from .options import DebeziumOptions
from .schema_events import VERSION
from .table_shapes import TableShapes
from .transaction_topic import Transaction

log = logging.getLogger("binlake.debezium")
_OPS = {"write": "c", "update": "u", "delete": "d"}
# Headers of the delete and the create a changed primary key becomes (and of the delete's tombstone): the other
# key, its struct's fields as Kafka Connect's SimpleHeaderConverter writes them (compact JSON)
NEW_KEY, OLD_KEY = "__debezium.newkey", "__debezium.oldkey"


class PythonEvents:
    """The change events of rows events read as row dicts, and of table statements, in the tables' ``shapes``,
    serialized by ``layout``."""

    def __init__(self, options: DebeziumOptions, layout: Layout, shapes: TableShapes) -> None:
        self.options = options
        self.layout = layout
        self._table = shapes.table
        self._file = shapes.file
        self._schemas = shapes.schemas

    def table_statement(self, item: RecordEvent, statement: TableStatement, tx: Transaction | None,
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

    def rows(self, item: RecordEvent, ev: E.RowsEvent, snapshot: bool, tx: Transaction | None,
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
                yield from self.event(codec, source, index, "d", before, None, tx, table_name, now,
                                      ((NEW_KEY, new),))
                yield from self.event(codec, source, index, "c", None, after, tx, table_name, now,
                                      ((OLD_KEY, old),))
                continue
            yield from self.event(codec, source, index, kind, before, after, tx, table_name, now)

    def event(self, codec: TableCodec, source: dict[str, Any], index: int, op: str, before: dict[str, Any] | None,
              after: dict[str, Any] | None, tx: Transaction | None, table_name: str, now: int,
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
