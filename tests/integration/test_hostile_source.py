"""The daemon against a hostile source (tests/harness/hostile.py): a real MariaDB behind a man in the
middle that breaks the binlog stream. Broken connections (wrong sequence ids, ERR packets, stalls
past the heartbeat period, a huge announced length, a half-closed socket) are reconnected from the
last checkpoint and converge on the server's rows exactly once; a malformed event or a fatal error
stops the daemon with one line naming the stream, and nothing but the server's rows is published."""

from __future__ import annotations

import collections
import os
import subprocess

import pytest

from ingester.cli.consume import committed_events
from ingester.codec import events as E
from tests.harness import hostile
from tests.harness.daemon import BINLAKE

pytestmark = pytest.mark.integration
ROWS = 120


@pytest.fixture
def source(make_mariadb):
    """A fresh server with ROWS one-row transactions in table h.t (id, payload)."""
    server = make_mariadb()
    server.execute("CREATE DATABASE h CHARACTER SET utf8mb4")
    conn = server.connect("h")
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, payload VARCHAR(40))")
        for i in range(ROWS):
            cur.execute("INSERT INTO t VALUES (%s, %s)", (i, f"row {i} " + "x" * (i % 17)))
    return server


def _run(url: str, kafka, prefix: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "BINLAKE_SOURCE_HEARTBEAT": "1"}
    return subprocess.run([*BINLAKE, "run", "--source", url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix,
                           "--server-id", "4343", "--exit-at-end"], env=env, capture_output=True, text=True,
                          timeout=timeout)


def _published_rows(kafka, prefix: str) -> collections.Counter:
    """(id, payload) of every committed row in Kafka, counted."""
    seen: collections.Counter = collections.Counter()
    for ev in committed_events(kafka.bootstrap, prefix):
        if isinstance(ev, E.RowsEvent) and ev.table == "t":
            seen.update((row["after"]["id"], row["after"]["payload"]) for row in ev.rows)
    return seen


def _server_rows(server) -> collections.Counter:
    return collections.Counter(server.execute("SELECT id, payload FROM h.t"))


def test_broken_connections_reconnect_and_converge_exactly_once(source, kafka) -> None:
    proxy = hostile.HostileProxy(source.port, [
        hostile.after(10, "wrong_sequence", hostile.wrong_sequence),
        hostile.after(20, "err_mid_stream", hostile.err_packet(1053, "Server shutdown in progress")),
        hostile.after(30, "stall", hostile.stall),
        hostile.after(40, "huge_length", hostile.huge_length),
        hostile.after(50, "half_close", hostile.half_close),
    ])
    try:
        done = _run(proxy.url(), kafka, "hostile1")
    finally:
        proxy.close()
    assert done.returncode == 0, done.stderr[-3000:]
    assert proxy.fired == ["wrong_sequence", "err_mid_stream", "stall", "huge_length", "half_close"]
    warnings = [line for line in done.stderr.splitlines() if "reconnecting" in line]
    expected = ["out of step", "server error 1053: Server shutdown in progress", "no data or heartbeat",
                "no data or heartbeat", "closed the replication connection"]
    assert len(warnings) == len(expected), done.stderr[-3000:]
    for line, text in zip(warnings, expected, strict=True):
        assert text in line and f"127.0.0.1:{proxy.port}" in line
    assert _published_rows(kafka, "hostile1") == _server_rows(source)


def test_malformed_event_fails_closed_and_publishes_no_garbage(source, kafka) -> None:
    first = _run(source.url, kafka, "hostile2")  # the first ROWS rows, committed
    assert first.returncode == 0, first.stderr[-3000:]
    conn = source.connect("h")
    with conn.cursor() as cur:
        for i in range(ROWS, 2 * ROWS):
            cur.execute("INSERT INTO t VALUES (%s, %s)", (i, f"row {i}"))
    proxy = hostile.HostileProxy(source.port, [hostile.after(10, "corrupt_row", hostile.corrupt_row)])
    try:
        done = _run(proxy.url(), kafka, "hostile2")
    finally:
        proxy.close()
    assert proxy.fired == ["corrupt_row"]
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("binlake: error: ") and f"127.0.0.1:{proxy.port}/" in last and "at byte" in last
    assert "CRC32 mismatch" in last, last
    published = _published_rows(kafka, "hostile2")
    server = _server_rows(source)
    assert all(n == 1 for n in published.values())
    assert {i for i, _ in published} >= set(range(ROWS))  # what was committed before stays
    assert set(published) < set(server)  # only the server's rows, and not the corrupted transaction's
    # Against the real server, the next start resumes after the last committed row, exactly once.
    again = _run(source.url, kafka, "hostile2")
    assert again.returncode == 0, again.stderr[-3000:]
    assert _published_rows(kafka, "hostile2") == server


def test_fatal_server_error_mid_stream_stops_with_one_line(source, kafka) -> None:
    proxy = hostile.HostileProxy(source.port, [
        hostile.after(20, "purged", hostile.err_packet(1236, "Could not find first log file name in binary log")),
    ])
    try:
        done = _run(proxy.url(), kafka, "hostile3")
    finally:
        proxy.close()
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert "server error 1236" in last and "purged" in last and "Traceback" not in done.stderr
    assert proxy.dumps == 1  # no retry of a fatal error
    published = _published_rows(kafka, "hostile3")
    assert all(n == 1 for n in published.values()) and set(published) <= set(_server_rows(source))
