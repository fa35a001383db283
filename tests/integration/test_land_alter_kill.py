"""An ALTER's mirror rewrite is exactly once across a kill -9 of the land job in the middle of it
(streaming_job/statements/schema_alter.py, delta_schema.py): the rewrite's files are written, then committed in one
commit with the statement's marker, so a job killed while writing them leaves the mirror as it was (the files unnamed by
the log), and the next run rewrites it once; the change log's generations hold every change once. The rewrite runs in
its batch here (land.park_rows -1: the batch is not committed when it is killed); a parked table's rewrite, beside the
batches, is test_land_park.py's."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import orjson
import pytest

from tests.harness.alters import alter, select_rows
from tests.harness.daemon import run_daemon
from tests.harness.delta_rs import delta_rs_table
from tests.harness.land import committed_batches, kill_group, lake_frame, land_command, run_land

pytestmark = pytest.mark.integration
DB = "altk"
ROWS = 150_000


def _logged(path: Path) -> set[str]:
    """The data files the table's Delta log names (added and not removed since)."""
    files: set[str] = set()
    for entry in sorted((path / "_delta_log").glob("*.json")):
        for line in entry.read_text().splitlines():
            action = orjson.loads(line)
            if "add" in action:
                files.add(action["add"]["path"])
            elif "remove" in action:
                files.discard(action["remove"]["path"])
    return files


def _new(mirror: Path, before: set[str]) -> set[str]:
    return {p.name for p in mirror.glob("*.parquet")} - before


def test_a_rewrite_killed_midway_lands_once(mariadb, kafka, spark, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("BINLAKE_LAND_PARK_ROWS", "-1")  # the rewrite in its batch (a parked one's: test_land_park.py)
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")
    mariadb.execute(f"CREATE DATABASE {DB} CHARACTER SET utf8mb4")
    prefix, lake = "altkill", tmp_path / "lake"
    conn = mariadb.connect(DB)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(30) CHARACTER SET latin1, d DECIMAL(10,4))")
        cur.execute("CREATE TABLE o (id INT PRIMARY KEY, v INT)")
        cur.execute(f"INSERT INTO big SELECT seq, CONCAT('valué-', seq), seq / 10000 FROM seq_1_to_{ROWS}")
        cur.execute("INSERT INTO o VALUES (1, 1)")
    run_daemon(mariadb, kafka, prefix)
    assert run_land(kafka, prefix, lake) == 0
    mirror = lake / DB / "big"
    before = {p.name for p in mirror.glob("*.parquet")}
    with conn.cursor() as cur:
        cur.execute("INSERT INTO o VALUES (2, 2)")
    alter(mariadb, kafka, prefix, DB, "big", "ALTER TABLE big MODIFY v VARBINARY(40), MODIFY d DECIMAL(10,2)",
          ["INSERT INTO big VALUES (0, 0x00ff, 1.5)", "UPDATE big SET d = 7 WHERE id = 5"])
    with conn.cursor() as cur:
        cur.execute("INSERT INTO o VALUES (3, 3)")
    run_daemon(mariadb, kafka, prefix)

    # The job killed as soon as the rewrite's first file is on disk: before its commit
    cmd, env = land_command(kafka, prefix, lake)
    batches = committed_batches(lake / "_checkpoint")
    proc = subprocess.Popen([*cmd, "--trigger", "available-now"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline and not _new(mirror, before):
        time.sleep(0.02)
    assert proc.poll() is None, "the job ended before the rewrite wrote a file"
    kill_group(proc)
    written = _new(mirror, before)
    assert written and not written & _logged(mirror), "killed after the rewrite's commit: no midway kill"
    assert committed_batches(lake / "_checkpoint") == batches

    assert run_land(kafka, prefix, lake) == 0
    for table in ("big", "o"):
        want = select_rows(mariadb, DB, table)
        got = {r["id"]: {c: (bytes(r[c]) if isinstance(r[c], bytearray) else r[c]) for c in ("id", "v", "d")
                         if c in r} for r in lake_frame(spark, lake, DB, table).collect()}
        assert got == {k: {c: v[c] for c in ("id", "v", "d") if c in v} for k, v in want.items()}, table
    assert len(delta_rs_table(mirror)) == ROWS + 1
    first = lake_frame(spark, lake, DB, "big__changes").groupBy("op").count().collect()
    second = lake_frame(spark, lake, DB, "big__changes__v2").groupBy("op").count().collect()
    assert {r.op: r["count"] for r in first} == {"insert": ROWS, "alter": 1}
    assert {r.op: r["count"] for r in second} == {"alter": 1, "insert": 1, "update": 1}
    assert [r.v for r in lake_frame(spark, lake, DB, "o__changes").select("after.v").collect()].count(2) == 1
