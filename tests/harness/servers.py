"""Servers for the tests beyond the local MariaDB, and helpers shared by tests that use any server."""

from __future__ import annotations

import functools
from types import TracebackType
from typing import Self

import docker
from pymysql.connections import Connection
from testcontainers.community.mysql import MySqlContainer

from ingester.devstack import SQLServer


@functools.cache
def docker_engine_available() -> bool:
    """Whether a Docker engine answers, asked once through the client testcontainers itself uses."""
    try:
        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (docker.errors.DockerException, OSError):
        return False


def fresh_database(conn: Connection, name: str) -> None:
    """Drop and re-create `name` as utf8mb4, so a test on a shared server starts from nothing."""
    quoted = "`" + name.replace("`", "``") + "`"
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {quoted}")
        cur.execute(f"CREATE DATABASE {quoted} CHARACTER SET utf8mb4")


class MySQL84Server(SQLServer):
    """MySQL 8.4 with GTIDs in a throwaway container, behind the same client helpers as MariaDBServer.

    Its binary logs live inside the container, so tests reach them over the replication protocol only.
    Root authenticates with caching_sha2_password; PyMySQL negotiates TLS by default, which lets that
    handshake finish without the cryptography package.
    """

    user = "root"
    password = "binlake"
    binlog_status_sql = "SHOW BINARY LOG STATUS"

    def __init__(self, image: str = "mysql:8.4") -> None:
        self._container = MySqlContainer(image, username=self.user, password=self.password).with_command(
            [
                "mysqld",
                "--log-bin",
                "--binlog-format=ROW",
                "--binlog-row-metadata=FULL",
                "--gtid-mode=ON",
                "--enforce-gtid-consistency=ON",
            ]
        )

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> Self:
        self._container.start()
        self.host = self._container.get_container_host_ip()
        self.port = self._container.get_exposed_port(3306)
        return self

    def stop(self) -> None:
        self._container.stop()
