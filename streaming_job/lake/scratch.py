"""Arrow tables of the driver handed to Spark through Parquet files in the lake, not as local data.

Spark's ``createDataFrame`` of a driver's rows puts them inside its tasks: a 300,000-row batch of mirror candidates
made tasks of 51 MB, the driver JVM ran out of heap in its scheduler thread, and the query then waited forever with
no task running and no error. Files in the lake's scratch directory, which every executor reaches as it reaches the
lake, carry the rows instead; the tasks carry only their paths. Small tables stay local data (a file costs a write,
a listing and a read: more than a few rows in a task).

The scratch directory is the job's alone (the lake's lease: lease.py): a run removes what a stopped one left there.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from .files import LakeFiles
from .paths import join

log = logging.getLogger("binlake.land")
SCRATCH = "_binlake_scratch"
LOCAL_BYTES = 1 << 20  # a table under this goes as local data (Spark warns of tasks of 1,000 KiB and more)
_FILE_BYTES = 32 << 20  # rows per file: about this much of Arrow's memory (a task's share)


class Scratch:
    """The lake's scratch directory (``<lake>/_binlake_scratch``), written by the driver through ``files`` (None: a
    lake only Spark reaches, so every table goes as local data)."""

    def __init__(self, spark: SparkSession, lake: str, files: LakeFiles | None) -> None:
        self.spark = spark
        self.root = join(lake, SCRATCH)
        self.files = files

    def clear(self) -> None:
        """What a stopped run left (its frames' files): removed."""
        if self.files is not None:
            self.files.remove_tree(self.root)

    def put(self, rows: pa.Table, schema: str) -> tuple[DataFrame, str | None]:
        """``rows`` in Spark with ``schema`` (Spark's DDL, the Arrow types' own); and the directory of their
        files (None: they went as local data), which ``remove`` lets go of once Spark is done with them."""
        if self.files is None or rows.nbytes < LOCAL_BYTES:
            return self.spark.createDataFrame(rows, schema=schema), None
        directory = join(self.root, uuid.uuid4().hex)
        count = max(1, min(-(-rows.nbytes // _FILE_BYTES), len(rows)))
        step = -(-len(rows) // count)
        for i, start in enumerate(range(0, len(rows), step)):
            self.files.write_parquet(join(directory, f"part-{i:05d}.parquet"), rows.slice(start, step))
        log.debug("%d rows (%d MiB) to Spark in %d files of %s", len(rows), rows.nbytes >> 20, count, directory)
        return self.spark.read.schema(schema).parquet(directory), directory

    def remove(self, directory: str | None) -> None:
        if directory is None or self.files is None:
            return
        self.files.remove_tree(directory)

    @contextlib.contextmanager
    def frame(self, rows: pa.Table, schema: str) -> Iterator[DataFrame]:
        """``put``'s frame for the block's Spark work, its files removed after it."""
        frame, directory = self.put(rows, schema)
        try:
            yield frame
        finally:
            self.remove(directory)
