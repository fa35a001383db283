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
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from land_latency import BATCH_LINE, measure_latency
from land_shapes import Shape, shape_of
from run_daemon import published_rows, run_daemon, workload_server
from run_decode import BenchError, _check, _cpu_model, _git_revision
from workloads import load_or_generate

from ingester.devstack.kafka import KafkaBroker

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "land.md"
GOAL_ROWS_PER_S = 100_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--min-partitions", type=int, default=4, help="0: none (land.min_partitions' default)")
    parser.add_argument("--max-offsets-per-trigger", type=int)
    parser.add_argument("--kafka-source", choices=("auto", "binlake", "spark"), default="auto",
                        help="land.kafka_source of the bulk workload's jobs")
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
        options = ["--min-partitions", str(args.min_partitions), "--format", args.format, "--kafka-source",
                   args.kafka_source]
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
    parsed.add_argument("--kafka-source", default="auto")
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
                          format=extra.format, kafka_source=extra.kafka_source)
        run(LandSettings(bootstrap, prefix, land, master=extra.master, store=store), spark)
    spark.stop()


def _batches(log: str) -> list[tuple[float, ...]]:
    return [tuple(map(float, m.groups())) for m in BATCH_LINE.finditer(log)]


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
        f"land.kafka_source {args.kafka_source}, lake format {args.format}.",
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
