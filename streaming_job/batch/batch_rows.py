"""A micro-batch's decoded records, wherever they are: in the driver (DriverBatch: the batch shipped whole
by its one decoding job, as Arrow) or in Spark (SparkBatch: decoded and cached, the driver given all but
the row data). A table's share (TableRows) goes to the driver or to Spark as its landing needs."""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections import namedtuple
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..decode.decode import RECORD_ARROW, RECORD_DDL, RecordRow
from ..lake.scratch import Scratch

log = logging.getLogger("binlake.land")
SeqRange = tuple[bytes | None, bytes | None] | None


class TableRows(ABC):
    """One table's record rows of a batch."""

    @abstractmethod
    def records(self, db: str, table: str) -> pa.Table:
        """The rows' topic, partition, offset and data, in the driver."""

    @abstractmethod
    def frame(self) -> DataFrame:
        """The rows in Spark."""


class DriverRows(TableRows):
    def __init__(self, scratch: Scratch, rows: pa.Table, kept: list[str | None]) -> None:
        self.scratch = scratch
        self.rows = rows
        self.kept = kept  # the batch's scratch directories, removed when it is released
        self._frame: DataFrame | None = None

    def records(self, db: str, table: str) -> pa.Table:
        return self.rows.select(["topic", "partition", "offset", "data"])

    def frame(self) -> DataFrame:
        """For Spark's paths (chunks reassembled on top of a full batch): through the lake's files (scratch.py)."""
        if self._frame is None:
            self._frame, directory = self.scratch.put(self.rows, RECORD_DDL)
            self.kept.append(directory)
        return self._frame


class SparkRows(TableRows):
    def __init__(self, rows: DataFrame) -> None:
        self.rows = rows

    def records(self, db: str, table: str) -> pa.Table:
        t = time.monotonic()
        records = self.rows.select("topic", "partition", "offset", "data").toArrow()
        log.debug("%s.%s: row changes to the driver %.1fs", db, table, time.monotonic() - t)
        return records

    def frame(self) -> DataFrame:
        return self.rows


class BatchRows(ABC):
    """A micro-batch's decoded records: every record row (``kind``: row, chunk, error) and the row changes."""

    where = ""  # for the log: where the batch was decoded to

    @abstractmethod
    def info(self) -> list[Any]:
        """Every record row but its data, read like Spark's Rows (``r.kind``, ``r.db``, ...)."""

    @abstractmethod
    def add(self, good: list[RecordRow]) -> list[Any]:
        """Rows of records reassembled by the driver (RECORD_ARROW tuples) join the batch's row changes;
        returns them but their data, as ``info``."""

    @abstractmethod
    def table(self, db: str, table: str, between: SeqRange = None) -> TableRows:
        """One table's row changes; ``between``: only its records whose first sequence is in the open range
        (lo, hi) (either None: unbounded), the rows between two table statements (statements.py)."""

    def verify_rows(self, more: list[RecordRow]) -> pa.Table:
        """The batch's verify rows (streaming_job/land/verify.py), in the driver, in batch order, and ``more`` (verify
        rows of records reassembled by the driver)."""
        found = self._verify_rows()
        if not more:
            return found
        return pa.concat_tables([found, _arrow(more)])

    @abstractmethod
    def _verify_rows(self) -> pa.Table:
        """The batch's verify rows, every column."""

    @abstractmethod
    def release(self) -> None:
        """The batch is landed (or failed): what it holds in Spark is let go."""


class DriverBatch(BatchRows):
    where = " (to the driver)"

    def __init__(self, scratch: Scratch, shipped: pa.Table) -> None:
        self.scratch = scratch
        self.shipped = shipped
        self._kept: list[str | None] = []
        self.rows, self._spans = _by_table(shipped.filter(pc.equal(shipped.column("kind"), "row")))

    def info(self) -> list[Any]:
        return _record_rows(self.shipped.drop_columns(["data"]))

    def add(self, good: list[RecordRow]) -> list[Any]:
        more = _arrow(good)
        self.rows, self._spans = _by_table(pa.concat_tables([self.rows, more]))
        return _record_rows(more.drop_columns(["data"]))

    def table(self, db: str, table: str, between: SeqRange = None) -> TableRows:
        """A slice of the rows, which are grouped by table once for the batch (a filter per table costs a
        pass over the whole batch each: quadratic in the tables a batch touches)."""
        start, length = self._spans.get((db, table), (0, 0))
        rows = self.rows.slice(start, length)
        if between is not None:
            rows = rows.filter(_in_range(rows.column("first_seq"), between))
        return DriverRows(self.scratch, rows, self._kept)

    def _verify_rows(self) -> pa.Table:
        return self.shipped.filter(pc.equal(self.shipped.column("kind"), "verify"))

    def release(self) -> None:
        """Its tables' files in the lake's scratch directory, if any, removed."""
        for directory in self._kept:
            self.scratch.remove(directory)
        self._kept.clear()


class SparkBatch(BatchRows):
    def __init__(self, spark: SparkSession, batch: DataFrame, decode: Callable[..., Any]) -> None:
        """One job decodes (and caches) the batch (``decode``: the source format's mapInArrow function); the
        driver gets everything but the row data."""
        self.spark = spark
        self.decoded = batch.mapInArrow(decode, RECORD_DDL).persist()
        self.rows = self.decoded.filter("kind = 'row'")

    def info(self) -> list[Any]:
        return self.decoded.drop("data").collect()

    def add(self, good: list[RecordRow]) -> list[Any]:
        extra = self.spark.createDataFrame(good, RECORD_DDL)
        self.rows = self.rows.unionByName(extra)
        return extra.drop("data").collect()

    def table(self, db: str, table: str, between: SeqRange = None) -> TableRows:
        wanted = (F.col("db") == db) & (F.col("tbl") == table)
        if between is not None:
            lo, hi = between
            if lo is not None:
                wanted = wanted & (F.col("first_seq") > F.lit(bytearray(lo)))
            if hi is not None:
                wanted = wanted & (F.col("first_seq") < F.lit(bytearray(hi)))
        # minPartitions may have made many small partitions: as many tasks as cores is enough here
        return SparkRows(self.rows.filter(wanted).coalesce(self.spark.sparkContext.defaultParallelism))

    def _verify_rows(self) -> pa.Table:
        return self.decoded.filter("kind = 'verify'").toArrow().cast(RECORD_ARROW)

    def release(self) -> None:
        self.decoded.unpersist()


def _in_range(seqs: pa.ChunkedArray, between: tuple[bytes | None, bytes | None]) -> pa.ChunkedArray:
    """Which sequences lie in the open range (lo, hi) (a bound of None: unbounded)."""
    lo, hi = between
    inside = pc.greater(seqs, pa.scalar(lo, pa.binary())) if lo is not None else None
    if hi is not None:
        below = pc.less(seqs, pa.scalar(hi, pa.binary()))
        inside = below if inside is None else pc.and_(inside, below)
    return inside if inside is not None else pc.is_valid(seqs)


def _arrow(rows: list[RecordRow]) -> pa.Table:
    """Record rows as an Arrow table (RECORD_ARROW)."""
    return pa.Table.from_batches([pa.RecordBatch.from_pylist(
        [dict(zip(RECORD_ARROW.names, r, strict=True)) for r in rows], schema=RECORD_ARROW)])


def _by_table(rows: pa.Table) -> tuple[pa.Table, dict[tuple[str, str], tuple[int, int]]]:
    """The rows grouped by table, each table's in batch order, and (db, table) -> (start, length) of its
    rows (one copy of the batch, then slices; a batch of one table is not copied)."""
    groups = _row_indices(rows)
    spans, start = {}, 0
    for name, indices in groups.items():
        spans[name] = (start, len(indices))
        start += len(indices)
    if len(groups) > 1:
        rows = rows.take(pa.concat_arrays(list(groups.values())))
    return rows, spans


def _row_indices(rows: pa.Table) -> dict[tuple[str, str], pa.Array]:
    """(db, table) -> its rows' indices, in batch order (grouped by Arrow: no Python loop over the rows;
    without threads the grouping keeps the rows' order)."""
    numbered = rows.select(["db", "tbl"]).append_column("i", pa.array(np.arange(len(rows), dtype=np.int64)))
    groups = numbered.group_by(["db", "tbl"], use_threads=False).aggregate([("i", "list")])
    lists = groups.column("i_list").combine_chunks()
    names = zip(groups.column("db").to_pylist(), groups.column("tbl").to_pylist(), strict=True)
    return {name: lists[k].values for k, name in enumerate(names)}


_INFO_FIELDS: list[str] = [name for name in RECORD_ARROW.names if name != "data"]
_RecordRow = namedtuple("_RecordRow", _INFO_FIELDS)  # type: ignore[misc]


def _record_rows(table: pa.Table) -> list[Any]:
    """Record rows (all but their data) from Arrow, read like Spark's Rows (``r.kind``, ``r.db``, ...)."""
    columns = [table.column(name).to_pylist() for name in _INFO_FIELDS]
    return [_RecordRow(*r) for r in zip(*columns, strict=True)]
