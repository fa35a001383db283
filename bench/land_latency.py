"""The land benchmark's commit-to-mirror latency (run_land.py --latency): paced single-row transactions through
`binlake run` and `binlake land --trigger 1s` running side by side, each row's latency read from the lake's own
history (Delta versions by Spark or delta-rs, Iceberg snapshots by pyiceberg)."""

from __future__ import annotations

import datetime
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon_latency import steady_inserts
from land_shapes import Shape
from run_decode import BenchError, _check, stop_processes

from ingester.devstack.kafka import KafkaBroker
from ingester.devstack.mariadb import MariaDBServer

BENCH_DIR = Path(__file__).resolve().parent
BATCH_LINE = re.compile(r"batch (\d+): (\d+) records in, (\d+) row changes landed in ([\d.]+)s")  # the job's progress


@dataclass
class LatencyRun:
    """A latency run's result: each transaction's commit-to-mirror latency (sorted), the rate achieved, and what
    ``inspect`` found in the lake."""

    latencies: list[float]
    achieved: float
    inspected: Any = None

    def pct(self, q: float) -> float:
        return self.latencies[min(len(self.latencies) - 1, int(q * len(self.latencies)))]


def measure_latency(rate: float, duration: float, shape: Shape, land_log: Path | None = None,
                    writers: int = 3, lake_format: str = "delta", preload: int = 0) -> str:
    """``run_latency``'s report (markdown)."""
    run = run_latency(rate, duration, shape, land_log, writers, lake_format, preload)
    what = (f"Single-row autocommit UPDATEs of distinct keys spread over a mirror of {preload:,} rows (landed "
            "first)" if preload else "Single-row autocommit INSERTs")
    return "\n".join([
        "## Commit-to-mirror latency" + (f", updates against a {preload:,}-row mirror" if preload else ""),
        "",
        f"{what} from {writers} threads, target {rate:,.0f}/s for {duration:.0f} s "
        f"(achieved {run.achieved:,.0f}/s, {len(run.latencies):,} transactions); `binlake run` and `binlake land "
        f"--trigger 1s` ({shape.name}, {lake_format})"
        " running alongside on the same 2 CPUs, measured once two warm-up rows have landed (mirror created, first"
        " MERGE done). Latency: the commit of the first mirror version (Delta) or snapshot (Iceberg) holding the row"
        " minus the time the INSERT returned.",
        "",
        "| p50 | p90 | p99 | max |",
        "|---|---|---|---|",
        f"| {run.pct(0.5):.2f} s | {run.pct(0.9):.2f} s | {run.pct(0.99):.2f} s | {run.latencies[-1]:.2f} s |",
        "",
        f"Goal p99 < 5 s: {'met' if run.pct(0.99) < 5 else 'not met'}.",
        "",
    ])


def run_latency(rate: float, duration: float, shape: Shape, land_log: Path | None = None, writers: int = 3,
                lake_format: str = "delta", preload: int = 0,
                inspect: Callable[[Path, float], Any] | None = None, merge_job: bool = False,
                keys: KeyChoice | None = None, key_type: str = "bigint") -> LatencyRun:
    """Single-row transactions at ``rate``/s for ``duration`` s through `binlake run` and `binlake land
    --trigger 1s`, once two warm-up rows have landed (steady state: the first micro-batches of a process pay
    the JVM's warm-up once); a row's latency is the commit time of the first mirror version holding it
    (Delta history) minus the time its INSERT returned (autocommit).

    With ``preload`` rows, the transactions are UPDATEs of distinct existing keys spread over a mirror of that
    many rows (landed first, through the binlog, in transactions of 50,000 rows): each sets ``v`` to a value of
    its own, and its latency is the commit time of the first mirror version holding that value. ``keys``: which
    key the n-th update changes (default ``spread``: distinct keys spread over the whole table); ``key_type``: the
    key column's (KEY_TYPES: BIGINT, text as an order number or a UUID's text, or a DATETIME(6)).

    ``inspect(lake, started)``: called once the processes stopped, with the lake's local directory and the
    time the transactions started; its result is the run's ``inspected``. ``merge_job``: the daemon publishes
    Debezium's JSON change events and bench/merge_job.py (Spark's MERGE) lands them instead of `binlake land`
    (local, Delta)."""
    options = {"sync_binlog": 0, "innodb_flush_log_at_trx_commit": 0, "innodb_buffer_pool_size": "128M"}
    prefix = f"landlat{os.getpid()}"
    (BENCH_DIR / "data").mkdir(exist_ok=True)  # a fresh clone has none
    with KafkaBroker() as broker, MariaDBServer(binlog_row_metadata="FULL", options=options) as server, \
            tempfile.TemporaryDirectory(prefix="bl-lat-", dir=BENCH_DIR / "data") as root:
        server.execute("CREATE DATABASE bench_lat")
        key = KEY_TYPES[key_type]
        if preload:
            server.execute(f"CREATE TABLE bench_lat.t (id {key.column} NOT NULL PRIMARY KEY, w TINYINT NOT NULL, "
                           "v BIGINT NOT NULL, note VARCHAR(40) NOT NULL)")
            server.execute(f"INSERT INTO bench_lat.t VALUES ({key.sql('0')}, 0, 0, 'warm-up')")
        else:
            server.execute("CREATE TABLE bench_lat.t (id BIGINT NOT NULL PRIMARY KEY, w TINYINT NOT NULL)")
            server.execute("INSERT INTO bench_lat.t VALUES (0, 0)")  # warm-up row
        lake = Path(root) / "lake"
        logs = Path(root)
        land = [sys.executable, "-m", "ingester.cli.main", "land", "--kafka", broker.bootstrap, "--topic-prefix",
                prefix, "--lake", shape.lake(lake), "--checkpoint", shape.checkpoint(lake, lake_format), "--trigger",
                "1s", "--format", lake_format, *shape.land_args]
        if merge_job:
            land = [sys.executable, str(BENCH_DIR / "merge_job.py"), "--kafka", broker.bootstrap, "--topic",
                    f"{prefix}.bench_lat.t", "--table", str(lake / "bench_lat" / "t"), "--checkpoint",
                    str(lake / "_checkpoint"), "--format", lake_format, "--lake", str(lake)]
        daemon_env = {**os.environ, **({"BINLAKE_KAFKA_FORMAT": "debezium-json"} if merge_job else {})}
        procs = [
            subprocess.Popen([sys.executable, "-m", "ingester.cli.main", "run", "--source", server.url, "--kafka",
                              broker.bootstrap, "--topic-prefix", prefix, "--server-id", "902"], env=daemon_env,
                             stdout=subprocess.DEVNULL, stderr=open(logs / "run.log", "wb"), cwd=BENCH_DIR.parent),
            subprocess.Popen(land, stdout=subprocess.DEVNULL, stderr=open(logs / "land.log", "wb"),
                             cwd=BENCH_DIR.parent),
        ]
        try:
            # Steady state: the first batch creates the mirror, the second pays the first MERGE's JVM warm-up
            _wait_landed(logs / "land.log", 1, procs, 300)
            if preload:
                for low in range(1, preload + 1, PRELOAD_TX_ROWS):
                    high = min(preload, low + PRELOAD_TX_ROWS - 1)
                    server.execute(f"INSERT INTO bench_lat.t SELECT {key.sql('seq')}, 0, 0, "
                                   f"CONCAT('preloaded row ', seq) FROM bench_lat.seq_{low}_to_{high}")  # Sequence
                _wait_landed(logs / "land.log", 1 + preload, procs, 900)
                server.execute(f"UPDATE bench_lat.t SET w = 1 WHERE id = {key.sql('0')}")
                _wait_landed(logs / "land.log", 2 + preload, procs, 300)
                started = time.time()
                commits, elapsed = steady_inserts(server, "UPDATE bench_lat.t SET v = %s, w = %s WHERE id = %s",
                                                  rate, duration, writers,
                                                  lambda row, index: (row, index,
                                                                      key.value((keys or spread)(row, preload))))
                _wait_landed(logs / "land.log", 2 + preload + len(commits), procs, 900)
            else:
                server.execute("INSERT INTO bench_lat.t VALUES (-1, 0)")
                _wait_landed(logs / "land.log", 2, procs, 300)
                started = time.time()
                commits, elapsed = steady_inserts(server, "INSERT INTO bench_lat.t VALUES (%s, %s)", rate, duration,
                                                  writers)
                _wait_landed(logs / "land.log", 2 + len(commits), procs, 600)
        finally:
            stop_processes(procs)
            if land_log:
                land_log.with_suffix(".latency.log").write_bytes((logs / "land.log").read_bytes())
        if preload:
            landed = (_first_snapshots(shape.iceberg(lake), "v") if lake_format == "iceberg"
                      else _first_values(shape.files(lake) / "bench_lat" / "t"))
        else:
            landed = (_first_snapshots(shape.iceberg(lake)) if lake_format == "iceberg"
                      else _first_versions(shape.files(lake) / "bench_lat" / "t"))
        inspected = inspect(shape.files(lake), started) if inspect is not None else None
    latencies = sorted(landed[i] - t for i, t in commits.items())
    _check(len(latencies) == len(commits), "rows missing from the mirror")
    return LatencyRun(latencies, len(commits) / elapsed, inspected)


PRELOAD_TX_ROWS = 50_000


@dataclass(frozen=True)
class KeyType:
    """A preloaded table's key column: its type, its value for row n in SQL (of an expression giving n) and in
    Python."""

    column: str
    sql: Callable[[str], str]
    value: Callable[[int], Any]


def _uuid_text(n: int) -> str:
    digest = hashlib.md5(str(n).encode()).hexdigest()  # as MariaDB's MD5(n)
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:]}"


KEY_TYPES = {
    "bigint": KeyType("BIGINT", lambda n: n, lambda n: n),
    # an order number: 16 characters, ascending with n
    "text": KeyType("VARCHAR(20)", lambda n: f"CONCAT('order-', LPAD({n}, 10, '0'))", lambda n: f"order-{n:010d}"),
    # a UUID's 36 characters, in no order of n (Delta's writer keeps 32 of them in a file's statistics)
    "uuid": KeyType("CHAR(36)", lambda n: (f"CONCAT_WS('-', SUBSTR(MD5({n}), 1, 8), SUBSTR(MD5({n}), 9, 4), "
                                           f"SUBSTR(MD5({n}), 13, 4), SUBSTR(MD5({n}), 17, 4), SUBSTR(MD5({n}), 21))"),
                    _uuid_text),
    # a DATETIME(6) a millisecond apart (and 7 microseconds in: Delta's statistics cut a timestamp to its millisecond)
    "datetime": KeyType("DATETIME(6)", lambda n: f"TIMESTAMPADD(MICROSECOND, {n} * 1000 + 7, '2020-01-01')",
                        lambda n: datetime.datetime(2020, 1, 1) + datetime.timedelta(microseconds=n * 1000 + 7)),
}
_SPREAD = 7_919  # a prime: row -> row * _SPREAD mod n is one-to-one for n not divisible by it


KeyChoice = Callable[[int, int], int]  # (the update's number, the table's rows) -> the key it changes


def spread(row: int, rows: int) -> int:
    """Distinct keys spread over the whole table, 1..rows."""
    return 1 + (row * _SPREAD) % rows


def hot(row: int, rows: int) -> int:
    """Nine updates in ten on the newest tenth of the keys (the recent orders, sessions, accounts most tables
    update), the tenth on the older keys; distinct keys within each part until its keys are used up (the newest
    tenth of 1,000,000 rows at 1,800 updates a second: after ~55 s, when every update has long landed)."""
    zone = max(1, rows // 10)
    if row % 10:
        return rows - zone + 1 + (row * _SPREAD) % zone
    return spread(row // 10, rows - zone)


def _wait_landed(log: Path, rows: int, procs: list[subprocess.Popen], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        landed = sum(int(m.group(3)) for m in BATCH_LINE.finditer(log.read_text(errors="replace")))
        if landed >= rows:
            return
        if any(p.poll() is not None for p in procs):
            raise BenchError(f"a process exited early; see {log}")
        time.sleep(0.5)
    raise BenchError(f"fewer than {rows} rows landed after {timeout:.0f} s")


def _first_versions(path: Path) -> dict[int, float]:
    """Row id -> commit time (s) of the first mirror version that holds it (Delta time travel)."""
    from streaming_job.land.job import build_session

    spark = build_session("local[2]", 2, "binlake-land-bench-latency")
    try:
        history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").select("version", "timestamp").collect()
        first: dict[int, float] = {}
        for h in sorted(history, key=lambda h: h.version):
            at = h.timestamp.timestamp()  # pyspark gives local naive datetimes; this undoes that
            for r in spark.read.format("delta").option("versionAsOf", h.version).load(str(path)).select("id").collect():
                first.setdefault(r.id, at)
        return first
    finally:
        spark.stop()


def _first_snapshots(catalog: Any, column: str = "id") -> dict[int, float]:
    """Value of ``column`` -> commit time (s) of the first Iceberg mirror snapshot that holds it (pyiceberg's
    time travel; ``v``: its values above 0 only)."""
    from pyiceberg.expressions import AlwaysTrue, GreaterThan

    table = catalog.load_table(("bench_lat", "t"))
    where = GreaterThan(column, 0) if column == "v" else AlwaysTrue()
    first: dict[int, float] = {}
    for snapshot in sorted(table.snapshots(), key=lambda s: s.timestamp_ms):
        scan = table.scan(snapshot_id=snapshot.snapshot_id, selected_fields=(column,), row_filter=where)
        for i in scan.to_arrow().column(column).to_pylist():
            first.setdefault(i, snapshot.timestamp_ms / 1000)
    return first


def _first_values(path: Path) -> dict[int, float]:
    """Value of ``v`` (above 0) -> commit time (s) of the first Delta mirror version that holds it (delta-rs's
    time travel, its query engine: it reads deletion vectors; a Spark read of each version of a large mirror takes
    seconds)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(str(path))
    first: dict[int, float] = {}
    for entry in sorted(table.history(), key=lambda h: h["version"]):
        table.load_as_version(entry["version"])
        found = QueryBuilder().register("t", table).execute("SELECT v FROM t WHERE v > 0").read_all()
        for v in pa.table(found).column("v").to_pylist():
            first.setdefault(v, entry["timestamp"] / 1000)
    return first
