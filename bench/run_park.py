"""How long the other tables wait while one table's mirror is rewritten (docs/LAND.md, "Parked tables").

A table ``big`` of ``--rows`` rows (id, two latin1 VARCHAR columns, a DECIMAL(10,4)) and a table ``o`` written by a
steady trickle (one single-row INSERT every 50 ms); `binlake run` and `binlake land --trigger 1s` (Spark local[2],
local Delta lake) running beside MariaDB and Kafka on the same CPUs. Once the trickle has run 5 s, ``ALTER TABLE big
MODIFY a VARBINARY(40), MODIFY b VARBINARY(40), MODIFY d DECIMAL(10,2)`` (latin1 text to bytes: the rewrite's per-value
path; a DECIMAL scale) and one INSERT into ``big`` after it; the trickle goes on 20 s after the rewrite's commit.

Each mode is a fresh database, daemon and land job: ``in the batch`` (land.park_rows -1: the rewrite runs in its
micro-batch, as before parking) and ``parked`` (land.park_rows at its default, 100,000: the rewrite runs beside the
batches). Measured:

- the other table's wait: for each of ``o``'s rows, from its commit on the server to the Delta commit of ``o``'s change
  log that holds it (the commit's own timestamp); the median and the largest over the rows committed from the ALTER
  to the rewrite's commit, and the median of the 5 s before the ALTER (steady state);
- the rewrite: from the ALTER's end on the server to the mirror's commit of the rewrite;
- ``big``'s row after the ALTER: from its commit to the commit that landed it.

    .venv/bin/python bench/run_park.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pyarrow.parquet as pq
from run_decode import BenchError, _cpu_model, _git_revision
from run_land_tables import BENCH_DIR, _stop, bench_stack

from ingester.devstack.mariadb import MariaDBServer
from streaming_job.lake.delta_log import TableLog
from streaming_job.lake.files import LakeFiles

RESULTS = BENCH_DIR / "results" / "park.md"
MODES = {"in the batch": "-1", "parked": "100000"}  # land.park_rows: -1 none; the default (a rewrite of more rows)


def _commits(path: Path) -> list[tuple[float, dict, list[str]]]:
    """A Delta table's commits: (timestamp s, its metaData configuration or {}, files added)."""
    out = []
    for entry in sorted((path / "_delta_log").glob("*.json")):
        actions = [orjson.loads(line) for line in entry.read_text().splitlines()]
        ts = next(a["commitInfo"]["timestamp"] for a in actions if "commitInfo" in a) / 1000
        config = next((a["metaData"].get("configuration") or {} for a in actions if "metaData" in a), {})
        out.append((ts, config, [a["add"]["path"] for a in actions if "add" in a]))
    return out


def _landed(path: Path, key: str = "id") -> dict[int, float]:
    """When each key's first change landed: the timestamp of the change log commit that added it."""
    found: dict[int, float] = {}
    if not (path / "_delta_log").is_dir():
        return found
    for ts, _, files in _commits(path):
        for f in files:
            rows = pq.read_table(path / f, columns=["after"]).column("after").to_pylist()
            for r in rows:
                if r is not None:
                    found.setdefault(r[key], ts)
    return found


def _mirror_rows(path: Path) -> int:
    return TableLog.read(str(path), LakeFiles.on_disk()).rows()


class Trickle(threading.Thread):
    def __init__(self, server: MariaDBServer, db: str) -> None:
        super().__init__(daemon=True)
        self.conn = server.connect(db)
        self.stop = threading.Event()
        self.committed: dict[int, float] = {}

    def run(self) -> None:
        n = 0
        with self.conn.cursor() as cur:
            while not self.stop.is_set():
                n += 1
                cur.execute("INSERT INTO o VALUES (%s, %s)", (n, n))
                self.committed[n] = time.time()
                time.sleep(0.05)


def measure(server: MariaDBServer, bootstrap: str, root: Path, rows: int, mode: str) -> dict[str, object]:
    db = f"park{MODES[mode].replace('-', 'm')}"
    prefix = f"{db}x{os.getpid()}"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    with server.connect(db) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE big (id INT PRIMARY KEY, a VARCHAR(24) CHARACTER SET latin1, "
                    "b VARCHAR(24) CHARACTER SET latin1, d DECIMAL(10,4))")
        cur.execute("CREATE TABLE o (id INT PRIMARY KEY, n BIGINT)")
    lake, logs = root / f"lake-{db}", root / f"logs-{db}"
    logs.mkdir()
    env = {**os.environ, "BINLAKE_LAND_PARK_ROWS": MODES[mode]}
    daemon = subprocess.Popen([sys.executable, "-m", "ingester.cli.main", "run", "--source", server.url, "--kafka",
                               bootstrap, "--topic-prefix", prefix, "--server-id", str(700 + len(db))],
                              stdout=subprocess.DEVNULL, stderr=open(logs / "run.log", "wb"), cwd=BENCH_DIR.parent)
    land = subprocess.Popen([sys.executable, "-m", "ingester.cli.main", "land", "--kafka", bootstrap, "--topic-prefix",
                             prefix, "--lake", str(lake), "--checkpoint", str(lake / "_cp"), "--trigger", "1s"],
                            stdout=subprocess.DEVNULL, stderr=open(logs / "land.log", "wb"), cwd=BENCH_DIR.parent,
                            env=env)
    procs = [daemon, land]
    trickle = Trickle(server, db)
    try:
        time.sleep(3)  # the daemon streams from the server's position at its start
        with server.connect(db) as conn, conn.cursor() as cur:
            cur.execute(f"INSERT INTO big SELECT seq, CONCAT('caf\u00e9-', seq), CONCAT('\u00fc', seq), seq / 10000 "
                        f"FROM seq_1_to_{rows}")
        deadline = time.monotonic() + 900
        while _mirror_rows(lake / db / "big") < rows:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise BenchError(f"the table's rows did not land; see {logs}")
            time.sleep(0.5)
        trickle.start()
        time.sleep(5)
        with server.connect(db) as conn, conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")
            started = time.time()
            cur.execute("ALTER TABLE big MODIFY a VARBINARY(40), MODIFY b VARBINARY(40), MODIFY d DECIMAL(10,2)")
            altered = time.time()
            cur.execute("INSERT INTO big VALUES (0, 0x00ff, 'x', 1.5)")
            big_row = time.time()
        while True:  # the rewrite's commit: the mirror's one commit that records a statement's marker
            done = [ts for ts, config, _ in _commits(lake / db / "big") if "binlake.statement" in config]
            if done:
                rewritten = min(done)
                break
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise BenchError(f"the rewrite did not commit; see {logs}")
            time.sleep(0.2)
        time.sleep(max(0.0, rewritten + 20 - time.time()))
        trickle.stop.set()
        trickle.join()
        last = max(trickle.committed)
        while True:
            landed = _landed(lake / db / "o__changes")
            big = _landed(lake / db / "big__changes__v2")
            if last in landed and 0 in big:
                break
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise BenchError(f"the trickle did not land; see {logs}")
            time.sleep(0.5)
    finally:
        trickle.stop.set()
        _stop(procs)
    waits = {k: landed[k] - t for k, t in trickle.committed.items()}
    steady = [w for k, w in waits.items() if started - 5 <= trickle.committed[k] < started]
    during = [w for k, w in waits.items() if started <= trickle.committed[k] <= rewritten]
    after = [w for k, w in waits.items() if rewritten < trickle.committed[k]]
    return {"mode": mode, "rows": rows, "server_alter_s": altered - started, "rewrite_s": rewritten - altered,
            "steady_p50_s": statistics.median(steady), "during_p50_s": statistics.median(during),
            "during_max_s": max(during), "after_max_s": max(after), "big_row_s": big[0] - big_row}


def report(results: list[dict[str, object]], wall: float) -> str:
    lines = [f"| {r['mode']} | {r['rows']:,} | {r['server_alter_s']:.1f} s | {r['rewrite_s']:.1f} s | "
             f"{r['steady_p50_s']:.2f} s | {r['during_p50_s']:.2f} s | {r['during_max_s']:.2f} s | "
             f"{r['after_max_s']:.2f} s | {r['big_row_s']:.1f} s |" for r in results]
    return "\n".join([
        "# The other tables while one table's mirror is rewritten",
        "",
        f"`bench/run_park.py` run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {_git_revision()}, {_cpu_model()} "
        f"({os.cpu_count()} CPUs), Python {platform.python_version()}; {wall:.0f} s in all. `binlake run` and "
        "`binlake land --trigger 1s` (Spark local[2], local Delta lake) beside MariaDB and Kafka on the same CPUs; "
        "a trickle of single-row INSERTs into `o` (every 50 ms) while `big` gets an ALTER that converts two latin1 "
        "columns to bytes (value by value) and a DECIMAL scale (docs/LAND.md, \"Parked tables\").",
        "",
        "Rewrite: from the ALTER's end on the server to the mirror's rewrite commit. The other table's wait: from a "
        "row's commit on the server to the commit of `o`'s change log that holds it (steady: the 5 s before the "
        "ALTER; during: rows committed from the ALTER to the rewrite's commit; after: the largest of the rows after "
        "it). `big`'s row: the INSERT right after the ALTER, from its commit to its landing.",
        "",
        "| mode | rows | server ALTER | rewrite | steady wait (median) | wait during (median) | wait during (max) "
        "| wait after (max) | big's row |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *lines,
        "",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    started = time.monotonic()
    results = []
    with bench_stack("bl-park-") as (broker, server, root):
        for mode in args.modes.split(","):
            results.append(measure(server, broker.bootstrap, root, args.rows, mode))
            print(f"{mode}: {results[-1]}", file=sys.stderr, flush=True)
    text = report(results, time.monotonic() - started)
    args.output.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
