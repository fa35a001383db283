"""Source- and storage-side faults of issue 7, against the real MariaDB and Kafka: the binlog purged behind
the daemon's checkpoint, and a long Kafka outage."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import time

import pytest

from ingester.cli.consume import committed_record_events
from ingester.cli.main import main
from ingester.codec import events as E
from ingester.daemon.kafka_io import read_checkpoint

pytestmark = pytest.mark.integration


def _run(server, kafka, prefix: str, *extra: str) -> int:
    return main(["run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix,
                 "--server-id", "5151", "--exit-at-end", *extra])


def _purge_through(server, file: str) -> None:
    """FLUSH BINARY LOGS + PURGE BINARY LOGS TO the newest until ``file`` is gone (MariaDB purges a log only
    once its binlog checkpoint has passed it)."""
    deadline = time.monotonic() + 30
    while file in {row[0] for row in server.execute("SHOW BINARY LOGS")}:
        assert time.monotonic() < deadline, f"{file} not purged"
        server.flush_logs()
        server.execute(f"PURGE BINARY LOGS TO '{server.current_binlog_position().file}'")
        time.sleep(0.2)


def test_binlog_purged_behind_the_checkpoint(make_mariadb, kafka, capsys) -> None:
    """never/initial: exit 2 with one line naming the checkpoint's file, position and GTIDs; when-needed: a
    new snapshot, after which the replayed topics equal the server's SELECT and no binlog change is
    published twice."""
    server = make_mariadb()
    server.execute("CREATE DATABASE pg CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE pg.t (id INT PRIMARY KEY, v VARCHAR(20))")
    server.execute("INSERT INTO pg.t VALUES " + ",".join(f"({i}, 'v{i}')" for i in range(1, 101)))
    prefix, source_id = "purged", f"purged.127.0.0.1:{server.port}"
    assert _run(server, kafka, prefix, "--snapshot", "initial") == 0
    server.execute("UPDATE pg.t SET v = 'streamed' WHERE id <= 5")  # published from the binlog
    assert _run(server, kafka, prefix) == 0
    checkpoint = read_checkpoint(kafka.bootstrap, prefix, source_id)
    # The daemon is stopped; the source changes and its binlogs are purged.
    server.execute("UPDATE pg.t SET v = 'while away' WHERE id BETWEEN 90 AND 95")
    server.execute("INSERT INTO pg.t VALUES " + ",".join(f"({i}, 'new{i}')" for i in range(101, 121)))
    _purge_through(server, checkpoint["file"])
    capsys.readouterr()
    for mode in ("never", "initial"):
        assert _run(server, kafka, prefix, "--snapshot", mode) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) and "Traceback" not in "\n".join(err)
        assert (f"cannot resume at the checkpoint's {checkpoint['file']}:{checkpoint['position']} (GTIDs "
                f"{checkpoint['gtid_set']}) on 127.0.0.1:{server.port}") in err[-1], err[-1]
        assert "server error 1236" in err[-1] and "snapshot: when-needed" in err[-1]
    assert read_checkpoint(kafka.bootstrap, prefix, source_id) == checkpoint  # nothing committed was lost
    assert _run(server, kafka, prefix, "--snapshot", "when-needed") == 0
    assert "has been purged: taking a new snapshot" in capsys.readouterr().err
    server.execute("UPDATE pg.t SET v = 'after' WHERE id = 1")  # streaming goes on after the new snapshot
    assert _run(server, kafka, prefix, "--snapshot", "when-needed") == 0

    state: dict[int, str] = {}
    reads: dict[int, int] = {}
    binlog_changes: list[tuple[str, int]] = []
    for item in committed_record_events(kafka.bootstrap, prefix):  # in sequence order
        if isinstance(item.event, E.RowsEvent) and item.event.database == "pg":
            for row in item.event.rows:
                key = row["after"]["id"]
                state[key] = row["after"]["v"]
                if item.event.kind == "read":
                    reads[key] = reads.get(key, 0) + 1
                else:
                    binlog_changes.append((item.gtid, key))
    assert state == dict(server.execute("SELECT id, v FROM pg.t"))
    # Binlog changes: the 5 streamed before and the 1 after the purge, each once; those made while the
    # binlog was lost arrive through the snapshot only. Each row is read once per snapshot.
    assert sorted(k for _, k in binlog_changes) == [1, 1, 2, 3, 4, 5]
    assert len(set(binlog_changes)) == len(binlog_changes)
    assert reads == {i: 2 if i <= 100 else 1 for i in range(1, 121)}


def _rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def test_long_kafka_outage_back_pressure_and_catch_up(make_mariadb, make_kafka, tmp_path) -> None:
    """The broker is down for 45 s (BINLAKE_OUTAGE_SECONDS) while ~200 MB of binlog are written: the daemon
    stops reading the binlog (its RSS stays far below the backlog: what it does not publish it does not
    read), retries, and once the broker is back publishes the backlog, every GTID exactly once. Prints the
    figures (bench/results/kafka-outage.md)."""
    from ingester.devstack import free_tcp_port
    from tests.harness.daemon import BINLAKE, gtid_rows, rows_events_per_gtid

    outage_s = float(os.environ.get("BINLAKE_OUTAGE_SECONDS", "45"))  # > the 30 s a commit waits for Kafka
    broker = make_kafka(datadir=tmp_path / "kafka", port=free_tcp_port())
    server = make_mariadb()
    server.execute("CREATE DATABASE ko CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE ko.t (id INT PRIMARY KEY, b LONGBLOB)")
    prefix, source_id = "outage", f"outage.127.0.0.1:{server.port}"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    log = tmp_path / "daemon.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen([*BINLAKE, "run", "--source", server.url, "--kafka", broker.bootstrap,
                                 "--topic-prefix", prefix, "--server-id", "5252"], env=env, stderr=err)
    try:
        server.execute("INSERT INTO ko.t VALUES (0, 'before')")
        deadline = time.monotonic() + 60
        while read_checkpoint(broker.bootstrap, prefix, source_id) is None:
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()[-2000:]
            time.sleep(0.2)
        rss_before = _rss_mib(proc.pid)
        broker.stop()
        stopped = time.monotonic()
        samples = []  # RSS in MiB

        def sample() -> None:
            samples.append(_rss_mib(proc.pid))
            assert proc.poll() is None, log.read_text()[-2000:]

        blob = os.urandom(50_000).hex()  # 100 KB per row, ~100 MB of binlog while Kafka is down
        with server.connect("ko") as conn, conn.cursor() as cur:
            for i in range(1, 1001):
                cur.execute("INSERT INTO t VALUES (%s, %s)", (i, blob))
                if i % 50 == 0:
                    sample()
        backlog_mib = sum(f.stat().st_size for f in server.binlog_files()) / (1 << 20)
        while time.monotonic() - stopped < outage_s:
            sample()
            time.sleep(1)
        broker.start()
        back = time.monotonic()
        target = server.current_binlog_position()
        deadline = back + 120
        while True:
            checkpoint = read_checkpoint(broker.bootstrap, prefix, source_id)
            if checkpoint and (checkpoint["file"], checkpoint["position"]) == (target.file, target.position):
                break
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()[-2000:]
            time.sleep(0.2)
        caught_up = time.monotonic()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0, log.read_text()[-3000:]
    seen = gtid_rows(broker, prefix)
    assert all(n == 1 for n in seen.values())
    expected = rows_events_per_gtid(server, "ko")
    assert collections.Counter(g for g, _ in seen) == expected and sum(expected.values()) == 1001
    rss_max = max(samples)
    started = time.monotonic()  # full speed: a second daemon reads the same binlog from its start
    assert main(["run", "--source", server.url, "--kafka", broker.bootstrap, "--topic-prefix", "outage2",
                 "--server-id", "5353", "--exit-at-end"]) == 0
    baseline = time.monotonic() - started
    print(f"\nkafka outage {outage_s:.0f} s, backlog {backlog_mib:.0f} MiB: RSS before {rss_before:.0f} MiB, max "
          f"during the outage {rss_max:.0f} MiB; broker back -> caught up in {caught_up - back:.1f} s "
          f"({backlog_mib / (caught_up - back):.1f} MiB/s); the same binlog with Kafka up, from start to exit: "
          f"{baseline:.1f} s ({backlog_mib / baseline:.1f} MiB/s)")
    assert rss_max < rss_before + 48, (rss_before, samples)  # far below the backlog
    assert b"retrying in" in log.read_bytes()
    assert caught_up - back < 60  # Kafka retries wait at most 5 s, reconnects at most 1 s
