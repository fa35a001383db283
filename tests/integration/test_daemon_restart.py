"""Restarts seconds after a stop, on a quiet server: the old registration of the daemon's server_id is still
listed (its dump thread has not written since), yet the new daemon starts; a second live daemon with the
same server_id is refused with one line. Proof of nothing lost or duplicated: the GTIDs in the server's own
binlog files against those in Kafka."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.harness.daemon import BINLAKE, caught_up, gtid_rows, rows_events_per_gtid, start_daemon

pytestmark = pytest.mark.integration
ENV = {**os.environ, "PYTHONPATH": os.getcwd()}


def _registered(server, server_id: int) -> str | None:
    rows = server.execute("SHOW SLAVE HOSTS")
    return next((str(row[1]) for row in rows if int(row[0]) == server_id), None)


RESTARTS = 20  # half after SIGTERM, half after SIGKILL


def test_restart_at_once_after_sigterm_and_kill_on_a_quiet_server(make_mariadb, kafka, tmp_path) -> None:
    server = make_mariadb()
    server.execute("CREATE DATABASE quiet CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE quiet.t (id INT PRIMARY KEY, v INT)")
    prefix, server_id = "quietrestarts", 5151
    log = open(tmp_path / "run.log", "wb")
    proc = start_daemon(server, kafka, prefix, server_id, log)
    stale = 0
    try:
        for i in range(RESTARTS):
            server.execute(f"INSERT INTO quiet.t VALUES ({i}, {i})")  # before the stop: the server is quiet after
            caught_up(server, kafka, prefix, proc)
            proc.send_signal(signal.SIGTERM if i % 2 == 0 else signal.SIGKILL)
            assert proc.wait(timeout=30) in (0, -signal.SIGKILL)
            stale += _registered(server, server_id) is not None  # the stopped daemon's, still listed
            proc = start_daemon(server, kafka, prefix, server_id, log)  # at once
        server.execute("INSERT INTO quiet.t VALUES (1000, 0)")
        caught_up(server, kafka, prefix, proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()
    # The stale registration was there to be told apart (or the test proves nothing) ...
    assert stale >= RESTARTS * 3 // 4, f"the old registration was listed at only {stale} of {RESTARTS} restarts"
    assert "already used" not in (tmp_path / "run.log").read_text()
    # ... and every transaction is in Kafka exactly once.
    seen = gtid_rows(kafka, prefix)
    assert all(n == 1 for n in seen.values()), [k for k, n in seen.items() if n > 1][:5]
    published = {g for g, _ in seen}
    expected = rows_events_per_gtid(server, "quiet")
    assert published == set(expected) and len(expected) == RESTARTS + 1


def test_a_second_live_daemon_with_the_same_server_id_is_refused(make_mariadb, kafka, tmp_path) -> None:
    server = make_mariadb()
    server.execute("CREATE DATABASE two CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE two.t (id INT PRIMARY KEY)")
    first_log = open(tmp_path / "first.log", "wb")
    first = start_daemon(server, kafka, "livefirst", 5252, first_log)
    try:
        server.execute("INSERT INTO two.t VALUES (1)")
        caught_up(server, kafka, "livefirst", first)
        started = time.monotonic()
        second = subprocess.run([*BINLAKE, "run", "--source", server.url, "--kafka", kafka.bootstrap,
                                 "--topic-prefix", "livesecond", "--server-id", "5252"], env=ENV, capture_output=True,
                                text=True, timeout=120)
        waited = time.monotonic() - started
        assert second.returncode == 2
        errors = [line for line in second.stderr.splitlines() if "server_id 5252" in line and "running" in line]
        assert len(errors) == 1, second.stderr
        assert "server_id 5252 is in use by a running binlake daemon (connection" in errors[0]
        assert waited >= 15  # it waited for the first to stop (a rolling restart's overlap), then gave up
        # The first never noticed; the doctor names it too.
        server.execute("INSERT INTO two.t VALUES (2)")
        caught_up(server, kafka, "livefirst", first)
        doctor = subprocess.run([*BINLAKE, "doctor", "--source", server.url, "--server-id", "5252"], env=ENV,
                                capture_output=True, text=True, timeout=60)
        assert doctor.returncode == 1 and "FAIL server_id: 5252 is in use by a running binlake daemon" in doctor.stdout
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=30)
        first_log.close()
    # Stopped: its registration may still be listed, and is known to be a stale one of binlake's.
    doctor = subprocess.run([*BINLAKE, "doctor", "--source", server.url, "--server-id", "5252"], env=ENV,
                            capture_output=True, text=True, timeout=60)
    assert "ok   server_id: 5252 " in doctor.stdout, doctor.stdout
