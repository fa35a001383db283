"""A table's share of a micro-batch landed: one pass over its row changes (writer.land_partition) writes
the change-log files and leaves the mirror's candidates. Two strategies: DriverLanding (the row changes
brought to the driver, which writes the change-log files on its threads, commits them beside the mirror's
work and keeps the mirror itself where it can) and SparkLanding (mapInArrow tasks, their files collected
and committed, the candidates left in Spark)."""

from __future__ import annotations

import itertools
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..batch.batch_rows import TableRows
from ..batch.mirror import full_images
from ..batch.writer import FILE_COLUMNS, landed_ddl, landed_schema
from ..format.lake_format import TableChanges
from ..runtime.driver_threads import DriverThreads
from .commit import Commit
from .compaction import ChangeLogCompaction
from .mirrors import Mirrors
from .tables import DeltaTables

log = logging.getLogger("binlake.land")
_INLINE_BYTES = 1 << 20  # a table's records in a batch whose change log the driver commits without a thread
_THREADED_BYTES = 8 << 20  # decoded row changes of a table's batch worth a run (and files) per core


@dataclass
class TableBatch:
    """One table's share of a batch (its TableChanges) with its change log's schema and transaction settled."""

    changes: TableChanges
    path: str  # the change log's
    txn: Commit | None  # the change log's commit (None: Spark's writer landed it)
    write: bool  # whether the change log still needs this batch's files (else a replay)
    land: Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]  # writer.land_partition's function


class TableLanding(ABC):
    @abstractmethod
    def land(self, rows: TableRows, batch: TableBatch) -> None:
        """The table's change-log files written and committed, and its candidates applied to the mirror."""


class DriverLanding(TableLanding):
    """The table's decoded row changes (cached, Arrow IPC) come to the driver, which writes the
    change-log files and reduces and lands the mirror's candidates itself: no Python tasks, whose start
    costs more than a small batch's own work. For a change log whose commit the driver makes (``txn``)."""

    def __init__(self, delta: DeltaTables, threads: DriverThreads, compaction: ChangeLogCompaction,
                 mirrors: Mirrors) -> None:
        self.delta = delta
        self.threads = threads
        self.compaction = compaction
        self.mirrors = mirrors

    def land(self, rows: TableRows, batch: TableBatch) -> None:
        changes, path, txn, write = batch.changes, batch.path, batch.txn, batch.write
        db, table, columns, pk, batch_id = changes.db, changes.table, changes.columns, changes.pk, changes.batch_id
        assert txn is not None  # chosen for change logs the driver commits to
        t = time.monotonic()
        records = rows.records(db, table)
        got = land_on_threads(batch.land, records, landed_schema(columns), self.threads.workers, self.threads.count)
        is_file = got.column("_binlake_file").is_valid()
        found = got.filter(is_file)
        files = list(zip(*(found.column(c).to_pylist() for c in FILE_COLUMNS), strict=True))
        log.debug("%s.%s: change-log files %.1fs (%d files)", db, table, time.monotonic() - t, len(files))
        # The change log's commit (JVM work) goes on beside the mirror's (driver work, then its own commit):
        # two tables, each idempotent by its own txnVersion, so their order does not matter on a replay
        moved = self.compaction.moved(txn, path) if write else ((), ())
        committing: Future[int] | None = None
        if write and records.nbytes < _INLINE_BYTES:  # a small commit: here (a thread costs more than it saves)
            committing = Future()
            committing.set_result(txn.commit(files, self.delta.app_id, batch_id, moved))
        elif write:
            committing = self.threads.committer.submit(txn.commit, files, self.delta.app_id, batch_id, moved)
        try:
            if pk:
                full_images(db, table, changes.schemas)
                t = time.monotonic()
                self.mirrors.from_driver(got.filter(pc.invert(is_file)).drop_columns(FILE_COLUMNS), db, table,
                                         columns, pk, batch_id, changes.schemas)
                log.debug("%s.%s: mirror %.1fs", db, table, time.monotonic() - t)
        except BaseException:
            if committing is not None:
                committing.exception()  # the commit ends either way; the mirror's error is the one raised
            raise
        if committing is not None:
            version = committing.result()
            self.delta.committed(path, version, batch_id)
            self.compaction.committed(path, version, files, moved)


class SparkLanding(TableLanding):
    """The pass in mapInArrow tasks: their change-log files collected by the driver and committed (where
    it commits, ``txn``), the candidates (persisted: the files' job computes them once) left in Spark."""

    def __init__(self, delta: DeltaTables, mirrors: Mirrors) -> None:
        self.delta = delta
        self.mirrors = mirrors

    def land(self, rows: TableRows, batch: TableBatch) -> None:
        changes = batch.changes
        db, table, columns, pk, batch_id = changes.db, changes.table, changes.columns, changes.pk, changes.batch_id
        landed = rows.frame().mapInArrow(batch.land, landed_ddl(columns))
        if pk:
            landed = landed.persist()  # the files' job computes the candidates once, for the mirror
        try:
            t = time.monotonic()
            files = landed.filter("_binlake_file IS NOT NULL").select(*FILE_COLUMNS).collect()
            if batch.txn is not None and batch.write:
                batch.txn.commit([tuple(f) for f in files], self.delta.app_id, batch_id)
            log.debug("%s.%s: change log %.1fs (%d files)", db, table, time.monotonic() - t, len(files))
            if pk:
                full_images(db, table, changes.schemas)
                t = time.monotonic()
                self.mirrors.from_spark(landed.filter("_binlake_file IS NULL").drop(*FILE_COLUMNS), db, table,
                                        columns, pk, batch_id, changes.schemas)
                log.debug("%s.%s: mirror %.1fs", db, table, time.monotonic() - t)
        finally:
            landed.unpersist()


def land_on_threads(land: Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]], records: pa.Table,
                    schema: pa.Schema, pool: ThreadPoolExecutor, threads: int) -> pa.Table:
    """writer.land_partition's function over the driver's records, split into ``threads`` runs of about
    equal size on ``pool`` (each writes files of its own): pyarrow's Parquet writer and compute kernels release the
    GIL, so the driver's change-log files and candidates use every core instead of one. A batch under
    ``_THREADED_BYTES`` stays one run: one file, where a split would gain milliseconds."""
    parts = [records]
    weight: Any = np.cumsum(pc.binary_length(records.column("data")).to_numpy(zero_copy_only=False)) if len(records) \
        else []
    if threads > 1 and len(records) > 1 and weight[-1] >= _THREADED_BYTES:  # else one file is enough
        cuts = [0, *(int(np.searchsorted(weight, weight[-1] * i / threads)) + 1 for i in range(1, threads)),
                len(records)]
        parts = [records.slice(a, b - a) for a, b in itertools.pairwise(sorted(set(cuts))) if b > a]
    if len(parts) < 2:
        return pa.Table.from_batches(list(land(records.to_batches())), schema=schema)
    results = list(pool.map(lambda part: list(land(part.to_batches())), parts))
    return pa.Table.from_batches([b for r in results for b in r], schema=schema)
