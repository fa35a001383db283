"""Every kind of table statement and XA outcome in one stream, under a steady write workload on other tables, landed
by a running job (`binlake land --trigger 1s`) that is killed with SIGKILL as it applies the first statement and
started again (issue 37's mix): at the end every mirror equals the server's SELECT (read by delta-rs, or by pyiceberg
through the store's S3 API), every row change of the binlog is once in the change logs (mariadb-binlog --verbose's
counts), and no change of a rolled-back XA transaction is anywhere. Delta on local disk; Iceberg in a bucket."""

from __future__ import annotations

import collections
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from streaming_job.lake.generations import change_log_name
from tests.harness.binlogs import verbose_counts
from tests.harness.daemon import BINLAKE, CheckpointWatcher
from tests.harness.land import RunningLand, kill_group, land_command, landed_everything, plain_rows, store_land_command
from tests.harness.workloads import Trickle

pytestmark = pytest.mark.integration
DB = "mx"
TABLES = ["tr", "dr", "k2", "u", "m", "p", "x", "w"]  # compared with the server's SELECT at the end
SETUP = [
    "CREATE TABLE tr (id INT PRIMARY KEY, v INT)", "INSERT INTO tr VALUES (1, 1), (2, 2)",
    "CREATE TABLE dr (id INT PRIMARY KEY, v VARCHAR(10))", "INSERT INTO dr VALUES (1, 'one'), (2, 'two')",
    "CREATE TABLE k (id INT PRIMARY KEY, v VARCHAR(10))", "INSERT INTO k VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    "CREATE TABLE u (id INT PRIMARY KEY, v INT)", "INSERT INTO u VALUES (1, 1), (2, 2)",
    "CREATE TABLE m (id INT PRIMARY KEY, v VARCHAR(40) CHARACTER SET latin1)",
    "INSERT INTO m VALUES (1, 'caf\u00e9'), (2, 'plain')",
    "CREATE TABLE p (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), "
    "PARTITION p1 VALUES LESS THAN MAXVALUE)", "INSERT INTO p VALUES (1, 1), (2, 2), (11, 11), (12, 12)",
    "CREATE TABLE x (id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO x VALUES (1, 'x')",
    "CREATE TABLE w (id INT PRIMARY KEY, n BIGINT)"]
# one group at a time, a moment apart, while the workload writes w (and the land job is killed after the first)
STEPS = [
    ["INSERT INTO tr VALUES (3, 3)", "TRUNCATE TABLE tr", "INSERT INTO tr VALUES (4, 4)"],
    ["XA START 'kept'", "INSERT INTO x VALUES (2, 'committed')", "XA END 'kept'", "XA PREPARE 'kept'"],
    ["XA START 'gone'", "INSERT INTO x VALUES (3, 'rolled back')", "XA END 'gone'", "XA PREPARE 'gone'"],
    ["DROP TABLE dr", "CREATE TABLE dr (id INT PRIMARY KEY, v INT, z DECIMAL(5,1))",
     "INSERT INTO dr VALUES (9, 1, 9.5)"],
    ["RENAME TABLE k TO k2", "UPDATE k2 SET v = 'bb' WHERE id = 2"],
    ["ALTER TABLE u ADD COLUMN g DATETIME(3) NOT NULL DEFAULT '2020-02-02 02:02:02.123'"],  # no row changes after
    ["ALTER TABLE m MODIFY v VARBINARY(40)", "INSERT INTO m VALUES (3, 'bin')"],  # text -> binary: a rewrite
    ["ALTER TABLE p TRUNCATE PARTITION p0", "INSERT INTO p VALUES (5, 5)"],  # read again (the signal table)
    ["XA ROLLBACK 'gone'", "XA COMMIT 'kept'"],
    ["UPDATE x SET v = 'after' WHERE id = 1"],
]


def _read_tables(fmt: str, lake: Path, store: Any, checkpoint: Path, monkeypatch: Any):
    """A function (db, table) -> the lake table as delta-rs (Delta) or pyiceberg through the S3 API (Iceberg) reads
    it, an Arrow table, or None where there is none."""
    if fmt == "delta":
        import deltalake

        def delta(db: str, table: str):
            path = lake / db / table
            return deltalake.DeltaTable(str(path)).to_pyarrow_table() if (path / "_delta_log").is_dir() else None

        return delta
    from pyiceberg.exceptions import NoSuchTableError

    from streaming_job.iceberg.catalog import IcebergCatalog
    from streaming_job.lake.object_store import ObjectStoreSettings

    for name, value in store.environment().items():
        monkeypatch.setenv(name, value)
    # the lake by its URI (its local path is the object store's own files: a Hadoop catalog there finds no table)
    uri = "s3a://" + lake.relative_to(store.data).as_posix()
    catalog = IcebergCatalog(uri, None, ObjectStoreSettings(store.endpoint, path_style=True),
                             str(checkpoint)).open()

    def iceberg(db: str, table: str):
        try:
            return catalog.load_table((db, table)).scan().to_arrow()
        except NoSuchTableError:
            return None

    return iceberg


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_a_mix_of_statements_under_writes_across_a_kill_lands_once(make_mariadb, kafka, spark, object_store,
                                                                   tmp_path, monkeypatch, fmt) -> None:
    server = make_mariadb(binlog_row_metadata="MINIMAL")
    server.execute(f"CREATE DATABASE {DB}")
    server.execute("CREATE DATABASE binlake")
    server.execute("CREATE TABLE binlake.signal (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32), data TEXT)")
    prefix = f"mix{fmt}"
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "BINLAKE_SNAPSHOT_SIGNAL_TABLE": "binlake.signal"}
    watcher = CheckpointWatcher(kafka.bootstrap, prefix, f"{prefix}.127.0.0.1:{server.port}")  # before the daemon
    daemon = subprocess.Popen([*BINLAKE, "run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix",
                               prefix, "--server-id", "4848"], env=env, stderr=open(tmp_path / "daemon.log", "w"))
    if fmt == "delta":  # on local disk
        lake = tmp_path / "lake"
        checkpoint, extra = lake / "_checkpoint", []
        cmd, land_env = land_command(kafka, prefix, lake)
    else:  # in a bucket, the Iceberg catalog beside the local checkpoint
        lake, checkpoint = object_store.data / "lake" / f"mix-{tmp_path.name}", tmp_path / "checkpoint"
        uri = "s3a://" + lake.relative_to(object_store.data).as_posix()
        extra = ["--format", "iceberg", "--checkpoint", str(checkpoint)]
        cmd, land_env = store_land_command(kafka, object_store, prefix, uri, None, *extra)
    workload = Trickle(server, DB, "w")
    landing: RunningLand | None = None
    try:
        watcher.wait(lambda c: "file" in c, timeout=60)
        conn = server.connect(DB)
        with conn.cursor() as cur:
            for sql in SETUP:
                cur.execute(sql)
        conn.commit()
        workload.start()
        landing = RunningLand(cmd, land_env, tmp_path / "land.log")
        # XA transactions prepared in a step each (a session can hold one at a time), resolved in a later one by
        # the session that prepared it (MariaDB: XAER_NOTA from another while that one is connected)
        xa = {name: server.connect(DB, autocommit=True) for name in ("kept", "gone")}
        for i, step in enumerate(STEPS):
            session = next((c for name, c in xa.items() if f"XA START '{name}'" in step[0]), None)
            for sql in step:
                named = next((c for name, c in xa.items() if sql.startswith("XA ") and f"'{name}'" in sql), None)
                with (named or session or conn).cursor() as cur:
                    cur.execute(sql)
            conn.commit()
            if i == 0:
                landing.kill_at(f"truncate `{DB}`.`tr` at")
                landing = RunningLand(cmd, land_env, tmp_path / "land.log")
            time.sleep(1.5)
        workload.stop.set()
        workload.join()
        end = server.current_binlog_position()
        watcher.wait(lambda c: "file" in c and "resnapshot" not in c and not c.get("prepared")
                     and (c["file"], c["position"]) >= (end.file, end.position))
        landing.until(lambda: landed_everything(kafka, prefix, checkpoint))  # the restarted job lands it all
        landing.stop()
        landing = None
    finally:
        workload.stop.set()
        if landing is not None:
            kill_group(landing.proc)
        daemon.terminate()
        daemon.wait()
        watcher.close()
    read = _read_tables(fmt, lake, object_store, checkpoint, monkeypatch)
    for table in TABLES:
        want = {k[0]: r for k, r in plain_rows(conn, table, "id").items()}
        arrow = read(DB, table)
        assert arrow is not None, table
        names = [c for c in arrow.column_names if not c.startswith("_binlake")]
        got = {r["id"]: r for r in arrow.select(names).to_pylist()}
        assert sorted(names) == sorted(next(iter(want.values())).keys()), (table, names)
        assert got == want, table
    assert read(DB, "k") is None or read(DB, "k").num_rows == 0  # renamed away: ended
    # every row change of the binlog once in its table's change logs (every generation's)
    server.flush_logs()
    counts = verbose_counts(server.binlog_files()[:-1], DB)
    counts[("insert", "x")] -= 1  # the rolled-back XA transaction's row: in the binlog (at its XA PREPARE) only
    for table in sorted({t for _, t in counts}):
        rows, number = [], 1
        while (found := read(DB, change_log_name(table, number))) is not None:
            rows += found.select(["op", "seq", "row_index"]).to_pylist()
            number += 1
        got = collections.Counter(r["op"] for r in rows if r["op"] in ("insert", "update", "delete"))
        assert dict(got) == {op: counts[(op, table)] for op in ("insert", "update", "delete")
                             if counts[(op, table)]}, table
        keys = [(r["seq"], r["row_index"]) for r in rows if r["op"] in ("insert", "update", "delete")]
        assert len(set(keys)) == len(keys), (table, "twice")
    x_log = read(DB, "x__changes").to_pylist()
    assert not any((r["after"] or {}).get("v") == "rolled back" for r in x_log)
