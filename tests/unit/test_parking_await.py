"""A rename a bounded micro-batch split (docs/LAND.md, "Table statements"): its park awaits the other entry, runs
the rename once it came, and catches up only once the batch that brought it has committed (parking.py)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

from ingester.records.statement import TableStatement
from streaming_job.lake.files import LakeFiles
from streaming_job.source.progress import Landed
from streaming_job.statements.parking import Input, Park, ParkBook, ParkedTable, Rewrite, State, transition
from streaming_job.statements.parking_work import Parking
from streaming_job.statements.statements import Action, StatementAt

SEQ = b"\x05"


def _rename(side: str, batch: int, columns: bool) -> Action:
    """k -> k2's pair, seen by its entry in k's topic ("to") or in k2's ("from", with the columns)."""
    statement = TableStatement("rename", "d", "k" if side == "to" else "k2", "RENAME TABLE k TO k2", "d", 17,
                               "+00:00", columns=[{"name": "v"}] if columns else None,
                               to=("d", "k2") if side == "to" else None, source=("d", "k") if side == "from" else None)
    topic = "p.d.k" if side == "to" else "p.d.k2"
    at = StatementAt(statement, SEQ, "1:420:0", "0-1-9", 1_700_000_000_000_000, topic, 0, 41, batch, 99)
    return Action("rename", ("d", "k"), at, 0, ("d", "k2"), frozenset({side}))


def _tables(batch: int) -> list[ParkedTable]:
    return [ParkedTable("d", t, f"p.d.{t}", SEQ, {0: 7}, batch) for t in ("k", "k2")]


def test_an_awaiting_rename_runs_once_its_other_entry_came(tmp_path: Path) -> None:
    checkpoint = str(tmp_path / "checkpoint")
    book = ParkBook(LakeFiles.on_disk(), checkpoint)
    park = book.park(Rewrite(_rename("from", 3, True), "app~s1.0", awaiting=["p.d.k"]), _tables(3))
    assert transition(State.REWRITING, Input.ARRIVED) == State.REWRITING
    assert "waits for its entry in p.d.k" in park.describe()
    again = ParkBook(LakeFiles.on_disk(), checkpoint)  # a job started again reads what it awaits
    assert [p.to_json() for p in again.parks()] == [park.to_json()] and not again.parks()[0].rewrites[0].runs
    # the same entry again (a replayed batch), or another statement's: nothing more came
    assert book.arrived(park.id, _rename("from", 3, True), {"p.d.k2"}, 3) is None
    other = replace(_rename("to", 5, False), at=replace(_rename("to", 5, False).at, seq=b"\x06"))
    assert book.arrived(park.id, other, {"p.d.k"}, 5) is None
    ready = book.arrived(park.id, _rename("to", 5, False), {"p.d.k"}, 5)
    assert ready is not None and ready.runs and ready.arrived == 5
    assert ready.action.pair_seen == {"to", "from"} and ready.action.statement.columns is not None
    assert ready.action.at.batch_id == 3  # its writes keep its batch's
    found = ParkBook(LakeFiles.on_disk(), checkpoint).parks()[0]
    assert found.rewrites[0].runs and found.rewrites[0].arrived == 5 and found.state == State.REWRITING
    assert book.arrived(park.id, _rename("to", 5, False), {"p.d.k"}, 5) is None  # (its replay)
    # settled once the batch that brought the entry has committed, not only the one that parked it
    done = Park(1, State.REWRITTEN, 0.0, [replace(ready, done=True)], _tables(3))
    assert not done.settled(4, [1]) and done.settled(5, [1])


def test_the_parking_runs_an_awaiting_rewrite_only_once_its_entries_came(tmp_path: Path) -> None:
    book = ParkBook(LakeFiles.on_disk(), str(tmp_path / "checkpoint"))
    ran: list[str] = []
    caught: list[int] = []
    committed = [4]
    go = threading.Event()

    def rewrite(r: Rewrite) -> None:
        go.wait(10)
        ran.append(r.identity)

    def catch_up(p: Park, landed: Landed) -> None:
        caught.append(book.catching_up(p.id, landed.batch, {}).id)

    parking = Parking(book, rewrite, catch_up, lambda: Landed(committed[0], 0, {}), poll=0.02)
    park = book.park(Rewrite(_rename("from", 3, True), "app~s1.0", awaiting=["p.d.k"]), _tables(3))
    parking.start()  # a job started again: an awaiting rewrite does not run
    try:
        parking.submit(park)
        go.set()
        time.sleep(0.2)
        assert ran == [] and caught == []
        with parking.landing(5):  # batch 5 brings k's entry
            ready = book.arrived(park.id, _rename("to", 5, False), {"p.d.k"}, 5)
            assert ready is not None
            parking.run(park.id, ready)
        deadline = time.monotonic() + 10
        while book.get(park.id).state != State.REWRITTEN:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert ran == ["app~s1.0"]
        time.sleep(0.2)
        assert caught == []  # batch 5 is not committed yet
        committed[0] = 5
        while not caught:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        parking.close()


def test_a_table_tied_again_from_an_earlier_statement_is_held_back_from_it(tmp_path: Path) -> None:
    """A swap split by the bound: b joins the park from the swap's last pair (read in tmp's topic) before its own topic
    reaches the pair before it; tied again from that one, it is held back from there, read again from the earlier
    offsets (a partition only one of them names: from its first)."""
    book = ParkBook(LakeFiles.on_disk(), str(tmp_path / "checkpoint"))
    park = book.park(Rewrite(_rename("from", 3, True), "app~s1.0", awaiting=["p.d.k"]), _tables(3))
    book.join(park.id, [ParkedTable("d", "b", "p.d.b", b"\x07", {0: 12, 1: 30}, 3)])
    assert book.holding(("d", "b"), b"\x06") is None and book.containing(("d", "b")) is not None
    assert book.containing(("d", "b"), scope=park.id) is None
    book.join(park.id, [ParkedTable("d", "b", "p.d.b", b"\x06", {0: 15}, 4)])
    b = book.get(park.id).table(("d", "b"))
    assert b is not None and (b.seq, b.start, b.batch) == (b"\x06", {0: 12}, 4)
    assert book.holding(("d", "b"), b"\x06") is not None
    book.join(park.id, [ParkedTable("d", "b", "p.d.b", b"\x08", {0: 20}, 5)])  # a later one: no change
    assert book.get(park.id).table(("d", "b")).seq == b"\x06"


def test_the_last_batch_leaves_a_park_awaiting_an_entry_to_the_next_run(tmp_path: Path) -> None:
    book = ParkBook(LakeFiles.on_disk(), str(tmp_path / "checkpoint"))
    parking = Parking(book, lambda r: None, lambda p, landed: None, lambda: Landed(3, 0, {}), poll=0.02)
    book.park(Rewrite(_rename("from", 3, True), "app~s1.0", awaiting=["p.d.k"]), _tables(3))
    parking.settle(timeout=1)  # returns: no batch of this query brings the entry
    assert len(book.parks()) == 1
