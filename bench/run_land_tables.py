"""`binlake land` when a micro-batch touches many tables: how its cost grows with the number of tables.

For each N (default 1, 10, 100, 200, 500): N tables in a fresh database, `binlake run` and `binlake land
--trigger 1s` running (child processes, Spark local[2]) on the same 2 CPUs as MariaDB and Kafka, then
rounds of one single-row transaction per table (an UPDATE of each table's one row). Measured per round:

- the time from the round's last source commit to the Delta commit of the last mirror to change (the
  commit files' times), the round's *latency*;
- the duration of the micro-batches that landed the round (their own batch lines).

The first round creates the N change logs and mirrors (reported apart, as "new tables"); the median of
the following rounds is the steady figure. Then a restart: the land job is stopped, one more round is
written, a new `binlake land` process starts, and the time from its start to the end of the batch that
lands the round is reported (with N existing tables).

    .venv/bin/python bench/run_land_tables.py [--tables 1,10,100,200,500] [--rounds 5]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from land_shapes import Shape, shape_of
from run_decode import BenchError, _check, _cpu_model, _git_revision, stop_processes

from ingester.devstack.kafka import KafkaBroker
from ingester.devstack.mariadb import MariaDBServer

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "land_tables.md"
BATCH = re.compile(r"^(\S+ \S+) .*batch (\d+): (\d+) records in, (\d+) row changes landed in ([\d.]+)s", re.M)
GOAL_LATENCY_S = 2.0
GOAL_RESTART_S = 30.0


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _batches(log: Path) -> list[tuple[float, int, float]]:
    """(end time, row changes, seconds) of each batch line of a land log."""
    return [(_stamp(m.group(1)), int(m.group(4)), float(m.group(5)))
            for m in BATCH.finditer(log.read_text(errors="replace"))]


def _versions(lake: Path, db: str, n: int) -> list[int]:
    """Each mirror's newest Delta version (-1: none yet)."""
    out = []
    for i in range(n):
        try:
            names = os.listdir(lake / db / f"t{i:04d}" / "_delta_log")
        except FileNotFoundError:
            names = []
        out.append(max((int(x[:20]) for x in names if x.endswith(".json") and x[:20].isdigit()), default=-1))
    return out


def _wait_mirrors(lake: Path, db: str, before: list[int], procs: list[subprocess.Popen], timeout: float) -> float:
    """Once every mirror has a version after ``before``: the time the last of them had its first one
    (the commit file's modification time)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = _versions(lake, db, len(before))
        if all(v > b for v, b in zip(now, before, strict=True)):
            return max((lake / db / f"t{i:04d}" / "_delta_log" / f"{b + 1:020d}.json").stat().st_mtime
                       for i, b in enumerate(before))
        if any(p.poll() is not None for p in procs):
            raise BenchError(f"a process exited early; see {lake}")
        time.sleep(0.05)
    raise BenchError(f"the mirrors of {db} did not all change within {timeout:.0f} s")


def _land(bootstrap: str, prefix: str, lake: Path, log: Path, shape: Shape) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ingester.cli.main", "land", "--kafka", bootstrap, "--topic-prefix",
                             prefix, "--lake", shape.lake(lake), "--checkpoint", f"{shape.lake(lake)}/_cp",
                             "--trigger", "1s", *shape.land_args],
                            stdout=subprocess.DEVNULL, stderr=open(log, "ab"), cwd=BENCH_DIR.parent,
                            env={**os.environ, **shape.env})


def _round(server: MariaDBServer, db: str, n: int, value: int) -> float:
    """One single-row UPDATE per table (autocommit); the time the last one returned."""
    with server.connect(db) as conn, conn.cursor() as cur:
        for i in range(n):
            cur.execute(f"UPDATE t{i:04d} SET v = %s WHERE id = 1", (value,))
        return time.time()


def measure(server: MariaDBServer, broker: KafkaBroker, root: Path, n: int, rounds: int, shape: Shape,
            keep: Path | None = None) -> dict[str, object]:
    db, prefix = f"wide{n}", f"wide{n}x{os.getpid()}"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    with server.connect(db) as conn, conn.cursor() as cur:
        for i in range(n):
            cur.execute(f"CREATE TABLE t{i:04d} (id INT PRIMARY KEY, v BIGINT NOT NULL, s VARCHAR(20))")
    written, logs = root / f"lake{n}", root / f"logs{n}"
    lake = shape.files(written)  # where the lake's files are read (a bucket's objects: the store's directory)
    logs.mkdir()
    daemon = subprocess.Popen([sys.executable, "-m", "ingester.cli.main", "run", "--source", server.url, "--kafka",
                               broker.bootstrap, "--topic-prefix", prefix, "--server-id", str(900 + n % 97)],
                              stdout=subprocess.DEVNULL, stderr=open(logs / "run.log", "wb"), cwd=BENCH_DIR.parent)
    land_log = logs / "land.log"
    procs = [daemon, _land(broker.bootstrap, prefix, written, land_log, shape)]
    try:
        time.sleep(3)  # the daemon streams from the server's position at its start
        with server.connect(db) as conn, conn.cursor() as cur:
            for i in range(n):
                cur.execute(f"INSERT INTO t{i:04d} VALUES (1, 0, 'x')")
            first_commit = time.time()
        new_tables = _wait_mirrors(lake, db, [-1] * n, procs, 1800) - first_commit
        latencies: list[float] = []
        durations: list[float] = []
        store_cpu = shape.store_cpu()
        for r in range(1, rounds + 1):
            before, seen = _versions(lake, db, n), len(_batches(land_log))
            last = _round(server, db, n, r)
            latencies.append(_wait_mirrors(lake, db, before, procs, 1800) - last)
            time.sleep(0.5)  # the batch line follows the commits
            durations += [b[2] for b in _batches(land_log)[seen:] if b[1]]
        store_cpu = (shape.store_cpu() - store_cpu) / rounds
        stop_processes(procs[1:], 120)
        before = _versions(lake, db, n)
        _round(server, db, n, rounds + 1)
        time.sleep(2)  # the daemon publishes the round before the job starts
        started = time.time()
        procs[1] = _land(broker.bootstrap, prefix, written, land_log, shape)
        restart = _wait_mirrors(lake, db, before, procs, 1800) - started
    finally:
        stop_processes(procs, 120)
        if keep is not None:
            import shutil

            shutil.copytree(logs, keep / f"logs{n}", dirs_exist_ok=True)
    _check(latencies and durations, f"no rounds landed for {n} tables")
    return {"tables": n, "new_tables_s": new_tables, "latency_s": statistics.median(latencies),
            "latency_max_s": max(latencies), "batch_s": statistics.median(durations), "restart_s": restart,
            "store_cpu_s": store_cpu, "latencies": latencies}


def report(results: list[dict[str, object]], args: argparse.Namespace, wall: float, shape: Shape) -> str:
    rows = []
    store = shape.store_pid is not None
    for r in results:
        rows.append(f"| {r['tables']:,} | {r['latency_s']:.2f} s | {r['latency_max_s']:.2f} s | {r['batch_s']:.2f} s "
                    f"| {r['new_tables_s']:.1f} s | {r['restart_s']:.1f} s |"
                    + (f" {r['store_cpu_s']:.2f} s |" if store else ""))
    slope = ""
    if len(results) > 1:
        a, b = results[0], results[-1]
        per_table = (float(b["batch_s"]) - float(a["batch_s"])) / (int(b["tables"]) - int(a["tables"]))  # type: ignore
        slope = (f"Batch time grows by {per_table * 1000:.1f} ms per extra table between {a['tables']} and "
                 f"{b['tables']} tables (goal < 10 ms).")
    by_n = {int(r["tables"]): r for r in results}  # type: ignore[call-overload]
    goals = []
    if 200 in by_n:
        goals.append(f"200 tables: median latency {by_n[200]['latency_s']:.2f} s (goal 2 s, at most 5 s): "
                     f"{'met' if float(by_n[200]['latency_s']) <= GOAL_LATENCY_S else 'not met'}.")  # type: ignore
    if 500 in by_n:
        goals.append(f"Restart with 500 existing tables: first batch {by_n[500]['restart_s']:.1f} s after the job's "
                     f"start (goal 30 s): {'met' if float(by_n[500]['restart_s']) <= GOAL_RESTART_S else 'not met'}.")  # type: ignore
    where = ("Spark local[2], local lake" if shape.name == "local" else "a Spark standalone cluster of one 2-core "
             "worker, the lake in an S3Proxy bucket through s3a and pyarrow, the store and the cluster on this machine")
    return "\n".join([
        "# binlake land: micro-batches that touch many tables",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {_git_revision()}, {_cpu_model()} ({os.cpu_count()} CPUs), "
        f"Python {platform.python_version()}; {args.rounds} rounds per size, {wall:.0f} s in all.",
        "",
        "`binlake run` and `binlake land --trigger 1s` (" + where + ") run beside MariaDB and Kafka on the same"
        " CPUs. A round is one single-row UPDATE per table (autocommit). Latency: from the round's last"
        " commit to the Delta commit of the last mirror to change (median and max over the rounds); batch: the"
        " median duration of the micro-batches that landed them; new tables: the first round, which creates every"
        " change log and mirror; restart: a new `binlake land` process with the tables existing, from its start"
        " to the commit of the last mirror of one round." + (" Store CPU per round: the CPU seconds the object"
        " store's process (S3Proxy, on these same 2 CPUs; a real S3 does this work on its own machines) spent per"
        " round." if store else ""),
        "",
        "| tables | latency (median) | latency (max) | batch | new tables | restart |" + (" store CPU per round |"
                                                                                     if store else ""),
        "|---|---|---|---|---|---|" + ("---|" if store else ""),
        *rows,
        "",
        slope,
        "",
        *goals,
        "",
    ])


@contextlib.contextmanager
def bench_stack(prefix: str) -> Iterator[tuple[KafkaBroker, MariaDBServer, Path]]:
    """A broker, a MariaDB server (FULL metadata, no fsync per commit) and a scratch directory under
    bench/data, for the benches that run `binlake run` and `binlake land` beside them."""
    (BENCH_DIR / "data").mkdir(exist_ok=True)
    options = {"sync_binlog": 0, "innodb_flush_log_at_trx_commit": 0, "innodb_buffer_pool_size": "256M"}
    with KafkaBroker() as broker, MariaDBServer(binlog_row_metadata="FULL", options=options) as server, \
            tempfile.TemporaryDirectory(prefix=prefix, dir=BENCH_DIR / "data") as root:
        yield broker, server, Path(root)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", default="1,10,100,200,500")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--shape", choices=("local", "cluster-s3"), default="local",
                        help="local[2] and local disk, or a standalone cluster and an S3-compatible bucket")
    parser.add_argument("--keep-logs", type=Path, help="copy each size's run and land logs here "
                        "(BINLAKE_DEBUG=1: the job's step times)")
    args = parser.parse_args()
    started = time.monotonic()
    results = []
    with bench_stack("bl-tables-") as (broker, server, root), shape_of(args.shape) as shape:
        for n in (int(x) for x in args.tables.split(",")):
            results.append(measure(server, broker, root, n, args.rounds, shape, args.keep_logs))
            print(f"{n} tables: {results[-1]}", file=sys.stderr, flush=True)
    text = report(results, args, time.monotonic() - started, shape)
    args.output.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
