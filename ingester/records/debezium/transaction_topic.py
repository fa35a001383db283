"""Debezium's transaction topic ``<prefix>.transaction`` (``provide.transaction.metadata``): a BEGIN before a
transaction's change events and an END after them with its event counts, in total and per table, and each
change event's place in its transaction (its ``transaction`` block)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from ..outbound import Message
from .envelope import TRANSACTION_KEY_SCHEMA, TRANSACTION_VALUE_SCHEMA
from .layouts import Layout

_KEY = orjson.dumps(TRANSACTION_KEY_SCHEMA)
_VALUE = orjson.dumps(TRANSACTION_VALUE_SCHEMA)


@dataclass
class Transaction:
    """A binlog transaction's id (its GTID, or file and position) and commit time, and its events so far."""

    id: str
    ts_ms: int
    total: int = 0
    per_table: dict[str, int] = field(default_factory=dict)
    id_json: bytes = field(init=False)

    def __post_init__(self) -> None:
        self.id_json = orjson.dumps(self.id)

    def count(self, table_name: str) -> tuple[int, int]:
        """One more event of the table: its total_order and data_collection_order."""
        self.total += 1
        n = self.per_table[table_name] = self.per_table.get(table_name, 0) + 1
        return self.total, n

    def begin(self, layout: Layout, topic: str) -> Message:
        return self._message(layout, topic, {"status": "BEGIN", "id": self.id, "event_count": None,
                                             "data_collections": None, "ts_ms": self.ts_ms})

    def end(self, layout: Layout, topic: str) -> Message:
        return self._message(layout, topic, {"status": "END", "id": self.id, "event_count": self.total,
                                             "data_collections": [{"data_collection": name, "event_count": n}
                                                                  for name, n in self.per_table.items()],
                                             "ts_ms": self.ts_ms})

    def _message(self, layout: Layout, topic: str, payload: dict[str, Any]) -> Message:
        """A message of the topic, its payloads' JSON encoded (strings, integers, nulls and lists: the text orjson
        reads back as the same payload, which Avro transcodes in C)."""
        return Message(topic, layout.encode_json(topic, "key", _KEY, b'{"id":%b}' % self.id_json),
                       layout.encode_json(topic, "value", _VALUE, orjson.dumps(payload)), ())
