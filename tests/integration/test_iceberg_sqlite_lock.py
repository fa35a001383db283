"""The SQLite catalog written by the job (pyiceberg) after a Spark session of the same process has read it through
Iceberg's JDBC catalog (sqlite-jdbc), whose connection keeps a read transaction open: the job's commits go on (the
catalog in write-ahead-log mode; in SQLite's default journal mode they failed with `database is locked`), and a
catalog Spark opens anew reads them."""

from __future__ import annotations

import sqlite3

import pyarrow as pa
import pytest

from streaming_job.iceberg.tables import WantedTable
from tests.harness.iceberg import catalog, local_format
from tests.harness.land import lake_frame

pytestmark = pytest.mark.integration


def test_the_jobs_commits_go_on_after_sparks_read_of_the_sqlite_catalog(spark, tmp_path) -> None:
    sqlite = f"sqlite:///{tmp_path / '_iceberg_catalog.db'}"  # a SQLite catalog (the Hadoop one is the default)
    fmt = local_format(tmp_path, uri=sqlite)
    table = fmt.ready(WantedTable("db", "t", pa.schema([("id", pa.int64())]), [], dict))
    for batch in range(3):
        rows = pa.table({"id": pa.array([batch], pa.int64())})
        properties = fmt._batch(batch)
        fmt._commit("db", "t", table, lambda tx, rows=rows, p=properties: tx.append(rows, snapshot_properties=p),
                    properties)
        spark._jsparkSession.sessionState().catalogManager().reset()  # Spark's catalog opened anew: a fresh read
        assert sorted(r["id"] for r in lake_frame(spark, tmp_path, "db", "t", "iceberg", sqlite).collect()) == \
            list(range(batch + 1))
    landed = catalog(tmp_path, sqlite).load_table(("db", "t")).scan().to_arrow().to_pylist()
    assert sorted(r["id"] for r in landed) == [0, 1, 2]
    with sqlite3.connect(tmp_path / "_iceberg_catalog.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
