"""The park state machine (streaming_job/statements/parking.py): its transitions, the park file kept beside the
checkpoint, which records a park holds back, where a parked table is read again, and the rewrites and catch-ups at work
(their order across a batch in flight, a failure, a job started again), without Spark or a lake."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ingester.records.statement import TableStatement
from streaming_job.lake.files import LakeFiles
from streaming_job.source.progress import Landed
from streaming_job.statements.parking import (
    EARLIEST,
    PARKS_FILE,
    TRANSITIONS,
    Input,
    ParkBook,
    ParkedTable,
    ParkError,
    RecordAt,
    Rewrite,
    State,
    action_json,
    action_of,
    read_parks,
    start_offsets,
    transition,
)
from streaming_job.statements.parking_work import Parking
from streaming_job.statements.statements import Action, StatementAt


def _action(table: str = "t", seq: bytes = b"\x05", batch: int = 3, op: str = "alter", to: str | None = None) -> Action:
    statement = TableStatement(op, "d", table, f"ALTER TABLE {table} MODIFY v VARBINARY(9)", "d", 17, "+00:00",
                               columns=[{"name": "v"}], primary_key=[[0, 0]], to=("d", to) if to else None)
    at = StatementAt(statement, seq, "1:420:0", "0-1-9", 1_700_000_000_000_000, f"p.d.{table}", 0, 41, batch, 99)
    return Action(op, ("d", table), at, 0, ("d", to) if to else None, frozenset({"to"}) if to else frozenset())


def _table(name: str = "t", seq: bytes = b"\x05", batch: int = 3, context: int | None = None) -> ParkedTable:
    return ParkedTable("d", name, f"p.d.{name}", seq, {0: 41}, batch, context)


def _book(tmp_path: Path) -> ParkBook:
    return ParkBook(LakeFiles.on_disk(), str(tmp_path / "checkpoint"))


def test_the_transitions_are_written_down_and_nothing_else_passes() -> None:
    assert transition(None, Input.PARK) == State.REWRITING
    assert transition(State.REWRITING, Input.REWRITTEN) == State.REWRITTEN
    assert transition(State.REWRITTEN, Input.CATCH_UP) == State.CATCHING_UP
    assert transition(State.CATCHING_UP, Input.CAUGHT_UP) is None
    assert transition(State.REWRITTEN, Input.MERGE) == State.REWRITING  # the other park still rewrites
    for state in (None, *State):
        for what in Input:
            if (state, what) not in TRANSITIONS:
                with pytest.raises(ParkError):
                    transition(state, what)
    # a catch-up under way takes no table (joins happen in batches, which never see one)
    assert (State.CATCHING_UP, Input.JOIN) not in TRANSITIONS and (None, Input.CATCH_UP) not in TRANSITIONS


def test_an_action_survives_the_park_file() -> None:
    for action in (_action(), _action("a", to="b", op="rename")):
        back = action_of(action_json(action))
        assert back == action
        assert back.marker == action.marker and back.describe() == action.describe()


def test_where_a_parked_table_is_read_again() -> None:
    records = [RecordAt(0, 10, b"\x03"), RecordAt(0, 12, b"\x05"), RecordAt(0, 14, b"\x07"), RecordAt(1, 30, b"\x06")]
    # its first record at the park's sequence or later, per partition; a partition without one: the batch's end
    assert start_offsets(records, b"\x05", {0: 20, 1: 40, 2: 9}) == {0: 12, 1: 30, 2: 9}
    assert start_offsets([], b"\x05", {0: 20}) == {0: 20}  # nothing of it in the batch is held back
    assert start_offsets([], b"\x05", {}) == {}  # a topic the batch has not seen: read from its start (EARLIEST)


def test_the_book_keeps_every_transition_in_the_file(tmp_path: Path) -> None:
    book = _book(tmp_path)
    park = book.park(Rewrite(_action(), "app~s1.0"), [_table()])
    assert park.state == State.REWRITING and park.id == 1
    again = _book(tmp_path)  # a job started again reads what the last one wrote
    assert [p.to_json() for p in again.parks()] == [park.to_json()]
    # the table is held back from its park's sequence on, not before; not from its own park's catch-up
    assert book.holding(("d", "t"), b"\x05") is not None and book.holding(("d", "t"), b"\x09") is not None
    assert book.holding(("d", "t"), b"\x04") is None and book.holding(("d", "u"), b"\x09") is None
    assert book.holding(("d", "t"), b"\x09", scope=park.id) is None
    book.join(park.id, [_table("t2", b"\x08", batch=4)])
    assert book.holding(("d", "t2"), b"\x08") is not None and book.holding(("d", "t2"), b"\x07") is None
    assert book.rewritten(park.id, park.rewrites[0]).state == State.REWRITTEN
    book.catching_up(park.id, 6, {"p.d.t": {0: 50}})
    found = read_parks(LakeFiles.on_disk(), str(tmp_path / "checkpoint"))  # binlake status reads it so
    assert found[0].state == State.CATCHING_UP and found[0].batch == 6 and found[0].to == {"p.d.t": {0: 50}}
    assert [t.name for t in found[0].tables] == [("d", "t"), ("d", "t2")]
    book.caught_up(park.id)
    assert book.parks() == [] and _book(tmp_path).parks() == []
    assert book.park(Rewrite(_action(), "x"), [_table()]).id == 2  # ids never come back


def test_two_parks_tied_by_a_statement_become_one(tmp_path: Path) -> None:
    book = _book(tmp_path)
    a = book.park(Rewrite(_action("t"), "app~s1.0"), [_table("t")])
    b = book.park(Rewrite(_action("u", b"\x06"), "app~s2.0"), [_table("u", b"\x06")])
    book.rewritten(a.id, a.rewrites[0])
    book.merge(a.id, b.id)
    merged = book.get(a.id)
    assert merged is not None and book.get(b.id) is None
    assert merged.state == State.REWRITING  # u's rewrite has not committed
    assert {t.name for t in merged.tables} == {("d", "t"), ("d", "u")}
    assert book.rewritten(a.id, b.rewrites[0]).state == State.REWRITTEN
    book.catching_up(a.id, 5, {})
    with pytest.raises(ParkError):
        book.join(a.id, [_table("v")])  # a bug: a catch-up under way takes nothing


def test_a_park_settles_once_its_batches_committed_and_its_maker_caught_up() -> None:
    from streaming_job.statements.parking import Park

    park = Park(3, State.REWRITTEN, 0.0, [], [_table(batch=4), _table("u", batch=6, context=2)])
    assert not park.settled(5, [2, 3])  # u was parked by batch 6, not committed
    assert not park.settled(6, [2, 3])  # ... and by park 2's catch-up, still under way
    assert park.settled(6, [3])


def test_an_unreadable_park_file_says_where(tmp_path: Path) -> None:
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "checkpoint" / PARKS_FILE).write_text("{not json")
    with pytest.raises(ParkError, match=PARKS_FILE):
        _book(tmp_path)


class _Job:
    """The Lander's side of Parking: rewrites that wait for a go, catch-ups recorded, the checkpoint's commits."""

    def __init__(self, book: ParkBook) -> None:
        self.book = book
        self.go = threading.Event()
        self.rewritten: list[str] = []
        self.caught: list[tuple[int, int]] = []
        self.committed: int | None = 4
        self.fail: BaseException | None = None

    def rewrite(self, rewrite: Rewrite) -> None:
        assert self.go.wait(10)
        if self.fail is not None:
            raise self.fail
        self.rewritten.append(rewrite.identity)

    def catch_up(self, park, landed) -> None:
        if park.state == State.REWRITTEN:
            park = self.book.catching_up(park.id, landed.batch, {})
        self.caught.append((park.id, park.batch))

    def landed(self) -> Landed | None:
        return None if self.committed is None else Landed(self.committed, 0, {})


def _parking(book: ParkBook, job: _Job) -> Parking:
    return Parking(book, job.rewrite, job.catch_up, job.landed, poll=0.02)


def _until(condition, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_park_catches_up_between_batches_once_rewritten_and_committed(tmp_path: Path) -> None:
    book = _book(tmp_path)
    job = _Job(book)
    job.committed = 3
    parking = _parking(book, job)
    parking.start()
    try:
        with parking.landing(4):  # batch 4 parks t
            park = book.park(Rewrite(_action(batch=4), "app~s1.0"), [_table(batch=4)])
            parking.submit(park)
        job.go.set()
        _until(lambda: job.rewritten == ["app~s1.0"])
        _until(lambda: book.get(park.id).state == State.REWRITTEN)
        time.sleep(0.1)
        assert job.caught == []  # batch 4 made the park and is not committed yet
        with parking.landing(5):  # batch 5 lands: no catch-up meanwhile
            job.committed = 4
            time.sleep(0.1)
            assert job.caught == []
        time.sleep(0.1)
        assert job.caught == []  # batch 5 (landed by this process) is not committed yet: it held t's records back
        job.committed = 5
        _until(lambda: job.caught == [(park.id, 5)])
        assert book.parks() == []
        parking.settle(timeout=1)
    finally:
        parking.close()


def test_a_park_made_by_a_batch_not_committed_waits_for_it(tmp_path: Path) -> None:
    book = _book(tmp_path)
    job = _Job(book)
    job.committed = 2
    park = book.park(Rewrite(_action(batch=3), "app~s1.0"), [_table(batch=3)])
    job.go.set()
    parking = _parking(book, job)
    parking.start()  # a job started again: the rewrite runs again
    try:
        _until(lambda: job.rewritten == ["app~s1.0"])
        time.sleep(0.1)
        assert job.caught == []  # batch 3 (to be replayed) parked the table: its records go past batch 2's end
        job.committed = 3
        _until(lambda: job.caught == [(park.id, 3)])
    finally:
        parking.close()


def test_an_interrupted_catch_up_is_finished_before_any_batch(tmp_path: Path) -> None:
    book = _book(tmp_path)
    park = book.park(Rewrite(_action(), "app~s1.0", done=True), [_table()])
    book.rewritten(park.id, park.rewrites[0])
    book.catching_up(park.id, 7, {"p.d.t": {0: 90}})
    job = _Job(book)
    parking = _parking(book, job)
    parking.start()  # synchronously: the range and batch it recorded
    try:
        assert job.caught == [(park.id, 7)] and book.parks() == [] and job.rewritten == []
    finally:
        parking.close()


def test_a_failed_rewrite_stops_the_next_batch_and_stays_parked(tmp_path: Path) -> None:
    book = _book(tmp_path)
    job = _Job(book)
    job.fail = RuntimeError("disk full")
    parking = _parking(book, job)
    parking.start()
    try:
        park = book.park(Rewrite(_action(), "app~s1.0"), [_table()])
        parking.submit(park)
        job.go.set()
        _until(lambda: parking.failure is not None)
        with pytest.raises(RuntimeError, match="disk full"):
            with parking.landing(5):
                pass
        with pytest.raises(RuntimeError, match="disk full"):
            parking.settle(timeout=1)
        assert book.get(park.id).state == State.REWRITING  # the next run does the rewrite again
    finally:
        parking.close()


def test_earliest_is_kafkas_json_offset_for_the_first() -> None:
    assert EARLIEST == -2
