"""foreachBatch: one micro-batch of Kafka records -> the lake's change logs, mirrors, quarantine.

Exactly once: every write of batch N carries the job's app id and N (Delta's txnAppId, txnVersion; Iceberg's
snapshot summary), so a batch replayed after a crash skips the writes that already committed. Mirrors apply the
batch's changes in source order (seq, row index): per primary key the last change wins, an update that moves the
key deletes the old key, deletes delete.

``Lander`` orchestrates a batch, format-neutral: its decoding (batch_rows), the records read again from Kafka
(kafka_read), quarantine, per table the union schema (evolution) and the mirror's key (keys), then the table's
share handed to the lake format (lake_format.LakeFormat, made by formats.make_format: delta/format.py, whose
landing is by the driver or by Spark, or iceberg/format.py), table statements, parking and verify.
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from ingester.config import LandConfig

from ..batch.batch_rows import BatchRows, DriverBatch, SeqRange, SparkBatch
from ..batch.evolution import SchemaEvolution, SchemaGroup
from ..decode.decode import RECORD_ARROW, RECORD_DDL, ChunkPiece, RecordRow, reassemble
from ..decode.typed import typed_batches
from ..format.lake_format import QUARANTINE_TABLE, FormatServices, FormatSettings, LakeFormat, TableChanges, Undecodable
from ..iceberg.catalog import IcebergCatalog
from ..iceberg.maintenance import IcebergMaintenance
from ..lake.files import LakeFiles
from ..lake.lease import LakeLease
from ..lake.paths import join, scheme
from ..lake.scratch import Scratch
from ..runtime.driver_threads import DriverThreads
from ..runtime.errors import LandError, registry_error
from ..runtime.memory import RELEASE_ROWS, release_unused
from ..source.driver_read import DriverRead
from ..source.kafka_read import KafkaReader
from ..source.progress import read_landed
from ..source.source_formats import BinlakeRecords, SourceFormat
from ..statements.parking import ParkBook
from ..statements.parking_work import Parking
from ..statements.statements import ApplyPart, StatementAt, plan
from ..statements.type_changes import type_changes
from .formats import make_format
from .sink_parks import ParkedTables, Scope, TableRecords
from .verify import Verifier

if TYPE_CHECKING:
    from ..format.lake_format import VectorMode
    from ..statements.schema_alter import Mode

log = logging.getLogger("binlake.land")
_INLINE_ROWS = 1_000  # a table's row changes in a batch landed by the batch's own thread (Lander._land)


@dataclass
class BatchStats:
    rows: int = 0
    newest_commit_ts: float | None = None  # seconds since the epoch
    seconds: float = 0.0
    verified: int = 0  # verify chunks compared (binlake verify)
    mismatched: int = 0  # of which differ
    records: int | None = None  # the Kafka records the driver read itself (None: Spark's tasks did)


@dataclass
class Lander(ParkedTables):
    spark: SparkSession
    lake: str
    checkpoint: str
    quarantine: bool = False
    bootstrap: str = ""  # Kafka, for records read again: chunks cut by a batch's bound, DDL statements
    topic_prefix: str = ""
    app_id: str = ""
    last: BatchStats = field(default_factory=BatchStats)
    error: LandError | None = None
    begun: int = -1  # the last micro-batch begun
    calls: int = 0  # micro-batches begun (a query that failed before its first is started again: StartRetry)
    # A table's batch of at most this many row changes has its mirror candidates reduced on the driver,
    # which keeps the mirror itself where that reads at most driver_merge_bytes of its files
    driver_rows: int = LandConfig.driver_rows
    # The Kafka source gives a task per topic partition (a topic per table): a batch touching hundreds of
    # tables is decoded in as many tasks as cores instead (or the minPartitions asked for, min_tasks)
    min_tasks: int = 0
    keys: dict[str, list[str]] = field(default_factory=dict)  # land.keys: "<db>.<table>" -> its mirror's key
    source: SourceFormat = field(default_factory=BinlakeRecords)  # what the topics hold (land.source_format)
    # The lake's files as the driver and the executors write them (local disk, or S3: lake/files.py); None:
    # a lake only Spark's own filesystems reach (e.g. abfss://), landed by Spark's writer
    files: LakeFiles | None = None
    lease: LakeLease | None = None  # the lake's lease (job.run): a batch stops the job once another took it
    # These are given to the parts that use them when the Lander is made (mirror_driver, compaction)
    driver_merge_bytes: int = FormatSettings.driver_merge_bytes
    # A batch under a steady trickle adds a small file to a table: once it has this many files under
    # small_file_bytes, the driver's commit rewrites up to compact_bytes of them together with the batch
    # (land.compact_*: mirror_driver.MirrorFiles.small, compaction.ChangeLogCompaction, iceberg_maintenance)
    compact_files: int | None = LandConfig.compact_files
    small_file_bytes: int = LandConfig.small_file_bytes
    compact_bytes: int = LandConfig.compact_bytes
    key_memory: int = LandConfig.key_memory  # the mirrors' files' keys the driver keeps (land.key_memory)
    quiet_compaction: float = FormatSettings.quiet_compaction  # seconds (land.quiet_compaction; format/upkeep.py)
    deletion_vectors: VectorMode = LandConfig.deletion_vectors  # delta/mirror_driver.py, iceberg/format.py
    # format iceberg: the tables' upkeep (land.iceberg_*; None: IcebergMaintenance's defaults with the three above)
    iceberg_maintenance: IcebergMaintenance | None = None
    lake_format: str = "delta"  # land.format: "delta" or "iceberg" (formats.py)
    # format iceberg: the lake's catalog (iceberg/catalog.py), built once by job.run (its Spark session reads it too)
    iceberg_catalog: IcebergCatalog | None = None
    on_incompatible_change: Mode = "rewrite"  # land.on_incompatible_change (schema_alter.py)
    # A table statement that rewrites more mirror rows than this parks its table (land.park_rows; -1: never):
    # the rewrite runs beside the batches, kept in a file beside the checkpoint (``checkpoint_files``: the
    # checkpoint's files; None: no parking), parking.py
    park_rows: int = 100_000
    checkpoint_files: LakeFiles | None = None
    # Its parts, each a job of its own; the lake format (formats.make_format: Delta's or Iceberg's) builds its own
    threads: DriverThreads = field(init=False)
    scratch: Scratch = field(init=False)
    kafka: KafkaReader = field(init=False)
    evolution: SchemaEvolution = field(init=False)
    verifier: Verifier = field(init=False)
    format: LakeFormat = field(init=False)
    parking: Parking | None = field(init=False, default=None)
    driver_read: DriverRead | None = field(init=False, default=None)  # small batches read by the driver

    def __post_init__(self) -> None:
        if not self.app_id:  # stable per checkpoint: the query's identity for Delta's idempotent writes
            where = self.checkpoint if scheme(self.checkpoint) else str(Path(self.checkpoint).absolute())
            digest = hashlib.sha256(where.encode()).hexdigest()[:16]
            self.app_id = f"binlake-land-{digest}"
        if self.files is None:
            self.files = LakeFiles.of(self.lake)
        self.threads = DriverThreads(self.spark, remote=self.files is not None and not self.files.local)
        self.kafka = KafkaReader(self.spark, self.bootstrap)
        self.evolution = SchemaEvolution(self.kafka,
                                         f"{self.topic_prefix}._schema" if self.source.schema_topic else None)
        settings = FormatSettings(self.lake_format, self.lake, self.keys, self.driver_rows, self.driver_merge_bytes,
                                  self.compact_files, self.small_file_bytes, self.compact_bytes,
                                  self.on_incompatible_change, self.deletion_vectors, self.key_memory,
                                  self.quiet_compaction)
        self.scratch = Scratch(self.spark, self.lake, self.files)
        self.scratch.clear()  # what a stopped run left (this job holds the lake's lease: job.run)
        services = FormatServices(self.spark, self.app_id, self.files, self.threads, self.evolution, self.scratch,
                                  self.lease.check if self.lease is not None else None)
        self.format = make_format(settings, services, self.iceberg_catalog, self.iceberg_maintenance)
        self.verifier = Verifier(self.format)
        if self.checkpoint_files is not None and self.driver_rows > 0 and self.files is not None and self.bootstrap:
            self.driver_read = DriverRead(self.bootstrap, self.checkpoint_files, self.checkpoint)
        if self.checkpoint_files is not None:  # (a rename a bounded batch splits parks too: land.park_rows -1 or not)
            files = self.checkpoint_files
            self.parking = Parking(ParkBook(files, self.checkpoint), self._rewrite, self._catch_up,
                                   lambda: read_landed(files, self.checkpoint))

    def path(self, db: str, table: str) -> str:
        return join(self.lake, db, table)

    def close(self) -> None:
        """The driver's threads end (job.run, when the query stops)."""
        if self.parking is not None:
            self.parking.close()
        self.threads.close()
        self.format.close()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        self.calls += 1
        self.begun = batch_id
        try:
            if self.lease is not None:
                self.lease.check()
            self.process(batch, batch_id)
        except LandError as exc:
            self.error = exc
            raise
        except Exception as exc:
            self.error = registry_error(str(exc))  # a decode task's registry failure, said as the registry's line
            if self.error is not None:
                raise self.error from None
            raise

    def process(self, batch: DataFrame, batch_id: int) -> None:
        start = time.monotonic()
        # no parked table's catch-up meanwhile (parking.py), the format's upkeep paused (lake_format.LakeFormat.landing)
        with self._landing(batch_id), self.format.landing():
            rows, records = self._read_here(batch_id)
            if rows is None:
                rows = self._decode(*self._coalesced(batch))
            try:
                stats = self._records(rows, Scope(batch_id, None, partial(self._planned, batch_id)))
                stats.records = records
            finally:
                rows.release()
        stats.seconds = time.monotonic() - start
        self.last = stats
        if stats.rows >= RELEASE_ROWS:
            release_unused()  # what the allocators keep of a large batch (runtime/memory.py)

    def _coalesced(self, batch: DataFrame) -> tuple[DataFrame, int]:
        """The batch in at most as many partitions as tasks are wanted, and how many."""
        tasks = max(self.threads.count, self.min_tasks)
        partitions = batch.rdd.getNumPartitions()
        if partitions > tasks:
            return batch.coalesce(tasks), tasks
        return batch, partitions

    def _records(self, rows: BatchRows, scope: Scope) -> BatchStats:
        """A batch's decoded records landed (or a park's catch-up's: ``scope``): row changes, table statements in
        their parts, quarantine, verify chunks; a parked table's records held back (parking.py)."""
        batch_id = scope.batch_id
        info = rows.info()
        meta = [r for r in info if r.kind == "row"]
        said = [r for r in info if r.kind == "statement"]  # table statements (statements.py)
        orphans = [ChunkPiece(r.topic, r.partition, r.offset, bytes(r.headers), bytes(r.raw)) for r in info
                   if r.kind == "chunk"]
        errors = [Undecodable(r.topic, r.partition, r.offset, r.error, bytes(r.raw), bytes(r.headers)) for r in info
                  if r.kind == "error"]
        verified: list[RecordRow] = []  # verify rows reassembled from chunks
        if orphans:
            log.info("batch %d: %d chunk pieces reassembled across partition splits", batch_id, len(orphans))
            extra, carried = reassemble(orphans, self.kafka.fetch)
            if carried:
                first = min(carried)
                log.info("batch %d: %d chunks of a record cut by the batch's bound carried over to the next "
                         "batch, from %s[%d]@%d", batch_id, len(carried), *first)
            errors += [Undecodable(r.topic, r.partition, r.offset, r.error or "", r.raw or b"", r.headers or b"")
                       for r in extra if r.kind == "error"]
            good = [r for r in extra if r.kind == "row"]
            if good:
                meta += rows.add(good)
            verified += [r for r in extra if r.kind == "verify"]
        if errors and scope.park is None:  # (a catch-up's were the batches': quarantined, or the job stopped)
            self._undecodable(errors, batch_id)
        if scope.park is not None:  # a catch-up: its tables' records from where each was parked
            meta, said = [r for r in meta if scope.takes(r)], [r for r in said if scope.takes(r)]
        log.debug("batch %d: decoded%s", batch_id, rows.where)
        held = partial(self._held, scope)
        ingest = int(time.time() * 1e6)
        statements = [StatementAt.of(r, batch_id, ingest) for r in said]
        # column types changed without an entry saying so (of tables not held back: their lake tables are the
        # rewrite's), and those a park of this batch made (a replay then plans the same parts)
        statements += self._type_changes([r for r in meta if not held(r)], [r for r in said if not held(r)],
                                         batch_id)
        statements += self._parked_here(scope, statements)
        if statements:
            stats = self._land_statements(rows, meta, statements, scope, TableRecords.of(meta, said))
        else:
            stats = self._land(rows, [r for r in meta if not held(r)], batch_id)
        self.source.landed([r for r in meta if not held(r)])
        verify = rows.verify_rows(verified) if verified or any(r.kind == "verify" for r in info) else None
        if verify is not None:
            verify = self._verify_rows(verify, scope)
        if verify is not None and len(verify):  # binlake verify: after the batch has landed
            results = self.verifier.check(verify, partial(self._changed_after, rows), batch_id)
            stats.verified, stats.mismatched = len(results), sum(not r.match for r in results)
        return stats

    def _read_here(self, batch_id: int) -> tuple[BatchRows | None, int | None]:
        """A small batch read from Kafka and decoded by the driver, and its records' count (source/driver_read.py);
        (None, None) where Spark's tasks are to read it."""
        start = time.monotonic()
        records = self.driver_read.records(batch_id) if self.driver_read is not None else None
        if records is None:
            return None, None
        read = time.monotonic()
        try:
            decoded = pa.Table.from_batches(list(self.source.decoder(ship=self.driver_rows)(records.to_batches())),
                                            schema=RECORD_ARROW)
        except Exception as exc:  # (Spark's tasks decode it again, and say what is wrong as they always did)
            log.debug("batch %d: not decoded by the driver: %s", batch_id, exc)
            return None, None
        if _withheld(decoded):
            return None, None
        log.debug("batch %d: %d records read by the driver (%.2fs), decoded (%.2fs)", batch_id, records.num_rows,
                  read - start, time.monotonic() - read)
        return DriverBatch(self.scratch, decoded), records.num_rows

    def _decode(self, batch: DataFrame, tasks: int) -> BatchRows:
        """The decoded batch, whole, in the driver (one Spark job, nothing cached), when the lake is local
        and the batch holds at most ``driver_rows`` row changes: each task ships at most its share of them,
        and one that has more stops early and says so (``withheld``). Else (the batch is larger, or the
        lake remote) it is decoded again the cached way, in Spark."""
        if self.driver_rows > 0 and self.files is not None:
            table = batch.mapInArrow(self.source.decoder(ship=self.driver_rows // max(1, tasks)),
                                     RECORD_DDL).toArrow()
            if not _withheld(table):
                return DriverBatch(self.scratch, table)
            log.debug("more than %d row changes in the batch: decoded again, cached in Spark", self.driver_rows)
        return SparkBatch(self.spark, batch, self.source.decoder())

    @staticmethod
    def _changed_after(rows: BatchRows, db: str, table: str, columns: list[tuple[str, str]],
                       key: list[str]) -> list[tuple[bytes, tuple[Any, ...]]]:
        """The (seq, key) of each row image of the table the batch changed (``key``'s values)."""
        changed: list[tuple[bytes, tuple[Any, ...]]] = []
        records = rows.table(db, table).records(db, table)
        for typed in typed_batches(columns, records.to_batches()):
            seqs = typed.column("seq").to_pylist()
            for image in ("before", "after"):
                images = typed.column(image)
                values = pa.Table.from_batches([pa.RecordBatch.from_struct_array(images)]).select(key).to_pylist()
                valid = images.is_valid().to_pylist()
                changed += [(seq, tuple(v[k] for k in key)) for seq, v, ok in zip(seqs, values, valid, strict=True)
                            if ok]
        return changed

    def _undecodable(self, errors: list[Undecodable], batch_id: int) -> None:
        first = min(errors)
        if not self.quarantine:
            raise LandError(f"undecodable record at {first.topic}[{first.partition}]@{first.offset}: {first.error} "
                            f"({len(errors)} in this batch; --quarantine lands them in {QUARANTINE_TABLE})")
        log.warning("quarantined %d undecodable records, first %s[%s]@%s: %s", len(errors), first.topic,
                    first.partition, first.offset, first.error)
        self.format.quarantine(errors, batch_id)

    def _type_changes(self, meta: list[Any], said: list[Any], batch_id: int) -> list[StatementAt]:
        """``alter`` statements of the batch's type changes that no entry says (type_changes.py)."""
        if self.format.table_statements.alters is None or not meta:
            return []
        ingest = int(time.time() * 1e6)
        return type_changes(meta, [StatementAt.of(r, batch_id, ingest) for r in said], self.format.lake_columns,
                            lambda db, t, seq, at: self.evolution.ddl_before(db, t, seq, at), batch_id, ingest)

    def _land_statements(self, rows: BatchRows, meta: list[Any], statements: list[StatementAt], scope: Scope,
                         where: TableRecords) -> BatchStats:
        """A batch with table statements, in parts (statements.plan): the tables no statement names as any batch,
        then the named ones' rows up to each statement, each statement, and their rows after it. A statement whose
        mirror rewrite is long parks its tables (their records from it on are held back: parking.py), and so does
        one that names a parked table; the parts are the same whichever tables are parked, so that a replayed batch
        writes the same parts."""
        batch_id = scope.batch_id
        held = partial(self._held, scope)
        named = {n for s in statements for n in s.names}
        stats = self._land(rows, [r for r in meta if (r.db, r.tbl) not in named and not held(r)], batch_id)
        for step in plan(statements):
            if isinstance(step, ApplyPart):
                for action in step.actions:
                    with self.format.part(f"{step.part}.{action.index}"):
                        awaiting = self._awaited(action, scope, where)  # a rename's entry a bounded batch cut
                        if self._tied(action, scope, where, awaiting) or self._waits(action, scope, where, awaiting) \
                                or self._parks(action, scope, where):
                            continue
                        log.info("batch %d: %s", batch_id, action.describe())
                        self.format.apply(action)
                    stats.newest_commit_ts = max(stats.newest_commit_ts or 0.0, action.at.commit_ts / 1e6)
                continue
            lo, hi = step.between
            part = [r for r in meta if (r.db, r.tbl) in step.tables and (lo is None or bytes(r.first_seq) > lo)
                    and (hi is None or bytes(r.first_seq) < hi) and not held(r)]
            if part:
                with self.format.part(step.part):
                    more = self._land(rows, part, batch_id, step.between)
                stats.rows += more.rows
                stats.newest_commit_ts = max(stats.newest_commit_ts or 0.0, more.newest_commit_ts or 0.0)
        return stats

    def _land(self, rows: BatchRows, meta: list[Any], batch_id: int, between: SeqRange = None) -> BatchStats:
        stats = BatchStats()
        groups: dict[tuple[str, str, str], SchemaGroup] = {}
        for r in meta:
            g = groups.setdefault((r.db, r.tbl, r.schema), SchemaGroup(r.schema))
            g.add(bytes(r.first_seq), r.first_position, r.rows, r.newest, r.partial)
        tables: dict[tuple[str, str], list[SchemaGroup]] = {}
        for (db, table, _), g in sorted(groups.items(), key=lambda kv: kv[1].first_seq):
            tables.setdefault((db, table), []).append(g)
        ingest = int(time.time() * 1e6)
        ordered = sorted(tables.items())
        for (db, table), schemas in ordered:
            if self.format.table_statements.ended(db, table):  # rows of a table created anew after a DROP or RENAME
                head = schemas[0]
                key = self.format.keys.configured_for(db, table) or list(head.meta["pk"])
                with self.format.part("create"):  # before the tables land side by side: the identity is the format's
                    self.format.table_statements.recreate(db, table, [(n, t) for n, t in head.meta["columns"]], key,
                                                          head.first_seq, batch_id)
        # Tables are independent (each its own commits, idempotent by its txnVersion). A large table's share
        # goes on a thread (Parquet writing and compute kernels release the GIL); a small one's is GIL-bound
        # Python and pyarrow calls, which cost more handed between threads than done here (200 one-row
        # tables: 0.7 s here, 1.0 s on threads), beside the large ones. On an object store every table goes on
        # a thread: its share waits on the store's requests most of the time (200 one-row tables: 7.1 s
        # here, 4.8 s on threads: bench/results/land_tables_cluster_s3.md)
        large = [(name, schemas) for name, schemas in ordered
                 if self.threads.remote or sum(g.n for g in schemas) > _INLINE_ROWS]
        # (each in a copy of this thread's context: the batch part's writer identity, lake_format.LakeFormat.part)
        landing = [self.threads.table_workers.submit(contextvars.copy_context().run, self._land_one, rows, name,
                                                     schemas, batch_id, ingest, between)
                   for name, schemas in (large if len(ordered) > 1 else ())]
        errors: list[BaseException | None] = []
        for name, schemas in ordered:
            if len(ordered) == 1 or (name, schemas) not in large:
                try:
                    self._land_one(rows, name, schemas, batch_id, ingest, between)
                except Exception as exc:  # every table's work ends before an error is raised
                    errors.append(exc)
        errors += [f.exception() for f in landing]
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            raise first
        for _, schemas in ordered:
            stats.rows += sum(g.n for g in schemas)
            newest = max(g.newest for g in schemas) / 1e6
            stats.newest_commit_ts = max(stats.newest_commit_ts or 0.0, newest)
        return stats

    def _land_one(self, rows: BatchRows, name: tuple[str, str], schemas: list[SchemaGroup], batch_id: int,
                  ingest: int, between: SeqRange = None) -> None:
        db, table = name
        t = time.monotonic()
        lake = self.format.lake_columns(db, table)
        columns = self.evolution.evolve(db, table, lake, schemas)
        # The mirror's key: the table's (or land.keys'), the same as the mirror's own (keys.py)
        pk = self.format.keys.key(db, table, [(g.meta, g.first_position) for g in schemas])
        log.debug("%s.%s: schema %.1fs", db, table, time.monotonic() - t)
        subset = rows.table(db, table, between)
        t = time.monotonic()
        self.format.land(subset, TableChanges(db, table, lake, columns, pk, schemas, batch_id, ingest))
        log.debug("%s.%s: landed in %.1fs", db, table, time.monotonic() - t)


def _withheld(decoded: pa.Table) -> bool:
    """Whether a decode stopped early (decode.decode_partition's ``ship``)."""
    return bool(pc.any(pc.equal(decoded.column("kind"), "withheld")).as_py())
