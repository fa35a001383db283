"""Failover across ``source.hosts`` with two real MariaDB servers in GTID replication (primary -> replica,
``log_slave_updates``): the daemon moves to the replica when the primary dies (kill -9) and continues from
its checkpoint's GTID state, every GTID exactly once (counted against the replica's own binlog files) and
the replayed changes equal to the replica's SELECT; it refuses a replica whose history diverges."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from ingester.cli.consume import committed_record_events
from ingester.cli.main import main
from ingester.codec import events as E
from ingester.daemon.kafka_io import read_checkpoint
from tests.harness.daemon import BINLAKE, gtid_rows, rows_events_per_gtid

pytestmark = pytest.mark.integration
_GTID_OPTIONS = {"log_slave_updates": True, "gtid_strict_mode": 1}


def _replicated_pair(make_mariadb):
    """A primary and a replica following it by GTID (MASTER_USE_GTID=slave_pos), with one table."""
    primary = make_mariadb(server_id=1, options=_GTID_OPTIONS)
    replica = make_mariadb(server_id=2, options=_GTID_OPTIONS)
    replica.execute(f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary.port}, MASTER_USER='root', "
                    "MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos")
    replica.execute("START SLAVE")
    primary.execute("CREATE DATABASE fo CHARACTER SET utf8mb4")
    primary.execute("CREATE TABLE fo.t (id INT PRIMARY KEY, v VARCHAR(20))")
    return primary, replica


def _gtid_pos(server) -> str:
    return server.execute("SELECT @@gtid_binlog_pos")[0][0]


def _caught_up(replica, primary) -> None:
    """The replica has applied (and binlogged) everything the primary has."""
    assert replica.execute("SELECT MASTER_GTID_WAIT(%s, 60)", (_gtid_pos(primary),))[0][0] == 0


def _insert(server, first: int, count: int, tag: str) -> None:
    with server.connect("fo") as conn, conn.cursor() as cur:
        for i in range(first, first + count):
            if i % 5:
                cur.execute("INSERT INTO t VALUES (%s, %s)", (i, f"{tag}{i}"))
            else:  # a multi-statement transaction now and then
                conn.begin()
                cur.execute("INSERT INTO t VALUES (%s, %s)", (i, tag))
                cur.execute("UPDATE t SET v = CONCAT(v, '+') WHERE id = %s", (i - 1,))
                conn.commit()


def test_failover_to_the_promoted_replica_after_kill_minus_nine(make_mariadb, kafka) -> None:
    primary, replica = _replicated_pair(make_mariadb)
    _insert(primary, 0, 200, "p")
    prefix = "failover"
    source_id = f"{prefix}.127.0.0.1:{primary.port}"  # the configured URL's: kept on the replica
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([*BINLAKE, "run", "--source", primary.url, "--source-hosts",
                             f"127.0.0.1:{replica.port}", "--kafka", kafka.bootstrap, "--topic-prefix", prefix,
                             "--server-id", "4949"], env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while read_checkpoint(kafka.bootstrap, prefix, source_id) is None:  # streaming from the primary
            assert time.monotonic() < deadline and proc.poll() is None, "no checkpoint from the primary"
            time.sleep(0.2)
        _insert(primary, 200, 300, "p")  # while the daemon streams from the primary
        _caught_up(replica, primary)
        os.kill(primary._server_pid(), signal.SIGKILL)
        before = read_checkpoint(kafka.bootstrap, prefix, source_id)
        replica.execute("STOP SLAVE")  # promoted: writes continue on it
        replica.execute("RESET SLAVE ALL")
        _insert(replica, 500, 300, "r")
        target = _gtid_pos(replica)
        deadline = time.monotonic() + 120
        while (read_checkpoint(kafka.bootstrap, prefix, source_id) or {}).get("gtid_set") != target:
            assert time.monotonic() < deadline and proc.poll() is None, "the daemon did not catch up on the replica"
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-3000:]
    assert f"failing over to 127.0.0.1:{replica.port}".encode() in err
    assert f"taking over from 127.0.0.1:{primary.port} on 127.0.0.1:{replica.port}".encode() in err
    after = read_checkpoint(kafka.bootstrap, prefix, source_id)
    assert after["source"] == f"127.0.0.1:{replica.port}" and before["source"] == f"127.0.0.1:{primary.port}"
    # Every GTID exactly once; the replica's binlog holds the primary's transactions (log_slave_updates)
    # and its own. Within each table the sequences keep growing across the two servers (gtid_rows checks).
    seen = gtid_rows(kafka, prefix)
    assert all(n == 1 for n in seen.values()), [k for k, n in seen.items() if n > 1][:5]
    expected = rows_events_per_gtid(replica, "fo")
    assert {g for g, _ in seen} == set(expected) and len(seen) == sum(expected.values())
    assert {g.split("-")[1] for g in expected} == {"1", "2"}  # both servers' transactions
    # Replayed in sequence order, the changes equal the new primary's own SELECT.
    state: dict[int, str] = {}
    for item in committed_record_events(kafka.bootstrap, prefix):
        if isinstance(item.event, E.RowsEvent) and item.event.database == "fo":
            for row in item.event.rows:
                state[row["after"]["id"]] = row["after"]["v"]
    assert state == dict(replica.execute("SELECT id, v FROM fo.t"))


def test_failover_refuses_a_replica_whose_history_diverges(make_mariadb, kafka, capsys, monkeypatch) -> None:
    """Three ways a replica's binlog can differ from what was published, each refused with one line naming
    both servers and the GTID: it lacks the last published GTID; it has another transaction at that domain
    and sequence number (found from @@gtid_binlog_pos); it has moved past it on another branch (the
    server's own strict GTID check, error 1236)."""
    primary, replica = _replicated_pair(make_mariadb)
    _insert(primary, 0, 20, "p")
    _caught_up(replica, primary)
    replica.execute("STOP SLAVE")
    primary.execute("INSERT INTO fo.t VALUES (1000, 'primary only')")
    published = _gtid_pos(primary)
    prefix, tid = "diverge", "diverge.source"
    args = ["--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--server-id", "5050", "--exit-at-end"]
    monkeypatch.setenv("BINLAKE_KAFKA_TRANSACTIONAL_ID", tid)
    # The doctor checks every listed server; one that cannot be reached is not ready.
    from ingester.devstack import free_tcp_port

    nowhere = free_tcp_port()
    hosts = f"127.0.0.1:{replica.port},127.0.0.1:{nowhere}"
    assert main(["doctor", "--source", primary.url, "--source-hosts", hosts, "--server-id", "5050"]) == 1
    out = capsys.readouterr().out
    assert f"ready: mysql://root@127.0.0.1:{primary.port}" in out
    assert f"ready: mysql://root@127.0.0.1:{replica.port}" in out
    assert f"NOT READY: mysql://root@127.0.0.1:{nowhere}" in out and "Connection refused" in out
    assert main(["run", "--source", primary.url, "--source-hosts", f"127.0.0.1:{replica.port}", *args]) == 0
    assert read_checkpoint(kafka.bootstrap, prefix, tid)["gtid_set"] == published
    capsys.readouterr()

    def on_replica() -> str:
        """Run on the replica first (the primary listed as a failover server), as after a failover."""
        assert main(["run", "--source", replica.url, "--source-hosts", f"127.0.0.1:{primary.port}",
                     *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert f"127.0.0.1:{replica.port} cannot take over from 127.0.0.1:{primary.port}" in err, err
        assert "refusing to fail over" in err and "Traceback" not in err
        return err

    assert f"its binlog lacks GTID {published}, already published" in on_replica()
    replica.execute("INSERT INTO fo.t VALUES (1001, 'replica only')")  # the same seq, server 2
    errant = _gtid_pos(replica)
    assert errant.split("-")[2] == published.split("-")[2] and errant != published
    assert f"its binlog has {errant} where {published} was published" in on_replica()
    replica.execute("INSERT INTO fo.t VALUES (1002, 'replica again')")
    err = on_replica()
    assert "server error 1236" in err and published in err
    # Nothing was published from the replica.
    assert read_checkpoint(kafka.bootstrap, prefix, tid)["gtid_set"] == published
