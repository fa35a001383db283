"""Delta Lake as the lake's format (lake_format.LakeFormat): a table's change log and mirror at
``<lake>/<db>/<table>[__changes]``, each write of batch N carrying Delta's SetTransaction (txnAppId = the
job's app id, txnVersion = N). The driver writes the Delta logs of tables it reaches itself (commit.Commit),
delta-spark the others; the table's share lands by the driver or in Spark tasks (landing.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ..batch.batch_rows import TableRows
from ..batch.keys import MirrorKeys
from ..batch.small_files import COMPACT_FILES, TIDY_RATIO
from ..batch.writer import PARTITION_COLUMN, land_partition
from ..decode.typed import typed_batches, typed_ddl
from ..format.lake_format import (
    QUARANTINE_DDL,
    QUARANTINE_TABLE,
    FormatServices,
    FormatSettings,
    LakeFormat,
    TableChanges,
    Undecodable,
    quarantine_rows,
)
from ..format.mirror_read import MirrorRead
from ..format.upkeep import Due
from ..lake.files import LakeFiles
from ..lake.generations import ChangeLogGenerations
from ..lake.paths import join
from ..statements.statements import Action
from ..statements.table_statements import TableStatements
from .commit import Commit
from .compaction import ChangeLogCompaction
from .evolution import DeltaEvolution
from .keys import DeltaKeys
from .landing import DriverLanding, SparkLanding, TableBatch
from .mirror_driver import DriverMirror
from .mirror_spark import SparkMirror
from .mirrors import Mirrors
from .schema import delta_alters
from .statements import DeltaStatementTables
from .tables import DeltaTables, stats_columns
from .tidy import DeltaTidy
from .verify import DeltaMirrors

if TYPE_CHECKING:
    from ..statements.schema_alter import Mode

log = logging.getLogger("binlake.land")
_CHANGE_LOG_STATS = ["commit_ts", "kafka_offset"]  # Delta refuses statistics columns of BINARY type (seq)


@dataclass
class DeltaFormat(LakeFormat):
    spark: SparkSession
    lake: str
    delta: DeltaTables
    columns: DeltaEvolution  # the tables' columns as their Delta logs have them, and their ALTERs
    files: LakeFiles | None  # None: a lake only Spark's own filesystems reach, landed by Spark's writer
    driver_rows: int
    keys: MirrorKeys
    mirrors: Mirrors
    on_driver: DriverLanding
    in_spark: SparkLanding
    on_incompatible_change: Mode = "rewrite"  # land.on_incompatible_change (schema_alter.py)
    tidy: DeltaTidy | None = None  # quiet mirrors compacted whole (land.quiet_compaction; None: never)
    name: str = "delta"
    verify: DeltaMirrors = field(init=False)
    generations: ChangeLogGenerations = field(init=False)

    @classmethod
    def build(cls, settings: FormatSettings, services: FormatServices) -> DeltaFormat:
        """A Delta lake's parts: its tables (the driver's log or the JVM's Delta), the mirrors' keys as their logs
        record them, the mirrors (kept by the driver or by Spark's MERGE), the change logs' compaction, and a
        table's landing by the driver or in Spark."""
        spark, files, threads = services.spark, services.files, services.threads
        delta = DeltaTables(spark, services.app_id, files)
        columns = DeltaEvolution(spark, delta)
        compact_files = settings.compact_files or COMPACT_FILES
        compaction = ChangeLogCompaction(compact_files, settings.small_file_bytes, settings.compact_bytes, files)
        driver = DriverMirror(delta, threads, settings.driver_merge_bytes, compact_files,
                              settings.small_file_bytes, settings.compact_bytes, settings.deletion_vectors,
                              settings.key_memory)
        keys = DeltaKeys(spark, partial(join, settings.lake), delta.log).mirror_keys(settings.keys)
        mirrors = Mirrors(spark, settings.lake, delta, services.evolution, keys, driver,
                          SparkMirror(spark, delta, columns, settings.deletion_vectors == "always"), services.scratch)
        tidy = DeltaTidy(files, TIDY_RATIO * settings.compact_bytes, services.lease, settings.quiet_compaction) \
            if files is not None and settings.quiet_compaction > 0 else None
        return cls(spark, settings.lake, delta, columns, files, settings.driver_rows, keys, mirrors,
                   DriverLanding(delta, threads, compaction, mirrors), SparkLanding(delta, mirrors),
                   settings.on_incompatible_change, tidy)

    def __post_init__(self) -> None:
        self.verify = DeltaMirrors(self.spark, self.lake, self.delta)
        tables = DeltaStatementTables(self.spark, self.lake, self.delta, self.columns, self.files)
        self.generations = ChangeLogGenerations(tables.properties)
        self.table_statements = TableStatements(tables, self.generations, self.forget)
        self.table_statements.alters = delta_alters(tables, self.table_statements)
        self.table_statements.alters.mode = self.on_incompatible_change

    def forget(self, db: str, table: str) -> None:
        """A statement changed the table's lake tables: their columns, their mirror's (and its key), what the
        driver's and Spark's mirror strategies keep of it are read again."""
        self.columns.forget(db, table)
        self.mirrors.forget(db, table)
        super().forget(db, table)
        self.mirrors.driver.forget(db, table)
        self.mirrors.in_spark.forget(db, table)

    @property
    def identity(self) -> str:
        return self.delta.app_id

    @identity.setter
    def identity(self, value: str) -> None:
        self.delta.app_id = value

    def change_log(self, db: str, table: str) -> str:
        """The table's current change log (generations.py)."""
        return join(self.lake, db, self.table_statements.change_log(db, table))

    def lake_columns(self, db: str, table: str) -> list[tuple[str, str]]:
        return self.columns.lake_columns(db, table, self.change_log(db, table))

    def verify_mirror(self, db: str, table: str) -> MirrorRead | None:
        return self.verify.open(db, table)

    def record_verify(self, rows: list[dict[str, Any]], batch_id: int) -> None:
        self.verify.record(rows, batch_id)

    def quarantine(self, errors: list[Undecodable], batch_id: int) -> None:
        df = (self.spark.createDataFrame(quarantine_rows(errors), QUARANTINE_DDL)
              .withColumn("batch_id", F.lit(batch_id)).withColumn("ingest_ts", F.current_timestamp()))
        self.delta.append(df, join(self.lake, QUARANTINE_TABLE), batch_id)

    def land(self, rows: TableRows, changes: TableChanges) -> None:
        """(Its mirror held: no quiet compaction commits to it meanwhile, delta/tidy.py.)"""
        with self._held([(changes.db, changes.table)]):
            self._land(rows, changes)
            self.columns.landed(changes.db, changes.table, changes.columns)  # the lake now has the batch's columns
        if changes.pk:
            self._touched(changes.db, changes.table)

    def apply(self, action: Action) -> None:
        with self._held(sorted(action.names)):
            super().apply(action)
        for db, table in action.names:
            self._touched(db, table)

    @contextmanager
    def _held(self, names: Iterable[tuple[str, str]]) -> Iterator[None]:
        with ExitStack() as stack:
            if self.tidy is not None:
                for name in names:
                    stack.enter_context(self.tidy.upkeep.hold(name))
            yield

    def _touched(self, db: str, table: str) -> None:
        """The mirror's quiet compaction falls due once no commit changes it for land.quiet_compaction."""
        if self.tidy is not None:
            self.tidy.upkeep.touched((db, table), Due(join(self.lake, db, table), {}, []))

    def landing(self) -> AbstractContextManager[None]:
        return self.tidy.upkeep.landing() if self.tidy is not None else nullcontext()

    def close(self) -> None:
        """The job ends: a quiet compaction under way finishes, none starts (a failure of one raised)."""
        if self.tidy is not None:
            self.tidy.upkeep.close()

    def _land(self, rows: TableRows, changes: TableChanges) -> None:
        """The change log brought to the batch's schema and its transaction opened; then one pass over the
        table's row changes (writer.land_partition) writes the change-log files, committed at once, and
        leaves the mirror's candidates: by the driver where the batch is small and the driver commits
        (landing.DriverLanding), else by Spark (SparkLanding). On lakes only Spark reaches, Spark's own
        writer lands the change log first (slower), idempotent by txnVersion."""
        db, table, lake, columns, batch_id = changes.db, changes.table, changes.lake, changes.columns, changes.batch_id
        path = self.change_log(db, table)
        t = time.monotonic()
        ddl = f"{typed_ddl(columns)}, {PARTITION_COLUMN} date, ingest_ts timestamp"
        if lake:
            self.columns.add_columns(path, lake, columns, nested=True)
        elif self.files is None:  # a new change log: its schema, partitioning and statistics columns, no rows yet
            empty = self.spark.createDataFrame([], ddl)
            self.delta.append(empty, path, -1, partition_by=PARTITION_COLUMN, stats=_CHANGE_LOG_STATS,
                              idempotent=False)
        txn: Commit | None = None
        if self.files is not None:
            txn = commit = self.delta.transaction(path)
            if not lake:  # a new change log, created by the commit of its first files
                commit.create(ddl, [PARTITION_COLUMN], stats_columns(_CHANGE_LOG_STATS))
            write = not self.delta.done(commit, path, batch_id)  # else a replay: the change log has this batch
            log.debug("%s.%s: change log schema and transaction %.1fs", db, table, time.monotonic() - t)
        else:  # a lake only Spark reaches: Spark's own writer (slower), idempotent by txnVersion
            write = False
            t = time.monotonic()
            changed = (rows.frame().mapInArrow(partial(typed_batches, columns), typed_ddl(columns))
                       .withColumn(PARTITION_COLUMN, F.to_date("commit_ts"))
                       .withColumn("ingest_ts", F.timestamp_micros(F.lit(changes.ingest_micros))))
            self.delta.append(changed, path, batch_id, partition_by=PARTITION_COLUMN)
            log.debug("%s.%s: change log (Spark writer) %.1fs", db, table, time.monotonic() - t)
        if not (write or changes.pk):
            return
        land = land_partition(columns, changes.pk, path if write else None, changes.ingest_micros, self.files)
        landing = self.on_driver if txn is not None and changes.rows <= self.driver_rows else self.in_spark
        landing.land(rows, TableBatch(changes, path, txn, write, land))
