"""The transaction topic ``<prefix>.transaction`` (``provide_transaction_metadata``): a BEGIN before a binlog
transaction's change events and an END after them with its event counts, as Debezium publishes them."""

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
    """A binlog transaction's change events so far: their counts, in all and per table."""

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


class TransactionTopic:
    """The BEGIN and END messages of transactions, serialized by ``layout``."""

    def __init__(self, layout: Layout, topic: str) -> None:
        self.layout = layout
        self.topic = topic

    def begin(self, tx: Transaction) -> Message:
        return self._message(tx, {"status": "BEGIN", "id": tx.id, "event_count": None, "data_collections": None,
                                  "ts_ms": tx.ts_ms})

    def end(self, tx: Transaction) -> Message:
        return self._message(tx, {"status": "END", "id": tx.id, "event_count": tx.total, "data_collections": [
            {"data_collection": name, "event_count": n} for name, n in tx.per_table.items()], "ts_ms": tx.ts_ms})

    def _message(self, tx: Transaction, payload: dict[str, Any]) -> Message:
        """A transaction topic's message, its payloads' JSON encoded (strings, integers, nulls and lists: the
        text orjson reads back as the same payload, which Avro transcodes in C)."""
        topic = self.topic
        return Message(topic, self.layout.encode_json(topic, "key", _KEY, b'{"id":%b}' % tx.id_json),
                       self.layout.encode_json(topic, "value", _VALUE, orjson.dumps(payload)), ())
