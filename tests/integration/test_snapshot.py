"""`binlake run --snapshot`: snapshot rows equal the binlog decoder's rows of the same data and, replayed,
the server's own SELECT; a kill -9 during a snapshot under a write workload loses and duplicates nothing;
the snapshot modes start a snapshot exactly when they should."""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import threading
import time
from typing import Any

import orjson
import pytest

from ingester.cli.consume import committed_record_events
from ingester.cli.main import main
from ingester.codec import events as E
from ingester.config import load_config
from ingester.daemon.kafka_io import read_checkpoint
from ingester.daemon.runner import Runner
from ingester.dump.jsonl import event_json
from ingester.records.format import Sequence, file_number
from ingester.sources.binlog_file import read_binlog_file
from tests.harness import zoo
from tests.harness.daemon import BINLAKE, CheckpointWatcher, run_daemon
from tests.harness.land import lake_frame, run_land
from tests.harness.snapshot import WriteWorkload, replay_in_seq_order

pytestmark = pytest.mark.integration
_COLUMN_FIELDS = ("name", "type", "binlog_type", "meta", "nullable", "unsigned", "collation", "enum_values",
                  "set_values", "geometry_type")


def _binlog_state(server, db: str) -> tuple[dict[str, dict[Any, dict[str, Any]]], dict[str, Any]]:
    """The tables as the binlog decoder replays them (Python values), and each table's last table map."""
    server.flush_logs()
    state: dict[str, dict[Any, dict[str, Any]]] = collections.defaultdict(dict)
    maps: dict[str, Any] = {}
    for f in server.binlog_files():
        for ev in read_binlog_file(f):
            if isinstance(ev, E.RowsEvent) and ev.database == db:
                maps[ev.table] = ev.table_map
                _apply(state[ev.table], ev, "id")
    return state, maps


def _apply(table: dict[Any, dict[str, Any]], ev: E.RowsEvent, key: str) -> None:
    for row in ev.rows:
        if "before" in row:
            table.pop(row["before"][key], None)
        if "after" in row:
            table[row["after"][key]] = dict(row["after"])


def _settle(server, quiet: float = 1.0, timeout: float = 15.0) -> None:
    """Wait until the binlog stops growing: MariaDB writes its BINLOG_CHECKPOINT event in the background,
    and a daemon run that ends before it would (rightly) stop one event short of the server's position."""
    deadline = time.monotonic() + timeout
    last, since = server.current_binlog_position(), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < quiet:
        time.sleep(0.1)
        now = server.current_binlog_position()
        if now != last:
            last, since = now, time.monotonic()


def test_snapshot_rows_equal_binlog_rows_and_the_servers_select(make_mariadb, kafka) -> None:
    server = make_mariadb()
    server.execute("CREATE DATABASE zoo CHARACTER SET utf8mb4")
    conn = server.connect("zoo")
    zoo.create(conn)
    binlog, binlog_maps = _binlog_state(server, "zoo")
    prefix = "snapzoo"
    cfg = load_config(environ={}, overrides={
        "source": {"url": server.url, "server_id": 4545}, "exit_at_end": True, "snapshot": "initial",
        "kafka": {"bootstrap": kafka.bootstrap, "topic_prefix": prefix}})
    _settle(server)
    runner = Runner(cfg)
    stats = runner.run()
    rows = sum(len(r) for r in binlog.values())
    assert stats["snapshot_rows"] == rows
    assert runner.metrics.registry.get_sample_value("binlake_snapshot_rows_total") == rows
    assert runner.metrics.registry.get_sample_value("binlake_snapshot_tables_remaining") == 0
    items = list(committed_record_events(kafka.bootstrap, prefix))
    reads = [i for i in items if isinstance(i.event, E.RowsEvent) and i.event.database == "zoo"]
    assert reads and all(type(i.event) is E.SnapshotRowsEvent and i.event.kind == "read" for i in reads)
    # Snapshot rows sort right before the snapshot's binlog position, where streaming resumed.
    pos = server.current_binlog_position()
    checkpoint = read_checkpoint(kafka.bootstrap, prefix, f"{prefix}.127.0.0.1:{server.port}")
    assert (checkpoint["file"], checkpoint["position"]) == (pos.file, pos.position)
    assert "snapshot" not in checkpoint
    assert all(i.seq < Sequence(file_number(pos.file), pos.position) for i in reads)
    snap: dict[str, dict[Any, dict[str, Any]]] = collections.defaultdict(dict)
    mismatches: list[tuple[Any, ...]] = []
    for i in reads:
        _apply(snap[i.event.table], i.event, "id")
    for name in zoo.TABLES:
        assert sorted(snap[name]) == sorted(binlog[name]), name
        for pk, row in binlog[name].items():
            for col, value in row.items():
                got = snap[name][pk][col]
                assert (type(got), got) == (type(value), value), f"{name}.{col} id={pk}"
        # The synthesized table map describes the columns as the server's TABLE_MAP does.
        tm = next(i.event.table_map for i in reads if i.event.table == name)
        for ours, theirs in zip(tm.columns, binlog_maps[name].columns, strict=True):
            for f in _COLUMN_FIELDS:
                if getattr(ours, f) != getattr(theirs, f):
                    mismatches.append((name, ours.name, f, getattr(ours, f), getattr(theirs, f)))
        assert tm.primary_key == binlog_maps[name].primary_key, name
    # A known difference, not in the snapshot's values: MariaDB's information_schema and SHOW CREATE TABLE print a
    # 4-byte ENUM label as '?'. (YEAR's SIGNEDNESS bit, which MariaDB's TABLE_MAP has and information_schema does
    # not show, the descriptor gives as the TABLE_MAP does: schema/table_columns.py.)
    assert sorted(mismatches) == [("strs", "e", "enum_values", ["a", "b", "ç", "?"], ["a", "b", "ç", "😀"])]
    # Replayed from the JSONL contract, the snapshot equals the server's own SELECT.
    lines = [orjson.loads(event_json(i.event)) for i in reads]
    assert {line["type"] for line in lines} == {"read_rows"}
    zoo.assert_replay_equals_select(zoo.replay(b"\n".join(orjson.dumps(line) for line in lines), "zoo"), conn)


# Rows of the kill -9 snapshot test: 100,000 in CI; BINLAKE_TEST_SNAPSHOT_ROWS=1000000 is the proof
# (bench/results/snapshot.md).
SNAPSHOT_ROWS = int(os.environ.get("BINLAKE_TEST_SNAPSHOT_ROWS", "100000"))


@pytest.mark.parametrize("parallelism", [1, 3], ids=["one-connection", "three-connections"])
def test_kill_minus_nine_during_a_snapshot_under_writes(make_mariadb, kafka, spark, tmp_path, parallelism) -> None:
    """Read on one connection, then landed; or read in key ranges on three (parallel_snapshot.py), each range
    resumed from its own last committed key."""
    n_rows = SNAPSHOT_ROWS
    server = make_mariadb()
    server.execute("CREATE DATABASE ks CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE ks.t (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20))")
    conn = server.connect("ks")
    with conn.cursor() as cur:  # in transactions of 10,000 rows
        for start in range(1, n_rows + 1, 10_000):
            cur.executemany("INSERT INTO t VALUES (%s, %s, %s)",
                            [(i, i, f"s{i}") for i in range(start, min(start + 10_000, n_rows + 1))])
            conn.commit()
    prefix = f"snapkill{parallelism}"
    source_id = f"{prefix}.127.0.0.1:{server.port}"
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "BINLAKE_SNAPSHOT_CHUNK_ROWS": str(max(10, n_rows // 10_000)),
           "BINLAKE_SNAPSHOT_PARALLELISM": str(parallelism), "BINLAKE_SNAPSHOT_PARALLEL_ROWS": "0"}
    # (small chunks: a query each, so the snapshot lasts long enough to be stopped four times in its first 60%)
    cmd = [*BINLAKE, "run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix,
           "--server-id", "4646", "--snapshot", "initial"]
    watcher = CheckpointWatcher(kafka.bootstrap, prefix, source_id)
    workload = WriteWorkload(server, "ks", n_rows)
    workload.start()
    progress = []
    try:
        for n, share in enumerate((0.1, 0.25, 0.4, 0.55)):  # a SIGTERM (stops after a chunk, exit 0), 3 kill -9
            proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
            # Stop it as soon as its committed progress passes this round's share of the table.
            target = max(int(share * n_rows), (progress[-1] if progress else 0) + 1)
            watcher.wait(lambda c, target=target: "snapshot" in c and c["snapshot"]["rows"] >= target,
                         timeout=max(120, n_rows / 2000))
            proc.send_signal(signal.SIGKILL if n else signal.SIGTERM)
            assert proc.wait(timeout=60) == (-signal.SIGKILL if n else 0)
            checkpoint = read_checkpoint(kafka.bootstrap, prefix, source_id)
            assert checkpoint and "snapshot" in checkpoint, (n, progress, checkpoint, watcher.latest)
            progress.append(checkpoint["snapshot"]["rows"])
            ranges = checkpoint["snapshot"].get("ranges")
            if parallelism > 1:  # every range read on from its own key: several of them under way at each stop
                assert ranges and sum(r["rows"] for r in ranges) == progress[-1], ranges
                assert sum(1 for r in ranges if r["rows"]) >= 2, ranges
            else:
                assert ranges is None
    finally:
        watcher.close()
        workload.stop.set()
        workload.join()
    subprocess.run([*cmd, "--exit-at-end"], env=env, check=True, stderr=subprocess.DEVNULL,
                   timeout=max(300, n_rows // 500))
    # Every stop landed inside the snapshot, each after more chunks had committed.
    assert progress == sorted(set(progress)), progress
    assert progress[0] >= n_rows // 10 and progress[-1] < n_rows and workload.changes > 100, (progress,
                                                                                             workload.changes)
    items = list(committed_record_events(kafka.bootstrap, prefix))
    state, seen = replay_in_seq_order(items, "ks", "t")
    with conn.cursor() as cur:
        cur.execute("SELECT id, v, s FROM t")
        expected = {i: (v, s) for i, v, s in cur.fetchall()}
    assert state == expected
    assert len(seen) == len(set(seen)), "a row was published twice"
    read_ids = [pk for _, pk, kind in seen if kind == "read"]
    assert len(read_ids) == len(set(read_ids)), "the snapshot read a row twice"
    assert len(read_ids) > n_rows * 9 // 10
    reads = [item.event for item in sorted(items, key=lambda i: i.seq) if isinstance(item.event, E.SnapshotRowsEvent)]
    assert [e.marks[:2] for e in reads if e.marks[0] or e.marks[1]] == [(True, False), (False, True)]
    if parallelism > 1:
        return  # (landing does not depend on how the snapshot was read: once is enough)
    # Landed by `binlake land`: the Delta mirror is the server's SELECT, the change log holds each change once.
    lake = tmp_path / "lake"
    assert run_land(kafka, prefix, lake) == 0
    mirror = lake_frame(spark, lake, "ks", "t")
    assert {r.id: (r.v, r.s) for r in mirror.select("id", "v", "s").collect()} == expected
    changes = lake_frame(spark, lake, "ks", "t__changes")
    assert changes.count() == changes.select("seq", "row_index").distinct().count() == len(seen)
    # the figure of bench/results/snapshot.md (pytest -s)
    print(f"snapshot kill -9 proof: {n_rows:,} rows; stopped at {progress} rows committed; {workload.changes:,} "
          f"concurrent changes; {len(read_ids):,} rows read, {len(seen):,} changes; replay == Delta mirror == "
          f"SELECT ({len(expected):,} rows), change log {len(seen):,} rows")


def test_chunks_of_text_binary_and_composite_keys_and_keyless_tables(make_mariadb, kafka, monkeypatch) -> None:
    """Chunk boundaries follow the key's collation order (not byte order): every row once, one row per chunk."""
    server = make_mariadb()
    server.execute("CREATE DATABASE ck CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE ck.ci (a VARCHAR(10) CHARACTER SET latin1, b INT, v INT, PRIMARY KEY (a, b))")
    server.execute("CREATE TABLE ck.bin (a VARBINARY(10) PRIMARY KEY, v INT)")
    server.execute("CREATE TABLE ck.nokey (a INT, v VARCHAR(10))")
    words = ["a", "B", "c", "É", "Z", "å", "Ab", "b b", "aa", "ZZ", "", "0", "ö"]  # latin1_swedish_ci: Z < å < ö
    ci = [(w, b, i) for i, w in enumerate(words) for b in (2, -1, 10)]
    server.connect("ck").cursor().executemany("INSERT INTO ci VALUES (%s, %s, %s)", ci)
    binary = [(bytes([x, y]), x * 256 + y) for x in (0, 1, 0x7F, 0x80, 0xFF) for y in (0, 0x41, 0x61, 0xFF)]
    server.connect("ck").cursor().executemany("INSERT INTO bin VALUES (%s, %s)", binary)
    server.execute("INSERT INTO ck.nokey VALUES (1, 'x'), (1, 'x'), (NULL, NULL)" + ", (2, 'y')" * 20)
    monkeypatch.setenv("BINLAKE_SNAPSHOT_CHUNK_ROWS", "1")  # every row is a chunk boundary
    run_daemon(server, kafka, "chunks", "--snapshot", "initial")
    rows: dict[str, list] = collections.defaultdict(list)
    for item in committed_record_events(kafka.bootstrap, "chunks"):
        if isinstance(item.event, E.SnapshotRowsEvent):
            rows[item.event.table] += [tuple(r["after"].values()) for r in item.event.rows]
    assert sorted(rows["ci"]) == sorted(tuple(r) for r in server.execute("SELECT a, b, v FROM ck.ci"))
    assert len(rows["ci"]) == len(ci)
    assert sorted(rows["bin"]) == sorted(binary)
    assert sorted(rows["nokey"], key=repr) == sorted(server.execute("SELECT a, v FROM ck.nokey"), key=repr)


def test_key_ranges_on_three_connections_read_every_row_once(make_mariadb, kafka, monkeypatch) -> None:
    """snapshot_parallelism 3: integer keys at their types' ends, negative and sparse keys, ranges narrower than
    the parts, a one-row and an empty table: each table's rows once, == SELECT, first and last marked once."""
    server = make_mariadb()
    server.execute("CREATE DATABASE pr CHARACTER SET utf8mb4")
    tables = {"neg": ("INT", list(range(-1000, 1001, 7))),
              "ubig": ("BIGINT UNSIGNED", [0, 1, 5, 2**63, 2**64 - 2, 2**64 - 1]),
              "sbig": ("BIGINT", [-(2**63), -1, 0, 2**62, 2**63 - 1]),
              "tiny": ("TINYINT", [-128, 0, 127]), "one": ("SMALLINT", [42]), "empty": ("MEDIUMINT", [])}
    conn = server.connect("pr")
    with conn.cursor() as cur:
        for name, (kind, keys) in tables.items():
            cur.execute(f"CREATE TABLE {name} (id {kind} PRIMARY KEY, v VARCHAR(40))")
            cur.executemany(f"INSERT INTO {name} VALUES (%s, %s)", [(k, f"v{k}") for k in keys])
    conn.commit()
    monkeypatch.setenv("BINLAKE_SNAPSHOT_PARALLELISM", "3")
    monkeypatch.setenv("BINLAKE_SNAPSHOT_PARALLEL_ROWS", "0")  # every table, however small
    monkeypatch.setenv("BINLAKE_SNAPSHOT_CHUNK_ROWS", "10")
    run_daemon(server, kafka, "ranges", "--snapshot", "initial")
    rows: dict[str, list] = collections.defaultdict(list)
    marks: dict[str, list] = collections.defaultdict(list)
    for item in sorted(committed_record_events(kafka.bootstrap, "ranges"), key=lambda i: i.seq):
        if isinstance(item.event, E.SnapshotRowsEvent):
            rows[item.event.table] += [(r["after"]["id"], r["after"]["v"]) for r in item.event.rows]
            marks[item.event.table] += [item.event.marks[:2]]
    for name, (_, keys) in tables.items():
        assert sorted(rows[name]) == sorted(server.execute(f"SELECT id, v FROM pr.{name}")), name
        assert len(rows[name]) == len(keys), name
        if keys:
            assert marks[name][0][0] and marks[name][-1][1], name
            assert sum(m[0] for m in marks[name]) == sum(m[1] for m in marks[name]) == 1, name
    assert len(marks["neg"]) > 12  # in chunks of 10 rows, of several ranges


def test_three_connections_under_writes_read_the_points_image(make_mariadb, kafka, monkeypatch) -> None:
    """The three connections' snapshots open at one binlog position (MariaDB: taken again until they agree), so the
    snapshot rows are the table exactly as the binlog has it at the snapshot's point, while rows change all along."""
    server = make_mariadb()
    server.execute("CREATE DATABASE pt CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE pt.t (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20))")
    conn = server.connect("pt")
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO t VALUES (%s, %s, %s)", [(i, i, f"s{i}") for i in range(1, 20_001)])
    conn.commit()
    stop = threading.Event()

    def write() -> None:  # a commit every ~20 ms, all through the snapshot
        writer_conn = server.connect("pt")
        writer_conn.autocommit(True)
        rnd = random.Random(3)
        with writer_conn.cursor() as cur:
            while not stop.is_set():
                cur.execute("UPDATE t SET v = v + 1 WHERE id = %s", (rnd.randrange(1, 20_001),))
                time.sleep(0.02)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    monkeypatch.setenv("BINLAKE_SNAPSHOT_PARALLELISM", "3")
    monkeypatch.setenv("BINLAKE_SNAPSHOT_PARALLEL_ROWS", "0")
    monkeypatch.setenv("BINLAKE_SNAPSHOT_CHUNK_ROWS", "200")  # a hundred chunks: the writes go on between them
    try:
        time.sleep(0.5)
        run_daemon(server, kafka, "pointimage", "--snapshot", "initial")
    finally:
        stop.set()
        writer.join()
    reads = [i for i in committed_record_events(kafka.bootstrap, "pointimage")
             if isinstance(i.event, E.SnapshotRowsEvent) and i.event.table == "t"]
    point = (reads[0].seq.file_number, reads[0].seq.position + 1)  # snapshot rows sort at (file, point - 1, n)
    server.flush_logs()
    image: dict[Any, dict[str, Any]] = {}
    after = 0
    for f in server.binlog_files():
        for ev in read_binlog_file(f):
            if isinstance(ev, E.RowsEvent) and ev.database == "pt":
                if (file_number(f.name), ev.position) < point:
                    _apply(image, ev, "id")
                else:
                    after += 1
    snap: dict[Any, dict[str, Any]] = {}
    for item in reads:
        _apply(snap, item.event, "id")
    assert after > 10, "the writes went on during the snapshot"
    assert len(snap) == 20_000 and snap == image


def test_a_reading_connection_lost_mid_range_is_named_and_the_snapshot_resumes_once(make_mariadb, kafka, monkeypatch,
                                                                                        capsys) -> None:
    """A source connection of a three-connection snapshot killed by the server while it reads a range: one line
    names the table and the server's error, the daemon reconnects and resumes each range from its checkpoint,
    and every row reaches Kafka once (== SELECT)."""
    server = make_mariadb()
    server.execute("CREATE DATABASE pk CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE pk.t (id INT PRIMARY KEY, v VARCHAR(40))")
    conn = server.connect("pk")
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, f"v{i}") for i in range(1, 60_001)])
    conn.commit()
    killed: list[int] = []

    def kill_a_reader() -> None:  # the first connection seen reading a chunk of pk.t past a range's start
        watcher = server.connect("pk")
        watcher.autocommit(True)
        deadline = time.monotonic() + 60
        with watcher.cursor() as cur:
            while not killed and time.monotonic() < deadline:
                cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()"
                            " AND INFO LIKE 'SELECT%FROM `pk`.`t` WHERE%>%'")
                found = cur.fetchone()
                if found is not None:
                    cur.execute(f"KILL CONNECTION {int(found[0])}")
                    killed.append(int(found[0]))
        watcher.close()

    killer = threading.Thread(target=kill_a_reader, daemon=True)
    monkeypatch.setenv("BINLAKE_SNAPSHOT_PARALLELISM", "3")
    monkeypatch.setenv("BINLAKE_SNAPSHOT_PARALLEL_ROWS", "0")
    monkeypatch.setenv("BINLAKE_SNAPSHOT_CHUNK_ROWS", "100")
    killer.start()
    run_daemon(server, kafka, "lostreader", "--snapshot", "initial")
    killer.join()
    assert killed, "no connection was seen reading the table"
    lines = [line for line in capsys.readouterr().err.splitlines() if "WARNING binlake.run snapshot" in line]
    assert len(lines) == 1 and "WARNING binlake.run snapshot of pk.t: error 20" in lines[0], lines
    assert "reconnecting" in lines[0], lines
    rows = [(r["after"]["id"], r["after"]["v"]) for i in committed_record_events(kafka.bootstrap, "lostreader")
            if isinstance(i.event, E.SnapshotRowsEvent) for r in i.event.rows]
    assert len(rows) == 60_000 and sorted(rows) == sorted(server.execute("SELECT id, v FROM pk.t"))


def test_snapshot_modes(make_mariadb, kafka, capsys) -> None:
    """never streams from the oldest binlog as before; initial and when-needed snapshot without a checkpoint
    and not with one; when-needed snapshots again once the checkpoint's binlog is purged."""
    server = make_mariadb()
    server.execute("CREATE DATABASE md CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE md.t (id INT PRIMARY KEY, v VARCHAR(10))")
    server.execute("INSERT INTO md.t VALUES (1, 'a'), (2, 'b')")

    def kinds(prefix: str) -> collections.Counter:
        return collections.Counter(i.event.kind for i in committed_record_events(kafka.bootstrap, prefix)
                                   if isinstance(i.event, E.RowsEvent) and i.event.database == "md")

    run_daemon(server, kafka, "mnever")
    assert kinds("mnever") == {"write": 1}
    run_daemon(server, kafka, "mwhen", "--snapshot", "when-needed")
    run_daemon(server, kafka, "minit", "--snapshot", "initial")
    assert kinds("mwhen") == kinds("minit") == {"read": 1}
    server.execute("INSERT INTO md.t VALUES (3, 'c')")
    run_daemon(server, kafka, "mwhen", "--snapshot", "when-needed")
    run_daemon(server, kafka, "minit", "--snapshot", "initial")
    assert kinds("mwhen") == kinds("minit") == {"read": 1, "write": 1}
    first = server.current_binlog_position().file
    deadline = time.monotonic() + 30
    while first in {row[0] for row in server.execute("SHOW BINARY LOGS")}:  # MariaDB purges a log only
        assert time.monotonic() < deadline, "binlog not purged"  # once its binlog checkpoint has passed
        server.flush_logs()
        server.execute(f"PURGE BINARY LOGS TO '{server.current_binlog_position().file}'")
        time.sleep(0.2)
    server.execute("INSERT INTO md.t VALUES (4, 'd')")
    run_daemon(server, kafka, "mwhen", "--snapshot", "when-needed")
    assert kinds("mwhen") == {"read": 2, "write": 1}
    items = list(committed_record_events(kafka.bootstrap, "mwhen"))
    state, _ = _replay_rows(items)
    assert state == {1: "a", 2: "b", 3: "c", 4: "d"}
    # A column the snapshot cannot read stops it at once with one line naming it (no retry loop).
    server.execute("CREATE TABLE md.u (id INT PRIMARY KEY, u UUID)")
    started = time.monotonic()
    assert main(["run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", "muuid",
                 "--server-id", "4545", "--exit-at-end", "--snapshot", "initial"]) == 2
    assert "snapshot of md.u: column u has type uuid" in capsys.readouterr().err
    assert time.monotonic() - started < 20


def _replay_rows(items) -> tuple[dict[int, str], int]:
    state: dict[int, str] = {}
    for item in sorted(items, key=lambda i: i.seq):
        if isinstance(item.event, E.RowsEvent):
            for row in item.event.rows:
                state[row["after"]["id"]] = row["after"]["v"]
    return state, len(items)


def test_mysql84_snapshot_where_docker_exists(mysql84, kafka) -> None:
    """MySQL 8.4 (testcontainers, only where a Docker engine runs): the brief FLUSH TABLES WITH READ LOCK
    gives the snapshot's binlog position and executed GTIDs; the rows equal the server's SELECT."""
    with mysql84.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS snap84")
        cur.execute("CREATE TABLE snap84.t (id INT PRIMARY KEY, v DECIMAL(6,2), s VARCHAR(10), j JSON)")
        cur.executemany("INSERT INTO snap84.t VALUES (%s, %s, %s, %s)",
                        [(i, f"{i}.25", f"s{i}", '{"a": [1, "x"]}') for i in range(1, 301)])
        conn.commit()
        cur.execute(mysql84.binlog_status_sql)
        status = cur.fetchone()
        cur.execute("SELECT id, v, s FROM snap84.t")
        expected = {i: (str(v), s) for i, v, s in cur.fetchall()}
    prefix = "snap84"
    assert main(["run", "--source", mysql84.url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix,
                 "--server-id", "4848", "--exit-at-end", "--snapshot", "initial"]) == 0
    got = {}
    for item in committed_record_events(kafka.bootstrap, prefix):
        if isinstance(item.event, E.SnapshotRowsEvent) and item.event.database == "snap84":
            for row in item.event.rows:
                after = row["after"]
                got[after["id"]] = (after["v"], after["s"])
                assert after["j"] == {"a": [1, "x"]}
    assert got == expected
    checkpoint = read_checkpoint(kafka.bootstrap, prefix, f"{prefix}.{mysql84.host}:{mysql84.port}")
    assert (checkpoint["file"], checkpoint["position"]) == (status[0], status[1])
    assert checkpoint["gtid_set"] == status[4].replace("\n", "")
