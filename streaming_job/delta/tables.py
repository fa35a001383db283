"""The lake's Delta tables as the land job reads and writes them: a local table's log read and committed
by the driver itself where it can (delta_log.TableLog, commit.LogCommit), any other table's through the
JVM's Delta (commit.DeltaCommit, Spark's writer); every write idempotent by the job's txnAppId and the
batch as txnVersion, so that a batch replayed after a crash skips the writes that already committed."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import orjson
from pyspark.sql import DataFrame, SparkSession

from ..decode.lake_types import quote
from ..lake.delta_log import CommitConflict, TableLog, UnreadableLog
from ..lake.files import LakeFiles
from .commit import Commit, DeltaCommit, LogCommit

log = logging.getLogger("binlake.land")
_STATS_PROPERTY = "delta.dataSkippingStatsColumns"
_STATS_COLUMNS = "spark.databricks.delta.properties.defaults.dataSkippingStatsColumns"  # its session default


class DeltaTables:
    def __init__(self, spark: SparkSession, app_id: str, files: LakeFiles | None = None) -> None:
        self.spark = spark
        # txnAppId (with the part of the batch being written: lake_format.LakeFormat.part), the calling thread's own
        self._app_id: ContextVar[str] = ContextVar(f"binlake-delta-app-id-{id(self)}", default=app_id)
        self.files = files  # the lake's files where the driver writes its tables' logs (None: the JVM does)
        # Writes that pass their options through the session's conf (txnAppId, statistics columns): one table
        # at a time, so that tables landing side by side never see another's
        self._session_conf = threading.RLock()
        self._committed: dict[tuple[str, str], tuple[int, int]] = {}  # (path, app id) -> (version, batch) we wrote
        self._logs: dict[str, TableLog] = {}  # local tables' logs as the driver read them
        self._table_defaults: dict[str, str] | None = None  # the session's Delta table defaults, for new tables

    @property
    def app_id(self) -> str:
        return self._app_id.get()

    @app_id.setter
    def app_id(self, value: str) -> None:
        self._app_id.set(value)

    def log(self, path: str) -> TableLog | None:
        """A table's log as the driver reads it, brought up to date (None: a lake only Spark reaches, or a
        table the driver cannot write itself, which the JVM's Delta then does)."""
        if self.files is None:
            return None
        table = self._logs.get(path)
        if table is None:
            table = self._logs[path] = TableLog(path, self.files)
        try:
            table.refresh()
        except UnreadableLog as exc:
            log.debug("%s: the JVM's Delta writes it (%s)", path, exc)
            return None
        return table if table.version < 0 or table.writable else None

    def add_columns(self, path: str, added: list[tuple[str, str]], nested: bool) -> bool:
        """Nullable columns added to a table whose log the driver writes, by a commit of its new schema (no
        Spark job, no JVM transaction: an ALTER through Spark costs seconds); ``nested``: to the change log's
        ``before`` and ``after`` structs. False where the driver cannot (the caller ALTERs through Spark): a
        lake only Spark reaches, a log the JVM writes, a type whose table feature Delta must enable."""
        table = self.log(path)
        if table is None or table.version < 0 or any(t == "timestamp_ntz" for _, t in added):
            return False
        jvm = self.spark._jvm
        assert jvm is not None  # a local session (classic Spark, not Spark Connect)
        struct = jvm.org.apache.spark.sql.types.StructType
        fields = orjson.loads(struct.fromDDL(", ".join(f"{quote(n)} {t}" for n, t in added)).json())["fields"]
        schema = orjson.loads(orjson.dumps(table.schema))  # a copy
        if nested:
            for top in schema["fields"]:
                if top["name"] in ("before", "after"):
                    top["type"]["fields"] += fields
        else:
            schema["fields"] += fields
        metadata = {**table.metadata, "schemaString": orjson.dumps(schema).decode()}
        columns = orjson.dumps([f"{p}{n}" for p in (("before.", "after.") if nested else ("",))
                                for n, _ in added]).decode()
        try:
            table.commit([{"metaData": metadata}], "ADD COLUMNS", {"columns": columns}, blind_append=False)
        except CommitConflict:  # another writer: the caller's ALTER through Spark settles it
            return False
        return True

    def enable_deletion_vectors(self, path: str) -> None:
        """Deletion vectors enabled on an existing table (land.deletion_vectors always): its protocol upgraded to
        the table features and ``delta.enableDeletionVectors`` set, by the JVM's Delta (once per table)."""
        log.info("%s: deletion vectors enabled (readers of the table need deletion vector support)", path)
        self.spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")

    def exists(self, path: str) -> bool:
        """Whether a Delta table is at ``path`` (asked of the JVM's Delta, with this session: the active one
        is per thread)."""
        from delta.tables import DeltaTable

        return DeltaTable.isDeltaTable(self.spark, path)

    def transaction(self, path: str) -> Commit:
        """The table's next commit: by the driver's own log writer where it can, else the JVM's Delta."""
        table = self.log(path)
        if table is None:
            return DeltaCommit(self.spark, path)
        if self._table_defaults is None:  # as Delta gives new tables, but type widening: only where needed
            prefix = "spark.databricks.delta.properties.defaults."
            self._table_defaults = {f"delta.{k[len(prefix):]}": v
                                    for k, v in self.spark.sparkContext.getConf().getAll() if k.startswith(prefix)
                                    and k != prefix + "enableTypeWidening"}
        return LogCommit(self.spark, table, self._table_defaults)

    def done(self, commit: Commit, path: str, batch_id: int) -> bool:
        """Whether the table has this batch. Asking Delta costs a Spark job per new table version (its
        transactions come from the log's state); when the version read is the one this job wrote last,
        the answer is known without it."""
        known = self._committed.get((path, self.app_id))
        if known is not None and known[0] == commit.version:
            return batch_id <= known[1]
        return commit.done(self.app_id, batch_id)

    def committed(self, path: str, version: int, batch_id: int) -> None:
        """This job wrote ``version`` of the table, with this batch (``done`` then needs no question)."""
        self._committed[(path, self.app_id)] = (version, batch_id)

    def append(self, df: DataFrame, path: str, batch_id: int, partition_by: str | None = None,
               stats: list[str] | None = None, idempotent: bool = True, merge_schema: bool = False,
               properties: dict[str, str] | None = None, max_records: int | None = None) -> None:
        """An idempotent append; ``stats``: the table is new, collect file statistics of these columns only
        (statistics of every column of wide row images cost a third of the write, and skip nothing);
        ``merge_schema``: columns of ``df`` the table lacks are added; ``properties``: a new table's;
        ``max_records``: rows per file at most."""
        writer = df.write.format("delta").mode("append")
        if max_records:
            writer = writer.option("maxRecordsPerFile", max_records)
        for name, value in (properties or {}).items():
            writer = writer.option(name, value)
        if merge_schema:
            writer = writer.option("mergeSchema", "true")
        if idempotent:
            writer = writer.option("txnAppId", self.app_id).option("txnVersion", batch_id)
        if partition_by:
            writer = writer.partitionBy(partition_by)
        if stats is None:
            writer.save(path)
            return
        conf = self.spark.conf
        with self._session_conf:
            conf.set(_STATS_COLUMNS, stats_columns(stats)[_STATS_PROPERTY])
            try:
                writer.save(path)
            finally:
                conf.unset(_STATS_COLUMNS)

    @contextmanager
    def batch_writes(self, batch_id: int) -> Iterator[None]:
        """The block's Delta writes (a MERGE, which takes no write options) carry the batch's txnAppId and
        txnVersion, through the session's conf."""
        conf = self.spark.conf
        with self._session_conf:
            conf.set("spark.databricks.delta.write.txnAppId", self.app_id)
            conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
            try:
                yield
            finally:
                conf.unset("spark.databricks.delta.write.txnAppId")
                conf.unset("spark.databricks.delta.write.txnVersion")


def stats_columns(columns: list[str]) -> dict[str, str]:
    """A new table's property: collect file statistics of these columns only."""
    return {_STATS_PROPERTY: ",".join(quote(c) for c in columns)}
