"""Parked tables: a table statement whose mirror rewrite is long (an incompatible ALTER of a large table, an Iceberg
rename's copy) runs beside the micro-batches, which go on landing every other table (docs/LAND.md, "Parked tables").

A *park* holds one or more tables back from a statement on: the statement's action (the rewrite) runs on a thread of
its own; the batches land the other tables and leave the parked tables' records, which Spark's checkpoint goes past;
once the rewrite has committed, the park's tables *catch up*: their records from where each was parked to the end of
the last committed batch are read again from Kafka (by offset) and landed, in sequence order, before the next batch.
The park is kept in a small JSON file beside Spark's checkpoint (``PARKS_FILE``), written before anything that
depends on it, so that a job killed at any point finds it at its start and finishes it.

States of a park (``State``), inputs (``Input``) and transitions (``TRANSITIONS``: (state, input) -> state; ``None``
is "no park"):

  REWRITING    its rewrites (the statements' long actions) run beside the batches: started when the park is made,
               and again when the job starts (each action is idempotent by its markers: table_statements.py)
  REWRITTEN    every rewrite has committed: the park catches up as soon as it is *settled* (below)
  CATCHING_UP  its tables' records from their start offsets to ``to`` (the end of the committed batch ``batch``) are
               being landed, with the park's own writer identity (``identity``: ``<app id>~p<id>``) and ``batch`` as
               the version: a catch-up resumed after a kill lands the same range with the same identity, each part
               skipped where it committed
  None         caught up (the park is removed): its tables land with the batches again

  PARK       None -> REWRITING          a long action of an unparked table: a park of its tables (a rename: both)
  JOIN       REWRITING -> REWRITING     a statement names a parked table and others: those are parked too, from
             REWRITTEN -> REWRITTEN     the statement on (they catch up together: e.g. RENAME TABLE t TO t2)
  MERGE      REWRITING -> REWRITING     a statement names the tables of two parks: one park of both (REWRITING
             REWRITTEN -> REWRITING     until every rewrite of either has committed: the other's input)
  REWRITTEN  REWRITING -> REWRITTEN     its last rewrite committed (written by the rewrite's thread)
  CATCH_UP   REWRITTEN -> CATCHING_UP   under the landing lock, between batches (recorded before its first write)
  CAUGHT_UP  CATCHING_UP -> None        after its last write, before the lock is let go

Anything else is a bug (``transition`` raises). A park made while a batch (or a catch-up) lands is recorded before
the batch goes on, so the batch replayed after a kill finds its tables parked and leaves them as the first run did.

Which records a park holds back: a parked table's record rows, statements and verify rows whose first sequence is
the park's sequence for that table or later (``ParkedTable.seq``); earlier ones landed before it was parked. A
park is *settled* when every table of it was parked by a committed batch (``ParkedTable.batch`` at most the last
committed batch) and not by a catch-up still under way (``ParkedTable.context``): only then do its records lie
wholly before the committed batch's end. It catches up once settled, when no batch is landing and every batch
landed by this process has committed (Spark's commit follows the batch's return): the next batch then starts where
the catch-up ended.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson

from ingester.records.statement import TableStatement

from .lake_files import LakeFiles
from .lake_paths import join
from .statements import Action, Name, StatementAt

log = logging.getLogger("binlake.land")
PARKS_FILE = "_binlake_parked.json"  # beside Spark's checkpoint files (offsets/, commits/)
EARLIEST = -2  # a start offset: the partition's first (Kafka's JSON offsets)
Offsets = dict[str, dict[int, int]]  # topic -> partition -> offset


class State(StrEnum):
    REWRITING = "rewriting"
    REWRITTEN = "rewritten"
    CATCHING_UP = "catching up"


class Input(StrEnum):
    PARK = "park"
    JOIN = "join"
    MERGE = "merge"  # with a park that is still rewriting
    MERGE_REWRITTEN = "merge rewritten"  # with a park whose rewrites have all committed
    REWRITTEN = "rewritten"
    CATCH_UP = "catch up"
    CAUGHT_UP = "caught up"


TRANSITIONS: dict[tuple[State | None, Input], State | None] = {
    (None, Input.PARK): State.REWRITING,
    (State.REWRITING, Input.JOIN): State.REWRITING,
    (State.REWRITTEN, Input.JOIN): State.REWRITTEN,
    (State.REWRITING, Input.MERGE): State.REWRITING,
    (State.REWRITTEN, Input.MERGE): State.REWRITING,
    (State.REWRITING, Input.MERGE_REWRITTEN): State.REWRITING,
    (State.REWRITTEN, Input.MERGE_REWRITTEN): State.REWRITTEN,
    (State.REWRITING, Input.REWRITTEN): State.REWRITTEN,
    (State.REWRITTEN, Input.CATCH_UP): State.CATCHING_UP,
    (State.CATCHING_UP, Input.CAUGHT_UP): None,
}


class ParkError(RuntimeError):
    """A transition the machine does not have (a bug), or a park file that cannot be read."""


def transition(state: State | None, what: Input) -> State | None:
    try:
        return TRANSITIONS[(state, what)]
    except KeyError:
        raise ParkError(f"a park {state.value if state else 'not made'} cannot take {what.value}") from None


@dataclass
class ParkedTable:
    """A table a park holds back: its records of sequence ``seq`` or later, read again from ``start`` (the offset of
    its first record not landed, per partition of ``topic``; EARLIEST for a partition it had none in yet)."""

    db: str
    table: str
    topic: str
    seq: bytes
    start: dict[int, int]
    batch: int  # the batch that parked it
    context: int | None = None  # the park whose catch-up parked it (None: a micro-batch)

    @property
    def name(self) -> Name:
        return (self.db, self.table)

    def to_json(self) -> dict[str, Any]:
        return {"db": self.db, "table": self.table, "topic": self.topic, "seq": self.seq.hex(),
                "start": {str(p): o for p, o in sorted(self.start.items())}, "batch": self.batch,
                "context": self.context}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ParkedTable:
        return cls(d["db"], d["table"], d["topic"], bytes.fromhex(d["seq"]),
                   {int(p): int(o) for p, o in d["start"].items()}, int(d["batch"]), d.get("context"))


@dataclass
class Rewrite:
    """A long action run beside the batches, with the writer identity it would have had in its batch."""

    action: Action
    identity: str
    done: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"action": action_json(self.action), "identity": self.identity, "done": self.done}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Rewrite:
        return cls(action_of(d["action"]), d["identity"], bool(d.get("done")))


@dataclass
class Park:
    id: int
    state: State
    since: float  # when it was made (seconds since the epoch)
    rewrites: list[Rewrite]
    tables: list[ParkedTable]
    batch: int | None = None  # CATCHING_UP: the committed batch it catches up to, its writes' version
    to: Offsets = field(default_factory=dict)  # CATCHING_UP: that batch's end offsets of the tables' topics

    def table(self, name: Name) -> ParkedTable | None:
        return next((t for t in self.tables if t.name == name), None)

    @property
    def identity_part(self) -> str:
        """The part of the catch-up's writes (lake_format.LakeFormat.part): its writer identity is its own."""
        return f"p{self.id}"

    def settled(self, committed: int, parks: Iterable[int]) -> bool:
        """Whether every table was parked by a committed batch and by no catch-up still under way."""
        live = set(parks)
        return all(t.batch <= committed and (t.context is None or t.context not in live) for t in self.tables)

    def describe(self) -> str:
        """What holds it back, for the log and ``binlake status``."""
        actions = "; ".join(r.action.describe() for r in self.rewrites)
        return f"{self.state.value} ({actions})"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "state": self.state.value, "since": self.since,
                "rewrites": [r.to_json() for r in self.rewrites], "tables": [t.to_json() for t in self.tables],
                "batch": self.batch,
                "to": {topic: {str(p): o for p, o in parts.items()} for topic, parts in self.to.items()}}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Park:
        return cls(int(d["id"]), State(d["state"]), float(d["since"]), [Rewrite.from_json(r) for r in d["rewrites"]],
                   [ParkedTable.from_json(t) for t in d["tables"]], d.get("batch"),
                   {topic: {int(p): int(o) for p, o in parts.items()} for topic, parts in (d.get("to") or {}).items()})


def action_json(action: Action) -> dict[str, Any]:
    at = action.at
    return {"op": action.op, "name": list(action.name), "index": action.index,
            "to": list(action.to) if action.to is not None else None, "pair_seen": sorted(action.pair_seen),
            "at": {"statement": at.statement.to_json(), "seq": at.seq.hex(), "position": at.position, "gtid": at.gtid,
                   "commit_ts": at.commit_ts, "topic": at.topic, "partition": at.partition, "offset": at.offset,
                   "batch_id": at.batch_id, "ingest_micros": at.ingest_micros}}


def action_of(d: dict[str, Any]) -> Action:
    a = d["at"]
    at = StatementAt(TableStatement.from_json(a["statement"]), bytes.fromhex(a["seq"]), a["position"], a["gtid"],
                     int(a["commit_ts"]), a["topic"], int(a["partition"]), int(a["offset"]), int(a["batch_id"]),
                     int(a["ingest_micros"]))
    to = d.get("to")
    return Action(d["op"], (d["name"][0], d["name"][1]), at, int(d["index"]), None if to is None else (to[0], to[1]),
                  frozenset(d.get("pair_seen") or ()))


def start_offsets(records: Iterable[tuple[int, int, bytes]], seq: bytes, end: dict[int, int]) -> dict[int, int]:
    """Where a table parked at ``seq`` is read again: per partition, the offset of its first record (``records``:
    (partition, offset, first sequence) of the table's records the batch has) of ``seq`` or later, else the batch's
    ``end`` offset of that partition of its topic (nothing of it in the batch is held back)."""
    out = dict(end)
    firsts: dict[int, int] = {}
    for partition, offset, first in records:
        if first >= seq:
            firsts[partition] = min(offset, firsts.get(partition, offset))
    out.update(firsts)
    return out


def read_parks(files: LakeFiles, checkpoint: str) -> list[Park]:
    """The parks of a checkpoint, read without a job (``binlake status``)."""
    data = files.read(join(checkpoint, PARKS_FILE))
    return [] if data is None else [Park.from_json(p) for p in orjson.loads(data)["parks"]]


class ParkBook:
    """The parks, kept in ``<checkpoint>/PARKS_FILE`` (``files``: the checkpoint's); every change is written whole
    before it returns (a local file replaced at once, or one PUT). Thread-safe: the batches, the rewrites' thread and
    the catch-ups change it."""

    def __init__(self, files: LakeFiles, checkpoint: str) -> None:
        self.files = files
        self.path = join(checkpoint, PARKS_FILE)
        self._lock = threading.RLock()
        self._parks: dict[int, Park] = {}
        self._next = 1
        self.load()

    def load(self) -> None:
        data = self.files.read(self.path)
        with self._lock:
            if data is None:
                self._parks, self._next = {}, 1
                return
            try:
                found = orjson.loads(data)
                parks = [Park.from_json(p) for p in found["parks"]]
            except (ValueError, KeyError, TypeError) as exc:
                raise ParkError(f"{self.path}: not a park file binlake can read ({exc})") from None
            self._parks = {p.id: p for p in parks}
            self._next = max([int(found.get("next", 1)), *(p.id + 1 for p in parks)])
        for park in parks:
            log.info("park %d (%s, since %s): %s", park.id, park.describe(),
                     time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(park.since)),
                     ", ".join(f"`{t.db}`.`{t.table}` from {t.start}" for t in park.tables))

    def _save(self) -> None:
        data = orjson.dumps({"version": 1, "next": self._next, "parks": [p.to_json() for p in self._parks.values()]},
                            option=orjson.OPT_INDENT_2)
        self.files.write(self.path, data)

    # --- what the job asks

    def parks(self) -> list[Park]:
        with self._lock:
            return list(self._parks.values())

    def get(self, park_id: int) -> Park | None:
        with self._lock:
            return self._parks.get(park_id)

    def holding(self, name: Name, seq: bytes, scope: int | None = None) -> Park | None:
        """The park that holds back the table's records of sequence ``seq`` (None: none does); ``scope``: the park
        whose catch-up asks (its own tables are not held back from it)."""
        with self._lock:
            for park in self._parks.values():
                if park.id == scope:
                    continue
                table = park.table(name)
                if table is not None and seq >= table.seq:
                    return park
        return None

    def tables(self) -> dict[Name, Park]:
        """Every parked table and its park."""
        with self._lock:
            return {t.name: p for p in self._parks.values() for t in p.tables}

    # --- the transitions

    def park(self, rewrite: Rewrite, tables: list[ParkedTable]) -> Park:
        with self._lock:
            state = transition(None, Input.PARK)
            assert state is not None
            park = Park(self._next, state, time.time(), [rewrite], tables)
            self._next += 1
            self._parks[park.id] = park
            self._save()
        log.info("`%s`.`%s`: parked (park %d) at %s: %s runs beside the batches; %s wait%s for it",
                 *rewrite.action.name, park.id, rewrite.action.at.position, rewrite.action.describe(),
                 ", ".join(f"`{t.db}`.`{t.table}`" for t in tables), "s" if len(tables) == 1 else "")
        return park

    def join(self, park_id: int, tables: list[ParkedTable]) -> None:
        with self._lock:
            park = self._parks[park_id]
            park.state = _required(transition(park.state, Input.JOIN))
            park.tables += [t for t in tables if park.table(t.name) is None]
            self._save()
        log.info("%s: parked too (park %d), tied to its tables by a statement",
                 ", ".join(f"`{t.db}`.`{t.table}`" for t in tables), park_id)

    def merge(self, park_id: int, other_id: int) -> None:
        """``other``'s tables and rewrites become ``park``'s."""
        with self._lock:
            park, other = self._parks[park_id], self._parks.pop(other_id)
            what = Input.MERGE_REWRITTEN if other.state == State.REWRITTEN else Input.MERGE
            if other.state not in (State.REWRITING, State.REWRITTEN):
                raise ParkError(f"park {other.id} is {other.state.value}: it cannot be merged")
            park.state = _required(transition(park.state, what))
            park.rewrites += other.rewrites
            park.tables += [t for t in other.tables if park.table(t.name) is None]
            park.since = min(park.since, other.since)
            self._save()

    def rewritten(self, park_id: int, rewrite: Rewrite) -> Park | None:
        """A rewrite committed; the park (REWRITTEN once every rewrite of it has)."""
        with self._lock:
            park = self._parks.get(park_id)
            if park is None:
                return None
            for r in park.rewrites:
                if r.identity == rewrite.identity and r.action.marker == rewrite.action.marker:
                    r.done = True
            if park.state == State.REWRITING and all(r.done for r in park.rewrites):
                park.state = _required(transition(park.state, Input.REWRITTEN))
            self._save()
            return park

    def catching_up(self, park_id: int, batch: int, to: Offsets) -> Park:
        with self._lock:
            park = self._parks[park_id]
            park.state = _required(transition(park.state, Input.CATCH_UP))
            park.batch, park.to = batch, to
            self._save()
            return park

    def caught_up(self, park_id: int) -> None:
        with self._lock:
            park = self._parks[park_id]
            if transition(park.state, Input.CAUGHT_UP) is not None:
                raise ParkError(f"park {park_id}: caught up into a state")
            del self._parks[park_id]
            self._save()


def _required(state: State | None) -> State:
    if state is None:
        raise ParkError("a park ended where it cannot")
    return state


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
        self._queue: list[tuple[int, Rewrite]] = []
        self._running: tuple[int, Rewrite] | None = None
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
                if not r.done:
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
        """A new park's rewrite starts."""
        for r in park.rewrites:
            self._submit(park.id, r)

    def parked(self) -> int:
        """How many tables are parked."""
        return len(self.book.tables())

    def settle(self, timeout: float | None = None) -> None:
        """Until every park has caught up (``--trigger available-now``, after the query's last batch: the next
        batch is not coming). Raises the work's failure."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.failure is not None:
                raise self.failure
            if not self.book.parks():
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
            self._queue.append((park_id, rewrite))
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
                park_id, rewrite = self._running = self._queue.pop(0)
            started = time.monotonic()
            try:
                self._rewrite(rewrite)
            except BaseException as exc:  # the job stops at its next batch with it
                self._failed(exc, f"park {park_id}: the rewrite of {rewrite.action.describe()} failed")
                return
            finally:
                self._running = None
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
