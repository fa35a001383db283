"""Delta checkpoints of the tables the job writes, by a thread beside the micro-batches.

A Delta commit whose version is a multiple of the table's ``delta.checkpointInterval`` writes the
table's checkpoint itself (a Spark job over the table's whole state) before it returns: 3-6 s on our
2-CPU machine, so with a commit per table and micro-batch every hundredth batch of a table was that
much later, which set the commit-to-mirror latency's tail (docs/LAND.md, "Performance"). Tables
binlake creates have an interval no table reaches (``INLINE_INTERVAL``, job.build_session); this
thread checkpoints a table once ``every`` versions have been committed since its last checkpoint, the
cadence Delta's own hook had, while the next batches go on. A checkpoint only shortens readers' log
replay: one that fails or is skipped at shutdown loses nothing (logged; the next commit asks again).
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

log = logging.getLogger("binlake.land")

INLINE_INTERVAL = 2**31 - 1  # Delta's checkpointInterval for tables binlake creates: never inline
EVERY = 100


class Checkpointer:
    """``committed(path)`` after a batch's commit to a table; ``close()`` when the query stops."""

    def __init__(self, spark: Any, every: int = EVERY) -> None:
        self.spark = spark
        self.every = every
        self.written: list[tuple[str, int]] = []  # (path, version) checkpointed, for tests and logs
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._queued: set[str] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="binlake-delta-checkpoints", daemon=True)
        self._thread.start()

    def committed(self, path: str) -> None:
        with self._lock:
            if path in self._queued:
                return
            self._queued.add(path)
        self._queue.put(path)

    def flush(self) -> None:
        """Wait until the tables asked for so far are done."""
        self._queue.join()

    def close(self, timeout: float = 60.0) -> None:
        """Let a checkpoint under way finish (it is one table's); queued ones are left to the next run."""
        with self._lock:
            self._queued.clear()
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
            self._queue.task_done()
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while (path := self._queue.get()) is not None:
            with self._lock:
                self._queued.discard(path)
            try:
                self._checkpoint(path)
            except Exception as exc:  # a checkpoint is an optimisation for readers: nothing is lost
                log.warning("Delta checkpoint of %s failed (readers replay its JSON commits instead): %s", path,
                            (str(exc).strip().splitlines() or [type(exc).__name__])[0])
            finally:
                self._queue.task_done()
        self._queue.task_done()

    def _checkpoint(self, path: str) -> None:
        jvm = self.spark._jvm
        delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(self.spark._jsparkSession, path)
        snapshot = delta_log.unsafeVolatileSnapshot()  # as of this job's last commit: it committed through it
        version = int(snapshot.version())
        if version - max(0, int(snapshot.checkpointProvider().version())) < self.every:  # Delta's hook: 100, 200...
            return
        delta_log.checkpoint(snapshot, jvm.scala.Option.empty())
        self.written.append((path, version))
        log.debug("%s: Delta checkpoint of version %d written beside the micro-batches", path, version)
