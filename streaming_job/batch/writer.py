"""The lake's Parquet files written with pyarrow (on the executors, or by the driver for a table's small batch):
a batch's change-log files and mirror candidates in one pass (land_partition), a compaction's change-log file,
the driver's mirror files; each an ``Added`` (path, partition values, size, statistics) for the format to commit
(Delta: delta/commit.py).

Why not ``DataFrame.write``: Spark's Parquet writer walks the nested before/after images a value at a
time, ~40 us per row change on our 2-CPU reference machine; pyarrow writes the same columns in ~2.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..decode.typed import typed_batches
from ..lake.files import LakeFiles
from ..lake.paths import join
from ..runtime.spark_archives import keep_spark_archive_listings
from .key_stats import stats_values
from .mirror import candidate_schema, candidates_ddl, mirror_candidates

PARTITION_COLUMN = "commit_date"
_TS = pa.timestamp("us", tz="UTC")
_LOCAL = LakeFiles.on_disk()  # a local lake's files: named, not inferred from paths
# A file's row (the candidate columns null); names prefixed so they never meet a source column's
FILE_FIELDS = [("_binlake_file", pa.string(), "string"), ("_binlake_partition", pa.string(), "string"),
               ("_binlake_size", pa.int64(), "bigint"), ("_binlake_rows", pa.int64(), "bigint"),
               ("_binlake_min_offset", pa.int64(), "bigint"), ("_binlake_max_offset", pa.int64(), "bigint")]
FILE_DDL = ", ".join(f"`{n}` {d}" for n, _, d in FILE_FIELDS)
FILE_COLUMNS = [n for n, _, _ in FILE_FIELDS]


class Added(NamedTuple):
    """A data file added to a table: its path relative to the table, its partition values, size and statistics
    (a tuple: it travels and unpacks as the 4-tuple it replaces)."""

    path: str
    partition_values: dict[str, str]
    size: int
    stats: dict[str, Any]


# A file of at most this many rows (a table's share of a small micro-batch) is written without compression
# and dictionaries: for a few rows both cost more than the file's own writing (0.8 ms against 0.4 ms a file
# of one row), and save nothing; compaction later rewrites such files, compressed, into larger ones.
SMALL_FILE_ROWS = 1_000
MIRROR_FILE_ROWS = 1_000_000  # rows per mirror file a batch writes, at most (the driver's and Spark's appends)


def parquet_options(rows: int) -> dict[str, Any]:
    """pyarrow's Parquet writer options for a file of ``rows`` rows."""
    if rows <= SMALL_FILE_ROWS:
        return {"compression": "none", "use_dictionary": False}
    return {"compression": "zstd"}


def file_name(directory: str, options: dict[str, Any]) -> str:
    """A new data file's path relative to its table: ``directory`` (a partition's, with its slash)."""
    suffix = ".parquet" if options["compression"] == "none" else f".{options['compression']}.parquet"
    return f"{directory}part-{uuid.uuid4()}{suffix}"


class _File:
    """One open Parquet file of a task: all its rows share one commit date."""

    def __init__(self, lake: LakeFiles, table_path: str, date: str, schema: pa.Schema, rows: int) -> None:
        """``rows``: of the first batch, which is the whole file's when it is small (typed_batches)."""
        options = parquet_options(rows)
        self.name = file_name(f"{PARTITION_COLUMN}={date}/", options)
        self.date = date
        self.sink = lake.open_output(join(table_path, self.name))
        self.writer = pq.ParquetWriter(self.sink, schema, **options)
        self.rows = 0
        self.offsets: tuple[int, int] | None = None

    def write(self, batch: pa.RecordBatch) -> None:
        self.writer.write_batch(batch)
        self.rows += len(batch)
        bounds = pc.min_max(batch.column("kafka_offset"))
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        self.offsets = (low, high) if self.offsets is None else (min(low, self.offsets[0]),
                                                                 max(high, self.offsets[1]))

    def close(self) -> tuple[Any, ...]:
        self.writer.close()
        size = self.sink.tell()
        self.sink.close()  # on S3: the object's upload
        assert self.offsets is not None  # a file is opened for rows
        return self.name, self.date, size, self.rows, *self.offsets


def land_partition(columns: list[tuple[str, str]], pk: list[str], table_path: str | None, ingest_micros: int,
                   lake: LakeFiles | None = None) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow function: record rows of one table -> (landed_ddl) its mirror candidates (mirror.py; none
    without a primary key) and, unless ``table_path`` is None (the change log already holds this batch),
    its change-log Parquet files under ``table_path`` (through ``lake``: local disk by default), one per
    commit date and task, as one row each at the end. One pass over the batch's row changes serves both
    tables."""
    schema = landed_schema(columns)
    candidates = candidate_schema(columns)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        keep_spark_archive_listings()  # see spark_archives.py
        files: dict[str, _File] = {}
        for typed in typed_batches(columns, batches):
            if table_path is not None:
                _write(typed, files, lake or _LOCAL, table_path, ingest_micros)
            if pk:
                found = mirror_candidates(typed, pk, candidates)
                n = len(found)
                yield from pa.Table.from_arrays([*found.columns, *(pa.nulls(n, t) for _, t, _ in FILE_FIELDS)],
                                                schema=schema).to_batches()
        rows = [f.close() for f in files.values()]
        if rows:
            n = len(rows)
            metas = [pa.array(c, t) for c, (_, t, _) in zip(zip(*rows, strict=True), FILE_FIELDS, strict=True)]
            yield pa.RecordBatch.from_arrays([*(pa.nulls(n, f.type) for f in candidates), *metas], schema=schema)

    return run


def landed_schema(columns: list[tuple[str, str]]) -> pa.Schema:
    return pa.schema([*candidate_schema(columns), *[pa.field(n, t) for n, t, _ in FILE_FIELDS]])


def landed_ddl(columns: list[tuple[str, str]]) -> str:
    return f"{candidates_ddl(columns)}, {FILE_DDL}"


def _write(typed: pa.RecordBatch, files: dict[str, _File], lake: LakeFiles, table_path: str,
           ingest_micros: int) -> None:
    """Append a chunk to the task's files, split by commit date (the change log's partition)."""
    typed = typed.append_column("ingest_ts", pa.repeat(pa.scalar(ingest_micros, _TS), len(typed)))
    bounds = pc.min_max(typed.column("commit_ts"))
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is not None and low.date() == high.date():  # the common case: one commit date, no split
        days, dates = [low.date().isoformat()], None
    else:
        dates = pc.cast(pc.cast(typed.column("commit_ts"), pa.timestamp("us")), pa.date32()).cast(pa.string())
        days = pc.unique(dates).to_pylist()
    for date in days:
        part = typed if dates is None or len(days) == 1 else typed.filter(pc.equal(dates, date))
        f = files.get(date)
        if f is None:
            f = files[date] = _File(lake, table_path, date, typed.schema, len(part))
        f.write(part)


def change_log_stats(rows: int, low: int, high: int) -> dict[str, Any]:
    """A change-log file's statistics in the Delta log: its rows and their ``kafka_offset`` bounds."""
    return {"numRecords": rows, "minValues": {"kafka_offset": low}, "maxValues": {"kafka_offset": high},
            "nullCount": {"kafka_offset": 0}}


def write_change_log_file(lake: LakeFiles, table_path: str, date: str,
                          rows: pa.Table) -> Added:
    """One change-log file of ``rows`` (all of commit date ``date``) in that date's partition: a compaction's."""
    options = parquet_options(len(rows))
    name = file_name(f"{PARTITION_COLUMN}={date}/", options)
    size = lake.write_parquet(join(table_path, name), rows, **options)
    bounds = pc.min_max(rows.column("kafka_offset"))
    return Added(name, {PARTITION_COLUMN: date}, size,
                 change_log_stats(len(rows), bounds["min"].as_py(), bounds["max"].as_py()))


def write_table_file(lake: LakeFiles, table_path: str, rows: pa.Table) -> Added:
    """One unpartitioned file of ``rows`` (written by the driver), with its row count as its statistics."""
    options = parquet_options(len(rows))
    name = file_name("", options)
    size = lake.write_parquet(join(table_path, name), rows, **options)
    return Added(name, {}, size, {"numRecords": len(rows)})


def write_mirror_file(lake: LakeFiles, table_path: str, rows: pa.Table,
                      key: str) -> Added:
    """One unpartitioned mirror file of ``rows`` (written by the driver), with its statistics of the ``key`` column
    as Delta's writer keeps them (key_stats.stats_values), by which MERGEs and the driver (mirror_driver.MirrorFiles)
    skip files; a bytes key has none (Delta keeps none of a binary column)."""
    options = parquet_options(len(rows))
    name = file_name("", options)
    size = lake.write_parquet(join(table_path, name), rows, **options)
    bounds = stats_values(rows.column(key))
    if bounds is None:
        return Added(name, {}, size, {"numRecords": len(rows)})
    stats = {"numRecords": len(rows), "minValues": {key: bounds[0]}, "maxValues": {key: bounds[1]},
             "nullCount": {key: rows.column(key).null_count}}
    return Added(name, {}, size, stats)
