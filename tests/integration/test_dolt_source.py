"""Dolt as the source: an independent implementation of MySQL's replication protocol (Go, go-mysql-server)
that serves COM_BINLOG_DUMP_GTID with MySQL 8 events. Nothing of MySQL's or MariaDB's code is involved,
so the daemon is checked against a server that was written without looking at ours or theirs.

Dolt is built from the Go module proxy by ``scripts/fetch-dolt`` (about ten minutes on two CPUs, so not part
of the default set-up); this module runs whenever the binary is in the cache or on PATH.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from ingester.cli.consume import committed_events
from ingester.codec import events as E
from ingester.daemon.kafka_io import read_checkpoint
from ingester.devstack.mariadb import free_tcp_port
from ingester.maven import default_cache_dir
from ingester.records.gtid import MysqlGtidSet

pytestmark = pytest.mark.integration

_VERSION = "v0.40.5-0.20260424001550-011a27ff4303"  # as scripts/fetch-dolt builds it
_CACHED = default_cache_dir() / "dolt" / _VERSION / "dolt"
DOLT = str(_CACHED) if _CACHED.exists() else shutil.which("dolt")
if DOLT is None:
    pytest.skip("Dolt is not built: run scripts/fetch-dolt", allow_module_level=True)


class Dolt:
    def __init__(self, root: Path) -> None:
        self.port = free_tcp_port()
        self.url = f"mysql://root@127.0.0.1:{self.port}?tls=disabled"
        data = root / "data"
        data.mkdir()
        (root / "config.yaml").write_text(
            f"log_level: warning\nlistener:\n  host: 127.0.0.1\n  port: {self.port}\ndata_dir: {data}\n"
            "system_variables:\n  log_bin: 1\n  gtid_mode: 'ON'\n  enforce_gtid_consistency: 'ON'\n"
            "  server_id: 42\n  binlog_checksum: CRC32\n")
        env = os.environ | {"DOLT_ROOT_PATH": str(root)}
        for key, value in (("user.name", "binlake"), ("user.email", "binlake@example.com")):
            subprocess.run([DOLT, "config", "--global", "--add", key, value], env=env, check=True,
                           capture_output=True)
        self.log = open(root / "dolt.log", "wb")  # closed in stop()
        self.proc = subprocess.Popen([DOLT, "sql-server", "--config", str(root / "config.yaml")], cwd=root,
                                     env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.connect().close()
                return
            except pymysql.err.OperationalError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"dolt sql-server did not start: {(root / 'dolt.log').read_text()}") from None
                time.sleep(0.2)

    def connect(self) -> pymysql.Connection:
        return pymysql.connect(host="127.0.0.1", port=self.port, user="root", autocommit=True)

    def query(self, sql: str) -> list[tuple]:
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


@pytest.fixture
def dolt(tmp_path) -> Iterator[Dolt]:
    server = Dolt(tmp_path)
    try:
        yield server
    finally:
        server.stop()


def _run_until_caught_up(dolt: Dolt, kafka, prefix: str) -> None:
    """The daemon by GTID (Dolt serves no file/position dumps and no non-blocking mode) until its committed
    checkpoint holds every GTID the server executed; then SIGTERM."""
    executed = MysqlGtidSet.parse(dolt.query("SELECT @@gtid_executed")[0][0])
    # Replays Dolt's binlog from its start: a schema history (captured at the first start, where streaming
    # would then begin) is off, so columns are @1, @2...
    env = os.environ | {"BINLAKE_SOURCE_RESUME": "gtid", "BINLAKE_SCHEMA_HISTORY": "never", "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([sys.executable, "-m", "ingester.cli.main", "run", "--source", dolt.url, "--kafka",
                             kafka.bootstrap, "--topic-prefix", prefix, "--server-id", "7301"], env=env,
                            stderr=subprocess.PIPE)
    caught_up = False
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            checkpoint = read_checkpoint(kafka.bootstrap, prefix, f"{prefix}.127.0.0.1:{dolt.port}")
            if checkpoint and str(MysqlGtidSet.parse(checkpoint["gtid_set"])) == str(executed):
                caught_up = True
                break
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert caught_up and proc.returncode == 0, f"not caught up with {executed}: {err.decode()[-3000:]}"


def _replay(kafka, prefix: str) -> tuple[dict[int, tuple], list[tuple[int, int]]]:
    """Rows by id after applying every published change in order (Dolt logs no column names: @1, @2...),
    and the (sequence, row id) of every change, to find duplicates."""
    rows: dict[int, tuple] = {}
    seen = []
    for ev in committed_events(kafka.bootstrap, prefix):
        if not isinstance(ev, E.RowsEvent):
            continue
        for change in ev.rows:
            if "before" in change:
                rows.pop(change["before"]["@1"], None)
            if "after" in change:
                image = change["after"]
                rows[image["@1"]] = tuple(str(image[f"@{i}"]) for i in range(1, len(image) + 1))
            seen.append((ev.position, (change.get("after") or change["before"])["@1"]))
    return rows, seen


def test_dolt_source_through_kafka_by_gtid(dolt, kafka) -> None:
    dolt.query("CREATE DATABASE shop")
    dolt.query("CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2), "
               "qty BIGINT, added DATETIME(3))")
    with dolt.connect() as conn, conn.cursor() as cur:
        for i in range(1, 41):
            cur.execute("INSERT INTO shop.items VALUES (%s, %s, %s, %s, %s)",
                        (i, f"item {i} ü", f"{i * 1.25:.2f}", -i * 10**12, f"2026-11-22 10:00:{i:02d}.125"))
        cur.execute("UPDATE shop.items SET price = price * 2 WHERE id % 3 = 0")
        cur.execute("DELETE FROM shop.items WHERE id % 7 = 0")
    _run_until_caught_up(dolt, kafka, "dolt")

    with dolt.connect() as conn, conn.cursor() as cur:  # more changes: the restart resumes by GTID
        cur.execute("INSERT INTO shop.items VALUES (100, 'late', 9.99, 1, '2026-11-22 11:00:00')")
        cur.execute("UPDATE shop.items SET qty = 0 WHERE id = 1")
    _run_until_caught_up(dolt, kafka, "dolt")

    rows, seen = _replay(kafka, "dolt")
    expected = {r[0]: tuple(str(v) for v in r) for r in
                dolt.query("SELECT id, name, price, qty, DATE_FORMAT(added, '%Y-%m-%d %H:%i:%s.%f') FROM shop.items")}
    # DATETIME(3) is decoded with its 3 digits; the server's %f prints 6.
    expected = {k: (*v[:4], v[4][:-3]) for k, v in expected.items()}
    assert rows == expected
    assert len(seen) == len(set(seen)), "a change was published twice"
