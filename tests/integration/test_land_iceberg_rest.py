"""binlake land --format iceberg with a REST catalog (`--iceberg-catalog http://...`): Apache Iceberg's own
REST catalog server (its test server, from Maven Central), pyiceberg's RestCatalog writing through it, Spark
reading through it (Iceberg's REST catalog). Proof: every mirror equals the server's SELECT, read by Spark and
by pyiceberg; every change once in the change logs; a second run with nothing new commits nothing."""

from __future__ import annotations

import pytest

from tests.harness.binlogs import verbose_counts
from tests.harness.daemon import run_daemon
from tests.harness.iceberg import catalog, pyiceberg_table
from tests.harness.land import assert_change_log, lake_frame, plain_rows, run_land
from tests.harness.workloads import kill_workload

pytestmark = pytest.mark.integration


def test_a_rest_catalog_keeps_the_tables(make_mariadb, kafka, iceberg_rest, spark, tmp_path) -> None:
    server = make_mariadb()
    db = "icerest"
    conn = kill_workload(server, db)
    run_daemon(server, kafka, db)
    lake = tmp_path / "lake"
    assert run_land(kafka, db, lake, "--format", "iceberg", "--iceberg-catalog", iceberg_rest.uri) == 0
    assert not (lake / "_iceberg_catalog.db").exists()  # no SQLite: the server's catalog
    rest = catalog(lake, iceberg_rest.uri)
    assert sorted(rest.list_tables(db)) == [(db, "a"), (db, "a__changes"), (db, "b"), (db, "b__changes")]
    snapshots = {t: len(rest.load_table((db, t)).snapshots()) for t in ("a", "a__changes", "b", "b__changes")}
    for table in ("a", "b"):
        df = lake_frame(spark, lake, db, table, "iceberg", iceberg_rest.uri)
        mirror = {(r["id"],): {c: r[c] for c in df.columns if not c.startswith("_binlake")} for r in df.collect()}
        assert mirror == plain_rows(conn, table, "id"), table
        read = pyiceberg_table(lake, db, table, iceberg_rest.uri).drop_columns(["_binlake_seq", "_binlake_commit_ts"])
        assert {(r["id"],): r for r in read.to_pylist()} == mirror, table
    server.flush_logs()
    assert_change_log(spark, lake, db, verbose_counts(server.binlog_files()[:-1], db), ["a", "b"], "iceberg",
                      iceberg_rest.uri)
    assert run_land(kafka, db, lake, "--format", "iceberg", "--iceberg-catalog", iceberg_rest.uri) == 0
    assert {t: len(rest.load_table((db, t)).snapshots()) for t in snapshots} == snapshots
