"""The parks at work (parking.py's parks, kept in its ``ParkBook``): each rewrite on a thread of its own beside the
micro-batches, one at a time in the order they were parked; each rewritten park's catch-up on another, between two
batches (under the landing lock, which every batch holds while it lands), once the batches that parked its tables have
committed (docs/LAND.md, "Parked tables")."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from .parking import Park, ParkBook, Rewrite, State

log = logging.getLogger("binlake.land")


class Queued(NamedTuple):
    """A rewrite waiting for the rewrites' thread, and its park."""

    park_id: int
    rewrite: Rewrite


class Parking:
    """The parks at work: ``rewrite(rewrite)`` runs each rewrite on a thread of its own (one at a time, in the order
    they were parked), ``catch_up(park, landed)`` lands a settled, rewritten park's records (landed: the last committed
    batch, progress.Landed) under the landing lock, which every batch holds while it lands (``landing``).

    ``committed()``: the checkpoint's last committed batch. A failure of a rewrite or a catch-up is kept
    (``failure``): the next batch raises it, and so does ``settle``; the next run does the work again."""

    def __init__(self, book: ParkBook, rewrite: Callable[[Rewrite], None],
                 catch_up: Callable[[Park, Any], None], committed: Callable[[], Any], poll: float = 0.5) -> None:
        self.book = book
        self._rewrite = rewrite
        self._catch_up = catch_up
        self._committed = committed
        self.poll = poll
        self.lock = threading.RLock()  # held by a batch while it lands, and by a catch-up
        self.failure: BaseException | None = None
        self.processed: int | None = None  # the last batch this process landed
        self._wake = threading.Condition()
        self._queue: list[Queued] = []
        self._closed = False
        self._threads: list[threading.Thread] = []

    # --- the job's life

    def start(self) -> None:
        """At the job's start: the catch-ups a kill interrupted are finished (before any batch: their range is
        recorded), and the rewrites of the parks still rewriting run again (each idempotent by its markers)."""
        for park in sorted(self.book.parks(), key=lambda p: p.id):
            if park.state == State.CATCHING_UP:
                log.info("park %d: its catch-up was interrupted: landing it again", park.id)
                with self.lock:
                    self._catch_up(park, None)
                    self.book.caught_up(park.id)
        for park in sorted(self.book.parks(), key=lambda p: p.id):
            for r in park.rewrites:
                if r.runs:
                    log.info("park %d: its rewrite runs again: %s", park.id, r.action.describe())
                    self._submit(park.id, r)
        self._thread(self._catcher, "binlake-park-catch-up")

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify_all()

    def landing(self, batch_id: int) -> _Landing:
        """The context a batch lands in: the lock held (no catch-up meanwhile), a failure of the work beside it
        raised first; the batch recorded as landed by this process when it returns."""
        return _Landing(self, batch_id)

    def submit(self, park: Park) -> None:
        """A new park's rewrite starts (not one that awaits entries: ``run``, once they came)."""
        for r in park.rewrites:
            if r.runs:
                self._submit(park.id, r)

    def run(self, park_id: int, rewrite: Rewrite) -> None:
        """A park's rewrite whose awaited entries have come starts."""
        self._submit(park_id, rewrite)

    def parked(self) -> int:
        """How many tables are parked."""
        return len(self.book.tables())

    def settle(self, timeout: float | None = None) -> None:
        """Until every park has caught up (``--trigger available-now``, after the query's last batch: the next
        batch is not coming), or awaits an entry no batch of this query brings (its topic's end was read before the
        entry's transaction reached it). Raises the work's failure."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.failure is not None:
                raise self.failure
            parks = self.book.parks()
            if not parks:
                return
            if all(any(r.awaiting for r in p.rewrites) for p in parks):  # an entry past the query's end: next run's
                log.info("%d parked tables await a rename's entry the query has not read: the next run lands them",
                         sum(len(p.tables) for p in parks))
                return
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError("parked tables did not catch up in time")
            self.kick()
            time.sleep(0.05)

    def kick(self) -> None:
        with self._wake:
            self._wake.notify_all()

    # --- the threads

    def _thread(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)  # a kill's worth at exit: resumed next run
        thread.start()
        self._threads.append(thread)

    def _submit(self, park_id: int, rewrite: Rewrite) -> None:
        with self._wake:
            self._queue.append(Queued(park_id, rewrite))
            if not any(t.name == "binlake-park-rewrite" and t.is_alive() for t in self._threads):
                self._thread(self._rewriter, "binlake-park-rewrite")
            self._wake.notify_all()

    def _rewriter(self) -> None:
        while True:
            with self._wake:
                while not self._queue and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                queued = self._queue.pop(0)
            park_id, rewrite = queued.park_id, queued.rewrite
            started = time.monotonic()
            try:
                self._rewrite(rewrite)
            except BaseException as exc:  # the job stops at its next batch with it
                self._failed(exc, f"park {park_id}: the rewrite of {rewrite.action.describe()} failed")
                return
            park = self.book.rewritten(park_id, rewrite)
            log.info("park %d: rewritten in %.1fs: %s%s", park_id, time.monotonic() - started,
                     rewrite.action.describe(), f"; {park.describe()}" if park is not None else "")
            self.kick()

    def _catcher(self) -> None:
        while True:
            with self._wake:
                if self._closed:
                    return
                self._wake.wait(self.poll)
                if self._closed:
                    return
            if self.failure is not None:
                continue
            try:
                self._catch_up_ready()
            except BaseException as exc:  # (as a rewrite's)
                self._failed(exc, "a parked table's catch-up failed")

    def _catch_up_ready(self) -> None:
        ready = [p for p in self.book.parks() if p.state == State.REWRITTEN]
        if not ready:
            return
        if not self.lock.acquire(timeout=self.poll):
            return  # a batch lands: after it
        try:
            landed = self._committed()
            if landed is None or (self.processed is not None and landed.batch < self.processed):
                return  # the batch this process landed last is not committed yet: its records may be held back
            live = [p.id for p in self.book.parks()]
            for park in sorted(ready, key=lambda p: p.id):
                current = self.book.get(park.id)
                if current is None or current.state != State.REWRITTEN or not current.settled(landed.batch, live):
                    continue
                started = time.monotonic()
                self._catch_up(current, landed)
                self.book.caught_up(park.id)
                log.info("park %d: caught up to batch %d in %.1fs: %s land with the batches again", park.id,
                         landed.batch, time.monotonic() - started,
                         ", ".join(f"`{t.db}`.`{t.table}`" for t in current.tables))
                live = [p.id for p in self.book.parks()]
        finally:
            self.lock.release()

    def _failed(self, exc: BaseException, what: str) -> None:
        log.error("%s: %s", what, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        if self.failure is None:
            self.failure = exc


class _Landing:
    def __init__(self, parking: Parking, batch_id: int) -> None:
        self.parking, self.batch_id = parking, batch_id

    def __enter__(self) -> None:
        self.parking.lock.acquire()
        if self.parking.failure is not None:
            self.parking.lock.release()
            raise self.parking.failure

    def __exit__(self, kind: Any, value: Any, tb: Any) -> None:
        if kind is None:
            self.parking.processed = self.batch_id
        self.parking.lock.release()
        if kind is None:
            self.parking.kick()
