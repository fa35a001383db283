"""A Delta mirror's schema changes (schema_alter.MirrorRewrite): a rewrite of every row into the new columns, or
columns added. Where the driver writes the table's log (a local lake, S3) it reads each data file with pyarrow,
writes its rows anew (schema_alter's transform: converted, renamed, dropped, added columns), and commits the new
files, the old ones' removal, the new schema and the action's marker in one commit, with the batch part's
SetTransaction; file by file (without the rows a file's deletion vector deletes), so a mirror of any size needs a
file's rows in memory at a time. A lake only Spark reaches: Spark reads the mirror and overwrites it (its schema
too), idempotent by txnVersion, then the properties.

Dropping a column rewrites the mirror rather than enabling Delta column mapping, which would drop it in the
metadata alone: column mapping raises a table's protocol (reader 2, writer 5: every writer must write its physical
column names, which binlake's own log writer does not), and a rewrite keeps every mirror readable by every Delta
reader (docs/LAND.md, "Schema changes": the measured cost)."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pyarrow as pa

from ..batch.default_values import default_values
from ..batch.key_stats import driver_key
from ..batch.mirror import conform
from ..batch.writer import Added, write_mirror_file, write_table_file
from ..decode.lake_types import quote
from ..lake.paths import join
from ..statements.schema_alter import Alters, MirrorRewrite, Transform
from ..statements.table_statements import Properties, TableStatements
from .commit import Removed
from .mirrors import META
from .statements import DeltaStatementTables, _configured, _protocol
from .vector_files import VectorFiles

log = logging.getLogger("binlake.land")


class DeltaMirrorRewrite(MirrorRewrite):
    def __init__(self, tables: DeltaStatementTables) -> None:
        self.tables = tables

    def rewrite_mirror(self, db: str, table: str, columns: list[tuple[str, str]], key: list[str],
                       transform: Transform, properties: Properties, batch_id: int) -> None:
        t = self.tables
        path = t.path(db, table)
        found = t._log(db, table)
        ddl = ", ".join(f"{quote(n)} {d}" for n, d in [*columns, *META])
        if found is None:
            self._rewrite_spark(path, ddl, transform, properties, batch_id)
            return
        lake = t.files
        assert lake is not None
        vectors = VectorFiles(lake)  # a file's rows without those its deletion vector deletes
        old = pa.schema([pa.field(n, _arrow(d)) for n, d in [*t.columns(db, table), *META]])
        types = dict(columns)
        adds, removes = [], []
        for name, add in found.files.items():
            live = vectors.live(lake.read_parquet(join(path, name)), path, add.get("deletionVector"))
            rows = transform(conform(live, old))
            removes.append(Removed.of(name, add))
            if len(rows):
                adds.append(_write(lake, path, rows, key[0] if key and driver_key(types.get(key[0], "")) else None))
        schema = t._schema_of(ddl)
        metadata = {**found.metadata, "schemaString": orjson.dumps(schema).decode(),
                    "configuration": _configured(found.configuration, properties)}
        commit = t.delta.transaction(path)
        version = commit.rewrite(adds, removes, t.delta.app_id, batch_id, metadata, _protocol(found.protocol, schema))
        t.delta.committed(path, version, batch_id)

    def _rewrite_spark(self, path: str, ddl: str, transform: Transform, properties: Properties,
                       batch_id: int) -> None:
        t = self.tables

        def rewrite(batches: Any) -> Any:
            for batch in batches:
                yield from transform(pa.Table.from_batches([batch])).to_batches()

        frame = t.spark.read.format("delta").load(path).mapInArrow(rewrite, ddl)
        (frame.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
         .option("txnAppId", t.delta.app_id).option("txnVersion", batch_id).save(path))
        t._alter_properties(path, properties)

    def add_mirror_columns(self, db: str, table: str, added: list[tuple[str, str]], properties: Properties,
                           batch_id: int) -> None:
        t = self.tables
        path = t.path(db, table)
        found = t._log(db, table)
        if found is None:
            if added:
                if any(d == "timestamp_ntz" for _, d in added):
                    t.spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES "
                                "('delta.feature.timestampNtz' = 'supported')")
                specs = ", ".join(f"{quote(n)} {d}" for n, d in added)
                t.spark.sql(f"ALTER TABLE delta.{quote(path)} ADD COLUMNS ({specs})")
            t._alter_properties(path, properties)
            return
        schema = orjson.loads(orjson.dumps(found.schema))
        if added:
            fields = t._schema_of(", ".join(f"{quote(n)} {d}" for n, d in added))["fields"]
            at = next((i for i, f in enumerate(schema["fields"]) if f["name"].startswith("_binlake_")),
                      len(schema["fields"]))
            schema["fields"][at:at] = fields  # before binlake's own columns
        metadata = {**found.metadata, "schemaString": orjson.dumps(schema).decode(),
                    "configuration": _configured(found.configuration, properties)}
        commit = t.delta.transaction(path)
        version = commit.rewrite([], [], t.delta.app_id, batch_id, metadata, _protocol(found.protocol, schema),
                                 "ADD COLUMNS" if added else "SET TBLPROPERTIES")
        t.delta.committed(path, version, batch_id)


def _arrow(dtype: str) -> pa.DataType:
    from ..decode.lake_types import arrow_type

    return arrow_type(dtype)


def _write(lake: Any, path: str, rows: pa.Table, key: str | None) -> Added:
    """A mirror file of ``rows``: with its first key's range (mirror_driver reads it) where ``key`` is one."""
    if key is not None:
        return write_mirror_file(lake, path, rows, key)
    return write_table_file(lake, path, rows)


def delta_alters(tables: DeltaStatementTables, statements: TableStatements) -> Alters:
    """ALTER statements on a Delta lake (schema_alter.py)."""
    return Alters(statements, DeltaMirrorRewrite(tables),
                  lambda fills, types: default_values(tables.spark, fills, types), [n for n, _ in META])
