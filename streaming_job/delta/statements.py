"""Table statements (table_statements.py) on a Delta lake: each write one commit of the table's log with the batch
part's SetTransaction (txnAppId with the part: lake_format.LakeFormat.part) and the action's marker in the table's
properties. The driver commits the log itself where it writes the table's log (a local lake, S3: delta_log.py),
else the JVM's Delta does (commit.DeltaCommit); a statement row's file is written with pyarrow, a renamed mirror's
files copied (LakeFiles.copy: a hard link on local disk, a server-side copy on S3). A lake only Spark reaches
(no LakeFiles) gets Spark's writer and SQL instead."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any
from urllib.parse import unquote

import orjson
import pyarrow as pa
from pyspark.sql import SparkSession

from ..batch.keys import key_property
from ..batch.writer import PARTITION_COLUMN, Added, write_change_log_file
from ..decode.lake_types import quote
from ..decode.typed import typed_ddl
from ..lake.delta_log import TableLog, simple_type, table_protocol
from ..lake.files import LakeFiles
from ..lake.generations import parse_change_log
from ..lake.paths import join, scheme
from ..statements.statements import STATEMENT_COLUMNS, Name, statement_column_ddl
from ..statements.table_statements import Properties, StatementTables
from .commit import Removed
from .evolution import DeltaEvolution
from .mirrors import META, key_stats
from .tables import DeltaTables, stats_columns

log = logging.getLogger("binlake.land")
_TS = pa.timestamp("us", tz="UTC")
_CHANGE_LOG_STATS = ["commit_ts", "kafka_offset"]


class DeltaStatementTables(StatementTables):
    def __init__(self, spark: SparkSession, lake: str, delta: DeltaTables, evolution: DeltaEvolution,
                 files: LakeFiles | None) -> None:
        self.spark = spark
        self.lake = lake
        self.delta = delta
        self.evolution = evolution  # the tables' ALTERs
        self.files = files

    def path(self, db: str, name: str) -> str:
        return join(self.lake, db, name)

    def _log(self, db: str, name: str) -> TableLog | None:
        """The table's log as the driver reads and writes it (None: the JVM's Delta or Spark writes it)."""
        return self.delta.log(self.path(db, name)) if self.files is not None else None

    def properties(self, db: str, name: str) -> dict[str, str] | None:
        table = self._log(db, name)
        if table is not None:
            return table.configuration if table.version >= 0 else None
        path = self.path(db, name)
        if not self.delta.exists(path):
            return None
        from delta.tables import DeltaTable

        detail = DeltaTable.forPath(self.spark, path).detail().first()
        return dict((detail["properties"] if detail is not None else None) or {})

    def columns(self, db: str, name: str) -> list[tuple[str, str]]:
        fields = self._schema(db, name)
        if fields is None:
            return []
        if parse_change_log(name) is not None:  # a change log: its row images' columns
            after: dict[str, Any] = next((f["type"] for f in fields if f["name"] == "after"), {"fields": []})
            return [(f["name"], simple_type(f["type"])) for f in after["fields"]]
        return [(f["name"], simple_type(f["type"])) for f in fields if not f["name"].startswith("_binlake_")]

    def _schema(self, db: str, name: str) -> list[dict[str, Any]] | None:
        table = self._log(db, name)
        if table is not None:
            return list(table.schema["fields"]) if table.version >= 0 else None
        path = self.path(db, name)
        if not self.delta.exists(path):
            return None
        return list(orjson.loads(self.spark.read.format("delta").load(path).schema.json())["fields"])

    # --- the writes

    def change_row(self, db: str, name: str, columns: list[tuple[str, str]], row: pa.Table | None,
                   properties: Properties, batch_id: int) -> None:
        path = self.path(db, name)
        lake = self.columns(db, name)
        exists = self.properties(db, name) is not None
        if exists and lake != columns:  # columns added, types widened: a commit of its own where needed
            self.evolution.add_columns(path, lake, columns, nested=True)
        table = self._log(db, name)
        if table is None:
            self._change_row_spark(path, columns, row, properties, batch_id, exists)
            return
        commit = self.delta.transaction(path)
        metadata = protocol = None
        if table.version < 0:
            ddl = f"{typed_ddl(columns)}, {PARTITION_COLUMN} date, ingest_ts timestamp, {statement_column_ddl()}"
            commit.create(ddl, [PARTITION_COLUMN], {**stats_columns(_CHANGE_LOG_STATS), **_set(properties)})
        else:
            schema = orjson.loads(orjson.dumps(table.schema))
            have = {f["name"] for f in schema["fields"]}
            schema["fields"] += [{"name": n, "type": "string", "nullable": True, "metadata": {}}
                                 for n in STATEMENT_COLUMNS if n not in have]
            metadata = {**table.metadata, "schemaString": orjson.dumps(schema).decode(),
                        "configuration": _configured(table.configuration, properties)}
        adds: list[Added] = []
        if row is not None:
            assert self.files is not None
            rows = row.append_column("ingest_ts", pa.array([time.time_ns() // 1000], _TS))
            date = time.strftime("%Y-%m-%d", time.gmtime(row.column("commit_ts")[0].value / 1e6))
            adds.append(write_change_log_file(self.files, path, date, rows))
        version = commit.rewrite(adds, [], self.delta.app_id, batch_id, metadata,
                                 protocol)
        self.delta.committed(path, version, batch_id)

    def _change_row_spark(self, path: str, columns: list[tuple[str, str]], row: pa.Table | None,
                          properties: Properties, batch_id: int, exists: bool) -> None:
        """A lake only Spark reaches: the row by Spark's writer (idempotent by txnVersion), then the properties."""
        from pyspark.sql import functions as F

        if row is not None or not exists:
            ddl = f"{typed_ddl(columns)}, {statement_column_ddl()}"
            frame = (self.spark.createDataFrame(row if row is not None else [], None if row is not None else ddl)
                     .withColumn(PARTITION_COLUMN, F.to_date("commit_ts"))
                     .withColumn("ingest_ts", F.current_timestamp()))
            self.delta.append(frame, path, batch_id, partition_by=None if exists else PARTITION_COLUMN,
                              stats=None if exists else _CHANGE_LOG_STATS, merge_schema=exists)
        self._alter_properties(path, properties)

    def empty_mirror(self, db: str, table: str, properties: Properties, batch_id: int) -> None:
        path = self.path(db, table)
        found = self._log(db, table)
        if found is None:  # the JVM's Delta: its DELETE (removes whole files), then the properties
            from delta.tables import DeltaTable

            if not self.delta.exists(path):
                return
            with self.delta.batch_writes(batch_id):
                DeltaTable.forPath(self.spark, path).delete()
            self._alter_properties(path, properties)
            return
        if found.version < 0:
            return
        commit = self.delta.transaction(path)
        metadata = {**found.metadata, "configuration": _configured(found.configuration, properties)}
        removes = [Removed.of(p, a) for p, a in found.files.items()]
        self.delta.committed(path, commit.rewrite([], removes, self.delta.app_id, batch_id, metadata), batch_id)

    def replace_mirror(self, db: str, table: str, columns: list[tuple[str, str]], key: list[str],
                       properties: Properties, batch_id: int) -> None:
        path = self.path(db, table)
        ddl = ", ".join(f"{quote(n)} {t}" for n, t in [*columns, *META])
        own = {**stats_columns(key_stats(columns, key)), **key_property(key)}
        found = self._log(db, table)
        if found is None:  # Spark's writer: an overwrite of the schema with no rows
            (self.spark.createDataFrame([], ddl).write.format("delta").mode("overwrite")
             .option("overwriteSchema", "true").option("txnAppId", self.delta.app_id).option("txnVersion", batch_id)
             .save(path))
            self._alter_properties(path, {**own, **properties})
            return
        commit = self.delta.transaction(path)
        if found.version < 0:
            commit.create(ddl, [], {**own, **_set(properties)})
            version = commit.rewrite([], [], self.delta.app_id, batch_id)
        else:
            schema = self._schema_of(ddl)
            configuration = {k: v for k, v in found.configuration.items() if not k.startswith("binlake.defaults")}
            metadata = {**found.metadata, "schemaString": orjson.dumps(schema).decode(),
                        "configuration": _configured({**configuration, **own}, properties)}
            removes = [Removed.of(p, a) for p, a in found.files.items()]
            version = commit.rewrite([], removes, self.delta.app_id, batch_id, metadata,
                                     _protocol(found.protocol, schema))
        self.delta.committed(path, version, batch_id)

    def copy_mirror(self, source: Name, target: Name, properties: Properties, batch_id: int) -> None:
        src_path, dst_path = self.path(*source), self.path(*target)
        src, dst = self._log(*source), self._log(*target)
        if src is None or dst is None or src.version < 0 or any(a.get("deletionVector") for a in src.files.values()):
            self._copy_spark(src_path, dst_path, properties, batch_id)
            return
        assert self.files is not None
        adds: list[Added] = []
        for name, add in src.files.items():
            if scheme(name) or name.startswith("/"):  # an absolute path (a shallow clone's): its own name here
                relative, origin = unquote(name.rsplit("/", 1)[-1]), (name if scheme(name) else unquote(name))
            else:
                relative, origin = name, join(src_path, unquote(name))
            self.files.copy(origin, join(dst_path, unquote(relative)))
            adds.append(Added(relative, dict(add.get("partitionValues") or {}), int(add["size"]),
                              orjson.loads(add["stats"]) if add.get("stats") else {}))
        commit = self.delta.transaction(dst_path)
        configuration = _configured(src.configuration, properties)
        if dst.version < 0:  # a new table: the source's own schema (its type changes' metadata and all), protocol
            metadata = {**src.metadata, "id": str(uuid.uuid4()), "createdTime": int(time.time() * 1000),
                        "configuration": configuration}
            version = commit.rewrite(adds, [], self.delta.app_id, batch_id, metadata, dict(src.protocol))
        else:
            metadata = {**dst.metadata, "schemaString": src.metadata["schemaString"],
                        "partitionColumns": src.metadata.get("partitionColumns") or [], "configuration": configuration}
            removes = [Removed.of(p, a) for p, a in dst.files.items()]
            version = commit.rewrite(adds, removes, self.delta.app_id, batch_id, metadata,
                                     _merged_protocol(dst.protocol, src.protocol))
        self.delta.committed(dst_path, version, batch_id)

    def mirror_rows(self, db: str, table: str) -> int:
        found = self._log(db, table)
        if found is not None:
            return found.rows() if found.version >= 0 else 0
        path = self.path(db, table)
        return int(self.spark.read.format("delta").load(path).count()) if self.delta.exists(path) else 0

    def copy_rows(self, source: Name, target: Name) -> int:
        """A mirror the driver copies is its files (hard links, server-side copies): none written anew; Spark's copy
        (a lake only Spark reaches, deletion vectors) writes every row."""
        src, dst = self._log(*source), self._log(*target)
        if src is None or dst is None or src.version < 0 or any(a.get("deletionVector") for a in src.files.values()):
            return self.mirror_rows(*source)
        return 0

    def _copy_spark(self, source: str, target: str, properties: Properties, batch_id: int) -> None:
        """The mirror's rows read and written by Spark (a lake only Spark reaches, deletion vectors): an overwrite
        of the target, its schema and rows the source's, idempotent by txnVersion; then its properties."""
        from delta.tables import DeltaTable

        (self.spark.read.format("delta").load(source).write.format("delta").mode("overwrite")
         .option("overwriteSchema", "true").option("txnAppId", self.delta.app_id).option("txnVersion", batch_id)
         .save(target))
        detail = DeltaTable.forPath(self.spark, source).detail().first()
        copied = {k: v for k, v in dict((detail["properties"] if detail is not None else None) or {}).items()
                  if k.startswith("binlake.") or k == "delta.dataSkippingStatsColumns"}
        self._alter_properties(target, {**copied, **properties})

    def _alter_properties(self, path: str, properties: Properties) -> None:
        set_ = {k: v for k, v in properties.items() if v is not None}
        unset = [k for k, v in properties.items() if v is None]
        if set_:
            spec = ", ".join(f"'{k}' = '{_escaped(v)}'" for k, v in set_.items())
            self.spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ({spec})")
        if unset:
            names = ", ".join(f"'{k}'" for k in unset)
            self.spark.sql(f"ALTER TABLE delta.{quote(path)} UNSET TBLPROPERTIES IF EXISTS ({names})")

    def _schema_of(self, ddl: str) -> dict[str, Any]:
        jvm = self.spark._jvm
        assert jvm is not None
        return dict(orjson.loads(jvm.org.apache.spark.sql.types.StructType.fromDDL(ddl).json()))


def _set(properties: Properties) -> dict[str, str]:
    return {k: v for k, v in properties.items() if v is not None}


def _configured(configuration: dict[str, str], properties: Properties) -> dict[str, str]:
    """A table's configuration with ``properties`` set (a None: removed)."""
    out = dict(configuration)
    for k, v in properties.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def _protocol(current: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any] | None:
    """The protocol a table needs for a new ``schema`` (None: its own will do)."""
    return _merged_protocol(current, table_protocol(schema))


def _merged_protocol(current: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any] | None:
    if (wanted.get("minReaderVersion", 1) <= current.get("minReaderVersion", 1)
            and wanted.get("minWriterVersion", 2) <= current.get("minWriterVersion", 2)
            and set(wanted.get("readerFeatures") or ()) <= set(current.get("readerFeatures") or ())):
        return None
    merged = {"minReaderVersion": max(wanted.get("minReaderVersion", 1), current.get("minReaderVersion", 1)),
              "minWriterVersion": max(wanted.get("minWriterVersion", 2), current.get("minWriterVersion", 2))}
    if merged["minReaderVersion"] >= 3:
        merged["readerFeatures"] = sorted(set(wanted.get("readerFeatures") or ()) |
                                          set(current.get("readerFeatures") or ()))
    if merged["minWriterVersion"] >= 7:
        merged["writerFeatures"] = sorted(set(wanted.get("writerFeatures") or ()) |
                                          set(current.get("writerFeatures") or ()))
    return merged


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")

