"""`binlake verify` in tests: the tables ``vf.t`` (an integer key) and ``vf.k`` (a text key under a collation)
and a daemon that verifies them in small chunks, a steady write workload beside a verify run, ``binlake verify
--wait`` run while the land job lands batch after batch in the test's process, and what a clean run shows."""

from __future__ import annotations

import contextlib
import io
import os
import random
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from ingester.cli.main import main
from tests.harness.daemon import BINLAKE
from tests.harness.land import run_land

ROWS = 2000  # vf.t's rows (ids 1..ROWS)
KEYS = 300  # vf.k's
CHUNK = 150  # the daemon's snapshot_chunk_rows


def verified_source(make_mariadb) -> Any:
    """A server with the databases ``vf`` (``t`` and ``k``, their rows) and ``binlake`` (the signal table's)."""
    server = make_mariadb()
    server.execute("CREATE DATABASE vf CHARACTER SET utf8mb4")
    server.execute("CREATE DATABASE binlake")
    server.execute("CREATE TABLE vf.t (id INT PRIMARY KEY, v INT, s VARCHAR(40), d DECIMAL(10,3), "
                   "ts DATETIME(6), b VARBINARY(8))")
    server.execute("CREATE TABLE vf.k (a VARCHAR(10), n INT, v INT, PRIMARY KEY (a, n)) COLLATE utf8mb4_general_ci")
    conn = server.connect("vf")
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO t VALUES (%s, %s, %s, %s, NOW(6), %s)",
                        [(i, i * 3, f"row {i} é", i / 8, os.urandom(4)) for i in range(1, ROWS + 1)])
        cur.executemany("INSERT INTO k VALUES (%s, %s, %s)", [(f"K{i % 7}", i, i) for i in range(KEYS)])
    conn.commit()
    return server


def verifying_daemon(server, kafka, prefix: str, server_id: int) -> subprocess.Popen:
    """`binlake run` as a process with the signal table ``binlake.signal`` and chunks of CHUNK rows."""
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "BINLAKE_SNAPSHOT_SIGNAL_TABLE": "binlake.signal",
           "BINLAKE_SNAPSHOT_CHUNK_ROWS": str(CHUNK), "BINLAKE_SNAPSHOT_CHUNK_GROWTH": "1"}  # many windows
    return subprocess.Popen([*BINLAKE, "run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix",
                             prefix, "--server-id", str(server_id)], env=env, stderr=subprocess.DEVNULL)


def assert_clean(status: int, results: list[dict[str, Any]]) -> None:
    """A run of vf.t and vf.k under Writes: exit 0, every chunk of both tables, rows changed meanwhile left out,
    vf.t's range cut both ways, vf.k's rows looked up by key."""
    assert status == 0, [r for r in results if not r["match"]]
    assert {r["table"] for r in results} == {"vf.t", "vf.k"}
    assert len([r for r in results if r["table"] == "vf.t"]) >= ROWS // CHUNK
    assert sum(r["excluded"] for r in results) > 0  # rows changed while compared: left out, not reported
    assert all(r["exact"] for r in results if r["table"] == "vf.t")
    assert not any(r["exact"] for r in results if r["table"] == "vf.k")  # text keys under a collation


class Writes(threading.Thread):
    """Single-row changes to rows the tests never tamper with (t: ids above 1000, rows inserted from
    ``rows + 1``; k: n above 100), ~100/s."""

    def __init__(self, server, rows: int) -> None:
        super().__init__(daemon=True)
        self.conn = server.connect("vf")
        self.conn.autocommit(True)
        self.stop = threading.Event()
        self.changes = 0
        self.next_id = rows + 1

    def run(self) -> None:
        rnd = random.Random(7)
        with self.conn.cursor() as cur:
            while not self.stop.is_set():
                i, op = rnd.randint(1001, self.next_id), rnd.random()
                if op < 0.4:
                    cur.execute("UPDATE t SET v = v + 1, s = CONCAT(s, '+') WHERE id = %s", (i,))
                elif op < 0.6:
                    cur.execute("DELETE FROM t WHERE id = %s", (i,))
                elif op < 0.8:
                    cur.execute("INSERT INTO t VALUES (%s, %s, %s, %s, NOW(6), %s)",
                                (self.next_id, i, f"new{i}", i / 8, os.urandom(4)))
                    self.next_id += 1
                else:
                    cur.execute("UPDATE k SET v = v + 1 WHERE a = %s AND n = %s", (f"K{i % 7}", 100 + i % 200))
                self.changes += 1
                time.sleep(0.01)


def verify_wait(server, lake: Path, kafka, prefix: str, tables: str, config: Path | None = None,
                *lake_options: str) -> tuple[int, str]:
    """``binlake verify --wait`` in a thread while the land job runs batch after batch here; its exit status
    and the run id. ``lake_options``: the lake's format options (``--format iceberg``), given to both."""
    out: list[int] = []
    printed: list[str] = []

    def operator() -> None:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            out.append(main(["verify", *(["--config", str(config)] if config else []), "--source", server.url,
                             "--signal-table", "binlake.signal", "--tables", tables, "--lake", str(lake),
                             *lake_options, "--wait", "--timeout", "240"]))
        printed.append(buffer.getvalue())

    thread = threading.Thread(target=operator, daemon=True)
    thread.start()
    while thread.is_alive():
        assert run_land(kafka, prefix, lake, *lake_options) == 0
    thread.join()
    run = printed[0].split()[2]
    return out[0], run
