"""`binlake land` throughput: the decode benchmark's bulk workload, Kafka -> Delta Lake, Spark local[2].

The cached bulk workload (bench/workloads.py: 230,000 row changes of one table in multi-row
statements) is published by `binlake run --exit-at-end` into a private Kafka broker (untimed), then
landed twice, each result checked (change log rows = the workload's row changes, mirror rows = the
server's):

- by a running job: one Spark application (a child process, `streaming_job.land.job.run`) lands the topics
  into a lake WARM_UP_PASSES times, then, warm (its JVM has compiled the hot paths, its Python workers
  run), lands them again into a new lake and checkpoint, three times: the rate a long-running `binlake
  land` has on a backlog (the median of the three);
- by a fresh process: `binlake land --trigger available-now`, whose micro-batches run after its start-up
  and warm-up, and whose first batch pays the JVM's compilation of the Kafka, Arrow and Delta paths.

Reported: rows landed per second over the micro-batches (from the job's own progress lines), and the
fresh process's whole run including Spark's start.

With --latency, first the commit-to-mirror latency at a steady rate of single-row transactions
(default 2,000/s for 20 s) with `--trigger 1s`.

With --format iceberg, the same into Iceberg tables (`binlake land --format iceberg`: pyiceberg's commits, the
lake's default catalog; docs/LAND.md, "Iceberg"); the checks read them with pyiceberg. In a bucket (cluster-s3)
the checkpoints, and so the default SQLite catalog, are local.

With --latency-only, only the latency; with --preload N, the latency of UPDATEs of existing keys of a mirror of N
rows instead of INSERTs of new keys.

With --shape cluster-s3, the production shape (issue 21): the jobs run on a Spark standalone cluster (a
master and a worker of 2 cores, separate JVMs started for the run) and land into a bucket of an
S3-compatible store (S3Proxy, started for the run) through s3a; the lakes are read back from the store's
directory. On this machine the store, the cluster, Kafka and MariaDB share the same CPUs.

    .venv/bin/python bench/run_land.py [--shape local|cluster-s3] [--min-partitions N]
        [--max-offsets-per-trigger N] [--latency | --latency-only] [--preload N] [--format delta|iceberg]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from run_daemon import published_rows, run_daemon, steady_inserts, workload_server
from run_decode import BenchError, _check, _cpu_model, _git_revision
from workloads import load_or_generate

from ingester.devstack.kafka import KafkaBroker
from ingester.devstack.mariadb import MariaDBServer

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "land.md"
BATCH_LINE = re.compile(r"batch (\d+): (\d+) records in, (\d+) row changes landed in ([\d.]+)s")
GOAL_ROWS_PER_S = 100_000


@dataclass
class Shape:
    """Where the jobs run and the lakes are: local[2] and local disk, or a cluster and a bucket."""

    name: str = "local"
    master: str = "local[2]"
    bucket_root: Path | None = None  # the store's directory of the lakes' bucket prefix (cluster-s3)
    land_args: list[str] = field(default_factory=list)  # binlake land's options for it
    store_args: list[str] = field(default_factory=list)  # those of them that reach the lake's store
    env: dict[str, str] = field(default_factory=dict)
    store_pid: int | None = None  # the object store's process (its CPU time shares the machine's cores)
    endpoint: str | None = None  # the object store's (cluster-s3)

    def store_cpu(self) -> float:
        """The store's CPU seconds so far (user + system; 0 without a store)."""
        if self.store_pid is None:
            return 0.0
        fields = Path(f"/proc/{self.store_pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def lake(self, local: Path) -> str:
        """The lake the job writes for a run whose files would be ``local`` on local disk."""
        return str(local) if self.bucket_root is None else f"s3a://lake/{self.bucket_root.name}/{local.name}"

    def checkpoint(self, local: Path, lake_format: str) -> str:
        """The checkpoint of the run whose lake is ``local``'s: in the lake, but for an Iceberg lake in a bucket,
        whose default (SQLite) catalog lives beside a local checkpoint (docs/LAND.md, "Iceberg")."""
        if self.bucket_root is not None and lake_format == "iceberg":
            return str(local.parent / f"{local.name}_checkpoint")
        return f"{self.lake(local)}/_checkpoint"

    def iceberg(self, local: Path) -> Any:
        """The Iceberg catalog of the run whose lake is ``local``'s, as pyiceberg opens it."""
        from streaming_job.iceberg.catalog import IcebergCatalog
        from streaming_job.lake.object_store import ObjectStoreSettings

        if self.bucket_root is None:
            return IcebergCatalog(str(local)).open()
        return IcebergCatalog(self.lake(local), None, ObjectStoreSettings(self.endpoint, True),
                              self.checkpoint(local, "iceberg")).open()

    def files(self, local: Path) -> Path:
        """Where that lake's files are read back (the store's objects are files of its directory)."""
        return local if self.bucket_root is None else self.bucket_root / local.name


@contextlib.contextmanager
def shape_of(name: str) -> Iterator[Shape]:
    if name == "local":
        yield Shape()
        return
    from ingester.devstack.objectstore import ObjectStore
    from ingester.devstack.spark_cluster import SparkCluster

    with ObjectStore() as store, SparkCluster(workers=1, cores=2) as cluster:
        store.create_bucket("lake")
        root = store.data / "lake" / f"bench{os.getpid()}"
        reach = ["--s3-endpoint", store.endpoint, "--s3-path-style"]
        yield Shape(name, cluster.master, root, ["--master", cluster.master, *reach], reach, store.environment(),
                    store._server_pid(), store.endpoint)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--min-partitions", type=int, default=4)
    parser.add_argument("--max-offsets-per-trigger", type=int)
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--land-log", type=Path, help="the bulk run's log (BINLAKE_DEBUG=1: step times)")
    parser.add_argument("--latency", action="store_true", help="also measure commit-to-mirror latency")
    parser.add_argument("--rate", type=float, default=2000, help="latency: target transactions/s")
    parser.add_argument("--duration", type=float, default=20, help="latency: seconds of load")
    parser.add_argument("--preload", type=int, default=0,
                        help="latency: UPDATEs of distinct keys of a mirror of this many rows (landed first), "
                             "not INSERTs of new keys")
    parser.add_argument("--latency-only", action="store_true", help="latency: skip the bulk workload")
    parser.add_argument("--format", choices=("delta", "iceberg"), default="delta", help="the lake's table format")
    parser.add_argument("--shape", choices=("local", "cluster-s3"), default="local",
                        help="local[2] and local disk, or a standalone cluster and an S3-compatible bucket")
    args = parser.parse_args()
    (BENCH_DIR / "data").mkdir(exist_ok=True)  # a fresh clone has no workload cache yet
    with shape_of(args.shape) as shape:
        os.environ.update(shape.env)  # the store's credentials, for the jobs (never printed)
        return measure(args, shape)


def measure(args: argparse.Namespace, shape: Shape) -> int:
    latency = measure_latency(args.rate, args.duration, shape, args.land_log, lake_format=args.format,
                              preload=args.preload) if args.latency or args.latency_only else ""
    if args.latency_only:
        header = (f"# binlake land: commit-to-mirror latency\n\n{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit "
                  f"{_git_revision()}, {_cpu_model()}, {os.cpu_count()} CPUs, lake format {args.format}, "
                  f"{shape.name}.\n\n")
        args.output.write_text(header + latency)
        print(header + latency)
        return 0
    dataset = load_or_generate()
    workload = dataset.workloads["bulk"]
    with KafkaBroker() as broker, tempfile.TemporaryDirectory(prefix="bl-land-", dir=BENCH_DIR / "data") as root:
        server = workload_server(dataset, "bulk", Path(root))
        with server:
            prefix = f"land{os.getpid()}"
            run_daemon(server, broker, prefix, 301, workload.files[0])
            _check(published_rows(broker.bootstrap, prefix) == workload.row_changes, "daemon published too few")
            mirror_rows = server.execute("SELECT COUNT(*) FROM bench_bulk.orders")[0][0]
        options = ["--min-partitions", str(args.min_partitions), "--format", args.format]
        if args.max_offsets_per_trigger:
            options += ["--max-offsets-per-trigger", str(args.max_offsets_per_trigger)]
        load_before = os.getloadavg()
        lakes = [Path(root) / f"pass{n}" for n in range(WARM_UP_PASSES + RUNNING_PASSES)]
        local = ["--local-checkpoints", root] if shape.checkpoint(lakes[0], args.format).startswith(root) else []
        proc = subprocess.run([sys.executable, __file__, "--land-in-one-application", broker.bootstrap, prefix,
                               ",".join(shape.lake(p) for p in lakes), *options, *shape.land_args, *local],
                              capture_output=True, text=True, cwd=BENCH_DIR.parent, timeout=3600)
        _check(proc.returncode == 0, f"the running job failed: {proc.stderr[-2000:]}")
        passes = [_batches(text) for text in proc.stderr.split(PASS_MARK)[WARM_UP_PASSES:]]
        lake = Path(root) / "fresh"
        command = [sys.executable, "-m", "ingester.cli.main", "land", "--kafka", broker.bootstrap, "--topic-prefix",
                   prefix, "--lake", shape.lake(lake), "--checkpoint", shape.checkpoint(lake, args.format), "--trigger",
                   "available-now", *options, *shape.land_args]
        started = time.perf_counter()
        proc = subprocess.run(command, capture_output=True, text=True, cwd=BENCH_DIR.parent, timeout=3600)
        wall = time.perf_counter() - started
        load_after = os.getloadavg()
        if args.land_log:
            args.land_log.write_text(proc.stderr)
        _check(proc.returncode == 0, f"binlake land failed: {proc.stderr[-2000:]}")
        fresh = _batches(proc.stderr)
        for path, batches in (*zip(lakes[WARM_UP_PASSES:], passes, strict=True), (lake, fresh)):
            landed = int(sum(b[2] for b in batches))
            changes, mirror = _count(shape, path, args.format)
            _check(landed == workload.row_changes == changes, f"{path.name}: landed {landed}, change log {changes}, "
                   f"workload {workload.row_changes}")
            _check(mirror == mirror_rows, f"{path.name}: mirror has {mirror} rows, the server {mirror_rows}")
    report = _report(workload.row_changes, passes, fresh, wall, args, load_before, load_after, shape)
    report += "\n" + latency if latency else ""
    args.output.write_text(report)
    print(report)
    return 0


PASS_MARK = "--- measured pass ---"
RUNNING_PASSES = 3  # the running job's passes after its warm-up: the median is reported
# After a single warm-up pass, a running job's passes were still getting faster (the JVM's compiler at work:
# 1.93, 1.60, 1.37 s for the snapshot bench's 200,000 rows); after three they are steady, as a long-running
# job's micro-batches are. bench/run_snapshot.py measures its running job the same way.
WARM_UP_PASSES = 3


def land_in_one_application(bootstrap: str, prefix: str, lakes: list[str], options: list[str]) -> None:
    """Child process: one Spark application lands the prefix's topics into each of ``lakes`` in turn (each
    with its own checkpoint: the same records read anew), as a long-running job would land a backlog; the
    passes after the first are marked on stderr."""
    import argparse as ap

    from ingester.cli.run import setup_logging
    from ingester.config import Config, LandConfig
    from streaming_job.lake.object_store import ObjectStoreSettings
    from streaming_job.land.job import LandSettings, build_session, run

    parsed = ap.ArgumentParser()
    parsed.add_argument("--min-partitions", type=int)
    parsed.add_argument("--max-offsets-per-trigger", type=int)
    parsed.add_argument("--master", default="local[2]")
    parsed.add_argument("--s3-endpoint")
    parsed.add_argument("--s3-path-style", action="store_true")
    parsed.add_argument("--format", default="delta")
    parsed.add_argument("--local-checkpoints", help="the checkpoints' local directory (an Iceberg lake in a bucket)")
    extra = parsed.parse_args(options)
    setup_logging(Config(), "land")  # binlake's lines (the batches' progress) on stderr
    store = ObjectStoreSettings(extra.s3_endpoint, extra.s3_path_style)
    spark = build_session(extra.master, 2, store=store if extra.s3_endpoint else None)
    for n, lake in enumerate(lakes):
        if n:
            print(PASS_MARK, file=sys.stderr, flush=True)
        checkpoint = f"{lake}/_checkpoint" if extra.local_checkpoints is None else \
            f"{extra.local_checkpoints}/{lake.rsplit('/', 1)[1]}_checkpoint"
        land = LandConfig(lake=lake, checkpoint=checkpoint, trigger="available-now",
                          min_partitions=extra.min_partitions, max_offsets_per_trigger=extra.max_offsets_per_trigger,
                          format=extra.format)
        run(LandSettings(bootstrap, prefix, land, master=extra.master, store=store), spark)
    spark.stop()


def _batches(log: str) -> list[tuple[float, ...]]:
    return [tuple(map(float, m.groups())) for m in BATCH_LINE.finditer(log)]


def measure_latency(rate: float, duration: float, shape: Shape, land_log: Path | None = None,
                    writers: int = 3, lake_format: str = "delta", preload: int = 0) -> str:
    """Single-row transactions at ``rate``/s for ``duration`` s through `binlake run` and `binlake land
    --trigger 1s`, once two warm-up rows have landed (steady state: the first micro-batches of a process pay
    the JVM's warm-up once); a row's latency is the commit time of the first mirror version holding it
    (Delta history) minus the time its INSERT returned (autocommit).

    With ``preload`` rows, the transactions are UPDATEs of distinct existing keys spread over a mirror of that
    many rows (landed first, through the binlog, in transactions of 50,000 rows): each sets ``v`` to a value of
    its own, and its latency is the commit time of the first mirror version holding that value."""
    options = {"sync_binlog": 0, "innodb_flush_log_at_trx_commit": 0, "innodb_buffer_pool_size": "128M"}
    prefix = f"landlat{os.getpid()}"
    with KafkaBroker() as broker, MariaDBServer(binlog_row_metadata="FULL", options=options) as server, \
            tempfile.TemporaryDirectory(prefix="bl-lat-", dir=BENCH_DIR / "data") as root:
        server.execute("CREATE DATABASE bench_lat")
        if preload:
            server.execute("CREATE TABLE bench_lat.t (id BIGINT NOT NULL PRIMARY KEY, w TINYINT NOT NULL, "
                           "v BIGINT NOT NULL, note VARCHAR(40) NOT NULL)")
            server.execute("INSERT INTO bench_lat.t VALUES (0, 0, 0, 'warm-up')")
        else:
            server.execute("CREATE TABLE bench_lat.t (id BIGINT NOT NULL PRIMARY KEY, w TINYINT NOT NULL)")
            server.execute("INSERT INTO bench_lat.t VALUES (0, 0)")  # warm-up row
        lake = Path(root) / "lake"
        logs = Path(root)
        procs = [
            subprocess.Popen([sys.executable, "-m", "ingester.cli.main", "run", "--source", server.url, "--kafka",
                              broker.bootstrap, "--topic-prefix", prefix, "--server-id", "902"],
                             stdout=subprocess.DEVNULL, stderr=open(logs / "run.log", "wb"), cwd=BENCH_DIR.parent),
            subprocess.Popen([sys.executable, "-m", "ingester.cli.main", "land", "--kafka", broker.bootstrap,
                              "--topic-prefix", prefix, "--lake", shape.lake(lake), "--checkpoint",
                              shape.checkpoint(lake, lake_format), "--trigger", "1s", "--format", lake_format,
                              *shape.land_args],
                             stdout=subprocess.DEVNULL, stderr=open(logs / "land.log", "wb"), cwd=BENCH_DIR.parent),
        ]
        try:
            # Steady state: the first batch creates the mirror, the second pays the first MERGE's JVM warm-up
            _wait_landed(logs / "land.log", 1, procs, 300)
            if preload:
                for low in range(1, preload + 1, PRELOAD_TX_ROWS):
                    high = min(preload, low + PRELOAD_TX_ROWS - 1)
                    server.execute(f"INSERT INTO bench_lat.t SELECT seq, 0, 0, CONCAT('preloaded row ', seq) "
                                   f"FROM bench_lat.seq_{low}_to_{high}")  # MariaDB's Sequence engine
                _wait_landed(logs / "land.log", 1 + preload, procs, 900)
                server.execute("UPDATE bench_lat.t SET w = 1 WHERE id = 0")
                _wait_landed(logs / "land.log", 2 + preload, procs, 300)
                commits, elapsed = steady_inserts(server, "UPDATE bench_lat.t SET v = %s, w = %s WHERE id = %s",
                                                  rate, duration, writers,
                                                  lambda row, index: (row, index, _spread(row, preload)))
                _wait_landed(logs / "land.log", 2 + preload + len(commits), procs, 900)
            else:
                server.execute("INSERT INTO bench_lat.t VALUES (-1, 0)")
                _wait_landed(logs / "land.log", 2, procs, 300)
                commits, elapsed = steady_inserts(server, "INSERT INTO bench_lat.t VALUES (%s, %s)", rate, duration,
                                                  writers)
                _wait_landed(logs / "land.log", 2 + len(commits), procs, 600)
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if land_log:
                land_log.with_suffix(".latency.log").write_bytes((logs / "land.log").read_bytes())
        if preload:
            landed = (_first_snapshots(shape.iceberg(lake), "v") if lake_format == "iceberg"
                      else _first_values(shape.files(lake) / "bench_lat" / "t"))
        else:
            landed = (_first_snapshots(shape.iceberg(lake)) if lake_format == "iceberg"
                      else _first_versions(shape.files(lake) / "bench_lat" / "t"))
    latencies = sorted(landed[i] - t for i, t in commits.items())
    _check(len(latencies) == len(commits), "rows missing from the mirror")

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))]

    achieved = len(commits) / elapsed
    what = (f"Single-row autocommit UPDATEs of distinct keys spread over a mirror of {preload:,} rows (landed "
            "first)" if preload else "Single-row autocommit INSERTs")
    return "\n".join([
        "## Commit-to-mirror latency" + (f", updates against a {preload:,}-row mirror" if preload else ""),
        "",
        f"{what} from {writers} threads, target {rate:,.0f}/s for {duration:.0f} s "
        f"(achieved {achieved:,.0f}/s, {len(commits):,} transactions); `binlake run` and `binlake land --trigger 1s`"
        f" ({shape.name}, {lake_format})"
        " running alongside on the same 2 CPUs, measured once two warm-up rows have landed (mirror created, first"
        " MERGE done). Latency: the commit of the first mirror version (Delta) or snapshot (Iceberg) holding the row"
        " minus the time the INSERT returned.",
        "",
        "| p50 | p90 | p99 | max |",
        "|---|---|---|---|",
        f"| {pct(0.5):.2f} s | {pct(0.9):.2f} s | {pct(0.99):.2f} s | {latencies[-1]:.2f} s |",
        "",
        f"Goal p99 < 5 s: {'met' if pct(0.99) < 5 else 'not met'}.",
        "",
    ])


PRELOAD_TX_ROWS = 50_000
_SPREAD = 7_919  # a prime: row -> row * _SPREAD mod n is one-to-one for n not divisible by it


def _spread(row: int, rows: int) -> int:
    """The key the latency workload's ``row``-th update changes: distinct keys spread over 1..rows."""
    return 1 + (row * _SPREAD) % rows


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
    time travel: a Spark read of each version of a large mirror takes seconds)."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    table = DeltaTable(str(path))
    first: dict[int, float] = {}
    for entry in sorted(table.history(), key=lambda h: h["version"]):
        table.load_as_version(entry["version"])
        values = table.to_pyarrow_dataset().to_table(columns=["v"], filter=pc.field("v") > 0).column("v")
        for v in values.to_pylist():
            first.setdefault(v, entry["timestamp"] / 1000)
    return first


def _count(shape: Shape, local: Path, lake_format: str = "delta") -> tuple[int, int]:
    """Rows of the change log and of the mirror, read back with a fresh Spark session (pyiceberg: Iceberg's)."""
    from streaming_job.land.job import build_session

    if lake_format == "iceberg":
        catalog = shape.iceberg(local)
        changes, mirror = (len(catalog.load_table(("bench_bulk", t)).scan().to_arrow())
                           for t in ("orders__changes", "orders"))
        return changes, mirror

    spark = build_session("local[2]", 2, "binlake-land-bench-check")
    try:
        table = shape.files(local) / "bench_bulk"
        read = spark.read.format("delta").load
        return read(str(table / "orders__changes")).count(), read(str(table / "orders")).count()
    finally:
        spark.stop()


def _rate(batches: list[tuple[float, ...]]) -> tuple[int, float, float]:
    rows, seconds = int(sum(b[2] for b in batches)), sum(b[3] for b in batches)
    return rows, seconds, rows / seconds


def _report(rows: int, passes: list[list[tuple[float, ...]]], fresh: list[tuple[float, ...]], wall: float,
            args: argparse.Namespace, load_before: tuple[float, ...], load_after: tuple[float, ...],
            shape: Shape) -> str:
    import pyspark

    rates = sorted(_rate(p)[2] for p in passes)
    run_rate = statistics.median(rates)
    _, fresh_s, fresh_rate = _rate(fresh)

    def verdict(rate: float) -> str:
        return "meets" if rate >= GOAL_ROWS_PER_S else "misses"

    def per_batch(batches: list[tuple[float, ...]]) -> str:
        return ", ".join(f"{int(b[1])}/{int(b[2])}/{b[3]:.1f}s" for b in batches)

    lines = [
        "# binlake land benchmark",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {_git_revision()}, {_cpu_model()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, pyspark {pyspark.__version__}, "
        + ("Spark local[2], local disk, " if shape.name == "local" else "a Spark standalone cluster (a master and a "
           "worker of 2 cores: executors in JVMs of their own), the lake in an S3Proxy bucket through s3a, all "
           "on the same 2 CPUs as Kafka and MariaDB, ")
        + f"minPartitions {args.min_partitions}, maxOffsetsPerTrigger {args.max_offsets_per_trigger or 'none'}, "
        f"lake format {args.format}.",
        f"Load average before/after (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in load_before)} / "
        f"{', '.join(f'{x:.1f}' for x in load_after)} (other jobs share the 2 CPUs).",
        "",
        "Bulk workload (bench/workloads.py): one table, 230,000 row changes (130,000 inserts, 60,000 updates, "
        "40,000 deletes), published by `binlake run` beforehand, then landed by a running job and by a fresh "
        "process (change log and mirror checked each time against the workload and the server's row count).",
        "",
        "| measure | value |",
        "|---|---|",
        f"| row changes landed per run | {rows:,} |",
        f"| **running job** (one Spark application lands the topics {WARM_UP_PASSES} times, then {len(passes)} "
        "times more, each into a "
        f"new lake; median) | **{run_rate:,.0f} rows/s** ({verdict(run_rate)} the {GOAL_ROWS_PER_S:,} goal; "
        f"passes: {', '.join(f'{r:,.0f}' for r in rates)}) |",
        f"| fresh process (`binlake land --trigger available-now`): micro-batches after its start and warm-up "
        f"| {len(fresh)}, {fresh_s:.1f} s: {fresh_rate:,.0f} rows/s ({verdict(fresh_rate)} the goal) |",
        f"| fresh process, whole run incl. Spark's start, warm-up and shutdown | {wall:.1f} s ({rows / wall:,.0f} "
        "rows/s) |",
        "",
        "Per batch (records in, row changes, seconds): running job "
        + "; ".join(f"pass {n + 1}: {per_batch(p)}" for n, p in enumerate(passes))
        + f"; fresh process: {per_batch(fresh)}",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--land-in-one-application"]:
        bootstrap_, prefix_, lakes_, *options_ = sys.argv[2:]
        land_in_one_application(bootstrap_, prefix_, lakes_.split(","), options_)
        sys.exit(0)
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        sys.exit(1)
