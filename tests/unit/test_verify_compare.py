"""streaming_job/land/verify.py's comparison of a verify chunk with the mirror's rows (no Spark: the rows as the
land job has them in the driver). Expected values are written by hand."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from streaming_job.batch.mirror import SEQ
from streaming_job.land.verify import Verifier, _key_text, _LakeSide, _SourceSide, exact_order

AT = bytes.fromhex("00000001000003e80000000000000005")
BEFORE, AFTER = bytes.fromhex("00000001000003e80000000000000001"), bytes.fromhex("00000001000003e80000000000000009")


META = {"run": "r1", "table": "db.t", "chunk": 3, "at": "1:1000:5", "at_seq": AT.hex()}
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _side(rows: dict[int, str], low: int | None, high: int | None, changed: tuple[int, ...] = ()) -> _SourceSide:
    table = pa.Table.from_pylist([{"id": k, "v": v} for k, v in rows.items()], schema=SCHEMA)
    return _SourceSide(META, ["id", "v"], table, [(k,) for k in rows], [(k,) for k in changed],
                       None if low is None else (low,), None if high is None else (high,))


def _lake(rows: dict[int, tuple[str | None, bytes]], exact: bool = True, **extra: pa.DataType) -> _LakeSide:
    schema = pa.schema([*SCHEMA, *(pa.field(n, t) for n, t in extra.items()), pa.field(SEQ, pa.binary())])
    table = pa.Table.from_pylist([{"id": k, "v": v, SEQ: seq, **{n: "default" for n in extra}}
                                  for k, (v, seq) in rows.items()], schema=schema)
    return _LakeSide.of(table, ["id"], exact)


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
    lake = _lake({1: ("new", BEFORE), 3: ("C", AFTER), 4: ("d", AFTER), 5: ("E", BEFORE)})
    assert Verifier._compare(side, lake, changes, ["id", "v"], exact=True).different == 1


def test_keys_of_an_inexact_order_are_looked_up_and_extra_rows_not_judged() -> None:
    side = _side({1: "a", 2: "b"}, low=None, high=2)
    lake = _lake({1: ("a", BEFORE), 2: ("B", BEFORE), 0: ("lake only", BEFORE)}, exact=False)
    r = Verifier._compare(side, lake, [], ["id", "v"], exact=False)
    assert (r.different, r.extra, r.lake_rows, r.exact) == (1, 0, 2, False)


def test_a_column_the_source_chunk_lacks_is_not_compared() -> None:
    side = _side({1: "a"}, low=None, high=None)
    lake = _lake({1: ("a", BEFORE)}, added=pa.string())
    assert Verifier._compare(side, lake, [], ["id", "v", "added"], exact=True).match


def test_nulls_equal_nulls_only_and_every_differing_row_is_counted() -> None:
    side = _side({i: (None if i % 3 == 0 else f"v{i}") for i in range(1, 61)}, low=None, high=None)
    lake = _lake({i: (None if i % 3 == 0 else f"v{i}", BEFORE) for i in range(1, 61)})
    assert Verifier._compare(side, lake, [], ["id", "v"], exact=True).match
    lake = _lake({i: (f"v{i}" if i % 2 else None, BEFORE) for i in range(1, 61)})
    r = Verifier._compare(side, lake, [], ["id", "v"], exact=True)
    # differ: odd multiples of 3 (null at the source only) and even non-multiples of 3 (null in the lake only)
    differ = [i for i in range(1, 61) if (i % 3 == 0) != (i % 2 == 0)]
    assert r.different == len(differ) == 30
    assert [k["key"] for k in r.keys] == [[i] for i in differ[:20]] and r.keys[0]["columns"] == ["v"]


def test_columns_arrow_cannot_compare_are_compared_as_python_values() -> None:
    listed = pa.schema([("id", pa.int64()), ("tags", pa.list_(pa.string()))])
    source = pa.Table.from_pylist([{"id": 1, "tags": ["a", "b"]}, {"id": 2, "tags": ["c"]}], schema=listed)
    side = _SourceSide(META, ["id", "tags"], source, [(1,), (2,)], [], None, None)
    lake = _LakeSide.of(pa.Table.from_pylist(
        [{"id": 1, "tags": ["a", "b"], SEQ: BEFORE}, {"id": 2, "tags": ["c", "d"], SEQ: BEFORE}],
        schema=listed.append(pa.field(SEQ, pa.binary()))), ["id"], True)
    r = Verifier._compare(side, lake, [], ["id", "tags"], exact=True)
    assert (r.different, r.keys) == (1, [{"key": [2], "lake": "different", "columns": ["tags"]}])


@pytest.mark.parametrize(("lake_type", "exact"), [
    ("int", True), ("bigint", True), ("decimal(20,0)", True), ("date", True), ("timestamp", True),
    ("timestamp_ntz", True), ("binary", True), ("string", False), ("double", False), ("boolean", False)])
def test_exact_orders(lake_type: str, exact: bool) -> None:
    assert exact_order(lake_type) is exact


def test_a_chunk_of_a_compound_key_takes_the_lake_keys_low_exclusive_high_inclusive_as_tuples() -> None:
    inside = [(1, b"\x01"), (2, b"\x00"), (2, b"\x01")]
    schema = pa.schema([("a", pa.int32()), ("b", pa.binary())])

    def lake_of(keys: list[tuple[int, bytes]]) -> _LakeSide:
        rows = pa.Table.from_pylist([{"a": a, "b": b, SEQ: BEFORE} for a, b in keys],
                                    schema=schema.append(pa.field(SEQ, pa.binary())))
        return _LakeSide.of(rows, ["a", "b"], True)

    source = pa.Table.from_pylist([{"a": a, "b": b} for a, b in inside], schema=schema)
    side = _SourceSide(META, ["a", "b"], source, inside, [], (1, b"\x00\xff"), (2, b"\x01"))
    lake = [(1, b"\x00\xff"), *inside, (2, b"\x01\x00"), (0, b"")]
    r = Verifier._compare(side, lake_of(lake), [], ["a", "b"], exact=True)
    assert (r.match, r.lake_rows, r.extra) == (True, 3, 0)
    lake = [k for k in lake if k != (2, b"\x00")] + [(1, b"\x02")]
    r = Verifier._compare(side, lake_of(lake), [], ["a", "b"], exact=True)
    assert (r.missing, r.extra, r.keys[1]) == (1, 1, {"key": [1, b"\x02"], "lake": "extra"})


def test_key_text() -> None:
    assert _key_text(None) is None
    assert _key_text((7, b"\x0a\xff", Decimal("1.50"), dt.date(2024, 2, 29))) == '[7,"0aff","1.50","2024-02-29"]'


def test_the_progress_line_names_a_few_tables_then_counts_the_rest() -> None:
    from ingester.cli.verify import _waiting_for

    assert _waiting_for(set()) == "done"
    assert _waiting_for({"d.b", "d.a"}) == "d.a, d.b"
    assert _waiting_for({f"d.t{i:03d}" for i in range(200)}) == "d.t000, d.t001, d.t002 and 197 more tables"


def test_results_written_by_spark_and_by_the_driver_read_back_together(tmp_path) -> None:
    """A lake's _verify table whose older file Spark wrote (INT96 timestamps: naive) and whose newer one the
    land job's driver wrote (UTC microseconds), as an upgraded job leaves it: both read, in check order."""
    import json

    import pyarrow.parquet as pq

    from streaming_job.format.verify_results import read_results, result_schema
    from streaming_job.lake.files import LakeFiles

    table = tmp_path / "_verify"
    (table / "_delta_log").mkdir(parents=True)
    schema = result_schema()
    row = {n: None for n in schema.names} | {"run": "r1", "table": "db.t", "match": True}
    older = pa.Table.from_pylist([row | {"chunk": 1, "checked_ts": dt.datetime(2026, 1, 1, 10)}],
                                 schema=schema.set(schema.get_field_index("checked_ts"),
                                                   pa.field("checked_ts", pa.timestamp("ns"))))
    newer = pa.Table.from_pylist([row | {"chunk": 2, "checked_ts": dt.datetime(2026, 1, 1, 11, tzinfo=dt.UTC)}],
                                 schema=schema)
    pq.write_table(older, table / "a.parquet", use_deprecated_int96_timestamps=True)
    pq.write_table(newer, table / "b.parquet")
    actions = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
               {"metaData": {"id": "x", "format": {"provider": "parquet", "options": {}}, "schemaString": "{}",
                             "partitionColumns": [], "configuration": {}}},
               *({"add": {"path": name, "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}}
                 for name in ("a.parquet", "b.parquet"))]
    (table / "_delta_log" / f"{0:020}.json").write_text("\n".join(json.dumps(a) for a in actions))
    rows = read_results(LakeFiles.on_disk(), str(tmp_path), "r1")
    assert [(r["chunk"], r["checked_ts"]) for r in rows] == [
        (1, dt.datetime(2026, 1, 1, 10, tzinfo=dt.UTC)), (2, dt.datetime(2026, 1, 1, 11, tzinfo=dt.UTC))]


def test_a_chunk_whose_rows_all_changed_meanwhile_compares_nothing() -> None:
    side = _side({1: "a", 2: "b"}, low=None, high=None, changed=(1, 2))
    r = Verifier._compare(side, _lake({1: ("x", BEFORE), 2: ("y", BEFORE)}), [], ["id", "v"], exact=True)
    assert (r.match, r.excluded, r.different) == (True, 2, 0)
    empty = _side({}, low=None, high=None)
    assert Verifier._compare(empty, _lake({}), [], ["id", "v"], exact=True).match
