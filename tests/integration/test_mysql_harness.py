"""The local Oracle MySQL 8.0 harness (ingester/devstack/mysql.py): the official server, started privately with no
Docker, logs rows in ROW format with its own defaults and GTIDs, serves TLS with the certificates it made, grants
the replication account what binlake needs, and leaves no process behind; a persistent directory keeps its data
across restarts (a temporary one goes as MariaDB's does: their PrivateSQLServer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingester.cli.main import main
from ingester.devstack import free_tcp_port
from ingester.devstack.mysql import MYSQL_VERSION, MySQLServer
from tests.harness.servers import fresh_database

pytestmark = pytest.mark.integration


def test_the_server_is_mysql_80_with_its_defaults_and_gtids(mysql80: MySQLServer) -> None:
    [row] = mysql80.execute(
        "SELECT VERSION(), @@version_comment, @@binlog_format, @@binlog_row_metadata, @@binlog_checksum, "
        "@@binlog_row_image, @@gtid_mode, @@enforce_gtid_consistency, @@default_authentication_plugin, "
        "@@character_set_server, @@have_ssl"
    )
    assert row == (MYSQL_VERSION, "MySQL Community Server - GPL", "ROW", "MINIMAL", "CRC32", "FULL", "ON", "ON",
                   "caching_sha2_password", "utf8mb4", "YES")
    assert mysql80.url == (f"mysql://root@127.0.0.1:{mysql80.port}?tls=verify-ca&tls-ca={mysql80.datadir}/ca.pem")


def test_rows_reach_the_binlog_and_the_replication_account_passes_the_doctor(mysql80: MySQLServer, capsys) -> None:
    """The least-privilege account over verified TLS (caching_sha2_password): binlake's own preflight is content."""
    with mysql80.connect() as conn:
        fresh_database(conn, "harness_rows")
    before = mysql80.current_binlog_position()
    mysql80.execute("CREATE TABLE harness_rows.t (id INT PRIMARY KEY, name VARCHAR(20))")
    mysql80.execute("INSERT INTO harness_rows.t VALUES (1, 'alpha')")
    after = mysql80.current_binlog_position()
    assert after.file == mysql80.binlog_files()[-1].name and (after.file, after.position) > tuple(before)
    assert mysql80.binlog_files()[-1].read_bytes()[:4] == b"\xfebin"
    url = mysql80.url.replace("root@", f"{mysql80.replication_user}:{mysql80.replication_password}@")
    capsys.readouterr()
    assert main(["doctor", "--source", url]) == 0
    out = capsys.readouterr().out
    assert "ok   privileges: replication and SELECT granted" in out and "ok   gtid_mode: ON" in out


def test_a_persistent_directory_keeps_its_data_across_restarts(tmp_path: Path) -> None:
    home, port = tmp_path / "my", free_tcp_port()
    with MySQLServer(datadir=home, port=port, gtid_mode=False, binlog_row_metadata="FULL") as server:
        pid = int((home / "mysqld.pid").read_text())
        server.execute("CREATE DATABASE kept")
        server.execute("CREATE TABLE kept.t (id INT)")
        server.execute("INSERT INTO kept.t VALUES (42)")
        assert server.execute("SELECT @@gtid_mode, @@binlog_row_metadata") == [("OFF", "FULL")]
        with pytest.raises(RuntimeError, match="already runs"):
            MySQLServer(datadir=home, port=port).start()
    assert not Path(f"/proc/{pid}").exists() and home.exists()
    with MySQLServer(datadir=home, port=port) as again:
        assert again.execute("SELECT id FROM kept.t") == [(42,)]
        assert again.execute("SELECT @@gtid_mode") == [("ON",)]
    assert home.exists() and not again.is_running()
