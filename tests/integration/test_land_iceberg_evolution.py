"""Schema changes with --format iceberg: an added column (its default given to the mirror's older rows) and
Iceberg's promotions (int to long, float to double) evolve the change log and the mirror (pyiceberg's
union_by_name); renamed columns are renamed in place in the change log (older rows keep their values under the new
name); a widening Iceberg (format version 2) has no promotion for, DATE to DATETIME, rewrites the mirror and versions
the change log (schema_alter.py)."""

from __future__ import annotations

import pytest

from tests.harness.daemon import run_daemon
from tests.harness.iceberg import pyiceberg_table
from tests.harness.land import lake_frame, plain_rows, run_land

pytestmark = pytest.mark.integration
_PREFIX = "iceddl"


def land(server, kafka, lake, *statements: str) -> int:
    """The statements run on the server's database ``iceddl``, then the daemon and ``binlake land --format
    iceberg``: its exit status."""
    conn = server.connect(_PREFIX)
    try:
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
    finally:
        conn.close()
    run_daemon(server, kafka, _PREFIX)
    return run_land(kafka, _PREFIX, lake, "--format", "iceberg")


def test_added_renamed_and_promoted_columns_evolve_iceberg_tables_and_others_version_them(make_mariadb, kafka, spark,
                                                                                          tmp_path) -> None:
    server = make_mariadb()
    db = _PREFIX
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    lake = tmp_path / "lake"
    assert land(server, kafka, lake,
                "CREATE TABLE t (id INT PRIMARY KEY, n INT, f FLOAT, d DATE)",
                "INSERT INTO t VALUES (1, -5, 1.5, '2024-02-29'), (2, 7, NULL, NULL)") == 0
    assert land(server, kafka, lake,
                "ALTER TABLE t ADD COLUMN c VARCHAR(10) DEFAULT 'dflt', MODIFY n BIGINT, MODIFY f DOUBLE",
                "INSERT INTO t VALUES (3, 9000000000, 2.5, '1000-01-01', 'new')",
                "UPDATE t SET c = 'old', n = n * 2 WHERE id = 1") == 0
    read = pyiceberg_table(lake, db, "t")
    rows = {(r["id"],): r for r in read.select(["id", "n", "f", "d", "c"]).to_pylist()}
    assert rows == plain_rows(conn, "t", "id") and len(rows) == 3
    assert rows[(2,)]["c"] == "dflt"  # a row written before the ADD COLUMN: its default, as on the server
    assert len(pyiceberg_table(lake, db, "t__changes")) == 5  # 2 inserts, the ALTER's row, an insert, an update
    # Spark reads between the job's runs in this process: the Hadoop catalog has no lock for its session to keep
    # (the SQLite catalog's reader kept one, and the next land's commit failed with `database is locked`)
    early = {(r["id"],): {c: r[c] for c in ("id", "n", "f", "d", "c")}
             for r in lake_frame(spark, lake, db, "t", "iceberg").collect()}
    assert early == rows

    # Renamed columns are renamed in place (Iceberg's field ids): older rows keep their values under the new name
    assert land(server, kafka, lake,
                "ALTER TABLE t RENAME COLUMN n TO m, CHANGE c c2 VARCHAR(20)",
                "INSERT INTO t VALUES (5, 1, 0.5, NULL, 'five')",
                "UPDATE t SET m = 3 WHERE id = 3") == 0
    read = pyiceberg_table(lake, db, "t")
    assert read.column_names == ["id", "m", "f", "d", "c2", "_binlake_seq", "_binlake_commit_ts"]
    rows = {(r["id"],): r for r in read.select(["id", "m", "f", "d", "c2"]).to_pylist()}
    assert rows == plain_rows(conn, "t", "id") and rows[(2,)]["m"] == 7 and rows[(2,)]["c2"] == "dflt"
    after = pyiceberg_table(lake, db, "t__changes").sort_by("seq").column("after").to_pylist()
    assert list(after[0]) == ["id", "m", "f", "d", "c2"] and after[0]["m"] == -5 and after[-1]["m"] == 3

    # DATE to DATETIME, a widening Iceberg (format version 2) has no promotion for: the mirror rewritten with the
    # new type, the change log going on in its next generation (docs/LAND.md, "Schema changes")
    assert land(server, kafka, lake,
                "ALTER TABLE t MODIFY d DATETIME",
                "INSERT INTO t VALUES (4, 1, 0.1, '2024-06-01 12:34:56', 'x')") == 0
    df = lake_frame(spark, lake, db, "t", "iceberg")
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types == {"id": "int", "m": "bigint", "f": "double", "d": "timestamp_ntz", "_binlake_seq": "binary",
                     "_binlake_commit_ts": "timestamp", "c2": "string"}
    spark_rows = {(r["id"],): {c: r[c] for c in ("id", "m", "f", "d", "c2")} for r in df.collect()}
    assert spark_rows == plain_rows(conn, "t", "id")
    first = lake_frame(spark, lake, db, "t__changes", "iceberg")
    assert first.schema["after"].dataType.simpleString() == "struct<id:int,m:bigint,f:double,d:date,c2:string>"
    assert first.count() == 9  # two ALTERs' rows beside the row changes; the third ALTER's ends it
    second = lake_frame(spark, lake, db, "t__changes__v2", "iceberg")
    assert "d:timestamp_ntz" in second.schema["after"].dataType.simpleString()
    assert sorted(r.op for r in second.collect()) == ["alter", "insert"]
