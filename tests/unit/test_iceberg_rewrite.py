"""A compaction's rewrite of data files (streaming_job/iceberg/rewrite.py) in its worker process: the rows appended
come back sorted by key in the new files, with the keys in read and in file order; the worker runs at the lowest
CPU priority, a worker killed costs one rewrite (RewriteLost) and the next starts a new one, an idle one ends."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming_job.iceberg import rewrite
from streaming_job.iceberg.rewrite import InProcess, RewriteLost, WorkerProcess
from streaming_job.iceberg.tables import WantedTable
from tests.harness.iceberg import local_format

_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
_IDS = [[9, 3, 7], [1, 8, 2, 6], [5, 4]]  # three appends, in no key order


def _table(tmp_path: Path) -> Any:
    table = local_format(tmp_path).ready(WantedTable("db", "t", _SCHEMA, [], dict))
    for ids in _IDS:
        table.append(pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids]}, schema=_SCHEMA))
    return table


def _rewrite(rewriter: Any, table: Any) -> tuple[rewrite.Rewritten, list[list[int]]]:
    """The table's files rewritten, and their keys as pyarrow reads them, in the order given."""
    tasks = sorted(table.scan().plan_files(), key=lambda t: t.file.file_path)
    done = rewriter(table.metadata, table.io, tasks, ["id"], uuid.uuid4())
    return done, [pq.read_table(t.file.file_path.removeprefix("file://"))["id"].to_pylist() for t in tasks]


def _workers() -> list[multiprocessing.process.BaseProcess]:
    return multiprocessing.active_children()


@pytest.mark.parametrize("rewriter", [InProcess, WorkerProcess])
def test_a_rewrite_writes_the_rows_appended_sorted_by_key_with_the_keys_read_and_written(tmp_path, rewriter) -> None:
    table = _table(tmp_path)
    worker = rewriter()
    try:
        done, read_order = _rewrite(worker, table)
    finally:
        worker.close()
    appended = sorted(i for ids in _IDS for i in ids)
    assert done.rows == len(appended)
    assert done.keys is not None and done.keys["id"].to_pylist() == [i for ids in read_order for i in ids]
    assert sum(f.record_count for f in done.added) == len(appended)
    written = [pq.read_table(f.file_path.removeprefix("file://")) for f in done.added]
    assert [i for t in written for i in t["id"].to_pylist()] == appended
    assert [i for t in written for i in t["v"].to_pylist()] == [f"v{i}" for i in appended]
    assert [k["id"].to_pylist() for k in done.written] == [t["id"].to_pylist() for t in written]
    assert all(f.spec_id == table.metadata.default_spec_id for f in done.added)


def test_the_worker_runs_at_the_lowest_priority_and_a_killed_one_costs_one_rewrite(tmp_path) -> None:
    table = _table(tmp_path)
    before = {p.pid for p in _workers()}
    worker = WorkerProcess()
    try:
        _rewrite(worker, table)
        started = [p for p in _workers() if p.pid not in before]
        assert len(started) == 1
        assert os.getpriority(os.PRIO_PROCESS, started[0].pid) == rewrite.WORKER_NICE
        os.kill(started[0].pid, signal.SIGKILL)
        started[0].join(10)
        with pytest.raises(RewriteLost, match="worker process ended"):
            for _ in range(50):  # (the executor notices the death on its own thread)
                _rewrite(worker, table)
                time.sleep(0.1)
        done, _ = _rewrite(worker, table)  # a new worker
        assert done.rows == sum(len(ids) for ids in _IDS)
    finally:
        worker.close()
    assert {p.pid for p in _workers()} <= before


def test_an_idle_worker_ends(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(rewrite, "IDLE_SECONDS", 0.2)
    table = _table(tmp_path)
    before = {p.pid for p in _workers()}
    worker = WorkerProcess()
    _rewrite(worker, table)
    assert {p.pid for p in _workers()} - before
    deadline = time.monotonic() + 20
    while {p.pid for p in _workers()} - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not {p.pid for p in _workers()} - before
    done, _ = _rewrite(worker, table)  # started again
    worker.close()
    assert done.rows == sum(len(ids) for ids in _IDS)


def test_a_worker_whose_job_is_killed_ends(tmp_path) -> None:
    """A job killed with SIGKILL never shuts its worker down: the worker ends on its own."""
    _table(tmp_path)
    script = tmp_path / "job.py"
    script.write_text(
        "import multiprocessing, sys, uuid\n"
        "from streaming_job.iceberg.rewrite import WorkerProcess\n"
        "from tests.harness.iceberg import catalog\n"
        "if __name__ == '__main__':  # (a spawned worker imports the main module)\n"
        f"    table = catalog({str(tmp_path)!r}).load_table(('db', 't'))\n"
        "    WorkerProcess()(table.metadata, table.io, list(table.scan().plan_files()), ['id'], uuid.uuid4())\n"
        "    print(*[p.pid for p in multiprocessing.active_children()], flush=True)\n"
        "    sys.stdin.read()\n")
    job = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                           cwd=Path(__file__).resolve().parents[2])
    pids = [int(p) for p in job.stdout.readline().split()]
    assert pids and all(_alive(p) for p in pids)
    job.kill()
    job.wait(10)
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(p) for p in pids), pids


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def test_an_unreadable_file_is_named_as_such_from_the_worker(tmp_path) -> None:
    table = _table(tmp_path)
    first = sorted(t.file.file_path for t in table.scan().plan_files())[0]
    Path(first.removeprefix("file://")).write_bytes(b"not parquet")
    worker = WorkerProcess()
    try:
        with pytest.raises(rewrite.Unreadable):
            _rewrite(worker, table)
    finally:
        worker.close()
