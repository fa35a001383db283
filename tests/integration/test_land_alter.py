"""ALTER TABLE statements applied at their place (streaming_job/statements/schema_alter.py; docs/LAND.md, "Schema
changes"): quiet schema changes (ADD COLUMN with defaults, SET DEFAULT after it, DROP and RENAME COLUMN, no row changed
after them) and changes that are no safe widening (text -> binary, DECIMAL scale, ENUM relabelled, a narrowing, DATETIME
fractional digits), each mirror equal to the server's SELECT (Spark and delta-rs / pyiceberg), the change logs versioned
where a type cannot join them, another table landing in the same batches; land.on_incompatible_change: stop stops with
one line. On NO_LOG metadata the Delta mirrors have deletion vectors when the ALTERs rewrite them.

The daemon publishes the table statement entries (with its schema history: the columns before and after each)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from streaming_job.lake.delta_log import TableLog
from tests.harness.alters import alter, select_rows
from tests.harness.daemon import run_daemon
from tests.harness.delta_rs import delta_rs_rows, delta_rs_table
from tests.harness.iceberg import pyiceberg_table
from tests.harness.land import lake_frame, run_land

pytestmark = pytest.mark.integration
DB = "alt"

FIRST = [
    "CREATE TABLE u (id INT PRIMARY KEY, v VARCHAR(10))",
    "CREATE TABLE r (id INT PRIMARY KEY, a INT, b VARCHAR(10), c DATE)",
    "CREATE TABLE k (id INT PRIMARY KEY, v VARCHAR(20) CHARACTER SET latin1)",
    "CREATE TABLE n (id INT PRIMARY KEY, d DECIMAL(10,4), e ENUM('x','y','z'), i INT, t DATETIME(6))",
    "CREATE TABLE o (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE w (id INT PRIMARY KEY, v VARCHAR(10), d DECIMAL(6,3))",
    "INSERT INTO w VALUES (1, 'abc', 1.5), (2, NULL, -2.125)",
    "INSERT INTO u VALUES (1, 'a'), (2, 'b'), (3, NULL)",
    "INSERT INTO r VALUES (1, 10, 'x', '2024-01-01'), (2, NULL, 'y', NULL)",
    "INSERT INTO k VALUES (1, 'café €'), (2, 'plain'), (3, NULL)",
    "INSERT INTO n VALUES (1, 123.4567, 'x', 300, '2024-01-31 23:59:59.999999'), (2, -0.00005, 'y', -5, NULL),"
    " (3, 999.99995, 'z', 70000, '2000-01-01 00:00:00.5')",
    "INSERT INTO o VALUES (1, 1)",
]
# (table, statement, rows after it)
ALTERS: list[tuple[str, str, list[str]]] = [
    ("u", "ALTER TABLE u ADD COLUMN g DATETIME(3) DEFAULT '2020-02-02 02:02:02.123', ADD COLUMN nn INT NOT NULL,"
          " ADD COLUMN s VARCHAR(5) NOT NULL DEFAULT 'x', ADD COLUMN z VARCHAR(5) NULL", []),
    ("u", "ALTER TABLE u ALTER COLUMN s SET DEFAULT 'later'", []),
    ("r", "ALTER TABLE r DROP COLUMN b, RENAME COLUMN a TO a2", []),
    ("k", "ALTER TABLE k MODIFY v VARBINARY(40)", ["INSERT INTO k VALUES (4, 0x00ff)"]),
    ("n", "ALTER TABLE n MODIFY d DECIMAL(10,2), MODIFY e ENUM('z','x'), MODIFY i TINYINT, MODIFY t DATETIME",
     ["UPDATE n SET i = 1 WHERE id = 2"]),
    ("w", "ALTER TABLE w MODIFY v VARBINARY(10), MODIFY d DECIMAL(6,1)", ["INSERT INTO w VALUES (3, 0x00ff, 1)"]),
]


def _plain(v: Any) -> Any:
    return bytes(v) if isinstance(v, bytearray) else v


# a row of each table changed before the ALTERs: in a mirror with deletion vectors, each file then has one
VECTORED = ["UPDATE u SET v = 'a2' WHERE id = 1", "UPDATE r SET a = 11 WHERE id = 1",
            "UPDATE k SET v = 'plain2' WHERE id = 2", "UPDATE n SET i = 301 WHERE id = 1",
            "UPDATE w SET d = 1.25 WHERE id = 1"]


def _check(spark: Any, server: Any, lake: Any, lake_format: str, vectors: bool = False) -> None:
    """Every mirror equals the server's SELECT, as the checks' reader and the other reader read it (``vectors``:
    Spark's Delta source and delta-rs's query engine, which read deletion vectors)."""
    for table in ("u", "r", "k", "n", "o", "w"):
        want = select_rows(server, DB, table)
        frame = lake_frame(spark, lake, DB, table, lake_format, spark_reads=vectors)
        columns = [c for c in frame.columns if not c.startswith("_binlake")]
        assert columns == list(next(iter(want.values()))), (table, columns)
        rows = frame.collect()
        got = {r["id"]: {c: _plain(r[c]) for c in columns} for r in rows}
        assert got == want and len(rows) == len(want), table  # (no row twice: e.g. one a vector deletes)
        other = (pyiceberg_table(lake, DB, table) if lake_format == "iceberg" else
                 delta_rs_rows(lake / DB / table) if vectors else delta_rs_table(lake / DB / table)).select(columns)
        other = other.to_pylist()
        assert {r["id"]: r for r in other} == want and len(other) == len(want), \
            f"{table} ({'delta-rs' if lake_format == 'delta' else 'pyiceberg'})"


@pytest.mark.parametrize(("lake_format", "metadata"), [("delta", "FULL"), ("iceberg", "MINIMAL"), ("delta", "NO_LOG")])
def test_alters_take_effect_at_their_place(make_mariadb, kafka, spark, tmp_path, capsys, lake_format,
                                           metadata, monkeypatch) -> None:
    """On a server of each binlog_row_metadata (MINIMAL and NO_LOG: the daemon's schema history names the columns).
    On NO_LOG, the Delta mirrors have deletion vectors (every file gets one, whatever its size and share of deleted
    rows: these tables have three rows) when the ALTERs rewrite them: the rewrites leave the deleted rows out."""
    from streaming_job.delta import mirror_driver

    mariadb = make_mariadb(binlog_row_metadata=metadata)
    mariadb.execute(f"CREATE DATABASE {DB} CHARACTER SET utf8mb4")
    prefix = f"alt{lake_format}{metadata.replace('_', '').lower()}"
    lake = tmp_path / "lake"
    extra = ["--format", lake_format] if lake_format == "iceberg" else []
    vectors = metadata == "NO_LOG"
    if vectors:
        extra = ["--deletion-vectors", "always", "--small-file-bytes", "1"]
        monkeypatch.setattr(mirror_driver, "_REWRITE_SHARE", 0.9)  # (the land job runs in this process)
    conn = mariadb.connect(DB)
    with conn.cursor() as cur:
        for statement in FIRST:
            cur.execute(statement)
    run_daemon(mariadb, kafka, prefix, "--snapshot", "initial")
    assert run_land(kafka, prefix, lake, *extra) == 0
    if vectors:
        with conn.cursor() as cur:
            for statement in VECTORED:
                cur.execute(statement)
        run_daemon(mariadb, kafka, prefix)
        assert run_land(kafka, prefix, lake, *extra) == 0
        for table in "urknw":
            assert any(add.get("deletionVector") for add in TableLog.read(str(lake / DB / table)).files.values()), table
    for table, sql, after in ALTERS:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO o VALUES (%s, 0)", (100 + len(sql),))  # the other table lands meanwhile
        alter(mariadb, kafka, prefix, DB, table, sql, after)
    run_daemon(mariadb, kafka, prefix)
    capsys.readouterr()
    assert run_land(kafka, prefix, lake, *extra) == 0
    err = capsys.readouterr().err
    _check(spark, mariadb, lake, lake_format, vectors)
    # the quiet ADD COLUMN's defaults, and SET DEFAULT left the rows there alone
    u = select_rows(mariadb, DB, "u")
    assert u[1]["s"] == "x" and u[1]["nn"] == 0 and str(u[1]["g"]) == "2020-02-02 02:02:02.123000"
    # the change logs: k's and n's go on in their second generation, the ALTER's row ending the first
    for table, types in (("k", {"v": "binary"}), ("n", {"d": "decimal(10,2)"}), ("w", {"v": "binary"})):
        second = lake_frame(spark, lake, DB, f"{table}__changes__v2", lake_format)
        after = dict((f.name, f.dataType.simpleString()) for f in second.schema["after"].dataType.fields)
        assert all(after[c] == t for c, t in types.items()), after
        ops = sorted(r.op for r in second.collect())
        assert ops == ["alter", "insert" if table in "kw" else "update"], ops
        first = lake_frame(spark, lake, DB, f"{table}__changes", lake_format)
        assert sorted(r.op for r in first.collect()) == ["alter", *["read"] * (2 if table == "w" else 3),
                                                        *["update"] * vectors], table
    assert "k`: column `v` (string -> binary)" in err or "`v` (string -> binary)" in err, err[-3000:]

    if metadata != "FULL":
        return
    # land.on_incompatible_change: stop -> one line naming the table, the column, the types and the statement
    os.environ["BINLAKE_LAND_ON_INCOMPATIBLE_CHANGE"] = "stop"
    try:
        assert run_land(kafka, prefix, tmp_path / "stopped", *extra) != 0
    finally:
        del os.environ["BINLAKE_LAND_ON_INCOMPATIBLE_CHANGE"]
    err = capsys.readouterr().err
    assert "`alt`.`k`: column `v` changed from string to binary" in err and "MODIFY v VARBINARY(40)" in err, err[-3000:]



def test_without_history_the_rows_type_changes_rewrite_the_mirror(make_mariadb, kafka, spark, tmp_path,
                                                                   capsys) -> None:
    """``schema.history: never`` (entries without columns): the lake follows the rows. A type change the rows show
    rewrites the mirror and versions the change log at the first such row (type_changes.py), converting from the lake
    types alone (text of an unknown charset: ASCII converts, other text is re-read, said in one warning); a quiet ADD
    COLUMN shows up with the first row written after it (docs/LAND.md, "Schema changes"). A table whose type change
    its rows show after a RENAME TABLE in the same batch: the new name's mirror is rewritten the same way."""
    mariadb = make_mariadb()
    mariadb.execute(f"CREATE DATABASE {DB} CHARACTER SET utf8mb4")
    prefix, lake = "altnohistory", tmp_path / "lake"
    conn = mariadb.connect(DB)
    with conn.cursor() as cur:
        for statement in FIRST:
            if statement.split()[2] in ("u", "k", "o", "w"):
                cur.execute(statement)
        cur.execute("CREATE TABLE m (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.execute("INSERT INTO m VALUES (1, 'one'), (2, NULL)")
    os.environ["BINLAKE_SCHEMA_HISTORY"] = "never"
    try:
        run_daemon(mariadb, kafka, prefix, "--snapshot", "initial")
        assert run_land(kafka, prefix, lake) == 0
        for table, sql, after in ALTERS:
            if table in ("u", "k", "w"):
                alter(mariadb, kafka, prefix, DB, table, sql, after)
        with conn.cursor() as cur:
            cur.execute("INSERT INTO o VALUES (9, 9)")
            cur.execute("ALTER TABLE m MODIFY v VARBINARY(10)")  # seen first in m2's rows, after the rename
            cur.execute("RENAME TABLE m TO m2")
            cur.execute("INSERT INTO m2 VALUES (3, 'three')")
        run_daemon(mariadb, kafka, prefix)
    finally:
        del os.environ["BINLAKE_SCHEMA_HISTORY"]
    capsys.readouterr()
    assert run_land(kafka, prefix, lake) == 0
    err = capsys.readouterr().err
    for table in ("w", "o", "m2"):
        got = {r["id"]: {c: _plain(r[c]) for c in r.asDict() if not c.startswith("_binlake")}
               for r in lake_frame(spark, lake, DB, table).collect()}
        assert got == select_rows(mariadb, DB, table), table
    k = {r["id"]: _plain(r["v"]) for r in lake_frame(spark, lake, DB, "k").collect()}
    assert k == {1: None, 2: b"plain", 3: None, 4: b"\x00\xff"}  # 'café €' of a charset the lake does not know
    assert "alt.k: the mirror's column `v` (string -> binary) is null in 1 rows" in err, err[-3000:]
    assert "binlake snapshot --tables alt.k" in err
    assert "g" not in lake_frame(spark, lake, DB, "u").columns  # no row of u changed since its ADD COLUMN
    assert "v:binary" in lake_frame(spark, lake, DB, "k__changes__v2").schema["after"].dataType.simpleString()
