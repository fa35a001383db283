"""Source- and storage-side faults of issue 7, against the real MariaDB and Kafka: the binlog purged behind
the daemon's checkpoint, and a long Kafka outage."""

from __future__ import annotations

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
