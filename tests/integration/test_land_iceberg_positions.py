"""Iceberg mirrors kept merge-on-read (land.deletion_vectors ``always``: iceberg/position_deletes.py): a batch's
replaced and deleted rows are marked deleted by position in a position delete file of its own, committed with its
new rows in one snapshot. Against a real server: rounds of random updates (a key changed twice in a transaction and
again in the next), deletes and re-inserts of the same keys, on an INT key, a two-column key and an unsigned
BIGINT key past 2^63; after each round the mirrors equal the server's SELECT as Spark (Iceberg's Java runtime) and
pyiceberg read them; the land driver killed with SIGKILL mid-stream lands every change once, and killed
mid-compaction leaves files no metadata names, which the next run removes; the mirrors were
compacted (every 4 files) and hold at most one file-scoped position delete file per data file and fewer than 4
others, and no equality deletes; once quiet (land.quiet_compaction), none at all."""

from __future__ import annotations

import contextlib
import random
import signal
import subprocess
import sys
import time

import pytest

from streaming_job.iceberg.compaction import excess_deletes
from tests.harness.daemon import BINLAKE, run_daemon
from tests.harness.iceberg import catalog
from tests.harness.iceberg_files import local_path, metadata_locations, named, on_disk
from tests.harness.land import (
    committed_batches,
    kill_group,
    lake_frame,
    land_command,
    landed_everything,
    run_land,
    running_until,
)

pytestmark = pytest.mark.integration
_TABLES = {"t": ("id", "CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(20))"),
           "c": ("a,b", "CREATE TABLE c (a VARCHAR(10), b INT, v INT, PRIMARY KEY (a, b))"),
           "u": ("id", "CREATE TABLE u (id BIGINT UNSIGNED PRIMARY KEY, v INT)")}
# compaction due every few files: small data files and files past the deleted share rewritten with their deletes
# applied, spent delete files dropped and the rest merged (iceberg/compaction.py), between and after the batches
_POSITIONS = ("--format", "iceberg", "--deletion-vectors", "always", "--compact-files", "4")


def _select(conn, table: str) -> dict:
    key = _TABLES[table][0].split(",")
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table}")
        names = [d[0] for d in cur.description]
        return {tuple(r[names.index(k)] for k in key): dict(zip(names, r, strict=True)) for r in cur.fetchall()}


def _keyed(rows: list[dict], table: str) -> dict:
    key = _TABLES[table][0].split(",")
    return {tuple(r[k] for k in key): {n: v for n, v in r.items() if not n.startswith("_binlake")} for r in rows}


def _assert_mirrors(spark, lake, conn, db: str) -> None:
    for table in _TABLES:
        want = _select(conn, table)
        read = catalog(lake).load_table((db, table)).scan().to_arrow()
        got = _keyed(read.to_pylist(), table)
        assert len(read) == len(got) and got == want, f"{table} (pyiceberg)"
        frame = lake_frame(spark, lake, db, table, "iceberg")
        assert _keyed([r.asDict() for r in frame.collect()], table) == want, f"{table} (Spark)"


def _round(conn, rnd: random.Random, n: int) -> None:
    """Random single-row updates, a key updated twice in one transaction, deletes, and re-inserts of deleted keys."""
    with conn.cursor() as cur:
        for _ in range(40):
            k = rnd.randrange(1, 2001)
            cur.execute("UPDATE t SET v = v + 1, s = %s WHERE id = %s", (f"r{n}", k))
        k = rnd.randrange(1, 2001)
        cur.execute("UPDATE t SET v = v * 2 WHERE id = %s", (k,))
        cur.execute("UPDATE t SET s = 'twice' WHERE id = %s", (k,))
        conn.commit()
        cur.execute("UPDATE t SET s = 'again' WHERE id = %s", (k,))
        gone = rnd.sample(range(1, 2001), 15)
        cur.execute(f"DELETE FROM t WHERE id IN ({', '.join(map(str, gone))})")
        back = rnd.sample(gone, 5)
        cur.executemany("INSERT INTO t VALUES (%s, %s, %s)", [(k, -k, f"back{n}") for k in back])
        cur.execute("UPDATE t SET v = v + 100 WHERE id BETWEEN %s AND %s", (n * 300, n * 300 + 60))
        cur.execute("UPDATE c SET v = v + 1 WHERE b %% 7 = %s", (n,))
        cur.execute("DELETE FROM c WHERE a = %s AND b < 5", (f"k{n}",))
        cur.executemany("INSERT INTO c VALUES (%s, %s, %s)", [(f"k{n}", b, n) for b in range(3)])
        cur.execute("UPDATE u SET v = v + 1 WHERE id >= %s", (2**63,))
        cur.execute("DELETE FROM u WHERE id = %s", (2**63 + n,))
    conn.commit()


def test_random_changes_land_by_position_and_read_alike_in_spark_and_pyiceberg(make_mariadb, kafka, spark,
                                                                              tmp_path) -> None:
    server = make_mariadb()
    db = "icepos"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    with conn.cursor() as cur:
        for _, ddl in _TABLES.values():
            cur.execute(ddl)
        cur.executemany("INSERT INTO t VALUES (%s, %s, %s)", [(k, k, f"s{k}") for k in range(1, 2001)])
        cur.executemany("INSERT INTO c VALUES (%s, %s, %s)",
                        [(f"k{a}", b, a * b) for a in range(10) for b in range(30)])
        cur.executemany("INSERT INTO u VALUES (%s, %s)", [(k, 1) for k in (*range(1, 50), *range(2**63, 2**63 + 50),
                                                                        2**64 - 1)])
    conn.commit()
    prefix, lake = "icepos", tmp_path / "lake"
    rnd = random.Random(20261201)
    run_daemon(server, kafka, prefix)
    assert run_land(kafka, prefix, lake, *_POSITIONS) == 0
    for n in range(1, 3):
        _round(conn, rnd, n)
        run_daemon(server, kafka, prefix)
        assert run_land(kafka, prefix, lake, *_POSITIONS) == 0
        _assert_mirrors(spark, lake, conn, db)

    # the driver killed with SIGKILL mid-stream (batches of a few records), then run again to the end
    for n in range(3, 8):
        _round(conn, rnd, n)
        run_daemon(server, kafka, prefix)  # (a few records a round)
    cmd, env = land_command(kafka, prefix, lake)
    checkpoint = lake / "_checkpoint"
    before = committed_batches(checkpoint)
    kill_group(running_until([*cmd, *_POSITIONS, "--max-offsets-per-trigger", "1"], env, checkpoint, before + 2,
                             rnd.uniform(0.2, 0.8)))
    killed_at = committed_batches(checkpoint)
    assert run_land(kafka, prefix, lake, *_POSITIONS, "--max-offsets-per-trigger", "1") == 0
    assert before + 2 <= killed_at < committed_batches(checkpoint)  # killed mid-stream
    _assert_mirrors(spark, lake, conn, db)

    # the deletes went by position: live position delete files, and no equality deletes
    from pyiceberg.manifest import DataFileContent

    for table in _TABLES:
        mirror = catalog(lake).load_table((db, table))
        kinds = {d.content for task in mirror.scan().plan_files() for d in task.delete_files}
        assert kinds <= {DataFileContent.POSITION_DELETES}, (table, kinds)
        written = [int(s.summary.get("added-position-delete-files") or 0) for s in mirror.snapshots() if s.summary]
        assert sum(written) >= 3, (table, written)
        live = {d.file_path: d for task in mirror.scan().plan_files() for d in task.delete_files}
        assert excess_deletes(list(live.values())) < 4, table  # bounded (and one file-scoped one per data file)
        assert any(s.summary and s.summary.operation.value == "replace" for s in mirror.snapshots()), table

    # the driver killed with SIGKILL mid-compaction (its own, at that point: tests/harness/killed_land.py): the
    # compaction's data and delete files, manifests and manifest list written, the table's metadata not; the next
    # run removes them (orphans, land.iceberg_orphan_age 0) and lands every change once
    for n in range(8, 12):
        _round(conn, rnd, n)
        run_daemon(server, kafka, prefix)
    before = committed_batches(checkpoint)
    proc = subprocess.Popen([sys.executable, "-m", "tests.harness.killed_land", "iceberg-compaction",
                             *cmd[len(BINLAKE):], *_POSITIONS, "--max-offsets-per-trigger", "1", "--trigger",
                             "available-now"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    assert proc.wait(timeout=600) == -signal.SIGKILL  # a compaction fell due and was killed
    with contextlib.suppress(ProcessLookupError):
        kill_group(proc)  # (its JVM)
    orphans = {p for (ns, name), meta in metadata_locations(lake).items() if ns == db
               for p in on_disk(lake / db / name) - named(meta, local_path)}
    assert {p.suffix for p in orphans} >= {".avro", ".parquet"}, orphans  # named by no metadata
    # a job looks for a table's orphans when it first loads it: the next run lands a change of every table (the
    # killed run may have landed the last changes of the table whose compaction it was killed in)
    _round(conn, rnd, 12)
    run_daemon(server, kafka, prefix)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BINLAKE_LAND_ICEBERG_ORPHAN_AGE", "0")
        assert run_land(kafka, prefix, lake, *_POSITIONS) == 0
    assert committed_batches(checkpoint) > before
    assert not any(p.exists() for p in orphans), [p for p in orphans if p.exists()]
    _assert_mirrors(spark, lake, conn, db)

    # quiet: a job that lands a few updates (deleted by position, no compaction due: --compact-files 1000, a few
    # rows of a file) and then has nothing to land compacts each table whole once it is quiet for
    # land.quiet_compaction (1 s here): no delete file left, no two small files, the same rows
    def deletes() -> dict[str, int]:
        tasks = {t: list(catalog(lake).load_table((db, t)).scan().plan_files()) for t in _TABLES}
        return {t: sum(len(task.delete_files) for task in found) for t, found in tasks.items()}

    with conn.cursor() as cur:
        cur.execute("SELECT id FROM t ORDER BY id")
        for k in rnd.sample([r[0] for r in cur.fetchall()], 3):
            cur.execute("UPDATE t SET v = v + 1 WHERE id = %s", (k,))
    conn.commit()
    run_daemon(server, kafka, prefix)
    known = {s.snapshot_id for s in catalog(lake).load_table((db, "t")).snapshots()}
    quiet = ["--format", "iceberg", "--deletion-vectors", "always", "--compact-files", "1000", "--trigger", "1s"]
    proc = subprocess.Popen([*cmd, *quiet], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**env, "BINLAKE_LAND_QUIET_COMPACTION": "1s"})
    try:
        deadline = time.monotonic() + 300
        while not landed_everything(kafka, prefix, checkpoint) or any(deletes().values()):
            assert proc.poll() is None and time.monotonic() < deadline, deletes()
            time.sleep(1)
    finally:
        kill_group(proc)
    _assert_mirrors(spark, lake, conn, db)
    added = [int(s.summary.get("added-position-delete-files") or 0)
             for s in catalog(lake).load_table((db, "t")).snapshots() if s.snapshot_id not in known and s.summary]
    assert sum(added) >= 1, added  # the updates were deleted by position; the quiet compactions left none
    for table in _TABLES:
        mirror = catalog(lake).load_table((db, table))
        files = mirror.inspect.files().to_pylist()
        assert len([f for f in files if f["record_count"] < 1000]) <= 1, (table, len(files))
