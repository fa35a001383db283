"""Orphan files left by a real crash: `binlake land --format iceberg` killed with SIGKILL while it writes a large
batch's data files leaves files no metadata names (found by the test from the catalog's SQLite rows, the metadata
JSON and the manifests read with fastavro); the next run, with land.iceberg_orphan_age 0, removes them when it
first loads each table, and lands on: every mirror, read by pyiceberg, equals the server's SELECT, every change
once in the change logs (mariadb-binlog's counts)."""

from __future__ import annotations

import os
import subprocess
import time
import types
from pathlib import Path

import pytest

from tests.harness.binlogs import verbose_counts
from tests.harness.daemon import BINLAKE, run_daemon
from tests.harness.iceberg import pyiceberg_table
from tests.harness.iceberg_files import local_path, metadata_locations, named, on_disk
from tests.harness.land import assert_change_rows, kill_group, plain_rows
from tests.harness.workloads import kill_workload

pytestmark = pytest.mark.integration


def _orphans(lake: Path, db: str) -> set[Path]:
    """Files of the lake's tables that no live metadata names."""
    out: set[Path] = set()
    for (ns, name), current in metadata_locations(lake).items():
        if ns == db:
            out |= on_disk(lake / db / name) - named(current, local_path)
    return out


def test_a_crash_leaves_orphan_files_and_the_next_run_removes_them(make_mariadb, kafka, tmp_path) -> None:
    server = make_mariadb()
    db = "iceorphan"
    conn = kill_workload(server, db)
    with conn.cursor() as cur:  # a large transaction: its change-log file takes a while to write
        cur.execute("CREATE TABLE big (id INT PRIMARY KEY, pad TEXT)")
        conn.begin()
        for start in range(0, 40_000, 2_000):
            rows = [(i, f"{i:08d}" * 120) for i in range(start, start + 2_000)]
            cur.executemany("INSERT INTO big VALUES (%s, %s)", rows)
        conn.commit()
        cur.execute("UPDATE big SET pad = 'after' WHERE id % 1000 = 0")
        cur.execute("DELETE FROM a WHERE id < 50")
    run_daemon(server, kafka, db)
    lake = tmp_path / "lake"
    cmd = [*BINLAKE, "land", "--kafka", kafka.bootstrap, "--topic-prefix", db, "--lake", str(lake), "--checkpoint",
           str(lake / "_checkpoint"), "--format", "iceberg"]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([*cmd, "--trigger", "1s"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    data = lake / db / "big__changes" / "data"
    deadline = time.monotonic() + 300
    while not (data.exists() and any(data.rglob("*.parquet"))):  # the large batch's first data file
        assert proc.poll() is None and time.monotonic() < deadline, "no data file written"
        time.sleep(0.005)
    kill_group(proc)  # mid-batch: while it writes
    orphans = _orphans(lake, db)
    assert any(p.suffix == ".parquet" for p in orphans), orphans  # the crash left files no metadata names

    done = subprocess.run([*cmd, "--trigger", "available-now"], env={**env, "BINLAKE_LAND_ICEBERG_ORPHAN_AGE": "0"},
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not any(p.exists() for p in orphans), [p for p in orphans if p.exists()]
    assert _orphans(lake, db) == set()
    assert "orphan files removed" in done.stderr
    for table in ("a", "b", "big"):
        read = pyiceberg_table(lake, db, table).drop_columns(["_binlake_seq", "_binlake_commit_ts"])
        assert {(r["id"],): r for r in read.to_pylist()} == plain_rows(conn, table, "id"), table
    server.flush_logs()
    counts = verbose_counts(server.binlog_files()[:-1], db)
    for table in ("a", "b", "big"):
        rows = pyiceberg_table(lake, db, f"{table}__changes").select(
            ["op", "seq", "row_index", "gtid", "commit_ts", "commit_date"]).to_pylist()
        assert_change_rows(table, counts, [types.SimpleNamespace(**r) for r in rows])
