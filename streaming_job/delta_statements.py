"""Table statements (statements.py) applied to a Delta lake: a row of its own in the table's change log, and
the statement's effect on the mirror, each write idempotent by the batch part's txnAppId and the batch as
txnVersion (lake_format.LakeFormat.part). Statements are rare, so they go through the JVM's Delta (Spark's
writer, DeltaTable's DML), which reaches every lake the job lands in."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from .delta_tables import DeltaTables
from .errors import LandError
from .evolution import SchemaEvolution
from .lake_paths import join
from .statements import StatementAt, statement_columns, statement_row
from .writer import PARTITION_COLUMN

log = logging.getLogger("binlake.land")
_TS = pa.timestamp("us", tz="UTC")
_CHANGE_LOG_STATS = ["commit_ts", "kafka_offset"]


@dataclass
class DeltaStatements:
    spark: SparkSession
    lake: str
    delta: DeltaTables
    evolution: SchemaEvolution

    def apply(self, at: StatementAt) -> None:
        ops: dict[str, Callable[[StatementAt], None]] = {"truncate": self.truncate}
        op = ops.get(at.statement.op)
        if op is None:
            raise LandError(f"`{at.name[0]}`.`{at.name[1]}`: the {at.statement.op} statement at {at.position} cannot "
                            f"be applied to a Delta lake yet: {' '.join(at.statement.statement.split())[:200]}")
        op(at)

    def mirror(self, db: str, table: str) -> str:
        return join(self.lake, db, table)

    def change_log(self, db: str, table: str) -> str:
        return join(self.lake, db, table + "__changes")

    def truncate(self, at: StatementAt) -> None:
        """Every row of the mirror removed (one commit of Delta's DELETE: its files removed, none rewritten)."""
        db, table = at.name
        self.change_row(at)
        path = self.mirror(db, table)
        if self.delta.exists(path):
            from delta.tables import DeltaTable

            with self.delta.batch_writes(at.batch_id):
                DeltaTable.forPath(self.spark, path).delete()

    def change_row(self, at: StatementAt) -> None:
        """The statement's row in its table's change log (statements.statement_row), the change log made where the
        table has none yet (with the statement's columns; none known: no row, said in the log)."""
        db, table = at.name
        path = self.change_log(db, table)
        columns = self.evolution.lake_columns(db, table, path) or statement_columns(at.statement)
        if not columns:
            log.warning("`%s`.`%s`: the %s statement at %s finds no table in the lake and names no columns: "
                        "nothing to apply", db, table, at.statement.op, at.position)
            return
        row = statement_row(at, columns)
        dates = pc.cast(pc.cast(row.column("commit_ts"), pa.timestamp("us")), pa.date32())
        row = row.append_column(PARTITION_COLUMN, dates).append_column(
            "ingest_ts", pa.array([at.ingest_micros], _TS))
        frame = self.spark.createDataFrame(row)
        if self.delta.exists(path):
            self.delta.append(frame, path, at.batch_id, merge_schema=True)
        else:
            self.delta.append(frame, path, at.batch_id, partition_by=PARTITION_COLUMN, stats=_CHANGE_LOG_STATS)
            self.evolution.landed(db, table, columns)
