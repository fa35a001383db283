"""binlake run -> Kafka -> binlake consume against the real MariaDB and Kafka broker.

Proof is the server's own SELECT (via the type-zoo helpers) and the GTIDs the server assigned:
every transaction appears exactly once, across restarts and kill -9.
"""

from __future__ import annotations

import collections
import os
import random
import re
import signal
import subprocess
import time

import orjson
import pytest

from ingester.cli.main import main
from ingester.daemon.kafka_io import read_checkpoint
from tests.harness import zoo
from tests.harness.daemon import BINLAKE, gtid_rows, rows_events_per_gtid

pytestmark = pytest.mark.integration


def _consume(kafka, prefix: str, capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["consume", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--from-beginning",
                 "--exit-at-end"]) == 0
    return [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]


def _run(server, kafka, prefix: str, *extra: str) -> None:
    assert main(["run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix,
                 "--server-id", "4242", "--exit-at-end", *extra]) == 0


def _wait_caught_up(bootstrap: str, prefix: str, server, timeout: float = 90) -> None:
    """Until the daemon's committed checkpoint is the server's current binlog position."""
    source_id = f"{prefix}.127.0.0.1:{server.port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        checkpoint = read_checkpoint(bootstrap, prefix, source_id)
        pos = server.current_binlog_position()
        if checkpoint and (checkpoint["file"], checkpoint["position"]) == (pos.file, pos.position):
            return
        time.sleep(0.5)


def test_every_type_through_kafka_equals_the_servers_select(make_mariadb, kafka, capsys) -> None:
    server = make_mariadb()
    server.execute("CREATE DATABASE zoo CHARACTER SET utf8mb4")
    conn = server.connect("zoo")
    zoo.create(conn)
    prefix = "zoo1"
    _run(server, kafka, prefix)
    events = _consume(kafka, prefix, capsys)
    zoo.assert_replay_equals_select(zoo.replay(b"\n".join(orjson.dumps(e) for e in events), "zoo"), conn)
    ddl = [e for e in events if e["type"] == "query"]
    assert any("CREATE TABLE" in e["query"] for e in ddl)
    # A second run finds the checkpoint and publishes nothing twice.
    _run(server, kafka, prefix)
    assert _consume(kafka, prefix, capsys) == events


def test_kill_minus_nine_never_loses_or_duplicates(make_mariadb, kafka, tmp_path) -> None:
    server = make_mariadb()
    server.execute("CREATE DATABASE k CHARACTER SET utf8mb4")
    conn = server.connect("k")
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(50))")
        cur.execute("CREATE TABLE b (id INT PRIMARY KEY, n BIGINT)")
        for i in range(3000):  # single-row and multi-table transactions
            if i % 3:
                cur.execute("INSERT INTO a VALUES (%s, %s)", (i, f"v{i}"))
            else:
                conn.begin()
                cur.execute("INSERT INTO a VALUES (%s, 'txn')", (i,))
                cur.execute("INSERT INTO b VALUES (%s, %s)", (i, i * i))
                conn.commit()
    prefix = "kill9"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    cmd = [*BINLAKE, "run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix,
           "--server-id", "4343"]
    rnd = random.Random(1)
    progress = []
    for _ in range(10):
        proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
        time.sleep(rnd.uniform(1.5, 4.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        checkpoint = read_checkpoint(kafka.bootstrap, prefix, f"{prefix}.127.0.0.1:{server.port}")
        progress.append(checkpoint and (checkpoint["file"], checkpoint["position"]))
        with conn.cursor() as cur:  # the source keeps changing between crashes
            for _ in range(50):
                i = rnd.randrange(100_000, 10**9)
                cur.execute("INSERT INTO b VALUES (%s, 1)", (i,))
    subprocess.run([*cmd, "--exit-at-end"], env=env, check=True, stderr=subprocess.DEVNULL, timeout=300)
    # The kills landed at different points of the stream, not all before or after the work.
    assert len(set(progress)) >= 3, progress
    seen = gtid_rows(kafka, prefix)
    assert all(n == 1 for n in seen.values()), [k for k, n in seen.items() if n > 1][:5]
    published = collections.Counter(g for g, _ in seen)
    expected = rows_events_per_gtid(server, "k")
    assert published == expected
    assert sum(expected.values()) > 3000


def test_source_restart_mid_stream_and_graceful_stop(make_mariadb, kafka) -> None:
    """MariaDB goes away and comes back while the daemon streams; SIGTERM then stops it cleanly."""
    server = make_mariadb()
    server.execute("CREATE DATABASE r CHARACTER SET utf8mb4")
    conn = server.connect("r")
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        for i in range(500):
            cur.execute("INSERT INTO t VALUES (%s, %s)", (i, i))
    prefix = "restart"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    cmd = [*BINLAKE, "run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix,
           "--server-id", "4444"]
    proc = subprocess.Popen([*cmd], env=env, stderr=subprocess.PIPE)
    time.sleep(3)
    server.stop()  # the replication connection breaks
    time.sleep(2)
    server.start()
    conn = server.connect("r")
    with conn.cursor() as cur:
        for i in range(500, 800):
            cur.execute("INSERT INTO t VALUES (%s, %s)", (i, i))
    _wait_caught_up(kafka.bootstrap, prefix, server)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert b"reconnecting" in err
    seen = gtid_rows(kafka, prefix)
    assert all(n == 1 for n in seen.values())
    expected = rows_events_per_gtid(server, "r")
    assert collections.Counter(g for g, _ in seen) == expected
    assert sum(expected.values()) == 800


def test_a_daemon_started_before_its_server_waits_for_it(make_mariadb, kafka) -> None:
    """The daemon starts while its server is still down (a host's services starting in any order): it tries
    again (source.start_wait), streams once the server is up, and publishes every row once."""
    server = make_mariadb()
    server.execute("CREATE DATABASE w CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE w.t (id INT PRIMARY KEY)")
    server.execute("INSERT INTO w.t VALUES (1), (2)")
    server.stop()
    prefix = "startwait"
    proc = subprocess.Popen([*BINLAKE, "run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix",
                             prefix, "--server-id", "4747"], env={**os.environ, "PYTHONPATH": os.getcwd()},
                            stderr=subprocess.PIPE)
    try:
        time.sleep(4)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        server.start()
        server.execute("INSERT INTO w.t VALUES (3)")
        _wait_caught_up(kafka.bootstrap, prefix, server)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert b"cannot connect" in err and b"trying again in" in err, err.decode()[-2000:]
    seen = gtid_rows(kafka, prefix)
    assert all(n == 1 for n in seen.values())
    expected = rows_events_per_gtid(server, "w")
    assert collections.Counter(g for g, _ in seen) == expected
    assert sum(expected.values()) == 2  # the two INSERTs: one before the stop, one after the start


def test_sigterm_stops_a_quiet_stream_promptly(make_mariadb, kafka) -> None:
    """Heartbeats off and nothing written: no byte wakes the replication read, yet SIGTERM stops the daemon
    within 2 s (exit 0) with what it read committed; a restart publishes that row no second time."""
    server = make_mariadb()
    server.execute("CREATE DATABASE q CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE q.t (id INT PRIMARY KEY)")
    prefix = "quietstop"
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "BINLAKE_SOURCE_HEARTBEAT": "0"}
    proc = subprocess.Popen([*BINLAKE, "run", "--source", server.url, "--kafka", kafka.bootstrap,
                             "--topic-prefix", prefix, "--server-id", "4848"], env=env, stderr=subprocess.PIPE)
    try:
        server.execute("INSERT INTO q.t VALUES (1)")
        _wait_caught_up(kafka.bootstrap, prefix, server)
        time.sleep(1)  # the source is quiet: the daemon waits in its replication read
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()[-2000:]
    assert took < 2, f"{took:.1f} s from SIGTERM to exit"
    server.execute("INSERT INTO q.t VALUES (2)")  # while it is stopped
    _run(server, kafka, prefix)
    seen = gtid_rows(kafka, prefix)
    assert all(n == 1 for n in seen.values())
    expected = rows_events_per_gtid(server, "q")
    assert collections.Counter(g for g, _ in seen) == expected and sum(expected.values()) == 2


def test_metrics_and_health_endpoints(make_mariadb, kafka) -> None:
    import urllib.request

    from ingester.devstack import free_tcp_port

    server = make_mariadb()
    server.execute("CREATE DATABASE m CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE m.t (id INT PRIMARY KEY)")
    server.execute("INSERT INTO m.t VALUES (1), (2), (3)")
    # Every binlog transaction of the fresh server is counted: the server numbers them in its GTIDs.
    last_gtid = server.execute("SELECT @@gtid_binlog_pos")[0][0]
    transactions = f"binlake_transactions_total {float(last_gtid.split('-')[-1])}"
    port = free_tcp_port()
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([*BINLAKE, "run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix",
                             "metrics", "--server-id", "4545", "--metrics-port", str(port)], env=env,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        body = ""
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                    if r.status == 200:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as m:
                            body = m.read().decode()
                        if transactions in body:
                            break
            except OSError:
                pass
            time.sleep(0.3)
        assert transactions in body, body
        records = re.search(r"^binlake_records_total (\S+)$", body, re.M)
        assert records and float(records.group(1)) >= 2  # the table's rows and the schema changes
        assert "binlake_lag_seconds" in body and "binlake_kafka_commit_seconds_bucket" in body
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
            assert r.status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_events_larger_than_a_kafka_message_are_chunked(make_mariadb, kafka, capsys) -> None:
    import hashlib

    server = make_mariadb()
    server.execute("CREATE DATABASE big CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE big.t (id INT PRIMARY KEY, b LONGBLOB)")
    conn = server.connect("big")
    payload = os.urandom(3_000_000)  # one rows event of ~3 MB: three Kafka-sized chunks
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (1, %s), (2, 'small')", (payload,))
    _run(server, kafka, "chunks")
    events = [e for e in _consume(kafka, "chunks", capsys) if e["type"] == "write_rows"]
    import base64

    rows = {r["after"]["id"]: base64.b64decode(r["after"]["b"]) for e in events for r in e["rows"]}
    assert hashlib.sha256(rows[1]).digest() == hashlib.sha256(payload).digest()
    assert rows[2] == b"small"


def test_kafka_broker_restart_mid_stream(make_mariadb, make_kafka, tmp_path) -> None:
    """The broker goes away: the daemon holds back (no data lost or reordered) and resumes when it returns."""
    from ingester.devstack import free_tcp_port

    broker = make_kafka(datadir=tmp_path / "kafka", port=free_tcp_port())
    server = make_mariadb()
    server.execute("CREATE DATABASE kb CHARACTER SET utf8mb4")
    conn = server.connect("kb")
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        for i in range(300):
            cur.execute("INSERT INTO t VALUES (%s)", (i,))
    prefix = "brokerrestart"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([*BINLAKE, "run", "--source", server.url, "--kafka", broker.bootstrap,
                             "--topic-prefix", prefix, "--server-id", "4646"], env=env, stderr=subprocess.PIPE)
    time.sleep(3)
    broker.stop()
    with conn.cursor() as cur:  # changes while Kafka is down
        for i in range(300, 600):
            cur.execute("INSERT INTO t VALUES (%s)", (i,))
    time.sleep(3)
    broker.start()
    _wait_caught_up(broker.bootstrap, prefix, server)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-3000:]
    seen = gtid_rows(broker, prefix)
    assert all(n == 1 for n in seen.values())
    assert len(seen) == 600


def test_dropped_replication_connection(make_mariadb, kafka) -> None:
    """The server kills our Binlog Dump thread mid-stream: the daemon reconnects, nothing lost or doubled."""
    server = make_mariadb()
    server.execute("CREATE DATABASE dc CHARACTER SET utf8mb4")
    conn = server.connect("dc")
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    prefix = "dropconn"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([*BINLAKE, "run", "--source", server.url, "--kafka", kafka.bootstrap,
                             "--topic-prefix", prefix, "--server-id", "4747"], env=env, stderr=subprocess.PIPE)
    killed = 0
    with conn.cursor() as cur:
        for i in range(400):
            cur.execute("INSERT INTO t VALUES (%s)", (i,))
            if i % 100 == 50:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:  # wait for the daemon's (re)connected dump thread
                    cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
                    threads = cur.fetchall()
                    if threads:
                        break
                    time.sleep(0.2)
                for (thread_id,) in threads:
                    cur.execute(f"KILL CONNECTION {int(thread_id)}")
                    killed += 1
    _wait_caught_up(kafka.bootstrap, prefix, server)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-3000:]
    assert killed >= 2 and err.count(b"reconnecting") >= 2
    seen = gtid_rows(kafka, prefix)
    assert all(n == 1 for n in seen.values()) and len(seen) == 400


def test_an_offsets_topic_the_broker_does_not_show_is_an_error_not_no_checkpoint(kafka, monkeypatch) -> None:
    """The daemon reads its checkpoint once its publisher has made sure the offsets topic exists: a broker
    just restarted (or a topic just created) may not show it yet, and "no checkpoint" there would make the
    daemon start over and publish transactions again. Only a caller that cannot know (status) gets None."""
    from ingester.daemon import kafka_io

    monkeypatch.setattr(kafka_io, "_READ_TIMEOUT", 1.0)
    assert read_checkpoint(kafka.bootstrap, "neverused", "neverused.x") is None
    started = time.monotonic()
    with pytest.raises(kafka_io.KafkaError, match=r"neverused\._offsets exists but the broker does not show"):
        read_checkpoint(kafka.bootstrap, "neverused", "neverused.x", exists=True)
    assert 1.0 <= time.monotonic() - started < 10
