"""`binlake doctor` on real servers: ready, least-privilege, and misconfigured."""

from __future__ import annotations

import pytest

from ingester.cli.main import main

pytestmark = pytest.mark.integration


def _doctor(url: str, capsys, *extra: str) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["doctor", "--source", url, *extra])
    return code, capsys.readouterr().out.splitlines()


def test_ready_server_and_least_privilege_user(mariadb, capsys) -> None:
    code, lines = _doctor(mariadb.url, capsys)
    assert code == 0 and lines[-1].startswith("ready:")
    assert any(line.startswith("warn privileges: the user has ALL PRIVILEGES") for line in lines)
    url = f"mysql://{mariadb.replication_user}:{mariadb.replication_password}@127.0.0.1:{mariadb.port}?tls=disabled"
    code, lines = _doctor(url, capsys)
    assert code == 0, lines
    assert "ok   privileges: replication and SELECT granted" in lines
    assert lines[-1] == f"ready: mysql://{mariadb.replication_user}@127.0.0.1:{mariadb.port}"  # no password


def test_statement_format_and_minimal_metadata_are_reported(make_mariadb, capsys) -> None:
    server = make_mariadb(binlog_row_metadata="MINIMAL", options={"binlog_format": "STATEMENT"})
    code, lines = _doctor(server.url, capsys, "--server-id", "1")
    assert code == 1 and lines[-1].startswith("NOT READY")
    text = "\n".join(lines)
    assert "FAIL binlog_format: STATEMENT: set binlog_format=ROW" in text
    assert "warn binlog_row_metadata: MINIMAL" in text
    assert "FAIL server_id: 1 is already used by the server itself" in text
