"""A lake an earlier binlake made keeps its catalog: the earlier default was SQLite at <lake>/_iceberg_catalog.db
(made here by a first run with --iceberg-catalog sqlite:///<lake>/_iceberg_catalog.db); a run without
--iceberg-catalog goes on in it, not in the Hadoop catalog that is now the default of a new local lake. Proof:
the SQLite catalog lists the tables and no table has a version-hint.text; pyiceberg's SqlCatalog (not binlake's
code) reads every mirror equal to the server's SELECT after the second run's changes, and each change log holds
as many row changes as mariadb-binlog --verbose counts."""

from __future__ import annotations

import sqlite3

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from tests.harness.binlogs import verbose_counts
from tests.harness.daemon import run_daemon
from tests.harness.land import plain_rows, run_land
from tests.harness.workloads import kill_workload

pytestmark = pytest.mark.integration


def test_an_earlier_lakes_sqlite_catalog_stays_its_catalog(make_mariadb, kafka, tmp_path) -> None:
    server = make_mariadb()
    db = "iceold"
    conn = kill_workload(server, db)
    run_daemon(server, kafka, db)
    lake = tmp_path / "lake"
    sqlite = lake / "_iceberg_catalog.db"
    assert run_land(kafka, db, lake, "--format", "iceberg", "--iceberg-catalog", f"sqlite:///{sqlite}") == 0
    with conn.cursor() as cur:  # changes the second run lands
        cur.execute("UPDATE a SET v = 'again' WHERE id < 10")
        cur.execute("DELETE FROM b WHERE id < 30")
        cur.execute("INSERT INTO a VALUES (-1, 'new', 0)")
    run_daemon(server, kafka, db)
    assert run_land(kafka, db, lake, "--format", "iceberg") == 0  # no --iceberg-catalog: the lake's own
    assert not list(lake.glob("**/version-hint.text"))  # nothing in the Hadoop catalog's layout
    with sqlite3.connect(sqlite) as found:
        tables = found.execute("SELECT table_namespace, table_name FROM iceberg_tables").fetchall()
    assert sorted(tables) == [(db, "a"), (db, "a__changes"), (db, "b"), (db, "b__changes")]
    catalog = SqlCatalog("binlake", uri=f"sqlite:///{sqlite}")
    server.flush_logs()
    counts = verbose_counts(server.binlog_files()[:-1], db)
    for table in ("a", "b"):
        read = catalog.load_table((db, table)).scan().to_arrow().drop_columns(["_binlake_seq", "_binlake_commit_ts"])
        assert {(r["id"],): r for r in read.to_pylist()} == plain_rows(conn, table, "id"), table
        changes = len(catalog.load_table((db, f"{table}__changes")).scan().to_arrow())
        assert changes == sum(n for (_, t), n in counts.items() if t == table), table
