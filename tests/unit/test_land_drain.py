"""The land job's wait for the listener's event of a run's last batch (land/job.py's _drain): a run whose last
trigger found nothing new has no batch event to wait for (Spark posts a QueryIdleEvent instead), and one whose last
batch landed rows waits until the listener has seen it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from streaming_job.land import job


def _query(batch: int, rows: int) -> SimpleNamespace:
    return SimpleNamespace(lastProgress={"batchId": batch, "numInputRows": rows})


def test_a_run_that_found_nothing_new_returns_at_once(monkeypatch) -> None:
    monkeypatch.setattr(job.time, "sleep", lambda _: pytest.fail("waited for an event that never comes"))
    listener = SimpleNamespace(last_batch=-1)
    job._drain(_query(0, 0), listener)  # the first run of a query over empty topics
    job._drain(_query(7, 0), SimpleNamespace(last_batch=6))  # a later run: nothing since batch 6
    job._drain(SimpleNamespace(lastProgress=None), listener)  # no trigger ran


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
