"""The daemon end to end: `binlake run` into Kafka (acks=all, transactional) against python-mysql-replication.

Three measurements in one run (see bench/README.md):

1. throughput: the decode benchmark's cached bulk and OLTP workloads through `binlake run --exit-at-end`
   into a private Kafka broker, against python-mysql-replication decoding the same binlog files;
2. latency: commit-to-Kafka latency (read_committed consumer) at a steady ~2,000 single-row
   transactions/s on a fresh MariaDB (--skip-latency skips it);
3. memory: peak RSS of the daemon while one large transaction (1 GB by default) streams through it
   (--skip-memory skips it).

Needs `pip install -r bench/requirements.txt` (or `bench/run --daemon ...`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from daemon_latency import Latency, measure_latency
from run_decode import (
    COUNTED_TYPES,
    UNIT,
    BenchError,
    Timings,
    _binlake,
    _check,
    _cpu_model,
    _git_revision,
    count_dump,
    read_competitor,
)
from workloads import SERVER_OPTIONS, Dataset, load_or_generate

from ingester.devstack.kafka import KafkaBroker
from ingester.devstack.mariadb import MariaDBServer

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "daemon.md"
STATS_LINE = re.compile(r"stopped: (\{.*\})")


class DaemonFailed(BenchError):
    """`binlake run` failed or hung; keeps what was measured until then."""

    def __init__(self, message: str, seconds: float, peak_kib: int, hwm_kib: int, how: str,
                 warnings: list[str]) -> None:
        super().__init__(message)
        self.seconds, self.peak_kib, self.hwm_kib, self.how, self.warnings = seconds, peak_kib, hwm_kib, how, warnings


@dataclass(slots=True)
class Throughput:
    """One workload: what is counted and the wall times of both readers."""

    count: int = 0  # rows (bulk) or events (oltp), counted as run_decode.py counts them
    rows: int = 0
    daemon: Timings = field(default_factory=Timings)  # start to exit
    streaming: Timings = field(default_factory=Timings)  # connect to last commit (the daemon's stats)
    competitor: Timings = field(default_factory=Timings)
    daemon_stats: dict[str, int] = field(default_factory=dict)
    published_rows: int | None = None
    peak_rss_kib: int = 0


@dataclass(slots=True)
class Memory:
    size_bytes: int
    rows: int
    generate_s: float
    daemon_s: float
    peak_rss_kib: int
    hwm_kib: int
    stats: dict[str, int]
    returncode: int
    error: str = ""
    mariadb: str = ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="throughput runs per workload; the median is reported")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--rate", type=float, default=2000, help="latency: target transactions/s (default 2000)")
    parser.add_argument("--duration", type=float, default=20, help="latency: seconds of load (default 20)")
    parser.add_argument("--writers", type=int, default=3, help="latency: writer threads (default 3)")
    parser.add_argument("--batch-ms", type=int, help="latency: the daemon's kafka.batch_ms (default: its own)")
    parser.add_argument("--memory-mb", type=int, nargs="+", default=[1024, 128],
                        help="memory: transaction sizes in MiB, one run each (default 1024 128)")
    parser.add_argument("--memory-timeout", type=float, default=300,
                        help="memory: seconds before the daemon is stopped (SIGTERM, then SIGKILL)")
    parser.add_argument("--output", type=Path, default=RESULTS, help=f"markdown report (default {RESULTS})")
    args = parser.parse_args()
    dataset = load_or_generate()
    throughput: dict[str, Throughput] = {}
    latency: Latency | None = None
    memory: list[Memory] = []
    versions: dict[str, str] = {}
    try:
        with KafkaBroker() as broker:
            versions["kafka"] = broker._version
            if not args.skip_throughput:
                throughput, versions["mariadb"] = measure_throughput(dataset, broker, args.repeat)
            if not args.skip_latency:
                latency = measure_latency(broker, args.rate, args.duration, args.writers, args.batch_ms)
                versions.setdefault("mariadb", latency.mariadb)
            if not args.skip_memory:
                memory = [measure_memory(broker, mb << 20, args.memory_timeout) for mb in args.memory_mb]
                versions.setdefault("mariadb", memory[0].mariadb if memory else "")
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    report = render(dataset, throughput, latency, memory, args.repeat, versions)
    print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)
    print(f"written to {args.output}")
    return 0


# --- throughput ------------------------------------------------------------------------------------


def workload_server(dataset: Dataset, name: str, root: Path) -> MariaDBServer:
    """A copy of the cached datadir whose binary logs end with the workload's last file.

    `binlake run --exit-at-end` reads to the end of the server's binlogs, so in the copy the files after
    the workload's are dropped: on start the server opens one new, nearly empty file (a format
    description, GTID list and binlog checkpoint) after the workload's, and that is all the daemon reads
    beyond the workload. Both readers stream from this server.
    """
    datadir = root / name
    shutil.copytree(dataset.datadir, datadir, ignore=shutil.ignore_patterns("*.sock", "*.pid"))
    last = dataset.workloads[name].files[-1]
    index = datadir / "binlog.index"
    # The index names the files by the original datadir's absolute path: point it at the copies.
    keep = [str(datadir / Path(line).name) for line in index.read_text().splitlines()
            if line and Path(line).name <= last]
    for path in datadir.glob("binlog.[0-9]*"):
        if path.name > last:
            path.unlink()
    index.write_text("".join(f"{line}\n" for line in keep))
    (datadir / "binlog.state").unlink(missing_ok=True)
    return MariaDBServer(datadir, options=SERVER_OPTIONS)


def run_daemon(server: MariaDBServer, broker: KafkaBroker, prefix: str, server_id: int, start_file: str,
               start_position: int = 4, sample_rss: bool = False,
               timeout: float = 900) -> tuple[float, dict[str, int], int, int, str]:
    """`binlake run --exit-at-end` from start_file: wall seconds, its stats line, peak RSS and VmHWM (KiB, sampled
    every 20 ms) and its stderr."""
    env = os.environ | {"BINLAKE_SOURCE_START_FILE": start_file,
                        "BINLAKE_SOURCE_START_POSITION": str(start_position)}
    command = [str(_binlake()), "run", "--source", server.url, "--kafka", broker.bootstrap, "--topic-prefix",
               prefix, "--exit-at-end", "--server-id", str(server_id)]
    peak = hwm = 0
    timed_out = sigkill = False
    done = threading.Event()

    def watch(pid: int) -> None:
        """RSS samples every 20 ms (a short run's peak is between two of them; wait4's ru_maxrss would count the
        benchmark's own memory, which the child has until its exec), and the timeout; the main thread waits in
        waitpid (Popen.wait with a timeout polls every 50 ms: as much as 50 ms more on a run of 0.6 s)."""
        nonlocal peak, hwm, timed_out, sigkill
        while not done.wait(0.02):
            if sample_rss:
                rss, high = _rss_kib(pid)
                peak, hwm = max(peak, rss), max(hwm, high)
            if time.perf_counter() - started > timeout and not timed_out:
                timed_out = True
                proc.terminate()
                if done.wait(15):
                    return
                sigkill = True
                proc.kill()
                return

    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors, env=env)
        watcher = threading.Thread(target=watch, args=(proc.pid,), daemon=True)
        watcher.start()
        try:
            proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            ended = time.perf_counter()
            done.set()
            watcher.join()
        elapsed = ended - started
        errors.seek(0)
        text = errors.read().decode(errors="replace")
    match = STATS_LINE.search(text)
    stats = json.loads(match.group(1)) if match else {}
    if proc.returncode != 0 or not match or timed_out:
        how = (f"did not finish within {timeout:g}s; " + ("SIGTERM did not stop it within 15 s, SIGKILL did"
               if sigkill else f"after SIGTERM it exited with {proc.returncode}")) if timed_out \
            else f"exited with {proc.returncode} after {elapsed:.1f}s"
        warnings = [line for line in text.splitlines() if ("WARNING binlake" in line and "preflight" not in line)
                    or "ERROR binlake" in line
                    or line.startswith("binlake: error")]
        raise DaemonFailed(f"`{' '.join(command)}` {how}:\n" + "\n".join(text.strip().splitlines()[-30:]),
                           elapsed, peak, hwm, how, warnings)
    return elapsed, stats, peak, hwm, text


def _rss_kib(pid: int) -> tuple[int, int]:
    """VmRSS and VmHWM of a process in KiB (0 once it is gone)."""
    values = {"VmRSS": 0, "VmHWM": 0}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in values:
                values[key] = int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return values["VmRSS"], values["VmHWM"]


def published_rows(bootstrap: str, prefix: str) -> int:
    """Row changes committed to the prefix's table topics (read_committed, untimed)."""
    from ingester.cli.consume import committed_events
    from ingester.codec.events import RowsEvent

    return sum(len(ev.rows) for ev in committed_events(bootstrap, prefix) if isinstance(ev, RowsEvent))


def measure_throughput(dataset: Dataset, broker: KafkaBroker, repeat: int) -> tuple[dict[str, Throughput], str]:
    results: dict[str, Throughput] = {}
    for name, workload in dataset.workloads.items():
        types, rows = count_dump(dataset.paths(name))
        _check(rows == workload.row_changes, f"binlake dump emitted {rows} rows of {name}, "
               f"the workload made {workload.row_changes} row changes")
        events = sum(types[t] for t in COUNTED_TYPES[name])
        results[name] = Throughput(count=rows if name == "bulk" else events, rows=rows)
    server_ids = itertools.count(200)
    version = ""
    (BENCH_DIR / "data").mkdir(exist_ok=True)  # a fresh clone has none
    with tempfile.TemporaryDirectory(prefix="bl-", dir=BENCH_DIR / "data") as root:
        servers = {name: workload_server(dataset, name, Path(root)) for name in dataset.workloads}
        try:
            for server in servers.values():
                server.start()
            version = next(iter(servers.values())).execute("SELECT VERSION()")[0][0]
            for run in range(1, repeat + 1):
                for name, result in results.items():
                    server, workload = servers[name], dataset.workloads[name]
                    prefix = f"bench{os.getpid()}r{run}{name}"
                    seconds, stats, rss, hwm, _ = run_daemon(server, broker, prefix, next(server_ids),
                                                             workload.files[0], sample_rss=True)
                    result.daemon.seconds.append(seconds)
                    result.streaming.seconds.append(stats.get("streaming_ms", 0) / 1000)
                    result.daemon_stats = stats
                    result.peak_rss_kib = max(result.peak_rss_kib, rss, hwm)
                    _check(stats.get("records", 0) > 0, f"the daemon published nothing for {name}: {stats}")
                    if run == 1:
                        result.published_rows = published_rows(broker.bootstrap, prefix)
                        _check(result.published_rows == workload.row_changes,
                               f"the daemon published {result.published_rows} row changes of {name}, the "
                               f"workload made {workload.row_changes}")
                    started = time.perf_counter()
                    events, rows = read_competitor(server, dataset, name, next(server_ids))
                    result.competitor.seconds.append(time.perf_counter() - started)
                    counted = rows if name == "bulk" else events
                    _check(counted == result.count and rows == workload.row_changes,
                           f"python-mysql-replication read {events} events and {rows} rows of {name}")
                    print(f"run {run}/{repeat} {name}: binlake run {seconds:.2f}s ({stats}), "
                          f"python-mysql-replication {result.competitor.seconds[-1]:.2f}s", file=sys.stderr)
        finally:
            for server in servers.values():
                server.close()
    return results, version


# --- memory ----------------------------------------------------------------------------------------


def measure_memory(broker: KafkaBroker, size: int, timeout: float) -> Memory:
    """One INSERT ... SELECT of `size` bytes of LONGBLOB data (64 KiB a row, random bytes) in a single
    transaction, then `binlake run --exit-at-end` over it while its RSS is sampled every 0.2 s."""
    row_bytes = 64 << 10
    rows = max(1, size // row_bytes)
    options = {"sync_binlog": 0, "innodb_flush_log_at_trx_commit": 0, "innodb_buffer_pool_size": "256M",
               "innodb_log_file_size": "512M", "max_binlog_size": "1G", "max_allowed_packet": "1G"}
    with MariaDBServer(options=options) as server:
        server.execute("CREATE DATABASE bench_mem")
        server.execute("CREATE TABLE bench_mem.big (id INT NOT NULL PRIMARY KEY, b LONGBLOB NOT NULL)")
        server.flush_logs()
        start = server.current_binlog_position()
        piece = "RANDOM_BYTES(1024)"
        try:
            server.execute(f"SELECT {piece}")
        except Exception:  # MariaDB before 10.10: compressible, but the same size
            piece = "UNHEX(REPEAT(MD5(RAND()), 32))"
        blob = "CONCAT(" + ", ".join([piece] * (row_bytes // 1024)) + ")"
        started = time.perf_counter()
        with server.connect("bench_mem") as conn, conn.cursor() as cur:
            cur.execute(f"INSERT INTO bench_mem.big SELECT seq, {blob} FROM seq_1_to_{rows}")
        generate_s = time.perf_counter() - started
        binlog = sum(p.stat().st_size for p in server.binlog_files() if p.name >= start.file)
        print(f"memory: {rows:,} rows, {binlog / 1e6:.0f} MB of binlog in one transaction, generated in "
              f"{generate_s:.0f}s", file=sys.stderr)
        error = ""
        try:
            seconds, stats, peak, hwm, _ = run_daemon(server, broker, f"benchmem{os.getpid()}x{rows}", 902,
                                                      start.file, start.position, sample_rss=True, timeout=timeout)
            code = 0
        except DaemonFailed as exc:
            seconds, stats, peak, hwm, code = exc.seconds, {}, exc.peak_kib, exc.hwm_kib, 1
            first = "; first daemon warnings: " + " / ".join(w.split(" ", 2)[-1][:300] for w in exc.warnings[:3])
            error = exc.how + (first if exc.warnings else "")
            print(f"bench: memory run failed: {exc}", file=sys.stderr)
        return Memory(binlog, rows, generate_s, seconds, peak, hwm, stats, code, error,
                      server.execute("SELECT VERSION()")[0][0])


# --- report ----------------------------------------------------------------------------------------


def render(dataset: Dataset, throughput: dict[str, Throughput], latency: Latency | None, memory: list[Memory],
           repeat: int, versions: dict[str, str]) -> str:
    lines = ["# The daemon: binlake run -> Kafka vs python-mysql-replication (decode only)", ""]
    if throughput:
        lines += [
            "## Throughput",
            "",
            "| workload | binlog | counted | `binlake run` -> Kafka, streaming | python-mysql-replication "
            "(decode only) | ratio (goal 10x) | `binlake run`, start to exit (ratio) | rows published (checked) "
            "| daemon stats | daemon peak RSS |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for name, r in throughput.items():
            w, unit = dataset.workloads[name], UNIT[name]

            def rate(t: Timings, unit: str = unit, count: int = r.count) -> str:
                return f"{count / t.median:,.0f} {unit}/s ({t.median:.2f} s)"

            lines.append(
                f"| {name} | {w.size_bytes / 1e6:.1f} MB, {w.transactions:,} transactions | {r.count:,} {unit} "
                f"| {rate(r.streaming)} | {rate(r.competitor)} | **{r.competitor.median / r.streaming.median:.2f}x** "
                f"| {rate(r.daemon)} ({r.competitor.median / r.daemon.median:.2f}x) "
                f"| {r.published_rows:,} of {r.rows:,} | {json.dumps(r.daemon_stats)} "
                f"| {r.peak_rss_kib / 1024:.0f} MiB |"
            )
        lines += [
            "",
            f"Median of {repeat} runs. Streaming: the daemon's own measure (`streaming_ms` in its stats) from "
            "connecting to the source (registering as a replica) to the last Kafka commit acknowledged: the "
            "rate a running daemon sustains, measured like python-mysql-replication's time (connect to last "
            "event). Start to exit: `binlake run --exit-at-end` timed as a subprocess: interpreter start, "
            "preflight checks, Kafka producer and transaction initialisation, topic creation and the final "
            "commit included (a one-off cost of about a second). It publishes to a private broker (acks=all, "
            "idempotent, transactional, zstd, default batching) from a copy of the cached workload datadir "
            "whose binlogs end with the workload's file, so besides the workload it reads only the server's "
            "new, nearly empty binlog file. python-mysql-replication decodes the same files from the same "
            "server (as in run_decode.py). Rows published are counted afterwards (untimed) by a "
            "read_committed consumer decoding every record.",
            "",
        ]
    if latency is not None:
        lat = latency
        lines += [
            "## Commit-to-Kafka latency",
            "",
            "| target rate | achieved rate | transactions | p50 | p95 | p99 (goal < 100 ms) | max "
            "| p50 first / last quarter | daemon batch_ms |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            f"| {lat.target_rate:,.0f} tx/s | {lat.achieved_rate:,.0f} tx/s | {lat.transactions:,} in "
            f"{lat.seconds:.1f} s | {lat.pct(0.50):.1f} ms | {lat.pct(0.95):.1f} ms | **{lat.pct(0.99):.1f} ms** "
            f"| {max(lat.latencies_ms):.1f} ms | {lat.first_quarter_p50:.0f} / {lat.last_quarter_p50:.0f} ms "
            f"| {lat.batch_ms} |",
            "",
            "Single-row autocommit INSERTs from paced writer threads (own pymysql connections) into a fresh "
            "MariaDB; latency = wall time a read_committed kafka-python consumer (own process, polling) "
            "first sees the row minus the time the writer's COMMIT returned. The daemon runs with its "
            "defaults and is stopped with SIGTERM.",
            "",
        ]
    if memory:
        lines += [
            "## Memory: one large transaction",
            "",
            "| transaction | binlog | daemon run | daemon peak RSS (goal < 200 MB) |",
            "| --- | --- | --- | --- |",
        ]
        for m in memory:
            outcome = (f"{m.daemon_s:.1f} s, {json.dumps(m.stats)}" if not m.returncode
                       else f"**failed** after {m.daemon_s:.0f} s: {m.error.replace('|', '/')}")
            lines.append(
                f"| {m.rows:,} rows x 64 KiB LONGBLOB, one INSERT ... SELECT (generated in {m.generate_s:.0f} s) "
                f"| {m.size_bytes / 1e6:,.0f} MB | {outcome} | **{max(m.peak_rss_kib, m.hwm_kib) / 1024:.0f} MiB** "
                f"(sampled VmRSS max {m.peak_rss_kib / 1024:.0f} MiB, VmHWM {m.hwm_kib / 1024:.0f} MiB) |")
        lines += [
            "",
            "`binlake run --exit-at-end` from the start of the transaction's binlog file; VmRSS and VmHWM "
            "from /proc/<pid>/status every 0.2 s.",
            "",
        ]
    lines += [
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        f"- machine: {os.cpu_count()} CPUs ({_cpu_model()}), {platform.system()} {platform.release()}",
        f"- Python {platform.python_version()}, MariaDB {versions.get('mariadb', '?')}, Kafka "
        f"{versions.get('kafka', '?')}, kafka-python {metadata.version('kafka-python')}, "
        f"mysql-replication {metadata.version('mysql-replication')}, binlake {_git_revision()}",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
