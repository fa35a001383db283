"""A micro-batch's side of parked tables (parking.py, parking_work.py; docs/LAND.md, "Parked tables"): which records
a park holds back, the statements that park a table or tie another to a park, where a parked table is read again, and
the park's work as the Lander does it (the rewrite with its batch's writer identity, the catch-up: the tables' records
read again from Kafka and landed as a batch's). ``ParkedTables`` is a part of sink.Lander (its base class)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from ..batch.batch_rows import BatchRows
from ..format.lake_format import LakeFormat
from ..lake.files import LakeFiles
from ..source.kafka_read import KafkaReader, OffsetRange
from ..source.progress import Landed, read_planned
from ..statements.parking import EARLIEST, Offsets, Park, ParkBook, ParkedTable, RecordAt, Rewrite, State, start_offsets
from ..statements.parking_work import Parking
from ..statements.statements import Action, Name, StatementAt

if TYPE_CHECKING:
    from .sink import BatchStats

log = logging.getLogger("binlake.land")


class ParkRow(NamedTuple):
    """What a park looks at of a record row (parking.py)."""

    db: str | None
    tbl: str | None
    first_seq: bytes


@dataclass
class Scope:
    """Where records land: micro-batch ``batch_id``, or (``park``) a park's catch-up to it; ``ends``: the end offsets
    of the records' range (asked once, when a table is parked)."""

    batch_id: int
    park: Park | None
    ends_of: Callable[[], Offsets]
    _ends: Offsets | None = None

    @property
    def park_id(self) -> int | None:
        return self.park.id if self.park is not None else None

    def ends(self) -> Offsets:
        if self._ends is None:
            self._ends = self.ends_of()
        return self._ends

    def takes(self, r: Any) -> bool:
        """A catch-up's records: its tables', from each one's park sequence on."""
        if self.park is None:
            return True
        table = self.park.table((r.db, r.tbl)) if r.db is not None else None
        return table is not None and bytes(r.first_seq) >= table.seq


class TopicRecords(NamedTuple):
    """A table's topic and where its records of a batch are in it."""

    topic: str
    records: list[RecordAt]


class TableRecords:
    """Per table, its records' topic and places, for where a parked table is read again."""

    def __init__(self) -> None:
        self.tables: dict[Name, TopicRecords] = {}

    @classmethod
    def of(cls, *groups: list[Any]) -> TableRecords:
        where = cls()
        for group in groups:
            for r in group:
                if r.db is not None:
                    found = where.tables.setdefault((r.db, r.tbl), TopicRecords(r.topic, []))
                    found.records.append(RecordAt(int(r.partition), int(r.offset), bytes(r.first_seq)))
        return where

    def get(self, name: Name, topic: str) -> TopicRecords:
        """The table's topic and records (``topic`` and none where the scope has none of it)."""
        return self.tables.get(name, TopicRecords(topic, []))


class ParkedTables:
    """sink.Lander's parked tables: its attributes below are the Lander's."""

    spark: SparkSession
    checkpoint: str
    topic_prefix: str
    park_rows: int
    checkpoint_files: LakeFiles | None
    kafka: KafkaReader
    format: LakeFormat
    parking: Parking | None

    def _decode(self, batch: DataFrame, tasks: int) -> BatchRows:
        raise NotImplementedError

    def _coalesced(self, batch: DataFrame) -> tuple[DataFrame, int]:
        raise NotImplementedError

    def _records(self, rows: BatchRows, scope: Scope) -> BatchStats:
        raise NotImplementedError

    def _landing(self, batch_id: int) -> Any:
        return self.parking.landing(batch_id) if self.parking is not None else nullcontext()

    def _held(self, scope: Scope, r: Any) -> bool:
        """Whether a park holds the record row back (not the scope's own park: it is catching up)."""
        if self.parking is None or r.db is None:
            return False
        return self.parking.book.holding((r.db, r.tbl), bytes(r.first_seq), scope.park_id) is not None

    def _tied(self, action: Action, scope: Scope, where: TableRecords, awaiting: list[str]) -> bool:
        """Whether the action names a parked table: then it waits for that park's catch-up, and so do the other
        tables it names, parked with it from here (two parks it names become one). So does a rename awaiting its
        other entry (``_awaited``) that names a table parked from a later statement (a bounded batch read another
        topic past it): that table is held back from here on. A park's rename whose awaited entries have all come
        runs. ``awaiting``: ``_awaited``'s."""
        if self.parking is None:
            return False
        book = self.parking.book
        seq = action.at.seq
        found = {p.id for n in action.names if (p := book.holding(n, seq, scope.park_id)) is not None}
        if found or awaiting:
            found |= {p.id for n in action.names if (p := book.containing(n, scope.park_id)) is not None}
        if not found:
            return False
        first, *others = sorted(found)
        for other in others:
            book.merge(first, other)
        free = sorted(n for n in action.names if book.holding(n, seq, scope.park_id) is None)
        if free:
            book.join(first, [self._parked_table(n, seq, scope, where) for n in free])
        sides = {self._topic(n, where) for side, n in self._sides(action) if side in action.pair_seen}
        ready = book.arrived(first, action, sides, scope.batch_id) if sides else None
        if ready is not None:
            self.parking.run(first, ready)
        return True

    def _waits(self, action: Action, scope: Scope, where: TableRecords, awaiting: list[str]) -> bool:
        """Whether the action is a rename pair the scope has only one entry of, the other's topic cut before it (a
        bounded batch: --max-batch-bytes, --max-offsets-per-trigger): then its tables are parked from it on, the
        rename awaiting its other entry; the rows of that topic before it land with the batches, and the rename
        runs once it came. ``awaiting``: ``_awaited``'s."""
        if self.parking is None or not awaiting:
            return False
        tables = [self._parked_table(n, action.at.seq, scope, where) for n in sorted(action.names)]
        log.info("batch %d: %s waits for its entry in %s (the batch ends before it there)", scope.batch_id,
                 action.describe(), ", ".join(awaiting))
        self.parking.book.park(Rewrite(action, self.format.identity, awaiting=awaiting), tables)
        return True

    def _awaited(self, action: Action, scope: Scope, where: TableRecords) -> list[str]:
        """The topics of a rename pair's entries the scope lacks though it reads them (a bounded batch cut them
        before the entry), unless the pair is applied already ([]: not a rename, nothing awaited, or no parking)."""
        sides = self._sides(action)
        if self.parking is None or not sides:
            return []
        ends = scope.ends()
        awaiting = sorted({topic for side, n in sides if side not in action.pair_seen
                           and (topic := self._topic(n, where)) in ends})
        if not awaiting or self.format.table_statements.applied_already(action):
            return []
        return awaiting

    @staticmethod
    def _sides(action: Action) -> list[tuple[str, Name]]:
        """A rename pair's entries: "to" in the old name's topic, "from" in the new name's ([]: not a rename)."""
        if action.op != "rename" or action.to is None:
            return []
        return [("to", action.name), ("from", action.to)]

    def _topic(self, name: Name, where: TableRecords) -> str:
        return where.get(name, f"{self.topic_prefix}.{name[0]}.{name[1]}").topic

    def _parks(self, action: Action, scope: Scope, where: TableRecords) -> bool:
        """Whether the action's rewrite is long (more than land.park_rows mirror rows): then its tables are parked
        and the action runs beside the batches, with the writer identity it has here."""
        if self.parking is None or self.park_rows < 0:
            return False
        rows = self.format.table_statements.rewrite_rows(action)
        if rows <= self.park_rows:
            return False
        tables = [self._parked_table(n, action.at.seq, scope, where) for n in sorted(action.names)]
        log.info("batch %d: %s: a rewrite of %d rows", scope.batch_id, action.describe(), rows)
        park = self.parking.book.park(Rewrite(action, self.format.identity), tables)
        self.parking.submit(park)
        return True

    def _parked_table(self, name: Name, seq: bytes, scope: Scope, where: TableRecords) -> ParkedTable:
        db, table = name
        found = where.get(name, f"{self.topic_prefix}.{db}.{table}")
        start = start_offsets(found.records, seq, scope.ends().get(found.topic, {}))
        return ParkedTable(db, table, found.topic, seq, start, scope.batch_id, scope.park_id)

    def _parked_here(self, scope: Scope, statements: list[StatementAt]) -> list[StatementAt]:
        """The statements of parks that this batch (or catch-up) made, where it does not have them itself (a
        statement of the job's own, made from rows that a replay holds back): a replay plans the same parts."""
        if self.parking is None:
            return []
        have = {(s.seq, s.name) for s in statements}
        out = []
        for park in self.parking.book.parks():
            for r in park.rewrites:
                at = r.action.at
                if at.batch_id == scope.batch_id and r.identity.rsplit("~", 1)[0] == self.format.identity \
                        and (at.seq, at.name) not in have:
                    have.add((at.seq, at.name))
                    out.append(at)
        return out

    def _planned(self, batch_id: int) -> Offsets:
        """The batch's end offsets, as Spark planned it (its checkpoint's offsets file)."""
        assert self.checkpoint_files is not None
        found = read_planned(self.checkpoint_files, self.checkpoint, batch_id)
        return found.offsets if found is not None else {}

    def _verify_rows(self, verify: pa.Table, scope: Scope) -> pa.Table:
        """The verify rows the scope compares: not a parked table's (they wait for its catch-up)."""
        if self.parking is None or (scope.park is None and not self.parking.book.parks()):
            return verify
        seen = zip(verify.column("db").to_pylist(), verify.column("tbl").to_pylist(),
                   verify.column("first_seq").to_pylist(), strict=True)
        rows = [ParkRow(db, tbl, seq) for db, tbl, seq in seen]
        keep = [scope.takes(r) and not self._held(scope, r) for r in rows]
        return verify.filter(pa.array(keep, pa.bool_()))

    def _rewrite(self, rewrite: Rewrite) -> None:
        """A parked table's rewrite, on the parking's thread, with the identity its batch gave it."""
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", "binlake-park")  # (its Spark jobs, if any)
        with self.format.identified(rewrite.identity):
            log.info("park: %s", rewrite.action.describe())
            self.format.apply(rewrite.action)

    def _catch_up(self, park: Park, landed: Landed | None) -> None:
        """A park's tables land their records from where each was parked to the end of the committed batch
        ``landed`` (or, resumed, to what the park recorded), in parts of the park's own writer identity."""
        if park.state == State.REWRITTEN:
            assert landed is not None
            park = self.parking_book.catching_up(park.id, landed.batch, {t.topic: dict(landed.offsets.get(t.topic, {}))
                                                                          for t in park.tables})
        assert park.batch is not None
        ranges: dict[str, dict[int, OffsetRange]] = {}
        for t in park.tables:
            for partition, end in park.to.get(t.topic, {}).items():
                start = t.start.get(partition, EARLIEST)
                if start == EARLIEST or start < end:
                    ranges.setdefault(t.topic, {})[partition] = OffsetRange(start, end)
        log.info("park %d: catching up %s to batch %d", park.id,
                 ", ".join(f"`{t.db}`.`{t.table}`" for t in park.tables), park.batch)
        if not ranges:
            return
        rows = self._decode(*self._coalesced(self.kafka.ranges(ranges)))
        try:
            with self.format.part(park.identity_part):
                stats = self._records(rows, Scope(park.batch, park, lambda: park.to))
        finally:
            rows.release()
        log.info("park %d: %d row changes caught up", park.id, stats.rows)

    @property
    def parking_book(self) -> ParkBook:
        assert self.parking is not None
        return self.parking.book

    def start(self) -> None:
        """Before the query's first batch: the parks a stopped job left are taken up again (parking.py)."""
        if self.parking is not None:
            self.parking.start()

    def background_failure(self) -> BaseException | None:
        """A parked table's rewrite or catch-up that failed (the job stops with it)."""
        return self.parking.failure if self.parking is not None else None

    def parked_tables(self) -> int:
        return self.parking.parked() if self.parking is not None else 0

    def settle(self) -> None:
        """After the query's last batch (``--trigger available-now``): every parked table caught up."""
        if self.parking is not None and self.parking.book.parks():
            log.info("waiting for %d parked tables to catch up", self.parking.parked())
            self.parking.settle()
