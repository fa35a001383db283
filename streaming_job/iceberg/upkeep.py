"""The upkeep of the job's Iceberg tables off the batches' path (docs/LAND.md, "Iceberg"): after a commit to a table,
its compaction and snapshot expiry (maintenance.py) and, where due, its orphan files' removal (orphans.py) run on a
thread of their own, beside the next batches, instead of inside the batch that committed. A batch waits for a
table's upkeep only where it writes that table while that upkeep commits (a compaction reads and writes its files
with the writers going on: its commit follows theirs).

The rules, kept by ``UpkeepQueue`` (the state, no threads) and ``Upkeep`` (its one thread and lock):

- one thread: no two upkeeps at once; tables in the order their upkeep fell due;
- at most one entry per table: a table committed to again while its upkeep waits keeps its one entry and its place,
  with the newest commit's table, summary properties and key (``Due.then``: the commits counted, the orphans'
  removal due where either was);
- a writer holds a table (``Upkeep.hold``) while it commits to it or reads its data files: the hold first waits
  while the table's upkeep commits, and no upkeep of the table starts while it is held. An upkeep commits (or deletes
  files) only inside ``Upkeep.exclusive``: it waits until no writer holds the table, and keeps new holds out until it
  ends. Other tables' upkeeps go on, and other tables' writers never wait;
- the upkeep reads the table through a copy of the job's Table object (``copy_of``: a writer's commit replaces the
  job's Table's metadata meanwhile) and commits through one made inside ``exclusive`` (``on_copy``: the newest), whose
  metadata the job's own Table takes at its end, while no writer holds it. Its readers meanwhile (the batch's checks
  before its commit) see the table before or after the upkeep, whose snapshots name the same batch and hold the same
  rows, schema and properties;
- a failure is kept and raised once, by the next hold or settle (of any table) or by ``close``; one that comes while
  another waits to be raised is logged;
- ``check`` runs before each upkeep (the lake's lease: lake/lease.py), so none commits once another job took it;
- batches go first: while one lands (``Upkeep.landing``, the whole batch: its read, decoding and commits), the upkeep
  waits at the boundaries of its steps (``Upkeep.pause``: before it starts, between a compaction's reads and writes,
  before it keeps the writers out) for the batch's end, at most ``PAUSE_SECONDS`` a step, so that batches landing back
  to back do not starve it. Both run in one process: an upkeep beside a batch took half of its time (the GIL), and
  the slowest batches were those a compaction overlapped. ``settle`` lets it go on without pausing;
- ``close`` waits for the entries left (at most one per table, each the work its batch used to do itself: a
  compaction within land.compact_bytes, an expiry, an orphans' listing), then ends the thread. Entries after it are
  dropped: the process is ending, and the next run compacts at its first commit to each table, counts expiry anew and
  looks for orphans at its first load of each.

Exactly once holds as before: a compaction's ``replace`` snapshot carries the summary properties of the newest commit
it follows (no commit to the table comes between: ``exclusive``), so the table's newest snapshot names its last
batch. A
kill -9 during an upkeep leaves at most files no metadata names (a compaction's files before its commit, the files of
snapshots expired before they were deleted), which orphans.py removes."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from .catalog import first_line

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger("binlake.land")
Name = tuple[str, str]  # a table's (namespace, name)
PAUSE_SECONDS = 2.0  # the longest an upkeep step waits for a landing batch
UPKEEP_NICE = 10  # how much lower the upkeep thread's CPU priority is than the job's


@dataclass(frozen=True)
class Due:
    """A table's upkeep after the job's commits to it: ``table`` as the job committed it (its Table object),
    the newest commit's summary ``properties`` and ``key`` (a mirror's), how many ``commits`` it follows, and
    whether its orphan files are to be looked for (orphans.OrphanFiles.due)."""

    table: Table
    properties: dict[str, str]
    key: list[str]
    commits: int = 1
    orphans: bool = False

    def then(self, newer: Due) -> Due:
        """This entry and a newer commit's, as one."""
        return Due(newer.table, newer.properties, newer.key, self.commits + newer.commits,
                   self.orphans or newer.orphans)


class Taken(NamedTuple):
    """A table's upkeep, taken by the thread."""

    name: Name
    due: Due


@dataclass
class _Slot:
    due: Due | None = None  # waiting
    running: bool = False
    committing: bool = False  # its upkeep keeps the writers out (Upkeep.exclusive)
    holds: int = 0  # writers holding the table


@dataclass
class UpkeepQueue:
    """The upkeep's state: which tables wait (in order), which one runs, which are held, the failure to raise."""

    slots: dict[Name, _Slot] = field(default_factory=dict)
    order: list[Name] = field(default_factory=list)  # tables whose upkeep waits, the oldest first
    failure: BaseException | None = None  # kept until raised
    landing: int = 0  # batches landing now (Upkeep.landing)
    settling: int = 0  # callers waiting for upkeeps to end (Upkeep.settle): no pause then

    def quiet(self) -> bool:
        """Whether an upkeep step may go on now: no batch lands, or someone waits for the upkeep."""
        return not self.landing or self.settling > 0

    def add(self, name: Name, due: Due) -> None:
        """The table committed to: its upkeep waits (one entry per table)."""
        slot = self.slots.setdefault(name, _Slot())
        if slot.due is None:
            self.order.append(name)
            slot.due = due
        else:
            slot.due = slot.due.then(due)

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

    def take(self) -> Taken | None:
        """The first waiting upkeep of a table no writer holds, now running (None: none)."""
        for name in self.order:
            slot = self.slots[name]
            if not slot.holds:
                self.order.remove(name)
                assert slot.due is not None
                due, slot.due, slot.running = slot.due, None, True
                return Taken(name, due)
        return None

    def finish(self, name: Name, error: BaseException | None) -> BaseException | None:
        """The table's upkeep ended (``error``: how it failed); its failure where it is not kept (another waits to
        be raised already)."""
        self.slots[name].running = False
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


class Upkeep:
    """``work(name, due)`` of each table's upkeep, on one thread of its own (started at the first), ``check()``
    before each (it raises to refuse)."""

    def __init__(self, work: Callable[[Name, Due], None], check: Callable[[], None] | None = None) -> None:
        self._work = work
        self._check = check
        self._queue = UpkeepQueue()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def due(self, name: Name, due: Due) -> None:
        """The job committed to the table: its upkeep is due (with an entry of it waiting: one, the newest's)."""
        with self._changed:
            if self._closed:
                log.debug("%s.%s: no upkeep after the job's end", *name)
                return
            self._queue.add(name, due)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="binlake-iceberg-upkeep", daemon=True)
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
                while (taken := self._queue.take()) is None:
                    if self._closed and self._queue.idle():
                        return
                    self._changed.wait()
            error: BaseException | None = None
            try:
                if self._check is not None:
                    self._check()
                self._work(*taken)
            except BaseException as exc:  # raised by the next hold, settle or close
                error = exc
            with self._changed:
                dropped = self._queue.finish(taken.name, error)
                self._changed.notify_all()
            if dropped is not None:
                log.error("%s.%s: upkeep failed (an earlier failure waits to be raised): %s", *taken.name,
                          first_line(dropped))


def copy_of(table: Table) -> Table:
    """Another Table object of ``table``'s metadata now (a commit through either replaces only its own)."""
    from pyiceberg.table import Table

    return Table(table.name(), table.metadata, table.metadata_location, table.io, table.catalog, table.config)


@contextmanager
def on_copy(table: Table) -> Iterator[Table]:
    """A copy of ``table`` to commit through; then ``table`` takes the copy's metadata, what was committed (also
    where the block failed after a commit)."""
    copy = copy_of(table)
    try:
        yield copy
    finally:
        table.metadata, table.metadata_location = copy.metadata, copy.metadata_location


def _yield_cpu() -> None:
    """The calling thread's CPU priority lowered (Linux: a thread's nice value is its own) by ``UPKEEP_NICE``: where
    the batches and Spark keep the CPUs busy, the scheduler gives them first the time an upkeep would take (its
    reads, sorts and writes of parquet run mostly outside the GIL, on this thread). Nothing where not allowed."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + UPKEEP_NICE)
    except (AttributeError, OSError):
        pass
