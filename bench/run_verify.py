"""`binlake verify`: rows compared per second, and the load it puts on the source beside a plain SELECT.

For each size N (default 50,000 and 200,000 rows): a table of N rows in a fresh database, `binlake run`
(with a signal table, chunks of 5,000 rows) and `binlake land --trigger 1s` running (child processes, Spark
local[2]) on the same 2 CPUs as MariaDB and Kafka; once the mirror has the rows:

- a plain `SELECT * FROM t` read to its end by pymysql (unbuffered): its time, and the CPU seconds the
  server's process spent meanwhile (/proc);
- `binlake verify --tables <t> --wait`: its time from the request to the summary (every chunk read by the
  daemon between watermarks, published, and compared by the land job with the mirror), and the server's
  CPU seconds meanwhile (its chunk SELECTs by primary key range, the watermark rows and their binlog).

    .venv/bin/python bench/run_verify.py [--rows 50000,200000]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from run_decode import BenchError, _check, _cpu_model, _git_revision
from run_land_tables import bench_stack

from ingester.cli.main import main as binlake
from ingester.devstack.kafka import KafkaBroker
from ingester.devstack.mariadb import MariaDBServer

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "verify.md"
CHUNK = 5000


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


def measure(server: MariaDBServer, broker: KafkaBroker, root: Path, n: int) -> dict[str, float]:
    db, prefix = f"vb{n}", f"vb{n}x{os.getpid()}"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a BIGINT, s VARCHAR(64), d DECIMAL(12,2), "
                   "ts DATETIME(6))")
    lake, logs = root / f"lake{n}", root / f"logs{n}"
    logs.mkdir()
    env = {**os.environ, "BINLAKE_SNAPSHOT_SIGNAL_TABLE": "binlake.signal", "BINLAKE_SNAPSHOT_CHUNK_ROWS": str(CHUNK)}
    daemon = subprocess.Popen([sys.executable, "-m", "ingester.cli.main", "run", "--source", server.url, "--kafka",
                               broker.bootstrap, "--topic-prefix", prefix, "--server-id", str(800 + n % 97)],
                              stdout=subprocess.DEVNULL, stderr=open(logs / "run.log", "wb"), cwd=BENCH_DIR.parent,
                              env=env)
    land_log = logs / "land.log"
    land = subprocess.Popen([sys.executable, "-m", "ingester.cli.main", "land", "--kafka", broker.bootstrap,
                             "--topic-prefix", prefix, "--lake", str(lake), "--checkpoint", str(lake / "_cp"),
                             "--trigger", "1s"], stdout=subprocess.DEVNULL, stderr=open(land_log, "wb"),
                            cwd=BENCH_DIR.parent)
    try:
        time.sleep(3)  # the daemon streams from the server's position at its start
        with server.connect(db) as conn, conn.cursor() as cur:
            for start in range(0, n, 5000):
                cur.executemany("INSERT INTO t VALUES (%s, %s, %s, %s, NOW(6))",
                                [(i, i * 7, f"row {i} of the verify bench", i / 4) for i in range(start,
                                                                                                min(n, start + 5000))])
            conn.commit()
        deadline = time.monotonic() + 600
        while _landed(land_log) < n:
            _check(time.monotonic() < deadline and daemon.poll() is None and land.poll() is None,
                   f"the rows did not land; see {logs}")
            time.sleep(0.5)
        time.sleep(3)
        pid = _server_pid(server)
        import pymysql.cursors

        cpu, started = _cpu(pid), time.monotonic()
        with server.connect(db) as conn, conn.cursor(pymysql.cursors.SSCursor) as cur:
            cur.execute("SELECT * FROM t")
            rows = sum(1 for _ in cur)
        select_s, select_cpu = time.monotonic() - started, _cpu(pid) - cpu
        _check(rows == n, f"SELECT read {rows} rows, not {n}")
        cpu, started = _cpu(pid), time.monotonic()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = binlake(["verify", "--source", server.url, "--signal-table", "binlake.signal", "--tables",
                              f"{db}.t", "--lake", str(lake), "--wait", "--timeout", "1200"])
        verify_s, verify_cpu = time.monotonic() - started, _cpu(pid) - cpu
        _check(status == 0, f"verify exited {status}; see {logs}")
    finally:
        for proc in (land, daemon):
            proc.send_signal(signal.SIGTERM)
        for proc in (land, daemon):
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
    return {"rows": n, "select_s": select_s, "select_cpu_s": select_cpu, "verify_s": verify_s,
            "verify_cpu_s": verify_cpu}


def report(results: list[dict[str, float]], wall: float) -> str:
    rows = [f"| {int(r['rows']):,} | {r['select_s']:.2f} s ({r['rows'] / r['select_s']:,.0f} rows/s) | "
            f"{r['select_cpu_s']:.2f} s | {r['verify_s']:.1f} s ({r['rows'] / r['verify_s']:,.0f} rows/s) | "
            f"{r['verify_cpu_s']:.2f} s | {r['verify_cpu_s'] / max(r['select_cpu_s'], 0.01):.1f}x |" for r in results]
    growth = ""
    if len(results) > 1:
        a, b = results[0], results[-1]
        growth = (f"From {int(a['rows']):,} to {int(b['rows']):,} rows ({b['rows'] / a['rows']:.0f}x), verify's time "
                  f"grew {b['verify_s'] / a['verify_s']:.1f}x and the server's CPU for it "
                  f"{b['verify_cpu_s'] / max(a['verify_cpu_s'], 0.01):.1f}x.")
    return "\n".join([
        "# binlake verify: rows compared per second, and its load on the source",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {_git_revision()}, {_cpu_model()} ({os.cpu_count()} CPUs), "
        f"Python {platform.python_version()}; {wall:.0f} s in all.",
        "",
        "`binlake run` (chunks of 5,000 rows) and `binlake land --trigger 1s` (Spark local[2], local lake) run"
        " beside MariaDB and Kafka on the same CPUs; the table has an INT key and four columns (BIGINT,"
        " VARCHAR(64), DECIMAL(12,2), DATETIME(6)). SELECT: a plain `SELECT * FROM t` read to its end by"
        " pymysql. verify: `binlake verify --wait`, from the request to its summary: every chunk read by the"
        " daemon between two watermarks, published to Kafka, and compared by the land job with the mirror."
        " Server CPU: the CPU seconds of the mariadbd process meanwhile (/proc).",
        "",
        "| rows | SELECT | server CPU (SELECT) | verify | server CPU (verify) | verify / SELECT (server CPU) |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        growth,
        "",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="50000,200000")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    started = time.monotonic()
    results = []
    with bench_stack("bl-verify-") as (broker, server, root):
        server.execute("CREATE DATABASE binlake")
        for n in (int(x) for x in args.rows.split(",")):
            results.append(measure(server, broker, root, n))
            print(f"{n} rows: {results[-1]}", file=sys.stderr, flush=True)
    text = report(results, time.monotonic() - started)
    args.output.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        sys.exit(1)
