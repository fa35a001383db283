"""The options of the Debezium formats (``kafka.format: debezium-json`` and ``debezium-avro``), as the
connector's properties name them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .columns import Modes
from .layouts import Strategy


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
