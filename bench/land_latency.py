"""The land benchmark's commit-to-mirror latency (run_land.py --latency): paced single-row transactions through
`binlake run` and `binlake land --trigger 1s` running side by side, each row's latency read from the lake's own
history (Delta versions by Spark or delta-rs, Iceberg snapshots by pyiceberg)."""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import re
import shutil
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
from ingester.devstack.mysql import MySQLServer

BENCH_DIR = Path(__file__).resolve().parent
BATCH_LINE = re.compile(r"batch (\d+): (\d+) records in, (\d+) row changes landed in ([\d.]+)s")  # the job's progress


@dataclass
class LatencyRun:
    """A latency run's result: each transaction's commit-to-mirror latency (sorted), the rate achieved, and what
    ``inspect`` found in the lake."""

    latencies: list[float]
    achieved: float
    inspected: Any = None
    preload_s: float = 0.0  # seconds from the preload's first INSERT to its last row landed (with ``preload``)
    changed: int = 0  # the rows the transactions changed (UPDATEs and DELETEs: the latencies are the UPDATEs')
    tidied: float = 0.0  # seconds from the changes' end to the quiet mirror's last snapshot (run_latency's quiet)

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
                keys: KeyChoice | None = None, key_type: str = "bigint", server: Any = None,
                snapshot: bool = False, deletes: float = 0.0, quiet: float = 0.0) -> LatencyRun:
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
    (local, Delta).

    ``server``: a running server to use (its database ``bench_lat`` made again) instead of a MariaDB started
    here; a MySQL 8.0 (devstack.mysql.MySQLServer, no sequence engine) has the preload generated by a recursive
    common table expression. ``snapshot``: the preload is in the table before `binlake run --snapshot initial` and
    the land job start, and ``preload_s`` runs from their start to its last row landed (Spark's start included).
    ``deletes``: the share of the preloaded table's transactions that DELETE their key instead (every
    ``round(1 / deletes)``-th): checked by the mirror's rows against the server's, the latency is the UPDATEs'.
    ``quiet`` (with ``preload``): once the last change landed, the land job runs on until the mirror's quiet
    compaction (land.quiet_compaction) left it without delete files (Delta: deletion vectors) and no new snapshot
    (version) came for ``quiet`` seconds (at most ``_QUIET_WAIT`` s), and ``inspect`` is called with the mirror as the
    changes ended as a third argument (Iceberg: its snapshot id; Delta: a copy of it) (the run's ``tidied``: seconds
    from then to the last snapshot)."""
    options = {"sync_binlog": 0, "innodb_flush_log_at_trx_commit": 0, "innodb_buffer_pool_size": "128M"}
    prefix = f"landlat{os.getpid()}"
    (BENCH_DIR / "data").mkdir(exist_ok=True)  # a fresh clone has none
    given = contextlib.nullcontext(server) if server is not None else MariaDBServer(binlog_row_metadata="FULL",
                                                                                  options=options)
    reused = server is not None
    with KafkaBroker() as broker, given as server, \
            tempfile.TemporaryDirectory(prefix="bl-lat-", dir=BENCH_DIR / "data") as root:
        if reused:
            server.execute("DROP DATABASE IF EXISTS bench_lat")
        server.execute("CREATE DATABASE bench_lat")
        key = KEY_TYPES[key_type]
        if preload:
            server.execute(f"CREATE TABLE bench_lat.t (id {key.column} NOT NULL PRIMARY KEY, w TINYINT NOT NULL, "
                           "v BIGINT NOT NULL, note VARCHAR(40) NOT NULL)")
            server.execute(f"INSERT INTO bench_lat.t VALUES ({key.sql('0')}, 0, 0, 'warm-up')")
            for low in range(1, preload + 1 if snapshot else 1, PRELOAD_TX_ROWS):  # the rows the snapshot reads
                server.execute(preload_sql(server, key, low, min(preload, low + PRELOAD_TX_ROWS - 1)))
        else:
            server.execute("CREATE TABLE bench_lat.t (id BIGINT NOT NULL PRIMARY KEY, w TINYINT NOT NULL)")
            server.execute("INSERT INTO bench_lat.t VALUES (0, 0)")  # warm-up row
        lake = Path(root) / "lake"
        logs = Path(root)
        at_end, tidied = None, 0.0
        land = [sys.executable, "-m", "ingester.cli.main", "land", "--kafka", broker.bootstrap, "--topic-prefix",
                prefix, "--lake", shape.lake(lake), "--checkpoint", shape.checkpoint(lake, lake_format), "--trigger",
                "1s", "--format", lake_format, *shape.land_args]
        if merge_job:
            land = [sys.executable, str(BENCH_DIR / "merge_job.py"), "--kafka", broker.bootstrap, "--topic",
                    f"{prefix}.bench_lat.t", "--table", str(lake / "bench_lat" / "t"), "--checkpoint",
                    str(lake / "_checkpoint"), "--format", lake_format, "--lake", str(lake)]
        daemon_env = {**os.environ, **({"BINLAKE_KAFKA_FORMAT": "debezium-json"} if merge_job else {})}
        launched = time.monotonic()
        procs = [
            subprocess.Popen([sys.executable, "-m", "ingester.cli.main", "run", "--source", server.url, "--kafka",
                              broker.bootstrap, "--topic-prefix", prefix, "--server-id", "902",
                              *(["--snapshot", "initial"] if snapshot else [])], env=daemon_env,
                             stdout=subprocess.DEVNULL, stderr=open(logs / "run.log", "wb"), cwd=BENCH_DIR.parent),
            subprocess.Popen(land, stdout=subprocess.DEVNULL, stderr=open(logs / "land.log", "wb"),
                             cwd=BENCH_DIR.parent),
        ]
        try:
            # Steady state: the first batch creates the mirror, the second pays the first MERGE's JVM warm-up
            _wait_landed(logs / "land.log", 1, procs, 300)
            if preload:
                preload_began = launched if snapshot else time.monotonic()
                for low in range(1, 1 if snapshot else preload + 1, PRELOAD_TX_ROWS):
                    high = min(preload, low + PRELOAD_TX_ROWS - 1)
                    server.execute(preload_sql(server, key, low, high))
                _wait_landed(logs / "land.log", 1 + preload, procs, 900)
                preload_s = time.monotonic() - preload_began
                server.execute(f"UPDATE bench_lat.t SET w = 1 WHERE id = {key.sql('0')}")
                _wait_landed(logs / "land.log", 2 + preload, procs, 300)
                started = time.time()
                every = round(1 / deletes) if deletes else 0
                commits, elapsed = steady_inserts(
                    server, "UPDATE bench_lat.t SET v = %s, w = %s WHERE id = %s", rate, duration, writers,
                    lambda row, index: (row, index, key.value((keys or spread)(row, preload))),
                    lambda row: _DELETE if every and row % every == 0 else None)
                deleted = {row for row in commits if every and row % every == 0}
                _wait_landed(logs / "land.log", 2 + preload + len(commits), procs, 900)
                if quiet:
                    at_end, tidied = (_wait_tidy(shape.iceberg(lake), quiet, procs) if lake_format == "iceberg"
                                      else _wait_tidy_delta(shape.files(lake) / "bench_lat" / "t", quiet, procs))
                changed = len(commits)
                commits = {row: t for row, t in commits.items() if row not in deleted}
            else:
                server.execute("INSERT INTO bench_lat.t VALUES (-1, 0)")
                _wait_landed(logs / "land.log", 2, procs, 300)
                started = time.time()
                commits, elapsed = steady_inserts(server, "INSERT INTO bench_lat.t VALUES (%s, %s)", rate, duration,
                                                  writers)
                _wait_landed(logs / "land.log", 2 + len(commits), procs, 600)
                changed = len(commits)
        finally:
            stop_processes(procs)
            if land_log:
                land_log.with_suffix(".latency.log").write_bytes((logs / "land.log").read_bytes())
        if preload:
            landed = (first_added_values(shape.iceberg(lake).load_table(("bench_lat", "t")))[0]
                      if lake_format == "iceberg"
                      else _first_values(shape.files(lake) / "bench_lat" / "t"))
        else:
            landed = (first_added_values(shape.iceberg(lake).load_table(("bench_lat", "t")), "id")[0]
                      if lake_format == "iceberg"
                      else _first_versions(shape.files(lake) / "bench_lat" / "t"))
        if preload:  # the mirror against the server's own SELECT: no update lost, no row doubled
            mirror, source = _mirror_sums(shape, lake, lake_format), _server_sums(server)
            _check(mirror == source, f"the mirror's (rows, sum(v), sum(w)) {mirror} differ from the server's {source}")
        inspected = None
        if inspect is not None:
            inspected = inspect(shape.files(lake), started, *([at_end] if at_end is not None else []))
    latencies = sorted(landed[i] - t for i, t in commits.items())
    _check(len(latencies) == len(commits), "rows missing from the mirror")
    return LatencyRun(latencies, changed / elapsed, inspected, preload_s if preload else 0.0, changed, tidied)


_QUIET_WAIT = 900.0  # seconds, at most, for a mirror's quiet compaction


def _wait_tidy(catalog: Any, quiet: float, procs: list[subprocess.Popen]) -> tuple[int, float]:
    """The mirror's snapshot id as the changes ended, then (the land job running on) the seconds until its last
    snapshot, once it has no delete file and no snapshot came for ``quiet`` seconds (or ``_QUIET_WAIT`` passed)."""
    def current() -> tuple[int, bool]:
        snapshot = catalog.load_table(("bench_lat", "t")).current_snapshot()
        return snapshot.snapshot_id, int(snapshot.summary.get("total-delete-files") or 0) == 0

    return current()[0], _quiet_for(current, quiet, procs)


def _wait_tidy_delta(table: Path, quiet: float, procs: list[subprocess.Popen]) -> tuple[Path, float]:
    """As _wait_tidy, of a Delta mirror: a copy of it as the changes ended (its files and its log up to that version,
    beside it: read as a table of its own, Spark's time travel works a version's state out at each read), then the
    seconds until its last version, once no file has a deletion vector and no version came for ``quiet`` seconds."""
    from streaming_job.lake.delta_log import TableLog

    log = TableLog.read(str(table))
    ended, version = table.with_name(table.name + "__ended"), log.version
    newer = re.compile(r"^(\d{20})\.")
    shutil.copytree(table, ended, ignore=lambda _, names: [
        n for n in names if (m := newer.match(n)) is not None and int(m.group(1)) > version])

    def current() -> tuple[int, bool]:
        log.refresh()
        return log.version, not any(a.get("deletionVector") for a in log.files.values())

    return ended, _quiet_for(current, quiet, procs)


def _quiet_for(current: Callable[[], tuple[int, bool]], quiet: float, procs: list[subprocess.Popen]) -> float:
    """Seconds until the mirror's last version (``current``: its id, and whether it is clean) once it is clean and
    no version came for ``quiet`` seconds (or ``_QUIET_WAIT`` passed)."""
    began = last = time.monotonic()
    seen = current()[0]
    while time.monotonic() - began < _QUIET_WAIT:
        _check(all(p.poll() is None for p in procs), "a process ended while the mirror was quiet")
        time.sleep(2)
        version, clean = current()
        if version != seen:
            seen, last = version, time.monotonic()
        elif clean and time.monotonic() - last >= quiet:
            break
    return last - began


PRELOAD_TX_ROWS = 50_000
# a preloaded table's DELETE, with the UPDATE's parameters (the row's v and w unused: never NULL)
_DELETE = "DELETE FROM bench_lat.t WHERE %s IS NOT NULL AND %s IS NOT NULL AND id = %s"


def preload_sql(server: Any, key: KeyType, low: int, high: int, table: str = "bench_lat.t") -> str:
    """The INSERT of preloaded rows ``low``..``high``: from MariaDB's sequence engine, or on MySQL 8.0 (mysqld) from
    a recursive common table expression (its recursion limit raised for the statement)."""
    values = f"{key.sql('seq')}, 0, 0, CONCAT('preloaded row ', seq)"
    if isinstance(server, MySQLServer):
        return (f"INSERT /*+ SET_VAR(cte_max_recursion_depth = {high - low + 2}) */ INTO {table} WITH RECURSIVE "
                f"s (seq) AS (SELECT {low} UNION ALL SELECT seq + 1 FROM s WHERE seq < {high}) SELECT {values} FROM s")
    return f"INSERT INTO {table} SELECT {values} FROM bench_lat.seq_{low}_to_{high}"  # the Sequence engine's


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


def _server_sums(server: Any) -> tuple[int, int, int]:
    """(rows, sum(v), sum(w)) of the server's table: each UPDATE sets v to a value of its own."""
    rows, v, w = server.execute("SELECT COUNT(*), SUM(v), SUM(w) FROM bench_lat.t")[0]
    return int(rows), int(v), int(w)


def _mirror_sums(shape: Shape, lake: Path, lake_format: str) -> tuple[int, int, int]:
    """(rows, sum(v), sum(w)) of the mirror as pyiceberg (Iceberg) or delta-rs (Delta) reads it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if lake_format == "iceberg":
        found = shape.iceberg(lake).load_table(("bench_lat", "t")).scan(selected_fields=("v", "w")).to_arrow()
    else:
        from deltalake import DeltaTable, QueryBuilder

        table = DeltaTable(str(shape.files(lake) / "bench_lat" / "t"))
        found = pa.table(QueryBuilder().register("t", table).execute("SELECT v, w FROM t").read_all())
    return (len(found), int(pc.sum(found.column("v")).as_py() or 0),
            int(pc.sum(pc.cast(found.column("w"), pa.int64())).as_py() or 0))


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


def first_added_values(table: Any, column: str = "v", since_ms: int = 0) -> tuple[dict[int, float], int]:
    """Value of ``column`` (``v``: above 0 only) -> commit time (s) of the first snapshot after ``since_ms`` whose
    added data files hold it, and the snapshots read. A value written once (a row's new ``v``, a new row's ``id``)
    is live in the snapshot that added its file (each snapshot's own added files only: a time travel through
    every snapshot's whole table took ~1 s a snapshot at 10,000,000 rows)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from pyiceberg.manifest import DataFileContent, ManifestEntryStatus

    first: dict[int, float] = {}
    snapshots = [s for s in table.snapshots() if s.timestamp_ms > since_ms]
    for snapshot in sorted(snapshots, key=lambda s: s.timestamp_ms):
        if snapshot.summary is not None and snapshot.summary.operation.value == "replace":
            continue  # a compaction's: the same rows, no new value
        for manifest in snapshot.manifests(table.io):
            if manifest.added_snapshot_id != snapshot.snapshot_id:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                found = entry.data_file
                if entry.status != ManifestEntryStatus.ADDED or found.content != DataFileContent.DATA:
                    continue
                values = pq.read_table(found.file_path.removeprefix("file:"), columns=[column]).column(column)
                if column == "v":
                    values = values.filter(pc.greater(values, 0))
                for value in values.to_pylist():
                    first.setdefault(value, snapshot.timestamp_ms / 1000)
    return first, len(snapshots)


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
