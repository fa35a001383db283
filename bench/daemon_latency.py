"""The daemon benchmark's commit-to-Kafka latency (run_daemon.py, measurement 2): paced single-row autocommit
INSERTs into a fresh MariaDB, `binlake run` beside them, and a read_committed consumer in a process of its own
(this file run as a script: ``daemon_latency.py BOOTSTRAP TOPIC OUT``) noting when it first sees each row."""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from run_decode import BenchError, _binlake, _check, stop_processes

from ingester.devstack.kafka import KafkaBroker
from ingester.devstack.mariadb import MariaDBServer

LATENCY_TABLE = "bench_lat.t"
SENTINEL_ID = 10**12  # the last latency row: the consumer stops once it sees it
WARMUP_ID = 0


@dataclass(slots=True)
class Latency:
    target_rate: float
    achieved_rate: float
    transactions: int
    seen: int
    seconds: float
    latencies_ms: list[float]
    batch_ms: str
    first_quarter_p50: float
    last_quarter_p50: float
    mariadb: str

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency_consumer(bootstrap: str, topic: str, out: str) -> int:
    """The latency test's consumer process: print `ready`, then `warm` once the warm-up row is visible;
    on the sentinel row write `{id: seen time}` as JSON to out and exit."""
    from kafka import KafkaConsumer, TopicPartition

    from ingester.codec.events import RowsEvent
    from ingester.records.format import record_events

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, group_id=None, fetch_max_wait_ms=10)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    consumer.poll(timeout_ms=100)
    print("ready", flush=True)
    seen: dict[int, float] = {}
    warm = False
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        batch = consumer.poll(timeout_ms=50, max_records=10_000)
        now = time.time()
        for records in batch.values():
            for record in records:
                for item in record_events(dict(record.headers), record.value):
                    if isinstance(item.event, RowsEvent):
                        for row in item.event.rows:
                            seen.setdefault(int(row["after"]["id"]), now)
        if not warm and WARMUP_ID in seen:
            warm = True
            print("warm", flush=True)
        if SENTINEL_ID in seen:
            break
    consumer.close()
    Path(out).write_text(json.dumps(seen))
    return 0


def steady_inserts(server: MariaDBServer, insert: str, rate: float, duration: float,
                   writers: int, params: Callable[[int, int], tuple] | None = None,
                   other: Callable[[int], str | None] | None = None) -> tuple[dict[int, float], float]:
    """Autocommit INSERTs (``insert`` takes row id and writer index, or what ``params(row id, writer index)``
    gives) at ``rate``/s for ``duration`` s from ``writers`` threads: row id -> time the INSERT returned, and
    the seconds it took. ``other(row id)``: another statement for that row, where it gives one (same parameters)."""
    commits: dict[int, float] = {}
    lock = threading.Lock()
    per_writer = rate / writers
    t0 = time.monotonic() + 0.1
    end = t0 + duration

    def writer(index: int) -> None:
        local: dict[int, float] = {}
        with server.connect() as conn, conn.cursor() as cur:
            due = t0 + index / rate
            for k in itertools.count():
                now = time.monotonic()
                if now >= end:
                    break
                if due > now:
                    time.sleep(due - now)
                elif now - due > 1.0:  # far behind: do not burst to catch up
                    due = now
                row_id = 1 + index + k * writers
                statement = other(row_id) if other is not None else None
                cur.execute(statement or insert, params(row_id, index) if params else (row_id, index))
                local[row_id] = time.time()
                due += 1 / per_writer
        with lock:
            commits.update(local)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return commits, time.monotonic() - t0


def measure_latency(broker: KafkaBroker, rate: float, duration: float, writers: int,
                    batch_ms: int | None) -> Latency:
    options = {"sync_binlog": 0, "innodb_flush_log_at_trx_commit": 0, "innodb_buffer_pool_size": "128M"}
    prefix = f"benchlat{os.getpid()}"
    topic = f"{prefix}.{LATENCY_TABLE}"
    with MariaDBServer(options=options) as server, tempfile.TemporaryDirectory() as tmp:
        server.execute("CREATE DATABASE bench_lat")
        server.execute("CREATE TABLE bench_lat.t (id BIGINT NOT NULL PRIMARY KEY, w TINYINT NOT NULL, "
                       "note VARCHAR(64) NOT NULL)")
        start = server.current_binlog_position()
        broker.create_topic(topic)
        out = Path(tmp) / "seen.json"
        consumer = subprocess.Popen([sys.executable, __file__, broker.bootstrap, topic, str(out)],
                                    stdout=subprocess.PIPE, text=True)
        env = os.environ | {"BINLAKE_SOURCE_START_FILE": start.file,
                            "BINLAKE_SOURCE_START_POSITION": str(start.position)}
        if batch_ms is not None:
            env["BINLAKE_KAFKA_BATCH_MS"] = str(batch_ms)
        daemon_log = Path(tmp) / "daemon.log"
        with open(daemon_log, "wb") as log:
            daemon = subprocess.Popen([str(_binlake()), "run", "--source", server.url, "--kafka", broker.bootstrap,
                                       "--topic-prefix", prefix, "--server-id", "901"],
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
        try:
            assert consumer.stdout is not None
            _expect(consumer, "ready")
            server.execute("INSERT INTO bench_lat.t VALUES (%s, 0, 'warm-up')", (WARMUP_ID,))
            _expect(consumer, "warm", daemon, daemon_log)
            commits, elapsed = steady_inserts(server, "INSERT INTO bench_lat.t VALUES (%s, %s, 'latency probe row')",
                                              rate, duration, writers)
            server.execute("INSERT INTO bench_lat.t VALUES (%s, 0, 'sentinel')", (SENTINEL_ID,))
            consumer.wait(120)
            if daemon.poll() is not None:
                raise BenchError(f"the daemon exited with {daemon.returncode} during the latency test:\n"
                                 + _tail(daemon_log))
        finally:
            if consumer.poll() is None:
                consumer.kill()
                consumer.wait()
            stop_processes([daemon])
        if not out.exists():
            raise BenchError("the latency consumer never saw the sentinel row; daemon log:\n" + _tail(daemon_log))
        seen = {int(k): v for k, v in json.loads(out.read_text()).items()}
        if daemon.returncode != 0:
            print(f"bench: the daemon exited with {daemon.returncode} after SIGTERM:\n{_tail(daemon_log)}",
                  file=sys.stderr)
        latencies = [(seen[i] - t) * 1000 for i, t in commits.items() if i in seen]
        missing = len(commits) - len(latencies)
        _check(missing == 0, f"{missing} of {len(commits)} committed latency rows never reached Kafka")
        print(f"latency: {len(commits)} transactions in {elapsed:.1f}s, daemon log tail:\n{_tail(daemon_log, 3)}",
              file=sys.stderr)
        # Latencies in commit order, to show whether the daemon falls behind (they grow) or keeps up.
        ordered = [(seen[i] - t) * 1000 for t, i in sorted((t, i) for i, t in commits.items())]
        return Latency(rate, len(commits) / elapsed, len(commits), len(latencies), elapsed, latencies,
                       str(batch_ms) if batch_ms is not None else "default (0: group commit)",
                       statistics.median(ordered[: len(ordered) // 4]), statistics.median(ordered[-len(ordered) // 4:]),
                       server.execute("SELECT VERSION()")[0][0])


def _expect(consumer: subprocess.Popen[str], word: str, daemon: subprocess.Popen[bytes] | None = None,
            daemon_log: Path | None = None) -> None:
    assert consumer.stdout is not None
    line = consumer.stdout.readline().strip()
    if line != word:
        extra = f"\ndaemon (exit {daemon.poll()}):\n{_tail(daemon_log)}" if daemon and daemon_log else ""
        raise BenchError(f"latency consumer said {line!r}, expected {word!r}{extra}")


def _tail(path: Path | None, lines: int = 30) -> str:
    if path is None or not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])


if __name__ == "__main__":  # the consumer process
    sys.exit(latency_consumer(*sys.argv[1:4]))
