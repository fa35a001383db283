"""The upkeep of the job's tables off the batches' path, one thread for a lake format's tables (docs/LAND.md, "Iceberg"
and "Delta Lake"): Iceberg's after each commit to a table (its compaction and snapshot expiry, iceberg/maintenance.py,
and where due its orphan files' removal), and for either format a quiet table's compaction (Iceberg's
iceberg/format.py, Delta's delta/tidy.py), beside the next batches instead of inside the batch that committed. A batch
waits for a table's upkeep only where it writes that table while that upkeep commits (a compaction reads and writes
its files with the writers going on: its commit follows theirs).

The rules, kept by ``UpkeepQueue`` (the state, no threads) and ``Upkeep`` (its one thread and lock):

- one thread: no two upkeeps at once; tables in the order their upkeep fell due;
- at most one entry per table: a table committed to again while its upkeep waits keeps its one entry and its place,
  with the newest commit's table, summary properties and key (``Due.then``: the commits counted, the orphans'
  removal due where either was);
- a writer holds a table (``Upkeep.hold``) while it commits to it or reads its data files: the hold first waits
  while the table's upkeep commits, and no upkeep of the table starts while it is held. An upkeep commits (or deletes
  files) only inside ``Upkeep.exclusive``: it waits until no writer holds the table, and keeps new holds out until it
  ends. Other tables' upkeeps go on, and other tables' writers never wait;
- an Iceberg upkeep reads the table through a copy of the job's Table object (iceberg/upkeep.py's ``copy_of``: a
  writer's commit replaces the job's Table's metadata meanwhile) and commits through one made inside ``exclusive``
  (``on_copy``: the newest), whose metadata the job's own Table takes at its end, while no writer holds it. Its
  readers meanwhile (the batch's checks before its commit) see the table before or after the upkeep, whose snapshots
  name the same batch and hold the same rows, schema and properties; a Delta one reads the table's log itself;
- a failure is kept and raised once, by the next hold or settle (of any table) or by ``close``; one that comes while
  another waits to be raised is logged;
- ``check`` runs before each upkeep (the lake's lease: lake/lease.py), so none commits once another job took it;
- batches go first: while one lands (``Upkeep.landing``, the whole batch: its read, decoding and commits), the upkeep
  waits at the boundaries of its steps (``Upkeep.pause``: before it starts, between a compaction's reads and writes,
  before it keeps the writers out) for the batch's end, at most ``PAUSE_SECONDS`` a step, so that batches landing back
  to back do not starve it. Both run in one process: an upkeep beside a batch took half of its time (the GIL), and
  the slowest batches were those a compaction overlapped. ``settle`` lets it go on without pausing;
- a table no commit changed for ``quiet_after`` seconds (land.quiet_compaction) gets a tidy upkeep (``Due.tidy``:
  its compaction takes every file with deleted rows and merges its small files, and Iceberg's delete files), again
  while one commits something, until it finds nothing to do; the table is then tidy until
  its next commit. A table the job loaded and has not committed to yet (a restarted job's: ``loaded``) counts as
  committed at its load. Tidy upkeeps run only where no other waits, never once the upkeep closes;
- ``close`` waits for the entries left (at most one per table, each the work its batch used to do itself: a
  compaction within land.compact_bytes, an expiry, an orphans' listing), then ends the thread. Entries after it are
  dropped: the process is ending, and the next run compacts at its first commit to each table, counts expiry anew and
  looks for orphans at its first load of each.

Exactly once holds as before: an Iceberg compaction's ``replace`` snapshot carries the summary properties of the
newest commit it follows (no commit to the table comes between: ``exclusive``), so the table's newest snapshot names its
last batch. A kill -9 during an upkeep leaves at most files no metadata names (a compaction's files before its commit,
the files of snapshots expired before they were deleted), which orphans.py removes. A Delta compaction's commit changes
no rows (``dataChange`` false), and the table keeps the batches' transactions (SetTransaction) it had; the files of a
compaction killed before its commit are named by no version (VACUUM removes them)."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

log = logging.getLogger("binlake.land")
Name = tuple[str, str]  # a table's (namespace, name)
PAUSE_SECONDS = 2.0  # the longest an upkeep step waits for a landing batch
UPKEEP_NICE = 10  # how much lower the upkeep thread's CPU priority is than the job's
T = TypeVar("T")  # what a format's upkeep knows a table by (Iceberg: its Table object)


@dataclass(frozen=True)
class Due(Generic[T]):
    """A table's upkeep after the job's commits to it: ``table`` as the job committed it (Iceberg: its Table object),
    the newest commit's summary ``properties`` and ``key`` (a mirror's), how many ``commits`` it follows, and
    whether its orphan files are to be looked for (orphans.OrphanFiles.due); ``tidy``: the table's upkeep once it
    is quiet (no commit counted)."""

    table: T
    properties: dict[str, str]
    key: list[str]
    commits: int = 1
    orphans: bool = False
    tidy: bool = False

    def then(self, newer: Due[T]) -> Due[T]:
        """This entry and a newer commit's, as one."""
        return Due(newer.table, newer.properties, newer.key, self.commits + newer.commits,
                   self.orphans or newer.orphans)


class Taken(NamedTuple):
    """A table's upkeep, taken by the thread."""

    name: Name
    due: Due[Any]


@dataclass
class _Slot:
    due: Due[Any] | None = None  # waiting
    running: bool = False
    committing: bool = False  # its upkeep keeps the writers out (Upkeep.exclusive)
    holds: int = 0  # writers holding the table
    last: Due[Any] | None = None  # the newest commit's entry, while the table is not tidy
    since: float = 0.0  # when (time.monotonic) it was last committed to
    tidying: float | None = None  # ``since`` as its running tidy upkeep found it


@dataclass
class UpkeepQueue:
    """The upkeep's state: which tables wait (in order), which one runs, which are held, the failure to raise."""

    slots: dict[Name, _Slot] = field(default_factory=dict)
    order: list[Name] = field(default_factory=list)  # tables whose upkeep waits, the oldest first
    failure: BaseException | None = None  # kept until raised
    landing: int = 0  # batches landing now (Upkeep.landing)
    settling: int = 0  # callers waiting for upkeeps to end (Upkeep.settle): no pause then
    quiet_after: float = 0.0  # seconds without a commit after which a table's tidy upkeep is due (0: never)

    def quiet(self) -> bool:
        """Whether an upkeep step may go on now: no batch lands, or someone waits for the upkeep."""
        return not self.landing or self.settling > 0

    def add(self, name: Name, due: Due[Any], now: float = 0.0) -> None:
        """The table committed to at ``now`` (time.monotonic): its upkeep waits (one entry per table)."""
        slot = self.slots.setdefault(name, _Slot())
        # (a commit of a statement names no key: the mirror's last known one kept for its tidy upkeep)
        slot.last = due if due.key or slot.last is None else dataclasses.replace(due, key=slot.last.key)
        slot.since = now
        if slot.due is None:
            self.order.append(name)
            slot.due = due
        else:
            slot.due = slot.due.then(due)

    def touched(self, name: Name, due: Due[Any], now: float = 0.0) -> None:
        """The table committed to at ``now`` by a writer that keeps it itself (Delta's batches compact in their own
        commits): no upkeep waits, its tidy upkeep falls due once it is quiet."""
        slot = self.slots.setdefault(name, _Slot())
        slot.last, slot.since = due, now

    def loaded(self, name: Name, due: Due[Any], now: float = 0.0) -> None:
        """The table loaded by the job at ``now``, before any commit to it: its tidy upkeep falls due once it is quiet
        (a table quiet when the job started is compacted too), as ``due`` (its newest snapshot's batch)."""
        slot = self.slots.setdefault(name, _Slot())
        if slot.last is None and slot.due is None and not slot.running:
            slot.last, slot.since = due, now

    def running(self, name: Name) -> bool:
        slot = self.slots.get(name)
        return slot is not None and slot.running

    def committing(self, name: Name) -> bool:
        slot = self.slots.get(name)
        return slot is not None and slot.committing

    def held(self, name: Name) -> bool:
        slot = self.slots.get(name)
        return slot is not None and slot.holds > 0

    def hold(self, name: Name) -> None:
        """A writer holds the table (its upkeep is not committing): no upkeep starts, and none commits, until it is
        released."""
        slot = self.slots.setdefault(name, _Slot())
        assert not slot.committing, name
        slot.holds += 1

    def exclude(self, name: Name) -> None:
        """The table's running upkeep keeps the writers out (none holds it)."""
        slot = self.slots[name]
        assert slot.running and not slot.holds, name
        slot.committing = True

    def admit(self, name: Name) -> None:
        self.slots[name].committing = False

    def release(self, name: Name) -> None:
        self.slots[name].holds -= 1

    def take(self, now: float = 0.0, tidy: bool = True) -> Taken | None:
        """The first waiting upkeep of a table no writer holds, now running; where none waits (and ``tidy``), the
        tidy upkeep of the table quiet longest since ``quiet_after`` seconds before ``now``. None: none."""
        for name in self.order:
            slot = self.slots[name]
            if not slot.holds:
                self.order.remove(name)
                assert slot.due is not None
                due, slot.due, slot.running = slot.due, None, True
                return Taken(name, due)
        if not tidy or self.order:  # (no look at every table while commits' upkeeps wait)
            return None
        quiet = [(s.since, n) for n, s in self._untidy() if now - s.since >= self.quiet_after]
        if not quiet:
            return None
        name = min(quiet)[1]
        slot = self.slots[name]
        assert slot.last is not None
        slot.running, slot.tidying = True, slot.since
        return Taken(name, dataclasses.replace(slot.last, commits=0, orphans=False, tidy=True))

    def quiet_in(self, now: float) -> float | None:
        """Seconds from ``now`` until a table's tidy upkeep falls due (None: no table waits to be tidied)."""
        if self.order:
            return None
        waiting = [s.since for _, s in self._untidy()]
        return max(min(waiting) + self.quiet_after - now, 0.0) if waiting else None

    def _untidy(self) -> list[tuple[Name, _Slot]]:
        """The tables committed to since they were last tidy whose tidy upkeep could start (none waits, runs or
        holds them)."""
        if self.quiet_after <= 0:
            return []
        return [(n, s) for n, s in self.slots.items()
                if s.last is not None and s.due is None and not s.running and not s.holds]

    def finish(self, name: Name, error: BaseException | None, more: bool = False) -> BaseException | None:
        """The table's upkeep ended (``error``: how it failed; ``more``: a tidy one did something, and may find more
        to do); its failure where it is not kept (another waits to be raised already). A tidy upkeep that found
        nothing (or failed) leaves the table tidy, unless a commit came since it started."""
        slot = self.slots[name]
        slot.running = False
        if slot.tidying is not None and slot.tidying == slot.since and (error is not None or not more):
            slot.last = None
        slot.tidying = None
        if error is not None and self.failure is None:
            self.failure, error = error, None
        return error

    def idle(self, name: Name | None = None) -> bool:
        """No upkeep of the table (None: of any) waits or runs."""
        if name is None:
            return not self.order and not any(s.running for s in self.slots.values())
        slot = self.slots.get(name)
        return slot is None or (slot.due is None and not slot.running)

    def raised(self) -> BaseException | None:
        """The failure to raise now (then forgotten)."""
        failure, self.failure = self.failure, None
        return failure


class Upkeep(Generic[T]):
    """``work(name, due)`` of each table's upkeep, on one thread of its own (started at the first), ``check()``
    before each (it raises to refuse); ``work`` says whether a tidy upkeep did something (``Due.tidy``: due
    ``quiet_after`` seconds after a table's last commit, 0: never)."""

    def __init__(self, work: Callable[[Name, Due[T]], bool], check: Callable[[], None] | None = None,
                 quiet_after: float = 0.0, thread: str = "binlake") -> None:
        self._work = work
        self._name = thread  # the thread's
        self._check = check
        self._queue = UpkeepQueue(quiet_after=quiet_after)
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def due(self, name: Name, due: Due[T]) -> None:
        """The job committed to the table: its upkeep is due (with an entry of it waiting: one, the newest's)."""
        with self._changed:
            if self._closed:
                log.debug("%s.%s: no upkeep after the job's end", *name)
                return
            self._queue.add(name, due, time.monotonic())
            self._start()

    def touched(self, name: Name, due: Due[T]) -> None:
        """The job committed to the table and no upkeep of it is due: only its tidy one, once it is quiet."""
        self._quiet_from_now(self._queue.touched, name, due)

    def loaded(self, name: Name, due: Due[T]) -> None:
        """The job loaded the table (not committed to it yet): its tidy upkeep falls due once it is quiet."""
        self._quiet_from_now(self._queue.loaded, name, due)

    def _quiet_from_now(self, mark: Callable[[Name, Due[Any], float], None], name: Name, due: Due[T]) -> None:
        with self._changed:
            if self._closed or self._queue.quiet_after <= 0:  # (no thread started for nothing)
                return
            mark(name, due, time.monotonic())
            self._start()

    def _start(self) -> None:
        """(Holding ``_changed``.) The thread started at the first entry; it looks at the queue again."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"{self._name}-upkeep", daemon=True)
            self._thread.start()
        self._changed.notify_all()

    @contextmanager
    def hold(self, name: Name) -> Iterator[None]:
        """The table held by the caller: its upkeep's commit finished first (a failure of any raised), no upkeep of
        it started or committing until the end. Holds nest (the same table, or several in any order); never
        ``settle`` while holding one (its upkeep may wait for the hold to commit)."""
        with self._changed:
            self._changed.wait_for(lambda: not self._queue.committing(name))
            self._raise()
            self._queue.hold(name)
        try:
            yield
        finally:
            with self._changed:
                self._queue.release(name)
                self._changed.notify_all()

    @contextmanager
    def exclusive(self, name: Name) -> Iterator[None]:
        """The table's upkeep (its thread, in its work) keeps the writers out: once no writer holds the table, no hold
        of it starts until the end."""
        with self._changed:
            self._changed.wait_for(lambda: not self._queue.held(name))
            self._queue.exclude(name)
        try:
            yield
        finally:
            with self._changed:
                self._queue.admit(name)
                self._changed.notify_all()

    def settle(self, name: Name | None = None) -> None:
        """Until no upkeep of the table (None: of any) waits or runs; a failure raised. (Not while holding it.)"""
        with self._changed:
            self._queue.settling += 1
            self._changed.notify_all()
            try:
                self._changed.wait_for(lambda: self._queue.idle(name))
            finally:
                self._queue.settling -= 1
            self._raise()

    @contextmanager
    def landing(self) -> Iterator[None]:
        """A batch lands inside: the upkeep pauses at its next step boundary (``pause``) until it ends."""
        with self._changed:
            self._queue.landing += 1
        try:
            yield
        finally:
            with self._changed:
                self._queue.landing -= 1
                self._changed.notify_all()

    def pause(self) -> None:
        """On the upkeep's thread, between steps and never inside ``exclusive``: while a batch lands, until it ends,
        at most ``PAUSE_SECONDS``."""
        with self._changed:
            self._changed.wait_for(lambda: self._queue.quiet() or self._closed, timeout=PAUSE_SECONDS)

    def close(self) -> None:
        """The upkeep left done, the thread ended; a failure not raised yet raised."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join()
        with self._changed:
            self._raise()

    def _raise(self) -> None:
        failure = self._queue.raised()
        if failure is not None:
            raise failure

    def _run(self) -> None:
        _yield_cpu()
        while True:
            with self._changed:
                while (taken := self._queue.take(time.monotonic(), not self._closed)) is None:
                    if self._closed and self._queue.idle():
                        return
                    self._changed.wait(None if self._closed else self._queue.quiet_in(time.monotonic()))
            error: BaseException | None = None
            more = False
            try:
                if self._check is not None:
                    self._check()
                more = self._work(*taken)
            except BaseException as exc:  # raised by the next hold, settle or close
                error = exc
            with self._changed:
                dropped = self._queue.finish(taken.name, error, more)
                self._changed.notify_all()
            if dropped is not None:
                log.error("%s.%s: upkeep failed (an earlier failure waits to be raised): %s", *taken.name,
                          _first_line(dropped))


def _yield_cpu() -> None:
    """The calling thread's CPU priority lowered (Linux: a thread's nice value is its own) by ``UPKEEP_NICE``: where
    the batches and Spark keep the CPUs busy, the scheduler gives them first the time an upkeep would take (its
    reads, sorts and writes of parquet run mostly outside the GIL, on this thread). Nothing where not allowed."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + UPKEEP_NICE)
    except (AttributeError, OSError):
        pass


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
