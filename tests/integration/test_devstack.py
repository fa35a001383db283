"""`binlake devstack up|status|down` with its own data directory and ports."""

from __future__ import annotations

import pytest

from ingester.cli.main import main
from ingester.devstack import free_tcp_port

pytestmark = pytest.mark.integration


def test_up_status_down(tmp_path, capsys) -> None:
    ports = ["--mysql-port", str(free_tcp_port()), "--kafka-port", str(free_tcp_port())]
    args = ["--dir", str(tmp_path), *ports]
    try:
        assert main(["devstack", "up", *args]) == 0
        up = capsys.readouterr().out.splitlines()
        assert up[0].startswith("MYSQL_URL=mysql://root@127.0.0.1:")
        assert up[1].startswith("KAFKA_BOOTSTRAP=127.0.0.1:")
        assert main(["devstack", "status", *args]) == 0
        assert capsys.readouterr().out.splitlines() == up
    finally:
        assert main(["devstack", "down", *args]) == 0
    assert capsys.readouterr().out.splitlines() == ["# mariadb: stopped", "# kafka: stopped"]
