"""ALTER TABLE ... ADD COLUMN with defaults between DML: the mirror equals the server's SELECT, also in the rows
the server filled with the default without writing a row event (FULL and MINIMAL row metadata)."""

from __future__ import annotations

from typing import Any

import pytest

from ingester.cli.main import main
from tests.harness.delta_rs import delta_rs_rows
from tests.harness.land import mirror_rows, run_land

pytestmark = pytest.mark.integration

# Literal defaults of several types, NOT NULL and NULL, implicit defaults, CURRENT_TIMESTAMP of a TIMESTAMP.
ADD_MANY = ("ALTER TABLE t ADD COLUMN a INT DEFAULT 42, ADD COLUMN s VARCHAR(20) NOT NULL DEFAULT 'it''s',"
            " ADD COLUMN m DECIMAL(8,3) DEFAULT -1.5e0 AFTER id, ADD COLUMN d DATE NOT NULL DEFAULT '2024-02-29',"
            " ADD COLUMN nn INT NOT NULL, ADD COLUMN z VARCHAR(5) NULL, ADD COLUMN e ENUM('x', 'y') NOT NULL,"
            " ADD COLUMN ts TIMESTAMP(6) NULL DEFAULT CURRENT_TIMESTAMP(6), ADD COLUMN b BINARY(3) DEFAULT 'a',"
            " ADD COLUMN u BIGINT UNSIGNED DEFAULT 18446744073709551615, ADD COLUMN f DOUBLE DEFAULT 0.25")
ADD_MORE = "ALTER TABLE t ADD COLUMN k SMALLINT NOT NULL DEFAULT -7 FIRST, ADD COLUMN w DATETIME DEFAULT NOW()"


def _select(conn: Any) -> dict[tuple[int], dict[str, Any]]:
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute("SELECT * FROM t")
        names = [d[0] for d in cur.description]
        return {(r[names.index("id")],): dict(zip(names, r, strict=True)) for r in cur.fetchall()}


def _check(spark, lake, conn, err: str) -> None:
    rows, _ = mirror_rows(spark, lake, "dflt", "t")
    expected = _select(conn)
    # DATETIME DEFAULT NOW() is local time of the session's time zone, which the binlog names "SYSTEM":
    # the land job says so, leaves it null in rows older than the ALTER (a re-snapshot reads them again).
    assert "the mirror's column `w` stays null in rows written before it was added" in err, err
    assert set(rows) == set(expected)
    diff = {(k, c): (rows[k][c], v) for k, row in expected.items() for c, v in row.items()
            if c != "w" and rows[k][c] != v}
    assert not diff, diff  # (key, column): (mirror, server)
    # Dropped and renamed-away columns are gone from the mirror as from the server: the ALTERs' table statement
    # entries apply at their place (docs/LAND.md, "Schema changes")
    assert set(next(iter(rows.values()))) == set(next(iter(expected.values())))
    assert rows[(22,)]["w"] == expected[(22,)]["w"] is not None  # the row written after the ALTER


def _phase_two(conn) -> None:
    with conn.cursor() as cur:
        cur.execute("UPDATE t SET v = 'before' WHERE id = 3")  # an image older than the ALTER, in the same batch
        cur.execute(ADD_MANY)
        cur.execute("UPDATE t SET v = 'after' WHERE id = 2")
        cur.execute("INSERT INTO t (id, v, a, s, z, e, nn) VALUES (20, 'new', NULL, 'x', 'zz', 'y', 3)")
        cur.execute("INSERT INTO t (id, nn) VALUES (21, -1)")
        cur.execute("UPDATE t SET v = 'between' WHERE id = 4")
        cur.execute(ADD_MORE)
        cur.execute("INSERT INTO t (id, k, nn) VALUES (22, 1, 0)")
        cur.execute("DELETE FROM t WHERE id = 5")
        # renamed columns: the mirror's new column has the old one's values in rows not changed since
        cur.execute("ALTER TABLE t RENAME COLUMN v TO v2, CHANGE a a2 BIGINT DEFAULT 42, DROP COLUMN z")
        cur.execute("UPDATE t SET v2 = 'renamed' WHERE id = 6")
        cur.execute("INSERT INTO t (id, v2, a2, nn) VALUES (23, 'x', 9000000000, 1)")


@pytest.mark.parametrize("lake_shape", ["local", "cluster-s3"], indirect=True)
def test_added_columns_get_their_defaults_in_the_mirror_full_metadata(make_mariadb, kafka, spark, tmp_path,
                                                                      capsys, lake_shape) -> None:
    """Existing mirror rows get the defaults when the columns are added (a later micro-batch); images of the
    batch older than the ALTER too. Locally and on a cluster landing into a bucket."""
    mariadb = make_mariadb()
    mariadb.execute("CREATE DATABASE dflt CHARACTER SET utf8mb4")
    conn = mariadb.connect("dflt")
    lake, prefix = lake_shape.lake(tmp_path), f"dfltfull{lake_shape.name.replace('-', '')}"
    run = ["run", "--source", mariadb.url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix,
           "--server-id", "4811", "--exit-at-end", "--snapshot", "initial"]
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.execute("INSERT INTO t VALUES " + ", ".join(f"({i}, 'v{i}')" for i in range(1, 10)))
    assert main(run) == 0
    assert lake_shape.land(kafka, prefix, lake) == 0  # the mirror exists before the ALTERs
    _phase_two(conn)
    assert main(run) == 0
    capsys.readouterr()
    assert lake_shape.land(kafka, prefix, lake) == 0
    _check(spark, lake, conn, capsys.readouterr().err)
    changes = delta_rs_rows(lake / "dflt" / "t__changes").column("after").to_pylist()
    # the change log keeps the images as written: the UPDATE before the ALTER had no column a
    assert [after["a"] for after in changes if after and after["v"] == "before"] == [None]


def test_added_columns_get_their_defaults_in_the_mirror_minimal_metadata(make_mariadb, kafka, spark,
                                                                         tmp_path, capsys) -> None:
    """With schema history, and a mirror created by the batch that holds the ALTERs."""
    server = make_mariadb(binlog_row_metadata="MINIMAL")
    server.execute("CREATE DATABASE dflt CHARACTER SET utf8mb4")
    conn = server.connect("dflt")
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.execute("INSERT INTO t VALUES " + ", ".join(f"({i}, 'v{i}')" for i in range(1, 10)))
    run = ["run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", "dfltmin",
           "--server-id", "4812", "--exit-at-end", "--snapshot", "initial"]
    assert main(run) == 0
    _phase_two(conn)
    assert main(run) == 0
    capsys.readouterr()
    assert run_land(kafka, "dfltmin", tmp_path / "lake") == 0
    _check(spark, tmp_path / "lake", conn, capsys.readouterr().err)


def test_defaults_pending_at_a_crash_are_given_at_the_next_start(spark, tmp_path) -> None:
    """A crash between adding a mirror's columns and giving their defaults: the mirror's pending mark makes the
    next start finish it, and only rows older than the ALTER change."""
    from streaming_job.batch import defaults as D
    from streaming_job.delta.defaults import give_existing_rows, mark_pending
    from streaming_job.delta.defaults import pending as pending_of

    path = str(tmp_path / "mirror")
    spark.createDataFrame([(1, b"\x00" * 16), (2, b"\xff" * 16)], "id int, _binlake_seq binary").write.format(
        "delta").save(path)
    pending = [D.Default("a", b"\x10" * 16, "CAST(42 AS int)", "ALTER TABLE t ADD COLUMN a INT DEFAULT 42")]
    mark_pending(spark, path, pending)
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (a int)")  # ... and the process dies here
    assert pending_of(spark, path) == pending
    give_existing_rows(spark, path, pending_of(spark, path))
    assert {r.id: r.a for r in spark.read.format("delta").load(path).collect()} == {1: 42, 2: None}
    assert pending_of(spark, path) == []
