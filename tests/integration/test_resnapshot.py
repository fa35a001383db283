"""On-demand re-snapshot while streaming (daemon/resnapshot.py): watermarks merge the chunks with
concurrent changes, and a kill -9 in the middle resumes the re-snapshot exactly once."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time

import pytest

from ingester.cli.consume import committed_record_events
from ingester.cli.main import main
from ingester.codec import events as E
from ingester.config import load_config
from ingester.daemon.kafka_io import read_checkpoint
from ingester.daemon.runner import Runner
from ingester.daemon.table_reader import TableReader
from tests.harness.daemon import BINLAKE, CheckpointWatcher
from tests.harness.snapshot import WriteWorkload, replay_in_seq_order

pytestmark = pytest.mark.integration
ROWS = 3000


def test_resnapshot_under_writes_with_a_kill_minus_nine(make_mariadb, kafka) -> None:
    server = make_mariadb()
    server.execute("CREATE DATABASE rs CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE rs.t (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20))")
    server.execute("CREATE TABLE rs.other (id INT PRIMARY KEY)")
    conn = server.connect("rs")
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO t VALUES (%s, %s, %s)", [(i, i, f"s{i}") for i in range(1, ROWS + 1)])
        conn.commit()
    start = server.current_binlog_position()  # the stream starts after the rows: only the re-snapshot has them
    prefix = "resnap"
    source_id = f"{prefix}.127.0.0.1:{server.port}"
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "BINLAKE_SNAPSHOT_SIGNAL_TABLE": "binlake.signal",
           "BINLAKE_SNAPSHOT_CHUNK_ROWS": "100", "BINLAKE_SOURCE_START_FILE": start.file,
           "BINLAKE_SOURCE_START_POSITION": str(start.position)}
    cmd = [*BINLAKE, "run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix]
    ids = iter(("--server-id", str(n)) for n in range(4747, 4750))  # the server may still see the killed one
    server.execute("CREATE DATABASE binlake")
    watcher = CheckpointWatcher(kafka.bootstrap, prefix, source_id)
    workload = WriteWorkload(server, "rs", ROWS)
    workload.start()
    try:
        proc = subprocess.Popen([*cmd, *next(ids)], env=env, stderr=subprocess.DEVNULL)
        watcher.wait(lambda c: "file" in c, timeout=60)
        assert main(["snapshot", "--source", server.url, "--signal-table", "binlake.signal",
                     "--tables", "rs.t,rs.missing"]) == 0
        watcher.wait(lambda c: c.get("resnapshot", {}).get("rows", 0) >= ROWS // 3, timeout=60)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        killed_at = read_checkpoint(kafka.bootstrap, prefix, source_id)["resnapshot"]
        assert killed_at["tables"] == ["rs.t", "rs.missing"] and killed_at["rows"] < ROWS, killed_at
        proc = subprocess.Popen([*cmd, *next(ids)], env=env, stderr=subprocess.DEVNULL)
        watcher.wait(lambda c: "file" in c and "resnapshot" not in c, timeout=60)
    finally:
        workload.stop.set()
        workload.join()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        watcher.close()
    subprocess.run([*cmd, *next(ids), "--exit-at-end"], env=env, check=True, stderr=subprocess.DEVNULL,
                   timeout=120)
    items = list(committed_record_events(kafka.bootstrap, prefix))
    assert not [i for i in items if isinstance(i.event, E.RowsEvent) and i.event.database == "binlake"]
    state, seen = replay_in_seq_order(items, "rs", "t")
    with conn.cursor() as cur:
        cur.execute("SELECT id, v, s FROM t")
        expected = {i: (v, s) for i, v, s in cur.fetchall()}
    assert state == expected
    read_ids = [pk for _, pk, kind in seen if kind == "read"]
    assert len(read_ids) == len(set(read_ids)), "the re-snapshot published a row twice"
    changes = sum(kind != "read" for _, _, kind in seen)
    assert len(read_ids) > ROWS // 2 and changes > 100 and workload.changes > 100, (len(read_ids), changes)
    print(f"re-snapshot under writes: {len(read_ids):,} rows read, {changes:,} changes, kill -9 at "
          f"{killed_at['rows']:,} rows; mirror == SELECT ({len(expected):,} rows)")


def test_changes_inside_the_watermark_window_win_over_the_chunk(make_mariadb, kafka, monkeypatch) -> None:
    """A row changed between a chunk's SELECT and its high watermark: the SELECT's (stale) value must not
    be published as a read row after the change. Changes are made exactly there, in every chunk."""
    server = make_mariadb()
    server.execute("CREATE DATABASE rw CHARACTER SET utf8mb4")
    server.execute("CREATE DATABASE binlake")
    server.execute("CREATE TABLE rw.t (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20))")
    server.execute("INSERT INTO rw.t VALUES " + ", ".join(f"({i}, {i}, 's{i}')" for i in range(1, 101)))
    start = server.current_binlog_position()
    writer = server.connect("rw")
    writer.autocommit(True)
    convert = TableReader.convert

    def convert_then_write(self, rows):  # runs between the SELECT and the high watermark
        wire = convert(self, rows)
        if not wire:
            return wire
        first, last = wire[0][0], wire[-1][0]
        with writer.cursor() as cur:
            cur.execute("UPDATE t SET v = -v, s = 'changed' WHERE id = %s", (first,))
            cur.execute("DELETE FROM t WHERE id = %s", (last,))
            cur.execute("REPLACE INTO t VALUES (%s, 0, 'inserted')", (first + 1,))
        return wire

    monkeypatch.setattr(TableReader, "convert", convert_then_write)
    cfg = load_config(None, {"source": {"url": server.url, "server_id": 4750, "start_file": start.file,
                                        "start_position": start.position},
                             "kafka": {"bootstrap": kafka.bootstrap, "topic_prefix": "rwin"},
                             "snapshot_signal_table": "binlake.signal", "snapshot_chunk_rows": 10})
    runner = Runner(cfg)

    def operator() -> None:  # the daemon runs in the main thread (it installs signal handlers)
        deadline = time.monotonic() + 60
        main(["snapshot", "--source", server.url, "--signal-table", "binlake.signal", "--tables", "rw.t"])
        while "resnapshot" not in (runner.committed or {}) and time.monotonic() < deadline:
            time.sleep(0.02)
        while "resnapshot" in (runner.committed or {}) and time.monotonic() < deadline:
            time.sleep(0.02)
        runner.request_stop()

    thread = threading.Thread(target=operator, daemon=True)
    thread.start()
    runner.run()
    thread.join()
    state, seen = replay_in_seq_order(list(committed_record_events(kafka.bootstrap, "rwin")), "rw", "t")
    expected = {i: (v, s) for i, v, s in server.execute("SELECT id, v, s FROM rw.t")}
    assert any(s == "changed" for _, s in expected.values()) and state == expected
    assert sum(kind == "read" for _, _, kind in seen) > 50


def test_progress_of_a_resnapshot_in_metrics_and_in_snapshot_wait(mariadb, kafka, capsys) -> None:
    """`binlake snapshot --wait` (not a terminal: log lines) follows the daemon's reports until every table is
    read or skipped; the daemon's metrics count the rows and tables."""
    mariadb.execute("DROP DATABASE IF EXISTS prog")
    mariadb.execute("CREATE DATABASE prog CHARACTER SET utf8mb4")
    mariadb.execute("CREATE TABLE prog.a (id INT PRIMARY KEY, v VARCHAR(10))")
    mariadb.execute("CREATE TABLE prog.b (id INT PRIMARY KEY)")
    mariadb.execute("CREATE TABLE prog.nopk (x INT)")
    mariadb.execute("INSERT INTO prog.a VALUES " + ", ".join(f"({i}, 'v{i}')" for i in range(250)))
    mariadb.execute("INSERT INTO prog.b VALUES " + ", ".join(f"({i})" for i in range(60)))
    start = mariadb.current_binlog_position()
    cfg = load_config(None, {"source": {"url": mariadb.url, "server_id": 4751, "start_file": start.file,
                                        "start_position": start.position},
                             "kafka": {"bootstrap": kafka.bootstrap, "topic_prefix": "prog"},
                             "filters": {"include": ["prog.*"]},
                             "snapshot_signal_table": "prog.signal", "snapshot_chunk_rows": 100})
    runner = Runner(cfg)
    waited: list[int] = []

    def operator() -> None:  # the daemon runs in the main thread (it installs signal handlers)
        try:
            waited.append(main(["snapshot", "--source", mariadb.url, "--signal-table", "prog.signal", "--tables",
                                "prog.a,prog.nopk,prog.b", "--wait"]))
            deadline = time.monotonic() + 60
            while "resnapshot" in (runner.committed or {}) and time.monotonic() < deadline:
                time.sleep(0.02)  # --wait returns once the last chunk is read; it is published just after
        finally:
            runner.request_stop()

    thread = threading.Thread(target=operator, daemon=True)
    thread.start()
    runner.run()
    thread.join()
    assert waited == [0]
    err = capsys.readouterr().err
    assert "re-snapshot of prog.nopk: skipped, the table has no primary key usable for chunks" in err, err
    assert "re-snapshot of prog.a: every row read (250)" in err and "re-snapshot of prog.b: every row read (60)" in err
    assert re.search(r"re-snapshot of prog.a, prog.nopk, prog.b: 310/[\d,]+ rows \(\d+%\), [\d,]+ rows/s, ETA ", err)
    sample = runner.metrics.registry.get_sample_value
    assert sample("binlake_resnapshot_rows_total") == 310
    assert sample("binlake_resnapshot_tables_done_total") == 2
    assert sample("binlake_resnapshot_tables_remaining") == 0
    assert sample("binlake_resnapshot_rows_estimated") > 0
    reads = [e for e in committed_record_events(kafka.bootstrap, "prog") if isinstance(e.event, E.RowsEvent)]
    assert sum(len(e.event.rows) for e in reads) == 310
