"""Decode throughput: `binlake dump --format jsonl` against python-mysql-replication, side by side.

Both read the same binlog events, served by the same private MariaDB: binlake from the files, the
competitor over the replication protocol. Needs `pip install -r bench/requirements.txt` (or bench/run).
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import pstats
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import orjson

try:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import MariadbGtidEvent, QueryEvent, RotateEvent, XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, RowsEvent, UpdateRowsEvent, WriteRowsEvent
except ModuleNotFoundError:
    sys.exit("bench: python-mysql-replication is missing; run `.venv/bin/pip install -r bench/requirements.txt` "
             "(or use bench/run, which does)")

from workloads import Dataset, load_or_generate

from ingester.codec.events import RowsEvent as BinlakeRowsEvent
from ingester.devstack.mariadb import MariaDBServer
from ingester.sources.binlog_file import read_binlog_file

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "decode.md"
GNU_TIME = Path("/usr/bin/time")
ROW_TYPES = frozenset(("write_rows", "update_rows", "delete_rows"))
# What the competitor is asked for, per workload; the OLTP rate counts these events, the bulk rate rows.
COMPETITOR_EVENTS: dict[str, list[type]] = {
    "bulk": [WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
    "oltp": [MariadbGtidEvent, QueryEvent, XidEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
}
COUNTED_TYPES = {"bulk": ROW_TYPES, "oltp": ROW_TYPES | {"mariadb_gtid", "query", "xid"}}
UNIT = {"bulk": "rows", "oltp": "events"}


class BenchError(RuntimeError):
    """A reader failed or the readers disagree on what the workload holds."""


@dataclass(slots=True)
class Timings:
    """Wall times of every run of one reader on one workload."""

    seconds: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


@dataclass(slots=True)
class Result:
    """One workload's measurements; `count` is what the rate divides (rows or events)."""

    count: int = 0
    events: int = 0  # the competitor's kinds of events in the workload, as binlake emitted them
    dump: Timings = field(default_factory=Timings)
    dump_one_process: Timings = field(default_factory=Timings)
    in_process: Timings = field(default_factory=Timings)
    competitor: Timings = field(default_factory=Timings)
    dump_peak_rss_kib: dict[str, int] = field(default_factory=lambda: {"default": 0, "one process": 0})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is reported")
    parser.add_argument("--regenerate", action="store_true", help="rebuild the cached workload binlogs")
    parser.add_argument("--profile", choices=("bulk", "oltp"),
                        help="instead of the benchmark: cProfile binlake dump on this workload, top 25 by tottime")
    parser.add_argument("--output", type=Path, default=RESULTS, help=f"markdown report (default {RESULTS})")
    args = parser.parse_args()
    dataset = load_or_generate(args.regenerate)
    if args.profile:
        profile_dump(dataset.paths(args.profile))
        return 0
    try:
        with dataset.server() as server:
            results = measure(dataset, server, args.repeat)
            report = render(dataset, results, args.repeat, server.execute("SELECT VERSION()")[0][0])
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)
    print(f"written to {args.output}")
    return 0


def measure(dataset: Dataset, server: MariaDBServer, repeat: int) -> dict[str, Result]:
    """Count each workload once (untimed), then time the three readers in turn, `repeat` times."""
    results: dict[str, Result] = {}
    for name, workload in dataset.workloads.items():
        types, rows = count_dump(dataset.paths(name))
        _check(rows == workload.row_changes, f"binlake dump emitted {rows} rows of {name}, "
               f"the workload made {workload.row_changes} row changes")
        events = sum(types[t] for t in COUNTED_TYPES[name])
        results[name] = Result(count=rows if name == "bulk" else events, events=events)
    server_ids = itertools.count(100)
    for run in range(1, repeat + 1):
        for name, result in results.items():
            paths = dataset.paths(name)
            expected_rows = dataset.workloads[name].row_changes
            for timings, rss_key, options in ((result.dump, "default", []),
                                               (result.dump_one_process, "one process", ["--jobs", "1"])):
                seconds, rss = time_dump(paths, options)
                timings.seconds.append(seconds)
                result.dump_peak_rss_kib[rss_key] = max(result.dump_peak_rss_kib[rss_key], rss)

            started = time.perf_counter()
            rows = decode_in_process(paths)
            result.in_process.seconds.append(time.perf_counter() - started)
            _check(rows == expected_rows, f"in-process decode gave {rows} rows of {name}, not {expected_rows}")

            started = time.perf_counter()
            events, rows = read_competitor(server, dataset, name, next(server_ids))
            result.competitor.seconds.append(time.perf_counter() - started)
            _check(rows == expected_rows and events == result.events,
                   f"python-mysql-replication read {events} events and {rows} rows of {name}; binlake "
                   f"emitted {result.events} such events and {expected_rows} rows")
            print(f"run {run}/{repeat} {name}: dump {result.dump.seconds[-1]:.2f}s, "
                  f"dump --jobs 1 {result.dump_one_process.seconds[-1]:.2f}s, "
                  f"in-process {result.in_process.seconds[-1]:.2f}s, "
                  f"python-mysql-replication {result.competitor.seconds[-1]:.2f}s", file=sys.stderr)
    return results


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise BenchError(message)


def stop_processes(procs: list[subprocess.Popen], timeout: float = 60) -> None:
    """SIGTERM to each that still runs, then SIGKILL to any that has not exited within ``timeout`` seconds."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _binlake() -> Path:
    """The console script of the binlake installed in the interpreter's environment."""
    path = Path(sys.executable).with_name("binlake")
    if not path.exists():
        raise BenchError(f"{path} not found; install the project first (.venv/bin/pip install -e .)")
    return path


def _dump_command(paths: Iterable[Path], options: Iterable[str] = ()) -> list[str]:
    return [str(_binlake()), "dump", "--format", "jsonl", *options, *map(str, paths)]


def time_dump(paths: list[Path], options: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of `binlake dump --format jsonl` writing to /dev/null.

    GNU time reports the RSS: a child forked from this (large) process would inherit its peak. It is
    the largest of the dump process and its worker processes, not their sum.
    """
    if not GNU_TIME.exists():
        raise BenchError(f"{GNU_TIME} not found; install it (apt-get install time)")
    command = _dump_command(paths, options)
    with (
        open(os.devnull, "wb") as sink,
        tempfile.TemporaryFile() as errors,
        tempfile.NamedTemporaryFile("r") as rss,
    ):
        started = time.perf_counter()
        proc = subprocess.run([str(GNU_TIME), "-f", "%M", "-o", rss.name, *command], stdout=sink, stderr=errors)
        elapsed = time.perf_counter() - started
        if proc.returncode != 0:
            errors.seek(0)
            raise BenchError(f"`{' '.join(command)}` exited with {proc.returncode}:\n"
                             f"{errors.read().decode(errors='replace').strip()}")
        return elapsed, int(rss.read().split()[-1])


def count_dump(paths: list[Path]) -> tuple[Counter[str], int]:
    """Events by type and total rows in the output of `binlake dump --format jsonl` (not timed)."""
    command = _dump_command(paths)
    types: Counter[str] = Counter()
    rows = 0
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        for line in proc.stdout:
            event = orjson.loads(line)
            types[event["type"]] += 1
            if event["type"] in ROW_TYPES:
                rows += len(event["rows"])
        error = proc.stderr.read().decode(errors="replace").strip()
    if proc.returncode != 0:
        raise BenchError(f"`{' '.join(command)}` exited with {proc.returncode}:\n{error}")
    return types, rows


def decode_in_process(paths: list[Path]) -> int:
    """binlake's decoder alone (no JSON): iterate every event and take each rows event's rows."""
    rows = 0
    for path in paths:
        for event in read_binlog_file(path):
            if isinstance(event, BinlakeRowsEvent):
                rows += len(event.rows)
    return rows


def read_competitor(server: MariaDBServer, dataset: Dataset, workload: str, server_id: int) -> tuple[int, int]:
    """Events and rows python-mysql-replication returns for the workload's files, decoding every row.

    is_mariadb stays False: with it (and no GTID auto_position) the reader ignores log_file and
    log_pos and streams from the server's first binlog.
    """
    files = dataset.workloads[workload].files
    stream = BinLogStreamReader(
        connection_settings={"host": server.host, "port": server.port, "user": server.user,
                             "passwd": server.password},
        server_id=server_id,
        blocking=False,
        resume_stream=True,
        log_file=files[0],
        log_pos=4,
        only_events=[*COMPETITOR_EVENTS[workload], RotateEvent],
    )
    events = rows = 0
    try:
        for event in stream:
            if isinstance(event, RotateEvent):
                if event.next_binlog not in files:  # the end of the workload's last file
                    break
                continue
            events += 1
            if isinstance(event, RowsEvent):
                rows += len(event.rows)  # the rows property is where values are decoded
    finally:
        stream.close()
    return events, rows


def profile_dump(paths: list[Path]) -> None:
    """Print cProfile's top 25 functions by own time for `binlake dump --format jsonl` on paths.

    Runs with --jobs 1: cProfile sees only its own process, not dump's worker processes.
    """
    with tempfile.NamedTemporaryFile(suffix=".prof") as out, open(os.devnull, "wb") as sink:
        subprocess.run(
            [sys.executable, "-m", "cProfile", "-o", out.name, "-m", "ingester.cli.main", "dump", "--format",
             "jsonl", "--jobs", "1", *map(str, paths)],
            stdout=sink, check=True,
        )
        pstats.Stats(out.name).sort_stats(pstats.SortKey.TIME).print_stats(25)


def render(dataset: Dataset, results: dict[str, Result], repeat: int, mariadb_version: str) -> str:
    """The markdown report: one row per workload, rates from median wall times, plus the machine."""
    lines = [
        "# Decode throughput: binlake vs python-mysql-replication",
        "",
        "| workload | binlog | counted | `binlake dump --format jsonl` | python-mysql-replication "
        "| ratio | `binlake dump --jobs 1` (ratio) | binlake in-process decode | dump peak RSS (--jobs 1) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in results.items():
        w = dataset.workloads[name]
        unit = UNIT[name]

        def rate(t: Timings, unit: str = unit, count: int = r.count) -> str:
            return f"{count / t.median:,.0f} {unit}/s ({t.median:.2f} s)"

        lines.append(
            f"| {name} | {w.size_bytes / 1e6:.1f} MB, {w.transactions:,} transactions "
            f"| {r.count:,} {unit} | {rate(r.dump)} | {rate(r.competitor)} "
            f"| **{r.competitor.median / r.dump.median:.2f}x** "
            f"| {rate(r.dump_one_process)} ({r.competitor.median / r.dump_one_process.median:.2f}x) "
            f"| {rate(r.in_process)} | {r.dump_peak_rss_kib['default'] / 1024:.0f} MiB "
            f"({r.dump_peak_rss_kib['one process'] / 1024:.0f} MiB) |"
        )
    lines += [
        "",
        f"Median of {repeat} runs. Ratio = python-mysql-replication time / `binlake dump` time on the same "
        "events (above 1 means binlake is faster); `binlake dump` decodes large files in one process per "
        "CPU by default (with its native JSONL emitter from 64 MiB, so these files in one), `--jobs 1` in "
        "one. Bulk counts row changes (an update is one); OLTP counts "
        "the GTID, Query, rows and Xid events python-mysql-replication is asked for (table maps are decoded "
        "but not counted). `binlake dump` is timed as a subprocess writing to /dev/null, interpreter start "
        "and CRC32 checks included; python-mysql-replication (defaults: no checksum verification) streams "
        "the same binlog files from the same MariaDB and touches every rows event's `rows`.",
        "",
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        f"- machine: {os.cpu_count()} CPUs ({_cpu_model()}), {platform.system()} {platform.release()}",
        f"- Python {platform.python_version()}, MariaDB {mariadb_version}, "
        f"mysql-replication {metadata.version('mysql-replication')}, binlake {_git_revision()}",
        "",
    ]
    return "\n".join(lines)


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def _git_revision(tree: Path = BENCH_DIR.parent) -> str:
    """The commit of the source tree ``tree`` (this checkout by default), and whether it has uncommitted changes."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tree, capture_output=True, text=True).stdout.strip()

    revision = git("rev-parse", "--short", "HEAD") or "unknown"
    return revision + (" (uncommitted changes)" if git("status", "--porcelain", "--", "ingester") else "")


if __name__ == "__main__":
    sys.exit(main())
