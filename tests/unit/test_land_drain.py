"""The land job's wait for the listener's event of a run's last batch (land/job.py's _drain): a run whose last
trigger found nothing new has no batch event to wait for (Spark posts a QueryIdleEvent instead), and one whose last
batch landed rows waits until the listener has seen it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from streaming_job.land import job


def _query(batch: int | None, rows: int = 0) -> SimpleNamespace:
    """A StreamingQuery whose last progress (its JVM object's JSON) is of ``batch`` (None: no trigger ran)."""
    progress = None if batch is None else SimpleNamespace(
        json=lambda: json.dumps({"batchId": batch, "numInputRows": rows}))
    return SimpleNamespace(_jsq=SimpleNamespace(lastProgress=lambda: progress))


def test_a_run_that_found_nothing_new_returns_at_once(monkeypatch) -> None:
    monkeypatch.setattr(job.time, "sleep", lambda _: pytest.fail("waited for an event that never comes"))
    listener = SimpleNamespace(last_batch=-1)
    job._drain(_query(0, 0), listener)  # the first run of a query over empty topics
    job._drain(_query(7, 0), SimpleNamespace(last_batch=6))  # a later run: nothing since batch 6
    job._drain(_query(None), listener)  # no trigger ran


def test_a_run_whose_last_batch_landed_rows_waits_for_its_event(monkeypatch) -> None:
    listener = SimpleNamespace(last_batch=4)
    naps: list[float] = []

    def nap(seconds: float) -> None:  # the listener's thread delivers the event meanwhile
        naps.append(seconds)
        listener.last_batch += 1

    monkeypatch.setattr(job.time, "sleep", nap)
    job._drain(_query(6, 120), listener)
    assert listener.last_batch == 6 and len(naps) == 2
    naps.clear()
    job._drain(_query(6, 120), listener)  # seen already
    assert not naps


def test_a_batch_the_driver_read_itself_waits_for_its_event_though_spark_counted_no_rows(monkeypatch) -> None:
    """A small batch read from Kafka by the driver (source/driver_read.py) has no input rows in Spark's progress:
    the sink began it, so its event is waited for; a progress of no rows for a batch the sink never began is not."""
    listener = SimpleNamespace(last_batch=5)
    naps: list[float] = []

    def nap(seconds: float) -> None:
        naps.append(seconds)
        listener.last_batch += 1

    monkeypatch.setattr(job.time, "sleep", nap)
    job._drain(_query(6, 0), listener, begun=6)
    assert listener.last_batch == 6 and len(naps) == 1
    job._drain(_query(7, 0), listener, begun=6)  # idle: no batch 7 began
    assert len(naps) == 1


def test_a_local_checkpoint_is_written_without_hadoops_filecontext_and_an_object_stores_with_it() -> None:
    """Spark's FileContext-based checkpoint manager starts chmod and readlink processes per file on a local disk
    (~20 per micro-batch): local checkpoints get its FileSystem-based one; any other is left to Spark's default."""
    conf: dict[str, str] = {}
    spark = SimpleNamespace(conf=SimpleNamespace(set=conf.__setitem__, unset=lambda k: conf.pop(k, None)))
    for where in ("/data/lake/_checkpoint", "file:///data/lake/_checkpoint"):
        conf.clear()
        job.use_checkpoint_manager(spark, where)
        assert conf == {"spark.sql.streaming.checkpointFileManagerClass":
                        "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager"}, where
    job.use_checkpoint_manager(spark, "s3a://bucket/lake/_checkpoint")
    assert conf == {}
