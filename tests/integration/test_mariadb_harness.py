"""The local MariaDB harness: servers start privately, log rows in ROW format, run side by side, and
leave no process or temporary datadir behind."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ingester.devstack import MariaDBServer, free_tcp_port
from tests.harness.servers import fresh_database

pytestmark = pytest.mark.integration

BINLOG_MAGIC = b"\xfebin"


def test_rows_reach_binlog_files(mariadb: MariaDBServer) -> None:
    with mariadb.connect() as conn:
        fresh_database(conn, "harness_rows")
    mariadb.execute("CREATE TABLE harness_rows.t (id INT PRIMARY KEY, name VARCHAR(20))")
    mariadb.execute("INSERT INTO harness_rows.t VALUES (1, 'alpha'), (2, 'beta'), (3, 'gamma')")
    mariadb.flush_logs()

    files = mariadb.binlog_files()
    assert len(files) >= 2
    for path in files:
        assert path.parent == mariadb.binlog_dir
        assert path.read_bytes()[:4] == BINLOG_MAGIC, path
    verbose = "".join(
        subprocess.run(
            ["mariadb-binlog", "--no-defaults", "--verbose", str(path)], capture_output=True, check=True
        ).stdout.decode(errors="replace")  # the session's server also holds other tests' binary rows
        for path in files
    )
    assert verbose.count("### INSERT INTO `harness_rows`.`t`") == 3
    for row in ("@1=1\n###   @2='alpha'", "@1=2\n###   @2='beta'", "@1=3\n###   @2='gamma'"):
        assert row in verbose


def test_settings_reach_the_server(mariadb: MariaDBServer) -> None:
    [row] = mariadb.execute(
        "SELECT @@binlog_format, @@binlog_row_metadata, @@binlog_checksum, @@binlog_row_image,"
        " @@character_set_server, @@collation_server, @@max_allowed_packet"
    )
    assert row == ("ROW", "FULL", "CRC32", "FULL", "utf8mb4", "utf8mb4_general_ci", 1 << 30)
    assert mariadb.url == f"mysql://root@127.0.0.1:{mariadb.port}?tls=disabled"
    assert mariadb.current_binlog_position().file == mariadb.binlog_files()[-1].name


def test_replication_account_can_read_the_binlog(mariadb: MariaDBServer) -> None:
    with mariadb.connect(user=mariadb.replication_user, password=mariadb.replication_password) as conn:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            assert cur.fetchall()


def test_second_server_runs_beside_the_shared_one(
    mariadb: MariaDBServer, make_mariadb: Callable[..., MariaDBServer]
) -> None:
    other = make_mariadb(binlog_row_metadata="MINIMAL", binlog_checksum="NONE", server_id=2)
    assert other.port != mariadb.port
    assert other.datadir != mariadb.datadir
    assert other.execute("SELECT @@binlog_row_metadata, @@binlog_checksum, @@server_id") == [("MINIMAL", "NONE", 2)]
    assert mariadb.execute("SELECT @@binlog_row_metadata, @@binlog_checksum") == [("FULL", "CRC32")]


def test_close_ends_the_process_and_removes_the_temporary_datadir() -> None:
    with MariaDBServer() as server:
        datadir = server.datadir
        pid = int((datadir / "mariadbd.pid").read_text())
        assert Path(f"/proc/{pid}").exists()
    assert not Path(f"/proc/{pid}").exists()
    assert not datadir.exists()


def test_persistent_datadir_restarts_and_is_stoppable_from_another_process(tmp_path: Path) -> None:
    """The `binlake devstack up|down|status` pattern: a fixed datadir and port, a detached server."""
    datadir, port = tmp_path / "db", free_tcp_port()
    up = MariaDBServer(datadir=datadir, port=port).start(detach=True)
    try:
        up.execute("CREATE DATABASE kept")
        up.execute("CREATE TABLE kept.t (id INT)")
        up.execute("INSERT INTO kept.t VALUES (42)")
        status = MariaDBServer(datadir=datadir, port=port)
        assert status.is_running()
        with pytest.raises(RuntimeError, match="already runs"):
            status.start()
        status.stop()
        assert not up.is_running()
    finally:
        up.stop()

    again = MariaDBServer(datadir=datadir, port=port, binlog_row_metadata="MINIMAL")
    with again:
        assert again.execute("SELECT id FROM kept.t") == [(42,)]
        assert again.execute("SELECT @@binlog_row_metadata") == [("MINIMAL",)]
        assert [p.name for p in again.binlog_files()][:2] == ["binlog.000001", "binlog.000002"]
    assert datadir.exists()
    assert not again.is_running()
