"""Schema changes with --format iceberg: an added column (its default given to the mirror's older rows) and
Iceberg's promotions (int to long, float to double) evolve the change log and the mirror (pyiceberg's
union_by_name); renamed columns are renamed in place (older rows keep their values under the new name); a
widening Iceberg (format version 2) has no promotion for, DATE to DATETIME, stops the query with one line
naming the table."""

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


def test_added_renamed_and_promoted_columns_evolve_iceberg_tables_and_others_stop(make_mariadb, kafka, spark, tmp_path,
                                                                            capsys) -> None:
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
    assert len(pyiceberg_table(lake, db, "t__changes")) == 4
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
    assert read.column_names == ["id", "m", "f", "d", "_binlake_seq", "_binlake_commit_ts", "c2"]
    rows = {(r["id"],): r for r in read.select(["id", "m", "f", "d", "c2"]).to_pylist()}
    assert rows == plain_rows(conn, "t", "id") and rows[(2,)]["m"] == 7 and rows[(2,)]["c2"] == "dflt"
    after = pyiceberg_table(lake, db, "t__changes").sort_by("seq").column("after").to_pylist()
    assert list(after[0]) == ["id", "m", "f", "d", "c2"] and after[0]["m"] == -5 and after[-1]["m"] == 3

    capsys.readouterr()
    assert land(server, kafka, lake,
                "ALTER TABLE t MODIFY d DATETIME",
                "INSERT INTO t VALUES (4, 1, 0.1, '2024-06-01 12:34:56', 'x')") == 2
    err = capsys.readouterr().err
    assert f"binlake: error: the Iceberg table {db}.t__changes cannot take the batch's columns" in err, err
    assert "database is locked" not in err and "date" in err, err
    df = lake_frame(spark, lake, db, "t", "iceberg")
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types == {"id": "int", "m": "bigint", "f": "double", "d": "date", "_binlake_seq": "binary",
                     "_binlake_commit_ts": "timestamp", "c2": "string"}
    spark_rows = {(r["id"],): {c: r[c] for c in ("id", "m", "f", "d", "c2")} for r in df.collect()}
    assert spark_rows == rows
    changes = lake_frame(spark, lake, db, "t__changes", "iceberg")
    assert changes.schema["after"].dataType.simpleString() == "struct<id:int,m:bigint,f:double,d:date,c2:string>"
    assert changes.count() == 6
