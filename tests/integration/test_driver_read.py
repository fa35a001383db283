"""A small micro-batch read from Kafka and decoded by the land job's driver itself (source/driver_read.py), without
a Spark job; a batch past the driver's bounds, a query's first batch, and one whose read fails go to Spark's
tasks as before. Proof: the server's SELECT (every mirror, read by Spark) and ``mariadb-binlog --verbose`` (every
change log holds each row change once), after batches of each kind on one checkpoint, with chunked records (rows
larger than a Kafka record) and a column added among them."""

from __future__ import annotations

import re

import pytest

from streaming_job.source import driver_read
from tests.harness.binlogs import verbose_counts
from tests.harness.daemon import run_daemon
from tests.harness.land import assert_change_rows, change_log_rows, mirror_rows, plain_rows, run_land

pytestmark = pytest.mark.integration

DB = "driverread"
TABLES = ("a", "b")
READ_HERE = re.compile(r"batch (\d+): (\d+) records read by the driver \(")
RECORDS_IN = re.compile(r"batch (\d+): (\d+) records in, (\d+) row changes")
NOT_HERE = re.compile(r"batch (\d+): not read by the driver: (.+)")


def _round(conn, step: int) -> None:
    """Inserts (one row of each round larger than a Kafka record: chunks), updates, a delete, in both tables."""
    with conn.cursor() as cur:
        for t in TABLES:
            for i in range(20):
                cur.execute(f"INSERT INTO {t} (id, v, data) VALUES (%s, %s, %s)",
                            (step * 100 + i, f"r{step}ü", bytes([i]) * (50_000 if i == 7 else 10)))
            cur.execute(f"UPDATE {t} SET v = CONCAT(v, '+') WHERE MOD(id, 3) = 0")
            cur.execute(f"DELETE FROM {t} WHERE id = %s", (step * 100 + 1,))


def _land(kafka, lake, capsys) -> str:
    capsys.readouterr()
    assert run_land(kafka, DB, lake) == 0
    return capsys.readouterr().err


def test_small_batches_are_read_by_the_driver_and_others_by_sparks_tasks(make_mariadb, kafka, spark, tmp_path,
                                                                          monkeypatch, capsys) -> None:
    server = make_mariadb()
    server.execute(f"CREATE DATABASE {DB} CHARACTER SET utf8mb4")
    conn = server.connect(DB)
    with conn.cursor() as cur:
        for t in TABLES:
            cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(40), data LONGBLOB)")
    monkeypatch.setenv("BINLAKE_KAFKA_MAX_RECORD_BYTES", "20000")  # the 50,000-byte rows go as chunks
    monkeypatch.setenv("BINLAKE_DEBUG", "1")  # the driver read's lines
    lake = tmp_path / "lake"

    def check() -> None:
        for t in TABLES:
            assert mirror_rows(spark, lake, DB, t)[0] == plain_rows(conn, t, "id"), t

    _round(conn, 0)
    run_daemon(server, kafka, DB)
    said = _land(kafka, lake, capsys)  # the query's first batch: Spark's tasks (no offsets before it to start at)
    assert not READ_HERE.search(said) and RECORDS_IN.search(said), said
    check()

    _round(conn, 1)
    with conn.cursor() as cur:  # a column added between the round's changes
        cur.execute("ALTER TABLE a ADD COLUMN w INT DEFAULT 5")
        cur.execute("INSERT INTO a (id, v, data, w) VALUES (150, 'after', 'x', 9)")
    run_daemon(server, kafka, DB)
    said = _land(kafka, lake, capsys)
    read = READ_HERE.findall(said)
    assert [b for b, _ in read] == ["1"], said
    # the job's line counts the records the driver read (Spark's progress counts none: it read nothing)
    assert [(b, n) for b, n, _ in RECORDS_IN.findall(said)] == read, said
    check()

    _round(conn, 2)  # past the driver's bound in bytes: Spark's tasks read the batch again, from its start
    run_daemon(server, kafka, DB)
    monkeypatch.setattr(driver_read, "DRIVER_READ_BYTES", 30_000)
    said = _land(kafka, lake, capsys)
    assert not READ_HERE.search(said) and NOT_HERE.findall(said) == [("2", "more than 30000 bytes of records")], said
    check()

    _round(conn, 3)  # past its bound in records: not read at all
    run_daemon(server, kafka, DB)
    monkeypatch.setattr(driver_read, "DRIVER_READ_RECORDS", 1)
    said = _land(kafka, lake, capsys)
    assert not READ_HERE.search(said) and not NOT_HERE.search(said) and "batch 3: " in said, said
    check()

    server.flush_logs()
    counts = verbose_counts(server.binlog_files()[:-1], DB)
    for t in TABLES:
        rows = change_log_rows(spark, lake, DB, t)
        assert [r.op for r in rows if r.op not in ("insert", "update", "delete")] == (["alter"] if t == "a" else [])
        assert_change_rows(t, counts, [r for r in rows if r.op != "alter"])
