"""``binlake verify`` on a Delta lake (delta/format.DeltaFormat): a mirror's rows read for the comparison, and
the results appended to the Delta table ``<lake>/_verify`` (idempotent by the micro-batch's txnVersion).

Where the driver reaches the lake's files (local disk, S3) it reads the mirror's Delta log and only the
Parquet files whose key statistics overlap the chunks' range, itself (no Spark job per table), without the rows
their deletion vectors delete; other lakes, and partitioned mirrors, are read by Spark."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ..batch.key_stats import file_range
from ..batch.mirror import SEQ, conform
from ..batch.writer import write_table_file
from ..format.mirror_read import KeyCut, MirrorRead
from ..format.verify_results import RESULT_COLUMNS, VERIFY_TABLE, result_schema
from ..lake.delta_log import TableLog
from ..lake.files import LakeFiles
from ..lake.paths import join
from .tables import DeltaTables
from .vector_files import VectorFiles

RESULT_DDL = ", ".join(f"`{n}` {t}" for n, t in RESULT_COLUMNS)


class DeltaMirrors:
    """The Delta mirrors of a lake, opened for verify; its results table."""

    def __init__(self, spark: SparkSession, lake: str, delta: DeltaTables) -> None:
        self.spark = spark
        self.lake = lake
        self.delta = delta

    def open(self, db: str, table: str) -> MirrorRead:
        path = join(self.lake, db, table)
        table_log = self._driver_log(path)
        if table_log is not None:
            assert self.delta.files is not None
            return _DriverRead(self.delta.files, table_log)
        return _SparkRead(self.spark, self.spark.read.format("delta").load(path))

    def _driver_log(self, path: str) -> TableLog | None:
        """The mirror's log where the driver can read its files: on a lake it reaches (local or S3), without
        partitions (else Spark reads it)."""
        table_log = self.delta.log(path)
        if table_log is None or table_log.version < 0 or table_log.metadata.get("partitionColumns"):
            return None
        return table_log

    def record(self, rows: list[dict[str, Any]], batch_id: int) -> None:
        """Results appended to ``<lake>/_verify``, idempotent by the batch's txnVersion: a file and a commit of
        the driver's where it writes the lake's logs (a Spark job and the JVM's Delta took 2-3 s a batch), else
        Spark's append."""
        path = join(self.lake, VERIFY_TABLE)
        if self.delta.files is not None and self.delta.log(path) is not None:
            commit = self.delta.transaction(path)
            if commit.version < 0:
                commit.create(RESULT_DDL, [], {})
            if self.delta.done(commit, path, batch_id):
                return
            table = pa.Table.from_pylist([{n: r[n] for n, _ in RESULT_COLUMNS} for r in rows],
                                         schema=result_schema())
            version = commit.append([write_table_file(self.delta.files, path, table)], self.delta.app_id,
                                    batch_id, [])
            self.delta.committed(path, version, batch_id)
            return
        values = [tuple(r[n] for n, _ in RESULT_COLUMNS) for r in rows]
        self.delta.append(self.spark.createDataFrame(values, RESULT_DDL), path, batch_id)


class _DriverRead(MirrorRead):
    def __init__(self, files: LakeFiles, table_log: TableLog) -> None:
        self.files = files
        self.vectors = VectorFiles(files)
        self.log = table_log
        self.columns = [(n, t) for n, t in table_log.columns() if not n.startswith("_binlake_")]

    def rows(self, cut: KeyCut) -> pa.Table:
        """The rows of the files whose first key may lie in the cut (files whose statistics say it cannot are
        not read): a superset of what Spark's read gives."""
        schema = cut.schema
        wanted = cut.bounds()
        exact = cut.keys is None and all(b is None or isinstance(b, int) for b in wanted)  # file ranges: integers
        parts = []
        for name, add in self.log.files.items():
            held = file_range(add.get("stats"), cut.pk[0]) if exact else None
            if held is not None and not held.meets(wanted):
                continue  # the file's keys all lie outside the chunks' range
            rows = self.vectors.live(self.files.read_parquet(join(self.log.path, name)), self.log.path,
                                     add.get("deletionVector"))
            parts.append(cut.filter(conform(rows, schema)))
        return pa.concat_tables(parts) if parts else schema.empty_table()


class _SparkRead(MirrorRead):
    def __init__(self, spark: SparkSession, mirror: DataFrame) -> None:
        self.spark = spark
        self.mirror = mirror
        self.columns = [(f.name, f.dataType.simpleString()) for f in mirror.schema
                        if not f.name.startswith("_binlake_")]

    def rows(self, cut: KeyCut) -> pa.Table:
        mirror, pk = self.mirror, cut.pk
        if cut.keys is None:
            found = mirror.filter(_range(pk, cut.low, cut.high)) if cut.low is not None or cut.high is not None \
                else mirror
        else:
            found = mirror.limit(0) if not cut.keys else mirror.join(self.spark.createDataFrame(cut.key_table()), pk,
                                                                      "left_semi")
        return found.select(*[F.col(f"`{n}`") for n in cut.names], F.col(SEQ)).toArrow()


def _range(pk: list[str], low: tuple[Any, ...] | None, high: tuple[Any, ...] | None) -> Column:
    """The mirror's rows with low < key <= high (the key's columns in order, compared as a tuple)."""

    def beyond(bound: tuple[Any, ...], above: bool) -> Column:
        """key > bound (above) or key <= bound, lexicographically over the key's columns."""
        def strict(k: str, v: Any) -> Column:
            return F.col(f"`{k}`") > F.lit(v) if above else F.col(f"`{k}`") < F.lit(v)

        cond = strict(pk[-1], bound[-1]) if above else F.col(f"`{pk[-1]}`") <= F.lit(bound[-1])
        for k, v in zip(reversed(pk[:-1]), reversed(bound[:-1]), strict=True):
            cond = strict(k, v) | ((F.col(f"`{k}`") == F.lit(v)) & cond)
        return cond

    parts = [beyond(bound, above) for bound, above in ((low, True), (high, False)) if bound is not None]
    return parts[0] if len(parts) == 1 else parts[0] & parts[1]
