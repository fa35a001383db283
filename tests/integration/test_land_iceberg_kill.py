"""binlake land --format iceberg, the driver killed with SIGKILL mid-way, then run again: every mirror equals
the server's SELECT, every change once in the change logs. With the catalog on a MariaDB server (Iceberg's JDBC
catalog layout, written by pyiceberg, read by Spark through MariaDB Connector/J), and with the default catalog of
a local lake, Iceberg's Hadoop catalog on its path (a kill between a table's metadata file and its
version-hint.text leaves the hint behind: the next run, and Spark's HadoopCatalog, find the newer file)."""

from __future__ import annotations

import os
import random
import subprocess
from urllib.parse import quote

import pytest

from tests.harness.binlogs import verbose_counts
from tests.harness.daemon import BINLAKE, run_daemon
from tests.harness.iceberg import pyiceberg_table
from tests.harness.land import assert_change_log, committed_batches, kill_group, lake_frame, plain_rows, running_until
from tests.harness.workloads import kill_workload

pytestmark = pytest.mark.integration


def test_kill_minus_nine_with_the_catalog_on_mariadb_neither_loses_nor_duplicates(make_mariadb, kafka, spark, tmp_path,
                                                                                   monkeypatch) -> None:
    server = make_mariadb()
    server.execute("CREATE DATABASE icecat")
    auth = quote(server.user, safe="") + (f":{quote(server.password, safe='')}" if server.password else "")
    catalog = f"mysql+pymysql://{auth}@{server.host}:{server.port}/icecat"
    _killed_and_run_again(server, kafka, spark, tmp_path, monkeypatch, "icekill", catalog, 5)
    with server.connect("icecat").cursor() as cur:  # the catalog is the server's, in Iceberg's JDBC layout
        cur.execute("SELECT table_namespace, table_name FROM iceberg_tables WHERE catalog_name = 'binlake'")
        assert sorted(cur.fetchall()) == [("icekill", "a"), ("icekill", "a__changes"), ("icekill", "b"),
                                          ("icekill", "b__changes")]


def test_kill_minus_nine_with_the_hadoop_catalog_neither_loses_nor_duplicates(make_mariadb, kafka, spark, tmp_path,
                                                                              monkeypatch) -> None:
    _killed_and_run_again(make_mariadb(), kafka, spark, tmp_path, monkeypatch, "icekillh", None, 6)
    lake = tmp_path / "lake"
    assert not (lake / "_iceberg_catalog.db").exists()
    for table in ("a", "a__changes", "b", "b__changes"):  # every hint names its table's newest metadata file
        metadata = lake / "icekillh" / table / "metadata"
        newest = max(int(p.name[1:].split(".")[0]) for p in metadata.glob("v*.metadata.json"))
        assert (metadata / "version-hint.text").read_text() == str(newest), table


def _killed_and_run_again(server, kafka, spark, tmp_path, monkeypatch, db: str, catalog: str | None,
                          seed: int) -> None:
    conn = kill_workload(server, db)
    monkeypatch.setenv("BINLAKE_KAFKA_MAX_RECORD_BYTES", "2000")  # many small records: many micro-batches
    run_daemon(server, kafka, db)
    lake = tmp_path / "lake"
    checkpoint = lake / "_checkpoint"
    cmd = [*BINLAKE, "land", "--kafka", kafka.bootstrap, "--topic-prefix", db, "--lake", str(lake),
           "--checkpoint", str(checkpoint), "--max-offsets-per-trigger", "8", "--format", "iceberg",
           *(["--iceberg-catalog", catalog] if catalog else [])]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = running_until(cmd, env, checkpoint, 1, random.Random(seed).uniform(0.5, 2.0))
    kill_group(proc)
    killed_at = committed_batches(checkpoint)
    done = subprocess.run([*cmd, "--trigger", "available-now"], env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert 1 <= killed_at < committed_batches(checkpoint)  # killed mid-stream
    for table in ("a", "b"):
        df = lake_frame(spark, lake, db, table, "iceberg", catalog)
        mirror = {(r["id"],): {c: r[c] for c in df.columns if not c.startswith("_binlake")} for r in df.collect()}
        assert mirror == plain_rows(conn, table, "id"), table
        read = pyiceberg_table(lake, db, table, catalog).drop_columns(["_binlake_seq", "_binlake_commit_ts"])
        assert {(r["id"],): r for r in read.to_pylist()} == mirror, table
    server.flush_logs()
    assert_change_log(spark, lake, db, verbose_counts(server.binlog_files()[:-1], db), ["a", "b"], "iceberg", catalog)
