"""The schema change topic's events (``<prefix>``) of the statements in binlake's schema topic and of a snapshot's
schema record, as Debezium publishes them (schema_change.py puts each together; the encoder orders them among the
change events)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from ...codec import events as E
from ...schema.ddl_operations import Name
from ..format import RecordEvent, Sequence
from ..open_records import Record
from ..outbound import Message
from .layouts import Layout
from .schema_change import (
    SchemaChange,
    Where,
    change_payload,
    key_schema,
    schema_changes,
    snapshot_changes,
    value_schema,
)

VERSION = "3.5.0.Final"  # the Debezium release whose layout this follows (source.version)
_SCHEMAS = {c: (key_schema(c), value_schema(c)) for c in ("mariadb", "mysql")}


@dataclass(frozen=True, slots=True)
class Statement:
    """A statement of binlake's schema topic, and the connector (mariadb, mysql) of its server."""

    item: RecordEvent
    connector: str

    @property
    def seq(self) -> Sequence:
        return self.item.seq


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The record of a snapshot's schema (schema_change.snapshot_changes)."""

    record: Record

    @property
    def seq(self) -> Sequence:
        return self.record.seq


class SchemaEvents:
    """The schema change events of statements, serialized by ``layout`` into ``topic``; ``accept``: the tables
    published (filters); ``file_name``: a binlog file's name by its number."""

    def __init__(self, layout: Layout, topic: str, prefix: str, accept: Callable[[str, str], bool],
                 file_name: Callable[[int], str]) -> None:
        self.layout = layout
        self.topic = topic
        self.prefix = prefix
        self.accept = accept
        self.file_name = file_name

    def of(self, statement: Statement | Snapshot, history: dict[str, dict[Name, dict[str, Any]]],
                   now: int) -> Iterator[Message]:
        """The schema change events of a statement of binlake's schema topic or of a snapshot's schema record;
        ``history``: the schema history's entries by statement sequence (each taken once); ``now``: ns."""
        if isinstance(statement, Snapshot):
            described = orjson.loads(statement.record.value)
            changes = snapshot_changes(described, history.pop(described["history_seq"], None), self.accept)
            where = Where(VERSION, described["connector"], self.prefix, now // 1_000_000, 0, None,
                          self.file_name(statement.seq.file_number), statement.seq.position + 1, "true")
            yield from self._messages(changes, where, now)
        elif isinstance(statement.item.event, E.QueryEvent):
            yield from self._statement(statement.item, statement.item.event, statement.connector, history, now)

    def _statement(self, item: RecordEvent, ev: E.QueryEvent, connector: str,
                        history: dict[str, dict[Name, dict[str, Any]]], now_ns: int) -> Iterator[Message]:
        """The schema change events of a statement, its tables described by the history's entries of it."""
        changes = schema_changes(ev.query, ev.database, history.pop(str(item.seq), None), self.accept)
        if not changes:
            return
        where = Where(VERSION, connector, self.prefix, ev.timestamp * 1000, ev.server_id, item.gtid or None,
                      self.file_name(item.seq.file_number), ev.position)
        yield from self._messages(changes, where, now_ns)

    def _messages(self, changes: list[SchemaChange], where: Where, now_ns: int) -> Iterator[Message]:
        keys, values = _SCHEMAS[where.connector]
        topic = self.topic
        for change in changes:
            yield Message(topic, self.layout.encode(topic, "key", keys, {"databaseName": change.database}),
                          self.layout.encode(topic, "value", values, change_payload(change, where, now_ns)), ())
