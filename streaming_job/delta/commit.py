"""Delta's commit protocol: a batch's commit on one table, whoever writes the log (DeltaCommit: the JVM's
Delta, delta-spark's OptimisticTransaction over py4j; LogCommit: the driver's own reading and writing of the log,
delta_log.TableLog), the log actions of a commit (file_actions) and a table's checkpoint. The files it commits
are batch/writer.py's (pyarrow's Parquet, format-neutral).

One commit per table and batch with the files and the batch's SetTransaction (txnAppId, txnVersion), so a
replayed batch finds its version and writes nothing twice. Files of a crashed attempt were never committed:
they are invisible to readers (VACUUM removes them).
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import pyarrow as pa

from ..batch.writer import PARTITION_COLUMN, Added, change_log_stats, write_mirror_file
from ..lake.delta_log import CommitConflict, TableLog
from ..lake.files import LakeFiles
from .deletion_vectors import ENABLE_PROPERTY
from .deletion_vectors import TABLE_FEATURE as DELETION_VECTORS

_LOCAL = LakeFiles.on_disk()  # a local lake's files: named, not inferred from paths
# Files rewritten without a change of the table's rows (compaction): adds (relative path, partition
# values, size, statistics) and removes (relative path, size, partition values)
Moved = tuple[Sequence[Added], Sequence[tuple[str, int, dict[str, str]]]]


class LiveFile(NamedTuple):
    """A data file of the version a commit read: its path as the log names it, size, statistics (JSON), deletion
    vector (the log's descriptor; None: every row of the file is live), partition values, modification time."""

    path: str
    size: int
    stats: str | None
    deletion_vector: dict[str, Any] | None
    partition_values: dict[str, str]
    modification_time: int

    def removed(self) -> Removed:
        return Removed(self.path, self.size, self.deletion_vector)

    def rows(self) -> int:
        """Its rows (deleted ones too) by its statistics; a file without them counts as too many to rewrite."""
        found = orjson.loads(self.stats).get("numRecords") if self.stats else None
        return found if isinstance(found, int) else 1 << 62


class Removed(NamedTuple):
    """An unpartitioned data file a commit removes: its path relative to the table, its size and deletion vector
    (a file is live by its path and deletion vector together: a remove names both)."""

    path: str
    size: int
    deletion_vector: dict[str, Any] | None = None

    @classmethod
    def of(cls, path: str, add: dict[str, Any]) -> Removed:
        """The remove of a live file, from its add action."""
        return cls(path, int(add["size"]), add.get("deletionVector") or None)


class Vectored(NamedTuple):
    """A live file given a new deletion vector (rows of it deleted without a rewrite): removed with its old
    vector and added with ``deletion_vector`` in one commit."""

    file: LiveFile
    deletion_vector: dict[str, Any]


class Commit:
    """A batch's commit on one table, whoever writes the log (DeltaCommit: the JVM's Delta; LogCommit: the
    driver itself): whether the batch is there already, the table's files, and the commit of new ones."""

    def create(self, ddl: str, partition_by: list[str], configuration: dict[str, str]) -> None:
        raise NotImplementedError

    def done(self, app_id: str, batch_id: int) -> bool:
        raise NotImplementedError

    @property
    def version(self) -> int:
        raise NotImplementedError

    def files(self) -> list[LiveFile]:
        raise NotImplementedError

    def deletion_vectors(self) -> bool:
        """Whether the table takes new deletion vectors: the feature in its protocol and
        ``delta.enableDeletionVectors`` set (PROTOCOL.md: writers write new ones only then)."""
        raise NotImplementedError

    def append(self, adds: list[Added], app_id: str, batch_id: int, partition_by: list[str],
               removes: Sequence[Removed] = (), moved: Moved = ((), ()), vectors: Sequence[Vectored] = ()) -> int:
        raise NotImplementedError

    def rewrite(self, adds: Sequence[Added], removes: Sequence[Removed],
                app_id: str, batch_id: int, metadata: dict[str, Any] | None = None,
                protocol: dict[str, Any] | None = None, operation: str = "UPDATE") -> int:
        """A table statement's commit (table_statements.py): ``adds`` and ``removes`` (unpartitioned files)
        with the batch's SetTransaction, and where given the table's new ``metadata`` (its schema, its
        properties) and ``protocol``, in one commit, named ``operation`` in the table's history where the writer
        names it (the driver's). Returns the version written."""
        raise NotImplementedError

    def commit(self, files: list[Any], app_id: str, batch_id: int, moved: Moved = ((), ())) -> int:
        """Add change-log ``files`` (FILE_COLUMNS tuples) and the batch's SetTransaction in one commit;
        ``moved``: change-log files compacted in the same commit (compaction.ChangeLogCompaction)."""
        adds = [Added(name, {PARTITION_COLUMN: partition}, size, change_log_stats(rows, low, high))
                for name, partition, size, rows, low, high in files]
        return self.append(adds, app_id, batch_id, [PARTITION_COLUMN], moved=moved)


class DeltaCommit(Commit):
    """One Delta transaction on a table, opened before the batch's files are written: its txnVersion
    says whether this batch already committed there. Actions travel as Delta's own JSON log entries."""

    def __init__(self, spark: Any, path: str) -> None:
        self.spark = spark
        self.jvm = spark._jvm
        self.delta = self.jvm.org.apache.spark.sql.delta
        self.txn = self.delta.DeltaLog.forTable(spark._jsparkSession, path).startTransaction()

    def create(self, ddl: str, partition_by: list[str], configuration: dict[str, str]) -> None:
        """Make this transaction's commit create the table, which has no version yet: its schema (Spark
        DDL), partitioning and properties. Delta adds the session's table defaults (the checkpoint
        interval) and the lowest protocol the schema needs (reader 1, writer 2; reader 3, writer 7 with the
        timestampNtz feature where a column is timestamp_ntz). Cheaper than Spark's writer of
        an empty DataFrame (seconds in a cold JVM), and the table's first files come in the same commit."""
        if self.version >= 0:
            raise ValueError("the table exists")
        schema = self.jvm.org.apache.spark.sql.types.StructType.fromDDL(ddl).json()
        metadata = {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                                 "schemaString": schema, "partitionColumns": partition_by,
                                 "configuration": configuration, "createdTime": int(time.time() * 1000)}}
        self.txn.updateMetadataForNewTable(self.delta.actions.Action.fromJson(orjson.dumps(metadata).decode()))

    def done(self, app_id: str, batch_id: int) -> bool:
        if self.version < 0:  # no table yet, so no transaction either
            return False
        return bool(self.txn.txnVersion(app_id) >= batch_id)

    @property
    def version(self) -> int:
        """The table version this transaction read."""
        return int(self.txn.readVersion())

    def deletion_vectors(self) -> bool:
        if self.version < 0:
            return False
        snapshot = self.txn.snapshot()  # (actions' JSON: {"protocol": ...}, {"metaData": ...})
        protocol = orjson.loads(snapshot.protocol().json())["protocol"]
        metadata = orjson.loads(snapshot.metadata().json())["metaData"]
        return vectors_enabled(protocol, dict(metadata.get("configuration") or {}))

    def files(self) -> list[LiveFile]:
        """Every file of the version read."""
        from pyspark.sql import DataFrame

        if self.version < 0:
            return []
        found = DataFrame(self.txn.snapshot().allFiles().toDF(), self.spark).selectExpr(
            "path", "size", "stats", "to_json(deletionVector) AS dv", "partitionValues", "modificationTime")
        return [LiveFile(r.path, r.size, r.stats, orjson.loads(r.dv) if r.dv else None, dict(r.partitionValues or {}),
                         r.modificationTime) for r in found.collect()]

    def append(self, adds: list[Added], app_id: str, batch_id: int, partition_by: list[str],
               removes: Sequence[Removed] = (), moved: Moved = ((), ()), vectors: Sequence[Vectored] = ()) -> int:
        """``adds`` (relative path, partition values, size, statistics), ``removes`` (unpartitioned files),
        ``vectors`` (files given new deletion vectors) and the batch's SetTransaction in one commit: a blind
        append, or with removes or vectors a rewrite of those files. ``moved``: files rewritten without a change
        of the table's rows (compaction: adds like ``adds``, removes with their partition values), marked as
        Delta's OPTIMIZE marks them (``dataChange`` false), so that a stream reading the table skips them
        instead of seeing their rows twice. Returns the table version written."""
        jvm = self.jvm
        utils = jvm.org.apache.spark.api.python.PythonUtils
        none = jvm.scala.Option.empty()
        entries = file_actions(adds, app_id, batch_id, removes, moved, vectors)
        actions = [self.delta.actions.Action.fromJson(orjson.dumps(e).decode()) for e in entries]
        if removes or moved[1] or vectors:
            self.txn.readWholeTable()  # a concurrent rewrite of the same files is a conflict
            operation = getattr(self.delta, "DeltaOperations$Update")(none)
        else:
            operation = getattr(self.delta, "DeltaOperations$Write")(
                jvm.org.apache.spark.sql.SaveMode.Append,
                jvm.scala.Option.apply(utils.toSeq(partition_by)) if partition_by else none, none, none)
        return int(self.txn.commit(utils.toSeq(actions), operation))


    def rewrite(self, adds: Sequence[Added], removes: Sequence[Removed],
                app_id: str, batch_id: int, metadata: dict[str, Any] | None = None,
                protocol: dict[str, Any] | None = None, operation: str = "UPDATE") -> int:
        jvm = self.jvm
        action = self.delta.actions.Action
        if protocol is not None:
            self.txn.updateProtocol(action.fromJson(orjson.dumps({"protocol": protocol}).decode()))
        if metadata is not None:
            self.txn.updateMetadata(action.fromJson(orjson.dumps({"metaData": metadata}).decode()))
        if removes:
            self.txn.readWholeTable()
        actions = [action.fromJson(orjson.dumps(e).decode()) for e in file_actions(adds, app_id, batch_id, removes)]
        operation = getattr(self.delta, "DeltaOperations$Update")(jvm.scala.Option.empty())
        return int(self.txn.commit(jvm.org.apache.spark.api.python.PythonUtils.toSeq(actions), operation))


def vectors_enabled(protocol: dict[str, Any], configuration: dict[str, str]) -> bool:
    """Whether a table with this protocol and these properties takes new deletion vectors."""
    return DELETION_VECTORS in (protocol.get("writerFeatures") or ()) and configuration.get(ENABLE_PROPERTY) == "true"


def file_actions(adds: Sequence[Added], app_id: str, batch_id: int, removes: Sequence[Removed] = (),
                 moved: Moved = ((), ()), vectors: Sequence[Vectored] = ()) -> list[dict[str, Any]]:
    """The Delta log actions of a batch's commit: its files added (and ``removes`` of a rewrite, ``moved``
    of a compaction: dataChange false, ``vectors``: files given new deletion vectors) and its SetTransaction."""
    now_ms = int(time.time() * 1000)
    moved_adds, moved_removes = moved
    entries: list[dict[str, Any]] = [
        {"add": {"path": name, "partitionValues": values, "size": size, "modificationTime": now_ms,
                 "dataChange": change, "stats": orjson.dumps(stats).decode()}}
        for change, group in ((True, adds), (False, moved_adds)) for name, values, size, stats in group]
    entries += [{"remove": {"path": name, "deletionTimestamp": now_ms, "dataChange": True,
                            "extendedFileMetadata": True, "partitionValues": {}, "size": size,
                            **({"deletionVector": vector} if vector else {})}}
                for name, size, vector in removes]
    entries += [{"remove": {"path": name, "deletionTimestamp": now_ms, "dataChange": False,
                            "extendedFileMetadata": True, "partitionValues": values, "size": size}}
                for name, size, values in moved_removes]
    for file, vector in vectors:
        # the file's statistics stay (numRecords counts the rows in the file, deleted or not), no longer tight
        stats = orjson.dumps({**orjson.loads(file.stats), "tightBounds": False}).decode() if file.stats else None
        entries.append({"add": {"path": file.path, "partitionValues": file.partition_values, "size": file.size,
                                "modificationTime": file.modification_time, "dataChange": True,
                                **({"stats": stats} if stats else {}), "deletionVector": vector}})
        entries.append({"remove": {"path": file.path, "deletionTimestamp": now_ms, "dataChange": True,
                                   "extendedFileMetadata": True, "partitionValues": file.partition_values,
                                   "size": file.size,
                                   **({"deletionVector": file.deletion_vector} if file.deletion_vector else {})}})
    entries.append({"txn": {"appId": app_id, "version": batch_id, "lastUpdated": now_ms}})
    return entries


def compaction_actions(adds: Sequence[Added], removes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The log actions of a compaction (delta/tidy.py): the files it wrote and the live files it replaces (their add
    actions, deletion vectors too), the same rows (``dataChange`` false), no SetTransaction."""
    now_ms = int(time.time() * 1000)
    entries: list[dict[str, Any]] = [
        {"add": {"path": name, "partitionValues": values, "size": size, "modificationTime": now_ms,
                 "dataChange": False, "stats": orjson.dumps(stats).decode()}} for name, values, size, stats in adds]
    entries += [{"remove": {"path": add["path"], "deletionTimestamp": now_ms, "dataChange": False,
                            "extendedFileMetadata": True, "partitionValues": add.get("partitionValues") or {},
                            "size": int(add["size"]),
                            **({"deletionVector": add["deletionVector"]} if add.get("deletionVector") else {})}}
                for add in removes]
    return entries


class LogCommit(Commit):
    """DeltaCommit's interface over the driver's own reading and writing of the log (delta_log.TableLog):
    no JVM work but the schema of a new table. ``log`` is the table's state, brought up to date here."""

    def __init__(self, spark: Any, log: TableLog, table_defaults: dict[str, str]) -> None:
        self.spark = spark
        self.log = log
        self.table_defaults = table_defaults
        self._create: list[dict[str, Any]] = []

    def create(self, ddl: str, partition_by: list[str], configuration: dict[str, str]) -> None:
        """As DeltaCommit.create: the session's table defaults (``table_defaults``) and ``configuration``."""
        schema = orjson.loads(self.spark._jvm.org.apache.spark.sql.types.StructType.fromDDL(ddl).json())
        self._create = self.log.create_actions(schema, partition_by, {**self.table_defaults, **configuration})

    def done(self, app_id: str, batch_id: int) -> bool:
        return self.log.txn_version(app_id) >= batch_id

    @property
    def version(self) -> int:
        return self.log.version

    def deletion_vectors(self) -> bool:
        return vectors_enabled(self.log.protocol, self.log.configuration)

    def files(self) -> list[LiveFile]:
        return [LiveFile(a["path"], int(a["size"]), a.get("stats"), a.get("deletionVector") or None,
                         dict(a.get("partitionValues") or {}), int(a.get("modificationTime") or 0))
                for a in self.log.files.values()]

    def append(self, adds: list[Added], app_id: str, batch_id: int, partition_by: list[str],
               removes: Sequence[Removed] = (), moved: Moved = ((), ()), vectors: Sequence[Vectored] = ()) -> int:
        """As DeltaCommit.append. A blind append that finds its version taken (another writer's commit in
        between) is made again on top of it, unless that commit changed the table's schema or protocol (the
        files were written for the old ones); a rewrite raises delta_log.CommitConflict."""
        actions = [*self._create, *file_actions(adds, app_id, batch_id, removes, moved, vectors)]
        rewrite = bool(removes or moved[1] or vectors)
        operation, parameters = ("UPDATE", {}) if rewrite else (
            "WRITE", {"mode": "Append", "partitionBy": orjson.dumps(partition_by).decode()})
        while True:
            try:
                version = self.log.commit(actions, operation, parameters, blind_append=not rewrite)
                break
            except CommitConflict:
                if rewrite or self._create:
                    raise
                read = (self.log.metadata, self.log.protocol)
                self.log.refresh()
                if self.done(app_id, batch_id):
                    return self.log.version
                if (self.log.metadata, self.log.protocol) != read:
                    raise CommitConflict(f"Concurrent commit: another writer changed the metadata or protocol of "
                                         f"{self.log.path} (now version {self.log.version}) while batch "
                                         f"{batch_id} was committed") from None
        self._create = []
        interval = int(self.log.configuration.get("delta.checkpointInterval", "10"))
        if version and version % interval == 0:
            checkpoint(self.log.path, self.log.lake)
        return version

    def rewrite(self, adds: Sequence[Added], removes: Sequence[Removed],
                app_id: str, batch_id: int, metadata: dict[str, Any] | None = None,
                protocol: dict[str, Any] | None = None, operation: str = "UPDATE") -> int:
        actions = list(self._create) if self._create else [
            *([{"protocol": protocol}] if protocol is not None else []),
            *([{"metaData": metadata}] if metadata is not None else [])]
        actions += file_actions(adds, app_id, batch_id, removes)
        version = self.log.commit(actions, operation if removes or metadata else "WRITE", {}, blind_append=False)
        self._create = []
        return version


def checkpoint(path: str, lake: LakeFiles | None = None) -> None:
    """A checkpoint of the table's state (delta-rs writes it): readers, and this job after a restart, read
    it instead of every commit since the last. Only an optimization: a failure is logged."""
    import logging

    from deltalake import DeltaTable

    try:
        lake = lake or _LOCAL
        table = DeltaTable(lake.uri(path), storage_options=lake.storage_options() or None)
        table.create_checkpoint()
        table.cleanup_metadata()  # commits older than delta.logRetentionDuration (30 days), as the JVM's Delta does
    except Exception as exc:
        logging.getLogger("binlake.land").warning("%s: no checkpoint written (%s: %s); the next one is tried at the "
                                                  "next interval", path, type(exc).__name__, exc)


def warm_up_commits(spark: Any) -> None:
    """Delta's commit path loaded in the JVM (land/job.py's warm_up), on a scratch table: created, appended to, its
    files and transactions read, checkpointed."""
    with tempfile.TemporaryDirectory(prefix="binlake-warm-up-") as scratch:
        path = os.path.join(scratch, "table")  # the driver's own disk: a URI, or a cluster's default
        uri = Path(path).as_uri()  # file system (HDFS, S3) would take the path for one of its own
        commit = DeltaCommit(spark, uri)
        commit.create("id bigint", [], {})
        rows = pa.table({"id": pa.array([1], pa.int64())})
        commit.append([write_mirror_file(LakeFiles.on_disk(), path, rows, "id")],
                      "binlake-warm-up", 0, [])
        again = DeltaCommit(spark, uri)
        again.files()
        again.done("binlake-warm-up", 0)
        # a checkpoint: a batch's first one then takes ~1 s, not 3-4 (and the JVM grows its heap here)
        jvm = spark._jvm
        assert jvm is not None  # a local session (classic Spark)
        delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, uri)
        delta_log.checkpoint(delta_log.unsafeVolatileSnapshot(), jvm.scala.Option.empty())
