"""Snapshot throughput: `binlake run --snapshot initial` into Kafka (transactional, acks=all), and on into
Delta Lake (`binlake land --trigger available-now`, Spark local[2]), against a plain `SELECT *` of the same
table through pymysql (unbuffered cursor, default conversions).

The snapshot time runs from opening the consistent snapshot to the last Kafka commit (the daemon's
``snapshot_ms``); the SELECT time from the query to the last row. Into Delta: the snapshot's time (median)
plus the micro-batch time (the job's batch lines: decode, change log, mirror) of a running land job (a Spark
application that landed the topics three times already, as a long-running `binlake land` would have; the
median of three passes), and, beside
it, of a fresh `binlake land --trigger available-now` process and that process's wall time (JVM and Spark
start included). Median of --repeat runs for the SELECT and the snapshot (the land jobs run once, on the
first run's topics); results go to bench/results/snapshot.md. Private MariaDB and Kafka, started here.
Goal: within 2x of the SELECT.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pymysql
from run_land import PASS_MARK, WARM_UP_PASSES, _batches  # its --land-in-one-application child lands here too

from ingester.config import load_config
from ingester.daemon.runner import Runner
from ingester.devstack.kafka import KafkaBroker
from ingester.devstack.mariadb import MariaDBServer

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "snapshot.md"
TABLE = ("CREATE TABLE bench.t (id BIGINT PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL,"
         " price DECIMAL(10,2), created DATETIME(6), note VARCHAR(255), KEY (k))")


def load(server: MariaDBServer, rows: int) -> None:
    """A sysbench-like table, plus DECIMAL, DATETIME and a nullable VARCHAR."""
    server.execute("CREATE DATABASE bench CHARACTER SET utf8mb4")
    server.execute(TABLE)
    conn = server.connect("bench")
    with conn.cursor() as cur:
        for start in range(0, rows, 10_000):
            batch = [(i, i * 7 % 100_000, f"{i:011d}-" * 10, f"pad{i:056d}", f"{i % 100_000}.{i % 100:02d}",
                      f"2024-01-{i % 28 + 1:02d} 12:34:56.{i % 1_000_000:06d}", None if i % 3 else f"note {i}")
                     for i in range(start, min(rows, start + 10_000))]
            cur.executemany("INSERT INTO t VALUES (%s, %s, %s, %s, %s, %s, %s)", batch)
            conn.commit()
    conn.close()


def plain_select(server: MariaDBServer) -> float:
    conn = pymysql.connect(host=server.host, port=server.port, user=server.user, password=server.password,
                           charset="utf8mb4", cursorclass=pymysql.cursors.SSCursor)
    try:
        started = time.perf_counter()
        with conn.cursor() as cur:
            cur.execute("SELECT * FROM bench.t")
            for _ in cur:
                pass
        return time.perf_counter() - started
    finally:
        conn.close()


def snapshot(server: MariaDBServer, kafka: KafkaBroker, prefix: str) -> tuple[float, int]:
    cfg = load_config(environ={}, overrides={
        "source": {"url": server.url, "server_id": 4747}, "exit_at_end": True, "snapshot": "initial",
        "filters": {"include": ["bench.*"]}, "kafka": {"bootstrap": kafka.bootstrap, "topic_prefix": prefix}})
    stats = Runner(cfg).run()
    return stats["snapshot_ms"] / 1000, stats["snapshot_rows"]


def land(kafka: KafkaBroker, prefix: str, rows: int) -> tuple[list[float], float, float]:
    """The snapshot's topics landed by a running job (run_land.land_in_one_application: a Spark application
    that has landed them ``WARM_UP_PASSES`` times already lands them again into a new lake, three times) and
    by a fresh `binlake land --trigger available-now` process: (the running job's micro-batch seconds of each
    pass, the fresh process's, the fresh process's wall seconds), after checking that each mirror holds every
    row."""

    with tempfile.TemporaryDirectory(prefix="bl-snapland-") as root:
        passes = [Path(root) / f"running{n}" for n in range(1, 4)]
        lakes = [*(Path(root) / f"warm-up{n}" for n in range(WARM_UP_PASSES)), *passes, Path(root) / "fresh"]
        proc = subprocess.run([sys.executable, str(BENCH_DIR / "run_land.py"), "--land-in-one-application",
                               kafka.bootstrap, prefix, ",".join(str(lake) for lake in lakes[:-1])],
                              capture_output=True, text=True, cwd=BENCH_DIR.parent, timeout=3600)
        if proc.returncode != 0:
            raise SystemExit(f"the running land job failed: {proc.stderr[-2000:]}")
        running = [_batches(log) for log in proc.stderr.split(PASS_MARK)[WARM_UP_PASSES:]]
        if len(running) != len(passes):
            raise SystemExit(f"the running land job made {len(running)} passes, not {len(passes)}")
        command = [sys.executable, "-m", "ingester.cli.main", "land", "--kafka", kafka.bootstrap, "--topic-prefix",
                   prefix, "--lake", str(lakes[-1]), "--checkpoint", str(lakes[-1] / "_checkpoint"), "--trigger",
                   "available-now"]
        started = time.perf_counter()
        proc = subprocess.run(command, capture_output=True, text=True, cwd=BENCH_DIR.parent, timeout=3600)
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"binlake land failed: {proc.stderr[-2000:]}")
        fresh = _batches(proc.stderr)
        from streaming_job.land.job import build_session

        spark = build_session("local[2]", 2, "binlake-snapshot-bench-check")
        try:
            for lake, batches in (*zip(passes, running, strict=True), (lakes[-1], fresh)):
                landed = int(sum(b[2] for b in batches))
                mirror = spark.read.format("delta").load(str(lake / "bench" / "t")).count()
                if not landed == mirror == rows:
                    raise SystemExit(f"{lake.name}: landed {landed} rows, the mirror has {mirror}, the table {rows}")
        finally:
            spark.stop()
        return [sum(b[3] for b in batches) for batches in running], sum(b[3] for b in fresh), wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-delta", action="store_true", help="Kafka only: skip `binlake land`")
    args = parser.parse_args()
    with MariaDBServer(options={"innodb_buffer_pool_size": "256M"}) as server, KafkaBroker() as kafka:
        load(server, args.rows)
        plain_select(server)  # warm the buffer pool
        selects, snaps = [], []
        for n in range(args.repeat):
            selects.append(plain_select(server))
            seconds, rows = snapshot(server, kafka, f"snapbench{n}")
            if rows != args.rows:
                raise SystemExit(f"snapshot published {rows} rows, the table has {args.rows}")
            snaps.append(seconds)
            print(f"run {n + 1}: SELECT {selects[-1]:.2f} s, snapshot {seconds:.2f} s", file=sys.stderr)
        version = server.execute("SELECT VERSION()")[0][0]
        load_before = os.getloadavg()
        passes, batch_s, land_wall = land(kafka, "snapbench0", args.rows) if not args.no_delta else ([0.0], 0.0, 0.0)
        running_s = statistics.median(passes)
        load_after = os.getloadavg()
    sel, snap = statistics.median(selects), statistics.median(snaps)
    delta = ""
    if not args.no_delta:
        into = snap + running_s
        fresh = snap + batch_s
        delta = f"""| `binlake run --snapshot initial` -> Kafka -> a running `binlake land` into Delta \
(snapshot + micro-batch time; the job's median pass) | {into:.2f} s | {args.rows / into:,.0f} |
| the same, landed by a fresh `binlake land` process (its micro-batches after start-up and warm-up) | {fresh:.2f} s \
| {args.rows / fresh:,.0f} |
| the same, the fresh land process's wall time (JVM and Spark start included) | {snap + land_wall:.2f} s \
| {args.rows / (snap + land_wall):,.0f} |

Into Delta / SELECT time: **{into / sel:.2f}x** with a running land job (goal: at most 2x; \
{"met" if into / sel <= 2 else "not met"}); {fresh / sel:.2f}x with a fresh land process's micro-batches, \
{(snap + land_wall) / sel:.2f}x with its start-up. A running job (a Spark application that has landed \
the same topics {WARM_UP_PASSES} times before) landed the snapshot's records in {running_s:.2f} s, the median of \
three passes ({", ".join(f"{p:.2f}" for p in passes)} s; {args.rows / running_s:,.0f} rows/s: decode, change log, \
mirror), a fresh process's micro-batches took \
{batch_s:.1f} s, the process {land_wall:.1f} s; load average {load_before[0]:.1f} before, {load_after[0]:.1f} \
after (2 CPUs, shared). Each mirror's row count is checked against the table's.
"""
    revision = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    report = f"""# Snapshot throughput

{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, revision {revision}, {platform.processor() or platform.machine()},
{version}, Python {platform.python_version()}; {args.rows:,} rows (BIGINT PK, INT, CHAR(120), CHAR(60),
DECIMAL(10,2), DATETIME(6), VARCHAR(255)), median of {args.repeat}.

| reader | time | rows/s |
|---|---|---|
| `SELECT *` through pymysql (unbuffered) | {sel:.2f} s | {args.rows / sel:,.0f} |
| `binlake run --snapshot initial` into Kafka | {snap:.2f} s | {args.rows / snap:,.0f} |
{delta}
Snapshot into Kafka / SELECT time: **{snap / sel:.2f}x** (goal: at most 2x).

```sh
.venv/bin/python bench/run_snapshot.py --rows {args.rows} --repeat {args.repeat}
```
"""
    kept = RESULTS.read_text().split("\n## ", 1)[1:] if RESULTS.exists() else []  # sections measured elsewhere
    RESULTS.write_text(report + "".join("\n## " + k for k in kept))
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
