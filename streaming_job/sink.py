"""foreachBatch: one micro-batch of Kafka records -> Delta change logs, mirrors, quarantine.

Exactly once: every Delta write of batch N carries (txnAppId, txnVersion=N), so a batch replayed
after a crash skips the writes that already committed. Mirrors apply the batch's changes in source
order (seq, row index): per primary key the last change wins, an update that moves the key deletes
the old key, deletes delete.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import pickle
import re
import threading
import time
from collections import namedtuple
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingester.codec.events import QueryEvent
from ingester.records.format import record_events

from . import defaults as D
from .decode import (
    ERROR,
    HEADERS,
    RAW,
    RECORD_ARROW,
    RECORD_DDL,
    decode_partition,
    quote,
    reassemble,
    typed_batches,
    typed_ddl,
)
from .delta_log import TableLog, UnreadableLog, simple_type
from .errors import LandError
from .keys import MirrorKeys, key_property, record_key
from .lake_types import widens
from .mirror import COMMIT_TS, DELETED, ORDER, SEQ, candidates_ddl, last_per_key
from .writer import (
    FILE_COLUMNS,
    PARTITION_COLUMN,
    Commit,
    DeltaCommit,
    LogCommit,
    Moved,
    land_partition,
    landed_ddl,
    landed_schema,
    write_change_log_file,
    write_mirror_file,
)

log = logging.getLogger("binlake.land")
QUARANTINE_TABLE = "_quarantine"
_DDL = re.compile(r"\s*(/\*.*?\*/\s*)*(ALTER|CREATE|RENAME|DROP|TRUNCATE)\b", re.IGNORECASE | re.DOTALL)
_STATS_PROPERTY = "delta.dataSkippingStatsColumns"
_STATS_COLUMNS = "spark.databricks.delta.properties.defaults.dataSkippingStatsColumns"  # its session default
_CHANGE_LOG_STATS = ["commit_ts", "kafka_offset"]  # Delta refuses statistics columns of BINARY type (seq)
_META = [(SEQ, "binary"), (COMMIT_TS, "timestamp")]  # kept in the mirror: the row's last change
# How the job reads Kafka (the stream, and records read again). The consumer's last fetch of a range
# finds nothing beyond its end (or only a transaction marker) and the broker holds it for
# fetch.max.wait.ms (Kafka's default 500 ms) for every topic partition of every micro-batch: 10 ms saved ~0.3 s
# a batch of one table, and 1 ms another ~10 ms per table of a batch touching many (a topic per table).
KAFKA_READ = {"kafka.isolation.level": "read_committed", "kafka.fetch.max.wait.ms": "1", "includeHeaders": "true"}


@dataclass
class BatchStats:
    rows: int = 0
    newest_commit_ts: float | None = None  # seconds since the epoch
    seconds: float = 0.0


@dataclass
class _Schema:
    """One table schema's share of a batch: where it starts, how many rows, the newest commit."""

    schema: str
    first_seq: bytes = b""
    first_position: str = ""
    n: int = 0
    newest: int = 0
    partial: bool = False

    def add(self, seq: bytes, position: str, n: int, newest: int, partial: bool) -> None:
        if not self.first_seq or seq < self.first_seq:
            self.first_seq, self.first_position = seq, position
        self.n += n
        self.newest = max(self.newest, newest)
        self.partial = self.partial or partial

    @property
    def meta(self) -> dict[str, Any]:
        return orjson.loads(self.schema)


@dataclass
class Lander:
    spark: SparkSession
    lake: str
    checkpoint: str
    quarantine: bool = False
    bootstrap: str = ""  # Kafka, for records read again: chunks cut by maxOffsetsPerTrigger, DDL statements
    topic_prefix: str = ""
    app_id: str = ""
    last: BatchStats = field(default_factory=BatchStats)
    error: LandError | None = None
    _columns: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)
    _mirrors: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)  # columns once MERGEd
    _highest: dict[tuple[str, str], Any] = field(default_factory=dict)  # see _key_high
    # per table of the batch: column -> first sequence with it, and the columns older images lack (ADD COLUMN)
    _appear: dict[tuple[str, str], tuple[dict[str, bytes], set[str]]] = field(default_factory=dict)
    _added: D.AddedColumns = field(default_factory=D.AddedColumns)  # ADD COLUMN statements read so far
    _schema_next: int = 0  # the schema topic's next offset to read
    # A table's batch of at most this many row changes has its mirror candidates reduced on the driver,
    # which keeps the mirror itself where that reads at most driver_merge_bytes of its files
    driver_rows: int = 1_000_000
    # The Kafka source gives a task per topic partition (a topic per table): a batch touching hundreds of
    # tables is decoded in as many tasks as cores instead (or the minPartitions asked for, min_tasks)
    min_tasks: int = 0
    keys: dict[str, list[str]] = field(default_factory=dict)  # land.keys: "<db>.<table>" -> its mirror's key
    driver_merge_bytes: int = 256 << 20
    # A batch under a steady trickle adds a small file to the mirror: once it has this many files under
    # small_file_bytes, the driver's commit rewrites them together with the batch (MirrorFiles.small)
    compact_files: int = 32
    small_file_bytes: int = 8 << 20
    _mirror_files: dict[tuple[str, str], MirrorFiles] = field(default_factory=dict)
    _change_logs: dict[str, ChangeLogFiles] = field(default_factory=dict)  # path -> its small files
    # Threads kept for the job's life (a new thread per batch gets a new allocator heap of its own):
    # the driver's Parquet writers (one per core), and the change log's commit beside the mirror's work
    _workers: ThreadPoolExecutor | None = None
    _committer: ThreadPoolExecutor | None = None
    _table_workers: ThreadPoolExecutor | None = None
    _threads: int | None = None
    _statements: threading.Lock = field(default_factory=threading.Lock)  # the schema topic's reading
    # Writes that pass their options through the session's conf (txnAppId, statistics columns): one table
    # at a time, so that tables landing side by side never see another's
    _session_conf: threading.RLock = field(default_factory=threading.RLock)
    _committed: dict[str, tuple[int, int]] = field(default_factory=dict)  # path -> (version, batch) we wrote
    _logs: dict[str, TableLog] = field(default_factory=dict)  # local tables' logs as the driver read them
    _table_defaults: dict[str, str] | None = None  # the session's Delta table defaults, for new tables
    _keys: MirrorKeys = field(init=False)

    def __post_init__(self) -> None:
        if not self.app_id:  # stable per checkpoint: the query's identity for Delta's idempotent writes
            where = self.checkpoint if _scheme(self.checkpoint) else str(Path(self.checkpoint).absolute())
            digest = hashlib.sha256(where.encode()).hexdigest()[:16]
            self.app_id = f"binlake-land-{digest}"
        self._keys = MirrorKeys(self.keys, self.spark, self.path, self._table_log)

    def path(self, db: str, table: str) -> str:
        return _join(self.lake, db, table)

    def _table_log(self, path: str) -> TableLog | None:
        """A local table's log as the driver reads it, brought up to date (None: a URI lake, or a table
        the driver cannot write itself, which the JVM's Delta then does)."""
        if not _local(path):
            return None
        table = self._logs.get(path)
        if table is None:
            table = self._logs[path] = TableLog(path)
        try:
            table.refresh()
        except UnreadableLog as exc:
            log.debug("%s: the JVM's Delta writes it (%s)", path, exc)
            return None
        return table if table.version < 0 or table.writable else None

    def _transaction(self, path: str) -> Commit:
        """The table's next commit: by the driver's own log writer where it can, else the JVM's Delta."""
        table = self._table_log(path)
        if table is None:
            return DeltaCommit(self.spark, path)
        if self._table_defaults is None:  # as Delta gives new tables, but type widening: only where needed
            prefix = "spark.databricks.delta.properties.defaults."
            self._table_defaults = {f"delta.{k[len(prefix):]}": v
                                    for k, v in self.spark.sparkContext.getConf().getAll() if k.startswith(prefix)
                                    and k != prefix + "enableTypeWidening"}
        return LogCommit(self.spark, table, self._table_defaults)

    @property
    def threads(self) -> int:
        """The driver's threads for Parquet writing: one per core Spark was given (local[N]: N); asked of
        the JVM once (a py4j call cost ~1 ms of each table's landing)."""
        if self._threads is None:
            self._threads = max(1, self.spark.sparkContext.defaultParallelism)
        return self._threads

    @property
    def workers(self) -> ThreadPoolExecutor:
        if self._workers is None:
            self._workers = ThreadPoolExecutor(self.threads, thread_name_prefix="binlake-land")
        return self._workers

    @property
    def table_workers(self) -> ThreadPoolExecutor:
        """The threads that land a batch's tables side by side (the driver's work of each is Python and
        pyarrow, waiting on files half the time)."""
        if self._table_workers is None:
            self._table_workers = ThreadPoolExecutor(2 * self.threads, thread_name_prefix="binlake-table")
        return self._table_workers

    @property
    def committer(self) -> ThreadPoolExecutor:
        if self._committer is None:
            self._committer = ThreadPoolExecutor(1, thread_name_prefix="binlake-commit")
        return self._committer

    def close(self) -> None:
        """The driver's threads end (job.run, when the query stops)."""
        for pool in (self._workers, self._committer, self._table_workers):
            if pool is not None:
                pool.shutdown()
        self._workers = self._committer = self._table_workers = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        try:
            self.process(batch, batch_id)
        except LandError as exc:
            self.error = exc
            raise

    def process(self, batch: DataFrame, batch_id: int) -> None:
        start = time.monotonic()
        tasks = max(self.threads, self.min_tasks)
        partitions = batch.rdd.getNumPartitions()
        if partitions > tasks:
            batch, partitions = batch.coalesce(tasks), tasks
        shipped = self._decode_to_driver(batch, partitions)
        decoded = None
        try:
            rows: DataFrame | pa.Table
            if shipped is not None:  # one job: the whole decoded batch is in the driver
                info = _record_rows(shipped.drop_columns(["data"]))
                rows = shipped.filter(pc.equal(shipped.column("kind"), "row"))
            else:  # one job decodes (and caches) the batch; the driver gets everything but the row data
                decoded = batch.mapInArrow(decode_partition, RECORD_DDL).persist()
                info = decoded.drop("data").collect()
                rows = decoded.filter("kind = 'row'")
            meta = [r for r in info if r.kind == "row"]
            orphans = [(r.topic, r.partition, r.offset, bytes(r.headers), bytes(r.raw)) for r in info
                       if r.kind == "chunk"]
            errors = [(r.topic, r.partition, r.offset, r.error, bytes(r.raw), bytes(r.headers)) for r in info
                      if r.kind == "error"]
            if orphans:
                log.info("batch %d: %d chunk pieces reassembled across partition splits", batch_id, len(orphans))
                extra, carried = reassemble(orphans, self._fetch)
                if carried:
                    first = min(carried)
                    log.info("batch %d: %d chunks of a record cut by maxOffsetsPerTrigger carried over to the next "
                             "batch, from %s[%d]@%d", batch_id, len(carried), *first)
                errors += [(r[1], r[2], r[3], r[ERROR], r[RAW], r[HEADERS]) for r in extra if r[0] == "error"]
                good = [r for r in extra if r[0] == "row"]
                if good and isinstance(rows, pa.Table):
                    more = pa.Table.from_batches([pa.RecordBatch.from_pylist(
                        [dict(zip(RECORD_ARROW.names, r, strict=True)) for r in good], schema=RECORD_ARROW)])
                    rows = pa.concat_tables([rows, more])
                    meta += _record_rows(more.drop_columns(["data"]))
                elif good:
                    extra_df = self.spark.createDataFrame(good, RECORD_DDL)
                    rows = rows.unionByName(extra_df)
                    meta += extra_df.drop("data").collect()
            if errors:
                self._undecodable(errors, batch_id)
            log.debug("batch %d: decoded in %.1fs%s", batch_id, time.monotonic() - start,
                      "" if shipped is None else " (to the driver)")
            stats = self._land(rows, meta, batch_id)
        finally:
            if decoded is not None:
                decoded.unpersist()
        stats.seconds = time.monotonic() - start
        self.last = stats

    def _decode_to_driver(self, batch: DataFrame, tasks: int) -> pa.Table | None:
        """The decoded batch, whole, in the driver (one Spark job, nothing cached), when the lake is local
        and the batch holds at most ``driver_rows`` row changes: each task ships at most its share of them,
        and one that has more stops early and says so (``withheld``). None: the batch is larger (or the
        lake remote), and is decoded again the cached way."""
        if self.driver_rows <= 0 or not _local(self.lake):
            return None
        table = batch.mapInArrow(partial(decode_partition, ship=self.driver_rows // max(1, tasks)),
                                 RECORD_DDL).toArrow()
        if pc.any(pc.equal(table.column("kind"), "withheld")).as_py():
            log.debug("more than %d row changes in the batch: decoded again, cached in Spark", self.driver_rows)
            return None
        return table

    def _fetch(self, topic: str, partition: int, start: int, end: int) -> list[tuple[int, dict[str, bytes], bytes]]:
        """Records [start, end) of one partition, read again from Kafka (committed ones only)."""
        rows = self._kafka(topic, {str(partition): start}, {str(partition): end}, partition).select(
            "offset", "headers", "value").collect()
        return [(r.offset, {h.key: bytes(h.value) for h in r.headers or ()}, bytes(r.value)) for r in rows]

    def _kafka(self, topic: str, start: dict[str, int] | str, end: dict[str, int] | str,
               partition: int | None = None) -> DataFrame:
        """A batch read of one topic (or partition) between offsets, as the stream reads it."""
        reader = (self.spark.read.format("kafka").options(**KAFKA_READ)
                  .option("kafka.bootstrap.servers", self.bootstrap)
                  .option("startingOffsets", start if isinstance(start, str) else orjson.dumps({topic: start}).decode())
                  .option("endingOffsets", end if isinstance(end, str) else orjson.dumps({topic: end}).decode()))
        if partition is None:
            return reader.option("subscribe", topic).load()
        return reader.option("assign", orjson.dumps({topic: [partition]}).decode()).load()

    def _undecodable(self, errors: list[tuple[str, int, int, str, bytes, bytes]], batch_id: int) -> None:
        topic, partition, offset, message, _, _ = min(errors)
        if not self.quarantine:
            raise LandError(f"undecodable record at {topic}[{partition}]@{offset}: {message} "
                            f"({len(errors)} in this batch; --quarantine lands them in {QUARANTINE_TABLE})")
        log.warning("quarantined %d undecodable records, first %s[%s]@%s: %s", len(errors), topic, partition,
                    offset, message)
        df = self.spark.createDataFrame(
            [(t, p, o, m, raw, {k: v for k, v in pickle.loads(h).items()}) for t, p, o, m, raw, h in errors],
            "topic string, partition int, offset bigint, error string, value binary, headers map<string,binary>",
        ).withColumn("batch_id", F.lit(batch_id)).withColumn("ingest_ts", F.current_timestamp())
        self._append(df, _join(self.lake, QUARANTINE_TABLE), batch_id)

    def _append(self, df: DataFrame, path: str, batch_id: int, partition_by: str | None = None,
                stats: list[str] | None = None, idempotent: bool = True) -> None:
        """An idempotent append; ``stats``: the table is new, collect file statistics of these columns only
        (statistics of every column of wide row images cost a third of the write, and skip nothing)."""
        writer = df.write.format("delta").mode("append")
        if idempotent:
            writer = writer.option("txnAppId", self.app_id).option("txnVersion", batch_id)
        if partition_by:
            writer = writer.partitionBy(partition_by)
        if stats is None:
            writer.save(path)
            return
        conf = self.spark.conf
        with self._session_conf:
            conf.set(_STATS_COLUMNS, _stats_columns(stats)[_STATS_PROPERTY])
            try:
                writer.save(path)
            finally:
                conf.unset(_STATS_COLUMNS)

    def _land(self, rows: DataFrame | pa.Table, meta: list[Any], batch_id: int) -> BatchStats:
        stats = BatchStats()
        groups: dict[tuple[str, str, str], _Schema] = {}
        for r in meta:
            g = groups.setdefault((r.db, r.tbl, r.schema), _Schema(r.schema))
            g.add(bytes(r.first_seq), r.first_position, r.rows, r.newest, r.partial)
        tables: dict[tuple[str, str], list[_Schema]] = {}
        for (db, table, _), g in sorted(groups.items(), key=lambda kv: kv[1].first_seq):
            tables.setdefault((db, table), []).append(g)
        ingest = int(time.time() * 1e6)
        ordered = sorted(tables.items())
        if len(ordered) == 1:
            self._land_one(rows, *ordered[0], batch_id, ingest)
        else:  # tables are independent (each its own commits, idempotent by its txnVersion): on threads
            landing = [self.table_workers.submit(self._land_one, rows, name, schemas, batch_id, ingest)
                       for name, schemas in ordered]
            errors = [f.exception() for f in landing]  # every table's work ends before an error is raised
            first = next((e for e in errors if e is not None), None)
            if first is not None:
                raise first
        for _, schemas in ordered:
            stats.rows += sum(g.n for g in schemas)
            newest = max(g.newest for g in schemas) / 1e6
            stats.newest_commit_ts = max(stats.newest_commit_ts or 0.0, newest)
        return stats

    def _land_one(self, rows: DataFrame | pa.Table, name: tuple[str, str], schemas: list[_Schema], batch_id: int,
                  ingest: int) -> None:
        db, table = name
        t = time.monotonic()
        lake = self._lake_columns(db, table)
        columns, pk = self._evolve(db, table, lake, schemas)
        log.debug("%s.%s: schema %.1fs", db, table, time.monotonic() - t)
        subset: DataFrame | pa.Table
        if isinstance(rows, pa.Table):
            subset = rows.filter(pc.and_(pc.equal(rows.column("db"), db), pc.equal(rows.column("tbl"), table)))
        else:  # minPartitions may have made many small partitions: as many tasks as cores is enough here
            subset = rows.filter((F.col("db") == db) & (F.col("tbl") == table)).coalesce(
                self.spark.sparkContext.defaultParallelism)
        t = time.monotonic()
        self._land_table(subset, db, table, lake, columns, pk, schemas, batch_id, ingest)
        log.debug("%s.%s: landed in %.1fs", db, table, time.monotonic() - t)
        self._columns[(db, table)] = columns

    def _land_table(self, subset: DataFrame | pa.Table, db: str, table: str, lake: list[tuple[str, str]],
                    columns: list[tuple[str, str]], pk: list[str], schemas: list[_Schema], batch_id: int,
                    ingest_micros: int) -> None:
        """One pass over the table's row changes (writer.land_partition) writes the change-log files,
        committed here at once, and leaves the mirror's candidates for the MERGE. ``subset``: the table's
        record rows, in Spark or already in the driver."""
        path = self.path(db, table + "__changes")
        if isinstance(subset, pa.Table) and (not _local(path) or sum(g.n for g in schemas) > self.driver_rows):
            subset = self.spark.createDataFrame(subset)  # for Spark's paths (chunks reassembled on top of a full batch)
        t = time.monotonic()
        ddl = f"{typed_ddl(columns)}, {PARTITION_COLUMN} date, ingest_ts timestamp"
        if lake:
            self._add_columns(path, lake, columns, nested=True)
        elif not _local(path):  # a new change log: its schema, partitioning and statistics columns, no rows yet
            empty = self.spark.createDataFrame([], ddl)
            self._append(empty, path, -1, partition_by=PARTITION_COLUMN, stats=_CHANGE_LOG_STATS, idempotent=False)
        if _local(path):
            txn: Commit | None = self._transaction(path)
            if not lake:  # a new change log, created by the commit of its first files
                txn.create(ddl, [PARTITION_COLUMN], _stats_columns(_CHANGE_LOG_STATS))
            write = not self._done(txn, path, batch_id)  # else a replay: the change log has this batch
            log.debug("%s.%s: change log schema and transaction %.1fs", db, table, time.monotonic() - t)
        else:  # object stores: Spark's own writer (slower), idempotent by txnVersion
            txn, write = None, False
            t = time.monotonic()
            changes = (subset.mapInArrow(partial(typed_batches, columns), typed_ddl(columns))
                       .withColumn(PARTITION_COLUMN, F.to_date("commit_ts"))
                       .withColumn("ingest_ts", F.timestamp_micros(F.lit(ingest_micros))))
            self._append(changes, path, batch_id, partition_by=PARTITION_COLUMN)
            log.debug("%s.%s: change log (Spark writer) %.1fs", db, table, time.monotonic() - t)
        if not (write or pk):
            return
        land = land_partition(columns, pk, path if write else None, ingest_micros)
        if txn is not None and sum(g.n for g in schemas) <= self.driver_rows:
            # The table's decoded row changes (cached, Arrow IPC) come to the driver, which writes the
            # change-log files and reduces and lands the mirror's candidates itself: no Python tasks,
            # whose start costs more than a small batch's own work.
            t = time.monotonic()
            if isinstance(subset, pa.Table):
                records = subset.select(["topic", "partition", "offset", "data"])
            else:
                records = subset.select("topic", "partition", "offset", "data").toArrow()
                log.debug("%s.%s: row changes to the driver %.1fs", db, table, time.monotonic() - t)
            got = _land_on_threads(land, records, landed_schema(columns), self.workers, self.threads)
            is_file = got.column("_binlake_file").is_valid()
            found = got.filter(is_file)
            files = list(zip(*(found.column(c).to_pylist() for c in FILE_COLUMNS), strict=True))
            log.debug("%s.%s: change-log files %.1fs (%d files)", db, table, time.monotonic() - t, len(files))
            # The change log's commit (JVM work) goes on beside the mirror's (driver work, then its own commit):
            # two tables, each idempotent by its own txnVersion, so their order does not matter on a replay
            moved = self._compact_change_log(txn, path) if write else ((), ())
            committing = self.committer.submit(txn.commit, files, self.app_id, batch_id, moved) if write else None
            try:
                if pk:
                    self._full_images(db, table, schemas)
                    t = time.monotonic()
                    self._merge(got.filter(pc.invert(is_file)).drop_columns(FILE_COLUMNS), db, table, columns, pk,
                                batch_id)
                    log.debug("%s.%s: mirror %.1fs", db, table, time.monotonic() - t)
            except BaseException:
                if committing is not None:
                    committing.exception()  # the commit ends either way; the mirror's error is the one raised
                raise
            if committing is not None:
                version = committing.result()
                self._committed[path] = (version, batch_id)
                self._change_logs[path].update(version, [(n, {PARTITION_COLUMN: d}, size) for n, d, size, *_ in files]
                                               + [(n, v, size) for n, v, size, _ in moved[0]],
                                               [n for n, _, _ in moved[1]], self.small_file_bytes)
            return
        landed = subset.mapInArrow(land, landed_ddl(columns))
        if pk:
            landed = landed.persist()  # the files' job computes the candidates once, for the mirror
        try:
            t = time.monotonic()
            files = landed.filter("_binlake_file IS NOT NULL").select(*FILE_COLUMNS).collect()
            if txn is not None and write:
                txn.commit([tuple(f) for f in files], self.app_id, batch_id)
            log.debug("%s.%s: change log %.1fs (%d files)", db, table, time.monotonic() - t, len(files))
            if pk:
                self._full_images(db, table, schemas)
                t = time.monotonic()
                self._merge(landed.filter("_binlake_file IS NULL").drop(*FILE_COLUMNS), db, table, columns, pk,
                            batch_id)
                log.debug("%s.%s: mirror %.1fs", db, table, time.monotonic() - t)
        finally:
            landed.unpersist()

    def _compact_change_log(self, commit: Commit, path: str) -> Moved:
        """A change log gains a file per micro-batch; once one of its commit dates holds ``compact_files``
        files under ``small_file_bytes``, they are read and written again as one file of that date, which
        the batch's commit adds in their place (Delta's ``dataChange`` false: the same rows, which a
        stream reading the change log does not see again). Files whose schemas Arrow cannot unify (none
        that binlake wrote: columns are only added) are left as they are."""
        files = self._change_logs.get(path)
        if files is None or files.version != commit.version:
            files = self._change_logs[path] = ChangeLogFiles.read(commit, self.small_file_bytes)
        picked = files.pick(self.compact_files, self.driver_merge_bytes)
        if picked is None:
            return (), ()
        date, names = picked
        started = time.monotonic()
        try:
            rows = pa.concat_tables([pq.ParquetFile(os.path.join(path, n)).read() for n in names],
                                    promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            log.debug("%s: %d small change-log files of %s not compacted: %s", path, len(names), date, exc)
            files.skip(names)
            return (), ()
        add = write_change_log_file(path, date, rows)
        log.debug("%s: %d small change-log files of %s compacted into one in %.1fs", path, len(names), date,
                  time.monotonic() - started)
        return [add], [(n, files.sizes[n], {PARTITION_COLUMN: date}) for n in names]

    def _done(self, commit: Commit, path: str, batch_id: int) -> bool:
        """Whether the table has this batch. Asking Delta costs a Spark job per new table version (its
        transactions come from the log's state); when the version read is the one this job wrote last,
        the answer is known without it."""
        known = self._committed.get(path)
        if known is not None and known[0] == commit.version:
            return batch_id <= known[1]
        return commit.done(self.app_id, batch_id)

    @staticmethod
    def _full_images(db: str, table: str, schemas: list[_Schema]) -> None:
        if any(g.partial for g in schemas):
            raise LandError(f"`{db}`.`{table}`: partial row images (binlog_row_image MINIMAL or NOBLOB) "
                            f"from {min(g.first_position for g in schemas)}: the mirror needs FULL images; "
                            "set binlog_row_image=FULL")

    # --- schema -------------------------------------------------------------------------------

    def _lake_columns(self, db: str, table: str) -> list[tuple[str, str]]:
        key = (db, table)
        if key not in self._columns:
            path = self.path(db, table + "__changes")
            columns: list[tuple[str, str]] = []
            found = self._table_log(path)
            if found is not None and found.version >= 0:  # read from the log by the driver: no Spark job
                after = next(f["type"] for f in found.schema["fields"] if f["name"] == "after")
                columns = [(f["name"], simple_type(f["type"])) for f in after["fields"]]
            elif found is None and _is_delta(self.spark, path):
                after = self.spark.read.format("delta").load(path).schema["after"].dataType
                columns = [(f.name, f.dataType.simpleString()) for f in after.fields]
            self._columns[key] = columns
        return self._columns[key]

    def _evolve(self, db: str, table: str, lake: list[tuple[str, str]],
                schemas: list[_Schema]) -> tuple[list[tuple[str, str]], list[str]]:
        """The union of the lake's columns and this batch's table maps, in source order. New columns are
        added; a type that widens (or narrows into the lake's type) is kept wide; anything else stops."""
        columns = list(lake)
        first: dict[str, bytes] = {}  # column -> the first sequence of an image with it
        for g in schemas:  # in source order
            meta = g.meta
            for name, _ in meta["columns"]:
                first.setdefault(name, g.first_seq)
            index = {n: i for i, (n, _) in enumerate(columns)}
            for name, dtype in meta["columns"]:
                if name not in index:
                    index[name] = len(columns)
                    columns.append((name, dtype))
                    continue
                old = columns[index[name]][1]
                if widens(dtype, old):
                    continue
                if widens(old, dtype):
                    columns[index[name]] = (name, dtype)
                    continue
                raise LandError(f"`{db}`.`{table}`: column `{name}` changed from {old} to {dtype} at binlog position "
                                f"{g.first_position} (file:position:index), {self._ddl_before(db, table, g)}; "
                                "not a safe widening, so the query stops: land the table anew from that point "
                                "under a new lake path")
        # Columns that the batch's older images lack: added (or dropped and added again) in the batch
        self._appear[(db, table)] = (first, {n for n, seq in first.items() if seq > schemas[0].first_seq})
        # The mirror's key: the table's (or land.keys'), the same as the mirror's own (keys.py)
        return columns, self._keys.key(db, table, [(g.meta, g.first_position) for g in schemas])

    def _defaults(self, db: str, table: str, columns: list[tuple[str, str]], added: list[str]) -> list[D.Default]:
        """The defaults the mirror needs: of the columns ``added`` to it now, and of the columns that images
        of this batch lack because they are older than the ADD COLUMN (docs/LAND.md, "Schema changes")."""
        first, older = self._appear.get((db, table), ({}, set()))
        wanted = [n for n, _ in columns if n in added or n in older]
        if not wanted:
            return []
        types = dict(columns)
        out = []
        with self._statements:  # tables landing side by side: one reads the topic, none sees it half read
            self._read_statements()
            for name in wanted:
                try:
                    d = self._added.default(db, table, name, types, first.get(name))
                except D.Uncomputable as exc:
                    log.warning("`%s`.`%s`: the mirror's column `%s` stays null in rows written before it was "
                                "added (or renamed): only the server can compute their value: %s. `binlake snapshot "
                                "--tables %s.%s` reads the rows again", db, table, name, exc, db, table)
                    continue
                if d is not None:
                    out.append(d)
        return out

    def _read_statements(self) -> None:
        """The schema topic's statements since the last read (committed ones), for their ADD COLUMNs."""
        topic = f"{self.topic_prefix}._schema"
        try:
            records = self._kafka(topic, {"0": self._schema_next}, "latest").select(
                "offset", "headers", "value").collect()
        except Exception as exc:
            raise LandError(f"ADD COLUMN statements could not be read from {topic}: {type(exc).__name__}: "
                            f"{str(exc).splitlines()[0]}") from exc
        for r in sorted(records, key=lambda r: r.offset):
            headers = {h.key: bytes(h.value) for h in r.headers or ()}
            for item in record_events(headers, bytes(r.value), f"{topic}[0]@{r.offset}"):
                if isinstance(item.event, QueryEvent):
                    self._added.feed(item.seq.encode(), item.event)
            self._schema_next = r.offset + 1

    def _ddl_before(self, db: str, table: str, group: _Schema) -> str:
        """The last statement on the schema topic before ``group``'s first row that names the table: for
        the error message only, so the topic is read just then."""
        topic = f"{self.topic_prefix}._schema"
        mentions = re.compile(r"(?<![\w$])`?" + re.escape(table) + r"`?(?![\w$])", re.IGNORECASE)
        found = None
        try:
            records = self._kafka(topic, "earliest", "latest").select("offset", "headers", "value").collect()
            for r in records:
                headers = {h.key: bytes(h.value) for h in r.headers or ()}
                for item in record_events(headers, bytes(r.value), f"{topic}[0]@{r.offset}"):
                    ev = item.event
                    if (item.seq.encode() < group.first_seq and isinstance(ev, QueryEvent)
                            and _DDL.match(ev.query) and mentions.search(ev.query)
                            and (ev.database == db or re.search(re.escape(db), ev.query, re.IGNORECASE))):
                        found = (str(item.seq), ev.query)
        except Exception as exc:  # the message must still come out
            return f"the DDL statement could not be read from {topic}: {type(exc).__name__}: {exc}"
        if found is None:
            return f"no DDL statement naming the table before it on {topic}"
        return f"after the DDL statement at {found[0]}: {' '.join(found[1].split())}"

    def _add_columns(self, path: str, lake: list[tuple[str, str]], columns: list[tuple[str, str]],
                     nested: bool, defaults: list[D.Default] | None = None) -> None:
        """ALTER a table from the lake's columns to the union: added columns, widened types (type widening,
        enabled on the table at its first widening). ``defaults``: of added mirror columns, for the rows
        already there."""
        current = dict(lake)
        prefixes = ("before.", "after.") if nested else ("",)
        added = [(n, t) for n, t in columns if n not in current]
        if added:
            if any(t == "timestamp_ntz" for _, t in added):  # Delta adds this feature only to new tables itself
                self.spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES "
                               "('delta.feature.timestampNtz' = 'supported')")
            if defaults:
                D.mark_pending(self.spark, path, defaults)
            specs = ", ".join(f"{p}{quote(n)} {t}" for p in prefixes for n, t in added)
            self.spark.sql(f"ALTER TABLE delta.{quote(path)} ADD COLUMNS ({specs})")
            if defaults:
                D.give_existing_rows(self.spark, path, defaults)
        widened = _widened(lake, columns)
        if widened:
            # Delta's typeWidening is a reader feature (reader 3, writer 7) that delta-rs cannot read yet, so a
            # table gets it only now, at its first widening (setting it again at a later one, or after a crash
            # before the ALTER, is harmless). date -> timestamp_ntz also needs timestampNtz, which Delta
            # enables by itself only on new tables.
            features = {"delta.enableTypeWidening": "true"}
            if any(t == "timestamp_ntz" for _, t in widened):
                features["delta.feature.timestampNtz"] = "supported"
            spec = ", ".join(f"'{k}' = '{v}'" for k, v in features.items())
            self.spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ({spec})")
        for name, dtype in widened:
            for p in prefixes:
                self.spark.sql(f"ALTER TABLE delta.{quote(path)} ALTER COLUMN {p}{quote(name)} TYPE {dtype}")

    # --- mirror -------------------------------------------------------------------------------

    def _merge(self, candidates: DataFrame | pa.Table, db: str, table: str, columns: list[tuple[str, str]],
               pk: list[str], batch_id: int) -> None:
        """Apply the batch's changes of one table to its mirror: per key the last candidate (mirror.py) wins.
        Candidates on the driver (an Arrow table) are applied by it where it can (``_mirror_on_driver``);
        anything else goes through Spark."""
        from delta.tables import DeltaTable

        path = self.path(db, table)
        self._keys.check_nulls(candidates, db, table, pk)
        known = self._mirrors.get((db, table))
        found = self._table_log(path) if known is None else None
        exists = known is not None or (found.version >= 0 if found is not None
                                       else _is_delta(self.spark, path))
        if known is None and exists:
            # The mirror's own schema: a crash may have come between the change log's ALTER and this one,
            # or between adding columns and giving their defaults to the rows there.
            pending = D.pending_in(found.configuration) if found is not None else D.pending(self.spark, path)
            if pending:
                D.give_existing_rows(self.spark, path, pending)
            schema = found.columns() if found is not None else [
                (f.name, f.dataType.simpleString()) for f in DeltaTable.forPath(self.spark, path).toDF().schema]
            known = [(n, t) for n, t in schema if not n.startswith("_binlake_")]
        added = [n for n, _ in columns if n not in dict(known or [])] if exists else []
        fills = self._defaults(db, table, columns, added)
        # a batch that widens a column goes through Spark too, whose path ALTERs the mirror first (the
        # driver's files would otherwise hold the wider type under the mirror's narrower one)
        widened = bool(_widened(known or [], columns)) if exists else False
        if isinstance(candidates, pa.Table):
            if not (fills or added or widened) and self._mirror_on_driver(candidates, path, exists, db, table,
                                                                          columns, pk, batch_id):
                self._mirrors[(db, table)] = columns
                return
            candidates = self.spark.createDataFrame(candidates, schema=candidates_ddl(columns))
        if fills:  # images older than an ADD COLUMN (or RENAME) get its default
            candidates = candidates.withColumns(D.mirror_images([n for n, _ in columns], fills, image="", seq=SEQ))
        latest = (candidates.withColumn("_binlake_order", F.struct(*ORDER))
                  .groupBy(*[F.col(quote(k)) for k in pk])
                  .agg(F.max_by(F.struct("*"), "_binlake_order").alias("s"))
                  .select("s.*"))
        surviving = latest.filter(f"NOT {DELETED}").select(*[quote(n) for n, _ in [*columns, *_META]])
        if not exists:
            # A new mirror starts empty: the batch's surviving rows are plain inserts, no MERGE needed.
            # (A replay after a crash finds the table and MERGEs, or skips by txnVersion: same result.)
            self._append(surviving, path, batch_id, stats=_key_stats(columns, pk))
            record_key(self.spark, path, pk)  # Spark's writer sets no properties but Delta's own
            self._mirrors[(db, table)] = columns
            return
        assert known is not None
        self._add_columns(path, known, columns, nested=False, defaults=[d for d in fills if d.column in added])
        ranges = self._key_ranges(candidates, columns, pk)
        high = self._key_high(path, db, table, columns, pk, ranges)
        if len(ranges) == len(pk) and (
                (high is not None and high[0] < high[1])
                or self.spark.read.format("delta").load(path).where(
                    " AND ".join(f"{r.column} BETWEEN {r.low} AND {r.high}" for r in ranges)).isEmpty()):
            # No mirror row has a key in the batch's key ranges (known from the mirror's largest key, or
            # answered by Delta from file statistics when keys only grow): nothing can match, so MERGE would
            # just insert the surviving rows. An append is that, without MERGE's fixed cost of seconds.
            self._append(surviving, path, batch_id)
            log.debug("%s.%s: no mirror row in the batch's key ranges: appended, no MERGE", db, table)
            self._mirrors[(db, table)] = columns
            if high is not None:
                self._highest[(db, table)] = max(high[0], high[2])
            return
        assign = {quote(n): f"s.{quote(n)}" for n, _ in [*columns, *_META]}
        on = " AND ".join([f"t.{quote(k)} = s.{quote(k)}" for k in pk]
                          + [f"t.{r.column} BETWEEN {r.low} AND {r.high}" for r in ranges])
        conf = self.spark.conf
        with self._session_conf:
            conf.set("spark.databricks.delta.write.txnAppId", self.app_id)
            conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
            try:
                (DeltaTable.forPath(self.spark, path).alias("t").merge(latest.alias("s"), on)
                 .whenMatchedDelete(condition=f"s.{DELETED}")
                 .whenMatchedUpdate(condition=f"NOT s.{DELETED}", set=assign)
                 .whenNotMatchedInsert(condition=f"NOT s.{DELETED}", values=assign)
                 .execute())
            finally:
                conf.unset("spark.databricks.delta.write.txnAppId")
                conf.unset("spark.databricks.delta.write.txnVersion")
        self._mirrors[(db, table)] = columns
        if high is not None:
            self._highest[(db, table)] = max(high[0], high[2])

    def _mirror_on_driver(self, candidates: pa.Table, path: str, exists: bool, db: str, table: str,
                          columns: list[tuple[str, str]], pk: list[str], batch_id: int) -> bool:
        """The batch applied to a mirror keyed first by an integer column, by the driver: the mirror files
        whose key range holds one of the batch's keys are read (pyarrow), those that hold one are rewritten
        without the batch's keys, and the surviving rows (key order) join them in new files; one Delta
        commit removes the old files and adds the new ones, with the batch's SetTransaction. Spark's writer
        and MERGE cost seconds per batch; this costs milliseconds for a batch of new keys, and the files it
        reads for one of updates. Returns False where it does not apply (the caller uses Spark)."""
        key = pk[0]
        if not _local(path) or dict(columns)[key] not in _INTEGER:
            return False
        latest = last_per_key(candidates, pk)
        commit = self._transaction(path)
        if not exists:  # created by the commit of its first files
            commit.create(", ".join(f"{quote(n)} {t}" for n, t in [*columns, *_META]), [],
                          {**_stats_columns(_key_stats(columns, pk)), **key_property(pk)})
        if self._done(commit, path, batch_id):  # a replay: the mirror has this batch
            return True
        files = self._mirror_files.get((db, table))
        if files is None or files.version != commit.version:
            files = self._mirror_files[(db, table)] = MirrorFiles.read(commit, key)
        keys = np.sort(latest.column(key).to_numpy())
        touched = files.holding(keys)
        if touched is None or sum(files.sizes[f] for f in touched) > self.driver_merge_bytes:
            return False
        compacted = files.small(self.small_file_bytes, self.compact_files, set(touched),
                                self.driver_merge_bytes - sum(files.sizes[f] for f in touched))
        names = [n for n, _ in [*columns, *_META]]
        schema = pa.schema([candidates.schema.field(n) for n in names])
        kept, removes = [], []
        for name in [*touched, *compacted]:
            rows = pq.read_table(os.path.join(path, name))
            rest = rows.join(latest.select(pk), keys=pk, join_type="left anti")
            # a touched file whose range held the batch's keys but the file none of them stays as it is
            if len(rest) < len(rows) or name in compacted:
                removes.append((name, files.sizes[name]))
                kept.append(_conform(rest, schema))
        surviving = latest.filter(pc.invert(latest.column(DELETED))).select(names)
        rows = _sorted_by(pa.concat_tables([*kept, surviving]), key)
        adds = _write_mirror_files(path, rows, key, self.workers, self.threads)
        try:
            version = commit.append(adds, self.app_id, batch_id, [], removes)
        except Exception as exc:  # e.g. another writer's commit on the mirror (Delta's conflict check)
            raise LandError(f"{db}.{table}: the mirror's commit of batch {batch_id} failed: "
                            f"{_first_line(exc)}; nothing of this batch is in the mirror, "
                            "and landing resumes with it on the next run") from exc
        self._committed[path] = (version, batch_id)
        files.update(version, adds, [n for n, _ in removes], key)
        self._highest.pop((db, table), None)  # the Spark path's bound: asked again if it is ever needed
        log.debug("%s.%s: mirror kept by the driver (%d of %d files read, %d rewritten, %d small ones compacted)",
                  db, table, len(touched) + len(compacted), len(files.sizes) + len(removes) - len(adds),
                  len(removes), len(compacted))
        return True

    def _mirror_highest(self, path: str, db: str, table: str, column: str, number: Any) -> Any:
        """The largest key the mirror can hold: asked of the mirror once per process, then kept up to date
        by this job (an upper bound: deletes do not lower it)."""
        key = (db, table)
        if key not in self._highest:
            found = self.spark.read.format("delta").load(path).agg(F.max(quote(column)).cast("string")).first()[0]
            self._highest[key] = None if found is None else number(found)
        return self._highest[key]

    def _key_high(self, path: str, db: str, table: str, columns: list[tuple[str, str]], pk: list[str],
                  ranges: list[KeyRange]) -> tuple[Any, Any, Any] | None:
        """For a mirror keyed by one integer or decimal column: (the largest key the mirror can hold, the
        batch's smallest and largest key). The first is asked of the mirror once per process, then kept
        up to date here (an upper bound: deletes do not lower it), so that a batch of new keys -- the
        common case of an insert-mostly table -- needs no query of the mirror to skip the MERGE."""
        if len(pk) != 1 or len(ranges) != 1:
            return None
        number = _NUMBER.get(dict(columns)[pk[0]].split("(")[0])
        if number is None:
            return None
        highest = self._mirror_highest(path, db, table, pk[0], number)
        low, high = number(ranges[0].text_low), number(ranges[0].text_high)
        return (low - 1 if highest is None else highest), low, high

    def _key_ranges(self, candidates: DataFrame, columns: list[tuple[str, str]],
                    pk: list[str]) -> list[KeyRange]:
        """Target-only bounds for the MERGE condition: each key column between the batch's smallest and
        largest key. A matching row must lie inside them, and Delta skips every mirror file whose key
        statistics (collected since the mirror's creation) lie outside: without them MERGE reads the whole
        mirror each batch, which grows with the table; with them a batch of new keys reads none of it.
        The bounds travel as text (hex for binary keys) so that no value is converted through Python.
        Returns a KeyRange per bounded key column."""
        types = dict(columns)
        keys = [k for k in pk if types[k] not in ("float", "double")]  # NaN and -0.0 order oddly: no bounds
        bounds = []
        for k in keys:
            low, high = F.min(quote(k)), F.max(quote(k))
            text = F.hex if types[k] == "binary" else (lambda c: c.cast("string"))
            bounds += [text(low), text(high)]
        found = candidates.agg(*bounds).first() if bounds else None
        ranges = []
        for i, k in enumerate(keys):
            low, high = found[2 * i], found[2 * i + 1]
            if low is not None and high is not None:
                ranges.append(KeyRange(quote(k), _literal(low, types[k]), _literal(high, types[k]), low, high))
        return ranges


class KeyRange(NamedTuple):
    """A key column's bounds in a batch: SQL literals for the MERGE condition, and their text."""

    column: str  # quoted
    low: str
    high: str
    text_low: str
    text_high: str


_INTEGER = ("tinyint", "smallint", "int", "bigint")
_FILE_ROWS = 1_000_000  # rows per mirror file the driver writes, at most
_FILE_ROWS_PER_THREAD = 50_000  # ... and at least, where it writes several at once


def _sorted_by(rows: pa.Table, key: str) -> pa.Table:
    """``rows`` in ascending key order (as they are already when a snapshot's rows arrive: then no copy)."""
    keys = rows.column(key)
    if len(keys) < 2 or pc.all(pc.less_equal(keys.slice(0, len(keys) - 1), keys.slice(1))).as_py():
        return rows
    return rows.sort_by(key)


def _write_mirror_files(path: str, rows: pa.Table, key: str, pool: ThreadPoolExecutor,
                        threads: int) -> list[tuple[Any, ...]]:
    """The driver's mirror rows (in key order) as files of consecutive key ranges: as many as the rows
    need at ``_FILE_ROWS`` each, or one per thread where each still gets ``_FILE_ROWS_PER_THREAD`` rows,
    written at once on ``pool`` (Parquet's encoding and compression release the GIL)."""
    if not len(rows):
        return []
    count = max(-(-len(rows) // _FILE_ROWS), min(threads, len(rows) // _FILE_ROWS_PER_THREAD))
    size = -(-len(rows) // count)
    slices = [rows.slice(i, size) for i in range(0, len(rows), size)]
    if len(slices) == 1:
        return [write_mirror_file(path, slices[0], key)]
    return list(pool.map(lambda part: write_mirror_file(path, part, key), slices))


@dataclass
class MirrorFiles:
    """A mirror's files as the driver last saw them (Delta version), with their range of the first key
    column from the files' statistics (None: unknown, so the file may hold any key)."""

    version: int
    sizes: dict[str, int]
    ranges: dict[str, tuple[int, int] | None]
    vectors: bool = False  # some file has a deletion vector: pyarrow alone would not see its deletes

    @classmethod
    def read(cls, commit: Commit, key: str) -> MirrorFiles:
        sizes, ranges, vectors = {}, {}, False
        for name, size, stats, dv, _ in commit.files():
            sizes[name] = size
            ranges[name] = _key_range(stats, key)
            vectors = vectors or dv
        return cls(commit.version, sizes, ranges, vectors)

    def holding(self, keys: np.ndarray) -> list[str] | None:
        """The files whose key range holds one of the (sorted) ``keys``; None where the driver cannot tell."""
        if self.vectors or any(_scheme(n) or n.startswith("/") for n in self.sizes):
            return None
        out = []
        for name, bounds in self.ranges.items():
            if bounds is None or np.searchsorted(keys, bounds[0], "left") < np.searchsorted(keys, bounds[1], "right"):
                out.append(name)
        return out

    def small(self, below: int, at_least: int, touched: set[str], budget: int) -> list[str]:
        """Files under ``below`` bytes not among ``touched``, in key order and within ``budget`` bytes,
        once there are ``at_least`` of them (else none): the batch's commit rewrites them into files of
        consecutive key ranges, so a steady trickle of small batches does not leave a file per batch."""
        found = [n for n, size in self.sizes.items() if size < below and n not in touched]
        if len(found) < at_least:
            return []
        found.sort(key=lambda n: self.ranges[n] or (0, 0))
        return _within(found, self.sizes, budget)

    def update(self, version: int, adds: list[tuple[str, dict[str, str], int, dict[str, Any]]],
               removed: list[str], key: str) -> None:
        for name in removed:
            del self.sizes[name], self.ranges[name]
        for name, _, size, stats in adds:
            self.sizes[name] = size
            self.ranges[name] = (stats["minValues"][key], stats["maxValues"][key])
        self.version = version


def _within(names: list[str], sizes: dict[str, int], budget: int) -> list[str]:
    """The first of ``names`` whose sizes add up to at most ``budget`` bytes (a compaction's files)."""
    total = itertools.accumulate(sizes[n] for n in names)
    return [name for name, upto in zip(names, total, strict=True) if upto <= budget]


_THREADED_BYTES = 8 << 20  # decoded row changes of a table's batch worth a run (and files) per core


def _land_on_threads(land: Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]], records: pa.Table,
                     schema: pa.Schema, pool: ThreadPoolExecutor, threads: int) -> pa.Table:
    """writer.land_partition's function over the driver's records, split into ``threads`` runs of about
    equal size on ``pool`` (each writes files of its own): pyarrow's Parquet writer and compute kernels release the
    GIL, so the driver's change-log files and candidates use every core instead of one. A batch under
    ``_THREADED_BYTES`` stays one run: one file, where a split would gain milliseconds."""
    parts = [records]
    weight = np.cumsum(pc.binary_length(records.column("data")).to_numpy(zero_copy_only=False)) if len(records) else []
    if threads > 1 and len(records) > 1 and weight[-1] >= _THREADED_BYTES:  # else one file is enough
        cuts = [0, *(int(np.searchsorted(weight, weight[-1] * i / threads)) + 1 for i in range(1, threads)),
                len(records)]
        parts = [records.slice(a, b - a) for a, b in itertools.pairwise(sorted(set(cuts))) if b > a]
    if len(parts) < 2:
        return pa.Table.from_batches(list(land(records.to_batches())), schema=schema)
    results = list(pool.map(lambda part: list(land(part.to_batches())), parts))
    return pa.Table.from_batches([b for r in results for b in r], schema=schema)


@dataclass
class ChangeLogFiles:
    """A change log's small files as the driver last saw them (Delta version), by commit date."""

    version: int
    sizes: dict[str, int]
    dates: dict[str, str]
    skipped: set[str] = field(default_factory=set)  # files a compaction could not read together

    @classmethod
    def read(cls, commit: Commit, below: int) -> ChangeLogFiles:
        found = cls(commit.version, {}, {})
        for name, size, _, dv, values in commit.files():
            if size < below and not dv and PARTITION_COLUMN in values and not (_scheme(name) or name.startswith("/")):
                found.sizes[name], found.dates[name] = size, values[PARTITION_COLUMN]
        return found

    def pick(self, at_least: int, budget: int) -> tuple[str, list[str]] | None:
        """The commit date with the most small files, and those within ``budget`` bytes, if at least
        ``at_least`` of them."""
        by_date: dict[str, list[str]] = {}
        for name, date in self.dates.items():
            if name not in self.skipped:
                by_date.setdefault(date, []).append(name)
        if not by_date:
            return None
        date, names = max(by_date.items(), key=lambda kv: len(kv[1]))
        if len(names) < at_least:
            return None
        out = _within(sorted(names), self.sizes, budget)
        return (date, out) if len(out) >= 2 else None

    def skip(self, names: list[str]) -> None:
        self.skipped.update(names)

    def update(self, version: int, added: list[tuple[str, dict[str, str], int]], removed: list[str],
               below: int) -> None:
        for name in removed:
            self.sizes.pop(name, None)
            self.dates.pop(name, None)
        for name, values, size in added:
            if size < below and PARTITION_COLUMN in values:
                self.sizes[name], self.dates[name] = size, values[PARTITION_COLUMN]
        self.version = version


_RecordRow = namedtuple("_RecordRow", [n for n in RECORD_ARROW.names if n != "data"])  # type: ignore[misc]


def _record_rows(table: pa.Table) -> list[Any]:
    """Record rows (all but their data) from Arrow, read like Spark's Rows (``r.kind``, ``r.db``, ...)."""
    columns = [table.column(n).to_pylist() for n in _RecordRow._fields]
    return [_RecordRow(*r) for r in zip(*columns, strict=True)]


def _first_line(exc: Exception) -> str:
    """An exception's first line; for one from the JVM (py4j), the Java exception's, which says what failed."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    return (text.strip().splitlines() or [type(exc).__name__])[0]


def _widened(lake: list[tuple[str, str]], columns: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The columns (name, new type) whose ``lake`` type ``columns`` widens."""
    current = dict(lake)
    return [(n, t) for n, t in columns if n in current and current[n] != t and widens(current[n], t)]


def _key_range(stats: str | None, key: str) -> tuple[int, int] | None:
    if not stats:
        return None
    parsed = orjson.loads(stats)
    low, high = parsed.get("minValues", {}).get(key), parsed.get("maxValues", {}).get(key)
    return None if low is None or high is None else (int(low), int(high))


def _conform(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """A mirror file's rows (Spark's or ours; columns added since are missing) in the mirror's Arrow schema."""
    have = set(rows.column_names)
    return pa.Table.from_arrays([rows.column(f.name).cast(f.type) if f.name in have else pa.nulls(len(rows), f.type)
                                 for f in schema], schema=schema)


_NUMBER: dict[str, Any] = {**dict.fromkeys(_INTEGER, int), "decimal": Decimal}


def _literal(text: str, dtype: str) -> str:
    """A key bound as SQL: binary from hex, anything else its text cast back to the column's type."""
    if dtype == "binary":
        return f"X'{text}'"
    escaped = text.replace("\\", "\\\\").replace("'", "\\'")
    return f"CAST('{escaped}' AS {dtype})"


def _key_stats(columns: list[tuple[str, str]], pk: list[str]) -> list[str]:
    """A mirror's statistics columns: its key's, but Delta keeps none of binary or boolean columns."""
    types = dict(columns)
    return [k for k in pk if types[k] not in ("binary", "boolean")]


def _stats_columns(columns: list[str]) -> dict[str, str]:
    """A new table's property: collect file statistics of these columns only."""
    return {_STATS_PROPERTY: ",".join(quote(c) for c in columns)}


def _scheme(path: str) -> str | None:
    """The URI scheme of a lake path (s3a, abfss, hdfs, file), None for a plain local path."""
    found = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", path)
    return found.group(1).lower() if found else None


def _join(base: str, *parts: str) -> str:
    """``base``/``parts``: a URI keeps its ``//`` (pathlib would fold s3a://bucket into s3a:/bucket)."""
    if _scheme(base):
        return "/".join([base.rstrip("/"), *parts])
    return str(Path(base, *parts))


def _local(path: str) -> bool:
    """Whether executors can write ``path`` as a local file (the pyarrow change-log writer needs it)."""
    return _scheme(path) is None


def _is_delta(spark: SparkSession, path: str) -> bool:
    """Whether a Delta table is at ``path`` (the session passed: the active one is per thread)."""
    from delta.tables import DeltaTable

    return DeltaTable.isDeltaTable(spark, path)
