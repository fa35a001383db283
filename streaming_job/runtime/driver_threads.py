"""The land driver's threads, kept for the job's life (a new thread per batch gets a new allocator heap of
its own): the Parquet writers (one per core), the tables of a batch landing side by side, and the change
log's commit beside the mirror's work."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from pyspark.sql import SparkSession

# tables landed side by side per core where the lake is on an object store: each waits on the store's
# requests (GET, LIST, PUT: several ms each) most of its time
_REMOTE_TABLES_PER_CORE = 8


class DriverThreads:
    def __init__(self, spark: SparkSession, remote: bool = False) -> None:
        self.spark = spark
        self.remote = remote  # the lake is on an object store: a table's driver work waits on requests
        self._count: int | None = None
        self._workers: ThreadPoolExecutor | None = None
        self._committer: ThreadPoolExecutor | None = None
        self._table_workers: ThreadPoolExecutor | None = None

    @property
    def count(self) -> int:
        """The driver's threads for Parquet writing: one per core Spark was given (local[N]: N); asked of
        the JVM once (a py4j call cost ~1 ms of each table's landing)."""
        if self._count is None:
            self._count = max(1, self.spark.sparkContext.defaultParallelism)
        return self._count

    @property
    def workers(self) -> ThreadPoolExecutor:
        if self._workers is None:
            self._workers = ThreadPoolExecutor(self.count, thread_name_prefix="binlake-land")
        return self._workers

    @property
    def table_workers(self) -> ThreadPoolExecutor:
        """The threads that land a batch's tables side by side (the driver's work of each is Python and
        pyarrow, waiting on files half the time; on an object store, on its requests most of the time)."""
        if self._table_workers is None:
            per_core = _REMOTE_TABLES_PER_CORE if self.remote else 2
            self._table_workers = ThreadPoolExecutor(per_core * self.count, thread_name_prefix="binlake-table")
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
