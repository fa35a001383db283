"""The tables' upkeep beside the batches (format/upkeep.py; Iceberg's, and quiet Delta mirrors'): its state (one entry
per table, coalesced; held tables skipped; a Delta commit only restarts a table's quiet time), its thread (a table's
writer waits only while that table's upkeep commits, and that commit waits for the writers; failures raised by the next
hold, settle or close; close drains), and a compaction on pyiceberg's SQL catalog (SQLite) running while its table and
another are committed."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import threading
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest

from streaming_job.format.upkeep import Due, Taken, Upkeep, UpkeepQueue
from streaming_job.iceberg.catalog import landed_batch
from streaming_job.iceberg.maintenance import IcebergMaintenance
from streaming_job.iceberg.tables import WantedTable
from tests.harness.iceberg import catalog, local_format

A, B, C = ("db", "a"), ("db", "b"), ("db", "c")
_WAIT = 30.0  # seconds, at most, for what a test waits on


def _due(table: str, batch: int, orphans: bool = False) -> Due:
    table_object: Any = table  # (the state never looks into the table)
    return Due(table_object, {"binlake.batch-id": str(batch)}, [f"k{batch}"], orphans=orphans)


def test_a_table_committed_again_while_its_upkeep_waits_keeps_one_entry_with_the_newest_commit() -> None:
    queue = UpkeepQueue()
    queue.add(A, _due("a0", 0, orphans=True))
    queue.add(B, _due("b0", 0))
    queue.add(A, _due("a1", 1))
    assert queue.order == [A, B]  # A keeps its place
    taken = queue.take()
    assert taken == Taken(A, dataclasses.replace(_due("a1", 1), commits=2, orphans=True))
    assert queue.running(A) and not queue.idle(A) and not queue.idle()
    queue.add(A, _due("a2", 2))  # committed after its upkeep started: an entry of its own, after B
    assert queue.order == [B, A]
    assert queue.finish(A, None) is None and not queue.running(A) and not queue.idle(A)


def test_a_held_table_upkeep_does_not_start_and_the_first_failure_is_kept() -> None:
    queue = UpkeepQueue()
    queue.add(A, _due("a0", 0))
    queue.add(B, _due("b0", 0))
    queue.hold(A)
    assert queue.take() == Taken(B, _due("b0", 0))
    assert queue.take() is None  # A is held
    queue.release(A)
    assert queue.take() == Taken(A, _due("a0", 0))
    first, second = ValueError("first"), ValueError("second")
    assert queue.finish(B, first) is None  # kept
    assert queue.finish(A, second) is second  # another waits to be raised: given back (logged)
    assert queue.idle() and queue.raised() is first and queue.raised() is None


def test_a_quiet_table_gets_tidy_upkeeps_until_one_does_nothing_and_a_commit_starts_over() -> None:
    queue = UpkeepQueue(quiet_after=30.0)
    queue.add(A, _due("a0", 0, orphans=True), now=100.0)
    assert queue.take(100.0) == Taken(A, dataclasses.replace(_due("a0", 0), commits=1, orphans=True))
    assert queue.take(120.0) is None and queue.quiet_in(120.0) is None  # (its upkeep runs)
    queue.finish(A, None)
    assert queue.take(129.0) is None and queue.quiet_in(129.0) == 1.0
    tidy = Taken(A, dataclasses.replace(_due("a0", 0), commits=0, tidy=True))
    assert queue.take(130.0, tidy=False) is None  # (the upkeep closes: none)
    assert queue.take(130.0) == tidy and queue.running(A)
    queue.finish(A, None, more=True)  # it compacted: the next one at once
    assert queue.quiet_in(131.0) == 0.0 and queue.take(131.0) == tidy
    queue.finish(A, None, more=False)  # nothing to do: tidy until the next commit
    assert queue.take(1000.0) is None and queue.quiet_in(1000.0) is None and queue.idle()

    queue.add(B, _due("b0", 0), now=1000.0)
    queue.add(A, _due("a1", 1), now=1001.0)
    queue.hold(C)
    assert [queue.take(1001.0).name, queue.take(1001.0).name] == [B, A]  # (commits' upkeeps)
    queue.finish(A, None)
    queue.finish(B, None)
    queue.hold(B)
    assert queue.take(1031.0) == Taken(A, dataclasses.replace(_due("a1", 1), commits=0, tidy=True))  # B is held
    queue.add(A, _due("a2", 2), now=1032.0)  # committed while its tidy upkeep runs: found nothing, still untidy
    queue.finish(A, None, more=False)
    assert queue.take(1033.0) == Taken(A, _due("a2", 2))
    queue.finish(A, None)
    queue.release(B)
    assert queue.take(1040.0) == Taken(B, dataclasses.replace(_due("b0", 0), commits=0, tidy=True))  # quiet longest
    queue.finish(B, ValueError("failed"), more=True)  # a failure leaves it tidy (raised once, not retried)
    assert queue.raised() is not None
    queue.add(A, _due("a3", 3), now=1041.0)
    assert queue.take(1100.0) == Taken(A, _due("a3", 3))
    queue.finish(A, None)
    assert queue.take(1100.0).name == A and queue.take(1100.0) is None  # A's tidy upkeep; B is tidy

    queue.loaded(C, _due("c0", 0), now=2000.0)  # loaded by the job (C held: not before it is released)
    queue.add(B, _due("b1", 1), now=2001.0)
    queue.loaded(B, _due("b-old", 0), now=2002.0)  # (B committed: its entry stays)
    assert queue.take(2001.0) == Taken(B, _due("b1", 1))
    queue.finish(B, None)
    queue.release(C)
    assert queue.take(2030.0) == Taken(C, dataclasses.replace(_due("c0", 0), commits=0, tidy=True))


def test_the_upkeep_thread_runs_a_quiet_tables_tidy_upkeeps_after_quiet_after_seconds() -> None:
    done: list[tuple[str, bool]] = []
    finished = threading.Event()

    def work(name: tuple[str, str], due: Due) -> bool:
        done.append((due.table, due.tidy))
        more = due.tidy and len(done) < 3
        if due.tidy and not more:
            finished.set()
        return more

    upkeep = Upkeep(work, quiet_after=0.3)
    upkeep.due(A, _due("a0", 0))
    upkeep.settle()
    assert done == [("a0", False)]  # settle does not wait for a tidy upkeep not due yet
    assert finished.wait(_WAIT)
    assert done == [("a0", False), ("a0", True), ("a0", True)]
    upkeep.close()
    assert len(done) == 3


class _Work:
    """An upkeep's work that waits for the test's word on the tables it gates (as it commits, ``upkeep``'s writers
    kept out, where it is given one), and records what it was given."""

    def __init__(self, fail: dict[tuple[str, str], Exception] | None = None) -> None:
        self.upkeep: Upkeep | None = None
        self.done: list[tuple[tuple[str, str], Due]] = []
        self.started = {n: threading.Event() for n in (A, B, C)}
        self.gates: dict[tuple[str, str], threading.Event] = {}
        self.fail = fail or {}

    def gate(self, name: tuple[str, str]) -> threading.Event:
        return self.gates.setdefault(name, threading.Event())

    def __call__(self, name: tuple[str, str], due: Due) -> None:
        with self.upkeep.exclusive(name) if self.upkeep is not None else contextlib.nullcontext():
            self.started[name].set()
            if name in self.gates:
                assert self.gates[name].wait(_WAIT)
        self.done.append((name, due))
        if name in self.fail:
            raise self.fail[name]


def _in_thread(target: Any) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_a_writer_waits_for_its_tables_committing_upkeep_only() -> None:
    work = _Work()
    upkeep = work.upkeep = Upkeep(work)
    gate = work.gate(A)
    upkeep.due(A, _due("a0", 0))
    assert work.started[A].wait(_WAIT)  # A's upkeep commits (and waits for the gate)

    def write_b() -> None:
        for batch in range(2):  # B's upkeep waits behind A's (one thread): B committed again, coalesced
            with upkeep.hold(B):
                upkeep.due(B, _due(f"b{batch}", batch))

    other = _in_thread(write_b)
    other.join(_WAIT)
    assert not other.is_alive()  # another table's writer does not wait
    held = threading.Event()

    def write_a() -> None:
        with upkeep.hold(A):
            held.set()

    writer = _in_thread(write_a)
    assert not held.wait(0.3)  # A's writer waits for A's committing upkeep
    gate.set()
    assert held.wait(_WAIT)
    writer.join(_WAIT)
    upkeep.settle()
    assert [(n, d.properties["binlake.batch-id"], d.commits) for n, d in work.done] == [(A, "0", 1), (B, "1", 2)]
    upkeep.close()


def test_no_upkeep_of_a_held_table_starts_until_it_is_released() -> None:
    work = _Work()
    upkeep = Upkeep(work)
    with upkeep.hold(A):
        upkeep.due(A, _due("a0", 0))
        assert not work.started[A].wait(0.3)
        upkeep.due(A, _due("a1", 1))  # a second commit while held: one entry
    upkeep.settle(A)
    assert [(n, d.table, d.commits) for n, d in work.done] == [(A, "a1", 2)]
    upkeep.close()


def test_a_writer_waits_only_while_its_tables_upkeep_commits_and_that_commit_waits_for_the_writers() -> None:
    """An upkeep reads and writes with the table's writers going on; its commit (``exclusive``) waits until no writer
    holds the table, and a writer's hold waits while it commits."""
    read, committing, entered = threading.Event(), threading.Event(), threading.Event()
    upkeep: Upkeep

    def work(name: tuple[str, str], due: Due) -> None:
        assert read.wait(_WAIT)  # reading and writing its files
        with upkeep.exclusive(name):
            entered.set()
            assert committing.wait(_WAIT)

    upkeep = Upkeep(work)
    upkeep.due(A, _due("a0", 0))
    with upkeep.hold(A):  # the upkeep runs: a writer goes on
        read.set()
        assert not entered.wait(0.3)  # its commit waits for the writer
    assert entered.wait(_WAIT)
    held = threading.Event()

    def write_a() -> None:
        with upkeep.hold(A):
            held.set()

    writer = _in_thread(write_a)
    assert not held.wait(0.3)  # a writer waits while the upkeep commits
    with upkeep.hold(B):  # another table's does not
        pass
    committing.set()
    assert held.wait(_WAIT)
    writer.join(_WAIT)
    upkeep.close()


def test_a_failure_is_raised_once_by_the_next_wait_of_any_table_and_one_after_the_last_commit_by_close() -> None:
    boom = ValueError("files to rewrite are not live")
    work = _Work(fail={A: boom})
    upkeep = Upkeep(work)
    upkeep.due(A, _due("a0", 0))
    with pytest.raises(ValueError) as raised:
        upkeep.settle()
    assert raised.value is boom  # the very error the work raised
    upkeep.settle()  # raised once
    gate = work.gate(B)
    upkeep.due(A, _due("a1", 1))
    upkeep.due(B, _due("b0", 0))
    assert work.started[B].wait(_WAIT)  # A's upkeep (before B's) has failed
    with pytest.raises(ValueError, match="not live"), upkeep.hold(C):  # by a writer of another table
        pass
    gate.set()
    upkeep.settle()
    upkeep.due(A, _due("a2", 2))  # the last commit's upkeep fails after it: close raises
    with pytest.raises(ValueError, match="not live"):
        upkeep.close()


def test_the_upkeep_runs_at_a_lower_cpu_priority_than_the_job() -> None:
    """Its thread's nice value (Linux: a thread's own) is UPKEEP_NICE above the job's; the job's is unchanged."""
    import os

    from streaming_job.format.upkeep import UPKEEP_NICE

    seen: list[int] = []
    job = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    upkeep = Upkeep(lambda name, due: seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
    upkeep.due(A, _due("a0", 0))
    upkeep.close()
    assert seen == [min(job + UPKEEP_NICE, 19)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == job


def test_close_waits_for_the_upkeep_left_and_later_entries_are_dropped() -> None:
    work = _Work()
    upkeep = Upkeep(work)
    gate = work.gate(A)
    upkeep.due(A, _due("a0", 0))
    upkeep.due(B, _due("b0", 0))
    assert work.started[A].wait(_WAIT)
    closing = _in_thread(upkeep.close)
    closing.join(0.3)
    assert closing.is_alive() and work.done == []  # A's upkeep still runs: close waits
    gate.set()
    closing.join(_WAIT)
    assert not closing.is_alive() and [n for n, _ in work.done] == [A, B]
    upkeep.due(A, _due("a1", 1))  # the job has ended: nothing runs any more
    upkeep.settle()
    assert len(work.done) == 2


def test_an_upkeep_pauses_while_a_batch_lands_at_most_pause_seconds_and_not_while_settled(monkeypatch) -> None:
    from streaming_job.format import upkeep as upkeep_module

    steps: list[str] = []
    upkeep: Upkeep

    def work(name: tuple[str, str], due: Due) -> None:  # a compaction's steps, as IcebergFormat._upkeep pauses them
        upkeep.pause()
        steps.append(f"{name[1]}:read")
        upkeep.pause()
        steps.append(f"{name[1]}:commit")

    upkeep = Upkeep(work)
    batch = upkeep.landing()
    batch.__enter__()
    upkeep.due(A, _due("a0", 0))
    landed = threading.Event()
    threading.Timer(0.4, lambda: (steps.append("batch landed"), batch.__exit__(None, None, None), landed.set())).start()
    assert landed.wait(_WAIT)
    upkeep.settle(A)
    assert steps == ["batch landed", "a:read", "a:commit"]  # nothing of it ran beside the batch

    monkeypatch.setattr(upkeep_module, "PAUSE_SECONDS", 0.2)  # batches back to back: the upkeep still goes on
    steps.clear()
    with upkeep.landing():
        upkeep.due(B, _due("b0", 0))
        deadline = threading.Event()
        threading.Timer(_WAIT, deadline.set).start()
        while len(steps) < 2 and not deadline.is_set():
            deadline.wait(0.05)
        assert steps == ["b:read", "b:commit"]
        upkeep.due(C, _due("c0", 0))
        upkeep.settle(C)  # a wait for the upkeep inside a batch (verify): no pause
        assert steps[-2:] == ["c:read", "c:commit"]
    upkeep.close()


def test_no_upkeep_runs_once_the_check_refuses() -> None:
    from streaming_job.runtime.errors import LandError

    lost: list[str] = []

    def lease() -> None:
        if lost:
            raise LandError(lost[0])

    work = _Work()
    upkeep = Upkeep(work, lease)
    upkeep.due(A, _due("a0", 0))
    upkeep.settle()
    lost.append("another binlake land job took the lease of the lake")
    upkeep.due(B, _due("b0", 0))
    with pytest.raises(LandError, match="took the lease"):
        upkeep.close()
    assert [n for n, _ in work.done] == [A]


_SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


@dataclass
class _Gated(IcebergMaintenance):
    """The maintenance, its compaction of ``table`` held back after it read the table until the test opens the gate;
    its commits recorded."""

    table: tuple[str, str] | None = None
    gate: threading.Event = field(default_factory=threading.Event)
    started: threading.Event = field(default_factory=threading.Event)
    calls: list[tuple[tuple[str, str], str, int]] = field(default_factory=list)

    def prepare(self, name: tuple[str, str], table: Any, key: list[str], pause: Any = lambda: None,
                manifests: Any = None, tidy: bool = False) -> Any:
        prepared = super().prepare(name, table, key, pause, manifests, tidy)
        if name == self.table:
            self.started.set()
            assert self.gate.wait(_WAIT)
        return prepared

    def finish(self, name: tuple[str, str], table: Any, prepared: Any, properties: dict[str, str],
               commits: int = 1) -> bool:
        self.calls.append((name, properties["binlake.batch-id"], commits))
        return super().finish(name, table, prepared, properties, commits)


def test_a_compaction_runs_while_another_table_is_committed_and_the_tables_end_as_written(tmp_path) -> None:
    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    fmt = local_format(tmp_path, uri=uri)
    kept = _Gated(compact_files=3, retention=datetime.timedelta(0), expire_every=5)
    fmt.maintenance = kept
    tables = {n: fmt.ready(WantedTable(*n, _SCHEMA, [], dict)) for n in (A, B)}
    written: dict[tuple[str, str], list[dict[str, Any]]] = {A: [], B: []}

    def commit(name: tuple[str, str], batch: int) -> None:
        rows = [{"id": batch * 10 + i, "v": f"{name[1]}{batch}"} for i in range(2)]
        properties = fmt._batch(batch)
        fmt._commit(*name, tables[name], lambda tx: tx.append(pa.Table.from_pylist(rows, _SCHEMA),
                                                              snapshot_properties=properties), properties)
        written[name] += rows

    for batch in range(2):
        commit(A, batch)
        fmt.upkeep.settle()
    kept.table = A  # A's third small file: its compaction is due, and held at the gate once it read A
    commit(A, 2)
    assert kept.started.wait(_WAIT)
    for batch in range(5):  # B's commits go on meanwhile; its upkeep waits behind A's (one thread): coalesced
        commit(B, batch)
    assert fmt._has(tables[B], 4)
    commit(A, 3)  # A's next batch goes on beside A's running compaction, which commits after it
    kept.gate.set()
    fmt.close()  # the upkeep left (A's after batch 3) done

    assert kept.calls == [(A, "0", 1), (A, "1", 1), (A, "2", 1), (B, "4", 5), (A, "3", 1)]
    reader = catalog(tmp_path, uri)
    for name, last in ((A, 3), (B, 4)):
        table = reader.load_table(name)
        rows = table.scan().to_arrow().to_pylist()
        assert sorted(rows, key=lambda r: r["id"]) == sorted(written[name], key=lambda r: r["id"]), name
        assert landed_batch(table, "app-1") == last
        assert table.current_snapshot().summary["binlake.batch-id"] == str(last)
    a, b = reader.load_table(A), reader.load_table(B)
    replaced = [s for s in a.snapshots() if s.summary.operation.value == "replace"]
    # the compaction after batch 2, committed after batch 3 with its ids: the newest snapshot names the last batch
    assert [s.summary["binlake.batch-id"] for s in replaced] == ["3"]
    assert a.current_snapshot().summary.operation.value == "replace"
    # B: 5 commits, one upkeep: compacted (the newest batch's ids) and expired (its 5 commits counted)
    assert [(s.summary.operation.value, s.summary["binlake.batch-id"]) for s in b.snapshots()] == [("replace", "4")]
    assert len(list(b.scan().plan_files())) == 1


@pytest.mark.parametrize("restarted", [False, True])
def test_a_quiet_tables_small_files_are_merged_by_the_jobs_own_upkeep(tmp_path, restarted: bool) -> None:
    import time

    from streaming_job.iceberg.rewrite import InProcess

    def maintenance(quiet_after: float) -> IcebergMaintenance:
        return IcebergMaintenance(compact_files=8, quiet_after=quiet_after, rewriter=InProcess())

    fmt = local_format(tmp_path, maintenance=maintenance(0 if restarted else 0.5))
    table = fmt.ready(WantedTable(*A, _SCHEMA, [], dict))
    written: list[dict[str, Any]] = []
    for batch in range(3):  # three small files: no compaction due by the batches' rules (8)
        rows = [{"id": batch * 10 + i, "v": f"a{batch}"} for i in range(2)]
        properties = fmt._batch(batch)
        fmt._commit(*A, table, lambda tx, rows=rows, properties=properties: tx.append(
            pa.Table.from_pylist(rows, _SCHEMA), snapshot_properties=properties), properties)
        written += rows
    fmt.upkeep.settle()
    assert len(catalog(tmp_path).load_table(A).inspect.files()) == 3
    if restarted:  # a job that never compacts them ends; the next one loads the table and commits nothing
        time.sleep(1.0)
        assert len(catalog(tmp_path).load_table(A).inspect.files()) == 3
        fmt.close()
        fmt = local_format(tmp_path, maintenance=maintenance(0.5))
        assert fmt.table(*A) is not None
    deadline = time.monotonic() + _WAIT
    while len(catalog(tmp_path).load_table(A).inspect.files()) > 1:  # quiet for half a second: merged
        assert time.monotonic() < deadline, "no tidy upkeep"
        time.sleep(0.1)
    fmt.close()
    reader = catalog(tmp_path).load_table(A)
    assert sorted(reader.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == written
    summary = reader.current_snapshot().summary
    assert summary.operation.value == "replace" and landed_batch(reader, "app-1") == 2


def test_a_table_touched_by_a_writer_that_keeps_it_waits_for_its_tidy_upkeep_only() -> None:
    """Delta's batches compact in their own commits (delta/tidy.py): a commit only restarts the table's quiet time."""
    queue = UpkeepQueue(quiet_after=30.0)
    queue.touched(A, _due("a0", 0), now=100.0)
    assert queue.take(100.0) is None and queue.quiet_in(100.0) == 30.0  # no upkeep of the commit
    queue.touched(A, _due("a1", 1), now=110.0)  # committed again: quiet from then
    assert queue.take(139.0) is None and queue.quiet_in(139.0) == 1.0
    tidy = Taken(A, dataclasses.replace(_due("a1", 1), commits=0, tidy=True))
    assert queue.take(140.0) == tidy
    queue.touched(A, _due("a2", 2), now=141.0)  # a commit while it runs: tidied again once quiet
    queue.finish(A, None, more=False)
    assert queue.take(170.0) is None and queue.take(171.0) == Taken(A, dataclasses.replace(_due("a2", 2), commits=0,
                                                                                           tidy=True))
    queue.finish(A, None, more=False)
    assert queue.take(10_000.0) is None and queue.idle()
