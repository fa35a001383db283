"""Partition maintenance whose rows the binlog does not name (TRUNCATE, DROP, EXCHANGE PARTITION) and `binlake
snapshot --replace`: the daemon (with its signal table) publishes a reload entry after the statement and reads the
table again; the land job empties the mirror there and the re-snapshot's rows, with the changes after the entry,
fill it (docs/FORMAT.md "Table statements", docs/LAND.md "Table statements"). Every mirror then equals the server's
SELECT, as Spark and delta-rs read it, rows deleted on the source behind binlake's back (sql_log_bin=0) included."""

from __future__ import annotations

import pytest

from ingester.cli.main import main
from tests.harness.daemon import CheckpointWatcher
from tests.harness.delta_rs import delta_rs_table
from tests.harness.land import lake_frame, plain_rows, run_land
from tests.harness.verify_run import verifying_daemon

pytestmark = pytest.mark.integration
DB = "pr"
PARTITIONED = ("(id INT PRIMARY KEY, v VARCHAR(20)) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), "
               "PARTITION p1 VALUES LESS THAN (20), PARTITION p2 VALUES LESS THAN MAXVALUE)")


def _read_again(server, watcher: CheckpointWatcher) -> None:
    """Until the daemon has streamed past everything the server has now and read again every table it queued."""
    end = server.current_binlog_position()
    watcher.wait(lambda c: "file" in c and "resnapshot" not in c
                 and (c["file"], c["position"]) >= (end.file, end.position))


def test_rows_the_binlog_does_not_name_are_read_again(make_mariadb, kafka, spark, tmp_path) -> None:
    server = make_mariadb(binlog_row_metadata="MINIMAL")
    server.execute(f"CREATE DATABASE {DB}")
    server.execute("CREATE DATABASE binlake")
    server.execute("CREATE TABLE binlake.signal (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32), data TEXT)")
    prefix, lake = "reload", tmp_path / "lake"
    watcher = CheckpointWatcher(kafka.bootstrap, prefix, f"{prefix}.127.0.0.1:{server.port}")
    daemon = verifying_daemon(server, kafka, prefix, 4646)  # snapshot_signal_table binlake.signal
    try:
        watcher.wait(lambda c: "file" in c, timeout=60)  # streaming: the statements below are in its stream
        conn = server.connect(DB)
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE p {PARTITIONED}")
            cur.execute(f"CREATE TABLE e {PARTITIONED.split(' PARTITION BY')[0]}")
            cur.execute("CREATE TABLE q (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.executemany("INSERT INTO p VALUES (%s, %s)", [(i, f"p{i}") for i in range(1, 30)])
            cur.executemany("INSERT INTO e VALUES (%s, %s)", [(i, f"e{i}") for i in (12, 15, 17)])
            cur.executemany("INSERT INTO q VALUES (%s, %s)", [(i, f"q{i}") for i in range(1, 8)])
            conn.commit()
            cur.execute("UPDATE p SET v = 'changed' WHERE id IN (3, 14, 25)")
            cur.execute("ALTER TABLE p TRUNCATE PARTITION p0")
            cur.execute("INSERT INTO p VALUES (5, 'after truncate')")
            cur.execute("ALTER TABLE p EXCHANGE PARTITION p1 WITH TABLE e")  # p1's rows into e, e's into p1
            cur.execute("UPDATE e SET v = 'moved' WHERE id = 14")
            cur.execute("ALTER TABLE p DROP PARTITION p2")
            cur.execute("INSERT INTO p VALUES (9, 'last')")
            # q: rows changed behind binlake's back, then replaced by `binlake snapshot --replace`
            cur.execute("SET sql_log_bin = 0")
            cur.execute("DELETE FROM q WHERE id IN (2, 3)")
            cur.execute("UPDATE q SET v = 'hidden' WHERE id = 4")
            cur.execute("SET sql_log_bin = 1")
            conn.commit()
        _read_again(server, watcher)
        assert main(["snapshot", "--source", server.url, "--signal-table", "binlake.signal", "--tables", f"{DB}.q",
                     "--replace", "--wait"]) == 0
        with conn.cursor() as cur:
            cur.execute("UPDATE q SET v = 'after replace' WHERE id = 5")
            cur.execute("UPDATE p SET v = 'later' WHERE id = 1")
            conn.commit()
        _read_again(server, watcher)
    finally:
        daemon.terminate()
        daemon.wait()
        watcher.close()
    assert run_land(kafka, prefix, lake) == 0
    for table in ("p", "e", "q"):
        want = {k[0]: r for k, r in plain_rows(conn, table, "id").items()}
        got = {r["id"]: {"id": r["id"], "v": r["v"]} for r in lake_frame(spark, lake, DB, table).collect()}
        assert got == want, table
        other = delta_rs_table(lake / DB / table).select(["id", "v"]).to_pylist()
        assert {r["id"]: r for r in other} == want, (table, "delta-rs")
    ops = [r.op for r in lake_frame(spark, lake, DB, "p__changes").orderBy("seq", "row_index").collect()]
    assert ops.count("partition") == 3 and ops.count("reload") == 3  # each statement, each reload after it
    assert "reload" in [r.op for r in lake_frame(spark, lake, DB, "q__changes").collect()]
