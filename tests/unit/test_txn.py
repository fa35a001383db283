"""The transaction state machine (ingester/records/txn.py): its table is complete and is the one _router.c
applies, and it follows the transaction shapes servers write (the differential tests in test_native_router.py
show that C and Python move through it alike on real streams)."""

from __future__ import annotations

import importlib

import pytest

from ingester.records import builder
from ingester.records.open_records import OpenRecords
from ingester.records.txn import ENDS, TABLE, TRANSITIONS, Input, Phase, Transaction

NATIVE = importlib.import_module("ingester.records._router")  # built by scripts/bootstrap (CI) or build_ext


def test_c_exports_the_same_phases_inputs_and_end_flag() -> None:
    exported = {name: getattr(NATIVE, name) for name in dir(NATIVE)}
    assert {f"PHASE_{p.name}": p.value for p in Phase} == {n: v for n, v in exported.items() if n.startswith("PHASE_")}
    assert {f"INPUT_{i.name}": i.value for i in Input} == {n: v for n, v in exported.items() if n.startswith("INPUT_")}
    assert NATIVE.ENDS == ENDS


def test_every_phase_has_a_transition_for_every_input_and_the_table_encodes_them() -> None:
    assert set(TRANSITIONS) == {(p, i) for p in Phase for i in Input}
    for (phase, what), (following, ends) in TRANSITIONS.items():
        entry = TABLE[phase * len(Input) + what]
        assert (entry & ~ENDS, bool(entry & ENDS)) == (following, ends)


def _run(txn: Transaction, *steps: Input) -> list[Phase]:
    phases = []
    for what in steps:
        txn.step(what)
        phases.append(txn.phase)
    return phases


def test_mysql_ddl_after_its_gtid_is_a_whole_transaction() -> None:
    txn = Transaction()
    txn.mysql_gtid("3e11fa47-71ca-11e1-9e33-c80aa9429562", 7, b"3e11fa47-71ca-11e1-9e33-c80aa9429562:7", 5)
    assert txn.phase is Phase.IMPLICIT and txn.commit_ts == 5
    txn.step(Input.STATEMENT)
    assert txn.phase is Phase.IDLE and txn.count == 1 and txn.gtid == b""
    assert txn.executed == "3e11fa47-71ca-11e1-9e33-c80aa9429562:7"


def test_a_mariadb_transaction_with_a_body_ends_at_its_xid_not_at_a_statement() -> None:
    txn = Transaction()
    txn.mariadb_gtid(0, 1, 42, standalone=False, timestamp=1700000000)
    assert txn.phase is Phase.EXPLICIT and txn.gtid == b"0-1-42" and txn.commit_ts == 1700000000 * 1_000_000
    assert _run(txn, Input.ROWS, Input.STATEMENT, Input.ROWS) == [Phase.EXPLICIT] * 3  # e.g. a temporary table
    assert txn.count == 0 and txn.executed == ""
    txn.step(Input.END)
    assert txn.phase is Phase.IDLE and txn.count == 1 and txn.executed == "0-1-42"


def test_a_standalone_mariadb_gtid_ends_with_its_one_statement() -> None:
    txn = Transaction()
    txn.resume_after("0-1-41")
    txn.mariadb_gtid(0, 1, 42, standalone=True, timestamp=1)
    assert txn.phase is Phase.IMPLICIT
    txn.step(Input.STATEMENT)
    assert txn.phase is Phase.IDLE and txn.executed == "0-1-42"


def test_rows_without_begin_open_a_transaction_that_its_xid_ends() -> None:
    txn = Transaction()
    assert _run(txn, Input.ROWS, Input.ROWS, Input.END) == [Phase.IMPLICIT, Phase.IMPLICIT, Phase.IDLE]
    assert txn.count == 1 and txn.executed == ""  # no GTID: nothing added


def test_begin_without_a_gtid_takes_its_time_and_a_gtid_keeps_its_own() -> None:
    txn = Transaction()
    txn.begin(10)
    assert txn.phase is Phase.EXPLICIT and txn.commit_ts == 10_000_000
    txn.step(Input.END)
    txn.mysql_gtid("3e11fa47-71ca-11e1-9e33-c80aa9429562", 8, b"3e11fa47-71ca-11e1-9e33-c80aa9429562:8", 77)
    txn.begin(11)
    assert txn.commit_ts == 77 and txn.pending == ("mysql", "3e11fa47-71ca-11e1-9e33-c80aa9429562", 8)
    txn.step(Input.END)
    txn.mysql_gtid(None, 0, b"", 78)  # anonymous (gtid_mode=OFF): no GTID to add; BEGIN's time is taken
    txn.begin(12)
    assert txn.commit_ts == 12_000_000 and txn.pending is None


def test_a_statement_outside_any_transaction_takes_its_time_and_counts() -> None:
    txn = Transaction()
    txn.statement_time(3)
    txn.step(Input.STATEMENT)
    assert txn.commit_ts == 3_000_000 and txn.count == 1 and txn.phase is Phase.IDLE


def test_route_takes_only_the_typed_state() -> None:
    """The router reads and writes a Transaction and OpenRecords, nothing else (no instance dicts)."""
    b = builder.RecordBuilder()
    args = [b"", 0, 1, b.txn, OpenRecords(900_000, 1 << 20), {}, {}, set(), True, True, bytes(256), False]
    assert NATIVE.route(*args) == builder.Routed(0, 1, 0, 0, 0, 0, False, 0, 0)
    for index, wrong in ((3, b.__dict__), (4, b.txn)):
        with pytest.raises(TypeError):
            NATIVE.route(*args[:index], wrong, *args[index + 1:])
