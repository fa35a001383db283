"""The land driver's threads, kept for the job's life (a new thread per batch gets a new allocator heap of
its own): the Parquet writers (one per core), the tables of a batch landing side by side, and the change
log's commit beside the mirror's work."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from pyspark.sql import SparkSession


class DriverThreads:
    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
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
        pyarrow, waiting on files half the time)."""
        if self._table_workers is None:
            self._table_workers = ThreadPoolExecutor(2 * self.count, thread_name_prefix="binlake-table")
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
