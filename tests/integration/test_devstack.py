"""`binlake devstack up|status|down` with its own data directory and ports."""

from __future__ import annotations

import pytest
from pyarrow import fs

from ingester.cli.main import main
from ingester.devstack import free_tcp_port

pytestmark = pytest.mark.integration


def test_up_status_down(tmp_path, capsys) -> None:
    ports = ["--mysql-port", str(free_tcp_port()), "--kafka-port", str(free_tcp_port()),
             "--s3-port", str(free_tcp_port())]
    args = ["--dir", str(tmp_path), *ports]
    try:
        assert main(["devstack", "up", "--object-store", *args]) == 0
        up = capsys.readouterr().out.splitlines()
        assert up[0].startswith("MYSQL_URL=mysql://root@127.0.0.1:")
        assert up[1].startswith("KAFKA_BOOTSTRAP=127.0.0.1:")
        aws = dict(line.split("=", 1) for line in up[2:])
        assert sorted(aws) == ["AWS_ACCESS_KEY_ID", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_SECRET_ACCESS_KEY"]
        store = fs.S3FileSystem(access_key=aws["AWS_ACCESS_KEY_ID"], secret_key=aws["AWS_SECRET_ACCESS_KEY"],
                                endpoint_override=aws["AWS_ENDPOINT_URL"], region=aws["AWS_REGION"])
        assert store.get_file_info("lake").type == fs.FileType.Directory  # the bucket, served over S3
        assert main(["devstack", "status", *args]) == 0
        assert capsys.readouterr().out.splitlines() == up
    finally:
        assert main(["devstack", "down", *args]) == 0
    assert capsys.readouterr().out.splitlines() == ["# mariadb: stopped", "# kafka: stopped"]
