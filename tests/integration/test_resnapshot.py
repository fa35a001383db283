"""On-demand re-snapshot while streaming (daemon/resnapshot.py): watermarks merge the chunks with
concurrent changes, and a kill -9 in the middle resumes the re-snapshot exactly once."""

from __future__ import annotations

import os
import signal
import subprocess

from ingester.cli.consume import committed_record_events
from ingester.cli.main import main
from ingester.codec import events as E
from ingester.daemon.kafka_io import read_checkpoint
from tests.integration.test_snapshot import BINLAKE, _CheckpointWatcher, _replay_in_seq_order, _Workload

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
    watcher = _CheckpointWatcher(kafka.bootstrap, prefix, source_id)
    workload = _Workload(server, "rs", ROWS)
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
    state, seen = _replay_in_seq_order(items, "rs", "t")
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
