"""A Delta mirror's recorded key (batch/keys.py: the key of each table's mirror): read from its Delta log (by the
driver, or through Spark for a table the JVM's Delta writes), and recorded in a mirror that has none."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from ..batch.keys import KEY_PROPERTY, MirrorKeys, recorded_key
from ..decode.lake_types import quote
from ..lake.delta_log import TableLog


def record_key(spark: Any, path: str, key: list[str]) -> None:
    """Record a mirror's key in a table that has none yet (a mirror Spark's writer created, or an older one)."""
    value = orjson.dumps(key).decode().replace("\\", "\\\\").replace("'", "\\'")
    spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ('{KEY_PROPERTY}' = '{value}')")


def read_key(spark: Any, path: str, log: TableLog | None) -> tuple[bool, list[str] | None]:
    """Whether the mirror at ``path`` exists, and the key it recorded. ``log``: the table's log as the driver
    reads it (None: a table the JVM's Delta writes, asked through Spark)."""
    if log is not None:
        return log.version >= 0, recorded_key(log.configuration)
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return False, None
    detail = DeltaTable.forPath(spark, path).detail().first()
    assert detail is not None  # a Delta table's detail is one row
    properties = detail["properties"]
    return True, recorded_key(dict(properties or {}))


@dataclass
class DeltaKeys:
    """MirrorKeys' reading and recording of a Delta mirror's key."""

    spark: Any
    path: Callable[[str, str], str]  # (db, table) -> the mirror's path
    table_log: Callable[[str], TableLog | None]  # a local table's log, as the driver reads it

    def stored(self, db: str, table: str) -> tuple[bool, list[str] | None]:
        path = self.path(db, table)
        return read_key(self.spark, path, self.table_log(path))

    def record(self, db: str, table: str, key: list[str]) -> None:
        record_key(self.spark, self.path(db, table), key)

    def mirror_keys(self, configured: dict[str, list[str]]) -> MirrorKeys:
        """The mirrors' keys (land.keys: ``configured``), read and recorded here."""
        return MirrorKeys(configured, self.path, self.stored, self.record)
