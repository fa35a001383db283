"""streaming_job/land/verify.py's comparison of a verify chunk with the mirror's rows (no Spark: the rows as the
land job has them in the driver). Expected values are written by hand."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from streaming_job.land.verify import Verifier, _key_text, _SourceSide, exact_order

AT = bytes.fromhex("00000001000003e80000000000000005")
BEFORE, AFTER = bytes.fromhex("00000001000003e80000000000000001"), bytes.fromhex("00000001000003e80000000000000009")


def _side(rows: dict[int, str], low: int | None, high: int | None, changed: tuple[int, ...] = ()) -> _SourceSide:
    meta = {"run": "r1", "table": "db.t", "chunk": 3, "at": "1:1000:5", "at_seq": AT.hex()}
    return _SourceSide(meta, ["id", "v"], {(k,): {"id": k, "v": v} for k, v in rows.items()},
                       [(k,) for k in changed], None if low is None else (low,), None if high is None else (high,))


def _lake(rows: dict[int, tuple[str, bytes]]) -> dict[tuple[int], tuple[bytes, dict[str, object]]]:
    return {(k,): (seq, {"id": k, "v": v}) for k, (v, seq) in rows.items()}


def test_equal_rows_in_the_range_match_and_rows_outside_it_are_not_the_chunks() -> None:
    side = _side({11: "a", 12: "b"}, low=10, high=12)
    lake = _lake({9: ("x", BEFORE), 10: ("y", BEFORE), 11: ("a", BEFORE), 12: ("b", BEFORE), 13: ("z", BEFORE)})
    r = Verifier._compare(side, lake, [], ["id", "v"], exact=True)
    assert (r.match, r.source_rows, r.lake_rows, r.missing, r.extra, r.different) == (True, 2, 2, 0, 0, 0)
    assert (r.low, r.high, r.run, r.chunk) == ("[10]", "[12]", "r1", 3)


def test_missing_extra_and_different_rows_are_named() -> None:
    side = _side({1: "a", 2: "b", 3: "c"}, low=None, high=5)
    lake = _lake({1: ("a", BEFORE), 3: ("C", BEFORE), 4: ("d", BEFORE)})
    r = Verifier._compare(side, lake, [], ["id", "v"], exact=True)
    assert (r.match, r.missing, r.extra, r.different) == (False, 1, 1, 1)
    assert r.keys == [{"key": [2], "lake": "missing"}, {"key": [4], "lake": "extra"},
                      {"key": [3], "lake": "different", "columns": ["v"]}]


def test_keys_changed_while_read_or_after_the_high_watermark_are_left_out() -> None:
    # 1: changed between the watermarks (not in the chunk's rows; the mirror has the change)
    # 2: deleted later in the same micro-batch (the mirror no longer has it)
    # 3: updated later in the batch (the mirror's row is from after the watermark)
    # 4: inserted later in the batch
    side = _side({2: "b", 3: "c", 5: "e"}, low=None, high=None, changed=(1,))
    lake = _lake({1: ("new", BEFORE), 3: ("C", AFTER), 4: ("d", AFTER), 5: ("e", BEFORE)})
    changes = [(AFTER, (2,)), (AFTER, (3,)), (AFTER, (4,)), (BEFORE, (5,))]  # 5: changed before H: compared
    r = Verifier._compare(side, lake, changes, ["id", "v"], exact=True)
    assert r.match and r.excluded == 4, r
    lake[(5,)] = (BEFORE, {"id": 5, "v": "E"})
    assert Verifier._compare(side, lake, changes, ["id", "v"], exact=True).different == 1


def test_keys_of_an_inexact_order_are_looked_up_and_extra_rows_not_judged() -> None:
    side = _side({1: "a", 2: "b"}, low=None, high=2)
    lake = _lake({1: ("a", BEFORE), 2: ("B", BEFORE), 0: ("lake only", BEFORE)})
    r = Verifier._compare(side, lake, [], ["id", "v"], exact=False)
    assert (r.different, r.extra, r.lake_rows, r.exact) == (1, 0, 2, False)


def test_a_column_the_source_chunk_lacks_is_not_compared() -> None:
    side = _side({1: "a"}, low=None, high=None)
    lake = {(1,): (BEFORE, {"id": 1, "v": "a", "added": "default"})}
    assert Verifier._compare(side, lake, [], ["id", "v", "added"], exact=True).match


@pytest.mark.parametrize(("lake_type", "exact"), [
    ("int", True), ("bigint", True), ("decimal(20,0)", True), ("date", True), ("timestamp", True),
    ("timestamp_ntz", True), ("binary", True), ("string", False), ("double", False), ("boolean", False)])
def test_exact_orders(lake_type: str, exact: bool) -> None:
    assert exact_order(lake_type) is exact


def test_covers_compares_keys_as_tuples() -> None:
    side = _SourceSide({}, [], {}, [], (1, b"\x00\xff"), (2, b"\x01"))
    assert side.covers((1, b"\x01")) and side.covers((2, b"\x00")) and side.covers((2, b"\x01"))
    assert not side.covers((1, b"\x00\xff")) and not side.covers((2, b"\x01\x00"))


def test_key_text() -> None:
    assert _key_text(None) is None
    assert _key_text((7, b"\x0a\xff", Decimal("1.50"), dt.date(2024, 2, 29))) == '[7,"0aff","1.50","2024-02-29"]'


def test_the_progress_line_names_a_few_tables_then_counts_the_rest() -> None:
    from ingester.cli.verify import _waiting_for

    assert _waiting_for(set()) == "done"
    assert _waiting_for({"d.b", "d.a"}) == "d.a, d.b"
    assert _waiting_for({f"d.t{i:03d}" for i in range(200)}) == "d.t000, d.t001, d.t002 and 197 more tables"
