"""The replication stream from a real MariaDB carries exactly the events of its binlog files."""

from __future__ import annotations

import io
import time
from pathlib import Path

import orjson
import pytest

from ingester.cli.dump import dump_file
from ingester.cli.main import main
from ingester.codec.events import BinlogCheckpointEvent
from ingester.dump.jsonl import event_json
from ingester.sources.binlog_file import read_binlog_file
from ingester.sources.replication import BinlogStream, ReplicationError

pytestmark = pytest.mark.integration


def _workload(server) -> None:
    server.execute("CREATE DATABASE rs CHARACTER SET utf8mb4")
    conn = server.connect("rs")
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(100), d DECIMAL(10,3), ts DATETIME(6), "
                    "b BLOB, j JSON)")
        for i in range(200):
            cur.execute("INSERT INTO t VALUES (%s, %s, %s, NOW(6), %s, %s)",
                        (i, f"välue {i} 😀", i / 7, bytes([i % 256]) * i, f'{{"i": {i}}}'))
        cur.execute("UPDATE t SET v = CONCAT(v, '!') WHERE id % 3 = 0")
        cur.execute("DELETE FROM t WHERE id % 5 = 0")
        cur.execute("ALTER TABLE t ADD COLUMN extra INT DEFAULT 7")
        cur.execute("INSERT INTO t (id, v) VALUES (1000, REPEAT('x', 100))")


def _wait_for_checkpoint(path: Path) -> None:
    """MariaDB writes a new binlog's BINLOG_CHECKPOINT naming it in the background after FLUSH (after one naming
    the file before, if that one's transactions were still being committed): a reader racing it sees the file end
    before the event, which a later read of the file then has."""
    deadline = time.monotonic() + 30
    while not any(type(ev) is BinlogCheckpointEvent and ev.log_file == path.name for ev in read_binlog_file(path)):
        assert time.monotonic() < deadline, f"no BINLOG_CHECKPOINT in {path}"
        time.sleep(0.05)


def _lines(events) -> list[dict]:
    return [orjson.loads(event_json(ev)) for ev in events]


def test_stream_equals_files(make_mariadb) -> None:
    server = make_mariadb()
    _workload(server)
    server.flush_logs()
    files = server.binlog_files()
    _wait_for_checkpoint(files[-1])
    stream = BinlogStream(server.url, server_id=777, start_file=files[0].name, non_blocking=True, heartbeat=0)
    streamed = [e for e in _lines(stream.events()) if e["log_pos"] != 0]  # drop artificial events
    from_files = []
    for f in files:
        out = io.BytesIO()
        dump_file(str(f), out, "jsonl")
        from_files += [orjson.loads(line) for line in out.getvalue().splitlines()]
    for e in streamed + from_files:  # the live file's FDE says "in use" on disk only
        if e["type"] == "format_description":
            e["flags"] &= ~1
    assert streamed == from_files
    assert sum(len(e.get("rows", [])) for e in streamed) > 250
    assert stream.file == files[-1].name
    assert stream.next_position == files[-1].stat().st_size


def test_stream_resumes_at_a_position(make_mariadb) -> None:
    server = make_mariadb()
    _workload(server)
    first = server.binlog_files()[0]
    all_events = [e for e in _lines(BinlogStream(server.url, server_id=778, start_file=first.name,
                                                 non_blocking=True, heartbeat=0).events()) if e["log_pos"]]
    middle = next(e for e in all_events[len(all_events) // 2:] if e["type"] == "mariadb_gtid")
    resumed = [e for e in _lines(BinlogStream(server.url, server_id=779, start_file=first.name,
                                              start_position=middle["position"], non_blocking=True,
                                              heartbeat=0).events())
               if e["log_pos"] and e["type"] not in ("format_description",)]
    tail = [e for e in all_events if e["position"] >= middle["position"] and e["type"] != "format_description"]
    assert resumed == tail


def test_purged_binlog_is_a_clear_error(make_mariadb, capsys) -> None:
    server = make_mariadb()
    with pytest.raises(ReplicationError, match=r"server error 1236: .*purged, or never existed"):
        list(BinlogStream(server.url, server_id=780, start_file="gone.000001", non_blocking=True).positioned())
    assert main(["dump", "--source", server.url, "--start-file", "gone.000001", "--exit-at-end"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1236" in err


def test_bad_password_is_a_clear_error_without_the_password(make_mariadb, capsys) -> None:
    server = make_mariadb()
    url = f"mysql://{server.replication_user}:wrong-Secret-42@127.0.0.1:{server.port}?tls=disabled"
    assert main(["dump", "--source", url, "--exit-at-end"]) == 2
    err = capsys.readouterr().err
    assert "wrong-Secret-42" not in err and "1045" in err and err.count("\n") == 1


def test_mariadb_gtid_resume_equals_position_resume(make_mariadb) -> None:
    server = make_mariadb()
    _workload(server)
    first = server.binlog_files()[0]
    all_events = [e for e in _lines(BinlogStream(server.url, server_id=781, start_file=first.name,
                                                 non_blocking=True, heartbeat=0).events()) if e["log_pos"]]
    gtids = [e for e in all_events if e["type"] == "mariadb_gtid"]
    resume_after = gtids[len(gtids) // 2]
    state = f"{resume_after['domain_id']}-{resume_after['server_id']}-{resume_after['sequence']}"
    nxt = gtids[len(gtids) // 2 + 1]
    by_gtid = [e for e in _lines(BinlogStream(server.url, server_id=782, gtid_set=state, non_blocking=True,
                                              heartbeat=0).events())
               if e["log_pos"] and e["type"] not in ("format_description", "mariadb_gtid_list",
                                                     "binlog_checkpoint")]
    expected = [e for e in all_events if e["position"] >= nxt["position"]
                and e["type"] not in ("format_description", "mariadb_gtid_list", "binlog_checkpoint")]
    assert by_gtid == expected
    assert by_gtid[0]["type"] == "mariadb_gtid" and by_gtid[0]["sequence"] == nxt["sequence"]


def test_mysql84_gtid_resume_where_docker_exists(mysql84) -> None:
    """MySQL 8.4 (testcontainers, only where a Docker engine runs): COM_BINLOG_DUMP_GTID resumes after
    the executed set exactly where the position-based stream says the next transaction starts."""
    _workload(mysql84)
    with mysql84.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        first = cur.fetchall()[0][0]
    all_events = [e for e in _lines(BinlogStream(mysql84.url, server_id=783, start_file=first,
                                                 non_blocking=True, heartbeat=0).events()) if e["log_pos"]]
    gtids = [e for e in all_events if e["type"] == "gtid"]
    half = gtids[: len(gtids) // 2]
    executed = f"{half[0]['uuid']}:{half[0]['gno']}-{half[-1]['gno']}"
    resumed = [e for e in _lines(BinlogStream(mysql84.url, server_id=784, gtid_set=executed, non_blocking=True,
                                              heartbeat=0).events()) if e["type"] == "gtid"]
    assert [e["gno"] for e in resumed] == [e["gno"] for e in gtids[len(half):]]
