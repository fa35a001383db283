"""binlake beside Flink CDC (issue 39): the same MySQL 8.0.31 table mirrored into Iceberg by Flink CDC's SQL route
(the MySQL CDC connector into an Iceberg upsert table) and by binlake (`binlake run` -> Kafka -> `binlake land`),
one after the other on one server and this machine's 2 CPUs: the initial load, commit-to-lake latency of
single-row UPDATEs, and the lake's full-scan time afterwards.

Flink: Flink 1.20 on a local MiniCluster (bench/flink_cdc/CdcToIceberg.java, parallelism 1, a checkpoint a second,
each committing an Iceberg snapshot), ``flink-sql-connector-mysql-cdc`` 3.5.0 and ``iceberg-flink-runtime-1.20``
1.11.0 with a Hadoop catalog, the table format-version 2 with ``write.upsert.enabled``. Its jars: Maven's
``dependency:copy-dependencies`` of bench/flink_cdc/pom.xml into ~/.cache/binlake/flink/lib (once), the class
compiled by javac into ~/.cache/binlake/flink/classes.

1. Initial load: ``--rows`` rows preloaded into the table, then the Flink job started; its rate is the rows over
   the seconds from the JVM's start to the commit of the first snapshot holding them all (JVM and MiniCluster
   start included; ``--chunk-size``: the connector's snapshot chunk). binlake's (``--binlake-load``): `binlake run
   --snapshot initial` of the preloaded table, from its and `binlake land`'s start (Spark's included) to the last
   row landed; or land_latency's binlog preload (as bench/run_big_tables.py), from the first INSERT to the last row
   landed (`binlake run` and `binlake land` already running).
2. UPDATEs of distinct keys spread over the table at ``--rate`` for ``--duration`` s (3 threads), after a warm-up
   row landed; a row's latency is the commit time of the first snapshot whose *added data files* hold its new
   value (pyiceberg reads no table with equality deletes: its snapshots' manifests are read with pyiceberg, the
   added Parquet files with pyarrow) minus the time its UPDATE returned. binlake's: land_latency.run_latency with
   `--deletion-vectors always` (run_big_tables' ``vectors``), an Iceberg and a Delta mirror.
3. Scans: count and sum of a column over the whole table by Spark (the project's Iceberg runtime), best of five
   after a warm-up, taken in turns with a compacted copy (the table's rows written again by Spark, no delete file);
   the live equality and position delete files of Flink's table.

    python bench/run_flink_cdc.py [--rows 1000000] [--rate 2000] [--duration 60] [--binlake iceberg,delta|none]
        [--binlake-load snapshot|binlog] [--chunk-size ROWS] [--logs DIR] [--output bench/results/flink-cdc.md]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from daemon_latency import steady_inserts
from land_latency import KEY_TYPES, LatencyRun, first_added_values, preload_sql, run_latency, spread
from land_shapes import Shape
from run_big_tables import inspect, inspect_iceberg
from run_decode import BenchError, _cpu_model, _git_revision, stop_processes

from ingester.devstack.mysql import MySQLServer

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "flink-cdc.md"
FLINK_HOME = Path.home() / ".cache" / "binlake" / "flink"
POM = BENCH_DIR / "flink_cdc" / "pom.xml"
MAIN = BENCH_DIR / "flink_cdc" / "CdcToIceberg.java"
DATABASE = "bench_flink"
SCAN_TURNS = 5
# Flink's own JVM options for Java 17 (its env.java.opts.all): Kryo and Iceberg's writer reach into these packages
_OPENS = ("java.lang", "java.lang.reflect", "java.io", "java.nio", "java.net", "java.text", "java.time", "java.util",
          "java.util.concurrent", "java.util.concurrent.atomic", "java.util.concurrent.locks", "sun.nio.ch")


def flink_classpath() -> str:
    """The jars (fetched once by Maven into the cache) and the compiled job, as a java -cp."""
    lib, classes = FLINK_HOME / "lib", FLINK_HOME / "classes"
    if not (lib / "flink-sql-connector-mysql-cdc-3.5.0.jar").is_file():
        subprocess.run(["mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
                        f"-DoutputDirectory={lib}", f"-Dmaven.repo.local={FLINK_HOME / 'm2'}"], check=True)
    compiled = classes / "CdcToIceberg.class"
    if not compiled.is_file() or compiled.stat().st_mtime < MAIN.stat().st_mtime:
        classes.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-d", str(classes), "-cp", f"{lib}/*", str(MAIN)], check=True)
    return f"{classes}:{lib}/*"


@dataclass
class FlinkRun:
    load_s: float  # JVM start to the commit of the snapshot holding every preloaded row
    submitted_s: float  # JVM start to the job's submission (the MiniCluster up, tables made)
    insert_s: float  # MySQL's own time for the preload's INSERTs (as binlake's preload makes them)
    latencies: list[float]
    achieved: float
    updates: int
    landed: int  # of them found in the table's added data files
    snapshots: int  # snapshots committed while the updates landed
    data_files: int = 0  # live, at the end
    equality_deletes: int = 0  # live equality delete files
    position_deletes: int = 0
    equality_delete_rows: int = 0
    scan_spark: float = 0.0
    compacted_spark: float = 0.0
    notes: list[str] = field(default_factory=list)

    def pct(self, q: float) -> float:
        return self.latencies[min(len(self.latencies) - 1, int(q * len(self.latencies)))]


def _total_records(table: Any) -> int:
    table.refresh()
    snapshot = table.current_snapshot()
    return int(snapshot.summary.get("total-records") or 0) if snapshot else 0


def _wait_records(catalog: Any, rows: int, proc: subprocess.Popen, timeout: float) -> Any:
    """The Flink table once its data files hold ``rows`` records (upserts add one a row; deletes are files of
    their own); None after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    table = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError("the Flink job exited early; see its log")
        if table is None:
            try:
                table = catalog.load_table((DATABASE, "t"))
            except Exception:  # not made yet
                time.sleep(0.5)
                continue
        if _total_records(table) >= rows:
            return table
        time.sleep(0.5)
    return None


def _live_files(table: Any) -> tuple[int, int, int, int]:
    """The current snapshot's live data files, equality delete files, position delete files, equality delete rows."""
    from pyiceberg.manifest import DataFileContent

    counts = {c: 0 for c in DataFileContent}
    eq_rows = 0
    for manifest in table.current_snapshot().manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            counts[entry.data_file.content] += 1
            if entry.data_file.content == DataFileContent.EQUALITY_DELETES:
                eq_rows += entry.data_file.record_count
    return (counts[DataFileContent.DATA], counts[DataFileContent.EQUALITY_DELETES],
            counts[DataFileContent.POSITION_DELETES], eq_rows)


def _scans(warehouse: Path, rows: int) -> tuple[float, float]:
    """Spark's best full scan of Flink's table and of a compacted copy (its rows written again, no delete file)."""
    from streaming_job.iceberg.catalog import IcebergCatalog
    from streaming_job.land.job import build_session

    spark = build_session("local[2]", 2, "binlake-bench-flink-cdc", iceberg=IcebergCatalog(str(warehouse)).spark_conf())
    try:
        spark.sql(f"CREATE TABLE binlake.{DATABASE}.compacted USING iceberg TBLPROPERTIES ('format-version' = '2') "
                  f"AS SELECT /*+ REPARTITION(1) */ * FROM binlake.{DATABASE}.t")  # one file (the reads apart)

        def scan(name: str) -> float:
            begun = time.perf_counter()
            found = spark.sql(f"SELECT count(*), sum(v) FROM binlake.{DATABASE}.{name}").collect()
            took = time.perf_counter() - begun
            if found[0][0] != rows:
                raise BenchError(f"{name}: {found[0][0]} rows, not {rows}")
            return took

        times: dict[str, list[float]] = {"t": [], "compacted": []}
        for _ in range(SCAN_TURNS + 1):  # a warm-up turn, then the tables in turns
            for name in times:
                times[name].append(scan(name))
    finally:
        spark.stop()
    return min(times["t"][1:]), min(times["compacted"][1:])


def run_flink(server: MySQLServer, rows: int, rate: float, duration: float, root: Path, log: Path,
              chunk: int | None = None) -> FlinkRun:
    """Flink CDC's initial load, UPDATE latency and scans on ``server`` (its own database), the lake under ``root``;
    ``chunk``: the connector's snapshot chunk size (rows) if not its default."""
    from streaming_job.iceberg.catalog import IcebergCatalog

    classpath = flink_classpath()
    key = KEY_TYPES["bigint"]
    server.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    server.execute(f"CREATE DATABASE {DATABASE}")
    server.execute(f"CREATE TABLE {DATABASE}.t (id BIGINT NOT NULL PRIMARY KEY, w TINYINT NOT NULL, "
                   "v BIGINT NOT NULL, note VARCHAR(40) NOT NULL)")
    server.execute(f"INSERT INTO {DATABASE}.t VALUES (0, 0, 0, 'warm-up')")
    began = time.monotonic()
    for low in range(1, rows + 1, 50_000):
        server.execute(preload_sql(server, key, low, min(rows, low + 49_999), f"{DATABASE}.t"))
    insert_s = time.monotonic() - began
    warehouse = root / "flink-lake"
    warehouse.mkdir()
    catalog = IcebergCatalog(str(warehouse)).open()
    command = ["java", "-Xmx4g", *[f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in _OPENS], "-cp", classpath,
               "CdcToIceberg", str(server.port), DATABASE, "t", "5400-5404", str(warehouse),
               *([str(chunk)] if chunk else [])]
    started = time.time()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=open(log, "wb"), cwd=root)
    try:
        table = _wait_records(catalog, rows + 1, proc, 1800)
        if table is None:
            raise BenchError(f"Flink's initial load did not land {rows + 1:,} rows in 1,800 s")
        loaded = table.current_snapshot()
        load_s = loaded.timestamp_ms / 1000 - started
        mark = next((line for line in log.read_text(errors="replace").splitlines()
                     if line.startswith("binlake-bench: job submitted at ")), None)
        submitted_s = int(mark.rsplit(" ", 1)[1]) / 1000 - started if mark else float("nan")
        print(f"Flink initial load: {rows + 1:,} rows in {load_s:.1f} s", flush=True)
        server.execute(f"UPDATE {DATABASE}.t SET w = 1 WHERE id = 0")
        if _wait_records(catalog, rows + 2, proc, 300) is None:
            raise BenchError("Flink's warm-up update did not land in 300 s")
        since_ms = table.current_snapshot().timestamp_ms
        commits, elapsed = steady_inserts(server, f"UPDATE {DATABASE}.t SET v = %s, w = %s WHERE id = %s", rate,
                                          duration, 3, lambda row, index: (row, index, spread(row, rows)))
        notes = []
        if _wait_records(catalog, rows + 2 + len(commits), proc, 900) is None:
            notes.append(f"not every update landed within 900 s of the last: {_total_records(table) - rows - 2:,} "
                         f"of {len(commits):,}")
    finally:
        stop_processes([proc])
    table = catalog.load_table((DATABASE, "t"))
    first, snapshots = first_added_values(table, "v", since_ms)
    latencies = sorted(first[i] - t for i, t in commits.items() if i in first)
    run = FlinkRun(load_s, submitted_s, insert_s, latencies, len(commits) / elapsed, len(commits), len(latencies),
                   snapshots, *_live_files(table), notes=notes)
    run.scan_spark, run.compacted_spark = _scans(warehouse, rows + 1)
    return run


def fresh_binlog(server: MySQLServer) -> None:
    """A new binlog file, the older ones purged: `binlake run` without a stored position starts at the oldest
    binlog, and the run before's changes (another database, the same one's earlier table) are not this run's."""
    server.execute("FLUSH BINARY LOGS")
    current = server.execute("SHOW MASTER STATUS")[0][0]
    server.execute(f"PURGE BINARY LOGS TO '{current}'")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows preloaded")
    parser.add_argument("--rate", type=float, default=2000, help="target UPDATEs a second")
    parser.add_argument("--duration", type=float, default=60, help="seconds of UPDATEs")
    parser.add_argument("--binlake", default="iceberg,delta", help="binlake's mirrors to run beside (or none)")
    parser.add_argument("--binlake-load", choices=("snapshot", "binlog"), default="snapshot",
                        help="binlake's initial load: `binlake run --snapshot initial` of the preloaded table, or the "
                             "preload's INSERTs through the binlog (run_big_tables')")
    parser.add_argument("--chunk-size", type=int, help="Flink CDC's snapshot chunk size in rows (its default: 8096)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--logs", type=Path, help="keep the Flink job's and each binlake land job's log here")
    args = parser.parse_args()
    formats = [f for f in args.binlake.split(",") if f and f != "none"]
    (BENCH_DIR / "data").mkdir(exist_ok=True)
    options = {"sync_binlog": 0, "innodb_flush_log_at_trx_commit": 0, "innodb_buffer_pool_size": "128M"}
    binlake: dict[str, LatencyRun] = {}
    with MySQLServer(binlog_row_metadata="FULL", options=options) as server, \
            tempfile.TemporaryDirectory(prefix="bl-flink-", dir=BENCH_DIR / "data") as root:
        log = Path(root) / "flink.log"
        try:
            flink = run_flink(server, args.rows, args.rate, args.duration, Path(root), log, args.chunk_size)
        finally:
            if args.logs:
                args.logs.mkdir(parents=True, exist_ok=True)
                shutil.copy(log, args.logs / "flink.log")
        shutil.rmtree(Path(root) / "flink-lake")
        server.execute(f"DROP DATABASE {DATABASE}")
        print(f"Flink: load {flink.load_s:.1f} s, p50 {flink.pct(0.5):.2f} s, p99 {flink.pct(0.99):.2f} s, "
              f"scan {flink.scan_spark:.2f} s (compacted {flink.compacted_spark:.2f} s), "
              f"{flink.equality_deletes} equality delete files", flush=True)
        for lake_format in formats:
            shape = Shape(land_args=["--deletion-vectors", "always"])
            server.execute("DROP DATABASE IF EXISTS bench_lat")
            fresh_binlog(server)
            land_log = args.logs / f"land-{lake_format}.log" if args.logs else None
            run = run_latency(args.rate, args.duration, shape, land_log, preload=args.rows,
                              inspect=inspect_iceberg if lake_format == "iceberg" else inspect,
                              lake_format=lake_format, server=server, snapshot=args.binlake_load == "snapshot")
            binlake[lake_format] = run
            print(f"binlake {lake_format}: load {run.preload_s:.1f} s, p50 {run.pct(0.5):.2f} s, "
                  f"p99 {run.pct(0.99):.2f} s, scan {run.inspected.scan_spark:.2f} s", flush=True)
    report = _report(args, flink, binlake)
    args.output.write_text(report)
    print(report)
    return 0


def _report(args: argparse.Namespace, flink: FlinkRun, binlake: dict[str, LatencyRun]) -> str:
    rows = args.rows
    lines = [
        "# binlake beside Flink CDC: a MySQL table mirrored into Iceberg",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {_git_revision()}, {_cpu_model()}, {os.cpu_count()} CPUs, "
        "local disk, Oracle MySQL 8.0.31 (GTIDs on, binlog_row_metadata FULL), one server for both, the runs one "
        "after the other (bench/run_flink_cdc.py).",
        "",
        "Flink: Flink 1.20.3 on a local MiniCluster, flink-sql-connector-mysql-cdc 3.5.0 (its incremental snapshot, "
        "then the binlog) into an Iceberg upsert table (iceberg-flink-runtime-1.20 1.11.0, Hadoop catalog, "
        "format-version 2, `write.upsert.enabled`, primary key `id`), parallelism 1, a checkpoint (and a snapshot "
        f"commit) a second, snapshot chunks of {args.chunk_size or 8096:,} rows"
        f"{'' if args.chunk_size else ' (the connector default)'}. binlake: `binlake run` -> Kafka -> "
        "`binlake land --trigger 1s --deletion-vectors always` "
        "(run_big_tables' `vectors` mode) into an Iceberg and a Delta mirror, each run on its own.",
        "",
        f"Table: `id BIGINT` primary key, `w TINYINT`, `v BIGINT`, `note VARCHAR(40)`, {rows:,} rows (and a warm-up "
        f"row). UPDATEs: single-row autocommit, distinct keys spread over the table, target {args.rate:,.0f}/s for "
        f"{args.duration:.0f} s from 3 threads. Latency: commit time of the first snapshot (version) holding a row's "
        "new value minus the time its UPDATE returned (Flink: the first snapshot whose added data files hold it, "
        "read from its manifests; binlake: pyiceberg's / delta-rs's time travel). Scans: Spark `count(*), sum(v)`, "
        f"best of {SCAN_TURNS} after a warm-up, in turns with a compacted copy (the rows written again as one file: "
        "no delete file; Flink's by Spark, binlake's Iceberg by pyiceberg; Delta: REORG ... APPLY (PURGE) and "
        "OPTIMIZE).",
        "",
        "Initial load: Flink from the JVM's start (MiniCluster and job start included, "
        f"{flink.submitted_s:.1f} s to the job's submission) to the commit of the snapshot holding every row, of rows "
        "already in the table (the connector's snapshot); binlake " + (
            "from the start of `binlake run --snapshot initial` and `binlake land` (Spark's start included) to the "
            "last row of the preloaded table landed (binlake's snapshot: snapshot_parallelism 2)"
            if args.binlake_load == "snapshot" else
            "from the preload's first INSERT (transactions of 50,000 rows through the binlog, as run_big_tables) to "
            "its last row landed, with `binlake run` and `binlake land` already running: binlake's figure includes "
            f"MySQL's own INSERT time (the same INSERTs before Flink's run: {flink.insert_s:.1f} s)") + ". Load rates: "
        "rows/s (higher is better); latency and scan ratios: binlake's over Flink's (below 1: binlake faster).",
        "",
        "| pipeline | initial load | load rows/s | achieved UPDATEs/s | landed | p50 | p90 | p99 | max | live data "
        "files | equality delete files | scan, Spark | compacted copy, Spark | read cost |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        f"| Flink CDC -> Iceberg | {flink.load_s:.1f} s ({flink.load_s - flink.submitted_s:.1f} s from the job's "
        f"submission) | {(rows + 1) / flink.load_s:,.0f} | {flink.achieved:,.0f} | "
        f"{flink.landed:,} of {flink.updates:,} | {flink.pct(0.5):.2f} s | {flink.pct(0.9):.2f} s | "
        f"{flink.pct(0.99):.2f} s | {flink.latencies[-1]:.2f} s | {flink.data_files} | {flink.equality_deletes} "
        f"({flink.equality_delete_rows:,} rows) | {flink.scan_spark:.2f} s | {flink.compacted_spark:.2f} s | "
        f"{flink.scan_spark / flink.compacted_spark:.2f}x |",
    ]
    for lake_format, run in binlake.items():
        after = run.inspected
        marked = "with position deletes" if lake_format == "iceberg" else "with a deletion vector"
        lines.append(f"| binlake -> {lake_format.capitalize()} | {run.preload_s:.1f} s | {rows / run.preload_s:,.0f} | "
                     f"{run.achieved:,.0f} | {len(run.latencies):,} (all) | {run.pct(0.5):.2f} s | "
                     f"{run.pct(0.9):.2f} s | {run.pct(0.99):.2f} s | {run.latencies[-1]:.2f} s | {after.files} | "
                     f"0 ({after.vectored} data files {marked}) | "
                     f"{after.scan_spark:.2f} s | {after.compacted_spark:.2f} s | {after.read_cost:.2f}x |")
    lines += ["", f"Flink: {flink.snapshots} snapshots committed during the updates; {flink.position_deletes} live "
                  "position delete files at the end.", *[f"Flink: {note}." for note in flink.notes], ""]
    for lake_format, run in binlake.items():
        load = (rows / run.preload_s) / ((rows + 1) / flink.load_s)
        lines.append(f"- binlake {lake_format} / Flink: initial load rate {load:.2f}x; "
                     f"p50 {run.pct(0.5) / flink.pct(0.5):.2f}x, p99 {run.pct(0.99) / flink.pct(0.99):.2f}x"
                     f"; Spark scan {run.inspected.scan_spark / flink.scan_spark:.2f}x.")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
