"""One job per lake (streaming_job/lake/lease.py): a lease that a live job keeps renewing refuses a second
job with one line naming it; a holder that died (this host: its pid is gone; elsewhere: it stops renewing)
is taken over, and a holder whose lease was taken stops at its next batch."""

from __future__ import annotations

import threading
import time

import orjson
import pytest

from streaming_job.lake import lease as lake_lease
from streaming_job.lake.files import LakeFiles
from streaming_job.lake.lease import LEASE, LakeLease
from streaming_job.runtime.errors import LandError


@pytest.fixture(autouse=True)
def _fast(monkeypatch) -> None:
    monkeypatch.setattr(lake_lease, "RENEW", 0.2)


def _held_elsewhere(path, renew: bool) -> threading.Event:
    """A lease of a job on another host, renewed every 0.2 s while ``renew`` (until the event is set)."""
    stop = threading.Event()

    def keep() -> None:
        while True:
            (path / "lease.tmp").write_bytes(orjson.dumps({"id": "other", "host": "elsewhere", "pid": 7,
                                                           "renewed": time.time()}))
            (path / "lease.tmp").replace(path / LEASE)  # as LakeFiles writes it: never seen half-written
            if not renew or stop.wait(0.2):
                return

    threading.Thread(target=keep, daemon=True).start()
    time.sleep(0.1)
    return stop


def test_a_live_job_elsewhere_is_refused_a_dead_one_taken_over(tmp_path) -> None:
    lake = str(tmp_path)
    stop = _held_elsewhere(tmp_path, renew=True)
    with pytest.raises(LandError, match=rf"another binlake land job writes the lake {lake} \(host elsewhere, pid 7"):
        LakeLease(LakeFiles.on_disk(), lake).acquire(watch=2)
    stop.set()
    time.sleep(0.3)  # it stopped renewing: after the watch, taken over
    started = time.monotonic()
    lease = LakeLease(LakeFiles.on_disk(), lake).acquire(watch=1)
    assert time.monotonic() - started >= 1
    assert orjson.loads((tmp_path / LEASE).read_bytes())["id"] == lease.mine["id"]
    lease.release()
    assert not (tmp_path / LEASE).exists()


def test_a_dead_process_of_this_host_is_taken_over_at_once_and_a_taken_lease_stops_its_holder(tmp_path) -> None:
    lake = str(tmp_path)
    first = LakeLease(LakeFiles.on_disk(), lake).acquire()
    content = orjson.loads((tmp_path / LEASE).read_bytes())
    (tmp_path / LEASE).write_bytes(orjson.dumps({**content, "id": "gone", "pid": 2 ** 22 + 1}))  # no such pid
    started = time.monotonic()
    second = LakeLease(LakeFiles.on_disk(), lake).acquire(watch=5)
    assert time.monotonic() - started < 1
    deadline = time.monotonic() + 5
    while first.lost is None and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(LandError, match=rf"took the lease of the lake {lake}: this job stops"):
        first.check()
    first.release()
    assert (tmp_path / LEASE).exists()  # not the first's to delete
    second.check()
    second.release()
    assert not (tmp_path / LEASE).exists()


def test_a_lake_that_cannot_be_written_is_named(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(LandError, match=rf"cannot write {blocker}/lake: .*nothing committed is lost"):
        LakeLease(LakeFiles.on_disk(), str(blocker / "lake")).acquire()
