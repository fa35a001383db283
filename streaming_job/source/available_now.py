"""``--trigger available-now`` on binlake's Kafka source: everything Kafka held at the job's start lands.

Spark 4.0 runs an available-now query whose source does not support Trigger.AvailableNow (a Python data source:
binlake's Kafka source) as a single batch (SPARK-45178: "Falling back to single batch execution"), and after a
stop between a batch's plan and its commit (a kill) that single batch is the pending one, replayed: what Kafka
held beyond it waited for the next run. The job records Kafka's offsets at its start and runs the query again
while a round's batch ends short of them and moved on (the replay, then batches of at most land.max_batch_bytes
up to Kafka's offsets then). Spark's Kafka source supports available-now itself: its query runs once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from .kafka_source import BinlakeKafka, Offsets, StreamSource, end_offsets

log = logging.getLogger("binlake.land")


def start_offsets(source: StreamSource) -> Offsets | None:
    """Kafka's end offsets now where ``source`` is binlake's; None for Spark's (no rounds needed)."""
    return end_offsets(source.bootstrap, source.pattern) if isinstance(source, BinlakeKafka) else None


class StartRetry:
    """A query that failed to start because the Python process of binlake's source did not connect back to the JVM
    in time is started again (at most ``tries`` times in a row), where no batch ran in it (``batches()``: how many
    the job began). Spark 4.0 waits a fixed 10 s for that process (PythonWorkerFactory, no setting), and on a
    machine that busy its interpreter's start alone can take longer; nothing was planned or written then."""

    def __init__(self, batches: Callable[[], int], tries: int = 2) -> None:
        self.batches = batches
        self.tries = tries
        self.left = tries
        self.at = batches()

    def started(self) -> None:
        self.at = self.batches()

    def __call__(self, exc: BaseException) -> bool:
        late = self.left > 0 and self.batches() == self.at and any(m in str(exc) for m in _WORKER_LATE)
        if late:
            self.left -= 1
            log.warning("the query's Python source process did not connect back to Spark in time (a busy machine): "
                        "starting it again (%d of %d)", self.tries - self.left, self.tries)
        return late


_WORKER_LATE = ("Python worker failed to connect back", "Timed out while waiting for the Python worker to connect back")


def run_rounds(writer: Any, target: Offsets | None, done: Callable[[Any], None],
               failed: Callable[[], BaseException | None] = lambda: None, retry: StartRetry | None = None) -> None:
    """Starts the query of ``writer`` (a DataStreamWriter) until it stops, ``done(query)`` after each run; again
    while its last batch ended short of ``target`` and moved on from the run before (a bounded batch lands a part of
    the backlog per run). ``failed()``: the work the job does beside its batches (a parked table's rewrite:
    parking.py) failed: the query is stopped and that raised. ``retry``: a query that failed to start (StartRetry)
    is started again."""
    before: object = None
    while True:
        if retry is not None:
            retry.started()
        try:
            query = writer.start()
            while not query.awaitTermination(0.25):  # seconds (a float is taken): the run ends sooner after its batch
                if failed() is not None:
                    query.stop()
                    break
        except Exception as exc:
            if retry is not None and failed() is None and retry(exc):
                continue
            raise
        done(query)
        failure = failed()
        if failure is not None:
            raise failure
        progress = last_progress(query)
        short = short_of(progress, target or {})
        if not short:
            return
        end = _end(progress)
        if end == before:
            log.warning("available-now: a run's batch ended where the one before it did, short of what Kafka held at "
                        "the start in %s: the next run lands it", _named(short))
            return
        before = end
        log.info("available-now: batch %s ended short of what Kafka held at the start in %s (a bounded batch, or the "
                 "one a stopped run had planned): another round", progress["batchId"] if progress is not None else "?",
                 _named(short))


def last_progress(query: Any) -> dict[str, Any] | None:
    """The last progress of ``query`` (a StreamingQuery) as a dict of its JSON, None before its first: one call to
    the JVM. (PySpark's ``lastProgress`` builds its object by reading each field through py4j, and each Java map it
    walks ends with an exception, which PySpark converts by a dozen class lookups: ~30 calls and 5 exceptions.)"""
    found = query._jsq.lastProgress()
    return None if found is None else json.loads(found.json())


def _end(progress: Any) -> object:
    """The end offsets of the batch of ``progress`` (last_progress), None where it has none."""
    try:
        return progress["sources"][0]["endOffset"] if progress is not None else None
    except (IndexError, KeyError, TypeError):
        return None


def short_of(progress: Any, target: Offsets) -> list[str]:
    """The topic partitions (``topic-partition``) whose offsets in ``target`` the batch of ``progress`` (a query's
    last_progress) ended before; none where no batch ran (its offsets then were Kafka's latest)."""
    end = _end(progress)
    if not isinstance(end, dict):
        return []
    return [f"{topic}-{p}" for topic, parts in target.items() for p, offset in parts.items()
            if int(end.get(topic, {}).get(p, 0)) < offset]


def _named(partitions: list[str]) -> str:
    return ", ".join(partitions[:3]) + (" ..." if len(partitions) > 3 else "")
