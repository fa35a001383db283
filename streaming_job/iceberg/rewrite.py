"""A compaction's heavy step (compaction.py): the data files it rewrites read as readers read them (their delete
files applied), a mirror's rows sorted by key, and written again into new data files; with the key columns of the
rows read (in read order) and of each new file (in file order), by which moved.py follows the deletes committed
meanwhile. Everything else of a compaction (its plan, the positions, the delete files, the commit) stays in the job.

Two ways to run it, one interface (``Rewriter``):

- ``InProcess``: on the calling thread (tests, one-off compactions).
- ``WorkerProcess``: in a process of its own at the lowest CPU priority (nice ``WORKER_NICE``), started at the
  first rewrite and kept for the next. The job's upkeep uses it (iceberg/maintenance.py): its reads, sorts and
  parquet writes took up to half of the 2 CPUs a small deployment shares with Spark and the batches, and its
  Python steps held the job's interpreter lock against the batches' (a lower thread priority cannot help there:
  a thread waiting for the lock waits whatever its priority). A worker that ends (killed, out of memory) costs
  this compaction only (``RewriteLost``); the next starts a new one. A worker whose job is gone (killed: it never
  shut the worker down) ends within ``ORPHAN_CHECK_SECONDS``.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, NamedTuple, Protocol

from pyiceberg.expressions import AlwaysTrue

from .position_deletes import key_columns

if TYPE_CHECKING:
    import uuid
    from collections.abc import Sequence

    import pyarrow as pa
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import FileScanTask
    from pyiceberg.table.metadata import TableMetadata

log = logging.getLogger("binlake.land")
WORKER_NICE = 19  # the worker's nice value: the lowest priority, CPU time the batches and Spark leave over
IDLE_SECONDS = 60.0  # a worker process without a rewrite this long ends
ORPHAN_CHECK_SECONDS = 1.0  # how often a worker looks whether the job's process is still its parent


class Rewritten(NamedTuple):
    """A rewrite's result: the rows read; their key columns in read order (None: unkeyed); the new data files;
    each one's key columns in file order (keyed)."""

    rows: int
    keys: pa.Table | None
    added: list[DataFile]
    written: list[pa.Table]


class RewriteLost(Exception):
    """The worker process ended before it answered (killed, out of memory)."""


class Unreadable(Exception):
    """The files could not be read together (pyiceberg's error, as text)."""


def rewrite(metadata: TableMetadata, io: FileIO, tasks: Sequence[FileScanTask], key: list[str],
            write_id: uuid.UUID) -> Rewritten:
    """``tasks``' rows (their delete files applied), sorted by ``key`` (none: as read), written as new data files of
    the table ``metadata`` describes (named by ``write_id``, its current schema and default partition spec);
    Unreadable where the read failed (a write's failure is raised as it is)."""
    from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files

    try:
        rows = ArrowScan(metadata, io, metadata.schema(), AlwaysTrue()).to_table(tasks)
    except Exception as exc:
        raise Unreadable(f"{type(exc).__name__}: {exc}") from None
    keys = rows.select(key) if key else None
    if key and len(rows):
        rows = rows.sort_by([(k, "ascending") for k in key])
    added = list(_dataframe_to_data_files(metadata, rows, io, write_id, itertools.count())) if len(rows) else []
    for f in added:
        f.spec_id = metadata.default_spec_id  # (pyiceberg's writer leaves it unset: a delete file needs it)
    written = []
    if keys is not None:
        schema = metadata.schema()
        ids = [schema.find_field(k).field_id for k in key]
        written = [key_columns(io, f.file_path, ids, keys.schema) for f in added]
    return Rewritten(len(rows), keys, added, written)


class Rewriter(Protocol):
    def __call__(self, metadata: TableMetadata, io: FileIO, tasks: Sequence[FileScanTask], key: list[str],
                 write_id: uuid.UUID) -> Rewritten: ...

    def close(self) -> None: ...


class InProcess:
    """``rewrite`` on the calling thread."""

    def __call__(self, metadata: TableMetadata, io: FileIO, tasks: Sequence[FileScanTask], key: list[str],
                 write_id: uuid.UUID) -> Rewritten:
        return rewrite(metadata, io, tasks, key, write_id)

    def close(self) -> None:
        pass


def _start_worker() -> None:
    """In the worker: the lowest CPU priority, and an end of its own once the job's process is gone (a job killed
    never shuts its worker down: its parent changes)."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, WORKER_NICE)
    except (AttributeError, OSError):
        pass
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(ORPHAN_CHECK_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="binlake-rewrite-parent", daemon=True).start()


class WorkerProcess:
    """``rewrite`` in one worker process at nice ``WORKER_NICE`` (started by spawning: the job's threads and its
    JVM connection are not forked), kept between rewrites and ended after ``IDLE_SECONDS`` without one (a quiet
    job holds no second process's memory)."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._idle: threading.Timer | None = None

    def __call__(self, metadata: TableMetadata, io: FileIO, tasks: Sequence[FileScanTask], key: list[str],
                 write_id: uuid.UUID) -> Rewritten:
        with self._lock:
            if self._idle is not None:
                self._idle.cancel()
            if self._pool is None:
                self._pool = ProcessPoolExecutor(1, multiprocessing.get_context("spawn"),
                                                 initializer=_start_worker)
            try:
                return self._pool.submit(rewrite, metadata, io, list(tasks), key, write_id).result()
            except BrokenProcessPool as exc:
                self._end()
                raise RewriteLost(f"the compaction's worker process ended ({exc})") from exc
            finally:
                self._idle = threading.Timer(IDLE_SECONDS, self.close)
                self._idle.daemon = True
                self._idle.start()

    def close(self) -> None:
        """The worker ended (a rewrite running finished first)."""
        with self._lock:
            if self._idle is not None:
                self._idle.cancel()
            self._end()

    def _end(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown()
