"""Renamed columns in Iceberg tables (iceberg_renames.py): renamed in place by field id, so rows written before
keep their values under the new name (read back with pyiceberg); a batch's images older than the statement
move the old name's value to the new one."""

from __future__ import annotations

import pyarrow as pa

from streaming_job.batch.defaults import Default
from streaming_job.batch.evolution import SchemaGroup
from streaming_job.iceberg.renames import in_place, renamed, renamed_images
from streaming_job.iceberg.tables import Reshape, WantedTable, change_log_schema, mirror_schema
from tests.harness.iceberg import catalog, local_format


def test_a_rename_keeps_the_lake_column_in_place_with_the_new_names_type() -> None:
    union = [("id", "int"), ("a", "int"), ("x", "string"), ("b", "bigint"), ("c", "bigint")]
    assert renamed(union, [("a", "b"), ("b", "c")]) == [("id", "int"), ("c", "bigint"), ("x", "string")]
    replayed = [("id", "int"), ("b", "bigint"), ("x", "string"), ("a", "int")]  # the lake renamed already
    assert renamed(replayed, [("a", "b")]) == [("id", "int"), ("b", "bigint"), ("x", "string")]
    # the old name back after the statement (a column added again under it): not renamed in place
    rename = Default("b", b"\x05", "bigint", "ALTER TABLE t RENAME COLUMN a TO b", "a")
    groups = [SchemaGroup('{"columns": [["id", "int"], ["a", "int"]]}', b"\x01"),
              SchemaGroup('{"columns": [["id", "int"], ["b", "bigint"], ["a", "int"]]}', b"\x07")]
    assert in_place([rename], groups) == []
    assert in_place([rename], groups[:1]) == [("a", "b")]


def test_older_images_move_their_value_to_the_new_name() -> None:
    union = [("id", "int"), ("a", "int"), ("b", "bigint")]
    image = pa.struct([("id", pa.int32()), ("a", pa.int32()), ("b", pa.int64())])
    batch = pa.RecordBatch.from_pydict({
        "op": ["update", "insert", "update"],
        "before": pa.array([{"id": 1, "a": 5, "b": None}, None, {"id": 3, "a": None, "b": None}], image),
        "after": pa.array([{"id": 1, "a": 6, "b": None}, {"id": 2, "a": None, "b": 7},
                           {"id": 3, "a": None, "b": None}], image)})
    out = renamed_images(batch, [("a", "b")], renamed(union, [("a", "b")]))
    assert out.column("before").to_pylist() == [{"id": 1, "b": 5}, None, {"id": 3, "b": None}]
    assert out.column("after").to_pylist() == [{"id": 1, "b": 6}, {"id": 2, "b": 7}, {"id": 3, "b": None}]
    assert out.column("op").to_pylist() == ["update", "insert", "update"]


def test_the_tables_rename_columns_by_field_id_and_older_rows_keep_their_values(tmp_path) -> None:
    fmt = local_format(tmp_path)
    before = [("id", "int"), ("a", "int")]
    log = fmt.ready(WantedTable("db", "t__changes", change_log_schema(before), before, dict, partition="commit_date"))
    mirror = fmt.ready(WantedTable("db", "t", mirror_schema(before), before, dict))
    mirror.append(pa.table({"id": pa.array([1, 2], pa.int32()), "a": pa.array([10, 20], pa.int32()),
                            "_binlake_seq": [b"\x01", b"\x02"], "_binlake_commit_ts": pa.array(
                                [0, 0], pa.timestamp("us", tz="UTC"))}))
    image = {"id": 1, "a": 10}
    log.append(pa.Table.from_pylist([{"op": "insert", "after": image, "commit_date": None}],
                                    change_log_schema(before)))
    moves = [("a", "b"), ("b", "c")]  # RENAME COLUMN a TO b, then CHANGE b c BIGINT
    union = [*before, ("b", "int"), ("c", "bigint"), ("d", "string")]
    after = renamed(union, moves)
    assert after == [("id", "int"), ("c", "bigint"), ("d", "string")]
    for _ in range(2):  # the second time as a replayed batch: renamed already
        fmt._columns.clear()
        fmt.ready(WantedTable("db", "t__changes", change_log_schema(after), after, dict),
                  Reshape(renames=moves, nested=True))
        fmt.ready(WantedTable("db", "t", mirror_schema(after), after, dict), Reshape(renames=moves))
    reread = catalog(tmp_path)
    rows = reread.load_table(("db", "t")).scan().to_arrow()
    assert rows.schema.names == ["id", "c", "_binlake_seq", "_binlake_commit_ts", "d"]
    assert rows.select(["id", "c", "d"]).to_pylist() == [{"id": 1, "c": 10, "d": None}, {"id": 2, "c": 20, "d": None}]
    changes = reread.load_table(("db", "t__changes")).scan().to_arrow()
    assert changes.column("after").to_pylist() == [{"id": 1, "c": 10, "d": None}]
    assert str(reread.load_table(("db", "t")).schema().find_field("c").field_type) == "long"
