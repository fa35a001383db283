"""`binlake verify`: rows compared per second, and the load it puts on the source beside a plain SELECT.

For each case ROWSxTABLES (default 50,000 and 200,000 rows in one table, 200,000 rows over 50 and 200
tables): the tables in a fresh database, `binlake run` (with a signal table, chunks from 5,000 rows, doubled
while they read fast) and `binlake land --trigger 1s` running (child processes) on the same 2 CPUs as MariaDB
and Kafka; once the mirrors have the rows:

- a plain `SELECT * FROM t` of each table read to its end by pymysql (unbuffered): the time, and the CPU
  seconds the server's process spent meanwhile (/proc);
- `binlake verify --tables <all of them> --wait`: its time from the request to the summary (every chunk
  read by the daemon between watermarks, published, and compared by the land job with the mirror), and
  the server's CPU seconds meanwhile (its chunk SELECTs by primary key range, the watermark rows and their
  binlog).

With --shape cluster-s3 the land job runs on a Spark standalone cluster with the lake in an S3Proxy bucket
(run_land.py's shape; results in verify_cluster_s3.md), and verify reads its results from the bucket.

    .venv/bin/python bench/run_verify.py [--cases 50000x1,200000x1,200000x50,200000x200] [--shape cluster-s3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from land_shapes import Shape, shape_of
from run_decode import BenchError, _check, _cpu_model, _git_revision, stop_processes
from run_land_tables import bench_stack
from soak import group_rss_mib

from ingester.cli.main import main as binlake
from ingester.devstack.kafka import KafkaBroker
from ingester.devstack.mariadb import MariaDBServer

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "verify.md"
CHUNK = 5000
SNAPSHOT_ROWS = 1_000_000  # tables of this many rows or more: made by the server and snapshotted, not INSERTed


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _server_pid(server: MariaDBServer) -> int:
    (pid,) = [int(p) for p in os.listdir("/proc") if p.isdigit() and _is_server(int(p), server)]
    return pid


def _is_server(pid: int, server: MariaDBServer) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"--defaults-file={server.config_file}".encode() in cmd


def _landed(log: Path) -> int:
    import re

    return sum(int(m.group(1)) for m in re.finditer(r"batch \d+: \d+ records in, (\d+) row changes landed",
                                                     log.read_text(errors="replace")))


def measure(server: MariaDBServer, broker: KafkaBroker, root: Path, n: int, tables: int,
            shape: Shape, keep_logs: Path | None = None) -> dict[str, float]:
    db, prefix = f"vb{n}x{tables}", f"vb{n}x{tables}p{os.getpid()}"
    names = [f"t{t}" for t in range(tables)]
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    for name in names:
        server.execute(f"CREATE TABLE {db}.{name} (id INT PRIMARY KEY, a BIGINT, s VARCHAR(64), d DECIMAL(12,2), "
                       "ts DATETIME(6))")
    snapshot = n // tables >= SNAPSHOT_ROWS
    if snapshot:  # rows made by the server, outside the binlog: the daemon's snapshot reads them
        for name in names:
            _fill(server, db, name, n // tables)
    local, logs = root / f"lake{n}x{tables}", root / f"logs{n}x{tables}"
    lake = shape.lake(local)
    logs.mkdir()
    env = {**os.environ, **shape.env, "BINLAKE_SNAPSHOT_SIGNAL_TABLE": "binlake.signal",
           "BINLAKE_SNAPSHOT_CHUNK_ROWS": str(CHUNK), "BINLAKE_FILTERS_INCLUDE": f"{db}.*,binlake.*"}
    daemon = subprocess.Popen([sys.executable, "-m", "ingester.cli.main", "run", "--source", server.url, "--kafka",
                               broker.bootstrap, "--topic-prefix", prefix, "--server-id", str(800 + n % 97 + tables),
                               *(["--snapshot", "initial"] if snapshot else [])],
                              stdout=subprocess.DEVNULL, stderr=open(logs / "run.log", "wb"), cwd=BENCH_DIR.parent,
                              env=env)
    land_log = logs / "land.log"
    land = subprocess.Popen([sys.executable, "-m", "ingester.cli.main", "land", "--kafka", broker.bootstrap,
                             "--topic-prefix", prefix, "--lake", lake, "--checkpoint", f"{lake}/_cp",
                             "--trigger", "1s", *shape.land_args], stdout=subprocess.DEVNULL,
                            stderr=open(land_log, "wb"), cwd=BENCH_DIR.parent, env=env, start_new_session=True)
    per_table = n // tables
    peak = _Peak(land.pid)
    try:
        loaded = time.monotonic()
        if not snapshot:
            time.sleep(3)  # the daemon streams from the server's position at its start
            with server.connect(db) as conn, conn.cursor() as cur:
                for name in names:
                    for start in range(0, per_table, 5000):
                        cur.executemany(f"INSERT INTO {name} VALUES (%s, %s, %s, %s, NOW(6))",
                                        [(i, i * 7, f"row {i} of the verify bench", i / 4)
                                         for i in range(start, min(per_table, start + 5000))])
                conn.commit()
        deadline = time.monotonic() + 900 + n / 20_000
        while _landed(land_log) < per_table * tables:
            _check(time.monotonic() < deadline and daemon.poll() is None and land.poll() is None,
                   f"the rows did not land; see {logs}")
            time.sleep(0.5)
        landed_s, landed_peak = time.monotonic() - loaded, peak.take()
        time.sleep(3)
        pid = _server_pid(server)
        import pymysql.cursors

        cpu, started = _cpu(pid), time.monotonic()
        rows = 0
        with server.connect(db) as conn, conn.cursor(pymysql.cursors.SSCursor) as cur:
            for name in names:
                cur.execute(f"SELECT * FROM {name}")
                rows += sum(1 for _ in cur)
        select_s, select_cpu = time.monotonic() - started, _cpu(pid) - cpu
        _check(rows == per_table * tables, f"SELECT read {rows} rows, not {per_table * tables}")
        cpu, started = _cpu(pid), time.monotonic()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = binlake(["verify", "--source", server.url, "--signal-table", "binlake.signal", "--tables",
                              ",".join(f"{db}.{name}" for name in names), "--lake", lake,
                              *shape.store_args, "--wait", "--timeout", str(1200 + n / 5_000)])
        verify_s, verify_cpu = time.monotonic() - started, _cpu(pid) - cpu
        verify_peak = peak.take()
        _check(status == 0, f"verify exited {status}; see {logs}")
    finally:
        peak.stop()
        stop_processes([land, daemon], 120)
        if keep_logs is not None:
            shutil.copytree(logs, keep_logs / logs.name, dirs_exist_ok=True)
    return {"rows": rows, "tables": tables, "select_s": select_s, "select_cpu_s": select_cpu, "verify_s": verify_s,
            "verify_cpu_s": verify_cpu, "snapshot": snapshot, "landed_s": landed_s, "landed_peak_mib": landed_peak,
            "verify_peak_mib": verify_peak}


class _Peak:
    """The peak resident memory of a process group (the land job's: its Python driver, its JVM, Spark's Python
    workers), sampled every 0.5 s; ``take`` gives the peak since the last take."""

    def __init__(self, pgid: int) -> None:
        self.pgid, self.peak = pgid, 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.wait(0.5):
            self.peak = max(self.peak, group_rss_mib(self.pgid))

    def take(self) -> float:
        peak, self.peak = self.peak, 0.0
        return peak

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def _fill(server: MariaDBServer, db: str, name: str, rows: int) -> None:
    """The table's rows 0 .. rows - 1 as the INSERTs of the small cases have them, made by the server's sequence
    engine in transactions of 1,000,000 rows, outside the binlog."""
    with server.connect(db) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        for first in range(0, rows, 1_000_000):
            cur.execute(f"INSERT INTO {name} SELECT seq, seq * 7, CONCAT('row ', seq, ' of the verify bench'), "
                        f"seq / 4, NOW(6) FROM seq_{first}_to_{min(rows, first + 1_000_000) - 1}")
            conn.commit()


def report(results: list[dict[str, float]], wall: float, shape: str) -> str:
    rows = [f"| {int(r['rows']):,} | {int(r['tables'])} | {r['select_s']:.2f} s ({r['rows'] / r['select_s']:,.0f} "
            f"rows/s) | {r['select_cpu_s']:.2f} s | {r['verify_s']:.1f} s ({r['rows'] / r['verify_s']:,.0f} rows/s) | "
            f"{r['verify_cpu_s']:.2f} s | {r['verify_cpu_s'] / max(r['select_cpu_s'], 0.01):.1f}x | "
            f"{'snapshot' if r['snapshot'] else 'INSERTs'}: {r['landed_s']:.0f} s "
            f"({r['rows'] / r['landed_s']:,.0f} rows/s), {r['landed_peak_mib']:,.0f} MiB | "
            f"{r['verify_peak_mib']:,.0f} MiB |" for r in results]
    growth = []
    one = [r for r in results if r["tables"] == 1]
    if len(one) > 1:
        a, b = one[0], one[-1]
        growth.append(f"One table, from {int(a['rows']):,} to {int(b['rows']):,} rows ({b['rows'] / a['rows']:.0f}x): "
                      f"verify's time grew {b['verify_s'] / a['verify_s']:.1f}x and the server's CPU for it "
                      f"{b['verify_cpu_s'] / max(a['verify_cpu_s'], 0.01):.1f}x.")
    same = [r for r in results if r["rows"] == results[-1]["rows"]]
    if len(same) > 1:
        a, b = same[0], same[-1]
        growth.append(f"{int(a['rows']):,} rows in {int(a['tables'])} -> {int(b['tables'])} tables: verify's time "
                      f"{a['verify_s']:.1f} s -> {b['verify_s']:.1f} s "
                      f"(+{(b['verify_s'] - a['verify_s']) / (b['tables'] - a['tables']) * 1000:.0f} ms per table).")
    where = ("`binlake land --trigger 1s` (Spark local[2], local lake)" if shape == "local" else
             "`binlake land --trigger 1s` on a Spark standalone cluster (a master and a worker of 2 cores: executors"
             " in JVMs of their own) with the lake in an S3Proxy bucket through s3a (verify reads its results"
             " through the store's API)")
    return "\n".join([
        "# binlake verify: rows compared per second, and its load on the source"
        + ("" if shape == "local" else " (cluster + object store)"),
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {_git_revision()}, {_cpu_model()} ({os.cpu_count()} CPUs), "
        f"Python {platform.python_version()}; {wall:.0f} s in all.",
        "",
        "`binlake run` (chunks from 5,000 rows, doubled up to 100,000 while they read fast) and "
        f"{where} run beside MariaDB and Kafka on the same CPUs; each"
        " table has an INT key and four columns (BIGINT, VARCHAR(64), DECIMAL(12,2), DATETIME(6)), the rows spread"
        " evenly over the tables. SELECT: a plain `SELECT * FROM t` of each table read to its end by pymysql."
        " verify: one `binlake verify --tables <all> --wait`, from the request to its summary: every chunk read"
        " by the daemon between two watermarks, published to Kafka, and compared by the land job with the"
        " mirror. Server CPU: the CPU seconds of the mariadbd process meanwhile (/proc). Tables of"
        f" {SNAPSHOT_ROWS:,} rows or more are made by the server (its sequence engine, outside the binlog) and reach"
        " the mirrors through the daemon's initial snapshot (`--snapshot initial`), smaller ones through INSERTs of"
        " 5,000 rows streamed from the binlog; time to land: from the daemon's start (snapshot) or the first INSERT"
        " to the last row landed. Peak RSS: the land job's process group (its Python driver, its JVM, Spark's"
        " Python workers), sampled every 0.5 s.",
        "",
        "| rows | tables | SELECT | server CPU (SELECT) | verify | server CPU (verify) "
        "| verify / SELECT (server CPU) | rows into the mirrors: time to land, land job's peak RSS "
        "| land job's peak RSS during verify |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        *[line for g in growth for line in (g, "")],
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="50000x1,200000x1,200000x50,200000x200",
                        help="ROWSxTABLES,...: rows in all, spread over that many tables")
    parser.add_argument("--shape", choices=("local", "cluster-s3"), default="local",
                        help="local[2] and local disk, or a standalone cluster and an S3-compatible bucket")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--keep-logs", type=Path, help="copy each case's run and land logs here "
                        "(BINLAKE_DEBUG=1: the job's step times)")
    args = parser.parse_args()
    output = args.output or (RESULTS if args.shape == "local" else RESULTS.with_name("verify_cluster_s3.md"))
    started = time.monotonic()
    results = []
    with bench_stack("bl-verify-") as (broker, server, root), shape_of(args.shape) as shape:
        server.execute("CREATE DATABASE binlake")
        os.environ.update(shape.env)  # the store's credentials, for verify's reads in this process (never printed)
        for case in args.cases.split(","):
            n, tables = (int(x) for x in case.split("x"))
            results.append(measure(server, broker, root, n, tables, shape, args.keep_logs))
            print(f"{case}: {results[-1]}", file=sys.stderr, flush=True)
    text = report(results, time.monotonic() - started, args.shape)
    output.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        sys.exit(1)
