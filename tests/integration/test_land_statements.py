"""Table statements landed (docs/LAND.md, "Table statements"): TRUNCATE with rows before and after it in one
micro-batch, DROP + CREATE with other column types (with the create entry's columns, and without: the first
rows), RENAME TABLE (a pair, gh-ost's swap, a cycle of three, across databases, from a table binlake does not
capture), a partition statement, and rows of another table all along; then updates under the new names in a later
run. Each mirror ends equal to the server's SELECT as Spark and a reader other than Spark (delta-rs, pyiceberg) read
it, and `binlake verify` passes. The statements' entries are the daemon's (docs/FORMAT.md, "Table statements")."""

from __future__ import annotations

import collections
import decimal
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest

from ingester.cli.main import main
from streaming_job.lake.generations import change_log_name
from tests.harness.binlogs import verbose_counts
from tests.harness.daemon import run_daemon
from tests.harness.delta_rs import plain_value
from tests.harness.lake_shapes import LocalShape
from tests.harness.land import killed_at_line, lake_frame, land_command, plain_rows
from tests.harness.verify_run import verify_wait, verifying_daemon

pytestmark = pytest.mark.integration
DB, DB2 = "st", "st2"


def _databases(server) -> None:
    server.execute(f"CREATE DATABASE {DB}")
    server.execute(f"CREATE DATABASE {DB2}")
    server.execute("CREATE DATABASE binlake")  # binlake verify's signal table


def _setup(server) -> Any:
    conn = server.connect(DB)
    with conn.cursor() as cur:
        for sql in ("CREATE TABLE tr (id INT PRIMARY KEY, v INT)",
                    "INSERT INTO tr VALUES (1, 1), (2, 2), (3, 3), (4, 4)",
                    "CREATE TABLE dr (id INT PRIMARY KEY, v VARCHAR(10))",
                    "INSERT INTO dr VALUES (1, 'one'), (2, 'two'), (3, 'three')",
                    "CREATE TABLE dn (id INT PRIMARY KEY, v INT)",
                    "INSERT INTO dn VALUES (1, 10), (2, 20)",
                    "CREATE TABLE k (id INT PRIMARY KEY, v VARCHAR(20))",
                    "INSERT INTO k VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e')",
                    "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
                    "INSERT INTO t VALUES (1, 100), (2, 200), (3, 300), (4, 400), (5, 500), (6, 600)",
                    "CREATE TABLE a (id INT PRIMARY KEY, s VARCHAR(10))",
                    "INSERT INTO a VALUES (1, 'a1'), (2, 'a2')",
                    "CREATE TABLE b (id INT PRIMARY KEY, s VARCHAR(10))",
                    "INSERT INTO b VALUES (1, 'b1'), (2, 'b2'), (3, 'b3')",
                    "CREATE TABLE x (id INT PRIMARY KEY, v INT)",
                    "INSERT INTO x VALUES (1, 1), (2, 2)",
                    "CREATE TABLE hidden (id INT PRIMARY KEY, v INT)",
                    "INSERT INTO hidden VALUES (1, 1), (2, 2), (3, 3)",
                    "CREATE TABLE p (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) "
                    "(PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN MAXVALUE)",
                    "INSERT INTO p VALUES (1, 1), (2, 2), (11, 11), (12, 12)",
                    "CREATE TABLE other (id INT PRIMARY KEY, v INT)"):
            cur.execute(sql)
    conn.commit()
    return conn


def _other(conn, n: int) -> None:
    """Rows of a table no statement names, all along."""
    with conn.cursor() as cur:
        cur.execute("INSERT INTO other VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = v + 1", (n, n))
    conn.commit()


def _sql(conn, *statements: str) -> None:
    with conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)
    conn.commit()


def _statements(conn, full: bool) -> None:
    """Every statement, with rows of its tables before and after it and of ``other`` between them; ``full``: a FULL
    server's (whose rows need no schema history: a table renamed from one it does not capture can have rows)."""
    _sql(conn, "INSERT INTO tr VALUES (5, 5)", "UPDATE tr SET v = 40 WHERE id = 4")
    _other(conn, 1)
    _sql(conn, "TRUNCATE TABLE tr", "INSERT INTO tr VALUES (7, 7), (8, 8)", "DELETE FROM tr WHERE id = 8")
    _other(conn, 2)
    # DROP + CREATE with another type of v (text -> int: a new change-log generation)
    _sql(conn, "DROP TABLE dr", "CREATE TABLE dr (id INT PRIMARY KEY, v INT, z DECIMAL(5,1))",
         "INSERT INTO dr VALUES (9, 1, 9.5), (10, 2, NULL)")
    _sql(conn, "DROP TABLE dn", "CREATE TABLE dn (id BIGINT PRIMARY KEY, v VARBINARY(8))",
         "INSERT INTO dn VALUES (5, 'x')")
    # RENAME TABLE, then the rows under the new name in the same batch
    _sql(conn, "RENAME TABLE k TO k2", "UPDATE k2 SET v = 'bb' WHERE id = 2", "DELETE FROM k2 WHERE id = 5")
    # gh-ost's cut-over: the ghost table (a column more) swapped in, the old one dropped later
    _sql(conn, "CREATE TABLE _t_gho (id INT PRIMARY KEY, v INT, w INT)", "INSERT INTO _t_gho SELECT id, v, 0 FROM t",
         "UPDATE _t_gho SET w = 1 WHERE id = 1", "RENAME TABLE t TO _t_del, _t_gho TO t",
         "UPDATE t SET w = id * 10 WHERE id <= 3", "INSERT INTO t VALUES (7, 700, 7)", "DROP TABLE _t_del")
    _other(conn, 3)
    # a cycle of three: a and b change places
    _sql(conn, "RENAME TABLE a TO tmp, b TO a, tmp TO b", "UPDATE a SET s = 'a-now-b' WHERE id = 3",
         "UPDATE b SET s = 'b-now-a' WHERE id = 1")
    # across databases
    _sql(conn, f"RENAME TABLE {DB}.x TO {DB2}.x", f"INSERT INTO {DB2}.x VALUES (3, 3)")
    if full:  # from a table the daemon does not capture (filters.exclude): only the new name's entry
        _sql(conn, "RENAME TABLE hidden TO shown", "UPDATE shown SET v = 20 WHERE id = 2")
    # a partition statement: the rows it removed are not in the binlog
    _sql(conn, "ALTER TABLE p TRUNCATE PARTITION p0")
    _other(conn, 4)


# Mirrors equal to the server's SELECT at the end (shown: only its rows changed since; p: its rows of partition p0)
EQUAL = [(DB, "tr"), (DB, "dr"), (DB, "dn"), (DB, "k2"), (DB, "t"), (DB, "a"), (DB, "b"), (DB2, "x"), (DB, "other")]
ENDED = [(DB, "k"), (DB, "_t_gho"), (DB, "_t_del"), (DB, "tmp"), (DB, "x")]


def _mirror(spark, lake: Path, db: str, table: str, fmt: str) -> tuple[dict, list[str]]:
    df = lake_frame(spark, lake, db, table, fmt)
    names = [c for c in df.columns if not c.startswith("_binlake")]
    return {r["id"]: {c: plain_value(r[c]) for c in names} for r in df.collect()}, names


def _arrow(lake: Path, db: str, table: str, fmt: str):
    """A lake table as delta-rs or pyiceberg reads it (an Arrow table)."""
    if fmt == "iceberg":
        from tests.harness.iceberg import pyiceberg_table

        return pyiceberg_table(lake, db, table)
    import deltalake

    return deltalake.DeltaTable(str(lake / db / table)).to_pyarrow_table()


def _other_reader(lake: Path, db: str, table: str, fmt: str) -> dict:
    """The mirror as delta-rs or pyiceberg reads it."""
    arrow = _arrow(lake, db, table, fmt)
    names = [c for c in arrow.column_names if not c.startswith("_binlake")]
    return {r["id"]: {c: r[c] for c in names} for r in arrow.select(names).to_pylist()}


def _server(conn, db: str, table: str) -> dict:
    rows = plain_rows(conn, f"{db}`.`{table}", "id")
    return {k[0]: {c: (float(v) if isinstance(v, decimal.Decimal) and False else v) for c, v in r.items()}
            for k, r in rows.items()}


def _assert_mirrors(spark, lake: Path, conn, fmt: str) -> None:
    for db, table in EQUAL:
        want = _server(conn, db, table)
        got, names = _mirror(spark, lake, db, table, fmt)
        assert sorted(names) == sorted(next(iter(want.values())).keys()), (db, table, names)
        assert got == want, (db, table)
        assert _other_reader(lake, db, table, fmt) == want, (db, table, "delta-rs/pyiceberg")
    for db, table in ENDED:
        assert _other_reader(lake, db, table, fmt) == {}, (db, table)


def _change_logs(lake: Path, db: str, table: str, fmt: str) -> list[dict]:
    """Every generation's rows of a table's change log (op, seq, row_index), read by delta-rs or pyiceberg."""
    rows, number = [], 1
    while True:
        name = change_log_name(table, number)
        if not (lake / db / name / ("_delta_log" if fmt == "delta" else "metadata")).is_dir():
            return rows
        rows += _arrow(lake, db, name, fmt).select(["op", "seq", "row_index"]).to_pylist()
        number += 1


def _assert_change_logs(lake: Path, server, fmt: str) -> None:
    """Every row change of the binlog once in its table's change logs (mariadb-binlog --verbose's counts), and
    every statement row once."""
    server.flush_logs()
    files = server.binlog_files()[:-1]
    for db in (DB, DB2):
        counts = verbose_counts(files, db)
        for table in sorted({t for _, t in counts} - {"hidden"}):
            rows = _change_logs(lake, db, table, fmt)
            got = collections.Counter(r["op"] for r in rows if r["op"] in ("insert", "update", "delete"))
            want = {op: counts[(op, table)] for op in ("insert", "update", "delete") if counts[(op, table)]}
            assert dict(got) == want, (db, table)
            keys = [(r["seq"], r["row_index"]) for r in rows]
            assert len(set(keys)) == len(keys), (db, table, "twice")


# Delta and Iceberg on a local lake, Delta in a bucket too (its copies of a renamed mirror's files are the store's
# server-side copies there; Iceberg's statements have no code of their own for a bucket). Servers of each
# binlog_row_metadata; the FULL one's daemon keeps no schema history (schema.history: never), so its entries name no
# columns: a table created again starts from its first rows
@pytest.mark.parametrize(("fmt", "lake_shape", "metadata"),
                         [("delta", "local", "FULL"), ("iceberg", "local", "MINIMAL"),
                          ("delta", "cluster-s3", "NO_LOG")], indirect=["lake_shape"])
def test_table_statements_keep_every_mirror_equal_to_the_server(make_mariadb, kafka, spark, tmp_path, capsys,
                                                                fmt, lake_shape, metadata) -> None:
    server = make_mariadb(binlog_row_metadata=metadata)
    _databases(server)
    local = isinstance(lake_shape, LocalShape)
    prefix, lake = f"stmt{fmt}{lake_shape.name.replace('-', '')}", lake_shape.lake(tmp_path)
    config = tmp_path / "binlake.yaml"
    config.write_text(f'filters:\n  exclude: ["mysql.*", "sys.*", "performance_schema.*", "{DB}.hidden"]\n'
                      + ("schema:\n  history: never\n" if metadata == "FULL" else ""))
    options = ["--format", "iceberg"] if fmt == "iceberg" else []
    daemon = partial(run_daemon, server, kafka, prefix, "--config", str(config))
    daemon()  # its schema history (MINIMAL, NO_LOG) captured before the tables: their rows are streamed
    conn = _setup(server)
    if local:  # the tables' first rows landed before (in a bucket: in the statements' batch, before them)
        daemon()
        assert lake_shape.land(kafka, prefix, lake, *options) == 0
    _statements(conn, metadata == "FULL")
    daemon()
    said = ""
    if local:
        # One batch holds every statement between its tables' rows: the job killed with SIGKILL in its middle (as
        # the cycle's second pair is applied: the batch's parts before it committed), then run to the end; the
        # replay skips what committed, and the end is as if it had never been killed
        cmd, env = land_command(kafka, prefix, lake)
        said = killed_at_line([*cmd, *options], env, "rename `st`.`b` to `st`.`a`")
        assert ": truncate `st`.`tr` at" in said and ": rename `st`.`k` to `st`.`k2` at" in said
    capsys.readouterr()
    assert lake_shape.land(kafka, prefix, lake, *options) == 0
    said += capsys.readouterr().err
    if metadata == "FULL":
        assert "`st`.`shown`: renamed from `st`.`hidden`" in said and "binlake snapshot --tables st.shown" in said
    assert "may hold rows the server no longer has" in said and "TRUNCATE PARTITION p0" in said
    _assert_mirrors(spark, lake, conn, fmt)
    _assert_change_logs(lake, server, fmt)
    # the partition's rows stay (said above); the uncaptured table's mirror holds the rows changed since only
    assert sorted(_mirror(spark, lake, DB, "p", fmt)[0]) == [1, 2, 11, 12]
    if metadata == "FULL":
        assert _mirror(spark, lake, DB, "shown", fmt)[0] == {2: {"id": 2, "v": 20}}
    # change logs: dr's goes on in a second generation, the first ends with the drop; k2's starts with the rename
    # (the create's row: the new generation's first where the entry names the columns; else the first rows decide)
    history = metadata != "FULL"
    first = [r.op for r in lake_frame(spark, lake, DB, "dr__changes", fmt).orderBy("seq", "row_index").collect()]
    assert first[-1] == ("drop" if history else "create")
    second = lake_frame(spark, lake, DB, "dr__changes__v2", fmt).orderBy("seq", "row_index").collect()
    assert [r.op for r in second] == ["create", "insert", "insert"][0 if history else 1:]
    renamed = lake_frame(spark, lake, DB, "k2__changes", fmt).orderBy("seq", "row_index").collect()
    assert (renamed[0].op, renamed[0].rename_from, renamed[0].rename_to) == ("rename", "st.k", "st.k2")
    assert [r.op for r in lake_frame(spark, lake, DB, "k__changes", fmt).orderBy("seq").collect()][-1] == "rename"
    assert lake_frame(spark, lake, DB, "dn__changes__v2", fmt).count() == (2 if history else 1)  # a generation too
    # a later run: updates under the new names, on the lake tables the statements made
    _sql(conn, "UPDATE k2 SET v = 'later' WHERE id = 1", "UPDATE t SET w = 99 WHERE id = 7",
         "UPDATE a SET s = 'later' WHERE id = 1", "INSERT INTO b VALUES (9, 'b9')", f"DELETE FROM {DB2}.x WHERE id = 1",
         "INSERT INTO dr VALUES (11, 3, 1.5)", "INSERT INTO tr VALUES (9, 9)")
    if not local:
        return
    daemon()
    assert lake_shape.land(kafka, prefix, lake, *options) == 0
    _assert_mirrors(spark, lake, conn, fmt)
    # binlake verify under the new names; binlake status shows the old ones ended
    daemon = verifying_daemon(server, kafka, prefix, 4545)
    try:
        status, _ = verify_wait(server, lake, kafka, prefix, "st.tr,st.dr,st.dn,st.k2,st.t,st.a,st.b,st2.x", None,
                                *options)
    finally:
        daemon.terminate()
        daemon.wait()
    assert status == 0
    capsys.readouterr()
    assert main(["status", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--lake", str(lake),
                 "--checkpoint", str(lake / "_checkpoint"), *options, "--json"]) == 0
    shown = {t["table"]: t["ended"] for t in orjson.loads(capsys.readouterr().out)["tables"]}
    assert shown["st.k"].startswith("renamed to st.k2 at ") and shown["st.x"].startswith("renamed to st2.x at ")
    assert shown["st._t_del"].startswith("dropped at ") and shown["st._t_gho"].startswith("renamed to st.t at ")
    assert all(shown[t] is None for t in ("st.k2", "st.t", "st.a", "st.b", "st.dr", "st.dn", "st.tr", "st2.x"))
