"""A big backlog in Kafka landed by `binlake land --trigger available-now` (issue 39, "Big backlogs"): rows/s and
peak memory as the backlog grows, micro-batches bounded in bytes (land.max_batch_bytes, default 64 MiB) against one
batch of the whole backlog (--max-batch-bytes 0, binlake's behaviour before the bound), and with each bound the
batches a driver keeps whole (land.driver_rows: the default against the 1,000,000 row changes it was before; a batch
of more rows is decoded again in Spark and landed by its jobs).

One table of five columns (BIGINT key, INT, VARCHAR, DOUBLE, DATETIME) filled with N rows by multi-row INSERTs of
100,000 rows each (MariaDB's sequence engine), published by `binlake run --exit-at-end` into a private Kafka broker
(timed apart), then landed into a new local Delta lake by each configuration in turn. Each landing is checked: the
mirror as delta-rs reads it has N rows and the ids' sum the server's. Reported per size and configuration: the
wall time of the process (Spark's start included), rows/s, micro-batches, and the peak resident memory of the
process group (the driver's Python and JVM, Spark's Python workers), sampled every 0.5 s, over the whole run and
its middle and last thirds (flat memory: the last third's peak no higher than the middle's; the first holds Spark's
start), and the driver's Python process's own peak. ``--code``: source trees (git worktrees) whose `binlake land`
lands the same backlog in turn, side by side (default: this one).

    .venv/bin/python bench/run_backlog.py [--rows 1000000 10000000] [--bounds 67108864 0]
        [--driver-rows 4000000 1000000] [--code DIR ...] [--output FILE]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from land_latency import BATCH_LINE
from run_decode import _cpu_model, _git_revision
from soak import group_rss_mib

from ingester.config import LandConfig
from ingester.devstack.kafka import KafkaBroker
from ingester.devstack.mariadb import MariaDBServer

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "backlog.md"
BINLAKE = [sys.executable, "-m", "ingester.cli.main"]
CHUNK = 100_000
GOAL_ROWS_PER_S = 150_000


@dataclass
class Landing:
    """One landing of a backlog."""

    rows: int
    bound: int
    driver_rows: int
    ok: bool
    wall_s: float
    batch_s: float  # the micro-batches' own time (the job's progress lines)
    batches: int
    peak_rss_mib: float
    thirds: tuple[float, float]  # the peak RSS of the run's middle and last thirds (flat memory: the last no higher)
    note: str
    code: str = ""  # the source tree's commit
    driver_mib: float = 0.0  # the driver's Python process's own peak RSS


def fill(server: MariaDBServer, rows: int) -> None:
    server.execute("CREATE DATABASE IF NOT EXISTS big")
    server.execute("CREATE TABLE big.t (id BIGINT PRIMARY KEY, a INT, b VARCHAR(32), c DOUBLE, d DATETIME)")
    for lo in range(1, rows + 1, CHUNK):
        hi = min(rows, lo + CHUNK - 1)
        server.execute(f"INSERT INTO big.t SELECT seq, seq % 1000, CONCAT('row-', seq), seq * 1.5, "
                       f"'2026-01-01' + INTERVAL seq SECOND FROM big.seq_{lo}_to_{hi}")


def publish(server: MariaDBServer, broker: KafkaBroker, prefix: str) -> float:
    started = time.monotonic()
    subprocess.run([*BINLAKE, "run", "--source", server.url, "--kafka", broker.bootstrap, "--topic-prefix", prefix,
                    "--exit-at-end", "--server-id", "4242"], check=True, env=os.environ | {"BINLAKE_FILTERS_INCLUDE":
                                                                                           "big.*"})
    return time.monotonic() - started


def land(broker: KafkaBroker, prefix: str, lake: Path, rows: int, bound: int, driver_rows: int,
         want_sum: int, code: Path = BENCH_DIR.parent) -> Landing:
    log = lake.with_suffix(".log")
    command = [*BINLAKE, "land", "--kafka", broker.bootstrap, "--topic-prefix", prefix, "--lake", str(lake),
               "--checkpoint", str(lake / "_checkpoint"), "--trigger", "available-now", "--max-batch-bytes",
               str(bound), "--driver-rows", str(driver_rows)]
    samples: list[tuple[float, float]] = []
    driver: list[float] = []
    done = threading.Event()
    started = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=code,
                                env=os.environ | {"BINLAKE_DEBUG": "1", "PYTHONPATH": str(code)})

        def sample() -> None:
            while not done.wait(0.5):
                samples.append((time.monotonic(), group_rss_mib(proc.pid)))
                driver.append(_rss_mib(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            code = proc.wait(timeout=3600)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code = -9
        done.set()
        sampler.join()
    wall = time.monotonic() - started
    peak = max((m for _, m in samples), default=0.0)
    thirds = tuple(max((m for t, m in samples if lo <= (t - started) / wall < hi), default=0.0)
                   for lo, hi in ((1 / 3, 2 / 3), (2 / 3, 2)))
    text = log.read_text(errors="replace")
    progress = list(BATCH_LINE.finditer(text))
    batches = len({m.group(1) for m in progress})
    spans = [float(m.group(4)) for m in progress]
    note = ""
    ok = code == 0
    if ok:
        from deltalake import DeltaTable

        table = DeltaTable(str(lake / "big" / "t")).to_pyarrow_table(columns=["id"])
        found = (table.num_rows, sum(table.column("id").to_pylist()))
        ok = found == (rows, want_sum)
        note = "" if ok else f"mirror has {found[0]:,} rows, ids' sum {found[1]}"
    else:
        last = [line for line in text.splitlines() if line.strip()][-1:] or ["no output"]
        note = f"exit {code}: {last[0][:200]}"
    return Landing(rows, bound, driver_rows, ok, wall, sum(spans), batches, peak, (thirds[0], thirds[1]), note,
                   _git_revision(code), max(driver, default=0.0))


def _rss_mib(pid: int) -> float:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, IndexError, ValueError):
        return 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--bounds", type=int, nargs="+", default=[64 << 20, 0])
    parser.add_argument("--driver-rows", type=int, nargs="+", default=[LandConfig.driver_rows, 1_000_000])
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--code", type=Path, nargs="+", default=[BENCH_DIR.parent],
                        help="source trees whose binlake lands the backlog, in turn")
    parser.add_argument("--work", type=Path, help="keep the lakes and the landing logs here (default: a temporary "
                                                  "directory, removed)")
    args = parser.parse_args()
    results: list[Landing] = []
    published: dict[int, float] = {}
    for rows in args.rows:
        with tempfile.TemporaryDirectory(prefix="binlake-backlog-") as temporary, MariaDBServer() as server, \
                KafkaBroker() as broker:
            work = args.work / f"rows-{rows}" if args.work else Path(temporary)
            work.mkdir(parents=True, exist_ok=True)
            print(f"backlog: {rows:,} rows into MariaDB ...", flush=True)
            fill(server, rows)
            published[rows] = publish(server, broker, "bl")
            print(f"backlog: published in {published[rows]:.1f} s", flush=True)
            for n, code, bound, driver_rows in [(n, c, b, d) for n, c in enumerate(args.code) for b in args.bounds
                                                for d in args.driver_rows]:
                result = land(broker, "bl", Path(work) / f"lake-{n}-{bound}-{driver_rows}", rows, bound, driver_rows,
                              rows * (rows + 1) // 2, code)
                results.append(result)
                print(f"backlog: {rows:,} rows, bound {bound >> 20} MiB, driver rows {driver_rows:,}: "
                      f"{'ok' if result.ok else 'FAILED'} "
                      f"{result.wall_s:.1f} s, {result.batches} batches, peak {result.peak_rss_mib:,.0f} MiB "
                      f"(driver's Python {result.driver_mib:,.0f} MiB, code {result.code}) "
                      f"{result.note}", flush=True)
    write(args.output, results, published)
    return 0 if all(r.ok for r in results if r.bound) else 1


def write(path: Path, results: list[Landing], published: dict[int, float]) -> None:
    lines = [
        "# Big backlogs: `binlake land --trigger available-now` on one table's backlog in Kafka",
        "",
        f"{time.strftime('%Y-%m-%d')}, {_cpu_model()}, {os.cpu_count()} CPUs, binlake {_git_revision()}, "
        "`python bench/run_backlog.py` (local lake, Delta, Spark local[2], the driver's default memory). Each "
        "landing checked: the mirror (delta-rs) has every row and the server's sum of ids.",
        "",
        "| code | rows | published (s) | max batch | driver rows | result | wall (s) | rows/s (wall) | "
        "rows/s (batches) | batches | peak RSS (MiB) | peak RSS, middle / last third of the run (MiB) "
        "| driver's Python peak (MiB) |",
        "|---|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        bound = f"{r.bound >> 20} MiB" if r.bound else "none (one batch)"
        rate = f"{r.rows / r.wall_s:,.0f}" if r.ok else "-"
        within = f"{r.rows / r.batch_s:,.0f}" if r.ok and r.batch_s else "-"
        lines.append(f"| {r.code} | {r.rows:,} | {published[r.rows]:.0f} | {bound} | {r.driver_rows:,} | "
                     f"{'ok' if r.ok else 'failed: ' + r.note} | {r.wall_s:.0f} | {rate} | {within} | {r.batches} | "
                     f"{r.peak_rss_mib:,.0f} | {r.thirds[0]:,.0f} / {r.thirds[1]:,.0f} | {r.driver_mib:,.0f} |")
    lines += ["", f"Goal (issue 39): at least {GOAL_ROWS_PER_S:,} rows/s with flat memory.", ""]
    path.write_text("\n".join(lines))
    print(path.read_text())


if __name__ == "__main__":
    sys.exit(main())
