"""Source workloads beyond the type zoo, and the checks that their lake equals the server."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tests.harness.binlogs import verbose_counts
from tests.harness.delta_rs import delta_rs_rows
from tests.harness.land import assert_change_log, plain_rows


def mixed_workload_tables(conn) -> None:
    """The mixed workload's tables: acct, ledger (a composite key), nopk (no key)."""
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE acct (id INT PRIMARY KEY, owner VARCHAR(20), balance DECIMAL(12,2))")
        cur.execute("CREATE TABLE ledger (a INT, b VARCHAR(5), amount BIGINT, PRIMARY KEY (a, b))")
        cur.execute("CREATE TABLE nopk (x INT, y VARCHAR(10))")


def mixed_workload(conn, tables: bool = True) -> None:
    """Beyond the zoo: multi-row and multi-table transactions, key updates, deletes, a table without a key."""
    if tables:
        mixed_workload_tables(conn)
    with conn.cursor() as cur:
        conn.begin()
        cur.execute("INSERT INTO acct VALUES " + ", ".join(f"({i}, 'o{i}', {i}.50)" for i in range(1, 201)))
        cur.execute("INSERT INTO ledger VALUES " + ", ".join(f"({i}, 'k{i % 3}', {i * 7})" for i in range(100)))
        cur.execute("INSERT INTO nopk VALUES (1, 'a'), (1, 'a'), (2, 'b')")
        conn.commit()
        for i in range(1, 60):  # single-row transactions across two tables
            conn.begin()
            cur.execute("UPDATE acct SET balance = balance - 1 WHERE id = %s", (i,))
            cur.execute("INSERT INTO ledger VALUES (%s, 'tx', -1)", (1000 + i,))
            conn.commit()
        cur.execute("UPDATE acct SET id = id + 1000 WHERE id <= 20")  # key moves, many rows
        cur.execute("UPDATE acct SET id = 5000 WHERE id = 1001")
        cur.execute("UPDATE acct SET id = 1001 WHERE id = 1002")  # a key freed and reused in one batch
        cur.execute("UPDATE ledger SET b = 'z' WHERE a < 10")  # composite key moves
        cur.execute("DELETE FROM acct WHERE id BETWEEN 100 AND 150")
        cur.execute("INSERT INTO acct VALUES (120, 'again', 0)")  # deleted key re-inserted
        cur.execute("DELETE FROM ledger WHERE amount > 500")
        cur.execute("UPDATE nopk SET y = 'c' WHERE x = 1")
        cur.execute("DELETE FROM nopk WHERE x = 2")


def kill_workload(server, db: str):
    """Two tables, 600 transactions of inserts, updates (a key moved too) and deletes; the connection."""
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(50), n BIGINT)")
        cur.execute("CREATE TABLE b (id INT PRIMARY KEY, n BIGINT)")
        for i in range(600):
            conn.begin()
            cur.execute("INSERT INTO a VALUES (%s, %s, %s)", (i, f"v{i}", i))
            if i % 3 == 0:
                cur.execute("INSERT INTO b VALUES (%s, %s)", (i, i * i))
            if i % 7 == 0 and i:
                cur.execute("UPDATE a SET n = n + 1, v = 'upd' WHERE id = %s", (i - 1,))
            if i % 11 == 0 and i:
                cur.execute("DELETE FROM b WHERE id = %s", (i - 3,))
            if i % 13 == 0 and i:
                cur.execute("UPDATE a SET id = id + 100000 WHERE id = %s", (i - 2,))
            conn.commit()
    return conn


def assert_kill_workload_landed(spark, lake: Path, server, conn, db: str) -> None:
    """Mirrors equal the server's SELECT, read by Spark and by delta-rs; the change logs hold mariadb-binlog
    --verbose's row changes, once."""
    for table, key in (("a", "id"), ("b", "id")):
        df = spark.read.format("delta").load(str(lake / db / table))
        mirror = {(r["id"],): {c: r[c] for c in df.columns if not c.startswith("_binlake")} for r in df.collect()}
        assert mirror == plain_rows(conn, table, key), table
        read = delta_rs_rows(lake / db / table).to_pylist()
        assert {(r["id"],): {c: r[c] for c in df.columns if not c.startswith("_binlake")} for r in read} == mirror
    server.flush_logs()
    counts = verbose_counts(server.binlog_files()[:-1], db)
    assert_change_log(spark, lake, db, counts, ["a", "b"])


class Trickle(threading.Thread):
    """Single-row inserts, updates and deletes of ``db.table`` (``id`` INT PRIMARY KEY, ``n`` BIGINT), ~30 a second,
    until ``stop`` is set; ``written``: how many inserts so far."""

    def __init__(self, server, db: str, table: str) -> None:
        super().__init__(daemon=True)
        self.conn = server.connect(db)
        self.table = table
        self.stop = threading.Event()
        self.written = 0

    def run(self) -> None:
        n = 0
        with self.conn.cursor() as cur:
            while not self.stop.is_set():
                n += 1
                cur.execute(f"INSERT INTO `{self.table}` VALUES (%s, %s)", (n, n))
                if n % 3 == 0:
                    cur.execute(f"UPDATE `{self.table}` SET n = n + 1 WHERE id = %s", (n - 1,))
                if n % 5 == 0:
                    cur.execute(f"DELETE FROM `{self.table}` WHERE id = %s", (n - 4,))
                self.conn.commit()
                self.written = n
                time.sleep(0.03)

    def __enter__(self) -> Trickle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.is_alive():
            self.join()
