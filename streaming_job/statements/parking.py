"""Parked tables: a table statement whose mirror rewrite is long (an incompatible ALTER of a large table, an Iceberg
rename's copy) runs beside the micro-batches, which go on landing every other table (docs/LAND.md, "Parked tables").

A *park* holds one or more tables back from a statement on: the statement's action (the rewrite) runs on a thread of
its own; the batches land the other tables and leave the parked tables' records, which Spark's checkpoint goes past;
once the rewrite has committed, the park's tables *catch up*: their records from where each was parked to the end of
the last committed batch are read again from Kafka (by offset) and landed, in sequence order, before the next batch.
The park is kept in a small JSON file beside Spark's checkpoint (``PARKS_FILE``), written before anything that
depends on it, so that a job killed at any point finds it at its start and finishes it. This module is the parks and
their file (``ParkBook``); parking_work.py runs them (``Parking``: the rewrites' and catch-ups' threads).

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

  PARK       None -> REWRITING          a long action of an unparked table: a park of its tables (a rename: both);
                                        or a rename whose other entry a bounded batch has not read yet (below)
  JOIN       REWRITING -> REWRITING     a statement names a parked table and others: those are parked too, from
             REWRITTEN -> REWRITTEN     the statement on (they catch up together: e.g. RENAME TABLE t TO t2)
  MERGE      REWRITING -> REWRITING     a statement names the tables of two parks: one park of both (REWRITING
             REWRITTEN -> REWRITING     until every rewrite of either has committed: the other's input)
  ARRIVED    REWRITING -> REWRITING     an awaited rewrite's last entry came: it runs (below)
  REWRITTEN  REWRITING -> REWRITTEN     its last rewrite committed (written by the rewrite's thread)
  CATCH_UP   REWRITTEN -> CATCHING_UP   under the landing lock, between batches (recorded before its first write)
  CAUGHT_UP  CATCHING_UP -> None        after its last write, before the lock is let go

A rewrite *awaits* (``Rewrite.awaiting``: topics) where a bounded micro-batch (``--max-batch-bytes``, or
``--max-offsets-per-trigger``) has only some of a rename pair's entries (the old name's topic cut before its entry,
or the new name's): the rename is not applied there, its tables are parked from it on, and the rows before it of the
topic still to come land with the batches; the batch (or catch-up) that brings the last entry records it
(``arrived``: ARRIVED, and the batch in ``Rewrite.arrived``), and the rename then runs as any rewrite. A park with
such a rewrite is settled only once the batch that brought its last entry has committed too.

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
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, NamedTuple

import orjson

from ingester.records.statement import TableStatement

from ..lake.files import LakeFiles
from ..lake.paths import join
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
    ARRIVED = "arrived"  # an awaited rewrite's entries have all come
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
    (State.REWRITING, Input.ARRIVED): State.REWRITING,
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
    """A long action run beside the batches, with the writer identity it would have had in its batch; or a rename
    awaiting its entries in ``awaiting`` (topics a bounded batch cut before them), run once they came (in batch
    ``arrived``)."""

    action: Action
    identity: str
    done: bool = False
    awaiting: list[str] = field(default_factory=list)
    arrived: int | None = None

    @property
    def runs(self) -> bool:
        """Whether it is to run (or runs): not done, and awaiting no entry."""
        return not self.done and not self.awaiting

    def to_json(self) -> dict[str, Any]:
        return {"action": action_json(self.action), "identity": self.identity, "done": self.done,
                "awaiting": self.awaiting, "arrived": self.arrived}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Rewrite:
        return cls(action_of(d["action"]), d["identity"], bool(d.get("done")), list(d.get("awaiting") or []),
                   d.get("arrived"))


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
        return all(t.batch <= committed and (t.context is None or t.context not in live) for t in self.tables) \
            and all(r.arrived is None or r.arrived <= committed for r in self.rewrites)

    def describe(self) -> str:
        """What holds it back, for the log and ``binlake status``."""
        actions = "; ".join(r.action.describe() + (f": waits for its entry in {', '.join(r.awaiting)}"
                                                   if r.awaiting else "") for r in self.rewrites)
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


class RecordAt(NamedTuple):
    """Where a record of a table is in Kafka, and its first sequence: where a table parked at a sequence is read
    again (``start_offsets``)."""

    partition: int
    offset: int
    first_seq: bytes


def start_offsets(records: Iterable[RecordAt], seq: bytes, end: dict[int, int]) -> dict[int, int]:
    """Where a table parked at ``seq`` is read again: per partition, the offset of its first record (``records``:
    the table's records the batch has) of ``seq`` or later, else the batch's ``end`` offset of that partition of its
    topic (nothing of it in the batch is held back)."""
    out = dict(end)
    firsts: dict[int, int] = {}
    for r in records:
        if r.first_seq >= seq:
            firsts[r.partition] = min(r.offset, firsts.get(r.partition, r.offset))
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

    def containing(self, name: Name, scope: int | None = None) -> Park | None:
        """The park the table is in, from whichever sequence (None: none; ``scope`` as ``holding``'s)."""
        with self._lock:
            return next((p for p in self._parks.values() if p.id != scope and p.table(name) is not None), None)

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
        what = f"waits for its entry in {', '.join(rewrite.awaiting)}" if rewrite.awaiting else \
            "runs beside the batches"
        log.info("`%s`.`%s`: parked (park %d) at %s: %s %s; %s wait%s for it",
                 *rewrite.action.name, park.id, rewrite.action.at.position, rewrite.action.describe(), what,
                 ", ".join(f"`{t.db}`.`{t.table}`" for t in tables), "s" if len(tables) == 1 else "")
        return park

    def arrived(self, park_id: int, action: Action, topics: set[str], batch: int) -> Rewrite | None:
        """Entries of ``action`` came in ``topics`` (in batch ``batch``, or a catch-up to it): the park's rewrite
        awaiting them, where that was its last awaited entry (it runs now; None: nothing more to run)."""
        with self._lock:
            park = self._parks[park_id]
            for r in park.rewrites:
                if not r.awaiting or not same_action(r.action, action) or not topics & set(r.awaiting):
                    continue
                r.awaiting = [t for t in r.awaiting if t not in topics]
                if r.awaiting:
                    self._save()
                    return None
                park.state = _required(transition(park.state, Input.ARRIVED))
                r.arrived = batch
                if r.action.statement.columns is None and action.statement.columns is not None:
                    r.action = replace(r.action, at=replace(action.at, batch_id=r.action.at.batch_id))
                r.action = replace(r.action, pair_seen=r.action.pair_seen | action.pair_seen)
                self._save()
                log.info("park %d: %s: its entries have all come (batch %d): it runs", park_id,
                         r.action.describe(), batch)
                return r
        return None

    def join(self, park_id: int, tables: list[ParkedTable]) -> None:
        with self._lock:
            park = self._parks[park_id]
            park.state = _required(transition(park.state, Input.JOIN))
            for t in tables:
                _add(park, t)
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
            for t in other.tables:
                _add(park, t)
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


def _add(park: Park, table: ParkedTable) -> None:
    """A table joins the park; one it has already is held back from the earlier of the two sequences (a bounded
    batch can tie it to the park by another topic's later statement before its own topic reaches an earlier one):
    read again from the earlier offsets (a partition either lacks: from its first)."""
    have = park.table(table.name)
    if have is None:
        park.tables.append(table)
    elif table.seq < have.seq:
        have.seq = table.seq
        have.start = {p: min(o, table.start[p]) for p, o in have.start.items() if p in table.start}
        have.batch = max(have.batch, table.batch)
        have.context = table.context if table.context is not None else have.context


def same_action(a: Action, b: Action) -> bool:
    """Whether two actions are the same statement's same action (seen in two batches: its index may differ)."""
    return (a.at.seq, a.op, a.name, a.to) == (b.at.seq, b.op, b.name, b.to)


def _required(state: State | None) -> State:
    if state is None:
        raise ParkError("a park ended where it cannot")
    return state
